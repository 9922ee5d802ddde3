"""Misuse and edge cases of the NumPy functions and the functional transforms: each is right
(checked against NumPy, JAX's rules or finite differences) or a ``TiduError`` naming the
function at fault, and the library works afterwards.

- NumPy functions tnp has no version of, with tensors nested in lists
  (``np.ravel_multi_index``):
  computed on the data when nothing carries a gradient, else refused;
- ``max``/``min`` with ``initial`` over empty axes (NumPy's value, not an error);
- the names tnp's made functions give in Python's own errors (``exp()``);
- dicts of mixed key types as pytrees;
- ``float()`` of a value ``stop_gradient`` returned, under ``grad`` (and still not under
  ``jit``/``vmap``);
- complex tangents and cotangents for real values (refused, as in JAX).
"""

from __future__ import annotations

import numpy as np
import pytest

import tidu
from primitives import tensor as tnp
from primitives.tensor import FunctionalError
from primitives.tensor.errors import (ConcretizationError, TensorNotSupportedError,
                                      TensorTypeError)
from primitives.tensor.transforms.pytree import tree_flatten


def _raises(error, fn, *names):
    """``fn()`` raises ``error`` (a ``TiduError``) whose message names each of ``names``."""
    with pytest.raises(error) as caught:
        fn()
    assert isinstance(caught.value, tidu.TiduError)
    for name in names:
        assert name in str(caught.value), (name, str(caught.value))
    return caught.value


# --- 1. NumPy functions without a tnp version, tensors nested in lists ------------------


def test_numpy_functions_without_tnp_version_on_nested_constant_tensors():
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    c, d = tnp.tensor(a), tnp.tensor(b)               # no gradient: plain data to NumPy
    np.testing.assert_array_equal(np.block([c, d]), np.block([a, b]))    # tnp.block now
    np.testing.assert_array_equal(np.block([[c], [d]]), np.block([[a], [b]]))
    i, j = tnp.tensor([0, 1]), tnp.tensor([2, 0])
    np.testing.assert_array_equal(np.ravel_multi_index([i, j], (2, 3)),
                                  np.ravel_multi_index([[0, 1], [2, 0]], (2, 3)))
    np.testing.assert_array_equal(np.choose([0, 1], [c, d]), np.choose([0, 1], [a, b]))
    np.testing.assert_array_equal(np.shape([c, d]), (2, 2))


def test_numpy_functions_without_tnp_version_refuse_nested_values_with_gradient():
    x = tnp.tensor([0.5, 1.5], requires_grad=True)
    c = tnp.tensor([1.0, 2.0])
    _raises(TensorNotSupportedError, lambda: np.ravel_multi_index([x, x], (2, 2)),
            "numpy.ravel_multi_index")
    _raises(TensorNotSupportedError, lambda: np.ravel_multi_index([c, x], (2, 2)),
            "numpy.ravel_multi_index")
    assert np.array_equal(tnp.grad(lambda v: tnp.sum(np.choose([0, 1], [v, c])))(x.data),
                          [1.0, 0.0])                   # np.choose has a tnp version now
    _raises(TensorNotSupportedError, lambda: tnp.grad(
        lambda v: tnp.sum(np.ravel_multi_index([v, v], (2, 2))))(np.ones(2)),
            "numpy.ravel_multi_index")
    _raises(TensorNotSupportedError, lambda: tnp.jit(lambda v: np.ravel_multi_index(
        [v, v], (2, 2)))(np.ones(2)), "numpy.ravel_multi_index")
    assert np.array_equal(tnp.grad(lambda v: tnp.sum(np.block([v, 2 * v])))(x.data),
                          [3.0, 3.0])                   # np.block has a tnp version now
    # the library works afterwards
    np.testing.assert_array_equal(np.block([np.ones(1), np.zeros(1)]), [1.0, 0.0])
    assert np.allclose(tnp.sum(x * x).backward().grad(x), [1.0, 3.0])


