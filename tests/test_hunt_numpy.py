"""Regressions found by a hostile sweep of the NumPy surface (``primitives/tensor/numpy``
and ``primitives/tensor/ops``): each test failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from tidu import TiduError


# --- all / any: defined on empty slices ----------------------------------------------------


@pytest.mark.parametrize("shape, axis", [((0, 3), None), ((0, 3), 0), ((0, 3), 1), ((2, 0), 1),
                                         ((2, 0), (0, 1))])
@pytest.mark.parametrize("name", ["all", "any"])
def test_all_and_any_of_an_empty_slice_are_numpys(name, shape, axis):
    x = np.zeros(shape)
    want = getattr(np, name)(x, axis=axis, keepdims=True)
    for got in (getattr(tnp, name)(x, axis=axis, keepdims=True),
                tnp.jit(lambda v: getattr(tnp, name)(v, axis=axis, keepdims=True))(x)):
        got = np.asarray(got)
        assert got.dtype == np.bool_ and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_all_and_any_still_read_the_values():
    x = np.array([[1.0, 0.0], [2.0, -3.0]])
    for axis in (None, 0, -1):
        np.testing.assert_array_equal(tnp.all(x, axis=axis), np.all(x, axis=axis))
        np.testing.assert_array_equal(tnp.any(x * 0, axis=axis), np.any(x * 0, axis=axis))
        np.testing.assert_array_equal(tnp.any(x, axis=axis), np.any(x, axis=axis))


# --- array(tensor) copies, as np.array does -------------------------------------------------


def test_array_of_a_tensor_is_a_new_tensor_whose_data_is_its_own():
    a = tnp.tensor(np.arange(3.0), requires_grad=True)
    for b in (tnp.array(a), tnp.array(a, dtype=np.float64), tnp.asarray(a, copy=True)):
        assert b is not a
        b.data += 10.0
        np.testing.assert_array_equal(a.detach(), np.arange(3.0))
    y = tnp.sum(tnp.array(a) * tnp.array(a))
    np.testing.assert_array_equal(y.backward().grad(a), 2 * np.arange(3.0))
    assert tnp.asarray(a) is a                       # asarray does not copy


# --- integer ** negative integer: no wrap-around --------------------------------------------


def test_integer_power_with_a_large_negative_exponent_is_not_wrapped():
    i = np.array([1, -2, 3, 5])
    got = tnp.power(i, -300)
    want = 1.0 / i.astype(np.float64) ** 300           # 3**300 wraps in int64
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(tnp.jit(lambda v: v ** -41)(i), 1.0 / i.astype(float) ** 41)


# --- boolean masks of the wrong shape are refused, as NumPy does ---------------------------


@pytest.mark.parametrize("key", [
    (Ellipsis, np.array([True, False])),
    (slice(None), np.array([True, False])),
    np.array([[True, False], [False, True]]),
    np.array([True, False, True]),
    (Ellipsis, np.ones((2, 4), bool)),
], ids=["ellipsis-short", "slice-short", "2d-short", "long", "2d-after-ellipsis"])
def test_a_boolean_mask_that_does_not_match_its_axes_raises(key):
    x = np.arange(24.0).reshape(2, 3, 4)
    with pytest.raises(IndexError):
        x[key]
    for index in (lambda v: tnp.getitem(v, key), lambda v: tnp.tensor(v)[key]):
        with pytest.raises(TiduError, match="boolean index did not match"):
            index(x)


@pytest.mark.parametrize("key", [
    (Ellipsis, np.array([True, False, True, True])),
    (0, np.ones((3, 4), bool)),
    (slice(None), np.zeros((0, 4), bool)),             # a length-0 mask axis: NumPy's pass
    (np.array([True, False]), Ellipsis, np.array([1, 0])),
])
def test_a_matching_boolean_mask_still_selects_and_differentiates(key):
    x = np.arange(24.0).reshape(2, 3, 4)
    want = x[key]
    np.testing.assert_array_equal(tnp.getitem(x, key), want)
    g = tnp.grad(lambda v: tnp.sum(tnp.getitem(v, key) * 2.0))(x)
    expected = np.zeros_like(x)
    np.add.at(expected.reshape(-1), np.arange(x.size).reshape(x.shape)[key].reshape(-1), 2.0)
    np.testing.assert_array_equal(g, expected)


# --- clip takes NumPy 2's min= / max= (ndarray.clip's names) -------------------------------


def test_clip_takes_min_and_max_keywords_as_numpy_and_the_method():
    x = np.array([-1.0, 0.5, 2.0])
    np.testing.assert_array_equal(tnp.clip(x, max=1.0), np.clip(x, max=1.0))
    np.testing.assert_array_equal(np.clip(tnp.tensor(x), min=0.0).detach(), np.clip(x, min=0.0))
    np.testing.assert_array_equal(tnp.tensor(x).clip(max=0.0).detach(), x.clip(max=0.0))
    np.testing.assert_array_equal(tnp.grad(lambda v: tnp.sum(v.clip(min=0.0, max=1.0)))(x),
                                  [0.0, 1.0, 0.0])
    with pytest.raises(TiduError, match="clip"):
        tnp.clip(x, 0.0, min=1.0)


# --- `value in x` is NumPy's (x == value).any() ------------------------------------------


def test_in_compares_elementwise_as_numpy():
    x = np.arange(6.0).reshape(2, 3)
    t = tnp.tensor(x, requires_grad=True)
    for value in (np.array([0.0, 1.0, 2.0]), np.array([7.0, 8.0, 9.0]), 4.0, 9.0):
        assert (value in t) == (value in x)


# --- p-norms (p > 1) have derivative 0 at the zero vector, as the 2-norm ------------------


@pytest.mark.parametrize("order", [1.5, 3, 4])
def test_p_norm_derivative_at_the_zero_vector_is_zero_not_nan(order):
    torch = pytest.importorskip("torch", reason="PyTorch is the reference for the subgradient")
    for x in (np.zeros(3), np.array([0.0, 1.0, -2.0]), np.array([0.3, 1.0, -2.0])):
        got = tnp.grad(lambda a: tnp.linalg.norm(a, order))(x)
        t = torch.tensor(x, requires_grad=True)
        torch.linalg.vector_norm(t, order).backward()
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-12, atol=0)
        np.testing.assert_allclose(tnp.linalg.norm(x, order), np.linalg.norm(x, order),
                                   rtol=1e-12)
    rows = np.array([[0.0, 0.0], [3.0, 4.0]])
    np.testing.assert_array_equal(tnp.vmap(tnp.grad(lambda a: tnp.linalg.norm(a, order)))(rows)[0],
                                  [0.0, 0.0])


# --- pad keeps the array's dtype; average of integers is in float64 (NumPy's dtypes) -------


@pytest.mark.parametrize("x", [np.array([[1, 2], [3, 4]]), np.array([True, False]),
                               np.array([1.0, 2.0], np.float32), np.array([1, 2], np.uint8)],
                         ids=["int64", "bool", "float32", "uint8"])
@pytest.mark.parametrize("value", [1.5, 2, np.float64(2.5), True])
def test_pad_casts_the_constant_to_the_arrays_dtype(x, value):
    want = np.pad(x, 1, constant_values=value)
    got = np.asarray(tnp.pad(x, 1, constant_values=value))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_pad_with_a_constant_still_differentiates():
    got = tnp.grad(lambda a: tnp.sum(tnp.pad(a, (1, 2), constant_values=2.5) ** 2))(
        np.array([1.0, -2.0]))
    np.testing.assert_array_equal(got, [2.0, -4.0])


@pytest.mark.parametrize("a", [np.array([1, 2, 3], np.int8), np.array([True, False, True])],
                         ids=["int8", "bool"])
def test_average_of_integers_with_float32_weights_is_float64(a):
    w = np.array([1.0, 2.0, 3.0], np.float32)
    want, got = np.average(a, weights=w), tnp.average(a, weights=w)
    assert np.asarray(got).dtype == np.asarray(want).dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12)


# --- comparisons with a Python int beyond the integer dtype: NumPy 2's exact answer --------


@pytest.mark.parametrize("name", ["equal", "not_equal", "less", "less_equal", "greater",
                                  "greater_equal"])
def test_comparing_an_integer_array_to_an_out_of_range_int_is_exact(name):
    arrays = [np.array([1, -2, 3], np.int8), np.array([0, 200], np.uint8),
              np.array([1, 2 ** 62]), np.array([1, 2 ** 63 + 5], np.uint64)]
    for a in arrays:
        for number in (300, -300, 2 ** 70, -(2 ** 70), 5):
            for args in ((a, number), (number, a)):
                want = getattr(np, name)(*args)
                swapped = args[0] is not a                    # (number, a)
                traced = tnp.jit(lambda v, n=number, swapped=swapped:
                                 getattr(tnp, name)(*((n, v) if swapped else (v, n))))(a)
                for got in (getattr(tnp, name)(*args), traced):
                    assert np.asarray(got).dtype == np.bool_
                    np.testing.assert_array_equal(got, want)


# --- an error never points to a tnp name that is NumPy's own function ----------------------


@pytest.mark.parametrize("name", ["geomspace", "logspace"])
def test_a_reexported_numpy_function_is_not_suggested_as_the_differentiable_one(name):
    # NumPy's own, re-exported (its dtype argument read first: any library's dtype)
    assert getattr(tnp, name).__wrapped__ is getattr(np, name)
    with pytest.raises(TiduError, match=f"numpy.{name}") as raised:
        tnp.grad(lambda a: tnp.sum(getattr(tnp, name)(a, 8.0, 4)))(1.0)
    assert f"use tnp.{name}" not in str(raised.value)
    from primitives.tensor.numpy import dispatch
    assert {"linspace", "sum", "linalg.det"} <= dispatch._NAMES    # tnp's own are still named
    assert name not in dispatch._NAMES


def test_clip_of_integers_by_bounds_beyond_the_dtype_is_numpys():
    a = np.array([1, 100, -5], np.int8)
    for low, high in ((0, 300), (-300, 50), (-300, 300)):
        got = tnp.clip(a, low, high)
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, np.clip(a, low, high))
    for low, high in ((0, -300), (300, 400)):               # NumPy: OverflowError
        with pytest.raises(TiduError, match=r"clip: a_m(in|ax)=-?300 is out of the range"):
            tnp.clip(a, low, high)
