"""Elementwise mathematical functions with NumPy's names: trigonometric, hyperbolic,
exponential and logarithmic, rounding, and the two-argument functions.

Each promotes and broadcasts as NumPy does (``np.sinh`` of an ``int64`` array is
``float64``, of an ``int8`` one ``float16``), refuses complex input where NumPy does,
and differentiates as its docstring says. Holomorphic functions follow tidu's
complex convention: the JVP multiplies by ``f'(z)``, the VJP by ``conj(f'(z))``.
Rounding functions have derivative zero (as in JAX); boolean ones (``isnan``...)
are not differentiated. ``sign`` and ``clip`` are here too; the one-op functions
(``exp``, ``add``, ``maximum``, ``abs``...) are :mod:`.lowering`'s.

It imports :mod:`.lowering` and :mod:`.indexing` (and :mod:`.dispatch`), of the NumPy
package.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.sinh(np.zeros(2))
array([0., 0.])
>>> float(tnp.grad(lambda x: tnp.logaddexp(x, 0.0))(0.0))     # exp(x) / (exp(x) + 1)
0.5
>>> float(tnp.grad(lambda y: tnp.power(2.0, y))(3.0))          # log(2) 2**3
5.545177444479562
>>> tnp.grad(lambda x: tnp.sum(tnp.nan_to_num(x)))(np.array([1.0, np.nan, np.inf]))
array([1., 0., 0.])
"""

from __future__ import annotations

import math
from functools import lru_cache
from types import SimpleNamespace
from typing import Callable

import numpy as np

from primitives.tensor.backends import NUMPY, as_array, library_of, operands, to_host
from primitives.tensor.core import Frontend, bind, data_if_known, data_of, dtype_of, shape_of
from primitives.tensor.errors import (TensorNotSupportedError, TensorShapeError,
                                      TensorTypeError)
from primitives.tensor.numpy.dispatch import implements
from primitives.tensor.numpy.indexing import take
from primitives.tensor.numpy.lowering import (abs as _abs, add, as_dtype, divide, elementwise,
                                              equal, exp, filled_like, first, greater,
                                              greater_equal, imag, less, less_equal, maximum,
                                              minimum, multiply, negative, no_out, not_equal,
                                              not_itself, operand, power, real, reshape,
                                              result_dtype, sqrt, stop_gradient, ufunc_keywords,
                                              subtract, sum, where)
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.indexing import Gather

__all__: list[str] = []          # _unary and _binary add the names they declare
_where = where       # (where is also a parameter: NumPy's where= of the ufuncs)


@lru_cache(maxsize=512)
def numpy_result_dtype(numpy_fn: Callable, *dtypes: np.dtype) -> np.dtype:
    """The dtype of ``numpy_fn``'s result for operands of ``dtypes``, as NumPy computes it
    (``np.sinh``: int8 -> float16, int64 -> float64); NumPy's ``TypeError`` where it has no
    loop (``np.floor`` of complex)."""
    with np.errstate(all="ignore"):
        return np.asarray(numpy_fn(*[np.ones(1, dtype) for dtype in dtypes])).dtype


def _computing_dtype(numpy_fn: Callable, name: str, dtype: np.dtype) -> np.dtype:
    """The dtype to convert operands of ``dtype`` to before applying the op of ``numpy_fn``
    (``dtype`` itself for predicates such as ``isnan``)."""
    try:
        result = numpy_result_dtype(numpy_fn, *[dtype] * getattr(numpy_fn, "nin", 1))
    except TypeError:
        raise TensorTypeError(f"{name}: input of dtype {dtype} is not supported (NumPy's "
                              f"{name} has no loop for it)") from None
    return dtype if result.kind == "b" else result


def _unary(op, numpy_fn: Callable, note: str, name: str | None = None,
           dispatch: bool = True) -> Callable:
    """The NumPy-named function applying the unary ``op`` after NumPy's promotion
    (``dispatch``: also what ``numpy_fn`` runs on tensors and traced values)."""
    name = name or numpy_fn.__name__

    def fn(x, out=None, where=True, dtype=None, **options):
        if out is not None or where is not True or dtype is not None or options:
            ufunc_keywords(name, out, where, dtype, options)
        x = operand(x, name)
        dtype = dtype_of(x)
        target = _computing_dtype(numpy_fn, name, dtype)
        return first(bind(op, x if target == dtype else as_dtype(x, target)))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``np.{name}``; {note}"
    __all__.append(name)
    return implements(numpy_fn)(fn) if dispatch else fn


def _binary(op, numpy_fn: Callable, note: str, name: str | None = None) -> Callable:
    """The NumPy-named function applying the binary ``op`` after NumPy's promotion and
    broadcasting."""
    name = name or numpy_fn.__name__

    def fn(x1, x2, out=None, where=True, dtype=None, **options):
        if out is not None or where is not True or dtype is not None or options:
            ufunc_keywords(name, out, where, dtype, options)
        x1, x2 = operand(x1, name), operand(x2, name)
        dtype = result_dtype(x1, x2)
        target = _computing_dtype(numpy_fn, name, dtype)
        return elementwise(op, as_dtype(x1, target), as_dtype(x2, target))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``np.{name}``; {note}"
    __all__.append(name)
    return implements(numpy_fn)(fn)


_HOLOMORPHIC = "holomorphic where NumPy takes complex input (the VJP multiplies by conj(f'(z)))"

# --- trigonometric and hyperbolic -------------------------------------------------------

sinh = _unary(ew.sinh, np.sinh, f"derivative cosh(x); {_HOLOMORPHIC}.")
cosh = _unary(ew.cosh, np.cosh, f"derivative sinh(x); {_HOLOMORPHIC}.")
tan = _unary(ew.tan, np.tan, f"derivative 1 + tan(x)**2; {_HOLOMORPHIC}.")
arcsin = _unary(ew.arcsin, np.arcsin, "derivative 1/sqrt(1 - x**2), infinite at ±1; "
                f"{_HOLOMORPHIC}, off NumPy's branch cuts.")
arccos = _unary(ew.arccos, np.arccos, "derivative -1/sqrt(1 - x**2), infinite at ±1; "
                f"{_HOLOMORPHIC}, off NumPy's branch cuts.")
arctan = _unary(ew.arctan, np.arctan, f"derivative 1/(1 + x**2); {_HOLOMORPHIC}.")
arcsinh = _unary(ew.arcsinh, np.arcsinh, f"derivative 1/sqrt(x**2 + 1); {_HOLOMORPHIC}.")
arccosh = _unary(ew.arccosh, np.arccosh, "derivative 1/(sqrt(x - 1) sqrt(x + 1)), infinite "
                 f"at 1; {_HOLOMORPHIC}.")
