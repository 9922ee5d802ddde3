"""Real JAX programs ported to ``primitives.tensor``, each written twice (tnp and JAX).

Six small programs a JAX user would write: a minibatch MLP classifier trained with
``jit(value_and_grad)`` and Adam on integer labels, DP-SGD per-example gradients,
a neural ODE fit with ``odeint``, Bayesian logistic regression (Newton MAP, Laplace
evidence, Langevin chains), a Gaussian-process hyperparameter fit and a scan-like
recurrent loop with ``custom_jvp``, ``checkpoint``, ``stop_gradient`` and NaN-safe
``where``. The JAX halves run when JAX is installed (skipped otherwise); tidu's own
checks (finite differences, the dot-product test ``<ct, J t> == <J^T ct, t>``, retrace
counts, closure reads, aliasing) need no JAX. The odeint tests after the neural ODE
failed before their fixes (pytree and integer arguments, the forward-mode error).
"""

from __future__ import annotations


import numpy as np
import pytest

import primitives.tensor as tnp
import tidu
from primitives.tensor import optim
from tensor_helpers import numeric_grad

RTOL = 1e-10


def assert_tree_close(a, b, rtol=RTOL, atol=1e-12):
    la, lb = _leaves(a), _leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def _leaves(tree):
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in _leaves(tree[k])]
    if isinstance(tree, (tuple, list)):
        return [leaf for v in tree for leaf in _leaves(v)]
    return [tree]


def dot_product_test(f, primals, rng, rtol=1e-10):
    """``<ct, J t> == <J^T ct, t>`` for ``f`` at ``primals`` (a tuple of arrays), with
    random ``t`` and ``ct``, by ``tnp.jvp`` and ``tnp.vjp``."""
    tangents = tuple(rng.normal(size=np.shape(p)) for p in primals)
    out, jt = tnp.jvp(f, primals, tangents)
    out2, pullback = tnp.vjp(f, *primals)
    np.testing.assert_allclose(out, out2, rtol=1e-13)
    ct = rng.normal(size=np.shape(out))
    jtct = pullback(ct)
    lhs = np.sum(ct * np.asarray(jt))
    rhs = sum(np.sum(np.asarray(a) * t) for a, t in zip(jtct, tangents))
    assert abs(lhs - rhs) <= rtol * max(1.0, abs(lhs))


def fd_check(f, x, want, rtol=1e-6, atol=1e-8, eps=1e-6):
    np.testing.assert_allclose(want, numeric_grad(f, x, eps), rtol=rtol, atol=atol)


# ============================================================================================
# 1. A minibatch MLP classifier: jit(value_and_grad), Adam, integer labels
# ============================================================================================

D_IN, HIDDEN, CLASSES = 5, 8, 3


def mlp_data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(120, D_IN))
    Y = rng.integers(0, CLASSES, size=120)
    params = {"w0": rng.normal(size=(D_IN, HIDDEN)) / np.sqrt(D_IN), "b0": np.zeros(HIDDEN),
              "w1": rng.normal(size=(HIDDEN, CLASSES)) / np.sqrt(HIDDEN),
              "b1": np.zeros(CLASSES)}
    return rng, X, Y, params


def mlp_loss(M, logsumexp, class_weight):
    def loss(p, x, y):
        h = M.tanh(x @ p["w0"] + p["b0"])
        logits = h @ p["w1"] + p["b1"]
        nll = logsumexp(logits, axis=1) - logits[M.arange(x.shape[0]), y]
        weights = M.take(class_weight, y)          # the user's array, read at each call
        return M.sum(weights * nll) / M.sum(weights)
    return loss


