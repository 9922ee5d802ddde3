"""Reductions, scans, sorting and statistics with NumPy's names (and ``logsumexp``).

Each follows NumPy's signature, including ``axis`` (an int, a tuple, ``None``,
negative values), ``keepdims``, ``ddof`` and ``dtype`` where NumPy has them,
and works on arrays, ``Tensor``s and traced values (``jit`` included). A
function's docstring states its gradient convention where one applies.
``sum``, ``max`` and ``min`` are one op each: :mod:`.lowering`'s.

It imports :mod:`.lowering`, :mod:`.indexing`, :mod:`.mathfuncs`,
:mod:`.manipulation` and :mod:`.products` (and :mod:`.dispatch`), of the NumPy
package.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.prod(np.array([2.0, 3.0]))
array(6.)
>>> tnp.grad(tnp.prod)(np.array([2.0, 0.0, 3.0]))       # exact with zeros
array([0., 6., 0.])

The ``nan*`` functions ignore NaNs as NumPy's do, and NaN entries get a zero
derivative (never a NaN one: they are masked out before any arithmetic).
``nanargmax``/``nanargmin`` raise NumPy's ``ValueError`` for an all-NaN slice when
the values are known; under ``jit`` and ``vmap`` they cannot be read (nor, lazily,
on Dask arrays), and such a slice gives ``-1`` (JAX's convention). ``partition``
gives NumPy's exact output; its derivative follows the permutation that produces it.

>>> tnp.grad(lambda x: tnp.nanvar(x))(np.array([1.0, np.nan, 3.0]))
array([-1.,  0.,  1.])
"""

from __future__ import annotations

import builtins
import numbers
from typing import Any, NamedTuple

import numpy as np

from primitives.tensor.backends import NUMPY, library_of, to_host
from primitives.tensor.core import Frontend, bind, data_if_known, data_of, dtype_of, shape_of
from primitives.tensor.errors import (TensorIndexError, TensorNotSupportedError,
                                      TensorShapeError, TensorTypeError)
from primitives.tensor.numpy.dispatch import carries_gradient, implements
from primitives.tensor.numpy.indexing import getitem, take
from primitives.tensor.numpy.lowering import (NO_VALUE, add, as_dtype, broadcast_to, cached_op,
                                              concatenate, constant_in_library_of,
                                              constant_values, conj, divide,
                                              dtype_arg, dtype_name, equal, filled_like, first,
                                              float_dtype,
                                              greater, is_python_scalar, masked, max, maximum,
                                              min, minimum,
                                              multiply, negative, new_value, no_out, normalize_axes,
                                              reduction_axes,
                                              normalize_axis, not_equal, not_itself, operand,
                                              imag, real,
                                              reshape,
                                              result_dtype, sqrt, stop_gradient, subtract, sum,
                                              transpose, where)
from primitives.tensor.numpy.lowering import abs, exp, less, log
from primitives.tensor.numpy.manipulation import diagonal, pad, squeeze
from primitives.tensor.numpy.mathfuncs import (ceil, clip, floor, isfinite, logical_and,
                                               logical_not, logical_or, remainder,
                                               round as round_, sign, sorted_positions)
from primitives.tensor.numpy.products import matmul
from primitives.tensor.ops.indexing import Gather, ScatterAdd
from primitives.tensor.ops.reduce import (Argmax, Argmin, LogSoftmax, ReduceLogSumExp, ReduceProd,
                                          sqrt_zero_slope_at_zero)
from primitives.tensor.ops.scan import Argpartition, Argsort, Cumprod, Cumsum, PartitionOrder, Sort

__all__ = ["mean", "logsumexp", "prod", "cumsum", "cumprod", "cumulative_sum", "cumulative_prod",
           "diff", "ediff1d", "unwrap", "digitize", "gradient", "var", "std",
           "average", "ptp", "nansum", "nanmean", "nanvar", "nanstd", "nanprod", "nanmax",
           "nanmin", "nanargmax", "nanargmin", "nancumsum", "nancumprod", "nanmedian",
           "nanquantile", "nanpercentile",
           "sort", "argsort", "sort_complex", "lexsort", "searchsorted", "partition",
           "argpartition", "argmax",
           "argmin",
           "isin", "unique", "unique_values", "unique_counts", "unique_inverse", "unique_all",
           "union1d", "intersect1d", "setdiff1d", "setxor1d", "bincount",
           "median",
           "quantile", "percentile", "all", "any", "cov", "corrcoef", "trapezoid"]


# --- helpers ----------------------------------------------------------------------------------


def _kept_shape(shape: tuple, axes: tuple) -> tuple:
    return tuple(1 if a in axes else n for a, n in enumerate(shape))


def _keep(out, shape: tuple, axes: tuple, keepdims: bool):
    return reshape(out, _kept_shape(shape, axes)) if keepdims else out


def _count(shape: tuple, axes: tuple) -> int:
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


def _accumulator_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype NumPy's sum and product accumulate in: small integers and booleans widen to
    the platform's integer."""
    if dtype.kind == "b" or (dtype.kind == "i" and dtype.itemsize < np.dtype(np.intp).itemsize):
        return np.dtype(np.intp)
    if dtype.kind == "u" and dtype.itemsize < np.dtype(np.uintp).itemsize:
        return np.dtype(np.uintp)
    return dtype


def _as_accumulated(x, dtype):
    return as_dtype(x, _accumulator_dtype(dtype_of(x)) if dtype is None else dtype)


def _real_only(x, fn: str) -> None:
    if dtype_of(x).kind == "c":
        raise TensorTypeError(f"{fn}: complex input is not supported (NumPy orders complex "
                              "numbers lexicographically, which has no useful derivative); "
                              "apply it to the real part, the imaginary part or abs()")


def _scan_operand(a, axis, fn: str):
    """The operand and axis of a cumulative function: ``axis=None`` scans the flattened array
    (and NumPy scans a 0-d array as a 1-d one)."""
    x = operand(a, fn)
    if axis is None:
        return reshape(x, (-1,)), 0
    if not shape_of(x):
        x = reshape(x, (1,))
    return x, normalize_axis(axis, len(shape_of(x)), fn)


def _isnan(x):
    return not_equal(x, x)


def _any_known(mask) -> bool | None:
    """Whether any entry of the boolean ``mask`` is true, where that can be read now; ``None``
    while ``jit`` or ``vmap`` traces, and for a Dask array (computed only when asked)."""
    data = data_if_known(mask)
    if data is None or library_of(data).name == "dask":
        return None
    return bool(library_of(data).xp.any(data))


def _take_along(x, index, axis: int):
    """``np.take_along_axis(x, index, axis)`` for indices computed in range (by an op, or
    clipped): one gather of flat positions, which stay data (traced, or lazy on Dask) with
    no bounds check. ``index`` has ``x``'s shape but along ``axis``."""
    shape = shape_of(x)
    strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]
    offsets = np.zeros((1,) * len(shape), dtype=np.intp)
    for d, size in enumerate(shape):
        if d != axis:
            along = np.arange(size, dtype=np.intp).reshape([-1 if e == d else 1
                                                            for e in range(len(shape))])
            offsets = offsets + along * strides[d]
    positions = add(multiply(as_dtype(index, np.intp), strides[axis]), offsets)
    flat = reshape(x, (-1,))
    return first(bind(Gather(0, shape_of(flat), shape_of(positions)), flat, positions))


def _selection(x, where_, fn: str):
    """``where=``'s mask broadcast to ``x``'s shape, or ``None`` when not given."""
    if where_ is NO_VALUE:
        return None
    mask = operand(where_, fn)
    if dtype_of(mask) != np.bool_:
        raise TensorTypeError(f"{fn}: where= must be boolean, got {dtype_of(mask)}")
    try:
        return broadcast_to(mask, shape_of(x))
    except TensorShapeError:
        raise TensorShapeError(f"{fn}: where= of shape {shape_of(mask)} does not broadcast to "
                               f"the array's shape {shape_of(x)}") from None


def _both(mask, other):
    """The elementwise ``and`` of two boolean masks (either may be ``None``: all true)."""
    if mask is None or other is None:
        return other if mask is None else mask
    return where(mask, other, False)


# --- products and cumulative functions -------------------------------------------------------


@implements(np.prod)
def prod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None,
         where=NO_VALUE):
    """``np.prod`` (``where=`` multiplies the selected entries only). Exact derivatives where
    entries are zero (one, two or more), to every order: the derivative in ``a[j]`` is the
    product of the other entries, never ``prod / a[j]``.

    >>> prod(np.array([[1.0, 2.0], [3.0, 4.0]]), axis=-1, keepdims=True)
    array([[ 2.],
           [12.]])
    >>> prod(np.array([2.0, 5.0, 3.0]), where=np.array([True, False, True]))
    array(6.)
    """
    no_out(out, "prod")
    x = _as_accumulated(operand(a, "prod"), dtype)
    x = masked(x, where, 1, "prod")
    shape = shape_of(x)
    axes = reduction_axes(axis, len(shape), "prod")
    result = first(bind(ReduceProd(axes, shape, dtype_of(x).name), x)) if axes else new_value(x)
    if initial is not None:                    # in the product's dtype, as NumPy casts it
        result = multiply(result, as_dtype(initial, dtype_of(x)))
    return _keep(result, shape, axes, keepdims)


@implements(np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None):
    """``np.cumsum`` (``axis=None``: of the flattened array). Linear: its gradient is the
    reversed cumulative sum of the cotangent.

    >>> cumsum(np.array([[1, 2], [3, 4]]))
    array([ 1,  3,  6, 10])
    """
    no_out(out, "cumsum")
    x, axis = _scan_operand(a, axis, "cumsum")
    x = _as_accumulated(x, dtype)
    return first(bind(Cumsum(axis), x))


@implements(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    """``np.cumprod`` (``axis=None``: of the flattened array). Exact derivatives where entries
    are zero, to every order (a linear recurrence, never ``cumprod / a``).

    >>> cumprod(np.array([2.0, 0.0, 3.0]))
    array([2., 0., 0.])
    """
    no_out(out, "cumprod")
    x, axis = _scan_operand(a, axis, "cumprod")
    x = _as_accumulated(x, dtype)
    return first(bind(Cumprod(axis, shape_of(x), dtype_of(x).name), x))


def _cumulative(scan, a, axis, dtype, out, include_initial: bool, fn: str, start: int):
    """The Array API's cumulative ``scan`` (:func:`cumsum`, :func:`cumprod`): ``axis`` may be
    left out for a 0-d or 1-d ``a`` only; with ``include_initial`` the result starts with
    ``start`` (the empty sum or product) along ``axis``. Errors name ``fn``, the function
    called (not ``scan``). As NumPy 2.4's (its ``ufunc.accumulate`` takes an axis so), ``axis``
    may be a tuple of one axis; a 0-d ``a`` is scanned as a 1-d one."""
    no_out(out, fn)
    dtype = dtype_arg(dtype, fn)
    x = operand(a, fn)
    ndim = len(shape_of(x))
    if axis is None:
        if ndim > 1:
            raise TensorShapeError(f"{fn}: for arrays which have more than one dimension the "
                                   "axis argument is required")
        axis = 0
    if isinstance(axis, tuple):
        if len(axis) != 1:
            raise TensorShapeError(f"{fn}: accumulate does not allow multiple axes")
        (axis,) = axis
    axis = normalize_axis(axis, builtins.max(ndim, 1), fn)       # (scan takes 0-d as 1-d)
    result = scan(x, axis, dtype)
    if not include_initial:
        return result
    widths = [(0, 0)] * len(shape_of(result))
    widths[normalize_axis(axis, len(widths), fn)] = (1, 0)
    return pad(result, widths, constant_values=start)


@implements(np.cumulative_sum)
def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial: bool = False):
    """``np.cumulative_sum`` (the Array API's :func:`cumsum`): ``axis`` is required for arrays
    of more than one dimension; ``include_initial`` starts the sums with 0.

    >>> cumulative_sum(np.array([1.0, 2.0, 3.0]), include_initial=True)
    array([0., 1., 3., 6.])
    """
    return _cumulative(cumsum, x, axis, dtype, out, include_initial, "cumulative_sum", 0)


