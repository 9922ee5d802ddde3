"""The low floor of the NumPy package: operands and promotion, and the one-to-one wrappers.

Here live the helpers every NumPy-named function starts with, and the functions
that lower to one primitive once their operands are promoted and broadcast:

- operands (:func:`operand`: arrays, numbers, tensors, traced values; Python
  sequences holding tensors stack, as NumPy's ``array()`` would), NumPy's dtype
  promotion with weak Python scalars (:func:`result_dtype`, :func:`promoted`),
  broadcasting (:func:`elementwise`), axis and shape arguments
  (:func:`normalize_axis`, :func:`normalize_axes`, :func:`shape_tuple`), the
  ``out=``/``where=`` arguments of reductions, constants made like an array
  (:func:`filled_like`);
- the wrappers, each one op: ``as_dtype`` (``convert_element_type``),
  ``broadcast_to`` (``broadcast_in_dim``), the arithmetic and transcendental
  ``add``... ``exp``..., ``maximum``/``minimum``, ``where`` (``select``), the
  comparisons, ``abs``/``real``/``imag``/``conj``, ``stop_gradient``,
  ``reshape``, ``transpose``, ``concatenate`` (and ``stack``, one concatenate of
  the operands with a new axis, which :func:`operand` needs), the reductions
  ``sum``/``max``/``min`` and ``dot_general``.

``reshape``, ``transpose``, ``broadcast_to`` and ``real`` hand their operand back
when they have nothing to do (free for the package's own calls); tnp's are their public
forms in :mod:`.creation`, which never hand back an eager ``Tensor`` (:func:`not_itself`).

Composite functions are in the family modules above (:mod:`.indexing`,
:mod:`.mathfuncs`, :mod:`.manipulation`, :mod:`.products`, :mod:`.reductions`,
:mod:`.linalg`, :mod:`.fft`, :mod:`.creation`).

It imports :mod:`.dispatch` only, of the NumPy package (and the ops, ``core``,
``backends`` and ``errors`` below it).

>>> float(sum(exp(np.zeros(3))))
3.0
"""

from __future__ import annotations

import math
import numbers
import operator
import sys
import warnings

import numpy as np

from primitives.tensor.backends import NUMPY, device_of, library_of, numpy_dtype, to_host
from primitives.tensor.core import Frontend, array_below, bind, data_of, dtype_of, shape_of
from primitives.tensor.errors import (ConcretizationError, TensorAxisError,
                                      TensorNotSupportedError,
                                      TensorOverflowError, TensorShapeError, TensorTypeError)
from primitives.tensor.numpy.dispatch import implements
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops import select as sel
from primitives.tensor.ops.dot import DotGeneral
from primitives.tensor.ops.indexing import Concatenate
from primitives.tensor.ops.reduce import ReduceMax, ReduceMin
from primitives.tensor.ops.shape import BroadcastInDim, ReduceSum, Reshape, Transpose

# (reshape, transpose, permute_dims, broadcast_to and real are tnp's by their public forms
# in .creation: these hand an operand back when they have nothing to do)
__all__ = [
    "astype", "exp", "log", "sin", "cos", "tanh", "sqrt", "negative", "positive", "conj",
    "conjugate",
    "add", "subtract", "multiply", "divide", "power", "float_power",
    "maximum", "minimum",
    "where", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "abs",
    "absolute", "imag", "stop_gradient",
    "concatenate", "concat", "stack",
    "sum", "max", "min", "amax", "amin", "dot_general",
]


def first(results):
    """The one result of a ``bind`` (a list of an op's outputs)."""
    return results[0]


def cached_op(make, *fields):
    """``make(*fields)``, one op per parameters, kept: for ops whose fields are shapes, axes
    and dtype names (tuples of ints, strings: equal values are interchangeable). ``make`` is
    an op class, or a function that checks the parameters before making the op. A program
    traced again then names the same op objects, which the graph builder and the key tables
    find by identity (hashing and comparing a new op's fields cost more than making it)."""
    key = (make, fields)
    op = _OPS.get(key)
    if op is None:
        op = make(*fields)
        if len(_OPS) >= 4096:               # shapes can be many: start over then
            _OPS.clear()
        _OPS[key] = op
    return op


_OPS: dict = {}


def dtype_name(dtype: np.dtype) -> str:
    """``dtype.name`` (what ops name their dtype by), remembered for NumPy's built-in dtypes:
    NumPy computes it in Python at every call."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = dtype.name
        if dtype.isbuiltin == 1:
            _DTYPE_NAMES[dtype] = name
    return name


_DTYPE_NAMES: dict = {}


# --- operands: Python sequences of tensors stack, as NumPy's array() would ----------------

_PACKAGE = __name__.rpartition(".")[0] + "."         # the NumPy package's modules


def _public_caller() -> str:
    """The name of the innermost tnp function of the NumPy package on the stack (for errors):
    private functions and this module's operand helpers are skipped."""
    frame = sys._getframe(1)
    while frame is not None and (frame.f_code.co_name.startswith(("_", "<")) or
                                 frame.f_code in _HELPER_CODES or
                                 not frame.f_globals.get("__name__", "").startswith(_PACKAGE)):
        frame = frame.f_back
    return frame.f_code.co_name if frame is not None else "tnp"


def holds_frontend(seq) -> bool:
    """Whether a (nested) list or tuple holds a tensor, a traced value or an array of another
    library than NumPy anywhere (any of which ``np.asarray`` would turn into NumPy data)."""
    pending = [seq]
    while pending:
        for item in pending.pop():
            if isinstance(item, Frontend):
                return True
            if isinstance(item, (list, tuple)):
                pending.append(item)
            elif not isinstance(item, _ARRAY_LIKE) and is_foreign_array(item):
                return True
    return False


_ARRAY_LIKE = (Frontend, np.ndarray, np.generic, numbers.Number)


def operand(x, fn: str | None = None):
    """Python sequences of numbers become arrays (``stack``-ed, with gradients, when they hold
    tensors or traced values); arrays, numbers and frontend values pass through; anything else
    (``None``, strings, a list of strings, generators...) is a ``TensorTypeError`` naming the
    tnp function ``fn`` (by default the innermost one of this package on the stack)."""
    if isinstance(x, _ARRAY_LIKE):
        return x
    if is_foreign_array(x):
        try:
            return library_of(x).checked(x)
        except TensorShapeError as error:   # a Dask array of unknown shape
            raise TensorShapeError(f"{fn or _public_caller()}: {error}") from None
    if not isinstance(x, (list, tuple)):
        raise TensorTypeError(f"{fn or _public_caller()}: expected an array, a number or a (nested) "
                              f"list of them, got {type(x).__name__}")
    if not holds_frontend(x):
        try:
            array = np.asarray(x)
        except ValueError:                      # NumPy's error for a ragged list
            raise TensorShapeError(f"{fn or _public_caller()}: a (nested) list must be "
                                   "rectangular to be an array, got a ragged one") from None
        if array.dtype.kind not in "biufc":     # strings, objects: not numbers to compute on
            raise TensorTypeError(f"{fn or _public_caller()}: expected numbers, got a list "
                                  f"of other values (NumPy makes it an array of {array.dtype})")
        return array
    if not x:
        raise TensorShapeError("array: an empty sequence holds nothing to stack")
    try:
        return stack([operand(item) for item in x])
    except TensorShapeError as error:           # a ragged list holding tensors: named
        raise TensorShapeError(f"{fn or _public_caller()}: a (nested) list must be "
                               f"rectangular to be an array ({error})") from None


# --- promotion and broadcasting -----------------------------------------------------


def is_array_like(value) -> bool:
    """Whether ``value`` is something NumPy takes as an array (what ``==`` compares)."""
    return isinstance(value, (Frontend, np.ndarray, np.generic, numbers.Number, list, tuple)) \
        or is_foreign_array(value)


