"""``batch``: from a graph to the graph of the same computation over a batch (``vmap``).

Every value of the new graph either carries a *batch axis* (of length
``axis_size``, at a known position) or is the same for every example. Walk what
the outputs depend on, dependencies first: an operation whose inputs are all
unbatched stays where it is, in the original graph; at any other operation call
its batch rule, which emits the batched work into the new graph and says where
each output's batch axis sits. Unbatched work stays unbatched, as zero tangents
cost nothing in :func:`tidu.linearize`.

The scalar ops of :mod:`tidu.example_ops` batch Python numbers into lists:

>>> from tidu.example_ops import trace, sin
>>> graph = trace(lambda x, y: x * y + sin(y), ["x", "y"])
>>> batched = batch(graph, graph.output_keys, {"x": 0, "y": None}, axis_size=3)
>>> print(batched.graph)
graph(a = Batched('x', pass_id=...)):
  b = Broadcast(size=3) ext('y')
  c = MUL a b
  d = Broadcast(size=3) ext(SIN#...:0)
  e = ADD c d
  return e
>>> batched.out_axes                     # the output's batch axis
[0]
>>> batched.evaluate({"x": [1.0, 2.0, 3.0], "y": 0.0})
[[0.0, 0.0, 0.0]]

``sin(y)`` does not depend on the batched ``x``: it is computed once, in the
original graph, and read from there (``ext(...)``).
"""

from __future__ import annotations

import operator
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Hashable, Sequence

from tidu._gc import gc_paused
from tidu.errors import (
    ADRuleError,
    ADRuleKind,
    InvalidArgumentError,
    RuleContractError,
    TiduError,
    UnknownValueError,
    sequence_argument,
)
from tidu.graph import (
    PRIMARY,
    Derived,
    External,
    Graph,
    Input,
    Linearized,
    Local,
    ValueKey,
    evaluate,
    key_inputs,
    op_name,
    postorder,
    resolve,
    short_repr,
)
from tidu.rules import GraphPrimitiveBuilder, fresh_pass_id

__all__ = ["BatchAxisError", "BatchedGraph", "BatchedKey", "batch", "input_role"]


class BatchAxisError(TiduError, ValueError):
    """A batch axis or batch size that cannot be used: an ``in_axes`` entry that is
    not a non-negative int or ``None``, a bad ``axis_size``, or an input value whose
    length along its batch axis is not ``axis_size``.

    >>> from tidu.example_ops import trace
    >>> graph = trace(lambda x: -x, ["x"])
    >>> batch(graph, graph.output_keys, {"x": -1}, axis_size=2)
    Traceback (most recent call last):
    ...
    tidu.batching.BatchAxisError: batch: the batch axis of input 'x' is -1; expected a non-negative int or None ...
    """


class BatchedKey:
    """The key of the batched input made for input ``base`` in batching pass ``pass_id``.

    >>> BatchedKey("x", 3)
    Batched('x', pass_id=3)
    >>> BatchedKey("x", 3) == BatchedKey("x", 3) != BatchedKey("x", 4)
    True
    """

    __slots__ = ("base", "pass_id", "_hash")

    def __init__(self, base: Hashable, pass_id: int) -> None:
        self.base = base
        self.pass_id = pass_id
        self._hash = hash((BatchedKey, base, pass_id))

    def __eq__(self, other) -> bool:
        return self is other or (
            type(other) is BatchedKey and self._hash == other._hash
            and self.pass_id == other.pass_id and self.base == other.base
        )

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Batched({short_repr(self.base)}, pass_id={self.pass_id})"

    def __reduce__(self):
        return (BatchedKey, (self.base, self.pass_id))


_LINEAR_ONE = Linearized((True,))


def input_role(role, index: int):
    """The role of one-input work a batch rule emits on input ``index`` of an op with ``role``.

    Moving or broadcasting a linear input (a tangent) is linear work,
    ``Linearized((True,))``; the same on a primal input (or in primal work) is
    ``PRIMARY``. So the batched graph of a linear graph is linear in the same
    values, and can be transposed.

    >>> input_role(Linearized((True, False)), 0), input_role(Linearized((True, False)), 1)
    (Linearized(T), PRIMARY)
    >>> input_role(PRIMARY, 0)
    PRIMARY
    """
    if role is PRIMARY or not role.active_mask[index]:
        return PRIMARY
    return _LINEAR_ONE


