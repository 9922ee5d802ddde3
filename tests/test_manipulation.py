"""The shape and indexing functions (``primitives.tensor.numpy.manipulation``) and the ``split`` op.

- ``Split`` (the one new primitive) through ``check_primitive`` to second order, in
  float64, float32 and complex128, on hypothesis shapes with size-0 and size-1 axes;
- random arguments (shifts, sections, reps, permutations, offsets, index arrays)
  against NumPy's forward result, and, since every function is linear, its JVP
  equal to the function of the tangent and its VJP the adjoint of the function
  (``<ct, f(t)> == <f*(ct), t>``);
- static integer arguments refused while ``jit`` traces; NumPy's own functions on
  tensors dispatching here; reverse mode through ``split`` costing one op;
- bad arguments: the ``TiduError`` subclass, naming the function.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import primitives.tensor as tnp
from primitives.tensor.transforms import make_graph
from primitives.tensor import (ConcretizationError, TensorAxisError, TensorIndexError,
                               TensorNotSupportedError, TensorShapeError, TensorTypeError)
from primitives.tensor.ops.indexing import Split
from tidu import TiduError
from tidu.testing import check_primitive

SETTINGS = settings(max_examples=8, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
DTYPES = ["float64", "float32", "complex128"]
SIZES = st.sampled_from([0, 1, 2, 3])
SHAPES = st.lists(SIZES, min_size=0, max_size=3).map(tuple)
NONSCALAR = st.lists(SIZES, min_size=1, max_size=3).map(tuple)


def rand(rng, shape, dtype="float64"):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


# --- the split primitive -----------------------------------------------------------------


@st.composite
def split_ops(draw, shape):
    """A ``Split`` of an operand of ``shape``: a random axis cut into random sizes."""
    axis = draw(st.integers(0, len(shape) - 1))
    sizes, left = [], shape[axis]
    for _ in range(draw(st.integers(0, 3))):
        size = draw(st.integers(0, left))
        sizes.append(size)
        left -= size
    return axis, tuple(sizes + [left])


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(data=st.data(), shape=NONSCALAR, seed=st.integers(0, 2**32 - 1))
def test_split_rules(dtype, data, shape, seed):
    axis, sizes = data.draw(split_ops(shape))
    op = Split(axis, sizes, shape, dtype)
    x = rand(np.random.default_rng(seed), shape, dtype)
    pieces = op.eval(None, [x])
    assert len(pieces) == len(sizes) and np.array_equal(np.concatenate(pieces, axis), x)
    check_primitive(op, x, order=2, rng=seed)


def test_split_transpose_is_one_op():
    """Reverse mode through 50 pieces: one concatenate (or one pad for one piece), not 50 pads."""
    def names(f):
        transposed = make_graph(f, np.ones(100)).transposed((0,))
        return sorted(op.operation.name for op in transposed.graph.operations)

    def product(a):
        pieces = tnp.split(a, 50)
        return pieces[3] * pieces[7]
    assert names(lambda a: tnp.split(a, 50)[3]) == ["pad"]
    two = names(product)
    assert two.count("concatenate") == 1 and "pad" not in two and "slice" not in two, two
    grad = tnp.grad(lambda a: tnp.sum(product(a)))(np.arange(100.0))
    expected = np.zeros(100)
    expected[6:8], expected[14:16] = [14.0, 15.0], [6.0, 7.0]
    np.testing.assert_array_equal(grad, expected)


# --- random arguments: forward against NumPy, and linearity ----------------------------


def check_linear(f, reference, x, seed=0):
    """``f(x)`` equals NumPy's ``reference(x)`` (values, shapes, dtypes, a list as a list),
    its JVP is ``f`` of the tangent and its VJP is ``f``'s adjoint."""
    got, want = f(x), reference(x.copy())
    many = isinstance(want, (list, tuple))
    assert isinstance(got, (list, tuple)) == many
    got_leaves, want_leaves = (list(got), list(want)) if many else ([got], [want])
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w)
    rng = np.random.default_rng(seed)
    t = rand(rng, x.shape, x.dtype)
    _, tangent = tnp.jvp(f, (x,), (t,))
    image = f(t)
    for a, b in zip(tangent if many else [tangent], image if many else [image]):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    seeds = [rand(rng, np.shape(w), x.dtype) for w in want_leaves]
    _, pullback = tnp.vjp(f, x)
    (back,) = pullback(list(seeds) if many else seeds[0])
    lhs = sum(np.real(np.vdot(s, np.asarray(v))) for s, v in zip(seeds, image if many else [image]))
    rhs = np.real(np.vdot(np.asarray(back), t))
    assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs))


