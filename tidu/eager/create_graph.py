"""Backward that records its own work: ``try_backward_recorded`` (PyTorch's ``create_graph``).

Each node's backward graph runs as in :func:`~tidu.eager.try_backward` and is
also recorded, as one composite node of the trace whose inputs are the values
it read: the node's inputs and outputs, with their history, and the incoming
cotangents, with theirs. Sums of two cotangents of one value are recorded too
(one ``add()`` node of the primitive set). So every cotangent comes back as an
eager value with history, which backward (or :func:`~tidu.eager.try_hvp`) can
differentiate again: double backward, and any order by repeating.

Double backward then walks those composite nodes like any other: their plans
are cached on their recorded graphs, which are shared per backward plan.

>>> import math
>>> from tidu.eager import BackwardExecutor
>>> from tidu.example_ops import Op
>>> from tidu.graph import Input, compiled
>>> class Executor(BackwardExecutor):
...     def execute_forward(self, graph, data):
...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
...     def add_operands(self, a, b):
...         return a + b
>>> recorder = Recorder()
>>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.5)
>>> recorded = RecordedGraph.from_primitive(Op.SIN, recorder.fresh_input_keys(1))
>>> [y] = recorder.record_graph(recorded, [x], Op.SIN.eval(None, [0.5]))
>>> dx = try_backward_recorded(y.key, y.trace, 1.0, Executor(), recorder)[x.key]  # cos x
>>> d2x = try_backward(dx.key, dx.trace, 1.0, Executor())[x.key]                 # -sin x
>>> abs(dx.data - math.cos(0.5)) < 1e-15 and abs(d2x + math.sin(0.5)) < 1e-15
True
"""

from __future__ import annotations

from typing import Any, Container

from tidu._gc import gc_paused
from tidu.errors import InvalidArgumentError
from tidu.graph import FreshInput, GraphBuilder, Local, ValueKey
from tidu.eager.backward import (
    BackwardExecutor,
    BackwardPlan,
    _Canonical,
    _nodes_last_first,
    _output_cotangents,
    _plans_for,
    _warn_if_overridden,
    backward_plan,
    check_start,
    kept,
    try_backward,  # noqa: F401  (used by the doctest)
)
from tidu.eager.record import EagerError, EagerInput, RecordedGraph, Recorder

_CONSTANT = FreshInput()      # the key of a value without history (never read: no grad)
_RECORDED = object()          # the key of a BackwardPlan's RecordedBackward in its ``derived``


class RecordedBackward:
    """A backward plan's graph as a :class:`RecordedGraph` of the values it reads.

    ``recorded`` has one input per value the backward graph reads, in the
    plan's load order (``positions`` are their indices in ``plan.load_keys``),
    and the backward graph's outputs. ``passed`` gives, per output, the index
    among those inputs of the one it is (a cotangent passed on unchanged, as
    ``ADD``'s), or ``None``; ``recorded`` is ``None`` when every output is one.
    """

    __slots__ = ("recorded", "positions", "passed")

    def __init__(self, plan: BackwardPlan) -> None:
        backward = plan.fused()
        read = {key for op_key in backward.operation_keys for key in op_key.inputs}
        read.update(backward.output_keys)
        index = {key: i for i, key in enumerate(plan.load_keys)}
        loads = [key for key in index if key in read]
        self.positions = tuple(index[key] for key in loads)
        builder = GraphBuilder()
        ids = {key: builder.add_input(_Canonical(i)) for i, key in enumerate(loads)}
        for op_key in backward.operation_keys:
            outputs = builder.add_operation(op_key.operation,
                                            [Local(ids[key]) for key in op_key.inputs],
                                            op_key.role)
            ids.update(zip(op_key.output_keys(), outputs))
        builder.set_outputs([ids[key] for key in backward.output_keys])
        graph = builder.build()
        loaded = {key: i for i, key in enumerate(loads)}
        self.passed = tuple(loaded.get(key) for key in backward.output_keys)
        self.recorded = None if None not in self.passed else RecordedGraph(
            graph, [_Canonical(i) for i in range(len(loads))], graph.output_keys)


def try_backward_recorded(output_key: ValueKey, output_trace, seed, executor: BackwardExecutor,
                          recorder: Recorder, ctx=None, *, keep: Container | None = None
                          ) -> dict[ValueKey, EagerInput]:
    """:func:`try_backward`, recording its work with ``recorder`` so it can be differentiated.

    ``seed`` is the output's cotangent: a value (a constant) or an
    :class:`EagerInput` record of a value with history. Returns, for every key
    that received a cotangent (only those in ``keep``, if given), an
    ``EagerInput(key, trace, requires_grad, data)`` record of that cotangent: a
    new eager value, recorded by ``recorder``, whose ``trace`` (``None`` when it
    depends on nothing that requires grad) holds the backward work. Its ``key``
    and ``trace`` are what :func:`try_backward` and :func:`try_hvp` take. The
    executor is used as by :func:`try_backward` (nothing more is needed); the
    argument checks are the same, and ``recorder`` must be a :class:`Recorder`.
    A composite node's retained values are not read: its recorded backward
    recomputes them from its inputs, so their derivatives are not lost.
    """
    seed_record = seed if isinstance(seed, EagerInput) else EagerInput(_CONSTANT, None, False,
                                                                       seed)
    check_start("try_backward_recorded", output_key, output_trace, seed_record.data, executor,
                keep)
    if not isinstance(recorder, Recorder):
        raise InvalidArgumentError(f"try_backward_recorded needs a Recorder to record the "
                                   f"backward work with, got {type(recorder).__name__}")
    records: dict[ValueKey, EagerInput] = {output_key: seed_record}
    if output_trace is not None:
        _warn_if_overridden(executor)
        with gc_paused():          # the recorded nodes outlive the call: no collection walks them
            _propagate_recorded(records, output_trace, executor, recorder, ctx, keep)
    return kept(records, keep)