@implements(np.cumulative_prod)
def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial: bool = False):
    """``np.cumulative_prod`` (the Array API's :func:`cumprod`): ``axis`` is required for arrays
    of more than one dimension; ``include_initial`` starts the products with 1.

    >>> cumulative_prod(np.array([2.0, 0.5, 3.0]), include_initial=True)
    array([1., 2., 1., 3.])
    """
    return _cumulative(cumprod, x, axis, dtype, out, include_initial, "cumulative_prod", 1)


@implements(np.diff)
def diff(a, n: int = 1, axis: int = -1, prepend=NO_VALUE, append=NO_VALUE):
    """``np.diff``: ``n``-th differences along ``axis``, after joining ``prepend`` and
    ``append`` (scalars broadcast to one slice); booleans differ by ``!=``, as in NumPy.
    Linear in ``a``, ``prepend`` and ``append``.

    >>> diff(np.array([1.0, 4.0, 9.0]), prepend=0.0)
    array([1., 3., 5.])
    """
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise TensorTypeError(f"diff: order n must be an integer, got {n!r}")
    if n < 0:
        raise TensorShapeError(f"diff: order must be non-negative but got {n}")
    x = operand(a, "diff")
    shape = shape_of(x)
    if not shape:
        raise TensorShapeError("diff: diff requires input that is at least one dimensional")
    axis = normalize_axis(axis, len(shape), "diff")
    if n == 0:
        return not_itself(x, x)             # (an eager Tensor: a new tensor, never itself)
    if prepend is not NO_VALUE or append is not NO_VALUE:
        slab = tuple(1 if i == axis else s for i, s in enumerate(shape))

        def joined(extra):            # a scalar becomes one slice along the axis
            extra = operand(extra, "diff")
            return [broadcast_to(extra, slab) if not shape_of(extra) else extra]
        x = concatenate((joined(prepend) if prepend is not NO_VALUE else []) + [x]
                        + (joined(append) if append is not NO_VALUE else []), axis=axis)
    later = tuple(slice(1, None) if i == axis else slice(None) for i in range(len(shape)))
    earlier = tuple(slice(None, -1) if i == axis else slice(None) for i in range(len(shape)))
    step = not_equal if dtype_of(x).kind == "b" else subtract
    for _ in range(n):
        x = step(getitem(x, later), getitem(x, earlier))
    return x


