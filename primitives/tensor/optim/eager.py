"""torch.optim's optimizers for eager ``Tensor`` leaves: :class:`SGD`, :class:`Adam`,
:class:`AdamW`, :class:`RMSprop`, with parameter groups, per-tensor state and state dicts
(:class:`Optimizer`, their base), and ``torch.nn.utils``' gradient clipping,
:func:`clip_grad_norm_` and :func:`clip_grad_value_`. See :mod:`primitives.tensor.optim`.

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
import types
import warnings
from typing import Callable

import numpy as np

from primitives.tensor.backends import library_of, to_host, to_library
from primitives.tensor.core import dtype_of, shape_of
from primitives.tensor.numpy.creation import zeros_like
from primitives.tensor.eager.frontend import Tensor
from primitives.tensor.errors import TensorNotSupportedError, TensorTypeError
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

    # options added after state dicts were first saved: one saved without them loads with
    # their defaults
    _added_options = ("maximize", "amsgrad", "decoupled_weight_decay")

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
        for group in self.param_groups:         # all checked before any tensor is updated
            for t in group["params"]:
                state = states.get(t)
                if state and t.grad is not None:
                    self._check_state_shapes(t, state)
        for group in self.param_groups:
            for t in group["params"]:
                if t.grad is None:
                    continue
                state = states.get(t)
                if state is None:
                    state = states[t] = {}
                data = t.data                   # a writable handle (copy-on-write)
                grad = _values(t.grad)
                if group.get("maximize"):       # torch's maximize: ascend, -grad from here on
                    grad = -grad
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

    def _check_state_shapes(self, t, state: dict) -> None:
        """A tensor's state arrays have its shape: after ``t.data = other`` of another shape
        they would broadcast into a state shared between elements (PyTorch raises there)."""
        shape = shape_of(t.data)
        if self._complex_as_pairs and dtype_of(t.data).kind == "c":
            shape = shape + (2,)
        for key, value in state.items():
            if _is_array(value) and tuple(value.shape) != shape:
                raise OptimizerError(
                    f"{self._name}.step: the state {key!r} of a tensor has shape "
                    f"{tuple(value.shape)}, the tensor now has shape {shape_of(t.data)} (was its "
                    ".data rebound to another shape?); start its state anew with "
                    "opt.state[t].clear() (or del opt.state[t])")

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
            missing = sorted(set(self.defaults) - set(saved) - set(self._added_options))
            if missing:
                raise OptimizerError(f"{what}: param_groups[{i}] lacks {missing}: was the state "
                                     f"dict saved by another optimizer than {self._name}?")
            loaded = {key: _copied(value) for key, value in saved.items() if key != "params"}
            for key in self._added_options:     # a state dict saved before they existed
                if key in self.defaults:
                    loaded.setdefault(key, self.defaults[key])
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
        library = library_of(t.data)
        if library_of(value) is not library:
            # a state saved over another library's tensors (PyTorch's own state dict, say):
            # its arrays become arrays of this tensor's library, a 0-d one (PyTorch's "step")
            # a number; what has the wrong shape then raises below. A 0-d tensor's "step" too:
            # kept a float32 array, it would round the bias corrections to float32
            host = to_host(value)
            if host.shape == () and (shape_of(t.data) != () or key == "step"):
                number = host.item()
                return int(number) if float(number).is_integer() else number
            value = to_library(np.array(host), library, t.data)
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
    maximize = _GroupValue()

    def __init__(self, tensors, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *,
                 maximize: bool = False) -> None:
        super().__init__(tensors, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                   "weight_decay": weight_decay, "nesterov": nesterov,
                                   "maximize": maximize})

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
    at step ``k``; ``weight_decay`` adds ``weight_decay * t`` to the gradient (L2, as torch),
    or with ``decoupled_weight_decay=True`` scales ``t`` by ``1 - lr * weight_decay`` (AdamW).
    ``amsgrad=True`` divides by the largest ``v`` so far (``state["max_exp_avg_sq"]``);
    ``maximize=True`` (every optimizer here, as torch's) ascends: the gradient is negated.

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
    amsgrad = _GroupValue()
    maximize = _GroupValue()
    decoupled_weight_decay = _GroupValue()

    def __init__(self, tensors, lr: float = 1e-3, betas: tuple = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 maximize: bool = False, decoupled_weight_decay: bool = False) -> None:
        super().__init__(tensors, {"lr": lr, "betas": betas, "eps": eps,
                                   "weight_decay": weight_decay, "amsgrad": amsgrad,
                                   "maximize": maximize,
                                   "decoupled_weight_decay": decoupled_weight_decay})

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

    def _update(self, data, grad, state, group):
        weight_decay = group["weight_decay"]
        decoupled = group.get("decoupled_weight_decay")
        if weight_decay and not decoupled:
            grad = grad + weight_decay * data               # L2: into the gradient
        b1, b2 = group["betas"]
        if not state:
            state.update(step=0, exp_avg=zeros_like(data), exp_avg_sq=zeros_like(data))
        state["step"] += 1
        step = state["step"]
        state["exp_avg"] = state["exp_avg"] + (1 - b1) * (grad - state["exp_avg"])
        state["exp_avg_sq"] = b2 * state["exp_avg_sq"] + (1 - b2) * _abs_sq_array(grad)
        second = state["exp_avg_sq"]
        if group.get("amsgrad"):
            # torch's AMSGrad: the largest second moment so far (bias-corrected at this step)
            kept = state.get("max_exp_avg_sq")
            second = state["max_exp_avg_sq"] = \
                library_of(second).copy(second) if kept is None else \
                library_of(second).xp.maximum(kept, second)
        step_size = group["lr"] / (1 - b1 ** step)
        denom = second ** 0.5 / math.sqrt(1 - b2 ** step) + group["eps"]
        update = step_size * state["exp_avg"] / denom
        if weight_decay and decoupled:                      # AdamW's: t *= 1 - lr * wd
            update = group["lr"] * weight_decay * data + update
        return update


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
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False) -> None:
        super().__init__(tensors, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)


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
    maximize = _GroupValue()

    def __init__(self, tensors, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0,
                 centered: bool = False, *, maximize: bool = False) -> None:
        super().__init__(tensors, {"lr": lr, "alpha": alpha, "eps": eps,
                                   "weight_decay": weight_decay, "momentum": momentum,
                                   "centered": centered, "maximize": maximize})

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


# --- torch.nn.utils' gradient clipping ----------------------------------------------------


class NonFiniteNormError(OptimizerError, RuntimeError):
    """:func:`clip_grad_norm_` with ``error_if_nonfinite=True`` found a nan or infinite total
    norm. An :class:`OptimizerError` (so a ``TiduError`` and a ``ValueError``) and, as what
    torch raises there, a ``RuntimeError``."""


def _grads_of(parameters, what: str) -> list:
    """``parameters`` (a Tensor, or an iterable of them: a generator is read once) as a list,
    with torch's warning for an empty generator."""
    if isinstance(parameters, Tensor):
        return [parameters]
    if isinstance(parameters, (dict, str, bytes)) or _is_array(parameters):
        raise TensorTypeError(f"{what}: parameters must be a Tensor or an iterable of Tensors, "
                              f"got a {type(parameters).__name__}")
    is_generator = isinstance(parameters, types.GeneratorType)
    try:
        tensors = list(parameters)
    except TypeError:
        raise TensorTypeError(f"{what}: parameters must be a Tensor or an iterable of Tensors, "
                              f"got a {type(parameters).__name__}") from None
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TensorTypeError(f"{what}: parameters must be Tensors (whose .grad is "
                                  f"clipped), got a {type(t).__name__}")
    if is_generator and not tensors:
        warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                      stacklevel=3)
    return tensors


