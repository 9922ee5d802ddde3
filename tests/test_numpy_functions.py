"""Every case of ``tests/numpy_cases``: forward against NumPy, derivatives every way.

For each case and dtype:

- forward: the function on NumPy arrays (through ``tnp``) equals NumPy's result,
  with NumPy's shape and dtype, and so does ``jit`` of it;
- first order (float64, complex128): the JVP against central finite differences,
  and the VJP by the dot-product test ``<ct, J t> == <Jᵀ ct, t>`` (real inner
  product, tidu's complex convention); the eager ``Tensor``'s gradient of
  ``Re<ct, f(x)>`` equals the VJP;
- float32: the JVP and VJP agree with float64's to single precision;
- second order: forward over reverse (the JVP of the VJP) against finite
  differences of the VJP.
"""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.transforms.pytree import tree_flatten, tree_unflatten
from numpy_cases import all_cases

CASES = all_cases()
RUNS = [(case, dtype) for case in CASES for dtype in case.dtypes]


def _ids(run):
    case, dtype = run
    return f"{case.id}-{dtype}"


def _leaves(out):
    return [np.asarray(leaf) for leaf in tree_flatten(out)[0]]


def _inexact(leaf) -> bool:
    return np.asarray(leaf).dtype.kind in "fc"


def _random_like(rng, value):
    value = np.asarray(value)
    x = rng.standard_normal(value.shape)
    if value.dtype.kind == "c":
        x = x + 1j * rng.standard_normal(value.shape)
    return x.astype(value.dtype)


def _real_inner(a, b) -> float:
    return float(sum(np.real(np.vdot(np.asarray(x), np.asarray(y))) for x, y in zip(a, b)))


def _seed_tree(out, rng):
    """A random cotangent with the structure of ``out`` (zeros for integer leaves)."""
    leaves, tree = tree_flatten(out)
    seeds = [_random_like(rng, leaf) if _inexact(leaf) else np.zeros(np.shape(leaf))
             for leaf in leaves]
    return tree_unflatten(tree, seeds), seeds


def _tolerance(case, dtype):
    return case.rtol if np.dtype(dtype) in (np.float64, np.complex128) else 1e-3


@pytest.mark.parametrize("run", RUNS, ids=_ids)
def test_forward_matches_numpy(run):
    case, dtype = run
    args = case.sample(dtype)
    expected = _leaves(case.reference(*[a.copy() for a in args]))
    got = _leaves(case.fn(*args))
    jitted = _leaves(tnp.jit(case.fn)(*args)) if case.jit else got
    tol = 1e-12 if np.dtype(dtype) in (np.float64, np.complex128) else 2e-5
    assert len(got) == len(expected)
    for g, j, e in zip(got, jitted, expected):
        assert g.shape == e.shape and g.dtype == e.dtype, (case.id, g.shape, g.dtype, e.shape,
                                                           e.dtype)
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol * max(1.0, np.abs(e).max(initial=0)))
        np.testing.assert_allclose(j, e, rtol=tol, atol=tol * max(1.0, np.abs(e).max(initial=0)))


DIFFERENTIABLE = [(c, d) for c, d in RUNS if c.wrt]


def _first_order(case, args, rng):
    f = case.restricted(args)
    primals = [args[i] for i in case.wrt]
    tangents = [_random_like(rng, p) for p in primals]
    out, tangent_out = tnp.jvp(f, primals, tangents)
    ct_tree, seeds = _seed_tree(out, rng)
    _, pullback = tnp.vjp(f, *primals)
    cotangents = pullback(ct_tree)
    return f, primals, tangents, out, tangent_out, ct_tree, seeds, cotangents


