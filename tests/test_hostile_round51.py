"""Hostile round 51: linear algebra, FFT, ``scipy.special``/``scipy.stats``, ``nn``,
``random``, ``odeint`` and ``fixed_point`` at their edges, against finite differences, the
dot-product test and JAX/PyTorch/SciPy."""

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.ops.linalg import LinAlgError

# --- linalg: derivatives that do not exist name their function ---------------------------


@pytest.mark.parametrize("name, f", [
    ("slogdet", lambda a: tnp.linalg.slogdet(a)[1]),
    ("qr", lambda a: tnp.sum(tnp.linalg.qr(a)[1])),
])
def test_singular_derivative_names_the_function(name, f):
    singular = np.diag([1.0, 2.0, 0.0])
    with pytest.raises(LinAlgError, match=f"^{name}'s derivative needs a nonsingular matrix"):
        tnp.grad(f)(singular)
    with pytest.raises(LinAlgError, match=f"^{name}'s derivative needs a nonsingular matrix"):
        tnp.vmap(tnp.grad(f))(np.stack([np.eye(3), singular]))
    np.testing.assert_allclose(tnp.grad(lambda a: tnp.linalg.slogdet(a)[1])(2 * np.eye(3)),
                               0.5 * np.eye(3))


# --- scipy.special ----------------------------------------------------------------------


@pytest.mark.parametrize("x", [[np.inf, 0.0], [np.inf, -np.inf], [np.inf, np.inf],
                               [-np.inf, -np.inf], [-np.inf, 0.0], [np.nan, 1.0], [1.0, 2.0]])
def test_scipy_softmax_infinite_entries_as_scipy(x):
    special = pytest.importorskip("scipy.special")
    x = np.array([x, [0.0, 1.0]])
    with np.errstate(invalid="ignore"):
        expected = special.softmax(x, axis=1)
    np.testing.assert_array_equal(tnp.scipy.special.softmax(x, axis=1), expected)
    np.testing.assert_array_equal(tnp.jit(lambda v: tnp.scipy.special.softmax(v, axis=1))(x),
                                  expected)


# --- linalg: the Hessian of det is exact at singular matrices ----------------------------


def _det_hessian_fd(a, h=1e-4):
    """The Hessian of det by central differences (det is a cubic for 3 × 3: exact but for
    rounding)."""
    n = a.size
    hess = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            e, f = np.zeros(n), np.zeros(n)
            e[i], f[j] = h, h
            e, f = e.reshape(a.shape), f.reshape(a.shape)
            hess[i, j] = (np.linalg.det(a + e + f) - np.linalg.det(a + e - f)
                          - np.linalg.det(a - e + f) + np.linalg.det(a - e - f)) / (4 * h * h)
    return hess


_RNG = np.random.default_rng(51)
_MATRICES = {
    "nonsingular": _RNG.standard_normal((3, 3)),
    "rank n-1 diagonal": np.diag([1.0, 2.0, 0.0]),
    "rank n-1": _RNG.standard_normal((3, 2)) @ _RNG.standard_normal((2, 3)),
    "rank n-2 diagonal": np.diag([1.0, 0.0, 0.0]),
    "rank n-2": _RNG.standard_normal((4, 2)) @ _RNG.standard_normal((2, 4)),
    "rank 1 of 4": np.outer([1.0, 2.0, 3.0, 4.0], [1.0, -1.0, 2.0, 0.5]),
    "zero": np.zeros((3, 3)),
    "identity": np.eye(4),
}


@pytest.mark.parametrize("name", list(_MATRICES))
def test_det_hessian_exact_at_any_rank(name):
    a = _MATRICES[name]
    hess = tnp.hessian(tnp.linalg.det)(a).reshape(a.size, a.size)
    np.testing.assert_allclose(hess, _det_hessian_fd(a), atol=1e-7)
    np.testing.assert_allclose(tnp.jit(tnp.hessian(tnp.linalg.det))(a).reshape(hess.shape),
                               hess, atol=1e-12)


