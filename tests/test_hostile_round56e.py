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


_PAD_CASES = [("edge", {}), ("reflect", {}), ("symmetric", {}), ("wrap", {}),
              ("maximum", {}), ("minimum", {"stat_length": 2}), ("mean", {"stat_length": (1, 3)}),
              ("median", {}), ("linear_ramp", {"end_values": (2.0, -3.0)}),
              ("constant", {"constant_values": (1.5, -2.0)}), ("empty", {})]


@pytest.mark.parametrize("mode, options", _PAD_CASES)
def test_vmap_and_grad_of_pad_in_every_mode(mode, options) -> None:
    # Was wrong: tnp.pad took only mode="constant" with one scalar constant_values, so
    # vmap(lambda r: tnp.pad(r, 2, mode="reflect")), valid in JAX, raised
    jax = _jax()
    jnp = jax.numpy
    x = np.random.default_rng(5).standard_normal((3, 2, 4))
    widths = ((3, 1), (0, 5))
    weights = np.arange(1.0, 1.0 + 6 * 9).reshape(6, 9)
    f = lambda a: tnp.pad(a, widths, mode=mode, **options)                  # noqa: E731
    g = lambda a: jnp.pad(a, widths, mode=mode, **options)                  # noqa: E731
    for in_axis, out_axis in [(0, 0), (-1, 1)]:
        out = tnp.vmap(f, in_axes=in_axis, out_axes=out_axis)(x)
        expected = np.asarray(jax.vmap(g, in_axes=in_axis, out_axes=out_axis)(x))
        if mode != "empty":
            np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
        assert out.shape == expected.shape and out.dtype == expected.dtype
    grads = tnp.vmap(tnp.grad(lambda a: tnp.sum(f(a) ** 2 * weights)))(x)
    expected = jax.vmap(jax.grad(lambda a: jnp.sum(g(a) ** 2 * weights)))(x)
    if mode != "empty":
        np.testing.assert_allclose(grads, np.asarray(expected), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.int64, np.float32])
@pytest.mark.parametrize("mode, options", _PAD_CASES[:-1])
def test_pad_modes_match_numpy(mode, options, dtype) -> None:
    # Was wrong: every mode but "constant" raised; NumPy's own rounding (an integer array's
    # mean rounded, its linear ramp floored) and dtype are kept
    x = (np.random.default_rng(6).standard_normal((2, 3)) * 7).astype(dtype)
    widths = ((2, 3), (4, 1))
    out, expected = tnp.pad(x, widths, mode=mode, **options), np.pad(x, widths, mode=mode,
                                                                     **options)
    np.testing.assert_allclose(out, expected, rtol=1e-6 if dtype == np.float32 else 0)
    assert out.dtype == dtype


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_under_vmap_and_jit(side) -> None:
    # Was wrong: tnp.searchsorted was NumPy's own, so under vmap or jit (valid in JAX) it
    # raised ConcretizationError; the positions are counted now, NaN sorting last as NumPy's
    jax = _jax()
    rng = np.random.default_rng(7)
    rows = np.sort(rng.standard_normal((3, 6)), axis=1)
    rows[1, 4:] = np.nan
    values = rng.standard_normal((3, 4))
    values[0, 1], values[2, 2] = np.nan, rows[2, 3]
    f = lambda a, v: tnp.searchsorted(a, v, side=side)                     # noqa: E731
    g = lambda a, v: jax.numpy.searchsorted(a, v, side=side)               # noqa: E731
    for axes, args in [((0, 0), (rows, values)), ((-1, 1), (rows.T, values.T)),
                       ((None, 0), (rows[1], values))]:
        out = tnp.vmap(f, in_axes=axes)(*args)
        expected = np.asarray(jax.vmap(g, in_axes=axes)(*args))
        np.testing.assert_array_equal(out, expected)
        assert out.dtype == np.intp                                         # NumPy's, not int32
    np.testing.assert_array_equal(tnp.jit(f)(rows[1], values[0]),
                                  np.searchsorted(rows[1], values[0], side=side))


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantile_with_a_batched_q(method) -> None:
    # Was wrong: q was read as a constant, so vmap over q (valid in JAX) and jit with q an
    # argument raised ConcretizationError; q is data there now
    jax = _jax()
    jnp = jax.numpy
    rng = np.random.default_rng(8)
    x, q = rng.standard_normal((3, 7)), rng.uniform(0.05, 0.95, (3, 2))
    for axes, args in [((0, 0), (x, q)), ((None, 1), (x[0], q.T)), ((1, 0), (x.T, q[:, 0]))]:
        out = tnp.vmap(lambda a, p: tnp.quantile(a, p, method=method), in_axes=axes)(*args)
        expected = jax.vmap(lambda a, p: jnp.quantile(a, p, method=method), in_axes=axes)(*args)
        np.testing.assert_allclose(out, np.asarray(expected), rtol=1e-14, atol=1e-14)
    masked = np.where(x > 1.0, np.nan, x)
    np.testing.assert_allclose(
        tnp.vmap(lambda a, p: tnp.nanpercentile(a, 100 * p, method=method))(masked, q),
        np.asarray(jax.vmap(lambda a, p: jnp.nanpercentile(a, 100 * p, method=method))(masked, q)),
        rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(tnp.jit(lambda a, p: tnp.quantile(a, p, method=method))(x[0], q[0]),
                               np.quantile(x[0], q[0], method=method), rtol=1e-14)
    loss = lambda a, p: tnp.sum(tnp.quantile(a, p, method=method) ** 2)         # noqa: E731
    jloss = lambda a, p: jnp.sum(jnp.quantile(a, p, method=method) ** 2)        # noqa: E731
    for ours, theirs in zip(tnp.vmap(tnp.grad(loss, argnums=(0, 1)))(x, q),
                            jax.vmap(jax.grad(jloss, argnums=(0, 1)))(x, q)):
        np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-12, atol=1e-12)
    # a quantile out of range cannot raise under vmap: nan, not a clamped value
    assert np.isnan(tnp.vmap(lambda p: tnp.quantile(x[0], p))(np.array([0.5, 1.5]))[1])


