"""``scipy.linalg``'s triangular and Cholesky solves and ``expm``, differentiable (JAX's
``jax.scipy.linalg``, for tidu).

- :func:`solve_triangular`, :func:`cholesky`, :func:`cho_factor`, :func:`cho_solve`,
  :func:`expm`, and :func:`solve`, :func:`inv`, :func:`det`, :func:`block_diag`, with
  SciPy's names, signatures and defaults: SciPy's :func:`cholesky` and :func:`cho_factor`
  give the UPPER factor unless ``lower=True`` (NumPy's ``cholesky`` the lower one).

Every function is a composition of ``tnp`` operations (``tnp.linalg.solve``,
``tnp.linalg.cholesky``, ``tnp.tril``/``tnp.triu``, products), so each differentiates
to any order under every transform (``grad``, ``jit``, ``vmap``, ``hessian``...), for
the eager ``Tensor``, in float32, float64 and complex, on every array library tidu
runs on. What that costs and how it differs from SciPy:

- a triangular solve is a general solve (LU, O(n³)) of the triangle, not LAPACK's
  ``trtrs`` (O(n²) per right-hand side): its values equal SciPy's to rounding, not bit
  for bit, and a zero on the diagonal raises tidu's ``LinAlgError`` ("Singular
  matrix"), as SciPy raises its own. Only the triangle SciPy reads is read (with the
  diagonal taken as ones for ``unit_diagonal``), so derivatives with respect to the
  other entries are exactly 0, as they are for SciPy's function; the same holds for
  :func:`cholesky` (which reads one triangle) and :func:`cho_solve` (which reads the
  factor's triangle of ``c``);
- :func:`cho_factor`'s ``c`` has zeros in its other triangle (SciPy's holds ``a``'s
  entries there, documented as "random data"; JAX's has zeros too);
- :func:`expm` is Higham's scaling and squaring with Padé approximants of degree 3 to 13
  (2005; JAX's algorithm, with Higham's ``ceil`` for the number of squarings), SciPy's is
  Al-Mohy and Higham's 2009 refinement of it: values agree to rounding (about 1e-14
  relative for float64 matrices of moderate norm), and the derivative is that of the
  approximant, accurate to the same order. The degree and the number of squarings are
  chosen for each matrix of a stack from its 1-norm; where the values are not known
  (under ``jit`` and ``vmap``) every degree is computed and selected (``tnp.where``) and
  ``max_squarings`` (JAX's keyword, default 16) squarings are gated, so a matrix of
  1-norm over ``2**16 * 5.37`` (about 352,000) gives NaN there (JAX's threshold is twice
  that: it squares once fewer, Higham's ``ceil`` being its ``floor``);
- ``overwrite_a`` and ``overwrite_b`` are accepted and ignored (nothing is overwritten).
  ``check_finite=True`` (the default) raises :class:`~primitives.tensor.errors.TensorShapeError`
  (a ``ValueError``, SciPy's "array must not contain infs or NaNs") where the values are
  known: not under ``jit`` or ``vmap``, and not for Dask arrays (which stay lazy);
- integer and boolean inputs compute in float64, float16 in float32, as SciPy's.

Batching: every function takes stacks of matrices ``(..., n, n)`` with broadcast batch
axes (SciPy accepts batches too since 1.15); a 1-d ``b`` is one vector for every matrix
of the stack, otherwise ``b`` is a stack of ``(n, k)`` matrices, as for SciPy and
``numpy.linalg.solve``.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> from primitives.tensor.scipy import linalg
>>> linalg.solve_triangular(np.array([[2.0, 1.0], [0.0, 4.0]]), np.array([4.0, 8.0]))
array([1., 2.])
>>> rotation = np.array([[0.0, 1.0], [-1.0, 0.0]])
>>> float(tnp.grad(lambda t: tnp.trace(linalg.expm(t * rotation)))(0.5))  # d(2 cos t)/dt
-0.958851077208...
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from primitives.tensor import numpy as tnp
from primitives.tensor.backends import library_of
from primitives.tensor.core import array_below, data_if_known, dtype_of, shape_of
from primitives.tensor.errors import TensorNotSupportedError, TensorShapeError, TensorTypeError
from primitives.tensor.numpy.lowering import as_dtype, operand, stop_gradient

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "det", "expm", "inv", "solve",
           "solve_triangular"]


# --- operands ---------------------------------------------------------------------------------


def _compute_dtype(dtype: np.dtype, fn: str) -> np.dtype:
    """SciPy's LAPACK dtype: integers and booleans as float64, float16 as float32."""
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    if dtype == np.float16:
        return np.dtype(np.float32)
    if dtype in (np.float32, np.float64, np.complex64, np.complex128):
        return dtype
    raise TensorTypeError(f"scipy.linalg.{fn}: array type {dtype} is unsupported in linalg")


