"""Regressions found by a hostile hunt over the numeric libraries (``scipy``, ``random``,
``ode``, ``fixed_point``): each failed before its fix."""

import math
import warnings

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import fixedpoint, ode
from primitives.tensor import random as tr
from primitives.tensor.scipy import special
from tidu import TiduError

pytest.importorskip("scipy", reason="primitives.tensor.scipy computes with SciPy")


def _nth_grad(f, n):
    for _ in range(n):
        f = tnp.grad(f)
    return f


# --- scipy.special: erfcx and log_ndtr derivatives far in the tails ----------------------------


def _erfcx_asymptotic_derivative(x: float, n: int) -> float:
    """The ``n``-th derivative of ``erfcx``'s asymptotic series at large ``x``."""
    total, coefficient = 0.0, 1 / math.sqrt(math.pi)
    for k in range(6):
        m = 2 * k + 1
        total += coefficient * (-1) ** n * math.prod(range(m, m + n)) * x ** -(m + n)
        coefficient *= -(2 * k + 1) / 2
    return total


@pytest.mark.parametrize("x", [50.0, 1e4, 1e8])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_erfcx_derivatives_do_not_cancel_at_large_x(x, n):
    # 2 x erfcx(x) - 2/sqrt(pi) cancelled: erfcx'(1e8) was 0, erfcx''(1e4) 3.4 times too big
    np.testing.assert_allclose(_nth_grad(special.erfcx, n)(x),
                               _erfcx_asymptotic_derivative(x, n), rtol=1e-9)


def test_erfcx_derivatives_agree_across_the_series_switch():
    x = np.array([-3.0, 0.5, 7.999, 8.0, 8.001, 20.0])
    first = tnp.vmap(tnp.grad(special.erfcx))(x)
    h = 1e-5
    central = (special.erfcx(x + h) - special.erfcx(x - h)) / (2 * h)
    np.testing.assert_allclose(first, central, rtol=1e-8)
    second = tnp.jit(tnp.vmap(_nth_grad(special.erfcx, 2)))(x)
    np.testing.assert_allclose(second, 2 * special.erfcx(x) + 2 * x * first, rtol=1e-6)


def test_log_ndtr_second_derivative_is_finite_where_erfcx_overflows():
    x = np.array([40.0, 700.0])
    second = tnp.vmap(_nth_grad(special.log_ndtr, 2))(x)
    assert np.all(np.isfinite(second))                         # was NaN (inf / inf)
    pdf = np.exp(-0.5 * 40.0 ** 2) / math.sqrt(2 * math.pi)    # -r (x + r), r = pdf
    np.testing.assert_allclose(second[0], -pdf * (40.0 + pdf), rtol=1e-12)
    assert second[1] == 0.0


def test_log_ndtr_derivatives_match_mpmath():
    mp = pytest.importorskip("mpmath", reason="mpmath gives the reference derivatives")
    mp.mp.dps = 50
    for x in (-1e4, -40.0, -3.0, 0.5, 6.0):
        for n in (1, 2):
            expected = float(mp.diff(lambda t: mp.log(mp.ncdf(t)), x, n))
            np.testing.assert_allclose(_nth_grad(special.log_ndtr, n)(x), expected,
                                       rtol=1e-10)


# --- scipy.special: the scaled Bessel functions far out -------------------------------------

FAR = np.array([1e10, -1e12, 1e17, -1e17, 1e300, np.inf, -np.inf])


def _mp_ive(mp, n: int, x: float):
    if math.isinf(x):
        return mp.mpf(0)
    return mp.besseli(n, x) * mp.exp(-abs(mp.mpf(x)))


@pytest.mark.parametrize("n", [2, 3, 5])
def test_ive_past_scipys_range_matches_mpmath(n):
    # SciPy's ive(n, x) is NaN from |x| ~ 1e10 and at ±inf; the derivatives of i1e (and the
    # second of i0e) read ive(2, x), so they were NaN there
    mp = pytest.importorskip("mpmath", reason="mpmath gives the reference values")
    mp.mp.dps = 40
    got = special.Special("ive", n).eval(None, [FAR])[0]
    expected = np.array([float(_mp_ive(mp, n, x)) for x in FAR])
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=0)
    assert np.all(np.signbit(got[-2:]) == [False, n % 2 == 1])      # ±0 at ±inf, as sign**n
    assert np.isnan(special.Special("ive", n).eval(None, [np.array([np.nan])])[0][0])


def test_ive_series_agrees_with_scipy_where_scipy_is_right():
    from primitives.tensor.scipy._ops import _ive_far, scipy_special
    x = np.array([1e6, -1e7, 3e8, 1e9])
    for n in range(2, 11):
        np.testing.assert_allclose(_ive_far(np, n, x), scipy_special().ive(n, x), rtol=5e-15)


