"""Array creation and constants with NumPy's names, so NumPy code runs with ``tnp`` as ``np``.

The creation routines make constants: their results carry no derivative, so they
are NumPy's own functions (``tnp.eye is numpy.eye``). Given a tensor or traced
value where a number is expected (``tnp.linspace(0, x, 5)`` with a traced ``x``),
NumPy's dispatch sends the call to tidu, which raises a clear error rather than
dropping the derivative. ``array``/``asarray``, which take arrays, are tnp's own
(``primitives.tensor.api``); so are ``zeros_like``, ``ones_like`` and ``full_like``
(here): constants too, made in the library of their argument, on its device.

>>> import primitives.tensor as tnp
>>> tnp.eye(2) * tnp.pi
array([[3.14159265, 0.        ],
       [0.        , 3.14159265]])
"""

from __future__ import annotations

import numpy as np

from primitives.tensor.api import _operand
from primitives.tensor.backends import NUMPY, device_of, library_of
from primitives.tensor.core import Frontend, array_below, dtype_of, shape_of
from primitives.tensor.interop import implements
from numpy import (  # noqa: F401  (re-exported: NumPy's own, no derivative to lose)
    zeros, ones, full, empty, eye, identity, arange, linspace, logspace, geomspace, tri,
    indices, diag_indices, tril_indices, triu_indices, result_type, promote_types, can_cast,
    finfo, iinfo, issubdtype, isscalar, dtype, errstate, pi, e, inf, nan, newaxis,
    euler_gamma, float16, float32, float64, complex64, complex128, int8, int16, int32,
    int64, uint8, bool_, intp, ndarray, generic, number, integer, floating, complexfloating,
    inexact,
)

__all__ = [
    "zeros", "ones", "full", "empty", "eye", "identity", "arange", "linspace", "logspace",
    "geomspace", "tri", "indices", "diag_indices", "tril_indices", "triu_indices",
    "result_type", "promote_types", "can_cast", "finfo", "iinfo", "issubdtype", "isscalar",
    "dtype", "errstate", "pi", "e", "inf", "nan", "newaxis", "euler_gamma", "float16",
    "float32", "float64", "complex64", "complex128", "int8", "int16", "int32", "int64",
    "uint8", "bool_", "intp", "ndarray", "generic", "number", "integer", "floating",
    "complexfloating", "inexact", "zeros_like", "ones_like", "full_like",
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
    """``np.full_like`` with a constant ``fill_value``."""
    return _filled_like(a, fill_value, dtype, "full_like")


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
