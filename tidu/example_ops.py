"""A tiny primitive set for tidu's own examples, so tidu's docs need no downstream set.

``Op`` has ``ADD``, ``MUL``, ``NEG``, ``CONJ``, ``SIN``, ``COS`` and ``SINCOS`` (two
outputs) over Python ``float`` and ``complex``, each with its JVP and transpose
rules (complex-correct under ``Re<a, b>``); :func:`trace` records a Python
function of such numbers as a graph. Real primitive sets live in ``primitives/``.

>>> graph = trace(lambda x, y: x * y + sin(x), ["x", "y"])
>>> print(graph)
graph(a = 'x', b = 'y'):
  c = MUL a b
  d = SIN a
  e = ADD c d
  return e
"""

from __future__ import annotations

import cmath
import enum
import math
from typing import Callable, Sequence

from tidu.errors import ADRuleError, ADRuleKind
from tidu.graph import PRIMARY, EvaluableGraphOperation, External, Graph, GraphBuilder, \
    Linearized, Local
from tidu.rules import Primitive

_LIN = Linearized((True,))
_LIN_TT = Linearized((True, True))


def _math(x):
    return cmath if isinstance(x, complex) else math


class Op(Primitive, EvaluableGraphOperation, enum.Enum):
    """Scalar ops with rules: the smallest set that exercises every transform."""

    ADD = "add"
    MUL = "mul"
    NEG = "neg"
    CONJ = "conj"
    SIN = "sin"
    COS = "cos"
    SINCOS = "sincos"

    @classmethod
    def add(cls) -> "Op":
        return cls.ADD

    def input_count(self) -> int:
        return 2 if self in (Op.ADD, Op.MUL) else 1

    def output_count(self) -> int:
        return 2 if self is Op.SINCOS else 1

    def eval(self, ctx, xs):
        x = xs[0]
        if self is Op.ADD:
            return [x + xs[1]]
        if self is Op.MUL:
            return [x * xs[1]]
        if self is Op.NEG:
            return [-x]
        if self is Op.CONJ:
            return [x.conjugate()]
        if self is Op.SIN:
            return [_math(x).sin(x)]
        if self is Op.COS:
            return [_math(x).cos(x)]
        return [_math(x).sin(x), _math(x).cos(x)]

    def jvp_rule(self, b, primals, outputs, tangents, ctx):
        def emit(op, refs, role=PRIMARY):
            return b.add_primitive(op, refs, role)

        if self in (Op.ADD,):
            present = [t for t in tangents if t is not None]
            if len(present) == 1:
                return present
            return emit(Op.ADD, [Local(t) for t in present], _LIN_TT)
        if self in (Op.NEG, Op.CONJ):
            return emit(self, [Local(tangents[0])], _LIN)
        if self is Op.MUL:
            terms = [emit(Op.MUL, [Local(t), External(other)], Linearized((True, False)))[0]
                     for t, other in zip(tangents, reversed(primals)) if t is not None]
            return terms if len(terms) == 1 else emit(Op.ADD, [Local(t) for t in terms], _LIN_TT)
        x, [t] = External(primals[0]), tangents
        if self is Op.SIN:
            [d] = emit(Op.COS, [x])
            return emit(Op.MUL, [Local(t), Local(d)], Linearized((True, False)))
        [s] = emit(Op.SIN, [x])
        [d] = emit(Op.NEG, [Local(s)])
        [dcos] = emit(Op.MUL, [Local(t), Local(d)], Linearized((True, False)))
        if self is Op.COS:
            return [dcos]
        [c] = emit(Op.COS, [x])
        [dsin] = emit(Op.MUL, [Local(t), Local(c)], Linearized((True, False)))
        return [dsin, dcos]

    def transpose_rule(self, b, cotangents, inputs, role, ctx):
        if role is PRIMARY or self in (Op.SIN, Op.COS, Op.SINCOS):
            raise ADRuleError(self.name, ADRuleKind.TRANSPOSE, f"{self.name} is not linear")
        [ct] = cotangents
        if self is Op.ADD:
            return [ct if linear else None for linear in role.active_mask]
        if self in (Op.NEG, Op.CONJ):
            return b.add_primitive(self, [Local(ct)], _LIN)
        # MUL, linear in the input its mask marks: ct * conj(the other factor)
        linear = role.active_mask.index(True)
        [other] = b.add_primitive(Op.CONJ, [inputs[1 - linear]], PRIMARY)
        [out] = b.add_primitive(Op.MUL, [Local(ct), Local(other)], Linearized((True, False)))
        return [out, None] if linear == 0 else [None, out]


class _Traced:
    """A value while :func:`trace` runs: its id in the builder."""

    def __init__(self, builder: GraphBuilder, id: int) -> None:
        self.builder, self.id = builder, id

    def _apply(self, op: Op, *others) -> "_Traced":
        [out] = self.builder.add_operation(op, [Local(v.id) for v in (self, *others)])
        return _Traced(self.builder, out)

    def __add__(self, other): return self._apply(Op.ADD, other)
    def __mul__(self, other): return self._apply(Op.MUL, other)
    def __neg__(self): return self._apply(Op.NEG)


def sin(x: _Traced) -> _Traced:
    """``SIN`` of a traced value."""
    return x._apply(Op.SIN)


def cos(x: _Traced) -> _Traced:
    """``COS`` of a traced value."""
    return x._apply(Op.COS)


def trace(f: Callable, names: Sequence) -> Graph:
    """``f`` of traced inputs ``names`` as a graph (one output, or a tuple of them)."""
    builder = GraphBuilder()
    inputs = [_Traced(builder, builder.add_input(name)) for name in names]
    out = f(*inputs)
    builder.set_outputs([o.id for o in (out if isinstance(out, tuple) else (out,))])
    return builder.build()
