"""``python -m benchmarks.memory_budget --quick`` runs end to end and its rows are sane (issue 25).

It runs in a subprocess, as ``tests/test_benchmarks.py`` runs ``python -m benchmarks``:
the benchmark sets the thread variables and starts every configuration in fresh
processes of its own. Checked here: every configuration has its row, the peaks are
measured (tracemalloc's positive for tidu; resident memory never negative, and positive
for the MLP, whose arrays are big enough to show), every gradient agrees with
``jit(grad)``'s, and each budget row either ran within its budget's reach or reports the
smallest feasible budget, which then has a row of its own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ("mlp", "recurrence")
FRACTIONS = (0.5, 0.2, 0.05)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("memory_budget") / "rows.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS"):
        env.pop(name, None)                   # the benchmark's own default: one thread
    done = subprocess.run([sys.executable, "-m", "benchmarks.memory_budget", "--quick",
                           "--json", str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tidu jit(grad)" in done.stdout        # the table was printed
    return json.loads(out.read_text())


def _rows(rows, problem, config):
    return [row for row in rows if row["problem"] == problem and row["config"] == config]


def _measured(row) -> None:
    """A row that ran: its time, its peaks, and gradients that agree with jit(grad)'s."""
    assert "error" not in row, row
    assert row["ms"] > 0 and row["first_call_s"] > 0, row
    assert row["rss_peak_mb"] >= 0, row
    if row["problem"] == "mlp":
        assert row["rss_peak_mb"] > 0, row
    if row["library"] == "tidu":
        assert row["tracemalloc_peak_mb"] > 0, row
    assert row["grads_agree"] is True, row


@pytest.mark.parametrize("problem", PROBLEMS)
def test_jit_and_eager_rows(rows, problem):
    [reference] = _rows(rows, problem, "tidu jit(grad)")
    _measured(reference)
    assert reference["grads_check"] == "the reference"
    [eager] = _rows(rows, problem, "tidu eager Tensor")
    _measured(eager)
    assert eager["workload"] == "memory budget" and isinstance(eager["peers"], dict)
    [balanced] = _rows(rows, problem, "tidu eager Tensor, balanced")
    _measured(balanced)                 # its gradients are the reference's (grads_agree)


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("library, configs", [
    ("torch", ("torch autograd", "torch checkpoint")),
    ("jax", ("jax.jit(grad)", "jax.jit(grad), jax.checkpoint"))])
def test_peer_rows(rows, problem, library, configs):
    for config in configs:
        [row] = _rows(rows, problem, config)
        if importlib.util.find_spec(library) is None:
            assert "not installed" in row["note"], row
            continue
        _measured(row)
        assert "tracemalloc_peak_mb" not in row         # tracemalloc cannot see its memory
        assert row["case"].split(": ", 1)[1] in _rows(rows, problem, "tidu jit(grad)")[0]["peers"]


@pytest.mark.parametrize("problem", PROBLEMS)
def test_budget_rows(rows, problem):
    budgets = _rows(rows, problem, "tidu jit(grad), budget")
    [reference] = _rows(rows, problem, "tidu jit(grad)")
    by_fraction = budgets[:len(FRACTIONS)]
    refused = []
    for fraction, row in zip(FRACTIONS, by_fraction):
        assert row["case"].endswith(f"budget {fraction:.0%}"), row
        assert abs(row["budget_mb"] - fraction * reference["tracemalloc_peak_mb"]) < 1e-3, row
        if "error" in row:                             # below the smallest feasible budget
            assert "MemoryBudgetError" in row["error"], row
            assert row["smallest_feasible_bytes"] > row["budget_bytes"], row
            refused.append(row["smallest_feasible_bytes"])
            continue
        _measured(row)
        # a budget never makes the program hold more than it does without one
        assert row["tracemalloc_peak_mb"] <= 1.05 * reference["tracemalloc_peak_mb"], row
    extra = budgets[len(FRACTIONS):]
    if refused:
        [smallest] = extra
        assert smallest["case"].endswith("smallest feasible")
        assert smallest["budget_bytes"] == max(refused)
        _measured(smallest)
    else:
        assert extra == []
