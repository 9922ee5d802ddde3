"""torch.optim.lr_scheduler's schedulers for the eager optimizers of
:mod:`primitives.tensor.optim`: :class:`LRScheduler` (the base), :class:`LambdaLR`,
:class:`StepLR`, :class:`MultiStepLR`, :class:`ExponentialLR`, :class:`CosineAnnealingLR`,
its restarting form :class:`CosineAnnealingWarmRestarts`, :class:`PolynomialLR`, the
warm-ups :class:`ConstantLR` and :class:`LinearLR`, the 1cycle policy :class:`OneCycleLR`,
the cyclical :class:`CyclicLR`, :class:`ReduceLROnPlateau`, which follows a metric, and
the combinations :class:`SequentialLR` (one scheduler after another, at milestones) and
:class:`ChainedScheduler` (several at once). They act through the optimizer's
``param_groups``.

>>> import primitives.tensor as tnp
>>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
>>> scheduler = StepLR(opt, step_size=1, gamma=0.5)
>>> opt.step(); scheduler.step()
>>> scheduler.get_last_lr()
[0.5]
"""

from __future__ import annotations

import bisect
import collections
import collections.abc
import copy
import math
import numbers
import types
import warnings

from primitives.tensor.errors import TensorTypeError
from primitives.tensor.optim.eager import Optimizer
from primitives.tensor.optim.functional import OptimizerError

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR",
           "CosineAnnealingLR", "CosineAnnealingWarmRestarts", "PolynomialLR", "ConstantLR",
           "LinearLR", "OneCycleLR", "CyclicLR", "ReduceLROnPlateau", "SequentialLR",
           "ChainedScheduler"]


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
        _check_optimizer(type(self).__name__, optimizer)
        _check_last_epoch(type(self).__name__, last_epoch)
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
        self._initial_step()

    def _initial_step(self) -> None:
        # torch's: the constructor's step (also SequentialLR's, for the scheduler it starts)
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
        if epoch is not None:
            warnings.warn("The epoch parameter in `scheduler.step()` is deprecated (as in "
                          "PyTorch): call `scheduler.step()` without it", UserWarning,
                          stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None) -> None:
        # torch's: the next epoch's rates by get_lr(), or epoch's by the closed form when
        # there is one (SequentialLR starts a scheduler at its milestone with epoch 0)
        groups = self._groups()
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in groups]

    def state_dict(self) -> dict:
        """torch's: every attribute but the optimizer (copies)."""
        return self._state()

    def _state(self, *skip: str) -> dict:
        # copies of the attributes but the optimizer and `skip`
        return {key: copy.deepcopy(value) for key, value in self.__dict__.items()
                if key != "optimizer" and key not in skip}

    def load_state_dict(self, state_dict: dict) -> None:
        """Take the attributes a :meth:`state_dict` saved (copies)."""
        _check_state_dict(self, state_dict)
        self.__dict__.update(copy.deepcopy(state_dict))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch})"


