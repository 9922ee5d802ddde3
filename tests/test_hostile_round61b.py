"""Round 61b: a hostile round on round 60's binary search under ``jit``/``vmap``
(``searchsorted``, ``interp``, ``digitize``, histograms) and on ``x.at[idx].apply``,
against NumPy's values and JAX's derivatives."""

import numpy as np
import pytest

import primitives.tensor as tnp
import tidu


@pytest.fixture(scope="module")
def jx():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax, jax.numpy


def interp_routes(x, xp, fp, **keywords):
    """interp eagerly (NumPy's own on NumPy values; ops on tensors), under jit (x and fp
    traced) and under vmap over x's entries."""
    flat = np.reshape(x, -1)
    return {
        "eager": tnp.interp(x, xp, fp, **keywords),
        "tensors": tnp.interp(tnp.tensor(x), xp, tnp.tensor(fp), **keywords),
        "jit": tnp.jit(lambda x, fp: tnp.interp(x, xp, fp, **keywords))(x, fp),
        "vmap": np.reshape(tnp.vmap(lambda x: tnp.interp(x, xp, fp, **keywords))(flat),
                           np.shape(x)),
    }


def assert_interp_as_numpy(x, xp, fp, **keywords):
    expected = np.interp(x, xp, fp, **keywords)
    for route, found in interp_routes(x, xp, fp, **keywords).items():
        found = np.asarray(found)
        assert found.dtype == expected.dtype, route
        np.testing.assert_array_equal(found, expected, err_msg=route)


# --- interp: NumPy's values where its formula is not t * (f1 - f0) + f0 -----------------------

SPECIALS = np.array([-np.inf, -3.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 3.5, 5.0, np.inf, np.nan])


def test_interp_one_knot_at_nan_is_the_height():
    """NumPy's one-knot interp gives fp[0] at a NaN x (neither below nor above the knot)."""
    for left, right in ((None, None), (-7.0, 9.0)):
        keywords = dict(left=left, right=right)
        assert_interp_as_numpy(SPECIALS, np.array([0.5]), np.array([4.0]), **keywords)


@pytest.mark.parametrize("xp, fp", [
    (np.array([0.0, 1.0, 3.0, 3.0]), np.array([0.0, 2.0, 5.0, 7.0])),     # repeated last knot
    (np.array([1.0, 1.0, 1.0]), np.array([4.0, 0.0, 3.0])),               # all one knot
    (np.array([-np.inf, 0.0, 1.0, np.inf]), np.array([1.0, 2.0, 3.0, 4.0])),  # infinite knots
    (np.array([0.0, 1.0, 3.0]), np.array([0.0, np.inf, 3.0])),            # an infinite height
    (np.array([0.0, 1.0, 3.0]), np.array([-np.inf, np.inf, 3.0])),
    (np.array([0.0, 0.0, 2.0, 2.0, 3.0]), np.array([5.0, 1.0, 2.0, 8.0, 0.0])),
])
def test_interp_values_bitwise_as_numpy(xp, fp):
    x = np.r_[SPECIALS, xp, (xp[1:] + xp[:-1]) / 2, np.nextafter(xp, np.inf)]
    with np.errstate(invalid="ignore"):
        assert_interp_as_numpy(x, xp, fp)
        assert_interp_as_numpy(x, xp, fp, left=-7.0, right=np.nan)


def test_interp_bitwise_as_numpy_across_the_grid_switch():
    """NumPy's arithmetic (slope * (x - xp[j]) + fp[j]), so its very values, for every
    length across sorted_positions' grid (<= 8 knots, <= 256 values) and binary search."""
    rng = np.random.default_rng(61)
    for n in (2, 7, 8, 9, 1000):
        xp = np.sort(np.round(rng.normal(size=n), 1))
        fp = rng.normal(size=n)
        for size in (255, 256, 257):
            x = rng.choice(np.r_[SPECIALS, xp, rng.normal(size=50)], size)
            assert_interp_as_numpy(x, xp, fp)


