"""``primitives.tensor.scipy.stats``: the distributions beyond the first eight.

``laplace``, ``cauchy``, ``logistic``, ``expon``, ``lognorm``, ``halfnorm``, ``chi2``,
``uniform`` (continuous) and ``binom``, ``nbinom``, ``geom`` (discrete):

- every method's values against ``scipy.stats`` on grids that cross the support's edges
  (points on them, outside, infinite and NaN), with parameters outside their domain
  (NaN, as SciPy), ``loc``/``scale``, frozen distributions, and ``float32`` kept;
- accuracy where SciPy's generic ``log(cdf)`` underflows (closed forms instead);
- gradients in the data and every continuous parameter against central differences of
  SciPy's functions, and against ``jax.scipy.stats`` (one jitted reference) where JAX has
  the distribution, including JAX's conventions on the support's edges and kinks; no NaN
  derivative anywhere inside the support;
- ``jit(grad)``, ``vmap(grad)``, ``hessian`` and the eager ``Tensor.backward``;
- maximum likelihood with ``scipy.optimize.minimize(jac=True)`` against ``scipy.stats``'
  ``fit``;
- no silent wrong gradient: counts, ``binom``'s ``n`` and the shapes of tails raise.
"""

from __future__ import annotations

import numpy as np
import pytest
from tensor_helpers import numeric_grad

import primitives.tensor as tnp
from primitives.tensor.errors import TensorShapeError, TensorTypeError
from primitives.tensor.scipy import stats
from tidu import ADRuleError, TiduError

scipy_stats = pytest.importorskip("scipy.stats")

CONTINUOUS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
DISCRETE = ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf")
X = np.array([-np.inf, -40.0, -3.0, -1.0, -0.5, 0.0, 1e-300, 1e-8, 0.2, 0.5, 1.0, 1.3, 2.0,
              4.0, 25.0, np.inf, np.nan])[:, None]
K = np.array([-np.inf, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.7, 2.0, 3.0, 4.0, 5.0, 7.0, 12.0,
              np.inf, np.nan])[:, None]

