"""Linear-algebra primitives: solves, determinants and decompositions of stacks of matrices.

Every op takes operands batched over leading axes (NumPy's ``(..., m, n)``) and
carries its operand ``shape`` and ``dtype``, so its rules know every shape they
emit. The rules are written with :class:`Mat`, a matrix inside a rule whose
NumPy-like methods (``@``, ``.H``, ``+``, :func:`solve`...) emit ops; a value
computed from a tangent is linear work, anything else primal work, so a rule
reads like the formula it implements and every op it emits has rules of its
own (derivatives to any order).

==================  ==========================================================
op                  JVP (``dA`` the tangent, ``herm(dA)`` the Hermitian matrix
                    NumPy reads from ``dA``'s lower triangle)
==================  ==========================================================
``Solve``           ``dX = solve(A, dB - dA X)``; linear in ``B``, transposes
                    to ``solve(Aᴴ, ct)``
``Cholesky``        ``dL = L Φ(L⁻¹ herm(dA) L⁻ᴴ)``, ``Φ``: lower triangle, half
                    diagonal (Murray, arXiv:1602.07527)
``Eigh``            ``dw = Re diag(Vᴴ herm(dA) V)``, ``dV = V (F ∘ Vᴴ herm(dA) V)``,
                    ``F_ij = 1/(w_j - w_i)`` off the diagonal (JAX's rule);
                    ``herm`` reads the upper triangle for ``UPLO="U"``
``Eig``             ``dw = diag(V⁻¹ dA V)`` (``uᵢᴴ dA vᵢ / uᵢᴴ vᵢ``, ``uᵢ`` the left
                    eigenvectors), ``dV = V (F ∘ V⁻¹ dA V)`` less ``Re(vᵢᴴ dvᵢ) vᵢ``
                    (unit norm kept; the phase is the gauge)
``Svd``             JAX's rule (Giles' formulas); full matrices via the
                    complement's minimal rotation
``Qr``              JAX's rule, tall and wide
``Slogdet``         ``dlog = Re tr(A⁻¹ dA)``, ``dsign = sign · i Im tr(A⁻¹ dA)``
``Det``             ``tr(adj(A) dA)``, exact at singular matrices too
``Adjugate``        ``c V (diag(P diag(E)) - P ∘ E) Uᴴ``, ``E = Uᴴ dA V`` (an
                    :class:`AdjugateJvp`, exact at singular matrices); linear for 2 × 2
``Pinv``            Golub and Pereyra's formula (constant rank)
==================  ==========================================================

Triangular factors are solved with the general ``Solve`` (NumPy has no triangular
solve). Complex values follow tidu's convention (JVPs as JAX's, transposes adjoints for
``Re<a, b>``). Eigenvectors and singular vectors are defined up to a sign (a
phase): their derivatives are those of JAX, meaningful for losses that do not
depend on that choice. Equal eigenvalues (singular values) make ``F`` infinite
and the vector derivatives non-finite, as in JAX; the value derivatives stay
finite.

The ops compute in the namespace of their operands' library (``xp.linalg``).
On Dask arrays, a single matrix goes through Dask's chunked algorithms where
they exist (blocked Cholesky, tall-and-skinny QR and SVD, short-and-fat QR);
the other functions, and stacks of matrices, gather each matrix into one chunk
(the batch axes keep theirs) and run NumPy's function on it, lazily.

>>> a = np.array([[4.0, 1.0], [1.0, 3.0]])
>>> Solve((2, 1), "float64").eval(None, [a, np.array([[1.0], [2.0]])])[0].round(4)
array([[0.0909],
       [0.6364]])

It imports :mod:`.base`, :mod:`.shape`, :mod:`.constants`, :mod:`.elementwise`,
:mod:`.dot` and :mod:`.indexing`, of :mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import warnings

import numpy as np

from tidu import ADRuleError, ADRuleKind, TiduError, input_role
from tidu.graph import PRIMARY, External, Linearized, Local
from primitives.tensor.backends import NUMPY, define, device_of, library_of, operands, to_library
from primitives.tensor.core import dtype_of
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.base import (
    LIN,
    LinearOp,
    TensorPrimitive,
    emit,
    linear_mask,
    real_dtype_name,
    tensor_op,
)
from primitives.tensor.ops.constants import Full
from primitives.tensor.ops.dot import DotGeneral
from primitives.tensor.ops.indexing import Concatenate, Pad, Slice, output_role
from primitives.tensor.ops.shape import (BroadcastInDim, ReduceSum, Reshape, Transpose,
                                         broadcast_batch, move_batch_axis)


class LinAlgError(TiduError, np.linalg.LinAlgError):
    """NumPy's ``LinAlgError`` (a ``ValueError``): a singular or non-positive-definite matrix,
    a failed decomposition, or an operand that is not a (square) matrix.

    >>> issubclass(LinAlgError, np.linalg.LinAlgError) and issubclass(LinAlgError, ValueError)
    True
    """


def _lapack(op, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, with NumPy's (or PyTorch's) ``LinAlgError`` re-raised naming
    ``op``. (Dask raises NumPy's when the result is computed.)"""
    try:
        return fn(*args, **kwargs)
    except _linalg_errors() as error:
        raise LinAlgError(f"{op.name}: {error} (in a matrix of shape {tuple(args[0].shape[-2:])}, "
                          f"batch {tuple(args[0].shape[:-2])})") from None


