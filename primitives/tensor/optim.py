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

Around them, torch.optim's machinery: ``param_groups`` (the optimizers take a list
of tensors, or of dicts ``{"params": [...], "lr": ...}`` whose missing
hyperparameters are the constructor's; ``opt.param_groups[i]["lr"] = ...`` changes
the next step), ``add_param_group``, ``state`` (keyed by tensor),
``state_dict()`` / ``load_state_dict()`` (torch's layout, copies both ways: a
resumed run is bit-identical to one that went on), and the learning-rate
schedulers of :data:`lr_scheduler` (``StepLR``, ``MultiStepLR``,
``ExponentialLR``, ``CosineAnnealingLR``, ``LambdaLR``: torch's, rate for rate),
which act through ``param_groups``.

>>> w = tnp.tensor([1.0, -2.0], requires_grad=True)
>>> opt = SGD([w], lr=0.25)
>>> for _ in range(20):
...     opt.zero_grad()
...     _ = tnp.sum(w * w).backward()
...     opt.step()
>>> bool(np.all(np.abs(w.data) < 1e-3))
True
>>> b = tnp.tensor([0.5], requires_grad=True)
>>> opt = Adam([{"params": [w]}, {"params": [b], "lr": 0.1}], lr=0.01)
>>> scheduler = lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
>>> for _ in range(20):
...     opt.zero_grad()
...     _ = tnp.sum((w - b) ** 2).backward()
...     opt.step()
...     scheduler.step()                  # after opt.step(), as in torch
>>> scheduler.get_last_lr()
[0.0025, 0.025]
>>> saved = opt.state_dict()              # copies: save them, load_state_dict them later
>>> saved["param_groups"][1]["params"], saved["state"][1]["step"]
([1], 20)
"""

from __future__ import annotations

import bisect
import collections
import copy
import math
import numbers
import sys
import types
import warnings
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
    "apply_updates", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler",
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


class _GroupValue:
    """A hyperparameter read and written as an attribute (``opt.lr``, as before parameter
    groups): reading gives the value every group shares, writing sets it in every group."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, opt, owner=None):
        if opt is None:
            return self
        values = [group[self.name] for group in opt.param_groups]
        if any(v != values[0] for v in values[1:]):
            raise OptimizerError(f"{opt._name}.{self.name}: the parameter groups have different "
                                 f"values {values}; read opt.param_groups[i][{self.name!r}]")
        return values[0]

    def __set__(self, opt, value) -> None:
        checked = []
        for i, group in enumerate(opt.param_groups):
            new = dict(group, **{self.name: value})
            opt._check_group(new, f" (param_groups[{i}])")
            checked.append(new[self.name])         # as the check normalized it (betas a tuple)
        for group, normalized in zip(opt.param_groups, checked):
            group[self.name] = normalized


def _copied(value):
    """A copy of a state or hyperparameter value sharing no memory with it (arrays of any
    library included; numbers, strings and None are immutable and kept)."""
    if value is None or isinstance(value, (numbers.Number, str, bytes)):
        return value
    return copy.deepcopy(value)


def _is_array(value) -> bool:
    return not isinstance(value, (numbers.Number, np.generic, str, bytes)) \
        and hasattr(value, "shape") and hasattr(value, "dtype")


class _TensorStates(dict):
    """torch's ``optimizer.state``: a tensor's state (a dict, empty until its first step),
    keyed by the tensor. An int ``i`` reads the ``i``-th tensor's, in the groups' order (as
    when the states were a list, before parameter groups)."""

    __slots__ = ("_groups",)

    def __init__(self, groups: list) -> None:
        super().__init__()
        self._groups = groups

    def __missing__(self, key):
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            return self[[t for group in self._groups for t in group["params"]][key]]
        if not isinstance(key, Tensor):
            raise KeyError(key)
        state = self[key] = {}
        return state


class _TensorOptimizer:
    """What torch.optim's optimizers share: parameter groups (``param_groups``, each a dict
    with ``"params"`` and every hyperparameter), a state per tensor (``state``, keyed by
    the tensor), ``step``, ``zero_grad``, ``add_param_group``, ``state_dict`` and
    ``load_state_dict``. Subclasses define ``_check_group(group, where)`` (torch's checks of
    the hyperparameters) and ``_update(data, grad, state, group) -> step to subtract``."""

    _complex_as_pairs = False       # whether a complex tensor is updated as (real, imag) pairs

    _name = "optim"                 # how errors name the optimizer

    def __init__(self, tensors, defaults: dict) -> None:
        what = self._name
        if isinstance(tensors, (Tensor, np.ndarray, dict)):
            raise TensorTypeError(f"{what}: tensors must be an iterable of Tensors (a list, "
                                  f"say) or of dicts (parameter groups), got a "
                                  f"{type(tensors).__name__}")
        groups = list(tensors)
        if not groups:
            raise OptimizerError(f"{what} got an empty list of tensors")
        self._check_group(defaults, "")
        self.defaults = defaults
        self.param_groups: list[dict] = []
        self.state = _TensorStates(self.param_groups)
        self._steps = 0                 # how many times step() ran (for the schedulers' check)
        kinds = {isinstance(g, dict) for g in groups}
        if kinds == {True, False}:
            raise TensorTypeError(f"{what}: a list of Tensors or a list of dicts (parameter "
                                  "groups), not both")
        for group in groups if True in kinds else [{"params": groups}]:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict) -> None:
        """Add a parameter group, a dict with ``"params"`` (a Tensor or a list of them) and
        the hyperparameters it sets; the others are the constructor's (``defaults``)."""
        what = self._name
        if not isinstance(param_group, dict):
            raise TensorTypeError(f"{what}: a parameter group is a dict with 'params' and "
                                  f"hyperparameters, got a {type(param_group).__name__}")
        if "params" not in param_group:
            raise OptimizerError(f"{what}: a parameter group needs 'params' (its tensors), got "
                                 f"the keys {sorted(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TensorTypeError(f"{what}: a group's params must be an ordered collection (a "
                                  "list): a set's order changes between runs, and the state "
                                  "dict numbers the tensors in order")
        elif isinstance(params, (np.ndarray, dict)):
            raise TensorTypeError(f"{what}: a group's params must be a Tensor or a list of "
                                  f"Tensors, got a {type(params).__name__}")
        params = list(params)
        index = len(self.param_groups)
        if not params:
            raise OptimizerError(f"{what}: parameter group {index} has no tensors")
        for t in params:
            if not isinstance(t, Tensor):
                raise TensorTypeError(f"{what} optimizes Tensors, got a {type(t).__name__} "
                                      "(wrap parameters in tnp.tensor(..., requires_grad=True))")
            if t._trace is not None:        # computed by a recorded op: backward fills no .grad
                raise OptimizerError(f"{what} can't optimize a non-leaf Tensor (one computed "
                                     "by recorded ops); optimize the leaves it comes from")
        ids = {id(t) for t in params}
        if len(ids) != len(params):
            raise OptimizerError(f"{what}: a tensor appears more than once in the list")
        if any(id(t) in ids for group in self.param_groups for t in group["params"]):
            raise OptimizerError(f"{what}: some tensors appear in more than one parameter "
                                 "group (a tensor has one set of hyperparameters)")
        group = {"params": params}
        for key, value in param_group.items():
            if key != "params":
                group[key] = value
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self._check_group(group, f" (param_groups[{index}])")
        self.param_groups.append(group)

    @property
    def tensors(self) -> list:
        """Every group's tensors, in order."""
        return [t for group in self.param_groups for t in group["params"]]

    def _check(self, _where: str = "", **values) -> None:
        """torch.optim's checks: each hyperparameter ``name=(value, low, high)`` must be a real
        number with ``low <= value`` (and ``value < high`` when ``high`` is given)."""
        for name, (value, low, high) in values.items():
            if not isinstance(value, numbers.Real) or isinstance(value, bool) \
                    or not (low <= value and (high is None or value < high)):
                bound = f"in [{low}, {high})" if high is not None else f">= {low}"
                raise OptimizerError(f"{self._name}: invalid {name} {value!r}{_where}: it must "
                                     f"be a real number {bound}")

    def _check_group(self, group: dict, where: str) -> None:
        raise NotImplementedError

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every tensor's ``.grad``: to ``None`` (torch's default), or to zeros."""
        for group in self.param_groups:
            for t in group["params"]:
                if set_to_none or t.grad is None:
                    t.grad = None
                else:
                    t.grad = zeros_like(_values(t.grad))

    def step(self, closure: Callable | None = None):
        """One update of every tensor with a ``.grad``, with its group's hyperparameters;
        ``closure`` (which recomputes the loss and calls backward) is called first, and its
        result returned, as in torch."""
        loss = closure() if closure is not None else None
        states, update, as_pairs = self.state, self._update, self._complex_as_pairs
        for group in self.param_groups:
            for t in group["params"]:
                if t.grad is None:
                    continue
                state = states.get(t)
                if state is None:
                    state = states[t] = {}
                data = t.data                   # a writable handle (copy-on-write)
                grad = _values(t.grad)
                if as_pairs and dtype_of(data).kind == "c":
                    # as torch (view_as_real): the real and imaginary parts are two parameters
                    data -= _from_pairs(update(_pairs(data), _pairs(grad), state, group))
                else:
                    data -= update(data, grad, state, group)
                # the libraries whose arrays are immutable (Dask) rebind `data` to a new array
                # instead of writing in place; for the others this is the same handle (a no-op)
                t.data = data
        self._steps += 1
        return loss

    def _update(self, data, grad, state, group):
        raise NotImplementedError

    def state_dict(self) -> dict:
        """torch's: ``{"state": {index: state}, "param_groups": [group]}``, the tensors
        numbered in the order of the groups (a group's ``"params"`` is a list of those
        numbers). Everything is a copy: training on does not change it, nor it the optimizer.
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {key: _copied(value) for key, value in group.items() if key != "params"}
            packed["params"] = [index.setdefault(id(t), len(index)) for t in group["params"]]
            groups.append(packed)
        state = {index[id(t)]: {key: _copied(value) for key, value in s.items()}
                 for t, s in self.state.items() if s and id(t) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Take the state and the groups' hyperparameters from a :meth:`state_dict` (copies
        of them) of an optimizer of the same class over tensors of the same shapes, grouped
        alike; training on then gives what the saved optimizer would have given."""
        what = f"{self._name}.load_state_dict"
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= set(state_dict):
            got = sorted(state_dict) if isinstance(state_dict, dict) else \
                type(state_dict).__name__
            raise OptimizerError(f"{what}: expected a dict with 'state' and 'param_groups' (what "
                                 f"state_dict() returns), got {got}")
        saved_groups = list(state_dict["param_groups"])
        if len(saved_groups) != len(self.param_groups):
            raise OptimizerError(f"{what}: the state dict has {len(saved_groups)} parameter "
                                 f"groups, this optimizer {len(self.param_groups)}")
        tensor_of: dict = {}
        groups = []
        for i, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if not isinstance(saved, dict) or "params" not in saved:
                raise OptimizerError(f"{what}: param_groups[{i}] of the state dict is not a "
                                     "group (a dict with 'params')")
            if len(saved["params"]) != len(group["params"]):
                raise OptimizerError(f"{what}: param_groups[{i}] has {len(saved['params'])} "
                                     f"tensors in the state dict, {len(group['params'])} here")
            tensor_of.update(zip(saved["params"], group["params"]))
            missing = sorted(set(self.defaults) - set(saved))
            if missing:
                raise OptimizerError(f"{what}: param_groups[{i}] lacks {missing}: was the state "
                                     f"dict saved by another optimizer than {self._name}?")
            loaded = {key: _copied(value) for key, value in saved.items() if key != "params"}
            self._check_group(loaded, f" (param_groups[{i}] of the state dict)")
            groups.append({"params": group["params"], **loaded})
        state = _TensorStates(self.param_groups)
        for index, saved in dict(state_dict["state"]).items():
            t = tensor_of.get(index)
            if t is None:
                raise OptimizerError(f"{what}: the state dict has a state for tensor {index!r}, "
                                     "which no parameter group lists")
            state[t] = {key: self._loaded_value(what, t, index, key, value)
                        for key, value in saved.items()}
        self.param_groups[:] = groups
        self.state = state

    def _loaded_value(self, what: str, t, index, key, value):
        value = _copied(value)
        if not _is_array(value):
            return value
        shape, dtype = shape_of(t.data), dtype_of(t.data)
        if self._complex_as_pairs and dtype.kind == "c":
            shape, dtype = shape + (2,), np.empty(0, dtype).real.dtype
        if tuple(value.shape) != shape:
            raise OptimizerError(f"{what}: state[{index!r}][{key!r}] has shape "
                                 f"{tuple(value.shape)}, but the tensor it belongs to has shape "
                                 f"{shape_of(t.data)}")
        if dtype.kind == "f" and np.dtype(value.dtype).kind == "f" and value.dtype != dtype:
            value = value.astype(dtype)     # as torch: floating state in the tensor's dtype
        return value

    def __repr__(self) -> str:
        n, k = len(self.tensors), len(self.param_groups)
        return f"{type(self).__name__}({n} tensors" + (f" in {k} groups)" if k > 1 else ")")


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

    ``tensors`` may be parameter groups, as torch's: dicts with ``"params"`` and the
    hyperparameters that differ from the constructor's.

    >>> v = tnp.tensor([1.0], requires_grad=True)
    >>> opt = SGD([{"params": [w]}, {"params": [v], "lr": 0.5}], lr=0.1)
    >>> [group["lr"] for group in opt.param_groups]
    [0.1, 0.5]
    """

    _name = "optim.SGD"
    lr = _GroupValue()
    momentum = _GroupValue()
    dampening = _GroupValue()
    weight_decay = _GroupValue()
    nesterov = _GroupValue()

    def __init__(self, tensors, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False) -> None:
        super().__init__(tensors, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                   "weight_decay": weight_decay, "nesterov": nesterov})

    def _check_group(self, group: dict, where: str) -> None:
        self._check(where, lr=(group["lr"], 0.0, None), momentum=(group["momentum"], 0.0, None),
                    dampening=(group["dampening"], -math.inf, None),
                    weight_decay=(group["weight_decay"], 0.0, None))
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise OptimizerError(f"optim.SGD: Nesterov momentum requires a momentum and zero "
                                 f"dampening{where}")

    def _update(self, data, grad, state, group):
        weight_decay, momentum = group["weight_decay"], group["momentum"]
        if weight_decay:
            grad = grad + weight_decay * data
        if momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = grad.copy() if hasattr(grad, "copy") else grad + 0
            else:
                buf = momentum * buf + (1 - group["dampening"]) * grad
            state["momentum_buffer"] = buf
            grad = grad + momentum * buf if group["nesterov"] else buf
        return group["lr"] * grad


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
    >>> sorted(opt.state_dict()["state"][0])  # torch's names, and copies of the arrays
    ['exp_avg', 'exp_avg_sq', 'step']
    """

    _name = "optim.Adam"
    _complex_as_pairs = True
    lr = _GroupValue()
    betas = _GroupValue()
    eps = _GroupValue()
    weight_decay = _GroupValue()

    def __init__(self, tensors, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        super().__init__(tensors, {"lr": lr, "betas": betas, "eps": eps,
                                   "weight_decay": weight_decay})

    def _check_group(self, group: dict, where: str) -> None:
        betas = group["betas"]
        try:
            betas = tuple(betas)
        except TypeError:
            betas = (betas,)
        if len(betas) != 2:
            raise OptimizerError(f"{self._name}: betas must be a pair (beta1, beta2), got "
                                 f"{group['betas']!r}{where}")
        group["betas"] = betas
        self._check(where, lr=(group["lr"], 0.0, None), eps=(group["eps"], 0.0, None),
                    beta1=(betas[0], 0.0, 1.0), beta2=(betas[1], 0.0, 1.0),
                    weight_decay=(group["weight_decay"], 0.0, None))

    def _decay(self, data, grad, group):
        weight_decay = group["weight_decay"]
        return grad + weight_decay * data if weight_decay else grad

    def _update(self, data, grad, state, group):
        grad = self._decay(data, grad, group)
        b1, b2 = group["betas"]
        if not state:
            state.update(step=0, exp_avg=zeros_like(data), exp_avg_sq=zeros_like(data))
        state["step"] += 1
        step = state["step"]
        state["exp_avg"] = state["exp_avg"] + (1 - b1) * (grad - state["exp_avg"])
        state["exp_avg_sq"] = b2 * state["exp_avg_sq"] + (1 - b2) * _abs_sq_array(grad)
        step_size = group["lr"] / (1 - b1 ** step)
        denom = state["exp_avg_sq"] ** 0.5 / math.sqrt(1 - b2 ** step) + group["eps"]
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

    def _decay(self, data, grad, group):
        return grad

    def _update(self, data, grad, state, group):
        step = super()._update(data, grad, state, group)
        weight_decay = group["weight_decay"]
        return group["lr"] * weight_decay * data + step if weight_decay else step


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
    lr = _GroupValue()
    alpha = _GroupValue()
    eps = _GroupValue()
    weight_decay = _GroupValue()
    momentum = _GroupValue()
    centered = _GroupValue()

    def __init__(self, tensors, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0,
                 centered: bool = False) -> None:
        super().__init__(tensors, {"lr": lr, "alpha": alpha, "eps": eps,
                                   "weight_decay": weight_decay, "momentum": momentum,
                                   "centered": centered})

    def _check_group(self, group: dict, where: str) -> None:
        self._check(where, lr=(group["lr"], 0.0, None), alpha=(group["alpha"], 0.0, None),
                    eps=(group["eps"], 0.0, None), momentum=(group["momentum"], 0.0, None),
                    weight_decay=(group["weight_decay"], 0.0, None))

    def _update(self, data, grad, state, group):
        weight_decay, momentum = group["weight_decay"], group["momentum"]
        if weight_decay:
            grad = grad + weight_decay * data
        if not state:
            state["square_avg"] = zeros_like(data)
        alpha = group["alpha"]
        state["square_avg"] = alpha * state["square_avg"] + (1 - alpha) * _abs_sq_array(grad)
        mean_square = state["square_avg"]
        if group["centered"]:
            # created when first needed: a group may turn centered (or momentum) on later
            grad_avg = state.get("grad_avg")
            if grad_avg is None:
                grad_avg = zeros_like(data)
            state["grad_avg"] = grad_avg + (1 - alpha) * (grad - grad_avg)
            mean_square = mean_square - _abs_sq_array(state["grad_avg"])
        avg = mean_square ** 0.5 + group["eps"]
        if momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = zeros_like(data)
            state["momentum_buffer"] = momentum * buf + grad / avg
            return group["lr"] * state["momentum_buffer"]
        return group["lr"] * grad / avg


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


# --- torch.optim.lr_scheduler: learning rates that change with the epochs ---------------------


class LRScheduler:
    """torch's ``LRScheduler``: changes the ``"lr"`` of each of an eager optimizer's
    ``param_groups``. ``step()`` (after the optimizer's ``step()``, once an epoch or an
    iteration) advances ``last_epoch`` and sets the learning rates :meth:`get_lr` computes;
    :meth:`get_last_lr` returns them. Making a scheduler records each group's
    ``"initial_lr"`` (its ``base_lrs``); ``last_epoch >= 0`` resumes, and needs them.
    Subclasses define ``get_lr()``, torch's recursive form (from the groups' current
    ``"lr"``, so that schedulers compose), and ``_get_closed_form_lr()`` when they have one.
    """

    def __init__(self, optimizer, last_epoch: int = -1) -> None:
        what = f"lr_scheduler.{type(self).__name__}"
        if not isinstance(optimizer, _TensorOptimizer):
            raise TensorTypeError(f"{what} schedules an optimizer of tnp.optim (SGD, Adam, ...), "
                                  f"got a {type(optimizer).__name__}")
        if not isinstance(last_epoch, numbers.Integral) or isinstance(last_epoch, bool) \
                or last_epoch < -1:
            raise OptimizerError(f"{what}: last_epoch must be an integer >= -1 (-1 starts), got "
                                 f"{last_epoch!r}")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise OptimizerError(
                        f"{what}: param_groups[{i}] has no 'initial_lr', which resuming with "
                        f"last_epoch={last_epoch} needs: load the optimizer's state dict saved "
                        "while a scheduler ran, or start with last_epoch=-1")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def _groups(self) -> list:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.base_lrs):
            raise OptimizerError(f"lr_scheduler.{type(self).__name__}: the optimizer has "
                                 f"{len(groups)} parameter groups, the scheduler was made for "
                                 f"{len(self.base_lrs)} (add groups before making schedulers)")
        return groups

    def get_lr(self) -> list:
        """The learning rates of the groups at ``last_epoch`` (called by :meth:`step`)."""
        raise NotImplementedError

    def get_last_lr(self) -> list:
        """The learning rates the last :meth:`step` set, one per parameter group."""
        return list(self._last_lr)

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch and set the groups' learning rates (call it after the
        optimizer's ``step()``). ``epoch`` (deprecated in torch) jumps to that epoch."""
        if self._step_count == 1 and not self.optimizer._steps:
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`: "
                          "call them in the opposite order, `optimizer.step()` before "
                          "`lr_scheduler.step()`, or the first value of the learning rate "
                          "schedule is skipped (as in PyTorch)", UserWarning, stacklevel=2)
        self._step_count += 1
        groups = self._groups()
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            warnings.warn("The epoch parameter in `scheduler.step()` is deprecated (as in "
                          "PyTorch): call `scheduler.step()` without it", UserWarning,
                          stacklevel=2)
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in groups]

    def state_dict(self) -> dict:
        """torch's: every attribute but the optimizer (copies)."""
        return {key: copy.deepcopy(value) for key, value in self.__dict__.items()
                if key != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        """Take the attributes a :meth:`state_dict` saved (copies)."""
        if not isinstance(state_dict, dict):
            raise OptimizerError(f"lr_scheduler.{type(self).__name__}.load_state_dict: expected "
                                 f"the dict state_dict() returns, got a "
                                 f"{type(state_dict).__name__}")
        self.__dict__.update(copy.deepcopy(state_dict))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch})"


def _scheduler_check(what: str, name: str, value, *, integer: bool = False,
                     positive: bool = False) -> None:
    kind = numbers.Integral if integer else numbers.Real
    if not isinstance(value, kind) or isinstance(value, bool) or (positive and value <= 0):
        wanted = ("a positive " if positive else "a ") + ("integer" if integer else "real number")
        raise OptimizerError(f"lr_scheduler.{what}: {name} must be {wanted}, got {value!r}")


class LambdaLR(LRScheduler):
    """torch's ``LambdaLR``: each group's learning rate is its initial one times
    ``lr_lambda(epoch)`` (one function, or a list of one per group).

    >>> import primitives.tensor as tnp
    >>> opt = SGD([tnp.tensor([1.0], requires_grad=True)], lr=0.5)
    >>> scheduler = LambdaLR(opt, lambda epoch: 1 / (1 + epoch))
    >>> for _ in range(3):
    ...     opt.step(); scheduler.step()
    >>> scheduler.get_last_lr(), scheduler.last_epoch
    ([0.125], 3)
    """

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1) -> None:
        groups = getattr(optimizer, "param_groups", [])
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(groups):
                raise OptimizerError(f"lr_scheduler.LambdaLR: expected {len(groups)} "
                                     f"lr_lambdas (one per parameter group), got "
                                     f"{len(lr_lambda)}")
            lambdas = list(lr_lambda)
        else:
            lambdas = [lr_lambda] * len(groups)
        for fn in lambdas:
            if not callable(fn):
                raise OptimizerError(f"lr_scheduler.LambdaLR: lr_lambda must be a function of "
                                     f"the epoch (or a list of them), got a "
                                     f"{type(fn).__name__}")
        self.lr_lambdas = lambdas
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        return [base_lr * fn(self.last_epoch)
                for fn, base_lr in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self) -> dict:
        """As torch: the functions are not saved, only the attributes of callable objects."""
        state = {key: copy.deepcopy(value) for key, value in self.__dict__.items()
                 if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType)
                               else copy.deepcopy(fn.__dict__) for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        saved = state.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        super().load_state_dict(state)
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                fn.__dict__.update(copy.deepcopy(attributes))


class StepLR(LRScheduler):
    """torch's ``StepLR``: the learning rates times ``gamma`` every ``step_size`` epochs.

    >>> import primitives.tensor as tnp
    >>> opt = SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> scheduler = StepLR(opt, step_size=2, gamma=0.5)
    >>> lrs = []
    >>> for _ in range(5):
    ...     lrs.append(opt.param_groups[0]["lr"]); opt.step(); scheduler.step()
    >>> lrs
    [1.0, 1.0, 0.5, 0.5, 0.25]
    """

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        _scheduler_check("StepLR", "step_size", step_size, integer=True, positive=True)
        _scheduler_check("StepLR", "gamma", gamma)
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma for group in groups]

    def _get_closed_form_lr(self) -> list:
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """torch's ``MultiStepLR``: the learning rates times ``gamma`` at each of the
    ``milestones`` (epochs; one listed twice decays twice).

    >>> import primitives.tensor as tnp
    >>> opt = SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> scheduler = MultiStepLR(opt, milestones=[1, 3], gamma=0.5)
    >>> for _ in range(3):
    ...     opt.step(); scheduler.step()
    >>> scheduler.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, milestones, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        if isinstance(milestones, (numbers.Number, str)):
            raise OptimizerError(f"lr_scheduler.MultiStepLR: milestones must be a list of "
                                 f"epochs, got {milestones!r}")
        milestones = list(milestones)
        for m in milestones:
            _scheduler_check("MultiStepLR", "a milestone", m, integer=True)
        _scheduler_check("MultiStepLR", "gamma", gamma)
        self.milestones = collections.Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        groups = self.optimizer.param_groups
        if self.last_epoch not in self.milestones:
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch]
                for group in groups]

    def _get_closed_form_lr(self) -> list:
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect.bisect_right(milestones, self.last_epoch)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """torch's ``ExponentialLR``: the learning rates times ``gamma`` every epoch.

    >>> import primitives.tensor as tnp
    >>> opt = SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> scheduler = ExponentialLR(opt, gamma=0.5)
    >>> opt.step(); scheduler.step(); opt.step(); scheduler.step()
    >>> scheduler.get_last_lr()
    [0.25]
    """

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1) -> None:
        _scheduler_check("ExponentialLR", "gamma", gamma)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        groups = self.optimizer.param_groups
        if self._is_initial:        # resuming: the groups already have the epoch's rates
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma for group in groups]

    def _get_closed_form_lr(self) -> list:
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """torch's ``CosineAnnealingLR``: the learning rates follow
    ``eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``, computed as torch
    does, recursively from the groups' current rates (so it composes with other schedulers
    and matches torch's numbers); past ``T_max`` it climbs back (a cosine, no restart).

    >>> import primitives.tensor as tnp
    >>> opt = SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> scheduler = CosineAnnealingLR(opt, T_max=4)
    >>> for _ in range(2):
    ...     opt.step(); scheduler.step()
    >>> round(scheduler.get_last_lr()[0], 12)              # halfway: (1 + cos(pi / 2)) / 2
    0.5
    """

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        _scheduler_check("CosineAnnealingLR", "T_max", T_max, positive=True)
        _scheduler_check("CosineAnnealingLR", "eta_min", eta_min)
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        groups, eta_min, t_max = self.optimizer.param_groups, self.eta_min, self.T_max
        if self._is_initial:
            return [group["lr"] for group in groups]
        if self._step_count == 1 and self.last_epoch > 0:
            return [eta_min + (base_lr - eta_min) * (1 + math.cos(self.last_epoch * math.pi
                                                                   / t_max)) / 2
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - t_max) % (2 * t_max) == 0:
            return [group["lr"] + (base_lr - eta_min) * (1 - math.cos(math.pi / t_max)) / 2
                    for base_lr, group in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / t_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / t_max))
                * (group["lr"] - eta_min) + eta_min for group in groups]

    def _get_closed_form_lr(self) -> list:
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


def _namespace(name: str, doc: str, members: list) -> types.ModuleType:
    """A submodule of this module made of some of its names (``optim.lr_scheduler``, as
    ``torch.optim.lr_scheduler``), importable as ``primitives.tensor.optim.<name>``."""
    module = types.ModuleType(f"{__name__}.{name}", doc)
    for member in members:
        setattr(module, member.__name__, member)
    module.__all__ = [member.__name__ for member in members]
    sys.modules[module.__name__] = module
    return module


lr_scheduler = _namespace("lr_scheduler", """torch.optim.lr_scheduler's schedulers for the eager
optimizers of :mod:`primitives.tensor.optim`: :class:`LRScheduler` (the base),
:class:`LambdaLR`, :class:`StepLR`, :class:`MultiStepLR`, :class:`ExponentialLR`,
:class:`CosineAnnealingLR`. They act through the optimizer's ``param_groups``.""",
                          [LRScheduler, LambdaLR, StepLR, MultiStepLR, ExponentialLR,
                           CosineAnnealingLR])