arctanh = _unary(ew.arctanh, np.arctanh, "derivative 1/(1 - x**2), infinite at ±1; "
                 f"{_HOLOMORPHIC}.")
arctan2 = _binary(ew.arctan2, np.arctan2, "real only; derivatives (x2, -x1)/(x1**2 + x2**2), "
                  "computed without overflow, and 0 at (0, 0) (PyTorch's choice; JAX gives "
                  "NaN).")
hypot = _binary(ew.hypot, np.hypot, "real only; derivatives (x1, x2)/hypot(x1, x2), 0 at "
                "(0, 0) (as tnp.abs of a complex 0; JAX gives 1/2 each, PyTorch NaN).")
deg2rad = _unary(ew.deg2rad, np.deg2rad, "real only; linear (times pi/180).")
rad2deg = _unary(ew.rad2deg, np.rad2deg, "real only; linear (times 180/pi).")
radians = _unary(ew.deg2rad, np.radians, "real only; linear (times pi/180).", "radians")
degrees = _unary(ew.rad2deg, np.degrees, "real only; linear (times 180/pi).", "degrees")
sinc = _unary(ew.sinc, np.sinc, "sin(pi x)/(pi x); its derivatives of every order are exact "
              "at and near 0 (sinc'(0) = 0, sinc''(0) = -pi**2/3); " + _HOLOMORPHIC + ".")

# --- exponents and logarithms ----------------------------------------------------------

expm1 = _unary(ew.expm1, np.expm1, f"derivative exp(x), accurate near 0; {_HOLOMORPHIC}.")
log1p = _unary(ew.log1p, np.log1p, f"derivative 1/(1 + x), accurate near 0; {_HOLOMORPHIC}.")
log2 = _unary(ew.log2, np.log2, f"derivative 1/(x log 2); {_HOLOMORPHIC}.")
log10 = _unary(ew.log10, np.log10, f"derivative 1/(x log 10); {_HOLOMORPHIC}.")
exp2 = _unary(ew.exp2, np.exp2, f"derivative log(2) 2**x; {_HOLOMORPHIC}.")
cbrt = _unary(ew.cbrt, np.cbrt, "real only; derivative 1/(3 cbrt(x)**2), infinite at 0.")
logaddexp = _binary(ew.logaddexp, np.logaddexp, "real only; derivatives exp(x1 - out) and "
                    "exp(x2 - out) as logistic functions of x1 - x2: no NaN at -inf or for large "
                    "inputs, 1/2 each where x1 == x2 == ±inf.")
logaddexp2 = _binary(ew.logaddexp2, np.logaddexp2, "real only; derivatives 2**(x1 - out) and "
                     "2**(x2 - out), as logaddexp's (no NaN at -inf, 1/2 each at equal "
                     "infinities).")
square = _unary(ew.IntegerPow(2), np.square, f"derivative 2 x; {_HOLOMORPHIC}.")
reciprocal = _unary(ew.reciprocal, np.reciprocal, "derivative -1/x**2; integers divide as "
                    f"NumPy's (1/2 is 0) and are not differentiated; {_HOLOMORPHIC}.")

# NumPy 2's array-API names
asin, acos, atan, atan2 = arcsin, arccos, arctan, arctan2
asinh, acosh, atanh = arcsinh, arccosh, arctanh
pow = power
true_divide = divide

# --- absolute value, extrema, remainders -------------------------------------------------

fabs = _unary(ew.abs_real, np.fabs, "real only; derivative sign(x), 0 at 0 (as tnp.abs).")


@implements(np.sign)
def sign(x, out=None, where=True, dtype=None, **options):
    """``np.sign``; of a complex ``z``, ``z / |z|`` (0 at 0), differentiable away from 0."""
    if out is not None or where is not True or dtype is not None or options:
        ufunc_keywords("sign", out, where, dtype, options)
    x = operand(x, "sign")
    if dtype_of(x).kind == "b":
        raise TensorTypeError("sign: input of dtype bool is not supported (NumPy's sign has no "
                              "loop for it)")
    if not np.issubdtype(dtype_of(x), np.complexfloating):
        return first(bind(ew.sign, x))
    magnitude = _abs(x)
    zero = equal(magnitude, 0)
    return _where(zero, 0, divide(x, _where(zero, 1, magnitude)))


@implements(np.clip)
def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, where=True, dtype=None,
         **options):
    """``np.clip``: ``minimum(maximum(a, a_min), a_max)``, as NumPy computes it (NaN
    propagates, ``a_max`` wins when ``a_min > a_max``). The derivative goes to ``a``
    strictly inside the bounds, to the bound where it is taken, and is split evenly
    where ``a`` equals a bound (as JAX's ``clip``). ``min``/``max`` are NumPy 2's (and
    ``ndarray.clip``'s) names of the bounds.

    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda x: tnp.sum(tnp.clip(x, 0.0, 1.0)))(np.array([-1.0, 0.0, 0.5, 2.0]))
    array([0. , 0.5, 1. , 0. ])
    """
    if out is not None or where is not True or dtype is not None or options:
        ufunc_keywords("clip", out, where, dtype, options)
    for name, positional, keyword in (("min", a_min, min), ("max", a_max, max)):
        if positional is not None and keyword is not None:
            raise TensorTypeError(f"clip: give a_{name} or {name}, not both")
    a_min = a_min if min is None else min
    a_max = a_max if max is None else max
    a = operand(a)
    if a_min is None and a_max is None:
        raise TensorShapeError("clip: one of a_min and a_max must be given")
    if dtype_of(a).kind in "iu":
        a_min, a_max = _integer_bounds(a_min, a_max, np.iinfo(dtype_of(a)))
    if a_min is not None:
        a = maximum(a, a_min)
    if a_max is not None:
        a = minimum(a, a_max)
    return a


def _integer_bounds(a_min, a_max, info):
    """``clip``'s bounds for an integer array, as NumPy's: a Python ``int`` beyond the
    dtype's range that changes nothing is dropped (``clip(int8, 0, 300)``); one that would
    is refused."""
    if type(a_min) is int and a_min < info.min:
        a_min = None
    if type(a_max) is int and a_max > info.max:
        a_max = None
    for name, bound in (("a_min", a_min), ("a_max", a_max)):
        if type(bound) is int and not info.min <= bound <= info.max:
            raise TensorTypeError(f"clip: {name}={bound} is out of the range of {info.dtype} "
                                  f"([{info.min}, {info.max}])")
    return a_min, a_max


