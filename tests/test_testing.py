"""``tidu.testing``: the checkers pass right rules and catch wrong ones, naming what is wrong.

The op set here is NumPy-backed (so it runs on Python numbers, NumPy scalars
and arrays) and holds right rules next to deliberately wrong ones: a JVP off by
a factor 2, a JVP wrong for one input slot or one output slot only, a JVP wrong
only when both inputs are active, wrong transposes (a factor, a wrong shape, a
transpose that reads the tangent it should be linear in), a JVP of the wrong shape,
JVPs that return symbolic zeros, and rules that emit ops without rules of their
own (caught by ``order=2``, or at first order when the op is transposed).

The checkers also refuse to pass vacuously (``CheckUsageError`` when nothing
would be compared) and report what they compared (``CheckReport``).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

import numpy as np
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from tidu import ADRuleError, ADRuleKind, Primitive, TiduError, linearize
from tidu.errors import NotEvaluableError
from tidu.graph import (
    PRIMARY,
    EvaluableGraphOperation,
    External,
    GraphBuilder,
    Input,
    Linearized,
    Local,
    resolve,
)
from tidu.testing import (
    CheckFailure,
    CheckReport,
    CheckUsageError,
    check_batch,
    check_jvp,
    check_primitive,
    check_transpose,
)

LIN = Linearized((True,))
LIN_TF = Linearized((True, False))
LIN_FT = Linearized((False, True))
LIN_TT = Linearized((True, True))

EVAL_DTYPES: list = []     # dtypes Op.SIN saw in eval (float32 must stay float32)
CTX_SEEN: list = []        # contexts Op.CTX_SPY's rules and eval saw


def emit(b, op, inputs, role=PRIMARY) -> int:
    return b.add_primitive(op, inputs, role)[0]


def mask(role) -> tuple:
    assert role is not PRIMARY
    return role.active_mask


class Op(Primitive, EvaluableGraphOperation, enum.Enum):
    """Right rules (first block) and deliberately wrong ones (second block)."""

    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    NEG = "neg"
    SIN = "sin"
    COS = "cos"
    SINCOS = "sincos"
    CONJ = "conj"
    REAL = "real"
    SCALE3 = "scale3"              # 3 x, linear
    CTX_SPY = "ctx_spy"            # x; records the ctx its rules and eval see

    SIN2 = "sin2"                  # JVP off by a factor 2
    MUL_BAD1 = "mul_bad1"          # JVP wrong in input slot 1 only
    MUL_BAD_BOTH = "mul_bad_both"  # JVP right per input, wrong when both are active
    SINCOS_BAD = "sincos_bad"      # JVP of output slot 1 has the wrong sign
    SCALE3_BAD = "scale3_bad"      # 3 x, transposed as 2 ct
    LEAKY = "leaky"                # 3 x, transpose multiplies by the tangent it reads
    JVP_SHAPE_BAD = "jvp_shape"    # x elementwise, JVP returns the sum of the tangent
    SIN_NONE = "sin_none"          # JVP a symbolic zero: "no derivative"
    MUL_NONE1 = "mul_none1"        # JVP drops input slot 1's tangent

    # ops whose rules emit ops without rules (see "rule closure" below)
    TWICE_NO_JVP = "twice_no_jvp"  # 2 x, linear; transpose right, no JVP rule
    TWICE_NO_T = "twice_no_t"      # 2 x, linear; JVP right, no transpose rule
    TWICE_T_EMITS = "twice_t_emits"  # 2 x, linear; its transpose emits TWICE_NO_JVP
    SQUARE_A = "square_a"          # x^2; JVP emits TWICE_NO_JVP(x) * t
    SQUARE_B = "square_b"          # x^2; JVP emits TWICE_NO_T(x t)
    SQUARE_C = "square_c"          # x^2; JVP emits Opaque(x) * t, and Opaque has no eval
    SQUARE_D = "square_d"          # x^2; JVP emits TWICE_T_EMITS(x t)
    NEG_NO_T = "neg_no_t"          # -x, linear; JVP right, no transpose rule
    SUB_B = "sub_b"                # x - y; JVP emits NEG_NO_T only when y alone has a tangent
    THREE_SQ = "three_sq"          # 3 x^2 with a wrong JVP (3 x t, not 6 x t)
    CUBE = "cube"                  # x^3; JVP right, but emits THREE_SQ

    @classmethod
    def add(cls) -> "Op":
        return cls.ADD

    def input_count(self) -> int:
        return 2 if self in _BINARY else 1

    def output_count(self) -> int:
        return 2 if self in (Op.SINCOS, Op.SINCOS_BAD) else 1

    # a missing table entry means "no such rule": Primitive's defaults raise ADRuleError

    def eval(self, ctx, xs):
        if self is Op.SIN:
            EVAL_DTYPES.append(np.asarray(xs[0]).dtype)
        if self is Op.CTX_SPY:
            CTX_SEEN.append(("eval", ctx))
        return _EVAL[self](*xs)

    def jvp_rule(self, b, xs, outs, ts, ctx):
        if self is Op.CTX_SPY:
            CTX_SEEN.append(("jvp", ctx))
        if self not in _JVP:
            return super().jvp_rule(b, xs, outs, ts, ctx)
        return _JVP[self](b, xs, outs, ts)

    def transpose_rule(self, b, cts, inputs, role, ctx):
        if self is Op.CTX_SPY:
            CTX_SEEN.append(("transpose", ctx))
        if self not in _TRANSPOSE:
            return super().transpose_rule(b, cts, inputs, role, ctx)
        return _TRANSPOSE[self](b, cts, inputs, role)


_BINARY = {Op.ADD, Op.SUB, Op.MUL, Op.MUL_BAD1, Op.MUL_BAD_BOTH, Op.MUL_NONE1, Op.SUB_B}

_EVAL = {
    Op.ADD: lambda a, b: [a + b],
    Op.SUB: lambda a, b: [a - b],
    Op.MUL: lambda a, b: [a * b],
    Op.NEG: lambda a: [-a],
    Op.SIN: lambda a: [np.sin(a)],
    Op.COS: lambda a: [np.cos(a)],
    Op.SINCOS: lambda a: [np.sin(a), np.cos(a)],
    Op.CONJ: lambda a: [np.conj(a)],
    Op.REAL: lambda a: [np.real(a)],
    Op.SCALE3: lambda a: [3 * a],
    Op.CTX_SPY: lambda a: [a],
    Op.SIN2: lambda a: [np.sin(a)],
    Op.MUL_BAD1: lambda a, b: [a * b],
    Op.MUL_BAD_BOTH: lambda a, b: [a * b],
    Op.SINCOS_BAD: lambda a: [np.sin(a), np.cos(a)],
    Op.SCALE3_BAD: lambda a: [3 * a],
    Op.LEAKY: lambda a: [3 * a],
    Op.JVP_SHAPE_BAD: lambda a: [a * 1.0],
    Op.SIN_NONE: lambda a: [np.sin(a)],
    Op.MUL_NONE1: lambda a, b: [a * b],
    Op.TWICE_NO_JVP: lambda a: [2 * a],
    Op.TWICE_NO_T: lambda a: [2 * a],
    Op.TWICE_T_EMITS: lambda a: [2 * a],
    Op.SQUARE_A: lambda a: [a * a],
    Op.SQUARE_B: lambda a: [a * a],
    Op.SQUARE_C: lambda a: [a * a],
    Op.SQUARE_D: lambda a: [a * a],
    Op.NEG_NO_T: lambda a: [-a],
    Op.SUB_B: lambda a, b: [a - b],
    Op.THREE_SQ: lambda a: [3 * a * a],
    Op.CUBE: lambda a: [a * a * a],
}


def _linear_self(op):
    """The JVP of a linear one-input op: the op itself on the tangent."""
    return lambda b, xs, outs, ts: [emit(b, op, [Local(ts[0])], LIN)]


def _mul_jvp(slot1_factor=1.0, both_op=Op.ADD):
    def jvp(b, xs, outs, ts):
        x, y = xs
        tx, ty = ts
        terms = []
        if tx is not None:
            terms.append(emit(b, Op.MUL, [Local(tx), External(y)], LIN_TF))
        if ty is not None:
            term = emit(b, Op.MUL, [External(x), Local(ty)], LIN_FT)
            if slot1_factor != 1.0:
                term = emit(b, Op.ADD, [Local(term), Local(term)], LIN_TT)
            terms.append(term)
        if len(terms) == 1:
            return terms
        return [emit(b, both_op, [Local(terms[0]), Local(terms[1])], LIN_TT)]
    return jvp


def _sin_jvp(b, xs, outs, ts):
    cos_x = emit(b, Op.COS, [External(xs[0])])
    return [emit(b, Op.MUL, [Local(ts[0]), Local(cos_x)], LIN_TF)]


def _sin2_jvp(b, xs, outs, ts):
    [d] = _sin_jvp(b, xs, outs, ts)
    return [emit(b, Op.ADD, [Local(d), Local(d)], LIN_TT)]


def _cos_jvp(b, xs, outs, ts):
    sin_x = emit(b, Op.SIN, [External(xs[0])])
    scaled = emit(b, Op.MUL, [Local(ts[0]), Local(sin_x)], LIN_TF)
    return [emit(b, Op.NEG, [Local(scaled)], LIN)]


def _sincos_jvp(bad=False):
    def jvp(b, xs, outs, ts):
        sin_x, cos_x = outs
        d_sin = emit(b, Op.MUL, [Local(ts[0]), External(cos_x)], LIN_TF)
        d_cos = emit(b, Op.MUL, [Local(ts[0]), External(sin_x)], LIN_TF)
        return [d_sin, d_cos if bad else emit(b, Op.NEG, [Local(d_cos)], LIN)]
    return jvp


def _jvp_shape_bad(b, xs, outs, ts):
    return [emit(b, Sum(np.shape(outs[0])), [Local(ts[0])], LIN)]


def _mul_by_tangent(b, ts, factor: int) -> int:
    """``t * factor``, the JVP of an op with derivative ``factor`` (a value id)."""
    return emit(b, Op.MUL, [Local(ts[0]), Local(factor)], LIN_TF)


def _sub_b_jvp(b, xs, outs, ts):
    tx, ty = ts
    if tx is None:
        return [emit(b, Op.NEG_NO_T, [Local(ty)], LIN)]
    if ty is None:
        return [tx]
    return [emit(b, Op.SUB, [Local(tx), Local(ty)], LIN_TT)]


_JVP = {
    Op.ADD: lambda b, xs, outs, ts: (
        [ts[0] if ts[1] is None else ts[1]] if None in ts
        else [emit(b, Op.ADD, [Local(ts[0]), Local(ts[1])], LIN_TT)]),
    Op.SUB: lambda b, xs, outs, ts: (
        [ts[0]] if ts[1] is None
        else [emit(b, Op.NEG, [Local(ts[1])], LIN)] if ts[0] is None
        else [emit(b, Op.SUB, [Local(ts[0]), Local(ts[1])], LIN_TT)]),
    Op.MUL: _mul_jvp(),
    Op.NEG: _linear_self(Op.NEG),
    Op.SIN: _sin_jvp,
    Op.COS: _cos_jvp,
    Op.SINCOS: _sincos_jvp(),
    Op.CONJ: _linear_self(Op.CONJ),
    Op.REAL: _linear_self(Op.REAL),
    Op.SCALE3: _linear_self(Op.SCALE3),
    Op.CTX_SPY: _linear_self(Op.CTX_SPY),
    Op.SIN2: _sin2_jvp,
    Op.MUL_BAD1: _mul_jvp(slot1_factor=2.0),
    Op.MUL_BAD_BOTH: _mul_jvp(both_op=Op.SUB),
    Op.SINCOS_BAD: _sincos_jvp(bad=True),
    Op.SCALE3_BAD: _linear_self(Op.SCALE3_BAD),
    Op.LEAKY: _linear_self(Op.LEAKY),
    Op.JVP_SHAPE_BAD: _jvp_shape_bad,
    Op.SIN_NONE: lambda b, xs, outs, ts: [None],
    Op.MUL_NONE1: lambda b, xs, outs, ts: (
        [None] if ts[0] is None else [emit(b, Op.MUL, [Local(ts[0]), External(xs[1])], LIN_TF)]),
    Op.TWICE_NO_T: _linear_self(Op.TWICE_NO_T),
    Op.TWICE_T_EMITS: _linear_self(Op.TWICE_T_EMITS),
    Op.SQUARE_A: lambda b, xs, outs, ts: [
        _mul_by_tangent(b, ts, emit(b, Op.TWICE_NO_JVP, [External(xs[0])]))],
    Op.SQUARE_B: lambda b, xs, outs, ts: [emit(
        b, Op.TWICE_NO_T, [Local(emit(b, Op.MUL, [Local(ts[0]), External(xs[0])], LIN_TF))], LIN)],
    Op.SQUARE_C: lambda b, xs, outs, ts: [
        _mul_by_tangent(b, ts, emit(b, Opaque(), [External(xs[0])]))],
    Op.SQUARE_D: lambda b, xs, outs, ts: [emit(
        b, Op.TWICE_T_EMITS, [Local(emit(b, Op.MUL, [Local(ts[0]), External(xs[0])], LIN_TF))],
        LIN)],
    Op.NEG_NO_T: _linear_self(Op.NEG_NO_T),
    Op.SUB_B: _sub_b_jvp,
    Op.THREE_SQ: lambda b, xs, outs, ts: [       # wrong: 3 x t, not 6 x t
        _mul_by_tangent(b, ts, emit(b, Op.SCALE3, [External(xs[0])]))],
    Op.CUBE: lambda b, xs, outs, ts: [
        _mul_by_tangent(b, ts, emit(b, Op.THREE_SQ, [External(xs[0])]))],
}


def _add_t(b, cts, inputs, role):
    m = mask(role)
    return [cts[0] if m[0] else None, cts[0] if m[1] else None]


def _sub_t(b, cts, inputs, role):
    m = mask(role)
    return [cts[0] if m[0] else None,
            emit(b, Op.NEG, [Local(cts[0])], LIN) if m[1] else None]


def _mul_t(b, cts, inputs, role):
    x, y = inputs
    if mask(role) == (True, False):
        return [emit(b, Op.MUL, [Local(cts[0]), Local(emit(b, Op.CONJ, [y]))], LIN_TF), None]
    return [None, emit(b, Op.MUL, [Local(emit(b, Op.CONJ, [x])), Local(cts[0])], LIN_FT)]


def _self_t(op):
    return lambda b, cts, inputs, role: [emit(b, op, [Local(cts[0])], LIN)]


def _scale3_bad_t(b, cts, inputs, role):
    return [emit(b, Op.ADD, [Local(cts[0]), Local(cts[0])], LIN_TT)]       # 2 ct, not 3 ct


def _leaky_t(b, cts, inputs, role):
    # reads its own input -- the tangent -- so it is not linear in ct alone
    scaled = emit(b, Op.SCALE3, [Local(cts[0])], LIN)
    return [emit(b, Op.MUL, [Local(scaled), inputs[0]], LIN_TF)]


_TRANSPOSE = {
    Op.ADD: _add_t,
    Op.SUB: _sub_t,
    Op.MUL: _mul_t,
    Op.NEG: _self_t(Op.NEG),
    Op.CONJ: _self_t(Op.CONJ),
    Op.REAL: lambda b, cts, inputs, role: [cts[0]],
    Op.SCALE3: _self_t(Op.SCALE3),
    Op.CTX_SPY: _self_t(Op.CTX_SPY),
    Op.SCALE3_BAD: _scale3_bad_t,
    Op.LEAKY: _leaky_t,
    Op.JVP_SHAPE_BAD: _self_t(Op.JVP_SHAPE_BAD),
    Op.TWICE_NO_JVP: _self_t(Op.TWICE_NO_JVP),
    Op.TWICE_T_EMITS: _self_t(Op.TWICE_NO_JVP),
}


@dataclass(frozen=True)
class Opaque(Primitive):
    """``2 x`` with rules but no ``eval``: a graph holding it cannot run."""

    @classmethod
    def add(cls):
        return Op.ADD

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def jvp_rule(self, b, xs, outs, ts, ctx):
        return [emit(b, self, [Local(ts[0])], LIN)]

    def transpose_rule(self, b, cts, inputs, role, ctx):
        return [emit(b, self, [Local(cts[0])], LIN)]


class _ShapeOp(Primitive, EvaluableGraphOperation):
    """One input, one output, a shape parameter: what a reduction's rules need to know."""

    __slots__ = ()

    @classmethod
    def add(cls):
        return Op.ADD

    def input_count(self):
        return 1

    def output_count(self):
        return 1


