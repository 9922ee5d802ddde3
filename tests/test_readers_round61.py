"""Round 61: one rule for what NumPy's value readers give an eager ``Tensor``.

``tnp.count_nonzero(t)`` (creation's wrappers) and ``np.count_nonzero(t)`` (NumPy's
dispatch) now both end in ``dispatch.results_as_tensors``: a ``Tensor`` in gives
``Tensor``s out, without grad, in the tensor's library, 0-d results included (before,
``np.count_nonzero(t)`` was an ``np.int64`` and ``np.isclose`` of a 0-d tensor an
``np.bool_``, while tnp's were 0-d tensors). Python ``bool``s (``np.allclose``) stay.
"""

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.eager.frontend import Tensor
from primitives.tensor.core import array_below
from primitives.tensor import FunctionalError
from tidu import TiduError
from primitives.tensor.errors import (ConcretizationError, TensorNotSupportedError,
                                      TensorTypeError)

VALUES = np.array([0.0, 3.0, np.inf, -np.inf, -2.0])
INTEGERS = np.array([1, 3, 0, 7])

# (name, arguments built from the array x) for every reader both mechanisms give
READERS = [
    ("nonzero", lambda x: (x,)),
    ("argwhere", lambda x: (x,)),
    ("flatnonzero", lambda x: (x,)),
    ("count_nonzero", lambda x: (x,)),
    ("isposinf", lambda x: (x,)),
    ("isneginf", lambda x: (x,)),
    ("isclose", lambda x: (x, 3.0)),
    ("bitwise_count", lambda x: (x,)),
]


def _data(name: str, zero_d: bool) -> np.ndarray:
    data = INTEGERS if name == "bitwise_count" else VALUES
    return np.asarray(data[1]) if zero_d else data


def _as_list(result):
    return list(result) if isinstance(result, tuple) else [result]


def _same_type_and_values(result, expected_values, expected_types) -> None:
    results = _as_list(result)
    assert len(results) == len(expected_values)
    for r, e, kind in zip(results, expected_values, expected_types):
        assert type(r) is kind
        assert np.asarray(r).dtype == np.asarray(e).dtype
        assert np.asarray(r).shape == np.shape(e)
        np.testing.assert_array_equal(np.asarray(r), e)


@pytest.mark.parametrize("zero_d", [False, True], ids=["1-d", "0-d"])
@pytest.mark.parametrize("name, arguments", READERS, ids=[r[0] for r in READERS])
def test_tnp_and_numpys_reader_of_a_tensor_agree_0d_included(name, arguments, zero_d):
    data = _data(name, zero_d)
    if name == "nonzero" and zero_d:                     # NumPy refuses 0-d, both ways
        for fn in (tnp.nonzero, np.nonzero):
            with pytest.raises(ValueError):
                fn(tnp.tensor(data))
        return
    requires_grad = data.dtype.kind == "f"
    t = tnp.tensor(data, requires_grad=requires_grad)
    expected = getattr(np, name)(*arguments(data))
    for fn in (getattr(tnp, name), getattr(np, name)):
        result = fn(*arguments(t))
        _same_type_and_values(result, _as_list(expected), [Tensor] * len(_as_list(expected)))
        assert not any(r.requires_grad for r in _as_list(result))


@pytest.mark.parametrize("zero_d", [False, True], ids=["1-d", "0-d"])
@pytest.mark.parametrize("name, arguments", READERS, ids=[r[0] for r in READERS])
def test_numpy_in_gives_numpy_out_unchanged(name, arguments, zero_d):
    data = _data(name, zero_d)
    if name == "nonzero" and zero_d:
        return
    expected = getattr(np, name)(*arguments(data))
    kinds = [type(e) for e in _as_list(expected)]        # np.intp, np.bool_, ndarray
    _same_type_and_values(getattr(tnp, name)(*arguments(data)), _as_list(expected), kinds)


