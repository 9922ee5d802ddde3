"""NumPy's and SciPy's options that users pass: ``reshape(order="F")``, ``array(ndmin=)``,
``logsumexp(b=, return_sign=)``; values against NumPy/SciPy, derivatives against finite
differences, the dot-product test and JAX, under ``jit``, ``vmap`` and on eager tensors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special
from hypothesis import given, settings
from hypothesis import strategies as st

from primitives import tensor as tnp
from primitives.tensor.errors import TensorNotSupportedError, TensorShapeError, TensorTypeError
from tensor_helpers import numeric_grad

SHAPES = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


def _fortran_shapes(shape):
    """Target shapes of ``shape``'s size: reversed, flat, with a -1."""
    size = int(np.prod(shape))
    return [shape[::-1], (size,), (-1, shape[0]) if len(shape) > 1 else (1, -1)]


# --- reshape(order="F") -------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, seed=st.integers(0, 2**16))
def test_fortran_reshape_matches_numpy_and_its_derivative_is_the_transpose(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    for new in _fortran_shapes(shape):
        want = np.reshape(x, new, order="F")
        np.testing.assert_array_equal(tnp.reshape(x, new, order="F"), want)
        np.testing.assert_array_equal(tnp.jit(lambda v: tnp.reshape(v, new, order="F"))(x), want)
        ct, t = rng.standard_normal(want.shape), rng.standard_normal(shape)
        _, tangent = tnp.jvp(lambda v: tnp.reshape(v, new, order="F"), (x,), (t,))
        _, vjp_fn = tnp.vjp(lambda v: tnp.reshape(v, new, order="F"), x)
        (cotangent,) = vjp_fn(ct)
        np.testing.assert_array_equal(tangent, np.reshape(t, new, order="F"))
        # the dot-product test, and the cotangent is ct read back in Fortran order
        assert np.isclose(np.vdot(ct, tangent), np.vdot(cotangent, t), rtol=1e-12)
        np.testing.assert_array_equal(cotangent, np.reshape(ct, shape, order="F"))


def test_fortran_reshape_on_eager_tensors_as_a_method_and_under_vmap():
    x = np.arange(24.0).reshape(2, 3, 4)
    weights = np.random.default_rng(0).standard_normal((4, 6))
    t = tnp.tensor(x, requires_grad=True)
    y = t.reshape(4, 6, order="F")
    np.testing.assert_array_equal(y.detach().numpy(), x.reshape(4, 6, order="F"))
    grads = tnp.sum(y * weights).backward()
    np.testing.assert_array_equal(grads.grad(t), weights.reshape(2, 3, 4, order="F"))
    # vmap over the first axis reshapes each (3, 4) in Fortran order
    got = tnp.vmap(lambda v: tnp.reshape(v, (2, 6), order="F"))(x)
    np.testing.assert_array_equal(got, np.stack([v.reshape(2, 6, order="F") for v in x]))


def test_reshape_refuses_an_order_that_depends_on_memory_layout_or_is_unknown():
    x = tnp.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(TensorNotSupportedError, match="reshape: order='A'"):
        tnp.reshape(x, (3, 2), order="A")
    with pytest.raises(TensorShapeError, match="order must be one of"):
        x.reshape(3, 2, order="X")
    assert tnp.reshape(x, (3, 2), order="C").shape == (3, 2)     # still usable


# --- array(ndmin=) --------------------------------------------------------------------------


def test_array_ndmin_prepends_axes_with_the_gradient_flowing():
    for value in ([1.0, 2.0], np.float64(3.0), np.ones((2, 2))):
        np.testing.assert_array_equal(tnp.array(value, ndmin=3), np.array(value, ndmin=3))
    x = np.array([0.5, -1.0])
    g = tnp.grad(lambda v: tnp.sum(tnp.array(v, ndmin=3) * np.arange(2.0)))(x)
    np.testing.assert_array_equal(g, np.arange(2.0))
    t = tnp.tensor(x, requires_grad=True)
    out = tnp.array(t, ndmin=2)
    assert out.shape == (1, 2)
    np.testing.assert_array_equal(tnp.sum(out * out).backward().grad(t), 2 * x)
    assert tnp.array(t, ndmin=1) is not t                        # copied, as before
    with pytest.raises(TensorTypeError, match="ndmin"):
        tnp.array(x, ndmin=-1)


# --- logsumexp(b=, return_sign=) -----------------------------------------------------------


CASES = [
    ((3, 4), (4,), 1, False),
    ((3, 4), (3, 4), None, False),
    ((3, 4), (3, 1), 0, True),
    ((5,), (5,), 0, False),
]


@pytest.mark.parametrize("a_shape, b_shape, axis, keepdims", CASES)
def test_weighted_logsumexp_matches_scipy_with_signs(a_shape, b_shape, axis, keepdims):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    for return_sign in (False, True):
        want = scipy.special.logsumexp(a, axis=axis, b=b, keepdims=keepdims,
                                       return_sign=return_sign)
        got = tnp.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)
        for g, w in zip(got, want) if return_sign else [(got, want)]:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14, equal_nan=True)
    # tnp.scipy.special's is the same function
    np.testing.assert_array_equal(
        tnp.scipy.special.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)[0],
        tnp.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)[0])


