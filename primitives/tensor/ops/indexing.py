"""Slicing, padding, reversing, concatenation and splitting, gather and scatter-add.

All are linear in their array operand; each transposes to another op here:
``Slice`` <-> ``Pad`` (zero padding), ``Rev`` to itself, ``Concatenate`` to
``Slice``s, ``Split`` (one op, one output per piece) to ``Concatenate``, and
``Gather`` (integer-array indexing along one axis, the index array a
non-differentiable second input) <-> ``ScatterAdd`` (``np.add.at``). The
scatter-add is outside the Array API standard: each library's namespace has its
``scatter_add`` (:func:`..backends.define`, at the end of this module).

>>> Slice((1,), (5,), (2,), (6,)).eval(None, [np.arange(6.0)])
[array([1., 3.])]
>>> Pad((1,), (0,), (1,), (2,)).eval(None, [np.array([1.0, 2.0])])
[array([0., 1., 0., 2.])]
>>> Split(0, (1, 2), (3,), "float64").eval(None, [np.arange(3.0)])
[array([0.]), array([1., 2.])]
>>> Gather(0, (3,), (2,)).eval(None, [np.array([1.0, 2.0, 3.0]), np.array([2, 2])])
[array([3., 3.])]
>>> ScatterAdd(0, (3,), (2,)).eval(None, [np.array([1.0, 1.0]), np.array([2, 2])])
[array([0., 0., 2.])]

It imports :mod:`.base`, :mod:`.shape`, :mod:`.constants` and :mod:`.elementwise`,
of :mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

import functools
import string

import numpy as np

from tidu import input_role
from tidu.graph import PRIMARY, External, Linearized, Local
from primitives.tensor.backends import (NUMPY, define, device_of, library_of, numpy_dtype,
                                        operands, to_host, to_library)
from primitives.tensor.errors import TensorIndexError
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.base import (
    LIN,
    LIN_TF,
    LinearOp,
    TensorPrimitive,
    check_linear_in_first,
    emit,
    linear_mask,
    shift_axis,
    tensor_op,
    with_batch,
)
from primitives.tensor.ops.constants import constant, zeros
from primitives.tensor.ops.shape import (BroadcastInDim, Reshape, batch_elementwise,
                                         broadcast_batch, move_batch_axis)


def slice_length(start: int, limit: int, stride: int) -> int:
    return max(0, (limit - start + stride - 1) // stride)


# --- batching helpers -------------------------------------------------------------------


def output_role(role):
    """The role of one-input work on the output of an op with ``role``: linear work if the
    op is."""
    return PRIMARY if role is PRIMARY else LIN


def batched_at(builder, ref, axis, target: int, axis_size: int, role, index: int):
    """Input ``index`` of an op with ``role`` with its batch axis at ``target``: moved there
    from ``axis``, or broadcast if it has none (``axis`` ``None``)."""
    if axis is None:
        return broadcast_batch(builder, ref, target, axis_size, role, index)
    return move_batch_axis(builder, ref, axis, target, role, index)


# --- slice and pad ----------------------------------------------------------------------


@tensor_op
class Slice(LinearOp):
    """``x[start:limit:stride, ...]`` of an operand of ``shape`` (``lax.slice``: ``0 <= start <=
    limit <= size``, positive strides). Transposes to a zero ``Pad``."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    starts: tuple
    limits: tuple
    strides: tuple
    shape: tuple
    name = "slice"

    def params(self) -> str:
        parts = [f"{s}:{l}" + (f":{st}" if st != 1 else "")
                 for s, l, st in zip(self.starts, self.limits, self.strides)]
        return f"[{', '.join(parts)}] of {self.shape}"

    def out_shape(self) -> tuple:
        return tuple(slice_length(*p) for p in zip(self.starts, self.limits, self.strides))

    @functools.cached_property
    def _index(self) -> tuple:
        """The NumPy index of the slice (made once per op: a program runs it again and again)."""
        return tuple(slice(*p) for p in zip(self.starts, self.limits, self.strides))

    def eval(self, ctx, inputs):
        return [inputs[0][self._index]]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        low, high, interior = [], [], []
        for size, start, stride, n in zip(self.shape, self.starts, self.strides, self.out_shape()):
            if n == 0:
                low.append(size), high.append(0), interior.append(0)
                continue
            last = start + (n - 1) * stride
            low.append(start), high.append(size - 1 - last), interior.append(stride - 1)
        pad = Pad(tuple(low), tuple(high), tuple(interior), self.out_shape())
        return [emit(builder, pad, [Local(cotangent_outputs[0])], LIN)]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        [axis] = axes                           # the whole batch axis, in place
        op = Slice(with_batch(self.starts, axis, 0), with_batch(self.limits, axis, axis_size),
                   with_batch(self.strides, axis, 1), with_batch(self.shape, axis, axis_size))
        return builder.add_primitive(op, inputs, role), [axis]


