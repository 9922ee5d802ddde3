"""Eager misuse raises ``TiduError`` subclasses whose message names the culprit.

Never an AssertionError, IndexError, KeyError or a silent wrong answer.
"""

from __future__ import annotations

import enum
import math

import pytest

from primitives.scalar import ScalarExecutor, ScalarOp
from primitives.scalar.eager import Scalar, apply, sin
from tidu import ADRuleError, ADRuleKind, Primitive, TiduError
from tidu.eager import EagerInput, RecordedGraph, Recorder, try_backward
from tidu.graph import EvaluableGraphOperation, GraphBuilder, Input, Linearized, Local


def leaf(recorder, value, requires_grad=True) -> EagerInput:
    [key] = recorder.fresh_input_keys(1)
    return EagerInput(Input(key), None, requires_grad, value)


def mul_graph():
    builder = GraphBuilder()
    a, b = builder.add_input("a"), builder.add_input("b")
    [m] = builder.add_operation(ScalarOp.MUL, [Local(a), Local(b)])
    [n] = builder.add_operation(ScalarOp.NEG, [Local(m)])
    builder.set_outputs([m, n])
    return builder.build()


# --- RecordedGraph ----------------------------------------------------------------


@pytest.mark.parametrize("input_keys, culprit", [
    (["a"], "['a']"),
    (["a", "b", "c"], "'c'"),
    (["b", "a"], "['b', 'a']"),
    (["a", "zz"], "'zz'"),
    ([], "[]"),
])
def test_recorded_graph_input_keys_mismatch(input_keys, culprit):
    graph = mul_graph()
    with pytest.raises(TiduError) as info:
        RecordedGraph(graph, input_keys, graph.output_keys)
    assert culprit in str(info.value)
    assert "input" in str(info.value)


def test_recorded_graph_output_keys_mismatch():
    graph = mul_graph()
    m, n = graph.output_keys
    for bad in ([m], [n, m], [m, n, n], [m, Input("a")], []):
        with pytest.raises(TiduError) as info:
            RecordedGraph(graph, ["a", "b"], bad)
        assert repr(list(bad)) in str(info.value)
        assert "output" in str(info.value)


def test_recorded_graph_needs_a_graph():
    with pytest.raises(TiduError, match="str"):
        RecordedGraph("not a graph", [], [])


def test_from_primitive_wrong_arity():
    with pytest.raises(TiduError) as info:
        RecordedGraph.from_primitive(ScalarOp.MUL, ["only one"])
    assert "MUL" in str(info.value) and "2" in str(info.value)


# --- record_graph -----------------------------------------------------------------


@pytest.mark.parametrize("n_inputs", [0, 1, 3])
def test_record_graph_wrong_number_of_inputs(n_inputs):
    recorder = Recorder()
    graph = mul_graph()
    recorded = RecordedGraph(graph, ["a", "b"], graph.output_keys)
    x = leaf(recorder, 2.0)
    with pytest.raises(TiduError) as info:
        recorder.record_graph(recorded, [x] * n_inputs, [4.0, -4.0])
    message = str(info.value)
    assert "2 inputs" in message and f"got {n_inputs}" in message


@pytest.mark.parametrize("n_outputs", [0, 1, 3])
def test_record_graph_wrong_number_of_outputs(n_outputs):
    recorder = Recorder()
    graph = mul_graph()
    recorded = RecordedGraph(graph, ["a", "b"], graph.output_keys)
    x = leaf(recorder, 2.0)
    with pytest.raises(TiduError) as info:
        recorder.record_graph(recorded, [x, x], [4.0] * n_outputs)
    message = str(info.value)
    assert "2 outputs" in message and f"got {n_outputs}" in message


def test_record_graph_wrong_outputs_for_a_primitive():
    recorder = Recorder()
    recorded = RecordedGraph.from_primitive(ScalarOp.SINCOS, recorder.fresh_input_keys(1))
    with pytest.raises(TiduError) as info:
        recorder.record_graph(recorded, [leaf(recorder, 1.0)], [math.sin(1.0)])
    assert "SINCOS" in str(info.value) and "2 outputs" in str(info.value)


@pytest.mark.parametrize("bad_key", ["x", None, 3])
@pytest.mark.parametrize("requires_grad", [True, False])
def test_eager_input_key_not_a_value_key(bad_key, requires_grad):
    recorder = Recorder()
    recorded = RecordedGraph.from_primitive(ScalarOp.MUL, recorder.fresh_input_keys(2))
    good = leaf(recorder, 2.0)
    bad = EagerInput(bad_key, None, requires_grad, 2.0)
    with pytest.raises(TiduError) as info:
        recorder.record_graph(recorded, [good, bad], [4.0])
    message = str(info.value)
    assert repr(bad_key) in message and "ValueKey" in message and "input 1" in message


def test_eager_input_key_raw_fresh_key():
    # The default source's fresh keys are their own Input keys, so the raw key is no slip.
    recorder = Recorder()
    [raw] = recorder.fresh_input_keys(1)
    assert Input(raw) is raw
    recorded = RecordedGraph.from_primitive(ScalarOp.NEG, recorder.fresh_input_keys(1))
    [y] = recorder.record_graph(recorded, [EagerInput(raw, None, True, 1.0)], [-1.0])
    assert try_backward(y.key, y.trace, 2.0, ScalarExecutor())[raw] == -2.0


