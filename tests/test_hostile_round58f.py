"""Round 58f: a hostile round on round 58b's NumPy functions (histograms, polynomials,
floating-point helpers, index helpers, bit packing, ``linalg.tensorsolve``/``tensorinv``).

Each test is a bug found there: NumPy's values, dtypes and shapes bit for bit, errors naming
the function, results that never alias inputs, derivatives against JAX or finite
differences (never a silent zero).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.ops.linalg import LinAlgError
from tidu import TiduError


def finite_differences(f, x, eps=1e-6):
    """Central differences of the scalar ``f`` at ``x``."""
    grad = np.zeros_like(x)
    for i in range(x.size):
        step = np.zeros_like(x)
        step.flat[i] = eps
        grad.flat[i] = (f(x + step) - f(x - step)) / (2 * eps)
    return grad


def assert_bitwise(got, want):
    """The same dtype, shape and bits (NaN where NaN, zeros' signs too)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    if got.dtype.itemsize > 8 and got.dtype.kind == "f":   # long double: padding bytes
        assert np.array_equal(got, want, equal_nan=True), (got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want)), (got, want)
        return
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (got, want)


# --- polynomials -----------------------------------------------------------------------------


def test_polyfit_covariance_is_real_for_real_x_and_complex_y():
    """NumPy's covariance is ``inv(V.T V)`` of the real Vandermonde matrix times the real
    residuals: float64 for complex ``y`` (tnp's was complex128, cast with ``y``)."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=8), rng.normal(size=8) + 1j * rng.normal(size=8)
    for cov in (True, "unscaled"):
        got, want = tnp.polyfit(x, y, 2, cov=cov), np.polyfit(x, y, 2, cov=cov)
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-12)


def test_polyfit_weights_round_in_the_inputs_dtypes():
    """NumPy weighs in place (``rhs *= w``): float32 ``y`` times float64 ``w`` is rounded to
    float32 before the solve (tnp's kept float64: coefficients off by ~1e-8)."""
    rng = np.random.default_rng(1)
    x, y, w = rng.normal(size=10), rng.normal(size=10).astype(np.float32), rng.random(10)
    np.testing.assert_allclose(tnp.polyfit(x, y, 2, w=w), np.polyfit(x, y, 2, w=w),
                               rtol=1e-13, atol=0)
    x32 = x.astype(np.float32)
    got, want = tnp.polyfit(x32, y, 2, w=w, full=True), np.polyfit(x32, y, 2, w=w, full=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=0)


@pytest.mark.parametrize("u, v", [
    (np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, np.nan, 1.0])),
    (np.array([1.0, np.inf]), np.array([2.0])),
    (np.array([0.3, 1.7, -2.2, 0.9, 1.1]), np.array([0.7, 1.3, 0.1], np.float32)),
    (np.array([0.3, 1.7, -2.2, 0.9]) + 1j, np.array([0.7, 1.3], np.float16)),
    (np.array([1.0, 2.0, 3.0], np.longdouble), np.array([5e-324, 1.0])),
])
def test_polydiv_steps_are_numpys(u, v):
    """NumPy's long division: ``1 / v[0]`` in ``v``'s own dtype and each step on its window
    of the remainder only (tnp's used float64's reciprocal, and subtracted ``step * v``
    padded with zeros: an inf or NaN step made the whole remainder NaN); the remainder's
    length follows."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.polydiv(u, v)
        got = tnp.polydiv(u, v)
    for g, w in zip(got, want):
        assert_bitwise(g, w)


def test_polydiv_remainder_is_not_a_view_of_u():
    u = np.array([1.0, 2.0])
    quotient, remainder = tnp.polydiv(u, np.array([1.0, 2.0, 3.0]))
    assert not np.shares_memory(remainder, u)
    remainder[0] = 7.0
    assert u[0] == 1.0


def test_poly_of_an_infinite_root_is_numpys():
    """np.poly convolves with [1, -root] term by term: [1, -inf, inf] (tnp's convolve,
    a matrix product over zero padding, gave NaN from 0 * inf)."""
    zeros = np.array([1.0, np.inf])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_bitwise(tnp.poly(zeros), np.poly(zeros))


def test_roots_follow_trailing_zero_coefficients():
    """``p = [1, -3, 2, 0]`` has the root 0, which moves by ``-dp[-1] / 2`` (and so do the
    others): the derivative in the trailing zero coefficient was a silent 0. Now that of the
    whole companion matrix (JAX's), the values still NumPy's bit for bit."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    def loss(m):
        return lambda p: m.sum(m.real(m.roots(p)) ** 3)

    for p in (np.array([1.0, -3.0, 2.0, 0.0]), np.array([0.0, 1.0, 2.0, 0.0])):
        with jax.enable_x64(True):
            want = np.asarray(jax.grad(loss(jnp))(jnp.asarray(p)))
        np.testing.assert_allclose(tnp.grad(loss(tnp))(p), want, atol=1e-9)
    # a double root (two trailing zeros): the companion matrix is defective, and eig's
    # derivative refuses it (its eigenvectors are not a basis; see tests/test_linalg.py)
    with pytest.raises(LinAlgError, match="eig's derivative"):
        tnp.grad(loss(tnp))(np.array([1.0, -3.0, 2.0, 0.0, 0.0]))
    p = np.array([1.0, -3.0, 2.0, 0.0])
    np.testing.assert_allclose(tnp.grad(loss(tnp))(p), finite_differences(loss(np), p),
                               atol=1e-6)
    eager = tnp.tensor(p, requires_grad=True)
    tnp.sum(tnp.real(tnp.roots(eager)) ** 3).backward()
    np.testing.assert_allclose(eager.grad, [-45.0, -21.0, -9.0, -3.0], atol=1e-9)
    for p in (np.array([1.0, 0.0, 1.0, 0.0]), np.array([1.0, 0.0, 4.0, 0.0, 0.0]),
              np.array([1.0, -3.0, 2.0, 0.0])):
        assert_bitwise(tnp.roots(p), np.roots(p))


# --- bit packing -----------------------------------------------------------------------------


def raises_named(error, fn, name):
    """``fn()`` raises ``error``, a ``TiduError`` whose message names ``name``."""
    with pytest.raises(error) as caught:
        fn()
    assert isinstance(caught.value, TiduError), caught.value
    assert name in str(caught.value), caught.value


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_packbits_and_unpackbits_take_a_0d_array_as_1d(axis):
    """NumPy's packbits/unpackbits read a 0-d array as 1-d (axis 0 or -1 too); tnp's
    refused it."""
    for bitorder in ("big", "little"):
        a = np.array(5, np.uint8)
        assert_bitwise(tnp.packbits(a, axis=axis, bitorder=bitorder),
                       np.packbits(a, axis=axis, bitorder=bitorder))
        assert_bitwise(tnp.unpackbits(a, axis=axis, count=3, bitorder=bitorder),
                       np.unpackbits(a, axis=axis, count=3, bitorder=bitorder))
    with pytest.raises(TiduError):
        tnp.packbits(np.array(5, np.uint8), axis=1)


def test_unpackbits_bitorder_and_count_are_numpys():
    """np.unpackbits takes any bitorder beginning with 'b' or 'l' (np.packbits only 'big'
    and 'little'), and refuses a -count beyond the bits (tnp's gave an empty array)."""
    a = np.array([1, 130], np.uint8)
    for bitorder in ("b", "lx", "bogus"):
        assert_bitwise(tnp.unpackbits(a, bitorder=bitorder), np.unpackbits(a, bitorder=bitorder))
    raises_named(TiduError, lambda: tnp.unpackbits(a, bitorder="Little"), "unpackbits")
    raises_named(TiduError, lambda: tnp.packbits(a, bitorder="b"), "packbits")
    raises_named(TiduError, lambda: tnp.unpackbits(a, count=-17), "unpackbits")
    assert_bitwise(tnp.unpackbits(a, count=-16), np.unpackbits(a, count=-16))


# --- linalg ----------------------------------------------------------------------------------


def test_tensorsolve_and_tensorinv_errors_name_them():
    """Bad axes, a float ind and float16 arrays were Python's ValueError/TypeError or named
    linalg.solve/inv: now tidu errors naming the function (NumPy raises for each)."""
    a = np.eye(4).reshape(2, 2, 2, 2)
    for axes in ((-1,), (5,), (0, 9)):
        raises_named(TiduError, lambda: tnp.linalg.tensorsolve(a, np.ones((2, 2)), axes),
                     "linalg.tensorsolve")
    raises_named(TiduError, lambda: tnp.linalg.tensorinv(a, 2.0), "linalg.tensorinv")
    raises_named(TiduError, lambda: tnp.linalg.tensorinv(a.astype(np.float16)),
                 "linalg.tensorinv")
    raises_named(TiduError, lambda: tnp.linalg.tensorsolve(a, np.ones((2, 2), np.float16)),
                 "linalg.tensorsolve")
    b = np.random.default_rng(2).normal(size=(2, 2, 2, 2))
    np.testing.assert_allclose(tnp.linalg.tensorsolve(b, np.ones((2, 2)), axes=(2, 0)),
                               np.linalg.tensorsolve(b, np.ones((2, 2)), axes=(2, 0)))


# --- histograms ------------------------------------------------------------------------------


def test_histogram_of_no_bins_is_numpys():
    """``bins=[]``: NumPy's empty counts and edges (tnp's was an IndexError naming no
    function)."""
    a = np.array([0.5, 1.5, 2.5])
    for weights, density in ((None, None), (a, None), (None, True)):
        got = tnp.histogram(a, [], weights=weights, density=density)
        want = np.histogram(a, [], weights=weights, density=density)
        for g, w in zip(got, want):
            assert_bitwise(g, w)


def test_histogram_errors_name_the_function():
    """2-d coordinates in histogram2d, samples of strings or dates, and an estimator's
    overflow (a range of subnormals) were Python's or NumPy's own errors."""
    x = np.arange(6.0).reshape(2, 3)
    raises_named(TiduError, lambda: tnp.histogram2d(x, x), "histogram2d")
    raises_named(TiduError, lambda: tnp.histogram(np.array(["a", "b"])), "histogram")
    raises_named(TiduError, lambda: tnp.histogram(np.array([1, 2], "datetime64[D]")),
                 "histogram")
    raises_named(TiduError, lambda: tnp.histogram_bin_edges(np.array([0.0, 5e-324, 1e-323]),
                                                            "auto", range=(0, 1)),
                 "histogram_bin_edges")


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.complex64,
                                   np.complex128])
