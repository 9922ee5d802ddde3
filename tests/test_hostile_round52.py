"""Hostile round 52: ``tnp.random``, ``fixed_point`` and ``odeint`` at their edges: scaled
losses, bad tolerances and times, mis-shaped right-hand sides, copies of generators and
seeding under ``jit``; each test failed before its fix."""

from __future__ import annotations

import contextlib
import copy
import pickle
import signal

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import random as tr
from primitives.tensor.fixedpoint import fixed_point
from primitives.tensor.ode import odeint
from tidu import TiduError

T = np.array([0.0, 0.5, 1.0])


def decay(y, t):
    return -y


@contextlib.contextmanager
def within(seconds: float):
    """Fail (instead of hanging the run) if the block takes longer than ``seconds``."""
    def expire(*_):
        raise AssertionError(f"did not finish within {seconds} s (an endless loop)")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --- fixed_point ----------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1e-6, 1e-9, 1e-12])
def test_fixed_point_derivative_of_a_scaled_loss_scales(scale):
    # the adjoint iteration stopped at an absolute tol: for a loss scaled by 1e-12 it took
    # one step, and the gradient came out 25% low (1.5e-12 for 2e-12), silently
    f = lambda a, x: 0.5 * x + a                             # noqa: E731  x* = 2a
    g = tnp.grad(lambda a: scale * fixed_point(f, a, np.array(0.0)))(np.array(1.0))
    assert float(g) == pytest.approx(2.0 * scale, rel=1e-8)
    a = tnp.tensor(np.array([1.0, 3.0]), requires_grad=True)
    (scale * tnp.sum(fixed_point(f, a, np.zeros(2)))).backward()
    np.testing.assert_allclose(a.grad, 2.0 * scale, rtol=1e-8)


def test_fixed_point_integer_leaf_in_a_is_a_constant():
    # a count in the parameters (odeint's args may hold one) made the derivative raise
    # "vjp: argument 0 has dtype int64": the whole of a was differentiated
    f = lambda a, x: 0.5 * x + a["w"] * a["n"]                # noqa: E731  x* = 2 n w
    g = tnp.grad(lambda w: fixed_point(f, {"w": w, "n": 3}, np.array(0.0)))(np.array(1.0))
    assert float(g) == pytest.approx(6.0, rel=1e-8)
    g = tnp.grad(lambda w: tnp.sum(fixed_point(f, {"w": w, "n": np.array([1, 2])},
                                               np.zeros(2))))(np.array(1.0))
    assert float(g) == pytest.approx(6.0, rel=1e-8)
    g = tnp.grad(lambda x0: fixed_point(lambda a, x: 0.5 * x + a, 3, x0))(np.array(0.0))
    assert float(g) == 0.0                                   # the start: a zero derivative


@pytest.mark.parametrize("kwargs", [dict(tol="tiny"), dict(tol=None), dict(max_iter=None),
                                    dict(max_iter=float("inf")), dict(max_iter="10")])
def test_fixed_point_bad_settings_name_the_function(kwargs):
    newton = lambda a, x: 0.5 * (x + a / x)                  # noqa: E731
    with pytest.raises(TiduError, match="fixed_point: (tol|max_iter) must be a"):
        fixed_point(newton, np.array(2.0), np.array(1.0), **kwargs)
    assert float(fixed_point(newton, np.array(4.0), np.array(1.0))) == 2.0   # still usable


def test_a_function_that_is_not_callable_names_the_solver():
    with pytest.raises(TiduError, match="fixed_point: f must be callable"):
        fixed_point(None, np.array(2.0), np.array(1.0))
    with pytest.raises(TiduError, match="odeint: func must be callable"):
        odeint(3, np.ones(1), T)


# --- odeint: inputs that looped for ever ------------------------------------------------------


@pytest.mark.parametrize("t", [[0.0, np.inf], [-np.inf, 0.0], [0.0, 1.0, np.inf]])
def test_odeint_infinite_times_raise(t):
    with within(10), pytest.raises(TiduError, match="odeint: the times t must be finite"):
        odeint(decay, np.ones(1), np.array(t))


@pytest.mark.parametrize("kwargs", [dict(rtol=0.0, atol=0.0), dict(rtol=np.nan),
                                    dict(atol=np.inf), dict(rtol=-1e-8), dict(atol=-1.0),
                                    dict(mxstep=np.nan)])
def test_odeint_bad_tolerances_raise(kwargs):
    with within(10), pytest.raises(TiduError, match="odeint: "):
        odeint(decay, np.ones(1), T, **kwargs)
    np.testing.assert_allclose(odeint(decay, np.ones(1), T)[:, 0], np.exp(-T), rtol=1e-7)


@pytest.mark.parametrize("kwargs", [dict(rtol="small"), dict(atol=None), dict(mxstep=[1])])
def test_odeint_tolerances_of_the_wrong_type_name_odeint(kwargs):
    with pytest.raises(TiduError, match="odeint: "):
        odeint(decay, np.ones(1), T, **kwargs)


@pytest.mark.parametrize("case", ["nan y0", "inf y0", "nan func"])
def test_odeint_non_finite_state_raises_instead_of_looping(case):
    # a NaN step size passed the "step size fell" check (h <= ...), and the loop never ended
    y0, func = np.ones(1), decay
    if case == "nan y0":
        y0 = np.array([np.nan])
    elif case == "inf y0":
        y0 = np.array([np.inf])
    else:
        func = lambda y, t: y * np.nan                       # noqa: E731
    with within(10), np.errstate(all="ignore"), \
            pytest.raises(TiduError, match="odeint: the step size fell"):
        odeint(func, y0, T)


