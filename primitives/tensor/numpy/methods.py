"""NumPy's operators and array methods on tensors and traced values, from one table.

``Tensor`` and the traced value inherit :class:`ArrayOperators`, whose operators and
``numpy.ndarray`` methods are the ``tnp`` functions, by :data:`TABLE`: ``x + y`` is
``tnp.add(x, y)``, ``2 ** x`` is ``tnp.power(2, x)``, ``x[i]`` is ``tnp.getitem(x, i)``,
``x.prod(axis=0)`` is ``tnp.prod(x, axis=0)``, ``x.T`` is ``tnp.transpose(x)``, and
so on, with the functions' arguments and gradients. NumPy's in-place methods
(``sort``, ``fill``, ``put``, ``resize``) would change a value that may be saved for
backward: tensors are immutable, so ``x.sort()`` raises and points to
``tnp.sort(x)``. The class body adds Python's protocols: conversions (``float()``,
``item()``, ``np.asarray``...; refused where they would drop a derivative),
``len``, iteration, ``in``, hashing by identity, and NumPy's dispatch (``__array_ufunc__``,
``__array_function__``: :mod:`.dispatch`).

It is the top of the NumPy package: it imports the family modules it takes
functions from (:mod:`.lowering`, :mod:`.indexing`, :mod:`.mathfuncs`,
:mod:`.manipulation`, :mod:`.products`, :mod:`.reductions`, :mod:`.creation`: tnp's
``reshape``, ``transpose`` and ``real``) and :mod:`.dispatch`;
only the front ends above import it.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> x = tnp.tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
>>> y = x.prod(axis=1).sum() + x.ravel().std() + x.trace()
>>> y.backward().grad(x).round(4)
array([[2.6646, 0.8882],
       [4.1118, 4.3354]])
"""

from __future__ import annotations

import math
import operator
import sys

import numpy as np

from primitives.tensor.backends import to_host
from primitives.tensor.core import data_of, dtype_of, shape_of
from primitives.tensor.errors import TensorShapeError, TensorTypeError
from primitives.tensor.numpy.dispatch import array_function, array_ufunc, constant_data
from primitives.tensor.numpy.creation import real, reshape, transpose
from primitives.tensor.numpy.indexing import getitem, take
from primitives.tensor.numpy.lowering import (abs, add, as_dtype, astype, conj, conjugate, divide,
                                              equal, greater, greater_equal, imag, is_array_like,
                                              less, less_equal, max, min, multiply, negative,
                                              not_equal, positive, power,
                                              subtract, sum)
from primitives.tensor.numpy.manipulation import (IndexUpdates, copy, diagonal, ndim, ravel,
                                                  repeat, size, squeeze, swapaxes, trace)
from primitives.tensor.numpy.mathfuncs import (bitwise_and, bitwise_or, bitwise_xor, clip,
                                               divmod as divmod_, floor_divide, invert,
                                               remainder, round, trunc)
from primitives.tensor.numpy.products import dot, matmul
from primitives.tensor.numpy.reductions import (all, any, argmax, argmin, argsort, cumprod, cumsum,
                                                mean, prod, std, var)
from primitives.tensor.ops import elementwise as ew


def _matrix_transpose(x):
    """The matrix transpose of a stack of matrices (the last two axes swapped)."""
    ndim = len(x.shape)
    if ndim < 2:
        raise TensorShapeError(f"mT: the array must have at least 2 dimensions, it has {ndim}")
    return transpose(x, tuple(range(ndim - 2)) + (ndim - 1, ndim - 2))


