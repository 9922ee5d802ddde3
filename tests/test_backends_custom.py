"""``custom_jvp`` and ``custom_vjp`` on PyTorch tensors and Dask arrays.

The user's functions are written with the Array API (``array_namespace``), so
the same code runs on every library. Each result must be an array of the inputs'
library, equal to the NumPy path's; inside the calls, converting a PyTorch tensor
to NumPy raises, and so does computing a Dask array (its results must stay lazy).
The NumPy path runs first with the same shapes and dtypes, so a rule traced for
NumPy arrays is never reused for another library's.
"""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import FunctionalError
from backend_helpers import Library

compat = pytest.importorskip("array_api_compat", reason="array-api-compat is not installed")

LIBRARIES = ("torch", "dask")
X = np.array([-3.0, -0.4, 0.2, 2.5])


@pytest.fixture(params=LIBRARIES)
def lib(request) -> Library:
    return Library(request.param)


def assert_equal(lib: Library, got: list, expected: list) -> None:
    for g, e in zip(lib.values(got), expected):
        e = np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


# --- the functions: library-neutral user code, rules written with tnp ---------------------


@tnp.custom_jvp
def softplus(x):
    xp = compat.array_namespace(x)
    return xp.log1p(xp.exp(-xp.abs(x))) + (x + xp.abs(x)) / 2


@softplus.defjvp
def softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = softplus(x)
    return y, t * (1.0 - tnp.exp(-y))            # sigmoid(x) t


@tnp.custom_vjp
def scaled_cube(x, s):
    return s * x * x * x


def scaled_cube_fwd(x, s):
    return scaled_cube(x, s), (x, s)


def scaled_cube_bwd(residuals, ct):
    x, s = residuals
    return 3.0 * s * x * x * ct, tnp.sum(x * x * x * ct)


scaled_cube.defvjp(scaled_cube_fwd, scaled_cube_bwd)


def softplus_loss(x):
    return tnp.sum(softplus(x) * x)


def cube_loss(x, s):
    return tnp.sum(scaled_cube(x, s))


# --- custom_jvp -------------------------------------------------------------------------------


def test_custom_jvp_forward_reverse_jit_and_eager(lib):
    tangent = np.array([1.0, -2.0, 0.5, 3.0])
    grad = tnp.grad(softplus_loss)(X)
    primal_out, tangent_out = tnp.jvp(softplus, (X,), (tangent,))
    x = lib.convert(X)
    with lib.only():
        got_grad = tnp.grad(softplus_loss)(x)
        got_jit = tnp.jit(tnp.grad(softplus_loss))(x)
        got_primal, got_tangent = tnp.jvp(softplus, (x,), (lib.convert(tangent),))
        t = tnp.tensor(x, requires_grad=True)
        got_eager = softplus_loss(t).backward().grad(t)
    assert_equal(lib, [got_grad, got_jit, got_eager], [grad, grad, grad])
    assert_equal(lib, [got_primal, got_tangent], [primal_out, tangent_out])
    np.testing.assert_allclose(grad, X / (1 + np.exp(-X)) + np.logaddexp(0.0, X))


def test_custom_jvp_keeps_float32(lib):
    x32 = X.astype(np.float32)
    expected = tnp.grad(softplus_loss)(x32)
    assert expected.dtype == np.float32
    with lib.only():
        got = tnp.grad(softplus_loss)(lib.convert(x32))
    [value] = lib.values([got])
    assert value.dtype == np.float32
    np.testing.assert_allclose(value, expected, rtol=2e-5)


def test_numpy_results_of_the_function_become_arrays_of_the_library(lib):
    @tnp.custom_jvp
    def with_constant(x):
        return x * 2.0, np.arange(3.0)               # a NumPy array whatever the input

    @with_constant.defjvp
    def with_constant_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return with_constant(x), (2.0 * t, tnp.zeros(3))

    x = lib.convert(X)
    with lib.only():
        (doubled, constant), pullback = tnp.vjp(with_constant, x)
        [ct] = pullback((lib.convert(np.ones(4)), lib.convert(np.ones(3))))
    assert_equal(lib, [doubled, constant, ct], [2 * X, np.arange(3.0), np.full(4, 2.0)])


