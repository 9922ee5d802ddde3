"""autograd's optimizers (``autograd.misc.optimizers``): loops that run ``num_iters`` steps.

Each takes ``grad(x, i)`` (the gradient at parameters ``x`` on iteration ``i``), the
starting parameters ``x0`` (an array or a pytree of arrays), an optional
``callback(x, i, g)`` called before each step, and returns the final parameters in
``x0``'s structure. They are the same update rules as autograd's, step for step, so a
ported program gives autograd's numbers; for optax-style pure updates use
:mod:`primitives.tensor.optim`.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> loss = lambda w, i: tnp.sum((w - 3.0) ** 2)
>>> w = adam(tnp.grad(loss), np.zeros(2), num_iters=2000, step_size=0.01)
>>> np.round(w, 4).tolist()
[3.0, 3.0]
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from primitives.tensor.transforms.flatten import ravel_pytree

__all__ = ["sgd", "rmsprop", "adam"]


def _flat_loop(step: Callable, grad: Callable, x0, callback, num_iters: int):
    """Run ``step(x, g, i, state) -> (x, state)`` on the flattened parameters: the loop every
    optimizer here shares, with ``grad`` and ``callback`` seeing ``x0``'s structure."""
    x, unflatten = ravel_pytree(x0)
    x = np.asarray(x)
    state = None
    for i in range(num_iters):
        g = np.asarray(ravel_pytree(grad(unflatten(x), i))[0])
        if callback is not None:
            callback(unflatten(x), i, unflatten(g))
        x, state = step(x, g, i, state)
    return unflatten(x)


def sgd(grad: Callable, x0, callback: Callable | None = None, num_iters: int = 200,
        step_size: float = 0.1, mass: float = 0.9):
    """Gradient descent with momentum: ``v = mass v - (1 - mass) g``, ``x = x + step v``.

    >>> import numpy as np
    >>> float(sgd(lambda x, i: 2 * x, np.array(1.0), num_iters=500)) < 1e-6
    True
    """
    def step(x, g, i, velocity):
        velocity = np.zeros_like(x) if velocity is None else velocity
        velocity = mass * velocity - (1.0 - mass) * g
        return x + step_size * velocity, velocity
    return _flat_loop(step, grad, x0, callback, num_iters)


def rmsprop(grad: Callable, x0, callback: Callable | None = None, num_iters: int = 100,
            step_size: float = 0.1, gamma: float = 0.9, eps: float = 1e-8):
    """RMSprop: a running mean of squared gradients (starting at ones, as autograd's) scales
    each step, ``x = x - step g / (sqrt(avg) + eps)``.

    >>> import numpy as np
    >>> x = rmsprop(lambda x, i: 2 * x, np.array(1.0), num_iters=300, step_size=0.01)
    >>> abs(float(x)) < 0.05
    True
    """
    def step(x, g, i, avg_sq):
        avg_sq = np.ones_like(x) if avg_sq is None else avg_sq
        avg_sq = avg_sq * gamma + g ** 2 * (1 - gamma)
        return x - step_size * g / (np.sqrt(avg_sq) + eps), avg_sq
    return _flat_loop(step, grad, x0, callback, num_iters)


def adam(grad: Callable, x0, callback: Callable | None = None, num_iters: int = 100,
         step_size: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
    """Adam (Kingma and Ba): bias-corrected first and second moments of the gradient.

    >>> import numpy as np
    >>> x = adam(lambda x, i: 2 * (x - 1), np.array(0.0), num_iters=3000, step_size=0.01)
    >>> round(float(x), 6)
    1.0
    """
    def step(x, g, i, moments):
        m, v = (np.zeros_like(x), np.zeros_like(x)) if moments is None else moments
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * g ** 2 + b2 * v
        m_hat = m / (1 - b1 ** (i + 1))
        v_hat = v / (1 - b2 ** (i + 1))
        return x - step_size * m_hat / (np.sqrt(v_hat) + eps), (m, v)
    return _flat_loop(step, grad, x0, callback, num_iters)
