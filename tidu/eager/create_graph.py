"""Backward that records its own work: ``try_backward_recorded`` (PyTorch's ``create_graph``).

Each node's backward graph runs as in :func:`~tidu.eager.try_backward` and is
also recorded, as one composite node of the trace whose inputs are the values
it read: the node's inputs and outputs, with their history, and the incoming
cotangents, with theirs. Sums of two cotangents of one value are recorded too
(one ``add()`` node of the primitive set). So every cotangent comes back as an
eager value with history, which backward (or :func:`~tidu.eager.try_hvp`) can
differentiate again: double backward, and any order by repeating.

The walk is :func:`~tidu.eager.try_backward`'s (:func:`~tidu.eager.walk.reverse_walk`),
with cotangents that are eager records. The values recorded are computed as
``try_backward`` computes them: by each node's fused plan, or, for an executor
that overrides a hook, by ``run_transposed_linear`` after ``execute_forward``
replays what it reads (once per node that receives a cotangent).

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

from typing import Any, Callable, Container, Mapping

from tidu._gc import gc_paused
from tidu.errors import InvalidArgumentError
from tidu.graph import FreshInput, ValueKey
from tidu.eager.executor import BackwardExecutor, graph_runner
from tidu.eager.plans import BackwardPlan, recorded_backward
from tidu.eager.record import EagerError, EagerInput, RecordedGraph, Recorder
from tidu.eager.walk import NodeRunner, NodeStep, check_start, kept, nodes_last_first, \
    only_zero_keys, walk
from tidu.eager.backward import try_backward  # noqa: F401  (used by the doctest)

_CONSTANT = FreshInput()      # the key of a value without history (never read: no grad)


def try_backward_recorded(output_key: ValueKey, output_trace, seed, executor: BackwardExecutor,
                          recorder: Recorder, ctx=None, *, keep: Container | None = None,
                          zeros: set | None = None,
                          hooks: Mapping[ValueKey, Callable] | None = None
                          ) -> dict[ValueKey, EagerInput]:
    """:func:`try_backward`, recording its work with ``recorder`` so it can be differentiated.

    ``seed`` is the output's cotangent: a value (a constant) or an
    :class:`EagerInput` record of a value with history. Returns, for every key
    that received a cotangent (only those in ``keep``, if given), an
    ``EagerInput(key, trace, requires_grad, data)`` record of that cotangent: a
    new eager value, recorded by ``recorder``, whose ``trace`` (``None`` when it
    depends on nothing that requires grad) holds the backward work. Its ``key``
    and ``trace`` are what :func:`try_backward` and :func:`try_hvp` take. The
    executor is used as by :func:`try_backward`: its hooks, when it overrides
    one, compute each node's cotangents, and the node's backward graph is
    recorded with those values. The argument checks are the same, and
    ``recorder`` must be a :class:`Recorder`. A composite node's retained
    values are not read: its recorded backward recomputes them from its inputs,
    so their derivatives are not lost. ``zeros`` and ``hooks`` are :func:`try_backward`'s;
    a hook gets and returns cotangent records (an ``EagerInput``, whose history the
    returned record keeps: what the hook computed is differentiated too). See the
    module for an example.
    """
    seed_record = seed if isinstance(seed, EagerInput) else EagerInput(_CONSTANT, None, False,
                                                                       seed)
    check_start("try_backward_recorded", output_key, output_trace, seed_record.data, executor,
                keep)
    if not isinstance(recorder, Recorder):
        raise InvalidArgumentError(f"try_backward_recorded needs a Recorder to record the "
                                   f"backward work with, got {type(recorder).__name__}")
    records: dict[ValueKey, EagerInput] = {output_key: seed_record}
    nodes, step = (), None
    if output_trace is not None:
        step = _RecordedBackward(executor, recorder, ctx)
        nodes = nodes_last_first(output_trace)
        step.runner.walk_nodes(nodes)
    with gc_paused():              # the recorded nodes outlive the call: no collection walks them
        walk(nodes, records, step, keep, zeros, hooks)
    result = kept(records, keep)
    only_zero_keys(zeros, result, keep)
    return result


class _RecordedBackward(NodeStep):
    """``create_graph``'s step: cotangents are eager records, and each node's backward graph
    is recorded (with the values its plan or the executor's hooks computed)."""

    retained = False               # a recorded backward recomputes what a node retained

    def __init__(self, executor: BackwardExecutor, recorder: Recorder, ctx) -> None:
        super().__init__(ctx)
        self.runner = NodeRunner(executor)
        self.recorder = recorder
        self.summer = _Summer(executor, recorder)
        self.node = self.plan = None               # the node being run, for add()

    def run(self, node, plan: BackwardPlan, incoming: list) -> list:
        self.node, self.plan = node, plan
        summer = self.summer
        seeds = [summer.total([incoming[slot] for slot in slots], node, plan)
                 for slots in plan.seed_groups]
        results = self._results(node, plan, seeds)
        backward = recorded_backward(plan)
        read = _read(node, node.output_keys, seeds, backward.positions, self.runner.remat)
        trace = (None if backward.recorded is None
                 else self.recorder.record(backward.recorded, read, results))
        records = []
        for index in plan.cotangent_outputs:
            if index is None:
                records.append(None)
                continue
            passed = backward.passed[index]
            records.append(_record(results[index], trace, index) if passed is None
                           else read[passed])
        return records

    def _results(self, node, plan: BackwardPlan, seeds: list) -> list:
        """The values of the plan's fused graph's outputs: run by the plan, or taken from
        the executor's ``run_transposed_linear``."""
        runner = self.runner
        if not runner.hooked:
            values = [item.data for item in node.inputs]
            values += node.output_data
            runner.remat.fill(node, values, plan.reads)
            values += [seed.data for seed in seeds]
            return runner.fused_outputs(node, plan, values)
        data = iter([seed.data for seed in seeds])
        cotangents = runner.transpose(node, plan, [None if slots is None else next(data)
                                                   for slots in plan.group_seeds])
        results = [None] * len(plan.fused().output_keys)
        for position, (value, index) in enumerate(zip(cotangents, plan.cotangent_outputs)):
            if index is None:
                continue
            if value is None:
                raise EagerError(
                    f"{type(runner.executor).__name__}.run_transposed_linear returned no "
                    f"cotangent for active input {plan.active_inputs[position]} of "
                    f"{node.recorded!r}, whose transpose has one: backward with create_graph "
                    "records it, so it needs its value")
            results[index] = value
        return results

    def add(self, a: EagerInput, b: EagerInput) -> EagerInput:
        return self.summer.add(a, b, self.node, self.plan)


def _read(node, output_keys: tuple, seeds: list, positions: tuple, remat) -> list:
    """The records of the values at ``positions`` of a plan's loads: the node's inputs, its
    outputs (made by the node), then the seeds; values the node did not keep are
    recomputed (``remat``), since the recorded backward keeps what it reads."""
    inputs = node.inputs
    n_inputs, n_outputs = len(inputs), len(output_keys)
    read = []
    for p in positions:
        if p < n_inputs:
            item = inputs[p]
            if item.data is None:
                item = EagerInput(item.key, item.trace, item.requires_grad,
                                  remat.input_value(node, p))
            read.append(item)
        elif p < n_inputs + n_outputs:
            slot = p - n_inputs
            read.append(EagerInput(output_keys[slot], node, True,
                                   remat.output_value(node, slot)))
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
            recorded = RecordedGraph.from_primitive(add_op, ("a", "b"))
            graph = recorded.graph
            adder = self.adders[add_op] = (
                recorded, graph_runner(self.executor, graph, graph.input_keys))
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
