"""The tensor set's rewrite patterns, its part in ``tidu.optimize`` besides constant folding.

:func:`simplify` is the set's ``simplify`` hook (:data:`.base.TENSOR_SET`); the
folding hook is :func:`.constants.constant_op`. Each rule looks at one op and at
the producers of its inputs (:func:`tidu.compile.producer`) and returns one value
key per output, or ``None``:

=================================  ==========================================
``add(x, 0)``, ``add(0, x)``       ``x``
``sub(x, 0)``                      ``x``
``mul(x, 1)``, ``mul(1, x)``       ``x``; ``mul_conj(x, 1)`` too
``div(x, 1)``                      ``x`` (floating ``x``); ``div_or_zero`` too
``mul(x, 0)``, ``mul(0, x)``       zeros, for integer and bool dtypes only
``neg(neg(x))``                    ``x``
``neg(scale[c](x))``               ``scale[-c](x)``, and ``scale[c](neg(x))``
``conj(conj(x))``                  ``x``
``scale[1](x)``                    ``x``
``scale[a](scale[b](x))``          ``scale[a*b](x)`` when ``a`` or ``b`` is ``-1``
``transpose(transpose(x))``        one transpose, or ``x``
``reshape(reshape(x))``            one reshape, or ``x`` when the shape returns
``reduce_sum(broadcast(x))``       ``scale[n](x)`` back to ``x``'s shape: ``n`` copies
                                   summed; ``x`` when ``n`` is 1
``convert(convert(x))``            one convert (or ``x``) when the first is lossless
``select(p, a, a)``                ``a``
identity ops                       ``x``: ``reshape``/``transpose``/``broadcast``
                                   to the same shape, ``reduce_sum`` over no axis,
                                   ``convert`` to the same dtype
=================================  ==========================================

"0" and "1" are constants: a ``Full`` or a uniform ``Literal`` (which is
what folding makes of any uniform value). A zero tangent or cotangent passes
through a one-input op (``reshape``, ``transpose``, ``broadcast_in_dim``,
``reduce_sum``, ``neg``, ``scale``, ``convert_element_type``, ``real`` ...) by
constant folding: the op's inputs are all constants, ``tidu.optimize`` evaluates
it and :func:`.constants.constant_op` turns the uniform result back into a ``Full``.

**Values.** A rule fires only where the rewrite computes what the original
does, value for value as NumPy compares them (``array_equal(..., equal_nan=True)``)
and with the same dtype and shape, for *every* input, inf and NaN included:

- ``x * 0`` is not zero for ``x = inf`` or NaN, so it is rewritten only for
  integer and bool dtypes (as in JAX, whose simplifier leaves float ``x * 0``
  alone). For the same reason a zero tangent is *not* carried through ``mul``,
  ``div`` or ``dot_general`` with a non-constant operand: ``0 * inf`` is NaN,
  and a NaN derivative must stay NaN.
- ``scale[a](scale[b](x))`` rounds twice and may overflow in between, so it
  becomes one scale only when a factor is ``-1`` (and ``scale[1]`` is ``x``).
- Rules whose result depends on the dtype fire only when the dtype is known:
  from a constant operand (elementwise operands share one dtype), from the
  producer, which states it (``TensorPrimitive.output_dtype()``: ``full``,
  ``convert_element_type``...) or makes floating values whatever its inputs
  (``floating_output()``: ``exp``, ``div``...), or because the op is linear work
  (``role`` ``Linearized``), whose values are floating.

Three exceptions, pinned by ``tests/test_simplify_rules.py``:

- the sign of a zero: ``-0.0 + 0.0`` is ``+0.0``, so ``x + 0 -> x`` may give
  ``-0.0`` where the original gave ``+0.0`` (XLA makes the same rewrite; NumPy's
  own ``sum`` turns ``-0.0`` into ``+0.0``);
- complex values with an infinite or NaN part: NumPy multiplies by a real
  ``1`` or ``-1`` as by ``1+0j``, so ``(inf+0j) * 1`` is ``inf+nanj``; the
  ``x * 1`` and ``-1``-scale rules return ``inf+0j`` (C99 Annex G's answer);
- ``reduce_sum(broadcast(x))`` over ``n`` copies becomes ``x * n``, rounded once,
  while NumPy's summation rounds at each partial sum: they agree to rounding
  (a few ulps) and the product is the more accurate.

>>> import numpy as np
>>> from tidu import optimize
>>> from tidu.graph import GraphBuilder, Input, Local, evaluate
>>> from primitives.tensor.ops.shape import Reshape
>>> b = GraphBuilder()
>>> x = b.add_input("x")
>>> [y] = b.add_operation(Reshape((3, 2), (2, 3)), [Local(x)])
>>> b.set_outputs(b.add_operation(Reshape((2, 3), (3, 2)), [Local(y)]))
>>> g = b.build()
>>> program = optimize(g, g.output_keys)           # the shape returns: no op left
>>> len(program.operations), program.output_keys
(0, (Input('x'),))

It imports :mod:`.base`, :mod:`.shape`, :mod:`.constants`, :mod:`.select` and
:mod:`.elementwise`, of :mod:`primitives.tensor.ops`: the ops its patterns rewrite.
"""

