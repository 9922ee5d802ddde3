"""Array manipulation with NumPy's names: shapes (``shape``, ``ndim``, ``size``,
``squeeze``, ``expand_dims``), padding, diagonals and triangles, flips and rolls,
repeating, splitting and stacking, axis moves, the functional forms of indexing and
selection (``select``, ``piecewise``, ``take_along_axis``...), and the
function-mapping helper ``apply_along_axis``. (``reshape``, ``transpose``,
``concatenate`` and ``stack`` are one op each: :mod:`.lowering`'s; ``r_`` and ``c_``
build ranges: :mod:`.creation`'s; ``vectorize`` maps with ``vmap``, a transform:
:mod:`primitives.tensor.transforms.vectorize`.)

Every function is linear in its array arguments and built from the shape and
indexing primitives (``slice``, ``pad``, ``rev``, ``split``, ``concatenate``,
``transpose``, ``reshape``, ``broadcast_in_dim``, ``gather``/``scatter_add``,
``select`` with a constant mask), so complex values pass through and every
transform applies. Integer arguments (offsets, shifts, repeats, sections, index
arrays) are static: they must be known while ``jit`` traces, and given as a PyTorch,
CuPy or Dask array they are copied to host memory (a Dask array is computed).
``select``, ``piecewise`` and ``apply_along_axis`` differentiate through what they
call and select.

It imports :mod:`.lowering` and :mod:`.indexing` (and :mod:`.dispatch`), of the NumPy
package.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.flip(np.arange(3.0))
array([2., 1., 0.])
>>> tnp.grad(lambda m: tnp.trace(m @ m))(np.array([[1.0, 2.0], [3.0, 4.0]]))
array([[2., 6.],
       [4., 8.]])
"""

from __future__ import annotations

import functools
import math
import numbers
import operator

import numpy as np

from tidu import TiduError

from primitives.tensor.backends import to_host
from primitives.tensor.core import Frontend, bind, data_if_known, data_of, dtype_of, shape_of
from primitives.tensor.errors import (TensorIndexError, TensorNotSupportedError, TensorShapeError,
                                      TensorTypeError)
from primitives.tensor.numpy.dispatch import implements
from primitives.tensor.numpy.indexing import _index_entries, getitem, index_array, take
from primitives.tensor.numpy.lowering import (add, as_dtype, broadcast_to, cast_operands,
                                              concatenate, constant_in_library_of,
                                              constant_values, elementwise, first,
                                              is_foreign_array, is_python_scalar, maximum,
                                              minimum, multiply, new_value, no_out, normalize_axes,
                                              normalize_axis, not_equal, operand,
                                              reshape, result_dtype, shape_tuple, stack, sum,
                                              transpose, where)
from primitives.tensor.numpy.lowering import divide, not_itself, power, stop_gradient, subtract
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.indexing import Gather, Pad, Rev, ScatterAdd, Split
from primitives.tensor.ops.scan import Argsort
from primitives.tensor.ops.shape import BroadcastInDim

__all__ = [
    "shape", "ndim", "size", "iscomplexobj", "isrealobj", "squeeze", "expand_dims",
    "diag", "diagflat", "vander", "diagonal", "trace", "tril", "triu", "trim_zeros",
    "flip", "fliplr", "flipud", "rot90", "roll",
    "repeat", "tile", "resize",
    "split", "array_split", "hsplit", "vsplit", "dsplit",
    "hstack", "vstack", "dstack", "column_stack", "row_stack", "block", "append", "insert",
    "delete",
    "broadcast_arrays", "moveaxis", "swapaxes", "matrix_transpose", "rollaxis", "ravel",
    "unstack", "atleast_1d",
    "atleast_2d", "atleast_3d",
    "take_along_axis", "put_along_axis", "at", "meshgrid", "copy",
    "select", "choose", "compress", "extract", "piecewise", "apply_along_axis",
    "apply_over_axes", "ix_", "mask_indices", "packbits", "unpackbits",
]


# --- static arguments -------------------------------------------------------------------


def _integer(value, fn: str, what: str) -> int:
    """A Python int from an integer argument (a float is refused: NumPy would truncate it)."""
    try:
        return operator.index(value)
    except TypeError:
        raise TensorTypeError(f"{fn}: {what} must be an integer, got {value!r}") from None


def _static_integers(value, fn: str, what: str) -> np.ndarray:
    """An integer argument (a number, a sequence, an array) as a NumPy integer array; it must
    be known now (under ``jit`` a traced value raises ``ConcretizationError``)."""
    data = to_host(data_of(operand(value, fn), f"{fn}: reading {what}"))
    if data.size == 0 and data.dtype.kind == "f":
        data = data.astype(np.intp)                    # [] reads as an empty integer list
    if data.dtype.kind not in "iu":
        raise TensorTypeError(f"{fn}: {what} must be integers, got {data.dtype} values")
    return data


def _concatenate(arrays, axis: int, fn: str):
    if not arrays:
        raise TensorShapeError(f"{fn}: need at least one array to concatenate")
    try:
        return concatenate(arrays, axis)
    except TensorShapeError as error:                  # name the function called
        raise TensorShapeError(f"{fn}: {error}") from None


# --- shapes: queries, axes of size one ------------------------------------------------------


@implements(np.shape)
def shape(a) -> tuple:
    """``np.shape`` (known under ``jit`` too)."""
    return shape_of(operand(a))


@implements(np.ndim)
def ndim(a) -> int:
    """``np.ndim``."""
    return len(shape(a))


@implements(np.iscomplexobj)
def iscomplexobj(x) -> bool:
    """``np.iscomplexobj``: whether ``x``'s dtype is complex; only the dtype is read, so it
    is known under ``jit`` and ``vmap`` too.

    >>> iscomplexobj(np.ones(2, np.complex64)), iscomplexobj([1.0, 2.0])
    (True, False)
    """
    if isinstance(x, Frontend) or is_foreign_array(x):     # (a PyTorch dtype has no .type)
        return dtype_of(x).kind == "c"
    return bool(np.iscomplexobj(x))


@implements(np.isrealobj)
def isrealobj(x) -> bool:
    """``np.isrealobj``: not :func:`iscomplexobj` (the dtype only)."""
    return not iscomplexobj(x)


@implements(np.size)
def size(a, axis=None) -> int:
    """``np.size``."""
    dims = shape(a)
    return int(np.prod(dims, dtype=np.int64)) if axis is None else dims[normalize_axis(
        axis, len(dims), "size")]


@implements(np.squeeze)
def squeeze(x, axis=None):
    """``np.squeeze``."""
    shape = shape_of(x)
    if axis is None:
        axes = tuple(i for i, n in enumerate(shape) if n == 1)
    else:
        axes = normalize_axes(axis, len(shape), "squeeze")
        for a in axes:
            if shape[a] != 1:
                raise TensorShapeError(f"squeeze: cannot select axis {a} of shape {shape} to "
                                       "squeeze out: its size is not one")
    return not_itself(reshape(x, tuple(n for i, n in enumerate(shape) if i not in axes)), x)


@implements(np.expand_dims)
def expand_dims(x, axis):
    """``np.expand_dims``."""
    shape = shape_of(x)
    axis = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    new_ndim = len(shape) + len(axis)
    axes = normalize_axes(axis, new_ndim, "expand_dims")
    if len(axes) != len(axis):
        raise TensorShapeError(f"expand_dims: repeated axis in {axis}")
    sizes = iter(shape)
    return not_itself(reshape(x, tuple(1 if i in axes else next(sizes) for i in range(new_ndim))),
                      x)


# --- diagonals and triangles --------------------------------------------------------------


@implements(np.diagonal)
def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1):
    """``np.diagonal``: the diagonal as the last axis (a new array, not NumPy's read-only view).

    >>> diagonal(np.arange(6.0).reshape(2, 3), 1)
    array([1., 5.])
    """
    return _diagonal(a, offset, axis1, axis2, "diagonal")


def _diagonal(a, offset, axis1, axis2, fn: str):
    a = operand(a, fn)
    shape = shape_of(a)
    ndim = len(shape)
    if ndim < 2:
        raise TensorShapeError(f"{fn}: the array must have at least two dimensions, got "
                               f"shape {shape}")
    axis1, axis2 = normalize_axis(axis1, ndim, fn), normalize_axis(axis2, ndim, fn)
    if axis1 == axis2:
        raise TensorShapeError(f"{fn}: axis1 and axis2 cannot be the same")
    offset = _integer(offset, fn, "offset")
    if axis1 > axis2:       # the same entries (a[i, i + k] = a.T[i + k, i]), no transpose op
        axis1, axis2, offset = axis2, axis1, -offset
    rest = [i for i in range(ndim) if i not in (axis1, axis2)]
    rows, cols = shape[axis1], shape[axis2]
    # the (rows, cols) matrix flattened: its diagonal is a strided slice
    flat = reshape(transpose(a, rest + [axis1, axis2]),
                   tuple(shape[i] for i in rest) + (rows * cols,))
    row0, col0 = max(-offset, 0), max(offset, 0)
    count = max(0, min(rows - row0, cols - col0))
    start = row0 * cols + col0 if count else 0
    out = getitem(flat, (Ellipsis, slice(start, start + count * (cols + 1), cols + 1)))
    # on a NumPy array the slice is a writable view of ``a``: a new array, as documented
    return out.copy() if type(out) is np.ndarray and out.base is not None else out


@implements(np.diag)
def diag(v, k: int = 0):
    """``np.diag``: the ``k``-th diagonal of a 2-d ``v``, or the square 2-d array with a 1-d
    ``v`` on its ``k``-th diagonal.

    >>> diag(np.array([1.0, 2.0]), 1)
    array([[0., 1., 0.],
           [0., 0., 2.],
           [0., 0., 0.]])
    """
    v = operand(v, "diag")
    k = _integer(k, "diag", "k")
    shape = shape_of(v)
    if len(shape) == 2:
        return _diagonal(v, k, 0, 1, "diag")
    if len(shape) != 1:
        raise TensorShapeError(f"diag: input must be 1- or 2-d, got shape {shape}")
    n = shape[0]
    size = n + abs(k)
    # flattened, the result is v with `size` zeros between neighbours: one zero padding
    start = max(-k, 0) * size + max(k, 0) if n else size * size
    end = start + (n - 1) * (size + 1) + 1 if n else size * size
    padded = first(bind(Pad((start,), (size * size - end,), (size if n else 0,), (n,)), v))
    return reshape(padded, (size, size))


@implements(np.trim_zeros)
def trim_zeros(filt, trim: str = "fb", axis=None):
    """``np.trim_zeros``: ``filt`` without its leading (``"f"``) and trailing (``"b"``) slices
    of zeros along ``axis`` (every axis for ``None``), found by reading its values (under
    ``jit`` or ``vmap``: ``ConcretizationError``); the derivative goes to the entries kept.

    >>> trim_zeros(np.array([0.0, 1.5, 0.0, 2.0, 0.0]))
    array([1.5, 0. , 2. ])
    """
    filt = operand(filt, "trim_zeros")
    shape = shape_of(filt)
    if not shape:
        raise TensorShapeError("trim_zeros: filt must be at least 1-d, got a 0-d array")
    if not isinstance(trim, str) or not trim or set(trim.lower()) - set("fb"):
        raise TensorTypeError(f"trim_zeros: unexpected character(s) in `trim`: {trim!r}")
    nonzero = to_host(data_of(filt, "trim_zeros: reading filt (the result's shape depends on "
                                    "its values)")) != 0
    key = [slice(None)] * len(shape)
    for ax in range(len(shape)) if axis is None else normalize_axes(axis, len(shape),
                                                                        "trim_zeros"):
        others = tuple(i for i in range(len(shape)) if i != ax)
        hits = np.flatnonzero(np.any(nonzero, axis=others) if others else nonzero)
        if not hits.size:
            key[ax] = slice(0, 0)
            continue
        key[ax] = slice(int(hits[0]) if "f" in trim.lower() else 0,
                        int(hits[-1]) + 1 if "b" in trim.lower() else shape[ax])
    return getitem(filt, tuple(key))


@implements(np.diagflat)
def diagflat(v, k: int = 0):
    """``np.diagflat``: the square 2-d array with the flattened ``v`` on its ``k``-th diagonal.

    >>> diagflat(np.array([[1.0, 2.0]]))
    array([[1., 0.],
           [0., 2.]])
    """
    return diag(ravel(operand(v, "diagflat")), _integer(k, "diagflat", "k"))


@implements(np.vander)
def vander(x, N=None, increasing: bool = False):
    """``np.vander``: the columns ``x**(N-1), ..., x, 1`` (the other way with ``increasing``)
    of a 1-d ``x``, in ``x``'s dtype promoted with NumPy's integer; made by multiplying by
    ``x``, so the derivative is exact at ``x = 0`` too.

    >>> vander(np.array([1.0, 2.0, 3.0]), 3)
    array([[1., 1., 1.],
           [4., 2., 1.],
           [9., 3., 1.]])
    """
    x = operand(x, "vander")
    if len(shape_of(x)) != 1:
        raise TensorShapeError(f"vander: x must be a one-dimensional array or sequence, got "
                               f"shape {shape_of(x)}")
    n = shape_of(x)[0] if N is None else _integer(N, "vander", "N")
    if n < 0:
        raise TensorShapeError(f"vander: N must be non-negative, got {n}")
    x = reshape(as_dtype(x, np.promote_types(dtype_of(x), np.int_)), (-1, 1))
    if n == 0:
        return getitem(x, (slice(None), slice(0, 0)))
    columns = [where(True, np.ones((), dtype_of(x)), x)]        # x**0: 1, of x's shape
    for _ in range(n - 1):
        columns.append(multiply(columns[-1], x))
    return concatenate(columns if increasing else columns[::-1], axis=1)


