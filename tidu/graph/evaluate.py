"""Evaluate value keys over one or more graphs.

Only what the requested outputs need is computed; an operation shared by
several graphs (the same :class:`OperationKey`) runs once; every intermediate
is released right after its last use.

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

from tidu.errors import (
    EvalOutputError,
    InvalidArgumentError,
    MissingValueError,
    NotEvaluableError,
    UnknownValueError,
    sequence_argument,
)
from tidu.graph.builder import Graph
from tidu.graph.keys import Derived, OperationKey, ValueKey, existing_derived
from tidu.graph.operation import EvaluableGraphOperation, op_name
from tidu.graph.resolve import ResolvedView, resolve
from tidu.graph.walk import postorder


def schedule(outputs: Iterable[ValueKey], known: Mapping | set) -> list[OperationKey]:
    """Operations needed to compute ``outputs`` from ``known`` keys, dependencies first.

    An ``Input`` that is not known raises :class:`MissingValueError`.
    """
    def producers(op_key):
        needed = []
        for key in op_key._inputs:
            if key in known:
                continue
            if type(key) is not Derived:
                raise MissingValueError(f"no value given for {key!r} (input of {op_key!r})")
            needed.append(key._operation)
        return needed

    roots = []
    for out in outputs:
        if out in known:
            continue
        if type(out) is not Derived:
            raise MissingValueError(f"no value given for {out!r}")
        roots.append(out._operation)
    return postorder(roots, producers)


def checked_eval_results(operation, results, n_out: int) -> list | tuple:
    """``results`` if it is a list or tuple of ``n_out`` values; else :class:`EvalOutputError`.

    Anything else is refused, even when it has a length: a NumPy array returned
    bare would otherwise be read as one output per row.
    """
    if not isinstance(results, (list, tuple)):
        raise EvalOutputError(
            f"{op_name(operation)}.eval returned a {type(results).__name__}, not a list or "
            f"tuple of its {n_out} output(s): wrap a single output as [value]")
    if len(results) != n_out:
        raise EvalOutputError(f"{op_name(operation)}.eval returned {len(results)} values for "
                              f"{n_out} outputs")
    return results


def evaluate(
    graphs: "Graph | Iterable[Graph] | ResolvedView",
    outputs: Sequence[ValueKey],
    values: Mapping[ValueKey, Any],
    ctx: Any = None,
) -> list:
    """Compute the values of ``outputs`` given concrete ``values`` (usually for ``Input`` keys).

    Keys in ``values`` may also be intermediate (``Derived``) keys: their
    producers are then not run. Operations must be :class:`EvaluableGraphOperation`.
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
    order = schedule(outputs, values)

    uses: dict[ValueKey, int] = {}
    for key in outputs:
        uses[key] = uses.get(key, 0) + 1
    for op_key in order:
        for key in op_key._inputs:
            uses[key] = uses.get(key, 0) + 1
    env = {key: values[key] for key in uses if key in values}

    for op_key in order:
        operation = op_key._operation
        if not isinstance(operation, EvaluableGraphOperation):
            raise NotEvaluableError(f"{op_name(operation)} ({op_key!r}) has no eval")
        inputs = op_key._inputs
        args = [env[key] for key in inputs]
        for key in inputs:
            remaining = uses[key] - 1
            uses[key] = remaining
            if not remaining:
                del env[key]
        results = operation.eval(ctx, args)
        del args
        if type(results) is not list or len(results) != op_key._n_out:
            results = checked_eval_results(operation, results, op_key._n_out)
        for slot, result in enumerate(results):
            key = existing_derived(op_key, slot)
            if key is not None and key in uses and key not in values:
                env[key] = result       # a value the caller supplied wins
        del results
    return [env[key] for key in outputs]