def _check_finite(check: bool, fn: str, *arrays) -> None:
    """SciPy's ``check_finite``: a ``ValueError`` for infs or NaNs, where the values are known
    (not while ``jit`` or ``vmap`` trace; Dask arrays are not computed for it)."""
    if not check:
        return
    for x in arrays:
        if library_of(array_below(x)).name == "dask":
            continue
        finite = data_if_known(tnp.all(tnp.isfinite(stop_gradient(x))))
        if finite is not None and not bool(finite):
            raise TensorShapeError(f"scipy.linalg.{fn}: array must not contain infs or NaNs")


def _square(a, fn: str):
    """``a`` as a stack of square matrices in SciPy's dtype."""
    a = operand(a, f"scipy.linalg.{fn}")
    shape = shape_of(a)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise TensorShapeError(f"scipy.linalg.{fn}: expected square matrix (or a stack of "
                               f"them), got shape {shape}")
    return as_dtype(a, _compute_dtype(dtype_of(a), fn))


def _with_rhs(a, b, fn: str):
    """``a`` and ``b`` in their common dtype."""
    b = operand(b, f"scipy.linalg.{fn}")
    if not shape_of(b):
        raise TensorShapeError(f"scipy.linalg.{fn}: b must be at least 1-dimensional")
    dtype = _compute_dtype(np.result_type(dtype_of(a), dtype_of(b)), fn)
    return as_dtype(a, dtype), as_dtype(b, dtype)


def _mT(a, conjugate: bool = False):
    out = tnp.swapaxes(a, -1, -2)
    return tnp.conj(out) if conjugate else out


def _eye(a):
    """The identity of ``a``'s matrices' size and dtype."""
    return np.eye(shape_of(a)[-1], dtype=dtype_of(a))


def _triangle(a, lower: bool, unit_diagonal: bool = False):
    """The triangle of ``a`` SciPy reads (ones on the diagonal for ``unit_diagonal``)."""
    if unit_diagonal:
        strict = tnp.tril(a, -1) if lower else tnp.triu(a, 1)
        return tnp.add(strict, _eye(a))
    return tnp.tril(a) if lower else tnp.triu(a)


def _hermitian(a, lower: bool, conjugate: bool):
    """The symmetric (Hermitian, ``conjugate``) matrix of ``a``'s ``lower`` (upper) triangle;
    the Hermitian one with the diagonal's real part, as LAPACK reads it."""
    strict = tnp.tril(a, -1) if lower else tnp.triu(a, 1)
    diagonal = tnp.subtract(_triangle(a, lower), strict)
    if conjugate and dtype_of(a).kind == "c":
        diagonal = tnp.astype(tnp.real(diagonal), dtype_of(a))
    return tnp.add(tnp.add(strict, _mT(strict, conjugate)), diagonal)


_TRANS = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}


# --- triangular and Cholesky solves -------------------------------------------------------------


def _solve_triangle(t, b, trans: int):
    """``op(t) x = b`` for the triangle ``t``, by a general solve."""
    if trans:
        t = _mT(t, conjugate=trans == 2)
    return tnp.linalg.solve(t, b)


