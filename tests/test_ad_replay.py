"""Replayed rule templates (``Primitive.structural_rules``) give exactly the rules' graphs.

Transforms record a structural rule's emissions once per (op, role, zero
pattern) and replay them for later nodes. Checked here: random scalar DAGs and a
graph using every scalar op give identical linear and transposed graphs with
replay on and off; a structural rule is called once per pattern; rules that
cannot be replayed (an emission found already built, a builder method other than
``add_primitive``, a rule that is not structural and reads keys) are called at
every node; errors still come from the rules.
"""

from __future__ import annotations

import collections
import contextlib
import enum

import pytest
from hypothesis import given
from test_ad_random import SETTINGS, random_dags

from primitives.scalar import (
    ScalarOp,
    cos,
    exp,
    log,
    sin,
    sincos,
    sqrt,
    tanh,
    trace_scalar,
)
from tidu import ADRuleError, LinearizedGraph, Primitive, linear_transpose, linearize
from tidu.graph import EvaluableGraphOperation, GraphBuilder, Input, Linearized, Local

LIN = Linearized((True,))
LIN_TT = Linearized((True, True))


@contextlib.contextmanager
def replay_off():
    """ScalarOp rules called at every node, as if they were not structural."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ScalarOp, "structural_rules", lambda self: False)
        yield


def shape(graph) -> list:
    """A graph's operations as comparable tuples (ops, roles, input refs, output ids)."""
    return [(n.operation, n.role, n.inputs, n.outputs) for n in graph.operations]


def assert_replay_matches_rules(graph, wrt):
    outputs = list(graph.output_keys)
    replayed = linearize(graph, outputs, wrt, pass_id=7)
    with replay_off():
        called = linearize(graph, outputs, wrt, pass_id=7)
    assert replayed.graph.operation_keys == called.graph.operation_keys
    assert replayed.graph.value_keys == called.graph.value_keys
    assert replayed.tangent_outputs == called.tangent_outputs

    transposed = linear_transpose(replayed)
    with replay_off():
        transposed_by_rules = linear_transpose(replayed)
    assert shape(transposed.graph) == shape(transposed_by_rules.graph)
    assert transposed.tangent_outputs == transposed_by_rules.tangent_outputs


@SETTINGS
@given(random_dags())
def test_random_dags_replay_gives_the_rules_graphs(case):
    graph, wrt, _, _ = case
    assert_replay_matches_rules(graph, wrt)


@SETTINGS
@given(random_dags(complex_values=True, extra_kinds=("CONJ",)))
def test_random_complex_dags_replay_gives_the_rules_graphs(case):
    graph, wrt, _, _ = case
    assert_replay_matches_rules(graph, wrt)


def test_every_scalar_op_replays_exactly():
    def f(x, y):
        for _ in range(3):           # each pattern met several times
            s, c = sincos(x)
            x = exp(sin(x) * y) / (1.0 + sqrt(x * x + 1.0)) - tanh(c) * cos(y)
            y = log(y * y + 2.0) - x + s
            x = -x * x + y
        return x, y
    graph = trace_scalar(f, ["x", "y"])
    assert_replay_matches_rules(graph, ["x", "y"])
    assert_replay_matches_rules(graph, ["y"])


def test_chain_benchmark_replays_exactly():
    b = GraphBuilder()
    y, c = b.add_input("y0"), b.add_input("c")
    for _ in range(20):
        [s] = b.add_operation(ScalarOp.SIN, [Local(y)])
        [m] = b.add_operation(ScalarOp.MUL, [Local(s), Local(y)])
        [y] = b.add_operation(ScalarOp.ADD, [Local(m), Local(c)])
    b.set_outputs([y])
    assert_replay_matches_rules(b.build(), ["y0", "c"])


# --- a small op set whose rules count their calls ------------------------------------

CALLS: collections.Counter = collections.Counter()


class Op(Primitive, EvaluableGraphOperation, enum.Enum):
    """``DOUBLE``: 2x, linear. ``TWICE``: 2x, its JVP emits ``DOUBLE(t)`` twice.
    ``SIZED``: 2x, its JVP asks ``len(builder)``. ``PEEK``: x, its JVP (not
    structural) reads its input's key. ``ADD``: sums cotangents."""

    ADD = "add"
    DOUBLE = "double"
    TWICE = "twice"
    SIZED = "sized"
    PEEK = "peek"
    IDENT = "ident"

    @classmethod
    def add(cls):
        return cls.ADD

    def input_count(self):
        return 2 if self is Op.ADD else 1

    def output_count(self):
        return 1

    def structural_rules(self):
        return self is not Op.PEEK

    def eval(self, ctx, inputs):
        if self is Op.ADD:
            return [inputs[0] + inputs[1]]
        if self in (Op.PEEK, Op.IDENT):
            return [inputs[0]]
        return [2 * inputs[0]]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        CALLS[self, "jvp"] += 1
        [t] = tangent_inputs
        if self is Op.PEEK:
            if type(primal_inputs[0]) is Input:
                return [t]
            return builder.add_primitive(Op.IDENT, [Local(t)], LIN)
        if self is Op.TWICE:
            builder.add_primitive(Op.DOUBLE, [Local(t)], LIN)
        if self is Op.SIZED:
            assert len(builder) > t
        return builder.add_primitive(Op.DOUBLE, [Local(t)], LIN)

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        CALLS[self, "transpose"] += 1
        if self is Op.ADD:
            return [cotangent_outputs[0], cotangent_outputs[0]]
        if self is Op.IDENT:
            return [cotangent_outputs[0]]
        return builder.add_primitive(Op.DOUBLE, [Local(cotangent_outputs[0])], LIN)


def op_chain(op, n=10):
    b = GraphBuilder()
    x = b.add_input("x")
    for _ in range(n):
        [x] = b.add_operation(op, [Local(x)])
    b.set_outputs([x])
    return b.build()


def count_ops(graph, op):
    return sum(1 for node in graph.operations if node.operation is op)


def test_structural_rule_is_called_once_per_pattern():
    CALLS.clear()
    graph = op_chain(Op.DOUBLE)
    lin = linearize(graph, graph.output_keys, ["x"])
    tr = linear_transpose(lin)
    assert CALLS == {(Op.DOUBLE, "jvp"): 1, (Op.DOUBLE, "transpose"): 1}
    assert count_ops(lin.graph, Op.DOUBLE) == 10 and count_ops(tr.graph, Op.DOUBLE) == 10


@pytest.mark.parametrize("op, emitted, count", [
    (Op.TWICE, Op.DOUBLE, 10),       # its emission is found already built
    (Op.SIZED, Op.DOUBLE, 10),       # it uses builder methods other than add_primitive
    (Op.PEEK, Op.IDENT, 9),          # not structural; all but the first read a Derived key
])
def test_rules_that_cannot_be_replayed_are_called_every_time(op, emitted, count):
    CALLS.clear()
    graph = op_chain(op)
    lin = linearize(graph, graph.output_keys, ["x"])
    assert CALLS[op, "jvp"] == 10
    assert count_ops(lin.graph, emitted) == count


def test_failing_structural_rule_raises_at_every_node():
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    [p] = b.add_operation(ScalarOp.MUL, [Local(x), Local(y)], LIN_TT)
    [q] = b.add_operation(ScalarOp.MUL, [Local(p), Local(y)], LIN_TT)
    b.set_outputs([q])
    graph = b.build()
    bad = LinearizedGraph(graph, [("x", x), ("y", y)], [q])
    for _ in range(2):
        with pytest.raises(ADRuleError, match="MUL"):
            linear_transpose(bad)