def _check_optimizer(what: str, optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TensorTypeError(f"lr_scheduler.{what} schedules an optimizer of tnp.optim (SGD, "
                              f"Adam, ...), got a {type(optimizer).__name__}")


def _check_last_epoch(what: str, last_epoch) -> None:
    if not isinstance(last_epoch, numbers.Integral) or isinstance(last_epoch, bool) \
            or last_epoch < -1:
        raise OptimizerError(f"lr_scheduler.{what}: last_epoch must be an integer >= -1 (-1 "
                             f"starts), got {last_epoch!r}")


def _check_state_dict(scheduler, state_dict) -> None:
    if not isinstance(state_dict, dict):
        raise OptimizerError(f"lr_scheduler.{type(scheduler).__name__}.load_state_dict: "
                             f"expected the dict state_dict() returns, got a "
                             f"{type(state_dict).__name__}")


def _saved_attributes(fn):
    """torch's rule for a user's function in a state dict: a plain function (or lambda) is
    not saved (``None``); a callable object's attributes are (copies)."""
    return None if isinstance(fn, types.FunctionType) else copy.deepcopy(fn.__dict__)


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
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=0.5)
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
        state = self._state("lr_lambdas")
        state["lr_lambdas"] = [_saved_attributes(fn) for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        _check_state_dict(self, state_dict)
        state = dict(state_dict)
        saved = state.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        super().load_state_dict(state)
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                fn.__dict__.update(copy.deepcopy(attributes))


class StepLR(LRScheduler):
    """torch's ``StepLR``: the learning rates times ``gamma`` every ``step_size`` epochs.

    >>> import primitives.tensor as tnp
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
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
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
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
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
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
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
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


class ConstantLR(LRScheduler):
    """torch's ``ConstantLR``: the learning rates times ``factor`` for the first
    ``total_iters`` epochs, then back to where they were (a constant warm-up).

    >>> import primitives.tensor as tnp
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> scheduler = ConstantLR(opt, factor=0.25, total_iters=2)
    >>> lrs = []
    >>> for _ in range(4):
    ...     lrs.append(opt.param_groups[0]["lr"]); opt.step(); scheduler.step()
    >>> lrs
    [0.25, 0.25, 1.0, 1.0]
    """

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        _scheduler_check("ConstantLR", "factor", factor, positive=True)
        if factor > 1:
            raise OptimizerError(f"lr_scheduler.ConstantLR: factor must be in (0, 1], got "
                                 f"{factor!r} (0 would leave no rate to go back to)")
        _scheduler_check("ConstantLR", "total_iters", total_iters, integer=True, positive=True)
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in groups]
        if self.last_epoch != self.total_iters:
            return [group["lr"] for group in groups]
        return [group["lr"] * (1.0 / self.factor) for group in groups]

    def _get_closed_form_lr(self) -> list:
        back = self.last_epoch >= self.total_iters
        return [base_lr * (self.factor + back * (1 - self.factor)) for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """torch's ``LinearLR``: the learning rates times a factor that goes linearly from
    ``start_factor`` to ``end_factor`` over ``total_iters`` epochs, then stays (a linear
    warm-up, or decay), computed as torch does, from the groups' current rates.

    >>> import primitives.tensor as tnp
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> scheduler = LinearLR(opt, start_factor=0.25, total_iters=3)
    >>> lrs = []
    >>> for _ in range(5):
    ...     lrs.append(round(opt.param_groups[0]["lr"], 12)); opt.step(); scheduler.step()
    >>> lrs
    [0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1) -> None:
        _scheduler_check("LinearLR", "start_factor", start_factor, positive=True)
        _scheduler_check("LinearLR", "end_factor", end_factor)
        if start_factor > 1 or not 0 <= end_factor <= 1:
            raise OptimizerError(f"lr_scheduler.LinearLR: start_factor must be in (0, 1] and "
                                 f"end_factor in [0, 1], got {start_factor!r} and "
                                 f"{end_factor!r}")
        _scheduler_check("LinearLR", "total_iters", total_iters, integer=True, positive=True)
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        groups, epoch = self.optimizer.param_groups, self.last_epoch
        if epoch == 0:
            return [group["lr"] * self.start_factor for group in groups]
        if self._is_initial or epoch > self.total_iters:
            return [group["lr"] for group in groups]
        change = self.end_factor - self.start_factor
        ratio = 1.0 + change / (self.total_iters * self.start_factor + (epoch - 1) * change)
        return [group["lr"] * ratio for group in groups]

    def _get_closed_form_lr(self) -> list:
        # (in torch's order of operations: the same floats)
        factor = (self.start_factor + (self.end_factor - self.start_factor)
                  * min(self.total_iters, self.last_epoch) / self.total_iters)
        return [base_lr * factor for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    """torch's ``PolynomialLR``: the learning rates fall as ``base_lr * (1 - epoch /
    total_iters) ** power`` to 0 at ``total_iters``, then stay; computed as torch does,
    recursively from the groups' current rates (so it composes, with torch's floats).

    >>> import primitives.tensor as tnp
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> scheduler = PolynomialLR(opt, total_iters=4, power=2.0)
    >>> lrs = []
    >>> for _ in range(6):
    ...     lrs.append(round(opt.param_groups[0]["lr"], 12)); opt.step(); scheduler.step()
    >>> lrs                                   # (1 - epoch / 4) ** 2
    [1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0]
    """

    def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1) -> None:
        _scheduler_check("PolynomialLR", "total_iters", total_iters, integer=True,
                         positive=True)
        _scheduler_check("PolynomialLR", "power", power)
        if not power >= 0:
            raise OptimizerError(f"lr_scheduler.PolynomialLR: power must be >= 0, got "
                                 f"{power!r} (the rate would be 1 / 0 at total_iters)")
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        """This epoch's rates from the groups' current ones (torch's recursive form): each
        times ``((1 - epoch / total_iters) / (1 - (epoch - 1) / total_iters)) ** power``.

        >>> import primitives.tensor as tnp
        >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
        >>> scheduler = PolynomialLR(opt, total_iters=2)
        >>> opt.step(); scheduler.step(); scheduler.get_last_lr()
        [0.5]
        """
        groups, epoch, total = self.optimizer.param_groups, self.last_epoch, self.total_iters
        if self._is_initial or epoch > total:
            return [group["lr"] for group in groups]
        factor = ((1.0 - epoch / total) / (1.0 - (epoch - 1) / total)) ** self.power
        return [group["lr"] * factor for group in groups]

    def _get_closed_form_lr(self) -> list:
        return [base_lr * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base_lr in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """torch's ``CosineAnnealingWarmRestarts`` (SGDR): the learning rates follow
    ``eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2``, where ``T_cur``
    counts the epochs since the last restart and ``T_i`` is the period: ``T_0`` epochs at
    first, ``T_mult`` times longer after each restart, where the rates jump back to
    ``base_lr``. ``step(epoch)`` may take fractional epochs (``epoch + i / batches``, once a
    batch), as in torch.

    >>> import primitives.tensor as tnp
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> scheduler = CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
    >>> lrs = []
    >>> for _ in range(7):
    ...     lrs.append(round(opt.param_groups[0]["lr"], 12)); opt.step(); scheduler.step()
    >>> lrs                                   # periods of 2, then 4 epochs
    [1.0, 0.5, 1.0, 0.853553390593, 0.5, 0.146446609407, 1.0]
    """

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        what = "CosineAnnealingWarmRestarts"
        _scheduler_check(what, "T_0", T_0, integer=True, positive=True)
        _scheduler_check(what, "T_mult", T_mult, integer=True, positive=True)
        _scheduler_check(what, "eta_min", eta_min)
        self.T_0 = self.T_i = T_0
        self.T_mult, self.eta_min = T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        """The rates at ``T_cur`` of the period ``T_i`` (from ``base_lrs``, as torch).

        >>> import primitives.tensor as tnp
        >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
        >>> scheduler = CosineAnnealingWarmRestarts(opt, T_0=4)
        >>> scheduler.T_cur = 2; scheduler.get_lr()           # halfway down
        [0.5]
        """
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base_lr in self.base_lrs]

    def step(self, epoch=None) -> None:
        """Advance one epoch, or go to ``epoch`` (a number >= 0, fractional or not: the
        period and the time in it are worked out from ``T_0`` and ``T_mult``, as torch);
        not deprecated here, and stepping on from there counts from it, as in torch.

        >>> import primitives.tensor as tnp
        >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
        >>> scheduler = CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
        >>> opt.step(); scheduler.step(4.0)       # periods [0, 2), [2, 6): halfway in
        >>> round(scheduler.get_last_lr()[0], 12), scheduler.T_cur, scheduler.T_i
        (0.5, 2.0, 4)
        """
        groups = self._groups()
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            _scheduler_check("CosineAnnealingWarmRestarts.step", "epoch", epoch)
            if not 0 <= epoch < math.inf:
                raise OptimizerError(f"lr_scheduler.CosineAnnealingWarmRestarts.step: epoch "
                                     f"must be a finite number >= 0, got {epoch!r}")
            t_0, t_mult = self.T_0, self.T_mult
            if epoch >= t_0:
                if t_mult == 1:
                    self.T_cur = epoch % t_0
                else:       # n: the periods before epoch (in torch's order of operations)
                    n = int(math.log((epoch / t_0 * (t_mult - 1) + 1), t_mult))
                    self.T_cur = epoch - t_0 * (t_mult ** n - 1) / (t_mult - 1)
                    self.T_i = t_0 * t_mult ** n
            else:
                self.T_i = t_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in groups]


