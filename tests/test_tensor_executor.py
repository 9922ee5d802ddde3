"""``NumpyExecutor``: compiled graphs return NumPy arrays, as ``execute_forward`` does; the
executor hooks of subclasses are called; ``check_seed`` is the one check of a Tensor's seed."""

from __future__ import annotations

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor.eager import NumpyExecutor
from primitives.tensor.ops import elementwise as ew
from tidu.eager import Recorder, try_backward, try_backward_recorded, try_hvp
from tidu.errors import MissingValueError
from tidu.graph import GraphBuilder, Input, Local, compiled


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


def test_compile_graph_gives_an_array_where_an_op_gives_a_numpy_scalar():
    builder = GraphBuilder()
    x = builder.add_input("x")
    [s] = builder.add_operation(ew.sign, [Local(x)])
    builder.set_outputs([s])
    graph = builder.build()
    assert type(ew.sign.eval(None, [np.array(-0.5)])[0]) is not np.ndarray   # NumPy's scalar
    [result] = NumpyExecutor().compile_graph(graph, graph.input_keys)([np.array(-0.5)])
    assert type(result) is np.ndarray and result.shape == () and result == -1.0


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


# --- the executor hooks on the eager Tensor --------------------------------------------------
#
# NumpyExecutor overrides neither hook, so backward runs fused plans through compile_graph. A
# subclass that overrides execute_forward or run_transposed_linear has it called at every node.


class ForwardCounting(NumpyExecutor):
    def __init__(self) -> None:
        self.graphs = []

    def execute_forward(self, graph, initial_data):
        self.graphs.append(graph)
        return super().execute_forward(graph, initial_data)


class TransposeCounting(NumpyExecutor):
    def __init__(self) -> None:
        self.calls = 0

    def run_transposed_linear(self, linear, cotangent_out, external_data, ctx):
        self.calls += 1
        return super().run_transposed_linear(linear, cotangent_out, external_data, ctx)


class CompileCounting(NumpyExecutor):
    """Counts compiles (once per plan) and runs of compiled graphs (once per node)."""

    def __init__(self) -> None:
        self.compiles = 0
        self.runs = 0

    def compile_graph(self, graph, input_keys):
        self.compiles += 1
        run = super().compile_graph(graph, input_keys)

        def counted(values):
            self.runs += 1
            return run(values)
        return counted


def mlp_loss(seed: int = 0):
    """A two-layer tanh MLP's softmax cross-entropy, eager: its leaves and the loss."""
    rng = np.random.default_rng(seed)
    params = [tnp.tensor(rng.standard_normal(shape).astype(np.float32) / 3, requires_grad=True)
              for shape in ((6, 5), (5,), (5, 3), (3,))]
    x = tnp.tensor(rng.standard_normal((4, 6)).astype(np.float32))
    onehot = np.eye(3, dtype=np.float32)[rng.integers(3, size=4)]
    h = tnp.tanh(tnp.matmul(x, params[0]) + params[1])
    z = tnp.matmul(h, params[2]) + params[3]
    loss = -tnp.mean(tnp.sum((z - tnp.logsumexp(z, axis=1, keepdims=True)) * onehot, axis=1))
    return params, loss


def recorded_nodes(t) -> list:
    """The trace nodes behind the tensor ``t``."""
    seen, stack = {id(t._trace)}, [t._trace]
    nodes = []
    while stack:
        node = stack.pop()
        nodes.append(node)
        for item in node.inputs:
            if item.trace is not None and id(item.trace) not in seen:
                seen.add(id(item.trace))
                stack.append(item.trace)
    return nodes


def backward_with(executor, loss):
    return try_backward(loss.key, loss._trace, np.ones((), np.float32), executor)


def test_a_subclass_overriding_execute_forward_is_called_with_identical_gradients():
    params, loss = mlp_loss()
    executor = ForwardCounting()
    grads = backward_with(executor, loss)
    want = backward_with(NumpyExecutor(), loss)
    assert set(grads) == set(want)
    for key, value in want.items():
        np.testing.assert_array_equal(grads[key], value)
        assert grads[key].dtype == value.dtype
    # every node's transpose runs through it, and the replays before some (tanh's 1 - y^2)
    transposes = [g for g in executor.graphs if g.input_keys]
    replays = [g for g in executor.graphs if not g.input_keys]
    assert len(transposes) == len(recorded_nodes(loss)) and replays
    assert all(p.key in grads for p in params)


