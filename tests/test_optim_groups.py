"""The eager optimizers' parameter groups, state dicts and learning-rate schedulers,
against ``torch.optim`` and ``torch.optim.lr_scheduler`` on the same problems.

- ``param_groups``: per-group hyperparameters (defaulting to the constructor's) give
  torch's parameters; changing ``param_groups[i]["lr"]`` (or adding a group) changes
  the next step as it does in torch.
- ``state_dict`` / ``load_state_dict``: torch's layout; a resumed run is bit-identical
  to an uninterrupted one; the saved dict and the live state share no memory, either way.
- ``lr_scheduler``: the learning rates torch's schedulers set, epoch by epoch, exactly.
- Misuse raises an ``OptimizerError`` (a ``TiduError``) naming the problem.
"""

from __future__ import annotations

import importlib
import pickle
import warnings

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor import optim
from primitives.tensor.optim import OptimizerError, lr_scheduler
from tidu import TiduError

torch = pytest.importorskip("torch", reason="these tests compare with torch.optim")

STARTS = [np.array([[1.0, -2.0], [0.5, 3.0]]), np.array([0.3, -0.7, 1.1]), np.array([-1.5])]


def _grads(values):
    """A quartic-ish loss's gradients (they change as the parameters move)."""
    return [np.cos(v) * v + np.sin(v) + 0.1 * (i + 1) * v ** 3 for i, v in enumerate(values)]


def _ours(starts=STARTS):
    return [tnp.tensor(s.copy(), requires_grad=True) for s in starts]


def _theirs(starts=STARTS):
    return [torch.tensor(s.copy(), requires_grad=True) for s in starts]


def _step_ours(opt, ts):
    for t, g in zip(ts, _grads([np.asarray(t.data) for t in ts])):
        t.grad = g
    opt.step()


def _step_theirs(opt, ps):
    for p, g in zip(ps, _grads([p.detach().numpy() for p in ps])):
        p.grad = torch.tensor(g)
    opt.step()


def _groups(params, grouping):
    """``grouping``: a list of (indices, hyperparameters) pairs."""
    return [{"params": [params[i] for i in indices], **hyper} for indices, hyper in grouping]


CASES = {
    "SGD": ("SGD", dict(lr=0.05, momentum=0.9),
            [([0], {}), ([1, 2], dict(lr=0.01, momentum=0.5, dampening=0.1,
                                      weight_decay=0.02))]),
    "SGD_nesterov": ("SGD", dict(lr=0.05),
                     [([2, 0], dict(momentum=0.8, nesterov=True)), ([1], {})]),
    "Adam": ("Adam", dict(lr=0.02),
             [([0, 1], dict(betas=(0.8, 0.99), eps=1e-6)), ([2], dict(lr=0.1,
                                                                     weight_decay=0.1))]),
    "AdamW": ("AdamW", dict(lr=0.02, weight_decay=0.05),
              [([1], dict(weight_decay=0.3)), ([0, 2], dict(lr=0.005))]),
    "RMSprop": ("RMSprop", dict(lr=0.01, alpha=0.9),
                [([0], dict(centered=True, momentum=0.5)), ([1, 2], dict(lr=0.003,
                                                                        weight_decay=0.1))]),
}


def _make(case, ts, ps):
    cls, defaults, grouping = CASES[case]
    return (getattr(optim, cls)(_groups(ts, grouping), **defaults),
            getattr(torch.optim, cls)(_groups(ps, grouping), **defaults))


def _assert_params_close(ts, ps):
    for t, p in zip(ts, ps):
        np.testing.assert_allclose(t.data, p.detach().numpy(), rtol=1e-12, atol=1e-15)


# --- param_groups ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_groups_match_torch(case):
    ts, ps = _ours(), _theirs()
    ours, theirs = _make(case, ts, ps)
    assert len(ours.param_groups) == len(theirs.param_groups) == 2
    grouping = CASES[case][2]
    for mine, yours, (indices, _) in zip(ours.param_groups, theirs.param_groups, grouping):
        # every hyperparameter there is, with torch's value (torch has more: foreach, ...)
        assert set(mine) - {"params"} == set(ours.defaults)
        for key in ours.defaults:
            assert mine[key] == yours[key], key
        assert [id(t) for t in mine["params"]] == [id(ts[i]) for i in indices]
    for _ in range(6):
        _step_ours(ours, ts)
        _step_theirs(theirs, ps)
    assert not np.allclose(ts[0].data, STARTS[0])
    _assert_params_close(ts, ps)


