"""``Tensor.register_hook``, each behaviour compared with the same PyTorch program.

A hook gets the full gradient of its tensor (every use summed, those recorded before it
was registered too) and its result replaces that gradient: in what flows on to the
tensors it was computed from, in a leaf's ``.grad``, in a retained ``.grad`` and in
``autograd.grad``; under ``create_graph`` it is recorded and differentiated again.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor import autograd
from primitives.tensor.eager import frontend
from primitives.tensor.errors import BackwardError

torch = pytest.importorskip("torch")


def pair(values):
    """The same leaf in tidu and in PyTorch."""
    values = np.array(values, dtype=float)
    return (tnp.tensor(values, requires_grad=True),
            torch.tensor(values, requires_grad=True))


def same(ours, theirs, rtol=1e-12):
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    ours = ours.data if isinstance(ours, tnp.Tensor) else ours
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=1e-13)


def test_intermediate_hook_sees_every_use_and_changes_the_leaves_gradients():
    seen = {}
    x, tx = pair([1.0, 2.0])
    results = []
    for leaf, sin, total in ((x, tnp.sin, tnp.sum), (tx, torch.sin, torch.sum)):
        h = leaf * 3
        a = sin(h) * h                               # a use recorded before the hook
        seen[id(leaf)] = []
        h.register_hook(lambda g, k=id(leaf): seen[k].append(g.detach()) or g * 10)
        (total(a) + total(h * h)).backward()
        results.append(leaf.grad)
    same(results[0], results[1])
    assert len(seen[id(x)]) == len(seen[id(tx)]) == 1
    same(seen[id(x)][0], seen[id(tx)][0])
    assert isinstance(seen[id(x)][0], tnp.Tensor)


def test_leaf_hooks_run_in_order_and_give_grad_accumulating_over_calls():
    x, tx = pair([1.0, -2.0, 0.5])
    for leaf in (x, tx):
        leaf.register_hook(lambda g: g * 2)
        leaf.register_hook(lambda g: g + 1)          # sees the first one's result
        (leaf * leaf).sum().backward()
        (leaf * leaf * leaf).sum().backward()
    same(x.grad, tx.grad)                           # (2 * 2x + 1) + (2 * 3x^2 + 1)


def test_hook_on_the_output_scales_the_seed():
    x, tx = pair([1.0, 2.0])
    for leaf in (x, tx):
        loss = (leaf * leaf).sum()
        loss.register_hook(lambda g: g * 5)
        loss.backward()
    same(x.grad, tx.grad)


@pytest.mark.parametrize("retain_first", [True, False])
def test_retain_grad_gets_the_hooked_gradient(retain_first):
    x, tx = pair([1.0, 2.0])
    hs = []
    for leaf in (x, tx):
        h = leaf * 3
        if retain_first:
            h.retain_grad()
            h.register_hook(lambda g: g * 10)
        else:
            h.register_hook(lambda g: g * 10)
            h.retain_grad()
        (h * h).sum().backward()
        hs.append(h)
    same(hs[0].grad, hs[1].grad)                    # PyTorch runs retain_grad's last
    same(x.grad, tx.grad)


def test_autograd_grad_gives_hooked_gradients_of_leaves_and_intermediates():
    calls = {"tidu": [], "torch": []}
    grads = {}
    for lib, make, grad in (("tidu", tnp.tensor, autograd.grad),
                            ("torch", torch.tensor, torch.autograd.grad)):
        def program(lib=lib, make=make):
            leaf = make([1.0, 2.0], requires_grad=True)
            other = make([3.0, -1.0], requires_grad=True)
            leaf.register_hook(lambda g: g * 2)
            other.register_hook(lambda g: calls[lib].append("other"))   # not an input
            h = leaf * 3
            h.register_hook(lambda g: g * 4)
            return leaf, h, (h * h * other).sum()
        leaf, _, loss = program()
        (of_leaf,) = grad(loss, leaf)
        _, h, loss = program()
        (of_h,) = grad(loss, h)
        grads[lib] = (of_leaf, of_h)
    for ours, theirs in zip(grads["tidu"], grads["torch"]):
        same(ours, theirs)
    assert calls["tidu"] == calls["torch"] == []    # a leaf that is not an input: no hook
    # (PyTorch's grad(loss, [leaf, h]) gives h's gradient without its hook, though the hooked
    # one flows on to leaf; here h's is the hooked one in every case, as grad(loss, h) and
    # backward(inputs=[leaf, h]) give it in PyTorch)
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.register_hook(lambda g: g * 4)
    of_x, of_h = autograd.grad((h * h).sum(), [x, h])
    same(of_h, 4 * 2 * h.data)
    same(of_x, 3 * 4 * 2 * h.data)


def test_create_graph_hook_gets_history_and_double_backward_runs_it_again():
    x, tx = pair([1.0, 2.0])
    out = {}
    for lib, leaf, grad in (("tidu", x, autograd.grad), ("torch", tx, torch.autograd.grad)):
        h = leaf ** 2
        flags = []
        h.register_hook(lambda g, flags=flags: flags.append(g.requires_grad) or g * 3)
        (g,) = grad((h ** 2).sum(), leaf, create_graph=True)
        (gg,) = grad(g.sum(), leaf)                  # h is in g's history: its hook runs again
        out[lib] = (g, gg, flags)
    same(out["tidu"][0], out["torch"][0])
    same(out["tidu"][1], out["torch"][1])
    assert out["tidu"][2] == out["torch"][2] == [True, False]


@pytest.mark.filterwarnings(r"ignore:Using backward\(\) with create_graph=True")
def test_create_graph_backward_with_a_hook_that_uses_a_parameter():
    # the hook's result depends on w: the second derivative reaches w through the hook
    x, tx = pair([0.5, -1.5])
    w, tw = pair([2.0, 3.0])
    for leaf, param, sin in ((x, w, tnp.sin), (tx, tw, torch.sin)):
        h = sin(leaf)
        h.register_hook(lambda g, param=param: g * param)
        (h * h).sum().backward(create_graph=True)
        g = leaf.grad
        leaf.grad = None
        (g * g).sum().backward()
    same(x.grad, tx.grad)
    same(w.grad, tw.grad)


@pytest.mark.parametrize("strategy", ["none", "balanced"])
def test_checkpoint_strategies_give_the_same_hooked_gradients(strategy):
    x, tx = pair(np.linspace(-1.0, 1.0, 6))
    m, tm = pair(np.linspace(0.2, 1.2, 6).reshape(2, 3))
    with tnp.checkpoint_strategy(strategy):
        h = tnp.tanh(x.reshape(3, 2) @ m) * tnp.exp(x[:3])
        h.register_hook(lambda g: g / (1.0 + tnp.sqrt(tnp.sum(g * g))))   # a norm clip
        loss = tnp.sum(tnp.sin(h) * h)
    loss.backward()
    th = torch.tanh(tx.reshape(3, 2) @ tm) * torch.exp(tx[:3])
    th.register_hook(lambda g: g / (1.0 + torch.sqrt(torch.sum(g * g))))
    torch.sum(torch.sin(th) * th).backward()
    same(x.grad, tx.grad)
    same(m.grad, tm.grad)


def test_a_zero_gradient_is_passed_as_zeros():
    x, tx = pair([1.0, -2.0])
    seen = []
    for leaf, sign in ((x, tnp.sign), (tx, torch.sign)):
        h = leaf * 1.0
        h.register_hook(lambda g: seen.append(g.detach()) or g + 1)
        sign(h).sum().backward()
    same(seen[0], seen[1])
    same(x.grad, tx.grad)                           # the hook's ones flow on


def test_hook_on_a_tensor_no_longer_referenced_still_runs_and_then_goes():
    keys = []

    def loss_of(leaf, total):
        h = leaf * 2                                 # only the recording holds it after
        h.register_hook(lambda g: g * 7)
        keys.append(getattr(h, "key", None))
        return total(h * h)

    x, tx = pair([1.0, 3.0])
    loss, tloss = loss_of(x, tnp.sum), loss_of(tx, torch.sum)
    gc.collect()
    assert keys[0] in frontend._hooks
    loss.backward()
    tloss.backward()
    same(x.grad, tx.grad)
    del loss
    gc.collect()
    assert keys[0] not in frontend._hooks           # gone with the recorded op


def test_writing_into_the_gradient_changes_no_other_gradient():
    x, tx = pair([1.0, 2.0])
    y = tnp.tensor([5.0, 6.0], requires_grad=True)
    seed = np.ones(2)
    kept = []

    def in_place(g):
        g.data *= 100                                # PyTorch: g.mul_(100)
        kept.append(g)

    x.register_hook(in_place)
    (x + y).backward(seed)
    # in PyTorch the write reaches y.grad too (x's and y's gradients are one tensor there);
    # here only x's gradient takes it, the seed and y's are untouched
    np.testing.assert_array_equal(x.grad, [100.0, 100.0])
    np.testing.assert_array_equal(y.grad, [1.0, 1.0])
    np.testing.assert_array_equal(seed, [1.0, 1.0])
    x.grad *= 2                                      # the .grad does not alias the hook's g
    np.testing.assert_array_equal(kept[0].data, [100.0, 100.0])
    # a write into an intermediate's gradient, as PyTorch: it flows on for that use only
    ty = tx * 1.0
    tk = tx * 1.0
    ty.register_hook(lambda g: g.mul_(100))
    (ty + tk).backward(torch.ones(2))
    x2 = tnp.tensor([1.0, 2.0], requires_grad=True)
    h, k = x2 * 1.0, x2 * 1.0
    h.register_hook(lambda g: in_place(g))
    (h + k).backward(np.ones(2))
    same(x2.grad, tx.grad)


def test_a_returned_array_or_tensor_is_copied():
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    mine = np.array([7.0, 8.0])
    x.register_hook(lambda g: mine)
    (x * x).sum().backward()
    x.grad *= 0
    np.testing.assert_array_equal(mine, [7.0, 8.0])


def test_errors_name_register_hook():
    with pytest.raises(BackwardError, match="register_hook"):
        tnp.tensor([1.0]).register_hook(lambda g: g)
    with pytest.raises(RuntimeError):                # PyTorch's
        torch.tensor([1.0]).register_hook(lambda g: g)
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1.0
    handle = h.register_hook(lambda g: g.sum())      # the wrong shape
    with pytest.raises(BackwardError, match=r"register_hook.*shape \(\).*shape \(2,\)"):
        h.sum().backward()
    assert x.grad is None                            # all or nothing
    handle.remove()
    handle = h.register_hook(lambda g: g.astype(np.float32))
    with pytest.raises(BackwardError, match="register_hook.*float32.*float64"):
        h.sum().backward()
    handle.remove()
    h.register_hook(lambda g: 3.0)
    with pytest.raises(BackwardError, match="register_hook.*returned a float"):
        h.sum().backward()
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    th = tx * 1.0
    th.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match="changed the size"):
        th.sum().backward()


def test_remove_and_with_block():
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    handle = x.register_hook(lambda g: g * 2)
    handle.remove()
    handle.remove()                                  # a second remove does nothing
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])
    assert x.key not in frontend._hooks              # no hook left: the plain walk
    with x.register_hook(lambda g: g * 0):
        (x * x).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, [4.0, 8.0])


def test_grad_of_several_outputs_refuses_a_hook_reached_by_two():
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.register_hook(lambda g: g * 2)
    with pytest.raises(BackwardError, match="more than one of the outputs"):
        autograd.grad([(h * h).sum(), h.sum()], x)
    # a hook reached from one output only is fine, and as PyTorch's
    w, tw = pair([0.5, 0.25])
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    th = tx * 3
    th.register_hook(lambda g: g * 2)
    ours = autograd.grad([(h * h).sum(), (w * x).sum()], [x, w])
    theirs = torch.autograd.grad([(th * th).sum(), (tw * tx).sum()], [tx, tw])
    for a, b in zip(ours, theirs):
        same(a, b)


def test_hvp_refuses_a_loss_that_reaches_a_hook():
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    loss = tnp.sum(h * h)
    autograd.hvp(loss, x, np.ones(2))                # no hook: fine
    h.register_hook(lambda g: g * 2)
    with pytest.raises(BackwardError, match="hvp.*register_hook"):
        autograd.hvp(loss, x, np.ones(2))


def test_complex_leaf_hook():
    z = tnp.tensor([1.0 + 1.0j, -0.5 + 2.0j], requires_grad=True)
    tz = torch.tensor([1.0 + 1.0j, -0.5 + 2.0j], requires_grad=True)
    for leaf, total, absolute in ((z, tnp.sum, tnp.abs), (tz, torch.sum, torch.abs)):
        leaf.register_hook(lambda g: g * 1j)
        total(absolute(leaf * leaf)).backward()
    same(z.grad, tz.grad)


def test_mlp_step_with_gradient_clipping_hooks_matches_pytorch():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((8, 4))
    params = [rng.standard_normal((4, 5)), rng.standard_normal(5), rng.standard_normal((5, 1))]
    ours = [tnp.tensor(p, requires_grad=True) for p in params]
    theirs = [torch.tensor(p, requires_grad=True) for p in params]
    for ps, lib, inputs in ((ours, tnp, tnp.tensor(data)), (theirs, torch, torch.tensor(data))):
        w1, b1, w2 = ps
        hidden = lib.tanh(inputs @ w1 + b1)
        hidden.register_hook(lambda g, lib=lib: lib.clip(g, -0.05, 0.05))
        w1.register_hook(lambda g: g * 0.5)
        loss = lib.sum((hidden @ w2) ** 2)
        loss.backward()
    for a, b in zip(ours, theirs):
        same(a.grad, b.grad)


def test_backward_of_a_leaf_itself_and_a_tensor_on_pytorch_arrays():
    x, tx = pair([1.0, 2.0])
    for leaf in (x, tx):
        leaf.register_hook(lambda g: g * 2)
    x.backward(np.ones(2))
    tx.backward(torch.ones(2, dtype=torch.float64))
    same(x.grad, tx.grad)
    # a tidu tensor holding a PyTorch array: the hook's gradient is one too, and the zeros
    # passed for a zero gradient as well
    w = tnp.tensor(torch.tensor([1.0, 2.0], dtype=torch.float64), requires_grad=True)
    tw = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    kinds = []
    for leaf, sign in ((w, tnp.sign), (tw, torch.sign)):
        h = leaf * 3
        h.register_hook(lambda g: kinds.append(type(g.data)) or g * 2)
        k = leaf * 1.0
        k.register_hook(lambda g: g + 1)
        ((h * h).sum() + sign(k).sum()).backward()
    assert kinds[0] is torch.Tensor
    assert isinstance(w.grad, torch.Tensor)
    same(w.grad.numpy(), tw.grad)


@pytest.mark.filterwarnings(r"ignore:Using backward\(\) with create_graph=True")
def test_grad_mode_in_hooks_and_backward_inputs():
    modes = {"tidu": [], "torch": []}
    x, tx = pair([1.0, 2.0])
    for lib, leaf, enabled in (("tidu", x, tnp.is_grad_enabled),
                               ("torch", tx, torch.is_grad_enabled)):
        leaf.register_hook(lambda g, lib=lib, enabled=enabled: modes[lib].append(enabled()))
        (leaf * leaf).sum().backward()
        (leaf * leaf).sum().backward(create_graph=True)     # ops in the hook are recorded
    assert modes["tidu"] == modes["torch"] == [False, True]
    # backward(inputs=[h]) accumulates h's hooked gradient, as PyTorch's
    hs = []
    for leaf in pair([1.0, 2.0]):
        h = leaf * 3
        h.register_hook(lambda g: g * 4)
        (h * h).sum().backward(inputs=[h])
        hs.append(h)
    same(hs[0].grad, hs[1].grad)
