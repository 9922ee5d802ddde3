"""Reductions, scans, sorting and statistics with NumPy's names.

Each follows NumPy's signature, including ``axis`` (an int, a tuple, ``None``,
negative values), ``keepdims``, ``ddof`` and ``dtype`` where NumPy has them,
and works on arrays, ``Tensor``s and traced values (``jit`` included). A
function's docstring states its gradient convention where one applies.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.prod(np.array([2.0, 3.0]))
array(6.)
>>> tnp.grad(tnp.prod)(np.array([2.0, 0.0, 3.0]))       # exact with zeros
array([0., 6., 0.])
"""

from __future__ import annotations

import builtins
import numbers

import numpy as np

from primitives.tensor.api import (_NO_VALUE, _axes, _axis, _first, _float_dtype,
                                   _is_python_scalar, _no_out, _operand, add, astype,
                                   broadcast_to, clip, concatenate, conj, divide, equal,
                                   getitem, matmul, max, mean, min, multiply, not_equal, real,
                                   reshape, result_dtype, sqrt, squeeze, subtract, sum, take,
                                   transpose, where)
from primitives.tensor.creation import full_like
from primitives.tensor.manipulation import diagonal
from primitives.tensor.core import bind, dtype_of, shape_of
from primitives.tensor.errors import TensorNotSupportedError, TensorShapeError, TensorTypeError
from primitives.tensor.interop import constant_data, implements
from primitives.tensor.ops.reduce import Argmax, Argmin, ReduceProd, sqrt_zero_slope_at_zero
from primitives.tensor.ops.scan import Argsort, Cumprod, Cumsum, Sort

__all__ = ["prod", "cumsum", "cumprod", "diff", "var", "std", "average", "ptp", "nansum",
           "nanmean", "sort", "argsort", "argmax", "argmin", "median", "quantile",
           "percentile", "all", "any", "cov", "corrcoef", "trapezoid"]



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
    return astype(x, _accumulator_dtype(dtype_of(x)) if dtype is None else np.dtype(dtype))


def _real_only(x, fn: str) -> None:
    if dtype_of(x).kind == "c":
        raise TensorTypeError(f"{fn}: complex input is not supported (NumPy orders complex "
                              "numbers lexicographically, which has no useful derivative); "
                              "apply it to the real part, the imaginary part or abs()")


def _scan_operand(a, axis, fn: str):
    """The operand and axis of a cumulative function: ``axis=None`` scans the flattened array
    (and NumPy scans a 0-d array as a 1-d one)."""
    x = _operand(a, fn)
    if axis is None:
        return reshape(x, (-1,)), 0
    if not shape_of(x):
        x = reshape(x, (1,))
    return x, _axis(axis, len(shape_of(x)), fn)


def _isnan(x):
    return not_equal(x, x)


# --- products and cumulative functions -------------------------------------------------------


@implements(np.prod)
def prod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None):
    """``np.prod``. Exact derivatives where entries are zero (one, two or more), to every
    order: the derivative in ``a[j]`` is the product of the other entries, never
    ``prod / a[j]``.

    >>> prod(np.array([[1.0, 2.0], [3.0, 4.0]]), axis=-1, keepdims=True)
    array([[ 2.],
           [12.]])
    """
    _no_out(out, "prod")
    x = _as_accumulated(_operand(a, "prod"), dtype)
    shape = shape_of(x)
    axes = _axes(axis, len(shape), "prod")
    result = _first(bind(ReduceProd(axes, shape, dtype_of(x).name), x)) if axes else x
    if initial is not None:                    # in the product's dtype, as NumPy casts it
        result = multiply(result, astype(initial, dtype_of(x)))
    return _keep(result, shape, axes, keepdims)


@implements(np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None):
    """``np.cumsum`` (``axis=None``: of the flattened array). Linear: its gradient is the
    reversed cumulative sum of the cotangent.

    >>> cumsum(np.array([[1, 2], [3, 4]]))
    array([ 1,  3,  6, 10])
    """
    _no_out(out, "cumsum")
    x, axis = _scan_operand(a, axis, "cumsum")
    x = _as_accumulated(x, dtype)
    return _first(bind(Cumsum(axis), x))


