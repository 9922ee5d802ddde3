"""``tnp.fft``: the transform primitives and the NumPy-named functions built on them.

- every primitive of ``primitives.tensor.ops.fft`` through ``check_primitive``
  (JVP against finite differences, transpose by the dot-product test, second
  order) on hypothesis shapes with size-1 axes and size-0 untransformed axes;
- the dot-product test of ``rfft``/``irfft`` (and the n-d and Hermitian
  variants) through ``tnp.jvp``/``tnp.vjp``, odd and even ``n``, every norm,
  padding and truncation: the Hermitian halving is where adjoints go wrong;
- the VJPs against PyTorch's ``torch.fft`` (same complex convention as tidu);
- NumPy's argument handling: errors, dtypes, deprecations, dispatch.

Forward values, dtypes and derivatives of every function on sample inputs are
the cases in ``tests/numpy_cases/fft.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import primitives.tensor as tnp
from primitives.tensor.errors import (TensorAxisError, TensorNotSupportedError, TensorShapeError,
                                      TensorTypeError)
from primitives.tensor.ops.base import OpParameterError
from primitives.tensor.ops.fft import Fft, HalfSpectrumWeight, Irfft, Rfft
from tidu import TiduError
from tidu.testing import check_primitive

SETTINGS = settings(max_examples=8, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
NORMS = ["backward", "ortho", "forward"]


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@st.composite
def layouts(draw):
    """A shape, the transformed axes (distinct, any order, sizes >= 1; the other axes may
    have size 0) and a norm."""
    ndim = draw(st.integers(1, 3))
    axes = draw(st.permutations(range(ndim)))[:draw(st.integers(1, ndim))]
    shape = tuple(draw(st.sampled_from([1, 2, 3, 4, 5] if a in axes else [0, 1, 2]))
                  for a in range(ndim))
    return shape, tuple(axes), draw(st.sampled_from(NORMS))


# --- the primitives --------------------------------------------------------------------------


@SETTINGS
@given(layouts(), st.booleans(), st.sampled_from(["complex128", "complex64"]),
       st.integers(0, 2**32 - 1))
def test_fft_primitive(layout, inverse, dtype, seed):
    shape, axes, norm = layout
    rng = np.random.default_rng(seed)
    check_primitive(Fft(axes, inverse, norm), rand(rng, shape, dtype), order=2, rng=seed)


@SETTINGS
@given(layouts(), st.sampled_from(["float64", "float32"]), st.integers(0, 2**32 - 1))
def test_rfft_primitive(layout, dtype, seed):
    shape, axes, norm = layout
    rng = np.random.default_rng(seed)
    op = Rfft(axes, shape[axes[-1]], norm)
    check_primitive(op, rand(rng, shape, dtype), order=2, rng=seed)


@SETTINGS
@given(layouts(), st.sampled_from(["complex128", "complex64"]),
       st.integers(0, 2**32 - 1))
def test_irfft_primitive(layout, dtype, seed):
    shape, axes, norm = layout
    n = shape[axes[-1]]                       # the real length; the operand has n // 2 + 1 bins
    half = tuple(n // 2 + 1 if a == axes[-1] else size for a, size in enumerate(shape))
    rng = np.random.default_rng(seed)
    check_primitive(Irfft(axes, n, norm), rand(rng, half, dtype), order=2, rng=seed)


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
@pytest.mark.parametrize("n", [1, 2, 5, 6])
def test_half_spectrum_weight_primitive(dtype, n):
    rng = np.random.default_rng(n)
    x = rand(rng, (2, n // 2 + 1, 0 if n == 1 else 1), dtype)     # a size-0 batch axis too
    check_primitive(HalfSpectrumWeight(1, n, 2.0), x, order=2, rng=n)
    check_primitive(HalfSpectrumWeight(0, n, 0.5), rand(rng, (n // 2 + 1, 2), dtype), order=2,
                    rng=n)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8])
def test_half_spectrum_weight_doubles_the_paired_bins(n):
    bins = HalfSpectrumWeight(0, n, 2.0).eval(None, [np.ones(n // 2 + 1)])[0]
    paired = [k for k in range(n // 2 + 1) if k != 0 and 2 * k != n]
    assert list(np.flatnonzero(bins == 2.0)) == paired


def test_primitives_refuse_operands_of_the_wrong_kind():
    with pytest.raises(TensorTypeError, match="complex"):
        Fft((0,), False).eval(None, [np.ones(3)])
    with pytest.raises(TensorTypeError, match="real"):
        Rfft((0,), 3).eval(None, [np.ones(3, complex)])
    with pytest.raises(TensorTypeError, match="complex"):
        Irfft((0,), 4).eval(None, [np.ones(3)])
    with pytest.raises(OpParameterError, match="norm"):
        Fft((0,), False, "unitary")
    with pytest.raises(OpParameterError, match="distinct"):
        Rfft((0, 0), 3)
    with pytest.raises(OpParameterError, match="not empty"):
        Irfft((), 3)


# --- the adjoints of the functions: the dot-product test -------------------------------------


def _dot_product_test(f, x, rng):
    """``Re<ct, J t> == Re<J^T ct, t>`` for ``f`` at ``x``, random ``t`` and ``ct``."""
    t = rand(rng, x.shape, x.dtype)
    y, jt = tnp.jvp(f, (x,), (t,))
    ct = rand(rng, np.shape(y), np.asarray(y).dtype)
    _, pullback = tnp.vjp(f, x)
    (jct,) = pullback(ct)
    assert jct.dtype == x.dtype and jct.shape == x.shape
    lhs = np.real(np.vdot(ct, jt))
    rhs = np.real(np.vdot(jct, t))
    assert abs(lhs - rhs) <= 1e-10 * max(1.0, abs(lhs)), (lhs, rhs)
    return jct


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("size, n", [(6, None), (7, None), (5, 8), (5, 9), (8, 5), (8, 4),
                                     (1, None), (1, 2)])
def test_rfft_and_irfft_dot_product(size, n, norm):
    rng = np.random.default_rng(size * 10 + (n or 0))
    _dot_product_test(lambda x: tnp.fft.rfft(x, n, norm=norm), rand(rng, (2, size), "float64"),
                      rng)
    _dot_product_test(lambda x: tnp.fft.ihfft(x, n, norm=norm), rand(rng, (size, 2), "float64")
                      .T.copy(), rng)
    if size > 1 or n is not None:               # the default n = 2 * (1 - 1) is refused
        for dtype in ("complex128", "float64"):
            x = rand(rng, (3, size), dtype)
            _dot_product_test(lambda x: tnp.fft.irfft(x, n, norm=norm), x, rng)
            _dot_product_test(lambda x: tnp.fft.irfft(x.T, n, axis=0, norm=norm), x, rng)
            _dot_product_test(lambda x: tnp.fft.hfft(x, n, norm=norm), x, rng)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("s, axes", [((3, 4), (0, 2)), ((5, 7), (2, 1)), ((2, 3, 1), (0, 1, 2)),
                                     ((4, 6), (1, 1)), (None, (2, 0))])
def test_nd_dot_product(s, axes, norm):
    rng = np.random.default_rng(len(axes))
    real = rand(rng, (3, 2, 5), "float64")
    cplx = rand(rng, (3, 2, 5), "complex128")
    for fn in (tnp.fft.fftn, tnp.fft.ifftn):
        _dot_product_test(lambda x: fn(x, s, axes, norm), cplx, rng)
        _dot_product_test(lambda x: fn(x, s, axes, norm), real, rng)
    _dot_product_test(lambda x: tnp.fft.rfftn(x, s, axes, norm), real, rng)
    _dot_product_test(lambda x: tnp.fft.irfftn(x, s, axes, norm), cplx, rng)


def test_gradients_of_known_functions():
    x = np.random.default_rng(0).standard_normal(6)
    # Parseval: sum |fft(x)|^2 = N sum x^2, gradient 2 N x
    g = tnp.grad(lambda v: tnp.sum(tnp.abs(tnp.fft.fft(v)) ** 2))(x)
    np.testing.assert_allclose(g, 2 * 6 * x, rtol=1e-12)
    # the same through rfft: DC and Nyquist once, the other bins twice
    weights = np.array([1.0, 2, 2, 1])
    g = tnp.grad(lambda v: tnp.sum(weights * tnp.abs(tnp.fft.rfft(v)) ** 2))(x)
    np.testing.assert_allclose(g, 2 * 6 * x, rtol=1e-12)
    # the inverse undoes the transform: d irfft(rfft(x)) = identity
    ct = np.random.default_rng(1).standard_normal(6)
    _, pullback = tnp.vjp(lambda v: tnp.fft.irfft(tnp.fft.rfft(v), 6), x)
    np.testing.assert_allclose(pullback(ct)[0], ct, rtol=1e-12, atol=1e-14)
    z = x[:4] + 1j * x[2:]
    _, pullback = tnp.vjp(lambda v: tnp.fft.ifft(tnp.fft.fft(v)), z)
    np.testing.assert_allclose(pullback(z)[0], z, rtol=1e-12)


def test_irfft_ignores_the_imaginary_parts_of_dc_and_nyquist():
    for n in (4, 5):
        half = n // 2 + 1
        grad = tnp.grad(lambda y: tnp.sum(tnp.fft.irfft(y, n) * np.arange(1.0, n + 1)))(
            np.ones(half, complex))
        assert grad[0].imag == 0
        assert (grad[-1].imag == 0) == (n % 2 == 0)


# --- against PyTorch -------------------------------------------------------------------------

TORCH_CASES = [
    ("fft", {}, (2, 5), "complex128"), ("fft", {"n": 8, "norm": "ortho"}, (2, 5), "float64"),
    ("ifft", {"n": 3, "dim": 0}, (4, 2), "complex128"),
    ("rfft", {}, (2, 6), "float64"), ("rfft", {"n": 7, "norm": "forward"}, (3, 4), "float64"),
    ("irfft", {}, (2, 4), "complex128"), ("irfft", {"n": 7}, (2, 4), "complex128"),
    ("irfft", {"n": 4, "norm": "ortho"}, (2, 5), "complex128"),
    ("hfft", {"n": 5}, (2, 3), "complex128"), ("ihfft", {}, (2, 6), "float64"),
    ("fft2", {}, (2, 3, 4), "complex128"), ("ifft2", {"s": (4, 2)}, (3, 3), "complex128"),
    ("fftn", {"s": (3, 5), "dim": (0, 2)}, (2, 2, 4), "complex128"),
    ("ifftn", {"norm": "forward"}, (2, 3), "complex128"),
    ("rfftn", {"s": (3, 5), "dim": (2, 0)}, (4, 2, 3), "float64"),
    ("rfft2", {}, (3, 4), "float64"),
    ("irfftn", {"s": (3, 6), "dim": (1, 0)}, (4, 2), "complex128"),
    ("irfft2", {}, (3, 3), "complex128"),
    ("fftshift", {}, (3, 4), "complex128"), ("ifftshift", {"dim": 0}, (5, 2), "float64"),
]


@pytest.mark.parametrize("name, kwargs, shape, dtype", TORCH_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(TORCH_CASES)])
def test_vjp_matches_torch(name, kwargs, shape, dtype):
    torch = pytest.importorskip("torch", reason="torch.fft is the reference for the VJPs")
    rng = np.random.default_rng(len(name) + len(kwargs))
    x = rand(rng, shape, dtype)
    ours = {"dim": "axis" if name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
            else "axes"}
    np_kwargs = {ours.get(k, k): v for k, v in kwargs.items()}
    f = getattr(tnp.fft, name)
    y, pullback = tnp.vjp(lambda v: f(v, **np_kwargs), x)
    ct = rand(rng, np.shape(y), np.asarray(y).dtype)
    (ours_grad,) = pullback(ct)

    tx = torch.tensor(x, requires_grad=True)
    ty = getattr(torch.fft, name)(tx, **kwargs)
    np.testing.assert_allclose(ty.detach().resolve_conj().numpy(), y, rtol=1e-12, atol=1e-12)
    # tidu and PyTorch share the convention: the VJP of ct is the adjoint under Re<a, b>
    (theirs,) = torch.autograd.grad(ty, tx, torch.tensor(ct))
    np.testing.assert_allclose(ours_grad, theirs.resolve_conj().numpy(), rtol=1e-10, atol=1e-12)


def test_second_order_matches_torch():
    torch = pytest.importorskip("torch", reason="torch.func is the reference for the Hessian")
    x = np.random.default_rng(5).standard_normal(7)
    w = np.linspace(0.5, 2.0, 4)

    def loss(v):
        return tnp.sum(w * tnp.abs(tnp.fft.rfft(tnp.sin(v), norm="ortho")) ** 2)

    def torch_loss(v):
        return (torch.tensor(w) * torch.fft.rfft(torch.sin(v), norm="ortho").abs() ** 2).sum()

    ours = tnp.jvp(tnp.grad(loss), (x,), (np.eye(7)[2],))[1]
    theirs = torch.func.hessian(torch_loss)(torch.tensor(x))[2].numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


# --- NumPy's argument handling ---------------------------------------------------------------


@pytest.mark.parametrize("fn, args, kwargs", [
    ("fft", (np.ones((2, 3), np.float32),), {}),
    ("fft", (np.ones(3, np.int32),), {"n": 5}),
    ("ifft", (np.ones(3, np.float16),), {}),
    ("rfft", (np.ones(4, np.float32),), {}),
    ("rfft", (np.ones(5, np.int64),), {}),
    ("irfft", (np.ones(3, np.complex64),), {}),
    ("irfft", (np.ones(3, np.float32),), {"n": 5}),
    ("irfft", (np.ones(3, np.float16),), {}),
    ("hfft", (np.ones(3, np.float32),), {}),
    ("ihfft", (np.ones(4, np.int8),), {}),
    ("fftn", (np.ones((2, 3)),), {"axes": ()}),
    ("fftn", (np.array(2.0),), {}),
    ("fft", (np.ones((0, 3)),), {}),
    ("fft", (np.ones((3, 0)),), {"n": 2}),
    ("rfftn", (np.ones((0, 4), np.float32),), {"axes": (1,)}),
    ("fftshift", (np.arange(5),), {}),
    ("fftfreq", (6, 0.25), {}),
    ("rfftfreq", (7,), {}),
])
def test_forward_values_and_dtypes_match_numpy(fn, args, kwargs):
    expected = getattr(np.fft, fn)(*args, **kwargs)
    for got in (getattr(tnp.fft, fn)(*args, **kwargs),
                tnp.jit(lambda *a: getattr(tnp.fft, fn)(*a, **kwargs))(*args)
                if not isinstance(args[0], int) else expected):
        got = np.asarray(got)
        assert got.dtype == expected.dtype and got.shape == expected.shape, (got, expected)
        single = np.finfo(got.dtype).bits <= 32 if got.dtype.kind in "fc" else False
        np.testing.assert_allclose(got, expected, rtol=1e-3 if single else 1e-12,
                                   atol=1e-3 if single else 1e-12)


@pytest.mark.parametrize("call, error, message", [
    (lambda: tnp.fft.fft(np.ones(3), n=0), TensorShapeError, r"fft: invalid number .* \(0\)"),
    (lambda: tnp.fft.fft(np.ones(0)), TensorShapeError, r"\(0\)"),
    (lambda: tnp.fft.irfft(np.ones(1)), TensorShapeError, r"irfft: invalid number .* \(0\)"),
    (lambda: tnp.fft.fftn(np.ones((2, 2)), s=(0, 2), axes=(0, 1)), TensorShapeError, "fftn"),
    (lambda: tnp.fft.fft(np.ones(3), n=2.5), TensorTypeError, "must be an integer"),
    (lambda: tnp.fft.fft(np.ones(3), norm="unitary"), TensorShapeError, "invalid norm"),
    (lambda: tnp.fft.hfft(np.ones(3), norm="unitary"), TensorShapeError, "hfft: invalid norm"),
    (lambda: tnp.fft.rfft(np.ones(3, complex)), TensorTypeError, "rfft: the input must be real"),
    (lambda: tnp.fft.fft(np.ones(3), out=np.ones(3, complex)), TensorNotSupportedError, "out="),
    (lambda: tnp.fft.fft(np.array(1.0)), TensorAxisError, "fft: axis -1"),
    (lambda: tnp.fft.ifft(np.ones(3), axis=1), TensorAxisError, "ifft: axis 1"),
    (lambda: tnp.fft.fftn(np.ones((2, 2)), s=(2,), axes=(0, 1)), TensorShapeError,
     "different lengths"),
    (lambda: tnp.fft.rfftn(np.ones((2, 2)), axes=()), TensorShapeError, "at least one axis"),
    (lambda: tnp.fft.irfft2(np.ones((2, 2)), axes=()), TensorShapeError, "at least one axis"),
    (lambda: tnp.fft.fft(None), TensorTypeError, "fft: expected an array"),
    (lambda: tnp.fft.fftshift(np.ones(2), axes=3), TensorAxisError, "fftshift"),
])
def test_bad_arguments_raise_clear_errors(call, error, message):
    with pytest.raises(error, match=message) as raised:
        call()
    assert isinstance(raised.value, TiduError)
    assert np.allclose(tnp.fft.fft(np.ones(2)), [2, 0])        # still usable afterwards


def test_numpy_refuses_what_tnp_refuses():
    """The errors above are NumPy's too (same builtin base class)."""
    for call, error in ((lambda m: m.fft(np.ones(3), n=0), ValueError),
                        (lambda m: m.irfft(np.ones(1)), ValueError),
                        (lambda m: m.fft(np.ones(3), norm="unitary"), ValueError),
                        (lambda m: m.rfft(np.ones(3, complex)), TypeError),
                        (lambda m: m.ifft(np.ones(3), axis=1), IndexError),
                        (lambda m: m.fftn(np.ones((2, 2)), s=(2,), axes=(0, 1)), ValueError)):
        for module in (np.fft, tnp.fft):
            with pytest.raises(error):
                call(module)