@dataclass(frozen=True)
class Sum(_ShapeOp):
    """The sum of all elements of an array of ``shape`` (a 0-d array).

    ``bad="shape"``: the transpose forgets to broadcast (wrong cotangent shape);
    ``bad="leaky"``: the transpose broadcasts to the shape of its input, which in
    a linear graph is the tangent -- a transposed graph that cannot run without tangents.
    """

    shape: tuple
    bad: str = ""

    def eval(self, ctx, xs):
        return [np.asarray(np.sum(xs[0]))]

    def jvp_rule(self, b, xs, outs, ts, ctx):
        return [emit(b, self, [Local(ts[0])], LIN)]

    def transpose_rule(self, b, cts, inputs, role, ctx):
        if self.bad == "shape":
            return [cts[0]]
        if self.bad == "leaky":
            return [emit(b, Op.MUL, [Local(cts[0]), Local(emit(b, Op.MUL, [inputs[0], inputs[0]]))],
                         LIN_TF)]
        return [emit(b, BroadcastTo(self.shape), [Local(cts[0])], LIN)]


@dataclass(frozen=True)
class BroadcastTo(_ShapeOp):
    """A 0-d array broadcast to ``shape``."""

    shape: tuple

    def eval(self, ctx, xs):
        return [np.broadcast_to(xs[0], self.shape).copy()]

    def jvp_rule(self, b, xs, outs, ts, ctx):
        return [emit(b, self, [Local(ts[0])], LIN)]

    def transpose_rule(self, b, cts, inputs, role, ctx):
        return [emit(b, Sum(self.shape), [Local(cts[0])], LIN)]