def test_mlp_classifier_tidu_alone_retraces_only_for_new_shapes_and_reads_closures():
    rng, X, Y, params = mlp_data()
    class_weight = np.array([1.0, 2.0, 0.5])
    traces = []
    inner = mlp_loss(tnp, tnp.logsumexp, class_weight)

    def loss(p, x, y):
        traces.append(x.shape)                      # runs only while jit traces
        return inner(p, x, y)

    opt = optim.adam(0.05)

    @tnp.jit
    def step(p, s, x, y):
        value, g = tnp.value_and_grad(loss)(p, x, y)
        updates, s = opt.update(g, s, p)
        return optim.apply_updates(p, updates), s, value, g

    p, s = params, opt.init(params)
    for k in range(4):                              # new labels each step, one shape
        idx = rng.choice(120, size=16, replace=False)
        new_p, s, value, g = step(p, s, X[idx], Y[idx])
        for name in p:                              # no result aliases an input
            assert not np.shares_memory(new_p[name], p[name])
            assert not np.shares_memory(g[name], p[name])
        p = new_p
    assert traces == [(16, D_IN)]
    step(p, s, X[:7], Y[:7])                        # a new batch size: one more trace
    assert traces == [(16, D_IN), (7, D_IN)]

    # the gradient at the last parameters against central differences (w1 and b0)
    x, y = X[:10], Y[:10]
    g = tnp.jit(tnp.grad(inner))(p, x, y)
    fd_check(lambda w: inner({**p, "w1": w}, x, y), p["w1"], g["w1"])
    fd_check(lambda b: inner({**p, "b0": b}, x, y), p["b0"], g["b0"])

    # the closed-over class weights are read at each call of the jitted gradient
    jitted = tnp.jit(tnp.value_and_grad(inner))
    before = jitted(p, x, y)
    class_weight[:] = [3.0, 1.0, 1.0]
    after = jitted(p, x, y)
    fresh = tnp.value_and_grad(inner)(p, x, y)
    assert not np.isclose(before[0], after[0])
    assert_tree_close(after, fresh, rtol=1e-13)


def test_mlp_classifier_matches_jax_step_by_step(jx):
    jax, jnp = jx
    rng, X, Y, params = mlp_data()
    class_weight = np.array([1.0, 2.0, 0.5])
    loss_t = mlp_loss(tnp, tnp.logsumexp, class_weight)
    loss_j = mlp_loss(jnp, jax.nn.logsumexp, jnp.asarray(class_weight))
    lr, b1, b2, eps = 0.05, 0.9, 0.999, 1e-8
    opt = optim.adam(lr)

    @tnp.jit
    def step_t(p, s, x, y):
        value, g = tnp.value_and_grad(loss_t)(p, x, y)
        updates, s = opt.update(g, s, p)
        return optim.apply_updates(p, updates), s, value

    @jax.jit
    def step_j(p, m, v, t, x, y):                   # Adam by hand, as optax writes it
        value, g = jax.value_and_grad(loss_j)(p, x, y)
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        p = jax.tree.map(lambda p, m, v: p - lr * (m / (1 - b1 ** t))
                         / (jnp.sqrt(v / (1 - b2 ** t)) + eps), p, m, v)
        return p, m, v, value

    pt, st = params, opt.init(params)
    pj = params
    mj = jax.tree.map(jnp.zeros_like, params)
    vj = jax.tree.map(jnp.zeros_like, params)
    for t in range(1, 7):
        size = 24 if t % 2 else 17                  # alternating batch shapes
        idx = rng.choice(120, size=size, replace=False)
        y = Y[idx].astype(np.int32 if t % 3 == 0 else np.int64)
        pt, st, lt = step_t(pt, st, X[idx], y)
        pj, mj, vj, lj = step_j(pj, mj, vj, t, X[idx], y)
        np.testing.assert_allclose(lt, lj, rtol=1e-12)
        assert_tree_close(pt, pj, rtol=1e-9)

    # negative labels index from the end, as in NumPy and JAX
    y = np.array([-1, 0, -2, 1, 2])
    assert_tree_close(tnp.jit(tnp.value_and_grad(loss_t))(pt, X[:5], y),
                      jax.value_and_grad(loss_j)(pj, X[:5], y), rtol=1e-9)

    # per-example gradients with a scalar label per example: jit(vmap(grad))
    def one(M, lse):
        def f(p, xi, yi):
            h = M.tanh(xi @ p["w0"] + p["b0"])
            logits = h @ p["w1"] + p["b1"]
            return lse(logits) - logits[yi]
        return f
    per_t = tnp.jit(tnp.vmap(tnp.grad(one(tnp, tnp.logsumexp)), in_axes=(None, 0, 0)))
    per_j = jax.vmap(jax.grad(one(jnp, jax.nn.logsumexp)), in_axes=(None, 0, 0))
    assert_tree_close(per_t(pt, X[:6], Y[:6]), per_j(pj, X[:6], Y[:6]), rtol=1e-9)


# ============================================================================================
# 2. DP-SGD: per-example gradients, clipping by global norm, noise
# ============================================================================================

CLIP = 0.5


def dp_program(M, vmap, grad):
    def example_loss(p, x, t):
        z = x @ p["w"] + p["b"]
        return M.logaddexp(0.0, z) - t * z

    def private_grad(p, X, y, noise):
        g = vmap(grad(example_loss), in_axes=(None, 0, 0))(p, X, y)
        sq = sum(M.sum(M.reshape(v, (v.shape[0], -1)) ** 2, axis=1) for v in g.values())
        scale = M.minimum(1.0, CLIP / M.sqrt(sq))
        clipped = {k: M.sum(v * M.reshape(scale, (-1,) + (1,) * (v.ndim - 1)), axis=0)
                   for k, v in g.items()}
        return {k: (clipped[k] + noise[k]) / X.shape[0] for k in clipped}

    def meta(p, X, y, noise):                       # a scalar of the private gradient
        out = private_grad(p, X, y, noise)
        return M.sum(out["w"] ** 2) + out["b"]
    return example_loss, private_grad, meta


