"""Array creation and constants with NumPy's names, so NumPy code runs with ``tnp`` as ``np``.

Most creation routines make constants: their results carry no derivative, so they
are NumPy's own functions (``tnp.tril_indices is numpy.tril_indices``; ``eye``, ``arange``
and the others taking a ``dtype`` read it first, so that any library's dtype is NumPy's:
``tnp.eye(2, dtype=torch.float32)``). Given a tensor or traced
value where a number is expected, NumPy's dispatch sends the call to tidu, which
raises a clear error rather than dropping the derivative. ``array``/``asarray``,
which take arrays (and stack sequences holding tensors, with gradients), are tnp's
own; so are ``zeros_like``, ``ones_like`` and ``full_like``: constants too, made in
the library of their argument, on its device. The index tricks ``r_`` and ``c_``
(arrays from ranges, ``arange`` and ``linspace``, and values) are here too.

Three take values that can carry a derivative, as in JAX (autograd 1.9's ``full_like``
does not differentiate in ``fill_value``; its ``full`` and ``linspace`` do):
``full(shape, fill_value)`` and ``full_like(a, fill_value)`` differentiate in
``fill_value`` (a broadcast of it), and ``linspace(start, stop, num)`` in ``start``
and ``stop``. Given plain NumPy values (or numbers) they are NumPy's, bit for bit.

>>> import primitives.tensor as tnp
>>> float(tnp.grad(lambda v: full((2, 3), v).sum())(1.5))          # six copies of v
6.0
>>> tnp.grad(lambda ab: linspace(ab[0], ab[1], 5).sum())(np.array([0.0, 1.0]))
array([2.5, 2.5])
>>> tnp.eye(2) * tnp.pi
array([[3.14159265, 0.        ],
       [0.        , 3.14159265]])

NumPy's non-differentiable utilities are here too, as NumPy's own (``tnp.allclose is
numpy.allclose``): comparisons (``allclose``, ``isclose``, ``array_equal``,
``array_equiv``), indices of values (``nonzero``, ``argwhere``, ``flatnonzero``,
``count_nonzero``), floating-point error and print settings
(``seterr``, ``geterr``, ``errstate``, ``printoptions``, ``set_printoptions``...), and
type queries (``finfo``, ``iinfo``, ``isscalar``...; ``iscomplexobj`` reads only the
dtype, in :mod:`.manipulation`). Their results
carry no derivative, so on a tensor or traced value they read its data (NumPy's
dispatch, :mod:`primitives.tensor.numpy.dispatch`), also under ``grad``; under ``jit`` and
``vmap`` the values are not known while tracing, and they raise
``ConcretizationError``.

>>> t = tnp.tensor([1.0, 2.0], requires_grad=True)
>>> tnp.allclose(t, [1.0, 2.0 + 1e-12])
True

Those that give indices, counts and masks (``nonzero``, ``argwhere``, ``flatnonzero``,
``count_nonzero``, ``isneginf``, ``isposinf``, ``bitwise_count``) give an eager ``Tensor``
``Tensor``s that do not require grad, 0-d counts and truth values too, as tnp's ``argsort``
and PyTorch's do; NumPy's own of them given a ``Tensor`` (``np.count_nonzero(t)``) give the
same (one rule: :func:`~.dispatch.results_as_tensors`).

tnp's ``reshape``, ``transpose`` (``permute_dims``), ``broadcast_to`` and ``real`` are here
too: :mod:`.lowering`'s, except that an eager ``Tensor`` they have nothing to do to
comes back as a new tensor on its values (PyTorch's view), never as itself.

>>> tnp.flatnonzero(t), t.reshape(2) is t
(tensor([0, 1]), False)

It imports :mod:`.lowering`, :mod:`.mathfuncs`, :mod:`.manipulation` and
:mod:`.reductions` (``linspace`` and ``r_`` are written with them; and :mod:`.dispatch`),
of the NumPy package.
"""

from __future__ import annotations

import functools
import numbers
import operator

import numpy as np

from primitives.tensor.backends import NUMPY, library_of, on_host, to_host
from primitives.tensor.core import Frontend, array_below, dtype_of, shape_of
from primitives.tensor.errors import TensorNotSupportedError, TensorShapeError, TensorTypeError
from primitives.tensor.numpy.dispatch import implements, results_as_tensors
from primitives.tensor.numpy import lowering
from primitives.tensor.numpy.lowering import (add, as_dtype, concatenate,
                                              constant_in_library_of, divide, dtype_arg, equal,
                                              filled_like, greater, holds_frontend,
                                              is_foreign_array, is_python_scalar, less,
                                              less_equal, multiply, no_out, not_equal,
                                              not_itself, operand, shape_tuple, subtract,
                                              sum as sum_, where)
