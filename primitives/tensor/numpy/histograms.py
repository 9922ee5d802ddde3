"""Histograms with NumPy's names: ``histogram``, ``histogram_bin_edges``, ``histogram2d`` and
``histogramdd``.

Each gives NumPy's counts, edges and dtypes. Counts are piecewise constant in the samples:
their derivative there is zero, and the bin of each sample is an integer found as NumPy
finds it (by arithmetic for evenly spaced bins, else ``searchsorted``), so ``jit`` and
``vmap`` take traced samples whenever the number of bins is given (an int or an array of
edges; a string estimator such as ``"auto"`` reads the samples, a
``ConcretizationError`` under ``jit``). What is differentiable is differentiated: the counts
are linear in ``weights``; edges computed from the samples' range follow their ``min`` and
``max`` (as JAX's), and so does ``density=True``'s division by the bin widths; edges given
as an array are differentiable in it.

Under ``jit`` and ``vmap`` values cannot be read, so NumPy's checks of them (a NaN in the
samples when the range is taken from them, non-increasing ``bins``) run only where the
values are known (not on Dask arrays either, which stay lazy); NaN samples there give NaN
edges and empty bins.

It imports :mod:`.lowering`, :mod:`.indexing`, :mod:`.mathfuncs`, :mod:`.manipulation`,
:mod:`.reductions` and :mod:`.creation` (and :mod:`.dispatch`), of the NumPy package.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> counts, edges = tnp.histogram(np.array([0.0, 0.5, 2.0]), bins=2)
>>> counts, edges
(array([2, 1]), array([0., 1., 2.]))
>>> tnp.grad(lambda w: tnp.histogram(np.array([0.0, 0.5, 2.0]), 2, weights=w)[0][1])(
...     np.ones(3))
array([0., 0., 1.])
"""

from __future__ import annotations

import builtins
import operator
import warnings

import numpy as np

from primitives.tensor.backends import library_of, to_host
from primitives.tensor.core import Frontend, bind, data_if_known, data_of, dtype_of, shape_of
from primitives.tensor.errors import (TensorNotSupportedError, TensorShapeError,
                                      TensorTypeError)
from primitives.tensor.numpy.creation import linspace
from primitives.tensor.numpy.dispatch import implements
from primitives.tensor.numpy.indexing import getitem
from primitives.tensor.numpy.lowering import (add, as_dtype, constant_in_library_of, divide,
                                              equal, first, greater_equal, less, less_equal,
                                              max, min,
                                              minimum, multiply, operand, reshape, result_dtype,
                                              stop_gradient, subtract, sum, transpose, where)
from primitives.tensor.numpy.mathfuncs import floor, logical_and
from primitives.tensor.numpy.reductions import diff, searchsorted
from primitives.tensor.ops.indexing import Gather, ScatterAdd

__all__ = ["histogram", "histogram_bin_edges", "histogram2d", "histogramdd"]


# --- edges -----------------------------------------------------------------------------------


def _known_number(value):
    """``value`` as NumPy data if it can be read now, else ``None`` (under ``jit`` or ``vmap``,
    and for a Dask array, which stays lazy: NumPy's checks of values are skipped there)."""
    known = data_if_known(value) if isinstance(value, Frontend) else value
    if known is None or library_of(known).name == "dask":
        return None
    return to_host(known)


def _outer_edges(a, range_, fn: str):
    """NumPy's outer edges of the bins: ``range_``'s pair, else ``a``'s minimum and maximum
    (``0, 1`` when ``a`` is empty), widened by a half on each side when they are equal.
    Python numbers stay Python numbers (weak in promotion, as in NumPy)."""
    if range_ is not None:
        try:
            low, high = range_
        except (TypeError, ValueError):
            raise TensorShapeError(f"{fn}: range must be a pair (min, max), got "
                                   f"{range_!r}") from None
        known = [_known_number(v) for v in (low, high)]
        if None not in known:
            if known[0] > known[1]:
                raise TensorShapeError(f"{fn}: max must be larger than min in range parameter.")
            if not (np.isfinite(known[0]) and np.isfinite(known[1])):
                raise TensorShapeError(f"{fn}: supplied range of [{known[0]}, {known[1]}] is "
                                       "not finite")
        if not isinstance(low, Frontend) and not isinstance(high, Frontend):
            if low == high:
                low, high = low - 0.5, high + 0.5
            return low, high
        low, high = operand(low, fn), operand(high, fn)
    elif 0 in shape_of(a):
        return 0, 1                                # NumPy's: no samples, no range
    else:
        low, high = min(a), max(a)
        known = [_known_number(v) for v in (low, high)]
        if None not in known and not (np.isfinite(known[0]) and np.isfinite(known[1])):
            raise TensorShapeError(f"{fn}: autodetected range of [{known[0]}, {known[1]}] is "
                                   "not finite")
    same = equal(low, high)
    return where(same, subtract(low, 0.5), low), where(same, add(high, 0.5), high)


