"""``lr_scheduler.PolynomialLR``, ``CosineAnnealingWarmRestarts``, ``CyclicLR``,
``SequentialLR`` and ``ChainedScheduler``: against their formulas written out here (the
polynomial, the restarts' periods, the cycles' triangles, the milestones), refused
settings, resumed runs (state dicts, pickled); and against ``torch.optim.lr_scheduler``
where torch is installed (rates and momenta the same floats at every step, the parameters
the optimizers reach, hypothesis over the settings, torch's state dicts loaded)."""

from __future__ import annotations

import math
import os
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from primitives import tensor as tnp
from primitives.tensor import optim
from primitives.tensor.errors import TensorTypeError
from primitives.tensor.optim import OptimizerError, lr_scheduler
from lr_helpers import rates_and_momenta, run

EXAMPLES = settings(max_examples=int(os.environ.get("TIDU_RANDOM_EXAMPLES", 60)),
                    deadline=None)
STARTS = [np.array([1.0, -2.0]), np.array([0.5])]
OPTIMIZERS = {"SGD": {"momentum": 0.9}, "Adam": {}, "RMSprop": {"momentum": 0.5}}


def _optimizer(lr=1.0, cls="SGD", **kwargs):
    return getattr(optim, cls)([tnp.tensor([1.0], requires_grad=True)], lr=lr, **kwargs)


def _grads(values):
    return [np.cos(v) + 0.1 * v ** 3 for v in values]


def _momentum_key(opt):
    return "betas" if "betas" in opt.defaults else "momentum"


def _hyper(opt) -> list:
    """Every group's rate and momentum (Adam's betas)."""
    key = _momentum_key(opt)
    return [(group["lr"], group[key]) for group in opt.param_groups]


class _PlainDescent(optim.Optimizer):
    """An optimizer with neither a momentum nor betas: ``t -= lr * g``."""

    _name = "PlainDescent"

    def __init__(self, tensors, lr=0.1):
        super().__init__(tensors, {"lr": lr})

    def _check_group(self, group, where):
        pass

    def _update(self, data, grad, state, group):
        return group["lr"] * grad


# the schedulers under test, made the same way on either module (ours or torch's)
MAKERS = {
    "PolynomialLR": lambda m, opt, **kw: m.PolynomialLR(opt, total_iters=9, power=1.7, **kw),
    "PolynomialLR_linear": lambda m, opt, **kw: m.PolynomialLR(opt, total_iters=5, **kw),
    "CosineAnnealingWarmRestarts": lambda m, opt, **kw: m.CosineAnnealingWarmRestarts(
        opt, T_0=3, T_mult=2, eta_min=0.001, **kw),
    "CosineAnnealingWarmRestarts_T_mult_1": lambda m, opt, **kw:
        m.CosineAnnealingWarmRestarts(opt, T_0=4, **kw),
    "CyclicLR_triangular": lambda m, opt, **kw: m.CyclicLR(
        opt, base_lr=[0.01, 0.02], max_lr=0.2, step_size_up=3, step_size_down=5, **kw),
    "CyclicLR_triangular2": lambda m, opt, **kw: m.CyclicLR(
        opt, 0.01, [0.3, 0.1], step_size_up=4, mode="triangular2",
        base_momentum=[0.8, 0.7], max_momentum=0.95, **kw),
    "CyclicLR_exp_range": lambda m, opt, **kw: m.CyclicLR(
        opt, 0.01, 0.2, step_size_up=2, step_size_down=3, mode="exp_range", gamma=0.97, **kw),
    "CyclicLR_no_momentum": lambda m, opt, **kw: m.CyclicLR(
        opt, 0.01, 0.2, step_size_up=5, cycle_momentum=False, **kw),
    "SequentialLR": lambda m, opt: m.SequentialLR(
        opt, [m.LinearLR(opt, 0.1, total_iters=4), m.CosineAnnealingWarmRestarts(opt, 3),
              m.ExponentialLR(opt, 0.9), m.PolynomialLR(opt, 6, 2.0)], milestones=[4, 9, 15]),
    "SequentialLR_cyclic": lambda m, opt: m.SequentialLR(
        opt, [m.ConstantLR(opt, 0.5, 10), m.CyclicLR(opt, 0.01, 0.1, 2)], milestones=[3]),
    "ChainedScheduler": lambda m, opt: m.ChainedScheduler(
        [m.ConstantLR(opt, 0.5, 3), m.PolynomialLR(opt, 10, 2.0), m.ExponentialLR(opt, 0.95)]),
}
SIMPLE = ["PolynomialLR", "CosineAnnealingWarmRestarts", "CyclicLR_triangular2"]


# --- PolynomialLR, by hand -------------------------------------------------------------------


@pytest.mark.parametrize("total, power", [(5, 1.0), (7, 2.5), (3, 0.5), (1, 1.0), (4, 0.0)])
def test_polynomial_rates_follow_the_polynomial_then_stay(total, power):
    rates = run(lr_scheduler.PolynomialLR(_optimizer(0.5), total, power), total + 4)
    expected = [0.5 * (1 - min(epoch, total) / total) ** power for epoch in range(total + 5)]
    assert rates == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert rates[total] == (0.5 if power == 0 else 0.0)


