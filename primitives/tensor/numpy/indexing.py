"""Indexing with NumPy's semantics: ``x[key]`` (:func:`getitem`) and ``take``, and the helper
that makes index arrays (:func:`index_array`), which :mod:`.manipulation` shares.

Basic indices (ints, slices of any step, ``None``, ``...``) lower to ``slice``,
``rev`` and ``reshape``; integer and boolean index arrays (advanced indexing) to
``gather``. Index arrays that are tensors or traced values are data: they stay
operands of the graph, checked by a ``check_index`` op when it runs, so ``jit``
compiles them once and still raises NumPy's ``IndexError`` for one out of range.
A boolean mask is read (the result's shape depends on its values).

It imports :mod:`.lowering` (and :mod:`.dispatch`), of the NumPy package.

>>> x = np.arange(6.0).reshape(2, 3)
>>> getitem(x, (slice(None), [2, 0]))
array([[2., 0.],
       [5., 3.]])
"""

from __future__ import annotations

import numbers

import numpy as np

from tidu import TiduError

from primitives.tensor.backends import to_host
from primitives.tensor.core import Frontend, bind, data_of, dtype_of, shape_of
from primitives.tensor.errors import (TensorIndexError, TensorNotSupportedError, TensorShapeError,
                                      TensorTypeError)
from primitives.tensor.numpy.dispatch import implements
from primitives.tensor.numpy.lowering import (add, as_dtype, broadcast_to, cached_op, elementwise,
                                              first, maximum, minimum, multiply, no_out,
                                              normalize_axis, not_itself, operand, reshape,
                                              transpose)
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.indexing import CheckIndex, Gather, Rev, Slice, checked_indices

__all__ = ["getitem", "take"]


def index_array(value, size: int, axis: int):
    """Integer indices into an axis of ``size`` made non-negative, or NumPy's ``IndexError``.

    Indices that are tensors or traced values are data: they stay operands of the graph,
    checked by a ``check_index`` op when it runs (so ``jit`` never retraces for new index
    values and still raises for one out of range); other indices are checked now.
    """
    if isinstance(value, Frontend):
        return first(bind(CheckIndex(size, axis), value))
    return checked_indices(to_host(value), size, axis)



def _wrapped(indices, size: int):
    """``indices`` modulo ``size`` (``take``'s ``mode="wrap"``), as data if they are; in
    ``intp`` (``size`` may not fit a narrower type)."""
    if isinstance(indices, Frontend):
        return elementwise(ew.remainder, as_dtype(indices, np.intp), np.intp(size))
    return np.remainder(np.asarray(to_host(indices), dtype=np.intp), size)


def _clipped(indices, size: int):
    """``indices`` clipped to ``[0, size - 1]`` (``take``'s ``mode="clip"``), in ``intp``."""
    if isinstance(indices, Frontend):
        return minimum(maximum(as_dtype(indices, np.intp), np.intp(0)), np.intp(size - 1))
    return np.clip(np.asarray(to_host(indices), dtype=np.intp), 0, size - 1)

def _is_data(index) -> bool:
    """Whether an index is a tensor or traced value (an operand), not known NumPy data."""
    return isinstance(index, Frontend)


_MASK_READ = ("indexing with a boolean mask (the result's shape depends on the mask's values; "
              "keep the shape with tnp.where(mask, x, 0), or select with a mask known in "
              "advance)")


def _index_entries(key, shape: tuple) -> list:
    """``key`` as a list of ("slice", s) / ("none", None) / ("int", i) / ("array", a) /
    ("ellipsis", None), the ellipsis expanded into full slices after its marker; a boolean
    mask is its ``nonzero()`` arrays, its shape checked against the axes it indexes."""
    ndim = len(shape)
    key = key if isinstance(key, tuple) else (key,)
    entries, ellipsis_at, consumed = [], None, 0
    mask_shapes = {}                                # id of a mask's first array -> mask shape
    for k in key:
        if type(k) is int:                          # (the common case, first)
            entries.append(("int", k))
            consumed += 1
        elif k is None:
            entries.append(("none", None))
        elif k is Ellipsis:
            if ellipsis_at is not None:
                raise TensorIndexError("an index can only have a single ellipsis ('...')")
            ellipsis_at = len(entries)
        elif isinstance(k, slice):
            entries.append(("slice", _checked_slice(k)))
            consumed += 1
        elif isinstance(k, (bool, np.bool_)):
            raise TensorNotSupportedError("indexing with a boolean scalar is not supported")
        elif isinstance(k, numbers.Integral):
            entries.append(("int", int(k)))
            consumed += 1
        elif _is_data(operand(k)) and dtype_of(operand(k)).kind != "b":
            if dtype_of(operand(k)).kind not in "iu":
                raise TensorIndexError(f"an index array must hold integers or booleans, got "
                                       f"{dtype_of(operand(k))} values")
            entries.append(("array", operand(k)))     # an operand: read when the op runs
            consumed += 1
        else:
            array = to_host(data_of(operand(k), _MASK_READ))
            if array.size == 0 and isinstance(k, (list, tuple)):
                array = array.astype(np.intp)           # NumPy reads [] as an empty index
            if array.dtype == np.bool_:
                if array.ndim == 0:
                    raise TensorNotSupportedError("indexing with a 0-d boolean array is not "
                                                  "supported")
                parts = np.nonzero(array)
                mask_shapes[id(parts[0])] = array.shape
                entries.extend(("array", part) for part in parts)
                consumed += array.ndim
            elif np.issubdtype(array.dtype, np.integer):
                entries.append(("array", array))
                consumed += 1
            else:
                raise TensorIndexError("only integers, slices (`:`), ellipsis (`...`), None and "
                                 "integer or boolean arrays are valid indices")
    if consumed > ndim:
        raise TensorIndexError(f"too many indices for array: array is {ndim}-dimensional, but "
                         f"{consumed} were indexed")
    fill = [("slice", slice(None))] * (ndim - consumed)
    if ellipsis_at is None:
        entries = entries + fill
    else:   # the marker takes no axis but, as in NumPy, separates advanced indices around it
        entries = entries[:ellipsis_at] + [("ellipsis", None)] + fill + entries[ellipsis_at:]
    if mask_shapes:
        _check_masks(entries, mask_shapes, shape)
    return entries


