"""Array backends: tidu on PyTorch's kernels, Dask on 1 and 2 workers, and the NumPy path A/B.

Three workloads, each a row of ``python -m benchmarks``:

- ``torch arrays``: the MLP step of ``benchmarks/mlp.py`` (784-512-512-10 tanh,
  batch 256, float32) with PyTorch tensors as the arrays, through tidu:
  ``value_and_grad``, ``jit(value_and_grad)`` and the eager ``Tensor``, against
  ``torch.autograd`` on the same tensors (one thread); timed in turns, same run.
- ``dask``: one gradient step of ``examples/distributed_least_squares.py`` (the
  data generated on the workers, 3.2x one worker's memory limit) on a
  ``LocalCluster`` of 1 worker process, then of 2 (one thread each): the
  speed-up, and each worker's peak memory against its limit.
- ``numpy A/B``: the NumPy path of this tree against the tree before the array
  backends (git revision ``BASE``, checked out in a temporary worktree): the eager
  0-d chain, the eager and ``jit`` MLP steps and a small-array ``grad``, each tree
  in fresh processes, alternating, medians. Needs git and that revision; it is
  skipped with a note otherwise.

    python -m benchmarks.backends [--quick] [--base REV]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchmarks  # one compute thread, set before NumPy is imported
import numpy as np

from benchmarks import mlp
from benchmarks.hvp import interleaved_medians

BASE = "0a6b4a4"          # the last commit before the array backends (issue 14)
ROOT = Path(__file__).resolve().parent.parent

# --- PyTorch arrays ---------------------------------------------------------------------------

TORCH = "torch.autograd"


def _loss(tnp, ps, x, onehot):
    h = x
    for i in range(0, len(ps) - 2, 2):
        h = tnp.tanh(tnp.matmul(h, ps[i]) + ps[i + 1])
    z = tnp.matmul(h, ps[-2]) + ps[-1]
    return -tnp.sum(mlp.log_probs(tnp, z) * onehot) / x.shape[0]


def torch_steps(params, x, onehot) -> dict:
    """Each way of taking the MLP step on torch tensors: name -> step() returning gradients."""
    import torch

    from primitives import tensor as tnp

    torch.set_num_threads(benchmarks.THREADS)
    ps = [torch.from_numpy(p.copy()) for p in params]
    xt, yt = torch.from_numpy(x), torch.from_numpy(onehot)

    def loss(ps, x, onehot):
        return _loss(tnp, ps, x, onehot)

    value_and_grad = tnp.value_and_grad(loss)
    jitted = tnp.jit(tnp.value_and_grad(loss))
    leaves = [tnp.tensor(p, requires_grad=True) for p in ps]

    def eager():
        grads = _loss(tnp, leaves, xt, yt).backward()
        return [grads.grad(p) for p in leaves]

    peer = [p.clone().requires_grad_(True) for p in ps]

    def autograd():
        for p in peer:
            p.grad = None
        h = xt
        for i in range(0, len(peer) - 2, 2):
            h = torch.tanh(h @ peer[i] + peer[i + 1])
        z = h @ peer[-2] + peer[-1]
        (-(torch.log_softmax(z, dim=1) * yt).sum() / xt.shape[0]).backward()
        return [p.grad for p in peer]

    return {"tidu value_and_grad": lambda: value_and_grad(ps, xt, yt)[1],
            "tidu jit(value_and_grad)": lambda: jitted(ps, xt, yt)[1],
            "tidu eager Tensor": eager, TORCH: autograd}


def torch_workload(repeat: int) -> list[dict]:
    row = {"workload": "torch arrays", "case": "MLP step on torch tensors, float32",
           "peers": {}}
    try:
        steps = torch_steps(*mlp.make_data())
    except ImportError:
        row["note"] = "torch is not installed: skipped (pip install '.[torch]')"
        return [row]
    expected = [g.numpy() for g in steps[TORCH]()]
    for name, step in steps.items():                      # also the warm-up runs
        got = step()
        assert all(type(g).__module__.startswith("torch") for g in got), name
        assert all(np.allclose(g.numpy(), e, rtol=1e-3, atol=1e-5)
                   for g, e in zip(got, expected)), name
    for name, ms in interleaved_medians(steps, repeat).items():
        if name == TORCH:
            row["peers"][TORCH] = ms
        else:
            row[f"{name} ms"] = ms
    row["tidu_ms"] = row["tidu jit(value_and_grad) ms"]
    return [row]


# --- Dask: one worker against two -------------------------------------------------------------


def _dask_step_seconds(workers: int, rows: int, features: int, chunk_rows: int,
                       memory_limit: str, steps: int) -> tuple[float, int]:
    """Median seconds of one gradient step on ``workers`` worker processes, and the largest
    peak memory of a worker."""
    from distributed import Client, LocalCluster

    from primitives import tensor as tnp

    example = _example()
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      memory_limit=memory_limit, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        X, y, _ = example.make_data(rows, features, chunk_rows, seed=0)
        step = tnp.value_and_grad(example.loss)
        w = np.zeros(features)
        times = []
        for _ in range(steps + 1):                       # the first is the warm-up
            start = time.perf_counter()
            value, gradient = client.compute(list(step(w, X, y)), sync=True)
            times.append(time.perf_counter() - start)
            w = w - 0.25 * gradient
        peak = max(client.run(_peak_rss).values())
    return statistics.median(times[1:]), peak


def _example():
    """``examples/distributed_least_squares.py`` as a module: its data and loss."""
    import importlib.util

    path = ROOT / "examples" / "distributed_least_squares.py"
    spec = importlib.util.spec_from_file_location("distributed_least_squares", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _peak_rss() -> int:
    """The peak resident memory of the process it runs in (a worker), in bytes: its own
    address space's (``VmHWM``), as ``ru_maxrss`` reports a big parent's for a child."""
    from benchmarks.scaling import peak_rss_bytes

    return peak_rss_bytes()


def dask_workload(quick: bool) -> list[dict]:
    rows, features, chunk_rows, limit = ((40_000, 8, 10_000, "400MiB") if quick else
                                         (2_500_000, 64, 50_000, "400MiB"))
    row = {"workload": "dask", "case": f"least-squares step, {rows:,} x {features}",
           "peers": {}}
    try:
        import distributed  # noqa: F401
    except ImportError:
        row["note"] = "dask.distributed is not installed: skipped (pip install '.[dask]')"
        return [row]
    steps = 1 if quick else 3
    one, _ = _dask_step_seconds(1, rows, features, chunk_rows, limit, steps)
    two, peak = _dask_step_seconds(2, rows, features, chunk_rows, limit, steps)
    from dask.utils import parse_bytes
    row.update({"one_worker_s": one, "two_workers_s": two, "speedup": one / two,
                "data_mb": rows * (features + 1) * 8 / 2**20,
                "worker_peak_mb": peak / 2**20, "worker_limit_mb": parse_bytes(limit) / 2**20})
    return [row]


# --- NumPy path: this tree against the one before the array backends ---------------------------

_AB_CODE = r"""
import json, sys, time, statistics, gc
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, {root!r})
import numpy as np
from primitives import tensor as tnp
import benchmarks
from benchmarks import mlp