@tensor_op
class Pad(LinearOp):
    """Zero padding of an operand of ``shape``: ``low``/``high`` zeros at each end of every axis
    and ``interior`` zeros between neighbours (``lax.pad`` with non-negative widths and a zero
    value). Transposes to a ``Slice``."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    low: tuple
    high: tuple
    interior: tuple
    shape: tuple
    name = "pad"

    def params(self) -> str:
        return f"low={self.low}, high={self.high}, interior={self.interior}, shape={self.shape}"

    def out_shape(self) -> tuple:
        return tuple(lo + hi + n + max(n - 1, 0) * inner
                     for lo, hi, inner, n in zip(self.low, self.high, self.interior, self.shape))

    def _window(self) -> tuple:
        return tuple(slice(lo, lo + max(n - 1, 0) * (inner + 1) + (1 if n else 0), inner + 1)
                     for lo, inner, n in zip(self.low, self.interior, self.shape))

    @functools.cached_property
    def _layout(self) -> tuple:
        """``(out_shape(), _window())``, made once per op: a program runs it again and again."""
        return self.out_shape(), self._window()

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        out_shape, window = self._layout
        if xp is NUMPY.xp:
            out = np.zeros(out_shape, dtype=x.dtype)
            out[window] = x
            return [out]
        out = xp.zeros(out_shape, dtype=numpy_dtype(x.dtype), device=device_of(x))
        if 0 not in self.shape:             # (Dask refuses to write an empty array)
            out[window] = x                 # into a fresh array: Dask records it lazily
        return [out]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        window = self._window()
        op = Slice(tuple(w.start for w in window), tuple(w.stop for w in window),
                   tuple(w.step for w in window), self.out_shape())
        return [emit(builder, op, [Local(cotangent_outputs[0])], LIN)]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        [axis] = axes                           # no padding along the batch axis
        op = Pad(with_batch(self.low, axis, 0), with_batch(self.high, axis, 0),
                 with_batch(self.interior, axis, 0), with_batch(self.shape, axis, axis_size))
        return builder.add_primitive(op, inputs, role), [axis]


@tensor_op
class Rev(LinearOp):
    """Reverse the order of elements along ``axes`` (``lax.rev``); its own transpose."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    axes: tuple
    name = "rev"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        return [xp.flip(x, axis=self.axes)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, self, [Local(cotangent_outputs[0])], LIN)]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        [axis] = axes
        flipped = tuple(shift_axis(self, a, axis) for a in self.axes)
        return builder.add_primitive(Rev(flipped), inputs, role), [axis]


# --- concatenate ------------------------------------------------------------------------


