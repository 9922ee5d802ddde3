"""Vector and matrix products with NumPy's names: ``matmul``, ``dot``, ``tensordot``,
``outer``, ``einsum`` (and :func:`einsum_subscripts` for its sublist form), ``inner``,
``vdot``, ``kron``, ``cross``, ``convolve`` and ``correlate``.

Each is a composition of ``dot_general``, ``multiply``, ``reshape`` and indexing,
so it differentiates in every argument and to any order. As in NumPy, Python
numbers are arrays to ``dot``, ``tensordot``, ``einsum``, ``inner``, ``vdot``, ``kron``
and ``cross`` (``inner(2.0, float32_array)`` is float64), and only
``vdot`` conjugates (its first argument); complex gradients follow tidu's
convention (the adjoint under ``Re<a, b>``, the conjugate of JAX's).

It imports :mod:`.lowering`, :mod:`.indexing` and :mod:`.manipulation` (and
:mod:`.dispatch`), of the NumPy package.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.inner(np.ones(3), np.arange(3.0))
array(3.)
>>> b = np.array([1j, 2.0])
>>> tnp.grad(lambda a: tnp.real(tnp.vdot(a, b)))(np.zeros(2, complex)) == b   # Re<a, b>'s
array([ True,  True])
"""

from __future__ import annotations

import builtins
import numbers
import operator
import warnings

import numpy as np

from primitives.tensor.backends import as_array
from primitives.tensor.core import Frontend, bind, dtype_of, shape_of
from primitives.tensor.errors import TensorShapeError, TensorTypeError
from primitives.tensor.numpy.dispatch import implements
from primitives.tensor.numpy.indexing import getitem, take
from primitives.tensor.numpy.lowering import (add, as_dtype, broadcast_shapes, broadcast_to,
                                              cast_operands, concatenate,
                                              conj, divide, dot_general,
                                              dot_general_of_promoted, first, multiply, negative,
                                              no_out, normalize_axis, not_itself, operand,
                                              promoted, reshape, stack, subtract, sum, transpose,
                                              ufunc_keywords, where)
from primitives.tensor.numpy.manipulation import pad
from primitives.tensor.ops.indexing import Gather

__all__ = ["matmul", "matvec", "vecmat", "vecdot", "dot", "tensordot", "outer", "einsum",
           "inner", "vdot", "kron", "cross", "convolve", "correlate", "polyadd", "polysub",
           "polymul", "polyder", "polyint"]


def _array(x, fn: str):
    """An operand as NumPy's ``asarray`` sees it: Python numbers become 0-d arrays (so they
    promote as arrays do, not as weak scalars); arrays of any library stay as they are."""
    x = operand(x, fn)
    return x if isinstance(x, Frontend) else as_array(x)


@implements(np.matmul, np.linalg.matmul)
def matmul(x, y, out=None, dtype=None, **options):
    """``np.matmul`` (``x @ y``): 1-D operands are vectors; leading axes broadcast as batches
    (NumPy's ``out=`` and ``dtype=`` are refused by name)."""
    if out is not None or dtype is not None or options:
        ufunc_keywords("matmul", out, True, dtype, options)
    (x, y), dtype = promoted(x, y)
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
        return dot_general_of_promoted(x, y, (((x_axis,), (y_axis,)), ((), ())), dtype)
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


def _core_last(x, axis, fn: str):
    """``x`` with its axis ``axis`` (a gufunc's core axis) moved last."""
    x = operand(x, fn)
    if not shape_of(x):
        raise TensorShapeError(f"{fn}: operands must be at least 1-d, got a 0-d array")
    ndim = len(shape_of(x))
    axis = normalize_axis(axis, ndim, fn)
    return x if axis == ndim - 1 else transpose(
        x, [i for i in range(ndim) if i != axis] + [axis])


def _same_size(fn: str, n1: int, n2: int, shapes: tuple) -> None:
    if n1 != n2:
        raise TensorShapeError(f"{fn}: shapes {shapes[0]} and {shapes[1]} do not match: the "
                               f"contracted axes have sizes {n1} and {n2}")


