"""Shape primitives: broadcast_in_dim, reduce_sum, reshape, transpose, and the rank-free
move_axis, broadcast_axis, sum_axis that batch rules emit, with the batch helpers emitting them.

All are linear; each transposes to another op of this family, which is how
"unbroadcasting" sums a cotangent over the axes an operand was broadcast along.
``MoveAxis``, ``BroadcastAxis`` and ``SumAxis`` need no shapes, so a batch rule
can move or broadcast a batch axis of an operand whose shape it does not know.

>>> op = BroadcastInDim(shape=(2, 3), broadcast_dimensions=(1,), operand_shape=(3,))
>>> op.eval(None, [np.arange(3.0)])[0].shape
(2, 3)

Batch rules (:func:`tidu.batch`) share these helpers. They need no shapes (the
elementwise ops carry none): moves and broadcasts emit ``MoveAxis`` and
``BroadcastAxis`` with the role ``tidu.input_role(role, index)``, where ``role``
is the role of the op being batched and ``index`` the input's position, and
return a reference ready for ``builder.add_primitive``:

- ``move_batch_axis(builder, ref, from_axis, to_axis, role, index) -> ref``
- ``broadcast_batch(builder, ref, axis, axis_size, role, index) -> ref``
- ``batch_all_at(builder, inputs, axes, role, axis_size, axis) -> [ref, ...]``: every
  input batched along ``axis`` (moved there, or broadcast when its axis is ``None``)
- ``batch_elementwise``: the whole batch rule of an op on operands of one shape
  (``batch_rule = batch_elementwise`` in the class body)

``shift_axis`` and ``with_batch`` (:mod:`.base`) batch an op's axis and shape parameters.

It imports :mod:`.base` only, of :mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

import numpy as np

from tidu import input_role
from tidu.graph import Local
from primitives.tensor.backends import NUMPY, define, operands
from primitives.tensor.core import dtype_of
from primitives.tensor.ops.base import LIN, LinearOp, emit, shift_axis, tensor_op, with_batch


@tensor_op
class BroadcastInDim(LinearOp):
    """``lax.broadcast_in_dim``: operand dim ``i`` becomes result dim ``broadcast_dimensions[i]``."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    shape: tuple
    broadcast_dimensions: tuple
    operand_shape: tuple
    name = "broadcast_in_dim"

    def params(self) -> str:
        return f"{self.operand_shape}->{self.shape}, dims={self.broadcast_dimensions}"

    def eval(self, ctx, inputs):
        x = inputs[0]
        if type(x) is not np.ndarray and isinstance(x, np.generic):   # a 0-d op's result
            x = np.asarray(x)
        if type(x) is np.ndarray and x.flags.c_contiguous and x.shape == self.operand_shape:
            # np.broadcast_to's view, made directly: a third of its cost (the eager hot path)
            strides = [0] * len(self.shape)
            for axis, size, stride in zip(self.broadcast_dimensions, x.shape, x.strides):
                if size == self.shape[axis]:
                    strides[axis] = stride
            view = np.ndarray(self.shape, x.dtype, buffer=x, strides=strides)
            view.flags.writeable = False
            return [view]
        xp, (x,) = operands(inputs, self)
        expanded = [1] * len(self.shape)
        for axis, size in zip(self.broadcast_dimensions, self.operand_shape):
            expanded[axis] = size
        return [xp.broadcast_to(xp.reshape(x, expanded), self.shape)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [self.sum_back(builder, cotangent_outputs[0])]

    def sum_back(self, builder, ct: int) -> int:
        """The broadcast's transpose applied to ``ct`` (an id of the result's shape): summed
        over the axes the broadcast made or widened, reshaped to the operand's shape."""
        kept = set(self.broadcast_dimensions)
        summed = [axis for axis in range(len(self.shape)) if axis not in kept]
        summed += [axis for axis, size in zip(self.broadcast_dimensions, self.operand_shape)
                   if size == 1 and self.shape[axis] != 1]
        if summed:
            ct = emit(builder, ReduceSum(tuple(sorted(summed)), self.shape), [Local(ct)], LIN)
        reduced = tuple(size for axis, size in enumerate(self.shape) if axis not in summed)
        if reduced != tuple(self.operand_shape):
            ct = emit(builder, Reshape(tuple(self.operand_shape), reduced), [Local(ct)], LIN)
        return ct

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        # the result's batch axis goes right after the result axis of the operand axis
        # before the batch axis, so the broadcast dimensions stay increasing
        [axis] = axes
        dims = self.broadcast_dimensions
        out_axis = dims[axis - 1] + 1 if axis > 0 else 0
        batched = BroadcastInDim(with_batch(self.shape, out_axis, axis_size),
                                 tuple(d + (d >= out_axis) for d in dims[:axis]) + (out_axis,)
                                 + tuple(d + 1 for d in dims[axis:]),
                                 with_batch(self.operand_shape, axis, axis_size))
        return builder.add_primitive(batched, inputs, role), [out_axis]


@tensor_op
class ReduceSum(LinearOp):
    """Sum over ``axes`` of an operand of shape ``shape``."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    axes: tuple
    shape: tuple
    name = "reduce_sum"

    def params(self) -> str:
        return f"axes={self.axes}, shape={self.shape}"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:          # np.sum's own reduction, without its Python wrapper
            total = np.add.reduce(x, axis=self.axes)
            return [total if type(total) is np.ndarray else np.asarray(total)]  # a full sum: 0-d
        total = xp.sum(x, axis=self.axes)
        if dtype_of(x).kind == "u" and dtype_of(total).kind != "u":
            # PyTorch sums unsigned integers in int64 (it has no uint64 sum): NumPy's uint64
            total = xp.astype(total, np.dtype(np.uint64))
        return [total]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        kept = tuple(axis for axis in range(len(self.shape)) if axis not in self.axes)
        out_shape = tuple(self.shape[axis] for axis in kept)
        return [emit(builder, BroadcastInDim(tuple(self.shape), kept, out_shape),
                     [Local(cotangent_outputs[0])], LIN)]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        [axis] = axes
        batched = ReduceSum(tuple(shift_axis(self, a, axis) for a in self.axes),
                            with_batch(self.shape, axis, axis_size))
        return builder.add_primitive(batched, inputs, role), [axis - reduced_before(self.axes, axis)]


def reduced_before(axes, batch_axis: int) -> int:
    """How many of the reduced ``axes`` lie in front of ``batch_axis`` (of the operand):
    the batch axis of the result is that many places further left."""
    return sum(a < batch_axis for a in axes)


@tensor_op
class Reshape(LinearOp):
    """Reshape from ``old_shape`` to ``new_shape`` (C order)."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    new_shape: tuple
    old_shape: tuple
    name = "reshape"

    def params(self) -> str:
        return f"{self.old_shape}->{self.new_shape}"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if type(x) is np.ndarray:           # (the namespace's wrapper costs more than this)
            return [x.reshape(self.new_shape)]
        return [xp.reshape(x, self.new_shape)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, Reshape(self.old_shape, self.new_shape),
                     [Local(cotangent_outputs[0])], LIN)]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        # the batch axis in front, where a C-order reshape keeps examples apart
        ref = move_batch_axis(builder, inputs[0], axes[0], 0, role, 0)
        batched = Reshape((axis_size, *self.new_shape), (axis_size, *self.old_shape))
        return builder.add_primitive(batched, [ref], role), [0]


