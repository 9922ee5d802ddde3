"""``numpy.linalg`` with derivatives: inverses, determinants, solves, norms and
decompositions, batched over leading axes as NumPy does.

The solves, determinants and decompositions are primitives
(:mod:`primitives.tensor.ops.linalg`) whose JVPs are written with matrix
products and solves, so they differentiate to any order; ``inv``, ``norm``,
``matrix_power`` and ``multi_dot`` are compositions. Results have NumPy's types:
``slogdet``, ``eigh``, ``svd`` and ``qr`` return named tuples with NumPy's fields,
and float32 stays float32. Singular or non-positive-definite matrices raise
:class:`LinAlgError` (NumPy's ``LinAlgError``).

Gradient conventions (JAX's and PyTorch's, but for complex inputs):

- eigenvectors and singular vectors are defined up to a sign (a phase, for
  complex matrices) and, for equal eigenvalues or singular values, up to a
  rotation within their space: differentiate only losses that do not depend on
  that choice, such as ``V @ diag(f(w)) @ V.H``, ``U @ diag(s) @ Vh`` or ``|v|²``.
  Their derivatives involve ``1 / (w_j - w_i)``: not finite at exactly equal
  eigenvalues (singular values), as in JAX; the eigenvalues' (singular values')
  own derivatives stay finite there;
- ``eig`` of a general matrix: its eigenvectors have unit norm, as NumPy's, and their
  phase is a gauge (LAPACK makes the largest component real, which is not smooth):
  derivatives of gauge-invariant quantities (``|V|``, ``v vᴴ``, ``V diag(f(w)) V⁻¹``,
  and the eigenvalues: ``dλ = uᴴ dA v / uᴴ v``) are exact, those of the raw columns of
  a complex ``V`` are not LAPACK's; for a real matrix with real eigenvalues the (real)
  eigenvectors are unique up to a sign and their derivatives exact;
- ``eigh``, ``eigvalsh``, ``cholesky`` (and ``pinv(hermitian=True)``) read the
  lower triangle only (``eigh``/``eigvalsh``: the upper one for ``UPLO="U"``, with
  NumPy's eigenvector signs), as NumPy does, and so do their derivatives;
- complex gradients are the adjoint under ``Re<a, b>`` (PyTorch's), the conjugate
  of JAX's; JVPs are JAX's.

It imports :mod:`.lowering`, :mod:`.indexing` and :mod:`.products` (and
:mod:`.dispatch`), of the NumPy package.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> float(tnp.linalg.det(np.eye(2) * 2.0))
4.0
>>> tnp.grad(lambda a: tnp.linalg.det(a))(np.array([[1.0, 2.0], [2.0, 4.0]]))  # singular: adj(A)ᵀ
array([[ 4., -2.],
       [-2.,  1.]])
"""

from __future__ import annotations

import builtins
import numbers
import operator
from typing import Any, NamedTuple

import numpy as np

from primitives.tensor.backends import NUMPY, common_library, library_of, to_library
from primitives.tensor.core import array_below, bind, data_of, dtype_of, shape_of
from primitives.tensor.errors import TensorNotSupportedError, TensorShapeError, TensorTypeError
from primitives.tensor.numpy.dispatch import implements
from primitives.tensor.numpy.indexing import getitem
from primitives.tensor.numpy.lowering import (abs, as_dtype, broadcast_to, cached_op, conj, divide,
                                              dtype_name, equal, greater, imag, max, min,
                                              multiply, no_out, normalize_axis, not_equal,
                                              operand, power, real, reshape, sqrt, subtract, sum,
                                              transpose, where)
from primitives.tensor.numpy.manipulation import diagonal as _diagonal, matrix_transpose
from primitives.tensor.numpy.manipulation import trace as _trace
from primitives.tensor.numpy.products import cross as _cross, matmul, outer as _outer, tensordot
from primitives.tensor.numpy.products import vecdot
from primitives.tensor.ops.linalg import (
    Cholesky,
    Det,
    Eig,
    Eigh,
    LinAlgError,
    Pinv,
    Qr,
    Slogdet,
    Solve,
    Svd,
)

__all__ = ["LinAlgError", "EigResult", "EighResult", "QRResult", "SVDResult", "SlogdetResult",
           "cholesky", "cond", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
           "matrix_norm", "matrix_power", "multi_dot",
           "norm", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "vector_norm",
           "matmul", "matrix_transpose", "vecdot", "tensordot", "outer", "diagonal", "trace",
           "cross", "matrix_rank", "tensorsolve", "tensorinv"]

