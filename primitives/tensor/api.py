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

import numpy as np

from primitives.tensor.core import bind, dtype_of, shape_of
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.shape import BroadcastInDim, ReduceSum, Reshape, Transpose


class TensorShapeError(ValueError):
    """Shapes that do not fit an operation (a ``ValueError``, as in NumPy)."""


def _first(results):
    return results[0]


# --- promotion and broadcasting -----------------------------------------------------


def _is_python_scalar(value) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, np.generic)


def result_dtype(*args) -> np.dtype:
    """NumPy's result dtype, with Python scalars weak (``float32_array * 2.0`` stays float32)."""
    return np.result_type(*[a if _is_python_scalar(a) else dtype_of(a) for a in args])


def astype(x, dtype):
    """``x`` converted to ``dtype`` (a ``convert_element_type`` when it changes)."""
    dtype = np.dtype(dtype)
    if _is_python_scalar(x) or isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x, dtype=dtype) if not np.iscomplexobj(x) or dtype.kind == "c" \
            else np.asarray(np.real(x), dtype=dtype)
    old = dtype_of(x)
    if old == dtype:
        return x
    return _first(bind(ew.ConvertElementType(dtype.name, old.name), x))


def broadcast_to(x, shape):
    """``np.broadcast_to``: a ``broadcast_in_dim`` that aligns trailing axes."""
    shape = tuple(int(s) for s in shape)
    old = shape_of(x)
    if old == shape:
        return x
    if len(old) > len(shape) or any(o not in (1, n) for o, n in zip(old[::-1], shape[::-1])):
        raise TensorShapeError(f"broadcast_to: cannot broadcast shape {old} to {shape}")
    dims = tuple(range(len(shape) - len(old), len(shape)))
    return _first(bind(BroadcastInDim(shape, dims, old), x))


def _elementwise(op, *args):
    """Promote ``args`` to one dtype and broadcast them to one shape, then apply ``op``."""
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
        return _first(bind(op, astype(x, _float_dtype(x))))
    fn.__name__ = op.name
    fn.__doc__ = f"``np.{op.name}``, differentiable."
    return fn


# --- elementwise ----------------------------------------------------------------------

exp = _unary_float(ew.exp)
log = _unary_float(ew.log)
sin = _unary_float(ew.sin)
cos = _unary_float(ew.cos)
tanh = _unary_float(ew.tanh)
sqrt = _unary_float(ew.sqrt)


def negative(x):
    return _first(bind(ew.neg, x))


def conj(x):
    """``np.conj``: the identity on real values."""
    return _first(bind(ew.conj, x)) if np.issubdtype(dtype_of(x), np.complexfloating) else x


conjugate = conj


def add(x, y):
    return _elementwise(ew.add, x, y)


def subtract(x, y):
    return _elementwise(ew.sub, x, y)


def multiply(x, y):
    return _elementwise(ew.mul, x, y)


def divide(x, y):
    if not np.issubdtype(result_dtype(x, y), np.inexact):
        x, y = astype(x, np.float64), astype(y, np.float64)
    return _elementwise(ew.div, x, y)


def power(x, p):
    """``x ** p`` for a constant exponent ``p``."""
    if not _is_python_scalar(p):
        raise TypeError("power: the exponent must be a Python number")
    if isinstance(p, numbers.Integral):
        return _first(bind(ew.IntegerPow(int(p)), x))
    return _first(bind(ew.Pow(p), astype(x, result_dtype(x, p))))


# --- reductions and shapes -------------------------------------------------------------


def _axes(axis, ndim: int, fn: str) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    normalized = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(f"{fn}: axis {a} is out of bounds for array of "
                                          f"dimension {ndim}")
        normalized.append(int(a) % ndim)
    return tuple(sorted(set(normalized)))


def sum(x, axis=None, keepdims: bool = False):
    """``np.sum``."""
    shape = shape_of(x)
    axes = _axes(axis, len(shape), "sum")
    out = _first(bind(ReduceSum(axes, shape), x)) if axes else x
    if keepdims:
        out = reshape(out, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return out


def mean(x, axis=None, keepdims: bool = False):
    """``np.mean``."""
    shape = shape_of(x)
    count = int(np.prod([shape[a] for a in _axes(axis, len(shape), "mean")], dtype=np.int64))
    total = sum(astype(x, _float_dtype(x)), axis, keepdims)
    return multiply(total, 1.0 / count) if count else divide(total, 0.0)


def reshape(x, shape):
    """``np.reshape`` (one ``-1`` allowed)."""
    old = shape_of(x)
    shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    try:
        new = np.empty(old, dtype=np.int8).reshape(shape).shape if 0 not in old else \
            np.reshape(np.empty(old), shape).shape
    except ValueError:
        raise TensorShapeError(f"reshape: cannot reshape array of shape {old} into "
                               f"{shape}") from None
    return x if new == old else _first(bind(Reshape(tuple(new), old), x))


def transpose(x, axes=None):
    """``np.transpose``."""
    ndim = len(shape_of(x))
    perm = tuple(reversed(range(ndim))) if axes is None else tuple(int(a) % ndim for a in axes)
    if sorted(perm) != list(range(ndim)):
        raise TensorShapeError(f"transpose: axes {axes} are not a permutation of {ndim} axes")
    return x if perm == tuple(range(ndim)) else _first(bind(Transpose(perm), x))


# --- the operators that Tensor and Tracer share -------------------------------------------


class ArrayOperators:
    """NumPy operators for frontend values, through the functions above."""

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

    @property
    def T(self):
        return transpose(self)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def sum(self, axis=None, keepdims=False): return sum(self, axis, keepdims)
    def mean(self, axis=None, keepdims=False): return mean(self, axis, keepdims)
    def reshape(self, *shape): return reshape(self, shape[0] if len(shape) == 1 else shape)
    def transpose(self, *axes): return transpose(self, axes or None)
    def conj(self): return conj(self)
    def astype(self, dtype): return astype(self, dtype)


_ = builtins  # the module shadows sum(); builtins stays reachable
