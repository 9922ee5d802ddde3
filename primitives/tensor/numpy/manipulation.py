"""Array manipulation with NumPy's names: diagonals and triangles, flips and rolls,
repeating, splitting and stacking, axis moves, the functional forms of indexing and
selection (``select``, ``piecewise``), the index tricks ``r_`` and ``c_``, and the
function-mapping helpers ``apply_along_axis`` and ``vectorize``.

Every function is linear in its array arguments and built from the shape and
indexing primitives (``slice``, ``pad``, ``rev``, ``split``, ``concatenate``,
``transpose``, ``reshape``, ``broadcast_in_dim``, ``gather``/``scatter_add``,
``select`` with a constant mask), so complex values pass through and every
transform applies. Integer arguments (offsets, shifts, repeats, sections, index
arrays) are static: they must be known while ``jit`` traces, and given as a PyTorch,
CuPy or Dask array they are copied to host memory (a Dask array is computed).
``select``, ``piecewise``, ``apply_along_axis`` and ``vectorize`` differentiate through
what they call and select.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.flip(np.arange(3.0))
array([2., 1., 0.])
>>> tnp.grad(lambda m: tnp.trace(m @ m))(np.array([[1.0, 2.0], [3.0, 4.0]]))
array([[2., 6.],
       [4., 8.]])
"""

from __future__ import annotations

import numbers
import operator

import numpy as np

from primitives.tensor.numpy.lowering import (
    _axes,
    _axis,
    _first,
    _holds_frontend,
    _index_array,
    _is_foreign_array,
    _operand,
    _shape_tuple,
    astype,
    bind,
    broadcast_to,
    concatenate,
    getitem,
    reshape,
    result_dtype,
    stack,
    sum,
    transpose,
    where,
)
from primitives.tensor.backends import to_host
from primitives.tensor.core import Frontend, data_if_known, data_of, dtype_of, shape_of
from primitives.tensor.errors import (ConcretizationError, TensorIndexError,
                                      TensorNotSupportedError, TensorShapeError, TensorTypeError)
from primitives.tensor.numpy.dispatch import implements
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.indexing import Gather, Pad, Rev, ScatterAdd, Split
from primitives.tensor.ops.scan import Argsort
from primitives.tensor.ops.shape import BroadcastInDim

__all__ = [
    "diag", "diagonal", "trace", "tril", "triu",
    "flip", "fliplr", "flipud", "rot90", "roll",
    "repeat", "tile",
    "split", "array_split", "hsplit", "vsplit", "dsplit",
    "hstack", "vstack", "dstack", "column_stack", "row_stack", "append",
    "moveaxis", "swapaxes", "rollaxis", "ravel", "atleast_1d", "atleast_2d", "atleast_3d",
    "take_along_axis", "put_along_axis", "meshgrid", "copy",
    "select", "piecewise", "r_", "c_", "apply_along_axis", "vectorize",
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
    data = to_host(data_of(_operand(value, fn), f"{fn}: reading {what}"))
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


# --- diagonals and triangles --------------------------------------------------------------


@implements(np.diagonal)
def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1):
    """``np.diagonal``: the diagonal as the last axis (a new array, not NumPy's read-only view).

    >>> diagonal(np.arange(6.0).reshape(2, 3), 1)
    array([1., 5.])
    """
    return _diagonal(a, offset, axis1, axis2, "diagonal")


def _diagonal(a, offset, axis1, axis2, fn: str):
    a = _operand(a, fn)
    shape = shape_of(a)
    ndim = len(shape)
    if ndim < 2:
        raise TensorShapeError(f"{fn}: the array must have at least two dimensions, got "
                               f"shape {shape}")
    axis1, axis2 = _axis(axis1, ndim, fn), _axis(axis2, ndim, fn)
    if axis1 == axis2:
        raise TensorShapeError(f"{fn}: axis1 and axis2 cannot be the same")
    offset = _integer(offset, fn, "offset")
    rest = [i for i in range(ndim) if i not in (axis1, axis2)]
    rows, cols = shape[axis1], shape[axis2]
    # the (rows, cols) matrix flattened: its diagonal is a strided slice
    flat = reshape(transpose(a, rest + [axis1, axis2]),
                   tuple(shape[i] for i in rest) + (rows * cols,))
    row0, col0 = max(-offset, 0), max(offset, 0)
    count = max(0, min(rows - row0, cols - col0))
    start = row0 * cols + col0 if count else 0
    return getitem(flat, (Ellipsis, slice(start, start + count * (cols + 1), cols + 1)))


@implements(np.diag)
def diag(v, k: int = 0):
    """``np.diag``: the ``k``-th diagonal of a 2-d ``v``, or the square 2-d array with a 1-d
    ``v`` on its ``k``-th diagonal.

    >>> diag(np.array([1.0, 2.0]), 1)
    array([[0., 1., 0.],
           [0., 0., 2.],
           [0., 0., 0.]])
    """
    v = _operand(v, "diag")
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
    padded = _first(bind(Pad((start,), (size * size - end,), (size if n else 0,), (n,)), v))
    return reshape(padded, (size, size))