# NumPy's own: an integer result, no derivative to lose (NumPy's dispatch runs it on the data)
matrix_rank = np.linalg.matrix_rank


class EigResult(NamedTuple):
    """``eig``'s result: the ``eigenvalues`` and the unit ``eigenvectors`` as columns."""

    eigenvalues: Any
    eigenvectors: Any


class EighResult(NamedTuple):
    """``eigh``'s result: ascending ``eigenvalues`` and the ``eigenvectors`` as columns."""

    eigenvalues: Any
    eigenvectors: Any


class QRResult(NamedTuple):
    """``qr``'s result."""

    Q: Any
    R: Any


class SVDResult(NamedTuple):
    """``svd``'s result: ``a == (U * S[..., None, :]) @ Vh``."""

    U: Any
    S: Any
    Vh: Any


class SlogdetResult(NamedTuple):
    """``slogdet``'s result: ``det == sign * exp(logabsdet)``."""

    sign: Any
    logabsdet: Any


# --- operands --------------------------------------------------------------------------------


_LINALG_DTYPES = frozenset(map(np.dtype, (np.float32, np.float64, np.complex64, np.complex128)))


def _linalg_dtype(dtype: np.dtype, fn: str) -> np.dtype:
    """The dtype NumPy's linalg computes in: integers and booleans as float64."""
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    if dtype in _LINALG_DTYPES:
        return dtype
    raise TensorTypeError(f"linalg.{fn}: array type {dtype} is unsupported in linalg")


def _matrices(a, fn: str, square: bool = True):
    """``a`` as a stack of (square) matrices of a linalg dtype; NumPy's errors otherwise."""
    a = operand(a, f"linalg.{fn}")
    shape = shape_of(a)
    if len(shape) < 2:
        raise LinAlgError(f"linalg.{fn}: {len(shape)}-dimensional array given. Array must be "
                          "at least two-dimensional")
    if square and shape[-1] != shape[-2]:
        raise LinAlgError(f"linalg.{fn}: Last 2 dimensions of the array must be square, got "
                          f"shape {shape}")
    return as_dtype(a, _linalg_dtype(dtype_of(a), fn))


def _matrix_transpose(a, conjugate: bool = False):
    nd = len(shape_of(a))
    out = transpose(a, tuple(range(nd - 2)) + (nd - 1, nd - 2))
    return conj(out) if conjugate else out


def _identity(n: int, shape: tuple, dtype) -> np.ndarray:
    return np.broadcast_to(np.eye(n, dtype=dtype), shape)


def _in_library_of(constant: np.ndarray, fn: str, *operands):
    """A NumPy constant result of ``fn`` as an array of the operands' library, on their
    device."""
    below = [array_below(x) for x in operands]
    library = common_library(below, f"linalg.{fn}")
    if library is NUMPY:
        return constant
    return to_library(constant, library, next(b for b in below if library_of(b) is library))


# --- solves and inverses -----------------------------------------------------------------------


@implements(np.linalg.solve)
def solve(a, b):
    """``np.linalg.solve``: ``x`` with ``a @ x == b``; ``b`` is a vector when 1-d, else a stack
    of matrices broadcast against ``a``."""
    a = _matrices(a, "solve")
    b = operand(b, "linalg.solve")
    dtype = _linalg_dtype(np.result_type(dtype_of(a), dtype_of(b)), "solve")
    a, b = as_dtype(a, dtype), as_dtype(b, dtype)
    n = shape_of(a)[-1]
    b_shape = shape_of(b)
    vector = len(b_shape) == 1
    if vector:
        b = reshape(b, (b_shape[0], 1))
    elif not b_shape:
        raise TensorShapeError("linalg.solve: b must be at least 1-dimensional")
    if shape_of(b)[-2] != n:
        raise TensorShapeError(f"linalg.solve: shapes {shape_of(a)} and {b_shape} do not fit: "
                               f"b needs {n} rows")
    try:
        batch = shape_of(a)[:-2]
        if shape_of(b)[:-2] != batch:
            batch = tuple(np.broadcast_shapes(batch, shape_of(b)[:-2]))
    except ValueError:
        raise TensorShapeError(f"linalg.solve: the batch axes of shapes {shape_of(a)} and "
                               f"{b_shape} cannot be broadcast together") from None
    a = broadcast_to(a, batch + (n, n))
    b = broadcast_to(b, batch + shape_of(b)[-2:])
    x = bind(cached_op(Solve, shape_of(b), dtype_name(dtype)), a, b)[0]
    return reshape(x, batch + (n,)) if vector else x


