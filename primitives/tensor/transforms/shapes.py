"""``eval_shape``: the shapes and dtypes a function returns, and ``ShapeDtypeStruct``, a shape
with a dtype standing for an array (JAX's names).

tidu traces with values (each op computes as it is recorded), so ``eval_shape`` traces
``f`` on placeholders of the arguments' shapes and dtypes, never on the arguments' own
data: zeros, with an identity in each matrix (the last two axes) of floating point or
complex numbers, so that ``inv``, ``solve`` or ``cholesky`` take it; floating point
errors on them (``log(0)``) are ignored, whatever ``np.seterr`` says. It costs one run of
``f`` on them, so the shapes must fit in memory (an
``eval_shape`` of a (10⁵, 10⁵) product, which would ask for 80 GB, raises a
``TensorNotSupportedError`` that is also a ``MemoryError``; JAX needs no memory there).
The trace is abstract, as ``jit``'s: ``f``
may not read a value (``if x > 0``, ``float(x)``, a boolean mask), which raises
:class:`~primitives.tensor.errors.ConcretizationError` as JAX's ``eval_shape`` does.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.eval_shape(lambda w, x: tnp.tanh(x @ w), ShapeDtypeStruct((3, 4), np.float32),
...                np.ones((2, 3), np.float32))
ShapeDtypeStruct(shape=(2, 4), dtype=float32)
"""

from __future__ import annotations

import numbers
import operator
from typing import Any, Callable

import numpy as np

from primitives.tensor.core import Frontend, dtype_of, shape_of
from primitives.tensor.errors import (TensorNotSupportedError, TensorOverflowError,
                                      TensorShapeError, TensorTypeError)
from primitives.tensor.transforms.functional import (WEAK_NUMBERS, FunctionalError, GraphTrace,
                                                     check_callable, check_output,
                                                     function_name, weakened)
from primitives.tensor.transforms.pytree import leaf_hint, tree_flatten, tree_unflatten

__all__ = ["ShapeDtypeStruct", "eval_shape"]

_PYTHON_NUMBERS = (bool, int, float, complex)
_INT64 = np.iinfo(np.int64)


class ShapeDtypeStruct:
    """An array's shape and dtype without its data (``jax.ShapeDtypeStruct``): what
    :func:`eval_shape` returns, and takes in place of an array. ``weak_type`` marks a
    Python number's type (it promotes as a number: ``float32 * 2.0`` stays float32).
    ``sharding`` is taken for JAX's signature: tidu runs on one device, so it must be
    ``None``.

    >>> s = ShapeDtypeStruct((2, 3), np.float32)
    >>> s, s.ndim, s.size
    (ShapeDtypeStruct(shape=(2, 3), dtype=float32), 2, 6)
    >>> s == ShapeDtypeStruct([2, 3], "float32")
    True
    """

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, *, sharding: Any = None, weak_type: bool = False) -> None:
        try:
            dims = tuple(operator.index(d) for d in shape)
        except TypeError:
            raise TensorTypeError(f"ShapeDtypeStruct: shape must be a sequence of ints, got "
                                  f"{shape!r}") from None
        if any(d < 0 for d in dims):
            raise TensorShapeError(f"ShapeDtypeStruct: shape must not hold negative sizes, "
                                   f"got {dims}")
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            raise TensorTypeError(f"ShapeDtypeStruct: {dtype!r} is not a dtype") from None
        if sharding is not None:
            raise TensorNotSupportedError("ShapeDtypeStruct: sharding is taken for JAX's "
                                          "signature and must be None (tidu runs on one "
                                          "device)")
        self.shape, self.dtype, self.weak_type = dims, dtype, bool(weak_type)

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    def _key(self) -> tuple:
        return self.shape, self.dtype, self.weak_type

    def __eq__(self, other) -> bool:
        return isinstance(other, ShapeDtypeStruct) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"


