"""``examples/newton_step.py``: Newton-CG with eager HVPs beats gradient descent.

Run small: a subset of the breast-cancer data, a few Newton steps against many
more gradient-descent steps. Newton must reach a lower loss in fewer steps, and
its Hessian-vector products must match finite differences of gradients.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "newton_step.py"


def load_newton_step():
    pytest.importorskip("sklearn", reason="newton_step.py needs scikit-learn (the test extra)")
    spec = importlib.util.spec_from_file_location("newton_step", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_newton_reaches_a_lower_loss_in_fewer_steps(capsys):
    result = load_newton_step().main(["--newton-steps", "5", "--gd-steps", "100",
                                      "--subset", "300"])
    newton, descent = result["newton"], result["gradient_descent"]
    assert len(newton) - 1 == 5 and len(descent) - 1 == 100
    assert newton[-1] < descent[-1]                        # 5 Newton steps beat 100 GD steps
    assert all(b < a for a, b in zip(newton[:4], newton[1:5]))    # monotone while converging
    assert newton[0] == descent[0]                         # both start from zero weights
    assert result["gd_steps_to_match"] is None
    assert result["hvp_products"] > 5                      # CG used several HVPs per step
    assert result["hvp_error"] < 1e-6
    out = capsys.readouterr().out
    assert "Newton-CG loss" in out and "gradient descent loss" in out


def test_conjugate_gradient_solves_a_known_system():
    import numpy as np

    module = load_newton_step()
    a = np.array([[4.0, 1.0], [1.0, 3.0]])
    g = [np.array([1.0, 2.0])]
    p, used = module.conjugate_gradient(lambda v: [a @ v[0]], g, 10, 1e-12)
    np.testing.assert_allclose(a @ p[0], -g[0], rtol=1e-12)
    assert used == 2                                        # exact in n steps for n = 2