def test_polynomial_step_with_an_epoch_is_the_closed_form():
    scheduler = lr_scheduler.PolynomialLR(_optimizer(0.5), total_iters=6, power=3.0)
    scheduler.optimizer.step()
    for epoch in (4, 2, 9, 0):
        with pytest.warns(UserWarning, match="deprecated"):
            scheduler.step(epoch)
        assert scheduler.get_last_lr() == [0.5 * (1.0 - min(6, epoch) / 6) ** 3.0]


# --- CosineAnnealingWarmRestarts, by hand -----------------------------------------------------


def _period(epoch, t_0, t_mult):
    """(time since the last restart, the period's length): the periods walked one by one."""
    start, length = 0, t_0
    while epoch >= start + length:
        start, length = start + length, length * t_mult
    return epoch - start, length


def _sgdr(epoch, t_0, t_mult, base=1.0, eta_min=0.0):
    t_cur, t_i = _period(epoch, t_0, t_mult)
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2


@pytest.mark.parametrize("t_0, t_mult, eta_min", [(3, 1, 0.0), (2, 2, 0.01), (1, 3, 0.0),
                                                  (5, 2, 0.1)])
def test_warm_restarts_follow_the_periods(t_0, t_mult, eta_min):
    scheduler = lr_scheduler.CosineAnnealingWarmRestarts(_optimizer(), t_0, t_mult, eta_min)
    rates = run(scheduler, 40)
    assert rates == pytest.approx([_sgdr(e, t_0, t_mult, 1.0, eta_min) for e in range(41)],
                                  rel=1e-12)
    assert (scheduler.T_cur, scheduler.T_i) == _period(40, t_0, t_mult)
    restarts = [e for e in range(1, 41) if _period(e, t_0, t_mult)[0] == 0]
    assert restarts and all(rates[e] == 1.0 for e in restarts)      # back to base_lr


@pytest.mark.parametrize("t_mult", [1, 2, 3])
def test_warm_restarts_take_fractional_epochs_without_a_warning(t_mult):
    opt = _optimizer()
    scheduler = lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=t_mult)
    batches = 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # torch's documented use: not deprecated
        for epoch in range(12):
            for i in range(batches):
                opt.step()
                scheduler.step(epoch + i / batches)
                t_cur, t_i = _period(epoch + i / batches, 2, t_mult)
                assert scheduler.get_last_lr()[0] == pytest.approx(_sgdr(epoch + i / batches,
                                                                         2, t_mult), rel=1e-12)
                assert scheduler.T_cur == pytest.approx(t_cur, abs=1e-12)
                assert scheduler.T_i == t_i and scheduler.last_epoch == epoch


def test_warm_restarts_step_on_from_an_epoch_jumped_to():
    opt = _optimizer()
    scheduler = lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2)
    opt.step()
    scheduler.step(10)                          # periods [0, 3), [3, 9), [9, 21)
    assert (scheduler.T_cur, scheduler.T_i, scheduler.last_epoch) == (1, 12, 10)
    rates = run(scheduler, 12)
    assert rates == pytest.approx([_sgdr(e, 3, 2) for e in range(10, 23)], rel=1e-12)
    assert scheduler.last_epoch == 22 and scheduler.T_i == 24


@pytest.mark.parametrize("epoch, match", [(-1, "epoch must be a finite number >= 0, got -1"),
                                          (math.nan, "epoch must be a finite number >= 0"),
                                          (math.inf, "epoch must be a finite number >= 0"),
                                          ("3", "epoch must be a real number, got '3'"),
                                          (True, "epoch must be a real number, got True")])
def test_warm_restarts_refuse_a_bad_epoch_and_go_on(epoch, match):
    opt = _optimizer()
    scheduler = lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3)
    run(scheduler, 2)
    before = scheduler.state_dict()
    with pytest.raises(OptimizerError,
                       match="lr_scheduler.CosineAnnealingWarmRestarts.step: " + match):
        scheduler.step(epoch)
    assert scheduler.state_dict() == before and opt.param_groups[0]["lr"] == before["_last_lr"][0]
    assert run(scheduler, 3)[1:] == pytest.approx([_sgdr(e, 3, 1) for e in (3, 4, 5)])


# --- CyclicLR, by hand ------------------------------------------------------------------------


def _triangle(step, up, down):
    """(the cycle's number from 0, how far up the triangle: 0 at base_lr, 1 at max_lr)."""
    cycle, position = divmod(step, up + down)
    return cycle, (position / up if position <= up else (up + down - position) / down)


@pytest.mark.parametrize("mode", ["triangular", "triangular2", "exp_range"])
@pytest.mark.parametrize("cls", ["SGD", "Adam"])
def test_cyclic_rates_and_momenta_follow_the_triangles(mode, cls):
    opt = _optimizer(5.0, cls, **OPTIMIZERS[cls])
    scheduler = lr_scheduler.CyclicLR(opt, base_lr=0.1, max_lr=0.5, step_size_up=3,
                                      step_size_down=2, mode=mode, gamma=0.9,
                                      base_momentum=0.8, max_momentum=0.9)
    rates, momenta = rates_and_momenta(opt, scheduler, 23)
    for step, (rate, momentum) in enumerate(zip(rates, momenta)):
        cycle, height = _triangle(step, 3, 2)
        scale = {"triangular": 1.0, "triangular2": 0.5 ** cycle,
                 "exp_range": 0.9 ** step}[mode]
        assert rate == pytest.approx(0.1 + 0.4 * height * scale, rel=1e-12)
        assert momentum == pytest.approx(0.9 - 0.1 * height * scale, rel=1e-12)
    if mode != "exp_range":                # the first triangle, up in 3 steps, down in 2
        assert rates[:6] == pytest.approx([0.1, 0.1 + 0.4 / 3, 0.1 + 0.8 / 3, 0.5, 0.3, 0.1])
    if cls == "Adam":
        assert opt.param_groups[0]["betas"][1] == 0.999           # the second beta untouched


