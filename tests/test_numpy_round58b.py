"""Round 58b: the NumPy functions users reach for that tnp lacked (each was refused by name):
histograms, polynomial fitting and roots, floating-point helpers, index helpers, bit packing
and ``linalg.tensorsolve``/``tensorinv``.

Each is checked against NumPy's values and dtypes, under ``jit`` and ``vmap`` (or a
``ConcretizationError`` naming it where its output shape depends on the values), on an eager
``Tensor`` requiring grad, and its derivatives against JAX (``jax.numpy`` has these
functions) or central finite differences.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import ConcretizationError
from tidu import TiduError

try:
    import jax
    import jax.numpy as jnp
except ImportError:                      # the oracle of some tests: they skip without it
    jax = jnp = None
requires_jax = pytest.mark.skipif(jax is None, reason="JAX is the oracle here; not installed")

RNG = np.random.default_rng(58)


def jax_grad(f, *args, argnums=0):
    with jax.enable_x64(True):
        out = jax.grad(f, argnums=argnums)(*[jnp.asarray(a) for a in args])
    return tuple(map(np.asarray, out)) if isinstance(out, tuple) else np.asarray(out)


def leaves(out):
    """The arrays of a result: an array, or a (nested) tuple/list of them."""
    if isinstance(out, (tuple, list)):
        return [leaf for item in out for leaf in leaves(item)]
    return [out]


def assert_same(got, want, rtol=1e-12, atol=1e-12):
    """NumPy's values, shapes and dtypes, leaf by leaf."""
    got, want = leaves(got), leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert np.shape(g) == w.shape and np.asarray(g).dtype == w.dtype, (g, w)
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=atol)


def raises(error, fn, *names):
    """``fn()`` raises ``error`` (a ``TiduError``) whose message names each of ``names``."""
    with pytest.raises(error) as caught:
        fn()
    assert isinstance(caught.value, TiduError), caught.value
    for name in names:
        assert name in str(caught.value), (name, str(caught.value))


# --- 1. histograms -------------------------------------------------------------------------

A = RNG.standard_normal(40)
HISTOGRAM_CALLS = [
    {}, {"bins": 7}, {"bins": [-1.0, 0.0, 0.5, 2.0]}, {"bins": np.array([-1, 0, 2])},
    {"range": (-1.0, 1.0)}, {"bins": 3, "range": (0.5, 0.5)}, {"density": True},
    {"bins": [-2.0, 0.0, 0.3, 3.0], "density": True}, {"weights": np.abs(A)},
    {"weights": np.ones(40, np.float32)}, {"weights": np.arange(40)},
    {"weights": np.abs(A), "density": True, "range": (-0.5, 2.0)},
]


@pytest.mark.parametrize("kwargs", HISTOGRAM_CALLS, ids=str)
def test_histogram_is_numpys_eager_jit_and_vmap(kwargs):
    for a in (A, A.astype(np.float32), np.round(A * 3).astype(np.int64)):
        want = np.histogram(a, **kwargs)
        assert_same(tnp.histogram(a, **kwargs), want)
        assert_same(tnp.jit(lambda v: tnp.histogram(v, **kwargs))(a), want)
        assert_same(tnp.histogram_bin_edges(a, kwargs.get("bins", 10), kwargs.get("range")),
                    np.histogram_bin_edges(a, kwargs.get("bins", 10), kwargs.get("range")))
    batch = np.stack([A, 3 * A + 1])
    got = tnp.vmap(lambda v: tnp.histogram(v, **kwargs))(batch)
    for k in range(2):
        assert_same([leaf[k] for leaf in leaves(got)], np.histogram(batch[k], **kwargs))


def test_histogram_edge_cases_are_numpys():
    for a, kwargs in [(np.array([]), {}), (np.array([]), {"density": True}),
                      (np.full(5, 2.5), {"bins": 4}), (np.array([0.0, 1.0, 1.0]), {"bins": 1}),
                      (A, {"bins": "auto"}), (A, {"bins": "fd", "range": (-1, 1)}),
                      (A.reshape(5, 8), {"bins": 3}), (np.array([0.0, np.nan, 2.0]),
                                                       {"bins": [0.0, 1.0, 2.0]}),
                      (A.astype(np.float32), {"range": (np.float64(-1), np.float64(1))})]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert_same(tnp.histogram(a, **kwargs), np.histogram(a, **kwargs))
    # a traced range, a constant integer sample under jit, an empty integer sample
    assert_same(tnp.jit(lambda a, low: tnp.histogram(a, bins=4, range=(low, 2.0)))(A, -1.0),
                np.histogram(A, bins=4, range=(-1.0, 2.0)))
    assert_same(tnp.jit(lambda a: tnp.histogram(a, bins=3))(np.full(3, 2)),
                np.histogram(np.full(3, 2), bins=3))
    assert_same(tnp.histogram(np.array([], np.int64)), np.histogram(np.array([], np.int64)))
    assert_same(tnp.histogramdd(A.reshape(20, 2), bins=tnp.tensor([2, 3])),
                np.histogramdd(A.reshape(20, 2), bins=[2, 3]))
    with pytest.warns(RuntimeWarning, match="bool"):
        assert_same(tnp.histogram(np.array([True, False, True])),
                    np.histogram(np.array([True, False, True]).astype(np.uint8)))


