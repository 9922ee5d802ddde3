"""Least squares by gradient descent on data bigger than a Dask worker's memory.

The dataset, a chunked ``X`` (rows x features) and ``y = X w_true + noise``, is
made by ``dask.array.random`` on the workers, chunk by chunk; it is at least
three times one worker's memory limit (more than the whole cluster's memory),
so it is never held anywhere: each step generates it again from its seed
while it streams through the workers. ``tnp.value_and_grad`` of the loss,
called on the Dask arrays, returns lazy Dask arrays: one Dask graph holding
the forward and the backward work, chunked as ``X`` is. Nothing runs until
``client.compute``; Dask's progress bar shows the step running.

    pip install ".[dask]" && python examples/distributed_least_squares.py

starts a ``LocalCluster`` of worker processes (``--workers``, each with
``--memory-limit``). Against a running cluster, give its scheduler's address
(the data size then follows --rows and --features, not the local limit):

    python examples/distributed_least_squares.py --scheduler tcp://10.0.0.5:8786

Options: --rows N, --features N, --chunk-rows N, --steps N, --lr R, --seed N,
--workers N, --memory-limit BYTES (e.g. 400MiB), --scheduler ADDRESS.
"""

from __future__ import annotations

import argparse
import resource
import time

import dask.array as da
import numpy as np
from dask.utils import format_bytes, parse_bytes
from distributed import Client, LocalCluster, progress

from primitives import tensor as tnp


def make_data(rows: int, features: int, chunk_rows: int, seed: int):
    """``(X, y, w_true)``: lazy Dask arrays of ``rows`` examples, and the true weights."""
    w_true = np.random.default_rng(seed).standard_normal(features)
    state = da.random.RandomState(seed)
    X = state.standard_normal((rows, features), chunks=(chunk_rows, features))
    y = X @ w_true + 0.1 * state.standard_normal(rows, chunks=chunk_rows)
    return X, y, w_true


def loss(w, X, y):
    """Mean squared error of the linear model ``X w``."""
    residual = X @ w - y
    return tnp.mean(residual * residual)


def peak_rss() -> int:
    """This process's peak resident memory, in bytes (run on each worker)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_500_000,
                        help="rows of the generated data set")
    parser.add_argument("--features", type=int, default=64,
                        help="columns (features) of the data set")
    parser.add_argument("--chunk-rows", type=int, default=50_000,
                        help="rows per Dask chunk")
    parser.add_argument("--steps", type=int, default=8,
                        help="gradient-descent steps")
    parser.add_argument("--lr", type=float, default=0.25,
                        help="learning rate")
    parser.add_argument("--seed", type=int, default=0,
                        help="random seed of the data")
    parser.add_argument("--workers", type=int, default=2,
                        help="worker processes of the LocalCluster started (ignored with --scheduler)")
    parser.add_argument("--memory-limit", default="400MiB",
                        help="each worker's memory limit")
    parser.add_argument("--scheduler", default=None, help="address of a running scheduler")
    args = parser.parse_args()

    if args.scheduler:
        client = Client(args.scheduler)
        limit = None
    else:
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               memory_limit=args.memory_limit, dashboard_address=None)
        client = Client(cluster)
        limit = parse_bytes(args.memory_limit)
    X, y, w_true = make_data(args.rows, args.features, args.chunk_rows, args.seed)
    data_bytes = X.nbytes + y.nbytes
    print(f"cluster: {len(client.scheduler_info()['workers'])} workers at {client.scheduler.address}")
    print(f"data: X {X.shape} and y, {format_bytes(data_bytes)} in {X.numblocks[0]} chunks"
          + (f", {data_bytes / limit:.1f}x one worker's memory limit ({format_bytes(limit)})"
             if limit else ""))
    if limit and data_bytes < 3 * limit:
        print("note: the data is smaller than 3x a worker's memory limit at these settings")

    value_and_grad = tnp.value_and_grad(loss)
    w = np.zeros(args.features)
    for step in range(1, args.steps + 1):
        value, gradient = value_and_grad(w, X, y)       # lazy: a Dask graph, nothing computed
        if step == 1:
            tasks = len({**value.__dask_graph__(), **gradient.__dask_graph__()})
            print(f"value_and_grad returned {type(value).__name__}s: one Dask graph of {tasks} "
                  "tasks (forward and backward), not computed yet")
        start = time.perf_counter()
        futures = client.compute([value, gradient])
        progress(futures, notebook=False)
        value, gradient = client.gather(futures)
        print(f"\nstep {step:2d}: loss {float(value):.6f}  ({time.perf_counter() - start:.2f} s)")
        w = w - args.lr * gradient

    error = np.linalg.norm(w - w_true) / np.linalg.norm(w_true)
    print(f"relative error of the fitted weights: {error:.2e}")
    peaks = client.run(peak_rss)
    worst = max(peaks.values())
    print(f"peak memory of a worker: {format_bytes(worst)}"
          + (f" (limit {format_bytes(limit)})" if limit else ""))
    client.close()


if __name__ == "__main__":
    main()
