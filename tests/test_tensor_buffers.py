"""The tensor ops' output-buffer cache: big results reuse idle arrays, never live ones."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor import buffers
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.dot import DotGeneral

BIG = (256, 256)          # 256 KB of float32: above buffers.MIN_BYTES


@pytest.fixture(autouse=True)
def _fresh_cache():
    buffers.release_cached_arrays()
    yield
    buffers.release_cached_arrays()


def test_an_idle_result_buffer_is_reused():
    x = np.ones(BIG, np.float32)
    [y] = ew.tanh.eval(None, [x])
    address = y.ctypes.data
    del y
    [z] = ew.exp.eval(None, [x])
    assert z.ctypes.data == address
    np.testing.assert_allclose(z, np.exp(x))


def test_a_live_array_or_its_view_is_never_handed_out():
    x = np.ones(BIG, np.float32)
    [y] = ew.tanh.eval(None, [x])
    view = y[:10]
    del y
    [z] = ew.exp.eval(None, [x])
    assert not np.shares_memory(view, z)
    np.testing.assert_allclose(view, np.tanh(1.0), rtol=1e-6)


def test_small_integer_and_mixed_results_take_plain_numpy_arrays():
    assert buffers.output_like(np.ones(3)) is None
    assert buffers.output_like(np.ones(BIG, np.int64)) is None
    x = np.ones(BIG, np.float32)
    [y] = ew.mul.eval(None, [x, np.float64(2.0)])     # a NumPy float64 scalar promotes
    assert y.dtype == np.float64


def test_matmul_results_use_the_cache_and_are_right():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 128)).astype(np.float32)
    b = rng.standard_normal((256, 512)).astype(np.float32)
    op = DotGeneral((((0,), (0,)), ((), ())), a.shape, b.shape, "float32")   # a.T @ b
    [first] = op.eval(None, [a, b])
    address = first.ctypes.data
    del first
    [again] = op.eval(None, [a, b])
    assert again.ctypes.data == address
    np.testing.assert_allclose(again, a.T @ b, rtol=1e-5, atol=1e-5)


def test_training_steps_reuse_the_same_buffers():
    rng = np.random.default_rng(1)
    w = tnp.tensor(rng.standard_normal((256, 256)).astype(np.float32), requires_grad=True)
    x = rng.standard_normal((256, 256)).astype(np.float32)

    def step():
        loss = tnp.sum(tnp.tanh(tnp.matmul(x, w)) * tnp.tanh(tnp.matmul(x, w)))
        loss.backward()
        grad, w.grad = w.grad, None
        return grad

    first = step()
    for _ in range(2):     # .grad takes its product's buffer: those held here are not reused
        again = step()
    held = buffers._limits["held"]
    for _ in range(3):
        again = step()
    assert buffers._limits["held"] == held
    h = np.tanh(x @ w.data)
    np.testing.assert_allclose(again, x.T @ (2 * h * (1 - h * h)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(first, again)


def test_release_and_limit():
    gc.collect()                            # arrays earlier tests left in reference cycles,
    buffers.release_cached_arrays()         # and those left idle, are not counted below
    x = np.ones(BIG, np.float32)
    [y] = ew.tanh.eval(None, [x])
    assert buffers.release_cached_arrays() == 0          # y is live
    del y
    assert buffers.release_cached_arrays() == x.nbytes
    buffers.set_cache_limit(0)
    try:
        live = buffers._limits["held"]          # arrays earlier tests still hold, if any
        [z] = ew.tanh.eval(None, [x])
        assert buffers._limits["held"] == live   # z is not cached
        del z
        assert buffers.release_cached_arrays() == 0
    finally:
        buffers.set_cache_limit(256 << 20)


def test_a_full_cache_makes_room_by_dropping_idle_arrays():
    gc.collect()
    buffers.release_cached_arrays()
    live = buffers._limits["held"]              # arrays earlier tests still hold, if any
    x = np.ones(BIG, np.float32)
    buffers.set_cache_limit(live + 2 * x.nbytes)
    try:
        [a] = ew.tanh.eval(None, [x])
        [b] = ew.tanh.eval(None, [np.ones((128, 512), np.float32)])
        assert buffers._limits["held"] == live + 2 * x.nbytes
        del b                                   # idle: dropped for the next new shape
        [c] = ew.tanh.eval(None, [np.ones((64, 1024), np.float32)])
        assert buffers._limits["held"] == live + 2 * x.nbytes
        [d] = ew.exp.eval(None, [np.ones((64, 1024), np.float32)])   # all live: not cached
        assert buffers._limits["held"] == live + 2 * x.nbytes
        assert not np.shares_memory(a, c) and not np.shares_memory(c, d)
    finally:
        buffers.set_cache_limit(256 << 20)
