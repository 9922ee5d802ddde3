"""NumPy's array methods on tensors and traced values equal the tnp functions, with gradients."""

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import TensorTypeError

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [2.0, 1.0, 0.5]])

METHODS = {   # method call -> the NumPy method it matches
    "prod": lambda a: a.prod(axis=1), "std": lambda a: a.std(ddof=1),
    "var": lambda a: a.var(axis=0, keepdims=True), "cumsum": lambda a: a.cumsum(axis=1),
    "cumprod": lambda a: a.cumprod(), "ravel": lambda a: a.ravel(),
    "flatten": lambda a: a.flatten(), "diagonal": lambda a: a.diagonal(1),
    "trace": lambda a: a.trace(), "swapaxes": lambda a: a.swapaxes(0, 1),
    "repeat": lambda a: a.repeat(2, axis=0), "take": lambda a: a.take([2, 0], axis=1),
    "clip": lambda a: a.clip(-0.5, 1.0), "dot": lambda a: a.dot(a[0]),
    "round": lambda a: a.round(1), "conjugate": lambda a: a.conjugate(),
    "sum": lambda a: a.sum(axis=0), "mean": lambda a: a.mean(), "max": lambda a: a.max(1),
    "T": lambda a: a.T, "reshape": lambda a: a.reshape(9),
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_methods_match_numpy_and_differentiate(name):
    call = METHODS[name]
    expected = call(X)
    t = tnp.tensor(X, requires_grad=True)
    np.testing.assert_allclose(tnp.stop_gradient(call(t)), expected, rtol=1e-12)
    np.testing.assert_allclose(tnp.jit(call)(X), expected, rtol=1e-12)
    weights = np.arange(1.0, 1.0 + np.size(expected)).reshape(np.shape(expected))
    g_functional = tnp.grad(lambda a: tnp.sum(call(a) * weights))(X)
    g_eager = tnp.sum(call(t) * weights).backward().grad(t)
    if g_eager is None:                          # round: no gradient reaches t
        g_eager = np.zeros_like(X)
    np.testing.assert_allclose(g_eager, g_functional, rtol=1e-12)
    if name == "round":                          # piecewise constant: derivative 0
        assert not g_functional.any()
        return
    h = 1e-6
    direction = np.cos(np.arange(X.size)).reshape(X.shape)
    numeric = (np.sum(call(X + h * direction) * weights)
               - np.sum(call(X - h * direction) * weights)) / (2 * h)
    assert abs(np.sum(g_functional * direction) - numeric) < 1e-5 * max(1, abs(numeric))


def test_integer_methods_and_truth():
    t = tnp.tensor(X, requires_grad=True)
    assert t.argmax().tolist() == int(X.argmax())
    assert t.argmin(axis=1).tolist() == X.argmin(axis=1).tolist()
    assert t.argsort(axis=0).tolist() == X.argsort(axis=0).tolist()
    assert (t > 0).all().tolist() is False and (t > -2).all().tolist() is True
    assert (t > 1.9).any(axis=1).tolist() == [True, False, True]


@pytest.mark.parametrize("name", ["sort", "fill", "put", "resize"])
def test_in_place_methods_raise(name):
    for value in (tnp.tensor(X, requires_grad=True), tnp.tensor(X)):
        with pytest.raises(TensorTypeError, match=rf"\.{name}\(\).*immutable.*use .*tnp\."):
            getattr(value, name)(0)
    with pytest.raises(TensorTypeError, match="immutable"):
        tnp.grad(lambda a: getattr(a, name)(0))(X)
    assert tnp.sort(tnp.tensor(X), axis=1).tolist() == np.sort(X, axis=1).tolist()
