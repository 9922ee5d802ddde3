"""``checkpoint`` policies: which values a checkpointed block may keep for its backward.

JAX's names: ``"nothing_saveable"`` (the default: recompute everything the block
made), ``"everything_saveable"`` (keep it all: no recomputation),
``"dots_saveable"`` (keep the results of matrix products, recompute the
elementwise work around them, as Burn's balanced strategy does) and
``"dots_with_no_batch_dims_saveable"`` (the same, for products without batch
dimensions). A policy may also be a function of the operation, ``policy(op) -> bool``.

While a block runs, :func:`checkpoint_scope` marks the operations that ``jit``'s
trace records (:class:`..functional.GraphTrace`); ``jit`` then compiles a
program that recomputes the marked values the policy does not save
(:func:`tidu.recompute`).

Room: the transforms package; imports :mod:`..ops` only.

>>> from primitives.tensor.ops import elementwise as ew
>>> saves("dots_saveable", ew.sin), saves("everything_saveable", ew.sin)
(False, True)
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable

from primitives.tensor.ops.dot import DotGeneral

POLICIES = ("nothing_saveable", "everything_saveable", "dots_saveable",
            "dots_with_no_batch_dims_saveable")


class _Scope(threading.local):
    policy = None                # the innermost checkpointed block's policy, while it runs


scope = _Scope()


def checked_policy(policy, error: Callable[[str], Exception]):
    """``policy`` if it is a policy name, a callable or ``None`` (nothing saveable); else
    ``error(message)`` is raised."""
    if policy is None:
        return "nothing_saveable"
    if callable(policy) or policy in POLICIES:
        return policy
    raise error(f"checkpoint: unknown policy {policy!r}; use one of {', '.join(POLICIES)}, "
                "or a function of the operation returning whether to keep its result")


def saves(policy, op) -> bool:
    """Whether ``policy`` keeps the results of ``op`` for the backward half."""
    if policy == "nothing_saveable":
        return False
    if policy == "everything_saveable":
        return True
    if policy == "dots_saveable":
        return isinstance(op, DotGeneral)
    if policy == "dots_with_no_batch_dims_saveable":
        return isinstance(op, DotGeneral) and not op.dimension_numbers[1][0]
    return bool(policy(op))


@contextlib.contextmanager
def checkpoint_scope(policy):
    """Mark the operations traced under ``jit`` while the block runs with ``policy``."""
    outer = scope.policy
    scope.policy = policy
    try:
        yield
    finally:
        scope.policy = outer