def _linalg_errors() -> tuple:
    """NumPy's ``LinAlgError``, and PyTorch's once PyTorch is imported (tidu never imports it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return (np.linalg.LinAlgError,)
    return (np.linalg.LinAlgError, torch.linalg.LinAlgError)


# --- matrices inside rules ---------------------------------------------------------------


class Mat:
    """An array inside a rule: a reference, its ``shape`` and ``dtype``, and whether it is
    ``linear`` work (computed from tangents or cotangents).

    Its methods emit ops into ``builder``: with role ``Linearized`` (``True`` at the
    linear operands) when an operand is linear, else ``PRIMARY``. Only ops linear in
    their linear operands may be applied to them (``@``, ``*`` by a primal value...).
    """

    __slots__ = ("builder", "ref", "shape", "dtype", "linear")

    def __init__(self, builder, ref, shape: tuple, dtype, linear: bool = False) -> None:
        self.builder = builder
        self.ref = ref
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.linear = linear

    @classmethod
    def tangent(cls, builder, id: int, shape: tuple, dtype) -> "Mat":
        return cls(builder, Local(id), shape, dtype, linear=True)

    @property
    def id(self) -> int:
        return self.ref.id

    @property
    def batch(self) -> tuple:
        return self.shape[:-2]

    def _apply(self, op, others: tuple = (), shape: tuple | None = None, dtype=None) -> "Mat":
        args = (self,) + tuple(others)
        mask = tuple(a.linear for a in args)
        role = Linearized(mask) if any(mask) else PRIMARY
        ref = Local(emit(self.builder, op, [a.ref for a in args], role))
        return Mat(self.builder, ref, self.shape if shape is None else shape,
                   self.dtype if dtype is None else dtype, any(mask))

    # --- arithmetic ---------------------------------------------------------------------

    def __add__(self, other: "Mat") -> "Mat":
        return self._apply(ew.add, (other,))

    def __sub__(self, other: "Mat") -> "Mat":
        return self._apply(ew.sub, (other,))

    def __mul__(self, other) -> "Mat":
        """Elementwise by an array of this shape, or by a Python number."""
        if isinstance(other, Mat):
            return self._apply(ew.mul, (other,))
        return self._apply(ew.Scale(other))

    def __truediv__(self, other: "Mat") -> "Mat":
        return self._apply(ew.div, (other,))

    def __neg__(self) -> "Mat":
        return self._apply(ew.neg)

    def reciprocal(self) -> "Mat":
        return self._apply(ew.IntegerPow(-1))

    def conj(self) -> "Mat":
        return self._apply(ew.conj) if self.dtype.kind == "c" else self

    def real(self) -> "Mat":
        if self.dtype.kind != "c":
            return self
        return self._apply(ew.Real(self.dtype.name), dtype=real_dtype_name(self.dtype))

    def astype(self, dtype) -> "Mat":
        dtype = np.dtype(dtype)
        if dtype == self.dtype:
            return self
        return self._apply(ew.ConvertElementType(dtype.name, self.dtype.name), dtype=dtype)

    # --- matrix products and layout -------------------------------------------------------

    def __matmul__(self, other: "Mat") -> "Mat":
        nb = len(self.batch)
        batch = tuple(range(nb))
        op = DotGeneral((((nb + 1,), (nb,)), (batch, batch)), self.shape, other.shape,
                        self.dtype.name)
        return self._apply(op, (other,), self.batch + (self.shape[-2], other.shape[-1]))

    def trace_dot(self, other: "Mat") -> "Mat":
        """``trace(self @ other)`` for each matrix of the batch, without the product."""
        nb = len(self.batch)
        batch = tuple(range(nb))
        op = DotGeneral((((nb, nb + 1), (nb + 1, nb)), (batch, batch)), self.shape,
                        other.shape, self.dtype.name)
        return self._apply(op, (other,), self.batch)

    @property
    def mT(self) -> "Mat":
        nb = len(self.batch)
        return self._apply(Transpose(tuple(range(nb)) + (nb + 1, nb)),
                           shape=self.batch + (self.shape[-1], self.shape[-2]))

    @property
    def H(self) -> "Mat":
        """The conjugate transpose of each matrix."""
        return self.mT.conj()

    def band(self, lower: float, diagonal: float, upper: float) -> "Mat":
        return self._apply(MatrixBand(lower, diagonal, upper))

    def diagonal(self) -> "Mat":
        return self._apply(MatrixDiagonal(), shape=self.shape[:-1])

    def diag_embed(self) -> "Mat":
        return self._apply(DiagEmbed(), shape=self.shape + self.shape[-1:])

    def trace(self) -> "Mat":
        return self.diagonal().sum_last()

    def sum_last(self) -> "Mat":
        last = len(self.shape) - 1
        return self._apply(ReduceSum((last,), self.shape), shape=self.shape[:-1])

    def as_row(self, rows: int) -> "Mat":
        """A batch of vectors ``(..., n)`` repeated as the rows of ``(..., rows, n)`` matrices."""
        nb = len(self.shape) - 1
        shape = self.shape[:-1] + (rows, self.shape[-1])
        return self._apply(BroadcastInDim(shape, tuple(range(nb)) + (nb + 1,), self.shape),
                           shape=shape)

    def as_column(self, columns: int) -> "Mat":
        """A batch of vectors ``(..., n)`` repeated as the columns of ``(..., n, columns)``."""
        nb = len(self.shape) - 1
        shape = self.shape + (columns,)
        return self._apply(BroadcastInDim(shape, tuple(range(nb + 1)), self.shape), shape=shape)

    def broadcast_to(self, shape: tuple) -> "Mat":
        """This array repeated over leading axes, to ``shape``."""
        if tuple(shape) == self.shape:
            return self
        lead = len(shape) - len(self.shape)
        op = BroadcastInDim(tuple(shape), tuple(range(lead, len(shape))), self.shape)
        return self._apply(op, shape=shape)

    def as_matrices(self, shape: tuple) -> "Mat":
        """A batch of scalars ``(...)`` repeated over ``(..., m, n)`` matrices."""
        return self._apply(BroadcastInDim(shape, tuple(range(len(self.shape))), self.shape),
                           shape=shape)

    def columns(self, start: int, stop: int) -> "Mat":
        return self._slice(len(self.shape) - 1, start, stop)

    def rows(self, start: int, stop: int) -> "Mat":
        return self._slice(len(self.shape) - 2, start, stop)

    def _slice(self, axis: int, start: int, stop: int) -> "Mat":
        starts = tuple(start if a == axis else 0 for a in range(len(self.shape)))
        limits = tuple(stop if a == axis else n for a, n in enumerate(self.shape))
        shape = tuple(stop - start if a == axis else n for a, n in enumerate(self.shape))
        return self._apply(Slice(starts, limits, (1,) * len(shape), self.shape), shape=shape)

    def concat(self, other: "Mat", axis: int) -> "Mat":
        axis %= len(self.shape)
        shape = list(self.shape)
        shape[axis] += other.shape[axis]
        op = Concatenate(axis, (self.shape, other.shape), self.dtype.name)
        return self._apply(op, (other,), tuple(shape))

    def pad_rows(self, count: int) -> "Mat":
        """``count`` rows of zeros appended below each matrix."""
        nd = len(self.shape)
        high = tuple(count if a == nd - 2 else 0 for a in range(nd))
        shape = self.shape[:-2] + (self.shape[-2] + count, self.shape[-1])
        return self._apply(Pad((0,) * nd, high, (0,) * nd, self.shape), shape=shape)


def solve(a: Mat, b: Mat, within: str = "") -> Mat:
    """``a⁻¹ b`` (``a`` primal), emitted as a :class:`Solve`; ``within`` names the
    derivative that solves (``"slogdet's derivative"``: it leads the error if ``a`` is
    singular)."""
    return a._apply(Solve(b.shape, a.dtype.name, within), (b,), b.shape)


def full(like: Mat, shape: tuple, dtype, value) -> Mat:
    """A constant array (primal work)."""
    dtype = np.dtype(dtype)
    ref = Local(emit(like.builder, Full(tuple(shape), dtype.name, value), []))
    return Mat(like.builder, ref, shape, dtype)


def identity(like: Mat, batch: tuple, n: int, dtype) -> Mat:
    """A batch of ``n × n`` identity matrices (primal work)."""
    return full(like, batch + (n,), dtype, 1).diag_embed()


def hermitian_from_lower(t: Mat) -> Mat:
    """The Hermitian matrices LAPACK reads from ``t``: its lower triangle and the real part of
    its diagonal (what ``np.linalg.eigh`` and ``cholesky`` see of their operand)."""
    lower = t.band(1.0, 0.5, 0.0)
    return lower + lower.H


def hermitian_from_upper(t: Mat) -> Mat:
    """The Hermitian matrices LAPACK reads from ``t``'s upper triangle (``UPLO="U"``): that
    triangle and the real part of the diagonal."""
    upper = t.band(0.0, 0.5, 1.0)
    return upper + upper.H


def _primal(builder, key, shape, dtype) -> Mat:
    return Mat(builder, External(key), shape, dtype)


def _outputs(builder, op, operand: Mat) -> list:
    """``op``'s outputs on a primal operand, emitted as primal work (a decomposition a rule
    needs but its op did not output)."""
    ids = builder.add_primitive(op, [operand.ref], PRIMARY)
    return [Local(i) for i in ids]


# --- linear helpers ----------------------------------------------------------------------


class _TrailingAxesOp(LinearOp):
    """A linear op on the last axes of its operand, batched over any leading ones.

    It knows no rank, so a batch rule cannot tell whether a batch axis falls among the
    matrix axes: it moves the batch axis to the front, the one place sure to be leading.
    """

    __slots__ = ()

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        [ref], [axis] = inputs, axes
        ref = move_batch_axis(builder, ref, axis, 0, role, 0)
        return builder.add_primitive(self, [ref], role), [0]


@tensor_op
class MatrixBand(_TrailingAxesOp):
    """Each matrix's strictly lower triangle times ``lower``, its diagonal times ``diagonal``
    and its strictly upper triangle times ``upper``: a mask of real weights, so its own
    transpose.

    >>> MatrixBand(1.0, 0.5, 0.0).eval(None, [np.ones((2, 2))])[0]
    array([[0.5, 0. ],
           [1. , 0.5]])
    """

    lower: float
    diagonal: float
    upper: float
    name = "matrix_band"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        weights = self.weights(*x.shape[-2:], dtype_of(x))
        if xp is NUMPY.xp:
            return [x * weights]
        return [xp.multiply(x, to_library(weights, library_of(x), x))]

    def weights(self, m: int, n: int, dtype: np.dtype) -> np.ndarray:
        """The ``(m, n)`` mask in the real dtype of ``dtype`` (read-only; a small one is made
        once and kept, a big one made at each call rather than held)."""
        key = (self, m, n, dtype)
        weights = _BAND_WEIGHTS.get(key)
        if weights is None:
            row, column = np.arange(m)[:, None], np.arange(n)[None, :]
            weights = np.where(row > column, self.lower,
                               np.where(row == column, self.diagonal, self.upper))
            weights = weights.astype(np.finfo(dtype).dtype)
            weights.flags.writeable = False
            if m * n <= _BAND_WEIGHTS_MAX_SIZE:
                if len(_BAND_WEIGHTS) >= 64:
                    _BAND_WEIGHTS.clear()
                _BAND_WEIGHTS[key] = weights
        return weights

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, self, [Local(cotangent_outputs[0])], LIN)]


_BAND_WEIGHTS: dict = {}     # (band, m, n, dtype) -> its mask: a program runs it again and again
_BAND_WEIGHTS_MAX_SIZE = 1 << 16     # elements: the cache holds at most 64 such masks


@tensor_op
class MatrixDiagonal(_TrailingAxesOp):
    """The diagonal of each square matrix, ``(..., n, n) -> (..., n)``; transposes to
    :class:`DiagEmbed`."""

    name = "matrix_diagonal"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:
            return [np.diagonal(x, axis1=-2, axis2=-1).copy()]
        return [xp.linalg.diagonal(x)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, DiagEmbed(), [Local(cotangent_outputs[0])], LIN)]


@tensor_op
class DiagEmbed(_TrailingAxesOp):
    """Diagonal matrices from vectors, ``(..., n) -> (..., n, n)``; transposes to
    :class:`MatrixDiagonal`."""

    name = "diag_embed"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        n = x.shape[-1]
        if xp is NUMPY.xp:
            out = np.zeros(x.shape + (n,), dtype=x.dtype)
            out[..., np.arange(n), np.arange(n)] = x
            return [out]
        # no writes into arrays (Dask has none): select x's entries on the diagonal
        diagonal = to_library(np.eye(n, dtype=bool), library_of(x), x)
        return [xp.where(diagonal, x[..., None, :], xp.zeros((), dtype=dtype_of(x),
                                                           device=device_of(x)))]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, MatrixDiagonal(), [Local(cotangent_outputs[0])], LIN)]


# --- solve ---------------------------------------------------------------------------------


@tensor_op
class Solve(TensorPrimitive):
    """``np.linalg.solve(a, b)``: ``a`` of shape ``batch + (n, n)``, ``b`` of ``shape =
    batch + (n, k)``, both of ``dtype``. Linear in ``b``. ``within`` names the derivative
    that emitted the solve, if one did (its errors name that function first)."""

    shape: tuple
    dtype: str
    within: str = ""
    name = "solve"

    def input_count(self) -> int:
        return 2

    def a_shape(self) -> tuple:
        return self.shape[:-1] + (self.shape[-2],)

    def eval(self, ctx, inputs):
        xp, (a, b) = operands(inputs, self)
        try:
            x = _lapack(self, xp.linalg.solve, a, b)
        except LinAlgError as error:
            if not self.within:
                raise
            raise LinAlgError(f"{self.within} needs a nonsingular matrix: {error}") from None
        if self.within == EIG_DERIVATIVE and type(a) is np.ndarray:
            _check_a_basis(a)
        return [x]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        a = _primal(builder, primal_inputs[0], self.a_shape(), self.dtype)
        x = _primal(builder, primal_outputs[0], self.shape, self.dtype)
        da, db = tangent_inputs
        rhs = None if db is None else Mat.tangent(builder, db, self.shape, self.dtype)
        if da is not None:                       # d(A⁻¹B) = A⁻¹ (dB - dA A⁻¹B)
            da_x = Mat.tangent(builder, da, self.a_shape(), self.dtype) @ x
            rhs = -da_x if rhs is None else rhs - da_x
        return [solve(a, rhs, self.within).id]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        if linear_mask(self, role) != (False, True):
            raise ADRuleError(repr(self), ADRuleKind.TRANSPOSE,
                              "solve is linear in its right-hand side only")
        a = Mat(builder, inputs[0], self.a_shape(), self.dtype)
        ct = Mat.tangent(builder, cotangent_outputs[0], self.shape, self.dtype)
        return [None, solve(a.H, ct, self.within).id]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        (a, b), (a_axis, b_axis) = inputs, axes
        ndim = len(self.shape)
        if a_axis is None:
            # one matrix, a batch of right-hand sides: the batch joins b's columns
            b = move_batch_axis(builder, b, b_axis, ndim, role, 1)
            columns = self.shape[:-1] + (self.shape[-1] * axis_size,)
            b = Local(emit(builder, Reshape(columns, self.shape + (axis_size,)), [b],
                           input_role(role, 1)))
            [x] = builder.add_primitive(Solve(columns, self.dtype, self.within), [a, b], role)
            x = emit(builder, Reshape(self.shape + (axis_size,), columns), [Local(x)],
                     output_role(role))
            return [x], [ndim]
        a = move_batch_axis(builder, a, a_axis, 0, role, 0)
        if b_axis is None:
            b = broadcast_batch(builder, b, 0, axis_size, role, 1)
        else:
            b = move_batch_axis(builder, b, b_axis, 0, role, 1)
        batched = Solve((axis_size,) + tuple(self.shape), self.dtype, self.within)
        return builder.add_primitive(batched, [a, b], role), [0]


EIG_DERIVATIVE = "eig's derivative"
"""The ``within`` of the solves of ``eig``'s derivative, which checks that its eigenvectors
are a basis (:func:`_check_a_basis`)."""


def _check_a_basis(v: np.ndarray) -> None:
    """Refuse eigenvectors ``v`` that are numerically dependent (condition at least 1/eps):
    the matrix is defective there, its eigenvalues have no derivative, and a solve with
    ``v`` gives finite values that mean nothing (``[[2, -1], [1, 0]]``, a double root)."""
    condition = np.linalg.cond(v)
    limit = 1 / np.finfo(v.dtype).eps
    if not np.all(condition < limit):
        worst = float(np.max(np.where(np.isnan(condition), np.inf, condition)))
        raise LinAlgError(f"{EIG_DERIVATIVE}: the eigenvectors are not a basis (condition "
                          f"{worst:.1e}): the matrix is defective (not diagonalizable), and "
                          "its eigenvalues have no derivative there")


# --- decompositions ------------------------------------------------------------------------


class _MatrixOp(TensorPrimitive):
    """An op on one batch of matrices of ``shape`` and ``dtype``."""

    __slots__ = ()

    def params(self) -> str:
        return ", ".join([str(self.shape), self.dtype] +
                         [f"{k}={getattr(self, k)!r}" for k in self._flags])

    _flags = ()        # the parameters params() shows besides shape and dtype

    @property
    def real_dtype(self) -> str:
        return real_dtype_name(self.dtype)

    def operand(self, builder, key) -> Mat:
        return _primal(builder, key, self.shape, self.dtype)

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        raise ADRuleError(repr(self), ADRuleKind.TRANSPOSE, f"{self.name} is not linear")

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        # the op batches over leading axes already: the batch axis in front is one more
        [ref], [axis] = inputs, axes
        ref = move_batch_axis(builder, ref, axis, 0, role, 0)
        batched = dataclasses.replace(self, shape=(axis_size,) + tuple(self.shape))
        ids = builder.add_primitive(batched, [ref], role)
        return ids, [0] * len(ids)


@tensor_op
class Cholesky(_MatrixOp):
    """``np.linalg.cholesky``: the lower factor ``L`` of the Hermitian matrices given by the
    lower triangles."""

    shape: tuple
    dtype: str
    name = "cholesky"

    def eval(self, ctx, inputs):
        xp, (a,) = operands(inputs, self)
        return [_lapack(self, xp.linalg.cholesky, a)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        factor = _primal(builder, primal_outputs[0], self.shape, self.dtype)
        sigma = hermitian_from_lower(Mat.tangent(builder, tangent_inputs[0], self.shape,
                                                 self.dtype))
        of = "cholesky's derivative"
        inner = solve(factor, solve(factor, sigma, of).H, of)          # L⁻¹ Σ L⁻ᴴ
        return [(factor @ inner.band(1.0, 0.5, 0.0)).id]


@tensor_op
class Eigh(_MatrixOp):
    """``np.linalg.eigh`` (``compute_v``) or ``eigvalsh``: ascending real eigenvalues ``w``
    and unit eigenvectors ``V`` (columns) of the Hermitian matrices given by the lower
    triangles (``uplo="L"``) or the upper ones (``uplo="U"``).

    The triangle is handed to LAPACK as NumPy hands it (``UPLO``): the eigenvectors'
    signs (phases) depend on which triangle LAPACK reduces, so reading the upper triangle
    as the lower triangle of the conjugate transpose would give other signs than NumPy.

    >>> a = np.array([[2.0, 1.0], [1.0, 3.0]])
    >>> v = Eigh((2, 2), "float64", uplo="U").eval(None, [a])[1]
    >>> bool(np.array_equal(v, np.linalg.eigh(a, UPLO="U")[1]))
    True
    """

    shape: tuple
    dtype: str
    compute_v: bool = True
    uplo: str = "L"
    name = "eigh"
    _flags = ("compute_v",)

    def params(self) -> str:
        shown = super().params()
        return shown if self.uplo == "L" else f"{shown}, uplo={self.uplo!r}"

    def output_count(self) -> int:
        return 2 if self.compute_v else 1

    def eval(self, ctx, inputs):
        xp, (a,) = operands(inputs, self)
        upper = {} if self.uplo == "L" else {"UPLO": "U"}
        if self.compute_v:
            return list(_lapack(self, xp.linalg.eigh, a, **upper))
        return [_lapack(self, xp.linalg.eigvalsh, a, **upper)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        n = self.shape[-1]
        if self.compute_v:
            v = _primal(builder, primal_outputs[1], self.shape, self.dtype)
        else:
            [_, vectors] = _outputs(builder, Eigh(self.shape, self.dtype, uplo=self.uplo),
                                    self.operand(builder, primal_inputs[0]))
            v = Mat(builder, vectors, self.shape, self.dtype)
        tangent = Mat.tangent(builder, tangent_inputs[0], self.shape, self.dtype)
        sigma = (hermitian_from_lower(tangent) if self.uplo == "L"
                 else hermitian_from_upper(tangent))
        rotated = v.H @ sigma @ v                                   # Vᴴ dA V
        dw = rotated.diagonal().real()
        if not self.compute_v:
            return [dw.id]
        w = _primal(builder, primal_outputs[0], self.shape[:-1], self.real_dtype)
        eye = identity(w, self.shape[:-2], n, self.real_dtype)
        # F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it (inf where w_i == w_j, as JAX)
        inverse_gaps = (w.as_row(n) - w.as_column(n) + eye).reciprocal() - eye
        dv = v @ (inverse_gaps.astype(self.dtype) * rotated)
        return [dw.id, dv.id]


@tensor_op
class Eig(_MatrixOp):
    """``np.linalg.eig`` (``compute_v``) or ``eigvals`` of general square matrices: the
    eigenvalues ``w`` and right eigenvectors ``V`` (columns of unit norm, LAPACK's phase:
    the largest component real), always complex (``np.linalg.eig`` makes them real when
    every eigenvalue of a real matrix is; the front end does that).

    The JVP is written with the left eigenvectors as the rows of ``V⁻¹``: ``dw_i`` is
    ``(V⁻¹ dA V)_ii``; ``dV = V (F ∘ V⁻¹ dA V)`` (``F_ij = 1/(w_j - w_i)`` off the diagonal)
    keeps ``A V = V diag(w)``, and ``vᵢ Re(vᵢᴴ dvᵢ)`` is removed so the columns stay of
    unit norm. The phase of each column is a gauge the rule does not follow (LAPACK's
    is not smooth): derivatives of gauge-invariant functions (``|V|``, ``vᵢ vᵢᴴ``,
    ``V diag(f(w)) V⁻¹``) are exact, those of the raw columns of a complex ``V`` are not
    LAPACK's. Equal eigenvalues make ``F`` infinite, as in JAX; ``dw`` stays finite
    where ``V`` is invertible. Where it is numerically singular (a defective matrix, such as
    a companion matrix of a double root), the derivative raises :class:`LinAlgError` on
    NumPy arrays, where JAX's gives finite values that mean nothing.

    >>> w = Eig((2, 2), "float64", compute_v=False).eval(None, [np.array([[0.0, 1.0],
    ...                                                                    [-1.0, 0.0]])])[0]
    >>> w
    array([0.+1.j, 0.-1.j])
    """

    shape: tuple
    dtype: str
    compute_v: bool = True
    name = "eig"
    _flags = ("compute_v",)

    @property
    def complex_dtype(self) -> str:
        return np.result_type(self.dtype, np.complex64).name

    def output_count(self) -> int:
        return 2 if self.compute_v else 1

    def eval(self, ctx, inputs):
        xp, (a,) = operands(inputs, self)
        dtype = np.dtype(self.complex_dtype)
        if xp is NUMPY.xp:
            if self.compute_v:
                w, v = _lapack(self, np.linalg.eig, a)
                return [w.astype(dtype, copy=False), v.astype(dtype, copy=False)]
            return [_lapack(self, np.linalg.eigvals, a).astype(dtype, copy=False)]
        w, v = _lapack(self, xp.linalg.eig, a)         # PyTorch's; Dask's: NumPy's by matrix
        return [w, v] if self.compute_v else [w]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        n, batch, dtype = self.shape[-1], self.shape[:-2], self.complex_dtype
        if self.compute_v:
            v = _primal(builder, primal_outputs[1], self.shape, dtype)
        else:
            [_, vectors] = _outputs(builder, Eig(self.shape, self.dtype),
                                    self.operand(builder, primal_inputs[0]))
            v = Mat(builder, vectors, self.shape, dtype)
        da = Mat.tangent(builder, tangent_inputs[0], self.shape, self.dtype).astype(dtype)
        rotated = solve(v, da @ v, EIG_DERIVATIVE)                    # V⁻¹ dA V
        dw = rotated.diagonal()
        if not self.compute_v:
            return [dw.id]
        w = _primal(builder, primal_outputs[0], self.shape[:-1], dtype)
        eye = identity(w, batch, n, dtype)
        # F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it (inf where w_i == w_j, as JAX)
        inverse_gaps = (w.as_row(n) - w.as_column(n) + eye).reciprocal() - eye
        du = v @ (inverse_gaps * rotated)
        stretch = (v.H @ du).diagonal().real().astype(dtype)       # Re(vᵢᴴ duᵢ)
        return [dw.id, (du - v * stretch.as_row(n)).id]


@tensor_op
class Svd(_MatrixOp):
    """``np.linalg.svd``: ``U, S, Vh`` (``compute_uv``) or ``S``, singular values descending."""

    shape: tuple
    dtype: str
    full_matrices: bool = False
    compute_uv: bool = True
    name = "svd"
    _flags = ("full_matrices", "compute_uv")

    def output_count(self) -> int:
        return 3 if self.compute_uv else 1

    def eval(self, ctx, inputs):
        xp, (a,) = operands(inputs, self)
        if not self.compute_uv:
            return [_lapack(self, xp.linalg.svdvals, a)]
        return list(_lapack(self, xp.linalg.svd, a, full_matrices=self.full_matrices))

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        m, n = self.shape[-2:]
        k = min(m, n)
        batch = self.shape[:-2]
        a = self.operand(builder, primal_inputs[0])
        full_output = self.compute_uv and self.full_matrices and m != n
        if self.compute_uv:
            u_all = _primal(builder, primal_outputs[0], batch + ((m, m) if full_output else (m, k)),
                            self.dtype)
            s = _primal(builder, primal_outputs[1], batch + (k,), self.real_dtype)
            vh_all = _primal(builder, primal_outputs[2],
                             batch + ((n, n) if full_output else (k, n)), self.dtype)
            u = u_all.columns(0, k) if full_output and m > n else u_all
            vh = vh_all.rows(0, k) if full_output and n > m else vh_all
        else:
            refs = _outputs(builder, Svd(self.shape, self.dtype), a)
            u, s, vh = (Mat(builder, ref, shape, dtype) for ref, shape, dtype in
                        zip(refs, (batch + (m, k), batch + (k,), batch + (k, n)),
                            (self.dtype, self.real_dtype, self.dtype)))
        da = Mat.tangent(builder, tangent_inputs[0], self.shape, self.dtype)
        v, ut = vh.H, u.H
        rotated = ut @ da @ v                                       # Uᴴ dA V, k × k
        ds = rotated.diagonal().real()
        if not self.compute_uv:
            return [ds.id]
        # F_ij = 1 / (s_j² - s_i²) off the diagonal, 0 on it (inf where s_i == s_j, as JAX)
        s_row, s_column = s.as_row(k), s.as_column(k)
        eye = identity(s, batch, k, self.real_dtype)
        inverse_gaps = ((s_row + s_column) * (s_row - s_column) + eye).reciprocal() - eye
        inverse_gaps = inverse_gaps.astype(self.dtype)
        ones = full(s, batch + (k,), self.real_dtype, 1)
        s_inverse = ones._apply(ew.div_or_zero, (s,))              # 1/s, 0 where s == 0
        ds_s = rotated * s_row.astype(self.dtype)                   # dS diag(s)
        s_ds = rotated * s_column.astype(self.dtype)                # diag(s) dS
        phase = (rotated - rotated.H) * 0.5 * s_inverse.diag_embed().astype(self.dtype)
        du = u @ (inverse_gaps * (ds_s + ds_s.H) + phase)
        dv = v @ (inverse_gaps * (s_ds + s_ds.H))
        if m > n:                                                   # the part outside span(U)
            da_v = da @ v
            du = du + (da_v - u @ (ut @ da_v)) / s.as_row(m).astype(self.dtype)
        if n > m:
            dah_u = da.H @ u
            dv = dv + (dah_u - v @ (vh @ dah_u)) / s.as_row(n).astype(self.dtype)
        dvh = dv.H
        if full_output and m > n:        # the complement turns with span(U), no more
            du = du.concat(-(u @ (du.H @ u_all.columns(k, m))), axis=-1)
        if full_output and n > m:
            dvh = dvh.concat(-((vh_all.rows(k, n) @ dv) @ vh), axis=-2)
        return [du.id, ds.id, dvh.id]


@tensor_op
class Qr(_MatrixOp):
    """``np.linalg.qr`` in ``mode`` ``"reduced"``, ``"complete"`` (outputs ``Q, R``) or
    ``"r"`` (``R``); LAPACK's ``R`` has a real diagonal."""

    shape: tuple
    dtype: str
    mode: str = "reduced"
    name = "qr"
    _flags = ("mode",)

    def output_count(self) -> int:
        return 1 if self.mode == "r" else 2

    def eval(self, ctx, inputs):
        xp, (a,) = operands(inputs, self)
        if self.mode != "r":
            return list(_lapack(self, xp.linalg.qr, a, mode=self.mode))
        if xp is NUMPY.xp:
            return [_lapack(self, np.linalg.qr, a, mode="r")]
        return [_lapack(self, xp.linalg.qr, a)[1]]          # the standard has no mode "r"

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        m, n = self.shape[-2:]
        k = min(m, n)
        batch = self.shape[:-2]
        a = self.operand(builder, primal_inputs[0])
        complete_tall = self.mode == "complete" and m > n
        if complete_tall and m - n > (1 if np.dtype(self.dtype).kind == "f" else 0):
            raise ADRuleError(repr(self), ADRuleKind.JVP, _UNDETERMINED_COMPLEMENT)
        if self.mode == "r":
            q_ref, r_ref = _outputs(builder, Qr(self.shape, self.dtype), a)
            q_all = Mat(builder, q_ref, batch + (m, k), self.dtype)
            r_all = Mat(builder, r_ref, batch + (k, n), self.dtype)
        else:
            q_all = _primal(builder, primal_outputs[0],
                            batch + ((m, m) if complete_tall else (m, k)), self.dtype)
            r_all = _primal(builder, primal_outputs[1],
                            batch + ((m, n) if complete_tall else (k, n)), self.dtype)
        q = q_all.columns(0, n) if complete_tall else q_all
        r = r_all.rows(0, n) if complete_tall else r_all
        da = Mat.tangent(builder, tangent_inputs[0], self.shape, self.dtype)
        if m >= n:
            dq, dr = _qr_jvp_tall(q, r, da)
        else:       # A = [X Y] with X square: QR of X, then R's right part is Qᴴ Y
            dq, dr_left = _qr_jvp_tall(q, r.columns(0, m), da.columns(0, m))
            dr_right = dq.H @ a.columns(m, n) + q.H @ da.columns(m, n)
            dr = dr_left.concat(dr_right, axis=-1)
        if complete_tall:   # the complement turns with span(Q), no more; R's zero rows stay
            dq = dq.concat(-(q @ (dq.H @ q_all.columns(n, m))), axis=-1)
            dr = dr.pad_rows(m - n)
        return [dr.id] if self.mode == "r" else [dq.id, dr.id]