class _CyclesMomentum:
    """What OneCycleLR and CyclicLR share (torch's ``cycle_momentum``): the momentum they
    cycle is SGD's or RMSprop's ``"momentum"``, or Adam's first beta (``use_beta1``)."""

    def _check_momenta(self, what: str, optimizer, base_momentum, max_momentum) -> tuple:
        defaults = optimizer.defaults
        if "momentum" not in defaults and "betas" not in defaults:
            raise OptimizerError(f"lr_scheduler.{what}: cycle_momentum needs an optimizer "
                                 f"with a momentum or betas, {type(optimizer).__name__} "
                                 "has neither (pass cycle_momentum=False)")
        self.use_beta1 = "betas" in defaults
        groups = optimizer.param_groups
        return (_per_group(what, "base_momentum", base_momentum, groups),
                _per_group(what, "max_momentum", max_momentum, groups))

    def _start_momenta(self, groups: list, bases: list, tops: list) -> None:
        # (a fresh start: the momenta begin at the top; both kept in the groups, as torch)
        for group, base, top in zip(groups, bases, tops):
            self._set_momentum(group, top)
            group["max_momentum"], group["base_momentum"] = top, base

    def _set_momentum(self, group: dict, momentum: float) -> None:
        if self.use_beta1:
            group["betas"] = (momentum, *group["betas"][1:])
        else:
            group["momentum"] = momentum


