"""Helpers shared by the tensor front-end tests."""

from __future__ import annotations

import numpy as np

from primitives import tensor as tnp

REAL = {np.dtype(np.complex128): np.float64, np.dtype(np.complex64): np.float32}


def realify(v):
    """The real part of ``v`` (a no-op on real values), through the module's ``astype``."""
    return tnp.astype(v, REAL[v.dtype]) if v.dtype in REAL else v


def abs2(v):
    """``|v|^2`` elementwise, real-valued."""
    return realify(v * tnp.conj(v))


def random(shape, dtype, rng):
    """Standard-normal values of ``shape`` and ``dtype`` (complex: both parts random)."""
    dtype = np.dtype(dtype)
    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)