@pytest.mark.parametrize("case", sorted(CASES))
def test_changing_a_groups_hyperparameters_changes_the_next_step_as_torch(case):
    ts, ps = _ours(), _theirs()
    ours, theirs = _make(case, ts, ps)
    for step in range(8):
        if step == 3:
            for opt in (ours, theirs):
                opt.param_groups[0]["lr"] *= 0.25
                opt.param_groups[1]["lr"] = 0.07
                opt.param_groups[1]["weight_decay"] = 0.01
        _step_ours(ours, ts)
        _step_theirs(theirs, ps)
    _assert_params_close(ts, ps)
    # and the change mattered: without it, another result
    ts2 = _ours()
    unchanged = _make(case, ts2, _theirs())[0]
    for _ in range(8):
        _step_ours(unchanged, ts2)
    assert not np.allclose(ts2[1].data, ts[1].data)


def test_add_param_group_as_torch():
    ts, ps = _ours(), _theirs()
    ours = optim.Adam([ts[0]], lr=0.05, betas=(0.85, 0.99))
    theirs = torch.optim.Adam([ps[0]], lr=0.05, betas=(0.85, 0.99))
    for step in range(6):
        if step == 2:
            ours.add_param_group({"params": [ts[1], ts[2]], "lr": 0.2})
            theirs.add_param_group({"params": [ps[1], ps[2]], "lr": 0.2})
        _step_ours(ours, ts)
        _step_theirs(theirs, ps)
    assert ours.param_groups[1]["betas"] == (0.85, 0.99)     # the constructor's default
    assert ours.param_groups[1]["lr"] == 0.2
    _assert_params_close(ts, ps)


def test_a_list_of_tensors_is_one_group_and_a_single_tensor_is_a_group():
    ts = _ours()
    opt = optim.SGD(ts, lr=0.1, momentum=0.9)
    assert len(opt.param_groups) == 1
    assert [id(t) for t in opt.param_groups[0]["params"]] == [id(t) for t in ts]
    hyper = {k: v for k, v in opt.param_groups[0].items() if k != "params"}
    assert hyper == {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0,
                     "nesterov": False, "maximize": False}
    opt = optim.SGD([{"params": ts[0]}, {"params": ts[1:], "lr": 0.5}], lr=0.1)
    assert opt.param_groups[0]["params"][0] is ts[0]
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert [id(t) for t in opt.tensors] == [id(t) for t in ts]


def test_the_hyperparameter_attributes_read_and_write_every_group():
    ts = _ours()
    opt = optim.Adam(ts, lr=0.01)
    assert opt.lr == 0.01
    opt.lr = 0.5
    assert opt.param_groups[0]["lr"] == 0.5
    opt.add_param_group({"params": [tnp.tensor([1.0], requires_grad=True)], "lr": 0.1})
    with pytest.raises(OptimizerError, match=r"different values.*param_groups\[i\]\['lr'\]"):
        _ = opt.lr
    opt.betas = [0.5, 0.6]
    assert [g["betas"] for g in opt.param_groups] == [(0.5, 0.6)] * 2
    with pytest.raises(OptimizerError, match="invalid lr -1"):
        opt.lr = -1.0
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.1]      # unchanged


def test_state_is_keyed_by_tensor_as_torch_and_by_position():
    ts = _ours()
    opt = optim.Adam(ts, lr=0.01)
    assert opt.state[ts[1]] == {}
    _step_ours(opt, ts)
    assert opt.state[ts[1]]["step"] == 1
    assert opt.state[1] is opt.state[ts[1]]
    assert opt.state[ts[2]]["exp_avg"].shape == (1,)


