"""Train a small MLP classifier on handwritten digits with tidu's eager tensors.

The digits (8x8 images, 10 classes) ship inside scikit-learn, so nothing is
downloaded. Before training, the first gradient is checked against central
finite differences. Run:

    pip install ".[examples]" && python examples/train_mlp.py

Options: --epochs N (default 40), --subset N (train on the first N images),
--hidden N (default 64), --seed N, --jit (the functional route: parameters are
NumPy arrays and each step is one compiled ``jit(value_and_grad(loss))`` program
instead of eager tensors).
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_digits
from tqdm import tqdm

from primitives import tensor as tnp


def init_params(rng, sizes):
    """Glorot-uniform weights and zero biases, as requires_grad tensors."""
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        params.append(tnp.tensor(rng.uniform(-limit, limit, (fan_in, fan_out)), requires_grad=True))
        params.append(tnp.tensor(np.zeros(fan_out), requires_grad=True))
    return params


def logits(params, x):
    h = x
    for i in range(0, len(params) - 2, 2):
        h = tnp.tanh(tnp.matmul(h, params[i]) + params[i + 1])
    return tnp.matmul(h, params[-2]) + params[-1]


def loss_fn(params, x, onehot):
    """Mean softmax cross-entropy."""
    z = logits(params, x)
    log_probs = tnp.nn.log_softmax(z, axis=1)    # one op: z - logsumexp(z), stably
    return -tnp.sum(log_probs * onehot) / x.shape[0]


def check_first_gradient(params, x, onehot, rng, count=6, eps=1e-6) -> float:
    """Compare a few backward-pass derivatives with central finite differences."""
    grads = loss_fn(params, x, onehot).backward()
    worst = 0.0
    for _ in range(count):
        p = params[rng.integers(len(params))]
        index = tuple(rng.integers(n) for n in p.shape)
        original = p.data[index]
        p.data[index] = original + eps
        up = loss_fn(params, x, onehot).item()
        p.data[index] = original - eps
        down = loss_fn(params, x, onehot).item()
        p.data[index] = original
        numeric = (up - down) / (2 * eps)
        analytic = grads.grad(p)[index]
        worst = max(worst, abs(numeric - analytic) / max(1.0, abs(numeric)))
    for p in params:
        p.grad = None
    return worst


def accuracy(params, x, labels) -> float:
    predictions = np.argmax(tnp.stop_gradient(logits(params, x)), axis=1)
    return float(np.mean(predictions == labels))


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--epochs", type=int, default=40,
                        help="passes over the training set")
    parser.add_argument("--subset", type=int, default=None,
                        help="use only the first N training examples (None: all of them)")
    parser.add_argument("--hidden", type=int, default=64,
                        help="hidden units")
    parser.add_argument("--batch", type=int, default=64,
                        help="examples per mini-batch")
    parser.add_argument("--seed", type=int, default=0,
                        help="random seed")
    parser.add_argument("--jit", action="store_true",
                        help="train with jit(value_and_grad(loss)) on NumPy arrays")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    digits = load_digits()
    x_all = digits.data / 16.0
    y_all = digits.target
    order = rng.permutation(len(x_all))
    split = int(0.8 * len(order))
    train, test = order[:split], order[split:]
    if args.subset:
        train = train[: args.subset]
    x_train, y_train = x_all[train], y_all[train]
    x_test, y_test = x_all[test], y_all[test]
    onehot_train = np.eye(10)[y_train]

    params = init_params(rng, [64, args.hidden, args.hidden, 10])
    worst = check_first_gradient(params, tnp.tensor(x_train[:32]), onehot_train[:32], rng)
    print(f"first gradient vs finite differences: worst relative error {worst:.2e}")
    assert worst < 1e-6, "backward disagrees with finite differences"

    optimizer = tnp.optim.adam(1e-2)          # optax-style: init, then update per step
    state = optimizer.init([p.data for p in params])
    if args.jit:                      # parameters as arrays; one compiled program per step
        params = [p.detach().numpy().copy() for p in params]
        value_and_grad = tnp.jit(tnp.value_and_grad(loss_fn))

        def train_step(x, onehot):
            nonlocal params, state
            loss, grads = value_and_grad(params, x, onehot)
            updates, state = optimizer.update(grads, state, params)
            params = tnp.optim.apply_updates(params, updates)
            return float(loss)
    else:
        def train_step(x, onehot):
            nonlocal state
            loss = loss_fn(params, tnp.tensor(x), onehot)
            loss.backward()
            updates, state = optimizer.update([p.grad for p in params], state)
            for p, update in zip(params, updates):
                p.data += update              # the same arithmetic as apply_updates
                p.grad = None
            return loss.item()

    for epoch in range(1, args.epochs + 1):
        perm = rng.permutation(len(x_train))
        batches = range(0, len(perm), args.batch)
        bar = tqdm(batches, desc=f"epoch {epoch:3d}", leave=False, ncols=80, disable=None)
        total = 0.0
        for start in bar:
            idx = perm[start:start + args.batch]
            loss = train_step(x_train[idx], onehot_train[idx])
            total += loss * len(idx)
            bar.set_postfix(loss=f"{loss:.3f}")
        if epoch == 1 or epoch == args.epochs or epoch % 10 == 0:
            tqdm.write(f"epoch {epoch:3d}: train loss {total / len(x_train):.4f}, "
                       f"test accuracy {accuracy(params, x_test, y_test):.3f}")
    final = accuracy(params, x_test, y_test)
    print(f"final test accuracy: {final:.3f} on {len(x_test)} held-out digits")
    return final


if __name__ == "__main__":
    main()
