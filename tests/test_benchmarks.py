"""``python -m benchmarks --quick`` runs end to end, so the benchmarks cannot rot.

The benchmark itself checks every gradient it times against hand-derived values;
here we check that it ran every workload and wrote sane JSON.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_quick_benchmarks_run_and_write_json(tmp_path):
    out = tmp_path / "bench.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--json", str(out)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out.read_text())
    assert data["quick"] is True
    workloads = {row["workload"] for row in data["rows"]}
    assert workloads == {"transform", "eager scalar", "mlp", "mlp jit", "memory", "hvp", "vmap",
                         "device", "torch arrays", "dask", "small grad"}
    for row in data["rows"]:
        for key, value in row.items():
            if isinstance(value, float):
                assert math.isfinite(value) and value > 0, (row, key)
    memory = next(row for row in data["rows"] if row["workload"] == "memory")
    assert memory["forward_mb"] > 10          # the chain really holds its 1 MB arrays
    assert "ratio" in result.stdout or not any(row["peers"] for row in data["rows"])