@pytest.mark.parametrize("scale_mode", ["cycle", "iterations"])
def test_cyclic_scale_fn_of_the_cycle_or_the_step(scale_mode):
    opt = _optimizer(cls="Adam")
    scheduler = lr_scheduler.CyclicLR(opt, 0.0, 1.0, step_size_up=2,
                                      scale_fn=lambda x: 1 / (1 + x),
                                      scale_mode=scale_mode, cycle_momentum=False)
    rates = run(scheduler, 12)
    for step, rate in enumerate(rates):
        cycle, height = _triangle(step, 2, 2)
        at = cycle + 1 if scale_mode == "cycle" else step
        assert rate == (pytest.approx(height / (1 + at)) if height else 0.0)
    assert scheduler.scale_mode == scale_mode


def test_a_modes_scale_sets_the_scale_mode_as_torch():
    opt = _optimizer(cls="Adam")
    assert lr_scheduler.CyclicLR(opt, 0.1, 1.0, mode="exp_range",
                                 scale_mode="cycle").scale_mode == "iterations"
    assert lr_scheduler.CyclicLR(opt, 0.1, 1.0, mode="triangular2",
                                 scale_mode="iterations").scale_mode == "cycle"


def test_cyclic_with_no_way_down_is_a_sawtooth():
    scheduler = lr_scheduler.CyclicLR(_optimizer(cls="Adam"), 0.0, 0.3, step_size_up=3,
                                      step_size_down=0)
    assert run(scheduler, 7) == pytest.approx([0.0, 0.1, 0.2, 0.0, 0.1, 0.2, 0.0, 0.1])


def test_cyclic_momentum_needs_an_optimizer_with_one():
    opt = _PlainDescent([tnp.tensor([1.0], requires_grad=True)], lr=0.5)
    for make in (lambda: lr_scheduler.CyclicLR(opt, 0.1, 1.0),
                 lambda: lr_scheduler.OneCycleLR(opt, 1.0, total_steps=10)):
        with pytest.raises(OptimizerError, match=r"cycle_momentum needs an optimizer with a "
                                                 r"momentum or betas, _PlainDescent has neither "
                                                 r"\(pass cycle_momentum=False\)"):
            make()
        assert opt.param_groups[0] == {"params": opt.param_groups[0]["params"], "lr": 0.5}
    scheduler = lr_scheduler.CyclicLR(opt, 0.1, 1.0, step_size_up=2, cycle_momentum=False)
    assert run(scheduler, 4) == pytest.approx([0.1, 0.55, 1.0, 0.55, 0.1])


def test_a_callable_scale_fn_keeps_its_attributes_through_state_dicts():
    class Decay:
        def __init__(self):
            self.rate = 0.5

        def __call__(self, x):
            return self.rate ** x

    opt = _optimizer(cls="Adam")
    scheduler = lr_scheduler.CyclicLR(opt, 0.0, 1.0, step_size_up=1, scale_fn=Decay())
    scheduler._scale_fn_custom.rate = 0.25
    state = pickle.loads(pickle.dumps(scheduler.state_dict()))
    assert state["_scale_fn_custom"] == {"rate": 0.25}
    other = lr_scheduler.CyclicLR(opt, 0.0, 1.0, step_size_up=1, scale_fn=Decay())
    other.load_state_dict(state)
    assert other.scale_fn(2) == 0.0625 and state["_scale_fn_custom"] == {"rate": 0.25}
    plain = lr_scheduler.CyclicLR(opt, 0.0, 1.0, step_size_up=1)
    with pytest.raises(OptimizerError, match="CyclicLR.load_state_dict: the state dict holds "
                                             "a scale_fn object's attributes"):
        plain.load_state_dict(state)
    assert plain.scale_fn(2) == 1.0 and plain._scale_fn_custom is None


# --- SequentialLR and ChainedScheduler, by hand -----------------------------------------------


def test_sequential_warm_up_then_cosine_from_the_milestone():
    opt = _optimizer()
    scheduler = lr_scheduler.SequentialLR(
        opt, [lr_scheduler.LinearLR(opt, 0.25, total_iters=4),
              lr_scheduler.CosineAnnealingLR(opt, T_max=6)], milestones=[4])
    rates = run(scheduler, 12)
    warm = [0.25 + 0.75 * e / 4 for e in range(4)]
    cosine = [(1 + math.cos(math.pi * e / 6)) / 2 for e in range(9)]
    assert rates == pytest.approx(warm + cosine, rel=1e-12, abs=1e-15)
    assert scheduler.last_epoch == 12


