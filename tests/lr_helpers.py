"""What the learning-rate scheduler tests share: a scheduler run epoch by epoch (the
optimizer's step, then the scheduler's), and the rates and momenta it sets on the way."""

from __future__ import annotations


def run(scheduler, epochs: int) -> list:
    """The first group's learning rate now and after each of ``epochs`` steps."""
    rates = [scheduler.get_last_lr()[0]]
    for _ in range(epochs):
        scheduler.optimizer.step()
        scheduler.step()
        rates.append(scheduler.get_last_lr()[0])
    return rates


def rates_and_momenta(opt, scheduler, steps: int) -> tuple[list, list]:
    """The first group's learning rate and momentum (Adam's first beta) before each of
    ``steps`` steps."""
    rates, momenta = [], []
    for _ in range(steps):
        group = opt.param_groups[0]
        rates.append(group["lr"])
        momenta.append(group["betas"][0] if "betas" in group else group["momentum"])
        opt.step()
        scheduler.step()
    return rates, momenta