# LAPACK's basis of the columns a "complete" Q adds is one of many: beyond one real column
# (fixed up to sign) its derivative is LAPACK's Householder construction's, not a rule's.
_UNDETERMINED_COMPLEMENT = (
    "qr(a, mode='complete') of a matrix with two or more rows more than columns (one, if "
    "complex) is not differentiable here: the extra columns of Q are LAPACK's choice among "
    "the bases of the complement; use mode='reduced' (the same R without its zero rows), "
    "and I - Q Qᴴ for the projector onto the complement")


def _qr_jvp_tall(q: Mat, r: Mat, da: Mat) -> tuple[Mat, Mat]:
    """``dQ, dR`` of ``A = QR`` with ``A`` tall or square and ``R`` invertible (JAX's rule):
    ``Qᴴ dQ`` is skew-Hermitian, ``dR R⁻¹`` upper triangular with a real diagonal."""
    da_rinv = solve(r.H, da.H, "qr's derivative").H                 # dA R⁻¹
    projected = q.H @ da_rinv
    lower = projected.band(1.0, 0.5, 0.0)
    skew = lower - lower.H                                          # Qᴴ dQ
    return q @ (skew - projected) + da_rinv, (projected - skew) @ r


# --- determinants --------------------------------------------------------------------------


@tensor_op
class Slogdet(_MatrixOp):
    """``np.linalg.slogdet``: outputs ``sign`` (of ``dtype``: on the unit circle for complex)
    and the real ``logabsdet``."""

    shape: tuple
    dtype: str
    name = "slogdet"

    def output_count(self) -> int:
        return 2

    def eval(self, ctx, inputs):
        xp, (a,) = operands(inputs, self)
        sign, logabsdet = _lapack(self, xp.linalg.slogdet, a)
        if xp is NUMPY.xp:                  # 0-d arrays, not NumPy scalars
            return [np.asarray(sign), np.asarray(logabsdet)]
        return [sign, logabsdet]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        a = self.operand(builder, primal_inputs[0])
        da = Mat.tangent(builder, tangent_inputs[0], self.shape, self.dtype)
        trace = solve(a, da, "slogdet's derivative").trace()          # tr(A⁻¹ dA)
        if np.dtype(self.dtype).kind != "c":
            return [None, trace.id]
        sign = _primal(builder, primal_outputs[0], self.shape[:-2], self.dtype)
        dsign = sign * ((trace - trace.conj()) * 0.5)              # sign · i Im tr(A⁻¹ dA)
        return [dsign.id, trace.real().id]


