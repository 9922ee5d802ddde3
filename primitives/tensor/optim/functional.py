"""optax's pure optimizers: gradient transformations on pytrees, jittable and differentiable.

:func:`sgd`, :func:`adam`, :func:`adamw` and :func:`rmsprop` return a
:class:`GradientTransformation`: ``init(params)`` makes the optimizer state,
``update(grads, state, params=None)`` returns ``(updates, new_state)``, and
:func:`apply_updates` adds the updates to the parameters (updates already carry the
minus sign of descent). See :mod:`primitives.tensor.optim`.

>>> import numpy as np
>>> opt = sgd(0.5)
>>> params = {"w": np.array([1.0])}
>>> updates, state = opt.update({"w": np.array([2.0])}, opt.init(params))
>>> apply_updates(params, updates)
{'w': array([0.])}
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, NamedTuple

import numpy as np

from tidu import TiduError
from primitives.tensor import numpy as api
from primitives.tensor.core import Frontend, dtype_of, shape_of
from primitives.tensor.numpy.creation import full_like, zeros_like
from primitives.tensor.transforms.pytree import tree_flatten, tree_unflatten


class OptimizerError(TiduError, ValueError):
    """An optimizer used with arguments it cannot work with (a ``ValueError``, as optax and
    torch.optim raise)."""


class GradientTransformation(NamedTuple):
    """A pair of pure functions (optax's): ``init(params) -> state`` and
    ``update(grads, state, params=None) -> (updates, state)``.

    >>> t = sgd(0.5)
    >>> updates, _ = t.update([np.array([2.0])], t.init([np.array([0.0])]))
    >>> updates
    [array([-1.])]
    """

    init: Callable
    update: Callable


class EmptyState(NamedTuple):
    """The state of a transformation that keeps none."""


class TraceState(NamedTuple):
    """Momentum: the running ``trace`` of the updates."""

    trace: Any


class ScaleByAdamState(NamedTuple):
    """Adam's step ``count`` and moment estimates ``mu`` (first) and ``nu`` (second)."""

    count: Any
    mu: Any
    nu: Any


class ScaleByRmsState(NamedTuple):
    """RMSprop's running mean ``nu`` of squared gradients."""

    nu: Any


class ScaleByRStdDevState(NamedTuple):
    """Centered RMSprop's running means ``mu`` of the gradients and ``nu`` of their squares."""

    mu: Any
    nu: Any


class ScaleByScheduleState(NamedTuple):
    """The step ``count`` a learning-rate schedule is called with."""

    count: Any


def _tree_map(what: str, fn, tree, *others):
    """``fn`` applied leafwise to ``tree`` and ``others``, which must have its structure."""
    leaves, structure = tree_flatten(tree)
    columns = [leaves]
    for other in others:
        other_leaves, other_structure = tree_flatten(other)
        if other_structure != structure:
            raise OptimizerError(f"{what}: trees of different structures, {structure!r} and "
                                 f"{other_structure!r} (the gradients, the state made by init "
                                 "and the params must match)")
        columns.append(other_leaves)
    return tree_unflatten(structure, [fn(*row) for row in zip(*columns)])


def _abs_sq(g):
    """``|g|^2``, real (as optax's ``abs_sq``)."""
    return api.real(api.conj(g) * g) if dtype_of(g).kind == "c" else g * g


def _cast(value, like):
    return api.astype(value, dtype_of(like))


def _new_count():
    return np.zeros((), np.int64)


def _bias_corrected(what: str, moment, decay: float, count):
    correction = 1 - decay ** count
    return _tree_map(what, lambda m: m / _cast(correction, m), moment)


def _checked_state(what: str, state, kind: type):
    """``state`` if it is a ``kind`` (what this transformation's ``init`` made), else an
    :class:`OptimizerError`: another optimizer's state would be read as this one's."""
    if not isinstance(state, kind):
        raise OptimizerError(f"{what}: update got a state of type {type(state).__name__}, "
                             f"expected {kind.__name__} (pass the state this optimizer's "
                             "init, or its last update, made)")
    return state


def chain(*transformations: GradientTransformation) -> GradientTransformation:
    """The transformations applied in order (optax's ``chain``); the state is a tuple of
    theirs.

    >>> t = chain(sgd(1.0), sgd(0.5))          # minus, then minus again: +0.5 g
    >>> t.update([np.array([2.0])], t.init([np.array([0.0])]))[0]
    [array([1.])]
    """
    def init(params):
        return tuple(t.init(params) for t in transformations)

    def update(updates, state, params=None):
        if not isinstance(state, tuple) or len(state) != len(transformations):
            raise OptimizerError(f"chain update: the state must be the tuple init made (one "
                                 f"state per transformation, {len(transformations)}), got "
                                 f"{type(state).__name__}")
        if not transformations:         # the identity: new arrays, not the caller's grads
            return _tree_map("optim.chain", api.copy, updates), ()
        new_states = []
        for t, s in zip(transformations, state):
            updates, s = t.update(updates, s, params)
            new_states.append(s)
        return updates, tuple(new_states)

    return GradientTransformation(init, update)


def _checked_learning_rate(what: str, learning_rate):
    """A number, a schedule, or (as optax) a real scalar array: a NumPy 0-d array, a
    ``Tensor``, or a traced value (so that a learning rate can be differentiated)."""
    if callable(learning_rate) or isinstance(learning_rate, numbers.Real):
        return learning_rate
    if isinstance(learning_rate, Frontend) or hasattr(learning_rate, "__array_namespace__") \
            or isinstance(learning_rate, np.ndarray):
        try:
            shape, dtype = shape_of(learning_rate), dtype_of(learning_rate)
        except TiduError:
            shape, dtype = None, None
        if shape == () and dtype is not None and dtype.kind in "fiu":
            return learning_rate
        raise OptimizerError(f"{what}: learning_rate must be a real scalar, got an array of "
                             f"shape {shape} and dtype {dtype}")
    raise OptimizerError(f"{what}: learning_rate must be a number or a schedule (a function "
                         f"of the step count), got {type(learning_rate).__name__}")


def _scale_by_learning_rate(what: str, learning_rate) -> GradientTransformation:
    """``-learning_rate * updates``; a schedule is called with the step count (0 first)."""
    learning_rate = _checked_learning_rate(what, learning_rate)
    if not callable(learning_rate):
        if isinstance(learning_rate, numbers.Real):
            step_size = -learning_rate
            scale = lambda g: step_size * g                                 # noqa: E731
        else:           # an array: in each update's dtype, as a schedule's value
            step_size = api.negative(learning_rate)
            scale = lambda g: _cast(step_size, g) * g                       # noqa: E731
        return GradientTransformation(
            lambda params: EmptyState(),
            lambda updates, state, params=None: (_tree_map(what, scale, updates), state))

    def update(updates, state, params=None):
        state = _checked_state(what, state, ScaleByScheduleState)
        value = learning_rate(state.count)
        try:                                # a vector would broadcast the updates
            if callable(value):
                raise OptimizerError(f"{what}: learning_rate must be a real scalar, got a "
                                     f"{type(value).__name__}")
            _checked_learning_rate(what, value)
        except OptimizerError as error:
            raise OptimizerError(f"{error} (the value of the schedule "
                                 f"{getattr(learning_rate, '__qualname__', learning_rate)})"
                                 ) from None
        step_size = -value
        scaled = _tree_map(what, lambda g: _cast(step_size, g) * g, updates)
        return scaled, ScaleByScheduleState(state.count + 1)

    return GradientTransformation(lambda params: ScaleByScheduleState(_new_count()), update)


def _trace(what: str, decay: float, nesterov: bool,
           last: bool = False) -> GradientTransformation:
    """Momentum (optax's ``trace``): ``t = g + decay * t``; the update is ``t``, or
    ``g + decay * t`` with Nesterov. ``last``: the updates leave the chain as they are, so
    they get arrays of their own (the new state keeps ``t``: an update written to in place
    must not change the state)."""
    def init(params):
        return TraceState(_tree_map(what, zeros_like, params))

    def update(updates, state, params=None):
        state = _checked_state(what, state, TraceState)
        trace = _tree_map(what, lambda g, t: g + decay * t, updates, state.trace)
        if nesterov:
            updates = _tree_map(what, lambda g, t: g + decay * t, updates, trace)
        elif last:
            updates = _tree_map(what, api.copy, trace)
        else:
            updates = trace
        return updates, TraceState(trace)

    return GradientTransformation(init, update)


def _scale_by_adam(what: str, b1: float, b2: float, eps: float,
                   eps_root: float) -> GradientTransformation:
    def init(params):
        zeros = _tree_map(what, zeros_like, params)
        return ScaleByAdamState(_new_count(), zeros, _tree_map(what, zeros_like, params))

    def update(updates, state, params=None):
        state = _checked_state(what, state, ScaleByAdamState)
        mu = _tree_map(what, lambda g, m: (1 - b1) * g + b1 * m, updates, state.mu)
        nu = _tree_map(what, lambda g, v: (1 - b2) * _abs_sq(g) + b2 * v, updates, state.nu)
        count = state.count + 1
        mu_hat = _bias_corrected(what, mu, b1, count)
        nu_hat = _bias_corrected(what, nu, b2, count)
        updates = _tree_map(what, lambda m, v: m / (api.sqrt(v + eps_root) + eps),
                            mu_hat, nu_hat)
        return updates, ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, update)


