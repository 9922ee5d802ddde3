"""Elementwise primitives: operands of one shape and dtype, rules next to each op.

Unary ops with a holomorphic derivative are defined in one line from that
derivative, the way ChainRules' ``@scalar_rule`` does; the derivative is
written on symbolic handles (``x``: the input, ``y``: the output) and becomes
primal work in the linear graph:

>>> exp.eval(None, [np.zeros(2)])
[array([1., 1.])]

Complex numbers follow tidu's convention: the JVP of a holomorphic ``f`` is
``f'(z) dz``; transposes are adjoints for ``Re(sum(conj(a) * b))``, so
multiplication by ``c`` transposes to multiplication by ``conj(c)`` (``mul_conj``).
"""

from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple

import numpy as np

from tidu import ADRuleError, ADRuleKind
from tidu.graph import External, Local
from primitives.tensor.ops.base import (
    LIN,
    LIN_FT,
    LIN_TF,
    LIN_TT,
    LinearOp,
    TensorPrimitive,
    apply_ufunc,
    emit,
    reusable_output,
    linear_mask,
    tensor_op,
)


# --- symbolic handles for derivative expressions ------------------------------------


class Sym:
    """A value inside a rule; arithmetic on it emits primal ops into the rule's builder."""

    __slots__ = ("builder", "ref")

    def __init__(self, builder, ref) -> None:
        self.builder = builder
        self.ref = ref

    def _emit(self, op, *others) -> "Sym":
        return Sym(self.builder, Local(emit(self.builder, op, [self.ref] + [o.ref for o in others])))

    def __add__(self, other):
        return self._emit(add, other) if isinstance(other, Sym) else self._emit(Affine(1, other))

    __radd__ = __add__

    def __sub__(self, other):
        return self._emit(sub, other) if isinstance(other, Sym) else self._emit(Affine(1, -other))

    def __rsub__(self, other):                      # other - self
        return self._emit(Affine(-1, other))

    def __mul__(self, other):
        return self._emit(mul, other) if isinstance(other, Sym) else self._emit(Scale(other))

    __rmul__ = __mul__

    def __truediv__(self, other):
        return self._emit(div, other) if isinstance(other, Sym) else self._emit(Scale(1 / other))

    def __rtruediv__(self, other):                  # other / self
        return self._emit(IntegerPow(-1))._emit(Scale(other))

    def __neg__(self):
        return self._emit(neg)

    def __pow__(self, n: int):
        return self._emit(IntegerPow(n))

    def apply(self, op) -> "Sym":
        """``op(self)`` for a unary op."""
        return self._emit(op)


def scale_tangent(builder, tangent: int, factor: Sym) -> int:
    """``tangent * factor`` as linear work (``factor`` is primal)."""
    return emit(builder, mul, [Local(tangent), factor.ref], LIN_TF)


# --- unary ops ----------------------------------------------------------------------


class _UnaryRules(NamedTuple):
    fn: Callable
    jvp: Callable | None         # (builder, x_key, y_key, tangent) -> tangent id | None
    transpose: Callable | None   # (builder, cotangent, x_key) -> cotangent id | None
    into: Callable | None        # fn(x, out=buffer), for ufuncs that keep the dtype


_UNARY: dict[str, _UnaryRules] = {}

# Ufuncs whose result has their floating operands' dtype: their big results can go
# into reused buffers (apply_ufunc), and into inputs a compiled program no longer
# reads (eval_reusing).
_KEEP_DTYPE = {np.negative, np.exp, np.log, np.sin, np.cos, np.tanh, np.sqrt,
               np.add, np.subtract, np.multiply, np.divide}


def _buffered(fn: Callable) -> Callable:
    return partial(apply_ufunc, fn) if fn in _KEEP_DTYPE else fn


def _into(fn: Callable) -> Callable | None:
    return fn if fn in _KEEP_DTYPE else None


