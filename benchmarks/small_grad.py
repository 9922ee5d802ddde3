"""``tnp.grad`` without ``jit`` on small-array programs, against HIPS autograd (issue 23).

autograd records a tape and runs its VJPs once per call; tidu's ``tnp.grad``
traces, linearizes, transposes and evaluates on every call. On small arrays that
per-call machinery is the whole cost, so this is the floor the issue asks to reach:
``tnp.grad`` (no ``jit``) at most 1.0x autograd per call. Three programs, each
written once for any NumPy-like namespace (the same math on every side, float64):

- ``GP marginal likelihood``: the log marginal likelihood of 20 points (2-d inputs)
  under an RBF kernel plus noise, ``cholesky`` for the log-determinant and ``solve``
  for the quadratic form; gradient in the 3 log-hyperparameters;
- ``Gaussian mixture``: the log-likelihood of 50 2-d points under 3 diagonal Gaussians
  (``logsumexp`` over components); gradient in the means, log-scales and logits;
- ``tanh RNN``: hidden 16, input 4, 10 steps, a linear read-out at every step and a
  squared-error loss; gradient in the 4 weight arrays.

Each figure is the time in ms of one ``grad`` call, warm (back to back, as in an
optimizer's loop): the median over rounds of the mean of 5 consecutive calls:

- ``tidu tnp.grad``: ``tnp.grad(loss)(params)`` on NumPy arrays, no ``jit``;
- ``autograd``: HIPS ``autograd.grad(loss)(params)``;
- ``jax grad (no jit)``: ``jax.grad(loss)(params)`` eagerly, op by op, in float64
  (optional, skipped with a note when JAX is not installed).

Two more rows time second derivatives and Jacobians the same way
(:data:`JACOBIAN_PROGRAMS`): ``tnp.hessian`` of the GP marginal likelihood (3 x 3)
against ``autograd.hessian`` and ``jax.hessian``, and ``tnp.jacrev`` of the RNN's error at
each of its 10 steps with respect to ``W_h`` (16 x 16) against ``autograd.jacobian`` and
``jax.jacrev``.

Every library runs on one compute thread (``benchmarks/__init__.py``); at these sizes
it does not matter. tidu's gradient is checked against autograd's
(``rtol=1e-8``) before timing, and so is JAX's; the libraries are timed in turns (each
in every round), and the ratios are tidu / peer from the same run (below 1: tidu faster).

    python -m benchmarks.small_grad [--repeat 30]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import time

import benchmarks  # one compute thread, set before NumPy is imported
import numpy as np

TIDU = "tidu tnp.grad"
AUTOGRAD = "autograd"
JAX = "jax grad (no jit)"
INNER = 5               # calls timed together, back to back


# --- the programs, written once for a namespace ------------------------------------------------
#
# ``ns`` is a small record of the namespace's functions: ``xp`` (NumPy-like module),
# ``logsumexp(a, axis)``, ``cholesky``, ``solve``.

class Namespace:
    def __init__(self, xp, logsumexp, cholesky, solve):
        self.xp, self.logsumexp, self.cholesky, self.solve = xp, logsumexp, cholesky, solve


def gp_loss(ns, theta, data):
    """Negative log marginal likelihood of a GP with an RBF kernel; ``theta`` is
    ``[log lengthscale, log signal std, log noise std]``."""
    xp = ns.xp
    sqdist, y = data["sqdist"], data["y"]
    n = y.shape[0]
    kernel = xp.exp(2.0 * theta[1] - 0.5 * sqdist * xp.exp(-2.0 * theta[0]))
    k = kernel + xp.exp(2.0 * theta[2]) * np.eye(n)
    chol = ns.cholesky(k)
    # (axes -1, -2: the only ones autograd's diagonal VJP supports; same diagonal)
    logdet = 2.0 * xp.sum(xp.log(xp.diagonal(chol, 0, -1, -2)))
    alpha = ns.solve(k, y)
    return 0.5 * xp.sum(y * alpha) + 0.5 * logdet + 0.5 * n * math.log(2 * math.pi)


def mixture_loss(ns, params, data):
    """Negative log-likelihood of the points under a diagonal Gaussian mixture;
    ``params`` is ``[means (K, D), log scales (K, D), logits (K,)]``."""
    xp = ns.xp
    means, log_scales, logits = params
    x = data["x"]                                              # (N, D)
    z = (x[:, None, :] - means[None, :, :]) * xp.exp(-log_scales)[None, :, :]   # (N, K, D)
    log_comp = xp.sum(-0.5 * z * z - log_scales[None, :, :], axis=2) \
        - 0.5 * x.shape[1] * math.log(2 * math.pi)            # (N, K)
    log_weights = logits - ns.logsumexp(logits, 0)
    return -xp.sum(ns.logsumexp(log_comp + log_weights[None, :], 1))


def rnn_loss(ns, params, data):
    """Squared error of a tanh RNN's per-step linear read-out; ``params`` is
    ``[W_in (I, H), W_h (H, H), b (H,), w_out (H,)]``."""
    xp = ns.xp
    w_in, w_h, b, w_out = params
    xs, targets = data["xs"], data["targets"]                  # (T, I), (T,)
    h = xp.zeros(w_h.shape[0])
    loss = 0.0
    for t in range(xs.shape[0]):
        h = xp.tanh(xs[t] @ w_in + h @ w_h + b)
        err = xp.sum(h * w_out) - targets[t]
        loss = loss + err * err
    return loss


PROGRAMS = {
    "GP marginal likelihood": (gp_loss, "GP log marginal likelihood, 20 points"),
    "Gaussian mixture": (mixture_loss, "Gaussian mixture, 3 x 2-d, 50 points"),
    "tanh RNN": (rnn_loss, "tanh RNN, hidden 16, 10 steps"),
}


def rnn_errors(ns, w_h, data):
    """The tanh RNN's error at each of its steps (a vector), as a function of ``W_h`` alone
    (the other weights are fixed, in ``data["params"]``)."""
    xp = ns.xp
    w_in, _, b, w_out = data["params"]
    xs, targets = data["xs"], data["targets"]
    h = xp.zeros(w_h.shape[0])
    errors = []
    for t in range(xs.shape[0]):
        h = xp.tanh(xs[t] @ w_in + h @ w_h + b)
        errors.append(xp.sum(h * w_out) - targets[t])
    return xp.stack(errors)


# (function, transform, which problem's data, case)
JACOBIAN_PROGRAMS = {
    "GP hessian": (gp_loss, "hessian", "GP marginal likelihood",
                   "hessian of the GP log marginal likelihood, 3 x 3"),
    "RNN jacobian": (rnn_errors, "jacobian", "tanh RNN",
                     "jacobian of the tanh RNN's 10 step errors in W_h (16 x 16)"),
}


def jacobian_problem(name: str, problems: dict) -> tuple:
    """``(function, transform, point, data)`` of a :data:`JACOBIAN_PROGRAMS` entry."""
    function, transform, source, _ = JACOBIAN_PROGRAMS[name]
    params, data = problems[source]
    if function is rnn_errors:
        return function, transform, params[1], {**data, "params": params}
    return function, transform, params, data


def make_problems(seed: int = 0) -> dict:
    """``{name: (params, data)}``; params are float64 arrays (a 1-d array or a list)."""
    rng = np.random.default_rng(seed)
    xs = rng.uniform(-2, 2, size=(20, 2))
    sqdist = np.sum((xs[:, None, :] - xs[None, :, :]) ** 2, axis=2)
    gp = (np.array([0.1, 0.2, -1.0]),
          {"sqdist": sqdist, "y": np.sin(xs[:, 0]) + 0.5 * np.cos(xs[:, 1])
           + 0.1 * rng.standard_normal(20)})
    centres = np.array([[-2.0, 0.0], [2.0, 1.0], [0.0, -2.0]])
    points = centres[rng.integers(0, 3, size=50)] + 0.7 * rng.standard_normal((50, 2))
    mixture = ([rng.standard_normal((3, 2)), 0.1 * rng.standard_normal((3, 2)),
                0.1 * rng.standard_normal(3)], {"x": points})
    rnn = ([0.5 * rng.standard_normal((4, 16)), 0.25 * rng.standard_normal((16, 16)),
            0.1 * rng.standard_normal(16), 0.3 * rng.standard_normal(16)],
           {"xs": rng.standard_normal((10, 4)), "targets": rng.standard_normal(10)})
    return {"GP marginal likelihood": gp, "Gaussian mixture": mixture, "tanh RNN": rnn}


# --- one grad call per library ---------------------------------------------------------------


# each transform's name in tidu, autograd and JAX
TRANSFORMS = {"grad": ("grad", "grad", "grad"), "hessian": ("hessian", "hessian", "hessian"),
              "jacobian": ("jacrev", "jacobian", "jacrev")}


def tidu_step(loss, params, data, transform: str = "grad"):
    from primitives import tensor as tnp

    ns = Namespace(tnp, lambda a, axis: tnp.logsumexp(a, axis=axis), tnp.linalg.cholesky,
                   tnp.linalg.solve)
    g = getattr(tnp, TRANSFORMS[transform][0])(lambda p: loss(ns, p, data))
    return lambda: g(params)


def autograd_step(loss, params, data, transform: str = "grad"):
    import autograd
    import autograd.numpy as anp
    from autograd.scipy.special import logsumexp

    ns = Namespace(anp, lambda a, axis: logsumexp(a, axis=axis), anp.linalg.cholesky,
                   anp.linalg.solve)
    g = getattr(autograd, TRANSFORMS[transform][1])(lambda p: loss(ns, p, data))
    return lambda: g(params)


def jax_step(loss, params, data, transform: str = "grad"):
    jax = benchmarks.start_jax()
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    ns = Namespace(jnp, lambda a, axis: logsumexp(a, axis=axis), jnp.linalg.cholesky,
                   jnp.linalg.solve)
    g = getattr(jax, TRANSFORMS[transform][2])(lambda p: loss(ns, p, data))

    def step():
        with _x64(jax):
            out = g(params)
            return jax.tree_util.tree_map(np.asarray, out)     # wait for the values
    return step


def _x64(jax):
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    jax.config.update("jax_enable_x64", True)
    return contextlib.nullcontext()


def _leaves(grads) -> list:
    return [np.asarray(g) for g in (grads if isinstance(grads, (list, tuple)) else [grads])]


def _check(name, got, want, rtol=1e-8):
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        assert g.shape == w.shape and np.allclose(g, w, rtol=rtol, atol=1e-12), \
            (name, np.max(np.abs(g - w)))


def best_ms(step, calls: int, rounds: int = 7) -> float:
    """ms per call of ``step``: the best over ``rounds`` of the mean of ``calls`` calls."""
    step()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            step()
        times.append((time.perf_counter() - start) / calls)
    return 1e3 * min(times)


def interleaved_medians(steps: dict, repeat: int, inner: int = INNER) -> dict:
    """Median ms per call of each step over ``repeat`` rounds of :func:`benchmarks.mlp.
    interleaved` (one ``gc.collect()`` per round, then each step in turn: one call untimed,
    then ``inner`` timed together).

    Unlike ``benchmarks.hvp``'s, this does not collect before every timed call: with
    PyTorch and JAX loaded a full collection costs ~100 ms, and the call after it runs with
    cold caches, ~0.4 ms slower on either side, which is most of an autograd call here.
    """
    from benchmarks.mlp import interleaved

    times = interleaved(steps, repeat, inner)
    return {name: 1e3 * statistics.median(samples) for name, samples in times.items()}


def small_grad_workload(repeat: int, inner: int = INNER) -> list[dict]:
    """One row per program: ``tnp.grad``'s median ms per call, autograd (and JAX without
    ``jit``) as peers, timed in turns (``inner`` calls timed together a round); then one
    row per :data:`JACOBIAN_PROGRAMS` entry, each library's Jacobian or Hessian the same way."""
    rows = []
    problems = make_problems()
    benchmarks.hold_threads()
    jobs = [(name, loss, "grad", *problems[name], case)
            for name, (loss, case) in PROGRAMS.items()]
    jobs += [(name, *jacobian_problem(name, problems), JACOBIAN_PROGRAMS[name][3])
             for name in JACOBIAN_PROGRAMS]
    for name, function, transform, params, data, case in jobs:
        steps = {TIDU: tidu_step(function, params, data, transform)}
        row = {"workload": "small grad", "case": case, "transform": transform, "peers": {}}
        missing = []
        for peer, make in ((AUTOGRAD, autograd_step), (JAX, jax_step)):
            try:
                steps[peer] = make(function, params, data, transform)
            except ImportError:
                missing.append(peer.split()[0])
        if missing:
            row["note"] = (f"{' and '.join(missing)} not installed: skipped "
                           "(pip install '.[bench]')")
        reference = steps[TIDU]()
        for peer, step in steps.items():
            if peer != TIDU:
                _check(f"{name}: {peer}", reference, step())
        for step in steps.values():                  # warm-up
            step()
        for peer, ms in interleaved_medians(steps, repeat, inner).items():
            if peer == TIDU:
                row["tidu_ms"] = ms
            else:
                row["peers"][peer] = ms
        if AUTOGRAD in row["peers"]:
            row["tidu_over_autograd"] = row["tidu_ms"] / row["peers"][AUTOGRAD]
        rows.append(row)
    return rows


def format_rows(rows: list[dict]) -> str:
    lines = []
    for row in rows:
        names = TRANSFORMS[row.get("transform", "grad")]
        lines.append(f"{row['workload']}: {row['case']}")
        lines.append(f"  {'tidu tnp.' + names[0]:20s} {row['tidu_ms']:9.3f} ms")
        for peer, ms in row["peers"].items():
            peer_name = peer if names[1] == "grad" else (
                f"autograd {names[1]}" if peer == AUTOGRAD else f"jax {names[2]} (no jit)")
            lines.append(f"  {peer_name:20s} {ms:9.3f} ms   ratio tidu/peer "
                         f"{row['tidu_ms'] / ms:6.2f}")
        if "note" in row:
            lines.append(f"  {row['note']}")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.small_grad",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args(argv)
    rows = small_grad_workload(args.repeat)
    print(format_rows(rows))
    return rows


if __name__ == "__main__":
    main()