def test_i1e_and_i0e_derivatives_are_finite_far_out():
    mp = pytest.importorskip("mpmath", reason="mpmath gives the reference derivatives")
    mp.mp.dps = 60
    first = tnp.vmap(tnp.grad(special.i1e))(FAR)
    second = tnp.jit(tnp.vmap(_nth_grad(special.i0e, 2)))(FAR)
    assert np.all(np.isfinite(first)) and np.all(np.isfinite(second))    # were NaN
    for x, d1, d2 in zip(FAR, first, second):
        if math.isinf(x):
            assert d1 == 0.0 and d2 == 0.0
            continue
        s = mp.sign(x)
        i0e, i1e, i2e = (_mp_ive(mp, k, x) for k in (0, 1, 2))
        # i1e' = (i0e + ive2)/2 - sign i1e, i0e'' = (i0e + ive2)/2 - 2 sign i1e + i0e; both
        # cancel to far below the values, so the bound is set by the values' own rounding
        scale = float(i0e) * 1e-15
        assert abs(d1 - float((i0e + i2e) / 2 - s * i1e)) <= scale
        assert abs(d2 - float((i0e + i2e) / 2 - 2 * s * i1e + i0e)) <= scale


def test_i1e_derivatives_far_out_compose_with_jit_and_vmap_in_both_orders():
    direct = tnp.vmap(tnp.grad(special.i1e))(FAR)
    np.testing.assert_array_equal(tnp.jit(tnp.vmap(tnp.grad(special.i1e)))(FAR), direct)
    np.testing.assert_array_equal(tnp.grad(lambda v: tnp.sum(tnp.vmap(special.i1e)(v)))(FAR),
                                  direct)
    assert np.all(np.isfinite(direct))


def test_i1e_derivative_far_out_agrees_with_jax(jx):
    jax, _ = jx
    from jax.scipy.special import i1e as jax_i1e
    expected = np.asarray(jax.vmap(jax.grad(jax_i1e))(FAR[:-1]))
    np.testing.assert_allclose(tnp.vmap(tnp.grad(special.i1e))(FAR[:-1]), expected,
                               rtol=0, atol=1e-21)


# --- random: the axis argument of Generator.permutation and choice -----------------------------


def test_generator_permutation_of_a_tensor_takes_a_positional_axis():
    x = np.arange(12.0).reshape(3, 4)
    expected = np.random.default_rng(0).permutation(x, 1)
    out = tr.default_rng(0).permutation(tnp.tensor(x, requires_grad=True), 1)
    np.testing.assert_array_equal(out.data, expected)          # was permuted along axis 0


def test_generator_choice_of_a_tensor_takes_a_positional_axis():
    x = np.arange(12.0).reshape(3, 4)
    expected = np.random.default_rng(0).choice(x, 2, True, None, 1)
    t = tnp.tensor(x, requires_grad=True)
    out = tr.default_rng(0).choice(t, 2, True, None, 1)
    np.testing.assert_array_equal(out.data, expected)
    grad = tnp.sum(out).backward().grad(t)
    np.testing.assert_array_equal(grad, np.zeros_like(x) + np.isin(x, expected))


def test_legacy_choice_of_a_matrix_tensor_raises_as_numpy():
    with pytest.raises(ValueError):
        np.random.RandomState(0).choice(np.ones((2, 2)))
    with pytest.raises(TiduError, match="RandomState.choice: a must be 1-dimensional"):
        tr.RandomState(0).choice(tnp.tensor(np.ones((2, 2))))
    with pytest.raises(TiduError, match="tnp.random.choice"):
        tr.choice(tnp.tensor(np.ones((2, 2))))


# --- ode ----------------------------------------------------------------------------------------


def test_odeint_over_a_tiny_interval():
    # an accepted step cut short to land on t[1] counted as the step size collapsing
    for t in (np.array([0.0, 1e-20]), np.array([0.0, 1.0, 1.0 + 1e-15])):
        ys = ode.odeint(lambda y, s: -y, np.array([1.0]), t)
        np.testing.assert_allclose(ys[:, 0], np.exp(t[0] - t), rtol=1e-7)


def test_odeint_complex_state_gradient_in_a_real_parameter():
    # the adjoint state was cast to float64: the imaginary part was dropped, silently
    y0, ts = np.array([1.0 + 2.0j]), np.array([0.0, 1.0])
    rotation = 1.0 + 1.0j

    def loss(k):
        return tnp.real(tnp.sum(ode.odeint(lambda y, t, k: k * y * rotation, y0, ts, k)[-1]))

    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        grad = tnp.grad(loss)(np.array(-0.5))
    expected = np.real(y0 * rotation * np.exp(-0.5 * rotation))[0]
    np.testing.assert_allclose(grad, expected, rtol=1e-6)


def test_odeint_complex_parameter_gradient():
    y0, ts = np.array([1.0 + 1.0j]), np.array([0.0, 1.0])
    k = np.array(-0.5 + 2.0j)

    def loss(k):
        return tnp.real(tnp.sum(ode.odeint(lambda y, t, k: k * y, y0, ts, k)[-1]))

    # d Re(y0 exp(k)) along a real and an imaginary step of k (tidu's complex convention)
    grad = tnp.grad(loss)(k)
    derivative = y0[0] * np.exp(k)
    np.testing.assert_allclose(grad, np.conj(derivative), rtol=1e-6)


# --- fixed_point --------------------------------------------------------------------------------


def test_fixed_point_result_does_not_alias_the_start():
    x0 = np.array([1.0, 2.0])
    out = fixedpoint.fixed_point(lambda a, x: x, np.array(1.0), x0)
    assert not np.shares_memory(out, x0)
    np.testing.assert_array_equal(out, x0)