fmax = _binary(ew.fmax, np.fmax, "a NaN operand loses to a number (as NumPy's forward); ties "
               "split the derivative evenly (as tnp.maximum); where x1 is NaN it goes to x2.")
fmin = _binary(ew.fmin, np.fmin, "a NaN operand loses to a number (as NumPy's forward); ties "
               "split the derivative evenly (as tnp.minimum); where x1 is NaN it goes to x2.")
remainder = _binary(ew.remainder, np.remainder, "real only; the sign of x2 (Python's %); "
                    "derivatives 1 and -floor_divide(x1, x2) (as JAX and PyTorch).")
mod = remainder
fmod = _binary(ew.fmod, np.fmod, "real only; the sign of x1 (C's fmod); derivatives 1 and "
               "-trunc(x1 / x2) (as JAX and PyTorch).")
floor_divide = _binary(ew.floor_divide, np.floor_divide, "real only; piecewise constant: "
                       "derivative zero (as JAX).")

# --- rounding and predicates --------------------------------------------------------------

_ROUNDING = "derivative zero (piecewise constant; as JAX)."
floor = _unary(ew.floor, np.floor, f"real only; {_ROUNDING}")
ceil = _unary(ew.ceil, np.ceil, f"real only; {_ROUNDING}")
trunc = _unary(ew.trunc, np.trunc, f"real only; {_ROUNDING}")
rint = _unary(ew.rint, np.rint, _ROUNDING)

# NumPy's own predicates keep answering on the data of tensors (primitives.tensor.numpy.dispatch);
# these are their jit-traceable versions.
_PREDICATE = "a boolean result, not differentiated; traceable under jit (np.{} is not)."
isnan = _unary(ew.isnan, np.isnan, _PREDICATE.format("isnan"), dispatch=False)
isinf = _unary(ew.isinf, np.isinf, _PREDICATE.format("isinf"), dispatch=False)
isfinite = _unary(ew.isfinite, np.isfinite, _PREDICATE.format("isfinite"), dispatch=False)
signbit = _unary(ew.signbit, np.signbit, "real only; " + _PREDICATE.format("signbit"),
                 dispatch=False)


# boolean algebra: NumPy's ufuncs, traceable under jit and vmap, not differentiated; on
# booleans the bitwise ones (``&``, ``|``, ``^``, ``~``) are the logical ones
_BOOLEAN = "a boolean result, not differentiated; traceable under jit and vmap."
_BITWISE = ("bitwise on integers and booleans (the operator {}), as NumPy; not "
            "differentiated; traceable under jit and vmap.")
logical_and = _binary(ew.logical_and, np.logical_and, _BOOLEAN)
logical_or = _binary(ew.logical_or, np.logical_or, _BOOLEAN)
logical_xor = _binary(ew.logical_xor, np.logical_xor, _BOOLEAN)
logical_not = _unary(ew.logical_not, np.logical_not, _BOOLEAN)
bitwise_and = _binary(ew.bitwise_and, np.bitwise_and, _BITWISE.format("&"))
bitwise_or = _binary(ew.bitwise_or, np.bitwise_or, _BITWISE.format("|"))
bitwise_xor = _binary(ew.bitwise_xor, np.bitwise_xor, _BITWISE.format("^"))
invert = _unary(ew.invert, np.invert, _BITWISE.format("~"))
bitwise_not = bitwise_invert = invert

@implements(np.round, np.around)
def round(a, decimals: int = 0, out=None):
    """``np.round`` (half to even, as NumPy), for real and complex ``a``; derivative zero
    (piecewise constant; as JAX).

    >>> round(np.array([0.5, 1.5, 2.5, 0.126]))
    array([0., 2., 2., 0.])
    >>> round(np.array([0.126, -0.5]), 2)
    array([ 0.13, -0.5 ])
    """
    no_out(out, "round")
    a = operand(a, "round")
    if dtype_of(a).kind == "b" and decimals != 0:        # (NumPy's round(b) is float16)
        raise TensorTypeError(f"round: booleans cannot be rounded to {decimals} decimals "
                              "(NumPy refuses it too); convert them first (tnp.astype)")
    return first(bind(ew.Round(int(decimals)), a))


around = round


@implements(np.copysign)
def copysign(x1, x2, out=None, where=True, dtype=None, **options):
    """``np.copysign``: ``|x1|`` with the sign of ``x2`` (real only); derivative ``±sign(x1)``
    in ``x1``, 0 at ``x1 = 0`` (as PyTorch), and zero in ``x2``.

    >>> copysign(np.array([1.5, -2.0]), -1.0)
    array([-1.5, -2. ])
    """
    if out is not None or where is not True or dtype is not None or options:
        ufunc_keywords("copysign", out, where, dtype, options)
    x1, x2 = operand(x1, "copysign"), operand(x2, "copysign")
    dtype = _computing_dtype(np.copysign, "copysign", result_dtype(x1, x2))
    magnitude = fabs(as_dtype(x1, dtype))
    return _where(signbit(as_dtype(x2, dtype)), negative(magnitude), magnitude)


@implements(np.angle)
def angle(z, deg: bool = False):
    """``np.angle``: ``arctan2(imag(z), real(z))`` (in degrees with ``deg=True``); its
    derivative is ``Im(dz / z)``, 0 at ``z = 0`` (as arctan2), and zero for real ``z``
    (whose angle is 0 or pi).

    >>> angle(np.array([1j, -1.0]))
    array([1.57079633, 3.14159265])
    """
    z = operand(z, "angle")
    if dtype_of(z).kind == "c":
        out = arctan2(imag(z), real(z))
    else:
        out = arctan2(0, z)
    return multiply(out, 180 / np.pi) if deg else out