@tensor_op
class Concatenate(TensorPrimitive):
    """``np.concatenate`` along ``axis`` of operands of ``shapes`` and one ``dtype``."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    axis: int
    shapes: tuple
    dtype: str
    name = "concatenate"

    def params(self) -> str:
        return f"axis={self.axis}, shapes={self.shapes}"

    def input_count(self) -> int:
        return len(self.shapes)

    def out_shape(self) -> tuple:
        shape = list(self.shapes[0])
        shape[self.axis] = sum(s[self.axis] for s in self.shapes)
        return tuple(shape)

    def eval(self, ctx, inputs):
        xp, inputs = operands(inputs, self)
        return [xp.concat(inputs, axis=self.axis)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        refs = [Local(t) if t is not None else Local(zeros(builder, shape, self.dtype))
                for t, shape in zip(tangent_inputs, self.shapes)]
        mask = tuple(t is not None for t in tangent_inputs)
        return [emit(builder, self, refs, Linearized(mask))]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        mask = linear_mask(self, role)
        out_shape = self.out_shape()
        ct = Local(cotangent_outputs[0])
        results, offset = [], 0
        for shape, linear in zip(self.shapes, mask):
            size = shape[self.axis]
            if linear:
                starts = tuple(offset if a == self.axis else 0 for a in range(len(out_shape)))
                limits = tuple(offset + size if a == self.axis else n
                               for a, n in enumerate(out_shape))
                op = Slice(starts, limits, (1,) * len(out_shape), out_shape)
                results.append(emit(builder, op, [ct], LIN))
            else:
                results.append(None)
            offset += size
        return results

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        # the first batched operand's batch axis; the others moved there, shared ones broadcast
        target = next(axis for axis in axes if axis is not None)
        refs = [batched_at(builder, ref, axis, target, axis_size, role, i)
                for i, (ref, axis) in enumerate(zip(inputs, axes))]
        shapes = tuple(with_batch(shape, target, axis_size) for shape in self.shapes)
        op = Concatenate(shift_axis(self, self.axis, target), shapes, self.dtype)
        return builder.add_primitive(op, refs, role), [target]


@tensor_op
class Split(TensorPrimitive):
    """``lax.split``: an operand of ``shape`` and ``dtype`` cut along ``axis`` into
    consecutive pieces of ``sizes`` (summing to ``shape[axis]``), one output each.

    One op rather than a ``Slice`` per piece, so that its transpose is one
    ``Concatenate`` (zeros for pieces without a cotangent; one ``Pad`` when a single
    piece has one), not a full-size ``Pad`` per piece: reverse mode through ``k``
    pieces costs the operand's size, not ``k`` times it.
    """
    memory_bound = True          # recomputed under the eager "balanced" strategy

    axis: int
    sizes: tuple
    shape: tuple
    dtype: str
    name = "split"

    def params(self) -> str:
        return f"axis={self.axis}, sizes={self.sizes}, shape={self.shape}"

    def output_count(self) -> int:
        return len(self.sizes)

    def piece_shapes(self) -> tuple:
        return tuple(self.shape[:self.axis] + (size,) + self.shape[self.axis + 1:]
                     for size in self.sizes)

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:
            return np.split(x, np.cumsum(self.sizes[:-1], dtype=np.intp), axis=self.axis)
        lead, start, pieces = (slice(None),) * self.axis, 0, []
        for size in self.sizes:
            pieces.append(x[lead + (slice(start, start + size),)])
            start += size
        return pieces

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if tangent_inputs[0] is None:
            return [None] * len(self.sizes)
        return builder.add_primitive(self, [Local(tangent_inputs[0])], LIN)

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        shapes = self.piece_shapes()
        present = [i for i, ct in enumerate(cotangent_outputs) if ct is not None]
        if len(present) == 1:                       # one piece: pad it with zeros, no copies
            (i,) = present
            before, after = sum(self.sizes[:i]), sum(self.sizes[i + 1:])
            ndim = len(self.shape)
            pad = Pad(tuple(before if a == self.axis else 0 for a in range(ndim)),
                      tuple(after if a == self.axis else 0 for a in range(ndim)),
                      (0,) * ndim, shapes[i])
            return [emit(builder, pad, [Local(cotangent_outputs[i])], LIN)]
        refs = [Local(ct) if ct is not None else Local(zeros(builder, shape, self.dtype))
                for ct, shape in zip(cotangent_outputs, shapes)]
        mask = tuple(ct is not None for ct in cotangent_outputs)
        return [emit(builder, Concatenate(self.axis, shapes, self.dtype), refs, Linearized(mask))]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        [axis] = axes
        op = Split(shift_axis(self, self.axis, axis), self.sizes,
                   with_batch(self.shape, axis, axis_size), self.dtype)
        return builder.add_primitive(op, inputs, role), [axis] * len(self.sizes)


# --- index checks ----------------------------------------------------------------------


def checked_indices(index, size: int, axis: int):
    """NumPy integer ``index`` into an axis of ``size`` made non-negative (``i + size`` for
    ``-size <= i < 0``) as ``intp``; an index out of range is NumPy's ``IndexError``.

    >>> checked_indices(np.array([-1, 0]), 3, 0)
    array([2, 0])
    >>> checked_indices(np.array([-100], dtype=np.int8), 200, 0)
    array([100])
    """
    index = np.asarray(index)
    # (the ufuncs' own reductions: ``index.min()`` runs NumPy's Python-level wrapper first)
    if index.size and index.dtype.kind in "iu" and 0 <= np.minimum.reduce(index, axis=None) \
            and np.maximum.reduce(index, axis=None) < size:
        return index.astype(np.intp)        # in range already (the usual case): a fresh copy
    bad = (index < -size) | (index >= size)
    if bad.any():
        raise TensorIndexError(f"index {index[bad].flat[0]} is out of bounds for axis {axis} "
                               f"with size {size}")
    index = index.astype(np.intp, copy=False)   # (i + size may not fit a narrower type: int8)
    return np.where(index < 0, index + size, index)


@tensor_op
class CheckIndex(TensorPrimitive):
    """Integer indices into an axis of ``size`` checked and made non-negative when the program
    runs (:func:`checked_indices`): under ``jit`` an index out of range raises ``IndexError``
    on the call that passes it, as NumPy does. Index values are data, not parameters, and have
    no derivative.

    >>> CheckIndex(3, 0).eval(None, [np.array([-1, 2])])
    [array([2, 2])]
    """

    size: int
    axis: int
    name = "check_index"
    batch_rule = batch_elementwise

    def eval(self, ctx, inputs):
        xp, (index,) = operands(inputs, self)
        if xp is NUMPY.xp:
            return [checked_indices(index, self.size, self.axis)]
        if xp.name == "dask":                   # checked block by block, when computed
            return [index.map_blocks(checked_indices, self.size, self.axis, dtype=np.intp)]
        checked = checked_indices(to_host(index), self.size, self.axis)
        return [to_library(checked, library_of(index), index)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [None]


# --- gather and scatter-add -------------------------------------------------------------


class _IndexedLinear(TensorPrimitive):
    """Ops linear in input 0 with a constant integer index array as input 1."""

    __slots__ = ()

    def input_count(self) -> int:
        return 2

    def params(self) -> str:
        return f"axis={self.axis}, shape={self.shape}, index_shape={self.index_shape}"

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if tangent_inputs[0] is None:
            return [None]
        return [emit(builder, self, [Local(tangent_inputs[0]), External(primal_inputs[1])],
                     LIN_TF)]

    def _transpose(self, builder, cotangent_outputs, inputs, role, other):
        check_linear_in_first(self, role)
        return [emit(builder, other, [Local(cotangent_outputs[0]), inputs[1]], LIN_TF), None]

    def _flat_indices(self, builder, indices, axis: int, axis_size: int) -> Local:
        """Batched indices into the batch of operands merged with the indexed axis: example
        ``b``'s indices, batch axis ``axis`` moved to the front, plus ``b * shape[self.axis]``."""
        indices = move_batch_axis(builder, indices, axis, 0, PRIMARY, 1)
        batched = (axis_size,) + tuple(self.index_shape)
        offsets = constant(builder, np.arange(axis_size, dtype=np.intp) * self.shape[self.axis])
        offsets = emit(builder, BroadcastInDim(batched, (0,), (axis_size,)), [offsets])
        return Local(emit(builder, ew.add, [indices, Local(offsets)]))

    def _merged_shape(self, axis_size: int) -> tuple:
        """``shape`` with a batch of ``axis_size`` merged into the indexed axis."""
        return (self.shape[:self.axis] + (axis_size * self.shape[self.axis],)
                + self.shape[self.axis + 1:])