@implements(np.vecdot, np.linalg.vecdot)
def vecdot(x1, x2, /, out=None, *, axis: int = -1, dtype=None, **options):
    """``np.vecdot`` (the Array API's, also ``np.linalg``'s): ``sum(conj(x1) * x2)`` along
    ``axis``, the other axes broadcast; antilinear in ``x1`` (as ``vdot``).

    >>> vecdot(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, 1.0]))
    array([3., 7.])
    """
    if out is not None or dtype is not None or options:
        ufunc_keywords("vecdot", out, True, dtype, options)
    shapes = (shape_of(operand(x1, "vecdot")), shape_of(operand(x2, "vecdot")))
    (x1, x2), _ = promoted(_core_last(x1, axis, "vecdot"), _core_last(x2, axis, "vecdot"))
    _same_size("vecdot", shape_of(x1)[-1], shape_of(x2)[-1], shapes)
    product = matmul(reshape(conj(x1), shape_of(x1)[:-1] + (1, shape_of(x1)[-1])),
                     reshape(x2, shape_of(x2) + (1,)))
    return reshape(product, shape_of(product)[:-2])


@implements(np.matvec)
def matvec(x1, x2, /, out=None, *, dtype=None, **options):
    """``np.matvec`` (NumPy 2.2): the matrix-vector products of the matrices ``x1`` (last two
    axes) and the vectors ``x2`` (last axis), the other axes broadcast.

    >>> matvec(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, -1.0]))
    array([-1., -1.])
    """
    if out is not None or dtype is not None or options:
        ufunc_keywords("matvec", out, True, dtype, options)
    x1, x2 = operand(x1, "matvec"), operand(x2, "matvec")
    if len(shape_of(x1)) < 2 or not shape_of(x2):
        raise TensorShapeError(f"matvec: x1 must be at least 2-d and x2 at least 1-d, got "
                               f"shapes {shape_of(x1)} and {shape_of(x2)}")
    _same_size("matvec", shape_of(x1)[-1], shape_of(x2)[-1], (shape_of(x1), shape_of(x2)))
    product = matmul(x1, reshape(x2, shape_of(x2) + (1,)))
    return reshape(product, shape_of(product)[:-1])


@implements(np.vecmat)
def vecmat(x1, x2, /, out=None, *, dtype=None, **options):
    """``np.vecmat`` (NumPy 2.2): the vector-matrix products of the conjugated vectors ``x1``
    (last axis) and the matrices ``x2`` (last two axes), the other axes broadcast.

    >>> vecmat(np.array([1.0, -1.0]), np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([-2., -2.])
    """
    if out is not None or dtype is not None or options:
        ufunc_keywords("vecmat", out, True, dtype, options)
    x1, x2 = operand(x1, "vecmat"), operand(x2, "vecmat")
    if not shape_of(x1) or len(shape_of(x2)) < 2:
        raise TensorShapeError(f"vecmat: x1 must be at least 1-d and x2 at least 2-d, got "
                               f"shapes {shape_of(x1)} and {shape_of(x2)}")
    _same_size("vecmat", shape_of(x1)[-1], shape_of(x2)[-2], (shape_of(x1), shape_of(x2)))
    product = matmul(reshape(conj(x1), shape_of(x1)[:-1] + (1, shape_of(x1)[-1])), x2)
    return reshape(product, shape_of(product)[:-2] + shape_of(product)[-1:])


@implements(np.dot)
def dot(a, b, out=None):
    """``np.dot``: products of scalars, inner products, matrix products, and for N-D operands
    the sum over the last axis of ``a`` and the second-to-last of ``b``."""
    no_out(out, "dot")
    a, b = _array(a, "dot"), _array(b, "dot")
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        return multiply(a, b)
    a_axis, b_axis = len(sa) - 1, 0 if len(sb) == 1 else len(sb) - 2
    if sa[a_axis] != sb[b_axis]:
        raise TensorShapeError(f"dot: shapes {sa} and {sb} not aligned: {sa[a_axis]} (dim "
                               f"{a_axis}) != {sb[b_axis]} (dim {b_axis})")
    return dot_general(a, b, (((a_axis,), (b_axis,)), ((), ())))


