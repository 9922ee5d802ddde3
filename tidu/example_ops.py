"""A tiny primitive set for tidu's own examples, so tidu's docs need no downstream set.

``Op`` has ``ADD``, ``MUL``, ``NEG``, ``CONJ``, ``SIN``, ``COS`` and ``SINCOS`` (two
outputs) over Python ``float`` and ``complex``, each with its JVP and transpose
rules (complex-correct under ``Re<a, b>``); :func:`trace` records a Python
function of such numbers as a graph. Real primitive sets live in ``primitives/``.

``Op`` also has batch rules, for :func:`tidu.batch`: a batch of numbers is a
Python list (batch axis 0, the only axis a number has), and ``Op``'s ``eval``
works item by item on lists of equal length (nested lists too). A batch rule
first broadcasts each unbatched input to a list with :class:`Broadcast`, whose
transpose is :class:`Sum`, so batched linear graphs transpose correctly.
``Broadcast`` and ``Sum`` have no batch rules themselves: a graph already
batched can be batched again only along inputs batched the first time.

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
import operator
from dataclasses import dataclass
from typing import Callable, Sequence

from tidu.batching import input_role
from tidu.errors import ADRuleError, ADRuleKind, EvaluationError
from tidu.graph import PRIMARY, EvaluableGraphOperation, External, Graph, GraphBuilder, \
    Linearized, Local
from tidu.rules import Primitive

_LIN = Linearized((True,))
_LIN_TT = Linearized((True, True))


def _math(x):
    return cmath if isinstance(x, complex) else math


def _map(name: str, fn: Callable, *xs):
    """``fn`` of numbers, or of the items of lists of one length (nested lists item by item)."""
    lists = [type(x) is list for x in xs]
    if not any(lists):
        return fn(*xs)
    if not all(lists) or len({len(x) for x in xs}) != 1:
        raise EvaluationError(f"{name} got {', '.join(_kind(x) for x in xs)}: batched inputs "
                              "must be lists of one length (broadcast numbers first)")
    return [_map(name, fn, *items) for items in zip(*xs)]


def _kind(x) -> str:
    return f"a list of {len(x)}" if type(x) is list else type(x).__name__


def _sin(x):
    return _math(x).sin(x)


def _cos(x):
    return _math(x).cos(x)


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

    @property
    def memory_bound(self) -> bool:
        """Scalar work: recomputed under the eager "balanced" checkpoint strategy."""
        return True

    @classmethod
    def value_nbytes(cls, value) -> int:
        return 16 if isinstance(value, complex) else 8

    def eval(self, ctx, xs):
        if self is Op.SINCOS:
            return [_map("SINCOS", _sin, xs[0]), _map("SINCOS", _cos, xs[0])]
        return [_map(self.name, _SCALAR_FUNCTIONS[self], *xs)]

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

    def batch_rule(self, b, inputs, axes, role, axis_size, ctx):
        # every batch axis is 0: broadcast the unbatched inputs, then apply the op to lists
        if any(axis not in (0, None) for axis in axes):
            raise ADRuleError(self.name, ADRuleKind.BATCH, "a batch of numbers is a list: "
                              f"batch axis 0 only, got axes {list(axes)}")
        refs = [ref if axis == 0 else
                Local(b.add_primitive(Broadcast(axis_size), [ref], input_role(role, i))[0])
                for i, (ref, axis) in enumerate(zip(inputs, axes))]
        return b.add_primitive(self, refs, role), [0] * self.output_count()


_SCALAR_FUNCTIONS = {Op.ADD: operator.add, Op.MUL: operator.mul, Op.NEG: operator.neg,
                     Op.CONJ: lambda x: x.conjugate(), Op.SIN: _sin, Op.COS: _cos}


@dataclass(frozen=True)
class Broadcast(Primitive, EvaluableGraphOperation):
    """``x -> [x] * size``: a batch of ``size`` copies of ``x`` (linear; transposes to
    :class:`Sum`)."""

    size: int

    @classmethod
    def add(cls) -> Op:
        return Op.ADD

    def input_count(self) -> int:
        return 1

    def output_count(self) -> int:
        return 1

    def eval(self, ctx, xs):
        return [[xs[0]] * self.size]

    def jvp_rule(self, b, primals, outputs, tangents, ctx):
        return b.add_primitive(self, [Local(tangents[0])], _LIN)

    def transpose_rule(self, b, cotangents, inputs, role, ctx):
        return b.add_primitive(Sum(self.size), [Local(cotangents[0])], _LIN)


@dataclass(frozen=True)
class Sum(Primitive, EvaluableGraphOperation):
    """The sum of a batch of ``size`` numbers (linear; transpose :class:`Broadcast`)."""

    size: int

    @classmethod
    def add(cls) -> Op:
        return Op.ADD

    def input_count(self) -> int:
        return 1

    def output_count(self) -> int:
        return 1

    def eval(self, ctx, xs):
        if type(xs[0]) is not list or len(xs[0]) != self.size:
            raise EvaluationError(f"Sum(size={self.size}) got {_kind(xs[0])}")
        if not xs[0]:
            return [0.0]
        total = xs[0][0]
        for item in xs[0][1:]:
            total = _map("Sum", operator.add, total, item)
        return [total]

    def jvp_rule(self, b, primals, outputs, tangents, ctx):
        return b.add_primitive(self, [Local(tangents[0])], _LIN)

    def transpose_rule(self, b, cotangents, inputs, role, ctx):
        return b.add_primitive(Broadcast(self.size), [Local(cotangents[0])], _LIN)


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