@implements(np.trace)
def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None):
    """``np.trace`` (without ``out``): the sum of :func:`diagonal`, in ``dtype`` if given.

    >>> trace(np.eye(3))
    array(3.)
    """
    d = _diagonal(a, offset, axis1, axis2, "trace")
    return sum(d if dtype is None else as_dtype(d, dtype), axis=-1)


def _triangle(m, k, fn: str, lower: bool):
    m = operand(m, fn)
    shape = shape_of(m)
    if not shape:
        raise TensorShapeError(f"{fn}: the array must have at least one dimension")
    k = _integer(k, fn, "k")
    rows, cols = shape[-2:] if len(shape) >= 2 else (shape[0], shape[0])
    kept = np.tri(rows, cols, k, dtype=bool) if lower else ~np.tri(rows, cols, k - 1, dtype=bool)
    return where(kept, m, np.zeros((), dtype_of(m)))


@implements(np.tril)
def tril(m, k: int = 0):
    """``np.tril``: zeros above the ``k``-th diagonal of the last two axes (a 1-d ``m`` is
    repeated as the rows of a square matrix first, as in NumPy)."""
    return _triangle(m, k, "tril", lower=True)


@implements(np.triu)
def triu(m, k: int = 0):
    """``np.triu``: zeros below the ``k``-th diagonal of the last two axes (a 1-d ``m`` is
    repeated as the rows of a square matrix first, as in NumPy)."""
    return _triangle(m, k, "triu", lower=False)


# --- flips, rotations, rolls ---------------------------------------------------------------


@implements(np.flip)
def flip(m, axis=None):
    """``np.flip`` (a new array, not NumPy's view): reverse along ``axis`` (all axes if
    ``None``)."""
    m = operand(m, "flip")
    shape = shape_of(m)
    axes = tuple(a for a in normalize_axes(axis, len(shape), "flip") if shape[a] > 1)
    return first(bind(Rev(axes), m)) if axes else not_itself(m, m)


@implements(np.fliplr)
def fliplr(m):
    """``np.fliplr``: reverse along axis 1 (at least 2-d)."""
    m = operand(m, "fliplr")
    if len(shape_of(m)) < 2:
        raise TensorShapeError(f"fliplr: input must be >= 2-d, got shape {shape_of(m)}")
    return flip(m, 1)


@implements(np.flipud)
def flipud(m):
    """``np.flipud``: reverse along axis 0 (at least 1-d)."""
    m = operand(m, "flipud")
    if len(shape_of(m)) < 1:
        raise TensorShapeError("flipud: input must be >= 1-d, got a 0-d array")
    return flip(m, 0)


@implements(np.rot90)
def rot90(m, k: int = 1, axes=(0, 1)):
    """``np.rot90``: rotate by ``k`` quarter turns from ``axes[0]`` towards ``axes[1]``."""
    m = operand(m, "rot90")
    ndim = len(shape_of(m))
    try:
        axes = tuple(axes)
    except TypeError:
        raise TensorTypeError(f"rot90: axes must be a pair of integers, got {axes!r}") from None
    if len(axes) != 2:
        raise TensorShapeError(f"rot90: len(axes) must be 2, got axes={axes}")
    first, second = (_integer(a, "rot90", "an axis") for a in axes)
    if first == second or abs(first - second) == ndim:
        raise TensorShapeError(f"rot90: axes must be different, got axes={axes}")
    if not (-ndim <= first < ndim and -ndim <= second < ndim):
        raise TensorShapeError(f"rot90: axes={axes} out of range for array of ndim={ndim}")
    first, second = first % ndim, second % ndim
    k = _integer(k, "rot90", "k") % 4
    if k == 0:
        return m
    if k == 2:
        return flip(m, (first, second))
    order = list(range(ndim))
    order[first], order[second] = order[second], order[first]
    if k == 1:
        return transpose(flip(m, second), order)
    return flip(transpose(m, order), second)


def _split_sizes(a, axis: int, sizes: list) -> list:
    """``a`` cut along ``axis`` into consecutive pieces of ``sizes`` (one ``split`` op)."""
    if len(sizes) == 1:
        return [not_itself(a, a)]
    return bind(Split(axis, tuple(sizes), shape_of(a), dtype_of(a).name), a)


@implements(np.roll)
def roll(a, shift, axis=None):
    """``np.roll``: shift elements along ``axis`` (the flattened array if ``None``), wrapping
    around; ``shift`` and ``axis`` may be sequences (shifts of one axis add up). Integer
    shifts only (NumPy truncates a float). Always a new array, as NumPy's (a shift by a
    multiple of the length too)."""
    a = operand(a, "roll")
    shape = shape_of(a)
    if axis is None:
        return reshape(roll(reshape(a, (-1,)), shift, 0), shape)
    shifts = _static_integers(shift, "roll", "shift")
    axes = np.asarray(axis)
    if axes.dtype.kind not in "iu":
        raise TensorTypeError(f"roll: axis must be integers, got {axis!r}")
    try:
        pairs = np.broadcast(shifts, axes)
    except ValueError:
        raise TensorShapeError(f"roll: shift {shift!r} and axis {axis!r} cannot be broadcast "
                               "together") from None
    if pairs.nd > 1:
        raise TensorShapeError("roll: 'shift' and 'axis' should be scalars or 1D sequences")
    source, totals = a, {}
    for s, ax in pairs:
        ax = normalize_axis(ax, len(shape), "roll")
        totals[ax] = totals.get(ax, 0) + int(s)
    for ax, total in totals.items():
        n = shape[ax]
        if n and total % n:
            head, tail = _split_sizes(a, ax, [n - total % n, total % n])
            a = concatenate([tail, head], ax)
    return new_value(a) if a is source else a


# --- repeating ----------------------------------------------------------------------------


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    """``np.repeat``: each element ``repeats`` times along ``axis`` (the flattened array if
    ``None``); ``repeats`` is one count or one per element. Always a new array, as NumPy's."""
    a = operand(a, "repeat")
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    shape = shape_of(a)
    axis = normalize_axis(axis, len(shape), "repeat")
    counts = _static_integers(repeats, "repeat", "repeats")
    if counts.ndim > 1:
        raise TensorShapeError(f"repeat: repeats must be one count or a 1-d sequence, got "
                               f"shape {counts.shape}")
    if (counts < 0).any():
        raise TensorShapeError("repeat: negative repeats are not allowed")
    n = shape[axis]
    if counts.ndim == 1 and counts.size not in (1, n):
        raise TensorShapeError(f"repeat: {counts.size} repeats for {n} elements along axis "
                               f"{axis}")
    if counts.size == 1 or (n and (counts == counts[0]).all()):
        # one count: broadcast along a new axis after `axis`, then merge the two
        count = int(counts.reshape(-1)[0])
        if count == 1:
            return new_value(a)
        wide = shape[:axis + 1] + (count,) + shape[axis + 1:]
        dims = tuple(i if i <= axis else i + 1 for i in range(len(shape)))
        out = first(bind(BroadcastInDim(wide, dims, shape), a))
        return reshape(out, shape[:axis] + (n * count,) + shape[axis + 1:])
    index = np.repeat(np.arange(n, dtype=np.intp), counts)
    return first(bind(Gather(axis, shape, index.shape), a, index))


@implements(np.tile)
def tile(A, reps):
    """``np.tile``: ``A`` repeated ``reps[i]`` times along axis ``i`` (``A`` or ``reps``
    padded with leading ones to one length); always a new array, as NumPy's."""
    A = operand(A, "tile")
    reps = shape_tuple(reps, "tile")
    if any(r < 0 for r in reps):
        raise TensorShapeError(f"tile: negative reps {reps}")
    shape = shape_of(A)
    reps = (1,) * (len(shape) - len(reps)) + reps
    shape = (1,) * (len(reps) - len(shape)) + shape
    A = reshape(A, shape)
    if all(r == 1 for r in reps):
        return new_value(A)
    # (r0, s0, r1, s1, ...) by broadcasting, then merged pairwise
    wide = tuple(n for pair in zip(reps, shape) for n in pair)
    out = first(bind(BroadcastInDim(wide, tuple(range(1, 2 * len(shape), 2)), shape), A))
    return reshape(out, tuple(r * n for r, n in zip(reps, shape)))


@implements(np.resize)
def resize(a, new_shape):
    """``np.resize``: the flattened ``a`` repeated (or cut) to fill ``new_shape``; zeros if
    ``a`` is empty. Linear: each entry's derivative collects its copies'.

    >>> resize(np.array([1.0, 2.0, 3.0]), (2, 2))
    array([[1., 2.],
           [3., 1.]])
    """
    a = operand(a, "resize")
    shape = shape_tuple(new_shape, "resize")
    if any(n < 0 for n in shape):
        raise TensorShapeError(f"resize: all elements of `new_shape` must be non-negative, got "
                               f"{shape}")
    size = math.prod(shape_of(a))
    if size == 0 or math.prod(shape) == 0:
        return where(True, np.zeros(shape, dtype_of(a)), 0)         # NumPy's zeros: a constant
    return reshape(take(reshape(a, (-1,)), np.resize(np.arange(size), math.prod(shape))), shape)


@implements(np.broadcast_arrays)
def broadcast_arrays(*args, subok: bool = False) -> tuple:
    """``np.broadcast_arrays``: the arrays broadcast to one shape, differentiable; a tuple
    (NumPy 2's) of new arrays.

    >>> [a.shape for a in broadcast_arrays(np.ones((3, 1)), np.ones(4))]
    [(3, 4), (3, 4)]
    """
    arrays = [operand(a, "broadcast_arrays") for a in args]
    try:
        shape = tuple(np.broadcast_shapes(*(shape_of(a) for a in arrays)))
    except ValueError:
        raise TensorShapeError(f"broadcast_arrays: shapes {[shape_of(a) for a in arrays]} "
                               "cannot be broadcast together") from None
    return tuple(new_value(a) if shape_of(a) == shape else broadcast_to(a, shape)
                 for a in arrays)


# --- padding ------------------------------------------------------------------------------


_INDEX_MODES = ("edge", "reflect", "symmetric", "wrap")   # each a gather of x's own entries
_OWN_MODES = ("constant", "empty") + _INDEX_MODES             # what this module pads with


def pad(x, pad_width, mode: str = "constant", **kwargs):
    """``np.pad`` in the modes made of constants and of ``x``'s own entries: ``"constant"``
    (``constant_values``, one scalar or per axis and side; ``"empty"`` pads with zeros),
    ``"edge"``, ``"reflect"``, ``"symmetric"`` and ``"wrap"`` (gathers of ``x``'s entries),
    differentiable in ``x``. ``tnp.pad`` (:mod:`.padding`) adds the statistics and ramps.

    >>> pad(np.arange(3.0), (2, 1), mode="reflect")
    array([2., 1., 0., 1., 2., 1.])
    """
    if mode not in _OWN_MODES:
        raise TensorNotSupportedError(f"pad: mode {mode!r} is not supported (one of "
                                      f"{', '.join(_OWN_MODES)})")
    check_pad_options(mode, kwargs, {"constant": {"constant_values"},
                                     "reflect": {"reflect_type"},
                                     "symmetric": {"reflect_type"}}.get(mode, set()))
    x, widths = operand(x), pad_widths(x, pad_width)
    if not widths.any():
        return new_value(x)
    values = kwargs.get("constant_values", 0)
    if not is_python_scalar(values):        # (its derivative is not taken: refused if it has one)
        values = constant_values(values, "pad: constant_values")
    if mode in ("constant", "empty") and (is_python_scalar(values) or np.ndim(values) == 0):
        return _pad_constant(x, widths, values)

    def constant_block(x, axis: int, side: int, width: int):
        shape = shape_of(x)
        value = pad_pairs(values, shape, "constant_values")[axis, side]
        return np.full(shape[:axis] + (width,) + shape[axis + 1:], value).astype(dtype_of(x))
    return pad_by_axis(x, widths, mode, constant_block)


def check_pad_options(mode: str, options: dict, allowed: set) -> None:
    """``np.pad``'s keyword arguments for ``mode``: only ``allowed`` ones, ``reflect_type``
    ``"even"`` only."""
    if set(options) - allowed:
        raise TensorTypeError(f"pad: unsupported keyword arguments for mode {mode!r}: "
                              f"{sorted(set(options) - allowed)}")
    if options.get("reflect_type", "even") != "even":
        raise TensorNotSupportedError("pad: only reflect_type='even' is supported")


def pad_widths(x, pad_width) -> np.ndarray:
    """``pad_width`` as checked ``(before, after)`` pairs, one per axis of ``x``."""
    widths = pad_pairs(pad_width, shape_of(operand(x)), "pad_width", integral=True)
    if (widths < 0).any():
        raise TensorShapeError(f"pad: negative pad_width {pad_width!r}")
    return widths


def pad_pairs(value, shape: tuple, what: str, integral: bool = False) -> np.ndarray:
    """``np.pad``'s per-axis ``(before, after)`` pairs of ``value``, shape ``(ndim, 2)``."""
    pairs = np.asarray(constant_values(value, f"pad: {what}"))
    if integral and pairs.size and not np.issubdtype(pairs.dtype, np.integer):
        raise TensorTypeError(f"pad: `{what}` must be of integral type")
    try:
        return np.broadcast_to(pairs.astype(np.int64) if integral else pairs, (len(shape), 2))
    except ValueError:
        raise TensorShapeError(f"pad: {what} {value!r} does not fit an array of shape "
                               f"{shape}") from None


def _pad_constant(x, widths: np.ndarray, value):
    """``x`` padded with one scalar ``value`` (cast to ``x``'s dtype, as NumPy does)."""
    shape = shape_of(x)
    op = Pad(tuple(int(w) for w in widths[:, 0]), tuple(int(w) for w in widths[:, 1]),
             (0,) * len(shape), shape)
    if value == 0:
        return first(bind(op, x))
    border = np.pad(np.zeros(shape, dtype=dtype_of(x)), widths, constant_values=value)
    return add(first(bind(op, x)), border)       # exact: x + 0 inside, 0 + border outside


