"""NumPy-named functions over tensor primitives; they work on arrays, ``Tensor``s and tracers.

Each function does what NumPy does: it promotes dtypes and broadcasts shapes
(emitting ``convert_element_type`` and ``broadcast_in_dim``), then applies the
primitive.

>>> float(sum(exp(np.zeros(3))))
3.0
"""

from __future__ import annotations

import builtins
import numbers
import operator
import sys

import numpy as np

from primitives.tensor.backends import NUMPY, library_of, numpy_dtype, to_host
from primitives.tensor.core import Frontend, bind, data_of, dtype_of, shape_of
from primitives.tensor.errors import (TensorAxisError, TensorIndexError, TensorNotSupportedError,
                                      TensorShapeError, TensorTypeError)
from primitives.tensor.numpy.dispatch import array_function, array_ufunc, constant_data, implements
from primitives.tensor.numpy.methods import ArrayMethods
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.shape import BroadcastInDim, ReduceSum, Reshape, Transpose


def _first(results):
    return results[0]


# --- operands: Python sequences of tensors stack, as NumPy's array() would ----------------


def _public_caller() -> str:
    """The name of the innermost public function of this module on the stack (for errors)."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_name.startswith(("_", "<")) or
                                 frame.f_globals is not globals()):
        frame = frame.f_back
    return frame.f_code.co_name if frame is not None else "tnp"


def _holds_frontend(seq) -> bool:
    """Whether a (nested) list or tuple holds a tensor, a traced value or an array of another
    library than NumPy anywhere (any of which ``np.asarray`` would turn into NumPy data)."""
    pending = [seq]
    while pending:
        for item in pending.pop():
            if isinstance(item, Frontend):
                return True
            if isinstance(item, (list, tuple)):
                pending.append(item)
            elif not isinstance(item, _ARRAY_LIKE) and _is_foreign_array(item):
                return True
    return False


_ARRAY_LIKE = (Frontend, np.ndarray, np.generic, numbers.Number)


def _operand(x, fn: str | None = None):
    """Python sequences become arrays (``stack``-ed, with gradients, when they hold tensors or
    traced values); arrays, numbers and frontend values pass through; anything else (``None``,
    strings, generators...) is a ``TensorTypeError`` naming the tnp function."""
    if isinstance(x, _ARRAY_LIKE) or _is_foreign_array(x):
        return x
    if not isinstance(x, (list, tuple)):
        raise TensorTypeError(f"{fn or _public_caller()}: expected an array, a number or a (nested) "
                              f"list of them, got {type(x).__name__}")
    if not _holds_frontend(x):
        return np.asarray(x)
    if not x:
        raise TensorShapeError("array: an empty sequence holds nothing to stack")
    return stack([_operand(item) for item in x])


# --- promotion and broadcasting -----------------------------------------------------


def _is_array_like(value) -> bool:
    return isinstance(value, (Frontend, np.ndarray, np.generic, numbers.Number, list, tuple)) \
        or _is_foreign_array(value)


def _is_foreign_array(value) -> bool:
    """An array of another library than NumPy (PyTorch, CuPy, Dask: :mod:`.backends`)."""
    return library_of(value) is not NUMPY


def _is_python_scalar(value) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, np.generic)


def result_dtype(*args) -> np.dtype:
    """NumPy's result dtype, with Python scalars weak (``float32_array * 2.0`` stays float32)."""
    return np.result_type(*[a if _is_python_scalar(a) else dtype_of(a) for a in args])


def astype(x, dtype):
    """``x`` converted to ``dtype`` (a ``convert_element_type`` when it changes); ``dtype``
    may be another library's (``torch.float16``)."""
    dtype = numpy_dtype(dtype)
    x = _operand(x)
    if _is_python_scalar(x) or isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x, dtype=dtype) if not np.iscomplexobj(x) or dtype.kind == "c" \
            else np.asarray(np.real(x), dtype=dtype)
    old = dtype_of(x)
    if old == dtype:
        return x
    return _first(bind(ew.ConvertElementType(dtype.name, old.name), x))


def broadcast_to(x, shape):
    """``np.broadcast_to``: a ``broadcast_in_dim`` that aligns trailing axes."""
    x = _operand(x)
    shape = _shape_tuple(shape, "broadcast_to")
    old = shape_of(x)
    if old == shape:
        return x
    if len(old) > len(shape) or any(o not in (1, n) for o, n in zip(old[::-1], shape[::-1])):
        raise TensorShapeError(f"broadcast_to: cannot broadcast shape {old} to {shape}")
    dims = tuple(range(len(shape) - len(old), len(shape)))
    return _first(bind(BroadcastInDim(shape, dims, old), x))


def _agree(first, second=None, *rest) -> bool:
    """Whether two operands (arrays, tensors, tracers) have one shape and one dtype."""
    try:
        return not rest and first.shape == second.shape and first.dtype == second.dtype
    except AttributeError:                      # a Python number or a list
        return False


def _elementwise(op, *args):
    """Promote ``args`` to one dtype and broadcast them to one shape, then apply ``op``."""
    if _agree(*args):                           # fast path: nothing to promote or broadcast
        return bind(op, *args)[0]
    args = [_operand(a) for a in args]
    dtype = result_dtype(*args)
    try:
        shape = np.broadcast_shapes(*[shape_of(a) for a in args])
    except ValueError:
        raise TensorShapeError(f"{op!r}: operands could not be broadcast together with shapes "
                               f"{' '.join(str(shape_of(a)) for a in args)}") from None
    return _first(bind(op, *[broadcast_to(astype(a, dtype), shape) for a in args]))


def _float_dtype(x) -> np.dtype:
    """The dtype a transcendental function computes in (ints become float64)."""
    dtype = dtype_of(x) if not _is_python_scalar(x) else np.asarray(x).dtype
    return dtype if np.issubdtype(dtype, np.inexact) else np.dtype(np.float64)


def _unary_float(op):
    def fn(x):
        if getattr(getattr(x, "dtype", None), "kind", None) in ("f", "c"):   # fast path
            return bind(op, x)[0]
        x = _operand(x, op.name)
        return _first(bind(op, astype(x, _float_dtype(x))))
    fn.__name__ = op.name
    fn.__doc__ = f"``np.{op.name}``, differentiable."
    return implements(getattr(np, op.name))(fn)


# --- elementwise ----------------------------------------------------------------------

exp = _unary_float(ew.exp)
log = _unary_float(ew.log)
sin = _unary_float(ew.sin)
cos = _unary_float(ew.cos)
tanh = _unary_float(ew.tanh)
sqrt = _unary_float(ew.sqrt)


@implements(np.negative)
def negative(x):
    """``np.negative``."""
    return _first(bind(ew.neg, _operand(x)))


@implements(np.positive)
def positive(x):
    """``np.positive``: ``x`` itself."""
    return _operand(x)


@implements(np.conj)
def conj(x):
    """``np.conj``: the identity on real values."""
    x = _operand(x)
    return _first(bind(ew.conj, x)) if np.issubdtype(dtype_of(x), np.complexfloating) else x