@pytest.mark.parametrize("call", [
    "f.count_nonzero(t, axis=0)", "f.count_nonzero(t, keepdims=True)",
    "f.count_nonzero(m, axis=1)", "f.isclose(t, t + 1e-12)", "f.isclose(s, 1.0)",
    "f.isposinf(s)", "f.isneginf(s)", "f.count_nonzero(s)",
])
def test_readers_with_options_and_0d_give_the_same_tensors(call):
    data = {"t": VALUES, "m": VALUES.reshape(1, -1), "s": np.asarray(1.0)}
    tensors = {k: tnp.tensor(v, requires_grad=True) for k, v in data.items()}
    expected = eval(call, {"f": np, **data})
    for namespace in (tnp, np):
        result = eval(call, {"f": namespace, **tensors})
        _same_type_and_values(result, [expected], [Tensor])


def test_0d_results_match_pytorchs():
    torch = pytest.importorskip("torch")
    t = tnp.tensor(VALUES, requires_grad=True)
    s = tnp.tensor(3.0, requires_grad=True)
    count, torch_count = np.count_nonzero(t), torch.count_nonzero(torch.tensor(VALUES))
    assert count.shape == tuple(torch_count.shape) == ()
    assert count.item() == torch_count.item() and count.dtype == np.int64
    close = np.isclose(s, 3.0)
    torch_close = torch.isclose(torch.tensor(3.0, dtype=torch.float64), torch.tensor(3.0,
                                dtype=torch.float64))
    assert close.shape == tuple(torch_close.shape) == () and close.item() is torch_close.item()
    # (Python bools where PyTorch gives them: allclose, equal)
    assert type(np.allclose(t, VALUES)) is type(torch.allclose(torch.tensor(1.0),
                                                                 torch.tensor(1.0))) is bool
    assert type(np.array_equal(t, VALUES)) is bool


@pytest.mark.parametrize("call", [
    "np.isnan(s)", "np.signbit(s)", "np.isfinite(s)", "np.gcd(i, 6)", "np.left_shift(i, 1)",
    "np.add.reduce(v)", "np.maximum.reduce(v)", "np.logical_and.reduce(v)",
])
def test_numpys_ufuncs_on_a_tensors_data_give_0d_tensors(call):
    # (they gave NumPy scalars: np.isnan(s) an np.bool_ where tnp.isnan(s) is a Tensor)
    data = {"s": np.asarray(2.0), "i": np.asarray(4), "v": np.array([1.0, 2.0])}
    tensors = {"s": tnp.tensor(2.0, requires_grad=True), "i": tnp.tensor(4),
               "v": tnp.tensor([1.0, 2.0])}
    expected = eval(call, {"np": np, **data})
    result = eval(call, {"np": np, **tensors})
    _same_type_and_values(result, [expected], [Tensor])
    assert not result.requires_grad


def test_tnp_and_numpys_predicates_agree_on_0d():
    s = tnp.tensor(np.nan, requires_grad=True)
    for name in ("isnan", "isinf", "isfinite", "signbit"):
        ours, numpys = getattr(tnp, name)(s), getattr(np, name)(s)
        assert type(ours) is type(numpys) is Tensor
        assert ours.shape == numpys.shape == () and ours.item() == numpys.item()


def test_results_stay_in_the_tensors_library():
    torch = pytest.importorskip("torch")
    t = tnp.tensor(torch.tensor([0.0, 3.0, float("inf")]), requires_grad=True)
    for result in (np.count_nonzero(t), tnp.count_nonzero(t), np.isposinf(t),
                   np.isclose(t[1], 3.0), tnp.isclose(t[1], 3.0), np.nonzero(t)[0],
                   np.isnan(t[0])):
        assert type(result) is Tensor and not result.requires_grad
        assert isinstance(array_below(result), torch.Tensor)


def test_an_array_given_as_out_is_returned_itself():
    # (np.isposinf(t, out=o) gave a new Tensor, not o, as NumPy and PyTorch return out)
    t = tnp.tensor([1.0, np.inf], requires_grad=True)
    for fn in (np.isposinf, tnp.isposinf, np.isnan):
        out = np.zeros(2, bool)
        assert fn(t, out=out) is out
    np.testing.assert_array_equal(out, [False, False])
    out = np.zeros(2, bool)
    np.isposinf(t, out=out)
    np.testing.assert_array_equal(out, [False, True])