def _add_decayed_weights(what: str, weight_decay: float, mask) -> GradientTransformation:
    def update(updates, state, params=None):
        if params is None:
            raise OptimizerError(f"{what}: update needs params for the weight decay; call "
                                 "update(grads, state, params)")
        if mask is None:
            decayed = _tree_map(what, lambda g, p: g + weight_decay * p, updates, params)
        else:
            chosen = mask(params) if callable(mask) else mask
            decayed = _tree_map(what, lambda g, p, m: g + weight_decay * p
                                if _mask_flag(what, m) else g, updates, params, chosen)
        return decayed, state

    return GradientTransformation(lambda params: EmptyState(), update)


def _mask_flag(what: str, m) -> bool:
    """A mask leaf, one per parameter: whether the parameter decays (a bool)."""
    if shape_of(m) != () or dtype_of(m) != np.bool_:
        raise OptimizerError(f"{what}: the mask's leaves must be bools, one per parameter "
                             f"(whether it decays), got one of shape {shape_of(m)} and dtype "
                             f"{dtype_of(m)}")
    return bool(m)


def _scale_by_rms(what: str, decay: float, eps: float, initial_scale: float,
                  eps_in_sqrt: bool) -> GradientTransformation:
    def init(params):
        return ScaleByRmsState(_tree_map(what, lambda p: full_like(p, initial_scale), params))

    def update(updates, state, params=None):
        state = _checked_state(what, state, ScaleByRmsState)
        nu = _tree_map(what, lambda g, v: (1 - decay) * _abs_sq(g) + decay * v,
                       updates, state.nu)
        if eps_in_sqrt:
            scaled = _tree_map(what, lambda g, v: g / api.sqrt(v + eps), updates, nu)
        else:
            scaled = _tree_map(what, lambda g, v: g / (api.sqrt(v) + eps), updates, nu)
        return scaled, ScaleByRmsState(nu)

    return GradientTransformation(init, update)


