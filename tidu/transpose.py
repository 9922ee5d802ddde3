"""``linear_transpose``: from a linear graph to the graph of its transpose.

Walk the linear graph's operations last to first; every operation whose
outputs received a cotangent gets its transpose rule (replayed, for structural
rules, see :mod:`tidu.rules.replay`); cotangents flowing into the same value
(fan-out) are summed with the primitive set's ``add()``.

>>> from tidu.graph import Input, evaluate
>>> from tidu import linearize
>>> from tidu.example_ops import trace
>>> graph = trace(lambda x: x * x, ["x"])
>>> lin = linearize(graph, graph.output_keys, ["x"])
>>> tr = linear_transpose(lin)
>>> [(seed_key, _)] = tr.tangent_inputs
>>> evaluate([graph, lin.graph, tr.graph], tr.tangent_output_keys,
...          {Input("x"): 3.0, Input(seed_key): 1.0})
[6.0]
"""

from __future__ import annotations

import numbers
from typing import Any, Sequence

from tidu._gc import gc_paused
from tidu.errors import GraphError, InvalidArgumentError, UnknownValueError, sequence_argument
from tidu.graph import PRIMARY, Derived, Graph, op_name, resolve
from tidu.linearized import LinearizedGraph
from tidu.rules import CotangentSeed, GraphPrimitiveBuilder, RuleRunner, fresh_pass_id


def backward_pass(linear: LinearizedGraph, builder, cotangent_seeds: Sequence[int | None],
                  ctx: Any = None) -> list[int | None]:
    """The transpose walk: emit into ``builder``; return one cotangent id per tangent input.

    ``cotangent_seeds`` holds a builder id (or ``None``) per entry of
    ``linear.tangent_outputs``.
    """
    graph = linear.graph
    keys = graph.value_keys
    if len(cotangent_seeds) != len(linear.tangent_outputs):
        raise GraphError(f"{len(cotangent_seeds)} cotangent seeds given for "
                         f"{len(linear.tangent_outputs)} tangent outputs")
    cotangents: dict = {}                     # value key -> cotangent id; absent means zero
    rules = RuleRunner(builder, ctx)

    def accumulate(key, cotangent, op_type):
        existing = cotangents.get(key)
        cotangents[key] = cotangent if existing is None else rules.add(op_type, existing,
                                                                        cotangent)

    # Seeds of an output listed twice are summed with the add() of the op set that
    # the linear graph (or, when it has no operations, its primal graphs) is made of.
    for output_id, seed in zip(linear.tangent_outputs, cotangent_seeds):
        if output_id is not None and seed is not None:
            key = keys[output_id]
            op_type = _some_op_type(graph) if key in cotangents else None
            accumulate(key, seed, op_type)

    pop, get, transpose = cotangents.pop, cotangents.get, rules.transpose
    # A linear value: a tangent input, or the output of an operation of this graph with a
    # Linearized role. An operation the walk transposes reads them at its linear inputs only.
    tangent_input_keys = {keys[local_id] for _, local_id in linear.tangent_inputs}

    def is_linear(key) -> bool:
        if type(key) is Derived:
            return key._operation._role is not PRIMARY and key in graph
        return key in tangent_input_keys

    constants: dict = {}                      # role -> positions it marks constant
    # graph._op_first: op index -> local id of the op's first output
    for op_key, first in zip(reversed(graph.operation_keys), reversed(graph._op_first)):
        n_out = op_key._n_out
        if n_out == 1:
            cotangent = pop(keys[first], None)
            if cotangent is None:
                continue
            cotangent_out = [cotangent]
        else:
            cotangent_out = [pop(key, None) for key in keys[first:first + n_out]]
            if cotangent_out.count(None) == n_out:
                continue
        operation = op_key._operation
        inputs = op_key._inputs
        role = op_key._role
        constant = constants.get(role)
        if constant is None:
            constant = constants[role] = _constant_positions(operation, role)
        for position in constant:           # inputs the role reads as constants
            if is_linear(inputs[position]):
                raise GraphError(f"the linear graph is not linear: {op_name(operation)} with "
                                 f"role {role!r} reads the tangent {inputs[position]!r} at "
                                 f"input {position}, which its role marks constant")
        cotangent_in = transpose(operation, cotangent_out, inputs, role)
        for key, cotangent in zip(inputs, cotangent_in):
            if cotangent is not None:
                existing = get(key)
                cotangents[key] = cotangent if existing is None else rules.add(
                    type(operation), existing, cotangent)

    return [cotangents.get(keys[local_id]) for _, local_id in linear.tangent_inputs]


def _constant_positions(operation, role) -> tuple:
    """The input positions ``role`` marks constant; an operation with role ``PRIMARY`` is
    primal work, which cannot receive a cotangent: a :class:`GraphError` names it."""
    if role is PRIMARY:
        raise GraphError(f"the linear graph is not linear: {op_name(operation)} has role "
                         "PRIMARY (primal work) but receives a cotangent (its output is a "
                         "tangent output, or a transpose rule gave it a cotangent)")
    return tuple(i for i, active in enumerate(getattr(role, "active_mask", ())) if not active)


def _some_op_type(graph):
    """The type of the first operation found in ``graph`` or its parents."""
    for candidate in resolve(graph).graphs:
        if candidate.operation_keys:
            return type(candidate.operation_keys[0].operation)
    raise GraphError("a tangent output is listed twice but neither the linear graph nor its "
                     "parents have an operation whose add() could sum the seeds")


