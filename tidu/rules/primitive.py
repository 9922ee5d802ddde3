"""The rule contract a primitive set implements.

>>> import enum
>>> from tidu.rules import Primitive
>>> class Op(Primitive, enum.Enum):
...     ADD = "add"
...     SIGN = "sign"
...     @classmethod
...     def add(cls): return cls.ADD
...     def input_count(self): return 2 if self is Op.ADD else 1
...     def output_count(self): return 1
>>> Op.add() is Op.ADD
True
>>> Op.SIGN.jvp_rule(None, [], [], [None], None)
Traceback (most recent call last):
...
tidu.errors.ADRuleError: SIGN has no jvp rule
"""

from __future__ import annotations

from typing import Any, Sequence

from tidu.errors import ADRuleError, ADRuleKind, InvalidOperationError
from tidu.graph import GraphOperation, ValueKey
from tidu.graph import op_name


class Primitive(GraphOperation):
    """An operation with AD rules: a JVP rule, a transpose rule for its linear uses and,
    optionally, a batch rule.

    A JVP rule receives the op's primal input and output keys (refer to them
    with ``External(key)``) and one tangent id or ``None`` (a symbolic zero) per
    input; it emits tangent work through ``builder`` with role
    ``Linearized(active_mask)`` and returns one tangent id or ``None`` per output, in a
    list or tuple: an id it was given or the output of work with a ``Linearized`` role
    (the output of ``PRIMARY`` work is a primal value, and is refused).

    A transpose rule receives one cotangent id or ``None`` per output, the op's
    inputs as ``External`` references and the op's ``role`` (its
    ``active_mask`` marks the linear inputs); it returns one cotangent id or
    ``None`` per input, as the JVP rule returns tangents.

    A batch rule (for :func:`tidu.batch`) receives a reference per input, the
    batch axis of each (``None``: the input has no batch axis) and the op's
    ``role``; it emits the batched op through ``builder`` and returns the output
    ids with the batch axis of each output. Rules that are not implemented raise
    :class:`ADRuleError`.
    """

    __slots__ = ()

    memory_bound = False
    """Whether this op's work is bound by memory traffic (elementwise and shape work): the
    eager ``"balanced"`` checkpoint strategy recomputes such ops' results in backward
    instead of keeping them (:mod:`tidu.eager.checkpointing`). Compute-bound ops (matrix
    products, factorizations) and ops that say nothing keep theirs."""

    @classmethod
    def add(cls) -> "Primitive":
        """The op ``linear_transpose`` uses to sum cotangents (two inputs, one output)."""
        raise ADRuleError(cls.__name__, ADRuleKind.TRANSPOSE, "the set defines no add()")

    @classmethod
    def constant(cls, value: Any) -> "Primitive | None":
        """An operation with no inputs and one output whose value is ``value``, or ``None``.

        :func:`tidu.optimize` folds an operation whose inputs are all constants
        (outputs of operations with no inputs) into the constants this returns,
        one per output. The default, ``None``, leaves it alone; so may a set for
        values too large to keep in a program.
        """
        return None

    def simplify(self, rewriter, inputs: Sequence[ValueKey], role, ctx: Any
                 ) -> Sequence[ValueKey] | None:
        """A cheaper way to compute this op on ``inputs``: one value key per output, or ``None``.

        Called by :func:`tidu.optimize` with the op's input keys, already
        simplified. Return keys the program holds (an input, or an input of an
        input's producer: see :func:`tidu.compile.producer`) or keys of new
        operations made with ``rewriter.emit(op, input_keys, role)``, which are
        simplified in turn. A rule must make progress. Default: ``None``, no rewrite.
        """
        return None

    def structural_rules(self) -> bool:
        """Whether this op's rules may be recorded once and replayed (default ``False``).

        Return ``True`` only if, for a given op, role and pattern of zero
        (``None``) tangents or cotangents, the rules emit the same operations in
        the same order at every node: they name values only by position
        (``External`` of the keys they are given, ``Local`` of the ids they are
        given or get back from ``add_primitive``), never look inside keys or at id
        values, and use no builder method but ``add_primitive``. Transforms then
        call each rule once per pattern and replay what it emitted for the other
        nodes, which is much faster and gives the same graph.
        """
        return False

    def jvp_rule(self, builder, primal_inputs: Sequence[ValueKey],
                 primal_outputs: Sequence[ValueKey], tangent_inputs: Sequence[int | None],
                 ctx: Any) -> Sequence[int | None]:
        """Emit the JVP; return one tangent id (or ``None``) per output."""
        raise ADRuleError(op_name(self), ADRuleKind.JVP)

    def transpose_rule(self, builder, cotangent_outputs: Sequence[int | None],
                       inputs: Sequence, role, ctx: Any) -> Sequence[int | None]:
        """Emit the transpose; return one cotangent id (or ``None``) per input."""
        raise ADRuleError(op_name(self), ADRuleKind.TRANSPOSE)

    @classmethod
    def value_nbytes(cls, value: Any) -> int:
        """Bytes ``value``, a value of this set, holds: what memory budgets count
        (:func:`tidu.remat.rematerialize`). The default raises: the set gives no sizes."""
        raise InvalidOperationError(
            f"{cls.__name__} gives no value sizes: a memory budget needs its primitive set "
            "to define the classmethod value_nbytes(value)")

    def recompute_cost(self, inputs: Sequence, outputs: Sequence) -> float:
        """What running this op again on ``inputs`` (making ``outputs``) costs, in any unit
        shared by the set; rematerialization recomputes the cheapest values first.

        The default counts the bytes read and written, right for memory-bound work;
        compute-bound ops (matrix products, factorizations) should say more.
        """
        nbytes = type(self).value_nbytes
        return float(sum(nbytes(v) for v in inputs) + sum(nbytes(v) for v in outputs))

    def batch_rule(self, builder, inputs: Sequence, axes: Sequence[int | None], role,
                   axis_size: int, ctx: Any) -> tuple[Sequence[int], Sequence[int | None]]:
        """Emit this op applied to a batch; return ``(output ids, output batch axes)``.

        ``inputs`` holds one ``Local`` or ``External`` reference per input, ready
        for ``builder.add_primitive``; ``axes[i]`` is the position of input
        ``i``'s batch axis, of length ``axis_size``, or ``None`` if input ``i``
        has none (it is the same for every example). At least one axis is not
        ``None``: :func:`tidu.batch` copies an op whose inputs are all unbatched
        without calling this. ``role`` is the op's role: emit the batched op with
        it, and one-input work on input ``i`` with ``tidu.batching.input_role(role, i)``,
        so a batched linear graph stays linear where it was.

        Return one id per output (every output has a value; there are no
        symbolic zeros here) and one batch axis per output: where the batch axis
        of that output sits, or ``None`` if the output is the same for every
        example. The default raises :class:`ADRuleError`: the op cannot be batched.
        """
        raise ADRuleError(op_name(self), ADRuleKind.BATCH)
