"""Checkpoint strategies: which values a recorded node keeps for backward, and the
recomputation of those it did not keep.

Seed 002's ``Autodiff<B, C: CheckpointStrategy>``, on tidu's eager trace:

- ``"none"``: a node keeps the values its backward reads and lets the rest go
  (PyTorch's saved tensors; Burn's ``NoCheckpointing``). ``sin(x)`` keeps ``x``,
  ``tanh(x)`` its output, ``x + y`` nothing. Backward recomputes nothing.
- ``"balanced"``: as ``"none"``, and the values made by *memory-bound*
  operations (``op.memory_bound``: elementwise and shape work) are not kept
  either; backward recomputes them from their inputs, which the nodes that made
  them keep. The outputs of compute-bound operations (matrix products,
  factorizations, FFTs) and of ops that declare nothing are kept.

Values no node made (leaves, constants) are always kept: nothing could
recompute them; so are values of under ``SMALL_BYTES`` (1 KiB, by their ``nbytes``),
and an input whose value is not the object its node made (or holds a weak reference
to): a frontend may have given that key new values since, which running the node
again would not give back. A recorder given no strategy keeps everything (``Recorder.record``).

Backward reads a value that was not kept through a :class:`Rematerializer`,
which runs the node that made it again (through the executor's
``execute_forward`` when it overrides it) on its inputs, themselves kept or
recomputed first: one loop, no recursion. Recomputed values are held only while
reads of them are still to come, so each node is recomputed once per walk. The
same operations on the same values give the same bits, so gradients are
identical to those of a run that kept everything.

>>> from tidu.eager import RecordedGraph, Recorder
>>> from tidu.example_ops import Op
>>> from tidu.graph import Input
>>> class Big(float):                 # a number that says it is big, like an array would
...     nbytes = 4096
>>> recorder, none = Recorder(), CheckpointStrategy("none")
>>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, Big(0.5))
>>> made = recorder.record(RecordedGraph.from_primitive(Op.SIN, ["a"]), [x], [Big(0.479)],
...                        None, none)
>>> y = EagerInput(made.output_key, made, True, made.dropped[0]())   # SIN reads x, not sin x
>>> node = recorder.record(RecordedGraph.from_primitive(Op.ADD, ["a", "b"]), [y, y], [Big(1)],
...                        None, none)
>>> list(made.saved_values.values()), node.saved_values           # ADD reads no input
([0.5], {})
"""

from __future__ import annotations

import weakref
from typing import Any, Sequence

from tidu.eager.executor import BackwardExecutor
from tidu.eager.plans import data_reads, forward_plan
from tidu.eager.record import EagerError, EagerInput
from tidu.eager.trace import Trace

STRATEGIES = ("none", "balanced")

SMALL_BYTES = 1024
"""Values smaller than this (by their ``nbytes``; numbers have none) are always kept:
letting one go would cost about as much as keeping it (the record of where it came
from), and recomputing it more. So a node whose values are all smaller keeps them all
under every strategy, and a frontend may record it with no strategy (``record_active``'s
``strategy=None``), as the eager ``Tensor`` does."""


