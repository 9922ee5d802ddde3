"""``exp_shifted``: ``exp(x - y)`` with ``y`` broadcast back over the reduced axes, the
softmax that ``logsumexp``'s JVP weighs its tangent with, as one op.

Its rules are checked like every op's; its values are the three ops it replaces
(``broadcast_in_dim``, ``sub``, ``exp``) bit for bit; and ``logsumexp``'s derivatives of
first and second order, batched and ``jit``-ed, match finite differences and PyTorch.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from primitives import tensor as tnp
from primitives.tensor.buffers import MIN_BYTES
from primitives.tensor.ops.reduce import ExpShifted
from tidu import MemoryBudgetError
from tidu.testing import check_primitive
from tensor_helpers import ops_run


@st.composite
def reductions(draw):
    """``(shape, axes)``: a shape of rank 1 to 3 and a non-empty set of its axes."""
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3)))
    axes = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True))
    return shape, tuple(sorted(axes))


def _kept(shape, axes):
    return tuple(size for axis, size in enumerate(shape) if axis not in axes)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@settings(max_examples=15, deadline=None)
@given(case=reductions(), seed=st.integers(0, 2**32 - 1))
def test_rules_jvp_second_order_and_batching(dtype, case, seed):
    """JVP against finite differences in ``x``, ``y`` and both, what it emits linearized
    and transposed again (``order=2``), and the batch rule at every batch axis."""
    shape, axes = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    y = rng.standard_normal(_kept(shape, axes)).astype(dtype)
    report = check_primitive(ExpShifted(axes, shape), x, y, order=2, rng=seed)
    assert report.jvp_comparisons > 0 and report.batch_comparisons > 0


def test_values_are_the_three_ops_bit_for_bit_in_place_and_not():
    """``exp(x - y[:, None])`` as NumPy computes it, into ``x`` only when position 0 is free;
    a plain ``eval`` leaves its inputs alone."""
    rng = np.random.default_rng(0)
    shape = (MIN_BYTES // 8 // 4, 4)
    x = rng.standard_normal(shape)
    y = np.log(np.exp(x).sum(axis=1))
    want = np.exp(x - y[:, None])
    op = ExpShifted((1,), shape)
    x0 = x.copy()
    [got] = op.eval(None, [x, y])
    assert got.tobytes() == want.tobytes() and np.array_equal(x, x0)
    inputs = [x.copy(), y.copy()]
    [into] = op.eval_reusing(None, inputs, (0, 1))
    assert into is inputs[0] and into.tobytes() == want.tobytes()
    inputs = [x.copy(), y.copy()]
    [fresh] = op.eval_reusing(None, inputs, (1,))
    assert fresh is not inputs[0] and fresh.tobytes() == want.tobytes()
    [scalar] = ExpShifted((), ()).eval(None, [np.float64(1.0), np.float64(1.0)])   # 0-d
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and scalar == 1.0


def _lse_loss(z, y):
    return tnp.mean(tnp.logsumexp(z, axis=1) - z[tnp.arange(len(y)), y])


def test_logsumexp_gradient_and_hessian_match_finite_differences():
    rng = np.random.default_rng(1)
    z, labels = rng.standard_normal((5, 4)), rng.integers(0, 4, 5)
    softmax = np.exp(z - np.log(np.exp(z).sum(1, keepdims=True)))
    want = (softmax - np.eye(4)[labels]) / 5
    for grad in (tnp.grad(_lse_loss), tnp.jit(tnp.grad(_lse_loss))):
        np.testing.assert_allclose(grad(z, labels), want, rtol=1e-13, atol=1e-15)
    row = z[0]
    hess = tnp.hessian(lambda r: tnp.logsumexp(r))(row)
    s = np.exp(row - np.log(np.exp(row).sum()))
    np.testing.assert_allclose(hess, np.diag(s) - np.outer(s, s), rtol=1e-12, atol=1e-15)
    eps = 1e-6                            # and the Hessian against central differences
    fd = np.empty((4, 4))
    g = tnp.grad(lambda r: tnp.logsumexp(r))
    for i in range(4):
        step = np.zeros(4)
        step[i] = eps
        fd[:, i] = (g(row + step) - g(row - step)) / (2 * eps)
    np.testing.assert_allclose(hess, fd, rtol=1e-6, atol=1e-8)


def test_vmap_of_grad_and_eager_tensor():
    rng = np.random.default_rng(2)
    zs = rng.standard_normal((3, 4, 5))
    per = tnp.vmap(tnp.grad(lambda z: tnp.sum(tnp.logsumexp(z, axis=0))))(zs)
    for k in range(3):
        np.testing.assert_allclose(per[k], np.exp(zs[k] - np.log(np.exp(zs[k]).sum(0))),
                                   rtol=1e-13)
    z = tnp.tensor(zs[0], requires_grad=True)
    grads = tnp.sum(tnp.logsumexp(z, axis=1) ** 2).backward()
    lse = np.log(np.exp(zs[0]).sum(1, keepdims=True))
    np.testing.assert_allclose(grads.grad(z), 2 * lse * np.exp(zs[0] - lse), rtol=1e-13)


def test_gradient_matches_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is an optional peer")
    rng = np.random.default_rng(3)
    z = rng.standard_normal((6, 3, 4))
    got = tnp.grad(lambda z: tnp.sum(tnp.logsumexp(z, axis=(0, 2)) ** 3))(z)
    zt = torch.tensor(z, requires_grad=True)
    (torch.logsumexp(zt, dim=(0, 2)) ** 3).sum().backward()
    np.testing.assert_allclose(got, zt.grad.numpy(), rtol=1e-12)


def test_a_logsumexp_gradient_runs_one_exp_shifted(monkeypatch):
    """``jit(grad)`` of ``logsumexp`` evaluates one ``exp_shifted`` and no ``exp``."""
    from primitives.tensor.ops import elementwise as ew

    step = tnp.jit(tnp.grad(lambda z: tnp.sum(tnp.logsumexp(z, axis=1))))
    z = np.random.default_rng(4).standard_normal((3, 4))
    step(z)
    got, ran = ops_run(step, (z,), (ExpShifted, ew.Unary), monkeypatch)
    assert ran == ["exp_shifted[axes=(1,), shape=(3, 4)]"], ran
    np.testing.assert_allclose(got, np.exp(z - np.log(np.exp(z).sum(1, keepdims=True))),
                               rtol=1e-14)


def test_hessian_matches_torch_and_a_memory_budget_changes_nothing():
    """Second order through ``exp_shifted`` against ``torch.autograd.functional.hessian``;
    a ``jit`` program under the smallest memory budget that works (recomputing what it
    can) gives the unbudgeted gradients bit for bit."""
    rng = np.random.default_rng(5)
    x, b, w = rng.standard_normal((64, 32)), rng.standard_normal(32), rng.standard_normal((32, 32))

    def loss(w, b):
        h = x
        for _ in range(4):
            h = tnp.tanh(h @ w + b)
        return tnp.sum(tnp.logsumexp(h, axis=1))

    want = tnp.jit(tnp.grad(loss, argnums=(0, 1)))(w, b)
    with pytest.raises(MemoryBudgetError) as too_small:
        tnp.jit(tnp.grad(loss, argnums=(0, 1)), memory_budget=1)(w, b)
    smallest = too_small.value.smallest_feasible
    assert "recomputes" in str(too_small.value)
    budgeted = tnp.jit(tnp.grad(loss, argnums=(0, 1)), memory_budget=smallest)
    for _ in range(2):
        for got, expected in zip(budgeted(w, b), want):
            assert got.tobytes() == expected.tobytes()
    torch = pytest.importorskip("torch", reason="PyTorch is an optional peer")
    xt = torch.tensor(x[:5, :3])

    def torch_loss(bias):
        return (torch.logsumexp(torch.tanh(xt + bias), dim=1) ** 2).sum()
    got = tnp.hessian(lambda bias: tnp.sum(tnp.logsumexp(tnp.tanh(x[:5, :3] + bias), axis=1)
                                           ** 2))(b[:3])
    want_h = torch.autograd.functional.hessian(torch_loss, torch.tensor(b[:3])).numpy()
    np.testing.assert_allclose(got, want_h, rtol=1e-12, atol=1e-14)
