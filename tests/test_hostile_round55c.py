"""Hostile round 55c: dtypes and precision across the NumPy tensor set (float16, float32,
complex64, integer and bool inputs, mixed dtypes, Python scalars)."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import TensorShapeError, TensorTypeError
from tidu import TiduError

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


def _augmented(op: str, x, y):
    """``x op= y`` on a fresh local name (so no other holder refuses it)."""
    z = x * 1
    if op == "+=":
        z += y
    elif op == "-=":
        z -= y
    elif op == "*=":
        z *= y
    elif op == "/=":
        z /= y
    else:
        z **= y
    return z


UPDATES = [(op, y) for op in ("+=", "-=", "*=", "/=", "**=")
           for y in (np.full(3, 0.5), np.float64(0.5), np.array(0.5), 0.5)]


# Was wrong: x op= y on a float32 tensor or traced value rebound x to the promoted x op y, so
# float32 `x *= np.float64(0.5)` (or `+= a float64 array`) turned the rest of the program
# float64, where NumPy's in-place update keeps x's dtype (PyTorch's too).
@pytest.mark.parametrize("op,y", UPDATES)
@pytest.mark.parametrize("transform", ["tensor", "jit", "vjp", "vmap"])
def test_augmented_assignment_keeps_the_dtype_as_numpy(op: str, y, transform: str) -> None:
    """``x op= y`` has the dtype and values NumPy's in-place update gives."""
    x = np.array([1.0, 2.0, 4.0], np.float32)
    want = _augmented(op, x.copy(), y)
    assert want.dtype == np.float32
    if transform == "tensor":
        leaf = tnp.tensor(x, requires_grad=True)
        got = _augmented(op, leaf, y)
        tnp.sum(got).backward()
        assert leaf.grad.dtype == np.float32
        got = got.data
    elif transform == "jit":
        got = tnp.jit(lambda a: _augmented(op, a, y))(x)
    elif transform == "vjp":
        got, vjp_fn = tnp.vjp(lambda a: _augmented(op, a, y), x)
        assert vjp_fn(np.ones(3, np.float32))[0].dtype == np.float32
    else:
        got = tnp.vmap(lambda a: _augmented(op, a, y))(np.stack([x, x]))[1]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6)


# Was wrong: where NumPy's in-place update refuses (a complex result into a real x, a float
# result into an int x, a result broadcast wider than x), x op= y silently made the new
# dtype or shape.
@pytest.mark.parametrize("x,y,error", [
    (np.ones(3, np.float32), 1j, TensorTypeError),
    (np.ones(3, np.float64), np.ones(3, np.complex64), TensorTypeError),
    (np.ones(3, np.float64), np.ones((2, 3)), TensorShapeError),
])
@pytest.mark.parametrize("transform", ["tensor", "jit"])
def test_augmented_assignment_refuses_what_numpy_refuses(x, y, error, transform) -> None:
    """A ``TensorTypeError`` / ``TensorShapeError`` naming the update, as NumPy raises."""
    with pytest.raises((TypeError, ValueError)):
        _augmented("+=", x.copy(), y)
    with pytest.raises(error, match=r"x \+= y"):
        if transform == "tensor":
            _augmented("+=", tnp.tensor(x, requires_grad=True), y)
        else:
            tnp.jit(lambda a: _augmented("+=", a, y))(x)


def test_augmented_true_division_of_integers_is_refused_as_numpy() -> None:
    """``i /= 2`` on an integer tensor: NumPy cannot cast the float64 quotient back."""
    with pytest.raises(TensorTypeError, match="same_kind"):
        _augmented("/=", tnp.tensor(np.arange(3)), 2)


PRODUCTS_WITH_A_NUMBER = {
    "dot": lambda lib, x, c: lib.dot(x, c),
    "dot-left": lambda lib, x, c: lib.dot(c, x),
    "tensordot": lambda lib, x, c: lib.tensordot(x, c, axes=0),
    "einsum": lambda lib, x, c: lib.einsum("i,->i", x, c),
}


# Was wrong: dot, tensordot and einsum took a Python number as a weak scalar (float32 stayed
# float32), where NumPy converts it to an array first, as tnp's inner, vdot, kron and cross
# already did: np.dot(float32_array, 1.5) is float64.
@pytest.mark.parametrize("name", list(PRODUCTS_WITH_A_NUMBER))
@pytest.mark.parametrize("number", [1.5, 2, True, 2j, np.float32(2.0)])
def test_products_take_python_numbers_as_numpy_arrays(name: str, number) -> None:
    """The value's dtype is NumPy's; the float32 input's gradient stays float32."""
    fn = PRODUCTS_WITH_A_NUMBER[name]
    x = np.array([1.0, 2.0, 3.0], np.float32)
    want = fn(np, x, number)
    got = fn(tnp, x, number)
    assert got.dtype == want.dtype, (name, number, got.dtype, want.dtype)
    np.testing.assert_allclose(got, want)
    assert fn(tnp, tnp.tensor(x), number).dtype == want.dtype
    g = tnp.grad(lambda a: tnp.sum(tnp.real(fn(tnp, a, number))))(x)
    assert g.dtype == np.float32


# Was wrong: polyval started Horner's rule from x * 0, which makes a bool x int64, so a
# float32 polynomial at boolean points came back float64 (NumPy starts from zeros_like(x)).
@pytest.mark.parametrize("p_dtype", ["float32", "float16", "int64", "complex64"])
@pytest.mark.parametrize("x", [np.array([True, False]), np.array([1, 2], np.int8),
                               np.array([0.5, 2.0], np.float32), 2.0, 2, True],
                         ids=["bool", "int8", "float32", "float", "int", "pybool"])