def _dask_reshape(x, shape):
    """Dask's reshape, through one flat axis where Dask refuses (it only merges or splits
    axes evenly: ``(2, 3) -> (3, 2)`` is neither), and of empty arrays."""
    import dask.array as da

    if 0 in x.shape:                        # no data to move (Dask fails on some of these)
        return da.zeros(tuple(max(n, 0) for n in shape), dtype=x.dtype)
    try:
        return da.reshape(x, shape)
    except NotImplementedError:
        return da.reshape(da.reshape(x, (-1,)), shape)


define("reshape", dask=_dask_reshape)


@tensor_op
class Transpose(LinearOp):
    """Permute axes: result axis ``i`` is operand axis ``permutation[i]``."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    permutation: tuple
    name = "transpose"

    def params(self) -> str:
        return f"{self.permutation}"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        return [xp.permute_dims(x, self.permutation)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        inverse = tuple(int(i) for i in np.argsort(self.permutation))
        return [emit(builder, Transpose(inverse), [Local(cotangent_outputs[0])], LIN)]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        # the batch axis stays where it is; the other axes permute around it
        [axis] = axes
        permuted = [shift_axis(self, p, axis) for p in self.permutation]
        permuted.insert(axis, axis)
        return builder.add_primitive(Transpose(tuple(permuted)), inputs, role), [axis]


@tensor_op
class MoveAxis(LinearOp):
    """``np.moveaxis(x, source, destination)`` for non-negative axes: needs no shape, so
    batch rules use it to move batch axes.

    >>> MoveAxis(0, 2).eval(None, [np.zeros((2, 3, 4))])[0].shape
    (3, 4, 2)
    """
    memory_bound = True          # recomputed under the eager "balanced" strategy

    source: int
    destination: int
    name = "move_axis"

    def params(self) -> str:
        return f"{self.source}->{self.destination}"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        return [xp.moveaxis(x, self.source, self.destination)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, MoveAxis(self.destination, self.source),
                     [Local(cotangent_outputs[0])], LIN)]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        # one move of the batched value: take the source axis out (the batch axis shifts
        # left if it was behind it), put it back at the destination among the other axes
        [axis] = axes
        source = shift_axis(self, self.source, axis)
        without = axis - (self.source < axis)           # the batch axis, source axis removed
        if self.destination < without:
            return builder.add_primitive(MoveAxis(source, self.destination), inputs,
                                         role), [without + 1]
        return builder.add_primitive(MoveAxis(source, self.destination + 1), inputs,
                                     role), [without]


@tensor_op
class BroadcastAxis(LinearOp):
    """A new axis of length ``size`` at ``axis``, the operand repeated along it (no shape
    needed: batch rules broadcast unbatched operands with it). Transposes to ``SumAxis``.

    >>> BroadcastAxis(1, 3).eval(None, [np.arange(2.0)])[0]
    array([[0., 0., 0.],
           [1., 1., 1.]])
    """
    memory_bound = True          # recomputed under the eager "balanced" strategy

    axis: int
    size: int
    name = "broadcast_axis"

    def params(self) -> str:
        return f"axis={self.axis}, size={self.size}"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        x = xp.expand_dims(x, axis=self.axis)
        shape = x.shape[:self.axis] + (self.size,) + x.shape[self.axis + 1:]
        return [xp.broadcast_to(x, shape)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, SumAxis(self.axis, self.size), [Local(cotangent_outputs[0])], LIN)]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        [axis] = axes
        if self.axis <= axis:                   # the new axis lands in front of the batch axis
            return builder.add_primitive(self, inputs, role), [axis + 1]
        return builder.add_primitive(BroadcastAxis(self.axis + 1, self.size), inputs,
                                     role), [axis]


@tensor_op
class SumAxis(LinearOp):
    """The sum over ``axis``, of length ``size`` (no shape needed); transposes to
    ``BroadcastAxis``.

    >>> SumAxis(0, 2).eval(None, [np.ones((2, 3))])[0]
    array([2., 2., 2.])
    """
    memory_bound = True          # recomputed under the eager "balanced" strategy

    axis: int
    size: int
    name = "sum_axis"

    def params(self) -> str:
        return f"axis={self.axis}, size={self.size}"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:                      # a full sum is a NumPy scalar: made 0-d
            return [np.asarray(np.sum(x, axis=self.axis))]
        return [xp.sum(x, axis=self.axis)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, BroadcastAxis(self.axis, self.size), [Local(cotangent_outputs[0])],
                     LIN)]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        [axis] = axes
        if axis <= self.axis:
            return builder.add_primitive(SumAxis(self.axis + 1, self.size), inputs,
                                         role), [axis]
        return builder.add_primitive(self, inputs, role), [axis - 1]


# --- batch rules -------------------------------------------------------------------------


def move_batch_axis(builder, ref, from_axis: int, to_axis: int, role, index: int):
    """``ref`` (input ``index`` of an op with ``role``) with its batch axis moved from
    ``from_axis`` to ``to_axis`` (``np.moveaxis``); ``ref`` itself when they agree."""
    if from_axis == to_axis:
        return ref
    return Local(emit(builder, MoveAxis(from_axis, to_axis), [ref], input_role(role, index)))


def broadcast_batch(builder, ref, axis: int, axis_size: int, role, index: int):
    """Unbatched ``ref`` (input ``index`` of an op with ``role``) repeated ``axis_size``
    times along a new batch axis at ``axis``."""
    return Local(emit(builder, BroadcastAxis(axis, axis_size), [ref], input_role(role, index)))


def batch_all_at(builder, inputs, axes, role, axis_size: int, axis: int) -> list:
    """Every input batched along ``axis``: moved there, or broadcast (when unbatched)."""
    return [broadcast_batch(builder, ref, axis, axis_size, role, i) if from_axis is None
            else move_batch_axis(builder, ref, from_axis, axis, role, i)
            for i, (ref, from_axis) in enumerate(zip(inputs, axes))]


def batch_spread(builder, spread: "BroadcastInDim", ref, axis, role, index: int,
                 axis_size: int, ctx) -> tuple:
    """Input ``index`` (``ref``, batched at ``axis``, or ``None``: unbatched) of an op with
    ``role``, broadcast by ``spread`` in the batched graph: ``(ref, axis)`` of the result.
    Ops that fuse a ``broadcast_in_dim`` into their work batch as the unfused ops with it."""
    role = input_role(role, index)
    if axis is None:
        return Local(emit(builder, spread, [ref], role)), None
    [out], [axis] = spread.batch_rule(builder, [ref], [axis], role, axis_size, ctx)
    return Local(out), axis


def batch_elementwise(self, builder, inputs, axes, role, axis_size, ctx):
    """The batch rule of an elementwise op whose operands have one shape (this set's
    contract): every operand batched along the first batched operand's axis."""
    axis = next(a for a in axes if a is not None)
    refs = batch_all_at(builder, inputs, axes, role, axis_size, axis)
    return builder.add_primitive(self, refs, role), [axis]
