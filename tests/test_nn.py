"""``primitives.tensor.nn`` against ``jax.nn`` (float64) and central differences.

Values and gradients agree with ``jax.nn`` on ordinary points, at the kinks
(JAX's derivative conventions: ``relu'(0) = 0``...), and at ±800 (stability);
every function works under ``grad``, ``jit(grad)``, ``vmap`` and on the eager
``Tensor``; ``one_hot`` takes traced labels under ``jit`` and ``vmap``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import nn
from primitives.tensor.errors import TensorAxisError, TensorShapeError, TensorTypeError
from tidu import TiduError

from tensor_helpers import numeric_grad

jax = pytest.importorskip("jax")
jnp = jax.numpy

# name -> (ours, jax's); keyword arguments fixed where the function takes them
ELEMENTWISE = {
    "relu": (nn.relu, lambda x: jax.nn.relu(x)),
    "relu6": (nn.relu6, lambda x: jax.nn.relu6(x)),
    "sigmoid": (nn.sigmoid, lambda x: jax.nn.sigmoid(x)),
    "log_sigmoid": (nn.log_sigmoid, lambda x: jax.nn.log_sigmoid(x)),
    "softplus": (nn.softplus, lambda x: jax.nn.softplus(x)),
    "soft_sign": (nn.soft_sign, lambda x: jax.nn.soft_sign(x)),
    "silu": (nn.silu, lambda x: jax.nn.silu(x)),
    "swish": (nn.swish, lambda x: jax.nn.swish(x)),
    "gelu": (nn.gelu, lambda x: jax.nn.gelu(x)),
    "gelu_exact": (lambda x: nn.gelu(x, approximate=False),
                   lambda x: jax.nn.gelu(x, approximate=False)),
    "elu": (nn.elu, lambda x: jax.nn.elu(x)),
    "elu_alpha": (lambda x: nn.elu(x, alpha=0.5), lambda x: jax.nn.elu(x, alpha=0.5)),
    "celu": (nn.celu, lambda x: jax.nn.celu(x)),
    "celu_alpha": (lambda x: nn.celu(x, alpha=2.0), lambda x: jax.nn.celu(x, alpha=2.0)),
    "selu": (nn.selu, lambda x: jax.nn.selu(x)),
    "leaky_relu": (nn.leaky_relu, lambda x: jax.nn.leaky_relu(x)),
    "leaky_relu_slope": (lambda x: nn.leaky_relu(x, 0.2), lambda x: jax.nn.leaky_relu(x, 0.2)),
    "hard_tanh": (nn.hard_tanh, lambda x: jax.nn.hard_tanh(x)),
    "hard_sigmoid": (nn.hard_sigmoid, lambda x: jax.nn.hard_sigmoid(x)),
    "hard_silu": (nn.hard_silu, lambda x: jax.nn.hard_silu(x)),
    "hard_swish": (nn.hard_swish, lambda x: jax.nn.hard_swish(x)),
    "mish": (nn.mish, lambda x: jax.nn.mish(x)),
    "squareplus": (nn.squareplus, lambda x: jax.nn.squareplus(x)),
    "sparse_plus": (nn.sparse_plus, lambda x: jax.nn.sparse_plus(x)),
    "tanh": (nn.tanh, lambda x: jax.nn.tanh(x)),
}

# ordinary points, the kinks of every function above, and large magnitudes
POINTS = np.array([-800.0, -40.0, -6.5, -3.0, -1.7, -1.0, -0.3, 0.0, 0.4, 1.0, 1.3, 3.0, 5.9,
                   6.0, 7.2, 40.0, 800.0])
SMOOTH_POINTS = np.array([-6.5, -1.7, -0.3, 0.4, 1.3, 2.2, 5.3])   # away from every kink


def jax_value_and_grad(f, x):
    with jax.enable_x64(True):
        value = np.asarray(f(jnp.asarray(x)))
        grad = np.asarray(jax.grad(lambda v: jnp.sum(f(v)))(jnp.asarray(x)))
    return value, grad


def ours_grad(f, x):
    return tnp.grad(lambda v: tnp.sum(f(v)))(x)


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_values_and_gradients_match_jax(name):
    ours, theirs = ELEMENTWISE[name]
    value, grad = jax_value_and_grad(theirs, POINTS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no overflow warnings at ±800 either
        got = ours(POINTS)
        got_grad = ours_grad(ours, POINTS)
    # atol: gelu's tanh form cancels (1 + tanh(...)) in its far left tail, in JAX too, and
    # tanh' = 1 - tanh^2 for large |x|: those few digits depend on the tanh implementation
    np.testing.assert_allclose(got, value, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(got_grad, grad, rtol=1e-12, atol=1e-14)
    assert np.all(np.isfinite(got_grad))


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_gradients_match_finite_differences(name):
    ours, _ = ELEMENTWISE[name]
    np.testing.assert_allclose(ours_grad(ours, SMOOTH_POINTS),
                               numeric_grad(lambda v: np.sum(ours(v)), SMOOTH_POINTS),
                               rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_under_every_front_end(name):
    ours, theirs = ELEMENTWISE[name]
    x = SMOOTH_POINTS
    value, grad = jax_value_and_grad(theirs, x)
    np.testing.assert_allclose(tnp.jit(ours)(x), value, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(tnp.jit(tnp.grad(lambda v: tnp.sum(ours(v))))(x), grad,
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tnp.grad(tnp.jit(lambda v: tnp.sum(ours(v))))(x), grad,
                               rtol=1e-12, atol=1e-14)
    # per-example derivatives through vmap(grad) of the scalar function
    np.testing.assert_allclose(tnp.vmap(tnp.grad(ours))(x), grad, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tnp.vmap(ours)(x.reshape(-1, 1))[:, 0], value, rtol=1e-13,
                               atol=1e-14)
    t = tnp.tensor(x, requires_grad=True)
    out = ours(t)
    assert isinstance(out, tnp.Tensor)
    np.testing.assert_allclose(out.data, value, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(tnp.sum(out).backward().grad(t), grad, rtol=1e-12, atol=1e-14)


def test_exact_gelu_without_the_special_module(monkeypatch):
    """The fallback erfc (a custom_jvp over SciPy's) when tnp's scipy.special is missing."""
    monkeypatch.setattr(nn, "_erfc", lambda: nn._erfc_fallback)
    _, theirs = ELEMENTWISE["gelu_exact"]
    exact = lambda v: nn.gelu(v, approximate=False)  # noqa: E731
    value, grad = jax_value_and_grad(theirs, POINTS)
    np.testing.assert_allclose(exact(POINTS), value, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(ours_grad(exact, POINTS), grad, rtol=1e-12, atol=1e-14)
    x = SMOOTH_POINTS
    _, grad = jax_value_and_grad(theirs, x)
    np.testing.assert_allclose(tnp.jit(tnp.grad(lambda v: tnp.sum(exact(v))))(x), grad,
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tnp.vmap(tnp.grad(exact))(x), grad, rtol=1e-12, atol=1e-14)
    with jax.enable_x64(True):
        want = np.asarray(jax.vmap(jax.grad(jax.grad(theirs)))(jnp.asarray(x)))
    np.testing.assert_allclose(tnp.vmap(tnp.grad(tnp.grad(exact)))(x), want, rtol=1e-10,
                               atol=1e-13)


def test_second_derivatives_match_jax():
    x = SMOOTH_POINTS
    for name in ("sigmoid", "softplus", "gelu", "gelu_exact", "silu", "elu", "mish"):
        ours, theirs = ELEMENTWISE[name]
        with jax.enable_x64(True):
            want = np.asarray(jax.vmap(jax.grad(jax.grad(theirs)))(jnp.asarray(x)))
        got = tnp.vmap(tnp.grad(tnp.grad(ours)))(x)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13, err_msg=name)


def test_kink_conventions():
    g = lambda f, x: float(tnp.grad(f)(np.float64(x)))  # noqa: E731
    assert g(nn.relu, 0.0) == 0.0
    assert g(nn.relu6, 0.0) == 0.0 and g(nn.relu6, 6.0) == 0.0 and g(nn.relu6, 3.0) == 1.0
    assert g(nn.leaky_relu, 0.0) == 1.0
    assert g(nn.elu, 0.0) == 1.0 and g(lambda v: nn.elu(v, 0.5), 0.0) == 0.5
    assert g(nn.hard_tanh, 1.0) == 1.0 and g(nn.hard_tanh, -1.0) == 1.0
    assert g(nn.sigmoid, 0.0) == 0.25                   # no kink at 0 from the stable form
    assert g(nn.softplus, 0.0) == 0.5


def test_nan_propagates_like_jax():
    x = np.array([np.nan])
    for name in ("relu", "relu6", "sigmoid", "softplus", "elu", "leaky_relu", "hard_tanh"):
        ours, theirs = ELEMENTWISE[name]
        with jax.enable_x64(True):
            want = np.asarray(theirs(jnp.asarray(x)))
        with np.errstate(invalid="ignore"):         # NumPy's logaddexp warns on NaN
            got = ours(x)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)


def test_stability_at_large_magnitudes():
    big = np.array([-800.0, 800.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(nn.softplus(big), [0.0, 800.0])
        np.testing.assert_array_equal(nn.sigmoid(big), [0.0, 1.0])
        np.testing.assert_array_equal(nn.log_sigmoid(big), [-800.0, 0.0])
        np.testing.assert_array_equal(ours_grad(nn.softplus, big), [0.0, 1.0])
        np.testing.assert_array_equal(ours_grad(nn.sigmoid, big), [0.0, 0.0])
        np.testing.assert_array_equal(ours_grad(nn.log_sigmoid, big), [1.0, 0.0])
    # sigmoid keeps its relative accuracy in the far tail (no 1 - tiny cancellation)
    np.testing.assert_allclose(nn.sigmoid(np.array([-30.0, -700.0])),
                               [1 / (1 + np.exp(30.0)), np.exp(-700.0)], rtol=1e-14)


def test_dtype_is_kept():
    x = np.linspace(-3, 3, 7).astype(np.float32)
    for name, (ours, _) in ELEMENTWISE.items():
        assert ours(x).dtype == np.float32, name
        assert ours_grad(ours, x).dtype == np.float32, name


# --- softmax, log_softmax, logsumexp -----------------------------------------------------

LOGITS = np.array([[1.0, -2.0, 0.5, 3.0], [800.0, 799.0, -800.0, 0.0], [0.1, 0.2, 0.3, 0.4]])


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_family_matches_jax(name, axis):
    ours = getattr(nn, name)
    theirs = getattr(jax.nn, name)
    weights = np.arange(12.0).reshape(3, 4) / 7 - 0.5
    with jax.enable_x64(True):
        value = np.asarray(theirs(jnp.asarray(LOGITS), axis=axis))
        grad = np.asarray(jax.grad(lambda v: jnp.sum(theirs(v, axis=axis) * weights))(
            jnp.asarray(LOGITS)))
    np.testing.assert_allclose(ours(LOGITS, axis=axis), value, rtol=1e-13, atol=1e-300)
    loss = lambda v: tnp.sum(ours(v, axis=axis) * weights)  # noqa: E731
    np.testing.assert_allclose(tnp.grad(loss)(LOGITS), grad, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(tnp.jit(tnp.grad(loss))(LOGITS), grad, rtol=1e-12, atol=1e-15)
    with jax.enable_x64(True):
        rows = np.asarray(theirs(jnp.asarray(LOGITS), axis=-1))
    np.testing.assert_allclose(tnp.vmap(lambda row: ours(row, axis=-1))(LOGITS), rows,
                               rtol=1e-13, atol=1e-300)
    small = LOGITS[[0, 2]]                    # moderate values: finite differences work
    np.testing.assert_allclose(
        tnp.grad(lambda v: tnp.sum(ours(v, axis=axis) * weights[[0, 2]]))(small),
        numeric_grad(lambda v: np.sum(ours(v, axis=axis) * weights[[0, 2]]), small),
        rtol=1e-6, atol=1e-8)


def test_log_softmax_with_minus_inf_logits():
    x = np.array([[2.0, -np.inf, 0.5], [-np.inf, 1.0, -np.inf]])
    w = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]])
    with jax.enable_x64(True):
        value = np.asarray(jax.nn.log_softmax(jnp.asarray(x)))
        grad = np.asarray(jax.grad(lambda v: jnp.sum(jax.nn.log_softmax(v) * w))(jnp.asarray(x)))
        soft_grad = np.asarray(jax.grad(lambda v: jnp.sum(jax.nn.softmax(v) * w))(jnp.asarray(x)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(nn.log_softmax(x), value)
        got = tnp.grad(lambda v: tnp.sum(tnp.where(w != 0, nn.log_softmax(v), 0.0) * w))(x)
    np.testing.assert_allclose(got, grad, rtol=1e-12)
    assert np.all(np.isfinite(got))
    np.testing.assert_array_equal(nn.softmax(x)[1], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(nn.softmax(v) * w))(x), soft_grad,
                               rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("kwargs", [{}, {"axis": 1}, {"axis": 0, "keepdims": True},
                                    {"axis": 1, "b": "b"}, {"axis": 1, "b": "b",
                                                            "return_sign": True},
                                    {"return_sign": True}])
def test_logsumexp_matches_jax(kwargs):
    a = np.array([[1.0, 2.0, -np.inf], [800.0, 0.0, 1.0], [-np.inf, -np.inf, -np.inf]])
    b = np.array([[1.0, -3.0, 2.0], [0.5, 0.0, 1.0], [1.0, 1.0, 1.0]])
    ours_kwargs = {k: (b if v == "b" else v) for k, v in kwargs.items()}
    with jax.enable_x64(True):
        want = jax.nn.logsumexp(jnp.asarray(a), **{k: (jnp.asarray(b) if v == "b" else v)
                                                   for k, v in kwargs.items()})
    with np.errstate(divide="ignore"):                 # log(0) for the row of -inf
        got = nn.logsumexp(a, **ours_kwargs)
    if kwargs.get("return_sign"):
        np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
        got, want = got[0], want[0]
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-13)
    finite = a[:2]
    b_finite = b[:2]
    f_kwargs = {k: (b_finite if v == "b" else v) for k, v in kwargs.items()}

    def total(v, module):
        out = module(v, **f_kwargs)
        return out[0].sum() if kwargs.get("return_sign") else out.sum()

    with jax.enable_x64(True):
        jf_kwargs = {k: (jnp.asarray(b_finite) if v == "b" else v) for k, v in kwargs.items()}
        grad = np.asarray(jax.grad(lambda v: (jax.nn.logsumexp(v, **jf_kwargs)[0]
                                              if kwargs.get("return_sign")
                                              else jax.nn.logsumexp(v, **jf_kwargs)).sum())(
            jnp.asarray(finite)))
    ours_total = lambda v: tnp.sum(nn.logsumexp(v, **f_kwargs)[0]  # noqa: E731
                                   if kwargs.get("return_sign") else nn.logsumexp(v, **f_kwargs))
    ours = tnp.grad(ours_total)(finite)
    if "b" in kwargs and not kwargs.get("return_sign"):
        # a row whose weighted sum is negative has the value NaN, and (unlike JAX's 0 from its
        # `where`) NaN derivatives: a NaN loss must not come with a harmless-looking gradient
        negative = np.sum(b_finite * np.exp(finite), axis=1) < 0
        assert negative.any() and np.isnan(ours[negative]).all()
        ours, grad = ours[~negative], grad[~negative]
    np.testing.assert_allclose(ours, grad, rtol=1e-12, atol=1e-300)


# --- one_hot -----------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [-1, 0, 1, -2])
def test_one_hot_matches_jax(axis):
    labels = np.array([[0, 3, -1], [2, 5, 1]])
    with jax.enable_x64(True):
        want = np.asarray(jax.nn.one_hot(jnp.asarray(labels), 4, axis=axis,
                                         dtype=jnp.float64))
    got = nn.one_hot(labels, 4, axis=axis)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)


def test_one_hot_with_traced_labels():
    labels = np.array([2, 0, 1])
    want = np.eye(3)[labels]
    f = tnp.jit(lambda y: nn.one_hot(y, 3))
    np.testing.assert_array_equal(f(labels), want)
    np.testing.assert_array_equal(f(np.array([1, 1, 0])), np.eye(3)[[1, 1, 0]])  # no retrace
    np.testing.assert_array_equal(tnp.vmap(lambda y: nn.one_hot(y, 3))(labels), want)
    np.testing.assert_array_equal(nn.one_hot(tnp.tensor(labels), 3).data, want)
    assert nn.one_hot(labels, 3, dtype=np.float32).dtype == np.float32

    # cross-entropy with integer labels: the gradient flows to the logits, not the labels
    logits = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0], [2.0, 2.0, 2.0]])

    def loss(z, y):
        return -tnp.mean(tnp.sum(nn.log_softmax(z) * nn.one_hot(y, 3), axis=-1))

    with jax.enable_x64(True):
        want_grad = np.asarray(jax.grad(lambda z: -jnp.mean(jnp.sum(
            jax.nn.log_softmax(z) * jax.nn.one_hot(labels, 3), axis=-1)))(jnp.asarray(logits)))
    np.testing.assert_allclose(tnp.grad(loss)(logits, labels), want_grad, rtol=1e-12)
    np.testing.assert_allclose(tnp.jit(tnp.grad(loss))(logits, labels), want_grad, rtol=1e-12)
    np.testing.assert_allclose(
        tnp.vmap(tnp.grad(loss), in_axes=(0, 0))(logits[:, None], labels[:, None])[:, 0],
        want_grad * 3, rtol=1e-12)


def test_one_hot_errors_name_the_function():
    with pytest.raises(TensorTypeError, match="one_hot"):
        nn.one_hot(np.array([1]), 2.5)
    with pytest.raises(TensorAxisError, match="one_hot"):
        nn.one_hot(np.array([1]), 3, axis=2)
    with pytest.raises(TiduError, match="one_hot"):
        tnp.jit(lambda n: nn.one_hot(np.array([1]), n))(np.array(3))


# --- the rest ----------------------------------------------------------------------------


def test_glu_matches_jax():
    x = np.array([[1.0, -2.0, 0.3, 4.0], [0.5, 0.5, -1.0, 2.0]])
    w = np.array([[1.0, 2.0], [-1.0, 0.5]])
    for axis in (-1, 0):
        with jax.enable_x64(True):
            value = np.asarray(jax.nn.glu(jnp.asarray(x), axis=axis))
            grad = np.asarray(jax.grad(
                lambda v: jnp.sum(jax.nn.glu(v, axis=axis) * (w if axis else w[:1, :1])))(
                jnp.asarray(x)))
        np.testing.assert_allclose(nn.glu(x, axis=axis), value, rtol=1e-13)
        np.testing.assert_allclose(
            tnp.grad(lambda v: tnp.sum(nn.glu(v, axis=axis) * (w if axis else w[:1, :1])))(x),
            grad, rtol=1e-12)
    with pytest.raises(TensorShapeError, match="glu"):
        nn.glu(np.ones(3))


@pytest.mark.parametrize("algorithm", ["fast", "stable"])
def test_standardize_matches_jax(algorithm):
    x = np.array([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]])
    w = np.array([[1.0, -1.0, 0.5], [2.0, 0.0, 1.0]])
    for axis in (-1, 0):
        with jax.enable_x64(True):
            value = np.asarray(jax.nn.standardize(jnp.asarray(x), axis=axis,
                                                  algorithm=algorithm))
            grad = np.asarray(jax.grad(lambda v: jnp.sum(jax.nn.standardize(
                v, axis=axis, algorithm=algorithm) * w))(jnp.asarray(x)))
        loss = lambda v: tnp.sum(nn.standardize(v, axis=axis, algorithm=algorithm) * w)  # noqa
        np.testing.assert_allclose(nn.standardize(x, axis=axis, algorithm=algorithm), value,
                                   rtol=1e-12)
        np.testing.assert_allclose(tnp.grad(loss)(x), grad, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(tnp.jit(tnp.grad(loss))(x), grad, rtol=1e-10, atol=1e-12)
    with pytest.raises(TiduError, match="standardize"):
        nn.standardize(x, algorithm="slow")


def test_inputs_that_are_lists_and_numbers():
    np.testing.assert_array_equal(nn.relu([-1.0, 2.0]), [0.0, 2.0])
    assert float(nn.sigmoid(0.0)) == 0.5
    np.testing.assert_array_equal(nn.one_hot([1, 0], 2), [[0.0, 1.0], [1.0, 0.0]])


def test_squareplus_and_its_derivative_hold_in_the_tails():
    """The plain formula lost both: at -800 in float32 the value cancelled to 0.1%, and at
    ±1e308 ``x**2`` overflowed, giving an infinite value at -1e308 and a derivative of 0.5
    at both ends. The exact derivative is ``(1 + x / sqrt(x**2 + 4)) / 2``."""
    def exact(x: float) -> tuple[float, float]:
        s = math.hypot(x, 2.0)
        value = x / 2 + s / 2 if x >= 0 else 1.0 / (s / 2 - x / 2)
        slope = (1 + x / s) / 2 if x >= 0 else 2.0 / (s * (s - x))
        return value, slope

    for x, dtype in [(-800.0, np.float32), (-1e300, np.float64), (1e300, np.float64),
                     (-1e308, np.float64), (1e308, np.float64), (-3.0, np.float32),
                     (0.0, np.float64), (2.5, np.float32)]:
        value, slope = exact(x)
        got = nn.squareplus(np.asarray(x, dtype))
        d = tnp.grad(nn.squareplus)(np.asarray(x, dtype))
        assert got.dtype == dtype and d.dtype == dtype
        np.testing.assert_allclose(got, value, rtol=2e-6, atol=1e-300, err_msg=str(x))
        np.testing.assert_allclose(d, slope, rtol=2e-6, atol=1e-300, err_msg=str(x))
