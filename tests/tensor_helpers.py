"""Helpers shared by the tensor front-end tests."""

from __future__ import annotations

import types

import numpy as np

from primitives import tensor as tnp

REAL = {np.dtype(np.complex128): np.float64, np.dtype(np.complex64): np.float32}


def realify(v):
    """The real part of ``v`` (a no-op on real values), through the module's ``astype``."""
    return tnp.astype(v, REAL[v.dtype]) if v.dtype in REAL else v


def abs2(v):
    """``|v|^2`` elementwise, real-valued."""
    return realify(v * tnp.conj(v))


def random(shape, dtype, rng):
    """Standard-normal values of ``shape`` and ``dtype`` (complex: both parts random)."""
    dtype = np.dtype(dtype)
    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def numeric_grad(f, x, eps=1e-6):
    """The gradient of real-valued ``f`` at ``x`` by central differences (float64 or
    complex128 arithmetic); for complex ``x`` it is ``dL/dRe + i dL/dIm`` (tidu's convention).
    """
    complex_ = np.iscomplexobj(x)
    x = np.array(x, dtype=np.complex128 if complex_ else np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        for unit in ((1.0, 1j) if complex_ else (1.0,)):
            xp, xm = x.copy(), x.copy()
            xp[idx] += eps * unit
            xm[idx] -= eps * unit
            g[idx] += unit * (float(np.real(f(xp))) - float(np.real(f(xm)))) / (2 * eps)
    return g


def warm_call_peak(step, *args):
    """``(peak bytes, result)`` of a warm call of ``step(*args)`` (a first call traces):
    what the call allocated at most beyond what was live before it (``tracemalloc``)."""
    import gc
    import tracemalloc

    step(*args)
    gc.collect()
    tnp.release_cached_arrays()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    result = step(*args)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak, result


def ops_run(step, args: tuple, classes, monkeypatch):
    """``step(*args)`` and the ops of ``classes`` it evaluated, in order (as their reprs);
    ``monkeypatch`` is undone afterwards."""
    ran = []
    for cls in classes:
        def logged(self, ctx, inputs, _eval=cls.eval):
            ran.append(repr(self))
            return _eval(self, ctx, inputs)
        monkeypatch.setattr(cls, "eval", logged)
    got = step(*args)
    monkeypatch.undo()
    return got, ran


def case_id(value) -> str:
    """A test id for a parametrized case: a function by its name, anything else by its repr
    (a function's repr holds its address, which differs between the test processes of
    ``pytest -n``, and they must collect the same ids)."""
    return value.__name__ if isinstance(value, types.FunctionType) else repr(value)