def test_histogram_counts_samples_on_and_next_to_the_edges_as_numpy():
    # evenly spaced bins are found by arithmetic, which rounds across edges: NumPy's
    # correction by one must follow, both ways
    for low, high, count in [(0.0, 1.0, 10), (-0.3, 0.7, 7), (1e-3, 3.3, 30), (-5.0, 5.0, 49)]:
        edges = np.linspace(low, high, count + 1)
        a = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf)])
        for dtype in (np.float64, np.float32):
            want = np.histogram(a.astype(dtype), bins=count, range=(low, high))
            assert_same(tnp.histogram(a.astype(dtype), bins=count, range=(low, high)), want)
            assert_same(tnp.jit(lambda v: tnp.histogram(v, bins=count, range=(low, high)))(
                a.astype(dtype)), want)
            sample = np.stack([a, a[::-1]], axis=1).astype(dtype)
            assert_same(tnp.histogramdd(sample, bins=count, range=[(low, high)] * 2),
                        np.histogramdd(sample, bins=count, range=[(low, high)] * 2))


def test_histogram_results_never_alias_the_bins():
    bins = np.array([0.0, 1.0, 2.0])
    _, edges = tnp.histogram(np.array([0.5]), bins=bins)
    assert not np.shares_memory(edges, bins)


