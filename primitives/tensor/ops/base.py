"""What every tensor primitive shares: the base class, the set's hooks, emit helpers, roles.

Tensor primitives follow JAX's ``lax``: elementwise ops take operands of one
shape and one dtype (the NumPy-named functions insert ``broadcast_in_dim`` and
``convert_element_type``; ``add_broadcast``, a bias added to a batch, is the one op
that broadcasts an operand itself), and every op carries the static parameters
(shapes, axes, dtypes) its rules need, so rules never look at data. Ops are frozen
dataclasses: immutable, hashable, equal by value.

>>> from primitives.tensor.ops import elementwise as ew
>>> ew.add.eval(None, [np.ones(2), np.ones(2)])
[array([2., 2.])]

This module names no concrete op. What tidu asks of the set as a whole (the op
that sums cotangents, the op that makes a constant, the rewrite patterns) is in
:data:`TENSOR_SET`, which :mod:`primitives.tensor.ops` fills once it has
imported the op modules; :class:`TensorPrimitive`'s ``add()``, ``constant()``
and ``simplify()`` read it.

Rules share these op-independent helpers (the batch helpers that move and
broadcast batch axes emit ops of :mod:`.shape`, and live there):

- ``emit(builder, op, inputs, role) -> int``: a one-output op, emitted
- ``linear_mask(op, role) -> tuple``: which inputs of a transposed op are linear
- ``not_linear(op)``: raise for the transpose of an op that is not linear
- ``check_linear_in_first(op, role)``: raise for the transpose of an op linear in its
  first input only, asked for in another role
- :class:`FusedTangent`: the base of a derivative's tangent map fused into one op
- ``shift_axis(op, axis, batch_axis) -> int``: an axis parameter of ``op`` once a batch
  axis is at ``batch_axis`` (``ADRuleError`` for a negative one)
- ``with_batch(shape, batch_axis, axis_size) -> tuple``: a shape parameter, batched
- ``is_complex_dtype``, ``is_float_dtype``, ``real_dtype_name``: facts of a dtype

It imports tidu, NumPy and ``primitives.tensor``'s ``backends``, ``buffers``, ``core``
and ``errors``: no other module of :mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from typing import Callable, NamedTuple

import numpy as np

from tidu import ADRuleError, ADRuleKind, Primitive, TiduError
from tidu.graph import PRIMARY, EvaluableGraphOperation, Linearized, Local
from primitives.tensor import buffers
from primitives.tensor.backends import NUMPY, operands
from primitives.tensor.buffers import output_like, unshared
from primitives.tensor.core import dtype_of
from primitives.tensor.errors import TensorNotSupportedError

LIN = Linearized((True,))
LIN_TF = Linearized((True, False))
LIN_FT = Linearized((False, True))
LIN_TT = Linearized((True, True))


class OpParameterError(TiduError, ValueError):
    """A tensor op constructed with an invalid static parameter."""


def emit(builder, op, inputs, role=PRIMARY) -> int:
    """Emit a one-output op; return its id."""
    return builder.add_primitive(op, inputs, role)[0]


def apply_ufunc(ufunc, x, *others):
    """``ufunc(x, *others)``; a big result goes into a reused buffer (:mod:`..buffers`).

    The buffer is used only when the result is sure to have ``x``'s shape and
    dtype: every other operand is an array of that shape and dtype, or a real
    Python number, and ``ufunc`` keeps a floating dtype (as arithmetic does).
    """
    if type(x) is np.ndarray and x.nbytes >= buffers.MIN_BYTES:
        out = output_like(x)
        if out is not None and all(_same_layout(o, x) for o in others):
            return ufunc(x, *others, out=out)
    return ufunc(x, *others)


def _same_layout(other, x) -> bool:
    if type(other) is np.ndarray:
        return other.shape == x.shape and other.dtype == x.dtype
    return type(other) in (int, float)


def same_dtype(operand, out) -> bool:
    """Whether ``operand`` is a NumPy array of ``out``'s dtype: the ``fits`` test of
    :func:`reusable_output` for ops that broadcast their other operands."""
    return type(operand) is np.ndarray and operand.dtype == out.dtype


def reusable_output(inputs: list, reusable: tuple, fits: Callable = _same_layout
                    ) -> np.ndarray | None:
    """An input array an elementwise op may write its result into, or ``None``.

    ``reusable`` are positions a compiled program will not read again
    (``eval_reusing``'s argument). Such an input qualifies when it is big (at
    least ``buffers.MIN_BYTES``: small arrays come from ``malloc``'s free lists at
    no cost, and a ufunc with ``out=`` costs more than that), nothing else
    references it (no register, view or tensor: :func:`..buffers.unshared`), it
    owns writable floating-point memory, and every input is an array of its shape
    and dtype or a real Python number, so that a dtype-keeping ufunc's result
    has its shape and dtype too. An op that broadcasts its other operands passes
    ``fits(operand, out)``, the test each input must pass in place of that one.

    >>> big = np.ones(1 << 15)
    >>> reusable_output([big, np.ones(1 << 15)], (1,)) is not None
    True
    >>> reusable_output([big, np.ones(2)], (1,)) is None               # small: not worth it
    True
    """
    for i in reusable:
        if type(inputs[i]) is not np.ndarray or inputs[i].nbytes < buffers.MIN_BYTES:
            continue
        if not unshared(inputs, i):
            continue
        out = inputs[i]
        if (out.base is None and out.flags.writeable and out.dtype.kind in "fc"
                and all(fits(o, out) for o in inputs)):
            return out
    return None


def linear_mask(op, role) -> tuple:
    """The active mask of a transpose rule's role; PRIMARY work has none."""
    if role is PRIMARY:
        raise ADRuleError(repr(op), ADRuleKind.TRANSPOSE, "op was not emitted as linear work")
    return role.active_mask