conjugate = conj


@implements(np.add)
def add(x, y):
    """``np.add``."""
    return _elementwise(ew.add, x, y)


@implements(np.subtract)
def subtract(x, y):
    """``np.subtract``."""
    return _elementwise(ew.sub, x, y)


@implements(np.multiply)
def multiply(x, y):
    """``np.multiply``."""
    return _elementwise(ew.mul, x, y)


@implements(np.divide)
def divide(x, y):
    """``np.divide`` (true division: integers divide as float64)."""
    x, y = _operand(x), _operand(y)
    if not np.issubdtype(result_dtype(x, y), np.inexact):
        x, y = astype(x, np.float64), astype(y, np.float64)
    return _elementwise(ew.div, x, y)


@implements(np.power)
def power(x, p):
    """``np.power`` (``x ** p``), differentiable in ``x`` and ``p``.

    A Python-number exponent is a constant (``integer_pow``, ``pow``); otherwise
    ``d/dx = p x**(p-1)`` (0 where ``p == 0``) and ``d/dp = log(x) x**p`` (0 at ``x = 0``,
    NaN there for ``p < 0``, as JAX); holomorphic for complex operands.

    >>> float(power(2.0, 3))
    8.0
    """
    x = _operand(x)
    if _is_python_scalar(p):
        if isinstance(p, numbers.Integral):
            return _first(bind(ew.IntegerPow(int(p)), x))
        return _first(bind(ew.Pow(p), astype(x, result_dtype(x, p))))
    (x, p), dtype = _promoted(x, p)
    shape = _broadcast_shapes("power", shape_of(x), shape_of(p))
    return _first(bind(ew.Power(shape, dtype.name), broadcast_to(x, shape), broadcast_to(p, shape)))


# --- reductions and shapes -------------------------------------------------------------