def test_rule_closing_over_an_array_of_the_library(lib):
    weights = lib.convert(np.array([1.0, 2.0, 3.0, 4.0]))

    @tnp.custom_jvp
    def weighted(x):
        return x * weights

    @weighted.defjvp
    def weighted_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return weighted(x), t * weights            # a constant of the library in the rule

    x = lib.convert(X)
    with lib.only():
        got = tnp.grad(lambda x: tnp.sum(weighted(x) * weighted(x)))(x)
    assert_equal(lib, [got], [2 * X * np.array([1.0, 4.0, 9.0, 16.0])])


def test_a_nonlinear_jvp_rule(lib):
    @tnp.custom_jvp
    def shifted(x):
        return x * 1.0

    @shifted.defjvp
    def shifted_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return shifted(x), t + 1.0                  # not linear in t

    with lib.only(), pytest.raises(FunctionalError, match="shifted.* is not linear"):
        tnp.grad(lambda x: tnp.sum(shifted(x)))(lib.convert(X))


def test_the_linearity_check_reads_no_dask_array(lib):
    @tnp.custom_jvp
    def plus_x(x):
        return x * 1.0

    @plus_x.defjvp
    def plus_x_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return plus_x(x), t + x                     # not linear in t, through the data of x

    x = lib.convert(X)
    if lib.name == "torch":
        with lib.only(), pytest.raises(FunctionalError, match="plus_x.* is not linear"):
            tnp.grad(lambda x: tnp.sum(plus_x(x)))(x)
        return
    # Dask: the check would compute the tangent, so it is skipped; nothing is computed
    with lib.only():
        got = tnp.grad(lambda x: tnp.sum(plus_x(x)))(x)
    assert_equal(lib, [got], [np.ones(4)])


def test_vmap_of_a_custom_jvp_function(lib):
    batch = np.arange(6.0).reshape(2, 3) - 2.5
    expected = tnp.vmap(softplus, in_axes=1)(batch)
    with lib.only():
        got = tnp.vmap(softplus, in_axes=1)(lib.convert(batch))
        empty = tnp.vmap(softplus, in_axes=1)(lib.convert(np.zeros((2, 0))))
    assert_equal(lib, [got, empty], [expected, np.zeros((0, 2))])


# --- custom_vjp -------------------------------------------------------------------------------


def test_custom_vjp_reverse_jit_and_eager(lib):
    s = np.array(1.5)
    expected = tnp.grad(cube_loss, argnums=(0, 1))(X, s)
    x, s_lib = lib.convert(X), lib.convert(s)
    with lib.only():
        got = tnp.grad(cube_loss, argnums=(0, 1))(x, s_lib)
        got_jit = tnp.jit(tnp.grad(cube_loss, argnums=(0, 1)))(x, s_lib)
        tx, ts = tnp.tensor(x, requires_grad=True), tnp.tensor(s_lib, requires_grad=True)
        grads = cube_loss(tx, ts).backward()
        got_eager = (grads.grad(tx), grads.grad(ts))
    assert_equal(lib, [*got, *got_jit, *got_eager], [*expected] * 3)
    np.testing.assert_allclose(expected[0], 4.5 * X ** 2)
    np.testing.assert_allclose(expected[1], np.sum(X ** 3))


def test_custom_vjp_forward_mode_raises(lib):
    x, s = lib.convert(X), lib.convert(np.array(2.0))
    with lib.only(), pytest.raises(FunctionalError, match="scaled_cube"):
        tnp.jvp(lambda x: scaled_cube(x, s), (x,), (x,))


def test_a_nonlinear_bwd_rule(lib):
    @tnp.custom_vjp
    def double(x):
        return 2.0 * x

    double.defvjp(lambda x: (double(x), ()), lambda res, ct: (2.0 * ct + 1.0,))
    with lib.only(), pytest.raises(FunctionalError, match="double is not linear"):
        tnp.grad(lambda x: tnp.sum(double(x)))(lib.convert(X))
