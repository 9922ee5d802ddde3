"""Optimizers: optax's pure gradient transformations, and torch.optim's for eager tensors.

**Functional (optax).** :func:`sgd`, :func:`adam`, :func:`adamw` and
:func:`rmsprop` return a :class:`GradientTransformation`: ``init(params)``
makes the optimizer state, ``update(grads, state, params=None)`` returns
``(updates, new_state)``, and :func:`apply_updates` adds the updates to the
parameters (updates already carry the minus sign of descent). Parameters,
gradients, updates and states are pytrees: dicts, lists, tuples and named tuples
of arrays. Everything is written with ``tnp`` functions and holds no hidden
state, so a whole training step can be jitted (state in, state out) and
differentiated through. ``learning_rate`` is a number or a schedule
``step -> learning rate`` called with the step count (0 at the first update),
as in optax.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> params = {"w": np.array([1.0, -2.0])}
>>> loss = lambda p: tnp.sum(p["w"] ** 2)
>>> opt = adam(0.1)
>>> state = opt.init(params)
>>> @tnp.jit
... def step(params, state):
...     grads = tnp.grad(loss)(params)
...     updates, state = opt.update(grads, state, params)
...     return apply_updates(params, updates), state
>>> for _ in range(200):
...     params, state = step(params, state)
>>> bool(loss(params) < 1e-3)
True

**Eager (torch.optim).** :class:`SGD`, :class:`Adam`, :class:`AdamW` and
:class:`RMSprop` take leaf ``Tensor``s; ``step()`` reads each one's ``.grad``
(accumulated by ``backward``) and writes the tensor's data through ``t.data``
(copy-on-write: ops recorded before keep the old values), skipping tensors
whose ``.grad`` is ``None``; ``zero_grad()`` sets every ``.grad`` to ``None``
(torch's default). Their update rules are torch's, hyperparameter names and
defaults included.

>>> w = tnp.tensor([1.0, -2.0], requires_grad=True)
>>> opt = SGD([w], lr=0.25)
>>> for _ in range(20):
...     opt.zero_grad()
...     _ = tnp.sum(w * w).backward()
...     opt.step()
>>> bool(np.all(np.abs(w.data) < 1e-3))
True
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, NamedTuple

import numpy as np

from tidu import TiduError
from primitives.tensor import numpy as api
from primitives.tensor.backends import library_of
from primitives.tensor.core import Frontend, dtype_of, shape_of
from primitives.tensor.numpy.creation import full_like, zeros_like
from primitives.tensor.eager.frontend import Tensor
from primitives.tensor.errors import TensorTypeError
from primitives.tensor.transforms.pytree import tree_flatten, tree_unflatten

__all__ = [
    "OptimizerError", "GradientTransformation", "chain", "sgd", "adam", "adamw", "rmsprop",
    "apply_updates", "SGD", "Adam", "AdamW", "RMSprop",
]


class OptimizerError(TiduError, ValueError):
    """An optimizer used with arguments it cannot work with (a ``ValueError``, as optax and
    torch.optim raise)."""


# --- functional: optax's GradientTransformation ----------------------------------------------


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
        step_size = -learning_rate(state.count)
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
            decayed = _tree_map(what, lambda g, p, m: g + weight_decay * p if m else g,
                                updates, params, chosen)
        return decayed, state

    return GradientTransformation(lambda params: EmptyState(), update)


def _scale_by_rms(what: str, decay: float, eps: float, initial_scale: float,
                  eps_in_sqrt: bool) -> GradientTransformation:
    def init(params):
        return ScaleByRmsState(_tree_map(what, lambda p: full_like(p, initial_scale), params))

    def update(updates, state, params=None):
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


# --- eager: torch.optim over Tensor leaves ----------------------------------------------------


def _values(value):
    """The array under a gradient (a ``Tensor`` after ``backward(create_graph=True)``)."""
    return value.data if isinstance(value, Tensor) else value


class _TensorOptimizer:
    """What torch.optim's optimizers share: the tensors, a state per tensor, ``step`` and
    ``zero_grad``. Subclasses define ``_update(data, grad, state) -> step to subtract``."""

    _complex_as_pairs = False       # whether a complex tensor is updated as (real, imag) pairs

    _name = "optim"                 # how errors name the optimizer

    def __init__(self, tensors) -> None:
        what = self._name
        if isinstance(tensors, (Tensor, np.ndarray, dict)):
            raise TensorTypeError(f"{what}: tensors must be an iterable of Tensors (a list, "
                                  f"say), got a {type(tensors).__name__}")
        tensors = list(tensors)
        if not tensors:
            raise OptimizerError(f"{what} got an empty list of tensors")
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TensorTypeError(f"{what} optimizes Tensors, got a {type(t).__name__} "
                                      "(wrap parameters in tnp.tensor(..., requires_grad=True))")
            if t._trace is not None:        # computed by a recorded op: backward fills no .grad
                raise OptimizerError(f"{what} can't optimize a non-leaf Tensor (one computed "
                                     "by recorded ops); optimize the leaves it comes from")
        if len({id(t) for t in tensors}) != len(tensors):
            raise OptimizerError(f"{what}: a tensor appears more than once in the list")
        self.tensors = tensors
        self.state: list[dict] = [{} for _ in tensors]

    def _check(self, **values) -> None:
        """torch.optim's checks: each hyperparameter ``name=(value, low, high)`` must be a real
        number with ``low <= value`` (and ``value < high`` when ``high`` is given)."""
        for name, (value, low, high) in values.items():
            if not isinstance(value, numbers.Real) or isinstance(value, bool) \
                    or not (low <= value and (high is None or value < high)):
                bound = f"in [{low}, {high})" if high is not None else f">= {low}"
                raise OptimizerError(f"{self._name}: invalid {name} {value!r}: it must be a "
                                     f"real number {bound}")

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every tensor's ``.grad``: to ``None`` (torch's default), or to zeros."""
        for t in self.tensors:
            if set_to_none or t.grad is None:
                t.grad = None
            else:
                t.grad = zeros_like(_values(t.grad))

    def step(self, closure: Callable | None = None):
        """One update of every tensor with a ``.grad``; ``closure`` (which recomputes the loss
        and calls backward) is called first, and its result returned, as in torch."""
        loss = closure() if closure is not None else None
        for t, state in zip(self.tensors, self.state):
            if t.grad is None:
                continue
            data = t.data                   # a writable handle (copy-on-write)
            grad = _values(t.grad)
            if self._complex_as_pairs and dtype_of(data).kind == "c":
                # as torch (view_as_real): the real and imaginary parts are two parameters
                data -= _from_pairs(self._update(_pairs(data), _pairs(grad), state))
            else:
                data -= self._update(data, grad, state)
            # the libraries whose arrays are immutable (Dask) rebind `data` to a new array
            # instead of writing in place; for the others this is the same handle (a no-op)
            t.data = data
        return loss

    def _update(self, data, grad, state):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.tensors)} tensors)"


