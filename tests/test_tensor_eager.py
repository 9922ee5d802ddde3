"""The eager tensor front end: ``Tensor``, ``.backward``, ``Gradients``, ``.grad``, ``checkpoint``.

Gradients are checked against hand-derived formulas and central finite
differences; every gradient must keep its operand's shape and dtype (float32
stays float32, complex stays complex, a broadcast operand gets the sum over the
axes it was broadcast along). Complex gradients of a real loss ``L`` follow
tidu's (and PyTorch's) convention ``dL/dRe(z) + i dL/dIm(z)``, so
``grad sum |z|^2 = 2 z``.
"""

from __future__ import annotations

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor import Gradients, Tensor, checkpoint, tensor

from tensor_helpers import REAL, abs2, numeric_grad, random


def tol(dtype):
    return dict(rtol=2e-4, atol=2e-4) if np.dtype(dtype) in (np.float32, np.complex64) \
        else dict(rtol=1e-7, atol=1e-9)


# --- broadcasting: gradients keep the operand's shape and dtype ------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_broadcast_operands_get_gradients_of_their_own_shape_and_dtype(dtype):
    rng = np.random.default_rng(0)
    a_np, b_np = random((3, 1), dtype, rng), random((4,), dtype, rng)
    a, b = tensor(a_np, requires_grad=True), tensor(b_np, requires_grad=True)
    loss = tnp.sum(abs2(a * b))               # sum_ij |a_i|^2 |b_j|^2
    assert loss.shape == () and loss.dtype == REAL.get(np.dtype(dtype), dtype)
    grads = loss.backward()
    ga, gb = grads.grad(a), grads.grad(b)
    assert isinstance(ga, np.ndarray) and isinstance(gb, np.ndarray)
    assert ga.shape == (3, 1) and gb.shape == (4,)
    assert ga.dtype == dtype and gb.dtype == dtype
    # hand-derived: dL/da_i = 2 a_i sum_j |b_j|^2, dL/db_j = 2 b_j sum_i |a_i|^2
    expect_a = 2 * a_np * np.sum(np.abs(b_np) ** 2)
    expect_b = 2 * b_np * np.sum(np.abs(a_np) ** 2)
    np.testing.assert_allclose(ga, expect_a, **tol(dtype))
    np.testing.assert_allclose(gb, expect_b, **tol(dtype))
    # and by finite differences (in double precision)
    fa = lambda v: np.sum(np.abs(v * b_np.astype(np.complex128)) ** 2)
    np.testing.assert_allclose(ga, numeric_grad(fa, a_np), rtol=1e-4, atol=1e-5)
    # .grad of leaves equals Gradients.grad and keeps the dtype
    assert a.grad.dtype == dtype and a.grad.shape == (3, 1)
    np.testing.assert_array_equal(a.grad, ga)


def test_mixed_complex_real_operands_keep_their_kinds():
    rng = np.random.default_rng(1)
    z_np, r_np = random((3, 1), np.complex128, rng), random((4,), np.float64, rng)
    z, r = tensor(z_np, requires_grad=True), tensor(r_np, requires_grad=True)
    prod = z * r
    assert prod.dtype == np.complex128 and prod.shape == (3, 4)
    grads = tnp.sum(abs2(prod)).backward()
    gz, gr = grads.grad(z), grads.grad(r)
    assert gz.dtype == np.complex128 and gz.shape == (3, 1)
    assert gr.dtype == np.float64 and gr.shape == (4,)          # a real operand's gradient is real
    np.testing.assert_allclose(gz, 2 * z_np * np.sum(r_np ** 2), rtol=1e-12)
    np.testing.assert_allclose(gr, 2 * r_np * np.sum(np.abs(z_np) ** 2), rtol=1e-12)


def test_mixed_float32_float64_operands_keep_their_precision():
    rng = np.random.default_rng(2)
    a_np, b_np = random((2, 1), np.float32, rng), random((3,), np.float64, rng)
    a, b = tensor(a_np, requires_grad=True), tensor(b_np, requires_grad=True)
    y = a * b
    assert y.dtype == np.float64                                  # NumPy promotion
    grads = tnp.sum(y * y).backward()
    assert grads.grad(a).dtype == np.float32 and grads.grad(a).shape == (2, 1)
    assert grads.grad(b).dtype == np.float64 and grads.grad(b).shape == (3,)
    a64 = a_np.astype(np.float64)
    np.testing.assert_allclose(grads.grad(a), 2 * a64 * np.sum(b_np ** 2), rtol=1e-6)
    np.testing.assert_allclose(grads.grad(b), 2 * b_np * np.sum(a64 ** 2), rtol=1e-12)


