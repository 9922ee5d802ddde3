"""Forward + backward of a 784-512-512-10 tanh MLP with softmax cross-entropy.

Batch 256, float32. tidu's eager ``Tensor`` and ``jit(value_and_grad(loss))``
against NumPy's forward pass alone,
PyTorch CPU eager, HIPS autograd and JAX (eager and jit), each when installed
(`pip install ".[bench]"`); missing peers are skipped with a note. Prints the
median of several runs in ms and ratios to each peer measured in the same run.

    python benchmarks/mlp.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time

import numpy as np

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


def numpy_forward(params, x, onehot):
    h = x
    for i in range(0, len(params) - 2, 2):
        h = np.tanh(h @ params[i] + params[i + 1])
    z = h @ params[-2] + params[-1]
    m = z.max(axis=1, keepdims=True)
    log_probs = z - (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))
    return -(log_probs * onehot).sum() / len(x)


def tidu_model(params, x, onehot):
    """The tidu forward pass and training step (forward, backward, grads reset) as functions."""
    from primitives import tensor as tnp

    ps = [tnp.tensor(p, requires_grad=True) for p in params]
    xt = tnp.tensor(x)

    def forward():
        h = xt
        for i in range(0, len(ps) - 2, 2):
            h = tnp.tanh(tnp.matmul(h, ps[i]) + ps[i + 1])
        z = tnp.matmul(h, ps[-2]) + ps[-1]
        return -tnp.sum((z - tnp.logsumexp(z, axis=1, keepdims=True)) * onehot) / len(x)

    def step():
        loss = forward()
        loss.backward()
        for p in ps:
            p.grad = None

    return forward, step


def tidu_runs(params, x, onehot, repeat):
    forward, step = tidu_model(params, x, onehot)
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
        return -tnp.sum((z - tnp.logsumexp(z, axis=1, keepdims=True)) * onehot) / len(x)

    step = tnp.jit(tnp.value_and_grad(loss))
    value, grads = step(params, x, onehot)                 # the trace
    assert abs(float(value) - numpy_forward(params, x, onehot)) < 1e-4
    assert all(g.shape == p.shape and g.dtype == p.dtype for g, p in zip(grads, params))
    return median_ms(lambda: step(params, x, onehot), repeat)


def tidu_jit_labels_runs(params, x, labels, repeat):
    """The same step with integer labels, ``logits[arange(n), y]`` (the usual cross-entropy),
    as one ``jit(value_and_grad(loss))`` program: ms. Its gradient is checked against
    PyTorch's ``cross_entropy`` where PyTorch is installed, else against the one-hot step."""
    from primitives import tensor as tnp

    def loss(ps, x, y):
        h = x
        for i in range(0, len(ps) - 2, 2):
            h = tnp.tanh(tnp.matmul(h, ps[i]) + ps[i + 1])
        z = tnp.matmul(h, ps[-2]) + ps[-1]
        return tnp.mean(tnp.logsumexp(z, axis=1) - z[tnp.arange(len(y)), y])

    step = tnp.jit(tnp.value_and_grad(loss))
    value, grads = step(params, x, labels)
    try:
        _, expected = torch_cross_entropy(params, x, labels)
    except ImportError:
        onehot = np.eye(SIZES[-1], dtype=np.float32)[labels]

        def onehot_loss(ps):
            z = _logits(tnp, ps, x)
            return -tnp.sum((z - tnp.logsumexp(z, axis=1, keepdims=True)) * onehot) / len(x)
        expected = tnp.grad(onehot_loss)(params)
    for g, e in zip(grads, expected):
        assert np.allclose(g, e, rtol=1e-4, atol=1e-6), "integer-label gradient differs"
    shuffled = np.random.default_rng(1).permutation(labels)   # new labels: no new trace
    step(params, x, shuffled)
    return median_ms(lambda: step(params, x, labels), repeat)


def _logits(np_like, ps, x):
    h = x
    for i in range(0, len(ps) - 2, 2):
        h = np_like.tanh(h @ ps[i] + ps[i + 1])
    return h @ ps[-2] + ps[-1]


def torch_cross_entropy(params, x, labels):
    """PyTorch's ``cross_entropy`` on integer labels: ``(loss, gradients as NumPy arrays)``."""
    import torch

    ps = [torch.tensor(p, requires_grad=True) for p in params]
    loss = torch.nn.functional.cross_entropy(_logits(torch, ps, torch.tensor(x)),
                                             torch.tensor(labels))
    loss.backward()
    return float(loss.detach()), [p.grad.numpy() for p in ps]


