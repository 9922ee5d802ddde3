"""``try_backward`` on eager traces: gradients checked against hand-derived derivatives.

Mirrors tidu-rs's eager tests (``x*x``, one input used twice, dependency
ordering across nodes, a multi-op graph as one node, a multi-output op seeded
on a non-zero slot, inactive inputs, no trace, a 100,000-node trace, backward
twice) and goes beyond: diamonds, wide fan-out, recomputation counted through
the executor, detached values, complex numbers. Most low-level tests run with
both the default ``ScalarExecutor`` (fused plans) and a minimal executor that
has only the required methods (its ``execute_forward`` replays primal values
and runs each node's transpose, through the default ``run_transposed_linear``).
"""

from __future__ import annotations

import cmath
import dataclasses
import enum
import gc
import math
import warnings
import weakref

import pytest

from primitives.scalar import ImmediateScalarBuilder, Pow, ScalarExecutor, ScalarOp, Scale
from primitives.scalar.eager import Scalar, apply, conj, cos, exp, sin, sincos
from tidu import Primitive, TiduError, linear_transpose_with_builder
from tidu.eager import (BackwardExecutor, EagerError, EagerInput, RecordedGraph, Recorder,
                        try_backward)
from tidu.graph import EvaluableGraphOperation, GraphBuilder, Input, Linearized, Local, compiled


def close(a, b, rel=1e-12, abs_=1e-12) -> bool:
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


# --- executors ---------------------------------------------------------------------


class Counting:
    """Records every graph an executor is asked to run forward (one per node run)."""

    def __init__(self) -> None:
        self.graphs = []

    @property
    def calls(self) -> int:
        return len(self.graphs)

    def computed_keys(self) -> set:
        """Every value key some op of an ``execute_forward`` call computed."""
        return {key for graph in self.graphs for op_key in graph.operation_keys
                for key in op_key.output_keys()}

    def ops_run(self) -> int:
        return sum(len(graph.operations) for graph in self.graphs)

    def execute_forward(self, graph, initial_data):
        self.graphs.append(graph)
        return dict(zip(graph.output_keys, compiled(graph).run(initial_data)))


class CountingExecutor(Counting, ScalarExecutor):
    """``ScalarExecutor`` that counts its forward runs (an override: backward calls it)."""


class MinimalExecutor(Counting, BackwardExecutor):
    """Only the hooks a runtime must write: ``execute_forward`` and ``add_operands``."""

    def add_operands(self, a, b):
        return a + b


EXECUTORS = [ScalarExecutor, MinimalExecutor]
EXECUTOR_IDS = ["ScalarExecutor", "MinimalExecutor"]


# --- low-level recording helpers (the tutorial's driver) ---------------------------


def leaf(recorder: Recorder, value, requires_grad: bool = True) -> EagerInput:
    [key] = recorder.fresh_input_keys(1)
    return EagerInput(Input(key), None, requires_grad, value)


def record_primitive(recorder: Recorder, op, inputs):
    """Execute ``op`` now and record it as a one-op graph; return its outputs as ``EagerInput``s."""
    values = op.eval(None, [item.data for item in inputs])
    recorded = RecordedGraph.from_primitive(op, recorder.fresh_input_keys(len(inputs)))
    outs = recorder.record_graph(recorded, inputs, values)
    return [EagerInput(o.key, o.trace, o.requires_grad, v) for o, v in zip(outs, values)]


def backward(item: EagerInput, executor, seed=1.0) -> dict:
    return try_backward(item.key, item.trace, seed, executor)


# --- x * x -------------------------------------------------------------------------


def test_x_times_x_frontend():
    x = Scalar(3.0, requires_grad=True)
    y = x * x
    assert y.value == 9.0
    grads = y.backward()
    assert grads[x.key] == 6.0
    assert grads[y.key] == 1.0
    assert set(grads) == {x.key, y.key}


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_x_times_x_low_level(make_executor):
    recorder = Recorder()
    x = leaf(recorder, 3.0)
    [y] = record_primitive(recorder, ScalarOp.MUL, [x, x])
    assert y.data == 9.0
    executor = make_executor()
    grads = backward(y, executor)
    assert grads == {y.key: 1.0, x.key: 6.0}
    # seed scales linearly
    assert backward(y, executor, seed=0.5)[x.key] == 3.0
    if isinstance(executor, MinimalExecutor):
        assert executor.calls == 2            # one node, one graph run per backward


