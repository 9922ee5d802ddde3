"""Build and evaluate a chain of scalar ops with tidu.graph; print microseconds per op.

The chain is ``y = sin(y) * y + c`` repeated (3 ops per step) for N = 10^3,
10^4 and 10^5 ops. Each figure is the median of a few repetitions; every
repetition interns fresh keys (a new input name), so the build measures key
creation, not lookups of keys left by the previous run.

Build is timed twice: with the garbage collector on (the default) and with
``gc.disable()`` during the build, so the GC's share is visible. Evaluation is
timed with the GC on.

    python benchmarks/graph_build.py [--sizes 1000 10000 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import enum
import gc
import itertools
import math
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):                   # python benchmarks/graph_build.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks  # noqa: E402,F401  one compute thread, set before NumPy is imported

from tidu.graph import EvaluableGraphOperation, GraphBuilder, Local, evaluate  # noqa: E402


class Op(EvaluableGraphOperation, enum.Enum):
    SIN = "sin"
    MUL = "mul"
    ADD = "add"

    def input_count(self) -> int:
        return 1 if self is Op.SIN else 2

    def output_count(self) -> int:
        return 1

    def eval(self, ctx, inputs):
        if self is Op.SIN:
            return [math.sin(inputs[0])]
        if self is Op.MUL:
            return [inputs[0] * inputs[1]]
        return [inputs[0] + inputs[1]]


_names = itertools.count()


def build_chain(n_ops: int):
    """Build the chain; return the graph and the key of its output."""
    name = next(_names)
    builder = GraphBuilder()
    y = builder.add_input(("y", name))
    c = builder.add_input(("c", name))
    add = builder.add_operation
    sin, mul, plus = Op.SIN, Op.MUL, Op.ADD
    for _ in range(n_ops // 3):
        [s] = add(sin, [Local(y)])
        [m] = add(mul, [Local(s), Local(y)])
        [y] = add(plus, [Local(m), Local(c)])
    builder.set_outputs([y])
    graph = builder.build()
    return graph, graph.values[y].key


def time_build(n_ops: int, gc_off: bool) -> float:
    gc.collect()
    if gc_off:
        gc.disable()
    try:
        start = time.perf_counter()
        graph, _ = build_chain(n_ops)
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    del graph
    gc.collect()
    return elapsed


def time_evaluate(n_ops: int) -> float:
    graph, out = build_chain(n_ops)
    y_key, c_key = graph.input_keys
    values = {y_key: 0.3, c_key: 0.1}
    gc.collect()
    start = time.perf_counter()
    evaluate(graph, [out], values)
    elapsed = time.perf_counter() - start
    del graph, out
    gc.collect()
    return elapsed


def median_us_per_op(measure, n_ops: int, repeat: int) -> float:
    ops = 3 * (n_ops // 3)
    return statistics.median(measure() for _ in range(repeat)) / ops * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    build_chain(3_000)  # warm up
    print("chain y = sin(y) * y + c; median of", args.repeat, "runs; microseconds per op")
    header = f"{'ops':>8} | {'build, GC on':>12} | {'build, GC off':>13} | {'evaluate':>8}"
    print(header)
    print("-" * len(header))
    for n_ops in args.sizes:
        on = median_us_per_op(lambda: time_build(n_ops, False), n_ops, args.repeat)
        off = median_us_per_op(lambda: time_build(n_ops, True), n_ops, args.repeat)
        ev = median_us_per_op(lambda: time_evaluate(n_ops), n_ops, args.repeat)
        print(f"{3 * (n_ops // 3):>8} | {on:>12.2f} | {off:>13.2f} | {ev:>8.2f}")


if __name__ == "__main__":
    main()