def test_a_leaf_from_the_other_byte_order_differentiates():
    """A big-endian leaf used to fail in backward, blaming a replaced ``.data``: its
    gradient came back in the native dtype NumPy computes in."""
    x = tnp.tensor(np.array([1.0, -2.0], ">f8"), requires_grad=True)
    assert x.dtype == np.float64 and x.dtype.isnative
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, -4.0])
    assert tnp.tensor(np.array([1, 2], ">i4")).dtype.isnative


def test_python_scalars_are_weak_and_float32_stays_float32():
    x_np = np.array([0.5, -1.0, 2.0], np.float32)
    x = tensor(x_np, requires_grad=True)
    y = tnp.sum(tnp.tanh(x * 2.0) + tnp.exp(x) / 3.0 - tnp.sin(x) ** 2 + tnp.sqrt(x * x + 1.0))
    assert y.dtype == np.float32
    g = y.backward().grad(x)
    assert g.dtype == np.float32 and g.shape == (3,)
    x64 = x_np.astype(np.float64)
    expect = (2 * (1 - np.tanh(2 * x64) ** 2) + np.exp(x64) / 3 - 2 * np.sin(x64) * np.cos(x64)
              + x64 / np.sqrt(x64 ** 2 + 1))
    np.testing.assert_allclose(g, expect, rtol=1e-5)


def test_complex64_from_float32_times_imaginary_unit_keeps_float32_gradient():
    x_np = np.array([1.0, -2.0, 0.5], np.float32)
    x = tensor(x_np, requires_grad=True)
    w = x * (1.0 + 2.0j)
    assert w.dtype == np.complex64
    g = tnp.sum(abs2(w)).backward().grad(x)                       # |1+2i|^2 x^2 = 5 x^2
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 10 * x_np, rtol=1e-6)


def test_size_zero_and_size_one_axes():
    a = tensor(np.zeros((0, 3)), requires_grad=True)
    b = tensor(np.ones((1, 3)), requires_grad=True)
    grads = tnp.sum(tnp.exp(a) * b).backward()
    assert grads.grad(a).shape == (0, 3)
    assert grads.grad(b).shape == (1, 3)
    np.testing.assert_array_equal(grads.grad(b), np.zeros((1, 3)))   # summed over an empty axis


def test_operand_used_twice_with_broadcasting_against_itself():
    x_np = np.array([[1.0], [2.0], [-0.5]])
    x = tensor(x_np, requires_grad=True)
    loss = tnp.sum(x * x.T)                                        # (sum x)^2
    g = loss.backward().grad(x)
    assert g.shape == (3, 1)
    np.testing.assert_allclose(g, np.full((3, 1), 2 * x_np.sum()), rtol=1e-12)


def test_shape_functions_against_finite_differences():
    rng = np.random.default_rng(3)
    x_np = rng.standard_normal((2, 3))

    def f(x):
        y = tnp.reshape(x, (3, 2)) * tnp.transpose(x)               # (3,2) * (3,2)
        z = tnp.broadcast_to(tnp.sum(y, axis=1, keepdims=True), (3, 4))
        return tnp.mean(tnp.sin(z) * tnp.mean(y, axis=0, keepdims=True).sum())

    x = tensor(x_np, requires_grad=True)
    out = f(x)
    g = out.backward().grad(x)
    assert g.shape == (2, 3) and g.dtype == np.float64
    np.testing.assert_allclose(g, numeric_grad(f, x_np), rtol=1e-5, atol=1e-6)


def test_astype_round_trip_through_float32():
    x_np = np.array([[1.0, -2.0, 0.25]])
    x = tensor(x_np, requires_grad=True)
    y = tnp.astype(tnp.sum(tnp.astype(x, np.float32) ** 2), np.float64) * 0.5
    assert y.dtype == np.float64
    g = y.backward().grad(x)
    assert g.dtype == np.float64 and g.shape == (1, 3)
    np.testing.assert_allclose(g, x_np, rtol=1e-6)


# --- Gradients: Burn's grad / remove / replace ------------------------------------------


