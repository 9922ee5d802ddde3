"""Cases for the elementwise functions of ``primitives.tensor.numpy.mathfuncs`` (and ``power``).

Inputs keep away from the points where a function is not smooth (branch cuts, poles,
the jumps of ``floor`` and ``mod``), so finite differences are meaningful; the edges
themselves (``sinc`` at 0, ``power`` at 0, ``logaddexp`` at ``-inf``, ``hypot`` at the
origin...) are pinned in ``tests/test_mathfuncs.py``.
"""

import numpy as np

import primitives.tensor as tnp
from numpy_cases import ALL_DTYPES, REAL_DTYPES, Case, distinct, fixed, normal, positive, uniform

HOLOMORPHIC = "holomorphic: the VJP multiplies by conj(f'(z))"
ROUNDING = "piecewise constant: derivative 0 (as JAX)"
BOOLEAN = "a boolean result: not differentiated"
INF = np.inf
_EXPONENTS = np.array([3, -2, 0])                  # ldexp's integer exponents

# complex inputs for functions with branch cuts on the imaginary axis: real parts > 0
right_half = uniform((2, 3), 0.3, 1.5)
# arguments of arcsin, arccos, arctanh: inside (-1, 1), off the cuts
inside_unit = uniform((2, 3), -0.8, 0.8)


def nonfinite(rng, dtype):
    """NaN, infinities and ordinary values (complex: in both parts)."""
    x = np.array([[1.5, np.nan, INF], [-INF, -2.0, 0.0]])
    if np.dtype(dtype).kind == "c":
        return (x + 1j * x[::-1, ::-1]).astype(dtype)
    return x.astype(dtype)


def unary(name, inputs, note=HOLOMORPHIC, dtypes=ALL_DTYPES, **options):
    """A case of ``tnp.<name>`` against ``np.<name>``."""
    return Case(name, getattr(tnp, name), getattr(np, name), (inputs,), dtypes=dtypes,
                note=note, **options)


def binary(name, first, second, note, dtypes=REAL_DTYPES, **options):
    """A case of ``tnp.<name>(x1, x2)`` against NumPy's, differentiated in both."""
    return Case(name, getattr(tnp, name), getattr(np, name), (first, second), wrt=(0, 1),
                dtypes=dtypes, note=note, **options)