def test_sequential_starts_each_scheduler_at_its_epoch_0_from_initial_lr():
    opt = _optimizer()
    first, second, third = (lr_scheduler.ConstantLR(opt, 0.5, 10),
                            lr_scheduler.ExponentialLR(opt, 0.5),
                            lr_scheduler.StepLR(opt, 2, 0.1))
    scheduler = lr_scheduler.SequentialLR(opt, [first, second, third], milestones=[2, 5])
    assert [s.last_epoch for s in (first, second, third)] == [0, -1, -1]
    rates = run(scheduler, 9)
    assert rates == pytest.approx([0.5, 0.5, 1.0, 0.5, 0.25, 1.0, 1.0, 0.1, 0.1, 0.01])
    assert [s.last_epoch for s in (first, second, third)] == [1, 2, 4]


def test_chained_schedulers_multiply():
    opt = _optimizer()
    scheduler = lr_scheduler.ChainedScheduler([lr_scheduler.ConstantLR(opt, 0.5, 3),
                                               lr_scheduler.ExponentialLR(opt, 0.9)])
    assert run(scheduler, 8) == pytest.approx([(0.5 if e < 3 else 1.0) * 0.9 ** e
                                               for e in range(9)], rel=1e-13)


def test_composite_state_dicts_hold_their_schedulers_states():
    opt = _optimizer()
    inner = [lr_scheduler.ConstantLR(opt, 0.5, 2), lr_scheduler.ExponentialLR(opt, 0.9)]
    sequential = lr_scheduler.SequentialLR(opt, inner, milestones=[2])
    state = sequential.state_dict()
    assert set(state) == {"_milestones", "last_epoch", "_last_lr", "_schedulers"}
    assert state["_schedulers"] == [s.state_dict() for s in inner]
    chained = lr_scheduler.ChainedScheduler(inner, optimizer=opt)
    assert set(chained.state_dict()) == {"_last_lr", "_schedulers"}


# --- refused settings -------------------------------------------------------------------------


def _children(opt):
    return [lr_scheduler.ConstantLR(opt, 0.5, 2), lr_scheduler.ExponentialLR(opt, 0.9)]


REFUSED = [
    (lambda opt, ch: lr_scheduler.PolynomialLR(opt, total_iters=0),
     "PolynomialLR: total_iters must be a positive integer, got 0"),
    (lambda opt, ch: lr_scheduler.PolynomialLR(opt, total_iters=2.5),
     "PolynomialLR: total_iters must be a positive integer"),
    (lambda opt, ch: lr_scheduler.PolynomialLR(opt, power=-1.0),
     "PolynomialLR: power must be >= 0, got -1.0"),
    (lambda opt, ch: lr_scheduler.PolynomialLR(opt, power="2"),
     "PolynomialLR: power must be a real number"),
    (lambda opt, ch: lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=0),
     "CosineAnnealingWarmRestarts: T_0 must be a positive integer, got 0"),
    (lambda opt, ch: lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2.5),
     "CosineAnnealingWarmRestarts: T_0 must be a positive integer"),
    (lambda opt, ch: lr_scheduler.CosineAnnealingWarmRestarts(opt, 3, T_mult=0),
     "CosineAnnealingWarmRestarts: T_mult must be a positive integer, got 0"),
    (lambda opt, ch: lr_scheduler.CosineAnnealingWarmRestarts(opt, 3, T_mult=1.5),
     "CosineAnnealingWarmRestarts: T_mult must be a positive integer"),
    (lambda opt, ch: lr_scheduler.CosineAnnealingWarmRestarts(opt, 3, eta_min=None),
     "CosineAnnealingWarmRestarts: eta_min must be a real number"),
    (lambda opt, ch: lr_scheduler.CyclicLR(opt, [0.1, 0.2], 1.0),
     "CyclicLR: base_lr has 2 values for 1 parameter groups"),
    (lambda opt, ch: lr_scheduler.CyclicLR(opt, 0.1, "1"), "CyclicLR: max_lr must be a real"),
    (lambda opt, ch: lr_scheduler.CyclicLR(opt, 0.1, 1.0, step_size_up=0),
     "CyclicLR: step_size_up must be a positive real number, got 0"),
    (lambda opt, ch: lr_scheduler.CyclicLR(opt, 0.1, 1.0, step_size_down=-1),
     "CyclicLR: step_size_down must be >= 0, got -1"),
    (lambda opt, ch: lr_scheduler.CyclicLR(opt, 0.1, 1.0, mode="sine"),
     "CyclicLR: mode must be 'triangular', 'triangular2' or 'exp_range' .*got 'sine'"),
    (lambda opt, ch: lr_scheduler.CyclicLR(opt, 0.1, 1.0, scale_fn=0.5),
     "CyclicLR: scale_fn must be a function of one number, got a float"),
    (lambda opt, ch: lr_scheduler.CyclicLR(opt, 0.1, 1.0, scale_mode="epoch"),
     "CyclicLR: scale_mode must be 'cycle' or 'iterations', got 'epoch'"),
    (lambda opt, ch: lr_scheduler.CyclicLR(opt, 0.1, 1.0, gamma=None),
     "CyclicLR: gamma must be a real number"),
    (lambda opt, ch: lr_scheduler.CyclicLR(opt, 0.1, 1.0, max_momentum=[0.9, 0.9]),
     "CyclicLR: max_momentum has 2 values for 1 parameter groups"),
    (lambda opt, ch: lr_scheduler.CyclicLR(opt, 0.1, 1.0, last_epoch=-3),
     "CyclicLR: last_epoch must be an integer >= -1"),
    (lambda opt, ch: lr_scheduler.SequentialLR(opt, [], []),
     "SequentialLR: schedulers is empty"),
    (lambda opt, ch: lr_scheduler.SequentialLR(opt, ch, milestones=[]),
     "SequentialLR: 2 schedulers take 1 milestones .*got 0"),
    (lambda opt, ch: lr_scheduler.SequentialLR(opt, ch * 2, milestones=[5, 3, 7]),
     r"SequentialLR: milestones must be in increasing order, got \[5, 3, 7\]"),
    (lambda opt, ch: lr_scheduler.SequentialLR(opt, ch, milestones=[2.5]),
     "SequentialLR: a milestone must be an? integer"),
    (lambda opt, ch: lr_scheduler.SequentialLR(opt, ch, milestones=3),
     "SequentialLR: milestones must be a list of epochs, got 3"),
    (lambda opt, ch: lr_scheduler.SequentialLR(
        opt, [lr_scheduler.ReduceLROnPlateau(opt)] + ch, [1, 2]),
     r"SequentialLR: schedulers\[0\] is a ReduceLROnPlateau, which steps with a metric"),
    (lambda opt, ch: lr_scheduler.SequentialLR(
        opt, [lr_scheduler.StepLR(_optimizer(), 2)] + ch, [1, 2]),
     r"SequentialLR: schedulers\[0\] \(StepLR\) schedules another optimizer"),
    (lambda opt, ch: lr_scheduler.ChainedScheduler([]), "ChainedScheduler: schedulers is empty"),
    (lambda opt, ch: lr_scheduler.ChainedScheduler(ch + [
        lr_scheduler.StepLR(_optimizer(), 2)]),
     r"ChainedScheduler: schedulers\[2\] \(StepLR\) schedules another optimizer"),
]


