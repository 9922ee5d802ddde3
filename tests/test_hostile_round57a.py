"""Hostile round 57a: other array libraries (PyTorch tensors, Dask arrays) through tidu."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.core import array_below

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install '.[torch]')")


# tnp.conj/positive/astype/full of a real torch tensor (and results jit/vjp copy) copied it detached, so PyTorch's
# autograd lost that path: tnp.cov's gradient was half torch.cov's, vdot's first one None
def test_torch_autograd_keeps_history_through_copying_functions():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((2, 5))
    x = torch.tensor(data, requires_grad=True)
    tnp.sum(tnp.cov(x) * torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)).backward()
    y = torch.tensor(data, requires_grad=True)
    torch.sum(torch.cov(y) * torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)).backward()
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-12)
    a = torch.tensor(data[0], requires_grad=True)
    b = torch.tensor(data[1], requires_grad=True)
    tnp.vdot(a, b).backward()
    assert a.grad is not None and torch.equal(a.grad, b.detach())
    one, first = np.ones(5), np.eye(5)[0]
    for f, expected in ((tnp.positive, one), (tnp.conj, one),
                        (lambda v: tnp.astype(v, np.float64), one),
                        (lambda v: tnp.full(5, v[0]), 5 * first),
                        (lambda v: tnp.jit(lambda w: w)(v), one)):
        c = torch.tensor(data[0], requires_grad=True)
        out = f(c)
        assert out.grad_fn is not None and out.data_ptr() != c.data_ptr()
        torch.sum(out * 3.0).backward()
        np.testing.assert_array_equal(c.grad.numpy(), 3.0 * expected)


# tnp.reciprocal of an integer torch tensor called torch.reciprocal: float32 [1, 0.5, ...]
# where NumPy (and tidu's traced dtype) gives the integers' truncated 1 / x
def test_torch_reciprocal_of_integers_is_numpys():
    for dtype in (torch.int8, torch.int64, torch.uint8):
        x = torch.tensor([1, 2, 3, 7], dtype=dtype)
        for got in (tnp.reciprocal(x), tnp.jit(tnp.reciprocal)(x)):
            want = np.reciprocal(x.numpy())
            assert got.dtype == dtype
            np.testing.assert_array_equal(got.numpy(), want)
    signed = tnp.reciprocal(torch.tensor([-1, -2, 1], dtype=torch.int32))
    np.testing.assert_array_equal(signed.numpy(), [-1, 0, 1])
    flags = tnp.reciprocal(torch.tensor([False, True]))
    assert flags.dtype == torch.int8 and flags.tolist() == [0, 1]        # NumPy's int8


# tnp.sum of an unsigned torch tensor was int64 (PyTorch's sum), NumPy's uint64
def test_torch_sum_of_unsigned_integers_is_uint64():
    x = torch.tensor([[200, 100], [255, 1]], dtype=torch.uint8)
    for got, want in ((tnp.sum(x), np.sum(x.numpy())),
                      (tnp.sum(x, axis=0), np.sum(x.numpy(), axis=0)),
                      (tnp.jit(tnp.sum)(x), np.sum(x.numpy()))):
        assert got.dtype == torch.uint64
        np.testing.assert_array_equal(got.numpy(), want)
    assert tnp.sum(torch.tensor([1, 2], dtype=torch.int8)).dtype == torch.int64


# tnp.maximum/minimum/clip with a complex operand on torch raised PyTorch's RuntimeError
# (not a TiduError); fmax, max, sort raise TensorNotSupportedError naming the function
def test_torch_maximum_of_complex_operands_is_a_tidu_error():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    for call in (lambda: tnp.maximum(x, 1j), lambda: tnp.minimum(1j, x),
                 lambda: tnp.maximum(x, torch.tensor([1j, 2.0]))):
        with pytest.raises(tnp.TensorNotSupportedError, match="(maximum|minimum): PyTorch"):
            call()
    np.testing.assert_array_equal(tnp.maximum(x, 1.5).numpy(), [1.5, 2.0])    # still usable


# a scipy.special function PyTorch lacks (gamma, betaln, stdtr...) ran SciPy on a detached
# host copy of a torch tensor that requires grad: the result had no PyTorch history, so
# torch's gradient through it was silently lost; now a TensorNotSupportedError
def test_torch_special_on_the_host_refuses_a_tensor_that_requires_grad():
    t = torch.tensor([0.3, 0.7], dtype=torch.float64, requires_grad=True)
    for f in (tnp.scipy.special.gamma, lambda v: tnp.scipy.special.betaln(v, 2.0),
              lambda v: tnp.scipy.special.stdtr(3.0, v)):
        with pytest.raises(tnp.TensorNotSupportedError, match="requires grad.*detach"):
            f(t)
    want = np.array([2.99156899, 1.29805533])
    with torch.no_grad():                                         # nothing recorded: fine
        np.testing.assert_allclose(tnp.scipy.special.gamma(t).numpy(), want, rtol=1e-8)
    np.testing.assert_allclose(tnp.scipy.special.gamma(t.detach()).numpy(), want, rtol=1e-8)
    x = tnp.tensor(t, requires_grad=True)                          # tidu differentiates it
    g = tnp.sum(tnp.scipy.special.gamma(x)).backward().grad(x)
    np.testing.assert_allclose(g.numpy(), tnp.grad(
        lambda v: tnp.sum(tnp.scipy.special.gamma(v)))(t.detach().numpy()), rtol=1e-12)
    t.sum().backward()                                             # torch's erf has a graph
    out = tnp.scipy.special.erf(torch.tensor([0.5], dtype=torch.float64, requires_grad=True))
    assert out.grad_fn is not None


# vjp and linearize copied their primals detached: the cotangents/tangents of a torch
# tensor that requires grad had no PyTorch history (grad, jvp, jacrev, hessian kept it), so
# torch's gradient through them was silently lost; now they agree with torch.func
def test_torch_history_flows_through_vjp_and_linearize():
    tf = pytest.importorskip("torch.func", reason="torch.func is not available")
    x0 = np.array([0.3, -0.7, 1.2])
    h = lambda w: tnp.sin(w) * w ** 3                                 # noqa: E731
    ones = torch.ones(3, dtype=torch.float64)
    want = tf.grad(lambda w: tf.grad(lambda u: torch.sum(torch.sin(u) * u ** 3))(w).sum())(
        torch.tensor(x0))
    for transform in (lambda v: tnp.vjp(h, v)[1](ones)[0],
                      lambda v: tnp.linearize(h, v)[1](ones),
                      lambda v: tnp.jvp(h, (v,), (ones,))[1]):
        t = torch.tensor(x0, requires_grad=True)
        out = transform(t)
        assert out.grad_fn is not None
        (out.sum() + t.sum()).backward()
        np.testing.assert_allclose(t.grad.numpy(), want.numpy() + 1.0, rtol=1e-12)
    # the primal is still the one vjp was given: writing to a plain tensor later changes nothing
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    _, vjp_fn = tnp.vjp(lambda v: tnp.sum(v * v), x)
    x[0] = 100.0
    np.testing.assert_allclose(vjp_fn(np.array(1.0))[0].numpy(), [2.0, 4.0])


# a Dask array of unknown shape (after boolean masking) reached tnp.where's broadcast as it
# was: a builtins TypeError ("'float' object cannot be interpreted as an integer"), and
# tnp.stack blamed reshape's shape; now the TensorShapeError saying why, naming the function
def test_dask_array_of_unknown_shape_is_refused_by_name():
    da = pytest.importorskip("dask.array", reason="Dask is not installed")
    x = da.from_array(np.arange(1.0, 8.0), chunks=((3, 1, 3),))
    masked = x[x > 2]
    for name, call in (("where", lambda: tnp.where(masked > 3, masked, 0.0)),
                       ("stack", lambda: tnp.stack([masked, masked])),
                       ("add", lambda: tnp.add(masked, np.float64(1.0)))):
        with pytest.raises(tnp.TensorShapeError, match=rf"^{name}: .*unknown shape.*compute_chunk"):
            call()
    known = masked.compute_chunk_sizes()
    np.testing.assert_array_equal(tnp.where(known > 3, known, 0.0).compute(), [0, 4, 5, 6, 7])


# tnp.isposinf/isneginf/nonzero/argwhere... are NumPy's own functions, which on a PyTorch
# tensor call the tensor's methods of those names: isposinf marked -inf as +inf (uint8 bits
# flipped by ~), argwhere came out transposed, nonzero one (n, ndim) tensor, flatnonzero a
# NumPy array, array_repr a TypeError; now they read it on the host and give tensors
def test_numpys_value_reading_functions_on_torch_tensors():
    a = np.array([[1.0, 0.0, -np.inf], [np.inf, 2.0, np.nan]])
    for make in (lambda: torch.from_numpy(a.copy()), lambda: tnp.tensor(torch.from_numpy(a))):
        x = make()
        for name in ("isposinf", "isneginf", "nonzero", "argwhere", "flatnonzero",
                     "count_nonzero"):
            got, want = getattr(tnp, name)(x), getattr(np, name)(a)
            got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
            assert len(got) == len(want), name
            for g, w in zip(got, want):
                if isinstance(x, tnp.Tensor):     # a Tensor in gives Tensors out (round 60)
                    assert isinstance(g, tnp.Tensor) and not g.requires_grad, name
                    g = array_below(g)
                assert isinstance(g, torch.Tensor), name
                assert g.numpy().dtype == np.asarray(w).dtype, name
                np.testing.assert_array_equal(g.numpy(), w, err_msg=name)
        assert tnp.array_repr(x) == np.array_repr(a)
        close = tnp.isclose(x, x, equal_nan=True)
        close = array_below(close) if isinstance(x, tnp.Tensor) else close
        assert isinstance(close, torch.Tensor) and bool(close.all())
    np.testing.assert_array_equal(tnp.count_nonzero(torch.from_numpy(a), axis=1).numpy(), [2, 3])


# bool ** 2 on a torch tensor was PyTorch's int64; tidu's NumPy path (x ** 2, NumPy's
# square) and the traced dtype say int8, so jit's declared dtype and the value disagreed
def test_torch_bool_squared_is_int8_as_on_numpy():
    b = np.array([True, False])
    for n in (0, 1, 2, 3):
        for f in (lambda v: tnp.power(v, n), tnp.jit(lambda v: v ** n)):
            got, want = f(torch.from_numpy(b)), f(b)
            assert got.numpy().dtype == want.dtype, n
            np.testing.assert_array_equal(got.numpy(), want)


# abs/floor/ceil/trunc of a bool torch tensor raised PyTorch's NotImplementedError (not a
# TiduError) where NumPy gives the booleans back
def test_torch_bool_abs_floor_ceil_trunc_are_numpys():
    b = torch.tensor([True, False])
    for name in ("abs", "floor", "ceil", "trunc"):
        for f in (getattr(tnp, name), tnp.jit(getattr(tnp, name))):
            got = f(b)
            assert got.dtype == torch.bool and got.tolist() == [True, False], name
            assert got.data_ptr() != b.data_ptr()
    np.testing.assert_array_equal(tnp.floor(torch.tensor([1.5, -0.5])).numpy(), [1.0, -1.0])


# integer floor_divide/remainder/fmod by zero on torch tensors raised PyTorch's RuntimeError
# (ZeroDivisionError), not a TiduError, where NumPy gives 0 (with its warning)
def test_torch_integer_division_by_zero_is_numpys():
    a, z = np.array([5, -7, 3]), np.array([0, 2, 0])
    for name in ("floor_divide", "remainder", "fmod"):
        f = getattr(tnp, name)
        with np.errstate(divide="ignore", invalid="ignore"):
            want = getattr(np, name)(a, z)
        for call in (f, tnp.jit(f)):
            got = call(torch.from_numpy(a), torch.from_numpy(z))
            assert got.dtype == torch.int64
            np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(tnp.floor_divide(torch.tensor([5.0]), 0.0).numpy(), [np.inf])


# a PyTorch tensor with its negative bit set (z.conj().imag, a lazy view) could not be read
# on the host: backends' to_numpy raised PyTorch's RuntimeError, so tnp.isposinf, nonzero or
# a special function computed by SciPy failed with it
def test_torch_negative_bit_tensors_are_read_on_the_host():
    z = torch.tensor([1 + 2j, -3 - 1j], dtype=torch.complex128)
    v = z.conj().imag
    assert v.is_neg()
    assert tnp.isposinf(v).tolist() == [False, False]
    np.testing.assert_array_equal(tnp.nonzero(v)[0].numpy(), [0, 1])
    w = torch.tensor([1 - 2.5j, 1 - 1.5j], dtype=torch.complex128).conj().imag   # 2.5, 1.5
    assert w.is_neg()
    np.testing.assert_allclose(tnp.scipy.special.gamma(w).numpy(), [1.32934039, 0.88622693],
                               rtol=1e-8)


# tnp.stop_gradient of a torch tensor that requires grad returned it with its history (plain
# calls) and its op was the identity on torch values (grad, jit): PyTorch's gradient of
# sum(v * stop_gradient(v)) was 2v, not tidu's (and JAX's) v
def test_stop_gradient_stops_torch_autograd_too():
    jax = pytest.importorskip("jax", reason="JAX is not installed")
    jnp = jax.numpy
    f = lambda v: tnp.sum(v ** 2 + v * tnp.stop_gradient(v))              # noqa: E731
    jf = lambda v: jnp.sum(v ** 2 + v * jax.lax.stop_gradient(v))          # noqa: E731
    x0 = np.array([3.0, -1.5])
    for call in (f, tnp.jit(f)):
        x = torch.tensor(x0, requires_grad=True)
        call(x).backward()
        np.testing.assert_allclose(x.grad.numpy(), np.asarray(jax.grad(jf)(x0)), rtol=1e-12)
    x = torch.tensor(x0, requires_grad=True)                    # d/dx of grad: 2, as in JAX
    torch.sum(tnp.grad(f)(x)).backward()
    np.testing.assert_allclose(x.grad.numpy(), np.asarray(
        jax.grad(lambda v: jnp.sum(jax.grad(jf)(v)))(x0)), rtol=1e-12)


# (the same cause) scipy.linalg.expm of a torch tensor that requires grad read its degree
# from stop_gradient(a), which still required grad: PyTorch's RuntimeError from .numpy()
def test_torch_expm_of_a_tensor_that_requires_grad_matches_matrix_exp():
    x = torch.tensor([0.3, 0.6, 1.7], dtype=torch.float64, requires_grad=True)
    tnp.sum(tnp.scipy.linalg.expm(torch.diag(x) + 0.1)).backward()
    y = torch.tensor([0.3, 0.6, 1.7], dtype=torch.float64, requires_grad=True)
    torch.linalg.matrix_exp(torch.diag(y) + 0.1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-10)


# scipy.special.multigammaln read a's values with np.asarray, which PyTorch refuses for a
# tensor that requires grad (a raw RuntimeError); it now reads them with to_host
def test_torch_multigammaln_of_a_tensor_that_requires_grad():
    a = torch.tensor([3.3, 4.2], dtype=torch.float64, requires_grad=True)
    out = tnp.scipy.special.multigammaln(a, 2)
    torch.sum(out).backward()
    want = tnp.grad(lambda v: tnp.sum(tnp.scipy.special.multigammaln(v, 2)))(np.array([3.3, 4.2]))
    np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-12)
    with pytest.raises(tnp.TensorShapeError, match="multigammaln: condition"):
        tnp.scipy.special.multigammaln(torch.tensor([0.2], requires_grad=True), 2)


# polygamma's order n as a torch tensor that requires grad: a raw RuntimeError from
# np.asarray; now the TensorTypeError a differentiated order gets (it has no derivative)
def test_torch_polygamma_order_that_requires_grad_is_refused_by_name():
    x = torch.tensor([1.5, 2.5], dtype=torch.float64)
    with pytest.raises(tnp.TensorTypeError, match="polygamma: the order n is an integer"):
        tnp.scipy.special.polygamma(torch.tensor(1.0, requires_grad=True), x)
    np.testing.assert_allclose(tnp.scipy.special.polygamma(torch.tensor([1, 2]), x).numpy(),
                               [0.93480220, -0.23620405], rtol=1e-7)