def check_linear_in_first(op, role) -> None:
    """Raise for a transpose of ``op`` (linear in its first input, the other a primal
    operand) asked for in a role where another input is linear."""
    if linear_mask(op, role) != (True, False):
        raise ADRuleError(op.name, ADRuleKind.TRANSPOSE, f"{op.name} is linear in its first "
                          "input only")


def not_linear(op):
    """Raise for the transpose rule of ``op``, which is not linear."""
    raise ADRuleError(repr(op), ADRuleKind.TRANSPOSE, f"{op!r} is not linear")


def tensor_op(cls):
    """Make ``cls`` a frozen dataclass op with a cached hash (ops are hashed often)."""
    cls = dataclass(frozen=True, repr=False)(cls)
    field_hash = cls.__hash__

    def __hash__(self):
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = field_hash(self)
            object.__setattr__(self, "_hash", value)
            return value

    def __getstate__(self):          # the cached hash is salted per process: not pickled
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    cls.__hash__ = __hash__
    cls.__getstate__ = __getstate__
    return cls


class PrimitiveSetError(TiduError, RuntimeError):
    """The tensor set's hooks read before :mod:`primitives.tensor.ops` installed them, or
    installed twice."""


class _Hooks(NamedTuple):
    add: Primitive
    constant: Callable
    simplify: Callable