@dataclass(frozen=True)
class BatchedGraph:
    """What :func:`batch` returns: the batched graph and how its inputs and outputs line up.

    ``inputs`` are ``(input key, local id)`` pairs, one per input of ``in_axes``
    with a batch axis, in that order: the graph's input holding the batch of
    that input. ``output_keys`` line up with the outputs asked for: a value of
    ``graph`` where the output has a batch axis (at ``out_axes[i]``), the
    original key (read from the original graphs, a parent of ``graph``) where
    ``out_axes[i]`` is ``None``. :meth:`evaluate` runs it on values keyed by the
    original input keys.

    >>> from tidu.example_ops import trace
    >>> graph = trace(lambda x, y: x * y, ["x", "y"])
    >>> batched = batch(graph, graph.output_keys, {"x": 0, "y": 0}, axis_size=2, pass_id=5)
    >>> batched.inputs
    [('x', 0), ('y', 1)]
    >>> batched.input_keys
    [Input(Batched('x', pass_id=5)), Input(Batched('y', pass_id=5))]
    >>> batched.evaluate({"x": [1.0, 2.0], "y": [3.0, 4.0]})
    [[3.0, 8.0]]
    """

    graph: Graph
    inputs: list[tuple[Any, int]]
    in_axes: dict
    output_keys: list[ValueKey]
    out_axes: list[int | None]
    axis_size: int
    pass_id: int

    @cached_property
    def input_keys(self) -> list[ValueKey]:
        """The value keys of the batched inputs, aligned with ``inputs``."""
        return [self.graph.value_keys[local_id] for _, local_id in self.inputs]

    def evaluate(self, values: Mapping[Hashable, Any], ctx: Any = None) -> list:
        """The outputs, from values keyed by the original graphs' input keys.

        A batched input takes the whole batch, whose length along its batch axis
        must be ``axis_size`` (read from the value's ``shape``, or its ``len``
        for axis 0); any other input takes one value, shared by every example.
        Raises :class:`BatchAxisError` naming the input whose length is wrong.
        """
        if not isinstance(values, Mapping):
            raise InvalidArgumentError(f"BatchedGraph.evaluate: values must be a mapping from "
                                       f"input keys to values, got {type(values).__name__}")
        batched_keys = dict(zip((key for key, _ in self.inputs), self.input_keys))
        given = {}
        for key, value in values.items():
            batched_key = batched_keys.get(key)
            if batched_key is None:
                given[Input(key)] = value
            else:
                _check_batch_length(key, value, self.in_axes[key], self.axis_size)
                given[batched_key] = value
        return evaluate(self.graph, self.output_keys, given, ctx)

    def __str__(self) -> str:
        return str(self.graph)


def _check_batch_length(key, value, axis: int, axis_size: int) -> None:
    shape = getattr(value, "shape", None)
    if shape is not None:
        if axis >= len(shape):
            raise BatchAxisError(f"input {key!r} has {len(shape)} axes (shape {tuple(shape)}), "
                                 f"so it has no batch axis {axis}")
        length = shape[axis]
    elif axis == 0 and hasattr(value, "__len__"):
        length = len(value)
    else:
        raise BatchAxisError(f"input {key!r} is {reprlib.repr(value)}, which has no axis "
                             f"{axis} to batch along (give an array, or a list for axis 0)")
    if length != axis_size:
        raise BatchAxisError(f"input {key!r} has length {length} along its batch axis {axis}, "
                             f"but the batch size (axis_size) is {axis_size}")