def graph_of(op, n_inputs=None, keys=None):
    """A one-op graph of ``op`` on inputs keyed ``keys`` (default ``"x0", "x1", ...``)."""
    n_inputs = op.input_count() if n_inputs is None else n_inputs
    keys = keys or [f"x{i}" for i in range(n_inputs)]
    b = GraphBuilder()
    ids = [b.add_input(k) for k in keys]
    b.set_outputs(b.add_operation(op, [Local(i) for i in ids]))
    return b.build()


NUMBER = r"(-?[0-9.]+(?:e[-+]?[0-9]+)?)"


def expected_and_got(message: str) -> tuple[float, float]:
    match = re.search(rf"expected {NUMBER} .*got {NUMBER} ", message)
    assert match, message
    return float(match.group(1)), float(match.group(2))


# --- the checkers pass right rules -------------------------------------------------


@pytest.mark.parametrize("op, args", [
    (Op.SIN, (0.3,)),
    (Op.SIN, (0.3 - 1.2j,)),
    (Op.COS, (-2.0,)),
    (Op.SINCOS, (0.5 + 0.5j,)),
    (Op.MUL, (1.5, -2.0)),
    (Op.MUL, (1.5 + 1j, -2.0 + 0.5j)),
    (Op.ADD, (1.5, -2.0)),
    (Op.SUB, (1.5j, -2.0 + 1j)),
    (Op.NEG, (4.0,)),
    (Op.CONJ, (4.0 - 3j,)),
    (Op.REAL, (4.0 - 3j,)),
    (Op.SCALE3, (4.0,)),
    (Sum((2, 3)), (np.arange(6.0).reshape(2, 3),)),
    (BroadcastTo((2, 3)), (np.array(1.5),)),
])
def test_right_rules_pass(op, args):
    check_primitive(op, *args, rng=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3)])