def _check_increasing(edges, strictly: bool, message: str) -> None:
    known = _known_number(edges)
    if known is not None and known.size > 1:
        wrong = known[:-1] >= known[1:] if strictly else known[:-1] > known[1:]
        if np.any(wrong):
            raise TensorShapeError(message)


def _equal_bins(a, count, range_, fn: str, bin_type: bool = True):
    """``count + 1`` evenly spaced edges over :func:`_outer_edges`; in NumPy's ``bin_type``
    (``histogram``: the samples' and edges' dtype, made inexact) or else ``linspace``'s own
    (``histogramdd``: the edges' dtype, made inexact)."""
    low, high = _outer_edges(a, range_, fn)
    dtype = None
    if bin_type:
        dtype = result_dtype(low, high, a)
        if dtype.kind in "iub":
            dtype = np.result_type(dtype, float)
    edges = linspace(low, high, count + 1, dtype=dtype)
    _check_increasing(edges, True, f"{fn}: Too many bins for data range. Cannot create {count} "
                                   "finite-sized bins.")
    return edges


def _bin_count(bins, fn: str) -> int:
    try:
        count = operator.index(bins)
    except TypeError:
        raise TensorTypeError(f"{fn}: `bins` must be an integer, a string, or an array") from None
    if count < 1:
        raise TensorShapeError(f"{fn}: `bins` must be positive, when an integer")
    return count


def _estimated_count(a, bins: str, range_, weights, fn: str) -> int:
    """The number of bins NumPy's estimator ``bins`` (``"auto"``, ``"fd"``...) chooses: it
    reads the samples' values."""
    data = to_host(data_of(a, f"{fn}: reading the samples for bins={bins!r} (the number of "
                              "bins depends on their values; give an int or the edges)"))
    try:            # (ones for weights: NumPy's own errors, in its order, for weighted data)
        return len(np.histogram_bin_edges(data, bins, range_, None if weights is None else
                                          np.ones(data.shape))) - 1
    except TypeError as error:
        raise TensorTypeError(f"{fn}: {error}") from None
    except (ValueError, OverflowError) as error:       # (overflow: a range of subnormals)
        raise TensorShapeError(f"{fn}: {error}") from None


def _sample(a, weights, fn: str):
    """``a`` and ``weights`` flattened (NumPy's ``_ravel_and_check_weights``)."""
    a = operand(a, fn)
    if dtype_of(a).kind == "c":
        raise TensorNotSupportedError(f"{fn}: complex samples are not supported (they have no "
                                      "order to put them in bins by)")
    if dtype_of(a).kind in "USVMm":
        raise TensorTypeError(f"{fn}: samples of dtype {dtype_of(a)} are not supported (numbers "
                              "only)")
    if dtype_of(a) == np.bool_:
        warnings.warn(f"Converting input from {dtype_of(a)} to {np.uint8} for compatibility.",
                      RuntimeWarning, stacklevel=3)
        a = as_dtype(a, np.uint8)
    if weights is not None:
        weights = operand(weights, fn)
        if shape_of(weights) != shape_of(a):
            raise TensorShapeError(f"{fn}: weights should have the same shape as a.")
        weights = reshape(weights, (-1,))
    return reshape(a, (-1,)), weights


