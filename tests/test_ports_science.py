"""Real NumPy/SciPy/autograd science programs ported to ``primitives.tensor``.

A hostile scientist's port: each program is what a statistician, physicist or
signal-processing engineer writes with NumPy and SciPy, run on ``tnp`` and checked
against a reference that does not share tidu's code: SciPy's own derivatives
(``rosen_der``, ``rosen_hess``), SciPy's fits and finite-difference optimizers,
``scipy.stats`` densities, a dense Gaussian likelihood, ``solve_ivp``, analytic
derivatives, central finite differences, and (when installed) JAX and HIPS autograd
running the same mathematics.

1. ``scipy.optimize.minimize`` driven by ``value_and_grad`` / ``hessian`` / ``hvp``
   (Rosenbrock, L2 logistic regression, a Gaussian-process evidence).
2. Maximum likelihood with ``tnp.scipy.stats`` (gamma, Student-t, beta, negative
   binomial through ``gammaln``) against ``scipy.stats`` fits; observed Fisher
   information by ``hessian``.
3. A Kalman filter's log-likelihood (a Python loop of ``cholesky``/``solve``/
   ``slogdet``) against the dense joint Gaussian, its gradient in the noise.
4. An n-body system: ``vmap`` over pairs, forces as ``-grad``, leapfrog
   differentiated in the initial state (``jacfwd``/``jacrev``/finite differences,
   symplecticity, energy conservation).
5. Implicit differentiation: Kepler's equation by ``fixed_point``, a ``custom_vjp``
   root solve, and Lotka-Volterra sensitivities by ``odeint`` against ``solve_ivp``.
6. Spectral: a windowed periodogram (``rfft``) against ``scipy.signal.periodogram``,
   a deconvolution loss through ``scipy.signal.convolve`` and ``irfft``.
7. ``tnp.linalg`` in anger: spectral functions by ``eigh``, nuclear norm by ``svd``,
   ``lstsq``/``pinv``/``qr``/``slogdet``; gauge-invariant losses only.
8. autograd-style code: NaN-safe ``where``, augmented assignment, ``float()`` on a
   traced value raising a clear ``TiduError``.

SciPy is in the test extra, so it is imported directly; JAX and autograd halves skip
when they are not installed.
"""

from __future__ import annotations


import numpy as np
import pytest
import scipy.integrate
import scipy.optimize
import scipy.signal
import scipy.special
import scipy.stats

import primitives.tensor as tnp
import tidu
from primitives.tensor.scipy import signal as tsignal
from primitives.tensor.scipy import special as tspecial
from primitives.tensor.scipy import stats as tstats


# ============================================================================================
# helpers
# ============================================================================================


@pytest.fixture
def ag():
    """``(autograd, autograd.numpy)``; skips without HIPS autograd."""
    autograd = pytest.importorskip("autograd", reason="HIPS autograd is not installed")
    import autograd.numpy as anp

    return autograd, anp


def fd_grad(f, x, eps=1e-6):
    """Central differences of real scalar ``f`` at float64 ``x`` (any shape)."""
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        g[idx] = (float(f(xp)) - float(f(xm))) / (2 * eps)
    return g


def fd_jac(f, x, eps=1e-6):
    """Central-difference Jacobian of vector ``f`` at vector ``x``: shape ``f.shape + x.shape``."""
    x = np.array(x, dtype=np.float64)
    cols = []
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        cols.append((np.asarray(f(xp)) - np.asarray(f(xm))) / (2 * eps))
    out = np.stack(cols, axis=-1)
    return out.reshape(np.shape(cols[0]) + x.shape)


def assert_float64_vector(g, n):
    """What SciPy's optimizers need from ``jac``: a float64 ndarray of shape ``(n,)``."""
    assert isinstance(g, np.ndarray) and g.dtype == np.float64 and g.shape == (n,)


# ============================================================================================
# 1. scipy.optimize.minimize driven by tidu
# ============================================================================================


