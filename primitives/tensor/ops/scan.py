"""Scans and sorting: cumulative sums and products, a linear recurrence, sort, argsort and
partitions.

``Cumsum`` is linear: it transposes to the cumulative sum run the other way.

``Cumprod``'s JVP is the first-order linear recurrence
``dy[i] = x[i] * dy[i-1] + y[i-1] * dx[i]`` (``LinearRecurrence``), which stays
exact where ``x`` has zeros (the shortcut ``dy = y * cumsum(dx / x)`` gives
``nan`` there). The recurrence is linear in its second operand and transposes to
the recurrence run the other way; its JVP in the coefficients is another
recurrence, so derivatives of every order stay exact.

``Sort``'s JVP gathers the tangent by the stable sort permutation
(``SortPermutation``: positions in the flattened operand), so tied values take
the tangents of their entries in NumPy's stable order; the gather transposes to
a scatter-add. ``Argsort`` and ``SortPermutation`` have integer results and no
tangent; so do ``Argpartition`` (NumPy's) and ``PartitionOrder`` (the indices that
gather an operand into NumPy's ``partition``, whose derivative is that gather).

On other libraries than NumPy the ops compute through the inputs' namespace
(:mod:`..backends`). Dask's cumulative sums and products are its chunked scans;
it has no sort nor recurrence of its own, so ``Sort``, ``Argsort``,
``SortPermutation`` and ``LinearRecurrence`` make each block whole along the
op's axis (still lazy, and split along the other axes).

>>> Cumsum(0).eval(None, [np.array([1.0, 2.0, 3.0])])
[array([1., 3., 6.])]
>>> LinearRecurrence(0, (3,), "float64").eval(None, [np.array([5.0, 2.0, 0.5]),
...                                                   np.array([1.0, 1.0, 1.0])])
[array([1. , 3. , 2.5])]

It imports :mod:`.base`, :mod:`.shape`, :mod:`.constants`, :mod:`.elementwise` and
:mod:`.indexing`, of :mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from tidu import ADRuleError, ADRuleKind
from tidu.graph import External, Local
from primitives.tensor.backends import NUMPY, define, device_of, library_of, operands
from primitives.tensor.core import dtype_of
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.base import (LIN, LIN_FT, LIN_TF, LIN_TT, LinearOp, TensorPrimitive,
                                        check_ordered, emit, is_complex_dtype, is_float_dtype,
                                        linear_mask, not_linear, shift_axis, tensor_op,
                                        with_batch)
from primitives.tensor.ops.constants import Full
from primitives.tensor.ops.indexing import Concatenate, Gather, Slice
from primitives.tensor.ops.shape import Reshape, batch_all_at, move_batch_axis


def _batch_along_axis(self, builder, inputs, axes, role, axis_size, ctx):
    """The batch rule of an op along ``axis`` (with the operand's ``shape``, if it has one):
    the axis shifts past the batch axis, which stays; operands share one batch axis."""
    axis = next(a for a in axes if a is not None)
    refs = batch_all_at(builder, inputs, axes, role, axis_size, axis)
    changes = {"axis": shift_axis(self, self.axis, axis)}
    if hasattr(self, "shape"):
        changes["shape"] = with_batch(self.shape, axis, axis_size)
    return builder.add_primitive(replace(self, **changes), refs, role), [axis]


def _along(xp, scan, x, axis: int, reverse: bool, **options):
    """``scan(x, axis=axis, **options)`` run from the end of ``axis`` when ``reverse``."""
    if not reverse:
        return scan(x, axis=axis, **options)
    return xp.flip(scan(xp.flip(x, axis=axis), axis=axis, **options), axis=axis)


def previous_along(builder, value, axis: int, shape: tuple, dtype: str, reverse: bool,
                   fill) -> Local | External:
    """Emit (primal work) ``value`` shifted one step along ``axis`` in scan order: entry ``i``
    is ``value[i-1]`` (``value[i+1]`` when ``reverse``), ``fill`` where there is none.

    ``value`` is a ``Local`` or ``External`` reference; returns a reference.
    """
    n = shape[axis]
    if n == 0:
        return value
    edge_shape = tuple(1 if a == axis else s for a, s in enumerate(shape))
    edge = Local(emit(builder, Full(edge_shape, dtype, fill), []))
    if n == 1:
        return edge
    starts = tuple(int(reverse) if a == axis else 0 for a in range(len(shape)))
    limits = tuple(n - 1 + int(reverse) if a == axis else s for a, s in enumerate(shape))
    body = Local(emit(builder, Slice(starts, limits, (1,) * len(shape), shape), [value]))
    body_shape = tuple(n - 1 if a == axis else s for a, s in enumerate(shape))
    parts, shapes = ([body, edge], (body_shape, edge_shape)) if reverse else \
        ([edge, body], (edge_shape, body_shape))
    return Local(emit(builder, Concatenate(axis, shapes, dtype), parts))


# --- cumulative sum and product -----------------------------------------------------------


@tensor_op
class Cumsum(LinearOp):
    """``np.cumsum`` along ``axis`` (from the end when ``reverse``), in the operand's dtype.

    Transposes to the cumulative sum in the other direction (``lax.cumsum``).
    """

    axis: int
    reverse: bool = False
    name = "cumsum"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:
            return [_along(xp, np.cumsum, x, self.axis, self.reverse, dtype=x.dtype)]
        # other libraries sum integers in a wider type (PyTorch has no uint64 kernels):
        # cast back, they wrap to the bits of NumPy's sum in x's dtype
        scanned = _along(xp, xp.cumulative_sum, x, self.axis, self.reverse)
        return [xp.astype(scanned, dtype_of(x), copy=False)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, Cumsum(self.axis, not self.reverse),
                     [Local(cotangent_outputs[0])], LIN)]

    batch_rule = _batch_along_axis


@tensor_op
class Cumprod(TensorPrimitive):
    """``np.cumprod`` along ``axis`` (from the end when ``reverse``) of an operand of ``shape``
    and ``dtype``; exact derivatives where the operand has zeros (see the module docstring)."""

    axis: int
    shape: tuple
    dtype: str
    reverse: bool = False
    name = "cumprod"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:
            return [_along(xp, np.cumprod, x, self.axis, self.reverse, dtype=x.dtype)]
        scanned = _along(xp, xp.cumulative_prod, x, self.axis, self.reverse)
        return [xp.astype(scanned, dtype_of(x), copy=False)]     # as Cumsum's

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if not is_float_dtype(self.dtype):
            return [None]
        # dy[i] = x[i] * dy[i-1] + y[i-1] * dx[i], with y[-1] = 1
        y_before = previous_along(builder, External(primal_outputs[0]), self.axis, self.shape,
                                  self.dtype, self.reverse, 1)
        increments = emit(builder, ew.mul, [Local(tangent_inputs[0]), y_before], LIN_TF)
        recurrence = LinearRecurrence(self.axis, self.shape, self.dtype, self.reverse)
        return [emit(builder, recurrence, [External(primal_inputs[0]), Local(increments)],
                     LIN_FT)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        not_linear(self)

    batch_rule = _batch_along_axis


@tensor_op
class LinearRecurrence(TensorPrimitive):
    """``z[i] = a[i] * z[i-1] + b[i]`` along ``axis`` with ``z[-1] = 0`` (``z[i+1]`` and
    ``z[n] = 0`` when ``reverse``), for operands ``a`` and ``b`` of ``shape`` and ``dtype``.

    Linear in ``b``: the transpose runs the recurrence the other way with the
    coefficients shifted one step and conjugated. A sequential loop over ``axis``.
    """

    axis: int
    shape: tuple
    dtype: str
    reverse: bool = False
    name = "linear_recurrence"

    def input_count(self) -> int:
        return 2

    def eval(self, ctx, inputs):
        xp, (a, b) = operands(inputs, self)
        return [xp.linear_recurrence(a, b, self.axis, self.reverse)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        # dz[i] = a[i] dz[i-1] + (db[i] + da[i] z[i-1]): the same recurrence
        da, db = tangent_inputs
        increments = db
        if da is not None:
            z_before = previous_along(builder, External(primal_outputs[0]), self.axis,
                                      self.shape, self.dtype, self.reverse, 0)
            from_a = emit(builder, ew.mul, [Local(da), z_before], LIN_TF)
            increments = from_a if db is None else emit(builder, ew.add,
                                                        [Local(db), Local(from_a)], LIN_TT)
        return [emit(builder, self, [External(primal_inputs[0]), Local(increments)], LIN_FT)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        if linear_mask(self, role) != (False, True):
            raise ADRuleError(self.name, ADRuleKind.TRANSPOSE,
                              "linear_recurrence is linear in its second operand only")
        # z = L b with L[i, j] = a[j+1] ... a[i]; L^H runs the other way with a shifted
        coefficients = previous_along(builder, inputs[0], self.axis, self.shape, self.dtype,
                                      not self.reverse, 0)
        if is_complex_dtype(self.dtype):
            coefficients = Local(emit(builder, ew.conj, [coefficients]))
        back = LinearRecurrence(self.axis, self.shape, self.dtype, not self.reverse)
        return [None, emit(builder, back, [coefficients, Local(cotangent_outputs[0])], LIN_FT)]

    batch_rule = _batch_along_axis


def _numpy_recurrence(a, b, axis: int, reverse: bool):
    a, b = np.moveaxis(a, axis, 0), np.moveaxis(b, axis, 0)
    if reverse:
        a, b = a[::-1], b[::-1]
    z = np.array(b, dtype=np.result_type(a, b))
    for i in range(1, len(z)):
        z[i] += a[i] * z[i - 1]
    if reverse:
        z = z[::-1]
    return np.moveaxis(z, 0, axis)


def _recurrence_in_place(a, b, axis: int, reverse: bool):
    """The loop of ``_numpy_recurrence`` on arrays that take in-place writes (PyTorch, CuPy)."""
    xp, (a, b) = operands([a, b])
    a, b = xp.moveaxis(a, axis, 0), xp.moveaxis(b, axis, 0)
    if reverse:
        a, b = xp.flip(a, axis=0), xp.flip(b, axis=0)
    z = xp.astype(b, np.result_type(dtype_of(a), dtype_of(b)), copy=True)
    for i in range(1, z.shape[0]):
        z[i] += a[i] * z[i - 1]
    if reverse:
        z = xp.flip(z, axis=0)
    return xp.moveaxis(z, 0, axis)


def _dask_recurrence(a, b, axis: int, reverse: bool):
    """NumPy's loop on each block, made whole along ``axis``: lazy, and split along the
    other axes as the operands are."""
    import dask.array as da

    dtype = np.result_type(a.dtype, b.dtype)
    return da.map_blocks(_numpy_recurrence, a.rechunk({axis: -1}), b.rechunk({axis: -1}),
                         axis=axis, reverse=reverse, dtype=dtype,
                         meta=np.empty((0,) * a.ndim, dtype=dtype))


define("linear_recurrence", numpy=_numpy_recurrence, torch=_recurrence_in_place,
       dask=_dask_recurrence, cupy=_recurrence_in_place)


# --- sorting ---------------------------------------------------------------------------------


@tensor_op
class Sort(TensorPrimitive):
    """``np.sort`` along ``axis`` of a real operand of ``shape`` and ``dtype``; the tangent
    follows the stable sort permutation."""

    axis: int
    shape: tuple
    dtype: str
    name = "sort"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is not NUMPY.xp:
            check_ordered(xp, x, self.name)
        return [xp.sort(x, axis=self.axis)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if not is_float_dtype(self.dtype):
            return [None]
        positions = emit(builder, SortPermutation(self.axis, self.shape),
                         [External(primal_inputs[0])])
        size = int(np.prod(self.shape, dtype=np.int64))
        tangent = tangent_inputs[0]
        if len(self.shape) != 1:
            tangent = emit(builder, Reshape((size,), self.shape), [Local(tangent)], LIN)
        return [emit(builder, Gather(0, (size,), self.shape), [Local(tangent), Local(positions)],
                     LIN_TF)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        not_linear(self)

    batch_rule = _batch_along_axis


class _IntegerResult(TensorPrimitive):
    """An op with an integer result: no tangent, not linear."""

    __slots__ = ()

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [None]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        not_linear(self)


@tensor_op
class SortPermutation(_IntegerResult):
    """For an operand of ``shape``: the positions in its C-order flattening of the entries of
    its stable sort along ``axis`` (``sort(x) == x.ravel()[positions]``)."""

    axis: int
    shape: tuple
    name = "sort_permutation"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:
            order = np.argsort(x, axis=self.axis, kind="stable")
            index = list(np.indices(self.shape, sparse=True))
            index[self.axis] = order
            if 0 in self.shape:
                return [np.zeros(self.shape, dtype=np.intp)]
            return [np.ravel_multi_index(tuple(index), self.shape)]
        check_ordered(xp, x, self.name)
        # the flat position is the sum over the axes of index * stride, with the stable
        # sort order for the index along ``axis``
        strides = [math.prod(self.shape[axis + 1:]) for axis in range(len(self.shape))]
        positions = xp.argsort(x, axis=self.axis, stable=True) * strides[self.axis]
        for axis, (n, stride) in enumerate(zip(self.shape, strides)):
            if axis != self.axis and n > 1:
                offsets = xp.arange(0, n * stride, stride, dtype=np.dtype(np.intp),
                                    device=device_of(x))
                along = tuple(n if a == axis else 1 for a in range(len(self.shape)))
                positions = positions + xp.reshape(offsets, along)
        return [positions]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        # with the batch axis in front, example b's positions are b * size + its own
        # positions: the remainder modulo size takes the offset off
        ref = move_batch_axis(builder, inputs[0], axes[0], 0, role, 0)
        shape = (axis_size, *self.shape)
        positions = emit(builder, SortPermutation(self.axis + 1, shape), [ref], role)
        size = int(np.prod(self.shape, dtype=np.int64))
        if size == 0 or axis_size == 1:
            return [positions], [0]
        sizes = emit(builder, Full(shape, np.dtype(np.intp).name, size), [])
        return builder.add_primitive(ew.remainder, [Local(positions), Local(sizes)], role), [0]


@tensor_op
class Argsort(_IntegerResult):
    """``np.argsort(x, axis, kind)``: integer indices, no tangent."""

    axis: int
    kind: str | None = None
    name = "argsort"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:
            return [np.argsort(x, axis=self.axis, kind=self.kind)]
        check_ordered(xp, x, self.name)
        # stable: the order of NumPy's stable kinds (its others may order ties otherwise)
        return [xp.argsort(x, axis=self.axis, stable=True)]

    batch_rule = _batch_along_axis


@tensor_op
class Argpartition(_IntegerResult):
    """``np.argpartition(x, kth, axis)`` (``kth``: non-negative positions along ``axis``):
    integer indices, no tangent. Dask's blocks are made whole along ``axis`` and
    partitioned by NumPy (lazily); other libraries have no selection algorithm: the indices
    of a stable sort (a valid partition for every ``kth``, not NumPy's order).

    >>> Argpartition(0, (1,)).eval(None, [np.array([3.0, 1.0, 2.0])])[0][1]
    np.int64(2)
    """

    axis: int
    kth: tuple
    name = "argpartition"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:
            return [np.argpartition(x, self.kth, axis=self.axis)]
        if library_of(x).name == "dask":
            return [_by_whole_blocks(np.argpartition, x, self.kth, self.axis)]
        check_ordered(xp, x, self.name)
        return [xp.argsort(x, axis=self.axis, stable=True)]

    batch_rule = _batch_along_axis


@tensor_op
class PartitionOrder(_IntegerResult):
    """Indices along ``axis`` that gather ``x`` into ``np.partition(x, kth, axis)`` exactly
    (NumPy's partition and argpartition may order the sides differently, so the indices
    are NumPy's ``partition`` matched back to ``x``'s entries: sorted alike, equal values
    in order). Dask's blocks are made whole along ``axis`` and ordered so, lazily; on
    other libraries, the stable sort's indices (a valid partition, not NumPy's order).

    >>> x = np.array([3.0, 1.0, 2.0, 0.5])
    >>> order = PartitionOrder(0, (1,)).eval(None, [x])[0]
    >>> bool(np.array_equal(x[order], np.partition(x, 1)))
    True
    """

    axis: int
    kth: tuple
    name = "partition_order"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:
            return [_partition_order(x, self.kth, self.axis)]
        if library_of(x).name == "dask":
            return [_by_whole_blocks(_partition_order, x, self.kth, self.axis)]
        check_ordered(xp, x, self.name)
        return [xp.argsort(x, axis=self.axis, stable=True)]

    batch_rule = _batch_along_axis


def _partition_order(x: np.ndarray, kth: tuple, axis: int) -> np.ndarray:
    """:class:`PartitionOrder` of a NumPy array."""
    partitioned = np.partition(x, kth, axis=axis)
    # x[by_x] and partitioned[by_partition] are the same sorted array, so the entry of x at
    # by_x[i] goes to position by_partition[i]
    by_x = np.argsort(x, axis=axis, kind="stable")
    by_partition = np.argsort(partitioned, axis=axis, kind="stable")
    order = np.empty_like(by_x)
    np.put_along_axis(order, by_partition, by_x, axis=axis)
    return order


def _by_whole_blocks(fn, x, kth: tuple, axis: int):
    """``fn(block, kth, axis=axis)`` on each block of the Dask array ``x``, its blocks made
    whole along ``axis`` first (lazily): integer indices along ``axis``."""
    return x.rechunk({axis: -1}).map_blocks(fn, kth, axis=axis, dtype=np.intp)


__all__ = ["Cumsum", "Cumprod", "LinearRecurrence", "Sort", "SortPermutation", "Argsort",
           "Argpartition", "PartitionOrder", "previous_along"]