class PrimitiveSet:
    """What tidu asks of a primitive set as a whole, installed once (then fixed):

    - ``add``: the op that sums two values (``linear_transpose`` sums cotangents with it);
    - ``constant(value)``: an op with no inputs making ``value``, or ``None``
      (``tidu.optimize``'s constant folding);
    - ``simplify(op, rewriter, inputs, role, ctx)``: the set's rewrite patterns
      (``tidu.optimize``).

    >>> from primitives.tensor.ops import elementwise as ew
    >>> TENSOR_SET.add is ew.add, ew.exp.add() is ew.add
    (True, True)
    """

    __slots__ = ("name", "_hooks")

    def __init__(self, name: str) -> None:
        self.name = name
        self._hooks = None

    def install(self, *, add: Primitive, constant: Callable, simplify: Callable) -> None:
        if self._hooks is not None:
            raise PrimitiveSetError(f"the {self.name} set's hooks are installed already")
        self._hooks = _Hooks(add, constant, simplify)

    def _installed(self) -> _Hooks:
        if self._hooks is None:
            raise PrimitiveSetError(f"the {self.name} set's hooks are not installed: "
                                    "importing primitives.tensor.ops installs them")
        return self._hooks

    @property
    def add(self) -> Primitive:
        return self._installed().add

    @property
    def constant(self) -> Callable:
        return self._installed().constant

    @property
    def simplify(self) -> Callable:
        return self._installed().simplify


TENSOR_SET = PrimitiveSet("tensor")
"""The tensor set's hooks: ``elementwise.add``, ``constants.constant_op`` and
``simplify.simplify``, installed by :mod:`primitives.tensor.ops`."""


_ARRAY_OBJECT_BYTES = sys.getsizeof(np.empty(0))     # an ndarray without its data


class TensorPrimitive(Primitive, EvaluableGraphOperation):
    """Base of the NumPy tensor primitives. Subclasses are ``@tensor_op`` dataclasses."""

    __slots__ = ()

    #: Whether the rules read only the op's fields and what they are given, so that a
    #: program's derivative graphs can serve every program of the same structure (as
    #: ``jit`` assumes too). An op whose rules run user code (custom rules, which may
    #: read arrays they close over) sets it to ``False``.
    rules_read_fields_only = True

    @classmethod
    def add(cls):
        return TENSOR_SET.add

    def input_count(self) -> int:
        return 1

    def output_count(self) -> int:
        return 1

    def simplify(self, rewriter, inputs, role, ctx):
        """``tidu.optimize``'s rewrite hook: the set's patterns (:data:`TENSOR_SET`)."""
        return TENSOR_SET.simplify(self, rewriter, inputs, role, ctx)

    @classmethod
    def constant(cls, value):
        """``tidu.optimize``'s folding hook: the set's constants (:data:`TENSOR_SET`)."""
        return TENSOR_SET.constant(value)

    @classmethod
    def value_nbytes(cls, value) -> int:
        """Memory budgets' size hook: the bytes an array of any library (or a number)
        holds, its data and the array object itself (what ``tracemalloc`` counts for a
        NumPy array: small arrays are mostly object).

        >>> TensorPrimitive.value_nbytes(np.zeros((2, 3), np.float32)) - _ARRAY_OBJECT_BYTES
        24
        """
        nbytes = getattr(value, "nbytes", None)
        data = int(nbytes) if nbytes is not None else int(np.asarray(value).nbytes)
        return data + _ARRAY_OBJECT_BYTES

    def output_dtype(self) -> str | None:
        """The dtype (name) of the output when the op states it, else ``None``."""
        return None

    def floating_output(self) -> bool:
        """Whether the output is floating (real or complex) whatever the inputs' dtypes."""
        dtype = self.output_dtype()
        return dtype is not None and np.dtype(dtype).kind in "fc"

    def params(self) -> str:
        """The parameters shown in listings (override for a terser form)."""
        shown = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                 if f.name != "name"]
        return ", ".join(shown)

    def __repr__(self) -> str:
        name = getattr(self, "name", type(self).__name__.lower())
        params = self.params()
        return f"{name}[{params}]" if params else name



