"""``examples/per_example_gradients.py``: vmap(grad(loss)) agrees with a loop of grad calls,
its norms are the loop's, and the clipped, noised DP-SGD steps still learn the digits."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def example():
    pytest.importorskip("sklearn", reason="the example needs scikit-learn (the examples extra)")
    spec = importlib.util.spec_from_file_location(
        "per_example_gradients", ROOT / "examples" / "per_example_gradients.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_per_example_gradients_match_the_loop_and_dp_sgd_learns(example, capsys):
    result = example.main(["--batch", "16", "--steps", "60"])
    assert result["max_loop_difference"] < 1e-12
    assert result["norms"].shape == (16,) and np.all(result["norms"] > 0)
    assert result["accuracy_after"] > max(0.5, result["accuracy_before"] + 0.2)
    assert "max difference from the loop" in capsys.readouterr().out


def test_clipping_bounds_every_example_and_noise_zero_is_the_clipped_mean(example):
    rng = np.random.default_rng(3)
    params = example.init_params(rng, [64, 8, 10])
    x, onehot = rng.random((5, 64)), np.eye(10)[rng.integers(10, size=5)]
    grads = [example.tnp.grad(example.loss)(params, xi, yi) for xi, yi in zip(x, onehot)]
    clip = 0.5 * float(np.min([np.sqrt(sum(np.sum(g ** 2) for g in gs)) for gs in grads]))
    new = example.dp_sgd_step(params, x, onehot, rng, clip=clip, noise=0.0, lr=1.0)
    for k, p in enumerate(params):
        # every norm is above clip, so each gradient is scaled to norm exactly clip
        want = sum(gs[k] * clip / np.sqrt(sum(np.sum(g ** 2) for g in gs)) for gs in grads)
        np.testing.assert_allclose(new[k], p - want / 5, rtol=1e-10, atol=1e-12)
