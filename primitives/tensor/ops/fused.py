"""Fused ops: several elementwise ops as one, made by ``tidu.optimize`` (:mod:`.simplify`).

``jit`` hands every program to :func:`tidu.optimize`, whose tensor patterns
(:mod:`.simplify`) replace a few op chains that derivatives produce by one op
here, evaluated in fewer passes over memory (NumPy) or by one kernel (PyTorch).
Each is a real primitive of the set, with its JVP, transpose and batch rules,
so a program holding one can be differentiated, transposed and batched again
(``grad(jit(f))``, ``vmap(jit(f))``). On NumPy arrays a fused op computes its
values *bit for bit* as the chain it replaces does (the same ufuncs in the same
order, on the same operands): it only saves passes and temporaries. Other
libraries compute the chain's formula through their namespace, or one of their
kernels that computes it (PyTorch's ``tanh_backward``) to rounding.

=========================================  ================================================
op                                         replaces (``f = scale * y*y + offset``)
=========================================  ================================================
``square_affine_mul[scale, offset](t, y)`` ``mul(t, affine[scale, offset](mul(y, y)))``:
                                           ``t * f``; with ``conj``, ``mul_conj(t, f)``:
                                           ``t * conj(f)``. ``tanh``'s derivative
                                           ``t * (1 - y*y)`` (``y = tanh(x)``), ``tan``'s
                                           ``t * (1 + y*y)``.
=========================================  ================================================

``square_affine_mul`` on NumPy: ``y*y`` into one buffer, ``scale``/``offset``
applied in place there (one pass: ``offset - y*y`` when ``scale`` is ``-1``),
then ``t * f`` into that buffer or into ``t`` or ``y`` when a compiled program
no longer reads it: three passes and at most one temporary, where the chain
makes two arrays in four passes. On PyTorch, ``tanh``'s case is
``torch.ops.aten.tanh_backward`` (one kernel, as ``torch.autograd`` runs it).

>>> op = SquareAffineMul(-1, 1)
>>> y = np.tanh(np.array([0.0, 0.5, 3.0]))
>>> bool(np.array_equal(op.eval(None, [np.ones(3), y])[0], 1 - y * y))
True

It imports :mod:`.base`, :mod:`.shape` and :mod:`.elementwise`, of
:mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

import sys

import numpy as np

from tidu import ADRuleError, ADRuleKind
from tidu.graph import External, Local
from primitives.tensor.backends import NUMPY, define, operands
from primitives.tensor.buffers import MIN_BYTES
from primitives.tensor.core import dtype_of
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.base import (
    LIN,
    LIN_TF,
    TensorPrimitive,
    apply_ufunc,
    emit,
    linear_mask,
    reusable_output,
    tensor_op,
)
from primitives.tensor.ops.shape import batch_elementwise


def _torch_tanh_backward(t, y):
    """``t * conj(1 - y*y)`` in one PyTorch kernel (the backward of ``torch.tanh``)."""
    return sys.modules["torch"].ops.aten.tanh_backward(t, y)


define("tanh_backward", torch=_torch_tanh_backward)


def _is_real(number) -> bool:
    return type(number) in (int, float)


@tensor_op
class SquareAffineMul(TensorPrimitive):
    """``t * (scale * y*y + offset)``, or with ``conj`` ``t * conj(scale * y*y + offset)``,
    for real Python numbers ``scale`` and ``offset``; ``t`` and ``y`` of one shape and dtype.

    Linear in ``t``: with ``y`` constant it transposes to the same op with ``conj``
    flipped (multiplying by ``c`` transposes to multiplying by ``conj(c)``). Its JVP
    is ``dt * f + t * 2 scale y dy`` (conjugated with ``conj``).

    >>> op = SquareAffineMul(-1, 1)
    >>> op.eval(None, [np.array([2.0]), np.array([0.5])])
    [array([1.5])]
    """

    scale: int | float
    offset: int | float
    conj: bool = False
    name = "square_affine_mul"
    __eq__, __hash__ = ew._exact_eq, ew._exact_hash     # scale -0.0 is not scale 0.0
    batch_rule = batch_elementwise

    def params(self) -> str:
        shown = f"scale={self.scale!r}, offset={self.offset!r}"
        return shown + ", conj" if self.conj else shown

    def input_count(self) -> int:
        return 2

    # --- evaluation -----------------------------------------------------------------

    def eval(self, ctx, inputs):
        t, y = inputs
        if type(t) is not np.ndarray or type(y) is not np.ndarray:
            xp, (t, y) = operands(inputs, self)
            if xp is not NUMPY.xp:
                return [self._api(xp, t, y)]
        return [self._numpy(t, y, None)]

    def eval_reusing(self, ctx, inputs, reusable):
        """``eval``, into ``y`` (no temporary at all) or ``t`` when a compiled program no
        longer reads it and it fits."""
        if (type(inputs[0]) is not np.ndarray or type(inputs[1]) is not np.ndarray
                or inputs[0] is inputs[1]):
            return self.eval(ctx, inputs)
        into = None                          # (no names bound to the inputs: unshared counts)
        if 1 in reusable:
            into = reusable_output(inputs, (1,))
        if into is None and 0 in reusable:
            into = reusable_output(inputs, (0,))
        return [self._numpy(inputs[0], inputs[1], into)]

    def _numpy(self, t, y, into):
        """The chain's ufuncs, in its order, on its operands: ``y*y``, ``* scale`` (unless 1),
        ``+ offset``, then ``t *`` (``conj`` of) that; ``into`` is ``t``, ``y`` or ``None``.

        Big floating operands of one shape and dtype run in one buffer. Small real ones
        (no reused buffer) run the same ufuncs on fresh arrays; small complex ones, and
        mixed dtypes, the chain's own evals (NumPy's complex scalar paths round their own
        way, and the chain's ``*=`` keeps its dtype).
        """
        scale, offset = self.scale, self.offset
        if into is None and not (type(y) is np.ndarray and type(t) is np.ndarray
                                 and y.nbytes >= MIN_BYTES and y.dtype.kind in "fc"
                                 and t.dtype == y.dtype and t.shape == y.shape):
            if (type(y) is np.ndarray and type(t) is np.ndarray and y.dtype.kind == "f"
                    and t.dtype == y.dtype):
                square = np.multiply(y, y)
                if _is_real(scale) and scale == -1:
                    return np.multiply(t, np.subtract(offset, square))
                if not (_is_real(scale) and scale == 1):
                    square = np.multiply(square, scale)
                return np.multiply(t, np.add(square, offset))
            [square] = ew.mul.eval(None, [y, y])
            [factor] = ew.Affine(scale, offset).eval(None, [square])
            return (ew.mul_conj if self.conj else ew.mul).eval(None, [t, factor])[0]
        square = np.multiply(y, y, out=y) if into is y else apply_ufunc(np.multiply, y, y)
        real = square.dtype.kind != "c"
        if real and _is_real(scale) and scale == -1:
            np.subtract(offset, square, out=square)     # -(y*y) + offset, bit for bit
        else:
            if not (_is_real(scale) and scale == 1):
                np.multiply(square, scale, out=square)
            np.add(square, offset, out=square)
        if self.conj and not real:
            np.conjugate(square, out=square)
        return np.multiply(t, square, out=t if into is t else square)

    def _api(self, xp, t, y):
        """Other libraries: PyTorch's ``tanh_backward`` for ``t * conj(1 - y*y)`` (so also for
        real ``t * (1 - y*y)``), else the chain's formula through the namespace."""
        scale, offset = self.scale, self.offset
        if (xp.name == "torch" and _is_real(scale) and scale == -1 and _is_real(offset)
                and offset == 1 and dtype_of(t) == dtype_of(y)
                and (self.conj or dtype_of(y).kind != "c")):
            return xp.tanh_backward(t, y)
        factor = y * y
        if not (_is_real(scale) and scale == 1):
            factor = factor * scale
        factor = factor + offset
        if self.conj:
            factor = ew._conj_api(xp, factor)
        return xp.multiply(t, factor)

    # --- rules ------------------------------------------------------------------------

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        t, y = primal_inputs
        dt, dy = tangent_inputs
        terms = []
        if dt is not None:
            terms.append(emit(builder, self, [Local(dt), External(y)], LIN_TF))
        if dy is not None:
            # t * d(f) = t * 2 scale y dy (each conjugated with conj)
            slope = emit(builder, ew.Scale(2 * self.scale), [External(y)])
            if self.conj:
                weight = emit(builder, ew.mul_conj, [External(t), Local(slope)])
                dy = emit(builder, ew.conj, [Local(dy)], LIN)
            else:
                weight = emit(builder, ew.mul, [External(t), Local(slope)])
            terms.append(emit(builder, ew.mul, [Local(dy), Local(weight)], LIN_TF))
        if not terms:
            return [None]
        return [terms[0] if len(terms) == 1 else ew._sum_terms(builder, *terms)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        if linear_mask(self, role) != (True, False):
            raise ADRuleError(self.name, ADRuleKind.TRANSPOSE,
                              f"{self.name} is linear in its first input only")
        partner = SquareAffineMul(self.scale, self.offset, not self.conj)
        return [emit(builder, partner, [Local(cotangent_outputs[0]), inputs[1]], LIN_TF), None]
