"""Hostile round 58e on ``Tensor.register_hook``: what a PyTorch user does with hooks that
the first tests did not try, each compared with the same PyTorch program.
"""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import Mapping

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor import autograd
from primitives.tensor.eager import frontend
from primitives.scalar import ScalarExecutor, ScalarOp
from tidu.eager import Recorder, try_backward

from test_eager_backward import leaf, record_primitive

torch = pytest.importorskip("torch")


def pair(values):
    """The same leaf in tidu and in PyTorch."""
    values = np.array(values, dtype=float)
    return (tnp.tensor(values, requires_grad=True),
            torch.tensor(values, requires_grad=True))


def same(ours, theirs):
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    ours = ours.data if isinstance(ours, tnp.Tensor) else ours
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("on", ["intermediate", "leaf"])
def test_a_hook_registered_by_a_hook_runs_when_the_walk_reaches_its_tensor(on):
    # PyTorch looks a tensor's hooks up when backward reaches it: one a hook adds to a
    # tensor not reached yet runs (tidu took a snapshot of the hooks when backward began)
    grads = []
    for leaf_, total in ((pair([1.0, 2.0])[0], tnp.sum), (pair([1.0, 2.0])[1], torch.sum)):
        a = leaf_ * 2
        b = a * 3
        later = a if on == "intermediate" else leaf_
        b.register_hook(lambda g, later=later: later.register_hook(lambda g2: g2 * 100) and None)
        total(b * b).backward()
        grads.append(leaf_.grad)
    same(grads[0], grads[1])
    assert grads[0][0] == 7200.0


def test_a_hook_removed_by_a_hook_does_not_run():
    grads = []
    for leaf_, total in zip(pair([1.0, 2.0]), (tnp.sum, torch.sum)):
        a = leaf_ * 2
        b = a * 3
        handles = [a.register_hook(lambda g: g * 100)]
        b.register_hook(lambda g: handles[0].remove())
        total(b * b).backward()
        grads.append(leaf_.grad)
    same(grads[0], grads[1])


def test_a_leaf_whose_hook_holds_it_is_collected():
    # a leaf's hooks were held by a module-level dict until the leaf died, and the hook
    # holding the leaf kept it alive: a leak PyTorch does not have (the leaf holds its hooks)
    def hooked_leaf(make):
        x = make()
        x.register_hook(lambda g, x=x: g * 2)
        return weakref.ref(x), x.key if isinstance(x, tnp.Tensor) else None

    ours, key = hooked_leaf(lambda: tnp.tensor([1.0, 2.0], requires_grad=True))
    theirs, _ = hooked_leaf(lambda: torch.tensor([1.0, 2.0], requires_grad=True))
    gc.collect()
    assert theirs() is None
    assert ours() is None
    assert key not in frontend._hooks


def test_a_kept_handle_keeps_neither_the_leaf_nor_its_hook():
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    key = x.key
    handle = x.register_hook(lambda g: g * 2)
    alive = weakref.ref(x)
    del x
    gc.collect()
    assert alive() is None and key not in frontend._hooks
    handle.remove()                                  # nothing left to remove: no error


def test_hooks_keep_working_after_their_leaf_is_collected_and_another_is_hooked():
    for _ in range(3):
        x = tnp.tensor([1.0, 2.0], requires_grad=True)
        x.register_hook(lambda g, x=x: g * x.data)
        del x
    gc.collect()
    w, tw = pair([3.0, -1.0])
    for leaf_ in (w, tw):
        leaf_.register_hook(lambda g: g + 1)
        (leaf_ * leaf_).sum().backward()
    same(w.grad, tw.grad)


def test_a_zero_gradient_after_a_leaf_was_given_data_of_another_shape():
    # the hook's zeros had the shape the leaf had when the hook was registered: backward
    # then refused the leaf's gradient
    x, tx = pair([1.0, 2.0])
    seen = []
    for leaf_, sign, new in ((x, tnp.sign, np.array([1.0, -2.0, 3.0])),
                             (tx, torch.sign, torch.tensor([1.0, -2.0, 3.0]))):
        leaf_.register_hook(lambda g: seen.append(g.shape) or g + 1)
        leaf_.data = new
        sign(leaf_).sum().backward()
    same(x.grad, tx.grad)
    assert tuple(seen[0]) == tuple(seen[1]) == (3,)


class _NotIterable(Mapping):
    """Hooks that a walk may look keys up in but not list (a live registry of many)."""

    def __init__(self, hooks: dict) -> None:
        self.hooks = hooks

    def __getitem__(self, key):
        return self.hooks[key]

    def __contains__(self, key) -> bool:
        return key in self.hooks

    def __iter__(self):
        raise AssertionError("the walk listed every hook")

    def __len__(self) -> int:
        return len(self.hooks)


