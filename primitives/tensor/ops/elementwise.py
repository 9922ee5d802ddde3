"""Elementwise primitives: operands of one shape and dtype, rules next to each op.

Unary ops with a holomorphic derivative are defined in one line from that
derivative, the way ChainRules' ``@scalar_rule`` does; the derivative is
written on symbolic handles (``x``: the input, ``y``: the output) and becomes
primal work in the linear graph:

>>> exp.eval(None, [np.zeros(2)])
[array([1., 1.])]

Complex numbers follow tidu's convention: the JVP of a holomorphic ``f`` is
``f'(z) dz``; transposes are adjoints for ``Re(sum(conj(a) * b))``, so
multiplication by ``c`` transposes to multiplication by ``conj(c)`` (``mul_conj``),
and division by ``c`` to division by ``conj(c)`` (``div_conj``).

Piecewise-constant ops (``floor``, ``round``, ``floor_divide``...) have a zero
tangent, as in JAX, and predicates (``isnan``...) none. Binary ops whose
derivatives need a helper array (``fmax``'s tie weights, ``logaddexp``'s logistic
weights, ``remainder``'s quotient) emit it as a primal op of its own.

``maximum`` and ``minimum`` split the tangent evenly at ties (as JAX does), and
so do ``fmax`` and ``fmin``. ``power`` (``x ** y``, both operands arrays) selects
its derivative's values at ``x = 0`` (:mod:`.select`). ``ComplexAbs`` is ``|z|``
of a complex ``z`` (``abs_real`` is the real one), and ``Real``/``Imag`` map
complex to real; their transposes give complex cotangents.

Each op's declaration states the facts others ask of it: ``keeps_dtype=True``
(of :func:`unary` and :func:`binary`) marks a ufunc whose result keeps its floating
operand's dtype, so its results may go into reused buffers; ``floating=True`` a
result floating whatever the operands (``exp`` of integers), which :mod:`.simplify`
reads through ``floating_output()``.

Every op here batches (:func:`tidu.batch`): its operands have one shape, so they
share the first batched operand's batch axis, and an unbatched operand is
broadcast along it (:func:`.shape.batch_elementwise`). The exception is
:class:`AddBroadcast`, ``x + b`` with ``b`` broadcast by NumPy's rules (a bias added
to a batch, one op where it would be two); it batches as that pair.

Every op computes on the arrays of its inputs' library (:mod:`..backends`): NumPy
arrays through NumPy's ufuncs (into reused buffers where they fit), other
libraries' through the Array API names of their namespace, and the functions the
standard lacks (``sinc``, ``fmax``, ``fmod``...) through the table of
:func:`~primitives.tensor.backends.define`.

It imports :mod:`.base`, :mod:`.shape`, :mod:`.constants` and :mod:`.select`, of
:mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

import math
import operator
import sys
from functools import partial
from typing import Callable, NamedTuple

import numpy as np

from tidu import ADRuleError, ADRuleKind
from tidu.graph import External, Local
from primitives.exact import exact_identity
from primitives.tensor import buffers
from primitives.tensor.backends import NUMPY, define, library_of, operands
from primitives.tensor.core import dtype_of
from primitives.tensor.ops.base import (
    LIN,
    LIN_FT,
    LIN_TF,
    LIN_TT,
    LinearOp,
    TensorPrimitive,
    apply_ufunc,
    FusedTangent,
    check_ordered,
    emit,
    linear_mask,
    not_linear,
    real_dtype_name,
    reusable_output,
    same_dtype,
    tensor_op,
    with_batch,
)
from primitives.tensor.ops.constants import Full
from primitives.tensor.ops.select import Compare, Select
from primitives.tensor.ops.shape import (BroadcastInDim, batch_all_at, batch_elementwise,
                                         batch_spread)


# --- functions outside the Array API standard, with NumPy's semantics -------------------


def _of(module: str, name: str) -> Callable:
    """``module.name``, looked up when called: arrays of that library exist by then, so the
    module is imported (tidu never imports it)."""
    return lambda *args: getattr(sys.modules[module], name)(*args)


def _torch_round(x, decimals: int = 0):
    """``np.round`` on a PyTorch tensor: half to even, complex parts apart, integers kept."""
    torch = sys.modules["torch"]
    if x.is_complex():
        return torch.complex(_torch_round(x.real, decimals), _torch_round(x.imag, decimals))
    if x.is_floating_point():
        return torch.round(x, decimals=decimals)
    if decimals >= 0:
        return torch.round(x)                              # a copy, as NumPy's
    return torch.round(x.double(), decimals=decimals).to(x.dtype)


for _name in ("sinc", "exp2", "deg2rad", "rad2deg", "logaddexp2", "fmax", "fmin", "fmod"):
    define(_name, numpy=getattr(np, _name), torch=_of("torch", _name),
           dask=_of("dask.array", _name), cupy=_of("cupy", _name))
define("rint", numpy=np.rint, torch=_torch_round, dask=_of("dask.array", "rint"),
       cupy=_of("cupy", "rint"))
define("round_decimals", numpy=np.round, torch=_torch_round, dask=_of("dask.array", "round"),
       cupy=_of("cupy", "round"))


def _api(name: str) -> Callable:
    """``(xp, *arrays) -> xp.<name>(*arrays)``: an op's function for non-NumPy arrays."""
    return lambda xp, *arrays: getattr(xp, name)(*arrays)


def _operator_api(fn: Callable, name: str) -> Callable:
    """``(xp, x, y) -> fn(x, y)`` (an ``operator`` function) on two arrays of one type and
    dtype: the standard's ``x + y`` is its ``add``, without the namespace wrapper's
    promotion work. Otherwise ``xp.<name>(x, y)``, which promotes as the standard says
    (PyTorch's own operators would not: a 0-d float64 tensor times a float32 one is
    float32 there)."""
    by_name = _api(name)

    def api(xp, x, y):
        if type(x) is type(y) and x.dtype == y.dtype:
            return fn(x, y)
        return by_name(xp, x, y)
    return api


def _every_library(fn: Callable) -> Callable:
    """``fn``, which takes every library's arrays, as an op's function ``(xp, *arrays)``."""
    return lambda xp, *arrays: fn(*arrays)


def _conj_api(xp, x):
    """``conj(x)`` on complex ``x``, real ``x`` itself (``np.conj`` would copy it)."""
    return xp.conj(x) if dtype_of(x).kind == "c" else x


# --- symbolic handles for derivative expressions ------------------------------------


class Sym:
    """A value inside a rule; arithmetic on it emits primal ops into the rule's builder."""

    __slots__ = ("builder", "ref")

    def __init__(self, builder, ref) -> None:
        self.builder = builder
        self.ref = ref

    def _emit(self, op, *others) -> "Sym":
        return Sym(self.builder, Local(emit(self.builder, op, [self.ref] + [o.ref for o in others])))

    def __add__(self, other):
        return self._emit(add, other) if isinstance(other, Sym) else self._emit(Affine(1, other))

    __radd__ = __add__

    def __sub__(self, other):
        return self._emit(sub, other) if isinstance(other, Sym) else self._emit(Affine(1, -other))

    def __rsub__(self, other):                      # other - self
        return self._emit(Affine(-1, other))

    def __mul__(self, other):
        return self._emit(mul, other) if isinstance(other, Sym) else self._emit(Scale(other))

    __rmul__ = __mul__

    def __truediv__(self, other):
        return self._emit(div, other) if isinstance(other, Sym) else self._emit(Scale(1 / other))

    def __rtruediv__(self, other):                  # other / self
        inverse = self._emit(reciprocal)
        return inverse if _is_real(other) and other == 1 else inverse._emit(Scale(other))

    def __neg__(self):
        return self._emit(neg)

    def __pow__(self, n: int):
        return self._emit(IntegerPow(n))

    def apply(self, op, *others: "Sym") -> "Sym":
        """``op(self, *others)``: a unary op, or a binary one with ``others[0]`` second."""
        return self._emit(op, *others)


def scale_tangent(builder, tangent: int, factor: Sym) -> int:
    """``tangent * factor`` as linear work (``factor`` is primal)."""
    return emit(builder, mul, [Local(tangent), factor.ref], LIN_TF)