VALUE_CASES = [  # (distribution, methods, positional arguments, keyword arguments)
    ("laplace", CONTINUOUS, (X,), {}),
    ("laplace", CONTINUOUS, (X, np.array([0.5, -1.0]), np.array([2.0, 0.1])), {}),
    ("cauchy", CONTINUOUS, (np.concatenate([X, [[1e200], [-1e200], [-1e10]]]),), {}),
    ("cauchy", CONTINUOUS, (X,), {"loc": -0.5, "scale": 3.0}),
    ("logistic", CONTINUOUS, (np.concatenate([X, [[-800.0], [800.0]]]),), {}),
    ("logistic", CONTINUOUS, (X, 1.0, np.array([0.5, 2.0])), {}),
    ("expon", CONTINUOUS, (np.concatenate([X, [[800.0]]]),), {}),
    ("expon", CONTINUOUS, (X,), {"loc": np.array([-1.0, 0.2]), "scale": 0.5}),
    ("lognorm", CONTINUOUS, (X, np.array([0.25, 0.7, 1.0, 3.0])), {}),
    ("lognorm", CONTINUOUS, (X, 0.9), {"loc": -0.5, "scale": 2.0}),
    ("halfnorm", CONTINUOUS, (X,), {}),
    ("halfnorm", CONTINUOUS, (X,), {"loc": 0.2, "scale": np.array([0.7, 3.0])}),
    ("chi2", CONTINUOUS, (X[:-2], np.array([0.5, 1.0, 2.0, 3.0, 7.5])), {}),
    ("chi2", CONTINUOUS, (X, 4.0), {"loc": -1.0, "scale": 2.0}),
    ("uniform", CONTINUOUS, (X,), {}),
    ("uniform", CONTINUOUS, (X, np.array([-1.0, 0.2]), np.array([2.0, 0.3])), {}),
    ("binom", DISCRETE, (K[:-2], np.array([0.0, 1.0, 4.0, 12.0]), np.array([[0.0], [0.3],
                                                                            [1.0]])[:, None]),
     {}),
    ("binom", DISCRETE, (K, 40, 0.05), {"loc": 2}),
    ("nbinom", DISCRETE, (K[:-2], np.array([0.5, 1.0, 2.5, 30.0]), np.array([[0.3], [1.0]])
                          [:, None]), {}),
    ("nbinom", DISCRETE, (K[1:], 3.0, 0.6), {"loc": -1}),
    ("geom", DISCRETE, (K, np.array([1e-12, 0.3, 0.9, 1.0])), {}),
    ("geom", DISCRETE, (K, 0.25), {"loc": 1}),
]
INVALID_CASES = [  # parameters outside their domain: NaN everywhere (no logcdf/logsf: below)
    ("laplace", CONTINUOUS, (X,), {"scale": np.array([0.0, -1.0, np.nan])}),
    ("cauchy", CONTINUOUS, (X,), {"scale": np.array([0.0, -1.0, np.nan])}),
    ("logistic", CONTINUOUS, (X,), {"scale": np.array([0.0, -1.0])}),
    ("expon", CONTINUOUS, (X,), {"scale": np.array([0.0, -1.0])}),
    ("lognorm", CONTINUOUS, (X, np.array([0.0, -1.0, np.nan, 1.0])), {"scale": [1, 1, 1, -2]}),
    ("halfnorm", CONTINUOUS, (X,), {"scale": np.array([0.0, -1.0])}),
    ("chi2", CONTINUOUS, (X, np.array([0.0, -1.0, np.nan])), {}),
    ("uniform", CONTINUOUS, (X,), {"scale": np.array([0.0, -1.0])}),
    ("binom", ("logpmf", "pmf", "cdf", "sf"), (K, np.array([4.5, -1.0, 4.0, 4.0]),
                                               np.array([0.3, 0.3, 1.2, -0.1])), {}),
    ("nbinom", ("logpmf", "pmf", "cdf", "sf"), (K, np.array([0.0, -1.0, 2.0, 2.0]),
                                                np.array([0.3, 0.3, 0.0, 1.2])), {}),
    ("geom", ("logpmf", "pmf", "cdf", "sf"), (K, np.array([0.0, -0.5, 1.5])), {}),
]


def assert_close(got, want, rtol=1e-12, atol=0.0):
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float),
                               rtol=rtol, atol=atol)


