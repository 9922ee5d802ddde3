"""Polynomials with NumPy's names that need ``linalg``: ``polyfit``, ``roots``, ``poly`` and
``polydiv`` (``polyval``, ``polyadd``... are in :mod:`.mathfuncs` and :mod:`.products`).

``polyfit`` is a least-squares solve (``pinv``), differentiable in ``x``, ``y`` and ``w`` at
constant rank, under ``jit`` and ``vmap`` too. ``roots`` strips leading and trailing zero
coefficients and ``polydiv`` the remainder's leading near-zeros, as NumPy does, so they read
the values (a ``ConcretizationError`` under ``jit`` and ``vmap``); the roots are the
eigenvalues of the companion matrix, differentiable where they are simple.

It imports :mod:`.lowering`, :mod:`.indexing`, :mod:`.manipulation`, :mod:`.products` and
:mod:`.linalg` (and :mod:`.dispatch`), of the NumPy package.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.polyfit(np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, 5.0]), 1).round(12)
array([2., 1.])
"""

from __future__ import annotations

import builtins
import warnings

import numpy as np

from primitives.tensor.backends import library_of, to_host
from primitives.tensor.core import bind, data_if_known, data_of, dtype_of, shape_of
from primitives.tensor.errors import TensorShapeError, TensorTypeError
from primitives.tensor.numpy.dispatch import implements
from primitives.tensor.numpy.indexing import getitem
from primitives.tensor.numpy.lowering import (add, as_dtype, concatenate, conj,
                                              constant_in_library_of, divide, greater, max,
                                              multiply, negative, new_value, operand, real,
                                              reshape,
                                              result_dtype, sqrt, stack, stop_gradient,
                                              subtract, sum, transpose)
from primitives.tensor.numpy.linalg import _matrices, eigvals, inv, pinv, svdvals
from primitives.tensor.numpy.manipulation import vander
from primitives.tensor.numpy.products import convolve, matmul
from primitives.tensor.ops.linalg import Eig

__all__ = ["polyfit", "roots", "poly", "polydiv"]


def _inexact(x, fn: str):
    """``x + 0.0`` as NumPy's polynomial functions make it: integers become float64."""
    x = operand(x, fn)
    return x if dtype_of(x).kind in "fc" else as_dtype(x, np.float64)


def _read(x, fn: str, why: str) -> np.ndarray:
    return to_host(data_of(x, f"{fn}: reading the values ({why})"))


@implements(np.polyfit)
def polyfit(x, y, deg, rcond=None, full: bool = False, w=None, cov=False):
    """``np.polyfit``: the least-squares polynomial of degree ``deg`` through ``(x, y)``
    (``y`` 2-d: one fit per column), highest power first; weights ``w`` multiply the
    residuals. ``full`` also returns ``(residuals, rank, singular_values, rcond)``, ``cov``
    the coefficients' covariance. Differentiable in ``x``, ``y`` and ``w`` (the minimum-norm
    solution ``pinv(V) @ y``, at constant rank); ``full`` reads the rank (whether residuals
    are returned depends on it), a ``ConcretizationError`` under ``jit``.

    >>> import primitives.tensor as tnp
    >>> x = np.array([0.0, 1.0, 2.0, 3.0])
    >>> tnp.grad(lambda y: polyfit(x, y, 1)[0])(x ** 2).round(12)      # the slope's weights
    array([-0.3, -0.1,  0.1,  0.3])
    """
    fn = "polyfit"
    order = int(deg) + 1
    x, y = _inexact(x, fn), _inexact(y, fn)
    if deg < 0:
        raise TensorShapeError(f"{fn}: expected deg >= 0")
    if len(shape_of(x)) != 1:
        raise TensorTypeError(f"{fn}: expected 1D vector for x")
    if shape_of(x)[0] == 0:
        raise TensorTypeError(f"{fn}: expected non-empty vector for x")
    if len(shape_of(y)) not in (1, 2):
        raise TensorTypeError(f"{fn}: expected 1D or 2D array for y")
    if shape_of(x)[0] != shape_of(y)[0]:
        raise TensorTypeError(f"{fn}: expected x and y to have same length")
    n = shape_of(x)[0]
    if rcond is None:
        rcond = n * np.finfo(dtype_of(x)).eps
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = _inexact(w, fn)
        if len(shape_of(w)) != 1:
            raise TensorTypeError(f"{fn}: expected a 1-d array for weights")
        if shape_of(w)[0] != n:
            raise TensorTypeError(f"{fn}: expected w and y to have the same length")
        # NumPy weighs in place (lhs *= w): the products keep lhs's and rhs's own dtypes
        lhs = as_dtype(multiply(lhs, reshape(w, (n, 1))), dtype_of(lhs))
        weighted = multiply(rhs, reshape(w, (n, 1)) if len(shape_of(rhs)) == 2 else w)
        rhs = as_dtype(weighted, dtype_of(rhs))
    scale = sqrt(sum(multiply(lhs, lhs), axis=0))
    lhs = divide(lhs, scale)
    scaled_vander = lhs                   # in x's dtype: the covariance's (real for real x)
    dtype = result_dtype(lhs, rhs)
    lhs, rhs = as_dtype(lhs, dtype), as_dtype(rhs, dtype)
    singular = svdvals(lhs)
    rank = as_dtype(sum(greater(singular, multiply(max(singular), rcond))), np.int32)
    solution = matmul(pinv(lhs, rcond), rhs)
    c = transpose(divide(transpose(solution), scale))
    known_rank = data_if_known(rank)
    if known_rank is not None and library_of(known_rank).name != "dask" and \
            int(to_host(known_rank)) != order and not full:
        warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning,
                      stacklevel=2)
    if full:
        full_rank = int(_read(rank, fn, "whether the residuals are returned depends on the "
                                        "rank")) == order
        residuals = _residuals(lhs, rhs, solution) if full_rank and n > order else \
            constant_in_library_of(np.array([], np.finfo(dtype).dtype), lhs)
        return c, residuals, rank, singular, rcond
    if not cov:
        return c
    base = inv(matmul(transpose(scaled_vander), scaled_vander))
    base = divide(base, multiply(reshape(scale, (-1, 1)), reshape(scale, (1, -1))))
    if cov == "unscaled":
        factor = 1
    else:
        if n <= order:
            raise TensorShapeError(f"{fn}: the number of data points must exceed order to "
                                   "scale the covariance matrix")
        factor = divide(_residuals(lhs, rhs, solution), n - order)
    if len(shape_of(y)) == 1:
        return c, multiply(base, factor)
    return c, multiply(reshape(base, shape_of(base) + (1,)), factor)


