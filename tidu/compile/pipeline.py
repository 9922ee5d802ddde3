"""``optimize``: the passes in order, over the equations of the graphs given.

>>> import enum
>>> from tidu import Primitive
>>> import math
>>> from tidu.graph import EvaluableGraphOperation, External, GraphBuilder, Input, Local, evaluate
>>> class Op(Primitive, EvaluableGraphOperation, enum.Enum):
...     SIN = "sin"
...     def input_count(self): return 1
...     def output_count(self): return 1
...     def eval(self, ctx, inputs): return [math.sin(inputs[0])]
>>> first, second = GraphBuilder(), GraphBuilder()
>>> [a] = first.add_operation(Op.SIN, [Local(first.add_input("x"))])
>>> [b] = second.add_operation(Op.SIN, [External(first.global_key(a))])
>>> second.add_parent(first.build())
>>> second.set_outputs([b])
>>> graph = second.build()
>>> [y] = graph.output_keys                          # sin(sin(x)), across two graphs
>>> program = optimize(graph, [y, y])
>>> len(program.operations), program.parents, program.input_keys
(2, (), (Input('x'),))
>>> evaluate(program, program.output_keys, {Input("x"): 1.0}) == [math.sin(math.sin(1.0))] * 2
True
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from tidu._gc import gc_paused
from tidu.errors import InvalidArgumentError, UnknownValueError, sequence_argument
from tidu.graph import Graph, OperationKey, ResolvedView, ValueKey, resolve
from tidu.compile.dce import live_operations
from tidu.compile.inline import closed_graph, needed_inputs, needed_operations
from tidu.compile.simplify import Rewriter, producer


def optimize(graphs: "Graph | Iterable[Graph] | ResolvedView", outputs: Sequence[ValueKey],
             ctx: Any = None) -> Graph:
    """One self-contained graph computing ``outputs``, with less work than ``graphs`` do.

    The result has no ``External`` reference and no parent. Its inputs are the
    ``Input`` keys that ``outputs`` depend on in ``graphs`` (also those a
    simplification made unused, so one ``values`` mapping serves both), in the
    order the graphs list them; its outputs compute ``outputs`` in order (a
    value listed twice appears twice), so ``evaluate(result, result.output_keys,
    values, ctx)`` equals ``evaluate(graphs, outputs, values, ctx)``. Its output
    keys differ from ``outputs`` where an output was rewritten.

    On the way: only the operations the outputs need are kept, equal operations
    are one, operations whose inputs are all constants are folded, and the
    primitive set's ``simplify`` rules are applied until nothing changes
    (:mod:`tidu.compile.simplify`). The result never has more operations than
    ``graphs`` spend on ``outputs``: if the rules made more than they saved, the
    result is the inlined graph without them. Folding and the rules see ``ctx``,
    so the result is for that ``ctx``.
    """
    try:
        view = resolve(graphs)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"optimize: {error}") from None
    outputs = sequence_argument(outputs, "optimize", "outputs")
    for key in outputs:
        if not isinstance(key, ValueKey) or key not in view:
            raise UnknownValueError(f"optimize output {key!r} is not a value of the graphs given")

    with gc_paused():
        return _optimize(view, outputs, ctx)


def _optimize(view: ResolvedView, outputs: list, ctx: Any) -> Graph:
    # inlining: what the outputs need, across graphs, each operation after those it reads
    operations = needed_operations(outputs)
    inputs = needed_inputs(view, outputs, operations)
    # CSE, constant folding, simplification: add each operation again, on its inputs' new keys
    rewriter = Rewriter(ctx, inputs)
    rewritten: dict[ValueKey, ValueKey] = {}           # original key -> key in the program
    for op_key in operations:
        inputs_now = tuple([rewritten.get(key, key) for key in op_key.inputs])
        if inputs_now == op_key.inputs:
            outputs_now = rewriter.add(op_key)
        else:
            outputs_now = rewriter.add(OperationKey(op_key.operation, inputs_now, op_key.role))
        if len(outputs_now) > 1 or producer(outputs_now[0]) is not op_key:
            rewritten.update(zip(op_key.output_keys(), outputs_now))
    outputs_now = [rewritten.get(key, key) for key in outputs]
    # dead code elimination: rewrites leave operations nothing reads any more
    program = live_operations(rewriter.operations, outputs_now)
    if len(program) > len(operations):                # the rules made more than they saved
        return closed_graph(inputs, operations, outputs)
    return closed_graph(inputs, program, outputs_now)