def _float(value, name: str, what: str) -> float:
    """``float(value)``, as torch converts ``max_norm``, ``norm_type`` and ``clip_value``."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TensorTypeError(f"{what}: {name} must be a real number, got "
                              f"{value!r}") from None


def _real_dtype(dtype) -> np.dtype:
    """The dtype of a norm of an array of ``dtype``: float32 for complex64, and so on."""
    return np.empty(0, dtype).real.dtype


def _opmath(dtype: np.dtype) -> np.dtype:
    """The dtype torch computes in for ``dtype`` (float32 for float16, else ``dtype``)."""
    return np.dtype(np.float32) if dtype.itemsize < 4 else dtype


def _vector_norm(g, p: float, what: str) -> np.ndarray:
    """torch's ``linalg.vector_norm(g, p)`` of an array of any library, as a 0-d NumPy array
    of ``g``'s real dtype. The sum of powers is taken in float64, then rounded to the
    precision torch accumulates in (float32 for float16 and float32: it overflows to inf as
    torch's does), and the root rounded to the real dtype."""
    dtype = dtype_of(g)
    if dtype.kind not in "fc":
        raise TensorTypeError(f"{what}: gradients must be floating point or complex, got "
                              f"dtype {dtype}")
    real = _real_dtype(dtype)
    if math.prod(shape_of(g)) == 0:
        if p < 0 or p == math.inf:
            raise OptimizerError(f"{what}: the norm of order {p} of an empty gradient (a tensor "
                                 "of size 0) is undefined, as in torch (no identity for it)")
        return np.zeros((), real)
    xp = library_of(g).xp
    squares = None
    if dtype.kind == "c":
        # |z| as torch's: correctly rounded (NumPy's complex abs is off by an ulp at times)
        re, im = xp.astype(xp.real(g), np.float64), xp.astype(xp.imag(g), np.float64)
        squares = re * re + im * im             # exact for complex64
        a = xp.sqrt(squares) if real.itemsize < 8 else xp.hypot(re, im)
    else:
        a = xp.astype(xp.abs(g), np.float64)
    if p == math.inf:
        value = to_host(xp.max(a))
    elif p == -math.inf:
        value = to_host(xp.min(a))
    elif p == 0:                                # torch's "0-norm": the count of nonzeros
        value = np.float64(to_host(xp.sum(xp.astype(a != 0, np.int64))))
    else:
        if p == 2:
            powers = a * a if squares is None else squares
        else:
            powers = a if p == 1 else a ** p
        total = np.float64(np.asarray(to_host(xp.sum(powers))).astype(_opmath(real)))
        value = total if p == 1 else np.sqrt(total) if p == 2 else total ** (1.0 / p)
    return np.asarray(value).astype(real)


def _total_norm(grads: list, p: float, what: str) -> np.ndarray:
    """torch's total norm: the norm of the gradients' norms, in their promoted real dtype."""
    if not grads:
        return np.zeros((), np.float64)     # torch: its default dtype (float32); tidu's: float64
    norms = [_vector_norm(g, p, what) for g in grads]
    dtype = np.result_type(*norms)
    return _vector_norm(np.stack([n.astype(dtype) for n in norms]), p, what)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """``torch.nn.utils.clip_grad_norm_``: scale the gradients of ``parameters`` so that their
    total norm is at most ``max_norm``; return the total norm from before.

    ``parameters`` is a Tensor or an iterable of Tensors (a generator is read once); those
    whose ``.grad`` is ``None`` are skipped. The total norm of order ``norm_type`` (a number;
    ``inf`` the largest ``|g|``) is torch's: the norm of the gradients' own norms, which is
    the norm of all of them concatenated (for ``norm_type=0``, as torch, it counts the
    gradients that have a nonzero entry, not the nonzero entries). Each gradient is then
    multiplied by ``min(max_norm / (total_norm + 1e-6), 1.0)``, computed as torch computes
    it (``1 / (total_norm + 1e-6)``, times ``max_norm``, in the norm's dtype), so that from
    the same total norm the gradients come out bit for bit as torch's.

    Returns a ``Tensor`` without grad holding a 0-d NumPy array, in the dtype torch gives:
    the gradients' real dtype (float32 for float32 or complex64 gradients), promoted if
    they differ (float64 if one is float64). Norms are summed in float64, so a float32 norm
    may differ from torch's (which sums in float32) in its last bits. With no gradients the
    norm is ``0.0`` in float64, tidu's default dtype (torch: its default, float32).

    A nan or infinite total norm raises :class:`NonFiniteNormError` when
    ``error_if_nonfinite``; otherwise, as torch, the gradients are scaled by the
    coefficient it gives (nan, or 0 for an infinite norm, which turns inf entries to nan).

    Differences from torch, on purpose:

    - "In place" is tidu's way of writing a gradient: ``t.grad`` is *assigned* a new array
      (as ``zero_grad`` does), never written into, so arrays the caller holds (an earlier
      ``t.grad``, the ``Gradients`` that ``backward`` returned, an array assigned to two
      tensors' ``.grad``) keep their values. A tensor listed twice is scaled twice, as in
      torch.
    - A gradient that is a ``Tensor`` with history (``backward(create_graph=True)``) is
      replaced by its clipped values, an array without history (torch scales it in place
      under ``no_grad``).
    - ``foreach`` is accepted and ignored (one implementation).

    Gradients may be of mixed dtypes (each is scaled in its own dtype), complex (their
    ``|g|``), or arrays of another library (a Tensor holding PyTorch data: its gradient stays
    a PyTorch tensor).

    >>> import primitives.tensor as tnp
    >>> w = tnp.tensor([3.0, 0.0], requires_grad=True)
    >>> b = tnp.tensor([4.0], requires_grad=True)
    >>> unused = tnp.tensor([1.0], requires_grad=True)            # .grad None: skipped
    >>> _ = (tnp.sum(w * w) + tnp.sum(b * b)).backward()          # grads [6, 0] and [8]
    >>> total = clip_grad_norm_([w, b, unused], max_norm=1.0)
    >>> total.item()                                               # sqrt(36 + 64)
    10.0
    >>> w.grad, b.grad                                             # times 1 / (10 + 1e-6)
    (array([0.59999994, 0.        ]), array([0.79999992]))
    >>> clip_grad_norm_(w, max_norm=5.0, norm_type=float("inf")).item()   # already small
    0.599999940000006
    """
    what = "optim.clip_grad_norm_"
    tensors = _grads_of(parameters, what)
    max_norm = _float(max_norm, "max_norm", what)
    norm_type = _float(norm_type, "norm_type", what)
    grads = [_values(g) for g in (t.grad for t in tensors) if g is not None]
    with np.errstate(all="ignore"):
        total = _total_norm(grads, norm_type, what)
        if error_if_nonfinite and not np.isfinite(total):
            raise NonFiniteNormError(
                f"{what}: the total norm of order {norm_type} of the gradients is "
                f"{float(total)}, non-finite, so they cannot be clipped; pass "
                "error_if_nonfinite=False to scale them by it anyway (as torch)")
        if grads:
            dtype = total.dtype
            op = _opmath(dtype).type
            denominator = dtype.type(op(total) + op(1e-6))
            coef = dtype.type(op(dtype.type(op(1.0) / op(denominator))) * op(max_norm))
            coef = np.minimum(coef, dtype.type(1.0))          # nan stays nan, as torch.clamp
            for t in tensors:
                grad = t.grad
                if grad is not None:
                    t.grad = _scaled(_values(grad), coef)
    return Tensor(total)


def _scaled(g, coef):
    """``g * coef`` in ``g``'s dtype, as torch's ``g.mul_(coef)``: ``coef`` rounded to the
    dtype ``g`` is computed in (float32 for float16), the product rounded to ``g``'s."""
    dtype = dtype_of(g)
    real = _real_dtype(dtype)
    op = _opmath(real)
    factor = float(op.type(coef))             # exact in that dtype: the library rounds nothing
    if op == real:
        return g * factor
    xp = library_of(g).xp
    return xp.astype(xp.astype(g, op) * factor, dtype)


def clip_grad_value_(parameters, clip_value: float, foreach: bool | None = None) -> None:
    """``torch.nn.utils.clip_grad_value_``: clip every gradient of ``parameters`` to
    ``[-clip_value, clip_value]`` (nan entries stay nan; a negative ``clip_value`` sets every
    entry to it, as torch's ``clamp_min(-v)`` then ``clamp_max(v)``). Returns ``None``.

    ``parameters`` is a Tensor or an iterable of Tensors (a generator is read once); those
    whose ``.grad`` is ``None`` are skipped. As in :func:`clip_grad_norm_`, each ``.grad`` is
    assigned a new array (arrays the caller holds keep their values), a gradient with
    history becomes its clipped values, and ``foreach`` is ignored. Complex gradients are a
    :class:`~primitives.tensor.TensorNotSupportedError`, as torch's ``NotImplementedError``.

    >>> import primitives.tensor as tnp
    >>> w = tnp.tensor([1.0, -2.0, 0.5], requires_grad=True)
    >>> _ = tnp.sum(w * w).backward()                          # grad [2, -4, 1]
    >>> clip_grad_value_([w], clip_value=1.5)
    >>> w.grad
    array([ 1.5, -1.5,  1. ])
    """
    what = "optim.clip_grad_value_"
    tensors = _grads_of(parameters, what)
    clip_value = _float(clip_value, "clip_value", what)
    for t in tensors:
        grad = t.grad
        if grad is None:
            continue
        g = _values(grad)
        dtype = dtype_of(g)
        if dtype.kind == "c":
            raise TensorNotSupportedError(f"{what}: complex gradients have no order to clip "
                                          "in (torch: clamp is not supported for complex "
                                          "types); clip_grad_norm_ takes them")
        if dtype.kind != "f":
            raise TensorTypeError(f"{what}: gradients must be floating point, got dtype "
                                  f"{dtype}")
        xp = library_of(g).xp
        if math.isnan(clip_value):
            g = xp.full_like(g, math.nan)         # torch.clamp with a nan bound
        else:
            g = xp.where(g < -clip_value, -clip_value, g)
            g = xp.where(g > clip_value, clip_value, g)
        t.grad = g