def test_numpy_operands(dtype, shape):
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, shape).astype(dtype)
    y = rng.uniform(-2, 2, shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = (x + 1j * rng.uniform(-1, 1, shape)).astype(dtype)
        y = (y + 1j * rng.uniform(-1, 1, shape)).astype(dtype)
    for op, args in [(Op.SIN, (x,)), (Op.SINCOS, (x,)), (Op.MUL, (x, y)), (Sum(shape), (x,)),
                     (Op.CONJ, (x,)), (Op.SUB, (x, y))]:
        check_primitive(op, *args, rng=2)


def test_numpy_scalars():
    check_primitive(Op.SIN, np.float32(0.7), rng=0)
    check_primitive(Op.MUL, np.complex128(1 + 2j), np.complex128(0.5 - 1j), rng=0)


def test_float32_stays_float32():
    EVAL_DTYPES.clear()
    check_primitive(Op.SINCOS, np.linspace(-1, 1, 5, dtype=np.float32), rng=0)
    check_primitive(Op.COS, np.float32(0.5), rng=0)         # its JVP evaluates SIN on x
    assert EVAL_DTYPES and all(d == np.float32 for d in EVAL_DTYPES), EVAL_DTYPES


def test_float32_still_catches_a_factor_two():
    with pytest.raises(CheckFailure, match="SIN2 output 0 wrt input 0"):
        check_primitive(Op.SIN2, np.linspace(-1, 1, 4, dtype=np.float32), rng=0)


def test_check_jvp_on_a_graph_with_given_tangents_and_eps():
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    [s] = b.add_operation(Op.SIN, [Local(x)])
    [p] = b.add_operation(Op.MUL, [Local(s), Local(y)])
    b.set_outputs([p, s])
    g = b.build()
    check_jvp(g, g.output_keys, {"x": 0.4, "y": -1.5}, rng=0)
    check_jvp(g, g.output_keys, {"x": 0.4, "y": -1.5}, {"y": 2.0})
    check_jvp([g], g.output_keys, {"x": 0.4, "y": -1.5}, {"x": 1.0, "y": 2.0}, eps=1e-5)
    check_jvp(resolve(g), g.output_keys, {Input("x"): 0.4, Input("y"): -1.5j})  # Input keys ok


def test_check_transpose_with_given_tangents_and_cotangents():
    g = graph_of(Op.SINCOS, keys=["x"])
    lin = linearize(g, g.output_keys, ["x"])
    check_transpose(g, lin, {"x": 0.3}, rng=0)
    check_transpose(g, lin, {"x": 0.3}, tangents={"x": 2.0}, cotangents=[1.0, -1.0])
    check_transpose(g, lin, {"x": 0.3}, tangents=[2.0], cotangents={1: 0.5})
    check_transpose(g, lin, {"x": 0.3 + 1j}, rng=0)


def test_inactive_outputs_are_checked_as_zero():
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    [s] = b.add_operation(Op.SIN, [Local(y)])         # does not depend on x
    [p] = b.add_operation(Op.MUL, [Local(x), Local(y)])
    b.set_outputs([s, p])
    g = b.build()
    check_jvp(g, g.output_keys, {"x": 0.5, "y": 2.0}, {"x": 1.0})
    lin = linearize(g, g.output_keys, ["x"])
    assert lin.tangent_outputs[0] is None
    check_transpose(g, lin, {"x": 0.5, "y": 2.0}, rng=0)


def test_ctx_reaches_rules_and_eval():
    CTX_SEEN.clear()
    ctx = object()
    check_primitive(Op.CTX_SPY, 1.5, ctx=ctx, rng=0)
    assert {kind for kind, _ in CTX_SEEN} == {"eval", "jvp", "transpose"}
    assert all(seen is ctx for _, seen in CTX_SEEN)


def test_same_rng_same_numbers():
    messages = []
    for _ in range(2):
        with pytest.raises(CheckFailure) as info:
            check_primitive(Op.SIN2, 0.7 + 0.1j, rng=42)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


# --- non-differentiable inputs get no tangent ----------------------------------------


def test_int_inputs_get_no_tangent_but_the_rest_is_checked():
    report = check_primitive(Op.MUL_BAD1, 2.0, 3)   # the wrong slot holds an int: no tangent
    assert report.input_slots == 1 and report.jvp_comparisons == 1
    check_primitive(Op.MUL_BAD1, 2.0, True)
    check_primitive(Op.MUL_BAD1, np.ones(3), np.arange(3))          # an integer array
    check_primitive(Op.MUL_BAD1, np.ones(3), np.array([True, False, True]))
    with pytest.raises(CheckFailure, match="input 1"):
        check_primitive(Op.MUL_BAD1, 2.0, 3.0)


def test_int_keys_get_no_default_tangent_in_check_jvp():
    g = graph_of(Op.MUL_BAD1, keys=["x", "n"])
    assert check_jvp(g, g.output_keys, {"x": 0.5, "n": 4}).input_slots == 1
    with pytest.raises(CheckFailure, match="input 'n'"):
        check_jvp(g, g.output_keys, {"x": 0.5, "n": 4.0})


# --- the checkers catch wrong rules, naming op, slot and both numbers ----------------


def test_jvp_off_by_factor_two():
    with pytest.raises(CheckFailure) as info:
        check_primitive(Op.SIN2, 0.3, rng=0)
    message = str(info.value)
    assert "SIN2 output 0 wrt input 0" in message
    expected, got = expected_and_got(message)
    assert got == pytest.approx(2 * expected, rel=1e-6)
    assert isinstance(info.value, AssertionError) and isinstance(info.value, TiduError)


def test_jvp_off_by_factor_two_complex_and_arrays():
    with pytest.raises(CheckFailure, match=r"SIN2 output 0 wrt input 0: expected [-+0-9.e]+j .* got [-+0-9.e]+j "):
        check_primitive(Op.SIN2, 0.3 + 0.2j, rng=0)
    with pytest.raises(CheckFailure, match=r"SIN2 output 0 wrt input 0: .* at index \(1, 0\)"):
        check_primitive(Op.SIN2, np.array([[0.0, 0.0], [0.5, 0.0]]) + np.pi / 2, rng=0)


def test_wrong_jvp_in_one_input_slot_is_named():
    with pytest.raises(CheckFailure) as info:
        check_primitive(Op.MUL_BAD1, 1.5, -2.0, rng=0)
    assert "MUL_BAD1 output 0 wrt input 1:" in str(info.value)
    expected, got = expected_and_got(str(info.value))
    assert got == pytest.approx(2 * expected)


def test_wrong_jvp_only_with_both_inputs_active():
    with pytest.raises(CheckFailure, match="MUL_BAD_BOTH output 0 wrt inputs 0, 1 together"):
        check_primitive(Op.MUL_BAD_BOTH, 1.5, -2.0, rng=0)


def test_wrong_jvp_in_one_output_slot_is_named():
    with pytest.raises(CheckFailure) as info:
        check_primitive(Op.SINCOS_BAD, 0.3, rng=0)
    assert "SINCOS_BAD output 1 wrt input 0:" in str(info.value)
    expected, got = expected_and_got(str(info.value))
    assert got == pytest.approx(-expected)


def test_jvp_of_wrong_shape():
    with pytest.raises(CheckFailure, match=r"JVP_SHAPE_BAD output 0 wrt input 0: the tangent "
                                           r"has shape \(\) but the output has shape \(3,\)"):
        check_primitive(Op.JVP_SHAPE_BAD, np.ones(3), rng=0)


def test_wrong_jvp_inside_a_graph_names_the_graph_output_and_key():
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    [s] = b.add_operation(Op.SIN2, [Local(x)])
    [p] = b.add_operation(Op.MUL, [Local(s), Local(y)])
    b.set_outputs([p])
    g = b.build()
    check_jvp(g, g.output_keys, {"x": 0.4, "y": 2.0}, {"y": 1.0})     # y's path is right
    with pytest.raises(CheckFailure, match=r"MUL output 0 \(graph output 0\) wrt input 'x'"):
        check_jvp(g, g.output_keys, {"x": 0.4, "y": 2.0}, rng=0)


def test_wrong_transpose_factor():
    with pytest.raises(CheckFailure) as info:
        check_primitive(Op.SCALE3_BAD, 0.7, rng=0)
    message = str(info.value)
    assert "transpose of SCALE3_BAD" in message
    assert "SCALE3_BAD output 0 and input 0" in message
    match = re.search(rf"<ct, J t> = {NUMBER} but <J\^T ct, t> = {NUMBER} ", message)
    assert match, message
    assert float(match.group(2)) == pytest.approx(2 / 3 * float(match.group(1)))


def test_wrong_transpose_in_a_linearized_graph():
    # SIN's JVP is right; its linear graph uses SCALE3_BAD, whose transpose is wrong
    b = GraphBuilder()
    x = b.add_input("x")
    [s] = b.add_operation(Op.SCALE3_BAD, [Local(x)])
    [y] = b.add_operation(Op.SIN, [Local(s)])
    b.set_outputs([y])
    g = b.build()
    check_jvp(g, g.output_keys, {"x": 0.2}, rng=0)
    lin = linearize(g, g.output_keys, ["x"])
    with pytest.raises(CheckFailure, match=r"check_transpose: dot-product test fails for "
                                           r"tangent output 0 .* and input 'x'"):
        check_transpose(g, lin, {"x": 0.2}, rng=0)


def test_transpose_with_wrong_cotangent_shape():
    with pytest.raises(CheckFailure, match=r"transpose of Sum\(.*\): the cotangent of input 0 "
                                           r".* has shape \(\), but the primal has shape \(2, 2\)"):
        check_primitive(Sum((2, 2), bad="shape"), np.ones((2, 2)), rng=0)


def test_transpose_reading_the_tangent():
    with pytest.raises(CheckFailure, match="transpose of LEAKY: the transposed graph reads the "
                                           "tangent of input 0"):
        check_primitive(Op.LEAKY, 0.7, rng=0)
    with pytest.raises(CheckFailure, match="the transposed graph reads the tangent of input 0"):
        check_primitive(Sum((3,), bad="leaky"), np.ones(3), rng=0)


def test_complex_cotangent_of_a_real_array_is_caught():
    # Op.MUL's transpose does not project ct * conj(y) back to the reals for a real x
    x = np.array([0.5, 1.5])
    y = np.array([1 + 1j, 2 - 1j])
    with pytest.raises(CheckFailure, match=r"transpose of MUL: the cotangent of input 0 .* is "
                                           r"complex \(complex128\), but the primal is real"):
        check_primitive(Op.MUL, x, y, rng=0)


def test_real_cotangent_of_a_complex_array_is_caught():
    # REAL's transpose passes ct through: a real cotangent for a complex array input
    with pytest.raises(CheckFailure, match=r"cotangent of input 0 .* is real \(float64\), but "
                                           r"the primal is complex"):
        check_primitive(Op.REAL, np.array([1 + 2j, 3 - 1j]), rng=0)
    check_primitive(Op.REAL, 1 + 2j, rng=0)       # a Python float is a fine complex cotangent


def test_complex_cotangent_of_a_real_scalar_is_caught():
    with pytest.raises(CheckFailure, match=r"the cotangent of input 0 .* is complex .* but the "
                                           r"primal is real \(0.5\)"):
        check_primitive(Op.MUL, 0.5, 1 + 1j, rng=0)


def test_bad_arguments():
    assert issubclass(CheckUsageError, TiduError)
    with pytest.raises(CheckUsageError, match="SIN takes 1 inputs, got 2"):
        check_primitive(Op.SIN, 1.0, 2.0)
    g = graph_of(Op.SIN, keys=["x"])
    with pytest.raises(CheckUsageError, match="'z', which has no primal value"):
        check_jvp(g, g.output_keys, {"x": 1.0}, {"z": 1.0})
    with pytest.raises(CheckUsageError, match="complex tangent"):
        check_jvp(g, g.output_keys, {"x": 1.0}, {"x": 1j})
    with pytest.raises(CheckUsageError, match="shape"):
        check_jvp(g, g.output_keys, {"x": np.ones(2)}, {"x": np.ones(3)})
    lin = linearize(g, g.output_keys, ["x"])
    with pytest.raises(CheckUsageError, match="no primal value for 'x'"):
        check_transpose(g, lin, {"y": 1.0})
    with pytest.raises(CheckUsageError, match="2 cotangents for 1 tangent outputs"):
        check_transpose(g, lin, {"x": 1.0}, cotangents=[1.0, 2.0])
    with pytest.raises(CheckUsageError, match="1 tangents for 2"):
        check_transpose(g, linearize(graph_of(Op.MUL), graph_of(Op.MUL).output_keys,
                                     ["x0", "x1"]), {"x0": 1.0, "x1": 2.0}, tangents=[1.0])


def test_usage_error_has_one_builtin_base():
    builtin = [c for c in CheckUsageError.__mro__ if c.__module__ == "builtins"]
    assert builtin == [ValueError, Exception, BaseException, object]
    assert str(CheckUsageError("a 'quoted' key")) == "a 'quoted' key"      # not KeyError's repr


# --- checks that would compare nothing raise CheckUsageError ------------------------


@pytest.mark.parametrize("args", [
    (3,), (True,), (np.int64(3),), (np.arange(3),), (np.array([True, False]),),
], ids=["int", "bool", "numpy-int", "int-array", "bool-array"])
def test_check_primitive_with_nothing_differentiable_raises(args):
    with pytest.raises(CheckUsageError, match=r"no input of SIN2 is differentiable \(got .+\)"):
        check_primitive(Op.SIN2, *args)          # SIN2's JVP is wrong: a pass would be vacuous
    with pytest.raises(CheckUsageError, match="no input of MUL_BAD1 is differentiable"):
        check_primitive(Op.MUL_BAD1, *(args * 2))


def test_check_primitive_refuses_other_misuse():
    with pytest.raises(CheckUsageError, match="order must be 1 or 2, got 3"):
        check_primitive(Op.SIN, 1.0, order=3)
    with pytest.raises(CheckUsageError, match="order must be 1 or 2, got True"):
        check_primitive(Op.SIN, 1.0, order=True)
    with pytest.raises(CheckUsageError, match="Opaque.* is not an EvaluableGraphOperation"):
        check_primitive(Opaque(), 1.0)
    with pytest.raises(CheckUsageError, match="SIN takes 1 inputs, got 0"):
        check_primitive(Op.SIN)
    check_primitive(Op.SIN, 1.0)                 # usable afterwards


def two_output_graph():
    """Outputs ``sin(y)`` and ``x * y``; input ``u`` is declared and never read."""
    b = GraphBuilder()
    x, y, _ = b.add_input("x"), b.add_input("y"), b.add_input("u")
    [s] = b.add_operation(Op.SIN, [Local(y)])
    [p] = b.add_operation(Op.MUL, [Local(x), Local(y)])
    b.set_outputs([s, p])
    return b.build()


def test_check_jvp_refuses_to_check_nothing():
    g = two_output_graph()
    [s, p] = g.output_keys
    primals = {"x": 0.5, "y": 2.0, "u": 1.0}
    with pytest.raises(CheckUsageError, match="no outputs given"):
        check_jvp(g, [], primals)
    with pytest.raises(CheckUsageError, match="an empty mapping of tangents"):
        check_jvp(g, g.output_keys, primals, {})
    with pytest.raises(CheckUsageError, match="tangent given for 'w', which is not an input"):
        check_jvp(g, g.output_keys, {**primals, "w": 1.0}, {"w": 1.0})
    with pytest.raises(CheckUsageError, match=r"no output reads any of the inputs given "
                                              r"tangents \('u'\)"):
        check_jvp(g, g.output_keys, primals, {"u": 1.0})
    with pytest.raises(CheckUsageError, match=r"no output reads any of the inputs given "
                                              r"tangents \('x'\)"):
        check_jvp(g, [s], primals, {"x": 1.0})   # sin(y) does not read x
    with pytest.raises(CheckUsageError, match="tangent given for 'x', whose primal 2 .*int.* is "
                                              "not differentiable"):
        check_jvp(g, g.output_keys, {**primals, "x": 2}, {"x": 1.0, "y": 1.0})
    with pytest.raises(CheckUsageError, match="nothing to differentiate: .*'x' = 2 \\(int\\)"):
        check_jvp(g, [p], {"x": 2, "y": 3, "u": 1.0})    # u is a float, but p does not read it
    with pytest.raises(CheckUsageError, match="no primal value for 'y'"):
        check_jvp(g, g.output_keys, {"x": 0.5})
    with pytest.raises(CheckUsageError, match="output 'p' is not a value of the graphs"):
        check_jvp(g, ["p"], primals)
    other = graph_of(Op.COS, keys=["x"])
    with pytest.raises(CheckUsageError, match="is not a value of the graphs given"):
        check_jvp(g, other.output_keys, primals)
    # one read input among unread ones is a real check (the unread one's JVP must be zero)
    report = check_jvp(g, g.output_keys, primals, {"x": 1.0, "u": 1.0})
    assert report.input_slots == 2 and report.jvp_comparisons == 2 * 3


def test_check_transpose_refuses_to_check_nothing():
    g = two_output_graph()
    primals = {"x": 0.5, "y": 2.0, "u": 1.0}
    with pytest.raises(CheckUsageError, match="expected a LinearizedGraph .* got Graph"):
        check_transpose(g, g, primals)
    with pytest.raises(CheckUsageError, match="no tangent inputs"):
        check_transpose(g, linearize(g, g.output_keys, []), primals)
    unread = linearize(g, g.output_keys, ["u"])
    assert unread.tangent_outputs == [None, None]
    with pytest.raises(CheckUsageError, match="every tangent output .* is a symbolic zero"):
        check_transpose(g, unread, primals)
    lin = linearize(g, g.output_keys, ["x"])           # sin(y) has a zero tangent
    assert lin.tangent_outputs[0] is None
    with pytest.raises(CheckUsageError, match="tangent given for 'y', which is not a tangent "
                                              "input"):
        check_transpose(g, lin, primals, tangents={"y": 1.0})
    with pytest.raises(CheckUsageError, match="cotangent given for tangent output 0, which is "
                                              "not a non-zero"):
        check_transpose(g, lin, primals, cotangents={0: 1.0})
    with pytest.raises(CheckUsageError, match="cotangent given for tangent output 5"):
        check_transpose(g, lin, primals, cotangents={5: 1.0})
    with pytest.raises(CheckUsageError, match="cotangent given for tangent output 0, which is "
                                              "a symbolic zero"):
        check_transpose(g, lin, primals, cotangents=[1.0, 2.0])
    with pytest.raises(CheckUsageError, match="the tangent of 'x' has shape \\(2,\\)"):
        check_transpose(g, lin, primals, tangents={"x": np.ones(2)})
    with pytest.raises(CheckUsageError, match="complex tangent given for the real input 'x'"):
        check_transpose(g, lin, primals, tangents=[1j])
    report = check_transpose(g, lin, primals, cotangents=[None, 2.0])
    assert report.output_slots == 1 and report.dot_products == 1


# --- a JVP that drops the derivative is caught, not passed -----------------------------


def test_a_jvp_of_symbolic_zeros_is_caught():
    with pytest.raises(CheckFailure) as info:
        check_primitive(Op.SIN_NONE, 0.3, rng=0)
    expected, got = expected_and_got(str(info.value))
    assert "SIN_NONE output 0 wrt input 0" in str(info.value)
    assert got == 0 and abs(expected) > 0.01
    with pytest.raises(CheckFailure, match="SIN_NONE output 0 wrt input 0"):
        check_primitive(Op.SIN_NONE, np.array([0.1, 1.0]) + 0.5j, rng=0)
    with pytest.raises(CheckFailure, match="MUL_NONE1 output 0 wrt input 1"):
        check_primitive(Op.MUL_NONE1, 1.5, -2.0, rng=0)
    g = graph_of(Op.SIN_NONE, keys=["x"])
    with pytest.raises(CheckFailure, match="SIN_NONE output 0 .* wrt input 'x'") as info:
        check_jvp(g, g.output_keys, {"x": 0.3}, {"x": 1.0})
    expected, got = expected_and_got(str(info.value))
    assert got == 0 and expected == pytest.approx(np.cos(0.3), rel=1e-6)


def test_a_zero_derivative_is_still_checked():
    # SIN at pi/2, where cos is 0: the JVP is compared with a zero finite difference
    report = check_primitive(Op.SIN, np.pi / 2, rng=0)
    assert report.jvp_comparisons == 1 and report.worst_error <= report.tolerance


# --- reports -----------------------------------------------------------------------


def test_reports_of_check_primitive():
    report = check_primitive(Op.SIN, 0.3, rng=0)
    assert isinstance(report, CheckReport)
    assert (report.ops, report.output_slots, report.input_slots, report.points, report.order) \
        == (("SIN",), 1, 1, 1, 1)
    assert (report.jvp_comparisons, report.elements, report.dot_products) == (1, 1, 1)
    assert 0 <= report.worst_error <= report.tolerance
    assert report.worst_at in ("SIN output 0 wrt input 0",
                               "transpose of SIN, SIN output 0 and input 0")
    # two inputs: each alone and both, for the JVP; transposes of the linearizations wrt
    # input 0, input 1 (one test each) and both (a test per input and one for both)
    report = check_primitive(Op.MUL, np.ones((2, 3)), np.full((2, 3), 2.0), rng=0)
    assert (report.input_slots, report.jvp_comparisons, report.elements,
            report.dot_products) == (2, 3, 18, 5)
    # two outputs: the transposes of the linearizations of each output alone and both
    report = check_primitive(Op.SINCOS, 0.5, rng=0)
    assert (report.output_slots, report.jvp_comparisons, report.dot_products) == (2, 2, 1 + 1 + 3)
    # an int input adds no slot and no comparison
    assert check_primitive(Op.MUL, 1.5, 2).input_slots == 1


def test_report_of_empty_arrays_says_no_numbers_were_compared():
    report = check_primitive(Op.SIN, np.ones((0, 3)), rng=0)
    assert report.jvp_comparisons == 1 and report.elements == 0
    assert report.worst_at == "" or report.worst_at.startswith("transpose")


def test_reports_of_check_jvp_and_check_transpose():
    g = two_output_graph()
    primals = {"x": 0.5, "y": 2.0, "u": 1.0}
    report = check_jvp(g, g.output_keys, primals, rng=0)          # u is not read: no tangent
    assert (report.ops, report.output_slots, report.input_slots, report.points) == \
        (("SIN", "MUL"), 2, 2, 1)
    assert report.jvp_comparisons == 2 * 3 and report.elements == 6
    assert check_jvp(g, g.output_keys, primals, {"x": 1.0}).ops == ("MUL",)
    lin = linearize(g, g.output_keys, ["x", "y"])
    report = check_transpose(g, lin, primals, rng=0)
    assert report.ops == ("MUL", "ADD")           # COS is PRIMARY work: it is not transposed
    assert (report.output_slots, report.input_slots, report.dot_products) == (2, 2, 2 * 2 + 1)
    assert report.worst_error <= report.tolerance and "check_transpose" in report.worst_at


def test_report_is_frozen_and_readable():
    report = check_primitive(Op.MUL, 1.5, -2.0, rng=0)
    with pytest.raises(AttributeError):
        report.points = 5
    text = str(report)
    assert text.startswith("checked MUL at 1 point: 1 output slot, 2 input slots; "
                           "3 JVP comparisons (3 numbers) with finite differences, "
                           "5 dot-product tests; worst |error| ")
    assert f"(tolerance {report.tolerance:.3g}) at {report.worst_at}" in text
    assert "to order 2 at 3 points" in str(check_primitive(Op.MUL, 1.5, -2.0, order=2, rng=0))


def test_worst_error_is_the_one_closest_to_failing():
    # MUL_BAD1's slot-1 JVP is off by 2x: loosen the tolerances until it passes, and the
    # report's worst comparison is that one
    report = check_primitive(Op.MUL_BAD1, 1.5, -2.0, rng=0, rtol=2.0, atol=0.0)
    assert report.worst_at == "MUL_BAD1 output 0 wrt input 1"
    # |2 x t - x t| against 2 |x t| (plus the small finite-difference allowance)
    assert report.worst_error == pytest.approx(report.tolerance / 2, rel=1e-3)


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(0, 3), max_size=2).map(tuple),
       kinds=st.tuples(st.sampled_from(["f", "i", "c"]), st.sampled_from(["f", "i", "c"])),
       seed=st.integers(0, 2**16))