def _axis(axis, ndim: int, fn: str) -> int:
    """One axis in ``range(ndim)``: NumPy's ``AxisError`` if out of range, a ``TypeError``
    if not an integer."""
    if isinstance(axis, (bool, np.bool_)):
        raise TensorTypeError(f"{fn}: axis must be an integer, got {axis!r}")
    try:
        index = operator.index(axis)
    except TypeError:
        raise TensorTypeError(f"{fn}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= index < ndim:
        raise TensorAxisError(fn, index, ndim)
    return index % ndim


def _axes(axis, ndim: int, fn: str) -> tuple:
    """Sorted, distinct axes in ``range(ndim)`` from an int, a sequence of ints or ``None``
    (all axes); a repeated axis is NumPy's ``ValueError``."""
    if axis is None:
        return tuple(range(ndim))
    many = isinstance(axis, (tuple, list))
    axes = [_axis(a, ndim, fn) for a in (axis if many else (axis,))]
    if len(set(axes)) != len(axes):
        raise TensorShapeError(f"{fn}: duplicate value in 'axis': {axis}")
    return tuple(sorted(axes))


def _shape_tuple(shape, fn: str) -> tuple:
    """A shape argument as a tuple of Python ints (an int is a 1-d shape)."""
    try:
        dims = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
        return tuple(operator.index(d) for d in dims)
    except TypeError:
        raise TensorTypeError(f"{fn}: a shape must be an integer or a sequence of integers, "
                              f"got {shape!r}") from None


_NO_VALUE = object()       # NumPy's "argument not given" (None is a value for some)


def _no_out(out, fn: str) -> None:
    if out is not None:
        raise TensorNotSupportedError(f"{fn}: out= (of numpy.{fn}) is not supported by "
                                      f"tnp.{fn}: tensors are immutable; use the returned array")


def _masked(x, where, fill, fn: str):
    """``x`` where ``where`` holds, ``fill`` elsewhere (NumPy's ``where=`` of reductions)."""
    if where is _NO_VALUE:
        return x
    mask = _operand(where, fn)
    if dtype_of(mask) != np.bool_:
        raise TensorTypeError(f"{fn}: where= must be boolean, got {dtype_of(mask)}")
    return globals()["where"](mask, x, fill)


@implements(np.sum)
def sum(x, axis=None, dtype=None, out=None, keepdims: bool = False, initial=_NO_VALUE,
        where=_NO_VALUE):
    """``np.sum`` (``where=`` masks elements out, ``initial`` is added)."""
    _no_out(out, "sum")
    x = _operand(x)
    if dtype is not None:
        x = astype(x, dtype)
    elif dtype_of(x) == np.bool_:                    # NumPy sums booleans as integers
        x = astype(x, np.int64)
    x = _masked(x, where, 0, "sum")
    shape = shape_of(x)
    axes = _axes(axis, len(shape), "sum")
    result = _first(bind(ReduceSum(axes, shape), x)) if axes else x
    if keepdims:
        result = reshape(result, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return result if initial is _NO_VALUE else add(result, initial)


@implements(np.mean)
def mean(x, axis=None, dtype=None, out=None, keepdims: bool = False, *, where=_NO_VALUE):
    """``np.mean`` (``where=`` averages the selected elements only)."""
    _no_out(out, "mean")
    x = _operand(x)
    x = astype(x, dtype if dtype is not None else _float_dtype(x))
    if where is not _NO_VALUE:
        selected = broadcast_to(_operand(where, "mean"), shape_of(x))
        total = sum(x, axis, keepdims=keepdims, where=selected)
        count = sum(astype(selected, dtype_of(total)), axis, keepdims=keepdims)
        return divide(total, count)
    shape = shape_of(x)
    count = int(np.prod([shape[a] for a in _axes(axis, len(shape), "mean")], dtype=np.int64))
    total = sum(x, axis, keepdims=keepdims)
    return multiply(total, 1.0 / count) if count else divide(total, 0.0)


@implements(np.reshape)
def reshape(x, shape):
    """``np.reshape`` (one ``-1`` allowed)."""
    x = _operand(x)
    old = shape_of(x)
    shape = _shape_tuple(shape, "reshape")
    try:
        new = np.empty(old, dtype=np.int8).reshape(shape).shape if 0 not in old else \
            np.reshape(np.empty(old), shape).shape
    except ValueError:
        raise TensorShapeError(f"reshape: cannot reshape array of shape {old} into "
                               f"{shape}") from None
    return x if new == old else _first(bind(Reshape(tuple(new), old), x))


@implements(np.transpose)
def transpose(x, axes=None):
    """``np.transpose``."""
    x = _operand(x)
    ndim = len(shape_of(x))
    if axes is None:
        perm = tuple(reversed(range(ndim)))
    else:
        if not isinstance(axes, (tuple, list)) or len(axes) != ndim:
            raise TensorShapeError(f"transpose: axes {axes!r} don't match an array of {ndim} "
                                   "dimensions")
        perm = tuple(_axis(a, ndim, "transpose") for a in axes)
        if len(set(perm)) != ndim:
            raise TensorShapeError(f"transpose: repeated axis in {axes!r}")
    return x if perm == tuple(range(ndim)) else _first(bind(Transpose(perm), x))


# --- the operators that Tensor and Tracer share -------------------------------------------


class ArrayOperators(ArrayMethods):
    """NumPy operators and array methods for frontend values, through the tnp functions."""

    __slots__ = ()

    def __add__(self, other): return add(self, other)
    def __radd__(self, other): return add(other, self)
    def __sub__(self, other): return subtract(self, other)
    def __rsub__(self, other): return subtract(other, self)
    def __mul__(self, other): return multiply(self, other)
    def __rmul__(self, other): return multiply(other, self)
    def __truediv__(self, other): return divide(self, other)
    def __rtruediv__(self, other): return divide(other, self)
    def __neg__(self): return negative(self)
    def __pos__(self): return self
    def __pow__(self, p): return power(self, p)
    def __rpow__(self, base): return power(base, self)

    # tnp.remainder and tnp.floor_divide live in mathfuncs, which imports this module
    def __mod__(self, other):
        from primitives.tensor.numpy.mathfuncs import remainder
        return remainder(self, other)

    def __rmod__(self, other):
        from primitives.tensor.numpy.mathfuncs import remainder
        return remainder(other, self)

    def __floordiv__(self, other):
        from primitives.tensor.numpy.mathfuncs import floor_divide
        return floor_divide(self, other)

    def __rfloordiv__(self, other):
        from primitives.tensor.numpy.mathfuncs import floor_divide
        return floor_divide(other, self)

    # boolean algebra (bitwise, which on booleans is logical, as NumPy): tnp.bitwise_and and
    # tnp.invert live in mathfuncs, which imports this module
    def __and__(self, other):
        from primitives.tensor.numpy.mathfuncs import bitwise_and
        return bitwise_and(self, other)

    def __rand__(self, other):
        from primitives.tensor.numpy.mathfuncs import bitwise_and
        return bitwise_and(other, self)

    def __or__(self, other):
        from primitives.tensor.numpy.mathfuncs import bitwise_or
        return bitwise_or(self, other)

    def __ror__(self, other):
        from primitives.tensor.numpy.mathfuncs import bitwise_or
        return bitwise_or(other, self)

    def __xor__(self, other):
        from primitives.tensor.numpy.mathfuncs import bitwise_xor
        return bitwise_xor(self, other)

    def __rxor__(self, other):
        from primitives.tensor.numpy.mathfuncs import bitwise_xor
        return bitwise_xor(other, self)

    def __invert__(self):
        from primitives.tensor.numpy.mathfuncs import invert
        return invert(self)

    def copy(self):
        """``ndarray.copy()``: ``tnp.copy(self)``, a recorded copy (the derivative flows)."""
        return _first(bind(ew.copy, self))

    @property
    def T(self):
        return transpose(self)

    @property
    def mT(self):
        """The matrix transpose of a stack of matrices (the last two axes swapped)."""
        if len(self.shape) < 2:
            raise TensorShapeError(f"mT: the array must have at least 2 dimensions, it has "
                                   f"{len(self.shape)}")
        ndim = len(self.shape)
        return transpose(self, tuple(range(ndim - 2)) + (ndim - 1, ndim - 2))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise TensorTypeError("len() of a 0-d tensor")
        return self.shape[0]

    def reshape(self, *shape): return reshape(self, shape[0] if len(shape) == 1 else shape)
    def transpose(self, *axes):
        """``ndarray.transpose``: ``x.transpose()``, ``x.transpose(None)``,
        ``x.transpose(1, 0, 2)``, ``x.transpose((1, 0, 2))`` or ``x.transpose([1, 0, 2])``."""
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list, np.ndarray))):
            axes = axes[0]
        return transpose(self, None if axes is None or len(axes) == 0 else tuple(axes))
    def conj(self): return conj(self)
    def astype(self, dtype): return astype(self, dtype)

    # NumPy's functions and ufuncs dispatch here (NEP 18, NEP 13): a differentiable tnp
    # version runs, or a clear error; never a silent conversion (see primitives.tensor.numpy.dispatch).
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return array_function(func, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        data = to_host(constant_data(self, "converting to a NumPy array (np.asarray, "
                                         "np.array, Tensor.numpy(), a NumPy function)"))
        if dtype is not None and data.dtype != dtype:
            return data.astype(dtype)                  # a new array
        return data.copy() if copy else data

    def item(self):
        """The value of a one-element array as a Python number (refused where it would drop
        a derivative: use ``tnp.stop_gradient(x).item()`` to mean it)."""
        return to_host(constant_data(self, "item()")).item()

    def tolist(self):
        """The values as nested Python lists (refused where it would drop a derivative)."""
        return to_host(constant_data(self, "tolist()")).tolist()

    def __float__(self): return float(to_host(constant_data(self, "float()")))
    def __int__(self): return int(to_host(constant_data(self, "int()")))
    def __complex__(self): return complex(to_host(constant_data(self, "complex()")))
    def __index__(self): return operator.index(to_host(constant_data(self, "using as an index")))

    def __matmul__(self, other): return matmul(self, other)
    def __rmatmul__(self, other): return matmul(other, self)
    def __abs__(self): return abs(self)
    def __getitem__(self, key): return getitem(self, key)

    def __setitem__(self, key, value):
        raise TensorTypeError(f"{type(self).__name__}s are immutable: x[{key!r}] = ... cannot "
                              "be recorded; build the new value instead, e.g. with tnp.where "
                              "or tnp.concatenate")
    def __lt__(self, other): return less(self, other)
    def __le__(self, other): return less_equal(self, other)
    def __gt__(self, other): return greater(self, other)
    def __ge__(self, other): return greater_equal(self, other)
    def __eq__(self, other):                                     # elementwise, as in NumPy
        return equal(self, other) if _is_array_like(other) else NotImplemented

    def __ne__(self, other):
        return not_equal(self, other) if _is_array_like(other) else NotImplemented

    __hash__ = object.__hash__                                   # by identity, as torch.Tensor

    def __bool__(self) -> bool:
        return bool(data_of(self, "bool() (an if or while on a traced value)"))

    def __iter__(self):
        if not self.shape:
            raise TensorTypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    @property
    def real(self):
        return real(self)

    @property
    def imag(self):
        return imag(self)

    def squeeze(self, axis=None): return squeeze(self, axis)


_ = builtins  # the module shadows sum(); builtins stays reachable


# =========================================================================================
# Contractions, extrema, selection, comparisons, complex parts, joining, padding, indexing.
# (Lowered to the ops of primitives.tensor.ops.{dot, reduce, select, indexing}.)
# =========================================================================================

from primitives.tensor.ops import select as sel  # noqa: E402
from primitives.tensor.ops.dot import DotGeneral  # noqa: E402
from primitives.tensor.ops.indexing import (CheckIndex, Concatenate, Gather, Pad,  # noqa: E402
                                            Rev, Slice, checked_indices)
from primitives.tensor.ops.reduce import ReduceMax, ReduceMin  # noqa: E402


def _promoted(*args):
    args = [_operand(a) for a in args]
    dtype = result_dtype(*args)
    return [astype(a, dtype) for a in args], dtype


def _broadcast_shapes(fn: str, *shapes) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise TensorShapeError(f"{fn}: shapes {' '.join(str(s) for s in shapes)} cannot be "
                               "broadcast together") from None


# --- contractions -------------------------------------------------------------------------


def dot_general(x, y, dimension_numbers):
    """``lax.dot_general``: ``dimension_numbers = ((lhs_contract, rhs_contract),
    (lhs_batch, rhs_batch))``; the result has the batch, then lhs free, then rhs free axes."""
    (x, y), dtype = _promoted(x, y)
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(int(a) for a in axes) for axes in (lc, rc, lb, rb))
    xs, ys = shape_of(x), shape_of(y)
    key = (lc, rc, lb, rb, xs, ys, dtype.name)
    op = _dot_ops.get(key)
    if op is None:
        op = _dot_general_op(lc, rc, lb, rb, xs, ys, dtype.name)
        if len(_dot_ops) < 4096:
            _dot_ops[key] = op
    return _first(bind(op, x, y))


