"""``scipy.signal``'s ``convolve`` and ``correlate`` with derivatives in both inputs.

N-dimensional, in SciPy's modes ``"full"``, ``"same"`` (the shape of ``in1``,
centred in the full result as SciPy centres it) and ``"valid"`` (where one input
covers the other; either may be the larger). ``method="direct"`` (and ``"auto"``)
computes each output as a dot product of a window of ``in1`` with the kernel: the
windows are one ``gather`` of the zero-padded ``in1`` (im2col) and the products one
matrix-vector product, so both inputs differentiate, to any order, under every
transform. ``method="fft"`` goes through ``tnp.fft`` (differentiable too; its values
differ from the direct sums by rounding, as SciPy's do). The result's dtype is
SciPy's (``result_type`` of the inputs; integers stay integers).

``correlate(in1, in2)`` is ``convolve(in1, in2[::-1, ...].conj())``: only ``in2`` is
conjugated, as in SciPy. Complex gradients follow tidu's convention.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> from primitives.tensor.scipy import signal
>>> signal.convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
array([0. , 1. , 2.5, 4. , 1.5])
>>> tnp.grad(lambda k: tnp.sum(signal.convolve(np.array([1.0, 2.0, 3.0]), k, "valid")))(
...     np.array([1.0, 1.0]))
array([5., 3.])
"""

from __future__ import annotations

import numpy as np

from primitives.tensor.core import shape_of
from primitives.tensor.errors import TensorShapeError, TensorTypeError
from primitives.tensor.numpy import fft as _fft
from primitives.tensor.numpy.indexing import getitem, take
from primitives.tensor.numpy.lowering import (
    as_dtype,
    conj,
    multiply,
    operand,
    real,
    reshape,
    result_dtype,
)
from primitives.tensor.numpy.manipulation import flip, pad
from primitives.tensor.numpy.mathfuncs import rint
from primitives.tensor.numpy.products import matmul

__all__ = ["convolve", "correlate"]

_MODES = ("full", "same", "valid")
_METHODS = ("auto", "direct", "fft")


def _inputs(in1, in2, mode: str, method: str, fn: str):
    if mode not in _MODES:
        raise TensorShapeError(f"signal.{fn}: Acceptable mode flags are 'valid', 'same', or "
                               f"'full', got {mode!r}")
    if method not in _METHODS:
        raise TensorShapeError(f"signal.{fn}: Acceptable method flags are 'auto', 'direct', or "
                               f"'fft', got {method!r}")
    in1, in2 = operand(in1, f"signal.{fn}"), operand(in2, f"signal.{fn}")
    dtype = result_dtype(in1, in2)
    if dtype.kind not in "biufcO":
        raise TensorTypeError(f"signal.{fn}: expected arrays of numbers, got dtype {dtype}")
    in1, in2 = as_dtype(in1, dtype), as_dtype(in2, dtype)
    s1, s2 = shape_of(in1), shape_of(in2)
    if len(s1) != len(s2):
        raise TensorShapeError(f"signal.{fn}: in1 and in2 should have the same dimensionality, "
                               f"got shapes {s1} and {s2}")
    if s1 and mode == "valid":
        if not (all(a >= b for a, b in zip(s1, s2)) or all(b >= a for a, b in zip(s1, s2))):
            raise TensorShapeError(f"signal.{fn}: For 'valid' mode, one must be at least as "
                                   f"large as the other in every dimension, got shapes {s1} "
                                   f"and {s2}")
    if s1 and (0 in s2 or (0 in s1 and mode != "same")):
        raise TensorShapeError(f"signal.{fn}: inputs cannot be empty, got shapes {s1} and {s2}")
    return in1, in2, dtype