@settings(SETTINGS, max_examples=15)
@given(shape=SHAPES, data=st.data())
def test_roll_random(shape, data):
    x = rand(np.random.default_rng(0), shape)
    shift = st.integers(-7, 7)
    if not shape or data.draw(st.booleans()):
        args = (data.draw(st.one_of(shift, st.lists(shift, min_size=1, max_size=3))),)
    else:
        n = data.draw(st.integers(1, 3))
        axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=n,
                                  max_size=n))
        shifts = data.draw(st.one_of(shift, st.lists(shift, min_size=n, max_size=n)))
        args = (shifts, axes)
    check_linear(lambda a: tnp.roll(a, *args), lambda a: np.roll(a, *args), x)


@settings(SETTINGS, max_examples=15)
@given(shape=NONSCALAR, data=st.data())
def test_split_random(shape, data):
    x = rand(np.random.default_rng(0), shape, "complex128")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    sections = data.draw(st.one_of(st.integers(1, 4),
                                   st.lists(st.integers(-n - 2, n + 2), max_size=4)))
    check_linear(lambda a: tnp.array_split(a, sections, axis),
                 lambda a: np.array_split(a, sections, axis), x)
    if isinstance(sections, int) and n % sections:
        with pytest.raises(TensorShapeError, match="split: array split does not result"):
            tnp.split(x, sections, axis)
    else:
        check_linear(lambda a: tnp.split(a, sections, axis),
                     lambda a: np.split(a, sections, axis), x)


@settings(SETTINGS, max_examples=15)
@given(shape=SHAPES, reps=st.lists(st.integers(0, 3), max_size=4))
def test_tile_random(shape, reps):
    x = rand(np.random.default_rng(0), shape)
    check_linear(lambda a: tnp.tile(a, reps), lambda a: np.tile(a, reps), x)