def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, check_finite: bool = True):
    """``scipy.linalg.solve_triangular``: ``x`` with ``a x = b`` (``trans`` 0 or ``'N'``),
    ``aᵀ x = b`` (1, ``'T'``) or ``aᴴ x = b`` (2, ``'C'``), reading only ``a``'s upper
    triangle (``lower``: the lower one), its diagonal taken as ones for ``unit_diagonal``.
    Computed as a general solve of that triangle (O(n³)); derivatives with respect to the
    unread entries are exactly 0. ``overwrite_b`` is ignored.

    >>> a = np.array([[3.0, 0.0], [1.0, 2.0]])
    >>> solve_triangular(a, np.array([3.0, 5.0]), lower=True)
    array([1., 2.])
    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda m: tnp.sum(solve_triangular(m, np.ones(2), lower=True)))(a)
    array([[-0.05555556,  0.        ],
           [-0.16666667, -0.16666667]])
    """
    if trans not in _TRANS or isinstance(trans, bool):
        raise TensorShapeError(f"scipy.linalg.solve_triangular: trans must be 0, 1, 2, 'N', "
                               f"'T' or 'C', got {trans!r}")
    a, b = _with_rhs(_square(a, "solve_triangular"), b, "solve_triangular")
    _check_finite(check_finite, "solve_triangular", a, b)
    return _solve_triangle(_triangle(a, lower, unit_diagonal), b, _TRANS[trans])


def cholesky(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """``scipy.linalg.cholesky``: the UPPER factor ``U`` with ``a == Uᴴ U``, from ``a``'s upper
    triangle (SciPy's default, unlike ``numpy.linalg.cholesky``); ``lower=True``: ``L`` with
    ``a == L Lᴴ`` from the lower triangle. Raises ``LinAlgError`` unless ``a`` is positive
    definite. ``overwrite_a`` is ignored.

    >>> cholesky(np.array([[4.0, 2.0], [2.0, 5.0]]))
    array([[2., 1.],
           [0., 2.]])
    >>> cholesky(np.array([[4.0, 2.0], [2.0, 5.0]]), lower=True)
    array([[2., 0.],
           [1., 2.]])
    """
    a = _square(a, "cholesky")
    _check_finite(check_finite, "cholesky", a)
    return tnp.linalg.cholesky(a, upper=not lower)


def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """``scipy.linalg.cho_factor``: ``(c, lower)`` for :func:`cho_solve`, ``c`` the factor of
    :func:`cholesky` (upper unless ``lower``). Its other triangle is zero (SciPy's holds
    ``a``'s entries there, "random data" in its documentation).

    >>> c, low = cho_factor(np.array([[4.0, 2.0], [2.0, 5.0]]))
    >>> c, low
    (array([[2., 1.],
           [0., 2.]]), False)
    """
    return cholesky(a, lower, overwrite_a, check_finite), bool(lower)


def cho_solve(c_and_lower, b, overwrite_b: bool = False, check_finite: bool = True):
    """``scipy.linalg.cho_solve``: ``x`` with ``a x = b`` given ``(c, lower) = cho_factor(a)``:
    two triangular solves with ``c``'s ``lower`` (upper) triangle, the only entries read.
    ``overwrite_b`` is ignored.

    >>> a = np.array([[4.0, 2.0], [2.0, 5.0]])
    >>> cho_solve(cho_factor(a), np.array([6.0, 7.0]))
    array([1., 1.])
    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda m: tnp.sum(cho_solve(cho_factor(m), np.array([6.0, 7.0]))))(a)  # upper
    array([[-0.1875, -0.3125],
           [-0.    , -0.125 ]])
    """
    if not isinstance(c_and_lower, (tuple, list)) or len(c_and_lower) != 2:
        raise TensorTypeError("scipy.linalg.cho_solve: c_and_lower must be the pair (c, lower) "
                              "cho_factor returns")
    c, lower = c_and_lower
    c, b = _with_rhs(_square(c, "cho_solve"), b, "cho_solve")
    _check_finite(check_finite, "cho_solve", c, b)
    factor = _triangle(c, bool(lower))
    vector = len(shape_of(b)) == 1          # one vector for every matrix of a stack
    if vector:
        b = tnp.reshape(b, (shape_of(b)[0], 1))
    if lower:                               # L Lᴴ x = b
        x = _solve_triangle(factor, _solve_triangle(factor, b, 0), 2)
    else:                                   # Uᴴ U x = b
        x = _solve_triangle(factor, _solve_triangle(factor, b, 2), 0)
    return x[..., 0] if vector else x


# --- solve, inv, det ---------------------------------------------------------------------


_STRUCTURES = {
    None: "general", "gen": "general", "general": "general", "banded": "general",
    "diagonal": "diagonal", "tridiagonal": "tridiagonal",
    "upper triangular": "upper triangular", "lower triangular": "lower triangular",
    "sym": "symmetric", "symmetric": "symmetric", "her": "hermitian", "hermitian": "hermitian",
    "pos": "positive definite", "positive definite": "positive definite",
}


def _structured(a, assume_a, lower: bool, fn: str, allowed=None):
    """``(matrix, structure)``: the matrix SciPy's solver for ``assume_a`` reads from ``a``."""
    structure = _STRUCTURES.get(assume_a) if isinstance(assume_a, (str, type(None))) else None
    if structure is None or (allowed is not None and structure not in allowed):
        raise TensorShapeError(f"scipy.linalg.{fn}: {assume_a!r} is not a recognized matrix "
                               f"structure")
    if structure == "diagonal":
        return tnp.multiply(a, _eye(a)), structure
    if structure == "tridiagonal":
        return tnp.triu(tnp.tril(a, 1), -1), structure
    if structure in ("upper triangular", "lower triangular"):
        return _triangle(a, structure == "lower triangular"), structure
    if structure in ("symmetric", "hermitian", "positive definite"):
        return _hermitian(a, lower, structure != "symmetric"), structure
    return a, structure


def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          check_finite: bool = True, assume_a=None, transposed: bool = False):
    """``scipy.linalg.solve``: ``x`` with ``a x = b`` (``aᵀ x = b`` if ``transposed``; complex
    ``a`` refused, as SciPy). ``assume_a`` reads what SciPy's solver reads: ``"sym"``,
    ``"her"`` and ``"pos"`` one triangle (the upper unless ``lower``), ``"diagonal"``,
    ``"tridiagonal"``, ``"upper triangular"`` and ``"lower triangular"`` their part;
    ``"diagonal"`` takes the off-diagonal entries as 0 (SciPy 1.17's ``inv`` leaves them in
    its result); ``"pos"`` goes through the Cholesky factor (``LinAlgError`` unless positive
    definite), the others through ``tnp.linalg.solve``. ``None`` (SciPy detects the structure) and
    ``"banded"`` solve the general matrix, equal to rounding. ``overwrite_*`` are ignored.

    >>> solve(np.array([[3.0, 2.0], [1.0, -1.0]]), np.array([2.0, 4.0]))
    array([ 2., -2.])
    >>> solve(np.array([[2.0, 1.0], [99.0, 3.0]]), np.array([1.0, 2.0]), assume_a="sym")
    array([0.2, 0.6])
    """
    a, b = _with_rhs(_square(a, "solve"), b, "solve")
    _check_finite(check_finite, "solve", a, b)
    matrix, structure = _structured(a, assume_a, lower, "solve")
    if transposed:
        if dtype_of(a).kind == "c":
            raise TensorNotSupportedError("scipy.linalg.solve can currently not solve a^T x = b "
                                          "or a^H x = b for complex matrices.")
        matrix = _mT(matrix)
    if structure == "positive definite":
        return cho_solve((tnp.linalg.cholesky(matrix), True), b, check_finite=False)
    return tnp.linalg.solve(matrix, b)


