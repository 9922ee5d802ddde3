"""Checkpoint strategies on the eager tape (issue 25, part 3): ``checkpoint_strategy`` and
``set_checkpoint_strategy``, ``"none"`` and ``"balanced"``.

Gradients under every strategy are compared bit for bit with a recording that keeps every
value, and with finite differences; the peaks are measured with tracemalloc.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import primitives.tensor as tnp
from primitives.tensor import autograd, checkpoint_strategy, set_checkpoint_strategy, tensor
from primitives.tensor.eager import NumpyExecutor, strategy as strategy_module
from tidu import TiduError
from tidu.eager import try_backward

STRATEGIES = ("none", "balanced")


@contextlib.contextmanager
def keeping_everything():
    """Record with no strategy at all: every node keeps every value (the reference)."""
    saved = strategy_module.process_strategy[0]
    strategy_module.process_strategy[0] = None
    try:
        yield
    finally:
        strategy_module.process_strategy[0] = saved


def _mlp(weights, x, residual: bool):
    h = x
    for w in weights:
        m = h @ w
        if residual:
            a = tnp.tanh(m)
            h = h + 0.1 * (a * a + tnp.sin(a))
        else:
            h = m * tnp.tanh(m)            # silu-like: the product reads m and tanh(m)
    return (h * h).sum()


def _weights(layers=6, width=32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((width, width)) / np.sqrt(width) for _ in range(layers)]


def _grads(strategy, weights, x, residual=True):
    params = [tensor(w, requires_grad=True) for w in weights]
    if strategy is None:
        loss = _mlp(params, tensor(x), residual)
    else:
        with checkpoint_strategy(strategy):
            loss = _mlp(params, tensor(x), residual)
    grads = loss.backward()
    return [grads.grad(p) for p in params]


@pytest.mark.parametrize("residual", [True, False])
def test_strategies_give_the_gradients_of_a_recording_that_keeps_everything(residual):
    weights = _weights()
    x = np.random.default_rng(1).standard_normal((16, 32))
    by_strategy = {name: _grads(name, weights, x, residual) for name in STRATEGIES}
    with keeping_everything():
        everything = _grads(None, weights, x, residual)
    for name, grads in by_strategy.items():
        for g, ref in zip(grads, everything):
            assert np.array_equal(g, ref), name


def test_gradients_match_finite_differences_under_balanced():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((4, 4)) / 2
    x = rng.standard_normal((3, 4))

    def loss_of(w_value):
        return float(_mlp([tensor(w_value)], tensor(x), residual=True).item())

    [g] = _grads("balanced", [w], x)
    eps = 1e-6
    direction = rng.standard_normal(w.shape)
    numeric = (loss_of(w + eps * direction) - loss_of(w - eps * direction)) / (2 * eps)
    assert np.isclose(np.sum(g * direction), numeric, rtol=1e-6, atol=1e-8)


_UNARY = [tnp.sin, tnp.tanh, tnp.exp, lambda v: v * v, lambda v: 0.5 * v, tnp.cos,
          lambda v: v.T.T, lambda v: tnp.reshape(v, (-1,)).reshape(v.shape)]


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, len(_UNARY) - 1), st.integers(0, 3),
                              st.booleans()), min_size=1, max_size=12),
       seed=st.integers(0, 2**16))
def test_random_programs_agree_bit_for_bit(ops, seed):
    """Random chains of elementwise, shape and matmul work, each op reading one of the last
    values (so values have several readers), under each strategy and keeping everything."""
    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal((3, 3)) * 0.5
    w0 = rng.standard_normal((3, 3)) * 0.5

    def run(strategy):
        x, w = tensor(x0, requires_grad=True), tensor(w0, requires_grad=True)
        values = [x, w]
        for unary, back, matmul in ops:
            v = values[max(0, len(values) - 1 - back)]
            v = v @ w if matmul else _UNARY[unary](v)
            values.append(values[-1] + v)
        loss = (values[-1] * values[-2]).sum()
        grads = loss.backward()
        return grads.grad(x), grads.grad(w)

    results = {}
    with np.errstate(all="ignore"):
        for name in STRATEGIES:
            with checkpoint_strategy(name):
                results[name] = run(name)
    with keeping_everything(), np.errstate(all="ignore"):
        reference = run(None)
    for name, grads in results.items():
        for g, ref in zip(grads, reference):
            assert (g is None and ref is None) or np.array_equal(g, ref, equal_nan=True), name


def _peak(strategy, weights, x, residual):
    params = [tensor(w, requires_grad=True) for w in weights]
    xt = tensor(x)
    gc.collect()
    tnp.release_cached_arrays()
    tracemalloc.start()
    try:
        if strategy is None:
            loss = _mlp(params, xt, residual)
        else:
            with checkpoint_strategy(strategy):
                loss = _mlp(params, xt, residual)
        loss.backward()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_what_each_strategy_holds():
    """Per layer, in arrays of the activations' size (measured: 12 layers, 512 x 64):

    - residual (``h + 0.1 (a a + sin a)``, ``a = tanh(h w)``): everything 91.6, "none" 30.9
      (``h`` and ``a``), "balanced" 30.8 (``h w``, and the stream recomputed once);
    - silu-like (``m tanh(m)``, ``m = h w``): everything 41.7, "none" 41.0 (``m``,
      ``tanh(m)`` and ``h``: all read), "balanced" 17.7 (``m``; the rest recomputed).
    """
    weights = _weights(layers=12, width=64)
    x = np.random.default_rng(3).standard_normal((512, 64))
    layer = 512 * 64 * 8
    peaks = {}
    for residual in (True, False):
        peaks[residual] = {name: _peak(name, weights, x, residual) / layer
                           for name in STRATEGIES}
        with keeping_everything():
            peaks[residual]["everything"] = _peak(None, weights, x, residual) / layer
    residual, silu = peaks[True], peaks[False]
    assert residual["none"] < 0.4 * residual["everything"]
    assert residual["balanced"] < 1.05 * residual["none"]
    assert silu["none"] < silu["everything"]
    assert silu["balanced"] < 0.5 * silu["none"]


class _Counting(NumpyExecutor):
    """An executor that overrides ``execute_forward``: every recomputation goes through it."""

    def __init__(self):
        self.ops = []

    def execute_forward(self, graph, initial_data):
        self.ops += [op_key.operation for op_key in graph.operation_keys]
        return super().execute_forward(graph, initial_data)


def test_recomputation_calls_the_executors_execute_forward():
    w = tensor(np.eye(16) * 0.5, requires_grad=True)
    x = tensor(np.arange(256.0).reshape(16, 16) / 100)
    names = {}
    for name in STRATEGIES:
        with checkpoint_strategy(name):
            y = (tnp.tanh(x @ w) * 2.0).sum()      # tanh's backward reads tanh's result
        executor = _Counting()
        cotangents = try_backward(y.key, y.grad_fn, np.ones(()), executor)
        names[name] = [str(op) for op in executor.ops]
    assert names["none"].count("tanh") == 0
    assert names["balanced"].count("tanh") == 1, names    # made again once, by the hook
    dots = {name: sum("dot_general" in op for op in ops) for name, ops in names.items()}
    assert dots["none"] == dots["balanced"] > 0            # the product is kept, not rerun
    t = np.tanh(x.data @ w.data)
    assert np.array_equal(cotangents[w.key], try_backward(
        y.key, y.grad_fn, np.ones(()), NumpyExecutor())[w.key])
    assert np.allclose(cotangents[w.key], x.data.T @ (2.0 * (1 - t * t)))


def test_hvp_and_create_graph_under_balanced():
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((5, 5)) / 3
    v = rng.standard_normal((5, 5))
    x = rng.standard_normal((4, 5))

    def loss_fn(w):
        return _mlp([w], tensor(x), residual=True)

    results = {}
    for name in STRATEGIES:
        with checkpoint_strategy(name):
            w = tensor(w0, requires_grad=True)
            hv = autograd.hvp(loss_fn(w), w, v)
            w = tensor(w0, requires_grad=True)
            loss = loss_fn(w)
            [g] = autograd.grad(loss, [w], create_graph=True)
            [gg] = autograd.grad((g * tensor(v)).sum(), [w])
        results[name] = (np.asarray(hv), np.asarray(gg.detach()))
    assert np.allclose(results["none"][0], results["balanced"][0], rtol=1e-12, atol=1e-12)
    assert np.array_equal(results["none"][1], results["balanced"][1])
    assert np.allclose(results["none"][0], results["none"][1], rtol=1e-10, atol=1e-12)


def test_writes_after_the_forward_do_not_change_the_gradient():
    """Values the strategy did not keep are recomputed from kept ones, which tidu owns:
    writing to a leaf's or an intermediate tensor's data afterwards changes nothing."""
    w0 = np.random.default_rng(5).standard_normal((3, 3))

    def run(write):
        w = tensor(w0, requires_grad=True)
        with checkpoint_strategy("balanced"):
            m = w @ w
            a = tnp.sin(m)
            loss = (a * a).sum()
        if write:
            w.data[...] = 7.0
            m.data[...] = 3.0
            a.data[...] = 1.0
        return loss.backward().grad(w)

    assert np.array_equal(run(False), run(True))


def test_a_long_chain_recomputes_without_recursion():
    x = tensor(np.full(4, 0.1), requires_grad=True)
    with checkpoint_strategy("balanced"):
        y = x
        for _ in range(20_000):
            y = tnp.sin(y) * 1.0001
        loss = y.sum()
    g = loss.backward().grad(x)
    assert np.all(np.isfinite(g)) and g.shape == (4,)


def test_the_block_is_per_thread_and_the_process_default_is_settable():
    seen = {}

    def other():
        seen["other"] = strategy_module.current_strategy().name

    with checkpoint_strategy("balanced"):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        seen["block"] = strategy_module.current_strategy().name
    assert seen == {"other": "none", "block": "balanced"}
    set_checkpoint_strategy("balanced")
    try:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert seen["other"] == "balanced"
        with checkpoint_strategy("none"):
            assert strategy_module.current_strategy().name == "none"
    finally:
        set_checkpoint_strategy("none")
    assert strategy_module.current_strategy().name == "none"


def test_backward_from_many_threads_on_one_balanced_recording():
    w = tensor(np.random.default_rng(6).standard_normal((8, 8)) / 3, requires_grad=True)
    with checkpoint_strategy("balanced"):
        loss = _mlp([w, w, w], tensor(np.ones((4, 8))), residual=True)
    expected = try_backward(loss.key, loss.grad_fn, np.ones(()), NumpyExecutor())[w.key]
    results = []

    def walk():
        for _ in range(5):
            results.append(try_backward(loss.key, loss.grad_fn, np.ones(()),
                                        NumpyExecutor())[w.key])

    threads = [threading.Thread(target=walk) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 20 and all(np.array_equal(r, expected) for r in results)


@pytest.mark.parametrize("name", ["bogus", "Balanced", None, 3])
def test_unknown_strategies_are_refused_with_their_name(name):
    with pytest.raises(TiduError, match="unknown checkpoint strategy") as error:
        checkpoint_strategy(name)
    assert isinstance(error.value, ValueError) and repr(name) in str(error.value)
    with pytest.raises(TiduError, match="unknown checkpoint strategy"):
        set_checkpoint_strategy(name)
    assert strategy_module.current_strategy().name == "none"


def test_a_checkpointed_block_inside_a_balanced_block():
    w0 = np.random.default_rng(7).standard_normal((4, 4)) / 2
    x = tensor(np.ones((2, 4)))

    def run(name):
        w = tensor(w0, requires_grad=True)
        with checkpoint_strategy(name):
            h = tnp.checkpoint(lambda v: tnp.sin(x @ v) * v.sum())(w)
            loss = (tnp.tanh(h) * h).sum()
        return loss.backward().grad(w)

    assert np.array_equal(run("none"), run("balanced"))


def test_none_lets_go_of_what_backward_does_not_read():
    x = tensor(np.ones(256), requires_grad=True)
    y = tnp.sin(x)                  # keeps x
    z = y + y                       # reads nothing: keeps nothing
    assert [np.array_equal(v, np.ones(256)) for v in y.grad_fn.saved_values.values()] == [True]
    assert list(z.grad_fn.saved_values) == []
    assert np.array_equal(z.sum().backward().grad(x), 2 * np.cos(np.ones(256)))


def test_small_values_are_always_kept():
    """A value under 1 KiB costs less to keep than the record of letting it go."""
    x = tensor(np.ones(4), requires_grad=True)
    with checkpoint_strategy("balanced"):
        z = tnp.sin(x) + tnp.sin(x)
    assert z.grad_fn.dropped is None and len(z.grad_fn.saved_values) == 3


@pytest.mark.parametrize("name", STRATEGIES)
def test_one_big_value_makes_a_node_of_small_ones_follow_the_strategy(name):
    """A node records without its strategy only when all its values are small: one big
    input, on either side, or a big output is let go as the strategy says."""
    x = tensor(np.linspace(0.0, 1.0, 256), requires_grad=True)
    s = tensor(np.float64(0.5), requires_grad=True)
    with checkpoint_strategy(name):
        y = tnp.sin(x)
        left, right = y + s, s + y          # add reads neither input: y is let go
        spread = tnp.broadcast_to(s, (256,))     # a small input, a big output not read
    for z in (left, right):
        assert all(np.ndim(v) == 0 for v in z.grad_fn.saved_values.values())
    assert spread.grad_fn.dropped is not None
    v = tensor(np.ones(32), requires_grad=True)
    with checkpoint_strategy("balanced"):
        small = tnp.sin(x.reshape(8, 32)) @ v   # big input, small input and output:
    assert (8, 32) not in map(np.shape, small.grad_fn.saved_values.values())  # recomputed
    np.testing.assert_allclose(small.sum().backward().grad(x), np.cos(x.data), rtol=1e-12)
    grads = (left * right * spread).sum().backward()
    y_ = np.sin(x.data)
    want_x = np.cos(x.data) * 2 * (y_ + 0.5) * 0.5
    want_s = np.sum(2 * (y_ + 0.5) * 0.5 + (y_ + 0.5) ** 2)
    np.testing.assert_allclose(grads.grad(x), want_x, rtol=1e-12)
    np.testing.assert_allclose(grads.grad(s), want_s, rtol=1e-12)


def test_lists_in_place_ops_and_index_arrays_keep_their_gradients():
    """Hostile programs under each strategy, against a recording that keeps everything:
    tensors stacked from a list, an in-place ``+=``, a gather by an index array that is
    written to after the forward, and a NumPy conversion of a value with no gradient."""
    rng = np.random.default_rng(8)
    x0 = rng.standard_normal((16, 16))

    def run():
        x = tensor(x0, requires_grad=True)
        index = np.array([3, 1, 4, 1, 5])
        rows = [tnp.sin(x[i]) for i in range(4)]
        stacked = tnp.stack(rows + [tnp.tanh(x[5])])
        stacked += 1.0
        picked = stacked[:, index] * tnp.exp(x[0, :5])
        index[:] = 0                                  # the forward read it; backward must not
        scale = float(np.asarray(picked.detach()).sum())   # a constant, as documented
        loss = (picked * picked).sum() * scale
        return loss.backward().grad(x)

    results = {}
    for name in STRATEGIES:
        with checkpoint_strategy(name):
            results[name] = run()
    with keeping_everything():
        reference = run()
    for name, g in results.items():
        assert np.array_equal(g, reference), name


def test_functional_transforms_inside_a_balanced_block():
    """``grad``, ``vmap`` and ``jit`` trace their own values; a strategy block around them
    (or around a Tensor program that calls them) changes no result."""
    w0 = np.random.default_rng(9).standard_normal((4, 4)) / 2

    def f(w):
        return tnp.sum(tnp.tanh(w @ w) * w)

    plain = (tnp.grad(f)(w0), tnp.jit(tnp.grad(f))(w0), tnp.vmap(tnp.grad(f))(np.stack([w0, w0])))
    with checkpoint_strategy("balanced"):
        inside = (tnp.grad(f)(w0), tnp.jit(tnp.grad(f))(w0),
                  tnp.vmap(tnp.grad(f))(np.stack([w0, w0])))
        w = tensor(w0, requires_grad=True)
        eager = f(w).backward().grad(w)
    for a, b in zip(plain, inside):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert np.allclose(eager, plain[0], rtol=1e-12, atol=1e-12)
