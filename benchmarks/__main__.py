"""``python -m benchmarks``: tidu side by side with PyTorch, JAX and HIPS autograd.

Workloads (each peer is skipped with a note when it is not installed):

- transform: ``linearize`` + ``linear_transpose`` of the chain ``y = sin(y)*y + c``
  and of a random DAG, against ``jax.linearize`` + ``jax.linear_transpose``;
- eager scalar: record + backward of that chain with the scalar frontend and with
  0-d ``primitives.tensor`` tensors, against PyTorch 0-d float64 tensors and autograd,
  and against the floor of a record path in Python (``python tape``: the NumPy calls,
  one object and one tape entry per op, nothing else; ``benchmarks/eager.py``);
- mlp floor: the MLP step's 8 matrix products alone in NumPy (``np.matmul(..., out=)``),
  the BLAS floor, timed in turns with every MLP step below; each step / floor, and the
  time tidu's steps spend inside ``np.matmul`` (``benchmarks/mlp.py``);
- mlp: forward + backward of a 784-512-512-10 tanh MLP, batch 256, float32,
  against PyTorch, JAX (eager and jit) and autograd;
- mlp jit: the same step as one ``jit(value_and_grad(loss))`` program, against
  PyTorch eager and ``jax.jit``;
- scaling: per-op cost of the eager 0-d tensor chain and of building + linearizing +
  transposing the scalar chain, at 10⁴ and 10⁶ ops, each size in fresh processes, with
  their peak resident memory, and the controls that tell tidu's growth from Python's
  (both chains with the garbage collector off; tidu's key objects in plain Python);
  graph memory: bytes per primal op of the primal, linear and transposed graphs
  (``benchmarks/scaling.py``);
- memory: peak memory of backward through a chain of 1 MB arrays, against what
  the forward pass holds.
- hvp: eager Hessian-vector products of the MLP loss (``benchmarks/hvp.py``): try_hvp,
  create_graph double backward and tnp.hvp, against PyTorch's double backward.
- vmap: per-example gradients of the MLP loss with vmap(grad) (``benchmarks/vmap.py``),
  against torch.func and jax.vmap (no jit), and one batched grad of the summed loss.
- device: each speed or memory device on the main path, on and off in fresh
  processes (``benchmarks/devices.py``), so it stays only while it pays.
- array backends (``benchmarks/backends.py``): the MLP step on PyTorch tensors
  through tidu against ``torch.autograd``; a Dask gradient step on 1 and 2 worker
  processes of a ``LocalCluster``; and the NumPy path of this tree against the tree
  before the array backends (A/B, full runs only).
- small grad: ``tnp.grad`` without ``jit`` on three small-array programs (a GP marginal
  likelihood, a Gaussian mixture, a tanh RNN; ``benchmarks/small_grad.py``), then
  ``tnp.hessian`` of the GP and ``tnp.jacrev`` of the RNN's step errors, against autograd
  (and JAX without ``jit``).

Memory budgets (``jit(f, memory_budget=...)``, peak memory against time, beside
PyTorch's and JAX's checkpointing) have a run of their own:
``python -m benchmarks.memory_budget`` (``benchmarks/memory_budget.py``).

Every library computes on ONE thread (NumPy's BLAS, PyTorch, JAX: ``benchmarks/__init__.py``;
export ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``/``MKL_NUM_THREADS`` to change it); the
header prints the setting and the JSON stores it. Prints a table (medians, and every
peer as a ratio tidu/peer measured in the same run) and writes JSON (``--json PATH``).
``--quick`` runs small sizes in under a minute; the test suite runs it so the benchmarks
cannot rot.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import statistics
import sys
import time

import benchmarks  # one compute thread, set before NumPy is imported
import numpy as np

from benchmarks import backends, mlp, scaling
from benchmarks.devices import devices_workload
from benchmarks.memory import memory_workload
from benchmarks.hvp import hvp_workload
from benchmarks.small_grad import small_grad_workload
from benchmarks.vmap import BATCHED


def _median_time(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# --- transform ---------------------------------------------------------------------------


def random_dag(n_ops: int, seed: int = 0):
    """A random scalar DAG of ``n_ops`` ops over two inputs; each op reads recent values."""
    from primitives.scalar import ScalarOp
    from tidu.graph import GraphBuilder, Local

    rng = random.Random(seed)
    b = GraphBuilder()
    values = [b.add_input("x"), b.add_input("y")]
    unary = [ScalarOp.SIN, ScalarOp.COS, ScalarOp.TANH, ScalarOp.NEG]
    binary = [ScalarOp.ADD, ScalarOp.SUB, ScalarOp.MUL]
    for _ in range(n_ops):
        window = values[-8:]
        if rng.random() < 0.4:
            [v] = b.add_operation(rng.choice(unary), [Local(rng.choice(window))])
        else:
            [v] = b.add_operation(rng.choice(binary), [Local(rng.choice(window)),
                                                       Local(rng.choice(window))])
        values.append(v)
    b.set_outputs([values[-1]])
    return b.build()


def transform_workload(sizes, repeat):
    from benchmarks.transforms import time_build, time_jax, time_tidu
    from tidu import linear_transpose, linearize

    rows = []
    for n in sizes:
        lin, tr, ops = time_tidu(n, repeat)
        build = time_build(n, repeat)
        row = {"workload": "transform", "case": "chain", "n_ops": ops,
               "tidu_us_per_op": 1e6 * (lin + tr) / ops, "peers": {}}
        built = {"workload": "transform", "case": "chain, built with add_operation",
                 "n_ops": ops, "tidu_us_per_op": 1e6 * (build + lin + tr) / ops, "peers": {}}
        if n <= 10_000:
            try:
                jax_s, jax_ops = time_jax(n, max(1, repeat // 2))
                row["peers"]["jax"] = built["peers"]["jax"] = 1e6 * jax_s / jax_ops
            except ImportError:
                pass
        rows += [row, built]
    for n in sizes:
        graph = random_dag(n)

        def run():
            linear_transpose(linearize(graph, graph.output_keys, ["x", "y"]))

        rows.append({"workload": "transform", "case": "random DAG", "n_ops": n,
                     "tidu_us_per_op": 1e6 * _median_time(run, repeat) / n, "peers": {}})
    return rows


# --- eager scalar ---------------------------------------------------------------------------


# the eager chain's peers, and its floor: a minimal record path in Python on NumPy 0-d arrays
PEER_NAMES = {"torch": "torch", "autograd": "autograd", "tape": "python tape (floor)"}


def eager_workload(sizes, repeat):
    """Each implementation in a fresh process (see ``benchmarks/eager.py``)."""
    from benchmarks import eager as bench_eager

    measured = {name: bench_eager.run_apart(name, sizes, repeat)
                for name in bench_eager.IMPLEMENTATIONS}
    rows = []
    for n in sizes:
        peer_times = {PEER_NAMES[name]: sum(result["sizes"][n])
                      for name, result in measured.items()
                      if result is not None and name in PEER_NAMES}
        for name, case in (("scalar", "scalar frontend"), ("tensor", "0-d tensor")):
            record, backward = measured[name]["sizes"][n]
            rows.append({"workload": "eager scalar", "case": case, "n_ops": 3 * (n // 3),
                         "tidu_us_per_op": record + backward, "record_us_per_op": record,
                         "backward_us_per_op": backward, "peers": dict(peer_times)})
    return rows


# --- mlp ------------------------------------------------------------------------------------


def mlp_workload(rounds: int, quick: bool) -> list[dict]:
    """The MLP rows, all from one session of ``benchmarks/mlp.py`` (every step timed in
    turns with the others and with the BLAS floor)."""
    result = mlp.session(rounds, busy_seconds=0.15 if quick else 0.4)
    ms, over = result["ms"], result["over_floor"]
    retaining = _mlp_retaining_memory(rounds)
    row = {"workload": "mlp", "case": "784-512-512-10 tanh, batch 256, float32",
           "tidu_ms": ms[mlp.EAGER], "tidu_forward_ms": ms[mlp.EAGER_FORWARD],
           "backward_over_forward": (ms[mlp.EAGER] - ms[mlp.EAGER_FORWARD])
           / ms[mlp.EAGER_FORWARD],
           "numpy_forward_ms": ms[mlp.NUMPY_FORWARD],
           "tidu_retain_freed_memory_ms": retaining["ms"],
           "tidu_retain_freed_memory_over_floor": retaining["over_floor"],
           "peers": {peer: ms[name] for peer, name in (("torch", mlp.TORCH),
                                                       ("autograd", mlp.AUTOGRAD),
                                                       ("jax eager", mlp.JAX_EAGER),
                                                       ("jax jit", mlp.JAX_JIT))
                     if name in ms}}
    jit_row = {"workload": "mlp jit", "case": "jit(value_and_grad(loss)), same MLP",
               "tidu_ms": ms[mlp.JIT],
               "peers": {peer: row["peers"][peer] for peer in ("torch", "jax jit")
                         if peer in row["peers"]}}
    labels_row = {"workload": "mlp jit", "case": "jit(value_and_grad), integer labels",
                  "tidu_ms": ms[mlp.JIT_LABELS], "peers": {"tidu one-hot": ms[mlp.JIT]}}
    if mlp.TORCH_CE in ms:
        labels_row["peers"]["torch cross_entropy"] = ms[mlp.TORCH_CE]
    floor_row = {"workload": "mlp floor", "case": "the step's 8 matrix products, NumPy out=",
                 "floor_ms": ms[mlp.FLOOR],
                 "steps": {name: {"ms": ms[name], "over_floor": over[name]}
                           for name in mlp.OVER_FLOOR if name in ms},
                 "products_inside": result["products_inside"],
                 "busy_threads": result["busy_threads"],
                 "rounds": result["rounds"], "inner": result["inner"], "peers": {}}
    if result["missing"]:
        floor_row["note"] = (f"{' and '.join(result['missing'])} not installed: skipped "
                             "(pip install '.[bench]')")
    return [floor_row, row, jit_row, labels_row]


def _in_fresh_process(module: str, call: str):
    """The JSON value of ``benchmarks.<module>.<call>``, computed in a fresh Python process:
    for a process-wide setting, or a workload whose timing the heap left by the others
    would change."""
    import subprocess

    code = (f"import json, benchmarks; benchmarks.hold_threads(); "
            f"from benchmarks import {module}; print(json.dumps({module}.{call}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _mlp_retaining_memory(rounds: int) -> dict:
    """tidu's eager MLP step after ``retain_freed_memory()``, timed in turns with the floor
    (the setting is process-wide, so it must not touch the others)."""
    return _in_fresh_process("mlp", f"retaining_memory({rounds})")


# --- memory ---------------------------------------------------------------------------------


# --- driver ---------------------------------------------------------------------------------


def run(quick: bool) -> dict:
    benchmarks.hold_threads()
    repeat = 3 if quick else 7
    rows = []
    notes = []
    seconds = {}

    def add(name, make):
        start = time.perf_counter()
        rows.extend(make())
        seconds[name] = time.perf_counter() - start

    add("transform", lambda: transform_workload([300, 3_000] if quick
                                                else [1_000, 10_000, 100_000], repeat))
    add("eager scalar", lambda: eager_workload([300, 3_000] if quick else [3_000, 30_000],
                                               repeat))
    add("mlp", lambda: mlp_workload(3 if quick else 20, quick))
    add("scaling", lambda: scaling.scaling_workload(quick))
    add("graph memory", lambda: scaling.graph_memory_workload(quick))
    add("memory", lambda: memory_workload(60 if quick else 1_000))
    add("hvp", lambda: hvp_workload(3 if quick else 20))
    # hundreds of MB per call: in a process of its own, so the heap the workloads before it
    # left does not time its allocations (in this process it measured 116 to 266 ms)
    add("vmap", lambda: _in_fresh_process("vmap", "vmap_workload(2, batch=32)" if quick
                                          else "vmap_workload(5)"))
    add("small grad", lambda: small_grad_workload(3, inner=2) if quick
        else small_grad_workload(30))
    add("device", lambda: devices_workload(1 if quick else 3, quick))
    add("torch arrays", lambda: backends.torch_workload(3 if quick else 15))
    add("dask", lambda: backends.dask_workload(quick))
    if not quick:                   # two trees in fresh processes: minutes, not seconds
        add("numpy A/B", lambda: backends.numpy_ab_workload(rounds=3, repeat=15))
    for module, extra in (("torch", "bench"), ("jax", "bench"), ("autograd", "bench"),
                          ("distributed", "dask")):
        try:
            __import__(module)
        except ImportError:
            notes.append(f"{module} is not installed: skipped (pip install '.[{extra}]')")
    return {"machine": {"python": platform.python_version(), "platform": platform.platform(),
                        "processor": _cpu_model(), "numpy": np.__version__, **_run_facts()},
            "threads": benchmarks.thread_settings(),
            "quick": quick, "rows": rows, "notes": notes, "seconds": seconds}


def _format_floor(row: dict) -> list[str]:
    lines = [f"{row['workload']:13s} {row['case'][:40]:40s} {'':10s} "
             f"{row['floor_ms']:9.2f} ms     (ratios: median over {row['rounds']} rounds "
             "of step / floor)"]
    for name, step in row["steps"].items():
        lines.append(f"{'':13s}   {name:40s} {step['ms']:9.2f} ms   / floor "
                     f"{step['over_floor']:6.2f}")
    for name, inside in row["products_inside"].items():
        ratio = (f"/ floor {inside['over_floor']:6.2f}" if "over_floor" in inside
                 else " " * 14)
        lines.append(f"{'':13s}   {'in np.matmul: ' + mlp.SHORT[name]:40s} "
                     f"{inside['ms']:9.2f} ms   {ratio}   ({inside['calls']:.0f} calls a step)")
        if "outside_us" in inside:
            lines.append(f"{'':13s}   {'  outside them: ' + mlp.SHORT[name]:40s} "
                         f"{sum(inside['outside_us']) / 1e3:9.2f} ms   between products (us): "
                         + " ".join(f"{us:.0f}" for us in inside["outside_us"]))
    lines.append(f"{'':13s}   threads busy in a step: " + ", ".join(
        f"{name.split(' (')[0]} {n}" for name, n in row["busy_threads"].items()))
    if "note" in row:
        lines.append(f"{'':13s}   {row['note']}")
    return lines


def _cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, where ``platform.processor()`` is
    empty), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _run_facts() -> dict:
    """What the header of docs/performance.md's table names beyond the fields above (read by
    ``python -m benchmarks.table``): the date, the commit, the machine, the libraries.
    A fact this machine does not tell is ``None``, never a guess."""
    import datetime
    import importlib.metadata
    import os
    import subprocess

    def git(*args):
        try:
            done = subprocess.run(["git", "-C", str(backends.ROOT), *args], capture_output=True,
                                  text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    versions = {}
    for name in ("torch", "jax", "autograd", "dask"):     # the installed ones, not imported
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    except Exception:       # an older NumPy, or a build that does not say
        blas = None
    commit = git("rev-parse", "--short", "HEAD")
    changes = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
            "commit": commit, "uncommitted_changes": bool(changes) if commit else None,
            "system": platform.system(), "architecture": platform.machine(),
            "cores": os.cpu_count(), "l2_cache": _l2_cache(), "memory_bytes": _memory_bytes(),
            "numpy_blas": blas, **versions}


def _l2_cache() -> dict | None:
    """The L2 cache of CPU 0: ``{"bytes": size of one cache, "cpus": CPUs sharing it}``, from
    sysfs, else from ``lscpu`` (its total over its instances, spread over the CPUs)."""
    import glob
    import os
    import subprocess

    for index in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        try:
            with open(f"{index}/level") as level, open(f"{index}/type") as kind:
                if level.read().strip() != "2" or kind.read().strip() == "Instruction":
                    continue
            with open(f"{index}/size") as size, open(f"{index}/shared_cpu_list") as cpus:
                text, shared = size.read().strip(), cpus.read().strip()
        except OSError:
            continue
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        cpus = sum(int(last) - int(first) + 1 if last else 1            # "0-1,4" -> 3
                   for first, _, last in (part.partition("-") for part in shared.split(",")))
        return {"bytes": int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text),
                "cpus": cpus}
    try:
        out = subprocess.run(["lscpu", "--bytes"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():          # "L2 cache:   4194304 (2 instances)"
        fields = line.split(":", 1)[1].replace("(", " ").split() if ":" in line else []
        if line.startswith("L2 cache:") and fields and fields[0].isdigit():
            instances = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 1
            cpus = (os.cpu_count() or instances) // instances
            return {"bytes": int(fields[0]) // instances, "cpus": cpus or None}
    return None


def _memory_bytes() -> int | None:
    """The machine's memory (``MemTotal`` of ``/proc/meminfo``, else ``sysconf``)."""
    import os

    total = scaling.meminfo_bytes("MemTotal")
    if total is not None:
        return total
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def format_table(result: dict) -> str:
    lines = [f"tidu benchmarks ({'quick' if result['quick'] else 'full'}); "
             f"Python {result['machine']['python']}, {result['machine']['processor']}; "
             "ratios are tidu / peer (< 1: tidu faster)",
             f"threads: {benchmarks.format_thread_settings(result['threads'])}"]
    for row in result["rows"]:
        if row["workload"] in ("torch arrays", "dask", "numpy A/B"):
            lines.append(backends.format_rows([row]))
            continue
        if row["workload"] in ("scaling", "graph memory"):
            lines.append(scaling.format_rows([row]))
            continue
        if row["workload"] == "mlp floor":
            lines += _format_floor(row)
            continue
        if row["workload"] in ("transform", "eager scalar"):
            value = f"{row['tidu_us_per_op']:9.2f} µs/op"
        elif row["workload"] in ("mlp jit", "small grad"):
            value = f"{row['tidu_ms']:9.2f} ms"
        elif row["workload"] == "mlp":
            value = (f"{row['tidu_ms']:9.2f} ms     (forward {row['tidu_forward_ms']:.2f} ms, "
                     f"backward/forward {row['backward_over_forward']:.2f}; with "
                     f"retain_freed_memory() {row['tidu_retain_freed_memory_ms']:.2f} ms, "
                     f"{row['tidu_retain_freed_memory_over_floor']:.2f}x the floor, "
                     "in a process of its own)")
        elif row["workload"] == "hvp":
            value = (f"{row['tidu_ms']:9.2f} ms     (try_hvp; create_graph "
                     f"{row['tidu create_graph ms']:.2f} ms, tnp.hvp {row['tidu tnp.hvp ms']:.2f} ms)")
        elif row["workload"] == "vmap":
            value = (f"{row['tidu_ms']:9.2f} ms     (vmap(grad); one batched grad of the summed "
                     f"loss {row[f'{BATCHED} ms']:.2f} ms)")
        elif row["workload"] == "device":
            value = (f"on {row['on']:.3g} / off {row['off']:.3g} {row['unit']} = "
                     f"{row['on_over_off']:.2f}")
        else:
            value = (f"backward peak {row['backward_peak_mb']:.0f} MB / forward "
                     f"{row['forward_mb']:.0f} MB = {row['backward_over_forward']:.2f}")
        n = f"N={row['n_ops']:>7,}" if "n_ops" in row else ""
        lines.append(f"{row['workload']:13s} {row['case'][:40]:40s} {n:10s} {value}")
        tidu = row.get("tidu_us_per_op", row.get("tidu_ms"))
        for peer, time_ in row["peers"].items():
            lines.append(f"{'':13s}   vs {peer:12s} {time_:9.2f}   ratio {tidu / time_:6.2f}")
    lines += result["notes"]
    lines.append("seconds: " + ", ".join(f"{name} {sec:.1f}"
                                         for name, sec in result["seconds"].items()))
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, under a minute")
    parser.add_argument("--json", default=None, help="write the results here as JSON")
    args = parser.parse_args(argv)
    result = run(args.quick)
    print(format_table(result))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)
    return result


if __name__ == "__main__":
    main()