def test_executors_agree_on_a_chain():
    """The default executor and the tutorial-style one give the same gradients."""
    recorder = Recorder()
    x = leaf(recorder, 0.7)
    [s] = record_primitive(recorder, ScalarOp.SIN, [x])
    [p] = record_primitive(recorder, ScalarOp.MUL, [s, x])
    [e] = record_primitive(recorder, ScalarOp.EXP, [p])
    [y] = record_primitive(recorder, ScalarOp.SUB, [e, x])
    a = backward(y, ScalarExecutor())
    b = backward(y, MinimalExecutor())
    by_hand = math.exp(math.sin(0.7) * 0.7) * (math.cos(0.7) * 0.7 + math.sin(0.7)) - 1.0
    assert close(a[x.key], by_hand) and close(b[x.key], by_hand)
    assert set(a) == set(b) == {x.key, s.key, p.key, e.key, y.key}
    for key in a:
        assert close(a[key], b[key])
    # intermediates get their own cotangents: d y / d p = exp(p)
    assert close(a[p.key], math.exp(math.sin(0.7) * 0.7))
    assert close(a[s.key], math.exp(math.sin(0.7) * 0.7) * 0.7)


def test_custom_key_source():
    """A user ``KeySource`` (here: strings) works like the default counter."""

    class Names:
        def __init__(self):
            self.n = 0

        def fresh_input_key(self):
            self.n += 1
            return f"k{self.n}"

    recorder = Recorder(Names())
    x = EagerInput(Input("x"), None, True, 3.0)
    [y] = record_primitive(recorder, ScalarOp.MUL, [x, x])
    [z] = record_primitive(recorder, ScalarOp.MUL, [y, x])        # x**3
    for executor in (ScalarExecutor(), MinimalExecutor()):
        grads = backward(z, executor)
        assert grads[Input("x")] == 27.0
        assert grads[y.key] == 3.0


# --- accumulation ------------------------------------------------------------------


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_one_input_used_twice_across_nodes(make_executor):
    # y = sin(x) * x: x reaches y through two different nodes
    recorder = Recorder()
    x = leaf(recorder, 1.1)
    [s] = record_primitive(recorder, ScalarOp.SIN, [x])
    [y] = record_primitive(recorder, ScalarOp.MUL, [s, x])
    grads = backward(y, make_executor())
    assert close(grads[x.key], math.cos(1.1) * 1.1 + math.sin(1.1))


def test_input_used_many_times_in_a_sum():
    x = Scalar(0.25, requires_grad=True)
    total = x
    for _ in range(999):
        total = total + x
    assert total.backward()[x.key] == 1000.0


def test_power_by_repeated_multiplication():
    x = Scalar(1.5, requires_grad=True)
    y = x * x * x * x * x            # x used 5 times, across 4 nodes
    assert close(y.backward()[x.key], 5 * 1.5 ** 4)


def test_wide_fan_out():
    # y = sum_i sin(i * x): x fans out to 50 nodes
    x0 = 0.3
    x = Scalar(x0, requires_grad=True)
    y = Scalar(0.0)
    for i in range(1, 51):
        y = y + sin(x * float(i))
    want = sum(i * math.cos(i * x0) for i in range(1, 51))
    assert close(y.backward()[x.key], want, rel=1e-11)


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_diamond(make_executor):
    # y = sin(x) * exp(x): two paths from x meet at one node
    x0 = 0.6
    x = Scalar(x0, requires_grad=True)
    y = sin(x) * exp(x)
    grads = y.backward(executor=make_executor())
    assert close(grads[x.key], (math.cos(x0) + math.sin(x0)) * math.exp(x0))


def test_nested_diamonds():
    # repeated diamonds: y_{k+1} = y_k * y_k + y_k  =>  dy_{k+1} = (2 y_k + 1) dy_k
    x = Scalar(0.1, requires_grad=True)
    y, v, d = x, 0.1, 1.0
    for _ in range(20):
        y = y * y + y
        d *= 2 * v + 1
        v = v * v + v
    assert close(y.value, v)
    assert close(y.backward()[x.key], d, rel=1e-10)


def test_two_inputs_and_seed():
    x0, y0 = 0.8, -1.3
    x = Scalar(x0, requires_grad=True)
    y = Scalar(y0, requires_grad=True)
    f = x * y + sin(x) / y - y ** 3
    grads = f.backward(seed=2.0)
    assert close(grads[x.key], 2.0 * (y0 + math.cos(x0) / y0))
    assert close(grads[y.key], 2.0 * (x0 - math.sin(x0) / y0 ** 2 - 3 * y0 ** 2))


# --- dependency ordering across nodes ----------------------------------------------


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_value_used_by_an_earlier_and_a_later_node(make_executor):
    # u = exp(x); w = u * x; z = w + u  =>  dz/dx = e^x (x + 2)
    # u's node may run only after both w's and z's have sent it their cotangents.
    recorder = Recorder()
    x0 = 0.4
    x = leaf(recorder, x0)
    [u] = record_primitive(recorder, ScalarOp.EXP, [x])
    [w] = record_primitive(recorder, ScalarOp.MUL, [u, x])
    for order in ([w, u], [u, w]):
        [z] = record_primitive(recorder, ScalarOp.ADD, order)
        grads = backward(z, make_executor())
        assert close(grads[x.key], math.exp(x0) * (x0 + 2))
        assert close(grads[u.key], x0 + 1)


