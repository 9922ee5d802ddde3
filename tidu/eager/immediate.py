"""``ImmediateBuilder``: a ``PrimitiveBuilder`` that runs each op as it is added.

Runtimes use it with :func:`tidu.linear_transpose_with_builder` to execute a
transpose eagerly; ids index its list of values, ``External`` inputs are looked
up in ``external_data``.

>>> import enum
>>> from tidu.graph import EvaluableGraphOperation, Local
>>> class Op(EvaluableGraphOperation, enum.Enum):
...     MUL = "mul"
...     def input_count(self): return 2
...     def output_count(self): return 1
...     def eval(self, ctx, inputs): return [inputs[0] * inputs[1]]
>>> b = ImmediateBuilder({})
>>> x = b.push(3.0)
>>> [y] = b.add_primitive(Op.MUL, [Local(x), Local(x)], None)
>>> b.values[y]
9.0
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from tidu.errors import MissingValueError
from tidu.graph import Local, ValueKey, checked_eval_results, op_name


class ImmediateBuilder:
    """Evaluates every added op at once with its ``eval``; ``values[id]`` is the result."""

    __slots__ = ("values", "external_data", "ctx")

    def __init__(self, external_data: Mapping[ValueKey, Any], ctx: Any = None) -> None:
        self.values: list = []
        self.external_data = external_data
        self.ctx = ctx

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
                continue
            try:
                args.append(self.external_data[ref.key])
            except KeyError:
                raise MissingValueError(
                    f"{op_name(op)} needs {ref.key!r}, which the executor was not given") from None
        results = op.eval(self.ctx, args)
        n_out = op.output_count()
        if type(results) is not list or len(results) != n_out:
            results = checked_eval_results(op, results, n_out)
        start = len(self.values)
        self.values.extend(results)
        return list(range(start, len(self.values)))