@pytest.mark.parametrize("a_shape, b_shape, axis, keepdims", CASES)
def test_weighted_logsumexp_gradients_in_a_and_b(a_shape, b_shape, axis, keepdims):
    rng = np.random.default_rng(2)
    a = rng.standard_normal(a_shape)
    b = rng.uniform(0.5, 2.0, b_shape)            # positive sums: the log is smooth
    r = rng.standard_normal(np.shape(scipy.special.logsumexp(a, axis=axis, b=b,
                                                             keepdims=keepdims)))

    def loss(a, b):
        return tnp.sum(tnp.logsumexp(a, axis=axis, b=b, keepdims=keepdims) * r)

    def loss_np(a, b):
        return np.sum(scipy.special.logsumexp(a, axis=axis, b=b, keepdims=keepdims) * r)

    ga, gb = tnp.grad(loss, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, numeric_grad(lambda v: loss_np(v, b), a), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gb, numeric_grad(lambda v: loss_np(a, v), b), rtol=1e-6, atol=1e-8)
    jga, jgb = tnp.jit(tnp.grad(loss, argnums=(0, 1)))(a, b)
    np.testing.assert_allclose(jga, ga, rtol=1e-13)
    np.testing.assert_allclose(jgb, gb, rtol=1e-13)
    # eager tensors: the same gradients
    ta, tb = tnp.tensor(a, requires_grad=True), tnp.tensor(b, requires_grad=True)
    grads = loss(ta, tb).backward()
    np.testing.assert_allclose(grads.grad(ta), ga, rtol=1e-13)
    np.testing.assert_allclose(grads.grad(tb), gb, rtol=1e-13)


def test_weighted_logsumexp_gradients_match_jax():
    jax = pytest.importorskip("jax", reason="JAX not installed")
    jax.config.update("jax_enable_x64", True)
    from jax.scipy.special import logsumexp as jax_logsumexp

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal(3)      # mixed signs

    def ours(a, b):
        out, sgn = tnp.logsumexp(a, axis=1, b=b, return_sign=True)
        return tnp.sum(out * sgn)

    def theirs(a, b):
        out, sgn = jax_logsumexp(a, axis=1, b=b, return_sign=True)
        return (out * sgn).sum()

    for got, want in zip(tnp.grad(ours, argnums=(0, 1))(a, b),
                         jax.grad(theirs, argnums=(0, 1))(a, b)):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-10, atol=1e-12)


def test_weighted_logsumexp_under_vmap_and_its_edges():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((5, 3)), rng.uniform(0.1, 1.0, (5, 3))
    got = tnp.vmap(lambda u, v: tnp.logsumexp(u, b=v))(a, b)
    np.testing.assert_allclose(got, [scipy.special.logsumexp(u, b=v) for u, v in zip(a, b)],
                               rtol=1e-13)
    # zero weights count for nothing, even at inf; an all-zero weight gives -inf with sign 0
    assert float(tnp.logsumexp(np.array([np.inf, 1.0]), b=np.array([0.0, 1.0]))) == 1.0
    out, sgn = tnp.logsumexp(np.array([1.0, 2.0]), b=np.zeros(2), return_sign=True)
    assert float(out) == -np.inf and float(sgn) == 0.0
    assert np.isnan(float(tnp.logsumexp(np.array([1.0, 2.0]), b=np.array([1.0, -2.0]))))
    with pytest.raises(TensorTypeError, match="logsumexp: complex"):
        tnp.logsumexp(np.ones(2), b=np.ones(2) * 1j)
