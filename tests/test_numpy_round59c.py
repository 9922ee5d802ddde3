"""Round 59c: four NumPy-compatibility defects of the tensor set, each with its test.

1. ``convolve`` (and ``correlate``, ``polymul``) multiplied the zero padding by an infinity
   of the other operand: NaN where NumPy, summing only the overlapping terms, has a number.
2. Reductions refused ``axis=0``/``axis=-1`` on a 0-d array where NumPy takes it (as
   ``axis=()``); they still refuse where NumPy refuses (``mean``, ``std``...).
3. Some functions returned a NumPy array for an eager ``Tensor`` input; now a ``Tensor``.
4. ``casting=``, ``order=`` and ``subok=`` of the ufunc-like functions were Python's
   ``TypeError``; NumPy's defaults are taken, anything else refused by name.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.errors import TensorAxisError, TensorNotSupportedError
from tidu import TiduError

RNG = np.random.default_rng(59)
MODES = ("full", "same", "valid")
SIZES = [(1, 1), (2, 1), (5, 3), (3, 5), (4, 4), (7, 2), (10, 4)]


# --- 1. convolve: only the overlapping terms are summed ------------------------------------


def test_convolve_example_of_the_report():
    assert np.array_equal(tnp.convolve([1.0, -1], [1.0, -np.inf]), [1.0, -np.inf, np.inf])
    assert np.array_equal(tnp.polymul([1.0, -1], [1.0, -np.inf]), [1.0, -np.inf, np.inf])


def _with_non_finite(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x[RNG.integers(x.size)] = RNG.choice([np.inf, -np.inf, np.nan])
    return x


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n, m", SIZES)
@pytest.mark.parametrize("function", ["convolve", "correlate"])
def test_real_values_with_infinities_and_nans_are_numpys(function, n, m, mode):
    for where_bad in ("a", "v", "both"):
        a, v = RNG.normal(size=n), RNG.normal(size=m)
        if where_bad in ("a", "both"):
            a = _with_non_finite(a)
        if where_bad in ("v", "both"):
            v = _with_non_finite(v)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = getattr(np, function)(a, v, mode)
            got = getattr(tnp, function)(a, v, mode)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n, m", SIZES)
@pytest.mark.parametrize("function", ["convolve", "correlate"])
def test_complex_values_with_infinities_and_nans(function, n, m, mode):
    """A complex product of infinities has no one value (NumPy's own ``dot`` and ``matmul``
    differ in which parts are NaN): NumPy's finite outputs are ours, its others are not
    finite in ours either."""
    for _ in range(3):
        a = RNG.normal(size=n) + 1j * RNG.normal(size=n)
        v = RNG.normal(size=m) + 1j * RNG.normal(size=m)
        a[RNG.integers(n)] = RNG.choice([np.inf, complex(1.0, -np.inf), np.nan])
        v[RNG.integers(m)] = RNG.choice([-np.inf, complex(np.nan, 1.0)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = getattr(np, function)(a, v, mode)
            got = getattr(tnp, function)(a, v, mode)
        finite = np.isfinite(expected)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-12, atol=1e-12)
        assert not np.isfinite(got[~finite]).any()


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_, np.float32])
def test_integer_boolean_and_single_precision_keep_numpys_dtype(dtype):
    a, v = (RNG.normal(size=7) * 4).astype(dtype), (RNG.normal(size=3) * 4).astype(dtype)
    for mode in MODES:
        expected, got = np.convolve(a, v, mode), tnp.convolve(a, v, mode)
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n, m", [(6, 3), (3, 6), (4, 4), (5, 1)])
def test_convolve_derivatives_match_jax_and_finite_differences(n, m, mode):
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    a, v = RNG.normal(size=n), RNG.normal(size=m)
    weights = RNG.normal(size=np.convolve(a, v, mode).shape)
    grads = tnp.grad(lambda a, v: tnp.sum(tnp.convolve(a, v, mode) * weights),
                     argnums=(0, 1))(a, v)
    expected = jax.grad(lambda a, v: jnp.sum(jnp.convolve(a, v, mode) * weights),
                        argnums=(0, 1))(a, v)
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # central differences in a (convolve is bilinear: exact up to rounding)
    h, fd = 1e-6, np.zeros(n)
    for i in range(n):
        e = np.zeros(n)
        e[i] = h
        fd[i] = (np.convolve(a + e, v, mode) - np.convolve(a - e, v, mode)) @ weights / (2 * h)
    np.testing.assert_allclose(grads[0], fd, rtol=1e-6, atol=1e-8)
    # complex: tidu's gradient is the conjugate of JAX's (the adjoint under Re<a, b>)
    ac, vc = a + 1j * RNG.normal(size=n), v + 1j * RNG.normal(size=m)
    grads = tnp.grad(lambda a, v: tnp.real(tnp.sum(tnp.convolve(a, v, mode) * weights)),
                     argnums=(0, 1))(ac, vc)
    expected = jax.grad(lambda a, v: jnp.real(jnp.sum(jnp.convolve(a, v, mode) * weights)),
                        argnums=(0, 1))(ac, vc)
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got, np.conj(want), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_convolve_under_jit_vmap_and_on_tensors(mode):
    a, v = _with_non_finite(RNG.normal(size=8)), _with_non_finite(RNG.normal(size=3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.convolve(a, v, mode)
        close = dict(rtol=1e-12, atol=1e-12, equal_nan=True)
        np.testing.assert_allclose(tnp.jit(lambda a, v: tnp.convolve(a, v, mode))(a, v),
                                   expected, **close)
        batched = tnp.vmap(lambda a: tnp.convolve(a, v, mode))(np.stack([a, a[::-1]]))
        np.testing.assert_allclose(batched[1], np.convolve(a[::-1], v, mode), **close)
        t = tnp.tensor(RNG.normal(size=8), requires_grad=True)
        y = tnp.convolve(t, np.array([1.0, np.inf, 2.0]), mode)
        assert isinstance(y, tnp.Tensor)
        np.testing.assert_allclose(np.asarray(y.detach()),
                                   np.convolve(np.asarray(t.detach()), [1.0, np.inf, 2.0],
                                               mode), **close)


# --- 2. an axis of a 0-d array: taken exactly where NumPy takes it --------------------------

AXIS_FUNCTIONS = ["sum", "prod", "nansum", "nanprod", "cumsum", "cumprod", "nancumsum",
                  "nancumprod", "any", "all", "max", "min", "amax", "amin", "ptp", "mean",
                  "average", "var", "std", "median", "nanmean", "nanvar", "nanstd", "nanmax",
                  "nanmin", "nanmedian", "argmax", "argmin", "nanargmax", "nanargmin", "sort",
                  "argsort"]


def _outcome(function, x, axis, keepdims: bool):
    """``("ok", result)`` or ``("error", exception)`` of ``function(x, axis=axis)``."""
    kwargs = {"axis": axis}
    if keepdims:
        kwargs["keepdims"] = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return "ok", function(x, **kwargs)
    except (TypeError, ValueError) as error:       # (NumPy's AxisError is a ValueError)
        return "error", error


@pytest.mark.parametrize("name", AXIS_FUNCTIONS)
@pytest.mark.parametrize("axis", [0, -1, 1, -2, (0,), np.int64(0)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_axis_of_a_0d_array_as_numpy(name, axis, keepdims):
    for x in (np.array(2.5), np.array(True), np.array(-3)):
        expected = _outcome(getattr(np, name), x, axis, keepdims)
        if expected[0] == "error" and "keepdims" in str(expected[1]):
            continue                                # (NumPy's function has no keepdims)
        got = _outcome(getattr(tnp, name), x, axis, keepdims)
        if expected[0] == "ok":
            assert got[0] == "ok", (name, axis, x.dtype, got[1])
            want, value = np.asarray(expected[1]), np.asarray(got[1])
            assert value.shape == want.shape and value.dtype == want.dtype, (name, axis)
            np.testing.assert_array_equal(value, want)
        else:
            assert got[0] == "error", (name, axis, x.dtype, "NumPy refuses, tidu took it")
            assert isinstance(got[1], TiduError), got[1]
            assert str(got[1]).startswith(name), got[1]     # (amax's: amax, since round 61)


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "nansum", "nanmean", "ptp"])
def test_axis_of_a_0d_array_differentiates(name):
    function = getattr(tnp, name)
    expected = 0.0 if name == "ptp" else (1.0 if name != "prod" else 1.0)
    assert tnp.grad(lambda x: function(x, axis=0))(np.array(2.0)) == expected
    assert tnp.jit(lambda x: function(x, axis=-1))(np.array(2.0)) == getattr(np, name)(
        np.array(2.0), axis=-1)
    t = tnp.tensor(2.0, requires_grad=True)
    y = function(t, axis=-1, keepdims=True)
    assert y.shape == ()
    y.backward()
    assert t.grad == expected
    with pytest.raises(TensorAxisError, match=name):
        function(np.array(2.0), axis=(0,))


# --- 3. an eager Tensor in gives Tensors out (integer and boolean ones without grad) --------

X = np.array([3.0, 1.0, 2.0, 0.5, 2.0])
EDGES = np.array([0.0, 1.5, 2.5, 4.0])
TENSOR_OUT = {     # name: a function of x (its data X), whose every result is an array
    "histogram": lambda x: tnp.histogram(x, 3),
    "histogram given edges": lambda x: tnp.histogram(x, EDGES),
    "histogram2d": lambda x: tnp.histogram2d(x, x, 2),
    "histogramdd": lambda x: tnp.histogramdd(tnp.stack([x, x], axis=1), 2),
    "frexp": tnp.frexp,
    "modf": tnp.modf,
    "searchsorted a": lambda x: tnp.searchsorted(tnp.sort(x), 1.7),
    "searchsorted v": lambda x: tnp.searchsorted(EDGES, x, side="right"),
    "digitize": lambda x: tnp.digitize(x, EDGES),
    "digitize decreasing": lambda x: tnp.digitize(x, EDGES[::-1]),
    "bincount": lambda x: tnp.bincount(tnp.astype(tnp.floor(x), np.intp)),
    "argmax": tnp.argmax,
    "argmin": tnp.argmin,
    "nanargmax": tnp.nanargmax,
    "argsort": tnp.argsort,
    "argpartition": lambda x: tnp.argpartition(x, 2),
    "unique extras": lambda x: tnp.unique(x, return_index=True, return_inverse=True,
                                          return_counts=True),
    "unique_counts": tnp.unique_counts,
    "intersect1d indices": lambda x: tnp.intersect1d(x, EDGES[1:] - 0.5,
                                                     return_indices=True),
    "where of one argument": lambda x: tnp.where(x > 1.0),
    "isin": lambda x: tnp.isin(x, EDGES),
    "isnan": tnp.isnan,
    "sign": tnp.sign,
}


def _arrays(result) -> list:
    """The arrays of ``result`` (histogramdd's edges are a list in its tuple)."""
    if not isinstance(result, (tuple, list)):
        return [result]
    return [array for item in result for array in _arrays(item)]


@pytest.mark.parametrize("name", list(TENSOR_OUT))
@pytest.mark.parametrize("requires_grad", [False, True])
def test_a_tensor_in_gives_tensors_out(name, requires_grad):
    function = TENSOR_OUT[name]
    expected = _arrays(function(X))
    got = _arrays(function(tnp.tensor(X, requires_grad=requires_grad)))
    assert len(got) == len(expected)
    for value, want in zip(got, expected):
        assert isinstance(value, tnp.Tensor), (name, type(value))
        if value.dtype.kind in "biu":
            assert not value.requires_grad, name
        assert value.dtype == np.asarray(want).dtype and value.shape == np.shape(want)
        np.testing.assert_array_equal(np.asarray(value.detach()), want)


@pytest.mark.parametrize("name", ["histogram", "frexp", "searchsorted v", "digitize",
                                  "argmax", "argsort", "isin"])
def test_integer_results_under_grad_and_jit_unchanged(name):
    function = TENSOR_OUT[name]
    expected = _arrays(function(X))

    def integer_parts(x):
        return [r for r in _arrays(function(x)) if np.dtype(r.dtype).kind in "biu"]
    under_jit = tnp.jit(integer_parts)(X)
    seen = []       # (integer traced values carry no gradient: their data may be read)
    tnp.grad(lambda x: (seen.extend(np.asarray(r) for r in integer_parts(x)), tnp.sum(x))[1])(X)
    want = [w for w in expected if np.asarray(w).dtype.kind in "biu"]
    for values in (under_jit, seen):
        assert len(values) == len(want)
        for value, w in zip(values, want):
            assert type(value) is np.ndarray
            np.testing.assert_array_equal(value, w)


def test_stop_gradient_of_a_tensor_is_a_tensor_without_grad():
    t = tnp.tensor([1.0, -2.0], requires_grad=True)
    constant = tnp.stop_gradient(t)
    assert isinstance(constant, tnp.Tensor) and not constant.requires_grad
    y = tnp.sum(t * constant)
    np.testing.assert_array_equal(y.backward().grad(t), [1.0, -2.0])   # d/dt only through t
    assert type(tnp.stop_gradient(np.ones(2))) is np.ndarray


# --- 4. casting=, order=, subok= of the ufunc-like functions ---------------------------------

UFUNC_CALLS = {   # name: (tnp function, its arguments)
    "add": (tnp.add, (np.array([1.0, 2.0]), 3.0)),
    "subtract": (tnp.subtract, (np.array([1.0, 2.0]), np.array(0.5))),
    "multiply": (tnp.multiply, (np.array([1.0, 2.0]), np.array([3.0, 4.0]))),
    "divide": (tnp.divide, (np.array([1.0, 2.0]), 4.0)),
    "power": (tnp.power, (np.array([1.0, 2.0]), 3)),
    "maximum": (tnp.maximum, (np.array([1.0, 2.0]), 1.5)),
    "negative": (tnp.negative, (np.array([1.0, -2.0]),)),
    "abs": (tnp.abs, (np.array([1.0, -2.0]),)),
    "exp": (tnp.exp, (np.array([1.0, -2.0]),)),
    "sin": (tnp.sin, (np.array([1.0, -2.0]),)),
    "less": (tnp.less, (np.array([1.0, -2.0]), 0.0)),
    "sinh": (tnp.sinh, (np.array([1.0, -2.0]),)),
    "hypot": (tnp.hypot, (np.array([1.0, -2.0]), 2.0)),
    "isnan": (tnp.isnan, (np.array([1.0, np.nan]),)),
    "logical_and": (tnp.logical_and, (np.array([True, False]), True)),
    "sign": (tnp.sign, (np.array([1.0, -2.0]),)),
    "copysign": (tnp.copysign, (np.array([1.0, -2.0]), -1.0)),
    "frexp": (tnp.frexp, (np.array([1.0, -2.0]),)),
    "modf": (tnp.modf, (np.array([1.5, -2.25]),)),
    "clip": (tnp.clip, (np.array([1.0, -2.0]), -1.0, 0.5)),
    "matmul": (tnp.matmul, (np.ones((2, 3)), np.ones(3))),
}
# those whose operands reach lowering.ufunc_keywords, which takes dtype= and casting= as NumPy's
NUMPYS_CASTING = {"add", "subtract", "multiply", "divide", "power", "maximum", "negative", "abs",
                  "exp", "sin", "less"}
NO_OP = [{"casting": "same_kind"}, {"casting": "unsafe"}, {"order": "K"}, {"subok": True},
         {"casting": "same_kind", "order": "K", "subok": True}]
REFUSED = [{"casting": "no"}, {"casting": "safe"}, {"casting": "equiv"}, {"order": "C"},
           {"order": "F"}, {"subok": False}, {"signature": "dd->d"}]


@pytest.mark.parametrize("name", list(UFUNC_CALLS))
def test_ufunc_keywords_at_numpys_defaults_are_taken(name):
    function, args = UFUNC_CALLS[name]
    expected = _arrays(getattr(np, name)(*args))
    for keywords in NO_OP:
        got = _arrays(function(*args, **keywords))
        for value, want in zip(got, expected):
            assert np.asarray(value).dtype == np.asarray(want).dtype
            np.testing.assert_array_equal(value, want)
    t = tnp.tensor(args[0], requires_grad=args[0].dtype.kind == "f")
    numpy_function = getattr(np, name)          # NumPy's dispatch passes the keywords on
    got = _arrays(numpy_function(t, *args[1:], casting="same_kind", order="K"))
    for value, want in zip(got, expected):
        np.testing.assert_array_equal(np.asarray(tnp.stop_gradient(value)), want)


@pytest.mark.parametrize("name", list(UFUNC_CALLS))
@pytest.mark.parametrize("keywords", REFUSED, ids=lambda k: ",".join(f"{a}={b}"
                                                                  for a, b in k.items()))
def test_other_ufunc_keywords_are_refused_by_name(name, keywords):
    function, args = UFUNC_CALLS[name]
    [keyword] = keywords
    if keyword == "casting" and name in NUMPYS_CASTING:
        # (round 61: these take casting= as NumPy does, where this test held a refusal:
        # NumPy's result, or NumPy's refusal with its text, naming the function)
        try:
            expected = getattr(np, name)(*args, **keywords)
        except TypeError as error:
            with pytest.raises(TiduError, match=re.escape(f"{name}: {error}")):
                function(*args, **keywords)
            return
        got = function(*args, **keywords)
        assert np.asarray(got).dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
        return
    with pytest.raises(TensorNotSupportedError, match=rf"^{name}: {keyword}="):
        function(*args, **keywords)


def test_an_unknown_keyword_is_a_type_error_naming_the_function():
    with pytest.raises(TypeError, match="add.. got an unexpected keyword argument 'castin'") \
            as caught:
        tnp.add(1.0, 2.0, castin="same_kind")
    assert isinstance(caught.value, TiduError)
