"""``scipy.special`` for differentiable code: SciPy's names, signatures and values, with
derivatives under every transform (``grad``, ``jvp``, ``jit``, ``vmap``, ``hessian``...) and
for the eager ``Tensor``.

Values are SciPy's own (SciPy computes them on NumPy arrays; it is needed for these
functions but is not a dependency of tidu: ``pip install scipy``). Each derivative is
stated in its function's docstring and in :mod:`._ops`; every derivative is
differentiable again. The functions take real input (complex is refused, with a
``TensorTypeError``), promote integers as SciPy does, and broadcast as ufuncs do.

Arguments SciPy's function has no derivative in (``polygamma``'s order ``n``, the
shape parameters of ``gammainc``, ``betainc`` and ``stdtr``, the count of ``pdtr``)
raise a ``TiduError`` naming them when differentiated; no gradient is silently zero
or wrong.

SciPy's own functions dispatch here for the ufuncs among them once
:mod:`primitives.tensor.scipy` is imported: ``scipy.special.gammaln(t)`` on a ``Tensor``
or traced value runs :func:`gammaln` and differentiates.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> from primitives.tensor.scipy import special
>>> float(tnp.grad(special.gammaln)(3.0))              # digamma(3) = 3/2 - euler_gamma
0.9227843350984671
>>> float(tnp.grad(special.log_ndtr)(-40.0))            # pdf/cdf, exact in the tail
40.02496884720727
"""

from __future__ import annotations

import math

import numpy as np

from primitives.tensor.numpy.lowering import (
    add,
    as_dtype,
    broadcast_to,
    divide,
    elementwise,
    exp,
    first,
    normalize_axes,
    operand,
    result_dtype,
    subtract,
    sum,
    where,
)
from primitives.tensor.backends import to_host
from primitives.tensor.core import Frontend, bind, data_of, shape_of
from primitives.tensor.errors import (
    ConcretizationError,
    TensorNotSupportedError,
    TensorShapeError,
    TensorTypeError,
)
from primitives.tensor.numpy.dispatch import implements
from primitives.tensor.numpy import reductions
from primitives.tensor.numpy.mathfuncs import isinf, numpy_result_dtype
from primitives.tensor.numpy.reductions import stable_shift
from primitives.tensor.scipy import _ops
from primitives.tensor.scipy._ops import Special, scipy_special

__all__ = [
    "gammaln", "gamma", "digamma", "psi", "polygamma", "multigammaln", "betaln",
    "erf", "erfc", "erfcx", "erfinv", "ndtr", "ndtri", "log_ndtr",
    "expit", "logit", "xlogy", "xlog1py", "logsumexp", "softmax", "log_softmax",
    "i0", "i1", "i0e", "i1e", "gammainc", "gammaincc", "betainc", "stdtr", "pdtr", "pdtrc",
]


# --- operands: SciPy's promotion, real values only -------------------------------------------


def _computing_dtype(name: str | None, dtype: np.dtype) -> np.dtype:
    """The dtype SciPy's ufunc ``name`` computes in for operands of ``dtype`` (``float32``
    stays, integers become ``float64``...); for ``None``, or without SciPy: floating dtypes
    stay, others become ``float64``."""
    try:
        ufunc = None if name is None else getattr(scipy_special(), name)
    except TensorNotSupportedError:
        ufunc = None
    if ufunc is None:
        return dtype if dtype.kind == "f" else np.dtype(np.float64)
    try:
        return numpy_result_dtype(ufunc, *[dtype] * ufunc.nin)
    except TypeError:
        raise TensorTypeError(f"scipy.special.{name}: input of dtype {dtype} is not "
                              "supported (SciPy has no loop for it)") from None


def _real(fn: str, ufunc: str | None, *args) -> list:
    """``args`` as operands of the real function ``fn``, in the dtype SciPy's ``ufunc``
    computes in (see :func:`_computing_dtype`)."""
    args = [operand(a, fn) for a in args]
    dtype = result_dtype(*args)
    if dtype.kind == "c":
        raise TensorTypeError(f"scipy.special.{fn}: complex input is not supported (the tidu "
                              "version is real only)")
    if dtype.kind not in "biuf":
        raise TensorTypeError(f"scipy.special.{fn}: input of dtype {dtype} is not supported")
    target = _computing_dtype(ufunc, dtype)
    return [as_dtype(a, target) for a in args]


def _apply(op: Special, fn: str, *args, ufunc: str | None = None):
    """``op`` on ``args`` after SciPy's promotion (that of its ufunc ``ufunc``, by default
    ``fn``) and NumPy's broadcasting."""
    return elementwise(op, *_real(fn, ufunc or fn, *args))


