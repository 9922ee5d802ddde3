"""``scipy.stats`` distributions for differentiable code: SciPy's names, parameters and
defaults, differentiable in the data and the parameters under every transform and for the
eager ``Tensor``.

Each distribution is an object with SciPy's methods taking SciPy's arguments
(``norm.logpdf(x, loc=0, scale=1)``); calling it freezes its parameters, as SciPy's
do (``norm(loc=1.0).logpdf(x)``). Values are SciPy's up to rounding; where SciPy
returns NaN for parameters outside their domain (``scale <= 0``...) so do these, and
points outside the support have density 0 (log-density ``-inf``).

Continuous: ``norm``, ``t``, ``laplace``, ``cauchy``, ``logistic`` on the line; ``gamma``,
``expon``, ``lognorm``, ``halfnorm``, ``chi2`` on the half line; ``beta``, ``uniform`` on an
interval; ``multivariate_normal``, ``dirichlet``. Discrete: ``poisson``, ``bernoulli``,
``binom``, ``nbinom``, ``geom``. Each computes in log space where it matters
(``logistic.logcdf`` is ``-logaddexp(0, -z)``, ``expon.logsf`` is ``-z`` exactly,
``cauchy.cdf`` is ``arctan2(1, -z)/pi``, a ``logcdf`` near 0 is ``log1p(-sf)``), and reads
harmless values off the support, so no derivative on the support or off it is NaN (0 off
it; at a kink, JAX's: ``laplace.logpdf`` has derivative ``-1/scale`` in ``x`` at
``x == loc``). Exactly on an edge where the log-density is ``-inf`` (``chi2`` with
``df > 2``, ``gamma`` with ``a > 1`` at ``x == loc``) the ``pdf``'s derivative is NaN.

Differences from SciPy: ``dirichlet`` gives ``-inf`` for a point off the simplex where
SciPy raises (it cannot raise under ``jit``); ``multivariate_normal`` has no
``allow_singular=True`` and no ``cdf``; the counts ``k`` of the discrete distributions,
and ``binom``'s number of trials ``n`` (an integer: SciPy gives NaN for another), are data:
differentiating in them (or in ``loc`` of a discrete distribution) raises. The tails
(``cdf``, ``sf``...) of ``t``, ``gamma``, ``beta``, ``chi2``, ``nbinom`` differentiate in
``x``, ``loc``, ``scale`` (``p``) but not in the shape parameters (``df``, ``a``, ``b``,
``n``): that raises a ``TiduError`` naming them. With parameters outside their domain a
discrete ``logcdf``/``logsf`` is NaN everywhere (SciPy's is 0 at ``k`` at or above the
support's top, where its ``cdf`` is NaN). Where SciPy's generic ``log(cdf)`` underflows or
rounds (``laplace.logcdf`` far out, ``halfnorm.logsf`` past ``z = 38``, a discrete
``logcdf`` near 0) these are finite and accurate. At a degenerate parameter (``p`` of 0 or
1) a ``pmf`` or a tail at a point of probability 0 may have a NaN derivative, as in JAX.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> float(norm.logpdf(0.0))
-0.9189385332046727
>>> tnp.grad(lambda mu: tnp.sum(norm.logpdf(np.array([1.0, 2.0]), loc=mu)))(0.0)
array(3.)
"""

from __future__ import annotations

import math

import numpy as np

from primitives.tensor import numpy as tnp
from primitives.tensor.core import Frontend, bind, dtype_of, shape_of
from primitives.tensor.errors import (
    TensorNotSupportedError,
    TensorShapeError,
    TensorTypeError,
    TiduError,
)
from primitives.tensor.numpy.lowering import as_dtype, operand, result_dtype, stop_gradient
from primitives.tensor.scipy import special
from primitives.tensor.scipy._ops import NoDerivative

