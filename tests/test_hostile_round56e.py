"""Hostile round 56e: ``vmap`` across the op surface (linear algebra, FFT, sorting and
scans, indexing, padding, convolution, nn and scipy.special) against ``jax.vmap``."""

from __future__ import annotations

import numpy as np
import pytest

from primitives import tensor as tnp


def _jax():
    jax = pytest.importorskip("jax", reason="the reference values come from jax.vmap")
    jax.config.update("jax_enable_x64", True)
    return jax


@pytest.mark.parametrize("key", [np.array(1), np.array(-1), (np.array(1), np.array(2)),
                                 (slice(None), np.array(0))])
@pytest.mark.parametrize("in_axis", [1, 2, -1])
def test_vmap_of_indexing_with_a_0d_index_array(key, in_axis) -> None:
    # Was wrong: x[np.array(1)] under vmap with the batch axis after axis 0 returned the
    # right values in the wrong order (a reshape, not a transpose): the 0-d index constant
    # was made 1-d (np.ascontiguousarray), so the gather's result had an extra axis
    jax = _jax()
    x = np.arange(60.0).reshape(3, 4, 5)
    f = lambda a: a[key]                                        # noqa: E731
    expected = np.asarray(jax.vmap(f, in_axes=in_axis)(jax.numpy.asarray(x)))
    for g in [tnp.vmap(f, in_axes=in_axis), tnp.jit(tnp.vmap(f, in_axes=in_axis))]:
        out = g(x)
        assert out.shape == expected.shape and np.array_equal(out, expected)
    grads = tnp.vmap(tnp.grad(lambda a: tnp.sum(f(a) ** 2)), in_axes=in_axis)(x)
    expected = np.asarray(jax.vmap(jax.grad(lambda a: jax.numpy.sum(f(a) ** 2)),
                                   in_axes=in_axis)(jax.numpy.asarray(x)))
    assert np.array_equal(grads, expected)


@pytest.mark.parametrize("name", ["solve", "inv", "cholesky", "matrix_power", "grad_det"])
def test_vmap_of_linear_algebra_over_zero_examples(name) -> None:
    # Was wrong: vmap over a batch of size 0 traced f at a matrix of zeros, so solve, inv,
    # cholesky and matrix_power(a, -2) raised LinAlgError ("Singular matrix") for a batch
    # holding no matrix at all; jax.vmap returns empty results
    jax = _jax()
    a, b = np.zeros((0, 3, 3)), np.zeros((0, 3))
    fs = {"solve": (lambda m, v: tnp.linalg.solve(m, v), lambda m, v: jax.numpy.linalg.solve(m, v)),
          "inv": (lambda m, v: tnp.linalg.inv(m) @ v, lambda m, v: jax.numpy.linalg.inv(m) @ v),
          "cholesky": (lambda m, v: tnp.linalg.cholesky(m) @ v,
                       lambda m, v: jax.numpy.linalg.cholesky(m) @ v),
          "matrix_power": (lambda m, v: tnp.linalg.matrix_power(m, -2) @ v,
                           lambda m, v: jax.numpy.linalg.matrix_power(m, -2) @ v),
          "grad_det": (tnp.grad(lambda m, v: tnp.linalg.slogdet(m)[1] + tnp.sum(v)),
                       jax.grad(lambda m, v: jax.numpy.linalg.slogdet(m)[1] + jax.numpy.sum(v)))}
    ours, theirs = fs[name]
    out = tnp.vmap(ours)(a, b)
    expected = np.asarray(jax.vmap(theirs)(a, b))
    assert out.shape == expected.shape and out.dtype == expected.dtype
