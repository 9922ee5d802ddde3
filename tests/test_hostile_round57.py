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


# --- PyTorch's own autograd beside the eager Tensor (left by round 57a) ------------------------


# t * w, w a torch tensor that requires grad in PyTorch's autograd: the op kept a detached copy
# of w, so a PyTorch loss through y.data silently lacked that path's gradient for w
def test_a_torch_tensor_torch_records_is_refused_as_a_constant_of_a_recorded_op():
    torch = _torch()
    x = tnp.tensor(torch.tensor([1.0, 2.0], dtype=torch.float64), requires_grad=True)
    w = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(TensorTypeError, match="PyTorch's gradient through it would be lost"):
        x * w
    y = x * w.detach()                          # a constant on purpose: taken
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 4.0])
    with torch.no_grad():                       # PyTorch records nothing: nothing to lose
        np.testing.assert_array_equal((x * w).data.numpy(), [3.0, 8.0])


# t.data = q, q with PyTorch history: the tensor kept q's graph, which every update grew
def test_data_assignment_takes_a_torch_tensors_values_not_its_history():
    torch = _torch()
    p = tnp.tensor(torch.tensor([1.0, 2.0], dtype=torch.float64), requires_grad=True)
    q = torch.tensor([5.0, 6.0], dtype=torch.float64, requires_grad=True) * 2
    p.data = q
    assert not p.data.requires_grad and p.data.grad_fn is None
    np.testing.assert_array_equal(p.data.numpy(), [10.0, 12.0])
    (p * p).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [20.0, 24.0])


# --- a closed-over condition read by value under jit ---------------------------------------------


COND = np.array([[True, False, True], [False, False, True]])


# extract(COND, a) under jit, COND a closed-over array: extract's ravel made COND a traced
# input, whose values are unknown while jit traces, so it raised ConcretizationError (JAX and
# x[COND] take it); the condition is now read as the array it is, and jit's guard compares it
def test_extract_and_compress_read_a_closed_over_condition_under_jit():
    a = np.arange(6.0).reshape(2, 3)
    step = tnp.jit(lambda v: tnp.extract(COND, v) * 2)
    np.testing.assert_array_equal(step(a), [0.0, 4.0, 10.0])
    COND[0, 1] = True                       # written in place: the next call sees it
    try:
        np.testing.assert_array_equal(step(a), [0.0, 2.0, 4.0, 10.0])
    finally:
        COND[0, 1] = False
    np.testing.assert_array_equal(
        tnp.grad(lambda v: tnp.sum(tnp.jit(lambda w: tnp.extract(COND, w))(v) ** 2))(a),
        np.where(COND, 2 * a, 0.0))
    rows = COND[1]
    take = tnp.jit(lambda v: tnp.compress(rows, v, axis=1))
    np.testing.assert_array_equal(take(a), a[:, rows])
