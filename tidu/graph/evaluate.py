"""Evaluate value keys over one or more graphs, through a compiled :class:`Program`.

Only what the requested outputs need is computed; an operation shared by
several graphs (the same :class:`OperationKey`) runs once; every intermediate
is released right after its last use, and operations with the
``eval_reusing`` hook may write into the ones that die (the program's memory
plan, :mod:`tidu.graph.program`). The program is compiled once per output keys
and given keys, and kept on the first graph.

>>> import enum
>>> from tidu.graph import EvaluableGraphOperation, GraphBuilder, Local, Input
>>> class Op(EvaluableGraphOperation, enum.Enum):
...     ADD = "add"
...     def input_count(self): return 2
...     def output_count(self): return 1
...     def eval(self, ctx, inputs): return [inputs[0] + inputs[1]]
>>> b = GraphBuilder(); x = b.add_input("x")
>>> [y] = b.add_operation(Op.ADD, [Local(x), Local(x)])
>>> g = b.build()
>>> evaluate(g, [g.values[y].key], {Input("x"): 2})
[4]
"""

from __future__ import annotations

from collections.abc import Mapping as MappingABC
from typing import Any, Iterable, Mapping, Sequence

from tidu.errors import InvalidArgumentError, UnknownValueError, sequence_argument
from tidu.graph.builder import Graph
from tidu.graph.keys import ValueKey
from tidu.graph.program import Program, compiled_for, schedule
from tidu.graph.resolve import ResolvedView, resolve

__all__ = ["evaluate", "schedule"]       # schedule: also public as tidu.graph.schedule


def evaluate(
    graphs: "Graph | Iterable[Graph] | ResolvedView",
    outputs: Sequence[ValueKey],
    values: Mapping[ValueKey, Any],
    ctx: Any = None,
) -> list:
    """Compute the values of ``outputs`` given concrete ``values`` (usually for ``Input`` keys).

    Keys in ``values`` may also be intermediate (``Derived``) keys: their
    producers are then not run, and a value given wins over one computed.
    Operations must be :class:`EvaluableGraphOperation`. The values given are
    never written into.
    """
    view = resolve(graphs)
    outputs = sequence_argument(outputs, "evaluate", "outputs")
    if not isinstance(values, MappingABC):
        raise InvalidArgumentError(f"evaluate: values must be a mapping from value keys to "
                                   f"values, got {type(values).__name__}")
    for key in outputs:
        if not isinstance(key, ValueKey):
            raise UnknownValueError(f"evaluate output {key!r} is not a ValueKey")
        if key not in values and key not in view:
            raise UnknownValueError(f"{key!r} is not a value of the graphs given to evaluate")
    if view.graphs:
        program = compiled_for(view.graphs[0], outputs, values.keys())
    else:
        program = Program.for_values(outputs, values)
    return program.run(values, ctx)
