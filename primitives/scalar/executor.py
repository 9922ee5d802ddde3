"""Running the scalar set's backward work: ``ScalarExecutor`` and an immediate builder.

>>> from tidu.graph import Input
>>> from primitives.scalar import trace_scalar
>>> graph = trace_scalar(lambda x: x * x, ["x"])
>>> ScalarExecutor().execute_forward(graph, {Input("x"): 3.0})[graph.output_keys[0]]
9.0
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from tidu.eager import BackwardExecutor
from tidu.errors import MissingValueError
from tidu.graph import Graph, Local, ValueKey, compiled
from tidu.graph.operation import op_name


class ScalarExecutor(BackwardExecutor):
    """A :class:`BackwardExecutor` for ``ScalarOp`` graphs over Python numbers."""

    def execute_forward(self, graph: Graph, initial_data: Mapping[ValueKey, Any]
                        ) -> Mapping[ValueKey, Any]:
        return dict(zip(graph.output_keys, compiled(graph).run(initial_data)))

    def add_operands(self, a, b):
        return a + b


class ImmediateScalarBuilder:
    """A ``PrimitiveBuilder`` that runs each op at once: ids index its list of values.

    Use it with :func:`tidu.linear_transpose_with_builder` to execute a transpose
    eagerly; ``External`` inputs are looked up in ``external_data``.

    >>> from tidu.graph import Local
    >>> from primitives.scalar import ScalarOp
    >>> b = ImmediateScalarBuilder({})
    >>> x = b.push(2.0)
    >>> [y] = b.add_primitive(ScalarOp.MUL, [Local(x), Local(x)], None)
    >>> b.values[y]
    4.0
    """

    __slots__ = ("values", "external_data")

    def __init__(self, external_data: Mapping[ValueKey, Any]) -> None:
        self.values: list = []
        self.external_data = external_data

    def __len__(self) -> int:
        return len(self.values)

    def push(self, value) -> int:
        """Add a concrete value; return its id."""
        self.values.append(value)
        return len(self.values) - 1

    def add_primitive(self, op, inputs: Sequence, role=None) -> list[int]:
        args = []
        for ref in inputs:
            if type(ref) is Local:
                args.append(self.values[ref])
            else:
                key = ref.key
                try:
                    args.append(self.external_data[key])
                except KeyError:
                    raise MissingValueError(
                        f"{op_name(op)} needs {key!r}, which the executor was not given") from None
        start = len(self.values)
        self.values.extend(op.eval(None, args))
        return list(range(start, len(self.values)))