def dp_data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(10, 4))
    y = (rng.random(10) > 0.5).astype(np.float64)
    params = {"w": rng.normal(size=4), "b": np.array(0.1)}
    zero = {"w": np.zeros(4), "b": np.array(0.0)}
    return X, y, params, zero


def test_dp_sgd_tidu_alone():
    X, y, params, zero = dp_data()
    example_loss, private_grad, meta = dp_program(tnp, tnp.vmap, tnp.grad)
    per = tnp.jit(tnp.vmap(tnp.grad(example_loss), in_axes=(None, 0, 0)))(params, X, y)
    for i in range(len(X)):                         # each row is that example's gradient
        assert_tree_close({k: v[i] for k, v in per.items()},
                          tnp.grad(example_loss)(params, X[i], y[i]), rtol=1e-13)
    norms = np.sqrt(sum(np.sum(v.reshape(len(X), -1) ** 2, axis=1) for v in per.values()))
    want = {k: np.sum(v * np.minimum(1.0, CLIP / norms).reshape((-1,) + (1,) * (v.ndim - 1)),
                      axis=0) / len(X) for k, v in per.items()}
    private = tnp.jit(private_grad)
    assert_tree_close(private(params, X, y, zero), want, rtol=1e-13)

    tnp.random.seed(3)                              # noise drawn outside, passed in
    noise = {"w": tnp.random.normal(0.0, CLIP, size=4),
             "b": np.asarray(tnp.random.normal(0.0, CLIP))}
    noisy = private(params, X, y, noise)
    assert_tree_close(noisy, {k: want[k] + noise[k] / len(X) for k in want}, rtol=1e-12)
    assert not any(np.shares_memory(noisy[k], noise[k]) for k in noise)

    # second order through the clipping: grad(jit(meta)) against finite differences
    g = tnp.grad(tnp.jit(meta))(params, X, y, zero)
    fd_check(lambda w: meta({"w": w, "b": params["b"]}, X, y, zero), params["w"], g["w"])
    fd_check(lambda b: meta({"w": params["w"], "b": b}, X, y, zero), params["b"], g["b"])


def test_dp_sgd_matches_jax(jx):
    jax, jnp = jx
    X, y, params, zero = dp_data()
    _, private_t, meta_t = dp_program(tnp, tnp.vmap, tnp.grad)
    _, private_j, meta_j = dp_program(jnp, jax.vmap, jax.grad)
    pt, pj = tnp.jit(private_t), jax.jit(private_j)
    assert_tree_close(pt(params, X, y, zero), pj(params, X, y, zero), rtol=1e-12)
    assert_tree_close(pt(params, X[:7], y[:7], zero), pj(params, X[:7], y[:7], zero),
                      rtol=1e-12)                   # a new batch size
    gt = tnp.jit(tnp.grad(tnp.jit(meta_t)))(params, X, y, zero)
    gj = jax.jit(jax.grad(meta_j))(params, X, y, zero)
    assert_tree_close(gt, gj, rtol=1e-10)


# ============================================================================================
# 3. A neural ODE fit with odeint
# ============================================================================================

ODE_T = np.linspace(0.0, 2.0, 9)
ODE_Y0 = np.array([2.0, 0.0])
ODE_TARGET = (np.stack([np.cos(2 * ODE_T), -np.sin(2 * ODE_T)], 1)
              * 2 * np.exp(-0.1 * ODE_T)[:, None])


def ode_params():
    rng = np.random.default_rng(2)
    return (0.5 * rng.normal(size=(2, 6)), 0.1 * rng.normal(size=6),
            0.5 * rng.normal(size=(6, 2)))


def ode_program(M, odeint):
    def field(y, t, w1, b1, w2):
        return M.tanh(y @ w1 + b1) @ w2 + 0.1 * M.sin(t) * y

    def loss(w1, b1, w2, y0, t):
        ys = odeint(field, y0, t, w1, b1, w2, rtol=1e-10, atol=1e-10)
        return M.mean((ys - ODE_TARGET[:len(t)]) ** 2)
    return loss


