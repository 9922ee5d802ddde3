"""Round 57d: dtype arguments and small misuse errors of the NumPy layer (any library's dtype
where NumPy takes a dtype, NumPy's ``dtype=``/``casting=`` of ``concatenate``/``stack``/
``einsum``, ``out=`` of the elementwise functions, PyTorch tensors that require grad as
``q``/``constant_values``, booleans in ``power`` and ``round``); each test failed before its
fix."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import TensorShapeError, TensorTypeError

X = np.array([0.5, 2.0, -1.25])


def _torch():
    return pytest.importorskip("torch", reason="PyTorch's dtypes and tensors as arguments")


# the dtype= of these functions (NumPy's own, or reading it with np.dtype) refused torch.float32
DTYPE_CALLS = {
    "asarray": lambda d: tnp.asarray([1.0, 2.0], dtype=d),
    "array": lambda d: tnp.array([1.0, 2.0], dtype=d),
    "zeros": lambda d: tnp.zeros(2, dtype=d),
    "ones": lambda d: tnp.ones(2, d),
    "full": lambda d: tnp.full(2, 1.5, dtype=d),
    "empty": lambda d: tnp.empty((1, 2), dtype=d),
    "eye": lambda d: tnp.eye(2, 2, 0, d),
    "identity": lambda d: tnp.identity(2, dtype=d),
    "arange": lambda d: tnp.arange(3, dtype=d),
    "linspace": lambda d: tnp.linspace(0.0, 1.0, 3, dtype=d),
    "logspace": lambda d: tnp.logspace(0.0, 1.0, 3, dtype=d),
    "geomspace": lambda d: tnp.geomspace(1.0, 2.0, 3, True, d),
    "tri": lambda d: tnp.tri(2, dtype=d),
    "zeros_like": lambda d: tnp.zeros_like(X, dtype=d),
    "ones_like": lambda d: tnp.ones_like(X, dtype=d),
    "full_like": lambda d: tnp.full_like(X, 2.5, dtype=d),
    "empty_like": lambda d: tnp.empty_like(X, dtype=d),
    "prod": lambda d: tnp.prod(X, dtype=d),
    "cumsum": lambda d: tnp.cumsum(X, dtype=d),
    "cumprod": lambda d: tnp.cumprod(X, dtype=d),
    "cumulative_sum": lambda d: tnp.cumulative_sum(X, dtype=d),
    "var": lambda d: tnp.var(X, dtype=d),
    "std": lambda d: tnp.std(X, dtype=d),
    "nansum": lambda d: tnp.nansum(X, dtype=d),
    "nancumsum": lambda d: tnp.nancumsum(X, dtype=d),
}


@pytest.mark.parametrize("name", list(DTYPE_CALLS))
def test_any_library_dtype_where_numpy_takes_a_dtype(name):
    torch = _torch()
    got = DTYPE_CALLS[name](torch.float32)
    want = DTYPE_CALLS[name](np.float32)
    assert got.dtype == np.float32 and type(got) is type(want)
    np.testing.assert_array_equal(got, want) if name not in ("empty", "empty_like") else None


# an unknown dtype was NumPy's TypeError (or worse), not a TensorTypeError naming the function
@pytest.mark.parametrize("name", list(DTYPE_CALLS))
@pytest.mark.parametrize("bad", ["bfloat16", object()], ids=["bfloat16", "object"])
def test_unknown_dtype_is_a_tensor_type_error_naming_the_function(name, bad):
    with pytest.raises(TensorTypeError, match=rf"^{name}: dtype .* is not supported"):
        DTYPE_CALLS[name](bad)


# NumPy's dtype utilities (re-exported) refused PyTorch's dtypes
def test_dtype_utilities_take_any_library_dtype():
    torch = _torch()
    assert tnp.result_type(torch.float32, np.int8, 1.0) == np.float32
    assert tnp.promote_types(torch.float16, torch.int16) == np.float32
    assert tnp.can_cast(torch.float32, np.float64) and not tnp.can_cast(torch.float64,
                                                                           torch.float32)
    assert tnp.finfo(torch.float32).eps == np.finfo(np.float32).eps
    assert tnp.iinfo(torch.int16).max == np.iinfo(np.int16).max
    assert tnp.issubdtype(torch.float32, np.floating) and not tnp.issubdtype(torch.int8,
                                                                              np.floating)
    assert tnp.isdtype(torch.float32, "real floating") and not tnp.isdtype(torch.int8, "bool")
    # NumPy's own arguments as ever: abstract types, kinds, arrays, Python numbers
    assert tnp.issubdtype(np.float32, np.floating) and tnp.result_type(X, 1j) == np.complex128
    assert tnp.isdtype(np.int8, ("integral", "bool"))
    for fn, call in [("result_type", lambda: tnp.result_type("bfloat16", X)),
                     ("finfo", lambda: tnp.finfo(torch.bfloat16)),
                     ("can_cast", lambda: tnp.can_cast(np.float32, object()))]:
        with pytest.raises(TensorTypeError, match=f"^{fn}: "):
            call()


def _jax():
    pytest.importorskip("jax", reason="gradients compared with JAX's")
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


# NumPy's dtype=/casting= of concatenate and stack (and out=) were "unexpected keyword argument"
@pytest.mark.parametrize("name", ["concatenate", "stack", "hstack", "vstack"])
@pytest.mark.parametrize("kwargs", [dict(dtype=np.float32), dict(dtype=np.int64),
                                    dict(dtype=np.int64, casting="unsafe"),
                                    dict(dtype=np.complex64, casting="safe"),
                                    dict(casting="no"), dict(casting="equiv"),
                                    dict(dtype=np.float64, casting="no")],
                         ids=["f32", "f2i", "f2i-unsafe", "c64-safe", "no", "equiv", "f64-no"])
def test_stacking_dtype_and_casting_as_numpy(name, kwargs):
    a, b = X, np.array([1, 2, 3], dtype=np.int32)
    try:
        want = getattr(np, name)([a, b], **kwargs)
    except TypeError:
        with pytest.raises(TensorTypeError, match=f"^{name}: cannot cast"):
            getattr(tnp, name)([a, b], **kwargs)
        return
    got = getattr(tnp, name)([a, b], **kwargs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    same = getattr(tnp, name)([a, a], casting="no")           # one dtype: nothing to cast
    np.testing.assert_array_equal(same, getattr(np, name)([a, a]))


# ... and their gradients are JAX's (through the cast), under tnp.grad
@pytest.mark.parametrize("name", ["concatenate", "stack"])
def test_stacking_dtype_gradient_is_jaxs(name):
    jax = _jax()
    jnp = jax.numpy
    w = np.array([1.0, -2.0, 3.0, 0.5, 4.0, -1.0])

    def f(lib, x, y):
        out = getattr(lib, name)([x, y * 2], dtype=lib.float32)
        return lib.sum(lib.reshape(out, (-1,)) * w.astype(np.float32) * out.reshape(-1))
    got = tnp.grad(lambda x, y: f(tnp, x, y), argnums=(0, 1))(X, X[::-1].copy())
    want = jax.grad(lambda x, y: f(jnp, x, y), argnums=(0, 1))(X, X[::-1].copy())
    for g, j in zip(got, want):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, np.asarray(j), rtol=1e-6)
    with pytest.raises(TensorShapeError, match="^concatenate: casting must be one of"):
        tnp.concatenate([X], casting="bad")
    with pytest.raises(tnp.TensorNotSupportedError, match="^stack: out="):
        tnp.stack([X], out=np.empty((1, 3)))


# einsum's dtype= (and casting=, order=, out=) were "unexpected keyword argument"
@pytest.mark.parametrize("kwargs", [dict(dtype=np.float32), dict(dtype=np.float32,
                                                                  casting="same_kind"),
                                    dict(dtype=np.complex128), dict(dtype=int),
                                    dict(dtype=int, casting="unsafe"), dict(casting="no"),
                                    dict(order="C")])
def test_einsum_dtype_and_casting_as_numpy(kwargs):
    a, b = X, np.array([1, 2, 3], dtype=np.int32)
    try:
        want = np.einsum("i,i->i", a, b, **kwargs)
    except TypeError:
        with pytest.raises(TensorTypeError, match="^einsum: cannot cast"):
            tnp.einsum("i,i->i", a, b, **kwargs)
        return
    got = tnp.einsum("i,i->i", a, b, **kwargs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_einsum_dtype_gradient_is_jaxs():
    jax = _jax()
    m = np.arange(6.0).reshape(2, 3) - 2.5

    def f(x):
        return tnp.sum(tnp.einsum("ij,j->i", m, x, dtype=tnp.float32, casting="same_kind") ** 2)

    def f_jax(x):                   # (JAX's einsum has no dtype=: the operands cast first)
        jnp = jax.numpy
        return jnp.sum(jnp.einsum("ij,j->i", m.astype(np.float32), x.astype(np.float32)) ** 2)
    got = tnp.grad(f)(X)
    want = jax.grad(f_jax)(X)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-6)
    assert got.dtype == np.float64


def _ufunc_like():
    from primitives.tensor.numpy import lowering, mathfuncs

    return sorted({name for module in (lowering, mathfuncs) for name in module.__all__
                   if isinstance(getattr(np, name, None), np.ufunc)})


def _ufunc_args(name):
    ufunc = getattr(np, name)
    if name in ("ldexp",):
        return X, np.array([1, 2, 3])
    if name.startswith(("logical", "bitwise", "invert")):
        return (np.array([True, False, True]),) * ufunc.nin
    return (X,) * ufunc.nin


# round 61: lowering's ufuncs take NumPy's dtype= (lowering.ufunc_keywords, given their
# operands), where this test held a refusal for every ufunc-like function
TAKE_DTYPE = {"absolute", "abs", "add", "conj", "conjugate", "cos", "divide", "true_divide",
              "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "exp",
              "log", "sin", "sqrt", "tanh", "float_power", "maximum", "minimum", "multiply",
              "negative", "positive", "power", "pow", "subtract"}


# out= of tnp's elementwise functions was Python's "unexpected keyword argument 'out'"
@pytest.mark.parametrize("name", _ufunc_like())
def test_ufunc_like_functions_refuse_out_where_dtype_by_name(name):
    fn, args = getattr(tnp, name), _ufunc_args(name)
    plain = fn(*args)
    if not isinstance(plain, tuple):                            # (divmod, modf: two results)
        np.testing.assert_array_equal(fn(*args, out=None, where=True, dtype=None), plain)
    for kwargs in [dict(out=np.empty(3)), dict(where=np.array([True, False, True])),
                   dict(dtype=np.float32)]:
        (key,) = kwargs                                 # (an alias names its function: mod...)
        if key == "dtype" and name in TAKE_DTYPE:
            _as_numpys_dtype(fn, name, args)
            continue
        with pytest.raises(tnp.TensorNotSupportedError, match=f"^{fn.__name__}: {key}="):
            fn(*args, **kwargs)
    x = tnp.tensor(args[0])                   # NumPy's own ufunc on a tensor: also by name
    if name not in ("isnan", "isinf", "isfinite", "signbit"):   # (these NumPy's, on the data)
        with pytest.raises(tnp.TensorNotSupportedError, match=f"^{fn.__name__}: where="):
            getattr(np, name)(x, *args[1:], where=np.array([True, False, True]))


def _as_numpys_dtype(fn, name: str, args: tuple) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # (log, sqrt of a negative value)
        try:
            expected = getattr(np, name)(*args, dtype=np.float32)
        except TypeError as error:                      # (float_power: no float32 loop)
            with pytest.raises(TensorTypeError, match=f"^{fn.__name__}: No loop"):
                fn(*args, dtype=np.float32)
            assert "No loop" in str(error)
            return
        got = fn(*args, dtype=np.float32)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_round_refuses_out_by_name():
    with pytest.raises(tnp.TensorNotSupportedError, match="^round: out="):
        tnp.round(X, out=np.empty(3))
    np.testing.assert_array_equal(tnp.round(X, 1, None), np.round(X, 1))


# q of quantile/percentile, a PyTorch tensor that requires grad, was PyTorch's RuntimeError
# from np.asarray: now refused by name while PyTorch records it, its values read otherwise
@pytest.mark.parametrize("name, q", [("quantile", 0.3), ("percentile", 30.0),
                                     ("nanquantile", 0.3)])
def test_quantile_of_a_torch_q_that_requires_grad(name, q):
    torch = _torch()
    fn = getattr(tnp, name)
    tq = torch.tensor(q, dtype=torch.float64, requires_grad=True)
    for a in (X, torch.tensor(X)):
        with pytest.raises(TensorTypeError, match=f"^{name}: q: a PyTorch tensor that requires"):
            fn(a, tq)
        with torch.no_grad():                              # PyTorch records nothing: its values
            np.testing.assert_allclose(np.asarray(fn(a, tq)), getattr(np, name)(X, q))
        np.testing.assert_allclose(np.asarray(fn(a, tq.detach())), getattr(np, name)(X, q))


# pad's constant_values, a PyTorch tensor that requires grad: PyTorch's RuntimeError; and a
# tensor or traced value carrying a gradient, per axis and side (or linear_ramp's end_values),
# was read as data: a silent zero derivative (now refused by name; a 0-d one raised already)
def test_pad_values_that_would_lose_a_derivative_are_refused():
    torch = _torch()
    for values in (torch.tensor(0.5, requires_grad=True),
                   torch.tensor([0.5, 2.0], requires_grad=True)):
        for a in (X, torch.tensor(X)):
            with pytest.raises(TensorTypeError, match="^pad: constant_values: a PyTorch"):
                tnp.pad(a, 1, constant_values=values)
        want = np.pad(X, 1, constant_values=values.detach().numpy())
        np.testing.assert_array_equal(tnp.pad(X, 1, constant_values=values.detach()), want)
        with torch.no_grad():
            np.testing.assert_array_equal(np.asarray(tnp.pad(torch.tensor(X), 1,
                                                             constant_values=values)), want)
    with pytest.raises(TensorTypeError, match="^pad: constant_values: .* carries a gradient"):
        tnp.grad(lambda c: tnp.sum(tnp.pad(X, 1, constant_values=c * np.array([1.0, 2.0]))))(1.0)
    with pytest.raises(TensorTypeError, match="^pad: end_values: .* carries a gradient"):
        tnp.grad(lambda e: tnp.sum(tnp.pad(X, 2, mode="linear_ramp", end_values=e)))(1.0)
    constant = tnp.tensor(np.array([0.5, 2.0]))                # no gradient: its values
    np.testing.assert_array_equal(tnp.pad(X, 1, constant_values=constant),
                                  np.pad(X, 1, constant_values=(0.5, 2.0)))


# tnp.power(bool_array, 2) was int8 (np.square's, what NumPy's bool_array ** 2 gives) where
# np.power gives int64, and bool ** True int64 where NumPy's is int8; each spelling is NumPy's
@pytest.mark.parametrize("p", [2, 3, 0, True, False, 2.0, np.int8(2), np.array(2)],
                         ids=repr)
def test_power_of_booleans_has_numpys_dtype_for_each_spelling(p):
    b = np.array([True, False, True])
    spellings = [(np.power(b, p), [tnp.power(b, p), tnp.jit(lambda v: tnp.power(v, p))(b)]),
                 (b ** p, [tnp.tensor(b) ** p, tnp.jit(lambda v: v ** p)(b)])]
    for want, gots in spellings:
        for got in gots:
            assert got.dtype == want.dtype, (got.dtype, want.dtype)
            np.testing.assert_array_equal(np.asarray(got), want)


# tnp.round(bool_array, decimals) raised NumPy's UFuncTypeError (NumPy refuses it too); with
# decimals=0 NumPy 2.4's round of booleans is float16, which tnp keeps
def test_round_of_booleans_to_decimals_is_a_tensor_type_error():
    b = np.array([True, False])
    for call in (lambda: tnp.round(b, 1), lambda: tnp.tensor(b).round(-1),
                 lambda: np.round(tnp.tensor(b), 2)):
        with pytest.raises(TensorTypeError, match="^round: booleans"):
            call()
    for got in (tnp.round(b), tnp.around(b, 0)):
        assert got.dtype == np.round(b).dtype
        np.testing.assert_array_equal(got, np.round(b))


# out= of matmul, vecdot, matvec, vecmat, dot, outer and clip (and dtype= of the gufuncs and
# clip, where= of clip) were Python's "unexpected keyword argument": now refused by name
@pytest.mark.parametrize("name, args", [
    ("matmul", (np.eye(3), X)), ("vecdot", (X, X)), ("matvec", (np.eye(3), X)),
    ("vecmat", (X, np.eye(3))), ("dot", (X, X)), ("outer", (X, X)), ("clip", (X, 0.0, 1.0))])
def test_products_and_clip_refuse_out_by_name(name, args):
    fn = getattr(tnp, name)
    np.testing.assert_allclose(fn(*args, out=None), getattr(np, name)(*args))
    keys = ["out"] + (["dtype"] if name not in ("dot", "outer") else []) + \
        (["where"] if name == "clip" else [])
    for key in keys:
        value = {"out": np.empty(np.shape(getattr(np, name)(*args))), "dtype": np.float32,
                 "where": np.array([True, False, True])}[key]
        with pytest.raises(tnp.TensorNotSupportedError, match=f"^{name}: {key}="):
            fn(*args, **{key: value})
