"""Eager Hessian-vector product of the MLP loss, against PyTorch's double backward.

The loss is ``benchmarks/mlp.py``'s (784-512-512-10 tanh MLP, softmax
cross-entropy, batch 256, float32); the HVP is with respect to all its weights
and biases, along a random direction ``v``. Each figure is the median time in
ms of the whole step, forward pass included:

- ``tidu try_hvp``: record the forward with eager ``Tensor``s, then
  ``primitives.tensor.autograd.hvp`` (forward over reverse on the recorded
  trace, :func:`tidu.eager.try_hvp`);
- ``tidu create_graph``: record the forward, ``autograd.grad(loss, params,
  create_graph=True)``, then the gradient of ``sum(g . v)`` (double backward);
- ``tidu tnp.hvp``: the functional ``tnp.hvp`` (``jvp`` of ``grad``), on arrays;
- ``torch double backward``: the same double backward with
  ``torch.autograd.grad(..., create_graph=True)``, on one thread as in
  ``benchmarks/mlp.py`` (skipped when PyTorch is not installed).

Constants (inputs, labels, ``v``) are wrapped once on each side, as tensors.

Every result is checked against ``tnp.hvp``'s. The steps are timed in turns
(one run of each per round), and the ratios are tidu / PyTorch from the same
run (below 1: tidu faster).

    python -m benchmarks.hvp [--repeat 10]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import benchmarks  # one compute thread, set before NumPy is imported
import numpy as np

from benchmarks import mlp


def _direction(params, seed: int = 1) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(p.shape).astype(p.dtype) for p in params]


def _loss(tnp, ps, x, onehot):
    h = x
    for i in range(0, len(ps) - 2, 2):
        h = tnp.tanh(tnp.matmul(h, ps[i]) + ps[i + 1])
    z = tnp.matmul(h, ps[-2]) + ps[-1]
    return -tnp.sum((z - tnp.logsumexp(z, axis=1, keepdims=True)) * onehot) / len(x)


def tidu_steps(params, x, onehot, vs) -> dict:
    """tidu's three HVP steps, each a function returning the HVP as arrays."""
    from primitives import tensor as tnp
    from primitives.tensor import autograd

    ps = [tnp.tensor(p, requires_grad=True) for p in params]
    # constants wrapped once, as PyTorch's are (a NumPy array an op records is copied)
    xt, yt, vt = tnp.tensor(x), tnp.tensor(onehot), [tnp.tensor(v) for v in vs]

    def with_try_hvp():
        return autograd.hvp(_loss(tnp, ps, xt, yt), ps, vs)

    def with_create_graph():
        grads = autograd.grad(_loss(tnp, ps, xt, yt), ps, create_graph=True)
        dot = sum(tnp.sum(g * v) for g, v in zip(grads, vt))
        return tuple(h.data for h in autograd.grad(dot, ps))

    def functional():
        return tnp.hvp(lambda *qs: _loss(tnp, qs, x, onehot), params, vs)

    return {"tidu try_hvp": with_try_hvp, "tidu create_graph": with_create_graph,
            "tidu tnp.hvp": functional}


def torch_step(params, x, onehot, vs):
    """PyTorch's double backward HVP step, returning NumPy arrays."""
    import torch

    torch.set_num_threads(benchmarks.THREADS)
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    xt, yt = torch.tensor(x), torch.tensor(onehot)
    vt = [torch.tensor(v) for v in vs]

    def step():
        h = xt
        for i in range(0, len(ps) - 2, 2):
            h = torch.tanh(h @ ps[i] + ps[i + 1])
        z = h @ ps[-2] + ps[-1]
        loss = -(torch.log_softmax(z, dim=1) * yt).sum() / len(x)
        grads = torch.autograd.grad(loss, ps, create_graph=True)
        dot = sum((g * v).sum() for g, v in zip(grads, vt))
        return tuple(h.numpy() for h in torch.autograd.grad(dot, ps))

    return step


def _close(got, want) -> bool:
    return all(np.allclose(g, w, rtol=2e-3, atol=2e-4 * np.abs(w).max()) for g, w in zip(got, want))


def interleaved_medians(steps: dict, repeat: int) -> dict:
    """Median ms of each step, timed in turns (one run of each per round), so that a change
    in the machine's load during the run weighs on every step alike."""
    times = {name: [] for name in steps}
    for _ in range(repeat):
        for name, step in steps.items():
            gc.collect()
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    return {name: 1e3 * statistics.median(samples) for name, samples in times.items()}


def hvp_workload(repeat: int) -> list[dict]:
    """One row: each tidu HVP step's median ms, with PyTorch's double backward as the peer."""
    params, x, onehot = mlp.make_data()
    vs = _direction(params)
    steps = tidu_steps(params, x, onehot, vs)
    reference = steps["tidu tnp.hvp"]()
    row = {"workload": "hvp", "case": "MLP loss H·v, all weights, batch 256, float32",
           "peers": {}}
    try:
        steps[TORCH] = torch_step(params, x, onehot, vs)
    except ImportError:
        row["note"] = "torch is not installed: skipped (pip install '.[bench]')"
    for name, step in steps.items():
        assert _close(step(), reference), name          # also the warm-up run
    for name, ms in interleaved_medians(steps, repeat).items():
        if name == TORCH:
            row["peers"][TORCH] = ms
        else:
            row[f"{name} ms"] = ms
    row["tidu_ms"] = row["tidu try_hvp ms"]
    return [row]


TORCH = "torch double backward"


def format_rows(rows: list[dict]) -> str:
    lines = []
    for row in rows:
        lines.append(f"{row['workload']}: {row['case']}")
        torch_ms = row["peers"].get(TORCH)
        for key, value in row.items():
            if key.endswith(" ms"):
                ratio = f"   ratio to torch {value / torch_ms:5.2f}" if torch_ms else ""
                lines.append(f"  {key[:-3]:22s} {value:9.2f} ms{ratio}")
        if torch_ms:
            lines.append(f"  {TORCH:22s} {torch_ms:9.2f} ms")
        if "note" in row:
            lines.append(f"  {row['note']}")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hvp",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    rows = hvp_workload(args.repeat)
    print(format_rows(rows))
    return rows


if __name__ == "__main__":
    main()