def test_neural_ode_tidu_alone_against_finite_differences():
    params = ode_params()
    loss = ode_program(tnp, tnp.odeint)
    value, grads = tnp.jit(tnp.value_and_grad(loss, argnums=(0, 1, 2, 3, 4)))(
        *params, ODE_Y0, ODE_T)
    assert np.isclose(value, loss(*params, ODE_Y0, ODE_T), rtol=1e-13)
    fd_check(lambda b: loss(params[0], b, params[2], ODE_Y0, ODE_T), params[1], grads[1],
             rtol=1e-5, eps=1e-5)
    fd_check(lambda y0: loss(*params, y0, ODE_T), ODE_Y0, grads[3], rtol=1e-5, eps=1e-5)
    fd_check(lambda t: loss(*params, ODE_Y0, t), ODE_T, grads[4], rtol=1e-5, atol=1e-7,
             eps=1e-5)


def test_neural_ode_jit_reads_a_mutated_closure_each_call():
    t = np.linspace(0.0, 1.0, 4)
    k = np.array([0.5, 1.5])
    field = lambda y, s, a: -a * y * k + tnp.sin(s)         # k: read from the closure
    loss = lambda y0, a: tnp.sum(tnp.odeint(field, y0, t, a, rtol=1e-11, atol=1e-11) ** 2)
    jitted = tnp.jit(tnp.grad(loss, argnums=1))
    y0 = np.array([1.0, 2.0])
    before = jitted(y0, 0.7)
    k[:] = [2.0, 3.0]
    after = jitted(y0, 0.7)
    assert not np.isclose(before, after)
    np.testing.assert_allclose(after, tnp.grad(loss, argnums=1)(y0, 0.7), rtol=1e-13)


def test_neural_ode_matches_jax(jx):
    jax, jnp = jx
    from jax.experimental.ode import odeint as jodeint
    params = ode_params()
    vt, gt = tnp.jit(tnp.value_and_grad(ode_program(tnp, tnp.odeint), argnums=(0, 1, 2, 3, 4)))(
        *params, ODE_Y0, ODE_T)
    vj, gj = jax.value_and_grad(ode_program(jnp, jodeint), argnums=(0, 1, 2, 3, 4))(
        *params, ODE_Y0, ODE_T)
    # two different adaptive solvers at tolerance 1e-10 (tidu's is the closer to a DOP853
    # reference at 1e-13): agreement to ~1e-8 relative
    np.testing.assert_allclose(vt, vj, rtol=1e-7)
    for a, b in zip(gt, gj):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)

    # per-initial-condition gradients: vmap(grad) and jit(vmap(grad))
    t = np.linspace(0.0, 1.0, 4)
    scale = np.array([0.5, 1.5])
    ft = lambda y, s, a: -a * y * scale + tnp.sin(s)
    fj = lambda y, s, a: -a * y * scale + jnp.sin(s)
    lt = lambda y0, a: tnp.sum(tnp.odeint(ft, y0, t, a, rtol=1e-11, atol=1e-11) ** 2)
    lj = lambda y0, a: jnp.sum(jodeint(fj, y0, t, a, rtol=1e-11, atol=1e-11) ** 2)
    y0s = np.array([[1.0, 2.0], [0.5, -1.0], [0.0, 0.3]])
    got = tnp.jit(tnp.vmap(tnp.grad(lt, argnums=(0, 1)), in_axes=(0, None)))(y0s, 0.7)
    want = jax.vmap(jax.grad(lj, argnums=(0, 1)), in_axes=(0, None))(y0s, 0.7)
    assert_tree_close(got, want, rtol=1e-8, atol=1e-9)


def test_neural_ode_pytree_params_gradient():
    t = np.linspace(0.0, 1.0, 3)
    loss = lambda p: tnp.sum(tnp.odeint(lambda y, s, p: -p["k"] * y, np.array([1.0, 0.5]), t, p))
    k = np.array([0.7, 1.3])
    g = tnp.grad(loss)({"k": k})
    np.testing.assert_allclose(g["k"], [-0.84892935, -0.26677735], rtol=1e-7)   # JAX's
    fd_check(lambda kk: loss({"k": kk}), k, g["k"], rtol=1e-5)
    # a tuple of arguments, and a tuple as one argument
    pair = lambda a, b: tnp.sum(tnp.odeint(lambda y, s, a, b: -a * y + b, np.ones(2), t, a, b))
    ga, gb = tnp.grad(pair, argnums=(0, 1))(0.7, np.array([0.1, 0.2]))
    fd_check(lambda a: pair(a, np.array([0.1, 0.2])), np.array(0.7), ga, rtol=1e-5)
    fd_check(lambda b: pair(0.7, b), np.array([0.1, 0.2]), gb, rtol=1e-5)
    nested = lambda p: tnp.sum(tnp.odeint(lambda y, s, p: -p[0] * y + p[1][0], np.ones(2), t, p))
    g0, (g1,) = tnp.grad(nested)((0.7, (np.array([0.1, 0.2]),)))
    fd_check(lambda a: nested((a, (np.array([0.1, 0.2]),))), np.array(0.7), g0, rtol=1e-5)


