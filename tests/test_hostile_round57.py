"""Round 57, left over by the helpers' hostile rounds: Python's protocols on tensors and traced
values (``x op= x``, ``round``, ``math.trunc``, ``divmod``, three-argument ``pow``) and
``retain_grad`` across ``x op= y``; each test failed before its fix."""

from __future__ import annotations

import math

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import TensorTypeError

X = np.array([0.5, 2.0, -1.25])


def _torch():
    return pytest.importorskip("torch", reason="compared with PyTorch's in-place updates")


# x += x was refused as if another name held x: the right-hand operand is x itself
@pytest.mark.parametrize("update", ["add", "mul"])
def test_x_op_equals_x_is_x_op_x(update):
    torch = _torch()

    def step(v):
        y = v * 1.5
        if update == "add":
            y += y
        else:
            y *= y
        return y

    x = tnp.tensor(X, requires_grad=True)
    out = step(x)
    out.sum().backward()
    tx = torch.tensor(X, requires_grad=True)
    ty = tx * 1.5
    want = ty + ty if update == "add" else ty * ty      # (torch refuses y *= y it saved)
    want.sum().backward()
    np.testing.assert_allclose(out.data, want.detach().numpy(), rtol=1e-15)
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-15)
    # under a transform too, against the derivative by hand
    factor = 3.0 if update == "add" else None
    g = tnp.grad(lambda v: tnp.sum(step(v)))(X)
    want_g = np.full(3, factor) if factor else 2 * 1.5 * 1.5 * X
    np.testing.assert_allclose(g, want_g, rtol=1e-15)


def test_x_op_equals_x_is_still_refused_when_another_name_holds_x():
    x = tnp.tensor(X, requires_grad=True)
    y = x * 1.0
    held = y
    with pytest.raises(TensorTypeError, match="another name"):
        y += y
    assert held is y


# h.retain_grad(); h += 1 rebound h to a tensor that did not retain its grad: h.grad was None
def test_retain_grad_is_kept_across_an_augmented_update():
    torch = _torch()
    x = tnp.tensor(X, requires_grad=True)
    h = x * 2.0
    h.retain_grad()
    h += 1.0
    h *= h
    (h * 3.0).sum().backward()
    tx = torch.tensor(X, requires_grad=True)
    th = tx * 2.0
    th.retain_grad()
    th += 1.0
    th = th * th                        # (torch refuses th *= th: it saved th)
    th.retain_grad()
    (th * 3.0).sum().backward()
    assert h.retains_grad
    np.testing.assert_allclose(h.grad, th.grad.numpy(), rtol=1e-15)
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-15)


# round(t), math.trunc(t) and divmod(t, 2) raised Python's TypeError; pow(t, 2, 3) too, with
# a message about __pow__'s arguments
def test_round_trunc_and_divmod_of_a_tensor():
    x = tnp.tensor(np.array([2.75, -1.5, 0.25]), requires_grad=True)
    np.testing.assert_array_equal(round(x).data, np.round(x.data))          # as JAX: an array
    np.testing.assert_array_equal(round(x, 1).data, np.round(x.data, 1))
    np.testing.assert_array_equal(math.trunc(x).data, np.trunc(x.data))
    q, r = divmod(x, 0.7)
    np.testing.assert_array_equal(q.data, np.floor_divide(x.data, 0.7))
    np.testing.assert_array_equal(r.data, np.remainder(x.data, 0.7))
    q2, r2 = divmod(5.0, x)
    np.testing.assert_array_equal(r2.data, np.remainder(5.0, x.data))
    (r.sum() + round(x).sum()).backward()
    np.testing.assert_array_equal(x.grad, np.ones(3))       # remainder's slope, round's 0
    g = tnp.grad(lambda v: tnp.sum(divmod(v, 0.7)[1] * round(v * 3)))(x.data)
    np.testing.assert_array_equal(g, np.round(x.data * 3))


def test_three_argument_pow_is_refused_by_name():
    x = tnp.tensor(np.array([2.0]), requires_grad=True)
    with pytest.raises(TensorTypeError, match="three-argument pow"):
        pow(x, 2, 3)
    with pytest.raises(TensorTypeError, match="three-argument pow"):
        tnp.jit(lambda v: pow(v, 2, 3))(np.array([2.0]))
    np.testing.assert_array_equal(pow(x, 2).data, [4.0])       # still usable