# --- gamma functions -------------------------------------------------------------------------


def gammaln(x):
    """``scipy.special.gammaln``: ``log|gamma(x)|``; derivative ``digamma(x)``.

    >>> gammaln(np.array([1.0, 4.0]))                       # log 0!, log 3!
    array([0.        , 1.79175947])
    """
    return _apply(_ops.gammaln, "gammaln", x)


def gamma(x):
    """``scipy.special.gamma``; derivative ``gamma(x) digamma(x)``.

    >>> gamma(np.array([4.0, 0.5]))                         # 3!, sqrt(pi)
    array([6.        , 1.77245385])
    """
    return _apply(_ops.gamma, "gamma", x)


def digamma(x):
    """``scipy.special.digamma`` (also ``psi``): the derivative of ``gammaln``; its own
    derivative is ``polygamma(1, x)``.

    >>> float(digamma(1.0))                                 # -euler_gamma
    -0.5772156649015329
    """
    return _apply(_ops.digamma, "digamma", x, ufunc="psi")


psi = digamma


def _order(n, fn: str) -> np.ndarray:
    """The integer order(s) ``n`` of ``fn``: not differentiable, and known values."""
    if n.carries_gradient if isinstance(n, Frontend) else getattr(n, "requires_grad", False):
        raise TensorTypeError(f"scipy.special.{fn}: the order n is an integer and has no "
                              "derivative; pass it as a plain integer (or a constant array)")
    n = np.asarray(to_host(data_of(n, f"scipy.special.{fn}: reading the order n")))
    if n.dtype.kind not in "biuf" or np.any(n != np.floor(n)) or np.any(n < 0):
        raise TensorShapeError(f"scipy.special.{fn}: the order n must be a non-negative "
                               f"integer, got {n.tolist()!r}")
    return n.astype(np.int64)


def polygamma(n, x):
    """``scipy.special.polygamma``: the ``n``-th derivative of ``digamma``; its derivative
    in ``x`` is ``polygamma(n + 1, x)``. The order ``n`` is a non-negative integer (or an
    array of them, broadcast against ``x``), known when called (a plain number or array, not a
    value traced by ``jit``: make it a static argument); it is not differentiable, and
    differentiating in it raises. ``float32`` input gives ``float32`` (SciPy's gives
    ``float64``).

    >>> polygamma(1, np.array([1.0, 2.0]))                  # pi**2/6, pi**2/6 - 1
    array([1.64493407, 0.64493407])
    >>> polygamma(np.array([0, 1]), 1.0)                    # orders broadcast against x
    array([-0.57721566,  1.64493407])
    """
    orders = _order(n, "polygamma")
    (x,) = _real("polygamma", "psi", x)
    if orders.ndim == 0:
        return first(bind(Special("polygamma", int(orders)), x))
    shape = np.broadcast_shapes(orders.shape, shape_of(x))
    x = broadcast_to(x, shape)
    orders = np.broadcast_to(orders, shape)
    out = None
    for order in np.unique(orders):
        value = first(bind(Special("polygamma", int(order)), x))
        out = value if out is None else where(orders == order, value, out)
    return out


def multigammaln(a, d: int):
    """``scipy.special.multigammaln``: the log of the multivariate gamma function of
    dimension ``d``, ``d (d-1)/4 log(pi) + sum_j gammaln(a - j/2)``; differentiable in ``a``.
    As SciPy, it raises ``ValueError`` unless ``a > (d - 1)/2`` (checked where the values
    are known: not under ``jit``).

    >>> float(multigammaln(3.0, 2))                         # log(pi**0.5 gamma(3) gamma(2.5))
    1.5501949939575645
    """
    if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 1:
        raise TensorShapeError(f"scipy.special.multigammaln: d must be a positive integer, "
                               f"got {d!r}")
    (a,) = _real("multigammaln", "gammaln", a)
    try:
        values = to_host(data_of(a))          # (any library's: a PyTorch tensor too)
    except ConcretizationError:
        values = None
    if values is not None and np.any(values <= 0.5 * (d - 1)):
        raise TensorShapeError(f"scipy.special.multigammaln: condition a > 0.5 * (d-1) "
                               f"({0.5 * (d - 1)}) not met")
    out = gammaln(a)
    for j in range(1, int(d)):
        out = add(out, gammaln(subtract(a, 0.5 * j)))
    return add(out, d * (d - 1) * 0.25 * math.log(math.pi))


