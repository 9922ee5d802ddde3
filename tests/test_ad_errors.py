"""Missing rules raise ``ADRuleError``; rules that break the contract raise ``RuleContractError``.

Both are ``TiduError``s naming the op and the rule kind, raised from
``linearize``, ``linear_transpose`` and ``linear_transpose_with_builder`` —
never an AssertionError, IndexError, or a silent wrong answer.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import pytest

from primitives.scalar import ScalarOp, trace_scalar
from tidu import (
    ADRuleError,
    ADRuleKind,
    GraphPrimitiveBuilder,
    Primitive,
    RuleContractError,
    TiduError,
    linear_transpose,
    linear_transpose_with_builder,
    linearize,
)
from tidu.graph import EvaluableGraphOperation, External, GraphBuilder, Input, Linearized, Local

LIN = Linearized((True,))
LIN_TT = Linearized((True, True))


class ErrOp(Primitive, EvaluableGraphOperation, enum.Enum):
    """One-input ops with deliberately missing or wrong rules."""

    NOJVP = "nojvp"                # no JVP rule at all (the default raises)
    NOTRANSPOSE = "notranspose"    # JVP emits itself as linear work; no transpose rule
    SIN_AS_LINEAR = "sin_as_lin"   # wrong JVP: emits ScalarOp.SIN on the tangent, as linear work
    SQUARE_AS_LINEAR = "sq_lin"    # wrong JVP: emits MUL(t, t) with both inputs linear

    @classmethod
    def add(cls):
        return ScalarOp.ADD

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, inputs):
        return [inputs[0]]

    def jvp_rule(self, b, xs, outs, ts, ctx):
        if self is ErrOp.NOJVP:
            return super().jvp_rule(b, xs, outs, ts, ctx)
        if self is ErrOp.NOTRANSPOSE:
            return b.add_primitive(self, [Local(ts[0])], LIN)
        if self is ErrOp.SIN_AS_LINEAR:
            return b.add_primitive(ScalarOp.SIN, [Local(ts[0])], LIN)
        return b.add_primitive(ScalarOp.MUL, [Local(ts[0]), Local(ts[0])], LIN_TT)


def one_op_graph(op, *, then_sin=False):
    """``op(x)`` (optionally followed by ``sin``) as a graph."""
    b = GraphBuilder()
    x = b.add_input("x")
    [y] = b.add_operation(op, [Local(x)])
    if then_sin:
        [y] = b.add_operation(ScalarOp.SIN, [Local(y)])
    b.set_outputs([y])
    return b.build()


def check_names(err, op_name, kind):
    assert isinstance(err, TiduError)
    assert err.op == op_name
    assert err.rule is kind
    assert op_name in str(err) and kind.value in str(err)


# --- missing rules ------------------------------------------------------------------------------


def test_missing_jvp_rule_from_linearize():
    g = one_op_graph(ErrOp.NOJVP, then_sin=True)
    with pytest.raises(ADRuleError) as info:
        linearize(g, g.output_keys, ["x"])
    check_names(info.value, "NOJVP", ADRuleKind.JVP)


def test_missing_jvp_rule_not_called_for_inactive_inputs():
    # NOJVP(y) with y not in wrt: its rule is never called, so no error
    g = trace_scalar(lambda x, y: x * y, ["x", "y"])
    b = GraphBuilder()
    b.add_parent(g)
    [n] = b.add_operation(ErrOp.NOJVP, [External(Input("y"))])
    [f] = b.add_operation(ScalarOp.MUL, [External(g.output_keys[0]), Local(n)])
    b.set_outputs([f])
    g2 = b.build()
    lin = linearize([g2], g2.output_keys, ["x"])
    assert lin.tangent_outputs[0] is not None


@pytest.mark.parametrize("op, bad_op", [
    (ErrOp.NOTRANSPOSE, "NOTRANSPOSE"),
    (ErrOp.SIN_AS_LINEAR, "SIN"),         # ScalarOp.SIN is not linear: no transpose rule
    (ErrOp.SQUARE_AS_LINEAR, "MUL"),      # MUL is linear in one input at a time only
])
def test_missing_transpose_rule(op, bad_op):
    g = one_op_graph(op)
    lin = linearize(g, g.output_keys, ["x"])
    with pytest.raises(ADRuleError) as info:
        linear_transpose(lin)
    check_names(info.value, bad_op, ADRuleKind.TRANSPOSE)

    builder = GraphPrimitiveBuilder()
    seed = builder.add_input("seed")
    with pytest.raises(ADRuleError) as info:
        linear_transpose_with_builder(lin, builder, [seed])
    check_names(info.value, bad_op, ADRuleKind.TRANSPOSE)


def test_scalar_nonlinear_ops_have_no_transpose_rule():
    for op in (ScalarOp.SIN, ScalarOp.EXP, ScalarOp.SINCOS, ScalarOp.LOG):
        with pytest.raises(ADRuleError) as info:
            op.transpose_rule(GraphPrimitiveBuilder(), [None] * op.output_count(),
                              [External(Input("x"))], LIN, None)
        check_names(info.value, op.name, ADRuleKind.TRANSPOSE)


class NoAddOp(Primitive, EvaluableGraphOperation, enum.Enum):
    """A linear set with no ``add()``: transposing fan-out needs one."""

    DOUBLE = "double"

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, inputs):
        return [2 * inputs[0]]

    def jvp_rule(self, b, xs, outs, ts, ctx):
        return b.add_primitive(self, [Local(ts[0])], LIN)

    def transpose_rule(self, b, cts, inputs, role, ctx):
        return b.add_primitive(self, [Local(cts[0])], LIN)


def test_fan_out_without_add_raises_adrule_error():
    # x feeds two ops whose outputs are both requested: their cotangents must be summed
    b = GraphBuilder()
    x = b.add_input("x")
    [d] = b.add_operation(NoAddOp.DOUBLE, [Local(x)])
    [dd] = b.add_operation(NoAddOp.DOUBLE, [Local(d)])
    b.set_outputs([d, dd])
    g = b.build()
    lin = linearize(g, g.output_keys, ["x"])
    with pytest.raises(ADRuleError) as info:
        linear_transpose(lin)
    assert info.value.rule is ADRuleKind.TRANSPOSE
    assert "NoAddOp" in str(info.value)
    # one output only: no fan-out, no add() needed
    lin = linearize(g, g.output_keys[1:], ["x"])
    linear_transpose(lin)


# --- rule-contract checks -------------------------------------------------------------------------

BAD_RESULTS = {
    "too_few": lambda ok: [],
    "too_many": lambda ok: [ok, ok],
    "string": lambda ok: ["a"],
    "float": lambda ok: [float(ok)],
    "bool": lambda ok: [True],
    "huge": lambda ok: [10**6],
    "negative": lambda ok: [-1],
    "not_a_sequence": lambda ok: 5,
    "bare_string": lambda ok: "ab",
}


@dataclass(frozen=True)
class Bad(Primitive, EvaluableGraphOperation):
    """``x -> x``; its JVP and/or transpose rule return ``BAD_RESULTS[mode]``."""

    jvp_mode: str = "ok"
    transpose_mode: str = "ok"

    @classmethod
    def add(cls):
        return ScalarOp.ADD

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, inputs):
        return [inputs[0]]

    def jvp_rule(self, b, xs, outs, ts, ctx):
        [ok] = b.add_primitive(self, [Local(ts[0])], LIN)
        return [ok] if self.jvp_mode == "ok" else BAD_RESULTS[self.jvp_mode](ok)

    def transpose_rule(self, b, cts, inputs, role, ctx):
        [ok] = b.add_primitive(ScalarOp.NEG, [Local(cts[0])], LIN)
        return [ok] if self.transpose_mode == "ok" else BAD_RESULTS[self.transpose_mode](ok)


@pytest.mark.parametrize("mode", sorted(BAD_RESULTS))
def test_bad_jvp_rule_results(mode):
    op = Bad(jvp_mode=mode)
    g = one_op_graph(op, then_sin=True)
    with pytest.raises(TiduError) as info:
        linearize(g, g.output_keys, ["x"])
    err = info.value
    assert isinstance(err, RuleContractError)
    assert err.rule is ADRuleKind.JVP and "jvp" in str(err)
    assert "Bad" in err.op and "Bad" in str(err)


@pytest.mark.parametrize("mode", sorted(BAD_RESULTS))
def test_bad_transpose_rule_results(mode):
    op = Bad(transpose_mode=mode)
    g = one_op_graph(op, then_sin=True)
    lin = linearize(g, g.output_keys, ["x"])
    with pytest.raises(TiduError) as info:
        linear_transpose(lin)
    err = info.value
    assert isinstance(err, RuleContractError)
    assert err.rule is ADRuleKind.TRANSPOSE and "transpose" in str(err)
    assert "Bad" in err.op and "Bad" in str(err)

    builder = GraphPrimitiveBuilder()
    seed = builder.add_input("seed")
    with pytest.raises(RuleContractError) as info:
        linear_transpose_with_builder(lin, builder, [seed])
    assert info.value.rule is ADRuleKind.TRANSPOSE and "Bad" in str(info.value)


class SizedEagerBuilder:
    """An executing caller builder whose ids are ``0 .. len-1``."""

    def __init__(self):
        self.values = []

    def __len__(self):
        return len(self.values)

    def push(self, value):
        self.values.append(value)
        return len(self.values) - 1

    def add_primitive(self, op, inputs, role):
        args = [self.values[ref] if isinstance(ref, Local) else 1.0 for ref in inputs]
        return [self.push(v) for v in op.eval(None, args)]


@pytest.mark.parametrize("mode", ["huge", "negative", "float", "too_many"])
def test_bad_transpose_rule_with_an_eager_builder(mode):
    g = one_op_graph(Bad(transpose_mode=mode))
    lin = linearize(g, g.output_keys, ["x"])
    builder = SizedEagerBuilder()
    seed = builder.push(1.0)
    with pytest.raises(RuleContractError) as info:
        linear_transpose_with_builder(lin, builder, [seed])
    assert info.value.rule is ADRuleKind.TRANSPOSE


def test_good_rules_pass_the_checks():
    g = one_op_graph(Bad(), then_sin=True)
    lin = linearize(g, g.output_keys, ["x"])
    tr = linear_transpose(lin)
    from tidu.graph import evaluate

    [ct] = evaluate([g, lin.graph, tr.graph], tr.tangent_output_keys,
                    {Input("x"): 0.5, tr.tangent_input_keys[0]: 1.0})
    assert ct == pytest.approx(-math.cos(0.5))       # Bad transposes to -ct on purpose


def test_errors_are_tidu_errors():
    assert issubclass(ADRuleError, TiduError)
    assert issubclass(RuleContractError, TiduError)
    assert not issubclass(RuleContractError, AssertionError)
    err = ADRuleError("SIN", ADRuleKind.TRANSPOSE)
    assert (err.op, err.rule) == ("SIN", ADRuleKind.TRANSPOSE)
    assert "SIN" in str(err) and "transpose" in str(err)
    import pickle

    again = pickle.loads(pickle.dumps(err))
    assert (again.op, again.rule, str(again)) == (err.op, err.rule, str(err))


def test_bad_transpose_id_with_an_unsized_builder():
    class UnsizedBuilder:                   # only the bare PrimitiveBuilder protocol
        def __init__(self):
            self.values = []

        push = SizedEagerBuilder.push
        add_primitive = SizedEagerBuilder.add_primitive

    g = one_op_graph(Bad(transpose_mode="huge"))
    lin = linearize(g, g.output_keys, ["x"])
    builder = UnsizedBuilder()
    seed = builder.push(1.0)
    with pytest.raises(RuleContractError):
        linear_transpose_with_builder(lin, builder, [seed])


def test_an_op_that_is_not_a_primitive_raises_ad_rule_error():
    import enum

    from tidu.graph import EvaluableGraphOperation, GraphBuilder, Local

    class Plain(EvaluableGraphOperation, enum.Enum):
        TWICE = "twice"

        def input_count(self):
            return 1

        def output_count(self):
            return 1

        def eval(self, ctx, inputs):
            return [2 * inputs[0]]

    b = GraphBuilder()
    x = b.add_input("x")
    b.set_outputs(b.add_operation(Plain.TWICE, [Local(x)]))
    g = b.build()
    with pytest.raises(ADRuleError, match="TWICE.*not a tidu.Primitive") as info:
        linearize(g, g.output_keys, ["x"])
    assert info.value.rule is ADRuleKind.JVP and info.value.op == "TWICE"
