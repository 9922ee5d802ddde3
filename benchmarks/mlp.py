"""Forward + backward of a 784-512-512-10 tanh MLP with softmax cross-entropy.

Batch 256, float32, ONE compute thread for every library (``benchmarks/__init__.py``).
Each step below is timed in rounds, in turns (``interleaved``): every round collects
garbage once, then runs each step once untimed and ``INNER`` times timed, so all
figures come from the same moments of the run. Ratios to the floor are the median over
rounds of (step / floor in that round).

- ``numpy floor``: the step's 8 matrix products alone, in NumPy into preallocated
  outputs (``np.matmul(..., out=)``): forward ``x@W1``, ``h1@W2``, ``h2@W3``; backward
  ``h2ᵀ@dz``, ``dz@W3ᵀ``, ``h1ᵀ@da2``, ``da2@W2ᵀ``, ``xᵀ@da1``: the BLAS floor;
- ``numpy forward``: the forward pass in NumPy;
- ``numpy step, written by hand``: the whole step (forward, the backward derived by
  hand, ``numpy_gradients``) in plain NumPy calls: the floor's products plus the
  unfused elementwise work, what a library that runs NumPy calls one by one can reach;
- tidu: the eager ``Tensor`` forward, the eager step (forward, ``backward``),
  ``jit(value_and_grad(loss))`` with one-hot labels and with integer labels
  (``logits[arange(n), y]``);
- peers, each when installed (``pip install ".[bench]"``): PyTorch eager with the
  one-hot loss and with ``cross_entropy`` on integer labels, HIPS autograd, JAX eager
  (``jax.grad``) and ``jax.jit(jax.grad)``.

The one-hot loss is ``-sum(log_softmax(z) * onehot) / n`` with each library's own
``log_softmax`` (``tnp.nn``'s, ``torch``'s, ``jax.nn``'s); autograd has none, so its loss
spells out the same shifted ``logsumexp``.

Every step's gradient is checked before timing against the gradient derived by hand in
NumPy (``numpy_gradients``). Also measured: the time tidu's eager and ``jit`` steps
spend inside ``np.matmul`` (a timing wrapper in its place, in rounds of their own, in
turns with the floor), and how many threads really work in each library's step
(``benchmarks.busy_threads``, Linux).

    python benchmarks/mlp.py [--repeat 20]
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):                   # python benchmarks/mlp.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks  # noqa: E402  one compute thread, set before NumPy is imported

import argparse  # noqa: E402
import gc  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

SIZES = [784, 512, 512, 10]
BATCH = 256


def labels_of(onehot) -> np.ndarray:
    """The integer class of each one-hot row."""
    return onehot.argmax(axis=1)


def make_data(seed=0):
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        params.append((rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32))
        params.append(np.zeros(fan_out, dtype=np.float32))
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    onehot = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(SIZES[-1], size=BATCH)]
    return params, x, onehot


def median_ms(fn, repeat: int) -> float:
    fn()                                            # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def log_probs(tnp, z):
    """The one-hot loss's log-probabilities in tidu: ``tnp.nn.log_softmax`` over the classes,
    one op (each peer uses its own ``log_softmax``)."""
    return tnp.nn.log_softmax(z, axis=1)


def numpy_forward(params, x, onehot):
    h = x
    for i in range(0, len(params) - 2, 2):
        h = np.tanh(h @ params[i] + params[i + 1])
    z = h @ params[-2] + params[-1]
    m = z.max(axis=1, keepdims=True)
    log_p = z - (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))
    return -(log_p * onehot).sum() / len(x)


def tidu_model(params, x, onehot):
    """The tidu forward pass, training step (forward, backward, grads reset) and the leaves."""
    from primitives import tensor as tnp

    ps = [tnp.tensor(p, requires_grad=True) for p in params]
    xt = tnp.tensor(x)

    def forward():
        h = xt
        for i in range(0, len(ps) - 2, 2):
            h = tnp.tanh(tnp.matmul(h, ps[i]) + ps[i + 1])
        z = tnp.matmul(h, ps[-2]) + ps[-1]
        return -tnp.sum(log_probs(tnp, z) * onehot) / len(x)

    def step():
        loss = forward()
        loss.backward()
        for p in ps:
            p.grad = None

    return forward, step, ps


def tidu_runs(params, x, onehot, repeat):
    forward, step, _ = tidu_model(params, x, onehot)
    loss = forward()
    assert loss.dtype == np.float32
    assert abs(loss.item() - numpy_forward(params, x, onehot)) < 1e-4
    fwd = median_ms(forward, repeat)
    total = median_ms(step, repeat)
    return fwd, total


def tidu_jit_runs(params, x, onehot, repeat):
    """One training step's work, ``jit(value_and_grad(loss))``, on NumPy arrays: ms."""
    from primitives import tensor as tnp

    def loss(ps, x, onehot):
        h = x
        for i in range(0, len(ps) - 2, 2):
            h = tnp.tanh(tnp.matmul(h, ps[i]) + ps[i + 1])
        z = tnp.matmul(h, ps[-2]) + ps[-1]
        return -tnp.sum(log_probs(tnp, z) * onehot) / len(x)

    step = tnp.jit(tnp.value_and_grad(loss))
    value, grads = step(params, x, onehot)                 # the trace
    assert abs(float(value) - numpy_forward(params, x, onehot)) < 1e-4
    assert all(g.shape == p.shape and g.dtype == p.dtype for g, p in zip(grads, params))
    return median_ms(lambda: step(params, x, onehot), repeat)