def test_the_walk_looks_hooks_up_and_never_lists_them():
    # a hook per parameter of a big model: each backward built a dict of them all and
    # looped over it (10^4 hooks: a 3000-op backward took 60-80% longer)
    recorder = Recorder()
    x = leaf(recorder, 0.7)
    [s] = record_primitive(recorder, ScalarOp.SIN, [x])
    [y] = record_primitive(recorder, ScalarOp.MUL, [s, x])
    others = {f"unrelated{i}": (lambda ct: 0.0) for i in range(100)}
    hooks = _NotIterable({**others, s.key: lambda ct: 2.0 * ct, x.key: lambda ct: ct + 1.0})
    result = try_backward(y.key, y.trace, 1.0, ScalarExecutor(), hooks=hooks)
    expected = 2.0 * 0.7 * np.cos(0.7) + np.sin(0.7) + 1.0      # d(s x)/dx with ds scaled
    assert np.isclose(result[x.key], expected)
    assert np.isclose(result[s.key], 2.0 * 0.7)


def test_many_hooked_parameters_run_only_where_reached():
    params = [tnp.tensor([float(i)], requires_grad=True) for i in range(2000)]
    ran = []
    for p in params:
        p.register_hook(lambda g: ran.append(1))
    x, tx = pair([0.5, 1.5])
    for leaf_, total in ((x, tnp.sum), (tx, torch.sum)):
        leaf_.register_hook(lambda g: g * 3)
        total(leaf_ * leaf_ * params[0].data[0]).backward()
    same(x.grad, tx.grad)
    assert not ran


def test_hook_writing_into_its_gradient_and_double_backward_match_pytorch():
    results = []
    for lib in (tnp, torch):
        x = lib.tensor(np.array([1.0, 2.0]), requires_grad=True)
        y = lib.tensor(np.array([3.0, 4.0]), requires_grad=True)
        h = x * y
        if lib is tnp:
            def scale(g):
                g.data *= 5
        else:
            def scale(g):
                with torch.no_grad():
                    g.mul_(5)
        h.register_hook(scale)
        grad = autograd.grad if lib is tnp else torch.autograd.grad
        (gx,) = grad((h * h).sum(), x, create_graph=True)
        gx.sum().backward()
        results.append((gx, x.grad, y.grad))
    for ours, theirs in zip(*results):
        same(ours, theirs)


def test_a_raising_hook_changes_no_grad_and_leaves_the_library_usable():
    x, tx = pair([1.0, 2.0])
    w = tnp.tensor([3.0, 4.0], requires_grad=True)
    h = x * w

    def boom(g):
        raise ValueError("boom")

    handle = h.register_hook(boom)
    with pytest.raises(ValueError, match="boom"):
        (h.sum() + (w * w).sum()).backward()
    assert x.grad is None and w.grad is None           # all or nothing
    assert (x * 2).requires_grad                       # grad mode restored
    handle.remove()
    h.sum().backward()
    th = tx * torch.tensor(np.array([3.0, 4.0]))
    th.sum().backward()
    same(x.grad, tx.grad)


def test_a_hook_added_by_a_hook_to_a_tensor_backward_went_past_does_not_run():
    # c's node ran before a's hook added a hook to c: PyTorch does not run it; tidu ran it
    # after the walk as if c were a leaf, changing c's retained .grad
    results = []
    for x, total in zip(pair([1.0, 2.0]), (tnp.sum, torch.sum)):
        a = x * 2
        c = (a * 3) * 1.5
        c.retain_grad()
        a.register_hook(lambda g, c=c: c.register_hook(lambda g2: g2 * 100) and None)
        total(c * c).backward()
        results.append((x.grad, c.grad))
    same(results[0][0], results[1][0])
    same(results[0][1], results[1][1])


@pytest.mark.parametrize("create_graph", [False, True])
def test_hooks_between_rematerialized_nodes_match_pytorch(create_graph):
    # arrays above SMALL_BYTES, so that "balanced" drops values and backward recomputes
    # them, across the segments the hooked walk runs between hooked nodes
    values = np.linspace(0.1, 1.0, 5000)
    results = []
    for lib in (tnp, torch):
        x = lib.tensor(values, requires_grad=True)
        x.register_hook(lambda g: g - 0.5)
        with tnp.checkpoint_strategy("balanced") if lib is tnp else contextlib.nullcontext():
            h = x
            for i in range(30):
                h = lib.tanh(h) * 1.3
                if i % 7 == 3:
                    h.register_hook(lambda g, i=i: g * (1.0 + i / 10))
            loss = (h ** 2).sum()
        if lib is tnp:
            assert h.grad_fn.dropped is not None            # a value to recompute
        if create_graph:
            grad = autograd.grad if lib is tnp else torch.autograd.grad
            (gx,) = grad(loss, x, create_graph=True)
            (gx * gx).sum().backward()
        else:
            loss.backward()
        results.append(x.grad)
    same(results[0], results[1])
