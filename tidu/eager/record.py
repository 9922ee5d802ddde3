"""Recording eager invocations: ``RecordedGraph``, ``Recorder`` and the eager value records.

>>> import enum
>>> from tidu.graph import EvaluableGraphOperation, Input
>>> class Op(EvaluableGraphOperation, enum.Enum):
...     NEG = "neg"
...     def input_count(self): return 1
...     def output_count(self): return 1
>>> recorder = Recorder()
>>> [leaf_key] = recorder.fresh_input_keys(1)
>>> x = EagerInput(Input(leaf_key), None, True, 2.0)
>>> recorded = RecordedGraph.from_primitive(Op.NEG, recorder.fresh_input_keys(1))
>>> [y] = recorder.record_graph(recorded, [x], [-2.0])
>>> y.requires_grad, y.trace is not None, y.output_slot
(True, True, 0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Mapping, Protocol, Sequence

from tidu.errors import (
    ArityError,
    InvalidArgumentError,
    InvalidKeyError,
    TiduError,
    sequence_argument,
)
from tidu.graph import PRIMARY, Graph, GraphBuilder, Input, Local, ValueKey
from tidu.graph import FreshInput, OperationKey, op_name, operation_counts
from tidu.eager.trace import Trace


class EagerError(TiduError, ValueError):
    """An eager recording that does not line up (counts, keys)."""


class KeySource(Protocol):
    """Gives fresh, never-repeating input keys for recorded graphs."""

    def fresh_input_key(self) -> Hashable: ...


class CounterKeySource:
    """The default :class:`KeySource`: every key is a new :class:`tidu.graph.FreshInput`."""

    def fresh_input_key(self) -> FreshInput:
        return FreshInput()


_counts: dict = {}       # op -> (input_count, output_count), checked once per op
_COUNTS_MAX = 4096       # ops with parameters (shapes, constants) can be many: start over then


class RecordedGraph:
    """A graph recorded as one eager node: its input keys and output keys line up with it.

    ``input_keys`` are the graph's input keys (plain hashables) in order;
    ``output_keys`` the value keys of its outputs. ``plan_cache`` holds the plans
    backward builds for a composite graph (:mod:`tidu.eager.plans`), so they live
    as long as it; ``None`` for a primitive's, whose plans are shared per op.
    ``kept_slots`` caches what its nodes keep under each checkpoint strategy.
    """

    __slots__ = ("_graph", "input_keys", "_output_keys", "primitive", "output_count", "plan_cache",
                 "kept_slots")

    def __init__(self, graph: Graph, input_keys: Sequence, output_keys: Sequence[ValueKey]) -> None:
        input_keys = tuple(sequence_argument(input_keys, "RecordedGraph", "input_keys"))
        output_keys = tuple(sequence_argument(output_keys, "RecordedGraph", "output_keys"))
        if not isinstance(graph, Graph):
            raise EagerError(f"RecordedGraph needs a Graph, got {type(graph).__name__}")
        if tuple(Input(k) for k in input_keys) != graph.input_keys:
            raise EagerError(f"input keys {list(input_keys)!r} do not match the graph's inputs "
                             f"{list(graph.input_keys)!r}")
        if output_keys != graph.output_keys:
            raise EagerError(f"output keys {list(output_keys)!r} do not match the graph's outputs "
                             f"{list(graph.output_keys)!r}")
        self._graph = graph
        self.input_keys = input_keys
        self._output_keys = output_keys
        self.primitive = None
        self.output_count = len(output_keys)
        self.plan_cache: dict = {}     # plans of a composite graph (tidu.eager.plans)
        self.kept_slots: dict = {}     # what nodes of it keep, by strategy (tidu.eager.checkpointing)

    @classmethod
    def from_primitive(cls, op, input_keys: Sequence) -> "RecordedGraph":
        """A one-op graph of ``op`` on inputs keyed ``input_keys``; built only if asked for."""
        try:
            counts = _counts[op]
        except KeyError:
            counts = operation_counts(op)
            if len(_counts) >= _COUNTS_MAX:
                _counts.clear()
            _counts[op] = counts
        except TypeError:
            counts = operation_counts(op)       # raises: the op is not hashable
        if type(input_keys) is not tuple:
            input_keys = tuple(sequence_argument(input_keys, f"from_primitive({op_name(op)})",
                                                 "input_keys"))
        if len(input_keys) != counts[0]:
            raise ArityError(f"{op_name(op)} takes {counts[0]} inputs, got {len(input_keys)} "
                             "input keys")
        recorded = object.__new__(cls)
        recorded._graph = None
        recorded.input_keys = input_keys
        recorded._output_keys = None
        recorded.primitive = op
        recorded.output_count = counts[1]
        recorded.plan_cache = None     # a primitive's plans are shared by op
        recorded.kept_slots = {}
        return recorded

    @property
    def graph(self) -> Graph:
        """The recorded graph."""
        if self._graph is None:
            builder = GraphBuilder()
            ids = [builder.add_input(k) for k in self.input_keys]
            builder.set_outputs(builder.add_operation(self.primitive, [Local(i) for i in ids]))
            self._graph = builder.build()
        return self._graph

    @property
    def output_keys(self) -> tuple:
        """The value keys of the graph's outputs."""
        if self._output_keys is None:
            op = self.primitive
            op_key = OperationKey(op, tuple(map(Input, self.input_keys)), PRIMARY)
            self._output_keys = op_key.output_keys()
        return self._output_keys

    def __repr__(self) -> str:
        what = op_name(self.primitive) if self.primitive is not None else repr(self._graph)
        return f"<RecordedGraph {what}>"