def test_det_hessian_batched_and_complex_against_jax(jx):
    jax, jnp = jx
    stack = np.stack([_MATRICES["rank n-1 diagonal"], _MATRICES["rank n-2 diagonal"],
                      _MATRICES["nonsingular"]])
    ours = tnp.vmap(tnp.hessian(tnp.linalg.det))(stack)
    np.testing.assert_allclose(ours, jax.vmap(jax.hessian(jnp.linalg.det))(stack), atol=1e-10)
    z = _MATRICES["rank n-1"] + 1j * _MATRICES["rank n-1"][::-1]      # rank <= 2 still
    ours = tnp.jacfwd(tnp.grad(tnp.linalg.det, holomorphic=True), holomorphic=True)(z)
    theirs = jax.jacfwd(jax.grad(jnp.linalg.det, holomorphic=True), holomorphic=True)(z)
    np.testing.assert_allclose(ours, theirs, atol=1e-10)


def _adjugate(a):
    from primitives.tensor.core import bind
    from primitives.tensor.ops.linalg import Adjugate

    return bind(Adjugate(a.shape, a.dtype.name), a)[0]


@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("n, rank", [(3, 3), (3, 2), (4, 2), (4, 1)])
def test_adjugate_jvp_transpose_dot_product(complex_, n, rank):
    rng = np.random.default_rng(n + rank)

    def draw(*shape):
        x = rng.standard_normal(shape)
        return x + 1j * rng.standard_normal(shape) if complex_ else x
    a, t, ct = draw(n, rank) @ draw(rank, n), draw(n, n), draw(n, n)
    jt = tnp.jvp(_adjugate, (a,), (t,))[1]
    (jct,) = tnp.vjp(_adjugate, a)[1](ct)
    np.testing.assert_allclose(np.vdot(ct, jt).real, np.vdot(jct, t).real, rtol=1e-10,
                               atol=1e-12)   # rank n-3: d adj is 0
    h = 1e-6                # adj is a polynomial: a central difference is exact to O(h²)
    fd = (_adjugate(a + h * t) - _adjugate(a - h * t)) / (2 * h)
    np.testing.assert_allclose(jt, fd, atol=1e-8)
    if rank == n:           # where det(A) A⁻¹ is differentiable, its derivative
        adj = lambda m: tnp.linalg.det(m) * tnp.linalg.inv(m)      # noqa: E731
        np.testing.assert_allclose(jt, tnp.jvp(adj, (a,), (t,))[1], atol=1e-10)


def test_det_third_derivative_against_jax_or_an_error_naming_det(jx):
    jax, jnp = jx
    a = _MATRICES["nonsingular"]
    third = tnp.jacfwd(tnp.jacfwd(tnp.jacrev(tnp.linalg.det)))(a)
    np.testing.assert_allclose(third, jax.jacfwd(jax.jacfwd(jax.jacrev(jnp.linalg.det)))(a),
                               atol=1e-10)
    stack = np.stack([a, np.eye(3)])
    np.testing.assert_allclose(tnp.vmap(tnp.jacfwd(tnp.hessian(tnp.linalg.det)))(stack),
                               jax.vmap(jax.jacfwd(jax.hessian(jnp.linalg.det)))(stack),
                               atol=1e-10)
    with pytest.raises(LinAlgError, match=r"^det's third derivative \(and higher\) needs a"):
        tnp.jacfwd(tnp.hessian(tnp.linalg.det))(_MATRICES["rank n-1 diagonal"])


def test_det_third_derivative_at_nonsingular_matrices():
    a = _MATRICES["nonsingular"]
    t = np.random.default_rng(2).standard_normal((3, 3))
    # det(a + s t) is a cubic in s: its third derivative is 6 × the s³ coefficient, det(t)
    third = tnp.grad(tnp.grad(tnp.grad(lambda s: tnp.linalg.det(a + s * t))))(0.0)
    np.testing.assert_allclose(third, 6 * np.linalg.det(t), rtol=1e-10)
    ident = tnp.grad(tnp.grad(tnp.grad(lambda s: tnp.linalg.det(np.eye(3) + s * t))))(0.0)
    np.testing.assert_allclose(ident, 6 * np.linalg.det(t), rtol=1e-10)