# Checked ops by (axes, shapes, dtype): a training loop reuses a few, with their cached plans.
_dot_ops: dict = {}


def _dot_general_op(lc, rc, lb, rb, xs, ys, dtype: str) -> DotGeneral:
    """The ``DotGeneral`` op for these axes and operand shapes, after checking they fit."""
    for axes, shape, what in ((lc, xs, "lhs"), (lb, xs, "lhs"), (rc, ys, "rhs"), (rb, ys, "rhs")):
        if any(not 0 <= a < len(shape) for a in axes):
            raise TensorAxisError(f"dot_general ({what} of shape {shape})", axes, len(shape))
    if len(lc) != len(rc) or len(lb) != len(rb) or any(xs[a] != ys[b] for a, b in zip(lc + lb, rc + rb)):
        raise TensorShapeError(f"dot_general: shapes {xs} and {ys} do not match on contracting "
                               f"axes {lc}/{rc} and batch axes {lb}/{rb}")
    if len(set(lc + lb)) != len(lc + lb) or len(set(rc + rb)) != len(rc + rb):
        raise TensorShapeError(f"dot_general: repeated axes in {((lc, rc), (lb, rb))}")
    return DotGeneral(((lc, rc), (lb, rb)), xs, ys, dtype)


@implements(np.matmul)
def matmul(x, y):
    """``np.matmul`` (``x @ y``): 1-D operands are vectors; leading axes broadcast as batches."""
    (x, y), _ = _promoted(x, y)
    xs, ys = shape_of(x), shape_of(y)
    if not xs or not ys:
        raise TensorShapeError(f"matmul: operands must be at least 1-d, got shapes {xs} and {ys}")
    x_axis, y_axis = len(xs) - 1, 0 if len(ys) == 1 else len(ys) - 2
    if xs[x_axis] != ys[y_axis]:
        raise TensorShapeError(f"matmul: shapes {xs} and {ys} do not match: size {xs[x_axis]} "
                               f"of lhs axis {x_axis} is different from {ys[y_axis]} of rhs "
                               f"axis {y_axis}")
    if len(xs) == 1 or len(ys) <= 2:
        # no batch to broadcast: x's free axes then y's are exactly np.matmul's result
        return dot_general(x, y, (((x_axis,), (y_axis,)), ((), ())))
    try:
        batch = tuple(np.broadcast_shapes(xs[:-2], ys[:-2]))
    except ValueError:
        raise TensorShapeError(f"matmul: the batch axes of shapes {xs} and {ys} cannot be "
                               "broadcast together") from None
    x = broadcast_to(x, batch + xs[-2:])
    y = broadcast_to(y, batch + ys[-2:])
    nb = len(batch)
    batch_axes = tuple(range(nb))
    return dot_general(x, y, (((nb + 1,), (nb,)), (batch_axes, batch_axes)))


@implements(np.dot)
def dot(a, b):
    """``np.dot``: products of scalars, inner products, matrix products, and for N-D operands
    the sum over the last axis of ``a`` and the second-to-last of ``b``."""
    a, b = _operand(a), _operand(b)
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        return multiply(a, b)
    a_axis, b_axis = len(sa) - 1, 0 if len(sb) == 1 else len(sb) - 2
    if sa[a_axis] != sb[b_axis]:
        raise TensorShapeError(f"dot: shapes {sa} and {sb} not aligned: {sa[a_axis]} (dim "
                               f"{a_axis}) != {sb[b_axis]} (dim {b_axis})")
    return dot_general(a, b, (((a_axis,), (b_axis,)), ((), ())))


@implements(np.tensordot)
def tensordot(a, b, axes=2):
    """``np.tensordot``."""
    a, b = _operand(a), _operand(b)
    sa, sb = shape_of(a), shape_of(b)
    if isinstance(axes, numbers.Integral):
        n = int(axes)
        if n < 0 or n > len(sa) or n > len(sb):
            raise TensorShapeError(f"tensordot: cannot contract {n} axes of shapes {sa} and {sb}")
        a_axes, b_axes = tuple(range(len(sa) - n, len(sa))), tuple(range(n))
    else:
        a_axes, b_axes = axes
        a_axes = (a_axes,) if isinstance(a_axes, numbers.Integral) else tuple(a_axes)
        b_axes = (b_axes,) if isinstance(b_axes, numbers.Integral) else tuple(b_axes)
        a_axes = tuple(_axis(ax, len(sa), "tensordot") for ax in a_axes)
        b_axes = tuple(_axis(ax, len(sb), "tensordot") for ax in b_axes)
    if len(a_axes) != len(b_axes) or any(sa[i] != sb[j] for i, j in zip(a_axes, b_axes)):
        raise TensorShapeError(f"tensordot: shape-mismatch for sum: shapes {sa} and {sb} on "
                               f"axes {a_axes} and {b_axes}")
    return dot_general(a, b, ((a_axes, b_axes), ((), ())))


@implements(np.outer)
def outer(a, b):
    """``np.outer`` (operands are flattened)."""
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


# --- einsum -------------------------------------------------------------------------------

_EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_parse(subscripts: str, shapes) -> tuple[list, str]:
    """Explicit per-operand subscripts (ellipses replaced by fresh letters) and the output."""
    spec = subscripts.replace(" ", "")
    inputs, arrow, output = spec.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise TensorShapeError(f"einsum: {len(terms)} operand subscripts in {subscripts!r} for "
                         f"{len(shapes)} operands")
    for part in terms + ([output] if arrow else []):
        rest = part.replace("...", "")
        if any(c not in _EINSUM_LETTERS for c in rest) or "." in rest:
            raise TensorShapeError(f"einsum: invalid subscripts {subscripts!r}")
    used = set(inputs) | set(output)
    fresh = [c for c in _EINSUM_LETTERS if c not in used]
    ellipsis_ndim = 0
    for term, shape in zip(terms, shapes):
        named = len(term.replace("...", ""))
        if "..." in term:
            ellipsis_ndim = builtins.max(ellipsis_ndim, len(shape) - named)
        if len(shape) < named or ("..." not in term and len(shape) != named):
            raise TensorShapeError(f"einsum: operand of shape {shape} does not match subscripts "
                                   f"{term!r} of {subscripts!r}")
    ell = "".join(fresh[:ellipsis_ndim])
    explicit = []
    for term, shape in zip(terms, shapes):
        if "..." in term:
            k = len(shape) - len(term.replace("...", ""))
            term = term.replace("...", ell[ellipsis_ndim - k:])
        explicit.append(term)
    if arrow:
        if ell and "..." not in output:
            raise TensorShapeError(f"einsum: the output of {subscripts!r} omits the '...' axes")
        output = output.replace("...", ell)
    else:
        counts = {}
        for term in explicit:
            for c in term:
                counts[c] = counts.get(c, 0) + 1
        output = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    if len(set(output)) != len(output):
        raise TensorShapeError(f"einsum: output subscript {output!r} repeats an index")
    if any(c not in "".join(explicit) for c in output if c not in ell):
        raise TensorShapeError(f"einsum: output subscript {output!r} names an index no operand has")
    return explicit, output


def _einsum_diagonal(x, term: str):
    """Take the diagonal of every index repeated within one operand's subscripts."""
    while len(set(term)) != len(term):
        letter = next(c for c in term if term.count(c) > 1)
        axes = [i for i, c in enumerate(term) if c == letter]
        others = [i for i, c in enumerate(term) if c != letter]
        shape = shape_of(x)
        n = shape[axes[0]]
        if any(shape[a] != n for a in axes):
            raise TensorShapeError(f"einsum: repeated index {letter!r} has sizes "
                                   f"{[shape[a] for a in axes]} in an operand of shape {shape}")
        x = transpose(x, axes + others)
        x = reshape(x, (n ** len(axes),) + tuple(shape[a] for a in others))
        step = builtins.sum(n ** j for j in range(len(axes)))
        x = _first(bind(Gather(0, shape_of(x), (n,)), x, np.arange(n, dtype=np.intp) * step))
        term = letter + "".join(term[a] for a in others)
    return x, term


@implements(np.einsum)
def einsum(subscripts: str, *operands, optimize=None):
    """``np.einsum`` for one or more operands, lowered to ``dot_general``, ``transpose``,
    ``reshape`` and ``reduce_sum`` (repeated indices within an operand take diagonals).

    Operands are contracted left to right; ``optimize`` is accepted and ignored.
    """
    if not isinstance(subscripts, str):            # the sublist form: einsum(a, [0, 1], ...)
        from primitives.tensor.numpy.products import einsum_subscripts
        subscripts, operands = einsum_subscripts(subscripts, *operands)
    if not operands:
        raise TensorShapeError("einsum: no operands given")
    operands, _ = _promoted(*operands)
    terms, output = _einsum_parse(subscripts, [shape_of(x) for x in operands])
    # sizes; size-1 ellipsis axes broadcast (dropped where another operand is larger)
    sizes: dict = {}
    for term, x in zip(terms, operands):
        for c, n in zip(term, shape_of(x)):
            if n != 1:
                if sizes.get(c, 1) not in (1, n):
                    raise TensorShapeError(f"einsum: index {c!r} has sizes {sizes[c]} and {n} "
                                           f"for {subscripts!r} with operand shapes "
                                           f"{[shape_of(o) for o in operands]}")
                sizes[c] = n
            else:
                sizes.setdefault(c, 1)
    items = []
    for term, x in zip(terms, operands):
        x, term = _einsum_diagonal(x, term)
        drop = [i for i, c in enumerate(term) if shape_of(x)[i] == 1 and sizes[c] != 1]
        if drop:
            x = reshape(x, tuple(n for i, n in enumerate(shape_of(x)) if i not in drop))
            term = "".join(c for i, c in enumerate(term) if i not in drop)
        items.append((x, term))

    def needed_after(index: int) -> set:
        later = set(output)
        for _, term in items[index:]:
            later |= set(term)
        return later

    def sum_out(x, term, keep: set):
        axes = tuple(i for i, c in enumerate(term) if c not in keep)
        if not axes:
            return x, term
        return sum(x, axes), "".join(c for c in term if c in keep)

    x, term = items[0]
    x, term = sum_out(x, term, needed_after(1))
    for index in range(1, len(items)):
        y, other = items[index]
        later = needed_after(index + 1)
        y, other = sum_out(y, other, later | set(term))
        x, term = sum_out(x, term, later | set(other))
        shared = [c for c in term if c in other]
        batch = [c for c in shared if c in later]
        contract = [c for c in shared if c not in later]
        dims = ((tuple(term.index(c) for c in contract), tuple(other.index(c) for c in contract)),
                (tuple(term.index(c) for c in batch), tuple(other.index(c) for c in batch)))
        x = dot_general(x, y, dims)
        term = ("".join(batch) + "".join(c for c in term if c not in shared)
                + "".join(c for c in other if c not in shared))
    x, term = sum_out(x, term, set(output))
    present = [c for c in output if c in term]
    x = transpose(x, [term.index(c) for c in present])
    target = tuple(sizes[c] for c in output)
    return reshape(x, target) if shape_of(x) != target else x


# --- extrema ------------------------------------------------------------------------------


