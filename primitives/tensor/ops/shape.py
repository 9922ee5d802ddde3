"""Shape primitives: broadcast_in_dim, reduce_sum, reshape, transpose.

All are linear; each transposes to another op of this family, which is how
"unbroadcasting" sums a cotangent over the axes an operand was broadcast along.

>>> op = BroadcastInDim(shape=(2, 3), broadcast_dimensions=(1,), operand_shape=(3,))
>>> op.eval(None, [np.arange(3.0)])[0].shape
(2, 3)
"""

from __future__ import annotations

import numpy as np

from tidu.graph import Local
from primitives.tensor.ops.base import LIN, LinearOp, emit, tensor_op


@tensor_op
class BroadcastInDim(LinearOp):
    """``lax.broadcast_in_dim``: operand dim ``i`` becomes result dim ``broadcast_dimensions[i]``."""

    shape: tuple
    broadcast_dimensions: tuple
    operand_shape: tuple
    name = "broadcast_in_dim"

    def params(self) -> str:
        return f"{self.operand_shape}->{self.shape}, dims={self.broadcast_dimensions}"

    def eval(self, ctx, inputs):
        expanded = [1] * len(self.shape)
        for axis, size in zip(self.broadcast_dimensions, self.operand_shape):
            expanded[axis] = size
        return [np.broadcast_to(np.reshape(inputs[0], expanded), self.shape)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        kept = set(self.broadcast_dimensions)
        summed = [axis for axis in range(len(self.shape)) if axis not in kept]
        summed += [axis for axis, size in zip(self.broadcast_dimensions, self.operand_shape)
                   if size == 1 and self.shape[axis] != 1]
        ct = cotangent_outputs[0]
        if summed:
            ct = emit(builder, ReduceSum(tuple(sorted(summed)), self.shape), [Local(ct)], LIN)
        reduced = tuple(size for axis, size in enumerate(self.shape) if axis not in summed)
        if reduced != tuple(self.operand_shape):
            ct = emit(builder, Reshape(tuple(self.operand_shape), reduced), [Local(ct)], LIN)
        return [ct]


@tensor_op
class ReduceSum(LinearOp):
    """Sum over ``axes`` of an operand of shape ``shape``."""

    axes: tuple
    shape: tuple
    name = "reduce_sum"

    def params(self) -> str:
        return f"axes={self.axes}, shape={self.shape}"

    def eval(self, ctx, inputs):
        return [np.asarray(np.sum(inputs[0], axis=self.axes))]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        kept = tuple(axis for axis in range(len(self.shape)) if axis not in self.axes)
        out_shape = tuple(self.shape[axis] for axis in kept)
        return [emit(builder, BroadcastInDim(tuple(self.shape), kept, out_shape),
                     [Local(cotangent_outputs[0])], LIN)]


@tensor_op
class Reshape(LinearOp):
    """Reshape from ``old_shape`` to ``new_shape`` (C order)."""

    new_shape: tuple
    old_shape: tuple
    name = "reshape"

    def params(self) -> str:
        return f"{self.old_shape}->{self.new_shape}"

    def eval(self, ctx, inputs):
        return [np.reshape(inputs[0], self.new_shape)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, Reshape(self.old_shape, self.new_shape),
                     [Local(cotangent_outputs[0])], LIN)]


@tensor_op
class Transpose(LinearOp):
    """Permute axes: result axis ``i`` is operand axis ``permutation[i]``."""

    permutation: tuple
    name = "transpose"

    def params(self) -> str:
        return f"{self.permutation}"

    def eval(self, ctx, inputs):
        return [np.transpose(inputs[0], self.permutation)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        inverse = tuple(int(i) for i in np.argsort(self.permutation))
        return [emit(builder, Transpose(inverse), [Local(cotangent_outputs[0])], LIN)]