def median(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        gc.collect(); start = time.perf_counter(); fn(); times.append(time.perf_counter() - start)
    return statistics.median(times)

out = {{}}
x0 = tnp.tensor(np.array(0.5), requires_grad=True)
def chain(n=3000):
    y = x0
    for _ in range(n // 3):
        y = tnp.sin(y) * y + 1.0
    y.backward()
out["eager 0-d chain, us/op"] = 1e6 * median(chain, {repeat}) / 3000
# the log-softmax as the composite both trees have (the base has no tnp.nn): one workload
mlp.log_probs = lambda tnp, z: z - tnp.logsumexp(z, axis=1, keepdims=True)
params, x, onehot = mlp.make_data()
out["eager MLP step, ms"] = mlp.median_ms(mlp.tidu_model(params, x, onehot)[1], {repeat})
out["jit MLP step, ms"] = mlp.tidu_jit_runs(params, x, onehot, {repeat})
small = np.linspace(0.1, 1.0, 16)
def f(v):
    for _ in range(50):
        v = tnp.tanh(v) * v + tnp.exp(-v)
    return tnp.sum(v)
out["grad, 150 ops on 16 floats, ms"] = 1e3 * median(lambda: tnp.grad(f)(small), {repeat})
print(json.dumps(out))
"""


def _measure_tree(root: str, repeat: int) -> dict:
    code = _AB_CODE.format(root=root, repeat=repeat)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=root, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def numpy_ab_workload(rounds: int, repeat: int, base: str = BASE) -> list[dict]:
    """``this tree / base tree`` for each NumPy-path workload (medians over ``rounds``)."""
    row = {"workload": "numpy A/B", "case": f"this tree / {base} (before array backends)",
           "peers": {}}
    if shutil.which("git") is None:
        row["note"] = "git is not installed: A/B skipped"
        return [row]
    worktree = tempfile.mkdtemp(prefix="tidu-ab-")
    added = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", worktree,
                            base], capture_output=True, text=True)
    if added.returncode != 0:
        row["note"] = f"revision {base} is not in this checkout: A/B skipped"
        shutil.rmtree(worktree, ignore_errors=True)
        return [row]
    try:
        # the old tree runs with this tree's benchmarks/mlp.py (and the package's thread
        # setting, which mlp.py imports): the same workload both sides
        for name in ("mlp.py", "__init__.py"):
            shutil.copy(ROOT / "benchmarks" / name, Path(worktree) / "benchmarks" / name)
        samples: dict = {"new": [], "old": []}
        for _ in range(rounds):
            samples["old"].append(_measure_tree(worktree, repeat))
            samples["new"].append(_measure_tree(str(ROOT), repeat))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", worktree],
                       capture_output=True)
        shutil.rmtree(worktree, ignore_errors=True)
    for key in samples["new"][0]:
        new = statistics.median(s[key] for s in samples["new"])
        old = statistics.median(s[key] for s in samples["old"])
        row[key] = {"new": new, "old": old, "new_over_old": new / old}
    return [row]


def format_rows(rows: list[dict]) -> str:
    lines = []
    for row in rows:
        lines.append(f"{row['workload']}: {row['case']}")
        if row["workload"] == "torch arrays" and row["peers"]:
            torch_ms = row["peers"][TORCH]
            for key, value in row.items():
                if key.endswith(" ms"):
                    lines.append(f"  {key[:-3]:28s} {value:8.2f} ms   / torch.autograd "
                                 f"{value / torch_ms:5.2f}")
            lines.append(f"  {TORCH:28s} {torch_ms:8.2f} ms")
        elif row["workload"] == "dask" and "speedup" in row:
            lines.append(f"  1 worker {row['one_worker_s']:.2f} s, 2 workers "
                         f"{row['two_workers_s']:.2f} s: speed-up {row['speedup']:.2f}; data "
                         f"{row['data_mb']:.0f} MB, worker peak {row['worker_peak_mb']:.0f} MB "
                         f"of {row['worker_limit_mb']:.0f} MB")
        elif row["workload"] == "numpy A/B":
            for key, value in row.items():
                if isinstance(value, dict) and "new" in value:
                    lines.append(f"  {key:32s} new {value['new']:8.3f}  old {value['old']:8.3f}"
                                 f"  new/old {value['new_over_old']:5.2f}")
        if "note" in row:
            lines.append(f"  {row['note']}")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--base", default=BASE, help="the git revision of the NumPy A/B")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    rows = torch_workload(3 if args.quick else args.repeat)
    rows += dask_workload(args.quick)
    rows += numpy_ab_workload(1 if args.quick else 3, 3 if args.quick else args.repeat,
                              args.base)
    print(format_rows(rows))


if __name__ == "__main__":
    main()