from primitives.tensor.numpy.manipulation import copy as copy_array, moveaxis, swapaxes
from primitives.tensor.numpy.mathfuncs import (floor, isfinite, isinf, isnan, logical_and,
                                               logical_or)
from primitives.tensor.numpy.reductions import any as any_
from numpy import (  # noqa: F401  (re-exported: NumPy's own, no derivative to lose)
    indices, diag_indices, tril_indices, triu_indices, isscalar, dtype, errstate, pi, e, inf,
    nan, newaxis,
    euler_gamma, float16, float32, float64, complex64, complex128, int8, int16, int32,
    int64, uint8, bool_, intp, ndarray, generic, number, integer, floating, complexfloating,
    inexact, bool, uint16, uint32, uint64, broadcast_shapes,   # (bool: np.bool, the Array API's)
    # NumPy's own non-differentiable utilities (comparisons, indices, settings, queries)
    allclose, isclose, array_equal, array_equiv, nonzero, argwhere, flatnonzero,
    count_nonzero, isneginf, isposinf,
    shares_memory, may_share_memory, seterr, geterr, seterrcall, geterrcall, printoptions,
    set_printoptions, get_printoptions, array2string, array_repr, array_str,
    format_float_positional, format_float_scientific, typename, mintypecode,
    base_repr, binary_repr,
    # integer-only ufuncs (the Array API's shifts): nothing to differentiate; on traced values
    # under jit or vmap, NumPy's dispatch raises ConcretizationError
    left_shift, right_shift, bitwise_left_shift, bitwise_right_shift, bitwise_count, gcd, lcm,
)


def _tensors_for_tensors(np_fn, traced=None):
    """``np_fn``, NumPy's own function that reads values (indices, counts, masks), on any
    library's arrays (:func:`~primitives.tensor.backends.on_host`); given an eager ``Tensor``,
    its results are ``Tensor``s that do not require grad, in the tensor's library, 0-d ones
    too: :func:`~.dispatch.results_as_tensors`'s rule, the one ``np_fn`` itself follows on a
    ``Tensor`` (so ``tnp.count_nonzero(t)`` and ``np.count_nonzero(t)`` are both a 0-d
    ``Tensor``, as ``torch.count_nonzero(t)``). Given a traced value, ``traced`` (the same
    function by ops, for those whose result's shape does not depend on the values); without
    one, NumPy's dispatch: a ``ConcretizationError`` under ``jit`` or ``vmap``, where the
    values are not known.

    >>> import primitives.tensor as tnp
    >>> _tensors_for_tensors(np.flatnonzero)(tnp.tensor([0.0, 2.0], requires_grad=True))
    tensor([1])
    """
    on_any_library = on_host(np_fn)

    @functools.wraps(np_fn)
    def fn(*args, **kwargs):
        if traced is not None and any(isinstance(a, Frontend) and a.is_tracer
                                      for a in (*args, *kwargs.values())):
            return traced(*args, **kwargs)
        result = on_any_library(*map(_host_values, args),
                                **{key: _host_values(value) for key, value in kwargs.items()})
        return results_as_tensors(result, args, kwargs)
    return fn


def _host_values(value):
    """An eager ``Tensor``'s values as a NumPy array (its derivative is not needed: what
    reads them gives indices, counts or masks); anything else as it is."""
    if isinstance(value, Frontend) and not value.is_tracer:
        return to_host(array_below(value))
    return value


# --- the value readers whose results' shapes are static, by ops for traced values ---------


def _infinite_of_sign(x, fn: str, positive: bool):
    """``np.isposinf``/``np.isneginf`` of a traced ``x``: ``isinf(x)`` where ``x`` has that sign."""
    x = operand(x, fn)
    if dtype_of(x).kind == "c":                 # (NumPy's own refusal: which infinity?)
        raise TensorTypeError(f"{fn}: not supported for complex values, which would make it "
                              "ambiguous")
    return logical_and(isinf(x), (greater if positive else less)(x, 0))


def _isposinf_traced(x, out=None):
    no_out(out, "isposinf")
    return _infinite_of_sign(x, "isposinf", True)


def _isneginf_traced(x, out=None):
    no_out(out, "isneginf")
    return _infinite_of_sign(x, "isneginf", False)


