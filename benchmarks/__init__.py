"""tidu's benchmarks (``python -m benchmarks``). Importing this package holds every library
to ONE compute thread (issue 23), so each ratio compares one core's work with one core's:

- ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` are set to 1
  (``setdefault``: a value the user exports wins) before NumPy is imported by any
  workload; subprocesses inherit them. :func:`hold_threads` also limits the loaded
  BLAS and OpenMP pools with ``threadpoolctl`` when it is installed (a belt, for a
  NumPy imported before this package).
- PyTorch: ``torch.set_num_threads(THREADS)`` where each workload imports it.
- JAX: ``XLA_FLAGS`` gets ``--xla_cpu_multi_thread_eigen=false
  intra_op_parallelism_threads=1``, but jax 0.10's CPU client ignores it (measured: four
  threads busy in a ``jit`` matmul on this 2-core box). Its compute pool is sized by
  the process's CPU affinity mask when the backend starts, so :func:`start_jax` starts
  the backend under a mask of ``THREADS`` CPUs and then gives every thread its mask
  back: one busy compute thread, free to run on any core.

:func:`thread_settings` is what the table header prints and the JSON stores;
:func:`busy_threads` counts the threads that really work during a step (Linux).
"""

from __future__ import annotations

import os
import sys

_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
for _name in _THREAD_VARIABLES:
    os.environ.setdefault(_name, "1")
_XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
if "xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"),
                                                     _XLA_ONE_THREAD]))

THREADS = int(os.environ["OMP_NUM_THREADS"])     # torch's and JAX's thread count
_jax_started = None                               # how start_jax held JAX, once it ran


def status_bytes(field: str) -> int | None:
    """A memory figure of this process from ``/proc/self/status`` (``"VmRSS"``, ``"VmHWM"``)
    in bytes; ``None`` where there is none (not Linux)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def hold_threads() -> None:
    """Limit the BLAS and OpenMP pools loaded so far with ``threadpoolctl`` (when installed)
    to the variables' counts, and PyTorch (when imported) to ``THREADS``. Idempotent."""
    import numpy  # noqa: F401  (its BLAS must be loaded for threadpoolctl to see it)

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        threadpool_limits(limits={"openblas": int(os.environ["OPENBLAS_NUM_THREADS"]),
                                  "mkl": int(os.environ["MKL_NUM_THREADS"]),
                                  "blis": int(os.environ["OMP_NUM_THREADS"]),
                                  "openmp": int(os.environ["OMP_NUM_THREADS"])})
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(THREADS)


def torch_threads():
    """``torch``, held to ``THREADS`` compute threads (``ImportError`` if not installed)."""
    import torch

    torch.set_num_threads(THREADS)
    return torch


def start_jax():
    """``jax``, its CPU backend started with a compute pool of ``THREADS`` threads (see the
    module's docstring); ``ImportError`` if JAX is not installed. Call it before any JAX
    computation: a backend some other code started first keeps its pool."""
    global _jax_started
    import jax

    if _jax_started is not None:
        return jax
    try:                                          # (a private API: may move)
        from jax._src import xla_bridge
        started = xla_bridge.backends_are_initialized()
    except (ImportError, AttributeError):
        started = False
    if started:
        _jax_started = "backend started before start_jax: its own thread pool"
        return jax
    if not hasattr(os, "sched_setaffinity"):
        jax.devices()
        _jax_started = "no CPU affinity on this platform: its own thread pool"
        return jax
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(sorted(saved)[:THREADS]))
    try:
        jax.devices()
    finally:
        for task in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(task), saved)
            except OSError:                       # a thread that just ended
                pass
    _jax_started = f"CPU pool started under a {THREADS}-CPU affinity mask"
    return jax


def thread_settings() -> dict:
    """The thread setting of this process: the variables, what threadpoolctl reports for
    each loaded pool, PyTorch's count, and how JAX was started (when loaded)."""
    settings = {name: os.environ.get(name) for name in _THREAD_VARIABLES + ("XLA_FLAGS",)}
    settings["threads"] = THREADS
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        settings["threadpoolctl"] = "not installed"
    else:
        settings["threadpoolctl"] = {f"{pool['internal_api']} ({pool['prefix']})":
                                     pool["num_threads"] for pool in threadpool_info()}
    if "torch" in sys.modules:
        settings["torch"] = sys.modules["torch"].get_num_threads()
    if "jax" in sys.modules:
        settings["jax"] = _jax_started or "imported, backend not started by start_jax"
    return settings


def format_thread_settings(settings: dict) -> str:
    pools = settings.get("threadpoolctl")
    pools = (", ".join(f"{name.split()[0]} {n}" for name, n in pools.items())
             if isinstance(pools, dict) else f"threadpoolctl {pools}")
    parts = [f"{settings['threads']} compute thread(s)",
             " ".join(f"{name}={settings[name]}" for name in _THREAD_VARIABLES),
             f"pools: {pools}"]
    if "torch" in settings:
        parts.append(f"torch {settings['torch']}")
    if "jax" in settings:
        parts.append(f"jax: {settings['jax']}")
    return "; ".join(parts)


def _thread_ticks() -> dict:
    ticks = {}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks[task] = int(fields[11]) + int(fields[12])      # utime + stime
    return ticks


def busy_threads(step, seconds: float = 0.3, share: float = 0.25) -> int | None:
    """How many threads of this process did the work of ``step`` (called for about
    ``seconds``): those with at least ``share`` of the busiest one's CPU time.
    ``None`` where ``/proc/self/task`` is missing (not Linux)."""
    import time

    if not os.path.isdir("/proc/self/task"):
        return None
    step()
    before = _thread_ticks()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        step()
    after = _thread_ticks()
    used = [after[task] - before.get(task, 0) for task in after]
    top = max(used, default=0)
    return sum(1 for u in used if u >= share * top) if top else None
