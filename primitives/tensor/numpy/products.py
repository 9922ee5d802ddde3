"""Vector and matrix products with NumPy's names: ``inner``, ``vdot``, ``kron``, ``cross``,
and :func:`einsum_subscripts` for ``einsum``'s sublist form.

Each is a composition of ``dot_general``, ``multiply``, ``reshape`` and indexing,
so it differentiates in every argument and to any order. As in NumPy, Python
numbers are arrays here (``inner(2.0, float32_array)`` is float64), and only
``vdot`` conjugates (its first argument); complex gradients follow tidu's
convention (the adjoint under ``Re<a, b>``, the conjugate of JAX's).

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.inner(np.ones(3), np.arange(3.0))
array(3.)
>>> b = np.array([1j, 2.0])
>>> tnp.grad(lambda a: tnp.real(tnp.vdot(a, b)))(np.zeros(2, complex)) == b   # Re<a, b>'s
array([ True,  True])
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

from primitives.tensor.numpy.lowering import (
    _axis,
    _broadcast_shapes,
    _operand,
    _promoted,
    conj,
    dot_general,
    getitem,
    matmul,
    pad,
    take,
    multiply,
    negative,
    reshape,
    stack,
    subtract,
)
from primitives.tensor.backends import as_array
from primitives.tensor.core import Frontend, shape_of
from primitives.tensor.errors import TensorShapeError, TensorTypeError
from primitives.tensor.numpy.dispatch import implements

__all__ = ["inner", "vdot", "kron", "cross", "convolve", "correlate"]


def _array(x, fn: str):
    """An operand as NumPy's ``asarray`` sees it: Python numbers become 0-d arrays (so they
    promote as arrays do, not as weak scalars); arrays of any library stay as they are."""
    x = _operand(x, fn)
    return x if isinstance(x, Frontend) else as_array(x)


@implements(np.inner)
def inner(a, b):
    """``np.inner``: the sum over the last axes (no conjugation); a 0-d operand multiplies."""
    a, b = _array(a, "inner"), _array(b, "inner")
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        return multiply(a, b)
    if sa[-1] != sb[-1]:
        raise TensorShapeError(f"inner: shapes {sa} and {sb} not aligned: {sa[-1]} (dim "
                               f"{len(sa) - 1}) != {sb[-1]} (dim {len(sb) - 1})")
    return dot_general(a, b, (((len(sa) - 1,), (len(sb) - 1,)), ((), ())))


@implements(np.vdot)
def vdot(a, b):
    """``np.vdot``: ``sum(conj(a) * b)`` over the flattened operands (antilinear in ``a``)."""
    (a, b), _ = _promoted(_array(a, "vdot"), _array(b, "vdot"))
    a, b = reshape(a, (-1,)), reshape(b, (-1,))
    if shape_of(a) != shape_of(b):
        raise TensorShapeError(f"vdot: the operands have {shape_of(a)[0]} and {shape_of(b)[0]} "
                               "elements; they must have as many")
    return dot_general(conj(a), b, (((0,), (0,)), ((), ())))


@implements(np.kron)
def kron(a, b):
    """``np.kron``: the Kronecker product (the shorter shape padded with leading ones)."""
    a, b = _array(a, "kron"), _array(b, "kron")
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        return multiply(a, b)
    nd = max(len(sa), len(sb))
    sa, sb = (1,) * (nd - len(sa)) + sa, (1,) * (nd - len(sb)) + sb
    # a's axes at even positions, b's at odd ones: the product interleaves them
    a = reshape(a, tuple(n for size in sa for n in (size, 1)))
    b = reshape(b, tuple(n for size in sb for n in (1, size)))
    return reshape(multiply(a, b), tuple(x * y for x, y in zip(sa, sb)))


@implements(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """``np.cross`` of 3-vectors (2-vectors as NumPy 2 still takes them, with its
    ``DeprecationWarning``), broadcast over the other axes."""
    if axis is not None:
        axisa = axisb = axisc = axis
    (a, b), _ = _promoted(_array(a, "cross"), _array(b, "cross"))
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        raise TensorShapeError("cross: at least one array has zero dimension")
    axisa, axisb = _axis(axisa, len(sa), "cross (axisa)"), _axis(axisb, len(sb), "cross (axisb)")
    da, db = sa[axisa], sb[axisb]
    if da not in (2, 3) or db not in (2, 3):
        raise TensorShapeError(f"cross: incompatible dimensions for cross product: {da} and "
                               f"{db} (dimension must be 2 or 3)")
    _broadcast_shapes("cross", sa[:axisa] + sa[axisa + 1:], sb[:axisb] + sb[axisb + 1:])
    if da == 2 or db == 2:
        warnings.warn("cross: arrays of 2-dimensional vectors are deprecated (as in NumPy "
                      "2.0); use arrays of 3-dimensional vectors instead",
                      DeprecationWarning, stacklevel=2)

    def component(x, axis, i):
        return getitem(x, (slice(None),) * axis + (i,))

    a0, a1, b0, b1 = (component(a, axisa, 0), component(a, axisa, 1),
                      component(b, axisb, 0), component(b, axisb, 1))
    c2 = subtract(multiply(a0, b1), multiply(a1, b0))
    if da == 2 and db == 2:
        return c2
    if da == 3 and db == 3:
        a2, b2 = component(a, axisa, 2), component(b, axisb, 2)
        c0 = subtract(multiply(a1, b2), multiply(a2, b1))
        c1 = subtract(multiply(a2, b0), multiply(a0, b2))
    elif da == 2:                                       # a2 = 0
        b2 = component(b, axisb, 2)
        c0, c1 = multiply(a1, b2), negative(multiply(a0, b2))
    else:                                               # b2 = 0
        a2 = component(a, axisa, 2)
        c0, c1 = negative(multiply(a2, b1)), multiply(a2, b0)
    axisc = _axis(axisc, len(shape_of(c2)) + 1, "cross (axisc)")
    return stack([c0, c1, c2], axisc)


# --- einsum's sublist form ------------------------------------------------------------------

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"   # NumPy's order: 0 is "A"


def _sublist_term(sublist) -> str:
    """One sublist (integers in ``[0, 52)`` and ``...``) as subscript letters."""
    if isinstance(sublist, (str, bytes)) or not hasattr(sublist, "__iter__"):
        raise TensorTypeError(f"einsum: a sublist must be a list of integers and Ellipsis, got "
                              f"{sublist!r}")
    term = []
    for label in sublist:
        if label is Ellipsis:
            term.append("...")
            continue
        if isinstance(label, (bool, np.bool_)):
            raise TensorTypeError(f"einsum: subscript {label!r} is not an integer")
        try:
            index = operator.index(label)
        except TypeError:
            raise TensorTypeError(f"einsum: subscript {label!r} is not an integer or "
                                  "Ellipsis") from None
        if not 0 <= index < len(_LETTERS):
            raise TensorShapeError(f"einsum: subscript {index} is not within the valid range "
                                   f"[0, {len(_LETTERS)})")
        term.append(_LETTERS[index])
    return "".join(term)


def einsum_subscripts(*args) -> tuple[str, list]:
    """``einsum``'s sublist form ``(op0, sublist0, op1, sublist1, ..., [output])`` as the
    subscripts string and the operands (integer ``i`` is NumPy's letter: ``0-25`` are
    ``A-Z``, ``26-51`` are ``a-z``, so implicit outputs sort as in NumPy).

    >>> spec, ops = einsum_subscripts(np.ones((2, 3)), [0, 1], np.ones((3, 4)), [1, 2], [0, 2])
    >>> spec, len(ops)
    ('AB,BC->AC', 2)
    """
    if len(args) < 2:
        raise TensorTypeError("einsum: the sublist form takes an operand and its sublist "
                              "(einsum(a, [0, 1], b, [1, 2], [0, 2]))")
    pairs, output = (args, None) if len(args) % 2 == 0 else (args[:-1], args[-1])
    operands = list(pairs[0::2])
    spec = ",".join(_sublist_term(sublist) for sublist in pairs[1::2])
    if output is not None:
        spec += "->" + _sublist_term(output)
    return spec, operands


@implements(np.convolve)
def convolve(a, v, mode: str = "full"):
    """``np.convolve`` of two 1-d arrays (``mode`` "full", "same" or "valid"), differentiable
    in both: the windows of the zero-padded longer input, times the flipped shorter one.

    >>> convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
    array([0. , 1. , 2.5, 4. , 1.5])
    """
    a, v = _operand(a, "convolve"), _operand(v, "convolve")
    for x in (a, v):
        if len(shape_of(x)) != 1:
            raise TensorShapeError(f"convolve: operands must be 1-d, got shape {shape_of(x)}")
    if mode not in ("full", "same", "valid"):
        raise TensorTypeError(f"convolve: mode must be 'full', 'same' or 'valid', got {mode!r}")
    (n,), (m,) = shape_of(a), shape_of(v)
    if m > n:
        a, v, n, m = v, a, m, n
    if m == 0:
        raise TensorShapeError("convolve: an operand is empty")
    a, v = _promoted(a, v)[0]
    windows = np.arange(n + m - 1)[:, None] + np.arange(m)[None, :]
    full = matmul(take(pad(a, (m - 1, m - 1)), windows), getitem(v, slice(None, None, -1)))
    if mode == "full":
        return full
    if mode == "same":
        start = (m - 1) // 2
        return getitem(full, slice(start, start + n))
    return getitem(full, slice(m - 1, n))


@implements(np.correlate)
def correlate(a, v, mode: str = "valid"):
    """``np.correlate``: ``c[k] = sum_n a[n+k] * conj(v[n])``, i.e. ``convolve(a,
    conj(v)[::-1], mode)``; differentiable in both.

    >>> correlate(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
    array([3.5])
    """
    a, v = _operand(a, "correlate"), _operand(v, "correlate")
    for x in (a, v):
        if len(shape_of(x)) != 1:
            raise TensorShapeError(f"correlate: operands must be 1-d, got shape {shape_of(x)}")
    reverse = slice(None, None, -1)
    if shape_of(v)[0] > shape_of(a)[0]:       # as NumPy: the longer first, then undone
        return conj(getitem(convolve(v, getitem(conj(a), reverse), mode), reverse))
    return convolve(a, getitem(conj(v), reverse), mode)