@implements(np.trace)
def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None):
    """``np.trace`` (without ``out``): the sum of :func:`diagonal`, in ``dtype`` if given.

    >>> trace(np.eye(3))
    array(3.)
    """
    d = _diagonal(a, offset, axis1, axis2, "trace")
    return sum(d if dtype is None else astype(d, dtype), axis=-1)


def _triangle(m, k, fn: str, lower: bool):
    m = _operand(m, fn)
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
    m = _operand(m, "flip")
    shape = shape_of(m)
    axes = tuple(a for a in _axes(axis, len(shape), "flip") if shape[a] > 1)
    return _first(bind(Rev(axes), m)) if axes else m


@implements(np.fliplr)
def fliplr(m):
    """``np.fliplr``: reverse along axis 1 (at least 2-d)."""
    m = _operand(m, "fliplr")
    if len(shape_of(m)) < 2:
        raise TensorShapeError(f"fliplr: input must be >= 2-d, got shape {shape_of(m)}")
    return flip(m, 1)


@implements(np.flipud)
def flipud(m):
    """``np.flipud``: reverse along axis 0 (at least 1-d)."""
    m = _operand(m, "flipud")
    if len(shape_of(m)) < 1:
        raise TensorShapeError("flipud: input must be >= 1-d, got a 0-d array")
    return flip(m, 0)


@implements(np.rot90)
def rot90(m, k: int = 1, axes=(0, 1)):
    """``np.rot90``: rotate by ``k`` quarter turns from ``axes[0]`` towards ``axes[1]``."""
    m = _operand(m, "rot90")
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
        return [a]
    return bind(Split(axis, tuple(sizes), shape_of(a), dtype_of(a).name), a)


@implements(np.roll)
def roll(a, shift, axis=None):
    """``np.roll``: shift elements along ``axis`` (the flattened array if ``None``), wrapping
    around; ``shift`` and ``axis`` may be sequences (shifts of one axis add up). Integer
    shifts only (NumPy truncates a float)."""
    a = _operand(a, "roll")
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
    totals: dict = {}
    for s, ax in pairs:
        ax = _axis(ax, len(shape), "roll")
        totals[ax] = totals.get(ax, 0) + int(s)
    for ax, total in totals.items():
        n = shape[ax]
        if n and total % n:
            head, tail = _split_sizes(a, ax, [n - total % n, total % n])
            a = concatenate([tail, head], ax)
    return a


# --- repeating ----------------------------------------------------------------------------


@implements(np.repeat)
def repeat(a, repeats, axis=None):
    """``np.repeat``: each element ``repeats`` times along ``axis`` (the flattened array if
    ``None``); ``repeats`` is one count or one per element."""
    a = _operand(a, "repeat")
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    shape = shape_of(a)
    axis = _axis(axis, len(shape), "repeat")
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
            return a
        wide = shape[:axis + 1] + (count,) + shape[axis + 1:]
        dims = tuple(i if i <= axis else i + 1 for i in range(len(shape)))
        out = _first(bind(BroadcastInDim(wide, dims, shape), a))
        return reshape(out, shape[:axis] + (n * count,) + shape[axis + 1:])
    index = np.repeat(np.arange(n, dtype=np.intp), counts)
    return _first(bind(Gather(axis, shape, index.shape), a, index))


@implements(np.tile)
def tile(A, reps):
    """``np.tile``: ``A`` repeated ``reps[i]`` times along axis ``i`` (``A`` or ``reps``
    padded with leading ones to one length)."""
    A = _operand(A, "tile")
    reps = _shape_tuple(reps, "tile")
    if any(r < 0 for r in reps):
        raise TensorShapeError(f"tile: negative reps {reps}")
    shape = shape_of(A)
    reps = (1,) * (len(shape) - len(reps)) + reps
    shape = (1,) * (len(reps) - len(shape)) + shape
    A = reshape(A, shape)
    if all(r == 1 for r in reps):
        return A
    # (r0, s0, r1, s1, ...) by broadcasting, then merged pairwise
    wide = tuple(n for pair in zip(reps, shape) for n in pair)
    out = _first(bind(BroadcastInDim(wide, tuple(range(1, 2 * len(shape), 2)), shape), A))
    return reshape(out, tuple(r * n for r, n in zip(reps, shape)))


# --- splitting ----------------------------------------------------------------------------