@tensor_op
class Gather(_IndexedLinear):
    """``np.take(x, indices, axis)`` for ``x`` of ``shape`` and integer ``indices`` of
    ``index_shape`` (in range): the result has shape
    ``shape[:axis] + index_shape + shape[axis + 1:]``. Transposes to ``ScatterAdd``."""

    axis: int
    shape: tuple
    index_shape: tuple
    name = "gather"

    def eval(self, ctx, inputs):
        xp, (x, indices) = operands(inputs, self)
        if xp is NUMPY.xp:                      # np.take's method, without its wrapper
            return [x.take(indices, axis=self.axis)]
        # the standard's take wants 1-d indices: the index axes are flattened and restored
        taken = xp.take(x, xp.reshape(indices, (-1,)), axis=self.axis)
        shape = self.shape
        return [xp.reshape(taken, shape[:self.axis] + tuple(self.index_shape)
                           + shape[self.axis + 1:])]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        other = ScatterAdd(self.axis, self.shape, self.index_shape)
        return self._transpose(builder, cotangent_outputs, inputs, role, other)

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        (x, indices), (x_axis, index_axis) = inputs, axes
        axis, shape, k = self.axis, self.shape, len(self.index_shape)
        if index_axis is None:                  # one index array: gather from each operand
            op = Gather(axis + (x_axis <= axis), with_batch(shape, x_axis, axis_size),
                        self.index_shape)
            return builder.add_primitive(op, inputs, role), [x_axis if x_axis <= axis
                                                              else x_axis - 1 + k]
        if x_axis is None:                      # one operand: gather a batch of index arrays
            op = Gather(axis, shape, with_batch(self.index_shape, index_axis, axis_size))
            return builder.add_primitive(op, inputs, role), [axis + index_axis]
        # example b's operand is block b of the indexed axis; its indices are offset to it
        x = move_batch_axis(builder, x, x_axis, axis, role, 0)
        merged = self._merged_shape(axis_size)
        x = Local(emit(builder, Reshape(merged, with_batch(shape, axis, axis_size)), [x],
                       input_role(role, 0)))
        flat = self._flat_indices(builder, indices, index_axis, axis_size)
        op = Gather(axis, merged, (axis_size,) + tuple(self.index_shape))
        return builder.add_primitive(op, [x, flat], role), [axis]


