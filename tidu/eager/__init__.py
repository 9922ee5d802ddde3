"""Eager reverse mode: record executed invocations, then walk them backward.

>>> from tidu.eager import Recorder, try_backward
>>> from primitives.scalar import ScalarExecutor, ScalarOp
>>> from primitives.scalar.eager import Scalar
>>> x = Scalar(3.0, requires_grad=True)
>>> y = x * x
>>> grads = y.backward()
>>> grads[x.key]
6.0
"""

from tidu.eager.backward import BackwardExecutor, BackwardPlan, try_backward
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
    "Recorder", "Trace", "BackwardExecutor", "BackwardPlan", "try_backward", "EagerError",
    "ImmediateBuilder",
]