def test_s_without_axes_warns_as_numpy_does():
    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    for module in (np.fft, tnp.fft):
        with pytest.warns(DeprecationWarning, match="axes"):
            module.fftn(x, s=(3, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        np.testing.assert_allclose(tnp.fft.fftn(x, s=(3, 5)), np.fft.fftn(x, s=(3, 5)),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(tnp.fft.irfftn(x, s=(3, None), axes=(0, 2)),
                                   np.fft.irfftn(x, s=(3, None), axes=(0, 2)), rtol=1e-12,
                                   atol=1e-12)


def test_numpy_functions_dispatch_and_eager_tensors_differentiate():
    x = np.random.default_rng(2).standard_normal(5)
    t = tnp.tensor(x, requires_grad=True)
    loss = tnp.sum(tnp.real(np.fft.fft(t)) * np.arange(5.0))      # np.fft.fft -> tnp.fft.fft
    grads = loss.backward()
    expected = tnp.grad(lambda v: tnp.sum(tnp.real(tnp.fft.fft(v)) * np.arange(5.0)))(x)
    np.testing.assert_allclose(grads.grad(t), expected, rtol=1e-12)
    np.testing.assert_allclose(expected, np.real(np.fft.fft(np.arange(5.0))), rtol=1e-12,
                               atol=1e-12)                         # <ct, F e_j> for real ct
    d = tnp.tensor(np.array(0.5), requires_grad=True)
    freq = tnp.fft.fftfreq(4, d)
    assert np.allclose(tnp.sum(freq).backward().grad(d), -np.sum(np.fft.fftfreq(4, 0.5)) / 0.5)
