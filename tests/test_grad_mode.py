"""PyTorch's grad mode on the eager ``Tensor``: ``no_grad``, ``enable_grad``,
``set_grad_enabled``, ``is_grad_enabled`` (thread-local), ``x op= y`` in place inside
``no_grad`` (an optimizer step written PyTorch's way), and ``requires_grad_``."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tidu
from primitives import tensor as tnp


def _leaf(values, dtype=np.float64):
    return tnp.tensor(np.array(values, dtype=dtype), requires_grad=True)


def test_no_grad_computes_without_recording_and_restores_the_mode():
    x = _leaf([1.0, 2.0])
    with tnp.no_grad():
        assert not tnp.is_grad_enabled()
        y = tnp.sin(x) * x
    assert tnp.is_grad_enabled()
    assert not y.requires_grad and y._trace is None and y.is_leaf
    np.testing.assert_array_equal(y.data, np.sin([1.0, 2.0]) * [1.0, 2.0])
    assert (x * x).requires_grad                  # recorded again after the block
    with pytest.raises(tnp.BackwardError):
        y.sum().backward()                        # nothing to differentiate


def test_the_mode_is_restored_after_an_exception_and_blocks_nest():
    with pytest.raises(ZeroDivisionError):
        with tnp.no_grad():
            1 / 0
    assert tnp.is_grad_enabled()
    x = _leaf([3.0])
    with tnp.no_grad():
        with tnp.enable_grad():
            assert (x * 2).requires_grad
            with tnp.no_grad():
                assert not (x * 2).requires_grad
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad


def test_decorators_and_set_grad_enabled():
    x = _leaf([1.0])

    @tnp.no_grad()
    def evaluate(v):
        return v * 2

    @tnp.enable_grad()
    def train(v):
        return v * 2

    assert not evaluate(x).requires_grad and tnp.is_grad_enabled()
    with tnp.no_grad():
        assert train(x).requires_grad and not tnp.is_grad_enabled()
    tnp.set_grad_enabled(False)                   # a call sets the mode at once
    try:
        assert not tnp.is_grad_enabled() and not (x * 2).requires_grad
    finally:
        tnp.set_grad_enabled(True)
    with tnp.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert tnp.is_grad_enabled()

    @tnp.set_grad_enabled(False)                  # as a decorator: only in its calls
    def frozen(v):
        return v * 2

    assert tnp.is_grad_enabled()
    assert not frozen(x).requires_grad and tnp.is_grad_enabled()


def test_the_mode_is_per_thread():
    x = _leaf([1.0])
    inside, release = threading.Event(), threading.Event()
    seen = []

    def other():
        with tnp.no_grad():
            inside.set()
            release.wait(10)
            seen.append((x * 2).requires_grad)

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(10)
    assert tnp.is_grad_enabled() and (x * 2).requires_grad   # this thread records
    release.set()
    thread.join()
    assert seen == [False]


def test_an_optimizer_step_written_as_in_pytorch_keeps_the_leaf_and_old_values():
    w = _leaf([1.0, -2.0], np.float32)
    y = w * w                                     # recorded before the update
    (y.sum()).backward()
    before = w.grad.copy()
    with tnp.no_grad():
        w -= 0.25 * w.grad                        # in place: w stays the leaf it was
        w *= 2
    assert w.is_leaf and w.requires_grad and w.dtype == np.float32
    np.testing.assert_array_equal(w.data, (np.array([1.0, -2.0], np.float32) - 0.25 * before) * 2)
    # y's node kept w's old values: its gradient is still 2 w_old
    np.testing.assert_array_equal(y.backward(np.ones(2, np.float32)).grad(w), [2.0, -4.0])
    w.grad = None
    (w * w).sum().backward()                      # and w records as before
    np.testing.assert_allclose(w.grad, 2 * w.data)


def test_sgd_by_hand_matches_tnp_optim_sgd():
    rng = np.random.default_rng(0)
    x, target = rng.standard_normal((8, 3)), rng.standard_normal(8)
    start = rng.standard_normal(3)
    mine, theirs = _leaf(start), _leaf(start)
    opt = tnp.optim.SGD([theirs], lr=0.1)
    for _ in range(5):
        for w in (mine, theirs):
            w.grad = None
            tnp.sum((tnp.tensor(x) @ w - target) ** 2).backward()
        with tnp.no_grad():
            mine -= 0.1 * mine.grad
        opt.step()
    np.testing.assert_array_equal(mine.data, theirs.data)


def test_against_pytorch_no_grad_training_loop():
    torch = pytest.importorskip("torch", reason="PyTorch compares the no_grad training loop")
    rng = np.random.default_rng(1)
    x, target = rng.standard_normal((6, 2)), rng.standard_normal(6)
    w = _leaf([0.5, -0.5])
    tw = torch.tensor([0.5, -0.5], dtype=torch.float64, requires_grad=True)
    tx, tt = torch.from_numpy(x), torch.from_numpy(target)
    for _ in range(4):
        w.grad, tw.grad = None, None
        tnp.sum(tnp.tanh(tnp.tensor(x) @ w) - target).backward()
        (torch.tanh(tx @ tw) - tt).sum().backward()
        with tnp.no_grad():
            w -= 0.3 * w.grad
            w /= 1.01
        with torch.no_grad():
            tw -= 0.3 * tw.grad
            tw /= 1.01
    np.testing.assert_allclose(w.data, tw.detach().numpy(), rtol=1e-14)


def test_in_place_updates_that_numpy_refuses_raise_tidu_errors():
    w = _leaf([1.0, 2.0])
    counts = tnp.tensor(np.array([1, 2]))
    with tnp.no_grad():
        with pytest.raises(tidu.TiduError, match="__iadd__ in a no_grad block"):
            w += np.ones((3, 2))                  # the result would not fit w
        with pytest.raises(tidu.TiduError, match="__iadd__ in a no_grad block"):
            counts += 0.5                         # float into int, as NumPy's same_kind
    np.testing.assert_array_equal(w.data, [1.0, 2.0])   # unchanged, usable
    assert tnp.is_grad_enabled()


def test_outside_no_grad_a_leaf_update_is_still_refused():
    w = _leaf([1.0])
    with pytest.raises(tnp.TensorTypeError, match="leaf tensor that requires grad"):
        w -= 1.0


def test_functional_transforms_differentiate_inside_no_grad():
    with tnp.no_grad():
        g = tnp.grad(lambda v: tnp.sum(v ** 3))(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(g, [3.0, 12.0])


def test_backward_runs_inside_no_grad():
    x = _leaf([2.0])
    total = (x * x).sum()
    with tnp.no_grad():
        total.backward()                          # as PyTorch's: backward is not an op
        with pytest.raises(tnp.BackwardError, match="does not require grad"):
            (x * x).sum().backward()              # made in the block: no history
    np.testing.assert_array_equal(x.grad, [4.0])


def test_requires_grad_underscore():
    w = tnp.tensor(np.array([1.0, 2.0]))
    assert w.requires_grad_() is w and w.requires_grad
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad, [2.0, 4.0])
    assert not w.requires_grad_(False).requires_grad
    with pytest.raises(tnp.BackwardError, match="leaf"):
        (_leaf([1.0]) * 2).requires_grad_(False)
    with pytest.raises(tnp.TensorTypeError, match="floating point"):
        tnp.tensor(np.array([1, 2])).requires_grad_()


def _constant_block(v):
    with tnp.no_grad():
        c = v * 10.0                    # made in a no_grad block inside f: a constant
    return tnp.sum(v * c)


W3 = np.array([0.5, -1.2, 2.0])


@pytest.mark.parametrize("outer_no_grad", [False, True])
def test_a_no_grad_block_inside_a_traced_function_makes_constants_in_every_transform(
        outer_no_grad):
    """As torch.func: a block inside f is respected, one around the transform is not."""
    jitted = tnp.jit(tnp.grad(_constant_block))
    block = tnp.no_grad() if outer_no_grad else tnp.enable_grad()
    with block:
        got = {
            "grad": tnp.grad(_constant_block)(W3),
            "jit(grad)": jitted(W3),
            "vmap(grad)": tnp.vmap(tnp.grad(_constant_block))(np.stack([W3, -W3]))[0],
            "jacrev": tnp.jacrev(_constant_block)(W3),
            "vjp": tnp.vjp(_constant_block, W3)[1](1.0)[0],
        }
        tangent = tnp.jvp(_constant_block, (W3,), (np.ones(3),))[1]
        hessian = tnp.hessian(_constant_block)(W3)
    for name, value in got.items():
        np.testing.assert_allclose(value, 10.0 * W3, err_msg=name)
    np.testing.assert_allclose(tangent, 10.0 * W3.sum())
    np.testing.assert_array_equal(hessian, np.zeros((3, 3)))
    np.testing.assert_allclose(jitted(W3), 10.0 * W3)       # its trace, either way
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(v ** 3))(W3), 3 * W3 ** 2)


def test_enable_grad_inside_an_inner_no_grad_block_differentiates_again():
    def f(v):
        with tnp.no_grad():
            with tnp.enable_grad():
                c = v * 10.0
        return tnp.sum(v * c)
    np.testing.assert_allclose(tnp.grad(f)(W3), 20.0 * W3)


def test_an_inner_no_grad_block_agrees_with_torch_func():
    torch = pytest.importorskip("torch")
    from torch.func import grad as torch_grad

    def torch_f(v):
        with torch.no_grad():
            c = v * 10.0
        return (v * c).sum()
    want = torch_grad(torch_f)(torch.tensor(W3)).numpy()
    np.testing.assert_allclose(tnp.grad(_constant_block)(W3), want)
    with tnp.no_grad(), torch.no_grad():
        np.testing.assert_allclose(tnp.grad(_constant_block)(W3),
                                   torch_grad(torch_f)(torch.tensor(W3)).numpy())