def pad_by_axis(x, widths: np.ndarray, mode: str, block):
    """``x`` padded one axis after another, as NumPy does: by a gather in an index mode, else
    between the blocks ``block(x, axis, side, width)`` gives (``side`` 0 before, 1 after)."""
    for axis, (before, after) in enumerate(widths.tolist()):
        if not (before or after):
            continue
        shape = shape_of(x)
        if mode in _INDEX_MODES:
            if shape[axis] == 0:
                raise TensorShapeError(f"pad: can't extend empty axis {axis} using modes "
                                       "other than 'constant' or 'empty'")
            index = np.pad(np.arange(shape[axis], dtype=np.intp), (before, after), mode=mode)
            x = first(bind(Gather(axis, shape, index.shape), x, index))
            continue
        parts = [x]
        for side, width in ((0, before), (1, after)):
            if width:                # (a ramp of no entries would divide by zero)
                parts.insert(len(parts) if side else 0, block(x, axis, side, width))
        x = concatenate(parts, axis)
    return x


def edge_slice(x, axis: int, side: int, count: int):
    """The first (``side`` 0) or last ``count`` entries of ``x`` along ``axis``."""
    n = shape_of(x)[axis]
    part = slice(0, count) if side == 0 else slice(n - count, n)
    return getitem(x, (slice(None),) * axis + (part,))


# --- splitting ----------------------------------------------------------------------------


def _split(ary, indices_or_sections, axis, fn: str, even: bool) -> list:
    ary = operand(ary, fn)
    shape = shape_of(ary)
    axis = normalize_axis(axis, len(shape), fn)
    n = shape[axis]
    sections = indices_or_sections
    if not isinstance(sections, numbers.Integral) or isinstance(sections, (bool, np.bool_)):
        points = _static_integers(sections, fn, "indices_or_sections")
        if points.ndim == 0:
            sections = int(points)
        elif points.ndim != 1:
            raise TensorShapeError(f"{fn}: indices_or_sections must be an integer or a 1-d "
                                   f"sequence of integers, got shape {points.shape}")
    if isinstance(sections, numbers.Integral):
        sections = int(sections)
        if sections <= 0:
            raise TensorShapeError(f"{fn}: number sections must be larger than 0, got "
                                   f"{sections}")
        if even and n % sections:
            raise TensorShapeError(f"{fn}: array split does not result in an equal division: "
                                   f"{n} elements along axis {axis} into {sections} sections")
        each, extra = divmod(n, sections)
        return _split_sizes(ary, axis, [each + 1] * extra + [each] * (sections - extra))
    # pieces ary[p0:p1], ary[p1:p2], ... along axis, with Python's slice semantics
    bounds = [0, *(int(p) for p in points), n]
    pieces = []
    for begin, end in zip(bounds[:-1], bounds[1:]):
        start, stop, _ = slice(begin, end).indices(n)
        pieces.append((start, max(start, stop)))
    if all(stop == start for (_, stop), (start, _) in zip(pieces[:-1], pieces[1:])):
        return _split_sizes(ary, axis, [stop - start for start, stop in pieces])
    lead = (slice(None),) * axis                   # pieces overlap: one slice each
    return [getitem(ary, lead + (slice(start, stop),)) for start, stop in pieces]


@implements(np.split)
def split(ary, indices_or_sections, axis: int = 0) -> list:
    """``np.split``: a list of pieces along ``axis``, ``indices_or_sections`` equal ones or cut
    at the given indices.

    >>> split(np.arange(4.0), [1])
    [array([0.]), array([1., 2., 3.])]
    """
    return _split(ary, indices_or_sections, axis, "split", even=True)


@implements(np.array_split)
def array_split(ary, indices_or_sections, axis: int = 0) -> list:
    """``np.array_split``: :func:`split` allowing sections of unequal size (the first
    ``n % sections`` get one element more)."""
    return _split(ary, indices_or_sections, axis, "array_split", even=False)


def _split_at_least(ary, indices_or_sections, ndim: int, axis: int, fn: str) -> list:
    ary = operand(ary, fn)
    if len(shape_of(ary)) < ndim:
        raise TensorShapeError(f"{fn} only works on arrays of {ndim} or more dimensions, got "
                               f"shape {shape_of(ary)}")
    return _split(ary, indices_or_sections, axis, fn, even=True)


@implements(np.hsplit)
def hsplit(ary, indices_or_sections) -> list:
    """``np.hsplit``: :func:`split` along axis 1 (axis 0 of a 1-d array)."""
    axis = 1 if len(shape_of(operand(ary, "hsplit"))) > 1 else 0
    return _split_at_least(ary, indices_or_sections, 1, axis, "hsplit")


@implements(np.vsplit)
def vsplit(ary, indices_or_sections) -> list:
    """``np.vsplit``: :func:`split` along axis 0 of an array of at least 2 dimensions."""
    return _split_at_least(ary, indices_or_sections, 2, 0, "vsplit")


@implements(np.dsplit)
def dsplit(ary, indices_or_sections) -> list:
    """``np.dsplit``: :func:`split` along axis 2 of an array of at least 3 dimensions."""
    return _split_at_least(ary, indices_or_sections, 3, 2, "dsplit")


# --- stacking -----------------------------------------------------------------------------


def _at_least(a, ndim: int, fn: str):
    """``a`` with axes of size one added as ``atleast_{ndim}d`` does."""
    a = operand(a, fn)
    shape = shape_of(a)
    if len(shape) >= ndim:
        return a
    if ndim == 3 and len(shape) == 2:
        return reshape(a, shape + (1,))
    if ndim == 3 and len(shape) == 1:
        return reshape(a, (1,) + shape + (1,))
    return reshape(a, (1,) * (ndim - len(shape)) + shape)


def _atleast(arys, ndim: int, fn: str):
    results = tuple(not_itself(_at_least(a, ndim, fn), a) for a in arys)
    return results[0] if len(results) == 1 else results


@implements(np.atleast_1d)
def atleast_1d(*arys):
    """``np.atleast_1d``: one array for one argument, else a tuple."""
    return _atleast(arys, 1, "atleast_1d")


@implements(np.atleast_2d)
def atleast_2d(*arys):
    """``np.atleast_2d``: a 1-d ``(n,)`` becomes ``(1, n)``; one array for one argument,
    else a tuple."""
    return _atleast(arys, 2, "atleast_2d")


@implements(np.atleast_3d)
def atleast_3d(*arys):
    """``np.atleast_3d``: ``(n,)`` becomes ``(1, n, 1)`` and ``(m, n)`` becomes ``(m, n, 1)``;
    one array for one argument, else a tuple."""
    return _atleast(arys, 3, "atleast_3d")


def _sequence(tup, fn: str) -> list:
    """The arrays of a stacking function's argument (an array stacks its rows, as in NumPy)."""
    if isinstance(tup, (list, tuple)):
        return list(tup)
    if (isinstance(tup, (Frontend, np.ndarray)) or is_foreign_array(tup)) and shape_of(tup):
        return list(tup)
    raise TensorTypeError(f"{fn}: arrays to stack must be passed as a sequence such as a list "
                          f"or tuple, got {type(tup).__name__}")


def _stack_along(arrays: list, axis: int, fn: str, dtype=None, casting: str = "same_kind"):
    if not arrays:
        raise TensorShapeError(f"{fn}: need at least one array to concatenate")
    return _concatenate(cast_operands(arrays, dtype, casting, fn), axis, fn)


def _new_if_given(result, items: list):
    """``result``, or a new tensor on its values if it is the one eager ``Tensor`` the caller
    gave (``hstack([t])``: concatenating one array has nothing to do)."""
    return not_itself(result, items[0]) if len(items) == 1 else result


@implements(np.hstack)
def hstack(tup, *, dtype=None, casting: str = "same_kind"):
    """``np.hstack``: concatenate along axis 1 (axis 0 for 1-d arrays)."""
    items = _sequence(tup, "hstack")
    arrays = [_at_least(a, 1, "hstack") for a in items]
    axis = 0 if arrays and len(shape_of(arrays[0])) == 1 else 1
    return _new_if_given(_stack_along(arrays, axis, "hstack", dtype, casting), items)


@implements(np.vstack)
def vstack(tup, *, dtype=None, casting: str = "same_kind"):
    """``np.vstack``: concatenate along axis 0, 1-d arrays as rows."""
    return _vstack(tup, dtype, casting, "vstack")


def row_stack(tup, *, dtype=None, casting: str = "same_kind"):
    """``np.row_stack`` (deprecated by NumPy 2.0): :func:`vstack`."""
    return _vstack(tup, dtype, casting, "row_stack")


def _vstack(tup, dtype, casting: str, fn: str):
    items = _sequence(tup, fn)
    arrays = [_at_least(a, 2, fn) for a in items]
    return _new_if_given(_stack_along(arrays, 0, fn, dtype, casting), items)


if hasattr(np, "row_stack"):
    implements(np.row_stack)(row_stack)


@implements(np.dstack)
def dstack(tup):
    """``np.dstack``: concatenate along axis 2, after :func:`atleast_3d`."""
    items = _sequence(tup, "dstack")
    arrays = [_at_least(a, 3, "dstack") for a in items]
    return _new_if_given(_stack_along(arrays, 2, "dstack"), items)


@implements(np.column_stack)
def column_stack(tup):
    """``np.column_stack``: 0-d and 1-d arrays become columns, then concatenate along axis 1."""
    arrays = []
    items = _sequence(tup, "column_stack")
    for a in items:
        a = operand(a, "column_stack")
        shape = shape_of(a)
        arrays.append(reshape(a, (-1, 1) if len(shape) == 1 else (1, 1)) if len(shape) < 2
                      else a)
    return _new_if_given(_stack_along(arrays, 1, "column_stack"), items)


def _block_depth(value, index: tuple) -> int:
    """The nesting depth of ``np.block``'s lists at ``arrays[index]``; NumPy's errors."""
    if type(value) is tuple:
        raise TensorTypeError(f"block: arrays{''.join(f'[{i}]' for i in index)} is a tuple. "
                              "Only lists can be used to arrange blocks, and np.block does not "
                              "allow implicit conversion from tuple to ndarray.")
    if type(value) is not list:
        return 0
    if not value:
        raise TensorShapeError(f"block: list at arrays{''.join(f'[{i}]' for i in index)} cannot "
                               "be empty")
    depths = {_block_depth(item, index + (i,)) for i, item in enumerate(value)}
    if len(depths) != 1:
        raise TensorShapeError(f"block: list depths are mismatched under arrays"
                               f"{''.join(f'[{i}]' for i in index)}")
    return depths.pop() + 1


def _block_leaves(value) -> list:
    return [leaf for item in value for leaf in _block_leaves(item)] \
        if type(value) is list else [value]


@implements(np.block)
def block(arrays):
    """``np.block``: one array assembled from nested lists of blocks, the innermost lists
    concatenated along the last axis, the next ones along the axis before, and so on; each
    block first gets leading axes of size one up to the result's dimension (the larger of
    the nesting depth and the blocks' dimensions). Differentiable in every block.

    >>> block([[np.eye(2), np.zeros((2, 1))], [np.ones((1, 2)), 2.0]])
    array([[1., 0., 0.],
           [0., 1., 0.],
           [1., 1., 2.]])
    """
    depth = _block_depth(arrays, ())

    def leaf(value):          # a Python number is an array (of float64...), as NumPy's
        return np.asarray(value) if is_python_scalar(value) else operand(value, "block")
    ndim = max([depth] + [len(shape_of(leaf(x))) for x in _block_leaves(arrays)])

    def assemble(value, level: int):
        if level == depth:
            x = leaf(value)
            return reshape(x, (1,) * (ndim - len(shape_of(x))) + shape_of(x))
        return _concatenate([assemble(item, level + 1) for item in value], level - depth,
                            "block")
    if depth == 0:
        return copy(assemble(arrays, 0))
    return _new_if_given(assemble(arrays, 0), _block_leaves(arrays))


def _static_positions(obj, fn: str):
    """``insert``'s or ``delete``'s ``obj`` as NumPy takes it: a slice, a number or a sequence
    as given; a tensor, traced value or other library's array read now (the result's shape
    depends on it: a ``ConcretizationError`` under ``jit`` or ``vmap``)."""
    if isinstance(obj, Frontend) or is_foreign_array(obj):
        return to_host(data_of(obj, f"{fn}: reading obj (the result's shape depends on it)"))
    return obj


def _positions_error(error: Exception) -> type:
    """The TiduError for NumPy's error laying out ``insert``'s or ``delete``'s positions."""
    if isinstance(error, IndexError):
        return TensorIndexError
    return TensorTypeError if isinstance(error, TypeError) else TensorShapeError


@implements(np.delete)
def delete(arr, obj, axis=None):
    """``np.delete``: ``arr`` without the slices along ``axis`` (the entries of the flattened
    ``arr`` for ``None``) that ``obj`` selects (an integer, a slice, integers or a boolean
    mask, read now); the derivative goes to the entries kept.

    >>> delete(np.arange(5.0), [0, 3])
    array([1., 2., 4.])
    """
    arr = operand(arr, "delete")
    if axis is None:
        arr, axis = ravel(arr), 0
    axis = normalize_axis(axis, len(shape_of(arr)), "delete")
    obj = _static_positions(obj, "delete")
    try:
        kept = np.delete(np.arange(shape_of(arr)[axis]), obj)
    except (IndexError, ValueError, TypeError) as error:
        raise _positions_error(error)(f"delete: {error}") from None
    return take(arr, kept, axis=axis)