@pytest.mark.parametrize("make, match", REFUSED)
def test_bad_settings_are_refused_by_name_and_change_nothing(make, match):
    opt = _optimizer(0.5)
    children = _children(opt)               # (for the composites)
    before = {key: value for key, value in opt.param_groups[0].items() if key != "params"}
    with pytest.raises(OptimizerError, match="lr_scheduler." + match):
        make(opt, children)
    assert {key: value for key, value in opt.param_groups[0].items()
            if key != "params"} == before                         # no group changed
    assert run(lr_scheduler.ChainedScheduler(children), 3) == pytest.approx(
        [0.25, 0.225, 0.405, 0.3645], rel=1e-14)                  # the schedulers go on


@pytest.mark.parametrize("make, match", [
    (lambda opt: lr_scheduler.SequentialLR(opt, lr_scheduler.StepLR(opt, 2), []),
     "SequentialLR: schedulers must be a list of schedulers, got a StepLR"),
    (lambda opt: lr_scheduler.SequentialLR(opt, [lr_scheduler.StepLR(opt, 2), abs], [1]),
     r"SequentialLR: schedulers\[1\] must be a scheduler of lr_scheduler, got a "
     "builtin_function_or_method"),
    (lambda opt: lr_scheduler.SequentialLR([opt], [lr_scheduler.StepLR(opt, 2)], []),
     "SequentialLR schedules an optimizer of tnp.optim"),
    (lambda opt: lr_scheduler.ChainedScheduler([lr_scheduler.StepLR(opt, 2)], optimizer=1),
     "ChainedScheduler schedules an optimizer of tnp.optim"),
    (lambda opt: lr_scheduler.ChainedScheduler([None]),
     r"ChainedScheduler: schedulers\[0\] must be a scheduler of lr_scheduler, got a NoneType"),
    (lambda opt: lr_scheduler.CyclicLR("sgd", 0.1, 1.0),
     "CyclicLR schedules an optimizer of tnp.optim"),
])
def test_what_is_not_a_scheduler_or_an_optimizer_is_refused_as_a_type_error(make, match):
    with pytest.raises(TensorTypeError, match="lr_scheduler." + match):
        make(_optimizer())


def test_a_refused_state_dict_leaves_a_sequential_scheduler_going_on():
    opt = _optimizer()
    scheduler = lr_scheduler.SequentialLR(opt, _children(opt), milestones=[2])
    run(scheduler, 1)
    state = scheduler.state_dict()
    for bad, match in [({**state, "_schedulers": state["_schedulers"][:1]},
                        "the state dict has 1 schedulers' states under '_schedulers', this "
                        "scheduler has 2"),
                       ({**state, "_schedulers": [state["_schedulers"][0], 3]},
                        "ExponentialLR.load_state_dict: expected the dict"),
                       ([("last_epoch", 5)], "SequentialLR.load_state_dict: expected the dict")]:
        with pytest.raises(OptimizerError, match=match):
            scheduler.load_state_dict(bad)
    assert scheduler.state_dict() == state
    assert run(scheduler, 3)[1:] == pytest.approx([1.0, 0.9, 0.81])


