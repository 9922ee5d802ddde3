"""Eager tensors used from many threads at once, with a tiny switch interval.

Backward calls on a shared leaf must lose no accumulation into ``.grad``; keys
made for one tensor from several threads must agree; independent graphs built
and differentiated concurrently (sharing the recorder, the plan cache and the
output-buffer cache) must each get their own right gradients.
"""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor import buffers, tensor
from thread_helpers import run_threads

THREADS = 8


@pytest.fixture(autouse=True)
def tiny_switch_interval():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


class _RunsPythonWhenCollected:
    def __del__(self):
        pass


def test_recording_from_many_threads_while_the_collector_runs_finalizers():
    # Dropping dead weak references once raised "dictionary changed size during
    # iteration": a collection during that loop ran a finalizer, and the switch let
    # another thread record an op. Small thresholds make collections frequent here.
    w = tensor(np.ones(3), requires_grad=True)
    thresholds = gc.get_threshold()
    gc.set_threshold(10, 2, 2)
    try:
        def work(_):
            for _ in range(3000):
                y = w * 2.0
                cycle = [_RunsPythonWhenCollected() for _ in range(3)]
                cycle.append(cycle)
            return y
        ys = run_threads(work, 4)
    finally:
        gc.set_threshold(*thresholds)
    tnp.sum(ys[0]).backward()
    np.testing.assert_array_equal(w.grad, np.full(3, 2.0))


def test_backward_on_a_shared_leaf_from_many_threads_loses_no_accumulation():
    rounds = 60
    w = tensor(np.ones(200_000), requires_grad=True)

    def work(_):
        for _ in range(rounds):
            tnp.sum(w * 2.0).backward()
    run_threads(work)
    np.testing.assert_array_equal(w.grad, np.full(200_000, THREADS * rounds * 2.0))


def test_shared_leaves_of_several_dtypes_and_shapes_accumulate_exactly():
    rounds = 40
    a = tensor(np.ones((3, 4), np.float32), requires_grad=True)
    b = tensor(np.full(4, 1.0 + 1.0j), requires_grad=True)

    def work(i):
        for _ in range(rounds):
            loss = tnp.sum(a * float(i + 1)) + tnp.sum(tnp.real(b * 1.0))
            loss.backward()
    run_threads(work)
    total = rounds * sum(range(1, THREADS + 1))
    assert a.grad.dtype == np.float32 and b.grad.dtype == np.complex128
    np.testing.assert_array_equal(a.grad, np.full((3, 4), total, np.float32))
    np.testing.assert_array_equal(b.grad, np.full(4, THREADS * rounds + 0j))


def test_threads_asking_for_a_fresh_leafs_key_get_one_key_and_its_gradients():
    for _ in range(20):
        x = tensor(np.array([1.0, 2.0]), requires_grad=True)
        keys = run_threads(lambda _: x.key)
        assert all(k == keys[0] for k in keys)
        grads = tnp.sum(x * x).backward()
        seen = run_threads(lambda _: grads.grad(x))
        for g in seen:
            np.testing.assert_array_equal(g, [2.0, 4.0])


def test_independent_graphs_in_threads_each_get_their_own_gradients():
    buffers.release_cached_arrays()
    rounds = 6

    def work(i):
        rng = np.random.default_rng(i)
        for r in range(rounds):
            n = 128 + 8 * i + r                     # distinct shapes: plans built concurrently
            x_np = rng.standard_normal((n, 256))     # big enough for the buffer cache
            w_np = rng.standard_normal((256,)) / 16
            x, w = tensor(x_np), tensor(w_np, requires_grad=True)
            h = tnp.tanh(x * w)                      # saved; other threads ask for buffers
            loss = tnp.sum(h * h)
            g = loss.backward().grad(w)
            t = np.tanh(x_np * w_np)
            np.testing.assert_allclose(g, np.sum(2 * t * (1 - t * t) * x_np, axis=0),
                                       rtol=1e-10, atol=1e-10)
            np.testing.assert_array_equal(w.grad, g)
        return True
    assert all(run_threads(work))
