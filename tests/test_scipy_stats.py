"""``primitives.tensor.scipy.stats``: SciPy's distributions, differentiable.

- every method's values against ``scipy.stats`` (``rtol=1e-12``) on grids that cross the
  support's edges, with parameters outside their domain (NaN, as SciPy), SciPy's
  defaults and shapes (``multivariate_normal``'s and ``dirichlet``'s included), and
  frozen distributions;
- gradients in the data and every differentiable parameter against central differences
  of SciPy's functions, and against ``jax.scipy.stats`` (one jitted reference);
- ``jit(grad)``, ``vmap(grad)``, ``hessian`` (against differences of the gradient) and the
  eager ``Tensor.backward``;
- no silent wrong gradient: the shape parameters of a ``cdf`` (``df``, ``a``, ``b``) and the
  counts ``k`` of discrete distributions raise a ``TiduError`` naming them.
"""

from __future__ import annotations

import numpy as np
import pytest
from tensor_helpers import numeric_grad

import primitives.tensor as tnp
from primitives.tensor.errors import TensorNotSupportedError, TensorShapeError
from primitives.tensor.scipy import stats
from tidu import ADRuleError, TiduError

scipy_stats = pytest.importorskip("scipy.stats")

CONTINUOUS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
DISCRETE = ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf")

X = np.array([-3.0, -0.5, 0.0, 0.2, 1.0, 1.3, 4.0, 40.0])[:, None]
VALUE_CASES = [  # (distribution, methods, positional arguments, keyword arguments)
    ("norm", CONTINUOUS, (X,), {}),
    ("norm", CONTINUOUS, (X, np.array([0.5, -1.0]), np.array([2.0, 0.1])), {}),
    ("norm", CONTINUOUS, (X,), {"loc": 1.0, "scale": -1.0}),                  # NaN
    ("norm", ("ppf", "isf"), (np.array([1e-10, 0.1, 0.5, 0.975, 1.0])[:, None],),
     {"loc": np.array([0.0, 3.0]), "scale": 2.0}),
    ("t", CONTINUOUS, (X, np.array([1.0, 3.5, 30.0, 1e7, np.inf, -1.0])), {}),
    ("t", CONTINUOUS, (X, 4.0), {"loc": -0.5, "scale": 1.5}),
    ("gamma", CONTINUOUS, (X, np.array([0.5, 1.0, 3.5, -1.0])), {}),
    ("gamma", CONTINUOUS, (X, 2.5), {"loc": 0.2, "scale": 1.5}),
    ("beta", CONTINUOUS, (X / 2 + 0.5, np.array([0.5, 1.0, 2.0, 3.0]),
                          np.array([1.0, 2.5, 0.7, 0.0])), {}),
    ("beta", CONTINUOUS, (X, 2.0, 3.0), {"loc": -1.0, "scale": 3.0}),
    ("poisson", DISCRETE, (np.array([-1.0, 0.0, 1.0, 2.5, 3.0, 10.0])[:, None],
                           np.array([0.0, 0.5, 4.0, -1.0])), {}),
    ("poisson", DISCRETE, (np.array([0, 1, 2, 5])[:, None], 3.0), {"loc": 1}),
    ("bernoulli", DISCRETE, (np.array([-1.0, 0.0, 0.5, 1.0, 2.0])[:, None],
                             np.array([0.0, 0.3, 1.0])), {}),
    ("bernoulli", ("logpmf", "pmf", "cdf", "sf"), (np.array([0.0, 1.0]), 1.5), {}),   # NaN
    ("bernoulli", DISCRETE, (np.array([0, 1, 2]), 0.25), {"loc": 1}),
]


def assert_close(got, want, rtol=1e-12, atol=0.0):
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float),
                               rtol=rtol, atol=atol)


@pytest.mark.parametrize("name, methods, args, kwargs", VALUE_CASES,
                         ids=[f"{case[0]}{i}" for i, case in enumerate(VALUE_CASES)])
