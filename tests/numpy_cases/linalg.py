"""Cases for ``primitives.tensor.numpy.linalg`` (``tnp.linalg.X``, NumPy's ``np.linalg.X``).

Eigenvectors and singular vectors are unique only up to a sign (a phase), so
the cases of ``eigh`` and ``svd`` return functions of them that do not depend on
that choice (``V diag(f(w)) Vᴴ``, ``|V|²``, ``U diag(f(s)) Vh``); their raw
outputs are compared with NumPy in ``tests/test_linalg.py``. ``qr``'s raw outputs
are compared here: LAPACK's ``R`` has a real diagonal, which fixes the phase.
Each case's function is written once for both libraries (``xp`` is ``tnp`` or
``np``), so the reference is NumPy running the same code.
"""

import inspect

import numpy as np

import primitives.tensor as tnp
from numpy_cases import REAL_DTYPES, Case, _draw, normal, spd

EIGH_GAUGE = ("eigenvectors are defined up to sign/phase (a rotation, for equal eigenvalues): "
              "differentiate gauge-invariant losses only; their derivatives are not finite at "
              "equal eigenvalues, as in JAX")
SVD_GAUGE = ("singular vectors are defined up to sign/phase: differentiate gauge-invariant "
             "losses only; their derivatives are not finite at equal (or, non-square, zero) "
             "singular values, as in JAX; full_matrices: the extra vectors turn with the others")
EIG_GAUGE = ("general matrices: eigenvectors of unit norm, their phase a gauge (LAPACK's, "
             "not followed by the derivative): differentiate gauge-invariant losses only; "
             "real results when a real matrix's eigenvalues are all real (read from the "
             "values: jit needs a complex matrix); not finite at equal eigenvalues")
EIG_REAL = ("a real matrix with real eigenvalues: real eigenvectors, unique up to sign, "
            "differentiated exactly; the dtype depends on the values (no jit of real input)")
EIGVALS_NOTE = "dλ = uᴴ dA v / uᴴ v (left and right eigenvectors)"
LOWER = "reads the lower triangle (and the diagonal's real part), as NumPy"


# --- inputs -----------------------------------------------------------------------------------


def invertible(n, batch=()):
    """Well-conditioned square matrices: standard normal plus ``3 I``."""
    def make(rng, dtype):
        return (_draw(rng, batch + (n, n), dtype) + 3 * np.eye(n)).astype(dtype)
    return make


def _unitary(rng, batch, n, dtype):
    q, _ = np.linalg.qr(_draw(rng, batch + (n, n), dtype))
    return q


def separated_spectrum(n, batch=()):
    """Hermitian matrices with eigenvalues about 1 apart: ``Q diag(w) Qᴴ``."""
    def make(rng, dtype):
        q = _unitary(rng, batch, n, dtype)
        w = np.arange(n) - n / 2 + rng.uniform(-0.1, 0.1, batch + (n,))
        return ((q * w[..., None, :]) @ np.conj(np.swapaxes(q, -1, -2))).astype(dtype)
    return make


def separated_singular_values(shape):
    """Matrices with singular values about 1 apart, the smallest about 1: ``U diag(s) Vh``."""
    def make(rng, dtype):
        *batch, m, n = shape
        batch, k = tuple(batch), min(m, n)
        u = _unitary(rng, batch, m, dtype)[..., :, :k]
        vh = _unitary(rng, batch, n, dtype)[..., :k, :]
        s = 1.0 + np.arange(k)[::-1] + rng.uniform(-0.1, 0.1, batch + (k,))
        return ((u * s[..., None, :]) @ vh).astype(dtype)
    return make


def real_spectrum(n, batch=()):
    """General real matrices with real eigenvalues about 1 apart: ``S diag(w) S⁻¹``, ``S`` a
    well-conditioned non-orthogonal matrix."""
    def make(rng, dtype):
        s = np.eye(n) + 0.3 * rng.standard_normal(batch + (n, n))
        w = np.arange(n) - n / 2 + rng.uniform(-0.1, 0.1, batch + (n,))
        return ((s * w[..., None, :]) @ np.linalg.inv(s)).astype(dtype)
    return make


def complex_spectrum(n, batch=()):
    """General complex matrices with eigenvalues about 1 apart: ``S diag(w) S⁻¹``."""
    def make(rng, dtype):
        s = np.eye(n) + 0.3 * _draw(rng, batch + (n, n), np.complex128)
        w = np.arange(n) - n / 2 + 0.5j * rng.uniform(-1, 1, batch + (n,))
        return ((s * w[..., None, :]) @ np.linalg.inv(s)).astype(dtype)
    return make