def test_interp_complex_heights():
    xp = np.array([0.0, 1.0, 3.0])
    fp = np.array([0.0, 2.0, 3.0]) + 1j * np.array([1.0, -1.0, 2.0])
    x = np.array([-1.0, 0.5, 2.0, 4.0, np.nan])             # NumPy: nan + 0j at NaN
    assert_interp_as_numpy(x, xp, fp)
    assert_interp_as_numpy(x, xp, fp, left=1j, right=2.0)


@pytest.mark.parametrize("period", [4.0, -4.0, 2.5])
def test_interp_period(jx, period):
    jax, jnp = jx
    xp = np.array([-1.0, 0.5, 2.0, 3.0, 7.5])
    fp = np.array([1.0, -2.0, 0.5, 3.0, 2.0])
    x = np.linspace(-6.0, 9.0, 41)
    assert_interp_as_numpy(x, xp, fp, period=period)
    ours = tnp.grad(tnp.jit(lambda x, fp: tnp.sum(tnp.interp(x, xp, fp, period=period) ** 2)),
                    argnums=(0, 1))(x, fp)
    theirs = jax.grad(lambda x, fp: jnp.sum(jnp.interp(x, xp, fp, period=period) ** 2),
                      argnums=(0, 1))(x, fp)
    for mine, jaxs in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(jaxs), rtol=1e-12, atol=1e-12)


def test_interp_period_misuse():
    xp, fp = np.array([0.0, 1.0]), np.array([1.0, 2.0])
    with pytest.raises(tidu.TiduError, match="interp: period must be a non-zero value"):
        tnp.interp(0.5, xp, fp, period=0)
    with pytest.raises(tidu.TiduError, match="interp: period must be a real number"):
        tnp.interp(0.5, xp, fp, period=np.array([1.0, 2.0]))


def test_interp_heights_gradient_finite_at_infinite_x():
    """x = ±inf takes fp[0] or fp[-1] (or left/right): their derivative is 1 there, not NaN
    (which is JAX's: it draws the line at x = ±inf, 0 * inf in the derivative)."""
    xp = np.array([-2.0, -0.5, 0.0, 1.0, 1.5, 2.5])
    fp = np.cos(xp)
    x = np.array([-np.inf, -3.0, 0.25, 2.0, np.inf, np.inf])
    for left, right in ((None, None), (-1.0, 2.0)):
        loss = lambda fp: tnp.sum(tnp.interp(x, xp, fp, left, right) ** 2)      # noqa: E731
        numeric = np.array([
            (np.sum(np.interp(x, xp, fp + e, left, right) ** 2)
             - np.sum(np.interp(x, xp, fp - e, left, right) ** 2)) / 2e-6
            for e in np.eye(fp.size) * 1e-6])
        for route in (tnp.grad(loss), tnp.jit(tnp.grad(loss))):
            np.testing.assert_allclose(np.asarray(route(fp)), numeric, atol=1e-6)


def test_interp_gradients_match_jax_with_left_right_and_knots(jx):
    jax, jnp = jx
    xp = np.array([-2.0, -0.5, 0.0, 1.0, 1.5, 2.5, 4.0, 4.5, 6.0, 7.0])
    fp = np.cos(xp) * 3.0
    x = np.r_[np.linspace(-2.7, 7.7, 37), xp]                # at every knot too
    ours = tnp.vmap(tnp.grad(lambda x, fp: tnp.interp(x, xp, fp, -1.0, 2.0) ** 2,
                             argnums=(0, 1)), in_axes=(0, None))(x, fp)
    theirs = jax.vmap(jax.grad(lambda x, fp: jnp.interp(x, xp, fp, -1.0, 2.0) ** 2,
                               argnums=(0, 1)), in_axes=(0, None))(x, fp)
    for mine, jaxs in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(jaxs), rtol=1e-12, atol=1e-12)


