"""Hostile round 55c: dtypes and precision across the NumPy tensor set (float16, float32,
complex64, integer and bool inputs, mixed dtypes, Python scalars)."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import TensorShapeError, TensorTypeError

SMALL_INTS = ("int8", "uint8", "bool", "int16", "uint16", "int32", "int64")


def _ints(dtype: str) -> np.ndarray:
    """Small non-negative values of an integer or bool dtype."""
    return np.array([0, 1, 2, 3]).astype(dtype)


# Was wrong: exp, log, sin, cos, tanh and sqrt (the functions that are one op) turned every
# integer or bool input into float64, where NumPy (and tnp's other transcendental
# functions, sinh, arctan...) gives float16 for int8/uint8/bool and float32 for int16.
@pytest.mark.parametrize("name", ["exp", "log", "sin", "cos", "tanh", "sqrt", "sinh", "arctan"])
@pytest.mark.parametrize("dtype", SMALL_INTS)
@pytest.mark.parametrize("transform", ["eager", "jit", "tensor"])
def test_transcendental_of_integers_has_numpy_dtype(name: str, dtype: str,
                                                     transform: str) -> None:
    """The value's dtype is NumPy's for the same call."""
    x = _ints(dtype)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x)
        f = getattr(tnp, name)
        if transform == "eager":
            got = f(x)
        elif transform == "jit":
            got = tnp.jit(f)(x)
        else:
            got = f(tnp.tensor(x)).data
    assert got.dtype == want.dtype, (name, dtype, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


# Was wrong: nanmean of complex64 counted its entries in float64, so the mean (and its
# derivative's tangent) came back complex128, where NumPy keeps complex64.
@pytest.mark.parametrize("dtype", ["complex64", "complex128", "float16", "float32", "float64"])
@pytest.mark.parametrize("axis", [None, 0])
def test_nanmean_keeps_the_input_dtype(dtype: str, axis: int | None) -> None:
    """``nanmean``'s value, jitted value, gradient and tangent keep NumPy's dtypes."""
    x = (np.arange(6.0).reshape(2, 3) + 0.5).astype(dtype)
    x[0, 1] = np.nan
    want = np.nanmean(x, axis=axis)
    got = tnp.nanmean(x, axis=axis)
    assert got.dtype == want.dtype == x.dtype
    assert tnp.jit(lambda a: tnp.nanmean(a, axis=axis))(x).dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-3)
    g = tnp.grad(lambda a: tnp.sum(tnp.real(tnp.nanmean(a, axis=axis))))(x)
    assert g.dtype == x.dtype
    _, t = tnp.jvp(lambda a: tnp.nanmean(a, axis=axis), (x,), (np.ones_like(x),))
    assert t.dtype == want.dtype
