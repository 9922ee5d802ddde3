"""Eager reverse mode: record executed invocations, then walk them backward.

A runtime records each call it runs and gives backward a ``BackwardExecutor``:
``execute_forward`` (run a graph on its data) and ``add_operands`` (sum two
cotangents) are all it must write. The same executor serves second derivatives:
``try_hvp`` (Hessian-vector products, forward over reverse on the recording) and
``try_backward_recorded`` (backward that records its own work, PyTorch's
``create_graph``).

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

from tidu.eager.backward import BackwardExecutor, BackwardPlan, try_backward
from tidu.eager.create_graph import try_backward_recorded
from tidu.eager.hvp import try_hvp
from tidu.eager.immediate import ImmediateBuilder
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
    "KeySource", "CounterKeySource", "RecordedGraph", "EagerInput", "EagerOutput",
    "Recorder", "Trace", "BackwardExecutor", "BackwardPlan", "try_backward", "try_hvp",
    "try_backward_recorded",
    "EagerError", "ImmediateBuilder",
]