# --- state_dict and load_state_dict ------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_state_dict_has_torchs_layout(case):
    ts, ps = _ours(), _theirs()
    ours, theirs = _make(case, ts, ps)
    for _ in range(2):
        _step_ours(ours, ts)
        _step_theirs(theirs, ps)
    mine, yours = ours.state_dict(), theirs.state_dict()
    assert set(mine) == {"state", "param_groups"}
    assert [g["params"] for g in mine["param_groups"]] == \
        [g["params"] for g in yours["param_groups"]]
    assert sorted(mine["state"]) == sorted(yours["state"])
    for index, state in mine["state"].items():
        assert set(state) <= set(yours["state"][index]), (index, sorted(state))
        for key, value in state.items():
            if isinstance(value, np.ndarray):
                np.testing.assert_allclose(value, yours["state"][index][key].numpy(),
                                           rtol=1e-12, atol=1e-15)
            else:                                           # Adam's step: a number
                assert value == float(yours["state"][index][key])


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("through_pickle", [False, True])
def test_resumed_training_is_bit_identical(case, through_pickle):
    """Train 9 steps; or train 4, save, build everything anew from the saved state, train 5.
    With a scheduler changing the learning rates, saved and loaded too."""
    def build(ts):
        cls, defaults, grouping = CASES[case]
        opt = getattr(optim, cls)(_groups(ts, grouping), **defaults)
        return opt, lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)

    ts = _ours()
    opt, sched = build(ts)
    for _ in range(9):
        _step_ours(opt, ts)
        sched.step()
    uninterrupted = [t.data.copy() for t in ts]

    ts = _ours()
    opt, sched = build(ts)
    for _ in range(4):
        _step_ours(opt, ts)
        sched.step()
    saved = {"params": [t.data.copy() for t in ts], "opt": opt.state_dict(),
             "sched": sched.state_dict()}
    if through_pickle:
        saved = pickle.loads(pickle.dumps(saved))
    del ts, opt, sched

    ts = [tnp.tensor(p, requires_grad=True) for p in saved["params"]]
    opt, sched = build(ts)
    opt.load_state_dict(saved["opt"])
    sched.load_state_dict(saved["sched"])
    for _ in range(5):
        _step_ours(opt, ts)
        sched.step()
    for got, want in zip(ts, uninterrupted):
        np.testing.assert_array_equal(got.data, want)


def test_a_fresh_optimizer_does_not_resume_the_run():
    """The resume test compares something: without load_state_dict the run differs."""
    ts = _ours()
    opt = optim.Adam(ts, lr=0.05)
    for _ in range(6):
        _step_ours(opt, ts)
    ts2 = _ours()
    opt2 = optim.Adam(ts2, lr=0.05)
    for _ in range(3):
        _step_ours(opt2, ts2)
    ts3 = [tnp.tensor(t.data.copy(), requires_grad=True) for t in ts2]
    opt3 = optim.Adam(ts3, lr=0.05)
    for _ in range(3):
        _step_ours(opt3, ts3)
    assert not np.array_equal(ts3[0].data, ts[0].data)


