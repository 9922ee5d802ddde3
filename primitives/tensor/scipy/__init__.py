"""SciPy's ``special``, ``stats`` and ``linalg`` for differentiable code (JAX's ``jax.scipy``,
for tidu).

- :mod:`.special`: ``gammaln``, ``digamma``/``psi``, ``polygamma``, ``betaln``, ``erf``,
  ``erfinv``, ``ndtr``, ``ndtri``, ``log_ndtr``, ``expit``, ``logit``, ``xlogy``,
  ``logsumexp``, ``softmax``, ``i0``, ``i1``... with SciPy's names, signatures and
  values;
- :mod:`.stats`: ``norm``, ``multivariate_normal``, ``t``, ``gamma``, ``beta``,
  ``dirichlet``, ``laplace``, ``cauchy``, ``logistic``, ``expon``, ``lognorm``,
  ``halfnorm``, ``chi2``, ``uniform``, ``poisson``, ``bernoulli``, ``binom``, ``nbinom``,
  ``geom`` with ``logpdf``/``pdf``/``cdf``/``logcdf``
  (``logpmf``/``pmf`` for the discrete ones), SciPy's parameter names and defaults;
- :mod:`.linalg`: ``solve_triangular``, ``cholesky`` (the upper factor by default, as
  SciPy's), ``cho_factor``/``cho_solve``, ``expm``, ``solve`` (``assume_a``), ``inv``,
  ``det``, ``block_diag``, compositions of ``tnp.linalg`` (a triangular solve is a
  general solve of the triangle: O(n³), SciPy's values to rounding);
- :mod:`.signal`: ``convolve``, ``correlate``; :mod:`.integrate`: ``odeint``...

All differentiate in their data and parameters under every transform and for the
eager ``Tensor``. SciPy computes the special functions' values, so it must be
installed to use them (it is not a dependency of tidu); importing this package
also makes SciPy's own ufuncs (``scipy.special.gammaln(tensor)``) differentiate.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> from primitives.tensor.scipy import special, stats
>>> float(tnp.grad(lambda mu: stats.norm.logpdf(1.0, loc=mu))(0.0))
1.0
>>> import scipy.special
>>> x = tnp.tensor(np.array([2.0, 3.0]), requires_grad=True)
>>> tnp.sum(scipy.special.gammaln(x)).backward().grad(x)      # SciPy's ufunc: digamma
array([0.42278434, 0.92278434])
"""

from primitives.tensor.scipy import signal
from primitives.tensor.scipy import integrate, linalg, special, stats

special.register_dispatch()

__all__ = ["integrate", "linalg", "signal", "special", "stats"]
