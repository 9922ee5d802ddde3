"""Constant ops, and the functions that make them.

- :class:`Full`: an array of one value (zeros by default); :func:`zeros` emits one;
- :class:`Literal`: a small array stored as its bytes;
- :class:`HeldConstant`: an array held by reference (constants too big to store);
- :func:`constant_op`: a value as a ``Full`` or ``Literal``, or ``None``: the set's
  folding hook (``TensorPrimitive.constant``, ``tidu.optimize``);
- :func:`constant`: emit a value as a constant into a builder.

Constants have no tangent. ``Full`` and ``Literal`` are equal when they make the
same bits, so equal constants are one op; a ``HeldConstant`` equals only itself.

>>> constant_op(np.zeros(3))
full[shape=(3,), dtype='float64', value=0.0]

It imports :mod:`.base` only, of :mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

import math

import numpy as np

from tidu.graph import Local
from primitives.tensor.backends import NUMPY, as_array, library_of
from primitives.tensor.core import dtype_of, shape_of
from primitives.tensor.ops.base import TensorPrimitive, emit, tensor_op


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

    def output_dtype(self) -> str:
        return self.dtype

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


MAX_LITERAL_ELEMENTS = 256
"""The largest non-uniform array folding keeps in a program (as a :class:`Literal`)."""


@tensor_op
class Literal(TensorPrimitive):
    """A constant array of ``shape`` and ``dtype`` stored as its bytes (C order).

    ``data`` holds every element, or one element repeated over ``shape``. Equal
    when the bytes are: ``-0.0`` differs from ``0.0`` and a NaN equals itself,
    as the scalar set's ``Const`` does. :func:`constant_op` makes these.

    >>> Literal((2,), "float64", np.array([1.5, -0.0]).tobytes()).eval(None, [])
    [array([ 1.5, -0. ])]
    >>> Literal((2,), "float64", np.array([-0.0]).tobytes()) == Literal(
    ...     (2,), "float64", np.array([0.0]).tobytes())
    False
    """

    shape: tuple
    dtype: str
    data: bytes
    name = "literal"

    def input_count(self) -> int:
        return 0

    def output_dtype(self) -> str:
        return self.dtype

    def elements(self) -> np.ndarray:
        """The stored elements, one-dimensional (one element for a uniform literal)."""
        return np.frombuffer(self.data, self.dtype)

    def eval(self, ctx, inputs):
        stored = self.elements()
        if stored.size == math.prod(self.shape):
            return [stored.reshape(self.shape).copy()]
        return [np.broadcast_to(stored, self.shape).copy()]   # copies the bits exactly

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [None]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return []

    def params(self) -> str:
        values = np.array2string(self.elements(), threshold=8)
        return f"shape={self.shape}, dtype={self.dtype!r}, values={values}"


_NAN = math.nan               # one NaN object, so that equal Full(nan) ops are one op
_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def constant_op(value):
    """An op with no inputs that makes ``value``, or ``None`` to leave it computed.

    A uniform array becomes ``Full(shape, dtype, v)`` (a ``Literal`` holding one
    element when ``Full`` cannot make its exact bits, e.g. ``-0.0``); any other
    array of at most :data:`MAX_LITERAL_ELEMENTS` elements a :class:`Literal`.
    Larger arrays, Python numbers (NumPy treats them as weakly typed),
    non-numeric dtypes and arrays of other libraries than NumPy give ``None``:
    their values are never read here (that would compute a Dask array or copy
    a GPU's). Folding starts from ``Full`` and ``Literal``, so folded values are
    NumPy arrays; the ops that meet other libraries' arrays convert them
    (:func:`~primitives.tensor.backends.operands`).

    >>> constant_op(np.zeros((512, 512), np.float32))
    full[shape=(512, 512), dtype='float32', value=0.0]
    >>> constant_op(np.array([1.0, 2.0]))
    literal[shape=(2,), dtype='float64', values=[1. 2.]]
    >>> constant_op(np.arange(1000.0)) is None
    True
    """
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if (type(value) is not np.ndarray or value.dtype.kind not in "biufc"
            or not value.dtype.isnative):
        return None
    dtype = value.dtype.name
    flat = np.ascontiguousarray(value).reshape(-1)
    if flat.size and _uniform(flat):
        first = flat[:1]
        full = _full_of(first, value.shape, dtype)
        return full if full is not None else Literal(value.shape, dtype, first.tobytes())
    if flat.size <= MAX_LITERAL_ELEMENTS:
        return Literal(value.shape, dtype, flat.tobytes())
    return None


def _uniform(flat: np.ndarray) -> bool:
    """Whether every element of ``flat`` has the bits of the first."""
    uint = _UINT_OF_SIZE.get(flat.itemsize)
    bits = flat.view(uint) if uint else flat.view(np.uint8).reshape(flat.size, flat.itemsize)
    return bool((bits == bits[0]).all())


def _full_of(first: np.ndarray, shape: tuple, dtype: str):
    """``Full(shape, dtype, v)`` if it makes exactly the bits of ``first``, else ``None``.

    ``Full`` compares its value with ``==``, so it cannot hold ``-0.0`` apart
    from ``0.0``: a value with a negative zero (or zero part) is left to a ``Literal``.
    """
    v = first[0].item()
    if isinstance(v, float) and v != v:
        v = _NAN
    if first.dtype.kind in "fc":
        parts = first.view(first.real.dtype)
        if (np.signbit(parts) & (parts == 0)).any():
            return None
    made = np.zeros(1, dtype) if v == 0 else np.full(1, v, dtype)
    return Full(shape, dtype, v) if made.tobytes() == first.tobytes() else None


class HeldConstant(TensorPrimitive):
    """A nullary op returning one array, in its own library: a constant of a traced rule
    that :func:`constant_op` would not store. Equal by identity.

    A NumPy array is held by reference and read when the op runs, through a read-only view
    (so no op writes into it): an array a rule closes over is read at each call, as the
    closure rule says (:mod:`primitives.tensor.transforms.closure`). Other libraries' arrays, which
    cannot be made read-only, are copied.
    """

    __slots__ = ("value",)
    name = "held_constant"
    rules_read_fields_only = False      # equal by identity: never found again

    def __init__(self, value) -> None:
        library = library_of(value)
        self.value = value if library is NUMPY else library.copy(value)

    def input_count(self) -> int:
        return 0

    def eval(self, ctx, inputs):
        value = self.value
        if type(value) is np.ndarray:
            value = value.view()
            value.flags.writeable = False
        return [value]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [None]

    def params(self) -> str:
        return f"shape={shape_of(self.value)}, dtype={dtype_of(self.value)}"


STORED_BYTES = 1 << 20
"""Constants of traced rules up to this size are stored in the op (a ``Full`` or ``Literal``,
which programs can fold); bigger ones are held by reference (:class:`HeldConstant`), read when
the op runs. It matches :data:`primitives.tensor.transforms.closure.COMPARED_BYTES`: ``jit`` compares a
stored array it closes over with its copy at each call, and so traces again when it changes."""


def constant(builder, value) -> Local:
    """Emit ``value`` as a constant (primal work); return its reference: a ``Full`` or
    ``Literal`` (:func:`constant_op`) up to :data:`STORED_BYTES`, else a :class:`HeldConstant`."""
    array = as_array(value)
    stored = constant_op(array) if getattr(array, "nbytes", 0) <= STORED_BYTES else None
    return Local(emit(builder, stored or HeldConstant(array), []))