@implements(np.linalg.inv)
def inv(a):
    """``np.linalg.inv``, as ``solve(a, I)``: the derivative is ``-inv(a) @ da @ inv(a)``."""
    a = _matrices(a, "inv")
    shape = shape_of(a)
    identity = _identity(shape[-1], shape, dtype_of(a))
    return bind(Solve(shape, dtype_of(a).name), a, identity)[0]


@implements(np.linalg.tensorsolve)
def tensorsolve(a, b, axes=None):
    """``np.linalg.tensorsolve``: ``x`` with ``tensordot(a, x, x.ndim) == b``, the ``solve`` of
    ``a`` reshaped to a square matrix (``axes``: ``a``'s axes moved to the end first);
    differentiable in ``a`` and ``b`` as ``solve``.

    >>> tensorsolve(np.eye(4).reshape(2, 2, 2, 2) * 2.0, np.ones((2, 2)))
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """
    a, b = operand(a, "linalg.tensorsolve"), operand(b, "linalg.tensorsolve")
    ndim = len(shape_of(a))
    if axes is not None:
        order = list(range(ndim))
        for k in axes:                     # NumPy's: each an axis of a, once, not negative
            if k not in order:
                raise TensorShapeError(f"linalg.tensorsolve: axes must name distinct axes of "
                                       f"a (0 to {ndim - 1}), got {axes!r}")
            order.remove(k)
            order.insert(ndim, k)
        a = transpose(a, order)
    unknown_shape = shape_of(a)[len(shape_of(b)):]
    size = int(np.prod(unknown_shape, dtype=np.int64))
    if int(np.prod(shape_of(a), dtype=np.int64)) != size ** 2:
        raise LinAlgError("linalg.tensorsolve: Input arrays must satisfy the requirement "
                          "prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim])")
    for operand_ in (a, b):                # (float16: NumPy's TypeError, named here)
        _linalg_dtype(dtype_of(operand_), "tensorsolve")
    return reshape(solve(reshape(a, (size, size)), reshape(b, (-1,))), unknown_shape)


@implements(np.linalg.tensorinv)
def tensorinv(a, ind: int = 2):
    """``np.linalg.tensorinv``: the inverse of ``a`` for ``tensordot`` over its first ``ind``
    axes (``inv`` of ``a`` reshaped to a square matrix, reshaped back to
    ``a.shape[ind:] + a.shape[:ind]``); differentiable as ``inv``.

    >>> tensorinv(np.eye(4).reshape(4, 2, 2) * 2.0, ind=1).shape
    (2, 2, 4)
    """
    a = operand(a, "linalg.tensorinv")
    shape = shape_of(a)
    try:
        ind = operator.index(ind)
    except TypeError:
        raise TensorTypeError(f"linalg.tensorinv: ind must be an integer, got {ind!r}") from None
    if ind <= 0:
        raise TensorShapeError(f"linalg.tensorinv: Invalid ind argument {ind!r} (it must be "
                               "positive)")
    size = int(np.prod(shape[ind:], dtype=np.int64))
    total = int(np.prod(shape, dtype=np.int64))
    if size == 0 or total % size or total // size != size:
        raise LinAlgError(f"linalg.tensorinv: a of shape {shape} is not square for ind={ind} "
                          f"(prod(a.shape[:ind]) must equal prod(a.shape[ind:]))")
    _linalg_dtype(dtype_of(a), "tensorinv")
    return reshape(inv(reshape(a, (size, size))), shape[ind:] + shape[:ind])


@implements(np.linalg.pinv)
def pinv(a, rcond=None, hermitian: bool = False, *, rtol=np._NoValue):
    """``np.linalg.pinv``; differentiated as a matrix of constant rank (Golub and Pereyra), so
    the derivative jumps where a singular value crosses the cutoff."""
    a = _matrices(a, "pinv", square=False)
    if rcond is None:
        if rtol is np._NoValue:
            rcond = 1e-15
        elif rtol is None:
            rcond = builtins.max(shape_of(a)[-2:]) * np.finfo(dtype_of(a)).eps
        else:
            rcond = rtol
    elif rtol is not np._NoValue:
        raise TensorShapeError("linalg.pinv: `rtol` and `rcond` can't be both set.")
    if np.ndim(rcond) != 0:
        raise TensorNotSupportedError("linalg.pinv: only one scalar rcond (rtol) is supported")
    return bind(Pinv(shape_of(a), dtype_of(a).name, float(rcond), bool(hermitian)), a)[0]