def test_neural_ode_integer_argument_is_a_constant():
    t = np.linspace(0.0, 1.0, 3)
    loss = lambda a: tnp.sum(tnp.odeint(lambda y, s, a, n: -a * y ** n,
                                        np.array([1.0, 0.5]), t, a, 2))
    fd_check(loss, np.array(0.7), tnp.grad(loss)(np.array(0.7)), rtol=1e-5)


def test_neural_ode_forward_mode_error_names_odeint():
    t = np.linspace(0.0, 1.0, 3)
    loss = lambda a: tnp.sum(tnp.odeint(lambda y, s, a: -a * y, np.ones(2), t, a))
    with pytest.raises(tidu.TiduError, match="odeint"):
        tnp.hessian(loss)(0.5)


# ============================================================================================
# 4. Bayesian logistic regression: MAP, Laplace evidence, Langevin chains
# ============================================================================================


def blr_data():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 3))
    y = (rng.random(40) < 1 / (1 + np.exp(-X @ np.array([1.0, -2.0, 0.5])))).astype(float)
    return rng, X, y


def blr_program(M, grad, hessian, linalg, prior_precision):
    def log_post(w, X, y):
        z = X @ w
        return (M.sum(y * z - M.logaddexp(0.0, z))
                - 0.5 * prior_precision * M.sum(w ** 2))

    def newton(w, X, y):
        return w - linalg.solve(hessian(log_post)(w, X, y), grad(log_post)(w, X, y))

    def laplace(w, X, y):
        H = -hessian(log_post)(w, X, y)
        L = linalg.cholesky(H)
        _, logdet = linalg.slogdet(H)
        log_evidence = log_post(w, X, y) + 0.5 * w.shape[0] * M.log(2 * M.pi) - 0.5 * logdet
        cov = linalg.solve(L.T, linalg.solve(L, M.eye(w.shape[0])))
        return log_evidence, cov, 2 * M.sum(M.log(M.diagonal(L)))

    def langevin(steps, eps):
        def run(w, noise, X, y):
            for k in range(steps):                  # a scan, unrolled
                w = w + 0.5 * eps * grad(log_post)(w, X, y) + M.sqrt(eps) * noise[k]
            return w
        return run
    return log_post, newton, laplace, langevin


def test_bayesian_logistic_regression_tidu_alone():
    rng, X, y = blr_data()
    prior = np.array(1.0)
    log_post, newton, laplace, langevin = blr_program(tnp, tnp.grad, tnp.hessian, tnp.linalg,
                                                      prior)
    step = tnp.jit(newton)
    w = np.zeros(3)
    for _ in range(8):
        w = step(w, X, y)
    assert np.max(np.abs(tnp.grad(log_post)(w, X, y))) < 1e-10     # the MAP
    H = tnp.jit(tnp.hessian(log_post))(w, X, y)
    np.testing.assert_allclose(H, H.T, rtol=1e-14)
    for i in range(3):                              # the Hessian's rows by differences
        fd_check(lambda v: tnp.grad(log_post)(v, X, y)[i], w, H[i], rtol=1e-6)
    log_evidence, cov, logdet = tnp.jit(laplace)(w, X, y)
    np.testing.assert_allclose(cov, np.linalg.inv(-H), rtol=1e-12)
    np.testing.assert_allclose(logdet, np.linalg.slogdet(-H)[1], rtol=1e-12)
    # third order: the log evidence's gradient in w, against differences
    g = tnp.grad(lambda v: laplace(v, X, y)[0])(w)
    fd_check(lambda v: laplace(v, X, y)[0], w, g, rtol=1e-6)
    dot_product_test(lambda v: tnp.grad(log_post)(v, X, y), (w,), rng)

    chains = tnp.jit(tnp.vmap(langevin(10, 0.01), in_axes=(0, 0, None, None)))
    w0s, noise = rng.normal(size=(4, 3)), rng.normal(size=(4, 10, 3))
    out = chains(w0s, noise, X, y)
    for c in range(4):
        np.testing.assert_allclose(out[c], langevin(10, 0.01)(w0s[c], noise[c], X, y),
                                   rtol=1e-13)
    assert not np.shares_memory(out, w0s)
    prior[...] = 5.0                                # the closed-over prior, mutated
    out5 = chains(w0s, noise, X, y)
    assert not np.allclose(out5, out)
    np.testing.assert_allclose(out5[0], langevin(10, 0.01)(w0s[0], noise[0], X, y),
                               rtol=1e-13)


