"""Selection, comparison and complex-part primitives.

``Full`` makes constants (the zeros that stand for a missing branch),
``Select`` is ``lax.select`` (``np.where``) with a non-differentiable predicate,
``Compare`` gives booleans (no tangent), ``Maximum``/``Minimum`` split the
tangent evenly at ties (as JAX does), ``ComplexAbs`` is ``|z|`` of a complex
``z`` (``elementwise.abs_real`` is the real one), and ``Real``/``Imag`` map
complex to real; their transposes give complex cotangents.

>>> Select((2,), "float64").eval(None, [np.array([True, False]), np.ones(2), np.zeros(2)])
[array([1., 0.])]
>>> Compare("lt").eval(None, [np.array([1.0, 2.0]), np.array([2.0, 2.0])])
[array([ True, False])]
>>> Maximum("float64").eval(None, [np.array([1.0, 3.0]), np.array([2.0, 2.0])])
[array([2., 3.])]
"""

from __future__ import annotations

import numpy as np

from tidu import ADRuleError, ADRuleKind
from tidu.graph import External, Linearized, Local
from primitives.tensor.backends import NUMPY, operands
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.base import (
    OpParameterError,
    LIN,
    LIN_TF,
    LinearOp,
    TensorPrimitive,
    batch_all_at,
    batch_elementwise,
    emit,
    linear_mask,
    tensor_op,
    with_batch,
)


def real_dtype_name(dtype) -> str:
    """The real dtype of a complex one (``complex64`` -> ``float32``); real dtypes map to themselves."""
    dtype = np.dtype(dtype)
    return np.finfo(dtype).dtype.name if dtype.kind == "c" else dtype.name


def _not_linear(op):
    raise ADRuleError(repr(op), ADRuleKind.TRANSPOSE, f"{op!r} is not linear")


# --- constants ------------------------------------------------------------------------