def test_readers_under_jit_and_vmap_are_unchanged():
    x = np.array([[0.0, np.inf], [2.0, 3.0]])
    assert type(tnp.jit(tnp.count_nonzero)(x)) is np.ndarray      # a traced result: NumPy's
    assert tnp.jit(tnp.count_nonzero)(x) == np.count_nonzero(x)
    np.testing.assert_array_equal(tnp.vmap(tnp.count_nonzero)(x), [1, 2])
    np.testing.assert_array_equal(tnp.jit(tnp.isposinf)(x), np.isposinf(x))
    np.testing.assert_array_equal(tnp.vmap(lambda r: tnp.isclose(r, 2.0))(x),
                                  np.isclose(x, 2.0))
    with pytest.raises(ConcretizationError, match="count_nonzero"):
        tnp.jit(np.count_nonzero)(x)
    with pytest.raises(ConcretizationError, match="nonzero"):
        tnp.jit(tnp.flatnonzero)(x)


def test_no_float_result_of_a_tensor_with_grad_comes_back_without_it():
    # readers' results are integers or booleans; a ufunc method with a float result on a
    # tensor that requires grad raises rather than give a Tensor without grad
    t = tnp.tensor([1.0, 2.0], requires_grad=True)
    for reader in (np.count_nonzero, np.isposinf, np.flatnonzero, np.isnan):
        assert np.asarray(reader(t)).dtype.kind in "biu"
    for call in (np.add.reduce, np.maximum.accumulate, lambda v: np.add.outer(v, v)):
        with pytest.raises(TensorNotSupportedError, match="numpy"):
            call(t)
    y = np.sum(t * tnp.isclose(t, 1.0))         # a mask from a reader: a constant factor
    y.backward()
    np.testing.assert_array_equal(np.asarray(t.grad), [1.0, 0.0])


# ---- dtype= (and casting=) of the ufunc-like functions, as NumPy's -------------------------
#
# lowering.ufunc_keywords refused any dtype=; given the ufunc's operands it now converts them
# to the dtypes of the loop NumPy runs (ufunc.resolve_dtypes), so the ufunc computes in that
# dtype, differentiably, and NumPy's refusals come with NumPy's text.

F64, I8, C128 = np.array([1.5, -2.5]), np.array([1, 2], np.int8), np.array([1.0 + 1.0j])
DTYPE_CALLS = [
    "add(f, f, dtype=np.float32)", "add(i, i, dtype=np.float64)", "add(f, 1, dtype='f4')",
    "add(f, f, dtype=np.int64)", "add(f, f, dtype=np.int64, casting='unsafe')",
    "add(c, c, dtype=np.float64)", "add(f, f, dtype=np.float32, casting='safe')",
    "add(f, f, dtype=np.float64, casting='no')", "add(f, f, dtype=np.complex128)",
    "add(i, 300, dtype=np.int8)", "add(1, 2, dtype=np.float32)", "add(i, f, casting='no')",
    "subtract(i, 1, dtype=np.uint8, casting='unsafe')", "multiply(f, 2.5, dtype=np.float16)",
    "divide(i, i, dtype=np.float32)", "divide(i, i, dtype=np.int8)",
    "power(f, 2, dtype=np.float32)", "float_power(f, f, dtype=np.float32)",
    "maximum(f, i, dtype=np.float32)", "minimum(i, i, dtype=np.int16)",
    "negative(f, dtype=np.float32)", "positive(i, dtype=np.float64)",
    "conj(c, dtype=np.complex64)", "abs(c, dtype=np.float64)", "abs(c, dtype=np.complex64)",
    "sin(i, dtype=np.float32)", "sin(f, dtype=np.int64)", "exp(i, dtype=np.float16)",
    "sqrt(f, dtype=np.complex128)", "less(f, f, dtype=bool)", "less(f, f, dtype=np.float64)",
    "less(i, 300, dtype=bool)", "equal(f, 1.5, dtype=bool)",
]


def _outcome(call: str, namespace):
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = eval(call, {"np": np, "f": F64, "i": I8, "c": C128,
                                 **{name: getattr(namespace, name) for name in (
                                     "add", "subtract", "multiply", "divide", "power",
                                     "float_power", "maximum", "minimum", "negative",
                                     "positive", "conj", "abs", "sin", "exp", "sqrt", "less",
                                     "equal")}})
    except Exception as error:                          # noqa: BLE001 (compared below)
        return error
    return np.asarray(result)