@tensor_op
class Unary(TensorPrimitive):
    """An elementwise unary op, by name; its rules live in this module's registry."""

    name: str

    def eval(self, ctx, inputs):
        return [_UNARY[self.name].fn(inputs[0])]

    def eval_reusing(self, ctx, inputs, reusable):
        """``eval``, into the input when a compiled program no longer reads it and it fits."""
        into = _UNARY[self.name].into
        out = None if into is None else reusable_output(inputs, reusable)
        return self.eval(ctx, inputs) if out is None else [into(inputs[0], out=out)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        rule = _UNARY[self.name].jvp
        if rule is None:
            raise ADRuleError(self.name, ADRuleKind.JVP)
        return [rule(builder, primal_inputs[0], primal_outputs[0], tangent_inputs[0])]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        rule = _UNARY[self.name].transpose
        if rule is None:
            raise ADRuleError(self.name, ADRuleKind.TRANSPOSE, f"{self.name} is not linear")
        return [rule(builder, cotangent_outputs[0], inputs[0].key)]


def unary(name: str, fn: Callable, *, deriv: Callable | None = None, jvp: Callable | None = None,
          transpose: Callable | None = None) -> Unary:
    """Register an elementwise unary op and return it.

    ``deriv(x, y)`` gives ``f'(x)`` from symbolic input ``x`` and output ``y``
    (the JVP is then ``f'(x) * t``); or pass a full ``jvp(builder, x, y, t)``.
    Linear ops also give ``transpose(builder, ct, x)``.
    """
    if deriv is not None:
        def jvp(builder, x, y, t, _deriv=deriv):
            factor = _deriv(Sym(builder, External(x)), Sym(builder, External(y)))
            return scale_tangent(builder, t, factor)
    _UNARY[name] = _UnaryRules(_buffered(fn), jvp, transpose, _into(fn))
    return Unary(name)


def _linear(op_name: str):
    """JVP of a linear unary op: the op applied to the tangent."""
    return lambda b, x, y, t: emit(b, Unary(op_name), [Local(t)], LIN)


neg = unary("neg", np.negative, jvp=_linear("neg"),
            transpose=lambda b, ct, x: emit(b, neg, [Local(ct)], LIN))
conj = unary("conj", lambda a: np.conj(a) if np.iscomplexobj(a) else a, jvp=_linear("conj"),
             transpose=lambda b, ct, x: emit(b, conj, [Local(ct)], LIN))
exp = unary("exp", np.exp, deriv=lambda x, y: y)
log = unary("log", np.log, deriv=lambda x, y: 1 / x)
sin = unary("sin", np.sin, deriv=lambda x, y: x.apply(cos))
cos = unary("cos", np.cos, deriv=lambda x, y: -x.apply(sin))
tanh = unary("tanh", np.tanh, deriv=lambda x, y: 1 - y * y)
sqrt = unary("sqrt", np.sqrt, deriv=lambda x, y: 0.5 / y)
sign = unary("sign", np.sign, jvp=lambda b, x, y, t: None)       # zero almost everywhere
abs_real = unary("abs", np.abs, deriv=lambda x, y: x.apply(sign))


# --- ops with a scalar parameter ------------------------------------------------------


def _is_real(number) -> bool:
    """A real Python number: multiplying a float array by it keeps the array's dtype."""
    return type(number) in (int, float)


@tensor_op
class Scale(LinearOp):
    """``factor * x`` for a constant: linear; transposes to ``conj(factor) * ct``."""

    factor: complex | float | int
    name = "scale"

    def eval(self, ctx, inputs):
        return [inputs[0] * self.factor]

    def eval_reusing(self, ctx, inputs, reusable):
        """``eval``, into the input when a compiled program no longer reads it and it fits."""
        out = reusable_output(inputs, reusable) if _is_real(self.factor) else None
        if out is None:
            return self.eval(ctx, inputs)
        return [np.multiply(inputs[0], self.factor, out=out)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, Scale(np.conj(self.factor).item() if isinstance(self.factor, complex)
                                    else self.factor), [Local(cotangent_outputs[0])], LIN)]


@tensor_op
class Affine(TensorPrimitive):
    """``scale * x + offset`` for constants, in one pass (not linear: no transpose).

    Derivative expressions such as ``1 - y * y`` use it, so they make one
    temporary array instead of two.
    """

    scale: complex | float | int
    offset: complex | float | int
    name = "affine"

    def eval(self, ctx, inputs):
        x = inputs[0]
        out = apply_ufunc(np.multiply, x, self.scale) if self.scale != 1 else np.array(x, copy=True)
        out += self.offset           # in place on the fresh array (dtype kept, as in NumPy)
        return [out]

    def eval_reusing(self, ctx, inputs, reusable):
        """``eval``, into the input when a compiled program no longer reads it and it fits."""
        fits = _is_real(self.scale) and _is_real(self.offset)
        out = reusable_output(inputs, reusable) if fits else None
        if out is None:
            return self.eval(ctx, inputs)
        np.multiply(inputs[0], self.scale, out=out)
        out += self.offset
        return [out]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if self.scale == 1:
            return [tangent_inputs[0]]
        return [emit(builder, Scale(self.scale), [Local(tangent_inputs[0])], LIN)]