def test_a_composite_inside_a_sequential_one_only_goes_first():
    opt = _optimizer()
    chained = lr_scheduler.ChainedScheduler(_children(opt))
    scheduler = lr_scheduler.SequentialLR(opt, [lr_scheduler.StepLR(opt, 5), chained], [1])
    opt.step()
    with pytest.raises(OptimizerError, match="a ChainedScheduler in a SequentialLR can only "
                                             "be its first scheduler"):
        scheduler.step()
    assert scheduler.last_epoch == 0


# --- resumed runs -----------------------------------------------------------------------------


def _make_run(name, cls="SGD"):
    ts = [tnp.tensor(s.copy(), requires_grad=True) for s in STARTS]
    opt = getattr(optim, cls)([{"params": ts[:1]}, {"params": ts[1:], "lr": 0.03}], lr=0.1,
                              **OPTIMIZERS[cls])
    return ts, opt, MAKERS[name](lr_scheduler, opt)


def _train(ts, opt, scheduler, steps) -> list:
    seen = []
    for _ in range(steps):
        for t, g in zip(ts, _grads([np.asarray(t.data) for t in ts])):
            t.grad = g
        opt.step()
        scheduler.step()
        seen.append(_hyper(opt))
    return seen


@pytest.mark.parametrize("through_pickle", [False, True])
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_resumed_run_is_the_run_that_went_on(name, through_pickle):
    ts, opt, scheduler = _make_run(name, "Adam" if "Cyclic" in name else "SGD")
    _train(ts, opt, scheduler, 7)
    saved = ([np.asarray(t.data).copy() for t in ts], opt.state_dict(), scheduler.state_dict())
    if through_pickle:
        saved = pickle.loads(pickle.dumps(saved))
    want = _train(ts, opt, scheduler, 16)
    ts2, opt2, scheduler2 = _make_run(name, "Adam" if "Cyclic" in name else "SGD")
    for t, data in zip(ts2, saved[0]):      # torch's order: make them, then load both
        t.data = data
    opt2.load_state_dict(saved[1])
    scheduler2.load_state_dict(saved[2])
    assert _train(ts2, opt2, scheduler2, 16) == want
    assert scheduler2.get_last_lr() == scheduler.get_last_lr()
    assert all(np.array_equal(a.data, b.data) for a, b in zip(ts, ts2))


def test_a_state_dict_is_a_copy():
    opt = _optimizer()
    scheduler = lr_scheduler.SequentialLR(opt, _children(opt), milestones=[2])
    state = scheduler.state_dict()
    state["_schedulers"][1]["gamma"] = 7.0
    state["_milestones"].append(9)
    assert scheduler._schedulers[1].gamma == 0.9 and scheduler._milestones == [2]
    scheduler.load_state_dict(state)
    state["_schedulers"][1]["gamma"] = 3.0
    assert scheduler._schedulers[1].gamma == 7.0 and "_schedulers" in state


# --- groups added later -----------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_group_added_later_is_refused(name):
    ts, opt, scheduler = _make_run(name)
    opt.add_param_group({"params": [tnp.tensor([2.0], requires_grad=True)]})
    opt.step()
    with pytest.raises(OptimizerError, match="the optimizer has 3 parameter groups, the "
                                             "scheduler was made for 2"):
        scheduler.step()
    if name.startswith("CosineAnnealingWarmRestarts"):
        with pytest.raises(OptimizerError, match="3 parameter groups"):
            scheduler.step(3.5)


def test_a_sequence_of_schedulers_needs_every_groups_initial_lr():
    opt = _optimizer(0.5)
    children = _children(opt)
    opt.add_param_group({"params": [tnp.tensor([2.0], requires_grad=True)], "lr": 0.2})
    with pytest.raises(OptimizerError, match=r"SequentialLR: param_groups\[1\] has no "
                                             "'initial_lr' .add groups before making"):
        lr_scheduler.SequentialLR(opt, children, milestones=[2])
    assert [g["lr"] for g in opt.param_groups] == [0.25, 0.2]      # nothing reset


# --- against torch ----------------------------------------------------------------------------


def _pair(torch, cls, groups=2):
    ts = [tnp.tensor(s.copy(), requires_grad=True) for s in STARTS]
    ps = [torch.tensor(s.copy(), requires_grad=True) for s in STARTS]
    if groups == 2:
        ours = getattr(optim, cls)([{"params": ts[:1]}, {"params": ts[1:], "lr": 0.03}],
                                   lr=0.1, **OPTIMIZERS[cls])
        theirs = getattr(torch.optim, cls)([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.03}],
                                           lr=0.1, **OPTIMIZERS[cls])
    else:
        ours = getattr(optim, cls)(ts, lr=0.1, **OPTIMIZERS[cls])
        theirs = getattr(torch.optim, cls)(ps, lr=0.1, **OPTIMIZERS[cls])
    return ts, ps, ours, theirs


def _step_both(torch, ts, ps, ours, theirs):
    for t, p, g in zip(ts, ps, _grads([np.asarray(t.data) for t in ts])):
        t.grad, p.grad = g, torch.tensor(g)
    ours.step()
    theirs.step()