def test_values_are_scipys(name, methods, args, kwargs):
    for method in methods:
        with np.errstate(all="ignore"):
            want = getattr(getattr(scipy_stats, name), method)(*args, **kwargs)
            got = getattr(getattr(stats, name), method)(*args, **kwargs)
            frozen = getattr(getattr(stats, name)(*args[1:], **kwargs), method)(args[0])
        assert np.shape(got) == np.shape(want), method
        assert_close(got, want, atol=1e-300)
        assert_close(frozen, want, atol=1e-300)


COV = np.array([[2.0, 0.3, -0.4], [0.3, 1.0, 0.2], [-0.4, 0.2, 1.5]])
MVN_CASES = [  # (x, keyword arguments): SciPy's shapes and parameter forms
    (np.array([0.3, -1.0, 2.0]), {"mean": [0.5, 0.0, 1.0], "cov": COV}),
    (np.arange(12.0).reshape(4, 3) / 6, {"mean": [0.5, 0.0, 1.0], "cov": COV}),
    (np.arange(12.0).reshape(2, 2, 3) / 6, {"cov": COV}),
    (np.arange(6.0).reshape(1, 2, 3) / 6, {"mean": np.zeros(3), "cov": np.array([1.0, 2.0, 0.5])}),
    (np.arange(5.0), {"mean": 1.0, "cov": 2.0}),                     # five 1-d points
    (np.array([0.5, 1.5]), {"mean": np.zeros(2), "cov": 3.0}),
    (0.7, {}),
]


@pytest.mark.parametrize("x, kwargs", MVN_CASES, ids=range(len(MVN_CASES)))
def test_multivariate_normal_is_scipys(x, kwargs):
    for method in ("logpdf", "pdf"):
        want = getattr(scipy_stats.multivariate_normal, method)(x, **kwargs)
        got = getattr(stats.multivariate_normal, method)(x, **kwargs)
        assert np.shape(got) == np.shape(want)
        assert_close(got, want)
        assert_close(getattr(stats.multivariate_normal(**kwargs), method)(x), want)


def test_dirichlet_is_scipys():
    alpha = np.array([1.5, 2.0, 0.7])
    x = np.array([[0.2, 0.3, 0.1, 0.6], [0.5, 0.1, 0.3, 0.2]])
    full = np.concatenate([x, 1 - x.sum(0, keepdims=True)])
    for points in (x, full, full[:, 0], full[:, :1]):
        for method in ("logpdf", "pdf"):
            want = getattr(scipy_stats.dirichlet, method)(points, alpha)
            got = getattr(stats.dirichlet, method)(points, alpha)
            assert np.shape(got) == np.shape(want)
            assert_close(got, want)
    # where SciPy raises, these give -inf (off the simplex) and NaN (alpha <= 0)
    assert float(stats.dirichlet.logpdf([0.5, 0.6, 0.1], alpha)) == -np.inf
    assert float(stats.dirichlet.logpdf([-0.1, 0.6, 0.5], alpha)) == -np.inf
    assert np.isnan(stats.dirichlet.logpdf([0.2, 0.3, 0.5], [1.0, -1.0, 1.0]))


# --- gradients ----------------------------------------------------------------------------------

