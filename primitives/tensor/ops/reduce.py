"""Reductions besides ``reduce_sum``: ``reduce_max`` and ``reduce_min``.

Their JVP sends the tangent through the arg-extremum locations; ties split it
evenly, as JAX does: the weights are ``x == broadcast(max)`` converted to the
dtype, divided by their count.

>>> op = ReduceMax(axes=(1,), shape=(2, 2), dtype="float64")
>>> op.eval(None, [np.array([[1.0, 3.0], [2.0, 2.0]])])
[array([3., 2.])]
"""

from __future__ import annotations

import numpy as np

from tidu.graph import External, Local
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.base import LIN, LIN_TF, TensorPrimitive, emit, tensor_op
from primitives.tensor.ops.select import Compare, _not_linear
from primitives.tensor.ops.shape import BroadcastInDim, ReduceSum


class _ReduceExtremum(TensorPrimitive):
    __slots__ = ()
    _fn = None

    def params(self) -> str:
        return f"axes={self.axes}, shape={self.shape}"

    def kept_axes(self) -> tuple:
        return tuple(axis for axis in range(len(self.shape)) if axis not in self.axes)

    def out_shape(self) -> tuple:
        return tuple(self.shape[axis] for axis in self.kept_axes())

    def eval(self, ctx, inputs):
        return [np.asarray(type(self)._fn(inputs[0], axis=self.axes))]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if not np.issubdtype(np.dtype(self.dtype), np.inexact):
            return [None]
        back = BroadcastInDim(tuple(self.shape), self.kept_axes(), self.out_shape())
        extremum = emit(builder, back, [External(primal_outputs[0])])
        hits = emit(builder, Compare("eq"), [External(primal_inputs[0]), Local(extremum)])
        hits = emit(builder, ew.ConvertElementType(self.dtype, "bool"), [Local(hits)])
        count = emit(builder, ReduceSum(self.axes, tuple(self.shape)), [Local(hits)])
        weights = emit(builder, ew.div, [Local(hits), Local(emit(builder, back, [Local(count)]))])
        weighted = emit(builder, ew.mul, [Local(tangent_inputs[0]), Local(weights)], LIN_TF)
        return [emit(builder, ReduceSum(self.axes, tuple(self.shape)), [Local(weighted)], LIN)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        _not_linear(self)


@tensor_op
class ReduceMax(_ReduceExtremum):
    """``np.max`` over ``axes`` of an operand of ``shape`` and ``dtype`` (``lax.reduce_max``)."""

    axes: tuple
    shape: tuple
    dtype: str
    name = "reduce_max"
    _fn = staticmethod(np.max)


@tensor_op
class ReduceMin(_ReduceExtremum):
    """``np.min`` over ``axes`` of an operand of ``shape`` and ``dtype`` (``lax.reduce_min``)."""

    axes: tuple
    shape: tuple
    dtype: str
    name = "reduce_min"
    _fn = staticmethod(np.min)