def is_foreign_array(value) -> bool:
    """An array of another library than NumPy (PyTorch, CuPy, Dask: :mod:`.backends`)."""
    return library_of(value) is not NUMPY


def is_python_scalar(value) -> bool:
    """A Python number (weak in NumPy's promotion), not a NumPy scalar."""
    kind = type(value)
    if kind is float or kind is int or kind is bool or kind is complex:
        return True
    if kind is np.ndarray or isinstance(value, (Frontend, np.generic)):   # (before the ABC)
        return False
    return isinstance(value, numbers.Number)


def result_dtype(*args) -> np.dtype:
    """NumPy's result dtype, with Python scalars weak (``float32_array * 2.0`` stays float32)."""
    if len(args) == 2:              # fast paths, without asking NumPy:
        x, y = args
        if type(x) in _REAL_SCALARS:
            x, y = y, x
        if not is_python_scalar(x):
            dtype = dtype_of(x)
            if dtype.isbuiltin == 1:        # (NumPy's own, in native byte order)
                if type(y) in _REAL_SCALARS:
                    if dtype.kind in "fc":  # NEP 50: a weak real number keeps an inexact dtype
                        return dtype
                elif not is_python_scalar(y) and dtype_of(y) == dtype:
                    return dtype            # two arrays of one dtype
    return np.result_type(*[a if is_python_scalar(a) else
                            _WEAK_KINDS[a.dtype.kind] if isinstance(a, Frontend) and a.weak
                            else dtype_of(a) for a in args])


# a traced Python number (``Frontend.weak``, jit's argument) promotes as a number of its kind
_WEAK_KINDS = {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}


_REAL_SCALARS = frozenset((float, int, bool))     # the Python numbers, but complex


def promoted(*args):
    """The operands converted to their result dtype, and that dtype."""
    if len(args) == 2:
        pair = _promoted_pair(*args)
        if pair is not None:
            return pair
    args = [operand(a) for a in args]
    dtype = result_dtype(*args)
    for a in args:
        if isinstance(a, Frontend) and a.weak:
            _check_weak_fits(a, dtype)
    return [as_dtype(a, dtype) for a in args], dtype


def _check_weak_fits(number, dtype: np.dtype) -> None:
    """NumPy's ``OverflowError`` for a traced Python integer out of range of the integer
    dtype it promotes to (``int8_array + 300``), as for the number itself. (jit traces again
    when a new integer fits other integer dtypes, so the check holds for the trace.)"""
    if dtype.kind in "iu" and number.dtype.kind in "iu":
        value, bounds = int(array_below(number)), np.iinfo(dtype)
        if not bounds.min <= value <= bounds.max:
            raise TensorOverflowError(f"Python integer {value} out of bounds for {dtype.name} "
                                      "(a traced Python number: jit's argument)")


def _promoted_pair(x, y) -> tuple | None:
    """``promoted(x, y)`` where it is quick to know, without the general path's calls: two
    arrays or front-end values of one dtype (as they are), or one of a floating dtype and a
    Python real number (a 0-d array of that dtype: NEP 50 makes a number weak, ``2.0 * x``).
    ``None`` for any other pair.

    >>> [a.dtype.name for a in _promoted_pair(2, np.ones(2, np.float32))[0]]
    ['float32', 'float32']
    """
    x_value = type(x) is np.ndarray or isinstance(x, Frontend)
    y_value = type(y) is np.ndarray or isinstance(y, Frontend)
    if x_value and y_value:
        return ([x, y], x.dtype) if x.dtype == y.dtype else None
    if not (x_value or y_value):
        return None
    value, number = (x, y) if x_value else (y, x)
    dtype = value.dtype
    if type(number) not in _REAL_SCALARS or dtype.kind not in "fc" or dtype.isbuiltin != 1:
        return None
    constant = np.asarray(number, dtype=dtype)
    return ([value, constant] if x_value else [constant, value]), dtype


def broadcast_shapes(fn: str, *shapes) -> tuple:
    """NumPy's broadcast of ``shapes``; a ``TensorShapeError`` naming ``fn`` if they clash."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise TensorShapeError(f"{fn}: shapes {' '.join(str(s) for s in shapes)} cannot be "
                               "broadcast together") from None


def float_dtype(x) -> np.dtype:
    """The dtype a transcendental function computes in (ints become float64)."""
    dtype = dtype_of(x) if not is_python_scalar(x) else np.asarray(x).dtype
    if dtype.kind in "fc":                      # (inexact, without asking NumPy)
        return dtype
    return dtype if np.issubdtype(dtype, np.inexact) else np.dtype(np.float64)


def _ufunc_float_dtype(x) -> np.dtype:
    """The dtype NumPy's transcendental ufuncs (``np.exp``...) compute ``x`` in: the smallest
    float that holds its values (int8, uint8, bool -> float16; int16 -> float32; wider
    ints and Python ints -> float64), unlike reductions (``np.mean`` of ints is float64)."""
    dtype = float_dtype(x)
    if dtype_of(x).kind in "fc" or is_python_scalar(x):
        return dtype
    return np.promote_types(dtype_of(x), np.float16)


def _agree(first, second=None, *rest) -> bool:
    """Whether two operands (arrays, tensors, tracers) have one shape and one dtype."""
    if type(first) in _REAL_SCALARS or type(second) in _REAL_SCALARS:
        return False                            # (a number: without raising to find out)
    try:
        return not rest and first.shape == second.shape and first.dtype == second.dtype
    except AttributeError:                      # a Python number or a list
        return False


BROADCAST_ADD = True
"""Whether :func:`elementwise` makes ``add`` with one broadcast operand one op (the
*broadcast add* device of ``benchmarks/devices.py``; ``False``: ``broadcast_in_dim``, then
``add``)."""


def elementwise(op, *args):
    """Promote ``args`` to one dtype and broadcast them to one shape, then apply ``op``.
    ``add`` of an operand of the result's shape and one broadcast to it is one op,
    :class:`~primitives.tensor.ops.elementwise.AddBroadcast` (a bias added to a batch)."""
    if _agree(*args):                           # fast path: nothing to promote or broadcast
        return bind(op, *args)[0]
    if len(args) == 2 and op is not ew.add:    # (add: its broadcast-add device, below)
        with_number = _with_number(*args)       # x * 2.0: one floating operand, one number
        if with_number is not None:
            return bind(op, *with_number)[0]
    numbers = [type(a) in _PYTHON_NUMBERS for a in args]
    args, _ = promoted(*args)
    shapes = [shape_of(a) for a in args]
    try:
        shape = _broadcast_shape(shapes)
    except ValueError:
        raise TensorShapeError(f"{op!r}: operands could not be broadcast together with shapes "
                               f"{' '.join(str(shape) for shape in shapes)}") from None
    if shapes.count(shape) == len(shapes):      # promoted only (x * 2.0 on a 0-d x)
        return bind(op, *args)[0]
    if op is ew.add and BROADCAST_ADD and shapes[0] != shapes[1] and shape in shapes:
        full = shapes.index(shape)              # (x + b is b + x, exactly)
        other = 1 - full
        return first(bind(cached_op(ew.AddBroadcast, shape, shapes[other]),
                          args[full], args[other]))
    return first(bind(op, *[_broadcast_number(a, shape) if number and type(a) is np.ndarray
                            else broadcast_operand(a, shape) for a, number in zip(args, numbers)]))


_PYTHON_NUMBERS = frozenset((float, int, bool, complex))


def _with_number(x, y) -> list | None:
    """:func:`_promoted_pair` of an array or front-end value of a floating dtype and a Python
    real number, the number's constant broadcast to the other's shape; ``None`` for any
    other pair.

    >>> [(a.dtype.name, a.shape) for a in _with_number(np.ones(2, np.float32), 3)]
    [('float32', (2,)), ('float32', (2,))]
    """
    number_first = type(x) in _REAL_SCALARS
    if not (number_first or type(y) in _REAL_SCALARS):
        return None
    pair = _promoted_pair(x, y)
    if pair is None:
        return None
    (first_arg, second_arg), _ = pair
    value, constant = (second_arg, first_arg) if number_first else (first_arg, second_arg)
    shape = value.shape
    if shape:
        constant = _broadcast_number(constant, shape)
    return [constant, value] if number_first else [value, constant]


def _broadcast_number(constant: np.ndarray, shape: tuple) -> np.ndarray:
    """A 0-d array made here of a Python number, broadcast to ``shape`` (a read-only
    view, what ``broadcast_in_dim`` evaluates to). No one else holds it, so no
    trace needs to see the broadcast (a closed-over array's must be bound: ``jit`` reads it
    again at each call), and ``x * 2.0`` skips binding one op."""
    view = np.ndarray(shape, constant.dtype, buffer=constant, strides=(0,) * len(shape))
    view.flags.writeable = False
    return view


def _broadcast_shape(shapes: list) -> tuple:
    """``np.broadcast_shapes(*shapes)``; one shape, or a shape and ``()``, without asking NumPy."""
    if shapes.count(shapes[0]) == len(shapes):
        return shapes[0]
    if len(shapes) == 2 and () in shapes:
        return shapes[1] if shapes[0] == () else shapes[0]
    return tuple(np.broadcast_shapes(*shapes))


# the helpers that take operands for a tnp function (whose name an error gives)
_HELPER_CODES = frozenset(f.__code__ for f in (operand, promoted, elementwise))


def as_dtype(x, dtype):
    """``x`` converted to ``dtype`` (a ``convert_element_type`` when it changes), or ``x``
    itself when it has that dtype (as ``np.asarray(x, dtype)``); ``dtype`` may be another
    library's (``torch.float16``). Public: :func:`astype`, which copies as NumPy does."""
    try:
        dtype = numpy_dtype(dtype)
    except TensorTypeError as error:                    # one NumPy lacks: name the function
        raise TensorTypeError(f"{_public_caller()}: {error}") from None
    if not isinstance(x, Frontend):
        kind = type(x)
        try:
            if kind in _REAL_SCALARS:           # (a real number: no complex part to drop)
                return np.asarray(x, dtype=dtype)
            if kind is np.ndarray and x.dtype == dtype and dtype.isbuiltin == 1:
                return x                        # (what np.asarray returns)
            x = operand(x)
            if is_python_scalar(x) or isinstance(x, (np.ndarray, np.generic)):
                return np.asarray(x, dtype=dtype) if not np.iscomplexobj(x) or \
                    dtype.kind == "c" else np.asarray(np.real(x), dtype=dtype)
        except OverflowError as error:          # int8_array + 300: NumPy's error, named
            raise TensorOverflowError(f"{_public_caller()}: {error}") from None
    old = dtype_of(x)
    if old == dtype:
        return x
    if dtype.kind not in "biufc":       # object, str...: the values would leave the graph
        raise TensorTypeError(
            f"astype({dtype}) of a {type(x).__name__}: tensors and traced values hold numbers "
            "(bool, integer, floating point, complex); a cast to another dtype would drop the "
            "derivative; take the values out on purpose first (.detach().numpy())")
    return first(bind(ew.ConvertElementType(dtype_name(dtype), dtype_name(old)), x))