def _arrays(state_dict_state):
    return [(index, key, value) for index, state in state_dict_state.items()
            for key, value in state.items() if isinstance(value, np.ndarray)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_state_dict_is_a_copy(case):
    ts, ps = _ours(), _theirs()
    ours = _make(case, ts, ps)[0]
    for _ in range(3):
        _step_ours(ours, ts)
    live = ours.state_dict()            # a reference run, to compare with after the mutation
    saved = ours.state_dict()
    arrays = _arrays(saved["state"])
    assert arrays
    tensors = ours.tensors
    for index, key, value in arrays:
        assert not np.shares_memory(value, ours.state[tensors[index]][key])
        assert not np.shares_memory(value, tensors[index].data)
        value[...] = np.nan                             # spoil the copy
    saved["param_groups"][0]["lr"] = 123.0
    for index, key, _ in arrays:
        assert not np.isnan(ours.state[tensors[index]][key]).any()
    assert ours.param_groups[0]["lr"] != 123.0
    # and training on leaves the saved dict alone
    again = ours.state_dict()
    _step_ours(ours, ts)
    for (_, _, before), (_, _, after) in zip(_arrays(live["state"]), _arrays(again["state"])):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize("case", sorted(CASES))
def test_load_state_dict_copies(case):
    ts = _ours()
    source = _make(case, ts, _theirs())[0]
    for _ in range(3):
        _step_ours(source, ts)
    saved = source.state_dict()
    ts2 = [tnp.tensor(t.data.copy(), requires_grad=True) for t in ts]
    loaded = _make(case, ts2, _theirs())[0]
    loaded.load_state_dict(saved)
    for index, key, value in _arrays(saved["state"]):
        mine = loaded.state[loaded.tensors[index]][key]     # numbered in the groups' order
        assert not np.shares_memory(value, mine)
        np.testing.assert_array_equal(value, mine)
        value[...] = np.nan
    saved["param_groups"][1]["lr"] = 123.0
    for _ in range(2):
        _step_ours(source, ts)
        _step_ours(loaded, ts2)
    for a, b in zip(ts, ts2):
        np.testing.assert_array_equal(a.data, b.data)


def test_load_state_dict_takes_the_groups_hyperparameters():
    ts = _ours()
    a = optim.SGD([{"params": ts[:1]}, {"params": ts[1:], "lr": 0.3}], lr=0.1)
    b = optim.SGD([{"params": _ours()[:1]}, {"params": _ours()[1:]}], lr=0.9, momentum=0.5)
    a.param_groups[0]["tags"] = ["weights"]             # other keys are kept, as torch's
    saved = a.state_dict()
    a.param_groups[0]["tags"].append("spoiled after saving")
    b.load_state_dict(saved)
    saved["param_groups"][0]["tags"].append("spoiled after loading")
    assert [g["lr"] for g in b.param_groups] == [0.1, 0.3]
    assert [g["momentum"] for g in b.param_groups] == [0.0, 0.0]
    assert b.param_groups[0]["tags"] == ["weights"]


def test_load_state_dict_casts_floating_state_to_the_tensors_dtype_as_torch():
    t = tnp.tensor(np.ones(3), requires_grad=True)
    opt = optim.Adam([t], lr=0.1)
    _step_ours(opt, [t])
    t32 = tnp.tensor(np.ones(3, np.float32), requires_grad=True)
    opt32 = optim.Adam([t32], lr=0.1)
    opt32.load_state_dict(opt.state_dict())
    assert opt32.state[t32]["exp_avg"].dtype == np.float32


# --- misuse ------------------------------------------------------------------------------------


def _raises(match, fn, *args, **kwargs):
    with pytest.raises(TiduError, match=match) as info:
        fn(*args, **kwargs)
    return info.value


def test_a_tensor_in_two_groups_is_refused_as_by_torch():
    ps = _theirs()
    with pytest.raises(ValueError, match="more than one parameter group"):
        torch.optim.SGD([{"params": ps[:2]}, {"params": ps[1:]}], lr=0.1)
    ts = _ours()
    error = _raises("more than one parameter group", optim.SGD,
                    [{"params": ts[:2]}, {"params": ts[1:]}], lr=0.1)
    assert isinstance(error, OptimizerError) and isinstance(error, ValueError)
    opt = optim.Adam(ts[:2])
    _raises("more than one parameter group", opt.add_param_group, {"params": [ts[2], ts[0]]})
    assert len(opt.param_groups) == 1                   # nothing added
    _raises("more than once", optim.Adam, [{"params": [ts[0], ts[0]]}])


@pytest.mark.parametrize("groups, match", [
    ([{"lr": 0.1}], "needs 'params'"),
    ([{"params": []}], "no tensors"),
    ([{"params": {tnp.tensor([1.0], requires_grad=True)}}], "ordered collection"),
    ([{"params": [np.ones(2)]}], "optimizes Tensors"),
    ([{"params": [tnp.tensor([1.0], requires_grad=True)], "lr": -1.0}],
     r"invalid lr -1.0 \(param_groups\[0\]\)"),
    ([{"params": [tnp.tensor([1.0], requires_grad=True)]},
      {"params": [tnp.tensor([1.0], requires_grad=True)], "betas": (0.9,)}],
     r"betas must be a pair .*param_groups\[1\]"),
    ([{"params": [tnp.tensor([1.0], requires_grad=True)]}, tnp.tensor([1.0], requires_grad=True)],
     "not both"),
])
def test_bad_groups_are_refused_by_name(groups, match):
    _raises(match, optim.Adam, groups, lr=0.1)


def test_add_param_group_refuses_what_is_not_a_group():
    opt = optim.SGD(_ours()[:1], lr=0.1)
    _raises("a parameter group is a dict", opt.add_param_group, [tnp.tensor([1.0])])
    _raises("Nesterov", opt.add_param_group,
            {"params": [tnp.tensor([1.0], requires_grad=True)], "nesterov": True})


def test_load_state_dict_refuses_what_does_not_fit():
    ts = _ours()
    opt = optim.Adam([{"params": ts[:2]}, {"params": ts[2:]}], lr=0.1)
    _step_ours(opt, ts)
    saved = opt.state_dict()
    one_group = optim.Adam(_ours(), lr=0.1)
    _raises("2 parameter groups, this optimizer 1", one_group.load_state_dict, saved)
    other_split = optim.Adam([{"params": _ours()[:1]}, {"params": _ours()[1:]}], lr=0.1)
    _raises(r"param_groups\[0\] has 2 tensors in the state dict, 1 here",
            other_split.load_state_dict, saved)
    other_shapes = optim.Adam([{"params": _ours()[:2]},
                               {"params": [tnp.tensor(np.ones(4), requires_grad=True)]}])
    _raises(r"state\[2\]\['exp_avg'\] has shape \(1,\), but the tensor .* shape \(4,\)",
            other_shapes.load_state_dict, saved)
    sgd = optim.SGD([{"params": _ours()[:2]}, {"params": _ours()[2:]}], lr=0.1)
    _raises(r"lacks \['dampening', 'momentum', 'nesterov'\].*another optimizer",
            sgd.load_state_dict, saved)
    _raises("expected a dict with 'state' and 'param_groups'", opt.load_state_dict,
            saved["state"])
    bad = opt.state_dict()
    bad["param_groups"][0]["lr"] = -0.5
    _raises(r"invalid lr -0.5 \(param_groups\[0\] of the state dict\)", opt.load_state_dict,
            bad)
    bad = opt.state_dict()
    bad["state"][7] = bad["state"][0]
    _raises("state for tensor 7, which no parameter group lists", opt.load_state_dict, bad)
    # a refused load changes nothing
    assert opt.param_groups[0]["lr"] == 0.1 and opt.state[ts[0]]["step"] == 1


# --- learning-rate schedulers ------------------------------------------------------------------


SCHEDULERS = {      # (the module, lr_scheduler or torch's; the optimizer; last_epoch)
    "StepLR": lambda m, opt, **kw: m.StepLR(opt, step_size=3, gamma=0.3, **kw),
    "MultiStepLR": lambda m, opt, **kw: m.MultiStepLR(opt, milestones=[2, 5, 5, 11], gamma=0.5,
                                                      **kw),
    "ExponentialLR": lambda m, opt, **kw: m.ExponentialLR(opt, gamma=0.9, **kw),
    "CosineAnnealingLR": lambda m, opt, **kw: m.CosineAnnealingLR(opt, T_max=7, eta_min=0.001,
                                                                  **kw),
    "ConstantLR": lambda m, opt, **kw: m.ConstantLR(opt, factor=0.3, total_iters=4, **kw),
    "LinearLR": lambda m, opt, **kw: m.LinearLR(opt, start_factor=0.2, total_iters=6, **kw),
    "LinearLR_decay": lambda m, opt, **kw: m.LinearLR(opt, start_factor=1.0, end_factor=0.1,
                                                      total_iters=9, **kw),
    "LambdaLR": lambda m, opt, **kw: m.LambdaLR(opt, lambda epoch: 1 / (1 + 0.3 * epoch), **kw),
    "LambdaLR_per_group": lambda m, opt, **kw: m.LambdaLR(
        opt, [lambda epoch: 0.95 ** epoch, lambda epoch: (epoch % 4 + 1) / 4], **kw),
}


WARM_UPS = {"ConstantLR", "LinearLR"}


def _two_group_optimizers(ts, ps, cls="SGD"):
    kwargs = dict(lr=0.1, momentum=0.9) if cls == "SGD" else dict(lr=0.1)
    return (getattr(optim, cls)([{"params": ts[:1]}, {"params": ts[1:], "lr": 0.03}], **kwargs),
            getattr(torch.optim, cls)([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.03}],
                                      **kwargs))


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_schedulers_set_torchs_learning_rates(name):
    ts, ps = _ours(), _theirs()
    ours, theirs = _two_group_optimizers(ts, ps)
    mine, yours = SCHEDULERS[name](lr_scheduler, ours), \
        SCHEDULERS[name](torch.optim.lr_scheduler, theirs)
    assert mine.base_lrs == yours.base_lrs == [0.1, 0.03]
    assert mine.get_last_lr() == yours.get_last_lr()
    seen = set()
    for _ in range(24):                                 # past T_max: the cosine climbs back
        _step_ours(ours, ts)
        _step_theirs(theirs, ps)
        mine.step()
        yours.step()
        assert mine.last_epoch == yours.last_epoch
        assert mine.get_last_lr() == yours.get_last_lr()            # exactly: the same floats
        assert [g["lr"] for g in ours.param_groups] == [g["lr"] for g in theirs.param_groups]
        seen.add(tuple(mine.get_last_lr()))
    assert len(seen) > (1 if name == "ConstantLR" else 3)     # the rates did change
    _assert_params_close(ts, ps)