# How a name of the table calls its function ``f`` (``x`` is the tensor or traced value):
#   "binary"     x.name(y) is f(x, y)                               (x + y, x < y, x[key])
#   "reflected"  x.name(y) is f(y, x): x on the right               (2 + x: x.__radd__(2))
#   "equality"   as "binary", but NotImplemented for what is not array-like, so Python
#                falls back to identity (x == None is False)
#   "unary"      x.name() is f(x)                                   (-x, abs(x), ~x)
#   "power"      as "binary"; a modulus (pow(x, y, m)) is refused, as NumPy refuses it
#   "round"      round(x, n) is f(x, n), n 0 when left out: an array, as JAX's round(x)
#   "property"   x.name is f(x)                                     (x.T, x.real)
#   "method"     x.name(*args, **kwargs) is f(x, *args, **kwargs)   (x.sum(axis=0))
#   "shape"      x.name(2, 3) is x.name((2, 3)) is f(x, (2, 3)); keywords pass on
#                                                                   (x.reshape(2, 3, order="F"))
#   "axes"       ndarray.transpose's forms: no axes, None, one sequence, or the axes
#   "in_place"   raises: tensors are immutable (f is what to write instead)
#   "augmented"  x op= y rebinds x to f(x, y), as for any immutable value (JAX's arrays, ints),
#                but raises where that would differ from NumPy, which changes x in place:
#                another name holds x, or x is a leaf tensor that requires grad (PyTorch raises)
TABLE = {
    # arithmetic, forward and reflected
    "__add__": ("binary", add), "__radd__": ("reflected", add),
    "__sub__": ("binary", subtract), "__rsub__": ("reflected", subtract),
    "__mul__": ("binary", multiply), "__rmul__": ("reflected", multiply),
    "__truediv__": ("binary", divide), "__rtruediv__": ("reflected", divide),
    "__floordiv__": ("binary", floor_divide), "__rfloordiv__": ("reflected", floor_divide),
    "__mod__": ("binary", remainder), "__rmod__": ("reflected", remainder),
    "__pow__": ("power", power), "__rpow__": ("reflected", power),
    "__divmod__": ("binary", divmod_), "__rdivmod__": ("reflected", divmod_),
    "__matmul__": ("binary", matmul), "__rmatmul__": ("reflected", matmul),
    "__neg__": ("unary", negative), "__pos__": ("unary", positive), "__abs__": ("unary", abs),
    "__round__": ("round", round), "__trunc__": ("unary", trunc),
    "__iadd__": ("augmented", add), "__isub__": ("augmented", subtract),
    "__imul__": ("augmented", multiply), "__itruediv__": ("augmented", divide),
    "__ifloordiv__": ("augmented", floor_divide), "__imod__": ("augmented", remainder),
    "__ipow__": ("augmented", power), "__imatmul__": ("augmented", matmul),
    # boolean algebra (bitwise, which on booleans is logical, as NumPy)
    "__and__": ("binary", bitwise_and), "__rand__": ("reflected", bitwise_and),
    "__or__": ("binary", bitwise_or), "__ror__": ("reflected", bitwise_or),
    "__xor__": ("binary", bitwise_xor), "__rxor__": ("reflected", bitwise_xor),
    "__iand__": ("augmented", bitwise_and), "__ior__": ("augmented", bitwise_or),
    "__ixor__": ("augmented", bitwise_xor),
    "__invert__": ("unary", invert),
    # comparisons (elementwise, as NumPy)
    "__lt__": ("binary", less), "__le__": ("binary", less_equal),
    "__gt__": ("binary", greater), "__ge__": ("binary", greater_equal),
    "__eq__": ("equality", equal), "__ne__": ("equality", not_equal),
    # indexing
    "__getitem__": ("binary", getitem),
    # ndarray's attributes
    "T": ("property", transpose), "mT": ("property", _matrix_transpose),
    "real": ("property", real), "imag": ("property", imag),
    "ndim": ("property", ndim), "size": ("property", size),
    # ndarray's methods
    "all": ("method", all), "any": ("method", any), "argmax": ("method", argmax),
    "argmin": ("method", argmin), "argsort": ("method", argsort), "astype": ("method", astype),
    "clip": ("method", clip), "conj": ("method", conj), "conjugate": ("method", conjugate),
    "copy": ("method", copy), "cumprod": ("method", cumprod), "cumsum": ("method", cumsum),
    "diagonal": ("method", diagonal), "dot": ("method", dot), "flatten": ("method", ravel),
    "max": ("method", max), "mean": ("method", mean), "min": ("method", min),
    "prod": ("method", prod), "ravel": ("method", ravel), "repeat": ("method", repeat),
    "round": ("method", round), "squeeze": ("method", squeeze), "std": ("method", std),
    "sum": ("method", sum), "swapaxes": ("method", swapaxes), "take": ("method", take),
    "trace": ("method", trace), "var": ("method", var),
    "reshape": ("shape", reshape), "transpose": ("axes", transpose),
    # ndarray's in-place methods: refused
    "sort": ("in_place", "tnp.sort(x, ...)"), "fill": ("in_place", "tnp.full_like(x, value)"),
    "put": ("in_place", "tnp.at(tnp.ravel(x))[indices].set(values)"),
    "resize": ("in_place", "slicing, tnp.pad and tnp.reshape"),
}