def _logits(np_like, ps, x):
    h = x
    for i in range(0, len(ps) - 2, 2):
        h = np_like.tanh(h @ ps[i] + ps[i + 1])
    return h @ ps[-2] + ps[-1]


def page_faults_per_step(step, steps: int = 10) -> float:
    """Minor page faults per call of ``step`` after a warm-up call (memory the OS maps in)."""
    step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(steps):
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / steps


# --- the floor and every step, timed in turns ----------------------------------------------

INNER = 2               # timed calls per step and round, after one untimed call

FLOOR = "numpy floor (8 products)"
NUMPY_FORWARD = "numpy forward"
NUMPY_STEP = "numpy step, written by hand"
EAGER_FORWARD = "tidu eager forward"
EAGER = "tidu eager Tensor step"
JIT = "tidu jit(value_and_grad) one-hot"
JIT_LABELS = "tidu jit(value_and_grad) integer labels"
TORCH = "torch eager one-hot"
TORCH_CE = "torch eager cross_entropy"
AUTOGRAD = "autograd"
JAX_EAGER = "jax eager"
JAX_JIT = "jax.jit"
OVER_FLOOR = (NUMPY_STEP, EAGER, JIT, JIT_LABELS, TORCH_CE, JAX_JIT)   # the rows of issue 23
SHORT = {FLOOR: "floor", NUMPY_STEP: "numpy step by hand", EAGER: "tidu eager step",
         JIT: "tidu jit one-hot", JIT_LABELS: "tidu jit labels"}
INSIDE = (NUMPY_STEP, EAGER, JIT, JIT_LABELS)   # the steps whose products are timed
BUSY = (FLOOR, JIT, TORCH_CE, JAX_JIT)                          # one per library


def numpy_gradients(params, x, onehot):
    """``(loss, gradients, intermediates)`` of the MLP, the backward derived by hand in
    NumPy; ``intermediates`` holds what the backward products read (h1, h2, dz, da2, da1)."""
    w1, b1, w2, b2, w3, b3 = params
    n = len(x)
    mm = np.matmul          # what `@` runs, named so that products_inside can time it
    h1 = np.tanh(mm(x, w1) + b1)
    h2 = np.tanh(mm(h1, w2) + b2)
    z = mm(h2, w3) + b3
    shifted = z - z.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    total = e.sum(axis=1, keepdims=True)
    loss = -((shifted - np.log(total)) * onehot).sum() / n
    dz = (e / total * onehot.sum(axis=1, keepdims=True) - onehot) / n
    da2 = mm(dz, w3.T) * (1 - h2 * h2)
    da1 = mm(da2, w2.T) * (1 - h1 * h1)
    grads = [mm(x.T, da1), da1.sum(0), mm(h1.T, da2), da2.sum(0), mm(h2.T, dz), dz.sum(0)]
    return loss, grads, {"h1": h1, "h2": h2, "dz": dz, "da2": da2, "da1": da1}


