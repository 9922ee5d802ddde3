"""``scipy.integrate.odeint``'s signature (autograd's ``autograd.scipy.integrate``) for the
differentiable :func:`primitives.tensor.ode.odeint`: ``args`` is the fourth positional
argument (a tuple), as in SciPy; ``func(y, t, *args)``.

>>> import numpy as np
>>> ys = odeint(lambda y, t, k: -k * y, np.array([1.0]), np.array([0.0, 1.0]), (2.0,))
>>> bool(np.isclose(ys[-1, 0], np.exp(-2.0)))
True
"""

from __future__ import annotations

import math
from typing import Callable

from primitives.tensor import ode

__all__ = ["odeint"]


def odeint(func: Callable, y0, t, args: tuple = (), rtol: float = 1.4e-8,
           atol: float = 1.4e-8, mxstep: float = math.inf):
    """SciPy's ``odeint(func, y0, t, args=())`` (``rtol``, ``atol``, ``mxstep`` as there;
    SciPy's other options are not taken), differentiable in ``y0``, ``t`` and ``args``.

    >>> import numpy as np
    >>> ys = odeint(lambda y, t: np.ones_like(y), np.zeros(1), np.array([0.0, 2.0]))
    >>> bool(np.isclose(ys[-1, 0], 2.0))
    True
    """
    return ode.odeint(func, y0, t, *tuple(args), rtol=rtol, atol=atol, mxstep=mxstep)
