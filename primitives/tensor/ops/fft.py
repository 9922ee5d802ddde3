"""Discrete Fourier transforms: ``fft`` (complex to complex), ``rfft`` and ``irfft``.

The transforms are linear, so each JVP applies the op to the tangent; each
transpose is the adjoint with respect to tidu's real inner product
``Re<a, b>`` (``docs/guides/complex-ad.md``), itself a transform. Sizes are
static: the NumPy-named functions (:mod:`primitives.tensor.numpy.fft`) pad or slice
the operand to the transform lengths first, so these ops never resize.

With ``F`` the unnormalized DFT over ``axes`` and ``N`` the product of their
lengths, the adjoint of ``F`` is ``conj(F) = N * ifft``: the adjoint of a
transform is the opposite one with the opposite ``norm`` ("backward" <->
"forward", "ortho" stays). For the real transforms the half spectrum counts
each bin other than DC and Nyquist twice, once for itself and once for its
conjugate mirror, so the adjoint of ``rfft`` is ``irfft`` after halving those
bins, and the adjoint of ``irfft`` is ``rfft`` doubling them
(:class:`HalfSpectrumWeight`). JAX's ``lax.fft`` has the same factors but
transposes with the bilinear pairing (no conjugation).

The ops compute with the Array API ``fft`` extension of their operand's
library. Dask transforms an axis only in one chunk: its entries rechunk the
transformed axes first (lazily).

>>> x = np.array([1.0, 2.0, 0.0, -1.0])
>>> Fft((0,), False, "backward").eval(None, [x.astype(complex)])[0]
array([2.+0.j, 1.-3.j, 0.+0.j, 1.+3.j])
>>> Rfft((0,), 4, "backward").eval(None, [x])[0]
array([2.+0.j, 1.-3.j, 0.+0.j])
>>> Irfft((0,), 4, "backward").eval(None, [np.array([2.0, 1 - 3j, 0.0])])[0]
array([ 1.,  2.,  0., -1.])

It imports :mod:`.base` only, of :mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tidu.graph import Local
from primitives.tensor.backends import NUMPY, define, device_of, operands
from primitives.tensor.core import dtype_of
from primitives.tensor.errors import TensorTypeError
from primitives.tensor.ops.base import LIN, LinearOp, OpParameterError, emit, shift_axis, tensor_op

NORMS = ("backward", "ortho", "forward")
ADJOINT_NORM = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _check_norm(op) -> None:
    if op.norm not in NORMS:
        raise OpParameterError(f"{op.name}: norm {op.norm!r} is not one of {NORMS}")


def _check_real_transform(op) -> None:
    """The real transforms halve ``axes[-1]``: one or more distinct axes."""
    _check_norm(op)
    if not op.axes or len(set(op.axes)) != len(op.axes):
        raise OpParameterError(f"{op.name}: axes {op.axes} must be distinct and not empty")


def _check_kind(op, x, kind: str) -> None:
    """Refuse an operand of the wrong kind: a real operand of a complex transform would get
    a complex cotangent (the promotion to complex, whose transpose takes the real part,
    belongs before the op)."""
    dtype = dtype_of(x)
    if dtype.kind != kind:
        wanted = "complex" if kind == "c" else "real floating-point"
        raise TensorTypeError(f"{op!r}: the operand must be {wanted}, got {dtype}")


def _dask_transform(name: str):
    """Dask's ``fft.<name>``, after rechunking the transformed axes to one chunk each."""
    def transform(x, s=None, axes=None, norm="backward"):
        import dask.array as da

        whole = x.rechunk({axis: -1 for axis in axes})
        return getattr(da.fft, name)(whole, s=s, axes=axes, norm=norm)
    return transform


for _name in ("fftn", "ifftn", "rfftn", "irfftn"):
    define(f"fft.{_name}", dask=_dask_transform(_name))


class _AxesTransform(LinearOp):
    """A transform along ``axes``, batched by renumbering them: the batch axis stays where
    it is."""

    __slots__ = ()

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        [axis] = axes
        moved = tuple(shift_axis(self, a, axis) for a in self.axes)
        batched = dataclasses.replace(self, axes=moved)
        return builder.add_primitive(batched, inputs, role), [axis]


