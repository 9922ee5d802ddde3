"""Hostile round 54: indexing, scatter and data-dependent paths of the NumPy tensor set
(``x[i]``, ``take``, ``take_along_axis``, ``x.at[...]``, sorts and scans) under ``grad``,
``jit``, ``vmap`` and the eager ``Tensor``; each test failed before its fix (the comment
says what was wrong)."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
import tidu


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


def test_roll_repeat_tile_and_meshgrid_return_new_arrays():
    # tnp.roll by a multiple of the length, tnp.repeat by one, tnp.tile by ones returned the
    # caller's NumPy array itself, and meshgrid (copy=True, NumPy's default) read-only views
    # of it: writing to the result changed the input, or raised. NumPy makes new arrays.
    x = np.arange(6.0).reshape(2, 3)
    for result in (tnp.roll(x, 0), tnp.roll(x, 3, axis=1), tnp.roll(x, 6), tnp.repeat(x, 1, 0),
                   tnp.repeat(x, [1, 1], axis=0), tnp.tile(x, (1, 1))):
        np.testing.assert_array_equal(result, x)
        result[...] = -1.0
        np.testing.assert_array_equal(x, np.arange(6.0).reshape(2, 3))
    v = np.arange(3.0)
    for grid in tnp.meshgrid(v, v[:2]) + tnp.meshgrid(v, sparse=True):
        grid[...] = -1.0
        np.testing.assert_array_equal(v, [0.0, 1.0, 2.0])
    assert np.shares_memory(tnp.meshgrid(v, v[:2], copy=False)[0], v)      # views, on request


@pytest.mark.parametrize("name, f", [
    ("sum", lambda x: tnp.sum(x, axis=())), ("max", lambda x: tnp.max(x, axis=())),
    ("min", lambda x: tnp.min(x, axis=())), ("prod", lambda x: tnp.prod(x, axis=())),
    ("logsumexp", lambda x: tnp.scipy.special.logsumexp(x, axis=())),
    ("conj", tnp.conj), ("conjugate", tnp.conjugate), ("positive", tnp.positive),
])
def test_reductions_over_no_axes_conj_and_positive_return_new_arrays(name, f):
    # These returned the caller's real NumPy array itself (a reduction over axis=() or conj
    # of a real array is the identity), so writing to the result changed the input; NumPy
    # and SciPy make new arrays.
    x = np.array([1.0, 2.0, 3.0])
    result = f(x)
    np.testing.assert_array_equal(result, [1.0, 2.0, 3.0])
    assert not np.shares_memory(result, x), name


def test_refused_in_place_methods_point_to_functions_that_exist():
    # t.fill(v), t.put(i, v) and t.resize(n) said "use tnp.fill(x, ...)" (tnp.put,
    # tnp.resize): functions tidu does not have. Each now names a working alternative.
    import re

    t = tnp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for method, args in (("sort", ()), ("fill", (0.0,)), ("put", ([0], [5.0])), ("resize", (2,))):
        with pytest.raises(tnp.TensorTypeError,
                           match=rf"Tensor\.{method}\(\) would change") as caught:
            getattr(t, method)(*args)
        named = re.findall(r"tnp\.(\w+)", str(caught.value))
        assert named and all(hasattr(tnp, name) for name in named), str(caught.value)
    np.testing.assert_array_equal(tnp.at(tnp.ravel(t))[np.array([0])].set(5.0).data,
                                  [5.0, 2.0, 3.0])


@pytest.mark.parametrize("mode", ["wrap", "clip"])
def test_take_modes_as_numpy_eagerly_under_jit_vmap_and_grad(mode):
    # tnp.take had no mode= (a TypeError from Python, while np.take on a tensor dispatched
    # to it). Now NumPy's modes, with index data that stays data: jit does not retrace for
    # new indices, narrow index types into long axes work, gradients accumulate.
    x = np.arange(200.0)
    i = np.array([-100, 127, -128, 3, 3], dtype=np.int8)
    want = np.take(x, i, mode=mode)
    np.testing.assert_array_equal(tnp.take(x, i, mode=mode), want)
    jitted = tnp.jit(lambda a, j: tnp.take(a, j, mode=mode))
    np.testing.assert_array_equal(jitted(x, i), want)
    np.testing.assert_array_equal(jitted(x, i[::-1]), want[::-1])
    rows = tnp.vmap(lambda j: tnp.take(x, j, mode=mode))(np.stack([i, i[::-1]]))
    np.testing.assert_array_equal(rows, np.stack([want, want[::-1]]))
    grad = tnp.grad(lambda a: tnp.sum(tnp.take(a, i, mode=mode) ** 2))(x)
    expected = np.zeros_like(x)
    np.add.at(expected, np.take(np.arange(200), i, mode=mode), 2 * want)
    np.testing.assert_array_equal(grad, expected)
    leaf = tnp.tensor(x, requires_grad=True)
    tnp.sum(np.take(leaf, tnp.tensor(i), mode=mode) ** 2).backward()
    np.testing.assert_array_equal(leaf.grad, expected)


def test_take_refuses_an_unknown_mode_by_name():
    with pytest.raises(tidu.TiduError, match="take: mode must be 'raise', 'wrap' or 'clip', "
                                             "got 'fill'"):
        tnp.take(np.arange(3.0), np.array([0]), mode="fill")


def test_interp_under_jit_says_the_knots_are_not_known_and_under_grad_that_xp_is_constant():
    # With xp a jit argument, interp said "differentiating in xp is not supported" though
    # nothing differentiated it: the values of xp are what jit cannot give. A transform that
    # does differentiate xp still gets the first message.
    from primitives.tensor.errors import ConcretizationError, TensorNotSupportedError

    x, xp, fp = np.array([0.5, 2.0]), np.array([0.0, 1.0, 3.0]), np.array([0.0, 2.0, 3.0])
    with pytest.raises(ConcretizationError, match="interp: reading xp"):
        tnp.jit(lambda a, k, v: tnp.interp(a, k, v))(x, xp, fp)
    with pytest.raises(TensorNotSupportedError, match="differentiating in xp"):
        tnp.grad(lambda k: tnp.sum(tnp.interp(x, k, fp)))(xp)
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(tnp.interp(x, xp, v)))(fp),
                               [0.5, 1.0, 0.5])


def test_hessian_names_itself_in_its_argument_errors():
    # hessian is jacfwd(jacrev(f)): its argument errors named jacfwd, a function the user
    # never called (JAX does the same).
    from primitives.tensor.transforms.functional import FunctionalError

    f = lambda x: tnp.sum(x ** 2)                                               # noqa: E731
    with pytest.raises(FunctionalError, match="^hessian: argument 0 has dtype int64"):
        tnp.hessian(f)(np.array([1, 2]))
    with pytest.raises(FunctionalError, match="^hessian: argnums 3 out of range"):
        tnp.hessian(f, argnums=3)(np.array([1.0]))
    np.testing.assert_array_equal(tnp.hessian(f)(np.array([1.0, 2.0])), 2 * np.eye(2))
