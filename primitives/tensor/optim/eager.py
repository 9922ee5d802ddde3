"""torch.optim's optimizers for eager ``Tensor`` leaves: :class:`SGD`, :class:`Adam`,
:class:`AdamW`, :class:`RMSprop`, with parameter groups, per-tensor state and state dicts
(:class:`Optimizer`, their base). See :mod:`primitives.tensor.optim`.

>>> import primitives.tensor as tnp
>>> w = tnp.tensor([1.0], requires_grad=True)
>>> opt = SGD([w], lr=0.25)
>>> _ = tnp.sum(w * w).backward()
>>> opt.step()
>>> w.data
array([0.5])
"""

from __future__ import annotations

import copy
import math
import numbers
from typing import Callable

import numpy as np

from primitives.tensor.backends import library_of
from primitives.tensor.core import dtype_of, shape_of
from primitives.tensor.numpy.creation import zeros_like
from primitives.tensor.eager.frontend import Tensor
from primitives.tensor.errors import TensorTypeError
from primitives.tensor.optim.functional import OptimizerError


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


class Optimizer:
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


class SGD(Optimizer):
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

    def __init__(self, tensors, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
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


class Adam(Optimizer):
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


class RMSprop(Optimizer):
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
