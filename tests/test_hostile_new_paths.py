"""Hostile uses of what issues 13, 15 and 16 added: each differentiates correctly or raises a
TiduError naming the culprit; none drops a gradient silently."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import ConcretizationError, TensorShapeError, TensorTypeError
from primitives.tensor.transforms.pytree import tree_flatten, tree_unflatten
from tidu import TiduError

XS = np.arange(6.0).reshape(3, 2)


def test_vmap_and_jit_closing_over_an_eager_tensor_keep_its_gradient():
    w = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    g = tnp.sum(tnp.vmap(lambda x: tnp.sum(x * w))(XS)).backward().grad(w)
    np.testing.assert_allclose(g, XS.sum(axis=0))
    w2 = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    g2 = tnp.sum(tnp.jit(lambda x: x * w2)(XS)).backward().grad(w2)
    np.testing.assert_allclose(g2, XS.sum(axis=0))


def test_grad_closing_over_an_eager_tensor_returns_a_tensor_with_history():
    w = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    g = tnp.grad(lambda x: tnp.sum(x * x * w))(XS[1])           # 2 x w, depends on w
    assert isinstance(g, tnp.Tensor) and g.requires_grad
    np.testing.assert_allclose(tnp.sum(g).backward().grad(w), 2 * XS[1])


@pytest.mark.parametrize("convert", [float, int, complex])
def test_conversions_under_vmap_raise_a_concretization_error(convert):
    with pytest.raises(ConcretizationError, match=f"{convert.__name__}\\(\\).*vmap"):
        tnp.vmap(lambda v: convert(v[0]) * v)(XS)


def test_in_place_numpy_methods_and_numpy_sort_on_tensors():
    t = tnp.tensor(XS[:, ::-1].copy(), requires_grad=True)
    with pytest.raises(TensorTypeError, match="sort.*immutable"):
        t.sort()
    weights = np.arange(6.0).reshape(3, 2)
    g = tnp.sum(np.sort(t, axis=1) * weights).backward().grad(t)   # NumPy's sort dispatches
    np.testing.assert_allclose(g, weights[:, ::-1])


def test_interp_keeps_the_gradient_of_a_tensor_query():
    x = tnp.tensor(np.array([0.25, 1.5]), requires_grad=True)
    y = tnp.interp(x, np.array([0.0, 1.0, 2.0]), np.array([0.0, 2.0, 3.0]))
    np.testing.assert_allclose(tnp.sum(y).backward().grad(x), [2.0, 1.0])
    np.testing.assert_allclose(    # under jit x's segments are found by comparisons
        tnp.jit(lambda v: tnp.interp(v, np.array([0.0, 1.0]), np.array([0.0, 2.0])))(
            np.array([0.5, -1.0, 3.0])), [1.0, 0.0, 2.0])


def test_vmap_of_grad_from_many_threads_gives_every_thread_its_own_result():
    def per_example(scale):
        return tnp.vmap(tnp.grad(lambda v: tnp.sum(tnp.sin(v * scale))))(XS)

    results, errors = {}, []

    def work(i):
        try:
            results[i] = per_example(float(i + 1))
        except Exception as error:                 # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for i, got in results.items():
        s = float(i + 1)
        np.testing.assert_allclose(got, s * np.cos(XS * s), rtol=1e-12)


def test_create_graph_gradients_keep_their_history_across_calls():
    x = tnp.tensor(np.array([0.3, -0.4]), requires_grad=True)
    (g,) = tnp.autograd.grad(tnp.sum(x ** 3), [x], create_graph=True)
    (h,) = tnp.autograd.grad(tnp.sum(g), [x])                     # d/dx sum(3x^2) = 6x
    np.testing.assert_allclose(h, 6 * x.data)
    with pytest.raises(TiduError):
        tnp.autograd.grad(tnp.sum(x * 2.0), [tnp.tensor(np.ones(2), requires_grad=True)])


def test_vjp_fn_is_not_changed_by_writing_to_the_primal_afterwards():
    """``vjp_fn`` outlives ``vjp``: writing to the caller's array before calling it must not
    change the cotangent (it differentiates at the values ``vjp`` was given)."""
    x = np.array([1.0, 2.0])
    _, vjp_fn = tnp.vjp(lambda v: tnp.sum(v * v), x)
    x[0] = 100.0
    np.testing.assert_allclose(vjp_fn(np.array(1.0))[0], [2.0, 4.0])


def test_vjp_fn_is_not_changed_by_writing_to_what_f_closed_over():
    c = np.array([3.0, 4.0])
    _, vjp_fn = tnp.vjp(lambda v: tnp.sum(tnp.reshape(v, (2,)) * c), np.ones(2))
    c[0] = 100.0                      # reshape's view and the product both read c's old values
    np.testing.assert_allclose(vjp_fn(np.array(1.0))[0], [3.0, 4.0])


@pytest.mark.parametrize("make", [
    lambda n: tnp.zeros(n), lambda n: tnp.ones((n, 2)), lambda n: tnp.empty([2, n]),
    lambda n: tnp.full(n, 1.0), lambda n: tnp.reshape(tnp.ones(4), (n, -1))])
@pytest.mark.parametrize("transform", ["jit", "vmap"])
def test_a_traced_shape_raises_a_concretization_error_naming_the_function(make, transform):
    # NumPy's own TypeError ("expected a sequence of integers") did not say why
    function = getattr(tnp, transform)(make)
    with pytest.raises(ConcretizationError, match=rf"^\w+: a dimension of the shape.*{transform}"):
        function(np.array(2) if transform == "jit" else np.array([2, 2]))
    # concrete values (a 0-d tensor, grad's traced values) are still shapes
    assert tnp.zeros(tnp.tensor(2)).shape == (2,)
    assert tnp.grad(lambda x: tnp.sum(tnp.ones_like(make(np.int64(2))) * x))(1.0) == make(2).size


@pytest.mark.parametrize("count", [0, 1, 3])
def test_tree_unflatten_with_the_wrong_number_of_leaves_names_itself(count):
    # fewer leaves raised StopIteration, more a bare ValueError
    _, structure = tree_flatten((1.0, [2.0]))
    with pytest.raises(TensorShapeError, match=f"tree_unflatten: {count} leaves"):
        tree_unflatten(structure, [0.0] * count)
    with pytest.raises(TensorTypeError, match="tree_unflatten: the structure must be a TreeDef"):
        tree_unflatten((1.0, [2.0]), [0.0, 0.0])
    assert tree_unflatten(structure, [3.0, 4.0]) == (3.0, [4.0])
