"""Hostile round 54: indexing, scatter and data-dependent paths of the NumPy tensor set
(``x[i]``, ``take``, ``take_along_axis``, ``x.at[...]``, sorts and scans) under ``grad``,
``jit``, ``vmap`` and the eager ``Tensor``; each test failed before its fix (the comment
says what was wrong)."""

from __future__ import annotations

import numpy as np

import primitives.tensor as tnp


def test_a_negative_narrow_integer_index_into_a_long_axis():
    # An int8 index -100 into an axis of 200 raised OverflowError ("Python integer 200 out
    # of bounds for int8"): the check added the axis size in the index's own dtype. NumPy
    # and JAX read it as 100, eagerly, under jit and in every indexing function.
    x = np.arange(200.0)
    i = np.array([-100, 5], dtype=np.int8)
    np.testing.assert_array_equal(tnp.take(x, i), [100.0, 5.0])
    np.testing.assert_array_equal(tnp.jit(lambda x, i: x[i])(x, i), [100.0, 5.0])
    np.testing.assert_array_equal(tnp.take_along_axis(x, i, 0), [100.0, 5.0])
    g = tnp.grad(lambda x: tnp.sum(tnp.at(x)[i].set(x[:2] * 3.0)))(x)
    np.testing.assert_array_equal(g[[0, 1, 2, 5, 99, 100]], [4.0, 4.0, 1.0, 0.0, 1.0, 0.0])
    y = np.arange(300.0).reshape(150, 2)
    np.testing.assert_array_equal(tnp.jit(lambda y, i: y[i, 1])(y, i), [101.0, 11.0])
