"""``checkpoint(f, policy=...)``: JAX's policies, under ``jit`` and on the eager tape.

Under ``jit(grad(...))`` a checkpointed block's values are recomputed where the
backward half reads them unless its policy saves them: the gradients are the
plain program's bit for bit and the peak (``tracemalloc``) falls. Under every
other transform ``checkpoint`` changes no value. On eager tensors the node keeps
what the policy saves.
"""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.transforms.functional import FunctionalError
from tidu import TiduError

from tensor_helpers import warm_call_peak

rng = np.random.default_rng(1)
WEIGHTS = [rng.standard_normal((32, 32)) / 6 for _ in range(16)]
H0 = rng.standard_normal((128, 32))


def layer(h, w):
    a = tnp.tanh(h @ w)
    return h + 0.1 * (a * a + tnp.sin(a))


def network(policy="plain"):
    block = layer if policy == "plain" else tnp.checkpoint(layer, policy=policy)

    def loss(weights, h):
        for w in weights:
            h = block(h, w)
        return tnp.sum(h)
    return loss


def peak_and_grads(loss):
    return warm_call_peak(tnp.jit(tnp.grad(loss)), WEIGHTS, H0)


def test_policies_under_jit_keep_the_gradients_and_order_the_peaks():
    plain, expected = peak_and_grads(network())
    peaks = {}
    for policy in ("nothing_saveable", "dots_saveable", "everything_saveable", None):
        peaks[policy], grads = peak_and_grads(network(policy))
        for g, e in zip(grads, expected):
            np.testing.assert_array_equal(g, e)
    assert peaks["nothing_saveable"] < 0.6 * plain
    assert peaks[None] == pytest.approx(peaks["nothing_saveable"], rel=0.05)
    assert peaks["nothing_saveable"] < peaks["dots_saveable"] < 1.05 * plain
    assert peaks["everything_saveable"] == pytest.approx(plain, rel=0.05)


def test_a_policy_may_be_a_function_of_the_operation():
    from primitives.tensor.ops.dot import DotGeneral
    seen = []

    def keep_products(op):
        seen.append(type(op).__name__)
        return isinstance(op, DotGeneral)

    _, expected = peak_and_grads(network())
    _, grads = peak_and_grads(network(keep_products))
    for g, e in zip(grads, expected):
        np.testing.assert_array_equal(g, e)
    assert "DotGeneral" in seen


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "jvp", "vmap", "hessian",
                                       "jacfwd"])
def test_checkpoint_changes_no_value_under_any_transform(transform):
    w = WEIGHTS[0][:4, :4]

    def f(h, policy):
        block = layer if policy == "plain" else tnp.checkpoint(layer, policy=policy)
        return tnp.sum(block(block(h, w), w) ** 2)

    h = H0[:3, :4]
    results = []
    for policy in ("plain", None, "dots_saveable"):
        g = lambda v: f(v, policy)     # noqa: E731
        if transform == "grad":
            results.append(tnp.grad(g)(h))
        elif transform == "value_and_grad":
            results.append(tnp.value_and_grad(g)(h)[1])
        elif transform == "jvp":
            results.append(tnp.jvp(g, (h,), (np.ones_like(h),))[1])
        elif transform == "vmap":
            results.append(tnp.vmap(tnp.grad(g))(h[:, None, :]))
        elif transform == "hessian":
            results.append(tnp.hessian(g)(h[0]))
        else:
            results.append(tnp.jacfwd(g)(h))
    for result in results[1:]:
        np.testing.assert_allclose(result, results[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("policy", [None, "dots_saveable", "everything_saveable",
                                    "dots_with_no_batch_dims_saveable"])
def test_eager_checkpoint_keeps_what_the_policy_saves(policy):
    w = tnp.tensor(WEIGHTS[0], requires_grad=True)
    h = tnp.tensor(H0, requires_grad=True)
    out = tnp.checkpoint(layer, policy=policy)(h, w)
    saved = list(out._trace.saved_values.values())
    product = H0 @ WEIGHTS[0]
    keeps_product = any(np.array_equal(v, product) for v in saved)
    assert keeps_product == (policy is not None)
    grads = tnp.sum(out).backward()
    plain_h = tnp.tensor(H0, requires_grad=True)
    plain_w = tnp.tensor(WEIGHTS[0], requires_grad=True)
    expected = tnp.sum(layer(plain_h, plain_w)).backward()
    np.testing.assert_allclose(grads.grad(w), expected.grad(plain_w), rtol=1e-12)
    np.testing.assert_allclose(grads.grad(h), expected.grad(plain_h), rtol=1e-12)


def test_an_unknown_policy_is_named():
    with pytest.raises(FunctionalError, match="unknown policy 'dots'") as caught:
        tnp.checkpoint(layer, policy="dots")
    assert isinstance(caught.value, TiduError)


def test_jit_and_grad_compose_around_checkpoint_in_both_orders():
    loss = network("nothing_saveable")
    weights = WEIGHTS[:4]
    expected = tnp.grad(network(), argnums=1)(weights, H0)
    np.testing.assert_allclose(tnp.grad(tnp.jit(loss), argnums=1)(weights, H0), expected,
                               rtol=1e-12)
    np.testing.assert_allclose(tnp.jit(tnp.grad(loss, argnums=1))(weights, H0), expected,
                               rtol=1e-12)


def test_an_array_written_after_an_eager_checkpointed_forward_changes_no_gradient():
    w_data = WEIGHTS[0].copy()
    h = tnp.tensor(H0, requires_grad=True)
    out = tnp.checkpoint(layer)(h, w_data)             # w is a constant array
    w_data[...] = 0.0                                  # written before backward
    grads = tnp.sum(out).backward()
    plain_h = tnp.tensor(H0, requires_grad=True)
    expected = tnp.sum(layer(plain_h, WEIGHTS[0])).backward().grad(plain_h)
    np.testing.assert_allclose(grads.grad(h), expected, rtol=1e-12)


def test_a_value_escaping_a_checkpointed_block_is_refused():
    stash = []

    def leaky(h, w):
        stash.append(h * 2.0)
        return layer(h, w)

    tnp.jit(tnp.grad(lambda h: tnp.sum(tnp.checkpoint(leaky)(h, WEIGHTS[0]))))(H0)
    with pytest.raises(FunctionalError, match="escaped tracer"):
        stash[0] + 1.0


def test_integer_and_boolean_results_of_an_eager_checkpoint_need_no_grad():
    x = tnp.tensor([0.5, 1.0], requires_grad=True)
    loss, index = tnp.checkpoint(lambda v: (tnp.sum(v * v), tnp.argmax(v)))(x)
    mask = tnp.checkpoint(lambda v: v > 0.7)(x)
    assert not index.requires_grad and not mask.requires_grad and loss.requires_grad
    assert int(index) == 1 and mask.tolist() == [False, True]     # a value, not a gradient
    assert tnp.argmax(x).requires_grad is False                   # as outside a checkpoint
    with pytest.raises(TiduError):
        index.backward()
    np.testing.assert_array_equal(loss.backward().grad(x), [1.0, 2.0])
