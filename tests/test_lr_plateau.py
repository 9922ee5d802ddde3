"""``lr_scheduler.ReduceLROnPlateau``: torch's rule (patience, cooldown, thresholds, floors),
checked by hand-traced runs here and against ``torch.optim.lr_scheduler`` where it is
installed (random metric sequences and settings, the same learning rates exactly)."""

from __future__ import annotations

import math
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

Plateau = lr_scheduler.ReduceLROnPlateau


def _optimizer(lrs=(1.0,)):
    groups = [{"params": [tnp.tensor([1.0], requires_grad=True)], "lr": lr} for lr in lrs]
    return optim.SGD(groups, lr=lrs[0])


def _rates(scheduler, metrics) -> list:
    rates = []
    for metric in metrics:
        scheduler.step(metric)
        rates.append(scheduler.get_last_lr())
    return rates


# --- hand-traced runs ------------------------------------------------------------------------


def test_patience_counts_epochs_without_improvement():
    scheduler = Plateau(_optimizer(), factor=0.5, patience=2)
    # best 1.0; 0.99995 is not 1e-4 below it, so it is a bad epoch too; the third bad
    # epoch (> patience) halves the rate and starts the count again
    rates = _rates(scheduler, [1.0, 0.99995, 1.2, 1.1, 0.999, 1.0, 1.0, 1.0])
    assert [r[0] for r in rates] == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25]
    assert scheduler.best == 0.999 and scheduler.last_epoch == 8


def test_max_mode_with_an_absolute_threshold():
    scheduler = Plateau(_optimizer(), mode="max", factor=0.1, patience=0, threshold=0.5,
                        threshold_mode="abs")
    # an improvement must exceed best + 0.5; patience 0: every bad epoch reduces
    rates = _rates(scheduler, [1.0, 1.4, 1.6, 2.0])
    assert [r[0] for r in rates] == pytest.approx([1.0, 0.1, 0.1, 0.01], rel=1e-15)
    assert scheduler.best == 1.6


def test_cooldown_ignores_bad_epochs_then_counts_again():
    scheduler = Plateau(_optimizer(), factor=0.5, patience=0, cooldown=2)
    rates = _rates(scheduler, [1.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    # reduce at epoch 2; epochs 3 and 4 are the cooldown; epoch 5 reduces again
    assert [r[0] for r in rates] == [1.0, 0.5, 0.5, 0.5, 0.25, 0.25]
    assert scheduler.in_cooldown


def test_rates_stop_at_min_lr_per_group_and_changes_within_eps_are_skipped():
    scheduler = Plateau(_optimizer((1.0, 0.01)), factor=0.1, patience=0, min_lr=[0.05, 0.0],
                        eps=1e-3)
    rates = _rates(scheduler, [1.0, 1.0, 1.0, 1.0])
    # group 0: 0.1, then the floor 0.05; group 1: 0.001, then 1e-4 is a change of 9e-4 <= eps
    assert rates[1] == pytest.approx([0.1, 0.001]) and rates[2] == pytest.approx([0.05, 0.001])
    assert rates[3] == pytest.approx([0.05, 0.001])


def test_a_change_of_exactly_eps_is_skipped_as_in_torch():
    scheduler = Plateau(_optimizer(), factor=0.5, patience=0, eps=0.5)
    assert [r[0] for r in _rates(scheduler, [1.0, 1.0])] == [1.0, 1.0]     # 1.0 - 0.5 is eps
    scheduler = Plateau(_optimizer(), factor=0.5, patience=0, eps=0.4999)
    assert [r[0] for r in _rates(scheduler, [1.0, 1.0])] == [1.0, 0.5]


def test_the_metric_may_be_a_loss_tensor_or_a_one_element_array():
    w = tnp.tensor([3.0], requires_grad=True)
    opt = optim.SGD([w], lr=1.0)
    scheduler = Plateau(opt, patience=0)
    loss = tnp.sum(w * w)                       # requires grad: read as a value
    scheduler.step(loss)
    scheduler.step(np.array([[9.0]]))
    scheduler.step(np.float32(9.0))
    assert scheduler.best == 9.0 and scheduler.get_last_lr() == [pytest.approx(0.01)]
    assert loss.backward().grad(w) == pytest.approx([6.0])       # the tensor is untouched


@pytest.mark.parametrize("metric, match", [
    (np.array([1.0, 2.0]), r"one element, got ndarray of shape \(2,\)"),
    (tnp.tensor([1.0, 2.0], requires_grad=True), r"got Tensor of shape \(2,\)"),
    (1 + 2j, "got complex"),
    ("low", "got str"),
    (None, "got NoneType"),
])
def test_a_metric_that_is_not_one_real_number_is_refused_by_name(metric, match):
    scheduler = Plateau(_optimizer(), patience=0)
    with pytest.raises(OptimizerError, match="ReduceLROnPlateau.step: the metric .*" + match):
        scheduler.step(metric)
    scheduler.step(1.0)                         # still usable
    assert scheduler.best == 1.0 and scheduler.last_epoch == 1


@pytest.mark.parametrize("kwargs, match", [
    (dict(factor=1.0), "factor must be below 1"),
    (dict(factor="0.5"), "factor must be a real number"),
    (dict(patience=1.5), "patience must be a integer|patience must be an integer"),
    (dict(cooldown=None), "cooldown must be"),
    (dict(mode="lowest"), "mode must be 'min' or 'max', got 'lowest'"),
    (dict(threshold_mode="relative"), "threshold_mode must be 'rel' or 'abs'"),
    (dict(min_lr=[0.0, 0.0]), "min_lr has 2 values for 1 parameter groups"),
    (dict(eps="tiny"), "eps must be"),
])
def test_bad_settings_are_refused_by_name(kwargs, match):
    with pytest.raises(OptimizerError, match="ReduceLROnPlateau: " + match):
        Plateau(_optimizer(), **kwargs)


def test_an_object_that_is_not_an_optimizer_is_refused():
    with pytest.raises(TensorTypeError, match="ReduceLROnPlateau schedules an optimizer"):
        Plateau([tnp.tensor([1.0])])


def test_a_group_added_later_needs_min_lrs_for_it_when_they_were_per_group():
    opt = _optimizer()
    per_group = Plateau(opt, patience=0, min_lr=[0.0])
    shared = Plateau(opt, patience=0, min_lr=0.2)
    opt.add_param_group({"params": [tnp.tensor([2.0], requires_grad=True)], "lr": 0.5})
    per_group.step(1.0)
    with pytest.raises(OptimizerError, match="2 parameter groups, min_lr gives 1"):
        per_group.step(2.0)
    shared.step(1.0)
    shared.step(2.0)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.2, 0.2])


