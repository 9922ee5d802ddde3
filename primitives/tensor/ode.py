"""``odeint``: the solution of an ODE at given times, differentiable by the adjoint method.

``odeint(func, y0, t, *args)`` solves ``dy/dt = func(y, t, *args)`` from ``y(t[0]) = y0``
and returns ``y`` at every time of ``t`` (JAX's ``jax.experimental.ode.odeint``;
SciPy's keyword form ``args=(...)`` works too). The forward solve is an adaptive
Dormand–Prince 5(4) Runge–Kutta method with the error per step kept under
``atol + rtol * |y|``, run on plain arrays. Derivatives with respect to ``y0``, ``t``
and ``args`` come from the *adjoint* method (Pontryagin; Chen et al. 2018, as JAX
does it): the adjoint ODE is solved backward in time with the same method, its
right-hand side being the VJP of ``func``, so memory does not grow with the number
of steps. ``func`` must be written with ``tnp`` functions and must be traceable (no
Python ``if`` on values), since its VJP is compiled with ``jit``; values it depends
on that should get derivatives are passed in ``args``. ``func`` may be any callable;
its derivative is traced once per function object (a bound method: per object and
method), never shared with another object its ``==`` calls equal.

It is a ``custom_vjp`` function, so it works under every transform that reverse mode
composes with (``grad``, ``jit``, ``vmap``, the eager ``Tensor``); forward mode and
second derivatives raise, as for any ``custom_vjp`` function.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> decay = lambda y, t, k: -k * y
>>> ys = odeint(decay, np.array([1.0]), np.array([0.0, 1.0]), np.array(0.5))
>>> bool(np.allclose(ys[-1], np.exp(-0.5)))
True
>>> dk = tnp.grad(lambda k: tnp.sum(odeint(decay, np.array([1.0]), np.array([0.0, 1.0]), k)))
>>> bool(np.allclose(dk(np.array(0.5)), -np.exp(-0.5)))       # d/dk exp(-k) at t = 1
True
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from primitives.tensor.core import dtype_of, shape_of
from primitives.tensor.numpy.lowering import as_dtype, concatenate, reshape
from primitives.tensor.transforms.custom import (ByIdentity, custom_vjp,
                                                 outside_values_refused)
from primitives.tensor.errors import (SolverError, TensorShapeError, TensorTypeError,
                                      number_argument)
from primitives.tensor.transforms.functional import vjp
from primitives.tensor.transforms.jit import jit
from primitives.tensor.transforms.pytree import tree_flatten, tree_map, tree_unflatten

__all__ = ["odeint"]

# Dormand–Prince 5(4): nodes, the stages' coefficients, the 5th-order weights and the
# difference of the 5th- and 4th-order weights (the error estimate).
_NODES = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_STAGES = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
_WEIGHTS = np.array(_STAGES[6] + (0.0,))
_ERROR = _WEIGHTS - np.array((5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200,
                              187 / 2100, 1 / 40))


def odeint(func: Callable, y0, t, *args, rtol: float = 1.4e-8, atol: float = 1.4e-8,
           mxstep: float = math.inf, **scipy_keywords):
    """``y`` at each time of ``t`` for ``dy/dt = func(y, t, *args)`` and ``y(t[0]) = y0``:
    an array of shape ``t.shape + y0.shape`` (a pytree ``y0`` gives a pytree of such).

    ``func`` returns the derivative in ``y0``'s structure; for a state of one array, a list
    or tuple of its entries (``[y[1], -y[0]]``, SciPy's idiom) is that array.
    ``t`` must be finite and increase strictly. ``rtol`` and ``atol`` (at least 0, not both
    0) bound each step's error; more than ``mxstep`` steps between two times of ``t``, or a
    step size that falls to nothing (a state or ``func`` that is not finite), raise
    :class:`SolverError`.
    ``args=(...)`` as a keyword (SciPy's form) is the same as passing them after ``t``.
    Differentiable in ``y0``, ``t`` and ``args`` by the adjoint method; the state and the
    arguments may be complex (tidu's complex convention). The solve runs in float64 (or
    complex128); values and derivatives come back in the dtypes of ``y0``'s leaves and of
    the inputs (float32 in, float32 out).

    >>> import numpy as np
    >>> ys = odeint(lambda y, t: np.cos(t) * np.ones_like(y), np.zeros(1), np.linspace(0, 1, 3))
    >>> np.round(ys[:, 0], 6).tolist()                        # sin(t)
    [0.0, 0.479426, 0.841471]
    """
    if not callable(func):
        raise TensorTypeError(f"odeint: func must be callable, got {type(func).__name__}")
    if scipy_keywords:
        unknown = set(scipy_keywords) - {"args"}
        if unknown or args:
            raise TensorTypeError(f"odeint: unexpected keyword arguments {sorted(unknown)}"
                                  if unknown else "odeint: args given both after t and as "
                                  "args=(...); pass them one way")
        args = tuple(scipy_keywords["args"])
    rtol, atol = number_argument("odeint", "rtol", rtol), number_argument("odeint", "atol", atol)
    mxstep = number_argument("odeint", "mxstep", mxstep)
    if not (0.0 <= rtol < math.inf and 0.0 <= atol < math.inf) or rtol == atol == 0.0:
        raise TensorShapeError(f"odeint: rtol and atol must be finite and at least 0, and not "
                               f"both 0; got rtol={rtol:g}, atol={atol:g}")
    if not mxstep > 0:
        raise TensorShapeError(f"odeint: mxstep must be positive (inf for no limit), got "
                               f"{mxstep:g}")
    leaves, tree = tree_flatten(y0)
    if not leaves:
        raise TensorTypeError("odeint: y0 holds no array")
    flat_func = _Flattened(ByIdentity(func), tree, tuple(np.shape(leaf) for leaf in leaves),
                           tuple(dtype_of(leaf).kind == "c" for leaf in leaves))
    # The solve runs in at least float64 (rtol's default is below float32's resolution): the
    # state, the times and the floating arguments are cast first, so their derivatives come
    # back in their own dtypes, and each leaf of y is returned in its dtype, as JAX's odeint.
    y0_flat = _at_least_float64(concatenate([reshape(leaf, (-1,)) for leaf in leaves], 0))
    args = tree_map(_at_least_float64, args)
    ys = _odeint(flat_func, rtol, atol, mxstep, y0_flat,
                 _at_least_float64(t), *args)
    out_leaves, out_tree = tree_flatten(flat_func.unflatten(ys))
    return tree_unflatten(out_tree, [
        as_dtype(out, dtype_of(leaf)) if dtype_of(leaf).kind in "fc" else out
        for out, leaf in zip(out_leaves, leaves)])


def _at_least_float64(x):
    """``x`` cast to float64 (complex128) when it is a floating (complex) array of less."""
    dtype = dtype_of(x)
    return as_dtype(x, np.result_type(dtype, np.float64)) if dtype.kind in "fc" else x


class _Flattened:
    """``func`` on a flat state vector (the leaves of ``y`` raveled and concatenated):
    equal for the same ``func`` (a :class:`ByIdentity`) and structure, so ``odeint``'s rules
    are traced once per signature. Each leaf of ``func``'s result must have its state leaf's
    size, and be real where that leaf is real."""

    def __init__(self, func: Callable, tree, shapes: tuple, complex_: tuple) -> None:
        self.func, self.tree, self.shapes, self.complex = func, tree, shapes, complex_
        self.sizes = tuple(math.prod(shape) for shape in shapes)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Flattened) and (
            self.func, self.tree, self.shapes, self.complex) == (
            other.func, other.tree, other.shapes, other.complex)

    def __hash__(self) -> int:
        return hash((self.func, self.tree, self.shapes, self.complex))

    def unflatten(self, flat):
        """The pytree of ``flat``'s trailing axis (leading axes kept on every leaf)."""
        leaves, start = [], 0
        lead = tuple(flat.shape[:-1])
        for shape, size in zip(self.shapes, self.sizes):
            leaves.append(reshape(flat[..., start:start + size], lead + shape))
            start += size
        return tree_unflatten(self.tree, leaves)

    def __call__(self, y, t, *args):
        out = self.func(self.unflatten(y), t, *args)
        leaves, tree = tree_flatten(out)
        if tree != self.tree and len(self.shapes) == 1 and isinstance(out, (list, tuple)) \
                and leaves:
            # SciPy's idiom for a state of one array, [dy0, dy1, ...]: its entries in order
            leaves, tree = [concatenate([reshape(leaf, (-1,)) for leaf in leaves], 0)], self.tree
        if tree != self.tree:
            raise TensorShapeError(f"odeint: func returned structure {tree!r} for a state of "
                                   f"structure {self.tree!r}")
        for leaf, shape, size, complex_ in zip(leaves, self.shapes, self.sizes, self.complex):
            if math.prod(shape_of(leaf)) != size:
                raise TensorShapeError(f"odeint: func returned shape {shape_of(leaf)} for a "
                                       f"state leaf of shape {shape}")
            if dtype_of(leaf).kind == "c" and not complex_:
                raise TensorTypeError("odeint: func returned complex values for a real state "
                                      "leaf (its imaginary part would be lost); make y0 complex")
        return concatenate([reshape(leaf, (-1,)) for leaf in leaves], 0)


# --- the solve, and its adjoint ------------------------------------------------------------


def _solve(func, rtol, atol, mxstep, y0, t, *args):
    t = _times(t)

    user_func = func.func.fun              # (a _Flattened of a ByIdentity)
    name = f"odeint's func {getattr(user_func, '__qualname__', type(user_func).__name__)}"

    def rhs(y, s):
        dy = outside_values_refused(func(y, s, *args), name,
                                    "an argument after t: odeint(func, y0, t, value)")
        return np.asarray(dy, dtype=y.dtype)
    return _integrate(rhs, np.asarray(y0, dtype=np.result_type(y0, np.float64)), t,
                      rtol, atol, mxstep)


_solve.__qualname__ = "odeint"      # what an error about its derivatives names
_odeint = custom_vjp(_solve, nondiff_argnums=(0, 1, 2, 3))


def _odeint_fwd(func, rtol, atol, mxstep, y0, t, *args):
    ys = _odeint(func, rtol, atol, mxstep, y0, t, *args)
    return ys, (ys, t, args)


def _odeint_bwd(func, rtol, atol, mxstep, residuals, g):
    ys, t, args = residuals
    return _adjoint(func, rtol, atol, mxstep, ys, t, g, *args)


_odeint.defvjp(_odeint_fwd, _odeint_bwd)


def _adjoint_solve(func, rtol, atol, mxstep, ys, t, g, *args):
    """``(y0_bar, t_bar, *args_bar)`` for output cotangents ``g``, on plain arrays: the
    adjoint state ``a(t) = dL/dy(t)`` and the accumulated derivatives of ``args`` and of
    the first time solved backward, interval by interval, in ``s = -t``. Each of ``args``
    gets a cotangent of its structure; an integer leaf (a count, an index) gets none."""
    t = _times(t)
    args_leaves, args_tree = tree_flatten(list(args))
    inexact = tuple(dtype_of(leaf).kind in "fc" for leaf in args_leaves)
    rhs = jit(_augmented_dynamics(func, args_tree, inexact))
    y_bar = np.array(g[-1])
    t0_bar = np.zeros((), dtype=t.dtype)
    args_bar = [np.zeros(np.shape(a), np.result_type(a, np.float64))
                for a, differentiable in zip(args_leaves, inexact) if differentiable]
    t_bar = np.zeros_like(t)
    shapes = [ys.shape[1:], y_bar.shape, (), *[a.shape for a in args_bar]]
    dtypes = [ys.dtype, ys.dtype, t.dtype, *[a.dtype for a in args_bar]]
    flat_dtype = np.result_type(*dtypes)          # complex if the state or an argument is
    for i in range(len(t) - 1, 0, -1):
        t_bar[i] = np.vdot(np.asarray(func(ys[i], t[i], *args)), g[i]).real
        t0_bar = t0_bar - t_bar[i]
        state = _ravel([ys[i], y_bar, t0_bar, *args_bar], flat_dtype)

        def dynamics(flat, s):
            y, a, _, *_ = _unravel(flat, shapes, dtypes)
            parts = rhs(y, s, a, *args_leaves)
            return _ravel(parts, flat_dtype)

        end = _integrate(dynamics, state, np.array([-t[i], -t[i - 1]]), rtol, atol, mxstep)[-1]
        _, y_bar, t0_bar, *args_bar = _unravel(end, shapes, dtypes)
        y_bar = y_bar + g[i - 1]
    t_bar[0] = t0_bar
    found = iter(args_bar)
    leaves_bar = [next(found) if differentiable else None for differentiable in inexact]
    return (y_bar, t_bar, *tree_unflatten(args_tree, leaves_bar))


def _augmented_dynamics(func, args_tree, inexact: tuple):
    """The right-hand side of the augmented system in ``s = -t``: ``y`` runs backward, and
    the adjoint, the first time's and the arguments' derivatives grow by ``a`` times the
    partial derivatives of ``func`` (its VJP), for the arguments' leaves that are floating
    point or complex (``inexact``); the others are constants."""
    def dynamics(y, s, a, *args_leaves):
        constants = list(args_leaves)

        def f(yy, tt, *differentiated):
            given = iter(differentiated)
            leaves = [next(given) if d else leaf for leaf, d in zip(constants, inexact)]
            return func(yy, tt, *tree_unflatten(args_tree, leaves))

        differentiated = [leaf for leaf, d in zip(args_leaves, inexact) if d]
        y_dot, pullback = vjp(f, y, -s, *differentiated)
        return (-y_dot, *pullback(a))
    return dynamics


def _no_second_order(*_):
    raise SolverError("odeint: derivatives of second order (and forward mode) are not "
                      "supported: the adjoint solve is not differentiated again")


_adjoint = custom_vjp(_adjoint_solve, nondiff_argnums=(0, 1, 2, 3))
_adjoint.defvjp(lambda *a: (_adjoint(*a), ()), _no_second_order)


# --- the Runge–Kutta integrator, on plain arrays ------------------------------------------


def _times(t) -> np.ndarray:
    t = np.asarray(t, dtype=np.result_type(t, np.float64))
    if t.ndim != 1 or t.size < 1:
        raise TensorShapeError(f"odeint: t must be a 1-d array of times, got shape {t.shape}")
    if not np.isfinite(t).all():
        raise TensorShapeError("odeint: the times t must be finite")
    if t.size > 1 and not (np.diff(t) > 0).all():
        raise TensorShapeError("odeint: the times t must increase strictly")
    return t


def _integrate(f: Callable, y0: np.ndarray, t: np.ndarray, rtol: float, atol: float,
               mxstep: float) -> np.ndarray:
    """``y`` at each time of ``t`` (increasing) for ``dy/dt = f(y, t)``, by adaptive
    Dormand–Prince steps that land on each time of ``t``."""
    out = np.empty((len(t),) + y0.shape, dtype=y0.dtype)
    out[0] = y0
    y, s = y0, t[0]
    f_y = np.asarray(f(y, s), dtype=y.dtype)
    h = _initial_step(f, y, s, f_y, rtol, atol)
    for i in range(1, len(t)):
        steps = 0
        while s < t[i]:
            if steps >= mxstep:
                raise SolverError(f"odeint: more than mxstep={mxstep:g} steps between "
                                  f"t={t[i - 1]:g} and t={t[i]:g}; raise mxstep or the "
                                  "tolerances")
            steps += 1
            step = min(h, t[i] - s)
            y_new, f_new, error = _step(f, y, s, f_y, step)
            scale = atol + rtol * np.maximum(np.abs(y), np.abs(y_new))
            ratio = _scaled_rms(error, scale)
            if not np.isfinite(ratio):
                ratio = math.inf
            grow = 10.0 if ratio == 0.0 else min(10.0, max(0.2, 0.9 * ratio ** -0.2))
            if ratio <= 1.0:
                y, f_y = y_new, f_new
                s = t[i] if step == t[i] - s else s + step
                h = max(h, step * grow) if step < h else step * grow   # cut short to land
                continue
            h = step * grow
            if not h > 64 * np.spacing(max(abs(s), abs(t[i]))):      # NaN too
                raise SolverError(f"odeint: the step size fell to {h:g} near t={s:g}: the "
                                  "problem is too stiff or func is not finite there")
        out[i] = y
    return out


def _step(f, y, s, f_y, h):
    """One Dormand–Prince step of size ``h``: the new state, ``f`` there, the error."""
    k = [f_y]
    for node, row in zip(_NODES[1:], _STAGES[1:]):
        y_stage = y + h * sum(c * k_j for c, k_j in zip(row, k) if c)
        k.append(np.asarray(f(y_stage, s + node * h), dtype=y.dtype))
    y_new = y + h * sum(w * k_j for w, k_j in zip(_WEIGHTS, k) if w)
    error = h * sum(e * k_j for e, k_j in zip(_ERROR, k) if e)
    return y_new, k[-1], error


def _initial_step(f, y, s, f_y, rtol, atol) -> float:
    """A first step size from the scales of ``y`` and ``f`` (Hairer, Nørsett and Wanner)."""
    scale = atol + rtol * np.abs(y)
    d0 = _scaled_rms(y, scale)
    d1 = _scaled_rms(f_y, scale)
    h0 = 1e-6 if d0 < 1e-5 or d1 < 1e-5 else 0.01 * d0 / d1
    f1 = np.asarray(f(y + h0 * f_y, s + h0), dtype=y.dtype)
    d2 = _scaled_rms(f1 - f_y, scale) / h0
    h1 = max(1e-6, h0 * 1e-3) if max(d1, d2) <= 1e-15 else (0.01 / max(d1, d2)) ** 0.2
    return min(100 * h0, h1)


def _rms(x: np.ndarray) -> float:
    """The root mean square of ``|x|`` (0 for no elements)."""
    return float(np.sqrt(np.mean(np.abs(x) ** 2))) if x.size else 0.0


def _scaled_rms(x: np.ndarray, scale: np.ndarray) -> float:
    """The root mean square of ``|x| / scale``, an element of ``x`` that is 0 counting 0
    where its scale is 0 too (``atol=0`` at a state that is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _rms(np.divide(np.abs(x), scale, out=np.zeros(np.shape(x)), where=x != 0))


def _ravel(parts, dtype) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(p, dtype=dtype)) for p in parts])


def _unravel(flat: np.ndarray, shapes, dtypes) -> list:
    """The parts of ``flat`` in their shapes and dtypes (the real part for a real one: the
    derivatives of real values are real)."""
    out, start = [], 0
    for shape, dtype in zip(shapes, dtypes):
        part = flat[start:start + math.prod(shape)].reshape(shape)
        out.append(part if dtype.kind == "c" else part.real.astype(dtype, copy=False))
        start += math.prod(shape)
    return out
