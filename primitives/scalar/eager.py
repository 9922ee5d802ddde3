"""A small eager scalar frontend: ``Scalar`` values that record through ``tidu.eager``.

>>> x = Scalar(2.0, requires_grad=True)
>>> y = x * x + sin(x)
>>> grads = y.backward()
>>> round(grads[x.key], 12) == round(2 * 2.0 + __import__("math").cos(2.0), 12)
True
"""

from __future__ import annotations

from typing import Any

from tidu.eager import EagerInput, RecordedGraph, Recorder, try_backward
from tidu.graph import Input
from primitives.scalar.executor import ScalarExecutor
from primitives.scalar.functions import (  # noqa: F401  (re-exported for eager code)
    conj, cos, exp, imag, log, real, sin, sincos, sqrt, tanh)
from primitives.scalar.ops import Pow, ScalarOp

_recorder = Recorder()
_ARG_KEYS = [tuple(f"arg{i}" for i in range(n)) for n in range(4)]
_executor = ScalarExecutor()
_Number = (int, float, complex)


class Scalar:
    """A number that records the ops applied to it when it (or an input) requires grad."""

    __slots__ = ("value", "requires_grad", "trace", "_key")

    def __init__(self, value, requires_grad: bool = False, *, _trace=None, _key=None) -> None:
        self.value = value
        self.requires_grad = requires_grad
        self.trace = _trace
        self._key = _key

    @property
    def key(self):
        """The eager value key (made on first use for leaves)."""
        if self._key is None:
            self._key = Input(_recorder.key_source.fresh_input_key())
        return self._key

    def backward(self, seed=1.0, executor=None) -> dict:
        """Cotangents of every value this one depends on, by key (``grads[x.key]``)."""
        return try_backward(self.key, self.trace, seed, executor or _executor)

    def __repr__(self) -> str:
        return f"Scalar({self.value!r}{', requires_grad=True' if self.requires_grad else ''})"

    def __add__(self, other): return apply(ScalarOp.ADD, self, other)
    def __radd__(self, other): return apply(ScalarOp.ADD, other, self)
    def __sub__(self, other): return apply(ScalarOp.SUB, self, other)
    def __rsub__(self, other): return apply(ScalarOp.SUB, other, self)
    def __mul__(self, other): return apply(ScalarOp.MUL, self, other)
    def __rmul__(self, other): return apply(ScalarOp.MUL, other, self)
    def __truediv__(self, other): return apply(ScalarOp.DIV, self, other)
    def __rtruediv__(self, other): return apply(ScalarOp.DIV, other, self)
    def __neg__(self): return apply(ScalarOp.NEG, self)

    def __pow__(self, exponent):
        return apply(Pow(exponent), self)

    def apply_op(self, op):
        """``op`` applied to this value (what ``primitives.scalar.sin`` etc. call)."""
        return apply(op, self)


def _lift(value) -> Scalar:
    return value if isinstance(value, Scalar) else Scalar(value)


def _promote(args: list, op) -> list:
    """Mixed real and complex operands (or a complex parameter) make every operand complex."""
    for a in args:
        if type(a.value) is complex:
            break
    else:
        if type(op) is ScalarOp:
            if op not in _COMPLEX_INPUT:
                return args
        elif type(getattr(op, "exponent", getattr(op, "factor", None))) is not complex:
            return args
    return [a if type(a.value) is complex else apply(ScalarOp.TO_COMPLEX, a) for a in args]


_COMPLEX_INPUT = (ScalarOp.REAL, ScalarOp.IMAG)


def apply(op, *args) -> Any:
    """Run ``op`` on ``args`` (Scalars or numbers), recording it if any input requires grad.

    Real operands meeting complex ones are promoted with ``TO_COMPLEX`` first.
    """
    args = [_lift(a) for a in args]
    if op is not ScalarOp.TO_COMPLEX:
        args = _promote(args, op)
    results = op.eval(None, [a.value for a in args])
    if True not in [a.requires_grad for a in args]:
        outs = [Scalar(v) for v in results]
    else:
        # The recorded graph's input keys only name its inputs; every recorded output gets
        # a fresh eager key anyway, so the same argument keys can serve every invocation.
        recorded = RecordedGraph.from_primitive(op, _ARG_KEYS[len(args)])
        inputs = [EagerInput(a.key, a.trace, a.requires_grad, a.value) for a in args]
        recorded_outs = _recorder.record_graph(recorded, inputs, results)
        outs = [Scalar(v, True, _trace=o.trace, _key=o.key) for v, o in zip(results, recorded_outs)]
    return outs[0] if len(outs) == 1 else tuple(outs)
