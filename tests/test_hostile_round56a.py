"""Hostile round 56a: indexing and indexed updates as a hostile user writes them (slices,
masks, NumPy's index helpers, ``x.at[...]``) in eager mode and under the transforms, against
NumPy, JAX and finite differences; each test failed before its fix (the comment says what
was wrong)."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.errors import TensorShapeError, TensorTypeError

X = np.arange(12.0).reshape(3, 4)


# Was wrong: a slice NumPy refuses (a float or string bound, a zero step) raised Python's
# TypeError or ValueError from slice.indices, not a TiduError, in x[...] and x.at[...].
@pytest.mark.parametrize("key, error", [
    (slice(0, 1.5), TensorTypeError), (slice(None, "a"), TensorTypeError),
    ((Ellipsis, slice(None, None, 0)), TensorShapeError)])
def test_a_slice_numpy_refuses_is_a_tidu_error_naming_the_slice(key, error):
    with pytest.raises(TypeError if error is TensorTypeError else ValueError):
        X[key]                                            # NumPy's builtin class is kept
    for index in (lambda x: x[key], lambda x: tnp.at(x)[key].set(0.0)):
        with pytest.raises(error, match=r"indexing x\[\.\.\.\] with slice"):
            index(tnp.tensor(X))
        with pytest.raises(error, match=r"indexing x\[\.\.\.\] with slice"):
            tnp.jit(index)(X)
    assert np.array_equal(tnp.tensor(X)[1:3:1, ::-2].data, X[1:3, ::-2])   # still usable


# Was wrong: a ragged nested list (as an index, or as any tnp function's argument) raised
# NumPy's ValueError ("setting an array element with a sequence").
def test_a_ragged_list_is_a_tidu_error_naming_the_function():
    with pytest.raises(TensorShapeError, match="getitem: .*ragged"):
        tnp.tensor(X)[[[0, 1], [2]]]
    with pytest.raises(TensorShapeError, match="sum: .*ragged"):
        tnp.sum([[1.0, 2.0], [3.0]])
    assert np.array_equal(tnp.tensor(X)[[[0, 1], [2, 2]]].data, X[[[0, 1], [2, 2]]])


# Was wrong: JAX's keywords of x.at[...] (``unique_indices=True``, ``indices_are_sorted``,
# ``mode=...``, ``fill_value=...``) raised Python's TypeError (an unexpected keyword); the
# hints are now taken, and the modes follow JAX's (tests/test_at_modes.py checks them).
def test_jax_keywords_of_indexed_updates():
    jax = pytest.importorskip("jax", reason="compares x.at[...] with JAX's")
    jax.config.update("jax_enable_x64", True)
    i, v = np.array([2, 0]), np.array([5.0, 6.0])
    x = tnp.tensor(X[0])
    for method in ("set", "add"):
        for mode in ("promise_in_bounds", "drop"):
            got = getattr(x.at[i], method)(v, indices_are_sorted=False, unique_indices=True,
                                           mode=mode)
            want = getattr(jax.numpy.asarray(X[0]).at[i], method)(v, unique_indices=True)
            assert np.array_equal(got.data, np.asarray(want))
    assert np.array_equal(x.at[i].get(unique_indices=True).data, X[0, i])
    assert np.array_equal(x.at[i].get(mode="fill", fill_value=0.0).data, X[0, i])


def _jax():
    jax = pytest.importorskip("jax", reason="compares values and gradients with JAX's")
    jax.config.update("jax_enable_x64", True)
    return jax


# Was wrong: np.choose, np.compress and np.extract on a tensor or traced value raised "has no
# differentiable tidu version", and tnp had none of them.
def test_choose_under_every_mode_matches_numpy_and_jax_and_takes_traced_indices():
    jnp = _jax().numpy
    a, b, c = X[:2, :3], np.array([10.0, 20.0, 30.0]), np.array([[-1.0], [-2.0]])
    index = np.array([[0, 1, 2], [2, 2, 1]])
    for mode, i in (("raise", index), ("wrap", index * 3 - 4), ("clip", index * 3 - 4)):
        want = np.choose(i, [a, b, c], mode=mode)
        assert np.array_equal(tnp.choose(i, [a, b, c], mode=mode), want)
        assert np.array_equal(np.choose(i, [tnp.tensor(a), b, c], mode=mode).data, want)
        jitted = tnp.jit(lambda i, a: tnp.choose(i, [a, b, c], mode=mode))
        assert np.array_equal(jitted(i, a), want)
        assert np.array_equal(jitted(i[::-1].copy(), a), np.choose(i[::-1], [a, b, c], mode=mode))
        grads = tnp.grad(lambda a, b: tnp.sum(tnp.choose(i, [a, b, c], mode=mode) ** 2),
                         argnums=(0, 1))(a, b)
        jax_grads = _jax().grad(lambda a, b: jnp.sum(jnp.choose(i, [a, b, c], mode=mode) ** 2),
                                argnums=(0, 1))(a, b)
        for got, expected in zip(grads, jax_grads):
            assert np.array_equal(got, np.asarray(expected))
    with pytest.raises(TensorShapeError, match="choose: invalid entry"):
        tnp.choose(np.array([-1, 0]), [b[:2], b[1:]])
    with pytest.raises(IndexError):                  # data: checked when the op runs
        tnp.jit(lambda i: tnp.choose(i, [b[:2], b[1:]]))(np.array([-1, 0]))


def test_compress_and_extract_match_numpy_with_gradients_to_the_entries_kept():
    for condition, axis in (([True, False, True], 0), ([False, True], 1), ([1, 0, 3], None)):
        want = np.compress(condition, X, axis=axis)
        assert np.array_equal(tnp.compress(condition, X, axis=axis), want)
        # the positions kept: compress the positions themselves
        flat = np.compress(condition, np.arange(X.size).reshape(X.shape), axis=axis).ravel()
        expected = np.zeros(X.size)
        expected[flat] = 2 * X.ravel()[flat]
        grad = tnp.grad(lambda x: tnp.sum(tnp.compress(condition, x, axis=axis) ** 2))(X)
        assert np.array_equal(grad, expected.reshape(X.shape))
    t = tnp.tensor(X, requires_grad=True)
    tnp.sum(np.extract(t > 6.0, t) * 3.0).backward()
    assert np.array_equal(t.grad, 3.0 * (X > 6.0))
    assert np.array_equal(tnp.extract(X > 6.0, X), np.extract(X > 6.0, X))
    with pytest.raises(TensorShapeError, match="compress: condition must be a 1-d array"):
        tnp.compress(X > 1, X)


# Was wrong: NumPy's one-argument np.where(condition) (np.nonzero's) raised "not supported".
def test_where_with_one_argument_is_nonzero():
    t = tnp.tensor(X, requires_grad=True)
    rows, cols = tnp.where(t > 6.0)
    assert np.array_equal(rows, np.where(X > 6.0)[0]) and np.array_equal(cols, np.where(X > 6.0)[1])
    tnp.sum(t[tnp.where(t > 6.0)] ** 2).backward()
    assert np.array_equal(t.grad, 2 * X * (X > 6.0))
    with pytest.raises(TensorShapeError, match="either both or neither"):
        tnp.where(X > 1.0, X)