# --- unary ops ----------------------------------------------------------------------


class _UnaryRules(NamedTuple):
    fn: Callable                 # on NumPy arrays
    jvp: Callable | None         # (builder, x_key, y_key, tangent) -> tangent id | None
    transpose: Callable | None   # (builder, cotangent, x_key) -> cotangent id | None
    into: Callable | None        # fn(x, out=buffer), for ufuncs that keep the dtype
    api: Callable                # (xp, x) -> result, on other libraries' arrays
    floating: bool               # the result is floating whatever the operand's dtype
    real_only: bool              # complex operands are refused (NumPy has no complex loop)


_UNARY: dict[str, _UnaryRules] = {}


@tensor_op
class Unary(TensorPrimitive):
    """An elementwise unary op, by name; its rules live in this module's registry."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    name: str
    batch_rule = batch_elementwise

    def floating_output(self) -> bool:
        return _UNARY[self.name].floating

    @property
    def takes_complex(self) -> bool:
        """Whether the op is defined on complex operands (declared with ``real_only``)."""
        return not _UNARY[self.name].real_only

    def eval(self, ctx, inputs):
        rules = _UNARY[self.name]
        if type(inputs[0]) is not np.ndarray:      # (on the NumPy path: no call more)
            xp, inputs = operands(inputs, self)
            if xp is not NUMPY.xp:
                return [rules.api(xp, inputs[0])]
        return [rules.fn(inputs[0])]

    def eval_reusing(self, ctx, inputs, reusable):
        """``eval``, into the input when a compiled program no longer reads it and it fits."""
        into = _UNARY[self.name].into
        out = None if into is None else reusable_output(inputs, reusable)
        return self.eval(ctx, inputs) if out is None else [into(inputs[0], out=out)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        rule = _UNARY[self.name].jvp
        if rule is None:
            raise ADRuleError(self.name, ADRuleKind.JVP)
        return [rule(builder, primal_inputs[0], primal_outputs[0], tangent_inputs[0])]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        rule = _UNARY[self.name].transpose
        if rule is None:
            raise ADRuleError(self.name, ADRuleKind.TRANSPOSE, f"{self.name} is not linear")
        return [rule(builder, cotangent_outputs[0], inputs[0].key)]


def unary(name: str, fn: Callable, api: str | Callable | None = None, *,
          deriv: Callable | None = None, jvp: Callable | None = None,
          transpose: Callable | None = None, keeps_dtype: bool = False,
          floating: bool = False, real_only: bool = False) -> Unary:
    """Register an elementwise unary op and return it.

    ``fn`` computes it on NumPy arrays; ``api`` on other libraries' arrays: a name in
    their namespace or a function ``(xp, x)`` (by default ``fn`` itself, which must
    then take every library's arrays). ``deriv(x, y)`` gives ``f'(x)`` from symbolic
    input ``x`` and output ``y`` (the JVP is then ``f'(x) * t``); or pass a full
    ``jvp(builder, x, y, t)``. Linear ops also give ``transpose(builder, ct, x)``.

    ``keeps_dtype``: ``fn`` is a ufunc whose result has its floating operand's dtype, so
    a big result goes into a reused buffer (:func:`.base.apply_ufunc`), or into an input
    a compiled program no longer reads (``eval_reusing``). ``floating``: the result is
    floating (real or complex) whatever the operand's dtype. ``real_only``: complex
    operands are refused (NumPy's ufunc has no complex loop, or the set uses another op
    for them).
    """
    if deriv is not None:
        def jvp(builder, x, y, t, _deriv=deriv):
            factor = _deriv(Sym(builder, External(x)), Sym(builder, External(y)))
            return scale_tangent(builder, t, factor)
    api = _api(api) if isinstance(api, str) else api or _every_library(fn)
    into = fn if keeps_dtype else None
    _UNARY[name] = _UnaryRules(_buffered_unary(fn) if keeps_dtype else fn, jvp, transpose,
                               into, api, floating, real_only)
    return Unary(name)


# A dtype-keeping ufunc puts a big result in a reused buffer (:func:`.base.apply_ufunc`);
# a small one is the ufunc's own, with no call more (0-d work is bound by Python calls).
# ``out=...`` makes NumPy return a 0-d result as an array, not a scalar that every
# caller would then convert (NumPy 2.3+).
def _buffered_unary(ufunc: Callable) -> Callable:
    def buffered(x):
        if type(x) is np.ndarray and x.nbytes >= buffers.MIN_BYTES:
            return apply_ufunc(ufunc, x)
        return ufunc(x, out=...)
    return buffered


def _buffered_binary(ufunc: Callable) -> Callable:
    def buffered(x, y):
        if type(x) is np.ndarray and x.nbytes >= buffers.MIN_BYTES:
            return apply_ufunc(ufunc, x, y)
        return ufunc(x, y, out=...)
    return buffered


def _linear(op_name: str):
    """JVP of a linear unary op: the op applied to the tangent."""
    return lambda b, x, y, t: emit(b, Unary(op_name), [Local(t)], LIN)


def _keeping_bools(name: str) -> Callable:
    """``xp.<name>``, with booleans copied as they are: NumPy's loop for them (PyTorch has
    none, and raises)."""
    def api(xp, x):
        return xp.asarray(x, copy=True) if dtype_of(x).kind == "b" else getattr(xp, name)(x)
    return api


neg = unary("neg", np.negative, "negative", jvp=_linear("neg"),
            transpose=lambda b, ct, x: emit(b, neg, [Local(ct)], LIN), keeps_dtype=True)
conj = unary("conj", lambda a: np.conj(a) if np.iscomplexobj(a) else a, _conj_api,
             jvp=_linear("conj"), transpose=lambda b, ct, x: emit(b, conj, [Local(ct)], LIN))
exp = unary("exp", np.exp, "exp", deriv=lambda x, y: y, keeps_dtype=True, floating=True)
log = unary("log", np.log, "log", deriv=lambda x, y: 1 / x, keeps_dtype=True, floating=True)
sin = unary("sin", np.sin, "sin", deriv=lambda x, y: x.apply(cos), keeps_dtype=True, floating=True)
cos = unary("cos", np.cos, "cos", deriv=lambda x, y: -x.apply(sin),
            keeps_dtype=True, floating=True)
tanh = unary("tanh", np.tanh, "tanh",
             jvp=lambda b, x, y, t: emit(b, TanhScaled(False), [Local(t), External(y)], LIN_TF),
             keeps_dtype=True, floating=True)
sqrt = unary("sqrt", np.sqrt, "sqrt", deriv=lambda x, y: 0.5 / y, keeps_dtype=True, floating=True)
sign = unary("sign", np.sign, "sign", jvp=lambda b, x, y, t: None,       # zero almost everywhere
             real_only=True)
abs_real = unary("abs", np.abs, _keeping_bools("abs"), deriv=lambda x, y: x.apply(sign),
                 real_only=True)


def _no_tangent(b, x, y, t):
    """The JVP of a piecewise-constant op (rounding) or of a boolean one: zero (as JAX)."""
    return None


# Holomorphic where NumPy takes complex values: the JVP multiplies by f'(z) and the
# transpose (of that ``mul``) by conj(f'(z)). 1 - x*x is formed as (1 - x)(1 + x),
# which keeps its relative accuracy near x = ±1, where these derivatives are large.
def _reciprocal_api(xp, x):
    """NumPy's ``reciprocal``: on integers ``1 / x`` truncated (bools as int8), where
    PyTorch's would be floating; ``1 / 0`` is 0 (NumPy's is the platform's, with a warning)."""
    kind = dtype_of(x).kind
    if kind in "fc":
        return xp.reciprocal(x)
    if kind == "b":
        x = xp.astype(x, np.int8)
    return xp.where((x == 1) | (x == -1), x, xp.zeros_like(x))


reciprocal = unary("reciprocal", np.reciprocal, _reciprocal_api, deriv=lambda x, y: -(y * y),
                   keeps_dtype=True)
sinh = unary("sinh", np.sinh, "sinh", deriv=lambda x, y: x.apply(cosh),
             keeps_dtype=True, floating=True)
cosh = unary("cosh", np.cosh, "cosh", deriv=lambda x, y: x.apply(sinh),
             keeps_dtype=True, floating=True)
tan = unary("tan", np.tan, "tan", deriv=lambda x, y: 1 + y * y, keeps_dtype=True, floating=True)
arcsin = unary("arcsin", np.arcsin, "asin",
               deriv=lambda x, y: ((1 - x) * (1 + x)).apply(Pow(-0.5)),
               keeps_dtype=True, floating=True)
arccos = unary("arccos", np.arccos, "acos",
               deriv=lambda x, y: -((1 - x) * (1 + x)).apply(Pow(-0.5)),
               keeps_dtype=True, floating=True)
arctan = unary("arctan", np.arctan, "atan", deriv=lambda x, y: 1 / (x * x + 1),
               keeps_dtype=True, floating=True)
arcsinh = unary("arcsinh", np.arcsinh, "asinh",
                deriv=lambda x, y: (x * x + 1).apply(Pow(-0.5)), keeps_dtype=True, floating=True)
# sqrt(z - 1) sqrt(z + 1), not sqrt(z*z - 1): the two differ in sign off the real line
arccosh = unary("arccosh", np.arccosh, "acosh",
                deriv=lambda x, y: 1 / ((x - 1).apply(sqrt) * (x + 1).apply(sqrt)),
                keeps_dtype=True, floating=True)
arctanh = unary("arctanh", np.arctanh, "atanh", deriv=lambda x, y: 1 / ((1 - x) * (1 + x)),
                keeps_dtype=True, floating=True)
# exp(x), not y + 1: at x = -40, y + 1 rounds to 0 where the derivative is 4.2e-18
expm1 = unary("expm1", np.expm1, "expm1", deriv=lambda x, y: x.apply(exp),
              keeps_dtype=True, floating=True)
log1p = unary("log1p", np.log1p, "log1p", deriv=lambda x, y: 1 / (x + 1),
              keeps_dtype=True, floating=True)
log2 = unary("log2", np.log2, "log2", deriv=lambda x, y: 1 / (x * math.log(2.0)),
             keeps_dtype=True, floating=True)
log10 = unary("log10", np.log10, "log10", deriv=lambda x, y: 1 / (x * math.log(10.0)),
              keeps_dtype=True, floating=True)
exp2 = unary("exp2", np.exp2, "exp2", deriv=lambda x, y: y * math.log(2.0),
             keeps_dtype=True, floating=True)
sinc = unary("sinc", np.sinc, "sinc", deriv=lambda x, y: x.apply(SincDerivative(1)), floating=True)
cbrt = unary("cbrt", np.cbrt, lambda xp, x: xp.sign(x) * xp.abs(x) ** (1 / 3),
             deriv=lambda x, y: 1 / (3 * y * y), keeps_dtype=True, floating=True, real_only=True)

# linear, real only: NumPy's own ufuncs (the same roundings as np.deg2rad), self-transposing
deg2rad = unary("deg2rad", np.deg2rad, "deg2rad", jvp=_linear("deg2rad"),
                transpose=lambda b, ct, x: emit(b, deg2rad, [Local(ct)], LIN),
                keeps_dtype=True, floating=True, real_only=True)
rad2deg = unary("rad2deg", np.rad2deg, "rad2deg", jvp=_linear("rad2deg"),
                transpose=lambda b, ct, x: emit(b, rad2deg, [Local(ct)], LIN),
                keeps_dtype=True, floating=True, real_only=True)

# a new array with x's values (np.copy): linear, its own transpose
copy = unary("copy", np.copy, lambda xp, x: xp.asarray(x, copy=True), jvp=_linear("copy"),
             transpose=lambda b, ct, x: emit(b, copy, [Local(ct)], LIN))

# zero derivative (piecewise constant), as in JAX: a zero tangent, not an error
floor = unary("floor", np.floor, _keeping_bools("floor"), jvp=_no_tangent, keeps_dtype=True,
              real_only=True)
ceil = unary("ceil", np.ceil, _keeping_bools("ceil"), jvp=_no_tangent, keeps_dtype=True,
             real_only=True)
trunc = unary("trunc", np.trunc, _keeping_bools("trunc"), jvp=_no_tangent, keeps_dtype=True,
              real_only=True)
rint = unary("rint", np.rint, "rint", jvp=_no_tangent, keeps_dtype=True, real_only=True)

# boolean results: no tangent
isnan = unary("isnan", np.isnan, "isnan", jvp=_no_tangent)
isinf = unary("isinf", np.isinf, "isinf", jvp=_no_tangent)
isfinite = unary("isfinite", np.isfinite, "isfinite", jvp=_no_tangent)
signbit = unary("signbit", np.signbit, "signbit", jvp=_no_tangent, real_only=True)
logical_not = unary("logical_not", np.logical_not, "logical_not", jvp=_no_tangent)
invert = unary("invert", np.invert, "bitwise_invert", jvp=_no_tangent)

zeros_like = unary("zeros_like", np.zeros_like, "zeros_like", jvp=lambda b, x, y, t: None)
"""Zeros of the operand's shape and dtype; its derivative is zero (``np.imag`` of a real array)."""

stop_gradient = unary("stop_gradient", lambda a: a, lambda xp, a: library_of(a).detached(a),
                      jvp=lambda b, x, y, t: None)
"""The operand itself, with derivative zero (``lax.stop_gradient``)."""



@tensor_op
class Round(TensorPrimitive):
    """``np.round(x, decimals)``: piecewise constant, so its derivative is zero (as JAX)."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    decimals: int
    name = "round"
    batch_rule = batch_elementwise

    def eval(self, ctx, inputs):
        xp, inputs = operands(inputs, self)
        return [xp.round_decimals(inputs[0], self.decimals)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [None]


@tensor_op
class SincDerivative(TensorPrimitive):
    """The ``order``-th derivative of ``np.sinc`` (``order >= 1``), accurate at and near 0.

    Its JVP is the next order's op, so ``sinc`` differentiates to any order.

    >>> bool(SincDerivative(1).eval(None, [np.array(0.0)])[0] == 0)     # sinc'(0)
    True
    >>> round(float(SincDerivative(2).eval(None, [np.array(0.0)])[0]), 6)  # -pi**2 / 3
    -3.289868
    """
    memory_bound = True          # recomputed under the eager "balanced" strategy

    order: int
    name = "sinc_derivative"
    batch_rule = batch_elementwise

    def eval(self, ctx, inputs):
        xp, inputs = operands(inputs, self)
        return [_sinc_derivative(xp, inputs[0], self.order)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        factor = Sym(builder, External(primal_inputs[0])).apply(SincDerivative(self.order + 1))
        return [scale_tangent(builder, tangent_inputs[0], factor)]


def _sinc_derivative(xp, x, k: int):
    """``sinc``'s ``k``-th derivative: its Maclaurin series where ``|x| < 1``, else the
    recurrence from ``x sinc(x) = sin(pi x) / pi``, differentiated ``k`` times:
    ``x s_k + k s_(k-1) = pi**(k-1) sin(pi x + k pi / 2)`` (which cancels badly near 0)."""
    dtype = dtype_of(x)
    small = xp.abs(x) < 1
    near = xp.astype(xp.where(small, x, 0), dtype, copy=False)
    far = xp.astype(xp.where(small, 1, x), dtype, copy=False)       # no division by 0
    # sinc(x) = sum_n (-1)^n (pi x)^(2n) / (2n+1)!, so its k-th derivative is
    # sum over 2n >= k of (-1)^n pi^(2n) x^(2n-k) / ((2n+1) (2n-k)!)
    first = (k + 1) // 2
    coefficients = [(-1) ** n * math.pi ** (2 * n) / ((2 * n + 1) * math.factorial(2 * n - k))
                    for n in range(first, first + 20 + k)]
    square = near * near
    series = xp.zeros_like(near)
    for c in reversed(coefficients):
        series = series * square + c
    if (2 * first - k) == 1:
        series = series * near
    value = xp.sinc(far)
    pi_x = math.pi * far
    for j in range(1, k + 1):
        wave = (xp.sin, xp.cos)[j % 2](pi_x) * (1 if j % 4 < 2 else -1)
        value = (math.pi ** (j - 1) * wave - j * value) / far
    return xp.astype(xp.where(small, series, value), dtype, copy=False)


# --- ops with a scalar parameter ------------------------------------------------------


def _is_real(number) -> bool:
    """A real Python number: multiplying a float array by it keeps the array's dtype."""
    return type(number) in (int, float)


def _identity(op) -> tuple:
    return (type(op),) + tuple(exact_identity(getattr(op, name))
                               for name in op.__dataclass_fields__)


def _exact_eq(self, other) -> bool:
    """``==`` of ops with number parameters: the parameters compared exactly
    (:func:`primitives.exact.exact_identity`: ``scale[-0.0]`` is not ``scale[0.0]``)."""
    return self is other or (type(other) is type(self) and _identity(self) == _identity(other))


def _exact_hash(self) -> int:
    return hash(_identity(self))


@tensor_op
class Scale(LinearOp):
    """``factor * x`` for a constant: linear; transposes to ``conj(factor) * ct``."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    factor: complex | float | int
    name = "scale"
    __eq__, __hash__ = _exact_eq, _exact_hash      # scale[-0.0] is not scale[0.0]
    batch_rule = batch_elementwise

    def eval(self, ctx, inputs):
        return [inputs[0] * self.factor]

    def eval_reusing(self, ctx, inputs, reusable):
        """``eval``, into the input when a compiled program no longer reads it and it fits."""
        out = reusable_output(inputs, reusable) if _is_real(self.factor) else None
        if out is None:
            return self.eval(ctx, inputs)
        return [np.multiply(inputs[0], self.factor, out=out)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, Scale(np.conj(self.factor).item() if isinstance(self.factor, complex)
                                    else self.factor), [Local(cotangent_outputs[0])], LIN)]


@tensor_op
class Affine(TensorPrimitive):
    """``scale * x + offset`` for constants, in one pass (not linear: no transpose).

    Derivative expressions such as ``1 - y * y`` use it, so they make one
    temporary array instead of two.
    """
    memory_bound = True          # recomputed under the eager "balanced" strategy

    scale: complex | float | int
    offset: complex | float | int
    name = "affine"
    __eq__, __hash__ = _exact_eq, _exact_hash
    batch_rule = batch_elementwise

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        unit = _is_real(self.scale) and self.scale == 1     # not 1+0j, which makes x complex
        if xp is not NUMPY.xp:
            if self.scale == -1 and self._one_pass(dtype_of(x).kind):
                return [self.offset - x]          # one kernel, the bits of -x + offset
            return [(x if unit else x * self.scale) + self.offset]
        if self._one_pass(x.dtype.kind):
            return [self._one_pass_into(x, buffers.output_like(x))]
        out = np.array(x, copy=True) if unit else apply_ufunc(np.multiply, x, self.scale)
        out += self.offset           # in place on the fresh array (dtype kept, as in NumPy)
        return [out]

    def eval_reusing(self, ctx, inputs, reusable):
        """``eval``, into the input when a compiled program no longer reads it and it fits."""
        fits = _is_real(self.scale) and _is_real(self.offset)
        out = reusable_output(inputs, reusable) if fits else None
        if out is None:
            return self.eval(ctx, inputs)
        if self._one_pass(out.dtype.kind):
            return [self._one_pass_into(inputs[0], out)]
        np.multiply(inputs[0], self.scale, out=out)
        out += self.offset
        return [out]

    def _one_pass(self, kind: str) -> bool:
        """Whether, for an array of dtype kind ``kind``, ``x + offset`` or ``offset - x`` is
        one pass with the bits of the two: real floating point, a real offset and a scale of
        1 or -1 (``-x`` is exact)."""
        return (kind == "f" and _is_real(self.offset) and _is_real(self.scale)
                and (self.scale == 1 or self.scale == -1))

    def _one_pass_into(self, x, out):
        """``x + offset`` or ``offset - x`` into ``out`` (``None``: a new array of ``x``'s dtype)."""
        if self.scale == 1:
            return np.add(x, self.offset, out=out)
        return np.subtract(self.offset, x, out=out)

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if _is_real(self.scale) and self.scale == 1:
            return [tangent_inputs[0]]
        return [emit(builder, Scale(self.scale), [Local(tangent_inputs[0])], LIN)]


@tensor_op
class IntegerPow(TensorPrimitive):
    """``x ** n`` for a constant integer ``n`` (``lax.integer_pow``)."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    n: int
    name = "integer_pow"
    batch_rule = batch_elementwise

    def floating_output(self) -> bool:
        return self.n < 0

    def eval(self, ctx, inputs):
        x = inputs[0]
        if self.n >= 0:
            if self.n == 2 and type(x) is not np.ndarray and dtype_of(x).kind == "b":
                xp, (x,) = operands(inputs, self)      # NumPy's bool ** 2 is np.square's int8
                x = xp.astype(x, np.dtype(np.int8))   # (PyTorch's int64, as NumPy's bool ** 3)
            return [x ** self.n]
        xp, (x,) = operands(inputs, self)
        if dtype_of(x).kind in "fc":
            return [xp.reciprocal(x ** -self.n)]
        # integers: a float64 result, as NumPy's 1.0 / x**n; raised in float64, as x**n
        # would wrap around in the integer dtype (3 ** -300 is 7e-144, not 1 / (3**300 % 2**64))
        return [1.0 / xp.astype(x, np.dtype(np.float64)) ** -self.n]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if self.n == 0:
            return [None]
        if self.n == 1:
            return [tangent_inputs[0]]
        x = Sym(builder, External(primal_inputs[0]))
        factor = x * 2 if self.n == 2 else x.apply(IntegerPow(self.n - 1)) * self.n
        return [scale_tangent(builder, tangent_inputs[0], factor)]


@tensor_op
class Pow(TensorPrimitive):
    """``x ** p`` for a constant real or complex exponent ``p``."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    exponent: complex | float
    name = "pow"
    __eq__, __hash__ = _exact_eq, _exact_hash
    batch_rule = batch_elementwise

    def floating_output(self) -> bool:
        return True

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        return [xp.pow(x, self.exponent)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if self.exponent == 0:
            return [None]
        x = Sym(builder, External(primal_inputs[0]))
        factor = x.apply(Pow(self.exponent - 1)) * self.exponent
        return [scale_tangent(builder, tangent_inputs[0], factor)]


# --- binary ops -------------------------------------------------------------------------


class _BinaryRules(NamedTuple):
    fn: Callable                 # on NumPy arrays
    jvp: Callable                # (builder, x, y, out, tx, ty) -> tangent id | None
    transpose: Callable | None   # (builder, ct, x, y, mask) -> (ct_x, ct_y)
    into: Callable | None        # fn(x, y, out=buffer), when the result has x's dtype
    api: Callable                # (xp, x, y) -> result, on other libraries' arrays
    floating: bool               # the result is floating whatever the operands' dtype


_BINARY: dict[str, _BinaryRules] = {}


@tensor_op
class Binary(TensorPrimitive):
    """An elementwise binary op on operands of one shape and dtype."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    name: str
    batch_rule = batch_elementwise

    def input_count(self) -> int:
        return 2

    def floating_output(self) -> bool:
        return _BINARY[self.name].floating

    def eval(self, ctx, inputs):
        rules = _BINARY[self.name]
        if type(inputs[0]) is not np.ndarray or type(inputs[1]) is not np.ndarray:
            xp, inputs = operands(inputs, self)
            if xp is not NUMPY.xp:
                return [rules.api(xp, inputs[0], inputs[1])]
        return [rules.fn(inputs[0], inputs[1])]

    def eval_reusing(self, ctx, inputs, reusable):
        """``eval``, into an input a compiled program no longer reads, when it fits; so a
        cotangent sum (``add``) accumulates in place."""
        into = _BINARY[self.name].into
        out = None if into is None else reusable_output(inputs, reusable)
        return self.eval(ctx, inputs) if out is None else [into(inputs[0], inputs[1], out=out)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        x, y = primal_inputs
        return [_BINARY[self.name].jvp(builder, x, y, primal_outputs[0], *tangent_inputs)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        rule = _BINARY[self.name].transpose
        if rule is None:
            raise ADRuleError(self.name, ADRuleKind.TRANSPOSE, f"{self.name} is not linear")
        x, y = inputs
        return list(rule(builder, cotangent_outputs[0], x, y, linear_mask(self, role)))


def binary(name: str, fn: Callable, jvp: Callable, transpose: Callable | None = None,
           into: Callable | None = None, api: str | Callable | None = None, *,
           keeps_dtype: bool = False, floating: bool = False) -> Binary:
    """Register an elementwise binary op and return it.

    ``fn`` computes it on NumPy arrays (``into``: ``fn`` with ``out=``, by default ``fn``
    itself when it keeps the dtype); ``api`` on other libraries' arrays: a name in their
    namespace or a function ``(xp, x, y)`` (by default ``fn`` itself). ``keeps_dtype`` and
    ``floating`` are :func:`unary`'s.
    """
    api = _api(api) if isinstance(api, str) else api or _every_library(fn)
    into = into or (fn if keeps_dtype else None)
    _BINARY[name] = _BinaryRules(_buffered_binary(fn) if keeps_dtype else fn, jvp, transpose,
                                 into, api, floating)
    return Binary(name)


def _sum_terms(builder, a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return b if a is None else a
    return emit(builder, add, [Local(a), Local(b)], LIN_TT)


def _add_jvp(b, x, y, out, tx, ty):
    return _sum_terms(b, tx, ty)


def _add_transpose(b, ct, x, y, mask):
    return (ct if mask[0] else None, ct if mask[1] else None)


def _sub_jvp(b, x, y, out, tx, ty):
    if ty is None:
        return tx
    if tx is None:
        return emit(b, neg, [Local(ty)], LIN)
    return emit(b, sub, [Local(tx), Local(ty)], LIN_TT)


def _sub_transpose(b, ct, x, y, mask):
    return (ct if mask[0] else None, emit(b, neg, [Local(ct)], LIN) if mask[1] else None)


def _mul_jvp(b, x, y, out, tx, ty):
    return _sum_terms(
        b,
        None if tx is None else emit(b, mul, [Local(tx), External(y)], LIN_TF),
        None if ty is None else emit(b, mul, [External(x), Local(ty)], LIN_FT),
    )


def _mul_transpose(b, ct, x, y, mask):
    if mask == (True, False):
        return (emit(b, mul_conj, [Local(ct), y], LIN_TF), None)
    if mask == (False, True):
        return (None, emit(b, mul_conj, [Local(ct), x], LIN_TF))
    raise ADRuleError("mul", ADRuleKind.TRANSPOSE, "mul is linear in one input at a time")


def _mul_conj_jvp(b, x, y, out, tx, ty):
    return _sum_terms(
        b,
        None if tx is None else emit(b, mul_conj, [Local(tx), External(y)], LIN_TF),
        None if ty is None else emit(b, mul_conj, [External(x), Local(ty)], LIN_FT),
    )


def _mul_conj_transpose(b, ct, x, y, mask):
    # t -> t conj(y) transposes to ct -> ct y;  t -> x conj(t) to ct -> x conj(ct)
    if mask == (True, False):
        return (emit(b, mul, [Local(ct), y], LIN_TF), None)
    if mask == (False, True):
        return (None, emit(b, mul_conj, [x, Local(ct)], LIN_FT))
    raise ADRuleError("mul_conj", ADRuleKind.TRANSPOSE, "mul_conj is linear in one input at a time")


# Quotients come in pairs: ``q(a, b)`` and ``q_conj(a, b) = q(a, conj(b))``. Division by a
# constant is linear in the numerator, and the two transpose to each other; so a real
# quotient's transpose emits no ``conj`` (``q_conj`` conjugates only complex values).


def _quotient_rules(name: str):
    """The JVP and transpose of the quotient op ``name`` (``div``, ``div_or_zero``, or their
    ``_conj`` forms): ``d(a / b) = da / b - (out / b) db``, with ``conj(db)`` for ``_conj``."""
    conjugated = name.endswith("_conj")
    partner = name.removesuffix("_conj") if conjugated else name + "_conj"

    def jvp(b, x, y, out, tx, ty):
        terms = None if tx is None else emit(b, Binary(name), [Local(tx), External(y)], LIN_TF)
        if ty is not None:
            ratio = emit(b, Binary(name), [External(out), External(y)])
            times = mul_conj if conjugated else mul     # ratio * conj(ty) or ratio * ty
            scaled = emit(b, times, [Local(ratio), Local(ty)], LIN_FT)
            terms = _sum_terms(b, terms, emit(b, neg, [Local(scaled)], LIN))
        return terms

    def transpose(b, ct, x, y, mask):
        if mask != (True, False):
            raise ADRuleError(name, ADRuleKind.TRANSPOSE, f"{name} is linear in its numerator only")
        return (emit(b, Binary(partner), [Local(ct), y], LIN_TF), None)

    return jvp, transpose


def _div_or_zero_fn(x, y):
    out = np.zeros(np.broadcast_shapes(np.shape(x), np.shape(y)), np.result_type(x, y))
    return np.divide(x, y, out=out, where=np.asarray(y) != 0)


def _conj_if_complex(b):
    dtype = getattr(b, "dtype", None)              # np.iscomplexobj, without its cost
    if dtype.kind == "c" if dtype is not None else isinstance(b, complex):
        return np.conj(b)
    return b


_multiply = _buffered_binary(np.multiply)


def _mul_conj_fn(a, b):
    return _multiply(a, _conj_if_complex(b))


def _mul_conj_into(a, b, out):
    return np.multiply(a, _conj_if_complex(b), out=out)


def _div_or_zero_api(xp, x, y):
    nonzero = y != 0
    return xp.where(nonzero, x / xp.where(nonzero, y, 1), 0)


add = binary("add", np.add, _add_jvp, _add_transpose, api=_operator_api(operator.add, "add"),
             keeps_dtype=True)
sub = binary("sub", np.subtract, _sub_jvp, _sub_transpose,
             api=_operator_api(operator.sub, "subtract"), keeps_dtype=True)
_multiply_api = _operator_api(operator.mul, "multiply")
mul = binary("mul", np.multiply, _mul_jvp, _mul_transpose, api=_multiply_api, keeps_dtype=True)
mul_conj = binary("mul_conj", _mul_conj_fn, _mul_conj_jvp, _mul_conj_transpose,
                  _mul_conj_into, api=lambda xp, a, b: _multiply_api(xp, a, _conj_api(xp, b)))
div = binary("div", np.divide, *_quotient_rules("div"), api="divide",
             keeps_dtype=True, floating=True)
div_conj = binary("div_conj", lambda a, b: apply_ufunc(np.divide, a, _conj_if_complex(b)),
                  *_quotient_rules("div_conj"),
                  into=lambda a, b, out: np.divide(a, _conj_if_complex(b), out=out),
                  api=lambda xp, a, b: xp.divide(a, _conj_api(xp, b)), floating=True)
div_or_zero = binary("div_or_zero", _div_or_zero_fn, *_quotient_rules("div_or_zero"),
                     api=_div_or_zero_api)
"""``x / y``, and 0 where ``y`` is 0: ``|z|``'s derivatives are 0 at 0 with it (PyTorch's)."""
div_or_zero_conj = binary("div_or_zero_conj", lambda a, b: _div_or_zero_fn(a, _conj_if_complex(b)),
                          *_quotient_rules("div_or_zero_conj"),
                          api=lambda xp, a, b: _div_or_zero_api(xp, a, _conj_api(xp, b)))


# --- add with a broadcast operand, one op -------------------------------------------


@tensor_op
class AddBroadcast(TensorPrimitive):
    """``x + b`` where ``x`` has ``shape`` and ``b`` has ``operand_shape``, which NumPy's
    broadcasting stretches to ``shape`` (axes aligned from the right). It is ``add`` after
    ``broadcast_in_dim`` as one op: a bias added to a batch records one node, and a program
    runs one step, with NumPy broadcasting ``b`` itself (:func:`..numpy.lowering.elementwise`
    makes it for ``add``, the one elementwise op that takes operands of two shapes). Its
    transpose gives ``b`` the cotangent summed over the broadcast axes.

    >>> AddBroadcast((2, 3), (3,)).eval(None, [np.zeros((2, 3)), np.arange(3.0)])
    [array([[0., 1., 2.],
           [0., 1., 2.]])]
    """
    memory_bound = True          # recomputed under the eager "balanced" strategy

    shape: tuple
    operand_shape: tuple
    name = "add_broadcast"

    def params(self) -> str:
        return f"{self.operand_shape}->{self.shape}"

    def input_count(self) -> int:
        return 2

    def spread(self) -> BroadcastInDim:
        """The ``broadcast_in_dim`` that takes ``b`` to ``shape``."""
        rank = len(self.shape)
        return BroadcastInDim(self.shape, tuple(range(rank - len(self.operand_shape), rank)),
                              self.operand_shape)

    def eval(self, ctx, inputs):
        x, b = inputs
        if type(x) is not np.ndarray or type(b) is not np.ndarray or x.dtype != b.dtype:
            xp, (x, b) = operands(inputs, self)
            if xp is not NUMPY.xp:
                return [_BINARY["add"].api(xp, x, b)]
            return [np.add(x, b, out=...)]
        out = buffers.output_like(x)          # (b has x's dtype: the result has x's layout)
        return [np.add(x, b, out=... if out is None else out)]

    def eval_reusing(self, ctx, inputs, reusable):
        """``eval``, into ``x`` when a compiled program no longer reads it."""
        out = reusable_output(inputs, (0,) if 0 in reusable else (), same_dtype)
        return self.eval(ctx, inputs) if out is None else [np.add(out, inputs[1], out=out)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        tx, tb = tangent_inputs
        if tb is None:
            return [tx]
        if tx is None:
            return [emit(builder, self.spread(), [Local(tb)], LIN)]
        return [emit(builder, self, [Local(tx), Local(tb)], LIN_TT)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        x_linear, b_linear = linear_mask(self, role)
        ct = cotangent_outputs[0]
        return [ct if x_linear else None,
                self.spread().sum_back(builder, ct) if b_linear else None]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        # b broadcast to x's shape first, then ``add`` batches as elementwise ops do
        x, b = inputs
        b, b_axis = batch_spread(builder, self.spread(), b, axes[1], role, 1, axis_size, ctx)
        return batch_elementwise(add, builder, [x, b], [axes[0], b_axis], role, axis_size, ctx)


# --- tanh's derivative, fused --------------------------------------------------------


def _tanh_scaled_numpy(t, y, conjugate: bool, out=None):
    """``t * (1 - y²)`` (with ``conjugate``, ``t * conj(1 - y²)``) on NumPy arrays of one
    dtype: the factor in one buffer, then ``t`` times it into that buffer, or into ``out``
    (``t`` or ``y``, inputs a compiled program no longer reads)."""
    factor = np.multiply(y, y, out=y) if out is y else _multiply(y, y)
    if conjugate and factor.dtype.kind == "c":
        np.conjugate(factor, out=factor)
    np.subtract(1, factor, out=factor)
    return np.multiply(t, factor, out=factor if out is None else out)


def _tanh_scaled_generic(t, y, conjugate: bool):
    factor = 1 - y * y
    return t * (factor.conj() if conjugate and dtype_of(factor).kind == "c" else factor)


def _torch_tanh_scaled(t, y, conjugate: bool):
    """PyTorch's one-kernel ``tanh_backward`` (``t * conj(1 - y²)``) where it computes this."""
    if t.dtype == y.dtype and (conjugate or not t.is_complex()):
        return sys.modules["torch"].ops.aten.tanh_backward(t, y)
    return _tanh_scaled_generic(t, y, conjugate)


define("tanh_scaled", torch=_torch_tanh_scaled)


@tensor_op
class TanhScaled(FusedTangent):
    """``t * (1 - y²)``, tanh's tangent from its output ``y`` in one op (with ``conjugate``,
    ``t * conj(1 - y²)``: its transpose, PyTorch's ``tanh_backward``). Linear in ``t``.

    ``tanh``'s JVP emits it, so a gradient runs one op per tanh where ``mul(t, 1 - y*y)``
    ran three, and on PyTorch one kernel (three NumPy passes still: NumPy has no fused
    kernel). Batched with ``y`` unbatched, the factor is formed once, unbatched.

    >>> TanhScaled(False).eval(None, [np.array([2.0]), np.array([0.5])])
    [array([1.5])]
    """
    conjugate: bool
    name = "tanh_scaled"

    def numpy_kernel(self, t, y, out=None):
        return _tanh_scaled_numpy(t, y, self.conjugate, out)

    def library_kernel(self, xp, t, y):
        if xp.name == "torch":
            return xp.tanh_scaled(t, y, self.conjugate)
        return _tanh_scaled_generic(t, y, self.conjugate)    # numbers, mixed dtypes, Dask

    def transpose_op(self) -> "TanhScaled":
        return TanhScaled(not self.conjugate)

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        t_key, y_key = primal_inputs
        dt, dy = tangent_inputs
        terms = None if dt is None else emit(builder, self, [Local(dt), External(y_key)],
                                             LIN_TF)
        if dy is not None:
            # d(t (1 - y²)) / dy = -2 t y; conjugated: t conj(-2 y) conj(dy)
            t, y = Sym(builder, External(t_key)), Sym(builder, External(y_key))
            if self.conjugate:
                factor = t.apply(mul_conj, y) * -2
                scaled = emit(builder, mul_conj, [factor.ref, Local(dy)], LIN_FT)
            else:
                scaled = scale_tangent(builder, dy, t * y * -2)
            terms = _sum_terms(builder, terms, scaled)
        return [terms]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        if axes[1] is not None or axes[0] is None:
            return batch_elementwise(self, builder, inputs, axes, role, axis_size, ctx)
        # y unbatched: 1 - y² once, then a batched product (not B copies of the factor)
        factor = 1 - Sym(builder, inputs[1]) * Sym(builder, inputs[1])
        refs = batch_all_at(builder, [inputs[0], factor.ref], axes, role, axis_size, axes[0])
        times = mul_conj if self.conjugate else mul
        return builder.add_primitive(times, refs, role), [axes[0]]


# --- more binary ops --------------------------------------------------------------------


def _sum_all(b, terms) -> int | None:
    total = None
    for term in terms:
        total = _sum_terms(b, total, term)
    return total


def _partials_jvp(partial_x: Callable, partial_y: Callable) -> Callable:
    """A binary op's JVP ``partial_x * tx + partial_y * ty`` from its partial derivatives,
    each ``(x, y, out) -> Sym`` on symbolic primals."""
    def jvp(b, x, y, out, tx, ty):
        syms = Sym(b, External(x)), Sym(b, External(y)), Sym(b, External(out))
        return _sum_all(b, [scale_tangent(b, t, partial(*syms))
                            for t, partial in ((tx, partial_x), (ty, partial_y)) if t is not None])
    return jvp


def _no_tangents(b, x, y, out, tx, ty):
    return None


def _with_errstate(fn: Callable) -> Callable:
    def quiet(*args):
        with np.errstate(all="ignore"):
            return fn(*args)
    return quiet


def _quiet_numpy(api: Callable) -> Callable:
    """``api(xp, x, y)`` on NumPy arrays, without NumPy's floating-point warnings."""
    return _with_errstate(partial(api, NUMPY.xp))


def _unit_over_norm(a: Sym, h: Sym) -> Sym:
    """``a / h**2`` as ``(a / h) / h`` (no overflow of ``h**2``), and 0 where ``h`` is 0."""
    return a.apply(div_or_zero, h).apply(div_or_zero, h)


# With h = hypot(x, y): d hypot = (x dx + y dy) / h and d arctan2(x, y) = (y dx - x dy) / h**2.
# At (0, 0) all four partials are 0, the convention of |z| at z = 0 (ComplexAbs); JAX gives
# NaN for arctan2 and 1/2 for hypot there, PyTorch 0 and NaN. h**2 is never formed, so
# large operands do not overflow.
hypot = binary("hypot", np.hypot, _partials_jvp(lambda x, y, out: x.apply(div_or_zero, out),
                                                lambda x, y, out: y.apply(div_or_zero, out)),
               api="hypot", keeps_dtype=True)
arctan2 = binary("arctan2", np.arctan2, _partials_jvp(
    lambda x, y, out: _unit_over_norm(y, x.apply(hypot, y)),
    lambda x, y, out: -_unit_over_norm(x, x.apply(hypot, y))), api="atan2", keeps_dtype=True)


def _logistic_of_difference(xp, x, y):
    """``1 / (1 + exp(y - x))``, and 1/2 where ``x == y`` (equal infinities included)."""
    difference = xp.where(x == y, 0, xp.subtract(x, y))
    return 1 / (1 + xp.exp(-difference))


def _logaddexp_weight_jvp(b, x, y, out, tx, ty):
    # w(x, y) = sigmoid(x - y): dw = w(x, y) w(y, x) (dx - dy)
    slope = Sym(b, External(out)) * Sym(b, External(y)).apply(logaddexp_weight,
                                                              Sym(b, External(x)))
    return _sum_all(b, [None if tx is None else scale_tangent(b, tx, slope),
                        None if ty is None else scale_tangent(b, ty, -slope)])


logaddexp_weight = binary("logaddexp_weight", _quiet_numpy(_logistic_of_difference),
                          _logaddexp_weight_jvp, api=_logistic_of_difference)
"""``d logaddexp(x, y) / dx = exp(x) / (exp(x) + exp(y))``, computed as a logistic function of
``x - y``: no overflow, 0 (not NaN) at ``x = -inf`` and 1/2 where ``x == y == ±inf``."""


logaddexp = binary("logaddexp", np.logaddexp,
                   _partials_jvp(lambda x, y, out: x.apply(logaddexp_weight, y),
                                 lambda x, y, out: y.apply(logaddexp_weight, x)), api="logaddexp",
                   keeps_dtype=True)
logaddexp2 = binary("logaddexp2", np.logaddexp2, _partials_jvp(
    lambda x, y, out: (x * math.log(2.0)).apply(logaddexp_weight, y * math.log(2.0)),
    lambda x, y, out: (y * math.log(2.0)).apply(logaddexp_weight, x * math.log(2.0))),
                    api="logaddexp2", keeps_dtype=True)


def _extremum_weight(wins: str) -> Callable:
    """The share of ``x``'s tangent in ``fmax``/``fmin``, ``(xp, x, y) -> weight``: 1 where
    ``x`` is taken (``xp.<wins>(x, y)``), 0 where ``y`` is, 1/2 at ties (as ``maximum``);
    NaN loses to a number, as in NumPy."""
    def weight(xp, x, y):
        dtype = np.result_type(dtype_of(x), dtype_of(y))
        taken = xp.astype(getattr(xp, wins)(x, y) | xp.isnan(y), dtype)
        return xp.astype(xp.where(x == y, 0.5, taken), dtype, copy=False)
    return weight


_fmax_weight, _fmin_weight = _extremum_weight("greater"), _extremum_weight("less")
# boolean algebra, NumPy's semantics (``&``, ``|``, ``^`` and ``~`` are the bitwise ones,
# which are the logical ones on booleans): integer or boolean results, no tangent
logical_and = binary("logical_and", np.logical_and, _no_tangents, api="logical_and")
logical_or = binary("logical_or", np.logical_or, _no_tangents, api="logical_or")
logical_xor = binary("logical_xor", np.logical_xor, _no_tangents, api="logical_xor")
bitwise_and = binary("bitwise_and", np.bitwise_and, _no_tangents, api="bitwise_and")
bitwise_or = binary("bitwise_or", np.bitwise_or, _no_tangents, api="bitwise_or")
bitwise_xor = binary("bitwise_xor", np.bitwise_xor, _no_tangents, api="bitwise_xor")
fmax_weight = binary("fmax_weight", _quiet_numpy(_fmax_weight), _no_tangents, api=_fmax_weight)
fmin_weight = binary("fmin_weight", _quiet_numpy(_fmin_weight), _no_tangents, api=_fmin_weight)


def _ordered(name: str) -> Callable:
    """``xp.<name>(x, y)``, refused for complex operands on PyTorch (:func:`.base.check_ordered`)."""
    def api(xp, x, y):
        check_ordered(xp, x, name)
        return getattr(xp, name)(x, y)
    return api


fmax = binary("fmax", np.fmax, _partials_jvp(lambda x, y, out: x.apply(fmax_weight, y),
                                             lambda x, y, out: 1 - x.apply(fmax_weight, y)),
              api=_ordered("fmax"), keeps_dtype=True)
fmin = binary("fmin", np.fmin, _partials_jvp(lambda x, y, out: x.apply(fmin_weight, y),
                                             lambda x, y, out: 1 - x.apply(fmin_weight, y)),
              api=_ordered("fmin"), keeps_dtype=True)


# --- maximum and minimum --------------------------------------------------------------


def _tie_weight(builder, x, y, strict: str, dtype: str) -> Sym:
    """``1`` where ``x strict y``, ``1/2`` where ``x == y``, else ``0``, in ``dtype`` (primal)."""
    to_dtype = ConvertElementType(dtype, "bool")
    wins = emit(builder, to_dtype, [Local(emit(builder, Compare(strict), [x, y]))])
    ties = emit(builder, to_dtype, [Local(emit(builder, Compare("eq"), [x, y]))])
    return Sym(builder, Local(wins)) + Sym(builder, Local(ties)) * 0.5


class _Extremum(TensorPrimitive):
    memory_bound = True          # recomputed under the eager "balanced" strategy
    __slots__ = ()
    _fn = None                      # a NumPy ufunc, whose name is the Array API's
    _wins = ""
    _loses = ""
    batch_rule = batch_elementwise

    def input_count(self) -> int:
        return 2

    def output_dtype(self) -> str:
        return self.dtype

    def eval(self, ctx, inputs):
        xp, (x, y) = operands(inputs, self)
        fn = type(self)._fn
        if xp is NUMPY.xp:
            return [fn(x, y)]
        check_ordered(xp, x, self.name)
        check_ordered(xp, y, self.name)
        return [getattr(xp, fn.__name__)(x, y)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        x, y = External(primal_inputs[0]), External(primal_inputs[1])
        tx, ty = tangent_inputs
        terms = []
        if tx is not None:
            weight = _tie_weight(builder, x, y, self._wins, self.dtype)
            terms.append(scale_tangent(builder, tx, weight))
        if ty is not None:
            weight = _tie_weight(builder, x, y, self._loses, self.dtype)
            terms.append(scale_tangent(builder, ty, weight))
        return [_sum_terms(builder, *terms) if len(terms) == 2 else terms[0]]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        not_linear(self)


@tensor_op
class Maximum(_Extremum):
    """``np.maximum`` of operands of one shape and ``dtype``; ties split the tangent evenly."""

    dtype: str
    name = "maximum"
    _fn = staticmethod(np.maximum)
    _wins, _loses = "gt", "lt"


@tensor_op
class Minimum(_Extremum):
    """``np.minimum`` of operands of one shape and ``dtype``; ties split the tangent evenly."""

    dtype: str
    name = "minimum"
    _fn = staticmethod(np.minimum)
    _wins, _loses = "lt", "gt"


# --- remainders -------------------------------------------------------------------------


def _truncated_quotient(xp, x, y):
    """The integer ``n`` of ``fmod(x, y) = x - n y`` (rounded: exact where ``trunc(x / y)``
    may round across an integer)."""
    return xp.round((x - xp.fmod(x, y)) / y)


def _by_integer_zero(name: str) -> Callable:
    """``xp.<name>(x, y)``; on PyTorch, integers divided by zero give 0 as in NumPy (which
    warns) instead of PyTorch's ZeroDivisionError."""
    def api(xp, x, y):
        if xp.name != "torch" or dtype_of(x).kind not in "biu" or dtype_of(y).kind not in "biu":
            return getattr(xp, name)(x, y)
        zero = y == 0
        out = getattr(xp, name)(x, xp.where(zero, xp.ones_like(y), y))
        return xp.where(zero, xp.zeros_like(out), out)
    return api


# Piecewise constant in both operands: derivative zero (as JAX's floor_divide).
floor_divide = binary("floor_divide", np.floor_divide, _no_tangents,
                      api=_by_integer_zero("floor_divide"))
fmod_quotient = binary("fmod_quotient", _quiet_numpy(_truncated_quotient), _no_tangents,
                       api=_truncated_quotient)


def _minus_quotient_jvp(quotient: Binary) -> Callable:
    """The JVP of ``x - n y`` for the integer quotient ``n = quotient(x, y)``: ``dx - n dy``
    (JAX's and PyTorch's rule), with the ``n`` NumPy's own divmod gives."""
    def jvp(b, x, y, out, tx, ty):
        if ty is None:
            return tx
        n = emit(b, quotient, [External(x), External(y)])
        return _sub_jvp(b, x, y, out, tx, emit(b, mul, [Local(ty), Local(n)], LIN_TF))
    return jvp


remainder = binary("remainder", np.remainder, _minus_quotient_jvp(floor_divide),
                   api=_by_integer_zero("remainder"), keeps_dtype=True)
fmod = binary("fmod", np.fmod, _minus_quotient_jvp(fmod_quotient), api=_by_integer_zero("fmod"),
              keeps_dtype=True)


# --- power --------------------------------------------------------------------------------


@tensor_op
class Power(TensorPrimitive):
    """``x ** y`` for operands of one ``shape`` and ``dtype`` (``lax.pow``), differentiable
    in both: ``d/dx = y x**(y-1)``, ``d/dy = log(x) x**y`` (holomorphic for complex).

    At ``x = 0``: ``d/dy`` is 0 (``log`` taken as 0 there, as JAX and PyTorch for ``y >= 0``;
    NaN for ``y < 0`` as in JAX), and ``d/dx`` is 0 where ``y == 0`` too (``x ** 0`` is
    constant; PyTorch's and JAX's rule for integer exponents). Constant Python exponents
    use ``integer_pow`` and ``pow`` instead.
    """
    memory_bound = True          # recomputed under the eager "balanced" strategy

    shape: tuple
    dtype: str
    name = "power"

    def input_count(self) -> int:
        return 2

    def eval(self, ctx, inputs):
        xp, (x, y) = operands(inputs, self)
        return [apply_ufunc(np.power, x, y) if xp is NUMPY.xp else xp.pow(x, y)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        x, y = External(primal_inputs[0]), External(primal_inputs[1])
        tx, ty = tangent_inputs

        def constant(value) -> Local:
            return Local(emit(builder, Full(self.shape, self.dtype, value), []))

        zero, one = constant(0), constant(1)

        def is_zero(ref) -> Local:
            return Local(emit(builder, Compare("eq"), [ref, zero]))

        def select(pred, on_true, on_false) -> Local:
            return Local(emit(builder, Select(self.shape, self.dtype), [pred, on_true, on_false]))

        terms = []
        if tx is not None:
            # x ** 0 is 1 for every x: where x == y == 0, y * x**(y-1) is taken at x = 1
            # (value 0, finite derivatives), not at 0 ** -1
            one_at_origin = select(is_zero(y), select(is_zero(x), one, x), x)
            exponent = Sym(builder, y)
            lowered = Sym(builder, Local(emit(builder, self, [one_at_origin, (exponent - 1).ref])))
            terms.append(scale_tangent(builder, tx, exponent * lowered))
        if ty is not None:
            log_x = Sym(builder, select(is_zero(x), one, x)).apply(log)      # 0 at x = 0
            out = Sym(builder, External(primal_outputs[0]))
            terms.append(scale_tangent(builder, ty, log_x * out))
        return [_sum_all(builder, terms)]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        axis = next(a for a in axes if a is not None)
        refs = batch_all_at(builder, inputs, axes, role, axis_size, axis)
        batched = Power(with_batch(self.shape, axis, axis_size), self.dtype)
        return builder.add_primitive(batched, refs, role), [axis]


# --- dtype conversion -----------------------------------------------------------------


@tensor_op
class ConvertElementType(TensorPrimitive):
    """``x.astype(new_dtype)`` from ``old_dtype``. Real -> complex transposes to the real part."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    new_dtype: str
    old_dtype: str
    name = "convert_element_type"
    batch_rule = batch_elementwise

    def params(self) -> str:
        return f"{self.old_dtype}->{self.new_dtype}"

    def output_dtype(self) -> str:
        return self.new_dtype

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is not NUMPY.xp:
            new_dtype = np.dtype(self.new_dtype)
            if dtype_of(x).kind == "c" and new_dtype.kind != "c":
                x = xp.real(x)
            return [xp.astype(x, new_dtype, copy=False)]
        if np.iscomplexobj(x) and not np.issubdtype(np.dtype(self.new_dtype), np.complexfloating):
            x = np.real(x)
        return [np.asarray(x).astype(self.new_dtype, copy=False)]

    def _differentiable(self) -> bool:
        return all(np.issubdtype(np.dtype(d), np.inexact) for d in (self.new_dtype, self.old_dtype))

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if not self._differentiable():
            return [None]
        return [emit(builder, self, [Local(tangent_inputs[0])], LIN)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        if not self._differentiable():      # (its JVP never emits it: an integer side)
            raise ADRuleError(self.name, ADRuleKind.TRANSPOSE,
                              f"{self.params()} is not linear: an integer side has no tangent")
        back = ConvertElementType(self.old_dtype, self.new_dtype)
        return [emit(builder, back, [Local(cotangent_outputs[0])], LIN)]


# --- complex parts ---------------------------------------------------------------------


@tensor_op
class ComplexAbs(TensorPrimitive):
    """``|z|`` of complex ``z`` of ``dtype``: real result; ``d|z| = Re(conj(z) dz) / |z|``,
    and 0 at ``z = 0`` (as PyTorch and JAX 0.10 give)."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    dtype: str
    name = "complex_abs"
    batch_rule = batch_elementwise

    def output_dtype(self) -> str:
        return real_dtype_name(self.dtype)

    def eval(self, ctx, inputs):
        xp, (z,) = operands(inputs, self)
        return [xp.abs(z)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        z, r = External(primal_inputs[0]), External(primal_outputs[0])
        as_complex = ConvertElementType(self.dtype, real_dtype_name(self.dtype))
        unit = emit(builder, div_or_zero, [z, Local(emit(builder, as_complex, [r]))])  # z/|z|
        projected = emit(builder, mul_conj, [Local(tangent_inputs[0]), Local(unit)], LIN_TF)
        return [emit(builder, Real(self.dtype), [Local(projected)], LIN)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        not_linear(self)


@tensor_op
class Real(LinearOp):
    """``np.real`` of a complex operand of ``dtype``; transposes to the cotangent as complex."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    dtype: str
    name = "real"
    batch_rule = batch_elementwise

    def output_dtype(self) -> str:
        return real_dtype_name(self.dtype)

    def eval(self, ctx, inputs):
        xp, (z,) = operands(inputs, self)
        return [xp.real(z)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        as_complex = ConvertElementType(self.dtype, real_dtype_name(self.dtype))
        return [emit(builder, as_complex, [Local(cotangent_outputs[0])], LIN)]


@tensor_op
class Imag(LinearOp):
    """``np.imag`` of a complex operand of ``dtype``; transposes to ``1j * ct``."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    dtype: str
    name = "imag"
    batch_rule = batch_elementwise

    def output_dtype(self) -> str:
        return real_dtype_name(self.dtype)

    def eval(self, ctx, inputs):
        xp, (z,) = operands(inputs, self)
        return [xp.imag(z)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        as_complex = ConvertElementType(self.dtype, real_dtype_name(self.dtype))
        ct = emit(builder, as_complex, [Local(cotangent_outputs[0])], LIN)
        return [emit(builder, Scale(1j), [Local(ct)], LIN)]
