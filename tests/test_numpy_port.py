"""NumPy code runs unchanged with ``primitives.tensor`` in place of ``numpy``, and differentiates.

Each function below is written once, against a module ``np`` it is given, in the
style of real NumPy code (methods, operators, ``linalg``, ``fft``, reductions,
stacking). Called with NumPy it is the reference; called with ``primitives.tensor``
its value must agree, and its gradient (reverse mode, functional and eager) and
its forward mode must agree with finite differences, and its Hessian-vector
product with finite differences of gradients.
"""

from __future__ import annotations

import numpy
import pytest

import primitives.tensor as tnp


def gaussian_process_nll(np, log_scale, X, y):
    """Negative log marginal likelihood of a GP with an RBF kernel."""
    d2 = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    K = np.exp(-0.5 * d2 / np.exp(2 * log_scale)) + 0.1 * np.eye(len(X))
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))
    return 0.5 * y @ alpha + np.sum(np.log(np.diagonal(L))) + 0.5 * len(X) * np.log(2 * np.pi)


def spectral_smoothness(np, signal):
    """High-frequency power of a signal plus a total-variation term and a robust scale."""
    spectrum = np.fft.rfft(signal)
    power = np.abs(spectrum) ** 2
    weights = np.linspace(0.0, 1.0, power.shape[0]) ** 2
    tv = np.sum(np.sqrt(np.diff(signal) ** 2 + 1e-3))
    return np.sum(weights * power) / signal.size + 0.1 * tv + np.median(np.abs(signal))


def softmax_attention(np, q, k, v):
    """One attention head with a stable softmax and a layer norm."""
    scores = q @ k.T / np.sqrt(q.shape[-1])
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    out = np.einsum("ij,jk->ik", weights, v)
    mean = out.mean(axis=-1, keepdims=True)
    std = out.std(axis=-1, keepdims=True)
    normed = (out - mean) / (std + 1e-5)
    return np.sum(np.tanh(np.concatenate([normed, out[::-1]], axis=1)) ** 2)


def polynomial_fit_residual(np, coeffs, x, y):
    """Least-squares residual of a polynomial, with a cumulative penalty."""
    powers = np.stack([x ** i for i in range(len(coeffs))], axis=1)
    residual = powers @ coeffs - y
    penalty = np.cumsum(np.abs(np.roll(coeffs, 1) - coeffs)).max()
    return np.linalg.norm(residual) ** 2 + 0.01 * penalty + np.prod(np.cos(coeffs[:2]))


RNG = numpy.random.default_rng(0)
CASES = {
    "gaussian process": (gaussian_process_nll, numpy.array(0.3),
                         (RNG.standard_normal((6, 2)), RNG.standard_normal(6))),
    "spectral smoothness": (spectral_smoothness, RNG.standard_normal(16), ()),
    "softmax attention": (softmax_attention, RNG.standard_normal((4, 3)),
                          (RNG.standard_normal((5, 3)), RNG.standard_normal((5, 2)))),
    "polynomial fit": (polynomial_fit_residual, RNG.standard_normal(4) * 0.5,
                       (numpy.linspace(-1, 1, 9), RNG.standard_normal(9))),
}


def _numeric_directional(f, x, direction, h=1e-6):
    return (f(x + h * direction) - f(x - h * direction)) / (2 * h)


@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_code_runs_unchanged_and_differentiates(name):
    fn, x, rest = CASES[name]
    reference = lambda v: float(fn(numpy, v, *rest))          # noqa: E731
    ours = lambda v: fn(tnp, v, *rest)                         # noqa: E731
    assert abs(float(ours(x)) - reference(x)) <= 1e-12 * max(1.0, abs(reference(x)))

    direction = numpy.cos(numpy.arange(x.size) + 1.0).reshape(x.shape)
    numeric = _numeric_directional(reference, x, direction)
    g = tnp.grad(ours)(x)
    assert abs(numpy.sum(g * direction) - numeric) <= 1e-6 * max(1.0, abs(numeric))
    _, forward = tnp.jvp(ours, (x,), (direction,))
    assert abs(forward - numeric) <= 1e-6 * max(1.0, abs(numeric))
    t = tnp.tensor(x, requires_grad=True)
    numpy.testing.assert_allclose(ours(t).backward().grad(t), g, rtol=1e-10, atol=1e-12)
    numpy.testing.assert_allclose(tnp.jit(tnp.grad(ours))(x), g, rtol=1e-10, atol=1e-12)

    hv = tnp.hvp(ours, (x,), (direction,))
    numeric_hv = _numeric_directional(lambda v: tnp.grad(ours)(v), x, direction, h=1e-5)
    numpy.testing.assert_allclose(hv, numeric_hv, rtol=1e-5, atol=1e-5 * max(
        1.0, numpy.abs(numeric_hv).max()))