@implements(np.insert)
def insert(arr, obj, values, axis=None):
    """``np.insert``: ``values`` inserted into ``arr`` before the positions ``obj`` (read now)
    along ``axis`` (into the flattened ``arr`` for ``None``), laid out as NumPy lays them out
    (a scalar ``obj`` inserts ``values`` as one block, a sequence one slice per position)
    and cast to ``arr``'s dtype; differentiable in ``arr`` and ``values``.

    >>> insert(np.arange(3.0), 1, [10.0, 20.0])
    array([ 0., 10., 20.,  1.,  2.])
    """
    arr, values = operand(arr, "insert"), operand(values, "insert")
    if axis is None:
        arr, axis = ravel(arr), 0
    axis = normalize_axis(axis, len(shape_of(arr)), "insert")
    n, m = math.prod(shape_of(arr)), math.prod(shape_of(values))
    obj = _static_positions(obj, "insert")
    # NumPy's layout of the entries' positions in [arr.ravel(), values.ravel()]
    try:
        layout = np.insert(np.arange(n).reshape(shape_of(arr)), obj,
                           np.arange(n, n + m).reshape(shape_of(values)), axis=axis)
    except (IndexError, ValueError, TypeError) as error:
        raise _positions_error(error)(f"insert: {error}") from None
    source = concatenate([reshape(arr, (-1,)), reshape(as_dtype(values, dtype_of(arr)), (-1,))])
    return take(source, layout)


@implements(np.append)
def append(arr, values, axis=None):
    """``np.append``: ``values`` concatenated after ``arr`` along ``axis`` (both flattened if
    ``None``)."""
    arr, values = operand(arr, "append"), operand(values, "append")
    if axis is None:
        arr, values, axis = reshape(arr, (-1,)), reshape(values, (-1,)), 0
    return _concatenate([arr, values], normalize_axis(axis, len(shape_of(arr)), "append"), "append")


# --- axes ---------------------------------------------------------------------------------


def _axis_list(axes, ndim: int, fn: str, what: str) -> list:
    axes = list(axes) if isinstance(axes, (list, tuple)) or np.ndim(axes) else [axes]
    result = [normalize_axis(a, ndim, fn) for a in axes]
    if len(set(result)) != len(result):
        raise TensorShapeError(f"{fn}: repeated axis in `{what}` argument: {axes}")
    return result


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    """``np.moveaxis``: axes ``source`` moved to positions ``destination``, the others kept
    in order."""
    a = operand(a, "moveaxis")
    ndim = len(shape_of(a))
    source = _axis_list(source, ndim, "moveaxis", "source")
    destination = _axis_list(destination, ndim, "moveaxis", "destination")
    if len(source) != len(destination):
        raise TensorShapeError("moveaxis: `source` and `destination` arguments must have the "
                               f"same number of elements, got {len(source)} and "
                               f"{len(destination)}")
    order = [i for i in range(ndim) if i not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return not_itself(transpose(a, order), a)


@implements(np.swapaxes)
def swapaxes(a, axis1: int, axis2: int):
    """``np.swapaxes``."""
    a = operand(a, "swapaxes")
    ndim = len(shape_of(a))
    axis1, axis2 = normalize_axis(axis1, ndim, "swapaxes"), normalize_axis(axis2, ndim, "swapaxes")
    order = list(range(ndim))
    order[axis1], order[axis2] = axis2, axis1
    return not_itself(transpose(a, order), a)


@implements(np.matrix_transpose, np.linalg.matrix_transpose)
def matrix_transpose(x, /):
    """``np.matrix_transpose`` (the Array API's, also ``np.linalg``'s): ``x`` with its last two
    axes swapped; ``x`` must be at least 2-d.

    >>> matrix_transpose(np.zeros((4, 2, 3))).shape
    (4, 3, 2)
    """
    x = operand(x, "matrix_transpose")
    if len(shape_of(x)) < 2:
        raise TensorShapeError(f"matrix_transpose: input array must be at least 2-dimensional, "
                               f"got shape {shape_of(x)}")
    return swapaxes(x, -1, -2)


@implements(np.rollaxis)
def rollaxis(a, axis: int, start: int = 0):
    """``np.rollaxis``: ``axis`` moved to lie before ``start`` (prefer :func:`moveaxis`)."""
    a = operand(a, "rollaxis")
    ndim = len(shape_of(a))
    axis = normalize_axis(axis, ndim, "rollaxis")
    start = _integer(start, "rollaxis", "start")
    if not -ndim <= start <= ndim:
        raise TensorShapeError(f"rollaxis: 'start' arg requires {-ndim} <= start < {ndim + 1}, "
                               f"but {start} was passed in")
    if start < 0:
        start += ndim
    if axis < start:
        start -= 1
    order = [i for i in range(ndim) if i != axis]
    order.insert(start, axis)
    return not_itself(transpose(a, order), a)


@implements(np.ravel)
def ravel(a, order: str = "C"):
    """``np.ravel`` in C order (a new array, never a view); other orders are not supported."""
    if order != "C":
        raise TensorNotSupportedError(f"ravel: order {order!r} is not supported (only 'C')")
    a = operand(a, "ravel")
    return not_itself(reshape(a, (-1,)), a)


@implements(np.unstack)
def unstack(x, /, *, axis: int = 0) -> tuple:
    """``np.unstack`` (the Array API's): the tuple of ``x``'s slices along ``axis``, the inverse
    of :func:`stack`.

    >>> unstack(np.arange(4.0).reshape(2, 2), axis=1)
    (array([0., 2.]), array([1., 3.]))
    """
    x = operand(x, "unstack")
    shape = shape_of(x)
    if not shape:
        raise TensorShapeError("unstack: input array must be at least 1-d, got a 0-d array")
    axis = normalize_axis(axis, len(shape), "unstack")
    return tuple(getitem(x, (slice(None),) * axis + (i,)) for i in range(shape[axis]))


# --- copies ----------------------------------------------------------------------------------


@implements(np.copy)
def copy(a, order: str = "K", subok: bool = False):
    """``np.copy``: a new array with ``a``'s values; on tensors and traced values a recorded
    copy, so the derivative flows through it (``torch.clone``).

    >>> a = np.ones(2)
    >>> copy(a) is a
    False
    """
    if order not in ("K", "A", "C", "F"):
        raise TensorTypeError(f"copy: order must be one of 'K', 'A', 'C', 'F', got {order!r}")
    return first(bind(ew.copy, operand(a, "copy")))


# --- indexing along an axis -----------------------------------------------------------------


def _along_axis(arr, indices, axis, fn: str):
    """``arr`` (flattened when ``axis`` is ``None``), its axis, and the flat positions in it
    that ``take_along_axis`` reads (``put_along_axis`` writes), of the result's shape.
    Indices that are tensors or traced values stay data: their positions are computed by ops
    (checked when they run), so ``jit`` and ``vmap`` take them."""
    arr = operand(arr, fn)
    indices = operand(indices, fn)
    if dtype_of(indices).kind not in "iu":
        raise TensorIndexError(f"{fn}: `indices` must be an integer array, got "
                               f"{dtype_of(indices)}")
    index_shape = shape_of(indices)
    if axis is None:
        if len(index_shape) != 1:
            raise TensorShapeError(f"{fn}: when axis=None, `indices` must have a single "
                                   f"dimension, got shape {index_shape}")
        arr, axis = reshape(arr, (-1,)), 0
    shape = shape_of(arr)
    if len(index_shape) != len(shape):
        raise TensorShapeError(f"{fn}: `indices` and `arr` must have the same number of "
                               f"dimensions, got shapes {index_shape} and {shape}")
    axis = normalize_axis(axis, len(shape), fn)
    try:
        index = index_array(indices, shape[axis], axis)
    except TensorIndexError as error:
        raise TensorIndexError(f"{fn}: {error}") from None
    ndim = len(shape)
    try:
        out = np.broadcast_shapes(shape[:axis] + (1,) + shape[axis + 1:],
                                  index_shape[:axis] + (1,) + index_shape[axis + 1:])
    except ValueError:
        raise TensorShapeError(f"{fn}: shapes {shape} of arr and {index_shape} of indices "
                               f"cannot be broadcast together off axis {axis}") from None
    out = out[:axis] + (index_shape[axis],) + out[axis + 1:]
    # position = sum of coordinate * stride; a size-one axis of arr broadcasts (coordinate 0)
    strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(ndim)]
    traced = isinstance(index, Frontend)
    positions = (broadcast_to if traced else np.broadcast_to)(index, out) * np.intp(strides[axis])
    for d, size in enumerate(shape):
        if d != axis and size != 1:
            coordinate = np.arange(size).reshape([size if e == d else 1 for e in range(ndim)])
            positions = positions + coordinate * strides[d]
    if traced:
        return arr, broadcast_to(positions, out)
    return arr, np.ascontiguousarray(positions, dtype=np.intp)