def _split(ary, indices_or_sections, axis, fn: str, even: bool) -> list:
    ary = _operand(ary, fn)
    shape = shape_of(ary)
    axis = _axis(axis, len(shape), fn)
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
    ary = _operand(ary, fn)
    if len(shape_of(ary)) < ndim:
        raise TensorShapeError(f"{fn} only works on arrays of {ndim} or more dimensions, got "
                               f"shape {shape_of(ary)}")
    return _split(ary, indices_or_sections, axis, fn, even=True)


@implements(np.hsplit)
def hsplit(ary, indices_or_sections) -> list:
    """``np.hsplit``: :func:`split` along axis 1 (axis 0 of a 1-d array)."""
    axis = 1 if len(shape_of(_operand(ary, "hsplit"))) > 1 else 0
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
    a = _operand(a, fn)
    shape = shape_of(a)
    if len(shape) >= ndim:
        return a
    if ndim == 3 and len(shape) == 2:
        return reshape(a, shape + (1,))
    if ndim == 3 and len(shape) == 1:
        return reshape(a, (1,) + shape + (1,))
    return reshape(a, (1,) * (ndim - len(shape)) + shape)


def _atleast(arys, ndim: int, fn: str):
    results = tuple(_at_least(a, ndim, fn) for a in arys)
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


_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def _sequence(tup, fn: str) -> list:
    """The arrays of a stacking function's argument (an array stacks its rows, as in NumPy)."""
    if isinstance(tup, (list, tuple)):
        return list(tup)
    if (isinstance(tup, (Frontend, np.ndarray)) or _is_foreign_array(tup)) and shape_of(tup):
        return list(tup)
    raise TensorTypeError(f"{fn}: arrays to stack must be passed as a sequence such as a list "
                          f"or tuple, got {type(tup).__name__}")


def _stack_along(arrays: list, axis: int, fn: str, dtype=None, casting: str = "same_kind"):
    if casting not in _CASTINGS:
        raise TensorShapeError(f"{fn}: casting must be one of {', '.join(_CASTINGS)}, got "
                               f"{casting!r}")
    if not arrays:
        raise TensorShapeError(f"{fn}: need at least one array to concatenate")
    target = np.dtype(dtype) if dtype is not None else result_dtype(*arrays)
    for a in arrays:
        if not np.can_cast(dtype_of(a), target, casting):
            raise TensorTypeError(f"{fn}: cannot cast array data from {dtype_of(a)} to "
                                  f"{target} according to the rule {casting!r}")
    return _concatenate([astype(a, target) for a in arrays], axis, fn)


@implements(np.hstack)
def hstack(tup, *, dtype=None, casting: str = "same_kind"):
    """``np.hstack``: concatenate along axis 1 (axis 0 for 1-d arrays)."""
    arrays = [_at_least(a, 1, "hstack") for a in _sequence(tup, "hstack")]
    axis = 0 if arrays and len(shape_of(arrays[0])) == 1 else 1
    return _stack_along(arrays, axis, "hstack", dtype, casting)


@implements(np.vstack)
def vstack(tup, *, dtype=None, casting: str = "same_kind"):
    """``np.vstack``: concatenate along axis 0, 1-d arrays as rows."""
    return _vstack(tup, dtype, casting, "vstack")


def row_stack(tup, *, dtype=None, casting: str = "same_kind"):
    """``np.row_stack`` (deprecated by NumPy 2.0): :func:`vstack`."""
    return _vstack(tup, dtype, casting, "row_stack")


def _vstack(tup, dtype, casting: str, fn: str):
    arrays = [_at_least(a, 2, fn) for a in _sequence(tup, fn)]
    return _stack_along(arrays, 0, fn, dtype, casting)


if hasattr(np, "row_stack"):
    implements(np.row_stack)(row_stack)


@implements(np.dstack)
def dstack(tup):
    """``np.dstack``: concatenate along axis 2, after :func:`atleast_3d`."""
    arrays = [_at_least(a, 3, "dstack") for a in _sequence(tup, "dstack")]
    return _stack_along(arrays, 2, "dstack")


@implements(np.column_stack)
def column_stack(tup):
    """``np.column_stack``: 0-d and 1-d arrays become columns, then concatenate along axis 1."""
    arrays = []
    for a in _sequence(tup, "column_stack"):
        a = _operand(a, "column_stack")
        shape = shape_of(a)
        arrays.append(reshape(a, (-1, 1) if len(shape) == 1 else (1, 1)) if len(shape) < 2
                      else a)
    return _stack_along(arrays, 1, "column_stack")


@implements(np.append)
def append(arr, values, axis=None):
    """``np.append``: ``values`` concatenated after ``arr`` along ``axis`` (both flattened if
    ``None``)."""
    arr, values = _operand(arr, "append"), _operand(values, "append")
    if axis is None:
        arr, values, axis = reshape(arr, (-1,)), reshape(values, (-1,)), 0
    return _concatenate([arr, values], _axis(axis, len(shape_of(arr)), "append"), "append")


# --- axes ---------------------------------------------------------------------------------