def test_a_subclass_overriding_run_transposed_linear_is_called_once_per_node():
    params, loss = mlp_loss(1)
    executor = TransposeCounting()
    grads = backward_with(executor, loss)
    want = backward_with(NumpyExecutor(), loss)
    nodes = recorded_nodes(loss)
    assert executor.calls == sum(any(k in want for k in node.output_keys) for node in nodes)
    assert executor.calls == len(nodes)
    for p in params:
        np.testing.assert_array_equal(grads[p.key], want[p.key])


def test_overriding_neither_hook_keeps_the_fused_compiled_plans(monkeypatch):
    from tidu.eager import BackwardExecutor

    hook_calls = []
    original = BackwardExecutor.run_transposed_linear

    def spy_transpose(self, *args):
        hook_calls.append("run_transposed_linear")
        return original(self, *args)

    def spy_forward(self, graph, initial_data):
        hook_calls.append("execute_forward")
        return dict(zip(graph.output_keys, compiled(graph).run(initial_data)))

    monkeypatch.setattr(BackwardExecutor, "run_transposed_linear", spy_transpose)
    monkeypatch.setattr(NumpyExecutor, "execute_forward", spy_forward)
    params, loss = mlp_loss(2)
    executor = CompileCounting()
    grads = backward_with(executor, loss)
    assert hook_calls == []                    # no hook per node: one fused graph each
    assert executor.runs == len(recorded_nodes(loss))
    assert 0 < executor.compiles <= executor.runs
    runs, compiles = executor.runs, executor.compiles
    again = backward_with(executor, loss)      # plans and their compiled graphs are cached
    assert executor.compiles == compiles and executor.runs == 2 * runs
    for p in params:
        np.testing.assert_array_equal(grads[p.key], again[p.key])
    monkeypatch.undo()
    for p in params:
        np.testing.assert_array_equal(grads[p.key], backward_with(ForwardCounting(), loss)[p.key])


def test_second_derivatives_honour_an_overridden_hook():
    params, loss = mlp_loss(3)
    tangents = {p.key: np.ones(p.shape, np.float32) for p in params}
    seed = np.ones((), np.float32)
    executor = TransposeCounting()
    grads, hv = try_hvp(loss.key, loss._trace, seed, tangents, executor)
    want_grads, want_hv = try_hvp(loss.key, loss._trace, seed, tangents, NumpyExecutor())
    assert executor.calls == len(recorded_nodes(loss))
    for p in params:
        np.testing.assert_allclose(grads[p.key], want_grads[p.key], rtol=1e-6)
        np.testing.assert_allclose(hv[p.key], want_hv[p.key], rtol=1e-5, atol=1e-7)
    forward = ForwardCounting()
    records = try_backward_recorded(loss.key, loss._trace, seed, forward, Recorder())
    assert forward.graphs
    for p in params:
        np.testing.assert_allclose(records[p.key].data, want_grads[p.key], rtol=1e-6)


def test_a_bad_seed_is_refused_by_check_seed_alone(monkeypatch):
    # Tensor.backward checks its seed once, with the executor's check_seed, before the seed is
    # cast to the tensor's dtype (a cast would drop a complex seed's imaginary part).
    checked = []
    original = NumpyExecutor.check_seed

    def spy(self, seed, output):
        checked.append(seed)
        return original(self, seed, output)

    monkeypatch.setattr(NumpyExecutor, "check_seed", spy)
    x = tnp.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    y = x * 3.0
    with pytest.raises(tnp.BackwardError, match=r"complex seed \(complex128\) for a real "
                                                r"output \(float32\)"):
        y.backward(np.array([1.0, 1j]))
    assert len(checked) == 1 and checked[0].dtype == np.complex128   # the seed as given
    with pytest.raises(tnp.BackwardError, match=r"seed of shape \(3,\) for an output of "
                                                r"shape \(2,\)"):
        y.backward(np.ones(3))
    with pytest.raises(tnp.BackwardError, match="it must hold numbers"):
        y.backward(np.array(["a", "b"]))
    with pytest.raises(tnp.BackwardError, match="not an array of numbers"):
        y.backward([[1.0], [2.0, 3.0]])
    assert x.grad is None and len(checked) == 4
    np.testing.assert_array_equal(y.backward(np.array([1, 2])).grad(x), [3.0, 6.0])
