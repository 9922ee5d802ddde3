"""``log_softmax`` as one op (``ops.reduce.LogSoftmax``), behind ``nn.log_softmax`` (JAX's
semantics) and ``scipy.special.log_softmax`` (SciPy's): its values against SciPy, JAX and
the composite it replaced (bit for bit), its derivatives against central differences, the
dot-product test, JAX and PyTorch, and under every transform."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import primitives.tensor as tnp
from primitives.tensor import nn
from primitives.tensor.ops.reduce import LogSoftmax
from primitives.tensor.transforms.functional import make_graph
from tensor_helpers import numeric_grad

SHAPES_AXES = [((5,), -1), ((4, 3), -1), ((4, 3), 0), ((2, 3, 4), 1), ((2, 3, 4), (0, 2)),
               ((3, 4), None), ((1, 6), -1), ((6, 1), -1)]


def composite(x, axis, finite_shift):
    """The composite the op replaced, in NumPy: ``shifted - log(sum(exp(shifted)))``."""
    shift = np.max(x, axis=axis, keepdims=True)
    if finite_shift:
        shift = np.where(np.isfinite(shift), shift, 0)
    shifted = x - shift
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


@pytest.mark.parametrize("shape, axis", SHAPES_AXES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_are_the_composites_bit_for_bit_and_scipys(shape, axis, dtype):
    x = (np.random.default_rng(0).normal(size=shape) * 30).astype(dtype)
    got_nn, got_scipy = nn.log_softmax(x, axis=axis), tnp.scipy.special.log_softmax(x, axis)
    for got, finite_shift in ((got_nn, False), (got_scipy, True)):
        assert type(got) is np.ndarray and got.dtype == dtype and got.shape == shape
        np.testing.assert_array_equal(got, composite(x, axis, finite_shift))
    np.testing.assert_allclose(got_scipy, scipy.special.log_softmax(x, axis),
                               rtol=2e-6 if dtype == np.float32 else 1e-14, atol=1e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("row", [[np.inf, 1.0], [-np.inf, -np.inf], [-np.inf, 0.0, 2.0],
                                 [np.nan, 1.0], [np.inf, -np.inf], [1e308, -1e308]])
def test_non_finite_rows_follow_scipy_and_jax(row, jx):
    jax, jnp = jx
    x = np.array(row)
    np.testing.assert_array_equal(tnp.scipy.special.log_softmax(x),
                                  scipy.special.log_softmax(x))
    np.testing.assert_array_equal(nn.log_softmax(x), np.asarray(jax.nn.log_softmax(x)))


def test_edge_shapes_and_dtypes():
    assert nn.log_softmax(np.zeros((3, 0))).shape == (3, 0)
    np.testing.assert_array_equal(nn.log_softmax(np.zeros((0, 3))), np.zeros((0, 3)))
    assert float(tnp.scipy.special.log_softmax(np.array(3.0))) == 0.0
    assert nn.log_softmax(np.array([1, 2])).dtype == np.float64                  # ints: float
    z = np.array([1 + 1j, 2.0])                       # complex, as jax.nn's
    np.testing.assert_allclose(nn.log_softmax(z), z - np.log(np.sum(np.exp(z))), rtol=1e-14)
    with pytest.raises(tnp.TensorAxisError, match="log_softmax"):
        nn.log_softmax(np.array(3.0))                 # axis -1 of a 0-d array
    with pytest.raises(tnp.TensorTypeError, match="log_softmax"):
        tnp.scipy.special.log_softmax(z)              # SciPy's is real


def test_one_op_when_recorded_and_traced():
    x = tnp.tensor(np.random.default_rng(1).normal(size=(4, 3)), requires_grad=True)
    y = nn.log_softmax(x)
    assert isinstance(y._trace.recorded.primitive, LogSoftmax)
    assert y._trace.recorded.primitive.finite_shift is False
    traced = make_graph(lambda v: tnp.scipy.special.log_softmax(v, 1), np.ones((2, 3)))
    assert [op.operation.name for op in traced.graph.operations] == ["log_softmax"]


@pytest.mark.parametrize("shape, axis", SHAPES_AXES)
@pytest.mark.parametrize("which", ["nn", "scipy"])
def test_gradient_against_central_differences_and_the_dot_product_test(shape, axis, which):
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=shape) * 3, rng.normal(size=shape)
    f = (lambda v: nn.log_softmax(v, axis=axis)) if which == "nn" else \
        (lambda v: tnp.scipy.special.log_softmax(v, axis))
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(f(v) * w))(x),
                               numeric_grad(lambda v: np.sum(f(v) * w), x), rtol=1e-7, atol=1e-8)
    t, ct = rng.normal(size=shape), rng.normal(size=shape)
    _, jt = tnp.jvp(f, (x,), (t,))
    _, pullback = tnp.vjp(f, x)
    (jct,) = pullback(ct)
    assert np.isclose(np.sum(ct * jt), np.sum(jct * t), rtol=1e-12, atol=1e-13)


def test_minus_inf_entries_keep_a_finite_gradient():
    x, w = np.array([-np.inf, 0.0, 1.0]), np.array([0.0, 1.0, -2.0])
    g = tnp.grad(lambda v: tnp.sum(tnp.where(w != 0, nn.log_softmax(v), 0.0) * w))(x)
    p = np.exp(composite(x, -1, False))
    np.testing.assert_allclose(g, w - p * w.sum(), rtol=1e-15)
    assert np.all(np.isfinite(g))


def test_second_derivatives_and_transforms(jx):
    jax, jnp = jx
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))

    def loss(v):
        return tnp.sum(nn.log_softmax(v, axis=1) * w)

    def jloss(v):
        return jnp.sum(jax.nn.log_softmax(v, axis=1) * w)

    np.testing.assert_allclose(tnp.hessian(loss)(x), jax.hessian(jloss)(x), rtol=1e-12,
                               atol=1e-14)
    np.testing.assert_allclose(tnp.jacfwd(lambda v: nn.log_softmax(v, axis=1))(x),
                               jax.jacfwd(lambda v: jax.nn.log_softmax(v, axis=1))(x),
                               rtol=1e-13, atol=1e-15)
    batched = tnp.vmap(tnp.grad(loss))(np.stack([x, 2 * x]))
    np.testing.assert_allclose(batched, jax.vmap(jax.grad(jloss))(jnp.stack([x, 2 * x])),
                               rtol=1e-13, atol=1e-15)
    for in_axes in (0, 1, 2):           # the batch axis before, between and after the axes
        xs = np.moveaxis(np.stack([x, x + 1, -x]), 0, in_axes)
        got = tnp.vmap(lambda v: tnp.scipy.special.log_softmax(v, 0), in_axes=in_axes)(xs)
        want = np.stack([scipy.special.log_softmax(np.take(xs, i, in_axes), 0)
                         for i in range(3)])
        np.testing.assert_allclose(got, want, rtol=1e-14)
    jitted = tnp.jit(tnp.value_and_grad(loss))
    value, grad = jitted(x)
    np.testing.assert_allclose(grad, jax.grad(jloss)(x), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(jitted(2 * x)[1], jax.grad(jloss)(2 * x), rtol=1e-13, atol=1e-15)


def test_eager_tensor_backward_and_create_graph_against_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: its comparison is "
                                                "skipped (the checks above still run)")
    rng = np.random.default_rng(4)
    x, w = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    xt = tnp.tensor(x, requires_grad=True)
    g = tnp.sum(nn.log_softmax(xt, axis=1) * w).backward(create_graph=True).grad(xt)
    xt.grad = None
    tnp.sum(g * g).backward()
    ref = torch.tensor(x, requires_grad=True)
    (rg,) = torch.autograd.grad((torch.log_softmax(ref, 1) * torch.tensor(w)).sum(), ref,
                                create_graph=True)
    (rg * rg).sum().backward()
    np.testing.assert_allclose(g.data, rg.detach().numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(xt.grad, ref.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_on_torch_tensors_one_kernel_and_the_same_values():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed: the torch backend "
                                                "is not tested")
    x = torch.tensor(np.random.default_rng(5).normal(size=(4, 3)))
    for got, want in ((nn.log_softmax(x, axis=1), torch.log_softmax(x, 1)),
                      (tnp.scipy.special.log_softmax(x, 1),
                       torch.tensor(scipy.special.log_softmax(x.numpy(), 1)))):
        assert isinstance(got, torch.Tensor)
        torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-15)
    grad = tnp.grad(lambda v: tnp.sum(nn.log_softmax(v, axis=0) * 2.0))(x)
    ref = x.clone().requires_grad_(True)
    (torch.log_softmax(ref, 0) * 2.0).sum().backward()
    torch.testing.assert_close(grad, ref.grad, rtol=1e-13, atol=1e-14)


def test_complex_gradient_against_central_differences():
    rng = np.random.default_rng(6)
    z = rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))
    w = rng.normal(size=(3, 4))
    got = tnp.grad(lambda v: tnp.sum(tnp.real(nn.log_softmax(v, axis=1)) * w))(z)
    want = numeric_grad(lambda v: np.sum(np.real(v - np.log(np.sum(np.exp(v), axis=1,
                                                                      keepdims=True))) * w), z)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-8)


def test_on_dask_arrays_lazily_with_numpys_values():
    da = pytest.importorskip("dask.array", reason="Dask is not installed: the Dask backend "
                                                  "is not tested")
    x = np.random.default_rng(7).normal(size=(6, 4))
    d = da.from_array(x, chunks=(3, 4))

    def loss(v):
        return tnp.sum(nn.log_softmax(v, axis=1) * 2.0)

    for got, want in ((nn.log_softmax(d, axis=1), nn.log_softmax(x, axis=1)),
                      (tnp.scipy.special.log_softmax(d, 1), tnp.scipy.special.log_softmax(x, 1)),
                      (tnp.grad(loss)(d), tnp.grad(loss)(x))):
        assert isinstance(got, da.Array)
        np.testing.assert_allclose(got.compute(), want, rtol=1e-14, atol=1e-15)


def test_results_are_fresh_and_jit_reads_closed_over_logits_at_each_call():
    x = np.random.default_rng(8).normal(size=(3, 4))
    kept = x.copy()
    for f in (lambda v: nn.log_softmax(v, axis=1), lambda v: tnp.scipy.special.log_softmax(v, 1),
              tnp.jit(lambda v: nn.log_softmax(v, axis=1))):
        out = f(x)
        out[...] = 7.0                          # written into: neither x nor the next call see it
        np.testing.assert_array_equal(x, kept)
        np.testing.assert_array_equal(f(x), composite(x, 1, False))
    closed = x.copy()
    jitted = tnp.jit(lambda w: tnp.sum(nn.log_softmax(closed, axis=1) * w))
    first = jitted(np.ones((3, 4)))
    closed[0, 0] += 5.0                         # read again at the next call
    second = jitted(np.ones((3, 4)))
    assert first != second
    assert np.isclose(second, np.sum(composite(closed, 1, False)), rtol=1e-14)


def test_grad_of_vmap_and_vmap_of_grad_agree_with_jacrev():
    xs = np.random.default_rng(9).normal(size=(2, 3, 4))

    def per_row(v):
        return tnp.sum(nn.log_softmax(v, axis=-1) * np.arange(4.0))

    by_vmap = tnp.vmap(tnp.grad(per_row))(xs)
    by_grad = tnp.grad(lambda v: tnp.sum(tnp.vmap(per_row)(v)))(xs)
    by_jacrev = np.stack([tnp.jacrev(per_row)(x) for x in xs])
    np.testing.assert_allclose(by_vmap, by_jacrev, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(by_grad, by_jacrev, rtol=1e-14, atol=1e-15)


def test_an_eager_log_softmax_chain_of_many_ops_backward_without_recursion():
    x = tnp.tensor(np.random.default_rng(10).normal(size=(2, 3)), requires_grad=True)
    y = x
    for _ in range(20_000):                       # each op feeds the next
        y = nn.log_softmax(y, axis=1)
    tnp.sum(y[:, 0]).backward()
    assert np.all(np.isfinite(x.grad)) and x.grad.shape == (2, 3)


def test_its_one_op_derivative_composes_in_both_orders():
    """``log_softmax``'s fused derivative (``log_softmax_linear``) under ``jit``, ``vmap``
    and ``grad`` nested either way round, and ``jacfwd`` against ``jacrev``: the same
    per-example gradients as ``grad`` row by row, against central differences."""
    rng = np.random.default_rng(9)
    x, w = rng.normal(size=(3, 4)), rng.normal(size=4)

    def loss(v):
        return tnp.sum(nn.log_softmax(v, axis=0) * w)

    want = np.stack([numeric_grad(lambda v: np.sum(composite(v, 0, False) * w), row)
                     for row in x])
    for per_row in (tnp.vmap(tnp.grad(loss)), tnp.jit(tnp.vmap(tnp.grad(loss))),
                    tnp.vmap(tnp.grad(tnp.jit(loss))), tnp.vmap(tnp.jit(tnp.grad(loss))),
                    tnp.jit(tnp.vmap(tnp.jit(tnp.grad(loss))))):
        np.testing.assert_allclose(per_row(x), want, rtol=1e-7, atol=1e-8)
    forward = tnp.jacfwd(lambda v: nn.log_softmax(v, axis=1))(x)
    reverse = tnp.jacrev(lambda v: nn.log_softmax(v, axis=1))(x)
    np.testing.assert_allclose(forward, reverse, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tnp.grad(tnp.jit(lambda v: tnp.sum(tnp.vmap(tnp.grad(loss))(v) ** 2)))(x),
                               tnp.grad(lambda v: tnp.sum(tnp.vmap(tnp.grad(loss))(v) ** 2))(x),
                               rtol=1e-12, atol=1e-14)
