"""Eager tensors against a hostile user: writes to arrays, bad ``.grad`` and seeds, pickling.

A recorded op keeps the arrays it read and made for backward. Whatever the user
writes afterwards (the source array, ``t.data``, a handle kept from ``t.data``, a
NumPy constant, an intermediate), backward differentiates the computation that
was recorded, or the write raises; never a wrong gradient. ``.grad``, seeds and
``Gradients.replace`` are checked, a failed backward changes no ``.grad``, and a
tensor pickles as a leaf (as in PyTorch).
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from primitives import tensor as tnp
from primitives.tensor import BackwardError, Tensor, TensorShapeError, TensorTypeError, tensor
from primitives.tensor import buffers
from primitives.tensor.eager import frontend as eager
from tidu import TiduError

X = np.array([1.0, 2.0, -3.0])
X.flags.writeable = False          # a test that reached it through a tensor would fail loudly


def square_sum_grad(t):
    """d/dt sum(t * t) from a fresh backward."""
    return tnp.sum(t * t).backward().grad(t)


# --- the arrays a tensor was made from ------------------------------------------------------


@pytest.mark.parametrize("make", [tensor, Tensor], ids=["tensor", "Tensor"])
def test_writing_the_source_array_after_forward_changes_nothing(make):
    arr = X.copy()
    u = make(arr, requires_grad=True)
    y = tnp.sum(u * u)
    arr[:] = 5.0
    np.testing.assert_array_equal(y.backward().grad(u), 2 * X)
    np.testing.assert_array_equal(u.data, X)
    assert not np.shares_memory(u.data, arr)


def test_writing_the_source_of_a_constant_tensor_changes_nothing():
    c_np = np.array([3.0, 4.0, 5.0])
    c = tensor(c_np)
    w = tensor(X, requires_grad=True)
    y = tnp.sum(w * c)
    c_np[:] = 0.0
    np.testing.assert_array_equal(y.backward().grad(w), [3.0, 4.0, 5.0])


@pytest.mark.parametrize("side", ["left", "right"])
def test_a_numpy_constant_written_after_forward_changes_nothing(side):
    c = np.array([3.0, 4.0, 5.0])
    w = tensor(X, requires_grad=True)
    y = tnp.sum(c * w if side == "left" else w * c)
    c[:] = -1.0
    np.testing.assert_array_equal(y.backward().grad(w), [3.0, 4.0, 5.0])


def test_a_view_of_a_numpy_array_used_as_constant_is_saved_as_it_was():
    base = np.arange(6.0)
    w = tensor(X, requires_grad=True)
    y = tnp.sum(w * base[::2])                    # a view: writing the base would change it
    base[:] = 100.0
    np.testing.assert_array_equal(y.backward().grad(w), [0.0, 2.0, 4.0])


# --- writing through .data -------------------------------------------------------------------


def test_writing_a_saved_leaf_through_data_keeps_the_recorded_gradient():
    p = tensor(X, requires_grad=True)
    y = tnp.sum(p * p)
    p.data[:] = 5.0                                  # PyTorch's `p.data[:] = 5`
    np.testing.assert_array_equal(p.data, [5.0, 5.0, 5.0])
    np.testing.assert_array_equal(y.backward().grad(p), 2 * X)   # y was computed at X
    np.testing.assert_array_equal(square_sum_grad(p), [10.0, 10.0, 10.0])  # new ops see 5


def test_an_optimizer_step_in_place_while_the_loss_is_alive():
    p = tensor(X, requires_grad=True)
    loss = tnp.sum(p * p)
    loss.backward()
    p.data -= 0.25 * p.grad                          # loss (and its saved p) still alive
    np.testing.assert_allclose(p.data, 0.5 * X)
    np.testing.assert_array_equal(loss.backward().grad(p), 2 * X)
    np.testing.assert_allclose(loss.data, np.sum(X * X))


def test_writing_an_intermediate_through_data_keeps_the_recorded_gradient():
    w = tensor(X, requires_grad=True)
    h = w * 2.0
    y = tnp.sum(h * h)
    h.data[:] = 0.0
    np.testing.assert_array_equal(y.backward().grad(w), 8 * X)
    np.testing.assert_array_equal(h.data, 0.0)


def test_writing_a_constant_tensor_through_data_keeps_the_recorded_gradient():
    c = tensor(np.array([3.0, 4.0, 5.0]))
    w = tensor(X, requires_grad=True)
    y = tnp.sum(w * c)
    c.data[0] = 100.0
    np.testing.assert_array_equal(y.backward().grad(w), [3.0, 4.0, 5.0])


def test_a_data_handle_kept_across_an_op_updates_the_tensor_and_never_a_saved_value():
    p = tensor(X, requires_grad=True)
    handle = p.data
    handle[0] = 10.0                                  # nothing saved p yet: updates p
    np.testing.assert_array_equal(p.data, [10.0, 2.0, -3.0])
    y = tnp.sum(p * p)                                # saved a copy: the handle is alive
    handle[1] = 7.0                                   # updates p, as in PyTorch
    handle += 1.0
    np.testing.assert_array_equal(p.data, [11.0, 8.0, -2.0])
    np.testing.assert_array_equal(y.backward().grad(p), [20.0, 4.0, -6.0])
    z = tnp.sum(p * p)
    np.testing.assert_array_equal(z.backward().grad(p), [22.0, 16.0, -4.0])


@pytest.mark.parametrize("view", [lambda a: a[:], lambda a: a.reshape(3), lambda a: a[::-1],
                                  lambda a: np.frombuffer(memoryview(a), a.dtype)])
def test_a_view_of_a_data_handle_never_reaches_a_saved_value(view):
    p = tensor(X, requires_grad=True)
    v = view(p.data)                                  # the handle itself is dropped
    y = tnp.sum(p * p)
    v[...] = 100.0
    np.testing.assert_array_equal(y.backward().grad(p), 2 * X)
    np.testing.assert_array_equal(p.data, 100.0)     # the view wrote into p, as in NumPy
    del v
    z = tnp.sum(p * p)                                # no handle or view left: no copy
    np.testing.assert_array_equal(z.backward().grad(p), 200.0)


def test_assigning_data_the_caller_keeps_views_of_never_reaches_a_saved_value():
    p = tensor(np.zeros(3), requires_grad=True)
    a = X.copy()
    v = a[:]
    p.data = a
    del a                                             # only the view is left
    y = tnp.sum(p * p)
    v[:] = 100.0
    np.testing.assert_array_equal(y.backward().grad(p), 2 * X)


def test_numpy_out_argument_into_data_keeps_the_recorded_gradient():
    p = tensor(X, requires_grad=True)
    y = tnp.sum(p * p)
    np.multiply(p.data, 3.0, out=p.data)
    np.testing.assert_array_equal(p.data, 3 * X)
    np.testing.assert_array_equal(y.backward().grad(p), 2 * X)


def test_assigning_data_keeps_the_recorded_gradient_and_protects_the_new_array():
    p = tensor(X, requires_grad=True)
    y = tnp.sum(p * p)
    new = np.array([1.0, 1.0, 1.0])
    p.data = new                                      # PyTorch's `p.data = new`
    new[0] = 4.0                                      # p shares it until p is used again
    np.testing.assert_array_equal(p.data, [4.0, 1.0, 1.0])
    z = tnp.sum(p * p)                                # saved a copy: the caller holds new
    new[1] = 9.0                                      # updates p, never z's saved value
    np.testing.assert_array_equal(p.data, [4.0, 9.0, 1.0])
    np.testing.assert_array_equal(y.backward().grad(p), 2 * X)
    np.testing.assert_array_equal(z.backward().grad(p), [8.0, 2.0, 2.0])


def test_assigning_a_view_as_data_copies_it():
    base = np.arange(6.0)
    p = tensor(X, requires_grad=True)
    p.data = base[::2]
    y = tnp.sum(p * p)
    base[:] = 100.0
    np.testing.assert_array_equal(y.backward().grad(p), [0.0, 4.0, 8.0])


@pytest.mark.parametrize("make", [tensor, Tensor], ids=["tensor", "Tensor"])
def test_a_tensor_that_requires_grad_cannot_be_copied_into_a_new_leaf(make):
    x = tensor(X, requires_grad=True)
    with pytest.raises(TensorTypeError, match="detach"):
        make(x, requires_grad=True)                   # would be a new leaf: x's gradient lost
    c = make(x.detach())                              # on purpose: a constant copy
    c.data[:] = 0.0
    np.testing.assert_array_equal(x.data, X)


def test_integer_data_cannot_be_assigned_to_a_tensor_that_requires_grad():
    p = tensor(X, requires_grad=True)
    with pytest.raises(TensorTypeError, match="int"):
        p.data = np.array([1, 2, 3])
    np.testing.assert_array_equal(p.data, X)


def test_a_detached_tensor_copies_on_write():
    p = tensor(X, requires_grad=True)
    y = tnp.sum(p * p)
    d = p.detach()
    d.data[:] = 0.0
    np.testing.assert_array_equal(p.data, X)
    np.testing.assert_array_equal(y.backward().grad(p), 2 * X)


def test_a_view_made_by_an_op_copies_on_write():
    p = tensor(np.arange(6.0), requires_grad=True)
    y = tnp.sum(p * p)
    v = tnp.reshape(p.detach(), (2, 3))              # NumPy makes this a view of p's array
    v.data[:] = -1.0
    np.testing.assert_array_equal(p.data, np.arange(6.0))
    np.testing.assert_array_equal(y.backward().grad(p), 2 * np.arange(6.0))


def test_numpy_conversions_are_read_only_views():
    c = tensor(np.array([3.0, 4.0]))
    w = tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = tnp.sum(w * c)
    for array in (np.asarray(c), c.numpy(), np.asarray(tnp.stop_gradient(w))):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 0.0
    np.testing.assert_array_equal(y.backward().grad(w), [3.0, 4.0])


def test_a_numpy_conversion_cannot_be_made_writable_again():
    c = tensor(np.array([1.0, 2.0, 3.0]))
    p = tensor(np.ones(3), requires_grad=True)
    y = tnp.sum(p * c)
    for array in (c.numpy(), np.asarray(c)):
        with pytest.raises(ValueError, match="WRITEABLE"):
            array.flags.writeable = True              # would write into y's saved constant
    np.testing.assert_array_equal(y.backward().grad(p), [1.0, 2.0, 3.0])
    c.data[0] = 5.0                                   # a handle: a copy, the views hold c's array
    np.testing.assert_array_equal(c.data, [5.0, 2.0, 3.0])


def test_reading_data_of_an_unshared_tensor_does_not_copy():
    t = tensor(np.ones(1000))
    first = t.data
    assert t.data is first                            # still the same handle
    u = tnp.exp(tensor(np.zeros(4)))                  # an op result no one else holds
    assert u.data is u.data


def test_a_saved_big_result_is_never_reused_as_an_output_buffer():
    buffers.release_cached_arrays()
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((256, 256)).astype(np.float32)   # above buffers.MIN_BYTES
    x = tensor(x_np, requires_grad=True)
    h = tnp.tanh(x)                                   # a cached buffer, saved by the next ops
    y = tnp.sum(h * h)
    del h
    for _ in range(5):                                # same shape and dtype: ask for buffers
        tnp.exp(tensor(x_np)) * 2.0
        tnp.sin(x) * tnp.cos(x)
    t = np.tanh(x_np)
    np.testing.assert_allclose(y.backward().grad(x), 2 * t * (1 - t * t), rtol=1e-5, atol=1e-6)


def test_reading_data_of_a_buffer_backed_result_then_writing_it_is_safe():
    buffers.release_cached_arrays()
    x_np = np.linspace(-1, 1, 256 * 256).reshape(256, 256)
    x = tensor(x_np, requires_grad=True)
    h = tnp.sin(x)
    y = tnp.sum(h * h)
    h.data[:] = 0.0
    del h
    for _ in range(3):
        tnp.cos(x)
    np.testing.assert_allclose(y.backward().grad(x), 2 * np.sin(x_np) * np.cos(x_np),
                               rtol=1e-12)


def test_data_of_an_unshared_buffer_backed_result_is_the_array_and_never_reused():
    buffers.release_cached_arrays()
    x_np = np.linspace(-1, 1, 256 * 256).reshape(256, 256)
    u = tnp.exp(tensor(x_np))                         # a cached buffer only u holds
    assert buffers.is_cached(u._data)
    handle = u.data
    assert buffers.is_cached(handle)                  # no copy: the cache's reference is idle
    assert handle is u._data
    handle[:] = 5.0
    del u
    for _ in range(4):                                # same shape and dtype: ask for buffers
        v = tnp.exp(tensor(x_np)) * 2.0
        assert not np.shares_memory(v.data, handle)
    assert (handle == 5.0).all()                      # the cache never handed it out again
    x = tensor(x_np, requires_grad=True)
    w = tnp.sin(x)
    y = tnp.sum(w * w)                                # w's array is saved: .data copies
    saved = w._data
    assert buffers.is_cached(saved) and w.data is not saved
    w.data[:] = 0.0
    del saved
    np.testing.assert_allclose(y.backward().grad(x), 2 * np.sin(x_np) * np.cos(x_np),
                               rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["use", "set_item", "subtract", "assign", "take_handle",
                                           "write_handle", "detach_write"]),
                          st.integers(0, 2), st.integers(-12, 12).map(lambda n: n / 4)),
                min_size=1, max_size=12))
def test_any_interleaving_of_writes_and_ops_gives_the_recorded_gradients(actions):
    p = tensor(X, requires_grad=True)
    terms = []                                        # (y_k, coefficient, p's value when recorded)
    handle = None
    for action, i, v in actions:
        if action == "use":
            terms.append((tnp.sum(v * p * p), v, np.array(p.detach())))
        elif action == "set_item":
            p.data[i] = v
        elif action == "subtract":
            p.data -= v
        elif action == "assign":
            p.data = np.full(3, v)
        elif action == "take_handle":
            handle = p.data
        elif action == "write_handle" and handle is not None:
            handle[i] = v                             # p's array, until p.data is replaced
        elif action == "detach_write":
            p.detach().data[i] = v                    # never reaches p
    for y, coefficient, value in terms:
        np.testing.assert_allclose(y.backward().grad(p), 2 * coefficient * value, rtol=1e-12)
        np.testing.assert_allclose(y.item(), coefficient * np.sum(value * value), rtol=1e-12)


# --- .grad, requires_grad and backward checks ---------------------------------------------


@pytest.mark.parametrize("bad, error", [
    (np.ones(2), TensorShapeError),
    (np.ones((3, 1)), TensorShapeError),
    (np.ones(3, np.float32), TensorTypeError),
    (np.ones(3, np.int64), TensorTypeError),
    (np.ones(3, np.complex128), TensorTypeError),
    (np.array(["a", "b", "c"]), TensorTypeError),
    (1.0, TensorShapeError),
])
def test_assigning_a_gradient_of_another_shape_or_dtype_raises(bad, error):
    x = tensor(X, requires_grad=True)
    tnp.sum(x * x).backward()
    with pytest.raises(error, match="gradient of"):
        x.grad = bad
    np.testing.assert_array_equal(x.grad, 2 * X)      # unchanged
    tnp.sum(x).backward()                             # and still usable
    np.testing.assert_array_equal(x.grad, 2 * X + 1)


def test_assigning_a_matching_gradient_or_none_works():
    x = tensor(X.astype(np.float32), requires_grad=True)
    x.grad = np.full(3, 0.5, np.float32)
    tnp.sum(x).backward()
    np.testing.assert_array_equal(x.grad, np.full(3, 1.5, np.float32))
    x.grad = None
    assert x.grad is None


def test_gradients_replace_checks_shape_and_dtype():
    x = tensor(X, requires_grad=True)
    grads = tnp.sum(x * x).backward()
    with pytest.raises(TensorShapeError, match="Gradients.replace"):
        grads.replace(x, np.ones(4))
    with pytest.raises(TensorTypeError, match="Gradients.replace"):
        grads.replace(x, np.ones(3, np.float32))
    np.testing.assert_array_equal(grads.grad(x), 2 * X)
    grads.replace(x, np.zeros(3))
    np.testing.assert_array_equal(grads.grad(x), 0.0)


def test_a_failed_backward_leaves_every_grad_as_it_was():
    a = tensor(X, requires_grad=True)
    b = tensor(X + 1.0, requires_grad=True)
    tnp.sum(a * b).backward()
    before = a.grad.copy(), b.grad.copy()
    y = tnp.sum(b * a)
    a.data = np.ones(4)                               # a's gradient no longer fits a
    with pytest.raises(BackwardError, match=r"shape \(3,\).*shape \(4,\)"):
        y.backward()
    np.testing.assert_array_equal(a.grad, before[0])
    np.testing.assert_array_equal(b.grad, before[1])
    a.data = np.ones(3, np.float32)                   # same shape, another dtype
    with pytest.raises(BackwardError, match="float64.*float32"):
        y.backward()
    np.testing.assert_array_equal(b.grad, before[1])


def test_a_backward_failing_in_the_executor_leaves_every_grad_as_it_was(monkeypatch):
    a = tensor(X, requires_grad=True)
    b = tensor(X, requires_grad=True)
    tnp.sum(a * b).backward()
    before = a.grad.copy(), b.grad.copy()
    y = tnp.sum(a * b) + tnp.sum(tnp.exp(a))

    def fail(*args, **kwargs):
        raise TiduError("executor failed")
    monkeypatch.setattr(eager.EXECUTOR, "add_operands", fail)   # fails half way through
    with pytest.raises(TiduError, match="executor failed"):
        y.backward()
    np.testing.assert_array_equal(a.grad, before[0])
    np.testing.assert_array_equal(b.grad, before[1])


def test_backward_of_a_tensor_that_does_not_require_grad_raises():
    for t in (tnp.sum(tensor(X) * 2.0), tensor(np.array(1.0))):
        with pytest.raises(BackwardError, match="does not require grad"):
            t.backward()


def test_integer_tensors_cannot_be_made_to_require_grad():
    t = tensor(np.array([1, 2, 3]))
    with pytest.raises(TensorTypeError, match="int64"):
        t.requires_grad = True
    assert not t.requires_grad
    with pytest.raises(TensorTypeError):
        tensor(np.array([1, 2]), requires_grad=True)
    with pytest.raises(TensorTypeError):
        Tensor([True, False], requires_grad=True)


def test_requires_grad_of_a_computed_tensor_cannot_be_changed():
    x = tensor(X, requires_grad=True)
    y = x * 2.0
    for value in (False, True):
        with pytest.raises(BackwardError, match="leaf"):
            y.requires_grad = value
    assert y.requires_grad
    np.testing.assert_array_equal(tnp.sum(y).backward().grad(x), 2.0)


def test_a_leaf_made_to_require_grad_after_its_key_exists_gets_its_grad():
    c = tensor(X)
    x = tensor(X, requires_grad=True)
    grads = tnp.sum(c * x).backward()
    assert grads.grad(c) is None                      # made c's key while it needed no grad
    c.requires_grad = True
    tnp.sum(c * c).backward()
    np.testing.assert_array_equal(c.grad, 2 * X)


@pytest.mark.parametrize("seed, match", [
    (np.array(1.0 + 1.0j), "complex seed"),
    (np.array("one"), "dtype"),
    (np.array(None), "dtype"),
    ([[1.0, 2.0], [3.0]], "not an array of numbers"),
    (np.ones(2), "shape"),
    (np.ones((1, 1)), "shape"),
])
def test_a_bad_seed_raises_and_changes_nothing(seed, match):
    x = tensor(np.array(2.0), requires_grad=True)
    y = x * x
    with pytest.raises(BackwardError, match=match):
        y.backward(seed)
    assert x.grad is None
    np.testing.assert_array_equal(y.backward().grad(x), 4.0)


def test_a_seed_of_another_real_dtype_is_cast_and_copied():
    x = tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    seed = np.array([1, 2])                           # integers, as PyTorch accepts
    g = (x * 3.0).backward(seed).grad(x)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, [3.0, 6.0])
    leaf = tensor(np.array([1.0, 2.0]), requires_grad=True)
    leaf_seed = np.array([5.0, 6.0])
    leaf.backward(leaf_seed)
    leaf_seed[:] = 0.0                                # the seed array is not the leaf's .grad
    np.testing.assert_array_equal(leaf.grad, [5.0, 6.0])


def test_a_real_seed_for_a_complex_tensor_and_a_tensor_seed_work():
    z = tensor(np.array([1.0 + 1.0j]), requires_grad=True)
    np.testing.assert_allclose((z * 2.0).backward(np.ones(1)).grad(z), [2.0])
    x = tensor(X, requires_grad=True)
    s = tensor(np.ones(3), requires_grad=True)
    np.testing.assert_array_equal((x * 2.0).backward(s * 3.0).grad(x), 6.0)   # s's value only
    assert s.grad is None


def test_a_one_element_tensor_of_any_shape_defaults_to_seed_one():
    x = tensor(np.array([[2.0]]), requires_grad=True)
    np.testing.assert_array_equal((x * x).backward().grad(x), [[4.0]])


# --- pickling and copying -----------------------------------------------------------------


def test_a_leaf_pickles_with_its_data_and_requires_grad_but_no_grad():
    x = tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    tnp.sum(x * x).backward()
    y = pickle.loads(pickle.dumps(x))
    assert isinstance(y, Tensor) and y.requires_grad and y.grad is None
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.data, [1.0, 2.0])
    np.testing.assert_array_equal(square_sum_grad(y), [2.0, 4.0])
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])  # the original keeps its own
    assert y.key != x.key


def test_a_computed_tensor_pickles_as_a_fresh_leaf_even_after_a_long_chain():
    x = tensor(np.array(0.5), requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    z = pickle.loads(pickle.dumps(y))
    assert z.requires_grad and z._trace is None
    np.testing.assert_array_equal(z.data, 0.5)
    np.testing.assert_array_equal(z.backward().grad(z), 1.0)   # a leaf: its own seed
    assert x.grad is None                             # no path back to x
    c = copy.deepcopy(y)                              # a deep copy keeps the history
    assert c._trace is not None and c.requires_grad and c is not y


def test_pickling_keeps_integer_and_non_grad_tensors():
    t = pickle.loads(pickle.dumps(tensor(np.arange(3))))
    assert not t.requires_grad and t.dtype == np.arange(3).dtype
    np.testing.assert_array_equal(t.data, [0, 1, 2])


def test_a_shallow_copy_is_a_leaf_that_copies_on_write():
    p = tensor(X, requires_grad=True)
    y = tnp.sum(p * p)
    c = copy.copy(p)
    c.data[:] = 0.0
    np.testing.assert_array_equal(p.data, X)
    np.testing.assert_array_equal(y.backward().grad(p), 2 * X)
    assert c.grad is None


# --- bounded caches ---------------------------------------------------------------------------


def test_the_buffer_cache_does_not_keep_a_key_per_shape_ever_seen():
    buffers.release_cached_arrays()
    buffers.set_cache_limit(4 * buffers.MIN_BYTES)
    try:
        for n in range(300):                          # 300 big shapes, each used once
            tnp.exp(tensor(np.zeros((1 << 14) + n)))
        buffers.release_cached_arrays()
        assert len(buffers._cached) <= 4
    finally:
        buffers.set_cache_limit(256 << 20)


def test_the_one_op_graph_cache_is_bounded():
    x = tensor(np.ones(1), requires_grad=True)
    for n in range(1, eager._RECORDED_CACHE_SIZE + 100):   # each op carries its shape
        tnp.broadcast_to(x, (n,))
    assert len(eager._recorded) <= eager._RECORDED_CACHE_SIZE


def test_a_buffer_a_tensor_made_read_only_is_writable_again_when_reused():
    buffers.release_cached_arrays()
    big = tnp.exp(np.zeros((256, 256)))               # NumPy in, NumPy out: a cached buffer
    t = tensor(np.zeros(3), requires_grad=True)
    t.data = big                                      # t adopts it; the op below locks it
    y = tnp.sum(t * t)
    del big, t, y
    np.testing.assert_array_equal(tnp.exp(np.zeros((256, 256))), 1.0)


def test_grad_is_its_own_array_never_the_one_in_gradients():
    x = tensor(X, requires_grad=True)
    y = tensor(X, requires_grad=True)
    grads = tnp.sum(x * 2.0 + y * 2.0).backward()     # one cotangent array could serve both
    x.grad *= 0.5                                     # in place, as gradient clipping does
    np.testing.assert_array_equal(grads.grad(x), 2.0)
    np.testing.assert_array_equal(y.grad, 2.0)


@pytest.mark.parametrize("read_first", ["a", "b", "y", ".grad"])
def test_the_gradients_of_one_backward_never_alias_one_another(read_first):
    a, b = tensor(X, requires_grad=True), tensor(X, requires_grad=True)
    y = a + b                                         # one cotangent serves a, b and y
    grads = y.backward(np.ones(3))
    if read_first == ".grad":
        arrays = [a.grad, b.grad, grads.grad(a), grads.grad(b), grads.grad(y)]
    else:
        order = {"a": [a, b, y], "b": [b, a, y], "y": [y, a, b]}[read_first]
        arrays = [grads.grad(t) for t in order] + [a.grad, b.grad]
    for i, first in enumerate(arrays):
        assert not any(np.shares_memory(first, second) for second in arrays[i + 1:])
        first *= 0.5                                  # in place, as gradient clipping does
        for later in arrays[i + 1:]:
            np.testing.assert_array_equal(later, 1.0)


def test_gradients_of_reshaped_values_are_not_views_of_one_another():
    a = tensor(np.ones((2, 2)), requires_grad=True)
    b = tensor(np.ones((2, 2)), requires_grad=True)
    grads = (a.reshape(4) + b.reshape(4)).backward(np.arange(4.0))
    ga, gb = grads.grad(a), grads.grad(b)
    gb[0, 0] = 99.0
    np.testing.assert_array_equal(ga.ravel(), [0.0, 1.0, 2.0, 3.0])
    x = tensor(np.ones((2, 3)), requires_grad=True)
    y = x.reshape(6)
    grads = y.T.backward(np.arange(6.0))
    grads.grad(y)[0] = 99.0
    assert grads.grad(x)[0, 0] == 0.0


def test_pickling_or_deep_copying_leaves_a_data_handle_writable():
    p = tensor(X, requires_grad=True)
    handle = p.data
    pickle.dumps(p)
    d = copy.deepcopy(p)
    handle[0] = 9.0                                   # still p's own array
    np.testing.assert_array_equal(p.data, [9.0, 2.0, -3.0])
    np.testing.assert_array_equal(d.data, X)


@pytest.mark.parametrize("key", [slice(None), Ellipsis, ()], ids=["colon", "ellipsis", "empty"])
def test_whole_array_indexing_gives_a_new_tensor_not_an_alias_of_its_state(key):
    """``t[:]`` is a new tensor on ``t``'s values (PyTorch's view), not ``t`` itself: an
    alias would share ``t``'s state, so ``u.requires_grad_(False)`` switched ``t``'s
    gradient off and ``u.data = ...`` replaced ``t``'s values, with no error."""
    t = tensor(np.array([1.0, 2.0]), requires_grad=True)
    u = t[key]
    assert u is not t
    with pytest.raises(BackwardError, match="leaf"):
        u.requires_grad_(False)                 # a computed tensor, as in PyTorch
    assert t.requires_grad
    u.data = np.array([7.0, 8.0])
    np.testing.assert_array_equal(t.detach().numpy(), [1.0, 2.0])
    (t[key] * np.array([3.0, 4.0])).sum().backward()
    np.testing.assert_array_equal(t.grad, [3.0, 4.0])