from __future__ import annotations

import math

import numpy as np

from tidu.compile import forwarded, producer
from tidu.graph import Linearized
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.base import TensorPrimitive
from primitives.tensor.ops.constants import Full, Literal
from primitives.tensor.ops.select import Select
from primitives.tensor.ops.shape import BroadcastInDim, ReduceSum, Reshape, Transpose


# --- constants ----------------------------------------------------------------------


def _uniform_value(key):
    """``(value, dtype)`` if a ``Full`` or a uniform ``Literal`` makes ``key``, else ``None``."""
    made = producer(key)
    if made is None:
        return None
    op = made.operation
    if type(op) is Full:
        return op.value, op.dtype
    if type(op) is Literal and len(op.data) == np.dtype(op.dtype).itemsize:
        return op.elements()[0], op.dtype
    return None


def _is_const(key, number) -> bool:
    """Whether ``key`` is a constant whose every element equals ``number`` (0 or 1)."""
    found = _uniform_value(key)
    return found is not None and found[0] == number


def _dtype_kind(key) -> str | None:
    """The NumPy kind (``"f"``, ``"c"``, ``"i"`` ...) of a constant's dtype, or ``None``."""
    found = _uniform_value(key)
    return None if found is None else np.dtype(found[1]).kind


# --- what is known about a value's dtype -------------------------------------------------


def _is_floating(key) -> bool:
    """Whether ``key`` is known to hold floating (real or complex) values.

    True for linear work (tangents and cotangents are floating) and for outputs
    of ops whose dtype is stated or floating whatever the input (``exp``, ``div``...).
    """
    made = producer(key)
    if made is None:
        return False
    if type(made.role) is Linearized:
        return True
    op = made.operation
    return isinstance(op, TensorPrimitive) and op.floating_output()


def _floating_input(key, role) -> bool:
    """Whether an op of ``role`` reading ``key`` reads floating values."""
    return type(role) is Linearized or _is_floating(key)


# --- helpers for rules ------------------------------------------------------------------


def _made_by(key, kind, role, name: str | None = None):
    """The producer of ``key`` if it is an op of type ``kind`` (and ``name``) with ``role``."""
    made = producer(key)
    if made is None or type(made.operation) is not kind or made.role != role:
        return None
    if name is not None and made.operation.name != name:
        return None
    return made


def _is_real_number(number, value) -> bool:
    """Whether ``number`` is the real Python number ``value`` (a factor that keeps the dtype)."""
    return type(number) in (int, float) and number == value


# --- elementwise arithmetic -------------------------------------------------------------


def _add(op, rewriter, inputs, role):
    """``x + 0 -> x`` and ``0 + x -> x``."""
    x, y = inputs
    if _is_const(y, 0):
        return forwarded(inputs, role, 0)
    if _is_const(x, 0):
        return forwarded(inputs, role, 1)
    return None


def _sub(op, rewriter, inputs, role):
    """``x - 0 -> x``."""
    return forwarded(inputs, role, 0) if _is_const(inputs[1], 0) else None


