"""Recording eager invocations: ``Recorder``, ``RecordedGraph``, ``EagerOutput`` and traces."""

from __future__ import annotations

import math

import pytest

from primitives.scalar import Pow, ScalarExecutor, ScalarOp
from primitives.scalar.eager import Scalar, sin, sincos
from tidu.eager import (
    CounterKeySource,
    EagerInput,
    EagerOutput,
    RecordedGraph,
    Recorder,
    Trace,
    try_backward,
)
from tidu import TiduError
from tidu.graph import FreshInput, Graph, GraphBuilder, Input, Local, ValueKey


def leaf(recorder, value, requires_grad=True) -> EagerInput:
    [key] = recorder.fresh_input_keys(1)
    return EagerInput(Input(key), None, requires_grad, value)


def one_op_graph(op, keys) -> Graph:
    builder = GraphBuilder()
    ids = [builder.add_input(k) for k in keys]
    builder.set_outputs(builder.add_operation(op, [Local(i) for i in ids]))
    return builder.build()


def test_fresh_input_keys_are_distinct():
    recorder = Recorder()
    keys = recorder.fresh_input_keys(100)
    assert len(keys) == 100 and len(set(keys)) == 100
    assert all(isinstance(k, FreshInput) for k in keys)
    # the default counter is process-wide: another recorder never repeats a key
    other = Recorder().fresh_input_keys(100)
    assert not set(keys) & set(other)
    assert Recorder(CounterKeySource()).fresh_input_keys(0) == []


def test_custom_key_source_is_used():
    class Named:
        def __init__(self):
            self.n = 0

        def fresh_input_key(self):
            self.n += 1
            return ("k", self.n)

    source = Named()
    recorder = Recorder(source)
    assert recorder.fresh_input_keys(3) == [("k", 1), ("k", 2), ("k", 3)]
    x = EagerInput(Input("x"), None, True, 2.0)
    recorded = RecordedGraph.from_primitive(ScalarOp.NEG, recorder.fresh_input_keys(1))
    [y] = recorder.record_graph(recorded, [x], [-2.0])
    assert y.key == Input(("k", 5))                 # outputs' eager keys come from the source too
    assert try_backward(y.key, y.trace, 1.0, ScalarExecutor())[Input("x")] == -1.0


def test_from_primitive_matches_a_built_graph():
    keys = Recorder().fresh_input_keys(2)
    lazy = RecordedGraph.from_primitive(ScalarOp.MUL, keys)
    built = one_op_graph(ScalarOp.MUL, keys)
    assert lazy.input_keys == tuple(keys)
    assert lazy.output_keys == built.output_keys    # structural keys, without building
    assert lazy.graph.input_keys == built.input_keys
    assert lazy.graph.output_keys == built.output_keys
    assert [n.operation for n in lazy.graph.operations] == [ScalarOp.MUL]
    eager = RecordedGraph(built, keys, built.output_keys)
    assert eager.output_keys == lazy.output_keys and eager.graph is built

    [k] = Recorder().fresh_input_keys(1)
    two = RecordedGraph.from_primitive(ScalarOp.SINCOS, [k])
    assert len(two.output_keys) == 2
    assert two.output_keys == one_op_graph(ScalarOp.SINCOS, [k]).output_keys


def test_eager_keys_are_fresh_not_structural():
    recorder = Recorder()
    x = leaf(recorder, 3.0)
    keys = recorder.fresh_input_keys(2)
    recorded = RecordedGraph.from_primitive(ScalarOp.MUL, keys)
    [y1] = recorder.record_graph(recorded, [x, x], [9.0])
    [y2] = recorder.record_graph(recorded, [x, x], [9.0])    # the same invocation again
    assert isinstance(y1.key, Input) and y1.key.key is y1.key
    assert isinstance(y1.key, ValueKey)
    assert y1.key != y2.key
    assert y1.key not in recorded.output_keys
    assert y1.trace is not y2.trace
    g1 = try_backward(y1.key, y1.trace, 1.0, ScalarExecutor())
    assert g1 == {y1.key: 1.0, x.key: 6.0}                    # nothing about y2


def test_outputs_of_one_invocation_share_one_trace():
    recorder = Recorder()
    x = leaf(recorder, 0.5)
    recorded = RecordedGraph.from_primitive(ScalarOp.SINCOS, recorder.fresh_input_keys(1))
    s, c = recorder.record_graph(recorded, [x], [math.sin(0.5), math.cos(0.5)])
    assert isinstance(s, EagerOutput) and isinstance(c, EagerOutput)
    assert s.trace is c.trace and isinstance(s.trace, Trace)
    assert (s.output_slot, c.output_slot) == (0, 1)
    assert s.requires_grad and c.requires_grad
    assert s.key != c.key


