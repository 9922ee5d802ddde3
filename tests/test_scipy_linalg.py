"""``tnp.scipy.linalg``: values against SciPy (float64, float32, complex, stacks), derivatives
by central finite differences and the dot-product test, gradients against JAX, the
transforms (``jit``, ``vmap``, ``hessian``) and the eager ``Tensor``, the unread triangle's
derivative exactly 0, and SciPy's errors."""

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.errors import TensorNotSupportedError, TensorShapeError, TensorTypeError
from tests.tensor_helpers import numeric_grad, random

sl = pytest.importorskip("scipy.linalg", reason="SciPy is the oracle")
from primitives.tensor.scipy import linalg  # noqa: E402

TOL = {np.float64: 1e-12, np.float32: 2e-5, np.complex128: 1e-12, np.complex64: 2e-5}
TRANS = (0, 1, 2, "N", "T", "C")


def _well_conditioned(n, dtype, rng, batch=()):
    a = random(batch + (n, n), dtype, rng)
    return (a + 3 * n ** 0.5 * np.eye(n)).astype(dtype)


def _positive_definite(n, dtype, rng, batch=()):
    a = random(batch + (n, n), dtype, rng)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def _close(got, want, dtype, scale=1.0):
    assert np.asarray(got).dtype == np.asarray(want).dtype, (got.dtype, want.dtype)
    tol = TOL[np.dtype(dtype).type] * scale
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.fixture
def jax64():
    jax = pytest.importorskip("jax", reason="JAX's jax.scipy.linalg is the gradient reference")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", previous)


# --- values against SciPy -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
def test_solve_triangular_matches_scipy_for_every_flag(dtype):
    rng = np.random.default_rng(0)
    a = _well_conditioned(4, dtype, rng)
    for b in (random((4,), dtype, rng), random((4, 3), dtype, rng)):
        for trans in TRANS:
            for lower in (False, True):
                for unit in (False, True):
                    want = sl.solve_triangular(a, b, trans, lower, unit)
                    got = linalg.solve_triangular(a, b, trans, lower, unit)
                    _close(got, want, dtype)
                    assert got.shape == want.shape


def test_solve_triangular_stacks_dtypes_and_misuse():
    rng = np.random.default_rng(1)
    a = _well_conditioned(3, np.float64, rng, (2,))
    for b in (rng.normal(size=3), rng.normal(size=(2, 3, 2)), rng.normal(size=(3, 2))):
        want = sl.solve_triangular(a, b, lower=True)
        _close(linalg.solve_triangular(a, b, lower=True), want, np.float64)
    eye = np.eye(2, dtype=int)
    assert linalg.solve_triangular(eye, np.ones(2, dtype=int)).dtype == np.float64
    assert linalg.solve_triangular(eye.astype(np.float16), np.ones(2, np.float16)).dtype == (
        sl.solve_triangular(eye.astype(np.float16), np.ones(2, np.float16)).dtype)
    assert linalg.solve_triangular(eye.astype(np.float32), np.ones(2)).dtype == np.float64
    with pytest.raises(ValueError, match="infs or NaNs"):
        linalg.solve_triangular(np.eye(2), np.array([1.0, np.nan]))
    assert np.isnan(linalg.solve_triangular(np.eye(2), np.array([1.0, np.nan]),
                                            check_finite=False)[1])
    with pytest.raises(TensorShapeError, match="trans"):
        linalg.solve_triangular(np.eye(2), np.ones(2), trans=3)
    with pytest.raises(ValueError):
        linalg.solve_triangular(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError):
        linalg.solve_triangular(np.eye(2), np.ones(3))
    with pytest.raises(np.linalg.LinAlgError):
        linalg.solve_triangular(np.array([[1.0, 2.0], [0.0, 0.0]]), np.ones(2))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_cholesky_cho_factor_and_cho_solve_match_scipy(dtype):
    rng = np.random.default_rng(2)
    a = _positive_definite(4, dtype, rng)
    b = random((4, 2), dtype, rng)
    for lower in (False, True):
        want = sl.cholesky(a, lower=lower)
        _close(linalg.cholesky(a, lower=lower), want, dtype)
        c, low = linalg.cho_factor(a, lower=lower)
        assert low is lower
        _close(c, want, dtype)      # SciPy's other triangle holds a's entries; ours zeros
        factor = np.tril(want) if lower else np.triu(want)
        _close(np.tril(c) if lower else np.triu(c), factor, dtype)
        _close(linalg.cho_solve((c, lower), b), sl.cho_solve(sl.cho_factor(a, lower), b),
               dtype, scale=10)
        _close(linalg.cho_solve((c, lower), b[:, 0]), sl.cho_solve((want, lower), b[:, 0]),
               dtype, scale=10)
    _close(linalg.cholesky(a), np.conj(np.linalg.cholesky(a)).T, dtype)   # the upper one
    with pytest.raises(np.linalg.LinAlgError):
        linalg.cholesky(-np.eye(2))
    with pytest.raises(TensorTypeError, match="c_and_lower"):
        linalg.cho_solve(np.eye(2), np.ones(2))
    stack = _positive_definite(3, dtype, rng, (2,))
    _close(linalg.cholesky(stack, lower=True), sl.cholesky(stack, lower=True), dtype)