def test_short_and_long_path_to_the_same_value():
    # u = sin(x); p = u passed through 30 scalings by 1.1; z = u + p (and p + u)
    x0 = 0.9
    for short_first in (True, False):
        x = Scalar(x0, requires_grad=True)
        u = sin(x)
        p = u
        for _ in range(30):
            p = p * 1.1
        z = u + p if short_first else p + u
        grads = z.backward()
        assert close(grads[u.key], 1 + 1.1 ** 30, rel=1e-11)
        assert close(grads[x.key], (1 + 1.1 ** 30) * math.cos(x0), rel=1e-11)


# --- a multi-op graph recorded as one node ------------------------------------------


def composite(recorder: Recorder):
    """``f(a, b) = sin(a) * b + a`` as a ``RecordedGraph``; returns it and its intermediate keys."""
    ka, kb = recorder.fresh_input_keys(2)
    builder = GraphBuilder()
    a = builder.add_input(ka)
    b = builder.add_input(kb)
    [s] = builder.add_operation(ScalarOp.SIN, [Local(a)])
    [p] = builder.add_operation(ScalarOp.MUL, [Local(s), Local(b)])
    [o] = builder.add_operation(ScalarOp.ADD, [Local(p), Local(a)])
    builder.set_outputs([o])
    graph = builder.build()
    recorded = RecordedGraph(graph, [ka, kb], graph.output_keys)
    return recorded, graph.value_keys[s], graph.value_keys[p]


@pytest.mark.parametrize("retain", [False, True], ids=["recompute", "retained"])
@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_composite_node_gradients(make_executor, retain):
    recorder = Recorder()
    recorded, sin_key, mul_key = composite(recorder)
    a0, b0 = 0.7, 1.3
    a = leaf(recorder, a0)
    b = leaf(recorder, b0)
    value = math.sin(a0) * b0 + a0
    retained = {sin_key: math.sin(a0), mul_key: math.sin(a0) * b0} if retain else None
    [y] = recorder.record_graph(recorded, [a, b], [value], retained_values=retained)
    grads = try_backward(y.key, y.trace, 1.0, make_executor())
    assert set(grads) == {y.key, a.key, b.key}
    assert close(grads[a.key], math.cos(a0) * b0 + 1.0)
    assert close(grads[b.key], math.sin(a0))


def test_composite_recomputes_intermediates_unless_retained():
    recorder = Recorder()
    recorded, sin_key, mul_key = composite(recorder)
    a0, b0 = 0.7, 1.3
    a, b = leaf(recorder, a0), leaf(recorder, b0)
    value = math.sin(a0) * b0 + a0

    [y] = recorder.record_graph(recorded, [a, b], [value])
    plain = MinimalExecutor()
    g1 = try_backward(y.key, y.trace, 1.0, plain)
    # sin(a) is needed (MUL's transpose reads it) and not saved: execute_forward replays it,
    # then runs the node's transpose (the default run_transposed_linear)
    assert sin_key in plain.computed_keys()
    assert plain.calls == 2
    assert sin_key in plain.graphs[0].output_keys             # the replay comes first

    retained = {sin_key: math.sin(a0), mul_key: math.sin(a0) * b0}
    [y2] = recorder.record_graph(recorded, [a, b], [value], retained_values=retained)
    kept = MinimalExecutor()
    g2 = try_backward(y2.key, y2.trace, 1.0, kept)
    assert sin_key not in kept.computed_keys() and mul_key not in kept.computed_keys()
    # only cos(a), the derivative of sin, which the recorded graph never computed
    assert kept.ops_run() < plain.ops_run()
    assert g1[a.key] == g2[a.key] and g1[b.key] == g2[b.key]

    # retained values are what backward uses: a wrong retained sin(a) changes b's gradient
    wrong = {sin_key: 10.0, mul_key: 10.0 * b0}
    [y3] = recorder.record_graph(recorded, [a, b], [value], retained_values=wrong)
    assert try_backward(y3.key, y3.trace, 1.0, ScalarExecutor())[b.key] == 10.0


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
@pytest.mark.parametrize("retained_on", ["newer", "older"])
def test_two_nodes_of_one_composite_graph_retaining_differently(make_executor, retained_on):
    """A composite node's plan depends on the values it retained: two nodes of one recorded
    graph in one walk, only one of them retaining, each run their own plan."""
    recorder = Recorder()
    recorded, sin_key, mul_key = composite(recorder)
    a0, b0 = 0.7, 1.3
    a, b = leaf(recorder, a0), leaf(recorder, b0)

    def f(u):
        return math.sin(u) * b0 + u

    def retained(u):
        return {sin_key: math.sin(u), mul_key: math.sin(u) * b0}

    [y1] = recorder.record_graph(recorded, [a, b], [f(a0)],
                                 retained_values=retained(a0) if retained_on == "older" else None)
    y1_in = EagerInput(y1.key, y1.trace, True, f(a0))
    [y2] = recorder.record_graph(recorded, [y1_in, b], [f(f(a0))],
                                 retained_values=retained(f(a0)) if retained_on == "newer"
                                 else None)
    grads = try_backward(y2.key, y2.trace, 1.0, make_executor())
    slope1, slope2 = math.cos(a0) * b0 + 1.0, math.cos(f(a0)) * b0 + 1.0
    assert close(grads[a.key], slope2 * slope1)
    assert close(grads[b.key], slope2 * math.sin(a0) + math.sin(f(a0)))