def rosen(x):
    return tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def test_rosenbrock_derivatives_equal_scipys_own():
    rng = np.random.default_rng(0)
    for x in (np.full(10, -0.5), rng.normal(size=10), rng.uniform(-2, 2, size=10)):
        value, g = tnp.value_and_grad(rosen)(x)
        assert value == pytest.approx(scipy.optimize.rosen(x), rel=1e-14)
        assert_float64_vector(g, 10)
        np.testing.assert_allclose(g, scipy.optimize.rosen_der(x), rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(tnp.hessian(rosen)(x), scipy.optimize.rosen_hess(x),
                                   rtol=1e-13, atol=1e-12)
        p = rng.normal(size=10)
        np.testing.assert_allclose(tnp.hvp(rosen, (x,), (p,)),
                                   scipy.optimize.rosen_hess_prod(x, p), rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize("method", ["L-BFGS-B", "BFGS", "CG", "trust-ncg", "Newton-CG",
                                    "trust-exact", "trust-krylov"])
def test_rosenbrock_minimize_every_method(method):
    x0 = np.full(10, -0.5)
    x0[::2] = 1.2
    kwargs = {}
    if method in ("trust-ncg", "trust-exact"):
        kwargs["hess"] = tnp.jit(tnp.hessian(rosen))
    elif method in ("Newton-CG", "trust-krylov"):
        kwargs["hessp"] = lambda x, p: tnp.hvp(rosen, (x,), (p,))
    res = scipy.optimize.minimize(tnp.jit(tnp.value_and_grad(rosen)), x0, jac=True,
                                  method=method, options={"maxiter": 5000}, **kwargs)
    assert res.success, res.message
    np.testing.assert_allclose(res.x, np.ones(10), atol=2e-4)
    assert res.fun < 1e-8
    # tidu's jac is what SciPy would have computed at the returned point
    value, g = tnp.jit(tnp.value_and_grad(rosen))(res.x)
    assert_float64_vector(g, 10)
    np.testing.assert_allclose(g, scipy.optimize.rosen_der(res.x), rtol=1e-9, atol=1e-12)


def _logistic_data(seed=1, n=80, d=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w_true = np.array([1.5, -2.0, 0.5, 0.0])[:d]
    y = (rng.uniform(size=n) < scipy.special.expit(X @ w_true + 0.3)).astype(np.float64)
    return X, y


def logistic_loss(params, X, y, lam):
    w, b = params[:-1], params[-1]
    z = X @ w + b
    # log(1 + exp(z)) - y z, stably
    return tnp.sum(tnp.logaddexp(0.0, z) - y * z) + 0.5 * lam * tnp.sum(w ** 2)


def test_logistic_regression_lbfgs_matches_finite_difference_optimum():
    X, y = _logistic_data()
    lam = 0.7
    x0 = np.zeros(X.shape[1] + 1)
    fun = tnp.value_and_grad(logistic_loss)
    value, g = fun(x0, X, y, lam)
    assert_float64_vector(g, 5)
    np.testing.assert_allclose(g, fd_grad(lambda p: logistic_loss(p, X, y, lam), x0), rtol=1e-7)
    res = scipy.optimize.minimize(fun, x0, args=(X, y, lam), jac=True, method="L-BFGS-B",
                                  options={"gtol": 1e-10, "ftol": 1e-15})
    ref = scipy.optimize.minimize(
        lambda p: np.sum(np.logaddexp(0.0, X @ p[:-1] + p[-1]) - y * (X @ p[:-1] + p[-1]))
        + 0.5 * lam * np.sum(p[:-1] ** 2), x0, method="BFGS", options={"gtol": 1e-9})
    np.testing.assert_allclose(res.x, ref.x, atol=1e-5)
    # at the optimum, the stationarity condition X^T (sigmoid - y) + lam w = 0 holds
    p = res.x
    resid = scipy.special.expit(X @ p[:-1] + p[-1]) - y
    np.testing.assert_allclose(X.T @ resid + lam * p[:-1], 0.0, atol=1e-6)
    # the Hessian is X^T diag(s(1-s)) X (+ lam on w): the Laplace posterior covariance
    s = scipy.special.expit(X @ p[:-1] + p[-1])
    Xa = np.hstack([X, np.ones((len(X), 1))])
    H_ref = Xa.T @ (Xa * (s * (1 - s))[:, None]) + lam * np.diag([1.0] * 4 + [0.0])
    np.testing.assert_allclose(tnp.hessian(logistic_loss)(p, X, y, lam), H_ref, rtol=1e-11,
                               atol=1e-11)


def gp_negative_log_evidence(log_params, X, y):
    """A squared-exponential GP's -log p(y | X, theta), theta = (lengthscale, signal, noise)."""
    ell, sf2, sn2 = tnp.exp(log_params[0]), tnp.exp(2 * log_params[1]), tnp.exp(2 * log_params[2])
    d2 = tnp.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    K = sf2 * tnp.exp(-0.5 * d2 / ell ** 2) + sn2 * tnp.eye(len(X))
    L = tnp.linalg.cholesky(K)
    alpha = tnp.linalg.solve(L.T, tnp.linalg.solve(L, y))
    return 0.5 * y @ alpha + tnp.sum(tnp.log(tnp.diagonal(L))) + 0.5 * len(X) * np.log(2 * np.pi)


def _gp_data():
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, size=(25, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=25)
    return X, y


def test_gp_evidence_value_gradient_and_fit():
    X, y = _gp_data()
    theta = np.log([0.8, 1.1, 0.2])
    # the value against scipy.stats.multivariate_normal on the same covariance
    ell, sf2, sn2 = 0.8, 1.1 ** 2, 0.2 ** 2
    K = sf2 * np.exp(-0.5 * (X - X.T) ** 2 / ell ** 2) + sn2 * np.eye(len(X))
    want = -scipy.stats.multivariate_normal(np.zeros(len(X)), K).logpdf(y)
    assert float(gp_negative_log_evidence(theta, X, y)) == pytest.approx(want, rel=1e-12)
    # gradient: the textbook formula 0.5 tr((K^-1 - a a^T) dK/dtheta), and finite differences
    g = tnp.grad(gp_negative_log_evidence)(theta, X, y)
    Kinv = np.linalg.inv(K)
    a = Kinv @ y
    W = Kinv - np.outer(a, a)
    Kse = sf2 * np.exp(-0.5 * (X - X.T) ** 2 / ell ** 2)
    dK = [Kse * (X - X.T) ** 2 / ell ** 2, 2 * Kse, 2 * sn2 * np.eye(len(X))]
    np.testing.assert_allclose(g, [0.5 * np.sum(W * d) for d in dK], rtol=1e-10)
    np.testing.assert_allclose(g, fd_grad(lambda t: gp_negative_log_evidence(t, X, y), theta),
                               rtol=1e-6)
    # fitted with L-BFGS-B (jitted value_and_grad) vs SciPy's finite-difference fit
    fun = tnp.jit(tnp.value_and_grad(gp_negative_log_evidence))
    res = scipy.optimize.minimize(fun, theta, args=(X, y), jac=True, method="L-BFGS-B")
    ref = scipy.optimize.minimize(lambda t: float(gp_negative_log_evidence(t, X, y)), theta,
                                  method="Nelder-Mead",
                                  options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 20000})
    assert res.success
    assert res.fun <= ref.fun + 1e-8
    np.testing.assert_allclose(res.x, ref.x, atol=1e-4)
    # hessian-based trust region agrees
    res2 = scipy.optimize.minimize(lambda t: gp_negative_log_evidence(t, X, y), theta,
                                   jac=lambda t: tnp.grad(gp_negative_log_evidence)(t, X, y),
                                   hess=lambda t: tnp.hessian(gp_negative_log_evidence)(t, X, y),
                                   method="trust-exact")
    np.testing.assert_allclose(res2.x, res.x, atol=1e-4)


def test_gp_gradient_matches_jax(jx):
    jax, jnp = jx
    X, y = _gp_data()
    theta = np.log([0.6, 0.9, 0.3])

    def jnll(lp):
        ell, sf2, sn2 = jnp.exp(lp[0]), jnp.exp(2 * lp[1]), jnp.exp(2 * lp[2])
        d2 = jnp.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
        K = sf2 * jnp.exp(-0.5 * d2 / ell ** 2) + sn2 * jnp.eye(len(X))
        L = jnp.linalg.cholesky(K)
        alpha = jnp.linalg.solve(L.T, jnp.linalg.solve(L, y))
        return 0.5 * y @ alpha + jnp.sum(jnp.log(jnp.diagonal(L))) + 0.5 * len(X) * np.log(2 * np.pi)

    np.testing.assert_allclose(tnp.grad(gp_negative_log_evidence)(theta, X, y),
                               jax.jit(jax.grad(jnll))(theta), rtol=1e-10)
    np.testing.assert_allclose(tnp.hessian(gp_negative_log_evidence)(theta, X, y),
                               jax.jit(jax.hessian(jnll))(theta), rtol=1e-9, atol=1e-10)


# ============================================================================================
# 2. Maximum likelihood with tnp.scipy.stats
# ============================================================================================


def test_gamma_mle_and_observed_fisher_information():
    rng = np.random.default_rng(10)
    data = rng.gamma(2.5, 1.7, size=300)

    def nll(log_params):
        a, scale = tnp.exp(log_params[0]), tnp.exp(log_params[1])
        return -tnp.sum(tstats.gamma.logpdf(data, a, scale=scale))

    res = scipy.optimize.minimize(tnp.value_and_grad(nll), np.zeros(2), jac=True,
                                  method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 1e-15})
    a_hat, scale_hat = np.exp(res.x)
    a_ref, loc_ref, scale_ref = scipy.stats.gamma.fit(data, floc=0)
    np.testing.assert_allclose([a_hat, scale_hat], [a_ref, scale_ref], rtol=1e-5)
    # the log-likelihood is SciPy's
    assert float(nll(res.x)) == pytest.approx(-np.sum(scipy.stats.gamma.logpdf(data, a_hat,
                                                                             scale=scale_hat)),
                                              rel=1e-13)

    # observed information in the natural parameters (a, scale): analytic
    def nll_natural(params):
        return -tnp.sum(tstats.gamma.logpdf(data, params[0], scale=params[1]))

    n, sx = len(data), data.sum()
    info = tnp.hessian(nll_natural)(np.array([a_hat, scale_hat]))
    want = np.array([[n * scipy.special.polygamma(1, a_hat), n / scale_hat],
                     [n / scale_hat, -n * a_hat / scale_hat ** 2 + 2 * sx / scale_hat ** 3]])
    np.testing.assert_allclose(info, want, rtol=1e-11)
    # and by finite differences of the gradient
    fd = fd_jac(lambda p: tnp.grad(nll_natural)(p), np.array([a_hat, scale_hat]), eps=1e-5)
    np.testing.assert_allclose(info, fd, rtol=1e-6)


def test_student_t_location_scale_fit_is_stationary_for_scipys_likelihood():
    rng = np.random.default_rng(11)
    data = 2.0 + 0.5 * rng.standard_t(5.0, size=400)

    def nll(theta):                            # (log df, loc, log scale): df is fitted too
        return -tnp.sum(tstats.t.logpdf(data, tnp.exp(theta[0]), loc=theta[1],
                                        scale=tnp.exp(theta[2])))

    x0 = np.array([np.log(10.0), np.median(data), np.log(data.std())])
    res = scipy.optimize.minimize(tnp.jit(tnp.value_and_grad(nll)), x0, jac=True,
                                  method="BFGS", options={"gtol": 1e-6})
    assert res.success, res.message
    df, loc, scale = np.exp(res.x[0]), res.x[1], np.exp(res.x[2])

    def scipy_nll(p):
        return -np.sum(scipy.stats.t.logpdf(data, p[0], loc=p[1], scale=p[2]))

    # a stationary point of SciPy's own likelihood (finite differences), no worse than SciPy's fit
    np.testing.assert_allclose(fd_grad(scipy_nll, [df, loc, scale], eps=1e-6), 0.0, atol=1e-4)
    assert scipy_nll([df, loc, scale]) <= scipy_nll(scipy.stats.t.fit(data)) + 1e-9
    # the gradient in df (through betaln) against finite differences away from the optimum
    theta = np.array([np.log(3.0), 1.8, np.log(0.7)])
    np.testing.assert_allclose(tnp.grad(nll)(theta), fd_grad(nll, theta), rtol=1e-7)


def test_beta_mle_matches_scipy_fit_and_empirical_fisher_by_vmap():
    rng = np.random.default_rng(12)
    data = rng.beta(2.0, 5.0, size=250)

    def logpdf_one(theta, x):
        return tstats.beta.logpdf(x, tnp.exp(theta[0]), tnp.exp(theta[1]))

    def nll(theta):
        return -tnp.sum(tstats.beta.logpdf(data, tnp.exp(theta[0]), tnp.exp(theta[1])))

    res = scipy.optimize.minimize(tnp.value_and_grad(nll), np.zeros(2), jac=True,
                                  hess=tnp.hessian(nll), method="trust-exact",
                                  options={"gtol": 1e-10})
    a_ref, b_ref, _, _ = scipy.stats.beta.fit(data, floc=0, fscale=1)
    np.testing.assert_allclose(np.exp(res.x), [a_ref, b_ref], rtol=1e-4)
    # per-observation scores by vmap(grad): their sum is the total score (0 at the MLE)
    scores = tnp.vmap(tnp.grad(logpdf_one), in_axes=(None, 0))(res.x, data)
    assert scores.shape == (250, 2)
    np.testing.assert_allclose(scores.sum(0), 0.0, atol=1e-7)
    a, b = np.exp(res.x)
    dig = scipy.special.digamma(a + b)
    want = np.stack([a * (np.log(data) - scipy.special.digamma(a) + dig),
                     b * (np.log1p(-data) - scipy.special.digamma(b) + dig)], axis=1)
    np.testing.assert_allclose(scores, want, rtol=1e-10, atol=1e-12)


def nbinom_logpmf(k, r, p):
    return (tspecial.gammaln(k + r) - tspecial.gammaln(r) - tspecial.gammaln(k + 1.0)
            + r * tnp.log(p) + k * tnp.log1p(-p))


def test_negative_binomial_through_gammaln():
    rng = np.random.default_rng(13)
    counts = rng.negative_binomial(3.0, 0.4, size=500).astype(np.float64)
    r, p = 2.7, 0.35
    np.testing.assert_allclose(nbinom_logpmf(counts, r, p),
                               scipy.stats.nbinom.logpmf(counts, r, p), rtol=1e-12)
    dr, dp = tnp.grad(lambda r, p: tnp.sum(nbinom_logpmf(counts, r, p)), argnums=(0, 1))(r, p)
    assert dr == pytest.approx(np.sum(scipy.special.digamma(counts + r)
                                      - scipy.special.digamma(r) + np.log(p)), rel=1e-11)
    assert dp == pytest.approx(np.sum(r / p - counts / (1 - p)), rel=1e-12)

    def nll(theta):
        return -tnp.sum(nbinom_logpmf(counts, tnp.exp(theta[0]), tspecial.expit(theta[1])))

    res = scipy.optimize.minimize(tnp.value_and_grad(nll), np.zeros(2), jac=True,
                                  method="L-BFGS-B", options={"gtol": 1e-9, "ftol": 1e-15})
    r_hat, p_hat = np.exp(res.x[0]), scipy.special.expit(res.x[1])
    # the MLE of p given r is r / (r + mean)
    assert p_hat == pytest.approx(r_hat / (r_hat + counts.mean()), rel=1e-6)
    ref = scipy.optimize.minimize(
        lambda t: -np.sum(scipy.stats.nbinom.logpmf(counts, np.exp(t[0]),
                                                    scipy.special.expit(t[1]))),
        np.zeros(2), method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12})
    np.testing.assert_allclose(res.x, ref.x, atol=1e-5)
    # observed information vs finite differences of SciPy's log-pmf
    H = tnp.hessian(nll)(res.x)
    fd = fd_jac(lambda t: fd_grad(lambda u: -np.sum(scipy.stats.nbinom.logpmf(
        counts, np.exp(u[0]), scipy.special.expit(u[1]))), t, eps=1e-5), res.x, eps=1e-4)
    np.testing.assert_allclose(H, fd, rtol=1e-4)