def _propagate_recorded(records: dict, output_trace, executor: BackwardExecutor,
                        recorder: Recorder, ctx, keep: Container | None) -> None:
    """Run and record every node's backward, newest first, accumulating into ``records``."""
    plans = _plans_for(ctx)
    summer = _Summer(executor, recorder)
    for node in _nodes_last_first(output_trace):
        output_keys = node.output_keys
        incoming = _output_cotangents(records, output_keys, keep)
        active_outputs = tuple(i for i, record in enumerate(incoming) if record is not None)
        if not active_outputs:
            continue
        plan = backward_plan(node, node.active_inputs, active_outputs, ctx, plans,
                             retained=False)
        run = plan.runner(executor)               # builds the backward graph on first use
        seeds = [summer.total([incoming[slot] for slot in slots], node, plan)
                 for slots in plan.seed_groups]
        values = [item.data for item in node.inputs]
        values += node.output_data
        values += [seed.data for seed in seeds]
        results = run(values)
        recorded_backward = plan.derived.get(_RECORDED)
        if recorded_backward is None:
            recorded_backward = plan.derived[_RECORDED] = RecordedBackward(plan)
        read = _read(node, output_keys, seeds, recorded_backward.positions)
        trace = (None if recorded_backward.recorded is None
                 else recorder.record(recorded_backward.recorded, read, results))
        inputs = node.inputs
        for position, index in zip(plan.active_inputs, plan.cotangent_outputs):
            if index is None:
                continue
            passed = recorded_backward.passed[index]
            record = _record(results[index], trace, index) if passed is None else read[passed]
            key = inputs[position].key
            existing = records.get(key)
            records[key] = record if existing is None else summer.add(existing, record, node, plan)


def _read(node, output_keys: tuple, seeds: list, positions: tuple) -> list:
    """The records of the values at ``positions`` of a plan's loads: the node's inputs, its
    outputs (made by the node), then the seeds."""
    inputs = node.inputs
    n_inputs, n_outputs = len(inputs), len(output_keys)
    read = []
    for p in positions:
        if p < n_inputs:
            read.append(inputs[p])
        elif p < n_inputs + n_outputs:
            slot = p - n_inputs
            read.append(EagerInput(output_keys[slot], node, True, node.output_data[slot]))
        else:
            read.append(seeds[p - n_inputs - n_outputs])
    return read


def _record(data, trace, slot: int) -> EagerInput:
    """The record of output ``slot`` of ``trace`` (a constant when nothing was recorded)."""
    if trace is None:
        return EagerInput(_CONSTANT, None, False, data)
    return EagerInput(trace.output_keys[slot], trace, True, data)


class _Summer:
    """Sums of cotangent records, each recorded as a node of its primitive set's ``add()``."""

    __slots__ = ("executor", "recorder", "adders", "add_op")

    def __init__(self, executor: BackwardExecutor, recorder: Recorder) -> None:
        self.executor = executor
        self.recorder = recorder
        self.adders: dict = {}     # add op -> (its RecordedGraph, its compiled graph)
        self.add_op = None         # the last one used: for a node with no operation

    def total(self, records: list, node, plan: BackwardPlan) -> EagerInput:
        total = records[0]
        for record in records[1:]:
            total = self.add(total, record, node, plan)
        return total

    def add(self, a: EagerInput, b: EagerInput, node, plan: BackwardPlan) -> EagerInput:
        add_op = self.add_op = _add_op(node, plan, self.add_op)
        adder = self.adders.get(add_op)
        if adder is None:
            recorded = RecordedGraph.from_primitive(add_op, (_Canonical(0), _Canonical(1)))
            graph = recorded.graph
            adder = self.adders[add_op] = (recorded,
                                           self.executor.compile_graph(graph, graph.input_keys))
        recorded, run = adder
        [value] = run([a.data, b.data])
        return _record(value, self.recorder.record(recorded, [a, b], [value]), 0)


def _add_op(node, plan: BackwardPlan, last) -> Any:
    """The ``add()`` of the primitive set of ``node`` (for a composite node, of its graph's ops;
    for one with none, ``last``)."""
    op = node.recorded.primitive
    if op is None:
        operations = plan.graph.operation_keys or plan.fused().operation_keys
        if not operations:
            if last is not None:
                return last
            raise EagerError(f"backward with create_graph cannot sum two cotangents read by "
                             f"{node.recorded!r}: its graph has no operation whose add() would "
                             "record the sum")
        op = operations[0].operation
    return type(op).add()
