"""The primitives behind :mod:`primitives.tensor.scipy`: SciPy's special functions as
elementwise ops, each registered with its derivatives next to it.

One op class, :class:`Special` (``name``, and an integer ``order`` for the families
``polygamma``, ``iv`` and ``ive``), computes any of them on operands of one shape and
dtype (the elementwise contract of :mod:`..ops.elementwise`): with SciPy on NumPy
arrays, ``torch.special`` on PyTorch tensors and ``cupyx.scipy.special`` on CuPy
arrays where they have the function (else SciPy on a host copy), and SciPy block by
block on Dask arrays (lazily). Each entry of the registry gives one partial derivative per operand,
written on symbolic handles (:class:`~primitives.tensor.ops.elementwise.Sym`: the
operands, then the output ``y``) like ``unary(..., deriv=...)``; a partial given as a
string is a derivative SciPy's function does not have here (the shape parameters of
the incomplete gamma and beta functions, a Poisson count): a JVP along that operand raises
:class:`~tidu.ADRuleError` with that string, so no gradient is ever silently wrong.

=====================  ============================================================
op                     derivative
=====================  ============================================================
``gammaln``            ``digamma(x)``
``gamma``              ``gamma(x) digamma(x)``
``polygamma[n]``       ``polygamma[n+1]`` (``polygamma[0]`` is ``digamma``)
``erf``, ``erfc``      ``±2/sqrt(pi) exp(-x**2)``
``erfcx[n]``           ``erfcx[n+1]``: the ``n``-th derivative, by the recurrence of
                       ``erfcx' = 2 x erfcx(x) - 2/sqrt(pi)`` below 8, by the
                       derivative of the asymptotic series from 8 on (where the
                       recurrence cancels)
``erfinv``             ``sqrt(pi)/2 exp(erfinv(x)**2)``
``ndtr``               ``exp(-x**2/2) / sqrt(2 pi)``
``ndtri``              ``sqrt(2 pi) exp(ndtri(x)**2/2)``
``log_ndtr``           ``ndtr_ratio``: ``r = pdf(x)/cdf(x) = sqrt(2/pi) / erfcx(-x/sqrt(2))``:
                       no cancellation or overflow anywhere (``x / sqrt(2)`` past
                       ``-26`` is where ``pdf`` and ``cdf`` underflow; ``erfcx`` does
                       not); ``r' = -r q`` with ``ndtr_ratio_shift`` ``q = x + r``,
                       computed from ``erfcx'`` for ``x < 0`` (where the sum cancels),
                       and ``q' = 1 - r q``: no ``inf/inf`` where ``erfcx`` overflows
``expit``              ``expit(x) expit(-x)`` (not ``y (1 - y)``, which is 0 once
                       ``y`` rounds to 1)
``logit``              ``1 / (x (1 - x))``
``iv[n]``              ``I_n' = (I_{n-1} + I_{n+1}) / 2`` (``I_0' = I_1``); so
                       ``i1' = i0 - i1/x`` is ``(i0 + iv[2]) / 2``, 1/2 at 0
``ive[n]``             ``(ive[n-1] + ive[n+1]) / 2 - sign(x) ive[n]``; ``ive[n]`` for
                       ``n >= 2`` by its asymptotic series where SciPy's is NaN
                       (``|x| >= 1e10``, ``±inf``)
``betaln``             ``digamma(a) - digamma(a + b)``, and in ``b`` alike
``xlogy``              ``log(y)`` in ``x``; ``x / y`` in ``y``, 0 where ``x == 0``
``xlog1py``            ``log1p(y)`` in ``x``; ``x / (1 + y)`` in ``y``, 0 where ``x == 0``
``xdivy``              ``x / y``, 0 where ``x == 0``: ``1/y`` and ``-xdivy(x, y)/y``
``gammainc(a, x)``     in ``x``: ``x**(a-1) exp(-x) / gamma(a)``; none in ``a``
``gammaincc(a, x)``    minus that; none in ``a``
``stdtr(df, t)``       in ``t``: Student's t density; none in ``df``
``betainc(a, b, x)``   in ``x``: ``x**(a-1) (1-x)**(b-1) / B(a, b)``; none in ``a``, ``b``
``pdtr(k, m)``         in ``m``: ``-m**j exp(-m) / j!`` (``j = floor(k)``); none in ``k``
``pdtrc(k, m)``        minus that; none in ``k``
=====================  ============================================================

Every derivative is itself built from ops of this registry (and ``exp``, ``log``...),
so they differentiate to any order.

:class:`NoDerivative` marks an operand that must not be differentiated (a count
``k`` of a discrete distribution): its value passes through, and a derivative
along it raises.

>>> Special("gammaln").eval(None, [np.array([1.0, 3.0])])[0]
array([0.        , 0.69314718])
>>> Special("polygamma", 1)                       # the derivative of digamma
polygamma[1]

Room: the libraries, above everything but the face; imports only
:mod:`primitives.tensor.ops` and the floor.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from primitives.tensor.backends import NUMPY, library_of, operands
from primitives.tensor.core import dtype_of
from primitives.tensor.errors import TensorNotSupportedError
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.base import LIN_TT, TensorPrimitive, emit, tensor_op
from primitives.tensor.ops.shape import batch_elementwise
from tidu import ADRuleError, ADRuleKind
from tidu.graph import External, Local


def scipy_special():
    """``scipy.special``, imported when first needed: SciPy is not a dependency of tidu."""
    try:
        import scipy.special
    except ImportError:
        raise TensorNotSupportedError(
            "primitives.tensor.scipy computes SciPy's special functions with SciPy, which is "
            "not installed: pip install scipy") from None
    return scipy.special


class _Rule(NamedTuple):
    arity: int
    compute: Callable          # (special module, xp, order, *arrays) -> array
    partials: tuple            # per operand: (order, *operands: Sym, y: Sym) -> Sym, or why not


_SPECIAL: dict[str, _Rule] = {}


@tensor_op
class Special(TensorPrimitive):
    """A function of ``scipy.special`` by ``name`` (``order``: ``n`` of ``polygamma(n, .)``,
    ``iv(n, .)`` and ``ive(n, .)``); its rules are in this module's registry."""

    name: str
    order: int = 0
    batch_rule = batch_elementwise

    def input_count(self) -> int:
        return _SPECIAL[self.name].arity

    def params(self) -> str:
        return str(self.order) if self.name in _ORDERED else ""

    def eval(self, ctx, inputs):
        rule = _SPECIAL[self.name]
        xp, inputs = operands(inputs, self)
        dtype = dtype_of(inputs[0])
        if xp is not NUMPY.xp:
            return [_on_library(self, rule, xp, inputs, dtype)]
        out = rule.compute(scipy_special(), xp, self.order, *inputs)
        return [out if out.dtype == dtype else out.astype(dtype)]   # (SciPy's polygamma: f8)

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        partials = _SPECIAL[self.name].partials
        syms = [ew.Sym(builder, External(key)) for key in primal_inputs]
        y = ew.Sym(builder, External(primal_outputs[0]))
        total = None
        for tangent, partial in zip(tangent_inputs, partials):
            if tangent is None:
                continue
            if isinstance(partial, str):
                raise ADRuleError(repr(self), ADRuleKind.JVP, partial)
            term = ew.scale_tangent(builder, tangent, partial(self.order, *syms, y))
            total = term if total is None else emit(builder, ew.add, [Local(total), Local(term)],
                                                    LIN_TT)
        return [total]