def test_mle_hessians_match_jax(jx):
    jax, jnp = jx
    import jax.scipy.stats as jstats

    rng = np.random.default_rng(14)
    data = 1.0 + 2.0 * rng.standard_t(4.0, size=50)
    theta = np.array([np.log(4.5), 0.9, np.log(1.8)])

    def tnll(t):
        return -tnp.sum(tstats.t.logpdf(data, tnp.exp(t[0]), loc=t[1], scale=tnp.exp(t[2])))

    def jnll(t):
        return -jnp.sum(jstats.t.logpdf(data, jnp.exp(t[0]), loc=t[1], scale=jnp.exp(t[2])))

    np.testing.assert_allclose(tnll(theta), jnll(theta), rtol=1e-13)
    np.testing.assert_allclose(tnp.grad(tnll)(theta), jax.grad(jnll)(theta), rtol=1e-11)
    np.testing.assert_allclose(tnp.hessian(tnll)(theta), jax.jit(jax.hessian(jnll))(theta),
                               rtol=1e-10, atol=1e-10)


# ============================================================================================
# 3. A Kalman filter's log-likelihood and its gradient in the noise parameters
# ============================================================================================

KF_F = np.array([[1.0, 1.0], [0.0, 1.0]])          # local linear trend
KF_H = np.array([[1.0, 0.0], [0.5, 1.0]])          # two observed channels
KF_M0, KF_P0 = np.array([0.0, 0.1]), np.diag([1.0, 0.5])


def kalman_loglik(log_noise, ys):
    """log p(y_1..T) of x_t = F x_{t-1} + w, y_t = H x_t + v, w ~ N(0, diag(q)), v ~ N(0, r I)."""
    Q = tnp.diag(tnp.exp(log_noise[:2]))
    R = tnp.exp(log_noise[2]) * tnp.eye(2)
    m, P = KF_M0, KF_P0
    ll = 0.0
    for y in ys:
        m = KF_F @ m
        P = KF_F @ P @ KF_F.T + Q
        S = KF_H @ P @ KF_H.T + R
        v = y - KF_H @ m
        sign, logdet = tnp.linalg.slogdet(S)
        L = tnp.linalg.cholesky(S)
        z = tnp.linalg.solve(L, v)
        ll = ll - 0.5 * (tnp.sum(z ** 2) + logdet + 2 * np.log(2 * np.pi))
        K = tnp.linalg.solve(S, KF_H @ P).T         # P H^T S^-1 (S symmetric)
        m = m + K @ v
        P = P - K @ S @ K.T
    return ll


def _kalman_data(T=12, seed=20):
    rng = np.random.default_rng(seed)
    x = rng.multivariate_normal(KF_M0, KF_P0)
    ys = []
    for _ in range(T):
        x = KF_F @ x + rng.normal(size=2) * np.sqrt([0.05, 0.01])
        ys.append(KF_H @ x + 0.3 * rng.normal(size=2))
    return np.array(ys)


