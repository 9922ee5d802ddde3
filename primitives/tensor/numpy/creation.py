"""Array creation and constants with NumPy's names, so NumPy code runs with ``tnp`` as ``np``.

Most creation routines make constants: their results carry no derivative, so they
are NumPy's own functions (``tnp.eye is numpy.eye``). Given a tensor or traced
value where a number is expected, NumPy's dispatch sends the call to tidu, which
raises a clear error rather than dropping the derivative. ``array``/``asarray``,
which take arrays, are tnp's own (``primitives.tensor.numpy.lowering``); so are
``zeros_like``, ``ones_like`` and ``full_like`` (here): constants too, made in the
library of their argument, on its device.

Three take values that can carry a derivative, as in JAX and autograd:
``full(shape, fill_value)`` and ``full_like(a, fill_value)`` differentiate in
``fill_value`` (a broadcast of it), and ``linspace(start, stop, num)`` in ``start``
and ``stop``. Given plain NumPy values (or numbers) they are NumPy's, bit for bit.

>>> import primitives.tensor as tnp
>>> float(tnp.grad(lambda v: full((2, 3), v).sum())(1.5))          # six copies of v
6.0
>>> tnp.grad(lambda ab: linspace(ab[0], ab[1], 5).sum())(np.array([0.0, 1.0]))
array([2.5, 2.5])
>>> tnp.eye(2) * tnp.pi
array([[3.14159265, 0.        ],
       [0.        , 3.14159265]])

NumPy's non-differentiable utilities are here too, as NumPy's own (``tnp.allclose is
numpy.allclose``): comparisons (``allclose``, ``isclose``, ``array_equal``,
``array_equiv``), indices of values (``nonzero``, ``argwhere``, ``flatnonzero``,
``count_nonzero``, ``searchsorted``), floating-point error and print settings
(``seterr``, ``geterr``, ``errstate``, ``printoptions``, ``set_printoptions``...), and
type queries (``finfo``, ``iinfo``, ``isscalar``, ``iscomplexobj``...). Their results
carry no derivative, so on a tensor or traced value they read its data (NumPy's
dispatch, :mod:`primitives.tensor.numpy.dispatch`), also under ``grad``; under ``jit`` and
``vmap`` the values are not known while tracing, and they raise
``ConcretizationError``.

>>> t = tnp.tensor([1.0, 2.0], requires_grad=True)
>>> tnp.allclose(t, [1.0, 2.0 + 1e-12])
True
"""

from __future__ import annotations

import operator

import numpy as np

from primitives.tensor.numpy.lowering import _holds_frontend, _operand, _shape_tuple, astype, broadcast_to
from primitives.tensor.backends import NUMPY, device_of, library_of, numpy_dtype
from primitives.tensor.core import Frontend, array_below, dtype_of, shape_of
from primitives.tensor.errors import TensorShapeError
from primitives.tensor.numpy.dispatch import implements
from numpy import (  # noqa: F401  (re-exported: NumPy's own, no derivative to lose)
    zeros, ones, empty, eye, identity, arange, logspace, geomspace, tri,
    indices, diag_indices, tril_indices, triu_indices, result_type, promote_types, can_cast,
    finfo, iinfo, issubdtype, isscalar, dtype, errstate, pi, e, inf, nan, newaxis,
    euler_gamma, float16, float32, float64, complex64, complex128, int8, int16, int32,
    int64, uint8, bool_, intp, ndarray, generic, number, integer, floating, complexfloating,
    inexact,
    # NumPy's own non-differentiable utilities (comparisons, indices, settings, queries)
    allclose, isclose, array_equal, array_equiv, nonzero, argwhere, flatnonzero,
    count_nonzero, searchsorted, isneginf, isposinf, iscomplexobj, isrealobj,
    shares_memory, may_share_memory, seterr, geterr, seterrcall, geterrcall, printoptions,
    set_printoptions, get_printoptions, array2string, array_repr, array_str,
    format_float_positional, format_float_scientific, typename, mintypecode, isdtype,
    base_repr, binary_repr,
)

