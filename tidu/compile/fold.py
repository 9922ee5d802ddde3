"""Constant folding: an operation whose inputs are all constants becomes constants.

A *constant* is an output of an operation with no inputs. tidu already treats
operations as pure functions of their inputs (equal keys are one value), so
such an operation always gives the same value. An operation whose inputs are
all constants is evaluated once, at optimization time, with the ``ctx`` given
to ``optimize``, and replaced by one constant operation per output.

tidu knows no concrete operation, so the primitive set makes the constant ops:
``type(op).constant(value)`` (a classmethod of :class:`tidu.Primitive`) returns
an operation with no inputs and one output whose value is ``value``, or
``None`` to leave the operation alone (the default, and the right answer for a
value too large to store in a program). An operation whose ``eval`` raises at
optimization time is left alone too: it raises when the program runs, as it
did before.
"""

from __future__ import annotations

from typing import Any, Sequence

from tidu.errors import ADRuleKind, RuleContractError
from tidu.graph import Derived, EvaluableGraphOperation, GraphOperation, OperationKey, ValueKey
from tidu.graph import op_name
from tidu.rules import Primitive

_UNKNOWN = object()          # a constant that cannot be evaluated at optimization time


def is_constant(key: ValueKey) -> bool:
    """Whether ``key`` is an output of an operation with no inputs."""
    return type(key) is Derived and not key.operation.inputs


class ConstantFolder:
    """Folds operations over constants, evaluating each constant operation at most once."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self._values: dict[OperationKey, Sequence] = {}   # constant op key -> its outputs' values

    def fold(self, op_key: OperationKey) -> list[GraphOperation] | None:
        """One constant operation per output of ``op_key``, or ``None`` if it does not fold."""
        op = op_key.operation
        inputs = op_key.inputs
        if not (inputs and isinstance(op, Primitive) and isinstance(op, EvaluableGraphOperation)
                and all(map(is_constant, inputs))):
            return None
        args = [self._value_of(key) for key in inputs]
        if any(arg is _UNKNOWN for arg in args):
            return None
        results = _evaluated(op, self.ctx, args, op_key.output_count)
        if results is _UNKNOWN:
            return None
        constants = [op.constant(value) for value in results]
        if any(constant is None for constant in constants):
            return None
        for constant in constants:
            _check_constant(op, constant)
        return constants

    def _value_of(self, key: Derived):
        op_key = key.operation
        values = self._values.get(op_key)
        if values is None:
            op = op_key.operation
            values = (_evaluated(op, self.ctx, [], op_key.output_count)
                      if isinstance(op, EvaluableGraphOperation) else _UNKNOWN)
            self._values[op_key] = values
        return _UNKNOWN if values is _UNKNOWN else values[key.output_slot]


def _evaluated(op, ctx, args: list, n_out: int):
    """``op.eval(ctx, args)``, or ``_UNKNOWN`` when it raises or gives a wrong result."""
    try:
        results = op.eval(ctx, args)
    except Exception:            # left to raise at run time, where it did before
        return _UNKNOWN
    if not isinstance(results, (list, tuple)) or len(results) != n_out:
        return _UNKNOWN
    return results


def _check_constant(op, constant) -> None:
    if not (isinstance(constant, GraphOperation) and constant.input_count() == 0
            and constant.output_count() == 1):
        raise RuleContractError(op_name(op), ADRuleKind.SIMPLIFY,
                                f"{type(op).__name__}.constant() returned {constant!r}, not an "
                                "operation with no inputs and one output")