@dataclass(slots=True)
class EagerInput:
    """An input of an eager invocation: its key, the trace that made it, and its data."""

    key: ValueKey
    trace: Any       # Trace | None
    requires_grad: bool
    data: Any


@dataclass(slots=True)
class EagerOutput:
    """An output of a recorded invocation."""

    key: ValueKey
    trace: Any       # Trace | None
    requires_grad: bool
    output_slot: int


class Recorder:
    """Records eager invocations into traces that :func:`try_backward` walks.

    ``key_source`` defaults to a :class:`CounterKeySource`.
    """

    __slots__ = ("key_source",)

    def __init__(self, key_source: KeySource | None = None) -> None:
        self.key_source = key_source if key_source is not None else CounterKeySource()

    def fresh_input_keys(self, count: int) -> list:
        """``count`` fresh input keys."""
        if type(count) is not int or count < 0:
            raise InvalidArgumentError(f"fresh_input_keys needs a count >= 0, got {count!r}")
        fresh = self.key_source.fresh_input_key
        return [fresh() for _ in range(count)]

    def record_graph(self, graph: RecordedGraph, inputs: Sequence[EagerInput], outputs: Sequence,
                     retained_values: Mapping[ValueKey, Any] | None = None, strategy=None
                     ) -> list[EagerOutput]:
        """Record one invocation of ``graph`` on ``inputs`` that produced ``outputs`` (data).

        Every output gets a fresh eager key, so two invocations never share a
        key. A trace node is made only when some input requires grad; all
        outputs share it. ``retained_values`` (by the recorded graph's value
        keys) keeps primal intermediates for backward; intermediates not
        retained are recomputed there. ``strategy`` is :meth:`record`'s.
        """
        inputs = sequence_argument(inputs, f"record_graph({graph!r})", "inputs")
        if not isinstance(outputs, (list, tuple)):
            if not hasattr(outputs, "__next__"):        # a bare array would give its rows
                raise InvalidArgumentError(
                    f"record_graph({graph!r}): outputs must be a list or tuple of output "
                    f"values, got {type(outputs).__name__}")
            outputs = list(outputs)
        for position, item in enumerate(inputs):
            if not item.requires_grad and not isinstance(item.key, ValueKey):
                raise InvalidKeyError(f"input {position} of {graph!r}: EagerInput.key "
                                      f"{item.key!r} is not a ValueKey")
        trace = self.record(graph, inputs, outputs, retained_values, strategy)
        if trace is None:
            keys = self._fresh_keys(graph.output_count)
            return [EagerOutput(key, None, False, slot) for slot, key in enumerate(keys)]
        return [EagerOutput(key, trace, True, slot) for slot, key in enumerate(trace.output_keys)]

    def record(self, graph: RecordedGraph, inputs: Sequence[EagerInput], outputs: Sequence,
               retained_values: Mapping[ValueKey, Any] | None = None, strategy=None
               ) -> Trace | None:
        """:meth:`record_graph` without the ``EagerOutput`` records: the trace node, or ``None``.

        The outputs' eager keys are ``trace.output_keys``. This is the fast
        path for frontends; ``inputs`` may be any objects with ``EagerInput``'s
        four attributes (``key`` is read only where ``requires_grad`` is set).
        Returns ``None``, recording nothing, when no input requires grad.
        ``strategy`` (a :class:`tidu.eager.checkpointing.CheckpointStrategy`) says
        which of the node's values it keeps; ``None`` keeps them all.

        >>> from tidu.example_ops import Op
        >>> recorder = Recorder()
        >>> [k] = recorder.fresh_input_keys(1)
        >>> x = EagerInput(Input(k), None, True, 0.5)
        >>> recorded = RecordedGraph.from_primitive(Op.NEG, ["a"])
        >>> trace = recorder.record(recorded, [x], [-0.5])
        >>> len(trace.output_keys)
        1
        >>> recorder.record(recorded, [EagerInput(None, None, False, 0.5)], [-0.5]) is None
        True
        """
        try:
            wrong_counts = (len(inputs) != len(graph.input_keys)
                            or len(outputs) != graph.output_count)
        except TypeError:                   # a generator, say: read each once
            if not isinstance(graph, RecordedGraph):
                raise _not_recorded(graph) from None
            inputs = sequence_argument(inputs, f"record({graph!r})", "inputs")
            outputs = sequence_argument(outputs, f"record({graph!r})", "outputs")
            return self.record(graph, inputs, outputs, retained_values, strategy)
        except AttributeError:
            raise _not_recorded(graph) from None
        if wrong_counts:
            raise _count_error(graph, inputs, outputs)
        if len(inputs) == 2:            # a binary op, the common case, without a loop
            first, second = inputs[0].requires_grad, inputs[1].requires_grad
            active = (_BOTH if second else _FIRST) if first else (_SECOND if second else ())
        elif len(inputs) == 1:
            active = _FIRST if inputs[0].requires_grad else ()
        else:
            active = tuple([position for position, item in enumerate(inputs)
                            if item.requires_grad])
        if not active:
            return None
        for position in active:
            key = inputs[position].key
            if not isinstance(key, ValueKey):
                raise InvalidKeyError(f"input {position} of {graph!r}: EagerInput.key "
                                      f"{key!r} is not a ValueKey")
        return self.record_active(graph, tuple(inputs), active, tuple(outputs), retained_values,
                                  strategy)

    def record_active(self, graph: RecordedGraph, inputs: tuple, active: tuple, outputs: tuple,
                      retained_values: Mapping[ValueKey, Any] | None = None, strategy=None
                      ) -> Trace:
        """:meth:`record` for a frontend that knows which inputs require grad, unchecked.

        ``active`` holds the positions of the inputs that require grad, in order,
        at least one; ``inputs`` and ``outputs`` are tuples of the graph's counts,
        and every active input's ``key`` is a ``ValueKey``. :meth:`record` checks
        all of that and calls this; a frontend that builds its inputs itself calls
        it directly (the eager ``Tensor`` does, per op).

        >>> from tidu.example_ops import Op
        >>> recorder = Recorder()
        >>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.5)
        >>> recorded = RecordedGraph.from_primitive(Op.NEG, ["a"])
        >>> recorder.record_active(recorded, (x,), (0,), (-0.5,)).active_inputs
        (0,)
        """
        if len(outputs) == 1 and type(self.key_source) is CounterKeySource:
            keys = (FreshInput(),)            # _fresh_keys(1), inlined: the hot path
        else:
            keys = self._fresh_keys(len(outputs))
        if strategy is not None:
            return strategy.trace(graph, inputs, active, keys, outputs, retained_values)
        return Trace(graph, inputs, active, keys, outputs, retained_values)

    def _fresh_keys(self, count: int) -> tuple:
        source = self.key_source
        if type(source) is CounterKeySource:      # its keys are their own Input keys
            return (FreshInput(),) if count == 1 else tuple([FreshInput() for _ in range(count)])
        fresh = source.fresh_input_key
        return tuple([Input(fresh()) for _ in range(count)])


_FIRST, _SECOND, _BOTH = (0,), (1,), (0, 1)


def _count_error(graph: RecordedGraph, inputs: Sequence, outputs: Sequence) -> TiduError:
    if not isinstance(graph, RecordedGraph):
        return _not_recorded(graph)
    if len(inputs) != len(graph.input_keys):
        return EagerError(f"{graph!r} has {len(graph.input_keys)} inputs; got {len(inputs)}")
    return EagerError(f"{graph!r} has {graph.output_count} outputs; got {len(outputs)}")


def _not_recorded(graph) -> InvalidArgumentError:
    hint = " (wrap it: RecordedGraph(graph, input_keys, output_keys))" if isinstance(
        graph, Graph) else ""
    return InvalidArgumentError(f"record needs a RecordedGraph, got {type(graph).__name__}{hint}")
