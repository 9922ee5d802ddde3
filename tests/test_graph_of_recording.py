"""An eager recording as one graph (``tidu.eager.graph_of_recording``), for any primitive set:
the graph recomputes the outputs, and its linearization and transpose give the gradients
``try_backward`` gives."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.scalar import ScalarExecutor
from primitives.scalar.eager import Scalar, exp, sin
from tidu import TiduError, linear_transpose, linearize
from tidu.eager import graph_of_recording, try_backward
from tidu.graph import evaluate


def test_scalar_recording_recomputes_and_differentiates_as_backward():
    x, y = Scalar(0.7, requires_grad=True), Scalar(-1.3, requires_grad=True)
    z = exp(sin(x) * y) + x * 3.0
    exported = graph_of_recording([z.key], [z.trace])
    graph = exported.graph
    values = {**exported.constants, x.key: 0.7, y.key: -1.3}
    assert evaluate(graph, graph.output_keys, values) == [pytest.approx(z.value, rel=1e-15)]
    linear = linearize(graph, graph.output_keys, [k.key for k in exported.leaves])
    transposed = linear_transpose(linear)
    [seed] = transposed.tangent_input_keys
    got = evaluate([graph, linear.graph, transposed.graph], transposed.tangent_output_keys,
                   {**values, seed: 1.0})
    expected = try_backward(z.key, z.trace, 1.0, ScalarExecutor())
    by_key = dict(zip(exported.leaves, got))
    assert by_key[x.key] == pytest.approx(expected[x.key], rel=1e-14)
    assert by_key[y.key] == pytest.approx(expected[y.key], rel=1e-14)


def test_tensor_recording_with_constants_and_two_outputs():
    w = tnp.tensor(np.array([[0.5, -1.0], [2.0, 0.3]]), requires_grad=True)
    x = np.array([1.0, 2.0])
    h = tnp.tanh(w @ x)
    loss = tnp.sum(h ** 2)
    exported = graph_of_recording([loss.key, h.key], [loss.grad_fn, h.grad_fn])
    graph = exported.graph
    assert exported.leaves == (w.key,) and len(exported.constants) >= 1
    out = evaluate(graph, graph.output_keys, {**exported.constants, w.key: w.data})
    np.testing.assert_allclose(out[0], loss.data)
    np.testing.assert_allclose(out[1], h.data)


def test_a_long_recording_needs_no_recursion():
    x = Scalar(0.1, requires_grad=True)
    y = x
    for _ in range(50_000):
        y = sin(y) * 0.5 + x
    graph = graph_of_recording([y.key], [y.trace]).graph
    assert len(graph.operations) == 150_000


def test_mismatched_arguments_raise():
    x = Scalar(0.1, requires_grad=True)
    with pytest.raises(TiduError, match="2 output keys but 1 traces"):
        graph_of_recording([x.key, x.key], [None])