def test_bayesian_logistic_regression_matches_jax(jx):
    jax, jnp = jx
    rng, X, y = blr_data()
    prior = np.array(1.0)
    _, newton_t, laplace_t, langevin_t = blr_program(tnp, tnp.grad, tnp.hessian, tnp.linalg,
                                                     prior)
    _, newton_j, laplace_j, langevin_j = blr_program(jnp, jax.grad, jax.hessian, jnp.linalg,
                                                     1.0)
    st, sj = tnp.jit(newton_t), jax.jit(newton_j)
    wt = wj = np.zeros(3)
    for _ in range(6):
        wt, wj = st(wt, X, y), sj(wj, X, y)
        np.testing.assert_allclose(wt, wj, rtol=1e-12)
    assert_tree_close(tnp.jit(laplace_t)(wt, X, y), jax.jit(laplace_j)(wj, X, y), rtol=1e-12)
    gt = tnp.grad(lambda v: laplace_t(v, X, y)[0])(wt)
    gj = jax.jit(jax.grad(lambda v: laplace_j(v, X, y)[0]))(wj)
    np.testing.assert_allclose(gt, gj, rtol=1e-10, atol=1e-12)

    w0s, noise = rng.normal(size=(6, 3)), rng.normal(size=(6, 15, 3))
    ct = tnp.jit(tnp.vmap(langevin_t(15, 0.01), in_axes=(0, 0, None, None)))
    cj = jax.jit(jax.vmap(langevin_j(15, 0.01), in_axes=(0, 0, None, None)))
    np.testing.assert_allclose(ct(w0s, noise, X, y), cj(w0s, noise, X, y), rtol=1e-12)
    np.testing.assert_allclose(ct(w0s[:2], noise[:2], X[:30], y[:30]),      # new shapes
                               cj(w0s[:2], noise[:2], X[:30], y[:30]), rtol=1e-12)


# ============================================================================================
# 5. A Gaussian-process hyperparameter fit
# ============================================================================================