def test_solve_inv_det_and_block_diag_match_scipy():
    rng = np.random.default_rng(3)
    for dtype in (np.float64, np.complex128):
        a = random((4, 4), dtype, rng)
        p = _positive_definite(4, dtype, rng)
        b = random((4, 2), dtype, rng)
        for assume_a in (None, "gen", "sym", "her", "pos", "diagonal", "tridiagonal", "banded",
                         "upper triangular", "lower triangular"):
            m = p if assume_a == "pos" else a + 4 * np.eye(4)
            for lower in (False, True):
                want = sl.solve(m, b, lower=lower, assume_a=assume_a)
                _close(linalg.solve(m, b, lower=lower, assume_a=assume_a), want, dtype, 10)
        for assume_a in (None, "pos", "sym", "diagonal", "upper triangular"):
            m = p if assume_a == "pos" else a + 4 * np.eye(4)
            m = np.diag(np.diag(m)) if assume_a == "diagonal" else m    # SciPy keeps the rest
            _close(linalg.inv(m, assume_a=assume_a), sl.inv(m, assume_a=assume_a), dtype, 10)
        _close(linalg.det(a), sl.det(a), dtype, 10)
    a = rng.normal(size=(3, 3))
    _close(linalg.solve(a, b[:3].real, transposed=True), sl.solve(a, b[:3].real, transposed=True),
           np.float64, 10)
    with pytest.raises(TensorNotSupportedError):
        linalg.solve(a + 0j, b[:3], transposed=True)
    with pytest.raises(TensorShapeError, match="structure"):
        linalg.solve(a, b[:3], assume_a="nope")
    stack = rng.normal(size=(2, 3, 3))
    _close(linalg.solve(stack, np.ones(3)), sl.solve(stack, np.ones(3)), np.float64, 10)
    _close(linalg.det(stack), sl.det(stack), np.float64, 10)
    for arrs in [(), (1, [2, 3], [[4], [5]]), (np.ones((0, 2)), [[1.0]]),
                 (np.ones((2, 2, 2)), np.ones((2, 1, 1)) * 1j)]:
        want = sl.block_diag(*arrs)
        got = linalg.block_diag(*arrs)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


EXPM_CASES = [(n, scale) for n in (1, 2, 3, 5, 8) for scale in (1e-3, 0.1, 0.5, 1.0, 2.0, 4.0)]


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_expm_matches_scipy_to_1e13_relative(dtype):
    rng = np.random.default_rng(4)
    for n, scale in EXPM_CASES:
        a = random((n, n), dtype, rng) * scale / n ** 0.5
        want, got = sl.expm(a), linalg.expm(a)
        assert got.dtype == want.dtype
        assert np.linalg.norm(got - want) <= 1e-13 * np.linalg.norm(want), (n, scale)