def rotating():
    """Real 3 × 3 matrices with one real eigenvalue and a complex-conjugate pair."""
    def make(rng, dtype):
        s = np.eye(3) + 0.3 * rng.standard_normal((3, 3))
        core = np.array([[0.5, -1.2, 0.0], [1.2, 0.5, 0.0], [0.0, 0.0, -1.0]])
        return (s @ core @ np.linalg.inv(s)).astype(dtype)
    return make


# --- gauge-invariant functions, for both libraries ----------------------------------------


def _eig_signed(xp, a):
    """Eigenvalues and eigenvectors of a real matrix with real eigenvalues, each vector times
    the sign of its first entry (which LAPACK libraries choose differently)."""
    w, v = xp.linalg.eig(a)
    return w, v * xp.sign(v[..., :1, :])


def _eig_invariants(xp, a):
    """Eigenvalues, ``|V|²`` (unit columns: the phase is a gauge) and ``sin(A)`` from them."""
    w, v = xp.linalg.eig(a)
    return w, xp.abs(v) ** 2, (v * xp.sin(w)[..., None, :]) @ xp.linalg.inv(v)



def _mT(xp, x):
    nd = x.ndim
    return xp.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _eigh_invariants(xp, a, uplo="L"):
    w, v = xp.linalg.eigh(a, UPLO=uplo)
    spectral = (v * xp.sin(w)[..., None, :]) @ xp.conj(_mT(xp, v))    # sin of the matrix
    return w, spectral, xp.abs(v) ** 2


def _svd_invariants(xp, a):
    u, s, vh = xp.linalg.svd(a, full_matrices=False)
    return s, (u * xp.sin(s)[..., None, :]) @ vh, xp.abs(u) ** 2, xp.abs(vh) ** 2


