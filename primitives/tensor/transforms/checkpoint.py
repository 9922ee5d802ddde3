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

:func:`with_static_args` gives the eager room's ``checkpoint`` JAX's signature
(``static_argnums``, ``static_argnames``, ``prevent_cse``): ``tnp.checkpoint`` and its
alias ``tnp.remat`` are that.

Room: the transforms package; imports :mod:`..ops`, :mod:`..core` and :mod:`.pytree`.

>>> from primitives.tensor.ops import elementwise as ew
>>> saves("dots_saveable", ew.sin), saves("everything_saveable", ew.sin)
(False, True)
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import numbers
import threading
from typing import Callable, Iterable

from tidu import TiduError

from primitives.tensor.core import Frontend
from primitives.tensor.ops.dot import DotGeneral
from primitives.tensor.transforms.pytree import tree_flatten

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


# ---- JAX's signature: static arguments -------------------------------------------------


def with_static_args(checkpoint: Callable, error: type[TiduError]) -> Callable:
    """``checkpoint``, a function ``(f, policy) -> f checkpointed`` (the eager room's, which
    takes arrays and tensors), with JAX's signature: ``checkpoint(fun, policy=None, *,
    prevent_cse=True, static_argnums=(), static_argnames=())``; misuse raises ``error``.

    Arguments at ``static_argnums`` (positions in the call; negative ones count from its
    end) and those named in ``static_argnames`` (by keyword, or by position when ``fun``'s
    signature names them) reach ``fun`` as the Python values they are, not traced (a NumPy
    scalar stays one); they must be hashable, as ``jit``'s (JAX's ``checkpoint`` also takes
    unhashable ones, by identity), so arrays, tensors and traced values are refused.
    ``prevent_cse`` is taken for JAX's signature: tidu schedules the recomputation after
    its own optimizations, so they never undo it.

    >>> calls = []
    >>> def traced_checkpoint(f, policy):        # a stand-in for the eager checkpoint
    ...     return lambda *args, **kwargs: calls.append(args) or f(*args, **kwargs)
    >>> remat = with_static_args(traced_checkpoint, TypeError)
    >>> power = remat(lambda x, n: x ** n, static_argnums=1)
    >>> power(2.0, 3), calls                     # the checkpoint saw only x
    (8.0, [(2.0,)])
    """
    @functools.wraps(checkpoint)
    def jax_checkpoint(fun: Callable, policy=None, *, prevent_cse: bool | tuple = True,
                       static_argnums: int | Iterable[int] = (),
                       static_argnames: str | Iterable[str] = ()) -> Callable:
        block = checkpoint(fun, policy)         # checks fun and policy
        if not isinstance(prevent_cse, (bool, tuple)):
            raise error(f"checkpoint: prevent_cse must be a bool or a tuple of bools, got "
                        f"{type(prevent_cse).__name__}")
        statics = _Statics(fun, static_argnums, static_argnames, error)
        if not statics:
            return block

        @functools.wraps(fun)
        def with_statics(*args, **kwargs):
            positions, names = statics.split(args, kwargs)
            static_args = [(n, args[n]) for n in sorted(positions)]
            static_kwargs = {k: v for k, v in kwargs.items() if k in names}
            for where, value in [(f"argument {n}", v) for n, v in static_args] + \
                    [(f"argument {k!r}", v) for k, v in static_kwargs.items()]:
                statics.check_value(where, value)
            dynamic = [a for n, a in enumerate(args) if n not in positions]
            dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in names}

            def with_static_values(*traced, **traced_kwargs):
                full = list(traced)
                for n, value in static_args:
                    full.insert(n, value)
                return fun(*full, **traced_kwargs, **static_kwargs)

            with_static_values.__name__ = with_static_values.__qualname__ = statics.name
            return checkpoint(with_static_values, policy)(*dynamic, **dynamic_kwargs)

        return with_statics

    del jax_checkpoint.__wrapped__              # its signature is JAX's, not checkpoint's
    jax_checkpoint.__doc__ = (checkpoint.__doc__ or "").rstrip() + _STATIC_ARGS_DOC
    return jax_checkpoint


_STATIC_ARGS_DOC = """

    JAX's signature (``tnp.remat`` is the same function, as ``jax.remat``):
    ``checkpoint(fun, policy=None, *, prevent_cse=True, static_argnums=(),
    static_argnames=())``. Static arguments reach ``fun`` as the hashable Python values
    they are, not traced (:func:`primitives.tensor.transforms.checkpoint.with_static_args`).
"""


class _Statics:
    """Which arguments of a call of ``fun`` are static: the positions ``static_argnums``
    and the names ``static_argnames``, each completed from ``fun``'s signature by the other
    (a parameter is static however the caller passes it)."""

    def __init__(self, fun: Callable, static_argnums, static_argnames, error) -> None:
        self.error = error
        self.name = getattr(fun, "__qualname__", None) or type(fun).__name__
        nums = (static_argnums,) if isinstance(static_argnums, numbers.Integral) \
            else static_argnums
        if not isinstance(nums, (tuple, list)) or not all(
                isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in nums):
            raise error(f"checkpoint of {self.name}: static_argnums must be an int or a tuple "
                        f"of ints, got {static_argnums!r}")
        names = (static_argnames,) if isinstance(static_argnames, str) else static_argnames
        if not isinstance(names, (tuple, list, set, frozenset)) or not all(
                isinstance(n, str) for n in names):
            raise error(f"checkpoint of {self.name}: static_argnames must be a str or a tuple "
                        f"of str, got {static_argnames!r}")
        self.nums, self.names = tuple(int(n) for n in nums), set(names)
        self.named_positions = set()            # positions of the parameters named static
        self.parameter_positions = set()        # static_argnums that name a parameter
        try:
            parameters = list(inspect.signature(fun).parameters.values())
        except (TypeError, ValueError):
            parameters = []
        either = inspect.Parameter.POSITIONAL_OR_KEYWORD
        for index, p in enumerate(parameters):
            if p.kind is not either:
                continue
            if p.name in self.names:
                self.named_positions.add(index)
            elif index in self.nums:
                self.names.add(p.name)
            if index in self.nums:
                self.parameter_positions.add(index)

    def __bool__(self) -> bool:
        return bool(self.nums or self.names)

    def split(self, args: tuple, kwargs: dict) -> tuple[set, set]:
        """The static positions among ``args`` and the static names among ``kwargs``."""
        count = len(args)
        positions = {n for n in self.named_positions if n < count}
        for n in self.nums:
            if -count <= n < count:
                positions.add(n % count)
            elif n not in self.parameter_positions:     # else passed by keyword, or default
                raise self.error(f"checkpoint of {self.name}: static_argnums {n} is out of "
                                 f"range for a call with {count} positional arguments")
        return positions, self.names & kwargs.keys()

    def check_value(self, where: str, value) -> None:
        """Refuse a static value that is not a hashable Python value (``jit``'s rule)."""
        if any(isinstance(leaf, Frontend) for leaf in tree_flatten(value)[0]):
            raise self.error(f"checkpoint of {self.name}: static {where} holds a tensor or "
                             "traced value, whose derivative would be lost; pass it as an "
                             "ordinary argument")
        try:
            hash(value)
        except TypeError:
            raise self.error(f"checkpoint of {self.name}: static {where} is an unhashable "
                             f"{type(value).__name__}; static arguments are hashable Python "
                             "values, as jit's (pass an array as an ordinary argument, a "
                             "list as a tuple)") from None