def test_gradients_grad_remove_replace():
    x = tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = tensor(np.array([3.0, 4.0]), requires_grad=True)
    c = tensor(np.array([5.0, 6.0]))                                # no grad
    grads = tnp.sum(x * y + c).backward()
    assert isinstance(grads, Gradients)
    np.testing.assert_array_equal(grads.grad(x), [3.0, 4.0])
    np.testing.assert_array_equal(grads.grad(y), [1.0, 2.0])
    assert grads.grad(c) is None                                     # requires_grad=False: none
    assert x in grads and c not in grads

    removed = grads.remove(x)
    np.testing.assert_array_equal(removed, [3.0, 4.0])
    assert grads.grad(x) is None and x not in grads
    assert grads.remove(x) is None                                   # second remove: absent
    np.testing.assert_array_equal(grads.grad(y), [1.0, 2.0])        # others untouched

    grads.replace(y, np.array([-1.0, -2.0]))
    np.testing.assert_array_equal(grads.grad(y), [-1.0, -2.0])
    grads.replace(x, np.array([7.0, 8.0]))                           # registers an absent one
    np.testing.assert_array_equal(grads.grad(x), [7.0, 8.0])
    grads.replace(c, tensor(np.array([0.5, 0.5])))                   # a Tensor is stored as data
    assert isinstance(grads.grad(c), np.ndarray)
    np.testing.assert_array_equal(grads.grad(c), [0.5, 0.5])


def test_gradients_of_intermediate_tensors():
    x_np = np.array([1.0, -2.0, 3.0])
    x = tensor(x_np, requires_grad=True)
    h = x * 2.0
    k = tnp.sin(h)
    loss = tnp.sum(h * h + k)
    grads = loss.backward()
    np.testing.assert_allclose(grads.grad(k), np.ones(3))
    np.testing.assert_allclose(grads.grad(h), 2 * (2 * x_np) + np.cos(2 * x_np), rtol=1e-12)
    np.testing.assert_allclose(grads.grad(x), 2 * grads.grad(h), rtol=1e-12)
    np.testing.assert_allclose(grads.grad(loss), 1.0)
    assert h.grad is None and k.grad is None and loss.grad is None   # not leaves: no .grad


def test_backward_frees_the_gradients_of_tensors_no_one_holds():
    x = tensor(np.array([0.5, 1.0]), requires_grad=True)
    h = x * 2.0
    loss = tnp.sum(tnp.sin(h) * 3.0 + h)      # sin(h), its scaling and the sum: dropped
    grads = loss.backward()
    assert {x.key, h.key, loss.key} == set(grads._by_key)
    np.testing.assert_allclose(grads.grad(h), 3 * np.cos(h.data) + 1)
    np.testing.assert_allclose(grads.grad(x), 2 * grads.grad(h))
    for _ in range(3000):                     # dead references are dropped, not kept forever
        x * 1.0
    from primitives.tensor.eager import frontend as eager
    assert len(eager._referenced) < 3000


def test_integer_and_boolean_results_do_not_require_grad():
    x = tensor(np.array([1.0, 3.0, 2.0]), requires_grad=True)
    for result in (tnp.argmax(x), x > 1.5, tnp.argsort(x)):
        assert not result.requires_grad                 # as in PyTorch
        np.asarray(result)                              # plain data: converts
    assert (tnp.where(x > 1.5, x, 0.0).sum().backward().grad(x) == [0, 1, 1]).all()


# --- .grad accumulation (PyTorch semantics) ------------------------------------------------


def test_grad_accumulates_over_backward_calls_on_leaves_only():
    x_np = np.array([1.0, 2.0, 3.0], np.float32)
    x = tensor(x_np, requires_grad=True)
    assert x.grad is None
    h = x * x
    g1 = tnp.sum(h).backward()
    np.testing.assert_allclose(x.grad, 2 * x_np)
    assert x.grad.dtype == np.float32
    tnp.sum(tnp.sin(x)).backward()                                   # a second, different graph
    np.testing.assert_allclose(x.grad, 2 * x_np + np.cos(x_np), rtol=1e-6)
    assert x.grad.dtype == np.float32
    assert h.grad is None                                            # non-leaf: never set
    np.testing.assert_allclose(g1.grad(x), 2 * x_np)                 # earlier Gradients unchanged


