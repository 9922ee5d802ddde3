"""``tnp.linalg``: its primitives through ``tidu.testing``, its functions against NumPy,
finite differences and PyTorch, and the conventions its docstrings state.

- every primitive of ``primitives.tensor.ops.linalg`` through ``check_primitive``
  (JVP against finite differences, dot-product test of the transpose, and
  ``order=2``) in float64, float32 and complex128, on batch shapes hypothesis draws
  (size-0 and size-1 batches included). Raw eigenvectors and singular vectors of
  complex matrices have no continuous phase to difference, so for them the same
  checks run on a gauge-invariant function of the outputs (``check_jvp`` and
  ``check_transpose`` on the traced graph, and a second linearization);
- the raw outputs (eigenvectors, singular vectors, named tuples, dtypes) equal NumPy's;
- gradients agree with PyTorch's (``torch.linalg``), whose complex convention is tidu's;
- determinants at singular matrices, degenerate eigenvalues, full SVD matrices, errors,
  and NumPy's dispatch to ``tnp.linalg``.

``tests/numpy_cases/linalg.py`` holds the per-function cases that
``tests/test_numpy_functions.py`` runs (forward, first and second order, jit, eager).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import primitives.tensor as tnp
from primitives.tensor.transforms import make_graph
from numpy_cases import spd
from numpy_cases.linalg import invertible, separated_singular_values, separated_spectrum
from primitives.tensor.ops.linalg import (
    Adjugate,
    Cholesky,
    Det,
    DiagEmbed,
    Eigh,
    LinAlgError,
    MatrixBand,
    MatrixDiagonal,
    Pinv,
    Qr,
    Slogdet,
    Solve,
    Svd,
)
from tidu import ADRuleError, TiduError, linearize
from tidu.testing import check_jvp, check_primitive, check_transpose

SETTINGS = settings(max_examples=4, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
DTYPES = ["float64", "float32", "complex128"]
BATCHES = st.sampled_from([(), (0,), (1,), (2,), (1, 2)])
SEEDS = st.integers(0, 2**16)


def draw(make, seed, dtype):
    return make(np.random.default_rng(seed), dtype)


def normal(shape, seed, dtype):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def check(op, *args, seed):
    report = check_primitive(op, *args, order=2, rng=seed)
    assert report.order == 2


# --- the primitives --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(batch=BATCHES, n=st.integers(1, 3), k=st.integers(0, 2), seed=SEEDS)
@example(batch=(0,), n=2, k=1, seed=0)
@example(batch=(1,), n=3, k=2, seed=1)
def test_solve_rules(dtype, batch, n, k, seed):
    a = draw(invertible(n, batch), seed, dtype)
    check(Solve(batch + (n, k), dtype), a, normal(batch + (n, k), seed + 1, dtype), seed=seed)


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(batch=BATCHES, n=st.integers(1, 3), seed=SEEDS)
@example(batch=(0,), n=2, seed=0)
@example(batch=(1,), n=3, seed=1)
def test_cholesky_rules(dtype, batch, n, seed):
    check(Cholesky(batch + (n, n), dtype), draw(spd(n, batch), seed, dtype), seed=seed)


@pytest.mark.parametrize("op", [Slogdet, Det, Adjugate])
@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(batch=BATCHES, n=st.integers(1, 4), seed=SEEDS)
@example(batch=(0,), n=3, seed=0)
@example(batch=(1,), n=4, seed=1)
def test_determinant_rules(op, dtype, batch, n, seed):
    check(op(batch + (n, n), dtype), draw(invertible(n, batch), seed, dtype), seed=seed)


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(batch=BATCHES, m=st.integers(1, 4), n=st.integers(1, 4), seed=SEEDS)
@example(batch=(0,), m=2, n=3, seed=0)
@example(batch=(1,), m=4, n=2, seed=1)
@example(batch=(2,), m=2, n=3, seed=2)
def test_pinv_rules(dtype, batch, m, n, seed):
    a = draw(separated_singular_values(batch + (m, n)), seed, dtype)
    check(Pinv(batch + (m, n), dtype), a, seed=seed)
    h = draw(separated_spectrum(n, batch), seed, dtype) + 3 * np.eye(n, dtype=dtype)
    check(Pinv(batch + (n, n), dtype, hermitian=True), h, seed=seed)


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(batch=BATCHES, m=st.integers(1, 4), n=st.integers(1, 4), seed=SEEDS)
@example(batch=(0,), m=3, n=2, seed=0)
@example(batch=(1,), m=2, n=4, seed=1)
def test_qr_rules(mode, dtype, batch, m, n, seed):
    # LAPACK's R has a real diagonal, which fixes Q's phases; the extra columns of a
    # "complete" Q are unique only up to sign when there is one, and only for real matrices:
    # beyond that they are LAPACK's pick of a basis, and differentiating them is refused
    a = draw(separated_singular_values(batch + (m, n)), seed, dtype)
    if mode == "complete" and m - n > (1 if dtype != "complex128" else 0):
        with pytest.raises(ADRuleError, match="mode='reduced'"):
            tnp.grad(lambda x: tnp.sum(tnp.abs(tnp.linalg.qr(x, mode="complete")[0])))(a)
        return
    check(Qr(batch + (m, n), dtype, mode), a, seed=seed)


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(batch=BATCHES, n=st.integers(1, 4), seed=SEEDS)
@example(batch=(0,), n=3, seed=0)
@example(batch=(1,), n=4, seed=1)
def test_eigh_rules(dtype, batch, n, seed):
    a = draw(separated_spectrum(n, batch), seed, dtype)
    check(Eigh(batch + (n, n), dtype, compute_v=False), a, seed=seed)
    if dtype != "complex128":        # a sign is continuous under small steps, a phase is not
        check(Eigh(batch + (n, n), dtype), a, seed=seed)


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(batch=BATCHES, m=st.integers(1, 4), n=st.integers(1, 4), seed=SEEDS)
@example(batch=(0,), m=3, n=2, seed=0)
@example(batch=(1,), m=2, n=3, seed=1)
def test_svd_rules(dtype, batch, m, n, seed):
    a = draw(separated_singular_values(batch + (m, n)), seed, dtype)
    check(Svd(batch + (m, n), dtype, compute_uv=False), a, seed=seed)
    if dtype != "complex128":
        check(Svd(batch + (m, n), dtype), a, seed=seed)
        if abs(m - n) == 1:         # the one extra vector is unique up to sign
            check(Svd(batch + (m, n), dtype, full_matrices=True), a, seed=seed)


@pytest.mark.parametrize("op", [MatrixBand(1.0, 0.5, -2.0), MatrixDiagonal(), DiagEmbed()],
                         ids=repr)
@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(batch=BATCHES, n=st.integers(0, 3), seed=SEEDS)
@example(batch=(0,), n=2, seed=0)
def test_linear_helper_rules(op, dtype, batch, n, seed):
    shape = batch + ((n,) if isinstance(op, DiagEmbed) else (n, n))
    check(op, normal(shape, seed, dtype), seed=seed)


def _gauge_invariant_checks(fn, a, seed):
    """check_primitive's checks on the traced graph of ``fn``: JVP against finite differences,
    the dot-product test, and the same on the linearized graph (second order)."""
    traced = make_graph(fn, a)
    graph, outputs = traced.graph, traced.output_keys
    primals = {traced.input_keys[0]: a}
    check_jvp(graph, outputs, primals, rng=seed)
    linear = linearize(graph, outputs, [traced.input_keys[0]])
    check_transpose(graph, linear, primals, rng=seed)
    tangent_outputs = [k for k in linear.tangent_output_keys if k is not None]
    rng = np.random.default_rng(seed)
    with_tangent = dict(primals)
    with_tangent[linear.tangent_input_keys[0].key] = normal(a.shape, seed + 1, a.dtype)
    check_jvp([linear.graph, graph], tangent_outputs, with_tangent, rng=rng)
    second = linearize([linear.graph, graph], tangent_outputs, list(with_tangent))
    check_transpose([linear.graph, graph], second, with_tangent, rng=rng)


def _mH(L, a):
    """The conjugate transpose of each matrix, in library ``L`` (``tnp`` or torch)."""
    nd = a.ndim
    return L.conj(L.transpose(a, tuple(range(nd - 2)) + (nd - 1, nd - 2)))


def _hermitian(L, a):
    return (a + _mH(L, a)) * 0.5


def _spectral(L, a):
    """The eigenvalues and ``sin`` of the matrix, ``V diag(sin w) Vᴴ``."""
    w, v = L.linalg.eigh(a)
    return w, (v * L.sin(w)[..., None, :]) @ _mH(L, v)


def _singular(a, full=False):
    u, s, vh = tnp.linalg.svd(a, full_matrices=full)
    k = s.shape[-1]
    return s, (u[..., :, :k] * tnp.sin(s)[..., None, :]) @ vh[..., :k, :], tnp.abs(u) ** 2


@settings(SETTINGS)
@given(batch=st.sampled_from([(), (0,), (1,), (2,)]), n=st.integers(1, 3), seed=SEEDS)
@example(batch=(0,), n=2, seed=0)
def test_complex_eigenvectors_through_gauge_invariant_functions(batch, n, seed):
    a = draw(separated_spectrum(n, batch), seed, "complex128")
    _gauge_invariant_checks(lambda x: _spectral(tnp, x), a, seed)


@settings(SETTINGS)
@given(batch=st.sampled_from([(), (0,), (1,), (2,)]), m=st.integers(1, 3), n=st.integers(1, 3),
       full=st.booleans(), seed=SEEDS)
@example(batch=(0,), m=3, n=2, full=True, seed=0)
def test_complex_singular_vectors_through_gauge_invariant_functions(batch, m, n, full, seed):
    a = draw(separated_singular_values(batch + (m, n)), seed, "complex128")
    # |U|² of a full U depends on the extra columns' basis (the Cases check their projector)
    fn = (lambda x: _singular(x, full)[:2]) if full else _singular
    _gauge_invariant_checks(fn, a, seed)


# --- forward: NumPy's values, types and dtypes ----------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128", "complex64"])
def test_raw_outputs_equal_numpy(dtype):
    rng = np.random.default_rng(0)
    a = spd(3, (2,))(rng, dtype)
    b = normal((2, 4, 3), 1, dtype)
    tight = dict(rtol=1e-5 if dtype in ("float32", "complex64") else 1e-12, atol=1e-6)
    got, want = tnp.linalg.eigh(a), np.linalg.eigh(a)
    assert type(got).__name__ == "EighResult" and got._fields == want._fields
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, **tight)
    for full in (True, False):
        got, want = tnp.linalg.svd(b, full_matrices=full), np.linalg.svd(b, full_matrices=full)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, **tight)
    for mode in ("reduced", "complete"):
        for g, w in zip(tnp.linalg.qr(b, mode), np.linalg.qr(b, mode)):
            np.testing.assert_allclose(g, w, **tight)
    sign, logabsdet = tnp.linalg.slogdet(a)
    assert tnp.linalg.slogdet(a)._fields == ("sign", "logabsdet")
    assert sign.dtype == np.dtype(dtype) and logabsdet.dtype == np.finfo(dtype).dtype
    assert tnp.linalg.svd(b)._fields == ("U", "S", "Vh")
    assert tnp.linalg.qr(b)._fields == ("Q", "R")
    np.testing.assert_allclose(tnp.linalg.cholesky(a, upper=True),
                               np.linalg.cholesky(a, upper=True), **tight)


def test_integer_inputs_compute_in_float64_and_float16_is_refused():
    a = np.array([[2, 1], [1, 3]])
    assert tnp.linalg.inv(a).dtype == np.float64 == tnp.linalg.det(a).dtype
    assert tnp.linalg.norm(np.arange(3)).dtype == np.float64
    with pytest.raises(TypeError, match="float16 is unsupported"):
        tnp.linalg.inv(a.astype(np.float16))


def test_empty_batches_and_matrices():
    for shape in [(0, 3, 3), (2, 0, 0)]:
        a = np.zeros(shape)
        np.testing.assert_array_equal(tnp.linalg.det(a), np.linalg.det(a))
        assert tnp.linalg.inv(a).shape == shape
        g = tnp.grad(lambda x: tnp.sum(tnp.linalg.slogdet(x)[1]))(a + np.eye(shape[-1]))
        assert g.shape == shape
    assert tnp.linalg.svd(np.zeros((2, 3, 0)))[0].shape == (2, 3, 3)


# --- conventions ---------------------------------------------------------------------------------


def _cofactors(a):
    n = a.shape[-1]
    out = np.empty_like(a)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, i, 0), j, 1)
            out[i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return out


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_det_gradient_at_singular_matrices_is_the_cofactor_matrix(rank):
    rng = np.random.default_rng(rank)
    a = rng.standard_normal((4, rank)) @ rng.standard_normal((rank, 4))
    grad = tnp.grad(tnp.linalg.det)(a)
    np.testing.assert_allclose(grad, _cofactors(a), atol=1e-12)
    # and a complex one: the gradient of Re det is conj of the cofactors
    z = a + 1j * (rng.standard_normal((4, rank)) @ rng.standard_normal((rank, 4)))
    grad = tnp.grad(lambda x: tnp.real(tnp.linalg.det(x)))(z)
    np.testing.assert_allclose(grad, np.conj(_cofactors(z)), atol=1e-12)


def test_det_hessian_of_a_singular_2x2_is_exact():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    hvp = tnp.hvp(tnp.linalg.det, (a,), (np.array([[1.0, 0.0], [0.0, 1.0]]),))
    np.testing.assert_allclose(hvp, np.eye(2))           # d adj(A)ᵀ[I] = adj(I)ᵀ = I


def test_degenerate_eigenvalues():
    """Eigenvalue derivatives stay finite at equal eigenvalues; eigenvector derivatives are
    not finite there (JAX's convention), rather than silently wrong."""
    a = np.diag([1.0, 1.0, 2.0])
    np.testing.assert_allclose(tnp.grad(lambda x: tnp.sum(tnp.linalg.eigvalsh(x) ** 2))(a),
                               2 * np.diag([1.0, 1.0, 2.0]), atol=1e-12)
    (w, v), (dw, dv) = tnp.jvp(lambda x: tuple(tnp.linalg.eigh(x)), (a,), (np.ones((3, 3)),))
    assert np.isfinite(dw).all() and not np.isfinite(dv).all()


def test_singular_matrix_errors_name_the_function():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(LinAlgError, match="solve.*[Ss]ingular") as info:
        tnp.linalg.solve(singular, np.ones(2))
    assert isinstance(info.value, np.linalg.LinAlgError) and isinstance(info.value, TiduError)
    with pytest.raises(np.linalg.LinAlgError, match="cholesky"):
        tnp.linalg.cholesky(-np.eye(2))
    with pytest.raises(LinAlgError, match="slogdet|solve"):        # log|det| is -inf there
        tnp.grad(lambda x: tnp.linalg.slogdet(x)[1])(singular)
    np.testing.assert_allclose(tnp.linalg.inv(np.eye(2) * 2), np.eye(2) / 2)   # still usable


@pytest.mark.parametrize("call, error", [
    (lambda: tnp.linalg.inv(np.ones((2, 3))), LinAlgError),
    (lambda: tnp.linalg.det(np.ones(3)), LinAlgError),
    (lambda: tnp.linalg.solve(np.eye(3), np.ones((2, 1))), ValueError),
    (lambda: tnp.linalg.eigh(np.eye(2), UPLO="X"), ValueError),
    (lambda: tnp.linalg.qr(np.eye(2), mode="raw"), NotImplementedError),
    (lambda: tnp.linalg.qr(np.eye(2), mode="bogus"), ValueError),
    (lambda: tnp.linalg.svd(np.eye(2), hermitian=True), NotImplementedError),
    (lambda: tnp.linalg.norm(np.ones(3), ord="fro"), ValueError),
    (lambda: tnp.linalg.norm(np.ones((2, 2)), ord=3), ValueError),
    (lambda: tnp.linalg.norm(np.ones((2, 2, 2)), ord=1), ValueError),
    (lambda: tnp.linalg.norm(np.ones((2, 2)), axis=(0, 0)), ValueError),
    (lambda: tnp.linalg.pinv(np.eye(2), rcond=0.1, rtol=0.1), ValueError),
    (lambda: tnp.linalg.matrix_power(np.eye(2), 1.5), TypeError),
])
def test_misuse_raises_tidu_errors_of_numpys_kinds(call, error):
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, TiduError)
    assert "linalg." in str(info.value)


