"""Per-example gradients of the MLP loss with ``vmap(grad(loss))``, against ``torch.func`` and JAX.

The loss is ``benchmarks/mlp.py``'s (784-512-512-10 tanh MLP, softmax
cross-entropy, float32), written for ONE example; the batch has 256. Each
figure is the median time in ms of the whole call (256 gradients of every
weight and bias):

- ``tidu vmap(grad)``: ``tnp.vmap(tnp.grad(loss), in_axes=(None, 0, 0))`` on arrays
  (traced, batched and compiled on each call: no ``jit``, as the peers);
- ``tidu batched grad``: one ``tnp.grad`` of the loss summed over the batch, the
  physical reference (the same products, without the per-example outer products
  that ``vmap`` must write out);
- ``torch.func vmap(grad)``: ``torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))``,
  on one thread as in ``benchmarks/mlp.py``;
- ``jax vmap(grad)``: ``jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))`` without ``jit``.

Peers that are not installed are skipped with a note. Every result is checked
against tidu's, the steps are timed in turns (one run of each per round), and
the ratios are from the same run.

    python -m benchmarks.vmap [--repeat 10]
"""

from __future__ import annotations

import argparse

import benchmarks  # one compute thread, set before NumPy is imported
import numpy as np

from benchmarks import mlp
from benchmarks.hvp import interleaved_medians

TORCH = "torch.func vmap(grad)"
JAX = "jax vmap(grad)"
VMAP = "tidu vmap(grad)"
BATCHED = "tidu batched grad"


def _loss(xp, logsumexp, ps, x, onehot):
    """The loss of one example (``x`` of shape (784,)), for any NumPy-like namespace."""
    h = x
    for i in range(0, len(ps) - 2, 2):
        h = xp.tanh(h @ ps[i] + ps[i + 1])
    z = h @ ps[-2] + ps[-1]
    return -xp.sum((z - logsumexp(z)) * onehot)


def tidu_steps(params, x, onehot) -> dict:
    from primitives import tensor as tnp

    def loss(ps, xi, yi):
        return _loss(tnp, tnp.logsumexp, ps, xi, yi)

    per_example = tnp.vmap(tnp.grad(loss), in_axes=(None, 0, 0))

    def summed(ps):
        h = x
        for i in range(0, len(ps) - 2, 2):
            h = tnp.tanh(h @ ps[i] + ps[i + 1])
        z = h @ ps[-2] + ps[-1]
        return -tnp.sum((z - tnp.logsumexp(z, axis=1, keepdims=True)) * onehot)

    return {VMAP: lambda: per_example(params, x, onehot),
            BATCHED: lambda: tnp.grad(summed)(params)}


def torch_step(params, x, onehot):
    import torch
    from torch.func import grad, vmap

    torch.set_num_threads(benchmarks.THREADS)
    ps = tuple(torch.tensor(p) for p in params)
    xt, yt = torch.tensor(x), torch.tensor(onehot)
    per_example = vmap(grad(lambda qs, xi, yi: _loss(torch, lambda z: torch.logsumexp(z, 0),
                                                      qs, xi, yi)), in_dims=(None, 0, 0))
    return lambda: [g.numpy() for g in per_example(ps, xt, yt)]


def jax_step(params, x, onehot):
    jax = benchmarks.start_jax()
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    ps = [jnp.asarray(p) for p in params]
    xj, yj = jnp.asarray(x), jnp.asarray(onehot)
    per_example = jax.vmap(jax.grad(lambda qs, xi, yi: _loss(jnp, logsumexp, qs, xi, yi)),
                           in_axes=(None, 0, 0))

    def step():
        grads = per_example(ps, xj, yj)
        for g in grads:
            g.block_until_ready()
        return [np.asarray(g) for g in grads]
    return step


def _close(got, want) -> bool:
    return all(np.allclose(g, w, rtol=2e-3, atol=2e-4 * np.abs(w).max())
               for g, w in zip(got, want))


def vmap_workload(repeat: int, batch: int = mlp.BATCH) -> list[dict]:
    """One row: per-example gradients by ``vmap(grad)`` next to the peers and to one batched
    gradient, in ms (``tidu_ms`` is ``vmap(grad)``'s)."""
    params, x, onehot = mlp.make_data()
    x, onehot = x[:batch], onehot[:batch]
    steps = tidu_steps(params, x, onehot)
    reference = steps[VMAP]()
    assert _close([g.sum(axis=0) for g in reference], steps[BATCHED]())
    row = {"workload": "vmap", "case": f"MLP loss per-example gradients, batch {batch}, "
                                       "float32", "peers": {}}
    notes = []
    for name, make in ((TORCH, torch_step), (JAX, jax_step)):
        try:
            steps[name] = make(params, x, onehot)
        except ImportError:
            notes.append(f"{name.split()[0].split('.')[0]} is not installed: skipped "
                         "(pip install '.[bench]')")
    if notes:
        row["note"] = "; ".join(notes)
    for name, step in steps.items():
        if name != BATCHED:
            assert _close(step(), reference), name           # also the warm-up run
    for name, ms in interleaved_medians(steps, repeat).items():
        if name in (TORCH, JAX):
            row["peers"][name] = ms
        else:
            row[f"{name} ms"] = ms
    row["tidu_ms"] = row[f"{VMAP} ms"]
    return [row]


def format_rows(rows: list[dict]) -> str:
    lines = []
    for row in rows:
        lines.append(f"{row['workload']}: {row['case']}")
        vmap_ms = row["tidu_ms"]
        batched_ms = row[f"{BATCHED} ms"]
        lines.append(f"  {VMAP:24s} {vmap_ms:9.2f} ms")
        lines.append(f"  {BATCHED:24s} {batched_ms:9.2f} ms   vmap(grad) / batched grad "
                     f"{vmap_ms / batched_ms:5.2f}")
        for peer, ms in row["peers"].items():
            lines.append(f"  {peer:24s} {ms:9.2f} ms   vmap(grad) / {peer.split()[0]} "
                         f"{vmap_ms / ms:5.2f}")
        if "note" in row:
            lines.append(f"  {row['note']}")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.vmap",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--batch", type=int, default=mlp.BATCH)
    args = parser.parse_args(argv)
    rows = vmap_workload(args.repeat, args.batch)
    print(format_rows(rows))
    return rows


if __name__ == "__main__":
    main()
