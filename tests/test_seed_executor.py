"""Seed 004's executor on the scalar set: both hooks overridden, each called as the seed says.

The executor is the seed tutorial's, ported: ``execute_forward`` replays a graph
op by op, and ``run_transposed_linear`` runs a node's transpose with
``tidu.linear_transpose_with_builder`` and an immediate builder that evaluates
each primitive as it is added. ``try_backward`` must call
``run_transposed_linear`` exactly once per recorded node that receives a
cotangent, after ``execute_forward`` where the primal must be replayed, and get
the gradients of the default executor (fused plans) and of finite differences,
on random graphs too. ``try_hvp`` and ``create_graph`` honour the hooks as well,
and so does any subclass of ``ScalarExecutor`` that overrides one of them.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given
from test_ad_random import SETTINGS, bounded, random_dags
from test_eager_random import finite_difference, op_by_op

from primitives.scalar import Pow, ScalarExecutor, ScalarOp
from primitives.scalar.eager import Scalar, apply, exp, sin, sincos
from tidu.eager import (
    EagerError,
    EagerInput,
    RecordedGraph,
    Recorder,
    try_backward,
    try_backward_recorded,
    try_hvp,
)
from tidu.graph import GraphBuilder, Input, Local, compiled


def _load_example():
    """``examples/seed_executor.py``, the ported executor this file tests."""
    path = Path(__file__).resolve().parents[1] / "examples" / "seed_executor.py"
    spec = importlib.util.spec_from_file_location("seed_executor_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_EXAMPLE = _load_example()
ScalarBuilder = _EXAMPLE.ScalarBuilder


class SeedExecutor(_EXAMPLE.SeedExecutor):
    """The example's executor (seed 004's), also keeping what each hook was given."""

    def __init__(self) -> None:
        super().__init__()
        self.forward_graphs = []        # every graph execute_forward replayed
        self.transposed = []            # the linear graph of every run_transposed_linear call

    def execute_forward(self, graph, initial_data):
        self.forward_graphs.append(graph)
        return super().execute_forward(graph, initial_data)

    def run_transposed_linear(self, linear, cotangent_outputs, external_data, ctx):
        self.transposed.append(linear)
        return super().run_transposed_linear(linear, cotangent_outputs, external_data, ctx)


def close(a, b, rel=1e-12, abs_=1e-13) -> bool:
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def nodes_with_a_cotangent(output, cotangents: dict) -> int:
    """How many recorded nodes behind ``output`` have an output key that received a
    cotangent (``cotangents``: every key's, as try_backward returns them without keep)."""
    seen, stack = {id(output.trace)}, [output.trace]
    count = 0
    while stack:
        node = stack.pop()
        count += any(key in cotangents for key in node.output_keys)
        for item in node.inputs:
            if item.trace is not None and id(item.trace) not in seen:
                seen.add(id(item.trace))
                stack.append(item.trace)
    return count


# --- the seed's driver, and exact call counts --------------------------------------------------


def test_x_times_x_as_in_the_seed():
    recorder = Recorder()
    [key] = recorder.fresh_input_keys(1)
    x = EagerInput(Input(key), None, True, 3.0)
    recorded = RecordedGraph.from_primitive(ScalarOp.MUL, recorder.fresh_input_keys(2))
    [y] = recorder.record_graph(recorded, [x, x], [9.0])
    executor = SeedExecutor()
    assert try_backward(y.key, y.trace, 1.0, executor) == {y.key: 1.0, x.key: 6.0}
    assert len(executor.transposed) == 1 and executor.forward_graphs == []


def test_one_transpose_per_node_and_a_replay_exactly_where_the_transpose_reads_a_new_value():
    x0, c0, steps = 0.5, 0.1, 20
    x, c = Scalar(x0, requires_grad=True), Scalar(c0, requires_grad=True)
    y = x
    for _ in range(steps):
        y = sin(y) * y + c
    executor = SeedExecutor()
    grads = y.backward(executor=executor)
    assert len(executor.transposed) == 3 * steps
    # SIN's transpose reads cos(y), which no node saved: one replay per SIN node, of COS
    assert len(executor.forward_graphs) == steps
    assert all([op.operation for op in graph.operation_keys] == [ScalarOp.COS]
               for graph in executor.forward_graphs)
    default = y.backward()
    assert set(grads) == set(default)
    assert all(close(grads[k], default[k]) for k in default)


def test_a_node_whose_outputs_get_no_cotangent_is_not_transposed():
    x = Scalar(0.3, requires_grad=True)
    s, c = sincos(x)                       # one node, two outputs; c unused
    unused = exp(x)                        # a node no path to y goes through
    y = s * x
    executor = SeedExecutor()
    grads = y.backward(executor=executor)
    assert len(executor.transposed) == 2   # MUL and SINCOS (seeded on its first slot only)
    assert unused.key not in grads and c.key not in grads
    assert close(grads[x.key], math.cos(0.3) * 0.3 + math.sin(0.3))


def test_a_composite_node_replays_what_it_did_not_retain():
    recorder = Recorder()
    ka, kb = recorder.fresh_input_keys(2)
    builder = GraphBuilder()
    ia, ib = builder.add_input(ka), builder.add_input(kb)
    [e] = builder.add_operation(ScalarOp.EXP, [Local(ia)])
    [p] = builder.add_operation(ScalarOp.MUL, [Local(e), Local(ib)])
    builder.set_outputs(builder.add_operation(ScalarOp.ADD, [Local(p), Local(ia)]))
    graph = builder.build()
    recorded = RecordedGraph(graph, [ka, kb], graph.output_keys)
    exp_key = graph.value_keys[e]
    a0, b0 = -0.4, 2.5
    a = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, a0)
    b = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, b0)
    [value] = compiled(graph).run({Input(ka): a0, Input(kb): b0})
    for retained, replays in ((None, 1), ({exp_key: math.exp(a0)}, 0)):
        [y] = recorder.record_graph(recorded, [a, b], [value], retained_values=retained)
        executor = SeedExecutor()
        grads = try_backward(y.key, y.trace, 1.0, executor)
        assert len(executor.transposed) == 1 and len(executor.forward_graphs) == replays
        assert close(grads[a.key], math.exp(a0) * b0 + 1.0) and close(grads[b.key], math.exp(a0))


