"""Hostile round 56a: indexing and indexed updates as a hostile user writes them (slices,
masks, NumPy's index helpers, ``x.at[...]``) in eager mode and under the transforms, against
NumPy, JAX and finite differences; each test failed before its fix (the comment says what
was wrong)."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.errors import TensorNotSupportedError, TensorShapeError, TensorTypeError

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
# hints are now taken, a mode that would change values is a TiduError naming it.
def test_jax_keywords_of_indexed_updates():
    jax = pytest.importorskip("jax", reason="compares x.at[...] with JAX's")
    jax.config.update("jax_enable_x64", True)
    i, v = np.array([2, 0]), np.array([5.0, 6.0])
    x = tnp.tensor(X[0])
    for method in ("set", "add"):
        got = getattr(x.at[i], method)(v, indices_are_sorted=False, unique_indices=True,
                                       mode="promise_in_bounds")
        want = getattr(jax.numpy.asarray(X[0]).at[i], method)(v, unique_indices=True)
        assert np.array_equal(got.data, np.asarray(want))
        with pytest.raises(TensorNotSupportedError, match=rf"x\.at\[\.\.\.\]\.{method}: "
                                                          "mode='drop'"):
            getattr(x.at[i], method)(v, mode="drop")
    assert np.array_equal(x.at[i].get(unique_indices=True).data, X[0, i])
    with pytest.raises(TensorNotSupportedError, match=r"get: mode='fill' with fill_value=0"):
        x.at[i].get(mode="fill", fill_value=0.0)
