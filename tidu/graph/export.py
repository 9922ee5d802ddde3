"""Export a graph to :mod:`networkx`.

>>> from tidu.graph import GraphBuilder
>>> b = GraphBuilder(); x = b.add_input("x"); b.set_outputs([x])
>>> nx_graph = to_networkx(b.build())
>>> nx_graph.nodes[("value", 0)]["is_input"], nx_graph.nodes[("value", 0)]["is_output"]
(True, True)
"""

from __future__ import annotations

from tidu.errors import InvalidArgumentError
from tidu.graph.builder import Graph
from tidu.graph.format import key_label, value_name
from tidu.graph.keys import PRIMARY
from tidu.graph.operation import op_name
from tidu.graph.refs import Local


def to_networkx(graph):
    """A ``networkx.MultiDiGraph`` of ``graph``.

    Nodes are ``("value", local_id)``, ``("op", index)`` and, for values of other
    graphs, ``("external", key)``. Every node has ``kind`` and ``label``; values
    have ``key``, ``slot``, ``is_input``, ``is_output``; operations have ``op``,
    ``role`` and ``linear``. Edges follow data flow: ``position`` on edges into an
    operation, ``slot`` on edges out of one.
    """
    if not isinstance(graph, Graph):
        hint = " (pass its .graph)" if isinstance(getattr(graph, "graph", None), Graph) else ""
        raise InvalidArgumentError(f"to_networkx needs a Graph, got {type(graph).__name__}{hint}")
    import networkx

    outputs = set(graph.outputs)
    inputs = set(graph.inputs)
    nodes = [
        (("value", local_id), {
            "kind": "value", "key": value.key, "label": value_name(local_id),
            "slot": None if value.producer is None else value.producer[1],
            "is_input": local_id in inputs, "is_output": local_id in outputs,
        })
        for local_id, value in enumerate(graph.values)
    ]
    edges = []
    externals: dict = {}
    for index, node in enumerate(graph.operations):
        op_node = ("op", index)
        nodes.append((op_node, {"kind": "operation", "op": node.operation,
                                "label": op_name(node.operation), "role": node.role,
                                "linear": node.role is not PRIMARY}))
        for position, ref in enumerate(node.inputs):
            if type(ref) is Local:
                source = ("value", int(ref))
            else:
                source = ("external", ref.key)
                externals[source] = {"kind": "external", "key": ref.key,
                                     "label": key_label(ref.key)}
            edges.append((source, op_node, {"position": position}))
        for slot, local_id in enumerate(node.outputs):
            edges.append((op_node, ("value", local_id), {"slot": slot}))
    out = networkx.MultiDiGraph()
    out.add_nodes_from(nodes)
    out.add_nodes_from(externals.items())
    out.add_edges_from(edges)
    return out
