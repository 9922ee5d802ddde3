"""``numpy.fft`` with derivatives: the transforms are linear, so their JVPs are
themselves and their transposes are the adjoint transforms.

Each function has NumPy's ``n``/``s`` (zero-padding or truncating the input),
``axis``/``axes`` and ``norm`` ("backward", "ortho", "forward") and NumPy's
dtypes: real input is promoted to complex (float32 to complex64, integers to
complex128), ``irfft`` returns the real dtype. Gradients follow tidu's complex
convention (the adjoint under ``Re<a, b>``, the conjugate of JAX's): the
gradient of ``sum(abs(fft(x))**2)`` is ``2 * N * x``. The gradient of a real
input of ``rfft`` is real: each half-spectrum bin but DC and Nyquist stands for
two bins of the full spectrum, and the adjoint counts both.

It imports :mod:`.lowering` and :mod:`.indexing` (and :mod:`.dispatch`), of the NumPy
package, and the ``copy`` op of :mod:`primitives.tensor.ops.elementwise`.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.fft.fft(np.array([1.0, 0.0, 0.0, 0.0]))
array([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
>>> tnp.grad(lambda x: tnp.sum(tnp.real(tnp.fft.rfft(x))))(np.zeros(4))
array([3., 0., 1., 0.])
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

from primitives.tensor.backends import NUMPY, library_of
from primitives.tensor.core import Frontend, bind, dtype_of, shape_of
from primitives.tensor.errors import TensorShapeError, TensorTypeError
from primitives.tensor.numpy.dispatch import implements
from primitives.tensor.numpy.indexing import getitem
from primitives.tensor.numpy.lowering import (as_dtype, concatenate, conj, first, multiply, no_out,
                                              normalize_axis, operand)
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.fft import ADJOINT_NORM, NORMS, Fft, Irfft, Rfft
from primitives.tensor.ops.indexing import Pad, Slice

__all__ = [
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft",
    "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn",
    "fftshift", "ifftshift", "fftfreq", "rfftfreq",
]


# --- arguments ------------------------------------------------------------------------------


def _norm(norm, fn: str) -> str:
    if norm is None:
        return "backward"
    if norm not in NORMS:
        raise TensorShapeError(f'{fn}: invalid norm value {norm!r}; should be "backward", '
                               '"ortho" or "forward"')
    return norm


def _points(n, fn: str) -> int:
    """A transform length: a positive integer (NumPy refuses 0)."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TensorTypeError(f"{fn}: the number of FFT data points must be an integer, "
                              f"got {n!r}") from None
    if n < 1:
        raise TensorShapeError(f"{fn}: invalid number of FFT data points ({n}) specified")
    return n


def _nd_args(x, s, axes, fn: str, inverse_real: bool = False) -> tuple[list, list]:
    """NumPy's ``_cook_nd_args``: the axes (made non-negative) and a length per axis
    (``-1``: the input's length; ``None``, deprecated: the 1-D transform's default)."""
    shape = shape_of(x)
    if axes is None:
        if s is not None:
            warnings.warn(f"{fn}: `axes` should not be `None` if `s` is not `None` (deprecated "
                          "in NumPy 2.0): the last len(s) axes are transformed",
                          DeprecationWarning, stacklevel=3)
        axes = range(-len(s), 0) if s is not None else range(len(shape))
    axes = [normalize_axis(a, len(shape), fn) for a in axes]
    if s is None:
        lengths = [shape[a] for a in axes]
        if inverse_real and axes:
            lengths[-1] = 2 * (shape[axes[-1]] - 1)
    else:
        lengths = list(s)
        if len(lengths) != len(axes):
            raise TensorShapeError(f"{fn}: shape and axes have different lengths "
                                   f"({len(lengths)} and {len(axes)})")
        if None in lengths:
            warnings.warn(f"{fn}: `None` values in `s` are deprecated in NumPy 2.0",
                          DeprecationWarning, stacklevel=3)
        lengths = [shape[a] if n is not None and n == -1 else n for n, a in zip(lengths, axes)]
    return lengths, axes


def _resized(x, axis: int, n: int):
    """``x`` truncated or zero-padded to length ``n`` along ``axis``."""
    shape = shape_of(x)
    size = shape[axis]
    if size > n:
        limits = shape[:axis] + (n,) + shape[axis + 1:]
        return first(bind(Slice((0,) * len(shape), limits, (1,) * len(shape), shape), x))
    if size < n:
        high = tuple(n - size if a == axis else 0 for a in range(len(shape)))
        return first(bind(Pad((0,) * len(shape), high, (0,) * len(shape), shape), x))
    return x


def _length(x, axis: int, n, fn: str, half: bool = False) -> int:
    """The length ``n`` resolved (``None``: the input's length, or ``2 * (m - 1)`` for the
    half spectrum of an inverse real transform) and checked."""
    if n is None:
        m = shape_of(x)[axis]
        n = 2 * (m - 1) if half else m
    return _points(n, fn)