@tensor_op
class Det(_MatrixOp):
    """``np.linalg.det``; its derivative ``tr(adj(A) dA)`` holds at singular matrices too."""

    shape: tuple
    dtype: str
    name = "det"

    def eval(self, ctx, inputs):
        xp, (a,) = operands(inputs, self)
        det = _lapack(self, xp.linalg.det, a)
        return [np.asarray(det) if xp is NUMPY.xp else det]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        a = self.operand(builder, primal_inputs[0])
        adjugate = a._apply(Adjugate(self.shape, self.dtype))
        da = Mat.tangent(builder, tangent_inputs[0], self.shape, self.dtype)
        return [adjugate.trace_dot(da).id]


@tensor_op
class Adjugate(_MatrixOp):
    """The adjugate ``adj(A) = det(A) A⁻¹``, computed from an SVD so that it is exact at
    singular matrices too, as is its derivative (:class:`AdjugateJvp`; for ``n <= 2``
    ``adj`` is linear). Its second and higher derivatives (``det``'s third) solve with
    ``A``: at a singular matrix they raise :class:`LinAlgError`."""

    shape: tuple
    dtype: str
    name = "adjugate"

    def eval(self, ctx, inputs):
        xp, (a,) = operands(inputs, self)
        n = a.shape[-1]
        if math.prod(a.shape) == 0 or n == 1:
            return [xp.ones_like(a)]
        u, s, vh = _lapack(self, xp.linalg.svd, a)
        # the products of all singular values but one, without dividing
        before = xp.cumulative_prod(s, axis=-1, include_initial=True)[..., :-1]
        after = xp.flip(xp.cumulative_prod(xp.flip(s, axis=-1), axis=-1,
                                           include_initial=True)[..., :-1], axis=-1)
        phase = xp.linalg.det(u) * xp.linalg.det(vh)
        # V W Uᴴ = (U W Vh)ᴴ, W the diagonal of products
        adjugate = xp.conj(xp.matrix_transpose((u * (before * after)[..., None, :]) @ vh))
        return [phase[..., None, None] * adjugate]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        n = self.shape[-1]
        if n <= 1:
            return [None]
        if n == 2:                    # [[d, -b], [-c, a]]: linear in A
            return [emit(builder, self, [Local(tangent_inputs[0])], LIN)]
        a = self.operand(builder, primal_inputs[0])
        da = Mat.tangent(builder, tangent_inputs[0], self.shape, self.dtype)
        return [adjugate_jvp(a, da).id]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        if self.shape[-1] != 2:
            raise ADRuleError(repr(self), ADRuleKind.TRANSPOSE, "adjugate is linear for 2 × 2 "
                              "matrices only")
        return [emit(builder, self, [Local(cotangent_outputs[0])], LIN)]   # self-adjoint


