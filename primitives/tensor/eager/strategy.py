"""Checkpoint strategies for the eager ``Tensor`` (seed 002's Burn strategies).

``"none"`` (the default): each recorded op keeps the arrays its backward reads,
as PyTorch's saved tensors. ``"balanced"``: the results of memory-bound ops
(elementwise and shape work) are not kept either; backward recomputes them from
the results of the compute-bound ops (matrix products, linear algebra, FFTs),
which are kept. Gradients are the same to the bit
(:mod:`tidu.eager.checkpointing`; docs/guides/memory.md compares them).

``checkpoint_strategy(name)`` selects one for a block (this thread), and
``set_checkpoint_strategy(name)`` for the process.

>>> import numpy as np
>>> from primitives.tensor.eager.frontend import tensor
>>> x = tensor(np.linspace(0.0, 1.0, 4), requires_grad=True)
>>> with checkpoint_strategy("balanced"):
...     y = (np.sin(x) * np.cos(x)).sum()
>>> np.allclose(y.backward().grad(x), np.cos(2 * x.data))
True

Room: the eager package; imports ``tidu.eager`` only.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from tidu.eager import CheckpointStrategy

_strategies = {name: CheckpointStrategy(name) for name in CheckpointStrategy.names}
process_strategy = [_strategies["none"]]      # set_checkpoint_strategy's


class _Block(threading.local):
    strategy = None             # the innermost checkpoint_strategy block's, in this thread


block = _Block()


def _strategy(name: str) -> CheckpointStrategy:
    strategy = _strategies.get(name) if isinstance(name, str) else None
    return strategy if strategy is not None else CheckpointStrategy(name)   # raises


def checkpoint_strategy(name: str) -> contextlib.AbstractContextManager:
    """A context manager: ops recorded in its block, in this thread, keep what strategy
    ``name`` (``"none"`` or ``"balanced"``) keeps; an unknown name raises
    :class:`tidu.eager.EagerError` here.

    >>> from primitives.tensor.eager.frontend import tensor
    >>> with checkpoint_strategy("balanced") as strategy:
    ...     strategy.name
    'balanced'
    """
    return _selected(_strategy(name))


@contextlib.contextmanager
def _selected(strategy: CheckpointStrategy) -> Iterator[CheckpointStrategy]:
    previous = block.strategy
    block.strategy = strategy
    try:
        yield strategy
    finally:
        block.strategy = previous


def set_checkpoint_strategy(name: str) -> None:
    """Make ``name`` (``"none"`` or ``"balanced"``) the strategy of every thread outside a
    :func:`checkpoint_strategy` block.

    >>> set_checkpoint_strategy("balanced"); set_checkpoint_strategy("none")
    """
    process_strategy[0] = _strategy(name)


def current_strategy() -> CheckpointStrategy:
    """The strategy ops recorded now keep their values by.

    >>> current_strategy().name
    'none'
    """
    return block.strategy or process_strategy[0]
