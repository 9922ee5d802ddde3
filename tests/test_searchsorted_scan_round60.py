"""Round 60: ``searchsorted`` (and ``interp``, ``digitize``, histograms with given edges)
under ``jit``/``vmap`` is a binary search (``len(v) * log(len(a))``), not a comparison of
every value with every knot (``len(v) * len(a)``), with NumPy's exact results."""

import contextlib
import os
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import primitives.tensor as tnp
import primitives.tensor.numpy.mathfuncs as mathfuncs
from primitives.tensor.numpy.mathfuncs import sorted_positions

# a pool with ties, both zeros, infinities and NaN (which NumPy sorts last)
POOL = [-np.inf, -2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 1.0, 3.0, np.inf, np.nan]


@contextlib.contextmanager
def grid_limits(max_sorted: int, max_values: int):
    """sorted_positions' choice between its comparison grid and its binary search, changed
    (read when a function is traced: trace inside)."""
    old = mathfuncs._GRID_MAX_SORTED, mathfuncs._GRID_MAX_VALUES
    mathfuncs._GRID_MAX_SORTED, mathfuncs._GRID_MAX_VALUES = max_sorted, max_values
    try:
        yield
    finally:
        mathfuncs._GRID_MAX_SORTED, mathfuncs._GRID_MAX_VALUES = old


SEARCH_ONLY = (0, 0)            # every call a binary search
GRID_WHEN_TINY = (8, 256)       # the shipped limits


def sorted_floats(dtype):
    return st.lists(st.sampled_from(POOL), max_size=40).map(
        lambda values: np.sort(np.array(values, dtype=dtype)))


def all_answers(a, v, side):
    """searchsorted by every route: jit, vmap over v's rows, vmap over copies of a, eager
    ops on NumPy values (sorted_positions itself), and tnp's NumPy path."""
    rows = v.reshape(-1, v.shape[-1]) if v.ndim else v.reshape(1, 1)
    return {
        "jit": tnp.jit(lambda a, v: tnp.searchsorted(a, v, side=side))(a, v),
        "vmap v": tnp.vmap(lambda v: tnp.searchsorted(a, v, side=side))(rows).reshape(v.shape),
        "vmap a": tnp.vmap(lambda a: tnp.searchsorted(a, v, side=side))(np.stack([a, a]))[1],
        "ops": sorted_positions(a, v, side),
        "numpy path": tnp.searchsorted(a, v, side=side),
    }


def check_all(a, v, side):
    expected = np.searchsorted(a, v, side=side)
    for route, found in all_answers(a, v, side).items():
        found = np.asarray(found)
        assert found.dtype == np.intp, route
        np.testing.assert_array_equal(found, expected, err_msg=f"{route}, side={side}")


@pytest.mark.parametrize("limits", [SEARCH_ONLY, GRID_WHEN_TINY])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_floats_match_numpy(limits, dtype, data):
    a = data.draw(sorted_floats(dtype))
    v = np.array(data.draw(st.lists(st.sampled_from(POOL + [0.75, -3.0, 2.0]), min_size=1,
                                    max_size=12)), dtype=dtype)
    side = data.draw(st.sampled_from(["left", "right"]))
    with grid_limits(*limits):
        check_all(a, v, side)


@pytest.mark.parametrize("limits", [SEARCH_ONLY, GRID_WHEN_TINY])
@settings(max_examples=40, deadline=None)
@given(a=st.lists(st.integers(-5, 5), max_size=40),
       v=st.lists(st.integers(-7, 7), min_size=1, max_size=12),
       side=st.sampled_from(["left", "right"]))
def test_integers_match_numpy(limits, a, v, side):
    with grid_limits(*limits):
        check_all(np.sort(np.array(a, dtype=np.int64)), np.array(v, dtype=np.int64), side)


@pytest.mark.parametrize("limits", [SEARCH_ONLY, GRID_WHEN_TINY])
@pytest.mark.parametrize("side", ["left", "right"])
def test_integer_knots_float_values(limits, side):
    a = np.array([-3, 0, 0, 2, 7], dtype=np.int32)
    v = np.array([-np.inf, -3.0, -0.0, 0.0, 1.5, 2.0, 6.99, 7.0, np.inf, np.nan])
    with grid_limits(*limits):
        check_all(a, v, side)


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("length", [1, 2, 3, 7, 8, 9, 15, 16, 17, 100, 1000])
def test_every_length_and_position(side, length):
    """Lengths around powers of two (the search pads a to 2**K - 1 entries), values before,
    at, between and after every knot."""
    a = np.arange(length, dtype=np.float64) * 2.0
    v = np.concatenate([a, a + 1.0, [-1.0, np.inf, np.nan]])
    with grid_limits(*SEARCH_ONLY):
        check_all(a, v, side)