@implements(np.nan_to_num)
def nan_to_num(x, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None):
    """``np.nan_to_num``: NaN becomes ``nan``, infinities ``posinf``/``neginf`` (by default
    the dtype's largest finite values), for the real and imaginary parts alike. The
    derivative passes where the value is finite and is zero where it was replaced.

    >>> nan_to_num(np.array([np.nan, np.inf, -1.0]), posinf=9.0)
    array([ 0.,  9., -1.])
    """
    x = operand(x, "nan_to_num")
    dtype = dtype_of(x)
    if dtype.kind not in "fc":                                   # nothing to replace
        if isinstance(x, Frontend):
            return x
        library = library_of(x)
        if library is NUMPY:
            return np.array(x, copy=copy)
        return library.copy(x) if copy else x
    if dtype.kind == "c":
        parts = [nan_to_num(part, nan=nan, posinf=posinf, neginf=neginf)
                 for part in (real(x), imag(x))]
        return add(as_dtype(parts[0], dtype), multiply(as_dtype(parts[1], dtype), 1j))
    largest = float(np.finfo(dtype).max)
    with np.errstate(over="ignore"):             # a replacement too large for dtype is inf
        nan, posinf, neginf = (np.asarray(value, dtype) for value in
                               (nan, largest if posinf is None else posinf,
                                -largest if neginf is None else neginf))
    replacement = where(isnan(x), nan, where(signbit(x), neginf, posinf))
    return where(isfinite(x), x, replacement)


__all__ += [  # the names not declared with _unary or _binary
    "asin", "acos", "atan", "atan2", "asinh", "acosh", "atanh", "angle", "pow", "true_divide",
    "sign", "clip", "copysign", "mod", "round", "around", "nan_to_num", "interp", "polyval",
    "real_if_close", "bitwise_not", "bitwise_invert", "heaviside", "ldexp", "divmod", "modf",
    "fix", "frexp", "nextafter", "spacing", "i0", "iscomplex", "isreal",
]


@implements(np.fix)
def fix(x):
    """``np.fix``: rounding toward zero (``floor`` of the non-negative entries, ``ceil`` of
    the others), in ``x``'s dtype as NumPy's; derivative zero (piecewise constant).

    >>> fix(np.array([2.7, -2.7]))
    array([ 2., -2.])
    """
    x = operand(x, "fix")
    return where(greater_equal(x, 0), floor(x), ceil(x))


@implements(np.heaviside)
def heaviside(x1, x2, out=None, where=True, dtype=None, **options):
    """``np.heaviside``: 0 where ``x1 < 0``, ``x2`` where ``x1 == 0``, 1 where ``x1 > 0`` (NaN
    where ``x1`` is NaN), real only. Piecewise constant in ``x1`` (derivative 0, as JAX's);
    the derivative in ``x2`` goes to the entries where ``x1 == 0``.

    >>> heaviside(np.array([-1.5, 0.0, 2.0]), 0.5)
    array([0. , 0.5, 1. ])
    """
    if out is not None or where is not True or dtype is not None or options:
        ufunc_keywords("heaviside", out, where, dtype, options)
    x1, x2 = operand(x1, "heaviside"), operand(x2, "heaviside")
    dtype = _computing_dtype(np.heaviside, "heaviside", result_dtype(x1, x2))
    x1, x2 = as_dtype(x1, dtype), as_dtype(x2, dtype)
    step = _where(less(x1, 0), 0, _where(greater(x1, 0), 1, x2))
    return _where(isnan(x1), np.nan, step)


@implements(np.ldexp)
def ldexp(x1, x2, out=None, where=True, dtype=None, **options):
    """``np.ldexp``: ``x1 * 2**x2`` for integer exponents ``x2`` (not differentiated); the
    derivative in ``x1`` is ``2**x2``.

    >>> ldexp(np.array([0.75, -1.0]), np.array([2, -1]))
    array([ 3. , -0.5])
    """
    if out is not None or where is not True or dtype is not None or options:
        ufunc_keywords("ldexp", out, where, dtype, options)
    x1, x2 = operand(x1, "ldexp"), operand(x2, "ldexp")
    if dtype_of(x2).kind not in "biu":
        raise TensorTypeError(f"ldexp: the exponents x2 must be integers, got {dtype_of(x2)} "
                              "values (as NumPy's ldexp)")
    try:
        dtype = numpy_result_dtype(np.ldexp, dtype_of(x1), dtype_of(x2))
    except TypeError:
        raise TensorTypeError(f"ldexp: inputs of dtypes {dtype_of(x1)} and {dtype_of(x2)} are "
                              "not supported (NumPy's ldexp has no loop for them)") from None
    # 2**x2 in two halves, so that 2**x2 alone may overflow where the result does not
    half = elementwise(ew.floor_divide, as_dtype(x2, np.int64), np.int64(2))
    rest = subtract(as_dtype(x2, np.int64), half)
    twos = [exp2(as_dtype(k, dtype)) for k in (half, rest)]
    return multiply(multiply(as_dtype(x1, dtype), twos[0]), twos[1])


@implements(np.divmod)
def divmod(x1, x2, out=None, where=True, dtype=None, **options):
    """``np.divmod``: ``(floor_divide(x1, x2), remainder(x1, x2))``, each differentiated as
    those are.

    >>> divmod(np.array([7.0, -7.0]), 2.0)
    (array([ 3., -4.]), array([1., 1.]))
    """
    if out is not None or where is not True or dtype is not None or options:
        ufunc_keywords("divmod", out, where, dtype, options)
    return floor_divide(x1, x2), remainder(x1, x2)