class CheckpointStrategy:
    """What each recorded node keeps: ``"none"`` or ``"balanced"`` (see the module).

    >>> CheckpointStrategy("balanced").name
    'balanced'
    >>> CheckpointStrategy("everything")
    Traceback (most recent call last):
    ...
    tidu.eager.record.EagerError: unknown checkpoint strategy 'everything'; the strategies are 'none' and 'balanced'
    """

    __slots__ = ("name", "recomputes_memory_bound")
    names = STRATEGIES

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or name not in STRATEGIES:
            raise EagerError(f"unknown checkpoint strategy {name!r}; the strategies are "
                             "'none' and 'balanced'")
        self.name = name
        self.recomputes_memory_bound = name == "balanced"

    def __repr__(self) -> str:
        return f"CheckpointStrategy({self.name!r})"

    def kept_slots(self, recorded, active: tuple, retained=None) -> tuple | None:
        """``(input reads, outputs kept)`` for nodes of ``recorded`` with these active inputs
        and retained values (``None``: they keep everything), cached on ``recorded``.

        >>> from tidu.eager import RecordedGraph
        >>> from tidu.example_ops import Op
        >>> CheckpointStrategy("none").kept_slots(RecordedGraph.from_primitive(Op.SIN, ["a"]),
        ...                                       (0,))
        ((True,), (False,))
        """
        keeping = self._keeping(recorded, active, retained)
        return None if keeping is None else keeping[:2]

    def _keeping(self, recorded, active: tuple, retained) -> tuple | None:
        """``kept_slots``, and the input positions and output slots whose values a node may
        let go (the others it keeps whatever their size): cached on ``recorded``."""
        cache = recorded.kept_slots
        key = (self.name, active, tuple(retained)) if retained else (self.name, active)
        keeping = cache.get(key, _UNKNOWN)
        if keeping is _UNKNOWN:
            reads = data_reads(recorded, active, tuple(retained) if retained else ())
            if reads is None:
                keeping = None
            else:
                n_inputs = len(recorded.input_keys)
                if self.recomputes_memory_bound:   # memory-bound work is done again
                    outputs = (not _memory_bound(recorded.primitive),) * recorded.output_count
                else:
                    outputs = reads[n_inputs:]
                inputs = reads[:n_inputs]
                keeping = (inputs, outputs,
                           tuple(i for i, read in enumerate(inputs)
                                 if not read or self.recomputes_memory_bound),
                           tuple(i for i, kept in enumerate(outputs) if not kept))
            if len(cache) >= 64:
                cache.clear()
            cache[key] = keeping
        return keeping

    def trace(self, recorded, inputs: tuple, active: tuple, output_keys: tuple, outputs: tuple,
              retained) -> Trace:
        """The node of one invocation, keeping what this strategy keeps (``Recorder.record``)."""
        keeping = recorded.kept_slots.get((self.name, active), _UNKNOWN) if not retained \
            else _UNKNOWN                       # _keeping's cache, looked up inline: hot path
        if keeping is _UNKNOWN:
            keeping = self._keeping(recorded, active, retained)
        if keeping is None:
            return Trace(recorded, inputs, active, output_keys, outputs, retained)
        reads, _, maybe_dropped_inputs, dropped_outputs = keeping
        kept_inputs = None
        for position in maybe_dropped_inputs:
            item = inputs[position]
            producer = item.trace
            if producer is not None and (not reads[position] or _memory_bound(
                    producer.recorded.primitive)) and \
                    getattr(item.data, "nbytes", 0) >= SMALL_BYTES and _made_by(producer, item):
                if kept_inputs is None:
                    kept_inputs = list(inputs)
                kept_inputs[position] = EagerInput(item.key, producer, item.requires_grad, None)
        refs = None
        for slot in dropped_outputs:
            value = outputs[slot]
            if getattr(value, "nbytes", 0) >= SMALL_BYTES and type(value).__weakrefoffset__:
                if refs is None:
                    refs = [None] * len(outputs)
                    outputs = list(outputs)
                refs[slot] = weakref.ref(value)
                outputs[slot] = None
        if kept_inputs is None and refs is None:
            return Trace(recorded, inputs, active, output_keys, outputs, retained)
        return Trace(recorded, inputs if kept_inputs is None else tuple(kept_inputs), active,
                     output_keys, tuple(outputs),
                     retained, tuple(refs) if refs is not None else (None,) * len(outputs))


_UNKNOWN = object()


def _made_by(producer: Trace, item) -> bool:
    """Whether ``item``'s data is the value ``producer`` made for its key (the object the
    node keeps, or keeps a weak reference to): only then does running the node again give
    it back. A frontend may have given the key new values since (a write through
    ``t.data``, an update in a ``no_grad`` block); those are kept."""
    data = item.data
    slot = 0 if producer.output_key is not None else producer.output_keys.index(item.key)
    if producer.output_data[slot] is data:
        return True
    dropped = producer.dropped
    ref = dropped[slot] if dropped is not None else None
    return ref is not None and ref() is data


def _memory_bound(op) -> bool:
    return op is not None and getattr(op, "memory_bound", False) is True