def linear_transpose(linear: LinearizedGraph, ctx: Any = None) -> LinearizedGraph:
    """The transpose of ``linear`` as a graph, from cotangent seeds to input cotangents.

    Its ``tangent_inputs`` are the seeds, one per active tangent output of
    ``linear``, in order; its ``tangent_outputs`` line up with ``linear.tangent_inputs``.
    The result refers to ``linear.graph`` (a parent) and its primal graphs by key.
    A graph that is not linear where a cotangent reaches it (an operation with role
    ``PRIMARY``, or one reading a tangent at an input its role marks constant) raises
    :class:`~tidu.errors.GraphError` naming the operation.
    """
    _check_linear(linear, "linear_transpose")
    linear.check_ids("linear_transpose")
    with gc_paused():
        return _linear_transpose(linear, ctx)


def _check_linear(linear, function: str) -> None:
    if isinstance(linear, LinearizedGraph):
        return
    hint = " (linearize the graph first: linearize(graph, outputs, wrt))" if isinstance(
        linear, Graph) else ""
    raise InvalidArgumentError(f"{function} needs a LinearizedGraph, got "
                               f"{'None' if linear is None else type(linear).__name__}{hint}")


def _linear_transpose(linear: LinearizedGraph, ctx: Any) -> LinearizedGraph:
    builder = GraphPrimitiveBuilder()
    builder.add_parent(linear.graph)
    pass_id = fresh_pass_id()
    seed_inputs = []
    seeds: list[int | None] = []
    for index, output_id in enumerate(linear.tangent_outputs):
        if output_id is None:
            seeds.append(None)
            continue
        seed_key = CotangentSeed(pass_id, index)
        seed_id = builder.add_input(seed_key)
        seed_inputs.append((seed_key, seed_id))
        seeds.append(seed_id)
    cotangents = backward_pass(linear, builder, seeds, ctx)
    builder.set_outputs([c for c in cotangents if c is not None])
    return LinearizedGraph(builder.build(), seed_inputs, cotangents, pass_id)


def linear_transpose_with_builder(linear: LinearizedGraph, builder,
                                  cotangent_seeds: Sequence[int | None],
                                  ctx: Any = None) -> list[int | None]:
    """Run the transpose of ``linear`` into a caller's ``builder`` (e.g. one that executes).

    ``cotangent_seeds`` are ids in ``builder`` (or ``None``), one per entry of
    ``linear.tangent_outputs``; returns one cotangent id (or ``None``) per
    entry of ``linear.tangent_inputs``. A seed that is not an id the builder
    made raises :class:`~tidu.errors.UnknownValueError` naming it (checked for
    builders with ``__len__``, whose ids are ``0 .. len - 1``, or ``__contains__``).

    >>> from tidu import linearize
    >>> from tidu.example_ops import trace
    >>> from tidu.rules import GraphPrimitiveBuilder
    >>> graph = trace(lambda x: x * x, ["x"])
    >>> lin = linearize(graph, graph.output_keys, ["x"])
    >>> builder = GraphPrimitiveBuilder()
    >>> linear_transpose_with_builder(lin, builder, [5])
    Traceback (most recent call last):
    ...
    tidu.errors.UnknownValueError: linear_transpose_with_builder: cotangent seed 5 (cotangent_seeds[0]) is not an id the builder made (it has no values)
    """
    _check_linear(linear, "linear_transpose_with_builder")
    if not callable(getattr(builder, "add_primitive", None)):
        raise InvalidArgumentError(f"linear_transpose_with_builder needs a builder with "
                                   f"add_primitive, got {type(builder).__name__}")
    linear.check_ids("linear_transpose_with_builder")
    seeds = _checked_seeds(sequence_argument(cotangent_seeds, "linear_transpose_with_builder",
                                             "cotangent_seeds"), builder)
    if not hasattr(builder, "__len__"):
        builder = _IdTrackingBuilder(builder, seeds)
    return backward_pass(linear, builder, seeds, ctx)


def _checked_seeds(seeds: list, builder) -> list:
    """``seeds`` as ids of ``builder`` (or ``None``): an error names any other seed."""
    size = len(builder) if hasattr(builder, "__len__") else None
    known = getattr(builder, "__contains__", None) if size is None else None
    checked = []
    for position, seed in enumerate(seeds):
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
                raise InvalidArgumentError(
                    f"linear_transpose_with_builder: cotangent_seeds[{position}] is {seed!r}, "
                    "not an id of the builder (an int) or None")
            seed = int(seed)
            if seed < 0 or (size is not None and seed >= size) or (
                    known is not None and not known(seed)):
                have = ("" if size is None else
                        f" (its ids are 0 to {size - 1})" if size else " (it has no values)")
                raise UnknownValueError(
                    f"linear_transpose_with_builder: cotangent seed {seed} "
                    f"(cotangent_seeds[{position}]) is not an id the builder made{have}")
        checked.append(seed)
    return checked


class _IdTrackingBuilder:
    """Wraps a builder without ``__len__`` so rule results can still be checked:
    it remembers every id the builder produced (and the seeds)."""

    __slots__ = ("inner", "produced")

    def __init__(self, inner, seeds) -> None:
        self.inner = inner
        self.produced = {s for s in seeds if s is not None}

    def add_primitive(self, op, inputs, role):
        ids = self.inner.add_primitive(op, inputs, role)
        self.produced.update(ids)
        return ids

    def __contains__(self, local_id) -> bool:
        return local_id in self.produced