@tensor_op
class ScatterAdd(_IndexedLinear):
    """Zeros of ``shape`` with ``updates`` added at ``indices`` along ``axis`` (``np.add.at``;
    repeated indices accumulate). ``updates`` has ``Gather``'s result shape; transposes to
    ``Gather``."""

    axis: int
    shape: tuple
    index_shape: tuple
    name = "scatter_add"

    def eval(self, ctx, inputs):
        xp, (updates, indices) = operands(inputs, self)
        return [xp.scatter_add(updates, indices, self.axis, self.shape)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        other = Gather(self.axis, self.shape, self.index_shape)
        return self._transpose(builder, cotangent_outputs, inputs, role, other)

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        (updates, indices), (u_axis, index_axis) = inputs, axes
        axis, shape, k = self.axis, self.shape, len(self.index_shape)
        if index_axis is None:                  # one index array: scatter each example's updates
            if axis < u_axis < axis + k:        # the batch axis among the index axes: in front
                updates = move_batch_axis(builder, updates, u_axis, axis, role, 0)
                u_axis = axis
            out_axis = u_axis if u_axis <= axis else u_axis - k + 1
            op = ScatterAdd(axis + (u_axis <= axis), with_batch(shape, out_axis, axis_size),
                            self.index_shape)
            return builder.add_primitive(op, [updates, indices], role), [out_axis]
        # example b scatters into block b of the indexed axis: its indices offset to it
        updates = batched_at(builder, updates, u_axis, axis, axis_size, role, 0)
        flat = self._flat_indices(builder, indices, index_axis, axis_size)
        merged = self._merged_shape(axis_size)
        op = ScatterAdd(axis, merged, (axis_size,) + tuple(self.index_shape))
        [out] = builder.add_primitive(op, [updates, flat], role)
        out = emit(builder, Reshape(with_batch(shape, axis, axis_size), merged), [Local(out)],
                   output_role(role))
        return [out], [axis]


# np.add.at for each library: zeros of ``shape`` with ``updates`` (of Gather's result shape)
# added at ``indices`` along ``axis``, repeated indices accumulating


def _numpy_scatter_add(updates, indices, axis: int, shape: tuple):
    out = np.zeros(shape, dtype=updates.dtype)
    np.add.at(out, (slice(None),) * axis + (indices,), updates)
    return out


def _torch_scatter_add(updates, indices, axis: int, shape: tuple):
    import torch

    indices = indices.reshape(-1)
    rows = updates.reshape(shape[:axis] + (indices.shape[0],) + shape[axis + 1:])
    out = torch.zeros(shape, dtype=updates.dtype, device=updates.device)
    return out.index_add_(axis, indices, rows)


def _dask_scatter_add(updates, indices, axis: int, shape: tuple):
    """One ``np.add.at`` per block of the axes off the indexed ones: a block sees all its
    updates (the index axes concatenated) and makes its part of the result whole along
    ``axis``; so the work stays lazy and split like ``updates``, and adds in NumPy's order."""
    import dask.array as da

    k = indices.ndim
    names = string.ascii_letters[:updates.ndim + 1]
    before, indexed, after, new = (names[:axis], names[axis:axis + k],
                                   names[axis + k:updates.ndim], names[-1])

    def block(u, i):
        return _numpy_scatter_add(u, i, axis, u.shape[:axis] + (shape[axis],) + u.shape[axis + k:])
    return da.blockwise(block, before + new + after, updates, before + indexed + after,
                        indices, indexed, new_axes={new: shape[axis]}, concatenate=True,
                        meta=np.empty((0,) * len(shape), dtype=updates.dtype))


def _cupy_scatter_add(updates, indices, axis: int, shape: tuple):
    import cupy

    with updates.device:
        out = cupy.zeros(shape, dtype=updates.dtype)
    cupy.add.at(out, (slice(None),) * axis + (indices,), updates)
    return out


define("scatter_add", numpy=_numpy_scatter_add, torch=_torch_scatter_add,
       dask=_dask_scatter_add, cupy=_cupy_scatter_add)
