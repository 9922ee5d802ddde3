"""JAX's ``x.at[key]`` methods beyond ``get``/``set``/``add``: ``subtract``, ``multiply``,
``divide``, ``power``, ``min``, ``max`` and ``apply``, with repeated positions accumulating
as in JAX, compared with JAX's values and gradients and with finite differences, eagerly,
on tensors, and under ``grad``, ``jit`` (indices traced) and ``vmap``."""

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.errors import TensorShapeError, TensorTypeError
from tensor_helpers import numeric_grad

X = np.arange(12.0).reshape(3, 4) / 4 + 0.5

# keys of X (3, 4) with repeated positions, some out of range (5, -4, 9, -5)
KEYS = [
    np.array([1, 5, -1, 1, -4, 2, 1]),
    (np.array([0, 2, 0, -1, 2]), np.array([1, 3, 1, 3, 4])),
    (slice(None), np.array([1, 4, -3, 1, -5])),
    (np.array([[0, 9], [-3, 0]]), 1),
    (None, ..., np.array([3, 3, 0])),
]
METHODS = ("subtract", "multiply", "divide", "power", "min", "max")
MODES = ("clip", "drop", "fill")


def _jax():
    jax = pytest.importorskip("jax", reason="compares x.at[...] methods with JAX's")
    jax.config.update("jax_enable_x64", True)
    return jax


def _values(key, seed=0):
    """Update values of ``X[key]``'s shape, in [0.5, 1.5) (powers and quotients stay tame),
    no two equal."""
    shape = tnp.at(X)[key].get(mode="clip").shape
    return np.random.default_rng(seed).uniform(0.5, 1.5, size=shape)


def _method(x, key, method, xp):
    return getattr((tnp.at(x) if xp is tnp else xp.asarray(x).at)[key], method)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("key", KEYS, ids=range(len(KEYS)))
@pytest.mark.parametrize("method", METHODS)
def test_values_match_jax(method, key, mode):
    jnp = _jax().numpy
    v = _values(key)
    got = _method(X, key, method, tnp)(v, mode=mode)
    want = _method(jnp.asarray(X), key, method, jnp)(v, mode=mode)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)


def test_repeated_positions_accumulate():
    x = np.array([2.0, 3.0, 5.0])
    i = np.array([0, 2, 0, 0])
    v = np.array([2.0, 10.0, -3.0, 0.5])
    np.testing.assert_array_equal(tnp.at(x)[i].multiply(v), [-6.0, 3.0, 50.0])
    np.testing.assert_array_equal(tnp.at(x)[i].divide(v), [2.0 / -3.0, 3.0, 0.5])
    np.testing.assert_array_equal(tnp.at(x)[i].power(v), [2.0 ** -3.0, 3.0, 5.0 ** 10])
    np.testing.assert_array_equal(tnp.at(x)[i].min(v), [-3.0, 3.0, 5.0])
    np.testing.assert_array_equal(tnp.at(x)[i].max(v), [2.0, 3.0, 10.0])
    np.testing.assert_array_equal(tnp.at(x)[i].subtract(v), [2.5, 3.0, -5.0])
    # apply: once per occurrence (func(func(func(2))) at 0), as JAX and np.ufunc.at
    np.testing.assert_array_equal(tnp.at(x)[i].apply(lambda t: t * 2 + 1), [23.0, 3.0, 11.0])


def test_integer_arrays_match_jax():
    jnp = _jax().numpy
    for dtype in ("int8", "int32", "uint8", "int64"):
        x = np.arange(1, 7, dtype=dtype)
        i = np.array([0, 5, 0, 2, 9])
        v = np.array([2, 3, 1, 4, 7]).astype(dtype)
        for method in ("subtract", "multiply", "min", "max", "power"):
            got = getattr(tnp.at(x)[i], method)(v, mode="drop")
            want = getattr(jnp.asarray(x).at[i], method)(v, mode="drop")
            assert got.dtype == want.dtype, (dtype, method)
            np.testing.assert_array_equal(got, want, err_msg=f"{dtype} {method}")
        got = tnp.at(x)[i].apply(lambda t: t * 3, mode="drop")
        np.testing.assert_array_equal(got, jnp.asarray(x).at[i].apply(lambda t: t * 3,
                                                                       mode="drop"))
    # divide is true division, as JAX's (a float result; NumPy's float64 for integers)
    got = tnp.at(np.arange(4))[np.array([1, 1])].divide(np.array([2, 4]))
    np.testing.assert_array_equal(got, [0.0, 0.125, 2.0, 3.0])
    assert got.dtype == np.float64


# --- gradients ------------------------------------------------------------------------------


