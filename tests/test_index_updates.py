"""JAX's indexed updates on traced values and tensors: ``x.at[key].set(v)``, ``.add(v)``,
``.get()``, returning new values, against NumPy's assignment and ``np.add.at``, finite
differences, the dot-product test and (when installed) JAX."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
from primitives import tensor as tnp
from tensor_helpers import numeric_grad

KEYS = [1, -1, (0, slice(1, None)), (slice(None), 2), (Ellipsis, 0),
        np.array([0, 1, 1]), (np.array([1, 0]), np.array([2, 2])),
        np.array([[True, False, True], [False, True, False]])]


def _numpy_set(x, key, v):
    out = x.copy()
    out[key] = v
    return out


def _numpy_add(x, key, v):
    out = x.copy()
    np.add.at(out, key, v)
    return out


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_values_are_numpy_assignment_and_add_at(key):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3))
    v = rng.standard_normal(np.shape(x[key]))
    set_ = tnp.jit(lambda x, v: x.at[key].set(v)) if not isinstance(key, np.ndarray) or \
        key.dtype != bool else (lambda x, v: tnp.tensor(x).at[key].set(v).data)
    add_ = tnp.jit(lambda x, v: x.at[key].add(v)) if not isinstance(key, np.ndarray) or \
        key.dtype != bool else (lambda x, v: tnp.tensor(x).at[key].add(v).data)
    np.testing.assert_array_equal(set_(x, v), _numpy_set(x, key, v))
    np.testing.assert_allclose(add_(x, v), _numpy_add(x, key, v), rtol=1e-15)
    got = tnp.jit(lambda x: x.at[key].get())(x) if not (isinstance(key, np.ndarray)
                                                        and key.dtype == bool) else x[key]
    np.testing.assert_array_equal(got, x[key])


@pytest.mark.parametrize("key", KEYS[:7], ids=repr)
def test_derivatives_by_finite_differences_and_the_dot_product_test(key):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3))
    v = rng.standard_normal(np.shape(x[key]))
    weights = rng.standard_normal((2, 3))

    def loss(x, v):                               # tnp.at: x may be a NumPy array
        return tnp.sum(weights * tnp.sin(tnp.at(x)[key].set(v * v))) + \
            tnp.sum(weights * tnp.at(x)[key].add(tnp.exp(v)) ** 2)

    gx, gv = tnp.grad(loss, argnums=(0, 1))(x, v)
    np.testing.assert_allclose(gx, numeric_grad(lambda x: loss(x, v), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gv, numeric_grad(lambda v: loss(x, v), v), rtol=1e-6, atol=1e-8)
    # set and add are linear in (x, v) jointly: <ct, J t> == <J^T ct, t>
    for method in ("set", "add"):
        f = (lambda x, v, m=method: getattr(x.at[key], m)(v))
        tx, tv, ct = rng.standard_normal(x.shape), rng.standard_normal(v.shape), \
            rng.standard_normal(x.shape)
        _, forward = tnp.jvp(f, (x, v), (tx, tv))
        _, vjp_fn = tnp.vjp(f, x, v)
        cx, cv = vjp_fn(ct)
        np.testing.assert_allclose(np.sum(ct * forward), np.sum(cx * tx) + np.sum(cv * tv),
                                   rtol=1e-12)


def test_repeated_positions_set_keeps_the_last_value_and_add_sums():
    x = np.zeros(4)
    idx = np.array([2, 0, 2])
    v = np.array([1.0, 2.0, 3.0])
    f = tnp.jit(lambda x, i, v: (x.at[i].set(v), x.at[i].add(v)))
    set_, add_ = f(x, idx, v)
    np.testing.assert_array_equal(set_, [2.0, 0.0, 3.0, 0.0])      # NumPy's order: last wins
    np.testing.assert_array_equal(add_, [2.0, 0.0, 4.0, 0.0])
    # only the winning value gets a derivative, as NumPy's assignment reads it
    g = tnp.grad(lambda v: tnp.sum(tnp.at(x)[idx].set(v) * np.arange(1.0, 5.0)))(v)
    np.testing.assert_array_equal(g, [0.0, 1.0, 3.0])


def test_traced_indices_compile_once_and_stay_current():
    traces = []

    def f(x, i, v):
        traces.append(1)
        return x.at[i].add(v)

    jitted = tnp.jit(f)
    x = np.arange(5.0)
    for idx in ([0, 1], [4, 4], [3, 0]):
        np.testing.assert_array_equal(jitted(x, np.array(idx), np.ones(2)),
                                      _numpy_add(x, np.array(idx), np.ones(2)))
    assert len(traces) == 1
    with pytest.raises(tnp.TensorIndexError):
        jitted(x, np.array([0, 5]), np.ones(2))                    # out of range, at run time


def test_vmap_and_the_eager_tensor():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(tnp.vmap(lambda r: r.at[1].set(-1.0))(x),
                                  [[0.0, -1.0, 2.0], [3.0, -1.0, 5.0]])
    np.testing.assert_array_equal(tnp.vmap(lambda r, i: r.at[i].add(10.0))(x, np.array([0, 2])),
                                  [[10.0, 1.0, 2.0], [3.0, 4.0, 15.0]])
    t = tnp.tensor(np.arange(4.0), requires_grad=True)
    y = t.at[1].set(10.0)
    tnp.sum(y * y).backward()
    np.testing.assert_array_equal(y.data, [0.0, 10.0, 2.0, 3.0])
    np.testing.assert_array_equal(t.grad, [0.0, 0.0, 4.0, 6.0])     # the set entry: none
    assert not np.shares_memory(y.data, t.data)


def test_tnp_at_works_on_numpy_arrays_which_have_no_at():
    assert not hasattr(np.zeros(3), "at")
    scatter = tnp.jit(lambda i, v: tnp.at(tnp.zeros(4))[i].set(v))      # jnp.zeros(4).at[i]
    np.testing.assert_array_equal(scatter(np.array([3, 1]), np.array([1.0, 2.0])),
                                  [0.0, 2.0, 0.0, 1.0])
    np.testing.assert_array_equal(tnp.at(np.arange(3.0))[0].add(5.0), [5.0, 1.0, 2.0])
    g = tnp.grad(lambda v: tnp.sum(tnp.at(tnp.zeros(3))[np.array([0, 2])].set(v) ** 2))(
        np.array([1.0, 2.0]))
    np.testing.assert_array_equal(g, [2.0, 4.0])


def test_values_are_cast_to_the_array_dtype_and_shapes_checked():
    out = tnp.jit(lambda x: x.at[0].set(2.5))(np.zeros(3, np.float32))
    assert out.dtype == np.float32
    with pytest.raises(tidu.TiduError, match=r"x.at\[...\].set: values of shape \(2,\)"):
        tnp.jit(lambda x: x.at[0:3].set(np.ones(2)))(np.zeros(4))


def test_against_jax():
    jax = pytest.importorskip("jax", reason="JAX compares its .at[] updates")
    jnp = pytest.importorskip("jax.numpy")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        x = np.arange(6.0).reshape(2, 3)
        v = np.array([5.0, 7.0])
        for i in (0, 1, -1):
            def f(M, x, v):
                return M.sum(x.at[i, 1:].set(v) ** 2) + M.sum(x.at[:, i].add(v[0]) * x)
            ours = tnp.grad(lambda x, v: f(tnp, x, v), argnums=(0, 1))(x, v)
            theirs = jax.grad(lambda x, v: f(jnp, x, v), argnums=(0, 1))(x, v)
            for a, b in zip(ours, theirs):
                np.testing.assert_allclose(a, np.asarray(b), rtol=1e-14)
        idx = np.array([0, 2, 2])
        ours = tnp.grad(lambda x, v: tnp.sum(x.at[idx].add(v) ** 2), argnums=(0, 1))(
            np.arange(4.0), np.array([1.0, 2.0, 3.0]))
        theirs = jax.grad(lambda x, v: jnp.sum(x.at[idx].add(v) ** 2), argnums=(0, 1))(
            np.arange(4.0), np.array([1.0, 2.0, 3.0]))
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, np.asarray(b), rtol=1e-14)
    finally:
        jax.config.update("jax_enable_x64", previous)


def test_transforms_compose_in_both_orders():
    def h(x):
        repeated = x.at[np.array([0, 0])].add(x[1:] ** 2)
        return tnp.sum(tnp.sin(x.at[1].set(x[0] * x[2]))) + tnp.sum(repeated)

    X = np.random.default_rng(3).standard_normal((3, 3))
    per_row = tnp.vmap(tnp.grad(h))(X)
    full = tnp.jacrev(lambda X: tnp.vmap(h)(X))(X)
    np.testing.assert_allclose(per_row, np.stack([full[i, i] for i in range(3)]), rtol=1e-13)
    np.testing.assert_allclose(tnp.grad(tnp.jit(h))(X[0]), tnp.jit(tnp.grad(h))(X[0]),
                               rtol=1e-13)
    np.testing.assert_allclose(tnp.jacfwd(tnp.grad(h))(X[0]), tnp.jacrev(tnp.grad(h))(X[0]),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tnp.grad(h)(X[0]), numeric_grad(lambda x: float(h(tnp.tensor(x))),
                                                                 X[0]), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("method", ["multiply", "divide", "power", "min", "max", "apply"])
def test_jax_updates_are_there_and_an_unknown_one_is_an_attribute_error(method):
    # (tests/test_at_methods.py checks their values and derivatives against JAX's)
    x = tnp.tensor(np.zeros(3), requires_grad=True)
    assert callable(getattr(x.at[1], method))
    assert not hasattr(x.at[1], "no_such_method")          # an AttributeError, as usual
    np.testing.assert_array_equal(x.at[1].set(2.0).detach().numpy(), [0.0, 2.0, 0.0])