def test_backward_twice_on_the_same_graph_gives_the_same_gradients_and_accumulates():
    x = tensor(np.array([0.3, -0.7]), requires_grad=True)
    loss = tnp.sum(tnp.exp(x) * x)
    g1 = loss.backward().grad(x)
    g2 = loss.backward().grad(x)
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_allclose(x.grad, 2 * g1, rtol=1e-15)


def test_grad_is_not_set_on_leaves_that_do_not_require_grad():
    x = tensor(np.array([1.0, 2.0]), requires_grad=True)
    c = tensor(np.array([3.0, 4.0]))
    tnp.sum(x * c).backward()
    assert c.grad is None
    np.testing.assert_array_equal(x.grad, [3.0, 4.0])


def test_user_can_update_leaf_grad_in_place():
    x = tensor(np.array([1.0, 2.0]), requires_grad=True)
    g = tnp.sum(x).backward().grad(x)
    x.grad *= 0.5                                                    # a writable copy
    np.testing.assert_array_equal(x.grad, [0.5, 0.5])
    np.testing.assert_array_equal(g, [1.0, 1.0])                     # did not alias Gradients


# --- detach, no trace -----------------------------------------------------------------------


def test_detach_cuts_history():
    x_np = np.array([1.5, -2.0])
    x = tensor(x_np, requires_grad=True)
    d = x.detach()
    assert isinstance(d, Tensor) and not d.requires_grad
    np.testing.assert_array_equal(d.data, x_np)
    grads = tnp.sum(x * x.detach()).backward()                      # d/dx (x * const) = const
    np.testing.assert_array_equal(grads.grad(x), x_np)
    y = tnp.exp(x)
    yd = y.detach()
    assert not yd.requires_grad
    assert not (yd * 3.0).requires_grad
    grads = tnp.sum(yd * x).backward()
    np.testing.assert_allclose(grads.grad(x), np.exp(x_np))          # no path through exp(x)
    assert grads.grad(yd) is None


def test_no_trace_when_nothing_requires_grad(monkeypatch):
    from primitives.tensor.eager import frontend as eager

    calls = []
    real = eager._recorder

    class CountingRecorder:
        key_source = real.key_source

        def record_active(self, *args, **kwargs):
            calls.append(1)
            return real.record_active(*args, **kwargs)

    monkeypatch.setattr(eager, "_recorder", CountingRecorder())
    a = tensor(np.array([1.0, 2.0]))
    b = tensor(np.array([3.0, 4.0]))
    y = tnp.sum(tnp.sin(a * b) + 1.0)
    assert isinstance(y, Tensor) and not y.requires_grad and y._trace is None
    assert calls == []
    np.testing.assert_allclose(y.data, np.sum(np.sin([3.0, 8.0]) + 1.0))
    x = tensor(np.array([1.0]), requires_grad=True)
    assert (x * 2.0).requires_grad and calls == [1]


def test_a_tensors_node_is_its_input_record_while_it_holds_the_data():
    x = tensor(np.array([0.3, 0.7]), requires_grad=True)
    y = tnp.sin(x)
    z = y * y                                   # both inputs: y's node, no new record
    assert z._trace.inputs[0] is y._trace and z._trace.inputs[1] is y._trace
    np.testing.assert_allclose(z.backward(np.ones(2)).grad(x),
                               2 * np.sin([0.3, 0.7]) * np.cos([0.3, 0.7]))
    y.data = np.array([2.0, 3.0])               # rebound: its node no longer holds y's data
    w = y * 1.5
    record = w._trace.inputs[0]
    assert record is not y._trace and record.trace is y._trace
    np.testing.assert_array_equal(record.data, [2.0, 3.0])
    # the rebound data is the value of w; its gradient still flows through sin to x
    np.testing.assert_allclose(w.data, [3.0, 4.5])
    np.testing.assert_allclose(w.backward(np.ones(2)).grad(x), 1.5 * np.cos([0.3, 0.7]))


def test_an_op_of_many_tensors_records():
    # concatenate and stack take one input per array: 8 and more once raised IndexError
    ts = [tensor(np.array([1.0, 2.0]) * k, requires_grad=True) for k in range(12)]
    out = tnp.sum(tnp.stack(ts) ** 2) + tnp.sum(tnp.concatenate(ts))
    grads = out.backward()
    for k, t in enumerate(ts):
        np.testing.assert_allclose(grads.grad(t), 2 * np.array([1.0, 2.0]) * k + 1)


