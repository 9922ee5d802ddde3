"""``scipy.stats`` distributions for differentiable code: SciPy's names, parameters and
defaults, differentiable in the data and the parameters under every transform and for the
eager ``Tensor``.

Each distribution is an object with SciPy's methods taking SciPy's arguments
(``norm.logpdf(x, loc=0, scale=1)``); calling it freezes its parameters, as SciPy's
do (``norm(loc=1.0).logpdf(x)``). Values are SciPy's up to rounding; where SciPy
returns NaN for parameters outside their domain (``scale <= 0``...) so do these, and
points outside the support have density 0 (log-density ``-inf``).

Differences from SciPy: ``dirichlet`` gives ``-inf`` for a point off the simplex where
SciPy raises (it cannot raise under ``jit``); ``multivariate_normal`` has no
``allow_singular=True`` and no ``cdf``; the counts ``k`` of ``poisson`` and ``bernoulli``
are data: differentiating in them (or in ``loc`` of a discrete distribution) raises. The
``cdf`` of ``t``, ``gamma``, ``beta`` differentiates in ``x``, ``loc`` and ``scale`` but not
in the shape parameters (``df``, ``a``, ``b``): that raises a ``TiduError`` naming them.

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
from primitives.tensor.numpy.lowering import astype, operand, result_dtype
from primitives.tensor.scipy import special
from primitives.tensor.scipy._ops import NoDerivative

__all__ = ["norm", "multivariate_normal", "t", "gamma", "beta", "dirichlet", "poisson",
           "bernoulli"]

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
    return [astype(a, dtype) for a in args]


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
    return astype(tnp.where(condition, 1.0, 0.0), dtype_of(like))


def _known(z):
    """Where ``z`` (the data, standardized) is not NaN: a NaN point gives NaN, as in SciPy
    (not a density of 0 or a probability of 1 by the support's tests, which NaN fails)."""
    return tnp.logical_not(tnp.isnan(z))


def _data(value, what: str):
    """``value`` (a count, a discrete ``loc``) marked as data: differentiating in it raises."""
    if isinstance(value, Frontend):
        return bind(NoDerivative(what), value)[0]
    return value


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
    tangent by 0)."""
    low = p < 0.5
    high = tnp.logical_not(low)
    if zero is not None:
        low = _and(low, tnp.logical_not(zero))
    out = tnp.where(low, tnp.log(_inside(low, p)), tnp.log1p(-_inside(high, q, 0.0)))
    return out if zero is None else tnp.where(zero, -np.inf, out)


def _log(p, zero):
    """``log(p)``, ``-inf`` where ``zero`` marks ``p == 0`` by the support: derivative 0
    there in forward mode as in reverse."""
    return tnp.where(zero, -np.inf, tnp.log(_inside(tnp.logical_not(zero), p)))


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
        _, _, valid, _, inside = self._parts("gamma.logcdf", x, a, loc, scale)
        below = _and(valid, tnp.logical_not(inside))
        return _log_probability(self.cdf(x, a, loc, scale), self.sf(x, a, loc, scale), below)

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
        return _log_probability(self.cdf(x, a, b, loc, scale), self.sf(x, a, b, loc, scale),
                                _and(valid, raw < 0))

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
        return _log_probability(self.sf(x, a, b, loc, scale), self.cdf(x, a, b, loc, scale),
                                _and(valid, raw > 1))


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


norm = norm_gen()
t = t_gen()
gamma = gamma_gen()
beta = beta_gen()
multivariate_normal = multivariate_normal_gen()
dirichlet = dirichlet_gen()
poisson = poisson_gen()
bernoulli = bernoulli_gen()