@pytest.mark.parametrize("side", ["left", "right"])
def test_all_nan_and_all_equal(side):
    with grid_limits(*SEARCH_ONLY):
        check_all(np.full(13, np.nan), np.array([0.0, np.nan, np.inf]), side)
        check_all(np.full(13, 2.0), np.array([1.0, 2.0, 3.0, np.nan]), side)


@pytest.mark.parametrize("side", ["left", "right"])
def test_shapes_and_empty(side):
    a = np.array([0.0, 1.0, 1.0, 4.0, 9.0, 9.0, np.nan, np.nan, np.nan, np.nan])
    v3 = np.linspace(-1.0, 10.0, 24).reshape(2, 3, 4)
    jitted = tnp.jit(lambda a, v: tnp.searchsorted(a, v, side=side))
    for v in (v3, np.float64(4.0), np.zeros((0, 3)), np.zeros(0)):
        found = np.asarray(jitted(a, v))
        assert found.shape == np.shape(v)
        np.testing.assert_array_equal(found, np.searchsorted(a, v, side=side))
        np.testing.assert_array_equal(np.asarray(jitted(np.zeros(0), v)),
                                      np.zeros(np.shape(v), np.intp))


def test_sorter_traced():
    rng = np.random.default_rng(0)
    a = rng.permutation(np.array([3.0, -1.0, np.nan, 0.0, -0.0, 7.0, 7.0, 2.0, np.inf,
                                  5.0, 1.0]))
    sorter = np.argsort(a)
    v = np.array([-0.0, 7.0, np.nan, 4.0, -5.0])
    for side in ("left", "right"):
        expected = np.searchsorted(a, v, side=side, sorter=sorter)
        found = tnp.jit(lambda a, v, s: tnp.searchsorted(a, v, side=side, sorter=s))(
            a, v, sorter)
        np.testing.assert_array_equal(np.asarray(found), expected)


def test_jax_agrees(jx):
    _, jnp = jx
    a = np.array([-np.inf, -1.0, 0.0, 0.0, 2.0, np.inf, np.nan])
    v = np.array([-np.inf, -0.0, 0.0, 1.0, 2.0, np.inf, np.nan])
    for side in ("left", "right"):
        found = tnp.jit(lambda a, v: tnp.searchsorted(a, v, side=side))(a, v)
        np.testing.assert_array_equal(np.asarray(found),
                                      np.asarray(jnp.searchsorted(a, v, side=side)))


# --- memory: a million values against a thousand knots -----------------------------------

def test_memory_is_linear_in_the_values():
    """Under jit the peak stays under 100 bytes per value (the comparison grid takes a
    thousand: 1 GB at 10**6 values); fewer values on CI. (Measured at the second call: the
    first traces with the values and holds every intermediate, as jit's docstring says.)"""
    count = 10**5 if os.environ.get("CI") else 10**6
    knots = np.sort(np.random.default_rng(1).normal(size=1000))
    values = np.random.default_rng(2).normal(size=count)
    jitted = tnp.jit(lambda a, v: tnp.searchsorted(a, v, side="right"))
    jitted(knots, values)                                        # traced
    tracemalloc.start()
    try:
        found = jitted(knots, values)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(np.asarray(found), np.searchsorted(knots, values, "right"))
    assert peak < 100 * count, f"peak {peak / 1e6:.0f} MB for {count} values"


def test_memory_under_vmap_of_scalars():
    """vmap of a scalar function (each value alone against all knots) is a binary search
    too: the tiny-problem grid is per value, so never len(a) > 8 wide."""
    count = 10**5
    knots = np.sort(np.random.default_rng(3).normal(size=1000))
    values = np.random.default_rng(4).normal(size=count)
    mapped = tnp.vmap(lambda x: tnp.interp(x, knots, np.cos(knots)))
    tracemalloc.start()
    try:
        found = mapped(values)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(np.asarray(found), np.interp(values, knots, np.cos(knots)),
                               rtol=1e-12, atol=1e-15)
    assert peak < 200 * count, f"peak {peak / 1e6:.0f} MB for {count} values"


# --- what uses it: interp, digitize, histogram -------------------------------------------

KNOTS = np.array([-2.0, -0.5, 0.0, 0.0, 1.0, 1.5, 2.5, 4.0, 4.5, 6.0, 7.0])
HEIGHTS = np.array([1.0, 3.0, -1.0, 2.0, 0.5, 0.0, 4.0, 1.0, 2.0, -2.0, 3.0])