def _residuals(lhs, rhs, solution):
    """``np.linalg.lstsq``'s residuals: the squared norm of each column's misfit (shape
    ``(1,)`` for a 1-d ``rhs``)."""
    misfit = subtract(rhs, matmul(lhs, solution))
    squares = sum(real(multiply(conj(misfit), misfit)), axis=0)
    return reshape(squares, (1,)) if len(shape_of(rhs)) == 1 else squares


def _coefficients(p, fn: str):
    p = operand(p, fn)
    if len(shape_of(p)) == 0:
        p = reshape(p, (1,))
    if len(shape_of(p)) != 1:
        raise TensorShapeError(f"{fn}: Input must be a rank-1 array, got shape {shape_of(p)}")
    return p


@implements(np.roots)
def roots(p):
    """``np.roots``: the roots of the polynomial with coefficients ``p`` (highest power
    first), the eigenvalues of its companion matrix; leading zeros are dropped and trailing
    ones give roots at 0, read from the values (under ``jit``: ``ConcretizationError``).
    Differentiable where the roots are simple (``linalg.eigvals``' derivative).

    >>> roots(np.array([1.0, -3.0, 2.0]))
    array([2., 1.])
    """
    fn = "roots"
    p = _coefficients(p, fn)
    nonzero = np.flatnonzero(_read(p, fn, "leading and trailing zero coefficients are dropped: "
                                          "the number of roots depends on them"))
    if not nonzero.size:
        return constant_in_library_of(np.array([]), p)
    trailing = shape_of(p)[0] - int(nonzero[-1]) - 1
    p = getitem(p, slice(int(nonzero[0]), None))
    if dtype_of(p).kind not in "fc":
        p = as_dtype(p, np.float64)
    found = _companion_eigvals(getitem(p, slice(0, shape_of(p)[0] - trailing)))
    if not trailing:
        return found
    values = concatenate([found, constant_in_library_of(np.zeros(trailing, dtype_of(found)), p)])
    return _with_trailing_derivatives(values, p, fn)


def _companion_eigvals(p):
    """The eigenvalues of the companion matrix of ``p`` (its first entry nonzero)."""
    n = shape_of(p)[0]
    if n < 2:
        return constant_in_library_of(np.array([], dtype_of(p)), p)
    top = reshape(negative(divide(getitem(p, slice(1, None)), getitem(p, 0))), (1, n - 1))
    below = constant_in_library_of(np.eye(n - 2, n - 1, dtype=dtype_of(p)), p)
    return eigvals(concatenate([top, below]))


def _with_trailing_derivatives(values, p, fn: str):
    """``values`` (NumPy's roots: those of ``p`` without its trailing zeros, then zeros) with
    the derivatives in all of ``p``: the trailing zero coefficients move the roots too (``p =
    [1, -3, 2, 0]``: the root 0 moves by ``-dp[-1] / 2``). They are those of the companion
    matrix of the whole ``p`` (JAX's ``roots``), its eigenvalues matched one to one to the
    nearest of ``values``, as ``values - (stop_gradient(e) - e)`` (``x - 0.0`` is ``x``, the
    sign of a zero too: the values stay NumPy's)."""
    known = _read(values, fn, "matching the roots")
    if not np.all(np.isfinite(known)):
        return values
    whole = _companion_eigvals(p)
    candidates = list(_read(whole, fn, "matching the roots"))
    order = []
    for value in known:                    # the nearest eigenvalue not matched yet
        unused = [i for i in builtins.range(len(candidates)) if i not in order]
        order.append(builtins.min(unused, key=lambda i: abs(candidates[i] - value)))
    moving = getitem(whole, np.array(order, np.intp))
    if dtype_of(values).kind != "c":
        moving = real(moving)              # (a real root's derivative is real)
    moving = as_dtype(moving, dtype_of(values))
    return subtract(stop_gradient(values), subtract(stop_gradient(moving), moving))