def _loss(method, key, mode, xp, weights):
    def f(x, v):
        return xp.sum(xp.sin(_method(x, key, method, xp)(v, mode=mode)) * weights)
    return f


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("key", KEYS[:4], ids=range(4))
@pytest.mark.parametrize("method", METHODS)
def test_gradients_match_finite_differences_and_jax(method, key, mode):
    jax = _jax()
    jnp = jax.numpy
    v = _values(key, seed=1)
    weights = np.random.default_rng(2).normal(size=X.shape)
    f = _loss(method, key, mode, tnp, weights)
    got_x, got_v = tnp.grad(f, argnums=(0, 1))(X, v)
    np.testing.assert_allclose(got_x, numeric_grad(lambda x: float(f(x, v)), X), atol=1e-6)
    np.testing.assert_allclose(got_v, numeric_grad(lambda v: float(f(X, v)), v), atol=1e-6)
    # JAX differentiates scatter_mul in its values only for unique positions; in x always
    if method not in ("min", "max") or mode != "clip":
        want_x = jax.grad(_loss(method, key, mode, jnp, weights))(X, v)
        np.testing.assert_allclose(got_x, want_x, rtol=1e-12, atol=1e-12)
    if method == "subtract" or method in ("min", "max") and mode != "clip":
        # (JAX 0.10's derivative of scatter_min/max ignores mode="clip": it counts a
        # clamped update as dropped, against finite differences, checked above)
        want_v = jax.grad(_loss(method, key, mode, jnp, weights), argnums=1)(X, v)
        np.testing.assert_allclose(got_v, want_v, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("method", ["multiply", "divide", "power"])
def test_gradients_with_unique_positions_match_jax(method):
    jax = _jax()
    jnp = jax.numpy
    key = (np.array([0, 2, 1]), np.array([1, 3, 0]))
    v = np.array([0.7, 1.3, 0.0 if method == "multiply" else 0.9])
    weights = np.random.default_rng(4).normal(size=X.shape)

    def f(x, v, xp):
        out = getattr((tnp.at(x) if xp is tnp else x.at)[key], method)(
            v, unique_indices=True)
        return xp.sum(xp.sin(out) * weights)

    got = tnp.grad(lambda x, v: f(x, v, tnp), argnums=(0, 1))(X, v)
    want = jax.grad(lambda x, v: f(x, v, jnp), argnums=(0, 1))(X, v)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_multiply_gradient_with_zero_factors_is_the_product_of_the_others():
    # x[0] is multiplied by 2, 0, 3 and 0; x[1] by 0 and 5; x[2] by 4
    x = np.array([1.5, -2.0, 0.5])
    i = np.array([0, 0, 1, 0, 0, 1, 2])
    v = np.array([2.0, 0.0, 0.0, 3.0, 0.0, 5.0, 4.0])

    def f(x, v):
        return tnp.sum(tnp.at(x)[i].multiply(v) * np.array([1.0, 10.0, 100.0]))

    g_x, g_v = tnp.grad(f, argnums=(0, 1))(x, v)
    np.testing.assert_array_equal(g_x, [0.0, 0.0, 400.0])
    # d/dv: x at the position times the product of the position's other factors
    np.testing.assert_array_equal(g_v, [0.0, 0.0, 10 * -2.0 * 5.0, 0.0, 0.0, 0.0, 100 * 0.5])
    v[1] = 7.0                               # one zero factor left at position 0
    g_x, g_v = tnp.grad(f, argnums=(0, 1))(x, v)
    np.testing.assert_array_equal(g_v[4], 1.5 * 2.0 * 7.0 * 3.0)
    np.testing.assert_array_equal(g_v[[0, 1, 3]], [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(g_x[0], 0.0)
    assert np.all(np.isfinite(tnp.grad(lambda v: tnp.sum(tnp.at(x)[i].divide(v + 1.0)))(v)))


@pytest.mark.parametrize("method", ["min", "max"])
def test_ties_share_the_derivative_as_in_jax(method):
    jax = _jax()
    jnp = jax.numpy
    x = np.array([1.0, 2.0, 3.0, 4.0])
    i = np.array([0, 0, 2, 3, 3, 3, 1])
    v = np.array([1.0, 1.0, 3.0, 4.0, 4.0, -9.0 if method == "max" else 9.0, np.nan])
    weights = np.array([1.0, 10.0, 100.0, 1000.0])

    def f(x, v, xp):
        return xp.sum(getattr((tnp.at(x) if xp is tnp else x.at)[i], method)(v) * weights)

    got = tnp.grad(lambda x, v: f(x, v, tnp), argnums=(0, 1))(x, v)
    want = jax.grad(lambda x, v: f(x, v, jnp), argnums=(0, 1))(x, v)
    np.testing.assert_allclose(got[0], [1 / 3, 0.0, 50.0, 1000 / 3], rtol=1e-15)  # NaN won at 1
    np.testing.assert_allclose(got[0], want[0], rtol=1e-15)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-15)
    np.testing.assert_array_equal(getattr(tnp.at(x)[i], method)(v),
                                  getattr(jnp.asarray(x).at[i], method)(v))


def test_apply_gradient_through_repeated_applications():
    x = np.array([0.3, 1.2, -0.7])
    i = np.array([0, 2, 0, 0])

    def f(x):
        return tnp.sum(tnp.at(x)[i].apply(tnp.sin) * np.array([1.0, 10.0, 100.0]))

    g = tnp.grad(f)(x)
    s1, s2 = np.sin(0.3), np.sin(np.sin(0.3))
    np.testing.assert_allclose(g, [np.cos(0.3) * np.cos(s1) * np.cos(s2), 10.0,
                                   100 * np.cos(-0.7)], rtol=1e-14)
    np.testing.assert_allclose(g, numeric_grad(lambda x: float(f(x)), x), atol=1e-7)
    # under jit (indices traced) the same
    np.testing.assert_allclose(tnp.jit(tnp.grad(lambda x, i: tnp.sum(tnp.at(x)[i].apply(
        tnp.sin) * np.array([1.0, 10.0, 100.0]))))(x, i), g, rtol=1e-14)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # in the branch left out
def test_apply_keeps_an_infinite_derivative_where_func_is_not_applied_out():
    # f is applied twice at 0 and once at 1: at 1 the second, unselected, f of f(1) = 0
    # has an infinite derivative that must not reach x's gradient as NaN (0 * inf)
    x = np.array([16.0, 1.0, 9.0])
    i = np.array([0, 1, 0])

    def f(t):
        return tnp.sqrt(t) - 1.0

    for fn in (lambda x: tnp.at(x)[i].apply(f), tnp.jit(lambda x: tnp.at(x)[i].apply(f)),
               lambda x: tnp.jit(lambda x, i: tnp.at(x)[i].apply(f))(x, i)):
        g = tnp.grad(lambda x: tnp.sum(fn(x)))(x)
        np.testing.assert_allclose(g, [0.5 / np.sqrt(3.0) * 0.5 / 4.0, 0.5, 1.0], rtol=1e-14)


def test_apply_refuses_what_is_not_elementwise():
    with pytest.raises(TensorShapeError, match=r"x\.at\[\.\.\.\]\.apply: func must act "
                                               "elementwise"):
        tnp.at(np.ones(3))[np.array([0, 1])].apply(lambda t: tnp.sum(t))
    with pytest.raises(TensorTypeError, match=r"x\.at\[\.\.\.\]\.apply: func must be a "
                                              "function"):
        tnp.at(np.ones(3))[0].apply(2.0)


# --- jit, vmap, tensors ---------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS + ("apply",))
def test_jit_traces_once_for_all_index_values(method):
    jnp = _jax().numpy
    calls = []

    def f(x, i, v):
        calls.append(1)
        update = tnp.at(x)[i]
        return update.apply(tnp.cos) if method == "apply" else getattr(update, method)(v)

    jf = tnp.jit(f)
    x = np.array([0.5, 1.5, 2.5, 3.5])
    v = np.array([1.25, 0.5, 2.0, 0.75])
    for i in (np.array([0, 0, 3, 0]), np.array([1, 2, 3, 0]), np.array([2, 2, 2, 2])):
        update = jnp.asarray(x).at[i]
        want = update.apply(jnp.cos) if method == "apply" else getattr(update, method)(v)
        np.testing.assert_allclose(jf(x, i, v), want, rtol=1e-15)
    assert len(calls) == 1
    grad = tnp.jit(tnp.grad(lambda x, v, i: tnp.sum(tnp.sin(f(x, i, v))), argnums=(0, 1)))
    i = np.array([0, 0, 3, 0])
    eager = tnp.grad(lambda x, v: tnp.sum(tnp.sin(f(x, i, v))), argnums=(0, 1))(x, v)
    for got, want in zip(grad(x, v, i), eager):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("method", METHODS)
def test_vmap_over_indices_matches_jax(method):
    jax = _jax()
    jnp = jax.numpy
    x = np.array([0.5, 1.5, 2.5, 3.5])
    i = np.array([[0, 0, 3], [1, 2, 1], [5, 3, -1]])
    v = np.array([[1.25, 0.5, 2.0], [0.75, 1.5, 0.5], [2.0, 0.25, 1.0]])
    got = tnp.vmap(lambda i, v: getattr(tnp.at(x)[i], method)(v, mode="drop"))(i, v)
    want = jax.vmap(lambda i, v: getattr(jnp.asarray(x).at[i], method)(v, mode="drop"))(i, v)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    got = tnp.vmap(tnp.grad(lambda x, i: tnp.sum(getattr(tnp.at(x)[i], method)(
        np.array([1.25, 0.5, 2.0])) ** 2)), in_axes=(None, 0))(x, i[:2])
    want = jax.vmap(jax.grad(lambda x, i: jnp.sum(getattr(x.at[i], method)(
        np.array([1.25, 0.5, 2.0])) ** 2)), in_axes=(None, 0))(x, i[:2])
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_eager_tensor_backward():
    x = tnp.tensor(np.array([1.5, -2.0, 0.5]), requires_grad=True)
    v = tnp.tensor(np.array([2.0, 0.0, 3.0, 4.0]), requires_grad=True)
    i = tnp.tensor(np.array([0, 0, 2, 0]))
    out = x.at[i].multiply(v) + x.at[i].max(v) + x.at[i].apply(tnp.exp)
    tnp.sum(out).backward()
    # multiply: x0 * 2 * 0 * 4; max: max(1.5, 2, 0, 4) = v3; apply: exp(exp(exp(x0)))
    e1, e2 = np.exp(1.5), np.exp(np.exp(1.5))
    np.testing.assert_allclose(x.grad, [0.0 + 0.0 + np.exp(e2) * e2 * e1, 3.0,
                                        3.0 + 0.0 + np.exp(0.5)])
    np.testing.assert_allclose(v.grad, [0.0, 1.5 * 8.0, 0.5 + 1.0, 1.0])


def test_results_are_fresh():
    x = np.array([1.0, 2.0, 3.0])
    for method in METHODS:
        for key, v in ((np.array([7]), np.ones(1)), (1, np.ones(()))):
            result = getattr(tnp.at(x)[key], method)(v, mode="drop")
            assert not np.may_share_memory(result, x) and not np.may_share_memory(result, v)
    assert not np.may_share_memory(tnp.at(x)[5].apply(np.sin, mode="drop"), x)


@pytest.mark.parametrize("method", ["min", "max"])
def test_complex_min_max_compare_real_parts_first_as_jax(method):
    jax = _jax()
    jnp = jax.numpy
    x = np.array([1 + 2j, 3 - 1j, 0.5j])
    i = np.array([0, 0, 2, 1, 0])
    v = np.array([1.2 + 0.5j, 2j, 0.1 + 0.2j, 3.5 - 1j, 1 + 3j])      # 1 + 3j: a tie in Re
    np.testing.assert_array_equal(getattr(tnp.at(x)[i], method)(v),
                                  getattr(jnp.asarray(x).at[i], method)(v))
    v = v[:4]
    i = i[:4]
    weights = np.array([0.3 + 1j, 2 - 0.5j, -1 + 0.2j])

    def f(x, v):
        return tnp.real(tnp.sum(tnp.sin(getattr(tnp.at(x)[i], method)(v)) * weights))

    g_x, g_v = tnp.grad(f, argnums=(0, 1))(x, v)
    np.testing.assert_allclose(g_x, numeric_grad(lambda x: f(x, v), x), atol=1e-8)
    np.testing.assert_allclose(g_v, numeric_grad(lambda v: f(x, v), v), atol=1e-8)


@pytest.mark.parametrize("method", ["multiply", "divide", "power"])
def test_dropped_zero_values_get_a_zero_derivative_not_nan(method):
    # a dropped update goes to a dump slot past the end: 0 / 0 there would send NaN back
    x = np.array([1.5, 2.0, 0.5])
    i = np.array([0, 7, 2, -9, 0])
    v = np.array([2.0, 0.0, 3.0, 0.0, 1.25])

    def f(x, v):
        return tnp.sum(tnp.sin(getattr(tnp.at(x)[i], method)(v, mode="drop")))

    for grad in (tnp.grad(f, argnums=(0, 1)), tnp.jit(tnp.grad(f, argnums=(0, 1)))):
        g_x, g_v = grad(x, v)
        assert g_v[1] == 0.0 and g_v[3] == 0.0
        np.testing.assert_allclose(g_v, numeric_grad(lambda v: float(f(x, v)), v), atol=1e-7)
        np.testing.assert_allclose(g_x, numeric_grad(lambda x: float(f(x, v)), x), atol=1e-7)