def _on_library(op: Special, rule: _Rule, xp, inputs: list, dtype):
    """``op`` on PyTorch, CuPy or Dask arrays: with ``torch.special`` or
    ``cupyx.scipy.special`` where they have the function, else with SciPy on a host copy
    (the result goes back to the inputs' device); on Dask arrays with SciPy, block by block,
    lazily."""
    if xp.name == "dask":
        import dask.array as da

        def on_blocks(*blocks):
            return np.asarray(rule.compute(scipy_special(), np, op.order, *blocks), dtype)

        return da.map_blocks(on_blocks, *inputs, dtype=dtype)
    module = None
    if xp.name == "torch":
        module = sys.modules["torch"].special
    elif xp.name == "cupy":
        import cupyx.scipy.special as module
    try:
        out = None if module is None else rule.compute(module, xp, op.order, *inputs)
    except AttributeError:                       # the library lacks it: SciPy on the host
        out = None
    if out is None:
        library = library_of(inputs[0])
        if any(library_of(x).records(x) for x in inputs):
            raise TensorNotSupportedError(
                f"{op!r} of a PyTorch tensor that requires grad: PyTorch has no {op.name}; "
                "SciPy's, on the host, is outside PyTorch's autograd (the gradient would be "
                "lost): pass x.detach() (tidu's transforms and tnp.tensor(x, "
                "requires_grad=True) differentiate it)")
        host = [library.to_numpy(array) for array in inputs]
        out = library.from_numpy(rule.compute(scipy_special(), np, op.order, *host),
                                 inputs[0])
    return out if dtype_of(out) == dtype else xp.astype(out, dtype)


