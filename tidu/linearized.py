"""``LinearizedGraph``: a linear graph and how its inputs and outputs line up."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tidu.errors import InvalidArgumentError
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

    @cached_property
    def tangent_input_keys(self) -> list:
        """The value keys of the tangent inputs."""
        return [self.graph.value_keys[local_id] for _, local_id in self.tangent_inputs]

    @cached_property
    def tangent_output_keys(self) -> list:
        """The value keys of the tangent outputs (``None`` for zeros)."""
        keys = self.graph.value_keys
        return [None if local_id is None else keys[local_id] for local_id in self.tangent_outputs]

    def __str__(self) -> str:
        return str(self.graph)