GRADIENT_CASES = [  # (name, method, arguments, which of them are differentiated)
    ("norm", "logpdf", (np.array([-1.0, 0.3, 2.0]), 0.5, 2.0), (0, 1, 2)),
    ("norm", "pdf", (np.array([-1.0, 0.3, 2.0]), 0.5, 2.0), (0, 1, 2)),
    ("norm", "cdf", (np.array([-1.0, 0.3, 2.0]), 0.5, 2.0), (0, 1, 2)),
    ("norm", "logcdf", (np.array([-9.0, 0.3, 2.0]), 0.5, 2.0), (0, 1, 2)),
    ("norm", "sf", (np.array([-1.0, 0.3, 2.0]), 0.5, 2.0), (0, 1, 2)),
    ("norm", "logsf", (np.array([-1.0, 0.3, 9.0]), 0.5, 2.0), (0, 1, 2)),
    ("norm", "ppf", (np.array([0.01, 0.3, 0.9]), 0.5, 2.0), (0, 1, 2)),
    ("norm", "isf", (np.array([0.01, 0.3, 0.9]), 0.5, 2.0), (0, 1, 2)),
    ("t", "logpdf", (np.array([-1.0, 0.3, 2.0]), 3.5, 0.5, 2.0), (0, 1, 2, 3)),
    ("t", "pdf", (np.array([-1.0, 0.3, 2.0]), 3.5, 0.5, 2.0), (0, 1, 2, 3)),
    ("t", "cdf", (np.array([-1.0, 0.3, 2.0]), 3.5, 0.5, 2.0), (0, 2, 3)),
    ("t", "logcdf", (np.array([-1.0, 0.3, 2.0]), 3.5, 0.5, 2.0), (0, 2, 3)),
    ("t", "sf", (np.array([-1.0, 0.3, 2.0]), 3.5, 0.5, 2.0), (0, 2, 3)),
    ("gamma", "logpdf", (np.array([0.4, 1.3, 5.0]), 2.5, 0.1, 1.5), (0, 1, 2, 3)),
    ("gamma", "pdf", (np.array([0.4, 1.3, 5.0]), 2.5, 0.1, 1.5), (0, 1, 2, 3)),
    ("gamma", "cdf", (np.array([0.4, 1.3, 5.0]), 2.5, 0.1, 1.5), (0, 2, 3)),
    ("gamma", "logsf", (np.array([0.4, 1.3, 5.0]), 2.5, 0.1, 1.5), (0, 2, 3)),
    ("beta", "logpdf", (np.array([0.1, 0.4, 0.8]), 2.5, 0.7), (0, 1, 2)),
    ("beta", "pdf", (np.array([0.1, 0.4, 0.8]), 2.5, 1.7, -0.1, 1.2), (0, 1, 2, 3, 4)),
    ("beta", "cdf", (np.array([0.1, 0.4, 0.8]), 2.5, 1.7, -0.1, 1.2), (0, 3, 4)),
    ("beta", "sf", (np.array([0.1, 0.4, 0.8]), 2.5, 1.7), (0,)),
    ("poisson", "logpmf", (np.array([0.0, 1.0, 4.0]), 2.5), (1,)),
    ("poisson", "pmf", (np.array([0.0, 1.0, 4.0]), 2.5), (1,)),
    ("poisson", "cdf", (np.array([0.0, 1.5, 4.0]), 2.5), (1,)),
    ("poisson", "logsf", (np.array([0.0, 1.5, 4.0]), 2.5), (1,)),
    ("bernoulli", "logpmf", (np.array([0.0, 1.0]), 0.3), (1,)),
    ("bernoulli", "cdf", (np.array([-1.0, 0.0, 1.0]), 0.3), (1,)),
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
            return np.sum(reference(*moved))
        assert_close(got, numeric_grad(along, args[i], eps=1e-6), rtol=1e-6, atol=1e-9)


def _symmetric_difference(f, cov, eps=1e-6):
    """Central differences of ``f`` along symmetric perturbations ``E_ij + E_ji``, halved
    off the diagonal: the symmetric gradient of a function of a covariance."""
    g = np.zeros_like(cov)
    for i in range(cov.shape[0]):
        for j in range(cov.shape[1]):
            e = np.zeros_like(cov)
            e[i, j] = e[j, i] = eps
            g[i, j] = (f(cov + e) - f(cov - e)) / (2 * eps) / (1 if i == j else 2)
    return g


def test_multivariate_normal_gradients():
    x = np.array([[0.3, -1.0, 2.0], [0.0, 0.5, -0.5]])
    mean = np.array([0.5, 0.0, 1.0])

    def total(module):
        return lambda x, m, c: module.multivariate_normal.logpdf(x, m, c).sum()

    gx, gm, gc = tnp.grad(total(stats), argnums=(0, 1, 2))(x, mean, COV)
    assert_close(gx, numeric_grad(lambda v: total(scipy_stats)(v, mean, COV), x), rtol=1e-6)
    assert_close(gm, numeric_grad(lambda v: total(scipy_stats)(x, v, COV), mean), rtol=1e-6)
    assert_close(gc, gc.T, rtol=1e-14)                       # symmetric, as JAX's
    assert_close(gc, _symmetric_difference(lambda c: total(scipy_stats)(x, mean, c), COV),
                 rtol=1e-6)
    # the closed form: d/dS sum log N(x | m, S) = (S^-1 D^T D S^-1 - n S^-1) / 2
    inv = np.linalg.inv(COV)
    d = x - mean
    assert_close(gc, (inv @ d.T @ d @ inv - len(x) * inv) / 2, rtol=1e-12)
    # variances as a vector, one variance for every component
    g = tnp.grad(lambda v: tnp.sum(stats.multivariate_normal.logpdf(x, mean, v)))(np.diag(COV))
    assert_close(g, numeric_grad(lambda v: total(scipy_stats)(x, mean, np.diag(v)),
                                 np.diag(COV)), rtol=1e-6)
    g = tnp.grad(lambda s: tnp.sum(stats.multivariate_normal.logpdf(x, mean, s)))(1.5)
    assert_close(g, numeric_grad(lambda s: total(scipy_stats)(x, mean, float(s)), 1.5),
                 rtol=1e-6)



def test_dirichlet_gradients():
    alpha = np.array([1.5, 2.0, 0.7])
    x = np.array([[0.2, 0.3], [0.5, 0.1], [0.3, 0.6]])

    def total(module):
        return lambda x, a: module.dirichlet.logpdf(x, a).sum()

    gx, ga = tnp.grad(total(stats), argnums=(0, 1))(x, alpha)
    assert_close(ga, numeric_grad(lambda a: total(scipy_stats)(x, a), alpha), rtol=1e-6)
    assert_close(gx, (alpha[:, None] - 1) / x, rtol=1e-14)        # off the simplex's tangent
    # k - 1 components: the last is 1 - sum, and its derivative flows
    g = tnp.grad(lambda v: stats.dirichlet.logpdf(v, alpha))(x[:2, 0])
    assert_close(g, numeric_grad(lambda v: scipy_stats.dirichlet.logpdf(v, alpha), x[:2, 0]),
                 rtol=1e-6)


def _jax_references():
    """``jax.scipy.stats``' gradients for the cases of :data:`JAX_CASES`, in one compilation."""
    jax = pytest.importorskip("jax", reason="jax.scipy.stats is the reference")
    jst = pytest.importorskip("jax.scipy.stats")

    def references(points):
        return [jax.grad(lambda *a, c=case: getattr(getattr(jst, c[0]), c[1])(*a).sum(),
                         argnums=case[3])(*point)
                for case, point in zip(JAX_CASES, points)]

    with jax.enable_x64(True):
        out = jax.jit(references)([case[2] for case in JAX_CASES])
        return jax.tree_util.tree_map(np.asarray, out)


JAX_CASES = [case for case in GRADIENT_CASES    # (JAX compiles slowly: the log-densities)
             if (case[0], case[1]) in {("norm", "logpdf"), ("norm", "logcdf"), ("t", "logpdf"),
                                       ("gamma", "logpdf"), ("beta", "logpdf"),
                                       ("poisson", "logpmf"), ("bernoulli", "logpmf")}] + [
    ("multivariate_normal", "logpdf", (np.array([[0.3, -1.0, 2.0], [0.0, 0.5, -0.5]]),
                                       np.array([0.5, 0.0, 1.0]), COV), (0, 1, 2)),
    ("dirichlet", "logpdf", (np.array([[0.2, 0.3], [0.5, 0.1], [0.3, 0.6]]),
                             np.array([1.5, 2.0, 0.7])), (0, 1)),
]


def test_gradients_against_jax():
    for (name, method, args, argnums), want in zip(JAX_CASES, _jax_references()):
        fn = _method(stats, name, method)
        got = tnp.grad(lambda *a, fn=fn: tnp.sum(fn(*a)), argnums=argnums)(*args)
        for g, w in zip(got, want):
            assert_close(g, w, rtol=1e-10, atol=1e-14)


# --- transforms and the eager Tensor ------------------------------------------------------------

TRANSFORM_CASES = [  # (log-density of one point and parameters, the point, the parameters)
    (lambda x, p: stats.norm.logpdf(x, p[0], p[1]), 0.3, np.array([0.5, 2.0])),
    (lambda x, p: stats.t.logpdf(x, p[0], p[1], p[2]), 0.3, np.array([3.5, 0.5, 2.0])),
    (lambda x, p: stats.gamma.logpdf(x, p[0], scale=p[1]), 1.3, np.array([2.5, 1.5])),
    (lambda x, p: stats.beta.logpdf(x, p[0], p[1]), 0.3, np.array([2.5, 0.7])),
    (lambda x, p: stats.norm.logcdf(x, p[0], p[1]), -3.0, np.array([0.5, 2.0])),
    (lambda x, p: stats.poisson.logpmf(x, p[0]), 3.0, np.array([2.5])),
    (lambda x, p: stats.bernoulli.logpmf(x, p[0]), 1.0, np.array([0.3])),
    (lambda x, p: stats.dirichlet.logpdf(x, p), np.array([0.2, 0.5, 0.3]),
     np.array([1.5, 2.0, 0.7])),
    (lambda x, p: stats.multivariate_normal.logpdf(x, p[:2], tnp.reshape(p[2:], (2, 2))),
     np.array([0.3, -1.0]), np.array([0.5, 0.0, 2.0, 0.3, 0.3, 1.0])),
]


@pytest.mark.parametrize("logp, x, params", TRANSFORM_CASES, ids=range(len(TRANSFORM_CASES)))
def test_every_transform(logp, x, params):
    g = tnp.grad(logp, argnums=1)(x, params)
    assert_close(tnp.jit(tnp.grad(logp, argnums=1))(x, params), g, rtol=1e-14)
    # per-example gradients: one point per row
    xs = np.stack([x, x]) if np.ndim(x) else np.array([x, x])
    per_example = tnp.vmap(tnp.grad(logp, argnums=1), in_axes=(0, None))(xs, params)
    assert_close(per_example, np.stack([g, g]), rtol=1e-14)
    h = tnp.hessian(logp, argnums=1)(x, params)
    assert_close(h, h.T, rtol=1e-10, atol=1e-14)
    rows = [numeric_grad(lambda p, i=i: tnp.grad(logp, argnums=1)(x, p)[i], params, eps=1e-5)
            for i in range(len(params))]
    assert_close(h, np.stack(rows), rtol=1e-5, atol=1e-7)
    t = tnp.tensor(params, requires_grad=True)
    assert_close(logp(x, t).backward().grad(t), g, rtol=1e-14)


def test_a_regression_likelihood_under_jit_and_vmap():
    rng = np.random.default_rng(0)
    features, targets = rng.normal(size=(20, 3)), rng.normal(size=20)

    def loss(w, log_scale):
        residual = targets - features @ w
        return -tnp.sum(stats.t.logpdf(residual, 4.0, scale=tnp.exp(log_scale)))

    w = np.array([0.5, -0.2, 0.1])
    gw, gs = tnp.jit(tnp.grad(loss, argnums=(0, 1)))(w, 0.3)
    want = numeric_grad(lambda v: -np.sum(scipy_stats.t.logpdf(targets - features @ v, 4.0,
                                                                scale=np.exp(0.3))), w)
    assert_close(gw, want, rtol=1e-6)
    assert_close(gs, numeric_grad(lambda s: -np.sum(scipy_stats.t.logpdf(
        targets - features @ w, 4.0, scale=np.exp(float(s)))), 0.3), rtol=1e-6)
    per_scale = tnp.vmap(tnp.grad(loss, argnums=1), in_axes=(None, 0))(w, np.array([0.3, 0.3]))
    assert_close(per_scale, [gs, gs], rtol=1e-13)


# --- errors: never a silent wrong gradient --------------------------------------------------


@pytest.mark.parametrize("call, argnum, what", [
    (lambda df: stats.t.cdf(0.5, df), 0, "degrees of freedom df"),
    (lambda df: stats.t.sf(0.5, df), 0, "degrees of freedom df"),
    (lambda a: stats.gamma.cdf(0.5, a), 0, "shape a"),
    (lambda a: stats.gamma.logsf(0.5, a), 0, "shape a"),
    (lambda a: stats.beta.cdf(0.5, a, 2.0), 0, "shape a"),
    (lambda b: stats.beta.cdf(0.5, 2.0, b), 0, "shape b"),
    (lambda k: stats.poisson.logpmf(k, 2.0), 0, "count k"),
    (lambda k: stats.poisson.cdf(k, 2.0), 0, "count k"),
    (lambda loc: stats.poisson.pmf(3.0, 2.0, loc), 0, "loc"),
    (lambda k: stats.bernoulli.logpmf(k, 0.3), 0, "outcome k"),
])
def test_derivatives_that_do_not_exist_raise(call, argnum, what):
    with pytest.raises(ADRuleError, match=what):
        tnp.grad(call)(1.0)
    with pytest.raises(TiduError, match=what):
        tnp.jit(tnp.grad(call))(1.0)
    t = tnp.tensor(1.0, requires_grad=True)
    with pytest.raises(TiduError, match=what):
        call(t).backward()
    call(tnp.tensor(1.0))                                  # not differentiated: fine


def test_the_data_of_a_discrete_distribution_may_be_traced():
    k = np.array([0.0, 2.0, 3.0])

    def f(mu, k):
        return tnp.sum(stats.poisson.logpmf(k, mu))

    assert_close(tnp.jit(tnp.grad(f))(2.0, k), np.sum(k / 2.0 - 1))
    assert_close(tnp.vmap(tnp.grad(f), in_axes=(None, 0))(2.0, k[:, None]), k / 2.0 - 1)


def test_bad_arguments():
    with pytest.raises(TensorNotSupportedError, match="allow_singular"):
        stats.multivariate_normal.logpdf(np.zeros(2), cov=np.eye(2), allow_singular=True)
    with pytest.raises(TensorShapeError, match="mean"):
        stats.multivariate_normal.logpdf(np.zeros(3), mean=np.zeros((2, 2)))
    with pytest.raises(TensorShapeError, match="cov"):
        stats.multivariate_normal.logpdf(np.zeros(3), mean=np.zeros(3), cov=np.eye(2))
    with pytest.raises(TensorShapeError, match="last axis"):
        stats.multivariate_normal.logpdf(np.zeros((4, 2)), mean=np.zeros(3))
    with pytest.raises(TensorShapeError, match="one entry fewer"):
        stats.dirichlet.logpdf(np.full(5, 0.2), np.ones(3))
    with pytest.raises(TensorShapeError, match="one dimensional"):
        stats.dirichlet.logpdf(np.full(3, 1 / 3), np.ones((3, 1)))
    assert repr(stats.norm) == "<primitives.tensor.scipy.stats.norm>"