class Rematerializer:
    """The values one walk reads that their nodes did not keep (see the module).

    ``nodes`` are the walk's nodes, newest first. ``counted`` (the reverse walks)
    counts, on first use, the reads each dropped value will get, and holds a
    recomputed value only until its last read; otherwise (``try_hvp``, which
    also sweeps forward) every recomputed value is held for the whole walk.

    >>> from tidu.eager import RecordedGraph, Recorder
    >>> from tidu.eager.executor import BackwardExecutor
    >>> from tidu.example_ops import Op
    >>> from tidu.graph import Input, compiled
    >>> class Executor(BackwardExecutor):
    ...     def execute_forward(self, graph, data):
    ...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
    ...     def add_operands(self, a, b):
    ...         return a + b
    >>> class Big(float):
    ...     nbytes = 4096
    >>> recorder, balanced = Recorder(), CheckpointStrategy("balanced")
    >>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, Big(0.5))
    >>> sin_x = Big(0.479)
    >>> node = recorder.record(RecordedGraph.from_primitive(Op.SIN, ["a"]), [x], [sin_x],
    ...                        strategy=balanced)
    >>> y = EagerInput(node.output_key, node, True, sin_x)    # the very value SIN made
    >>> later = recorder.record(RecordedGraph.from_primitive(Op.MUL, ["a", "b"]), [y, y],
    ...                         [Big(0.229)], strategy=balanced)
    >>> later.inputs[0].data, node.output_data      # SIN is memory-bound: nobody keeps sin x
    (None, (None,))
    >>> Rematerializer([later, node], Executor()).input_value(later, 0)   # made again
    0.479425538604203
    """

    __slots__ = ("nodes", "executor", "counted", "pending", "rerun_reads", "held", "cheap")

    def __init__(self, nodes: Sequence[Trace], executor: BackwardExecutor,
                 counted: bool = True) -> None:
        self.nodes = nodes
        self.executor = executor
        self.counted = counted
        self.pending: dict | None = None          # value key -> reads still to come
        self.rerun_reads: dict = {}               # value key -> those by nodes run again
        self.held: dict = {}                      # value key -> recomputed value
        self.cheap: set = set()                   # held keys made from kept values only

    def fill(self, node: Trace, values: list, positions: Sequence[int]) -> list:
        """``values`` (the node's data in a plan's load order: inputs, outputs, retained)
        with the entries at ``positions`` that the node did not keep put back (positions
        past the node's data, a plan's seeds, are skipped)."""
        if node.dropped is None:                      # it kept everything
            return values
        n_inputs, n_values = len(node.inputs), len(values)
        for position in positions:
            if position < n_values and values[position] is None:
                values[position] = (self.input_value(node, position) if position < n_inputs
                                    else self.output_value(node, position - n_inputs))
        return values

    def input_value(self, node: Trace, position: int, rerun: bool = False) -> Any:
        """The value of ``node``'s input ``position``: kept, or recomputed (``rerun``: read
        to run ``node`` again)."""
        item = node.inputs[position]
        if item.data is not None:
            return item.data
        producer = item.trace
        return self.output_value(producer, producer.output_keys.index(item.key), rerun)

    def output_value(self, node: Trace, slot: int, rerun: bool = False) -> Any:
        """The value of ``node``'s output ``slot``: kept, or recomputed."""
        value = node.output_data[slot]
        if value is not None:
            return value
        key = node.output_keys[slot]
        if key not in self.held:
            self._recompute(node, key)
        return self._take(key, rerun)

    def _take(self, key, rerun: bool) -> Any:
        """A held value, let go after its last read to come. A cheap one (made from kept
        values) is let go after its last read by a node run again, too: the backward
        that reads it later makes it again then, rather than holding it until then."""
        value = self.held[key]
        if not self.counted:
            return value
        if self.pending is None:
            self._count()
        pending = self.pending
        left = pending.get(key, 0) - 1
        if left > 0:
            pending[key] = left
        else:
            pending.pop(key, None)
            del self.held[key]
            self.cheap.discard(key)
            return value
        if rerun:
            reruns = self.rerun_reads.get(key, 0) - 1
            self.rerun_reads[key] = reruns
            if reruns <= 0 and key in self.cheap:
                del self.held[key]
                self.cheap.discard(key)
        return value

    def _available(self, item) -> bool:
        if item.data is not None or item.key in self.held:
            return True
        producer = item.trace
        return producer.output_data[producer.output_keys.index(item.key)] is not None

    def _recompute(self, target: Trace, wanted) -> None:
        """Run ``target`` again, after every node whose output it needs that is not at
        hand (one loop), holding the outputs that reads are still to come of."""
        if self.counted and self.pending is None:
            self._count()
        held, pending = self.held, self.pending
        stack = [(target, wanted)]
        while stack:
            node, wanted = stack[-1]
            missing = next((item for item in node.inputs if not self._available(item)), None)
            if missing is not None:
                stack.append((missing.trace, missing.key))
                continue
            stack.pop()
            cheap = stack and all(item.data is not None or item.key not in held
                                  for item in node.inputs)
            values = [self.input_value(node, p, True) for p in range(len(node.inputs))]
            outputs = forward_plan(node.recorded).runner(self.executor)(values)
            for key, value in zip(node.output_keys, outputs):
                if key == wanted or pending is None or pending.get(key, 0) > 0:
                    held[key] = value
                    if cheap:
                        self.cheap.add(key)

    def _count(self) -> None:
        """How many reads each value not kept will get: by the backward of every node (all
        its outputs with a cotangent), and once per input by each node run again."""
        pending: dict = {}
        reruns = self.rerun_reads
        self.pending = pending
        for node in self.nodes:                       # newest first: readers before makers
            if node.dropped is None:
                continue
            inputs = node.inputs
            reads = data_reads(node.recorded, node.active_inputs,
                               tuple(node.retained) if node.retained else ())
            if reads is None:
                continue
            for position, item in enumerate(inputs):
                if item.data is None and reads[position]:
                    pending[item.key] = pending.get(item.key, 0) + 1
            recomputed = False
            for slot, (key, value) in enumerate(zip(node.output_keys, node.output_data)):
                if value is None:
                    if reads[len(inputs) + slot]:
                        pending[key] = pending.get(key, 0) + 1
                    recomputed = recomputed or key in pending
            if recomputed:
                for item in inputs:
                    if item.data is None:
                        pending[item.key] = pending.get(item.key, 0) + 1
                        reruns[item.key] = reruns.get(item.key, 0) + 1


def output_data(node: Trace, slot: int, executor: BackwardExecutor) -> Any:
    """A node's output value for checks of its shape and dtype: kept, still alive elsewhere
    (weakly referenced), or recomputed."""
    value = node.output_data[slot]
    if value is None:
        value = node.dropped[slot]() if node.dropped[slot] is not None else None
        if value is None:
            value = Rematerializer([node], executor, counted=False).output_value(node, slot)
    return value