def test_expm_of_large_norms_stacks_float32_and_edge_cases():
    rng = np.random.default_rng(5)
    stack = rng.normal(size=(4, 3, 3)) * np.array([0.01, 1.0, 10.0, 50.0])[:, None, None]
    want = sl.expm(stack)
    for got in (linalg.expm(stack), tnp.jit(linalg.expm)(stack), tnp.vmap(linalg.expm)(stack)):
        for g, w in zip(got, want):         # SciPy's own error reaches 1e-12 at norm 50
            assert np.linalg.norm(g - w) <= 1e-11 * np.linalg.norm(w)
    mpmath = pytest.importorskip("mpmath", reason="mpmath gives the exact exponential")
    with mpmath.workdps(40):
        for a in stack[2:]:
            exact = np.array(mpmath.expm(mpmath.matrix(a.tolist())).tolist(), dtype=float)
            assert np.linalg.norm(linalg.expm(a) - exact) <= 1e-13 * np.linalg.norm(exact)
    single = stack.astype(np.float32)
    got = linalg.expm(single)
    assert got.dtype == np.float32
    for g, w in zip(got, want):
        assert np.linalg.norm(g - w) <= 3e-6 * np.linalg.norm(w)
    assert linalg.expm(np.eye(2, dtype=int)).dtype == np.float64
    assert linalg.expm(np.zeros((0, 0))).shape == (0, 0)
    np.testing.assert_allclose(linalg.expm(-1e6 * np.eye(2)), 0.0)     # 17 squarings (SciPy's)
    assert np.isnan(tnp.jit(linalg.expm)(-1e6 * np.eye(2))).all()     # beyond max_squarings
    np.testing.assert_allclose(tnp.jit(lambda a: linalg.expm(a, max_squarings=20))(
        -1e6 * np.eye(2)), 0.0)
    with pytest.raises(ValueError):
        linalg.expm(np.ones(3))


# --- derivatives ---------------------------------------------------------------------------


def _dot_product_test(f, args, rng):
    """``Re<ct, J t> == Re<J^T ct, t>`` at ``args`` for random ``t`` and ``ct``."""
    tangents = tuple(random(np.shape(x), np.asarray(x).dtype, rng) for x in args)
    out, jt = tnp.jvp(f, args, tangents)
    ct = random(np.shape(out), np.asarray(out).dtype, rng)
    cts = tnp.vjp(f, *args)[1](ct)
    lhs = np.real(np.vdot(ct, jt))
    rhs = sum(np.real(np.vdot(c, t)) for c, t in zip(cts, tangents))
    assert abs(lhs - rhs) <= 1e-10 * max(1.0, abs(lhs)), (lhs, rhs)


def _fd_check(f, x, rtol=1e-6):
    got = tnp.grad(f)(x)
    want = numeric_grad(lambda v: f(v), x)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_derivatives_by_finite_differences_and_the_dot_product_test(dtype):
    rng = np.random.default_rng(6)
    a, p = _well_conditioned(3, dtype, rng), _positive_definite(3, dtype, rng)
    b = random((3, 2), dtype, rng)
    w = random((3, 2), dtype, rng)
    m = random((3, 3), dtype, rng) * 0.7

    def loss(y, w):
        return tnp.real(tnp.sum(y * w))

    for trans in (0, 1, 2):
        for lower, unit in ((False, False), (True, True)):
            _fd_check(lambda x: loss(linalg.solve_triangular(x, b, trans, lower, unit), w), a)
            _fd_check(lambda x: loss(linalg.solve_triangular(a, x, trans, lower, unit), w), b)
            _dot_product_test(lambda x, y: linalg.solve_triangular(x, y, trans, lower, unit),
                              (a, b), rng)
    for lower in (False, True):
        _fd_check(lambda x: loss(linalg.cho_solve(linalg.cho_factor(x, lower), b), w), p)
        _dot_product_test(lambda x, y: linalg.cho_solve((x, lower), y), (a, b), rng)
        _dot_product_test(lambda x: linalg.cholesky(x, lower), (p,), rng)
    wm = random((3, 3), dtype, rng)
    _fd_check(lambda x: loss(linalg.expm(x), wm), m)
    _fd_check(lambda x: loss(linalg.expm(x), wm), m * 6)         # scaled and squared
    _dot_product_test(linalg.expm, (m,), rng)
    _dot_product_test(linalg.expm, (m * 6,), rng)