@implements(np.modf)
def modf(x, out=None, where=True, dtype=None, **options):
    """``np.modf``: the fractional and integral parts of ``x``, both with ``x``'s sign (real
    only); derivatives 1 and 0.

    >>> modf(np.array([2.5, -0.25, np.inf]))
    (array([ 0.5 , -0.25,  0.  ]), array([  2.,  -0.,  inf]))
    """
    if out is not None or where is not True or dtype is not None or options:
        ufunc_keywords("modf", out, where, dtype, options)
    x = operand(x, "modf")
    dtype = _computing_dtype(np.modf, "modf", dtype_of(x))
    x = as_dtype(x, dtype)
    finite = _where(isinf(x), 0, x)                      # no inf - inf: the fraction is 0
    fraction = subtract(finite, trunc(finite))
    # NumPy's zero fractions carry x's sign (-0.0 for -2.0 and -inf)
    return _where(logical_and(equal(fraction, 0), signbit(x)), -0.0, fraction), trunc(x)


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """``np.interp``: piecewise-linear interpolation, differentiable in ``x``, ``fp`` and
    ``left``/``right``, with NumPy's values: ``fp[j]`` at a knot ``xp[j]`` (the last of
    repeated ones), ``left``/``right`` (by default ``fp[0]``/``fp[-1]``) outside
    ``[xp[0], xp[-1]]``, NaN at a NaN ``x`` (``fp[0]`` when there is one knot), the line
    through ``fp[j]`` or, where that gives NaN (infinite knots or heights), through
    ``fp[j + 1]``; complex ``fp`` part by part. ``period`` makes ``x`` and ``xp`` periodic
    (``left``/``right`` are ignored then, as NumPy does). As NumPy's, the knots must
    increase (unchecked; with NaN among them NumPy's own values depend on the order of
    ``x``, and so may differ from these).

    ``xp`` (and ``period``) are constants (the knots); which segment each ``x`` falls in
    is read from its values (in ``x``'s library: on its device, lazily for Dask), or
    under ``jit`` and ``vmap`` by a binary search over the knots (:func:`sorted_positions`).
    At a knot the derivative in ``x`` is the slope of the segment to its right (of the last
    segment at the last knot, 0 where that segment has no width); outside
    ``[xp[0], xp[-1]]`` and at a NaN ``x`` it is 0.

    >>> interp(np.array([0.5, 2.0]), np.array([0.0, 1.0, 3.0]), np.array([0.0, 2.0, 3.0]))
    array([1. , 2.5])
    >>> interp(np.array([-1.0, 3.5]), np.array([0.0, 1.0, 3.0]), np.array([0.0, 2.0, 3.0]),
    ...        period=4.0)
    array([3. , 1.5])
    """
    # read first: under jit the knots' values are not known (a ConcretizationError says so),
    # whether or not anything differentiates them
    knots = as_array(data_of(xp, "interp: reading xp"))
    if isinstance(xp, Frontend) and xp.carries_gradient:
        raise TensorNotSupportedError("interp: differentiating in xp is not supported; pass "
                                      "the knots as a constant (tnp.stop_gradient(xp))")
    x, fp = operand(x, "interp"), operand(fp, "interp")
    if "c" in (dtype_of(x).kind, dtype_of(knots).kind):
        raise TensorTypeError(f"interp: x and xp must be real, got {dtype_of(x)} and "
                              f"{dtype_of(knots)} (NumPy's interp casts them to float64)")
    n = shape_of(knots)[0] if len(shape_of(knots)) == 1 else None
    if n is None or len(shape_of(fp)) != 1 or n != shape_of(fp)[0]:
        raise TensorShapeError(f"interp: xp and fp must be 1-d of one length, got "
                               f"{shape_of(knots)} and {shape_of(fp)}")
    fp = as_dtype(fp, np.result_type(dtype_of(fp), np.float64))
    x = as_dtype(x, np.float64)
    if period is not None:
        x, knots, fp = _periodic(x, knots, fp, period)
        left = right = None
        n = shape_of(knots)[0]
    if n == 0:
        raise TensorShapeError("interp: xp is empty")
    bounds = [_bound(value, name, dtype_of(fp))
              for value, name in ((left, "left"), (right, "right"))]
    if all(value is None or isinstance(value, (np.ndarray, np.generic))
           for value in (x, knots, fp, *bounds)):       # constants: NumPy's own, its values
        return np.asarray(np.interp(x, knots, fp, *bounds))
    if data_if_known(x) is None:
        knots = np.asarray(to_host(knots), np.float64)
        count = sorted_positions(knots, x, "right") if n > 1 else None
        x_values = x
    else:
        where_x = as_array(data_of(x, "interp: reading x to find its segments"))
        array_xp, (x_values, knots) = operands([where_x, knots])
        knots = array_xp.astype(knots, np.dtype(np.float64), copy=False)
        count = array_xp.searchsorted(knots, x_values, side="right") if n > 1 else None
    if dtype_of(fp).kind != "c":
        return _interpolated(x, fp, knots, count, *bounds, np.nan, x_values)
    # NumPy interpolates the real and imaginary parts apart (its value at a NaN x: NaN + 0j)
    parts = [_interpolated(x, part(fp), knots, count,
                           *(None if b is None else part(b) for b in bounds), at_nan, x_values)
             for part, at_nan in ((real, np.nan), (imag, 0.0))]
    return add(as_dtype(parts[0], dtype_of(fp)), multiply(as_dtype(parts[1], dtype_of(fp)), 1j))


def _bound(value, name: str, dtype: np.dtype):
    """:func:`interp`'s ``left`` or ``right``: ``None``, or a scalar (complex only for a
    complex ``fp``, as NumPy's)."""
    if value is None:
        return None
    value = operand(value, "interp")
    if shape_of(value) != ():
        raise TensorShapeError(f"interp: {name} must be a scalar, got shape {shape_of(value)}")
    if dtype_of(value).kind == "c" and dtype.kind != "c":
        raise TensorTypeError(f"interp: {name} is complex but fp is real ({dtype}): its "
                              "imaginary part would be lost")
    return value


def _periodic(x, knots, fp, period):
    """NumPy's ``interp(..., period=p)``: ``x`` and the knots taken modulo ``|p|``, the knots
    sorted (and ``fp`` with them), and one knot added at each end, the other end's shifted
    by a period."""
    if isinstance(period, Frontend) and period.carries_gradient:
        raise TensorNotSupportedError("interp: differentiating in period is not supported")
    value = np.asarray(to_host(data_of(operand(period, "interp"), "interp: reading period")))
    if value.shape != () or value.dtype.kind not in "biuf":
        raise TensorTypeError(f"interp: period must be a real number, got {period!r}")
    period = abs(float(value))
    if period == 0:
        raise TensorShapeError("interp: period must be a non-zero value")
    knots = np.asarray(to_host(knots), np.float64) % period
    order = np.argsort(knots, kind="stable")
    knots = knots[order]
    knots = np.concatenate([knots[-1:] - period, knots, knots[:1] + period])
    order = np.concatenate([order[-1:], order, order[:1]])
    return remainder(x, period), knots, take(fp, order)