def test_interp_at_a_batched_x() -> None:
    # Was wrong: interp read x's values to find its segments, so vmap over x (valid in
    # JAX) raised ConcretizationError; the segments are counted by comparisons there now
    jax = _jax()
    rng = np.random.default_rng(4)
    knots, values = np.array([0.0, 1.0, 1.5, 3.0]), rng.standard_normal((3, 4))
    x = np.concatenate([rng.uniform(-1.0, 4.0, (3, 5)), np.tile([0.0, 1.0, 1.5, 3.0, -5.0],
                                                                (3, 1))], axis=1)
    for axes, args in [((0, None, 0), (x, knots, values)), ((1, None, None), (x.T, knots,
                                                                             values[0]))]:
        out = tnp.vmap(lambda a, k, f: tnp.interp(a, k, f, right=9.0), in_axes=axes)(*args)
        expected = jax.vmap(lambda a, k, f: jax.numpy.interp(a, k, f, right=9.0),
                            in_axes=axes)(*args)
        np.testing.assert_allclose(out, np.asarray(expected), rtol=1e-14, atol=1e-14)
    grads = tnp.vmap(tnp.grad(lambda a, f: tnp.sum(tnp.interp(a, knots, f) ** 2),
                              argnums=(0, 1)))(x[:, :5], values)
    for row, (gx, gf) in enumerate(zip(*grads)):
        ex, ef = tnp.grad(lambda a, f: tnp.sum(tnp.interp(a, knots, f) ** 2),
                          argnums=(0, 1))(x[row, :5], values[row])
        np.testing.assert_allclose(gx, ex, rtol=1e-14)
        np.testing.assert_allclose(gf, ef, rtol=1e-14)


def test_broadcast_arrays_under_vmap_and_grad() -> None:
    # Was wrong: tnp had no broadcast_arrays, so np.broadcast_arrays on traced values (and
    # jax.numpy.broadcast_arrays code under vmap) raised TensorNotSupportedError
    jax = _jax()
    rng = np.random.default_rng(10)
    a, b = rng.standard_normal((2, 3, 1)), rng.standard_normal((4, 2))
    f = lambda u, v: tnp.broadcast_arrays(u, v)                                 # noqa: E731
    g = lambda u, v: tuple(jax.numpy.broadcast_arrays(u, v))                    # noqa: E731
    for ours, theirs in zip(tnp.vmap(f, in_axes=(0, 1), out_axes=-1)(a, b),
                            jax.vmap(g, in_axes=(0, 1), out_axes=-1)(a, b)):
        np.testing.assert_array_equal(ours, np.asarray(theirs))
    weights = np.arange(12.0).reshape(3, 4)
    grads = tnp.vmap(tnp.grad(lambda u, v: tnp.sum(np.broadcast_arrays(u, v)[0] * weights),
                              argnums=(0, 1)), in_axes=(0, 1))(a, b)
    np.testing.assert_array_equal(grads[0], np.broadcast_to(weights.sum(1)[:, None], (2, 3, 1)))
    np.testing.assert_array_equal(grads[1], np.zeros((2, 4)))
