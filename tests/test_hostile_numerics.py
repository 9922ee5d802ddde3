"""Hostile numerics: values and derivatives at singular points, domain edges and huge
magnitudes, against JAX, PyTorch or SciPy when installed, else closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from primitives import tensor as tnp


# --- logsumexp -----------------------------------------------------------------------------------


@pytest.mark.parametrize("x", [np.array([3e7, 3e7], np.float32), np.array([1e300, 1e300]),
                               np.array([[1e17, 1e17, 1e17]])])
def test_logsumexp_gradient_sums_to_one_where_the_output_rounds(x):
    """``y = logsumexp(x)`` loses ``log n`` to rounding; the gradient is still the softmax
    (equal entries share 1), eager, under ``jit`` and ``vmap``, in ``x``'s dtype."""
    def f(x):
        return tnp.sum(tnp.scipy.special.logsumexp(x, axis=-1))

    want = np.full(x.shape, 1 / x.shape[-1], x.dtype)
    for got in (tnp.grad(f)(x), tnp.jit(tnp.grad(f))(x), tnp.vmap(tnp.grad(f))(x[None])[0]):
        assert got.dtype == x.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)
    t = tnp.tensor(x, requires_grad=True)
    tnp.sum(tnp.logsumexp(t, axis=-1)).backward()
    np.testing.assert_allclose(t.grad, want, rtol=1e-6)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    hess = tnp.hessian(lambda v: tnp.scipy.special.logsumexp(v))(x.reshape(-1))
    want_h = jax.hessian(jax.scipy.special.logsumexp)(x.reshape(-1).astype(np.float64))
    np.testing.assert_allclose(hess, want_h, rtol=1e-6, atol=1e-7)


# --- linalg.norm ---------------------------------------------------------------------------------


@pytest.mark.parametrize("ord", [0.5, -1, -2])
@pytest.mark.parametrize("x", [[0.0, 3.0, -4.0], [0.0, 0.0]])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_vector_norm_below_one_has_gradient_zero_in_zero_entries(ord, x, dtype):
    """``norm(x, ord)`` for ``ord < 1`` with an entry 0: PyTorch's subgradient (0), not NaN."""
    torch = pytest.importorskip("torch")
    x = np.array(x, dtype)

    def f(v):
        return tnp.linalg.norm(v, ord)
    t = torch.tensor(x, requires_grad=True)
    torch.linalg.vector_norm(t, ord).backward()
    for got in (tnp.grad(f)(x), tnp.jit(tnp.grad(f))(x)):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(f(x), np.linalg.norm(x, ord), rtol=1e-6)


# --- scipy.stats at the edges of the support -----------------------------------------------------


_stats = tnp.scipy.stats


@pytest.mark.parametrize("method, args, x, want", [
    # log(cdf) is -inf at and below the support: derivative 0 there (JAX's), not NaN
    (_stats.gamma.logcdf, (0.5,), 0.0, 0.0),
    (_stats.gamma.logcdf, (2.0,), 0.0, 0.0),
    (_stats.chi2.logcdf, (1.0,), 0.0, 0.0),
    (_stats.beta.logcdf, (0.5, 2.0), 0.0, 0.0),
    (_stats.beta.logsf, (2.0, 0.5), 1.0, 0.0),
    # log(sf) at 0 where the density is infinite: -pdf/sf = -inf (JAX's), not NaN
    (_stats.gamma.logsf, (0.5,), 0.0, -np.inf),
    (_stats.chi2.logsf, (1.0,), 0.0, -np.inf),
    (_stats.beta.logsf, (0.5, 2.0), 0.0, -np.inf),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_log_cdf_and_sf_derivatives_at_the_support_edge_are_not_nan(method, args, x, want,
                                                                     dtype):
    x = np.array([x, 0.25], dtype)

    def f(v):
        return tnp.sum(method(v, *args))
    for got in (tnp.grad(f)(x), tnp.jit(tnp.grad(f))(x)):
        assert got.dtype == dtype
        assert got[0] == want
        step = 1e-6 * np.float64(x[1])                  # the interior: central differences
        x64 = x.astype(np.float64)
        fd = (float(method(x64[1] + step, *args))
              - float(method(x64[1] - step, *args))) / (2 * step)
        np.testing.assert_allclose(got[1], fd, rtol=1e-4 if dtype == np.float64 else 1e-3)


def test_logsumexp_gradient_with_an_entry_plus_inf_keeps_the_others_zero():
    """``logsumexp([inf, 0])``: NaN in the ``+inf`` entry, 0 in the other (JAX's, PyTorch's)."""
    x = np.array([[np.inf, 0.0], [0.0, 1.0]])
    got = tnp.grad(lambda v: tnp.sum(tnp.logsumexp(v, axis=1)))(x)
    assert np.isnan(got[0, 0]) and got[0, 1] == 0
    np.testing.assert_allclose(got[1], np.exp([0.0, 1.0]) / np.exp([0.0, 1.0]).sum())


def test_expm1s_derivative_is_exp_not_the_value_plus_one():
    """``expm1'(x)`` was taken as ``expm1(x) + 1``, which rounds to 0 at x = -40 (and to
    the wrong digits below -1) where the derivative is ``exp(x)``; forward, reverse, second
    order and eager alike. (JAX and PyTorch take ``y + 1`` and give 0.)"""
    x = np.array([-40.0, -20.0, -1.5, 0.3])
    want = np.exp(x)
    np.testing.assert_allclose(tnp.vmap(tnp.grad(tnp.expm1))(x), want, rtol=1e-15)
    np.testing.assert_allclose(tnp.vmap(tnp.grad(tnp.grad(tnp.expm1)))(x), want, rtol=1e-15)
    np.testing.assert_allclose(tnp.jvp(tnp.expm1, (x,), (np.ones(4),))[1], want, rtol=1e-15)
    t = tnp.tensor(x, requires_grad=True)
    tnp.sum(tnp.expm1(t)).backward()
    np.testing.assert_allclose(t.grad, want, rtol=1e-15)
    z = np.array(-30.0 + 0.5j)
    np.testing.assert_allclose(tnp.grad(tnp.expm1, holomorphic=True)(z), np.exp(z), rtol=1e-15)
