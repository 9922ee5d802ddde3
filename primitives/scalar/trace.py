"""Trace a Python function of scalars into a ``ScalarOp`` graph.

>>> from primitives.scalar.functions import sin
>>> graph = trace_scalar(lambda x, y: sin(x) * y + 1.0, ["x", "y"])
>>> print(graph)
graph(a = 'x', b = 'y'):
  c = SIN a
  d = MUL c b
  e = Const(value=1.0)
  f = ADD d e
  return f
"""

from __future__ import annotations

import reprlib
from typing import Callable, Collection, Hashable, Sequence

from tidu.errors import sequence_argument
from tidu.graph import Graph, GraphBuilder, Local
from primitives.scalar.ops import Const, Pow, ScalarOp, ScalarTypeError

_Number = (int, float, complex)


class ScalarTracer:
    """A scalar under tracing: arithmetic on it adds operations to a builder.

    It knows whether it is complex, so mixing real and complex operands
    inserts ``TO_COMPLEX`` (the promotion whose transpose keeps real inputs'
    cotangents real).
    """

    __slots__ = ("builder", "id", "is_complex")

    def __init__(self, builder: GraphBuilder, id: int, is_complex: bool = False) -> None:
        self.builder = builder
        self.id = id
        self.is_complex = is_complex

    def _lift(self, other) -> "ScalarTracer":
        if isinstance(other, ScalarTracer):
            if other.builder is not self.builder:
                raise ScalarTypeError("a tracer of another trace_scalar call (a value leaked "
                                      "from another trace) used in this one; pass it in as an "
                                      "input instead")
            return other
        if isinstance(other, _Number):
            [const] = self.builder.add_operation(Const(other), [])
            return ScalarTracer(self.builder, const, isinstance(other, complex))
        return NotImplemented

    def _apply(self, op, *args, is_complex: bool | None = None) -> "ScalarTracer":
        outs = self.builder.add_operation(op, [Local(a.id) for a in args])
        if is_complex is None:
            is_complex = any(a.is_complex for a in args)
        return ScalarTracer(self.builder, outs[0], is_complex)

    def as_complex(self) -> "ScalarTracer":
        """This value, promoted to complex if it is real."""
        return self if self.is_complex else self._apply(ScalarOp.TO_COMPLEX, self,
                                                        is_complex=True)

    def _binary(self, op, other, reverse=False):
        other = self._lift(other)
        if other is NotImplemented:
            return NotImplemented
        left, right = (other, self) if reverse else (self, other)
        if left.is_complex != right.is_complex:
            left, right = left.as_complex(), right.as_complex()
        return self._apply(op, left, right)

    def __add__(self, other): return self._binary(ScalarOp.ADD, other)
    def __radd__(self, other): return self._binary(ScalarOp.ADD, other, True)
    def __sub__(self, other): return self._binary(ScalarOp.SUB, other)
    def __rsub__(self, other): return self._binary(ScalarOp.SUB, other, True)
    def __mul__(self, other): return self._binary(ScalarOp.MUL, other)
    def __rmul__(self, other): return self._binary(ScalarOp.MUL, other, True)
    def __truediv__(self, other): return self._binary(ScalarOp.DIV, other)
    def __rtruediv__(self, other): return self._binary(ScalarOp.DIV, other, True)
    def __neg__(self): return self._apply(ScalarOp.NEG, self)
    def __pos__(self): return self

    def __pow__(self, exponent):
        if not isinstance(exponent, _Number):
            return NotImplemented
        base = self.as_complex() if isinstance(exponent, complex) else self
        return self._apply(Pow(exponent), base)

    def conjugate(self): return self._apply(ScalarOp.CONJ, self)

    def __abs__(self): return self.apply_op(ScalarOp.ABS)

    def __bool__(self) -> bool:
        raise ScalarTypeError("bool() of a traced scalar (an if, while, and/or on a value "
                              "trace_scalar traces): a graph has no branches, and the value is "
                              "not known while tracing; branch on an input outside the trace")

    def apply_op(self, op: ScalarOp):
        """``op`` applied to this value (what ``primitives.scalar.sin`` etc. call)."""
        x = self.as_complex() if op in _COMPLEX_OPERAND else self
        outs = self.builder.add_operation(op, [Local(x.id)])
        is_complex = x.is_complex and op not in _REAL_RESULT
        tracers = [ScalarTracer(self.builder, o, is_complex) for o in outs]
        return tracers[0] if len(tracers) == 1 else tuple(tracers)


_COMPLEX_OPERAND = (ScalarOp.REAL, ScalarOp.IMAG)            # a real operand is promoted first
_REAL_RESULT = (ScalarOp.REAL, ScalarOp.IMAG, ScalarOp.ABS)  # real even for a complex operand


def trace_scalar(f: Callable, input_keys: Sequence[Hashable],
                 complex_inputs: Collection[Hashable] = ()) -> Graph:
    """The graph of ``f`` called with one traced scalar per input key.

    Inputs are real unless their key is in ``complex_inputs``. ``f`` may
    return one scalar or a tuple (or list) of them; those are the outputs. A
    number among them becomes a constant output. Anything else (a string,
    ``None``, an array, a tracer of another trace) raises
    :class:`~primitives.scalar.ops.ScalarTypeError` naming ``f`` and the output.

    >>> trace_scalar(lambda x: "oops", ["x"])
    Traceback (most recent call last):
    ...
    primitives.scalar.ops.ScalarTypeError: trace_scalar: <lambda> returned a str ('oops'); a traced function returns numbers or the scalars it computed (or a tuple of them)
    """
    input_keys = sequence_argument(input_keys, "trace_scalar", "input_keys")
    builder = GraphBuilder()
    complex_inputs = set(complex_inputs)         # read once: it may be a generator
    args = [ScalarTracer(builder, builder.add_input(key), key in complex_inputs)
            for key in input_keys]
    result = f(*args)
    several = isinstance(result, (tuple, list))
    results = result if several else (result,)
    ids = []
    for position, value in enumerate(results):
        if isinstance(value, ScalarTracer) and value.builder is builder:
            ids.append(value.id)
        elif isinstance(value, _Number) and not isinstance(value, ScalarTracer):
            ids.append(builder.add_operation(Const(value), [])[0])
        else:
            ids.append(_bad_output(f, value, position if several else None))
    builder.set_outputs(ids)
    return builder.build()


def _bad_output(f, value, position: int | None):
    """The error for an output of ``f`` that is neither a number nor one of its tracers."""
    name = getattr(f, "__qualname__", None) or type(f).__name__
    where = "" if position is None else f" at position {position}"
    if isinstance(value, ScalarTracer):
        what = "a tracer of another trace_scalar call (a value leaked from another trace)"
    else:
        what = f"a {type(value).__name__} ({reprlib.repr(value)})"
    raise ScalarTypeError(f"trace_scalar: {name} returned {what}{where}; a traced function "
                          "returns numbers or the scalars it computed (or a tuple of them)")