def test_polyval_has_numpy_dtype(p_dtype: str, x) -> None:
    """``polyval``'s value has NumPy's dtype and values for every pairing of dtypes."""
    p = np.array([1.5, 2.0, 3.0]).astype(p_dtype) if p_dtype != "int64" \
        else np.array([1, 2, 3])
    want, got = np.polyval(p, x), tnp.polyval(p, x)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-3)


# Was wrong: a function that returns a new array of its input's values when there is
# nothing to reduce (sum, max, min, amax, amin, nanmax, nanmin, ptp, conj, positive) raised
# AttributeError ("'float' object has no attribute 'copy'") for a Python number, which
# NumPy takes as a 0-d array: np.sum(2.5), np.max(3), np.conj(2.5).
@pytest.mark.parametrize("name", ["sum", "max", "min", "amax", "amin", "nanmax", "nanmin",
                                  "ptp", "conj", "conjugate", "positive", "nansum", "prod"])
@pytest.mark.parametrize("number", [3, 2.5, -1.5j, True], ids=["int", "float", "complex", "bool"])
def test_reductions_of_a_python_number_as_numpy(name: str, number) -> None:
    """The value and dtype are NumPy's, and the result is a new array."""
    if (name, type(number)) in {("ptp", complex), ("conj", bool), ("conjugate", bool),
                                ("positive", bool), ("ptp", bool)}:
        pytest.skip("tidu refuses complex ptp; NumPy's conj of a bool is int8 and its "
                    "positive and ptp of a bool errors")
    want = getattr(np, name)(number)
    got = getattr(tnp, name)(number)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)
    x = np.float32(2.5)
    g = tnp.grad(lambda a: tnp.sum(tnp.real(getattr(tnp, name)(a * number if name != "ptp"
                                                                 else a))))(x)
    assert g.dtype == np.float32


# Was wrong: sum with nothing to reduce (axis=(), or a 0-d input) kept an int8/int16/int32/
# uint8 dtype, where NumPy's sum widens small integers to the platform's integer whatever
# the axes (only booleans were widened).
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "uint32", "bool"])
@pytest.mark.parametrize("call", [lambda lib, x: lib.sum(x, axis=()),
                                  lambda lib, x: lib.sum(x[0, 0]),
                                  lambda lib, x: lib.sum(x, axis=(), keepdims=True),
                                  lambda lib, x: lib.nansum(x, axis=())],
                         ids=["axis=()", "0-d", "keepdims", "nansum"])
def test_sum_of_small_integers_widens_as_numpy(dtype: str, call) -> None:
    """``sum``'s dtype is NumPy's, eagerly, on a tensor and under ``jit``."""
    x = np.array([[1, 2], [3, 4]]).astype(dtype)
    want = call(np, x)
    for got in (call(tnp, x), call(tnp, tnp.tensor(x)).data,
                tnp.jit(lambda a: call(tnp, a))(x)):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want)


# Was wrong: negative, subtract and sign of booleans (a bool tensor, under jit, or x - y of
# two bool tensors) raised NumPy's own TypeError from inside the op, a plain TypeError
# naming no tnp function; NumPy refuses them too, so tidu refuses them with a TiduError.
@pytest.mark.parametrize("name,call", [
    ("negative", lambda x: tnp.negative(x)), ("negative", lambda x: -x),
    ("subtract", lambda x: tnp.subtract(x, x)), ("subtract", lambda x: x - True),
    ("sign", lambda x: tnp.sign(x))])
@pytest.mark.parametrize("transform", ["eager", "tensor", "jit"])
def test_boolean_arithmetic_numpy_refuses_is_a_tidu_error(name: str, call,
                                                          transform: str) -> None:
    """A ``TensorTypeError`` naming the function."""
    b = np.array([True, False])
    with pytest.raises(TiduError, match=name):
        if transform == "eager":
            getattr(tnp, name)(*([b, b] if name == "subtract" else [b]))
        elif transform == "tensor":
            call(tnp.tensor(b))
        else:
            tnp.jit(call)(b)


# Was wrong: mean (and average, which calls it) of float16 summed in float16, so the mean of
# 1e5 ones was inf (the float16 sum overflows at 65504); NumPy sums float16 in float32 and
# casts the mean back to float16 (so do JAX and PyTorch).
@pytest.mark.parametrize("make", [lambda: np.ones(100_000, np.float16),
                                  lambda: np.random.default_rng(0).uniform(0, 2, (300, 400))
                                  .astype(np.float16)], ids=["ones", "uniform"])
@pytest.mark.parametrize("kwargs", [{}, {"axis": 0}, {"keepdims": True}],
                         ids=["all", "axis0", "keepdims"])
def test_float16_mean_uses_numpy_float32_intermediates(make, kwargs: dict) -> None:
    """``mean`` of float16 equals NumPy's bit for bit (eager, jit, tensor); float16 grad."""
    x = make()
    want = np.mean(x, **kwargs)
    for got in (tnp.mean(x, **kwargs), tnp.jit(lambda a: tnp.mean(a, **kwargs))(x),
                tnp.mean(tnp.tensor(x), **kwargs).data):
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(tnp.average(x, axis=kwargs.get("axis")),
                                  np.average(x, axis=kwargs.get("axis")))
    g = tnp.grad(lambda a: tnp.sum(tnp.mean(a, **kwargs)))(x)
    assert g.dtype == np.float16 and np.isfinite(g).all()