class OneCycleLR(_CyclesMomentum, LRScheduler):
    """torch's ``OneCycleLR`` (the 1cycle policy), stepped once a batch: the learning rates
    rise from ``max_lr / div_factor`` to ``max_lr`` over the first ``pct_start`` of
    ``total_steps`` (or ``epochs * steps_per_epoch``), then fall to ``initial_lr /
    final_div_factor``; ``anneal_strategy`` ``"cos"`` or ``"linear"``. With
    ``cycle_momentum`` the momentum (SGD's, RMSprop's ``momentum``; Adam's first beta) goes
    the other way, between ``max_momentum`` and ``base_momentum``. ``three_phase``: up,
    back down to the initial rate, then to the final one. Stepping past ``total_steps``
    raises, as in torch.

    >>> import primitives.tensor as tnp
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=0.1, momentum=0.9)
    >>> scheduler = OneCycleLR(opt, max_lr=1.0, total_steps=10, anneal_strategy="linear")
    >>> lrs = []
    >>> for _ in range(10):
    ...     lrs.append(round(opt.param_groups[0]["lr"], 4)); opt.step(); scheduler.step()
    >>> lrs                                   # up over 30% of the steps, then down
    [0.04, 0.52, 1.0, 0.8571, 0.7143, 0.5714, 0.4286, 0.2857, 0.1429, 0.0]
    """

    def __init__(self, optimizer, max_lr, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1) -> None:
        what = "OneCycleLR"
        _check_optimizer(what, optimizer)
        if total_steps is not None:
            _scheduler_check(what, "total_steps", total_steps, integer=True, positive=True)
        elif epochs is not None and steps_per_epoch is not None:
            _scheduler_check(what, "epochs", epochs, integer=True, positive=True)
            _scheduler_check(what, "steps_per_epoch", steps_per_epoch, integer=True,
                             positive=True)
            total_steps = epochs * steps_per_epoch
        else:
            raise OptimizerError(f"lr_scheduler.{what}: give total_steps, or epochs and "
                                 "steps_per_epoch")
        _scheduler_check(what, "pct_start", pct_start)
        if not 0 <= pct_start <= 1:
            raise OptimizerError(f"lr_scheduler.{what}: pct_start must be in [0, 1], got "
                                 f"{pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise OptimizerError(f"lr_scheduler.{what}: anneal_strategy must be 'cos' or "
                                 f"'linear', got {anneal_strategy!r}")
        _scheduler_check(what, "div_factor", div_factor, positive=True)
        _scheduler_check(what, "final_div_factor", final_div_factor, positive=True)
        groups = optimizer.param_groups
        self.optimizer, self.total_steps = optimizer, total_steps
        self.anneal_strategy, self.cycle_momentum = anneal_strategy, cycle_momentum
        up = float(pct_start * total_steps) - 1
        if three_phase:       # (end step, start and end of the rate, of the momentum)
            self._phases = [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr",
                             "base_momentum", "max_momentum"),
                            (total_steps - 1, "initial_lr", "min_lr", "max_momentum",
                             "max_momentum")]
        else:
            self._phases = [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                            (total_steps - 1, "max_lr", "min_lr", "base_momentum",
                             "max_momentum")]
        max_lrs = _per_group(what, "max_lr", max_lr, groups)
        if cycle_momentum:
            bases, tops = self._check_momenta(what, optimizer, base_momentum, max_momentum)
        _check_last_epoch(what, last_epoch)
        if last_epoch == -1:            # (all checked: a refused setting changes no group)
            for group, top in zip(groups, max_lrs):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
            if cycle_momentum:
                self._start_momenta(groups, bases, tops)
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list:
        step = self.last_epoch
        if step > self.total_steps:
            raise OptimizerError(f"lr_scheduler.OneCycleLR: stepped {step} times, past its "
                                 f"total_steps of {self.total_steps}")
        rates = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, (end_step, lr_from, lr_to, momentum_from, momentum_to) in \
                    enumerate(self._phases):
                if step <= end_step or i == len(self._phases) - 1:
                    pct = (step - start_step) / (end_step - start_step)
                    rates.append(self._anneal(group[lr_from], group[lr_to], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[momentum_from],
                                                               group[momentum_to], pct))
                    break
                start_step = end_step
        return rates


