"""Gradients of f(x, y) = x * y + sin(x) / y, recorded eagerly with the scalar frontend."""

import argparse
import math

from primitives.scalar.eager import Scalar, sin


def f(x, y):
    return x * y + sin(x) / y


def main() -> None:
    x = Scalar(1.2, requires_grad=True)
    y = Scalar(-0.8, requires_grad=True)
    out = f(x, y)
    grads = out.backward()

    dx = -0.8 + math.cos(1.2) / -0.8
    dy = 1.2 - math.sin(1.2) / (-0.8) ** 2
    print(f"f(1.2, -0.8) = {out.value:.12f}")
    print(f"df/dx = {grads[x.key]:.12f}   (by hand y + cos(x)/y   = {dx:.12f})")
    print(f"df/dy = {grads[y.key]:.12f}   (by hand x - sin(x)/y^2 = {dy:.12f})")
    assert abs(grads[x.key] - dx) < 1e-12 and abs(grads[y.key] - dy) < 1e-12

    # Only inputs that require grad receive a gradient.
    z = Scalar(2.0)
    grads = (x * z).backward()
    assert grads[x.key] == 2.0 and z.key not in grads
    print("an input without requires_grad gets no gradient")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()   # for --help
    main()
