"""Simplification: the one place operations enter an optimized program.

:meth:`Rewriter.add` takes an operation whose inputs are already in the
program and returns the program's keys for its outputs, after three steps:

1. **CSE**: an operation equal to one added before (same op, input keys and
   role, so the same :class:`~tidu.graph.OperationKey`) is that one;
2. **constant folding** (:mod:`tidu.compile.fold`);
3. **simplify rules**: ``op.simplify(rewriter, inputs, role, ctx)``, a method of
   :class:`tidu.Primitive`, may return one value key per output that computes
   the same values more cheaply. It may return keys already in the program (an
   input: ``x * 1`` is ``x``; an input of an input's producer: ``neg(neg(x))`` is
   ``x``) and keys of new operations it makes with :meth:`Rewriter.emit`. The
   default returns ``None``: no rewrite.

Rules are local: they look at the op and, through :func:`producer`, at the
operations that made its inputs. Operations are added dependencies first and
everything ``emit`` makes is simplified in turn, so an operation's inputs are
always in their final form when its rule runs: one pass reaches the fixed
point. A rule must make progress (emit fewer or simpler operations than it
replaces); a chain of more than ``MAX_NESTED_EMITS`` rewrites at one operation
raises :class:`~tidu.RuleContractError`.

>>> import enum
>>> from tidu import Primitive
>>> from tidu.graph import EvaluableGraphOperation, Input
>>> class Op(Primitive, EvaluableGraphOperation, enum.Enum):
...     NEG = "neg"
...     def input_count(self): return 1
...     def output_count(self): return 1
...     def eval(self, ctx, inputs): return [-inputs[0]]
...     def simplify(self, rewriter, inputs, role, ctx):
...         made_by = producer(inputs[0])
...         if made_by is not None and made_by.operation is Op.NEG:
...             return [made_by.inputs[0]]          # neg(neg(x)) is x
...         return None
>>> x = Input("x")
>>> rewriter = Rewriter(None, [x])
>>> [neg_x] = rewriter.emit(Op.NEG, [x])
>>> rewriter.emit(Op.NEG, [neg_x]) == [x]
True
"""

from __future__ import annotations

from typing import Any, Sequence

from tidu.errors import ADRuleKind, ArityError, InvalidOperationError, RuleContractError
from tidu.graph import (
    PRIMARY,
    Derived,
    GraphOperation,
    Linearized,
    OperationKey,
    OperationRole,
    ValueKey,
)
from tidu.graph import op_name
from tidu.compile.fold import ConstantFolder
from tidu.rules import Primitive

MAX_NESTED_EMITS = 64
"""How many rewrites may nest at one operation before a rule is taken to loop."""


def producer(key: ValueKey) -> OperationKey | None:
    """The operation that computes ``key`` (``.operation``, ``.inputs``, ``.role``), or
    ``None`` for an input. ``key.output_slot`` says which of its outputs ``key`` is."""
    return key.operation if type(key) is Derived else None


def forwarded(inputs: Sequence[ValueKey], role, index: int) -> list[ValueKey] | None:
    """``[inputs[index]]`` as a rule's result (the op's output is that input), if the role
    allows it, else ``None``.

    In linear work only a linear (active) input may stand for the op's output: a
    primal value there would make the program untransposable.
    """
    if type(role) is Linearized and not role.active_mask[index]:
        return None
    return [inputs[index]]


class Rewriter:
    """Builds an optimized program out of value keys, each operation in its simplest form.

    ``inputs`` are the program's ``Input`` keys; ``ctx`` goes to ``eval`` when
    folding and to every ``simplify`` rule.
    """

    def __init__(self, ctx: Any, inputs: Sequence[ValueKey]) -> None:
        self.ctx = ctx
        self._folder = ConstantFolder(ctx)
        self._done: dict[OperationKey, tuple] = {}   # op key -> its outputs in the program
        self._present = set(inputs)                  # every key the program holds
        self._depth = 0
        self.operations: list[OperationKey] = []
        """The program's operations, each after those it reads (some may be dead)."""

    def add(self, op_key: OperationKey) -> tuple:
        """The program's keys for the outputs of ``op_key``, whose inputs it already holds."""
        outputs = self._done.get(op_key)
        if outputs is None:
            outputs = self._done[op_key] = self._rewrite(op_key)
        return outputs

    def emit(self, op, inputs: Sequence[ValueKey], role: OperationRole = PRIMARY) -> list:
        """For ``simplify`` rules: ``op`` applied to keys the program holds; its output keys.

        The new operation is itself deduplicated, folded and simplified.
        """
        if not isinstance(op, GraphOperation):
            raise InvalidOperationError(f"a simplify rule emitted {op!r}, not a GraphOperation")
        inputs = tuple(inputs)
        n_in = op.input_count()
        if len(inputs) != n_in or (type(role) is Linearized and len(role.active_mask) != n_in):
            raise ArityError(f"a simplify rule emitted {op_name(op)} with {len(inputs)} inputs "
                             f"and role {role!r}; it takes {n_in}")
        for key in inputs:
            if not isinstance(key, ValueKey) or key not in self._present:
                raise RuleContractError(op_name(op), ADRuleKind.SIMPLIFY,
                                        f"emitted with input {key!r}, which is not a value of "
                                        "the program being optimized")
        if self._depth >= MAX_NESTED_EMITS:
            raise RuleContractError(op_name(op), ADRuleKind.SIMPLIFY,
                                    f"rewrites nest more than {MAX_NESTED_EMITS} deep: a "
                                    "simplify rule keeps making new operations")
        self._depth += 1
        try:
            return list(self.add(OperationKey(op, inputs, role)))
        finally:
            self._depth -= 1

    def _rewrite(self, op_key: OperationKey) -> tuple:
        constants = self._folder.fold(op_key)
        if constants is not None:
            return tuple(self.emit(constant, ())[0] for constant in constants)
        op = op_key.operation
        if isinstance(op, Primitive):
            replacement = op.simplify(self, op_key.inputs, op_key.role, self.ctx)
            if replacement is not None:
                return self._checked(op, replacement, op_key.output_count)
        outputs = op_key.output_keys()
        self._present.update(outputs)
        self.operations.append(op_key)
        return outputs

    def _checked(self, op, replacement, n_out: int) -> tuple:
        """A rule's result if it is one key the program holds per output; else a clear error."""
        if not isinstance(replacement, (list, tuple)) or len(replacement) != n_out:
            raise RuleContractError(op_name(op), ADRuleKind.SIMPLIFY,
                                    f"returned {replacement!r}; expected None or a list of "
                                    f"{n_out} value key(s)")
        for key in replacement:
            if not isinstance(key, ValueKey) or key not in self._present:
                raise RuleContractError(op_name(op), ADRuleKind.SIMPLIFY,
                                        f"returned {key!r}, which is not a value of the program "
                                        "being optimized (make new values with rewriter.emit)")
        return tuple(replacement)