CASES = [
    # trigonometric and hyperbolic
    unary("sinh", normal((2, 3))),
    unary("cosh", normal((2, 3))),
    unary("tan", uniform((2, 3), -1.0, 1.0)),
    unary("arcsin", inside_unit, note=f"{HOLOMORPHIC}; infinite derivative at ±1"),
    unary("arccos", inside_unit, note=f"{HOLOMORPHIC}; infinite derivative at ±1"),
    unary("arctan", right_half),
    unary("arcsinh", right_half),
    unary("arccosh", uniform((2, 3), 1.2, 3.0), note=f"{HOLOMORPHIC}; infinite derivative at 1"),
    unary("arctanh", inside_unit, note=f"{HOLOMORPHIC}; infinite derivative at ±1"),
    unary("asin", inside_unit), unary("acos", inside_unit), unary("atan", right_half),
    unary("asinh", right_half), unary("acosh", uniform((2, 3), 1.2, 3.0)),
    unary("atanh", inside_unit),
    binary("arctan2", normal((2, 3)), normal((3,)),
           "real only; derivative 0 at (0, 0) (PyTorch; JAX: NaN)"),
    binary("atan2", normal((2, 3)), normal((2, 3)), "real only"),
    binary("hypot", normal((2, 3)), normal((3,)),
           "real only; derivative 0 at (0, 0), as |z| at 0 (JAX: 1/2 each; PyTorch: NaN)"),
    unary("deg2rad", normal((2, 3)), note="real only; linear", dtypes=REAL_DTYPES),
    unary("rad2deg", normal((2, 3)), note="real only; linear", dtypes=REAL_DTYPES),
    unary("radians", normal((2, 3)), note="real only; linear", dtypes=REAL_DTYPES),
    unary("degrees", normal((2, 3)), note="real only; linear", dtypes=REAL_DTYPES),
    unary("sinc", uniform((2, 3), -2.5, 2.5),
          note=f"{HOLOMORPHIC}; derivatives of all orders exact at and near 0"),
    unary("sinc", fixed([0.0, 1e-9, -0.25, 1.0]), label="near-0"),
    Case("angle", tnp.angle, np.angle, (normal((2, 3)),),
         note="Im(dz / z); 0 at z = 0 and for real z"),
    Case("angle", lambda z: tnp.angle(z, deg=True), lambda z: np.angle(z, deg=True),
         (normal((2, 3)),), label="deg"),
    # exponents and logarithms
    unary("expm1", normal((2, 3))),
    unary("cbrt", fixed([-2.0, -0.5, 0.7, 3.0]), note="real only; infinite derivative at 0",
          dtypes=REAL_DTYPES),
    unary("log1p", uniform((2, 3), -0.5, 2.0)),
    unary("log2", positive((2, 3))),
    unary("log10", positive((2, 3))),
    unary("exp2", normal((2, 3))),
    unary("square", normal((2, 3))),
    unary("reciprocal", positive((2, 3))),
    binary("logaddexp", normal((2, 3)), normal((3,)),
           "real only; no NaN at -inf or large inputs; 1/2 each where both are ±inf"),
    binary("logaddexp", fixed([-INF, 0.0, 1000.0, 3.0]), fixed([1.0, -INF, 1000.0, 700.0]),
           "", label="infinite-large"),
    binary("logaddexp2", normal((2, 3)), normal((3,)), "real only; as logaddexp"),
    Case("power", tnp.power, np.power, (positive((2, 3)), normal((3,))), wrt=(0, 1),
         note=f"{HOLOMORPHIC} in both; d/dx 0 where y == 0 (PyTorch; JAX 0.10: nan at "
              "x == y == 0); d/dy 0 at x == 0 for y >= 0 (JAX)"),
    Case("power", lambda y: tnp.power(2.0, y), lambda y: np.power(2.0, y), (normal((2, 3)),),
         label="constant-base"),
    Case("power", lambda x: tnp.power(x, 3), lambda x: np.power(x, 3), (normal((2, 3)),),
         label="integer-exponent"),
    Case("power", lambda x: tnp.power(x, -1.5), lambda x: np.power(x, -1.5),
         (positive((2, 3)),), label="float-exponent"),
    Case("power", lambda x, y: x ** y, lambda x, y: x ** y, (positive((2, 3)), normal((2, 3))),
         wrt=(0, 1), label="operator"),
    Case("power", lambda y: 3.0 ** y, lambda y: 3.0 ** y, (normal((3,)),), label="rpow"),
    Case("pow", tnp.pow, np.pow, (positive((2, 3)), normal((3,))), wrt=(0, 1)),
    binary("float_power", positive((2, 3)), normal((3,)),
           "power in float64 (complex128 for complex operands), as NumPy's",
           dtypes=ALL_DTYPES),
    Case("true_divide", tnp.true_divide, np.true_divide, (normal((2, 3)), positive((3,))),
         wrt=(0, 1)),
    # absolute value, extrema, remainders
    unary("fabs", distinct((2, 3)), note="real only; derivative sign(x), 0 at 0",
          dtypes=REAL_DTYPES),
    binary("copysign", distinct((2, 3)), normal((3,)),
           "real only; derivative ±sign(x1), 0 at x1 = 0 (PyTorch); 0 in x2"),
    binary("fmax", distinct((2, 3)), uniform((3,), -0.1, 0.1),
           "NaN loses to a number; ties split the derivative evenly", dtypes=ALL_DTYPES),
    binary("fmin", distinct((2, 3)), uniform((3,), -0.1, 0.1),
           "NaN loses to a number; ties split the derivative evenly", dtypes=ALL_DTYPES),
    binary("fmax", fixed([np.nan, 1.0, 2.0]), fixed([0.5, np.nan, -1.0]), "", label="nan"),
    binary("remainder", uniform((2, 3), -4.0, 4.0), fixed([1.3, -0.7, 2.1]),
           "real only; the sign of x2; derivatives 1 and -floor(x1/x2) (JAX, PyTorch)"),
    binary("mod", uniform((2, 3), -4.0, 4.0), fixed([1.3, -0.7, 2.1]), "real only"),
    binary("fmod", uniform((2, 3), -4.0, 4.0), fixed([1.3, -0.7, 2.1]),
           "real only; the sign of x1; derivatives 1 and -trunc(x1/x2) (JAX, PyTorch)"),
    Case("remainder", lambda x, y: x % y, lambda x, y: x % y,
         (uniform((2, 3), -4.0, 4.0), fixed([1.3, -0.7, 2.1])), wrt=(0, 1),
         dtypes=REAL_DTYPES, label="operator"),
    binary("floor_divide", uniform((2, 3), -4.0, 4.0), fixed([1.3, -0.7, 2.1]), ROUNDING),
    Case("floor_divide", lambda x, y: x // y, lambda x, y: x // y,
         (uniform((2, 3), -4.0, 4.0), fixed([1.3, -0.7, 2.1])), wrt=(0, 1),
         dtypes=REAL_DTYPES, label="operator"),
    Case("divmod", tnp.divmod, np.divmod, (uniform((2, 3), -4.0, 4.0), fixed([1.3, -0.7, 2.1])),
         wrt=(0, 1), dtypes=REAL_DTYPES, note="floor_divide's and remainder's derivatives"),
    unary("modf", uniform((2, 3), -4.0, 4.0), dtypes=REAL_DTYPES,
          note="real only; derivatives 1 (fraction) and 0 (integral part)"),
    Case("heaviside", tnp.heaviside, np.heaviside,
         (fixed([[-1.5, 0.0, 2.0], [0.0, 0.3, -0.2]]), normal((3,))), wrt=(1,),
         dtypes=REAL_DTYPES, note="derivative 0 in x1 (as JAX); in x2 where x1 == 0"),
    Case("ldexp", lambda x: tnp.ldexp(x, _EXPONENTS), lambda x: np.ldexp(x, _EXPONENTS),
         (normal((2, 3)),), dtypes=REAL_DTYPES,
         note="derivative 2**x2 in x1; the integer exponents x2 are not differentiated"),
    unary("frexp", uniform((2, 3), -40.0, 40.0), dtypes=REAL_DTYPES,
          note="derivative 2**-e of the mantissa; the exponent is an integer"),
    binary("nextafter", normal((2, 3)), normal((3,)),
           "derivative 1 in x1, 0 in x2 (a step of one ulp, piecewise constant)"),
    unary("spacing", uniform((2, 3), -40.0, 40.0), dtypes=REAL_DTYPES,
          note="piecewise constant: derivative 0"),
    unary("i0", uniform((2, 4), -12.0, 12.0), dtypes=REAL_DTYPES,
          note="NumPy's Chebyshev approximation and its derivative (i1 within 1e-14); real "
               "only"),
    unary("iscomplex", fixed([[1.0, 2.0], [0.0, -1.5]]), wrt=(), note="a boolean result"),
    unary("isreal", fixed([[1.0, 2.0], [0.0, -1.5]]), wrt=(), note="a boolean result"),
    Case("iscomplex", lambda x: tnp.iscomplex(x * (1 + 0j) + 1j * (x > 0)),
         lambda x: np.iscomplex(x * (1 + 0j) + 1j * (x > 0)), (normal((2, 3)),), wrt=(),
         dtypes=("float64",), label="mixed", note="a boolean result"),
    # rounding
    unary("fix", uniform((2, 3), -3.0, 3.0), note=f"real only; {ROUNDING}", dtypes=REAL_DTYPES),
    unary("floor", uniform((2, 3), -3.0, 3.0), note=f"real only; {ROUNDING}",
          dtypes=REAL_DTYPES),
    unary("ceil", uniform((2, 3), -3.0, 3.0), note=f"real only; {ROUNDING}",
          dtypes=REAL_DTYPES),
    unary("trunc", uniform((2, 3), -3.0, 3.0), note=f"real only; {ROUNDING}",
          dtypes=REAL_DTYPES),
    unary("rint", uniform((2, 3), -3.0, 3.0), note=ROUNDING),
    unary("round", uniform((2, 3), -3.0, 3.0), note=ROUNDING),
    Case("round", lambda x: tnp.round(x, 2), lambda x: np.round(x, 2),
         (uniform((2, 3), -3.0, 3.0),), note=ROUNDING, label="decimals"),
    unary("around", uniform((2, 3), -3.0, 3.0), note=ROUNDING),
    Case("clip", lambda x, low, high: tnp.clip(x, low, high), np.clip,
         (distinct((2, 3)), uniform((3,), -0.6, -0.45), uniform((3,), 0.45, 0.6)),
         wrt=(0, 1, 2), dtypes=REAL_DTYPES, label="array-bounds",
         note="ties with a bound split the derivative evenly (JAX)"),
    Case("clip", lambda x: tnp.clip(x, 0.0, 1.0), lambda x: np.clip(x, 0.0, 1.0),
         (fixed([0.0, 1.0, 0.5, -2.0]),), dtypes=REAL_DTYPES, label="ties",
         second_order=False, note="at a tie the derivative is 1/2 (the central difference); "
         "the first derivative jumps there, so no second order"),
    # NaN and infinities
    unary("nan_to_num", nonfinite,
          note="the derivative passes where the value is finite, 0 where it is replaced"),
    Case("nan_to_num", lambda x: tnp.nan_to_num(x, nan=-1.0, posinf=5.0, neginf=-5.0),
         lambda x: np.nan_to_num(x, nan=-1.0, posinf=5.0, neginf=-5.0), (nonfinite,),
         label="values"),
    unary("isnan", nonfinite, note=BOOLEAN, wrt=()),
    unary("isinf", nonfinite, note=BOOLEAN, wrt=()),
    unary("isfinite", nonfinite, note=BOOLEAN, wrt=()),
    unary("signbit", fixed([-0.0, 0.0, -1.5, np.nan, -INF]), note=BOOLEAN, wrt=(),
          dtypes=REAL_DTYPES),
    # boolean algebra: masks combine under jit and vmap
    *[Case(name, lambda a, b, f=getattr(tnp, name): f(a > 0, b < 0.5),
           lambda a, b, f=getattr(np, name): f(a > 0, b < 0.5),
           (normal((2, 3)), normal((3,))), wrt=(), dtypes=REAL_DTYPES, note=BOOLEAN)
      for name in ("logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
                   "bitwise_xor")],
    *[Case(name, lambda a, f=getattr(tnp, name): f(a > 0), lambda a, f=getattr(np, name): f(a > 0),
           (normal((2, 3)),), wrt=(), dtypes=REAL_DTYPES, note=BOOLEAN)
      for name in ("logical_not", "invert")],
    *[Case(name, lambda a, b, f=getattr(tnp, name): f(tnp.astype(8 * a, np.int64),
                                                      tnp.astype(8 * b, np.int64)),
           lambda a, b, f=getattr(np, name): f((8 * a).astype(np.int64), (8 * b).astype(np.int64)),
           (normal((2, 3)), normal((3,))), wrt=(), dtypes=REAL_DTYPES, label="integers",
           note="bitwise on integers, as NumPy: not differentiated")
      for name in ("bitwise_and", "bitwise_or", "bitwise_xor")],
    Case("copy", tnp.copy, np.copy, (normal((2, 3)),), note="a new array: derivative 1"),
    Case("real_if_close", tnp.real_if_close, np.real_if_close, (normal((2, 3)),),
         dtypes=REAL_DTYPES, note="real input: returned as is; complex input: the dtype "
         "depends on the values, which are read (not under jit)"),
]