class SGD(_TensorOptimizer):
    """``torch.optim.SGD`` over leaf Tensors: with ``weight_decay`` the gradient gets
    ``weight_decay * t``; with ``momentum`` a buffer ``b = momentum * b + (1 - dampening) * g``
    (``b = g`` at the first step) replaces it (Nesterov: ``g + momentum * b``); then
    ``t -= lr * g``.

    >>> import primitives.tensor as tnp
    >>> w = tnp.tensor([1.0], requires_grad=True)
    >>> opt = SGD([w], lr=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     opt.zero_grad(); _ = (w * w).sum().backward(); opt.step()
    >>> w.data                                # 1 - 0.2, then 0.8 - 0.1 * (1.6 + 0.9 * 2)
    array([0.46])
    """

    _name = "optim.SGD"

    def __init__(self, tensors, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False) -> None:
        super().__init__(tensors)
        self._check(lr=(lr, 0.0, None), momentum=(momentum, 0.0, None),
                    dampening=(dampening, -math.inf, None),
                    weight_decay=(weight_decay, 0.0, None))
        if nesterov and (momentum <= 0 or dampening != 0):
            raise OptimizerError("optim.SGD: Nesterov momentum requires a momentum and zero "
                                 "dampening")
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov

    def _update(self, data, grad, state):
        if self.weight_decay:
            grad = grad + self.weight_decay * data
        if self.momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = grad.copy() if hasattr(grad, "copy") else grad + 0
            else:
                buf = self.momentum * buf + (1 - self.dampening) * grad
            state["momentum_buffer"] = buf
            grad = grad + self.momentum * buf if self.nesterov else buf
        return self.lr * grad