def _mul(op, rewriter, inputs, role):
    """``x * 1 -> x``, ``1 * x -> x``; ``x * 0`` and ``0 * x`` -> zeros for integer dtypes."""
    x, y = inputs
    if _is_const(y, 1):
        return forwarded(inputs, role, 0)
    if op.name == "mul" and _is_const(x, 1):
        return forwarded(inputs, role, 1)
    for constant in (x, y):
        if _is_const(constant, 0) and _dtype_kind(constant) in ("b", "i", "u"):
            zero = producer(constant).operation           # a Full or a Literal
            return rewriter.emit(Full(tuple(zero.shape), zero.dtype), [])
    return None


def _div(op, rewriter, inputs, role):
    """``x / 1 -> x`` for floating ``x`` (integer ``x / 1`` is a float array)."""
    y = inputs[1]
    if _is_const(y, 1) and _dtype_kind(y) in ("f", "c"):
        return forwarded(inputs, role, 0)
    return None


_BINARY = {"add": _add, "sub": _sub, "mul": _mul, "mul_conj": _mul,
           "div": _div, "div_or_zero": _div, "div_conj": _div, "div_or_zero_conj": _div}


def _binary(op, rewriter, inputs, role):
    rule = _BINARY.get(op.name)
    return None if rule is None else rule(op, rewriter, inputs, role)


def _unary(op, rewriter, inputs, role):
    """``neg(neg(x)) -> x``, ``conj(conj(x)) -> x``, ``neg(scale[c](x)) -> scale[-c](x)``."""
    if op.name not in ("neg", "conj"):
        return None
    inner = _made_by(inputs[0], ew.Unary, role, op.name)
    if inner is not None:
        return [inner.inputs[0]]
    if op.name == "neg":
        scaled = _made_by(inputs[0], ew.Scale, role)
        if scaled is not None and _floating_input(scaled.inputs[0], role):
            return rewriter.emit(ew.Scale(-scaled.operation.factor), scaled.inputs, role)
    return None


def _scale(op, rewriter, inputs, role):
    """``scale[1](x) -> x``; ``scale[a](scale[b](x)) -> scale[a*b](x)`` when ``a`` or ``b``
    is ``-1``; ``scale[c](neg(x)) -> scale[-c](x)``."""
    factor = op.factor
    [x] = inputs
    if _is_real_number(factor, 1) and _floating_input(x, role):
        return [x]
    inner = _made_by(x, ew.Scale, role)
    if inner is not None and _floating_input(inner.inputs[0], role):
        other = inner.operation.factor
        if _is_real_number(factor, -1) or _is_real_number(other, -1):
            return rewriter.emit(ew.Scale(factor * other), inner.inputs, role)
    negated = _made_by(x, ew.Unary, role, "neg")
    if negated is not None and _floating_input(negated.inputs[0], role):
        return rewriter.emit(ew.Scale(-factor), negated.inputs, role)
    return None


def _convert(op, rewriter, inputs, role):
    """``convert[a->b](x) -> x`` when ``a`` is ``b``; ``convert[b->c](convert[a->b](x))
    -> convert[a->c](x)`` when ``a -> b`` is lossless (and ``x`` when ``c`` is ``a``)."""
    if op.new_dtype == op.old_dtype:
        return [inputs[0]]
    inner = _made_by(inputs[0], ew.ConvertElementType, role)
    if inner is None:
        return None
    first, second = inner.operation, op
    a, b, c = (np.dtype(first.old_dtype), np.dtype(first.new_dtype),
               np.dtype(second.new_dtype))
    if b != np.dtype(second.old_dtype) or not _lossless(a, b) or not _same_as_direct(a, b, c):
        return None
    if c == a:
        return [inner.inputs[0]]
    return rewriter.emit(ew.ConvertElementType(c.name, a.name), inner.inputs, role)


def _lossless(a: np.dtype, b: np.dtype) -> bool:
    """Whether converting ``a`` to ``b`` keeps every value exactly."""
    if a.kind == "b":
        return True
    if a.kind in "iu" and b.kind in "fc":
        digits = np.finfo(b).nmant + 1                 # integers up to 2**digits are exact
        return np.iinfo(a).bits - (a.kind == "i") <= digits
    return bool(np.can_cast(a, b, casting="safe"))


def _same_as_direct(a: np.dtype, b: np.dtype, c: np.dtype) -> bool:
    """Whether ``b -> c`` of a value of ``a`` (already exact in ``b``) is ``a -> c`` of it.

    It is when ``c`` is floating or bool (one rounding of the same number), or
    when all three are integers (the same wrap-around); a float out of an
    integer's range converts differently by source type, so not then.
    """
    return c.kind in "fcb" or (a.kind in "biu" and b.kind in "biu" and c.kind in "biu")