def dense_state_space_loglik(log_noise, ys):
    """The same likelihood from the joint Gaussian of all observations (no filtering)."""
    q, r = np.exp(log_noise[:2]), np.exp(log_noise[2])
    T = len(ys)
    Fp = [np.linalg.matrix_power(KF_F, t) for t in range(T + 1)]
    mean = np.concatenate([KF_H @ Fp[t] @ KF_M0 for t in range(1, T + 1)])
    cov = np.zeros((2 * T, 2 * T))
    for t in range(1, T + 1):
        for s in range(1, T + 1):
            c = Fp[t] @ KF_P0 @ Fp[s].T
            for k in range(1, min(t, s) + 1):
                c = c + Fp[t - k] @ np.diag(q) @ Fp[s - k].T
            cov[2 * t - 2:2 * t, 2 * s - 2:2 * s] = KF_H @ c @ KF_H.T
    cov += r * np.eye(2 * T)
    return scipy.stats.multivariate_normal(mean, cov).logpdf(ys.reshape(-1))


def test_kalman_loglik_equals_dense_gaussian_and_gradient_matches_fd():
    ys = _kalman_data()
    theta = np.log([0.05, 0.01, 0.09])
    assert float(kalman_loglik(theta, ys)) == pytest.approx(dense_state_space_loglik(theta, ys),
                                                            rel=1e-11)
    g = tnp.grad(kalman_loglik)(theta, ys)
    np.testing.assert_allclose(g, fd_grad(lambda t: dense_state_space_loglik(t, ys), theta,
                                          eps=1e-4), rtol=1e-6, atol=1e-8)
    # the observed information by hessian against finite differences of the gradient
    H = tnp.hessian(kalman_loglik)(theta, ys)
    np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(H, fd_jac(lambda t: tnp.grad(kalman_loglik)(t, ys), theta,
                                         eps=1e-5), rtol=1e-6, atol=1e-8)
    # jitted, the same; a second data set of the same shape does not change the program
    step = tnp.jit(tnp.value_and_grad(kalman_loglik))
    value, gj = step(theta, ys)
    np.testing.assert_allclose(gj, g, rtol=1e-12)
    ys2 = _kalman_data(seed=21)
    value2, gj2 = step(theta, ys2)
    assert float(value2) == pytest.approx(dense_state_space_loglik(theta, ys2), rel=1e-11)
    np.testing.assert_allclose(gj2, tnp.grad(kalman_loglik)(theta, ys2), rtol=1e-12)
    # the noise MLE by L-BFGS-B on the filter equals Nelder-Mead on the dense likelihood
    res = scipy.optimize.minimize(lambda t: tuple(-np.asarray(a) for a in step(t, ys)), theta,
                                  jac=True, method="L-BFGS-B",
                                  options={"gtol": 1e-9, "ftol": 1e-15})
    ref = scipy.optimize.minimize(lambda t: -dense_state_space_loglik(t, ys), theta,
                                  method="Nelder-Mead",
                                  options={"xatol": 1e-8, "fatol": 1e-12, "maxiter": 5000})
    assert res.fun <= ref.fun + 1e-7
    # (this series puts the level noise q1 on the boundary q1 -> 0: only its smallness is fitted)
    np.testing.assert_allclose(res.x[1:], ref.x[1:], atol=2e-3)
    assert np.exp(res.x[0]) < 1e-6 and np.exp(ref.x[0]) < 1e-6


def test_kalman_gradient_matches_jax(jx):
    jax, jnp = jx
    ys = _kalman_data()
    theta = np.log([0.08, 0.02, 0.05])

    def jll(log_noise):
        Q = jnp.diag(jnp.exp(log_noise[:2]))
        R = jnp.exp(log_noise[2]) * jnp.eye(2)
        m, P, ll = jnp.asarray(KF_M0), jnp.asarray(KF_P0), 0.0
        for y in ys:
            m = KF_F @ m
            P = KF_F @ P @ KF_F.T + Q
            S = KF_H @ P @ KF_H.T + R
            v = y - KF_H @ m
            _, logdet = jnp.linalg.slogdet(S)
            z = jnp.linalg.solve(jnp.linalg.cholesky(S), v)
            ll = ll - 0.5 * (jnp.sum(z ** 2) + logdet + 2 * np.log(2 * np.pi))
            K = jnp.linalg.solve(S, KF_H @ P).T
            m = m + K @ v
            P = P - K @ S @ K.T
        return ll

    np.testing.assert_allclose(tnp.grad(kalman_loglik)(theta, ys), jax.jit(jax.grad(jll))(theta),
                               rtol=1e-10)


# ============================================================================================
# 4. Physics: an n-body system, forces by grad, leapfrog differentiated in its initial state
# ============================================================================================

N_BODIES = 4
MASSES = np.array([1.0, 0.8, 1.2, 0.5])
PAIRS = np.array([(i, j) for i in range(N_BODIES) for j in range(i + 1, N_BODIES)])
SOFTENING = 0.1


def pair_energy(qi, qj, mi, mj):
    return -mi * mj / tnp.sqrt(tnp.sum((qi - qj) ** 2) + SOFTENING ** 2)


def potential(q):
    """Softened gravity: vmap over the pairs (i < j)."""
    q = tnp.reshape(q, (N_BODIES, 2))
    energies = tnp.vmap(pair_energy)(q[PAIRS[:, 0]], q[PAIRS[:, 1]], MASSES[PAIRS[:, 0]],
                                     MASSES[PAIRS[:, 1]])
    return tnp.sum(energies)


def hamiltonian(state):
    q, p = state[:2 * N_BODIES], state[2 * N_BODIES:]
    return tnp.sum(tnp.reshape(p, (N_BODIES, 2)) ** 2 / (2 * MASSES[:, None])) + potential(q)


def leapfrog(state, dt=0.01, steps=20):
    force = tnp.grad(potential)
    inv_m = np.repeat(1.0 / MASSES, 2)
    q, p = state[:2 * N_BODIES], state[2 * N_BODIES:]
    for _ in range(steps):
        p = p - 0.5 * dt * force(q)
        q = q + dt * inv_m * p
        p = p - 0.5 * dt * force(q)
    return tnp.concatenate([q, p])


def _initial_state():
    rng = np.random.default_rng(30)
    return np.concatenate([rng.uniform(-1, 1, size=2 * N_BODIES),
                           0.3 * rng.normal(size=2 * N_BODIES)])


def test_nbody_forces_are_newtons():
    q = _initial_state()[:2 * N_BODIES]
    forces = -tnp.grad(potential)(q).reshape(N_BODIES, 2)
    pos = q.reshape(N_BODIES, 2)
    want = np.zeros((N_BODIES, 2))
    for i in range(N_BODIES):
        for j in range(N_BODIES):
            if i != j:
                d = pos[j] - pos[i]
                want[i] += MASSES[i] * MASSES[j] * d / (d @ d + SOFTENING ** 2) ** 1.5
    np.testing.assert_allclose(forces, want, rtol=1e-12)
    np.testing.assert_allclose(forces.sum(0), 0.0, atol=1e-12)      # Newton's third law
    # the Hessian (stiffness) is symmetric and translation-invariant: rows sum to 0 per axis
    K = tnp.hessian(potential)(q)
    np.testing.assert_allclose(K, K.T, atol=1e-12)
    np.testing.assert_allclose(K.reshape(8, N_BODIES, 2).sum(1), 0.0, atol=1e-11)