def _interpolated(x, fp, knots, count, left, right, at_nan, x_values):
    """:func:`interp` of the float64 ``x`` at the float64 knots ``knots`` (NumPy's or, for
    a known ``x``, its library's) and real heights ``fp``, given ``count``: how many knots
    are not above each ``x`` (``None`` for one knot); NumPy's arithmetic, so its values.
    ``x_values`` is ``x``, or its values when known: what decides where each ``x`` is (the
    where()s :func:`_unless` skips when no entry takes the exception)."""
    n = shape_of(knots)[0]
    # where x and the knots are NumPy's values, what depends on them only is NumPy's work
    # (no graph); else it is ops
    on = np if all(isinstance(values, (np.ndarray, np.generic))
                   for values in (x_values, knots, count)) else _INDEX_OPS
    if n == 1:                        # NumPy's: fp[0] unless x is below or above the knot
        result = take(fp, np.zeros(shape_of(x), dtype=np.intp))
    else:
        last = on.greater_equal(count, n)             # at the last knot (or past it: NaN)
        i = on.clip(on.subtract(count, 1), 0, n - 2)
        j = on.add(i, 1)
        k0, k1 = (knots[index] if on is np else _gathered(knots, index) for index in (i, j))
        f0, f1 = _gathered(fp, i), _gathered(fp, j)
        width = on.subtract(k1, k0)
        flat = on.equal(width, 0)                     # repeated last knots: no slope
        slope = _unless(flat, 0.0, divide(subtract(f1, f0), on.where(flat, 1.0, width)))
        # at an infinite or NaN x the line is drawn at k0: no inf or NaN in the derivatives
        # the where()s below set to zero
        at = _unless(on.logical_not(on.isfinite(x_values)), k0, x)
        from_k, from_f = on.where(last, k1, k0), _unless(last, f1, f0)
        result = add(multiply(slope, subtract(at, from_k)), from_f)
        if not _finite(knots, fp):
            # NumPy's fallbacks where the line is NaN (an infinite knot or height): the line
            # from the segment's other end, fp at a knot
            line_nan = isnan(result)
            other_k, other_f = on.where(last, k0, k1), _unless(last, f0, f1)
            other = add(multiply(slope, subtract(at, other_k)), other_f)
            other = _unless(logical_and(isnan(other), equal(f0, f1)), f0, other)
            at_knot = logical_and(line_nan, logical_or(last, equal(x_values, k0)))
            result = _unless(line_nan, _where(at_knot, from_f, other), result)
    below = take(fp, 0) if left is None else left
    above = take(fp, -1) if right is None else right
    result = _unless(on.less(x_values, knots[0]), below, result)
    result = _unless(on.greater(x_values, knots[-1]), above, result)
    return _unless(on.isnan(x_values), at_nan, result) if n > 1 else result


def _unless(exception, value, otherwise):
    """``where(exception, value, otherwise)``, or ``otherwise`` itself when ``exception`` is
    known now (NumPy's) to be false everywhere: the usual case of :func:`interp`'s eager
    path, which so records fewer ops."""
    known = data_if_known(exception) if isinstance(exception, Frontend) else exception
    if isinstance(known, (np.ndarray, np.generic)) and not known.any():
        return otherwise
    return _where(exception, value, otherwise)


# the ops _interpolated finds segments with, by NumPy's names (NumPy's own serve where the
# values are NumPy's)
_INDEX_OPS = SimpleNamespace(
    clip=clip, greater_equal=greater_equal, subtract=subtract, add=add, equal=equal, less=less,
    greater=greater, where=_where, logical_not=logical_not, isfinite=isfinite, isnan=isnan)


def _finite(knots, fp) -> bool:
    """Whether the knots and heights are known now (NumPy's) and all finite: then a line
    through a segment is never NaN, at a finite point of it."""
    known = data_if_known(fp) if isinstance(fp, Frontend) else fp
    return all(type(values) is np.ndarray and bool(np.all(np.isfinite(values)))
               for values in (knots, known))


def _gathered(values, index):
    """``values[index]`` of a 1-d ``values``, for an ``index`` in range by construction: no
    bounds check (which would read the indices: a Dask array's, say)."""
    gather = Gather(0, tuple(shape_of(values)), tuple(shape_of(index)))
    return first(bind(gather, values, index))


def sorted_positions(a, v, side: str):
    """``np.searchsorted(a, v, side)`` for a sorted 1-d ``a`` (NumPy's order: NaN last) and
    any ``v``, by ops, so either may be traced (``jit``, ``vmap``): a binary search of
    ``ceil(log2(len(a) + 1))`` steps, each a gather of ``a`` at one probe per entry of ``v``
    and a comparison, so time and memory grow as ``len(v) * log(len(a))``; for a tiny
    problem (``len(a) <= 8``, ``v.size <= 256``) fewer ops compare each entry of ``v`` with
    all of ``a``. (:func:`~primitives.tensor.numpy.reductions.searchsorted`'s and
    :func:`interp`'s; it lives here, below both.)

    >>> sorted_positions(np.array([1.0, 2.0, 2.0, np.nan]), np.array([2.0, np.nan]), "left")
    array([1, 3])
    """
    n = shape_of(a)[0]
    if n == 0:
        return filled_like(v, 0, np.intp, "searchsorted")
    goes_before = less if side == "left" else less_equal      # (where v is not NaN)
    if n <= _GRID_MAX_SORTED and math.prod(shape_of(v)) <= _GRID_MAX_VALUES:
        column = reshape(v, shape_of(v) + (1,))
        if side == "left":          # NaN's order on the grid: fewer ops than counting a's NaNs
            return sum(_sorts_before(a, column), axis=-1, dtype=np.intp)
        count = sum(goes_before(a, column), axis=-1, dtype=np.intp)
    else:
        count = _binary_searched(a, v, goes_before)
    if dtype_of(v).kind != "f":
        return count
    # v's NaNs compare as nothing above: NumPy sorts them after all of a's entries but its
    # NaNs (left), or after all (right)
    nan_position = n
    if side == "left" and dtype_of(a).kind == "f":
        nan_position = subtract(np.intp(n), sum(isnan(a), dtype=np.intp))
    return _where(isnan(v), nan_position, count)


def _binary_searched(a, v, goes_before):
    """How many entries of the 1-d ``a`` (not empty) ``goes_before(entry, v)`` says go before
    each entry of ``v``, for an ``a`` where they make a prefix (a sorted ``a``)."""
    # The prefix's length is built bit by bit from the highest: with steps s = 2**(K-1),
    # ..., 1 (2**K > n), each probes a at count + s - 1 and adds s if that entry goes before
    # v. A probe past the end reads a's last entry (a is padded so to 2**K - 1 entries): the
    # count passes n only when all of a goes before v, and the minimum brings it back to n.
    n = shape_of(a)[0]
    steps = n.bit_length()
    padded = take(a, np.minimum(np.arange(2 ** steps - 1), n - 1))
    step = 2 ** (steps - 1)
    before = goes_before(take(padded, step - 1), v)      # the first probe: one for all of v
    probe = np.intp(step - 1)
    while step > 1:
        step //= 2
        probe = add(probe, _where(before, np.intp(step), np.intp(-step)))
        probe_value = first(bind(Gather(0, (2 ** steps - 1,), shape_of(probe)), padded, probe))
        before = goes_before(probe_value, v)
    return minimum(add(probe, as_dtype(before, np.intp)), np.intp(n))