def test_derivatives_in_the_unread_triangle_are_exactly_zero():
    rng = np.random.default_rng(7)
    a, p, b = _well_conditioned(4, np.float64, rng), _positive_definite(4, np.float64, rng), \
        rng.normal(size=(4, 2))
    for trans in TRANS:
        for lower in (False, True):
            unread = np.triu(np.ones((4, 4)), 1) if lower else np.tril(np.ones((4, 4)), -1)
            for unit in (False, True):
                g = tnp.grad(lambda x: tnp.sum(
                    tnp.sin(linalg.solve_triangular(x, b, trans, lower, unit))))(a)
                assert np.all(g[unread == 1] == 0.0)
                assert np.all(np.diag(g) == 0.0) if unit else np.all(np.diag(g) != 0.0)
            for f in (lambda x: linalg.cholesky(x, lower),
                      lambda x: linalg.cho_solve(linalg.cho_factor(x, lower), b),
                      lambda x: linalg.cho_solve((x + 5 * np.eye(4), lower), b),
                      lambda x: linalg.solve(x + 5 * np.eye(4), b, lower, assume_a="sym")):
                g = tnp.grad(lambda x, f=f: tnp.sum(tnp.sin(f(x))))(p)
                assert np.all(g[unread == 1] == 0.0) and np.any(g[unread == 0] != 0.0)


def test_gradients_against_jax(jax64):
    jsl = pytest.importorskip("jax.scipy.linalg")
    jnp = jax64.numpy
    rng = np.random.default_rng(8)
    a, p, b = _well_conditioned(4, np.float64, rng), _positive_definite(4, np.float64, rng), \
        rng.normal(size=(4, 3))
    w = rng.normal(size=(4, 3))
    for trans in (0, 1, 2):
        for lower, unit in ((False, False), (True, False), (True, True)):
            want = jax64.grad(lambda x, y: jnp.sum(jnp.sin(jsl.solve_triangular(
                x, y, trans, lower, unit)) * w), argnums=(0, 1))(a, b)
            got = tnp.grad(lambda x, y: tnp.sum(tnp.sin(linalg.solve_triangular(
                x, y, trans, lower, unit)) * w), argnums=(0, 1))(a, b)
            for g, r in zip(got, want):
                np.testing.assert_allclose(g, np.asarray(r), rtol=1e-10, atol=1e-12)
    for lower in (False, True):             # JAX symmetrizes; tidu reads one triangle
        want = jax64.grad(lambda x, y: jnp.sum(jsl.cho_solve(jsl.cho_factor(x, lower), y) * w),
                          argnums=(0, 1))(p, b)
        got = tnp.grad(lambda x, y: tnp.sum(linalg.cho_solve(linalg.cho_factor(x, lower), y)
                                            * w), argnums=(0, 1))(p, b)
        sym = np.asarray(want[0])
        folded = (np.tril if lower else np.triu)(sym + sym.T) - np.diag(np.diag(sym))
        np.testing.assert_allclose(got[0], folded, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got[1], np.asarray(want[1]), rtol=1e-10, atol=1e-12)
    wm = rng.normal(size=(4, 4))
    for scale in (0.01, 0.5, 3.0, 20.0):
        m = rng.normal(size=(4, 4)) * scale
        want = np.asarray(jax64.grad(lambda x: jnp.sum(jsl.expm(x) * wm))(m))
        for f in (tnp.grad, lambda g: tnp.jit(tnp.grad(g))):
            got = f(lambda x: tnp.sum(linalg.expm(x) * wm))(m)
            np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11 * np.abs(want).max())
    m = rng.normal(size=(3, 3))             # the Hessian: JAX's, under both transforms
    want = np.asarray(jax64.hessian(lambda x: jnp.sum(jsl.expm(x) * wm[:3, :3]))(m))
    got = tnp.hessian(lambda x: tnp.sum(linalg.expm(x) * wm[:3, :3]))(m)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())


# --- transforms and the eager Tensor ------------------------------------------------------------