def test_numpy_out_into_a_tensor_is_refused_and_leaves_it_unchanged():
    c = tnp.tensor([1.0, 2.0])
    _raises(TensorNotSupportedError, lambda: np.add(c, c, out=(c,)), "numpy.add", "out=")
    _raises(TensorNotSupportedError, lambda: np.choose([0, 1], [c, c], out=c),
            "numpy.choose", "out=")
    np.testing.assert_array_equal(c.data, [1.0, 2.0])
    out = np.empty(2)                                   # an array of the caller's: fine
    np.add(c, c, out=out)
    np.testing.assert_array_equal(out, [2.0, 4.0])


# --- 2. max/min with initial over empty axes ---------------------------------------------


@pytest.mark.parametrize("fn", ["max", "min"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, False),
                                            (0, True), ((0, 1), True)])
def test_extremum_with_initial_over_empty_axes_is_numpys(fn, axis, keepdims):
    x = np.ones((0, 4))
    expected = getattr(np, fn)(x, axis=axis, keepdims=keepdims, initial=-1.0)
    got = getattr(tnp, fn)(x, axis=axis, keepdims=keepdims, initial=-1.0)
    np.testing.assert_array_equal(got, expected)
    assert np.shape(got) == expected.shape and np.asarray(got).dtype == expected.dtype

    def total(v, init=-1.0):
        return tnp.sum(getattr(tnp, fn)(v, axis=axis, keepdims=keepdims, initial=init))

    g = tnp.grad(total)(x)                               # an empty gradient for an empty array
    assert g.shape == x.shape
    # in initial, the derivative is the number of results (each is initial)
    assert float(tnp.grad(total, argnums=1)(x, np.float64(-1.0))) == expected.size
    np.testing.assert_array_equal(tnp.jit(lambda v: getattr(tnp, fn)(
        v, axis=axis, keepdims=keepdims, initial=-1.0))(x), expected)
    assert tnp.jacfwd(lambda v: getattr(tnp, fn)(
        v, axis=axis, keepdims=keepdims, initial=-1.0))(x).shape == expected.shape + x.shape
    np.testing.assert_array_equal(tnp.vmap(lambda v: getattr(tnp, fn)(
        v, axis=axis, keepdims=keepdims, initial=-1.0))(np.ones((3, 0, 4))),
        np.stack([expected] * 3))


def test_reduction_initial_is_in_the_arrays_dtype_as_numpy():
    for x in (np.zeros(0, np.int64), np.array([1, 2]), np.ones(2, np.float32)):
        for initial in (2.5, np.float64(3.0)):
            for fn in ("max", "min", "sum"):
                expected = getattr(np, fn)(x, initial=initial)
                got = np.asarray(getattr(tnp, fn)(x, initial=initial))
                assert got.dtype == expected.dtype and got == expected, (fn, x, initial, got)
    got = tnp.min(np.zeros(0), initial=-0.0)
    assert float(got) == 0.0 and np.signbit(got)


def test_extremum_with_initial_keeps_its_derivatives_off_empty_axes():
    x = np.array([[1.0, 3.0], [2.0, 0.5]])
    g = tnp.grad(lambda v: tnp.sum(tnp.max(v, axis=1, initial=2.0)))(x)
    np.testing.assert_array_equal(g, [[0.0, 1.0], [0.5, 0.0]])   # a tie: shared, as maximum
    t = tnp.tensor(np.ones((0, 3)), requires_grad=True)
    y = tnp.sum(tnp.min(t, axis=0, initial=5.0))
    assert float(y.detach().item()) == 15.0
    assert y.backward().grad(t).shape == (0, 3)


# --- 3. names in Python's own errors ----------------------------------------------------------


def test_made_functions_name_themselves_in_pythons_errors():
    for fn, name in ((tnp.exp, "exp"), (tnp.sqrt, "sqrt"), (tnp.equal, "equal"),
                     (tnp.greater_equal, "greater_equal")):
        assert fn.__name__ == fn.__qualname__ == name
    with pytest.raises(TypeError) as caught:       # (NumPy's keywords are refused by name)
        tnp.exp(np.ones(2), castin="no")
    assert "exp()" in str(caught.value) and "<locals>" not in str(caught.value)
    # (round 61: exp takes casting= as NumPy's; an integer operand needs a cast 'no' refuses)
    with pytest.raises(TensorTypeError, match="^exp: Cannot cast ufunc 'exp' input from "
                                              r"dtype\('int64'\) to dtype\('float64'\)"):
        tnp.exp(np.ones(2, int), casting="no")