def floor_step(params, x, onehot):
    """The step's 8 matrix products, each ``np.matmul(a, b, out=...)`` into an output
    allocated once; returns ``step()`` (returning the outputs)."""
    w1, w2, w3 = params[0], params[2], params[4]
    _, _, act = numpy_gradients(params, x, onehot)
    h1, h2, dz, da2, da1 = (act[k] for k in ("h1", "h2", "dz", "da2", "da1"))
    products = [(x, w1), (h1, w2), (h2, w3),                                 # forward
                (h2.T, dz), (dz, w3.T), (h1.T, da2), (da2, w2.T), (x.T, da1)]   # backward
    plan = [(a, b, np.empty((a.shape[0], b.shape[1]), a.dtype)) for a, b in products]
    outs = [out for _, _, out in plan]
    matmul = np.matmul

    def step():
        for a, b, out in plan:
            matmul(a, b, out=out)
        return outs

    return step


def _check_floor(step, params, x, onehot) -> None:
    _, grads, _ = numpy_gradients(params, x, onehot)
    outs = step()
    for got, want in ((outs[3], grads[4]), (outs[5], grads[2]), (outs[7], grads[0])):
        assert np.allclose(got, want, rtol=1e-4, atol=1e-7), "floor products differ"
    assert all(out.dtype == np.float32 for out in outs)


def _close(name, got, want) -> None:
    got = [np.asarray(g) for g in got]
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        assert g.shape == w.shape and np.allclose(g, w, rtol=1e-3, atol=1e-5), \
            (name, float(np.max(np.abs(g - w))))


def tidu_steps(params, x, onehot, labels) -> dict:
    """tidu's steps: ``name -> (step, gradients)``, ``gradients()`` giving the step's."""
    from primitives import tensor as tnp

    forward, step, ps = tidu_model(params, x, onehot)

    def eager_gradients():
        for p in ps:
            p.grad = None
        forward().backward()
        return [p.grad for p in ps]

    def onehot_loss(ps, x, onehot):
        z = _logits(tnp, ps, x)
        return -tnp.sum(log_probs(tnp, z) * onehot) / len(x)

    def labels_loss(ps, x, y):
        z = _logits(tnp, ps, x)
        return tnp.mean(tnp.logsumexp(z, axis=1) - z[tnp.arange(len(y)), y])

    jit = tnp.jit(tnp.value_and_grad(onehot_loss))
    jit_labels = tnp.jit(tnp.value_and_grad(labels_loss))
    jit_labels(params, x, np.random.default_rng(1).permutation(labels))   # traced once
    return {EAGER_FORWARD: (forward, None), EAGER: (step, eager_gradients),
            JIT: (lambda: jit(params, x, onehot), lambda: jit(params, x, onehot)[1]),
            JIT_LABELS: (lambda: jit_labels(params, x, labels),
                         lambda: jit_labels(params, x, labels)[1])}


def torch_steps(params, x, onehot, labels) -> dict:
    """PyTorch eager steps (forward, backward, grads reset), one-hot loss and
    ``cross_entropy`` on integer labels."""
    torch = benchmarks.torch_threads()
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    xt, ot, yt = torch.tensor(x), torch.tensor(onehot), torch.tensor(labels)

    def onehot_loss():
        return -(torch.log_softmax(_logits(torch, ps, xt), dim=1) * ot).sum() / len(x)

    def labels_loss():
        return torch.nn.functional.cross_entropy(_logits(torch, ps, xt), yt)

    def stepper(loss):
        def step():
            loss().backward()
            for p in ps:
                p.grad = None

        def gradients():
            loss().backward()
            grads = [p.grad.numpy().copy() for p in ps]
            for p in ps:
                p.grad = None
            return grads
        return step, gradients

    return {TORCH: stepper(onehot_loss), TORCH_CE: stepper(labels_loss)}


def autograd_steps(params, x, onehot) -> dict:
    import autograd
    import autograd.numpy as anp

    def loss(ps):
        z = _logits(anp, ps, x)
        m = anp.max(z, axis=1, keepdims=True)
        lp = z - (m + anp.log(anp.sum(anp.exp(z - m), axis=1, keepdims=True)))
        return -anp.sum(lp * onehot) / len(x)

    g = autograd.grad(loss)
    return {AUTOGRAD: (lambda: g(params), lambda: g(params))}