def _edges(a, bins, range_, weights, fn: str):
    """The bin edges (NumPy's ``_get_bin_edges``) and whether they are evenly spaced."""
    if isinstance(bins, str):
        return _equal_bins(a, _estimated_count(a, bins, range_, weights, fn), range_, fn), True
    if isinstance(bins, Frontend) and not shape_of(bins):      # a 0-d tensor: the count
        bins = to_host(data_of(bins, f"{fn}: reading bins (the number of bins)"))[()]
    if not isinstance(bins, (Frontend, list, tuple)) and np.ndim(bins) == 0:
        return _equal_bins(a, _bin_count(bins, fn), range_, fn), True
    edges = _given_edges(bins, a, fn)
    if len(shape_of(edges)) != 1:
        raise TensorShapeError(f"{fn}: `bins` must be 1d, when an array")
    _check_increasing(edges, False, f"{fn}: `bins` must increase monotonically, when an array")
    return edges, False


def _given_edges(bins, a, fn: str):
    """The edges ``bins`` gives, as an array of ``a``'s library when it is a NumPy one or a
    list (``np.histogram(torch_tensor, bins=[...])`` gives PyTorch's edges)."""
    edges = operand(bins, fn)
    if isinstance(edges, np.ndarray):
        edges = constant_in_library_of(edges, a)
    return edges


@implements(np.histogram_bin_edges)
def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """``np.histogram_bin_edges``: the edges :func:`histogram` uses (differentiable in ``a``
    through its ``min`` and ``max`` when ``range`` is not given).

    >>> histogram_bin_edges(np.array([1.0, 3.0]), bins=4)
    array([1. , 1.5, 2. , 2.5, 3. ])
    """
    a, weights = _sample(a, weights, "histogram_bin_edges")
    edges, _ = _edges(a, bins, range, weights, "histogram_bin_edges")
    return _fresh(edges, bins)


def _fresh(edges, bins):
    """``edges``, a new array when it is the ``bins`` given (results never alias inputs)."""
    return multiply(edges, 1) if edges is bins else edges


# --- counts ----------------------------------------------------------------------------------


def _bins_of(x, edges, outside):
    """The bin of each sample of the 1-d ``x``: ``i`` with ``edges[i] <= x < edges[i + 1]``,
    the last bin closed, ``outside`` for samples outside the edges (and NaN)."""
    x, edges = stop_gradient(x), stop_gradient(edges)
    last = shape_of(edges)[0] - 2
    inside = logical_and(greater_equal(x, getitem(edges, 0)), less_equal(x, getitem(edges, -1)))
    right = searchsorted(edges, x, side="right")
    return where(inside, minimum(subtract(right, 1), last), outside)


def _bins_of_evenly_spaced(x, edges, outside):
    """:func:`_bins_of` for evenly spaced ``edges``, as NumPy finds them: the bin
    ``(x - first) / (last - first) * count`` rounded down, moved by one where that is off
    across an edge by rounding; linear in the samples (under ``jit``, ``searchsorted`` takes
    ``log2(len(edges))`` steps over them)."""
    x, edges = stop_gradient(x), stop_gradient(edges)
    count = shape_of(edges)[0] - 1
    low, high = getitem(edges, 0), getitem(edges, -1)
    inside = logical_and(greater_equal(x, low), less_equal(x, high))
    guess = floor(multiply(divide(subtract(x, low), subtract(high, low)), count))
    guess = where(greater_equal(guess, 0), minimum(guess, count - 1), 0)     # NaN: 0
    guess = as_dtype(guess, np.intp)

    def edge(i):            # indices in range by construction: a gather with no bounds check
        return first(bind(Gather(0, shape_of(edges), shape_of(i)), edges, i))
    guess = where(less(x, edge(guess)), subtract(guess, 1), guess)
    above = logical_and(greater_equal(x, edge(add(guess, 1))), less(guess, count - 1))
    guess = where(above, add(guess, 1), guess)
    return where(inside, guess, outside)


# np.histogram's evenly spaced bins count the samples in blocks of this many, each block's
# weighted sums (float64) cast to the weights' dtype before they are added
_BLOCK = 65536


