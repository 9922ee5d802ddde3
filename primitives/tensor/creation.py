"""Array creation and constants with NumPy's names, so NumPy code runs with ``tnp`` as ``np``.

The creation routines make constants: their results carry no derivative, so they
are NumPy's own functions (``tnp.eye is numpy.eye``). Given a tensor or traced
value where a number is expected (``tnp.linspace(0, x, 5)`` with a traced ``x``),
NumPy's dispatch sends the call to tidu, which raises a clear error rather than
dropping the derivative. The ``*_like`` functions and ``array``/``asarray``,
which take arrays, are tnp's own (``primitives.tensor.api``).

>>> import primitives.tensor as tnp
>>> tnp.eye(2) * tnp.pi
array([[3.14159265, 0.        ],
       [0.        , 3.14159265]])
"""

from __future__ import annotations

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
    "complexfloating", "inexact",
]