# sorted_positions compares each value with every entry of a sorted array this short (fewer
# ops than a binary search: faster, by 10-25 us a call under jit, while there are at most
# this many values)
_GRID_MAX_SORTED, _GRID_MAX_VALUES = 8, 256


def _sorts_before(x, y):
    """Whether ``x`` comes before ``y`` in NumPy's sort order (NaN last)."""
    less_than = less(x, y)
    if "f" not in (dtype_of(x).kind, dtype_of(y).kind):
        return less_than
    return logical_or(less_than, logical_and(isnan(y), logical_not(isnan(x))))


@implements(np.polyval)
def polyval(p, x):
    """``np.polyval`` by Horner's rule, differentiable in the coefficients ``p`` (highest
    power first) and in ``x``.

    >>> polyval(np.array([3.0, 0.0, 1.0]), np.array([2.0]))
    array([13.])
    """
    p, x = operand(p, "polyval"), operand(x, "polyval")
    if len(shape_of(p)) != 1:
        raise TensorShapeError(f"polyval: p must be 1-d, got shape {shape_of(p)}")
    result = multiply(x, False)             # NumPy's zeros_like(x): of x's dtype, bool too
    for i in range(shape_of(p)[0]):
        result = add(multiply(result, x), take(p, i))
    return result


@implements(np.real_if_close)
def real_if_close(a, tol=100):
    """``np.real_if_close``: the real part of a complex ``a`` whose imaginary parts are all
    below ``tol`` (in machine epsilons of ``a``'s dtype when ``tol > 1``), else ``a``
    unchanged. The result's dtype depends on ``a``'s values, which are read (under ``jit``
    or ``vmap``: ``ConcretizationError``); the derivative is that of the result returned
    (``real``'s, or the identity's).

    >>> real_if_close(np.array([2.1 + 4e-14j, 5.2 + 3e-15j]), tol=1000)
    array([2.1, 5.2])
    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda z: tnp.sum(real_if_close(z * z)))(np.array([1.0 + 0j]))
    array([2.+0.j])
    """
    a = operand(a, "real_if_close")
    dtype = dtype_of(a)
    if dtype.kind != "c":
        return not_itself(a, a)             # (an eager Tensor: a new tensor, never itself)
    if tol > 1:
        tol = np.finfo(dtype).eps * tol
    negligible = data_of(less(_abs(imag(a)), tol), "real_if_close: reading whether the "
                         "imaginary parts are negligible (the result's dtype depends on it)")
    return real(a) if bool(np.all(to_host(negligible))) else not_itself(a, a)


# --- floating-point representation ------------------------------------------------------------


def _float_operand(x, numpy_fn, name: str):
    """``x`` in the float dtype NumPy's ``numpy_fn`` computes it in (integers: float64)."""
    x = operand(x, name)
    return as_dtype(x, _computing_dtype(numpy_fn, name, dtype_of(x)))


def _exponent(x):
    """``e`` with ``|x| = m 2**e``, ``0.5 <= m < 1``, for finite nonzero ``x`` (0 elsewhere), as
    int32: ``floor(log2|x|) + 1``, corrected by one where ``log2`` rounded across an integer."""
    magnitude = _abs(x)
    regular = logical_and(isfinite(x), not_equal(x, 0))
    safe = _where(regular, magnitude, 1)
    guess = as_dtype(add(floor(log2(safe)), 1), np.int32)
    scaled = _abs(ldexp(safe, negative(guess)))
    guess = add(guess, _where(greater_equal(scaled, 1), 1, _where(less(scaled, 0.5), -1, 0)))
    return as_dtype(_where(regular, guess, 0), np.int32)


@implements(np.frexp)
def frexp(x, out=None, where=True, dtype=None, **options):
    """``np.frexp``: ``(m, e)`` with ``x = m * 2**e``, ``0.5 <= |m| < 1`` (``m = x``, ``e = 0``
    for 0, infinities and NaN); ``e`` is int32. The derivative of ``m`` is ``2**-e``.

    >>> frexp(np.array([3.0, -0.25, 0.0]))
    (array([ 0.75, -0.5 ,  0.  ]), array([ 2, -1,  0], dtype=int32))
    """
    if out is not None or where is not True or dtype is not None or options:
        ufunc_keywords("frexp", out, where, dtype, options)
    x = operand(x, "frexp")
    try:
        x = as_dtype(x, np.frexp(np.ones(1, dtype_of(x)))[0].dtype)
    except TypeError:
        raise TensorTypeError(f"frexp: input of dtype {dtype_of(x)} is not supported (NumPy's "
                              "frexp has no loop for it)") from None
    exponent = _exponent(stop_gradient(x))
    return ldexp(x, negative(exponent)), exponent


def _next_toward(x, target):
    """``np.nextafter`` of ``x`` toward ``target`` (one dtype, no derivative): ``x`` plus or
    minus its spacing (half of it moving down from a power of 2), at least the smallest
    subnormal; the largest finite value from an infinity; ``target`` where they are equal."""
    info = np.finfo(dtype_of(x))
    tiny = info.smallest_subnormal
    up = less(x, target)
    exponent = _exponent(x)
    power_of_two = equal(_abs(ldexp(x, negative(exponent))), 0.5)
    ulp = ldexp(np.ones((), info.dtype), subtract(exponent, info.nmant + 1))
    toward_zero = _where(greater(x, 0), logical_not(up), up)
    step = maximum(_where(logical_and(toward_zero, power_of_two), multiply(ulp, 0.5), ulp), tiny)
    moved = _where(up, add(x, step), subtract(x, step))
    moved = _where(equal(moved, 0), multiply(x, 0.0), moved)        # a zero with x's sign
    moved = _where(equal(x, 0), _where(up, tiny, -tiny), moved)
    moved = _where(isinf(x), _where(greater(x, 0), info.max, -info.max), moved)
    # equal: C's nextafter gives target (for float16 NumPy's own gives x: they differ in a
    # zero's sign only)
    moved = _where(equal(x, target), x if info.dtype == np.float16 else target, moved)
    return _where(logical_or(isnan(x), isnan(target)), np.nan, moved)