def betaln(a, b):
    """``scipy.special.betaln``: ``log|B(a, b)|``, accurate for large arguments (SciPy's
    own value, not a difference of ``gammaln``); derivatives ``digamma(a) - digamma(a + b)``
    and ``digamma(b) - digamma(a + b)``.

    >>> float(betaln(2.0, 3.0))                             # log(1/12)
    -2.4849066497880004
    """
    return _apply(_ops.betaln, "betaln", a, b)


# --- error functions and the normal distribution ---------------------------------------------


def erf(x):
    """``scipy.special.erf``; derivative ``2/sqrt(pi) exp(-x**2)``.

    >>> erf(np.array([0.0, 1.0]))
    array([0.        , 0.84270079])
    """
    return _apply(_ops.erf, "erf", x)


def erfc(x):
    """``scipy.special.erfc``: ``1 - erf(x)``, accurate where it is small; derivative
    ``-2/sqrt(pi) exp(-x**2)``.

    >>> float(erfc(10.0))
    2.0884875837625446e-45
    """
    return _apply(_ops.erfc, "erfc", x)


def erfcx(x):
    """``scipy.special.erfcx``: ``exp(x**2) erfc(x)`` without overflow; derivative
    ``2 x erfcx(x) - 2/sqrt(pi)``, which cancels for large ``x``: there every derivative
    comes from the asymptotic series (``erfcx'(1e8)`` is ``-5.6e-17``, not 0).

    >>> float(erfcx(100.0))                                 # about 1/(x sqrt(pi))
    0.005641613782989433
    """
    return _apply(_ops.erfcx, "erfcx", x)


def erfinv(x):
    """``scipy.special.erfinv`` (on ``[-1, 1]``, infinite at ±1); derivative
    ``sqrt(pi)/2 exp(erfinv(x)**2)``.

    >>> float(erfinv(erf(0.5)))
    0.5
    """
    return _apply(_ops.erfinv, "erfinv", x)


def ndtr(x):
    """``scipy.special.ndtr``: the standard normal CDF; derivative its density
    ``exp(-x**2/2)/sqrt(2 pi)``.

    >>> ndtr(np.array([0.0, 1.96]))
    array([0.5       , 0.9750021])
    """
    return _apply(_ops.ndtr, "ndtr", x)


def ndtri(y):
    """``scipy.special.ndtri``: the inverse of ``ndtr``; derivative
    ``sqrt(2 pi) exp(ndtri(y)**2/2)``.

    >>> float(ndtri(0.975))
    1.959963984540054
    """
    return _apply(_ops.ndtri, "ndtri", y)


def log_ndtr(x):
    """``scipy.special.log_ndtr``: ``log(ndtr(x))``, accurate far in both tails.

    Its derivative is the ratio ``pdf(x)/ndtr(x)`` of the normal density to the CDF,
    computed as ``sqrt(2/pi) / erfcx(-x/sqrt(2))`` (since ``ndtr(x) = erfcx(-x/sqrt(2))
    exp(-x**2/2)/2``): no 0/0 where both underflow, about ``-x`` for very negative ``x``
    (JAX's loses digits there), and 0 for large ``x``. The second derivative ``-r (x + r)``
    of that ratio ``r`` is as accurate (no NaN where ``erfcx`` overflows, past 37).

    >>> float(log_ndtr(-40.0))
    -804.6084420137539
    """
    return _apply(_ops.log_ndtr, "log_ndtr", x)


# --- the logistic function -------------------------------------------------------------------


def expit(x):
    """``scipy.special.expit``: the logistic sigmoid ``1/(1 + exp(-x))``, without overflow;
    derivative ``expit(x) expit(-x)``, accurate in both tails (not ``y (1 - y)``, which is
    0 once ``y`` rounds to 1: ``expit'(40)`` is ``4.2e-18``, ``expit'(±800)`` 0, no NaN).

    >>> expit(np.array([-800.0, 0.0, 800.0]))
    array([0. , 0.5, 1. ])
    """
    return _apply(_ops.expit, "expit", x)


def logit(p):
    """``scipy.special.logit``: ``log(p/(1 - p))``, SciPy's accurate value near 1/2;
    derivative ``1/(p (1 - p))``.

    >>> float(logit(0.75))
    1.0986122886681098
    """
    return _apply(_ops.logit, "logit", p)


# --- x log y -------------------------------------------------------------------------------


def xlogy(x, y):
    """``scipy.special.xlogy``: ``x log(y)``, and 0 where ``x == 0`` (even at ``y == 0``).

    Derivatives: ``log(y)`` in ``x`` (also at ``x == 0``: it is linear in ``x``), and
    ``x / y`` in ``y``, 0 where ``x == 0`` (so an entropy's ``p log p`` terms at ``p == 0``
    give no NaN).

    >>> import primitives.tensor as tnp
    >>> xlogy(np.array([0.0, 2.0]), np.array([0.0, np.e]))
    array([0., 2.])
    >>> float(tnp.grad(xlogy, argnums=1)(0.0, 0.0))
    0.0
    """
    return _apply(_ops.xlogy, "xlogy", x, y)


