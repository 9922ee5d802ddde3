"""What the array-backend tests share: one library's conversions, and a guard against
leaving it (converting a PyTorch tensor to NumPy, or computing a Dask array, raises).

>>> import numpy as np
>>> lib = Library("dask")                       # doctest: +SKIP
>>> with lib.only():                            # doctest: +SKIP
...     lazy = lib.convert(np.ones(3)) * 2      # fine: nothing is computed
>>> lib.values([lazy])                          # doctest: +SKIP
[array([2., 2., 2.])]
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest


class Library:
    """Conversions to and from one array library (``"torch"`` or ``"dask"``); skips the test
    when it is not installed."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name == "torch":
            self.torch = pytest.importorskip("torch", reason="PyTorch is not installed")
        else:
            self.da = pytest.importorskip("dask.array", reason="Dask is not installed")
            import dask
            self.dask = dask

    def convert(self, array):
        """``array`` in this library (Dask: two chunks along each axis)."""
        array = np.asarray(array)
        if self.name == "torch":
            return self.torch.from_numpy(array.copy())
        chunks = tuple(max(1, (n + 1) // 2) for n in array.shape)
        return self.da.from_array(array, chunks=chunks)

    def is_own(self, value) -> bool:
        return isinstance(value, self.torch.Tensor if self.name == "torch" else self.da.Array)

    def values(self, arrays) -> list:
        """The NumPy values of arrays of this library (which they must be)."""
        for a in arrays:
            assert self.is_own(a), f"a {type(a).__module__}.{type(a).__name__}, not a " \
                                   f"{self.name} array"
        if self.name == "torch":
            return [a.detach().numpy() for a in arrays]
        return [np.asarray(v) for v in self.dask.compute(*arrays, scheduler="sync")]

    @contextlib.contextmanager
    def only(self):
        """Inside: converting to NumPy (PyTorch) or computing (Dask) raises."""
        if self.name == "torch":
            original = self.torch.Tensor.__array__

            def refuse(*args, **kwargs):
                raise AssertionError("a PyTorch tensor was converted to a NumPy array")
            self.torch.Tensor.__array__ = refuse
            try:
                yield
            finally:
                self.torch.Tensor.__array__ = original
        else:
            def refuse(*args, **kwargs):
                raise AssertionError("a Dask array was computed before .compute()")
            with self.dask.config.set(scheduler=refuse):
                yield


def least_squares_loss(w, X, y):
    """Mean squared error of the linear model ``X w`` (any library, through ``tnp``)."""
    import primitives.tensor as tnp

    residual = X @ w - y
    return tnp.mean(residual * residual)


def least_squares_data(rows: int = 40, features: int = 3, seed: int = 0):
    """``(X, w, y)`` as NumPy arrays: a random design, weights, and noisy targets."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, features))
    w = rng.standard_normal(features)
    y = X @ np.arange(1.0, features + 1) + 0.1 * rng.standard_normal(rows)
    return X, w, y


def _f(v):
    import primitives.tensor as tnp

    return tnp.sum(tnp.sin(v) * v ** 2)


def _pair(v):
    import primitives.tensor as tnp

    return tnp.stack([v, 2 * v])


def compositions() -> dict:
    """Transforms composed in both orders, each a function of one vector: name -> function."""
    import primitives.tensor as tnp

    g = tnp.grad
    return {
        "grad(jit)": g(tnp.jit(_f)), "jit(grad)": tnp.jit(g(_f)),
        "vmap(grad)": lambda v: tnp.vmap(g(_f))(_pair(v)),
        "grad(vmap)": g(lambda v: tnp.sum(tnp.vmap(_f)(_pair(v)))),
        "jacfwd(jacrev)": tnp.jacfwd(tnp.jacrev(_f)), "jacrev(jacfwd)": tnp.jacrev(tnp.jacfwd(_f)),
        "jit(vmap(grad))": lambda v: tnp.jit(tnp.vmap(g(_f)))(_pair(v)),
        "vmap(jit(grad))": lambda v: tnp.vmap(tnp.jit(g(_f)))(_pair(v)),
    }