@pytest.mark.parametrize("through_pickle", [False, True])
def test_a_resumed_scheduler_continues_as_the_one_that_went_on(through_pickle):
    metrics = [1.0, 0.8, 0.9, 0.85, 0.95, 0.7, 0.9, 0.9, 0.9, 0.9]
    whole = Plateau(_optimizer((1.0, 0.3)), factor=0.5, patience=1, cooldown=1)
    expected = _rates(whole, metrics)
    opt = _optimizer((1.0, 0.3))
    first = Plateau(opt, factor=0.5, patience=1, cooldown=1)
    got = _rates(first, metrics[:5])
    saved = (first.state_dict(), opt.state_dict())
    if through_pickle:
        saved = pickle.loads(pickle.dumps(saved))
    opt2 = _optimizer((1.0, 0.3))
    opt2.load_state_dict(saved[1])
    second = Plateau(opt2)                  # other settings: the state dict brings them
    second.load_state_dict(saved[0])
    got += _rates(second, metrics[5:])
    assert got == expected


def test_load_state_dict_checks_the_modes_it_takes():
    scheduler = Plateau(_optimizer())
    state = scheduler.state_dict()
    state["mode"] = "sideways"
    with pytest.raises(OptimizerError, match="mode must be 'min' or 'max', got 'sideways'"):
        scheduler.load_state_dict(state)


def test_step_with_an_epoch_is_deprecated_as_in_torch():
    scheduler = Plateau(_optimizer())
    with pytest.warns(UserWarning, match="deprecated"):
        scheduler.step(1.0, epoch=5)
    assert scheduler.last_epoch == 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scheduler.step(1.0)                 # no warning without an epoch
    assert scheduler.last_epoch == 6


# --- against torch ----------------------------------------------------------------------------


SETTINGS = st.fixed_dictionaries({
    "mode": st.sampled_from(["min", "max"]),
    "factor": st.sampled_from([0.1, 0.5, 0.9]),
    "patience": st.integers(0, 3),
    "threshold": st.sampled_from([0.0, 1e-4, 0.05, 0.3]),
    "threshold_mode": st.sampled_from(["rel", "abs"]),
    "cooldown": st.integers(0, 2),
    "min_lr": st.sampled_from([0.0, 1e-3, [0.0, 0.01]]),
    "eps": st.sampled_from([1e-8, 1e-3]),
})
METRICS = st.lists(st.one_of(st.floats(-3, 3, allow_nan=False), st.just(math.nan),
                             st.sampled_from([0.0, 1.0, -1.0])), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(settings_=SETTINGS, metrics=METRICS)
def test_rates_and_state_match_torch(settings_, metrics):
    torch = pytest.importorskip("torch", reason="the peer: torch.optim.lr_scheduler")
    ours = Plateau(_optimizer((1.0, 0.3)), **settings_)
    params = [torch.zeros(1, requires_grad=True) for _ in range(2)]
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(
        torch.optim.SGD([{"params": params[:1], "lr": 1.0}, {"params": params[1:], "lr": 0.3}]),
        **settings_)
    for metric in metrics:
        ours.step(metric)
        theirs.step(metric)
        assert ours.get_last_lr() == theirs.get_last_lr()          # the same floats
        assert (ours.num_bad_epochs, ours.cooldown_counter, ours.last_epoch) == \
            (theirs.num_bad_epochs, theirs.cooldown_counter, theirs.last_epoch)
        assert ours.best == theirs.best or (math.isnan(ours.best) and math.isnan(theirs.best))
    assert set(ours.state_dict()) == set(theirs.state_dict())     # torch's layout


def test_a_torch_state_dict_loads_and_continues_as_torch():
    torch = pytest.importorskip("torch", reason="the peer: torch.optim.lr_scheduler")
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0), factor=0.5, patience=1)
    ours = Plateau(_optimizer(), factor=0.5, patience=1)
    for metric in [1.0, 1.1, 1.2, 0.9]:
        theirs.step(metric)
    ours.load_state_dict(theirs.state_dict())
    ours.optimizer.param_groups[0]["lr"] = theirs.optimizer.param_groups[0]["lr"]
    for metric in [1.0, 1.0, 1.0, 0.5, 0.6]:
        theirs.step(metric)
        ours.step(metric)
        assert ours.get_last_lr() == theirs.get_last_lr()