@implements(np.linalg.lstsq)
def lstsq(a, b, rcond=None):
    """``np.linalg.lstsq``: ``(x, residuals, rank, s)`` with ``x = pinv(a, rcond) @ b``, the
    minimum-norm least-squares solution, differentiated at constant rank as ``pinv``. For a
    tall ``a`` whether residuals are returned depends on the rank: under ``jit`` that is a
    ``ConcretizationError``, and on Dask arrays it computes the rank."""
    a = _matrices(a, "lstsq", square=False)
    b = operand(b, "linalg.lstsq")
    if len(shape_of(a)) != 2 or len(shape_of(b)) not in (1, 2):
        raise LinAlgError(f"linalg.lstsq: a must be 2-dimensional and b 1- or 2-dimensional, "
                          f"got shapes {shape_of(a)} and {shape_of(b)}")
    dtype = _linalg_dtype(np.result_type(dtype_of(a), dtype_of(b)), "lstsq")
    a, b = as_dtype(a, dtype), as_dtype(b, dtype)
    (m, n), vector = shape_of(a), len(shape_of(b)) == 1
    if shape_of(b)[0] != m:
        raise LinAlgError(f"linalg.lstsq: Incompatible dimensions {shape_of(a)} and {shape_of(b)}")
    if rcond is None:
        rcond = np.finfo(dtype).eps * builtins.max(m, n)
    s = svdvals(a)
    cutoff = multiply(max(s), rcond) if builtins.min(m, n) else 0.0
    rank = as_dtype(sum(greater(s, cutoff)), np.int32)
    x = matmul(pinv(a, rcond), b)
    residuals = _in_library_of(np.array([], dtype=np.finfo(dtype).dtype), "lstsq", a, b)
    if m > n and bool(data_of(equal(rank, n), "linalg.lstsq: residuals are returned only for a "
                                              "full-rank a")):
        fit = subtract(b, matmul(a, x))
        residuals = sum(real(multiply(conj(fit), fit)), 0)
        residuals = reshape(residuals, (1,)) if vector else residuals
    return x, residuals, rank, s


# --- determinants --------------------------------------------------------------------------------


@implements(np.linalg.det)
def det(a):
    """``np.linalg.det``; its derivative ``adj(a)ᵀ`` is exact at singular matrices too (the
    second derivative is not finite there for ``n >= 3``)."""
    a = _matrices(a, "det")
    return bind(Det(shape_of(a), dtype_of(a).name), a)[0]


@implements(np.linalg.slogdet)
def slogdet(a) -> SlogdetResult:
    """``np.linalg.slogdet``: ``(sign, logabsdet)``; the derivative needs ``a`` invertible."""
    a = _matrices(a, "slogdet")
    sign, logabsdet = bind(Slogdet(shape_of(a), dtype_of(a).name), a)
    return SlogdetResult(sign, logabsdet)


# --- decompositions -------------------------------------------------------------------------------


def _triangle(uplo, fn: str) -> str:
    """``"L"`` or ``"U"``, the triangle ``uplo`` names (either case, as NumPy)."""
    if not isinstance(uplo, str) or uplo.upper() not in ("L", "U"):
        raise TensorShapeError(f"linalg.{fn}: UPLO argument must be 'L' or 'U', got {uplo!r}")
    return uplo.upper()


@implements(np.linalg.cholesky)
def cholesky(a, /, *, upper: bool = False):
    """``np.linalg.cholesky``: ``L`` with ``a == L @ L.H`` from ``a``'s lower triangle (``upper``:
    ``U == L.H`` from its upper triangle); derivative by Murray's formula."""
    a = _matrices(a, "cholesky")
    if upper:
        a = _matrix_transpose(a, conjugate=True)
    factor = bind(cached_op(Cholesky, shape_of(a), dtype_name(dtype_of(a))), a)[0]
    return _matrix_transpose(factor, conjugate=True) if upper else factor


def _real_if_real_matrix(a, outputs: list, fn: str) -> list:
    """NumPy's rule: the eigen-results of a real matrix whose eigenvalues are all real are
    real arrays (complex otherwise). That reads the eigenvalues, which ``jit`` and ``vmap``
    do not know while they trace (and computes them, for a Dask array)."""
    if dtype_of(a).kind == "c":
        return outputs
    all_real = data_of(equal(max(abs(imag(outputs[0]))), 0) if 0 not in shape_of(outputs[0])
                       else True,
                       f"linalg.{fn}: reading whether a real matrix's eigenvalues are all real "
                       "(NumPy's result is then real, else complex); give a complex matrix "
                       "(a.astype(complex)) for complex results always, as JAX's")
    return [real(x) for x in outputs] if bool(all_real) else outputs