def test_leapfrog_jacobian_is_symplectic_and_matches_fd():
    x0 = _initial_state()
    xT = leapfrog(x0)
    # the energy error is O(dt^2): a quarter of it at half the step
    err1 = float(hamiltonian(xT)) - float(hamiltonian(x0))
    err2 = float(hamiltonian(leapfrog(x0, dt=0.005, steps=40))) - float(hamiltonian(x0))
    assert abs(err1) < 1e-2 and 3.8 < err1 / err2 < 4.2
    J_fwd = tnp.jacfwd(leapfrog)(x0)
    J_rev = tnp.jacrev(leapfrog)(x0)
    assert J_fwd.shape == (16, 16)
    np.testing.assert_allclose(J_fwd, J_rev, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(J_fwd, fd_jac(leapfrog, x0, eps=1e-6), rtol=1e-6, atol=1e-8)
    # leapfrog is symplectic: J^T Omega J = Omega, to rounding
    n = 2 * N_BODIES
    omega = np.block([[np.zeros((n, n)), np.eye(n)], [-np.eye(n), np.zeros((n, n))]])
    np.testing.assert_allclose(J_fwd.T @ omega @ J_fwd, omega, atol=1e-10)
    # jit of the whole Jacobian gives the same matrix
    np.testing.assert_allclose(tnp.jit(tnp.jacrev(leapfrog))(x0), J_rev, rtol=1e-12, atol=1e-13)
    # gradient of a final-position objective through the whole trajectory = row of J
    target = lambda x: leapfrog(x)[0]
    np.testing.assert_allclose(tnp.grad(target)(x0), J_rev[0], rtol=1e-12, atol=1e-13)


# ============================================================================================
# 5. Implicit differentiation: fixed_point, a custom_vjp around a SciPy solver, odeint
# ============================================================================================


def kepler_map(params, E):
    M, e = params
    return M + e * tnp.sin(E)


def test_kepler_equation_by_fixed_point():
    M, e = np.linspace(0.1, 3.0, 6), 0.6
    E = tnp.fixed_point(kepler_map, (M, e), M)
    np.testing.assert_allclose(E - e * np.sin(E), M, atol=1e-9)
    # analytic sensitivities of the eccentric anomaly: dE/dM = 1/(1 - e cos E), dE/de = sin E/(...)
    J = tnp.jacrev(lambda M: tnp.fixed_point(kepler_map, (M, e), M))(M)
    np.testing.assert_allclose(J, np.diag(1 / (1 - e * np.cos(E))), rtol=1e-8, atol=1e-12)
    de = tnp.grad(lambda e: tnp.sum(tnp.fixed_point(kepler_map, (M, e), M)))(e)
    assert de == pytest.approx(np.sum(np.sin(E) / (1 - e * np.cos(E))), rel=1e-8)

    # finite differences of an independent solver (Newton's method in SciPy)
    def solve(e):
        return scipy.optimize.newton(lambda E: E - e * np.sin(E) - M, M, tol=1e-14)

    assert de == pytest.approx(np.sum((solve(e + 1e-6) - solve(e - 1e-6)) / 2e-6), rel=1e-6)
    # a loss that uses the root downstream (the true anomalies), jitted; M passed as an argument
    def true_anomaly_sum(e, M):
        E = tnp.fixed_point(kepler_map, (M, e), M)
        return tnp.sum(2 * tnp.arctan(tnp.sqrt((1 + e) / (1 - e)) * tnp.tan(E / 2)))

    g = tnp.jit(tnp.grad(true_anomaly_sum))(e, M)

    def loss_np(e):
        return np.sum(2 * np.arctan(np.sqrt((1 + e) / (1 - e)) * np.tan(solve(e) / 2)))

    assert g == pytest.approx((loss_np(e + 1e-6) - loss_np(e - 1e-6)) / 2e-6, rel=1e-6)
    assert g == pytest.approx(tnp.grad(true_anomaly_sum)(e, M), rel=1e-12)


FP_X_INIT = np.zeros(3)          # a module constant: the warm start of a solver
LV_Y0_GLOBAL = np.array([1.0, 0.5])


def _contraction(a, x):
    return 0.5 * tnp.cos(a) * tnp.tanh(x) + 0.1


def test_jit_fixed_point_with_global_initial_guess():
    def loss(a):
        return tnp.sum(tnp.fixed_point(_contraction, a, FP_X_INIT))

    assert tnp.jit(tnp.grad(loss))(0.7) == pytest.approx(tnp.grad(loss)(0.7), rel=1e-12)


FP_DATA = np.array([0.5, 1.0, 2.0])


def test_jit_fixed_point_with_global_data_in_a():
    def f(a, x):
        return 0.5 * tnp.cos(a[1]) * tnp.tanh(tnp.exp(a[0]) * x) + 0.1

    def loss(e):
        return tnp.sum(tnp.fixed_point(f, (FP_DATA, e), np.zeros(3)))

    jitted = tnp.jit(tnp.grad(loss))
    assert jitted(0.7) == pytest.approx(tnp.grad(loss)(0.7), rel=1e-12)
    saved = FP_DATA.copy()
    try:
        FP_DATA[:] = [0.1, 0.3, 0.2]              # read at each call, not frozen at the trace
        assert jitted(0.7) == pytest.approx(tnp.grad(loss)(0.7), rel=1e-12)
    finally:
        FP_DATA[:] = saved


def test_jit_odeint_with_global_initial_state():
    def loss(k):
        return tnp.sum(tnp.odeint(lambda y, t, k: -k * tnp.tanh(y), LV_Y0_GLOBAL,
                                  np.linspace(0.0, 1.0, 5), k))

    jitted = tnp.jit(tnp.grad(loss))
    assert jitted(0.7) == pytest.approx(tnp.grad(loss)(0.7), rel=1e-12)
    saved = LV_Y0_GLOBAL.copy()
    try:
        LV_Y0_GLOBAL[:] = [2.0, -1.0]             # read at each call, not frozen at the trace
        assert jitted(0.7) == pytest.approx(tnp.grad(loss)(0.7), rel=1e-12)
    finally:
        LV_Y0_GLOBAL[:] = saved


@tnp.custom_vjp
def cubic_root(theta):
    """The root in (0, 1) of x^3 + theta x - 1, by SciPy's brentq (opaque to tidu)."""
    return np.float64(scipy.optimize.brentq(lambda x: x ** 3 + theta * x - 1, 0.0, 1.0,
                                            xtol=1e-15, rtol=1e-15))


def _cubic_fwd(theta):
    x = cubic_root(theta)
    return x, (x, theta)


def _cubic_bwd(res, ct):
    x, theta = res
    return (-ct * x / (3 * x ** 2 + theta),)    # implicit function theorem


cubic_root.defvjp(_cubic_fwd, _cubic_bwd)


def test_custom_vjp_around_scipy_brentq():
    def brent(theta):
        return scipy.optimize.brentq(lambda x: x ** 3 + theta * x - 1, 0.0, 1.0, xtol=1e-15,
                                     rtol=1e-15)

    def loss(theta):
        x = cubic_root(theta)
        return tnp.sin(x) * theta ** 2

    for theta in (0.5, 2.0, 3.0):
        fd = (np.sin(brent(theta + 1e-6)) * (theta + 1e-6) ** 2
              - np.sin(brent(theta - 1e-6)) * (theta - 1e-6) ** 2) / 2e-6
        assert tnp.grad(loss)(theta) == pytest.approx(fd, rel=1e-7)
        # jit and vmap call SciPy on concrete values at each call (never a stale root)
        assert tnp.jit(tnp.grad(loss))(theta) == pytest.approx(fd, rel=1e-7)
    thetas = np.array([0.5, 2.0, 3.0])
    np.testing.assert_allclose(tnp.vmap(cubic_root)(thetas), [brent(t) for t in thetas],
                               rtol=1e-14)
    np.testing.assert_allclose(tnp.vmap(tnp.grad(loss))(thetas),
                               [tnp.grad(loss)(t) for t in thetas], rtol=1e-13)
    # forward mode is refused clearly (a reverse rule only, as in JAX)
    with pytest.raises(tidu.TiduError, match="custom_vjp function cubic_root"):
        tnp.jacfwd(loss)(2.0)


LV_T = np.linspace(0.0, 6.0, 13)
LV_Y0 = np.array([1.0, 0.5])
LV_PARAMS = np.array([1.1, 0.4, 0.9, 0.3])


def lv_rhs(y, t, params):
    a, b, c, d = params[0], params[1], params[2], params[3]
    prey, pred = y[0], y[1]
    return tnp.stack([a * prey - b * prey * pred, -c * pred + d * prey * pred])


def _lv_scipy(params, y0=LV_Y0):
    a, b, c, d = params
    sol = scipy.integrate.solve_ivp(
        lambda t, y: [a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]],
        (LV_T[0], LV_T[-1]), y0, t_eval=LV_T, method="DOP853", rtol=1e-12, atol=1e-12)
    return sol.y.T