# --- backward -----------------------------------------------------------------------


class ForgetfulExecutor(ScalarExecutor):
    """``execute_forward`` drops every value whose key mentions ``forget``."""

    def __init__(self, forget: str) -> None:
        self.forget = forget
        self.dropped = []

    def execute_forward(self, graph, initial_data):
        values = dict(super().execute_forward(graph, initial_data))
        for key in list(values):
            if self.forget in repr(key):
                self.dropped.append(key)
                del values[key]
        return values


def test_executor_omitting_a_needed_value():
    x = Scalar(0.3, requires_grad=True)
    y = sin(x)                        # backward computes ct * cos(x) with execute_forward
    executor = ForgetfulExecutor("MUL")
    with pytest.raises(TiduError) as info:
        y.backward(executor=executor)
    assert executor.dropped
    assert repr(executor.dropped[0]) in str(info.value)
    assert "SIN" in str(info.value)   # and the node whose backward needed it
    # nothing was spoiled: a working executor still gets the right answer
    assert y.backward()[x.key] == math.cos(0.3)


def test_executor_omitting_a_cotangent_of_a_composite_node():
    recorder = Recorder()
    [k] = recorder.fresh_input_keys(1)
    builder = GraphBuilder()
    i = builder.add_input(k)
    [e] = builder.add_operation(ScalarOp.EXP, [Local(i)])
    [m] = builder.add_operation(ScalarOp.MUL, [Local(e), Local(i)])
    builder.set_outputs([m])
    graph = builder.build()
    x = leaf(recorder, 0.5)
    [y] = recorder.record_graph(RecordedGraph(graph, [k], graph.output_keys), [x],
                                [math.exp(0.5) * 0.5])
    executor = ForgetfulExecutor("")                 # every key's repr contains ""
    with pytest.raises(TiduError) as info:
        try_backward(y.key, y.trace, 1.0, executor)
    assert repr(executor.dropped[0]) in str(info.value)
    assert "RecordedGraph" in str(info.value)       # the node whose backward needed it


class NoRules(Primitive, EvaluableGraphOperation, enum.Enum):
    """Test ops: ``NOJVP`` has no JVP rule; ``NOTRANSPOSE``'s JVP emits itself as linear work."""

    NOJVP = "nojvp"
    NOTRANSPOSE = "notranspose"

    @classmethod
    def add(cls):
        return ScalarOp.ADD

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, inputs):
        return [2.0 * inputs[0]]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if self is NoRules.NOTRANSPOSE:
            return builder.add_primitive(self, [Local(tangent_inputs[0])], Linearized((True,)))
        return super().jvp_rule(builder, primal_inputs, primal_outputs, tangent_inputs, ctx)


@pytest.mark.parametrize("op, kind", [(NoRules.NOJVP, ADRuleKind.JVP),
                                      (NoRules.NOTRANSPOSE, ADRuleKind.TRANSPOSE)])
def test_missing_rule(op, kind):
    x = Scalar(1.5, requires_grad=True)
    y = sin(apply(op, x))
    assert y.value == math.sin(3.0)
    with pytest.raises(ADRuleError) as info:
        y.backward()
    assert info.value.op == op.name and info.value.rule is kind
    assert op.name in str(info.value) and kind.value in str(info.value)
    assert isinstance(info.value, TiduError)


def test_missing_rule_of_an_op_in_a_composite_node():
    recorder = Recorder()
    [k] = recorder.fresh_input_keys(1)
    builder = GraphBuilder()
    i = builder.add_input(k)
    [s] = builder.add_operation(ScalarOp.SIN, [Local(i)])
    [n] = builder.add_operation(NoRules.NOJVP, [Local(s)])
    builder.set_outputs([n])
    graph = builder.build()
    x = leaf(recorder, 0.2)
    [y] = recorder.record_graph(RecordedGraph(graph, [k], graph.output_keys), [x],
                                [2.0 * math.sin(0.2)])
    with pytest.raises(ADRuleError, match="NOJVP"):
        try_backward(y.key, y.trace, 1.0, ScalarExecutor())


def test_output_key_not_of_the_trace():
    x = Scalar(1.0, requires_grad=True)
    y = sin(x)
    z = x * x
    for bad in (z.key, x.key, Input("elsewhere")):
        with pytest.raises(TiduError) as info:
            try_backward(bad, y.trace, 1.0, ScalarExecutor())
        assert repr(bad) in str(info.value)


def test_errors_are_also_builtin_errors():
    # EagerError is a ValueError, key errors a TypeError: "except ValueError" keeps working
    recorder = Recorder()
    recorded = RecordedGraph.from_primitive(ScalarOp.NEG, recorder.fresh_input_keys(1))
    with pytest.raises(ValueError):
        recorder.record_graph(recorded, [], [1.0])
    with pytest.raises(TypeError):
        recorder.record_graph(recorded, [EagerInput("x", None, True, 1.0)], [-1.0])