def inv(a, overwrite_a: bool = False, check_finite: bool = True, *, assume_a=None,
        lower: bool = False):
    """``scipy.linalg.inv``; ``assume_a`` (``"general"``, ``"diagonal"``, ``"upper
    triangular"``, ``"lower triangular"``, ``"pos"``, ``"sym"``, ``"her"``) reads what
    SciPy's reads, as for :func:`solve`. ``overwrite_a`` is ignored.

    >>> inv(np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[-2. ,  1. ],
           [ 1.5, -0.5]])
    """
    a = _square(a, "inv")
    _check_finite(check_finite, "inv", a)
    matrix, structure = _structured(
        a, assume_a, lower, "inv", ("general", "diagonal", "upper triangular",
                                     "lower triangular", "positive definite", "symmetric",
                                     "hermitian"))
    if structure == "positive definite":
        identity = tnp.broadcast_to(_eye(a), shape_of(a))
        return cho_solve((tnp.linalg.cholesky(matrix), True), identity, check_finite=False)
    return tnp.linalg.inv(matrix)


def det(a, overwrite_a: bool = False, check_finite: bool = True):
    """``scipy.linalg.det`` (``tnp.linalg.det``: its derivative ``adj(a)ᵀ`` is exact at singular
    matrices too). ``overwrite_a`` is ignored.

    >>> round(float(det(np.array([[1.0, 2.0], [3.0, 4.0]]))), 12)
    -2.0
    """
    a = _square(a, "det")
    _check_finite(check_finite, "det", a)
    return tnp.linalg.det(a)