# The arithmetic whose operands, of one front end, shape and dtype, bind their op directly:
# what ``f``'s own fast path (``lowering.elementwise``) does, three calls sooner (``x * y``
# on 0-d tensors is dispatch-bound).
_ELEMENTWISE_OPS = {add: ew.add, subtract: ew.sub, multiply: ew.mul}


def _binary(f):
    op = _ELEMENTWISE_OPS.get(f)
    if op is not None:
        def method(self, other):
            if self._same_layout(other):
                return self.bind(op, (self, other))[0]
            return f(self, other)
        return method

    def method(self, other):
        return f(self, other)
    return method


def _power(f):
    def method(self, other, modulo=None):
        if modulo is not None:
            raise TensorTypeError("pow(x, y, modulo) of a tensor or traced value: three-argument "
                                  "pow is not supported (NumPy's arrays refuse it too); write "
                                  "tnp.remainder(x ** y, modulo)")
        if type(other) is int and other == 2 and dtype_of(self).kind == "b":
            # NumPy's bool_array ** 2 is np.square's int8 (np.power(bool_array, 2) is int64)
            return f(as_dtype(self, np.int8), 2)
        return f(self, other)
    return method


def _python_round(f):
    def method(self, ndigits=None):
        return f(self, 0 if ndigits is None else ndigits)   # an array, as JAX's round(x)
    return method


def _reflected(f):
    def method(self, other):
        return f(other, self)
    return method


def _equality(f):
    def method(self, other):
        return f(self, other) if is_array_like(other) else NotImplemented
    return method


def _unary(f):
    def method(self):
        return f(self)
    return method


def _forwarded(f):
    def method(self, *args, **kwargs):
        return f(self, *args, **kwargs)
    return method


def _shape(f):
    def method(self, *shape, **kwargs):
        return f(self, shape[0] if len(shape) == 1 else shape, **kwargs)
    return method


def _axes(f):
    def method(self, *axes):
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list, np.ndarray))):
            axes = axes[0]
        return f(self, None if axes is None or len(axes) == 0 else tuple(axes))
    return method


class _Probe:
    """Measures the reference count ``x op= y`` gives ``x`` inside its method when one name
    holds ``x`` (so it is right for this interpreter); see :func:`_augmented`."""

    counts: list = []

    def __iadd__(self, other):
        _Probe.counts.append(sys.getrefcount(self))
        return self


def _one_holder_refs() -> tuple[int, int]:
    """The counts for ``x op= y`` and for ``x op= x`` (whose operand is references more)."""
    probe = _Probe()
    probe += 1
    probe += probe
    counts = tuple(_Probe.counts)
    _Probe.counts.clear()
    return counts


_ONE_HOLDER, _ONE_HOLDER_TWICE = _one_holder_refs()
_EXACT_REFS = getattr(sys, "_is_gil_enabled", lambda: True)()   # exact only with the GIL