def _axis_list(axes, ndim: int, fn: str, what: str) -> list:
    axes = list(axes) if isinstance(axes, (list, tuple)) or np.ndim(axes) else [axes]
    result = [_axis(a, ndim, fn) for a in axes]
    if len(set(result)) != len(result):
        raise TensorShapeError(f"{fn}: repeated axis in `{what}` argument: {axes}")
    return result


@implements(np.moveaxis)
def moveaxis(a, source, destination):
    """``np.moveaxis``: axes ``source`` moved to positions ``destination``, the others kept
    in order."""
    a = _operand(a, "moveaxis")
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
    return transpose(a, order)


@implements(np.swapaxes)
def swapaxes(a, axis1: int, axis2: int):
    """``np.swapaxes``."""
    a = _operand(a, "swapaxes")
    ndim = len(shape_of(a))
    axis1, axis2 = _axis(axis1, ndim, "swapaxes"), _axis(axis2, ndim, "swapaxes")
    order = list(range(ndim))
    order[axis1], order[axis2] = axis2, axis1
    return transpose(a, order)


@implements(np.rollaxis)
def rollaxis(a, axis: int, start: int = 0):
    """``np.rollaxis``: ``axis`` moved to lie before ``start`` (prefer :func:`moveaxis`)."""
    a = _operand(a, "rollaxis")
    ndim = len(shape_of(a))
    axis = _axis(axis, ndim, "rollaxis")
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
    return transpose(a, order)


@implements(np.ravel)
def ravel(a, order: str = "C"):
    """``np.ravel`` in C order (a new array, never a view); other orders are not supported."""
    if order != "C":
        raise TensorNotSupportedError(f"ravel: order {order!r} is not supported (only 'C')")
    return reshape(_operand(a, "ravel"), (-1,))


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
    return _first(bind(ew.copy, _operand(a, "copy")))


# --- indexing along an axis -----------------------------------------------------------------


def _along_axis(arr, indices, axis, fn: str):
    """``arr`` (flattened when ``axis`` is ``None``), its axis, and the flat positions in it
    that ``take_along_axis`` reads (``put_along_axis`` writes), of the result's shape.
    Indices that are tensors or traced values stay data: their positions are computed by ops
    (checked when they run), so ``jit`` and ``vmap`` take them."""
    arr = _operand(arr, fn)
    indices = _operand(indices, fn)
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
    axis = _axis(axis, len(shape), fn)
    try:
        index = _index_array(indices, shape[axis], axis)
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
    return _first(bind(Gather(0, shape_of(flat), positions.shape), flat, positions))


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
    source = _operand(arr, "put_along_axis")
    arr, positions = _along_axis(source, indices, axis, "put_along_axis")
    flat = reshape(arr, (-1,))
    dtype = dtype_of(flat)
    try:
        values = broadcast_to(astype(_operand(values, "put_along_axis"), dtype), positions.shape)
    except TensorShapeError:
        raise TensorShapeError(f"put_along_axis: values of shape {shape_of(values)} cannot be "
                               f"broadcast to the indexed shape {positions.shape}") from None
    values = reshape(values, (-1,))
    targets = reshape(positions, (-1,))
    size = shape_of(flat)[0]
    if isinstance(targets, Frontend):
        values, targets, written = _last_writes_traced(values, targets, size)
    else:
        values, targets, written = _last_writes(values, targets, size)
    scattered = _first(bind(ScatterAdd(0, (size,), shape_of(targets)), values, targets))
    return reshape(where(written, scattered, flat), shape_of(source))


def _last_writes(values, targets: np.ndarray, size: int) -> tuple:
    """``(values, targets)`` keeping the last write to each position (NumPy's assignment
    order), and which of ``size`` positions are written, for known ``targets``."""
    reversed_first = np.unique(targets[::-1], return_index=True)[1]
    kept = targets.size - 1 - reversed_first
    if kept.size != targets.size:
        values = _first(bind(Gather(0, shape_of(values), kept.shape), values, kept))
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
    order = _first(bind(Argsort(0, "stable"), targets))
    targets = _first(bind(Gather(0, (count,), (count,)), targets, order))
    values = _first(bind(Gather(0, (count,), (count,)), values, order))
    last = concatenate([getitem(targets, slice(None, -1)) != getitem(targets, slice(1, None)),
                        np.ones(1, dtype=bool)], 0)
    values = where(last, values, np.zeros((), dtype=dtype_of(values)))
    ones = broadcast_to(np.ones((), dtype=np.intp), (count,))
    hits = _first(bind(ScatterAdd(0, (size,), (count,)), ones, targets))
    return values, targets, hits > 0