@pytest.mark.parametrize("make_executor", [CountingExecutor, MinimalExecutor],
                         ids=["ScalarExecutor", "MinimalExecutor"])
def test_composite_retained_values_skip_recomputation(make_executor):
    # f(a, b) = exp(a) * b + a: every value its backward reads is in the recorded graph,
    # so with exp(a) retained nothing is recomputed.
    recorder = Recorder()
    ka, kb = recorder.fresh_input_keys(2)
    builder = GraphBuilder()
    ia, ib = builder.add_input(ka), builder.add_input(kb)
    [e] = builder.add_operation(ScalarOp.EXP, [Local(ia)])
    [p] = builder.add_operation(ScalarOp.MUL, [Local(e), Local(ib)])
    [o] = builder.add_operation(ScalarOp.ADD, [Local(p), Local(ia)])
    builder.set_outputs([o])
    graph = builder.build()
    recorded = RecordedGraph(graph, [ka, kb], graph.output_keys)
    exp_key = graph.value_keys[e]
    a0, b0 = -0.4, 2.5
    a, b = leaf(recorder, a0), leaf(recorder, b0)
    value = math.exp(a0) * b0 + a0

    [y] = recorder.record_graph(recorded, [a, b], [value])
    plain = make_executor()
    g1 = try_backward(y.key, y.trace, 1.0, plain)
    [y2] = recorder.record_graph(recorded, [a, b], [value], retained_values={exp_key: math.exp(a0)})
    kept = make_executor()
    g2 = try_backward(y2.key, y2.trace, 1.0, kept)

    assert exp_key in plain.computed_keys()
    assert exp_key not in kept.computed_keys()
    assert plain.ops_run() == kept.ops_run() + 1    # exactly one recomputation saved
    assert (plain.calls, kept.calls) == (2, 1)       # a replay, then the transpose; no replay
    for grads in (g1, g2):
        assert close(grads[a.key], math.exp(a0) * b0 + 1.0)
        assert close(grads[b.key], math.exp(a0))


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_composite_between_primitive_nodes(make_executor):
    # u = exp(x) (primitive); y = f(u, x) (composite node); z = y * u (primitive)
    recorder = Recorder()
    recorded, _, _ = composite(recorder)
    x0 = 0.35
    x = leaf(recorder, x0)
    [u] = record_primitive(recorder, ScalarOp.EXP, [x])
    u0 = u.data
    [y_out] = recorder.record_graph(recorded, [u, x], [math.sin(u0) * x0 + u0])
    y = EagerInput(y_out.key, y_out.trace, True, math.sin(u0) * x0 + u0)
    [z] = record_primitive(recorder, ScalarOp.MUL, [y, u])
    grads = backward(z, make_executor())
    # z = (sin(e^x) x + e^x) e^x
    f = math.sin(u0) * x0 + u0
    df = math.cos(u0) * u0 * x0 + math.sin(u0) + u0
    assert close(grads[x.key], df * u0 + f * u0)
    assert close(grads[y.key], u0)


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_multi_output_composite(make_executor):
    # one node with outputs (sin(a) * b, a * b); downstream uses slot 1, slot 0, or both
    recorder = Recorder()
    ka, kb = recorder.fresh_input_keys(2)
    builder = GraphBuilder()
    ia, ib = builder.add_input(ka), builder.add_input(kb)
    [s] = builder.add_operation(ScalarOp.SIN, [Local(ia)])
    [p] = builder.add_operation(ScalarOp.MUL, [Local(s), Local(ib)])
    [q] = builder.add_operation(ScalarOp.MUL, [Local(ia), Local(ib)])
    builder.set_outputs([p, q])
    graph = builder.build()
    recorded = RecordedGraph(graph, [ka, kb], graph.output_keys)
    a0, b0 = 0.5, -2.0
    a, b = leaf(recorder, a0), leaf(recorder, b0)
    values = [math.sin(a0) * b0, a0 * b0]
    out0, out1 = recorder.record_graph(recorded, [a, b], values)
    assert out0.trace is out1.trace
    executor = make_executor()

    g1 = try_backward(out1.key, out1.trace, 1.0, executor)
    assert set(g1) == {out1.key, a.key, b.key}
    assert close(g1[a.key], b0) and close(g1[b.key], a0)

    g0 = try_backward(out0.key, out0.trace, 1.0, executor)
    assert set(g0) == {out0.key, a.key, b.key}
    assert close(g0[a.key], math.cos(a0) * b0) and close(g0[b.key], math.sin(a0))

    # both slots: t = 3 * out0 + out1
    i0 = EagerInput(out0.key, out0.trace, True, values[0])
    i1 = EagerInput(out1.key, out1.trace, True, values[1])
    three = leaf(recorder, 3.0, requires_grad=False)
    [m] = record_primitive(recorder, ScalarOp.MUL, [three, i0])
    [t] = record_primitive(recorder, ScalarOp.ADD, [m, i1])
    g = backward(t, executor)
    assert close(g[a.key], 3 * math.cos(a0) * b0 + b0)
    assert close(g[b.key], 3 * math.sin(a0) + a0)
    assert three.key not in g


