"""A scalar primitive set over Python ``float`` and ``complex``.

>>> from tidu import linearize, linear_transpose
>>> graph = trace_scalar(lambda x: x * x, ["x"])
>>> ScalarOp.MUL in {node.operation for node in graph.operations}
True
"""

from primitives.scalar.executor import ImmediateScalarBuilder, ScalarExecutor
from primitives.scalar.ops import Const, Pow, Scale, ScalarOp, ScalarTypeError
from primitives.scalar.functions import (
    conj,
    cos,
    exp,
    imag,
    log,
    real,
    sign,
    sin,
    sincos,
    sqrt,
    tanh,
)
from primitives.scalar.trace import ScalarTracer, trace_scalar

__all__ = [
    "ScalarOp", "Pow", "Scale", "Const", "ScalarTypeError",
    "ScalarExecutor", "ImmediateScalarBuilder",
    "trace_scalar", "ScalarTracer",
    "exp", "log", "sin", "cos", "sincos", "sqrt", "tanh", "conj", "real", "imag", "sign",
]