# --- the three kinds of transform -----------------------------------------------------------


def _complex_dtype(x) -> np.dtype:
    return np.result_type(dtype_of(x), 1j)


def _complex_to_complex(x, lengths, axes, norm: str, fn: str, inverse: bool = False):
    if not axes:                              # NumPy returns the input as it is
        return x
    x = as_dtype(x, _complex_dtype(x))
    if len(set(axes)) == len(axes):           # one op; the resizes commute with the transform
        for axis, n in zip(axes, lengths):
            x = _resized(x, axis, _length(x, axis, n, fn))
        return first(bind(Fft(tuple(axes), inverse, norm), x))
    for axis, n in reversed(list(zip(axes, lengths))):   # NumPy's order: an axis may repeat
        x = _resized(x, axis, _length(x, axis, n, fn))
        x = first(bind(Fft((axis,), inverse, norm), x))
    return x


def _real_to_complex(x, lengths, axes, norm: str, fn: str):
    if not axes:
        raise TensorShapeError(f"{fn}: at least one axis must be transformed")
    dtype = dtype_of(x)
    if dtype.kind == "c":
        raise TensorTypeError(f"{fn}: the input must be real, got {dtype} (as in NumPy); use "
                              "fft for complex input")
    x = as_dtype(x, np.finfo(_complex_dtype(x)).dtype)
    last = axes[-1]
    if len(set(axes)) == len(axes):
        for axis, n in zip(axes, lengths):
            x = _resized(x, axis, _length(x, axis, n, fn))
        return first(bind(Rfft(tuple(axes), shape_of(x)[last], norm), x))
    n = _length(x, last, lengths[-1], fn)
    x = first(bind(Rfft((last,), n, norm), _resized(x, last, n)))
    return _complex_to_complex(x, lengths[:-1], axes[:-1], norm, fn)


