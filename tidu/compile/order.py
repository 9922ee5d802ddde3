"""Operation order: run some operations as soon as their inputs exist.

A program runs its operations in the graph's order, which follows the outputs
that need them. A reduction of a big value that feeds an output of its own (the
gradient of a bias: the sum over the batch of a layer's cotangent) then runs
after other work that needs the same value, such as a big matrix product, and
reads its input back from memory rather than from the cache the product
evicted. :func:`hoisted` moves such operations up to right after the last of
their inputs is made. One loop over the operations, then one sort.

Only operations move, and only earlier, to a place where everything they read
exists; consumers stay after them. The values, and the program's other work,
are the same.

>>> import enum
>>> from tidu.graph import EvaluableGraphOperation, GraphBuilder, Local
>>> class Op(EvaluableGraphOperation, enum.Enum):
...     WORK = "work"
...     SUM = "sum"
...     def input_count(self): return 1
...     def output_count(self): return 1
>>> b = GraphBuilder(); x = b.add_input("x")
>>> [h] = b.add_operation(Op.WORK, [Local(x)])
>>> [big] = b.add_operation(Op.WORK, [Local(h)])     # reads h, and evicts it
>>> [total] = b.add_operation(Op.SUM, [Local(h)])
>>> b.set_outputs([big, total])
>>> graph = hoisted(b.build(), lambda op: op is Op.SUM)
>>> [op_key.operation.name for op_key in graph.operation_keys]
['WORK', 'SUM', 'WORK']
"""

from __future__ import annotations

from typing import Any, Callable

from tidu.errors import InvalidArgumentError
from tidu.graph import Derived, Graph
from tidu.compile.inline import closed_graph


def hoisted(graph: Graph, early: Callable[[Any], bool]) -> Graph:
    """``graph`` with every operation ``op`` for which ``early(op)`` holds moved up to
    right after the last of its inputs is made (to the start for one reading only inputs);
    ``graph`` itself when nothing moves. ``graph`` is closed, as :func:`~tidu.compile.optimize`
    returns it: an operation that reads a value of another graph is an
    :class:`~tidu.errors.InvalidArgumentError`. See the module for an example.
    """
    op_keys = graph.operation_keys
    # Each operation's place: (position of the operation that stays put, order of the
    # moved ones right after it); -1 stands before the first operation.
    places: dict = {}
    moved = 0
    for position, op_key in enumerate(op_keys):
        after = (-1, 0)
        for key in op_key.inputs:
            if type(key) is Derived:
                place = places.get(key.operation)
                if place is None:
                    raise InvalidArgumentError(
                        f"hoisted: {key!r}, read by {op_key!r}, is a value of another graph; "
                        "pass a closed graph (what tidu.optimize returns)")
                after = max(after, place)
        if early(op_key.operation):
            moved += 1
            places[op_key] = (after[0], moved)     # later moves of one anchor come after
        else:
            places[op_key] = (position, 0)
    if not moved:
        return graph
    order = sorted(op_keys, key=places.__getitem__)
    if order == list(op_keys):
        return graph
    return closed_graph(graph.input_keys, order, graph.output_keys)