def _assert_same(ours, theirs, mine, yours):
    assert _hyper(ours) == _hyper(theirs)                 # the same floats, momenta too
    assert mine.get_last_lr() == yours.get_last_lr()
    assert getattr(mine, "last_epoch", None) == getattr(yours, "last_epoch", None)


def _steps_agree(steps, torch, ts, ps, ours, theirs, mine, yours):
    """``steps`` training steps of both, each scheduler stepped after its optimizer, the
    rates and momenta compared before each and after the last; the rates seen."""
    seen = set()
    for _ in range(steps):
        _assert_same(ours, theirs, mine, yours)
        seen.add(tuple(mine.get_last_lr()))
        _step_both(torch, ts, ps, ours, theirs)
        mine.step()
        yours.step()
    _assert_same(ours, theirs, mine, yours)
    return seen


@pytest.mark.parametrize("cls", sorted(OPTIMIZERS))
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_rates_momenta_and_parameters_match_torch(name, cls):
    torch = pytest.importorskip("torch", reason="the peer: torch.optim.lr_scheduler")
    ts, ps, ours, theirs = _pair(torch, cls)
    mine, yours = MAKERS[name](lr_scheduler, ours), MAKERS[name](torch.optim.lr_scheduler, theirs)
    seen = _steps_agree(40, torch, ts, ps, ours, theirs, mine, yours)
    assert len(seen) > 3                                    # the rates did move
    for t, p in zip(ts, ps):
        np.testing.assert_allclose(t.data, p.detach().numpy(), rtol=1e-12, atol=1e-15)


def _keys(state) -> dict:
    """A state dict's keys, its schedulers' too (torch's own flag for get_lr calls aside)."""
    return {key: ([_keys(s) for s in value] if key == "_schedulers" else None)
            for key, value in state.items() if key != "_get_lr_called_within_step"}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_torch_state_dict_loads_and_continues_as_torch(name):
    torch = pytest.importorskip("torch", reason="the peer: torch.optim.lr_scheduler")
    cls = "Adam" if "Cyclic" in name else "SGD"
    ts, ps, ours, theirs = _pair(torch, cls)
    mine, yours = MAKERS[name](lr_scheduler, ours), MAKERS[name](torch.optim.lr_scheduler, theirs)
    assert _keys(mine.state_dict()) == _keys(yours.state_dict())     # torch's layout
    for _ in range(6):
        _step_both(torch, ts, ps, ours, theirs)
        yours.step()
    for group, theirs_group in zip(ours.param_groups, theirs.param_groups):
        for key in group.keys() & theirs_group.keys() - {"params"}:
            group[key] = theirs_group[key]     # what the optimizer's state dict would bring
    mine.load_state_dict(yours.state_dict())
    _steps_agree(20, torch, ts, ps, ours, theirs, mine, yours)


@pytest.mark.parametrize("name", ["PolynomialLR", "CosineAnnealingWarmRestarts",
                                  "CyclicLR_triangular", "CyclicLR_exp_range"])
def test_last_epoch_resumes_from_initial_lr_as_torch(name):
    torch = pytest.importorskip("torch", reason="the peer: torch.optim.lr_scheduler")
    ts, ps, ours, theirs = _pair(torch, "SGD")
    for opt in (ours, theirs):
        for group, initial in zip(opt.param_groups, (0.4, 0.2)):
            group["initial_lr"] = initial
    mine = MAKERS[name](lr_scheduler, ours, last_epoch=3)
    yours = MAKERS[name](torch.optim.lr_scheduler, theirs, last_epoch=3)
    for _ in range(15):
        _assert_same(ours, theirs, mine, yours)
        _step_both(torch, ts, ps, ours, theirs)
        mine.step()
        yours.step()


def test_polynomial_step_with_an_epoch_matches_torch():
    torch = pytest.importorskip("torch", reason="the peer: torch.optim.lr_scheduler")
    ts, ps, ours, theirs = _pair(torch, "SGD")
    mine, yours = (MAKERS["PolynomialLR"](lr_scheduler, ours),
                   MAKERS["PolynomialLR"](torch.optim.lr_scheduler, theirs))
    _step_both(torch, ts, ps, ours, theirs)
    for epoch in (4, 12, 2, 9, 0, 7):
        with pytest.warns(UserWarning, match="deprecated"):
            mine.step(epoch)
        with pytest.warns(UserWarning):
            yours.step(epoch)
        _assert_same(ours, theirs, mine, yours)


@EXAMPLES
@given(total_iters=st.integers(1, 15), power=st.one_of(st.sampled_from([0.0, 0.5, 1.0, 2.0]),
                                                       st.floats(0.0, 5.0)),
       cls=st.sampled_from(sorted(OPTIMIZERS)), steps=st.integers(1, 25))
def test_polynomial_matches_torch_over_settings(total_iters, power, cls, steps):
    torch = pytest.importorskip("torch", reason="the peer: torch.optim.lr_scheduler")
    ts, ps, ours, theirs = _pair(torch, cls)
    mine = lr_scheduler.PolynomialLR(ours, total_iters, power)
    yours = torch.optim.lr_scheduler.PolynomialLR(theirs, total_iters, power)
    for _ in range(steps):
        _step_both(torch, ts, ps, ours, theirs)
        mine.step()
        yours.step()
        _assert_same(ours, theirs, mine, yours)


