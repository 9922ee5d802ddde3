"""Hostile round 55a: the eager Tensor used as a PyTorch user would (``.data`` assignment,
``backward``'s and ``autograd.grad``'s keyword arguments, ``retain_grad``), compared with
torch where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import autograd
from primitives.tensor.errors import (BackwardError, TensorNotSupportedError, TensorShapeError,
                                      TensorTypeError)


# Was wrong: ``t.data = None`` (or a string, an object) was accepted, leaving a tensor of
# dtype object whose next op raised NumPy's TypeError; a ragged list raised NumPy's ValueError.
@pytest.mark.parametrize("value", [None, "ab", object(), {"a": 1}, np.array(["a", "b"])])
def test_assigning_data_that_holds_no_numbers_is_refused(value):
    t = tnp.tensor([1.0, 2.0])
    with pytest.raises(TensorTypeError, match=r"\.data"):
        t.data = value
    with pytest.raises(TensorShapeError, match=r"\.data"):
        t.data = [[1.0], [1.0, 2.0]]
    assert np.array_equal((t + 1).data, [2.0, 3.0])      # t is unchanged and usable


# Was wrong: ``x.data = arr`` with ``arr`` in the other byte order (">f8", as files give)
# kept that dtype, so the next backward refused the leaf's float64 gradient as "another
# dtype" (tensor() already converts such arrays to this machine's order).
def test_assigning_data_in_the_other_byte_order_keeps_backward_working():
    other = ">f8" if np.little_endian else "<f8"
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    tnp.sum(x * x).backward()
    arr = np.array([3.0, 4.0], dtype=other)
    x.data = arr
    assert x.dtype == np.float64 and x.dtype.isnative
    tnp.sum(x * x).backward()
    assert np.array_equal(x.grad, [2.0 + 6.0, 4.0 + 8.0])
    arr[:] = 0.0                                      # a copy: the caller's array is not x's
    assert np.array_equal(x.data, [3.0, 4.0])


def _torch():
    return pytest.importorskip("torch")


# Was wrong: ``loss.backward(retain_graph=True)`` and ``y.backward(gradient=g)``, PyTorch's
# everyday keywords, raised Python's TypeError (an unexpected keyword argument).
def test_backward_takes_pytorchs_retain_graph_and_gradient_keywords():
    torch = _torch()
    x0 = np.array([0.3, -1.2, 2.0])
    x = tnp.tensor(x0, requires_grad=True)
    y = tnp.sin(x) * x
    y.backward(gradient=np.array([1.0, 2.0, 3.0]), retain_graph=True)
    y.backward(np.ones(3), retain_graph=False)
    tx = torch.tensor(x0, requires_grad=True)
    ty = torch.sin(tx) * tx
    ty.backward(gradient=torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), retain_graph=True)
    ty.backward(torch.ones(3, dtype=torch.float64))
    assert np.allclose(x.grad, tx.grad.numpy(), rtol=1e-14)
    with pytest.raises(BackwardError, match="seed and gradient"):
        y.backward(np.ones(3), gradient=np.ones(3))


# Was wrong: ``loss.backward(inputs=[w, h])`` (accumulate into those tensors' .grad only,
# a computed ``h`` too) raised TypeError.
def test_backward_inputs_accumulates_into_those_tensors_only():
    torch = _torch()
    x0, w0 = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    x, w = (tnp.tensor(v, requires_grad=True) for v in (x0, w0))
    h = x * w
    grads = tnp.sum(h ** 2).backward(inputs=[w, h])
    tx, tw = (torch.tensor(v, requires_grad=True) for v in (x0, w0))
    th = tx * tw
    (th ** 2).sum().backward(inputs=[tw, th])
    assert x.grad is None and tx.grad is None
    assert np.allclose(w.grad, tw.grad.numpy()) and np.allclose(h.grad, th.grad.numpy())
    assert grads.grad(x) is None and np.allclose(grads.grad(w), tw.grad.numpy())
    tnp.sum(h ** 2).backward(inputs=w)                     # one Tensor; accumulates
    assert np.allclose(w.grad, 2 * tw.grad.numpy()) and x.grad is None
    for bad in ([], [np.ones(2)], [tnp.tensor([1.0, 2.0])], "w"):
        with pytest.raises(BackwardError, match="inputs"):
            tnp.sum(h ** 2).backward(inputs=bad)


# Was wrong: ``h.retain_grad()`` (PyTorch's way to read a computed tensor's gradient from
# ``h.grad``) raised AttributeError; so did ``h.retains_grad``.
@pytest.mark.filterwarnings("ignore:Using backward")
def test_retain_grad_accumulates_a_computed_tensors_gradient_as_torch():
    torch = _torch()
    x0, w0 = np.array([1.0, 2.0]), np.array([3.0, 6.0])
    x, w = (tnp.tensor(v, requires_grad=True) for v in (x0, w0))
    h = x * w
    h.retain_grad()
    assert h.retains_grad and not x.retains_grad
    tnp.sum(h * h).backward()
    tnp.sum(tnp.exp(h * 0.1)).backward()
    tx, tw = (torch.tensor(v, requires_grad=True) for v in (x0, w0))
    th = tx * tw
    th.retain_grad()
    (th * th).sum().backward(retain_graph=True)
    torch.exp(th * 0.1).sum().backward()
    assert np.allclose(h.grad, th.grad.numpy(), rtol=1e-14)
    assert np.allclose(x.grad, tx.grad.numpy(), rtol=1e-14)
    x.retain_grad()                                          # a leaf: nothing changes
    assert x.is_leaf and not x.retains_grad
    with pytest.raises(BackwardError, match="retain_grad"):
        tnp.tensor([1.0]).retain_grad()
    # with create_graph the retained gradient has history, as torch's
    g = x ** 2
    g.retain_grad()
    tnp.sum(g ** 3).backward(create_graph=True)
    tg = tx ** 2
    tg.retain_grad()
    (tg ** 3).sum().backward(create_graph=True)
    assert isinstance(g.grad, tnp.Tensor) and g.grad.requires_grad and tg.grad.requires_grad
    assert np.allclose(g.grad.detach().data, tg.grad.detach().numpy())


# Was wrong: ``torch.autograd.grad``'s ``materialize_grads`` (zeros for unused inputs),
# ``only_inputs`` and ``is_grads_batched`` raised Python's TypeError.
def test_autograd_grad_takes_materialize_grads_as_torch():
    torch = _torch()
    x, w = tnp.tensor([1.0, 2.0], requires_grad=True), tnp.tensor([3.0, 4.0], requires_grad=True)
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    tw = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    gx, gw = autograd.grad(tnp.sum(x * x), [x, w], materialize_grads=True, only_inputs=True)
    tgx, tgw = torch.autograd.grad((tx * tx).sum(), [tx, tw], materialize_grads=True)
    assert np.array_equal(gx.data, tgx.numpy()) and np.array_equal(gw.data, tgw.numpy())
    assert autograd.grad(tnp.sum(x * x), [x, w], allow_unused=True)[1] is None
    with pytest.raises(BackwardError, match="allow_unused"):
        autograd.grad(tnp.sum(x * x), [x, w], materialize_grads=True, allow_unused=False)
    with pytest.raises(BackwardError, match="is_grads_batched"):
        autograd.grad(x * x, x, grad_outputs=np.ones((3, 2)), is_grads_batched=True)


# Was wrong: ``np.add.at(t, i, v)`` on a tensor that does not require grad (a constant of a
# recorded op, or ``x.detach()``, which shares ``x``'s array) wrote into the tensor's array
# (NumPy's ufunc.at ignores the read-only view tidu hands it): the values the recorded op
# saved changed, and backward gave a wrong gradient with no error.
@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.maximum])
def test_ufunc_at_on_a_tensor_is_refused_and_changes_no_saved_value(ufunc):
    c = tnp.tensor([[0.0, 1.0], [2.0, 3.0]])
    w = tnp.tensor(np.ones((2, 2)), requires_grad=True)
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    y = tnp.sum(w * c) + tnp.sum(x * x)
    for t in (c, x.detach()):
        with pytest.raises(TensorNotSupportedError, match=f"{ufunc.__name__}.at"):
            ufunc.at(t, (0,), 5.0)
    grads = y.backward()
    assert np.array_equal(grads.grad(w), [[0.0, 1.0], [2.0, 3.0]])
    assert np.array_equal(grads.grad(x), [2.0, 4.0])
    assert np.array_equal(c.data, [[0.0, 1.0], [2.0, 3.0]]) and np.array_equal(x.data, [1.0, 2.0])
    arr = np.zeros(3)                           # a tensor as the values of ufunc.at: NumPy's
    np.add.at(arr, [0, 0], tnp.tensor([1.0, 2.0]))
    assert np.array_equal(arr, [3.0, 0.0, 0.0])


# v += x on a tensor whose values are a view of another's (v = w[1:3], w.T, a reshape) made a
# new v and left w as it was, where NumPy and PyTorch change w too: a loss built from w lost
# x's gradient with no error (a no_grad block already refused it)
@pytest.mark.parametrize("make_view", [lambda w: w[1:3], lambda w: w.reshape(2, 2)[0],
                                       lambda w: w.reshape(2, 2).T[0]],
                         ids=["slice", "reshape-row", "transpose-row"])
def test_augmented_update_of_a_view_is_refused_as_it_would_not_reach_its_base(make_view):
    torch = pytest.importorskip("torch")
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    w = tnp.tensor(np.zeros(4))
    v = make_view(w)
    with pytest.raises(TensorTypeError, match="view of another's"):
        v += x
    # what the user meant, written as tidu takes it, gives PyTorch's gradient
    xt = torch.tensor([1.0, 2.0], requires_grad=True, dtype=torch.float64)
    wt = torch.zeros(4, dtype=torch.float64)
    vt = make_view(wt)
    vt += xt
    (wt * wt).sum().backward()
    w = tnp.tensor(np.zeros(4))
    index = np.arange(4)[np.asarray(make_view(tnp.tensor(np.arange(4.0)))).astype(int)]
    w = w.at[index].add(x)
    assert np.allclose((w * w).sum().backward().grad(x), xt.grad.numpy())
    # a tensor that is not a view still rebinds, as before
    y = x * 1.0
    y += x
    assert np.allclose(y.sum().backward().grad(x), [2.0, 2.0])


# checkpoint of plain arrays returned Tensors, where its docstring (and jax.checkpoint)
# returns arrays; checkpoint(3) raised Python's TypeError only when called
def test_checkpoint_of_plain_arrays_returns_fresh_arrays_and_refuses_a_non_callable():
    from primitives.tensor.transforms.functional import FunctionalError

    held = np.array([1.0, 2.0])
    x = np.array([0.5, 1.5])
    y = tnp.checkpoint(lambda v: tnp.sin(v) * v)(x)
    assert type(y) is np.ndarray and np.allclose(y, np.sin(x) * x)
    first, second, constant = tnp.checkpoint(lambda v: (v, v, held))(x)
    assert type(first) is np.ndarray
    assert not np.shares_memory(first, x) and not np.shares_memory(first, second)
    assert not np.shares_memory(constant, held) and np.array_equal(constant, held)
    w = tnp.tensor([1.0, 2.0], requires_grad=True)               # a Tensor closed over
    out = tnp.checkpoint(lambda v: v * w)(x)
    assert isinstance(out, tnp.Tensor)
    assert np.allclose(tnp.sum(out).backward().grad(w), x)
    with pytest.raises(FunctionalError, match="checkpoint: expected a callable"):
        tnp.checkpoint(3)


# set_grad_enabled took bool(enabled): "no", "False" and a list all turned grad mode on
@pytest.mark.parametrize("enabled", ["no", "False", [0], None, 0])
def test_set_grad_enabled_takes_only_a_bool(enabled):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        torch.set_grad_enabled(enabled)
    with pytest.raises(TensorTypeError, match="set_grad_enabled: enabled must be a bool"):
        tnp.set_grad_enabled(enabled)
    assert tnp.is_grad_enabled()                       # unchanged
    with tnp.set_grad_enabled(np.False_):
        assert not tnp.is_grad_enabled()
    assert tnp.is_grad_enabled()


# NumPy's in-place functions on a tensor or traced value raised NumPy's own "read-only"
# ValueError, naming neither tidu nor what to write instead
@pytest.mark.parametrize("call", [
    lambda x: np.fill_diagonal(x, 1.0), lambda x: np.put(x, [0], [1.0]),
    lambda x: np.place(x, np.ones((2, 2), bool), [1.0]), lambda x: np.copyto(x, np.ones((2, 2))),
    lambda x: np.putmask(x, np.ones((2, 2), bool), 1.0)],
    ids=["fill_diagonal", "put", "place", "copyto", "putmask"])
def test_numpy_in_place_functions_on_tensors_are_tidu_errors(call):
    with pytest.raises(TensorNotSupportedError, match="writes into its first argument"):
        call(tnp.tensor(np.zeros((2, 2))))
    with pytest.raises(TensorNotSupportedError, match="writes into its first argument"):
        tnp.jit(lambda x: call(x) or x)(np.zeros((2, 2)))
    plain = np.zeros(4)                                    # into a plain array: NumPy's, as before
    np.copyto(plain, tnp.tensor(np.ones(4)))
    assert np.array_equal(plain, np.ones(4))
