"""``primitives.tensor.linearize``: JAX's ``jax.linearize`` on functions of arrays. ``f_jvp``
agrees with ``jvp``, with finite differences, with ``vjp`` by the dot-product test and with
JAX; it composes with ``vmap``, ``jit`` and ``grad``; its results are fresh and fixed at
the values of the call that made it; misuse raises by name."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import primitives.tensor as tnp
from primitives.tensor import FunctionalError, TensorShapeError

RNG = np.random.default_rng(0)


def model(p, x):
    return {"a": tnp.tanh(p["w"] @ x), "b": tnp.sum(x ** 2) * p["c"]}


def params():
    return {"w": RNG.standard_normal((3, 3)), "c": np.array(2.0)}


def test_f_jvp_is_jvps_tangent_and_finite_differences():
    p, x = params(), RNG.standard_normal(3)
    tp, tx = {"w": RNG.standard_normal((3, 3)), "c": np.array(0.5)}, RNG.standard_normal(3)
    out, f_jvp = tnp.linearize(model, p, x)
    want_out, want = tnp.jvp(model, (p, x), (tp, tx))
    for name in ("a", "b"):
        np.testing.assert_array_equal(out[name], want_out[name])
        np.testing.assert_allclose(f_jvp(tp, tx)[name], want[name], rtol=1e-14, atol=1e-15)
    eps = 1e-6
    plus = model({k: p[k] + eps * tp[k] for k in p}, x + eps * tx)
    minus = model({k: p[k] - eps * tp[k] for k in p}, x - eps * tx)
    for name in ("a", "b"):
        np.testing.assert_allclose(f_jvp(tp, tx)[name], (plus[name] - minus[name]) / (2 * eps),
                                   rtol=1e-7, atol=1e-8)


def test_f_jvp_agrees_with_jax_linearize():
    jax = pytest.importorskip("jax", reason="JAX is the reference for linearize")
    jnp = pytest.importorskip("jax.numpy", reason="JAX is the reference for linearize")
    jax.config.update("jax_enable_x64", True)
    p, x = params(), RNG.standard_normal(3)
    tp, tx = {"w": RNG.standard_normal((3, 3)), "c": np.array(-1.5)}, RNG.standard_normal(3)
    _, f_jvp = tnp.linearize(model, p, x)
    _, jax_f_jvp = jax.linearize(
        lambda p, x: {"a": jnp.tanh(p["w"] @ x), "b": jnp.sum(x ** 2) * p["c"]}, p, x)
    got, want = f_jvp(tp, tx), jax_f_jvp(tp, tx)
    for name in ("a", "b"):
        np.testing.assert_allclose(got[name], np.asarray(want[name]), rtol=1e-13, atol=1e-15)


def test_dot_product_test_against_vjp():
    p, x = params(), RNG.standard_normal(3)
    _, f_jvp = tnp.linearize(model, p, x)
    _, vjp_fn = tnp.vjp(model, p, x)
    tp, tx = {"w": RNG.standard_normal((3, 3)), "c": np.array(0.3)}, RNG.standard_normal(3)
    ct = {"a": RNG.standard_normal(3), "b": np.array(-0.7)}
    jt = f_jvp(tp, tx)
    ct_p, ct_x = vjp_fn(ct)
    left = np.vdot(ct["a"], jt["a"]) + ct["b"] * jt["b"]
    right = np.vdot(ct_p["w"], tp["w"]) + ct_p["c"] * tp["c"] + np.vdot(ct_x, tx)
    assert abs(left - right) <= 1e-12 * max(1.0, abs(left))


def test_vmap_of_f_jvp_over_a_basis_is_the_jacobian():
    x = RNG.standard_normal(4)

    def f(x):
        return tnp.sin(x) * tnp.sum(x)

    _, f_jvp = tnp.linearize(f, x)
    columns = tnp.vmap(f_jvp)(np.eye(4))            # row i: J e_i, a column of J
    np.testing.assert_allclose(columns.T, tnp.jacfwd(f)(x), rtol=1e-14)


def test_grad_through_linearize_is_a_hessian_vector_product():
    x, v = RNG.standard_normal(3), RNG.standard_normal(3)

    def f(z):
        return tnp.sum(tnp.sin(z) ** 3)

    def directional(z):
        return tnp.linearize(f, z)[1](v)

    np.testing.assert_allclose(tnp.grad(directional)(x), tnp.hessian(f)(x) @ v, rtol=1e-13)


def test_jit_of_f_jvp_and_of_a_function_calling_linearize():
    x, t = RNG.standard_normal(3), RNG.standard_normal(3)
    _, f_jvp = tnp.linearize(tnp.sin, x)
    np.testing.assert_allclose(tnp.jit(f_jvp)(t), np.cos(x) * t, rtol=1e-15)
    jitted = tnp.jit(lambda x, t: tnp.linearize(tnp.sin, x)[1](t))
    for _ in range(2):                              # traced, then run with new values
        x, t = RNG.standard_normal(3), RNG.standard_normal(3)
        np.testing.assert_allclose(jitted(x, t), np.cos(x) * t, rtol=1e-15)


def test_results_share_no_memory_with_arguments_or_each_other():
    x, t = RNG.standard_normal(3), RNG.standard_normal(3)
    out, f_jvp = tnp.linearize(lambda z: z, x)
    first, second = f_jvp(t), f_jvp(t)
    assert not np.shares_memory(out, x)
    assert not np.shares_memory(first, t) and not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, t)
    first[:] = 0.0                                  # a caller writing into one result
    np.testing.assert_array_equal(f_jvp(t), t)


def test_f_jvp_keeps_the_values_of_the_call_that_made_it():
    x = RNG.standard_normal(3)
    scale = np.full(3, 2.0)
    primal = x.copy()
    _, f_jvp = tnp.linearize(lambda z: tnp.sin(z) * scale, primal)
    primal[:] = 0.0                                 # written after linearize: as in JAX,
    scale[:] = 5.0                                  # f_jvp is the derivative at the call
    np.testing.assert_allclose(f_jvp(np.ones(3)), 2.0 * np.cos(x), rtol=1e-15)


def test_has_aux_returns_aux_without_derivatives():
    x = RNG.standard_normal(3)
    out, f_jvp, aux = tnp.linearize(lambda z: (tnp.sin(z), {"twice": z * 2}), x, has_aux=True)
    assert type(aux["twice"]) is np.ndarray
    np.testing.assert_array_equal(aux["twice"], x * 2)
    np.testing.assert_allclose(f_jvp(np.ones(3)), np.cos(x), rtol=1e-15)


def test_an_eager_tensor_primal_gets_the_derivative_of_f_jvps_result():
    x = RNG.standard_normal(3)
    leaf = tnp.tensor(x, requires_grad=True)
    out, f_jvp = tnp.linearize(tnp.sin, leaf)
    assert isinstance(out, tnp.Tensor)
    tnp.sum(f_jvp(np.ones(3))).backward()           # d/dx sum(cos x) = -sin x
    np.testing.assert_allclose(leaf.grad, -np.sin(x), rtol=1e-15)


def test_misuse_raises_by_name_and_leaves_f_jvp_usable():
    x = np.ones(3)
    _, f_jvp = tnp.linearize(tnp.sin, x)
    with pytest.raises(TensorShapeError, match="f_jvp of sin: tangent of shape"):
        f_jvp(np.ones(2))
    with pytest.raises(FunctionalError, match="f_jvp of sin: tangents of structure"):
        f_jvp(np.ones(3), np.ones(3))
    with pytest.raises(FunctionalError, match="f_jvp of sin: tangent of dtype complex128"):
        f_jvp(np.ones(3) * 1j)
    with pytest.raises(FunctionalError, match="f_jvp of sin: expected an array"):
        f_jvp("a")
    with pytest.raises(FunctionalError, match="linearize: expected a callable"):
        tnp.linearize(3, x)
    with pytest.raises(FunctionalError, match="linearize: argument 0 has dtype int64"):
        tnp.linearize(tnp.sin, np.ones(3, int))
    with pytest.raises(FunctionalError, match="linearize: expected an array"):
        tnp.linearize(tnp.sin, "a")
    np.testing.assert_allclose(f_jvp(np.ones(3)), np.cos(x), rtol=1e-15)


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(0, 3), min_size=0, max_size=3), seed=st.integers(0, 2**16))
def test_f_jvp_matches_jvp_on_random_shapes(shape, seed):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(shape), rng.standard_normal(shape)
    t_x, t_w = rng.standard_normal(shape), rng.standard_normal(shape)

    def f(x, w):
        return tnp.exp(tnp.tanh(x) * w) + tnp.sum(x * w, axis=-1, keepdims=True) \
            if x.ndim else tnp.exp(tnp.tanh(x) * w)

    _, f_jvp = tnp.linearize(f, x, w)
    _, want = tnp.jvp(f, (x, w), (t_x, t_w))
    got = f_jvp(t_x, t_w)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)


def test_f_jvp_runs_the_linear_work_alone(monkeypatch):
    """The residuals (``cos x``, ``exp x``) are computed by ``linearize``, once: each
    ``f_jvp`` call evaluates no unary op of ``f``'s, as JAX's ``f_jvp`` does no primal work."""
    from primitives.tensor.ops import elementwise as ew
    from tensor_helpers import ops_run

    x, t = RNG.standard_normal(3), RNG.standard_normal(3)
    _, f_jvp = tnp.linearize(lambda z: tnp.sin(z) * tnp.exp(z), x)
    got, ran = ops_run(f_jvp, (t,), (ew.Unary,), monkeypatch)
    assert ran == [], ran
    want = (np.cos(x) * np.exp(x) + np.sin(x) * np.exp(x)) * t
    np.testing.assert_allclose(got, want, rtol=1e-14)