def _scale_by_stddev(what: str, decay: float, eps: float, initial_scale: float,
                     eps_in_sqrt: bool) -> GradientTransformation:
    def init(params):
        return ScaleByRStdDevState(_tree_map(what, zeros_like, params),
                                   _tree_map(what, lambda p: full_like(p, initial_scale),
                                             params))

    def update(updates, state, params=None):
        state = _checked_state(what, state, ScaleByRStdDevState)
        mu = _tree_map(what, lambda g, m: (1 - decay) * g + decay * m, updates, state.mu)
        nu = _tree_map(what, lambda g, v: (1 - decay) * _abs_sq(g) + decay * v,
                       updates, state.nu)
        if eps_in_sqrt:
            scale = lambda g, m, v: g / api.sqrt(v - _abs_sq(m) + eps)          # noqa: E731
        else:
            scale = lambda g, m, v: g / (api.sqrt(v - _abs_sq(m)) + eps)        # noqa: E731
        return _tree_map(what, scale, updates, mu, nu), ScaleByRStdDevState(mu, nu)

    return GradientTransformation(init, update)


def _no_momentum(momentum) -> bool:
    """Whether ``momentum`` (``None``, a number, or an array that may be traced) keeps no
    trace: ``None`` or the number 0. An array keeps one (its value may be unknown)."""
    return momentum is None or (isinstance(momentum, numbers.Real) and momentum == 0)


