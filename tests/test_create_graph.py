"""``backward(create_graph=True)``, ``autograd.grad`` and ``try_backward_recorded``.

Gradients that record their own backward work can be differentiated again:
to third order against analytic derivatives (tensor and scalar front ends),
double backward on random eager programs against PyTorch's and ``try_hvp``,
``.grad`` accumulating with history, ``torch.autograd.grad``'s semantics
(several outputs, ``grad_outputs``, ``allow_unused``, non-leaf inputs, errors),
composite nodes (retained values must not become constants), complex inputs,
and a long tape. Without ``create_graph`` nothing changes: arrays, as before.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given

from primitives import tensor as tnp
from primitives.scalar import ScalarExecutor, trace_scalar
from primitives.scalar.eager import Scalar, exp, sin
from primitives.tensor import autograd
from primitives.tensor.eager import NumpyExecutor
from tidu import TiduError
from tidu.eager import (EagerInput, RecordedGraph, Recorder, try_backward, try_backward_recorded,
                        try_hvp)
from tidu.errors import InvalidArgumentError
from tidu.graph import Input, compiled, evaluate

from test_eager_hvp import (SETTINGS, SHAPES, MinimalExecutor, assert_close, eager_loss,
                            program_inputs, tensor_programs, torch_hvp)

X = np.array([0.3, -1.2, 2.0])


def derivatives(x):
    """f = sum(sin(x) x^3) and its first three derivatives, elementwise."""
    s, c = np.sin(x), np.cos(x)
    return (np.sum(s * x ** 3), c * x ** 3 + 3 * x ** 2 * s,
            -s * x ** 3 + 6 * x ** 2 * c + 6 * x * s,
            -c * x ** 3 - 9 * x ** 2 * s + 18 * x * c + 6 * s)


def f(x):
    return tnp.sum(tnp.sin(x) * x ** 3)


def test_third_order_with_autograd_grad():
    x = tnp.tensor(X, requires_grad=True)
    _, d1, d2, d3 = derivatives(X)
    (g1,) = autograd.grad(f(x), x, create_graph=True)
    assert isinstance(g1, tnp.Tensor) and g1.requires_grad
    np.testing.assert_allclose(g1.data, d1, rtol=1e-12)
    (g2,) = autograd.grad(tnp.sum(g1), x, create_graph=True)    # the Hessian is diagonal
    np.testing.assert_allclose(g2.data, d2, rtol=1e-12)
    (g3,) = autograd.grad(tnp.sum(g2), x)
    assert not g3.requires_grad
    np.testing.assert_allclose(g3.data, d3, rtol=1e-12)
    assert x.grad is None                                        # grad never touches .grad


def test_third_order_with_backward_and_grad_attribute():
    x = tnp.tensor(X, requires_grad=True)
    _, d1, d2, d3 = derivatives(X)
    grads = f(x).backward(create_graph=True)
    assert isinstance(grads.grad(x), tnp.Tensor) and grads.grad(x).key == x.grad.key
    np.testing.assert_allclose(x.grad.data, d1, rtol=1e-12)
    g1, x.grad = x.grad, None
    tnp.sum(g1).backward(create_graph=True)
    g2, x.grad = x.grad, None
    np.testing.assert_allclose(g2.data, d2, rtol=1e-12)
    tnp.sum(g2).backward()
    assert isinstance(x.grad, np.ndarray)
    np.testing.assert_allclose(x.grad, d3, rtol=1e-12)


def test_grad_accumulates_with_history():
    x = tnp.tensor(X, requires_grad=True)
    _, d1, d2, _ = derivatives(X)
    f(x).backward(create_graph=True)
    f(x).backward(create_graph=True)
    np.testing.assert_allclose(x.grad.data, 2 * d1, rtol=1e-12)
    assert x.grad.requires_grad
    (h,) = autograd.grad(tnp.sum(x.grad), x)                      # d/dx of the accumulated 2 f'
    np.testing.assert_allclose(h.data, 2 * d2, rtol=1e-12)
    f(x).backward()                                              # plain: adds an array
    np.testing.assert_allclose(x.grad.data, 3 * d1, rtol=1e-12)
    assert x.grad.requires_grad                                  # the sum keeps the history
    x.grad = None
    f(x).backward()
    f(x).backward(create_graph=True)
    np.testing.assert_allclose(x.grad.data, 2 * d1, rtol=1e-12)
    (h,) = autograd.grad(tnp.sum(x.grad), x)                      # only the second has history
    np.testing.assert_allclose(h.data, d2, rtol=1e-12)


def test_without_create_graph_nothing_changes():
    x = tnp.tensor(X, requires_grad=True)
    grads = f(x).backward()
    assert type(grads.grad(x)) is np.ndarray and type(x.grad) is np.ndarray
    (g,) = autograd.grad(f(x), x)
    assert isinstance(g, tnp.Tensor) and not g.requires_grad
    np.testing.assert_allclose(g.data, x.grad, rtol=1e-15)


def test_scalar_third_order():
    x = Scalar(0.7, requires_grad=True)
    y = exp(sin(x))                          # derivatives of e^{sin x}
    s, c = math.sin(0.7), math.cos(0.7)
    e = math.exp(s)
    d1 = y.backward(create_graph=True)[x.key]
    assert isinstance(d1, Scalar) and d1.requires_grad
    d2 = d1.backward(create_graph=True)[x.key]
    d3 = d2.backward()[x.key]
    assert math.isclose(d1.value, e * c)
    assert math.isclose(d2.value, e * (c * c - s))
    assert math.isclose(d3, e * (c ** 3 - 3 * s * c - c))


def test_scalar_seed_with_history_keeps_it():
    x = Scalar(0.4, requires_grad=True)
    w = Scalar(2.5, requires_grad=True)
    y = sin(x)
    g = y.backward(seed=w * w, create_graph=True)[x.key]          # w^2 cos x
    grads = g.backward()
    assert math.isclose(grads[w.key], 2 * 2.5 * math.cos(0.4))
    assert math.isclose(grads[x.key], -2.5 ** 2 * math.sin(0.4))
    assert y.backward(seed=3.0)[x.key] == 3.0 * math.cos(0.4)     # plain seeds unchanged


@SETTINGS
@given(tensor_programs())
def test_double_backward_on_random_programs_agrees_with_try_hvp_and_pytorch(program):
    steps, wrt, directions, seed = program
    values, vectors = program_inputs(seed)
    vectors = {k: vectors[k] if k in directions else np.zeros(SHAPES[k]) for k in SHAPES}
    loss, leaves = eager_loss(steps, wrt, values)
    params = [leaves[k] for k in wrt]
    grads = autograd.grad(loss, params, create_graph=True)
    dot = sum(tnp.sum(g * vectors[k]) for g, k in zip(grads, wrt))
    double = (autograd.grad(dot, params, allow_unused=True) if isinstance(dot, tnp.Tensor)
              and dot.requires_grad else [None] * len(wrt))
    double = [np.zeros(SHAPES[k]) if h is None else h.data for h, k in zip(double, wrt)]
    hv = autograd.hvp(loss, params, [vectors[k] for k in wrt])
    for k, a, b in zip(wrt, double, hv):
        assert_close(a, b, what=k)
    want = torch_hvp(steps, wrt, values, vectors)
    for k, a in zip(wrt, double):
        assert_close(a, want[k], what=k)


def test_try_hvp_of_a_recorded_gradient_gives_third_derivatives():
    x = tnp.tensor(X, requires_grad=True)
    _, _, _, d3 = derivatives(X)
    u, v = np.array([1.0, 2.0, -1.0]), np.array([0.5, -1.0, 3.0])
    (g,) = autograd.grad(f(x), x, create_graph=True)
    dot = tnp.sum(g * u)                              # u . f'(x)
    _, hv = try_hvp(dot.key, dot._trace, np.ones(()), {x.key: v}, NumpyExecutor())
    np.testing.assert_allclose(hv[x.key], d3 * u * v, rtol=1e-12)


def test_composite_node_with_retained_values_is_differentiated_through_them():
    block = trace_scalar(lambda a, b: sin(a) * b * a, ["a", "b"])
    recorded = RecordedGraph(block, ["a", "b"], block.output_keys)
    inner = [key for key in block.value_keys if key not in block.input_keys]
    data = {Input("a"): 0.3, Input("b"): 1.7}
    for retained in (None, inner):
        recorder = Recorder()
        u = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.3)
        v = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 1.7)
        kept = None if retained is None else dict(zip(retained, evaluate(block, retained, data)))
        [out] = recorder.record_graph(recorded, [u, v], compiled(block).run(data), kept)
        grads = try_backward_recorded(out.key, out.trace, 1.0, ScalarExecutor(), recorder)
        du = grads[u.key]
        assert math.isclose(du.data, 1.7 * (math.sin(0.3) + 0.3 * math.cos(0.3)))
        second = try_backward(du.key, du.trace, 1.0, ScalarExecutor())
        assert math.isclose(second[u.key], 1.7 * (2 * math.cos(0.3) - 0.3 * math.sin(0.3)))
        assert math.isclose(second[v.key], math.sin(0.3) + 0.3 * math.cos(0.3))


def test_checkpointed_block_double_backward():
    x = tnp.tensor(X, requires_grad=True)
    loss = tnp.sum(tnp.checkpoint(lambda v: tnp.sin(v) * v ** 3)(x))
    _, d1, d2, _ = derivatives(X)
    (g,) = autograd.grad(loss, x, create_graph=True)
    np.testing.assert_allclose(g.data, d1, rtol=1e-12)
    np.testing.assert_allclose(autograd.grad(tnp.sum(g), x)[0].data, d2, rtol=1e-12)


def test_complex_double_backward_matches_try_hvp_and_finite_differences():
    rng = np.random.default_rng(5)
    z0 = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    v = rng.standard_normal(3) + 1j * rng.standard_normal(3)

    def loss(z):
        return tnp.sum(tnp.real(tnp.sin(z) * tnp.conj(z) * z))

    z = tnp.tensor(z0, requires_grad=True)
    (g,) = autograd.grad(loss(z), z, create_graph=True)
    # <g, v> under Re<a, b>: its gradient is H v
    (double,) = autograd.grad(tnp.sum(tnp.real(tnp.conj(g) * v)), z)
    np.testing.assert_allclose(double.data, autograd.hvp(loss(z), z, v), rtol=1e-12)
    eps = 1e-6

    def gradient(at):
        t = tnp.tensor(at, requires_grad=True)
        return loss(t).backward().grad(t)
    numeric = (gradient(z0 + eps * v) - gradient(z0 - eps * v)) / (2 * eps)
    np.testing.assert_allclose(double.data, numeric, rtol=1e-6, atol=1e-7)


# --- torch.autograd.grad semantics -----------------------------------------------------------


def test_several_outputs_with_grad_outputs_and_intermediate_inputs():
    x = tnp.tensor(np.array([0.5, 1.5]), requires_grad=True)
    y = tnp.tensor(np.array([2.0, -1.0]), requires_grad=True)
    h = x * y                                        # an intermediate as an input
    a, b = tnp.sin(h), h * x
    wa, wb = np.array([1.0, 2.0]), np.array([-1.0, 0.5])
    gx, gh = autograd.grad([a, b], [x, h], grad_outputs=[wa, wb])
    hv = h.data
    np.testing.assert_allclose(gh.data, wa * np.cos(hv) + wb * x.data, rtol=1e-14)
    np.testing.assert_allclose(gx.data, wa * np.cos(hv) * y.data + wb * 2 * x.data * y.data,
                               rtol=1e-14)
    (same, again) = autograd.grad(tnp.sum(a), [x, x])
    np.testing.assert_array_equal(same.data, again.data)


def test_grad_outputs_with_history_keep_it_under_create_graph():
    x = tnp.tensor(np.array([0.5, 1.5]), requires_grad=True)
    w = tnp.tensor(np.array([2.0, 3.0]), requires_grad=True)
    (g,) = autograd.grad(tnp.sin(x), x, grad_outputs=w * w, create_graph=True)   # w^2 cos x
    (dw,) = autograd.grad(tnp.sum(g), w)
    np.testing.assert_allclose(dw.data, 2 * w.data * np.cos(x.data), rtol=1e-14)


def test_allow_unused_retain_graph_and_errors():
    x = tnp.tensor(np.ones(2), requires_grad=True)
    unused = tnp.tensor(np.ones(2), requires_grad=True)
    constant = tnp.tensor(np.ones(2))
    loss = tnp.sum(x * x)
    with pytest.raises(tnp.BackwardError, match=r"inputs\[1\] was not used"):
        autograd.grad(loss, [x, unused])
    gx, none = autograd.grad(loss, [x, unused], allow_unused=True)
    assert none is None and np.array_equal(gx.data, [2.0, 2.0])
    for _ in range(2):                                           # the recording is never freed
        autograd.grad(loss, x, retain_graph=False)
    with pytest.raises(tnp.BackwardError, match=r"inputs\[0\] does not require grad"):
        autograd.grad(loss, constant)
    with pytest.raises(tnp.BackwardError, match=r"outputs\[0\] does not require grad"):
        autograd.grad(constant * 2, x)
    with pytest.raises(tnp.BackwardError, match="needs a seed"):
        autograd.grad(x * x, x)
    with pytest.raises(tnp.BackwardError, match="2 grad_outputs for 1 outputs"):
        autograd.grad(x * x, x, grad_outputs=[np.ones(2), np.ones(2)])
    with pytest.raises(tnp.BackwardError, match="not a Tensor"):
        autograd.grad(loss, [np.ones(2)])
    with pytest.raises(tnp.BackwardError, match="seed with history"):
        (x * x).backward(seed=tnp.tensor(np.ones(3), requires_grad=True), create_graph=True)
    assert np.array_equal(autograd.grad(loss, x)[0].data, [2.0, 2.0])   # still usable


def test_try_backward_recorded_misuse_and_minimal_executor():
    x = Scalar(0.5, requires_grad=True)
    y = sin(x) * x
    with pytest.raises(InvalidArgumentError, match="needs a Recorder"):
        try_backward_recorded(y.key, y.trace, 1.0, ScalarExecutor(), object())
    with pytest.raises(InvalidArgumentError, match="try_backward_recorded: the seed"):
        try_backward_recorded(y.key, y.trace, None, ScalarExecutor(), Recorder())
    with pytest.raises(TiduError, match="complex"):
        try_backward_recorded(y.key, y.trace, 1j, ScalarExecutor(), Recorder())
    records = try_backward_recorded(y.key, y.trace, 1.0, MinimalExecutor(), Recorder(),
                                    keep={x.key})
    assert set(records) == {x.key}
    dx = records[x.key]
    assert math.isclose(dx.data, math.sin(0.5) + 0.5 * math.cos(0.5))
    d2 = try_backward(dx.key, dx.trace, 1.0, MinimalExecutor())[x.key]
    assert math.isclose(d2, 2 * math.cos(0.5) - 0.5 * math.sin(0.5))


def test_a_linear_function_has_a_gradient_without_history():
    x = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    (g,) = autograd.grad(tnp.sum(3.0 * x), x, create_graph=True)
    assert not g.requires_grad and np.array_equal(g.data, [3.0, 3.0])
    (same,) = autograd.grad(x, x, grad_outputs=np.array([1.0, -1.0]), create_graph=True)
    assert np.array_equal(same.data, [1.0, -1.0])


def test_long_tape_double_backward():
    steps = 10_000
    x = Scalar(0.5, requires_grad=True)
    c = Scalar(0.1, requires_grad=True)
    y = x
    for _ in range(steps):
        y = sin(y) * y + c
    dc = y.backward(create_graph=True)[c.key]
    second = dc.backward()[c.key]
    v, b, curvature_sum = 0.5, 0.0, 0.0
    for _ in range(steps):
        slope = math.cos(v) * v + math.sin(v)
        curvature = 2 * math.cos(v) - v * math.sin(v)
        v, b, curvature_sum = math.sin(v) * v + 0.1, slope * b + 1.0, (
            curvature * b * b + slope * curvature_sum)
    assert math.isclose(dc.value, b, rel_tol=1e-9)
    assert math.isclose(second, curvature_sum, rel_tol=1e-9)


def test_third_order_through_sums_of_two_active_inputs():
    # ADD's backward passes its cotangent on to both inputs unchanged; differentiating that
    # twice more must still record the sums (a regression: it once had no add() to use)
    steps = 20
    x = Scalar(0.5, requires_grad=True)
    c = Scalar(0.1, requires_grad=True)
    y = x
    for _ in range(steps):
        y = sin(y) * y + c
    d1 = y.backward(create_graph=True)[c.key]
    d2 = d1.backward(create_graph=True)[c.key]
    d3 = d2.backward()[c.key]
    v, b, second, third = 0.5, 0.0, 0.0, 0.0
    for _ in range(steps):
        s1 = math.cos(v) * v + math.sin(v)
        s2 = 2 * math.cos(v) - v * math.sin(v)
        s3 = -3 * math.sin(v) - v * math.cos(v)
        v, b, second, third = (math.sin(v) * v + 0.1, s1 * b + 1.0, s2 * b * b + s1 * second,
                               s3 * b ** 3 + 3 * s2 * b * second + s1 * third)
    assert math.isclose(d1.value, b, rel_tol=1e-12)
    assert math.isclose(d2.value, second, rel_tol=1e-10)
    assert math.isclose(d3, third, rel_tol=1e-9)