@implements(np.linalg.eig)
def eig(a) -> EigResult:
    """``np.linalg.eig``: ``(eigenvalues, eigenvectors)`` of general square matrices, the
    eigenvectors as unit columns; real arrays when ``a`` is real and so are all its
    eigenvalues (read from the values: under ``jit`` pass a complex ``a``; a real Dask
    array is computed for it), else complex.
    Eigenvalue derivatives are exact (``dλ = uᴴ dA v / uᴴ v``); eigenvectors are defined up
    to a phase (a gauge, not fixed by the derivative): differentiate gauge-invariant
    quantities only (``|V|``, ``v vᴴ``), as for ``eigh``; real eigenvectors of real
    matrices, unique up to sign, differentiate exactly. Not finite at equal eigenvalues;
    at a defective matrix (eigenvectors not a basis) the derivative raises ``LinAlgError``.

    >>> a = np.array([[2.0, 1.0], [0.0, 3.0]])
    >>> eig(a).eigenvalues
    array([2., 3.])
    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda m: tnp.sum(eig(m).eigenvalues))(a).round(12) + 0.0   # d trace = I
    array([[1., 0.],
           [0., 1.]])
    >>> eig(np.array([[0.0, -1.0], [1.0, 0.0]])).eigenvalues          # rotation: complex
    array([0.+1.j, 0.-1.j])
    """
    a = _matrices(a, "eig")
    w, v = bind(Eig(shape_of(a), dtype_of(a).name), a)
    return EigResult(*_real_if_real_matrix(a, [w, v], "eig"))


@implements(np.linalg.eigvals)
def eigvals(a):
    """``np.linalg.eigvals``: the eigenvalues of general square matrices, real or complex as
    :func:`eig`'s; derivative ``dλ = uᴴ dA v / uᴴ v`` (``u``, ``v``: left and right
    eigenvectors), finite where the eigenvectors are independent; where they are not (a
    defective matrix) it raises ``LinAlgError``.

    >>> import primitives.tensor as tnp
    >>> a = np.array([[0.0, -2.0], [2.0, 0.0]])           # eigenvalues ±2i: |λ| = sqrt(det)
    >>> tnp.grad(lambda m: tnp.sum(tnp.abs(eigvals(m))))(a).round(12) + 0.0   # adj(a)ᵀ/sqrt(det)
    array([[ 0., -1.],
           [ 1.,  0.]])
    """
    a = _matrices(a, "eigvals")
    [w] = bind(Eig(shape_of(a), dtype_of(a).name, compute_v=False), a)
    return _real_if_real_matrix(a, [w], "eigvals")[0]


@implements(np.linalg.eigh)
def eigh(a, UPLO: str = "L") -> EighResult:
    """``np.linalg.eigh``: ``(eigenvalues, eigenvectors)``; eigenvector derivatives are JAX's
    (gauge-invariant losses only; not finite at equal eigenvalues)."""
    uplo = _triangle(UPLO, "eigh")
    a = _matrices(a, "eigh")
    w, v = bind(Eigh(shape_of(a), dtype_of(a).name, uplo=uplo), a)
    return EighResult(w, v)


@implements(np.linalg.eigvalsh)
def eigvalsh(a, UPLO: str = "L"):
    """``np.linalg.eigvalsh``; the derivative ``Re diag(Vᴴ da V)`` stays finite at equal
    eigenvalues, where it is exact for their sum (and symmetric functions of them)."""
    uplo = _triangle(UPLO, "eigvalsh")
    a = _matrices(a, "eigvalsh")
    return bind(Eigh(shape_of(a), dtype_of(a).name, compute_v=False, uplo=uplo), a)[0]


@implements(np.linalg.svd)
def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False):
    """``np.linalg.svd``: ``(U, S, Vh)`` or ``S``; singular-vector derivatives are JAX's
    (gauge-invariant losses only; not finite at equal or, for non-square ``a``, zero singular
    values); with ``full_matrices`` the extra columns turn with the others, no more."""
    a = _matrices(a, "svd", square=False)
    if hermitian:
        raise TensorNotSupportedError("linalg.svd: hermitian=True is not supported; use "
                                      "hermitian=False (the same singular values)")
    op = Svd(shape_of(a), dtype_of(a).name, bool(full_matrices), bool(compute_uv))
    outs = bind(op, a)
    return SVDResult(*outs) if compute_uv else outs[0]


@implements(np.linalg.svdvals)
def svdvals(x, /):
    """``np.linalg.svdvals``: the singular values, descending."""
    return svd(x, compute_uv=False)


_QR_MODES = ("reduced", "complete", "r")