def _checked_slice(k: slice) -> slice:
    """``k`` if NumPy takes it (integer or ``None`` bounds, a nonzero step), else NumPy's
    ``TypeError`` (``ValueError`` for a zero step) as a ``TiduError``; a tensor bound is read
    as its integer (``__index__``)."""
    try:
        k.indices(1)
    except (TypeError, ValueError) as error:
        if isinstance(error, TiduError):    # a traced bound: ConcretizationError says so
            raise
        kind = TensorTypeError if isinstance(error, TypeError) else TensorShapeError
        raise kind(f"indexing x[...] with {k!r}: {error}") from None
    return k


def _check_masks(entries: list, mask_shapes: dict, shape: tuple) -> None:
    """NumPy's ``IndexError`` for a boolean mask whose shape is not that of the axes it
    indexes (its ``nonzero()`` positions alone would silently select from the wrong ones);
    as NumPy, a mask axis of length 0 selects nothing from an axis of any length."""
    axis = 0
    for kind, value in entries:
        if kind in ("none", "ellipsis"):
            continue
        for offset, length in enumerate(mask_shapes.get(id(value), ())):
            if length and shape[axis + offset] != length:
                raise TensorIndexError(
                    f"boolean index did not match indexed array along axis {axis + offset}; "
                    f"size of axis is {shape[axis + offset]} but size of corresponding boolean "
                    f"axis is {length}")
        axis += 1


def getitem(x, key):
    """``x[key]`` with NumPy semantics: ints, slices (any step), ``None``, ``...``, and integer
    or boolean arrays (advanced indexing, through ``gather``)."""
    x = whole = operand(x)
    shape = shape_of(x)
    if type(key) is int and shape and -shape[0] <= key < shape[0]:
        return _row(x, key, shape)
    entries = _index_entries(key, shape)
    advanced = any(kind == "array" for kind, _ in entries)
    starts, limits, strides, flips, sliced = [], [], [], [], []
    arrays = {}                                   # entry position -> (axis, index array)
    axis = 0
    for position, (kind, value) in enumerate(entries):
        if kind in ("none", "ellipsis"):
            continue
        size = shape[axis]
        start, limit, stride = 0, size, 1
        if kind == "slice":
            begin, end, step = value.indices(size)
            count = len(range(begin, end, step))
            if step > 0:
                start, limit, stride = begin, begin + max(count - 1, 0) * step + (
                    1 if count else 0), step
            elif count:
                start, limit, stride = begin + (count - 1) * step, begin + 1, -step
                if count > 1:
                    flips.append(axis)
            else:
                start, limit, stride = 0, 0, 1
        elif kind == "int" and not advanced:
            if -size <= value < size:           # (a Python int in range: checked here)
                start = value + size if value < 0 else value
            else:                               # NumPy's IndexError
                (start,) = index_array(value, size, axis).reshape(1)
                start = int(start)
            limit = start + 1
        else:                                     # an array, or an int among arrays
            arrays[position] = (axis, index_array(value, size, axis))
        starts.append(start), limits.append(limit), strides.append(stride)
        sliced.append(len(range(start, limit, stride)))
        axis += 1
    if (tuple(starts), tuple(limits), tuple(strides)) != ((0,) * len(shape), shape,
                                                          (1,) * len(shape)):
        x = first(bind(cached_op(Slice, tuple(starts), tuple(limits), tuple(strides), shape),
                       x))
    if flips:
        x = first(bind(Rev(tuple(flips)), x))
    sizes = dict(enumerate(sliced))
    if not advanced:
        out, axis = [], 0
        for kind, _ in entries:
            if kind in ("none", "ellipsis"):
                out.extend([1] if kind == "none" else [])
                continue
            if kind == "slice":
                out.append(sizes[axis])
            axis += 1
        # t[:], t[...], t[()]: a new tensor on t's data, as PyTorch's view (t itself would
        # share its state: u = t[:]; u.requires_grad_(False) would switch t's off)
        return not_itself(reshape(x, tuple(out)), whole)
    return _advanced_index(x, entries, arrays, sizes)