def test_report_counts_follow_the_inputs(shape, kinds, seed):
    rng = np.random.default_rng(seed)
    if kinds[0] != "f" and kinds[1] != "f" and "c" not in kinds:
        kinds = ("f", kinds[1])
    make = {"f": lambda: rng.uniform(-2, 2, shape),
            "i": lambda: rng.integers(-3, 3, shape),
            "c": lambda: rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)}
    x, y = make[kinds[0]](), make[kinds[1]]()
    if "c" in kinds:                             # MUL's transpose is complex-correct for
        x, y = x.astype(complex), y.astype(complex)   # complex operands of one kind
    n = sum(1 for v in (x, y) if v.dtype.kind in "fc")
    report = check_primitive(Op.MUL, x, y, rng=seed)
    size = int(np.prod(shape))
    selections = n + (n > 1)
    assert report.input_slots == n and report.output_slots == 1
    assert report.jvp_comparisons == selections and report.elements == selections * size
    assert report.dot_products == n + (n + 1 if n > 1 else 0)


# --- order 2: the rules' emissions have rules of their own -----------------------------


def test_order_two_catches_an_emitted_op_without_a_jvp_rule():
    check_primitive(Op.SQUARE_A, 0.7, rng=0)                  # first order: fine
    with pytest.raises(ADRuleError) as info:
        check_primitive(Op.SQUARE_A, 0.7, rng=0, order=2)
    error = info.value
    assert (error.op, error.rule) == ("TWICE_NO_JVP", ADRuleKind.JVP)
    assert str(error).startswith("TWICE_NO_JVP has no jvp rule: emitted by the jvp rule of "
                                 "SQUARE_A (found while linearizing the linear graph of SQUARE_A")
    assert "order 2" in str(error)
    assert isinstance(error.__cause__, ADRuleError)