def test_interp_jit_matches_numpy_and_its_gradient_finite_differences():
    x = np.array([-3.0, -2.0, -1.2, 0.3, 0.999, 1.2, 2.0, 3.3, 4.2, 5.0, 6.5, 7.0, 8.0])
    interp = tnp.jit(lambda x, fp: tnp.interp(x, KNOTS, fp))
    np.testing.assert_allclose(np.asarray(interp(x, HEIGHTS)), np.interp(x, KNOTS, HEIGHTS),
                               rtol=1e-14)
    loss = tnp.jit(lambda x, fp: tnp.sum(tnp.sin(tnp.interp(x, KNOTS, fp))))
    grad_x, grad_fp = tnp.grad(loss, argnums=(0, 1))(x, HEIGHTS)
    step = 1e-6
    interior = np.array([i for i, xi in enumerate(x) if np.min(np.abs(KNOTS - xi)) > 1e-3])

    def value(x, fp):
        return np.sum(np.sin(np.interp(x, KNOTS, fp)))
    for i in interior:
        e = np.zeros_like(x)
        e[i] = step
        numeric = (value(x + e, HEIGHTS) - value(x - e, HEIGHTS)) / (2 * step)
        assert abs(np.asarray(grad_x)[i] - numeric) < 1e-6
    for j in range(HEIGHTS.size):
        e = np.zeros_like(HEIGHTS)
        e[j] = step
        numeric = (value(x, HEIGHTS + e) - value(x, HEIGHTS - e)) / (2 * step)
        assert abs(np.asarray(grad_fp)[j] - numeric) < 1e-6


def test_interp_gradient_matches_jax_under_jit(jx):
    jax, jnp = jx
    knots = np.array([-2.0, -0.5, 0.0, 1.0, 1.5, 2.5, 4.0, 4.5, 6.0, 7.0])
    heights = np.cos(knots) * 3.0
    x = np.linspace(-2.7, 7.7, 37)
    ours = tnp.grad(tnp.jit(lambda x, fp: tnp.sum(tnp.interp(x, knots, fp) ** 2)),
                    argnums=(0, 1))(x, heights)
    theirs = jax.grad(lambda x, fp: jnp.sum(jnp.interp(x, knots, fp) ** 2),
                      argnums=(0, 1))(x, heights)
    for mine, jaxs in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(jaxs), rtol=1e-12, atol=1e-12)


def test_interp_at_nan_jit_as_eager():
    """A NaN x finds the last segment under jit as eagerly (searchsorted sorts NaN last):
    the same value and derivatives."""
    x = np.array([0.5, np.nan, 3.0])
    loss = lambda x, fp: tnp.sum(tnp.interp(x, KNOTS, fp))          # noqa: E731
    eager = tnp.grad(loss, argnums=(0, 1))(x, HEIGHTS)
    jitted = tnp.grad(tnp.jit(loss), argnums=(0, 1))(x, HEIGHTS)
    for e, j in zip(eager, jitted):
        np.testing.assert_array_equal(np.asarray(j), np.asarray(e))
    np.testing.assert_array_equal(np.asarray(tnp.jit(lambda x: tnp.interp(x, KNOTS, HEIGHTS))(x)),
                                  np.interp(x, KNOTS, HEIGHTS))


@pytest.mark.parametrize("right", [False, True])
def test_digitize_jit_and_vmap(right):
    bins = np.array([-1.0, 0.0, 0.0, 2.0, 3.5, 3.5, 8.0, 9.0, 10.0, 12.0])
    x = np.array([-np.inf, -2.0, -1.0, -0.0, 0.0, 1.0, 3.5, 9.5, 12.0, 13.0, np.inf, np.nan])
    for edges in (bins, bins[::-1].copy()):
        expected = np.digitize(x, edges, right=right)
        found = tnp.jit(lambda x: tnp.digitize(x, edges, right=right))(x)
        np.testing.assert_array_equal(np.asarray(found), expected)
        mapped = tnp.vmap(lambda x: tnp.digitize(x, edges, right=right))(x)
        np.testing.assert_array_equal(np.asarray(mapped), expected)


def test_histogram_with_given_edges_jit():
    edges = np.array([-3.0, -1.0, -0.5, 0.0, 0.1, 0.7, 1.0, 2.0, 3.0, 5.0, 8.0])
    x = np.random.default_rng(5).normal(size=500) * 2.0
    x[:4] = [-3.0, 8.0, 0.0, np.nan]
    weights = np.random.default_rng(6).uniform(size=500)
    counts = tnp.jit(lambda x: tnp.histogram(x, bins=edges)[0])(x)
    np.testing.assert_array_equal(np.asarray(counts), np.histogram(x, bins=edges)[0])
    weighted = tnp.jit(lambda x, w: tnp.histogram(x, bins=edges, weights=w)[0])(x, weights)
    np.testing.assert_allclose(np.asarray(weighted),
                               np.histogram(x, bins=edges, weights=weights)[0], rtol=1e-12)
    grad = tnp.grad(tnp.jit(lambda w: tnp.sum(tnp.histogram(x, bins=edges, weights=w)[0]
                                              * np.arange(10.0))))(weights)
    expected = np.digitize(x, edges) - 1.0
    expected[x == edges[-1]] = 9.0                             # the last bin is closed
    expected[(x < edges[0]) | (x > edges[-1]) | np.isnan(x)] = 0.0
    np.testing.assert_array_equal(np.asarray(grad), expected)
