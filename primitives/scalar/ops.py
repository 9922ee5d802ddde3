"""The scalar primitive set: ops over Python ``float`` and ``complex``, each with its rules.

Complex numbers follow tidu's convention (JAX's forward mode, the real inner
product ``<a, b> = Re(conj(a) b)`` for transposes): a JVP is the real-linear
derivative ``f_z dz + f_zbar conj(dz)``; the transpose of ``t -> c*t`` is
``ct -> conj(c)*ct``. Rules are closed over the set, so any order works.

Types are explicit, as in JAX: the operands of a binary op are both real or
both complex, and a real value becomes complex only through ``TO_COMPLEX``,
whose transpose takes the real part. That is what keeps a real input's
cotangent real. ``Scale``/``Pow`` with a complex parameter, and ``REAL``/``IMAG``,
take complex inputs. The frontends (``trace_scalar``, the eager ``Scalar``)
insert ``TO_COMPLEX`` for you.

>>> ScalarOp.MUL.eval(None, [2.0, 3.0])
[6.0]
>>> ScalarOp.SINCOS.output_count()
2
"""

from __future__ import annotations

import cmath
import enum
import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

from tidu import ADRuleError, ADRuleKind, Primitive, TiduError
from tidu.graph import PRIMARY, EvaluableGraphOperation, External, Linearized, Local

LIN = Linearized((True,))
LIN_TF = Linearized((True, False))
LIN_FT = Linearized((False, True))
LIN_TT = Linearized((True, True))


def _emit(builder, op, inputs, role=PRIMARY) -> int:
    """Emit a one-output op; return its id."""
    return builder.add_primitive(op, inputs, role)[0]


def _scale(builder, tangent: int, factor_key) -> int:
    """``tangent * factor`` where ``factor`` is a primal value (tangent work)."""
    return _emit(builder, ScalarOp.MUL, [Local(tangent), External(factor_key)], LIN_TF)


def _conj_of(builder, key) -> External | Local:
    """A reference to ``conj(key)``, emitted as primal work."""
    return Local(_emit(builder, ScalarOp.CONJ, [External(key)]))


def _not_linear(op, role, detail: str):
    return ADRuleError(op.name if isinstance(op, enum.Enum) else repr(op),
                       ADRuleKind.TRANSPOSE, f"{detail} (role {role!r})")


class _Rules(NamedTuple):
    arity: int
    outputs: int
    eval: Callable
    jvp: Callable | None          # (builder, xs, outs, txs) -> tangent ids
    transpose: Callable | None    # (builder, cts, inputs, role) -> cotangent ids


def _cplx(real_fn, complex_fn):
    def fn(x):
        return complex_fn(x) if isinstance(x, complex) else real_fn(x)
    fn.__name__ = real_fn.__name__
    return fn


_exp = _cplx(math.exp, cmath.exp)
_log = _cplx(math.log, cmath.log)
_sin = _cplx(math.sin, cmath.sin)
_cos = _cplx(math.cos, cmath.cos)
_sqrt = _cplx(math.sqrt, cmath.sqrt)
_tanh = _cplx(math.tanh, cmath.tanh)


# --- arithmetic: linear in each input ---------------------------------------------

def _add_jvp(b, xs, outs, t):
    tx, ty = t
    if tx is None or ty is None:
        return [tx if ty is None else ty]
    return [_emit(b, ScalarOp.ADD, [Local(tx), Local(ty)], LIN_TT)]


def _add_transpose(b, cts, inputs, role):
    [ct] = cts
    mask = _mask(ScalarOp.ADD, role)
    return [ct if mask[0] else None, ct if mask[1] else None]


def _sub_jvp(b, xs, outs, t):
    tx, ty = t
    if ty is None:
        return [tx]
    if tx is None:
        return [_emit(b, ScalarOp.NEG, [Local(ty)], LIN)]
    return [_emit(b, ScalarOp.SUB, [Local(tx), Local(ty)], LIN_TT)]


def _sub_transpose(b, cts, inputs, role):
    [ct] = cts
    mask = _mask(ScalarOp.SUB, role)
    return [ct if mask[0] else None,
            _emit(b, ScalarOp.NEG, [Local(ct)], LIN) if mask[1] else None]


def _neg_jvp(b, xs, outs, t):
    return [_emit(b, ScalarOp.NEG, [Local(t[0])], LIN)]


def _neg_transpose(b, cts, inputs, role):
    return [_emit(b, ScalarOp.NEG, [Local(cts[0])], LIN)]