_HELPER_CODES |= {as_dtype.__code__}           # (its errors name the function calling it)


@implements(np.astype)
def astype(x, dtype, *, copy: bool = True):
    """``np.astype``: ``x`` converted to ``dtype``, differentiably. As in NumPy, an array
    that has ``dtype`` already is copied unless ``copy=False`` (the result is never the
    caller's array to write to); so is an eager ``Tensor``, as a new tensor on its values
    (:func:`not_itself`); a traced value is immutable, so one that has ``dtype`` comes back
    as it is.

    >>> import primitives.tensor as tnp
    >>> a = np.ones(2)
    >>> tnp.astype(a, np.float64) is a, tnp.astype(a, np.float64, copy=False) is a
    (False, True)
    >>> x = tnp.tensor(a, requires_grad=True)
    >>> tnp.astype(x, np.float32).backward(np.ones(2, np.float32)).grad(x)
    array([1., 1.])
    >>> tnp.astype(x, np.float64) is x, tnp.astype(x, np.float64, copy=False) is x
    (False, True)
    """
    if type(x) is np.ndarray:                   # a constant: NumPy's own conversion
        return np.astype(x, dtype_arg(dtype, "astype"), copy=copy)
    converted = as_dtype(x, dtype)
    if copy and converted is x:
        return not_itself(x, x) if isinstance(x, Frontend) else library_of(x).clone(x)
    return converted


def not_itself(result, x):
    """``result``, or, when it is the eager ``Tensor`` ``x`` itself (a function that had
    nothing to do, as a reshape to ``x``'s own shape), a new tensor on ``x``'s values: one
    recorded same-shape reshape, PyTorch's view. State set on the result (``requires_grad_``,
    ``.data``) then cannot change ``x``. An array or a traced value comes back as it is
    (NumPy returns views; traced values are immutable). Public functions call it at their
    end; the package's own calls go without it, and cost nothing when nothing changes.

    >>> import primitives.tensor as tnp
    >>> t = tnp.tensor([1.0, 2.0], requires_grad=True)
    >>> u = not_itself(t, t)
    >>> u is t, u.is_leaf, not_itself(t.data, t.data) is t.data
    (False, False, True)
    """
    if result is x and isinstance(x, Frontend) and not x.is_tracer:
        shape = shape_of(x)
        return first(bind(cached_op(Reshape, shape, shape), x))
    return result


def new_value(x):
    """``x`` as the result of a function that NumPy makes a new array for (``concatenate`` of
    one array, ``pad`` by nothing): a plain array is copied, so writing to the result does
    not change the caller's input; an eager ``Tensor`` gives a new tensor on its values
    (:func:`not_itself`: its state is its own); a traced value (immutable) is returned as it
    is. A Python number becomes a 0-d array (NumPy's ``asarray``: ``np.sum(3)`` is an int64),
    and so does a traced one (``jit``'s argument): the result promotes as an array, not as a
    number, as without ``jit``.

    >>> import primitives.tensor as tnp
    >>> t = tnp.tensor([1.0, 2.0], requires_grad=True)
    >>> new_value(t) is t, new_value(3)
    (False, array(3))
    """
    if isinstance(x, Frontend):
        if x.weak or not x.is_tracer:
            shape = shape_of(x)
            return first(bind(cached_op(Reshape, shape, shape), x))
        return x
    if type(x) in _REAL_SCALARS or type(x) is complex:
        return np.asarray(x)
    return library_of(x).clone(x)


def broadcast_to(x, shape):
    """``np.broadcast_to``: a ``broadcast_in_dim`` that aligns trailing axes; ``x`` itself
    to its own shape (tnp's, :func:`.creation.broadcast_to`, never an eager ``Tensor``)."""
    return broadcast_operand(operand(x), shape_tuple(shape, "broadcast_to"))


def broadcast_operand(x, shape: tuple):
    """:func:`broadcast_to` of an operand (what :func:`operand` returns) to a tuple of ints."""
    old = shape_of(x)
    if old == shape:
        return x
    if len(old) > len(shape) or any(o not in (1, n) for o, n in zip(old[::-1], shape[::-1])):
        raise TensorShapeError(f"broadcast_to: cannot broadcast shape {old} to {shape}")
    dims = tuple(range(len(shape) - len(old), len(shape)))
    return first(bind(cached_op(BroadcastInDim, shape, dims, old), x))