def xlog1py(x, y):
    """``scipy.special.xlog1py``: ``x log1p(y)``, and 0 where ``x == 0``; derivatives
    ``log1p(y)`` in ``x`` and ``x / (1 + y)`` in ``y`` (0 where ``x == 0``).

    >>> float(xlog1py(0.0, -1.0)), float(xlog1py(2.0, 1e-20))
    (0.0, 2e-20)
    """
    return _apply(_ops.xlog1py, "xlog1py", x, y)


# --- reductions ------------------------------------------------------------------------------


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False):
    """``scipy.special.logsumexp``: ``log(sum(b * exp(a)))`` over ``axis`` (all axes by
    default), computed stably; with ``return_sign``, ``(log|sum|, sign(sum))``; without it
    a negative sum gives NaN, as in SciPy. Terms whose weight ``b`` is 0 count for nothing,
    even where ``a`` is infinite or NaN (SciPy's rule). Real input only. The same function
    as ``tnp.logsumexp``, after SciPy's promotion of the operands.

    Differentiable in ``a`` and ``b``: the gradient in ``a`` is the softmax (weighted by
    ``b``), and the sign has derivative 0.

    >>> float(logsumexp(np.array([1000.0, 1000.0])))        # 1000 + log 2, no overflow
    1000.6931471805599
    >>> out, sgn = logsumexp(np.array([1.0, 2.0]), b=np.array([1.0, -1.0]), return_sign=True)
    >>> float(out), float(sgn)
    (1.5413248546129181, -1.0)
    """
    if b is None:
        (a,) = _real("logsumexp", None, a)
    else:
        a, b = _real("logsumexp", None, a, b)
    return reductions.logsumexp(a, axis, b, keepdims, return_sign)


def softmax(x, axis=None):
    """``scipy.special.softmax``: ``exp(x) / sum(exp(x))`` over ``axis`` (every element by
    default), computed with the maximum subtracted (a constant; the derivative is exact).
    A slice holding ``+inf`` (or NaN) is NaN throughout, as SciPy's.

    >>> softmax(np.array([0.0, np.log(3.0)]))
    array([0.25, 0.75])
    """
    (x,) = _real("softmax", None, x)
    axes = normalize_axes(axis, len(shape_of(x)), "softmax")
    shifted = exp(subtract(x, stable_shift(x, axes)))
    total = sum(shifted, axes, keepdims=True)
    # shifted by a finite maximum, each term is at most 1: an infinite sum means a +inf
    # entry, which SciPy's shift by +inf makes NaN in every entry of the slice
    return divide(shifted, where(isinf(total), np.nan, total))


def log_softmax(x, axis=None):
    """``scipy.special.log_softmax``: ``x - logsumexp(x)`` over ``axis`` (every element by
    default), accurate where ``softmax`` underflows; one op.

    >>> log_softmax(np.array([1000.0, 1.0]))
    array([   0., -999.])
    """
    (x,) = _real("log_softmax", None, x)
    return reductions.log_softmax_over(x, normalize_axes(axis, len(shape_of(x)), "log_softmax"),
                                       True)


# --- modified Bessel functions ---------------------------------------------------------------


def i0(x):
    """``scipy.special.i0``: the modified Bessel function of order 0; derivative ``i1(x)``.

    >>> import primitives.tensor as tnp
    >>> float(i0(0.0)), float(tnp.grad(i0)(0.0))
    (1.0, 0.0)
    """
    return _apply(_ops.i0, "i0", x)


def i1(x):
    """``scipy.special.i1``: the modified Bessel function of order 1; derivative
    ``i0(x) - i1(x)/x``, computed as ``(i0(x) + iv(2, x))/2`` (the same by the recurrence),
    so it is finite at 0, where it is 1/2.

    >>> import primitives.tensor as tnp
    >>> float(tnp.grad(i1)(0.0))
    0.5
    """
    return _apply(Special("iv", 1), "i1", x)


def i0e(x):
    """``scipy.special.i0e``: ``exp(-|x|) i0(x)``; derivative ``i1e(x) - sign(x) i0e(x)``
    (0 at the kink ``x == 0``).

    >>> float(i0e(0.0))
    1.0
    """
    return _apply(_ops.i0e, "i0e", x)