def _mul_jvp(b, xs, outs, t):
    x, y = xs
    tx, ty = t
    terms = []
    if tx is not None:
        terms.append(_emit(b, ScalarOp.MUL, [Local(tx), External(y)], LIN_TF))
    if ty is not None:
        terms.append(_emit(b, ScalarOp.MUL, [External(x), Local(ty)], LIN_FT))
    if len(terms) == 1:
        return terms
    return [_emit(b, ScalarOp.ADD, [Local(terms[0]), Local(terms[1])], LIN_TT)]


def _mul_transpose(b, cts, inputs, role):
    # t -> t*y transposes to ct -> ct*conj(y), one MUL_CONJ
    [ct] = cts
    x, y = inputs
    mask = _mask(ScalarOp.MUL, role)
    if mask == (True, False):
        return [_emit(b, ScalarOp.MUL_CONJ, [Local(ct), y], LIN_TF), None]
    if mask == (False, True):
        return [None, _emit(b, ScalarOp.MUL_CONJ, [Local(ct), x], LIN_TF)]
    raise _not_linear(ScalarOp.MUL, role, "MUL is linear in one input at a time")


def _mul_conj_jvp(b, xs, outs, t):
    # d(x conj(y)) = dx conj(y) + x conj(dy)
    x, y = xs
    tx, ty = t
    terms = []
    if tx is not None:
        terms.append(_emit(b, ScalarOp.MUL_CONJ, [Local(tx), External(y)], LIN_TF))
    if ty is not None:
        terms.append(_emit(b, ScalarOp.MUL_CONJ, [External(x), Local(ty)], LIN_FT))
    if len(terms) == 1:
        return terms
    return [_emit(b, ScalarOp.ADD, [Local(terms[0]), Local(terms[1])], LIN_TT)]


def _mul_conj_transpose(b, cts, inputs, role):
    # t -> t conj(y) transposes to ct -> ct y;  t -> x conj(t) to ct -> x conj(ct)
    [ct] = cts
    x, y = inputs
    mask = _mask(ScalarOp.MUL_CONJ, role)
    if mask == (True, False):
        return [_emit(b, ScalarOp.MUL, [Local(ct), y], LIN_TF), None]
    if mask == (False, True):
        return [None, _emit(b, ScalarOp.MUL_CONJ, [x, Local(ct)], LIN_FT)]
    raise _not_linear(ScalarOp.MUL_CONJ, role, "MUL_CONJ is linear in one input at a time")


def _div_jvp(b, xs, outs, t):
    x, y = xs
    tx, ty = t
    terms = []
    if tx is not None:
        terms.append(_emit(b, ScalarOp.DIV, [Local(tx), External(y)], LIN_TF))
    if ty is not None:
        # d(x/y) = -(x/y)/y dy
        ratio = _emit(b, ScalarOp.DIV, [External(outs[0]), External(y)])
        scaled = _emit(b, ScalarOp.MUL, [Local(ty), Local(ratio)], LIN_TF)
        terms.append(_emit(b, ScalarOp.NEG, [Local(scaled)], LIN))
    if len(terms) == 1:
        return terms
    return [_emit(b, ScalarOp.ADD, [Local(terms[0]), Local(terms[1])], LIN_TT)]


def _div_transpose(b, cts, inputs, role):
    [ct] = cts
    if _mask(ScalarOp.DIV, role) != (True, False):
        raise _not_linear(ScalarOp.DIV, role, "DIV is linear in its numerator only")
    return [_emit(b, ScalarOp.DIV, [Local(ct), _conj_of(b, inputs[1].key)], LIN_TF), None]


def _conj_jvp(b, xs, outs, t):
    return [_emit(b, ScalarOp.CONJ, [Local(t[0])], LIN)]


def _conj_transpose(b, cts, inputs, role):
    return [_emit(b, ScalarOp.CONJ, [Local(cts[0])], LIN)]


def _real_jvp(b, xs, outs, t):
    return [_emit(b, ScalarOp.REAL, [Local(t[0])], LIN)]


def _real_transpose(b, cts, inputs, role):
    return [cts[0]]                       # <ct, Re t> = Re(conj(ct) t) for real ct


class ScalarTypeError(TiduError, TypeError):
    """A value of the wrong kind for a scalar op (e.g. a complex value where a real one belongs)."""