def test_an_emitted_op_without_a_transpose_rule_names_its_emitter():
    with pytest.raises(ADRuleError) as info:
        check_primitive(Op.SQUARE_B, 0.7, rng=0)
    assert (info.value.op, info.value.rule) == ("TWICE_NO_T", ADRuleKind.TRANSPOSE)
    assert "TWICE_NO_T has no transpose rule: emitted by the jvp rule of SQUARE_B" \
        in str(info.value)


def test_an_emitted_op_without_eval_names_its_emitter():
    with pytest.raises(NotEvaluableError, match=r"Opaque\(\) has no eval: it is emitted by the "
                                                r"jvp rule of SQUARE_C"):
        check_primitive(Op.SQUARE_C, 0.7, rng=0)


def test_order_two_names_the_whole_chain_of_emitters():
    # SQUARE_D's JVP emits TWICE_T_EMITS, whose transpose emits TWICE_NO_JVP: forward
    # over reverse needs TWICE_NO_JVP's JVP
    check_primitive(Op.SQUARE_D, 0.7, rng=0)
    with pytest.raises(ADRuleError) as info:
        check_primitive(Op.SQUARE_D, 0.7, rng=0, order=2)
    assert str(info.value).startswith(
        "TWICE_NO_JVP has no jvp rule: emitted by the transpose rule of TWICE_T_EMITS, which "
        "the jvp rule of SQUARE_D emits (found while linearizing the transposed graph of SQUARE_D")