def _row(x, i: int, shape: tuple):
    """``x[i]`` for an int ``i`` in range: the ops the general path makes (a ``Slice`` of
    axis 0, unless it takes all of it, and a reshape), without its lists.

    >>> _row(np.arange(6.0).reshape(3, 2), -1, (3, 2))
    array([4., 5.])
    """
    start = i + shape[0] if i < 0 else i
    if shape[0] != 1:
        rest = len(shape) - 1
        x = first(bind(cached_op(Slice, (start,) + (0,) * rest, (start + 1,) + shape[1:],
                                 (1,) * len(shape), shape), x))
    return reshape(x, shape[1:])


def _advanced_index(x, entries, arrays: dict, sizes: dict):
    positions = sorted(arrays)
    adv_axes = [arrays[p][0] for p in positions]
    try:
        index_shape = tuple(np.broadcast_shapes(*[shape_of(arrays[p][1]) for p in positions]))
    except ValueError:
        raise TensorIndexError("shape mismatch: indexing arrays could not be broadcast together "
                               "with shapes "
                               f"{' '.join(str(shape_of(arrays[p][1])) for p in positions)}"
                               ) from None
    contiguous = positions == list(range(positions[0], positions[-1] + 1))
    shape = shape_of(x)
    if len(positions) == 1:
        gather_axis, index = adv_axes[0], _broadcast_index(arrays[positions[0]][1], index_shape)
    else:
        others = [a for a in range(len(shape)) if a not in adv_axes]
        if contiguous:
            gather_axis = adv_axes[0]
        else:
            x = transpose(x, adv_axes + others)
            gather_axis = 0
        dims = tuple(shape[a] for a in adv_axes)
        merged = shape_of(x)[:gather_axis] + (int(np.prod(dims, dtype=np.int64)),) + \
            shape_of(x)[gather_axis + len(dims):]
        x = reshape(x, merged)
        index = _flat_index([arrays[p][1] for p in positions], dims, index_shape)
    x = first(bind(Gather(gather_axis, shape_of(x), index_shape), x, index))
    # the result's axes: NumPy puts the index axes where the advanced block is when it is
    # contiguous in the key, else first; None entries add axes of size one
    out, axis, placed = [], 0, False
    if not contiguous:
        out.extend(index_shape)
    for position, (kind, _) in enumerate(entries):
        if kind in ("none", "ellipsis"):
            out.extend([1] if kind == "none" else [])
            continue
        if position in arrays:
            if contiguous and not placed:
                out.extend(index_shape)
                placed = True
        else:
            out.append(sizes[axis])
        axis += 1
    return reshape(x, tuple(out))


def _broadcast_index(index, shape: tuple):
    """A checked index array broadcast to ``shape``: a C-ordered ``intp`` array, or an operand."""
    if _is_data(index):
        return index if shape_of(index) == shape else broadcast_to(index, shape)
    # (np.array, not np.ascontiguousarray: that makes a 0-d index 1-d, off index_shape)
    return np.array(np.broadcast_to(index, shape), dtype=np.intp, order="C")


def _flat_index(indices: list, dims: tuple, shape: tuple):
    """The positions in the flattened ``dims`` block of checked indices into its axes
    (``np.ravel_multi_index``), broadcast to ``shape``."""
    if 0 in dims:                     # then every index array is empty (else IndexError)
        return np.zeros(shape, dtype=np.intp)
    if not any(_is_data(i) for i in indices):
        return _broadcast_index(np.ravel_multi_index(
            [np.broadcast_to(i, shape) for i in indices], dims), shape)
    flat, stride = None, 1
    for index, size in zip(reversed(indices), reversed(dims)):
        term = index if stride == 1 else multiply(index, np.intp(stride))
        flat = term if flat is None else add(flat, term)
        stride *= size
    return _broadcast_index(flat, shape)


@implements(np.take)
def take(a, indices, axis=None, out=None, mode="raise"):
    """``np.take`` with an integer index array (``axis=None`` indexes the flattened array);
    index arrays that are tensors or traced values stay data (see :func:`getitem`). ``mode``
    is NumPy's: an index out of range raises (``"raise"``), wraps around (``"wrap"``) or is
    clipped to the axis (``"clip"``).

    >>> take(np.arange(5.0), np.array([-7, 7]), mode="wrap").tolist()
    [3.0, 2.0]
    """
    no_out(out, "take")
    if mode not in ("raise", "wrap", "clip"):
        raise TensorIndexError(f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    a = operand(a)
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    shape = shape_of(a)
    axis = normalize_axis(axis, len(shape), "take")
    indices = operand(indices)
    if dtype_of(indices).kind not in "iu":
        raise TensorIndexError("take: indices must be integers")
    size = shape[axis]
    if mode != "raise" and size:        # (an empty axis: every index is out of range)
        indices = _wrapped(indices, size) if mode == "wrap" else _clipped(indices, size)
    index = index_array(indices, size, axis)      # a new array, 0-d kept
    return first(bind(Gather(axis, shape, shape_of(index)), a, index))
