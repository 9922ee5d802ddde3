"""Eager reverse mode: record executed invocations, then walk them backward.

A runtime records each call it runs (:class:`Recorder`) and gives backward a
:class:`BackwardExecutor`. As in seed 004, :func:`try_backward` linearizes each
recorded node that receives a cotangent and calls the executor's hooks:
``execute_forward`` replays the primal values the node's transpose reads (where
the node did not save them), then ``run_transposed_linear`` runs the
transpose; ``add_operands`` sums two cotangents of one value. A runtime must
write ``execute_forward`` and ``add_operands``; ``run_transposed_linear`` has
a default. When an executor overrides neither hook (the shipped ones do not),
each node runs instead its cached fused plan, the replay and the transpose in
one graph compiled once by ``compile_graph``: what the default hooks compute,
faster. An override is always called (:func:`overridden_hooks` says which ones an
executor has).

The same executor serves second derivatives: ``try_hvp`` (Hessian-vector
products, forward over reverse on the recording) and ``try_backward_recorded``
(backward that records its own work, PyTorch's ``create_graph``). All three
share one reverse walk (:mod:`tidu.eager.walk`) and one plan cache
(:mod:`tidu.eager.plans`). What each recorded node keeps for them is a
:class:`CheckpointStrategy` (``Recorder.record``'s ``strategy``): ``"none"``
keeps what the node's backward reads, ``"balanced"`` also lets memory-bound work
go and recomputes it (:mod:`tidu.eager.checkpointing`).

>>> from tidu.eager import BackwardExecutor, EagerInput, RecordedGraph, Recorder, try_backward
>>> from tidu.example_ops import Op
>>> from tidu.graph import Input, compiled
>>> class Executor(BackwardExecutor):
...     def execute_forward(self, graph, data):
...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
...     def add_operands(self, a, b):
...         return a + b
>>> recorder = Recorder()
>>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 3.0)
>>> recorded = RecordedGraph.from_primitive(Op.MUL, recorder.fresh_input_keys(2))
>>> [y] = recorder.record_graph(recorded, [x, x], Op.MUL.eval(None, [3.0, 3.0]))
>>> try_backward(y.key, y.trace, 1.0, Executor())[x.key]
6.0
"""

from tidu.eager.backward import try_backward
from tidu.eager.checkpointing import SMALL_BYTES, CheckpointStrategy
from tidu.eager.create_graph import try_backward_recorded
from tidu.eager.executor import BackwardExecutor, overridden_hooks
from tidu.eager.export import RecordingGraph, graph_of_recording
from tidu.eager.hvp import try_hvp
from tidu.eager.immediate import ImmediateBuilder
from tidu.eager.plans import BackwardPlan
from tidu.eager.record import (
    CounterKeySource,
    EagerError,
    EagerInput,
    EagerOutput,
    KeySource,
    RecordedGraph,
    Recorder,
)
from tidu.eager.trace import Trace

__all__ = [
    "RecordingGraph",
    "graph_of_recording",
    "KeySource", "CounterKeySource", "RecordedGraph", "EagerInput", "EagerOutput",
    "Recorder", "Trace", "BackwardExecutor", "BackwardPlan", "try_backward", "try_hvp",
    "try_backward_recorded", "overridden_hooks",
    "EagerError", "ImmediateBuilder", "CheckpointStrategy", "SMALL_BYTES",
]
