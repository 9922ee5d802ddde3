"""Eager reverse mode: ``BackwardExecutor`` and ``try_backward``.

``try_backward`` walks the trace from an output back to the leaves, last node
first. At each node it takes a cached *backward plan* for the node's structure
and the slots that carry cotangents: the node's linear graph and a small
forward graph of the primal values that linear graph reads.

By default the plan fuses that forward graph with the transposed linear graph
into one backward graph, which the executor compiles once (``compile_graph``)
and runs at every node with the plan. An executor that overrides
``run_transposed_linear`` gets the steps apart instead: it recomputes the
values (``execute_forward``), then runs the transposed linear map. Either way
it sums cotangents (``add_operands``).
"""

from __future__ import annotations

import abc
import threading
from operator import attrgetter
from typing import Any, Callable, Mapping, Sequence

from tidu.errors import InvalidArgumentError, MissingValueError
from tidu.graph import PRIMARY, External, Graph, GraphBuilder, Input, Local, ValueKey
from tidu.graph.evaluate import schedule
from tidu.linearize import linearize
from tidu.linearized import LinearizedGraph
from tidu.transpose import linear_transpose
from tidu.eager.record import EagerError
from tidu.eager.trace import Trace


class BackwardExecutor(abc.ABC):
    """What a runtime provides so tidu can run backward on its data.

    ``execute_forward`` and ``add_operands`` are required.
    ``run_transposed_linear`` has a default: it transposes ``linear`` once
    (memoized on it) and runs the transposed graph with ``execute_forward``.
    Override it to execute transposes eagerly, e.g. with
    :func:`tidu.linear_transpose_with_builder` and an immediate builder.
    ``check_seed`` (optional) refuses seeds that do not fit the output, such as
    one of the wrong shape or dtype: tidu itself knows neither.
    """

    @abc.abstractmethod
    def execute_forward(self, graph: Graph, initial_data: Mapping[ValueKey, Any]
                        ) -> Mapping[ValueKey, Any]:
        """Evaluate ``graph`` from ``initial_data``; return at least its outputs' values, by key."""

    def run_transposed_linear(self, linear: LinearizedGraph, cotangent_out: Sequence[Any | None],
                              external_data: Mapping[ValueKey, Any], ctx
                              ) -> Sequence[Any | None]:
        """Cotangents of ``linear``'s tangent inputs, given ones of its tangent outputs."""
        transposed = transposed_of(linear, ctx)
        data = dict(external_data)
        seeds = iter(transposed.tangent_input_keys)
        for output_id, cotangent in zip(linear.tangent_outputs, cotangent_out):
            if output_id is None:
                continue
            seed_key = next(seeds)
            if cotangent is None:
                raise MissingValueError(
                    f"no cotangent given for tangent output {linear.graph.value_keys[output_id]!r}")
            data[seed_key] = cotangent
        values = self.execute_forward(transposed.graph, data)
        return [None if key is None else values[key] for key in transposed.tangent_output_keys]

    @abc.abstractmethod
    def add_operands(self, a, b):
        """``a + b`` for two cotangents of the same value."""

    def check_seed(self, seed, output) -> None:
        """Raise a :class:`tidu.TiduError` if ``seed`` cannot be the cotangent of ``output``.

        ``try_backward`` calls it once, with the recorded output's data, before
        any work: tidu knows no shapes or dtypes, so the runtime checks that the
        seed has the output's shape and a dtype its cotangent may have. The default
        accepts any seed (``None`` is refused by ``try_backward`` itself).
        """

    def compile_graph(self, graph: Graph, input_keys: Sequence[ValueKey]
                      ) -> Callable[[Sequence[Any]], Sequence[Any]]:
        """A function from the values of ``input_keys`` (in order) to ``graph``'s outputs' values.

        Backward compiles each cached backward plan once and then calls the
        result at every node with that plan. The default runs
        ``execute_forward``; override it to skip that call's dict round trip.
        """
        outputs = graph.output_keys

        def run(values: Sequence[Any]) -> list:
            computed = self.execute_forward(graph, dict(zip(input_keys, values)))
            try:
                return [computed[key] for key in outputs]
            except KeyError as missing:
                raise MissingValueError(f"the executor's execute_forward did not provide "
                                        f"{missing.args[0]!r}") from None
        return run


_memo_lock = threading.Lock()


