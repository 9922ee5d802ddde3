"""Hostile round 56b: forward mode and higher-order derivatives across the op surface
at the points where rules are delicate, against JAX, PyTorch and finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from primitives import tensor as tnp

_X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
_MASK = np.array([[True, False, True], [False, False, False]])   # second row left out
_W = np.arange(6.0).reshape(2, 3)


def test_softmax_family_take_jax_where_mask() -> None:
    # Was wrong: jax.nn.softmax(x, where=mask) (attention masks), log_softmax and
    # logsumexp with where= raised Python's TypeError (unexpected keyword argument)
    e = np.exp(np.array([1.0, 3.0]))
    p = e / e.sum()
    assert np.allclose(tnp.nn.softmax(_X, where=_MASK), [[p[0], 0, p[1]], [0, 0, 0]])
    with np.errstate(divide="ignore"):
        assert np.allclose(tnp.nn.log_softmax(_X, where=_MASK),
                           np.log([[p[0], 0, p[1]], [0, 0, 0]]), rtol=1e-13, atol=0)
    assert np.allclose(tnp.nn.logsumexp(_X, axis=1, where=_MASK),
                       [np.log(e.sum()), -np.inf])
    # gradient: the softmax Jacobian on the kept entries, zero on the masked ones
    grad = tnp.grad(lambda a: tnp.sum(tnp.nn.softmax(a, where=_MASK) * _W))(_X)
    kept = p * (np.array([0.0, 2.0]) - p @ np.array([0.0, 2.0]))
    assert np.allclose(grad, [[kept[0], 0, kept[1]], [0, 0, 0]], rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
def test_masked_softmax_family_second_order_matches_jax(name) -> None:
    # Was wrong: where= raised TypeError; now the Hessian (a fully masked row included)
    # is JAX's in every nesting, finite, under jit and vmap too
    jax = pytest.importorskip("jax", reason="JAX is the reference for jax.nn's where=")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    if name == "logsumexp":
        ours = lambda a: tnp.sum(tnp.exp(tnp.nn.logsumexp(a, axis=1, where=_MASK)))  # noqa: E731
        ref = lambda a: jnp.sum(jnp.exp(jax.nn.logsumexp(a, axis=1, where=_MASK)))   # noqa: E731
    else:
        ours = lambda a: tnp.sum(tnp.where(_MASK, getattr(tnp.nn, name)(a, where=_MASK),  # noqa: E731
                                           0.0) * _W)
        ref = lambda a: jnp.sum(jnp.where(_MASK, getattr(jax.nn, name)(a, where=_MASK),  # noqa: E731
                                          0.0) * _W)
    expected = np.asarray(jax.hessian(ref)(_X))
    assert np.isfinite(expected).all()
    for hessian in (tnp.hessian(ours), tnp.jacrev(tnp.jacrev(ours)), tnp.jit(tnp.hessian(ours))):
        assert np.allclose(hessian(_X), expected, rtol=1e-10, atol=1e-12)
    per_row = tnp.vmap(lambda a, m: getattr(tnp.nn, name)(a, where=m))(_X, _MASK)
    assert np.array_equal(per_row, getattr(tnp.nn, name)(_X, axis=-1, where=_MASK)
                          if name != "logsumexp" else tnp.nn.logsumexp(_X, axis=1, where=_MASK))


def test_masked_softmax_keeps_float32() -> None:
    # Was wrong: where= raised TypeError; the masked fill must not promote float32
    x32 = _X.astype(np.float32)
    for out in (tnp.nn.softmax(x32, where=_MASK), tnp.nn.log_softmax(x32, where=_MASK),
                tnp.nn.logsumexp(x32, axis=1, where=_MASK)):
        assert out.dtype == np.float32
