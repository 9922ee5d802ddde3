"""Every case of ``tests/numpy_cases`` on PyTorch tensors and on Dask arrays.

For each case (float64 and complex128 inputs, and float32 for the dtype), on each library:

- forward: the function's results are arrays of the inputs' library and dtype,
  equal to the NumPy path's; so are ``jit``'s;
- VJP: ``tnp.vjp``'s cotangents (for a random cotangent of the library) are arrays
  of the library equal to the NumPy path's;
- eager: ``Tensor.backward`` on tensors of the library gives the same gradients.

On Dask, float32 runs only with ``TIDU_BACKEND_SWEEP=full`` (CI's time budget):
``TIDU_BACKEND_SWEEP=full python -m pytest tests/test_backends_cases.py`` runs
everything. Nothing may pass through NumPy on the way: on PyTorch, converting a tensor to a
NumPy array raises during the calls; on Dask, computing anything does, so the
results are checked to be lazy before they are computed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import TensorNotSupportedError
from primitives.tensor.transforms.pytree import tree_flatten, tree_unflatten
from backend_helpers import Library
from numpy_cases import all_cases

CASES = all_cases()
LIBRARIES = ("torch", "dask")


def _ids(run):
    case, library, dtype = run
    return f"{library}-{case.id}-{dtype}"


# cases that call a method or index the raw input array: on a torch or Dask array that is the
# library's own (PyTorch refuses x[::-1]), not tidu's; tidu's are checked on NumPy's cases
RAW_METHOD_CASES = {"sum[dtype]", "getitem"}
# Dask's float32 runs double the sweep's time for what float32 adds (the dtype kept, which
# tests/test_backends_dask.py checks too): they run with TIDU_BACKEND_SWEEP=full
FULL = os.environ.get("TIDU_BACKEND_SWEEP", "") == "full"
# cases whose result dtype NumPy decides from the values (eig of a real matrix: real when
# every eigenvalue is): on Dask they compute the eigenvalues, so they cannot stay lazy
DTYPE_FROM_VALUES = {"linalg.eig[real eigenvalues]",
                     "linalg.eig[real eigenvalues, batched, invariants]",
                     "linalg.eig[complex eigenvalues of a real matrix]", "linalg.eigvals"}
# cases whose result's shape NumPy decides from the values: on Dask they compute them
SHAPE_FROM_VALUES = {"unique", "unique[rows, everything]", "unique_values", "unique_counts",
                     "unique_inverse", "unique_all", "union1d", "setxor1d", "intersect1d",
                     "setdiff1d", "trim_zeros", "roots", "roots[complex roots]",
                     "roots[complex roots, zeros stripped]", "polydiv"}
RUNS = [(case, library, dtype) for case in CASES if case.id not in RAW_METHOD_CASES
        for library in LIBRARIES for dtype in ("float64", "float32", "complex128")
        if dtype in case.dtypes and (FULL or library == "torch" or dtype != "float32")
        and not (library == "dask" and case.id in DTYPE_FROM_VALUES | SHAPE_FROM_VALUES)]
# PyTorch does not order complex numbers: these raise a clear error there (NumPy, Dask and
# CuPy order them lexicographically)
TORCH_UNORDERED = {"fmax", "fmin", "argmax", "argmin", "max", "min", "amax", "amin", "sort",
                   "argsort", "maximum", "minimum", "clip", "median", "percentile", "quantile",
                   "ptp"}


def _check_leaves(lib: Library, got, expected, what: str, dtype) -> None:
    got_leaves = tree_flatten(got)[0]
    expected_leaves = [np.asarray(e) for e in tree_flatten(expected)[0]]
    assert len(got_leaves) == len(expected_leaves), what
    for g in got_leaves:
        assert lib.is_own(g), f"{what}: a {type(g).__module__}.{type(g).__name__}, not a " \
                              f"{lib.name} array"
    tol = 1e-10 if np.dtype(dtype) in (np.float64, np.complex128) else 2e-5
    for g, e in zip(lib.values(got_leaves), expected_leaves):
        assert g.shape == e.shape and g.dtype == e.dtype, (what, g.shape, g.dtype, e.shape, e.dtype)
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol * max(1.0, np.abs(e).max(initial=0)),
                                   err_msg=what)


def _random_cotangent(out, rng):
    leaves, tree = tree_flatten(out)
    seeds = []
    for leaf in leaves:
        leaf = np.asarray(leaf)
        seed = rng.standard_normal(leaf.shape)
        if leaf.dtype.kind == "c":
            seed = seed + 1j * rng.standard_normal(leaf.shape)
        seeds.append(seed.astype(leaf.dtype) if leaf.dtype.kind in "fc"
                     else np.zeros(leaf.shape, leaf.dtype))
    return tree_unflatten(tree, seeds), seeds


@pytest.mark.parametrize("run", [r for r in RUNS if r[1] == "torch"], ids=_ids)
def test_torch(run):
    _check_case(run)


@pytest.mark.parametrize("run", [r for r in RUNS if r[1] == "dask"], ids=_ids)
def test_dask(run):
    _check_case(run)


def _check_case(run) -> None:
    case, name, dtype = run
    lib = Library(name)
    args = case.sample(dtype)
    converted = [lib.convert(a) for a in args]
    if name == "torch" and dtype == "complex128" and case.name in TORCH_UNORDERED:
        with pytest.raises(TensorNotSupportedError, match="PyTorch does not order complex"):
            case.fn(*converted)
        return
    with lib.only():
        out = case.fn(*converted)
        jitted = tnp.jit(case.fn)(*converted) if case.jit else None
    expected = case.fn(*args)
    _check_leaves(lib, out, expected, f"{case.id}: forward", dtype)
    if jitted is not None:
        _check_leaves(lib, jitted, expected, f"{case.id}: jit", dtype)
    if not case.wrt:
        return
    rng = np.random.default_rng(1)
    ct_tree, seeds = _random_cotangent(expected, rng)
    _, pullback = tnp.vjp(case.restricted(args), *[args[i] for i in case.wrt])
    expected_cts = pullback(ct_tree)
    lib_ct = tree_unflatten(tree_flatten(ct_tree)[1], [lib.convert(s) for s in seeds])
    with lib.only():
        _, lib_pullback = tnp.vjp(case.restricted(converted),
                                  *[converted[i] for i in case.wrt])
        cts = lib_pullback(lib_ct)
    _check_leaves(lib, cts, expected_cts, f"{case.id}: vjp", dtype)
    # eager: the gradient of Re<ct, f(x)> is the VJP of ct
    with lib.only():
        tensors = [tnp.tensor(converted[i], requires_grad=True) for i in case.wrt]
        full = list(converted)
        for i, t in zip(case.wrt, tensors):
            full[i] = t
        loss = 0.0
        for seed, leaf in zip(seeds, tree_flatten(case.fn(*full))[0]):
            if seed.dtype.kind in "fc":
                loss = loss + tnp.sum(tnp.real(tnp.conj(lib.convert(seed)) * leaf))
        grads = loss.backward()
        got = [grads.grad(t) for t in tensors]
    for g, e in zip(got, expected_cts):
        if g is None:
            assert not np.any(np.asarray(e)), f"{case.id}: eager: no gradient where the VJP has one"
    present = [(g, e) for g, e in zip(got, expected_cts) if g is not None]
    _check_leaves(lib, [g for g, _ in present], [e for _, e in present], f"{case.id}: eager",
                  dtype)