def _to_complex(a) -> complex:
    if isinstance(a, complex):
        raise ScalarTypeError(
            f"TO_COMPLEX got the complex value {a!r}: it promotes real values only (its "
            "transpose keeps the real part). Declare complex inputs, e.g. "
            "trace_scalar(f, keys, complex_inputs=[...]).")
    return complex(a)


def _to_complex_jvp(b, xs, outs, t):
    return [_emit(b, ScalarOp.TO_COMPLEX, [Local(t[0])], LIN)]


def _to_complex_transpose(b, cts, inputs, role):
    return [_emit(b, ScalarOp.REAL, [Local(cts[0])], LIN)]   # back onto the reals


def _imag_jvp(b, xs, outs, t):
    return [_emit(b, ScalarOp.IMAG, [Local(t[0])], LIN)]


def _imag_transpose(b, cts, inputs, role):
    return [_emit(b, Scale(1j), [Local(cts[0])], LIN)]   # <ct, Im t> = Re(conj(i ct) t)


def _mask(op, role) -> tuple:
    if role is PRIMARY:
        raise _not_linear(op, role, f"{op.name} was not emitted as linear work")
    return role.active_mask


# --- transcendental: rules reuse primal outputs where the derivative allows ------

def _exp_jvp(b, xs, outs, t):
    return [_scale(b, t[0], outs[0])]


def _log_jvp(b, xs, outs, t):
    return [_emit(b, ScalarOp.DIV, [Local(t[0]), External(xs[0])], LIN_TF)]


def _sin_jvp(b, xs, outs, t):
    cos_x = _emit(b, ScalarOp.COS, [External(xs[0])])
    return [_emit(b, ScalarOp.MUL, [Local(t[0]), Local(cos_x)], LIN_TF)]


def _cos_jvp(b, xs, outs, t):
    sin_x = _emit(b, ScalarOp.SIN, [External(xs[0])])
    scaled = _emit(b, ScalarOp.MUL, [Local(t[0]), Local(sin_x)], LIN_TF)
    return [_emit(b, ScalarOp.NEG, [Local(scaled)], LIN)]


def _sincos_jvp(b, xs, outs, t):
    sin_x, cos_x = outs
    d_sin = _scale(b, t[0], cos_x)
    d_cos = _emit(b, ScalarOp.NEG, [Local(_scale(b, t[0], sin_x))], LIN)
    return [d_sin, d_cos]


def _sqrt_jvp(b, xs, outs, t):
    twice = _emit(b, Scale(2.0), [External(outs[0])])
    return [_emit(b, ScalarOp.DIV, [Local(t[0]), Local(twice)], LIN_TF)]


def _tanh_jvp(b, xs, outs, t):
    # (1 - tanh^2) dx = dx - dx * tanh^2, with no constant needed
    squared = _emit(b, ScalarOp.MUL, [External(outs[0]), External(outs[0])])
    scaled = _emit(b, ScalarOp.MUL, [Local(t[0]), Local(squared)], LIN_TF)
    return [_emit(b, ScalarOp.SUB, [Local(t[0]), Local(scaled)], LIN_TT)]


class ScalarOp(Primitive, EvaluableGraphOperation, enum.Enum):
    """Scalar ops without parameters. ``Pow``, ``Scale`` and ``Const`` carry one."""

    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    MUL_CONJ = "mul_conj"      # x * conj(y): what MUL's transpose emits
    DIV = "div"
    NEG = "neg"
    CONJ = "conj"
    TO_COMPLEX = "to_complex"  # real -> complex promotion
    REAL = "real"
    IMAG = "imag"
    EXP = "exp"
    LOG = "log"
    SIN = "sin"
    COS = "cos"
    SINCOS = "sincos"
    SQRT = "sqrt"
    TANH = "tanh"

    __hash__ = object.__hash__   # members are singletons: identity hashing is exact and fast

    @classmethod
    def add(cls) -> "ScalarOp":
        return cls.ADD

    def input_count(self) -> int:
        return _RULES[self].arity

    def structural_rules(self) -> bool:
        return True          # the rules below depend only on which tangents are zero

    def output_count(self) -> int:
        return _RULES[self].outputs

    def eval(self, ctx, inputs):
        return self._eval(*inputs)

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return _RULES[self].jvp(builder, primal_inputs, primal_outputs, tangent_inputs)

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        rule = _RULES[self].transpose
        if rule is None:
            raise ADRuleError(self.name, ADRuleKind.TRANSPOSE, f"{self.name} is not linear")
        return rule(builder, cotangent_outputs, inputs, role)

    def __repr__(self) -> str:
        return f"ScalarOp.{self.name}"


