"""``scipy.integrate.odeint``'s signature (autograd's ``autograd.scipy.integrate``) for the
differentiable :func:`primitives.tensor.ode.odeint`: ``args`` is the fourth positional
argument (a tuple), as in SciPy; ``func(y, t, *args)`` (``func(t, y, *args)`` with
``tfirst=True``).

SciPy's parameters keep their positions (``Dfun`` is the fifth), so a call written for
SciPy means the same here. ``y0`` is an array as in SciPy (a list is one array, a number
a vector of one component, so ``ys`` has shape ``(len(t), len(y0))``), and ``func`` may
return a list of its entries (``[y[1], -y[0]]``). ``rtol`` and
``atol`` of ``None`` (SciPy's defaults) are ``1.49012e-8``; ``mxstep=0`` (SciPy's default)
sets no bound. The hints to SciPy's LSODA solver (``Dfun``, ``col_deriv``, ``ml``,
``mu``, ``h0``, ``hmax``, ``hmin``, ``ixpr``, ``mxhnil``, ``mxordn``, ``mxords``,
``printmessg``) are accepted and not used: the adaptive Runge–Kutta solve meets the
tolerances without them. ``full_output=True`` and ``tcrit`` raise
:class:`~primitives.tensor.errors.TensorNotSupportedError`.

>>> import numpy as np
>>> ys = odeint(lambda y, t, k: -k * y, np.array([1.0]), np.array([0.0, 1.0]), (2.0,))
>>> bool(np.isclose(ys[-1, 0], np.exp(-2.0)))
True
"""

from __future__ import annotations

import math
from collections.abc import Callable

from primitives.tensor import numpy as tnp
from primitives.tensor import ode
from primitives.tensor.errors import TensorNotSupportedError, TensorTypeError

__all__ = ["odeint"]

_SCIPY_TOLERANCE = 1.49012e-8


def odeint(func: Callable, y0, t, args: tuple = (), Dfun=None, col_deriv=0, full_output=0,
           ml=None, mu=None, rtol=None, atol=None, tcrit=None, h0=0.0, hmax=0.0, hmin=0.0,
           ixpr=0, mxstep=0, mxhnil=0, mxordn=12, mxords=5, printmessg=0, tfirst=False):
    """SciPy's ``odeint(func, y0, t, args=(), ...)``, differentiable in ``y0``, ``t`` and
    ``args``: ``ys`` of shape ``(len(t), len(y0))``.

    >>> import numpy as np
    >>> ys = odeint(lambda y, t: np.ones_like(y), np.zeros(1), np.array([0.0, 2.0]))
    >>> bool(np.isclose(ys[-1, 0], 2.0))
    True
    >>> odeint(lambda t, y: -y, 1.0, np.array([0.0, 1.0]), tfirst=True).shape
    (2, 1)
    """
    fn = "scipy.integrate.odeint"
    if not isinstance(args, (tuple, list)):
        raise TensorTypeError(f"{fn}: the extra arguments must be in a tuple (args=(...)), "
                              f"got {type(args).__name__}")
    if full_output:
        raise TensorNotSupportedError(f"{fn}: full_output=True is not supported (the "
                                      "solver's diagnostics are LSODA's)")
    if tcrit is not None:
        raise TensorNotSupportedError(f"{fn}: tcrit is not supported")
    rtol = _SCIPY_TOLERANCE if rtol is None else rtol
    atol = _SCIPY_TOLERANCE if atol is None else atol
    mxstep = math.inf if mxstep == 0 else mxstep
    if tfirst:
        rhs = func

        def func(y, time, *extra):
            return rhs(time, y, *extra)
    return ode.odeint(func, tnp.atleast_1d(tnp.asarray(y0)), t, *args, rtol=rtol,
                      atol=atol, mxstep=mxstep)
