"""``NumpyExecutor``: compiled graphs return NumPy arrays, as ``execute_forward`` does."""

from __future__ import annotations

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor import NumpyExecutor
from primitives.tensor.ops import elementwise as ew
from tidu.errors import MissingValueError
from tidu.graph import GraphBuilder, Input, Local


def sin_times_graph():
    """``sin(x) * y`` and ``x + y``, with inputs ``x`` then ``y``."""
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    [s] = b.add_operation(ew.sin, [Local(x)])
    [m] = b.add_operation(ew.mul, [Local(s), Local(y)])
    [a] = b.add_operation(ew.add, [Local(x), Local(y)])
    b.set_outputs([m, a])
    return b.build()


def test_compile_graph_matches_execute_forward_with_keys_in_any_order():
    graph = sin_times_graph()
    executor = NumpyExecutor()
    x, y = np.array([0.5, 1.5]), np.array([2.0, -1.0])
    run = executor.compile_graph(graph, [Input("y"), Input("x")])
    got = run([y, x])
    want = executor.execute_forward(graph, {Input("x"): x, Input("y"): y})
    assert len(got) == 2
    for value, key in zip(got, graph.output_keys):
        np.testing.assert_array_equal(value, want[key])
    np.testing.assert_allclose(got[0], np.sin(x) * y)
    assert run([y, x])[1].tolist() == [2.5, 0.5]        # callable again


def test_compile_graph_returns_0d_arrays_not_numpy_scalars():
    graph = sin_times_graph()
    run = NumpyExecutor().compile_graph(graph, graph.input_keys)
    results = run([np.array(0.5), np.array(2.0)])
    assert all(type(r) is np.ndarray and r.shape == () for r in results)
    assert results[0] == pytest.approx(np.sin(0.5) * 2.0)


def test_compile_graph_needs_every_loaded_key():
    with pytest.raises(MissingValueError):
        NumpyExecutor().compile_graph(sin_times_graph(), [Input("x")])


def test_eager_backward_through_compiled_plans_gives_arrays():
    x = tnp.tensor(0.3, requires_grad=True)
    y = x
    for _ in range(3):
        y = tnp.sin(y) * y + 0.5
    grads = y.backward()
    g = grads.grad(x)
    assert type(g) is np.ndarray and g.shape == ()
    eps = 1e-6

    def f(v):
        for _ in range(3):
            v = np.sin(v) * v + 0.5
        return v
    assert float(g) == pytest.approx((f(0.3 + eps) - f(0.3 - eps)) / (2 * eps), rel=1e-6)