@tensor_op
class IntegerPow(TensorPrimitive):
    """``x ** n`` for a constant integer ``n`` (``lax.integer_pow``)."""

    n: int
    name = "integer_pow"

    def eval(self, ctx, inputs):
        x = inputs[0]
        if self.n < 0:
            return [np.reciprocal(x ** -self.n) if np.issubdtype(x.dtype, np.inexact)
                    else 1.0 / x ** -self.n]
        return [x ** self.n]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if self.n == 0:
            return [None]
        if self.n == 1:
            return [tangent_inputs[0]]
        x = Sym(builder, External(primal_inputs[0]))
        factor = x * 2 if self.n == 2 else x.apply(IntegerPow(self.n - 1)) * self.n
        return [scale_tangent(builder, tangent_inputs[0], factor)]


@tensor_op
class Pow(TensorPrimitive):
    """``x ** p`` for a constant real or complex exponent ``p``."""

    exponent: complex | float
    name = "pow"

    def eval(self, ctx, inputs):
        return [np.power(inputs[0], self.exponent)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if self.exponent == 0:
            return [None]
        x = Sym(builder, External(primal_inputs[0]))
        factor = x.apply(Pow(self.exponent - 1)) * self.exponent
        return [scale_tangent(builder, tangent_inputs[0], factor)]


# --- binary ops -------------------------------------------------------------------------


class _BinaryRules(NamedTuple):
    fn: Callable
    jvp: Callable          # (builder, x, y, out, tx, ty) -> tangent id | None
    transpose: Callable | None   # (builder, ct, x, y, mask) -> (ct_x, ct_y)
    into: Callable | None        # fn(x, y, out=buffer), when the result has x's dtype


_BINARY: dict[str, _BinaryRules] = {}


@tensor_op
class Binary(TensorPrimitive):
    """An elementwise binary op on operands of one shape and dtype."""

    name: str

    def input_count(self) -> int:
        return 2

    def eval(self, ctx, inputs):
        return [_BINARY[self.name].fn(inputs[0], inputs[1])]

    def eval_reusing(self, ctx, inputs, reusable):
        """``eval``, into an input a compiled program no longer reads, when it fits; so a
        cotangent sum (``add``) accumulates in place."""
        into = _BINARY[self.name].into
        out = None if into is None else reusable_output(inputs, reusable)
        return self.eval(ctx, inputs) if out is None else [into(inputs[0], inputs[1], out=out)]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        x, y = primal_inputs
        return [_BINARY[self.name].jvp(builder, x, y, primal_outputs[0], *tangent_inputs)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        rule = _BINARY[self.name].transpose
        if rule is None:
            raise ADRuleError(self.name, ADRuleKind.TRANSPOSE, f"{self.name} is not linear")
        x, y = inputs
        return list(rule(builder, cotangent_outputs[0], x, y, linear_mask(self, role)))


def binary(name: str, fn: Callable, jvp: Callable, transpose: Callable | None = None,
           into: Callable | None = None) -> Binary:
    """Register an elementwise binary op and return it (``into``: ``fn`` with ``out=``,
    by default ``fn`` itself for the ufuncs that keep the dtype)."""
    _BINARY[name] = _BinaryRules(_buffered(fn), jvp, transpose, into or _into(fn))
    return Binary(name)


def _sum_terms(builder, a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return b if a is None else a
    return emit(builder, add, [Local(a), Local(b)], LIN_TT)


def _add_jvp(b, x, y, out, tx, ty):
    return _sum_terms(b, tx, ty)


def _add_transpose(b, ct, x, y, mask):
    return (ct if mask[0] else None, ct if mask[1] else None)


def _sub_jvp(b, x, y, out, tx, ty):
    if ty is None:
        return tx
    if tx is None:
        return emit(b, neg, [Local(ty)], LIN)
    return emit(b, sub, [Local(tx), Local(ty)], LIN_TT)


def _sub_transpose(b, ct, x, y, mask):
    return (ct if mask[0] else None, emit(b, neg, [Local(ct)], LIN) if mask[1] else None)


def _mul_jvp(b, x, y, out, tx, ty):
    return _sum_terms(
        b,
        None if tx is None else emit(b, mul, [Local(tx), External(y)], LIN_TF),
        None if ty is None else emit(b, mul, [External(x), Local(ty)], LIN_FT),
    )


def _mul_transpose(b, ct, x, y, mask):
    if mask == (True, False):
        return (emit(b, mul_conj, [Local(ct), y], LIN_TF), None)
    if mask == (False, True):
        return (None, emit(b, mul_conj, [Local(ct), x], LIN_TF))
    raise ADRuleError("mul", ADRuleKind.TRANSPOSE, "mul is linear in one input at a time")


def _mul_conj_jvp(b, x, y, out, tx, ty):
    return _sum_terms(
        b,
        None if tx is None else emit(b, mul_conj, [Local(tx), External(y)], LIN_TF),
        None if ty is None else emit(b, mul_conj, [External(x), Local(ty)], LIN_FT),
    )


def _mul_conj_transpose(b, ct, x, y, mask):
    # t -> t conj(y) transposes to ct -> ct y;  t -> x conj(t) to ct -> x conj(ct)
    if mask == (True, False):
        return (emit(b, mul, [Local(ct), y], LIN_TF), None)
    if mask == (False, True):
        return (None, emit(b, mul_conj, [x, Local(ct)], LIN_FT))
    raise ADRuleError("mul_conj", ADRuleKind.TRANSPOSE, "mul_conj is linear in one input at a time")


def _div_jvp(b, x, y, out, tx, ty):
    terms = None if tx is None else emit(b, div, [Local(tx), External(y)], LIN_TF)
    if ty is not None:
        ratio = Sym(b, External(out)) / Sym(b, External(y))          # d(x/y)/dy = -out/y
        scaled = emit(b, mul, [Local(ty), ratio.ref], LIN_TF)
        terms = _sum_terms(b, terms, emit(b, neg, [Local(scaled)], LIN))
    return terms


def _div_transpose(b, ct, x, y, mask):
    if mask != (True, False):
        raise ADRuleError("div", ADRuleKind.TRANSPOSE, "div is linear in its numerator only")
    return (emit(b, div, [Local(ct), Local(emit(b, conj, [y]))], LIN_TF), None)


def _div_or_zero_fn(x, y):
    out = np.zeros(np.broadcast_shapes(np.shape(x), np.shape(y)), np.result_type(x, y))
    return np.divide(x, y, out=out, where=np.asarray(y) != 0)


def _div_or_zero_jvp(b, x, y, out, tx, ty):
    # as div's, with div_or_zero throughout: every term is 0 where y is 0
    terms = None if tx is None else emit(b, div_or_zero, [Local(tx), External(y)], LIN_TF)
    if ty is not None:
        ratio = emit(b, div_or_zero, [External(out), External(y)])
        scaled = emit(b, mul, [Local(ty), Local(ratio)], LIN_TF)
        terms = _sum_terms(b, terms, emit(b, neg, [Local(scaled)], LIN))
    return terms


def _div_or_zero_transpose(b, ct, x, y, mask):
    if mask != (True, False):
        raise ADRuleError("div_or_zero", ADRuleKind.TRANSPOSE,
                          "div_or_zero is linear in its numerator only")
    return (emit(b, div_or_zero, [Local(ct), Local(emit(b, conj, [y]))], LIN_TF), None)


def _conj_if_complex(b):
    dtype = getattr(b, "dtype", None)              # np.iscomplexobj, without its cost
    if dtype.kind == "c" if dtype is not None else isinstance(b, complex):
        return np.conj(b)
    return b


def _mul_conj_fn(a, b):
    return apply_ufunc(np.multiply, a, _conj_if_complex(b))


def _mul_conj_into(a, b, out):
    return np.multiply(a, _conj_if_complex(b), out=out)


add = binary("add", np.add, _add_jvp, _add_transpose)
sub = binary("sub", np.subtract, _sub_jvp, _sub_transpose)
mul = binary("mul", np.multiply, _mul_jvp, _mul_transpose)
mul_conj = binary("mul_conj", _mul_conj_fn, _mul_conj_jvp, _mul_conj_transpose,
                  _mul_conj_into)
div = binary("div", np.divide, _div_jvp, _div_transpose)
div_or_zero = binary("div_or_zero", _div_or_zero_fn, _div_or_zero_jvp, _div_or_zero_transpose)
"""``x / y``, and 0 where ``y`` is 0: ``|z|``'s derivatives are 0 at 0 with it (PyTorch's)."""


# --- dtype conversion -----------------------------------------------------------------


@tensor_op
class ConvertElementType(TensorPrimitive):
    """``x.astype(new_dtype)`` from ``old_dtype``. Real -> complex transposes to the real part."""

    new_dtype: str
    old_dtype: str
    name = "convert_element_type"

    def params(self) -> str:
        return f"{self.old_dtype}->{self.new_dtype}"

    def eval(self, ctx, inputs):
        x = inputs[0]
        if np.iscomplexobj(x) and not np.issubdtype(np.dtype(self.new_dtype), np.complexfloating):
            x = np.real(x)
        return [np.asarray(x).astype(self.new_dtype, copy=False)]

    def _differentiable(self) -> bool:
        return all(np.issubdtype(np.dtype(d), np.inexact) for d in (self.new_dtype, self.old_dtype))

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if not self._differentiable():
            return [None]
        return [emit(builder, self, [Local(tangent_inputs[0])], LIN)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        back = ConvertElementType(self.old_dtype, self.new_dtype)
        return [emit(builder, back, [Local(cotangent_outputs[0])], LIN)]