def test_interp_repeated_last_knot_derivatives():
    """At repeated last knots the value is fp[-1], its derivative in x 0 (the last segment
    has no width), in fp[-1] 1: no NaN from the 0 / 0 slope."""
    xp, fp = np.array([0.0, 1.0, 3.0, 3.0]), np.array([0.0, 2.0, 5.0, 7.0])
    x = np.array([2.0, 3.0, 4.0])
    for route in (lambda f: f, tnp.jit):
        grad_x = route(tnp.vmap(tnp.grad(lambda x: tnp.interp(x, xp, fp))))(x)
        np.testing.assert_array_equal(np.asarray(grad_x), [1.5, 0.0, 0.0])
        grad_fp = route(tnp.grad(lambda f: tnp.sum(tnp.interp(x, xp, f))))(fp)
        np.testing.assert_array_equal(np.asarray(grad_fp), [0.0, 0.5, 0.5, 2.0])


@pytest.mark.parametrize("route", ["eager", "jit"])
def test_interp_misuse_names_interp(route):
    xp, fp = np.array([0.0, 1.0, 3.0]), np.array([0.0, 2.0, 3.0])
    call = (lambda f, *a: f(*a)) if route == "eager" else (lambda f, *a: tnp.jit(f)(*a))
    x = np.array([0.5, 2.0])
    cases = [
        (lambda x: tnp.interp(x + 1j, xp, fp), "interp: x and xp must be real"),
        (lambda x: tnp.interp(x, xp + 0j, fp), "interp: x and xp must be real"),
        (lambda x: tnp.interp(x, xp, fp, left=np.array([1.0, 2.0])),
         "interp: left must be a scalar"),
        (lambda x: tnp.interp(x, xp, fp, right=1j), "interp: right is complex but fp is real"),
    ]
    for function, message in cases:
        with pytest.raises(tidu.TiduError, match=message):
            call(function, x)


# --- x.at[idx].apply: a func that mixes entries is refused, on every route -------------------

NOT_ELEMENTWISE = {
    "minus the mean": lambda t: t - tnp.mean(t),
    "reversed": lambda t: t[::-1],
    "cumulative sum": lambda t: tnp.cumsum(t),
    "sorted": lambda t: tnp.sort(t),
    "rolled": lambda t: tnp.roll(t, 1),
    "times its positions": lambda t: t * tnp.arange(tnp.shape(t)[0]),
}


@pytest.mark.parametrize("name", list(NOT_ELEMENTWISE))
def test_apply_refuses_a_func_that_mixes_entries(name):
    """Its result would depend on how many values apply passes at once (eager: per number
    of hits; traced: all m, or the m // t most hit): it differed by route. JAX calls func
    on each 0-d value; tidu raises, naming apply."""
    func = NOT_ELEMENTWISE[name]
    x = np.arange(1.0, 6.0)
    indices = np.array([0, 0, 1, 4, 4, 4])
    routes = {
        "eager": lambda: tnp.at(x)[indices].apply(func),
        "jit": lambda: tnp.jit(lambda i: tnp.at(x)[i].apply(func))(indices),
        "jit, many": lambda: tnp.jit(lambda i: tnp.at(x)[i].apply(func))(
            np.repeat(indices, 50)),
        "vmap": lambda: tnp.vmap(lambda i: tnp.at(x)[i].apply(func))(np.stack([indices] * 2)),
        "tensor": lambda: tnp.tensor(x, requires_grad=True).at[indices].apply(func),
    }
    for route, call in routes.items():
        with pytest.raises(tidu.TiduError, match=r"x\.at\[\.\.\.\]\.apply: func must act "
                                                 "elementwise"):
            call()


