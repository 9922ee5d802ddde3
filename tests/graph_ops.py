"""A small scalar op set shared by the ``tidu.graph`` tests, with evaluation counters.

``ScalarOp`` is an ``Enum`` op set; ``Scale`` and ``Shift`` are frozen-dataclass
ops with a parameter. Every ``eval`` bumps ``EVALS[op]`` so tests can count how
often an operation actually ran (call ``reset_counts()`` first).
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import math

import numpy as np

from tidu.graph import EvaluableGraphOperation, GraphBuilder, Local

EVALS: collections.Counter = collections.Counter()


def reset_counts() -> None:
    """Forget every evaluation counted so far."""
    EVALS.clear()


class FailEvaluated(RuntimeError):
    """Raised by ``ScalarOp.FAIL.eval``: proof that an op ran."""


def _sin(value):
    return math.sin(value) if isinstance(value, (int, float)) else np.sin(value)


def _cos(value):
    return math.cos(value) if isinstance(value, (int, float)) else np.cos(value)


class ScalarOp(EvaluableGraphOperation, enum.Enum):
    """Scalar (and elementwise NumPy) ops: (input count, output count) per member."""

    NEG = "neg"
    SIN = "sin"
    COS = "cos"
    ADD = "add"
    MUL = "mul"
    SUB = "sub"
    SINCOS = "sincos"   # one input, two outputs
    DIVMOD = "divmod"   # two inputs, two outputs
    FAIL = "fail"       # eval raises FailEvaluated

    def input_count(self) -> int:
        return _COUNTS[self][0]

    def output_count(self) -> int:
        return _COUNTS[self][1]

    def eval(self, ctx, inputs):
        EVALS[self] += 1
        if self is ScalarOp.NEG:
            return [-inputs[0]]
        if self is ScalarOp.SIN:
            return [_sin(inputs[0])]
        if self is ScalarOp.COS:
            return [_cos(inputs[0])]
        if self is ScalarOp.ADD:
            return [inputs[0] + inputs[1]]
        if self is ScalarOp.MUL:
            return [inputs[0] * inputs[1]]
        if self is ScalarOp.SUB:
            return [inputs[0] - inputs[1]]
        if self is ScalarOp.SINCOS:
            return [_sin(inputs[0]), _cos(inputs[0])]
        if self is ScalarOp.DIVMOD:
            return list(divmod(inputs[0], inputs[1]))
        raise FailEvaluated(f"{self.name} was evaluated")


_COUNTS = {
    ScalarOp.NEG: (1, 1),
    ScalarOp.SIN: (1, 1),
    ScalarOp.COS: (1, 1),
    ScalarOp.ADD: (2, 1),
    ScalarOp.MUL: (2, 1),
    ScalarOp.SUB: (2, 1),
    ScalarOp.SINCOS: (1, 2),
    ScalarOp.DIVMOD: (2, 2),
    ScalarOp.FAIL: (1, 1),
}


def reference_eval(op, inputs):
    """What ``op.eval`` computes, without counting (for checking evaluate)."""
    if isinstance(op, Scale):
        return [inputs[0] * op.factor]
    if isinstance(op, Shift):
        return [inputs[0] + op.amount]
    saved = EVALS[op]
    try:
        return op.eval(None, inputs)
    finally:
        EVALS[op] = saved


@dataclasses.dataclass(frozen=True)
class Scale(EvaluableGraphOperation):
    """Multiply by a constant ``factor``: equal by value, hashable, one in / one out."""

    factor: float

    def input_count(self) -> int:
        return 1

    def output_count(self) -> int:
        return 1

    def eval(self, ctx, inputs):
        EVALS[self] += 1
        return [inputs[0] * self.factor]


@dataclasses.dataclass(frozen=True)
class Shift(EvaluableGraphOperation):
    """Add a constant ``amount``.

    ``Shift(c)`` and ``Scale(c)`` hash equal (dataclasses hash their field tuple)
    but are not equal: a ready-made hash collision for the intern tables.
    """

    amount: float

    def input_count(self) -> int:
        return 1

    def output_count(self) -> int:
        return 1

    def eval(self, ctx, inputs):
        EVALS[self] += 1
        return [inputs[0] + self.amount]


def build_chain(n: int, op=ScalarOp.NEG, input_name="x", builder=None):
    """A builder holding ``x -> op -> op -> ...`` (``n`` ops); returns ``(builder, last id)``."""
    builder = GraphBuilder() if builder is None else builder
    value = builder.add_input(input_name)
    add = builder.add_operation
    for _ in range(n):
        [value] = add(op, [Local(value)])
    builder.set_outputs([value])
    return builder, value
