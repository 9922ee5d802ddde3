"""Selection and comparison: ``Select`` is ``lax.select`` (``np.where``), ``Compare`` makes
the booleans it selects with.

``Select``'s predicate is not differentiable: it is linear in its two branches
jointly, and a branch without a tangent or cotangent is a ``Full`` zero.
``Compare`` gives booleans (no tangent). Neither needs an elementwise op, so the
elementwise ops whose derivatives select or compare (``power``, ``maximum``...)
emit these.

>>> Select((2,), "float64").eval(None, [np.array([True, False]), np.ones(2), np.zeros(2)])
[array([1., 0.])]
>>> Compare("lt").eval(None, [np.array([1.0, 2.0]), np.array([2.0, 2.0])])
[array([ True, False])]

It imports :mod:`.base`, :mod:`.shape` and :mod:`.constants`, of :mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

import numpy as np

from tidu import ADRuleError, ADRuleKind
from tidu.graph import External, Linearized, Local
from primitives.tensor.backends import NUMPY, operands
from primitives.tensor.ops.base import (
    OpParameterError,
    TensorPrimitive,
    emit,
    linear_mask,
    not_linear,
    tensor_op,
    with_batch,
)
from primitives.tensor.ops.constants import zeros
from primitives.tensor.ops.shape import batch_all_at, batch_elementwise


@tensor_op
class Select(TensorPrimitive):
    """``np.where(pred, on_true, on_false)`` on operands of one ``shape`` and ``dtype``.

    Linear in the two branches jointly (the predicate is a constant), so a
    branch without a tangent or cotangent is a ``Full`` zero.
    """
    memory_bound = True          # recomputed under the eager "balanced" strategy

    shape: tuple
    dtype: str
    name = "select"

    def input_count(self) -> int:
        return 3

    def output_dtype(self) -> str:
        return self.dtype

    def eval(self, ctx, inputs):
        xp, inputs = operands(inputs, self)
        return [xp.where(*inputs)]

    def _emit(self, builder, pred, on_true, on_false) -> int:
        mask = (False, on_true is not None, on_false is not None)
        zero = None
        refs = [pred]
        for branch in (on_true, on_false):
            if branch is None:
                zero = zero if zero is not None else zeros(builder, self.shape, self.dtype)
                refs.append(Local(zero))
            else:
                refs.append(Local(branch))
        return emit(builder, self, refs, Linearized(mask))

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        _, t_true, t_false = tangent_inputs
        if t_true is None and t_false is None:
            return [None]
        return [self._emit(builder, External(primal_inputs[0]), t_true, t_false)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        mask = linear_mask(self, role)
        if mask[0]:
            raise ADRuleError("select", ADRuleKind.TRANSPOSE, "the predicate is not linear")
        ct = cotangent_outputs[0]
        return [None,
                self._emit(builder, inputs[0], ct, None) if mask[1] else None,
                self._emit(builder, inputs[0], None, ct) if mask[2] else None]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        axis = next(a for a in axes if a is not None)
        refs = batch_all_at(builder, inputs, axes, role, axis_size, axis)
        batched = Select(with_batch(self.shape, axis, axis_size), self.dtype)
        return builder.add_primitive(batched, refs, role), [axis]


# --- comparisons ------------------------------------------------------------------------

# NumPy's ufuncs, whose names are the Array API's
_COMPARISONS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
                "gt": np.greater, "ge": np.greater_equal}


@tensor_op
class Compare(TensorPrimitive):
    """An elementwise comparison (``eq ne lt le gt ge``) of operands of one shape and dtype.

    Its boolean result has no tangent.
    """
    memory_bound = True          # recomputed under the eager "balanced" strategy

    name: str
    batch_rule = batch_elementwise

    def __post_init__(self):
        if self.name not in _COMPARISONS:
            raise OpParameterError(f"Compare: unknown comparison {self.name!r}; expected "
                                   f"one of {', '.join(_COMPARISONS)}")

    def input_count(self) -> int:
        return 2

    def output_dtype(self) -> str:
        return "bool"

    def eval(self, ctx, inputs):
        xp, (x, y) = operands(inputs, self)
        compare = _COMPARISONS[self.name]
        if xp is NUMPY.xp:
            return [np.asarray(compare(x, y))]          # NumPy gives 0-d results as scalars
        return [getattr(xp, compare.__name__)(x, y)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [None]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        not_linear(self)


__all__ = ["Select", "Compare"]
