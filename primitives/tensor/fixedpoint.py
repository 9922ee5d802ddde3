"""``fixed_point``: ``x`` with ``f(a, x) == x``, differentiable in ``a`` by implicit
differentiation.

The forward pass iterates ``x <- f(a, x)`` from ``x0`` on plain arrays until two
iterates differ by at most ``tol`` (largest absolute difference of any element).
The derivative does not go through the iterations (autograd's ``fixed_point``,
JAX's implicit-function idiom): at the solution ``x* = f(a, x*)``, so
``dx*/da = (I - df/dx)^-1 df/da``, and the VJP of a cotangent ``c`` is
``u df/da`` where ``u = c + u df/dx`` is itself a fixed point, found by iterating
the VJP of ``f`` in ``x``. That needs ``f`` to be a contraction near ``x*`` (which
the forward iteration's convergence suggests). The start ``x0`` gets a zero
derivative. ``f`` is written with ``tnp`` functions; ``a`` and ``x`` may be arrays
or pytrees of arrays. ``f`` may be any callable; its derivative is traced once per
function object, never shared with another object its ``==`` calls equal.

It is a ``custom_vjp`` function: reverse mode under every transform (``grad``, ``jit``,
``vmap``, the eager ``Tensor``); forward mode and second derivatives raise.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> sqrt = lambda a: fixed_point(lambda a, x: 0.5 * (x + a / x), a, np.array(1.0))  # Newton
>>> bool(np.isclose(sqrt(np.array(2.0)), np.sqrt(2.0), rtol=1e-15))
True
>>> bool(np.isclose(tnp.grad(sqrt)(np.array(2.0)), 1 / (2 * np.sqrt(2.0))))
True
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from primitives.tensor.core import dtype_of
from primitives.tensor.transforms.custom import (ByIdentity, custom_vjp,
                                                 outside_values_refused)
from primitives.tensor.errors import SolverError, TensorTypeError, number_argument
from primitives.tensor.transforms.functional import vjp
from primitives.tensor.transforms.pytree import tree_flatten, tree_map, tree_unflatten

__all__ = ["fixed_point"]


def fixed_point(f: Callable, a, x0, tol: float = 1e-10, max_iter: int = 10_000):
    """The ``x`` with ``f(a, x) == x`` reached by iterating ``f`` from ``x0`` (to ``tol``:
    successive iterates differ by at most ``tol`` in every element), differentiable in
    ``a`` (the adjoint fixed point is found to ``tol`` relative to the cotangent's largest
    element); more than ``max_iter`` iterations raise :class:`SolverError`.

    >>> import numpy as np
    >>> x = fixed_point(lambda a, x: np.cos(x) * a, np.array(1.0), np.array(0.0))
    >>> round(float(x), 6)                                  # the Dottie number
    0.739085
    """
    if not callable(f):
        raise TensorTypeError(f"fixed_point: f must be callable, got {type(f).__name__}")
    return _fixed_point(ByIdentity(f), number_argument("fixed_point", "tol", tol),
                        number_argument("fixed_point", "max_iter", max_iter, int), a, x0)


def _iterate(step: Callable, x, tol: float, max_iter: int, what: str):
    """``x <- step(x)`` until successive iterates agree to ``tol`` (pytrees of arrays)."""
    leaves, tree = tree_flatten(x)
    for _ in range(max_iter):
        new = outside_values_refused(step(tree_unflatten(tree, leaves)), what,
                                     "the argument a: fixed_point(f, a, x0)")
        new_leaves, new_tree = tree_flatten(new)
        if new_tree != tree:
            raise SolverError(f"{what}: f returned structure {new_tree!r} for x of structure "
                              f"{tree!r}")
        new_leaves = [np.asarray(leaf) for leaf in new_leaves]
        change = max((float(np.max(np.abs(n - o))) if np.size(n) else 0.0
                      for n, o in zip(new_leaves, leaves)), default=0.0)
        leaves = new_leaves
        if change <= tol:
            return tree_unflatten(tree, [leaf.copy() for leaf in leaves])   # f may return x
        if not np.isfinite(change):
            break
    raise SolverError(f"{what}: no fixed point to tol={tol:g} within max_iter={max_iter} "
                      "iterations (is f a contraction near the solution?)")


def _solve(f, tol, max_iter, a, x0):
    return _iterate(lambda x: f(a, x), x0, tol, max_iter, "fixed_point")


_solve.__qualname__ = "fixed_point"      # what an error about its derivatives names
_fixed_point = custom_vjp(_solve, nondiff_argnums=(0, 1, 2))


def _fixed_point_fwd(f, tol, max_iter, a, x0):
    x = _fixed_point(f, tol, max_iter, a, x0)
    return x, (a, x)


def _fixed_point_bwd(f, tol, max_iter, residuals, ct):
    a, x = residuals
    leaves, tree, inexact = _leaves(a)
    if not any(inexact):                        # nothing of a to differentiate
        return tree_unflatten(tree, [None] * len(leaves)), None
    return _adjoint(f, tol, max_iter, a, x, ct), None


def _leaves(a) -> tuple:
    """The leaves of ``a``, its structure, and which leaves are floating point or complex
    (an integer leaf, a count, is a constant: it gets no cotangent)."""
    leaves, tree = tree_flatten(a)
    return leaves, tree, [dtype_of(leaf).kind in "fc" for leaf in leaves]


_fixed_point.defvjp(_fixed_point_fwd, _fixed_point_bwd)


def _adjoint_solve(f, tol, max_iter, a, x, ct):
    """``u df/da`` at the solution ``x``, where ``u = ct + u df/dx`` (on plain arrays). ``u``
    is linear in ``ct``: it is found for ``ct`` scaled to a largest element of 1, so ``tol``
    is relative to the cotangent (a loss scaled by 1e-12 gets the same relative accuracy)."""
    leaves, tree, inexact = _leaves(a)
    _, pull_x = vjp(lambda xx: f(a, xx), x)
    scale = max((float(np.max(np.abs(leaf))) for leaf in tree_flatten(ct)[0]
                 if np.size(leaf)), default=0.0)
    scale = scale if 0.0 < scale < math.inf else 1.0
    unit = tree_map(lambda leaf: leaf / scale, ct)
    u = _iterate(lambda u: _add(unit, pull_x(u)[0]), unit, tol, max_iter,
                 "fixed_point's derivative")

    def f_a(*differentiated):
        given = iter(differentiated)
        return f(tree_unflatten(tree, [next(given) if d else leaf
                                       for leaf, d in zip(leaves, inexact)]), x)

    _, pull_a = vjp(f_a, *[leaf for leaf, d in zip(leaves, inexact) if d])
    found = iter(pull_a(tree_map(lambda leaf: leaf * scale, u)))
    return tree_unflatten(tree, [next(found) if d else None for d in inexact])


def _add(a, b):
    leaves_a, tree = tree_flatten(a)
    return tree_unflatten(tree, [p + q for p, q in zip(leaves_a, tree_flatten(b)[0])])


def _no_second_order(*_):
    raise SolverError("fixed_point: derivatives of second order (and forward mode) are not "
                      "supported: the adjoint fixed point is not differentiated again")


_adjoint = custom_vjp(_adjoint_solve, nondiff_argnums=(0, 1, 2))
_adjoint.defvjp(lambda *args: (_adjoint(*args), ()), _no_second_order)
