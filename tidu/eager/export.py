"""An eager recording as one ``Graph``: a tracer for any primitive set.

A frontend that records its invocations with a :class:`~tidu.eager.Recorder` can
turn what it recorded into an ordinary graph, to print, evaluate, optimize,
linearize or transpose it, or to compile it: run a Python function once on
leaves that require grad, then ask :func:`graph_of_recording` for the graph from
those leaves to the outputs. That is a tracer for any primitive set, with no
code of the set's own: what ``trace_scalar`` does for the scalar set and
``make_graph`` for the tensor set.

The graph's inputs are the eager keys of the leaves the outputs depend on;
constant operands (data that required no grad) become inputs too, with fresh
keys, and their recorded values come back with the graph, so
``evaluate(graph, graph.output_keys, {**leaves, **constants})`` recomputes the
outputs.

>>> from tidu.eager import EagerInput, RecordedGraph, Recorder
>>> from tidu.example_ops import Op
>>> from tidu.graph import Input
>>> recorder = Recorder()
>>> x = EagerInput(Input("x"), None, True, 0.5)
>>> sin_x = recorder.record(RecordedGraph.from_primitive(Op.SIN, ["a"]), [x], [0.479])
>>> y = EagerInput(sin_x.output_key, sin_x, True, 0.479)
>>> two = EagerInput(Input("two"), None, False, 2.0)
>>> out = recorder.record(RecordedGraph.from_primitive(Op.MUL, ["a", "b"]), [y, two], [0.958])
>>> exported = graph_of_recording([out.output_key], [out])
>>> print(exported.graph)
graph(a = 'x', c = ('constant', 0)):
  b = SIN a
  d = MUL b c
  return d
>>> exported.leaves, list(exported.constants.values())
((Input('x'),), [2.0])
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from tidu.errors import InvalidArgumentError
from tidu.graph import Graph, GraphBuilder, Input, Local, ValueKey
from tidu.eager.walk import nodes_last_first


@dataclass(frozen=True)
class RecordingGraph:
    """A recording as one graph: ``graph`` (outputs in the order asked for), the input keys
    of the leaves that required grad (``leaves``) and the values of its other inputs, the
    recorded constants (``constants``, by input key)."""

    graph: Graph
    leaves: tuple
    constants: Mapping[ValueKey, Any]


def graph_of_recording(output_keys: Sequence[ValueKey], output_traces: Sequence) -> RecordingGraph:
    """The graph computing the eager values ``output_keys`` (whose traces are ``output_traces``;
    ``None`` for a leaf) from the leaves and constants they were recorded from. No recursion:
    the recording is walked in a loop, oldest node first.

    >>> from tidu.eager import EagerInput, RecordedGraph, Recorder
    >>> from tidu.example_ops import Op
    >>> from tidu.graph import Input
    >>> a, b = (EagerInput(Input(k), None, True, v) for k, v in (("a", 2.0), ("b", 3.0)))
    >>> c = Recorder().record(RecordedGraph.from_primitive(Op.MUL, ["x", "y"]), [a, b], [6.0])
    >>> exported = graph_of_recording([c.output_key, a.key], [c, None])
    >>> len(exported.graph.operations), exported.leaves
    (1, (Input('a'), Input('b')))
    """
    output_keys, output_traces = list(output_keys), list(output_traces)
    if len(output_keys) != len(output_traces):
        raise InvalidArgumentError(f"graph_of_recording: {len(output_keys)} output keys but "
                                   f"{len(output_traces)} traces")
    builder = GraphBuilder()
    ids: dict = {}                        # eager key -> local id in the builder
    leaves: list = []
    constants: dict = {}
    fresh = itertools.count()

    def reference(item) -> Local:
        """The builder's value for an input of a recorded node."""
        if item.trace is not None or item.key in ids and item.requires_grad:
            return Local(ids[item.key])
        if item.requires_grad:            # a leaf
            ids[item.key] = _add_input(builder, item.key)
            leaves.append(builder.global_key(ids[item.key]))
            return Local(ids[item.key])
        local = builder.add_input(("constant", next(fresh)))
        constants[builder.global_key(local)] = item.data
        return Local(local)

    nodes = set()
    for trace in output_traces:
        if trace is not None:
            nodes.update(nodes_last_first(trace))
    for node in sorted(nodes, key=lambda n: n.serial):      # inputs' nodes first
        graph = node.recorded.graph
        env = {}                                             # recorded local id -> ours
        for local_id, item in zip(graph.inputs, node.inputs):
            env[local_id] = reference(item).id
        for op_node in graph.operations:
            made = builder.add_operation(op_node.operation,
                                         [Local(env[ref.id]) for ref in op_node.inputs],
                                         op_node.role)
            env.update(zip(op_node.outputs, made))
        for key, local_id in zip(node.output_keys, graph.outputs):
            ids[key] = env[local_id]
    outputs = []
    for key, trace in zip(output_keys, output_traces):
        if key not in ids:
            if trace is not None:
                raise InvalidArgumentError(f"graph_of_recording: output key {key!r} is not "
                                           "an output of its trace")
            ids[key] = _add_input(builder, key)              # an output that is a leaf
            leaves.append(builder.global_key(ids[key]))
        outputs.append(ids[key])
    builder.set_outputs(outputs)
    return RecordingGraph(builder.build(), tuple(leaves), constants)


def _add_input(builder: GraphBuilder, key) -> int:
    """A graph input for eager key ``key``: ``Input(k)`` keys keep ``k``, so the graph's input
    key is the eager key itself."""
    return builder.add_input(key.key if isinstance(key, Input) else key)
