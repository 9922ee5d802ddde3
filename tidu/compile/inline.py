"""Inlining: the operations some outputs need, across graphs, as one closed graph.

Value keys are structural, so the operations behind a value are found by
following its key, whatever graph defined them: ``External`` references and
parents disappear, and only what the outputs need is visited. Equal operations
have equal keys, so work that several graphs share (the primal values that a
linear and a transposed graph both read) is one operation.

The walk is iterative (:func:`tidu.graph.walk.postorder`), so a graph of a
million operations needs no deep recursion.
"""

from __future__ import annotations

from typing import Sequence

from tidu.graph import Derived, Graph, GraphBuilder, Input, OperationKey, ResolvedView, ValueKey
from tidu.graph import postorder


def _producers(op_key: OperationKey) -> list[OperationKey]:
    return [key.operation for key in op_key.inputs if type(key) is Derived]


def needed_operations(outputs: Sequence[ValueKey]) -> list[OperationKey]:
    """The operations ``outputs`` are computed by, each after those it reads."""
    return postorder([key.operation for key in outputs if type(key) is Derived], _producers)


def needed_inputs(view: ResolvedView, outputs: Sequence[ValueKey],
                  operations: Sequence[OperationKey]) -> list[Input]:
    """The ``Input`` keys ``outputs`` depend on (``operations`` are what they need).

    In the order the graphs of ``view`` list their inputs, then any others in
    the order the operations read them.
    """
    found: dict[ValueKey, None] = {}                   # an ordered set
    for key in outputs:
        if type(key) is not Derived:
            found[key] = None
    for op_key in operations:
        for key in op_key.inputs:
            if type(key) is not Derived:
                found[key] = None
    ordered = dict.fromkeys(key for graph in view.graphs for key in graph.input_keys
                            if key in found)
    return list(ordered) + [key for key in found if key not in ordered]


def closed_graph(inputs: Sequence[Input], operations: Sequence[OperationKey],
                 outputs: Sequence[ValueKey]) -> Graph:
    """A new graph of ``inputs``, then ``operations`` (each after those it reads), and ``outputs``.

    Every key the operations read must be an input or an earlier operation's
    output: the graph then has no ``External`` reference and no parent.
    """
    builder = GraphBuilder()
    for key in inputs:
        builder.add_input(key.key)
    for op_key in operations:
        builder.add_unchecked(op_key.operation, op_key.inputs, op_key.role, op_key.output_count)
    builder.set_outputs([builder.local_id(key) for key in outputs])
    return builder.build()