@implements(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    """``np.cumprod`` (``axis=None``: of the flattened array). Exact derivatives where entries
    are zero, to every order (a linear recurrence, never ``cumprod / a``).

    >>> cumprod(np.array([2.0, 0.0, 3.0]))
    array([2., 0., 0.])
    """
    _no_out(out, "cumprod")
    x, axis = _scan_operand(a, axis, "cumprod")
    x = _as_accumulated(x, dtype)
    return _first(bind(Cumprod(axis, shape_of(x), dtype_of(x).name), x))


@implements(np.diff)
def diff(a, n: int = 1, axis: int = -1, prepend=_NO_VALUE, append=_NO_VALUE):
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
    x = _operand(a, "diff")
    shape = shape_of(x)
    if not shape:
        raise TensorShapeError("diff: diff requires input that is at least one dimensional")
    axis = _axis(axis, len(shape), "diff")
    if n == 0:
        return x
    if prepend is not _NO_VALUE or append is not _NO_VALUE:
        slab = tuple(1 if i == axis else s for i, s in enumerate(shape))

        def joined(extra):            # a scalar becomes one slice along the axis
            extra = _operand(extra, "diff")
            return [broadcast_to(extra, slab) if not shape_of(extra) else extra]
        x = concatenate((joined(prepend) if prepend is not _NO_VALUE else []) + [x]
                        + (joined(append) if append is not _NO_VALUE else []), axis=axis)
    later = tuple(slice(1, None) if i == axis else slice(None) for i in range(len(shape)))
    earlier = tuple(slice(None, -1) if i == axis else slice(None) for i in range(len(shape)))
    step = not_equal if dtype_of(x).kind == "b" else subtract
    for _ in range(n):
        x = step(getitem(x, later), getitem(x, earlier))
    return x


# --- variance and averages -------------------------------------------------------------------


def _ddof(ddof, correction, fn: str):
    if correction is _NO_VALUE:
        return ddof
    if ddof != 0:
        raise TensorShapeError(f"{fn}: ddof and correction can't be provided simultaneously.")
    return correction


@implements(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, *,
        correction=_NO_VALUE):
    """``np.var``: the mean of ``|a - mean(a)|**2`` over ``axis`` divided by ``N - ddof``
    (``correction`` is NumPy 2's name for ``ddof``); real for complex input, as NumPy's.

    >>> float(var(np.array([1.0, 2.0, 3.0, 4.0]), ddof=1))
    1.6666666666666667
    """
    _no_out(out, "var")
    ddof = _ddof(ddof, correction, "var")
    x = _operand(a, "var")
    x = astype(x, _float_dtype(x) if dtype is None else np.dtype(dtype))
    shape = shape_of(x)
    axes = _axes(axis, len(shape), "var")
    deviation = subtract(x, mean(x, axes, keepdims=True))
    if dtype_of(deviation).kind == "c":
        squares = real(multiply(deviation, conj(deviation)))
    else:
        squares = multiply(deviation, deviation)
    divisor = builtins.max(_count(shape, axes) - ddof, 0)       # NumPy's: inf or nan at 0
    return divide(sum(squares, axes, keepdims=keepdims), float(divisor))


@implements(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims: bool = False, *,
        correction=_NO_VALUE):
    """``np.std``: ``sqrt(var(a, ...))``. At zero variance the derivative is taken as 0, as
    PyTorch's ``std`` does (JAX's is ``nan``); its second derivative there is 0 too.

    >>> float(std(np.array([1.0, 3.0])))
    1.0
    """
    _no_out(out, "std")
    variance = var(a, axis, dtype, None, ddof, keepdims, correction=correction)
    return _first(bind(sqrt_zero_slope_at_zero, variance))


@implements(np.average)
def average(a, axis=None, weights=None, returned: bool = False, *, keepdims: bool = False):
    """``np.average``: ``sum(a * weights) / sum(weights)`` over ``axis``, differentiable in
    ``a`` and ``weights``; ``returned=True`` also gives the sum of the weights. Weights that
    sum to zero give ``inf``/``nan`` (NumPy raises ``ZeroDivisionError``: it reads the data,
    which a traced value does not have).

    >>> float(average(np.array([1.0, 2.0, 4.0]), weights=np.array([1.0, 1.0, 2.0])))
    2.75
    """
    x = _operand(a, "average")
    shape = shape_of(x)
    if weights is None:
        result = mean(x, axis, keepdims=keepdims)
        if not returned:
            return result
        count = _count(shape, _axes(axis, len(shape), "average"))
        return result, full_like(result, count)
    w = _operand(weights, "average")
    if shape_of(w) != shape:
        w = _weights_along(w, shape, axis)
    dtype = result_dtype(x, w)
    if dtype.kind in "biu":
        dtype = np.result_type(dtype, np.float64)
    x, w = astype(x, dtype), astype(w, dtype)
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
    normalized = tuple(_axis(ax, len(shape), "average") for ax in axes)
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
    _no_out(out, "ptp")
    x = _operand(a, "ptp")
    _real_only(x, "ptp")
    return subtract(max(x, axis, keepdims=keepdims), min(x, axis, keepdims=keepdims))


@implements(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims: bool = False):
    """``np.nansum``: NaNs count as zero (and get a zero derivative).

    >>> float(nansum(np.array([1.0, np.nan, 2.0])))
    3.0
    """
    _no_out(out, "nansum")
    x = _operand(a, "nansum")
    if dtype_of(x).kind in "fc":
        x = where(_isnan(x), 0, x)
    x = _as_accumulated(x, dtype)
    return sum(x, axis, keepdims=keepdims)


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims: bool = False):
    """``np.nanmean``: the mean of the entries that are not NaN (NaNs get a zero derivative);
    ``nan`` where a slice is all NaN.

    >>> float(nanmean(np.array([1.0, np.nan, 2.0])))
    1.5
    """
    _no_out(out, "nanmean")
    x = _operand(a, "nanmean")
    if dtype is not None:
        x = astype(x, dtype)
    if dtype_of(x).kind not in "fc":
        return mean(x, axis, keepdims=keepdims)
    count_dtype = dtype_of(x) if dtype_of(x).kind == "f" else np.dtype(np.float64)
    present = astype(equal(x, x), count_dtype)               # 1 where not NaN
    total = sum(where(_isnan(x), 0, x), axis, keepdims=keepdims)
    return divide(total, sum(present, axis, keepdims=keepdims))


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
    x = _operand(a, fn)
    if axis is None or (fn == "argsort" and not shape_of(x)):    # NumPy's argsort: 0-d as 1-d
        return reshape(x, (-1,)), 0
    return x, _axis(axis, len(shape_of(x)), fn)


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
    return _first(bind(Sort(axis, shape_of(x), dtype_of(x).name), x))