def test_histogram_weighted_counts_round_as_numpys_blocks(dtype):
    """np.histogram counts evenly spaced bins in blocks of 65536 samples, each block's sums
    cast to the weights' dtype and added block after block: bit for bit (tnp's summed all
    in float64 and cast once: float32 counts one ulp off past 65536 samples)."""
    rng = np.random.default_rng(3)
    a = rng.normal(size=140_000)
    w = rng.random(140_000) * 3
    w = (w + 1j * w[::-1] if np.dtype(dtype).kind == "c" else w).astype(dtype)
    for density in (None, True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)        # float16 sums overflow
            got = tnp.histogram(a, 10, weights=w, density=density)
            want = np.histogram(a, 10, weights=w, density=density)
        assert_bitwise(got[0], want[0])
    jitted = tnp.jit(lambda a, w: tnp.histogram(a, 10, weights=w)[0])
    for _ in range(2):                     # a second call with new values: the new counts
        a, w = rng.normal(size=140_000), rng.random(140_000).astype(dtype)
        assert_bitwise(jitted(a, w), np.histogram(a, 10, weights=w)[0])


def test_histogramdd_takes_a_2d_array_of_edges_as_numpy():
    """NumPy reads bins as ``len(bins)`` per-dimension entries: a 2-d array's rows are the
    edges of each dimension (tnp's refused it: '`bins[1]` must be a scalar or 1d array');
    the edges stay differentiable (against JAX) and are not views of the rows."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    rng = np.random.default_rng(4)
    sample, weights = rng.normal(size=(10, 2)), rng.random(10)
    edges = np.array([[-1.0, 0.0, 2.0], [-1.5, 1.0, 2.0]])
    got, want = tnp.histogramdd(sample, edges), np.histogramdd(sample, edges)
    assert_bitwise(got[0], want[0])
    for g, w in zip(got[1], want[1]):
        assert_bitwise(g, w)
        assert not np.shares_memory(g, edges)
    counts = tnp.histogram2d(sample[:, 0], sample[:, 1], edges)[0]
    assert_bitwise(counts, np.histogram2d(sample[:, 0], sample[:, 1], edges)[0])

    def loss(m):
        return lambda b: m.sum(m.histogramdd(sample, b, density=True, weights=weights)[0]
                               * np.arange(4.0).reshape(2, 2))
    with jax.enable_x64(True):
        want_grad = np.asarray(jax.grad(loss(jnp))(jnp.asarray(edges)))
    np.testing.assert_allclose(tnp.grad(loss(tnp))(edges), want_grad, rtol=1e-12)
    eager = tnp.tensor(edges, requires_grad=True)
    loss(tnp)(eager).backward()
    np.testing.assert_allclose(eager.grad, want_grad, rtol=1e-12)


# --- floating-point helpers ------------------------------------------------------------------


def test_nextafter_of_x_toward_itself_differentiates_as_x():
    """``nextafter(x, x)`` is ``x``: its derivative 1 (was a silent 0, the equal case and a
    zero result left out of the derivative); values still NumPy's bit for bit."""
    assert tnp.grad(lambda x: tnp.nextafter(x, x))(1.5) == 1.0
    assert tnp.grad(lambda x: tnp.nextafter(x, 0.0))(0.0) == 1.0
    assert tnp.grad(lambda x: tnp.nextafter(x, 0.0))(5e-324) == 1.0          # to +0.0
    x = np.array([0.0, -0.0, 5e-324, -5e-324, 1.0, np.inf, np.nan, -3.0])
    y = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, -3.0])
    assert_bitwise(tnp.nextafter(x, y), np.nextafter(x, y))
    grads = tnp.grad(lambda a, b: tnp.sum(tnp.nextafter(a, b)), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(grads[0], [1, 1, 1, 1, 1, 0, 0, 1])
    np.testing.assert_array_equal(grads[1], np.zeros(8))
    eager = tnp.tensor(np.array([2.0, 3.0]), requires_grad=True)
    tnp.sum(tnp.nextafter(eager, eager)).backward()
    np.testing.assert_array_equal(eager.grad, [1.0, 1.0])


def test_a_count_given_as_a_0d_tensor_or_traced_value():
    """``bins`` as a 0-d tensor is the number of bins (NumPy's 0-d array); traced under
    ``jit`` it is a ConcretizationError naming the function (was '`bins` must be 1d, when
    an array'); apply_over_axes' traced axes likewise name it."""
    a = np.array([0.0, 1.0, 2.0, 2.5])
    for got, want in zip(tnp.histogram(a, tnp.asarray(3)), np.histogram(a, np.array(3))):
        assert_bitwise(got, want)
    sample = np.random.default_rng(5).normal(size=(10, 2))
    assert_bitwise(tnp.histogramdd(sample, tnp.asarray(2))[0],
                   np.histogramdd(sample, np.array(2))[0])
    raises_named(tnp.ConcretizationError,
                 lambda: tnp.jit(lambda b: tnp.histogram(a, b))(3), "histogram")
    raises_named(tnp.ConcretizationError,
                 lambda: tnp.jit(lambda b: tnp.histogramdd(sample, b))(2), "histogramdd")
    raises_named(tnp.ConcretizationError,
                 lambda: tnp.jit(lambda x, ax: tnp.apply_over_axes(tnp.sum, x, ax))(
                     np.ones((2, 3)), np.array([0])), "apply_over_axes")