@tensor_op
class Full(TensorPrimitive):
    """A nullary op: an array of ``shape`` and ``dtype`` filled with ``value`` (zeros by default)."""

    shape: tuple
    dtype: str
    value: float | complex | int = 0
    name = "full"

    def _filled(self) -> tuple:
        """What the op makes: two ``Full``s are equal when their arrays are, bit for bit
        (``-0.0`` is not ``0.0``; ``0`` and ``False`` fill a bool array alike)."""
        return self.shape, self.dtype, np.array(self.value, dtype=self.dtype).tobytes()

    def __eq__(self, other) -> bool:
        return self is other or (type(other) is Full and self._filled() == other._filled())

    def __hash__(self) -> int:
        return hash(self._filled())

    def input_count(self) -> int:
        return 0

    def eval(self, ctx, inputs):
        if self.value == 0:
            return [np.zeros(self.shape, dtype=self.dtype)]
        return [np.full(self.shape, self.value, dtype=self.dtype)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [None]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return []


def zeros(builder, shape, dtype) -> int:
    """Emit zeros of ``shape`` and ``dtype`` (primal work) and return their id."""
    return emit(builder, Full(tuple(shape), np.dtype(dtype).name), [])


zeros_like = ew.unary("zeros_like", np.zeros_like, "zeros_like", jvp=lambda b, x, y, t: None)
"""Zeros of the operand's shape and dtype; its derivative is zero (``np.imag`` of a real array)."""

stop_gradient = ew.unary("stop_gradient", lambda a: a, jvp=lambda b, x, y, t: None)
"""The operand itself, with derivative zero (``lax.stop_gradient``)."""


# --- select -------------------------------------------------------------------------


@tensor_op
class Select(TensorPrimitive):
    """``np.where(pred, on_true, on_false)`` on operands of one ``shape`` and ``dtype``.

    Linear in the two branches jointly (the predicate is a constant), so a
    branch without a tangent or cotangent is a ``Full`` zero.
    """

    shape: tuple
    dtype: str
    name = "select"

    def input_count(self) -> int:
        return 3

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

    name: str
    batch_rule = batch_elementwise

    def __post_init__(self):
        if self.name not in _COMPARISONS:
            raise OpParameterError(f"Compare: unknown comparison {self.name!r}; expected "
                                   f"one of {', '.join(_COMPARISONS)}")

    def input_count(self) -> int:
        return 2

    def eval(self, ctx, inputs):
        xp, (x, y) = operands(inputs, self)
        compare = _COMPARISONS[self.name]
        if xp is NUMPY.xp:
            return [np.asarray(compare(x, y))]          # NumPy gives 0-d results as scalars
        return [getattr(xp, compare.__name__)(x, y)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [None]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        _not_linear(self)


# --- maximum and minimum --------------------------------------------------------------


def _tie_weight(builder, x, y, strict: str, dtype: str) -> ew.Sym:
    """``1`` where ``x strict y``, ``1/2`` where ``x == y``, else ``0``, in ``dtype`` (primal)."""
    to_dtype = ew.ConvertElementType(dtype, "bool")
    wins = emit(builder, to_dtype, [Local(emit(builder, Compare(strict), [x, y]))])
    ties = emit(builder, to_dtype, [Local(emit(builder, Compare("eq"), [x, y]))])
    return ew.Sym(builder, Local(wins)) + ew.Sym(builder, Local(ties)) * 0.5


class _Extremum(TensorPrimitive):
    __slots__ = ()
    _fn = None                      # a NumPy ufunc, whose name is the Array API's
    _wins = ""
    _loses = ""
    batch_rule = batch_elementwise

    def input_count(self) -> int:
        return 2

    def eval(self, ctx, inputs):
        xp, (x, y) = operands(inputs, self)
        fn = type(self)._fn
        return [fn(x, y) if xp is NUMPY.xp else getattr(xp, fn.__name__)(x, y)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        x, y = External(primal_inputs[0]), External(primal_inputs[1])
        tx, ty = tangent_inputs
        terms = []
        if tx is not None:
            weight = _tie_weight(builder, x, y, self._wins, self.dtype)
            terms.append(ew.scale_tangent(builder, tx, weight))
        if ty is not None:
            weight = _tie_weight(builder, x, y, self._loses, self.dtype)
            terms.append(ew.scale_tangent(builder, ty, weight))
        return [ew._sum_terms(builder, *terms) if len(terms) == 2 else terms[0]]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        _not_linear(self)


@tensor_op
class Maximum(_Extremum):
    """``np.maximum`` of operands of one shape and ``dtype``; ties split the tangent evenly."""

    dtype: str
    name = "maximum"
    _fn = staticmethod(np.maximum)
    _wins, _loses = "gt", "lt"


@tensor_op
class Minimum(_Extremum):
    """``np.minimum`` of operands of one shape and ``dtype``; ties split the tangent evenly."""

    dtype: str
    name = "minimum"
    _fn = staticmethod(np.minimum)
    _wins, _loses = "lt", "gt"


# --- complex parts ---------------------------------------------------------------------


@tensor_op
class ComplexAbs(TensorPrimitive):
    """``|z|`` of complex ``z`` of ``dtype``: real result; ``d|z| = Re(conj(z) dz) / |z|``,
    and 0 at ``z = 0`` (PyTorch's convention; JAX gives NaN there)."""

    dtype: str
    name = "complex_abs"
    batch_rule = batch_elementwise

    def eval(self, ctx, inputs):
        xp, (z,) = operands(inputs, self)
        return [xp.abs(z)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        z, r = External(primal_inputs[0]), External(primal_outputs[0])
        as_complex = ew.ConvertElementType(self.dtype, real_dtype_name(self.dtype))
        unit = emit(builder, ew.div_or_zero, [z, Local(emit(builder, as_complex, [r]))])  # z/|z|
        projected = emit(builder, ew.mul_conj, [Local(tangent_inputs[0]), Local(unit)], LIN_TF)
        return [emit(builder, Real(self.dtype), [Local(projected)], LIN)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        _not_linear(self)


@tensor_op
class Real(LinearOp):
    """``np.real`` of a complex operand of ``dtype``; transposes to the cotangent as complex."""

    dtype: str
    name = "real"
    batch_rule = batch_elementwise

    def eval(self, ctx, inputs):
        xp, (z,) = operands(inputs, self)
        return [xp.real(z)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        as_complex = ew.ConvertElementType(self.dtype, real_dtype_name(self.dtype))
        return [emit(builder, as_complex, [Local(cotangent_outputs[0])], LIN)]


@tensor_op
class Imag(LinearOp):
    """``np.imag`` of a complex operand of ``dtype``; transposes to ``1j * ct``."""

    dtype: str
    name = "imag"
    batch_rule = batch_elementwise

    def eval(self, ctx, inputs):
        xp, (z,) = operands(inputs, self)
        return [xp.imag(z)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        as_complex = ew.ConvertElementType(self.dtype, real_dtype_name(self.dtype))
        ct = emit(builder, as_complex, [Local(cotangent_outputs[0])], LIN)
        return [emit(builder, ew.Scale(1j), [Local(ct)], LIN)]


__all__ = ["Full", "zeros", "zeros_like", "Select", "Compare", "Maximum", "Minimum",
           "ComplexAbs", "Real", "Imag", "real_dtype_name"]