def test_numpy_functions_dispatch_with_gradients():
    a = tnp.tensor(np.array([[3.0, 1.0], [1.0, 2.0]]), requires_grad=True)
    loss = np.linalg.det(a) + np.linalg.norm(np.linalg.inv(a)) + np.linalg.eigh(a)[0][1]
    grads = loss.backward()
    expected = tnp.grad(lambda x: tnp.linalg.det(x) + tnp.linalg.norm(tnp.linalg.inv(x))
                        + tnp.linalg.eigh(x)[0][1])(a.data)
    np.testing.assert_allclose(grads.grad(a), expected)
    assert np.all(np.isfinite(expected))


def test_norm_of_zero_vector_has_zero_gradient():
    assert np.array_equal(tnp.grad(tnp.linalg.norm)(np.zeros(3)), np.zeros(3))
    assert np.array_equal(tnp.grad(lambda x: tnp.linalg.norm(x, "fro"))(np.zeros((2, 2))),
                          np.zeros((2, 2)))


def test_float32_stays_float32_in_derivatives():
    a = spd(3)(np.random.default_rng(0), "float32")
    for fn in (tnp.linalg.det, lambda x: tnp.linalg.norm(x, 2), lambda x: tnp.linalg.eigvalsh(x)[0],
               lambda x: tnp.sum(tnp.linalg.cholesky(x)), lambda x: tnp.sum(tnp.linalg.pinv(x))):
        assert tnp.grad(fn)(a).dtype == np.float32


