"""``jit(f, memory_budget=...)``: the same results, bit for bit, in less memory.

The rematerialized program runs the same operations on the same inputs, so its
gradients equal the plain program's exactly; its peak (``tracemalloc``, which
sees NumPy's allocations) falls with the budget; a budget too small names the
smallest that works, and the library stays usable.
"""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.transforms.functional import FunctionalError
from tidu import MemoryBudgetError, TiduError

from tensor_helpers import warm_call_peak

rng = np.random.default_rng(0)
WEIGHTS = [(rng.standard_normal((32, 32)) / 6).astype(np.float64) for _ in range(24)]
H0 = rng.standard_normal((128, 32))


def residual_mlp(weights, h):
    for w in weights:
        a = tnp.tanh(h @ w)
        h = h + 0.1 * (a * a + tnp.sin(a))
    return tnp.sum(h)


def recurrence(w, h, x):
    for t in range(x.shape[0]):
        h = tnp.tanh(h * w + x[t])
    return tnp.sum(h)


peak_and_result = warm_call_peak


@pytest.mark.parametrize("fraction", [0.6, 0.4, 0.3])
def test_residual_mlp_gradients_are_bitwise_equal_in_less_memory(fraction):
    plain_peak, expected = peak_and_result(tnp.jit(tnp.grad(residual_mlp)), WEIGHTS, H0)
    step = tnp.jit(tnp.grad(residual_mlp), memory_budget=int(plain_peak * fraction))
    peak, grads = peak_and_result(step, WEIGHTS, H0)
    for g, e in zip(grads, expected):
        np.testing.assert_array_equal(g, e)
    # the budget counts array bytes; tracemalloc also sees the array objects themselves
    assert peak <= plain_peak * fraction * 1.25 + 20_000


def test_a_recurrence_fits_a_small_budget_with_equal_gradients():
    w, h0, x = rng.standard_normal(16) * 0.5, np.zeros(16), rng.standard_normal((400, 16))
    grad = tnp.grad(recurrence, argnums=(0, 2))
    plain_peak, expected = peak_and_result(tnp.jit(grad), w, h0, x)
    peak, grads = peak_and_result(tnp.jit(grad, memory_budget=int(plain_peak * 0.2)), w, h0, x)
    for g, e in zip(grads, expected):
        np.testing.assert_array_equal(g, e)
    assert peak < plain_peak * 0.4


def test_a_recurrence_fits_a_budget_only_binomial_checkpointing_reaches():
    """2% of the peak: below the two-level plan's smallest (about 5% here), so tidu
    reverses the chain by revolve; the gradients stay bit-identical."""
    w, h0, x = rng.standard_normal(16) * 0.5, np.zeros(16), rng.standard_normal((400, 16))
    grad = tnp.grad(recurrence, argnums=(0, 1))
    plain_peak, expected = peak_and_result(tnp.jit(grad), w, h0, x)
    budget = int(plain_peak * 0.02)
    peak, grads = peak_and_result(tnp.jit(grad, memory_budget=budget), w, h0, x)
    for g, e in zip(grads, expected):
        np.testing.assert_array_equal(g, e)
    # measured: 0.35x the plain peak; at 2% of it (4.5 kB) the call's own objects, not
    # the arrays, are most of what tracemalloc sees (tests/test_remat.py checks the plan)
    assert peak < 0.5 * plain_peak


def test_too_small_a_budget_names_the_function_and_the_smallest_that_works():
    step = tnp.jit(tnp.grad(residual_mlp), memory_budget=100)
    with pytest.raises(MemoryBudgetError, match=r"jit of residual_mlp.*smallest that works") \
            as caught:
        step(WEIGHTS, H0)
    assert isinstance(caught.value, TiduError)
    smallest = caught.value.smallest_feasible
    assert smallest > 100
    expected = tnp.jit(tnp.grad(residual_mlp))(WEIGHTS, H0)
    grads = tnp.jit(tnp.grad(residual_mlp), memory_budget=smallest)(WEIGHTS, H0)
    for g, e in zip(grads, expected):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("budget", [-1, 1.5, True, "1MB"])