@requires_jax
def test_histogram_gradients_are_jaxs():
    a, w = RNG.standard_normal(25), RNG.uniform(0.5, 2.0, 25)
    c, ce = RNG.standard_normal(6), RNG.standard_normal(7)

    def loss(module):
        def f(a, w):
            counts, edges = module.histogram(a, bins=6, weights=w, density=True)
            return (counts * c).sum() + (edges * ce).sum()
        return f
    got = tnp.grad(loss(tnp), argnums=(0, 1))(a, w)
    for g, e in zip(got, jax_grad(loss(jnp), a, w, argnums=(0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)
    # edges given: the density is differentiable in them
    bins = np.array([-3.0, -0.5, 0.1, 0.7, 3.0])

    def in_edges(module):
        return lambda b: (module.histogram(a, bins=b, density=True)[0] * c[:4]).sum()
    np.testing.assert_allclose(tnp.grad(in_edges(tnp))(bins), jax_grad(in_edges(jnp), bins),
                               rtol=1e-10)

    def in_range(module):         # the edges and the density, in the range's ends
        def f(low, high):
            counts, edges = module.histogram(a, bins=5, range=(low, high), density=True)
            return (counts * c[:5]).sum() + (edges * ce[:6]).sum()
        return f
    got = tnp.grad(in_range(tnp), argnums=(0, 1))(-1.5, 2.0)
    for g, e in zip(got, jax_grad(in_range(jnp), -1.5, 2.0, argnums=(0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-10)
    s, w10 = RNG.standard_normal((10, 3)), RNG.uniform(0.5, 2.0, 10)
    cd = RNG.standard_normal((2, 3, 2))

    def dd(module):
        def f(s, w):
            counts, edges = module.histogramdd(s, bins=(2, 3, 2), weights=w, density=True)
            return (counts * cd).sum() + sum((e * e).sum() for e in edges)
        return f
    got = tnp.grad(dd(tnp), argnums=(0, 1))(s, w10)
    for g, e in zip(got, jax_grad(dd(jnp), s, w10, argnums=(0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)

    def two(module):
        def f(x, y, w):
            counts, xe, ye = module.histogram2d(x, y, bins=3, weights=w)
            return (counts * cd.reshape(3, 4)[:, :3]).sum() + (xe ** 2).sum() + ye.sum()
        return f
    x, y = s[:, 0], s[:, 1]
    got = tnp.grad(two(tnp), argnums=(0, 1, 2))(x, y, w10)
    for g, e in zip(got, jax_grad(two(jnp), x, y, w10, argnums=(0, 1, 2))):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


def test_histogramdd_and_histogram2d_are_numpys():
    s, w = RNG.standard_normal((30, 3)), RNG.uniform(size=30)
    for kwargs in [{}, {"bins": (2, 3, 4)}, {"bins": [3, [-1.0, 0.0, 2.0], 2]},
                   {"density": True}, {"weights": w}, {"range": [(-1, 1), None, (0, 0)]}]:
        want = np.histogramdd(s, **kwargs)
        assert_same(tnp.histogramdd(s, **kwargs), want)
        assert_same(tnp.jit(lambda v: tnp.histogramdd(v, **kwargs))(s), want)
        assert_same(tnp.histogramdd(list(s.T), **kwargs), np.histogramdd(list(s.T), **kwargs))
    assert_same(tnp.histogramdd(s[:, 0], bins=4), np.histogramdd(s[:, 0], bins=4))
    assert_same(tnp.histogramdd(s.astype(np.float32)), np.histogramdd(s.astype(np.float32)))
    x, y = s[:, 0], s[:, 1]
    for kwargs in [{}, {"bins": 4}, {"bins": (2, 5)}, {"bins": [-1.0, 0.0, 1.0]},
                   {"bins": [[-1.0, 0.0, 1.0], 3]}, {"density": True, "weights": w}]:
        want = np.histogram2d(x, y, **kwargs)
        assert_same(tnp.histogram2d(x, y, **kwargs), want)
        assert_same(tnp.jit(lambda u, v: tnp.histogram2d(u, v, **kwargs))(x, y), want)
    got = tnp.vmap(lambda u: tnp.histogram2d(u, y, bins=3))(np.stack([x, 2 * x]))
    assert_same([leaf[1] for leaf in leaves(got)], np.histogram2d(2 * x, y, bins=3))


def test_histogram_on_an_eager_tensor_records():
    a = tnp.tensor(A, requires_grad=True)
    w = tnp.tensor(np.abs(A), requires_grad=True)
    counts, edges = np.histogram(a, bins=5, weights=w, density=True)
    assert isinstance(counts, tnp.Tensor) and counts.requires_grad and edges.requires_grad
    grads = (counts.sum() + edges.sum()).backward()
    want = tnp.grad(lambda a, w: tnp.sum(tnp.histogram(a, 5, weights=w, density=True)[0])
                    + tnp.sum(tnp.histogram(a, 5)[1]), argnums=(0, 1))(A, np.abs(A))
    np.testing.assert_allclose(grads.grad(a), want[0], atol=1e-12)
    np.testing.assert_allclose(grads.grad(w), want[1], atol=1e-12)
    counts, xe, ye = np.histogram2d(a, a, bins=2)          # counts only: a constant
    assert not getattr(counts, "requires_grad", False) and xe.requires_grad


def test_histogram_errors_name_the_function():
    raises(ConcretizationError, lambda: tnp.jit(lambda v: tnp.histogram(v, bins="auto"))(A),
           "histogram", "auto")
    raises(ValueError, lambda: tnp.histogram(np.array([0.0, np.nan])), "histogram",
           "not finite")
    raises(ValueError, lambda: tnp.histogram(A, bins=[1.0, 0.0]), "histogram", "monoton")
    raises(ValueError, lambda: tnp.histogram(A, bins=0), "histogram", "positive")
    raises(ValueError, lambda: tnp.histogram(A, range=(1, 0)), "histogram", "range")
    raises(ValueError, lambda: tnp.histogram(A, weights=np.ones(3)), "histogram", "weights")
    raises(TypeError, lambda: tnp.histogram(A, bins="auto", weights=np.ones(40)), "histogram")
    raises(ValueError, lambda: tnp.histogram_bin_edges(A, bins="nonsense"),
           "histogram_bin_edges")
    raises(ValueError, lambda: tnp.histogramdd(A.reshape(20, 2), bins=(2, 2, 2)),
           "histogramdd", "dimension")
    raises(ValueError, lambda: tnp.histogram2d(A, A[:3]), "histogram2d", "same length")
    raises(ValueError, lambda: tnp.histogramdd(A.reshape(20, 2), weights=np.ones(3)),
           "histogramdd", "weights")
    raises(ValueError, lambda: tnp.histogram(A, range=(0.0, np.inf)), "histogram", "finite")
    raises(TypeError, lambda: tnp.histogram(A, bins=2.5), "histogram", "integer")


# --- 2. polyfit, roots, poly, polydiv --------------------------------------------------------

X, Y = RNG.standard_normal(10), RNG.standard_normal(10)
YY, W = RNG.standard_normal((10, 3)), RNG.uniform(0.5, 2.0, 10)
POLYFIT_CALLS = [((X, Y, 2), {}), ((X, YY, 3), {}), ((X, Y, 2), {"w": W}),
                 ((X, YY, 1), {"w": W}), ((X, Y, 2), {"full": True}),
                 ((X, YY, 2), {"full": True, "rcond": 1e-3}), ((X, Y, 2), {"cov": True}),
                 ((X, YY, 2), {"cov": True, "w": W}), ((X, Y, 2), {"cov": "unscaled"}),
                 ((X.astype(np.float32), Y.astype(np.float32), 2), {}),
                 ((np.arange(5), np.arange(5) ** 2, 2), {}), ((X, Y + 1j * X, 2), {}),
                 ((X[:3], Y[:3], 2), {"full": True})]


@pytest.mark.parametrize("args, kwargs", POLYFIT_CALLS, ids=str)
def test_polyfit_is_numpys_eager_jit_and_vmap(args, kwargs):
    tol = 2e-5 if args[0].dtype == np.float32 else 1e-9
    want = np.polyfit(*args, **kwargs)
    assert_same(tnp.polyfit(*args, **kwargs), want, rtol=tol, atol=tol)
    if not kwargs.get("full"):
        assert_same(tnp.jit(lambda x, y: tnp.polyfit(x, y, args[2], **kwargs))(*args[:2]), want,
                    rtol=tol, atol=tol)
    got = tnp.vmap(lambda y: tnp.polyfit(args[0], y, args[2], **kwargs))(
        np.stack([args[1], 2 * args[1] + 1]))
    for k, leaf in enumerate(leaves(np.polyfit(args[0], 2 * args[1] + 1, args[2], **kwargs))):
        np.testing.assert_allclose(np.asarray(leaves(got)[k])[1], leaf, rtol=tol, atol=tol)


def test_polyfit_warns_where_numpy_does():
    x = np.array([1.0, 1.0, 1.0, 2.0])
    with pytest.warns(np.exceptions.RankWarning):
        tnp.polyfit(x, x, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tnp.polyfit(X, Y, 2)


@requires_jax
def test_polynomial_gradients_are_jaxs():
    c = RNG.standard_normal(3)

    def fit(module):
        return lambda x, y, w: ((module.polyfit(x, y, 2, w=w) * c).sum()
                                + module.polyfit(x, y, 2, cov=True)[1].sum())
    got = tnp.grad(fit(tnp), argnums=(0, 1, 2))(X, Y, W)
    for g, e in zip(got, jax_grad(fit(jnp), X, Y, W, argnums=(0, 1, 2))):
        np.testing.assert_allclose(g, e, rtol=1e-8, atol=1e-10)
    p = np.array([1.0, -0.5, -2.0, 0.7, 0.3])                 # two real, two complex roots

    def symmetric(module, roots):
        return lambda p: (roots(p) ** 2).real.sum() + module.exp(roots(p)).real.sum()
    np.testing.assert_allclose(
        tnp.grad(symmetric(tnp, tnp.roots))(p),
        jax_grad(symmetric(jnp, lambda q: jnp.roots(q, strip_zeros=False)), p), rtol=1e-9)
    z, cz = RNG.standard_normal(3), RNG.standard_normal(4)
    np.testing.assert_allclose(tnp.grad(lambda z: (tnp.poly(z) * cz).sum())(z),
                               jax_grad(lambda z: (jnp.poly(z) * cz).sum(), z), rtol=1e-12)
    a = RNG.standard_normal((3, 3))
    np.testing.assert_allclose(tnp.grad(lambda a: (tnp.poly(a) * cz).sum())(a),
                               jax_grad(lambda a: (jnp.poly(a) * cz).real.sum(), a),
                               rtol=1e-9, atol=1e-12)
    u, v = RNG.standard_normal(5), RNG.standard_normal(3)

    def divide(module):          # (JAX keeps the remainder's leading zeros: squares ignore them)
        return lambda u, v: ((module.polydiv(u, v)[0] * cz[:3]).sum()
                             + (module.polydiv(u, v)[1] ** 2).sum())
    got = tnp.grad(divide(tnp), argnums=(0, 1))(u, v)
    for g, e in zip(got, jax_grad(divide(jnp), u, v, argnums=(0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-10)


def test_roots_poly_polydiv_are_numpys():
    for p in ([1.0, -3.0, 2.0], [0, 0, 1.0, -3.0, 2.0, 0, 0], [2.0, 0.0, 1.0], [0.0, 0.0],
              [3.0], [1, 2, 3], np.array([1.0, 2.0, 3.0], np.float32), [1 + 1j, 2, 3], [0.0, 5.0]):
        tol = 1e-6 if np.asarray(p).dtype == np.float32 else 1e-12
        assert_same(tnp.roots(p), np.roots(p), rtol=tol)
    for z in ([1.0, 2.0], [1 + 1j, 1 - 1j], [1 + 1j, 2], [1, 2, 3], np.eye(3) * 2, [],
              np.array([1.0, 2.0], np.float32), np.array([[0.0, -1.0], [1.0, 0.0]])):
        got, want = tnp.poly(np.asarray(z)), np.poly(np.asarray(z))
        assert_same(got, want)
    rotation = np.array([[0.0, -1.0], [1.0, 0.0]])       # complex eigenvalues, a real result
    for matrix in (rotation, RNG.standard_normal((4, 4))):
        assert_same(tnp.jit(tnp.poly)(matrix), np.poly(matrix), rtol=1e-12)
    for u, v in [([1.0, -3, 2], [1.0, -1]), ([1.0, 2, 3, 4], [2.0, 1]), ([1.0, 2], [1.0, 2, 3]),
                 ([3.0], [2.0]), ([1, 2, 3], [1, 1]), ([1.0, 1, 1], [1.0, 1, 1]),
                 ([1j, 2, 3], [1.0, 1j])]:
        assert_same(tnp.polydiv(u, v), np.polydiv(u, v))


def test_polynomials_on_an_eager_tensor_record():
    p = tnp.tensor([1.0, -0.5, -2.0, 0.7], requires_grad=True)
    found = np.roots(p)
    assert isinstance(found, tnp.Tensor) and found.requires_grad
    grads = tnp.sum(tnp.real(found ** 2)).backward()
    # the sum of the squared roots is e1**2 - 2 e2 (e1 = -p1/p0, e2 = p2/p0): its gradient
    p0, p1, p2 = 1.0, -0.5, -2.0
    np.testing.assert_allclose(grads.grad(p), [-2 * p1 ** 2 / p0 ** 3 + 2 * p2 / p0 ** 2,
                                               2 * p1 / p0 ** 2, -2 / p0, 0.0], atol=1e-12)
    x = tnp.tensor(X, requires_grad=True)
    y = tnp.tensor(Y, requires_grad=True)
    c = np.polyfit(x, y, 2)
    assert isinstance(c, tnp.Tensor) and c.requires_grad
    grads = tnp.sum(c).backward()
    want = tnp.grad(lambda x, y: tnp.sum(tnp.polyfit(x, y, 2)), argnums=(0, 1))(X, Y)
    np.testing.assert_allclose(grads.grad(x), want[0], rtol=1e-10)
    np.testing.assert_allclose(grads.grad(y), want[1], rtol=1e-10)
    q, r = np.polydiv(y, x[:3])
    assert q.requires_grad and r.requires_grad
    assert np.poly(x[:3]).requires_grad


def test_polynomial_errors_name_the_function():
    p = np.array([1.0, -3.0, 2.0])
    raises(ConcretizationError, lambda: tnp.jit(tnp.roots)(p), "roots")
    raises(ConcretizationError, lambda: tnp.jit(lambda u: tnp.polydiv(u, p[:2]))(p), "polydiv")
    raises(ConcretizationError, lambda: tnp.jit(tnp.poly)(p + 0j), "poly")
    raises(ConcretizationError, lambda: tnp.jit(lambda y: tnp.polyfit(X, y, 2, full=True))(Y),
           "polyfit", "rank")
    raises(ValueError, lambda: tnp.polyfit(X, Y, -1), "polyfit", "deg")
    raises(TypeError, lambda: tnp.polyfit(X, Y[:3], 1), "polyfit", "same length")
    raises(TypeError, lambda: tnp.polyfit(X.reshape(2, 5), Y, 1), "polyfit", "1D")
    raises(TypeError, lambda: tnp.polyfit(X, Y, 1, w=W[:2]), "polyfit", "w")
    raises(ValueError, lambda: tnp.polyfit(X[:3], Y[:3], 2, cov=True), "polyfit", "exceed")
    raises(ValueError, lambda: tnp.roots(np.ones((2, 2))), "roots", "rank-1")
    raises(ValueError, lambda: tnp.poly(np.ones((2, 3))), "poly", "square")


# --- 3. floating-point helpers, i0, sort_complex, iscomplex/isreal ---------------------------

SPECIAL = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                    -2.2250738585072014e-308, 2.0 ** -1022 * (1 - 2.0 ** -52), 1e-310, 3.0, 0.75,
                    1.0, 1 - 2.0 ** -53, -2.0, 1.7976931348623157e308, -7.5, 65504.0, 1e-40])


def identical(got, want):
    """Bit for bit NumPy's: values, NaNs, zeros' signs and the dtype."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    if got.dtype.kind == "c":
        identical(got.real, want.real)
        identical(got.imag, want.imag)
        return
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
        return
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | np.isnan(got) & np.isnan(want)
    assert same.all(), (got[~same], want[~same])


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_frexp_nextafter_spacing_are_numpys_bit_for_bit(dtype):
    with np.errstate(all="ignore"):
        x = SPECIAL.astype(dtype)
        wide = RNG.standard_normal(2000) * np.exp(RNG.uniform(-700, 700, 2000))
        for values in (x, wide.astype(dtype)):
            for frexp in (tnp.frexp, tnp.jit(tnp.frexp), tnp.vmap(tnp.frexp)):
                for g, w in zip(frexp(values), np.frexp(values)):
                    identical(g, w)
            for spacing in (tnp.spacing, tnp.jit(tnp.spacing)):
                identical(spacing(values), np.spacing(values))
        for nextafter in (tnp.nextafter, tnp.jit(tnp.nextafter)):
            identical(nextafter(x[:, None], x[None, :]), np.nextafter(x[:, None], x[None, :]))
        w = wide.astype(dtype)
        identical(tnp.nextafter(w, w[::-1]), np.nextafter(w, w[::-1]))
    identical(tnp.frexp(np.arange(-3, 4))[0], np.frexp(np.arange(-3, 4))[0])
    identical(tnp.nextafter(np.float32(1), 2.0), np.nextafter(np.float32(1), 2.0))
    identical(tnp.spacing(np.arange(3)), np.spacing(np.arange(3)))


def test_floating_point_helpers_derivatives():
    x = np.array([3.0, -0.3, 1e-300, 7.5])
    mantissa_grad = tnp.grad(lambda v: tnp.sum(tnp.frexp(v)[0]))(x)
    np.testing.assert_array_equal(mantissa_grad, 2.0 ** -np.frexp(x)[1])
    g1, g2 = tnp.grad(lambda a, b: tnp.sum(tnp.nextafter(a, b)), argnums=(0, 1))(x, -x)
    np.testing.assert_array_equal(g1, np.ones(4))
    np.testing.assert_array_equal(g2, np.zeros(4))
    np.testing.assert_array_equal(tnp.grad(lambda v: tnp.sum(tnp.spacing(v)))(x), np.zeros(4))
    t = tnp.tensor(x, requires_grad=True)
    for out in (np.frexp(t)[0], np.nextafter(t, 0.0), np.spacing(t), np.i0(t)):
        assert isinstance(out, tnp.Tensor) and out.requires_grad
    grads = (np.frexp(t)[0].sum() + np.nextafter(t, 0.0).sum()).backward()
    np.testing.assert_array_equal(grads.grad(t), 2.0 ** -np.frexp(x)[1] + 1)


def test_i0_is_numpys_and_differentiates_to_i1():
    special = pytest.importorskip("scipy.special")
    x = np.concatenate([np.linspace(-30, 30, 241), [0.0, 8.0, -8.0, 8.0000001]])
    identical(tnp.i0(x), np.i0(x))
    identical(tnp.jit(tnp.i0)(x), np.i0(x))
    np.testing.assert_allclose(tnp.i0(x.astype(np.float32)), np.i0(x.astype(np.float32)),
                               rtol=1e-6)
    assert tnp.i0(x.astype(np.float32)).dtype == np.float32
    identical(tnp.i0(np.arange(4)), np.i0(np.arange(4)))
    derivative = tnp.vmap(tnp.grad(tnp.i0))(x)
    np.testing.assert_allclose(derivative, special.i1(x), rtol=1e-13, atol=1e-300)
    some = x[x != 0][::7]
    second = tnp.vmap(tnp.grad(tnp.grad(tnp.i0)))(some)
    np.testing.assert_allclose(second, special.i0(some) - special.i1(some) / some, rtol=1e-10)
    raises(TypeError, lambda: tnp.i0(np.array([1j])), "i0", "complex")
    raises(TypeError, lambda: tnp.frexp(np.array([1j])), "frexp")


@requires_jax
def test_sort_complex_is_numpys_and_differentiates_as_jax():
    z = np.round(RNG.standard_normal((3, 6)), 1) + 1j * RNG.standard_normal((3, 6))
    z[0, :2] = [1 + 2j, 1 - 2j]                 # equal real parts: the imaginary part decides
    for a in (z, z.real, z.real.astype(np.float32), np.array([3, 1, 2], np.int16),
              z.astype(np.complex64), np.arange(4)):
        identical(tnp.sort_complex(a), np.sort_complex(a))
        identical(tnp.jit(tnp.sort_complex)(a), np.sort_complex(a))
    identical(tnp.vmap(tnp.sort_complex)(z)[1], np.sort_complex(z[1]))
    c = RNG.standard_normal((3, 6))

    def loss(module):
        return lambda a: (module.real(module.sort_complex(a)) * c).sum()
    np.testing.assert_allclose(tnp.grad(loss(tnp))(z.real), jax_grad(loss(jnp), z.real))
    t = tnp.tensor(z, requires_grad=True)
    out = np.sort_complex(t)
    assert isinstance(out, tnp.Tensor) and out.requires_grad
    grad = tnp.sum(tnp.real(out) * c + tnp.imag(out)).backward().grad(t)
    order = np.lexsort((z.imag, z.real), axis=-1)
    want = np.zeros_like(z)
    np.put_along_axis(want, order, c + 1j, axis=-1)
    np.testing.assert_allclose(grad, want)
    raises(ValueError, lambda: tnp.sort_complex(np.array(1.0)), "sort_complex")


def test_iscomplex_and_isreal():
    z = np.array([[1 + 1j, 2 + 0j], [0 - 0j, -1j]])
    for a in (z, z.real, np.arange(3), np.array(1 + 0j)):
        for name in ("iscomplex", "isreal"):
            identical(getattr(tnp, name)(a), getattr(np, name)(a))
            identical(tnp.jit(getattr(tnp, name))(a), getattr(np, name)(a))
    t = tnp.tensor(z, requires_grad=True)
    identical(np.iscomplex(t), np.iscomplex(z))
    identical(np.isreal(t), np.isreal(z))


# --- 4. ix_, mask_indices, apply_over_axes, packbits/unpackbits -------------------------------


def test_ix_is_numpys_and_differentiable():
    x = RNG.standard_normal((4, 5))
    for args in [([0, 2], [1, 3, 4]), ([True, False, True, True], np.array([4, 0])), ([], [1]),
                 (np.array([1]), [2], np.array([0, 1]))]:
        assert_same(tnp.ix_(*args), np.ix_(*args))
    np.testing.assert_array_equal(x[tnp.ix_([0, 2], [True, False, True, False, True])],
                                  x[np.ix_([0, 2], [True, False, True, False, True])])
    assert_same(tnp.jit(lambda r: tnp.ix_(r, [1, 2]))(np.array([0, 3])),
                np.ix_(np.array([0, 3]), [1, 2]))
    a, b = RNG.standard_normal(3), RNG.standard_normal(2)
    got = tnp.grad(lambda a, b: tnp.sum(tnp.ix_(a, b)[0] * tnp.ix_(a, b)[1]), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(got[0], np.full(3, b.sum()))
    np.testing.assert_allclose(got[1], np.full(2, a.sum()))
    index = np.array([0, 2])
    assert not np.shares_memory(tnp.ix_(index)[0], index)
    raises(ConcretizationError, lambda: tnp.jit(lambda m: tnp.ix_(m))(np.array([True, False])),
           "ix_")
    raises(ValueError, lambda: tnp.ix_(np.ones((2, 2))), "ix_", "1 dimensional")


def test_mask_indices_is_numpys():
    for n, k in [(3, 0), (4, 1), (4, -1)]:
        for ours, theirs in [(tnp.triu, np.triu), (tnp.tril, np.tril)]:
            assert_same(tnp.mask_indices(n, ours, k), np.mask_indices(n, theirs, k))


@requires_jax
def test_apply_over_axes_is_numpys_and_differentiates_through_func():
    a = RNG.standard_normal((2, 3, 4))
    for axes in ([0, 2], -1, (1,), []):
        assert_same(tnp.apply_over_axes(tnp.sum, a, axes), np.apply_over_axes(np.sum, a, axes))
    assert_same(tnp.jit(lambda v: tnp.apply_over_axes(tnp.mean, v, [1, 2]))(a),
                np.apply_over_axes(np.mean, a, [1, 2]))
    assert not np.shares_memory(tnp.apply_over_axes(tnp.sum, a, []), a)
    c = RNG.standard_normal((1, 3, 1))

    def loss(module):
        return lambda v: (module.apply_over_axes(module.max, v * v, [0, 2]) * c).sum()
    np.testing.assert_allclose(tnp.grad(loss(tnp))(a), jax_grad(loss(jnp), a), rtol=1e-12)
    t = tnp.tensor(a, requires_grad=True)
    out = np.apply_over_axes(tnp.sum, t, [0, 1])
    assert isinstance(out, tnp.Tensor) and out.requires_grad
    np.testing.assert_allclose(tnp.sum(out).backward().grad(t), np.ones_like(a))
    raises(ValueError, lambda: tnp.apply_over_axes(lambda v, ax: tnp.sum(v), a, [0]),
           "apply_over_axes", "shape")


def test_packbits_and_unpackbits_are_numpys_under_jit_and_vmap():
    bits = RNG.integers(0, 2, (3, 13))
    for a, kwargs in [(bits, {}), (bits, {"axis": 1}), (bits, {"axis": 0, "bitorder": "little"}),
                      (RNG.integers(-2, 2, 9).astype(np.int8), {}), (bits > 0, {"axis": -1}),
                      (np.zeros(0, int), {})]:
        want = np.packbits(a, **kwargs)
        assert_same(tnp.packbits(a, **kwargs), want)
        assert_same(tnp.jit(lambda v: tnp.packbits(v, **kwargs))(a), want)
    assert_same(tnp.vmap(lambda v: tnp.packbits(v))(bits)[2], np.packbits(bits[2]))
    data = RNG.integers(0, 256, (3, 4)).astype(np.uint8)
    for kwargs in [{}, {"axis": 1}, {"axis": 0, "count": 5}, {"count": -3},
                   {"axis": 1, "count": 40}, {"bitorder": "little", "axis": -1, "count": 0}]:
        want = np.unpackbits(data, **kwargs)
        assert_same(tnp.unpackbits(data, **kwargs), want)
        assert_same(tnp.jit(lambda v: tnp.unpackbits(v, **kwargs))(data), want)
    assert_same(tnp.vmap(lambda v: tnp.unpackbits(v, count=7))(data)[1],
                np.unpackbits(data[1], count=7))
    assert_same(tnp.unpackbits(tnp.packbits(bits, axis=1), axis=1, count=13), bits.astype(np.uint8))
    t = tnp.tensor(bits)
    assert_same(np.packbits(t, axis=0), np.packbits(bits, axis=0))
    raises(TypeError, lambda: tnp.packbits(np.ones(3)), "packbits", "integer")
    raises(TypeError, lambda: tnp.unpackbits(np.ones(3, np.int64)), "unpackbits", "unsigned byte")
    raises(ValueError, lambda: tnp.packbits(bits, bitorder="middle"), "packbits", "order")


# --- 5. linalg.tensorsolve, linalg.tensorinv --------------------------------------------------


@requires_jax
def test_tensorsolve_and_tensorinv_are_numpys_and_differentiate_as_jax():
    m = RNG.standard_normal((6, 6)) + 3 * np.eye(6)
    cases = [(m.reshape(2, 3, 3, 2), RNG.standard_normal((2, 3)), None),
             (m.reshape(6, 2, 3), RNG.standard_normal(6), None),
             (np.moveaxis(m.reshape(3, 2, 3, 2), -1, 0), RNG.standard_normal((3, 2)), (0,)),
             (m.reshape(2, 3, 6).astype(np.float32), np.ones((2, 3), np.float32), None)]
    for a, b, axes in cases:
        tol = 1e-5 if a.dtype == np.float32 else 1e-12
        want = np.linalg.tensorsolve(a, b, axes)
        assert_same(tnp.linalg.tensorsolve(a, b, axes), want, rtol=tol, atol=tol)
        assert_same(tnp.jit(lambda p, q: tnp.linalg.tensorsolve(p, q, axes))(a, b), want,
                    rtol=tol, atol=tol)
    for a, ind in [(m.reshape(2, 3, 6), 2), (m.reshape(6, 2, 3), 1), (m.reshape(3, 2, 3, 2), 2)]:
        assert_same(tnp.linalg.tensorinv(a, ind), np.linalg.tensorinv(a, ind))
        assert_same(tnp.jit(lambda p: tnp.linalg.tensorinv(p, ind))(a), np.linalg.tensorinv(a, ind))
    stacked = np.stack([m, m.T]).reshape(2, 2, 3, 6)
    got = tnp.vmap(lambda p: tnp.linalg.tensorinv(p))(stacked)
    assert_same(got[1], np.linalg.tensorinv(stacked[1]))
    a, b, axes = cases[2]
    c = RNG.standard_normal((3, 2))

    def solve_loss(module):
        return lambda p, q: (module.linalg.tensorsolve(p, q, axes) * c).sum()
    got = tnp.grad(solve_loss(tnp), argnums=(0, 1))(a, b)
    for g, e in zip(got, jax_grad(solve_loss(jnp), a, b, argnums=(0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)
    ci = RNG.standard_normal((6, 2, 3))

    def inv_loss(module):
        return lambda p: (module.linalg.tensorinv(p, 2) * ci).sum()
    a = m.reshape(2, 3, 6)
    np.testing.assert_allclose(tnp.grad(inv_loss(tnp))(a), jax_grad(inv_loss(jnp), a),
                               rtol=1e-10, atol=1e-12)
    t = tnp.tensor(a, requires_grad=True)
    out = np.linalg.tensorinv(t, 2)
    assert isinstance(out, tnp.Tensor) and out.requires_grad
    np.testing.assert_allclose(tnp.sum(out * ci).backward().grad(t), tnp.grad(inv_loss(tnp))(a),
                               rtol=1e-12)
    raises(np.linalg.LinAlgError, lambda: tnp.linalg.tensorsolve(m.reshape(2, 3, 6), np.ones(2)),
           "tensorsolve")
    raises(ValueError, lambda: tnp.linalg.tensorinv(m, 0), "tensorinv", "ind")
    raises(np.linalg.LinAlgError, lambda: tnp.linalg.tensorinv(m.reshape(4, 9), 1), "tensorinv")