@implements(np.linalg.qr)
def qr(a, mode: str = "reduced"):
    """``np.linalg.qr`` in mode ``"reduced"``, ``"complete"`` or ``"r"``; the derivative needs
    ``a``'s leading square block of full rank. A tall Dask matrix is factored chunk by chunk
    (Dask's ``tsqr``): its factors can differ from NumPy's by the signs of ``R``'s rows
    (the columns of ``Q``)."""
    if mode not in _QR_MODES:
        if mode in ("raw", "full", "f", "economic", "e"):
            raise TensorNotSupportedError(f"linalg.qr: mode {mode!r} is not supported; use one "
                                          f"of {_QR_MODES}")
        raise TensorShapeError(f"linalg.qr: Unrecognized mode '{mode}'")
    a = _matrices(a, "qr", square=False)
    outs = bind(Qr(shape_of(a), dtype_of(a).name, mode), a)
    return outs[0] if mode == "r" else QRResult(*outs)


# --- products ---------------------------------------------------------------------------------


@implements(np.linalg.matrix_power)
def matrix_power(a, n: int):
    """``np.linalg.matrix_power`` by repeated squaring (negative ``n``: of ``inv(a)``)."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TensorTypeError("linalg.matrix_power: exponent must be an integer") from None
    a = operand(a, "linalg.matrix_power")
    shape = shape_of(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise LinAlgError(f"linalg.matrix_power: the last 2 dimensions of shape {shape} must be "
                          "square")
    if n == 0:
        return _in_library_of(_identity(shape[-1], shape, dtype_of(a)).copy(), "matrix_power", a)
    if n < 0:
        a, n = inv(a), -n
    result, power_of_a = None, a
    while True:
        if n & 1:
            result = power_of_a if result is None else matmul(result, power_of_a)
        n >>= 1
        if not n:
            return result
        power_of_a = matmul(power_of_a, power_of_a)


@implements(np.linalg.multi_dot)
def multi_dot(arrays, *, out=None):
    """``np.linalg.multi_dot``: a 1-d first (last) array is a row (column) vector."""
    no_out(out, "linalg.multi_dot")
    arrays = [operand(x, "linalg.multi_dot") for x in arrays]
    if len(arrays) < 2:
        raise TensorShapeError("linalg.multi_dot: expecting at least two arrays")
    first, last = shape_of(arrays[0]), shape_of(arrays[-1])
    if len(first) == 1:
        arrays[0] = reshape(arrays[0], (1, first[0]))
    if len(last) == 1:
        arrays[-1] = reshape(arrays[-1], (last[0], 1))
    for x in arrays:
        if len(shape_of(x)) != 2:
            raise LinAlgError(f"linalg.multi_dot: {len(shape_of(x))}-dimensional array given. "
                              "Array must be two-dimensional")
    result = arrays[0]
    for x in arrays[1:]:
        result = matmul(result, x)
    if len(first) == 1 and len(last) == 1:
        return reshape(result, ())
    if len(first) == 1 or len(last) == 1:
        return reshape(result, (-1,))
    return result


# --- norms ---------------------------------------------------------------------------------------


def _largest(x, axis, keepdims: bool = False):
    """``max`` over ``axis``, 0 where that axis is empty (NumPy's norms use ``initial=0``:
    the norm of an empty array is 0)."""
    if shape_of(x)[axis]:
        return max(x, axis, keepdims=keepdims)
    return max(x, axis, keepdims=keepdims, initial=0)


def _two_norm(x, axis, keepdims: bool):
    """``sqrt(sum(|x|²))`` with derivative 0 at 0 (PyTorch's subgradient, not NaN)."""
    squares = multiply(conj(x), x) if dtype_of(x).kind == "c" else multiply(x, x)
    total = sum(real(squares), axis, keepdims=keepdims)
    zero = equal(total, 0)
    return where(zero, 0, sqrt(where(zero, 1, total)))


def _vector_norm(x, ord, axis: int, keepdims: bool):
    if ord is None or ord == 2:
        return _two_norm(x, axis, keepdims)
    if isinstance(ord, str):
        raise TensorShapeError(f"linalg.norm: Invalid norm order '{ord}' for vectors")
    if ord == np.inf:
        return _largest(abs(x), axis, keepdims)
    if ord == -np.inf:
        return min(abs(x), axis, keepdims=keepdims)
    if ord == 0:
        counted = as_dtype(not_equal(x, 0), np.finfo(dtype_of(x)).dtype)
        return sum(counted, axis, keepdims=keepdims)
    if ord == 1:
        return sum(abs(x), axis, keepdims=keepdims)
    if ord < 1:                 # |x|**ord has no derivative at 0: PyTorch's subgradient 0 there
        nonzero = not_equal(x, 0)
        terms = power(where(nonzero, abs(x), 1), ord)
        total = sum(where(nonzero, terms, 0 if ord > 0 else np.inf), axis, keepdims=keepdims)
        return power(total, 1.0 / ord)
    total = sum(power(abs(x), ord), axis, keepdims=keepdims)
    zero = equal(total, 0)      # derivative 0 at the zero vector, as the 2-norm's (not NaN)
    return where(zero, 0, power(where(zero, 1, total), 1.0 / ord))


def _matrix_norm(x, ord, axes: tuple, keepdims: bool):
    row_axis, column_axis = axes
    shape = shape_of(x)
    nd = len(shape)
    if ord in (2, -2, "nuc"):
        others = tuple(i for i in range(nd) if i not in axes)
        singular = svd(transpose(x, others + axes), compute_uv=False)
        result = {2: _largest, -2: min}.get(ord, sum)(singular, -1)
    elif ord in (1, -1):
        extremum = _largest if ord == 1 else min
        result = extremum(sum(abs(x), row_axis), column_axis - (column_axis > row_axis))
    elif ord in (np.inf, -np.inf):
        extremum = _largest if ord == np.inf else min
        result = extremum(sum(abs(x), column_axis), row_axis - (row_axis > column_axis))
    elif ord is None or ord in ("fro", "f"):
        result = _two_norm(x, axes, False)
    else:
        raise TensorShapeError(f"linalg.norm: Invalid norm order {ord!r} for matrices")
    if keepdims:
        result = reshape(result, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return result


@implements(np.linalg.norm)
def norm(x, ord=None, axis=None, keepdims: bool = False):
    """``np.linalg.norm``: every ``ord`` NumPy has, over one axis (vector) or two (matrix).
    Derivatives: 0 at the zero vector for the vector norms of ``ord > 1`` (PyTorch's
    subgradient; the 2-norm's too), and in the zero entries for ``ord < 1``; ties of
    ``inf``/``-inf`` norms and of ``2``/``-2`` matrix norms share the derivative; ``2``,
    ``-2`` and ``"nuc"`` go through the singular values (``"nuc"`` needs them nonzero, as
    ``|x|`` needs ``x != 0``)."""
    x = operand(x, "linalg.norm")
    if dtype_of(x).kind in "biu":       # NumPy's: other dtypes stay (float16 too; its norms
        x = as_dtype(x, np.float64)       # through the singular values refuse it, as NumPy's)
    elif dtype_of(x).kind not in "fc":
        raise TensorTypeError(f"linalg.norm: array type {dtype_of(x)} is unsupported in linalg")
    nd = len(shape_of(x))
    if axis is None:
        if ord is None or (ord in ("f", "fro") and nd == 2) or (ord == 2 and nd == 1):
            result = _two_norm(reshape(x, (-1,)), 0, False)
            return reshape(result, (1,) * nd) if keepdims else result
        axis = tuple(range(nd))
    elif not isinstance(axis, tuple):
        if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
            raise TensorTypeError("linalg.norm: 'axis' must be None, an integer or a tuple of "
                                  "integers")
        axis = (axis,)
    axes = tuple(normalize_axis(a, nd, "linalg.norm") for a in axis)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) == 2:
        if axes[0] == axes[1]:
            raise TensorShapeError("linalg.norm: Duplicate axes given.")
        return _matrix_norm(x, ord, axes, keepdims)
    raise TensorShapeError("linalg.norm: Improper number of dimensions to norm.")


@implements(np.linalg.vector_norm)
def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2):
    """``np.linalg.vector_norm``: over all axes (flattened) by default, or ``axis``."""
    x = operand(x, "linalg.vector_norm")
    shape = shape_of(x)
    if axis is None:
        result = norm(reshape(x, (-1,)), ord, 0)
        return reshape(result, (1,) * len(shape)) if keepdims else result
    if isinstance(axis, tuple) and len(axis) != 1:
        axes = tuple(normalize_axis(a, len(shape), "linalg.vector_norm") for a in axis)
        others = tuple(i for i in range(len(shape)) if i not in axes)
        flat = reshape(transpose(x, others + axes), tuple(shape[i] for i in others) + (-1,))
        result = norm(flat, ord, -1)
        if keepdims:
            result = reshape(result, tuple(1 if i in axes else n for i, n in enumerate(shape)))
        return result
    return norm(x, ord, axis, keepdims)


