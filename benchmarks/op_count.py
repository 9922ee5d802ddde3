"""Operation counts of the MLP loss's gradient: tidu's graphs before and after
``tidu.optimize``, next to the equations of ``jax.make_jaxpr(jax.grad(loss))``.

The loss is ``benchmarks/mlp.py``'s: a 784-512-512-10 tanh MLP, batch 256,
float32, softmax cross-entropy through ``logsumexp``. tidu traces it with the
``primitives.tensor`` functions, linearizes and transposes it with respect to
every parameter, and counts:

- *as built*: the operations of the primal, linear and transposed graphs;
- *needed*: the operations the gradient (or value and gradient) reads, found by
  following its keys across the three graphs: what any evaluator runs;
- *optimize*: the operations of ``tidu.optimize([primal, linear, transposed], outputs)``.

JAX's jaxpr is counted at the top level, recursively (sub-jaxprs' equations
too), and live (top level, after dropping equations nothing reads: ``jax.grad``'s
jaxpr keeps the forward's unused ones). Needs JAX for its column (``pip install
".[bench]"``); without it, only tidu's counts print.

    python benchmarks/op_count.py
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):                      # run as a script: the repository root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchmarks                                  # noqa: E402  one compute thread
from benchmarks.mlp import make_data               # noqa: E402
from tidu import optimize                          # noqa: E402
from tidu.graph import Derived                     # noqa: E402


def needed_operations(outputs) -> int:
    """How many operations ``outputs`` depend on, following their keys across graphs."""
    seen, stack = set(), [key.operation for key in outputs if type(key) is Derived]
    while stack:
        op_key = stack.pop()
        if op_key not in seen:
            seen.add(op_key)
            stack.extend(key.operation for key in op_key.inputs if type(key) is Derived)
    return len(seen)


def tidu_counts(params, x, onehot) -> dict[str, dict[str, int]]:
    """``{measure: {"grad": n, "value_and_grad": n}}`` for tidu's gradient graphs."""
    from primitives import tensor as tnp
    from primitives.tensor.transforms.functional import make_graph

    def loss(*ps):
        h = x
        for i in range(0, len(ps) - 2, 2):
            h = tnp.tanh(tnp.matmul(h, ps[i]) + ps[i + 1])
        z = tnp.matmul(h, ps[-2]) + ps[-1]
        return -tnp.sum((z - tnp.logsumexp(z, axis=1, keepdims=True)) * onehot) / len(x)

    traced = make_graph(loss, *params)
    argnums = tuple(range(len(params)))
    linear, transposed = traced.linearized(argnums), traced.transposed(argnums)
    graphs = [traced.graph, linear.graph, transposed.graph]
    gradient = [key for key in transposed.tangent_output_keys if key is not None]
    outputs = {"grad": gradient, "value_and_grad": gradient + list(traced.graph.output_keys)}
    built = sum(len(graph.operations) for graph in graphs)
    return {
        "tidu, as built": {kind: built for kind in outputs},
        "tidu, needed": {kind: needed_operations(keys) for kind, keys in outputs.items()},
        "tidu, optimize": {kind: len(optimize(graphs, keys).operations)
                           for kind, keys in outputs.items()},
    }


def jax_counts(params, x, onehot) -> dict[str, dict[str, int]] | None:
    """The same rows for ``jax.make_jaxpr`` of ``jax.grad`` / ``jax.value_and_grad``."""
    try:
        jax = benchmarks.start_jax()
        import jax.numpy as jnp
        from jax.extend import core
    except ImportError:
        return None

    def loss(ps):
        h = x
        for i in range(0, len(ps) - 2, 2):
            h = jnp.tanh(h @ ps[i] + ps[i + 1])
        z = h @ ps[-2] + ps[-1]
        return -jnp.sum((z - jax.nn.logsumexp(z, axis=1, keepdims=True)) * onehot) / len(x)

    def recursive(jaxpr) -> int:
        return sum(1 + sum(recursive(sub) for sub in core.jaxprs_in_params(eqn.params))
                   for eqn in jaxpr.eqns)

    def live(jaxpr) -> int:
        needed = {v for v in jaxpr.outvars if isinstance(v, core.Var)}
        count = 0
        for eqn in reversed(jaxpr.eqns):
            if eqn.effects or any(v in needed for v in eqn.outvars):
                count += 1
                needed.update(v for v in eqn.invars if isinstance(v, core.Var))
        return count

    ps = [jnp.asarray(p) for p in params]
    jaxprs = {"grad": jax.make_jaxpr(jax.grad(loss))(ps).jaxpr,
              "value_and_grad": jax.make_jaxpr(jax.value_and_grad(loss))(ps).jaxpr}
    return {
        "jax, top level": {kind: len(j.eqns) for kind, j in jaxprs.items()},
        "jax, recursive": {kind: recursive(j) for kind, j in jaxprs.items()},
        "jax, live": {kind: live(j) for kind, j in jaxprs.items()},
    }


def main() -> None:
    params, x, onehot = make_data()
    rows = tidu_counts(params, x, onehot)
    peers = jax_counts(params, x, onehot)
    if peers is None:
        print("jax is not installed: its counts are skipped (pip install '.[bench]')")
    else:
        rows.update(peers)
    print(f"{'operations of the MLP loss gradient':38} {'grad':>6} {'value_and_grad':>15}")
    for name, counts in rows.items():
        print(f"{name:38} {counts['grad']:6d} {counts['value_and_grad']:15d}")
    if peers is not None:
        ratio = rows["tidu, optimize"]["grad"] / rows["jax, recursive"]["grad"]
        print(f"tidu optimize / jax recursive (grad): {ratio:.2f}")


if __name__ == "__main__":
    main()