# --- a multi-output primitive --------------------------------------------------------


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_sincos_seeded_on_one_slot(make_executor):
    x0 = 0.4
    executor = make_executor()
    x = Scalar(x0, requires_grad=True)
    s, c = sincos(x)
    assert (s.value, c.value) == (math.sin(x0), math.cos(x0))
    assert s.trace is c.trace

    g_cos = c.backward(executor=executor)             # only slot 1 carries a cotangent
    assert set(g_cos) == {c.key, x.key}
    assert close(g_cos[x.key], -math.sin(x0))

    g_sin = s.backward(seed=2.0, executor=executor)   # only slot 0
    assert set(g_sin) == {s.key, x.key}
    assert close(g_sin[x.key], 2.0 * math.cos(x0))

    y = s * 2.0 + c * 3.0                             # both slots
    g = y.backward(executor=executor)
    assert close(g[x.key], 2 * math.cos(x0) - 3 * math.sin(x0))
    assert close(g[s.key], 2.0) and close(g[c.key], 3.0)


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_sincos_low_level_slot_1(make_executor):
    recorder = Recorder()
    x = leaf(recorder, 1.2)
    s, c = record_primitive(recorder, ScalarOp.SINCOS, [x])
    assert s.trace is c.trace and s.key != c.key
    grads = backward(c, make_executor(), seed=-1.5)
    assert grads == {c.key: -1.5, x.key: pytest.approx(1.5 * math.sin(1.2), rel=1e-14)}


# --- inactive inputs ------------------------------------------------------------------


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_inactive_inputs_get_nothing(make_executor):
    recorder = Recorder()
    x = leaf(recorder, 2.0)
    y = leaf(recorder, 5.0, requires_grad=False)
    [p] = record_primitive(recorder, ScalarOp.MUL, [x, y])
    [q] = record_primitive(recorder, ScalarOp.SIN, [y])             # no input requires grad
    assert q.trace is None and not q.requires_grad
    [z] = record_primitive(recorder, ScalarOp.ADD, [p, q])
    grads = backward(z, make_executor())
    assert y.key not in grads and q.key not in grads
    assert grads == {z.key: 1.0, p.key: 1.0, x.key: 5.0}


def test_inactive_inputs_frontend():
    x = Scalar(2.0, requires_grad=True)
    c = Scalar(7.0)
    y = x * c + c * c
    grads = y.backward()
    assert grads[x.key] == 7.0
    assert c.key not in grads


def test_detached_value_blocks_its_history():
    # a value that has a trace but is passed with requires_grad=False: nothing flows through it
    recorder = Recorder()
    x = leaf(recorder, 0.3)
    [u] = record_primitive(recorder, ScalarOp.SIN, [x])
    detached = EagerInput(u.key, u.trace, False, u.data)
    w = leaf(recorder, 4.0)
    [z] = record_primitive(recorder, ScalarOp.MUL, [detached, w])
    executor = MinimalExecutor()
    grads = backward(z, executor)
    assert grads == {z.key: 1.0, w.key: math.sin(0.3)}
    assert executor.calls == 1                    # the SIN node is never run backward


# --- no trace ---------------------------------------------------------------------------


def test_no_trace_when_nothing_requires_grad():
    y = Scalar(2.0) * Scalar(3.0)
    assert y.value == 6.0 and y.trace is None and not y.requires_grad
    with pytest.raises(EagerError, match=r"Scalar\(6\.0\).*does not require grad"):
        y.backward(seed=5.0)                 # as in PyTorch: nothing to differentiate

    recorder = Recorder()
    x = leaf(recorder, 2.0, requires_grad=False)
    recorded = RecordedGraph.from_primitive(ScalarOp.SINCOS, recorder.fresh_input_keys(1))
    outs = recorder.record_graph(recorded, [x], ScalarOp.SINCOS.eval(None, [2.0]))
    assert [(o.trace, o.requires_grad, o.output_slot) for o in outs] == [(None, False, 0),
                                                                       (None, False, 1)]
    assert outs[0].key != outs[1].key
    assert try_backward(outs[1].key, None, 1.5, ScalarExecutor()) == {outs[1].key: 1.5}


