"""``Trace``: one recorded invocation, linked to the traces of its inputs.

Traces are immutable records; backward reads them and never changes them.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

from tidu.errors import InvalidArgumentError
from tidu.graph import Input

_serials = itertools.count()


class Trace:
    """A node of the eager trace (opaque to frontends; ``saved_values`` is public).

    ``output_keys`` are the eager keys of the node's outputs. A one-output node
    (the common case) keeps its key as ``output_key`` and its value as ``data``,
    and no tuples (``output_keys`` and ``output_data`` make them when asked for):
    every object a trace keeps alive is one more for each full collection of the
    garbage collector to walk, so long recordings are faster with fewer. For the same
    reason a one-output node is also the :class:`~tidu.eager.EagerInput` of its
    output (``key``, ``trace``, ``requires_grad``, ``data``; ``data`` is ``None``
    when the node did not keep it): a frontend may pass it as the input of the
    next op instead of a new record.

    >>> from tidu.eager import EagerInput, RecordedGraph, Recorder
    >>> from tidu.example_ops import Op
    >>> recorder = Recorder()
    >>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.5)
    >>> node = recorder.record(RecordedGraph.from_primitive(Op.SIN, ["a"]), [x], [0.25])
    >>> (node.key, node.trace, node.requires_grad, node.data) == (node.output_key, node, True, 0.25)
    True
    >>> later = recorder.record(RecordedGraph.from_primitive(Op.NEG, ["a"]), [node], [-0.25])
    >>> later.inputs[0] is node
    True
    """

    __slots__ = ("recorded", "inputs", "active_inputs", "output_key", "_output_keys",
                 "_output_data", "retained", "serial", "dropped", "key", "data", "__weakref__")

    requires_grad = True

    def __init__(self, recorded, inputs: tuple, active_inputs: tuple, output_keys: tuple,
                 output_data: tuple, retained: Mapping | None, dropped: tuple | None = None
                 ) -> None:
        self.recorded = recorded            # the RecordedGraph
        self.inputs = inputs                # EagerInput (or one-output Trace) per input
        self.active_inputs = active_inputs  # positions of the inputs that require grad
        if len(output_keys) == 1:
            self.output_key = self.key = output_keys[0]
            self._output_keys = self._output_data = None
            self.data = output_data[0]
        else:
            self.output_key = self.key = self.data = None
            self._output_keys = output_keys
            self._output_data = output_data
        self.retained = dict(retained) if retained else None
        self.serial = next(_serials)        # recording order: inputs' traces come first
        # None, or per output a weak reference to its value when a checkpoint strategy did
        # not keep it (None: kept, or not weakly referable); inputs' data not kept is None
        self.dropped = dropped

    @property
    def trace(self) -> "Trace":
        """The node itself, as the trace of its output's record (see the class)."""
        return self

    @property
    def output_keys(self) -> tuple:
        """The eager keys of the outputs, in order."""
        keys = self._output_keys
        return (self.output_key,) if keys is None else keys

    @property
    def output_data(self) -> tuple:
        """The outputs' values as the node keeps them (``None`` for one it did not keep)."""
        data = self._output_data
        return (self.data,) if data is None else data

    @property
    def saved_values(self) -> Mapping[Any, Any]:
        """Concrete primal values kept for backward, by the recorded graph's value keys
        (under a checkpoint strategy, only those it kept: see :mod:`tidu.eager.checkpointing`)."""
        recorded = self.recorded
        saved = {Input(k): item.data for k, item in zip(recorded.input_keys, self.inputs)
                 if item.data is not None}
        saved.update((k, v) for k, v in zip(recorded.output_keys, self.output_data)
                     if v is not None)
        if self.retained:
            saved.update(self.retained)
        return saved

    def __copy__(self) -> "Trace":
        return self                     # immutable: a copy is the record itself

    def __deepcopy__(self, memo) -> "Trace":
        return self

    def __reduce__(self):
        """A trace does not pickle: its nodes are ordered by this process's recording serials
        (another process would walk them out of order, losing gradients), and a deep one would
        exceed the recursion limit. Pickle the values, or the graph of the recording."""
        raise InvalidArgumentError(
            f"{self!r} cannot be pickled: a trace is this process's record of backward work; "
            "pickle the values instead (frontends pickle tensors as leaves), or the recording "
            "as a graph (tidu.eager.graph_of_recording(...).graph)")

    def __repr__(self) -> str:
        return f"<Trace of {self.recorded!r}>"