def _augmented(f, name: str):
    symbol = _AUGMENTED_SYMBOLS[name]
    binary = _binary(f)

    def method(self, other):
        updated = self._update_in_place(name, other)
        if updated is not None:                  # a front end that updates in place now
            return updated
        if getattr(self, "is_leaf", False) and self.requires_grad:
            raise TensorTypeError(
                f"x {symbol} ...: x is a leaf tensor that requires grad, which an in-place "
                f"update would cut from its gradient (PyTorch refuses it too); update its "
                f"values with x.data {symbol} ... (what tnp.optim does), or make a new "
                f"tensor: x = x {symbol[:-1]} ...")
        # (x op= x: the right-hand operand holds x too, which is no other name)
        if _EXACT_REFS and sys.getrefcount(self) > (
                _ONE_HOLDER_TWICE if other is self else _ONE_HOLDER):
            raise TensorTypeError(
                f"x {symbol} ...: {type(self).__name__}s are immutable, so this makes a new "
                f"value, and another name (a caller's variable, a list, an attribute) still "
                f"holds the old one, which NumPy would have changed in place; write "
                f"x = x {symbol[:-1]} ... and pass the result on")
        return self._rebound(_as_numpy_updates(self, binary(self, other), symbol))
    return method


def _as_numpy_updates(x, result, symbol: str):
    """``result`` of ``x op= y`` in ``x``'s dtype and shape, as NumPy's in-place update keeps
    them (float32 ``x *= np.float64(0.5)`` stays float32; a float32 program must not turn
    float64 here); where NumPy refuses (a cast that is not ``same_kind``, a result wider
    than ``x``), a ``TensorTypeError`` / ``TensorShapeError`` as NumPy's error."""
    old, new = dtype_of(x), dtype_of(result)
    if tuple(shape_of(result)) != tuple(shape_of(x)):
        raise TensorShapeError(
            f"x {symbol} y: the result has shape {tuple(shape_of(result))}, but x has shape "
            f"{tuple(shape_of(x))}, which NumPy's in-place update keeps (non-broadcastable "
            f"output operand); write x = x {symbol[:-1]} y for a new array")
    if new != old:
        if not np.can_cast(new, old, casting="same_kind"):
            raise TensorTypeError(
                f"x {symbol} y: the result has dtype {new}, which NumPy cannot cast to x's "
                f"dtype {old} in place (casting rule 'same_kind'); write x = x "
                f"{symbol[:-1]} y for a new array of dtype {new}")
        result = as_dtype(result, old)
    return result


_AUGMENTED_SYMBOLS = {"__iadd__": "+=", "__isub__": "-=", "__imul__": "*=",
                      "__itruediv__": "/=", "__ifloordiv__": "//=", "__imod__": "%=",
                      "__ipow__": "**=", "__imatmul__": "@=", "__iand__": "&=",
                      "__ior__": "|=", "__ixor__": "^="}


def _in_place(instead: str):
    def method(self, *args, **kwargs):
        raise TensorTypeError(f"{type(self).__name__}.{method.__name__}() would change the array "
                              f"in place, but tensors and traced values are immutable (a saved "
                              f"value must not change before backward); use {instead} (a new "
                              f"array)")
    return method


_KINDS = {"binary": _binary, "reflected": _reflected, "equality": _equality, "unary": _unary,
          "power": _power, "round": _python_round,
          "method": _forwarded, "shape": _shape, "axes": _axes, "in_place": _in_place}


def _member(name: str, kind: str, f):
    """The class member for ``name``, calling ``f`` as ``kind`` says."""
    if kind == "property":
        own = f.__name__.startswith("_")          # a helper of this module: its own docstring
        return property(f, doc=f.__doc__ if own else
                        f"``tnp.{f.__name__}(self)``, as ``numpy.ndarray.{name}``.")
    method = _augmented(f, name) if kind == "augmented" else _KINDS[kind](f)
    method.__name__ = method.__qualname__ = name
    if kind == "in_place":
        method.__doc__ = f"Refused: ``numpy.ndarray.{name}`` works in place; use ``{f}``."
    elif kind == "reflected":
        method.__doc__ = f"``tnp.{f.__name__}(other, self)``, as ``numpy.ndarray.{name}``."
    elif kind == "augmented":
        method.__doc__ = (f"``x {_AUGMENTED_SYMBOLS[name]} y`` rebinds ``x`` to "
                          f"``tnp.{f.__name__}(x, y)``; refused where NumPy would change an "
                          f"array another name holds, and on a leaf tensor that requires grad.")
    else:
        method.__doc__ = f"``tnp.{f.__name__}(self, ...)``, as ``numpy.ndarray.{name}``."
    return method