def block_diag(*arrs):
    """``scipy.linalg.block_diag``: the block-diagonal matrix of the arrays (a 0-d array is a
    1 x 1 block, a 1-d one a row), in their common dtype; stacks of matrices (``ndim > 2``)
    are batched, their batch axes broadcast (as SciPy's since 1.17). No arrays: an empty
    ``(1, 0)`` float64 array, as SciPy's.

    >>> block_diag(np.array([[1, 2], [3, 4]]), 5)
    array([[1, 2, 0],
           [3, 4, 0],
           [0, 0, 5]])
    """
    if not arrs:
        return np.zeros((1, 0))
    blocks = [operand(x, "scipy.linalg.block_diag") for x in arrs]
    blocks = [tnp.reshape(x, (1,) * (2 - len(shape_of(x))) + shape_of(x))
              if len(shape_of(x)) < 2 else x for x in blocks]
    dtype = np.result_type(*[dtype_of(x) for x in blocks])
    try:
        batch = tuple(np.broadcast_shapes(*[shape_of(x)[:-2] for x in blocks]))
    except ValueError:
        raise TensorShapeError("scipy.linalg.block_diag: the batch axes of the arrays cannot be "
                               "broadcast together") from None
    total = sum(shape_of(x)[-1] for x in blocks)
    rows, left = [], 0
    for x in blocks:
        m, n = shape_of(x)[-2:]
        x = tnp.broadcast_to(as_dtype(x, dtype), batch + (m, n))
        rows.append(tnp.pad(x, [(0, 0)] * len(batch) + [(0, 0), (left, total - left - n)]))
        left += n
    return tnp.concatenate(rows, axis=-2)


# --- expm --------------------------------------------------------------------------------------

# Higham (2005), "The scaling and squaring method for the matrix exponential revisited":
# the Padé coefficients b_0..b_m and, for each degree, the largest 1-norm it is accurate for
# (the theta_m of double precision; of single precision for float32 and complex64).
_PADE = {
    3: (120.0, 60.0, 12.0, 1.0),
    5: (30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0),
    7: (17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0),
    9: (17643225600.0, 8821612800.0, 2075673600.0, 302702400.0, 30270240.0, 2162160.0,
        110880.0, 3960.0, 90.0, 1.0),
    13: (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
         129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
         40840800.0, 960960.0, 16380.0, 182.0, 1.0),
}
_THETA = {
    "double": ((3, 1.495585217958292e-2), (5, 2.539398330063230e-1),
               (7, 9.504178996162932e-1), (9, 2.097847961257068e0), (13, 5.371920351148152e0)),
    "single": ((3, 4.258730016922831e-1), (5, 1.880152677804762e0),
               (7, 3.925724783138660e0)),
}


def _pade(a, powers: dict, degree: int):
    """``(U, V)``: the odd and even parts of the degree-``degree`` Padé numerator, so that
    ``r(a) = (V - U)⁻¹ (V + U)``; ``powers`` caches ``a²``, ``a⁴``... (keyed by exponent)."""
    b = _PADE[degree]
    eye = _eye(a)

    def power(k):
        if k not in powers:
            powers[k] = tnp.matmul(power(k - 2), power(2)) if k > 2 else tnp.matmul(a, a)
        return powers[k]

    if degree == 13:
        a2, a4, a6 = power(2), power(4), power(6)
        inner_u = tnp.matmul(a6, b[13] * a6 + b[11] * a4 + b[9] * a2)
        u = tnp.matmul(a, tnp.add(inner_u + b[7] * a6 + b[5] * a4 + b[3] * a2, b[1] * eye))
        v = tnp.add(tnp.matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2)
                    + b[6] * a6 + b[4] * a4 + b[2] * a2, b[0] * eye)
        return u, v
    odd, even = b[3] * power(2), b[2] * power(2)
    for k in range(4, degree, 2):
        odd = odd + b[k + 1] * power(k)
        even = even + b[k] * power(k)
    odd, even = tnp.add(odd, b[1] * eye), tnp.add(even, b[0] * eye)
    return tnp.matmul(a, odd), even