def test_trace_only_when_some_input_requires_grad():
    recorder = Recorder()
    recorded = RecordedGraph.from_primitive(ScalarOp.ADD, recorder.fresh_input_keys(2))
    a = leaf(recorder, 1.0, requires_grad=False)
    b = leaf(recorder, 2.0, requires_grad=False)
    [none] = recorder.record_graph(recorded, [a, b], [3.0])
    assert none.trace is None and none.requires_grad is False and none.output_slot == 0
    assert isinstance(none.key, Input)

    g = leaf(recorder, 2.0, requires_grad=True)
    [some] = recorder.record_graph(recorded, [a, g], [3.0])
    assert some.trace is not None and some.requires_grad is True

    # a traced but inactive input alone does not make a trace either
    x = leaf(recorder, 0.1)
    [u] = recorder.record_graph(RecordedGraph.from_primitive(ScalarOp.SIN,
                                                             recorder.fresh_input_keys(1)),
                                [x], [math.sin(0.1)])
    detached = EagerInput(u.key, u.trace, False, math.sin(0.1))
    [d] = recorder.record_graph(recorded, [detached, a], [math.sin(0.1) + 1.0])
    assert d.trace is None and not d.requires_grad


def test_frontend_records_only_with_grad():
    a, b = Scalar(2.0), Scalar(3.0)
    c = a * b + sin(a)
    assert c.trace is None and not c.requires_grad
    assert c.value == 6.0 + math.sin(2.0)
    x = Scalar(2.0, requires_grad=True)
    d = x * b
    assert d.requires_grad and d.trace is not None
    s, co = sincos(x)
    assert s.trace is co.trace is not None
    # an op on a constant only stays untraced even next to traced values
    assert (b * b).trace is None


def test_saved_values_primitive_node():
    recorder = Recorder()
    keys = recorder.fresh_input_keys(2)
    recorded = RecordedGraph.from_primitive(ScalarOp.MUL, keys)
    x = leaf(recorder, 2.0)
    y = leaf(recorder, 3.0, requires_grad=False)
    [out] = recorder.record_graph(recorded, [x, y], [6.0])
    assert dict(out.trace.saved_values) == {Input(keys[0]): 2.0, Input(keys[1]): 3.0,
                                            recorded.output_keys[0]: 6.0}


def test_saved_values_composite_node_with_retained():
    recorder = Recorder()
    ka, kb = recorder.fresh_input_keys(2)
    builder = GraphBuilder()
    a, b = builder.add_input(ka), builder.add_input(kb)
    [s] = builder.add_operation(ScalarOp.SIN, [Local(a)])
    [p] = builder.add_operation(ScalarOp.MUL, [Local(s), Local(b)])
    [o] = builder.add_operation(Pow(2), [Local(p)])
    builder.set_outputs([o])
    graph = builder.build()
    recorded = RecordedGraph(graph, [ka, kb], graph.output_keys)
    xa, xb = leaf(recorder, 0.4), leaf(recorder, 1.5)
    value = (math.sin(0.4) * 1.5) ** 2
    sin_key = graph.value_keys[s]

    [plain] = recorder.record_graph(recorded, [xa, xb], [value])
    assert dict(plain.trace.saved_values) == {Input(ka): 0.4, Input(kb): 1.5,
                                              graph.output_keys[0]: value}
    retained = {sin_key: math.sin(0.4)}
    [kept] = recorder.record_graph(recorded, [xa, xb], [value], retained_values=retained)
    retained[sin_key] = 99.0                       # the trace keeps its own copy
    assert kept.trace.saved_values[sin_key] == math.sin(0.4)
    assert len(kept.trace.saved_values) == 4

    # d/da (sin(a) b)^2 = 2 sin(a) b^2 cos(a); d/db = 2 sin(a)^2 b
    for out in (plain, kept):
        grads = try_backward(out.key, out.trace, 1.0, ScalarExecutor())
        assert math.isclose(grads[xa.key], 2 * math.sin(0.4) * 1.5 ** 2 * math.cos(0.4),
                            rel_tol=1e-13)
        assert math.isclose(grads[xb.key], 2 * math.sin(0.4) ** 2 * 1.5, rel_tol=1e-13)


def test_input_order_follows_recorded_input_keys():
    # SUB is not symmetric: the i-th EagerInput binds the i-th input key
    recorder = Recorder()
    ka, kb = recorder.fresh_input_keys(2)
    builder = GraphBuilder()
    ib = builder.add_input(kb)                     # graph inputs declared b first
    ia = builder.add_input(ka)
    builder.set_outputs(builder.add_operation(ScalarOp.DIV, [Local(ia), Local(ib)]))
    graph = builder.build()
    recorded = RecordedGraph(graph, [kb, ka], graph.output_keys)
    denom, numer = leaf(recorder, 4.0), leaf(recorder, 3.0)
    [q] = recorder.record_graph(recorded, [denom, numer], [0.75])
    grads = try_backward(q.key, q.trace, 1.0, ScalarExecutor())
    assert grads[numer.key] == 0.25
    assert grads[denom.key] == -3.0 / 16.0


# --- FreshInput: the default eager keys ------------------------------------------------