def batch(graphs, outputs: Sequence[ValueKey], in_axes: Mapping[Hashable, int | None],
          axis_size: int, ctx: Any = None, pass_id: int | None = None) -> BatchedGraph:
    """The graph computing ``outputs`` for a batch of ``axis_size`` examples at once.

    ``graphs`` is a ``Graph``, graphs, or a ``ResolvedView``; ``outputs`` are
    value keys. ``in_axes`` maps input keys (``"x"``, not ``Input("x")``) to the
    position of their batch axis, or ``None`` for an input shared by every
    example; inputs it does not name are unbatched too. Each batched input ``k``
    becomes an input of the new graph keyed ``BatchedKey(k, pass_id)``
    (``pass_id=None`` picks a fresh one). ``ctx`` is passed to every rule.

    Operations whose inputs are all unbatched are not batched: they stay in the
    original graphs, which the new graph reads with ``External`` keys (and holds
    as parents). Every other operation's :meth:`~tidu.Primitive.batch_rule` is
    called; an op without one raises :class:`~tidu.ADRuleError` naming it. An
    output that depends on no batched input has batch axis ``None``.

    Raises :class:`BatchAxisError` for an axis that is not a non-negative int or
    ``None`` (tidu knows no shapes: a front end turns negative axes into
    positions) and for an ``axis_size`` that is not a non-negative int,
    :class:`~tidu.errors.UnknownValueError` for a key that is no input of the
    graphs, or an output that is not one of their values.

    >>> from tidu.example_ops import trace, sin
    >>> graph = trace(lambda x, y: (x * y, sin(y)), ["x", "y"])
    >>> batched = batch(graph, graph.output_keys, {"x": 0}, axis_size=2)
    >>> batched.out_axes                     # sin(y) does not depend on x: not batched
    [0, None]
    >>> products, sin_y = batched.evaluate({"x": [1.0, 2.0], "y": 3.0})
    >>> products
    [3.0, 6.0]
    """
    view = _resolved(graphs)
    outputs = sequence_argument(outputs, "batch", "outputs")
    if not isinstance(in_axes, Mapping):
        raise InvalidArgumentError(f"batch: in_axes must be a mapping from input keys to batch "
                                   f"axes (int or None), got {type(in_axes).__name__}")
    in_axes = {key: _checked_axis(key, axis) for key, axis in in_axes.items()}
    if type(axis_size) is bool or not hasattr(axis_size, "__index__") or \
            operator.index(axis_size) < 0:
        raise BatchAxisError(f"batch: axis_size must be a non-negative int, got "
                             f"{reprlib.repr(axis_size)}")
    axis_size = operator.index(axis_size)
    for key in outputs:
        if not isinstance(key, ValueKey) or key not in view:
            raise UnknownValueError(f"batch output {key!r} is not a value of the graphs given")
    for key in in_axes:
        if Input(key) not in view:
            raise UnknownValueError(f"batch in_axes {key!r}: no graph given has this input")
    if pass_id is None:
        pass_id = fresh_pass_id()
    with gc_paused():
        return _batch(view, outputs, in_axes, axis_size, pass_id, ctx)


def _resolved(graphs):
    try:
        return resolve(graphs)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"batch: {error}") from None


def _checked_axis(key, axis) -> int | None:
    if axis is None:
        return None
    if type(axis) is not bool and hasattr(axis, "__index__") and operator.index(axis) >= 0:
        return operator.index(axis)
    raise BatchAxisError(f"batch: the batch axis of input {key!r} is {reprlib.repr(axis)}; "
                         "expected a non-negative int or None (tidu knows no shapes, so a "
                         "negative axis must be turned into a position first)")


