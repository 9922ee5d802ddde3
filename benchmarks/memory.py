"""Backward's peak memory over what the forward holds: a chain of 1 MB arrays (eager)."""

import gc
import tracemalloc

import benchmarks  # noqa: F401  one compute thread, set before NumPy is imported
import numpy as np


def memory_workload(n_ops):
    from primitives import tensor as tnp

    size = 1 << 17                                   # 131072 float64 = 1 MB
    gc.collect()
    tnp.release_cached_arrays()      # arrays cached before tracing started would go unseen
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    x = tnp.tensor(np.full(size, 0.5), requires_grad=True)
    y = x
    for _ in range(n_ops // 3):
        y = tnp.sin(y) * y + 0.1
    loss = tnp.sum(y)
    forward_held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.reset_peak()
    loss.backward()
    backward_peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert x.grad.shape == (size,)
    return [{"workload": "memory", "case": "chain of 1 MB arrays", "n_ops": 3 * (n_ops // 3),
             "forward_mb": forward_held / 2**20, "backward_peak_mb": backward_peak / 2**20,
             "backward_over_forward": backward_peak / forward_held, "peers": {}}]
