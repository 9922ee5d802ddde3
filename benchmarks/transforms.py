"""Cost of ``linearize`` + ``linear_transpose`` per primal op, on a long chain.

The chain is ``y = sin(y) * y + c`` (3 primal ops per step: SIN, MUL, ADD),
built once per size with a GraphBuilder (not timed). For N = 10^3, 10^4, 10^5
primal ops, each transform is timed alone, a few runs, median; the result is
µs per primal op, plus the ratio t(10^5)/t(10^4) per op (1.0 = flat in N).

If ``jax`` is importable, ``jax.linearize`` + ``jax.linear_transpose`` on the
same chain is timed too (N up to 10^4; it is slow), for comparison.

Run:  python benchmarks/transforms.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):                   # python benchmarks/transforms.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks  # noqa: E402,F401  one compute thread, set before NumPy is imported

from primitives.scalar import ScalarOp  # noqa: E402
from tidu import linear_transpose, linearize  # noqa: E402
from tidu.graph import GraphBuilder, Input, Local, evaluate  # noqa: E402

SIZES = (1_000, 10_000, 100_000)


def chain(n_ops: int):
    """``y = sin(y) * y + c`` repeated until the graph has ``n_ops`` primal ops."""
    b = GraphBuilder()
    y = b.add_input("y0")
    c = b.add_input("c")
    for _ in range(math.ceil(n_ops / 3)):
        [s] = b.add_operation(ScalarOp.SIN, [Local(y)])
        [m] = b.add_operation(ScalarOp.MUL, [Local(s), Local(y)])
        [y] = b.add_operation(ScalarOp.ADD, [Local(m), Local(c)])
    b.set_outputs([y])
    return b.build()


def time_build(n_ops: int, runs: int) -> float:
    """Median seconds to build the chain with ``GraphBuilder.add_operation``."""
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        chain(n_ops)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_tidu(n_ops: int, runs: int):
    """Median seconds of (linearize, linear_transpose) and the primal op count."""
    graph = chain(n_ops)
    n = len(graph.operations)
    lin_times, tr_times = [], []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        lin = linearize(graph, graph.output_keys, ["y0", "c"])
        middle = time.perf_counter()
        tr = linear_transpose(lin)
        end = time.perf_counter()
        lin_times.append(middle - start)
        tr_times.append(end - middle)
        last = (lin, tr)
        del lin, tr
    # sanity: the gradient w.r.t. c against a forward-mode float loop
    lin, tr = last
    [grad_c] = evaluate([graph, lin.graph, tr.graph], tr.tangent_output_keys[1:],
                        {Input("y0"): 0.5, Input("c"): 0.3, tr.tangent_input_keys[0]: 1.0})
    y, dy = 0.5, 0.0
    for _ in range(n // 3):
        dy = (math.cos(y) * y + math.sin(y)) * dy + 1.0
        y = math.sin(y) * y + 0.3
    assert abs(grad_c - dy) <= 1e-9 * abs(dy), (grad_c, dy)
    return statistics.median(lin_times), statistics.median(tr_times), n


def time_jax(n_ops: int, runs: int):
    """Median seconds of jax.linearize + jax.linear_transpose (+ one transposed call)."""
    jax = benchmarks.start_jax()
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    steps = math.ceil(n_ops / 3)

    def f(y, c):
        for _ in range(steps):
            y = jnp.sin(y) * y + c
        return y

    y0, c = jnp.float64(0.5), jnp.float64(0.3)
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        _, f_jvp = jax.linearize(f, y0, c)
        f_vjp = jax.linear_transpose(f_jvp, y0, c)
        cts = f_vjp(jnp.float64(1.0))
        jax.block_until_ready(cts)
        times.append(time.perf_counter() - start)
    return statistics.median(times), 3 * steps


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs, for a smoke test")
    args = parser.parse_args(argv)
    runs = {1_000: 7, 10_000: 5, 100_000: 3}
    if args.quick:
        runs = {size: 1 for size in SIZES}

    print(f"tidu linearize + linear_transpose, chain y = sin(y) * y + c (3 ops/step); "
          f"Python {sys.version.split()[0]}")
    print(f"{'primal ops':>11} {'runs':>5} {'linearize':>12} {'transpose':>12} {'total':>12}"
          f"   (µs per primal op, median)")
    per_op = {}
    for size in SIZES:
        t_lin, t_tr, n = time_tidu(size, runs[size])
        per_op[size] = (t_lin + t_tr) / n
        print(f"{n:>11,} {runs[size]:>5} {1e6 * t_lin / n:>12.2f} {1e6 * t_tr / n:>12.2f}"
              f" {1e6 * (t_lin + t_tr) / n:>12.2f}")
    print(f"ratio t(10^5)/t(10^4) per op: {per_op[100_000] / per_op[10_000]:.2f}"
          f"   (1.00 = flat in N)")

    print()
    try:
        import jax  # noqa: F401
    except ImportError:
        print("jax is not installed: skipping the jax.linearize + jax.linear_transpose comparison")
        return
    print("jax.linearize + jax.linear_transpose (+ one call of the transpose), same chain")
    jax_per_op = {}
    for size in SIZES[:2]:
        t, n = time_jax(size, 3 if size <= 1_000 else 1)
        jax_per_op[size] = t / n
        print(f"{n:>11,} {'':>5} {'':>12} {'':>12} {1e6 * t / n:>12.2f}")
    for size, t in jax_per_op.items():
        print(f"N = {size:,}: jax / tidu per op = {t / per_op[size]:.1f}x")


if __name__ == "__main__":
    main()
