"""Hostile round 52: ``tnp.random``, ``fixed_point`` and ``odeint`` at their edges: scaled
losses, bad tolerances and times, mis-shaped right-hand sides, copies of generators and
seeding under ``jit``; each test failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.fixedpoint import fixed_point


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

