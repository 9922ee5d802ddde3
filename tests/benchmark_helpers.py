"""What the tests that run ``python -m benchmarks`` in a subprocess share."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def benchmark_env() -> dict:
    """The environment a benchmark subprocess runs in: this tree first on the path, and
    the benchmark's own default of one compute thread (no thread settings passed on)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS"):
        env.pop(name, None)
    return env