@pytest.mark.parametrize("call", DTYPE_CALLS)
def test_ufunc_dtype_and_casting_as_numpys(call):
    expected, got = _outcome(call, np), _outcome(call, tnp)
    if isinstance(expected, Exception):
        builtin = next(c for c in type(expected).__mro__ if c.__module__ == "builtins")
        assert isinstance(got, TiduError) and isinstance(got, builtin), got
        name = call.split("(")[0]
        assert str(got) == f"{name}: {expected}"        # NumPy's text, naming the function
        return
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_ufunc_dtype_of_an_eager_tensor_differentiates_as_pytorch():
    torch = pytest.importorskip("torch")
    t = tnp.tensor(F64, requires_grad=True)
    for y in (np.multiply(t, tnp.sin(t), dtype=np.float32),
              tnp.multiply(t, tnp.sin(t), dtype=np.float32)):
        assert type(y) is Tensor and y.dtype == np.float32 and y.requires_grad
        t.grad = None
        tnp.sum(y ** 2).backward()
        x = torch.tensor(F64, requires_grad=True)
        torch.sum((x.float() * torch.sin(x).float()) ** 2).backward()
        assert t.grad.dtype == np.float64
        np.testing.assert_allclose(np.asarray(t.grad), x.grad.numpy(), rtol=1e-6)


def test_ufunc_dtype_gradient_against_finite_differences_and_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = np.array([0.3, -1.2, 2.0], np.float32)

    def f(v):                       # computed in float64 from float32 values
        return tnp.sum(tnp.sin(v, dtype=np.float64) * tnp.exp(v, dtype=np.float64)
                       + tnp.add(v, 1, dtype=np.float64) ** 2)

    gradient = tnp.grad(f)(x)
    assert gradient.dtype == np.float32
    eps, x64 = 1e-6, x.astype(np.float64)
    fd = [(np.sum(np.sin(x64 + eps * e) * np.exp(x64 + eps * e) + (x64 + eps * e + 1) ** 2)
           - np.sum(np.sin(x64 - eps * e) * np.exp(x64 - eps * e) + (x64 - eps * e + 1) ** 2))
          / (2 * eps) for e in np.eye(3)]
    np.testing.assert_allclose(gradient, fd, rtol=1e-5)
    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    try:
        expected = jax.grad(lambda v: jnp.sum(jnp.sin(v.astype(jnp.float64))
                                              * jnp.exp(v.astype(jnp.float64))
                                              + (v.astype(jnp.float64) + 1) ** 2))(x)
    finally:
        jax.config.update("jax_enable_x64", previous)
    np.testing.assert_allclose(gradient, np.asarray(expected), rtol=1e-6)
    np.testing.assert_allclose(tnp.jit(tnp.grad(f))(x), gradient, rtol=1e-6)


def test_ufunc_dtype_under_jit_and_vmap():
    x = np.array([[1.5, -2.5], [0.5, 4.0]])
    for transform in (tnp.jit, tnp.vmap):
        got = transform(lambda v: tnp.add(v, 1, dtype=np.float32))(x)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, np.add(x, 1, dtype=np.float32))
    got = tnp.jit(lambda v: np.multiply(v, v, dtype=np.float16))(x)    # NumPy's dispatch
    np.testing.assert_array_equal(got, np.multiply(x, x, dtype=np.float16))
    with pytest.raises(TensorTypeError, match="^add: Cannot cast ufunc 'add' input 0"):
        tnp.jit(lambda v: tnp.add(v, v, dtype=np.int64))(x)


def test_an_unsafe_cast_to_integers_carries_no_derivative_as_in_pytorch():
    # (the integer values are constants: the product's gradient is them, never a silent
    # derivative through the cast; an integer result itself is refused by grad)
    x = np.array([1.5, 2.5])
    gradient = tnp.grad(lambda v: tnp.sum(v * tnp.add(v, v, dtype=np.int64, casting="unsafe")))(x)
    np.testing.assert_array_equal(gradient, np.add(x, x, dtype=np.int64, casting="unsafe"))
    with pytest.raises(FunctionalError, match="real floating point"):
        tnp.grad(lambda v: tnp.sum(tnp.add(v, v, dtype=np.int64, casting="unsafe")))(x)
    t = tnp.tensor(x, requires_grad=True)
    assert not np.add(t, t, dtype=np.int64, casting="unsafe").requires_grad


