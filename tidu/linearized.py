"""``LinearizedGraph``: a linear graph and how its inputs and outputs line up."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tidu.errors import InvalidArgumentError, UnknownValueError
from tidu.graph import Graph


@dataclass(frozen=True)
class LinearizedGraph:
    """A linear map as a graph.

    ``tangent_inputs`` are ``(input key, local id)`` pairs aligned with the
    ``wrt`` keys (or, for a transposed graph, with the cotangent seeds: one per
    active tangent output of the graph it transposes); ``tangent_outputs`` are
    local ids aligned with the requested outputs, ``None`` where the tangent is
    a symbolic zero. ``pass_id`` is the differentiation pass that made it.

    >>> from tidu.graph import GraphBuilder
    >>> b = GraphBuilder(); t = b.add_input("t"); b.set_outputs([t])
    >>> lin = LinearizedGraph(b.build(), [("t", t)], [t, None])
    >>> lin.tangent_output_keys
    [Input('t'), None]
    """

    graph: Graph
    tangent_inputs: list[tuple[Any, int]]
    tangent_outputs: list[int | None]
    pass_id: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.graph, Graph):
            raise InvalidArgumentError(f"LinearizedGraph needs a Graph, got "
                                       f"{type(self.graph).__name__}")

    def check_ids(self, function: str = "LinearizedGraph") -> None:
        """Check that every id in ``tangent_inputs`` and ``tangent_outputs`` is a value of
        ``graph``: an :class:`~tidu.errors.UnknownValueError` names ``function``, the
        entry and the id otherwise (a negative id counts as unknown, not as "from the end").

        >>> from tidu.graph import GraphBuilder
        >>> b = GraphBuilder(); t = b.add_input("t"); b.set_outputs([t])
        >>> LinearizedGraph(b.build(), [("t", t)], [7]).check_ids("linear_transpose")
        Traceback (most recent call last):
        ...
        tidu.errors.UnknownValueError: linear_transpose: tangent_outputs[0] is local id 7, which the linear graph does not have (its ids are 0 to 0)
        """
        size = len(self.graph.value_keys)
        for position, entry in enumerate(self.tangent_inputs):
            if not isinstance(entry, (tuple, list)) or len(entry) != 2:
                raise InvalidArgumentError(f"{function}: tangent_inputs[{position}] is "
                                           f"{entry!r}, not an (input key, local id) pair")
            _check_id(entry[1], size, function, f"tangent_inputs[{position}]")
        for position, local_id in enumerate(self.tangent_outputs):
            if local_id is not None:
                _check_id(local_id, size, function, f"tangent_outputs[{position}]")

    @cached_property
    def tangent_input_keys(self) -> list:
        """The value keys of the tangent inputs."""
        self.check_ids("tangent_input_keys")
        return [self.graph.value_keys[local_id] for _, local_id in self.tangent_inputs]

    @cached_property
    def tangent_output_keys(self) -> list:
        """The value keys of the tangent outputs (``None`` for zeros)."""
        self.check_ids("tangent_output_keys")
        keys = self.graph.value_keys
        return [None if local_id is None else keys[local_id] for local_id in self.tangent_outputs]

    def __str__(self) -> str:
        return str(self.graph)


def _check_id(local_id, size: int, function: str, where: str) -> None:
    """``local_id`` is an int naming one of ``size`` values, or an error naming ``where``."""
    if type(local_id) is int and 0 <= local_id < size:
        return
    if not isinstance(local_id, int) or isinstance(local_id, bool):
        raise InvalidArgumentError(f"{function}: {where} is {local_id!r}, not a local id (an "
                                   "int) of the linear graph")
    ids = f"its ids are 0 to {size - 1}" if size else "it has no values"
    raise UnknownValueError(f"{function}: {where} is local id {local_id}, which the linear "
                            f"graph does not have ({ids})")
