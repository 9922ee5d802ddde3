"""A read-only view over several graphs and their parent chains, by value key.

>>> from tidu.graph import GraphBuilder, Input
>>> b = GraphBuilder(); x = b.add_input("x"); g = b.build()
>>> resolve(g).resolve_value(Input("x")).local_id
0
>>> resolve([g]).resolve_value(Input("nope")) is None
True
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from tidu.errors import InvalidArgumentError
from tidu.graph.builder import Graph
from tidu.graph.keys import OperationRole, ValueKey


class ValueDefinition(NamedTuple):
    """Where and how a value is defined: its graph, local id and producing operation."""

    key: ValueKey
    graph: Graph
    local_id: int
    operation: object | None          # None for a graph input
    inputs: tuple                     # the producing operation's input value keys
    role: OperationRole | None
    output_slot: int | None

    @property
    def is_input(self) -> bool:
        return self.operation is None


class ResolvedView:
    """Graphs searched in order: those given first, then their parents, breadth first."""

    __slots__ = ("graphs",)

    def __init__(self, graphs: Iterable[Graph]) -> None:
        ordered: list[Graph] = []
        seen: set[int] = set()
        if isinstance(graphs, (str, bytes)) or not hasattr(graphs, "__iter__"):
            raise InvalidArgumentError(
                f"resolve needs a Graph, graphs or a ResolvedView, got {_kind(graphs)}")
        queue = list(graphs)
        position = 0
        while position < len(queue):
            graph = queue[position]
            position += 1
            if not isinstance(graph, Graph):
                raise InvalidArgumentError(f"resolve needs Graphs, got {_kind(graph)}")
            if id(graph) in seen:
                continue
            seen.add(id(graph))
            ordered.append(graph)
            queue.extend(graph.parents)
        self.graphs: tuple[Graph, ...] = tuple(ordered)

    def graph_of(self, key: ValueKey) -> tuple[Graph, int] | None:
        """The first graph defining ``key`` and the key's local id there, or ``None``."""
        for graph in self.graphs:
            local_id = graph._local_ids().get(key)
            if local_id is not None:
                return graph, local_id
        return None

    def resolve_value(self, key: ValueKey) -> ValueDefinition | None:
        """The definition of ``key``, or ``None`` when no graph of the view defines it."""
        found = self.graph_of(key)
        if found is None:
            return None
        graph, local_id = found
        producer = graph.values[local_id].producer
        if producer is None:
            return ValueDefinition(key, graph, local_id, None, (), None, None)
        node = graph.operations[producer[0]]
        return ValueDefinition(key, graph, local_id, node.operation, node.key.inputs,
                               node.role, producer[1])

    def __contains__(self, key) -> bool:
        return self.graph_of(key) is not None

    def __repr__(self) -> str:
        return f"<ResolvedView of {len(self.graphs)} graphs>"


def _kind(value) -> str:
    """How an error names a wrong argument: its type, with a hint for the likely mix-ups."""
    if hasattr(value, "tangent_inputs") and isinstance(getattr(value, "graph", None), Graph):
        return f"a {type(value).__name__} (pass its .graph)"
    return "None" if value is None else type(value).__name__


def resolve(graphs: "Graph | Iterable[Graph] | ResolvedView") -> ResolvedView:
    """A :class:`ResolvedView` over ``graphs`` (a graph, an iterable of graphs, or a view).

    An iterable is read once, so a generator works.
    """
    if isinstance(graphs, ResolvedView):
        return graphs
    if isinstance(graphs, Graph):
        return ResolvedView((graphs,))
    return ResolvedView(graphs)