def _reduce_extremum(cls, fn: str, x, axis, out, keepdims, initial, where):
    _no_out(out, fn)
    x = _operand(x)
    if where is not _NO_VALUE:
        if initial is _NO_VALUE:
            raise TensorTypeError(f"{fn}: where= needs initial= (as in NumPy): the value of "
                                  "a slice with nothing selected")
        x = _masked(x, where, initial, fn)
    if initial is not _NO_VALUE:
        bound = maximum if cls is ReduceMax else minimum
        return bound(_reduce_extremum(cls, fn, x, axis, None, keepdims, _NO_VALUE, _NO_VALUE),
                     initial)
    shape = shape_of(x)
    axes = _axes(axis, len(shape), fn)
    if any(shape[a] == 0 for a in axes):
        raise TensorShapeError(f"{fn}: zero-size array to reduction operation {fn}imum which has no "
                         f"identity (shape {shape}, axis {axis})")
    out = _first(bind(cls(axes, shape, dtype_of(x).name), x)) if axes else x
    if keepdims:
        out = reshape(out, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return out


@implements(np.max, np.amax)
def max(x, axis=None, out=None, keepdims: bool = False, initial=_NO_VALUE, where=_NO_VALUE):
    """``np.max``; the gradient is shared evenly among tied maxima (as in JAX)."""
    return _reduce_extremum(ReduceMax, "max", x, axis, out, keepdims, initial, where)


@implements(np.min, np.amin)
def min(x, axis=None, out=None, keepdims: bool = False, initial=_NO_VALUE, where=_NO_VALUE):
    """``np.min``; the gradient is shared evenly among tied minima (as in JAX)."""
    return _reduce_extremum(ReduceMin, "min", x, axis, out, keepdims, initial, where)


amax, amin = max, min


@implements(np.maximum)
def maximum(x, y):
    """``np.maximum``; at ties each operand gets half the tangent (as in JAX)."""
    x, y = _operand(x), _operand(y)
    return _elementwise(sel.Maximum(result_dtype(x, y).name), x, y)


@implements(np.minimum)
def minimum(x, y):
    """``np.minimum``; at ties each operand gets half the tangent (as in JAX)."""
    x, y = _operand(x), _operand(y)
    return _elementwise(sel.Minimum(result_dtype(x, y).name), x, y)


def logsumexp(x, axis=None, keepdims: bool = False):
    """``scipy.special.logsumexp``: ``log(sum(exp(x)))`` computed stably.

    The shift by the maximum is a constant (its derivative cancels exactly), so
    it goes through :func:`stop_gradient` and does not enter the derivative.
    """
    x = _operand(x)
    if np.issubdtype(dtype_of(x), np.complexfloating):
        raise TensorTypeError("logsumexp: complex input is not supported")
    x = astype(x, _float_dtype(x))
    shape = shape_of(x)
    axes = _axes(axis, len(shape), "logsumexp")
    kept_shape = tuple(1 if i in axes else n for i, n in enumerate(shape))
    if any(shape[a] == 0 for a in axes):
        shift = np.zeros(kept_shape, dtype=dtype_of(x))
    else:
        shift = max(stop_gradient(x), axes, keepdims=True) if axes else stop_gradient(x)
        shift = where(less(abs(shift), np.inf), shift, 0.0)     # no shift by inf or nan
    out = add(log(sum(exp(subtract(x, shift)), axes, keepdims=True)), shift)
    return out if keepdims else reshape(out, tuple(n for i, n in enumerate(shape) if i not in axes))


def stop_gradient(x):
    """``x`` as a constant: no derivative flows through it.

    For an array or a ``Tensor``, its data as an array of its library; for a traced
    value, a ``stop_gradient`` op (its value where the data is not known yet, under ``jit``).
    """
    x = _operand(x)
    if isinstance(x, Frontend) and x.is_tracer:
        return _first(bind(sel.stop_gradient, x))
    data = data_of(x)
    return data if _is_foreign_array(data) else np.asarray(data)


# --- selection and comparisons --------------------------------------------------------------


@implements(np.where)
def where(condition, x=None, y=None):
    """``np.where(condition, x, y)``; the condition is not differentiated."""
    if x is None or y is None:
        raise TensorNotSupportedError("where: give condition, x and y (the one-argument form "
                                      "is np.nonzero)")
    condition, x, y = _operand(condition), _operand(x), _operand(y)
    dtype = result_dtype(x, y)
    shape = _broadcast_shapes("where", shape_of(condition), shape_of(x), shape_of(y))
    condition = broadcast_to(astype(condition, np.bool_), shape)
    x, y = broadcast_to(astype(x, dtype), shape), broadcast_to(astype(y, dtype), shape)
    return _first(bind(sel.Select(shape, dtype.name), condition, x, y))


def _comparison(name: str, np_name: str):
    op = sel.Compare(name)

    def fn(x, y):
        return _elementwise(op, _operand(x, np_name), _operand(y, np_name))
    fn.__name__ = np_name
    fn.__doc__ = f"``np.{np_name}``: a boolean result, not differentiated."
    return implements(getattr(np, np_name))(fn)


equal = _comparison("eq", "equal")
not_equal = _comparison("ne", "not_equal")
less = _comparison("lt", "less")
less_equal = _comparison("le", "less_equal")
greater = _comparison("gt", "greater")
greater_equal = _comparison("ge", "greater_equal")


# --- absolute value, sign, complex parts ------------------------------------------------------


@implements(np.abs)
def abs(x):
    """``np.abs``; of a complex ``z``, the real ``|z|``."""
    x = _operand(x)
    dtype = dtype_of(x)
    if np.issubdtype(dtype, np.complexfloating):
        return _first(bind(sel.ComplexAbs(dtype.name), x))
    return _first(bind(ew.abs_real, x))


absolute = abs


@implements(np.sign)
def sign(x):
    """``np.sign``; of a complex ``z``, ``z / |z|`` (0 at 0), differentiable away from 0."""
    x = _operand(x)
    if not np.issubdtype(dtype_of(x), np.complexfloating):
        return _first(bind(ew.sign, x))
    magnitude = abs(x)
    zero = equal(magnitude, 0)
    return where(zero, 0, divide(x, where(zero, 1, magnitude)))


@implements(np.real)
def real(x):
    """``np.real``: the identity on real values."""
    x = _operand(x)
    dtype = dtype_of(x)
    return _first(bind(sel.Real(dtype.name), x)) if dtype.kind == "c" else x


@implements(np.imag)
def imag(x):
    """``np.imag``: zeros (with no derivative) for real values."""
    x = _operand(x)
    dtype = dtype_of(x)
    op = sel.Imag(dtype.name) if dtype.kind == "c" else sel.zeros_like
    return _first(bind(op, x))


# --- shapes: squeeze, expand_dims, joining, padding ------------------------------------------


@implements(np.squeeze)
def squeeze(x, axis=None):
    """``np.squeeze``."""
    shape = shape_of(x)
    if axis is None:
        axes = tuple(i for i, n in enumerate(shape) if n == 1)
    else:
        axes = _axes(axis, len(shape), "squeeze")
        for a in axes:
            if shape[a] != 1:
                raise TensorShapeError(f"squeeze: cannot select axis {a} of shape {shape} to "
                                       "squeeze out: its size is not one")
    return reshape(x, tuple(n for i, n in enumerate(shape) if i not in axes))


@implements(np.expand_dims)
def expand_dims(x, axis):
    """``np.expand_dims``."""
    shape = shape_of(x)
    axis = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    new_ndim = len(shape) + len(axis)
    axes = _axes(axis, new_ndim, "expand_dims")
    if len(axes) != len(axis):
        raise TensorShapeError(f"expand_dims: repeated axis in {axis}")
    sizes = iter(shape)
    return reshape(x, tuple(1 if i in axes else next(sizes) for i in range(new_ndim)))


@implements(np.concatenate)
def concatenate(arrays, axis=0):
    """``np.concatenate`` (``axis=None`` flattens first); dtypes promote as in NumPy."""
    arrays = [_operand(a) for a in arrays]
    if not arrays:
        raise TensorShapeError("concatenate: need at least one array to concatenate")
    if axis is None:
        arrays, axis = [reshape(a, (-1,)) for a in arrays], 0
    shapes = [shape_of(a) for a in arrays]
    ndim = len(shapes[0])
    if ndim == 0:
        raise TensorShapeError("concatenate: zero-dimensional arrays cannot be concatenated")
    if any(len(s) != ndim for s in shapes):
        raise TensorShapeError(f"concatenate: all the input arrays must have the same number "
                               f"of dimensions; got shapes {shapes}")
    axis = _axis(axis, ndim, "concatenate")
    if any(s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:] for s in shapes):
        raise TensorShapeError(f"concatenate: shapes {shapes} differ off the concatenation "
                               f"axis {axis}")
    arrays, dtype = _promoted(*arrays)
    if len(arrays) == 1:
        return arrays[0]
    return _first(bind(Concatenate(axis, tuple(shapes), dtype.name), *arrays))


