"""Slicing, padding, reversing, concatenation and splitting, gather and scatter-add.

All are linear in their array operand; each transposes to another op here:
``Slice`` <-> ``Pad`` (zero padding), ``Rev`` to itself, ``Concatenate`` to
``Slice``s, ``Split`` (one op, one output per piece) to ``Concatenate``, and
``Gather`` (integer-array indexing along one axis, the index array a
non-differentiable second input) <-> ``ScatterAdd`` (``np.add.at``).

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
"""

from __future__ import annotations

import numpy as np

from tidu import ADRuleError, ADRuleKind
from tidu.graph import External, Linearized, Local
from primitives.tensor.ops.base import LIN, LIN_TF, LinearOp, TensorPrimitive, emit, linear_mask, \
    tensor_op
from primitives.tensor.ops.select import zeros


def slice_length(start: int, limit: int, stride: int) -> int:
    return max(0, (limit - start + stride - 1) // stride)


# --- slice and pad ----------------------------------------------------------------------


@tensor_op
class Slice(LinearOp):
    """``x[start:limit:stride, ...]`` of an operand of ``shape`` (``lax.slice``: ``0 <= start <=
    limit <= size``, positive strides). Transposes to a zero ``Pad``."""

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

    def eval(self, ctx, inputs):
        return [inputs[0][tuple(slice(*p) for p in zip(self.starts, self.limits, self.strides))]]

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


@tensor_op
class Pad(LinearOp):
    """Zero padding of an operand of ``shape``: ``low``/``high`` zeros at each end of every axis
    and ``interior`` zeros between neighbours (``lax.pad`` with non-negative widths and a zero
    value). Transposes to a ``Slice``."""

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

    def eval(self, ctx, inputs):
        x = inputs[0]
        out = np.zeros(self.out_shape(), dtype=x.dtype)
        out[self._window()] = x
        return [out]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        window = self._window()
        op = Slice(tuple(w.start for w in window), tuple(w.stop for w in window),
                   tuple(w.step for w in window), self.out_shape())
        return [emit(builder, op, [Local(cotangent_outputs[0])], LIN)]


@tensor_op
class Rev(LinearOp):
    """Reverse the order of elements along ``axes`` (``lax.rev``); its own transpose."""

    axes: tuple
    name = "rev"

    def eval(self, ctx, inputs):
        return [np.flip(inputs[0], self.axes)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, self, [Local(cotangent_outputs[0])], LIN)]


# --- concatenate ------------------------------------------------------------------------


@tensor_op
class Concatenate(TensorPrimitive):
    """``np.concatenate`` along ``axis`` of operands of ``shapes`` and one ``dtype``."""

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
        return [np.concatenate(inputs, axis=self.axis)]

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


@tensor_op
class Split(TensorPrimitive):
    """``lax.split``: an operand of ``shape`` and ``dtype`` cut along ``axis`` into
    consecutive pieces of ``sizes`` (summing to ``shape[axis]``), one output each.

    One op rather than a ``Slice`` per piece, so that its transpose is one
    ``Concatenate`` (zeros for pieces without a cotangent; one ``Pad`` when a single
    piece has one), not a full-size ``Pad`` per piece: reverse mode through ``k``
    pieces costs the operand's size, not ``k`` times it.
    """

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
        return np.split(inputs[0], np.cumsum(self.sizes[:-1], dtype=np.intp), axis=self.axis)

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
        if linear_mask(self, role) != (True, False):
            raise ADRuleError(self.name, ADRuleKind.TRANSPOSE,
                              f"{self.name} is linear in its first input only")
        return [emit(builder, other, [Local(cotangent_outputs[0]), inputs[1]], LIN_TF), None]


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
        return [np.take(inputs[0], inputs[1], axis=self.axis)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        other = ScatterAdd(self.axis, self.shape, self.index_shape)
        return self._transpose(builder, cotangent_outputs, inputs, role, other)


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
        updates, indices = inputs
        out = np.zeros(self.shape, dtype=updates.dtype)
        np.add.at(out, (slice(None),) * self.axis + (indices,), updates)
        return [out]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        other = Gather(self.axis, self.shape, self.index_shape)
        return self._transpose(builder, cotangent_outputs, inputs, role, other)