def test_a_wrong_retained_value_is_what_the_hooks_read():
    # The external data run_transposed_linear gets is the node's saved data: a wrong retained
    # value changes the gradient (as it does on the fused path), it is not silently recomputed.
    recorder = Recorder()
    [ka] = recorder.fresh_input_keys(1)
    builder = GraphBuilder()
    ia = builder.add_input(ka)
    [s] = builder.add_operation(ScalarOp.SIN, [Local(ia)])
    builder.set_outputs(builder.add_operation(ScalarOp.MUL, [Local(s), Local(ia)]))
    graph = builder.build()
    a = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.7)
    recorded = RecordedGraph(graph, [ka], graph.output_keys)
    [y] = recorder.record_graph(recorded, [a], [math.sin(0.7) * 0.7],
                                retained_values={graph.value_keys[s]: 10.0})
    for executor in (SeedExecutor(), ScalarExecutor()):
        assert close(try_backward(y.key, y.trace, 1.0, executor)[a.key],
                     math.cos(0.7) * 0.7 + 10.0)


# --- random graphs: the default executor and finite differences agree ---------------------------


@SETTINGS
@given(random_dags())
def test_random_graphs_against_the_default_executor_and_finite_differences(case):
    graph, wrt, primals, seed = case
    assume(bounded(graph, primals))
    keys = sorted(primals)
    cts = [float(c) for c in np.random.default_rng(seed).standard_normal(len(graph.output_keys))]
    leaves = {k: Scalar(primals[k], requires_grad=k in wrt) for k in keys}
    loss = sum(c * out for c, out in zip(cts, op_by_op(graph, leaves)))
    assume(isinstance(loss, Scalar) and loss.trace is not None)
    executor = SeedExecutor()
    grads = loss.backward(executor=executor)
    default = loss.backward()
    assert set(grads) == set(default)
    for key, value in default.items():
        assert close(grads[key], value, rel=1e-10), key
    for k in wrt:
        want = finite_difference(graph, primals, cts, k)
        got = grads.get(leaves[k].key, 0.0)
        assert abs(got - want) <= 1e-6 + 1e-5 * abs(want), (k, got, want)
    assert len(executor.transposed) == nodes_with_a_cotangent(loss, default)


# --- second derivatives honour the hooks ---------------------------------------------------------