def sgd(learning_rate, momentum=0.0, nesterov: bool = False) -> GradientTransformation:
    """Stochastic gradient descent (optax's ``sgd``): updates ``-learning_rate * g``, or with
    ``momentum`` ``-learning_rate * t`` where ``t = g + momentum * t`` (Nesterov:
    ``-learning_rate * (g + momentum * t)``). ``momentum`` 0 or ``None`` keeps no trace.

    >>> opt = sgd(0.1, momentum=0.9)
    >>> params = np.array([1.0])
    >>> state = opt.init(params)
    >>> updates, state = opt.update(np.array([2.0]), state)
    >>> updates, apply_updates(params, updates)
    (array([-0.2]), array([0.8]))
    """
    what = "optim.sgd"
    if not _no_momentum(momentum):
        return chain(_trace(what, momentum, nesterov),
                     _scale_by_learning_rate(what, learning_rate))
    return chain(_scale_by_learning_rate(what, learning_rate))


def adam(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, *,
         eps_root: float = 0.0) -> GradientTransformation:
    """Adam (optax's ``adam``): ``mu = b1 mu + (1 - b1) g``, ``nu = b2 nu + (1 - b2) |g|^2``,
    update ``-learning_rate * mu_hat / (sqrt(nu_hat + eps_root) + eps)`` with the
    bias-corrected ``mu_hat = mu / (1 - b1^t)``, ``nu_hat = nu / (1 - b2^t)`` at step ``t``.

    >>> opt = adam(0.1)
    >>> updates, state = opt.update({"w": np.array([3.0])}, opt.init({"w": np.zeros(1)}))
    >>> updates                               # the first step is -lr * sign(g)
    {'w': array([-0.1])}
    """
    what = "optim.adam"
    return chain(_scale_by_adam(what, b1, b2, eps, eps_root),
                 _scale_by_learning_rate(what, learning_rate))


def adamw(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 1e-4, *, eps_root: float = 0.0,
          mask=None) -> GradientTransformation:
    """Adam with decoupled weight decay (optax's ``adamw``): Adam's update plus
    ``weight_decay * params``, times ``-learning_rate``; ``update`` needs ``params``.
    ``mask`` (a pytree of bools like ``params``, or a function of ``params`` giving one)
    chooses the parameters that decay.

    >>> opt = adamw(0.1, weight_decay=0.5)
    >>> params = np.array([2.0])
    >>> updates, _ = opt.update(np.array([3.0]), opt.init(params), params)
    >>> updates                               # -0.1 * (1 + 0.5 * 2)
    array([-0.2])
    """
    what = "optim.adamw"
    return chain(_scale_by_adam(what, b1, b2, eps, eps_root),
                 _add_decayed_weights(what, weight_decay, mask),
                 _scale_by_learning_rate(what, learning_rate))


def rmsprop(learning_rate, decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
            centered: bool = False, momentum=None, nesterov: bool = False, *,
            eps_in_sqrt: bool = True) -> GradientTransformation:
    """RMSprop (optax's ``rmsprop``): ``nu = decay nu + (1 - decay) |g|^2`` (from
    ``initial_scale``), update ``-learning_rate * g / sqrt(nu + eps)``; ``centered``
    divides by ``sqrt(nu - mu^2 + eps)`` with ``mu`` the running mean of ``g``; a
    ``momentum`` traces the scaled updates (as optax: after the learning rate).

    optax puts ``eps`` inside the square root; ``eps_in_sqrt=False`` puts it outside,
    as ``torch.optim.RMSprop`` does (whose ``alpha`` is ``decay``, default 0.99).

    >>> opt = rmsprop(0.1, decay=0.5, eps=0.0)
    >>> updates, _ = opt.update(np.array([2.0]), opt.init(np.zeros(1)))
    >>> updates                               # -0.1 * 2 / sqrt(0.5 * 4)
    array([-0.14142136])
    """
    what = "optim.rmsprop"
    scale = _scale_by_stddev if centered else _scale_by_rms
    parts = [scale(what, decay, eps, initial_scale, eps_in_sqrt),
             _scale_by_learning_rate(what, learning_rate)]
    if momentum is not None:
        parts.append(_trace(what, momentum, nesterov, last=True))
    return chain(*parts)


def apply_updates(params, updates):
    """``params + updates`` leafwise, each result in its parameter's dtype (optax's).

    >>> apply_updates({"w": np.ones(2, np.float32)}, {"w": np.array([0.5, -0.5])})
    {'w': array([1.5, 0.5], dtype=float32)}
    """
    return _tree_map("optim.apply_updates", lambda p, u: _cast(api.add(p, u), p),
                     params, updates)