COMPOSED = {    # schedulers stepping one optimizer together; the epochs to run
    "exponential_and_multistep": (
        lambda m, opt: [m.ExponentialLR(opt, 0.9), m.MultiStepLR(opt, [3, 6])], 10),
    "linear_warm_up_and_cosine": (
        lambda m, opt: [m.LinearLR(opt, 0.1, total_iters=4), m.CosineAnnealingLR(opt, T_max=10)],
        12),
}


@pytest.mark.parametrize("name", sorted(COMPOSED))
def test_schedulers_compose_as_torchs(name):
    make, epochs = COMPOSED[name]
    ts, ps = _ours(), _theirs()
    ours, theirs = _two_group_optimizers(ts, ps, "Adam")
    ours_s, theirs_s = make(lr_scheduler, ours), make(torch.optim.lr_scheduler, theirs)
    for _ in range(epochs):
        _step_ours(ours, ts)
        _step_theirs(theirs, ps)
        for s in ours_s + theirs_s:
            s.step()
        assert [g["lr"] for g in ours.param_groups] == [g["lr"] for g in theirs.param_groups]
    _assert_params_close(ts, ps)


@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
                                  "ConstantLR", "LinearLR", "LinearLR_decay"])
def test_step_with_an_epoch_uses_torchs_closed_form(name):
    ours = optim.SGD(_ours(), lr=0.1)
    theirs = torch.optim.SGD(_theirs(), lr=0.1)
    mine = SCHEDULERS[name](lr_scheduler, ours)
    yours = SCHEDULERS[name](torch.optim.lr_scheduler, theirs)
    ours.step()
    theirs.step()
    for epoch in (4, 9, 2):
        with pytest.warns(UserWarning, match="deprecated"):
            mine.step(epoch)
        with pytest.warns(UserWarning):
            yours.step(epoch)
        assert mine.get_last_lr() == yours.get_last_lr() and mine.last_epoch == epoch


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_resumes_from_its_state_dict_as_torch(name):
    """Save the optimizer and the scheduler after 5 epochs, build new ones and load: the
    learning rates then go on as the uninterrupted run's (and as torch's, resumed alike)."""
    ts, ps = _ours(), _theirs()
    ours, theirs = _two_group_optimizers(ts, ps)
    mine, yours = SCHEDULERS[name](lr_scheduler, ours), \
        SCHEDULERS[name](torch.optim.lr_scheduler, theirs)
    for _ in range(5):
        ours.step(), theirs.step(), mine.step(), yours.step()
    saved = ours.state_dict(), mine.state_dict()
    assert saved[0]["param_groups"][0]["initial_lr"] == 0.1
    want = []
    for _ in range(8):
        ours.step(), mine.step()
        want.append(mine.get_last_lr())
    ours2 = _two_group_optimizers(_ours(), _theirs())[0]
    if name in WARM_UPS:
        # their first step scales the groups' rates, so (in torch too) they are made before
        # the optimizer's state is loaded, which then sets the rates: torch's recipe
        mine2 = SCHEDULERS[name](lr_scheduler, ours2)
        ours2.load_state_dict(saved[0])
    else:
        ours2.load_state_dict(saved[0])
        mine2 = SCHEDULERS[name](lr_scheduler, ours2)
    mine2.load_state_dict(saved[1])
    got = []
    for _ in range(8):
        ours2.step(), mine2.step()
        got.append(mine2.get_last_lr())
    assert got == want
    for _ in range(8):
        theirs.step(), yours.step()
    assert got[-1] == yours.get_last_lr()