# --- shapes -------------------------------------------------------------------------------


def _transpose(op, rewriter, inputs, role):
    """``transpose(transpose(x))`` -> one transpose, or ``x``; an identity permutation -> ``x``."""
    permutation = tuple(op.permutation)
    inner = _made_by(inputs[0], Transpose, role)
    if inner is not None:
        first = inner.operation.permutation
        permutation = tuple(first[axis] for axis in permutation)
        inputs = inner.inputs
    if permutation == tuple(range(len(permutation))):
        return [inputs[0]]
    return rewriter.emit(Transpose(permutation), inputs, role) if inner is not None else None


def _reshape(op, rewriter, inputs, role):
    """``reshape(reshape(x))`` -> one reshape, or ``x`` when the shape returns; a reshape to
    the same shape -> ``x``."""
    new_shape, old_shape = tuple(op.new_shape), tuple(op.old_shape)
    inner = _made_by(inputs[0], Reshape, role)
    if inner is not None and tuple(inner.operation.new_shape) == old_shape:
        old_shape, inputs = tuple(inner.operation.old_shape), inner.inputs
    else:
        inner = None
    if new_shape == old_shape:
        return [inputs[0]]
    return rewriter.emit(Reshape(new_shape, old_shape), inputs, role) if inner is not None else None


def _broadcast(op, rewriter, inputs, role):
    """``broadcast_in_dim`` to the operand's own shape -> ``x``."""
    if (tuple(op.shape) == tuple(op.operand_shape)
            and tuple(op.broadcast_dimensions) == tuple(range(len(op.shape)))):
        return [inputs[0]]
    return None


def _reduce_sum(op, rewriter, inputs, role):
    """``reduce_sum`` over no axis -> ``x``; ``reduce_sum(broadcast_in_dim(x))`` over exactly
    the broadcast axes -> ``scale[n](x)`` (``n`` copies were summed), ``x`` when ``n`` is 1.

    Only for floating values: NumPy sums bool and small integers in a wider dtype.
    """
    [x] = inputs
    axes = tuple(op.axes)
    if not axes:
        return [x] if _floating_input(x, role) else None
    inner = _made_by(x, BroadcastInDim, role)
    if inner is None or tuple(inner.operation.shape) != tuple(op.shape):
        return None
    [operand] = inner.inputs
    shape, dims = tuple(op.shape), inner.operation.broadcast_dimensions
    operand_shape = tuple(inner.operation.operand_shape)
    size_one = {dim for dim, size in zip(dims, operand_shape) if size == 1}
    added = {axis for axis in range(len(shape)) if axis not in dims}
    grown = added | {dim for dim in size_one if shape[dim] != 1}
    if not (grown <= set(axes) <= added | size_one) or not _floating_input(operand, role):
        return None
    copies = math.prod(shape[axis] for axis in axes)
    kept = tuple(size for axis, size in enumerate(shape) if axis not in axes)
    if kept == operand_shape:
        return [operand] if copies == 1 else rewriter.emit(ew.Scale(copies), [operand], role)
    if copies == 1:
        return rewriter.emit(Reshape(kept, operand_shape), [operand], role)
    return None                  # a scale and a reshape: no fewer operations


def _select(op, rewriter, inputs, role):
    """``select(p, a, a) -> a``."""
    _, on_true, on_false = inputs
    return forwarded(inputs, role, 1) if on_true == on_false else None


_RULES = {
    ew.Binary: _binary,
    ew.Unary: _unary,
    ew.Scale: _scale,
    ew.ConvertElementType: _convert,
    Transpose: _transpose,
    Reshape: _reshape,
    BroadcastInDim: _broadcast,
    ReduceSum: _reduce_sum,
    Select: _select,
}


def simplify(op, rewriter, inputs, role, ctx):
    """A cheaper computation of ``op`` on ``inputs`` (one key per output), or ``None``.

    The rules are the table in this module's docstring, one function per op family.
    """
    rule = _RULES.get(type(op))
    return None if rule is None else rule(op, rewriter, inputs, role)
