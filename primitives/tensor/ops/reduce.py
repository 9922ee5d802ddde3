"""Reductions besides ``reduce_sum``: ``reduce_max``, ``reduce_min``, ``reduce_prod``,
``reduce_logsumexp``, ``log_softmax`` (and its tangent map as one op,
``log_softmax_linear``), ``argmax``, ``argmin``, and the square root ``std`` ends with.

The JVP of ``reduce_max``/``reduce_min`` sends the tangent through the
arg-extremum locations; ties split it evenly, as JAX does: the weights are
``x == broadcast(max)`` converted to the dtype, divided by their count.

``reduce_prod``'s derivative in ``x[j]`` is the product of the other entries,
computed as exclusive cumulative products from both sides (``before[j] *
after[j]``), never as ``prod / x[j]``: exact where ``x`` has zeros, to every
order (the cumulative products differentiate exactly, see :mod:`.scan`).

>>> op = ReduceMax(axes=(1,), shape=(2, 2), dtype="float64")
>>> op.eval(None, [np.array([[1.0, 3.0], [2.0, 2.0]])])
[array([3., 2.])]

It imports :mod:`.base`, :mod:`.shape`, :mod:`.select`, :mod:`.elementwise` and
:mod:`.scan`, of :mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

import sys

import numpy as np

from tidu.graph import External, Local
from primitives.tensor.backends import NUMPY, define, device_of, operands
from primitives.tensor.core import dtype_of
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.base import LIN, LIN_TF, LIN_TT, FusedTangent, TensorPrimitive, \
    check_ordered, emit, is_float_dtype, not_linear, reusable_output, same_dtype, shift_axis, \
    tensor_op, with_batch
from primitives.tensor.ops.scan import Cumprod, previous_along
from primitives.tensor.ops.constants import Full
from primitives.tensor.ops.select import Compare, Select
from primitives.tensor.ops.shape import BroadcastInDim, ReduceSum, Reshape, Transpose, \
    batch_all_at, batch_elementwise, batch_spread, reduced_before


def _batch_reduction(self, builder, inputs, axes, role, axis_size, ctx):
    """The batch rule of a reduction over ``axes`` of an operand of ``shape``: the
    reduced axes shift past the batch axis, which stays."""
    [axis] = axes
    batched = type(self)(tuple(shift_axis(self, a, axis) for a in self.axes),
                         with_batch(self.shape, axis, axis_size), self.dtype)
    return builder.add_primitive(batched, inputs, role), [axis - reduced_before(self.axes, axis)]


class _Reduction(TensorPrimitive):
    """A reduction over ``axes`` of an operand of ``shape``, in ``dtype`` (the subclass's
    fields)."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    __slots__ = ()

    def params(self) -> str:
        return f"axes={self.axes}, shape={self.shape}"

    def output_dtype(self) -> str:
        return self.dtype

    def kept_axes(self) -> tuple:
        return tuple(axis for axis in range(len(self.shape)) if axis not in self.axes)

    def out_shape(self) -> tuple:
        return tuple(self.shape[axis] for axis in self.kept_axes())

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        not_linear(self)

    batch_rule = _batch_reduction


class _ReduceExtremum(_Reduction):
    __slots__ = ()
    _function = ""                  # the namespace's function
    _ufunc = None                   # NumPy's: np.maximum or np.minimum

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:                                  # NumPy gives 0-d scalars
            return [np.asarray(_numpy_extremum(self._ufunc, x, self.axes))]
        check_ordered(xp, x, self.name)
        out_shape = self.out_shape()
        if 0 in out_shape:                  # Dask's max of no slices fails (no identity)
            return [xp.zeros(out_shape, dtype=dtype_of(x), device=device_of(x))]
        return [getattr(xp, self._function)(x, axis=self.axes)]

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