# --- 4. dicts with keys of mixed types ------------------------------------------------------


def test_dict_keys_of_mixed_types_are_a_clear_error():
    tree = {1: np.ones(1), "a": np.ones(1)}
    error = _raises(TypeError, lambda: tree_flatten(tree), "dict keys", "int", "str")
    assert not isinstance(error.__cause__, RecursionError)
    _raises(TypeError, lambda: tnp.jit(lambda d: d[1] + d["a"])(tree), "dict keys")
    _raises(TypeError, lambda: tnp.grad(lambda d: tnp.sum(d[1] * d["a"]))(tree), "dict keys")
    # the library works afterwards, and keys of one type still sort
    np.testing.assert_array_equal(tnp.jit(lambda d: d["b"] - d["a"])(
        {"b": np.ones(1), "a": np.ones(1)}), [0.0])
    assert tree_flatten({2: "y", 1: "x"})[0] == ["x", "y"]


# --- 5. float() of a stop_gradient value --------------------------------------------------------


def _scaled(v):
    return v[0] * float(tnp.stop_gradient(tnp.sum(v)))


def test_float_of_stop_gradient_under_grad():
    x = np.array([0.5, 1.0])
    np.testing.assert_array_equal(tnp.grad(_scaled)(x), [1.5, 0.0])
    np.testing.assert_array_equal(
        tnp.grad(lambda v: v[0] * int(tnp.stop_gradient(v[1] * 4)))(x), [4.0, 0.0])
    np.testing.assert_array_equal(
        tnp.grad(lambda v: v[0] * tnp.stop_gradient(v[1]).item())(x), [1.0, 0.0])
    # a constant at every level: d2/dx2 (x**2 * s) = 2 s, s = x held
    assert float(tnp.grad(tnp.grad(lambda v: v ** 2 * float(tnp.stop_gradient(v))))(
        np.float64(3.0))) == 6.0
    t = tnp.tensor(x, requires_grad=True)               # inside checkpoint, on eager tensors
    np.testing.assert_array_equal(tnp.checkpoint(_scaled)(t).backward().grad(t), [1.5, 0.0])


def test_float_without_stop_gradient_or_of_unknown_values_still_raises():
    x = np.array([0.5, 1.0])
    _raises(TensorTypeError, lambda: tnp.grad(lambda v: v[0] * float(tnp.sum(v)))(x),
            "float()")
    _raises(ConcretizationError, lambda: tnp.jit(_scaled)(x), "float()")
    _raises(ConcretizationError, lambda: tnp.vmap(_scaled)(np.ones((3, 2))), "float()")
    _raises(ConcretizationError, lambda: tnp.jit(tnp.grad(_scaled))(x), "float()")


# --- 6. complex tangents and cotangents for real values ---------------------------------------


def test_complex_tangent_for_a_real_primal_is_refused():
    x = np.arange(3.0)
    _raises(FunctionalError, lambda: tnp.jvp(lambda v: v * v, (x,), (1j * np.ones(3),)),
            "jvp", "real")
    _, vjp_fn = tnp.vjp(lambda v: v * v, x)
    _raises(FunctionalError, lambda: vjp_fn(1j * np.ones(3)), "vjp", "real")
    _, vjp_pair = tnp.vjp(lambda v: (v * v, np.ones(2)), x)       # an output without history
    _raises(FunctionalError, lambda: vjp_pair((np.ones(3), 1j * np.ones(2))), "vjp", "real")
    # real tangents of another precision, and real tangents of complex primals, still work
    _, tangent = tnp.jvp(lambda v: v * v, (x,), (np.ones(3, np.float32),))
    np.testing.assert_array_equal(tangent, 2 * x)
    assert tangent.dtype == np.float64
    _, tangent = tnp.jvp(lambda v: v * v, (x + 1j,), (np.ones(3),))
    np.testing.assert_allclose(tangent, 2 * (x + 1j))
    np.testing.assert_array_equal(vjp_fn(np.ones(3, np.float32))[0], 2 * x)