@implements(np.linalg.matrix_norm)
def matrix_norm(x, /, *, keepdims: bool = False, ord="fro"):
    """``np.linalg.matrix_norm``: the norm of each matrix over the last two axes."""
    x = operand(x, "linalg.matrix_norm")
    if len(shape_of(x)) < 2:
        raise LinAlgError("linalg.matrix_norm: the input must be at least two-dimensional")
    return norm(x, ord, (-2, -1), keepdims)


@implements(np.linalg.cond)
def cond(x, p=None):
    """``np.linalg.cond``: ``s_max / s_min`` for ``p`` None, 2 or -2 (from the singular
    values, so the derivative is that of a ratio of singular values: see :func:`svd` for
    repeated ones), else ``norm(x, p) * norm(inv(x), p)``.

    >>> float(cond(np.diag([4.0, 0.5])))
    8.0
    """
    if p is None or p in (2, -2):
        s = svdvals(x)
        largest, smallest = getitem(s, (Ellipsis, 0)), getitem(s, (Ellipsis, -1))
        return divide(smallest, largest) if p == -2 else divide(largest, smallest)
    x = _matrices(x, "cond")
    shape = shape_of(x)
    # NumPy's: inf for a matrix LAPACK finds singular (an exact zero pivot of its LU, where
    # slogdet's log|det| is -inf), not an error; such a matrix is inverted as I instead
    singular = equal(slogdet(x).logabsdet, -np.inf)
    invertible = where(reshape(singular, shape[:-2] + (1, 1)),
                       _identity(shape[-1], shape, dtype_of(x)), x)
    ratio = multiply(norm(x, p, axis=(-2, -1)), norm(inv(invertible), p, axis=(-2, -1)))
    return where(singular, np.inf, ratio)


