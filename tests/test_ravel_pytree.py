"""``ravel_pytree`` with ``jax.flatten_util.ravel_pytree``'s semantics, in every front end."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.errors import TensorShapeError, TensorTypeError
from primitives.tensor.transforms.flatten import ravel_pytree

from tensor_helpers import numeric_grad

TREE = {"w": np.arange(6.0).reshape(2, 3), "b": np.array([10.0, 20.0]),
        "layers": [np.array(7.0), (np.array([[1.0], [2.0]]), None)]}


def test_flat_order_and_round_trip():
    flat, unravel = ravel_pytree(TREE)
    # dict keys sorted ("b", "layers", "w"), lists and tuples in order, None empty
    np.testing.assert_array_equal(flat, [10.0, 20.0, 7.0, 1.0, 2.0, 0, 1, 2, 3, 4, 5])
    back = unravel(flat)
    assert back.keys() == TREE.keys() and back["layers"][1][1] is None
    assert type(back["layers"]) is list and type(back["layers"][1]) is tuple
    for a, b in zip(tnp_leaves(back), tnp_leaves(TREE)):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def tnp_leaves(tree):
    from primitives.tensor.transforms.pytree import tree_flatten
    return tree_flatten(tree)[0]


def test_matches_jax():
    jax = pytest.importorskip("jax")
    from jax.flatten_util import ravel_pytree as jax_ravel
    tree = {"a": np.ones((2, 2), np.float32), "b": [np.arange(3), np.array(1.5)]}
    with jax.enable_x64(True):
        want, _ = jax_ravel(tree)
    flat, unravel = ravel_pytree(tree)
    np.testing.assert_array_equal(flat, np.asarray(want))
    assert flat.dtype == np.asarray(want).dtype == np.float64
    back = unravel(flat)
    assert back["a"].dtype == np.float32 and back["b"][0].dtype == np.arange(3).dtype


def test_dtypes():
    flat, unravel = ravel_pytree([np.ones(2, np.float32), np.ones(3, np.float32)])
    assert flat.dtype == np.float32
    # one dtype: unravel keeps the vector's (as JAX's)
    assert unravel(np.zeros(5))[0].dtype == np.float64
    flat, unravel = ravel_pytree([np.ones(2, np.float32), np.arange(2)])
    assert flat.dtype == np.float64
    with pytest.raises(TensorTypeError, match="unravel"):
        unravel(np.zeros(4, np.float32))
    flat, unravel = ravel_pytree([np.array([1.0 + 2.0j]), np.array([3.0])])
    assert flat.dtype == np.complex128
    assert unravel(flat)[1].dtype == np.float64


def test_numbers_and_empty_trees():
    flat, unravel = ravel_pytree((1.5, 2))
    np.testing.assert_array_equal(flat, [1.5, 2.0])
    a, b = unravel(flat)
    assert a.shape == () and b.dtype == np.asarray(2).dtype
    flat, unravel = ravel_pytree({"x": None, "y": []})
    assert flat.shape == (0,)
    assert unravel(flat) == {"x": None, "y": []}


def test_wrong_shape_is_refused():
    _, unravel = ravel_pytree(TREE)
    with pytest.raises(TensorShapeError, match="unravel.*11"):
        unravel(np.zeros(10))
    with pytest.raises(TensorShapeError, match="unravel"):
        unravel(np.zeros((11, 1)))


def test_no_aliasing():
    params = {"w": np.ones(3)}
    flat, unravel = ravel_pytree(params)
    flat[0] = 5.0
    assert params["w"][0] == 1.0
    v = np.zeros(3)
    out = unravel(v)
    v[0] = 9.0
    assert out["w"][0] == 0.0


def loss(tree):
    return (tnp.sum(tree["w"] ** 2) + tnp.sum(tnp.sin(tree["b"]) * tree["layers"][0])
            + tnp.sum(tree["layers"][1][0] ** 3))


def test_differentiable_in_every_transform():
    flat, unravel = ravel_pytree(TREE)
    f = lambda v: loss(unravel(v))                          # noqa: E731
    want = numeric_grad(lambda v: float(f(v)), flat)
    np.testing.assert_allclose(tnp.grad(f)(flat), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tnp.jit(tnp.grad(f))(flat), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(tnp.grad(tnp.jit(f))(flat), want, rtol=1e-6, atol=1e-6)
    batch = np.stack([flat, 2 * flat])
    np.testing.assert_allclose(tnp.vmap(tnp.grad(f))(batch)[0], want, rtol=1e-6, atol=1e-6)
    hess = tnp.hessian(f)(flat)
    assert hess.shape == (11, 11)
    np.testing.assert_allclose(hess, hess.T)
    # and the gradient of the tree as a tree, flattened, is the gradient in flat
    grads = tnp.grad(loss)(TREE)
    np.testing.assert_allclose(ravel_pytree(grads)[0], want, rtol=1e-6, atol=1e-6)


def test_ravel_inside_transforms():
    """ravel_pytree itself under grad / jit / vmap, and on eager tensors."""
    def g(w, b):
        flat, _ = ravel_pytree({"w": w, "b": b})
        return tnp.sum(flat ** 2)

    w, b = np.arange(3.0), np.array([2.0])
    np.testing.assert_allclose(tnp.grad(g, argnums=(0, 1))(w, b)[0], 2 * w)
    np.testing.assert_allclose(tnp.jit(tnp.grad(g))(w, b), 2 * w)
    np.testing.assert_allclose(tnp.vmap(g)(np.stack([w, w]), np.stack([b, b])), [9.0, 9.0])
    tw = tnp.tensor(w, requires_grad=True)
    flat, unravel = ravel_pytree({"w": tw, "b": b})
    assert isinstance(flat, tnp.Tensor)
    out = unravel(flat * 3)
    assert isinstance(out["w"], tnp.Tensor)
    np.testing.assert_allclose(tnp.sum(out["w"]).backward().grad(tw), [3.0, 3.0, 3.0])


def test_unravel_is_hashable_and_a_static_argument():
    flat, unravel = ravel_pytree(TREE)
    _, again = ravel_pytree({k: v for k, v in TREE.items()})
    assert unravel == again and hash(unravel) == hash(again)
    f = tnp.jit(lambda v, un: loss(un(v)), static_argnums=1)
    np.testing.assert_allclose(f(flat, unravel), loss(TREE))