def test_an_op_emitted_for_one_choice_of_zeros_is_transposed_too():
    # SUB_B's JVP emits NEG_NO_T only when y alone has a tangent: the transpose of the
    # linearization wrt both inputs never meets it, the one wrt y alone does
    g = graph_of(Op.SUB_B)
    check_transpose(g, linearize(g, g.output_keys, ["x0", "x1"]), {"x0": 1.0, "x1": 2.0})
    with pytest.raises(ADRuleError, match="NEG_NO_T has no transpose rule: emitted by the jvp "
                                          "rule of SUB_B"):
        check_primitive(Op.SUB_B, 1.0, 2.0, rng=0)


def test_order_two_catches_a_wrong_second_derivative():
    # CUBE's JVP is t * THREE_SQ(x), right; THREE_SQ's own JVP is off by 2
    check_primitive(Op.CUBE, 0.7, rng=0)
    with pytest.raises(CheckFailure) as info:
        check_primitive(Op.CUBE, 0.7, rng=0, order=2)
    message = str(info.value)
    assert message.startswith("tangent of CUBE output 0 wrt input 0:")
    expected, got = expected_and_got(message)
    assert expected != pytest.approx(got, rel=1e-3)


def test_order_two_passes_the_right_rules_here():
    for op, args in [(Op.SIN, (0.3,)), (Op.COS, (0.3 - 1j,)), (Op.SINCOS, (0.5,)),
                     (Op.MUL, (1.5 + 1j, -2.0 + 0.5j)), (Op.SUB, (1.5, -2.0)),
                     (Sum((2, 3)), (np.arange(6.0).reshape(2, 3),))]:
        report = check_primitive(op, *args, rng=0, order=2)
        assert report.order == 2 and report.points == 3


# --- order 2 on the shipped primitive sets --------------------------------------------


def _scalar_cases():
    from primitives.scalar import Pow, ScalarOp, Scale

    real = {1: (0.7,), 2: (0.7, -1.3)}
    complex_ = {1: (0.7 + 0.4j,), 2: (0.7 + 0.4j, -1.3 + 0.5j)}
    for op in ScalarOp:
        n = op.input_count()
        if op is not ScalarOp.IMAG:              # IMAG of a real: see test_scalar_rules
            yield pytest.param(op, real[n], id=f"{op.name}-real")
        if op is not ScalarOp.TO_COMPLEX:        # takes real inputs only
            yield pytest.param(op, complex_[n], id=f"{op.name}-complex")
    for op, args in [(Pow(3), (0.7,)), (Pow(0.5), (1.3,)), (Pow(-2), (0.5 - 1j,)),
                     (Scale(2 - 1j), (0.5 + 1j,)), (Scale(-0.5), (0.3,))]:
        yield pytest.param(op, args, id=repr(op))


@pytest.mark.parametrize("op, args", list(_scalar_cases()))
def test_order_two_passes_the_scalar_set(op, args):
    report = check_primitive(op, *args, rng=0, order=2)
    assert report.order == 2 and report.points == 3 and report.jvp_comparisons >= 3


def _tensor_cases():
    from primitives.tensor.ops import elementwise as ew

    x = np.array([[0.3, 1.2, 2.0], [0.5, 0.9, 1.7]])
    y = np.array([[-0.5, 0.7, 1.5], [1.1, -0.8, 0.6]])
    z = x + 1j * y
    for op in (ew.sin, ew.exp, ew.tanh, ew.log, ew.sqrt):
        yield pytest.param(op, (x,), id=f"{op.name}-real")
        yield pytest.param(op, (z,), id=f"{op.name}-complex")
    for op in (ew.mul, ew.div, ew.sub, ew.mul_conj):
        yield pytest.param(op, (x, y), id=f"{op.name}-real")
        yield pytest.param(op, (z, 1j * z + 0.5), id=f"{op.name}-complex")
    yield pytest.param(ew.abs_real, (y,), id="abs")
    yield pytest.param(ew.Scale(2.5), (x,), id="scale")


@pytest.mark.parametrize("op, args", list(_tensor_cases()))
def test_order_two_passes_tensor_elementwise_ops(op, args):
    report = check_primitive(op, *args, rng=0, order=2)
    assert report.order == 2 and report.elements >= 3 * args[0].size


# --- check_batch ---------------------------------------------------------------------


@dataclass(frozen=True)
class Batched(Primitive, EvaluableGraphOperation):
    """NumPy ops with batch rules, right (``kind`` "add", "neg", "sum0") and wrong ones.

    "add" is x + y on one shape, "neg" is -x, "sum0" sums axis 0; "add_numpy" relies on
    NumPy broadcasting instead of broadcasting an unbatched operand to the batch axis,
    "neg_axis" always says its output is batched along axis 0, "neg_far" one axis too far
    to the right, "sum0_unshifted" forgets
    that a batch axis in front shifts the summed axis, "neg_f32" computes in float32 when
    batched, "neg_emits" emits an op without a batch rule.
    """

    kind: str

    @classmethod
    def add(cls):
        return Batched("add")

    def input_count(self):
        return 2 if self.kind.startswith("add") else 1

    def output_count(self):
        return 1

    def eval(self, ctx, xs):
        if self.kind.startswith("add"):
            return [xs[0] + xs[1]]
        if self.kind.startswith("sum0"):
            return [np.sum(xs[0], axis=0)]
        return [-xs[0]]

    def jvp_rule(self, b, xs, outs, ts, ctx):
        return [sum_terms(b, [None if t is None else emit(b, Batched(self.kind.split("_")[0]),
                                                          [Local(t)], LIN) for t in ts])]

    def transpose_rule(self, b, cts, inputs, role, ctx):
        kind = self.kind.split("_")[0]
        if kind == "add":
            return [cts[0] if active else None for active in role.active_mask]
        if kind == "neg":
            return [emit(b, Batched("neg"), [Local(cts[0])], LIN)]
        return super().transpose_rule(b, cts, inputs, role, ctx)

    def batch_rule(self, b, inputs, axes, role, axis_size, ctx):
        kind = self.kind
        if kind in ("add", "add_numpy"):
            target = next(a for a in axes if a is not None)
            refs = []
            for ref, axis in zip(inputs, axes):
                if axis is None and kind == "add":
                    ref = Local(emit(b, BatchTile(target, axis_size), [ref]))
                elif axis is not None and axis != target:
                    ref = Local(emit(b, BatchMoveTo(axis, target), [ref]))
                refs.append(ref)
            return b.add_primitive(self, refs, role), [target]
        [axis] = axes
        if kind == "sum0":
            if axis == 0:
                return b.add_primitive(BatchSum(1), inputs, role), [0]
            return b.add_primitive(self, inputs, role), [axis - 1]
        if kind == "sum0_unshifted":
            return b.add_primitive(self, inputs, role), [max(axis - 1, 0)]
        if kind == "neg_axis":
            return b.add_primitive(self, inputs, role), [0]
        if kind == "neg_far":
            return b.add_primitive(self, inputs, role), [axis + 1]
        if kind == "neg_f32":
            [x32] = b.add_primitive(BatchCast32(), inputs, role)
            return b.add_primitive(self, [Local(x32)], role), [axis]
        if kind == "neg_emits":
            [x] = b.add_primitive(NoBatchRule(), inputs, role)
            return b.add_primitive(Batched("neg"), [Local(x)], role), [axis]
        return b.add_primitive(self, inputs, role), [axis]