def test_scheduler_state_dict_is_a_copy():
    opt = optim.SGD(_ours(), lr=0.1)
    sched = lr_scheduler.MultiStepLR(opt, [2, 4])
    saved = sched.state_dict()
    saved["base_lrs"][0] = 99.0
    saved["milestones"][3] = 1
    assert sched.base_lrs == [0.1] and 3 not in sched.milestones
    sched.load_state_dict(saved)
    saved["base_lrs"][0] = 7.0
    assert sched.base_lrs == [99.0]


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_last_epoch_resumes_from_initial_lr_as_torch(name):
    """A scheduler made with last_epoch >= 0 takes the groups' "initial_lr" as base_lrs and
    (torch's rule) leaves the current rates for the first epoch."""
    ours, theirs = _two_group_optimizers(_ours(), _theirs())
    for opt in (ours, theirs):
        for group, initial in zip(opt.param_groups, (0.4, 0.2)):
            group["initial_lr"] = initial
    mine = SCHEDULERS[name](lr_scheduler, ours, last_epoch=3)
    yours = SCHEDULERS[name](torch.optim.lr_scheduler, theirs, last_epoch=3)
    assert mine.base_lrs == yours.base_lrs == [0.4, 0.2]
    for _ in range(8):
        assert mine.last_epoch == yours.last_epoch
        assert mine.get_last_lr() == yours.get_last_lr()
        ours.step(), theirs.step(), mine.step(), yours.step()


