"""Running tensor backward work on NumPy: ``NumpyExecutor`` and an immediate builder.

>>> from tidu.graph import GraphBuilder, Local, Input
>>> from primitives.tensor.ops import elementwise as ew
>>> b = GraphBuilder(); x = b.add_input("x")
>>> b.set_outputs(b.add_operation(ew.exp, [Local(x)])); g = b.build()
>>> NumpyExecutor().execute_forward(g, {Input("x"): np.zeros(2)})[g.output_keys[0]]
array([1., 1.])
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from tidu.eager import BackwardExecutor
from tidu.errors import MissingValueError
from tidu.graph import Graph, Local, ValueKey, compiled
from tidu.graph.operation import op_name


class NumpyExecutor(BackwardExecutor):
    """A :class:`BackwardExecutor` for tensor-primitive graphs over NumPy arrays."""

    def execute_forward(self, graph: Graph, initial_data: Mapping[ValueKey, Any]
                        ) -> Mapping[ValueKey, Any]:
        return dict(zip(graph.output_keys, compiled(graph).run(initial_data)))

    def add_operands(self, a, b):
        return np.add(a, b)


class ImmediateNumpyBuilder:
    """A ``PrimitiveBuilder`` that runs each op at once; ids index its list of values."""

    __slots__ = ("values", "external_data")

    def __init__(self, external_data: Mapping[ValueKey, Any]) -> None:
        self.values: list = []
        self.external_data = external_data

    def __len__(self) -> int:
        return len(self.values)

    def push(self, value) -> int:
        self.values.append(value)
        return len(self.values) - 1

    def add_primitive(self, op, inputs: Sequence, role=None) -> list[int]:
        args = []
        for ref in inputs:
            if type(ref) is Local:
                args.append(self.values[ref])
            else:
                try:
                    args.append(self.external_data[ref.key])
                except KeyError:
                    raise MissingValueError(f"{op_name(op)} needs {ref.key!r}, which the "
                                            "executor was not given") from None
        start = len(self.values)
        self.values.extend(op.eval(None, args))
        return list(range(start, len(self.values)))