@implements(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """``np.argsort`` (``axis=None``: of the flattened array): integer indices, not
    differentiated; ``kind`` and ``stable`` as in NumPy.

    >>> argsort(np.array([3.0, 1.0, 2.0]))
    array([1, 2, 0])
    """
    kind = _sort_kind(kind, order, stable, "argsort")
    x, axis = _sort_operand(a, axis, "argsort")
    return _first(bind(Argsort(axis, kind), x))


def _arg_extremum(cls, fn: str, a, axis, out, keepdims):
    _no_out(out, fn)
    x = _operand(a, fn)
    shape = shape_of(x)
    flat = axis is None
    if flat:
        x, index_axis = reshape(x, (-1,)), 0
    else:
        index_axis = _axis(axis, len(shape), fn)
    if shape_of(x)[index_axis] == 0:
        raise TensorShapeError(f"{fn}: attempt to get {fn} of an empty sequence")
    result = _first(bind(cls(index_axis), x))
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


def _truth(a, axis, keepdims: bool, fn: str, reduce):
    a = _operand(a, fn)
    nonzero = not_equal(a, 0) if dtype_of(a) != np.bool_ else a
    counted = reduce(astype(nonzero, np.int8), axis=axis, keepdims=keepdims)
    return not_equal(counted, 0)


@implements(np.all)
def all(a, axis=None, out=None, keepdims: bool = False):
    """``np.all``: whether every element is nonzero; a boolean result, not differentiated.

    >>> all(np.array([[1.0, 0.0], [2.0, 3.0]]), axis=1)
    array([False,  True])
    """
    _no_out(out, "all")
    return _truth(a, axis, keepdims, "all", min)


@implements(np.any)
def any(a, axis=None, out=None, keepdims: bool = False):
    """``np.any``: whether some element is nonzero; a boolean result, not differentiated.

    >>> any(np.array([[1.0, 0.0], [0.0, 0.0]]), axis=1)
    array([ True, False])
    """
    _no_out(out, "any")
    return _truth(a, axis, keepdims, "any", max)


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


def _quantile(a, q, axis, method: str, keepdims: bool, fn: str, scale: float):
    if method not in _QUANTILE_METHODS:
        raise TensorNotSupportedError(f"{fn}: method {method!r} is not supported; use one of "
                                      f"{', '.join(_QUANTILE_METHODS)}")
    x = _operand(a, fn)
    _real_only(x, fn)
    q_data = np.asarray(constant_data(q, f"{fn}: q (differentiating in q is not supported)"))
    if q_data.dtype.kind not in "biuf":
        raise TensorTypeError(f"{fn}: q must be real numbers, got dtype {q_data.dtype}")
    fractions = q_data.astype(np.float64) / scale
    if not ((fractions >= 0) & (fractions <= 1)).all():
        kind = "Percentiles must be in the range [0, 100]" if scale == 100 else \
            "Quantiles must be in the range [0, 1]"
        raise TensorShapeError(f"{fn}: {kind}")
    if method in ("lower", "higher", "nearest"):     # values of a: its dtype, as NumPy's
        dtype = dtype_of(x)
    elif fn == "median":
        dtype = _float_dtype(x)
    else:
        dtype = result_dtype(_float_dtype(x).type(0), q if _is_python_scalar(q) else q_data)
    x = astype(x, dtype)
    shape = shape_of(x)
    axes = _axes(axis, len(shape), fn)
    n = _count(shape, axes)
    kept = tuple(a for a in range(len(shape)) if a not in axes)
    kept_shape = tuple(shape[a] for a in kept)
    out_shape = q_data.shape + (_kept_shape(shape, axes) if keepdims else kept_shape)
    if n == 0:
        if fn != "median":
            raise TensorShapeError(f"{fn}: cannot take quantiles of an empty axis (shape "
                                   f"{shape}, axis {axis})")
        return reshape(add(sum(x, axes), np.nan), out_shape)       # NumPy's median: nan
    # the reduced axes last, as one axis of n values, sorted
    grouped = reshape(transpose(x, kept + axes), kept_shape + (n,))
    ordered = sort(grouped, axis=-1)
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
    they are interpolated. ``q`` is a constant (not differentiated); real input only.

    >>> quantile(np.array([1.0, 2.0, 4.0, 8.0]), [0.5, 1.0])
    array([3., 8.])
    """
    _no_out(out, "quantile")
    return _quantile(a, q, axis, method, keepdims, "quantile", 1.0)


@implements(np.percentile)
def percentile(a, q, axis=None, out=None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False):
    """``np.percentile``: :func:`quantile` of ``q / 100``, with its derivative convention.

    >>> percentile(np.array([1.0, 2.0, 4.0, 8.0]), 50)
    array(3.)
    """
    _no_out(out, "percentile")
    return _quantile(a, q, axis, method, keepdims, "percentile", 100.0)


@implements(np.median)
def median(a, axis=None, out=None, overwrite_input: bool = False, keepdims: bool = False):
    """``np.median``: the middle order statistic, or the mean of the two middle ones. The
    derivative goes to those entries (tied values: by the stable sort order); ``nan`` for
    a slice that holds a NaN. Real input only.

    >>> median(np.array([[1.0, 7.0, 3.0], [4.0, 2.0, 0.0]]), axis=1)
    array([3., 2.])
    """
    _no_out(out, "median")
    return _quantile(a, 0.5, axis, "midpoint", keepdims, "median", 1.0)


def _variables(m, rowvar: bool, fn: str):
    """``m`` as a 2-d array of variables by observations (NumPy's ``cov`` layout)."""
    x = _operand(m, fn)
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
    x = astype(x, dtype if dtype is not None else np.result_type(dtype_of(x), np.float64))
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
    y = _operand(y, "trapezoid")
    axis = _axis(axis, len(shape_of(y)), "trapezoid")
    n = shape_of(y)[axis]
    head = (slice(None),) * axis
    upper, lower = getitem(y, head + (slice(1, None),)), getitem(y, head + (slice(None, -1),))
    if x is None:
        widths = dx
    else:
        x = _operand(x, "trapezoid")
        if len(shape_of(x)) == 1:
            widths = subtract(getitem(x, slice(1, None)), getitem(x, slice(None, -1)))
            widths = reshape(widths, (n - 1,) + (1,) * (len(shape_of(y)) - axis - 1))
        else:
            widths = subtract(getitem(x, head + (slice(1, None),)),
                              getitem(x, head + (slice(None, -1),)))
    return sum(multiply(multiply(add(upper, lower), 0.5), widths), axis)