def test_scheduler_step_before_optimizer_step_warns_as_torch():
    opt = optim.SGD(_ours(), lr=0.1)
    sched = lr_scheduler.StepLR(opt, 2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    opt = optim.SGD(_ours(), lr=0.1)
    sched = lr_scheduler.StepLR(opt, 2)
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched.step()


def test_scheduler_misuse_is_refused_by_name():
    opt = optim.SGD(_ours(), lr=0.1)
    error = _raises("schedules an optimizer of tnp.optim", lr_scheduler.StepLR,
                    torch.optim.SGD(_theirs(), lr=0.1), 2)
    assert isinstance(error, TypeError)
    _raises("step_size must be a positive integer", lr_scheduler.StepLR, opt, 0)
    _raises("T_max must be a positive real number", lr_scheduler.CosineAnnealingLR, opt, 0)
    _raises("gamma must be a real number", lr_scheduler.ExponentialLR, opt, "0.9")
    _raises("milestones must be a list", lr_scheduler.MultiStepLR, opt, 3)
    _raises("expected 1 lr_lambdas", lr_scheduler.LambdaLR, opt, [abs, abs])
    _raises("lr_lambda must be a function", lr_scheduler.LambdaLR, opt, 0.5)
    _raises(r"param_groups\[0\] has no 'initial_lr'", lr_scheduler.StepLR, opt, 2,
            last_epoch=4)
    _raises("last_epoch must be an integer >= -1", lr_scheduler.StepLR, opt, 2, last_epoch=-2)
    sched = lr_scheduler.StepLR(opt, 2)
    opt.add_param_group({"params": [tnp.tensor([1.0], requires_grad=True)]})
    opt.step()
    _raises("2 parameter groups, the scheduler was made for 1", sched.step)


def test_lr_scheduler_is_a_submodule_as_torchs():
    module = importlib.import_module("primitives.tensor.optim.lr_scheduler")
    assert module is tnp.optim.lr_scheduler is lr_scheduler
    assert set(module.__all__) >= {"LRScheduler", "StepLR", "ExponentialLR",
                                   "CosineAnnealingLR", "LambdaLR", "MultiStepLR"}
    from primitives.tensor.optim.lr_scheduler import StepLR
    assert issubclass(StepLR, module.LRScheduler)
