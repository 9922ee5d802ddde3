"""The eager and functional front ends agree on the same function, and agree with PyTorch.

One function written with ``primitives.tensor``'s functions is differentiated
by ``grad`` (NumPy arrays in) and by eager ``Tensor(..., requires_grad=True)``
+ ``.backward()``, on random shapes (size-0 and size-1 axes, broadcasting
pairs) and dtypes (float64, float32, complex128, mixed); gradients must have
each operand's shape and dtype and the same values, and match central finite
differences in double precision. PyTorch (when importable) gives a third opinion.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from primitives import tensor as tnp

from tensor_helpers import REAL, numeric_grad, random


TNP = SimpleNamespace(
    sum=tnp.sum,
    mean_last=lambda v: tnp.mean(v, axis=-1),
    tanh=tnp.tanh, sin=tnp.sin, cos=tnp.cos, exp=tnp.exp, sqrt=tnp.sqrt, conj=tnp.conj,
    real=lambda v: tnp.astype(v, REAL[v.dtype]) if v.dtype in REAL else v,
    transpose=tnp.transpose,
    flatten=lambda v: tnp.reshape(v, (-1,)),
)


def loss(m, x, y):
    """A real scalar from two broadcast-compatible operands (real or complex)."""
    u = m.tanh(x * y) + m.sin(x) * 0.5 - y / (x * x + 2.0)
    v = m.exp(u * 0.3) * m.conj(u) + m.cos(y) ** 2
    r = m.real(v) + m.sqrt(m.real(u * m.conj(u)) + 1.0)
    total = m.sum(r * r) * 0.1
    if r.ndim and r.shape[-1]:
        total = total + m.sum(m.mean_last(r))
    if r.ndim >= 2:
        total = total + m.sum(m.flatten(m.transpose(r)) * m.flatten(r)) * 0.25
    return total


def tnp_loss(x, y):
    return loss(TNP, x, y)


def single(*dtypes) -> bool:
    return any(np.dtype(d) in (np.float32, np.complex64) for d in dtypes)


def assert_close(a, b, low_precision, scale=1.0):
    if low_precision:
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * scale)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12 * scale)


def both_front_ends(f, x, y):
    """(value, gx, gy) from ``grad`` and from eager backward."""
    value, (fx, fy) = tnp.value_and_grad(f, argnums=(0, 1))(x, y)
    X, Y = tnp.tensor(x, requires_grad=True), tnp.tensor(y, requires_grad=True)
    out = f(X, Y)
    grads = out.backward()
    ex, ey = grads.grad(X), grads.grad(Y)
    np.testing.assert_array_equal(X.grad, ex)
    np.testing.assert_array_equal(Y.grad, ey)
    return (value, fx, fy), (out.data, ex, ey)


def check_agreement(x, y):
    (fv, fx, fy), (ev, ex, ey) = both_front_ends(tnp_loss, x, y)
    low = single(x.dtype, y.dtype)
    for g, operand in ((fx, x), (fy, y), (ex, x), (ey, y)):
        # (eager 0-d gradients are NumPy scalars: see test_zero_dim_results_are_arrays
        # in test_tensor_eager.py; the functional ones must be arrays)
        assert isinstance(g, np.ndarray) or (g is ex or g is ey) and np.ndim(g) == 0
        assert g.shape == operand.shape, (g.shape, operand.shape)
        assert g.dtype == operand.dtype, (g.dtype, operand.dtype)
    assert fv.dtype == ev.dtype and fv.shape == ev.shape == ()
    scale = 1.0 + float(np.max(np.abs(fx), initial=0.0)) + float(np.max(np.abs(fy), initial=0.0))
    assert_close(fv, ev, low, 1.0 + abs(float(fv)))
    assert_close(ex, fx, low, scale)
    assert_close(ey, fy, low, scale)
    return fx, fy


SHAPES = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                           min_side=0, max_side=3)
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(shapes=SHAPES, dtype=st.sampled_from([np.float64, np.float32, np.complex128]),
       seed=st.integers(0, 2 ** 32 - 1))
def test_grad_and_backward_agree(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    sx, sy = shapes.input_shapes
    x, y = random(sx, dtype, rng), random(sy, dtype, rng)
    fx, fy = check_agreement(x, y)
    if not single(dtype) and x.size + y.size <= 12:
        np.testing.assert_allclose(fx, numeric_grad(lambda v: tnp_loss(v, y), x),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(fy, numeric_grad(lambda v: tnp_loss(x, v), y),
                                   rtol=1e-5, atol=1e-6)


@SETTINGS
@given(shapes=SHAPES,
       dtypes=st.sampled_from([(np.float32, np.float64), (np.float64, np.complex128),
                               (np.float32, np.complex128), (np.complex128, np.float32)]),
       seed=st.integers(0, 2 ** 32 - 1))
def test_grad_and_backward_agree_on_mixed_dtypes(shapes, dtypes, seed):
    rng = np.random.default_rng(seed)
    sx, sy = shapes.input_shapes
    check_agreement(random(sx, dtypes[0], rng), random(sy, dtypes[1], rng))


@pytest.mark.parametrize("shape", [(), (1,), (0,), (2, 0, 3), (1, 1, 1)])
def test_reductions_agree_on_edge_shapes(shape):
    rng = np.random.default_rng(0)
    x = random(shape, np.float64, rng)

    def f(x, w):
        s = tnp.sum(tnp.exp(x) * w, axis=0 if x.ndim else None, keepdims=True)
        return tnp.sum(s * s) + tnp.sum(tnp.broadcast_to(w, (2,) + x.shape) * x)

    w = random(shape, np.float64, rng)
    (fv, fx, fw), (ev, ex, ew) = both_front_ends(f, x, w)
    assert fx.shape == ex.shape == shape
    np.testing.assert_allclose(ex, fx, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ew, fw, rtol=1e-12, atol=1e-14)
    if x.size:
        np.testing.assert_allclose(fx, numeric_grad(lambda v: f(v, w), x), rtol=1e-6)


def test_checkpointed_function_agrees_with_grad():
    rng = np.random.default_rng(1)
    x, y = random((3, 1), np.float64, rng), random((4,), np.float64, rng)
    _, fx, fy = both_front_ends(tnp_loss, x, y)[0]
    X, Y = tnp.tensor(x, requires_grad=True), tnp.tensor(y, requires_grad=True)
    grads = tnp.checkpoint(tnp_loss)(X, Y).backward()
    np.testing.assert_allclose(grads.grad(X), fx, rtol=1e-12)
    np.testing.assert_allclose(grads.grad(Y), fy, rtol=1e-12)


# --- matmul / indexing (when the primitive set has them) ---------------------------------------


def mlp(x, w1, b1, w2):
    h = tnp.tanh(tnp.matmul(x, w1) + b1)
    out = tnp.matmul(h, w2)
    return tnp.sum(out * out) * 0.5


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mlp_layer_agrees(dtype):
    rng = np.random.default_rng(2)
    args = [random(s, dtype, rng) for s in [(5, 4), (4, 3), (3,), (3, 2)]]
    fg = tnp.grad(mlp, argnums=(0, 1, 2, 3))(*args)
    ts = [tnp.tensor(a, requires_grad=True) for a in args]
    grads = mlp(*ts).backward()
    for g, t, a in zip(fg, ts, args):
        assert g.shape == a.shape and g.dtype == a.dtype
        assert grads.grad(t).shape == a.shape and grads.grad(t).dtype == a.dtype
        assert_close(grads.grad(t), g, single(dtype), 10.0)
    if dtype == np.float64:
        np.testing.assert_allclose(
            fg[1], numeric_grad(lambda w: mlp(args[0], w, args[2], args[3]), args[1]),
            rtol=1e-6)


def test_indexing_agrees():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3))
    idx = np.array([0, 2, 2, 3])                        # repeated: scatter-add in the transpose

    def f(x):
        return tnp.sum(x[1:, ::2] * x[0, ::2]) + tnp.sum(tnp.sin(x[idx]))

    g = tnp.grad(f)(x)
    X = tnp.tensor(x, requires_grad=True)
    np.testing.assert_allclose(f(X).backward().grad(X), g, rtol=1e-12)
    np.testing.assert_allclose(g, numeric_grad(f, x), rtol=1e-6, atol=1e-8)


# --- PyTorch as a reference -------------------------------------------------------------------


def torch_namespace(torch):
    return SimpleNamespace(
        sum=torch.sum,
        mean_last=lambda v: torch.mean(v, dim=-1),
        tanh=torch.tanh, sin=torch.sin, cos=torch.cos, exp=torch.exp, sqrt=torch.sqrt,
        conj=lambda v: torch.conj(v).resolve_conj(),
        real=lambda v: v.real if v.is_complex() else v,
        transpose=lambda v: v.permute(*reversed(range(v.ndim))),
        flatten=lambda v: v.reshape(-1),
    )


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("shapes", [((3, 1), (4,)), ((2, 3), (2, 3)), ((), (2, 1, 3))])
def test_agrees_with_torch(dtype, shapes):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x, y = random(shapes[0], dtype, rng), random(shapes[1], dtype, rng)
    (fv, fx, fy), _ = both_front_ends(tnp_loss, x, y)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.tensor(y, requires_grad=True)
    out = loss(torch_namespace(torch), tx, ty)
    out.backward()
    low = single(dtype)
    assert_close(fv, out.detach().numpy(), low, 1.0 + abs(float(fv)))
    scale = 1.0 + float(np.max(np.abs(fx))) + float(np.max(np.abs(fy)))
    assert_close(fx, tx.grad.numpy(), low, scale)
    assert_close(fy, ty.grad.numpy(), low, scale)


def test_mlp_agrees_with_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    args = [random(s, np.float64, rng) for s in [(5, 4), (4, 3), (3,), (3, 2)]]
    ts = [tnp.tensor(a, requires_grad=True) for a in args]
    grads = mlp(*ts).backward()
    qs = [torch.tensor(a, requires_grad=True) for a in args]
    h = torch.tanh(qs[0] @ qs[1] + qs[2])
    (0.5 * torch.sum((h @ qs[3]) ** 2)).backward()
    for t, q in zip(ts, qs):
        np.testing.assert_allclose(grads.grad(t), q.grad.numpy(), rtol=1e-10, atol=1e-12)