def i1e(x):
    """``scipy.special.i1e``: ``exp(-|x|) i1(x)``; derivative
    ``(i0e(x) + ive(2, x))/2 - sign(x) i1e(x)``.

    >>> import primitives.tensor as tnp
    >>> float(tnp.grad(i1e)(0.0))
    0.5
    """
    return _apply(Special("ive", 1), "i1e", x)


# --- incomplete gamma and beta functions, Student's t ---------------------------------------


def gammainc(a, x):
    """``scipy.special.gammainc``: the regularized lower incomplete gamma function
    ``P(a, x)``; derivative in ``x``: ``x**(a-1) exp(-x) / gamma(a)``. It has no derivative
    in ``a`` here: differentiating in ``a`` raises.

    >>> import primitives.tensor as tnp
    >>> float(gammainc(1.0, 2.0))                           # 1 - exp(-2)
    0.8646647167633873
    >>> float(tnp.grad(gammainc, argnums=1)(1.0, 2.0))      # exp(-2)
    0.1353352832366127
    """
    return _apply(_ops.gammainc, "gammainc", a, x)


def gammaincc(a, x):
    """``scipy.special.gammaincc``: ``Q(a, x) = 1 - P(a, x)``, accurate where small;
    derivative in ``x``: ``-x**(a-1) exp(-x) / gamma(a)``; none in ``a`` (raises).

    >>> float(gammaincc(1.0, 2.0))                          # exp(-2)
    0.1353352832366127
    """
    return _apply(_ops.gammaincc, "gammaincc", a, x)


def betainc(a, b, x):
    """``scipy.special.betainc``: the regularized incomplete beta function ``I_x(a, b)``;
    derivative in ``x``: ``x**(a-1) (1-x)**(b-1) / B(a, b)``; none in ``a`` or ``b``
    (raises).

    >>> float(betainc(2.0, 1.0, 0.5))                       # x**2
    0.25
    """
    return _apply(_ops.betainc, "betainc", a, b, x)


def stdtr(df, t):
    """``scipy.special.stdtr``: the CDF of Student's t distribution with ``df`` degrees of
    freedom; derivative in ``t``: its density; none in ``df`` (raises).

    >>> float(stdtr(1.0, 1.0))                              # Cauchy: 1/2 + atan(1)/pi
    0.75
    """
    return _apply(_ops.stdtr, "stdtr", df, t)


def pdtr(k, m):
    """``scipy.special.pdtr``: the Poisson CDF, ``P(N <= k)`` for ``N`` of mean ``m``
    (``gammaincc(floor(k) + 1, m)``); derivative in ``m``: ``-m**j exp(-m) / j!`` with
    ``j = floor(k)``. The count ``k`` is discrete: differentiating in it raises.

    >>> import primitives.tensor as tnp
    >>> float(pdtr(1, 2.0))                                # 3 exp(-2)
    0.40600584970983794
    >>> float(tnp.grad(pdtr, argnums=1)(1, 2.0))           # -2 exp(-2)
    -0.2706705664732254
    """
    return _apply(_ops.pdtr, "pdtr", k, m)


def pdtrc(k, m):
    """``scipy.special.pdtrc``: ``P(N > k) = 1 - pdtr(k, m)``, accurate where small;
    derivative in ``m``: ``m**j exp(-m) / j!``; none in ``k`` (raises).

    >>> float(pdtrc(0, 2.0))                               # 1 - exp(-2)
    0.8646647167633873
    """
    return _apply(_ops.pdtrc, "pdtrc", k, m)


# --- SciPy's ufuncs dispatch to these ----------------------------------------------------------

_UFUNCS = {
    "gammaln": gammaln, "gamma": gamma, "psi": digamma, "betaln": betaln, "erf": erf,
    "erfc": erfc, "erfcx": erfcx, "erfinv": erfinv, "ndtr": ndtr, "ndtri": ndtri,
    "log_ndtr": log_ndtr, "expit": expit, "logit": logit, "xlogy": xlogy,
    "xlog1py": xlog1py, "i0": i0, "i1": i1, "i0e": i0e, "i1e": i1e, "gammainc": gammainc,
    "gammaincc": gammaincc, "betainc": betainc, "stdtr": stdtr, "pdtr": pdtr, "pdtrc": pdtrc,
}


def register_dispatch() -> bool:
    """Make SciPy's ufuncs (``scipy.special.gammaln``...) run these functions on tensors and
    traced values (NEP 13), so they differentiate; ``False`` (nothing done) without SciPy.

    >>> register_dispatch()
    True
    """
    try:
        sp = scipy_special()
    except TensorNotSupportedError:
        return False
    for name, fn in _UFUNCS.items():
        implements(getattr(sp, name))(fn)
    return True