def test_backward_from_a_leaf():
    x = Scalar(2.0, requires_grad=True)
    assert x.trace is None
    assert x.backward(seed=3.0) == {x.key: 3.0}


# --- a 100,000-node trace ----------------------------------------------------------------


def test_hundred_thousand_nodes():
    steps = 33_334                                  # 3 recorded ops per step
    x0, c0 = 0.5, 0.1
    x = Scalar(x0, requires_grad=True)
    c = Scalar(c0, requires_grad=True)
    ys = [x]
    y = x
    for _ in range(steps):
        y = sin(y) * y + c
        ys.append(y)
    first = weakref.ref(ys[1].trace)
    grads = y.backward()

    # forward mode by hand: (value, d/dx, d/dc)
    v, dx, dc = x0, 1.0, 0.0
    values = [v]
    for _ in range(steps):
        slope = math.cos(v) * v + math.sin(v)
        v, dx, dc = math.sin(v) * v + c0, slope * dx, slope * dc + 1.0
        values.append(v)
    assert y.value == v
    assert close(grads[c.key], dc, rel=1e-10)
    assert close(grads.get(x.key, 0.0), dx, rel=1e-10)

    # reverse mode by hand: the cotangent of every y_k
    ct = 1.0
    for k in range(steps, steps - 2000, -1):
        assert close(grads[ys[k].key], ct, rel=1e-10), k
        ct *= math.cos(values[k - 1]) * values[k - 1] + math.sin(values[k - 1])

    # dropping the whole trace at once frees it without deep recursion
    del ys, grads
    del y
    gc.collect()
    assert first() is None


# --- backward twice --------------------------------------------------------------------


def _all_saved(scalars):
    return [dict(s.trace.saved_values) for s in scalars]


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_backward_twice_same_result_trace_unchanged(make_executor):
    x = Scalar(0.8, requires_grad=True)
    w = Scalar(-0.3, requires_grad=True)
    a = sin(x) * w
    s, c = sincos(a)
    b = exp(s) + c * x
    y = b * b + apply(Pow(3), a)
    nodes = [a, s, c, b, y]
    before = _all_saved(nodes)
    executor = make_executor()
    first = y.backward(executor=executor)
    assert _all_saved(nodes) == before
    second = y.backward(executor=executor)
    assert first == second
    assert _all_saved(nodes) == before
    # and a different output of the same trace is unaffected by the earlier runs
    assert close(c.backward(executor=executor)[x.key], -math.sin(a.value) * math.cos(0.8) * -0.3)


def test_backward_twice_composite_with_recomputation():
    recorder = Recorder()
    recorded, sin_key, _ = composite(recorder)
    a, b = leaf(recorder, 0.2), leaf(recorder, 0.9)
    [y] = recorder.record_graph(recorded, [a, b], [math.sin(0.2) * 0.9 + 0.2])
    before = dict(y.trace.saved_values)
    assert sin_key not in before
    first = try_backward(y.key, y.trace, 1.0, ScalarExecutor())
    second = try_backward(y.key, y.trace, 1.0, ScalarExecutor())
    assert first == second
    assert dict(y.trace.saved_values) == before    # recomputed values are not stored back


# --- complex numbers ----------------------------------------------------------------------


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
@pytest.mark.parametrize("z0", [1 + 2j, -0.3 + 0.8j, 2.5 - 0.1j])
def test_complex_abs_squared(make_executor, z0):
    z = Scalar(z0, requires_grad=True)
    m = z * conj(z)
    assert close(m.value, abs(z0) ** 2)
    assert close(m.backward(executor=make_executor())[z.key], 2 * z0)


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
@pytest.mark.parametrize("z0", [1 + 2j, -0.3 + 0.8j])
def test_complex_holomorphic(make_executor, z0):
    executor = make_executor()
    z = Scalar(z0, requires_grad=True)
    assert close(exp(z).backward(executor=executor)[z.key], cmath.exp(z0).conjugate())
    # holomorphic f: cotangent = seed * conj(f'(z))
    seed = 0.5 - 1.5j
    f = sin(z) * z
    want = seed * (cmath.cos(z0) * z0 + cmath.sin(z0)).conjugate()
    assert close(f.backward(seed=seed, executor=executor)[z.key], want)
    # cos via the frontend too
    assert close(cos(z).backward(executor=executor)[z.key], (-cmath.sin(z0)).conjugate())


