"""``lr_scheduler.ConstantLR`` and ``LinearLR`` (warm-ups), without torch: the recursive
rates (torch's form) against the closed forms, composition, and refused settings. The
comparisons with torch, rate for rate, are in ``test_optim_groups.py``."""

from __future__ import annotations

import pytest

from primitives import tensor as tnp
from primitives.tensor import optim
from primitives.tensor.optim import OptimizerError, lr_scheduler
from lr_helpers import run


def _optimizer(lr=0.5):
    return optim.SGD([tnp.tensor([1.0], requires_grad=True)], lr=lr)


@pytest.mark.parametrize("start, end, total", [(0.1, 1.0, 4), (1.0, 0.05, 7), (0.5, 0.5, 3),
                                               (1.0, 0.0, 2)])
def test_linear_rates_follow_the_line_then_stay(start, end, total):
    rates = run(lr_scheduler.LinearLR(_optimizer(), start, end, total), total + 4)
    expected = [0.5 * (start + (end - start) * min(epoch, total) / total)
                for epoch in range(total + 5)]
    assert rates == pytest.approx(expected, rel=1e-13, abs=1e-15)


def test_constant_warm_up_then_back():
    assert run(lr_scheduler.ConstantLR(_optimizer(), 0.1, 3), 5) == \
        pytest.approx([0.05, 0.05, 0.05, 0.5, 0.5, 0.5], rel=1e-15)


def test_a_warm_up_composes_with_a_decay():
    opt = _optimizer(1.0)
    warm = lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=3)
    decay = lr_scheduler.ExponentialLR(opt, gamma=0.5)
    rates = []
    for _ in range(6):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        warm.step()
        decay.step()
    factors = [0.25 + 0.75 * min(epoch, 3) / 3 for epoch in range(6)]
    assert rates == pytest.approx([f * 0.5 ** epoch for epoch, f in enumerate(factors)],
                                  rel=1e-13)


@pytest.mark.parametrize("make, match", [
    (lambda opt: lr_scheduler.LinearLR(opt, start_factor=0.0), "start_factor must be a positive"),
    (lambda opt: lr_scheduler.LinearLR(opt, start_factor=1.5), r"start_factor must be in \(0, 1\]"),
    (lambda opt: lr_scheduler.LinearLR(opt, end_factor=-0.1), r"end_factor in \[0, 1\]"),
    (lambda opt: lr_scheduler.LinearLR(opt, total_iters=0), "total_iters must be a positive"),
    (lambda opt: lr_scheduler.ConstantLR(opt, factor=0.0), "factor must be a positive"),
    (lambda opt: lr_scheduler.ConstantLR(opt, factor=2.0), r"factor must be in \(0, 1\]"),
    (lambda opt: lr_scheduler.ConstantLR(opt, total_iters=2.5), "total_iters must be a positive"),
])
def test_bad_settings_are_refused_by_name(make, match):
    opt = _optimizer()
    with pytest.raises(OptimizerError, match=match):
        make(opt)
    assert opt.param_groups[0]["lr"] == 0.5          # the optimizer is as it was