def test_apply_keeps_elementwise_funcs_of_every_dtype():
    """The check passes what acts elementwise: on floats, integers (a probe with a zero:
    10 // t), booleans, complex numbers; funcs closing over traced values; funcs failing
    on the probe's values are left to fail or not on x's."""
    indices = np.array([0, 0, 2])
    cases = [
        (np.array([1.0, 4.0, 9.0]), lambda t: tnp.sqrt(t) + tnp.where(t > 2, t, 0.0)),
        (np.array([3, 5, 7]), lambda t: 10 // (t + 1)),
        (np.array([True, False, True]), tnp.logical_not),
        (np.array([1 + 2j, 3j, 2.0]), lambda t: tnp.conj(t) * 1j),
        (np.array([1.0, 2.0, 3.0]), lambda t: t * tnp.max(np.array([1.0, 5.0]))),
    ]
    for x, func in cases:
        expected = np.array(x)
        for i in indices:                                  # once per occurrence, in order
            expected[i] = np.asarray(func(expected[i:i + 1]))[0]
        for found in (tnp.at(x)[indices].apply(func),
                      tnp.jit(lambda i: tnp.at(x)[i].apply(func))(indices)):
            np.testing.assert_array_equal(np.asarray(found), expected)
    scale = tnp.jit(lambda w, i: tnp.at(np.ones(3))[i].apply(lambda t: t * w))(3.0, indices)
    np.testing.assert_array_equal(np.asarray(scale), [9.0, 1.0, 3.0])

    def positive_only(t):                  # (fails on the probe, which has -2.0)
        if np.any(np.asarray(t) <= 0):
            raise ValueError("positive values only")
        return t * 2.0
    np.testing.assert_array_equal(tnp.at(np.ones(3))[indices].apply(positive_only),
                                  [4.0, 1.0, 2.0])


# --- found in reductions.py, fixed after the round -------------------------------------

@pytest.mark.parametrize("bins", [[-np.inf, -np.inf, 1.0], [1.0, np.inf, np.inf],
                                  [np.inf, np.inf, 0.0], [0.0, 1.0, np.nan]])
def test_digitize_bins_with_repeated_infinities_or_a_trailing_nan(bins):
    """Bins NumPy takes (it compares neighbours; NaN compares as no step): before round 61
    tnp refused them, its np.diff making inf - inf and NaN steps."""
    x = np.array([-np.inf, -1.0, 0.0, 0.5, 2.0, np.inf, np.nan])
    bins = np.array(bins)
    for right in (False, True):
        expected = np.digitize(x, bins, right)
        np.testing.assert_array_equal(np.asarray(tnp.digitize(x, bins, right)), expected)
        np.testing.assert_array_equal(
            np.asarray(tnp.jit(lambda x: tnp.digitize(x, bins, right))(x)), expected)


@pytest.mark.parametrize("route", ["eager", "jit"])
@pytest.mark.parametrize("sorter", [[0, 1], [0, 1, 2, 2], [[0, 1, 2]], [-1, 0, 1],
                                    [0.0, 1.0, 2.0]])
def test_searchsorted_sorter_misuse_raises_tidu_errors(route, sorter):
    """A sorter of the wrong length, a 2-d one, a negative index or floats: NumPy raises;
    before round 61 NumPy's errors escaped eagerly and jit gave an answer."""
    a, v = np.array([1.0, 2.0, 3.0]), np.array([2.0, 0.5])
    sorter = np.array(sorter)
    call = (lambda f: f(a)) if route == "eager" else (lambda f: tnp.jit(f)(a))
    with pytest.raises(tidu.TiduError, match="searchsorted"):
        call(lambda a: tnp.searchsorted(a, v, sorter=sorter))


def test_interp_with_torch_arrays_as_numpy():
    """Knots, heights and points of another library: NumPy's values (and its dtype checks
    read the knots' dtype through tidu, not a torch dtype's .kind)."""
    torch = pytest.importorskip("torch")
    xp, fp = np.array([0.0, 1.0, 3.0, 3.0]), np.array([0.0, np.inf, 5.0, 7.0])
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0, np.nan])
    expected = np.interp(x, xp, fp)
    for args in [(torch.tensor(x), torch.tensor(xp), torch.tensor(fp)),
                 (torch.tensor(x), xp, fp), (x, torch.tensor(xp), fp)]:
        found = tnp.interp(*args)
        np.testing.assert_array_equal(np.asarray(found), expected)
    with pytest.raises(tidu.TiduError, match="interp: x and xp must be real"):
        tnp.interp(x, torch.tensor(xp) + 0j, fp)


# --- routes found right (kept as regression tests) -------------------------------------------