def constant_values(value, what: str):
    """The values of ``value``, an argument taken as a constant (``pad``'s ``constant_values``,
    ``quantile``'s ``q``), on the host; one whose derivative would be lost is refused by
    ``what``: a tensor or traced value that carries a gradient, a PyTorch tensor that PyTorch's
    autograd records (it requires grad, in PyTorch's grad mode).

    >>> constant_values([0.5, 1.0], "pad: constant_values")
    array([0.5, 1. ])
    """
    if isinstance(value, Frontend):
        if value.carries_gradient:
            raise TensorTypeError(
                f"{what}: a {type(value).__name__} that carries a gradient is taken as a "
                "constant here, and its derivative would be lost; pass it on as a constant on "
                "purpose with tnp.stop_gradient(v)")
        return to_host(data_of(value, what))
    if library_of(value).records(value):
        raise TensorTypeError(
            f"{what}: a PyTorch tensor that requires grad in PyTorch's autograd is taken as a "
            "constant here, and PyTorch's gradient through it would be lost; pass v.detach()")
    return to_host(value)


def dtype_arg(dtype, fn: str) -> np.dtype | None:
    """A ``dtype=`` argument of ``fn`` as NumPy's dtype (any library's: ``torch.float32`` is
    ``float32``; ``None`` stays ``None``); one NumPy lacks is a ``TensorTypeError`` naming ``fn``.

    >>> dtype_arg("float32", "zeros"), dtype_arg(None, "zeros")
    (dtype('float32'), None)
    """
    if dtype is None:
        return None
    try:
        return numpy_dtype(dtype)
    except TensorTypeError as error:
        raise TensorTypeError(f"{fn}: {error}") from None


# --- axis, shape and reduction arguments ------------------------------------------------


def normalize_axis(axis, ndim: int, fn: str) -> int:
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


def normalize_axes(axis, ndim: int, fn: str) -> tuple:
    """Sorted, distinct axes in ``range(ndim)`` from an int, a sequence of ints or ``None``
    (all axes); a repeated axis is NumPy's ``ValueError``."""
    if axis is None:
        return tuple(range(ndim))
    many = isinstance(axis, (tuple, list))
    axes = [normalize_axis(a, ndim, fn) for a in (axis if many else (axis,))]
    if len(set(axes)) != len(axes):
        raise TensorShapeError(f"{fn}: duplicate value in 'axis': {axis}")
    return tuple(sorted(axes))


def reduction_axes(axis, ndim: int, fn: str) -> tuple:
    """:func:`normalize_axes` for NumPy's ufunc reductions (``sum``, ``max``, ``all``...),
    which take an integer ``axis`` 0 or -1 of a 0-d array as no axes (a tuple is refused).

    >>> reduction_axes(-1, 0, "sum"), reduction_axes(-1, 2, "sum")
    ((), (1,))
    """
    if not ndim and type(axis) is not bool and isinstance(axis, (int, np.integer)) \
            and axis in (0, -1):
        return ()
    return normalize_axes(axis, ndim, fn)


def shape_tuple(shape, fn: str) -> tuple:
    """A shape argument as a tuple of Python ints (an int is a 1-d shape)."""
    if type(shape) is tuple and all([type(d) is int for d in shape]):     # the common case
        return shape
    if isinstance(shape, Frontend) and not shape.shape:
        shape = (shape,)                    # a 0-d tensor or traced value: one dimension
    try:
        dims = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
        return tuple(operator.index(data_of(d, f"{fn}: a dimension of the shape"))
                     if isinstance(d, Frontend) else operator.index(d) for d in dims)
    except ConcretizationError:
        raise
    except TypeError:
        raise TensorTypeError(f"{fn}: a shape must be an integer or a sequence of integers, "
                              f"got {shape!r}") from None


NO_VALUE = object()       # NumPy's "argument not given" (None is a value for some)


def no_out(out, fn: str) -> None:
    """Refuse NumPy's ``out=``: tensors are immutable."""
    if out is not None:
        raise TensorNotSupportedError(f"{fn}: out= (of numpy.{fn}) is not supported by "
                                      f"tnp.{fn}: tensors are immutable; use the returned array")


# NumPy's ufunc keywords tnp's ufuncs take only at these values, which change nothing without
# out= and dtype= ("unsafe" casting allows every cast "same_kind" does)
_NO_OP_KEYWORDS = {"casting": ("same_kind", "unsafe"), "order": ("K",), "subok": (True,)}
_OTHER_UFUNC_KEYWORDS = ("signature", "axes", "axis", "keepdims")


def ufunc_keywords(fn: str, out, where, dtype, options: dict | None = None,
                   *operands) -> tuple:
    """NumPy's keywords of the ufunc ``fn`` beyond its operands, checked; returns
    ``operands``, converted as ``dtype=`` asks. (Taken as positional parameters with
    defaults, which cost the common call least: a ufunc calls this only when one is given.)

    - ``out=`` and ``where=`` are refused unless given NumPy's defaults (tensors are
      immutable);
    - ``dtype=`` and ``casting=`` are NumPy's when the ufunc passes its ``operands``: they
      come back converted to the dtypes of the loop NumPy runs for them (so the ufunc
      computes in ``dtype``, differentiably: a conversion is a recorded ``astype``), where
      ``casting`` allows it (``'same_kind'`` by default), NumPy's refusal otherwise, as a
      ``TensorTypeError`` naming ``fn`` with NumPy's text (:func:`_in_loop_dtypes`). A
      ufunc that does not pass them takes ``casting=`` only at values that change nothing
      and refuses ``dtype=``;
    - ``order=`` and ``subok=`` are taken at NumPy's defaults; NumPy's other keywords are
      refused by name, and an unknown keyword is a ``TypeError`` as Python's.

    >>> ufunc_keywords("add", (None,), True, None, {"casting": "same_kind", "order": "K"})
    ()
    >>> [a.dtype for a in ufunc_keywords("add", None, True, np.float32, {}, np.ones(2), 1)]
    [dtype('float32'), dtype('float32')]
    >>> ufunc_keywords("add", None, True, np.int64, {}, np.ones(2), 1)
    Traceback (most recent call last):
    ...
    primitives.tensor.errors.TensorTypeError: add: Cannot cast ufunc 'add' input 0 from ... 'same_kind'
    >>> ufunc_keywords("add", None, np.array([True, False]), None)
    Traceback (most recent call last):
    ...
    primitives.tensor.errors.TensorNotSupportedError: add: where= (of numpy.add) is not supported by tnp.add; ...
    >>> ufunc_keywords("add", None, True, None, {"casting": "no"})
    Traceback (most recent call last):
    ...
    primitives.tensor.errors.TensorNotSupportedError: add: casting='no' (of numpy.add) ...
    """
    if not (type(out) is tuple and all(o is None for o in out)):
        no_out(out, fn)
    if where is not True and not (type(where) is np.bool_ and where):   # (np.True_ too)
        raise TensorNotSupportedError(
            f"{fn}: where= (of numpy.{fn}) is not supported by tnp.{fn}; for the values "
            f"where the mask is false, choose them: tnp.where(mask, tnp.{fn}(...), other)")
    casting = "same_kind"
    for name, value in (options or {}).items():
        taken = _NO_OP_KEYWORDS.get(name)
        if taken is None and name not in _OTHER_UFUNC_KEYWORDS:
            raise TensorTypeError(f"{fn}() got an unexpected keyword argument {name!r}")
        if taken is None:
            raise TensorNotSupportedError(f"{fn}: {name}= (of numpy.{fn}) is not supported by "
                                          f"tnp.{fn}")
        if name == "casting" and operands:
            casting = value
        elif not (isinstance(value, (str, bool, np.bool_)) and value in taken):
            accepted = " or ".join(f"{name}={t!r}" for t in taken)
            raise TensorNotSupportedError(
                f"{fn}: {name}={value!r} (of numpy.{fn}) is not supported by tnp.{fn}, which "
                f"takes {accepted} (NumPy's default: no out= or dtype=, nothing to cast to "
                f"or lay out); convert the operands first (tnp.astype(x, dtype))")
    if operands and (dtype is not None or casting != "same_kind"):
        return _in_loop_dtypes(fn, operands, dtype, casting)
    if dtype is not None:
        raise TensorNotSupportedError(
            f"{fn}: dtype= (of numpy.{fn}) is not supported by tnp.{fn}; convert the operands "
            f"first (tnp.astype(x, dtype))")
    return operands


