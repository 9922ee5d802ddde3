"""Eager ``Tensor`` cases a hostile user found (each was a silent wrong gradient, a shared
array, a leak or a raw NumPy error): a ``no_grad`` block inside a checkpointed function,
``t.data = other_tensor``, a ``.grad`` older than a replaced ``.data``, casts to non-numeric
dtypes, one bookkeeping entry per dropped leaf, ``tensor()`` of what holds no numbers, and
the backward of a complex scalar without a seed."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
from primitives import tensor as tnp
from primitives.tensor.eager import frontend

W = np.array([0.5, -1.2, 2.0])


def _constant_inside(v):
    with tnp.no_grad():
        c = v * 10.0                    # a constant: no derivative flows through it
    return (v * c).sum()


def _grad_again_inside(v):
    with tnp.no_grad():
        with tnp.enable_grad():
            c = v * 10.0                # recorded again
    return (v * c).sum()


@pytest.mark.parametrize("policy", [None, "nothing_saveable", "everything_saveable"])
@pytest.mark.parametrize("f, want, second", [(_constant_inside, 10.0 * W, 0.0),
                                             (_grad_again_inside, 20.0 * W, 20.0)])
def test_a_no_grad_block_inside_a_checkpointed_function_is_respected(f, want, second, policy):
    w = tnp.tensor(W, requires_grad=True)
    np.testing.assert_allclose(f(w).backward().grad(w), want)
    np.testing.assert_allclose(tnp.checkpoint(f, policy)(w).backward().grad(w), want)
    np.testing.assert_allclose(tnp.jit(f)(w).backward().grad(w), want)
    # second order: d/dw of sum(grad) is 0 where c is a constant, 20 where it is recorded
    g = tnp.checkpoint(f, policy)(w).backward(create_graph=True).grad(w)
    np.testing.assert_allclose(g.sum().backward().grad(w), np.full(3, second))


def test_checkpoint_inside_no_grad_records_nothing_as_the_function_itself():
    w = tnp.tensor(W, requires_grad=True)
    with tnp.no_grad():
        out = tnp.checkpoint(lambda v: (v * v).sum())(w)
    assert not out.requires_grad
    np.testing.assert_allclose(out.item(), float(np.sum(W * W)))


def test_a_no_grad_block_inside_checkpoint_agrees_with_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    def torch_f(v):
        with torch.no_grad():
            c = v * 10.0
        return (v * c).sum()
    wt = torch.tensor(W, requires_grad=True)
    torch_checkpoint(torch_f, wt, use_reentrant=False).backward()
    w = tnp.tensor(W, requires_grad=True)
    np.testing.assert_allclose(tnp.checkpoint(_constant_inside)(w).backward().grad(w),
                               wt.grad.numpy())


def test_data_set_from_another_tensor_is_never_written_through():
    a = tnp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (a * a).sum()                           # saves a's array for backward
    b = tnp.tensor(np.zeros(3), requires_grad=True)
    b.data = a
    b.data[1] = 50.0                            # b's own copy, taken before the write
    np.testing.assert_array_equal(a.data, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(b.data, [1.0, 50.0, 3.0])
    np.testing.assert_array_equal(y.backward().grad(a), [2.0, 4.0, 6.0])
    a.data[0] = -1.0                            # and the other way round
    np.testing.assert_array_equal(b.data, [1.0, 50.0, 3.0])


def test_an_in_place_update_of_a_tensor_whose_data_came_from_another_keeps_that_one():
    q = tnp.tensor([1.0, 2.0], requires_grad=True)
    w = tnp.exp(q)
    z = (w * w).sum()
    p = tnp.tensor(np.zeros(2))
    p.data = w
    with tnp.no_grad():
        p -= 1.0
    np.testing.assert_allclose(w.data, np.exp([1.0, 2.0]))
    np.testing.assert_allclose(p.data, np.exp([1.0, 2.0]) - 1.0)
    np.testing.assert_allclose(z.backward().grad(q), 2 * np.exp(2 * np.array([1.0, 2.0])))


@pytest.mark.parametrize("new", [np.array([5.0]), np.array([1.0, 2.0, 3.0], np.float32)])
def test_a_grad_older_than_a_replaced_data_raises_by_name_and_none_recovers(new):
    x = tnp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    x.data = new
    with pytest.raises(tidu.TiduError, match=r"\.grad of leaf .* \.data was replaced"):
        (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0, 6.0])      # left as it was
    x.grad = None
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, 2 * new)
    assert x.grad.dtype == new.dtype


@pytest.mark.parametrize("cast", [lambda x: x.astype(object), lambda x: x.astype(str),
                                  lambda x: tnp.asarray(x, dtype=object),
                                  lambda x: tnp.astype(x, np.dtype("V8"))])
def test_a_cast_to_a_non_numeric_dtype_raises_instead_of_dropping_the_derivative(cast):
    x = tnp.tensor([1.5, 2.5], requires_grad=True)
    with pytest.raises(tidu.TiduError, match="astype"):
        cast(x)
    with pytest.raises(tidu.TiduError, match="astype"):
        tnp.grad(lambda v: tnp.sum(cast(v).astype(np.float64)))(np.array([1.5, 2.5]))
    assert x.astype(np.float32).dtype == np.float32             # numbers still convert
    np.testing.assert_array_equal((x * x).sum().backward().grad(x), [3.0, 5.0])


def test_leaves_made_and_dropped_in_a_loop_leave_no_bookkeeping_behind():
    for _ in range(5000):
        x = tnp.tensor(np.ones(2), requires_grad=True)
        (x * x).sum().backward()
    assert len(frontend._shared_grads) < 2100     # swept at twice the live entries + 1024
    kept = tnp.tensor(np.ones(2), requires_grad=True)
    grads = (kept * kept).sum().backward()
    kept.grad[0] = 7.0                            # .grad and Gradients never alias
    np.testing.assert_array_equal(grads.grad(kept), [2.0, 2.0])


@pytest.mark.parametrize("data, error", [([[1.0, 2.0], [3.0]], tidu.TiduError),
                                         (None, TypeError), ("abc", TypeError),
                                         ({"a": 1}, TypeError), ([object()], TypeError),
                                         (np.array(["2020-01-01"], "datetime64[D]"),
                                          TypeError)])
def test_tensor_of_what_holds_no_numbers_raises_by_name(data, error):
    with pytest.raises(tidu.TiduError, match=r"tensor\(\)") as raised:
        tnp.tensor(data)
    assert isinstance(raised.value, error)
    np.testing.assert_array_equal(tnp.tensor([1, 2]).numpy(), [1, 2])


def _detached_inside(v):
    c = v.detach() * 10.0                       # eager code: a constant
    return (v * c).sum()


def test_eager_code_calling_detach_runs_under_checkpoint_and_the_transforms():
    w = tnp.tensor(W, requires_grad=True)
    want = 10.0 * W
    np.testing.assert_allclose(_detached_inside(w).backward().grad(w), want)
    np.testing.assert_allclose(tnp.checkpoint(_detached_inside)(w).backward().grad(w), want)
    np.testing.assert_allclose(tnp.grad(_detached_inside)(W), want)
    np.testing.assert_allclose(tnp.jit(tnp.grad(_detached_inside))(W), want)


@pytest.mark.parametrize("name", ["numpy", "grad", "backward", "requires_grad", "data"])
def test_the_eager_only_api_on_a_traced_value_says_what_to_use(name):
    w = tnp.tensor(W, requires_grad=True)
    with pytest.raises(tnp.TensorAttributeError,      # an AttributeError: hasattr is false
                       match=rf"'{name}' of a traced value: inside checkpoint"):
        tnp.checkpoint(lambda v: getattr(v, name))(w)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        tnp.jit(lambda v: v.no_such_name)(W)
    np.testing.assert_allclose(tnp.checkpoint(lambda v: (v * v).sum())(w).item(),
                               float(W @ W))


def test_backward_of_a_complex_scalar_needs_a_seed_as_in_pytorch():
    # a seed of 1 differentiated the real part only, silently
    x = tnp.tensor(np.array(1.0 + 1.0j), requires_grad=True)
    z = x * (1.0 + 2.0j)
    with pytest.raises(tnp.BackwardError, match=r"complex tensor \(complex128\) needs a seed"):
        z.backward()
    np.testing.assert_allclose(z.backward(seed=1.0).grad(x), 1.0 - 2.0j)   # asked for
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="only for real scalar outputs"):
        (torch.tensor(1.0 + 1.0j, requires_grad=True) * (1.0 + 2.0j)).backward()
    np.testing.assert_allclose(tnp.abs(z).backward().grad(x),    # a real loss: |x| |1 + 2i|
                               (1.0 + 1.0j) / abs(1.0 + 1.0j) * abs(1.0 + 2.0j))