def test_requires_grad_propagates_through_mixed_operands():
    x = tensor(np.array([1.0, 2.0]), requires_grad=True)
    c = tensor(np.array([3.0, 4.0]))
    assert (x + c).requires_grad and (c + x).requires_grad
    assert (2.0 * x).requires_grad and (x / 2.0).requires_grad and (1.0 - x).requires_grad


# --- seeds ------------------------------------------------------------------------------------


def test_zero_dim_backward_with_default_seed():
    x = tensor(np.array(1.5), requires_grad=True)
    y = x * x * x
    assert y.shape == ()
    np.testing.assert_allclose(y.backward().grad(x), 3 * 1.5 ** 2)
    leaf = tensor(np.array(2.0), requires_grad=True)
    np.testing.assert_allclose(leaf.backward().grad(leaf), 1.0)     # the seed itself
    np.testing.assert_allclose(leaf.grad, 1.0)


def test_non_scalar_backward_with_explicit_seed_is_the_vjp():
    w_np = np.array([[1.0, 2.0], [3.0, 4.0]])
    seed = np.array([[1.0, 0.0], [2.0, -1.0]])
    w = tensor(w_np, requires_grad=True)
    grads = (tnp.sin(w) * w).backward(seed)
    np.testing.assert_allclose(grads.grad(w), seed * (np.cos(w_np) * w_np + np.sin(w_np)),
                               rtol=1e-12)
    w2 = tensor(w_np, requires_grad=True)                            # a Tensor seed works too
    g2 = (w2 * 3.0).backward(tensor(seed)).grad(w2)
    np.testing.assert_allclose(g2, 3 * seed)


def test_complex_holomorphic_backward_with_seed_is_ct_times_conj_derivative():
    rng = np.random.default_rng(4)
    z_np, ct = random((3,), np.complex128, rng), random((3,), np.complex128, rng)
    z = tensor(z_np, requires_grad=True)
    g = (tnp.exp(z) * z).backward(ct).grad(z)
    deriv = np.exp(z_np) * (1 + z_np)
    assert g.dtype == np.complex128
    np.testing.assert_allclose(g, ct * np.conj(deriv), rtol=1e-12)


def test_complex_real_loss_abs_squared_gives_two_z():
    z_np = np.array([1.0 + 2.0j, -0.5 + 0.25j, 3.0j])
    z = tensor(z_np, requires_grad=True)
    g = tnp.sum(abs2(z)).backward().grad(z)
    np.testing.assert_allclose(g, 2 * z_np, rtol=1e-15)


# --- checkpoint ---------------------------------------------------------------------------------


def block(v, w):
    return tnp.tanh(tnp.sin(v) * w + v) * w


def test_checkpoint_gives_the_same_gradients_and_recomputes(sin_counter):
    rng = np.random.default_rng(5)
    v_np, w_np = rng.standard_normal((3, 1)), rng.standard_normal((4,))

    v, w = tensor(v_np, requires_grad=True), tensor(w_np, requires_grad=True)
    plain = block(v, w)
    grads = tnp.sum(plain * plain).backward()
    assert sin_counter[0] == 1                       # plain: sin evaluated once, saved for backward

    sin_counter[0] = 0
    vc, wc = tensor(v_np, requires_grad=True), tensor(w_np, requires_grad=True)
    out = checkpoint(block)(vc, wc)
    assert isinstance(out, Tensor) and out.requires_grad and out.shape == (3, 4)
    np.testing.assert_allclose(out.data, plain.data, rtol=1e-15)
    assert sin_counter[0] == 1
    # the whole block is one recorded node whose inputs are the leaves
    node = out._trace
    assert len(node.recorded.graph.operations) > 3
    assert all(item.trace is None for item in node.inputs)
    cgrads = tnp.sum(out * out).backward()
    assert sin_counter[0] >= 2                       # recomputed during backward
    np.testing.assert_allclose(cgrads.grad(vc), grads.grad(v), rtol=1e-12)
    np.testing.assert_allclose(cgrads.grad(wc), grads.grad(w), rtol=1e-12)
    assert cgrads.grad(vc).shape == (3, 1) and cgrads.grad(wc).shape == (4,)
    np.testing.assert_allclose(vc.grad, v.grad, rtol=1e-12)