def _in_loop_dtypes(fn: str, operands: tuple, dtype, casting: str) -> tuple:
    """``operands`` of NumPy's ufunc ``fn`` converted to the input dtypes of the loop NumPy
    runs for them with ``dtype=`` and ``casting=`` (``ufunc.resolve_dtypes``: Python numbers
    weak, as in NumPy 2). NumPy's refusals are NumPy's own, with its text, as a ``TiduError``
    naming ``fn``: a cast ``casting`` does not allow, no loop for ``dtype``
    (``TensorTypeError``), a Python ``int`` out of the loop's range
    (``TensorOverflowError``). Without ``dtype`` the operands are only checked against
    ``casting`` (the loop is their promoted dtype, which tnp's ``fn`` computes in).

    >>> _in_loop_dtypes("less", (np.ones(1, np.int8), 300), "bool", "same_kind")[1]
    300
    """
    ufunc = getattr(np, fn)
    operands = tuple(x if is_python_scalar(x) else operand(x, fn) for x in operands)
    given = tuple(_WEAK.get(type(x), type(x)) if is_python_scalar(x) else dtype_of(x)
                  for x in operands)
    loop_output = None if dtype is None else dtype_arg(dtype, fn)
    try:
        # NumPy's checks, by NumPy itself: the ufunc on empty arrays of the operands' dtypes
        # (and the Python numbers themselves, whose conversion warnings come once, later)
        stand_ins = [x if is_python_scalar(x) else np.empty(0, dtype_of(x)) for x in operands]
        if any(is_python_scalar(x) for x in operands):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ufunc(*stand_ins, dtype=loop_output, casting=casting)
        else:
            ufunc(*stand_ins, dtype=loop_output, casting=casting)
        if dtype is None:
            return operands
        # the loop's input dtypes (the casting rule never changes which loop; NumPy 2.4's
        # resolve_dtypes can crash given Python numbers with the stricter rules)
        loop = ufunc.resolve_dtypes(given + (None,) * ufunc.nout, casting="unsafe",
                                    signature=(None,) * ufunc.nin + (loop_output,) * ufunc.nout)
    except TypeError as error:                      # (NumPy's UFuncTypeError, "No loop...")
        raise TensorTypeError(f"{fn}: {error}") from None
    except OverflowError as error:                  # (a Python int out of the loop's range)
        raise TensorOverflowError(f"{fn}: {error}") from None
    except ValueError as error:                     # ("casting must be one of...")
        raise TensorShapeError(f"{fn}: {error}") from None
    if loop[-1].kind not in "biufc" and any(isinstance(x, Frontend) for x in operands):
        raise TensorTypeError(f"{fn}: dtype={loop[-1]} for a tensor or traced value, which "
                              "holds numbers (bool, integer, floating point, complex): the "
                              "result would drop the derivative")
    return tuple(_scalar_in(x, loop_dtype, loop[-1], fn) if is_python_scalar(x)
                 else as_dtype(x, loop_dtype) for x, loop_dtype in zip(operands, loop))


_WEAK = {bool: np.dtype(bool)}          # (NumPy resolves int, float, complex as weak types)


def _scalar_in(number, dtype: np.dtype, output: np.dtype, fn: str):
    """A Python ``number`` as a 0-d array of the loop's ``dtype``, as NumPy converts it (an
    ``int`` out of its range is NumPy's ``OverflowError``, except in a comparison, which
    takes it exactly; a complex number's imaginary part dropped, with NumPy's warning)."""
    try:
        return np.asarray(number, dtype=dtype) if not isinstance(number, complex) or \
            dtype.kind == "c" else np.asarray(number).astype(dtype)
    except OverflowError as error:
        if output == np.bool_:
            return number              # (the comparison itself compares it exactly)
        raise TensorOverflowError(f"{fn}: {error}") from None


def masked(x, where, fill, fn: str):
    """``x`` where ``where`` holds, ``fill`` elsewhere (NumPy's ``where=`` of reductions)."""
    if where is NO_VALUE:
        return x
    mask = operand(where, fn)
    if dtype_of(mask) != np.bool_:
        raise TensorTypeError(f"{fn}: where= must be boolean, got {dtype_of(mask)}")
    return globals()["where"](mask, x, fill)


# --- constants made like an array -------------------------------------------------------------


def filled_like(a, value, dtype, fn: str):
    """An array of ``a``'s shape (and dtype, unless given) filled with ``value`` (zeros for
    ``None``), in ``a``'s library, on its device; NumPy for a traced ``a`` (a transform's
    results come out in its arguments' library, and a NumPy constant suits any call of a
    ``jit``-compiled function). A constant: its values do not depend on ``a``'s."""
    a = operand(a, fn)
    shape = shape_of(a)
    dtype = dtype_of(a) if dtype is None else dtype_arg(dtype, fn)
    below = a if not isinstance(a, Frontend) or a.is_tracer else array_below(a)
    library = library_of(below)
    if library is NUMPY:
        return np.zeros(shape, dtype=dtype) if value is None else np.full(shape, value, dtype=dtype)
    if value is None:
        return library.xp.zeros(shape, dtype=dtype, device=device_of(below))
    if np.ndim(value) != 0:                             # an array of values to broadcast
        return library.from_numpy(np.full(shape, value, dtype=dtype), below)
    return library.xp.full(shape, value, dtype=dtype, device=device_of(below))


def constant_in_library_of(constant: np.ndarray, a):
    """A NumPy ``constant`` (indices, counts) as an array of ``a``'s library, on its device;
    NumPy's for a traced ``a`` (as :func:`filled_like`'s); for an eager ``Tensor`` ``a``, a
    ``Tensor`` that does not require grad (a ``Tensor`` in gives ``Tensor``s out, as in
    PyTorch).

    >>> import primitives.tensor as tnp
    >>> constant_in_library_of(np.array([2, 0]), tnp.tensor([1.0], requires_grad=True))
    tensor([2, 0])
    """
    if not isinstance(a, Frontend):
        library = library_of(a)
        return constant if library is NUMPY else library.from_numpy(constant, a)
    if a.is_tracer:
        return constant
    below = array_below(a)
    library = library_of(below)
    return type(a)(constant if library is NUMPY else library.from_numpy(constant, below))


# --- elementwise ----------------------------------------------------------------------


def _unary_float(op):
    def fn(x, out=None, where=True, dtype=None, **options):
        if out is not None or where is not True or dtype is not None or options:
            x, = ufunc_keywords(op.name, out, where, dtype, options, x)
        if isinstance(x, Frontend):
            if x.dtype.kind in "fc":            # one front end: its own bind, directly
                return x.bind(op, (x,))[0]
        elif getattr(getattr(x, "dtype", None), "kind", None) in ("f", "c"):
            return bind(op, x)[0]
        x = operand(x, op.name)
        return first(bind(op, as_dtype(x, _ufunc_float_dtype(x))))
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = f"``np.{op.name}``, differentiable."
    return implements(getattr(np, op.name))(fn)


exp = _unary_float(ew.exp)
log = _unary_float(ew.log)
sin = _unary_float(ew.sin)
cos = _unary_float(ew.cos)
tanh = _unary_float(ew.tanh)
sqrt = _unary_float(ew.sqrt)