@pytest.mark.parametrize("n", [1, 7, 8, 9, 16, 17, 257])
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_both_batched_nested_and_other_axes(n, side):
    """Batched a and v together, on axis 1, under vmap(jit), jit(vmap) and vmap(vmap),
    with NaN, ties and infinities, across the grid/binary-search switch and 2**k lengths."""
    rng = np.random.default_rng(n)
    pool = np.array([-np.inf, -1.0, 0.0, 0.0, 0.5, 2.0, np.inf, np.nan])
    a = np.sort(rng.choice(pool, (3, n)), axis=1)
    v = rng.choice(pool, (3, 5))
    expected = np.stack([np.searchsorted(a[b], v[b], side=side) for b in range(3)])

    def search(a, v):
        return tnp.searchsorted(a, v, side=side)
    found = {
        "vmap": tnp.vmap(search)(a, v),
        "axes 1": tnp.vmap(search, in_axes=(1, 1), out_axes=1)(a.T, v.T).T,
        "vmap jit": tnp.vmap(tnp.jit(search))(a, v),
        "jit vmap": tnp.jit(tnp.vmap(search))(a, v),
        "vmap vmap": tnp.vmap(lambda a, v: tnp.vmap(lambda s: search(a, s))(v))(a, v),
    }
    for route, result in found.items():
        result = np.asarray(result)
        assert result.dtype == np.intp, route
        np.testing.assert_array_equal(result, expected, err_msg=route)


def test_apply_gradient_into_a_closed_over_tensor():
    """func closing over a Tensor that requires grad: its derivative, and x's, as finite
    differences (JAX's apply has no derivative to compare with)."""
    x, indices = np.array([1.0, 2.0, 3.0]), np.array([0, 0, 2, 2, 2])

    def reference(x, w):
        out = x.copy()
        for i in indices:
            out[i] = np.sin(out[i] * w)
        return np.sum(out ** 2)
    w, xt = tnp.tensor(0.7, requires_grad=True), tnp.tensor(x, requires_grad=True)
    (xt.at[indices].apply(lambda t: tnp.sin(t * w)) ** 2).sum().backward()
    numeric_w = (reference(x, 0.7 + 1e-6) - reference(x, 0.7 - 1e-6)) / 2e-6
    numeric_x = [(reference(x + e, 0.7) - reference(x - e, 0.7)) / 2e-6
                 for e in np.eye(3) * 1e-6]
    np.testing.assert_allclose(float(w.grad), numeric_w, rtol=1e-7)
    np.testing.assert_allclose(np.asarray(xt.grad), numeric_x, rtol=1e-7, atol=1e-9)


def test_digitize_takes_and_refuses_the_bins_numpy_does():
    """Bins of 0-4 edges drawn from a few values with ties, infinities and NaN: tnp takes
    exactly those NumPy takes, with its indices, eagerly and under jit."""
    import itertools

    x = np.array([-np.inf, -1.0, 0.0, 0.5, 1.0, 2.0, np.inf, np.nan])
    values = [-np.inf, 0.0, 1.0, np.inf, np.nan]
    for size in range(5):
        for edges in itertools.product(values, repeat=size):
            bins = np.array(edges, dtype=float)
            try:
                expected = np.digitize(x, bins)
            except ValueError:
                with pytest.raises(tidu.TiduError, match="monotonically"):
                    tnp.digitize(x, bins)
                continue
            np.testing.assert_array_equal(np.asarray(tnp.digitize(x, bins)), expected,
                                          err_msg=str(edges))
            if size not in (0, 3):
                continue
            try:
                got = tnp.jit(lambda x: tnp.digitize(x, bins))(x)
            except tidu.TiduError as error:     # only for NaN before other edges
                assert "NaN" in str(error) and np.isnan(bins).any(), (edges, error)
                continue
            np.testing.assert_array_equal(np.asarray(got), expected, err_msg=str(edges))
    for edges in ([0.0, 1.0, np.nan], [np.nan, 1.0, 0.0], [np.inf, np.inf, 0.0]):
        bins = np.array(edges)                  # NaN last in the order searched: taken
        np.testing.assert_array_equal(tnp.jit(lambda x: tnp.digitize(x, bins))(x),
                                      np.digitize(x, bins))
