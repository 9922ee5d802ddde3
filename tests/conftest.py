"""Fixtures shared by the test modules."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from benchmark_helpers import ROOT, benchmark_env
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.transforms import functional
from primitives.tensor.transforms.retrace import RetraceBuilder


@pytest.fixture
def sin_counter(monkeypatch):
    """Count evaluations of the ``sin`` primitive (eager and traced): ``count[0]``."""
    count = [0]
    rules = ew._UNARY["sin"]

    def counting_sin(a):
        count[0] += 1
        return np.sin(a)

    monkeypatch.setitem(ew._UNARY, "sin", rules._replace(fn=counting_sin))
    return count


@pytest.fixture
def jx():
    """``(jax, jax.numpy)`` with float64 enabled, restored afterwards; the test skips (with
    the reason) where JAX is not installed, as in CI: tidu's own checks run without it."""
    jax = pytest.importorskip("jax", reason="JAX is not installed: its comparisons are "
                                            "skipped (tidu's own checks still run)")
    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    try:
        yield jax, jax.numpy
    finally:
        jax.config.update("jax_enable_x64", previous)


@pytest.fixture
def no_templates(monkeypatch):
    """No retrace template kept from earlier tests: the first trace of each function is made
    anew (``transforms/retrace.py``)."""
    monkeypatch.setattr(functional, "_TEMPLATES", {})
    monkeypatch.setattr(functional, "_template_ops", [0])


@pytest.fixture
def repeated(monkeypatch):
    """Per retraced call, whether it followed its template to the end (built nothing)."""
    seen = []
    build = RetraceBuilder.build

    def spied(self):
        graph = build(self)
        seen.append(graph is self._template)
        return graph
    monkeypatch.setattr(RetraceBuilder, "build", spied)
    return seen


@pytest.fixture(scope="session")
def quick_benchmark_run(tmp_path_factory):
    """One ``python -m benchmarks --quick --json`` run, shared by the tests that read it
    (``test_benchmarks.py``, ``test_benchmark_table.py``): ``(json path, its content, the
    printed output)``. The run itself fails the tests that use it if it fails."""
    path = tmp_path_factory.mktemp("bench") / "bench.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--json", str(path)],
                          cwd=ROOT, env=benchmark_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return path, json.loads(path.read_text()), done.stdout