def _isclose_traced(a, b, rtol=1e-05, atol=1e-08, equal_nan: bool = False):
    """``np.isclose`` by NumPy's formula, ``|a - b| <= atol + rtol |b|`` where ``b`` is
    finite, or ``a == b``; ``b`` in a floating dtype first, as NumPy takes it."""
    a, b = operand(a, "isclose"), operand(b, "isclose")
    b = as_dtype(b, np.result_type(dtype_of(b), 1.0))
    finite = isfinite(b)
    # (where b is not finite the test is a == b: 0 there, so no inf - inf to warn of)
    a_, b_ = where(finite, a, 0), where(finite, b, 0)
    near = less_equal(lowering.abs(subtract(a_, b_)), add(atol, multiply(rtol, lowering.abs(b_))))
    result = logical_or(logical_and(near, finite), equal(a, b))
    return logical_or(result, logical_and(isnan(a), isnan(b))) if equal_nan else result


def _count_nonzero_traced(a, axis=None, *, keepdims: bool = False):
    a = operand(a, "count_nonzero")
    return sum_(not_equal(a, 0), axis=axis, keepdims=keepdims, dtype=np.intp)


# NumPy's functions that read values, on PyTorch tensors too (``backends.on_host``); those
# that give indices, counts and masks give a Tensor Tensors, and those whose results' shapes
# are static (not nonzero's) trace under jit and vmap as jax.numpy's do
nonzero, argwhere, flatnonzero, bitwise_count = (
    _tensors_for_tensors(f) for f in (nonzero, argwhere, flatnonzero, bitwise_count))
isposinf = _tensors_for_tensors(isposinf, _isposinf_traced)
isneginf = _tensors_for_tensors(isneginf, _isneginf_traced)
count_nonzero = _tensors_for_tensors(count_nonzero, _count_nonzero_traced)
isclose = _tensors_for_tensors(isclose, _isclose_traced)
array2string, array_repr, array_str = (
    on_host(f) for f in (array2string, array_repr, array_str))

__all__ = [
    "zeros", "ones", "full", "empty", "eye", "identity", "arange", "linspace", "logspace",
    "geomspace", "tri", "indices", "diag_indices", "tril_indices", "triu_indices",
    "diag_indices_from", "tril_indices_from", "triu_indices_from", "result_type",
    "promote_types", "can_cast", "finfo", "iinfo", "issubdtype", "isscalar",
    "dtype", "errstate", "pi", "e", "inf", "nan", "newaxis", "euler_gamma", "float16",
    "float32", "float64", "complex64", "complex128", "int8", "int16", "int32", "int64",
    "uint8", "bool_", "intp", "ndarray", "generic", "number", "integer", "floating",
    "complexfloating", "inexact", "bool", "uint16", "uint32", "uint64", "broadcast_shapes",
    "zeros_like", "ones_like", "empty_like", "full_like", "array", "asarray",
    "r_", "c_",
    "allclose", "isclose", "array_equal", "array_equiv", "nonzero", "argwhere", "flatnonzero",
    "count_nonzero", "isneginf", "isposinf",
    "shares_memory", "may_share_memory", "seterr", "geterr", "seterrcall", "geterrcall",
    "printoptions", "set_printoptions", "get_printoptions", "array2string", "array_repr",
    "array_str", "format_float_positional", "format_float_scientific", "typename",
    "mintypecode", "isdtype", "base_repr", "binary_repr",
    "left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift", "bitwise_count",
    "gcd", "lcm",
    "reshape", "transpose", "permute_dims", "broadcast_to", "real",
]


def _for_tensor(constant, a):
    """``constant``, made for ``a``; for an eager ``Tensor`` ``a``, a ``Tensor`` of it that
    does not require grad (a ``Tensor`` in gives ``Tensor``s out, as ``torch.zeros_like``)."""
    return type(a)(constant) if isinstance(a, Frontend) and not a.is_tracer else constant


@implements(np.zeros_like)
def zeros_like(a, dtype=None):
    """``np.zeros_like``: a constant array (its values do not depend on ``a``'s); of an
    eager ``Tensor``, a ``Tensor`` that does not require grad.

    >>> zeros_like(np.ones((2, 1), dtype=np.float32))
    array([[0.],
           [0.]], dtype=float32)
    >>> import primitives.tensor as tnp
    >>> zeros_like(tnp.tensor([1.0, 2.0], requires_grad=True))
    tensor([0., 0.])
    """
    return _for_tensor(filled_like(a, None, dtype, "zeros_like"), a)