_RULES = {
    ScalarOp.ADD: _Rules(2, 1, lambda a, b: [a + b], _add_jvp, _add_transpose),
    ScalarOp.SUB: _Rules(2, 1, lambda a, b: [a - b], _sub_jvp, _sub_transpose),
    ScalarOp.MUL: _Rules(2, 1, lambda a, b: [a * b], _mul_jvp, _mul_transpose),
    ScalarOp.MUL_CONJ: _Rules(2, 1, lambda a, b: [a * b.conjugate()], _mul_conj_jvp,
                              _mul_conj_transpose),
    ScalarOp.DIV: _Rules(2, 1, lambda a, b: [a / b], _div_jvp, _div_transpose),
    ScalarOp.NEG: _Rules(1, 1, lambda a: [-a], _neg_jvp, _neg_transpose),
    ScalarOp.CONJ: _Rules(1, 1, lambda a: [a.conjugate()], _conj_jvp, _conj_transpose),
    ScalarOp.TO_COMPLEX: _Rules(1, 1, lambda a: [_to_complex(a)], _to_complex_jvp,
                                _to_complex_transpose),
    ScalarOp.REAL: _Rules(1, 1, lambda a: [float(a.real)], _real_jvp, _real_transpose),
    ScalarOp.IMAG: _Rules(1, 1, lambda a: [float(a.imag)], _imag_jvp, _imag_transpose),
    ScalarOp.EXP: _Rules(1, 1, lambda a: [_exp(a)], _exp_jvp, None),
    ScalarOp.LOG: _Rules(1, 1, lambda a: [_log(a)], _log_jvp, None),
    ScalarOp.SIN: _Rules(1, 1, lambda a: [_sin(a)], _sin_jvp, None),
    ScalarOp.COS: _Rules(1, 1, lambda a: [_cos(a)], _cos_jvp, None),
    ScalarOp.SINCOS: _Rules(1, 2, lambda a: [_sin(a), _cos(a)], _sincos_jvp, None),
    ScalarOp.SQRT: _Rules(1, 1, lambda a: [_sqrt(a)], _sqrt_jvp, None),
    ScalarOp.TANH: _Rules(1, 1, lambda a: [_tanh(a)], _tanh_jvp, None),
}
for _op, _rules in _RULES.items():
    _op._eval = _rules.eval          # eval is the hot path of eager runs: skip the lookup


# --- ops with a parameter ---------------------------------------------------------


class _ParameterOp(Primitive, EvaluableGraphOperation):
    """Shared base of the parameterised scalar ops: one input, one output, sum with ADD."""

    __slots__ = ()

    @classmethod
    def add(cls) -> ScalarOp:
        return ScalarOp.ADD

    def input_count(self) -> int:
        return 1

    def output_count(self) -> int:
        return 1


@dataclass(frozen=True)
class Pow(_ParameterOp):
    """``x ** exponent`` for a constant exponent.

    >>> Pow(3).eval(None, [2.0])
    [8.0]
    """

    exponent: float | int | complex

    def eval(self, ctx, inputs):
        return [inputs[0] ** self.exponent]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if self.exponent == 0:
            return [None]
        if self.exponent == 1:
            return [tangent_inputs[0]]
        lower = _emit(builder, Pow(self.exponent - 1), [External(primal_inputs[0])])
        factor = _emit(builder, Scale(self.exponent), [Local(lower)])
        return [_emit(builder, ScalarOp.MUL, [Local(tangent_inputs[0]), Local(factor)], LIN_TF)]


@dataclass(frozen=True)
class Scale(_ParameterOp):
    """``factor * x`` for a constant factor: linear, its transpose scales by ``conj(factor)``.

    >>> Scale(2.0).eval(None, [3.0])
    [6.0]
    """

    factor: float | int | complex

    def eval(self, ctx, inputs):
        return [self.factor * inputs[0]]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [_emit(builder, self, [Local(tangent_inputs[0])], LIN)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        factor = self.factor.conjugate() if isinstance(self.factor, complex) else self.factor
        return [_emit(builder, Scale(factor), [Local(cotangent_outputs[0])], LIN)]


@dataclass(frozen=True)
class Const(_ParameterOp):
    """A constant: no inputs, so it never carries a tangent.

    >>> Const(1.5).eval(None, [])
    [1.5]
    """

    value: float | int | complex

    def input_count(self) -> int:
        return 0

    def eval(self, ctx, inputs):
        return [self.value]