@implements(np.tensordot, np.linalg.tensordot)
def tensordot(a, b, axes=2):
    """``np.tensordot``."""
    a, b = _array(a, "tensordot"), _array(b, "tensordot")
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
        a_axes = tuple(normalize_axis(ax, len(sa), "tensordot") for ax in a_axes)
        b_axes = tuple(normalize_axis(ax, len(sb), "tensordot") for ax in b_axes)
    if len(a_axes) != len(b_axes) or any(sa[i] != sb[j] for i, j in zip(a_axes, b_axes)):
        raise TensorShapeError(f"tensordot: shape-mismatch for sum: shapes {sa} and {sb} on "
                               f"axes {a_axes} and {b_axes}")
    return dot_general(a, b, ((a_axes, b_axes), ((), ())))


@implements(np.outer)
def outer(a, b, out=None):
    """``np.outer`` (operands are flattened)."""
    no_out(out, "outer")
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
            ellipsis_ndim = max(ellipsis_ndim, len(shape) - named)
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
        x = first(bind(Gather(0, shape_of(x), (n,)), x, np.arange(n, dtype=np.intp) * step))
        term = letter + "".join(term[a] for a in others)
    return x, term


@implements(np.einsum)
def einsum(subscripts: str, *operands, out=None, dtype=None, order: str = "K",
           casting: str = "safe", optimize=None):
    """``np.einsum`` for one or more operands, lowered to ``dot_general``, ``transpose``,
    ``reshape`` and ``reduce_sum`` (repeated indices within an operand take diagonals).

    Operands are contracted left to right; ``optimize`` and ``order`` (memory layout) are
    accepted and ignored. ``dtype`` is the dtype to compute in, each operand cast to it as
    the ``casting`` rule allows (NumPy's default ``"safe"``: float64 to float32 needs
    ``casting="same_kind"``).

    >>> einsum("i,i->", np.ones(2), np.arange(2), dtype=np.float32, casting="same_kind")
    array(1., dtype=float32)
    """
    no_out(out, "einsum")
    if order not in ("K", "A", "C", "F"):
        raise TensorTypeError(f"einsum: order must be one of 'K', 'A', 'C', 'F', got {order!r}")
    if not isinstance(subscripts, str):            # the sublist form: einsum(a, [0, 1], ...)
        subscripts, operands = einsum_subscripts(subscripts, *operands)
    if not operands:
        raise TensorShapeError("einsum: no operands given")
    operands = [_array(x, "einsum") for x in operands]
    operands = cast_operands(operands, dtype, casting, "einsum") if dtype is not None or \
        casting not in ("safe", "same_kind", "unsafe") else promoted(*operands)[0]
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
    x = reshape(x, target) if shape_of(x) != target else x
    return not_itself(x, operands[0])       # einsum("ij->ij", t): a new tensor, never t


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
    (a, b), _ = promoted(_array(a, "vdot"), _array(b, "vdot"))
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
    (a, b), _ = promoted(_array(a, "cross"), _array(b, "cross"))
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        raise TensorShapeError("cross: at least one array has zero dimension")
    axisa = normalize_axis(axisa, len(sa), "cross (axisa)")
    axisb = normalize_axis(axisb, len(sb), "cross (axisb)")
    da, db = sa[axisa], sb[axisb]
    if da not in (2, 3) or db not in (2, 3):
        raise TensorShapeError(f"cross: incompatible dimensions for cross product: {da} and "
                               f"{db} (dimension must be 2 or 3)")
    broadcast_shapes("cross", sa[:axisa] + sa[axisa + 1:], sb[:axisb] + sb[axisb + 1:])
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
    axisc = normalize_axis(axisc, len(shape_of(c2)) + 1, "cross (axisc)")
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
    """``np.convolve`` of two 1-d arrays (a number is one of length 1, as NumPy's; ``mode``
    "full", "same" or "valid", or NumPy's numbers for them 2, 1, 0), differentiable in
    both. As NumPy's, each output sums only the products of overlapping terms, so an
    infinity or NaN in one operand meets no padding zero (``0 * inf`` would be NaN).

    >>> convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
    array([0. , 1. , 2.5, 4. , 1.5])
    >>> convolve(np.array([1.0, -1.0]), np.array([1.0, -np.inf]))
    array([  1., -inf,  inf])
    """
    a, v = operand(a, "convolve"), operand(v, "convolve")
    a, v = (reshape(x, (1,)) if not shape_of(x) else x for x in (a, v))     # NumPy's ndmin=1
    return _convolved(a, v, mode, "convolve")