def _batch(view, outputs: list, in_axes: dict, axis_size: int, pass_id: int,
           ctx) -> BatchedGraph:
    builder = GraphPrimitiveBuilder()
    for graph in view.graphs:
        builder.add_parent(graph)

    refs: dict[ValueKey, Local] = {}          # value key -> its value in the new graph;
    axes: dict[ValueKey, int | None] = {}     # absent: the original value, unbatched
    inputs = []
    for key, axis in in_axes.items():
        if axis is not None:
            local_id = builder.add_input(BatchedKey(key, pass_id))
            refs[Input(key)] = Local(local_id)
            axes[Input(key)] = axis
            inputs.append((key, local_id))

    get_ref, get_axis = refs.get, axes.get
    visited_ops = set()                       # ops with several outputs are met once per output
    for key in postorder(outputs, key_inputs):
        if type(key) is not Derived:
            continue
        op_key = key._operation
        in_keys = op_key._inputs
        in_refs = list(map(get_ref, in_keys))
        if in_refs.count(None) == len(in_refs):
            continue                          # nothing batched flows in: stays in the original
        n_out = op_key._n_out
        if n_out == 1:
            out_keys = (key,)
        elif op_key in visited_ops:
            continue
        else:
            visited_ops.add(op_key)
            out_keys = op_key.output_keys()
        in_refs = [External(k) if ref is None else ref for k, ref in zip(in_keys, in_refs)]
        in_axes_of_op = list(map(get_axis, in_keys))
        operation = op_key._operation
        if in_axes_of_op.count(None) == len(in_axes_of_op):
            # unbatched values the new graph made (a rule's unbatched output): copy the op
            ids = builder.add_primitive(operation, in_refs, op_key._role)
            out_axes = [None] * n_out
        else:
            ids, out_axes = _call_rule(builder, operation, in_refs, in_axes_of_op,
                                       op_key._role, axis_size, ctx, n_out)
        for out_key, local_id, axis in zip(out_keys, ids, out_axes):
            refs[out_key] = Local(local_id)
            axes[out_key] = axis

    output_keys = [builder.global_key(refs[k]) if k in refs else k for k in outputs]
    out_axes = [axes.get(k) for k in outputs]
    builder.set_outputs([refs[k] for k in outputs if k in refs])
    return BatchedGraph(builder.build(), inputs, in_axes, output_keys, out_axes, axis_size,
                        pass_id)


def _call_rule(builder, operation, inputs: list, axes: list, role, axis_size: int, ctx,
               n_out: int) -> tuple[list, list]:
    """``operation``'s batch rule, its results checked against the rule contract."""
    rule = getattr(operation, "batch_rule", None)
    if rule is None:
        raise ADRuleError(op_name(operation), ADRuleKind.BATCH, "it is not a tidu.Primitive")
    result = rule(builder, inputs, axes, role, axis_size, ctx)
    if type(result) is tuple and len(result) == 2:
        ids, out_axes = result
        size = len(builder)
        if (type(ids) is list and len(ids) == n_out
                and all(type(i) is int and 0 <= i < size for i in ids)
                and type(out_axes) is list and len(out_axes) == n_out
                and all(a is None or (type(a) is int and a >= 0) for a in out_axes)):
            return ids, out_axes
    return _checked_results(result, n_out, builder, operation)


def _as_list(part, name: str, what: str) -> list:
    try:
        return list(part)
    except TypeError:
        raise RuleContractError(name, ADRuleKind.BATCH, f"returned {what} "
                                f"{reprlib.repr(part)}, not a sequence") from None


def _checked_results(result, n_out: int, builder, operation) -> tuple[list, list]:
    """The slow path of the contract check: normalize a valid result or say what is wrong."""
    name = op_name(operation)
    batch_kind = ADRuleKind.BATCH
    if not (isinstance(result, (tuple, list)) and len(result) == 2
            and not isinstance(result[0], int) and not isinstance(result[1], int)):
        raise RuleContractError(name, batch_kind, f"returned {reprlib.repr(result)}; a batch "
                                "rule returns (output ids, output batch axes)")
    ids, out_axes = (_as_list(part, name, what) for part, what in
                     zip(result, ("output ids", "batch axes")))
    for what, got in (("ids", ids), ("batch axes", out_axes)):
        if len(got) != n_out:
            raise RuleContractError(name, batch_kind, f"returned {len(got)} {what} for "
                                    f"{n_out} outputs")
    size = len(builder)
    for slot, local_id in enumerate(ids):
        if local_id is None:
            raise RuleContractError(name, batch_kind, f"output {slot} has no id (None): every "
                                    "output has a value (give an output that is the same for "
                                    "every example batch axis None)")
        if type(local_id) is not int:
            raise RuleContractError(name, batch_kind, f"id of output {slot} is "
                                    f"{reprlib.repr(local_id)}, not an int id")
        if not 0 <= local_id < size:
            raise RuleContractError(name, batch_kind, f"id of output {slot} is {local_id}, "
                                    "which its builder never produced")
    for slot, axis in enumerate(out_axes):
        if axis is None:
            continue
        if type(axis) is bool or not hasattr(axis, "__index__") or operator.index(axis) < 0:
            raise RuleContractError(name, batch_kind, f"batch axis of output {slot} is "
                                    f"{axis!r}, not a non-negative int or None")
        out_axes[slot] = operator.index(axis)
    return ids, out_axes