def _check_values(name, methods, args, kwargs, rtol):
    for method in methods:
        # a discrete log(cdf) near 0: SciPy's is log(cdf) of a rounded cdf (absolute error
        # about 1e-16), these are log1p(-sf), accurate (see test_accurate_log_tails)
        atol = 1e-15 if method in ("logcdf", "logsf") else 1e-300
        with np.errstate(all="ignore"):
            want = getattr(getattr(scipy_stats, name), method)(*args, **kwargs)
            got = getattr(getattr(stats, name), method)(*args, **kwargs)
            frozen = getattr(getattr(stats, name)(*args[1:], **kwargs), method)(args[0])
        assert np.shape(got) == np.shape(want), method
        assert np.dtype(got.dtype) == np.float64
        assert_close(got, want, rtol=rtol, atol=atol)
        assert_close(frozen, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("name, methods, args, kwargs", VALUE_CASES,
                         ids=[f"{case[0]}{i}" for i, case in enumerate(VALUE_CASES)])
def test_values_are_scipys(name, methods, args, kwargs):
    # SciPy's binom.pmf, nbinom.pmf are Boost's (not exp of its own logpmf): a few ulps
    rtol = 1e-12 if name not in ("binom", "nbinom") else 1e-11
    _check_values(name, methods, args, kwargs, rtol)


@pytest.mark.parametrize("name, methods, args, kwargs", INVALID_CASES,
                         ids=[f"{case[0]}{i}" for i, case in enumerate(INVALID_CASES)])
def test_invalid_parameters_give_nan_as_scipy(name, methods, args, kwargs):
    _check_values(name, methods, args, kwargs, 1e-12)


def test_invalid_parameters_of_discrete_log_tails_are_nan():
    # SciPy gives NaN there too, except 0 for its log(cdf) at k at/above the support's top
    # (not NaN, unlike its own cdf): these are NaN throughout
    for fn in (lambda k: stats.binom.logcdf(k, 4.5, 0.3), lambda k: stats.binom.logsf(k, 4, 1.2),
               lambda k: stats.nbinom.logcdf(k, 0.0, 0.3), lambda k: stats.geom.logcdf(k, 0.0),
               lambda k: stats.geom.logsf(k, 1.5)):
        assert np.all(np.isnan(fn(K)))


def test_accurate_where_scipys_generic_log_underflows():
    z = np.array([-800.0, -40.0, -3.0])
    assert_close(stats.laplace.logcdf(z), z - np.log(2), rtol=1e-15)
    assert_close(stats.laplace.logsf(-z), z - np.log(2), rtol=1e-15)
    assert_close(stats.logistic.logcdf(z), z - np.log1p(np.exp(z)), rtol=1e-15)
    assert_close(stats.expon.logsf(-z), z, rtol=0)
    scipy_special = pytest.importorskip("scipy.special")
    assert_close(stats.halfnorm.logsf([40.0, 100.0]),
                 np.log(2) + scipy_special.log_ndtr([-40.0, -100.0]), rtol=1e-15)
    assert_close(stats.lognorm.logsf(np.exp(50.0), 1.0), scipy_special.log_ndtr(-50.0),
                 rtol=1e-14)
    # geom with a tiny p: log(cdf(k)) = log(1 - (1 - p)**k) ~ log(k p)
    assert_close(stats.geom.logcdf(3, 1e-20), np.log(3e-20), rtol=1e-14)
    assert_close(stats.expon.logcdf(1e-20), np.log(1e-20), rtol=1e-15)
    # the binomial coefficient through betaln: a large n (gammaln differences lose digits)
    n, k = 1e15, 3.0
    want = np.log(n) + np.log(n - 1) + np.log(n - 2) - np.log(6.0) + 3 * np.log(1e-15) + (
        (n - k) * np.log1p(-1e-15))
    assert_close(stats.binom.logpmf(k, n, 1e-15), want, rtol=1e-13)


def test_float32_is_kept():
    x = np.array([-0.5, 0.1, 0.7, 2.0], dtype=np.float32)
    k = np.array([-1.0, 0.0, 1.0, 3.0], dtype=np.float32)
    f32 = np.float32
    cases = [("laplace", CONTINUOUS, (x, f32(0.2), f32(1.5))),
             ("cauchy", CONTINUOUS, (x, f32(0.2), f32(1.5))),
             ("logistic", CONTINUOUS, (x, f32(0.2), f32(1.5))),
             ("expon", CONTINUOUS, (x, f32(-0.1), f32(1.5))),
             ("lognorm", CONTINUOUS, (x, f32(0.8))),
             ("halfnorm", CONTINUOUS, (x,)),
             ("chi2", CONTINUOUS, (x, f32(3.0))),
             ("uniform", CONTINUOUS, (x, f32(-0.2), f32(1.5))),
             ("binom", DISCRETE, (k, f32(4.0), f32(0.3))),
             ("nbinom", DISCRETE, (k, f32(2.5), f32(0.3))),
             ("geom", DISCRETE, (k, f32(0.3)))]
    for name, methods, args in cases:
        for method in methods:
            got = getattr(getattr(stats, name), method)(*args)
            assert got.dtype == np.float32, (name, method)
            want = getattr(getattr(scipy_stats, name), method)(*[np.float64(a) for a in args])
            assert_close(got, want, rtol=2e-5, atol=1e-6)
    grad = tnp.grad(lambda s: tnp.sum(stats.lognorm.logpdf(x, s)))(f32(0.8))
    assert grad.dtype == np.float32


# --- gradients ----------------------------------------------------------------------------------

GRADIENT_CASES = [  # (name, method, arguments, which of them are differentiated)
    *[("laplace", m, (np.array([-1.0, 0.3, 2.0]), 0.5, 2.0), (0, 1, 2)) for m in CONTINUOUS],
    *[("cauchy", m, (np.array([-30.0, 0.3, 2.0]), 0.5, 2.0), (0, 1, 2)) for m in CONTINUOUS],
    *[("logistic", m, (np.array([-30.0, 0.3, 9.0]), 0.5, 2.0), (0, 1, 2)) for m in CONTINUOUS],
    *[("expon", m, (np.array([0.2, 1.3, 9.0]), 0.1, 1.5), (0, 1, 2)) for m in CONTINUOUS],
    *[("lognorm", m, (np.array([0.2, 1.3, 9.0]), 0.7, 0.1, 1.5), (0, 1, 2, 3))
      for m in CONTINUOUS],
    *[("halfnorm", m, (np.array([0.2, 1.3, 9.0]), 0.1, 1.5), (0, 1, 2)) for m in CONTINUOUS],
    ("chi2", "logpdf", (np.array([0.2, 1.3, 9.0]), 3.5, 0.1, 1.5), (0, 1, 2, 3)),
    ("chi2", "pdf", (np.array([0.2, 1.3, 9.0]), 1.5, 0.1, 1.5), (0, 1, 2, 3)),
    *[("chi2", m, (np.array([0.2, 1.3, 9.0]), 3.5, 0.1, 1.5), (0, 2, 3))
      for m in ("cdf", "logcdf", "sf", "logsf")],
    *[("uniform", m, (np.array([0.2, 1.3, 0.7]), 0.1, 1.5), (0, 1, 2)) for m in CONTINUOUS],
    *[("binom", m, (np.array([0.0, 1.0, 1.5, 4.0, 7.0]), 7.0, 0.3), (2,)) for m in DISCRETE],
    *[("nbinom", m, (np.array([0.0, 1.0, 1.5, 4.0, 7.0]), 2.5, 0.3), (1, 2))
      for m in ("logpmf", "pmf")],
    *[("nbinom", m, (np.array([0.0, 1.0, 1.5, 4.0, 7.0]), 2.5, 0.3), (2,))
      for m in ("cdf", "logcdf", "sf", "logsf")],
    *[("geom", m, (np.array([1.0, 2.0, 2.5, 9.0]), 0.3), (1,)) for m in DISCRETE],
]


def _method(module, name: str, method: str):
    return getattr(getattr(module, name), method)


@pytest.mark.parametrize("name, method, args, argnums", GRADIENT_CASES,
                         ids=[f"{c[0]}.{c[1]}" for c in GRADIENT_CASES])
def test_gradients_against_central_differences(name, method, args, argnums):
    fn = _method(stats, name, method)
    grads = tnp.grad(lambda *a: tnp.sum(fn(*a)), argnums=argnums)(*args)
    reference = _method(scipy_stats, name, method)
    for i, got in zip(argnums, grads):
        def along(v, i=i):
            moved = list(args)
            moved[i] = v
            out = reference(*moved)
            return np.sum(out[np.isfinite(out)])          # (log 0 off the integers)
        assert_close(got, numeric_grad(along, args[i], eps=1e-6), rtol=1e-6, atol=1e-9)


EDGE_CASES = [  # (function of x, points on the edges and outside, the derivatives in x)
    (lambda x: stats.expon.logpdf(x, 0.0, 2.0), [-1.0, 0.0], [0.0, -0.5]),
    (lambda x: stats.expon.cdf(x, 0.0, 2.0), [-1.0, 0.0], [0.0, 0.5]),
    (lambda x: stats.expon.logcdf(x, 0.0, 2.0), [-1.0, 0.0], [0.0, 0.0]),
    (lambda x: stats.expon.logsf(x, 0.0, 2.0), [-1.0, 0.0], [0.0, -0.5]),
    (lambda x: stats.halfnorm.logpdf(x), [-1.0, 0.0], [0.0, 0.0]),
    (lambda x: stats.halfnorm.logcdf(x), [-1.0, 0.0], [0.0, 0.0]),
    (lambda x: stats.lognorm.logpdf(x, 0.7), [-1.0, 0.0], [0.0, 0.0]),
    (lambda x: stats.lognorm.cdf(x, 0.7), [-1.0, 0.0], [0.0, 0.0]),
    (lambda x: stats.chi2.logpdf(x, 2.0), [-1.0, 0.0], [0.0, -0.5]),
    (lambda x: stats.laplace.logpdf(x, 0.0, 2.0), [0.0], [-0.5]),      # JAX's, at the kink
    (lambda x: stats.laplace.cdf(x, 0.0, 2.0), [0.0], [0.25]),         # the density
    (lambda x: stats.laplace.logcdf(x, 0.0, 2.0), [0.0], [0.5]),
    (lambda x: stats.laplace.logsf(x, 0.0, 2.0), [0.0], [-0.5]),
    (lambda x: stats.uniform.cdf(x, 0.0, 2.0), [-1.0, 0.0, 2.0, 3.0], [0.0, 0.5, 0.5, 0.0]),
    (lambda x: stats.uniform.logpdf(x, 0.0, 2.0), [-1.0, 0.0, 2.0, 3.0], [0.0] * 4),
    (lambda x: stats.uniform.logsf(x, 0.0, 2.0), [-1.0, 0.0, 3.0], [0.0, -0.5, 0.0]),
    (lambda x: stats.logistic.logcdf(x), [-800.0, 800.0], [1.0, 0.0]),
    (lambda x: stats.cauchy.logpdf(x), [1e200], [-2e-200]),
]


@pytest.mark.parametrize("fn, points, want", EDGE_CASES, ids=range(len(EDGE_CASES)))
def test_derivatives_on_the_support_edges(fn, points, want):
    """The support's edges and kinks: finite derivatives (JAX's where it has them), 0
    outside; forward mode agrees with reverse."""
    for x, w in zip(points, want):
        assert_close(tnp.grad(fn)(x), w, rtol=1e-14)
        assert_close(tnp.jvp(fn, (x,), (1.0,))[1], w, rtol=1e-14)


NO_NAN_CASES = [  # (name, methods, parameters (one differentiated at a time), argnums)
    ("laplace", CONTINUOUS, (0.5, 2.0), (1, 2)),
    ("cauchy", CONTINUOUS, (0.5, 2.0), (1, 2)),
    ("logistic", CONTINUOUS, (0.5, 2.0), (1, 2)),
    ("expon", CONTINUOUS, (0.5, 2.0), (1, 2)),
    ("lognorm", CONTINUOUS, (0.7, 0.5, 2.0), (1, 2, 3)),
    ("halfnorm", CONTINUOUS, (0.5, 2.0), (1, 2)),
    ("chi2", ("logpdf", "pdf"), (2.0, 0.5, 2.0), (1, 2, 3)),
    ("chi2", ("cdf", "logcdf", "sf", "logsf"), (3.0, 0.5, 2.0), (2, 3)),
    ("uniform", CONTINUOUS, (0.5, 2.0), (1, 2)),
    ("binom", DISCRETE, (4, 0.3), (2,)),
    ("nbinom", ("logpmf", "pmf"), (2.5, 0.3), (1, 2)),
    ("nbinom", ("cdf", "logcdf", "sf", "logsf"), (2.5, 0.3), (2,)),
    ("geom", DISCRETE, (0.3,), (1,)),
    ("geom", ("logpmf", "cdf", "logcdf", "sf", "logsf"), (1.0,), (1,)),    # p = 1 too
]


@pytest.mark.parametrize("name, methods, params, argnums", NO_NAN_CASES,
                         ids=[f"{c[0]}{i}" for i, c in enumerate(NO_NAN_CASES)])
def test_no_nan_derivative_inside_or_outside_the_support(name, methods, params, argnums):
    """On the support, on its edges and off it (finite points), the derivatives in the data
    and the parameters are numbers (0 off the support), in reverse and forward mode."""
    discrete = name in ("binom", "nbinom", "geom")
    points = (np.array([-3.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 7.0]) if discrete
              else np.array([-3.0, 0.0, 0.5, 0.7, 1.0, 1.2, 2.5, 2.7, 4.0]))
    for method in methods:
        fn = _method(stats, name, method)
        for x in points:
            for i in ((0,) if not discrete else ()) + argnums:
                args = [x, *params]

                def along(v, i=i, args=args, fn=fn):
                    moved = list(args)
                    moved[i] = v
                    return fn(*moved)

                with np.errstate(divide="ignore"):      # log(0): infinite, not NaN
                    reverse = tnp.grad(along)(float(args[i]))
                    forward = tnp.jvp(along, (float(args[i]),), (1.0,))[1]
                    value = along(float(args[i]))
                assert not np.isnan(reverse) and not np.isnan(forward), (method, x, i)
                degenerate = params == (1.0,)          # geom at p = 1: log(0) inside too
                if np.isinf(value) and method.startswith("log") and not (
                        degenerate):
                    assert reverse == 0 and forward == 0, (method, x, i)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_derivatives_at_degenerate_parameters():
    # finite where JAX's are NaN: xlogy's rule (0 where the count is 0)
    assert_close(tnp.grad(lambda p: stats.binom.logpmf(0, 4, p))(0.0), -4.0)
    assert_close(tnp.grad(lambda p: stats.binom.logpmf(4, 4, p))(1.0), 4.0)
    assert_close(tnp.grad(lambda p: stats.geom.logpmf(1, p))(1.0), 1.0)
    assert_close(tnp.grad(lambda p: stats.binom.cdf(0, 4, p))(0.0), -4.0)
    # geom at p = 1: cdf(k) = 1 - (1 - p)**k, derivative k (1 - p)**(k - 1)
    assert_close(tnp.grad(lambda p: stats.geom.cdf(1.0, p))(1.0), 1.0)
    assert_close(tnp.grad(lambda p: stats.geom.cdf(2.0, p))(1.0), 0.0)
    assert_close(tnp.grad(lambda p: stats.geom.logcdf(1.0, p))(1.0), 1.0)
    assert_close(tnp.grad(lambda n: stats.nbinom.logpmf(0, n, 0.5))(2.0), np.log(0.5))


def _jax_references(jax):
    """``jax.scipy.stats``' gradients for :data:`JAX_CASES`, in one compilation."""
    jst = pytest.importorskip("jax.scipy.stats")

    def references(points):
        return [jax.grad(lambda *a, c=case: getattr(getattr(jst, c[0]), c[1])(*a).sum(),
                         argnums=case[3])(*point)
                for case, point in zip(JAX_CASES, points)]

    out = jax.jit(references)([case[2] for case in JAX_CASES])
    return jax.tree_util.tree_map(np.asarray, out)


_IN_JAX = {("laplace", "logpdf"), ("laplace", "cdf"), ("cauchy", "logpdf"),
           ("cauchy", "logcdf"), ("cauchy", "logsf"), ("logistic", "logpdf"),
           ("logistic", "cdf"), ("logistic", "sf"), ("expon", "logpdf"), ("expon", "logcdf"),
           ("expon", "logsf"), ("chi2", "logpdf"), ("chi2", "cdf"), ("uniform", "logpdf"),
           ("binom", "logpmf"), ("nbinom", "logpmf"), ("geom", "logpmf")}
JAX_CASES = [  # (JAX's pmfs take any real k: the integers only)
    (name, method, (args[0][args[0] == np.floor(args[0])], *args[1:]), argnums)
    for name, method, args, argnums in GRADIENT_CASES if (name, method) in _IN_JAX] + [
    ("laplace", "logpdf", (np.array([0.5, 0.0]), 0.5, 2.0), (0, 1, 2)),      # the kink
    ("uniform", "cdf", (np.array([0.1, 0.7, 1.6, -1.0, 3.0]), 0.1, 1.5), (0, 1, 2)),
    ("expon", "logpdf", (np.array([0.1, -1.0]), 0.1, 1.5), (0, 1, 2)),
]


def test_gradients_against_jax(jx):
    for (name, method, args, argnums), want in zip(JAX_CASES, _jax_references(jx[0])):
        fn = _method(stats, name, method)
        got = tnp.grad(lambda *a, fn=fn: tnp.sum(fn(*a)), argnums=argnums)(*args)
        for g, w in zip(got, want):
            assert_close(g, w, rtol=1e-10, atol=1e-14)


# --- transforms and the eager Tensor ------------------------------------------------------------

TRANSFORM_CASES = [  # (log-density of one point and parameters, the point, the parameters)
    (lambda x, p: stats.laplace.logpdf(x, p[0], p[1]), 0.3, np.array([0.5, 2.0])),
    (lambda x, p: stats.cauchy.logcdf(x, p[0], p[1]), -3.0, np.array([0.5, 2.0])),
    (lambda x, p: stats.logistic.logpdf(x, p[0], p[1]), 0.3, np.array([0.5, 2.0])),
    (lambda x, p: stats.expon.logsf(x, p[0], p[1]), 1.3, np.array([0.1, 2.0])),
    (lambda x, p: stats.lognorm.logpdf(x, p[0], p[1], p[2]), 1.3, np.array([0.7, 0.1, 2.0])),
    (lambda x, p: stats.halfnorm.logcdf(x, p[0], p[1]), 1.3, np.array([0.1, 2.0])),
    (lambda x, p: stats.chi2.logpdf(x, p[0], scale=p[1]), 1.3, np.array([3.5, 2.0])),
    (lambda x, p: stats.uniform.logcdf(x, p[0], p[1]), 0.7, np.array([0.1, 2.0])),
    (lambda x, p: stats.binom.logcdf(x, 6, p[0]), 2.0, np.array([0.3])),
    (lambda x, p: stats.nbinom.logpmf(x, p[0], p[1]), 3.0, np.array([2.5, 0.3])),
    (lambda x, p: stats.geom.logcdf(x, p[0]), 3.0, np.array([0.3])),
]


@pytest.mark.parametrize("logp, x, params", TRANSFORM_CASES, ids=range(len(TRANSFORM_CASES)))
def test_every_transform(logp, x, params):
    g = tnp.grad(logp, argnums=1)(x, params)
    assert_close(tnp.jit(tnp.grad(logp, argnums=1))(x, params), g, rtol=1e-14)
    per_example = tnp.vmap(tnp.grad(logp, argnums=1), in_axes=(0, None))(np.array([x, x]),
                                                                         params)
    assert_close(per_example, np.stack([g, g]), rtol=1e-14)
    h = tnp.hessian(logp, argnums=1)(x, params)
    rows = [numeric_grad(lambda p, i=i: tnp.grad(logp, argnums=1)(x, p)[i], params, eps=1e-5)
            for i in range(len(params))]
    assert_close(h, np.stack(rows), rtol=1e-5, atol=1e-7)
    t = tnp.tensor(params, requires_grad=True)
    assert_close(logp(x, t).backward().grad(t), g, rtol=1e-14)


def test_data_of_discrete_distributions_may_be_traced():
    k = np.array([0.0, 2.0, 3.0])

    def f(p, k):
        return tnp.sum(stats.binom.logpmf(k, 5, p))

    want = k / 0.4 - (5 - k) / 0.6
    assert_close(tnp.jit(tnp.vmap(tnp.grad(f), in_axes=(None, 0)))(0.4, k[:, None]), want,
                 rtol=1e-13)


# --- maximum likelihood ------------------------------------------------------------------------


def _fit(negative_log_likelihood, start):
    optimize = pytest.importorskip("scipy.optimize")
    step = tnp.jit(tnp.value_and_grad(negative_log_likelihood))

    def objective(theta):
        value, grad = step(theta)
        return float(value), np.asarray(grad, dtype=float)

    result = optimize.minimize(objective, start, jac=True, method="BFGS",
                               options={"gtol": 1e-9})
    assert np.max(np.abs(result.jac)) < 1e-6, result.message
    return result.x


def test_maximum_likelihood_lognorm_and_logistic():
    rng = np.random.default_rng(1)
    data = scipy_stats.lognorm.rvs(0.6, scale=2.0, size=400, random_state=rng)
    s, log_scale = _fit(lambda th: -tnp.sum(stats.lognorm.logpdf(data, tnp.exp(th[0]),
                                                                 scale=tnp.exp(th[1]))),
                        np.zeros(2))
    want_s, _, want_scale = scipy_stats.lognorm.fit(data, floc=0)
    assert_close([np.exp(s), np.exp(log_scale)], [want_s, want_scale], rtol=1e-6)

    data = scipy_stats.logistic.rvs(loc=1.0, scale=0.5, size=400, random_state=rng)
    loc, log_scale = _fit(lambda th: -tnp.sum(stats.logistic.logpdf(data, th[0],
                                                                     tnp.exp(th[1]))),
                          np.zeros(2))
    want_loc, want_scale = scipy_stats.logistic.fit(data)
    assert_close([loc, np.exp(log_scale)], [want_loc, want_scale], rtol=1e-6)


def test_maximum_likelihood_nbinom():
    rng = np.random.default_rng(2)
    counts = scipy_stats.nbinom.rvs(3.0, 0.4, size=300, random_state=rng).astype(float)
    log_n, logit_p = _fit(lambda th: -tnp.sum(stats.nbinom.logpmf(
        counts, tnp.exp(th[0]), 1 / (1 + tnp.exp(-th[1])))), np.zeros(2))
    n, p = np.exp(log_n), 1 / (1 + np.exp(-logit_p))
    # the maximum: the score of SciPy's log-likelihood vanishes there
    score = numeric_grad(lambda v: np.sum(scipy_stats.nbinom.logpmf(counts, v[0], v[1])),
                         np.array([n, p]), eps=1e-7)
    assert np.all(np.abs(score) < 1e-3)
    assert np.isclose(n * (1 - p) / p, counts.mean(), rtol=1e-7)     # mean matched


# --- errors: never a silent wrong gradient --------------------------------------------------


@pytest.mark.parametrize("call, what", [
    (lambda k: stats.binom.logpmf(k, 4, 0.3), "count k"),
    (lambda n: stats.binom.logpmf(2.0, n, 0.3), "number of trials n"),
    (lambda n: stats.binom.cdf(2.0, n, 0.3), "number of trials n"),
    (lambda loc: stats.binom.pmf(2.0, 4, 0.3, loc), "loc"),
    (lambda k: stats.nbinom.cdf(k, 2.0, 0.3), "count k"),
    (lambda n: stats.nbinom.cdf(2.0, n, 0.3), "size n"),
    (lambda n: stats.nbinom.logsf(2.0, n, 0.3), "size n"),
    (lambda k: stats.geom.logpmf(k, 0.3), "count k"),
    (lambda df: stats.chi2.cdf(0.5, df), "degrees of freedom df"),
    (lambda df: stats.chi2.logsf(0.5, df), "degrees of freedom df"),
])
def test_derivatives_that_do_not_exist_raise(call, what):
    with pytest.raises(ADRuleError, match=what):
        tnp.grad(call)(1.0)
    with pytest.raises(TiduError, match=what):
        tnp.jit(tnp.grad(call))(1.0)
    t = tnp.tensor(1.0, requires_grad=True)
    with pytest.raises(TiduError, match=what):
        call(t).backward()
    call(tnp.tensor(1.0))                                  # not differentiated: fine


def test_bad_arguments():
    with pytest.raises(TensorShapeError, match="expon.logpdf"):
        stats.expon.logpdf(np.zeros(3), scale=np.ones(2))
    with pytest.raises(TensorShapeError, match="binom.cdf"):
        stats.binom.cdf(np.zeros(3), np.ones(2), 0.5)
    with pytest.raises(TensorTypeError, match="complex"):
        stats.lognorm.cdf(1j, 1.0)
    with pytest.raises(TensorTypeError, match="geom.logpmf"):
        stats.geom.logpmf("a", 0.5)
    assert repr(stats.nbinom) == "<primitives.tensor.scipy.stats.nbinom>"
    assert repr(stats.laplace(loc=1.0)) == "<frozen laplace{'loc': 1.0}>"
