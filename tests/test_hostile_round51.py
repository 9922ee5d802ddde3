"""Hostile round 51: linear algebra, FFT, ``scipy.special``/``scipy.stats``, ``nn``,
``random``, ``odeint`` and ``fixed_point`` at their edges, against finite differences, the
dot-product test and JAX/PyTorch/SciPy."""

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.ops.linalg import LinAlgError

# --- linalg: derivatives that do not exist name their function ---------------------------


@pytest.mark.parametrize("name, f", [
    ("slogdet", lambda a: tnp.linalg.slogdet(a)[1]),
    ("qr", lambda a: tnp.sum(tnp.linalg.qr(a)[1])),
])
def test_singular_derivative_names_the_function(name, f):
    singular = np.diag([1.0, 2.0, 0.0])
    with pytest.raises(LinAlgError, match=f"^{name}: "):
        tnp.grad(f)(singular)
    with pytest.raises(LinAlgError, match=f"^{name}: "):
        tnp.vmap(tnp.grad(f))(np.stack([np.eye(3), singular]))
    np.testing.assert_allclose(tnp.grad(lambda a: tnp.linalg.slogdet(a)[1])(2 * np.eye(3)),
                               0.5 * np.eye(3))


# --- scipy.special ----------------------------------------------------------------------


@pytest.mark.parametrize("x", [[np.inf, 0.0], [np.inf, -np.inf], [np.inf, np.inf],
                               [-np.inf, -np.inf], [-np.inf, 0.0], [np.nan, 1.0], [1.0, 2.0]])
def test_scipy_softmax_infinite_entries_as_scipy(x):
    special = pytest.importorskip("scipy.special")
    x = np.array([x, [0.0, 1.0]])
    with np.errstate(invalid="ignore"):
        expected = special.softmax(x, axis=1)
    np.testing.assert_array_equal(tnp.scipy.special.softmax(x, axis=1), expected)
    np.testing.assert_array_equal(tnp.jit(lambda v: tnp.scipy.special.softmax(v, axis=1))(x),
                                  expected)