class CyclicLR(_CyclesMomentum, LRScheduler):
    """torch's ``CyclicLR`` (cyclical learning rates), stepped once a batch: each group's
    rate climbs from ``base_lr`` to ``max_lr`` over ``step_size_up`` steps and back over
    ``step_size_down`` (default: as many), the height of the cycle scaled by ``mode``:
    ``"triangular"`` (1), ``"triangular2"`` (halved each cycle) or ``"exp_range"``
    (``gamma ** step``); or by ``scale_fn(x)``, of the cycle's number (``scale_mode``
    ``"cycle"``) or of the step (``"iterations"``). With ``cycle_momentum`` the momentum
    (SGD's, RMSprop's ``momentum``; Adam's first beta) goes the other way, between
    ``max_momentum`` and ``base_momentum``. ``base_lr``, ``max_lr`` and the momenta are one
    number or one per group.

    >>> import primitives.tensor as tnp
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0, momentum=0.9)
    >>> scheduler = CyclicLR(opt, base_lr=0.1, max_lr=0.5, step_size_up=2,
    ...                      mode="triangular2")
    >>> lrs = []
    >>> for _ in range(9):
    ...     lrs.append(round(opt.param_groups[0]["lr"], 12)); opt.step(); scheduler.step()
    >>> lrs                                   # the second cycle half as high
    [0.1, 0.3, 0.5, 0.3, 0.1, 0.2, 0.3, 0.2, 0.1]
    """

    _MODES = ("triangular", "triangular2", "exp_range")

    def __init__(self, optimizer, base_lr, max_lr, step_size_up: float = 2000,
                 step_size_down: float | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9,
                 last_epoch: int = -1) -> None:
        what = "CyclicLR"
        _check_optimizer(what, optimizer)
        groups = optimizer.param_groups
        base_lrs = _per_group(what, "base_lr", base_lr, groups)
        max_lrs = _per_group(what, "max_lr", max_lr, groups)
        _scheduler_check(what, "step_size_up", step_size_up, positive=True)
        if step_size_down is not None:
            _scheduler_check(what, "step_size_down", step_size_down)
            if step_size_down < 0:
                raise OptimizerError(f"lr_scheduler.{what}: step_size_down must be >= 0, got "
                                     f"{step_size_down!r}")
        _scheduler_check(what, "gamma", gamma)
        self._check_scaling(mode, scale_fn, scale_mode)
        if cycle_momentum:
            bases, tops = self._check_momenta(what, optimizer, base_momentum, max_momentum)
        _check_last_epoch(what, last_epoch)
        if last_epoch == -1:            # (all checked: a refused setting changes no group)
            for group, lr in zip(groups, base_lrs):
                group["lr"] = lr
        self.max_lrs = max_lrs
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom, self.scale_mode = scale_fn, scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.base_momentums, self.max_momentums = bases, tops
            if last_epoch == -1:
                self._start_momenta(groups, bases, tops)
        # torch's order: the first step reads base_lrs from the groups' "initial_lr" (the
        # base_lr given, unless another scheduler set it first), then they are base_lr
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _check_scaling(self, mode, scale_fn, scale_mode) -> None:
        if scale_fn is None and mode not in self._MODES:
            raise OptimizerError(f"lr_scheduler.CyclicLR: mode must be 'triangular', "
                                 f"'triangular2' or 'exp_range' (or give a scale_fn), got "
                                 f"{mode!r}")
        if scale_fn is not None and not callable(scale_fn):
            raise OptimizerError(f"lr_scheduler.CyclicLR: scale_fn must be a function of one "
                                 f"number, got a {type(scale_fn).__name__}")
        if scale_mode not in ("cycle", "iterations"):
            raise OptimizerError(f"lr_scheduler.CyclicLR: scale_mode must be 'cycle' or "
                                 f"'iterations', got {scale_mode!r}")

    def _init_scale_fn(self) -> None:
        # torch's: a mode's scale_fn sets the scale_mode (the one given counts with scale_fn)
        if self._scale_fn_custom is None:
            self.scale_mode = "iterations" if self.mode == "exp_range" else "cycle"

    def scale_fn(self, x) -> float:
        """The height of the cycle at ``x`` (the cycle's number, from 1, or the step, as
        ``scale_mode`` says), relative to the first: the ``scale_fn`` given, or the mode's
        (1, ``1 / 2 ** (x - 1)``, ``gamma ** x``).

        >>> import primitives.tensor as tnp
        >>> opt = tnp.optim.Adam([tnp.tensor([1.0], requires_grad=True)])
        >>> CyclicLR(opt, 0.1, 1.0, mode="triangular2").scale_fn(3)
        0.25
        """
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self) -> list:
        """The rates at step ``last_epoch`` (from ``base_lrs`` and ``max_lrs``, as torch);
        with ``cycle_momentum`` it sets the groups' momenta too.

        >>> import primitives.tensor as tnp
        >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], momentum=0.9)
        >>> scheduler = CyclicLR(opt, base_lr=0.1, max_lr=0.5, step_size_up=4)
        >>> scheduler.last_epoch = 2                 # halfway up: the momentum halfway down
        >>> lr, = scheduler.get_lr(); round(lr, 12), round(opt.param_groups[0]["momentum"], 12)
        (0.3, 0.85)
        """
        # (torch's order of operations throughout: the same floats)
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        # (scale_fn called for each group's rate, then momentum, as torch calls it)
        rates = [base_lr + (max_lr - base_lr) * scale_factor * self.scale_fn(at)
                 for base_lr, max_lr in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            momenta = [top - (top - base) * scale_factor * self.scale_fn(at)
                       for base, top in zip(self.base_momentums, self.max_momentums)]
            for group, momentum in zip(self.optimizer.param_groups, momenta):
                self._set_momentum(group, momentum)
        return rates

    def state_dict(self) -> dict:
        """As torch: ``scale_fn`` is not saved if it is a function, only the attributes of
        a callable object.

        >>> import primitives.tensor as tnp
        >>> opt = tnp.optim.Adam([tnp.tensor([1.0], requires_grad=True)])
        >>> state = CyclicLR(opt, 0.1, 1.0, scale_fn=lambda x: 0.5 ** x).state_dict()
        >>> state["_scale_fn_custom"], state["total_size"]
        (None, 4000.0)
        """
        state = self._state("_scale_fn_custom")
        fn = self._scale_fn_custom
        state["_scale_fn_custom"] = None if fn is None else _saved_attributes(fn)
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Take the attributes a :meth:`state_dict` saved (copies; a callable ``scale_fn``
        object's attributes into this scheduler's), checked as the constructor checks them.

        >>> import primitives.tensor as tnp
        >>> opt = tnp.optim.Adam([tnp.tensor([1.0], requires_grad=True)])
        >>> scheduler = CyclicLR(opt, 0.1, 1.0, mode="exp_range", gamma=0.9)
        >>> CyclicLR(opt, 0.1, 1.0).load_state_dict(scheduler.state_dict())
        """
        _check_state_dict(self, state_dict)
        state = dict(state_dict)
        saved = state.pop("_scale_fn_custom", None)
        fn = self._scale_fn_custom
        if saved is not None and fn is None:
            raise OptimizerError("lr_scheduler.CyclicLR.load_state_dict: the state dict holds "
                                 "a scale_fn object's attributes, and this scheduler has no "
                                 "scale_fn (make it with one of the same class)")
        self._check_scaling(state.get("mode", self.mode), fn,
                            state.get("scale_mode", self.scale_mode))
        super().load_state_dict(state)
        if saved is not None:
            fn.__dict__.update(copy.deepcopy(saved))
        self._init_scale_fn()


def _per_group(what: str, name: str, value, groups: list) -> list:
    """``value`` for each parameter group: a list of one per group, or one for all."""
    values = list(value) if isinstance(value, (list, tuple)) else [value] * len(groups)
    if len(values) != len(groups):
        raise OptimizerError(f"lr_scheduler.{what}: {name} has {len(values)} values for "
                             f"{len(groups)} parameter groups")
    for v in values:
        _scheduler_check(what, name, v)
    return values


class ReduceLROnPlateau(LRScheduler):
    """torch's ``ReduceLROnPlateau``: ``step(metric)`` (once an epoch, with the validation
    loss, say) multiplies every group's ``"lr"`` by ``factor`` once the metric has not
    improved for more than ``patience`` epochs, then waits ``cooldown`` epochs before
    counting again; never below ``min_lr`` (one number, or one per group), and not when the
    change would be ``eps`` or less. The metric improves when it beats the best so far by
    ``threshold``: relatively (``"rel"``: below ``best * (1 - threshold)`` in ``"min"``
    mode, above ``best * (1 + threshold)`` in ``"max"``) or absolutely (``"abs"``). The
    metric is a number or a one-element array or ``Tensor``, read as a value (a loss
    tensor's gradient is not needed).

    >>> import primitives.tensor as tnp
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> scheduler = ReduceLROnPlateau(opt, factor=0.5, patience=1)
    >>> for loss in [1.0, 0.9, 0.95, 0.97]:      # two epochs without improving: halve
    ...     opt.step(); scheduler.step(loss)
    >>> scheduler.get_last_lr()
    [0.5]
    """

    def __init__(self, optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr=0.0, eps: float = 1e-8) -> None:
        what = "ReduceLROnPlateau"
        _check_optimizer(what, optimizer)
        _scheduler_check(what, "factor", factor)
        if not factor < 1.0:
            raise OptimizerError(f"lr_scheduler.{what}: factor must be below 1, got {factor!r}")
        _scheduler_check(what, "patience", patience, integer=True)
        _scheduler_check(what, "cooldown", cooldown, integer=True)
        _scheduler_check(what, "threshold", threshold)
        _scheduler_check(what, "eps", eps)
        groups = optimizer.param_groups
        self.min_lrs = _per_group(what, "min_lr", min_lr, groups)
        # (one min_lr for all groups also covers groups added later; one per group does not)
        self.default_min_lr = None if isinstance(min_lr, (list, tuple)) else min_lr
        self.optimizer = optimizer
        self.factor, self.patience, self.cooldown, self.eps = factor, patience, cooldown, eps
        self._set_comparison(mode, threshold, threshold_mode)
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in groups]
        self.best = self.mode_worse
        self.num_bad_epochs = 0
        self.cooldown_counter = 0

    def _set_comparison(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise OptimizerError(f"lr_scheduler.ReduceLROnPlateau: mode must be 'min' or "
                                 f"'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise OptimizerError(f"lr_scheduler.ReduceLROnPlateau: threshold_mode must be "
                                 f"'rel' or 'abs', got {threshold_mode!r}")
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf

    @property
    def in_cooldown(self) -> bool:
        """Whether the scheduler is waiting out a cooldown (bad epochs are not counted)."""
        return self.cooldown_counter > 0

    def _improves(self, value: float) -> bool:
        best, threshold = self.best, self.threshold
        if self.mode == "min":
            return value < (best * (1 - threshold) if self.threshold_mode == "rel"
                            else best - threshold)
        return value > (best * (1 + threshold) if self.threshold_mode == "rel"
                        else best + threshold)

    def step(self, metrics, epoch: int | None = None) -> None:
        """Take this epoch's ``metrics`` (see the class) and reduce the rates if it is time."""
        value = _metric_value(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn("The epoch parameter in `scheduler.step()` is deprecated (as in "
                          "PyTorch): call `scheduler.step(metrics)` without it", UserWarning,
                          stacklevel=2)
        self.last_epoch = epoch
        if self._improves(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0             # bad epochs in a cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce()
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise OptimizerError(
                    f"lr_scheduler.ReduceLROnPlateau: the optimizer has {len(groups)} "
                    f"parameter groups, min_lr gives {len(self.min_lrs)} (a group was added "
                    "after the scheduler was made): set its min_lrs to one value per group")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, min_lr)
            if old - new > self.eps:
                group["lr"] = new

    def load_state_dict(self, state_dict: dict) -> None:
        """Take the attributes a :meth:`state_dict` saved (copies), checked as the
        constructor checks ``mode`` and ``threshold_mode``."""
        super().load_state_dict(state_dict)
        self._set_comparison(self.mode, self.threshold, self.threshold_mode)

    def __repr__(self) -> str:
        return (f"ReduceLROnPlateau(mode={self.mode!r}, best={self.best}, "
                f"num_bad_epochs={self.num_bad_epochs})")


class _Composite(LRScheduler):
    """What SequentialLR and ChainedScheduler share: schedulers of one optimizer, stepped
    through this one (made without LRScheduler's constructor, as torch's)."""

    def _update_lr(self, epoch=None) -> None:
        raise OptimizerError(f"lr_scheduler.SequentialLR: a {type(self).__name__} in a "
                             "SequentialLR can only be its first scheduler (it has no rates of "
                             "its own to start at a milestone)")

    def state_dict(self) -> dict:
        """Its attributes and, as a list under ``"_schedulers"``, its schedulers' state
        dicts (torch's layout; copies).

        >>> import primitives.tensor as tnp
        >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
        >>> scheduler = SequentialLR(opt, [ConstantLR(opt, 0.5, 2), ExponentialLR(opt, 0.9)],
        ...                          milestones=[2])
        >>> state = scheduler.state_dict()
        >>> state["_milestones"], [s["last_epoch"] for s in state["_schedulers"]]
        ([2], [0, -1])
        """
        state = self._state("_schedulers")
        state["_schedulers"] = [scheduler.state_dict() for scheduler in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Take the attributes a :meth:`state_dict` saved (copies), and give its schedulers
        theirs (the dict is left as it was).

        >>> import primitives.tensor as tnp
        >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
        >>> first, then = ConstantLR(opt, 0.5, 2), ExponentialLR(opt, 0.9)
        >>> scheduler = SequentialLR(opt, [first, then], milestones=[2])
        >>> state = scheduler.state_dict(); state["_schedulers"][1]["gamma"] = 0.5
        >>> scheduler.load_state_dict(state); then.gamma
        0.5
        """
        _check_state_dict(self, state_dict)
        state = dict(state_dict)
        saved = state.pop("_schedulers", None)
        if not isinstance(saved, list) or len(saved) != len(self._schedulers):
            got = f"{len(saved)}" if isinstance(saved, list) else "no list of"
            raise OptimizerError(f"lr_scheduler.{type(self).__name__}.load_state_dict: the "
                                 f"state dict has {got} schedulers' states under "
                                 f"'_schedulers', this scheduler has "
                                 f"{len(self._schedulers)} schedulers")
        for scheduler, saved_state in zip(self._schedulers, saved):
            _check_state_dict(scheduler, saved_state)
        self.__dict__.update(copy.deepcopy(state))
        for scheduler, saved_state in zip(self._schedulers, saved):
            scheduler.load_state_dict(saved_state)

    def __repr__(self) -> str:
        inner = ", ".join(map(repr, self._schedulers))
        epoch = f", last_epoch={self.last_epoch}" if hasattr(self, "last_epoch") else ""
        return f"{type(self).__name__}([{inner}]{epoch})"


def _check_schedulers(what: str, schedulers, optimizer) -> list:
    if isinstance(schedulers, LRScheduler) or not isinstance(schedulers, (list, tuple)):
        raise TensorTypeError(f"lr_scheduler.{what}: schedulers must be a list of schedulers, "
                              f"got a {type(schedulers).__name__}")
    if not schedulers:
        raise OptimizerError(f"lr_scheduler.{what}: schedulers is empty (give at least one "
                             "scheduler)")
    for i, scheduler in enumerate(schedulers):
        if not isinstance(scheduler, LRScheduler):
            raise TensorTypeError(f"lr_scheduler.{what}: schedulers[{i}] must be a scheduler "
                                  f"of lr_scheduler, got a {type(scheduler).__name__}")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise OptimizerError(f"lr_scheduler.{what}: schedulers[{i}] is a "
                                 "ReduceLROnPlateau, which steps with a metric (step it on "
                                 "its own)")
        if scheduler.optimizer is not optimizer:
            raise OptimizerError(f"lr_scheduler.{what}: schedulers[{i}] "
                                 f"({type(scheduler).__name__}) schedules another optimizer "
                                 "(all must schedule the same one)")
    return list(schedulers)


class SequentialLR(_Composite):
    """torch's ``SequentialLR``: one scheduler after another, the next taking over at each of
    the ``milestones`` (epochs, one fewer than the schedulers), where it starts from its
    epoch 0 (from the groups' ``"initial_lr"``, by its closed form when it has one). Making
    it sets the rates back to ``"initial_lr"`` and undoes the schedulers' first steps, then
    starts the first one, as torch does.

    >>> import primitives.tensor as tnp
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> warm_up = LinearLR(opt, start_factor=0.25, total_iters=3)
    >>> decay = ExponentialLR(opt, gamma=0.5)
    >>> scheduler = SequentialLR(opt, [warm_up, decay], milestones=[3])
    >>> lrs = []
    >>> for _ in range(6):
    ...     lrs.append(round(opt.param_groups[0]["lr"], 12)); opt.step(); scheduler.step()
    >>> lrs
    [0.25, 0.5, 0.75, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1) -> None:
        what = "SequentialLR"
        _check_optimizer(what, optimizer)
        schedulers = _check_schedulers(what, schedulers, optimizer)
        if isinstance(milestones, (numbers.Number, str)) or \
                not isinstance(milestones, collections.abc.Iterable):
            raise OptimizerError(f"lr_scheduler.{what}: milestones must be a list of epochs, "
                                 f"got {milestones!r}")
        milestones = list(milestones)
        for m in milestones:
            _scheduler_check(what, "a milestone", m, integer=True)
        if len(milestones) != len(schedulers) - 1:
            raise OptimizerError(f"lr_scheduler.{what}: {len(schedulers)} schedulers take "
                                 f"{len(schedulers) - 1} milestones (the epochs at which the "
                                 f"next one starts), got {len(milestones)}")
        if milestones != sorted(milestones):
            raise OptimizerError(f"lr_scheduler.{what}: milestones must be in increasing "
                                 f"order, got {milestones!r}")
        _check_last_epoch(what, last_epoch)
        for i, group in enumerate(optimizer.param_groups):
            if "initial_lr" not in group:
                raise OptimizerError(f"lr_scheduler.{what}: param_groups[{i}] has no "
                                     "'initial_lr' (add groups before making schedulers)")
        self._schedulers, self._milestones = schedulers, milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        _undo_first_steps(self)
        first = schedulers[bisect.bisect_right(milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:
        """Advance one epoch: step the scheduler whose turn it is, or start the next one
        (at its epoch 0) at a milestone.

        >>> import primitives.tensor as tnp
        >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
        >>> steps = [StepLR(opt, step_size=1, gamma=0.5), ConstantLR(opt, 0.1, 5)]
        >>> scheduler = SequentialLR(opt, steps, milestones=[2])
        >>> opt.step(); scheduler.step(); opt.step(); scheduler.step()
        >>> scheduler.get_last_lr(), scheduler.last_epoch
        ([0.1], 2)
        """
        epoch = self.last_epoch + 1
        i = bisect.bisect_right(self._milestones, epoch)
        scheduler = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self.last_epoch = epoch         # (after: a refused step leaves the epoch as it was)
        self._last_lr = scheduler.get_last_lr()


def _undo_first_steps(scheduler) -> None:
    # torch's recursive_undo: each scheduler's (not a composite's own) epoch back by one
    if isinstance(scheduler, _Composite):
        for inner in scheduler._schedulers:
            _undo_first_steps(inner)
    elif hasattr(scheduler, "last_epoch"):
        scheduler.last_epoch -= 1


class ChainedScheduler(_Composite):
    """torch's ``ChainedScheduler``: steps all its schedulers (of one optimizer) at each
    ``step()``, in order, so their factors compose.

    >>> import primitives.tensor as tnp
    >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
    >>> scheduler = ChainedScheduler([ConstantLR(opt, 0.5, 2), ExponentialLR(opt, 0.5)])
    >>> lrs = []
    >>> for _ in range(4):
    ...     lrs.append(opt.param_groups[0]["lr"]); opt.step(); scheduler.step()
    >>> lrs
    [0.5, 0.25, 0.25, 0.125]
    """

    def __init__(self, schedulers, optimizer=None) -> None:
        what = "ChainedScheduler"
        if optimizer is None:
            first = schedulers[0] if isinstance(schedulers, (list, tuple)) and schedulers \
                else None
            optimizer = first.optimizer if isinstance(first, LRScheduler) else None
        else:
            _check_optimizer(what, optimizer)
        self._schedulers = _check_schedulers(what, schedulers, optimizer)
        self.optimizer = optimizer
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def step(self) -> None:
        """Step each of the schedulers, in order.

        >>> import primitives.tensor as tnp
        >>> opt = tnp.optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=1.0)
        >>> scheduler = ChainedScheduler([StepLR(opt, 1, 0.5), StepLR(opt, 2, 0.1)])
        >>> opt.step(); scheduler.step(); opt.step(); scheduler.step()
        >>> [round(lr, 12) for lr in scheduler.get_last_lr()]
        [0.025]
        """
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


def _metric_value(metrics) -> float:
    """``ReduceLROnPlateau.step``'s metric as a float: a real number, or a one-element array
    or ``Tensor`` (read with ``item()``, as a value)."""
    try:
        value = metrics.item() if hasattr(metrics, "item") else metrics
        if isinstance(value, complex):
            raise TypeError("a complex number has no order")
        return float(value)
    except (TypeError, ValueError, RuntimeError) as error:
        raise OptimizerError(f"lr_scheduler.ReduceLROnPlateau.step: the metric must be a real "
                             f"number or an array or Tensor of one element, got "
                             f"{_describe(metrics)} ({error})") from None


def _describe(value) -> str:
    shape = getattr(value, "shape", None)
    return type(value).__name__ + ("" if shape is None else f" of shape {tuple(shape)}")
