"""A/B of the speed and memory devices on tidu's main paths: each on, then off.

Every device sits behind one seam, and this module turns it off there:

- ``replay``: structural rules recorded once and replayed (``tidu.rules.replay``);
  off = the scalar set's ``structural_rules()`` returns False, so every rule is
  called for every node. Workload: linearize + transpose of a 3·10⁴-op chain.
- ``lock-free interning``: new operation keys are published without the intern
  lock (``tidu.graph.keys.intern_operation_outputs``); off = every key takes
  the locked slow path. Same workload.
- ``GC pause``: the cyclic collector paused inside transforms (``tidu._gc``);
  off = a no-op context. Workload: the same chain at 10⁵ ops.
- ``straight-line code``: small compiled programs run as generated Python
  (``tidu.graph.program``); off = they loop over their steps. Workload: eager
  backward of a 3·10³-op scalar-frontend chain.
- ``referenced-only cotangents``: ``Tensor.backward`` keeps only the cotangents
  of leaves and still-referenced tensors; off = it keeps all. Workload: backward
  peak memory / forward held memory on a chain of 1 MB arrays.
- ``derivative reuse``: ``grad`` without ``jit`` linearizes and transposes a program
  once per structure (``functional.derivatives_of``); off = every call makes them
  anew. Workload: ``tnp.grad`` of the small tanh RNN (``benchmarks.small_grad``).
- ``retrace``: ``grad`` without ``jit`` traces each call along the graph the last
  call made (``transforms.retrace.RetraceBuilder``); off = every trace builds and
  interns its graph op by op. Workload: ``tnp.grad`` of the GP marginal likelihood
  (``benchmarks.small_grad``).
- ``jacobian programs``: ``jacrev``/``jacfwd``/``hessian`` keep what they make from a
  program's derivative graphs (per-output transposes, compiled programs, batched
  graphs) once per structure (``functional.Derivatives.derived``); off = every call
  makes them anew. Workload: ``tnp.hessian`` of the GP marginal likelihood
  (``benchmarks.small_grad``).
- ``vmap programs``: ``vmap`` without ``jit`` batches, optimizes and compiles a trace
  once per structure (``vmap._batched_program``); off = nothing is kept
  (``_PROGRAMS_MAX_OPS = 0``), every call makes them anew. Workload: per-example
  gradients (``vmap(grad)``) of a small tanh layer, 32 examples of 8 features.
- ``.grad handover``: a leaf's first gradient becomes its ``.grad`` without a copy
  (``frontend._can_hand_over``); off = it is copied. Workload: the eager MLP step.
- ``broadcast add``: ``add`` of an operand and one broadcast to its shape (a bias) is one
  op, ``AddBroadcast`` (``lowering.BROADCAST_ADD``); off = ``broadcast_in_dim``, then
  ``add``. Workload: an eager layer step, ``sum(tanh(x @ w + b))`` and its backward, on
  a (64, 32) batch: small enough that the op count shows (in the MLP step it is about
  1% of the step, below what fresh processes resolve).
- ``short-row extrema``: the maximum (and minimum) over the last axis of many short
  rows is taken on a copy with that axis first (``reduce._many_short_rows``); off =
  NumPy's row-by-row loop. Workload: ``tnp.logsumexp`` and ``tnp.max`` over the
  classes of a (256, 10) float32 batch of scores, what the MLP's loss head reduces.

Each (device, on/off) runs in a fresh process (no caches shared between the
two), alternating on and off for ``--rounds`` rounds; the figure is the median.

    python -m benchmarks.devices [--rounds 3] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time

import benchmarks  # noqa: F401  one compute thread, set before NumPy is imported

# --- switches: each turns one device off at its seam -------------------------------------


def _replay_off() -> None:
    from primitives.scalar import ScalarOp
    ScalarOp.structural_rules = lambda self: False


def _lock_free_off() -> None:
    from tidu.graph import builder, keys

    def locked(operation, inputs, role, output_count):
        struct = keys._structure(operation, inputs, role)
        return keys._intern_operation_slow(struct, operation, inputs, role, output_count), None
    builder.intern_operation_outputs = locked


def _gc_pause_off() -> None:
    import tidu._gc
    tidu._gc._PAUSE = contextlib.nullcontext()


def _straight_line_off() -> None:
    import tidu.graph.program
    tidu.graph.program._STRAIGHT_LINE_MAX_STEPS = 0


def _referenced_only_off() -> None:
    from primitives.tensor.eager import frontend as eager
    eager._STILL_REFERENCED = None


def _derivative_reuse_off() -> None:
    from primitives.tensor.transforms import functional
    functional.derivatives_of = lambda graph, outputs, wrt: functional.Derivatives(
        graph, outputs, wrt)


def _retrace_off() -> None:
    from primitives.tensor.transforms import functional
    from tidu.graph import GraphBuilder
    functional.RetraceBuilder = lambda template: GraphBuilder()


def _jacobian_programs_off() -> None:
    from primitives.tensor.transforms import functional
    functional.Derivatives.derived = lambda self, key, make: make()


def _vmap_programs_off() -> None:
    import importlib
    importlib.import_module("primitives.tensor.transforms.vmap")._PROGRAMS_MAX_OPS = 0


def _grad_handover_off() -> None:
    from primitives.tensor.eager import frontend as eager
    eager._can_hand_over = lambda value: False


def _broadcast_add_off() -> None:
    from primitives.tensor.numpy import lowering
    lowering.BROADCAST_ADD = False


def _short_rows_off() -> None:
    from primitives.tensor.ops import reduce
    reduce._many_short_rows = lambda x, axes: False


# --- workloads: each returns one number -----------------------------------------------------


def _transform_us_per_op(n_ops: int) -> float:
    from benchmarks.transforms import time_tidu
    lin, tr, ops = time_tidu(n_ops, 3)
    return 1e6 * (lin + tr) / ops


def _eager_backward_us_per_op(n_ops: int) -> float:
    from benchmarks.eager import measure, scalar_frontend
    _, record, backward = scalar_frontend()
    return measure(record, backward, n_ops, 5)[1]


def _small_grad_ms(calls: int, program: str = "tanh RNN") -> float:
    """ms per ``tnp.grad`` call of a small program (``benchmarks.small_grad``), best of
    rounds."""
    from benchmarks import small_grad
    loss, _ = small_grad.PROGRAMS[program]
    params, data = small_grad.make_problems()[program]
    step = small_grad.tidu_step(loss, params, data)
    return small_grad.best_ms(step, calls)


def _gp_grad_ms(calls: int) -> float:
    return _small_grad_ms(calls, "GP marginal likelihood")


def _gp_hessian_ms(calls: int) -> float:
    """ms per ``tnp.hessian`` call of the GP marginal likelihood (``benchmarks.small_grad``)."""
    from benchmarks import small_grad
    function, transform, point, data = small_grad.jacobian_problem(
        "GP hessian", small_grad.make_problems())
    return small_grad.best_ms(small_grad.tidu_step(function, point, data, transform), calls)


def _small_vmap_grad_ms(calls: int) -> float:
    """ms per ``vmap(grad(f))`` call: a tanh layer's squared output, 32 examples of 8."""
    import numpy as np

    from benchmarks.small_grad import best_ms
    from primitives import tensor as tnp
    rng = np.random.default_rng(0)
    w, xs = rng.standard_normal((8, 4)), rng.standard_normal((32, 8))
    per_example = tnp.vmap(tnp.grad(lambda x, w: tnp.sum(tnp.tanh(x @ w) ** 2), argnums=1),
                           in_axes=(0, None))
    return best_ms(lambda: per_example(xs, w), calls)


