"""Round 60: ``x.at[idx].apply(func)`` with traced indices (``jit``, ``vmap``) applies
``func`` to shrinking arrays (its ``t``-th call to the ``m // t`` positions that may be hit
``t`` times: about ``m log m`` values in all for ``m`` indices), not to all ``m`` updates
``m`` times; results as ``np.ufunc.at``'s (once per occurrence, in order)."""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import primitives.tensor as tnp
import primitives.tensor.numpy.manipulation as manipulation


@contextlib.contextmanager
def unsorted_max(limit: int):
    """apply's choice (read when traced: trace inside) between func on all the updates each
    time (up to ``limit`` traced indices) and on the most hit positions only."""
    old, manipulation._APPLY_UNSORTED_MAX = manipulation._APPLY_UNSORTED_MAX, limit
    try:
        yield
    finally:
        manipulation._APPLY_UNSORTED_MAX = old


BOTH = pytest.mark.parametrize("limit", [0, 256])     # shrinking calls from 1 index; from 257


def affine(t):
    return t * 1.5 - 0.25                        # applied k times: not k times anything else


def reference(x, indices, func=lambda t: t * 1.5 - 0.25):
    """x with func applied at each index, one occurrence after the other (np.ufunc.at)."""
    out = np.array(x, dtype=np.float64)
    for i in np.asarray(indices).ravel():
        out[i] = func(out[i])
    return out


def every_route(x, indices, func=affine, **keywords):
    """apply by: eager (known indices), jit with traced indices, jit with traced x and
    known indices, vmap over copies of the indices (traced under vmap)."""
    def applied(x, i):
        return tnp.at(x)[i].apply(func, **keywords)
    return {
        "eager": applied(x, indices),
        "jit indices": tnp.jit(applied)(x, indices),
        "jit x": tnp.jit(lambda x: applied(x, indices))(x),
        "vmap": tnp.vmap(applied, in_axes=(None, 0))(x, np.stack([indices, indices]))[1],
    }


@BOTH
@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 7), data=st.data())
def test_matches_ufunc_at(limit, size, data):
    indices = np.array(data.draw(st.lists(st.integers(0, size - 1), max_size=25)),
                       dtype=np.intp)
    x = np.arange(size, dtype=np.float64) - 2.0
    expected = reference(x, indices)
    with unsorted_max(limit):
        for route, found in every_route(x, indices).items():
            np.testing.assert_allclose(np.asarray(found), expected, rtol=1e-14, err_msg=route)


def test_matches_numpy_ufunc_at_and_jax(jx):
    jax, jnp = jx
    x = np.linspace(-1.0, 1.0, 6)
    indices = np.array([5, 0, 5, 2, 5, 0, 5, 5, 1, 2, 0, 5])
    expected = x.copy()
    np.negative.at(expected, indices)                              # k negations
    for route, found in every_route(x, indices, func=tnp.negative).items():
        np.testing.assert_array_equal(np.asarray(found), expected, err_msg=route)
    theirs = jnp.asarray(x).at[indices].apply(lambda t: t * 1.5 - 0.25)
    for route, found in every_route(x, indices).items():
        np.testing.assert_allclose(np.asarray(found), np.asarray(theirs), rtol=1e-14,
                                   err_msg=route)


@BOTH
def test_more_indices_than_entries_and_one_position_only(limit):
    x = np.array([0.5, -1.0])
    with unsorted_max(limit):
        for indices in (np.zeros(40, np.intp), np.array([1, 0] * 20), np.array([1] * 7 + [0])):
            for route, found in every_route(x, indices).items():
                np.testing.assert_allclose(np.asarray(found), reference(x, indices),
                                           rtol=1e-14, err_msg=route)