def test_complex_composite_node():
    # |e^z|^2 = e^z * conj(e^z) as one recorded node: d/dz-bar... gradient is 2 e^{2 Re z}
    recorder = Recorder()
    [k] = recorder.fresh_input_keys(1)
    builder = GraphBuilder()
    i = builder.add_input(k)
    [e] = builder.add_operation(ScalarOp.EXP, [Local(i)])
    [ce] = builder.add_operation(ScalarOp.CONJ, [Local(e)])
    [m] = builder.add_operation(ScalarOp.MUL, [Local(e), Local(ce)])
    builder.set_outputs([m])
    graph = builder.build()
    z0 = 0.3 - 0.7j
    z = leaf(recorder, z0)
    [y] = recorder.record_graph(RecordedGraph(graph, [k], graph.output_keys), [z],
                                [abs(cmath.exp(z0)) ** 2])
    for executor in (ScalarExecutor(), MinimalExecutor()):
        g = try_backward(y.key, y.trace, 1.0, executor)[z.key]
        # f(z) = exp(2x): the real gradient is (2 e^{2x}, 0), as a complex number 2 e^{2x}
        assert close(g, 2 * math.exp(2 * z0.real))


def test_composite_passing_an_input_through_twice():
    recorder = Recorder()
    [k] = recorder.fresh_input_keys(1)
    builder = GraphBuilder()
    i = builder.add_input(k)
    [s] = builder.add_operation(ScalarOp.SIN, [Local(i)])
    builder.set_outputs([i, i, s])
    graph = builder.build()
    x = leaf(recorder, 2.0)
    outs = recorder.record_graph(RecordedGraph(graph, [k], graph.output_keys), [x],
                                 [2.0, 2.0, math.sin(2.0)])
    first, second = (EagerInput(o.key, o.trace, True, 2.0) for o in outs[:2])
    [t] = record_primitive(recorder, ScalarOp.ADD, [first, second])
    assert backward(t, ScalarExecutor())[x.key] == 2.0
    assert backward(t, MinimalExecutor())[x.key] == 2.0


# --- the executor hooks: an override is called, once per node -------------------------------


def make_overriding_executor():
    """An executor that overrides run_transposed_linear the way the seed tutorial does:
    transposes op by op on an immediate builder, counting its calls."""

    class OverridingExecutor(ScalarExecutor):
        def __init__(self) -> None:
            self.transposed_runs = 0

        def run_transposed_linear(self, linear, cotangent_out, external_data, ctx):
            self.transposed_runs += 1
            builder = ImmediateScalarBuilder(external_data)
            seed_ids = [None if ct is None else builder.push(ct) for ct in cotangent_out]
            ids = linear_transpose_with_builder(linear, builder, seed_ids, ctx)
            return [None if i is None else builder.values[i] for i in ids]

    return OverridingExecutor


def test_an_overridden_run_transposed_linear_is_called_once_per_node():
    x = Scalar(0.4, requires_grad=True)
    y = sin(x) * x                                    # two nodes: SIN, MUL
    executor = make_overriding_executor()()
    with warnings.catch_warnings():
        warnings.simplefilter("error")                # no deprecation, no warning at all
        grads = y.backward(executor=executor)
    assert close(grads[x.key], math.cos(0.4) * 0.4 + math.sin(0.4))
    assert executor.transposed_runs == 2
    assert y.backward(executor=executor)[x.key] == grads[x.key]
    assert executor.transposed_runs == 4


def test_a_node_without_a_cotangent_gets_no_run_transposed_linear_call():
    recorder = Recorder()
    x = leaf(recorder, 0.3)
    [u] = record_primitive(recorder, ScalarOp.SIN, [x])
    detached = EagerInput(u.key, u.trace, False, u.data)   # nothing flows into the SIN node
    [z] = record_primitive(recorder, ScalarOp.MUL, [detached, x])
    executor = make_overriding_executor()()
    assert backward(z, executor) == {z.key: 1.0, x.key: math.sin(0.3)}
    assert executor.transposed_runs == 1


def test_run_transposed_linear_that_returns_the_wrong_count_raises_naming_it():
    class Wrong(ScalarExecutor):
        def run_transposed_linear(self, linear, cotangent_out, external_data, ctx):
            return [1.0, 2.0, 3.0]

    x = Scalar(0.4, requires_grad=True)
    with pytest.raises(EagerError, match=r"Wrong\.run_transposed_linear returned 3 values.*SIN"):
        sin(x).backward(executor=Wrong())