def test_jit_vmap_hessian_and_the_eager_tensor():
    rng = np.random.default_rng(9)
    a, p = _well_conditioned(3, np.float64, rng, (4,)), _positive_definite(3, np.float64, rng, (4,))
    b = rng.normal(size=(4, 3))

    def f(x, p, y):
        return (linalg.solve_triangular(x, y, 1, True) + linalg.cho_solve(
            linalg.cho_factor(p), y) + linalg.expm(x * 0.3) @ y)

    want = np.stack([f(*args) for args in zip(a, p, b)])
    for got in (tnp.vmap(f)(a, p, b), tnp.jit(tnp.vmap(f))(a, p, b),
                tnp.jit(f)(a, p, b[..., None])[..., 0]):
        np.testing.assert_allclose(got, want, rtol=1e-12)

    def loss(x):
        return tnp.sum(tnp.sin(f(x, p[0], b[0])))

    h = tnp.hessian(loss)(a[0])
    fd = np.stack([numeric_grad(lambda v, e=e: np.vdot(tnp.grad(loss)(v), e), a[0]) for e in
                   np.eye(9).reshape(9, 3, 3)]).reshape(3, 3, 3, 3)
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(h, np.transpose(h, (2, 3, 0, 1)), atol=1e-12)

    x = tnp.tensor(a[0], requires_grad=True)
    y = tnp.tensor(b[0], requires_grad=True)
    out = linalg.solve_triangular(x, y, lower=True) + linalg.expm(x * 0.1) @ y
    assert isinstance(out, tnp.Tensor)
    tnp.sum(out).backward()
    gx, gy = tnp.grad(lambda u, v: tnp.sum(linalg.solve_triangular(u, v, lower=True)
                                          + linalg.expm(u * 0.1) @ v), argnums=(0, 1))(a[0], b[0])
    np.testing.assert_allclose(x.grad, gx, rtol=1e-12)
    np.testing.assert_allclose(y.grad, gy, rtol=1e-12)
    with pytest.raises(ValueError, match="infs or NaNs"):
        linalg.cholesky(tnp.tensor(np.full((2, 2), np.inf)))


def test_torch_arrays_stay_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is an optional array library")
    rng = np.random.default_rng(10)
    a, b = _well_conditioned(3, np.float64, rng), rng.normal(size=(3, 2))
    ta, tb = torch.tensor(a), torch.tensor(b)
    for got, want in ((linalg.solve_triangular(ta, tb, unit_diagonal=True),
                       sl.solve_triangular(a, b, unit_diagonal=True)),
                      (linalg.expm(ta), sl.expm(a)),
                      (linalg.cho_solve(linalg.cho_factor(ta @ ta.T), tb),
                       sl.cho_solve(sl.cho_factor(a @ a.T), b))):
        assert isinstance(got, torch.Tensor)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)


# --- random shapes and flags ------------------------------------------------------------------


def test_random_shapes_and_flags_match_scipy():
    hypothesis = pytest.importorskip("hypothesis", reason="hypothesis draws the cases")
    st = hypothesis.strategies

    @hypothesis.settings(max_examples=12, deadline=None, derandomize=True)
    @hypothesis.given(n=st.integers(1, 5), batch=st.lists(st.integers(1, 3), max_size=2),
                      k=st.sampled_from([None, 1, 3]), trans=st.sampled_from(TRANS),
                      lower=st.booleans(), unit=st.booleans(), seed=st.integers(0, 2 ** 16))
    def check(n, batch, k, trans, lower, unit, seed):
        rng = np.random.default_rng(seed)
        a = _well_conditioned(n, np.float64, rng, tuple(batch))
        b = rng.normal(size=(n,) if k is None else tuple(batch) + (n, k))
        _close(linalg.solve_triangular(a, b, trans, lower, unit),
               sl.solve_triangular(a, b, trans, lower, unit), np.float64, 10)
        p = _positive_definite(n, np.float64, rng, tuple(batch))
        _close(linalg.cho_solve(linalg.cho_factor(p, lower), b),
               sl.cho_solve(sl.cho_factor(p, lower), b), np.float64, 100)
        m = rng.normal(size=tuple(batch) + (n, n)) * rng.uniform(0.01, 2.0)
        want = sl.expm(m)
        assert np.linalg.norm(linalg.expm(m) - want) <= 1e-13 * np.linalg.norm(want)

    check()