@implements(np.ones_like)
def ones_like(a, dtype=None):
    """``np.ones_like``: a constant array (its values do not depend on ``a``'s); of an
    eager ``Tensor``, a ``Tensor`` that does not require grad."""
    return _for_tensor(filled_like(a, 1, dtype, "ones_like"), a)


@implements(np.empty_like)
def empty_like(prototype, dtype=None):
    """``np.empty_like``: a constant array of ``prototype``'s shape (and dtype, unless given);
    its values are unspecified (as NumPy's), here zeros; of an eager ``Tensor``, a ``Tensor``
    that does not require grad.

    >>> empty_like(np.ones(2, dtype=np.float32)).shape
    (2,)
    """
    return _for_tensor(filled_like(prototype, None, dtype, "empty_like"), prototype)


@implements(np.full_like)
def full_like(a, fill_value, dtype=None):
    """``np.full_like``: an array of ``a``'s shape (and dtype, unless given) filled with
    ``fill_value``, differentiable in ``fill_value`` (not in ``a``'s values).

    A tensor or traced ``fill_value`` (0-d, or any shape that broadcasts to ``a``'s) is
    cast to the dtype and broadcast, so its gradient is the sum of the result's.

    >>> full_like(np.ones((2, 1), dtype=np.float32), 7)
    array([[7.],
           [7.]], dtype=float32)
    """
    if _carries_values(fill_value):
        dtype = dtype_of(a) if dtype is None else dtype_arg(dtype, "full_like")
        return _broadcast_fill(fill_value, shape_of(operand(a, "full_like")), dtype,
                               "full_like")
    return _for_tensor(filled_like(a, fill_value, dtype, "full_like"), a)


def full(shape, fill_value, dtype=None, order="C", *, device=None, like=None):
    """``np.full``: an array of ``shape`` filled with ``fill_value``, differentiable in
    ``fill_value`` (JAX's ``jnp.full``).

    For a plain ``fill_value`` (a number, a NumPy array) this is ``np.full`` itself. A
    tensor or traced ``fill_value`` (0-d, or any shape that broadcasts to ``shape``), or
    an array of another library, is cast to ``dtype`` (its own dtype by default, as in
    NumPy) and broadcast: the gradient with respect to it is the sum of the result's
    over the broadcast axes. ``order``, ``device`` and ``like`` apply to NumPy's path.

    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda v: tnp.sum(full((2, 2), v) * np.arange(4.0).reshape(2, 2)))(1.0)
    array(6.)
    >>> tnp.grad(lambda row: tnp.sum(full((3, 2), row) ** 2))(np.array([1.0, 2.0]))
    array([ 6., 12.])
    """
    dtype = dtype_arg(dtype, "full")
    if _carries_values(fill_value):
        return _broadcast_fill(fill_value, shape_tuple(shape, "full"), dtype, "full")
    return np.full(shape_tuple(shape, "full"), fill_value, dtype=dtype, order=order,
                   device=device, like=like)


