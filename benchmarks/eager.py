"""Eager reverse mode on a scalar chain: microseconds per op to record and to run backward.

The chain is ``y = sin(y) * y + c`` (3 primal ops per step) for N = 3*10^3 and
3*10^4 primal ops, with ``y`` and ``c`` both requiring grad. Record and
backward are timed separately; each figure is the median of ``--repeat``
runs (after one untimed warm-up run), with the garbage collector on, as a
user would run it. The trace of one run is dropped, untimed, before the next.

Peers, each skipped with a note when not installed:

- ``torch``: the same chain on 0-d float64 tensors with ``requires_grad``;
  record = the forward pass, backward = ``y.backward()``.
- ``autograd`` (HIPS): ``autograd.core.make_vjp`` of the chain (record = the
  traced forward pass), then the returned VJP with seed 1.0 (backward).

Every peer's gradients are checked against tidu's. Ratios are tidu / peer
(below 1 means tidu is faster). tidu is measured first, before any peer is
imported, since a peer's import leaves many long-lived objects that each full
collection of the garbage collector scans; ``--no-gc`` turns the collector
off during the runs for all of them.

    python benchmarks/eager.py [--sizes 3000 30000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from primitives.scalar.eager import Scalar, sin  # noqa: E402

Y0, C0 = 0.5, 0.1


def timed(record, backward, steps: int) -> tuple[float, float, tuple]:
    """Seconds to record, seconds for backward, and the gradients (d/dy0, d/dc)."""
    gc.collect()
    t0 = time.perf_counter()
    state = record(steps)
    t1 = time.perf_counter()
    grads = backward(state)
    t2 = time.perf_counter()
    del state
    return t1 - t0, t2 - t1, grads


# --- tidu ----------------------------------------------------------------------------


def tidu_record(steps: int):
    y0 = Scalar(Y0, requires_grad=True)
    c = Scalar(C0, requires_grad=True)
    y = y0
    for _ in range(steps):
        y = sin(y) * y + c
    return y0, c, y


def tidu_backward(state):
    y0, c, y = state
    grads = y.backward()
    return grads.get(y0.key, 0.0), grads[c.key]


# --- torch ---------------------------------------------------------------------------


def torch_peer():
    try:
        import torch
    except ImportError:
        return None

    def record(steps: int):
        y0 = torch.tensor(Y0, dtype=torch.float64, requires_grad=True)
        c = torch.tensor(C0, dtype=torch.float64, requires_grad=True)
        y = y0
        tsin = torch.sin
        for _ in range(steps):
            y = tsin(y) * y + c
        return y0, c, y

    def backward(state):
        y0, c, y = state
        y.backward()
        return float(y0.grad), float(c.grad)

    return f"torch {torch.__version__}", record, backward


# --- autograd (HIPS) ------------------------------------------------------------------


def autograd_peer():
    try:
        import autograd.numpy as anp
        from autograd.core import make_vjp
    except ImportError:
        return None

    def chain(args, steps):
        y, c = args
        asin = anp.sin
        for _ in range(steps):
            y = asin(y) * y + c
        return y

    def record(steps: int):
        return make_vjp(lambda args: chain(args, steps), (Y0, C0))

    def backward(state):
        vjp, _ = state
        dy0, dc = vjp(1.0)
        return float(dy0), float(dc)

    try:
        from importlib.metadata import version
        label = f"autograd {version('autograd')}"
    except Exception:
        label = "autograd"
    return label, record, backward


# --- driver ----------------------------------------------------------------------------


def measure(record, backward, n_ops: int, repeat: int):
    steps = n_ops // 3
    timed(record, backward, min(steps, 300))          # warm-up: caches, imports
    runs = [timed(record, backward, steps) for _ in range(repeat)]
    rec = statistics.median(r[0] for r in runs) / n_ops * 1e6
    bwd = statistics.median(r[1] for r in runs) / n_ops * 1e6
    return rec, bwd, runs[-1][2]


def reference(steps: int) -> tuple[float, float]:
    """Forward-mode derivatives of the chain by hand: (d y_N / d y0, d y_N / d c)."""
    v, dy0, dc = Y0, 1.0, 0.0
    for _ in range(steps):
        slope = math.cos(v) * v + math.sin(v)
        v, dy0, dc = math.sin(v) * v + C0, slope * dy0, slope * dc + 1.0
    return dy0, dc


def agrees(a: tuple, b: tuple) -> bool:
    return all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) for x, y in zip(a, b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3_000, 30_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-gc", action="store_true",
                        help="disable the garbage collector during the timed runs")
    args = parser.parse_args()
    repeat = max(3, args.repeat)
    if args.no_gc:
        gc.disable()

    # tidu first, before any peer is imported: a peer's import leaves many long-lived
    # objects that every full collection of the garbage collector then scans.
    table: dict = {}
    for n_ops in args.sizes:
        want = reference(n_ops // 3)
        rec, bwd, grads = measure(tidu_record, tidu_backward, n_ops, repeat)
        if not agrees(grads, want):
            raise SystemExit(f"tidu's gradients {grads} differ from the hand-derived {want}")
        table[n_ops] = [("tidu", rec, bwd)]

    notes = []
    for name, make in (("torch", torch_peer), ("autograd", autograd_peer)):
        peer = make()
        if peer is None:
            notes.append(f"note: {name} is not installed; skipped")
            continue
        label, record, backward = peer
        for n_ops in args.sizes:
            rec, bwd, grads = measure(record, backward, n_ops, repeat)
            want = reference(n_ops // 3)
            if not agrees(grads, want):
                raise SystemExit(f"{label}'s gradients {grads} differ from the hand-derived {want}")
            table[n_ops].append((label, rec, bwd))

    for note in notes:
        print(note)
    print(f"python {sys.version.split()[0]}; chain y = sin(y) * y + c; median of {repeat} runs; "
          f"garbage collector {'off' if args.no_gc else 'on'}; µs per primal op")
    print(f"{'N ops':>7}  {'impl':<16} {'record':>8} {'backward':>9} {'total':>8}"
          "   ratio tidu/peer: record / backward / total")
    for n_ops, rows in table.items():
        _, t_rec, t_bwd = rows[0]
        for label, rec, bwd in rows:
            line = f"{n_ops:>7}  {label:<16} {rec:>8.2f} {bwd:>9.2f} {rec + bwd:>8.2f}"
            if label != "tidu":
                line += (f"   {t_rec / rec:.2f} / {t_bwd / bwd:.2f} / "
                         f"{(t_rec + t_bwd) / (rec + bwd):.2f}")
            print(line)


if __name__ == "__main__":
    main()