def _known_int(x):
    """``x``'s integer values as a NumPy array if known now (not under ``jit``/``vmap``)."""
    data = data_if_known(x)
    if data is None:
        return None
    if hasattr(data, "compute"):          # a Dask array: these are a few integers
        data = data.compute()
    if hasattr(data, "cpu"):              # a PyTorch tensor
        data = data.cpu().numpy()
    return np.asarray(data).astype(np.int64)


def expm(A, *, max_squarings: int = 16):
    """``scipy.linalg.expm``: the matrix exponential of ``A`` (a stack of square matrices),
    by scaling and squaring with Padé approximants (Higham 2005, as JAX's
    ``jax.scipy.linalg.expm``; SciPy's values to rounding). Differentiable to any order in
    every transform. ``max_squarings`` (keyword, JAX's) bounds the squarings where the values
    are not known (under ``jit`` and ``vmap``): beyond it (a 1-norm over about 352,000 for
    the default) the result is NaN, as in JAX (whose threshold is twice that).

    >>> expm(np.zeros((2, 2)))
    array([[1., 0.],
           [0., 1.]])
    >>> expm(np.array([[0.0, np.pi], [-np.pi, 0.0]])).round(12) + 0.0   # a half turn
    array([[-1.,  0.],
           [ 0., -1.]])
    >>> import primitives.tensor as tnp
    >>> float(tnp.grad(lambda t: expm(t * np.array([[1.0, 1.0], [0.0, 1.0]]))[0, 1])(1.0))
    5.43656365691...
    """
    if not isinstance(max_squarings, numbers.Integral) or max_squarings < 0:
        raise TensorTypeError(f"scipy.linalg.expm: max_squarings must be a nonnegative integer, "
                              f"got {max_squarings!r}")
    a = _square(A, "expm")
    shape = shape_of(a)
    if 0 in shape:
        return tnp.add(a, 0)
    precision = "single" if dtype_of(a) in (np.float32, np.complex64) else "double"
    degrees = _THETA[precision]
    real_dtype = np.finfo(dtype_of(a)).dtype
    batch = shape[:-2]
    # The choice of degree and squarings (no derivative: a locally constant choice).
    norm = tnp.max(tnp.sum(tnp.abs(stop_gradient(a)), -2), -1)          # 1-norms, (batch)
    theta_max = degrees[-1][1]
    squarings = tnp.ceil(tnp.log2(tnp.maximum(norm / theta_max, 1.0)))
    index = sum(tnp.astype(tnp.greater(norm, theta), np.int64) for _, theta in degrees[:-1])
    known_index, known_squarings = _known_int(index), _known_int(squarings)
    scaled = a / tnp.reshape(tnp.astype(tnp.exp2(squarings), real_dtype), batch + (1, 1))
    powers: dict = {}
    used = (range(len(degrees)) if known_index is None
            else sorted(set(np.ravel(known_index).tolist())))
    u = v = None
    for i in used:
        ui, vi = _pade(scaled, powers, degrees[i][0])
        if u is None:
            u, v = ui, vi
        else:
            chosen = tnp.reshape(tnp.equal(index, i), batch + (1, 1))
            u, v = tnp.where(chosen, ui, u), tnp.where(chosen, vi, v)
    r = tnp.linalg.solve(v - u, v + u)
    if known_squarings is not None and np.all(known_squarings == known_squarings.flat[0]):
        for _ in range(int(known_squarings.flat[0])):               # one count for all
            r = tnp.matmul(r, r)
        return r
    count = max_squarings if known_squarings is None else int(known_squarings.max())
    steps = tnp.reshape(squarings, batch + (1, 1))
    for k in range(count):            # squared while k < its count; a finished matrix kept
        active = tnp.less(k, steps)
        x = tnp.where(active, r, 0)
        r = tnp.where(active, tnp.matmul(x, x), r)
    if known_squarings is None:
        r = tnp.where(tnp.greater(steps, max_squarings), math.nan, r)
    return r