@implements(np.nextafter)
def nextafter(x1, x2, out=None, where=True, dtype=None, **options):
    """``np.nextafter``: the floating-point value after ``x1`` toward ``x2``. The step is
    piecewise constant: the derivative is 1 in ``x1`` (where it and the result are finite:
    ``x1 == x2`` too, where the result is ``x1``) and 0 in ``x2``.

    >>> nextafter(np.array([1.0, 0.0]), np.array([2.0, -1.0])) - np.array([1.0, 0.0])
    array([ 2.22044605e-016, -4.94065646e-324])
    """
    if out is not None or where is not True or dtype is not None or options:
        ufunc_keywords("nextafter", out, where, dtype, options)
    x1, x2 = operand(x1, "nextafter"), operand(x2, "nextafter")
    computing = _computing_dtype(np.nextafter, "nextafter", result_dtype(x1, x2))
    x1, x2 = as_dtype(x1, computing), as_dtype(x2, computing)
    value = _next_toward(stop_gradient(x1), stop_gradient(x2))
    # value - (stop(x1) - x1): exactly the value (x - +0.0 keeps a zero's sign too), with
    # x1's derivative, wherever x1 and the value are finite (x1 == x2 and zeros included:
    # nextafter(x, x) is x, its derivative 1)
    plain = logical_and(isfinite(value), isfinite(x1))
    finite_x1 = _where(plain, x1, 0)
    return _where(plain, subtract(value, subtract(stop_gradient(finite_x1), finite_x1)), value)


@implements(np.spacing)
def spacing(x, out=None, where=True, dtype=None, **options):
    """``np.spacing``: the distance from ``x`` to the next value away from zero (negative for
    negative ``x``; NaN for infinities); piecewise constant, derivative 0.

    >>> spacing(np.array([1.0, -1.0]))
    array([ 2.22044605e-16, -2.22044605e-16])
    """
    if out is not None or where is not True or dtype is not None or options:
        ufunc_keywords("spacing", out, where, dtype, options)
    given = _float_operand(x, np.spacing, "spacing")
    x = stop_gradient(given)
    # (NumPy's float16 spacing steps toward +inf from negative values too: positive there)
    away = np.inf if dtype_of(x) == np.float16 else _where(signbit(x), -np.inf, np.inf)
    gap = subtract(_next_toward(x, as_dtype(operand(away), dtype_of(x))), x)
    gap = _where(equal(x, 0), np.finfo(dtype_of(x)).smallest_subnormal, gap)
    # recorded with derivative 0 (as floor's), not cut off: adding 0 * x changes no value
    return add(_where(isinf(x), np.nan, gap), multiply(_where(isinf(x), 0, given), 0))


# NumPy's (Cephes') Chebyshev coefficients of exp(-x) i0(x) on [0, 8] and of
# exp(-x) sqrt(x) i0(x) on (8, inf), in 32/x - 2
_I0_A = (
    -4.4153416464793395e-18, 3.3307945188222384e-17, -2.431279846547955e-16,
    1.715391285555133e-15, -1.1685332877993451e-14, 7.676185498604936e-14,
    -4.856446783111929e-13, 2.95505266312964e-12, -1.726826291441556e-11,
    9.675809035373237e-11, -5.189795601635263e-10, 2.6598237246823866e-09,
    -1.300025009986248e-08, 6.046995022541919e-08, -2.670793853940612e-07,
    1.1173875391201037e-06, -4.4167383584587505e-06, 1.6448448070728896e-05,
    -5.754195010082104e-05, 0.00018850288509584165, -0.0005763755745385824,
    0.0016394756169413357, -0.004324309995050576, 0.010546460394594998, -0.02373741480589947,
    0.04930528423967071, -0.09490109704804764, 0.17162090152220877, -0.3046826723431984,
    0.6767952744094761)
_I0_B = (
    -7.233180487874754e-18, -4.830504485944182e-18, 4.46562142029676e-17,
    3.461222867697461e-17, -2.8276239805165836e-16, -3.425485619677219e-16,
    1.7725601330565263e-15, 3.8116806693526224e-15, -9.554846698828307e-15,
    -4.150569347287222e-14, 1.54008621752141e-14, 3.8527783827421426e-13,
    7.180124451383666e-13, -1.7941785315068062e-12, -1.3215811840447713e-11,
    -3.1499165279632416e-11, 1.1889147107846439e-11, 4.94060238822497e-10,
    3.3962320257083865e-09, 2.266668990498178e-08, 2.0489185894690638e-07,
    2.8913705208347567e-06, 6.889758346916825e-05, 0.0033691164782556943, 0.8044904110141088)


def _chebyshev(x, coefficients):
    """NumPy's ``_chbevl``: the Chebyshev series ``coefficients`` at ``x`` (Clenshaw)."""
    b0, b1, b2 = coefficients[0], 0.0, 0.0
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = add(subtract(multiply(x, b1), b2), c)
    return multiply(0.5, subtract(b0, b2))


@implements(np.i0)
def i0(x):
    """``np.i0``: the modified Bessel function of the first kind, order 0, by NumPy's own
    Chebyshev approximation (its values), differentiable (the derivative, ``i1(x)``, is the
    approximation's: within about 1e-14 of it). Real only, as NumPy's.

    >>> i0(np.array([0.0, 1.0]))
    array([1.        , 1.26606588])
    """
    x = operand(x, "i0")
    if dtype_of(x).kind == "c":
        raise TensorTypeError("i0: not supported for complex values (as NumPy's i0)")
    if dtype_of(x).kind != "f":
        x = as_dtype(x, np.float64)
    x = _abs(x)
    small = less_equal(x, 8.0)
    # each branch at a safe point where the other is taken: no inf (or NaN derivative) there
    near = _where(small, x, 0.0)
    far = _where(small, 9.0, x)
    inner = multiply(exp(near), _chebyshev(subtract(divide(near, 2.0), 2), _I0_A))
    outer = divide(multiply(exp(far), _chebyshev(subtract(divide(32.0, far), 2.0), _I0_B)),
                   sqrt(far))
    return _where(small, inner, outer)


# --- complex or real entries -------------------------------------------------------------------


@implements(np.iscomplex)
def iscomplex(x):
    """``np.iscomplex``: whether each entry has a nonzero imaginary part (all false for a real
    array); a boolean result, not differentiated.

    >>> iscomplex(np.array([1 + 1j, 2 + 0j]))
    array([ True, False])
    """
    x = operand(x, "iscomplex")
    return not_equal(imag(x), 0)


@implements(np.isreal)
def isreal(x):
    """``np.isreal``: whether each entry's imaginary part is zero (all true for a real array);
    a boolean result, not differentiated.

    >>> isreal(np.array([1 + 1j, 2 + 0j]))
    array([False,  True])
    """
    x = operand(x, "isreal")
    return equal(imag(x), 0)