@implements(np.meshgrid)
def meshgrid(*xi, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> tuple:
    """``np.meshgrid``: coordinate arrays, broadcasts of the (flattened) inputs; the
    gradient of each input sums over the grid.

    >>> [g.tolist() for g in meshgrid(np.array([1.0, 2.0]), np.array([3.0]))]
    [[[1.0, 2.0]], [[3.0, 3.0]]]
    """
    if indexing not in ("xy", "ij"):
        raise TensorTypeError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    arrays = [ravel(_operand(x, "meshgrid")) for x in xi]
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
    return tuple(grids)


# --- selection ----------------------------------------------------------------------------


def _weak_or_array(value, fn: str):
    """A Python number as is (weak in NumPy's promotion), anything else as an array."""
    return value if type(value) in (int, float, complex) else _operand(value, fn)


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
    conditions = [_operand(c, "select") for c in condlist]
    for i, condition in enumerate(conditions):
        if dtype_of(condition) != np.bool_:
            raise TensorTypeError(f"select: invalid entry {i} in condlist: should be boolean "
                                  "ndarray")
    try:
        shape = np.broadcast_shapes(*[shape_of(a) for a in conditions + choices])
    except ValueError:
        raise TensorShapeError("select: conditions and choices cannot be broadcast together, "
                               f"shapes {[shape_of(a) for a in conditions + choices]}") from None
    result = broadcast_to(astype(choices[-1], dtype), shape)
    for condition, choice in reversed(list(zip(conditions, choices[:-1]))):
        result = where(condition, astype(choice, dtype), result)
    return result


def _one_condition(condlist, x_ndim: int) -> bool:
    """NumPy's rule: ``condlist`` is a single condition, not a list of them."""
    if np.isscalar(condlist):
        return True
    if isinstance(condlist, (list, tuple)):
        if not condlist:
            return False
        first = condlist[0]
        arrays = (list, np.ndarray, Frontend)
        return not (isinstance(first, arrays) or _is_foreign_array(first)) and x_ndim != 0
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
    x = _operand(x, "piecewise")
    shape, dtype = shape_of(x), dtype_of(x)
    if _one_condition(condlist, len(shape)):
        condlist = [condlist]
    elif isinstance(condlist, (Frontend, np.ndarray)) or _is_foreign_array(condlist):
        condlist = [getitem(condlist, i) for i in range(shape_of(condlist)[0])]
    conditions = [broadcast_to(astype(_operand(c, "piecewise"), np.bool_), shape)
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
            result = where(condition, astype(_operand(function, "piecewise"), dtype), result)
            continue
        mask = data_if_known(condition)
        if not isinstance(mask, np.ndarray):          # jit, vmap, other libraries: JAX's way
            values = astype(_operand(function(x, *args, **kw), "piecewise"), dtype)
            result = where(condition, values, result)
            continue
        positions = np.flatnonzero(to_host(mask))
        if positions.size == 0:
            continue
        flat = reshape(x, (-1,))
        selected = _first(bind(Gather(0, shape_of(flat), positions.shape), flat, positions))
        values = _operand(function(selected, *args, **kw), "piecewise")
        try:
            values = broadcast_to(astype(values, dtype), positions.shape)
        except TensorShapeError:
            raise TensorShapeError(f"piecewise: a function returned shape {shape_of(values)} for "
                                   f"{positions.size} selected entries") from None
        size = int(np.prod(shape, dtype=np.int64))
        placed = _first(bind(ScatterAdd(0, (size,), positions.shape), values, positions))
        result = where(condition, reshape(placed, shape), result)
    return result


# --- index tricks ---------------------------------------------------------------------------


def _holds_values(item) -> bool:
    """Whether an item of ``r_[...]`` is more than NumPy data: a tensor or traced value (also
    in a list or as a slice's bound), or another library's array."""
    if isinstance(item, Frontend):
        return True
    if isinstance(item, slice):
        return any(isinstance(b, Frontend) for b in (item.start, item.stop, item.step))
    if isinstance(item, (list, tuple)):
        return _holds_frontend(item)
    return not isinstance(item, str) and _is_foreign_array(item)


def _with_ndmin(x, ndmin: int):
    shape = shape_of(x)
    return x if len(shape) >= ndmin else reshape(x, (1,) * (ndmin - len(shape)) + shape)


class AxisConcatenator:
    """NumPy's index trick objects ``r_`` and ``c_``: ``r_[a, b, 1:3, 0.5]`` concatenates
    arrays, scalars and ranges (``start:stop:step`` is ``arange``; a complex step ``nj``
    is ``linspace`` of ``n`` points) along an axis, with NumPy's directives (a first
    entry ``"1"`` or ``"0,2,1"``: axis, minimum rank, where 1-d arrays go). Plain NumPy
    entries give NumPy's own result; with tensors or traced values it is built with
    ``concatenate`` (and ``linspace``), so it differentiates in every array and bound.
    The matrix directives ``"r"``/``"c"`` (``numpy.matrix``) are NumPy's only.

    >>> import primitives.tensor as tnp
    >>> tnp.r_[np.array([1.0, 2.0]), 0.0, 4:6]
    array([1., 2., 0., 4., 5.])
    >>> tnp.grad(lambda v: tnp.sum(tnp.r_[v, v ** 2, 0:2]))(np.array([3.0]))
    array([7.])
    >>> tnp.grad(lambda v: tnp.sum(tnp.c_[v, 2 * v] ** 2))(np.array([1.0, 2.0]))
    array([10., 20.])
    >>> tnp.r_["0,2,0", np.array([1.0, 2.0]), np.array([[3.0], [4.0]])]  # axis, ndmin, trans1d
    array([[1.],
           [2.],
           [3.],
           [4.]])
    """

    def __init__(self, numpy_object, axis: int, ndmin: int, trans1d: int) -> None:
        self._numpy = numpy_object
        self.axis, self.ndmin, self.trans1d = axis, ndmin, trans1d

    def __len__(self) -> int:
        return 0

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        if not any(_holds_values(item) for item in items):
            return self._numpy[key]                    # NumPy's own, bit for bit
        from primitives.tensor.numpy.creation import linspace

        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        arrays, kinds = [], []
        for k, item in enumerate(items):
            scalar = False
            if isinstance(item, str):
                if k != 0:
                    raise TensorShapeError(f"{self.name}: special directives must be the first "
                                           "entry.")
                axis, ndmin, trans1d = self._directive(item, axis, ndmin, trans1d)
                continue
            if isinstance(item, slice):
                start = 0 if item.start is None else item.start
                step = 1 if item.step is None else item.step
                if isinstance(step, (complex, np.complexfloating)):
                    new = linspace(start, item.stop, num=int(abs(step)))
                else:
                    new = np.arange(start, item.stop, step)
                if ndmin > 1:
                    new = _with_ndmin(new, ndmin)
                    if trans1d != -1:
                        new = swapaxes(new, -1, trans1d)
            elif type(item) in np.ScalarType:
                scalar, new = True, item
            else:
                new = _operand(item, self.name)
                item_ndim = len(shape_of(new))
                new = _with_ndmin(new, ndmin)
                if trans1d != -1 and item_ndim < ndmin:
                    k2, k1 = ndmin - item_ndim, trans1d
                    if k1 < 0:
                        k1 += k2 + 1
                    order = list(range(ndmin))
                    new = transpose(new, order[:k1] + order[k2:] + order[k1:k2])
            arrays.append(new)
            kinds.append(item if scalar else dtype_of(new))
        dtype = np.result_type(*kinds)
        arrays = [_with_ndmin(astype(a, dtype), ndmin) for a in arrays]
        return concatenate(arrays, axis)

    @property
    def name(self) -> str:
        return "c_" if self._numpy is np.c_ else "r_"

    def _directive(self, item: str, axis: int, ndmin: int, trans1d: int) -> tuple:
        if item in ("r", "c"):
            raise TensorNotSupportedError(
                f"{self.name}: the directive {item!r} makes a numpy.matrix, which tnp does not "
                "have; leave it out (tensors and traced values are arrays)")
        try:
            if "," in item:
                values = [int(v) for v in item.split(",")]
                if len(values) not in (2, 3):
                    raise ValueError
                return values[0], values[1], values[2] if len(values) == 3 else trans1d
            return int(item), ndmin, trans1d
        except ValueError:
            raise TensorShapeError(f"{self.name}: unknown special directive {item!r}") from None

    def __repr__(self) -> str:
        return f"tnp.{self.name}"


r_ = AxisConcatenator(np.r_, 0, 1, -1)          # along the first axis
c_ = AxisConcatenator(np.c_, -1, 2, 0)          # 1-d arrays as columns, along the last axis


# --- mapping functions over arrays ---------------------------------------------------------


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
    arr = _operand(arr, "apply_along_axis")
    shape = shape_of(arr)
    axis = _axis(axis, len(shape), "apply_along_axis")
    outer = shape[:axis] + shape[axis + 1:]
    if 0 in outer:
        raise TensorShapeError("apply_along_axis: Cannot apply_along_axis when any iteration "
                               "dimensions are 0")
    rows = reshape(moveaxis(arr, axis, -1), (-1, shape[axis]))
    results = [_operand(func1d(getitem(rows, i), *args, **kwargs), "apply_along_axis")
               for i in range(int(np.prod(outer, dtype=np.int64)))]
    first = results[0]
    core = shape_of(first)
    for result in results[1:]:
        if shape_of(result) != core:
            raise TensorShapeError(f"apply_along_axis: func1d returned shapes {core} and "
                                   f"{shape_of(result)} for different slices")
    out = reshape(stack([astype(r, dtype_of(first)) for r in results]), outer + core)
    # the result's axes where the slice's axis was
    k = len(outer)
    return transpose(out, list(range(axis)) + list(range(k, k + len(core)))
                     + list(range(axis, k)))


def _parse_signature(signature: str) -> tuple:
    """NumPy's generalized-ufunc signature ``"(m,n),(n)->(m)"``: the core dimension names of
    each input and output."""
    import re

    argument = r"\((?:\w+(?:,\w+)*)?\)"
    arguments = rf"{argument}(?:,{argument})*"
    cleaned = re.sub(r"\s+", "", signature)
    if not re.fullmatch(rf"{arguments}->{arguments}", cleaned):
        raise TensorShapeError(f"vectorize: not a valid gufunc signature: {signature}")
    inputs, outputs = cleaned.split("->")

    def dims(part):
        return [tuple(re.findall(r"\w+", arg)) for arg in re.findall(argument, part)]
    return dims(inputs), dims(outputs)


class vectorize:
    """``np.vectorize``: ``pyfunc`` of scalars (or, with ``signature``, of core arrays)
    applied over broadcast arrays, by :func:`~primitives.tensor.vmap` over their flattened
    (loop) axes, so ``pyfunc`` written with tnp functions differentiates under every
    transform. Arguments broadcast as in NumPy (``excluded`` positions and keywords are
    passed unchanged); ``otypes`` casts the outputs; ``signature`` (``"(n),(n)->()"``)
    maps over the loop axes in front of the core ones. ``pyfunc`` may also branch on
    values (``if x > 0``): where the values are known (arrays, the eager ``Tensor``,
    ``grad``) it is then called once per element, as NumPy does; under ``jit`` and
    ``vmap`` that raises ``ConcretizationError`` (write it with ``tnp.where``).
    ``cache`` has no effect. Used as a decorator, with or without arguments.

    >>> import primitives.tensor as tnp
    >>> f = vectorize(lambda x, y: tnp.sin(x) * y)
    >>> f(np.zeros(3), 2.0)
    array([0., 0., 0.])
    >>> tnp.grad(lambda x: tnp.sum(f(x, np.array([[1.0], [2.0]]))))(np.zeros(2))
    array([3., 3.])
    >>> vectorize(lambda v, w: tnp.dot(v, w), signature="(n),(n)->()")(np.ones((4, 3)), np.ones(3))
    array([3., 3., 3., 3.])
    >>> vectorize(lambda x: x if x > 0 else 0.0)(np.array([-1.0, 2.0]))       # branches
    array([0., 2.])
    """

    def __init__(self, pyfunc=np._NoValue, otypes=None, doc=None, excluded=None,
                 cache: bool = False, signature=None) -> None:
        if pyfunc is not np._NoValue and not callable(pyfunc):
            raise TensorTypeError(f"vectorize: pyfunc must be callable, got "
                                  f"{type(pyfunc).__name__}")
        self.pyfunc = pyfunc
        self.cache = cache
        self.signature = signature
        self.__doc__ = doc if doc is not None or pyfunc is np._NoValue else pyfunc.__doc__
        if isinstance(otypes, str):
            invalid = [c for c in otypes if c not in np.typecodes["All"]]
            if invalid:
                raise TensorShapeError(f"vectorize: Invalid otype specified: {invalid[0]}")
            otypes = [np.dtype(c) for c in otypes]
        elif otypes is not None:
            otypes = [np.dtype(t) for t in otypes]
        self.otypes = otypes
        self.excluded = set(excluded or ())
        self._core = None if signature is None else _parse_signature(signature)

    def __call__(self, *args, **kwargs):
        if self.pyfunc is np._NoValue:           # @vectorize(otypes=...): now the function
            if len(args) != 1 or kwargs or not callable(args[0]):
                raise TensorTypeError("vectorize: a decorator takes the one function it wraps")
            self.pyfunc = args[0]
            if self.__doc__ is None:
                self.__doc__ = args[0].__doc__
            return self
        positions = [i for i in range(len(args)) if i not in self.excluded]
        names = [n for n in kwargs if n not in self.excluded]

        def func(*mapped):
            call_args = list(args)
            for i, value in zip(positions, mapped):
                call_args[i] = value
            call_kwargs = dict(kwargs)
            call_kwargs.update(zip(names, mapped[len(positions):]))
            return self.pyfunc(*call_args, **call_kwargs)

        inputs = [_operand(args[i], "vectorize") for i in positions]
        inputs += [_operand(kwargs[n], "vectorize") for n in names]
        if not inputs:
            return func()
        if self._core is None:
            return self._call_scalars(func, inputs)
        return self._call_signature(func, inputs)

    # --- the two ways of looping ---------------------------------------------------------

    def _call_scalars(self, func, inputs: list):
        try:
            shape = np.broadcast_shapes(*[shape_of(a) for a in inputs])
        except ValueError:
            raise TensorShapeError("vectorize: arguments cannot be broadcast together, shapes "
                                   f"{[shape_of(a) for a in inputs]}") from None
        size = int(np.prod(shape, dtype=np.int64))
        if size == 0:
            if self.otypes is None:
                raise TensorShapeError("vectorize: cannot call `vectorize` on size 0 inputs "
                                       "unless `otypes` is set")
            return self._outputs([np.empty(shape, t) for t in self.otypes])
        flat = [reshape(broadcast_to(a, shape), (size,)) for a in inputs]
        outputs = self._map(func, flat)
        for out in outputs:
            if shape_of(out) != (size,):
                raise TensorShapeError(f"vectorize: pyfunc returned an array of shape "
                                       f"{shape_of(out)[1:]} for scalar arguments; give a "
                                       "signature (such as '(n)->(n)') for functions of arrays")
        return self._outputs([reshape(out, shape) for out in outputs])

    def _call_signature(self, func, inputs: list):
        input_dims, output_dims = self._core
        if len(inputs) != len(input_dims):
            raise TensorTypeError(f"vectorize: wrong number of positional arguments: expected "
                                  f"{len(input_dims)}, got {len(inputs)}")
        sizes, loops, cores = {}, [], []
        for a, dims in zip(inputs, input_dims):
            a_shape = shape_of(a)
            if len(a_shape) < len(dims):
                raise TensorShapeError(f"vectorize: {len(a_shape)}-dimensional argument does not "
                                       f"have enough dimensions for all core dimensions {dims}")
            core = a_shape[len(a_shape) - len(dims):]
            for dim, n in zip(dims, core):
                if sizes.setdefault(dim, n) != n:
                    raise TensorShapeError(f"vectorize: inconsistent size for core dimension "
                                           f"{dim!r}: {n} vs {sizes[dim]}")
            loops.append(a_shape[:len(a_shape) - len(dims)])
            cores.append(core)
        try:
            loop = np.broadcast_shapes(*loops)
        except ValueError:
            raise TensorShapeError(f"vectorize: loop dimensions {loops} cannot be broadcast "
                                   "together") from None
        size = int(np.prod(loop, dtype=np.int64))
        if size == 0:
            if self.otypes is None or any(d not in sizes for dims in output_dims for d in dims):
                raise TensorShapeError("vectorize: cannot call `vectorize` on size 0 inputs "
                                       "unless `otypes` is set and every output core dimension "
                                       "is an input's")
            return self._outputs([np.empty(loop + tuple(sizes[d] for d in dims), t)
                                  for dims, t in zip(output_dims, self.otypes)])
        flat = [reshape(broadcast_to(a, loop + core), (size,) + core)
                for a, core in zip(inputs, cores)]
        outputs = self._map(func, flat)
        if len(outputs) != len(output_dims):
            raise TensorShapeError(f"vectorize: wrong number of outputs from pyfunc: expected "
                                   f"{len(output_dims)}, got {len(outputs)}")
        shaped = []
        for out, dims in zip(outputs, output_dims):
            core = shape_of(out)[1:]
            if len(core) != len(dims):
                raise TensorShapeError(f"vectorize: output has {len(core)} core dimensions, the "
                                       f"signature {self.signature!r} says {len(dims)}")
            for dim, n in zip(dims, core):
                if sizes.setdefault(dim, n) != n:
                    raise TensorShapeError(f"vectorize: inconsistent size for core dimension "
                                           f"{dim!r}: {n} vs {sizes[dim]}")
            shaped.append(reshape(out, loop + core))
        return self._outputs(shaped)

    def _map(self, func, flat: list) -> list:
        """``func`` over axis 0 of the ``flat`` arguments: its outputs, stacked along axis 0."""
        from primitives.tensor.transforms.vmap import vmap

        def one(*values):
            out = func(*values)
            leaves = out if isinstance(out, tuple) else (out,)
            return tuple(_operand(leaf, "vectorize") for leaf in leaves)

        try:
            return list(vmap(one)(*flat))
        except ConcretizationError:
            if any(data_if_known(a) is None for a in flat):
                raise                               # under jit or vmap: values are unknown
        # pyfunc reads values (Python control flow): one call per element, as NumPy
        calls = [one(*[getitem(a, i) for a in flat]) for i in range(shape_of(flat[0])[0])]
        return [stack([astype(c[k], dtype_of(calls[0][k])) for c in calls])
                for k in range(len(calls[0]))]

    def _outputs(self, outputs: list):
        if self.otypes is not None:
            if len(self.otypes) != len(outputs):
                raise TensorShapeError(f"vectorize: {len(outputs)} outputs for "
                                       f"{len(self.otypes)} otypes")
            outputs = [astype(out, t) for out, t in zip(outputs, self.otypes)]
        if self._core is not None:
            return outputs[0] if len(self._core[1]) == 1 else tuple(outputs)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