def eval_shape(fun: Callable, *args: Any, **kwargs: Any) -> Any:
    """The shapes and dtypes of ``fun(*args, **kwargs)``, as a pytree of
    :class:`ShapeDtypeStruct` (``jax.eval_shape``). The arguments' leaves are arrays,
    numbers, ``ShapeDtypeStruct`` s or anything with ``shape`` and ``dtype``; ``fun`` is
    traced on placeholders of those shapes and dtypes (see the module docstring), never on the
    arguments' data.

    >>> import primitives.tensor as tnp
    >>> out = tnp.eval_shape(lambda x, n: {"sum": tnp.sum(x, axis=0), "scaled": x * n},
    ...                      ShapeDtypeStruct((5, 2), np.float32), 2.0)
    >>> out["sum"], out["scaled"]
    (ShapeDtypeStruct(shape=(2,), dtype=float32), ShapeDtypeStruct(shape=(5, 2), dtype=float32))
    """
    check_callable(fun, "eval_shape")
    leaves, structure = tree_flatten((args, kwargs))
    specs = [_spec(leaf, position, fun) for position, leaf in enumerate(leaves)]
    trace = GraphTrace(transform=f"eval_shape of {function_name(fun)}", abstract=True)
    try:
        tracers = weakened([trace.new_input(("arg", i), _placeholder(s, fun))
                            for i, s in enumerate(specs)], [s.weak_type for s in specs])
        traced_args, traced_kwargs = tree_unflatten(structure, tracers)
        with np.errstate(all="ignore"):     # (placeholders, not the caller's numbers)
            out = fun(*traced_args, **traced_kwargs)
        out_leaves, out_structure = tree_flatten(out)
        for position, value in enumerate(out_leaves):
            check_output(value, "eval_shape", fun, position)
        results = [_struct_of(value) for value in out_leaves]
    except _EvalShapeMemoryError:
        raise
    except MemoryError as error:
        # tidu has no shape-only evaluation: NumPy's refusal (an (1e5, 1e5) product asks
        # for 80 GB) is said in eval_shape's terms
        raise _EvalShapeMemoryError(
            f"eval_shape of {function_name(fun)}: running it on arrays of the arguments' "
            f"shapes (tidu traces with values) needs more memory than there is ({error}); "
            "call it on smaller shapes") from None
    finally:
        trace.active = False
    return tree_unflatten(out_structure, results)


def _placeholder(spec: ShapeDtypeStruct, fun) -> np.ndarray:
    """Zeros of ``spec``'s shape and dtype, with an identity in each matrix of inexact
    numbers (a value ``inv``, ``solve`` and ``cholesky`` take; only its diagonal's memory is
    touched)."""
    try:
        value = np.zeros(spec.shape, spec.dtype)
    except ValueError:                  # NumPy: more bytes than an address holds
        raise _EvalShapeMemoryError(f"eval_shape of {function_name(fun)}: an argument of "
                                    f"shape {spec.shape} and dtype {spec.dtype} has more "
                                    "bytes than memory can address (tidu traces with "
                                    "values)") from None
    if spec.dtype.kind in "fc" and len(spec.shape) >= 2:
        diagonal = np.arange(min(spec.shape[-2:]))
        value[..., diagonal, diagonal] = 1
    return value


class _EvalShapeMemoryError(TensorNotSupportedError, MemoryError):
    """:func:`eval_shape` ran out of memory running the function on placeholders: tidu traces
    with values, so the shapes it evaluates must fit in memory (a ``MemoryError`` too)."""


def _spec(leaf, position: int, fun) -> ShapeDtypeStruct:
    """What an argument leaf stands for; a leaf that is no array (a string, an object) is
    refused, as JAX refuses it."""
    if type(leaf) is ShapeDtypeStruct and leaf.dtype.kind in "biufc":
        return leaf
    if type(leaf) is int and not _INT64.min <= leaf <= _INT64.max:
        raise TensorOverflowError(f"eval_shape of {function_name(fun)}: leaf {position} of "
                                  f"the arguments, the Python integer {leaf}, is out of "
                                  "bounds for int64 (as in JAX)")
    if type(leaf) in _PYTHON_NUMBERS:
        return ShapeDtypeStruct((), np.asarray(leaf).dtype,
                                weak_type=type(leaf) in WEAK_NUMBERS)
    if type(leaf) is ShapeDtypeStruct:
        what = f"a ShapeDtypeStruct of dtype {leaf.dtype}"
    elif isinstance(leaf, (np.ndarray, np.generic, Frontend, numbers.Number)) or (
            hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
        try:
            dtype = dtype_of(leaf)
        except (TypeError, TensorTypeError):
            dtype = None
        if dtype is not None and dtype.kind in "biufc":
            return ShapeDtypeStruct(shape_of(leaf), dtype,
                                    weak_type=bool(getattr(leaf, "weak", False)))
        what = f"an array of dtype {dtype}" if dtype is not None else type(leaf).__name__
    else:
        what = f"a {type(leaf).__name__}"
    raise FunctionalError(f"eval_shape of {function_name(fun)}: leaf {position} of the "
                          f"arguments is {what}; pass arrays, numbers or ShapeDtypeStructs "
                          f"(of booleans or numbers; {leaf_hint(leaf)})")


def _struct_of(value) -> ShapeDtypeStruct:
    if type(value) in _PYTHON_NUMBERS:
        return ShapeDtypeStruct((), np.asarray(value).dtype,
                                weak_type=type(value) in WEAK_NUMBERS)
    return ShapeDtypeStruct(shape_of(value), dtype_of(value),
                            weak_type=isinstance(value, Frontend) and bool(value.weak))
