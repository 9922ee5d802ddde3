"""Hostile round 57c: the eager Tensor under mutation, aliasing and NumPy interop, each
case compared with the same PyTorch program."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from primitives.tensor import numpy as tnp
from primitives.tensor.eager.frontend import tensor
from primitives.tensor.eager.grad_mode import no_grad
from primitives.tensor.eager.strategy import checkpoint_strategy

X0 = np.linspace(0.1, 1.0, 200)          # 1600 bytes: above SMALL_BYTES, so "balanced" drops


def _write(y, how: str) -> None:
    if how == "no_grad +=":
        with no_grad():
            y += 1.0
    elif how == "data +=":
        y.data += 1.0
    elif how == "data[:] =":
        y.data[:] = y.data + 1.0
    else:
        y.data = y.data + 1.0


# Under the "balanced" strategy, an op reading a computed tensor whose values were changed
# (t.data, a no_grad update) dropped them and recomputed the old ones for backward: a
# silently wrong gradient (cos of the old y here).
@pytest.mark.parametrize("strategy", ["none", "balanced"])
@pytest.mark.parametrize("how", ["no_grad +=", "data +=", "data[:] =", "data ="])
def test_a_computed_tensor_written_before_use_is_differentiated_at_its_new_values(strategy,
                                                                                 how):
    with checkpoint_strategy(strategy):
        x = tensor(X0, requires_grad=True)
        y = x * 3.0
        _write(y, how)
        g = tnp.sum(tnp.sin(y)).backward().grad(x)
    xt = torch.tensor(X0, requires_grad=True)
    yt = xt * 3.0
    with torch.no_grad():
        yt += 1.0
    torch.sin(yt).sum().backward()
    np.testing.assert_allclose(g, xt.grad.numpy(), rtol=1e-12)


# ``y.data = array`` of another shape on a computed tensor was taken: ops recorded after it
# sent gradients of the new shape into the op that made y, which broadcast them (x.grad
# [12, 12, 12] where PyTorch gives [2, 4, 6]) or failed with NumPy's ValueError in backward.
@pytest.mark.parametrize("shape", [(1,), (), (4,), (3, 1)])
def test_data_of_another_shape_on_a_computed_tensor_is_refused(shape):
    from primitives.tensor.errors import TensorShapeError
    x = tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2.0
    with pytest.raises(TensorShapeError, match=r"\.data of shape"):
        y.data = np.ones(shape)
    assert y.shape == (3,)                 # unchanged: backward still gives PyTorch's gradient
    tnp.sum(y * tensor([1.0, 2.0, 3.0])).backward()
    np.testing.assert_allclose(x.grad, [2.0, 4.0, 6.0])
    leaf = tensor([1.0, 2.0, 3.0], requires_grad=True)
    leaf.data = np.ones(shape)             # a leaf may still change shape
    assert leaf.shape == shape


# ... and real data on a complex computed tensor (or complex on a real one) sent a gradient of
# the other kind into the op that made it; the error named the leaf's .data instead.
@pytest.mark.parametrize("new", [np.ones(3, dtype=complex), np.ones(3)])
def test_data_of_the_other_kind_on_a_computed_tensor_is_refused(new):
    from primitives.tensor.errors import TensorTypeError
    x = tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * (2.0 if new.dtype.kind == "c" else 2.0 + 1.0j)
    with pytest.raises(TensorTypeError, match=r"\.data of dtype"):
        y.data = new
    y.data = np.ones(3, dtype=y.dtype)     # the same kind is taken, as PyTorch takes it


# ``x.grad *= 0.5`` on a gradient with history (after backward(create_graph=True)) raised a
# TensorTypeError about np.asarray, in a no_grad block after the values had already changed;
# ``x.grad = t`` of a Tensor with history raised the same. Both now keep the history, as torch.
@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_a_gradient_with_history_is_updated_and_assigned_as_in_torch():
    x = tensor([1.0, 2.0], requires_grad=True)
    tnp.sum(x * x * x).backward(create_graph=True)
    with no_grad():
        x.grad *= 0.5
    x.grad *= 2.0                          # recorded: x.grad is 3 x^2 again, with history
    tnp.sum(x.grad).backward()             # accumulates 6 x into x.grad (a Tensor)
    xt = torch.tensor([1.0, 2.0], requires_grad=True, dtype=torch.float64)
    (xt * xt * xt).sum().backward(create_graph=True)
    with torch.no_grad():
        xt.grad *= 0.5
    xt.grad = xt.grad * 2.0
    xt.grad.sum().backward()
    np.testing.assert_allclose(x.grad.data, xt.grad.detach().numpy())
    w = tensor([1.0, 1.0], requires_grad=True)
    h = w * 3.0
    x.grad = h                             # a Tensor with history, kept as one
    assert x.grad.requires_grad and x.grad is not h
    tnp.sum(x.grad * x.grad).backward(inputs=[w])
    np.testing.assert_allclose(w.grad, [18.0, 18.0])


# ``x.grad = c`` of a constant Tensor stored a read-only view of c's array: writing the
# gradient in place (x.grad[0] = 0, x.grad *= s) then failed with NumPy's ValueError.
def test_a_gradient_assigned_from_a_constant_tensor_is_a_writable_copy():
    x = tensor([1.0, 2.0], requires_grad=True)
    c = tensor([3.0, 4.0])
    x.grad = c
    x.grad[0] = 0.0
    x.grad *= 2.0
    np.testing.assert_array_equal(x.grad, [0.0, 8.0])
    np.testing.assert_array_equal(c.data, [3.0, 4.0])   # c itself is not written


# (the same through an op of several outputs: a piece of a split, written through .data)
def test_a_piece_of_a_split_written_before_use_is_differentiated_at_its_new_values():
    x0 = np.linspace(0.1, 1.0, 400)
    with checkpoint_strategy("balanced"):
        x = tensor(x0, requires_grad=True)
        a, _ = tnp.split(x * 2.0, 2)
        a.data += 1.0
        g = tnp.sum(tnp.sin(a)).backward().grad(x)
    # (torch refuses to write a piece of a split; the gradient at the new values is this)
    want = np.concatenate([2.0 * np.cos(2.0 * x0[:200] + 1.0), np.zeros(200)])
    np.testing.assert_allclose(g, want, rtol=1e-12)


# Gradients.replace(t, g) had the .grad setter's faults: a constant Tensor's read-only view
# was stored, and a Tensor with history raised an error about np.asarray.
def test_gradients_replace_takes_tensors_as_the_grad_setter():
    x = tensor([1.0, 2.0], requires_grad=True)
    grads = tnp.sum(x * x).backward()
    grads.replace(x, tensor([5.0, 5.0]))
    grads.grad(x)[0] = 0.0                 # writable, as every gradient array
    np.testing.assert_array_equal(grads.grad(x), [0.0, 5.0])
    grads.replace(x, x * 2.0)
    g = grads.grad(x)
    assert g.requires_grad
    np.testing.assert_allclose(tnp.sum(g * g).backward().grad(x), 8.0 * x.data)
