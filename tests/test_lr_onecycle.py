"""``lr_scheduler.OneCycleLR``: the 1cycle policy, against its formula written out here, and
against ``torch.optim.lr_scheduler.OneCycleLR`` where torch is installed (learning rates and
momenta the same floats, step by step, and the parameters the optimizers reach)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor import optim
from primitives.tensor.optim import OptimizerError, lr_scheduler
from lr_helpers import rates_and_momenta

OneCycle = lr_scheduler.OneCycleLR
STARTS = [np.array([1.0, -2.0]), np.array([0.5])]


def _cos(start, end, pct):
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


def test_two_phases_follow_the_cosine_formula():
    opt = optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=0.1, momentum=0.9)
    scheduler = OneCycle(opt, max_lr=2.0, total_steps=20, pct_start=0.25)
    rates, momenta = rates_and_momenta(opt, scheduler, 20)
    initial, top = 2.0 / 25, 2.0
    final = initial / 1e4
    up = 0.25 * 20 - 1                                 # the step at which the rate peaks
    for step, (rate, momentum) in enumerate(zip(rates, momenta)):
        if step <= up:
            pct = step / up
            expected = (_cos(initial, top, pct), _cos(0.95, 0.85, pct))
        else:
            pct = (step - up) / (19 - up)
            expected = (_cos(top, final, pct), _cos(0.85, 0.95, pct))
        assert (rate, momentum) == pytest.approx(expected, rel=1e-14, abs=1e-17)
    assert rates[4] == pytest.approx(2.0) and rates[19] == pytest.approx(final)


def test_epochs_times_steps_per_epoch_is_total_steps():
    def run(**kwargs):
        opt = optim.Adam([tnp.tensor([1.0], requires_grad=True)], lr=0.1)
        return rates_and_momenta(opt, OneCycle(opt, max_lr=0.5, **kwargs), 12)
    assert run(total_steps=12) == run(epochs=3, steps_per_epoch=4)


def test_stepping_past_the_cycle_raises_by_name():
    opt = optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=0.1)
    scheduler = OneCycle(opt, max_lr=1.0, total_steps=3, cycle_momentum=False)
    for _ in range(3):
        opt.step()
        scheduler.step()
    with pytest.raises(OptimizerError, match="OneCycleLR: stepped 4 times, past its "
                                             "total_steps of 3"):
        scheduler.step()


@pytest.mark.parametrize("kwargs, match", [
    (dict(), "give total_steps, or epochs and steps_per_epoch"),
    (dict(epochs=2), "give total_steps"),
    (dict(total_steps=0), "total_steps must be a positive integer"),
    (dict(total_steps=10, pct_start=1.5), r"pct_start must be in \[0, 1\]"),
    (dict(total_steps=10, anneal_strategy="exp"), "anneal_strategy must be 'cos' or 'linear'"),
    (dict(total_steps=10, div_factor=0), "div_factor must be a positive"),
    (dict(total_steps=10, max_momentum=[0.9, 0.9]), "max_momentum has 2 values for 1"),
])
def test_bad_settings_are_refused_by_name(kwargs, match):
    opt = optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=0.1, momentum=0.5)
    with pytest.raises(OptimizerError, match="OneCycleLR: " + match):
        OneCycle(opt, max_lr=1.0, **kwargs)


def test_resumed_from_state_dicts_as_the_run_that_went_on():
    def make():
        ts = [tnp.tensor(s.copy(), requires_grad=True) for s in STARTS]
        opt = optim.SGD(ts, lr=0.1, momentum=0.9)
        return ts, opt, OneCycle(opt, max_lr=1.0, total_steps=16, three_phase=True)

    def steps(ts, opt, scheduler, count):
        for _ in range(count):
            for t in ts:
                t.grad = np.cos(np.asarray(t.data)) + 0.1 * np.asarray(t.data) ** 3
            opt.step()
            scheduler.step()

    ts, opt, scheduler = make()
    steps(ts, opt, scheduler, 6)
    saved = ([np.asarray(t.data).copy() for t in ts], opt.state_dict(), scheduler.state_dict())
    steps(ts, opt, scheduler, 10)
    ts2, opt2, scheduler2 = make()                 # torch's order: make, then load both
    for t, data in zip(ts2, saved[0]):
        t.data = data
    opt2.load_state_dict(saved[1])
    scheduler2.load_state_dict(saved[2])
    steps(ts2, opt2, scheduler2, 10)
    assert all(np.array_equal(a.data, b.data) for a, b in zip(ts, ts2))
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]


@pytest.mark.parametrize("optimizer", ["SGD", "Adam", "RMSprop"])
@pytest.mark.parametrize("anneal_strategy", ["cos", "linear"])
@pytest.mark.parametrize("three_phase", [False, True])
@pytest.mark.parametrize("cycle_momentum", [True, False])
def test_rates_momenta_and_parameters_match_torch(optimizer, anneal_strategy, three_phase,
                                                   cycle_momentum):
    torch = pytest.importorskip("torch", reason="the peer: torch.optim.lr_scheduler")
    kwargs = {"SGD": dict(momentum=0.9), "Adam": {}, "RMSprop": dict(momentum=0.5)}[optimizer]
    ts = [tnp.tensor(s.copy(), requires_grad=True) for s in STARTS]
    ps = [torch.tensor(s.copy(), requires_grad=True) for s in STARTS]
    ours = getattr(optim, optimizer)([{"params": ts[:1]}, {"params": ts[1:]}], lr=0.1,
                                     **kwargs)
    theirs = getattr(torch.optim, optimizer)([{"params": ps[:1]}, {"params": ps[1:]}], lr=0.1,
                                             **kwargs)
    settings = dict(max_lr=[0.8, 0.3], total_steps=15, anneal_strategy=anneal_strategy,
                    three_phase=three_phase, cycle_momentum=cycle_momentum,
                    base_momentum=[0.8, 0.7], pct_start=0.4)
    mine, yours = OneCycle(ours, **settings), torch.optim.lr_scheduler.OneCycleLR(theirs,
                                                                                **settings)
    key = "betas" if optimizer == "Adam" else "momentum"
    for _ in range(15):
        assert [g["lr"] for g in ours.param_groups] == [g["lr"] for g in theirs.param_groups]
        assert [g[key] for g in ours.param_groups] == [g[key] for g in theirs.param_groups]
        for t, p in zip(ts, ps):
            g = np.cos(np.asarray(t.data)) + 0.1 * np.asarray(t.data) ** 3
            t.grad, p.grad = g, torch.tensor(g)
        ours.step()
        theirs.step()
        mine.step()
        yours.step()
        assert mine.get_last_lr() == yours.get_last_lr()
    for t, p in zip(ts, ps):
        np.testing.assert_allclose(t.data, p.detach().numpy(), rtol=1e-12)