def _svd_full_invariants(xp, a):
    """The reduced factors' product and the projector onto the extra columns' space."""
    u, s, vh = xp.linalg.svd(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    extra_u, extra_v = u[..., :, k:], vh[..., k:, :]
    return ((u[..., :, :k] * (s ** 2)[..., None, :]) @ vh[..., :k, :],
            extra_u @ xp.conj(_mT(xp, extra_u)), xp.conj(_mT(xp, extra_v)) @ extra_v)


def _qr_complete_invariants(xp, a):
    q, r = xp.linalg.qr(a, mode="complete")
    n = a.shape[-1]
    extra = q[..., :, n:]
    return q[..., :, :n], r, extra @ xp.conj(_mT(xp, extra))


def both(fn, **options):
    """``(fn(tnp, ...), fn(np, ...))`` as a Case's function and reference."""
    return (lambda a, *rest: fn(tnp, a, *rest, **options),
            lambda a, *rest: fn(np, a, *rest, **options))


def pair(name, params=("a",), **kwargs):
    """``tnp.linalg.name`` and ``np.linalg.name`` with ``kwargs``, taking ``params`` (the names
    the docs show), results as plain tuples (NumPy's named tuples become tuples)."""
    signature = inspect.Signature([inspect.Parameter(p, inspect.Parameter.POSITIONAL_ONLY)
                                   for p in params])

    def call(xp):
        def fn(*args):
            out = getattr(xp.linalg, name)(*args, **kwargs)
            return tuple(out) if isinstance(out, tuple) else out
        fn.__signature__ = signature
        return fn
    return call(tnp), call(np)


def norm_case(shape, label, ord=None, axis=None, keepdims=False, dtypes=None, note=""):
    options = dict(ord=ord, axis=axis, keepdims=keepdims)
    return Case("linalg.norm", lambda x: tnp.linalg.norm(x, **options),
                lambda x: np.linalg.norm(x, **options), (normal(shape),), label=label,
                note=note, **({} if dtypes is None else {"dtypes": dtypes}))


SVD_NORM = "2, -2, nuc: through the singular values (ties share the derivative)"

SOLVE, LSTSQ = pair("solve", ("a", "b")), pair("lstsq", ("a", "b"))

CASES = [
    Case("linalg.solve", *SOLVE, (invertible(3), normal((3, 2))), wrt=(0, 1)),
    Case("linalg.solve", *SOLVE, (invertible(3, (2,)), normal((3,))), wrt=(0, 1),
         label="batched-vector"),
    Case("linalg.solve", *SOLVE, (invertible(2, (2, 1)), normal((3, 2, 1))),
         wrt=(0, 1), label="broadcast"),
    Case("linalg.inv", *pair("inv"), (invertible(3, (2,)),)),
    Case("linalg.tensorsolve", lambda a, b: tnp.linalg.tensorsolve(a.reshape(2, 3, 3, 2), b),
         lambda a, b: np.linalg.tensorsolve(a.reshape(2, 3, 3, 2), b),
         (invertible(6), normal((2, 3))), wrt=(0, 1), note="solve of a reshaped a"),
    Case("linalg.tensorsolve",        # (axes=(0,) moves the last axis back: a is invertible)
         lambda a, b: tnp.linalg.tensorsolve(tnp.moveaxis(a.reshape(3, 2, 3, 2), -1, 0), b,
                                             axes=(0,)),
         lambda a, b: np.linalg.tensorsolve(np.moveaxis(a.reshape(3, 2, 3, 2), -1, 0), b,
                                            axes=(0,)),
         (invertible(6), normal((3, 2))), wrt=(0, 1), label="axes", note="solve of a reshaped a"),
    Case("linalg.tensorinv", lambda a: tnp.linalg.tensorinv(a.reshape(2, 3, 6), ind=2),
         lambda a: np.linalg.tensorinv(a.reshape(2, 3, 6), ind=2), (invertible(6),),
         note="inv of a reshaped a"),
    Case("linalg.det", *pair("det"), (invertible(3, (2,)),),
         note="exact at singular matrices, 2nd order too (adjugate); 3rd order raises there"),
    Case("linalg.det", *pair("det"), (normal((2, 2)),), label="2x2"),
    Case("linalg.slogdet", *pair("slogdet"), (invertible(3, (2,)),),
         note="complex sign: derivative i·Im tr(A⁻¹dA)·sign; needs A invertible"),
    Case("linalg.cholesky", *pair("cholesky"), (spd(3, (2,)),), note=LOWER),
    Case("linalg.cholesky", *pair("cholesky", upper=True), (spd(3),), label="upper",
         note="upper=True reads the upper triangle"),
    Case("linalg.eigh", *both(_eigh_invariants), (separated_spectrum(3, (2,)),),
         note=EIGH_GAUGE + "; " + LOWER),
    Case("linalg.eigh", *both(_eigh_invariants, uplo="U"), (separated_spectrum(3),),
         label="UPLO-U"),
    Case("linalg.eigvalsh", *pair("eigvalsh"), (separated_spectrum(4, (2,)),),
         note="finite at equal eigenvalues; " + LOWER),
    Case("linalg.svd", *both(_svd_invariants), (separated_singular_values((2, 4, 3)),),
         note=SVD_GAUGE),
    Case("linalg.svd", *both(_svd_invariants), (separated_singular_values((3, 5)),),
         label="wide"),
    Case("linalg.svd", *both(_svd_full_invariants), (separated_singular_values((4, 2)),),
         label="full-tall"),
    Case("linalg.svd", *both(_svd_full_invariants), (separated_singular_values((2, 2, 4)),),
         label="full-wide"),
    Case("linalg.svd", *pair("svd", compute_uv=False), (normal((2, 3, 4)),), label="values"),
    Case("linalg.svdvals", *pair("svdvals"), (normal((4, 3)),)),
    Case("linalg.qr", *pair("qr"), (normal((2, 4, 3)),),
         note="LAPACK's gauge (real diagonal of R); needs a full-rank leading block; "
              "mode='complete' with two or more rows more than columns (one, if complex) "
              "raises ADRuleError: the extra columns of Q are LAPACK's pick of a basis"),
    Case("linalg.qr", *pair("qr"), (normal((3, 5)),), label="wide"),
    Case("linalg.qr", *pair("qr", mode="r"), (normal((3, 3)),), label="r"),
    # (one extra column, real: fixed up to sign; more, or complex, is refused: test_linalg.py)
    Case("linalg.qr", *both(_qr_complete_invariants), (normal((3, 2)),), label="complete",
         dtypes=REAL_DTYPES),
    Case("linalg.pinv", *pair("pinv"), (normal((2, 4, 3)),),
         note="constant-rank derivative (Golub-Pereyra): jumps at the rcond cutoff"),
    Case("linalg.pinv", *pair("pinv"), (normal((2, 4)),), label="wide"),
    Case("linalg.pinv", *pair("pinv", hermitian=True), (spd(3),), label="hermitian"),
    # (a tall a's residuals depend on its rank, which jit cannot read: tests/test_linalg.py)
    Case("linalg.lstsq", *LSTSQ, (separated_singular_values((3, 5)), normal((3, 2))),
         wrt=(0, 1), note="x = pinv(a) @ b: constant-rank derivative, as pinv"),
    Case("linalg.lstsq", *LSTSQ, (separated_singular_values((3, 3)), normal((3,))),
         wrt=(0, 1), label="square-vector"),
    Case("linalg.matrix_power", lambda a: tnp.linalg.matrix_power(a, 5),
         lambda a: np.linalg.matrix_power(a, 5), (normal((2, 3, 3)),)),
    Case("linalg.matrix_power", lambda a: tnp.linalg.matrix_power(a, -2),
         lambda a: np.linalg.matrix_power(a, -2), (invertible(3),), label="negative"),
    Case("linalg.matrix_power", lambda a: tnp.linalg.matrix_power(a, 0),
         lambda a: np.linalg.matrix_power(a, 0), (normal((3, 3)),), wrt=(), label="zero"),
    Case("linalg.multi_dot", lambda a, b, c: tnp.linalg.multi_dot([a, b, c]),
         lambda a, b, c: np.linalg.multi_dot([a, b, c]),
         (normal((3,)), normal((3, 4)), normal((4, 2))), wrt=(0, 1, 2)),
    # vector norms
    norm_case((5,), "default", note="2-norm: derivative 0 at the zero vector; inf/-inf: ties "
              "share the derivative; 0: no derivative"),
    norm_case((2, 3, 2), "flattened-keepdims", keepdims=True),
    norm_case((3, 4), "ord=1-axis", ord=1, axis=1),
    norm_case((3, 4), "ord=inf-axis", ord=np.inf, axis=0, keepdims=True),
    norm_case((3, 4), "ord=-inf-axis", ord=-np.inf, axis=-1),
    norm_case((3, 4), "ord=3-axis", ord=3, axis=1),
    norm_case((5,), "ord=0.5", ord=0.5),
    norm_case((5,), "ord=-1", ord=-1),
    norm_case((5,), "ord=-2", ord=-2),
    norm_case((5,), "ord=2", ord=2),
    Case("linalg.norm", lambda x: tnp.linalg.norm(x, ord=0), lambda x: np.linalg.norm(x, ord=0),
         (normal((5,)),), wrt=(), label="ord=0"),
    # matrix norms
    norm_case((3, 4), "fro", ord="fro"),
    norm_case((2, 3, 4), "fro-axes", ord="fro", axis=(2, 0), keepdims=True),
    norm_case((3, 4), "nuc", ord="nuc", note=SVD_NORM),
    norm_case((2, 3, 4), "2-axes", ord=2, axis=(0, 2)),
    norm_case((3, 4), "-2", ord=-2),
    norm_case((3, 4), "1", ord=1),
    norm_case((3, 4, 2), "-1-axes", ord=-1, axis=(2, 0), keepdims=True),
    norm_case((3, 4), "inf", ord=np.inf),
    norm_case((2, 3, 4), "-inf-axes", ord=-np.inf, axis=(-1, -2)),
    Case("linalg.vector_norm", lambda x: tnp.linalg.vector_norm(x, axis=(0, 2), ord=3),
         lambda x: np.linalg.vector_norm(x, axis=(0, 2), ord=3), (normal((2, 3, 4)),)),
    Case("linalg.vector_norm", lambda x: tnp.linalg.vector_norm(x, keepdims=True),
         lambda x: np.linalg.vector_norm(x, keepdims=True), (normal((2, 3)),), label="all"),
    Case("linalg.matrix_norm", lambda x: tnp.linalg.matrix_norm(x, ord="nuc"),
         lambda x: np.linalg.matrix_norm(x, ord="nuc"), (normal((2, 3, 4)),)),
    # --- general matrices: eig, eigvals ---
    Case("linalg.eig", *both(_eig_signed), (real_spectrum(3),), dtypes=REAL_DTYPES, jit=False,
         label="real eigenvalues", note=EIG_REAL),
    Case("linalg.eig", *both(_eig_invariants), (real_spectrum(3, (2,)),), dtypes=("float64",),
         jit=False, label="real eigenvalues, batched, invariants", note=EIG_GAUGE),
    Case("linalg.eig", *both(_eig_invariants), (rotating(),), dtypes=("float64",), jit=False,
         label="complex eigenvalues of a real matrix", note=EIG_GAUGE),
    Case("linalg.eig", *both(_eig_invariants), (complex_spectrum(3, (2,)),),
         dtypes=("complex128",), label="complex matrices", note=EIG_GAUGE),
    Case("linalg.eigvals", *pair("eigvals"), (rotating(),), dtypes=("float64",), jit=False,
         note=EIGVALS_NOTE),
    Case("linalg.eigvals", *pair("eigvals"), (complex_spectrum(4),), dtypes=("complex128",),
         label="complex", note=EIGVALS_NOTE),
    # --- the Array API's names ---
    Case("linalg.outer", *pair("outer", ("x1", "x2")), (normal((3,)), normal((4,))), wrt=(0, 1)),
    Case("linalg.diagonal", *pair("diagonal", ("x",), offset=-1), (normal((2, 3, 4)),)),
    Case("linalg.trace", *pair("trace", ("x",), offset=1), (normal((2, 3, 4)),)),
    Case("linalg.cross", *pair("cross", ("x1", "x2"), axis=0), (normal((3, 2)), normal((3, 1))),
         wrt=(0, 1), note="3-vectors only (np.cross also takes 2-vectors)"),
]