def test_checkpoint_with_constants_multiple_outputs_and_float32():
    a_np = np.array([0.5, 1.0], np.float32)
    b_np = np.array([2.0, 3.0], np.float32)
    a, b = tensor(a_np, requires_grad=True), tensor(b_np)
    p, q = checkpoint(lambda x, y: (x * y, tnp.sin(x)))(a, b)
    assert p.requires_grad and q.requires_grad
    g = tnp.sum(p + q).backward().grad(a)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, b_np + np.cos(a_np), rtol=1e-6)


def test_checkpoint_without_grad_records_nothing():
    out = checkpoint(block)(tensor(np.ones(2)), tensor(np.ones(2)))
    assert not out.requires_grad and out._trace is None


# --- NumPy arrays on the left of an operator -----------------------------------------------------


def test_numpy_array_on_the_left_of_an_operator_keeps_the_graph():
    x = tensor(np.array([1.0, 2.0]), requires_grad=True)
    c = np.array([3.0, 4.0])
    y = c * x
    assert isinstance(y, Tensor) and y.requires_grad
    np.testing.assert_array_equal(tnp.sum(y).backward().grad(x), c)
    for z in (c + x, c - x, c / x, np.float64(2.0) * x):
        assert isinstance(z, Tensor) and z.requires_grad
    g = tnp.sum(c / x - c + np.float64(2.0) * x).backward().grad(x)
    np.testing.assert_allclose(g, -c / np.array([1.0, 4.0]) + 2.0, rtol=1e-12)


def test_zero_dim_results_and_gradients_are_arrays():
    x = tensor(np.array(2.0), requires_grad=True)
    y = x * x
    assert isinstance(y.data, np.ndarray)
    g = y.backward().grad(x)
    assert isinstance(g, np.ndarray) and g.shape == ()
    assert isinstance(x.grad, np.ndarray)


def test_checkpoint_gives_gradients_to_tensors_captured_by_the_function():
    x = tensor(np.array([1.0, 2.0]), requires_grad=True)
    w = tensor(np.array([3.0, 4.0]), requires_grad=True)
    grads = tnp.sum(checkpoint(lambda a: tnp.sin(a * w))(x)).backward()
    np.testing.assert_allclose(grads.grad(x), np.cos(x.data * w.data) * w.data, rtol=1e-12)
    g = grads.grad(w)
    assert g is not None
    np.testing.assert_allclose(g, np.cos(x.data * w.data) * x.data, rtol=1e-12)


def test_checkpoint_under_a_functional_transform_and_nested():
    x_np = np.array([1.0, 2.0])
    g = tnp.grad(lambda v: tnp.sum(checkpoint(tnp.sin)(v) * v))(x_np)
    np.testing.assert_allclose(g, np.cos(x_np) * x_np + np.sin(x_np), rtol=1e-12)
    x = tensor(x_np, requires_grad=True)
    y = checkpoint(lambda a: checkpoint(tnp.sin)(a) * a)(x)
    np.testing.assert_allclose(tnp.sum(y).backward().grad(x), g, rtol=1e-12)


def test_checkpoint_of_a_function_returning_its_input_twice():
    x = tensor(np.array([1.0, 2.0]), requires_grad=True)
    p, q = checkpoint(lambda a: (a, a))(x)
    np.testing.assert_allclose(tnp.sum(p * q).backward().grad(x), 2 * x.data)


def test_checkpoint_of_identity_and_pass_through_outputs():
    x = tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = checkpoint(lambda a: a)(x)
    np.testing.assert_allclose(tnp.sum(y * y).backward().grad(x), 2 * x.data)
    p, q = checkpoint(lambda a, b: (a * b, b))(x, x)
    np.testing.assert_allclose(tnp.sum(p + q).backward().grad(x), 2 * x.data + 1)


def test_nodes_of_one_op_with_other_active_inputs_get_their_own_plans():
    """Backward finds the plan it last ran for an op by the op's shared record and its
    active slots: nodes of one op whose active inputs differ each run their own."""
    x = tensor(np.float64(0.7), requires_grad=True)
    a = tensor(np.float64(1.3), requires_grad=True)
    b = np.float64(0.9)                        # a constant
    y = x
    for _ in range(3):
        y = y * a                              # both inputs active
        y = y * b                              # the first only (walked first)
        y = b * y                              # the second only
    grads = y.backward()
    np.testing.assert_allclose(grads.grad(x), 1.3 ** 3 * 0.9 ** 6, rtol=1e-14)
    np.testing.assert_allclose(grads.grad(a), 3 * 0.7 * 1.3 ** 2 * 0.9 ** 6, rtol=1e-14)