@implements(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    """``np.take_along_axis``: ``arr``'s elements at ``indices`` along ``axis`` (the flattened
    array if ``None``); the other axes of ``arr`` and ``indices`` broadcast."""
    arr, positions = _along_axis(arr, indices, axis, "take_along_axis")
    flat = reshape(arr, (-1,))
    return first(bind(Gather(0, shape_of(flat), positions.shape), flat, positions))


@implements(np.put_along_axis)
def put_along_axis(arr, indices, values, axis, inplace: bool = True):
    """``jax.numpy.put_along_axis``: with ``inplace=False``, ``arr`` with ``values`` put at
    ``indices`` along ``axis``, as a new array (tensors are immutable, so NumPy's in-place
    form, the default, raises). Where ``indices`` repeat a position, the last value wins,
    as NumPy's assignment does, and only it gets a derivative.

    >>> put_along_axis(np.zeros((2, 2)), np.array([[1], [0]]), 5.0, 1, inplace=False)
    array([[0., 5.],
           [5., 0.]])
    """
    if inplace:
        raise TensorNotSupportedError(
            "put_along_axis: tensors are immutable, so arr cannot be modified in place as "
            "numpy.put_along_axis does; pass inplace=False to get the updated array as a new "
            "value (as jax.numpy.put_along_axis)")
    source = operand(arr, "put_along_axis")
    arr, positions = _along_axis(source, indices, axis, "put_along_axis")
    flat = reshape(arr, (-1,))
    dtype = dtype_of(flat)
    try:
        values = broadcast_to(as_dtype(operand(values, "put_along_axis"), dtype), positions.shape)
    except TensorShapeError:
        raise TensorShapeError(f"put_along_axis: values of shape {shape_of(values)} cannot be "
                               f"broadcast to the indexed shape {positions.shape}") from None
    return reshape(_put_flat(flat, positions, values), shape_of(source))


def _put_flat(flat, positions, values):
    """``flat`` (1-d) with ``values`` (of ``positions``' shape) written at ``positions``, the
    last write to a position winning (NumPy's assignment order)."""
    values = reshape(values, (-1,))
    targets = reshape(positions, (-1,))
    size = shape_of(flat)[0]
    if isinstance(targets, Frontend):
        values, targets, written = _last_writes_traced(values, targets, size)
    else:
        values, targets, written = _last_writes(values, targets, size)
    scattered = first(bind(ScatterAdd(0, (size,), shape_of(targets)), values, targets))
    return where(written, scattered, flat)


def _naming_errors(method):
    """``x.at[...].<method>`` with its index and type errors naming it (those of the key
    are NumPy's indexing messages, which name no function)."""
    name = method.__name__

    @functools.wraps(method)
    def named(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (TensorIndexError, TensorTypeError) as error:
            message = str(error)
            if type(error) not in (TensorIndexError, TensorTypeError) or \
                    message.startswith("x.at["):
                raise
            for prefix in (f"{name}: ", "getitem: "):
                message = message.removeprefix(prefix)
            raise type(error)(f"x.at[...].{name}: {message}") from None
    return named


class IndexUpdates:
    """``x.at[key]``: JAX's indexed updates, which return a new array (tensors and traced
    values are immutable). ``key`` is any index ``x[key]`` takes (integers, slices, ``None``,
    ``...``, integer arrays, traced ones too); each method differentiates in ``x`` and in
    ``values``.

    - ``get()``: ``x[key]``;
    - ``set(values)``: ``x`` with ``x[key] = values`` (``values`` broadcast to ``x[key]``'s
      shape and cast to ``x``'s dtype); where the key repeats a position, the last value
      wins, as NumPy's assignment, and only it gets a derivative;
    - ``add(values)``: ``x`` with ``values`` added at ``key``, repeated positions adding up
      (``np.add.at``'s semantics, JAX's ``.add``); ``subtract(values)`` subtracts them;
    - ``multiply(values)`` (also ``mul``): ``x`` times the product of the values at each
      position; ``divide(values)`` and ``power(values)``: ``x`` over, or to the power of,
      that product, as JAX computes them (``divide`` is true division: a float result for
      integers). Their derivatives never divide by a factor: with zeros among repeated
      factors, each factor's is ``x`` times the product of the others;
    - ``min(values)``, ``max(values)``: the least (greatest) of ``x`` and the values at each
      position; where several equal the result, each gets an equal share of its
      derivative (JAX's convention); complex numbers compare as NumPy's and JAX's do,
      real parts first;
    - ``apply(func)``: a unary elementwise ``func`` applied at ``key``, once per occurrence
      of a position (``np.ufunc.at``'s and JAX's semantics; unlike JAX, differentiable).
      A ``func`` that mixes entries (``t - mean(t)``, a sort, ``cumsum``) raises: its
      values on a small probe differ from those on the probe's halves.
      With indices known now, ``func`` runs as often as the most repeated position, its
      ``t``-th call on the positions hit at least ``t`` times (as many values in all as
      there are indices). With traced ones (``jit``, ``vmap``), whose repeats are not known,
      it runs once per index (``m`` calls: any one position may take them all), each call
      on all ``m`` values up to ``m = 256``, above it the ``t``-th call on the ``m // t``
      most hit positions (no more can be hit ``t`` times): about ``m log m`` values in all.

    JAX's ``mode=`` says what an integer index out of range does (a slice never is):

    - ``None`` or ``"promise_in_bounds"`` (the default): it raises NumPy's ``IndexError``
      (checked when the op runs, for traced indices), where JAX would clip a ``get`` and
      drop an update;
    - ``"clip"``: it is clamped into ``[0, n - 1]``, and so is its derivative's position;
    - ``"drop"`` or ``"fill"``: an update there is dropped (its values get a zero
      derivative); ``get`` gives ``fill_value`` there (a scalar, cast to ``x``'s dtype; by
      default NaN for floats, the smallest signed and the largest unsigned integer,
      ``True``), with a zero derivative.

    As in JAX, a negative index first counts from the end (``-n`` is ``0``, ``-n - 1`` is
    out of range), unless ``wrap_negative_indices=False`` (then, with a mode other than the
    default, it is out of range). ``get`` ignores ``fill_value`` in the other modes, as JAX
    does; ``set`` and ``add`` refuse it (JAX's have no such keyword). ``indices_are_sorted``
    and ``unique_indices`` are hints, ignored (the result is right either way). The index
    arrays stay operands in every mode: ``jit`` traces once for all their values.

    Traced values and tensors have it as ``x.at``; for any array, :func:`at` (a NumPy array
    has no ``.at``). The updates take ``set``'s keywords (``apply`` JAX's: no
    ``out_sharding``).

    >>> x = np.zeros(4)
    >>> IndexUpdates(x)[np.array([1, 1, 3])].add(1.0)
    array([0., 2., 0., 1.])
    >>> IndexUpdates(x)[1:3].set(np.array([5.0, 6.0]))
    array([0., 5., 6., 0.])
    >>> IndexUpdates(x)[np.array([1, 7, -1])].add(1.0, mode="drop")
    array([0., 1., 0., 1.])
    >>> IndexUpdates(np.arange(4.0))[np.array([1, 7, -5])].get(mode="fill")
    array([ 1., nan, nan])
    >>> IndexUpdates(np.arange(4.0))[np.array([1, 7, -5])].get(mode="clip")
    array([1., 3., 0.])
    >>> IndexUpdates(np.ones(3))[np.array([0, 0, 2])].multiply(np.array([2.0, 3.0, 4.0]))
    array([6., 1., 4.])
    >>> IndexUpdates(np.ones(3))[np.array([0, 0, 2])].min(np.array([2.0, -3.0, 0.5]))
    array([-3. ,  1. ,  0.5])
    >>> IndexUpdates(np.ones(3))[np.array([0, 0])].apply(lambda t: t * 10)
    array([100.,   1.,   1.])
    """

    __slots__ = ("_array",)

    def __init__(self, array) -> None:
        self._array = array

    def __getitem__(self, key) -> "_IndexedUpdate":
        return _IndexedUpdate(self._array, key)

    def __repr__(self) -> str:
        return ("IndexUpdates (use x.at[key].get(), .set(values), .add(values), .subtract, "
                ".multiply, .divide, .power, .min, .max or .apply(func))")


def at(x) -> IndexUpdates:
    """``x.at`` for any array: ``tnp.at(x)[key].set(v)`` is ``x.at[key].set(v)``, for a NumPy
    array too (what ``tnp.zeros`` returns), which has no ``.at`` of its own (JAX's
    ``jnp.zeros(n).at[i].set(v)``: write ``tnp.at(tnp.zeros(n))[i].set(v)``).

    >>> at(np.zeros(3))[1].set(4.0)
    array([0., 4., 0.])
    >>> at(np.zeros(3))[5].set(4.0, mode="clip")
    array([0., 0., 4.])
    """
    return IndexUpdates(x)


class _IndexedUpdate:
    """``x.at[key]``: see :class:`IndexUpdates`."""

    __slots__ = ("_array", "_key")

    def __init__(self, array, key) -> None:
        self._array, self._key = array, key

    @_naming_errors
    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode=None, fill_value=None, out_sharding=None, wrap_negative_indices: bool = True):
        bounds = _bounds_mode("get", mode, out_sharding, wrap_negative_indices)
        if bounds is None:
            out = getitem(self._array, self._key)
        else:
            x = operand(self._array, "x.at[...].get")
            entries = _bounded_entries(self._key, shape_of(x), wrap_negative_indices)
            out = getitem(x, _rebuilt_key(entries, _clamped_index("get", mode)))
            valid = _valid_mask(entries) if bounds == "fill" else None
            if valid is not None:
                out = where(valid, out, _fill_value(fill_value, dtype_of(x)))
        # JAX's result is a new array: a view NumPy's indexing gives of a plain array is copied,
        # and so is a tensor that indexing with a whole-array key (``:``, ``...``) gives back
        if type(out) is np.ndarray and type(self._array) is np.ndarray and \
                np.may_share_memory(out, self._array):
            return new_value(out)
        if out is self._array:
            return copy(out)
        return out

    @_naming_errors
    def set(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode=None, out_sharding=None, wrap_negative_indices: bool = True,
            fill_value=None):
        flat, positions, values, shape, dump = self._operands(
            values, "set", mode, out_sharding, wrap_negative_indices, fill_value)
        return _unpadded(_put_flat(flat, positions, values), shape, dump)

    @_naming_errors
    def add(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode=None, out_sharding=None, wrap_negative_indices: bool = True,
            fill_value=None):
        return self._summed("add", values, mode, out_sharding, wrap_negative_indices,
                            fill_value)

    @_naming_errors
    def subtract(self, values, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, mode=None, out_sharding=None,
                 wrap_negative_indices: bool = True, fill_value=None):
        return self._summed("subtract", values, mode, out_sharding, wrap_negative_indices,
                            fill_value)

    @_naming_errors
    def multiply(self, values, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, mode=None, out_sharding=None,
                 wrap_negative_indices: bool = True, fill_value=None):
        return self._scaled("multiply", values, mode, out_sharding, wrap_negative_indices,
                            fill_value)

    mul = multiply

    @_naming_errors
    def divide(self, values, *, indices_are_sorted: bool = False,
               unique_indices: bool = False, mode=None, out_sharding=None,
               wrap_negative_indices: bool = True, fill_value=None):
        return self._scaled("divide", values, mode, out_sharding, wrap_negative_indices,
                            fill_value)

    @_naming_errors
    def power(self, values, *, indices_are_sorted: bool = False,
              unique_indices: bool = False, mode=None, out_sharding=None,
              wrap_negative_indices: bool = True, fill_value=None):
        return self._scaled("power", values, mode, out_sharding, wrap_negative_indices,
                            fill_value)

    @_naming_errors
    def min(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode=None, out_sharding=None, wrap_negative_indices: bool = True,
            fill_value=None):
        return self._extremum("min", values, mode, out_sharding, wrap_negative_indices,
                              fill_value)

    @_naming_errors
    def max(self, values, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode=None, out_sharding=None, wrap_negative_indices: bool = True,
            fill_value=None):
        return self._extremum("max", values, mode, out_sharding, wrap_negative_indices,
                              fill_value)

    @_naming_errors
    def apply(self, func, *, indices_are_sorted: bool = False, unique_indices: bool = False,
              mode=None, wrap_negative_indices: bool = True):
        if not callable(func):
            raise TensorTypeError(f"x.at[...].apply: func must be a function, got "
                                  f"{type(func).__name__}")
        flat, positions, _, shape, dump = self._operands(
            np.zeros(()), "apply", mode, None, wrap_negative_indices, None)
        size, dtype = shape_of(flat)[0], dtype_of(flat)
        _check_elementwise(func, dtype)
        hit = _MostHitFirst(reshape(positions, (-1,)), size)
        # func's t-th call takes the first heads[t - 1] positions: those hit at least t times
        # (and, traced, some hit fewer, which where() keeps as they are); once a position's
        # last call is made, it is set aside (done), so the arrays only shrink
        values = first(bind(Gather(0, (size,), shape_of(hit.positions)), flat, hit.positions))
        times, done = hit.times, []
        for time, head in enumerate(hit.heads, start=1):
            if head < shape_of(values)[0]:
                done.append(values[head:])
                values, times = values[:head], times[:head]
            values = _applied_where(func, values, times >= time, dtype)
        applied = concatenate([np.zeros(1, dtype), values] + done[::-1], 0)
        written = first(bind(Gather(0, shape_of(applied), (size,)), applied, hit.slots))
        return _unpadded(where(hit.slots > 0, written, flat), shape, dump)

    def _summed(self, method: str, values, mode, out_sharding, wrap_negative_indices: bool,
                fill_value):
        """``add`` (and ``subtract``): the values at each position summed onto it."""
        flat, positions, values, shape, dump = self._operands(
            values, method, mode, out_sharding, wrap_negative_indices, fill_value)
        targets = reshape(positions, (-1,))
        size = shape_of(flat)[0]
        added = first(bind(ScatterAdd(0, (size,), shape_of(targets)), reshape(values, (-1,)),
                           targets))
        return _unpadded((add if method == "add" else subtract)(flat, added), shape, dump)

    def _scaled(self, method: str, values, mode, out_sharding, wrap_negative_indices: bool,
                fill_value):
        """``multiply``, ``divide``, ``power``: as JAX, ``x`` times, over, or to the power of
        the product of the values at each position (1 elsewhere)."""
        flat, positions, values, shape, dump = self._operands(
            values, method, mode, out_sharding, wrap_negative_indices, fill_value, pad=1)
        size = shape_of(flat)[0]
        targets, values = reshape(positions, (-1,)), reshape(values, (-1,))
        if dump:        # dropped updates multiply the dump slot by 1: no 0 / 0 there
            values = where(targets == np.intp(size - 1), np.ones((), dtype_of(values)), values)
        runs = _Runs(targets, values, size)
        one = np.ones(1, dtype=dtype_of(values))
        factors = runs.at_positions(one, runs.scanned(lambda earlier, later, same: multiply(
            where(same, earlier, one[0]), later)))       # (1 * later is later exactly)
        combine = {"multiply": multiply, "divide": divide, "power": power}[method]
        return _unpadded(combine(flat, factors), shape, dump)

    def _extremum(self, method: str, values, mode, out_sharding, wrap_negative_indices: bool,
                  fill_value):
        """``min`` and ``max``: the least (greatest) of ``x`` and the values at each
        position. Its derivative is JAX's: the mean of the derivatives of the values
        (``x``'s included) equal to the result."""
        flat, positions, values, shape, dump = self._operands(
            values, method, mode, out_sharding, wrap_negative_indices, fill_value)
        size, dtype = shape_of(flat)[0], dtype_of(flat)
        pick = minimum if method == "min" else maximum
        targets, values = reshape(positions, (-1,)), reshape(values, (-1,))
        fixed_flat, fixed_values = stop_gradient(flat), stop_gradient(values)
        runs = _Runs(targets, fixed_values, size)
        best = runs.at_positions(np.zeros(1, dtype), runs.scanned(
            lambda earlier, later, same: where(same, pick(earlier, later), later)))
        result = where(runs.written, pick(fixed_flat, best), fixed_flat)
        if dtype.kind not in "fc":
            return _unpadded(result, shape, dump)
        # result - (sum of zeros whose derivatives are minus the winners') / (their number)
        result_at = first(bind(Gather(0, (size,), shape_of(targets)), result, targets))
        update_wins, flat_wins = fixed_values == result_at, fixed_flat == result
        zero = np.zeros((), dtype)
        scatter = ScatterAdd(0, (size,), shape_of(targets))
        winners = add(as_dtype(flat_wins, dtype),
                      first(bind(scatter, as_dtype(update_wins, dtype), targets)))
        carried = add(where(flat_wins, _zero_with_derivative(flat), zero),
                      first(bind(scatter, where(update_wins, _zero_with_derivative(values),
                                                zero), targets)))
        winners = where(winners > zero, winners, np.ones((), dtype))   # none: NaN won
        out = where(runs.written, subtract(result, divide(carried, winners)), flat)
        return _unpadded(out, shape, dump)

    def _operands(self, values, method: str, mode, out_sharding, wrap_negative_indices: bool,
                  fill_value, pad: int = 0) -> tuple:
        """``x`` flattened, the flat positions ``key`` selects (in ``x[key]``'s shape), the
        values broadcast to that shape in ``x``'s dtype, ``x``'s shape, and whether the
        flattened ``x`` ends in a dump slot (one past its end, where dropped updates go,
        sliced off after the scatter: their values get a zero derivative)."""
        what = f"x.at[...].{method}"
        if fill_value is not None:
            raise TensorTypeError(f"{what} takes no fill_value (it is get's, for mode='fill')")
        bounds = _bounds_mode(method, mode, out_sharding, wrap_negative_indices)
        x = operand(self._array, what)
        shape = shape_of(x)
        size = math.prod(shape)
        table = np.arange(size, dtype=np.intp).reshape(shape)
        if bounds is None:
            positions, dump = getitem(table, self._key), False
        else:
            entries = _bounded_entries(self._key, shape, wrap_negative_indices)
            # an index into an empty axis has nowhere to be clamped to: it goes to a slot
            # padded past the axis' end, whose table entry is the dump slot (nothing of x,
            # empty, is written)
            empty = {axis for kind, _, axis, n in entries if kind == "index" and n == 0}
            if empty:
                table = np.pad(table, [(0, int(axis in empty)) for axis in range(len(shape))],
                               constant_values=size)
            positions = getitem(table, _rebuilt_key(entries, lambda index, n, axis: (
                _clamped(index, n) if n else _redirected(index, n))))
            valid = _valid_mask(entries) if bounds == "fill" else None
            if valid is not None:                  # dropped updates go to the dump slot
                positions = where(valid, positions, np.intp(size))
            dump = bool(empty) or valid is not None
        try:
            values = broadcast_to(as_dtype(operand(values, what), dtype_of(x)), shape_of(positions))
        except TensorShapeError:
            raise TensorShapeError(f"{what}: values of shape {shape_of(values)} cannot be "
                                   f"broadcast to the indexed shape {shape_of(positions)}") \
                from None
        flat = reshape(x, (-1,))
        if dump:
            flat = concatenate([flat, np.full(1, pad, dtype=dtype_of(x))], 0)
        return flat, positions, values, shape, dump


_INTP_MAX = np.array(np.iinfo(np.intp).max, dtype=np.intp)
_BOUNDS_MODES = {None: None, "promise_in_bounds": None, "clip": "clip", "drop": "fill",
                 "fill": "fill"}


def _bounds_mode(method: str, mode, out_sharding=None, wrap_negative_indices: bool = True):
    """What ``x.at[...].<method>`` does with an index out of range, from JAX's ``mode``:
    ``None`` (raise NumPy's ``IndexError``: JAX's ``"promise_in_bounds"`` promises there is
    none), ``"clip"``, or ``"fill"`` (JAX's ``"fill"`` and ``"drop"``: for updates both drop,
    for ``get`` both fill). JAX's ``out_sharding`` may only be ``None`` (tidu's arrays are
    not sharded); ``wrap_negative_indices=False`` needs a mode that says what a negative
    index (then out of range) does."""
    if out_sharding is not None:
        raise TensorNotSupportedError(
            f"x.at[...].{method}: out_sharding={out_sharding!r} is not supported: tidu's "
            "arrays are not sharded")
    if not (mode is None or isinstance(mode, str) and mode in _BOUNDS_MODES):
        raise TensorShapeError(
            f"x.at[...].{method}: unknown mode={mode!r}; JAX's modes are 'promise_in_bounds' "
            "(the default), 'clip', 'drop' and 'fill'")
    bounds = _BOUNDS_MODES[mode]
    if wrap_negative_indices is not True and bounds is None:
        raise TensorNotSupportedError(
            f"x.at[...].{method}: wrap_negative_indices={wrap_negative_indices!r} is not "
            f"supported with mode={mode!r}: a negative index counts from the end (NumPy's "
            "rule); with mode='clip', 'drop' or 'fill' it is out of range")
    return bounds


def _bounded_entries(key, shape: tuple, wrap_negative_indices: bool) -> list:
    """``key`` for ``x`` of ``shape`` as a list of ``(kind, value, axis, size)``: kind
    "index" for an integer index (a Python int, or an ``intp`` index array, NumPy's or data),
    negative ones wrapped (if ``wrap_negative_indices``), ``axis`` the axis it indexes and
    ``size`` that axis' length; "other" for the rest (a slice, ``None``, ``...``), kept as
    they are. (A boolean mask comes as its ``nonzero()`` index arrays, always in range.)"""
    entries, axis = [], 0
    for kind, value in _index_entries(key, shape):
        if kind in ("none", "ellipsis"):
            entries.append(("other", None if kind == "none" else Ellipsis, None, None))
            continue
        size = shape[axis]
        if kind == "slice":
            entries.append(("other", value, axis, size))
        else:
            if kind == "array" and dtype_of(value).kind == "u" and \
                    dtype_of(value).itemsize >= _INTP_MAX.dtype.itemsize:
                # (converted to intp, an unsigned index above its largest would go negative)
                value = minimum(value, _INTP_MAX.astype(dtype_of(value)))
            if isinstance(value, Frontend):
                value = as_dtype(value, np.intp)
                if wrap_negative_indices:
                    value = where(value < np.intp(0), add(value, np.intp(size)), value)
            elif kind == "array":
                value = np.asarray(to_host(value), dtype=np.intp)
                if wrap_negative_indices:
                    value = np.where(value < 0, value + size, value)
            elif wrap_negative_indices and value < 0:
                value += size
            entries.append(("index", value, axis, size))
        axis += 1
    return entries


def _rebuilt_key(entries: list, index_of) -> tuple:
    """The key of ``entries`` with each integer index ``i`` (of axis ``axis`` of length
    ``n``) replaced by ``index_of(i, n, axis)``."""
    return tuple(index_of(value, size, axis) if kind == "index" else value
                 for kind, value, axis, size in entries)


def _clamped_index(method: str, mode: str):
    """:func:`_clamped` for ``x.at[...].<method>``'s ``_rebuilt_key``, which refuses a
    non-empty index into an empty axis (no position to clamp it to, or to read)."""
    def clamped(index, size: int, axis: int):
        if size == 0 and math.prod(shape_of(index)) != 0:
            raise TensorIndexError(f"x.at[...].{method}: mode={mode!r} cannot index axis "
                                   f"{axis}, of length 0")
        return _clamped(index, size)
    return clamped


def _clamped(index, size: int):
    """Integer indices (non-negative once wrapped) clamped into ``[0, size - 1]``."""
    if isinstance(index, Frontend):
        return minimum(maximum(index, np.intp(0)), np.intp(size - 1))
    if isinstance(index, np.ndarray):
        return np.clip(index, 0, max(size - 1, 0))
    return min(max(index, 0), size - 1)


def _out_of_range(index, size: int):
    """Whether each integer index (non-negative once wrapped) is outside ``[0, size)``."""
    if isinstance(index, Frontend):
        return not_equal(_clamped(index, size), index) if size else \
            broadcast_to(np.ones((), dtype=bool), shape_of(index))
    return (index < 0) | (index >= size)


def _redirected(index, size: int):
    """Integer indices with those out of range replaced by ``size``, one past the end."""
    outside = _out_of_range(index, size)
    if isinstance(index, Frontend):
        return where(outside, np.intp(size), index)
    if isinstance(index, np.ndarray):
        return np.where(outside, size, index)
    return size if outside else index


def _valid_mask(entries: list):
    """Where ``x[key]`` reads in range, broadcastable to its shape (an axis a slice makes has
    length one), or ``None`` if everywhere, as known now. Out of range anywhere in a
    position's indices is out of range there (JAX fills the whole window): the flags of
    the index entries, or-ed, index a table of 2 entries (true: in range) along the first
    index entry's axis, 1 along the others (indexed by zeros) and the sliced ones, so that
    NumPy's indexing places the flags' axes as it places the indices' in ``x[key]``."""
    indexed = [(value, size) for kind, value, _, size in entries if kind == "index"]
    flags = [_out_of_range(value, size) for value, size in indexed]
    traced = any(isinstance(flag, Frontend) for flag in flags)
    if not traced and not any(np.any(flag) for flag in flags):
        return None
    outside = flags[0]
    for flag in flags[1:]:
        outside = elementwise(ew.logical_or, outside, flag) if traced else outside | flag
    first_axis = next(axis for kind, _, axis, _ in entries if kind == "index")
    table = np.array([True, False]).reshape(
        [2 if axis == first_axis else 1 for _, _, axis, _ in entries if axis is not None])
    flag_index = as_dtype(outside, np.intp) if isinstance(outside, Frontend) else \
        np.asarray(outside, dtype=np.intp) if isinstance(outside, np.ndarray) else int(outside)
    return getitem(table, tuple(
        (flag_index if axis == first_axis else 0 if type(value) is int else
         np.zeros(shape_of(value), dtype=np.intp)) if kind == "index"
        else value if axis is None else slice(None)
        for kind, value, axis, _ in entries))


def _fill_value(fill_value, dtype: np.dtype):
    """``get``'s ``fill_value`` in ``dtype`` (a scalar), by default JAX's: NaN for floats,
    the smallest signed or the largest unsigned integer, ``True`` for booleans."""
    if fill_value is None:
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            return np.array(info.min if dtype.kind == "i" else info.max, dtype=dtype)
        return np.array(True if dtype.kind == "b" else np.nan, dtype=dtype)
    fill = operand(fill_value, "x.at[...].get")
    if shape_of(fill) != ():
        raise TensorShapeError(f"x.at[...].get: fill_value must be a scalar, got an array of "
                               f"shape {shape_of(fill)}")
    if dtype_of(fill).kind == "c" and dtype.kind != "c":
        raise TensorTypeError(f"x.at[...].get: a complex fill_value ({fill_value!r}) for "
                              f"an array of {dtype} (its imaginary part would be lost)")
    try:
        return as_dtype(fill, dtype)
    except (ValueError, OverflowError) as error:
        if isinstance(error, TiduError) and not isinstance(error, OverflowError):
            raise
        raise TensorShapeError(f"x.at[...].get: fill_value={fill_value!r} does not fit "
                               f"{dtype}: {error}") from None


def _unpadded(flat, shape: tuple, dump: bool):
    """The updated ``x`` of ``shape`` from its flattened form, without the dump slot."""
    if dump:
        flat = getitem(flat, slice(0, -1))
    return reshape(flat, shape)


def _last_writes(values, targets: np.ndarray, size: int) -> tuple:
    """``(values, targets)`` keeping the last write to each position (NumPy's assignment
    order), and which of ``size`` positions are written, for known ``targets``."""
    reversed_first = np.unique(targets[::-1], return_index=True)[1]
    kept = targets.size - 1 - reversed_first
    if kept.size != targets.size:
        values = first(bind(Gather(0, shape_of(values), kept.shape), values, kept))
        targets = targets[kept]
    written = np.zeros(size, dtype=bool)
    written[targets] = True
    return values, targets, written


def _last_writes_traced(values, targets, size: int) -> tuple:
    """:func:`_last_writes` for ``targets`` that are data: in a stable sort of the targets
    the last of each run of equal ones is the last write; the others write zeros."""
    count = shape_of(targets)[0]
    if count == 0:
        return values, targets, np.zeros(size, dtype=bool)
    order = first(bind(Argsort(0, "stable"), targets))
    targets = first(bind(Gather(0, (count,), (count,)), targets, order))
    values = first(bind(Gather(0, (count,), (count,)), values, order))
    last = concatenate([getitem(targets, slice(None, -1)) != getitem(targets, slice(1, None)),
                        np.ones(1, dtype=bool)], 0)
    values = where(last, values, np.zeros((), dtype=dtype_of(values)))
    ones = broadcast_to(np.ones((), dtype=np.intp), (count,))
    hits = first(bind(ScatterAdd(0, (size,), (count,)), ones, targets))
    return values, targets, hits > 0



class _Runs:
    """Updates to a flat array of ``size`` entries, sorted (stably) by their positions
    ``targets`` into runs of equal positions, for ``x.at[...]``'s ``multiply``, ``min`` and
    ``max``, which accumulate the values of repeated positions. Known positions are read
    now; positions that are data (under ``jit``, ``vmap``) are sorted by ops."""

    def __init__(self, targets, values, size: int) -> None:
        count = shape_of(targets)[0]
        known = data_if_known(targets)
        if known is not None:
            order = np.argsort(np.asarray(known, dtype=np.intp), kind="stable")
            self.targets = np.asarray(known, dtype=np.intp)[order]
            longest = int(np.unique(self.targets, return_counts=True)[1].max()) if count else 0
            last = np.ones(count, dtype=bool)
            last[:-1] = self.targets[:-1] != self.targets[1:]
            # slots[p]: 1 + where the run of position p ends in the sorted updates (0: none)
            self.slots = np.zeros(size, dtype=np.intp)
            self.slots[self.targets[last]] = np.flatnonzero(last) + 1
        else:
            order = first(bind(Argsort(0, "stable"), targets)) if count else targets
            self.targets = first(bind(Gather(0, (count,), (count,)), targets, order))
            longest = count                      # the longest run there can be
            last = concatenate([getitem(self.targets, slice(None, -1)) !=
                                getitem(self.targets, slice(1, None)),
                                np.ones(min(count, 1), dtype=bool)], 0)
            ends = where(last, np.arange(1, count + 1, dtype=np.intp), np.intp(0))
            self.slots = first(bind(ScatterAdd(0, (size,), (count,)), ends, self.targets))
        self.values = first(bind(Gather(0, (count,), (count,)), values, order))
        self.written = self.slots > 0
        # a scan over runs of length up to L takes ceil(log2(L)) doubling steps
        self.steps = (longest - 1).bit_length() if longest else 0

    def scanned(self, combine):
        """The sorted values, each combined with those before it in its run: a
        Hillis-Steele scan, ``combine(earlier, later, same)`` giving ``later`` combined
        with ``earlier`` where ``same`` (they are in one run), ``later`` elsewhere."""
        values, distance = self.values, 1
        for _ in range(self.steps):
            same = getitem(self.targets, slice(distance, None)) == \
                getitem(self.targets, slice(None, -distance))
            combined = combine(getitem(values, slice(None, -distance)),
                               getitem(values, slice(distance, None)), same)
            values = concatenate([getitem(values, slice(None, distance)), combined], 0)
            distance *= 2
        return values

    def at_positions(self, default, scanned):
        """What ``scanned`` holds at the end of each position's run, ``default`` (an array of
        one entry) at positions no update reaches."""
        joined = concatenate([default, scanned], 0)
        return first(bind(Gather(0, shape_of(joined), shape_of(self.slots)), joined,
                          self.slots))


class _MostHitFirst:
    """The distinct positions of a flat array of ``size`` entries that updates at ``targets``
    hit, most hit first, for ``x.at[...].apply``: ``positions``, how many times each is hit
    (``times``), ``slots[p]``: 1 + where position ``p`` is in ``positions`` (0: not hit), and
    ``heads``: ``heads[t - 1]`` entries of ``positions`` from the first include all those hit
    at least ``t`` times (one entry of ``heads`` per call of ``func``).

    Known targets are read now: ``heads`` counts exactly. Targets that are data (``jit``,
    ``vmap``) are sorted by ops, and of ``m`` updates a position can be hit ``m`` times, so
    ``heads`` has ``m`` entries; but a position hit ``t`` times or more comes after
    positions hit as often, all of them taking at most the ``m`` updates: it is among the
    first ``m // t``, and ``sum(m // t)`` is about ``m * log(m)``. (Duplicate updates fill
    ``positions`` past its distinct ones, with times 0; up to ``_APPLY_UNSORTED_MAX``
    updates, ``positions`` are not sorted by times, and each head is all of them.)
    """

    def __init__(self, targets, size: int) -> None:
        count = shape_of(targets)[0]
        known = data_if_known(targets)
        if known is not None or count == 0:
            known = np.asarray(known if known is not None else np.zeros(0), dtype=np.intp)
            distinct, times = np.unique(known, return_counts=True)
            order = np.argsort(-times, kind="stable")
            self.positions, self.times = distinct[order], times[order]
            most = int(self.times[0]) if count else 0
            # (times descends: the count of those >= t is where -t would go in -times)
            self.heads = np.searchsorted(-self.times, -np.arange(1, most + 1), "right").tolist()
            self.slots = np.zeros(size, dtype=np.intp)
            self.slots[self.positions] = np.arange(1, self.positions.size + 1)
            return
        ones = broadcast_to(np.ones((), dtype=np.intp), (count,))
        hits = first(bind(ScatterAdd(0, (size,), (count,)), ones, targets))
        order = first(bind(Argsort(0, "stable"), targets))
        targets = first(bind(Gather(0, (count,), (count,)), targets, order))
        last = concatenate([getitem(targets, slice(None, -1)) != getitem(targets, slice(1, None)),
                            np.ones(1, dtype=bool)], 0)
        times = where(last, first(bind(Gather(0, (size,), (count,)), hits, targets)),
                      np.intp(0))
        if count <= _APPLY_UNSORTED_MAX:
            # few updates: func on all of them, each time, costs less than sorting by count
            kept, self.positions, self.times = count, targets, times
            self.heads = [count] * count
        else:
            # the last update of each position first, most hit first; at most size distinct
            kept = min(count, size)
            order = first(bind(Argsort(0, "stable"), subtract(np.intp(0), times)))
            order = getitem(order, slice(None, kept))
            self.positions = first(bind(Gather(0, (count,), (kept,)), targets, order))
            self.times = first(bind(Gather(0, (count,), (kept,)), times, order))
            self.heads = [min(kept, count // time) for time in range(1, count + 1)]
        slot = where(self.times > np.intp(0), np.arange(1, kept + 1, dtype=np.intp), np.intp(0))
        self.slots = first(bind(ScatterAdd(0, (size,), (kept,)), slot, self.positions))


# x.at[...].apply with up to this many traced indices applies func to all of them each time
# (a sort by the number of hits, to shrink the calls, costs more there)
_APPLY_UNSORTED_MAX = 256


def _check_elementwise(func, dtype: np.dtype) -> None:
    """Raise if ``func`` gives other values on a small probe of ``dtype`` than on its two
    halves: it mixes entries (``t - mean(t)``, ``t[::-1]``, ``cumsum``...), so that its
    results would depend on how many values ``apply`` passes at once (JAX's calls it on
    each 0-d value). Skipped where it cannot judge: ``func`` fails on the probe's values
    (a domain of its own) or gives traced values (it closes over some)."""
    probe = _APPLY_PROBE.astype(dtype) if dtype.kind in "fc" else \
        np.array([1, 0, 1, 1] if dtype.kind == "b" else [1, 2, 0, 3], dtype)
    if dtype.kind == "c":
        probe = probe + 1j * probe[::-1]
    try:
        with np.errstate(all="ignore"):
            found = [func(part) for part in (probe, probe[:2], probe[2:])]
        found = [data_if_known(out) if isinstance(out, Frontend) else out for out in found]
        if any(out is None for out in found):
            return
        found = [np.asarray(to_host(out)) for out in found]
    except Exception:              # (func's own error on the probe, or a foreign value)
        return
    if any(out.shape != part.shape for out, part in zip(found, (probe, probe[:2], probe[2:]))):
        return                     # (the call on all the values says what is wrong)
    whole, halves = found[0], np.concatenate(found[1:])
    if np.array_equal(whole, halves) or \
            whole.dtype.kind in "fc" and np.array_equal(whole, halves, equal_nan=True):
        return
    raise TensorTypeError(
        f"x.at[...].apply: func must act elementwise (JAX's apply calls it on each value "
        f"alone), but it gives {whole.tolist()} for {probe.tolist()} and {halves.tolist()} "
        "for its two halves: it mixes entries (a mean, a sort, a reversal, a cumulative "
        "sum...) or gives other values on each call")


# x.at[...].apply's probe of func (in x's dtype): see _check_elementwise
_APPLY_PROBE = np.array([0.5, 1.25, -2.0, 3.0])


def _applied_where(func, values, selected, dtype: np.dtype):
    """``func(values)`` (cast to ``dtype``) where ``selected``, ``values`` elsewhere. There
    ``func`` gets the values without their derivatives, so a derivative it cannot take
    (``sqrt`` at 0: inf times the zero cotangent) stays out of the result's."""
    everywhere = data_if_known(selected)
    everywhere = everywhere is not None and bool(np.all(everywhere))
    out = func(values if everywhere else where(selected, values, stop_gradient(values)))
    out = operand(out, "x.at[...].apply")
    if shape_of(out) != shape_of(values):
        raise TensorShapeError(f"x.at[...].apply: func must act elementwise, but it turned "
                               f"values of shape {shape_of(values)} into shape "
                               f"{shape_of(out)}")
    out = as_dtype(out, dtype)
    return out if everywhere else where(selected, out, values)


def _zero_with_derivative(value):
    """Zeros (+0.0) whose derivative is minus ``value``'s where it is finite (0 elsewhere):
    a derivative carried into a result without changing its value, even -0.0."""
    fixed = stop_gradient(value)
    finite = elementwise(ew.isfinite, fixed)
    zero = np.zeros((), dtype_of(value))
    return subtract(where(finite, fixed, zero), where(finite, value, zero))

@implements(np.meshgrid)
def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> tuple:
    """``np.meshgrid``: coordinate arrays, broadcasts of the (flattened) inputs (new arrays,
    or with ``copy=False`` views of NumPy inputs); the gradient of each input sums over the
    grid.

    >>> [g.tolist() for g in meshgrid(np.array([1.0, 2.0]), np.array([3.0]))]
    [[[1.0, 2.0]], [[3.0, 3.0]]]
    """
    if indexing not in ("xy", "ij"):
        raise TensorTypeError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    arrays = [ravel(operand(x, "meshgrid")) for x in xi]
    shapes = [[1] * len(arrays) for _ in arrays]
    for i, a in enumerate(arrays):
        shapes[i][i] = shape_of(a)[0]
    if indexing == "xy" and len(arrays) > 1:       # the first two axes swapped, as NumPy
        for shape in shapes:
            shape[0], shape[1] = shape[1], shape[0]
    grids = [reshape(a, tuple(shape)) for a, shape in zip(arrays, shapes)]
    if not sparse:
        full = tuple(max(shape[d] for shape in shapes) for d in range(len(arrays)))
        grids = [broadcast_to(g, full) for g in grids]
    if copy:                    # NumPy's default: new arrays, not views of the inputs
        grids = [new_value(g) for g in grids]
    return tuple(grids)


# --- selection ----------------------------------------------------------------------------


def _weak_or_array(value, fn: str):
    """A Python number as is (weak in NumPy's promotion), anything else as an array."""
    return value if type(value) in (int, float, complex) else operand(value, fn)


@implements(np.select)
def select(condlist, choicelist, default=0):
    """``np.select``: from each position, the entry of the first choice whose condition holds
    there, else ``default``; conditions must be boolean. Differentiable in the choices and
    ``default`` (each position's derivative goes to the entry chosen).

    >>> x = np.arange(6.0)
    >>> select([x < 2, x > 3], [x, x ** 2], default=-1.0)
    array([ 0.,  1., -1., -1., 16., 25.])
    """
    if len(condlist) != len(choicelist):
        raise TensorShapeError("select: list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise TensorShapeError("select: select with an empty condition list is not possible")
    choices = [_weak_or_array(c, "select") for c in (*choicelist, default)]
    try:
        dtype = result_dtype(*choices)
    except TypeError as error:
        raise TensorTypeError("select: Choicelist and default value do not have a common "
                              f"dtype: {error}") from None
    conditions = [operand(c, "select") for c in condlist]
    for i, condition in enumerate(conditions):
        if dtype_of(condition) != np.bool_:
            raise TensorTypeError(f"select: invalid entry {i} in condlist: should be boolean "
                                  "ndarray")
    try:
        shape = np.broadcast_shapes(*[shape_of(a) for a in conditions + choices])
    except ValueError:
        raise TensorShapeError("select: conditions and choices cannot be broadcast together, "
                               f"shapes {[shape_of(a) for a in conditions + choices]}") from None
    result = broadcast_to(as_dtype(choices[-1], dtype), shape)
    for condition, choice in reversed(list(zip(conditions, choices[:-1]))):
        result = where(condition, as_dtype(choice, dtype), result)
    return result


@implements(np.choose)
def choose(a, choices, out=None, mode="raise"):
    """``np.choose``: at each position, the entry of ``choices[a]`` there (``a`` and the
    choices broadcast together). Differentiable in the choices (each position's derivative
    goes to the choice read); ``a`` may be data (a tensor or traced value). ``mode`` is
    NumPy's: an entry of ``a`` outside ``[0, n)`` raises (``"raise"``, checked when the op
    runs for data), wraps (``"wrap"``) or is clipped (``"clip"``).

    >>> choose(np.array([1, 0, 1]), [np.zeros(3), np.arange(3.0)])
    array([0., 0., 2.])
    """
    no_out(out, "choose")
    if mode not in ("raise", "wrap", "clip"):
        raise TensorTypeError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    index = operand(a, "choose")
    if dtype_of(index).kind == "b":             # NumPy casts booleans (safely) to 0 and 1
        index = as_dtype(index, np.intp)
    if dtype_of(index).kind not in "iu":
        raise TensorTypeError(f"choose: a must hold integers, got {dtype_of(index)} values")
    if isinstance(choices, (list, tuple)):        # arrays of any broadcastable shapes
        items = [_weak_or_array(c, "choose") for c in choices]
    else:
        choices = operand(choices, "choose")
        items = [getitem(choices, k) for k in range(shape_of(choices)[0])] \
            if shape_of(choices) else []
    if not items:
        raise TensorShapeError("choose: choices must be a sequence of at least one array")
    n = len(items)
    try:
        shape = np.broadcast_shapes(shape_of(index), *[shape_of(c) for c in items])
    except ValueError:
        raise TensorShapeError(f"choose: a of shape {shape_of(index)} and choices of shape "
                               f"{shape_of(items[0])} cannot be broadcast together") from None
    if mode == "wrap":
        index = elementwise(ew.remainder, as_dtype(index, np.intp), np.intp(n))
    elif mode == "clip":
        index = minimum(maximum(as_dtype(index, np.intp), np.intp(0)), np.intp(n - 1))
    elif isinstance(index, Frontend):   # NumPy refuses negative entries: make them too large
        index = index_array(where(index < 0, np.intp(n), as_dtype(index, np.intp)), n, 0)
    elif np.any(to_host(index) < 0) or np.any(to_host(index) >= n):
        raise TensorShapeError("choose: invalid entry in choice array (outside [0, "
                               f"{n}) for {n} choices)")
    dtype = result_dtype(*items)
    result = broadcast_to(as_dtype(items[-1], dtype), shape)
    for k in range(n - 2, -1, -1):
        result = where(index == k, as_dtype(items[k], dtype), result)
    return result


def _condition_positions(condition, fn: str, size: int, axis: int | None) -> np.ndarray:
    """The positions where the (flattened) ``condition`` is nonzero, read now (the
    result's shape depends on them); one beyond the ``size`` entries of the axis read is
    NumPy's ``IndexError``, by ``fn``'s name."""
    # (read before any tnp op: a closed-over array stays an array, which jit's guard
    # compares at each call, rather than becoming a traced input whose values are unknown)
    data = to_host(data_of(operand(condition, fn), f"{fn}: reading the condition (the "
                                                  "result's shape depends on its values)"))
    positions = np.flatnonzero(data)
    if positions.size and positions[-1] >= size:
        where = "the flattened array" if axis is None else f"axis {axis}"
        raise TensorIndexError(f"{fn}: the condition is nonzero at index {positions[-1]}, "
                               f"out of bounds for {where} with size {size}")
    return positions


@implements(np.compress)
def compress(condition, a, axis=None, out=None):
    """``np.compress``: the slices of ``a`` along ``axis`` (the flattened ``a`` if ``None``)
    where the 1-d ``condition`` is nonzero (read now, so not under ``jit``/``vmap`` when it
    is traced); a ``condition`` shorter than the axis leaves the rest out.

    >>> compress([True, False, True], np.arange(6.0).reshape(3, 2), axis=0)
    array([[0., 1.],
           [4., 5.]])
    """
    no_out(out, "compress")
    if len(shape_of(operand(condition, "compress"))) != 1:
        raise TensorShapeError("compress: condition must be a 1-d array")
    dims = shape_of(operand(a, "compress"))
    if axis is not None:
        axis = normalize_axis(axis, len(dims), "compress")
    length = math.prod(dims) if axis is None else dims[axis]
    return take(a, _condition_positions(condition, "compress", length, axis), axis=axis)


@implements(np.extract)
def extract(condition, arr):
    """``np.extract``: the elements of the flattened ``arr`` where the flattened ``condition``
    is nonzero (read now, as :func:`compress`'s).

    >>> extract(np.arange(4.0) > 1, np.arange(4.0))
    array([2., 3.])
    """
    positions = _condition_positions(condition, "extract",
                                     math.prod(shape_of(operand(arr, "extract"))), None)
    return take(arr, positions)


def _one_condition(condlist, x_ndim: int) -> bool:
    """NumPy's rule: ``condlist`` is a single condition, not a list of them."""
    if np.isscalar(condlist):
        return True
    if isinstance(condlist, (list, tuple)):
        if not condlist:
            return False
        first = condlist[0]
        arrays = (list, np.ndarray, Frontend)
        return not (isinstance(first, arrays) or is_foreign_array(first)) and x_ndim != 0
    ndim = len(shape_of(condlist))           # an array: a list of its rows if 2-d or more
    return ndim == 0 or (ndim < 2 and x_ndim != 0)


@implements(np.piecewise)
def piecewise(x, condlist, funclist, *args, **kw):
    """``np.piecewise``: ``funclist[i]`` (a function of the entries, or a constant) where
    ``condlist[i]`` holds, zero elsewhere (one more function: where no condition holds);
    later conditions win. The result has ``x``'s dtype. Differentiable in ``x`` through the
    functions (and in what they close over).

    Where the conditions' values are known NumPy data (arrays, the eager ``Tensor``,
    ``grad``) each function is called on the selected entries only, as NumPy does. Under
    ``jit`` or ``vmap`` traced conditions cannot be read (and other libraries' are not
    read): each function is called on all of ``x`` and its values selected (JAX's
    ``jnp.piecewise``), so it must be defined everywhere (a NaN it makes at unselected
    entries does not reach the value but can reach the derivative, as in JAX).

    >>> x = np.array([-2.0, -0.5, 0.5, 3.0])
    >>> piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2])
    array([2.  , 0.5 , 0.25, 9.  ])
    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda v: tnp.sum(piecewise(v, [v < 0], [lambda u: u ** 2, 1.0])))(x)
    array([-4., -1.,  0.,  0.])
    """
    x = operand(x, "piecewise")
    shape, dtype = shape_of(x), dtype_of(x)
    if _one_condition(condlist, len(shape)):
        condlist = [condlist]
    elif isinstance(condlist, (Frontend, np.ndarray)) or is_foreign_array(condlist):
        condlist = [getitem(condlist, i) for i in range(shape_of(condlist)[0])]
    conditions = [broadcast_to(as_dtype(operand(c, "piecewise"), np.bool_), shape)
                  for c in condlist]
    functions = list(funclist)
    if len(conditions) == len(functions) - 1:          # the "otherwise" condition
        anywhere = conditions[0]
        for c in conditions[1:]:
            anywhere = where(c, True, anywhere)
        conditions.append(where(anywhere, False, True))
    elif len(conditions) != len(functions):
        n = len(conditions)
        raise TensorShapeError(f"piecewise: with {n} condition(s), either {n} or {n + 1} "
                               "functions are expected")
    result = np.zeros(shape, dtype)
    for condition, function in zip(conditions, functions):
        if not callable(function):
            result = where(condition, as_dtype(operand(function, "piecewise"), dtype), result)
            continue
        mask = data_if_known(condition)
        if not isinstance(mask, np.ndarray):          # jit, vmap, other libraries: JAX's way
            values = as_dtype(operand(function(x, *args, **kw), "piecewise"), dtype)
            result = where(condition, values, result)
            continue
        positions = np.flatnonzero(to_host(mask))
        if positions.size == 0:
            continue
        flat = reshape(x, (-1,))
        selected = first(bind(Gather(0, shape_of(flat), positions.shape), flat, positions))
        values = operand(function(selected, *args, **kw), "piecewise")
        try:
            values = broadcast_to(as_dtype(values, dtype), positions.shape)
        except TensorShapeError:
            raise TensorShapeError(f"piecewise: a function returned shape {shape_of(values)} for "
                                   f"{positions.size} selected entries") from None
        size = int(np.prod(shape, dtype=np.int64))
        placed = first(bind(ScatterAdd(0, (size,), positions.shape), values, positions))
        result = where(condition, reshape(placed, shape), result)
    return result


# --- mapping a function over arrays ---------------------------------------------------------


@implements(np.apply_along_axis)
def apply_along_axis(func1d, axis: int, arr, *args, **kwargs):
    """``np.apply_along_axis``: ``func1d`` called on each 1-d slice of ``arr`` along
    ``axis`` (with ``args`` and ``kwargs``), the results (all of one shape, in the first
    one's dtype) put where the slice was. One call per slice, as NumPy's; ``func1d``
    written with tnp functions differentiates, under every transform.

    >>> apply_along_axis(lambda v: v[0] * v[-1], 1, np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    array([ 3., 24.])
    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda a: tnp.sum(apply_along_axis(tnp.sort, 0, a) * np.arange(2.0)[:, None]))(
    ...     np.array([[1.0, 4.0], [2.0, 3.0]]))
    array([[0., 1.],
           [1., 0.]])
    """
    arr = operand(arr, "apply_along_axis")
    shape = shape_of(arr)
    axis = normalize_axis(axis, len(shape), "apply_along_axis")
    outer = shape[:axis] + shape[axis + 1:]
    if 0 in outer:
        raise TensorShapeError("apply_along_axis: Cannot apply_along_axis when any iteration "
                               "dimensions are 0")
    rows = reshape(moveaxis(arr, axis, -1), (-1, shape[axis]))
    results = [operand(func1d(getitem(rows, i), *args, **kwargs), "apply_along_axis")
               for i in range(int(np.prod(outer, dtype=np.int64)))]
    first = results[0]
    core = shape_of(first)
    for result in results[1:]:
        if shape_of(result) != core:
            raise TensorShapeError(f"apply_along_axis: func1d returned shapes {core} and "
                                   f"{shape_of(result)} for different slices")
    out = reshape(stack([as_dtype(r, dtype_of(first)) for r in results]), outer + core)
    # the result's axes where the slice's axis was
    k = len(outer)
    return transpose(out, list(range(axis)) + list(range(k, k + len(core)))
                     + list(range(axis, k)))


@implements(np.apply_over_axes)
def apply_over_axes(func, a, axes):
    """``np.apply_over_axes``: ``func(a, axis)`` for each axis of ``axes`` in turn, each result
    given the axis back (``expand_dims``) where ``func`` dropped it; differentiates through
    ``func``.

    >>> import primitives.tensor as tnp
    >>> apply_over_axes(tnp.sum, np.arange(6.0).reshape(2, 3), [0, 1])
    array([[15.]])
    """
    value = operand(a, "apply_over_axes")
    ndim = len(shape_of(value))
    axes = to_host(data_of(operand(axes, "apply_over_axes"), "apply_over_axes: reading axes"))
    for axis in np.atleast_1d(axes).tolist():
        axis = axis + ndim if axis < 0 else axis
        result = operand(func(value, axis), "apply_over_axes")
        if len(shape_of(result)) != ndim:
            result = expand_dims(result, axis)
            if len(shape_of(result)) != ndim:
                raise TensorShapeError("apply_over_axes: function is not returning an array of "
                                       "the correct shape")
        value = result
    return new_value(value) if value is a else value


# --- index helpers ---------------------------------------------------------------------------


@implements(np.ix_)
def ix_(*args) -> tuple:
    """``np.ix_``: the 1-d sequences reshaped to index an open mesh (``x[ix_(rows, cols)]`` is
    the block of those rows and columns); a boolean sequence gives the positions of its true
    entries, read from its values (under ``jit``: ``ConcretizationError``).

    >>> rows, cols = ix_([0, 1], np.array([True, False, True]))
    >>> rows.shape, cols
    ((2, 1), array([[0, 2]]))
    """
    out = []
    # lists and NumPy arrays become arrays of the other arguments' library (NumPy, PyTorch...)
    like = next((a for a in args if isinstance(a, Frontend) or is_foreign_array(a)), None)
    for k, sequence in enumerate(args):
        empty_list = isinstance(sequence, (list, tuple)) and len(sequence) == 0
        sequence = np.empty(0, np.intp) if empty_list else operand(sequence, "ix_")
        if len(shape_of(sequence)) != 1:
            raise TensorShapeError("ix_: Cross index must be 1 dimensional")
        if dtype_of(sequence) == np.bool_:
            mask = to_host(data_of(sequence, "ix_: reading a boolean index (its true entries' "
                                             "count is the result's length)"))
            sequence = np.flatnonzero(mask)
        if isinstance(sequence, np.ndarray) and like is not None:
            sequence = constant_in_library_of(sequence, like)
        size = shape_of(sequence)[0]
        shape = (1,) * k + (size,) + (1,) * (len(args) - k - 1)
        out.append(new_value(reshape(sequence, shape)))        # not a view of the input
    return tuple(out)


def mask_indices(n: int, mask_func, k=0) -> tuple:
    """``np.mask_indices``: the indices of the nonzero entries of ``mask_func(ones((n, n)),
    k)`` (``tnp.triu``, ``tnp.tril``...), as NumPy's integer arrays.

    >>> import primitives.tensor as tnp
    >>> mask_indices(3, tnp.triu, 1)
    (array([0, 0, 1]), array([1, 2, 2]))
    """
    mask = mask_func(np.ones((n, n), int), k)
    return np.nonzero(to_host(data_of(mask, "mask_indices: reading mask_func's mask")) != 0)


# --- bit packing ----------------------------------------------------------------------------

_BIT_WEIGHTS = {"big": np.array([128, 64, 32, 16, 8, 4, 2, 1], np.uint8),
                "little": np.array([1, 2, 4, 8, 16, 32, 64, 128], np.uint8)}


def _bit_arguments(a, axis, bitorder, fn: str):
    """``a`` (flattened for ``axis=None``; a 0-d ``a`` is 1-d, as NumPy's), the axis, and the
    weights of the bits in a byte. NumPy's ``bitorder`` rules differ: packbits takes
    ``"big"`` or ``"little"``, unpackbits any string beginning with ``"b"`` or ``"l"``."""
    if fn == "packbits":
        if not isinstance(bitorder, str):
            raise TensorTypeError(f"{fn}: bitorder must be a str, got {bitorder!r}")
        order = bitorder if bitorder in _BIT_WEIGHTS else None
        message = f"{fn}: 'order' must be either 'little' or 'big'"
    else:
        if not isinstance(bitorder, str):
            raise TensorTypeError(f"{fn}: bitorder must be a str, got {bitorder!r}")
        order = {"b": "big", "l": "little"}.get(bitorder[:1])
        message = f"{fn}: 'order' must begin with 'l' or 'b'"
    if order is None:
        raise TensorShapeError(message)
    a = operand(a, fn)
    if axis is None or len(shape_of(a)) == 0:
        a = reshape(a, (-1,))
    return a, normalize_axis(0 if axis is None else axis, len(shape_of(a)), fn), \
        _BIT_WEIGHTS[order]


@implements(np.packbits)
def packbits(a, /, axis=None, bitorder: str = "big"):
    """``np.packbits``: the truth of each entry of an integer or boolean ``a`` packed eight to a
    ``uint8`` along ``axis`` (the flattened ``a`` for ``None``), zero-padded at the end;
    ``bitorder`` ``"big"`` puts the first entry in the highest bit. Integers: not
    differentiated; ``jit`` and ``vmap`` take traced ``a``.

    >>> packbits(np.array([1, 0, 1, 1, 0, 0, 0, 0, 1]))
    array([176, 128], dtype=uint8)
    """
    a, axis, weights = _bit_arguments(a, axis, bitorder, "packbits")
    if dtype_of(a).kind not in "biu":
        raise TensorTypeError("packbits: Expected an input array of integer or boolean data "
                              f"type, got {dtype_of(a)}")
    shape = shape_of(a)
    bits = as_dtype(not_equal(a, 0), np.uint8)
    widths = [(0, 0)] * len(shape)
    widths[axis] = (0, -shape[axis] % 8)
    bits = pad(bits, widths)
    groups = shape[:axis] + (-(-shape[axis] // 8), 8) + shape[axis + 1:]
    placed = weights.reshape((8,) + (1,) * (len(shape) - axis - 1))
    return as_dtype(sum(multiply(reshape(bits, groups), placed), axis=axis + 1), np.uint8)


@implements(np.unpackbits)
def unpackbits(a, /, axis=None, count=None, bitorder: str = "big"):
    """``np.unpackbits``: each ``uint8`` of ``a`` as its eight bits (``0``/``1``, uint8) along
    ``axis`` (of the flattened ``a`` for ``None``), the highest first for ``"big"``; ``count``
    keeps that many bits (negative: drops them at the end; more: pads zeros). Not
    differentiated; ``jit`` and ``vmap`` take traced ``a``.

    >>> unpackbits(np.array([176], np.uint8))
    array([1, 0, 1, 1, 0, 0, 0, 0], dtype=uint8)
    """
    a, axis, weights = _bit_arguments(a, axis, bitorder, "unpackbits")
    if dtype_of(a) != np.uint8:
        raise TensorTypeError(f"unpackbits: Expected an input array of unsigned byte data type, "
                              f"got {dtype_of(a)}")
    shape = shape_of(a)
    spread = reshape(a, shape[:axis + 1] + (1,) + shape[axis + 1:])
    divisors = weights.reshape((8,) + (1,) * (len(shape) - axis - 1))
    quotient = elementwise(ew.floor_divide, spread, divisors)
    bits = elementwise(ew.sub, quotient,
                       multiply(elementwise(ew.floor_divide, quotient, np.uint8(2)), np.uint8(2)))
    bits = reshape(bits, shape[:axis] + (shape[axis] * 8,) + shape[axis + 1:])
    if count is None:
        return bits
    count = _integer(count, "unpackbits", "count")
    total = shape[axis] * 8
    keep = count if count >= 0 else total + count
    if keep < 0:
        raise TensorShapeError("unpackbits: -count larger than number of elements")
    key = [slice(None)] * len(shape)
    key[axis] = slice(0, max(keep, 0))
    bits = getitem(bits, tuple(key))
    if keep > total:
        widths = [(0, 0)] * len(shape)
        widths[axis] = (0, keep - total)
        bits = pad(bits, widths)
    return bits