def _with_shape_read(np_fn):
    """``np_fn`` (``zeros``, ``ones``, ``empty``) with its shape read as :func:`full` reads
    it: a dimension traced by ``jit`` or ``vmap`` raises a ``ConcretizationError`` naming
    the function (NumPy's own ``TypeError`` would not say why); its dtype as
    :func:`_with_dtype_read`'s."""
    name = np_fn.__name__
    np_fn = _with_dtype_read(np_fn, 1)

    def fn(shape, *args, **kwargs):
        return np_fn(shape_tuple(shape, name), *args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``np.{name}``: a constant array of ``shape`` (NumPy's own, the shape checked)."
    return fn


def _with_dtype_read(np_fn, position: int):
    """``np_fn`` (``eye``, ``arange``...: NumPy's own) with its ``dtype`` argument (keyword, or
    positional at ``position``) read by :func:`~.lowering.dtype_arg`: any library's dtype
    (``torch.float32``) is NumPy's, and one NumPy lacks is a ``TensorTypeError`` naming it."""
    name = np_fn.__name__

    @functools.wraps(np_fn)
    def fn(*args, **kwargs):
        if len(args) > position:
            args = (*args[:position], dtype_arg(args[position], name), *args[position + 1:])
        elif kwargs.get("dtype") is not None:
            kwargs["dtype"] = dtype_arg(kwargs["dtype"], name)
        return np_fn(*args, **kwargs)
    return fn


def _with_dtypes_read(np_fn, positions):
    """``np_fn`` (``result_type``, ``finfo``...: NumPy's own) with the dtypes among its
    arguments at ``positions`` (``None``: all) read as :func:`~.lowering.dtype_arg` reads
    them; arrays, numbers, NumPy's scalar types and abstract types (``np.floating``) are
    NumPy's to read as ever."""
    name = np_fn.__name__

    def read(value):
        if isinstance(value, (np.dtype, type, numbers.Number, Frontend)) or \
                hasattr(value, "shape"):
            return value
        return dtype_arg(value, name)

    @functools.wraps(np_fn)
    def fn(*args, **kwargs):
        args = [read(a) if positions is None or i in positions else a
                for i, a in enumerate(args)]
        return np_fn(*args, **kwargs)
    return fn


zeros, ones, empty = map(_with_shape_read, (np.zeros, np.ones, np.empty))
eye, arange, tri = (_with_dtype_read(f, 3) for f in (np.eye, np.arange, np.tri))
identity = _with_dtype_read(np.identity, 1)
logspace = _with_dtype_read(np.logspace, 5)
geomspace = _with_dtype_read(np.geomspace, 4)
result_type, promote_types, issubdtype = (_with_dtypes_read(f, None) for f in (
    np.result_type, np.promote_types, np.issubdtype))
can_cast = _with_dtypes_read(np.can_cast, (0, 1))
finfo, iinfo, isdtype = (_with_dtypes_read(f, (0,)) for f in (np.finfo, np.iinfo, np.isdtype))


def _indices_from(np_fn):
    """``np_fn`` (``tril_indices_from``...), which reads only its array's shape, on the shape
    of a tensor or traced value (its values need not be known: ``jit`` and ``vmap`` take it)."""
    name = np_fn.__name__

    def fn(arr, *args, **kwargs):
        arr = operand(arr, name)
        try:
            indices = np_fn(np.broadcast_to(np.zeros((), np.int8), shape_of(arr)), *args,
                            **kwargs)
        except ValueError as error:                     # "input array must be 2-d"...
            raise TensorShapeError(f"{name}: {error}") from None
        return tuple(constant_in_library_of(i, arr) for i in indices)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"``np.{name}``: NumPy's own on ``arr``'s shape (not its values, so ``jit`` "
                  f"and ``vmap`` take it).\n\n    >>> {name}(np.ones((2, 2)))[0]\n    "
                  f"array({np_fn(np.ones((2, 2)))[0].tolist()})\n    ")
    return implements(np_fn)(fn)


diag_indices_from, tril_indices_from, triu_indices_from = map(
    _indices_from, (np.diag_indices_from, np.tril_indices_from, np.triu_indices_from))


@implements(np.linspace)
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """``np.linspace``, differentiable in ``start`` and ``stop`` (as JAX and autograd).

    With plain ``start`` and ``stop`` (numbers, NumPy arrays) this is ``np.linspace``
    itself. With a tensor or traced value among them (or an array of another library) it
    is NumPy's algorithm written with tnp functions, so on NumPy data it gives NumPy's
    values bit for bit: ``start + i * step`` with ``step = (stop - start) / div`` (``div`` is ``num - 1``,
    or ``num`` without the endpoint; NumPy's ``start + (i / div) * delta`` when a step
    underflows to zero), and the endpoint set to ``stop`` exactly. ``start`` and
    ``stop`` may be arrays (broadcast together; the samples run along ``axis``); the
    derivative of sample ``i`` is ``1 - i/div`` in ``start`` and ``i/div`` in ``stop``.
    ``retstep=True`` returns ``(samples, step)``, ``step`` differentiable too. An integer
    ``dtype`` rounds down (NumPy's rule) and carries no derivative.

    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda s: tnp.sum(linspace(s, 1.0, 5) ** 2))(0.0)     # sum 2 x_i (1 - i/4)
    array(1.25)
    >>> np.array_equal(tnp.jit(lambda a: linspace(a, 2.0, 7))(0.1), np.linspace(0.1, 2.0, 7))
    True
    """
    dtype = dtype_arg(dtype, "linspace")
    if not (_carries_values(start) or _carries_values(stop)):
        return np.linspace(start, stop, num, endpoint, retstep, dtype, axis, device=device)
    num = operator.index(num)
    if num < 0:
        raise TensorShapeError(f"linspace: Number of samples, {num}, must be non-negative.")
    div = num - 1 if endpoint else num
    start, stop = operand(start, "linspace"), operand(stop, "linspace")
    computed = _inexact_result_type(start, stop)            # NumPy's dtype to compute in
    integer_dtype = dtype is not None and np.issubdtype(dtype, np.integer)
    dtype = computed if dtype is None else dtype

    delta = subtract(as_dtype(stop, computed), as_dtype(start, computed))
    ramp = np.arange(0, num, dtype=computed).reshape((-1,) + (1,) * len(shape_of(delta)))
    if div > 0:
        step = divide(delta, div)
        # NumPy divides first when a step underflows to zero (denormal deltas, gh-5437)
        samples = where(any_(step == 0), multiply(ramp / div, delta), multiply(ramp, step))
    else:                       # no samples, or one with the endpoint: the step is undefined
        step = np.nan
        samples = multiply(ramp, delta)
    samples = add(samples, start)
    if endpoint and num > 1:
        last = (np.arange(num) == num - 1).reshape(ramp.shape)
        samples = where(last, as_dtype(stop, computed), samples)
    if axis != 0:
        samples = moveaxis(samples, 0, axis)
    if integer_dtype:
        samples = floor(samples)
    samples = as_dtype(samples, dtype)
    return (samples, step) if retstep else samples


def _inexact_result_type(*values) -> np.dtype:
    """NumPy's result dtype of ``values``, made floating point if it is not inexact (what
    ``np.linspace`` computes in); Python numbers are weak, as in NumPy 2."""
    dtype = np.result_type(*[v if is_python_scalar(v) else dtype_of(v) for v in values])
    return dtype if dtype.kind in "fc" else np.result_type(dtype, np.float64)


def _carries_values(value) -> bool:
    """Whether ``value`` is more than a NumPy constant: a tensor or traced value (or a list
    holding them), or an array of another library (whose result stays in that library)."""
    if isinstance(value, Frontend):
        return True
    if isinstance(value, (list, tuple)):
        return holds_frontend(value)
    return library_of(value) is not NUMPY


def _broadcast_fill(fill_value, shape: tuple, dtype, fn: str):
    """``fill_value`` cast to ``dtype`` (``None``: kept) and broadcast to ``shape``; a new
    array when ``fill_value`` is a plain array of another library (NumPy's result is
    writable and shares no memory)."""
    value = operand(fill_value, fn)
    if dtype is not None:
        value = as_dtype(value, dtype)
    try:
        out = not_itself(lowering.broadcast_to(value, shape), value)   # full(t.shape, t): new
    except TensorShapeError:
        raise TensorShapeError(f"{fn}: could not broadcast fill_value of shape "
                               f"{shape_of(value)} into shape {shape}") from None
    if not isinstance(out, Frontend) and library_of(out) is not NUMPY:
        out = library_of(out).clone(out)
    return out


# --- arrays from values: array, asarray ---------------------------------------------------


def array(object, dtype=None, copy=True, ndmin: int = 0):
    """``np.array``: nested lists and tuples holding tensors or traced values stack, with
    gradients; a tensor or traced value is converted to ``dtype``, and copied (a recorded
    copy, as :func:`~.manipulation.copy`) when ``copy`` is true and it would be returned
    as it is: the result never is ``object`` (as NumPy's), so writing into the result's
    ``.data`` cannot change ``object``. ``ndmin`` prepends axes of length 1, as NumPy's.

    >>> t = array([np.float64(1.0), np.array(2.0)])
    >>> t
    array([1., 2.])
    >>> array(np.float64(3.0), ndmin=2)
    array([[3.]])
    """
    if not isinstance(ndmin, numbers.Integral) or ndmin < 0:
        raise TensorTypeError(f"array: ndmin must be an integer >= 0, got {ndmin!r}")
    dtype = dtype_arg(dtype, "array")
    # (a list of strings is NumPy's to make an array of; one holding tensors stacks them)
    value = operand(object) if isinstance(object, (list, tuple)) and holds_frontend(object) \
        else object
    if isinstance(value, Frontend):
        out = value if dtype is None else as_dtype(value, dtype)
        out = copy_array(out) if copy and out is object else out
        return _with_ndmin(out, ndmin)
    if is_foreign_array(value):                 # stays in its library, on its device
        xp = library_of(value).xp
        value = value if dtype is None else xp.astype(value, dtype)
        return _with_ndmin(xp.asarray(value, copy=copy), ndmin)
    return np.array(value, dtype=dtype, copy=copy, ndmin=ndmin)


def asarray(a, dtype=None, *, copy=None):
    """``np.asarray``, with :func:`array`'s handling of tensors and traced values: not copied
    unless ``copy`` is true, so a tensor with the ``dtype`` asked for is returned itself, as
    ``np.asarray`` returns an array and ``torch.as_tensor`` a tensor.

    >>> import primitives.tensor as tnp
    >>> t = tnp.tensor([1.0, 2.0], requires_grad=True)
    >>> asarray(t) is t, asarray(t, copy=True) is t
    (True, False)
    """
    return array(a, dtype=dtype_arg(dtype, "asarray"), copy=copy)


# --- shape functions that may have nothing to do: never the eager Tensor they are given ------
#
# lowering's reshape, transpose, broadcast_to and real hand their operand back when they
# have nothing to do (a reshape to its own shape, real of real values): the family modules
# call them on values they compute, where that costs nothing. tnp's (these: the package
# exports them in lowering's place) give an eager Tensor a new tensor on its values instead
# (not_itself): u = tnp.reshape(t, t.shape); u.requires_grad_(False) must not switch t's
# gradient off, nor u.data = ... replace t's values (PyTorch's results are views).


@implements(np.reshape)
def reshape(x, shape, order: str = "C", *, copy: bool | None = None):
    """``np.reshape``, as :func:`.lowering.reshape`; an eager ``Tensor`` reshaped to its own
    shape gives a new tensor on its values (PyTorch's view), never itself.

    >>> import primitives.tensor as tnp
    >>> t = tnp.tensor([1.0, 2.0], requires_grad=True)
    >>> u = reshape(t, (2,))
    >>> u is t, u.is_leaf, reshape(t, (2, 1)).shape
    (False, False, (2, 1))
    """
    return not_itself(lowering.reshape(x, shape, order, copy=copy), x)


@implements(np.transpose)
def transpose(x, axes=None):
    """``np.transpose``, as :func:`.lowering.transpose`; the identity permutation (any of a
    0-d or 1-d ``x``) of an eager ``Tensor`` gives a new tensor on its values.

    >>> import primitives.tensor as tnp
    >>> t = tnp.tensor([1.0, 2.0], requires_grad=True)
    >>> transpose(t) is t, transpose(np.ones((2, 3))).shape
    (False, (3, 2))
    """
    return not_itself(lowering.transpose(x, axes), x)


permute_dims = transpose        # the Array API's name (NumPy 2's np.permute_dims is np.transpose)


def broadcast_to(x, shape):
    """``np.broadcast_to``: a ``broadcast_in_dim`` that aligns trailing axes; an eager
    ``Tensor`` broadcast to its own shape gives a new tensor on its values.

    >>> import primitives.tensor as tnp
    >>> t = tnp.tensor([1.0, 2.0], requires_grad=True)
    >>> broadcast_to(t, (3, 2)).shape, broadcast_to(t, (2,)) is t
    ((3, 2), False)
    """
    return not_itself(lowering.broadcast_to(x, shape), x)


@implements(np.broadcast_to)
def _broadcast_to(array, shape):          # NumPy's argument names (np.broadcast_to(array=...))
    return broadcast_to(array, shape)


@implements(np.real)
def real(x):
    """``np.real``: the real part; the identity on real values, which of an eager ``Tensor``
    gives a new tensor on its values (as PyTorch's ``t.real``).

    >>> import primitives.tensor as tnp
    >>> t = tnp.tensor([1.0, 2.0], requires_grad=True)
    >>> real(t) is t, real(np.array([1.0 + 2.0j]))
    (False, array([1.]))
    """
    return not_itself(lowering.real(x), x)



# --- index tricks: r_ and c_ ---------------------------------------------------------------


def _holds_values(item) -> bool:
    """Whether an item of ``r_[...]`` is more than NumPy data: a tensor or traced value (also
    in a list or as a slice's bound), or another library's array."""
    if isinstance(item, Frontend):
        return True
    if isinstance(item, slice):
        return any(isinstance(b, Frontend) for b in (item.start, item.stop, item.step))
    if isinstance(item, (list, tuple)):
        return holds_frontend(item)
    return not isinstance(item, str) and is_foreign_array(item)


def _with_ndmin(x, ndmin: int):
    shape = shape_of(x)
    return x if len(shape) >= ndmin else lowering.reshape(x, (1,) * (ndmin - len(shape)) + shape)


class AxisConcatenator:
    """NumPy's index trick objects ``r_`` and ``c_``: ``r_[a, b, 1:3, 0.5]`` concatenates
    arrays, scalars and ranges (``start:stop:step`` is ``arange``; a complex step ``nj``
    is ``linspace`` of ``n`` points) along an axis, with NumPy's directives (a first
    entry ``"1"`` or ``"0,2,1"``: axis, minimum rank, where 1-d arrays go). Plain NumPy
    entries give NumPy's own result; with tensors or traced values it is built with
    ``concatenate`` (and ``linspace``), so it differentiates in every array and bound.
    The matrix directives ``"r"``/``"c"`` (``numpy.matrix``) are NumPy's only.

    >>> import primitives.tensor as tnp
    >>> tnp.r_[np.array([1.0, 2.0]), 0.0, 4:6]
    array([1., 2., 0., 4., 5.])
    >>> tnp.grad(lambda v: tnp.sum(tnp.r_[v, v ** 2, 0:2]))(np.array([3.0]))
    array([7.])
    >>> tnp.grad(lambda v: tnp.sum(tnp.c_[v, 2 * v] ** 2))(np.array([1.0, 2.0]))
    array([10., 20.])
    >>> tnp.r_["0,2,0", np.array([1.0, 2.0]), np.array([[3.0], [4.0]])]  # axis, ndmin, trans1d
    array([[1.],
           [2.],
           [3.],
           [4.]])
    """

    def __init__(self, numpy_object, axis: int, ndmin: int, trans1d: int) -> None:
        self._numpy = numpy_object
        self.axis, self.ndmin, self.trans1d = axis, ndmin, trans1d

    def __len__(self) -> int:
        return 0

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        if not any(_holds_values(item) for item in items):
            return self._numpy[key]                    # NumPy's own, bit for bit
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        arrays, kinds = [], []
        for k, item in enumerate(items):
            scalar = False
            if isinstance(item, str):
                if k != 0:
                    raise TensorShapeError(f"{self.name}: special directives must be the first "
                                           "entry.")
                axis, ndmin, trans1d = self._directive(item, axis, ndmin, trans1d)
                continue
            if isinstance(item, slice):
                start = 0 if item.start is None else item.start
                step = 1 if item.step is None else item.step
                if isinstance(step, (complex, np.complexfloating)):
                    new = linspace(start, item.stop, num=int(abs(step)))
                else:
                    new = np.arange(start, item.stop, step)
                if ndmin > 1:
                    new = _with_ndmin(new, ndmin)
                    if trans1d != -1:
                        new = swapaxes(new, -1, trans1d)
            elif type(item) in np.ScalarType:
                scalar, new = True, item
            else:
                new = operand(item, self.name)
                item_ndim = len(shape_of(new))
                new = _with_ndmin(new, ndmin)
                if trans1d != -1 and item_ndim < ndmin:
                    k2, k1 = ndmin - item_ndim, trans1d
                    if k1 < 0:
                        k1 += k2 + 1
                    order = list(range(ndmin))
                    new = lowering.transpose(new, order[:k1] + order[k2:] + order[k1:k2])
            arrays.append(new)
            kinds.append(item if scalar else dtype_of(new))
        dtype = np.result_type(*kinds)
        arrays = [_with_ndmin(as_dtype(a, dtype), ndmin) for a in arrays]
        result = concatenate(arrays, axis)
        return not_itself(result, items[-1]) if len(arrays) == 1 else result   # r_[t]: new

    @property
    def name(self) -> str:
        return "c_" if self._numpy is np.c_ else "r_"

    def _directive(self, item: str, axis: int, ndmin: int, trans1d: int) -> tuple:
        if item in ("r", "c"):
            raise TensorNotSupportedError(
                f"{self.name}: the directive {item!r} makes a numpy.matrix, which tnp does not "
                "have; leave it out (tensors and traced values are arrays)")
        try:
            if "," in item:
                values = [int(v) for v in item.split(",")]
                if len(values) not in (2, 3):
                    raise ValueError
                return values[0], values[1], values[2] if len(values) == 3 else trans1d
            return int(item), ndmin, trans1d
        except ValueError:
            raise TensorShapeError(f"{self.name}: unknown special directive {item!r}") from None

    def __repr__(self) -> str:
        return f"tnp.{self.name}"


r_ = AxisConcatenator(np.r_, 0, 1, -1)          # along the first axis
c_ = AxisConcatenator(np.c_, -1, 2, 0)          # 1-d arrays as columns, along the last axis