def test_jit_of_linalg():
    a = spd(3, (2,))(np.random.default_rng(0), "float64")
    def f(lib, x):
        return lib.linalg.slogdet(x)[1] + lib.linalg.norm(lib.linalg.inv(x), axis=(1, 2))
    np.testing.assert_allclose(tnp.jit(lambda x: f(tnp, x))(a), f(np, a))
    g = tnp.jit(tnp.grad(lambda x: tnp.sum(tnp.linalg.svd(x, compute_uv=False))))
    u, _, vh = np.linalg.svd(a)
    np.testing.assert_allclose(g(a), u @ vh, atol=1e-12)    # d nuclear norm = U Vh


@pytest.mark.parametrize("dtype", ["float64", "complex128", "float32"])
def test_lstsq_of_tall_matrices(dtype):
    """Values and types as NumPy's; derivatives those of the normal equations' solution."""
    a = separated_singular_values((5, 3))(np.random.default_rng(0), dtype)
    b = normal((5, 2), 1, dtype)
    got, want = tnp.linalg.lstsq(a, b), np.linalg.lstsq(a, b)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=1e-4 if dtype == "float32" else 1e-10)
    if dtype == "float32":
        return
    weights = normal((3, 2), 2, dtype)

    def loss(solve_by):
        def f(x, y):
            solution, residuals = solve_by(x, y)
            return tnp.sum(tnp.real(tnp.conj(weights) * solution)) + tnp.sum(residuals ** 2)
        return f

    def normal_equations(x, y):
        xh = tnp.conj(tnp.transpose(x))
        solution = tnp.linalg.solve(xh @ x, xh @ y)
        fit = y - x @ solution
        return solution, tnp.sum(tnp.real(tnp.conj(fit) * fit), 0)

    ours = tnp.grad(loss(lambda x, y: tnp.linalg.lstsq(x, y)[:2]), argnums=(0, 1))(a, b)
    reference = tnp.grad(loss(normal_equations), argnums=(0, 1))(a, b)
    for g, r in zip(ours, reference):
        np.testing.assert_allclose(g, r, rtol=1e-9, atol=1e-10)
    # a rank-deficient tall matrix: no residuals, as in NumPy
    x, residuals, rank, _ = tnp.linalg.lstsq(np.ones((4, 2), dtype), b[:4])
    assert residuals.shape == (0,) and rank == 1


