"""Newton-CG on logistic regression with eager Hessian-vector products, against gradient descent.

The data is scikit-learn's breast-cancer set (569 samples, 30 features,
shipped with scikit-learn: nothing is downloaded), standardized; the model is
L2-regularized logistic regression. Each Newton step records the loss once
with eager tensors, takes its gradient with ``backward``, and solves
``H p = -g`` by conjugate gradients, where every ``H v`` is
``primitives.tensor.autograd.hvp``: forward over reverse on the recorded
trace, no Hessian ever formed. Gradient descent with the step size ``1/L``
(``L`` a bound on the Hessian's largest eigenvalue) runs beside it, and the
losses are printed side by side. Run:

    pip install ".[examples]" && python examples/newton_step.py

Options: --newton-steps N (default 8), --gd-steps N (default 400),
--l2 LAMBDA (default 1e-2), --subset N (use the first N samples).
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_breast_cancer

from primitives import tensor as tnp
from primitives.tensor import autograd


def load_data(subset: int | None = None):
    """Standardized features and 0/1 labels."""
    x, y = load_breast_cancer(return_X_y=True)
    if subset:
        x, y = x[:subset], y[:subset]
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    return x, y.astype(np.float64)


def loss_fn(w, b, x, y, l2: float):
    """Mean logistic loss plus ``l2 / 2 * |w|^2``: ``log(1 + e^z) - y z`` with ``z = x w + b``."""
    z = tnp.matmul(x, w) + b
    return tnp.mean(tnp.logaddexp(0.0, z) - y * z) + 0.5 * l2 * tnp.sum(w * w)


def conjugate_gradient(hvp, g, max_iterations: int, tolerance: float):
    """Solve ``H p = -g`` for ``p`` with conjugate gradients; ``hvp(v)`` gives ``H v``.

    ``g`` and the vectors are lists of arrays (one per parameter). Returns ``p``
    and the number of Hessian-vector products used.
    """
    def dot(a, b):
        return sum(float(np.vdot(u, v)) for u, v in zip(a, b))

    p = [np.zeros_like(gi) for gi in g]
    r = [-gi for gi in g]                       # residual -g - H p, with p = 0
    d = [ri.copy() for ri in r]
    rr = dot(r, r)
    stop = tolerance * np.sqrt(rr)
    products = 0
    for _ in range(max_iterations):
        if np.sqrt(rr) <= stop:
            break
        hd = hvp(d)
        products += 1
        alpha = rr / dot(d, hd)
        p = [pi + alpha * di for pi, di in zip(p, d)]
        r = [ri - alpha * hi for ri, hi in zip(r, hd)]
        rr, rr_old = dot(r, r), rr
        d = [ri + (rr / rr_old) * di for ri, di in zip(r, d)]
    return p, products


def newton_cg(x, y, l2: float, steps: int, cg_iterations: int = 30):
    """Newton steps from zero; returns the loss before each step and after the last, and the
    number of Hessian-vector products."""
    w = tnp.tensor(np.zeros(x.shape[1]), requires_grad=True)
    b = tnp.tensor(0.0, requires_grad=True)
    xt = tnp.tensor(x)
    losses, products = [], 0
    for _ in range(steps):
        loss = loss_fn(w, b, xt, y, l2)                    # recorded once per step
        losses.append(loss.item())
        grads = loss.backward()
        g = [grads.grad(w), grads.grad(b)]
        w.grad = b.grad = None
        p, used = conjugate_gradient(lambda v: autograd.hvp(loss, [w, b], v), g,
                                     cg_iterations, tolerance=1e-10)
        products += used
        w.data += p[0]
        b.data += p[1]
    losses.append(loss_fn(w, b, xt, y, l2).item())
    return losses, products


def gradient_descent(x, y, l2: float, steps: int):
    """Gradient descent from zero with step ``1/L``, ``L = |x|_2^2 / (4 n) + l2`` (the
    logistic Hessian is at most ``x^T x / (4 n) + l2``); returns the losses."""
    lr = 1.0 / (np.linalg.norm(x, 2) ** 2 / (4 * len(x)) + l2)
    w = tnp.tensor(np.zeros(x.shape[1]), requires_grad=True)
    b = tnp.tensor(0.0, requires_grad=True)
    xt = tnp.tensor(x)
    losses = []
    for _ in range(steps):
        loss = loss_fn(w, b, xt, y, l2)
        losses.append(loss.item())
        loss.backward()
        w.data -= lr * w.grad
        b.data -= lr * b.grad
        w.grad = b.grad = None
    losses.append(loss_fn(w, b, xt, y, l2).item())
    return losses


def check_first_hvp(x, y, l2: float, rng, eps: float = 1e-5) -> float:
    """The relative error of one ``hvp`` against central differences of eager gradients."""
    w0, v = rng.standard_normal(x.shape[1]) * 0.1, rng.standard_normal(x.shape[1])
    b = tnp.tensor(0.1, requires_grad=True)

    def gradient(w_values):
        w = tnp.tensor(w_values, requires_grad=True)
        return loss_fn(w, b, tnp.tensor(x), y, l2).backward().grad(w)

    w = tnp.tensor(w0, requires_grad=True)
    analytic = autograd.hvp(loss_fn(w, b, tnp.tensor(x), y, l2), w, v)
    numeric = (gradient(w0 + eps * v) - gradient(w0 - eps * v)) / (2 * eps)
    return float(np.abs(analytic - numeric).max() / np.abs(numeric).max())


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--newton-steps", type=int, default=8,
                        help="Newton-CG steps")
    parser.add_argument("--gd-steps", type=int, default=400,
                        help="gradient-descent steps, for comparison")
    parser.add_argument("--l2", type=float, default=1e-2,
                        help="L2 regularisation weight")
    parser.add_argument("--subset", type=int, default=None,
                        help="use only the first N training examples (None: all of them)")
    args = parser.parse_args(argv)

    x, y = load_data(args.subset)
    print(f"breast cancer: {x.shape[0]} samples, {x.shape[1]} features; L2 = {args.l2}")
    error = check_first_hvp(x, y, args.l2, np.random.default_rng(0))
    print(f"hvp vs finite differences of gradients: relative error {error:.1e}")

    newton, products = newton_cg(x, y, args.l2, args.newton_steps)
    descent = gradient_descent(x, y, args.l2, args.gd_steps)
    print(f"{'step':>5}  {'Newton-CG loss':>16}  {'gradient descent loss':>22}")
    shown = sorted(set(range(len(newton))) | {10, 30, 100, 300, len(descent) - 1})
    for step in shown:
        if step >= len(descent):
            continue
        left = f"{newton[step]:16.12f}" if step < len(newton) else " " * 16
        print(f"{step:5d}  {left}  {descent[step]:22.12f}")

    target = newton[-1] + 1e-9
    matched = next((step for step, loss in enumerate(descent) if loss <= target), None)
    print(f"Newton-CG: loss {newton[-1]:.12f} after {len(newton) - 1} steps "
          f"({products} Hessian-vector products)")
    if matched is None:
        print(f"gradient descent: loss {descent[-1]:.12f} after {len(descent) - 1} steps, "
              "still above Newton's")
    else:
        print(f"gradient descent: reached Newton's loss after {matched} steps")
    return {"newton": newton, "gradient_descent": descent, "hvp_products": products,
            "gd_steps_to_match": matched, "hvp_error": error}


if __name__ == "__main__":
    main()
