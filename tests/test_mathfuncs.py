"""The elementwise primitives behind ``primitives.tensor.numpy.mathfuncs``, and their edges.

- every new primitive through ``tidu.testing.check_primitive`` to second order, in
  float64, float32 and complex128 where NumPy takes complex values, on shapes
  hypothesis draws (size-0 and size-1 axes included), inside domains where the
  function is smooth;
- the points the conventions are about, pinned to numbers: ``sinc`` at 0, ``power``
  at 0 and with exponent 0, ``logaddexp`` at ``-inf`` and for large inputs, ``hypot``
  and ``arctan2`` at the origin, ``mod`` with negative operands, ``nan_to_num``,
  ``fmax``/``fmin`` with NaN, ``clip`` at its bounds;
- dtypes as NumPy's (integer promotion, complex refused where NumPy refuses it);
- a few functions against PyTorch (skipped without it), complex conjugation included;
- the two fixes in the elementwise set: exact equality of ``scale`` factors
  (``-0.0`` is not ``0.0``), and no ``conj`` in the transpose of a real ``div``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

import primitives.tensor as tnp
from primitives.tensor.transforms import make_graph
from primitives.tensor.ops import elementwise as ew
from test_tensor_ops import SEEDS, SETTINGS, SHAPES, jvp_of, one_op_graph
from tidu import linear_transpose, linearize
from tidu.graph import GraphBuilder, Input, Local, evaluate
from tidu.testing import check_primitive

FEW = settings(SETTINGS, max_examples=4)


def draw(rng, shape, dtype, low, high, imag=(-0.5, 0.5)):
    """Values in ``[low, high)`` (complex: imaginary parts in ``imag``)."""
    x = rng.uniform(low, high, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(*imag, shape)
    return x.astype(dtype)


def away_from_integers(rng, shape, dtype, offset=0.0):
    """Integers plus a fraction in [0.2, 0.8) (+ ``offset``): steps of floor & co. far away."""
    return (rng.integers(-3, 3, shape) + rng.uniform(0.2, 0.8, shape) + offset).astype(dtype)


def nonzero(rng, shape, dtype, low=0.5, high=2.0):
    """Magnitudes in ``[low, high)`` with random signs."""
    return (rng.choice([-1.0, 1.0], shape) * rng.uniform(low, high, shape)).astype(dtype)


# --- every primitive, to second order -----------------------------------------------------

UNARY = {  # op -> (inputs (rng, shape, dtype) -> array, takes complex)
    ew.sinh: (lambda r, s, d: draw(r, s, d, -2, 2), True),
    ew.cosh: (lambda r, s, d: draw(r, s, d, -2, 2), True),
    ew.tan: (lambda r, s, d: draw(r, s, d, -1, 1), True),
    ew.arcsin: (lambda r, s, d: draw(r, s, d, -0.8, 0.8), True),
    ew.arccos: (lambda r, s, d: draw(r, s, d, -0.8, 0.8), True),
    ew.arctan: (lambda r, s, d: draw(r, s, d, 0.2, 2), True),
    ew.arcsinh: (lambda r, s, d: draw(r, s, d, 0.2, 2), True),
    ew.arccosh: (lambda r, s, d: draw(r, s, d, 1.2, 3), True),
    ew.arctanh: (lambda r, s, d: draw(r, s, d, -0.8, 0.8), True),
    ew.expm1: (lambda r, s, d: draw(r, s, d, -2, 2), True),
    ew.log1p: (lambda r, s, d: draw(r, s, d, -0.5, 2), True),
    ew.log2: (lambda r, s, d: draw(r, s, d, 0.5, 2), True),
    ew.log10: (lambda r, s, d: draw(r, s, d, 0.5, 2), True),
    ew.exp2: (lambda r, s, d: draw(r, s, d, -2, 2), True),
    ew.reciprocal: (lambda r, s, d: draw(r, s, d, 0.5, 2), True),
    ew.sinc: (lambda r, s, d: draw(r, s, d, -2.5, 2.5), True),
    ew.SincDerivative(1): (lambda r, s, d: draw(r, s, d, -2.5, 2.5), True),
    ew.deg2rad: (lambda r, s, d: draw(r, s, d, -2, 2), False),
    ew.rad2deg: (lambda r, s, d: draw(r, s, d, -2, 2), False),
    ew.floor: (away_from_integers, False),
    ew.ceil: (away_from_integers, False),
    ew.trunc: (away_from_integers, False),
    ew.rint: (lambda r, s, d: away_from_integers(r, s, d, 0.5), False),
    ew.Round(0): (lambda r, s, d: away_from_integers(r, s, d, 0.5), False),
    ew.Round(1): (lambda r, s, d: away_from_integers(r, s, d, 0.5) / 10, False),
}


def _name(op) -> str:
    return repr(op)


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
@pytest.mark.parametrize("op", list(UNARY), ids=_name)
@FEW
@given(shape=SHAPES, seed=SEEDS)
def test_unary_rules_to_second_order(op, dtype, shape, seed):
    make, takes_complex = UNARY[op]
    if np.dtype(dtype).kind == "c" and not takes_complex:
        return
    check_primitive(op, make(np.random.default_rng(seed), shape, dtype), order=2, rng=seed)


def _quotients_away_from_integers(r, s, d):
    y = nonzero(r, s, d)
    return [(away_from_integers(r, s, d) * y).astype(d), y]


BINARY = {  # op -> (inputs (rng, shape, dtype) -> [x, y], takes complex)
    ew.arctan2: (lambda r, s, d: [draw(r, s, d, -2, 2), nonzero(r, s, d)], False),
    ew.hypot: (lambda r, s, d: [nonzero(r, s, d), draw(r, s, d, -2, 2)], False),
    ew.logaddexp: (lambda r, s, d: [draw(r, s, d, -3, 3), draw(r, s, d, -3, 3)], False),
    ew.logaddexp2: (lambda r, s, d: [draw(r, s, d, -3, 3), draw(r, s, d, -3, 3)], False),
    ew.logaddexp_weight: (lambda r, s, d: [draw(r, s, d, -3, 3), draw(r, s, d, -3, 3)], False),
    ew.fmax: (lambda r, s, d: [x := draw(r, s, d, -2, 2), x + nonzero(r, s, d, 0.2, 1)], True),
    ew.fmin: (lambda r, s, d: [x := draw(r, s, d, -2, 2), x + nonzero(r, s, d, 0.2, 1)], True),
    ew.remainder: (_quotients_away_from_integers, False),
    ew.fmod: (_quotients_away_from_integers, False),
    ew.floor_divide: (_quotients_away_from_integers, False),
    ew.fmod_quotient: (_quotients_away_from_integers, False),
    ew.div: (lambda r, s, d: [draw(r, s, d, -2, 2), nonzero(r, s, d)], True),
    ew.div_conj: (lambda r, s, d: [draw(r, s, d, -2, 2), nonzero(r, s, d)], True),
    ew.div_or_zero: (lambda r, s, d: [draw(r, s, d, -2, 2), nonzero(r, s, d)], True),
    ew.div_or_zero_conj: (lambda r, s, d: [draw(r, s, d, -2, 2), nonzero(r, s, d)], True),
}


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
@pytest.mark.parametrize("op", list(BINARY), ids=_name)
@FEW
@given(shape=SHAPES, seed=SEEDS)
def test_binary_rules_to_second_order(op, dtype, shape, seed):
    make, takes_complex = BINARY[op]
    if np.dtype(dtype).kind == "c" and not takes_complex:
        return
    rng = np.random.default_rng(seed)
    args = make(rng, shape, dtype)
    if np.dtype(dtype).kind == "c" and op in (ew.div, ew.div_conj, ew.div_or_zero,
                                               ew.div_or_zero_conj):
        args[1] = args[1] + 1j * rng.uniform(-1, 1, shape)
    check_primitive(op, *args, order=2, rng=seed)


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
@FEW
@given(shape=SHAPES, seed=SEEDS)
def test_power_rules_to_second_order(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    x, y = draw(rng, shape, dtype, 0.5, 2), draw(rng, shape, dtype, -2, 2)
    check_primitive(ew.Power(shape, dtype), x, y, order=2, rng=seed)


@pytest.mark.parametrize("op", [ew.isnan, ew.isinf, ew.isfinite, ew.signbit, ew.fmax_weight],
                         ids=_name)
def test_predicates_and_weights_have_no_tangent(op):
    graph = one_op_graph(op)
    slots = list(range(op.input_count()))
    assert linearize(graph, graph.output_keys, slots).tangent_outputs == [None]


# --- sinc ----------------------------------------------------------------------------------


def test_sinc_derivatives_at_and_near_zero():
    d1 = tnp.grad(tnp.sinc)
    d2 = tnp.grad(d1)
    d3 = tnp.grad(d2)
    assert float(d1(0.0)) == 0.0
    np.testing.assert_allclose(float(d2(0.0)), -math.pi ** 2 / 3, rtol=1e-15)
    assert abs(float(d3(0.0))) < 1e-15                      # sinc is even
    # near 0 the closed forms cancel (cos(pi x) - sinc(x)) / x; the series does not
    for x in (1e-9, 1e-5, 0.3, 0.999, 1.001):
        series = -math.pi ** 2 * x / 3 + math.pi ** 4 * x ** 3 / 30 - math.pi ** 6 * x ** 5 / 840
        exact = (math.cos(math.pi * x) - math.sin(math.pi * x) / (math.pi * x)) / x
        want = series if x < 1e-3 else exact
        np.testing.assert_allclose(float(d1(x)), want, rtol=1e-13)
    # the same derivative in reverse and forward mode, complex included
    z = np.array([0.0, 1e-6 + 1e-6j, 0.5 - 0.2j])
    _, tangent = tnp.jvp(tnp.sinc, (z,), (np.ones(3, complex),))
    _, pullback = tnp.vjp(tnp.sinc, z)
    np.testing.assert_allclose(pullback(np.ones(3, complex))[0], np.conj(tangent), atol=1e-15)


def test_sinc_against_jax():
    jax = pytest.importorskip("jax", reason="JAX's sinc is the reference at 0")
    jax.config.update("jax_enable_x64", True)
    x = np.array([0.0, 0.5, -1.25, 2.0])
    want = np.array([jax.grad(jax.grad(jax.numpy.sinc))(v) for v in x])
    got = np.array([tnp.grad(tnp.grad(tnp.sinc))(v) for v in x])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


# --- power ---------------------------------------------------------------------------------

POWER_EDGES = [  # (x, y) -> (x ** y, d/dx, d/dy): JAX's values, except d/dx at 0 ** 0 (see below)
    ((0.0, 2.5), (0.0, 0.0, 0.0)),
    ((0.0, 1.0), (0.0, 1.0, 0.0)),
    ((0.0, 0.0), (1.0, 0.0, 0.0)),      # JAX (float exponent): d/dx is NaN; PyTorch and JAX's
    ((2.0, 0.0), (1.0, 0.0, math.log(2.0))),              # integer-exponent rule give 0
    ((0.0, 0.5), (0.0, math.inf, 0.0)),
    ((-2.0, 3.0), (-8.0, 12.0, math.nan)),                # log(-2): NaN, as JAX and PyTorch
    ((0.0, -1.0), (math.inf, -math.inf, math.nan)),       # 0 * inf, as JAX
]


@pytest.mark.parametrize("point, expected", POWER_EDGES, ids=str)
def test_power_edge_values_and_derivatives(point, expected):
    x, y = (np.array(v) for v in point)
    value, dx, dy = expected
    with np.errstate(all="ignore"):
        assert np.array_equal(tnp.power(x, y), value, equal_nan=True)
        gx, gy = tnp.grad(lambda a, b: tnp.power(a, b), argnums=(0, 1))(x, y)
    np.testing.assert_equal([float(gx), float(gy)], [dx, dy])


def test_power_mixed_second_derivatives_agree_at_exponent_zero():
    # d²(x**y)/dxdy = x**(y-1) (1 + y log x): 1/x at y = 0, whichever way it is taken
    f = lambda a, b: tnp.power(a, b)            # noqa: E731
    x, y = np.array(2.0), np.array(0.0)
    dxdy = tnp.grad(lambda b: tnp.grad(f, argnums=0)(x, b))(y)
    dydx = tnp.grad(lambda a: tnp.grad(f, argnums=1)(a, y))(x)
    np.testing.assert_allclose([float(dxdy), float(dydx)], [0.5, 0.5], rtol=1e-15)
    with np.errstate(all="ignore"):             # and finite at the origin, where x**0 is 1
        hessian = tnp.grad(lambda a: tnp.grad(f, argnums=0)(a, np.array(0.0)))(np.array(0.0))
    assert np.isfinite(hessian)


def test_power_with_a_traced_exponent_everywhere():
    y = np.array([0.5, -1.0, 2.0])
    want = np.log(2.0) * 2.0 ** y
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(tnp.power(2.0, v)))(y), want)
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(2.0 ** v))(y), want)
    np.testing.assert_allclose(tnp.jit(tnp.grad(lambda v: tnp.sum(2.0 ** v)))(y), want)
    base = np.array([1.5, 2.0, 3.0])
    x, e = tnp.tensor(base, requires_grad=True), tnp.tensor(y, requires_grad=True)
    grads = tnp.sum(x ** e).backward()
    np.testing.assert_allclose(grads.grad(x), y * base ** (y - 1))
    np.testing.assert_allclose(grads.grad(e), np.log(base) * base ** y)
    # a NumPy array exponent broadcasts and promotes as in NumPy
    out = tnp.power(np.ones((2, 1), np.float32), np.arange(3))
    assert out.shape == (2, 3) and out.dtype == np.power(np.ones((2, 1), np.float32),
                                                          np.arange(3)).dtype
    # a Python-number exponent keeps the fast constant-exponent ops
    graph = make_graph(lambda v: v ** 3 + v ** 0.5, np.ones(2)).graph
    assert {type(op.operation).__name__ for op in graph.operations} >= {"IntegerPow", "Pow"}
    assert "Power" not in {type(op.operation).__name__ for op in graph.operations}


# --- logaddexp, hypot, arctan2 ---------------------------------------------------------------


@pytest.mark.parametrize("fn", [tnp.logaddexp, tnp.logaddexp2], ids=lambda f: f.__name__)
def test_logaddexp_has_no_nan_gradient_at_infinities_or_large_inputs(fn):
    inf = np.inf
    x = np.array([-inf, -inf, 1.0, 1000.0, 1e308, inf, inf, 0.0])
    y = np.array([-inf, 1.0, -inf, 1000.0, 1e308, 1.0, inf, 2000.0])
    gx, gy = tnp.grad(lambda a, b: tnp.sum(fn(a, b)), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx, [0.5, 0.0, 1.0, 0.5, 0.5, 1.0, 0.5, 0.0])
    np.testing.assert_array_equal(gy, [0.5, 1.0, 0.0, 0.5, 0.5, 0.0, 0.5, 1.0])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(fn(x, y), getattr(np, fn.__name__)(x, y))


def test_logaddexp_second_derivative_is_stable():
    # d²/dx² logaddexp(x, 0) = s (1 - s), s = sigmoid(x): tiny, not NaN, far out
    d2 = tnp.grad(tnp.grad(lambda a: tnp.logaddexp(a, 0.0)))
    for x in (-800.0, -30.0, 0.0, 30.0, 800.0):
        small = math.exp(-abs(x))
        np.testing.assert_allclose(float(d2(x)), small / (1 + small) ** 2, rtol=1e-12,
                                   atol=1e-300)


def test_hypot_and_arctan2_at_the_origin_and_far_out():
    zero = np.array(0.0)
    for fn in (tnp.hypot, tnp.arctan2):
        gx, gy = tnp.grad(fn, argnums=(0, 1))(zero, zero)
        assert (float(gx), float(gy)) == (0.0, 0.0), fn.__name__
    big = np.array(1e200)
    gx, gy = tnp.grad(tnp.hypot, argnums=(0, 1))(big, big)
    np.testing.assert_allclose([gx, gy], [math.sqrt(0.5)] * 2, rtol=1e-15)
    gx, gy = tnp.grad(tnp.arctan2, argnums=(0, 1))(big, big)     # x2/(x1²+x2²): no overflow
    np.testing.assert_allclose([gx, gy], [0.5e-200, -0.5e-200], rtol=1e-14)
    # the angle of a complex 0 has derivative 0; of a real input, 0 everywhere
    assert tnp.grad(lambda z: tnp.angle(z))(np.array(0j)) == 0
    np.testing.assert_array_equal(
        tnp.grad(lambda v: tnp.sum(tnp.angle(v)))(np.array([-1.0, 0.0, -0.0, 2.0])), 0.0)


# --- remainders --------------------------------------------------------------------------------


def test_mod_sign_conventions_and_derivatives():
    x = np.array([-7.0, 7.0, -7.0, 7.0, -0.5, 5.5])
    y = np.array([2.0, -2.0, -2.0, 2.0, 2.0, -2.5])
    np.testing.assert_array_equal(tnp.remainder(x, y), np.remainder(x, y))     # sign of y
    np.testing.assert_array_equal(tnp.fmod(x, y), np.fmod(x, y))               # sign of x
    np.testing.assert_array_equal(tnp.remainder(x, y), [a % b for a, b in zip(x, y)])
    for fn, quotient in ((tnp.remainder, np.floor_divide(x, y)),
                         (tnp.fmod, np.trunc(x / y))):
        gx, gy = tnp.grad(lambda a, b: tnp.sum(fn(a, b)), argnums=(0, 1))(x, y)
        np.testing.assert_array_equal(gx, np.ones(6))
        np.testing.assert_array_equal(gy, -quotient)
    # the operators, on Tensors and traced values
    t = tnp.tensor(x, requires_grad=True)
    np.testing.assert_array_equal(tnp.sum(t % 2.0).backward().grad(t), np.ones(6))
    np.testing.assert_array_equal((t % 2.0).detach().numpy(), x % 2.0)
    np.testing.assert_array_equal((7.0 % tnp.tensor(y)).numpy(), 7.0 % y)
    np.testing.assert_array_equal((t // 2.0).detach().numpy(), x // 2.0)
    np.testing.assert_array_equal(tnp.jit(lambda a: (a % 3.0, 5.0 // a))(y),
                                  (y % 3.0, 5.0 // y))
    np.testing.assert_array_equal(tnp.grad(lambda b: tnp.sum(10.0 % b))(y),
                                  -np.floor_divide(10.0, y))
    np.testing.assert_array_equal(tnp.grad(lambda a: tnp.sum(a // 2.0))(x), np.zeros(6))


def test_mod_against_jax():
    jax = pytest.importorskip("jax", reason="JAX is the reference for mod's derivative")
    jax.config.update("jax_enable_x64", True)
    for jfn, fn in ((jax.numpy.remainder, tnp.remainder), (jax.numpy.fmod, tnp.fmod)):
        for x, y in ((-7.0, 2.0), (7.0, -2.0), (5.5, -2.5), (-0.25, 3.0)):
            want = jax.grad(jfn, argnums=(0, 1))(x, y)
            got = tnp.grad(fn, argnums=(0, 1))(np.array(x), np.array(y))
            np.testing.assert_array_equal(np.array(got, float), np.array(want, float))


# --- extrema with NaN, clip, nan_to_num -----------------------------------------------------------


def test_fmax_fmin_nan_and_ties():
    nan = np.nan
    x = np.array([nan, 1.0, nan, 2.0, 3.0])
    y = np.array([0.5, nan, nan, 2.0, 1.0])
    for fn, ties_pick in ((tnp.fmax, [0.0, 1.0, 1.0, 0.5, 1.0]),
                          (tnp.fmin, [0.0, 1.0, 1.0, 0.5, 0.0])):
        np.testing.assert_array_equal(fn(x, y), getattr(np, fn.__name__)(x, y))
        gx, gy = tnp.grad(lambda a, b: tnp.sum(fn(a, b)), argnums=(0, 1))(x, y)
        np.testing.assert_array_equal(gx, ties_pick)
        np.testing.assert_array_equal(gy, 1.0 - np.array(ties_pick))


def test_clip_matches_numpy_and_splits_ties_as_jax():
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, np.nan])
    np.testing.assert_array_equal(tnp.clip(x, 0.0, 1.0), np.clip(x, 0.0, 1.0))
    np.testing.assert_array_equal(tnp.clip(x, np.nan, 1.0), np.clip(x, np.nan, 1.0))
    np.testing.assert_array_equal(tnp.clip(x, 1.0, 0.0), np.clip(x, 1.0, 0.0))   # a_max wins
    g = tnp.grad(lambda v: tnp.sum(tnp.clip(v, 0.0, 1.0)))(x[:5])
    np.testing.assert_array_equal(g, [0.0, 0.5, 1.0, 0.5, 0.0])
    low = np.array([0.0, 0.0, 0.0, 0.0, 0.0])
    g_low = tnp.grad(lambda lo: tnp.sum(tnp.clip(x[:5], lo, 1.0)))(low)
    np.testing.assert_array_equal(g_low, [1.0, 0.5, 0.0, 0.0, 0.0])


def test_nan_to_num_passes_the_gradient_where_finite():
    x = np.array([1.5, np.nan, np.inf, -np.inf, -2.0, -0.0], np.float32)
    f = lambda v: tnp.sum(tnp.nan_to_num(v) * 3.0)          # noqa: E731
    want = np.array([3.0, 0, 0, 0, 3.0, 3.0], np.float32)
    for grad in (tnp.grad(f), tnp.jit(tnp.grad(f))):
        g = grad(x)
        assert g.dtype == np.float32
        np.testing.assert_array_equal(g, want)
    t = tnp.tensor(x, requires_grad=True)
    np.testing.assert_array_equal(tnp.sum(tnp.nan_to_num(t) * 3.0).backward().grad(t), want)
    out = tnp.nan_to_num(x)
    np.testing.assert_array_equal(out, np.nan_to_num(x))
    assert out.dtype == np.float32
    z = np.array([complex(np.nan, 1.0), complex(2.0, np.inf)])
    np.testing.assert_array_equal(tnp.nan_to_num(z, posinf=7.0), np.nan_to_num(z, posinf=7.0))
    gz = tnp.grad(lambda v: tnp.sum(tnp.real(tnp.nan_to_num(v) * np.conj([1 + 2j, 3 - 1j]))))(z)
    np.testing.assert_array_equal(gz, [2j, 3.0])           # the finite parts only
    ints = np.arange(3)
    assert tnp.nan_to_num(ints) is not ints and tnp.nan_to_num(ints).dtype == ints.dtype


def test_predicates_under_jit():
    x = np.array([1.0, np.nan, np.inf, -2.0])

    def f(v):
        finite = tnp.where(tnp.isnan(v), 0.0, tnp.where(tnp.isinf(v), 0.0, v))
        return tnp.sum(finite * finite), tnp.isfinite(v)

    total, finite = tnp.jit(f)(x)
    assert float(total) == 5.0 and finite.tolist() == [True, False, False, True]
    np.testing.assert_array_equal(tnp.grad(lambda v: f(v)[0])(x), [2.0, 0.0, 0.0, -4.0])
    assert tnp.signbit(np.array([-0.0, 0.0])).tolist() == [True, False]
    # NumPy's own predicates still answer on a tensor's data, as documented, as a Tensor
    # without grad (a Tensor in gives Tensors out, as tnp.isnan's: round 60c)
    answer = np.isnan(tnp.tensor(x, requires_grad=True))
    assert type(answer) is tnp.Tensor and not answer.requires_grad


def test_rounding_has_zero_derivative_not_an_error():
    x = np.array([-1.5, 0.3, 2.5, 2.675])
    for fn in (tnp.floor, tnp.ceil, tnp.trunc, tnp.rint, tnp.round, tnp.around,
               lambda v: tnp.round(v, 2)):
        np.testing.assert_array_equal(tnp.grad(lambda v: tnp.sum(fn(v) * v))(x), fn(x))
        t = tnp.tensor(x, requires_grad=True)
        got = tnp.sum(fn(t)).backward().grad(t)          # None: no gradient reached t
        assert got is None or not np.any(got)
    np.testing.assert_array_equal(tnp.round(x, 2), np.round(x, 2))
    np.testing.assert_array_equal(tnp.round(np.array([1.5 + 2.5j])), [2.0 + 2.0j])


# --- dtypes ------------------------------------------------------------------------------------

PROMOTING = ["sinh", "cosh", "tan", "arcsin", "arccos", "arctan", "arcsinh", "arctanh",
             "expm1", "log1p", "log2", "log10", "exp2", "sinc", "deg2rad", "rad2deg",
             "radians", "degrees", "fabs", "square", "reciprocal", "floor", "ceil", "trunc",
             "rint", "round", "isnan", "isfinite", "signbit", "angle", "nan_to_num"]


@pytest.mark.parametrize("name", PROMOTING)
@pytest.mark.parametrize("dtype", ["int8", "int16", "int64", "uint8", "bool", "float16"])
def test_integer_inputs_promote_as_in_numpy(name, dtype):
    x = np.arange(1, 4).astype(dtype)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x)
        got = getattr(tnp, name)(x)
        jitted = tnp.jit(getattr(tnp, name))(x)
    assert got.dtype == want.dtype and jitted.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["arctan2", "hypot", "logaddexp", "logaddexp2", "fmax", "fmin",
                                  "remainder", "fmod", "floor_divide", "copysign", "power"])
@pytest.mark.parametrize("dtypes", [("int8", "int8"), ("int16", "int64"), ("int32", "float32"),
                                    ("float32", "float64")], ids=str)
def test_binary_dtypes_as_in_numpy(name, dtypes):
    x, y = np.arange(1, 4).astype(dtypes[0]), np.arange(2, 5).astype(dtypes[1])
    got = getattr(tnp, name)(x, y)
    want = getattr(np, name)(x, y)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # a Python float is weak, as in NumPy
    assert getattr(tnp, name)(x.astype(np.float32), 2.0).dtype == np.float32


@pytest.mark.parametrize("name", ["arctan2", "hypot", "logaddexp", "logaddexp2", "remainder",
                                  "fmod", "floor_divide", "copysign"])
def test_real_only_functions_refuse_complex_input_like_numpy(name):
    z = np.array([1.0 + 1j])
    with pytest.raises(TypeError):
        getattr(np, name)(z, z)
    with pytest.raises(tnp.TensorTypeError, match=name):
        getattr(tnp, name)(z, z)
    with pytest.raises(tnp.TensorTypeError, match=name):
        tnp.grad(lambda v: tnp.real(getattr(tnp, name)(v, v)))(z)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "fabs", "deg2rad", "signbit"])
def test_real_only_unary_functions_refuse_complex_input(name):
    with pytest.raises(tnp.TensorTypeError, match=name):
        getattr(tnp, name)(np.array([1.0 + 1j]))
    assert tnp.ones_like(np.ones(1)).dtype == np.float64      # the library is still usable


# --- against PyTorch -----------------------------------------------------------------------------

TORCH_CASES = {  # name -> (torch function name, inputs (complex inputs where it takes them))
    "sinh": ("sinh", [0.3 + 0.2j, -1.1 + 0.5j]),
    "arcsin": ("asin", [0.3 + 0.2j, -0.6 - 0.1j]),
    "arccosh": ("acosh", [1.5 + 0.4j, 2.5 - 0.3j]),
    "arctanh": ("atanh", [0.3 + 0.2j, -0.6 - 0.1j]),
    "expm1": ("expm1", [1e-9 + 0j, 0.5 - 0.25j]),
    "log1p": ("log1p", [1e-9 + 0j, 0.5 - 0.25j]),
    "sinc": ("sinc", [0.3, -1.7]),      # near 0 PyTorch cancels: see the test above
    "reciprocal": ("reciprocal", [0.5 + 1j, -2.0 + 0.1j]),
}


@pytest.mark.parametrize("name", sorted(TORCH_CASES))
def test_unary_vjp_matches_torch(name):
    torch = pytest.importorskip("torch", reason="PyTorch is an independent oracle")
    torch_name, values = TORCH_CASES[name]
    x = np.array(values)
    ct = (np.array([0.7 - 0.3j, -1.2 + 0.4j]) if x.dtype.kind == "c" else np.array([0.7, -1.2]))
    _, pullback = tnp.vjp(getattr(tnp, name), x)
    leaf = torch.tensor(x, requires_grad=True)
    want = torch.autograd.grad(getattr(torch, torch_name)(leaf), leaf, torch.tensor(ct))[0]
    np.testing.assert_allclose(pullback(ct)[0], want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name, torch_name", [("power", "pow"), ("arctan2", "atan2"),
                                              ("hypot", "hypot"), ("logaddexp", "logaddexp"),
                                              ("remainder", "remainder"), ("fmod", "fmod"),
                                              ("copysign", "copysign")])
def test_binary_vjp_matches_torch(name, torch_name):
    torch = pytest.importorskip("torch", reason="PyTorch is an independent oracle")
    x, y = np.array([1.5, 0.7, 2.2, -3.1]), np.array([-0.6, 2.5, 1.3, 1.7])
    if name == "power":
        x = np.abs(x)
    ct = np.array([0.3, -1.1, 0.8, 2.0])
    _, pullback = tnp.vjp(getattr(tnp, name), x, y)
    leaves = [torch.tensor(v, requires_grad=True) for v in (x, y)]
    want = torch.autograd.grad(getattr(torch, torch_name)(*leaves), leaves, torch.tensor(ct))
    for got, expected in zip(pullback(ct), want):
        np.testing.assert_allclose(got, expected.numpy(), rtol=1e-12)


def test_complex_power_matches_torch_in_both_arguments():
    torch = pytest.importorskip("torch", reason="PyTorch is an independent oracle")
    x, y = np.array([1.5 + 0.5j, 0.3 - 0.8j]), np.array([0.7 - 0.2j, -1.5 + 0.3j])
    ct = np.array([0.4 + 1j, -0.3 + 0.2j])
    _, pullback = tnp.vjp(tnp.power, x, y)
    leaves = [torch.tensor(v, requires_grad=True) for v in (x, y)]
    want = torch.autograd.grad(torch.pow(*leaves), leaves, torch.tensor(ct))
    for got, expected in zip(pullback(ct), want):
        np.testing.assert_allclose(got, expected.numpy(), rtol=1e-12)


# --- the two fixes: exact scale factors, no conj in a real quotient's transpose ----------------


def test_scale_factors_compare_exactly():
    assert ew.Scale(0.0) != ew.Scale(-0.0) and ew.Scale(1) != ew.Scale(1.0) != ew.Scale(1 + 0j)
    assert ew.Scale(math.nan) == ew.Scale(math.nan) and ew.Scale(2.5) == ew.Scale(2.5)
    assert hash(ew.Scale(2.5)) == hash(ew.Scale(2.5))
    assert ew.Affine(1, 0.0) != ew.Affine(1, -0.0) and ew.Pow(2.0) != ew.Pow(2 + 0j)
    # one graph scaling one input by 0.0 and by -0.0: two nodes, two results
    b = GraphBuilder()
    x = b.add_input("x")
    [plus] = b.add_operation(ew.Scale(0.0), [Local(x)])
    [minus] = b.add_operation(ew.Scale(-0.0), [Local(x)])
    outs = [b.add_operation(ew.reciprocal, [Local(v)])[0] for v in (plus, minus)]
    b.set_outputs(outs)
    graph = b.build()
    with np.errstate(divide="ignore"):
        got = evaluate(graph, graph.output_keys, {Input("x"): np.array([1.0])})
    assert got[0][0] == np.inf and got[1][0] == -np.inf
    # and a float factor keeps a float32 array float32 where a complex 1+0j would not
    assert ew.Scale(1.0).eval(None, [np.ones(1, np.float32)])[0].dtype == np.float32


@pytest.mark.parametrize("op", [ew.div, ew.div_or_zero], ids=_name)
def test_real_quotient_transposes_without_conj(op):
    graph = one_op_graph(op)
    linear = linearize(graph, graph.output_keys, [0])
    transposed = linear_transpose(linear)
    names = [getattr(o.operation, "name", "") for o in transposed.graph.operations]
    assert "conj" not in names, names
    x, y = np.array([1.0, 2.0]), np.array([4.0, -0.5])
    np.testing.assert_allclose(jvp_of(op, [x, y], {0: np.ones(2)}), 1 / y)
