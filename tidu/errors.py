"""Every error tidu raises on misuse, in one place.

All of them derive from :class:`TiduError`; most also derive from the builtin
exception a Python user would expect (``ValueError``, ``TypeError``,
``KeyError``-free lookups), so ``except ValueError`` keeps working.

>>> from tidu import TiduError
>>> issubclass(ArityError, TiduError) and issubclass(ArityError, ValueError)
True
"""

from __future__ import annotations

import enum
import reprlib


class TiduError(Exception):
    """Base of every error tidu raises on bad use."""


class InvalidArgumentError(TiduError, TypeError):
    """An argument of the wrong kind at an entry point: ``None`` or a ``Graph`` where a
    ``LinearizedGraph`` belongs, an executor that is not a ``BackwardExecutor``, one key
    where a sequence of keys belongs.
    """


def sequence_argument(value, function: str, argument: str) -> list:
    """``value`` as a list: any iterable but a string is read once (a generator gives its items).

    A ``str``, ``bytes`` or non-iterable raises :class:`InvalidArgumentError`
    naming ``function`` and ``argument``: ``wrt="x"`` is one key, not the keys ``'x'``.

    >>> sequence_argument((key for key in "ab"), "linearize", "wrt")
    ['a', 'b']
    >>> sequence_argument("x", "linearize", "wrt")
    Traceback (most recent call last):
    ...
    tidu.errors.InvalidArgumentError: linearize: wrt must be a sequence, got 'x' (for one item, pass ['x'])
    """
    if not isinstance(value, (str, bytes)):
        try:
            return list(value)
        except TypeError:
            if hasattr(value, "__iter__"):
                raise                          # the iterable itself failed: not our call
    shown = reprlib.repr(value)
    hint = f" (for one item, pass [{shown}])" if value is not None else ""
    raise InvalidArgumentError(f"{function}: {argument} must be a sequence, got {shown}{hint}")


# --- graph construction -------------------------------------------------------


class GraphError(TiduError):
    """A graph was built or used inconsistently."""


class ImmutableGraphError(GraphError, AttributeError, TypeError):
    """A ``Graph`` constructed directly or changed after ``build()``."""


class InvalidOperationError(GraphError, TypeError):
    """An object used as an operation is not a usable :class:`GraphOperation`."""


class ArityError(GraphError, ValueError):
    """An operation got a different number of inputs than it declares."""


class UnknownValueError(GraphError, ValueError):
    """A local value id, or a value key, that the graph does not know."""


class InvalidReferenceError(GraphError, TypeError):
    """An operation input that is neither ``Local`` nor ``External``."""


class InvalidKeyError(GraphError, TypeError):
    """An input key that is not hashable, or a value key of the wrong type."""


# --- evaluation ---------------------------------------------------------------


class EvaluationError(TiduError):
    """A graph could not be evaluated."""


class MissingValueError(EvaluationError, ValueError):
    """An input value needed for evaluation was not supplied."""


class NotEvaluableError(EvaluationError, TypeError):
    """An operation needed for evaluation has no ``eval``."""


class EvalOutputError(EvaluationError, ValueError):
    """An operation's ``eval`` returned the wrong number of outputs."""


# --- AD rules -----------------------------------------------------------------


class ADRuleKind(enum.Enum):
    """Which rule of a primitive is meant."""

    JVP = "jvp"
    TRANSPOSE = "transpose"
    SIMPLIFY = "simplify"
    BATCH = "batch"


class ADRuleError(TiduError):
    """A primitive has no rule of this kind.

    >>> err = ADRuleError("SIN", ADRuleKind.TRANSPOSE)
    >>> err.op, err.rule
    ('SIN', <ADRuleKind.TRANSPOSE: 'transpose'>)
    >>> str(err)
    'SIN has no transpose rule'
    """

    def __init__(self, op: str, rule: ADRuleKind, detail: str | None = None) -> None:
        self.op = op
        self.rule = rule
        self.detail = detail
        message = f"{op} has no {rule.value} rule"
        if detail:
            message += f": {detail}"
        super().__init__(message)

    def __reduce__(self):
        return (type(self), (self.op, self.rule, self.detail))


class MemoryBudgetError(TiduError, ValueError):
    """A memory budget below what a program needs at once, whatever it recomputes.

    ``smallest_feasible`` is the smallest budget (bytes) that works.
    """

    def __init__(self, message: str, smallest_feasible: int) -> None:
        super().__init__(message)
        self.smallest_feasible = smallest_feasible


class RuleContractError(TiduError):
    """A JVP, transpose or batch rule broke the rule contract (result count, ids, axes)."""

    def __init__(self, op: str, rule: ADRuleKind, detail: str) -> None:
        self.op = op
        self.rule = rule
        super().__init__(f"{rule.value} rule of {op}: {detail}")

    def __reduce__(self):
        return (type(self), (self.op, self.rule, self.args[0].split(": ", 1)[1]))
