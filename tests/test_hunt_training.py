"""A hostile sweep of the training-side surface: ``nn``, ``optim`` (and
``misc.optimizers``), ``linalg`` and ``fft``.

The first part holds regressions (each test failed before its fix); the second, the
checks of the sweep that found nothing wrong, kept so that they stay so: derivatives
against central finite differences in float64 and against JAX (real inputs) or PyTorch
(complex inputs: tidu's convention is PyTorch's), the jvp/vjp dot-product test, and
``jit``/``vmap`` against eager.
"""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import nn, optim
from primitives.tensor.misc import optimizers as misc_optimizers
from primitives.tensor.transforms.pytree import tree_flatten
from tidu import TiduError

L = tnp.linalg
RNG = np.random.default_rng(20240611)


def _fd_grad(f, x, eps=1e-6):
    """Central finite differences of a real scalar ``f`` at real ``x``."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (float(f(up)) - float(f(down))) / (2 * eps)
    return g


def _fd_grad_complex(f, z, eps=1e-6):
    """tidu's (PyTorch's) gradient of a real ``f`` at complex ``z``: d/dRe + i d/dIm."""
    real = _fd_grad(lambda y: f(y + 1j * z.imag), z.real.copy(), eps)
    imag = _fd_grad(lambda y: f(z.real + 1j * y), z.imag.copy(), eps)
    return real + 1j * imag


def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


def _leaves(tree):
    return [x for x in tree_flatten(tree)[0] if isinstance(x, np.ndarray)]


# ============================================================================================
# Regressions
# ============================================================================================


# --- linalg.pinv(hermitian=True): the derivative of the matrix NumPy reads ---------------------


def test_pinv_hermitian_gradient_is_that_of_the_lower_triangle():
    # pinv(a, hermitian=True) is the pseudo-inverse of the Hermitian matrix read from a's
    # lower triangle; its JVP used the raw (non-symmetric) a in the Golub-Pereyra formula
    a = RNG.standard_normal((3, 3))
    c = np.cos(np.arange(9.0)).reshape(3, 3)

    def f(x):
        return tnp.sum(L.pinv(x, hermitian=True) * c)

    got = tnp.grad(f)(a)
    np.testing.assert_allclose(got, _fd_grad(f, a), atol=1e-6)
    # the same function written out: inv of the Hermitian matrix of the lower triangle
    written_out = tnp.grad(lambda x: tnp.sum(L.inv(tnp.tril(x) + tnp.tril(x, -1).T) * c))(a)
    np.testing.assert_allclose(got, written_out, atol=1e-10)
    np.testing.assert_allclose(tnp.jit(tnp.grad(f))(a), got, atol=1e-10)


def test_pinv_hermitian_gradient_of_a_complex_matrix():
    z = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
    w = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))

    def f(x):
        return tnp.sum(tnp.real(L.pinv(x, hermitian=True) * w))

    np.testing.assert_allclose(tnp.grad(f)(z), _fd_grad_complex(f, z), atol=1e-6)


def test_pinv_hermitian_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((3, 3))
    c = np.cos(np.arange(9.0)).reshape(3, 3)
    xt = torch.tensor(a, requires_grad=True)
    hermitian = xt.tril() + xt.tril(-1).T
    (torch.linalg.pinv(hermitian, hermitian=True) * torch.tensor(c)).sum().backward()
    got = tnp.grad(lambda x: tnp.sum(L.pinv(x, hermitian=True) * c))(a)
    np.testing.assert_allclose(got, xt.grad.numpy(), atol=1e-8)


# --- linalg: empty arrays and singular matrices as NumPy -------------------------------------


@pytest.mark.parametrize("name", ["eig", "eigvals"])
def test_eig_of_an_empty_stack_is_numpys(name):
    a = np.zeros((0, 2, 2))
    got, want = getattr(L, name)(a), getattr(np.linalg, name)(a)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        assert np.asarray(g).shape == w.shape and np.asarray(g).dtype == w.dtype


@pytest.mark.parametrize("shape", [(0, 0), (0, 2), (2, 0)])
@pytest.mark.parametrize("ord", [1, 2, np.inf, None, "fro", "nuc", -np.inf])
def test_norms_of_empty_matrices_are_numpys(shape, ord):
    x = np.zeros(shape)
    for keepdims in (False, True):
        try:
            want = np.linalg.norm(x, ord, keepdims=keepdims)
        except (ValueError, np.linalg.LinAlgError):
            with pytest.raises(TiduError):
                L.norm(x, ord, keepdims=keepdims)
            continue
        got = np.asarray(L.norm(x, ord, keepdims=keepdims))
        assert got.shape == np.shape(want)
        np.testing.assert_array_equal(got, want)


def test_vector_inf_norm_of_an_empty_vector_is_zero():
    assert float(L.norm(np.zeros(0), np.inf)) == np.linalg.norm(np.zeros(0), np.inf) == 0.0
    got = L.norm(np.zeros((3, 0)), np.inf, axis=1)
    np.testing.assert_array_equal(got, np.linalg.norm(np.zeros((3, 0)), np.inf, axis=1))


def test_norm_keeps_float16_as_numpy():
    x = np.array([[1.0, -2.0], [3.0, 0.5]], np.float16)
    for ord, axis in ((None, None), (1, None), (np.inf, None), ("fro", None), (3, 1), (0, 0)):
        got, want = L.norm(x, ord, axis), np.linalg.norm(x, ord, axis)
        assert np.asarray(got).dtype == np.float16
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                                   rtol=2e-3)
    with pytest.raises(TiduError, match="float16"):      # NumPy refuses it for the SVD norms
        L.norm(x, 2)


@pytest.mark.parametrize("p", [1, -1, np.inf, -np.inf, "fro", "nuc"])
def test_cond_of_a_singular_matrix_is_inf_as_numpy(p):
    x = np.stack([np.eye(2) + 0.3, np.ones((2, 2))])
    want = np.array([np.linalg.cond(x[0], p), np.inf])
    if p != "nuc":          # (NumPy's own fails for "nuc": an SVD of its NaN inverse)
        np.testing.assert_array_equal(np.linalg.cond(x, p), want)
    for got in (L.cond(x, p), tnp.jit(lambda v: L.cond(v, p))(x),
                tnp.vmap(lambda v: L.cond(v, p))(x)):
        np.testing.assert_allclose(got, want)
    # the derivative at the invertible matrix is unchanged, and finite (zero) at the other
    g = tnp.grad(lambda v: tnp.sum(L.cond(v, p)))(x)
    np.testing.assert_allclose(g[0], tnp.grad(lambda v: L.cond(v, p))(x[0]), atol=1e-12)
    np.testing.assert_array_equal(g[1], 0.0)


def test_cond_of_an_invertible_matrix_differentiates_as_jax():
    jax = _jax()
    a = RNG.standard_normal((3, 3))
    for p in (1, np.inf, "fro", "nuc"):
        got = tnp.grad(lambda v: L.cond(v, p))(a)
        want = np.asarray(jax.grad(lambda v: jax.numpy.linalg.cond(v, p))(a))
        np.testing.assert_allclose(got, want, atol=1e-8)
        np.testing.assert_allclose(got, _fd_grad(lambda v: L.cond(v, p), a), atol=1e-5)


# --- fft.fftshift: a new array, always ---------------------------------------------------------


@pytest.mark.parametrize("shape, axes", [((1,), None), ((1, 3), 0), ((4, 1), (1,)), ((0,), None)])
def test_fftshift_that_moves_nothing_still_copies(shape, axes):
    x = np.arange(float(np.prod(shape))).reshape(shape)
    for fn in (tnp.fft.fftshift, tnp.fft.ifftshift):
        out = fn(x, axes)
        assert not np.shares_memory(out, x)
        np.testing.assert_array_equal(out, getattr(np.fft, fn.__name__)(x, axes))
    t = tnp.tensor(x, requires_grad=True)
    y = tnp.fft.fftshift(t, axes)
    assert y is not t
    tnp.sum(y * 3.0).backward()
    np.testing.assert_array_equal(t.grad, np.full(shape, 3.0))


# --- nn: the softmax family and logsumexp of empty arrays -------------------------------------


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "standardize"])
@pytest.mark.parametrize("shape, axis", [((0, 3), 0), ((0, 3), -1), ((2, 0), -1), ((2, 0), None)])
def test_softmax_family_of_empty_arrays_as_jax(name, shape, axis):
    jax = _jax()
    x = np.zeros(shape)
    want = np.asarray(getattr(jax.nn, name)(jax.numpy.asarray(x), axis=axis))
    for got in (getattr(nn, name)(x, axis=axis),
                tnp.jit(lambda v: getattr(nn, name)(v, axis=axis))(x)):
        assert np.asarray(got).shape == want.shape
    assert tnp.grad(lambda v: tnp.sum(getattr(nn, name)(v, axis=axis)))(x).shape == shape


@pytest.mark.parametrize("x, kwargs", [
    (np.zeros(0), dict(b=np.zeros(0))),
    (np.zeros((0, 3)), dict(axis=0, b=np.ones(3))),
    (np.zeros(0), dict(return_sign=True)),
    (np.zeros((2, 0)), dict(axis=1, b=np.ones((2, 0)), keepdims=True)),
])
def test_logsumexp_of_empty_arrays_with_b_or_sign_as_jax(x, kwargs):
    jax = _jax()
    got = nn.logsumexp(x, **kwargs)
    want = jax.nn.logsumexp(jax.numpy.asarray(x), **kwargs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert np.asarray(g).shape == np.shape(w)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


# --- optim: learning rates that are arrays (so they can be differentiated) -------------------


def test_learning_rate_may_be_a_scalar_array():
    params, grads = {"w": np.array([1.0, -2.0])}, {"w": np.array([0.5, 0.25])}
    for lr in (np.array(0.1), np.float32(0.1), np.array(0.1, np.float32)):
        opt = optim.sgd(lr)
        updates, _ = opt.update(grads, opt.init(params))
        np.testing.assert_allclose(updates["w"], [-0.05, -0.025], rtol=1e-6)
        assert updates["w"].dtype == np.float64
    with pytest.raises(optim.OptimizerError, match="real scalar"):
        optim.adam(np.array([0.1, 0.2]))
    with pytest.raises(optim.OptimizerError, match="learning_rate"):
        optim.adam("0.1")


def test_hypergradient_through_the_learning_rate():
    params, grads = {"w": np.array([1.0, -2.0])}, {"w": np.array([0.5, 0.25])}

    def loss_after_a_step(lr):
        opt = optim.adam(lr)
        updates, _ = opt.update(grads, opt.init(params), params)
        return tnp.sum(optim.apply_updates(params, updates)["w"] ** 2)

    # the first Adam step is -lr * g / (|g| + eps): the loss is (1 - lr)^2 + (2 + lr)^2
    for grad in (tnp.grad(loss_after_a_step), tnp.jit(tnp.grad(loss_after_a_step))):
        np.testing.assert_allclose(grad(0.1), 2 + 4 * 0.1, rtol=1e-6)
    np.testing.assert_allclose(tnp.grad(loss_after_a_step)(0.1),
                               _fd_grad(lambda v: loss_after_a_step(float(v)), np.array(0.1)),
                               rtol=1e-6)

    def sgd_momentum_loss(lr, momentum):
        opt = optim.sgd(lr, momentum=momentum)
        state = opt.init(params)
        p = params
        for _ in range(2):
            updates, state = opt.update(grads, state, p)
            p = optim.apply_updates(p, updates)
        return tnp.sum(p["w"] ** 2)

    got = tnp.grad(sgd_momentum_loss, argnums=(0, 1))(0.1, 0.9)
    want = (_fd_grad(lambda v: sgd_momentum_loss(float(v), 0.9), np.array(0.1)),
            _fd_grad(lambda v: sgd_momentum_loss(0.1, float(v)), np.array(0.9)))
    np.testing.assert_allclose(got, want, rtol=1e-6)


# --- optim: updates never share memory with the state ------------------------------------------


OPTIMIZERS = {
    "sgd": lambda: optim.sgd(0.1), "sgd_momentum": lambda: optim.sgd(0.1, 0.9),
    "sgd_nesterov": lambda: optim.sgd(0.1, 0.9, nesterov=True), "adam": lambda: optim.adam(0.1),
    "adamw": lambda: optim.adamw(0.1), "rmsprop": lambda: optim.rmsprop(0.1),
    "rmsprop_centered": lambda: optim.rmsprop(0.1, centered=True),
    "rmsprop_momentum": lambda: optim.rmsprop(0.1, momentum=0.9),
    "rmsprop_momentum_zero": lambda: optim.rmsprop(0.1, momentum=0.0),
    "rmsprop_nesterov": lambda: optim.rmsprop(0.1, momentum=0.5, nesterov=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_updates_state_params_and_grads_share_no_memory(name):
    opt = OPTIMIZERS[name]()
    params, grads = {"w": np.array([1.0, -2.0])}, {"w": np.array([0.5, 0.25])}
    state = opt.init(params)
    assert not any(np.shares_memory(s, params["w"]) for s in _leaves(state))
    for _ in range(2):
        updates, state = opt.update(grads, state, params)
        kept = _leaves(state)
        for u in _leaves(updates):
            assert not any(np.shares_memory(u, s) for s in kept)
            assert not np.shares_memory(u, grads["w"]) and not np.shares_memory(u, params["w"])
        assert not any(np.shares_memory(s, grads["w"]) or np.shares_memory(s, params["w"])
                       for s in kept)
    # writing to the updates leaves the next step unchanged
    updates, new_state = opt.update(grads, state, params)
    want, _ = opt.update(grads, new_state, params)
    for u in _leaves(updates):
        u *= 100.0
    again, _ = opt.update(grads, new_state, params)
    np.testing.assert_array_equal(again["w"], want["w"])


# --- eager optimizers on Dask tensors (immutable arrays: `data -= step` rebinds) -------------


@pytest.mark.parametrize("make", [
    lambda ts: optim.SGD(ts, lr=0.1), lambda ts: optim.SGD(ts, lr=0.1, momentum=0.9),
    lambda ts: optim.Adam(ts, lr=0.1), lambda ts: optim.AdamW(ts, lr=0.1),
    lambda ts: optim.RMSprop(ts, lr=0.1, momentum=0.5, centered=True)])
def test_eager_optimizers_update_dask_tensors(make):
    da = pytest.importorskip("dask.array")
    start = np.array([1.0, -2.0, 0.5])

    def run(data):
        w = tnp.tensor(data, requires_grad=True)
        opt = make([w])
        for _ in range(3):
            opt.zero_grad()
            tnp.sum(w * w * w).backward()
            opt.step()
        return w.data

    lazy = run(da.from_array(start, chunks=2))
    assert isinstance(lazy, da.Array)
    want = run(start)
    assert not np.allclose(want, start)
    np.testing.assert_allclose(lazy.compute(), want, rtol=1e-12)


# --- eager optimizers refuse the hyperparameters torch.optim refuses ---------------------------


@pytest.mark.parametrize("cls, kwargs", [
    ("SGD", dict(lr=-0.1)), ("SGD", dict(lr=0.1, momentum=-0.5)),
    ("SGD", dict(lr=0.1, weight_decay=-1.0)), ("Adam", dict(lr=-1e-3)),
    ("Adam", dict(betas=(1.0, 0.999))), ("Adam", dict(betas=(0.9, -0.1))),
    ("Adam", dict(eps=-1e-8)), ("Adam", dict(weight_decay=-0.1)), ("AdamW", dict(lr=-0.1)),
    ("AdamW", dict(betas=(0.9, 1.5))), ("RMSprop", dict(lr=-0.1)),
    ("RMSprop", dict(alpha=-0.9)), ("RMSprop", dict(eps=-1.0)),
    ("RMSprop", dict(momentum=-0.1)), ("RMSprop", dict(weight_decay=-0.1))])
def test_eager_optimizers_refuse_invalid_hyperparameters(cls, kwargs):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError):
        getattr(torch.optim, cls)([torch.zeros(1, requires_grad=True)], **kwargs)
    w = tnp.tensor([1.0], requires_grad=True)
    with pytest.raises(optim.OptimizerError, match=f"optim.{cls}") as info:
        getattr(optim, cls)([w], **kwargs)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TiduError)


def test_eager_optimizers_accept_the_edges_torch_accepts():
    w = tnp.tensor([1.0], requires_grad=True)
    optim.SGD([w], lr=0.0)
    optim.Adam([w], lr=0.0, betas=(0.0, 0.0), eps=0.0)
    optim.RMSprop([w], lr=0.0, alpha=0.0, eps=0.0)
    with pytest.raises(optim.OptimizerError, match="pair"):
        optim.Adam([w], betas=(0.9,))


# ============================================================================================
# Checked and found right: kept as regression tests
# ============================================================================================


_A = RNG.standard_normal((3, 3))
_R = RNG.standard_normal((4, 3))
_C = np.cos(np.arange(9.0)).reshape(3, 3)


def _sym(x):
    return (x + x.T) / 2


# (scalar function of (numpy module, its linalg, x), x); JAX symmetrizes eigh/cholesky input,
# NumPy reads one triangle: the functions symmetrize first so that both agree
LINALG_CASES = {
    "inv": (lambda m, la, x: m.sum(la.inv(x) * _C), _A),
    "solve": (lambda m, la, x: m.sum(la.solve(x, _C[:, :2]) ** 2), _A),
    "det": (lambda m, la, x: la.det(x), _A),
    "slogdet": (lambda m, la, x: la.slogdet(x)[1], _A),
    "pinv": (lambda m, la, x: m.sum(la.pinv(x) * _R.T), _R),
    "cholesky": (lambda m, la, x: m.sum(la.cholesky(_sym(x) + 4 * np.eye(3)) * _C), _A),
    "eigh": (lambda m, la, x: (lambda w, v: m.sum(((v * m.exp(w)) @ v.T) * _C))(
        *la.eigh(_sym(x))), _A),
    "eigvalsh": (lambda m, la, x: m.sum(la.eigvalsh(_sym(x)) ** 3), _A),
    "svd": (lambda m, la, x: (lambda u, s, vh: m.sum(((u * s ** 2) @ vh) * _R))(
        *la.svd(x, full_matrices=False)), _R),
    "svdvals": (lambda m, la, x: m.sum(la.svd(x, compute_uv=False) * np.arange(1.0, 4.0)), _R),
    "qr": (lambda m, la, x: m.sum(la.qr(x)[0] * _R) + m.sum(la.qr(x)[1] * _C), _R),
    "qr_wide": (lambda m, la, x: m.sum(la.qr(x)[1] * _R.T), _R.T.copy()),
    "norm_2": (lambda m, la, x: la.norm(x, 2), _A),
    "norm_nuc": (lambda m, la, x: la.norm(x, "nuc"), _A),
    "norm_inf": (lambda m, la, x: la.norm(x, np.inf), _A),
    "norm_vec3": (lambda m, la, x: m.sum(la.norm(x, 3, axis=0)), _A),
    "matrix_power": (lambda m, la, x: m.sum(la.matrix_power(x, -2) * _C), _A),
    "cond": (lambda m, la, x: la.cond(x), _A),
}


@pytest.mark.parametrize("name", sorted(LINALG_CASES))
def test_linalg_derivatives_match_jax_and_finite_differences(name):
    jax = _jax()
    fn, x = LINALG_CASES[name]

    def ours(y):
        return fn(tnp, L, y)

    def theirs(y):
        return fn(jax.numpy, jax.numpy.linalg, y)

    got = tnp.grad(ours)(x)
    np.testing.assert_allclose(float(ours(x)), float(theirs(x)), rtol=1e-10)
    np.testing.assert_allclose(got, np.asarray(jax.grad(theirs)(x)), atol=1e-7)
    np.testing.assert_allclose(got, _fd_grad(ours, x), atol=1e-5)
    np.testing.assert_allclose(tnp.jit(tnp.grad(ours))(x), got, atol=1e-10)
    np.testing.assert_allclose(tnp.grad(tnp.jit(ours))(x), got, atol=1e-10)
    xs = np.stack([x, 1.1 * x + 0.05])
    np.testing.assert_allclose(tnp.vmap(tnp.grad(ours))(xs),
                               [got, tnp.grad(ours)(xs[1])], atol=1e-9)
    t = RNG.standard_normal(x.shape)                            # <ct, J t> == <J^T ct, t>
    _, tangent = tnp.jvp(ours, (x,), (t,))
    np.testing.assert_allclose(float(tangent), float(np.sum(got * t)), atol=1e-8)


@pytest.mark.parametrize("name", ["inv", "det", "eigh", "qr"])
def test_linalg_hessians_match_jax(name):
    jax = _jax()
    fn, x = LINALG_CASES[name]
    want = np.asarray(jax.hessian(lambda y: fn(jax.numpy, jax.numpy.linalg, y))(x))
    np.testing.assert_allclose(tnp.hessian(lambda y: fn(tnp, L, y))(x), want, atol=1e-6)


_Z = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
_ZR = RNG.standard_normal((4, 3)) + 1j * RNG.standard_normal((4, 3))
_W = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))

# (ours, torch's, x): complex inputs, where tidu's gradient is PyTorch's
COMPLEX_CASES = {
    "inv": (lambda x: tnp.sum(tnp.real(L.inv(x) * _W)),
            lambda t, x: (t.linalg.inv(x) * t.tensor(_W)).real.sum(), _Z),
    "det": (lambda x: tnp.real(L.det(x) * (1 + 2j)),
            lambda t, x: (t.linalg.det(x) * (1 + 2j)).real, _Z),
    "slogdet_sign": (lambda x: tnp.real(L.slogdet(x)[0] * (1 + 2j)),
                     lambda t, x: (t.linalg.slogdet(x)[0] * (1 + 2j)).real, _Z),
    "eigh": (lambda x: tnp.sum(L.eigvalsh(x @ tnp.conj(x.T)) * np.arange(3.0)),
             lambda t, x: (t.linalg.eigvalsh(x @ x.mH) * t.arange(3.0)).sum(), _Z),
    "svd": (lambda x: (lambda u, s, vh: tnp.sum(tnp.real(((u * s) @ vh) * _ZR)))(
                *L.svd(x, full_matrices=False)),
            lambda t, x: (lambda u, s, vh: (((u * s) @ vh) * t.tensor(_ZR)).real.sum())(
                *t.linalg.svd(x, full_matrices=False)), _ZR),
    "qr": (lambda x: tnp.sum(tnp.real(L.qr(x)[1] * _W)),
           lambda t, x: (t.linalg.qr(x)[1] * t.tensor(_W)).real.sum(), _ZR),
    "eig_abs": (lambda x: tnp.sum(tnp.abs(L.eig(x)[1]) * _W.real),
                lambda t, x: (t.linalg.eig(x)[1].abs() * t.tensor(_W.real)).sum(), _Z),
    "norm_nuc": (lambda x: L.norm(x, "nuc"), lambda t, x: t.linalg.matrix_norm(x, "nuc"), _Z),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_CASES))
def test_complex_linalg_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    ours, theirs, z = COMPLEX_CASES[name]
    got = tnp.grad(ours)(z)
    zt = torch.tensor(z, requires_grad=True)
    theirs(torch, zt).backward()
    np.testing.assert_allclose(got, zt.grad.resolve_conj().numpy(), atol=1e-7)
    np.testing.assert_allclose(got, _fd_grad_complex(ours, z), atol=1e-5)
    t = RNG.standard_normal(z.shape) + 1j * RNG.standard_normal(z.shape)
    _, tangent = tnp.jvp(ours, (z,), (t,))                   # Re<g, t> for a real function
    np.testing.assert_allclose(float(np.real(tangent)), float(np.real(np.vdot(got, t))),
                               atol=1e-8)


def test_linalg_under_vmap_with_batch_axes_anywhere():
    a = RNG.standard_normal((3, 3, 4)) + 3 * np.eye(3)[:, :, None]
    b = RNG.standard_normal((3, 4))
    got = tnp.vmap(L.solve, in_axes=(2, 1))(a, b)
    np.testing.assert_allclose(got, [np.linalg.solve(a[..., i], b[:, i]) for i in range(4)])
    got = tnp.vmap(L.solve, in_axes=(None, 1))(a[..., 0], b)
    np.testing.assert_allclose(got, [np.linalg.solve(a[..., 0], b[:, i]) for i in range(4)])

    def f(m):
        return tnp.sum(L.slogdet(m)[1]) + L.norm(m, 1) + tnp.sum(L.svd(m)[1])

    grads = tnp.jit(tnp.vmap(tnp.grad(f), in_axes=2))(a)
    np.testing.assert_allclose(grads, [tnp.grad(f)(a[..., i]) for i in range(4)], atol=1e-10)


def test_linalg_eager_tensor_matches_functional():
    a = RNG.standard_normal((3, 3)) + 2 * np.eye(3)
    for f in (L.inv, lambda m: L.eigh(m + m.T)[0], lambda m: L.qr(m)[0], L.pinv,
              lambda m: L.cond(m, 1), lambda m: L.solve(m, np.ones(3))):
        t = tnp.tensor(a, requires_grad=True)
        tnp.sum(f(t) * 1.7).backward()
        np.testing.assert_allclose(t.grad, tnp.grad(lambda m: tnp.sum(f(m) * 1.7))(a),
                                   atol=1e-10)


def test_linalg_results_share_no_memory_with_inputs():
    a = RNG.standard_normal((3, 3))
    s = a @ a.T + np.eye(3)
    for out in (L.inv(a), *L.eigh(s), *L.svd(_R), *L.qr(_R), L.cholesky(s), L.pinv(_R),
                *L.slogdet(a), L.det(a), *L.lstsq(_R, np.ones(4))[:2], L.norm(a, axis=0)):
        assert not np.shares_memory(out, a) and not np.shares_memory(out, s)
        assert not np.shares_memory(out, _R)


def test_lstsq_matches_numpy_and_torch():
    torch = pytest.importorskip("torch")
    for a, b in ((_R, np.arange(4.0)), (_R, np.ones((4, 2))), (_R.T.copy(), np.ones(3)),
                 (np.ones((3, 2)), np.ones(3))):
        for got, want in zip(L.lstsq(a, b), np.linalg.lstsq(a, b)):
            assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == want.dtype
            np.testing.assert_allclose(got, want, atol=1e-12)
    b = np.arange(4.0)
    got = tnp.grad(lambda x: tnp.sum(L.lstsq(x, b)[0] ** 2))(_R)
    xt = torch.tensor(_R, requires_grad=True)
    (torch.linalg.lstsq(xt, torch.tensor(b)[:, None]).solution ** 2).sum().backward()
    np.testing.assert_allclose(got, xt.grad.numpy(), atol=1e-10)


# --- fft -----------------------------------------------------------------------------------


_X2 = RNG.standard_normal((3, 4))
_X3 = RNG.standard_normal((2, 3, 5))
_FFT_WEIGHTS = RNG.standard_normal(512) + 1j * RNG.standard_normal(512)


def _fft_weights(shape):
    return _FFT_WEIGHTS[:int(np.prod(shape))].reshape(shape)

FFT_CASES = [
    ("fft", dict(n=6), _X2), ("ifft", dict(n=3, axis=0, norm="forward"), _X2),
    ("rfft", dict(n=7), _X2), ("rfft", dict(norm="ortho"), _X3),
    ("irfft", dict(), _X2), ("irfft", dict(n=5), _X2), ("irfft", dict(n=1), _X2),
    ("hfft", dict(n=5, norm="ortho"), _X2), ("ihfft", dict(n=5), _X2),
    ("fft2", dict(s=(2, 7)), _X3), ("ifftn", dict(s=(3, 3), axes=(2, 0), norm="ortho"), _X3),
    ("rfftn", dict(s=(3, 6), axes=(0, 2)), _X3), ("irfft2", dict(s=(3, 5)), _X3),
    ("irfftn", dict(s=(4, 3), axes=(1, 0), norm="ortho"), _X3),
    ("fftshift", dict(), _X3), ("ifftshift", dict(axes=(0, 0, 2)), _X3),
]


def _fft_loss(xp, fn, kwargs, shape_in):
    out = getattr(np.fft, fn)(np.ones(shape_in), **kwargs)
    w, complex_out = _fft_weights(out.shape), np.iscomplexobj(out)

    def loss(x):
        y = getattr(xp.fft, fn)(x, **kwargs)
        return xp.sum(xp.real(y * w)) if complex_out else xp.sum(y * w.real)
    return loss


@pytest.mark.parametrize("fn, kwargs, x", FFT_CASES,
                         ids=[f"{fn}-{i}" for i, (fn, _, _) in enumerate(FFT_CASES)])
def test_fft_derivatives_match_jax_and_finite_differences(fn, kwargs, x):
    jax = _jax()
    ours = _fft_loss(tnp, fn, kwargs, x.shape)
    theirs = _fft_loss(jax.numpy, fn, kwargs, x.shape)
    got = tnp.grad(ours)(x)
    np.testing.assert_allclose(float(ours(x)), float(theirs(x)), rtol=1e-10)
    np.testing.assert_allclose(got, np.asarray(jax.grad(theirs)(x)), atol=1e-9)
    np.testing.assert_allclose(got, _fd_grad(ours, x), atol=1e-5)
    np.testing.assert_allclose(tnp.jit(tnp.grad(ours))(x), got, atol=1e-10)
    xs = np.stack([x, 2 * x + 1])
    np.testing.assert_allclose(tnp.vmap(tnp.grad(ours))(xs),
                               [got, tnp.grad(ours)(xs[1])], atol=1e-10)


@pytest.mark.parametrize("fn, kwargs", [("fft", dict(n=6, norm="ortho")), ("irfft", dict(n=7)),
                                        ("irfft", dict()), ("hfft", dict(n=5)),
                                        ("irfftn", dict(s=(4, 4), axes=(1, 0)))])
def test_complex_fft_gradients_match_torch(fn, kwargs):
    torch = pytest.importorskip("torch")
    z = _X2 + 1j * RNG.standard_normal(_X2.shape)
    ours = _fft_loss(tnp, fn, kwargs, z.shape)
    out_shape = np.shape(getattr(np.fft, fn)(z, **kwargs))
    w = torch.tensor(_fft_weights(out_shape))
    torch_kwargs = {{"axis": "dim", "axes": "dim"}.get(k, k): v for k, v in kwargs.items()}
    zt = torch.tensor(z, requires_grad=True)
    y = getattr(torch.fft, fn)(zt, **torch_kwargs)
    (y * w).real.sum().backward() if y.is_complex() else (y * w.real).sum().backward()
    got = tnp.grad(ours)(z)
    np.testing.assert_allclose(got, zt.grad.resolve_conj().numpy(), atol=1e-9)
    np.testing.assert_allclose(got, _fd_grad_complex(ours, z), atol=1e-5)


@pytest.mark.parametrize("in_axes", [0, 1, 2])
@pytest.mark.parametrize("fn, kwargs", [("rfft", dict(axis=0, n=5)), ("irfftn", dict(axes=(-1, 0))),
                                        ("hfft", dict(axis=0)), ("rfftn", dict(axes=(1, 1)))])
def test_fft_under_vmap_with_the_batch_axis_anywhere(fn, kwargs, in_axes):
    x = RNG.standard_normal((3, 4, 5))
    ours = _fft_loss(tnp, fn, kwargs, np.take(x, 0, in_axes).shape)
    got = tnp.jit(tnp.vmap(tnp.grad(ours), in_axes=in_axes, out_axes=in_axes))(x)
    want = np.stack([tnp.grad(ours)(np.take(x, i, in_axes)) for i in range(x.shape[in_axes])],
                    in_axes)
    np.testing.assert_allclose(got, want, atol=1e-10)
    values = tnp.vmap(lambda v: getattr(tnp.fft, fn)(v, **kwargs), in_axes=in_axes,
                      out_axes=in_axes)(x)
    np.testing.assert_allclose(values, np.stack(
        [getattr(np.fft, fn)(np.take(x, i, in_axes), **kwargs)
         for i in range(x.shape[in_axes])], in_axes), atol=1e-12)


def test_fft_misuse_raises_tidu_errors_naming_the_function():
    x = np.arange(6.0).reshape(2, 3)
    for call, name in ((lambda: tnp.fft.fft(x, n=0), "fft"),
                       (lambda: tnp.fft.fft(x, n=2.5), "fft"),
                       (lambda: tnp.fft.ifft(x, axis=2), "ifft"),
                       (lambda: tnp.fft.fft(x, norm="bad"), "fft"),
                       (lambda: tnp.fft.fftn(x, s=(2,), axes=(0, 1)), "fftn"),
                       (lambda: tnp.fft.rfft(x + 1j), "rfft"),
                       (lambda: tnp.fft.irfft(np.ones(1)), "irfft"),
                       (lambda: tnp.fft.rfftn(x, axes=()), "rfftn"),
                       (lambda: tnp.fft.fftshift(x, 5), "fftshift")):
        with pytest.raises(TiduError, match=name):
            call()


def test_fftfreq_differentiates_in_the_spacing():
    f = lambda d: tnp.sum(tnp.fft.rfftfreq(5, d) ** 2)              # noqa: E731
    want = _fd_grad(lambda d: f(float(d)), np.array(0.5))
    np.testing.assert_allclose(tnp.grad(f)(0.5), want, rtol=1e-6)
    np.testing.assert_allclose(tnp.jit(tnp.grad(f))(0.5), want, rtol=1e-6)


# --- nn ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [dict(b=np.arange(4.0)), dict(b=2.0),
                                    dict(b=np.array([[1.0], [0.0], [2.0]]), axis=1,
                                         return_sign=True),
                                    dict(b=-np.ones(4), axis=1, return_sign=True),
                                    dict(axis=(0, 1), keepdims=True)])
def test_logsumexp_matches_scipy_and_jax_gradients(kwargs):
    jax = _jax()
    scipy_special = pytest.importorskip("scipy.special")
    a = RNG.standard_normal((3, 4))
    got, want = nn.logsumexp(a, **kwargs), scipy_special.logsumexp(a, **kwargs)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(g, w)

    def loss(xp, fn, x):
        r = fn(x, **kwargs)
        r = r[0] if isinstance(r, tuple) else r
        return xp.sum(xp.where(xp.isnan(r), 0.0, r))

    np.testing.assert_allclose(tnp.grad(lambda x: loss(tnp, nn.logsumexp, x))(a),
                               jax.grad(lambda x: loss(jax.numpy, jax.nn.logsumexp, x))(a),
                               atol=1e-12)


# --- misc.optimizers: autograd's update rules, step for step ----------------------------------


def test_misc_optimizers_are_autograds_rules_and_copy_their_input():
    x0 = np.array([1.0, -2.0])
    grad = lambda x, i: 2 * x + i                                         # noqa: E731
    # autograd's loops, written out
    x, v = x0.copy(), np.zeros(2)
    for i in range(3):
        v = 0.9 * v - 0.1 * grad(x, i)
        x = x + 0.1 * v
    np.testing.assert_allclose(misc_optimizers.sgd(grad, x0, num_iters=3), x, rtol=1e-14)
    x, avg = x0.copy(), np.ones(2)
    for i in range(3):
        g = grad(x, i)
        avg = avg * 0.9 + g ** 2 * 0.1
        x = x - 0.1 * g / (np.sqrt(avg) + 1e-8)
    np.testing.assert_allclose(misc_optimizers.rmsprop(grad, x0, num_iters=3), x, rtol=1e-14)
    x, m, v = x0.copy(), np.zeros(2), np.zeros(2)
    for i in range(3):
        g = grad(x, i)
        m, v = 0.1 * g + 0.9 * m, 0.001 * g ** 2 + 0.999 * v
        x = x - 0.001 * (m / (1 - 0.9 ** (i + 1))) / (np.sqrt(v / (1 - 0.999 ** (i + 1))) + 1e-8)
    np.testing.assert_allclose(misc_optimizers.adam(grad, x0, num_iters=3), x, rtol=1e-14)
    for opt in (misc_optimizers.sgd, misc_optimizers.rmsprop, misc_optimizers.adam):
        assert not np.shares_memory(opt(grad, x0, num_iters=0), x0)
        np.testing.assert_array_equal(x0, [1.0, -2.0])


# --- eager optimizers: torch's numbers and state of their own -----------------------------------


@pytest.mark.parametrize("cls, kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("Adam", dict(lr=0.05, betas=(0.8, 0.95), weight_decay=0.1)),
    ("AdamW", dict(lr=0.05, weight_decay=0.3)),
    ("RMSprop", dict(lr=0.01, alpha=0.8, momentum=0.5, centered=True, weight_decay=0.1))])
def test_eager_optimizers_match_torch_and_keep_state_of_their_own(cls, kwargs):
    torch = pytest.importorskip("torch")
    start = np.array([[1.0, -2.0], [0.5, 3.0]])
    w = tnp.tensor(start, requires_grad=True)
    wt = torch.tensor(start, requires_grad=True)
    ours, theirs = getattr(optim, cls)([w], **kwargs), getattr(torch.optim, cls)([wt], **kwargs)
    for _ in range(4):
        ours.zero_grad()
        theirs.zero_grad()
        tnp.sum(tnp.sin(w) * w).backward()
        (torch.sin(wt) * wt).sum().backward()
        ours.step()
        theirs.step()
        for value in ours.state[0].values():
            if isinstance(value, np.ndarray):
                assert not np.shares_memory(value, w.data)
                assert not np.shares_memory(value, w.grad)
    np.testing.assert_allclose(w.data, wt.detach().numpy(), rtol=1e-12)


# --- type queries under jit and vmap -------------------------------------------------------------


def test_iscomplexobj_of_a_traced_value_reads_only_its_dtype():
    out = tnp.jit(lambda x: x * 2.0 if tnp.iscomplexobj(x) else x * 3.0)(np.ones(2))
    np.testing.assert_array_equal(out, [3.0, 3.0])
    out = tnp.vmap(lambda x: x * 2.0 if np.isrealobj(x) else x)(np.ones((2, 2), np.complex64))
    np.testing.assert_array_equal(out, np.ones((2, 2)))
    t = tnp.tensor(np.ones(2), requires_grad=True)
    assert tnp.isrealobj(t) and not np.iscomplexobj(t) and tnp.iscomplexobj([1j])
    torch = pytest.importorskip("torch", reason="a PyTorch tensor's dtype")
    assert tnp.iscomplexobj(torch.ones(2, dtype=torch.complex64))
    assert tnp.isrealobj(tnp.tensor(torch.ones(2), requires_grad=True))