__all__ = [
    "zeros", "ones", "full", "empty", "eye", "identity", "arange", "linspace", "logspace",
    "geomspace", "tri", "indices", "diag_indices", "tril_indices", "triu_indices",
    "result_type", "promote_types", "can_cast", "finfo", "iinfo", "issubdtype", "isscalar",
    "dtype", "errstate", "pi", "e", "inf", "nan", "newaxis", "euler_gamma", "float16",
    "float32", "float64", "complex64", "complex128", "int8", "int16", "int32", "int64",
    "uint8", "bool_", "intp", "ndarray", "generic", "number", "integer", "floating",
    "complexfloating", "inexact", "zeros_like", "ones_like", "full_like",
    "allclose", "isclose", "array_equal", "array_equiv", "nonzero", "argwhere", "flatnonzero",
    "count_nonzero", "searchsorted", "isneginf", "isposinf", "iscomplexobj", "isrealobj",
    "shares_memory", "may_share_memory", "seterr", "geterr", "seterrcall", "geterrcall",
    "printoptions", "set_printoptions", "get_printoptions", "array2string", "array_repr",
    "array_str", "format_float_positional", "format_float_scientific", "typename",
    "mintypecode", "isdtype", "base_repr", "binary_repr",
]


@implements(np.zeros_like)
def zeros_like(a, dtype=None):
    """``np.zeros_like``: a constant array (its values do not depend on ``a``'s).

    >>> zeros_like(np.ones((2, 1), dtype=np.float32))
    array([[0.],
           [0.]], dtype=float32)
    """
    return _filled_like(a, None, dtype, "zeros_like")


@implements(np.ones_like)
def ones_like(a, dtype=None):
    """``np.ones_like``: a constant array (its values do not depend on ``a``'s)."""
    return _filled_like(a, 1, dtype, "ones_like")


@implements(np.full_like)
def full_like(a, fill_value, dtype=None):
    """``np.full_like``: an array of ``a``'s shape (and dtype, unless given) filled with
    ``fill_value``, differentiable in ``fill_value`` (not in ``a``'s values).

    A tensor or traced ``fill_value`` (0-d, or any shape that broadcasts to ``a``'s) is
    cast to the dtype and broadcast, so its gradient is the sum of the result's.

    >>> full_like(np.ones((2, 1), dtype=np.float32), 7)
    array([[7.],
           [7.]], dtype=float32)
    """
    if _carries_values(fill_value):
        dtype = dtype_of(a) if dtype is None else numpy_dtype(dtype)
        return _broadcast_fill(fill_value, shape_of(_operand(a, "full_like")), dtype,
                               "full_like")
    return _filled_like(a, fill_value, dtype, "full_like")


def full(shape, fill_value, dtype=None, order="C", *, device=None, like=None):
    """``np.full``: an array of ``shape`` filled with ``fill_value``, differentiable in
    ``fill_value`` (JAX's ``jnp.full``).

    For a plain ``fill_value`` (a number, a NumPy array) this is ``np.full`` itself. A
    tensor or traced ``fill_value`` (0-d, or any shape that broadcasts to ``shape``), or
    an array of another library, is cast to ``dtype`` (its own dtype by default, as in
    NumPy) and broadcast: the gradient with respect to it is the sum of the result's
    over the broadcast axes. ``order``, ``device`` and ``like`` apply to NumPy's path.

    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda v: tnp.sum(full((2, 2), v) * np.arange(4.0).reshape(2, 2)))(1.0)
    array(6.)
    >>> tnp.grad(lambda row: tnp.sum(full((3, 2), row) ** 2))(np.array([1.0, 2.0]))
    array([ 6., 12.])
    """
    if _carries_values(fill_value):
        return _broadcast_fill(fill_value, _shape_tuple(shape, "full"),
                               None if dtype is None else numpy_dtype(dtype), "full")
    return np.full(shape, fill_value, dtype=dtype, order=order, device=device, like=like)