def register(name: str, arity: int, compute: Callable, *partials) -> Special:
    """Register the function ``name`` of ``arity`` operands and return its op (order 0).

    ``compute(sp, xp, order, *arrays)`` computes it with the special-function module
    ``sp`` (``scipy.special``, ``torch.special`` or ``cupyx.scipy.special``, which share
    their names) and the array namespace ``xp``. Each of ``partials`` is one operand's
    partial derivative, ``(order, *operands, y) -> Sym``, or a string saying why it has
    none.
    """
    assert len(partials) == arity
    _SPECIAL[name] = _Rule(arity, compute, partials)
    return Special(name)


def _by_name(name: str) -> Callable:
    """``compute`` for the function called ``name`` in every library's module."""
    return lambda sp, xp, order, *arrays: getattr(sp, name)(*arrays)


_ORDERED = {"polygamma", "iv", "ive", "erfcx"}
_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)


def _gaussian(x, scale: float = 1.0):
    """``exp(-scale x**2)`` on a symbolic ``x``."""
    return ((x * x) * -scale).apply(ew.exp)


def _psi(x):
    return x.apply(Special("polygamma", 0))


# --- gamma functions ----------------------------------------------------------------------


def _polygamma(sp, xp, n, x):
    return sp.psi(x) if n == 0 else sp.polygamma(n, x)


gammaln = register("gammaln", 1, _by_name("gammaln"), lambda n, x, y: _psi(x))
gamma = register("gamma", 1, _by_name("gamma"), lambda n, x, y: y * _psi(x))
digamma = register("polygamma", 1, _polygamma,
                  lambda n, x, y: x.apply(Special("polygamma", n + 1)))
betaln = register("betaln", 2, _by_name("betaln"),
                 lambda n, a, b, y: _psi(a) - _psi(a + b),
                 lambda n, a, b, y: _psi(b) - _psi(a + b))

# --- error functions and the normal distribution -----------------------------------------

def _numpy_only(xp) -> None:
    """Raise ``AttributeError`` (the library lacks the function: SciPy on a host copy runs
    it) unless ``xp`` is NumPy's namespace."""
    if getattr(xp, "name", "numpy") != "numpy":
        raise AttributeError("computed with NumPy")


_ASYMPTOTIC_FROM = 8.0     # erfcx's asymptotic series has 1e-22 accuracy from here, 40 terms


