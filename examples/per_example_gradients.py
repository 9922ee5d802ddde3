"""Per-example gradients with ``vmap(grad(loss))``, and a differentially private SGD step.

The loss is written for ONE example (an 8x8 digit image, scikit-learn's digits
data, and its one-hot label); ``grad`` differentiates it with respect to the
MLP's parameters, and ``vmap`` runs that over a batch in one program: one
gradient per example, which a batched loss (summed over examples) cannot give.
The per-example gradient norms are checked against a Python loop of ``grad``
calls. Then a few steps of DP-SGD (Abadi et al. 2016): clip each example's
gradient to norm ``--clip``, sum, add Gaussian noise of standard deviation
``--noise * --clip``, average, step. Run:

    pip install ".[examples]" && python examples/per_example_gradients.py

Options: --batch N (default 64), --steps N (default 100), --hidden N (default 32),
--clip C (default 1.0), --noise S (default 0.5), --lr R (default 0.5), --seed N.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.datasets import load_digits

from primitives import tensor as tnp


def init_params(rng, sizes) -> list:
    """Glorot-uniform weights and zero biases, as NumPy arrays: [w1, b1, w2, b2, ...]."""
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        params += [rng.uniform(-limit, limit, (fan_in, fan_out)), np.zeros(fan_out)]
    return params


def logits(params, x):
    h = x
    for i in range(0, len(params) - 2, 2):
        h = tnp.tanh(h @ params[i] + params[i + 1])
    return h @ params[-2] + params[-1]


def loss(params, x, onehot):
    """Softmax cross-entropy of ONE example: ``x`` has shape (64,), ``onehot`` (10,)."""
    z = logits(params, x)
    return -tnp.sum((z - tnp.logsumexp(z)) * onehot)


# one gradient (a list like params) per example: params shared, images and labels batched
per_example_grads = tnp.vmap(tnp.grad(loss), in_axes=(None, 0, 0))


def norms(grads) -> np.ndarray:
    """Each example's gradient norm over all parameters (the batch axis is axis 0)."""
    return np.sqrt(sum(np.sum(g.reshape(len(g), -1) ** 2, axis=1) for g in grads))


def dp_sgd_step(params, x, onehot, rng, clip: float, noise: float, lr: float) -> list:
    """One DP-SGD step: per-example gradients clipped to norm ``clip``, summed, noised."""
    grads = per_example_grads(params, x, onehot)
    scale = np.minimum(1.0, clip / np.maximum(norms(grads), 1e-12))    # per example
    new = []
    for p, g in zip(params, grads):
        clipped_sum = np.tensordot(scale, g, axes=1)
        noisy = clipped_sum + rng.normal(0.0, noise * clip, p.shape)
        new.append(p - lr * noisy / len(x))
    return new


def accuracy(params, x, labels) -> float:
    return float(np.mean(np.argmax(logits(params, x), axis=1) == labels))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch", type=int, default=64,
                        help="examples per batch")
    parser.add_argument("--steps", type=int, default=100,
                        help="training steps")
    parser.add_argument("--hidden", type=int, default=32,
                        help="hidden units of the MLP")
    parser.add_argument("--clip", type=float, default=1.0,
                        help="clipping norm of each example's gradient")
    parser.add_argument("--noise", type=float, default=0.5,
                        help="Gaussian noise multiplier of the private step")
    parser.add_argument("--lr", type=float, default=0.5,
                        help="learning rate")
    parser.add_argument("--seed", type=int, default=0,
                        help="random seed")
    args = parser.parse_args(argv)

    digits = load_digits()
    x_all, labels = digits.data / 16.0, digits.target
    onehot_all = np.eye(10)[labels]
    n_train = len(x_all) * 4 // 5
    rng = np.random.default_rng(args.seed)
    params = init_params(rng, [64, args.hidden, 10])

    # per-example gradients in one program, against a loop of grad calls
    x, onehot = x_all[:args.batch], onehot_all[:args.batch]
    start = time.perf_counter()
    grads = per_example_grads(params, x, onehot)
    vmap_ms = 1e3 * (time.perf_counter() - start)
    start = time.perf_counter()
    looped = [tnp.grad(loss)(params, xi, yi) for xi, yi in zip(x, onehot)]
    loop_ms = 1e3 * (time.perf_counter() - start)
    difference = max(float(np.max(np.abs(g - np.stack([gs[k] for gs in looped]))))
                     for k, g in enumerate(grads))
    per_norm = norms(grads)
    print(f"per-example gradients of {args.batch} examples: shapes "
          f"{[tuple(g.shape) for g in grads]}")
    print(f"  vmap(grad(loss)) {vmap_ms:7.1f} ms, a loop of grad(loss) {loop_ms:7.1f} ms")
    print(f"  max difference from the loop: {difference:.2e}")
    print(f"  gradient norms: min {per_norm.min():.3f}, median {np.median(per_norm):.3f}, "
          f"max {per_norm.max():.3f}")

    before = accuracy(params, x_all[n_train:], labels[n_train:])
    for step in range(args.steps):
        batch = rng.choice(n_train, size=args.batch, replace=False)
        params = dp_sgd_step(params, x_all[batch], onehot_all[batch], rng,
                             args.clip, args.noise, args.lr)
    after = accuracy(params, x_all[n_train:], labels[n_train:])
    print(f"DP-SGD ({args.steps} steps, clip {args.clip}, noise {args.noise}): "
          f"test accuracy {before:.3f} -> {after:.3f}")
    return {"max_loop_difference": difference, "norms": per_norm,
            "accuracy_before": before, "accuracy_after": after}


if __name__ == "__main__":
    main()