def test_try_hvp_calls_run_transposed_linear_once_per_node():
    x, w = Scalar(0.4, requires_grad=True), Scalar(-1.3, requires_grad=True)
    y = sin(x * w) * x + exp(w) * w          # 6 nodes
    tangents = {x.key: 0.7, w.key: -0.2}
    executor = SeedExecutor()
    grads, hv = try_hvp(y.key, y.trace, 1.0, tangents, executor)
    want_grads, want_hv = try_hvp(y.key, y.trace, 1.0, tangents, ScalarExecutor())
    assert set(grads) == set(want_grads) and set(hv) == set(want_hv)
    assert all(close(grads[k], want_grads[k]) for k in want_grads)
    assert all(close(hv[k], want_hv[k], rel=1e-11) for k in want_hv)
    assert len(executor.transposed) == 6
    # the tangents' graphs (forward sweep, linearized backward) ran through execute_forward
    assert len(executor.forward_graphs) > 0


def test_create_graph_records_what_the_hooks_computed_and_differentiates_again():
    x = Scalar(0.6, requires_grad=True)
    y = sin(x) * x * x                       # 3 nodes
    executor = SeedExecutor()
    dx = y.backward(create_graph=True, executor=executor)[x.key]
    assert len(executor.transposed) == 3
    want = math.cos(0.6) * 0.36 + 2 * 0.6 * math.sin(0.6)
    assert close(dx.data, want)
    second = SeedExecutor()
    d2x = dx.backward(executor=second)[x.key]
    want2 = -math.sin(0.6) * 0.36 + 4 * 0.6 * math.cos(0.6) + 2 * math.sin(0.6)
    assert close(d2x, want2, rel=1e-11)
    assert close(d2x, y.backward(create_graph=True)[x.key].backward()[x.key], rel=1e-11)
    # double backward walks the recorded backward nodes with the hooks too
    assert len(second.transposed) > 3


def test_create_graph_with_a_run_transposed_linear_that_drops_a_cotangent_raises():
    class Dropping(SeedExecutor):
        def run_transposed_linear(self, linear, cotangent_outputs, external_data, ctx):
            return [None] * len(linear.tangent_inputs)

    x = Scalar(0.6, requires_grad=True)
    y = sin(x)
    with pytest.raises(EagerError, match=r"Dropping\.run_transposed_linear returned no "
                                         r"cotangent for active input 0 of <RecordedGraph SIN>"):
        try_backward_recorded(y.key, y.trace, 1.0, Dropping(), Recorder())
    # without create_graph, None is a zero cotangent: nothing to record, nothing to refuse
    assert try_backward(y.key, y.trace, 1.0, Dropping()) == {y.key: 1.0}


# --- subclasses of the shipped executor: each override is called -------------------------------


class ForwardCounting(ScalarExecutor):
    def __init__(self) -> None:
        self.graphs = []

    def execute_forward(self, graph, initial_data):
        self.graphs.append(graph)
        return super().execute_forward(graph, initial_data)


class TransposeCounting(ScalarExecutor):
    def __init__(self) -> None:
        self.calls = 0

    def run_transposed_linear(self, linear, cotangent_out, external_data, ctx):
        self.calls += 1
        return super().run_transposed_linear(linear, cotangent_out, external_data, ctx)


def chain(steps: int):
    x, c = Scalar(0.5, requires_grad=True), Scalar(0.1, requires_grad=True)
    y = x
    for _ in range(steps):
        y = apply(Pow(2), sin(y)) * y + c
    return x, c, y


def test_a_subclass_overriding_execute_forward_is_called_for_replays_and_transposes():
    _, _, y = chain(10)
    executor = ForwardCounting()
    grads = y.backward(executor=executor)
    default = y.backward()
    assert grads == pytest.approx(default, rel=1e-13)
    # per node, the default run_transposed_linear runs the transpose through it, and the SIN
    # and POW nodes replay their derivatives (cos y, 2 sin y) through it first
    transposes = sum(1 for g in executor.graphs if g.input_keys)
    assert transposes == 40 and len(executor.graphs) == 40 + 20


def test_a_subclass_overriding_run_transposed_linear_is_called_once_per_node():
    x, _, y = chain(10)
    executor = TransposeCounting()
    grads = y.backward(executor=executor)
    assert executor.calls == 40
    assert grads == pytest.approx(y.backward(), rel=1e-13)
    _, hv = try_hvp(y.key, y.trace, 1.0, {x.key: 1.0}, executor)
    assert executor.calls == 80
    _, want = try_hvp(y.key, y.trace, 1.0, {x.key: 1.0}, ScalarExecutor())
    assert hv == pytest.approx(want, rel=1e-11)


def test_an_override_on_a_long_chain_needs_no_recursion():
    _, c, y = chain(10_000)                  # 40,000 nodes
    executor = TransposeCounting()
    grads = y.backward(executor=executor)
    assert executor.calls == 40_000
    default = y.backward()
    assert close(grads[c.key], default[c.key], rel=1e-10)