def _eager_mlp_ms(steps: int) -> float:
    """ms per eager ``Tensor`` MLP step (``benchmarks.mlp``), best of rounds."""
    from benchmarks import mlp
    from benchmarks.small_grad import best_ms
    params, x, onehot = mlp.make_data()
    _, step, _ = mlp.tidu_model(params, x, onehot)
    return best_ms(step, steps)


def _eager_layer_us(steps: int) -> float:
    """µs per eager ``sum(tanh(x @ w + b)).backward()`` on a (64, 32) float32 batch."""
    import numpy as np

    from benchmarks.small_grad import best_ms
    from primitives import tensor as tnp
    rng = np.random.default_rng(0)
    x = tnp.tensor(rng.standard_normal((64, 32)).astype(np.float32))
    w, b = (tnp.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
            for shape in ((32, 32), (32,)))

    def step():
        tnp.sum(tnp.tanh(x @ w + b)).backward()
        w.grad = b.grad = None
    return 1e3 * best_ms(step, steps)


def _short_rows_us(calls: int) -> float:
    """µs per ``tnp.logsumexp`` and ``tnp.max`` over the classes of (256, 10) float32 scores."""
    import numpy as np

    from benchmarks.small_grad import best_ms
    from primitives import tensor as tnp
    scores = np.random.default_rng(0).standard_normal((256, 10)).astype(np.float32)

    def reduce_both():
        tnp.logsumexp(scores, axis=1)
        tnp.max(scores, axis=1)
    return 1e3 * best_ms(reduce_both, calls)