def test_fresh_input_is_its_own_input_key():
    import pickle

    k = FreshInput()
    assert Input(k) is k and k.key is k and isinstance(k, ValueKey) and type(k) is FreshInput
    with pytest.raises(TypeError):
        FreshInput("a name")                       # a fresh key has none
    assert k != FreshInput() and repr(k).startswith("%")
    builder = GraphBuilder()
    i = builder.add_input(k)                       # works as a graph input key
    builder.set_outputs(builder.add_operation(ScalarOp.SIN, [Local(i)]))
    graph = builder.build()
    assert graph.input_keys == (k,)
    # pickled with its graph, a fresh key stays one key, distinct from the original
    copy = pickle.loads(pickle.dumps(graph))
    [copied] = copy.input_keys
    assert type(copied) is FreshInput and copied is not k
    assert copy.output_keys[0].operation.inputs == (copied,)
    two = pickle.loads(pickle.dumps([k, k]))
    assert two[0] is two[1]


# --- Recorder.record: the frontends' fast path -------------------------------------------


def test_record_returns_the_trace_or_none():
    recorder = Recorder()
    recorded = RecordedGraph.from_primitive(ScalarOp.MUL, ["a", "b"])
    x, c = leaf(recorder, 3.0), leaf(recorder, 2.0, requires_grad=False)
    trace = recorder.record(recorded, [x, c], [6.0])
    assert isinstance(trace, Trace) and len(trace.output_keys) == 1
    assert trace.active_inputs == (0,)
    [key] = trace.output_keys
    assert try_backward(key, trace, 1.0, ScalarExecutor()) == {key: 1.0, x.key: 2.0}
    assert recorder.record(recorded, [c, c], [4.0]) is None


class _NamedKeys:
    """A key source of named keys, not the counter's fresh ones."""

    def __init__(self):
        self.count = 0

    def fresh_input_key(self):
        self.count += 1
        return ("named", self.count)


@pytest.mark.parametrize("key_source", [None, _NamedKeys()])
def test_record_active_is_record_without_the_checks(key_source):
    recorder = Recorder(key_source)
    recorded = RecordedGraph.from_primitive(ScalarOp.SINCOS, ["a"])
    x = leaf(recorder, 0.5)
    by_record = recorder.record(recorded, [x], [math.sin(0.5), math.cos(0.5)])
    by_active = recorder.record_active(recorded, (x,), (0,), (math.sin(0.5), math.cos(0.5)))
    assert by_active.active_inputs == by_record.active_inputs == (0,)
    assert by_active.output_data == by_record.output_data
    assert len(set(by_record.output_keys + by_active.output_keys)) == 4   # all fresh
    if key_source is not None:
        assert [k.key for k in by_active.output_keys] == [("named", 4), ("named", 5)]
    [s, c] = by_active.output_keys
    grads = try_backward(s, by_active, 1.0, ScalarExecutor())
    assert grads[x.key] == pytest.approx(math.cos(0.5))


@pytest.mark.parametrize("flags", [(True,), (False,), (True, True), (True, False),
                                   (False, True), (False, False), (True, False, True),
                                   (False, True, False), (False, False, False)])
def test_record_active_inputs_are_the_positions_that_require_grad(flags):
    recorder = Recorder()
    if len(flags) == 1:
        recorded = RecordedGraph.from_primitive(ScalarOp.SIN, ["a"])
    elif len(flags) == 2:
        recorded = RecordedGraph.from_primitive(ScalarOp.MUL, ["a", "b"])
    else:                                          # a composite graph: x * y + z
        builder = GraphBuilder()
        x, y, z = (builder.add_input(k) for k in "xyz")
        [xy] = builder.add_operation(ScalarOp.MUL, [Local(x), Local(y)])
        builder.set_outputs(builder.add_operation(ScalarOp.ADD, [Local(xy), Local(z)]))
        graph = builder.build()
        recorded = RecordedGraph(graph, list("xyz"), graph.output_keys)
    inputs = [leaf(recorder, 2.0, flag) for flag in flags]
    trace = recorder.record(recorded, inputs, [1.0])
    want = tuple(i for i, flag in enumerate(flags) if flag)
    if not want:
        assert trace is None
        return
    assert trace.active_inputs == want
    [key] = trace.output_keys
    grads = try_backward(key, trace, 1.0, ScalarExecutor())
    assert {k for k in grads if k != key} == {inputs[i].key for i in want}


def test_record_takes_any_object_with_the_eager_input_attributes():
    class Value:                                   # a frontend's own value type
        def __init__(self, data, requires_grad, key=None, trace=None):
            self.data, self.requires_grad, self.key, self.trace = data, requires_grad, key, trace

    recorder = Recorder()
    [k] = recorder.fresh_input_keys(1)
    x = Value(0.7, True, k)
    constant = Value(2.0, False)                   # a key is only needed where grad flows
    recorded = RecordedGraph.from_primitive(ScalarOp.MUL, ["a", "b"])
    trace = recorder.record(recorded, [x, constant], [1.4])
    grads = try_backward(trace.output_keys[0], trace, 1.0, ScalarExecutor())
    assert grads[k] == 2.0
    bad = Value(0.7, True, "not a key")
    with pytest.raises(TiduError) as info:
        recorder.record(recorded, [bad, constant], [1.4])
    assert "'not a key'" in str(info.value) and "input 0" in str(info.value)