def test_calling_run_transposed_linear_directly_works_without_warning():
    from tidu import linearize

    x, w = Scalar(0.4, requires_grad=True), Scalar(3.0, requires_grad=True)
    recorded = (x * w).trace.recorded                 # its transpose reads only x and w
    linear = linearize(recorded.graph, recorded.output_keys, list(recorded.input_keys))
    primals = dict(zip(recorded.graph.input_keys, [0.4, 3.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ScalarExecutor().run_transposed_linear(linear, [2.0], primals, None) == [6.0, 0.8]
        assert MinimalExecutor().run_transposed_linear(linear, [2.0], primals, None) == [6.0, 0.8]
    with pytest.raises(TiduError, match=r"external_data has no value for"):
        ScalarExecutor().run_transposed_linear(linear, [2.0], {}, None)
    with pytest.raises(TiduError, match=r"2 cotangents for the 1 tangent outputs"):
        ScalarExecutor().run_transposed_linear(linear, [2.0, 1.0], primals, None)


# --- plans are keyed by ctx --------------------------------------------------------------------


class Gain(Primitive, EvaluableGraphOperation, enum.Enum):
    """``x`` forward; its JVP multiplies by a gain that the rule reads from ``ctx``."""

    GAIN = "gain"

    @classmethod
    def add(cls):
        return ScalarOp.ADD

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, inputs):
        return [inputs[0]]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        gain = ctx["gain"] if isinstance(ctx, dict) else getattr(ctx, "gain", ctx)
        return builder.add_primitive(Scale(float(gain)), [Local(tangent_inputs[0])],
                                     Linearized((True,)))


@dataclasses.dataclass(frozen=True)
class Settings:
    gain: float


class MutableSettings:
    """Hashed by identity: its gain may change without its hash changing."""

    def __init__(self, gain: float) -> None:
        self.gain = gain


def gain_gradient(ctx) -> float:
    x = Scalar(1.5, requires_grad=True)
    y = apply(Gain.GAIN, x)
    return try_backward(y.key, y.trace, 1.0, ScalarExecutor(), ctx)[x.key]


@pytest.mark.parametrize("make_ctx", [lambda g: {"gain": g}, float, Settings],
                         ids=["dict", "float", "frozen dataclass"])
def test_a_backward_with_another_ctx_never_reuses_the_plan_of_the_first(make_ctx):
    assert gain_gradient(make_ctx(2.0)) == 2.0
    assert gain_gradient(make_ctx(3.0)) == 3.0
    assert gain_gradient(make_ctx(2.0)) == 2.0


def test_a_ctx_hashed_by_identity_gets_fresh_plans_each_call():
    settings = MutableSettings(2.0)
    assert gain_gradient(settings) == 2.0
    settings.gain = 5.0
    assert gain_gradient(settings) == 5.0


# --- keep: only the wanted cotangents, the others released after their last use ---------------


def test_keep_returns_only_the_kept_keys_with_the_same_values():
    x = Scalar(0.3, requires_grad=True)
    w = Scalar(1.7, requires_grad=True)
    h = sin(x) * w
    y = h * h + x
    full = try_backward(y.key, y.trace, 1.0, ScalarExecutor())
    kept = try_backward(y.key, y.trace, 1.0, ScalarExecutor(), keep={x.key, w.key})
    assert kept == {x.key: full[x.key], w.key: full[w.key]}
    assert try_backward(y.key, y.trace, 1.0, ScalarExecutor(), keep={h.key}) == {h.key: full[h.key]}
    assert try_backward(y.key, None, 2.0, ScalarExecutor(), keep=()) == {}


def test_keep_must_be_a_container():
    x = Scalar(0.3, requires_grad=True)
    y = sin(x)
    with pytest.raises(TiduError, match="keep must be a container"):
        try_backward(y.key, y.trace, 1.0, ScalarExecutor(), keep=5)


class Cell:
    """A cotangent as an object whose lifetime a ``weakref.WeakSet`` can follow."""

    def __init__(self, value: float) -> None:
        self.value = value


def test_keep_releases_each_intermediate_cotangent_after_its_last_use():
    # A chain of NEG nodes over Cells: with keep={leaf}, at most a few cotangent cells are
    # alive at once; without, every intermediate's cotangent stays in the result.
    alive = weakref.WeakSet()
    peak = [0]

    class CellExecutor(BackwardExecutor):
        def execute_forward(self, graph, initial_data):
            return dict(zip(graph.output_keys, compiled(graph).run(initial_data)))

        def compile_graph(self, graph, input_keys):
            run = compiled(graph).runner(input_keys)

            def counted(values):
                out = [Cell(v) for v in run([getattr(v, "value", v) for v in values])]
                for cell in out:
                    alive.add(cell)
                peak[0] = max(peak[0], len(alive))
                return out
            return counted

        def add_operands(self, a, b):
            return Cell(a.value + b.value)

    x = Scalar(1.0, requires_grad=True)
    y = x
    for _ in range(50):
        y = -y
    grads = try_backward(y.key, y.trace, Cell(1.0), CellExecutor(), keep={x.key})
    assert list(grads) == [x.key] and grads[x.key].value == 1.0
    assert peak[0] <= 3, peak[0]
    peak[0] = 0
    everything = try_backward(y.key, y.trace, Cell(1.0), CellExecutor())
    assert len(everything) == 51 and peak[0] >= 50
