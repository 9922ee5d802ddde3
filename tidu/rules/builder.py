"""What rules emit through: the ``PrimitiveBuilder`` protocol and a graph-backed one.

>>> from tidu.graph import Local
>>> b = GraphPrimitiveBuilder()
>>> x = b.add_input("x")
>>> isinstance(b, PrimitiveBuilder)
True
"""

from __future__ import annotations

from collections.abc import Mapping, Set as AbstractSet
from typing import Protocol, Sequence, Union, runtime_checkable

from tidu.errors import RuleContractError
from tidu.graph import External, GraphBuilder, Local
from tidu.graph import op_name

PrimitiveValue = Union[Local, External]
"""What rules pass to ``add_primitive``: a value of the builder, or one named by key."""


@runtime_checkable
class PrimitiveBuilder(Protocol):
    """Something rules can emit operations into; returns the new values' ids."""

    def add_primitive(self, op, inputs: Sequence[PrimitiveValue], role) -> list[int]: ...


class GraphPrimitiveBuilder(GraphBuilder):
    """A :class:`GraphBuilder` that rules emit into: ``add_primitive`` adds an operation."""

    __slots__ = ()

    add_primitive = GraphBuilder.add_operation


def are_ids(results, expected: int, size: int) -> bool:
    """Whether ``results`` is a list of ``expected`` entries, each ``None`` or an id below ``size``.

    The quick test transforms make before the full :func:`check_rule_results`.
    """
    if type(results) is not list or len(results) != expected:
        return False
    for value in results:
        if value is not None and not (type(value) is int and 0 <= value < size):
            return False
    return True


def check_rule_results(results, expected: int, builder, op, kind, what: str) -> list:
    """The rule contract: ``expected`` entries, each ``None`` or an id ``builder`` produced.

    Builders that define ``__len__`` (ids are ``0 .. len-1``) get a range check;
    others must support ``in`` over the ids they produced.
    """
    if type(results) is not list:
        if isinstance(results, (AbstractSet, Mapping)):   # no order, or keys: not per slot
            raise RuleContractError(op_name(op), kind,
                                    f"returned a {type(results).__name__}, not a sequence of "
                                    f"ids (one per slot, in order)")
        try:
            results = list(results)
        except TypeError:
            raise RuleContractError(op_name(op), kind,
                                    f"returned {results!r}, not a sequence of ids") from None
    if len(results) != expected:
        raise RuleContractError(op_name(op), kind,
                                f"returned {len(results)} {what} for {expected} slots")
    size = len(builder) if hasattr(builder, "__len__") else None
    for slot, value in enumerate(results):
        if value is None or (type(value) is int and size is not None and 0 <= value < size):
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise RuleContractError(op_name(op), kind,
                                    f"{what} {slot} is {value!r}, not an int id or None")
        if value < 0 or (value >= size if size is not None else value not in builder):
            raise RuleContractError(op_name(op), kind,
                                    f"{what} {slot} is id {value}, which its builder never produced")
    return results