def _lv_observations():
    rng = np.random.default_rng(40)
    return _lv_scipy(np.array([1.0, 0.5, 1.0, 0.25])) + 0.02 * rng.normal(size=(13, 2))


def lv_loss(params, y0, obs):
    ys = tnp.odeint(lv_rhs, y0, LV_T, params, rtol=1e-11, atol=1e-11)
    return tnp.sum((ys - obs) ** 2)


def test_lotka_volterra_odeint_against_solve_ivp():
    obs = _lv_observations()
    ys = tnp.odeint(lv_rhs, LV_Y0, LV_T, LV_PARAMS, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(ys, _lv_scipy(LV_PARAMS), rtol=1e-8, atol=1e-9)
    gp, gy0 = tnp.grad(lv_loss, argnums=(0, 1))(LV_PARAMS, LV_Y0, obs)

    def loss_scipy(params, y0=LV_Y0):
        return np.sum((_lv_scipy(params, y0) - obs) ** 2)

    np.testing.assert_allclose(gp, fd_grad(loss_scipy, LV_PARAMS, eps=1e-6), rtol=1e-6)
    np.testing.assert_allclose(gy0, fd_grad(lambda y0: loss_scipy(LV_PARAMS, y0), LV_Y0, eps=1e-6),
                               rtol=1e-6)
    # the parameter fit by L-BFGS-B (a looser solver tolerance) recovers the generating ones
    def lv_loss_fit(params):
        ys = tnp.odeint(lv_rhs, LV_Y0, LV_T, params, rtol=1e-7, atol=1e-7)
        return tnp.sum((ys - obs) ** 2)

    res = scipy.optimize.minimize(tnp.value_and_grad(lv_loss_fit), [1.05, 0.45, 0.95, 0.28],
                                  jac=True, method="L-BFGS-B")
    assert res.success
    np.testing.assert_allclose(res.x, [1.0, 0.5, 1.0, 0.25], atol=0.05)


def test_lotka_volterra_gradient_matches_jax_odeint(jx):
    jax, jnp = jx
    from jax.experimental.ode import odeint as jodeint

    obs = _lv_observations()

    def jrhs(y, t, params):
        a, b, c, d = params
        return jnp.stack([a * y[0] - b * y[0] * y[1], -c * y[1] + d * y[0] * y[1]])

    def jloss(params, y0):
        ys = jodeint(jrhs, y0, jnp.asarray(LV_T), params, rtol=1e-11, atol=1e-11)
        return jnp.sum((ys - obs) ** 2)

    want = jax.jit(jax.grad(jloss, argnums=(0, 1)))(LV_PARAMS, LV_Y0)
    got = tnp.grad(lv_loss, argnums=(0, 1))(LV_PARAMS, LV_Y0, obs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-7)


# ============================================================================================
# 6. Spectral: a windowed periodogram, a deconvolution, circular filtering by rfft/irfft
# ============================================================================================

FS = 64.0
N_SAMPLES = 128
TIMES = np.arange(N_SAMPLES) / FS


def periodogram(x):
    """scipy.signal.periodogram(x, fs, window='hann') by hand: detrend, periodic Hann, rfft."""
    n = x.shape[-1]
    w = 0.5 - 0.5 * tnp.cos(2 * np.pi * tnp.arange(n) / n)
    xw = (x - tnp.mean(x)) * w
    p = tnp.abs(tnp.fft.rfft(xw)) ** 2 / (FS * tnp.sum(w ** 2))
    scale = np.full(n // 2 + 1, 2.0)
    scale[0] = scale[-1] = 1.0
    return p * scale


def chirp_signal(theta):
    amp, freq, phase = theta[0], theta[1], theta[2]
    return amp * tnp.sin(2 * np.pi * freq * TIMES + phase) + 0.3 * tnp.cos(2 * np.pi * 5.0 * TIMES)


def spectral_loss(theta, target):
    return tnp.sum((tnp.log(periodogram(chirp_signal(theta)) + 1e-3) - target) ** 2)


def _spectral_target():
    f, p = scipy.signal.periodogram(chirp_signal(np.array([1.3, 11.2, 0.4])), FS, window="hann")
    return np.log(p + 1e-3)


def test_periodogram_equals_scipys_and_spectral_loss_gradient():
    x = chirp_signal(np.array([0.8, 9.7, 1.0]))
    f, want = scipy.signal.periodogram(x, FS, window="hann")
    np.testing.assert_allclose(periodogram(x), want, rtol=1e-11, atol=1e-15)
    target = _spectral_target()
    theta = np.array([1.0, 10.5, 0.2])
    g = tnp.grad(spectral_loss)(theta, target)

    def scipy_loss(t):
        return np.sum((np.log(scipy.signal.periodogram(chirp_signal(t), FS, window="hann")[1]
                              + 1e-3) - target) ** 2)

    np.testing.assert_allclose(g, fd_grad(scipy_loss, theta, eps=1e-6), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tnp.jit(tnp.grad(spectral_loss))(theta, target), g, rtol=1e-12)
    # Parseval in reverse mode: the gradient of sum |rfft x|^2 (with the half-spectrum weights)
    wts = np.full(N_SAMPLES // 2 + 1, 2.0)
    wts[0] = wts[-1] = 1.0
    gx = tnp.grad(lambda x: tnp.sum(wts * tnp.abs(tnp.fft.rfft(x)) ** 2) / N_SAMPLES)(x)
    np.testing.assert_allclose(gx, 2 * x, rtol=1e-11, atol=1e-12)


def test_spectral_gradient_matches_jax(jx):
    jax, jnp = jx
    target = _spectral_target()
    theta = np.array([1.0, 10.5, 0.2])

    def jloss(t):
        x = t[0] * jnp.sin(2 * np.pi * t[1] * TIMES + t[2]) + 0.3 * jnp.cos(2 * np.pi * 5.0 * TIMES)
        n = x.shape[-1]
        w = 0.5 - 0.5 * jnp.cos(2 * np.pi * jnp.arange(n) / n)
        p = jnp.abs(jnp.fft.rfft((x - jnp.mean(x)) * w)) ** 2 / (FS * jnp.sum(w ** 2))
        scale = np.full(n // 2 + 1, 2.0)
        scale[0] = scale[-1] = 1.0
        return jnp.sum((jnp.log(p * scale + 1e-3) - target) ** 2)

    np.testing.assert_allclose(spectral_loss(theta, target), jloss(theta), rtol=1e-13)
    np.testing.assert_allclose(tnp.grad(spectral_loss)(theta, target), jax.jit(jax.grad(jloss))(theta),
                               rtol=1e-10, atol=1e-9)  # the phase: 0 (rounding)
    np.testing.assert_allclose(tnp.hessian(spectral_loss)(theta, target),
                               jax.jit(jax.hessian(jloss))(theta), rtol=1e-8, atol=1e-7)


def test_tikhonov_deconvolution_through_signal_convolve():
    import scipy.linalg

    rng = np.random.default_rng(50)
    kernel = scipy.signal.windows.gaussian(9, 1.5)
    kernel /= kernel.sum()
    truth = np.zeros(40)
    truth[[8, 20, 27]] = [1.0, -0.7, 0.5]
    observed = scipy.signal.convolve(truth, kernel, mode="same") + 0.01 * rng.normal(size=40)
    lam = 1e-2

    def objective(x, method):
        r = tsignal.convolve(x, kernel, mode="same", method=method) - observed
        return tnp.sum(r ** 2) + lam * tnp.sum(tnp.diff(x) ** 2)

    # the exact minimizer from the normal equations (SciPy's convolution matrix)
    C = scipy.linalg.convolution_matrix(kernel, 40, mode="same")
    D = np.diff(np.eye(40), axis=0)
    exact = np.linalg.solve(C.T @ C + lam * D.T @ D, C.T @ observed)
    for method in ("direct", "fft"):
        x0 = np.zeros(40)
        np.testing.assert_allclose(tsignal.convolve(observed, kernel, mode="same", method=method),
                                   scipy.signal.convolve(observed, kernel, mode="same"),
                                   rtol=1e-12, atol=1e-14)
        g = tnp.grad(objective)(x0, method)
        np.testing.assert_allclose(g, -2 * C.T @ observed, rtol=1e-11, atol=1e-13)
        res = scipy.optimize.minimize(tnp.value_and_grad(objective), x0, args=(method,),
                                      jac=True, method="L-BFGS-B",
                                      options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 2000})
        np.testing.assert_allclose(res.x, exact, atol=1e-6)
        # the Hessian is the normal-equations matrix, exactly
        np.testing.assert_allclose(tnp.hessian(objective)(x0, method),
                                   2 * (C.T @ C + lam * D.T @ D), rtol=1e-11, atol=1e-13)


def test_circular_filter_by_irfft_gradient():
    rng = np.random.default_rng(51)
    x, h = rng.normal(size=32), rng.normal(size=32)
    target = rng.normal(size=32)

    def circ(x, h):
        return tnp.fft.irfft(tnp.fft.rfft(x) * tnp.fft.rfft(h), n=32)

    def loss(x, h):
        return tnp.sum((circ(x, h) - target) ** 2)

    C = np.stack([np.roll(h, k) for k in range(32)], axis=1)       # circulant of h
    np.testing.assert_allclose(circ(x, h), C @ x, rtol=1e-11, atol=1e-12)
    gx, gh = tnp.grad(loss, argnums=(0, 1))(x, h)
    np.testing.assert_allclose(gx, 2 * C.T @ (C @ x - target), rtol=1e-10, atol=1e-11)
    np.testing.assert_allclose(gh, fd_grad(lambda h: np.sum((np.stack(
        [np.roll(h, k) for k in range(32)], axis=1) @ x - target) ** 2), h), rtol=1e-7)


# ============================================================================================
# 7. tnp.linalg in anger (gauge-invariant losses only)
# ============================================================================================


def sym(X):
    return 0.5 * (X + X.T)


def expm_trace_loss(X, B):
    """tr(expm(sym(X)) B) through eigh: V diag(exp(w)) V^T."""
    w, V = tnp.linalg.eigh(sym(X))
    return tnp.sum((V * tnp.exp(w)) @ V.T * B)


def nuclear_norm(X):
    return tnp.sum(tnp.linalg.svd(X, compute_uv=False))


def lstsq_loss(A, b):
    x = tnp.linalg.lstsq(A, b, rcond=None)[0]
    return tnp.sum(x ** 2) + tnp.sum(tnp.sin(A @ x))


def projector_loss(A, C):
    Q, _ = tnp.linalg.qr(A)                 # Q Q^T does not depend on the signs of Q's columns
    return tnp.sum((Q @ Q.T) * C)


def pinv_loss(A, C):
    return tnp.sum(tnp.linalg.pinv(A) * C)


def _linalg_inputs():
    rng = np.random.default_rng(60)
    return {"X": rng.normal(size=(4, 4)), "B": sym(rng.normal(size=(4, 4))),
            "M": rng.normal(size=(5, 3)), "A": rng.normal(size=(6, 3)), "b": rng.normal(size=6),
            "C": rng.normal(size=(6, 6)), "Cp": rng.normal(size=(3, 6))}


def test_linalg_losses_against_scipy_and_finite_differences():
    import scipy.linalg

    d = _linalg_inputs()
    X, B = d["X"], d["B"]
    # the value is SciPy's expm; its gradient, finite differences of SciPy's expm
    assert float(expm_trace_loss(X, B)) == pytest.approx(
        np.sum(scipy.linalg.expm(sym(X)) * B), rel=1e-12)
    np.testing.assert_allclose(tnp.grad(expm_trace_loss)(X, B),
                               fd_grad(lambda X: np.sum(scipy.linalg.expm(sym(X)) * B), X),
                               rtol=1e-7, atol=1e-7)
    # the nuclear norm's gradient is U V^T (distinct singular values)
    M = d["M"]
    U, _, Vt = np.linalg.svd(M, full_matrices=False)
    np.testing.assert_allclose(tnp.grad(nuclear_norm)(M), U @ Vt, rtol=1e-11, atol=1e-13)
    assert float(tnp.linalg.matrix_norm(M, ord="nuc")) == pytest.approx(
        np.linalg.norm(M, "nuc"), rel=1e-14)
    np.testing.assert_allclose(tnp.grad(lambda M: tnp.linalg.matrix_norm(M, ord="nuc"))(M),
                               U @ Vt, rtol=1e-11, atol=1e-13)
    # lstsq, pinv, the qr projector: finite differences of NumPy's own
    A, b, C, Cp = d["A"], d["b"], d["C"], d["Cp"]

    def np_lstsq_loss(A):
        x = np.linalg.lstsq(A, b, rcond=None)[0]
        return np.sum(x ** 2) + np.sum(np.sin(A @ x))

    gA, gb = tnp.grad(lstsq_loss, argnums=(0, 1))(A, b)
    np.testing.assert_allclose(gA, fd_grad(np_lstsq_loss, A), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(gb, fd_grad(lambda b: lstsq_loss(A, b), b), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(
        tnp.grad(projector_loss)(A, C),
        fd_grad(lambda A: np.sum(np.linalg.qr(A)[0] @ np.linalg.qr(A)[0].T * C), A),
        rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(tnp.grad(pinv_loss)(A, Cp),
                               fd_grad(lambda A: np.sum(np.linalg.pinv(A) * Cp), A),
                               rtol=1e-7, atol=1e-9)


def test_near_singular_determinants():
    rng = np.random.default_rng(61)
    U = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    V = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    A = U @ np.diag([3.0, 1.0, 0.5, 1e-9]) @ V.T           # condition number 3e9
    sign, logdet = tnp.linalg.slogdet(A)
    want_sign, want_logdet = np.linalg.slogdet(A)
    assert float(sign) == want_sign and float(logdet) == pytest.approx(want_logdet, rel=1e-12)
    # d logdet / dA = inv(A)^T = V diag(1/s) U^T ... transposed: U diag(1/s) V^T
    want = U @ np.diag(1 / np.array([3.0, 1.0, 0.5, 1e-9])) @ V.T
    g = tnp.grad(lambda A: tnp.linalg.slogdet(A)[1])(A)
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    # det's gradient is the adjugate^T = det(A) inv(A)^T: finite, near a singular matrix
    gd = tnp.grad(tnp.linalg.det)(A)
    np.testing.assert_allclose(gd, np.linalg.det(A) * want, rtol=1e-6, atol=1e-12)
    # det at an exactly singular matrix: its gradient is still the (nonzero) adjugate
    S = U @ np.diag([3.0, 1.0, 0.5, 0.0]) @ V.T
    adj = U[:, 3:] @ V[:, 3:].T * 1.5 * np.linalg.det(U) * np.linalg.det(V)
    np.testing.assert_allclose(tnp.grad(tnp.linalg.det)(S),
                               fd_grad(lambda S: np.linalg.det(S), S), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(tnp.grad(tnp.linalg.det)(S), adj, rtol=1e-6, atol=1e-8)


def test_linalg_gradients_match_jax(jx):
    jax, jnp = jx
    d = _linalg_inputs()

    def j_expm_trace(X, B):
        w, V = jnp.linalg.eigh(0.5 * (X + X.T))
        return jnp.sum((V * jnp.exp(w)) @ V.T * B)

    def j_lstsq(A, b):
        x = jnp.linalg.lstsq(A, b, rcond=None)[0]
        return jnp.sum(x ** 2) + jnp.sum(jnp.sin(A @ x))

    def j_proj(A, C):
        Q, _ = jnp.linalg.qr(A)
        return jnp.sum((Q @ Q.T) * C)

    cases = [(expm_trace_loss, j_expm_trace, (d["X"], d["B"])),
             (nuclear_norm, lambda M: jnp.sum(jnp.linalg.svd(M, compute_uv=False)), (d["M"],)),
             (lstsq_loss, j_lstsq, (d["A"], d["b"])),
             (projector_loss, j_proj, (d["A"], d["C"])),
             (pinv_loss, lambda A, C: jnp.sum(jnp.linalg.pinv(A) * C), (d["A"], d["Cp"]))]
    for tf, jf, args in cases:
        np.testing.assert_allclose(tf(*args), jf(*args), rtol=1e-12, err_msg=tf.__name__)
        np.testing.assert_allclose(tnp.grad(tf)(*args), jax.jit(jax.grad(jf))(*args),
                                   rtol=1e-9, atol=1e-11, err_msg=tf.__name__)
    # second order through eigh (forward over reverse) as JAX's
    X, B = d["X"], d["B"]
    T = np.random.default_rng(62).normal(size=X.shape)
    np.testing.assert_allclose(tnp.hvp(lambda X: expm_trace_loss(X, B), (X,), (T,)),
                               jax.jvp(jax.grad(lambda X: j_expm_trace(X, B)), (X,), (T,))[1],
                               rtol=1e-9, atol=1e-11)


# ============================================================================================
# 8. autograd-style code: one source, two numpy modules
# ============================================================================================


def make_program(np_):
    """An autograd-era program written against a NumPy-like module ``np_``: a Huber-robust
    neural regression with a NaN-safe branch, augmented assignments and a Python loop."""

    def safe_sqrt(x):
        positive = x > 0
        return np_.where(positive, np_.sqrt(np_.where(positive, x, 1.0)), 0.0)

    def predict(params, X):
        h = X
        for W, b in params[:-1]:
            h = h @ W
            h += b                               # augmented assignment on a traced value
            h = np_.tanh(h)
        W, b = params[-1]
        return (h @ W + b)[:, 0]

    def loss(params, X, y, delta=0.5):
        r = predict(params, X) - y
        a = np_.abs(r)
        huber = np_.where(a <= delta, 0.5 * r ** 2, delta * (a - 0.5 * delta))
        reg = 0.0
        for W, _ in params:
            reg = reg + np_.sum(safe_sqrt(W ** 2 - 0.015625))   # exactly 0 (and NaN-free) inside
        return np_.mean(huber) + 1e-3 * reg

    return loss, safe_sqrt


def _mlp_problem():
    rng = np.random.default_rng(70)
    X = rng.normal(size=(30, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.05 * rng.normal(size=30)
    sizes = [3, 8, 8, 1]
    params = [(0.5 * rng.normal(size=(m, n)), 0.1 * rng.normal(size=n))
              for m, n in zip(sizes[:-1], sizes[1:])]
    params[0][0][0, 0] = 0.125                   # exactly on safe_sqrt's kink: 0 derivative
    return params, X, y


def test_autograd_program_matches_finite_differences_and_jit():
    params, X, y = _mlp_problem()
    loss, safe_sqrt = make_program(tnp)
    value, grads = tnp.value_and_grad(loss)(params, X, y)
    assert isinstance(grads, list) and all(isinstance(g, tuple) for g in grads)
    flat, unravel = tnp.ravel_pytree(params)
    fd = fd_grad(lambda v: loss(unravel(v), X, y), flat, eps=1e-6)
    g_flat = tnp.ravel_pytree(grads)[0]
    assert np.all(np.isfinite(g_flat))
    kink = 0                                   # W0[0, 0] = 0.125: W^2 - 0.015625 == 0 exactly
    mask = np.ones(flat.shape, bool)
    mask[kink] = False
    np.testing.assert_allclose(g_flat[mask], fd[mask], rtol=1e-6, atol=1e-9)
    # jit gives the same pytree of gradients
    value_j, grads_j = tnp.jit(tnp.value_and_grad(loss))(params, X, y)
    np.testing.assert_allclose(tnp.ravel_pytree(grads_j)[0], g_flat, rtol=1e-12, atol=1e-15)
    # fitted with SciPy on the raveled vector
    fun = tnp.jit(tnp.value_and_grad(lambda v: loss(unravel(v), X, y)))
    res = scipy.optimize.minimize(fun, flat, jac=True, method="L-BFGS-B",
                                  options={"maxiter": 200})
    assert res.fun < 0.5 * float(value)
    # NaN-safe where: the derivative of safe_sqrt is 0 where the branch is not taken, never NaN
    x = np.array([-1.0, 0.0, 4.0])
    np.testing.assert_array_equal(tnp.grad(lambda x: tnp.sum(safe_sqrt(x)))(x), [0.0, 0.0, 0.25])


def test_autograd_program_matches_hips_autograd(ag):
    autograd, anp = ag
    params, X, y = _mlp_problem()
    t_loss, t_safe = make_program(tnp)
    a_loss, a_safe = make_program(anp)
    assert float(t_loss(params, X, y)) == pytest.approx(float(a_loss(params, X, y)), rel=1e-14)
    t_grads = tnp.ravel_pytree(tnp.grad(t_loss)(params, X, y))[0]
    a_grads = tnp.ravel_pytree(autograd.grad(a_loss)(params, X, y))[0]
    np.testing.assert_allclose(t_grads, a_grads, rtol=1e-11, atol=1e-15)
    x = np.array([-1.0, 0.0, 4.0])
    np.testing.assert_array_equal(tnp.grad(lambda x: tnp.sum(t_safe(x)))(x),
                                  autograd.grad(lambda x: anp.sum(a_safe(x)))(x))
    # the Hessian-vector product in the raveled parameters, as autograd's (its own flatten)
    from autograd.misc import flatten

    flat, unravel = tnp.ravel_pytree(params)
    a_flat, a_unravel = flatten(params)
    np.testing.assert_array_equal(flat, a_flat)
    v = np.random.default_rng(71).normal(size=flat.shape)
    hv_t = tnp.hvp(lambda p: t_loss(unravel(p), X, y), (flat,), (v,))
    hv_a = autograd.hessian_vector_product(lambda p: a_loss(a_unravel(p), X, y))(a_flat, v)
    np.testing.assert_allclose(hv_t, hv_a, rtol=1e-9, atol=1e-12)


def test_float_conversion_in_a_loop_raises_clearly():
    def loop_with_float(x):
        total = 0.0
        for i in range(3):
            total += float(x[i]) ** 2              # drops the derivative: must not be silent
        return total

    with pytest.raises(tidu.TiduError, match="float\\(\\).*derivative"):
        tnp.grad(loop_with_float)(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(tidu.TiduError, match="np.asarray"):
        tnp.jit(tnp.grad(lambda x: tnp.sum(x) * np.asarray(x).sum()))(np.ones(3))
    t = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(tidu.TiduError, match="derivative"):
        float(tnp.sum(t))
    # stop_gradient says it on purpose: the derivative of the converted part is 0
    g = tnp.grad(lambda x: tnp.sum(x ** 2) * float(tnp.stop_gradient(x[0])))(np.array([2.0, 1.0]))
    np.testing.assert_allclose(g, [8.0, 4.0])
    # a value-dependent Python branch on a traced value is a clear error under jit
    with pytest.raises(tidu.TiduError):
        tnp.jit(lambda x: x if x[0] > 0 else -x)(np.array([1.0, 2.0]))
