"""``Trace``: one recorded invocation, linked to the traces of its inputs.

Traces are immutable records; backward reads them and never changes them.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

from tidu.graph import Input

_serials = itertools.count()


class Trace:
    """A node of the eager trace (opaque to frontends; ``saved_values`` is public).

    ``output_keys`` are the eager keys of the node's outputs. A one-output node
    (the common case) keeps its key as ``output_key`` and no tuple: every object
    a trace keeps alive is one more for each full collection of the garbage
    collector to walk, so long recordings are faster with fewer.
    """

    __slots__ = ("recorded", "inputs", "active_inputs", "output_key", "_output_keys",
                 "output_data", "retained", "serial", "dropped", "__weakref__")

    def __init__(self, recorded, inputs: tuple, active_inputs: tuple, output_keys: tuple,
                 output_data: tuple, retained: Mapping | None, dropped: tuple | None = None
                 ) -> None:
        self.recorded = recorded            # the RecordedGraph
        self.inputs = inputs                # EagerInput per graph input
        self.active_inputs = active_inputs  # positions of the inputs that require grad
        if len(output_keys) == 1:
            self.output_key, self._output_keys = output_keys[0], None
        else:
            self.output_key, self._output_keys = None, output_keys
        self.output_data = output_data
        self.retained = dict(retained) if retained else None
        self.serial = next(_serials)        # recording order: inputs' traces come first
        # None, or per output a weak reference to its value when a checkpoint strategy did
        # not keep it (None: kept, or not weakly referable); inputs' data not kept is None
        self.dropped = dropped

    @property
    def output_keys(self) -> tuple:
        """The eager keys of the outputs, in order."""
        keys = self._output_keys
        return (self.output_key,) if keys is None else keys

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

    def __repr__(self) -> str:
        return f"<Trace of {self.recorded!r}>"