def gp_data():
    rng = np.random.default_rng(5)
    X = rng.uniform(-2, 2, size=(12, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=12)
    return rng, X, y


def gp_nll(M, cho_solve):
    def nll(theta, X, y):
        ls, sf, sn = M.exp(theta[0]), M.exp(theta[1]), M.exp(theta[2])
        d2 = M.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
        K = sf ** 2 * M.exp(-0.5 * d2 / ls ** 2) + (sn ** 2 + 1e-8) * M.eye(X.shape[0])
        L = M.linalg.cholesky(K)
        alpha = cho_solve(L, y)
        return (0.5 * y @ alpha + M.sum(M.log(M.diagonal(L)))
                + 0.5 * X.shape[0] * M.log(2 * M.pi))
    return nll


def tnp_cho_solve(L, b):                            # tnp has no scipy.linalg.cho_solve
    return tnp.linalg.solve(L.T, tnp.linalg.solve(L, b))


THETA = np.array([0.0, 0.0, -1.0])


def test_gp_fit_tidu_alone():
    rng, X, y = gp_data()
    nll = gp_nll(tnp, tnp_cho_solve)
    value_and_grad = tnp.jit(tnp.value_and_grad(nll))
    theta = THETA.copy()
    values = []
    for _ in range(10):
        value, g = value_and_grad(theta, X, y)
        values.append(float(value))
        theta = theta - 0.05 * g
    assert values[-1] < values[0]
    fd_check(lambda th: nll(th, X, y), theta, value_and_grad(theta, X, y)[1], rtol=1e-6)
    H = tnp.jacfwd(tnp.jacrev(nll))(theta, X, y)
    np.testing.assert_allclose(H, H.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(H, tnp.jit(tnp.jacrev(tnp.jacfwd(nll)))(theta, X, y),
                               rtol=1e-10, atol=1e-12)
    H7 = tnp.jit(tnp.hessian(nll))(theta, X[:7], y[:7])      # jit at a new shape
    np.testing.assert_allclose(H7, tnp.jacfwd(tnp.jacrev(nll))(theta, X[:7], y[:7]),
                               rtol=1e-10, atol=1e-12)
    for i in range(3):
        fd_check(lambda th: tnp.grad(nll)(th, X, y)[i], theta, H[i], rtol=1e-5, atol=1e-7)
    dot_product_test(lambda X_: tnp.grad(nll)(theta, X_, y), (X,), rng)
    grid = rng.normal(size=(4, 3)) * 0.3
    per = tnp.vmap(tnp.jacfwd(nll), in_axes=(0, None, None))(grid, X, y)
    for i in range(4):
        np.testing.assert_allclose(per[i], tnp.grad(nll)(grid[i], X, y), rtol=1e-11)


def test_gp_fit_matches_jax(jx):
    jax, jnp = jx
    import jax.scipy.linalg as jsl
    rng, X, y = gp_data()
    nll_t = gp_nll(tnp, tnp_cho_solve)
    nll_j = gp_nll(jnp, lambda L, b: jsl.cho_solve((L, True), b))
    vg_t, vg_j = tnp.jit(tnp.value_and_grad(nll_t)), jax.jit(jax.value_and_grad(nll_j))
    tt = tj = THETA
    for _ in range(10):
        (lt, gt), (lj, gj) = vg_t(tt, X, y), vg_j(tj, X, y)
        np.testing.assert_allclose(lt, lj, rtol=1e-12)
        np.testing.assert_allclose(gt, gj, rtol=1e-10, atol=1e-12)
        tt, tj = tt - 0.05 * gt, tj - 0.05 * gj
    hess_j = jax.jit(jax.hessian(nll_j))
    np.testing.assert_allclose(tnp.jacfwd(tnp.jacrev(nll_t))(tt, X, y), hess_j(tj, X, y),
                               rtol=1e-10, atol=1e-12)
    grid = rng.normal(size=(5, 3)) * 0.3
    np.testing.assert_allclose(
        tnp.vmap(tnp.jacfwd(nll_t), in_axes=(0, None, None))(grid, X, y),
        jax.jit(jax.vmap(jax.jacfwd(nll_j), in_axes=(0, None, None)))(grid, X, y),
        rtol=1e-10, atol=1e-12)
    Xs = rng.uniform(-2, 2, size=(4, 12, 1))
    ys = np.sin(Xs[..., 0])
    np.testing.assert_allclose(
        tnp.jit(tnp.vmap(tnp.hessian(nll_t), in_axes=(None, 0, 0)))(THETA, Xs, ys),
        jax.jit(jax.vmap(jax.hessian(nll_j), in_axes=(None, 0, 0)))(THETA, Xs, ys),
        rtol=1e-10, atol=1e-12)
    gx_t = tnp.grad(nll_t, argnums=(1, 2))(THETA, X, y)
    gx_j = jax.jit(jax.grad(nll_j, argnums=(1, 2)))(THETA, X, y)
    assert_tree_close(gx_t, gx_j, rtol=1e-10)


# ============================================================================================
# 6. A scan-like recurrent loop: custom_jvp softplus, checkpoint, stop_gradient, safe where
# ============================================================================================


def softplus_of(M, custom_jvp):
    @custom_jvp
    def softplus(x):                                # stable log1p(exp(x))
        return M.log1p(M.exp(-M.abs(x))) + M.maximum(x, 0.0)

    @softplus.defjvp
    def softplus_jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        return softplus(x), dx / (1 + M.exp(-x))
    return softplus


def safe_log_of(M):
    def safe_log(x):                                # the double-where trick
        ok = x > 0
        return M.where(ok, M.log(M.where(ok, x, 1.0)), 0.0)
    return safe_log


def rnn_program(M, custom_jvp, checkpoint, stop_gradient):
    softplus, safe_log = softplus_of(M, custom_jvp), safe_log_of(M)

    def cell(h, x, W, U):
        return M.tanh(h @ W + x @ U)
    cell = checkpoint(cell)

    def loss(W, U, xs, h0):
        h, total = h0, 0.0
        for t in range(xs.shape[0]):               # lax.scan, unrolled
            h = cell(h, xs[t], W, U)
            total = total + M.sum(softplus(4.0 * h) * safe_log(h + 0.5)) \
                * stop_gradient(M.mean(h ** 2))
        return total
    return loss


def rnn_data():
    rng = np.random.default_rng(6)
    return (rng, 0.5 * rng.normal(size=(4, 4)), rng.normal(size=(3, 4)),
            rng.normal(size=(6, 2, 3)), np.zeros((2, 4)))


XS_EDGE = np.array([-800.0, -30.0, -3.0, 0.0, 2.0, 30.0, 800.0])


def test_scan_like_loop_tidu_alone():
    rng, W, U, xs, h0 = rnn_data()
    softplus = softplus_of(tnp, tnp.custom_jvp)
    with np.errstate(over="ignore", invalid="ignore"):
        d1 = tnp.jit(tnp.vmap(tnp.grad(softplus)))(XS_EDGE)
        np.testing.assert_allclose(d1, 1 / (1 + np.exp(-XS_EDGE)), rtol=1e-14)
    np.testing.assert_allclose(softplus(XS_EDGE), np.logaddexp(0.0, XS_EDGE), rtol=1e-14)
    safe_log = safe_log_of(tnp)
    g = tnp.grad(lambda v: tnp.sum(safe_log(v)))(np.array([-1.0, 0.0, 0.5, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 2.0, 0.5])   # finite where the log is cut

    loss = rnn_program(tnp, tnp.custom_jvp, tnp.checkpoint, tnp.stop_gradient)
    plain = rnn_program(tnp, tnp.custom_jvp, lambda f: f, tnp.stop_gradient)
    vg = tnp.jit(tnp.value_and_grad(loss, argnums=(0, 1)))
    value, (gW, gU) = vg(W, U, xs, h0)
    assert_tree_close(vg(W, U, xs, h0), tnp.value_and_grad(plain, argnums=(0, 1))(W, U, xs, h0),
                      rtol=1e-13)                   # checkpoint changes nothing
    assert np.all(np.isfinite(gW)) and np.all(np.isfinite(gU))
    # stop_gradient: differences of a loss whose stopped factor is frozen at W
    frozen = lambda W_: _rnn_frozen_loss(W_, U, xs, h0, W)
    fd_check(frozen, W, gW, rtol=1e-6)
    dot_product_test(lambda W_: tnp.grad(loss)(W_, U, xs, h0), (W,), rng, rtol=1e-9)
    vg(W, U, xs[:3], h0[:1])                        # new sequence length and batch


def _rnn_frozen_loss(W, U, xs, h0, W_stop):
    """The RNN loss in NumPy with ``stop_gradient``'s factor computed at ``W_stop``."""
    h, hs, total = h0, h0, 0.0
    for t in range(xs.shape[0]):
        h, hs = np.tanh(h @ W + xs[t] @ U), np.tanh(hs @ W_stop + xs[t] @ U)
        safe = np.where(h + 0.5 > 0, np.log(np.where(h + 0.5 > 0, h + 0.5, 1.0)), 0.0)
        total = total + np.sum(np.logaddexp(0.0, 4.0 * h) * safe) * np.mean(hs ** 2)
    return total


def test_scan_like_loop_matches_jax(jx):
    jax, jnp = jx
    rng, W, U, xs, h0 = rnn_data()
    sp_t, sp_j = softplus_of(tnp, tnp.custom_jvp), softplus_of(jnp, jax.custom_jvp)
    with np.errstate(over="ignore", invalid="ignore"):
        np.testing.assert_allclose(tnp.vmap(tnp.grad(tnp.grad(sp_t)))(XS_EDGE),
                                   jax.vmap(jax.grad(jax.grad(sp_j)))(XS_EDGE),
                                   rtol=1e-12, atol=1e-300)
    lt = rnn_program(tnp, tnp.custom_jvp, tnp.checkpoint, tnp.stop_gradient)
    lj = rnn_program(jnp, jax.custom_jvp, jax.checkpoint, jax.lax.stop_gradient)
    vg_t = tnp.jit(tnp.value_and_grad(lt, argnums=(0, 1)))
    vg_j = jax.jit(jax.value_and_grad(lj, argnums=(0, 1)))
    assert_tree_close(vg_t(W, U, xs, h0), vg_j(W, U, xs, h0), rtol=1e-11)
    assert_tree_close(vg_t(W, U, xs[:3], h0[:1]), vg_j(W, U, xs[:3], h0[:1]), rtol=1e-11)
    v = rng.normal(size=W.shape)                    # a Hessian-vector product, jvp(grad)
    zeros = (np.zeros_like(U), np.zeros_like(xs), np.zeros_like(h0))
    ht = tnp.jvp(tnp.grad(lt), (W, U, xs, h0), (v, *zeros))[1]
    hj = jax.jit(lambda *a: jax.jvp(jax.grad(lj), a, (v, *zeros))[1])(W, U, xs, h0)
    np.testing.assert_allclose(ht, hj, rtol=1e-10, atol=1e-12)
    # per-sequence gradients: grad(jit(...)) inside vmap over a batch of h0s
    h0s = np.stack([h0, h0 + 0.1])
    per_t = tnp.vmap(tnp.grad(tnp.jit(lt)), in_axes=(None, None, None, 0))(W, U, xs, h0s)
    per_j = jax.jit(jax.vmap(jax.grad(lj), in_axes=(None, None, None, 0)))(W, U, xs, h0s)
    np.testing.assert_allclose(per_t, per_j, rtol=1e-11, atol=1e-13)