def sum_terms(b, terms):
    terms = [t for t in terms if t is not None]
    return terms[0] if len(terms) == 1 else emit(b, Batched("add"), [Local(t) for t in terms],
                                                 Linearized((True, True)))


@dataclass(frozen=True)
class BatchTile(Primitive, EvaluableGraphOperation):
    axis: int
    size: int

    def input_count(self): return 1
    def output_count(self): return 1

    def eval(self, ctx, xs):
        return [np.repeat(np.expand_dims(xs[0], self.axis), self.size, axis=self.axis)]


@dataclass(frozen=True)
class BatchMoveTo(Primitive, EvaluableGraphOperation):
    source: int
    destination: int

    def input_count(self): return 1
    def output_count(self): return 1

    def eval(self, ctx, xs):
        return [np.moveaxis(xs[0], self.source, self.destination)]


@dataclass(frozen=True)
class BatchSum(Primitive, EvaluableGraphOperation):
    axis: int

    def input_count(self): return 1
    def output_count(self): return 1

    def eval(self, ctx, xs):
        return [np.sum(xs[0], axis=self.axis)]


@dataclass(frozen=True)
class BatchCast32(Primitive, EvaluableGraphOperation):
    def input_count(self): return 1
    def output_count(self): return 1

    def eval(self, ctx, xs):
        return [np.asarray(xs[0], dtype=np.float32)]


@dataclass(frozen=True)
class NoBatchRule(Primitive, EvaluableGraphOperation):
    """The identity, without a batch rule."""

    def input_count(self): return 1
    def output_count(self): return 1

    def eval(self, ctx, xs):
        return [xs[0]]


def test_check_batch_passes_right_rules_and_reports_what_it_compared():
    x, y = np.arange(6.0).reshape(2, 3) + 1, np.ones((2, 3))
    report = check_batch(Batched("add"), x, y, rng=0)
    # batch positions 0..2 or None per input, but not both None: 4 * 4 - 1 choices
    assert (report.ops, report.output_slots, report.input_slots) == (("Batched(kind='add')",),
                                                                     1, 2)
    assert report.batch_comparisons == 15 and report.jvp_comparisons == 0
    assert report.worst_error <= report.tolerance
    assert str(report).startswith("checked Batched(kind='add') at 1 point: 1 output slot, "
                                  "2 input slots; 15 batch comparisons with a loop")
    assert check_batch(Batched("sum0"), x, rng=0).batch_comparisons == 3
    assert check_batch(Batched("add"), x, y, in_axes=[-1, None]).batch_comparisons == 1
    assert check_batch(Batched("neg"), x, order=2, rng=0).batch_comparisons == 2 * 3
    # integer inputs are batched too (permuted), and compared exactly
    assert check_batch(Batched("neg"), np.arange(4), rng=0).batch_comparisons == 2


def test_check_batch_catches_a_rule_that_relies_on_numpy_broadcasting():
    x, y = np.arange(3.0), np.array([10.0, 20.0, 30.0])
    check_batch(Batched("add_numpy"), x, y, in_axes=[0, None])    # right by luck at axis 0
    with pytest.raises(CheckFailure, match=r"batched along axes \(1, None\), output 0 "
                                           r"\(batch axis 1\): expected .* \(the loop\), got"):
        check_batch(Batched("add_numpy"), x, y, in_axes=[1, None], rng=0)


def test_check_batch_catches_a_wrong_output_axis():
    with pytest.raises(CheckFailure, match=r"axes \(1,\), output 0 \(batch axis 0\): "):
        check_batch(Batched("neg_axis"), np.arange(6.0).reshape(2, 3) + 1, in_axes=[1],
                    axis_size=4, rng=0)
    with pytest.raises(CheckFailure, match="puts the batch axis at 2, but the batched output "
                                           r"has 2 axes \(shape \(3, 3\)\)"):
        check_batch(Batched("neg_far"), np.ones(3), in_axes=[1], rng=0)
    check_batch(Batched("sum0_unshifted"), np.ones((2, 3)), in_axes=[2], rng=0)   # right here
    with pytest.raises(CheckFailure, match=r"the batched output, batch axes first, has shape "
                                           r"\(2, 3\), but the loop's results stacked have "
                                           r"shape \(3, 3\)"):
        check_batch(Batched("sum0_unshifted"), np.ones((2, 3)), in_axes=[0], rng=0)


def test_check_batch_catches_a_changed_dtype():
    with pytest.raises(CheckFailure, match="has dtype float32, but the loop's results have "
                                           "dtype float64"):
        check_batch(Batched("neg_f32"), np.ones(3), rng=0)


def test_check_batch_at_order_two_names_the_rule_that_emitted_an_op_without_a_batch_rule():
    assert check_batch(Batched("neg_emits"), np.ones(3), rng=0).batch_comparisons == 2
    with pytest.raises(ADRuleError, match=r"NoBatchRule\(\) has no batch rule: emitted by the "
                                          r"batch rule of Batched\(kind='neg_emits'\) \(found "
                                          r"while batching the batched graph"):
        check_batch(Batched("neg_emits"), np.ones(3), order=2, rng=0)


def test_check_batch_raises_for_a_missing_batch_rule():
    with pytest.raises(ADRuleError) as info:
        check_batch(Op.SIN, 0.3)
    assert info.value.op == "SIN" and info.value.rule is ADRuleKind.BATCH


@pytest.mark.parametrize("call, message", [
    (lambda: check_batch(Batched("neg"), np.ones(3), in_axes=[None]), "batch no input"),
    (lambda: check_batch(Batched("neg"), np.ones(3), in_axes=[0, 0]), "2 in_axes for the 1 "),
    (lambda: check_batch(Batched("neg"), np.ones(3), in_axes=[2]), "batch axis 2 of input 0"),
    (lambda: check_batch(Batched("neg"), np.ones(3), in_axes=[-3]), "batch axis -3 of input 0"),
    (lambda: check_batch(Batched("neg"), np.ones(3), in_axes=[True]), "batch axis True"),
    (lambda: check_batch(Batched("neg"), np.ones(3), in_axes="some"), "in_axes must be \"all\""),
    (lambda: check_batch(Batched("neg"), np.ones(3), axis_size=0), "axis_size must be a positive"),
    (lambda: check_batch(Batched("neg"), np.ones(3), order=3), "order must be 1 or 2"),
    (lambda: check_batch(Batched("neg")), "takes 1 inputs, got 0"),
    (lambda: check_batch(Batched("neg"), "text"), "cannot make a batch of"),
])
def test_check_batch_refuses_calls_that_compare_nothing(call, message):
    with pytest.raises(CheckUsageError, match=message):
        call()


def test_check_primitive_runs_check_batch_only_for_sets_with_batch_rules():
    assert check_primitive(Op.MUL, 1.5, -0.5, rng=0).batch_comparisons == 0   # no batch rules
    from tidu.example_ops import Op as ExampleOp

    report = check_primitive(ExampleOp.MUL, 1.5, -0.5, rng=0)
    assert report.batch_comparisons == 3 and report.jvp_comparisons == 3
    # 5 on its linearizations, 1 on MUL's own transpose with role Linearized(.T), which
    # example_ops' MUL JVP never emits
    assert "6 dot-product tests, 3 batch comparisons with a loop" in str(report)
    with pytest.raises(CheckFailure, match="batched along axes"):
        check_primitive(Batched("neg_axis"), np.ones((2, 3)), rng=0)


def test_check_batch_with_many_axis_choices_checks_each_input_alone_and_all_together():
    x = np.arange(1.0, 3.0).reshape((1,) * 6 + (2,))         # 7 axes: 8 positions each
    report = check_batch(Batched("add"), x, 2 * x, rng=0)
    assert report.batch_comparisons == 8 + 8 + 8             # x alone, y alone, both