# --- PyTorch -------------------------------------------------------------------------------------


class _TorchAsNumpy:
    """``torch`` with NumPy's spellings, for functions written once for both libraries."""

    def __init__(self, torch):
        self.torch = torch
        self.linalg = self

    def __getattr__(self, name):
        return getattr(self.torch.linalg, name, None) or getattr(self.torch, name)

    def transpose(self, a, axes):
        return self.torch.permute(a, axes)

    def vector_norm(self, x, ord, axis):
        return self.torch.linalg.vector_norm(x, ord, dim=axis)


def _singular_product(L, a):
    u, s, vh = L.linalg.svd(a, full_matrices=False)
    return (u * L.sin(s)[..., None, :]) @ vh


# (name, function of (library, array), input maker), differentiated as Re<ct, f(a)>.
# Functions of Hermitian matrices symmetrize their input first: PyTorch reads another
# triangle and returns symmetrized gradients, so only the Hermitian part is comparable.
TORCH_CASES = [
    ("inv", lambda L, a: L.linalg.inv(a), invertible(3, (2,))),
    ("det", lambda L, a: L.linalg.det(a), invertible(3, (2,))),
    ("slogdet", lambda L, a: L.linalg.slogdet(a)[1], invertible(3, (2,))),
    ("solve", lambda L, a: L.linalg.solve(a, a[..., :, :2] * 2 + 1), invertible(3, (2,))),
    ("cholesky", lambda L, a: L.linalg.cholesky(_hermitian(L, a)), spd(3, (2,))),
    ("eigh", lambda L, a: _spectral(L, _hermitian(L, a))[1], separated_spectrum(3, (2,))),
    ("eigvalsh", lambda L, a: L.linalg.eigvalsh(_hermitian(L, a)), separated_spectrum(3, (2,))),
    ("svd", lambda L, a: _singular_product(L, a), separated_singular_values((2, 4, 3))),
    ("svdvals", lambda L, a: L.linalg.svdvals(a), separated_singular_values((2, 3, 4))),
    ("qr", lambda L, a: L.linalg.qr(a)[1], separated_singular_values((2, 4, 3))),
    ("pinv", lambda L, a: L.linalg.pinv(a), separated_singular_values((2, 3, 4))),
    ("norm-nuc", lambda L, a: L.linalg.matrix_norm(a, ord="nuc"),
     separated_singular_values((2, 3, 4))),
    ("norm-2", lambda L, a: L.linalg.matrix_norm(a, ord=2), separated_singular_values((2, 3, 4))),
    ("norm-inf", lambda L, a: L.linalg.matrix_norm(a, ord=np.inf), invertible(3, (2,))),
    ("vector-norm-3", lambda L, a: L.linalg.vector_norm(a, ord=3, axis=-1), invertible(3)),
]


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("name, fn, make", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_gradients_agree_with_pytorch(name, fn, make, dtype):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    a = make(np.random.default_rng(0), dtype)
    out = np.asarray(fn(tnp, a))
    ct = normal(out.shape, 5, out.dtype)
    ours = tnp.grad(lambda x: tnp.sum(tnp.real(tnp.conj(ct) * fn(tnp, x))))(a)
    ta = torch.tensor(a, requires_grad=True)
    t_out = fn(_TorchAsNumpy(torch), ta)
    torch.sum(torch.real(torch.conj(torch.tensor(ct)) * t_out)).backward()
    np.testing.assert_allclose(out, t_out.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ours, ta.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_eigs_derivative_at_a_defective_matrix_is_refused_not_made_up():
    """At a defective matrix LAPACK's eigenvectors are numerically dependent, the solve with
    them in ``eig``'s derivative gives finite values that mean nothing, and the gradient of
    the eigenvalues' sum (the trace's, the identity) came out ``[[.29, -.71], [0, 1]]``.
    Near it (condition 2e3) and at a repeated eigenvalue with a basis, it stays exact."""
    from primitives.tensor.ops.linalg import LinAlgError

    def trace_by_eigvals(m):
        return tnp.sum(tnp.real(tnp.linalg.eigvals(m)))

    for defective in (np.array([[2.0, -1.0], [1.0, 0.0]]), np.array([[1.0, 1.0], [0.0, 1.0]])):
        with pytest.raises(LinAlgError, match="eig's derivative: the eigenvectors are not a"):
            tnp.grad(trace_by_eigvals)(defective)
    with pytest.raises(LinAlgError, match="eig's derivative"):
        tnp.grad(lambda c: tnp.sum(tnp.real(tnp.roots(c))))(np.array([1.0, -2.0, 1.0]))
    for fine in (np.array([[2.0, -1.0], [1.0, 1e-6]]), 2.0 * np.eye(3),
                 np.random.default_rng(5).standard_normal((4, 4))):
        np.testing.assert_allclose(tnp.grad(trace_by_eigvals)(fine), np.eye(len(fine)),
                                   atol=1e-12)