def jax_steps(params, x, onehot) -> dict:
    jax = benchmarks.start_jax()
    import jax.numpy as jnp

    def loss(ps):
        z = _logits(jnp, ps, x)
        return -jnp.sum(jax.nn.log_softmax(z, axis=1) * onehot) / len(x)

    ps = [jnp.asarray(p) for p in params]
    grad, jitted = jax.grad(loss), jax.jit(jax.grad(loss))

    def eager():
        return jax.block_until_ready(grad(ps))

    def jit():
        return jax.block_until_ready(jitted(ps))

    return {JAX_EAGER: (eager, eager), JAX_JIT: (jit, jit)}


def interleaved(steps: dict, rounds: int, inner: int = INNER) -> dict:
    """Seconds per call of each step in each round: ``name -> [per round]``. A round
    collects garbage once, then runs each step in turn: one call untimed (it warms the
    caches the previous step evicted), then ``inner`` calls timed together."""
    times = {name: [] for name in steps}
    for _ in range(rounds):
        gc.collect()
        for name, step in steps.items():
            step()
            start = time.perf_counter()
            for _ in range(inner):
                step()
            times[name].append((time.perf_counter() - start) / inner)
    return times


def products_inside(floor, steps: dict, rounds: int, inner: int = INNER) -> dict:
    """Time each of ``steps`` spends inside ``np.matmul`` (a timing wrapper put in
    ``numpy.matmul``'s place while the step runs; the floor keeps the real one), timed in
    turns with ``floor``: ``{name: {"ms", "calls", "over_floor", "outside_us"}}`` per call
    of the step, ``over_floor`` the median over rounds of (time inside / floor in that
    round), ``outside_us`` the median time outside the products before the first, between
    each two and after the last (where the step's other work runs)."""
    real = np.matmul
    spent = [0.0, 0]
    marks: list = []            # (start, end) of each product of the step's last call

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            end = time.perf_counter()
            spent[0] += end - start
            spent[1] += 1
            marks.append((start, end))

    inside = {name: [] for name in steps}
    calls = {name: [] for name in steps}
    outside = {name: [] for name in steps}
    floors = []
    for _ in range(rounds):
        gc.collect()
        floor()
        start = time.perf_counter()
        for _ in range(inner):
            floor()
        floors.append((time.perf_counter() - start) / inner)
        for name, step in steps.items():
            np.matmul = timed
            try:
                step()
                spent[:] = [0.0, 0]
                for _ in range(inner):
                    marks.clear()
                    begin = time.perf_counter()
                    step()
                    finish = time.perf_counter()
            finally:
                np.matmul = real
            inside[name].append(spent[0] / inner)
            calls[name].append(spent[1] / inner)
            ends = [begin] + [end for _, end in marks]
            starts = [start for start, _ in marks] + [finish]
            outside[name].append([b - a for a, b in zip(ends, starts)])
    result = {FLOOR: {"ms": 1e3 * statistics.median(floors), "calls": 8.0}}
    for name in steps:
        segments = outside[name]
        result[name] = {"ms": 1e3 * statistics.median(inside[name]),
                        "calls": statistics.median(calls[name]),
                        "over_floor": statistics.median(a / f for a, f in
                                                        zip(inside[name], floors)),
                        "outside_us": [1e6 * statistics.median(r[i] for r in segments)
                                       for i in range(min(map(len, segments)))]}
    return result