def _complex_to_real(x, lengths, axes, norm: str, fn: str):
    if not axes:
        raise TensorShapeError(f"{fn}: at least one axis must be transformed")
    dtype = dtype_of(x)
    real_dtype = np.result_type(np.finfo(dtype).dtype if dtype.kind == "c" else dtype, 1.0)
    x = as_dtype(x, _complex_dtype(x))
    last = axes[-1]
    distinct = len(set(axes)) == len(axes)
    if not distinct:
        for axis, m in zip(axes[:-1], lengths[:-1]):   # NumPy's order: an axis may repeat
            x = _complex_to_complex(x, [m], [axis], norm, fn, inverse=True)
    else:
        for axis, m in zip(axes[:-1], lengths[:-1]):
            x = _resized(x, axis, _length(x, axis, m, fn))
    n = _length(x, last, lengths[-1], fn, half=True)
    x = _resized(x, last, n // 2 + 1)
    x = first(bind(Irfft(tuple(axes) if distinct else (last,), n, norm), x))
    return as_dtype(x, real_dtype)


# --- one-dimensional ------------------------------------------------------------------------


def _inverse(x, lengths, axes, norm: str, fn: str):
    return _complex_to_complex(x, lengths, axes, norm, fn, inverse=True)


def _one_d(kind, fn: str, a, n, axis, norm, out, opposite_norm: bool = False):
    no_out(out, fn)
    norm = _norm(norm, fn)
    a = operand(a, fn)
    axis = normalize_axis(axis, len(shape_of(a)), fn)
    return kind(a, [n], [axis], ADJOINT_NORM[norm] if opposite_norm else norm, fn)


@implements(np.fft.fft)
def fft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.fft``, differentiable (real input promotes to complex)."""
    return _one_d(_complex_to_complex, "fft", a, n, axis, norm, out)


@implements(np.fft.ifft)
def ifft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.ifft``, differentiable (real input promotes to complex)."""
    return _one_d(_inverse, "ifft", a, n, axis, norm, out)


@implements(np.fft.rfft)
def rfft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.rfft`` of real input; its gradient is real (bins but DC/Nyquist count twice)."""
    return _one_d(_real_to_complex, "rfft", a, n, axis, norm, out)


@implements(np.fft.irfft)
def irfft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.irfft``: a real signal of length ``n`` (default ``2 * (m - 1)``) from a half
    spectrum; as in NumPy the imaginary parts of DC and Nyquist are ignored (zero gradient)."""
    return _one_d(_complex_to_real, "irfft", a, n, axis, norm, out)


@implements(np.fft.hfft)
def hfft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.hfft``: ``irfft(conj(a))`` with the opposite ``norm``, differentiable."""
    return _one_d(_complex_to_real, "hfft", conj(operand(a, "hfft")), n, axis, norm, out,
                  opposite_norm=True)


@implements(np.fft.ihfft)
def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """``np.fft.ihfft``: ``conj(rfft(a))`` with the opposite ``norm``, differentiable."""
    return conj(_one_d(_real_to_complex, "ihfft", a, n, axis, norm, out, opposite_norm=True))


# --- n-dimensional --------------------------------------------------------------------------


def _nd(kind, fn: str, a, s, axes, norm, out):
    no_out(out, fn)
    norm = _norm(norm, fn)
    a = operand(a, fn)
    lengths, axes = _nd_args(a, s, axes, fn, inverse_real=kind is _complex_to_real)
    return kind(a, lengths, axes, norm, fn)


@implements(np.fft.fftn)
def fftn(a, s=None, axes=None, norm=None, out=None):
    """``np.fft.fftn``, differentiable (real input promotes to complex)."""
    return _nd(_complex_to_complex, "fftn", a, s, axes, norm, out)


@implements(np.fft.ifftn)
def ifftn(a, s=None, axes=None, norm=None, out=None):
    """``np.fft.ifftn``, differentiable (real input promotes to complex)."""
    return _nd(_inverse, "ifftn", a, s, axes, norm, out)


@implements(np.fft.fft2)
def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """``np.fft.fft2``, differentiable (real input promotes to complex)."""
    return _nd(_complex_to_complex, "fft2", a, s, axes, norm, out)


@implements(np.fft.ifft2)
def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """``np.fft.ifft2``, differentiable (real input promotes to complex)."""
    return _nd(_inverse, "ifft2", a, s, axes, norm, out)


@implements(np.fft.rfftn)
def rfftn(a, s=None, axes=None, norm=None, out=None):
    """``np.fft.rfftn`` of real input (half spectrum along the last axis); real gradient."""
    return _nd(_real_to_complex, "rfftn", a, s, axes, norm, out)


@implements(np.fft.irfftn)
def irfftn(a, s=None, axes=None, norm=None, out=None):
    """``np.fft.irfftn``: the inverse of ``rfftn``, a real result, differentiable."""
    return _nd(_complex_to_real, "irfftn", a, s, axes, norm, out)


@implements(np.fft.rfft2)
def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """``np.fft.rfft2`` of real input; real gradient."""
    return _nd(_real_to_complex, "rfft2", a, s, axes, norm, out)


@implements(np.fft.irfft2)
def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """``np.fft.irfft2``: the inverse of ``rfft2``, a real result, differentiable."""
    return _nd(_complex_to_real, "irfft2", a, s, axes, norm, out)


# --- helpers: shifts and frequencies --------------------------------------------------------


def _roll(x, shifts: dict):
    """``x`` rolled by ``shifts[axis]`` along each axis (two slices concatenated); a new
    array even when nothing moves (a roll is a copy, as NumPy's: never ``x`` itself)."""
    rolled = False
    for axis, shift in shifts.items():
        size = shape_of(x)[axis]
        shift = shift % size if size else 0
        if shift:
            before = (slice(None),) * axis
            x = concatenate([getitem(x, before + (slice(size - shift, None),)),
                             getitem(x, before + (slice(0, size - shift),))], axis)
            rolled = True
    return x if rolled else first(bind(ew.copy, x))


def _shift(x, axes, fn: str, sign: int):
    x = operand(x, fn)
    shape = shape_of(x)
    if axes is None:
        axes = range(len(shape))
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    shifts: dict = {}
    for axis in axes:
        axis = normalize_axis(axis, len(shape), fn)
        shifts[axis] = shifts.get(axis, 0) + sign * (shape[axis] // 2)   # np.roll adds repeats
    return _roll(x, shifts)


@implements(np.fft.fftshift)
def fftshift(x, axes=None):
    """``np.fft.fftshift``: the zero frequency moved to the centre (a roll), differentiable."""
    return _shift(x, axes, "fftshift", 1)


@implements(np.fft.ifftshift)
def ifftshift(x, axes=None):
    """``np.fft.ifftshift``: the inverse of ``fftshift`` (a roll), differentiable."""
    return _shift(x, axes, "ifftshift", -1)


def _numpy_spacing(d) -> bool:
    """Whether NumPy's own frequency functions take ``d``: a number, a NumPy value, or a
    ``Tensor`` or traced value (NumPy's operators dispatch to tidu for those)."""
    return isinstance(d, Frontend) or library_of(d) is NUMPY


def fftfreq(n, d=1.0, device=None):
    """``np.fft.fftfreq``: sample frequencies, differentiable in ``d``. For a ``d`` of another
    array library the result is an array of it, on its device (``device`` is NumPy's)."""
    if _numpy_spacing(d):
        return np.fft.fftfreq(n, d, device=device)
    n = operator.index(n)
    k = np.concatenate([np.arange((n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return multiply(k, 1.0 / (n * d))           # NumPy's arithmetic, in d's library


def rfftfreq(n, d=1.0, device=None):
    """``np.fft.rfftfreq``: sample frequencies, differentiable in ``d``. For a ``d`` of another
    array library the result is an array of it, on its device (``device`` is NumPy's)."""
    if _numpy_spacing(d):
        return np.fft.rfftfreq(n, d, device=device)
    n = operator.index(n)
    return multiply(np.arange(n // 2 + 1), 1.0 / (n * d))