@implements(np.negative)
def negative(x, out=None, where=True, dtype=None, **options):
    """``np.negative``."""
    if out is not None or where is not True or dtype is not None or options:
        x, = ufunc_keywords("negative", out, where, dtype, options, x)
    x = operand(x, "negative")
    if dtype_of(x).kind == "b":
        raise TensorTypeError("negative (-x) of booleans is not supported, as in NumPy: use "
                              "tnp.logical_not (~x)")
    return first(bind(ew.neg, x))


@implements(np.positive)
def positive(x, out=None, where=True, dtype=None, **options):
    """``np.positive``: ``x``'s values (a new array, as NumPy's; of an eager ``Tensor``, a new
    tensor, :func:`new_value`)."""
    if out is not None or where is not True or dtype is not None or options:
        x, = ufunc_keywords("positive", out, where, dtype, options, x)
    return new_value(operand(x))


@implements(np.conj)
def conj(x, out=None, where=True, dtype=None, **options):
    """``np.conj``: the complex conjugate; the identity on real values, a new array (of an
    eager ``Tensor``, a new tensor on its values: :func:`new_value`), as NumPy's.

    >>> import primitives.tensor as tnp
    >>> t = tnp.tensor([1.0, 2.0], requires_grad=True)
    >>> conj(t) is t, conj(np.array([1.0 + 2.0j]))
    (False, array([1.-2.j]))
    """
    if out is not None or where is not True or dtype is not None or options:
        x, = ufunc_keywords("conj", out, where, dtype, options, x)
    x = operand(x)
    return first(bind(ew.conj, x)) if np.issubdtype(dtype_of(x), np.complexfloating) \
        else new_value(x)


conjugate = conj


@implements(np.add)
def add(x, y, out=None, where=True, dtype=None, **options):
    """``np.add``."""
    if out is not None or where is not True or dtype is not None or options:
        x, y = ufunc_keywords("add", out, where, dtype, options, x, y)
    return elementwise(ew.add, x, y)


@implements(np.subtract)
def subtract(x, y, out=None, where=True, dtype=None, **options):
    """``np.subtract``."""
    if out is not None or where is not True or dtype is not None or options:
        x, y = ufunc_keywords("subtract", out, where, dtype, options, x, y)
    x, y = operand(x, "subtract"), operand(y, "subtract")
    if dtype_of(x).kind == "b" and dtype_of(y).kind == "b":
        raise TensorTypeError("subtract (x - y) of booleans is not supported, as in NumPy: "
                              "use tnp.logical_xor (x ^ y)")
    return elementwise(ew.sub, x, y)


@implements(np.multiply)
def multiply(x, y, out=None, where=True, dtype=None, **options):
    """``np.multiply``."""
    if out is not None or where is not True or dtype is not None or options:
        x, y = ufunc_keywords("multiply", out, where, dtype, options, x, y)
    return elementwise(ew.mul, x, y)


@implements(np.divide)
def divide(x, y, out=None, where=True, dtype=None, **options):
    """``np.divide`` (true division: integers divide as float64)."""
    if out is not None or where is not True or dtype is not None or options:
        x, y = ufunc_keywords("divide", out, where, dtype, options, x, y)
    x, y = operand(x), operand(y)
    if not np.issubdtype(result_dtype(x, y), np.inexact):
        x, y = as_dtype(x, np.float64), as_dtype(y, np.float64)
    return elementwise(ew.div, x, y)


@implements(np.power)
def power(x, p, out=None, where=True, dtype=None, **options):
    """``np.power`` (``x ** p``), differentiable in ``x`` and ``p``.

    A Python-number exponent is a constant (``integer_pow``, ``pow``); otherwise
    ``d/dx = p x**(p-1)`` (0 where ``p == 0``) and ``d/dp = log(x) x**p`` (0 at ``x = 0``,
    NaN there for ``p < 0``, as JAX); holomorphic for complex operands.

    >>> float(power(2.0, 3))
    8.0
    """
    if out is not None or where is not True or dtype is not None or options:
        x, p = ufunc_keywords("power", out, where, dtype, options, x, p)
    x = operand(x)
    if is_python_scalar(p):
        if isinstance(p, numbers.Integral):
            if dtype_of(x).kind == "b":     # NumPy's: bool ** int is int64, bool ** bool int8
                x = as_dtype(x, np.int8 if type(p) is bool else result_dtype(x, p))
            return first(bind(ew.IntegerPow(int(p)), x))
        return first(bind(ew.Pow(p), as_dtype(x, result_dtype(x, p))))
    (x, p), dtype = promoted(x, p)
    shape = broadcast_shapes("power", shape_of(x), shape_of(p))
    return first(bind(ew.Power(shape, dtype_name(dtype)), broadcast_to(x, shape),
                      broadcast_to(p, shape)))


@implements(np.float_power)
def float_power(x, p, out=None, where=True, dtype=None, **options):
    """``np.float_power``: :func:`power` computed in float64 (complex128 for complex
    operands), whatever the operands' precision, as NumPy's; differentiable in both.

    >>> float_power(np.float32(2.0), 3).dtype
    dtype('float64')
    """
    if out is not None or where is not True or dtype is not None or options:
        x, p = ufunc_keywords("float_power", out, where, dtype, options, x, p)
    x, p = operand(x, "float_power"), operand(p, "float_power")
    kind = np.result_type(dtype_of(x), dtype_of(p)).kind
    wide = np.dtype(np.complex128 if kind == "c" else np.float64)
    return power(as_dtype(x, wide), as_dtype(p, wide))


@implements(np.maximum)
def maximum(x, y, out=None, where=True, dtype=None, **options):
    """``np.maximum``; at ties each operand gets half the tangent (as in JAX)."""
    if out is not None or where is not True or dtype is not None or options:
        x, y = ufunc_keywords("maximum", out, where, dtype, options, x, y)
    x, y = operand(x), operand(y)
    return elementwise(ew.Maximum(dtype_name(result_dtype(x, y))), x, y)


@implements(np.minimum)
def minimum(x, y, out=None, where=True, dtype=None, **options):
    """``np.minimum``; at ties each operand gets half the tangent (as in JAX)."""
    if out is not None or where is not True or dtype is not None or options:
        x, y = ufunc_keywords("minimum", out, where, dtype, options, x, y)
    x, y = operand(x), operand(y)
    return elementwise(ew.Minimum(dtype_name(result_dtype(x, y))), x, y)


# --- selection and comparisons --------------------------------------------------------------


@implements(np.where)
def where(condition, x=None, y=None):
    """``np.where(condition, x, y)``; the condition is not differentiated. NumPy's
    one-argument form is ``np.nonzero(condition)``: the condition is read (not under ``jit``
    or ``vmap`` when traced: the result's shape depends on its values)."""
    if x is None and y is None:
        data = data_of(operand(condition, "where"), "where(condition) (its result's shape "
                                                    "depends on the condition's values)")
        if not shape_of(data):
            raise TensorShapeError("where(condition) of a 0-d condition: NumPy does not "
                                   "take it (np.nonzero of a 0-d array)")
        return tuple(constant_in_library_of(indices, condition)
                     for indices in np.nonzero(to_host(data)))
    if x is None or y is None:
        raise TensorShapeError("where: either both or neither of x and y should be given")
    condition, x, y = operand(condition), operand(x), operand(y)
    dtype = result_dtype(x, y)
    shape = broadcast_shapes("where", shape_of(condition), shape_of(x), shape_of(y))
    condition = broadcast_to(as_dtype(condition, np.bool_), shape)
    x, y = broadcast_to(as_dtype(x, dtype), shape), broadcast_to(as_dtype(y, dtype), shape)
    return first(bind(sel.Select(shape, dtype_name(dtype)), condition, x, y))