def _erfcx_derivative(sp, n: int, x: np.ndarray) -> np.ndarray:
    """The ``n``-th derivative of ``erfcx`` (``n >= 1``) in float64: the recurrence
    ``y' = 2 x y - 2/sqrt(pi)``, ``y^(k+1) = 2 x y^(k) + 2 k y^(k-1)`` below 8 (its terms
    have one sign for ``x < 0``), and the derivative of the asymptotic series
    ``sum_k (-1)^k (2k-1)!! / (2^k sqrt(pi)) x^-(2k+1)`` from 8 on, where the recurrence
    cancels (``2 x y`` tends to ``2/sqrt(pi)``)."""
    x = np.asarray(x, dtype=np.float64)
    large = x >= _ASYMPTOTIC_FROM
    small = np.where(large, 0.0, x)
    previous = sp.erfcx(small)
    y = 2 * small * previous - 2 / _SQRT_PI
    for k in range(1, n):
        previous, y = y, 2 * small * y + 2 * k * previous
    big = np.where(large, x, _ASYMPTOTIC_FROM)
    with np.errstate(under="ignore"):
        term = (-1) ** n * math.factorial(n) / _SQRT_PI * big ** -(n + 1.0)
        series = term
        for k in range(40):
            term = term * (-(2 * k + 1 + n) * (2 * k + 2 + n) / ((2 * k + 2) * 2.0)) / (big * big)
            series = series + term
    return np.where(large, series, y)


def _erfcx(sp, xp, n, x):
    if n == 0:
        return sp.erfcx(x)
    _numpy_only(xp)
    return _erfcx_derivative(sp, n, x)


def _ndtr_ratio(sp, xp, n, x):
    """``pdf(x)/ndtr(x) = sqrt(2/pi) / erfcx(-x/sqrt(2))``, the derivative of ``log_ndtr``."""
    return math.sqrt(2 / math.pi) / sp.erfcx(x * -math.sqrt(0.5))


def _ndtr_ratio_shift(sp, xp, n, x):
    """``x + pdf(x)/ndtr(x)``, which cancels for ``x < 0``: there it is
    ``-erfcx'(u) / (sqrt(2) erfcx(u))`` for ``u = -x/sqrt(2)``, with ``erfcx'`` accurate."""
    _numpy_only(xp)
    x = np.asarray(x, dtype=np.float64)
    u = np.where(x < 0, x * -math.sqrt(0.5), 1.0)
    with np.errstate(invalid="ignore"):
        tail = -_erfcx_derivative(sp, 1, u) / (math.sqrt(2) * sp.erfcx(u))
    tail = np.where(np.isinf(u), 0.0, tail)
    return np.where(x < 0, tail, x + _ndtr_ratio(sp, xp, n, x))


erf = register("erf", 1, _by_name("erf"), lambda n, x, y: _gaussian(x) * (2 / _SQRT_PI))
erfc = register("erfc", 1, _by_name("erfc"), lambda n, x, y: _gaussian(x) * (-2 / _SQRT_PI))
erfcx = register("erfcx", 1, _erfcx, lambda n, x, y: x.apply(Special("erfcx", n + 1)))
ndtr_ratio = register("ndtr_ratio", 1, _ndtr_ratio,
                      lambda n, x, y: -(y * x.apply(Special("ndtr_ratio_shift"))))
ndtr_ratio_shift = register("ndtr_ratio_shift", 1, _ndtr_ratio_shift,
                            lambda n, x, y: 1 - x.apply(ndtr_ratio) * y)
erfinv = register("erfinv", 1, _by_name("erfinv"),
                 lambda n, x, y: _gaussian(y, -1.0) * (_SQRT_PI / 2))
ndtr = register("ndtr", 1, _by_name("ndtr"), lambda n, x, y: _gaussian(x, 0.5) / _SQRT_2PI)
ndtri = register("ndtri", 1, _by_name("ndtri"), lambda n, x, y: _gaussian(y, -0.5) * _SQRT_2PI)
log_ndtr = register("log_ndtr", 1, _by_name("log_ndtr"), lambda n, x, y: x.apply(ndtr_ratio))

# --- the logistic function --------------------------------------------------------------

