"""``add`` with one operand broadcast to the other's shape is one op, ``AddBroadcast``.

Its rules are checked like every op's (finite differences, the dot-product test, second
order, batching); the front ends make it for ``x + b`` and ``b + x`` and give what the
unfused ``broadcast_in_dim`` + ``add`` gives, bit for bit, with the device switched off at
its seam (``lowering.BROADCAST_ADD``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from primitives import tensor as tnp
from primitives.tensor.buffers import MIN_BYTES
from primitives.tensor.numpy import lowering
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.shape import BroadcastInDim
from tidu.testing import check_primitive
from tensor_helpers import ops_run


@st.composite
def broadcast_pairs(draw):
    """``(shape, operand_shape)``: ``operand_shape`` broadcasts to ``shape`` and differs."""
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3]), min_size=1, max_size=3)))
    kept = draw(st.integers(0, len(shape)))
    operand = [size if draw(st.booleans()) else 1 for size in shape[len(shape) - kept:]]
    if tuple(operand) == shape:
        operand = operand[1:]                   # one axis fewer: still broadcast
    return shape, tuple(operand)


def _rand(rng, shape, dtype):
    real = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        real = real + 1j * rng.standard_normal(shape)
    return real.astype(dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
@settings(max_examples=15, deadline=None)
@given(pair=broadcast_pairs(), seed=st.integers(0, 2**32 - 1))
def test_rules_jvp_transpose_second_order_and_batching(dtype, pair, seed):
    """JVP against finite differences in each input and both, the transposes by the
    dot-product test, what they emit differentiated again, and the batch rule with batch
    axes everywhere (``check_primitive`` at ``order=2``)."""
    shape, operand_shape = pair
    rng = np.random.default_rng(seed)
    op = ew.AddBroadcast(shape, operand_shape)
    report = check_primitive(op, _rand(rng, shape, dtype), _rand(rng, operand_shape, dtype),
                             order=2, rng=seed)
    assert report.jvp_comparisons > 0 and report.batch_comparisons > 0


def test_values_bit_for_bit_in_place_and_into_a_buffer():
    """``np.add`` with NumPy broadcasting, the same bits; ``eval`` leaves its inputs alone,
    ``eval_reusing`` writes into ``x`` only when position 0 is free and the bias cannot be
    the output."""
    rng = np.random.default_rng(0)
    big = (MIN_BYTES // 8, 2)
    x, b = rng.standard_normal(big), rng.standard_normal(2)
    want = x + b
    op = ew.AddBroadcast(big, (2,))
    x0, b0 = x.copy(), b.copy()
    [got] = op.eval(None, [x, b])
    assert got.tobytes() == want.tobytes() and got is not x
    assert np.array_equal(x, x0) and np.array_equal(b, b0)
    inputs = [x.copy(), b.copy()]
    [into] = op.eval_reusing(None, inputs, (0, 1))
    assert into is inputs[0] and into.tobytes() == want.tobytes()
    inputs = [x.copy(), b.copy()]
    [fresh] = op.eval_reusing(None, inputs, (1,))       # the bias: never the output
    assert fresh is not inputs[0] and fresh is not inputs[1]
    assert fresh.tobytes() == want.tobytes()
    [scalar] = ew.AddBroadcast((2,), ()).eval(None, [np.ones(2), 0.5])     # a number
    assert scalar.tolist() == [1.5, 1.5]


@pytest.mark.parametrize("order", ["x + b", "b + x"])
def test_a_bias_add_is_one_op_and_matches_the_unfused_ops(order, monkeypatch):
    """``x + b`` and ``b + x`` run one ``add_broadcast`` in a ``jit`` program (no
    ``broadcast_in_dim``), and their values and gradients are the unfused pair's, bit
    for bit."""
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((5, 4)), rng.standard_normal((4, 3)), rng.standard_normal(3)

    def loss(w, b, x):
        z = x @ w
        return tnp.sum(tnp.tanh(z + b if order == "x + b" else b + z) ** 2)

    fused_step = tnp.jit(tnp.value_and_grad(loss, argnums=(0, 1)))
    fused_step(w, b, x)                                            # traced
    ops = (ew.AddBroadcast, BroadcastInDim)
    fused, ran = ops_run(fused_step, (w, b, x), ops, monkeypatch)
    assert ran == ["add_broadcast[(3,)->(5, 3)]"], ran
    monkeypatch.setattr(lowering, "BROADCAST_ADD", False)
    unfused_step = tnp.jit(tnp.value_and_grad(loss, argnums=(0, 1)))
    unfused_step(w, b, x)                                          # traced without the op
    unfused, ran = ops_run(unfused_step, (w, b, x), ops, monkeypatch)
    assert ran == ["broadcast_in_dim[(3,)->(5, 3), dims=(1,)]"], ran
    assert fused[0].tobytes() == unfused[0].tobytes()
    for got, want in zip(fused[1], unfused[1]):
        assert got.tobytes() == want.tobytes()


def test_eager_gradient_matches_finite_differences_and_records_one_node():
    """A ``Tensor`` bias add records one node; its gradients match central differences,
    and with the device off the same values come back."""
    rng = np.random.default_rng(2)
    x_data, b_data = rng.standard_normal((6, 3)), rng.standard_normal(3)
    x = tnp.tensor(x_data, requires_grad=True)
    b = tnp.tensor(b_data, requires_grad=True)
    y = x + b
    assert y._trace.recorded.primitive == ew.AddBroadcast((6, 3), (3,))
    assert y._trace.inputs[1].trace is None              # b itself, not a broadcast of it
    grads = tnp.sum(tnp.sin(y) * y).backward()

    def f(xv, bv):
        z = xv + bv
        return float(np.sum(np.sin(z) * z))
    eps = 1e-6
    for i in range(3):
        step = np.zeros(3)
        step[i] = eps
        fd = (f(x_data, b_data + step) - f(x_data, b_data - step)) / (2 * eps)
        assert abs(grads.grad(b)[i] - fd) < 1e-6
    np.testing.assert_allclose(grads.grad(x), np.sin(x_data + b_data)
                               + (x_data + b_data) * np.cos(x_data + b_data), rtol=1e-12)


def test_gradient_matches_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is an optional peer")
    rng = np.random.default_rng(3)
    x_data, b_data = rng.standard_normal((4, 2, 3)), rng.standard_normal((2, 1))
    x, b = tnp.tensor(x_data, requires_grad=True), tnp.tensor(b_data, requires_grad=True)
    grads = tnp.sum(tnp.exp(b + x)).backward()
    xt = torch.tensor(x_data, requires_grad=True)
    bt = torch.tensor(b_data, requires_grad=True)
    torch.exp(bt + xt).sum().backward()
    np.testing.assert_allclose(grads.grad(x), xt.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(grads.grad(b), bt.grad.numpy(), rtol=1e-13)


def test_both_operands_broadcast_still_add():
    """``(3, 1) + (1, 4)``: neither has the result's shape, so both are broadcast first."""
    a, c = np.arange(3.0).reshape(3, 1), np.arange(4.0).reshape(1, 4)
    x = tnp.tensor(a, requires_grad=True)
    grads = tnp.sum((x + c) ** 2).backward()
    np.testing.assert_array_equal(grads.grad(x), (2 * (a + c)).sum(1, keepdims=True))


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0), (1, 0)])
def test_vmap_of_a_bias_add(in_axes):
    """Batched ``x``, batched ``b``, or both (at other axes): each example's own sum."""
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((3, 5, 4) if in_axes[0] != 1 else (5, 3, 4))
    bs = rng.standard_normal((3, 4))
    x = xs if in_axes[0] is not None else xs[0]
    b = bs if in_axes[1] is not None else bs[0]

    def f(x, b):
        return tnp.tanh(x + b)
    got = tnp.vmap(f, in_axes=in_axes)(x, b)
    for k in range(3):
        xk = x if in_axes[0] is None else np.take(x, k, axis=in_axes[0])
        bk = b if in_axes[1] is None else b[k]
        np.testing.assert_allclose(got[k], np.tanh(xk + bk), rtol=1e-15)
    grad_b = tnp.vmap(tnp.grad(lambda x, b: tnp.sum(f(x, b)), argnums=1), in_axes=in_axes)(x, b)
    for k in range(3):
        xk = x if in_axes[0] is None else np.take(x, k, axis=in_axes[0])
        bk = b if in_axes[1] is None else b[k]
        np.testing.assert_allclose(grad_b[k], (1 - np.tanh(xk + bk) ** 2).sum(0), rtol=1e-13)