def _restart_epochs(t_0, t_mult):
    """The epochs at which periods start (where the period's logarithm is the most fragile)."""
    return [t_0 * (t_mult ** n - 1) // (t_mult - 1) if t_mult > 1 else t_0 * n
            for n in range(1, 6)]


@EXAMPLES
@given(t_0=st.integers(1, 6), t_mult=st.integers(1, 3),
       eta_min=st.sampled_from([0.0, 0.001, 0.05]), data=st.data())
def test_warm_restarts_match_torch_at_any_epochs(t_0, t_mult, eta_min, data):
    torch = pytest.importorskip("torch", reason="the peer: torch.optim.lr_scheduler")
    moves = data.draw(st.lists(st.one_of(
        st.none(), st.floats(0, 80), st.integers(0, 80),
        st.sampled_from(_restart_epochs(t_0, t_mult))), max_size=30))
    ts, ps, ours, theirs = _pair(torch, data.draw(st.sampled_from(sorted(OPTIMIZERS))))
    mine = lr_scheduler.CosineAnnealingWarmRestarts(ours, t_0, t_mult, eta_min)
    yours = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(theirs, t_0, t_mult, eta_min)
    for epoch in moves:
        _step_both(torch, ts, ps, ours, theirs)
        mine.step(epoch)
        yours.step(epoch)
        _assert_same(ours, theirs, mine, yours)
        assert (mine.T_cur, mine.T_i) == (yours.T_cur, yours.T_i)


@EXAMPLES
@given(up=st.one_of(st.integers(1, 8), st.floats(0.5, 8.0)),
       down=st.one_of(st.none(), st.integers(0, 8)),
       mode=st.sampled_from(["triangular", "triangular2", "exp_range"]),
       gamma=st.sampled_from([1.0, 0.99, 0.9]),
       scale=st.sampled_from([None, "cycle", "iterations"]),
       cycle_momentum=st.booleans(), cls=st.sampled_from(sorted(OPTIMIZERS)),
       per_group=st.booleans(), steps=st.integers(1, 50))
def test_cyclic_matches_torch_over_settings(up, down, mode, gamma, scale, cycle_momentum, cls,
                                            per_group, steps):
    torch = pytest.importorskip("torch", reason="the peer: torch.optim.lr_scheduler")
    ts, ps, ours, theirs = _pair(torch, cls)
    kwargs = {"step_size_up": up, "step_size_down": down, "mode": mode, "gamma": gamma,
              "cycle_momentum": cycle_momentum,
              "base_momentum": [0.8, 0.7] if per_group else 0.85}
    if scale is not None:
        kwargs.update(scale_fn=lambda x: 1 / (1 + 0.1 * x) ** 0.5, scale_mode=scale)
    base, top = ([0.01, 0.002], [0.3, 0.05]) if per_group else (0.01, 0.2)
    mine = lr_scheduler.CyclicLR(ours, base, top, **kwargs)
    yours = torch.optim.lr_scheduler.CyclicLR(theirs, base, top, **kwargs)
    _steps_agree(steps, torch, ts, ps, ours, theirs, mine, yours)
    for t, p in zip(ts, ps):
        np.testing.assert_allclose(t.data, p.detach().numpy(), rtol=1e-12, atol=1e-15)


CHILDREN = {
    "ConstantLR": lambda m, opt: m.ConstantLR(opt, 0.4, 3),
    "LinearLR": lambda m, opt: m.LinearLR(opt, 0.2, total_iters=4),
    "ExponentialLR": lambda m, opt: m.ExponentialLR(opt, 0.9),
    "StepLR": lambda m, opt: m.StepLR(opt, 2, 0.5),
    "CosineAnnealingLR": lambda m, opt: m.CosineAnnealingLR(opt, 5, 0.001),
    "PolynomialLR": lambda m, opt: m.PolynomialLR(opt, 6, 1.5),
    "CosineAnnealingWarmRestarts": lambda m, opt: m.CosineAnnealingWarmRestarts(opt, 2, 2),
    "CyclicLR": lambda m, opt: m.CyclicLR(opt, 0.01, 0.1, 3),
    "LambdaLR": lambda m, opt: m.LambdaLR(opt, lambda e: 1 / (1 + e)),
}


@EXAMPLES
@given(data=st.data(), chained=st.booleans(), cls=st.sampled_from(sorted(OPTIMIZERS)))
def test_sequences_and_chains_match_torch(data, chained, cls):
    torch = pytest.importorskip("torch", reason="the peer: torch.optim.lr_scheduler")
    names = data.draw(st.lists(st.sampled_from(sorted(CHILDREN)), min_size=1, max_size=4))
    milestones = sorted(data.draw(st.lists(st.integers(0, 20), min_size=len(names) - 1,
                                           max_size=len(names) - 1)))
    ts, ps, ours, theirs = _pair(torch, cls)

    def make(m, opt):
        children = [CHILDREN[name](m, opt) for name in names]
        return (m.ChainedScheduler(children) if chained
                else m.SequentialLR(opt, children, milestones))

    mine, yours = make(lr_scheduler, ours), make(torch.optim.lr_scheduler, theirs)
    _steps_agree(30, torch, ts, ps, ours, theirs, mine, yours)
    assert _keys(mine.state_dict()) == _keys(yours.state_dict())