def _beyond_integer_range(x, y):
    """``(x, y)`` for a comparison; as NumPy 2, a Python ``int`` out of the range of the
    other operand's integer dtype compares exactly (``int8 < 300`` is true everywhere)
    instead of overflowing: that operand becomes float64 and the int an infinity of its
    sign, which every value of the dtype compares to as to the int."""
    for number, other in ((y, x), (x, y)):
        if type(number) is int and not is_python_scalar(other) and \
                dtype_of(other).kind in "iu":
            info = np.iinfo(dtype_of(other))
            if not info.min <= number <= info.max:
                bound = math.copysign(math.inf, number)
                other = as_dtype(other, np.float64)
                return (other, bound) if number is y else (bound, other)
    return x, y


def _comparison(name: str, np_name: str):
    op = sel.Compare(name)

    def fn(x, y, out=None, where=True, dtype=None, **options):
        if out is not None or where is not True or dtype is not None or options:
            x, y = ufunc_keywords(np_name, out, where, dtype, options, x, y)
        x, y = _beyond_integer_range(operand(x, np_name), operand(y, np_name))
        return elementwise(op, x, y)
    fn.__name__ = fn.__qualname__ = np_name
    fn.__doc__ = f"``np.{np_name}``: a boolean result, not differentiated."
    return implements(getattr(np, np_name))(fn)


equal = _comparison("eq", "equal")
not_equal = _comparison("ne", "not_equal")
less = _comparison("lt", "less")
less_equal = _comparison("le", "less_equal")
greater = _comparison("gt", "greater")
greater_equal = _comparison("ge", "greater_equal")


# --- absolute value, complex parts, constants ---------------------------------------------------


@implements(np.abs)
def abs(x, out=None, where=True, dtype=None, **options):
    """``np.abs``; of a complex ``z``, the real ``|z|``."""
    if out is not None or where is not True or dtype is not None or options:
        x, = ufunc_keywords("abs", out, where, dtype, options, x)
    x = operand(x)
    dtype = dtype_of(x)
    if np.issubdtype(dtype, np.complexfloating):
        return first(bind(ew.ComplexAbs(dtype.name), x))
    return first(bind(ew.abs_real, x))


absolute = abs


def real(x):
    """``np.real``: the identity on real values (``x`` itself: tnp's, :func:`.creation.real`,
    never is an eager ``Tensor``)."""
    x = operand(x)
    dtype = dtype_of(x)
    return first(bind(ew.Real(dtype.name), x)) if dtype.kind == "c" else x


@implements(np.imag)
def imag(x):
    """``np.imag``: zeros (with no derivative) for real values."""
    x = operand(x)
    dtype = dtype_of(x)
    op = ew.Imag(dtype.name) if dtype.kind == "c" else ew.zeros_like
    return first(bind(op, x))


def stop_gradient(x):
    """``x`` as a constant: no derivative flows through it.

    For an array, its data as an array of its library (a PyTorch tensor detached:
    PyTorch's autograd stops there too); for an eager ``Tensor``, a ``Tensor`` of its data
    that does not require grad (``t.detach()``, so what is computed from it stays a
    ``Tensor``); for a traced value, a ``stop_gradient`` op (its value where the data is
    not known yet, under ``jit``).

    >>> import primitives.tensor as tnp
    >>> stop_gradient(tnp.tensor([1.0, 2.0], requires_grad=True))
    tensor([1., 2.])
    """
    x = operand(x)
    if isinstance(x, Frontend):
        if x.is_tracer:
            return first(bind(ew.stop_gradient, x))
        data = array_below(x)
        if is_foreign_array(data):
            return type(x)(library_of(data).detached(data))
        return x.detach()
    return library_of(x).detached(x) if is_foreign_array(x) else np.asarray(x)


# --- shapes: reshape, transpose, joining -------------------------------------------------------


def reshape(x, shape, order: str = "C", *, copy: bool | None = None):
    """``np.reshape`` (one ``-1`` allowed), reading and writing in C order or, with
    ``order="F"``, in Fortran order. ``copy`` is accepted for NumPy's signature and not
    used: tensors and traced values are never written to (of a NumPy array, a C-order
    reshape may be a view, as NumPy's is). To its own shape, ``x`` itself: free for the
    package's own calls; tnp's (:func:`.creation.reshape`) never is an eager ``Tensor``.

    >>> reshape(np.arange(6.0), (2, 3), order="F")
    array([[0., 2., 4.],
           [1., 3., 5.]])
    """
    if isinstance(order, str) and order in ("c", "f", "a", "k"):
        order = order.upper()       # NumPy takes the orders in either case
    if order == "F":                # Fortran order is C order on the axes reversed
        x, shape = operand(x), shape_tuple(shape, "reshape")
        try:
            return transpose(reshape(transpose(x), shape[::-1]))
        except TensorShapeError:    # (named with the shapes the caller gave, not reversed)
            raise TensorShapeError(f"reshape: cannot reshape array of shape {shape_of(x)} "
                                   f"into {shape} (order='F')") from None
    if order != "C":
        if order in ("A", "K"):
            raise TensorNotSupportedError(
                f"reshape: order={order!r} depends on the memory layout of the data, which "
                "tensors and traced values do not have; pass order='C' or order='F'")
        raise TensorShapeError(f"reshape: order must be one of 'C', 'F', 'A', got {order!r}")
    x = operand(x)
    old = shape_of(x)
    shape = shape_tuple(shape, "reshape")
    if 0 not in old and all([d >= 0 for d in shape]) and math.prod(shape) == math.prod(old):
        new = shape                 # every size given, and they fit: NumPy's answer, unasked
    else:
        try:
            new = (np.empty(old, dtype=np.int8).reshape(shape) if 0 not in old else
                   np.reshape(np.empty(old), shape)).shape
        except ValueError:
            raise TensorShapeError(f"reshape: cannot reshape array of shape {old} into "
                                   f"{shape}") from None
    return x if new == old else first(bind(cached_op(Reshape, tuple(new), old), x))


def transpose(x, axes=None):
    """``np.transpose``; ``x`` itself for the identity permutation (tnp's,
    :func:`.creation.transpose`, never is an eager ``Tensor``)."""
    x = operand(x)
    ndim = len(shape_of(x))
    if axes is None:
        perm = tuple(reversed(range(ndim)))
    else:
        if not isinstance(axes, (tuple, list)) or len(axes) != ndim:
            raise TensorShapeError(f"transpose: axes {axes!r} don't match an array of {ndim} "
                                   "dimensions")
        perm = tuple(normalize_axis(a, ndim, "transpose") for a in axes)
        if len(set(perm)) != ndim:
            raise TensorShapeError(f"transpose: repeated axis in {axes!r}")
    return x if perm == tuple(range(ndim)) else first(bind(cached_op(Transpose, perm), x))


permute_dims = transpose        # the Array API's name (NumPy 2's np.permute_dims is np.transpose)


CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def cast_operands(arrays: list, dtype, casting: str, fn: str) -> list:
    """``arrays`` converted to ``dtype`` (their promoted dtype if ``None``), each allowed by
    NumPy's ``casting`` rule (the ``dtype=``/``casting=`` of ``concatenate``, ``einsum``...):
    a ``TensorTypeError`` naming ``fn`` where NumPy refuses.

    >>> [a.dtype for a in cast_operands([np.ones(1), np.ones(1, int)], "float32", "same_kind",
    ...                                 "concatenate")]
    [dtype('float32'), dtype('float32')]
    """
    if casting not in CASTINGS:                         # (NumPy's ValueError)
        raise TensorShapeError(f"{fn}: casting must be one of {', '.join(CASTINGS)}, got "
                              f"{casting!r}")
    target = result_dtype(*arrays) if dtype is None else dtype_arg(dtype, fn)
    for a in arrays:
        if not np.can_cast(dtype_of(a), target, casting):
            raise TensorTypeError(f"{fn}: cannot cast array data from {dtype_of(a)} to "
                                  f"{target} according to the rule {casting!r}")
    return [as_dtype(a, target) for a in arrays]