__all__ = ["norm", "multivariate_normal", "t", "gamma", "beta", "dirichlet", "poisson",
           "bernoulli", "laplace", "cauchy", "logistic", "expon", "lognorm", "halfnorm",
           "chi2", "uniform", "binom", "nbinom", "geom"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _floats(fn: str, *args, broadcast: bool = True) -> list:
    """``args`` in one floating dtype (as SciPy computes: integers become ``float64``); with
    ``broadcast``, of shapes that broadcast together (else a :class:`TensorShapeError`
    naming ``fn``, not NumPy's own error)."""
    args = [_operand(a, fn) for a in args]
    try:
        if broadcast:
            np.broadcast_shapes(*(shape_of(a) for a in args))
    except ValueError:
        shapes = ", ".join(str(shape_of(a)) for a in args)
        raise TensorShapeError(f"scipy.stats.{fn}: the arguments' shapes {shapes} do not "
                               "broadcast together") from None
    dtype = result_dtype(*args)
    if dtype.kind == "c":
        raise TensorTypeError(f"scipy.stats.{fn}: complex input is not supported")
    if dtype.kind != "f":
        dtype = np.dtype(np.float64)
    return [as_dtype(a, dtype) for a in args]


def _operand(value, fn: str):
    """``value`` as an operand; what NumPy cannot make an array of numbers of (``[1, "a"]``)
    is a :class:`TensorTypeError` naming ``fn``."""
    try:
        value = operand(value, f"scipy.stats.{fn}")
    except TiduError:
        raise
    except (TypeError, ValueError) as error:
        raise TensorTypeError(f"scipy.stats.{fn}: expected an array of numbers, got "
                              f"{value!r} ({error})") from None
    if dtype_of(value).kind not in "biufc":
        raise TensorTypeError(f"scipy.stats.{fn}: expected an array of numbers, got dtype "
                              f"{dtype_of(value)}")
    return value


def _and(*conditions):
    """The elementwise ``and`` of ``conditions`` by ``tnp.logical_and`` (not ``&``, which
    fails between a NumPy ``bool`` and a PyTorch tensor: a default ``scale`` with a PyTorch
    shape parameter)."""
    out = conditions[0]
    for condition in conditions[1:]:
        out = tnp.logical_and(out, condition)
    return out


def _or(*conditions):
    """The elementwise ``or`` of ``conditions`` (``tnp.logical_or``; see :func:`_and`)."""
    out = conditions[0]
    for condition in conditions[1:]:
        out = tnp.logical_or(out, condition)
    return out


def _ones(like, condition):
    """1 where ``condition`` holds, 0 elsewhere, in the dtype of ``like`` (a ``where`` of two
    Python numbers would be ``float64`` for ``float32`` data)."""
    return as_dtype(tnp.where(condition, 1.0, 0.0), dtype_of(like))


def _known(z):
    """Where ``z`` (the data, standardized) is not NaN: a NaN point gives NaN, as in SciPy
    (not a density of 0 or a probability of 1 by the support's tests, which NaN fails)."""
    return tnp.logical_not(tnp.isnan(z))


def _data(value, what: str):
    """``value`` (a count, a discrete ``loc``) marked as data: differentiating in it raises."""
    if isinstance(value, Frontend):
        return bind(NoDerivative(what), value)[0]
    return value


def _held(value, what: str):
    """``(value, zero)``: ``value`` as a constant, and a zero whose derivative raises naming
    ``what`` (see :func:`_data`), to add to the result. For a parameter without derivative
    that feeds a special function (``betainc``, ``gammainc``): in the eager ``Tensor``'s
    backward pass that function's own rule comes first and would raise naming *its*
    parameter (``shape a``), not the distribution's."""
    if not isinstance(value, Frontend):
        return value, None
    marker = _data(value, what)
    return stop_gradient(value), tnp.where(marker > np.inf, marker, 0.0)


def _plus(out, zeros):
    """``out`` plus the ``zeros`` of :func:`_held` (in the dtype of ``out``)."""
    for zero in zeros:
        if zero is not None:
            out = out + as_dtype(zero, dtype_of(out))
    return out


def _domain(valid, value):
    """``value`` where the parameters are ``valid``, NaN elsewhere (as SciPy)."""
    return tnp.where(valid, value, np.nan)


def _inside(condition, x, fill: float = 1.0):
    """``x`` where ``condition`` holds, ``fill`` elsewhere: what a formula reads off its
    support, so that it makes no NaN (nor NaN derivatives) there."""
    return tnp.where(condition, x, fill)


def _log_probability(p, q, zero=None):
    """``log(p)`` for a probability ``p`` and its complement ``q = 1 - p`` (each computed
    accurately): ``log1p(-q)`` where ``p > 1/2`` (SciPy's rule, split at the median). Each
    branch reads a harmless value where the other is taken, so neither makes a NaN
    derivative. ``zero`` marks where ``p`` is 0 by the support (``cdf`` below it): ``-inf``
    there, with derivative 0 in forward mode as in reverse (``log`` would divide a zero
    tangent by 0). ``q`` differentiates as ``-p``: the branch not taken then multiplies no
    infinite derivative of its own by 0 (``gamma.sf`` at 0 for ``a < 1``: NaN, not ``-inf``).
    """
    q = stop_gradient(q) + (stop_gradient(p) - p)
    low = p < 0.5
    high = tnp.logical_not(low)
    if zero is not None:
        low = _and(low, tnp.logical_not(zero))
        high = _and(high, tnp.logical_not(zero))
    out = tnp.where(low, tnp.log(_inside(low, p)), tnp.log1p(-_inside(high, q, 0.0)))
    return out if zero is None else tnp.where(zero, -np.inf, out)


def _log(p, zero):
    """``log(p)``, ``-inf`` where ``zero`` marks ``p == 0`` by the support: derivative 0
    there in forward mode as in reverse."""
    return tnp.where(zero, -np.inf, tnp.log(_inside(tnp.logical_not(zero), p)))


def _log1mexp(log_p, zero):
    """``log(1 - exp(log_p))`` for ``log_p <= 0`` (the log-probability of the complement):
    ``log(-expm1(log_p))`` near 0, ``log1p(-exp(log_p))`` below ``-log 2`` (Mächler's rule),
    each branch reading a harmless value where the other is taken. ``zero`` marks where
    ``log_p == 0`` by the support: ``-inf`` there, derivative 0."""
    near = log_p > -math.log(2)
    keep = tnp.logical_not(zero)
    out = tnp.where(near, tnp.log(-tnp.expm1(_inside(_and(near, keep), log_p, -1.0))),
                    tnp.log1p(-tnp.exp(_inside(tnp.logical_not(near), log_p, -1.0))))
    return tnp.where(zero, -np.inf, out)


class _Distribution:
    """A distribution's methods; calling it freezes parameters (SciPy's frozen
    distributions)."""

    name = "distribution"

    def __call__(self, *args, **kwds) -> Frozen:
        return Frozen(self, args, kwds)

    def __repr__(self) -> str:
        return f"<primitives.tensor.scipy.stats.{self.name}>"


class Frozen:
    """A distribution with its parameters fixed: ``norm(loc=1.0).logpdf(x)`` is
    ``norm.logpdf(x, loc=1.0)``.

    >>> float(norm(loc=1.0, scale=2.0).cdf(1.0))
    0.5
    """

    def __init__(self, dist: _Distribution, args: tuple, kwds: dict) -> None:
        self.dist, self.args, self.kwds = dist, args, kwds

    def __getattr__(self, method: str):
        if method.startswith("_"):
            raise AttributeError(method)
        fn = getattr(self.dist, method)
        return (lambda x: fn(x, *self.args, **self.kwds)) if callable(fn) else fn

    def __repr__(self) -> str:
        return f"<frozen {self.dist.name}{self.args or ''}{self.kwds or ''}>"


# --- continuous, on the line -------------------------------------------------------------------


def _standardized(fn: str, x, loc, scale, *shape):
    """``((x - loc) / scale, scale, valid scale, *shape)`` in one dtype; an invalid scale is
    replaced by 1 (the result is NaN there, by :func:`_domain`)."""
    x, loc, scale, *shape = _floats(fn, x, loc, scale, *shape)
    valid = scale > 0
    scale = _inside(valid, scale)
    return (tnp.divide(tnp.subtract(x, loc), scale), scale, valid, *shape)


class norm_gen(_Distribution):
    """``scipy.stats.norm``: the normal distribution with mean ``loc`` and standard deviation
    ``scale``.

    >>> float(norm.cdf(1.96))
    0.9750021048517795
    >>> float(norm.logcdf(-40.0))                          # log_ndtr: no underflow
    -804.6084420137539
    """

    name = "norm"

    def logpdf(self, x, loc=0, scale=1):
        """``-((x - loc)/scale)**2/2 - log(scale) - log(2 pi)/2``.

        >>> float(norm.logpdf(1.0, loc=1.0, scale=np.e))
        -1.9189385332046727
        """
        z, scale, valid = _standardized("norm.logpdf", x, loc, scale)
        return _domain(valid, -0.5 * (z * z) - tnp.log(scale) - _LOG_SQRT_2PI)

    def pdf(self, x, loc=0, scale=1):
        """``exp(logpdf)``.

        >>> float(norm.pdf(0.0))
        0.3989422804014327
        """
        return tnp.exp(self.logpdf(x, loc, scale))

    def cdf(self, x, loc=0, scale=1):
        """``ndtr((x - loc)/scale)``.

        >>> float(norm.cdf(0.0))
        0.5
        """
        z, scale, valid = _standardized("norm.cdf", x, loc, scale)
        return _domain(valid, special.ndtr(z))

    def logcdf(self, x, loc=0, scale=1):
        """``log_ndtr((x - loc)/scale)``, accurate far in the lower tail (its derivative too).

        >>> float(norm.logcdf(0.0))
        -0.6931471805599453
        """
        z, scale, valid = _standardized("norm.logcdf", x, loc, scale)
        return _domain(valid, special.log_ndtr(z))

    def sf(self, x, loc=0, scale=1):
        """``1 - cdf``, as ``ndtr(-(x - loc)/scale)``.

        >>> float(norm.sf(0.0))
        0.5
        """
        z, scale, valid = _standardized("norm.sf", x, loc, scale)
        return _domain(valid, special.ndtr(-z))

    def logsf(self, x, loc=0, scale=1):
        """``log_ndtr(-(x - loc)/scale)``.

        >>> float(norm.logsf(40.0))
        -804.6084420137539
        """
        z, scale, valid = _standardized("norm.logsf", x, loc, scale)
        return _domain(valid, special.log_ndtr(-z))

    def ppf(self, q, loc=0, scale=1):
        """The quantile function, ``loc + scale * ndtri(q)``.

        >>> float(norm.ppf(0.975))
        1.959963984540054
        """
        q, loc, scale = _floats("norm.ppf", q, loc, scale)
        return _domain(scale > 0, loc + scale * special.ndtri(q))

    def isf(self, q, loc=0, scale=1):
        """The inverse of ``sf``, ``loc - scale * ndtri(q)``.

        >>> float(norm.isf(0.025))
        1.9599639845400545
        """
        q, loc, scale = _floats("norm.isf", q, loc, scale)
        return _domain(scale > 0, loc - scale * special.ndtri(q))


class t_gen(_Distribution):
    """``scipy.stats.t``: Student's t distribution with ``df`` degrees of freedom
    (``df = inf`` is the normal distribution, as in SciPy).

    >>> float(t.logpdf(0.0, 1.0))                          # Cauchy: -log(pi)
    -1.1447298858494
    """

    name = "t"

    def _parts(self, fn, x, df, loc, scale):
        z, scale, valid, df = _standardized(fn, x, loc, scale, df)
        normal = tnp.isinf(df)
        valid = _and(valid, df > 0)
        return z, scale, valid, _inside(_and(tnp.logical_not(normal), valid), df), normal

    def logpdf(self, x, df, loc=0, scale=1):
        """``-betaln(df/2, 1/2) - log(df)/2 - (df+1)/2 log1p(z**2/df) - log(scale)`` for
        ``z = (x - loc)/scale`` (SciPy's ``log(poch(df/2, 1/2))``, accurate for large
        ``df``, as ``log(gamma(1/2)) - betaln(df/2, 1/2)``).

        >>> float(t.logpdf(1.0, np.inf)) == float(norm.logpdf(1.0))
        True
        """
        z, scale, valid, df, normal = self._parts("t.logpdf", x, df, loc, scale)
        student = (-special.betaln(df * 0.5, 0.5) - 0.5 * tnp.log(df)
                   - (df + 1) * 0.5 * tnp.log1p(z * z / df))
        out = tnp.where(normal, -0.5 * (z * z) - _LOG_SQRT_2PI, student)
        return _domain(valid, out - tnp.log(scale))

    def pdf(self, x, df, loc=0, scale=1):
        """``exp(logpdf)``.

        >>> float(t.pdf(0.0, 1.0))                         # 1/pi
        0.31830988618379075
        """
        return tnp.exp(self.logpdf(x, df, loc, scale))

    def cdf(self, x, df, loc=0, scale=1):
        """``stdtr(df, (x - loc)/scale)``; differentiable in ``x``, ``loc``, ``scale``, not
        in ``df`` (raises).

        >>> float(t.cdf(1.0, 1.0))
        0.75
        """
        z, scale, valid, df, normal = self._parts("t.cdf", x, df, loc, scale)
        return _domain(valid, tnp.where(normal, special.ndtr(z), special.stdtr(df, z)))

    def logcdf(self, x, df, loc=0, scale=1):
        """``log(cdf)``, as ``log1p(-sf)`` above the median (accurate near 1).

        >>> float(t.logcdf(0.0, 3.0))
        -0.6931471805599453
        """
        return _log_probability(self.cdf(x, df, loc, scale), self.sf(x, df, loc, scale))

    def sf(self, x, df, loc=0, scale=1):
        """``1 - cdf``, as ``stdtr(df, -(x - loc)/scale)``.

        >>> round(float(t.sf(1.0, 1.0)), 15)
        0.25
        """
        z, scale, valid, df, normal = self._parts("t.sf", x, df, loc, scale)
        return _domain(valid, tnp.where(normal, special.ndtr(-z), special.stdtr(df, -z)))

    def logsf(self, x, df, loc=0, scale=1):
        """``log(sf)``, as ``log1p(-cdf)`` below the median.

        >>> float(t.logsf(0.0, 3.0))
        -0.6931471805599453
        """
        return _log_probability(self.sf(x, df, loc, scale), self.cdf(x, df, loc, scale))


class laplace_gen(_Distribution):
    """``scipy.stats.laplace``: the Laplace (double exponential) distribution of location
    ``loc`` and scale ``scale``, density ``exp(-|x - loc|/scale) / (2 scale)``.

    >>> float(laplace.logpdf(0.0))                         # -log 2
    -0.6931471805599453
    """

    name = "laplace"

    def _parts(self, fn, x, loc, scale, kink):
        """``z``, ``-|z|`` (through ``where``: its derivative at ``z == 0`` is that of the
        side ``kink`` names), ``scale``, ``valid``."""
        z, scale, valid = _standardized(fn, x, loc, scale)
        negative_abs = tnp.where(z >= 0 if kink == "right" else z > 0, -z, z)
        return z, negative_abs, scale, valid

    def logpdf(self, x, loc=0, scale=1):
        """``-|x - loc|/scale - log(2 scale)``; at the kink ``x == loc`` the derivative in
        ``x`` is ``-1/scale`` (the right one, as JAX's).

        >>> float(laplace.logpdf(-1.0, loc=1.0, scale=2.0))  # -1 - log 4
        -2.386294361119891
        """
        _, negative_abs, scale, valid = self._parts("laplace.logpdf", x, loc, scale, "right")
        return _domain(valid, negative_abs - tnp.log(2 * scale))

    def pdf(self, x, loc=0, scale=1):
        """``exp(logpdf)``.

        >>> float(laplace.pdf(0.0))
        0.5
        """
        return tnp.exp(self.logpdf(x, loc, scale))

    def cdf(self, x, loc=0, scale=1):
        """``exp(z)/2`` for ``z = (x - loc)/scale <= 0``, ``1 - exp(-z)/2`` above
        (differentiable at the median: derivative ``1/(2 scale)``).

        >>> float(laplace.cdf(0.0))
        0.5
        """
        z, negative_abs, scale, valid = self._parts("laplace.cdf", x, loc, scale, "left")
        half = 0.5 * tnp.exp(negative_abs)
        return _domain(valid, tnp.where(z > 0, 1 - half, half))

    def logcdf(self, x, loc=0, scale=1):
        """``z - log 2`` for ``z <= 0`` (no underflow), ``log1p(-exp(-z)/2)`` above.

        >>> float(laplace.logcdf(-800.0))                  # SciPy's log(cdf): -inf
        -800.6931471805599
        """
        z, negative_abs, scale, valid = self._parts("laplace.logcdf", x, loc, scale, "left")
        out = tnp.where(z > 0, tnp.log1p(-0.5 * tnp.exp(negative_abs)),
                        negative_abs - math.log(2))
        return _domain(valid, out)

    def sf(self, x, loc=0, scale=1):
        """``1 - cdf``, as ``cdf(-z)``.

        >>> float(laplace.sf(0.0))
        0.5
        """
        z, negative_abs, scale, valid = self._parts("laplace.sf", x, loc, scale, "left")
        half = 0.5 * tnp.exp(negative_abs)
        return _domain(valid, tnp.where(z > 0, half, 1 - half))

    def logsf(self, x, loc=0, scale=1):
        """``logcdf(-z)``: ``-z - log 2`` for ``z > 0``.

        >>> float(laplace.logsf(800.0))
        -800.6931471805599
        """
        z, negative_abs, scale, valid = self._parts("laplace.logsf", x, loc, scale, "left")
        out = tnp.where(z > 0, negative_abs - math.log(2),
                        tnp.log1p(-0.5 * tnp.exp(negative_abs)))
        return _domain(valid, out)


class cauchy_gen(_Distribution):
    """``scipy.stats.cauchy``: the Cauchy distribution of location ``loc`` and scale
    ``scale`` (Student's t with one degree of freedom).

    >>> float(cauchy.logpdf(0.0))                          # -log(pi)
    -1.1447298858494002
    """

    name = "cauchy"

    def logpdf(self, x, loc=0, scale=1):
        """``-log(pi) - log1p(z**2) - log(scale)``, as ``-2 log|z| - log1p(1/z**2)`` for
        ``|z| > 1`` (``z**2`` would overflow far out).

        >>> float(cauchy.logpdf(1e200))                    # -log(pi) - 400 log(10)
        -922.1787670834677
        """
        z, scale, valid = _standardized("cauchy.logpdf", x, loc, scale)
        far = tnp.abs(z) > 1
        near_z = _inside(tnp.logical_not(far), z, 0.0)
        far_z = _inside(far, z, 2.0)
        inverse = 1 / far_z
        out = tnp.where(far, -2 * tnp.log(tnp.abs(far_z)) - tnp.log1p(inverse * inverse),
                        -tnp.log1p(near_z * near_z))
        return _domain(valid, out - math.log(math.pi) - tnp.log(scale))

    def pdf(self, x, loc=0, scale=1):
        """``exp(logpdf)``.

        >>> float(cauchy.pdf(1.0))                         # 1/(2 pi)
        0.15915494309189535
        """
        return tnp.exp(self.logpdf(x, loc, scale))

    def cdf(self, x, loc=0, scale=1):
        """``arctan2(1, -z)/pi`` (SciPy's form: accurate far in the lower tail, unlike
        ``1/2 + arctan(z)/pi``).

        >>> float(cauchy.cdf(1.0))
        0.75
        """
        z, scale, valid = _standardized("cauchy.cdf", x, loc, scale)
        return _domain(valid, tnp.arctan2(1.0, -z) / math.pi)

    def logcdf(self, x, loc=0, scale=1):
        """``log(cdf)``, as ``log1p(-sf)`` above the median (SciPy's rule: accurate near 1).

        >>> float(cauchy.logcdf(1.0))
        -0.2876820724517809
        """
        return _log_probability(self.cdf(x, loc, scale), self.sf(x, loc, scale))

    def sf(self, x, loc=0, scale=1):
        """``arctan2(1, z)/pi``.

        >>> float(cauchy.sf(1.0))
        0.25
        """
        z, scale, valid = _standardized("cauchy.sf", x, loc, scale)
        return _domain(valid, tnp.arctan2(1.0, z) / math.pi)

    def logsf(self, x, loc=0, scale=1):
        """``log(sf)``, as ``log1p(-cdf)`` below the median.

        >>> float(cauchy.logsf(1.0))
        -1.3862943611198906
        """
        return _log_probability(self.sf(x, loc, scale), self.cdf(x, loc, scale))


class logistic_gen(_Distribution):
    """``scipy.stats.logistic``: the logistic distribution of location ``loc`` and scale
    ``scale``, CDF ``expit((x - loc)/scale)``.

    >>> float(logistic.logpdf(0.0))                        # -log 4
    -1.3862943611198906
    """

    name = "logistic"

    def logpdf(self, x, loc=0, scale=1):
        """``-|z| - 2 log1p(exp(-|z|)) - log(scale)`` (no overflow in either tail).

        >>> float(logistic.logpdf(-800.0))
        -800.0
        """
        z, scale, valid = _standardized("logistic.logpdf", x, loc, scale)
        negative_abs = tnp.where(z >= 0, -z, z)
        out = negative_abs - 2 * tnp.log1p(tnp.exp(negative_abs)) - tnp.log(scale)
        return _domain(valid, out)

    def pdf(self, x, loc=0, scale=1):
        """``exp(logpdf)``.

        >>> float(logistic.pdf(0.0))
        0.25
        """
        return tnp.exp(self.logpdf(x, loc, scale))

    def cdf(self, x, loc=0, scale=1):
        """``expit(z)``.

        >>> float(logistic.cdf(0.0))
        0.5
        """
        z, scale, valid = _standardized("logistic.cdf", x, loc, scale)
        return _domain(valid, special.expit(z))

    def logcdf(self, x, loc=0, scale=1):
        """``-log1p(exp(-z))`` (SciPy's ``log_expit``), as ``-logaddexp(0, -z)``: no
        overflow, derivative ``expit(-z)/scale``.

        >>> float(logistic.logcdf(-800.0))
        -800.0
        """
        z, scale, valid = _standardized("logistic.logcdf", x, loc, scale)
        return _domain(valid, -tnp.logaddexp(0.0, -z))

    def sf(self, x, loc=0, scale=1):
        """``expit(-z)``.

        >>> float(logistic.sf(0.0))
        0.5
        """
        z, scale, valid = _standardized("logistic.sf", x, loc, scale)
        return _domain(valid, special.expit(-z))

    def logsf(self, x, loc=0, scale=1):
        """``-log1p(exp(z))``, as ``-logaddexp(0, z)``.

        >>> float(logistic.logsf(800.0))
        -800.0
        """
        z, scale, valid = _standardized("logistic.logsf", x, loc, scale)
        return _domain(valid, -tnp.logaddexp(0.0, z))


# --- continuous, on the half line and on [0, 1] ----------------------------------------------


class gamma_gen(_Distribution):
    """``scipy.stats.gamma``: the gamma distribution with shape ``a`` (and ``loc``,
    ``scale``), on ``x >= loc``.

    >>> float(gamma.logpdf(1.0, 1.0))                      # exponential: -1
    -1.0
    """

    name = "gamma"

    def _parts(self, fn, x, a, loc, scale):
        z, scale, valid, a = _standardized(fn, x, loc, scale, a)
        valid = _and(valid, a > 0, _known(z))
        inside = z >= 0
        return _inside(inside, z), scale, valid, _inside(valid, a), inside

    def logpdf(self, x, a, loc=0, scale=1):
        """``xlogy(a - 1, z) - z - gammaln(a) - log(scale)`` for ``z = (x - loc)/scale >= 0``,
        ``-inf`` below.

        >>> float(gamma.logpdf(-1.0, 2.0))
        -inf
        """
        z, scale, valid, a, inside = self._parts("gamma.logpdf", x, a, loc, scale)
        out = special.xlogy(a - 1, z) - z - special.gammaln(a) - tnp.log(scale)
        return _domain(valid, tnp.where(inside, out, -np.inf))

    def pdf(self, x, a, loc=0, scale=1):
        """``exp(logpdf)``.

        >>> float(gamma.pdf(0.0, 1.0))
        1.0
        """
        return tnp.exp(self.logpdf(x, a, loc, scale))

    def cdf(self, x, a, loc=0, scale=1):
        """``gammainc(a, z)``; differentiable in ``x``, ``loc``, ``scale``, not in ``a``
        (raises).

        >>> float(gamma.cdf(2.0, 1.0))                     # 1 - exp(-2)
        0.8646647167633873
        """
        z, scale, valid, a, inside = self._parts("gamma.cdf", x, a, loc, scale)
        return _domain(valid, tnp.where(inside, special.gammainc(a, z), 0.0))

    def logcdf(self, x, a, loc=0, scale=1):
        """``log(cdf)``, as ``log1p(-sf)`` above the median (accurate near 1).

        >>> float(gamma.logcdf(2.0, 1.0))
        -0.14541345786885906
        """
        z, _, valid, _, inside = self._parts("gamma.logcdf", x, a, loc, scale)
        zero = _at_or_below(valid, z, inside)
        x = _away(zero, x, loc + scale)
        return _log_probability(self.cdf(x, a, loc, scale), self.sf(x, a, loc, scale), zero)

    def sf(self, x, a, loc=0, scale=1):
        """``gammaincc(a, z)``, accurate where small.

        >>> float(gamma.sf(2.0, 1.0))                      # exp(-2)
        0.1353352832366127
        """
        z, scale, valid, a, inside = self._parts("gamma.sf", x, a, loc, scale)
        return _domain(valid, tnp.where(inside, special.gammaincc(a, z), 1.0))

    def logsf(self, x, a, loc=0, scale=1):
        """``log(sf)``, as ``log1p(-cdf)`` below the median.

        >>> float(gamma.logsf(2.0, 1.0))
        -2.0
        """
        return _log_probability(self.sf(x, a, loc, scale), self.cdf(x, a, loc, scale))


def _half_line(fn, x, loc, scale, *shape, closed=True):
    """``(z, scale, valid, *shape, inside)`` for a distribution on ``z >= 0`` (``z > 0``
    without ``closed``): ``z`` is 1 outside (no NaN, nor NaN derivative, from the formulas
    there: ``log(z)`` is finite), NaN data is invalid (NaN out)."""
    z, scale, valid, *shape = _standardized(fn, x, loc, scale, *shape)
    valid = _and(valid, _known(z))
    inside = z >= 0 if closed else z > 0
    return (_inside(inside, z), scale, valid, *shape, inside)


def _at_or_below(valid, z, inside):
    """Where the CDF of a distribution on ``z >= 0`` is 0 by the support (``z <= 0``), for
    :func:`_log_probability`'s ``zero``."""
    return _and(valid, tnp.logical_not(_and(inside, z > 0)))


def _away(zero, x, point):
    """``x``, moved to ``point`` inside the support where ``zero`` marks a log-probability
    ``-inf`` by the support: the probability's derivative there may be infinite (``gamma``
    of ``a < 1`` at 0), and the zero cotangent of ``-inf`` times it would be NaN."""
    return tnp.where(zero, point, x)


class expon_gen(_Distribution):
    """``scipy.stats.expon``: the exponential distribution on ``x >= loc`` of mean
    ``loc + scale`` (rate ``1/scale``).

    >>> float(expon.logpdf(1.0, scale=0.5))                # log 2 - 2
    -1.3068528194400546
    """

    name = "expon"

    def logpdf(self, x, loc=0, scale=1):
        """``-z - log(scale)`` for ``z = (x - loc)/scale >= 0``, ``-inf`` below.

        >>> float(expon.logpdf(-1.0))
        -inf
        """
        z, scale, valid, inside = _half_line("expon.logpdf", x, loc, scale)
        return _domain(valid, tnp.where(inside, -z - tnp.log(scale), -np.inf))

    def pdf(self, x, loc=0, scale=1):
        """``exp(logpdf)``.

        >>> float(expon.pdf(0.0))
        1.0
        """
        return tnp.exp(self.logpdf(x, loc, scale))

    def cdf(self, x, loc=0, scale=1):
        """``-expm1(-z)`` (accurate for small ``z``), 0 below the support.

        >>> float(expon.cdf(1e-20))
        1e-20
        """
        z, scale, valid, inside = _half_line("expon.cdf", x, loc, scale)
        return _domain(valid, tnp.where(inside, -tnp.expm1(-z), 0.0))

    def logcdf(self, x, loc=0, scale=1):
        """``log(1 - exp(-z))``, as ``log(-expm1(-z))`` for ``z < log 2`` and
        ``log1p(-exp(-z))`` above; ``-inf`` for ``z <= 0``.

        >>> float(expon.logcdf(1e-20)), float(expon.logcdf(50.0))
        (-46.051701859880914, -1.9287498479639178e-22)
        """
        z, scale, valid, inside = _half_line("expon.logcdf", x, loc, scale)
        return _domain(valid, _log1mexp(-z, _at_or_below(valid, z, inside)))

    def sf(self, x, loc=0, scale=1):
        """``exp(-z)``, 1 below the support.

        >>> float(expon.sf(1.0))
        0.36787944117144233
        """
        z, scale, valid, inside = _half_line("expon.sf", x, loc, scale)
        return _domain(valid, tnp.where(inside, tnp.exp(-z), 1.0))

    def logsf(self, x, loc=0, scale=1):
        """``-z`` exactly (0 below the support).

        >>> float(expon.logsf(1000.0))
        -1000.0
        """
        z, scale, valid, inside = _half_line("expon.logsf", x, loc, scale)
        return _domain(valid, tnp.where(inside, -z, 0.0))


class lognorm_gen(_Distribution):
    """``scipy.stats.lognorm``: the log-normal distribution of shape ``s`` (the standard
    deviation of the log), ``log((x - loc)/scale)`` normal; ``scale`` is ``exp`` of its
    mean.

    >>> float(lognorm.logpdf(1.0, 1.0))                    # -log(2 pi)/2
    -0.9189385332046727
    """

    name = "lognorm"

    def _parts(self, fn, x, s, loc, scale):
        z, scale, valid, s, inside = _half_line(fn, x, loc, scale, s, closed=False)
        valid = _and(valid, s > 0)
        log_z = tnp.log(_inside(inside, z))
        return log_z, scale, valid, _inside(valid, s), inside

    def logpdf(self, x, s, loc=0, scale=1):
        """``-log(z)**2/(2 s**2) - log(s z scale) - log(2 pi)/2`` for ``z > 0``, ``-inf``
        for ``z <= 0``.

        >>> float(lognorm.logpdf(np.e, 1.0))               # -1/2 - 1 - log(2 pi)/2
        -2.4189385332046727
        """
        log_z, scale, valid, s, inside = self._parts("lognorm.logpdf", x, s, loc, scale)
        u = log_z / s
        out = -0.5 * (u * u) - tnp.log(s) - log_z - _LOG_SQRT_2PI - tnp.log(scale)
        return _domain(valid, tnp.where(inside, out, -np.inf))

    def pdf(self, x, s, loc=0, scale=1):
        """``exp(logpdf)``.

        >>> float(lognorm.pdf(1.0, 1.0))
        0.3989422804014327
        """
        return tnp.exp(self.logpdf(x, s, loc, scale))

    def cdf(self, x, s, loc=0, scale=1):
        """``ndtr(log(z)/s)``, 0 for ``z <= 0``.

        >>> float(lognorm.cdf(1.0, 0.5))
        0.5
        """
        log_z, scale, valid, s, inside = self._parts("lognorm.cdf", x, s, loc, scale)
        return _domain(valid, tnp.where(inside, special.ndtr(log_z / s), 0.0))

    def logcdf(self, x, s, loc=0, scale=1):
        """``log_ndtr(log(z)/s)``, ``-inf`` for ``z <= 0``.

        >>> float(lognorm.logcdf(1.0, 0.5))
        -0.6931471805599453
        """
        log_z, scale, valid, s, inside = self._parts("lognorm.logcdf", x, s, loc, scale)
        return _domain(valid, tnp.where(inside, special.log_ndtr(log_z / s), -np.inf))

    def sf(self, x, s, loc=0, scale=1):
        """``ndtr(-log(z)/s)``, 1 for ``z <= 0``.

        >>> float(lognorm.sf(1.0, 0.5))
        0.5
        """
        log_z, scale, valid, s, inside = self._parts("lognorm.sf", x, s, loc, scale)
        return _domain(valid, tnp.where(inside, special.ndtr(-log_z / s), 1.0))

    def logsf(self, x, s, loc=0, scale=1):
        """``log_ndtr(-log(z)/s)``, 0 for ``z <= 0``.

        >>> float(lognorm.logsf(1.0, 0.5))
        -0.6931471805599453
        """
        log_z, scale, valid, s, inside = self._parts("lognorm.logsf", x, s, loc, scale)
        return _domain(valid, tnp.where(inside, special.log_ndtr(-log_z / s), 0.0))


class halfnorm_gen(_Distribution):
    """``scipy.stats.halfnorm``: the distribution of ``loc + scale |N(0, 1)|``, on
    ``x >= loc``.

    >>> float(halfnorm.pdf(0.0))                           # sqrt(2/pi)
    0.7978845608028654
    """

    name = "halfnorm"

    def logpdf(self, x, loc=0, scale=1):
        """``log(2/pi)/2 - z**2/2 - log(scale)`` for ``z >= 0``, ``-inf`` below.

        >>> float(halfnorm.logpdf(-1.0))
        -inf
        """
        z, scale, valid, inside = _half_line("halfnorm.logpdf", x, loc, scale)
        out = 0.5 * math.log(2 / math.pi) - 0.5 * (z * z) - tnp.log(scale)
        return _domain(valid, tnp.where(inside, out, -np.inf))

    def pdf(self, x, loc=0, scale=1):
        """``exp(logpdf)``.

        >>> float(halfnorm.pdf(-1.0))
        0.0
        """
        return tnp.exp(self.logpdf(x, loc, scale))

    def cdf(self, x, loc=0, scale=1):
        """``erf(z/sqrt(2))``, 0 below the support.

        >>> float(halfnorm.cdf(1.0))
        0.6826894921370859
        """
        z, scale, valid, inside = _half_line("halfnorm.cdf", x, loc, scale)
        return _domain(valid, tnp.where(inside, special.erf(z * math.sqrt(0.5)), 0.0))

    def logcdf(self, x, loc=0, scale=1):
        """``log(cdf)``, as ``log1p(-sf)`` above the median; ``-inf`` for ``z <= 0``.

        >>> float(halfnorm.logcdf(10.0))                   # about -erfc(10/sqrt(2))
        -1.523970604832094e-23
        """
        z, _, valid, inside = _half_line("halfnorm.logcdf", x, loc, scale)
        return _log_probability(self.cdf(x, loc, scale), self.sf(x, loc, scale),
                                _at_or_below(valid, z, inside))

    def sf(self, x, loc=0, scale=1):
        """``2 ndtr(-z)``, 1 below the support.

        >>> float(halfnorm.sf(1.0))
        0.31731050786291415
        """
        z, scale, valid, inside = _half_line("halfnorm.sf", x, loc, scale)
        return _domain(valid, tnp.where(inside, 2 * special.ndtr(-z), 1.0))

    def logsf(self, x, loc=0, scale=1):
        """``log1p(-cdf)`` for ``z <= 1``, ``log 2 + log_ndtr(-z)`` above: no underflow far
        in the tail (SciPy's ``log(sf)`` is ``-inf`` from ``z = 38.6`` on).

        >>> float(halfnorm.logsf(40.0))
        -803.915294833194
        """
        z, scale, valid, inside = _half_line("halfnorm.logsf", x, loc, scale)
        tail = z > 1
        out = tnp.where(tail, math.log(2) + special.log_ndtr(-_inside(tail, z, 2.0)),
                        tnp.log1p(-special.erf(_inside(tnp.logical_not(tail), z, 0.0)
                                               * math.sqrt(0.5))))
        return _domain(valid, tnp.where(inside, out, 0.0))


class chi2_gen(_Distribution):
    """``scipy.stats.chi2``: the chi-squared distribution with ``df`` degrees of freedom
    (``gamma`` of shape ``df/2`` and scale 2), on ``x >= loc``.

    >>> float(chi2.logpdf(1.0, 2.0))                       # -log 2 - 1/2
    -1.1931471805599454
    """

    name = "chi2"

    def _parts(self, fn, x, df, loc, scale, zeros=None):
        if zeros is not None:
            df, zero = _held(df, f"the degrees of freedom df of scipy.stats.{fn}")
            zeros.append(zero)
        z, scale, valid, df, inside = _half_line(fn, x, loc, scale, df)
        valid = _and(valid, df > 0)
        return z, scale, valid, _inside(valid, df), inside

    def logpdf(self, x, df, loc=0, scale=1):
        """``xlogy(df/2 - 1, z) - z/2 - gammaln(df/2) - df log(2)/2 - log(scale)`` for
        ``z >= 0``, ``-inf`` below.

        >>> float(chi2.logpdf(0.0, 2.0))                   # -log 2
        -0.6931471805599453
        """
        z, scale, valid, df, inside = self._parts("chi2.logpdf", x, df, loc, scale)
        half = 0.5 * df
        out = (special.xlogy(half - 1, z) - 0.5 * z - special.gammaln(half)
               - math.log(2) * half - tnp.log(scale))
        return _domain(valid, tnp.where(inside, out, -np.inf))

    def pdf(self, x, df, loc=0, scale=1):
        """``exp(logpdf)``.

        >>> float(chi2.pdf(0.0, 2.0))
        0.5
        """
        return tnp.exp(self.logpdf(x, df, loc, scale))

    def cdf(self, x, df, loc=0, scale=1):
        """``gammainc(df/2, z/2)`` (SciPy's ``chdtr``); differentiable in ``x``, ``loc``,
        ``scale``, not in ``df`` (raises).

        >>> float(chi2.cdf(2.0, 2.0))                      # 1 - exp(-1)
        0.6321205588285577
        """
        zeros = []
        z, scale, valid, df, inside = self._parts("chi2.cdf", x, df, loc, scale, zeros)
        out = tnp.where(inside, special.gammainc(0.5 * df, 0.5 * z), 0.0)
        return _plus(_domain(valid, out), zeros)

    def logcdf(self, x, df, loc=0, scale=1):
        """``log(cdf)``, as ``log1p(-sf)`` above the median; ``-inf`` for ``z <= 0``.

        >>> float(chi2.logcdf(2.0, 2.0))                   # log(1 - exp(-1))
        -0.4586751453870821
        """
        z, _, valid, _, inside = self._parts("chi2.logcdf", x, df, loc, scale, [])
        zero = _at_or_below(valid, z, inside)
        x = _away(zero, x, loc + scale)
        return _log_probability(self.cdf(x, df, loc, scale), self.sf(x, df, loc, scale), zero)

    def sf(self, x, df, loc=0, scale=1):
        """``gammaincc(df/2, z/2)`` (``chdtrc``), accurate where small.

        >>> round(float(chi2.sf(2.0, 2.0)), 15)            # exp(-1)
        0.367879441171442
        """
        zeros = []
        z, scale, valid, df, inside = self._parts("chi2.sf", x, df, loc, scale, zeros)
        out = tnp.where(inside, special.gammaincc(0.5 * df, 0.5 * z), 1.0)
        return _plus(_domain(valid, out), zeros)

    def logsf(self, x, df, loc=0, scale=1):
        """``log(sf)``, as ``log1p(-cdf)`` below the median.

        >>> round(float(chi2.logsf(2.0, 2.0)), 15)
        -1.0
        """
        return _log_probability(self.sf(x, df, loc, scale), self.cdf(x, df, loc, scale))


class beta_gen(_Distribution):
    """``scipy.stats.beta``: the beta distribution with shapes ``a``, ``b`` on
    ``[loc, loc + scale]``.

    >>> float(beta.pdf(0.5, 2.0, 2.0))                     # 6 x (1 - x)
    1.5
    """

    name = "beta"

    def _parts(self, fn, x, a, b, loc, scale):
        z, scale, valid, a, b = _standardized(fn, x, loc, scale, a, b)
        valid = _and(valid, a > 0, b > 0, _known(z))
        inside = _and(z >= 0, z <= 1)
        return (_inside(inside, z, 0.5), z, scale, valid, _inside(valid, a), _inside(valid, b),
                inside)

    def logpdf(self, x, a, b, loc=0, scale=1):
        """``xlogy(a - 1, z) + xlog1py(b - 1, -z) - betaln(a, b) - log(scale)`` on
        ``0 <= z <= 1``, ``-inf`` outside.

        >>> float(beta.logpdf(0.5, 1.0, 1.0))
        0.0
        """
        z, _, scale, valid, a, b, inside = self._parts("beta.logpdf", x, a, b, loc, scale)
        out = (special.xlogy(a - 1, z) + special.xlog1py(b - 1, -z) - special.betaln(a, b)
               - tnp.log(scale))
        return _domain(valid, tnp.where(inside, out, -np.inf))

    def pdf(self, x, a, b, loc=0, scale=1):
        """``exp(logpdf)``.

        >>> float(beta.pdf(0.25, 1.0, 1.0))
        1.0
        """
        return tnp.exp(self.logpdf(x, a, b, loc, scale))

    def cdf(self, x, a, b, loc=0, scale=1):
        """``betainc(a, b, z)`` (0 below the support, 1 above); differentiable in ``x``,
        ``loc``, ``scale``, not in ``a``, ``b`` (raises).

        >>> float(beta.cdf(0.5, 2.0, 1.0))                 # x**2
        0.25
        """
        z, raw, scale, valid, a, b, inside = self._parts("beta.cdf", x, a, b, loc, scale)
        out = tnp.where(inside, special.betainc(a, b, z), _ones(raw, raw >= 0))
        return _domain(valid, out)

    def logcdf(self, x, a, b, loc=0, scale=1):
        """``log(cdf)``, as ``log1p(-sf)`` above the median (accurate near 1).

        >>> float(beta.logcdf(0.5, 1.0, 1.0))
        -0.6931471805599453
        """
        _, raw, _, valid, *_ = self._parts("beta.logcdf", x, a, b, loc, scale)
        zero = _and(valid, raw <= 0)
        x = _away(zero, x, loc + 0.5 * scale)
        return _log_probability(self.cdf(x, a, b, loc, scale), self.sf(x, a, b, loc, scale),
                                zero)

    def sf(self, x, a, b, loc=0, scale=1):
        """``1 - cdf``, as ``betainc(b, a, 1 - z)``.

        >>> float(beta.sf(0.5, 2.0, 1.0))
        0.75
        """
        z, raw, scale, valid, a, b, inside = self._parts("beta.sf", x, a, b, loc, scale)
        out = tnp.where(inside, special.betainc(b, a, 1 - z), _ones(raw, raw < 0))
        return _domain(valid, out)

    def logsf(self, x, a, b, loc=0, scale=1):
        """``log(sf)``, as ``log1p(-cdf)`` below the median.

        >>> float(beta.logsf(0.5, 1.0, 1.0))
        -0.6931471805599453
        """
        _, raw, _, valid, *_ = self._parts("beta.logsf", x, a, b, loc, scale)
        zero = _and(valid, raw >= 1)
        x = _away(zero, x, loc + 0.5 * scale)
        return _log_probability(self.sf(x, a, b, loc, scale), self.cdf(x, a, b, loc, scale),
                                zero)


class uniform_gen(_Distribution):
    """``scipy.stats.uniform``: the uniform distribution on ``[loc, loc + scale]``.

    >>> float(uniform.pdf(0.5, loc=0.0, scale=2.0))
    0.5
    """

    name = "uniform"

    def _parts(self, fn, x, loc, scale):
        z, scale, valid = _standardized(fn, x, loc, scale)
        valid = _and(valid, _known(z))
        return z, scale, valid, _and(z >= 0, z <= 1)

    def logpdf(self, x, loc=0, scale=1):
        """``-log(scale)`` on the closed interval, ``-inf`` outside.

        >>> float(uniform.logpdf(1.0, scale=2.0)), float(uniform.logpdf(1.5))
        (-0.6931471805599453, -inf)
        """
        _, scale, valid, inside = self._parts("uniform.logpdf", x, loc, scale)
        return _domain(valid, tnp.where(inside, -tnp.log(scale), -np.inf))

    def pdf(self, x, loc=0, scale=1):
        """``exp(logpdf)``.

        >>> float(uniform.pdf(-0.5))
        0.0
        """
        return tnp.exp(self.logpdf(x, loc, scale))

    def cdf(self, x, loc=0, scale=1):
        """``z = (x - loc)/scale`` clipped to ``[0, 1]``; derivative ``1/scale`` on the
        closed interval (JAX's), 0 outside.

        >>> float(uniform.cdf(0.25)), float(uniform.cdf(3.0))
        (0.25, 1.0)
        """
        z, scale, valid, inside = self._parts("uniform.cdf", x, loc, scale)
        return _domain(valid, tnp.where(inside, z, _ones(z, z > 1)))

    def logcdf(self, x, loc=0, scale=1):
        """``log(z)``, ``-inf`` for ``z <= 0``, 0 above the interval.

        >>> float(uniform.logcdf(0.5))
        -0.6931471805599453
        """
        z, _, valid, _ = self._parts("uniform.logcdf", x, loc, scale)
        return _log(self.cdf(x, loc, scale), _and(valid, z <= 0))

    def sf(self, x, loc=0, scale=1):
        """``1 - z`` on the interval, 1 below it, 0 above.

        >>> float(uniform.sf(0.25))
        0.75
        """
        z, scale, valid, inside = self._parts("uniform.sf", x, loc, scale)
        return _domain(valid, tnp.where(inside, 1 - z, _ones(z, z < 0)))

    def logsf(self, x, loc=0, scale=1):
        """``log1p(-z)``, ``-inf`` for ``z >= 1``, 0 below the interval.

        >>> float(uniform.logsf(1e-20))
        -1e-20
        """
        z, scale, valid, inside = self._parts("uniform.logsf", x, loc, scale)
        below = z < 0
        out = tnp.log1p(-_inside(_and(inside, z < 1), z, 0.0))
        return _domain(valid, tnp.where(z >= 1, -np.inf, tnp.where(below, 0.0, out)))


# --- multivariate ------------------------------------------------------------------------------


def _squeeze_output(out):
    """SciPy's ``_squeeze_output``: every length-1 axis removed."""
    return tnp.squeeze(out) if 1 in shape_of(out) else out


class multivariate_normal_gen(_Distribution):
    """``scipy.stats.multivariate_normal``: the normal distribution of mean ``mean`` and
    covariance ``cov`` (a matrix, a vector of variances or one variance), SciPy's shapes:
    the last axis of ``x`` holds the components, and length-1 axes of the result are
    squeezed.

    Computed through a Cholesky factor ``L`` of ``cov``: ``-(k log(2 pi) + log det cov +
    |L^-1 (x - mean)|**2)/2``, differentiable in ``x``, ``mean`` and ``cov``. ``cov`` is
    symmetrized first (``(cov + cov.T)/2``, as JAX does), so its gradient is symmetric.
    ``allow_singular=True`` is not supported (SciPy's pseudo-determinant has no derivative
    where the rank changes).

    >>> float(multivariate_normal.logpdf(np.zeros(2), cov=np.eye(2)))     # -log(2 pi)
    -1.8378770664093453
    """

    name = "multivariate_normal"

    def logpdf(self, x, mean=None, cov=1, allow_singular=False):
        """The log density at the points ``x`` (``(..., k)``).

        >>> float(multivariate_normal.logpdf([1.0, 1.0], mean=[1.0, 1.0], cov=[1.0, 4.0]))
        -2.5310242469692907
        """
        if allow_singular:
            raise TensorNotSupportedError(
                "scipy.stats.multivariate_normal: allow_singular=True is not supported; the "
                "covariance must be positive definite")
        fn = "multivariate_normal.logpdf"
        x, mean, cov = self._process(fn, x, mean, cov)
        dim = shape_of(cov)[0]
        factor = tnp.linalg.cholesky((cov + tnp.swapaxes(cov, 0, 1)) * 0.5)
        points = shape_of(x)[:-1]
        count = int(np.prod(points, dtype=np.int64))
        centered = tnp.reshape(x - mean, (count, dim))
        whitened = tnp.linalg.solve(factor, tnp.transpose(centered))        # (dim, count)
        mahalanobis = tnp.sum(whitened * whitened, axis=0)
        log_det = 2 * tnp.sum(tnp.log(tnp.diagonal(factor)))
        out = -0.5 * (mahalanobis + log_det) - dim * _LOG_SQRT_2PI
        return _squeeze_output(tnp.reshape(out, points))

    def pdf(self, x, mean=None, cov=1, allow_singular=False):
        """``exp(logpdf)``.

        >>> float(multivariate_normal.pdf(0.0))
        0.3989422804014327
        """
        return tnp.exp(self.logpdf(x, mean, cov, allow_singular))

    @staticmethod
    def _process(fn: str, x, mean, cov):
        """SciPy's ``_process_parameters`` and ``_process_quantiles``: ``x`` as ``(..., k)``,
        ``mean`` as ``(k,)``, ``cov`` as ``(k, k)``."""
        if mean is None:
            cov = operand(cov, f"scipy.stats.{fn}")
            dim = 1 if len(shape_of(cov)) < 2 else shape_of(cov)[0]
            mean = np.zeros(dim)
        else:
            mean = operand(mean, f"scipy.stats.{fn}")
            dim = int(np.prod(shape_of(mean), dtype=np.int64))
        x, mean, cov = _floats(fn, x, mean, cov, broadcast=False)
        if dim == 1:
            mean, cov = tnp.reshape(mean, (1,)), tnp.reshape(cov, (1, 1))
        if len(shape_of(mean)) != 1 or shape_of(mean)[0] != dim:
            raise TensorShapeError(f"scipy.stats.{fn}: array 'mean' must be a vector of "
                                   f"length {dim}")
        if len(shape_of(cov)) == 0:
            cov = cov * np.eye(dim, dtype=dtype_of(cov))
        elif len(shape_of(cov)) == 1:
            cov = tnp.diag(cov)
        if len(shape_of(cov)) != 2 or shape_of(cov) != (dim, dim):
            raise TensorShapeError(f"scipy.stats.{fn}: array 'cov' of shape {shape_of(cov)} "
                                   f"does not fit a mean of length {dim}")
        if len(shape_of(x)) == 0:
            x = tnp.reshape(x, (1,))
        elif len(shape_of(x)) == 1:
            x = tnp.reshape(x, (-1, 1) if dim == 1 else (1, -1))
        if shape_of(x)[-1] != dim:
            raise TensorShapeError(f"scipy.stats.{fn}: the last axis of x has length "
                                   f"{shape_of(x)[-1]}, the distribution's dimension is {dim}")
        return x, mean, cov


class dirichlet_gen(_Distribution):
    """``scipy.stats.dirichlet``: the Dirichlet distribution of concentrations ``alpha``
    (a vector of length ``k``). As in SciPy, the *first* axis of ``x`` holds the
    components (``k`` of them, or ``k - 1``: the last is then ``1 - sum``).

    >>> float(dirichlet.logpdf([0.2, 0.3, 0.5], [1.0, 1.0, 1.0]))     # log(2!)
    0.6931471805599453
    """

    name = "dirichlet"

    def logpdf(self, x, alpha):
        """``sum(xlogy(alpha - 1, x), axis=0) - (sum(gammaln(alpha)) -
        gammaln(sum(alpha)))``; ``-inf`` off the simplex (SciPy raises), NaN unless every
        ``alpha > 0``.

        >>> float(dirichlet.logpdf([0.2, 0.3], [1.0, 1.0, 1.0]))          # x3 = 0.5
        0.6931471805599453
        """
        fn = "dirichlet.logpdf"
        x, alpha = _floats(fn, x, alpha, broadcast=False)
        if len(shape_of(alpha)) != 1:
            raise TensorShapeError(f"scipy.stats.{fn}: parameter vector 'alpha' must be "
                                   f"one dimensional, but alpha.shape = {shape_of(alpha)}")
        k = shape_of(alpha)[0]
        if len(shape_of(x)) == 0 or shape_of(x)[0] not in (k, k - 1):
            raise TensorShapeError(f"scipy.stats.{fn}: vector 'x' must have either the same "
                                   "number of entries as, or one entry fewer than, parameter "
                                   f"vector 'alpha', but alpha.shape = {shape_of(alpha)} and "
                                   f"x.shape = {shape_of(x)}")
        if shape_of(x)[0] == k - 1:
            x = tnp.concatenate([x, 1 - tnp.sum(x, axis=0, keepdims=True)], axis=0)
        eps = np.finfo(dtype_of(x)).eps
        on_simplex = _and(tnp.all(x >= 0, axis=0), tnp.all(x <= 1, axis=0),
                          tnp.abs(tnp.sum(x, axis=0) - 1) <= max(1e-9, 1e3 * eps))
        a = tnp.reshape(alpha, (k,) + (1,) * (len(shape_of(x)) - 1))
        log_beta = tnp.sum(special.gammaln(alpha)) - special.gammaln(tnp.sum(alpha))
        out = tnp.sum(special.xlogy(a - 1, x), axis=0) - log_beta
        out = _domain(tnp.all(alpha > 0), tnp.where(on_simplex, out, -np.inf))
        return _squeeze_output(out)

    def pdf(self, x, alpha):
        """``exp(logpdf)``.

        >>> float(dirichlet.pdf([0.5, 0.5], [2.0, 2.0]))                 # 6 x (1 - x)
        1.5
        """
        return tnp.exp(self.logpdf(x, alpha))


# --- discrete ----------------------------------------------------------------------------------


class poisson_gen(_Distribution):
    """``scipy.stats.poisson``: the Poisson distribution of mean ``mu`` on the integers
    ``k >= loc``. Differentiable in ``mu``; the count ``k`` and ``loc`` are data.

    >>> float(poisson.pmf(2, 3.0))                         # 9/2 exp(-3)
    0.22404180765538775
    """

    name = "poisson"

    def _parts(self, fn, k, mu, loc):
        k, loc = _data(k, f"the count k of scipy.stats.{fn}"), _data(loc, f"loc of "
                                                                      f"scipy.stats.{fn}")
        k, mu, loc = _floats(fn, k, mu, loc)
        k = tnp.subtract(k, loc)
        return k, mu, _and(mu >= 0, _known(k))

    def logpmf(self, k, mu, loc=0):
        """``xlogy(k, mu) - gammaln(k + 1) - mu`` at integers ``k >= 0``, ``-inf`` elsewhere.

        >>> float(poisson.logpmf(0, 0.0)), float(poisson.logpmf(1.5, 2.0))
        (0.0, -inf)
        """
        k, mu, valid = self._parts("poisson.logpmf", k, mu, loc)
        count = _and(k >= 0, k == tnp.floor(k))
        k = _inside(count, k, 0.0)
        out = special.xlogy(k, mu) - special.gammaln(k + 1) - mu
        return _domain(valid, tnp.where(count, out, -np.inf))

    def pmf(self, k, mu, loc=0):
        """``exp(logpmf)``.

        >>> float(poisson.pmf(0, 2.0))                     # exp(-2)
        0.1353352832366127
        """
        return tnp.exp(self.logpmf(k, mu, loc))

    def cdf(self, k, mu, loc=0):
        """``pdtr(k, mu)`` (``gammaincc(floor(k) + 1, mu)``) for ``k >= 0``, 0 below; its
        derivative in ``mu`` is ``-pmf(floor(k), mu)``.

        >>> float(poisson.cdf(1, 2.0))                     # 3 exp(-2)
        0.40600584970983794
        """
        k, mu, valid = self._parts("poisson.cdf", k, mu, loc)
        count = k >= 0
        return _domain(valid, tnp.where(count, special.pdtr(_inside(count, k, 0.0), mu), 0.0))

    def logcdf(self, k, mu, loc=0):
        """``log(cdf)``.

        >>> float(poisson.logcdf(0, 2.0))
        -2.0
        """
        k_, _, valid = self._parts("poisson.logcdf", k, mu, loc)
        return _log(self.cdf(k, mu, loc), _and(valid, k_ < 0))

    def sf(self, k, mu, loc=0):
        """``1 - cdf``, as ``pdtrc(k, mu)`` for ``k >= 0``, 1 below.

        >>> float(poisson.sf(0, 2.0))                      # 1 - exp(-2)
        0.8646647167633873
        """
        k, mu, valid = self._parts("poisson.sf", k, mu, loc)
        count = k >= 0
        return _domain(valid, tnp.where(count, special.pdtrc(_inside(count, k, 0.0), mu), 1.0))

    def logsf(self, k, mu, loc=0):
        """``log(sf)``.

        >>> float(poisson.logsf(-1, 2.0))
        0.0
        """
        return tnp.log(self.sf(k, mu, loc))


class bernoulli_gen(_Distribution):
    """``scipy.stats.bernoulli``: ``1`` with probability ``p``, ``0`` with ``1 - p``
    (shifted by ``loc``). Differentiable in ``p``; ``k`` and ``loc`` are data.

    >>> float(bernoulli.pmf(1, 0.3))
    0.3
    """

    name = "bernoulli"

    def _parts(self, fn, k, p, loc):
        k, loc = _data(k, f"the outcome k of scipy.stats.{fn}"), _data(loc, f"loc of "
                                                                        f"scipy.stats.{fn}")
        k, p, loc = _floats(fn, k, p, loc)
        k = tnp.subtract(k, loc)
        return k, p, _and(p >= 0, p <= 1, _known(k))

    def logpmf(self, k, p, loc=0):
        """``xlogy(k, p) + xlog1py(1 - k, -p)`` at ``k`` in ``{0, 1}``, ``-inf`` elsewhere.

        >>> float(bernoulli.logpmf(0, 1.0)), float(bernoulli.logpmf(0, 0.0))
        (-inf, 0.0)
        """
        k, p, valid = self._parts("bernoulli.logpmf", k, p, loc)
        outcome = _or(k == 0, k == 1)
        k = _inside(outcome, k, 0.0)
        out = special.xlogy(k, p) + special.xlog1py(1 - k, -p)
        return _domain(valid, tnp.where(outcome, out, -np.inf))

    def pmf(self, k, p, loc=0):
        """``exp(logpmf)``.

        >>> float(bernoulli.pmf(0, 0.25))
        0.75
        """
        return tnp.exp(self.logpmf(k, p, loc))

    def cdf(self, k, p, loc=0):
        """0 below 0, ``1 - p`` on ``[0, 1)``, 1 from 1 on.

        >>> float(bernoulli.cdf(0, 0.25))
        0.75
        """
        k, p, valid = self._parts("bernoulli.cdf", k, p, loc)
        return _domain(valid, tnp.where(k < 0, 0.0, tnp.where(k < 1, 1 - p, 1.0)))

    def logcdf(self, k, p, loc=0):
        """``log(cdf)``.

        >>> float(bernoulli.logcdf(1, 0.25))
        0.0
        """
        k_, _, valid = self._parts("bernoulli.logcdf", k, p, loc)
        return _log(self.cdf(k, p, loc), _and(valid, k_ < 0))

    def sf(self, k, p, loc=0):
        """``1 - cdf``: 1 below 0, ``p`` on ``[0, 1)``, 0 from 1 on.

        >>> float(bernoulli.sf(0, 0.25))
        0.25
        """
        k, p, valid = self._parts("bernoulli.sf", k, p, loc)
        return _domain(valid, tnp.where(k < 0, 1.0, tnp.where(k < 1, p, 0.0)))

    def logsf(self, k, p, loc=0):
        """``log(sf)``.

        >>> float(bernoulli.logsf(0, 0.25))
        -1.3862943611198906
        """
        k_, _, valid = self._parts("bernoulli.logsf", k, p, loc)
        return _log(self.sf(k, p, loc), _and(valid, k_ >= 1))


def _discrete(fn, k, loc, *params, integer=(), zeros=None):
    """``(k - loc, *params)`` in one floating dtype, ``k``, ``loc`` (and the parameters
    at the indices ``integer``, as ``(index, name)``) marked as data (differentiating in
    them raises). With a list ``zeros``, they are held instead (:func:`_held`), their
    zeros appended to it."""
    def mark(value, what):
        what = f"{what} of scipy.stats.{fn}"
        if zeros is None:
            return _data(value, what)
        value, zero = _held(value, what)
        zeros.append(zero)
        return value

    k, loc = mark(k, "the count k"), mark(loc, "loc")
    params = list(params)
    for i, name in integer:
        params[i] = mark(params[i], f"the {name}")
    k, loc, *params = _floats(fn, k, loc, *params)
    return (tnp.subtract(k, loc), *params)


class binom_gen(_Distribution):
    """``scipy.stats.binom``: the number of successes in ``n`` trials of probability
    ``p``, on ``0 <= k <= n`` (shifted by ``loc``). Differentiable in ``p``; ``k``, ``loc``
    and the number of trials ``n`` (an integer: SciPy gives NaN for another ``n``) are
    data.

    >>> round(float(binom.pmf(1, 2, 0.5)), 15)
    0.5
    """

    name = "binom"

    def _parts(self, fn, k, n, p, loc, zeros=None):
        k, n, p = _discrete(fn, k, loc, n, p, integer=[(0, "number of trials n")],
                            zeros=zeros)
        valid = _and(n >= 0, n == tnp.floor(n), p >= 0, p <= 1, _known(k))
        return k, _inside(valid, n, 1.0), _inside(valid, p, 0.5), valid

    def logpmf(self, k, n, p, loc=0):
        """``-log1p(n) - betaln(n - k + 1, k + 1) + xlogy(k, p) + xlog1py(n - k, -p)``
        (the binomial coefficient through ``betaln``, accurate for large ``n``; exactly 0
        at ``k = 0`` and ``k = n``) at integers ``0 <= k <= n``, ``-inf`` elsewhere. Its
        derivative in ``p`` is finite at ``p = 0`` and ``p = 1`` (``xlogy``'s rule).

        >>> float(binom.logpmf(0, 4, 0.0)), float(binom.logpmf(5, 4, 0.5))
        (0.0, -inf)
        """
        k, n, p, valid = self._parts("binom.logpmf", k, n, p, loc)
        count = _and(k >= 0, k <= n, k == tnp.floor(k))
        k, p = _inside(count, k, 0.0), _inside(count, p, 0.5)
        edge = _or(k == 0, k == n)
        middle = tnp.logical_not(edge)
        log_choose = -tnp.log1p(n) - special.betaln(_inside(middle, n - k + 1, 2.0),
                                                    _inside(middle, k + 1, 2.0))
        out = (tnp.where(edge, 0.0, log_choose) + special.xlogy(k, p)
               + special.xlog1py(n - k, -p))
        return _domain(valid, tnp.where(count, out, -np.inf))

    def pmf(self, k, n, p, loc=0):
        """``exp(logpmf)``.

        >>> round(float(binom.pmf(2, 4, 0.5)), 15)         # 6/16
        0.375
        """
        return tnp.exp(self.logpmf(k, n, p, loc))

    def _tails(self, fn, k, n, p, loc):
        """``(cdf, sf)`` as ``betainc(n - j, j + 1, 1 - p)`` and ``betainc(j + 1, n - j,
        p)`` for ``j = floor(k)`` in ``[0, n)`` (SciPy's ``bdtr``, ``bdtrc``), and the
        support's values outside; each reads harmless arguments where it is not taken."""
        zeros = []
        k, n, p, valid = self._parts(fn, k, n, p, loc, zeros)
        j = tnp.floor(k)
        inside = _and(j >= 0, j < n)
        j = _inside(inside, j, 0.0)
        a = _inside(inside, n - j, 1.0)
        cdf = tnp.where(inside, special.betainc(a, j + 1, 1 - p), _ones(k, k >= n))
        sf = tnp.where(inside, special.betainc(j + 1, a, p), _ones(k, k < 0))
        return (_plus(_domain(valid, cdf), zeros), _plus(_domain(valid, sf), zeros), k, n,
                valid)

    def cdf(self, k, n, p, loc=0):
        """``betainc(n - j, j + 1, 1 - p)`` for ``j = floor(k)``, 0 below 0, 1 from ``n``.

        >>> float(binom.cdf(1, 2, 0.5))
        0.75
        """
        return self._tails("binom.cdf", k, n, p, loc)[0]

    def logcdf(self, k, n, p, loc=0):
        """``log(cdf)``, as ``log1p(-sf)`` above the median (accurate near 1).

        >>> float(binom.logcdf(1, 2, 0.5))
        -0.2876820724517809
        """
        cdf, sf, k, _, valid = self._tails("binom.logcdf", k, n, p, loc)
        return _log_probability(cdf, sf, _and(valid, k < 0))

    def sf(self, k, n, p, loc=0):
        """``betainc(j + 1, n - j, p)``, 1 below 0, 0 from ``n``.

        >>> float(binom.sf(1, 2, 0.5))
        0.25
        """
        return self._tails("binom.sf", k, n, p, loc)[1]

    def logsf(self, k, n, p, loc=0):
        """``log(sf)``, as ``log1p(-cdf)`` below the median.

        >>> float(binom.logsf(1, 2, 0.5))
        -1.3862943611198906
        """
        cdf, sf, k, n, valid = self._tails("binom.logsf", k, n, p, loc)
        return _log_probability(sf, cdf, _and(valid, k >= n))


class nbinom_gen(_Distribution):
    """``scipy.stats.nbinom``: the number of failures before the ``n``-th success in
    trials of probability ``p``, on the integers ``k >= 0`` (shifted by ``loc``); ``n > 0``
    need not be an integer. ``logpmf`` differentiates in ``n`` and ``p``; the tails
    (``cdf``...) in ``p`` only (differentiating in ``n`` raises); ``k``, ``loc`` are data.

    >>> float(nbinom.pmf(0, 2.0, 0.5))                     # p**n
    0.25
    """

    name = "nbinom"

    def _parts(self, fn, k, n, p, loc, zeros=None):
        k, n, p = _discrete(fn, k, loc, n, p, integer=[(0, "size n")] if zeros is not None
                            else (), zeros=zeros)
        valid = _and(n > 0, p > 0, p <= 1, _known(k))
        return k, _inside(valid, n), _inside(valid, p, 0.5), valid

    def logpmf(self, k, n, p, loc=0):
        """``-log(n + k) - betaln(n, k + 1) + n log(p) + xlog1py(k, -p)`` (the coefficient
        ``gammaln(n + k) - gammaln(k + 1) - gammaln(n)`` through ``betaln``, exactly 0 at
        ``k = 0``) at integers ``k >= 0``, ``-inf`` elsewhere.

        >>> float(nbinom.logpmf(0, 2.0, 1.0)), float(nbinom.logpmf(-1, 2.0, 0.5))
        (0.0, -inf)
        """
        k, n, p, valid = self._parts("nbinom.logpmf", k, n, p, loc)
        count = _and(k >= 0, k == tnp.floor(k))
        k, p = _inside(count, k, 0.0), _inside(count, p, 0.5)
        first = k == 0
        coefficient = (-tnp.log(n + k)
                       - special.betaln(n, _inside(tnp.logical_not(first), k, 1.0) + 1))
        out = (tnp.where(first, 0.0, coefficient) + special.xlogy(n, p)
               + special.xlog1py(k, -p))
        return _domain(valid, tnp.where(count, out, -np.inf))

    def pmf(self, k, n, p, loc=0):
        """``exp(logpmf)``.

        >>> round(float(nbinom.pmf(1, 2.0, 0.5)), 15)      # 2 p**2 (1 - p)
        0.25
        """
        return tnp.exp(self.logpmf(k, n, p, loc))

    def _tails(self, fn, k, n, p, loc):
        """``(cdf, sf)`` as ``betainc(n, j + 1, p)`` and ``betainc(j + 1, n, 1 - p)`` for
        ``j = floor(k) >= 0`` (SciPy's ``nbdtr``, ``nbdtrc``), 0 and 1 below, 1 and 0 at
        ``k = inf``."""
        zeros = []
        k, n, p, valid = self._parts(fn, k, n, p, loc, zeros)
        j = tnp.floor(k)
        inside = _and(j >= 0, tnp.isfinite(j))
        j = _inside(inside, j, 0.0)
        cdf = tnp.where(inside, special.betainc(n, j + 1, p), _ones(k, k > 0))
        sf = tnp.where(inside, special.betainc(j + 1, n, 1 - p), _ones(k, k < 0))
        return _plus(_domain(valid, cdf), zeros), _plus(_domain(valid, sf), zeros), k, valid

    def cdf(self, k, n, p, loc=0):
        """``betainc(n, floor(k) + 1, p)``, 0 below 0; not differentiable in ``n``
        (raises).

        >>> float(nbinom.cdf(0, 2.0, 0.5))
        0.25
        """
        return self._tails("nbinom.cdf", k, n, p, loc)[0]

    def logcdf(self, k, n, p, loc=0):
        """``log(cdf)``, as ``log1p(-sf)`` above the median (SciPy's rule).

        >>> float(nbinom.logcdf(0, 2.0, 0.5))
        -1.3862943611198906
        """
        cdf, sf, k, valid = self._tails("nbinom.logcdf", k, n, p, loc)
        return _log_probability(cdf, sf, _and(valid, k < 0))

    def sf(self, k, n, p, loc=0):
        """``betainc(floor(k) + 1, n, 1 - p)``, 1 below 0.

        >>> float(nbinom.sf(0, 2.0, 0.5))
        0.75
        """
        return self._tails("nbinom.sf", k, n, p, loc)[1]

    def logsf(self, k, n, p, loc=0):
        """``log(sf)``, as ``log1p(-cdf)`` below the median.

        >>> float(nbinom.logsf(-1, 2.0, 0.5)) == 0
        True
        """
        cdf, sf, k, valid = self._tails("nbinom.logsf", k, n, p, loc)
        return _log_probability(sf, cdf, _and(valid, tnp.isposinf(k)))


class geom_gen(_Distribution):
    """``scipy.stats.geom``: the number of trials up to the first success, of probability
    ``p``, on the integers ``k >= 1`` (shifted by ``loc``). Differentiable in ``p``; ``k``,
    ``loc`` are data.

    >>> float(geom.pmf(2, 0.5))                            # (1 - p) p
    0.25
    """

    name = "geom"

    def _parts(self, fn, k, p, loc):
        k, p = _discrete(fn, k, loc, p)
        valid = _and(p > 0, p <= 1, _known(k))
        return k, _inside(valid, p, 0.5), valid

    def _tails(self, fn, k, p, loc):
        """``(log(sf), sf, cdf, log(cdf))`` at ``j = floor(k) >= 1``: ``j log1p(-p)`` and
        its ``exp``, ``-expm1``, :func:`_log1mexp` for ``p < 1/2`` (accurate for small
        ``p``), ``(1 - p)**j`` (exact there) for ``p >= 1/2``, so that the derivatives are
        finite at ``p = 1``; each branch reads harmless values where it is not taken."""
        k, p, valid = self._parts(fn, k, p, loc)
        trials = k >= 1
        j = tnp.floor(_inside(trials, k))
        p = _inside(trials, p, 0.25)
        small = p < 0.5
        log_sf_small = j * tnp.log1p(-_inside(small, p, 0.25))
        sf_large = (1 - _inside(tnp.logical_not(small), p, 0.75)) ** j
        log_sf = tnp.where(trials, j * tnp.log1p(-p), 0.0)
        sf = tnp.where(trials, tnp.where(small, tnp.exp(log_sf_small), sf_large), 1.0)
        cdf = tnp.where(trials, tnp.where(small, -tnp.expm1(log_sf_small), 1 - sf_large), 0.0)
        log_cdf = tnp.where(small, _log1mexp(log_sf_small, tnp.logical_not(trials)),
                            tnp.log1p(-sf_large))
        log_cdf = tnp.where(trials, log_cdf, -np.inf)
        return [_domain(valid, v) for v in (log_sf, sf, cdf, log_cdf)]

    def logpmf(self, k, p, loc=0):
        """``xlog1py(k - 1, -p) + log(p)`` at integers ``k >= 1``, ``-inf`` elsewhere.

        >>> float(geom.logpmf(1, 1.0)), float(geom.logpmf(0, 0.5))
        (0.0, -inf)
        """
        k, p, valid = self._parts("geom.logpmf", k, p, loc)
        count = _and(k >= 1, k == tnp.floor(k))
        k, p = _inside(count, k), _inside(count, p, 0.5)
        out = special.xlog1py(k - 1, -p) + tnp.log(p)
        return _domain(valid, tnp.where(count, out, -np.inf))

    def pmf(self, k, p, loc=0):
        """``exp(logpmf)``.

        >>> float(geom.pmf(1, 0.25))
        0.25
        """
        return tnp.exp(self.logpmf(k, p, loc))

    def cdf(self, k, p, loc=0):
        """``-expm1(floor(k) log1p(-p))`` (accurate for small ``p``; ``1 - (1 - p)**j`` for
        ``p >= 1/2``), 0 below 1.

        >>> float(geom.cdf(2, 0.5))
        0.75
        """
        return self._tails("geom.cdf", k, p, loc)[2]

    def logcdf(self, k, p, loc=0):
        """``log(1 - exp(floor(k) log1p(-p)))`` without cancellation; ``-inf`` below 1.

        >>> float(geom.logcdf(1, 1e-20))                   # log(p)
        -46.051701859880914
        """
        return self._tails("geom.logcdf", k, p, loc)[3]

    def sf(self, k, p, loc=0):
        """``exp(floor(k) log1p(-p))``, 1 below 1.

        >>> float(geom.sf(2, 0.5))
        0.25
        """
        return self._tails("geom.sf", k, p, loc)[1]

    def logsf(self, k, p, loc=0):
        """``floor(k) log1p(-p)`` exactly, 0 below 1.

        >>> float(geom.logsf(3, 0.5))                      # 3 log(1/2)
        -2.0794415416798357
        """
        return self._tails("geom.logsf", k, p, loc)[0]


norm = norm_gen()
t = t_gen()
gamma = gamma_gen()
beta = beta_gen()
multivariate_normal = multivariate_normal_gen()
dirichlet = dirichlet_gen()
poisson = poisson_gen()
bernoulli = bernoulli_gen()
laplace = laplace_gen()
cauchy = cauchy_gen()
logistic = logistic_gen()
expon = expon_gen()
lognorm = lognorm_gen()
halfnorm = halfnorm_gen()
chi2 = chi2_gen()
uniform = uniform_gen()
binom = binom_gen()
nbinom = nbinom_gen()
geom = geom_gen()