class FusedTangent(TensorPrimitive):
    """A derivative's tangent (or cotangent) map as one op: linear in its first input ``t``,
    its second ``y`` a primal value (``tanh_scaled``, ``log_softmax_linear``). On NumPy
    arrays of one dtype it runs the subclass's ``numpy_kernel(t, y, out=None)``, into an
    input a compiled program no longer reads when it fits; on other values its
    ``library_kernel(xp, t, y)``. Its transpose is ``transpose_op()``, applied to the
    cotangent with the same ``y``.

    >>> from primitives.tensor.ops.elementwise import TanhScaled
    >>> op = TanhScaled(False)
    >>> op.transpose_op(), op.eval(None, [np.array([2.0]), np.array([0.5])])
    (tanh_scaled[conjugate=True], [array([1.5])])
    """

    __slots__ = ()
    memory_bound = True          # recomputed under the eager "balanced" strategy

    def input_count(self) -> int:
        return 2

    def floating_output(self) -> bool:
        return True

    def numpy_kernel(self, t, y, out=None):
        raise NotImplementedError

    def library_kernel(self, xp, t, y):
        raise NotImplementedError

    def transpose_op(self) -> "FusedTangent":
        raise NotImplementedError

    def eval(self, ctx, inputs):
        t, y = inputs
        if type(t) is np.ndarray and type(y) is np.ndarray and t.dtype == y.dtype:
            return [self.numpy_kernel(t, y)]
        xp, (t, y) = operands(inputs, self)
        out = self.library_kernel(xp, t, y)
        return [np.asarray(out) if xp is NUMPY.xp else out]       # numbers, mixed dtypes

    def eval_reusing(self, ctx, inputs, reusable):
        """``eval``, into an input a compiled program no longer reads, when it fits."""
        out = reusable_output(inputs, reusable)      # (t and y then have its shape and dtype)
        if out is None:
            return self.eval(ctx, inputs)
        return [self.numpy_kernel(inputs[0], inputs[1], out)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        check_linear_in_first(self, role)
        return [emit(builder, self.transpose_op(), [Local(cotangent_outputs[0]), inputs[1]],
                     LIN_TF), None]

def shift_axis(op, axis: int, batch_axis: int) -> int:
    """``op``'s (non-negative) axis parameter ``axis`` once a batch axis is at ``batch_axis``."""
    if axis < 0:
        raise ADRuleError(repr(op), ADRuleKind.BATCH,
                          f"its axis {axis} counts from the end, which batching cannot shift")
    return axis + (axis >= batch_axis)


def with_batch(shape: tuple, batch_axis: int, axis_size: int) -> tuple:
    """``shape`` with the batch axis of length ``axis_size`` inserted at ``batch_axis``."""
    return tuple(shape[:batch_axis]) + (axis_size,) + tuple(shape[batch_axis:])


def check_ordered(xp, x, name: str) -> None:
    """Raise for complex ``x`` on PyTorch, which does not order complex numbers (NumPy, and
    so Dask and CuPy, order them lexicographically); ``name`` is the op's.

    >>> from primitives.tensor.backends import NUMPY
    >>> check_ordered(NUMPY.xp, np.array([1j]), "sort")       # NumPy orders them
    """
    if xp.name == "torch" and dtype_of(x).kind == "c":
        raise TensorNotSupportedError(f"{name}: PyTorch does not order complex numbers; "
                                      "apply it to the real part, the imaginary part or abs()")


def is_complex_dtype(dtype) -> bool:
    return np.issubdtype(np.dtype(dtype), np.complexfloating)


def is_float_dtype(dtype) -> bool:
    """Differentiable dtypes: real and complex floating point."""
    return np.issubdtype(np.dtype(dtype), np.inexact)


def real_dtype_name(dtype) -> str:
    """The real dtype of a complex one (``complex64`` -> ``float32``); real dtypes map to themselves."""
    dtype = np.dtype(dtype)
    return np.finfo(dtype).dtype.name if dtype.kind == "c" else dtype.name


class LinearOp(TensorPrimitive):
    """A linear op: its JVP applies the op itself to the tangent."""

    __slots__ = ()

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [emit(builder, self, [Local(tangent_inputs[0])], LIN)]