def _memory_ratio(n_ops: int) -> float:
    from benchmarks.memory import memory_workload
    return memory_workload(n_ops)[0]["backward_over_forward"]


DEVICES = {   # name -> (switch off, workload, its sizes (full, quick), what the number is)
    "replay": (_replay_off, _transform_us_per_op, (30_000, 3_000), "µs/op"),
    "lock-free interning": (_lock_free_off, _transform_us_per_op, (30_000, 3_000), "µs/op"),
    "GC pause": (_gc_pause_off, _transform_us_per_op, (100_000, 3_000), "µs/op"),
    "straight-line code": (_straight_line_off, _eager_backward_us_per_op, (3_000, 300),
                           "µs/op"),
    "referenced-only cotangents": (_referenced_only_off, _memory_ratio, (300, 30),
                                   "peak / held"),
    "derivative reuse": (_derivative_reuse_off, _small_grad_ms, (20, 3), "ms"),
    "retrace": (_retrace_off, _gp_grad_ms, (200, 20), "ms"),
    "jacobian programs": (_jacobian_programs_off, _gp_hessian_ms, (50, 5), "ms"),
    "vmap programs": (_vmap_programs_off, _small_vmap_grad_ms, (200, 20), "ms"),
    ".grad handover": (_grad_handover_off, _eager_mlp_ms, (10, 2), "ms"),
    "broadcast add": (_broadcast_add_off, _eager_layer_us, (500, 50), "µs"),
    "short-row extrema": (_short_rows_off, _short_rows_us, (2_000, 200), "µs"),
}


def run_one(name: str, on: bool, quick: bool = False) -> float:
    """The workload of device ``name`` here, with the device on or off."""
    off, workload, sizes, _ = DEVICES[name]
    if not on:
        off()
    return workload(sizes[quick])


def _apart(name: str, on: bool, quick: bool) -> float:
    code = (f"from benchmarks.devices import run_one; "
            f"print(run_one({name!r}, {on!r}, {quick!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip().splitlines()[-1])


def devices_workload(rounds: int, quick: bool = False) -> list[dict]:
    """One row per device: median on, median off, on / off (``quick``: small sizes)."""
    rows = []
    for name in DEVICES:
        on, off = [], []
        for _ in range(rounds):
            on.append(_apart(name, True, quick))
            off.append(_apart(name, False, quick))
        on_m, off_m = statistics.median(on), statistics.median(off)
        rows.append({"workload": "device", "case": name, "unit": DEVICES[name][3],
                     "on": on_m, "off": off_m, "on_over_off": on_m / off_m, "peers": {}})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--json")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = devices_workload(args.rounds, args.quick)
    for row in rows:
        print(f"{row['case']:28s} on {row['on']:8.3f}  off {row['off']:8.3f} {row['unit']:12s}"
              f" on/off {row['on_over_off']:.2f}")
    print(f"({time.perf_counter() - start:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