def _size(value) -> int:
    return math.prod(getattr(value, "shape", ()))


def _one_value(x, what: str):
    """The host value of ``x`` for ``float()``/``int()``/``complex()``: a constant (or a clear
    error, :func:`.dispatch.constant_data`) of one element, as a 0-d array, else an error."""
    value = to_host(constant_data(x, what))
    if _size(value) != 1:
        raise TensorTypeError(f"{what} of a {type(x).__name__} of shape {x.shape}: only a "
                              "one-element value converts to a Python number")
    return value.reshape(())          # (PyTorch converts any one-element tensor; NumPy 0-d)


class ArrayOperators:
    """NumPy's operators and array methods for frontend values: the ``tnp`` functions of
    :data:`TABLE`, and Python's protocols."""

    __slots__ = ()

    __hash__ = object.__hash__                   # by identity, as torch.Tensor (__eq__ is NumPy's)

    def __len__(self) -> int:
        if not self.shape:
            raise TensorTypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TensorTypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __contains__(self, value) -> bool:
        """``value in x``: ``(x == value).any()``, as ``numpy.ndarray`` (not a search of
        ``x``'s rows, which compares a row to ``value`` and fails for arrays)."""
        return bool(any(equal(self, value)))

    @property
    def at(self) -> IndexUpdates:
        """JAX's indexed updates, as new values: ``x.at[key].set(v)``, ``.add(v)`` and
        ``.get()`` (:class:`~primitives.tensor.numpy.manipulation.IndexUpdates`)."""
        return IndexUpdates(self)

    def _same_layout(self, other) -> bool:
        """Whether ``other`` is a value of this front end with this shape and dtype: then
        ``self + other`` (``-``, ``*``) binds its op directly. A front end whose layout it
        can read faster overrides it (the eager ``Tensor``)."""
        return type(other) is type(self) and self.shape == other.shape \
            and self.dtype == other.dtype

    def _update_in_place(self, name: str, other):
        """``x op= y`` (``name``: ``"__isub__"``...) done in place by the front end, returning
        ``x``; or ``None``: it makes a new value, ``x = x op y``. The eager ``Tensor``
        updates in place in a ``no_grad`` block, as PyTorch's."""
        return None

    def _rebound(self, result):
        """What ``x op= y`` rebinds ``x`` to, ``result`` being ``x op y``: a front end carries
        over what it keeps per value (the eager ``Tensor``, ``retain_grad``)."""
        return result

    def __setitem__(self, key, value):
        raise TensorTypeError(f"{type(self).__name__}s are immutable: x[{key!r}] = ... cannot "
                              "be recorded; build the new value instead, e.g. with tnp.where "
                              "or tnp.concatenate")

    # conversions: refused where they would drop a derivative (see .dispatch.constant_data)
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

    def __float__(self): return float(_one_value(self, "float()"))
    def __int__(self): return int(_one_value(self, "int()"))
    def __complex__(self): return complex(_one_value(self, "complex()"))
    def __index__(self): return operator.index(to_host(constant_data(self, "using as an index")))

    def __bool__(self) -> bool:
        value = data_of(self, "bool() (an if or while on a traced value)")
        if _size(value) != 1:
            raise TensorShapeError(f"bool() of a {type(self).__name__} of shape "
                                   f"{self.shape} is ambiguous (NumPy's rule); use "
                                   "tnp.any(x) or tnp.all(x)")
        return bool(value)

    # NumPy's functions and ufuncs dispatch here (NEP 18, NEP 13): a differentiable tnp
    # version runs, or a clear error; never a silent conversion (see .dispatch).
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return array_function(func, args, kwargs)


for _name, (_kind, _function) in TABLE.items():
    setattr(ArrayOperators, _name, _member(_name, _kind, _function))
del _name, _kind, _function