@tensor_op
class Fft(_AxesTransform):
    """``np.fft.fftn`` (``ifftn`` if ``inverse``) over ``axes`` of a complex operand, without
    resizing. Transposes to the opposite transform with the adjoint ``norm``."""

    axes: tuple
    inverse: bool
    norm: str = "backward"
    name = "fft"

    def __post_init__(self):
        _check_norm(self)

    def params(self) -> str:
        return f"{'inverse, ' if self.inverse else ''}axes={self.axes}, norm={self.norm}"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        _check_kind(self, x, "c")
        transform = xp.fft.ifftn if self.inverse else xp.fft.fftn
        return [transform(x, axes=self.axes, norm=self.norm)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        adjoint = Fft(self.axes, not self.inverse, ADJOINT_NORM[self.norm])
        return [emit(builder, adjoint, [Local(cotangent_outputs[0])], LIN)]


@tensor_op
class Rfft(_AxesTransform):
    """``np.fft.rfftn`` over ``axes`` of a real operand whose last transformed axis has
    length ``n``: the half spectrum (``n // 2 + 1`` bins) along ``axes[-1]``."""

    axes: tuple
    n: int
    norm: str = "backward"
    name = "rfft"

    def __post_init__(self):
        _check_real_transform(self)

    def params(self) -> str:
        return f"axes={self.axes}, n={self.n}, norm={self.norm}"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        _check_kind(self, x, "f")
        return [xp.fft.rfftn(x, axes=self.axes, norm=self.norm)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        halved = emit(builder, HalfSpectrumWeight(self.axes[-1], self.n, 0.5),
                      [Local(cotangent_outputs[0])], LIN)
        adjoint = Irfft(self.axes, self.n, ADJOINT_NORM[self.norm])
        return [emit(builder, adjoint, [Local(halved)], LIN)]


@tensor_op
class Irfft(_AxesTransform):
    """``np.fft.irfftn`` over ``axes`` of a half spectrum (``n // 2 + 1`` bins along
    ``axes[-1]``) to a real result of length ``n`` there. As in NumPy, the imaginary
    parts of the DC and Nyquist bins are ignored."""

    axes: tuple
    n: int
    norm: str = "backward"
    name = "irfft"

    def __post_init__(self):
        _check_real_transform(self)

    def params(self) -> str:
        return f"axes={self.axes}, n={self.n}, norm={self.norm}"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        _check_kind(self, x, "c")
        lengths = [x.shape[a] for a in self.axes[:-1]] + [self.n]
        return [xp.fft.irfftn(x, s=lengths, axes=self.axes, norm=self.norm)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        adjoint = Rfft(self.axes, self.n, ADJOINT_NORM[self.norm])
        spectrum = emit(builder, adjoint, [Local(cotangent_outputs[0])], LIN)
        return [emit(builder, HalfSpectrumWeight(self.axes[-1], self.n, 2.0),
                     [Local(spectrum)], LIN)]


@tensor_op
class HalfSpectrumWeight(LinearOp):
    """Multiply the bins of a half spectrum along ``axis`` (of a length-``n`` signal) that
    stand for two bins of the full spectrum, all but DC and Nyquist, by ``factor``.
    A real diagonal map: its own transpose.

    >>> HalfSpectrumWeight(0, 4, 2.0).eval(None, [np.ones(3)])[0]
    array([1., 2., 1.])
    >>> HalfSpectrumWeight(0, 5, 2.0).eval(None, [np.ones(3)])[0]
    array([1., 2., 2.])
    """

    axis: int
    n: int
    factor: float
    name = "half_spectrum_weight"

    def eval(self, ctx, inputs):
        xp, (x,) = operands(inputs, self)
        paired = slice(1, (self.n + 1) // 2)
        if xp is NUMPY.xp:
            out = np.array(x, copy=True)
            out[(slice(None),) * self.axis + (paired,)] *= self.factor
            return [out]
        # other libraries: times a weight per bin, as exact (the factors are powers of 2)
        # and without writing into an array (Dask arrays are immutable)
        weights = np.ones(x.shape[self.axis], np.finfo(dtype_of(x)).dtype)
        weights[paired] = self.factor
        weights = weights.reshape((-1,) + (1,) * (x.ndim - self.axis - 1))
        return [x * xp.asarray(weights, device=device_of(x))]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return [emit(builder, self, [Local(cotangent_outputs[0])], LIN)]

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        [axis] = axes
        batched = dataclasses.replace(self, axis=shift_axis(self, self.axis, axis))
        return builder.add_primitive(batched, inputs, role), [axis]
