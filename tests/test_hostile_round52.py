"""Hostile round 52: ``tnp.random``, ``fixed_point`` and ``odeint`` at their edges: scaled
losses, bad tolerances and times, mis-shaped right-hand sides, copies of generators and
seeding under ``jit``; each test failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.fixedpoint import fixed_point
from primitives.tensor.ode import odeint
from tidu import TiduError

T = np.array([0.0, 0.5, 1.0])


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