def _output_window(s1: tuple, s2: tuple, mode: str) -> tuple:
    """Where the ``mode`` result lies in the full one: its start and length along each axis."""
    if mode == "full":
        return tuple(0 for _ in s1), tuple(a + b - 1 for a, b in zip(s1, s2))
    if mode == "same":
        return tuple((b - 1) // 2 for b in s2), s1
    return (tuple(min(a, b) - 1 for a, b in zip(s1, s2)),
            tuple(abs(a - b) + 1 for a, b in zip(s1, s2)))


def _windows(padded_shape: tuple, kernel_shape: tuple, starts: tuple, lengths: tuple):
    """For each output position ``n`` (rows, C order) and kernel position ``i`` (columns): the
    flat position of ``n + starts + i`` in the padded input."""
    ndim = len(padded_shape)
    strides = [int(np.prod(padded_shape[d + 1:], dtype=np.int64)) for d in range(ndim)]
    index = np.zeros((1,) * (2 * ndim), dtype=np.intp)
    for d in range(ndim):
        along_out = np.arange(lengths[d]).reshape([-1 if e == d else 1 for e in range(2 * ndim)])
        along_kernel = np.arange(kernel_shape[d]).reshape(
            [-1 if e == ndim + d else 1 for e in range(2 * ndim)])
        index = index + (along_out + along_kernel + starts[d]) * strides[d]
    return index.reshape(int(np.prod(lengths, dtype=np.int64)),
                         int(np.prod(kernel_shape, dtype=np.int64)))


def _direct(in1, weights, starts: tuple, lengths: tuple):
    """``out[n] = sum_i weights[i] * padded[n + starts + i]`` with ``in1`` zero-padded by the
    kernel's size less one on each side: the windows gathered (im2col), then one product."""
    kernel_shape = shape_of(weights)
    padded = pad(in1, [(k - 1, k - 1) for k in kernel_shape])
    index = _windows(shape_of(padded), kernel_shape, starts, lengths)
    columns = take(reshape(padded, (-1,)), index)
    return reshape(matmul(columns, reshape(weights, (-1,))), lengths)


def _by_fft(in1, kernel, starts: tuple, lengths: tuple, dtype):
    """The full convolution by ``tnp.fft``, cut to the window."""
    full = tuple(a + b - 1 for a, b in zip(shape_of(in1), shape_of(kernel)))
    axes = tuple(range(len(full)))
    product = multiply(_fft.fftn(in1, s=full, axes=axes), _fft.fftn(kernel, s=full, axes=axes))
    out = _fft.ifftn(product, s=full, axes=axes)
    if dtype.kind != "c":
        out = real(out)
        if dtype.kind in "iub":
            out = rint(out)
    window = tuple(slice(s, s + n) for s, n in zip(starts, lengths))
    return as_dtype(getitem(out, window), dtype)


def _empty(in1, lengths: tuple):
    """The empty result (``"same"`` mode of an empty ``in1``), of ``in1``'s library and dtype
    (a NumPy array would not be of a PyTorch input's library)."""
    return reshape(multiply(getitem(reshape(in1, (-1,)), slice(0, 0)), 0), lengths)


def _convolve(in1, kernel, mode: str, method: str, dtype):
    s1, s2 = shape_of(in1), shape_of(kernel)
    starts, lengths = _output_window(s1, s2, mode)
    if 0 in lengths:
        return _empty(in1, lengths)
    if method == "fft":
        return _by_fft(in1, kernel, starts, lengths, dtype)
    return _direct(in1, flip(kernel), starts, lengths)


def convolve(in1, in2, mode: str = "full", method: str = "auto"):
    """``scipy.signal.convolve``: the N-dimensional convolution of ``in1`` and ``in2`` (of one
    rank) in ``mode`` ``"full"``, ``"same"`` or ``"valid"``; differentiable in both.
    ``method`` ``"auto"`` and ``"direct"`` sum the products directly; ``"fft"`` uses
    ``tnp.fft``. 0-d inputs multiply.

    >>> convolve(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[1.0, -1.0]]), "same")
    array([[1., 1.],
           [3., 1.]])
    """
    in1, in2, dtype = _inputs(in1, in2, mode, method, "convolve")
    if not shape_of(in1):
        return multiply(in1, in2)
    return _convolve(in1, in2, mode, method, dtype)


def correlate(in1, in2, mode: str = "full", method: str = "auto"):
    """``scipy.signal.correlate``: ``z[k] = sum_l in1[l] * conj(in2[l - k + K - 1])`` (the
    N-dimensional cross-correlation; SciPy's offsets in each ``mode``), differentiable in
    both inputs; ``method`` as :func:`convolve`'s.

    >>> correlate(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
    array([0.5, 2. , 3.5, 3. , 0. ])
    """
    in1, in2, dtype = _inputs(in1, in2, mode, method, "correlate")
    in2 = conj(in2) if dtype.kind == "c" else in2
    if not shape_of(in1):
        return multiply(in1, in2)
    if method == "fft":
        return _convolve(in1, flip(in2), mode, method, dtype)
    starts, lengths = _output_window(shape_of(in1), shape_of(in2), mode)
    if 0 in lengths:
        return _empty(in1, lengths)
    return _direct(in1, in2, starts, lengths)          # the reversed kernel, reversed back
