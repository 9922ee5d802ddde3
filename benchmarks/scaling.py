"""Cost per op as the chain grows, and graph memory per op (issue 23).

The chain is ``y = sin(y) * y + c`` (3 primal ops per step), as in
``benchmarks/transforms.py`` and ``benchmarks/eager.py``. Three measurements:

- ``eager 0-d chain``: record + backward of the chain on 0-d ``primitives.tensor``
  tensors (``Tensor.backward``), µs per op at a small and a large size;
- ``transform chain``: building the chain with ``GraphBuilder.add_operation``, then
  ``linearize`` and ``linear_transpose``, µs per op at a small and a large size;
- ``graph memory``: the primal, linear and transposed graphs of the chain, bytes per
  primal op, by ``tracemalloc``: what each graph adds once built (after a collection),
  what all three hold together (graphs alive), and the peak while building them.

Three controls tell what of the growth is tidu's and what is Python's, in the same run:

- the eager and the transform chain again with the cyclic garbage collector off for the
  whole process (``gc.disable()``): what is left of the growth once no full collection
  walks the objects the chain keeps;
- a ``skeleton``: the objects a graph op of tidu keeps (an operation key with its inputs'
  tuple, a value key, a weak reference each way, a structure hash in an intern table,
  a local id in an index), made in plain Python for a chain, then one walk that reads
  each op's inputs, looks them up and makes a new key (what ``linearize`` does per op,
  without the rules); collector off. Its growth is the memory hierarchy's: the same
  pointer chasing over a heap a hundred times larger;
- a ``tape``: the eager chain on ``benchmarks/eager.py``'s minimal Python tape (the
  NumPy call, a small object and a tuple per op), collector on: what CPython's full
  collections cost any record kept as Python objects, at the leanest.

Every (measurement, size, repetition) runs in a fresh Python process of its own, so
no garbage of an earlier run (dead keys in the intern tables, a bigger heap) weighs on
a later one: each process warms up on a 300-op chain, then times ONE run. A size's
figures are those of its median process (5 processes at the small size, 1 at the large). The process also reports its peak resident
memory (``ru_maxrss``) and what the run added to it. Each run's gradient is checked
against the forward-mode derivative computed by hand (the transform's after the timing,
by evaluating the three graphs; the memory run builds the same graphs and skips it).

Sizes: 10⁴ and 10⁶ ops (``--quick``: 10³ and 10⁴) for the chains and controls, 2.5·10⁵ ops
(``--quick``: 2.5·10⁴) for the memory. The target for both chains is a per-op cost at the
large size at most 1.2x the small one's; for the memory, at most 1 KB per primal op.

    python -m benchmarks.scaling [--quick] [--json out.json]
    python -m benchmarks.scaling --run KIND --ops N     (one process, JSON; KIND: eager,
        transform, memory, eager-gc-off, transform-gc-off, skeleton, tape)
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):                   # python benchmarks/scaling.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks  # noqa: E402  one compute thread, set before NumPy is imported

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WARM_UP_OPS = 300
TARGET_GROWTH = 1.2             # per-op cost, large size / small size
TARGET_BYTES_PER_OP = 1024

# Resident memory per primal op, measured on this tree: the eager chain adds ~0.7 KB/op at
# 10⁶ ops; the transform chain ~3.7 KB/op, ~5.4 KB/op with the gradient check's evaluation;
# the memory run ~10 KB/op under tracemalloc (2.5·10⁴ ops). A size runs only when the machine
# has about twice that available.
_BYTES_PER_OP_NEEDED = {"eager": 2_000, "transform": 12_000, "memory": 20_000,
                        "eager-gc-off": 2_000, "transform-gc-off": 12_000, "skeleton": 2_000,
                        "tape": 1_000}


def _rss_bytes() -> int:
    """Resident memory of this process now (Linux; 0 elsewhere)."""
    return benchmarks.status_bytes("VmRSS") or 0


def peak_rss_bytes() -> int:
    """The peak resident memory of this process's own address space (``VmHWM``, Linux).
    Not ``ru_maxrss``: on Linux a child started by a big parent reports the parent's."""
    peak = benchmarks.status_bytes("VmHWM")
    if peak is not None:
        return peak
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def meminfo_bytes(field: str) -> int | None:
    """A ``/proc/meminfo`` figure (``"MemTotal"``, ``"MemAvailable"``) in bytes; ``None``
    where the system has no such file."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _available_bytes() -> int | None:
    return meminfo_bytes("MemAvailable")


def _reference(steps: int, y0: float, c: float) -> tuple[float, float]:
    """(d y_N / d y0, d y_N / d c) of the chain, forward mode by hand."""
    v, dy0, dc = y0, 1.0, 0.0
    for _ in range(steps):
        slope = math.cos(v) * v + math.sin(v)
        v, dy0, dc = math.sin(v) * v + c, slope * dy0, slope * dc + 1.0
    return dy0, dc


def _close(got, want) -> bool:
    return all(math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12) for g, w in zip(got, want))


# --- one run, in this process --------------------------------------------------------------


def eager_here(n_ops: int) -> dict:
    """Record + backward of the 0-d tensor chain (one warm-up run of 300 ops first)."""
    from benchmarks.eager import zero_d_tensors

    return _recorded_chain(zero_d_tensors, n_ops)


def tape_here(n_ops: int) -> dict:
    """The control: ``benchmarks/eager.py``'s minimal Python tape (a small object and a
    tuple per op) on the same chain, collector on."""
    from benchmarks.eager import python_tape

    return _recorded_chain(python_tape, n_ops)


def _recorded_chain(implementation, n_ops: int) -> dict:
    from benchmarks.eager import C0, Y0, timed

    _, record, backward = implementation()
    steps = n_ops // 3
    timed(record, backward, WARM_UP_OPS // 3)
    gc.collect()
    base = _rss_bytes()
    rec, bwd, grads = timed(record, backward, steps)
    peak = peak_rss_bytes()
    want = _reference(steps, Y0, C0)
    assert _close(grads, want), f"{implementation.__name__}: gradients {grads} differ from {want}"
    ops = 3 * steps
    return {"n_ops": ops, "record_us_per_op": 1e6 * rec / ops,
            "backward_us_per_op": 1e6 * bwd / ops, "us_per_op": 1e6 * (rec + bwd) / ops,
            "peak_rss_mb": peak / 2**20, "rss_before_mb": base / 2**20}


def _transform(n_ops: int):
    from benchmarks.transforms import chain
    from tidu import linear_transpose, linearize

    start = time.perf_counter()
    graph = chain(n_ops)
    built = time.perf_counter()
    lin = linearize(graph, graph.output_keys, ["y0", "c"])
    linearized = time.perf_counter()
    tr = linear_transpose(lin)
    end = time.perf_counter()
    return (graph, lin, tr), (built - start, linearized - built, end - linearized)


def _check_transform(graphs, y0: float = 0.5, c: float = 0.3) -> None:
    from tidu.graph import Input, evaluate

    graph, lin, tr = graphs
    grads = evaluate([graph, lin.graph, tr.graph], tr.tangent_output_keys,
                     {Input("y0"): y0, Input("c"): c, tr.tangent_input_keys[0]: 1.0})
    want = _reference(len(graph.operations) // 3, y0, c)
    assert _close(grads, want), f"transform chain: gradients {grads} differ from {want}"


def transform_here(n_ops: int) -> dict:
    """Build the chain with ``add_operation``, ``linearize``, ``linear_transpose``: one run
    after a warm-up on 300 ops; the gradient checked after the timing."""
    warm, _ = _transform(WARM_UP_OPS)
    _check_transform(warm)
    del warm
    gc.collect()
    base = _rss_bytes()
    graphs, (build, lin, tr) = _transform(n_ops)
    peak = peak_rss_bytes()
    ops = len(graphs[0].operations)
    _check_transform(graphs)
    return {"n_ops": ops, "build_us_per_op": 1e6 * build / ops,
            "linearize_us_per_op": 1e6 * lin / ops, "transpose_us_per_op": 1e6 * tr / ops,
            "us_per_op": 1e6 * (build + lin + tr) / ops,
            "peak_rss_mb": peak / 2**20, "rss_before_mb": base / 2**20,
            "peak_rss_with_check_mb": peak_rss_bytes() / 2**20}


def memory_here(n_ops: int) -> dict:
    """Bytes per primal op of the primal, linear and transposed graphs (``tracemalloc``;
    the three graphs alive at the end), after a warm-up run on 300 ops."""
    import tracemalloc

    from benchmarks.transforms import chain
    from tidu import linear_transpose, linearize

    warm, _ = _transform(WARM_UP_OPS)
    del warm
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    graph = chain(n_ops)
    gc.collect()
    primal = tracemalloc.get_traced_memory()[0] - base
    lin = linearize(graph, graph.output_keys, ["y0", "c"])
    gc.collect()
    linear = tracemalloc.get_traced_memory()[0] - base
    tr = linear_transpose(lin)
    gc.collect()
    retained, peak = (m - base for m in tracemalloc.get_traced_memory())
    tracemalloc.stop()
    ops = len(graph.operations)
    counts = [len(graph.operations), len(lin.graph.operations), len(tr.graph.operations)]
    return {"n_ops": ops, "operations (primal, linear, transposed)": counts,
            "primal_bytes_per_op": primal / ops, "linear_bytes_per_op": (linear - primal) / ops,
            "transposed_bytes_per_op": (retained - linear) / ops,
            "retained_bytes_per_op": retained / ops, "peak_bytes_per_op": peak / ops,
            "peak_rss_mb": peak_rss_bytes() / 2**20}


_MASK = (1 << 60) - 1      # as tidu.graph.keys cuts its structure hashes


class _OpKey:
    __slots__ = ("operation", "inputs", "role", "n_out", "out", "__weakref__")


class _ValueKey:
    __slots__ = ("operation", "slot", "__weakref__")


def skeleton_here(n_ops: int) -> dict:
    """The control: tidu's per-op key objects for a chain in plain Python, then one walk
    over them making a key per op; collector off (see the module)."""
    import weakref

    gc.disable()
    role = object()

    def value(operation):
        key = _ValueKey()
        key.operation, key.slot = operation, 0
        return key

    def build(n):
        table, index, keys = {}, {}, []
        y, c = value(None), value(None)
        for _ in range(n):
            op = _OpKey()
            op.operation, op.inputs, op.role, op.n_out = "mul", (y, c), role, 1
            out = value(op)
            op.out = weakref.ref(out)
            table[hash(("mul", role, (y, c))) & _MASK] = weakref.ref(op)
            index[out] = len(keys)
            keys.append(out)
            y = out
        return table, index, keys

    def walk(table, index, keys):
        tangents = {}
        for key in keys:
            a, b = key.operation.inputs
            index.get(b)
            tangent = value(key.operation)
            table.get(hash(("mul", role, (tangents.get(a), tangent))) & _MASK)
            tangents[key] = tangent
        return tangents

    warm = build(WARM_UP_OPS)
    walk(*warm)
    del warm
    base = _rss_bytes()
    start = time.perf_counter()
    graph = build(n_ops)
    built = time.perf_counter()
    tangents = walk(*graph)
    end = time.perf_counter()
    assert len(tangents) == n_ops
    return {"n_ops": n_ops, "build_us_per_op": 1e6 * (built - start) / n_ops,
            "walk_us_per_op": 1e6 * (end - built) / n_ops,
            "us_per_op": 1e6 * (end - start) / n_ops,
            "peak_rss_mb": peak_rss_bytes() / 2**20, "rss_before_mb": base / 2**20}


def _collector_off(run):
    """``run`` with the cyclic garbage collector off for the whole process."""
    def run_collector_off(n_ops: int) -> dict:
        gc.disable()
        return run(n_ops)
    return run_collector_off


RUNS = {"eager": eager_here, "transform": transform_here, "memory": memory_here,
        "eager-gc-off": _collector_off(eager_here),
        "transform-gc-off": _collector_off(transform_here), "skeleton": skeleton_here,
        "tape": tape_here}


# --- each run in a fresh process ----------------------------------------------------------------


def run_apart(kind: str, n_ops: int) -> dict:
    """``RUNS[kind](n_ops)`` in a fresh Python process (environment inherited)."""
    command = [sys.executable, "-m", "benchmarks.scaling", "--run", kind, "--ops", str(n_ops)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"scaling run {kind} at {n_ops} ops failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _fits(kind: str, n_ops: int) -> str | None:
    """``None`` if the run fits in the memory available now, else why it is skipped."""
    need, available = _BYTES_PER_OP_NEEDED[kind] * n_ops, _available_bytes()
    if available is not None and available < need:
        return (f"{n_ops:,} ops skipped: needs about {need / 2**30:.1f} GB, "
                f"{available / 2**30:.1f} GB available")
    return None


def _median_runs(kind: str, n_ops: int, processes: int) -> dict:
    """The figures of the process whose µs/op is the median (the lower middle one for an
    even count), so its parts add up; with every process's µs/op and the largest peak RSS."""
    runs = sorted((run_apart(kind, n_ops) for _ in range(processes)),
                  key=lambda run: run["us_per_op"])
    median = dict(runs[(len(runs) - 1) // 2])
    median["processes"] = processes
    median["us_per_op_each"] = [run["us_per_op"] for run in runs]
    median["peak_rss_mb"] = max(run["peak_rss_mb"] for run in runs)
    return median


CASES = {"eager": ("eager 0-d tensor chain, record + backward", "record_us_per_op",
                   "backward_us_per_op"),
         "transform": ("chain built with add_operation + linearize + linear_transpose",
                       "build_us_per_op", "linearize_us_per_op", "transpose_us_per_op"),
         "eager-gc-off": ("control: the eager chain, collector off", "record_us_per_op",
                          "backward_us_per_op"),
         "transform-gc-off": ("control: the transform chain, collector off",
                              "build_us_per_op", "linearize_us_per_op", "transpose_us_per_op"),
         "skeleton": ("control: tidu's key objects in plain Python, build + walk, "
                      "collector off", "build_us_per_op", "walk_us_per_op"),
         "tape": ("control: a minimal Python tape on the eager chain, collector on",
                  "record_us_per_op", "backward_us_per_op")}


def scaling_workload(quick: bool) -> list[dict]:
    """One row per chain: µs/op at the small and the large size, and large / small."""
    small, large = (1_000, 10_000) if quick else (10_000, 1_000_000)
    processes = {small: 1 if quick else 5, large: 1}
    rows = []
    for kind, (case, *_) in CASES.items():
        row = {"workload": "scaling", "case": case, "kind": kind, "sizes": {},
               "target_growth": TARGET_GROWTH, "peers": {}}
        for n in (small, large):
            skipped = _fits(kind, n)
            if skipped:
                row["note"] = skipped
                continue
            row["sizes"][str(n)] = _median_runs(kind, n, processes[n])
        figures = [row["sizes"][str(n)]["us_per_op"] for n in (small, large)
                   if str(n) in row["sizes"]]
        row["small_n"], row["large_n"] = small, large
        if len(figures) == 2:
            row["small_us_per_op"], row["large_us_per_op"] = figures
            row["growth"] = figures[1] / figures[0]
        rows.append(row)
    return rows


def graph_memory_workload(quick: bool) -> list[dict]:
    n = 25_000 if quick else 250_000
    row = {"workload": "graph memory", "case": "primal + linear + transposed graphs, chain",
           "target_bytes_per_op": TARGET_BYTES_PER_OP, "peers": {}}
    skipped = _fits("memory", n)
    if skipped:
        row["note"] = skipped
        return [row]
    row.update(run_apart("memory", n))
    return [row]


def format_rows(rows: list[dict]) -> str:
    lines = []
    for row in rows:
        if row["workload"] == "scaling":
            sizes = row["sizes"]
            cells = []
            for n, fig in sizes.items():
                parts = " + ".join(f"{fig[k]:.2f}" for k in CASES[row["kind"]][1:])
                cells.append(f"{int(n):,} ops {fig['us_per_op']:.2f} µs/op ({parts}; "
                             f"RSS {fig['rss_before_mb']:.0f} -> peak "
                             f"{fig['peak_rss_mb']:.0f} MB)")
            target = "" if row["kind"] not in ("eager", "transform") else \
                f" (target ≤ {TARGET_GROWTH})"
            growth = f"; large / small {row['growth']:.2f}{target}" if "growth" in row else ""
            lines.append(f"scaling       {row['case']}: " + "; ".join(cells) + growth)
        elif row["workload"] == "graph memory" and "n_ops" in row:
            lines.append(
                f"graph memory  {row['case']}, {row['n_ops']:,} primal ops: retained "
                f"{row['retained_bytes_per_op'] / 1024:.2f} KB/op (primal "
                f"{row['primal_bytes_per_op'] / 1024:.2f} + linear "
                f"{row['linear_bytes_per_op'] / 1024:.2f} + transposed "
                f"{row['transposed_bytes_per_op'] / 1024:.2f}), peak "
                f"{row['peak_bytes_per_op'] / 1024:.2f} KB/op (target ≤ "
                f"{TARGET_BYTES_PER_OP / 1024:.0f} KB/op)")
        else:
            lines.append(f"{row['workload']:13s} {row['case']}")
        if "note" in row:
            lines.append(f"              {row['note']}")
    return "\n".join(lines)


def main(argv=None) -> list[dict] | dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaling",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--json", default=None, help="write the rows here as JSON")
    parser.add_argument("--run", choices=sorted(RUNS), help="one run here; print JSON")
    parser.add_argument("--ops", type=int, default=10_000, help="the size of --run")
    args = parser.parse_args(argv)
    if args.run:
        result = RUNS[args.run](args.ops)
        print(json.dumps(result), flush=True)
        if __name__ == "__main__":
            os._exit(0)                     # skip tearing down millions of objects
        return result
    benchmarks.hold_threads()
    rows = scaling_workload(args.quick) + graph_memory_workload(args.quick)
    print(format_rows(rows))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=2)
    return rows


if __name__ == "__main__":
    main()