@implements(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    """``np.ediff1d``: the differences of the flattened ``ary``, with ``to_begin`` before and
    ``to_end`` after (cast to ``ary``'s dtype, as NumPy's); linear in each.

    >>> ediff1d(np.array([1.0, 4.0, 9.0]), to_begin=-1.0)
    array([-1.,  3.,  5.])
    """
    ary = reshape(operand(ary, "ediff1d"), (-1,))
    dtype = dtype_of(ary)
    if dtype.kind == "b":
        raise TensorTypeError("ediff1d: boolean input is not supported (NumPy's subtract has "
                              "no boolean loop)")
    parts = [subtract(getitem(ary, slice(1, None)), getitem(ary, slice(None, -1)))]
    for name, extra, where_ in (("to_begin", to_begin, 0), ("to_end", to_end, 1)):
        if extra is None:
            continue
        extra = reshape(operand(extra, "ediff1d"), (-1,))
        if not np.can_cast(dtype_of(extra), dtype, "same_kind"):
            raise TensorTypeError(f"ediff1d: dtype of `{name}` must be compatible with input "
                                  f"`ary` under the `same_kind` rule")
        parts.insert(0 if where_ == 0 else len(parts), as_dtype(extra, dtype))
    return concatenate(parts)


@implements(np.unwrap)
def unwrap(p, discont=None, axis: int = -1, *, period=2 * np.pi):
    """``np.unwrap``: ``p`` with the jumps between neighbours along ``axis`` larger than
    ``max(discont, period/2)`` replaced by their ``period`` complement, as NumPy computes it.
    The corrections are piecewise constant: the derivative is the identity.

    >>> unwrap(np.array([0.0, 3.0, 6.5]))
    array([0.        , 3.        , 0.21681469])
    """
    p = operand(p, "unwrap")
    axis = normalize_axis(axis, len(shape_of(p)), "unwrap")
    dd = diff(p, axis=axis)
    if discont is None:
        discont = period / 2
    dtype = np.result_type(dtype_of(dd), period)
    if dtype.kind in "iu":
        high, rem = builtins.divmod(period, 2)
        ambiguous = rem == 0
    else:
        high, ambiguous = period / 2, True
    low = -high
    ddmod = add(remainder(subtract(dd, low), period), low)
    if ambiguous:
        ddmod = where(logical_and(equal(ddmod, low), greater(dd, 0)), high, ddmod)
    correction = where(less(abs(dd), discont), 0, subtract(ddmod, dd))
    widths = [(0, 0)] * len(shape_of(p))
    widths[axis] = (1, 0)
    return add(as_dtype(p, dtype), pad(cumsum(correction, axis=axis), widths))


@implements(np.digitize)
def digitize(x, bins, right: bool = False):
    """``np.digitize``: the index of the bin of ``bins`` (increasing or decreasing, read now)
    each entry of ``x`` falls in, by :func:`searchsorted`, so ``x`` may be traced (``jit``,
    ``vmap``); an integer result, not differentiated.

    >>> digitize(np.array([0.2, 6.4, 3.0]), np.array([0.0, 1.0, 2.5, 4.0]))
    array([1, 4, 3])
    """
    x = operand(x, "digitize")
    if dtype_of(x).kind == "c":
        raise TensorTypeError("digitize: x may not be complex")
    edges = to_host(data_of(operand(bins, "digitize"), "digitize: reading bins (whether they "
                                                       "increase or decrease)"))
    if edges.ndim != 1:
        raise TensorShapeError(f"digitize: bins must be 1-dimensional, got shape {edges.shape}")
    # NumPy's test, neighbour by neighbour (np.diff would make inf - inf and NaN steps): the
    # first edge unlike the one before says which way; no later step may go the other way
    up, down = edges[:-1] < edges[1:], edges[:-1] > edges[1:]
    changes = np.flatnonzero(edges[:-1] != edges[1:])
    increasing = not changes.size or bool(up[changes[0]])
    if (down if increasing else up).any():
        raise TensorShapeError("digitize: bins must be monotonically increasing or decreasing")
    searched = edges if increasing else edges[::-1]
    nan = np.isnan(searched) if searched.dtype.kind in "fc" else np.zeros(searched.shape, bool)
    if nan.any() and not nan[int(np.argmax(nan)):].all() and data_if_known(x) is None:
        # NumPy takes them, but its answer is its binary search's on unsorted edges
        raise TensorNotSupportedError("digitize: bins with NaN before other edges (in their "
                                      "search order) under jit or vmap: NumPy's indices then "
                                      "depend on its binary search; put NaN edges last")
    found = searchsorted(searched, x, side="left" if right else "right")
    return found if increasing else subtract(np.intp(edges.shape[0]), found)


def _gradient_axes(axis, ndim: int) -> tuple:
    """NumPy's ``normalize_axis_tuple``: the axes in the order given, distinct."""
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(normalize_axis(a, ndim, "gradient") for a in
                 (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if len(set(axes)) != len(axes):
        raise TensorShapeError(f"gradient: repeated axis in 'axis' argument: {axis}")
    return axes


def _gradient_spacing(distances, n: int):
    """One axis's spacing as ``(uniform, dx)``: a scalar step, or the steps between the
    coordinates ``distances`` (1-d, ``n`` of them). Coordinates that are NumPy constants and
    evenly spaced become one step, as NumPy does; coordinates that carry values (tensors,
    traced) always keep their steps, so the derivative in each coordinate is exact."""
    distances = operand(distances, "gradient")
    shape = shape_of(distances)
    if not shape:
        return True, distances
    if len(shape) != 1:
        raise TensorShapeError("gradient: distances must be either scalars or 1d")
    if shape[0] != n:
        raise TensorShapeError("gradient: when 1d, distances must match the length of the "
                               "corresponding dimension")
    if dtype_of(distances).kind in "iub":
        distances = as_dtype(distances, np.float64)
    steps = diff(distances)
    if isinstance(steps, np.ndarray) and steps.size and (steps == steps[0]).all():
        return True, steps[0]                  # (NumPy coordinates: constants)
    return False, steps


@implements(np.gradient)
def gradient(f, *varargs, axis=None, edge_order: int = 1):
    """``np.gradient``: second-order central differences inside, one-sided differences of
    order ``edge_order`` (1 or 2) at the boundaries, along every axis (or ``axis``, an int or
    a tuple); one array for one axis, else a tuple. ``varargs`` are the spacing: none (1),
    one scalar for every axis, or one per axis, each a scalar step or the 1-d coordinates.
    Linear in ``f``, and differentiable in the spacing too (steps and coordinates; evenly
    spaced NumPy coordinates are reduced to one step, as NumPy does).

    >>> gradient(np.array([1.0, 2.0, 4.0, 7.0]))
    array([1. , 1.5, 2.5, 3. ])
    >>> gradient(np.array([1.0, 2.0, 4.0, 7.0]), np.array([0.0, 1.0, 1.5, 3.5]), edge_order=2)
    array([-1. ,  3. ,  3.5, -0.5])
    >>> import primitives.tensor as tnp
    >>> float(tnp.grad(lambda h: tnp.sum(gradient(np.array([0.0, 1.0, 4.0]), h)))(0.5))  # -6/h**2
    -24.0
    """
    f = operand(f, "gradient")
    shape = shape_of(f)
    ndim = len(shape)
    axes = _gradient_axes(axis, ndim)
    if not isinstance(edge_order, numbers.Integral) or edge_order > 2:
        raise TensorShapeError("gradient: 'edge_order' greater than 2 not supported")
    if not varargs:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and not shape_of(operand(varargs[0], "gradient")):
        spacing = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise TensorTypeError("gradient: invalid number of arguments")
    otype = dtype_of(f)
    if otype.kind not in "fc":          # integers and booleans: in float64, as NumPy
        otype = np.dtype(np.float64)
        f = as_dtype(f, otype)
    results = []
    for ax, distances in zip(axes, spacing):
        n = shape[ax]
        if n < edge_order + 1:
            raise TensorShapeError("gradient: Shape of array too small to calculate a numerical "
                                   "gradient, at least (edge_order + 1) elements are required.")
        uniform, dx = _gradient_spacing(distances, n)
        results.append(as_dtype(_gradient_along(f, ax, uniform, dx, edge_order), otype))
    return results[0] if len(results) == 1 else tuple(results)


def _gradient_along(f, axis: int, uniform: bool, dx, edge_order: int):
    """NumPy's formulas along one axis: the interior, then the two edges, joined."""
    ndim = len(shape_of(f))

    def part(start, stop):
        return getitem(f, (slice(None),) * axis + (slice(start, stop),))

    def along(coefficient):             # a 1-d array of coefficients, along ``axis``
        return reshape(coefficient, (-1,) + (1,) * (ndim - axis - 1))

    def step(index):                    # a non-uniform step, 0-d
        return getitem(dx, index)

    def ratio(p, q):                    # Python numbers stay Python's (weak, as in NumPy)
        return p / q if is_python_scalar(q) else divide(p, q)

    if uniform:
        twice = 2.0 * dx if is_python_scalar(dx) else multiply(2.0, dx)
        interior = divide(subtract(part(2, None), part(None, -2)), twice)
    else:
        dx1, dx2 = getitem(dx, slice(0, -1)), getitem(dx, slice(1, None))
        a = divide(negative(dx2), multiply(dx1, add(dx1, dx2)))
        b = divide(subtract(dx2, dx1), multiply(dx1, dx2))
        c = divide(dx1, multiply(dx2, add(dx1, dx2)))
        interior = add(add(multiply(along(a), part(None, -2)), multiply(along(b), part(1, -1))),
                       multiply(along(c), part(2, None)))
    if edge_order == 1:
        first = divide(subtract(part(1, 2), part(0, 1)), dx if uniform else step(0))
        last = divide(subtract(part(-1, None), part(-2, -1)), dx if uniform else step(-1))
    else:
        if uniform:
            a, b, c = ratio(-1.5, dx), ratio(2.0, dx), ratio(-0.5, dx)
        else:
            dx1, dx2 = step(0), step(1)
            a = divide(negative(add(multiply(2.0, dx1), dx2)), multiply(dx1, add(dx1, dx2)))
            b = divide(add(dx1, dx2), multiply(dx1, dx2))
            c = divide(negative(dx1), multiply(dx2, add(dx1, dx2)))
        first = add(add(multiply(a, part(0, 1)), multiply(b, part(1, 2))),
                    multiply(c, part(2, 3)))
        if uniform:
            a, b, c = ratio(0.5, dx), ratio(-2.0, dx), ratio(1.5, dx)
        else:
            dx1, dx2 = step(-2), step(-1)
            a = divide(dx2, multiply(dx1, add(dx1, dx2)))
            b = divide(negative(add(dx2, dx1)), multiply(dx1, dx2))
            c = divide(add(multiply(2.0, dx2), dx1), multiply(dx2, add(dx1, dx2)))
        last = add(add(multiply(a, part(-3, -2)), multiply(b, part(-2, -1))),
                   multiply(c, part(-1, None)))
    return concatenate([first, interior, last], axis)


# --- means: mean, logsumexp ---------------------------------------------------------------


@implements(np.mean)
def mean(x, axis=None, dtype=None, out=None, keepdims: bool = False, *, where=NO_VALUE):
    """``np.mean`` (``where=`` averages the selected elements only)."""
    no_out(out, "mean")
    x = operand(x)
    if dtype is None and dtype_of(x) == np.float16:
        # NumPy's float32 intermediates: a float16 sum of 1e5 ones is inf, their mean 1.0
        return as_dtype(mean(as_dtype(x, np.float32), axis, None, None, keepdims,
                             where=where), np.float16)
    x = as_dtype(x, dtype if dtype is not None else float_dtype(x))
    if where is not NO_VALUE:
        selected = broadcast_to(operand(where, "mean"), shape_of(x))
        total = sum(x, axis, keepdims=keepdims, where=selected)
        count = sum(as_dtype(selected, dtype_of(total)), axis, keepdims=keepdims)
        return divide(total, count)
    shape = shape_of(x)
    count = int(np.prod([shape[a] for a in normalize_axes(axis, len(shape), "mean")],
                        dtype=np.int64))
    total = sum(x, axis, keepdims=keepdims)
    return multiply(total, 1.0 / count) if count else divide(total, 0.0)


def logsumexp(x, axis=None, b=None, keepdims: bool = False, return_sign: bool = False):
    """``scipy.special.logsumexp``: ``log(sum(b * exp(x)))`` over ``axis`` (all axes by
    default), computed stably; SciPy's signature and semantics. Real input only.

    Without ``b`` and ``return_sign`` it is one op (``reduce_logsumexp``), shifted by the
    maximum; its derivative is the softmax. With weights ``b`` (broadcast against ``x``;
    terms whose weight is 0 count for nothing, even where ``x`` is infinite or NaN) a
    negative sum gives NaN, or, with ``return_sign``, ``(log|sum|, sign(sum))``.
    Differentiable in ``x`` and ``b``.

    >>> float(logsumexp(np.array([1000.0, 1000.0])))        # 1000 + log 2, no overflow
    1000.6931471805599
    >>> out, sgn = logsumexp(np.array([1.0, 2.0]), b=np.array([1.0, -1.0]), return_sign=True)
    >>> float(out), float(sgn)
    (1.5413248546129181, -1.0)
    """
    x = operand(x)
    if b is not None or return_sign:
        return weighted_logsumexp(x, axis, b, keepdims, return_sign)
    _check_real_logsumexp(dtype_of(x))
    x = as_dtype(x, float_dtype(x))
    shape = shape_of(x)
    axes = normalize_axes(axis, len(shape), "logsumexp")
    if not axes:
        return new_value(x)                             # log(exp(x)), a new array
    out = first(bind(cached_op(ReduceLogSumExp, axes, shape, dtype_name(dtype_of(x))), x))
    return reshape(out, tuple(1 if i in axes else n for i, n in enumerate(shape))) \
        if keepdims else out


def log_softmax_over(x, axes: tuple, finite_shift: bool):
    """``x - logsumexp(x, axes, keepdims=True)``, stably, as one op (``log_softmax``): what
    ``nn.log_softmax`` (``finite_shift=False``, JAX's) and ``scipy.special.log_softmax``
    (``finite_shift=True``, SciPy's) compute. ``axes`` are normalized; integers become the
    default float.

    >>> log_softmax_over(np.array([1000.0, 1.0]), (0,), True)
    array([   0., -999.])
    """
    x = operand(x)
    x = as_dtype(x, float_dtype(x))
    return first(bind(cached_op(LogSoftmax, tuple(axes), shape_of(x), dtype_name(dtype_of(x)),
                                finite_shift), x))


def _check_real_logsumexp(dtype: np.dtype) -> None:
    if dtype.kind == "c":
        raise TensorTypeError("logsumexp: complex input is not supported")
    if dtype.kind not in "biuf":
        raise TensorTypeError(f"logsumexp: input of dtype {dtype} is not supported")


def weighted_logsumexp(a, axis, b, keepdims: bool, return_sign: bool):
    """:func:`logsumexp` with weights ``b`` (``None``: none) or the sign: the shift by the
    maximum is a constant (``stop_gradient``), whose derivative cancels exactly; the sign
    has derivative 0."""
    a = operand(a, "logsumexp")
    unweighted = None       # where b == 0 and a is finite: a (the others -inf), when b varies
    if b is not None:
        b = operand(b, "logsumexp")
        dtype = result_dtype(a, b)
        _check_real_logsumexp(dtype)
        dtype = float_dtype(np.zeros((), dtype))
        a, b = as_dtype(a, dtype), as_dtype(b, dtype)
        shape = np.broadcast_shapes(shape_of(a), shape_of(b))
        a, b = broadcast_to(a, shape), broadcast_to(b, shape)
        zero = equal(b, 0)
        if isinstance(b, Frontend):
            # a term of weight 0 adds nothing to the value, but the derivative in its weight
            # is exp(a - logsumexp) all the same (0 only where a is -inf)
            unweighted = where(zero, where(isfinite(a), a, -np.inf), -np.inf)
        a = where(zero, -np.inf, a)             # SciPy: such terms add nothing, inf and NaN too
    else:
        _check_real_logsumexp(dtype_of(a))
        a = as_dtype(a, float_dtype(a))
    if len(shape_of(a)) == 0:                   # SciPy: at least 1-d (so axis=0 works)
        a = reshape(a, (1,))
        b = None if b is None else reshape(b, (1,))
        unweighted = None if unweighted is None else reshape(unweighted, (1,))
    axes = normalize_axes(axis, len(shape_of(a)), "logsumexp")
    shift = stable_shift(a, axes)
    terms = exp(subtract(a, shift))
    if b is not None:
        terms = multiply(b, terms)
    if unweighted is not None:
        # 0 in value (b - stop_gradient(b) is 0), exp(a - shift) in b's derivative; capped
        # below the overflow (a derivative beyond max / e in any case), so that the value
        # stays 0 and not 0 * inf
        cap = float(np.log(np.finfo(dtype_of(a)).max)) - 1.0
        terms = add(terms, multiply(subtract(b, stop_gradient(b)),
                                    exp(minimum(subtract(unweighted, shift), cap))))
    total = sum(terms, axes, keepdims=True)
    out = add(log(abs(total)), shift)
    if return_sign:
        return _squeezed(out, axes, keepdims), _squeezed(sign(total), axes, keepdims)
    # a negative sum: NaN, and NaN derivatives too (not the zeros a `where` would give)
    dtype = dtype_of(out)
    out = multiply(out, where(less(total, 0), np.array(np.nan, dtype), np.array(1, dtype)))
    return _squeezed(out, axes, keepdims)


def stable_shift(a, axes: tuple):
    """The maximum of ``a`` over ``axes`` (kept), as a constant, 0 where it is not finite:
    what ``logsumexp`` and ``softmax`` subtract (its derivative cancels exactly)."""
    if builtins.any(shape_of(a)[i] == 0 for i in axes):
        return np.zeros(tuple(1 if i in axes else n for i, n in enumerate(shape_of(a))),
                        dtype_of(a))
    shift = max(stop_gradient(a), axes, keepdims=True) if axes else stop_gradient(a)
    return where(isfinite(shift), shift, 0.0)


def _squeezed(x, axes: tuple, keepdims: bool):
    if keepdims:
        return x
    return reshape(x, tuple(n for i, n in enumerate(shape_of(x)) if i not in axes))


# --- variance and averages -------------------------------------------------------------------


def _ddof(ddof, correction, fn: str):
    if correction is NO_VALUE:
        return ddof
    if ddof != 0:
        raise TensorShapeError(f"{fn}: ddof and correction can't be provided simultaneously.")
    return correction


_mean_of = mean        # var's and std's parameter ``mean`` hides the function
_choose = where        # and the parameter ``where`` of NumPy's reductions hides this one


def _squared_deviations(x, axes: tuple, keepdims: bool, selected, center, fn: str):
    """``sum(|x - center|**2)`` over ``axes`` and the count it sums, over the entries of ``x``
    where ``selected`` (a boolean mask of ``x``'s shape; ``None``: all). ``center`` is
    ``x``'s mean over them unless given (NumPy's ``mean=``). Unselected entries (NaNs, for
    the ``nan*`` functions) are replaced before any arithmetic, so no NaN reaches the
    derivative and theirs is zero."""
    shape = shape_of(x)
    count_dtype = np.finfo(dtype_of(x)).dtype
    if selected is None:
        count = np.asarray(float(_count(shape, axes)), dtype=count_dtype)
        kept_count = count
    else:
        x = _choose(selected, x, 0)
        kept_count = sum(as_dtype(selected, count_dtype), axes, keepdims=True)
        count = kept_count if keepdims else reshape(
            kept_count, tuple(n for i, n in enumerate(shape) if i not in axes))
    if center is NO_VALUE:          # (a slice with nothing selected: any center will do)
        center = divide(sum(x, axes, keepdims=True),
                        kept_count if selected is None else maximum(kept_count, 1))
    else:
        center = as_dtype(operand(center, fn), dtype_of(x))
    deviation = subtract(x, center)
    if selected is not None:
        deviation = _choose(selected, deviation, 0)
    if dtype_of(deviation).kind == "c":
        squares = real(multiply(deviation, conj(deviation)))
    else:
        squares = multiply(deviation, deviation)
    return sum(squares, axes, keepdims=keepdims), count


def _variance_operand(a, dtype, fn: str):
    x = operand(a, fn)
    return as_dtype(x, float_dtype(x) if dtype is None else dtype_arg(dtype, fn))


@implements(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, *,
        where=NO_VALUE, mean=NO_VALUE, correction=NO_VALUE):
    """``np.var``: the mean of ``|a - mean(a)|**2`` over ``axis`` divided by ``N - ddof``
    (``correction`` is NumPy 2's name for ``ddof``); real for complex input, as NumPy's.
    ``where=`` takes the selected entries only (``N`` counts them); ``mean=`` gives the mean
    (with ``keepdims`` shape), as NumPy's, differentiable too.

    >>> float(var(np.array([1.0, 2.0, 3.0, 4.0]), ddof=1))
    1.6666666666666667
    >>> float(var(np.array([1.0, 2.0, 100.0, 4.0]), where=np.array([1, 1, 0, 1], bool)))
    1.5555555555555554
    """
    no_out(out, "var")
    ddof = _ddof(ddof, correction, "var")
    x = _variance_operand(a, dtype, "var")
    axes = normalize_axes(axis, len(shape_of(x)), "var")
    if where is NO_VALUE and mean is NO_VALUE:
        deviation = subtract(x, _mean_of(x, axes, keepdims=True))
        if dtype_of(deviation).kind == "c":
            squares = real(multiply(deviation, conj(deviation)))
        else:
            squares = multiply(deviation, deviation)
        divisor = builtins.max(_count(shape_of(x), axes) - ddof, 0)  # NumPy's: inf or nan at 0
        return divide(sum(squares, axes, keepdims=keepdims), float(divisor))
    total, count = _squared_deviations(x, axes, keepdims, _selection(x, where, "var"), mean,
                                       "var")
    return divide(total, maximum(subtract(count, ddof), 0))     # NumPy's: inf or nan at 0


@implements(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, *,
        where=NO_VALUE, mean=NO_VALUE, correction=NO_VALUE):
    """``np.std``: ``sqrt(var(a, ...))`` (``where=`` and ``mean=`` as :func:`var`'s). At zero
    variance the derivative is taken as 0, as PyTorch's ``std`` does (JAX's is ``nan``); its
    second derivative there is 0 too.

    >>> float(std(np.array([1.0, 3.0])))
    1.0
    """
    no_out(out, "std")
    dtype = dtype_arg(dtype, "std")         # (an error names std, not var)
    normalize_axes(axis, len(shape_of(operand(a, "std"))), "std")
    variance = var(a, axis, dtype, None, ddof, keepdims, where=where, mean=mean,
                   correction=correction)
    return first(bind(sqrt_zero_slope_at_zero, variance))


@implements(np.average)
def average(a, axis=None, weights=None, returned: bool = False, *, keepdims: bool = False):
    """``np.average``: ``sum(a * weights) / sum(weights)`` over ``axis``, differentiable in
    ``a`` and ``weights``; ``returned=True`` also gives the sum of the weights. Weights that
    sum to zero give ``inf``/``nan`` (NumPy raises ``ZeroDivisionError``: it reads the data,
    which a traced value does not have).

    >>> float(average(np.array([1.0, 2.0, 4.0]), weights=np.array([1.0, 1.0, 2.0])))
    2.75
    """
    x = operand(a, "average")
    shape = shape_of(x)
    if weights is None:
        count = _count(shape, normalize_axes(axis, len(shape), "average"))   # (errors say so)
        result = mean(x, axis, keepdims=keepdims)
        if not returned:
            return result
        return result, filled_like(result, count, None, "full_like")
    w = operand(weights, "average")
    if shape_of(w) != shape:
        w = _weights_along(w, shape, axis)
    dtype = result_dtype(x, w)
    if dtype_of(x).kind in "biu":               # NumPy: integer or bool a averages in >= f8
        dtype = np.result_type(dtype, np.float64)
    x, w = as_dtype(x, dtype), as_dtype(w, dtype)
    total = sum(w, axis, keepdims=keepdims)
    result = divide(sum(multiply(x, w), axis, keepdims=keepdims), total)
    if not returned:
        return result
    return result, broadcast_to(total, shape_of(result))


def _weights_along(w, shape: tuple, axis):
    """Weights of another shape than ``a``: 1-d along one ``axis`` (or N-d along a tuple of
    axes, NumPy 2), reshaped to broadcast against ``a``."""
    if axis is None:
        raise TensorTypeError("average: Axis must be specified when shapes of a and weights "
                              "differ.")
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    normalized = tuple(normalize_axis(ax, len(shape), "average") for ax in axes)
    w_shape = shape_of(w)
    if len(w_shape) != len(axes):
        raise TensorTypeError("average: 1D weights expected when shapes of a and weights "
                              "differ.")
    if w_shape != tuple(shape[ax] for ax in normalized):
        raise TensorShapeError("average: Shape of weights must be consistent with shape of a "
                               "along specified axis.")
    order = sorted(range(len(axes)), key=lambda i: normalized[i])
    w = transpose(w, order)
    return reshape(w, tuple(n if i in normalized else 1 for i, n in enumerate(shape)))


@implements(np.ptp)
def ptp(a, axis=None, out=None, keepdims: bool = False):
    """``np.ptp``: ``max - min`` along ``axis``; tied extrema share the derivative evenly (as
    ``max`` and ``min``). Real input only.

    >>> ptp(np.array([[1.0, 5.0], [2.0, 3.0]]), axis=1)
    array([4., 1.])
    """
    no_out(out, "ptp")
    x = operand(a, "ptp")
    _real_only(x, "ptp")
    reduction_axes(axis, len(shape_of(x)), "ptp")            # (an error names ptp)
    if dtype_of(x) == np.bool_:
        raise TensorTypeError("ptp of booleans is not supported, as in NumPy (max - min "
                              "would subtract booleans): convert them first, x.astype(int)")
    return subtract(max(x, axis, keepdims=keepdims), min(x, axis, keepdims=keepdims))


@implements(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=NO_VALUE,
           where=NO_VALUE):
    """``np.nansum``: NaNs count as zero (and get a zero derivative); ``initial`` and
    ``where=`` as :func:`sum`'s.

    >>> float(nansum(np.array([1.0, np.nan, 2.0])))
    3.0
    """
    no_out(out, "nansum")
    x = operand(a, "nansum")
    reduction_axes(axis, len(shape_of(x)), "nansum")         # (an error names nansum)
    if dtype_of(x).kind in "fc":
        x = _choose(_isnan(x), 0, x)
    x = _as_accumulated(x, dtype)
    return sum(x, axis, keepdims=keepdims, initial=initial, where=where)


def _nan_axes(x, axis, fn: str) -> None:
    """Check ``axis`` for ``fn`` (``nanmean``, ``nanvar``, ``nanstd``), so an error names it:
    NumPy reduces floats with ufuncs (axis 0 of a 0-d array taken), other dtypes with
    ``mean``, ``var`` or ``std`` (refused)."""
    ndim = len(shape_of(x))
    if dtype_of(x).kind in "fc":
        reduction_axes(axis, ndim, fn)
    else:
        normalize_axes(axis, ndim, fn)


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims: bool = False, *, where=NO_VALUE):
    """``np.nanmean``: the mean of the entries that are not NaN (NaNs get a zero derivative);
    ``nan`` where a slice is all NaN; ``where=`` takes the selected entries only.

    >>> float(nanmean(np.array([1.0, np.nan, 2.0])))
    1.5
    """
    no_out(out, "nanmean")
    x = operand(a, "nanmean")
    _nan_axes(x, axis, "nanmean")
    if dtype is None and dtype_of(x) == np.float16:      # float32 intermediates, as mean's
        return as_dtype(nanmean(as_dtype(x, np.float32), axis, None, None, keepdims,
                                where=where), np.float16)
    if dtype is not None:
        x = as_dtype(x, dtype)
    if dtype_of(x).kind not in "fc":
        return mean(x, axis, keepdims=keepdims, where=where)
    present = _both(_selection(x, where, "nanmean"), equal(x, x))      # not NaN, selected
    count_dtype = np.finfo(dtype_of(x)).dtype           # complex64 counts in float32
    total = sum(_choose(present, x, 0), axis, keepdims=keepdims)
    return divide(total, sum(as_dtype(present, count_dtype), axis, keepdims=keepdims))


@implements(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, *,
           where=NO_VALUE, mean=NO_VALUE, correction=NO_VALUE):
    """``np.nanvar``: :func:`var` of the entries that are not NaN (NaNs get a zero
    derivative); ``nan`` where a slice has no more than ``ddof`` of them, as NumPy's.

    >>> float(nanvar(np.array([1.0, np.nan, 3.0])))
    1.0
    """
    no_out(out, "nanvar")
    _nan_axes(operand(a, "nanvar"), axis, "nanvar")
    if dtype is None and dtype_of(operand(a, "nanvar")) == np.float16:    # as nanmean's
        return as_dtype(nanvar(as_dtype(operand(a), np.float32), axis, None, None, ddof,
                               keepdims, where=where, mean=mean, correction=correction),
                        np.float16)
    ddof = _ddof(ddof, correction, "nanvar")
    x = _variance_operand(a, dtype, "nanvar")
    if dtype_of(operand(a, "nanvar")).kind not in "fc":      # no NaN to skip
        return var(x, axis, None, None, ddof, keepdims, where=where, mean=mean)
    axes = reduction_axes(axis, len(shape_of(x)), "nanvar")
    present = _both(_selection(x, where, "nanvar"), equal(x, x))
    total, count = _squared_deviations(x, axes, keepdims, present, mean, "nanvar")
    dof = subtract(count, ddof)
    good = greater(dof, 0)
    return _choose(good, divide(total, _choose(good, dof, 1)), np.nan)


@implements(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, *,
           where=NO_VALUE, mean=NO_VALUE, correction=NO_VALUE):
    """``np.nanstd``: ``sqrt(nanvar(a, ...))``, with :func:`std`'s derivative 0 at zero
    variance.

    >>> float(nanstd(np.array([1.0, np.nan, 3.0])))
    1.0
    """
    no_out(out, "nanstd")
    dtype = dtype_arg(dtype, "nanstd")
    _nan_axes(operand(a, "nanstd"), axis, "nanstd")
    variance = nanvar(a, axis, dtype, None, ddof, keepdims, where=where, mean=mean,
                      correction=correction)
    return first(bind(sqrt_zero_slope_at_zero, variance))


@implements(np.nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None,
            where=NO_VALUE):
    """``np.nanprod``: NaNs count as one (and get a zero derivative); otherwise :func:`prod`,
    exact where entries are zero.

    >>> float(nanprod(np.array([2.0, np.nan, 3.0])))
    6.0
    """
    no_out(out, "nanprod")
    dtype = dtype_arg(dtype, "nanprod")
    x = operand(a, "nanprod")
    reduction_axes(axis, len(shape_of(x)), "nanprod")        # (an error names nanprod)
    if dtype_of(x).kind in "fc":
        x = _choose(_isnan(x), 1, x)
    return prod(x, axis, dtype, None, keepdims, initial, where)


def _nan_extremum(reduce, fn: str, fill: float, a, axis, out, keepdims, initial, where_):
    no_out(out, fn)
    x = operand(a, fn)
    reduction_axes(axis, len(shape_of(x)), fn)               # (an error names fn)
    if dtype_of(x).kind not in "fc":
        return reduce(x, axis, keepdims=keepdims, initial=initial, where=where_)
    present = equal(x, x)
    result = reduce(_choose(present, x, fill), axis, keepdims=keepdims, initial=initial,
                    where=where_)
    if initial is not NO_VALUE:           # NumPy's fmax.reduce: the initial value stands
        return result
    return _choose(any(present, axis, keepdims=keepdims), result, np.nan)


@implements(np.nanmax)
def nanmax(a, axis=None, out=None, keepdims: bool = False, initial=NO_VALUE,
           where=NO_VALUE):
    """``np.nanmax``: the maximum of the entries that are not NaN, ``nan`` for an all-NaN
    slice; tied maxima share the derivative (as :func:`max`), NaNs get none.

    >>> nanmax(np.array([[1.0, np.nan], [np.nan, np.nan]]), axis=1)
    array([ 1., nan])
    """
    return _nan_extremum(max, "nanmax", -np.inf, a, axis, out, keepdims, initial, where)


@implements(np.nanmin)
def nanmin(a, axis=None, out=None, keepdims: bool = False, initial=NO_VALUE,
           where=NO_VALUE):
    """``np.nanmin``: the minimum of the entries that are not NaN, ``nan`` for an all-NaN
    slice; tied minima share the derivative (as :func:`min`), NaNs get none.

    >>> float(nanmin(np.array([2.0, np.nan, -1.0])))
    -1.0
    """
    return _nan_extremum(min, "nanmin", np.inf, a, axis, out, keepdims, initial, where)


def _nan_arg_extremum(cls, fn: str, fill: float, a, axis, out, keepdims):
    x = operand(a, fn)
    if dtype_of(x).kind not in "fc":
        return _arg_extremum(cls, fn, x, axis, out, keepdims)
    nan = _isnan(x)
    result = _arg_extremum(cls, fn, where(nan, fill, x), axis, out, keepdims)
    all_nan = all(nan, axis, keepdims=keepdims)
    known = _any_known(all_nan)
    if known is None:                      # under jit or vmap, or lazy (Dask): JAX's -1
        return where(all_nan, -1, result)
    if known:
        raise TensorShapeError(f"{fn}: All-NaN slice encountered")
    return result


@implements(np.nanargmax)
def nanargmax(a, axis=None, out=None, *, keepdims: bool = False):
    """``np.nanargmax``: the index of the first maximum that is not NaN; an all-NaN slice
    raises NumPy's ``ValueError`` (under ``jit`` or ``vmap``, where values cannot be read,
    and on Dask arrays, which stay lazy, its index is ``-1``, as JAX's). Not differentiated.

    >>> nanargmax(np.array([[np.nan, 2.0, 1.0], [0.5, np.nan, 0.7]]), axis=1)
    array([1, 2])
    """
    return _nan_arg_extremum(Argmax, "nanargmax", -np.inf, a, axis, out, keepdims)


@implements(np.nanargmin)
def nanargmin(a, axis=None, out=None, *, keepdims: bool = False):
    """``np.nanargmin``: the index of the first minimum that is not NaN; an all-NaN slice
    as :func:`nanargmax`. Not differentiated.

    >>> int(nanargmin(np.array([np.nan, 2.0, 1.0])))
    2
    """
    return _nan_arg_extremum(Argmin, "nanargmin", np.inf, a, axis, out, keepdims)


@implements(np.nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    """``np.nancumsum``: :func:`cumsum` with NaNs as zero (their derivative is zero).

    >>> nancumsum(np.array([1.0, np.nan, 2.0]))
    array([1., 1., 3.])
    """
    no_out(out, "nancumsum")
    dtype = dtype_arg(dtype, "nancumsum")
    x = operand(a, "nancumsum")
    _scan_operand(x, axis, "nancumsum")                      # (an error names nancumsum)
    if dtype_of(x).kind in "fc":
        x = where(_isnan(x), 0, x)
    return cumsum(x, axis, dtype)


@implements(np.nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    """``np.nancumprod``: :func:`cumprod` with NaNs as one (their derivative is zero), exact
    where entries are zero.

    >>> nancumprod(np.array([2.0, np.nan, 3.0]))
    array([2., 2., 6.])
    """
    no_out(out, "nancumprod")
    dtype = dtype_arg(dtype, "nancumprod")
    x = operand(a, "nancumprod")
    _scan_operand(x, axis, "nancumprod")                     # (an error names nancumprod)
    if dtype_of(x).kind in "fc":
        x = where(_isnan(x), 1, x)
    return cumprod(x, axis, dtype)


# --- sorting and order statistics ------------------------------------------------------------

_SORT_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")


def _sort_kind(kind, order, stable, fn: str):
    if order is not None:
        raise TensorNotSupportedError(f"{fn}: order= (sorting structured arrays by field) is "
                                      "not supported")
    if kind not in _SORT_KINDS:
        raise TensorShapeError(f"{fn}: sort kind must be one of {_SORT_KINDS[1:]}, got {kind!r}")
    if stable is not None and kind is not None:
        raise TensorShapeError(f"{fn}: `kind` and `stable` parameters can't be provided at the "
                               "same time. Use only one of them.")
    return "stable" if stable else kind


def _sort_operand(a, axis, fn: str):
    x = operand(a, fn)
    # NumPy's argsort and argpartition take a 0-d array as a 1-d one (sort, partition do not)
    if axis is None or (fn in ("argsort", "argpartition") and not shape_of(x)):
        return reshape(x, (-1,)), 0 if axis is None else normalize_axis(axis, 1, fn)
    return x, normalize_axis(axis, len(shape_of(x)), fn)


@implements(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """``np.sort`` (``axis=None``: the flattened array). The derivative follows the stable
    sort permutation: tied entries pass their tangents on in their original order. Real
    input only (complex raises ``TensorTypeError``).

    >>> sort(np.array([[3.0, 1.0], [0.0, 2.0]]), axis=0)
    array([[0., 1.],
           [3., 2.]])
    """
    _sort_kind(kind, order, stable, "sort")
    x, axis = _sort_operand(a, axis, "sort")
    _real_only(x, "sort")
    return first(bind(Sort(axis, shape_of(x), dtype_of(x).name), x))


@implements(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """``np.argsort`` (``axis=None``: of the flattened array): integer indices, not
    differentiated; ``kind`` and ``stable`` as in NumPy.

    >>> argsort(np.array([3.0, 1.0, 2.0]))
    array([1, 2, 0])
    """
    kind = _sort_kind(kind, order, stable, "argsort")
    x, axis = _sort_operand(a, axis, "argsort")
    return first(bind(Argsort(axis, kind), x))


@implements(np.sort_complex)
def sort_complex(a):
    """``np.sort_complex``: ``a`` sorted along its last axis by real part, then imaginary
    part, as a complex array (complex64 for small integers, else complex128 or ``a``'s own
    complex dtype). The derivative follows the sort permutation (ties: original order).

    >>> sort_complex(np.array([1 + 2j, 1 - 1j, 0 + 5j]))
    array([0.+5.j, 1.-1.j, 1.+2.j])
    """
    a = operand(a, "sort_complex")
    if not shape_of(a):
        raise TensorShapeError("sort_complex: a must be at least 1-d (it sorts along axis -1)")
    if dtype_of(a).kind != "c":
        sorted_ = sort(a, axis=-1)
        char = dtype_of(a).char
        return as_dtype(sorted_, "F" if char in "bhBH" else "G" if char == "g" else "D")
    order = lexsort((imag(a), real(a)), axis=-1)
    return _take_along(a, order, len(shape_of(a)) - 1)


@implements(np.lexsort)
def lexsort(keys, axis: int = -1):
    """``np.lexsort``: the indices sorting by the last key, ties broken by the one before,
    and so on (stable sorts from the first key to the last, so ``jit`` and ``vmap`` take
    traced keys); integer indices, not differentiated.

    >>> lexsort((np.array([1.0, 0.0, 2.0]), np.array([1.0, 1.0, 0.0])))
    array([2, 1, 0])
    """
    if isinstance(keys, (list, tuple)):
        keys = [operand(k, "lexsort") for k in keys]
    else:
        keys = operand(keys, "lexsort")
        keys = [getitem(keys, i) for i in range(shape_of(keys)[0])] if shape_of(keys) else []
    if not keys:
        raise TensorShapeError("lexsort: need sequence of keys with len > 0")
    shape = shape_of(keys[0])
    if builtins.any(shape_of(k) != shape for k in keys):
        raise TensorShapeError(f"lexsort: all keys need to be the same shape, got "
                               f"{[shape_of(k) for k in keys]}")
    if not shape:
        raise TensorShapeError("lexsort: the keys must be at least 1-d (NumPy's axis -1)")
    axis = normalize_axis(axis, len(shape), "lexsort")
    for k in keys:
        _real_only(k, "lexsort")
    order = None
    for key in keys:                    # least significant first: each stable sort keeps ties
        permuted = key if order is None else _take_along(key, order, axis)
        step = argsort(permuted, axis=axis, kind="stable")
        order = step if order is None else _take_along(order, step, axis)
    return order


@implements(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    """``np.searchsorted``: where ``v``'s entries would go in the sorted 1-d ``a`` to keep it
    sorted. Integer positions, not differentiated: NumPy's own for NumPy values it can read;
    for traced ones (``jit``, ``vmap``) and other libraries' arrays a binary search by ops
    (``ceil(log2(len(a) + 1))`` gathers and comparisons over ``v``: time and memory grow as
    ``len(v) * log(len(a))``; a tiny one compares all pairs), in NumPy's order (NaN last,
    ``-0.0 == 0.0``).

    >>> searchsorted(np.array([1.0, 2.0, 2.0, 3.0]), np.array([2.0, 5.0]), side="right")
    array([3, 4])
    """
    if side not in ("left", "right"):
        raise TensorShapeError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if len(shape_of(operand(a, "searchsorted"))) != 1:      # (NumPy's own: "object too deep")
        raise TensorShapeError(f"searchsorted: a must be 1-dimensional, got shape "
                               f"{shape_of(operand(a, 'searchsorted'))}")
    if sorter is not None:
        sorter = _checked_sorter(sorter, shape_of(operand(a))[0])
    given = (a, v, sorter)
    known = [data_if_known(x) if isinstance(x, Frontend) else x for x in given]
    if builtins.all((k is not None or x is None) and library_of(k) is NUMPY
                    for k, x in zip(known, given)):
        found = np.searchsorted(known[0], known[1], side=side, sorter=known[2])
        tensor = next((x for x in given if isinstance(x, Frontend)), None)   # (eager or grad's)
        return found if tensor is None else constant_in_library_of(np.asarray(found), tensor)
    a, v = operand(a, "searchsorted"), operand(v, "searchsorted")
    if "c" in (dtype_of(a).kind, dtype_of(v).kind):
        raise TensorNotSupportedError("searchsorted: complex values are not supported under "
                                      "jit or vmap")
    if sorter is not None:
        a = take(a, sorter)
    return sorted_positions(stop_gradient(a), stop_gradient(v), side)


def _checked_sorter(sorter, n: int):
    """:func:`searchsorted`'s ``sorter``, checked as NumPy checks it (on every route: under
    ``jit`` a ``take`` by a bad one would give an answer): 1-d, integers, ``n`` entries, each
    in ``[0, n)`` where its values are known.

    >>> _checked_sorter([2, 0, 1], 3)
    array([2, 0, 1])
    """
    sorter = operand(sorter, "searchsorted")
    if shape_of(sorter) != (n,):
        raise TensorShapeError(f"searchsorted: sorter must be 1-d with one entry per entry of "
                               f"a ({n}), got shape {shape_of(sorter)}")
    if dtype_of(sorter).kind not in "iu":
        raise TensorTypeError(f"searchsorted: sorter must hold integers, got {dtype_of(sorter)}")
    known = data_if_known(sorter) if isinstance(sorter, Frontend) else sorter
    if known is not None and n and not bool(((known >= 0) & (known < n)).all()):
        raise TensorIndexError(f"searchsorted: sorter index out of range: each must be in "
                               f"[0, {n})")
    return sorter


@implements(np.isin)
def isin(element, test_elements, assume_unique: bool = False, invert: bool = False, *,
         kind=None):
    """``np.isin``: whether each entry of ``element`` equals some entry of ``test_elements``
    (NaN equals nothing), by comparisons, so ``jit`` and ``vmap`` take traced arguments; a
    boolean result, not differentiated.

    >>> isin(np.array([1.0, 2.0, np.nan]), [2.0, np.nan])
    array([False,  True, False])
    """
    element, tests = operand(element, "isin"), operand(test_elements, "isin")
    shape = shape_of(element)
    hits = any(equal(reshape(element, shape + (1,)),
                     reshape(tests, (1,) * len(shape) + (-1,))), axis=-1)
    return logical_not(hits) if invert else hits


class UniqueAllResult(NamedTuple):
    """:func:`unique_all`'s result (NumPy's fields)."""

    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class UniqueCountsResult(NamedTuple):
    """:func:`unique_counts`'s result (NumPy's fields)."""

    values: Any
    counts: Any


class UniqueInverseResult(NamedTuple):
    """:func:`unique_inverse`'s result (NumPy's fields)."""

    values: Any
    inverse_indices: Any


def _read_for_unique(x, fn: str):
    """``x`` as an operand and its values on the host: the result's shape depends on them
    (a ``ConcretizationError`` under ``jit`` and ``vmap``)."""
    x = operand(x, fn)
    return x, to_host(data_of(x, f"{fn}: reading the values (the result's shape depends on "
                                 "them)"))


@implements(np.unique)
def unique(ar, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis=None, *, equal_nan: bool = True,
           sorted: bool = True):
    """``np.unique``: the distinct values (slices along ``axis``), read now (under ``jit``
    or ``vmap``: ``ConcretizationError``), and NumPy's indices, inverse and counts. The
    values are differentiable: each one's derivative goes to its first occurrence (as
    JAX's); the indices and counts are not.

    >>> unique(np.array([3.0, 1.0, 3.0]), return_counts=True)
    (array([1., 3.]), array([1, 2]))
    """
    x, data = _read_for_unique(ar, "unique")
    if axis is None:
        x = reshape(x, (-1,))
    else:
        axis = normalize_axis(axis, len(shape_of(x)), "unique")
    try:
        found = np.unique(data, return_index=True, return_inverse=return_inverse,
                          return_counts=return_counts, axis=axis, equal_nan=equal_nan,
                          sorted=sorted)
    except (TypeError, ValueError) as error:
        raise TensorTypeError(f"unique: {error}") from None
    values = take(x, found[1], axis=0 if axis is None else axis)
    extra = [constant_in_library_of(found[1], x)] if return_index else []
    extra += [constant_in_library_of(f, x) for f in found[2:]]
    return (values, *extra) if extra else values


def _unique_all(x, fn: str):
    """``np.unique_all`` of ``x``'s values (read now) with the values taken from ``x``."""
    x, data = _read_for_unique(x, fn)
    found = np.unique_all(data)
    values = take(reshape(x, (-1,)), found.indices)
    return values, *(constant_in_library_of(f, x) for f in found[1:])


@implements(np.unique_values)
def unique_values(x, /):
    """``np.unique_values`` (the Array API's :func:`unique`, NaNs kept apart), read now; the
    values are differentiable, each at its first occurrence.

    >>> unique_values(np.array([2.0, 1.0, 2.0]))
    array([1., 2.])
    """
    return _unique_all(x, "unique_values")[0]


@implements(np.unique_counts)
def unique_counts(x, /) -> UniqueCountsResult:
    """``np.unique_counts``: the distinct values (differentiable) and their counts.

    >>> unique_counts(np.array([2.0, 1.0, 2.0])).counts
    array([1, 2])
    """
    values, _, _, counts = _unique_all(x, "unique_counts")
    return UniqueCountsResult(values, counts)


@implements(np.unique_inverse)
def unique_inverse(x, /) -> UniqueInverseResult:
    """``np.unique_inverse``: the distinct values (differentiable) and where each entry of
    ``x`` is among them (of ``x``'s shape).

    >>> unique_inverse(np.array([2.0, 1.0, 2.0])).inverse_indices
    array([1, 0, 1])
    """
    values, _, inverse, _ = _unique_all(x, "unique_inverse")
    return UniqueInverseResult(values, inverse)


@implements(np.unique_all)
def unique_all(x, /) -> UniqueAllResult:
    """``np.unique_all``: the distinct values (differentiable), their first indices, the
    inverse and the counts.

    >>> unique_all(np.array([2.0, 1.0, 2.0])).indices
    array([1, 0])
    """
    return UniqueAllResult(*_unique_all(x, "unique_all"))


def _set_values(values: np.ndarray, arrays: list, fn: str):
    """The entries ``values`` (distinct, found in ``arrays``' values) taken from ``arrays``
    flattened and concatenated, each at its first occurrence: the derivative goes there."""
    operands, datas = zip(*(_read_for_unique(a, fn) for a in arrays))
    source = concatenate([reshape(x, (-1,)) for x in operands])
    distinct, first_at = np.unique(np.concatenate([d.reshape(-1) for d in datas]),
                                   return_index=True)
    return take(source, first_at[np.searchsorted(distinct, values)].astype(np.intp))


def _set_data(arrays, fn: str) -> list:
    return [to_host(data_of(operand(a, fn), f"{fn}: reading the values (the result's shape "
                                            "depends on them)")) for a in arrays]


@implements(np.union1d)
def union1d(ar1, ar2):
    """``np.union1d``: the sorted distinct values of both arrays, read now; each value's
    derivative goes to its first occurrence (in ``ar1``, then ``ar2``).

    >>> union1d(np.array([3.0, 1.0]), np.array([2.0, 3.0]))
    array([1., 2., 3.])
    """
    return _set_values(np.union1d(*_set_data((ar1, ar2), "union1d")), [ar1, ar2], "union1d")


@implements(np.intersect1d)
def intersect1d(ar1, ar2, assume_unique: bool = False, return_indices: bool = False):
    """``np.intersect1d``: the sorted values in both arrays, read now, differentiated in
    ``ar1`` (each value's first occurrence there); NumPy's indices with ``return_indices``.

    >>> intersect1d(np.array([3.0, 1.0, 2.0]), np.array([2.0, 3.0, 5.0]))
    array([2., 3.])
    """
    found = np.intersect1d(*_set_data((ar1, ar2), "intersect1d"), assume_unique=assume_unique,
                           return_indices=True)
    values = take(reshape(operand(ar1, "intersect1d"), (-1,)), found[1])
    if not return_indices:
        return values
    return values, *(constant_in_library_of(i, operand(ar1, "intersect1d")) for i in found[1:])


@implements(np.setdiff1d)
def setdiff1d(ar1, ar2, assume_unique: bool = False):
    """``np.setdiff1d``: the sorted distinct values of ``ar1`` not in ``ar2`` (with
    ``assume_unique``, ``ar1``'s entries not in ``ar2``, in order), read now; differentiated
    in ``ar1`` (each value's first occurrence).

    >>> setdiff1d(np.array([3.0, 1.0, 2.0, 1.0]), np.array([2.0]))
    array([1., 3.])
    """
    d1, d2 = _set_data((ar1, ar2), "setdiff1d")
    if assume_unique:
        keep = np.flatnonzero(np.isin(d1.reshape(-1), d2, invert=True))
        return take(reshape(operand(ar1, "setdiff1d"), (-1,)), keep)
    return _set_values(np.setdiff1d(d1, d2), [ar1], "setdiff1d")


@implements(np.setxor1d)
def setxor1d(ar1, ar2, assume_unique: bool = False):
    """``np.setxor1d``: the sorted values in exactly one of the arrays, read now; each
    value's derivative goes to its first occurrence.

    >>> setxor1d(np.array([3.0, 1.0]), np.array([2.0, 3.0]))
    array([1., 2.])
    """
    values = np.setxor1d(*_set_data((ar1, ar2), "setxor1d"), assume_unique=assume_unique)
    return _set_values(values, [ar1, ar2], "setxor1d")


@implements(np.bincount)
def bincount(x, /, weights=None, minlength: int = 0):
    """``np.bincount``: the count (the sum of ``weights``, in float64) of each value of the
    non-negative integers ``x``, read now (the result's length depends on them: under
    ``jit`` or ``vmap``, ``ConcretizationError``). Differentiable in ``weights``.

    >>> bincount(np.array([0, 2, 2]), weights=np.array([0.5, 1.0, 2.0]))
    array([0.5, 0. , 3. ])
    """
    x, data = _read_for_unique(x, "bincount")
    try:
        counts = np.bincount(data, minlength=minlength)
    except TypeError as error:                   # x of floats
        raise TensorTypeError(f"bincount: {error}") from None
    except ValueError as error:                  # negative entries, x not 1-d
        raise TensorIndexError(f"bincount: {error}") from None
    if weights is None:
        return constant_in_library_of(counts, x)
    weights = operand(weights, "bincount")
    if shape_of(weights) != shape_of(data):
        raise TensorShapeError(f"bincount: the weights and list don't have the same length "
                               f"({shape_of(weights)} and {shape_of(data)})")
    if dtype_of(weights).kind == "c":
        raise TensorTypeError("bincount: complex weights are not supported (NumPy casts "
                              "them to float64)")
    size = counts.shape[0]
    return first(bind(ScatterAdd(0, (size,), shape_of(data)),
                      as_dtype(weights, np.float64), data.astype(np.intp)))


def _partition_operand(a, kth, axis, kind, order, fn: str):
    """The operand (flattened for ``axis=None``), its axis, and ``kth`` as non-negative
    positions along it (static: read now)."""
    if order is not None:
        raise TensorNotSupportedError(f"{fn}: order= (partitioning structured arrays by field) "
                                      "is not supported")
    if kind != "introselect":
        raise TensorShapeError(f"{fn}: select kind must be 'introselect', got {kind!r}")
    x, axis = _sort_operand(a, axis, fn)
    n = shape_of(x)[axis]
    positions = np.asarray(data_of(operand(kth, fn), f"{fn}: reading kth"))
    if positions.dtype.kind not in "iu":
        raise TensorTypeError(f"{fn}: Partition index must be integer, got {positions.dtype}")
    normalized = []
    for k in positions.reshape(-1).tolist():
        if not -n <= k < n:
            raise TensorShapeError(f"{fn}: kth(={k}) out of bounds ({n})")
        normalized.append(k % n)
    return x, axis, tuple(normalized)


@implements(np.partition)
def partition(a, kth, axis=-1, kind: str = "introselect", order=None):
    """``np.partition``: NumPy's exact output (the ``kth`` entries in sorted position, smaller
    ones before, larger after, each side in NumPy's order). The derivative follows the
    permutation that produces it (tied values: matched in their original order); ``kth`` is
    static. Under ``jit`` the permutation is computed when the function runs.

    >>> x = np.random.default_rng(0).permutation(40) * 0.5
    >>> bool(np.array_equal(partition(x, [5, 20]), np.partition(x, [5, 20])))
    True
    >>> partition(np.array([3.0, 4.0, 2.0, 1.0]), 2)
    array([1., 2., 3., 4.])
    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda x: partition(x, 2)[2])(np.array([3.0, 4.0, 2.0, 1.0]))
    array([1., 0., 0., 0.])
    """
    x, axis, kth = _partition_operand(a, kth, axis, kind, order, "partition")
    order = first(bind(PartitionOrder(axis, kth), x))
    return _take_along(x, order, axis)


@implements(np.argpartition)
def argpartition(a, kth, axis=-1, kind: str = "introselect", order=None):
    """``np.argpartition`` (``axis=None``: of the flattened array): NumPy's integer indices,
    not differentiated; ``kth`` is static.

    >>> argpartition(np.array([3.0, 4.0, 2.0, 1.0]), 2)
    array([3, 2, 0, 1])
    """
    x, axis, kth = _partition_operand(a, kth, axis, kind, order, "argpartition")
    return first(bind(Argpartition(axis, kth), x))


def _arg_extremum(cls, fn: str, a, axis, out, keepdims):
    no_out(out, fn)
    x = operand(a, fn)
    shape = shape_of(x)
    flat = axis is None or not shape
    if flat:             # (as NumPy, a 0-d array is one of 1-d: axis 0 or -1 of it)
        x, index_axis = reshape(x, (-1,)), 0 if axis is None else normalize_axis(axis, 1, fn)
    else:
        index_axis = normalize_axis(axis, len(shape), fn)
    if shape_of(x)[index_axis] == 0:
        raise TensorShapeError(f"{fn}: attempt to get {fn} of an empty sequence")
    result = first(bind(cls(index_axis), x))
    if keepdims:
        result = reshape(result, (1,) * len(shape) if flat else _kept_shape(shape, (index_axis,)))
    return result


@implements(np.argmax)
def argmax(a, axis=None, out=None, *, keepdims: bool = False):
    """``np.argmax``: integer indices (the first of tied maxima), not differentiated.

    >>> argmax(np.array([[1.0, 5.0], [7.0, 2.0]]), axis=1)
    array([1, 0])
    """
    return _arg_extremum(Argmax, "argmax", a, axis, out, keepdims)


@implements(np.argmin)
def argmin(a, axis=None, out=None, *, keepdims: bool = False):
    """``np.argmin``: integer indices (the first of tied minima), not differentiated.

    >>> argmin(np.array([[1.0, 5.0], [7.0, 2.0]]), axis=1)
    array([0, 1])
    """
    return _arg_extremum(Argmin, "argmin", a, axis, out, keepdims)


def _truth(a, axis, keepdims: bool, fn: str, count_true: bool, where=NO_VALUE):
    """Counts the true (``count_true``) or false elements (those ``where`` selects): a count,
    unlike ``max``/``min``, is defined on an empty slice (``all`` is then ``True``, ``any``
    ``False``)."""
    a = operand(a, fn)
    reduction_axes(axis, len(shape_of(a)), fn)               # (an error names fn)
    nonzero = not_equal(a, 0) if dtype_of(a) != np.bool_ else a
    indicator = as_dtype(nonzero if count_true else equal(nonzero, False), np.intp)
    counted = sum(masked(indicator, where, 0, fn), axis=axis, keepdims=keepdims)
    return not_equal(counted, 0) if count_true else equal(counted, 0)


@implements(np.all)
def all(a, axis=None, out=None, keepdims: bool = False, *, where=NO_VALUE):
    """``np.all``: whether every element (of those ``where=`` selects) is nonzero; a boolean
    result, not differentiated.

    >>> all(np.array([[1.0, 0.0], [2.0, 3.0]]), axis=1)
    array([False,  True])
    """
    no_out(out, "all")
    return _truth(a, axis, keepdims, "all", count_true=False, where=where)


@implements(np.any)
def any(a, axis=None, out=None, keepdims: bool = False, *, where=NO_VALUE):
    """``np.any``: whether some element (of those ``where=`` selects) is nonzero; a boolean
    result, not differentiated.

    >>> any(np.array([[1.0, 0.0], [0.0, 0.0]]), axis=1)
    array([ True, False])
    """
    no_out(out, "any")
    return _truth(a, axis, keepdims, "any", count_true=True, where=where)


_QUANTILE_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _order_statistics(q: np.ndarray, n: int, method: str):
    """For quantiles ``q`` of ``n`` sorted values: the two neighbouring positions and the
    weight of the upper one, as NumPy's ``method`` defines them."""
    position = q * (n - 1)
    below = np.floor(position).astype(np.intp)
    above = np.minimum(below + 1, n - 1)
    weight = position - below
    if method == "lower":
        above, weight = below, np.zeros_like(weight)
    elif method == "higher":
        below = above = np.ceil(position).astype(np.intp)
        weight = np.zeros_like(weight)
    elif method == "nearest":
        below = above = np.around(position).astype(np.intp)
        weight = np.zeros_like(weight)
    elif method == "midpoint":
        weight = np.where(weight == 0, 0.0, 0.5)
    return below, above, weight


def _traced_placement(position, last, method: str) -> tuple:
    """``(below, above, weight)`` for quantile positions ``position`` whose values are not
    known, the last index ``last``, as :func:`_order_statistics` places them by ``method``
    (``weight`` ``None``: the entry at ``below`` alone)."""
    below = floor(position)
    above = minimum(add(below, 1.0), last)
    weight = None
    if method == "linear":
        weight = subtract(position, below)
    elif method == "midpoint":
        weight = where(equal(position, below), 0.0, 0.5)
    elif method == "higher":
        below = ceil(position)
    elif method == "nearest":
        below = round_(position)
    return below, above, weight


def _traced_order_statistics(ordered, fractions, method: str, dtype):
    """The quantiles ``fractions`` (traced, 1-d) of each sorted row of ``ordered``, placed as
    :func:`_order_statistics` places them; ``nan`` for a fraction out of ``[0, 1]`` (NumPy
    raises, which a traced one cannot; JAX clamps, which would hide the error)."""
    n = shape_of(ordered)[-1]
    below, above, weight = _traced_placement(multiply(fractions, float(n - 1)), float(n - 1),
                                             method)

    def at(p):                  # ordered[..., p], p clipped into range
        return take(ordered, as_dtype(clip(p, 0, n - 1), np.intp), axis=-1)

    result = at(below)
    if weight is not None:
        result = add(result, multiply(subtract(at(above), result), as_dtype(weight, dtype)))
    if dtype.kind != "f":
        return result
    return where(logical_or(less(fractions, 0.0), greater(fractions, 1.0)), np.nan, result)


def _nan_order_statistics(grouped, ordered, fractions: np.ndarray, method: str, dtype):
    """The quantiles ``fractions`` of the entries that are not NaN in each row of ``grouped``
    (``ordered``: the rows sorted, NaNs last), ``nan`` for a row of NaNs. Where they are is
    read from each row's count of numbers, data that ``jit`` and ``vmap`` trace; the
    derivative goes to the order statistics read, as :func:`quantile`'s."""
    n = shape_of(grouped)[-1]
    count = sum(as_dtype(equal(grouped, grouped), np.intp), -1, keepdims=True)
    last = as_dtype(subtract(count, 1), np.float64)
    below, above, weight = _traced_placement(multiply(last, fractions), last, method)

    def take_rows(p):           # ordered[..., p] by row, p clipped into range
        return _take_along(ordered, clip(p, 0, n - 1), len(shape_of(ordered)) - 1)

    result = take_rows(below)
    if weight is not None:
        high = take_rows(above)
        result = add(result, multiply(subtract(high, result), as_dtype(weight, dtype)))
    return where(equal(count, 0), np.nan, result)


def _quantile(a, q, axis, method: str, keepdims: bool, fn: str, scale: float,
              skip_nan: bool = False):
    if method not in _QUANTILE_METHODS:
        raise TensorNotSupportedError(f"{fn}: method {method!r} is not supported; use one of "
                                      f"{', '.join(_QUANTILE_METHODS)}")
    x = operand(a, fn)
    _real_only(x, fn)
    known = data_if_known(q) if isinstance(q, Frontend) else constant_values(q, f"{fn}: q")
    # q is data where its values are not known (jit, vmap) or it is differentiated
    traced_q = isinstance(q, Frontend) and (known is None or carries_gradient(q))
    q_data = np.zeros(shape_of(q), dtype_of(q)) if known is None else np.asarray(known)
    if q_data.dtype.kind not in "biuf":
        raise TensorTypeError(f"{fn}: q must be real numbers, got dtype {q_data.dtype}")
    fractions = divide(reshape(as_dtype(q, np.float64), (-1,)), scale) if traced_q else \
        q_data.astype(np.float64) / scale
    if known is not None and not ((q_data / scale >= 0) & (q_data / scale <= 1)).all():
        kind = "Percentiles must be in the range [0, 100]" if scale == 100 else \
            "Quantiles must be in the range [0, 1]"
        raise TensorShapeError(f"{fn}: {kind}")
    if method in ("lower", "higher", "nearest"):     # values of a: its dtype, as NumPy's
        dtype = dtype_of(x)
    elif fn in ("median", "nanmedian"):
        dtype = float_dtype(x)
    else:
        dtype = result_dtype(float_dtype(x).type(0), q if is_python_scalar(q) else q_data)
    x = as_dtype(x, dtype)
    shape = shape_of(x)
    axes = normalize_axes(axis, len(shape), fn)
    n = _count(shape, axes)
    kept = tuple(a for a in range(len(shape)) if a not in axes)
    kept_shape = tuple(shape[a] for a in kept)
    out_shape = q_data.shape + (_kept_shape(shape, axes) if keepdims else kept_shape)
    skip_nan = skip_nan and dtype_of(x).kind == "f"         # (integers hold no NaN)
    if n == 0:
        if fn not in ("median", "nanmedian"):
            raise TensorShapeError(f"{fn}: cannot take quantiles of an empty axis (shape "
                                   f"{shape}, axis {axis})")
        return reshape(add(sum(x, axes), np.nan), out_shape)       # NumPy's median: nan
    # the reduced axes last, as one axis of n values, sorted
    grouped = reshape(transpose(x, kept + axes), kept_shape + (n,))
    ordered = sort(grouped, axis=-1)
    if skip_nan:
        result = _nan_order_statistics(grouped, ordered, fractions.ravel(), method, dtype)
        result = transpose(result, (len(kept),) + tuple(range(len(kept))))
        return reshape(result, out_shape)
    if traced_q:
        result = _traced_order_statistics(ordered, fractions, method, dtype)
    else:
        below, above, weight = _order_statistics(fractions.ravel(), n, method)
        low = take(ordered, below, axis=-1)
        result = low
        if weight.any():
            high = take(ordered, above, axis=-1)
            result = add(low, multiply(subtract(high, low), weight.astype(dtype)))
    if dtype.kind == "f":          # NaN sorts last: a slice holding one gives NaN, as in NumPy
        last = take(ordered, np.array([n - 1]), axis=-1)
        result = where(_isnan(last), np.nan, result)
    # (kept..., q) -> (q..., kept...)
    result = transpose(result, (len(kept),) + tuple(range(len(kept))))
    return reshape(result, out_shape)


@implements(np.quantile)
def quantile(a, q, axis=None, out=None, overwrite_input: bool = False, method: str = "linear",
             keepdims: bool = False):
    """``np.quantile`` with ``method`` ``"linear"`` (the default), ``"lower"``, ``"higher"``,
    ``"nearest"`` or ``"midpoint"``, through a sort: the derivative goes to the order
    statistics the quantile reads (tied values: by the stable sort order), weighted as
    they are interpolated; in ``q`` as the interpolation is (zero for the methods that pick
    one order statistic). Under ``jit`` and ``vmap`` ``q`` is data: one out of range gives
    ``nan`` there, not an error. Real input only.

    >>> quantile(np.array([1.0, 2.0, 4.0, 8.0]), [0.5, 1.0])
    array([3., 8.])
    """
    no_out(out, "quantile")
    return _quantile(a, q, axis, method, keepdims, "quantile", 1.0)


@implements(np.percentile)
def percentile(a, q, axis=None, out=None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False):
    """``np.percentile``: :func:`quantile` of ``q / 100``, with its derivative convention.

    >>> percentile(np.array([1.0, 2.0, 4.0, 8.0]), 50)
    array(3.)
    """
    no_out(out, "percentile")
    return _quantile(a, q, axis, method, keepdims, "percentile", 100.0)


@implements(np.median)
def median(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """``np.median``: the middle order statistic, or the mean of the two middle ones. The
    derivative goes to those entries (tied values: by the stable sort order); ``nan`` for
    a slice that holds a NaN. Real input only.

    >>> median(np.array([[1.0, 7.0, 3.0], [4.0, 2.0, 0.0]]), axis=1)
    array([3., 2.])
    """
    no_out(out, "median")
    return _quantile(a, 0.5, axis, "midpoint", keepdims, "median", 1.0)


@implements(np.nanquantile)
def nanquantile(a, q, axis=None, out=None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, *, weights=None):
    """``np.nanquantile``: :func:`quantile` of the entries that are not NaN (``nan`` for an
    all-NaN slice), with its methods and derivative convention; NaNs get a zero derivative.
    Which entries are read depends on each slice's count of numbers, computed as data, so
    ``jit`` and ``vmap`` apply.

    >>> nanquantile(np.array([[1.0, np.nan, 3.0, 2.0], [np.nan] * 4]), 0.5, axis=1)
    array([ 2., nan])
    """
    no_out(out, "nanquantile")
    if weights is not None:
        raise TensorNotSupportedError("nanquantile: weights= is not supported")
    return _quantile(a, q, axis, method, keepdims, "nanquantile", 1.0, skip_nan=True)


@implements(np.nanpercentile)
def nanpercentile(a, q, axis=None, out=None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, *, weights=None):
    """``np.nanpercentile``: :func:`nanquantile` of ``q / 100``.

    >>> float(nanpercentile(np.array([1.0, np.nan, 3.0]), 25))
    1.5
    """
    no_out(out, "nanpercentile")
    if weights is not None:
        raise TensorNotSupportedError("nanpercentile: weights= is not supported")
    return _quantile(a, q, axis, method, keepdims, "nanpercentile", 100.0, skip_nan=True)


@implements(np.nanmedian)
def nanmedian(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """``np.nanmedian``: :func:`median` of the entries that are not NaN (``nan`` for an
    all-NaN slice); NaNs get a zero derivative.

    >>> nanmedian(np.array([[1.0, np.nan, 7.0], [4.0, 2.0, np.nan]]), axis=1)
    array([4., 3.])
    """
    no_out(out, "nanmedian")
    return _quantile(a, 0.5, axis, "midpoint", keepdims, "nanmedian", 1.0, skip_nan=True)


def _variables(m, rowvar: bool, fn: str):
    """``m`` as a 2-d array of variables by observations (NumPy's ``cov`` layout)."""
    x = operand(m, fn)
    shape = shape_of(x)
    if len(shape) > 2:
        raise TensorShapeError(f"{fn}: m has more than 2 dimensions (shape {shape})")
    if len(shape) < 2:
        x = reshape(x, (1, -1))
    elif not rowvar and shape[0] != 1:
        x = transpose(x)
    return x


@implements(np.cov)
def cov(m, y=None, rowvar: bool = True, bias: bool = False, ddof=None, fweights=None,
        aweights=None, *, dtype=None):
    """``np.cov`` (without weights): ``xc @ conj(xc).T / (n - ddof)`` for the centred
    observations ``xc``; differentiable in ``m`` and ``y``.

    >>> cov(np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]])).tolist()
    [[1.0, -1.0], [-1.0, 1.0]]
    """
    if fweights is not None or aweights is not None:
        raise TensorNotSupportedError("cov: fweights and aweights are not supported")
    x = _variables(m, rowvar, "cov")
    if y is not None:
        x = concatenate([x, _variables(y, rowvar, "cov")], axis=0)
    x = as_dtype(x, dtype if dtype is not None else np.result_type(dtype_of(x), np.float64))
    n = shape_of(x)[1]
    ddof = (0 if bias else 1) if ddof is None else ddof
    centred = subtract(x, mean(x, axis=1, keepdims=True))
    c = divide(matmul(centred, conj(transpose(centred))), float(builtins.max(n - ddof, 0)))
    return squeeze(c)


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar: bool = True, *, dtype=None):
    """``np.corrcoef``: the covariance scaled by the standard deviations (real parts clipped
    to [-1, 1] as NumPy does); differentiable in ``x`` and ``y``.

    >>> corrcoef(np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, 5.0])).round(12).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if len(shape_of(c)) == 0:
        return divide(c, c)
    stddev = sqrt(real(diagonal(c)))
    c = divide(divide(c, reshape(stddev, (-1, 1))), reshape(stddev, (1, -1)))
    return clip(c, -1.0, 1.0) if dtype_of(c).kind == "f" else c


@implements(np.trapezoid)
def trapezoid(y, x=None, dx: float = 1.0, axis: int = -1):
    """``np.trapezoid``: the trapezoidal rule along ``axis``, differentiable in ``y`` and in
    the sample points ``x``.

    >>> float(trapezoid(np.array([1.0, 2.0, 3.0]), x=np.array([0.0, 1.0, 3.0])))
    6.5
    """
    y = operand(y, "trapezoid")
    axis = normalize_axis(axis, len(shape_of(y)), "trapezoid")
    n = shape_of(y)[axis]
    head = (slice(None),) * axis
    upper, lower = getitem(y, head + (slice(1, None),)), getitem(y, head + (slice(None, -1),))
    if x is None:
        widths = dx
    else:
        x = operand(x, "trapezoid")
        if len(shape_of(x)) == 1:
            widths = subtract(getitem(x, slice(1, None)), getitem(x, slice(None, -1)))
            widths = reshape(widths, (n - 1,) + (1,) * (len(shape_of(y)) - axis - 1))
        else:
            widths = subtract(getitem(x, head + (slice(1, None),)),
                              getitem(x, head + (slice(None, -1),)))
    return sum(multiply(multiply(add(upper, lower), 0.5), widths), axis)