def test_ufuncs_that_do_not_pass_their_operands_still_refuse_dtype():
    # (mathfuncs' and products' ufuncs: not converted yet, a clear refusal as before)
    with pytest.raises(TensorNotSupportedError, match="^sinh: dtype= "):
        tnp.sinh(F64, dtype=np.float32)
    with pytest.raises(TensorTypeError, match="^add: dtype=object for a tensor"):
        tnp.add(tnp.tensor(F64, requires_grad=True), 1.0, dtype=object)


# ---- cumulative_sum / cumulative_prod: errors name them; a 1-tuple axis as NumPy 2.4's ------

M = np.arange(1.0, 7.0).reshape(2, 3)


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
@pytest.mark.parametrize("x, axis", [(M, (0,)), (M, (-1,)), (M, (np.int8(1),)),
                                     (np.array(2.0), (0,)), (np.array(2.0), (-1,)),
                                     (np.array(2.0), 0), (np.array(2.0), None)])
def test_cumulative_axis_as_numpys(name, x, axis):
    # (a 1-tuple axis, which NumPy 2.4 takes, was "cumsum: axis must be an integer")
    expected = getattr(np, name)(x, axis=axis)
    for value in (x, tnp.tensor(x, requires_grad=True)):
        got = getattr(tnp, name)(value, axis=axis)
        np.testing.assert_array_equal(np.asarray(tnp.stop_gradient(got)), expected)
        assert np.shape(got) == expected.shape
    got = getattr(np, name)(tnp.tensor(x, requires_grad=True), axis=axis)   # NumPy's dispatch
    np.testing.assert_array_equal(np.asarray(tnp.stop_gradient(got)), expected)


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
@pytest.mark.parametrize("x, axis", [(M, 5), (np.array(2.0), 1), (M, 1.5), (M, (0, 1)),
                                     (M, ()), (M, (1.0,)), (M, [0]), (M, None)])
def test_cumulative_errors_name_the_function_called(name, x, axis):
    # (they named cumsum / cumprod, the scans cumulative_sum / cumulative_prod are made of)
    with pytest.raises(Exception) as numpys:
        getattr(np, name)(x, axis=axis)
    with pytest.raises(TiduError, match=f"^{name}: ") as ours:
        getattr(tnp, name)(x, axis=axis)
    builtin = next(c for c in type(numpys.value).__mro__ if c.__module__ == "builtins")
    assert isinstance(ours.value, builtin)


def test_cumulative_of_a_1_tuple_axis_with_include_initial_and_its_gradient():
    # NumPy 2.4 fails here (TypeError: list indices must be integers...), by accident: tnp
    # gives what axis=0 gives
    x = np.array([2.0, 3.0, 4.0])
    np.testing.assert_array_equal(tnp.cumulative_prod(x, axis=(0,), include_initial=True),
                                  np.cumulative_prod(x, axis=0, include_initial=True))
    gradient = tnp.grad(lambda v: tnp.sum(tnp.cumulative_prod(v, axis=(0,))))(x)
    np.testing.assert_allclose(gradient, [1 + 3 + 12, 2 + 8, 6])
    assert float(tnp.grad(lambda s: tnp.cumulative_sum(s, axis=(0,))[0])(2.0)) == 1.0


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_amax_and_amin_errors_name_them(name):
    """They were max and min themselves, so their errors said max and min."""
    operation = "maximum" if name == "amax" else "minimum"
    for call in (getattr(tnp, name), getattr(np, name)):
        with pytest.raises(TiduError, match=f"^{name}: zero-size array to reduction "
                                            f"operation {operation}"):
            call(tnp.tensor(np.zeros(0), requires_grad=True))
    with pytest.raises(TiduError, match=f"^{name}: axis 5"):
        getattr(tnp, name)(np.zeros(3), axis=5)
    x = np.array([1.0, 3.0, 3.0])
    np.testing.assert_array_equal(tnp.grad(lambda v: getattr(tnp, name)(v))(x),
                                  tnp.grad(lambda v: getattr(tnp, name[1:])(v))(x))
