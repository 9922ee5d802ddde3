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

tidu runs the chain twice: with the scalar frontend (``primitives.scalar.eager``)
and with 0-d ``primitives.tensor`` tensors.

A control, ``python tape``: what a record path written in Python on NumPy 0-d arrays
costs at the least. Each op is the NumPy call, one small object for its result and
one tuple on a list; backward walks the list once, the chain's three derivative rules
written inline (no dispatch, no keys, no checks, nothing freed early). It is the floor
under any eager frontend that records in Python and computes with NumPy. Every implementation's gradients are
checked against hand-derived ones. Ratios are tidu / peer (below 1 means tidu is
faster).

Each implementation runs in a fresh Python process of its own, importing only
what it needs: with the collector on, every full collection walks all live
objects, so a peer's imports (or tidu's) would otherwise slow the others down.
``--no-gc`` turns the collector off during the runs; ``--impl NAME`` runs one
implementation here and prints its figures as JSON.

    python benchmarks/eager.py [--sizes 3000 30000] [--repeat 5] [--no-gc]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):                   # python benchmarks/eager.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks  # noqa: E402,F401  one compute thread, set before NumPy is imported

ROOT = Path(__file__).resolve().parents[1]

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


# --- tidu ---------------------------------------------------------------------------


def scalar_frontend():
    from primitives.scalar.eager import Scalar, sin

    def record(steps: int):
        y0 = Scalar(Y0, requires_grad=True)
        c = Scalar(C0, requires_grad=True)
        y = y0
        for _ in range(steps):
            y = sin(y) * y + c
        return y0, c, y

    def backward(state):
        y0, c, y = state
        grads = y.backward()
        return grads.get(y0.key, 0.0), grads[c.key]

    return "tidu scalar frontend", record, backward


def zero_d_tensors():
    import numpy as np

    from primitives import tensor as tnp

    def record(steps: int):
        y0 = tnp.tensor(np.float64(Y0), requires_grad=True)
        c = tnp.tensor(np.float64(C0), requires_grad=True)
        y = y0
        for _ in range(steps):
            y = tnp.sin(y) * y + c
        return y0, c, y

    def backward(state):
        y0, c, y = state
        grads = y.backward()
        return float(grads.grad(y0)), float(grads.grad(c))

    return "tidu 0-d tensors", record, backward


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


# --- the floor of a Python record path ---------------------------------------------


def python_tape():
    import numpy as np

    sin, cos, multiply, add = np.sin, np.cos, np.multiply, np.add

    class Value:
        __slots__ = ("data",)

        def __init__(self, data):
            self.data = data

    def record(steps: int):
        tape = []
        push = tape.append
        y0, c = Value(np.asarray(Y0)), Value(np.asarray(C0))
        y = y0
        for _ in range(steps):
            s = Value(sin(y.data))
            push((0, s, y, None))
            p = Value(multiply(s.data, y.data))
            push((1, p, s, y))
            out = Value(add(p.data, c.data))
            push((2, out, p, c))
            y = out
        return y0, c, y, tape

    def backward(state):
        y0, c, y, tape = state
        grads = {y: np.asarray(1.0)}
        for kind, out, a, b in reversed(tape):
            g = grads.pop(out, None)
            if g is None:
                continue
            if kind == 0:                                  # sin
                pairs = ((a, multiply(g, cos(a.data))),)
            elif kind == 1:                                # multiply
                pairs = ((a, multiply(g, b.data)), (b, multiply(g, a.data)))
            else:                                          # add
                pairs = ((a, g), (b, g))
            for value, d in pairs:
                held = grads.get(value)
                grads[value] = d if held is None else add(held, d)
        return float(grads[y0]), float(grads[c])

    return "python tape (floor)", record, backward


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


IMPLEMENTATIONS = {"scalar": scalar_frontend, "tensor": zero_d_tensors,
                   "torch": torch_peer, "autograd": autograd_peer, "tape": python_tape}


def run_here(name: str, sizes, repeat: int) -> dict | None:
    """Measure implementation ``name`` in this process: ``{label, sizes: {n: [rec, bwd]}}``."""
    made = IMPLEMENTATIONS[name]()
    if made is None:
        return None
    label, record, backward = made
    figures = {}
    for n_ops in sizes:
        rec, bwd, grads = measure(record, backward, n_ops, repeat)
        want = reference(n_ops // 3)
        if not agrees(grads, want):
            raise SystemExit(f"{label}: gradients {grads} differ from the hand-derived {want}")
        figures[n_ops] = [rec, bwd]
    return {"label": label, "sizes": figures}


def run_apart(name: str, sizes, repeat: int, no_gc: bool = False) -> dict | None:
    """:func:`run_here` in a fresh Python process (``None``: the peer is not installed)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--impl", name,
               "--repeat", str(repeat), "--sizes", *map(str, sizes)]
    if no_gc:
        command.append("--no-gc")
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"eager benchmark {name} failed:\n{done.stderr}")
    result = json.loads(done.stdout)
    if result is not None:
        result["sizes"] = {int(n): v for n, v in result["sizes"].items()}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3_000, 30_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-gc", action="store_true",
                        help="disable the garbage collector during the timed runs")
    parser.add_argument("--impl", choices=sorted(IMPLEMENTATIONS),
                        help="measure one implementation in this process; print JSON")
    args = parser.parse_args()
    repeat = max(3, args.repeat)
    if args.impl:
        if args.no_gc:
            gc.disable()
        print(json.dumps(run_here(args.impl, args.sizes, repeat)))
        return

    results = {name: run_apart(name, args.sizes, repeat, args.no_gc) for name in IMPLEMENTATIONS}
    for name, result in results.items():
        if result is None:
            print(f"note: {name} is not installed; skipped")
    print(f"python {sys.version.split()[0]}; chain y = sin(y) * y + c; median of {repeat} runs; "
          f"garbage collector {'off' if args.no_gc else 'on'}; one process per implementation; "
          "µs per primal op")
    print(f"{'N ops':>7}  {'impl':<22} {'record':>8} {'backward':>9} {'total':>8}"
          "   ratio to torch: record / backward / total")
    torch = results.get("torch")
    for n_ops in args.sizes:
        for result in results.values():
            if result is None:
                continue
            rec, bwd = result["sizes"][n_ops]
            line = f"{n_ops:>7}  {result['label']:<22} {rec:>8.2f} {bwd:>9.2f} {rec + bwd:>8.2f}"
            if torch is not None and result is not torch:
                t_rec, t_bwd = torch["sizes"][n_ops]
                line += (f"   {rec / t_rec:.2f} / {bwd / t_bwd:.2f} / "
                         f"{(rec + bwd) / (t_rec + t_bwd):.2f}")
            print(line)


if __name__ == "__main__":
    main()
