"""``.grad`` takes backward's gradient array without a copy, and never aliases the
``Gradients`` that backward returned, another leaf's ``.grad``, or a later backward's."""

import gc

import numpy as np

import primitives.tensor as tnp
from primitives.tensor.eager import frontend


def _leaves():
    a = tnp.tensor([1.0, 2.0], requires_grad=True)
    b = tnp.tensor([3.0, 4.0], requires_grad=True)
    return a, b


def test_a_dropped_gradients_object_costs_no_copy(monkeypatch):
    copies = []
    real = frontend._fresh
    monkeypatch.setattr(frontend, "_fresh", lambda v: copies.append(v) or real(v))
    a, b = _leaves()
    (a * b).sum().backward()                 # the Gradients are dropped at once
    gc.collect()
    np.testing.assert_array_equal(a.grad, [3.0, 4.0])
    np.testing.assert_array_equal(b.grad, [1.0, 2.0])
    assert copies == []


def test_writing_grad_in_place_leaves_the_gradients_alone():
    a, b = _leaves()
    grads = (a * b).sum().backward()
    a.grad[:] = 0.0                          # an optimizer zeroing in place
    np.testing.assert_array_equal(grads.grad(a), [3.0, 4.0])
    np.testing.assert_array_equal(a.grad, [0.0, 0.0])
    assert not np.shares_memory(grads.grad(a), a.grad)


def test_writing_the_gradients_in_place_leaves_grad_alone():
    a, b = _leaves()
    grads = (a * b).sum().backward()
    g = grads.grad(b)
    g *= 10.0
    np.testing.assert_array_equal(b.grad, [1.0, 2.0])
    removed = grads.remove(a)
    removed[:] = -1.0
    np.testing.assert_array_equal(a.grad, [3.0, 4.0])


def test_accumulation_and_replacement_break_the_sharing():
    a, b = _leaves()
    grads = (a * b).sum().backward()
    (a * b).sum().backward()                 # .grad becomes a new array, a sum
    np.testing.assert_array_equal(a.grad, [6.0, 8.0])
    np.testing.assert_array_equal(grads.grad(a), [3.0, 4.0])
    a.grad = None
    a.grad = np.zeros(2)
    grads.replace(a, np.full(2, 7.0))
    np.testing.assert_array_equal(a.grad, [0.0, 0.0])
    np.testing.assert_array_equal(grads.grad(a), [7.0, 7.0])


def test_one_cotangent_for_two_leaves_is_never_shared_between_them():
    a, b = _leaves()
    c = tnp.tensor([[1.0, 2.0]], requires_grad=True)
    (a + b + c.reshape(2)).sum().backward()
    grads = [a.grad, b.grad, c.grad]
    for i in range(3):
        for j in range(i + 1, 3):
            assert not np.shares_memory(grads[i], grads[j])
    a.grad[:] = 5.0
    np.testing.assert_array_equal(b.grad, [1.0, 1.0])
    np.testing.assert_array_equal(c.grad, [[1.0, 1.0]])


def test_gradients_with_history_are_tensors_on_one_array():
    a, _ = _leaves()
    grads = (a * a).sum().backward(create_graph=True)
    assert isinstance(a.grad, tnp.Tensor) and grads.grad(a) is not a.grad
    assert grads.grad(a).key == a.grad.key and grads.grad(a)._data is a.grad._data


def test_one_array_for_two_keys_is_handed_to_one_leaf_only():
    # backward gives each key its own array today; the handover must not rely on it
    a, b = _leaves()
    a.key, b.key                              # (leaves get their keys on first use)
    same = np.ones(2)
    cotangents = {a.key: same, b.key: same}
    grads = frontend.Gradients(cotangents)
    frontend._accumulate_into_leaves(cotangents, grads)
    del grads, cotangents                     # dropped: reading .grad copies nothing
    gc.collect()
    assert not np.shares_memory(a.grad, b.grad)