@implements(np.stack)
def stack(arrays, axis=0):
    """``np.stack``."""
    arrays = [_operand(a) for a in arrays]
    if not arrays:
        raise TensorShapeError("stack: need at least one array to stack")
    shapes = {shape_of(a) for a in arrays}
    if len(shapes) != 1:
        raise TensorShapeError(f"stack: all input arrays must have the same shape; got "
                               f"{[shape_of(a) for a in arrays]}")
    axis = _axis(axis, len(shape_of(arrays[0])) + 1, "stack")
    return concatenate([expand_dims(a, axis) for a in arrays], axis)


@implements(np.pad)
def pad(x, pad_width, mode: str = "constant", constant_values=0):
    """``np.pad`` in ``"constant"`` mode with one scalar ``constant_values``."""
    if mode != "constant":
        raise TensorNotSupportedError(f"pad: mode {mode!r} is not supported (only 'constant')")
    if not _is_python_scalar(constant_values) and np.ndim(constant_values) != 0:
        raise TensorNotSupportedError("pad: constant_values must be one scalar")
    x = _operand(x)
    shape = shape_of(x)
    widths = np.asarray(pad_width)
    if widths.size and not np.issubdtype(widths.dtype, np.integer):
        raise TensorTypeError("pad: `pad_width` must be of integral type")
    try:
        widths = np.broadcast_to(widths.astype(np.int64), (len(shape), 2))
    except ValueError:
        raise TensorShapeError(f"pad: pad_width {pad_width!r} does not fit an array of shape "
                               f"{shape}") from None
    if (widths < 0).any():
        raise TensorShapeError(f"pad: negative pad_width {pad_width!r}")
    if not widths.any():
        return x
    op = Pad(tuple(int(w) for w in widths[:, 0]), tuple(int(w) for w in widths[:, 1]),
             (0,) * len(shape), shape)
    if constant_values == 0:
        return _first(bind(op, x))
    dtype = result_dtype(x, constant_values)
    border = np.pad(np.zeros(shape, dtype=dtype), widths, constant_values=constant_values)
    return add(_first(bind(op, astype(x, dtype))), border)       # exact: x + 0 inside


# --- indexing -------------------------------------------------------------------------------


def _index_array(value, size: int, axis: int):
    """Integer indices into an axis of ``size`` made non-negative, or NumPy's ``IndexError``.

    Indices that are tensors or traced values are data: they stay operands of the graph,
    checked by a ``check_index`` op when it runs (so ``jit`` never retraces for new index
    values and still raises for one out of range); other indices are checked now.
    """
    if isinstance(value, Frontend):
        return _first(bind(CheckIndex(size, axis), value))
    return checked_indices(to_host(value), size, axis)


def _is_data(index) -> bool:
    """Whether an index is a tensor or traced value (an operand), not known NumPy data."""
    return isinstance(index, Frontend)


_MASK_READ = ("indexing with a boolean mask (the result's shape depends on the mask's values; "
              "keep the shape with tnp.where(mask, x, 0), or select with a mask known in "
              "advance)")


def _index_entries(key, ndim: int) -> list:
    """``key`` as a list of ("slice", s) / ("none", None) / ("int", i) / ("array", a) /
    ("ellipsis", None), the ellipsis expanded into full slices after its marker."""
    key = key if isinstance(key, tuple) else (key,)
    entries, ellipsis_at, consumed = [], None, 0
    for k in key:
        if k is None:
            entries.append(("none", None))
        elif k is Ellipsis:
            if ellipsis_at is not None:
                raise TensorIndexError("an index can only have a single ellipsis ('...')")
            ellipsis_at = len(entries)
        elif isinstance(k, slice):
            entries.append(("slice", k))
            consumed += 1
        elif isinstance(k, (bool, np.bool_)):
            raise TensorNotSupportedError("indexing with a boolean scalar is not supported")
        elif isinstance(k, numbers.Integral):
            entries.append(("int", int(k)))
            consumed += 1
        elif _is_data(_operand(k)) and dtype_of(_operand(k)).kind != "b":
            if dtype_of(_operand(k)).kind not in "iu":
                raise TensorIndexError(f"an index array must hold integers or booleans, got "
                                       f"{dtype_of(_operand(k))} values")
            entries.append(("array", _operand(k)))     # an operand: read when the op runs
            consumed += 1
        else:
            array = to_host(data_of(_operand(k), _MASK_READ))
            if array.size == 0 and isinstance(k, (list, tuple)):
                array = array.astype(np.intp)           # NumPy reads [] as an empty index
            if array.dtype == np.bool_:
                if array.ndim == 0:
                    raise TensorNotSupportedError("indexing with a 0-d boolean array is not "
                                                  "supported")
                for part in np.nonzero(array):
                    entries.append(("array", part))
                consumed += array.ndim
            elif np.issubdtype(array.dtype, np.integer):
                entries.append(("array", array))
                consumed += 1
            else:
                raise TensorIndexError("only integers, slices (`:`), ellipsis (`...`), None and "
                                 "integer or boolean arrays are valid indices")
    if consumed > ndim:
        raise TensorIndexError(f"too many indices for array: array is {ndim}-dimensional, but "
                         f"{consumed} were indexed")
    fill = [("slice", slice(None))] * (ndim - consumed)
    if ellipsis_at is None:
        return entries + fill
    # the marker takes no axis but, as in NumPy, separates advanced indices around it
    return entries[:ellipsis_at] + [("ellipsis", None)] + fill + entries[ellipsis_at:]


def getitem(x, key):
    """``x[key]`` with NumPy semantics: ints, slices (any step), ``None``, ``...``, and integer
    or boolean arrays (advanced indexing, through ``gather``)."""
    x = _operand(x)
    shape = shape_of(x)
    entries = _index_entries(key, len(shape))
    advanced = any(kind == "array" for kind, _ in entries)
    starts, limits, strides, flips, sliced = [], [], [], [], []
    arrays = {}                                   # entry position -> (axis, index array)
    axis = 0
    for position, (kind, value) in enumerate(entries):
        if kind in ("none", "ellipsis"):
            continue
        size = shape[axis]
        start, limit, stride = 0, size, 1
        if kind == "slice":
            begin, end, step = value.indices(size)
            count = len(range(begin, end, step))
            if step > 0:
                start, limit, stride = begin, begin + builtins.max(count - 1, 0) * step + (
                    1 if count else 0), step
            elif count:
                start, limit, stride = begin + (count - 1) * step, begin + 1, -step
                if count > 1:
                    flips.append(axis)
            else:
                start, limit, stride = 0, 0, 1
        elif kind == "int" and not advanced:
            (index,) = _index_array(value, size, axis).reshape(1)
            start, limit = int(index), int(index) + 1
        else:                                     # an array, or an int among arrays
            arrays[position] = (axis, _index_array(value, size, axis))
        starts.append(start), limits.append(limit), strides.append(stride)
        sliced.append(len(range(start, limit, stride)))
        axis += 1
    if (tuple(starts), tuple(limits), tuple(strides)) != ((0,) * len(shape), shape,
                                                          (1,) * len(shape)):
        x = _first(bind(Slice(tuple(starts), tuple(limits), tuple(strides), shape), x))
    if flips:
        x = _first(bind(Rev(tuple(flips)), x))
    sizes = dict(enumerate(sliced))
    if not advanced:
        out, axis = [], 0
        for kind, _ in entries:
            if kind in ("none", "ellipsis"):
                out.extend([1] if kind == "none" else [])
                continue
            if kind == "slice":
                out.append(sizes[axis])
            axis += 1
        return reshape(x, tuple(out))
    return _advanced_index(x, entries, arrays, sizes)