def transposed_of(linear: LinearizedGraph, ctx=None) -> LinearizedGraph:
    """``linear_transpose(linear)``, computed once per linear graph and kept on it."""
    memo = linear.__dict__.get("_transposed")
    if memo is None:
        with _memo_lock:
            memo = linear.__dict__.get("_transposed")
            if memo is None:
                memo = linear_transpose(linear, ctx)
                object.__setattr__(linear, "_transposed", memo)
    return memo


class _Canonical:
    """Input keys of the shared one-op graphs that primitive nodes' plans are built on."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __eq__(self, other):
        return type(other) is _Canonical and other.index == self.index

    def __hash__(self):
        return hash((_Canonical, self.index))

    def __repr__(self) -> str:
        return f"arg{self.index}"


class BackwardPlan:
    """What backward does at a node of one structure with given active inputs and outputs.

    ``linear`` maps the active inputs' tangents (in ``active_inputs`` order) to the
    tangents of the distinct graph values behind the active outputs; output slots
    naming the same value (a graph may list one value twice) form one group in
    ``output_groups``, whose cotangents backward sums first. ``forward`` computes
    the primal values ``needed`` by the linear graph from the node's data
    (``None`` when the data has them all); ``input_keys``/``output_keys`` name the
    node's data in that graph.

    ``backward_graph`` fuses ``forward`` with the transpose of ``linear``: from
    the node's data (``input_keys``, ``output_keys``, then ``data_keys``) and
    one seed per ``seed_groups`` entry, it computes the active inputs'
    cotangents; ``cotangent_outputs`` gives, per active input, the index of its
    cotangent among the graph's outputs (``None`` for a zero).
    """

    __slots__ = ("linear", "forward", "needed", "input_keys", "output_keys", "data_keys",
                 "active_inputs", "output_groups", "seed_groups", "backward_graph",
                 "load_keys", "cotangent_outputs", "all_outputs", "_compiled")

    def __init__(self, graph: Graph, input_keys, output_keys, active_inputs, active_outputs,
                 data_keys, ctx) -> None:
        self.input_keys = tuple(input_keys)
        self.output_keys = tuple(output_keys)
        self.data_keys = tuple(data_keys)
        self.active_inputs = tuple(active_inputs)
        groups: dict = {}
        for slot in active_outputs:
            groups.setdefault(self.output_keys[slot], []).append(slot)
        self.output_groups = tuple(tuple(slots) for slots in groups.values())
        wrt = [self.input_keys[i].key for i in self.active_inputs]
        self.linear = linearize(graph, list(groups), wrt, ctx=ctx)
        self.needed = _primal_values_read(self.linear)
        known = set(self.data_keys) | set(self.input_keys) | set(self.output_keys)
        self.forward = _forward_graph(self.needed, known)
        self._compiled = None
        self.backward_graph = None

    def _fuse(self, transposed: LinearizedGraph) -> None:
        known = set(self.input_keys) | set(self.output_keys) | set(self.data_keys)
        # A group whose value does not depend on the active inputs takes no seed.
        self.seed_groups = tuple(slots for slots, output_id
                                 in zip(self.output_groups, self.linear.tangent_outputs)
                                 if output_id is not None)
        seed_keys = tuple(transposed.tangent_input_keys)
        builder = GraphBuilder()
        for key in seed_keys:
            builder.add_input(key.key)
        targets = [key for key in transposed.tangent_output_keys if key is not None]
        for op_key in schedule(targets, known | set(seed_keys)):
            builder.add_operation(op_key.operation, [External(k) for k in op_key.inputs],
                                  op_key.role)
        builder.set_outputs([builder.local_id(key) for key in targets])
        self.load_keys = self.input_keys + self.output_keys + self.data_keys + seed_keys
        outputs = iter(range(len(targets)))
        self.cotangent_outputs = tuple(None if key is None else next(outputs)
                                       for key in transposed.tangent_output_keys)
        self.all_outputs = self.cotangent_outputs == tuple(range(len(targets)))
        self.backward_graph = builder.build()     # last: other threads test it to skip _fuse

    def runner(self, executor: "BackwardExecutor", ctx=None
               ) -> Callable[[Sequence[Any]], Sequence[Any]]:
        """``backward_graph`` compiled by ``executor`` (kept for the last executor used).

        The graph is built on first use, with ``ctx`` passed to the transpose rules.
        """
        compiled = self._compiled
        if compiled is None or compiled[0] is not executor:
            if self.backward_graph is None:
                self._fuse(transposed_of(self.linear, ctx))
            compiled = (executor, executor.compile_graph(self.backward_graph, self.load_keys))
            self._compiled = compiled
        return compiled[1]


def _primal_values_read(linear: LinearizedGraph) -> tuple:
    """Keys of the primal values the linear ops of ``linear`` read (not tangents)."""
    graph = linear.graph
    linear_values = {graph.value_keys[i] for _, i in linear.tangent_inputs}
    needed: dict = {}
    for op_key in graph.operation_keys:
        if op_key.role is PRIMARY:
            continue
        for output in op_key.output_keys():
            linear_values.add(output)
        for key in op_key.inputs:
            if key not in linear_values:
                needed[key] = None
    return tuple(needed)


def _forward_graph(needed: Sequence[ValueKey], known: set) -> Graph | None:
    """A graph computing the ``needed`` keys from ``known`` ones, or ``None`` if all are known."""
    missing = [key for key in needed if key not in known]
    if not missing:
        return None
    builder = GraphBuilder()
    for op_key in schedule(missing, known):
        builder.add_operation(op_key.operation, [External(k) for k in op_key.inputs], op_key.role)
    builder.set_outputs([builder.local_id(key) for key in missing])
    return builder.build()


_plans: dict = {}
_PLAN_CACHE_SIZE = 4096


def _canonical_graph(op) -> tuple[Graph, tuple, tuple]:
    builder = GraphBuilder()
    ids = [builder.add_input(_Canonical(i)) for i in range(op.input_count())]
    builder.set_outputs(builder.add_operation(op, [Local(i) for i in ids]))
    graph = builder.build()
    return graph, graph.input_keys, graph.output_keys


def backward_plan(node, active_inputs: tuple, active_outputs: tuple, ctx) -> BackwardPlan:
    """The plan for ``node``: shared per (op, active slots) for primitive nodes.

    Shared plans (and the transposes memoized on them) are built with the
    ``ctx`` of their first use, so rules should not depend on ``ctx`` values
    that change between backward calls.
    """
    recorded = node.recorded
    op = recorded.primitive
    if op is None:
        return BackwardPlan(recorded.graph, [Input(k) for k in recorded.input_keys],
                            recorded.output_keys, active_inputs, active_outputs,
                            node.retained or (), ctx)
    cache_key = (op, active_inputs, active_outputs)
    plan = _plans.get(cache_key)
    if plan is None:
        graph, input_keys, output_keys = _canonical_graph(op)
        plan = BackwardPlan(graph, input_keys, output_keys, active_inputs, active_outputs, (), ctx)
        if len(_plans) >= _PLAN_CACHE_SIZE:
            _plans.clear()
        _plans[cache_key] = plan
    return plan


def _nodes_last_first(output_trace) -> list:
    """Every trace node reachable from ``output_trace``, consumers before their inputs.

    A node is always recorded after the nodes of its inputs, so ordering by
    recording serial, newest first, is a reverse topological order.
    """
    seen = {output_trace}
    stack = [output_trace]
    while stack:
        for item in stack.pop().inputs:
            parent = item.trace
            if parent is not None and parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return sorted(seen, key=_serial, reverse=True)


_serial = attrgetter("serial")


def try_backward(output_key: ValueKey, output_trace, seed, executor: BackwardExecutor,
                 ctx=None) -> dict[ValueKey, Any]:
    """Propagate ``seed`` (the cotangent of ``output_key``) back through the trace.

    Returns the accumulated cotangent of every eager value key that received
    one (leaves and intermediates; inputs with ``requires_grad=False`` get
    none). An output with no trace gets just the seed back. The trace is not
    changed, so calling this twice gives the same result.

    Checked first, at O(1) cost: ``output_key`` is a ``ValueKey`` output by
    ``output_trace``, ``executor`` a :class:`BackwardExecutor`, ``seed`` not
    ``None``; then ``executor.check_seed(seed, output_data)`` checks what only the
    runtime knows (shape, dtype). Misuse raises a :class:`tidu.TiduError`.
    """
    if not isinstance(output_key, ValueKey):
        raise InvalidArgumentError(f"try_backward: output_key must be a ValueKey, got "
                                   f"{output_key!r}")
    if not isinstance(executor, BackwardExecutor):
        got = (f"the class {executor.__name__} (pass an instance)" if isinstance(executor, type)
               else "None" if executor is None else type(executor).__name__)
        raise InvalidArgumentError(f"try_backward needs a BackwardExecutor, got {got}")
    if seed is None:
        raise InvalidArgumentError(f"try_backward: the seed (the cotangent of {output_key!r}) "
                                   "is None; pass a value, e.g. 1.0 for a real scalar output")
    cotangents: dict[ValueKey, Any] = {output_key: seed}
    if output_trace is None:
        return cotangents
    if not isinstance(output_trace, Trace):
        raise InvalidArgumentError(f"try_backward: output_trace must be a Trace or None, got "
                                   f"{type(output_trace).__name__}")
    output_keys = output_trace.output_keys
    if output_key not in output_keys:
        raise EagerError(f"{output_key!r} is not an output of {output_trace!r}")
    executor.check_seed(seed, output_trace.output_data[output_keys.index(output_key)])
    fused = type(executor).run_transposed_linear is BackwardExecutor.run_transposed_linear
    add = executor.add_operands
    get = cotangents.get

    for node in _nodes_last_first(output_trace):
        key = node.output_key
        if key is not None:                 # one output
            cotangent = get(key)
            if cotangent is None:
                continue
            cotangent_out = [cotangent]
            active_outputs = _FIRST_ONLY
        else:
            cotangent_out = [get(key) for key in node.output_keys]
            active_outputs = tuple(i for i, c in enumerate(cotangent_out) if c is not None)
            if not active_outputs:
                continue
        op = node.recorded.primitive
        plan = _plans.get((op, node.active_inputs, active_outputs)) if op is not None else None
        if plan is None:
            plan = backward_plan(node, node.active_inputs, active_outputs, ctx)
        if fused:
            cotangent_in = _run_fused(node, plan, cotangent_out, executor, ctx)
        else:
            cotangent_in = _run_in_steps(node, plan, cotangent_out, executor, ctx)
        inputs = node.inputs
        for position, cotangent in zip(plan.active_inputs, cotangent_in):
            if cotangent is not None:
                key = inputs[position].key
                existing = get(key)
                cotangents[key] = cotangent if existing is None else add(existing, cotangent)
    return cotangents


_FIRST_ONLY = (0,)


def _seeds(groups, cotangent_out: list, executor: BackwardExecutor) -> list:
    """One cotangent per group of output slots, summed over the group."""
    seeds = []
    for slots in groups:
        seed = cotangent_out[slots[0]]
        for slot in slots[1:]:
            seed = executor.add_operands(seed, cotangent_out[slot])
        seeds.append(seed)
    return seeds


def _run_fused(node, plan: BackwardPlan, cotangent_out: list, executor: BackwardExecutor,
               ctx) -> list:
    """The active inputs' cotangents, from one run of the plan's compiled backward graph."""
    run = plan.runner(executor, ctx)
    values = [item.data for item in node.inputs]
    values += node.output_data
    if plan.data_keys:
        retained = node.retained
        values += [retained[key] for key in plan.data_keys]
    if len(cotangent_out) == 1 and len(plan.seed_groups) == 1:
        values.append(cotangent_out[0])
    else:
        values += _seeds(plan.seed_groups, cotangent_out, executor)
    try:
        results = run(values)
    except MissingValueError as error:
        raise MissingValueError(f"{error}, which the backward of {node.recorded!r} needs") from None
    if plan.all_outputs:
        return results
    return [None if i is None else results[i] for i in plan.cotangent_outputs]


def _run_in_steps(node, plan: BackwardPlan, cotangent_out: list, executor: BackwardExecutor,
                  ctx) -> Sequence:
    """The active inputs' cotangents via ``execute_forward`` and ``run_transposed_linear``."""
    external = _primal_values(node, plan, executor)
    seeds = _seeds(plan.output_groups, cotangent_out, executor)
    return executor.run_transposed_linear(plan.linear, seeds, external, ctx)


def _primal_values(node, plan: BackwardPlan, executor: BackwardExecutor) -> dict:
    """The primal values ``plan.linear`` reads, by key, recomputed where not saved."""
    data = {key: item.data for key, item in zip(plan.input_keys, node.inputs)}
    data.update(zip(plan.output_keys, node.output_data))
    if node.retained and node.recorded.primitive is None:
        data.update(node.retained)
    if plan.forward is not None:
        computed = executor.execute_forward(plan.forward, data)
        for key in plan.forward.output_keys:
            if key not in computed:
                raise MissingValueError(
                    f"the executor's execute_forward did not provide {key!r}, which the "
                    f"backward of {node.recorded!r} needs")
            data[key] = computed[key]
    # Every other key in plan.needed is an input, output or retained value: all in data.
    return data
