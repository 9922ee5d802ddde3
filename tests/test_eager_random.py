"""Property test: eager backward on random scalar DAGs agrees with finite differences.

Each random graph (from ``test_ad_random``) is run eagerly two ways: op by op
with the ``Scalar`` front end, and as one recorded composite node. Backward of
``sum_j ct_j f_j`` runs through two kinds of executor: ``ScalarExecutor``
(compiled fused plans) and a minimal executor with only ``execute_forward``
(the seed's hooks: replays and the default ``run_transposed_linear`` through
``execute_forward``), and once more with
``keep`` set to the leaves (every other cotangent released after its last
use). Every gradient must match central finite differences.
"""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given

from primitives.scalar import ScalarExecutor
from primitives.scalar.eager import Scalar, apply
from tidu.eager import BackwardExecutor, RecordedGraph, Recorder, try_backward
from tidu.graph import Input, compiled, evaluate

from test_ad_random import SETTINGS, bounded, random_dags


class MinimalExecutor(BackwardExecutor):
    def execute_forward(self, graph, initial_data):
        return dict(zip(graph.output_keys, compiled(graph).run(initial_data)))

    def add_operands(self, a, b):
        return a + b


EXECUTORS = (ScalarExecutor, MinimalExecutor)


def op_by_op(graph, leaves: dict) -> list:
    """The graph's outputs computed with eager ``Scalar`` ops, one recorded node per op."""
    values = {Input(k): leaf for k, leaf in leaves.items()}
    for op_key in graph.operation_keys:
        results = apply(op_key.operation, *[values[k] for k in op_key.inputs])
        results = results if isinstance(results, tuple) else (results,)
        values.update(zip(op_key.output_keys(), results))
    return [values[k] for k in graph.output_keys]


def as_one_node(graph, leaves: dict, keys: list) -> list:
    """The graph's outputs from one recorded composite node."""
    recorder = Recorder()
    data = {Input(k): leaves[k].data for k in keys}
    outputs = compiled(graph).run(data)
    recorded = RecordedGraph(graph, keys, graph.output_keys)
    records = recorder.record_graph(recorded, [leaves[k] for k in keys], outputs)
    results = []
    for value, record in zip(outputs, records):
        out = Scalar(value, record.requires_grad)
        out.trace, out.key = record.trace, record.key
        results.append(out)
    return results


def finite_difference(graph, primals: dict, cts: list, key, h=1e-6) -> float:
    def loss(shift):
        shifted = {Input(k): v + (shift if k == key else 0.0) for k, v in primals.items()}
        return sum(c * f for c, f in zip(cts, evaluate(graph, graph.output_keys, shifted)))
    return (loss(h) - loss(-h)) / (2 * h)


@SETTINGS
@given(random_dags())
def test_eager_backward_on_random_dags(case):
    graph, wrt, primals, seed = case
    assume(bounded(graph, primals))
    keys = sorted(primals)
    cts = [float(c) for c in np.random.default_rng(seed).standard_normal(len(graph.output_keys))]
    want = {k: finite_difference(graph, primals, cts, k) for k in wrt}
    for run in (op_by_op, lambda g, leaves: as_one_node(g, leaves, keys)):
        leaves = {k: Scalar(primals[k], requires_grad=k in wrt) for k in keys}
        outputs = run(graph, leaves)
        loss = sum(c * out for c, out in zip(cts, outputs))
        if not isinstance(loss, Scalar) or loss.trace is None:
            assert all(abs(fd) < 1e-6 for fd in want.values())
            continue
        leaf_keys = {leaves[k].key for k in wrt}
        for make_executor, keep in [(e, None) for e in EXECUTORS] + [(ScalarExecutor, leaf_keys)]:
            grads = try_backward(loss.key, loss.trace, 1.0, make_executor(), keep=keep)
            if keep is not None:
                assert set(grads) <= leaf_keys
            for k in wrt:
                got = grads.get(leaves[k].key, 0.0)
                assert abs(got - want[k]) <= 1e-6 + 1e-5 * abs(want[k]), (
                    run, make_executor.__name__, keep, k, got, want[k])