def _scatter(indices, weights, size: int, dtype, fn: str, block: int | None = None):
    """The sum of ``weights`` (ones: counts) at each of ``size`` places ``indices`` name, the
    place ``size`` dropped; summed in float64 (complex128) and returned in ``dtype``; with
    ``block``, summed so per block of that many samples, the blocks' sums added in ``dtype``
    (NumPy's roundings: float32 weights' block sums add in float32)."""
    n = shape_of(indices)[0]
    indices = as_dtype(indices, np.intp)
    if weights is None:
        updates = constant_in_library_of(np.ones(n, np.intp), indices)
        block = None                               # (integer sums: exact in any order)
    else:
        if shape_of(weights) != (n,):
            raise TensorShapeError(f"{fn}: the weights and the samples don't have the same "
                                   f"length ({shape_of(weights)} and {(n,)})")
        updates = as_dtype(weights, np.complex128 if dtype.kind == "c" else np.float64)
    if block is None or n <= block:
        summed = first(bind(ScatterAdd(0, (size + 1,), (n,)), updates, indices))
        return as_dtype(getitem(summed, slice(0, size)), dtype)
    total = None
    for start in builtins.range(0, n, block):   # NumPy's n += block's sums, block after block
        stop = builtins.min(start + block, n)
        summed = first(bind(ScatterAdd(0, (size + 1,), (stop - start,)),
                            getitem(updates, slice(start, stop)),
                            getitem(indices, slice(start, stop))))
        block_sums = getitem(summed, slice(0, size))
        if total is None:
            total = as_dtype(block_sums, dtype)
        elif dtype.kind == "c":           # (n.real += float64 sums: added in float64, rounded)
            total = as_dtype(add(total, block_sums), dtype)
        else:                             # (n += sums.astype(dtype): added in dtype)
            total = add(total, as_dtype(block_sums, dtype))
    return total