def test_a_budget_that_is_not_a_number_of_bytes_is_refused_at_once(budget):
    with pytest.raises(FunctionalError, match="memory_budget must be a number of bytes"):
        tnp.jit(residual_mlp, memory_budget=budget)


def test_results_are_fresh_and_closures_are_read_at_each_call():
    scale = np.array([1.0])

    def loss(w, h):
        return residual_mlp(w, h) * scale[0]

    step = tnp.jit(tnp.grad(loss), memory_budget=500_000)
    first = step(WEIGHTS[:6], H0)
    scale[0] = 2.0
    second = step(WEIGHTS[:6], H0)
    for a, b in zip(first, second):
        np.testing.assert_allclose(b, 2 * a)
    assert not any(np.shares_memory(g, w) for g in second for w in WEIGHTS[:6] + [H0])
    assert not np.shares_memory(second[0], second[1])


def test_differentiating_a_budgeted_jit_replays_it_with_gradients():
    f = tnp.jit(residual_mlp, memory_budget=10**9)
    expected = tnp.grad(residual_mlp, argnums=1)(WEIGHTS[:4], H0)
    np.testing.assert_allclose(tnp.grad(f, argnums=1)(WEIGHTS[:4], H0), expected, rtol=1e-12)


def cross_entropy_mlp(weights, x, labels):
    h = x
    for w in weights:
        h = tnp.tanh(h @ w)
    logits = h @ weights[0]
    picked = logits[tnp.arange(labels.shape[0]), labels]
    return tnp.mean(tnp.logsumexp(logits, axis=1) - picked)


def test_index_arrays_stay_data_under_a_budget():
    x = rng.standard_normal((64, 32))
    weights = WEIGHTS[:8]
    step = tnp.jit(tnp.grad(cross_entropy_mlp), memory_budget=600_000)
    plain = tnp.jit(tnp.grad(cross_entropy_mlp))
    for seed in range(3):                              # new labels: the same program, run again
        labels = np.random.default_rng(seed).integers(0, 32, size=64)
        for g, e in zip(step(weights, x, labels), plain(weights, x, labels)):
            np.testing.assert_array_equal(g, e)
    with pytest.raises(IndexError):
        step(weights, x, np.full(64, 99))


def test_a_result_written_into_does_not_change_the_next_call():
    step = tnp.jit(tnp.grad(residual_mlp), memory_budget=500_000)
    first = step(WEIGHTS[:6], H0)
    expected = [g.copy() for g in first]
    for g in first:
        g[...] = 123.0
    for g, e in zip(step(WEIGHTS[:6], H0), expected):
        np.testing.assert_array_equal(g, e)


def test_a_budgeted_jit_composes_with_vmap_in_both_orders():
    w = WEIGHTS[0][:8, :8]

    def f(h):
        return residual_mlp([w, w, w], h[None, :])

    hs = H0[:5, :8]
    expected = np.stack([tnp.grad(f)(h) for h in hs])
    inner = tnp.vmap(tnp.jit(tnp.grad(f), memory_budget=2_000))(hs)
    outer = tnp.jit(tnp.vmap(tnp.grad(f)), memory_budget=5_000)(hs)
    np.testing.assert_allclose(inner, expected, rtol=1e-12)
    np.testing.assert_allclose(outer, expected, rtol=1e-12)


def test_budgeted_programs_from_many_threads_agree():
    import threading

    step = tnp.jit(tnp.grad(residual_mlp), memory_budget=500_000)
    expected = tnp.jit(tnp.grad(residual_mlp))(WEIGHTS[:6], H0)
    results, errors = [None] * 4, []

    def work(i):
        try:
            results[i] = step(WEIGHTS[:6], H0)
        except Exception as error:      # noqa: BLE001 - reported below
            errors.append(error)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for grads in results:
        for g, e in zip(grads, expected):
            np.testing.assert_array_equal(g, e)