def test_spread_is_the_unfused_broadcast():
    op = ew.AddBroadcast((2, 3, 4), (3, 1))
    assert op.spread() == BroadcastInDim((2, 3, 4), (1, 2), (3, 1))


@pytest.mark.parametrize("expr", ["x + x[0]", "x[0] + x", "x + bias", "c[0] + x"])
def test_operands_that_share_memory_and_closed_over_arrays(expr):
    """A bias that is a view of ``x`` (written into in place, it would change), and a
    closed-over array written between calls: a ``jit`` program gives NumPy's values on
    every call, and its results are not the inputs or the closed-over array."""
    rng = np.random.default_rng(5)
    big = (MIN_BYTES // 8 // 4, 4)                       # big enough for in-place writes
    c, bias = rng.standard_normal(big), rng.standard_normal(4)

    def f(x):
        return eval(expr, {"x": tnp.exp(x), "c": c, "bias": bias})

    step = tnp.jit(f)
    for call in range(3):
        x = rng.standard_normal(big)
        want = eval(expr, {"x": np.exp(x), "c": c, "bias": bias})
        got = step(x)
        np.testing.assert_array_equal(got, want)
        assert not any(np.shares_memory(got, a) for a in (x, c, bias))
        c += 1.0                                           # read again at the next call
        bias -= 1.0


@pytest.mark.parametrize("strategy", ["none", "balanced"])
def test_double_backward_and_checkpoint_strategies_through_a_bias_add(strategy):
    """``backward(create_graph=True)`` through a bias add and ``logsumexp``, then backward
    again: ``2 H g`` from ``tnp.hessian``; the "balanced" strategy (which recomputes
    memory-bound results, ``add_broadcast``'s among them) gives the same gradients."""
    from primitives.tensor.eager.strategy import checkpoint_strategy

    rng = np.random.default_rng(6)
    x_data, b_data = rng.standard_normal((5, 3)), rng.standard_normal(3)

    def loss(x, b):
        return tnp.sum(tnp.logsumexp(tnp.tanh(x + b), axis=1) ** 2)

    hessian = tnp.hessian(lambda b: loss(x_data, b))(b_data)
    gradient = tnp.grad(lambda b: loss(x_data, b))(b_data)
    with checkpoint_strategy(strategy):
        x, b = tnp.tensor(x_data, requires_grad=True), tnp.tensor(b_data, requires_grad=True)
        g = loss(x, b).backward(create_graph=True).grad(b)
        twice = tnp.sum(g * g).backward().grad(b)
    np.testing.assert_allclose(np.asarray(g.detach() if hasattr(g, "detach") else g),
                               gradient, rtol=1e-13)
    np.testing.assert_allclose(twice, 2 * hessian @ gradient, rtol=1e-12)


def test_compositions_both_orders_agree():
    """``jit(vmap(grad))``, ``vmap(jit(grad))``, ``vmap(grad)`` and ``grad(vmap)`` of a bias
    add feeding ``logsumexp`` (both new ops) give the per-example gradients one by one."""
    rng = np.random.default_rng(7)
    xs, b = rng.standard_normal((4, 5, 3)), rng.standard_normal(3)

    def f(x, b):
        return tnp.sum(tnp.logsumexp(tnp.tanh(x + b), axis=1))
    g = tnp.grad(f, argnums=1)
    want = np.stack([g(x, b) for x in xs])
    batched = (0, None)
    for composed in (tnp.jit(tnp.vmap(g, in_axes=batched)), tnp.vmap(tnp.jit(g), in_axes=batched),
                     tnp.vmap(g, in_axes=batched)):
        np.testing.assert_allclose(composed(xs, b), want, rtol=1e-14)
    summed = tnp.grad(lambda b: tnp.sum(tnp.vmap(lambda x: f(x, b))(xs)))(b)
    np.testing.assert_allclose(summed, want.sum(0), rtol=1e-13)