def test_no_index_and_2d_keys():
    x = np.arange(12.0).reshape(3, 4)
    rows, cols = np.array([2, 0, 2, 2, 1]), np.array([3, 1, 3, 0, 1])
    expected = x.copy()
    for r, c in zip(rows, cols):
        expected[r, c] = affine(expected[r, c])
    found = tnp.jit(lambda x, r, c: tnp.at(x)[r, c].apply(affine))(x, rows, cols)
    np.testing.assert_allclose(np.asarray(found), expected, rtol=1e-14)
    found = tnp.jit(lambda x, r: tnp.at(x)[r, 1:3].apply(affine))(x, rows)
    expected = x.copy()
    for r in rows:
        expected[r, 1:3] = affine(expected[r, 1:3])
    np.testing.assert_allclose(np.asarray(found), expected, rtol=1e-14)
    empty = np.zeros(0, np.intp)
    for route, found in every_route(x[0], empty).items():
        np.testing.assert_array_equal(np.asarray(found), x[0], err_msg=route)
        assert not np.may_share_memory(np.asarray(found), x)


@BOTH
@pytest.mark.parametrize("mode", ["drop", "clip"])
def test_modes_traced(mode, limit):
    x = np.array([1.0, 2.0, 3.0])
    indices = np.array([4, 0, 4, -1, 2, -7, 0])
    with unsorted_max(limit):
        found = tnp.jit(lambda x, i: tnp.at(x)[i].apply(affine, mode=mode))(x, indices)
    eager = tnp.at(x)[indices].apply(affine, mode=mode)
    np.testing.assert_allclose(np.asarray(found), np.asarray(eager), rtol=1e-14)
    wrapped = np.where(indices < 0, indices + 3, indices)
    kept = wrapped[(wrapped >= 0) & (wrapped < 3)] if mode == "drop" else np.clip(wrapped, 0, 2)
    np.testing.assert_allclose(np.asarray(found), reference(x, kept), rtol=1e-14)


@BOTH
def test_gradient_finite_differences_under_jit_and_vmap(limit):
    x = np.array([0.3, -0.7, 1.1, 0.2])
    indices = np.array([2, 0, 2, 2, 3, 0, 2])
    weights = np.array([1.0, 10.0, 100.0, 1000.0])

    def loss(x, i):
        return tnp.sum(tnp.at(x)[i].apply(tnp.sin) * weights)

    def value(x):
        return np.sum(reference(x, indices, np.sin) * weights)
    step = 1e-6
    numeric = np.array([(value(x + step * e) - value(x - step * e)) / (2 * step)
                        for e in np.eye(4)])
    with unsorted_max(limit):
        for found in (tnp.grad(loss)(x, indices), tnp.jit(tnp.grad(loss))(x, indices),
                      tnp.vmap(tnp.grad(loss), in_axes=(None, 0))(x, np.stack([indices] * 2))[0]):
            np.testing.assert_allclose(np.asarray(found), numeric, rtol=1e-7, atol=1e-7)


def test_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.array([0.3, -0.7, 1.1, 0.2, 0.9])
    indices = np.array([4, 4, 1, 4, 0, 1, 4])
    weights = np.arange(1.0, 6.0)
    ours = tnp.jit(tnp.grad(lambda x, i: tnp.sum(tnp.at(x)[i].apply(tnp.tanh) * weights)))(
        x, indices)
    xt = torch.tensor(x, requires_grad=True)
    out = xt.clone()
    for i in indices:
        out = out.index_put((torch.tensor([int(i)]),), torch.tanh(out[int(i)]).reshape(1))
    (out * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(np.asarray(ours), xt.grad.numpy(), rtol=1e-13)


def test_traced_work_is_m_log_m():
    """func sees about m * log(m) values in all for m traced indices (m * m before)."""
    m = 1500
    seen = []

    def counted(t):
        seen.append(int(np.prod(tnp.shape(t))))
        return t * 1.5 - 0.25
    indices = np.random.default_rng(0).integers(0, 50, size=m)
    indices[:300] = 7                                             # one position hit often
    x = np.linspace(-1.0, 1.0, 50)
    found = tnp.jit(lambda x, i: tnp.at(x)[i].apply(counted))(x, indices)
    np.testing.assert_allclose(np.asarray(found), reference(x, indices), rtol=1e-12)
    assert seen[:3] == [4, 2, 2]           # the check that func is elementwise (a probe)
    seen = seen[3:]
    assert len(seen) == m                          # a position may be hit m times
    assert sum(seen) <= m * (1 + np.log(m)), sum(seen)          # the t-th: m // t at most
