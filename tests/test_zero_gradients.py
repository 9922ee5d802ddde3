"""A value the output reaches only through ops of zero derivative (``sign``, ``round``,
``floor``) has a zero gradient, not none, as in PyTorch: ``try_backward(..., zeros=set())``
names such keys, ``Tensor.backward`` gives such leaves zeros as ``.grad`` (so an
optimizer's momentum and weight decay move them as PyTorch's do), and
``tnp.autograd.grad`` returns zeros for them instead of calling them unused."""

from __future__ import annotations

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor.eager.frontend import EXECUTOR
from tidu.eager import try_backward


def _leaf(values):
    return tnp.tensor(np.array(values, dtype=float), requires_grad=True)


def test_try_backward_names_the_keys_reached_with_a_zero_cotangent():
    x, w = _leaf([0.3, -1.2]), _leaf([2.0, 3.0])
    s = tnp.sign(x)                               # reached: the product gives it a cotangent
    r = tnp.round(s * 0.4)                        # round gives s * 0.4 a zero
    out = tnp.sum(s * w + r)
    zeros: set = set()
    cotangents = try_backward(out.key, out._trace, np.ones(()), EXECUTOR, zeros=zeros)
    assert x.key in zeros and x.key not in cotangents       # sign: zero, whatever comes in
    assert s.key in cotangents and s.key not in zeros       # another path gave it one
    np.testing.assert_array_equal(cotangents[w.key], np.sign([0.3, -1.2]))
    # keep restricts the zeros as it does the result
    kept: set = set()
    try_backward(out.key, out._trace, np.ones(()), EXECUTOR, keep={x.key}, zeros=kept)
    assert kept == {x.key}
    # without the argument, the result is what it always was: only keys with a cotangent
    assert set(try_backward(out.key, out._trace, np.ones(()), EXECUTOR)) == set(cotangents)


def test_a_node_skipped_for_want_of_cotangents_passes_zeros_to_its_inputs():
    a = _leaf([[2.0, 1.0], [1.0, 3.0]])
    eigenvalues, _ = tnp.linalg.eigh(a)           # two outputs, neither gets a cotangent
    out = tnp.sum(tnp.floor(eigenvalues))
    zeros: set = set()
    try_backward(out.key, out._trace, np.ones(()), EXECUTOR, zeros=zeros)
    assert a.key in zeros
    out.backward()
    np.testing.assert_array_equal(a.grad, np.zeros((2, 2)))


def test_leaves_reached_through_zero_derivatives_get_zeros_and_unreached_ones_none():
    x, y, unused = _leaf([0.5, -2.0]), _leaf([1.0, 2.0]), _leaf([7.0])
    out = tnp.sum(tnp.round(tnp.sign(x) * 2.0)) + tnp.sum(y * y)
    grads = out.backward()
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])
    np.testing.assert_array_equal(grads.grad(x), [0.0, 0.0])
    assert x.grad.dtype == x.dtype and not np.shares_memory(x.grad, grads.grad(x))
    np.testing.assert_array_equal(y.grad, [2.0, 4.0])
    assert unused.grad is None
    out.backward()                                # accumulates: zeros add nothing
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])
    np.testing.assert_array_equal(y.grad, [4.0, 8.0])


def test_float32_and_complex_leaves_get_zeros_of_their_dtype():
    f = tnp.tensor(np.array([0.5, 1.5], np.float32), requires_grad=True)
    z = tnp.tensor(np.array([1 + 2j]), requires_grad=True)
    out = tnp.sum(tnp.floor(f)) + tnp.real(tnp.sum(z * 0)) * 0 + tnp.sum(tnp.sign(tnp.abs(z)))
    out.backward()
    assert f.grad.dtype == np.float32 and not f.grad.any()
    assert z.grad.dtype == np.complex128


def test_create_graph_gives_zero_tensors_without_history():
    x = _leaf([0.5, 2.0])
    grads = tnp.sum(tnp.floor(x)).backward(create_graph=True)
    g = grads.grad(x)
    assert isinstance(g, tnp.Tensor) and not g.requires_grad
    np.testing.assert_array_equal(g.data, [0.0, 0.0])


def test_autograd_grad_gives_zeros_for_an_input_used_through_a_zero_derivative():
    x, unused = _leaf([0.3, -1.2]), _leaf([1.0])
    (g,) = tnp.autograd.grad(tnp.sum(tnp.sign(x)), x)
    np.testing.assert_array_equal(g.data, [0.0, 0.0])
    with pytest.raises(tnp.BackwardError, match=r"inputs\[1\] was not used"):
        tnp.autograd.grad(tnp.sum(tnp.sign(x)), [x, unused])
    g, none = tnp.autograd.grad(tnp.sum(tnp.sign(x)), [x, unused], allow_unused=True)
    assert none is None and not g.data.any()
    # two outputs: one gives a cotangent, the other a zero; the sum is the cotangent
    (g,) = tnp.autograd.grad([tnp.sum(tnp.sign(x)), tnp.sum(3 * x)], x)
    np.testing.assert_array_equal(g.data, [3.0, 3.0])


def test_sgd_moves_a_zero_gradient_leaf_by_weight_decay_as_pytorch_does():
    q = _leaf([0.7, -0.4])
    opt = tnp.optim.SGD([q], lr=0.1, weight_decay=0.5)
    opt.zero_grad()
    tnp.sum(tnp.round(q)).backward()
    opt.step()                                    # grad 0 + decay 0.5 q: q (1 - 0.05)
    np.testing.assert_allclose(q.data, [0.7 * 0.95, -0.4 * 0.95], rtol=1e-15)


def test_a_long_chain_behind_a_zero_derivative_is_walked_without_recursion():
    x = _leaf([0.25])
    y = x
    for _ in range(20_000):
        y = y * 1.0001
    out = tnp.sum(tnp.floor(y))
    out.backward()
    np.testing.assert_array_equal(x.grad, [0.0])
