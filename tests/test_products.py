"""``inner``, ``vdot``, ``kron``, ``cross`` and ``einsum``'s sublist form.

Forward values and dtypes against NumPy on hypothesis shapes (size-0 and size-1
axes, broadcasting), the VJPs by the dot-product test and against PyTorch, and
NumPy's argument handling. The per-function cases with every derivative check
are in ``tests/numpy_cases/products.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import primitives.tensor as tnp
from primitives.tensor.errors import TensorAxisError, TensorShapeError, TensorTypeError
from primitives.tensor.numpy.products import einsum_subscripts
from tidu import TiduError

SETTINGS = settings(max_examples=10, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
SIZES = st.sampled_from([0, 1, 1, 2, 3])
SHAPES = st.lists(SIZES, min_size=0, max_size=3).map(tuple)
DTYPES = st.sampled_from(["float64", "float32", "complex128"])


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def assert_matches_numpy(got, expected):
    got = np.asarray(got)
    assert got.shape == np.shape(expected) and got.dtype == np.asarray(expected).dtype
    tol = 1e-5 if got.dtype in (np.float32, np.complex64) else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


def dot_product_test(f, args, rng):
    """``Re<ct, J t> == Re<J^T ct, t>`` with respect to every argument at once."""
    tangents = [rand(rng, a.shape, a.dtype) for a in args]
    y, jt = tnp.jvp(f, tuple(args), tuple(tangents))
    ct = rand(rng, np.shape(y), np.asarray(y).dtype)
    _, pullback = tnp.vjp(f, *args)
    cts = pullback(ct)
    lhs = np.real(np.vdot(ct, jt))
    rhs = sum(np.real(np.vdot(c, t)) for c, t in zip(cts, tangents))
    scale = max(1.0, abs(lhs))
    assert abs(lhs - rhs) <= (1e-4 if np.asarray(y).dtype == np.float32 else 1e-10) * scale


# --- forward and the dot-product test on random shapes ---------------------------------------


@SETTINGS
@given(SHAPES, SHAPES, SIZES, DTYPES, st.integers(0, 2**32 - 1))
def test_inner(sa, sb, k, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rand(rng, sa + (k,) if sa else (), dtype)
    b = rand(rng, sb + (k,), dtype)
    assert_matches_numpy(tnp.inner(a, b), np.inner(a, b))
    dot_product_test(tnp.inner, [a, b], rng)


@SETTINGS
@given(SHAPES, DTYPES, st.integers(0, 2**32 - 1))
def test_vdot(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    a, b = rand(rng, shape, dtype), rand(rng, shape[::-1], dtype)
    assert_matches_numpy(tnp.vdot(a, b), np.vdot(a, b))
    dot_product_test(tnp.vdot, [a, b], rng)


@SETTINGS
@given(SHAPES, SHAPES, DTYPES, st.integers(0, 2**32 - 1))
def test_kron(sa, sb, dtype, seed):
    rng = np.random.default_rng(seed)
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    assert_matches_numpy(tnp.kron(a, b), np.kron(a, b))
    dot_product_test(tnp.kron, [a, b], rng)


@SETTINGS
@given(st.lists(st.sampled_from([1, 2]), max_size=2).map(tuple), st.sampled_from([2, 3]),
       st.sampled_from([2, 3]), st.integers(-1, 0), DTYPES, st.integers(0, 2**32 - 1))
def test_cross(batch, da, db, axisc, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rand(rng, batch + (da,), dtype)
    b = np.moveaxis(rand(rng, (1,) * len(batch) + (db,), dtype), -1, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)     # 2-vectors: NumPy 2 deprecates

        def f(a, b):
            return tnp.cross(a, b, axisb=0, axisc=axisc)
        assert_matches_numpy(f(a, b), np.cross(a, b, axisb=0, axisc=axisc))
        dot_product_test(f, [a, b], rng)


def test_python_numbers_promote_as_arrays_as_in_numpy():
    f32 = np.ones(2, np.float32)
    for fn in ("inner", "kron"):
        assert_matches_numpy(getattr(tnp, fn)(2.0, f32), getattr(np, fn)(2.0, f32))
    assert_matches_numpy(tnp.vdot(f32, f32), np.vdot(f32, f32))
    assert_matches_numpy(tnp.vdot(1j, 2j), np.vdot(1j, 2j))
    assert_matches_numpy(tnp.inner([1.0, 2.0], [3.0, 4.0]), np.inner([1.0, 2.0], [3.0, 4.0]))


def test_cross_of_2_vectors_warns_as_numpy_does():
    for module in (np, tnp):
        with pytest.warns(DeprecationWarning, match="2-dimensional vectors"):
            module.cross(np.ones(2), np.ones(3))


def test_vdot_conjugates_its_first_argument_only():
    a, b = np.array([1j, 2.0]), np.array([3.0, 1j])
    assert tnp.vdot(a, b) == np.vdot(a, b) == -3j + 2j
    # f(a) = Re(vdot(a, b)) = Re<a, b>: its gradient (tidu's convention) is b itself
    np.testing.assert_allclose(tnp.grad(lambda a: tnp.real(tnp.vdot(a, b)))(a), b)
    # and in b, Re<a, b> has gradient a
    np.testing.assert_allclose(tnp.grad(lambda b: tnp.real(tnp.vdot(a, b)))(b), a)


# --- against PyTorch -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["inner", "kron", "vdot", "cross"])
def test_vjp_matches_torch(name):
    torch = pytest.importorskip("torch", reason="torch is the reference for the VJPs")
    rng = np.random.default_rng(len(name))
    shapes = {"inner": ((2, 3), (4, 3)), "kron": ((2, 3), (3, 1)), "vdot": ((5,), (5,)),
              "cross": ((4, 3), (4, 3))}[name]
    a, b = (rand(rng, s, "complex128") for s in shapes)
    torch_fn = {"inner": torch.inner, "kron": torch.kron, "vdot": torch.vdot,
                "cross": lambda x, y: torch.linalg.cross(x, y)}[name]
    y, pullback = tnp.vjp(getattr(tnp, name), a, b)
    ct = rand(rng, np.shape(y), "complex128")
    ta, tb = (torch.tensor(v, requires_grad=True) for v in (a, b))
    ty = torch_fn(ta, tb)
    np.testing.assert_allclose(ty.detach().resolve_conj().numpy(), y, rtol=1e-12)
    # tidu and PyTorch share the complex convention: no conjugation to account for
    theirs = torch.autograd.grad(ty, (ta, tb), torch.tensor(ct))
    for ours, their in zip(pullback(ct), theirs):
        np.testing.assert_allclose(ours, their.resolve_conj().numpy(), rtol=1e-12, atol=1e-12)


# --- einsum's sublist form -------------------------------------------------------------------


def einsum_sublist(*args):
    spec, operands = einsum_subscripts(*args)
    return tnp.einsum(spec, *operands)


@pytest.mark.parametrize("make_args", [
    lambda a, b, c: (a, [0, 1], b, [1, 2], [0, 2]),
    lambda a, b, c: (a, [0, 1], b, [1, 2]),                         # implicit output
    lambda a, b, c: (a, [30, 1], b, [1, 3]),                        # 'e' sorts after 'D'
    lambda a, b, c: (a, [np.int64(5), 51]),                         # NumPy integers
    lambda a, b, c: (c, [Ellipsis, 1], b, [1, 2], [Ellipsis, 2]),
    lambda a, b, c: (c, [0, Ellipsis], [Ellipsis]),
    lambda a, b, c: (a, [0, 1], [1, 0]),
    lambda a, b, c: (b, [0, 0]),                                    # a repeated index: trace
])
def test_einsum_sublist_matches_numpy(make_args):
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal((3, 3)), \
        rng.standard_normal((4, 2, 3))
    args = make_args(a, b, c)
    assert_matches_numpy(einsum_sublist(*args), np.einsum(*args))
    arrays = [i for i, x in enumerate(args) if isinstance(x, np.ndarray)]

    def f(*xs):
        full = list(args)
        for i, x in zip(arrays, xs):
            full[i] = x
        return einsum_sublist(*full)
    dot_product_test(f, [args[i] for i in arrays], rng)


def test_einsum_subscripts_letters():
    a = np.ones((2, 3))
    assert einsum_subscripts(a, [0, 25, 26, 51]) == ("AZaz", [a])
    assert einsum_subscripts(a, [Ellipsis, 1], a, [1, Ellipsis], [Ellipsis])[0] == \
        "...B,B...->..."
    assert einsum_subscripts(a, [])[0] == ""


@pytest.mark.parametrize("args, error, message", [
    ((np.ones(2), [52]), TensorShapeError, r"valid range \[0, 52\)"),
    ((np.ones(2), [-1]), TensorShapeError, "valid range"),
    ((np.ones(2), [1.5]), TensorTypeError, "not an integer"),
    ((np.ones(2), [True]), TensorTypeError, "not an integer"),
    ((np.ones(2), "ij"), TensorTypeError, "sublist must be a list"),
    ((np.ones(2), 3), TensorTypeError, "sublist must be a list"),
    ((np.ones(2),), TensorTypeError, "sublist form"),
])
def test_einsum_subscripts_errors(args, error, message):
    with pytest.raises(error, match=message) as raised:
        einsum_subscripts(*args)
    assert isinstance(raised.value, TiduError)


# --- errors and dispatch ---------------------------------------------------------------------


@pytest.mark.parametrize("call, error, message", [
    (lambda: tnp.inner(np.ones((2, 3)), np.ones(4)), TensorShapeError, "inner: shapes"),
    (lambda: tnp.vdot(np.ones(3), np.ones(4)), TensorShapeError, "vdot: .* 3 and 4"),
    (lambda: tnp.cross(np.ones(4), np.ones(3)), TensorShapeError, "dimension must be 2 or 3"),
    (lambda: tnp.cross(np.array(1.0), np.ones(3)), TensorShapeError, "zero dimension"),
    (lambda: tnp.cross(np.ones(3), np.ones(3), axisc=1), TensorAxisError, "axisc"),
    (lambda: tnp.cross(np.ones((3, 2)), np.ones(3), axisa=2), TensorAxisError, "axisa"),
    (lambda: tnp.cross(np.ones((2, 3)), np.ones((3, 3))), TensorShapeError, "cross: shapes"),
    (lambda: tnp.kron(None, np.ones(2)), TensorTypeError, "kron"),
])
def test_bad_arguments_raise_clear_errors(call, error, message):
    with pytest.raises(error, match=message) as raised:
        call()
    assert isinstance(raised.value, TiduError)
    assert tnp.inner(np.ones(2), np.ones(2)) == 2.0               # still usable afterwards


def test_numpy_functions_dispatch_with_gradients():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal(3)
    ta = tnp.tensor(a, requires_grad=True)
    for np_fn, tnp_fn in ((np.inner, tnp.inner), (np.kron, tnp.kron), (np.cross, tnp.cross),
                          (np.vdot, lambda x, y: tnp.vdot(x, np.resize(y, 6)))):
        out = np_fn(ta, b) if np_fn is not np.vdot else np_fn(ta, np.resize(b, 6))
        grads = tnp.sum(out).backward()
        expected = tnp.grad(lambda x: tnp.sum(tnp_fn(x, b)))(a)
        np.testing.assert_allclose(grads.grad(ta), expected, rtol=1e-12)
