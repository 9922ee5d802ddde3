"""Running the scalar set's backward work: ``ScalarExecutor`` and an immediate builder.

>>> from tidu.graph import Input
>>> from primitives.scalar import trace_scalar
>>> graph = trace_scalar(lambda x: x * x, ["x"])
>>> ScalarExecutor().execute_forward(graph, {Input("x"): 3.0})[graph.output_keys[0]]
9.0
"""

from __future__ import annotations

from numbers import Number, Real
from typing import Any, Callable, Mapping, Sequence

from tidu.eager import BackwardExecutor, ImmediateBuilder
from tidu.graph import Graph, ValueKey, compiled
from primitives.scalar.ops import ScalarTypeError


class ScalarExecutor(BackwardExecutor):
    """A :class:`BackwardExecutor` for ``ScalarOp`` graphs over Python numbers.

    It overrides neither hook, so backward runs each node's fused plan through
    ``compile_graph``; a subclass's override of ``execute_forward`` or
    ``run_transposed_linear`` is called per node instead (see
    ``tests/test_seed_executor.py`` and ``examples/seed_executor.py``).
    """

    def execute_forward(self, graph: Graph, initial_data: Mapping[ValueKey, Any]
                        ) -> Mapping[ValueKey, Any]:
        return dict(zip(graph.output_keys, compiled(graph).run(initial_data)))

    def compile_graph(self, graph: Graph, input_keys: Sequence[ValueKey]
                      ) -> Callable[[Sequence[Any]], list]:
        """``graph``'s compiled program as a function of the values of ``input_keys``.

        A subclass that overrides ``execute_forward`` (and not this) has backward call
        that override instead, with the seed's hooks (:func:`tidu.eager.try_backward`).

        >>> from primitives.scalar import trace_scalar
        >>> graph = trace_scalar(lambda x, y: x * y, ["x", "y"])
        >>> ScalarExecutor().compile_graph(graph, graph.input_keys)([3.0, 5.0])
        [15.0]
        """
        return compiled(graph).runner(input_keys)

    def add_operands(self, a, b):
        return a + b

    def check_seed(self, seed, output) -> None:
        """A seed must be a number (not a bool), and real when ``output`` is real.

        >>> ScalarExecutor().check_seed("1", 2.0)
        Traceback (most recent call last):
        ...
        primitives.scalar.ops.ScalarTypeError: backward seed '1' is a str, not a number
        """
        if isinstance(seed, bool) or not isinstance(seed, Number):
            raise ScalarTypeError(f"backward seed {seed!r} is a {type(seed).__name__}, "
                                  "not a number")
        if not isinstance(seed, Real) and isinstance(output, Real):
            raise ScalarTypeError(f"backward seed {seed!r} is complex but the value {output!r} "
                                  "is real: its cotangent must be real")


ImmediateScalarBuilder = ImmediateBuilder
"""The immediate builder for this set: :class:`tidu.eager.ImmediateBuilder`."""