def _solve_broadcast(a: Mat, b: Mat, within: str) -> Mat:
    """``a⁻¹ b`` for ``b`` with more leading axes than ``a`` (several right-hand sides of one
    matrix): they join ``b``'s columns."""
    lead = len(b.shape) - len(a.shape)
    if not lead:
        return solve(a, b, within)
    nb = len(a.batch)
    order = tuple(range(lead, lead + nb + 1)) + tuple(range(lead)) + (lead + nb + 1,)
    moved = b._apply(Transpose(order), shape=tuple(b.shape[i] for i in order))
    columns = a.shape[:-1] + (math.prod(b.shape[:lead]) * b.shape[-1],)
    x = solve(a, moved._apply(Reshape(columns, moved.shape), shape=columns), within)
    x = x._apply(Reshape(moved.shape, columns), shape=moved.shape)
    return x._apply(Transpose(tuple(int(i) for i in np.argsort(order))), shape=b.shape)


def adjugate_jvp(a: Mat, x: Mat) -> Mat:
    """``d adj(a)[x]`` (``a`` primal, ``n >= 3``), emitted as an :class:`AdjugateJvp`."""
    return a._apply(AdjugateJvp(a.shape, x.shape, a.dtype.name), (x,), x.shape)


@tensor_op
class AdjugateJvp(TensorPrimitive):
    """The derivative ``d adj(A)[X]`` of the adjugate of ``n × n`` matrices ``A`` (of
    ``shape``, ``n >= 3``) in the directions ``X`` (of ``x_shape``: ``shape`` after any
    leading axes, several directions at one matrix); linear in ``X``.

    With ``A = U S Vᴴ`` and ``adj`` multiplicative, ``d adj(A)[X] = c V d adj(S)[E] Uᴴ``,
    ``E = Uᴴ X V``, ``c = det(U) det(Vᴴ)``, and at the diagonal ``S``:
    ``d adj(S)[E] = diag(P diag(E)) - P ∘ E``, ``P_ij`` the product of the singular values
    but the ``i``-th and ``j``-th (0 on the diagonal). No division: exact at singular
    matrices of any rank. The transpose is the derivative at ``Aᴴ``; the derivative in ``A``
    (``adj``'s second) solves with ``A`` (a ``LinAlgError`` at a singular matrix).

    >>> a = np.diag([1.0, 2.0, 0.0])        # d adj(A)[I]: adj(A + tI) = diag(2, 0, 0) + t ...
    >>> AdjugateJvp((3, 3), (3, 3), "float64").eval(None, [a, np.eye(3)])[0].round(12) + 0.0
    array([[2., 0., 0.],
           [0., 1., 0.],
           [0., 0., 3.]])
    """

    shape: tuple
    x_shape: tuple
    dtype: str
    name = "adjugate_jvp"

    def input_count(self) -> int:
        return 2

    def eval(self, ctx, inputs):
        xp, (a, x) = operands(inputs, self)
        if math.prod(x.shape) == 0:
            return [xp.zeros_like(x)]
        u, s, vh = _lapack(self, xp.linalg.svd, a)
        n = s.shape[-1]
        eye = to_library(np.eye(n, dtype=bool), library_of(s), s)
        # row i of t: the singular values with the i-th replaced by 1; P_ij: the products of
        # row i's values but the j-th (before · after, without dividing)
        t = xp.where(eye, xp.ones_like(s)[..., None, :], s[..., None, :])
        before = xp.cumulative_prod(t, axis=-1, include_initial=True)[..., :-1]
        after = xp.flip(xp.cumulative_prod(xp.flip(t, axis=-1), axis=-1,
                                           include_initial=True)[..., :-1], axis=-1)
        p = xp.astype(xp.where(eye, xp.zeros_like(t), before * after), x.dtype)
        uh, v = xp.conj(xp.matrix_transpose(u)), xp.conj(xp.matrix_transpose(vh))
        e = uh @ x @ v
        diagonal = (p @ xp.linalg.diagonal(e)[..., None])[..., 0]
        inner = xp.where(eye, diagonal[..., None, :], -p * e)
        phase = xp.linalg.det(u) * xp.linalg.det(vh)
        return [phase[..., None, None] * (v @ inner @ uh)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        a = _primal(builder, primal_inputs[0], self.shape, self.dtype)
        x = _primal(builder, primal_inputs[1], self.x_shape, self.dtype)
        da, dx = tangent_inputs
        out = None if dx is None else adjugate_jvp(
            a, Mat.tangent(builder, dx, self.x_shape, self.dtype))
        if da is not None:
            # A adj(A) = det(A) I differentiated in X, then in Y (= dA):
            # A K + Y J(X) + X J(Y) = tr(J(Y) X) I, J = d adj, K = d² adj[X, Y]
            da = Mat.tangent(builder, da, self.shape, self.dtype)
            jx = _primal(builder, primal_outputs[0], self.x_shape, self.dtype)
            jy = adjugate_jvp(a, da).broadcast_to(self.x_shape)
            identity_ = identity(a, self.x_shape[:-2], self.shape[-1], self.dtype)
            rhs = jy.trace_dot(x).as_matrices(self.x_shape) * identity_ \
                - da.broadcast_to(self.x_shape) @ jx - x @ jy
            # K = A⁻¹ rhs: at a singular A (not differentiable this way) the solve raises
            second = _solve_broadcast(a, rhs, "det's third derivative (and higher)")
            out = second if out is None else out + second
        return [out.id]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        if linear_mask(self, role) != (False, True):
            raise ADRuleError(repr(self), ADRuleKind.TRANSPOSE,
                              "adjugate_jvp is linear in its direction only")
        a = Mat(builder, inputs[0], self.shape, self.dtype)
        ct = Mat.tangent(builder, cotangent_outputs[0], self.x_shape, self.dtype)
        return [None, adjugate_jvp(a.H, ct).id]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        (a, x), (a_axis, x_axis) = inputs, axes
        extra = len(self.x_shape) - len(self.shape)
        if a_axis is None:          # directions only: one more leading axis of them
            x = move_batch_axis(builder, x, x_axis, 0, role, 1)
            batched = dataclasses.replace(self, x_shape=(axis_size,) + self.x_shape)
            return builder.add_primitive(batched, [a, x], role), [0]
        a = move_batch_axis(builder, a, a_axis, 0, role, 0)
        x = (broadcast_batch(builder, x, extra, axis_size, role, 1) if x_axis is None
             else move_batch_axis(builder, x, x_axis, extra, role, 1))
        shape = (axis_size,) + tuple(self.shape)
        batched = dataclasses.replace(self, shape=shape, x_shape=self.x_shape[:extra] + shape)
        return builder.add_primitive(batched, [a, x], role), [extra]


# --- pseudo-inverse ------------------------------------------------------------------------


@tensor_op
class Pinv(_MatrixOp):
    """``np.linalg.pinv(a, rcond, hermitian)``; the derivative is that of a matrix of
    constant rank (Golub and Pereyra), so it jumps where a singular value crosses the
    cutoff ``rcond * max(s)``."""

    shape: tuple
    dtype: str
    rcond: float = 1e-15
    hermitian: bool = False
    name = "pinv"
    _flags = ("rcond", "hermitian")

    def eval(self, ctx, inputs):
        xp, (a,) = operands(inputs, self)
        if xp is NUMPY.xp:
            return [_lapack(self, np.linalg.pinv, a, rcond=self.rcond, hermitian=self.hermitian)]
        return [_lapack(self, xp.linalg.pinv_rcond, a, self.rcond, self.hermitian)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        m, n = self.shape[-2:]
        a = self.operand(builder, primal_inputs[0])
        p = _primal(builder, primal_outputs[0], self.shape[:-2] + (n, m), self.dtype)
        da = Mat.tangent(builder, tangent_inputs[0], self.shape, self.dtype)
        if self.hermitian:      # the matrix is the one read from the lower triangles, as NumPy's
            a, da = hermitian_from_lower(a), hermitian_from_lower(da)
        dah = da.H
        # dP = -P dA P + P Pᴴ dAᴴ (I - A P) + (I - P A) dAᴴ Pᴴ P
        first = -((p @ da) @ p)
        left = (p @ p.H) @ dah
        right = dah @ (p.H @ p)
        return [(first + (left - (left @ a) @ p) + (right - p @ (a @ right))).id]


# --- functions the libraries lack ------------------------------------------------------------


def _hermitian_from_lower(xp, a):
    """The Hermitian matrices of ``a``'s lower triangles: what NumPy's ``hermitian=True``
    functions read of ``a``."""
    lower = xp.asarray(np.tri(a.shape[-1], dtype=bool))
    return xp.where(lower, a, xp.conj(xp.matrix_transpose(a)))


def _torch_pinv(a, rcond: float, hermitian: bool):
    return sys.modules["torch"].linalg.pinv(a, rtol=rcond, hermitian=hermitian)


def _cupy_pinv(a, rcond: float, hermitian: bool):
    import array_api_compat.cupy as xp

    return xp.linalg.pinv(_hermitian_from_lower(xp, a) if hermitian else a, rtol=rcond)


def _each_matrix(fn, signature: str, *arrays, dtypes, sizes=None):
    """NumPy's ``fn`` on each matrix (``signature``'s core axes) of the Dask ``arrays``, lazily:
    each matrix is gathered into one chunk, the batch axes keep their chunks. ``dtypes``: the
    result's, or a tuple of the results'."""
    import dask.array as da

    # empty arrays as Dask's "meta": from output_dtypes it would cast a complex one to real
    meta = (tuple(np.empty((), d) for d in dtypes) if isinstance(dtypes, tuple)
            else np.empty((), dtypes))
    return da.apply_gufunc(fn, signature, *arrays, meta=meta, output_sizes=sizes,
                           allow_rechunk=True)


def _real(dtype) -> np.dtype:
    return np.finfo(dtype).dtype


def _compat_linalg():
    """array-api-compat's ``linalg`` for Dask, for its result tuples (``EighResult``...)."""
    from array_api_compat.dask.array import linalg

    return linalg


def _dask_solve(x1, x2):
    vector = x2.ndim == 1
    return _each_matrix(np.linalg.solve, "(n,n),(n)->(n)" if vector else "(n,n),(n,k)->(n,k)",
                        x1, x2, dtypes=np.result_type(x1.dtype, x2.dtype))


def _dask_inv(x):
    return _each_matrix(np.linalg.inv, "(n,n)->(n,n)", x, dtypes=x.dtype)


def _dask_det(x):
    return _each_matrix(np.linalg.det, "(n,n)->()", x, dtypes=x.dtype)


def _dask_slogdet(x):
    sign, logabsdet = _each_matrix(np.linalg.slogdet, "(n,n)->(),()", x,
                                   dtypes=(x.dtype, _real(x.dtype)))
    return _compat_linalg().SlogdetResult(sign, logabsdet)


def _dask_eigh(x, UPLO: str = "L"):
    w, v = _each_matrix(functools.partial(np.linalg.eigh, UPLO=UPLO), "(n,n)->(n),(n,n)", x,
                        dtypes=(_real(x.dtype), x.dtype))
    return _compat_linalg().EighResult(w, v)


def _dask_eig(x):
    """NumPy's ``eig`` of each matrix, complex always (as the ``Eig`` op's results)."""
    dtype = np.result_type(x.dtype, np.complex64)

    def eig(matrices):
        w, v = np.linalg.eig(matrices)
        return w.astype(dtype, copy=False), v.astype(dtype, copy=False)
    return tuple(_each_matrix(eig, "(n,n)->(n),(n,n)", x, dtypes=(dtype, dtype)))


def _dask_eigvalsh(x, UPLO: str = "L"):
    return _each_matrix(functools.partial(np.linalg.eigvalsh, UPLO=UPLO), "(n,n)->(n)", x,
                        dtypes=_real(x.dtype))


def _dask_pinv(x, rcond: float, hermitian: bool):
    pinv = functools.partial(np.linalg.pinv, rcond=rcond, hermitian=hermitian)
    return _each_matrix(pinv, "(m,n)->(n,m)", x, dtypes=x.dtype)


def _dask_cholesky(x, upper: bool = False):
    """Dask's blocked Cholesky for a matrix (SciPy installed), else each matrix gathered."""
    import array_api_compat.dask.array as xp
    import dask.array as da

    if x.ndim != 2 or 0 in x.shape or not _has_scipy():
        factor = _each_matrix(np.linalg.cholesky, "(n,n)->(n,n)", x, dtypes=x.dtype)
    else:
        # Dask reads the blocks above the diagonal, NumPy the lower triangle; Dask also needs
        # square chunks of one size: an identity block pads the matrix to a multiple of it
        n, size = x.shape[0], max(x.chunks[0])
        hermitian = _hermitian_from_lower(xp, x)
        padding = -n % size
        if padding:
            hermitian = da.block([[hermitian, da.zeros((n, padding), dtype=x.dtype)],
                                  [da.zeros((padding, n), dtype=x.dtype),
                                   da.eye(padding, dtype=x.dtype)]])
        factor = da.linalg.cholesky(hermitian.rechunk(size), lower=True)[:n, :n]
    return xp.conj(xp.matrix_transpose(factor)) if upper else factor


@functools.cache
def _has_scipy() -> bool:
    import importlib.util

    return importlib.util.find_spec("scipy") is not None


def _dask_qr(x, mode: str = "reduced"):
    """Dask's tall-and-skinny QR for a tall matrix (its R's signs can differ from LAPACK's on
    the whole matrix), its short-and-fat QR for a real wide or square one (LAPACK's signs),
    else each matrix gathered (Dask's short-and-fat QR is wrong for complex matrices: it
    transposes Q without conjugating)."""
    import dask.array as da

    m, n = x.shape[-2:]
    one_matrix = x.ndim == 2 and mode != "complete" and 0 not in x.shape
    if one_matrix and m > n:
        q, r = da.linalg.tsqr(x.rechunk({1: -1}))
    elif one_matrix and np.dtype(x.dtype).kind == "f":
        q, r = da.linalg.sfqr(x.rechunk({0: -1, 1: max(m, x.chunks[1][0])}))
    else:
        k = m if mode == "complete" else min(m, n)
        qr = functools.partial(np.linalg.qr, mode="complete" if mode == "complete" else "reduced")
        q, r = _each_matrix(qr, "(m,n)->(m,k),(k,n)", x, dtypes=(x.dtype, x.dtype),
                            sizes={"k": k})
    return _compat_linalg().QRResult(q, r)


def _dask_svd(x, full_matrices: bool = True):
    """Dask's (tall-and-skinny) SVD of a matrix, chunked along its longer axis; with
    ``full_matrices`` of a non-square matrix or for a stack, each matrix gathered."""
    import dask.array as da

    m, n = x.shape[-2:]
    k = min(m, n)
    if x.ndim == 2 and (not full_matrices or m == n) and k:
        with warnings.catch_warnings():         # Dask casts a complex "meta" to real for S
            warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            u, s, vh = da.linalg.svd(x.rechunk({1: -1} if m >= n else {0: -1}),
                                     coerce_signs=False)
    else:
        signature = "(m,n)->(m,m),(k),(n,n)" if full_matrices else "(m,n)->(m,k),(k),(k,n)"
        svd = functools.partial(np.linalg.svd, full_matrices=full_matrices)
        u, s, vh = _each_matrix(svd, signature, x, dtypes=(x.dtype, _real(x.dtype), x.dtype),
                                sizes={"k": k})
    return _compat_linalg().SVDResult(u, s, vh)


def _dask_svdvals(x):
    if x.ndim == 2 and min(x.shape):
        return _dask_svd(x, full_matrices=False)[1]
    return _each_matrix(functools.partial(np.linalg.svd, compute_uv=False), "(m,n)->(k)", x,
                        dtypes=_real(x.dtype), sizes={"k": min(x.shape[-2:])})


# NumPy's pinv(a, rcond, hermitian); the standard's pinv has no hermitian
define("linalg.pinv_rcond", torch=_torch_pinv, dask=_dask_pinv, cupy=_cupy_pinv)
# Dask's array-api-compat namespace lacks these, or has them for single matrices only (and
# its LU solve does not pivot across chunks: it fails on some invertible matrices)
for _name, _fn in (("solve", _dask_solve), ("inv", _dask_inv), ("det", _dask_det),
                   ("slogdet", _dask_slogdet), ("eigh", _dask_eigh), ("eigvalsh", _dask_eigvalsh),
                   ("eig", _dask_eig),
                   ("cholesky", _dask_cholesky), ("qr", _dask_qr), ("svd", _dask_svd),
                   ("svdvals", _dask_svdvals)):
    define(f"linalg.{_name}", dask=_fn)
