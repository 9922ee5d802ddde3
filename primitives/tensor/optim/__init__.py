"""Optimizers: optax's pure gradient transformations, and torch.optim's for eager tensors.

**Functional (optax).** :func:`sgd`, :func:`adam`, :func:`adamw` and
:func:`rmsprop` return a :class:`GradientTransformation`: ``init(params)``
makes the optimizer state, ``update(grads, state, params=None)`` returns
``(updates, new_state)``, and :func:`apply_updates` adds the updates to the
parameters (updates already carry the minus sign of descent). Parameters,
gradients, updates and states are pytrees: dicts, lists, tuples, named tuples and the
registered node types (a dataclass: :mod:`primitives.tensor.tree_util`)
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
schedulers of :mod:`~primitives.tensor.optim.lr_scheduler` (``StepLR``, ``MultiStepLR``,
``ExponentialLR``, ``CosineAnnealingLR``, ``CosineAnnealingWarmRestarts``, ``PolynomialLR``,
``LambdaLR``, the warm-ups ``ConstantLR`` and ``LinearLR``, the 1cycle policy
``OneCycleLR``, ``CyclicLR``, ``ReduceLROnPlateau``, which follows a metric, and
``SequentialLR`` and ``ChainedScheduler``, which combine others: torch's, rate for rate),
which act through ``param_groups``. Between ``backward()`` and ``step()``,
``torch.nn.utils``' :func:`clip_grad_norm_` and :func:`clip_grad_value_` clip the
``.grad`` of tensors (assigning new arrays: arrays held elsewhere keep their values).

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
>>> opt.zero_grad()
>>> _ = tnp.sum(100.0 * (w - b) ** 2).backward()
>>> float(clip_grad_norm_([w, b], max_norm=1.0)) > 1.0       # the norm before clipping
True
>>> float(clip_grad_norm_([w, b], max_norm=1.0)) <= 1.0      # after
True
"""


from __future__ import annotations

from primitives.tensor.optim import lr_scheduler
from primitives.tensor.optim.eager import (SGD, Adam, AdamW, NonFiniteNormError, Optimizer,
                                           RMSprop, clip_grad_norm_, clip_grad_value_)
from primitives.tensor.optim.functional import (GradientTransformation, OptimizerError,
                                                apply_updates, adam, adamw, chain, rmsprop,
                                                sgd)

__all__ = [
    "OptimizerError", "GradientTransformation", "chain", "sgd", "adam", "adamw", "rmsprop",
    "apply_updates", "Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler",
    "clip_grad_norm_", "clip_grad_value_", "NonFiniteNormError",
]