def test_odeint_pure_relative_tolerance_with_a_zero_element():
    # atol=0 where an element of the state is 0: 0 / 0 in the error ratio made the first
    # step NaN, and the loop never ended
    with within(10):
        ys = odeint(decay, np.array([1.0, 0.0]), T, atol=0.0)
        assert (odeint(lambda y, t: 0 * y, np.zeros(2), T, atol=0.0) == 0.0).all()
    np.testing.assert_allclose(ys[:, 0], np.exp(-T), rtol=1e-7)
    assert (ys[:, 1] == 0.0).all()


# --- odeint: a right-hand side of the wrong shape or kind ----------------------------------


def test_odeint_func_of_the_wrong_size_raises():
    # a scalar derivative for a state of two was broadcast silently; a leaf of the wrong size
    # in a pytree state took the next leaf's elements, silently
    with pytest.raises(TiduError, match=r"odeint: func returned shape \(\) for a state "
                                        r"leaf of shape \(2,\)"):
        odeint(lambda y, t: -1.0, np.ones(2), T)
    with pytest.raises(TiduError, match=r"odeint: func returned shape \(3,\)"):
        odeint(lambda y, t: tnp.concatenate([y, y[:1]]), np.ones(2), T)
    swapped = lambda s, t: {"a": np.array([0.0]), "b": np.array([1.0, 2.0])}   # noqa: E731
    with pytest.raises(TiduError, match=r"odeint: func returned shape \(1,\) for a state "
                                        r"leaf of shape \(2,\)"):
        odeint(swapped, {"a": np.ones(2), "b": np.ones(1)}, T)
    with pytest.raises(TiduError, match="odeint: func returned shape"):
        tnp.grad(lambda y0: tnp.sum(odeint(lambda y, t: tnp.sum(y), y0, T)))(np.ones(2))
    # the same number of elements is the state's (JAX's odeint ravels func's result)
    np.testing.assert_allclose(odeint(lambda y, t: -tnp.sum(y), np.ones(1), T)[:, 0],
                               np.exp(-T), rtol=1e-7)


def test_odeint_complex_derivative_of_a_real_state_raises():
    # the imaginary part was dropped with a ComplexWarning: y stayed 1 for dy/dt = i y
    with pytest.raises(TiduError, match="odeint: func returned complex values for a real "
                                        "state leaf"):
        odeint(lambda y, t: 1j * y, np.ones(1), T)
    with pytest.raises(TiduError, match="complex values for a real"):
        odeint(lambda s, t: (1j * s[0], s[1]), (np.ones(1), np.ones(1, complex)), T)
    ys = odeint(lambda y, t: 1j * y, np.ones(1, complex), T)           # a complex state: fine
    np.testing.assert_allclose(ys[:, 0], np.exp(1j * T), rtol=1e-7)



# --- random ---------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [lambda: tr.default_rng(0), lambda: tr.RandomState(0)])
@pytest.mark.parametrize("duplicate", [copy.copy, copy.deepcopy,
                                       lambda g: pickle.loads(pickle.dumps(g))])
def test_copies_of_a_generator_still_refuse_draws_under_jit(make, duplicate):
    # NumPy's __reduce__ rebuilt NumPy's class: a copied generator drew once inside jit and
    # every call returned that same sample, silently
    rng = make()
    twin = duplicate(rng)
    assert type(twin) is type(rng)
    np.testing.assert_array_equal(twin.normal(size=3), make().normal(size=3))  # its state
    with pytest.raises(tr.TracedRandomError, match="normal"):
        tnp.jit(lambda x: x + duplicate(rng).normal(size=2))(np.zeros(2))



@pytest.mark.parametrize("call", [lambda: tr.seed(0), lambda: tr.set_state(tr.get_state())])
def test_seeding_under_jit_raises(call):
    # the state was set once, while jit traced: later calls did not reseed, silently
    with pytest.raises(tr.TracedRandomError, match="tnp.random.(seed|set_state) was called "
                                                   "while jit"):
        tnp.jit(lambda x: (call(), x * 2)[1])(np.ones(1))
    with pytest.raises(tr.TracedRandomError, match="vmap"):
        tnp.vmap(lambda x: (call(), x * 2)[1])(np.ones(2))
    call()                                                   # outside: allowed
    tr.seed(0)
    a = tr.randn()
    tr.seed(0)
    assert tr.randn() == a                                   # and still usable


@pytest.mark.parametrize("method", ["seed", "set_state"])
def test_random_state_methods_under_jit_raise(method):
    # rs.seed(1) inside f ran once, while jit traced: later calls did not reseed, silently
    rs = tr.RandomState(0)
    call = (lambda: rs.seed(1)) if method == "seed" else (lambda: rs.set_state(rs.get_state()))
    for transform in (tnp.jit, tnp.vmap):
        with pytest.raises(tr.TracedRandomError, match=f"RandomState.{method} was called while "
                                                       f"{transform.__name__}"):
            transform(lambda x: (call(), x * 2)[1])(np.ones(2))
    rs.seed(5)                                               # outside: allowed, and reseeds
    np.testing.assert_array_equal(rs.normal(size=3), np.random.RandomState(5).normal(size=3))


def test_random_state_copies_under_jit_are_not_reseeding():
    # copy and pickle restore a state through __setstate__: allowed anywhere, state kept
    rs = tr.RandomState(2)
    rs.normal(size=4)
    ahead = copy.deepcopy(rs)
    assert type(ahead) is tr.RandomState
    np.testing.assert_array_equal(ahead.normal(size=3), rs.normal(size=3))
    out = tnp.jit(lambda x: (copy.deepcopy(rs), x * 2)[1])(np.ones(2))
    np.testing.assert_array_equal(out, [2.0, 2.0])