@implements(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    """``np.histogram``: ``(counts, edges)``. The counts are integers (``weights``' dtype
    with weights, in which they are linear: differentiable); edges taken from ``a``'s range
    are differentiable through its ``min`` and ``max``, given edges (an array ``bins``) in
    themselves; ``density=True`` divides by the bin widths and the total.

    >>> histogram(np.array([1.0, 2.0, 2.5, 3.0]), bins=[0.0, 2.0, 4.0], density=True)[0]
    array([0.125, 0.375])
    """
    a, weights = _sample(a, weights, "histogram")
    edges, evenly = _edges(a, bins, range, weights, "histogram")
    x = as_dtype(a, dtype_of(edges)) if evenly else a
    count = shape_of(edges)[0] - 1
    dtype = np.dtype(np.intp) if weights is None else dtype_of(weights)
    if count < 0:                     # bins=[]: NumPy's empty counts and edges
        counts = constant_in_library_of(np.zeros(0, np.float64 if density else dtype), a)
        return counts, _fresh(edges, bins)
    places = (_bins_of_evenly_spaced if evenly else _bins_of)(x, edges, count)
    counts = _scatter(places, weights, count, dtype, "histogram", _BLOCK if evenly else None)
    if density:
        widths = as_dtype(diff(edges), np.float64)
        counts = divide(divide(counts, widths), sum(counts))
    return counts, _fresh(edges, bins)


# --- several dimensions ----------------------------------------------------------------------


def _samples_dd(sample, fn: str):
    """``sample`` as NumPy's ``(N, D)`` array: a 2-d array is its rows, a sequence is the
    coordinates' arrays (one per dimension)."""
    if isinstance(sample, (list, tuple)):
        sample = operand(sample, fn)
        shape = shape_of(sample)
        if len(shape) > 2:
            raise TensorShapeError(f"{fn}: the coordinates must be 1-d arrays, got shape "
                                   f"{shape[1:]}")
        return transpose(reshape(sample, (1, -1)) if len(shape) < 2 else sample)
    sample = operand(sample, fn)
    shape = shape_of(sample)
    if len(shape) == 2:
        return sample
    if len(shape) > 2:
        raise TensorShapeError(f"{fn}: the sample must be a 2-d (N, D) array or a sequence of "
                               f"D 1-d arrays, got shape {shape}")
    return reshape(sample, (-1, 1))


@implements(np.histogramdd)
def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """``np.histogramdd``: ``(counts, [edges of each dimension])``, the counts in float64
    (NumPy's), linear in ``weights``; edges differentiable as :func:`histogram`'s.

    >>> counts, edges = histogramdd(np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]]), bins=2)
    >>> counts
    array([[1., 0.],
           [1., 1.]])
    """
    return _histogramdd(sample, bins, range, density, weights, "histogramdd")


def _histogramdd(sample, bins, range, density, weights, fn: str):
    sample = _samples_dd(sample, fn)
    n, d = shape_of(sample)
    if dtype_of(sample).kind == "c":
        raise TensorNotSupportedError(f"{fn}: complex samples are not supported (they have no "
                                      "order to put them in bins by)")
    if isinstance(bins, Frontend) and len(shape_of(bins)) <= 1:   # counts: all, or per dimension
        bins = to_host(data_of(bins, f"{fn}: reading bins (the number of bins)"))
    if isinstance(bins, (list, tuple)) or (not isinstance(bins, str) and _ndim(bins) >= 1):
        # NumPy's len(bins): a sequence, or an array's rows (a 2-d array: each row the edges
        # of a dimension, kept differentiable)
        if (len(bins) if isinstance(bins, (list, tuple)) else shape_of(bins)[0]) != d:
            raise TensorShapeError(f"{fn}: The dimension of bins must be equal to the dimension "
                                   "of the sample x.")
        bins = [getitem(bins, i) if isinstance(bins, Frontend) else bins[i]
                for i in builtins.range(d)]
    else:
        bins = d * [bins]
    ranges = (None,) * d if range is None else range
    if len(ranges) != d:
        raise TensorShapeError(f"{fn}: range argument must have one entry per dimension")
    edges, flat, inside, size = [], 0, True, 1
    for i in builtins.range(d - 1, -1, -1):   # the flat index: the last dimension fastest
        column = getitem(sample, (slice(None), i))
        if not isinstance(bins[i], (Frontend, list, tuple)) and np.ndim(bins[i]) == 0:
            if isinstance(bins[i], str):
                raise TensorTypeError(f"{fn}: `bins[{i}]` must be an integer, when a scalar")
            edge = _equal_bins(column, _bin_count(bins[i], fn), ranges[i], fn, bin_type=False)
            place = _bins_of_evenly_spaced(column, edge, -1)
        else:
            edge = _given_edges(bins[i], sample, fn)
            if len(shape_of(edge)) != 1:
                raise TensorShapeError(f"{fn}: `bins[{i}]` must be a scalar or 1d array")
            _check_increasing(edge, False, f"{fn}: `bins[{i}]` must be monotonically "
                                           "increasing, when an array")
            place = _bins_of(column, edge, -1)
        flat = add(flat, multiply(place, size))
        inside = logical_and(inside, greater_equal(place, 0))
        size *= shape_of(edge)[0] - 1
        edges.insert(0, _fresh(edge, bins[i]))
    if weights is not None:
        weights = operand(weights, fn)
        if dtype_of(weights).kind == "c":
            raise TensorTypeError(f"{fn}: complex weights are not supported (NumPy casts the "
                                  "counts to float64)")
    counts = _scatter(where(inside, flat, size), weights, size, np.dtype(float), fn)
    counts = reshape(counts, tuple(shape_of(e)[0] - 1 for e in edges))
    if density:
        total = sum(counts)
        for i, edge in enumerate(edges):
            shape = [1] * d
            shape[i] = shape_of(edge)[0] - 1
            counts = divide(counts, reshape(diff(edge), tuple(shape)))
        counts = divide(counts, total)
    return counts, edges


def _ndim(x) -> int:
    return len(shape_of(x)) if isinstance(x, Frontend) or hasattr(x, "shape") else np.ndim(x)


@implements(np.histogram2d)
def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    """``np.histogram2d``: ``(counts, x edges, y edges)``, :func:`histogramdd` of ``[x, y]``.

    >>> histogram2d(np.array([0.0, 1.0, 1.0]), np.array([0.0, 1.0, 0.0]), bins=2)[0]
    array([[1., 0.],
           [1., 1.]])
    """
    x, y = operand(x, "histogram2d"), operand(y, "histogram2d")
    if _length(x) != _length(y):
        raise TensorShapeError("histogram2d: x and y must have the same length.")
    if isinstance(bins, Frontend) or (not isinstance(bins, (str, list, tuple))
                                      and _ndim(bins) == 1):
        if shape_of(operand(bins, "histogram2d"))[0] != 2:
            bins = [bins, bins]
    elif isinstance(bins, (list, tuple)) and len(bins) not in (1, 2):
        bins = [bins, bins]
    counts, (x_edges, y_edges) = _histogramdd([x, y], bins, range, density, weights,
                                              "histogram2d")
    return counts, x_edges, y_edges


def _length(x) -> int:
    shape = shape_of(x)
    if not shape:
        raise TensorTypeError("histogram2d: x and y must be 1-d arrays, got a 0-d one")
    return shape[0]