@implements(np.linspace)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """``np.linspace``, differentiable in ``start`` and ``stop`` (as JAX and autograd).

    With plain ``start`` and ``stop`` (numbers, NumPy arrays) this is ``np.linspace``
    itself. With a tensor or traced value among them (or an array of another library) it
    is NumPy's algorithm written with tnp functions, so on NumPy data it gives NumPy's
    values bit for bit: ``start + i * step`` with ``step = (stop - start) / div`` (``div`` is ``num - 1``,
    or ``num`` without the endpoint; NumPy's ``start + (i / div) * delta`` when a step
    underflows to zero), and the endpoint set to ``stop`` exactly. ``start`` and
    ``stop`` may be arrays (broadcast together; the samples run along ``axis``); the
    derivative of sample ``i`` is ``1 - i/div`` in ``start`` and ``i/div`` in ``stop``.
    ``retstep=True`` returns ``(samples, step)``, ``step`` differentiable too. An integer
    ``dtype`` rounds down (NumPy's rule) and carries no derivative.

    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda s: tnp.sum(linspace(s, 1.0, 5) ** 2))(0.0)     # sum 2 x_i (1 - i/4)
    array(1.25)
    >>> bool(np.array_equal(tnp.jit(lambda a: linspace(a, 2.0, 7))(0.1), np.linspace(0.1, 2.0, 7)))
    True
    """
    if not (_carries_values(start) or _carries_values(stop)):
        return np.linspace(start, stop, num, endpoint, retstep, dtype, axis, device=device)
    from primitives.tensor.numpy.lowering import add, divide, multiply, subtract, where
    from primitives.tensor.numpy.manipulation import moveaxis
    from primitives.tensor.numpy.mathfuncs import floor
    from primitives.tensor.numpy.reductions import any as any_

    num = operator.index(num)
    if num < 0:
        raise TensorShapeError(f"linspace: Number of samples, {num}, must be non-negative.")
    div = num - 1 if endpoint else num
    start, stop = _operand(start, "linspace"), _operand(stop, "linspace")
    computed = _inexact_result_type(start, stop)            # NumPy's dtype to compute in
    integer_dtype = dtype is not None and np.issubdtype(numpy_dtype(dtype), np.integer)
    dtype = computed if dtype is None else numpy_dtype(dtype)

    delta = subtract(astype(stop, computed), astype(start, computed))
    ramp = np.arange(0, num, dtype=computed).reshape((-1,) + (1,) * len(shape_of(delta)))
    if div > 0:
        step = divide(delta, div)
        # NumPy divides first when a step underflows to zero (denormal deltas, gh-5437)
        samples = where(any_(step == 0), multiply(ramp / div, delta), multiply(ramp, step))
    else:                       # no samples, or one with the endpoint: the step is undefined
        step = np.nan
        samples = multiply(ramp, delta)
    samples = add(samples, start)
    if endpoint and num > 1:
        last = (np.arange(num) == num - 1).reshape(ramp.shape)
        samples = where(last, astype(stop, computed), samples)
    if axis != 0:
        samples = moveaxis(samples, 0, axis)
    if integer_dtype:
        samples = floor(samples)
    samples = astype(samples, dtype)
    return (samples, step) if retstep else samples


def _inexact_result_type(*values) -> np.dtype:
    """NumPy's result dtype of ``values``, made floating point if it is not inexact (what
    ``np.linspace`` computes in); Python numbers are weak, as in NumPy 2."""
    from primitives.tensor.numpy.lowering import _is_python_scalar

    dtype = np.result_type(*[v if _is_python_scalar(v) else dtype_of(v) for v in values])
    return dtype if dtype.kind in "fc" else np.result_type(dtype, np.float64)


def _carries_values(value) -> bool:
    """Whether ``value`` is more than a NumPy constant: a tensor or traced value (or a list
    holding them), or an array of another library (whose result stays in that library)."""
    if isinstance(value, Frontend):
        return True
    if isinstance(value, (list, tuple)):
        return _holds_frontend(value)
    return library_of(value) is not NUMPY


def _broadcast_fill(fill_value, shape: tuple, dtype, fn: str):
    """``fill_value`` cast to ``dtype`` (``None``: kept) and broadcast to ``shape``; a new
    array when ``fill_value`` is a plain array of another library (NumPy's result is
    writable and shares no memory)."""
    value = _operand(fill_value, fn)
    if dtype is not None:
        value = astype(value, dtype)
    try:
        out = broadcast_to(value, shape)
    except TensorShapeError:
        raise TensorShapeError(f"{fn}: could not broadcast fill_value of shape "
                               f"{shape_of(value)} into shape {shape}") from None
    if not isinstance(out, Frontend) and library_of(out) is not NUMPY:
        out = library_of(out).copy(out)
    return out


def _filled_like(a, value, dtype, fn: str):
    """An array of ``a``'s shape (and dtype, unless given) filled with ``value`` (zeros for
    ``None``), in ``a``'s library, on its device; NumPy for a traced ``a`` (a transform's
    results come out in its arguments' library, and a NumPy constant suits any call of a
    ``jit``-compiled function)."""
    a = _operand(a, fn)
    shape = shape_of(a)
    dtype = dtype_of(a) if dtype is None else np.dtype(dtype)
    below = a if not isinstance(a, Frontend) or a.is_tracer else array_below(a)
    library = library_of(below)
    if library is NUMPY:
        return np.zeros(shape, dtype=dtype) if value is None else np.full(shape, value, dtype=dtype)
    if value is None:
        return library.xp.zeros(shape, dtype=dtype, device=device_of(below))
    if np.ndim(value) != 0:                             # an array of values to broadcast
        return library.from_numpy(np.full(shape, value, dtype=dtype), below)
    return library.xp.full(shape, value, dtype=dtype, device=device_of(below))