@implements(np.concatenate)
def concatenate(arrays, axis=0, out=None, *, dtype=None, casting: str = "same_kind"):
    """``np.concatenate`` (``axis=None`` flattens first); dtypes promote as in NumPy, or
    convert to ``dtype`` where the ``casting`` rule allows it (NumPy's ``dtype=``, ``casting=``).

    >>> concatenate([np.ones(1), np.zeros(1, int)], dtype=np.float32)
    array([1., 0.], dtype=float32)
    """
    no_out(out, "concatenate")
    arrays = [operand(a) for a in arrays]
    if dtype is not None or casting != "same_kind":   # (promotion is same_kind: nothing to check)
        arrays = cast_operands(arrays, dtype, casting, "concatenate")
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
    axis = normalize_axis(axis, ndim, "concatenate")
    if any(s[:axis] + s[axis + 1:] != shapes[0][:axis] + shapes[0][axis + 1:] for s in shapes):
        raise TensorShapeError(f"concatenate: shapes {shapes} differ off the concatenation "
                               f"axis {axis}")
    arrays, dtype = promoted(*arrays)
    if len(arrays) == 1:
        return new_value(arrays[0])
    return first(bind(Concatenate(axis, tuple(shapes), dtype_name(dtype)), *arrays))


concat = concatenate            # the Array API's name (NumPy 2's np.concat is np.concatenate)


@implements(np.stack)
def stack(arrays, axis=0, out=None, *, dtype=None, casting: str = "same_kind"):
    """``np.stack``: one ``concatenate`` of the arrays, each with a new axis of size one
    (``dtype=`` and ``casting=`` as :func:`concatenate`'s)."""
    no_out(out, "stack")
    arrays = [operand(a) for a in arrays]
    if dtype is not None or casting != "same_kind":
        arrays = cast_operands(arrays, dtype, casting, "stack")
    if not arrays:
        raise TensorShapeError("stack: need at least one array to stack")
    shapes = {shape_of(a) for a in arrays}
    if len(shapes) != 1:
        raise TensorShapeError(f"stack: all input arrays must have the same shape; got "
                               f"{[shape_of(a) for a in arrays]}")
    (shape,) = shapes
    axis = normalize_axis(axis, len(shape) + 1, "stack")
    return concatenate([reshape(a, shape[:axis] + (1,) + shape[axis:]) for a in arrays], axis)


# --- reductions: sum, max, min ------------------------------------------------------------------


def _summed_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype NumPy's ``sum`` of a boolean or integer ``dtype`` has: the platform's
    (unsigned) integer where ``dtype`` is narrower."""
    if dtype.kind == "b" or (dtype.kind == "i" and dtype.itemsize < np.dtype(np.intp).itemsize):
        return np.dtype(np.intp)
    if dtype.kind == "u" and dtype.itemsize < np.dtype(np.uintp).itemsize:
        return np.dtype(np.uintp)
    return dtype


@implements(np.sum)
def sum(x, axis=None, dtype=None, out=None, keepdims: bool = False, initial=NO_VALUE,
        where=NO_VALUE):
    """``np.sum`` (``where=`` masks elements out, ``initial`` is added)."""
    no_out(out, "sum")
    x = operand(x)
    if dtype is not None:
        x = as_dtype(x, dtype)
    elif dtype_of(x).kind in "biu":       # NumPy sums booleans and small integers in the
        x = as_dtype(x, _summed_dtype(dtype_of(x)))     # platform's integer, no axes too
    x = masked(x, where, 0, "sum")
    shape = shape_of(x)
    axes = reduction_axes(axis, len(shape), "sum")
    # (no axes: a new array all the same, as NumPy's)
    result = first(bind(cached_op(ReduceSum, axes, shape), x)) if axes else new_value(x)
    if keepdims:
        result = reshape(result, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    if initial is NO_VALUE:
        return result
    return add(result, as_dtype(initial, dtype_of(result)))   # in the sum's dtype, as NumPy


def _reduce_extremum(cls, fn: str, x, axis, out, keepdims, initial, where):
    no_out(out, fn)
    x = operand(x)
    if initial is not NO_VALUE:
        initial = as_dtype(initial, dtype_of(x))       # in the array's dtype, as NumPy casts it
    if where is not NO_VALUE:
        if initial is NO_VALUE:
            raise TensorTypeError(f"{fn}: where= needs initial= (as in NumPy): the value of "
                                  "a slice with nothing selected")
        x = masked(x, where, initial, fn)
    shape = shape_of(x)
    axes = reduction_axes(axis, len(shape), fn)
    if any(shape[a] == 0 for a in axes):
        if initial is NO_VALUE:
            operation = "maximum" if cls is ReduceMax else "minimum"
            raise TensorShapeError(f"{fn}: zero-size array to reduction operation {operation} "
                                   f"which has no identity (shape {shape}, axis {axis})")
        return _initial_everywhere(x, axes, keepdims, initial)
    result = first(bind(cached_op(cls, axes, shape, dtype_name(dtype_of(x))), x)) if axes \
        else new_value(x)
    if keepdims:
        result = reshape(result, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    if initial is NO_VALUE:
        return result
    return (maximum if cls is ReduceMax else minimum)(result, initial)


def _initial_everywhere(x, axes: tuple, keepdims: bool, initial):
    """A reduction of ``x`` over ``axes`` where one is empty: ``initial`` in every slice, as
    a function of ``x`` all the same (an eager result is a tensor, and ``x``'s gradient
    is its empty zeros)."""
    zeros = as_dtype(sum(x, axes, keepdims=keepdims), dtype_of(x))     # sums of nothing
    return where(np.zeros(shape_of(zeros), dtype=np.bool_), zeros, initial)


@implements(np.max)
def max(x, axis=None, out=None, keepdims: bool = False, initial=NO_VALUE, where=NO_VALUE):
    """``np.max``; the gradient is shared evenly among tied maxima (as in JAX)."""
    return _reduce_extremum(ReduceMax, "max", x, axis, out, keepdims, initial, where)


@implements(np.min)
def min(x, axis=None, out=None, keepdims: bool = False, initial=NO_VALUE, where=NO_VALUE):
    """``np.min``; the gradient is shared evenly among tied minima (as in JAX)."""
    return _reduce_extremum(ReduceMin, "min", x, axis, out, keepdims, initial, where)


@implements(np.amax)
def amax(x, axis=None, out=None, keepdims: bool = False, initial=NO_VALUE, where=NO_VALUE):
    """``np.amax``: :func:`max`, its errors naming ``amax``."""
    return _reduce_extremum(ReduceMax, "amax", x, axis, out, keepdims, initial, where)


@implements(np.amin)
def amin(x, axis=None, out=None, keepdims: bool = False, initial=NO_VALUE, where=NO_VALUE):
    """``np.amin``: :func:`min`, its errors naming ``amin``."""
    return _reduce_extremum(ReduceMin, "amin", x, axis, out, keepdims, initial, where)


# --- contraction ---------------------------------------------------------------------------------


def dot_general(x, y, dimension_numbers):
    """``lax.dot_general``: ``dimension_numbers = ((lhs_contract, rhs_contract),
    (lhs_batch, rhs_batch))``; the result has the batch, then lhs free, then rhs free axes."""
    (x, y), dtype = promoted(x, y)
    return dot_general_of_promoted(x, y, dimension_numbers, dtype)


def dot_general_of_promoted(x, y, dimension_numbers, dtype: np.dtype):
    """:func:`dot_general` of operands already of one ``dtype`` (as :func:`promoted` gives)."""
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(int(a) for a in axes) for axes in (lc, rc, lb, rb))
    xs, ys = shape_of(x), shape_of(y)
    op = cached_op(_dot_general_op, lc, rc, lb, rb, xs, ys, dtype_name(dtype))
    return first(bind(op, x, y))


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
