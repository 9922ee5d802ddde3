"""``tnp.lax``: structured control flow, compared with ``jax.lax`` (values and gradients),
under ``grad``, ``jit``, ``vmap`` and on the eager ``Tensor``."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import lax
from primitives.tensor.errors import ConcretizationError, TensorShapeError, TensorTypeError
from tidu import TiduError

from tensor_helpers import numeric_grad

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

RNG = np.random.default_rng(58)
W = 0.5 * RNG.standard_normal((3, 3))
XS = RNG.standard_normal((5, 3))


def rnn(ns, lax_module, w, xs):
    """A tanh recurrence with a dict carry and a tuple of per-step outputs."""
    def step(carry, x):
        h = ns.tanh(carry["h"] @ w + x)
        return {"h": h, "n": carry["n"] + 1.0}, (ns.sum(h), h * 2.0)
    carry, (sums, hs) = lax_module.scan(step, {"h": ns.zeros(3), "n": 0.0}, xs)
    return ns.sum(carry["h"]) + ns.sum(sums * sums) + ns.sum(hs[1:]) + carry["n"]


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_jax_in_values_and_gradients(reverse):
    def tidu_loss(w, xs):
        carry, ys = lax.scan(lambda c, x: (tnp.sin(c * x) + c, c * x), tnp.ones(3), xs,
                             reverse=reverse)
        return tnp.sum(carry) + tnp.sum(ys * ys)

    def jax_loss(w, xs):
        carry, ys = jax.lax.scan(lambda c, x: (jnp.sin(c * x) + c, c * x), jnp.ones(3), xs,
                                 reverse=reverse)
        return jnp.sum(carry) + jnp.sum(ys * ys)

    np.testing.assert_allclose(tidu_loss(W, XS), jax_loss(W, XS), rtol=1e-13)
    np.testing.assert_allclose(tnp.grad(tidu_loss, argnums=1)(W, XS),
                               jax.grad(jax_loss, argnums=1)(W, XS), rtol=1e-12)


def test_scan_with_pytree_carry_and_outputs_under_every_transform():
    want = rnn(jnp, jax.lax, W, XS)
    want_grad = jax.grad(rnn, argnums=2)(jnp, jax.lax, W, XS)
    loss = lambda w, xs: rnn(tnp, lax, w, xs)                           # noqa: E731
    np.testing.assert_allclose(loss(W, XS), want, rtol=1e-13)
    np.testing.assert_allclose(tnp.jit(loss)(W, XS), want, rtol=1e-13)
    np.testing.assert_allclose(tnp.grad(loss)(W, XS), want_grad, rtol=1e-12)
    np.testing.assert_allclose(tnp.jit(tnp.grad(loss))(W, XS), want_grad, rtol=1e-12)
    np.testing.assert_allclose(tnp.grad(loss)(W, XS), numeric_grad(lambda w: loss(w, XS), W),
                               rtol=1e-6, atol=1e-8)
    batched = tnp.vmap(loss, in_axes=(None, 0))(W, np.stack([XS, 2 * XS]))
    np.testing.assert_allclose(batched, [want, rnn(jnp, jax.lax, W, 2 * XS)], rtol=1e-13)


def test_scan_on_eager_tensors_backpropagates():
    w = tnp.tensor(W, requires_grad=True)
    rnn(tnp, lax, w, XS).backward()
    np.testing.assert_allclose(w.grad, jax.grad(rnn, argnums=2)(jnp, jax.lax, W, XS),
                               rtol=1e-12)


def test_scan_without_xs_and_of_length_zero():
    assert lax.scan(lambda c, _: (c + 1, None), 0, length=3) == (3, None)
    carry, ys = lax.scan(lambda c, x: (c + x, {"y": x * c}), np.zeros(2), np.zeros((0, 2)))
    assert ys["y"].shape == (0, 2) and ys["y"].dtype == np.float64
    np.testing.assert_array_equal(carry, [0.0, 0.0])
    with pytest.raises(TensorShapeError, match="scan: the leaves of xs"):
        lax.scan(lambda c, x: (c, x), 0.0, (np.ones(3), np.ones(4)))
    with pytest.raises(TensorShapeError, match="scan: the leaves of xs"):
        lax.scan(lambda c, x: (c, x), 0.0, np.ones(3), length=4)
    with pytest.raises(TensorTypeError, match="scan: with no xs, give length"):
        lax.scan(lambda c, x: (c, x), 0.0)
    with pytest.raises(TensorTypeError, match="scan: f must return a pair"):
        lax.scan(lambda c, x: c, 0.0, np.ones(3))


def test_a_carry_that_changes_its_type_is_refused_by_name():
    with pytest.raises(TensorShapeError, match="scan: the carry must keep its shapes"):
        lax.scan(lambda c, x: (tnp.concatenate([c, x[None]]), x), np.zeros(1), np.ones(3))
    with pytest.raises(TensorTypeError, match="fori_loop: the loop value must keep its dtypes"):
        lax.fori_loop(0, 2, lambda i, v: v * np.float64(2.0), np.ones(2, np.float32))
    with pytest.raises(TensorTypeError, match="while_loop: the loop value must keep its "
                                              "structure"):
        lax.while_loop(lambda v: False if isinstance(v, tuple) else True,
                       lambda v: (v, v), np.ones(2))
    with pytest.raises(TensorTypeError, match="scan: y must keep its dtypes"):
        lax.scan(lambda c, x: (c + 1, x.astype(np.float32) if c > 0 else x), 0, np.ones(3))


def test_fori_loop_matches_jax_and_needs_known_bounds():
    def body(i, v):
        return tnp.sin(v) * (i + 1.0)

    def jbody(i, v):
        return jnp.sin(v) * (i + 1.0)

    f = lambda x: tnp.sum(lax.fori_loop(1, 4, body, x))                # noqa: E731
    g = lambda x: jnp.sum(jax.lax.fori_loop(1, 4, jbody, x))           # noqa: E731
    x = np.array([0.3, -0.7])
    np.testing.assert_allclose(f(x), g(x), rtol=1e-14)
    np.testing.assert_allclose(tnp.grad(f)(x), jax.grad(g)(x), rtol=1e-13)
    np.testing.assert_allclose(tnp.jit(tnp.grad(f))(x), jax.grad(g)(x), rtol=1e-13)
    with pytest.raises(ConcretizationError, match="fori_loop: upper is traced"):
        tnp.jit(lambda x, n: lax.fori_loop(0, n, body, x))(x, 3)
    assert tnp.jit(lambda x, n: lax.fori_loop(0, n, body, x), static_argnums=1)(x, 3) \
        == pytest.approx(lax.fori_loop(0, 3, body, x))
    with pytest.raises(TensorTypeError, match="fori_loop: lower must be an integer"):
        lax.fori_loop(0.5, 3, body, x)
    assert isinstance(ConcretizationError("x"), TiduError)


def test_while_loop_differentiates_each_step_and_refuses_a_traced_condition():
    # x -> x / 2 while x > 1: at x = 6 three steps, so the derivative is 1/8
    f = lambda x: lax.while_loop(lambda v: v > 1.0, lambda v: v / 2.0, x)   # noqa: E731
    assert f(6.0) == 0.75
    assert tnp.grad(f)(6.0) == 0.125
    # a counter in the carry is a Python int: known under jit
    count = lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0),
                                     (0, x))[1]                           # noqa: E731
    np.testing.assert_allclose(tnp.jit(tnp.grad(lambda x: tnp.sum(count(x))))(np.ones(2)),
                               [8.0, 8.0])
    with pytest.raises(ConcretizationError, match="while_loop: the condition is traced"):
        tnp.jit(f)(6.0)


@pytest.mark.parametrize("pred", [True, False])
def test_cond_matches_jax_known_and_traced(pred):
    def f(p, x):
        return tnp.sum(lax.cond(p, lambda v: (tnp.sin(v), v * 2.0), lambda v: (v * v, -v), x)[0])

    def g(p, x):
        return jnp.sum(jax.lax.cond(p, lambda v: (jnp.sin(v), v * 2.0),
                                    lambda v: (v * v, -v), x)[0])
    x = np.array([0.4, 1.3])
    for transform in (lambda h: h, tnp.jit):
        np.testing.assert_allclose(transform(f)(pred, x), g(pred, x), rtol=1e-14)
        np.testing.assert_allclose(transform(tnp.grad(f, argnums=1))(pred, x),
                                   jax.grad(g, argnums=1)(pred, x), rtol=1e-14)


def test_cond_under_vmap_selects_per_example():
    preds = np.array([True, False, True])
    xs = np.array([0.1, 0.2, 0.3])
    out = tnp.vmap(lambda p, x: lax.cond(p, tnp.exp, tnp.log, x))(preds, xs)
    np.testing.assert_allclose(out, np.where(preds, np.exp(xs), np.log(xs)))
    grads = tnp.vmap(tnp.grad(lambda p, x: lax.cond(p, tnp.exp, tnp.log, x), argnums=1))(
        preds, xs)
    np.testing.assert_allclose(grads, np.where(preds, np.exp(xs), 1 / xs))


def test_cond_and_switch_refuse_mismatched_branches_by_name():
    p = np.array(True)
    with pytest.raises(TensorShapeError, match="cond: the false branch's result"):
        tnp.jit(lambda p, x: lax.cond(p, lambda v: v, lambda v: v[:1], x))(p, np.ones(2))
    with pytest.raises(TensorTypeError, match="cond: the false branch's result"):
        tnp.jit(lambda p, x: lax.cond(p, lambda v: (v, v), lambda v: v, x))(p, np.ones(2))
    with pytest.raises(TensorShapeError, match="cond: the predicate must be a scalar"):
        lax.cond(np.array([True, False]), tnp.sin, tnp.cos, np.ones(2))
    with pytest.raises(TensorShapeError, match="switch: branch 1's result"):
        tnp.jit(lambda i, x: lax.switch(i, [lambda v: v, lambda v: v[:1]], x))(0, np.ones(2))
    with pytest.raises(TensorTypeError, match="switch: branches must be"):
        lax.switch(0, [], np.ones(2))


def test_switch_clamps_its_index_known_or_traced():
    branches = [lambda v: v + 1.0, lambda v: v * 3.0, lambda v: tnp.sin(v)]
    jbranches = [lambda v: v + 1.0, lambda v: v * 3.0, lambda v: jnp.sin(v)]
    x = np.array([0.5, 2.0])
    for i in (-2, 0, 1, 2, 7):
        want = jax.lax.switch(i, jbranches, x)
        np.testing.assert_allclose(lax.switch(i, branches, x), want, rtol=1e-15)
        traced = tnp.jit(lambda i, x: lax.switch(i, branches, x))
        np.testing.assert_allclose(traced(np.int64(i), x), want, rtol=1e-15)
        np.testing.assert_allclose(
            tnp.jit(tnp.grad(lambda x, i: tnp.sum(lax.switch(i, branches, x))))(x, np.int64(i)),
            jax.grad(lambda x: jnp.sum(jax.lax.switch(i, jbranches, x)))(x), rtol=1e-15)


def test_map_and_select_match_jax():
    xs = RNG.standard_normal((4, 2, 2))
    np.testing.assert_allclose(lax.map(lambda m: m @ m.T, xs),
                               jax.lax.map(lambda m: m @ m.T, xs), rtol=1e-14)
    np.testing.assert_allclose(
        tnp.grad(lambda xs: tnp.sum(lax.map(lambda m: tnp.linalg.det(m), xs)))(xs),
        jax.grad(lambda xs: jnp.sum(jax.lax.map(lambda m: jnp.linalg.det(m), xs)))(xs),
        rtol=1e-12)
    p = np.array([True, False])
    np.testing.assert_array_equal(lax.select(p, np.ones(2), np.zeros(2)), [1.0, 0.0])


def test_results_are_fresh():
    x = np.array([1.0, 2.0])
    for out in (lax.cond(True, lambda v: v, lambda v: v, x),
                lax.switch(0, [lambda v: v[:]], x),
                lax.fori_loop(0, 0, lambda i, v: v, x),
                lax.while_loop(lambda v: False, lambda v: v, x),
                lax.scan(lambda c, x: (c, None), x, None, length=2)[0],
                lax.scan(lambda c, x: (x, x), 0.0 * x[0], x)[0]):
        assert not np.shares_memory(out, x)
        np.testing.assert_array_equal(x, [1.0, 2.0])
    t = tnp.tensor([1.0, 2.0], requires_grad=True)
    out = lax.cond(True, lambda v: v, lambda v: v, t)
    assert out is not t
    tnp.sum(out * 3.0).backward()
    np.testing.assert_array_equal(t.grad, [3.0, 3.0])