@settings(SETTINGS, max_examples=15)
@given(shape=NONSCALAR, data=st.data())
def test_repeat_random(shape, data):
    x = rand(np.random.default_rng(0), shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    n = x.size if axis is None else shape[axis]
    repeats = data.draw(st.one_of(st.integers(0, 3),
                                  st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    check_linear(lambda a: tnp.repeat(a, repeats, axis), lambda a: np.repeat(a, repeats, axis),
                 x)


@settings(SETTINGS, max_examples=15)
@given(shape=SHAPES, data=st.data())
def test_axis_moves_random(shape, data):
    x = rand(np.random.default_rng(0), shape)
    ndim = len(shape)
    if ndim:
        axis = st.integers(-ndim, ndim - 1)
        source = data.draw(st.permutations(range(ndim)))[:data.draw(st.integers(0, ndim))]
        destination = data.draw(st.permutations(range(-ndim, 0)))[:len(source)]
        check_linear(lambda a: tnp.moveaxis(a, source, destination),
                     lambda a: np.moveaxis(a, source, destination), x)
        a1, a2 = data.draw(axis), data.draw(axis)
        check_linear(lambda a: tnp.swapaxes(a, a1, a2), lambda a: np.swapaxes(a, a1, a2), x)
        start = data.draw(st.integers(-ndim, ndim))
        check_linear(lambda a: tnp.rollaxis(a, a1, start),
                     lambda a: np.rollaxis(a, a1, start), x)
        distinct_axes = st.lists(axis, max_size=ndim, unique_by=lambda a: a % ndim)
        flips = data.draw(st.one_of(st.none(), axis, distinct_axes))
        check_linear(lambda a: tnp.flip(a, flips), lambda a: np.flip(a, flips), x)
    for name in ("ravel", "atleast_1d", "atleast_2d", "atleast_3d"):
        check_linear(getattr(tnp, name), getattr(np, name), x)


@settings(SETTINGS, max_examples=15)
@given(shape=st.lists(SIZES, min_size=2, max_size=4).map(tuple), data=st.data(),
       offset=st.integers(-4, 4))
def test_diagonals_random(shape, data, offset):
    x = rand(np.random.default_rng(0), shape, "complex128")
    ndim = len(shape)
    a1, a2 = data.draw(st.lists(st.integers(-ndim, ndim - 1), min_size=2, max_size=2,
                                unique_by=lambda a: a % ndim))
    check_linear(lambda a: tnp.diagonal(a, offset, a1, a2),
                 lambda a: np.diagonal(a, offset, a1, a2), x)
    check_linear(lambda a: tnp.trace(a, offset, a1, a2), lambda a: np.trace(a, offset, a1, a2),
                 x)
    check_linear(lambda a: tnp.tril(a, offset), lambda a: np.tril(a, offset), x)
    check_linear(lambda a: tnp.triu(a, offset), lambda a: np.triu(a, offset), x)
    k = data.draw(st.integers(-5, 5))
    check_linear(lambda a: tnp.rot90(a, k, (a1, a2)), lambda a: np.rot90(a, k, (a1, a2)), x)
    if ndim == 2:
        check_linear(lambda a: tnp.diag(a, offset), lambda a: np.diag(a, offset), x)
    vector = rand(np.random.default_rng(1), shape[-1:], "complex128")
    for fn in ("diag", "tril", "triu"):
        check_linear(lambda a: getattr(tnp, fn)(a, offset), lambda a: getattr(np, fn)(a, offset),
                     vector)


@settings(SETTINGS, max_examples=15)
@given(shape=NONSCALAR, data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_along_axis_random(shape, data, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, shape)
    ndim = len(shape)
    axis = data.draw(st.integers(-ndim, ndim - 1))
    n = shape[axis]
    # the indices broadcast with arr off the axis: each of their other axes is arr's size or 1
    index_shape = tuple(data.draw(st.integers(0, 3)) if d == axis % ndim
                        else data.draw(st.sampled_from([size, 1])) for d, size in enumerate(shape))
    if n == 0:
        index = np.zeros(index_shape, dtype=np.int64)
        if index.size:
            with pytest.raises(TensorIndexError, match="take_along_axis: index 0 is out of bounds"):
                tnp.take_along_axis(x, index, axis)
            return
    else:
        index = rng.integers(-n, n, index_shape)
    check_linear(lambda a: tnp.take_along_axis(a, index, axis),
                 lambda a: np.take_along_axis(a, index, axis), x)
    values = rand(rng, np.take_along_axis(x, index, axis).shape)

    def put(arr, v):
        out = arr.copy()
        np.put_along_axis(out, index, v, axis)
        return out
    got = tnp.put_along_axis(x, index, values, axis, inplace=False)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, put(x, values))
    # linear in arr with the values zero, and in the values with arr zero
    check_linear(lambda a: tnp.put_along_axis(a, index, 0.0, axis, inplace=False),
                 lambda a: put(a, 0.0), x)
    check_linear(lambda v: tnp.put_along_axis(np.zeros_like(x), index, v, axis, inplace=False),
                 lambda v: put(np.zeros_like(x), v), values)


@pytest.mark.parametrize("shapes", [[(3,), (2,)], [(2, 3), (2, 1)], [(), ()], [(2,), (2, 3)],
                                    [(2, 1, 3)] * 3], ids=str)
@pytest.mark.parametrize("name", ["hstack", "vstack", "row_stack", "dstack", "column_stack"])
def test_stacking_matches_numpy(name, shapes):
    rng = np.random.default_rng(0)
    arrays = [rand(rng, s, "float32" if i == 0 else "float64") for i, s in enumerate(shapes)]
    reference = np.vstack if name == "row_stack" else getattr(np, name)
    try:
        expected = reference(arrays)
    except ValueError:
        with pytest.raises(TensorShapeError, match=name):
            getattr(tnp, name)(arrays)
        return
    got = getattr(tnp, name)(arrays)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


# --- jit, eager tensors, NumPy's functions on tensors ---------------------------------------


@pytest.mark.parametrize("fn", [
    lambda a, k: tnp.roll(a, k),
    lambda a, k: tnp.repeat(a, k),
    lambda a, k: tnp.split(a, k),
], ids=["roll", "repeat", "split"])
def test_traced_integer_arguments_raise_under_jit(fn):
    x, k = np.arange(3.0), np.array(1)
    with pytest.raises(ConcretizationError, match="not known while it traces"):
        tnp.jit(fn)(x, k)
    np.testing.assert_array_equal(tnp.jit(fn, static_argnums=1)(x, 1), fn(x, 1))


@pytest.mark.parametrize("fn", [
    lambda a, k: tnp.take_along_axis(a, k + np.zeros(3, dtype=np.int64), 0),
    lambda a, k: tnp.put_along_axis(a, k + np.zeros(1, dtype=np.int64), 1.0, 0, inplace=False),
], ids=["take_along_axis", "put_along_axis"])
def test_traced_indices_are_data_under_jit(fn):
    x = np.arange(3.0)
    for k in (np.array(1), np.array(-1), np.array(2)):
        np.testing.assert_array_equal(tnp.jit(fn)(x, k), fn(x, int(k)))
    with pytest.raises(IndexError, match="out of bounds"):
        tnp.jit(fn)(x, np.array(3))


def test_jit_of_gradient_through_everything():
    """One function using many of them: jit, grad and the eager Tensor agree."""
    def f(a):
        parts = tnp.array_split(tnp.roll(tnp.ravel(a), 3), 3)
        stacked = tnp.vstack([parts[0][:2], tnp.flip(parts[1][:2])])
        m = tnp.tile(tnp.triu(tnp.moveaxis(tnp.atleast_3d(stacked), -1, 0)[0]), (1, 2))
        picked = tnp.take_along_axis(m, np.array([[3, 0], [1, 1]]), 1)
        out = tnp.put_along_axis(m, np.array([[0], [2]]), picked[:, :1] * 2.0, 1, inplace=False)
        return tnp.trace(tnp.rot90(out)) + tnp.sum(tnp.repeat(tnp.diag(tnp.diagonal(out)), 2,
                                                              axis=0) ** 2)
    x = np.random.default_rng(0).standard_normal((2, 4))
    expected = tnp.grad(f)(x)
    np.testing.assert_allclose(tnp.jit(tnp.grad(f))(x), expected, rtol=1e-12)
    t = tnp.tensor(x, requires_grad=True)
    np.testing.assert_allclose(f(t).backward().grad(t), expected, rtol=1e-12)
    h = 1e-6
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        np.testing.assert_allclose(expected[i], (f(x + e) - f(x - e)) / (2 * h), rtol=1e-6,
                                   atol=1e-8)


def test_numpy_functions_on_tensors_dispatch_here():
    t = tnp.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    pieces = np.split(t, 3, axis=1)
    loss = (tnp.sum(np.flip(t) * np.arange(6.0).reshape(2, 3)) + np.trace(t)
            + tnp.sum(pieces[2]) + tnp.sum(np.hstack([t, t])) + tnp.sum(np.tile(t, 2)))
    expected = np.arange(6.0)[::-1].reshape(2, 3) + np.eye(2, 3) + [[0, 0, 1], [0, 0, 1]] + 4
    np.testing.assert_array_equal(loss.backward().grad(t), expected)
    with pytest.raises(TensorNotSupportedError, match="inplace=False"):
        np.put_along_axis(t, np.zeros((2, 1), dtype=int), 1.0, 1)


def test_lists_of_tensors_stack_with_gradients():
    a, b = tnp.tensor(np.ones(2), requires_grad=True), tnp.tensor(np.ones(3), requires_grad=True)
    out = tnp.hstack([a, [b[0], 2.0 * b[2]]])
    assert out.shape == (4,)
    grads = tnp.sum(out * np.arange(4.0)).backward()
    np.testing.assert_array_equal(grads.grad(a), [0.0, 1.0])
    np.testing.assert_array_equal(grads.grad(b), [2.0, 0.0, 6.0])


# --- errors ---------------------------------------------------------------------------------

X2 = np.ones((2, 3))
X1 = np.ones(3)
X0 = np.float64(1.0)

ERRORS = [
    (lambda: tnp.diagonal(X1), TensorShapeError, "diagonal: the array must have at least two"),
    (lambda: tnp.diagonal(X2, 0, 0, 2), TensorAxisError, "diagonal: axis 2 is out of bounds"),
    (lambda: tnp.diagonal(X2, 0, 1, -1), TensorShapeError, "diagonal: axis1 and axis2 cannot"),
    (lambda: tnp.diagonal(X2, 0.5), TensorTypeError, "diagonal: offset must be an integer"),
    (lambda: tnp.diag(np.ones((1, 1, 1))), TensorShapeError, "diag: input must be 1- or 2-d"),
    (lambda: tnp.diag(X1, 1.0), TensorTypeError, "diag: k must be an integer"),
    (lambda: tnp.trace(X1), TensorShapeError, "trace: the array must have at least two"),
    (lambda: tnp.trace(X2, 0, 1, 1), TensorShapeError, "trace: axis1 and axis2 cannot"),
    (lambda: tnp.tril(X0), TensorShapeError, "tril: the array must have at least one"),
    (lambda: tnp.triu(X2, "1"), TensorTypeError, "triu: k must be an integer"),
    (lambda: tnp.flip(X2, 2), TensorAxisError, "flip: axis 2 is out of bounds"),
    (lambda: tnp.flip(X2, (0, -2)), TensorShapeError, "flip: duplicate value"),
    (lambda: tnp.fliplr(X1), TensorShapeError, "fliplr: input must be >= 2-d"),
    (lambda: tnp.flipud(X0), TensorShapeError, "flipud: input must be >= 1-d"),
    (lambda: tnp.rot90(X2, 1, (0,)), TensorShapeError, "rot90: len\\(axes\\) must be 2"),
    (lambda: tnp.rot90(X2, 1, (0, -2)), TensorShapeError, "rot90: axes must be different"),
    (lambda: tnp.rot90(X2, 1, (0, 3)), TensorShapeError, "rot90: axes=\\(0, 3\\) out of range"),
    (lambda: tnp.rot90(X2, 1.5), TensorTypeError, "rot90: k must be an integer"),
    (lambda: tnp.roll(X2, 1, 2), TensorAxisError, "roll: axis 2 is out of bounds"),
    (lambda: tnp.roll(X2, 1.5), TensorTypeError, "roll: shift must be integers"),
    (lambda: tnp.roll(X2, (1, 2), (0, 1, 1)), TensorShapeError, "roll: shift .* cannot be"),
    (lambda: tnp.roll(X2, [[1]], 0), TensorShapeError, "roll: 'shift' and 'axis' should be"),
    (lambda: tnp.repeat(X2, -1), TensorShapeError, "repeat: negative repeats"),
    (lambda: tnp.repeat(X2, [1, 2], axis=1), TensorShapeError, "repeat: 2 repeats for 3"),
    (lambda: tnp.repeat(X2, 1.5), TensorTypeError, "repeat: repeats must be integers"),
    (lambda: tnp.repeat(X2, [[1]]), TensorShapeError, "repeat: repeats must be one count"),
    (lambda: tnp.repeat(X2, 2, axis=-3), TensorAxisError, "repeat: axis -3 is out of bounds"),
    (lambda: tnp.tile(X2, -1), TensorShapeError, "tile: negative reps"),
    (lambda: tnp.tile(X2, 1.5), TensorTypeError, "tile: a shape must be"),
    (lambda: tnp.split(X1, 2), TensorShapeError, "split: array split does not result"),
    (lambda: tnp.split(X1, 0), TensorShapeError, "split: number sections must be larger"),
    (lambda: tnp.array_split(X1, -1), TensorShapeError, "array_split: number sections"),
    (lambda: tnp.array_split(X1, 1.5), TensorTypeError, "array_split: indices_or_sections"),
    (lambda: tnp.array_split(X1, [[1]]), TensorShapeError, "array_split: indices_or_sections"),
    (lambda: tnp.split(X2, 1, 2), TensorAxisError, "split: axis 2 is out of bounds"),
    (lambda: tnp.hsplit(X0, 1), TensorShapeError, "hsplit only works on arrays of 1"),
    (lambda: tnp.vsplit(X1, 1), TensorShapeError, "vsplit only works on arrays of 2"),
    (lambda: tnp.dsplit(X2, 1), TensorShapeError, "dsplit only works on arrays of 3"),
    (lambda: tnp.hstack([]), TensorShapeError, "hstack: need at least one array"),
    (lambda: tnp.hstack(X0), TensorTypeError, "hstack: arrays to stack must be passed"),
    (lambda: tnp.vstack(x for x in [X1]), TensorTypeError, "vstack: arrays to stack"),
    (lambda: tnp.vstack([X1, np.ones(2)]), TensorShapeError, "vstack: concatenate: shapes"),
    (lambda: tnp.hstack([X2, X2], dtype=np.int64), TensorTypeError, "hstack: cannot cast"),
    (lambda: tnp.hstack([X2, X2], casting="no!"), TensorShapeError, "hstack: casting must be"),
    (lambda: tnp.dstack([X2, X1]), TensorShapeError, "dstack: concatenate"),
    (lambda: tnp.column_stack([X1, np.ones(2)]), TensorShapeError, "column_stack: concatenate"),
    (lambda: tnp.column_stack([None]), TensorTypeError, "column_stack: expected an array"),
    (lambda: tnp.append(X2, X1, axis=0), TensorShapeError, "append: concatenate: all the input"),
    (lambda: tnp.append(X2, X2, axis=2), TensorAxisError, "append: axis 2 is out of bounds"),
    (lambda: tnp.moveaxis(X2, 0, 2), TensorAxisError, "moveaxis: axis 2 is out of bounds"),
    (lambda: tnp.moveaxis(X2, [0, 0], [0, 1]), TensorShapeError, "moveaxis: repeated axis in "
                                                                 "`source`"),
    (lambda: tnp.moveaxis(X2, [0, 1], [0]), TensorShapeError, "moveaxis: `source` and "),
    (lambda: tnp.swapaxes(X2, 0, -3), TensorAxisError, "swapaxes: axis -3 is out of bounds"),
    (lambda: tnp.rollaxis(X2, 0, 3), TensorShapeError, "rollaxis: 'start' arg requires"),
    (lambda: tnp.rollaxis(X2, 2), TensorAxisError, "rollaxis: axis 2 is out of bounds"),
    (lambda: tnp.ravel(X2, "F"), TensorNotSupportedError, "ravel: order 'F' is not supported"),
    (lambda: tnp.atleast_2d(None), TensorTypeError, "atleast_2d: expected an array"),
    (lambda: tnp.take_along_axis(X2, np.zeros((2, 1)), 1), TensorIndexError,
     "take_along_axis: `indices` must be an integer array"),
    (lambda: tnp.take_along_axis(X2, np.zeros(2, dtype=int), 1), TensorShapeError,
     "take_along_axis: `indices` and `arr` must have the same number"),
    (lambda: tnp.take_along_axis(X2, np.zeros((1, 1), dtype=int), None), TensorShapeError,
     "take_along_axis: when axis=None"),
    (lambda: tnp.take_along_axis(X2, np.full((1, 1), 3), 1), TensorIndexError,
     "take_along_axis: index 3 is out of bounds for axis 1 with size 3"),
    (lambda: tnp.take_along_axis(X2, np.zeros((3, 1), dtype=int), 1), TensorShapeError,
     "take_along_axis: shapes \\(2, 3\\) of arr and \\(3, 1\\) of indices"),
    (lambda: tnp.take_along_axis(X2, np.zeros((1, 1), dtype=int), 2), TensorAxisError,
     "take_along_axis: axis 2 is out of bounds"),
    (lambda: tnp.put_along_axis(X2, np.zeros((2, 1), dtype=int), 1.0, 1), TensorNotSupportedError,
     "put_along_axis: tensors are immutable.*inplace=False"),
    (lambda: tnp.put_along_axis(X2, np.zeros((2, 1), dtype=int), np.ones(3), 1, inplace=False),
     TensorShapeError, "put_along_axis: values of shape \\(3,\\) cannot be broadcast"),
    (lambda: tnp.put_along_axis(X2, np.full((2, 1), -4), 1.0, 1, inplace=False),
     TensorIndexError, "put_along_axis: index -4 is out of bounds"),
]


@pytest.mark.parametrize("call, error, message", ERRORS, ids=[e[2][:40] for e in ERRORS])
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message) as raised:
        call()
    assert isinstance(raised.value, TiduError)
    np.testing.assert_array_equal(tnp.flip(np.arange(2.0)), [1.0, 0.0])   # still usable