def _advanced_index(x, entries, arrays: dict, sizes: dict):
    positions = sorted(arrays)
    adv_axes = [arrays[p][0] for p in positions]
    try:
        index_shape = tuple(np.broadcast_shapes(*[shape_of(arrays[p][1]) for p in positions]))
    except ValueError:
        raise TensorIndexError("shape mismatch: indexing arrays could not be broadcast together "
                               "with shapes "
                               f"{' '.join(str(shape_of(arrays[p][1])) for p in positions)}"
                               ) from None
    contiguous = positions == list(range(positions[0], positions[-1] + 1))
    shape = shape_of(x)
    if len(positions) == 1:
        gather_axis, index = adv_axes[0], _broadcast_index(arrays[positions[0]][1], index_shape)
    else:
        others = [a for a in range(len(shape)) if a not in adv_axes]
        if contiguous:
            gather_axis = adv_axes[0]
        else:
            x = transpose(x, adv_axes + others)
            gather_axis = 0
        dims = tuple(shape[a] for a in adv_axes)
        merged = shape_of(x)[:gather_axis] + (int(np.prod(dims, dtype=np.int64)),) + \
            shape_of(x)[gather_axis + len(dims):]
        x = reshape(x, merged)
        index = _flat_index([arrays[p][1] for p in positions], dims, index_shape)
    x = _first(bind(Gather(gather_axis, shape_of(x), index_shape), x, index))
    # the result's axes: NumPy puts the index axes where the advanced block is when it is
    # contiguous in the key, else first; None entries add axes of size one
    out, axis, placed = [], 0, False
    if not contiguous:
        out.extend(index_shape)
    for position, (kind, _) in enumerate(entries):
        if kind in ("none", "ellipsis"):
            out.extend([1] if kind == "none" else [])
            continue
        if position in arrays:
            if contiguous and not placed:
                out.extend(index_shape)
                placed = True
        else:
            out.append(sizes[axis])
        axis += 1
    return reshape(x, tuple(out))


def _broadcast_index(index, shape: tuple):
    """A checked index array broadcast to ``shape``: a C-ordered ``intp`` array, or an operand."""
    if _is_data(index):
        return index if shape_of(index) == shape else broadcast_to(index, shape)
    return np.ascontiguousarray(np.broadcast_to(index, shape), dtype=np.intp)


def _flat_index(indices: list, dims: tuple, shape: tuple):
    """The positions in the flattened ``dims`` block of checked indices into its axes
    (``np.ravel_multi_index``), broadcast to ``shape``."""
    if 0 in dims:                     # then every index array is empty (else IndexError)
        return np.zeros(shape, dtype=np.intp)
    if not builtins.any(_is_data(i) for i in indices):
        return _broadcast_index(np.ravel_multi_index(
            [np.broadcast_to(i, shape) for i in indices], dims), shape)
    flat, stride = None, 1
    for index, size in zip(reversed(indices), reversed(dims)):
        term = index if stride == 1 else multiply(index, np.intp(stride))
        flat = term if flat is None else add(flat, term)
        stride *= size
    return _broadcast_index(flat, shape)


@implements(np.take)
def take(a, indices, axis=None):
    """``np.take`` with an integer index array (``axis=None`` indexes the flattened array);
    index arrays that are tensors or traced values stay data (see :func:`getitem`)."""
    a = _operand(a)
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    shape = shape_of(a)
    axis = _axis(axis, len(shape), "take")
    indices = _operand(indices)
    if dtype_of(indices).kind not in "iu":
        raise TensorIndexError("take: indices must be integers")
    index = _index_array(indices, shape[axis], axis)      # a new array, 0-d kept
    return _first(bind(Gather(axis, shape, shape_of(index)), a, index))


@implements(np.shape)
def shape(a) -> tuple:
    """``np.shape`` (known under ``jit`` too)."""
    return shape_of(_operand(a))


@implements(np.ndim)
def ndim(a) -> int:
    """``np.ndim``."""
    return len(shape(a))


@implements(np.size)
def size(a, axis=None) -> int:
    """``np.size``."""
    dims = shape(a)
    return int(np.prod(dims, dtype=np.int64)) if axis is None else dims[_axis(axis, len(dims),
                                                                               "size")]


@implements(np.broadcast_to)
def _broadcast_to(array, shape):
    return broadcast_to(array, shape)


@implements(np.clip)
def clip(a, a_min=None, a_max=None):
    """``np.clip``: ``minimum(maximum(a, a_min), a_max)``, as NumPy computes it (NaN
    propagates, ``a_max`` wins when ``a_min > a_max``). The derivative goes to ``a``
    strictly inside the bounds, to the bound where it is taken, and is split evenly
    where ``a`` equals a bound (as JAX's ``clip``).

    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda x: tnp.sum(tnp.clip(x, 0.0, 1.0)))(np.array([-1.0, 0.0, 0.5, 2.0]))
    array([0. , 0.5, 1. , 0. ])
    """
    a = _operand(a)
    if a_min is None and a_max is None:
        raise TensorShapeError("clip: one of a_min and a_max must be given")
    if a_min is not None:
        a = maximum(a, a_min)
    if a_max is not None:
        a = minimum(a, a_max)
    return a


def array(object, dtype=None, copy=True):
    """``np.array``: nested lists and tuples holding tensors or traced values stack, with
    gradients; a tensor or traced value passes through (converted to ``dtype``).

    >>> t = array([np.float64(1.0), np.array(2.0)])
    >>> t
    array([1., 2.])
    """
    value = _operand(object) if isinstance(object, (list, tuple)) else object
    if isinstance(value, Frontend):
        return value if dtype is None else astype(value, dtype)
    if _is_foreign_array(value):                 # stays in its library, on its device
        xp = library_of(value).xp
        value = value if dtype is None else xp.astype(value, np.dtype(dtype))
        return xp.asarray(value, copy=copy)
    return np.array(value, dtype=dtype, copy=copy)


def asarray(a, dtype=None):
    """``np.asarray``, with :func:`array`'s handling of tensors and traced values."""
    return array(a, dtype=dtype, copy=None)
