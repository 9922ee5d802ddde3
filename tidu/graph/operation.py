"""The two base classes an operation set derives from.

They are plain classes with no metaclass and no state, so an op set can be an
``enum.Enum`` or a frozen dataclass. Operations must be immutable, hashable and
equal by value: tidu uses them inside structural value keys.

>>> import enum
>>> class Op(EvaluableGraphOperation, enum.Enum):
...     NEG = "neg"
...     def input_count(self): return 1
...     def output_count(self): return 1
...     def eval(self, ctx, inputs): return [-inputs[0]]
>>> Op.NEG.eval(None, [2.0])
[-2.0]
"""

from __future__ import annotations

import enum
import reprlib
from typing import Any, Sequence


class GraphOperation:
    """An operation of a graph: a fixed number of inputs and outputs."""

    __slots__ = ()

    def input_count(self) -> int:
        """How many inputs the operation takes."""
        raise NotImplementedError(f"{type(self).__name__}.input_count")

    def output_count(self) -> int:
        """How many outputs the operation produces (at least one)."""
        raise NotImplementedError(f"{type(self).__name__}.output_count")


class EvaluableGraphOperation(GraphOperation):
    """An operation that can compute its outputs from concrete inputs."""

    __slots__ = ()

    def eval(self, ctx: Any, inputs: Sequence) -> Sequence:
        """Return one value per output, given one value per input."""
        raise NotImplementedError(f"{type(self).__name__}.eval")

    # Optional, for the memory plan of compiled programs: ``eval_reusing(ctx, inputs,
    # reusable) -> Sequence`` is ``eval`` that may write its results into ``inputs[i]`` for
    # ``i`` in ``reusable`` (values the program made that die at this step and nothing else
    # reads). The op must still check the buffer fits and nothing else holds it. Programs
    # detect it with ``getattr(op, "eval_reusing", None) is not None``.
    eval_reusing = None


_short = reprlib.Repr()
_short.maxstring = 40
_short.maxother = 60


def op_name(op: object) -> str:
    """A short, readable name for an operation: an Enum's member name, else a bounded repr.

    >>> op_name(3.5)
    '3.5'
    """
    if isinstance(op, enum.Enum):
        return op.name
    return _short.repr(op)


def short_repr(obj: object) -> str:
    """A repr bounded in length, for keys supplied by users."""
    return _short.repr(obj)