expit = register("expit", 1, _by_name("expit"), lambda n, x, y: y * (-x).apply(Special("expit")))
logit = register("logit", 1, _by_name("logit"), lambda n, x, y: 1 / (x * (1 - x)))

# --- modified Bessel functions of the first kind, integer order ----------------------------


def _bessel(plain: tuple, general: str) -> Callable:
    """``compute`` of ``iv[n]`` / ``ive[n]``: SciPy's ``i0``/``i1`` (``i0e``/``i1e``) for
    orders 0 and 1, ``iv(n, x)`` (``ive``) above; ``ive`` by its asymptotic series where
    SciPy's gives NaN for a number (``|x|`` from about 1e10, and ``±inf``)."""
    def compute(sp, xp, n, x):
        if n < 2:
            return getattr(sp, plain[n])(x)
        y = getattr(sp, general)(n, x)
        if general == "ive":
            lost = xp.isnan(y) & ~xp.isnan(x)
            if bool(xp.any(lost)):
                y = xp.where(lost, _ive_far(xp, n, xp.where(lost, x, xp.ones_like(x))), y)
        return y
    return compute


def _ive_far(xp, n: int, x):
    """``ive(n, x)`` at large ``|x|``: ``sign(x)**n / sqrt(2 pi |x|)`` times the first four
    terms of ``1 - (m-1)/(8|x|) + (m-1)(m-9)/(2! (8|x|)**2) - ...``, ``m = 4 n**2``; 0 at
    ``±inf``. Where SciPy's gives NaN (``|x| >= 1e10``) the terms left out are below 1e-25
    of it for ``n`` up to 100; from 1e6 on it agrees with SciPy's to 5e-15 for ``n`` up to 10."""
    ax = xp.abs(x)
    m = 4.0 * n * n
    u = 1 / (8 * ax)
    series = 1 - (m - 1) * u * (1 - (m - 9) * u / 2 * (1 - (m - 25) * u / 3))
    return xp.sign(x) ** n * series / xp.sqrt(2 * math.pi * ax)


def _iv_partial(n, x, y):
    if n == 0:
        return x.apply(Special("iv", 1))
    return (x.apply(Special("iv", n - 1)) + x.apply(Special("iv", n + 1))) * 0.5


def _ive_partial(n, x, y):
    # ive(n, x) = iv(n, x) exp(-|x|)
    unscaled = (x.apply(Special("ive", 1)) if n == 0 else
                (x.apply(Special("ive", n - 1)) + x.apply(Special("ive", n + 1))) * 0.5)
    return unscaled - x.apply(ew.sign) * y


i0 = register("iv", 1, _bessel(("i0", "i1"), "iv"), _iv_partial)
i0e = register("ive", 1, _bessel(("i0e", "i1e"), "ive"), _ive_partial)

# --- x log y and friends ------------------------------------------------------------------


def _xdivy(sp, xp, x, y):
    nonzero = x != 0
    return xp.where(nonzero, x / xp.where(nonzero, y, xp.ones_like(y)), xp.zeros_like(x))


xdivy = register("xdivy", 2, lambda sp, xp, n, x, y: _xdivy(sp, xp, x, y),
                lambda n, x, y, out: 1 / y,
                lambda n, x, y, out: -(out.apply(Special("xdivy"), y)))
"""``x / y``, and 0 where ``x == 0`` (TensorFlow's ``xdivy``): the ``y`` derivative of
``xlogy``, zero where ``x`` is even at ``y == 0``."""

xlogy = register("xlogy", 2, _by_name("xlogy"),
                lambda n, x, y, out: y.apply(ew.log),
                lambda n, x, y, out: x.apply(xdivy, y))
xlog1py = register("xlog1py", 2, _by_name("xlog1py"),
                  lambda n, x, y, out: y.apply(ew.log1p),
                  lambda n, x, y, out: x.apply(xdivy, y + 1))

