"""Which cotangents ``Tensor.backward`` keeps: those of live leaves and live computed tensors.

Leaves and computed tensors share one table of weak references; dead entries are dropped
as the table grows. These tests make it grow past its limit between a leaf's first use and
backward, and check that the leaves' gradients (and only the live tensors') are still there.
"""

import gc
import math

import numpy as np

from primitives import tensor as tnp
from primitives.tensor.eager import frontend


def _chain(y, c, steps):
    for _ in range(steps):
        y = tnp.sin(y) * y + c
    return y


def _forward_mode(y0, c, steps):
    """(d y_N / d y0, d y_N / d c) of the chain, by hand."""
    y, dy0, dc = y0, 1.0, 0.0
    for _ in range(steps):
        s, co = math.sin(y), math.cos(y)
        factor = co * y + s
        y, dy0, dc = s * y + c, factor * dy0, factor * dc + 1.0
    return dy0, dc


def test_leaves_keep_their_gradients_after_many_dead_references_are_dropped():
    y0 = tnp.tensor(np.float64(0.3), requires_grad=True)
    c = tnp.tensor(np.float64(0.1), requires_grad=True)
    limit = frontend._referenced_limit[0]
    out = _chain(y0, c, 2 * limit)            # 6 x the limit of dead tensors: several drops
    grads = out.backward()
    want_y0, want_c = _forward_mode(0.3, 0.1, 2 * limit)
    np.testing.assert_allclose([grads.grad(y0), grads.grad(c)], [want_y0, want_c], rtol=1e-9)
    np.testing.assert_allclose([y0.grad, c.grad], [want_y0, want_c], rtol=1e-9)


def test_a_leaf_made_to_require_grad_after_its_key_was_made_gets_its_gradient():
    x = tnp.tensor(np.float64(2.0))
    _ = x.key                                   # a key made while it needs no gradient
    x.requires_grad = True
    steps = frontend._referenced_limit[0] + 10      # 3 ops a step: past the limit
    grads = _chain(x, 0.5, steps).backward()
    want, _ = _forward_mode(2.0, 0.5, steps)
    np.testing.assert_allclose(grads.grad(x), want, rtol=1e-9)
    np.testing.assert_allclose(x.grad, want, rtol=1e-9)


def test_only_live_tensors_cotangents_are_kept():
    x = tnp.tensor(np.array([0.5, 1.5]), requires_grad=True)
    kept = tnp.sin(x)
    y = (kept * 3.0).sum()
    dead_leaf = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = y + (dead_leaf * dead_leaf).sum()
    del dead_leaf
    gc.collect()
    grads = y.backward()
    np.testing.assert_allclose(grads.grad(kept), [3.0, 3.0])
    np.testing.assert_allclose(grads.grad(x), 3.0 * np.cos([0.5, 1.5]))
    # x, kept and y: no dead leaf, no dead temporary (its internals: the one place to look)
    assert set(grads._by_key) == {x.key, kept.key, y.key}