class Adam(_TensorOptimizer):
    """``torch.optim.Adam`` over leaf Tensors: ``m = b1 m + (1 - b1) g``,
    ``v = b2 v + (1 - b2) |g|^2``, ``t -= lr / (1 - b1^k) * m / (sqrt(v / (1 - b2^k)) + eps)``
    at step ``k``; ``weight_decay`` adds ``weight_decay * t`` to the gradient (L2, as torch).

    >>> import primitives.tensor as tnp
    >>> w = tnp.tensor([1.0, -1.0], requires_grad=True)
    >>> opt = Adam([w], lr=0.1)
    >>> _ = (w * w).sum().backward(); opt.step()
    >>> w.data                                # the first step is -lr * sign(g)
    array([ 0.9, -0.9])
    """

    _name = "optim.Adam"
    _complex_as_pairs = True

    def __init__(self, tensors, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        super().__init__(tensors)
        betas = tuple(betas)
        if len(betas) != 2:
            raise OptimizerError(f"{self._name}: betas must be a pair (beta1, beta2), got "
                                 f"{betas!r}")
        self._check(lr=(lr, 0.0, None), eps=(eps, 0.0, None), beta1=(betas[0], 0.0, 1.0),
                    beta2=(betas[1], 0.0, 1.0), weight_decay=(weight_decay, 0.0, None))
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay

    def _decay(self, data, grad):
        return grad + self.weight_decay * data if self.weight_decay else grad

    def _update(self, data, grad, state):
        grad = self._decay(data, grad)
        b1, b2 = self.betas
        if not state:
            state.update(step=0, exp_avg=zeros_like(data), exp_avg_sq=zeros_like(data))
        state["step"] += 1
        step = state["step"]
        state["exp_avg"] = state["exp_avg"] + (1 - b1) * (grad - state["exp_avg"])
        state["exp_avg_sq"] = b2 * state["exp_avg_sq"] + (1 - b2) * _abs_sq_array(grad)
        step_size = self.lr / (1 - b1 ** step)
        denom = state["exp_avg_sq"] ** 0.5 / math.sqrt(1 - b2 ** step) + self.eps
        return step_size * state["exp_avg"] / denom


class AdamW(Adam):
    """``torch.optim.AdamW`` over leaf Tensors: ``t *= 1 - lr * weight_decay`` (decoupled
    decay, default 0.01 as torch), then Adam's step.

    >>> import primitives.tensor as tnp
    >>> w = tnp.tensor([2.0], requires_grad=True)
    >>> opt = AdamW([w], lr=0.1, weight_decay=0.5)
    >>> _ = (w * w).sum().backward(); opt.step()
    >>> w.data                                # 2 * (1 - 0.05) - 0.1
    array([1.8])
    """

    _name = "optim.AdamW"

    def __init__(self, tensors, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2) -> None:
        super().__init__(tensors, lr, betas, eps, weight_decay)

    def _decay(self, data, grad):
        return grad

    def _update(self, data, grad, state):
        step = super()._update(data, grad, state)
        return self.lr * self.weight_decay * data + step if self.weight_decay else step


class RMSprop(_TensorOptimizer):
    """``torch.optim.RMSprop`` over leaf Tensors: ``v = alpha v + (1 - alpha) g^2``,
    ``t -= lr * g / (sqrt(v) + eps)`` (``eps`` outside the root, as torch); ``centered``
    subtracts the squared running mean of ``g`` under the root; ``momentum`` keeps a
    buffer ``b = momentum * b + g / (sqrt(v) + eps)`` and steps by ``lr * b``.

    >>> import primitives.tensor as tnp
    >>> w = tnp.tensor([1.0], requires_grad=True)
    >>> opt = RMSprop([w], lr=0.01, alpha=0.75, eps=0.0)
    >>> _ = (w * w).sum().backward(); opt.step()
    >>> w.data                                # 1 - 0.01 * 2 / sqrt(0.25 * 4)
    array([0.98])
    """

    _name = "optim.RMSprop"
    _complex_as_pairs = True

    def __init__(self, tensors, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0,
                 centered: bool = False) -> None:
        super().__init__(tensors)
        self._check(lr=(lr, 0.0, None), alpha=(alpha, 0.0, None), eps=(eps, 0.0, None),
                    momentum=(momentum, 0.0, None), weight_decay=(weight_decay, 0.0, None))
        self.lr, self.alpha, self.eps = lr, alpha, eps
        self.weight_decay, self.momentum, self.centered = weight_decay, momentum, centered

    def _update(self, data, grad, state):
        if self.weight_decay:
            grad = grad + self.weight_decay * data
        if not state:
            state["square_avg"] = zeros_like(data)
            if self.momentum:
                state["momentum_buffer"] = zeros_like(data)
            if self.centered:
                state["grad_avg"] = zeros_like(data)
        alpha = self.alpha
        state["square_avg"] = alpha * state["square_avg"] + (1 - alpha) * _abs_sq_array(grad)
        mean_square = state["square_avg"]
        if self.centered:
            state["grad_avg"] = state["grad_avg"] + (1 - alpha) * (grad - state["grad_avg"])
            mean_square = mean_square - _abs_sq_array(state["grad_avg"])
        avg = mean_square ** 0.5 + self.eps
        if self.momentum:
            state["momentum_buffer"] = self.momentum * state["momentum_buffer"] + grad / avg
            return self.lr * state["momentum_buffer"]
        return self.lr * grad / avg


def _abs_sq_array(g):
    """``|g|^2`` of a plain array (of any library), in ``g``'s real dtype."""
    if dtype_of(g).kind == "c":
        return (g * g.conj()).real
    return g * g


def _pairs(z):
    """A complex array as real pairs along a new last axis (torch's ``view_as_real``)."""
    xp = library_of(z).xp
    return xp.stack([xp.real(z), xp.imag(z)], axis=-1)


def _from_pairs(pairs):
    return pairs[..., 0] + 1j * pairs[..., 1]