@pytest.mark.parametrize("run", [r for r in DIFFERENTIABLE if r[1] != "float32"], ids=_ids)
def test_first_order(run):
    case, dtype = run
    rng = np.random.default_rng(1)
    args = case.sample(dtype)
    f, primals, tangents, out, tangent_out, ct_tree, seeds, cotangents = \
        _first_order(case, args, rng)
    # JVP against central differences
    h = 1e-6
    plus = _leaves(f(*[p + h * t for p, t in zip(primals, tangents)]))
    minus = _leaves(f(*[p - h * t for p, t in zip(primals, tangents)]))
    for tout, hi, lo in zip(_leaves(tangent_out), plus, minus):
        if not _inexact(hi):
            continue
        numeric = (hi - lo) / (2 * h)
        scale = max(1.0, np.abs(numeric).max(initial=0))
        np.testing.assert_allclose(tout, numeric, rtol=case.rtol, atol=case.rtol * scale,
                                   err_msg=f"{case.id}: JVP vs finite differences")
    # VJP by the dot product
    lhs = _real_inner([s for s in seeds], _leaves(tangent_out))
    rhs = _real_inner(cotangents, tangents)
    assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs)), (case.id, lhs, rhs)
    # eager Tensor: the gradient of Re<ct, f(x)> is the VJP of ct
    tensors = [tnp.tensor(p, requires_grad=True) for p in primals]
    loss = 0.0
    for seed, leaf in zip(seeds, tree_flatten(f(*tensors))[0]):
        if np.asarray(seed).dtype.kind in "fc":
            loss = loss + tnp.sum(tnp.real(tnp.conj(seed) * leaf))
    grads = loss.backward()
    for t, expected in zip(tensors, cotangents):
        got = grads.grad(t)                  # None: no gradient reached t (a zero derivative)
        np.testing.assert_allclose(np.zeros_like(expected) if got is None else got, expected,
                                   rtol=1e-9, atol=1e-12,
                                   err_msg=f"{case.id}: eager gradient vs VJP")


@pytest.mark.parametrize("run", [r for r in DIFFERENTIABLE if r[1] == "float32"], ids=_ids)
def test_float32_derivatives_agree_with_float64(run):
    case, _ = run
    args32 = case.sample("float32")
    args64 = [a.astype(np.float64) for a in args32]
    first32 = _first_order(case, args32, np.random.default_rng(2))
    first64 = _first_order(case, args64, np.random.default_rng(2))
    out32, primals32 = _leaves(first32[3]), first32[1]
    for got, want, like in ((first32[4], first64[4], out32), (first32[7], first64[7], primals32)):
        for g, w, value in zip(_leaves(got), _leaves(want), like):
            assert g.dtype == np.asarray(value).dtype, (case.id, g.dtype, value.dtype)
            scale = max(1.0, np.abs(w).max(initial=0))
            np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3 * scale, err_msg=case.id)


@pytest.mark.parametrize("run", [r for r in DIFFERENTIABLE
                                 if r[0].second_order and r[1] != "float32"], ids=_ids)
def test_second_order(run):
    case, dtype = run
    rng = np.random.default_rng(3)
    args = case.sample(dtype)
    f = case.restricted(args)
    primals = [args[i] for i in case.wrt]
    out = f(*primals)
    ct_tree, _ = _seed_tree(out, rng)

    def pulled_back(*xs):
        return tuple(tnp.vjp(f, *xs)[1](ct_tree))

    tangents = [_random_like(rng, p) for p in primals]
    _, second = tnp.jvp(pulled_back, primals, tangents)
    h = 1e-5
    plus = pulled_back(*[p + h * t for p, t in zip(primals, tangents)])
    minus = pulled_back(*[p - h * t for p, t in zip(primals, tangents)])
    for got, hi, lo in zip(_leaves(second), _leaves(plus), _leaves(minus)):
        numeric = (hi - lo) / (2 * h)
        scale = max(1.0, np.abs(numeric).max(initial=0))
        np.testing.assert_allclose(got, numeric, rtol=1e-5, atol=1e-5 * scale,
                                   err_msg=f"{case.id}: second order vs finite differences")