def session(rounds: int, busy_seconds: float = 0.3) -> dict:
    """Every step's gradient checked, then all timed in turns for ``rounds`` rounds:
    ``{"ms": {name: median}, "over_floor": {name: median of per-round ratios},
    "products_inside": ..., "busy_threads": ..., "missing": [...]}``."""
    params, x, onehot = make_data()
    labels = labels_of(onehot)
    loss, expected, _ = numpy_gradients(params, x, onehot)
    steps = {FLOOR: (floor_step(params, x, onehot), None),
             NUMPY_FORWARD: (lambda: numpy_forward(params, x, onehot), None),
             # the whole step in plain NumPy (unfused elementwise work, fresh outputs):
             # what a library that runs NumPy calls can reach
             NUMPY_STEP: (lambda: numpy_gradients(params, x, onehot), None)}
    _check_floor(steps[FLOOR][0], params, x, onehot)
    assert abs(numpy_forward(params, x, onehot) - loss) < 1e-5
    steps.update(tidu_steps(params, x, onehot, labels))
    missing = []
    for name, make in (("torch", lambda: torch_steps(params, x, onehot, labels)),
                       ("autograd", lambda: autograd_steps(params, x, onehot)),
                       ("jax", lambda: jax_steps(params, x, onehot))):
        try:
            steps.update(make())
        except ImportError:
            missing.append(name)
    assert abs(steps[EAGER_FORWARD][0]().item() - loss) < 1e-4
    for name, (_, gradients) in steps.items():           # the check is also a warm-up
        if gradients is not None:
            _close(name, gradients(), expected)
    timed = {name: step for name, (step, _) in steps.items()}
    times = interleaved(timed, rounds)
    floor = times[FLOOR]
    result = {"ms": {name: 1e3 * statistics.median(t) for name, t in times.items()},
              "over_floor": {name: statistics.median(a / f for a, f in zip(t, floor))
                             for name, t in times.items() if name != FLOOR},
              "missing": missing, "rounds": rounds, "inner": INNER}
    result["products_inside"] = products_inside(
        timed[FLOOR], {name: timed[name] for name in INSIDE}, max(3, rounds // 2))
    result["busy_threads"] = {name: benchmarks.busy_threads(timed[name], busy_seconds)
                              for name in BUSY if name in timed}
    return result


def retaining_memory(rounds: int) -> dict:
    """The eager step after ``tnp.retain_freed_memory()`` (process-wide: run it in a process
    of its own), timed in turns with the floor: ``{"ms": ..., "over_floor": ...}``."""
    from primitives import tensor as tnp

    tnp.retain_freed_memory()
    params, x, onehot = make_data()
    times = interleaved({FLOOR: floor_step(params, x, onehot),
                         EAGER: tidu_model(params, x, onehot)[1]}, rounds)
    return {"ms": 1e3 * statistics.median(times[EAGER]),
            "over_floor": statistics.median(a / f for a, f in zip(times[EAGER], times[FLOOR]))}


def format_session(result: dict) -> str:
    ms, over = result["ms"], result["over_floor"]
    lines = [f"{'':40s} {'ms':>8s}   / floor (median of per-round ratios)"]
    for name, value in ms.items():
        ratio = f"{over[name]:8.2f}" if name in over else ""
        lines.append(f"{name:40s} {value:8.2f}   {ratio}")
    for name, inside in result["products_inside"].items():
        ratio = f"{inside['over_floor']:8.2f}" if "over_floor" in inside else " " * 8
        lines.append(f"{'in np.matmul: ' + SHORT[name]:40s} {inside['ms']:8.2f}   {ratio}   "
                     f"({inside['calls']:.0f} calls a step)")
        if "outside_us" in inside:
            lines.append(f"{'  outside them: ' + SHORT[name]:40s} "
                         f"{sum(inside['outside_us']) / 1e3:8.2f}   between products (us): "
                         + " ".join(f"{us:.0f}" for us in inside["outside_us"]))
    lines.append("threads busy in a step: " + ", ".join(
        f"{name.split(' (')[0]} {n}" for name, n in result["busy_threads"].items()))
    for name in result["missing"]:
        lines.append(f"{name} is not installed: skipped (pip install '.[bench]')")
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="rounds")
    args = parser.parse_args(argv)
    benchmarks.hold_threads()
    params, x, onehot = make_data()
    result = session(args.repeat)
    faults = page_faults_per_step(tidu_model(params, x, onehot)[1])
    print(f"MLP {'-'.join(map(str, SIZES))} tanh, softmax cross-entropy, batch {BATCH}, "
          f"float32; {args.repeat} rounds, each step {INNER} timed calls a round, median")
    print(benchmarks.format_thread_settings(benchmarks.thread_settings()))
    print(format_session(result))
    ms = result["ms"]
    print(f"tidu backward / forward: {(ms[EAGER] - ms[EAGER_FORWARD]) / ms[EAGER_FORWARD]:.2f}")
    print(f"tidu page faults per step: {faults:.0f}")
    return result


if __name__ == "__main__":
    main()
