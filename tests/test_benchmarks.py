"""``python -m benchmarks --quick`` runs end to end, so the benchmarks cannot rot.

The benchmark itself checks every gradient it times against hand-derived values (it
fails otherwise); here we check that it ran every workload, held every library to one
compute thread, and wrote sane JSON: every figure finite and positive, the new rows of
issue 23 (the MLP's BLAS floor, per-op scaling, graph memory) present.
"""

from __future__ import annotations

import math

import pytest

# one worker runs both modules that read the shared quick run (conftest.py), so it runs once
pytestmark = pytest.mark.xdist_group("quick_benchmark_run")


def test_quick_benchmarks_run_and_write_json(quick_benchmark_run):
    _, data, stdout = quick_benchmark_run
    assert data["quick"] is True
    workloads = {row["workload"] for row in data["rows"]}
    assert workloads == {"transform", "eager scalar", "mlp floor", "mlp", "mlp jit", "scaling",
                         "graph memory", "memory", "hvp", "vmap", "device", "torch arrays",
                         "dask", "small grad"}
    for row in data["rows"]:
        for path, value in _numbers(row):
            assert math.isfinite(value) and value > 0, (row["workload"], path, value)
    memory = next(row for row in data["rows"] if row["workload"] == "memory")
    assert memory["forward_mb"] > 10          # the chain really holds its 1 MB arrays
    assert "ratio" in stdout or not any(row["peers"] for row in data["rows"])

    # one compute thread for everyone, stated in the header and the JSON
    threads = data["threads"]
    assert threads["threads"] == 1 and threads["OPENBLAS_NUM_THREADS"] == "1"
    assert "1 compute thread" in stdout.splitlines()[1]

    # the BLAS floor of the MLP, timed in turns with the steps (their gradients are checked
    # against the hand-derived ones inside the benchmark, which fails otherwise)
    [floor] = [row for row in data["rows"] if row["workload"] == "mlp floor"]
    assert floor["floor_ms"] > 0
    assert {"tidu eager Tensor step", "tidu jit(value_and_grad) one-hot",
            "tidu jit(value_and_grad) integer labels"} <= set(floor["steps"])
    for step in floor["steps"].values():
        assert step["ms"] > 0 and 0.2 < step["over_floor"] < 50
    for name, inside in floor["products_inside"].items():
        assert inside["calls"] >= 8 and inside["ms"] > 0, name      # the 8 products at least
    assert {"numpy step, written by hand", "tidu eager Tensor step",
            "tidu jit(value_and_grad) integer labels"} <= set(floor["products_inside"])
    for name, inside in floor["products_inside"].items():
        if name != "numpy floor (8 products)":      # time outside: before, between, after
            outside = inside["outside_us"]
            assert len(outside) == inside["calls"] + 1 and min(outside) >= 0, name
            assert 0 < sum(outside) / 1e3 < inside["ms"], name
    assert all(n in (None, 1) for n in floor["busy_threads"].values()), floor["busy_threads"]

    # the eager chain beside its peers and its floor (a minimal Python tape, NumPy only)
    for row in (row for row in data["rows"] if row["workload"] == "eager scalar"):
        assert "python tape (floor)" in row["peers"], row

    # per-op cost at two sizes, each in fresh processes; graph memory per primal op
    scaling = {row["kind"]: row for row in data["rows"] if row["workload"] == "scaling"}
    assert set(scaling) == {"eager", "transform", "eager-gc-off", "transform-gc-off", "skeleton",
                            "tape"}
    for row in scaling.values():
        assert set(row["sizes"]) == {"1000", "10000"}, row
        assert row["large_us_per_op"] > 0 and row["small_us_per_op"] > 0 and row["growth"] > 0
        for figures in row["sizes"].values():
            assert figures["peak_rss_mb"] >= figures["rss_before_mb"] > 0
    [graphs] = [row for row in data["rows"] if row["workload"] == "graph memory"]
    assert graphs["n_ops"] >= 25_000
    assert graphs["peak_bytes_per_op"] >= graphs["retained_bytes_per_op"] > 0

    # per-call grad, hessian and jacobian of small programs, beside autograd; every device
    small = {row.get("transform", "grad") for row in data["rows"]
             if row["workload"] == "small grad"}
    assert small == {"grad", "hessian", "jacobian"}
    devices = {row["case"] for row in data["rows"] if row["workload"] == "device"}
    assert {"retrace", "jacobian programs", "vmap programs", "derivative reuse"} <= devices


def _numbers(value, path=()):
    """Every float in a row (nested dicts and lists included), with its path."""
    if isinstance(value, float):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _numbers(item, path + (i,))