_MODE_NUMBERS = {0: "valid", 1: "same", 2: "full"}     # NumPy's numbers for the modes


def _convolved(a, v, mode, fn: str):
    """:func:`convolve` of the operands ``a`` and ``v`` of ``fn`` (``convolve``,
    ``correlate``), whose errors name it."""
    for x in (a, v):
        if len(shape_of(x)) != 1:
            raise TensorShapeError(f"{fn}: operands must be 1-d, got shape {shape_of(x)}")
    if isinstance(mode, (int, np.integer)) and not isinstance(mode, bool):
        mode = _MODE_NUMBERS.get(int(mode), mode)
    if not (isinstance(mode, str) and mode in ("full", "same", "valid")):
        raise TensorTypeError(f"{fn}: mode must be 'full', 'same' or 'valid' (NumPy's 2, 1 "
                              f"or 0), got {mode!r}")
    (n,), (m,) = shape_of(a), shape_of(v)
    if m > n:
        a, v, n, m = v, a, m, n
    if m == 0:
        raise TensorShapeError(f"{fn}: an operand is empty")
    a, v = promoted(a, v)[0]
    start = {"full": 0, "same": (m - 1) // 2, "valid": m - 1}[mode]
    stop = {"full": n + m - 1, "same": (m - 1) // 2 + n, "valid": n}[mode]
    flipped = getitem(v, slice(None, None, -1))
    # output k is sum_i a[k - m + 1 + i] * flipped[i]: for k in [m - 1, n) every term
    # overlaps (one matrix product), the outputs before and after those run off a's ends
    middle = np.arange(builtins.max(start, m - 1), builtins.min(stop, n))
    before = np.arange(start, builtins.min(stop, m - 1))
    after = np.arange(builtins.max(start, n), stop)
    full = matmul(take(a, middle[:, None] - (m - 1) + np.arange(m)), flipped)
    if not before.size and not after.size:
        return full
    ends = _partial_windows(a, flipped, np.concatenate([before, after]))
    return concatenate([getitem(ends, slice(0, before.size)), full,
                        getitem(ends, slice(before.size, None))])


def _partial_windows(a, flipped, outputs: np.ndarray):
    """:func:`convolve`'s ``outputs`` whose windows run off an end of ``a``: the windows
    of the zero-padded ``a`` times ``flipped``, the products outside ``a`` set to zero
    before the sum (a padding zero times an infinity of ``flipped`` would be NaN; the
    derivatives of those products reach only the padding, which has none)."""
    (n,), (m,) = shape_of(a), shape_of(flipped)
    windows = outputs[:, None] + np.arange(m)
    inside = (windows >= m - 1) & (windows < n + m - 1)
    products = multiply(take(pad(a, (m - 1, m - 1)), windows), flipped)
    dtype = dtype_of(products)
    # (as_dtype: NumPy's sum of small integers or booleans is wider; convolve's is not)
    return as_dtype(sum(where(inside, products, np.zeros((), dtype)), axis=1), dtype)


@implements(np.correlate)
def correlate(a, v, mode: str = "valid"):
    """``np.correlate``: ``c[k] = sum_n a[n+k] * conj(v[n])``, i.e. ``convolve(a,
    conj(v)[::-1], mode)``; differentiable in both.

    >>> correlate(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
    array([3.5])
    """
    a, v = operand(a, "correlate"), operand(v, "correlate")
    for x in (a, v):
        if len(shape_of(x)) != 1:
            raise TensorShapeError(f"correlate: operands must be 1-d, got shape {shape_of(x)}")
    reverse = slice(None, None, -1)
    if shape_of(v)[0] > shape_of(a)[0]:       # as NumPy: the longer first, then undone
        return conj(getitem(_convolved(v, getitem(conj(a), reverse), mode, "correlate"),
                            reverse))
    return _convolved(a, getitem(conj(v), reverse), mode, "correlate")


# --- polynomial arithmetic on coefficient arrays (highest power first, as np.polyval's) ------


def _coefficients(p, fn: str):
    """``p`` as a 1-d coefficient array (NumPy's ``atleast_1d``)."""
    p = _array(p, fn)
    if len(shape_of(p)) > 1:
        raise TensorShapeError(f"{fn}: coefficients must be a 1-d array, got shape "
                               f"{shape_of(p)}")
    return reshape(p, (-1,)) if not shape_of(p) else p


def _aligned(a1, a2, fn: str):
    """The coefficients of ``a1`` and ``a2`` padded at the front to one length."""
    a1, a2 = _coefficients(a1, fn), _coefficients(a2, fn)
    n1, n2 = shape_of(a1)[0], shape_of(a2)[0]
    return pad(a1, [(builtins.max(n2 - n1, 0), 0)]), pad(a2, [(builtins.max(n1 - n2, 0), 0)])


@implements(np.polyadd)
def polyadd(a1, a2):
    """``np.polyadd``: the coefficients of the sum of two polynomials; linear in both.

    >>> polyadd(np.array([1.0, 2.0]), np.array([3.0, 0.0, 1.0]))
    array([3., 1., 3.])
    """
    return add(*_aligned(a1, a2, "polyadd"))


@implements(np.polysub)
def polysub(a1, a2):
    """``np.polysub``: the coefficients of ``a1 - a2``; linear in both.

    >>> polysub(np.array([1.0, 2.0]), np.array([3.0, 0.0, 1.0]))
    array([-3.,  1.,  1.])
    """
    return subtract(*_aligned(a1, a2, "polysub"))


@implements(np.polymul)
def polymul(a1, a2):
    """``np.polymul``: the coefficients of the product (:func:`convolve`); bilinear.

    >>> polymul(np.array([1.0, 1.0]), np.array([1.0, -1.0]))
    array([ 1.,  0., -1.])
    """
    return convolve(_coefficients(a1, "polymul"), _coefficients(a2, "polymul"))


def _order(m, fn: str, what: str) -> int:
    try:
        m = operator.index(m)
    except TypeError:
        raise TensorTypeError(f"{fn}: the order m must be an integer, got {m!r}") from None
    if m < 0:
        raise TensorShapeError(f"{fn}: Order of {what} must be positive, got {m}")
    return m


@implements(np.polyder)
def polyder(p, m: int = 1):
    """``np.polyder``: the coefficients of the ``m``-th derivative; linear in ``p``.

    >>> polyder(np.array([1.0, 2.0, 3.0]))
    array([2., 2.])
    """
    m = _order(m, "polyder", "derivative")
    p = _coefficients(p, "polyder")
    for _ in range(m):
        n = shape_of(p)[0] - 1
        p = multiply(getitem(p, slice(None, -1)), np.arange(n, 0, -1))
    return p


@implements(np.polyint)
def polyint(p, m: int = 1, k=None):
    """``np.polyint``: the coefficients of the ``m``-th antiderivative, the integration
    constants ``k`` (zeros by default; one for all orders, or one per order) last;
    differentiable in ``p`` and ``k``.

    >>> polyint(np.array([3.0, 2.0]), k=1.0)
    array([1.5, 2. , 1. ])
    """
    m = _order(m, "polyint", "integral")
    k = np.zeros(m) if k is None else _coefficients(k, "polyint")
    if shape_of(k)[0] == 1 and m > 1:
        k = multiply(getitem(k, 0), np.ones(m))
    if shape_of(k)[0] < m:
        raise TensorShapeError("polyint: k must be a scalar or a rank-1 array of length 1 or "
                               f">m, got length {shape_of(k)[0]} for m={m}")
    p = _coefficients(p, "polyint") if m else _array(p, "polyint")
    for i in range(m):
        n = shape_of(p)[0]
        p = concatenate([divide(p, np.arange(n, 0, -1)), reshape(getitem(k, i), (1,))])
    return p