def torch_labels_runs(params, x, labels, repeat):
    """PyTorch eager forward + backward with ``cross_entropy`` on integer labels: ms."""
    import torch

    torch.set_num_threads(2)
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    xt, yt = torch.tensor(x), torch.tensor(labels)

    def step():
        torch.nn.functional.cross_entropy(_logits(torch, ps, xt), yt).backward()
        for p in ps:
            p.grad = None

    return median_ms(step, repeat)


def page_faults_per_step(step, steps: int = 10) -> float:
    """Minor page faults per call of ``step`` after a warm-up call (memory the OS maps in)."""
    step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(steps):
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / steps


def torch_runs(params, x, onehot, repeat):
    import torch

    torch.set_num_threads(2)
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    xt, yt = torch.tensor(x), torch.tensor(onehot)

    def forward():
        h = xt
        for i in range(0, len(ps) - 2, 2):
            h = torch.tanh(h @ ps[i] + ps[i + 1])
        z = h @ ps[-2] + ps[-1]
        return -(torch.log_softmax(z, dim=1) * yt).sum() / len(x)

    def step():
        forward().backward()
        for p in ps:
            p.grad = None

    with torch.no_grad():
        fwd = median_ms(forward, repeat)
    return fwd, median_ms(step, repeat)


def autograd_runs(params, x, onehot, repeat):
    import autograd
    import autograd.numpy as anp

    def loss(ps):
        h = x
        for i in range(0, len(ps) - 2, 2):
            h = anp.tanh(anp.dot(h, ps[i]) + ps[i + 1])
        z = anp.dot(h, ps[-2]) + ps[-1]
        m = anp.max(z, axis=1, keepdims=True)
        lp = z - (m + anp.log(anp.sum(anp.exp(z - m), axis=1, keepdims=True)))
        return -anp.sum(lp * onehot) / len(x)

    g = autograd.grad(loss)
    return median_ms(lambda: loss(params), repeat), median_ms(lambda: g(params), repeat)


def jax_runs(params, x, onehot, repeat):
    import jax
    import jax.numpy as jnp

    def loss(ps):
        h = x
        for i in range(0, len(ps) - 2, 2):
            h = jnp.tanh(h @ ps[i] + ps[i + 1])
        z = h @ ps[-2] + ps[-1]
        return -jnp.sum(jax.nn.log_softmax(z, axis=1) * onehot) / len(x)

    ps = [jnp.asarray(p) for p in params]
    grad = jax.grad(loss)
    eager = median_ms(lambda: jax.block_until_ready(grad(ps)), repeat)
    jitted = jax.jit(grad)
    jit = median_ms(lambda: jax.block_until_ready(jitted(ps)), repeat)
    return eager, jit


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    params, x, onehot = make_data()
    gc.collect()

    numpy_fwd = median_ms(lambda: numpy_forward(params, x, onehot), args.repeat)
    tidu_fwd, tidu_total = tidu_runs(params, x, onehot, args.repeat)
    tidu_faults = page_faults_per_step(tidu_model(params, x, onehot)[1])
    tidu_jit = tidu_jit_runs(params, x, onehot, args.repeat)
    rows = [("numpy forward only", numpy_fwd, None),
            ("tidu eager forward", tidu_fwd, None),
            ("tidu eager forward + backward", tidu_total, None),
            ("tidu jit(value_and_grad)", tidu_jit, None)]
    notes = []
    for name, runner in (("torch", torch_runs), ("autograd", autograd_runs), ("jax", jax_runs)):
        try:
            first, second = runner(params, x, onehot, args.repeat)
        except ImportError:
            notes.append(f"{name} is not installed: skipped (pip install '.[bench]')")
            continue
        if name == "torch":
            rows += [("torch forward", first, None), ("torch forward + backward", second, "torch")]
        elif name == "autograd":
            rows += [("autograd forward + backward", second, "autograd")]
        else:
            rows += [("jax eager forward + backward", first, "jax eager"),
                     ("jax jit forward + backward", second, "jax jit")]

    print(f"MLP {'-'.join(map(str, SIZES))} tanh, softmax cross-entropy, batch {BATCH}, "
          f"float32; median of {args.repeat} runs")
    print(f"{'':34s} {'ms':>8s}   tidu eager / this   tidu jit / this")
    for name, ms, peer in rows:
        ratio = f"{tidu_total / ms:8.2f}            {tidu_jit / ms:8.2f}" if peer else ""
        print(f"{name:34s} {ms:8.2f}   {ratio}")
    print(f"tidu backward / forward: {(tidu_total - tidu_fwd) / tidu_fwd:.2f}")
    print(f"tidu page faults per step: {tidu_faults:.0f}")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
