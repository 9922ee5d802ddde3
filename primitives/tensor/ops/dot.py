"""``dot_general``: the contraction that ``matmul``, ``dot`` and ``einsum`` lower to.

``DotGeneral(((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)), lhs_shape,
rhs_shape)`` has ``lax.dot_general``'s semantics: the result's dimensions are the
batch dimensions, then the lhs free dimensions, then the rhs free dimensions
(free dimensions in their operand's order). On NumPy arrays it evaluates as one
(batched) ``np.matmul`` after moving the dimensions into place; on other
libraries' as one ``einsum`` (Dask's contracts chunk by chunk, without the
reshapes that would merge chunks).

The JVP is bilinear, ``dx·y + x·dy``; the transpose with respect to either
operand is another ``DotGeneral`` of the cotangent with the conjugate of the
other operand, followed by a ``Transpose`` back into the operand's layout.

>>> mm = DotGeneral((((1,), (0,)), ((), ())), (2, 3), (3, 4))
>>> mm.eval(None, [np.ones((2, 3)), np.ones((3, 4))])[0].shape
(2, 4)
>>> bmm = DotGeneral((((2,), (1,)), ((0,), (0,))), (5, 2, 3), (5, 3, 4))
>>> bmm.out_shape()
(5, 2, 4)

It imports :mod:`.base`, :mod:`.shape` and :mod:`.elementwise`, of
:mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

import math

import numpy as np

from tidu import ADRuleError, ADRuleKind
from tidu.graph import External, Local
from primitives.tensor.backends import NUMPY, operands
from primitives.tensor.buffers import MIN_BYTES, empty
from primitives.tensor.core import dtype_of
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.base import (
    LIN,
    LIN_FT,
    LIN_TF,
    TensorPrimitive,
    emit,
    linear_mask,
    shift_axis,
    tensor_op,
    with_batch,
)
from primitives.tensor.ops.shape import Transpose


def _matmul(x, y):
    """``np.matmul`` of two arrays; a big result of two 2-d operands of one dtype goes
    into a reused buffer (see :mod:`primitives.tensor.buffers`)."""
    if (type(x) is np.ndarray and type(y) is np.ndarray and x.ndim == 2 and y.ndim == 2
            and x.dtype == y.dtype and x.dtype.kind in "fc"
            and x.shape[0] * y.shape[1] * x.itemsize >= MIN_BYTES):
        return np.matmul(x, y, out=empty((x.shape[0], y.shape[1]), x.dtype))
    return np.matmul(x, y)


def _reshaped(xp, x, shape: tuple):
    """``xp.reshape(x, shape)``, or ``x`` itself when it has that shape already (a 2-d
    product's operands and result: no call through the namespace's wrapper)."""
    return x if x.shape == shape else xp.reshape(x, shape)


def _argsort(values) -> tuple:
    return tuple(int(i) for i in np.argsort(values, kind="stable"))


@tensor_op
class DotGeneral(TensorPrimitive):
    """``lax.dot_general`` of operands of ``lhs_shape`` and ``rhs_shape`` (and one dtype).

    ``dtype`` is optional: when it is given and real, the transposes skip the
    (then identity) conjugation of the other operand.
    """

    dimension_numbers: tuple
    lhs_shape: tuple
    rhs_shape: tuple
    dtype: str | None = None
    name = "dot_general"

    def params(self) -> str:
        (lc, rc), (lb, rb) = self.dimension_numbers
        return f"{self.lhs_shape}x{self.rhs_shape}, contract={lc}/{rc}, batch={lb}/{rb}"

    def input_count(self) -> int:
        return 2

    def output_dtype(self) -> str | None:
        return self.dtype

    # --- layout -------------------------------------------------------------------

    def free_axes(self) -> tuple[tuple, tuple]:
        (lc, rc), (lb, rb) = self.dimension_numbers
        lhs = tuple(a for a in range(len(self.lhs_shape)) if a not in lc and a not in lb)
        rhs = tuple(a for a in range(len(self.rhs_shape)) if a not in rc and a not in rb)
        return lhs, rhs

    def out_shape(self) -> tuple:
        (_, _), (lb, _) = self.dimension_numbers
        lfree, rfree = self.free_axes()
        return (tuple(self.lhs_shape[a] for a in lb) + tuple(self.lhs_shape[a] for a in lfree)
                + tuple(self.rhs_shape[a] for a in rfree))

    def _plan(self):
        try:
            return self.__dict__["_plan_cache"]
        except KeyError:
            pass
        (lc, rc), (lb, rb) = self.dimension_numbers
        lfree, rfree = self.free_axes()
        lperm = tuple(lb) + lfree + tuple(lc)
        rperm = tuple(rb) + tuple(rc) + rfree
        size = lambda shape, axes: math.prod(shape[a] for a in axes)
        batch = size(self.lhs_shape, lb)
        m, k, n = size(self.lhs_shape, lfree), size(self.lhs_shape, lc), size(self.rhs_shape, rfree)
        lhs3 = (batch, m, k) if lb else (m, k)
        rhs3 = (batch, k, n) if lb else (k, n)
        plan = (None if lperm == tuple(range(len(lperm))) else lperm,
                None if rperm == tuple(range(len(rperm))) else rperm,
                lhs3, rhs3, self.out_shape())
        object.__setattr__(self, "_plan_cache", plan)
        return plan

    def recompute_cost(self, inputs, outputs) -> float:
        """Bytes moved plus flops / 8: a matrix product is compute-bound, so rematerialization
        keeps its result and recomputes elementwise work first (as Burn's balanced strategy)."""
        _, _, lhs3, _, out_shape = self._plan()
        flops = 2 * math.prod(out_shape) * lhs3[-1]
        return super().recompute_cost(inputs, outputs) + flops / 8

    def einsum_subscripts(self) -> str:
        """The contraction as ``einsum`` subscripts, e.g. ``"ab,bc->ac"`` for a matrix product.

        >>> DotGeneral((((2,), (1,)), ((0,), (0,))), (5, 2, 3), (5, 3, 4)).einsum_subscripts()
        'abc,acd->abd'
        """
        try:
            return self.__dict__["_subscripts_cache"]
        except KeyError:
            pass
        (lc, rc), (lb, rb) = self.dimension_numbers
        letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        lhs = [next(letters) for _ in self.lhs_shape]
        rhs = [None] * len(self.rhs_shape)
        for l, r in zip(lc + lb, rc + rb):
            rhs[r] = lhs[l]
        rhs = [c or next(letters) for c in rhs]
        lfree, rfree = self.free_axes()
        out = [lhs[a] for a in lb] + [lhs[a] for a in lfree] + [rhs[a] for a in rfree]
        subscripts = f"{''.join(lhs)},{''.join(rhs)}->{''.join(out)}"
        object.__setattr__(self, "_subscripts_cache", subscripts)
        return subscripts

    def eval(self, ctx, inputs):
        xp, (x, y) = operands(inputs, self)
        if xp is not NUMPY.xp:
            if dtype_of(x) == np.bool_:     # NumPy's "any of the ands"; PyTorch has no bool matmul
                counts = xp.einsum(self.einsum_subscripts(), xp.astype(x, np.dtype(np.int64)),
                                   xp.astype(y, np.dtype(np.int64)))
                return [counts != 0]
            if xp.name == "dask":       # chunk by chunk, with no reshape merging chunks
                return [xp.einsum(self.einsum_subscripts(), x, y)]
        lperm, rperm, lhs3, rhs3, out_shape = self._plan()
        if xp is NUMPY.xp:          # array methods: the namespace's wrappers cost more here
            if lperm is not None:
                x = x.transpose(lperm)
            if rperm is not None:
                y = y.transpose(rperm)
            x, y = x.reshape(lhs3), y.reshape(rhs3)
            if lhs3[-1] == 1:     # an outer product: a broadcast multiply is 3-4x matmul's speed
                out = np.multiply(x, y)
            else:
                out = _matmul(x, y)
            return [out if out.shape == out_shape else out.reshape(out_shape)]   # (no view)
        if lperm is not None:
            x = xp.permute_dims(x, lperm)
        if rperm is not None:
            y = xp.permute_dims(y, rperm)
        x, y = _reshaped(xp, x, lhs3), _reshaped(xp, y, rhs3)
        if lhs3[-1] == 1:
            return [_reshaped(xp, xp.multiply(x, y), out_shape)]
        # operands of one dtype: the standard's ``@`` is ``matmul`` without the
        # namespace wrapper's promotion work (two dtype lookups and casts a call)
        out = x @ y if x.dtype == y.dtype else xp.matmul(x, y)
        return [_reshaped(xp, out, out_shape)]

    # --- rules --------------------------------------------------------------------

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        x, y = primal_inputs
        tx, ty = tangent_inputs
        terms = []
        if tx is not None:
            terms.append(emit(builder, self, [Local(tx), External(y)], LIN_TF))
        if ty is not None:
            terms.append(emit(builder, self, [External(x), Local(ty)], LIN_FT))
        return [ew._sum_terms(builder, *terms) if len(terms) == 2 else terms[0]]

    def _conj(self, builder, ref):
        if self.dtype is not None and not np.issubdtype(np.dtype(self.dtype), np.complexfloating):
            return ref
        return Local(emit(builder, ew.conj, [ref]))

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        mask = linear_mask(self, role)
        ct = Local(cotangent_outputs[0])
        (lc, rc), (lb, rb) = self.dimension_numbers
        lfree, rfree = self.free_axes()
        nb, nlf, nrf = len(lb), len(lfree), len(rfree)
        out_shape = self.out_shape()
        batch = tuple(range(nb))
        # Each cotangent is one product of ct and the other operand. Its free axes come out
        # as [batch, lhs free, rhs free]: the operands go in the order that gives the
        # operand's own layout when one does (so no transposed view is left for later ops
        # to read strided), else ct first and a transpose after.
        if mask == (True, False):
            # ct[b, lf, rf] . conj(y)[..rf..] -> [b, lf, rc in y's order]: x's layout
            ct_free = tuple(range(nb + nlf, nb + nlf + nrf))
            from_y = tuple(lc[rc.index(a)] for a in sorted(rc))
            y = self._conj(builder, inputs[1])
            if tuple(lb) + from_y + lfree == tuple(range(len(self.lhs_shape))) != \
                    tuple(lb) + lfree + from_y:
                op = DotGeneral(((rfree, ct_free), (tuple(rb), batch)), self.rhs_shape,
                                out_shape, self.dtype)
                return [emit(builder, op, [y, ct], LIN_FT), None]
            op = DotGeneral(((ct_free, rfree), (batch, tuple(rb))), out_shape, self.rhs_shape,
                            self.dtype)
            result = emit(builder, op, [ct, y], LIN_TF)
            return [self._to_layout(builder, result, tuple(lb) + lfree + from_y), None]
        if mask == (False, True):
            # conj(x)[..lf..] . ct[b, lf, rf] -> [b, lc in x's order, rf]: y's layout
            ct_free = tuple(range(nb, nb + nlf))
            from_x = tuple(rc[lc.index(a)] for a in sorted(lc))
            x = self._conj(builder, inputs[0])
            if tuple(rb) + rfree + from_x == tuple(range(len(self.rhs_shape))) != \
                    tuple(rb) + from_x + rfree:
                op = DotGeneral(((ct_free, lfree), (batch, tuple(lb))), out_shape,
                                self.lhs_shape, self.dtype)
                return [None, emit(builder, op, [ct, x], LIN_TF)]
            op = DotGeneral(((lfree, ct_free), (tuple(lb), batch)), self.lhs_shape, out_shape,
                            self.dtype)
            result = emit(builder, op, [x, ct], LIN_FT)
            return [None, self._to_layout(builder, result, tuple(rb) + from_x + rfree)]
        raise ADRuleError("dot_general", ADRuleKind.TRANSPOSE,
                          "dot_general is linear in one operand at a time")

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        """Both operands batched: their batch axes become the first batch dimension. One
        batched: its batch axis stays a free dimension, placed in the output after the
        dimensions that precede it (batch dims, lhs free dims, then rhs free dims)."""
        lhs_axis, rhs_axis = axes
        (lc, rc), (lb, rb) = self.dimension_numbers
        lhs_shape, rhs_shape = self.lhs_shape, self.rhs_shape
        if lhs_axis is not None:
            lhs_shape = with_batch(lhs_shape, lhs_axis, axis_size)
            lc, lb = (tuple(shift_axis(self, a, lhs_axis) for a in dims) for dims in (lc, lb))
        if rhs_axis is not None:
            rhs_shape = with_batch(rhs_shape, rhs_axis, axis_size)
            rc, rb = (tuple(shift_axis(self, a, rhs_axis) for a in dims) for dims in (rc, rb))
        lfree, rfree = self.free_axes()
        if lhs_axis is not None and rhs_axis is not None:
            lb, rb = (lhs_axis,) + lb, (rhs_axis,) + rb
            out_axis = 0
        elif lhs_axis is not None:
            out_axis = len(lb) + sum(a < lhs_axis for a in lfree)
        else:
            out_axis = len(lb) + len(lfree) + sum(a < rhs_axis for a in rfree)
        op = DotGeneral(((lc, rc), (lb, rb)), lhs_shape, rhs_shape, self.dtype)
        return builder.add_primitive(op, inputs, role), [out_axis]

    @staticmethod
    def _to_layout(builder, result: int, source: tuple) -> int:
        """Permute ``result``, whose axis ``p`` is operand axis ``source[p]``, into operand order."""
        perm = _argsort(source)
        if perm == tuple(range(len(perm))):
            return result
        return emit(builder, Transpose(perm), [Local(result)], LIN)