# --- the Array API's names (NumPy 2's np.linalg.matmul, .vecdot... are tnp's matmul, vecdot...)


def _at_least_2d(x, fn: str):
    x = operand(x, f"linalg.{fn}")
    if len(shape_of(x)) < 2:
        raise TensorShapeError(f"linalg.{fn}: input array must be at least 2-dimensional, got "
                               f"shape {shape_of(x)}")
    return x


@implements(np.linalg.outer)
def outer(x1, x2, /):
    """``np.linalg.outer``: the outer product of two 1-d arrays (``np.outer`` flattens them;
    this refuses other shapes, as NumPy's does).

    >>> outer(np.array([1.0, 2.0]), np.array([3.0, -1.0]))
    array([[ 3., -1.],
           [ 6., -2.]])
    """
    x1, x2 = operand(x1, "linalg.outer"), operand(x2, "linalg.outer")
    if len(shape_of(x1)) != 1 or len(shape_of(x2)) != 1:
        raise TensorShapeError(f"linalg.outer: input arrays must be one-dimensional, got shapes "
                               f"{shape_of(x1)} and {shape_of(x2)}")
    return _outer(x1, x2)


@implements(np.linalg.diagonal)
def diagonal(x, /, *, offset: int = 0):
    """``np.linalg.diagonal``: the ``offset``-th diagonals of the matrices ``x`` (last two axes).

    >>> diagonal(np.arange(8.0).reshape(2, 2, 2))
    array([[0., 3.],
           [4., 7.]])
    """
    return _diagonal(_at_least_2d(x, "diagonal"), offset, -2, -1)


@implements(np.linalg.trace)
def trace(x, /, *, offset: int = 0, dtype=None):
    """``np.linalg.trace``: the traces of the matrices ``x`` (last two axes).

    >>> trace(np.stack([np.eye(2), 2 * np.eye(2)]))
    array([2., 4.])
    """
    return _trace(_at_least_2d(x, "trace"), offset, -2, -1, dtype)


@implements(np.linalg.cross)
def cross(x1, x2, /, *, axis: int = -1):
    """``np.linalg.cross``: the cross products of 3-vectors along ``axis`` (``np.cross``
    also takes 2-vectors; this refuses them, as NumPy's does).

    >>> cross(np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]))
    array([0., 0., 1.])
    """
    x1, x2 = operand(x1, "linalg.cross"), operand(x2, "linalg.cross")
    for x in (x1, x2):
        shape = shape_of(x)
        if not shape or shape[normalize_axis(axis, len(shape), "linalg.cross")] != 3:
            raise TensorShapeError(f"linalg.cross: both input arrays must be (arrays of) "
                                   f"3-dimensional vectors along axis {axis}, got shapes "
                                   f"{shape_of(x1)} and {shape_of(x2)}")
    return _cross(x1, x2, axis=axis)