# --- incomplete gamma and beta functions, Student's t distribution -------------------------

_SHAPE_PARAMETER = ("{} has no derivative in its {} here (SciPy gives none); differentiate "
                    "in {} only, or pass the parameter as a constant (tnp.stop_gradient)")


def _gamma_density(n, a, x, y):
    """``x**(a-1) exp(-x) / gamma(a)``, the derivative of ``gammainc(a, x)`` in ``x``."""
    return ((a - 1).apply(xlogy, x) - x - a.apply(gammaln)).apply(ew.exp)


def _t_log_density(df, t):
    """``log`` of Student's t density: ``-betaln(df/2, 1/2) - log(df)/2 - (df+1)/2
    log1p(t**2/df)`` (``betaln`` keeps its accuracy for large ``df``)."""
    half = df.apply(ew.Affine(0.0, 0.5))
    return (-(df * 0.5).apply(betaln, half) - df.apply(ew.log) * 0.5
            - (df + 1) * 0.5 * ((t * t) / df).apply(ew.log1p))


def _beta_density(n, a, b, x, y):
    """``x**(a-1) (1-x)**(b-1) / B(a, b)``, the derivative of ``betainc(a, b, x)`` in ``x``."""
    return ((a - 1).apply(xlogy, x) + (b - 1).apply(xlog1py, -x) - a.apply(betaln, b)
            ).apply(ew.exp)


gammainc = register("gammainc", 2, _by_name("gammainc"),
                   _SHAPE_PARAMETER.format("gammainc(a, x)", "shape a", "x"), _gamma_density)
gammaincc = register("gammaincc", 2, _by_name("gammaincc"),
                    _SHAPE_PARAMETER.format("gammaincc(a, x)", "shape a", "x"),
                    lambda n, a, x, y: -_gamma_density(n, a, x, y))
stdtr = register("stdtr", 2, _by_name("stdtr"),
                _SHAPE_PARAMETER.format("stdtr(df, t)", "degrees of freedom df", "t"),
                lambda n, df, t, y: _t_log_density(df, t).apply(ew.exp))


def _poisson_pmf(n, k, m, y):
    """``m**floor(k) exp(-m) / floor(k)!``: minus the derivative of ``pdtr(k, m)`` in ``m``."""
    k = k.apply(ew.floor)
    return (k.apply(xlogy, m) - m - (k + 1).apply(gammaln)).apply(ew.exp)


_COUNT = "the count k is discrete: {} has no derivative in it (only in the mean m)"
pdtr = register("pdtr", 2, _by_name("pdtr"), _COUNT.format("pdtr(k, m)"),
               lambda n, k, m, y: -_poisson_pmf(n, k, m, y))
pdtrc = register("pdtrc", 2, _by_name("pdtrc"), _COUNT.format("pdtrc(k, m)"), _poisson_pmf)
betainc = register("betainc", 3, _by_name("betainc"),
                  _SHAPE_PARAMETER.format("betainc(a, b, x)", "shape a", "x"),
                   _SHAPE_PARAMETER.format("betainc(a, b, x)", "shape b", "x"), _beta_density)


# --- operands that are not differentiated -----------------------------------------------------


@tensor_op
class NoDerivative(TensorPrimitive):
    """Its operand, unchanged; a derivative along it raises, naming ``what`` it is (the
    count ``k`` of a discrete distribution, the order ``n`` of ``polygamma``).

    Unlike ``stop_gradient`` (derivative zero), this never lets a gradient that would be
    wrong pass silently.
    """

    what: str
    name = "no_derivative"
    batch_rule = batch_elementwise

    def params(self) -> str:
        return repr(self.what)

    def eval(self, ctx, inputs):
        return [inputs[0]]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        raise ADRuleError(repr(self), ADRuleKind.JVP,
                          f"{self.what} is not differentiable (a discrete or integer "
                          "parameter); pass it as a constant (tnp.stop_gradient) or leave it "
                          "out of the arguments you differentiate")