@implements(np.poly)
def poly(seq_of_zeros):
    """``np.poly``: the coefficients (highest power first, leading 1) of the polynomial with
    the given roots, or of a square matrix's characteristic polynomial (real for a real
    matrix); differentiable in them. Complex roots in conjugate pairs give real coefficients
    (NumPy's rule: it reads the roots, a ``ConcretizationError`` under ``jit`` for complex
    ones).

    >>> poly(np.array([1.0, 2.0]))
    array([ 1., -3.,  2.])
    """
    fn = "poly"
    zeros = _coefficients(seq_of_zeros, fn) if len(shape_of(operand(seq_of_zeros, fn))) < 2 \
        else operand(seq_of_zeros, fn)
    shape = shape_of(zeros)
    real_matrix = False
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        zeros = _matrices(zeros, "poly")
        real_matrix = dtype_of(zeros).kind != "c"
        # a real matrix's characteristic polynomial is real: its complex eigenvalues (LAPACK's
        # come in exact conjugate pairs) are not read for NumPy's real-or-complex rule
        [zeros] = bind(Eig(shape, dtype_of(zeros).name, compute_v=False), zeros)
    elif len(shape) == 1:
        zeros = as_dtype(zeros, np.mintypecode(dtype_of(zeros).char))
    else:
        raise TensorShapeError(f"{fn}: input must be 1d or non-empty square 2d array.")
    count = shape_of(zeros)[0]
    if count == 0:
        return 1.0
    dtype = dtype_of(zeros)
    one = constant_in_library_of(np.ones(1, dtype), zeros)
    coefficients = one
    for i in builtins.range(count):
        if dtype.kind == "c":     # (np.convolve's complex dot rounds as matmul's does)
            factor = concatenate([one, reshape(negative(getitem(zeros, i)), (1,))])
            coefficients = convolve(coefficients, factor)
            continue
        # convolve(coefficients, [1, -zero]) as np.convolve sums it: only the products of
        # overlapping terms (an infinite root meets no padding zero: no NaN), same roundings
        moved = multiply(negative(getitem(zeros, i)), coefficients)
        coefficients = concatenate([getitem(coefficients, slice(0, 1)),
                                    add(getitem(coefficients, slice(1, None)),
                                        getitem(moved, slice(0, -1))),
                                    getitem(moved, slice(-1, None))])
    if real_matrix:
        return real(coefficients)
    if dtype.kind == "c":
        values = _read(zeros, fn, "complex roots in conjugate pairs give real coefficients")
        values = values.astype(complex)
        if np.all(np.sort(values) == np.sort(values.conjugate())):
            coefficients = real(coefficients)
    return coefficients


@implements(np.polydiv)
def polydiv(u, v):
    """``np.polydiv``: the quotient and remainder of the polynomial division ``u / v``
    (highest power first), differentiable in both; the remainder's leading entries that are
    zero to NumPy's tolerance (``np.allclose(r[0], 0)``) are dropped, read from the values
    (under ``jit``: ``ConcretizationError``).

    >>> polydiv(np.array([1.0, -3.0, 2.0]), np.array([1.0, -1.0]))
    (array([ 1., -2.]), array([0.]))
    """
    fn = "polydiv"
    u, v = _coefficients(_inexact(u, fn), fn), _coefficients(_inexact(v, fn), fn)
    dtype = result_dtype(u, v)
    m, n = shape_of(u)[0] - 1, shape_of(v)[0] - 1
    if m < 0 or n < 0:
        raise TensorShapeError(f"{fn}: the coefficients must not be empty")
    # NumPy's steps bit for bit: 1 / v[0] in v's own dtype (rounded there: float16's or
    # float32's reciprocal), and each step changes only the window r[k:k + n + 1] (the
    # entries outside it never meet an inf or NaN step)
    scale = divide(1.0, getitem(v, 0))
    remainder = as_dtype(u, dtype)
    quotient = []
    for k in builtins.range(m - n + 1):
        step = multiply(scale, getitem(remainder, k))
        quotient.append(step)
        window = subtract(getitem(remainder, slice(k, k + n + 1)), multiply(step, v))
        remainder = concatenate([getitem(remainder, slice(0, k)), window,
                                 getitem(remainder, slice(k + n + 1, None))])
    quotient_steps = len(quotient)
    if quotient:
        quotient = stack(quotient)
    else:
        quotient = constant_in_library_of(np.zeros(1, dtype), u)
    values = _read(remainder, fn, "the remainder's leading zeros are dropped: its length "
                                  "depends on them")
    start = 0
    while np.allclose(values[start], 0, rtol=1e-14) and start < values.shape[0] - 1:
        start += 1
    remainder = getitem(remainder, slice(start, None))
    return quotient, remainder if quotient_steps else new_value(remainder)   # not a view of u