@tensor_op
class ReduceMax(_ReduceExtremum):
    """``np.max`` over ``axes`` of an operand of ``shape`` and ``dtype`` (``lax.reduce_max``)."""

    axes: tuple
    shape: tuple
    dtype: str
    name = "reduce_max"
    _function = "max"
    _ufunc = np.maximum


@tensor_op
class ReduceMin(_ReduceExtremum):
    """``np.min`` over ``axes`` of an operand of ``shape`` and ``dtype`` (``lax.reduce_min``)."""

    axes: tuple
    shape: tuple
    dtype: str
    name = "reduce_min"
    _function = "min"
    _ufunc = np.minimum


@tensor_op
class ReduceProd(TensorPrimitive):
    """``np.prod`` over ``axes`` of an operand of ``shape`` and ``dtype``, in that dtype
    (``lax.reduce_prod``); exact derivatives where the operand has zeros."""
    memory_bound = True          # recomputed under the eager "balanced" strategy

    axes: tuple
    shape: tuple
    dtype: str
    name = "reduce_prod"

    def params(self) -> str:
        return f"axes={self.axes}, shape={self.shape}"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:
            return [np.asarray(np.prod(x, axis=self.axes, dtype=x.dtype))]
        # other libraries multiply integers in a wider type (PyTorch has no uint64 kernels):
        # cast back, they wrap to the bits of NumPy's product in x's dtype
        return [xp.astype(xp.prod(x, axis=self.axes), np.dtype(self.dtype), copy=False)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        n = int(np.prod([self.shape[a] for a in self.axes], dtype=np.int64))
        if not is_float_dtype(self.dtype) or n == 0:
            return [None]                          # the product of nothing is the constant 1
        others = self._products_of_the_others(builder, External(primal_inputs[0]), n)
        weighted = emit(builder, ew.mul, [Local(tangent_inputs[0]), others], LIN_TF)
        return [emit(builder, ReduceSum(self.axes, self.shape), [Local(weighted)], LIN)]

    def _products_of_the_others(self, builder, x, n: int) -> Local:
        """For each entry, the product of the other entries of its reduced group (primal)."""
        kept = tuple(a for a in range(len(self.shape)) if a not in self.axes)
        if len(self.axes) == 1:            # the reduced axis is the group: work in place
            grouped, shape, axis = x, self.shape, self.axes[0]
        else:                              # move the reduced axes last and flatten them
            perm = kept + self.axes
            moved = tuple(self.shape[a] for a in perm)
            shape, axis = tuple(self.shape[a] for a in kept) + (n,), len(kept)
            grouped = Local(emit(builder, Transpose(perm), [x]))
            grouped = Local(emit(builder, Reshape(shape, moved), [grouped]))
        products = []
        for reverse in (False, True):
            running = Local(emit(builder, Cumprod(axis, shape, self.dtype, reverse), [grouped]))
            products.append(previous_along(builder, running, axis, shape, self.dtype, reverse, 1))
        others = Local(emit(builder, ew.mul, products))
        if len(self.axes) == 1:
            return others
        others = Local(emit(builder, Reshape(moved, shape), [others]))
        inverse = tuple(int(i) for i in np.argsort(perm))
        return Local(emit(builder, Transpose(inverse), [others]))

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        not_linear(self)

    batch_rule = _batch_reduction


# NumPy reduces a contiguous last axis one row at a time, at about 40 ns a row whatever
# its length, so many short rows (a batch of class scores) take much longer than their
# numbers: (256, 10) float32 13 us, (4096, 10) 180 us. Compared the other way round, on a
# copy with that axis first, each step is one vectorized pass over all rows: 4 and 20 us.
_SHORT_ROW = 32
_MANY_ROWS = 64


def _numpy_extremum(ufunc, x: np.ndarray, axes: tuple, keepdims: bool = False) -> np.ndarray:
    """``ufunc.reduce(x, axis=axes, keepdims=keepdims)`` for ``np.maximum`` or ``np.minimum``;
    many short rows (the last axis, at most 32 long, of a C-ordered array of 64 rows or
    more) are reduced on a copy with that axis first, which NumPy vectorizes. The maximum
    of the same numbers is the same number in any order (the sign of a zero maximum tied
    with another zero may differ, as it may between NumPy's own loops).

    >>> _numpy_extremum(np.maximum, np.arange(640.0).reshape(64, 10), (1,))[:3]
    array([ 9., 19., 29.])
    """
    if _many_short_rows(x, axes):
        last = x.ndim - 1
        out = ufunc.reduce(x.transpose((last, *range(last))).copy(), axis=0)
        return out[..., None] if keepdims else out
    return ufunc.reduce(x, axis=axes, keepdims=keepdims)


def _many_short_rows(x: np.ndarray, axes: tuple) -> bool:
    """Whether :func:`_numpy_extremum` reduces ``x`` over ``axes`` on a copy: the last axis
    of a C-ordered array of 4- or 8-byte numbers, 2 to 32 long, in 64 rows or more."""
    last = x.ndim - 1
    return (axes == (last,) and last >= 1 and 2 <= x.shape[last] <= _SHORT_ROW
            and x.size >= _MANY_ROWS * x.shape[last] and x.flags.c_contiguous
            and x.dtype.kind in "iuf" and x.dtype.itemsize >= 4)


def _zero_where_not_finite(shift: np.ndarray) -> np.ndarray:
    """A maximum to shift by, 0 where it is infinite or NaN (``shift`` itself when finite)."""
    finite = np.isfinite(shift)
    if np.logical_and.reduce(finite, axis=None):
        return shift
    return np.where(finite, shift, np.zeros((), shift.dtype))


def _numpy_logsumexp(x: np.ndarray, axes: tuple, out_shape: tuple) -> np.ndarray:
    """The steps of :meth:`ReduceLogSumExp.eval` as NumPy's own reductions and ufuncs, in
    place where they can be: no Python-level NumPy wrappers, which matters right after a big
    matrix product has evicted them from the cache (docs/performance.md)."""
    shift = _zero_where_not_finite(_numpy_extremum(np.maximum, x, axes, keepdims=True))
    total = np.subtract(x, shift)
    np.exp(total, out=total)
    total = np.add.reduce(total, axis=axes, keepdims=True)
    np.log(total, out=total)
    np.add(total, shift, out=total)
    return total.reshape(out_shape)


@tensor_op
class ExpShifted(TensorPrimitive):
    """``exp(x - y)``: ``x`` of ``shape`` and ``y`` of that shape without ``axes``, broadcast
    back along them. With ``y = logsumexp(x)`` over ``axes`` it is the softmax that
    :class:`ReduceLogSumExp`'s JVP weighs the tangent with: one op (one program step, one
    pass writing memory) where ``broadcast_in_dim``, ``sub`` and ``exp`` were three, with
    their values bit for bit.

    >>> x, y = np.log(np.array([[1.0, 3.0]])), np.log(np.array([4.0]))
    >>> ExpShifted((1,), (1, 2)).eval(None, [x, y])
    [array([[0.25, 0.75]])]
    """
    memory_bound = True          # recomputed under the eager "balanced" strategy

    axes: tuple
    shape: tuple
    name = "exp_shifted"

    def params(self) -> str:
        return f"axes={self.axes}, shape={self.shape}"

    def input_count(self) -> int:
        return 2

    def floating_output(self) -> bool:
        return True

    def spread(self) -> BroadcastInDim:
        """The ``broadcast_in_dim`` that takes ``y`` back to ``shape``."""
        kept = tuple(axis for axis in range(len(self.shape)) if axis not in self.axes)
        return BroadcastInDim(tuple(self.shape), kept, tuple(self.shape[a] for a in kept))

    def _with_ones(self) -> tuple:
        """``y``'s shape with a 1 at each of ``axes``: NumPy broadcasts it to ``shape``."""
        return tuple(1 if axis in self.axes else size for axis, size in enumerate(self.shape))

    def eval(self, ctx, inputs):
        x, y = inputs
        if type(x) is np.ndarray and type(y) is np.ndarray and x.dtype == y.dtype:
            out = np.subtract(x, y.reshape(self._with_ones()), out=...)
            return [np.exp(out, out=out)]
        xp, (x, y) = operands(inputs, self)
        out = xp.exp(x - xp.reshape(y, self._with_ones()))
        return [np.asarray(out) if xp is NUMPY.xp else out]

    def eval_reusing(self, ctx, inputs, reusable):
        """``eval``, into ``x`` when a compiled program no longer reads it."""
        out = reusable_output(inputs, (0,) if 0 in reusable else (), same_dtype)
        if out is None:
            return self.eval(ctx, inputs)
        np.subtract(out, inputs[1].reshape(self._with_ones()), out=out)
        return [np.exp(out, out=out)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        # d exp(x - y) = exp(x - y) (dx - dy), dy broadcast back
        tx, ty = tangent_inputs
        if ty is not None:
            spread_ty = emit(builder, self.spread(), [Local(ty)], LIN)
            tx = (emit(builder, ew.neg, [Local(spread_ty)], LIN) if tx is None
                  else emit(builder, ew.sub, [Local(tx), Local(spread_ty)], LIN_TT))
        if tx is None:
            return [None]
        return [emit(builder, ew.mul, [Local(tx), External(primal_outputs[0])], LIN_TF)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        not_linear(self)

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        # as the three ops it fuses: y broadcast back, subtracted, exponentiated
        x, y = inputs
        y, y_axis = batch_spread(builder, self.spread(), y, axes[1], role, 1, axis_size, ctx)
        [shifted], [axis] = batch_elementwise(ew.sub, builder, [x, y], [axes[0], y_axis], role,
                                              axis_size, ctx)
        return builder.add_primitive(ew.exp, [Local(shifted)], role), [axis]


@tensor_op
class ReduceLogSumExp(_Reduction):
    """``log(sum(exp(x)))`` over ``axes`` of a real floating operand of ``shape`` and ``dtype``,
    shifted by the maximum for stability (an infinite or NaN maximum shifts by 0). One op, so
    eager recording and programs pay for one, not a dozen; its JVP is the softmax,
    ``t -> sum(e * t) / sum(e)`` with ``e = exp(x - y)`` read from the output ``y``.

    >>> op = ReduceLogSumExp(axes=(1,), shape=(1, 2), dtype="float64")
    >>> op.eval(None, [np.array([[1000.0, 1000.0]])])        # 1000 + log 2, no overflow
    [array([1000.69314718])]
    """

    axes: tuple
    shape: tuple
    dtype: str
    name = "reduce_logsumexp"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        axes, out_shape = self.axes, self.out_shape()
        if any(self.shape[a] == 0 for a in axes):           # the log of an empty sum
            return [xp.full(out_shape, -np.inf, dtype=x.dtype, device=device_of(x))]
        if axes and xp.name == "torch":     # one kernel (the same shift), not five calls
            return [x.logsumexp(dim=axes)]
        if type(x) is np.ndarray and x.dtype.kind == "f":
            return [_numpy_logsumexp(x, axes, out_shape)]
        shift = xp.max(x, axis=axes, keepdims=True)
        shift = xp.where(xp.isfinite(shift), shift, xp.zeros_like(shift))
        total = xp.sum(xp.exp(x - shift), axis=axes, keepdims=True)
        out = xp.reshape(xp.log(total) + shift, out_shape)
        return [np.asarray(out) if xp is NUMPY.xp else out]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        # sum(t * e) / sum(e), e = exp(x - y): the division (on the reduced shape) makes the
        # weights sum to 1 when y lost log(n) to rounding (|x| ~ 1e8 in float32, 1e17 in
        # float64), where e alone would weigh each of n equal maxima by 1, not 1/n
        total = ReduceSum(self.axes, tuple(self.shape))
        softmax = emit(builder, ExpShifted(self.axes, tuple(self.shape)),
                       [External(primal_inputs[0]), External(primal_outputs[0])])
        weighted = emit(builder, ew.mul, [Local(tangent_inputs[0]), Local(softmax)], LIN_TF)
        mass = Local(emit(builder, total, [Local(softmax)]))
        # a NaN mass (exp(inf - inf) of an entry +inf) divides by 1: the other weights stay 0
        shape, known = self.out_shape(), Local(emit(builder, Compare("eq"), [mass, mass]))
        one = Local(emit(builder, Full(shape, self.dtype, 1), []))
        mass = emit(builder, Select(shape, self.dtype), [known, mass, one])
        return [emit(builder, ew.div, [Local(emit(builder, total, [Local(weighted)], LIN)),
                                       Local(mass)], LIN_TF)]


@tensor_op
class LogSoftmax(TensorPrimitive):
    """``x - log(sum(exp(x)))`` over ``axes`` of a floating operand of ``shape`` and
    ``dtype``, shifted by the maximum for stability: one op where the composite is about
    ten, so eager recording and programs pay for one. ``finite_shift``: a maximum that is
    not finite shifts by 0 (SciPy's ``log_softmax``); otherwise by itself (``jax.nn``'s,
    PyTorch's: a row holding ``+inf`` is all NaN). Its JVP, read from the output ``y``, is
    ``t - sum(exp(y) * t)``.

    >>> op = LogSoftmax(axes=(1,), shape=(1, 2), dtype="float64", finite_shift=False)
    >>> op.eval(None, [np.array([[1000.0, 1000.0]])])        # log(1/2), no overflow
    [array([[-0.69314718, -0.69314718]])]
    """
    memory_bound = True          # recomputed under the eager "balanced" strategy

    axes: tuple
    shape: tuple
    dtype: str
    finite_shift: bool
    name = "log_softmax"

    def params(self) -> str:
        return f"axes={self.axes}, shape={self.shape}, finite_shift={self.finite_shift}"

    def output_dtype(self) -> str:
        return self.dtype

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if any(self.shape[a] == 0 for a in self.axes):         # nothing to normalize
            return [x - x]
        if len(self.axes) == 1 and not self.finite_shift and xp.name == "torch":
            return [x.log_softmax(dim=self.axes[0])]           # one kernel
        if type(x) is np.ndarray and x.dtype.kind in "fc":     # complex: NumPy's order
            shift = _numpy_extremum(np.maximum, x, self.axes, keepdims=True)
            if self.finite_shift:
                shift = _zero_where_not_finite(shift)
            shifted = np.subtract(x, shift)
            total = np.log(np.add.reduce(np.exp(shifted), axis=self.axes, keepdims=True))
            if type(shifted) is not np.ndarray:                # 0-d: NumPy gives scalars
                return [np.asarray(shifted - total)]
            return [np.subtract(shifted, total, out=shifted)]
        shift = xp.max(x, axis=self.axes, keepdims=True)
        if self.finite_shift:
            shift = xp.where(xp.isfinite(shift), shift, xp.zeros_like(shift))
        shifted = x - shift
        out = shifted - xp.log(xp.sum(xp.exp(shifted), axis=self.axes, keepdims=True))
        return [np.asarray(out) if xp is NUMPY.xp else out]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        shape = tuple(self.shape)
        t = tangent_inputs[0]
        if np.dtype(self.dtype).kind == "f":            # one op (and its transpose one op)
            return [emit(builder, LogSoftmaxLinear(self.axes, shape, False),
                         [Local(t), External(primal_outputs[0])], LIN_TF)]
        kept = tuple(axis for axis in range(len(shape)) if axis not in self.axes)
        softmax = emit(builder, ew.exp, [External(primal_outputs[0])])
        weighted = emit(builder, ew.mul, [Local(t), Local(softmax)], LIN_TF)
        total = emit(builder, ReduceSum(self.axes, shape), [Local(weighted)], LIN)
        back = BroadcastInDim(shape, kept, tuple(shape[axis] for axis in kept))
        spread = emit(builder, back, [Local(total)], LIN)
        return [emit(builder, ew.sub, [Local(t), Local(spread)], LIN_TT)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        not_linear(self)

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        [axis] = axes
        batched = LogSoftmax(tuple(shift_axis(self, a, axis) for a in self.axes),
                             with_batch(self.shape, axis, axis_size), self.dtype,
                             self.finite_shift)
        return builder.add_primitive(batched, inputs, role), [axis]


# --- log_softmax's derivative, fused ---------------------------------------------------


def _log_softmax_linear_numpy(t, y, axes: tuple, transposed: bool, out=None):
    """:class:`LogSoftmaxLinear` on NumPy arrays of one real dtype: ``exp(y)`` in one
    buffer, the rest into it, or into ``out`` (``t`` or ``y``, inputs a compiled program
    no longer reads). The composite's bits: ``t - a`` for ``t + (-a)``, ``p * s`` for
    ``p * -(-s)`` (negation is exact)."""
    p = np.exp(y, out=y if out is y else ...)       # (out=...: a 0-d array, not a scalar)
    if transposed:
        total = np.add.reduce(t, axis=axes, keepdims=True)
        np.multiply(p, total, out=p)
        return np.subtract(t, p, out=p if out is None else out)
    np.multiply(t, p, out=p)
    total = np.add.reduce(p, axis=axes, keepdims=True)
    return np.subtract(t, total, out=p if out is None else out)


def _log_softmax_linear_api(xp, t, y, axes: tuple, transposed: bool):
    p = xp.exp(y)
    if transposed:
        return t - p * xp.sum(t, axis=axes, keepdims=True)
    return t - xp.sum(t * p, axis=axes, keepdims=True)


def _torch_log_softmax_backward(t, y, axis: int):
    """PyTorch's one-kernel log-softmax backward: ``t - exp(y) * sum(t, axis)``."""
    return sys.modules["torch"]._log_softmax_backward_data(t, y, axis, t.dtype)


define("log_softmax_backward", torch=_torch_log_softmax_backward)


@tensor_op
class LogSoftmaxLinear(FusedTangent):
    """``log_softmax``'s tangent map read from its output ``y``, in one op:
    ``t - sum(exp(y) * t)`` over ``axes`` (spread back over them); with ``transposed``,
    its transpose ``t - exp(y) * sum(t)``, the cotangent map (PyTorch's log-softmax
    backward, one kernel there). Linear in ``t``; real floating operands of ``shape``.

    ``log_softmax``'s JVP emits it for real dtypes, so a gradient runs one op where the
    composite ran five (``exp``, ``mul``, ``reduce_sum``, ``broadcast_in_dim``, ``sub``).

    >>> y = np.log(np.array([[0.25, 0.75]]))
    >>> LogSoftmaxLinear((1,), (1, 2), True).eval(None, [np.array([[1.0, 0.0]]), y])
    [array([[ 0.75, -0.75]])]
    """
    axes: tuple
    shape: tuple
    transposed: bool
    name = "log_softmax_linear"

    def params(self) -> str:
        return f"axes={self.axes}, shape={self.shape}, transposed={self.transposed}"

    def numpy_kernel(self, t, y, out=None):
        return _log_softmax_linear_numpy(t, y, self.axes, self.transposed, out)

    def library_kernel(self, xp, t, y):
        if xp.name == "torch" and self.transposed and len(self.axes) == 1 \
                and t.dtype == y.dtype:
            return xp.log_softmax_backward(t, y, self.axes[0])
        return _log_softmax_linear_api(xp, t, y, self.axes, self.transposed)

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        t_key, y_key = primal_inputs
        dt, dy = tangent_inputs
        terms = None if dt is None else emit(builder, self, [Local(dt), External(y_key)],
                                             LIN_TF)
        if dy is not None:
            shape = tuple(self.shape)
            kept = tuple(axis for axis in range(len(shape)) if axis not in self.axes)
            total = ReduceSum(self.axes, shape)
            spread = BroadcastInDim(shape, kept, tuple(shape[axis] for axis in kept))
            t, p = ew.Sym(builder, External(t_key)), ew.Sym(builder, External(y_key)).apply(ew.exp)
            if self.transposed:     # d(t - p sum(t)) = -p sum(t) dy
                scaled = ew.scale_tangent(builder, dy, -(p * t.apply(total).apply(spread)))
            else:                   # d(t - sum(p t)) = -sum(p t dy), spread
                weighted = ew.scale_tangent(builder, dy, t * p)
                summed = emit(builder, total, [Local(weighted)], LIN)
                scaled = emit(builder, ew.neg, [Local(emit(builder, spread, [Local(summed)],
                                                           LIN))], LIN)
            terms = ew._sum_terms(builder, terms, scaled)
        return [terms]

    def transpose_op(self) -> "LogSoftmaxLinear":
        return LogSoftmaxLinear(self.axes, self.shape, not self.transposed)

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        axis = next(a for a in axes if a is not None)
        refs = batch_all_at(builder, inputs, axes, role, axis_size, axis)
        batched = LogSoftmaxLinear(tuple(shift_axis(self, a, axis) for a in self.axes),
                                   with_batch(self.shape, axis, axis_size), self.transposed)
        return builder.add_primitive(batched, refs, role), [axis]


class _ArgExtremum(TensorPrimitive):
    """An integer index of an extremum along ``axis``: no tangent."""

    __slots__ = ()
    _function = ""                  # the namespace's function

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        if xp is NUMPY.xp:                                  # NumPy gives 0-d scalars
            return [np.asarray(getattr(xp, self._function)(x, axis=self.axis))]
        check_ordered(xp, x, self.name)
        if dtype_of(x).kind == "b":             # PyTorch's argmax takes no booleans
            x = xp.astype(x, np.dtype(np.uint8))
        return [getattr(xp, self._function)(x, axis=self.axis)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [None]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        not_linear(self)

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        [axis] = axes
        batched = type(self)(shift_axis(self, self.axis, axis))
        return builder.add_primitive(batched, inputs, role), [axis - (self.axis < axis)]


@tensor_op
class Argmax(_ArgExtremum):
    """``np.argmax`` along ``axis`` (``lax.argmax``): an integer result, no tangent."""

    axis: int
    name = "argmax"
    _function = "argmax"


@tensor_op
class Argmin(_ArgExtremum):
    """``np.argmin`` along ``axis`` (``lax.argmin``): an integer result, no tangent."""

    axis: int
    name = "argmin"
    _function = "argmin"


def _sqrt_jvp(builder, x, y, t):
    # d sqrt(x) = t * sqrt(x) / (2 x), and 0 where x == 0; div_or_zero keeps every higher
    # derivative 0 there too
    slope = emit(builder, ew.div_or_zero, [External(y), External(x)])
    half = emit(builder, ew.Scale(0.5), [Local(slope)])
    return emit(builder, ew.mul, [Local(t), Local(half)], LIN_TF)


sqrt_zero_slope_at_zero = ew.unary("sqrt_zero_slope_at_zero", np.sqrt, api="sqrt",
                                   jvp=_sqrt_jvp, keeps_dtype=True, real_only=True)
"""``np.sqrt`` whose derivatives are 0 at 0 (``std`` at zero variance, as PyTorch's ``std``)."""
