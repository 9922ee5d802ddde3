"""Cases for the shape and indexing functions (``primitives.tensor.numpy.manipulation``).

All are linear, so every one is differentiable in its array arguments, in every
dtype; the integer arguments (offsets, shifts, repeats, sections, indices) are
fixed in the lambdas.
"""

import warnings

import numpy as np

import primitives.tensor as tnp
from numpy_cases import Case, fixed, normal

# index arrays for take_along_axis / put_along_axis (negative ones and repeats included)
_TAKE = np.array([[[0, -1, 2, 2, 1]], [[3, 3, 0, -4, 1]]])       # (2, 1, 5) into (2, 4, 5)
_PUT = np.array([[[1], [3], [1]], [[0], [-1], [0]]])              # (2, 3, 1), repeats
_PUT_NONE = np.array([5, 0, 5, -1, 7])
_CHOICE = np.array([[0, 1, 2], [1, 1, 0]])                        # choose's a, (2, 3)
_EXTRACT = np.array([[True, False, True], [False, False, True]])


def _put(arr, indices, values, axis):
    out = arr.copy()
    np.put_along_axis(out, indices, values, axis)
    return out


def _row_stack(arrays):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)     # deprecated since NumPy 2.0
        return np.row_stack(arrays)


CASES = [
    # diagonals and triangles
    Case("diagonal", tnp.diagonal, np.diagonal, (normal((3, 4)),)),
    Case("diagonal", lambda a: tnp.diagonal(a, -1, 2, 0), lambda a: np.diagonal(a, -1, 2, 0),
         (normal((3, 2, 4)),), label="offset,axes"),
    Case("diagonal", lambda a: tnp.diagonal(a, 5), lambda a: np.diagonal(a, 5),
         (normal((2, 3)),), label="empty"),
    Case("diag", tnp.diag, np.diag, (normal((3,)),), label="1d"),
    Case("diag", lambda v: tnp.diag(v, -2), lambda v: np.diag(v, -2), (normal((3,)),),
         label="1d,k"),
    Case("diag", lambda a: tnp.diag(a, 1), lambda a: np.diag(a, 1), (normal((3, 4)),),
         label="2d,k"),
    Case("trace", tnp.trace, np.trace, (normal((3, 3)),)),
    Case("trace", lambda a: tnp.trace(a, 1, -1, 0), lambda a: np.trace(a, 1, -1, 0),
         (normal((3, 2, 4)),), label="offset,axes"),
    Case("tril", tnp.tril, np.tril, (normal((2, 3, 4)),)),
    Case("tril", lambda a: tnp.tril(a, -1), lambda a: np.tril(a, -1), (normal((4,)),),
         label="1d,k"),
    Case("triu", lambda a: tnp.triu(a, 1), lambda a: np.triu(a, 1), (normal((3, 4)),)),
    # flips, rotations, rolls
    Case("flip", tnp.flip, np.flip, (normal((2, 3)),)),
    Case("flip", lambda a: tnp.flip(a, (0, -1)), lambda a: np.flip(a, (0, -1)),
         (normal((2, 3, 4)),), label="axes"),
    Case("fliplr", tnp.fliplr, np.fliplr, (normal((2, 3)),)),
    Case("flipud", tnp.flipud, np.flipud, (normal((3,)),)),
    Case("trim_zeros", lambda a: tnp.trim_zeros(a, axis=1),
         lambda a: np.trim_zeros(a, axis=1), (fixed([[0.0, 1.5, 0.0, 2.0, 0.0],
                                                    [0.0, 0.0, -1.0, 0.0, 0.0]]),), wrt=(),
         jit=False, note="filt is read (the result's shape depends on it); the derivative "
                         "goes to the entries kept"),
    Case("diagflat", lambda v: tnp.diagflat(v, -1), lambda v: np.diagflat(v, -1),
         (normal((2, 2)),)),
    Case("vander", tnp.vander, np.vander, (normal((3,)),),
         note="powers by repeated products: exact at x = 0"),
    Case("vander", lambda x: tnp.vander(x, 4, increasing=True),
         lambda x: np.vander(x, 4, increasing=True), (fixed([0.0, 1.5, -2.0]),),
         label="increasing, at 0"),
    Case("rot90", tnp.rot90, np.rot90, (normal((2, 3)),)),
    Case("rot90", lambda a: tnp.rot90(a, -3, (2, 0)), lambda a: np.rot90(a, -3, (2, 0)),
         (normal((2, 3, 4)),), label="k,axes"),
    Case("rot90", lambda a: tnp.rot90(a, 2), lambda a: np.rot90(a, 2), (normal((2, 3)),),
         label="k=2"),
    Case("roll", lambda a: tnp.roll(a, 2), lambda a: np.roll(a, 2), (normal((2, 3)),)),
    Case("roll", lambda a: tnp.roll(a, (1, -5, 2), (0, -1, 0)),
         lambda a: np.roll(a, (1, -5, 2), (0, -1, 0)), (normal((4, 3)),), label="axes"),
    # repeating
    Case("repeat", lambda a: tnp.repeat(a, 2), lambda a: np.repeat(a, 2), (normal((2, 3)),)),
    Case("repeat", lambda a: tnp.repeat(a, [2, 0, 1], axis=-1),
         lambda a: np.repeat(a, [2, 0, 1], axis=-1), (normal((2, 3)),), label="per element"),
    Case("broadcast_arrays", lambda a, b: tnp.broadcast_arrays(a, b),
         lambda a, b: np.broadcast_arrays(a, b), (normal((3, 1)), normal((4,))), wrt=(0, 1)),
    Case("resize", lambda a: tnp.resize(a, (3, 3)), lambda a: np.resize(a, (3, 3)),
         (normal((2, 2)),), note="linear: each entry collects its copies' derivatives"),
    Case("tile", lambda a: tnp.tile(a, (2, 1, 3)), lambda a: np.tile(a, (2, 1, 3)),
         (normal((2, 3)),)),
    Case("tile", lambda a: tnp.tile(a, 2), lambda a: np.tile(a, 2), (normal((2, 3)),),
         label="short reps"),
    # splitting
    Case("split", lambda a: tnp.split(a, 2, axis=1), lambda a: np.split(a, 2, axis=1),
         (normal((3, 4)),)),
    Case("split", lambda a: tnp.split(a, [1, -1]), lambda a: np.split(a, [1, -1]),
         (normal((5, 2)),), label="indices"),
    Case("split", lambda a: tnp.split(a, [3, 1, 9]), lambda a: np.split(a, [3, 1, 9]),
         (normal((5,)),), label="overlapping indices"),
    Case("array_split", lambda a: tnp.array_split(a, 3, axis=-1),
         lambda a: np.array_split(a, 3, axis=-1), (normal((2, 7)),), label="uneven"),
    Case("hsplit", lambda a: tnp.hsplit(a, [1]), lambda a: np.hsplit(a, [1]),
         (normal((2, 3)),)),
    Case("vsplit", lambda a: tnp.vsplit(a, 2), lambda a: np.vsplit(a, 2), (normal((4, 3)),)),
    Case("dsplit", lambda a: tnp.dsplit(a, [2]), lambda a: np.dsplit(a, [2]),
         (normal((2, 1, 3)),)),
    # stacking
    Case("hstack", lambda a, b: tnp.hstack([a, b]), lambda a, b: np.hstack([a, b]),
         (normal((2, 3)), normal((2, 1))), wrt=(0, 1)),
    Case("hstack", lambda a, b: tnp.hstack((a, b)), lambda a, b: np.hstack((a, b)),
         (normal((3,)), normal(())), wrt=(0, 1), label="1d,0d"),
    Case("vstack", lambda a, b: tnp.vstack([a, b]), lambda a, b: np.vstack([a, b]),
         (normal((3,)), normal((2, 3))), wrt=(0, 1)),
    Case("row_stack", lambda a, b: tnp.row_stack([a, b]), lambda a, b: _row_stack([a, b]),
         (normal((3,)), normal((3,))), wrt=(0, 1), note="deprecated by NumPy: vstack"),
    Case("dstack", lambda a, b: tnp.dstack([a, b]), lambda a, b: np.dstack([a, b]),
         (normal((2, 3)), normal((2, 3, 2))), wrt=(0, 1)),
    Case("column_stack", lambda a, b: tnp.column_stack([a, b]),
         lambda a, b: np.column_stack([a, b]), (normal((3,)), normal((3, 2))), wrt=(0, 1)),
    Case("block", lambda a, b, c: tnp.block([[a, b], [c, 2.0]]),
         lambda a, b, c: np.block([[a, b], [c, 2.0]]),
         (normal((2, 2)), normal((2, 1)), normal((2,))), wrt=(0, 1, 2),
         note="concatenations: linear in every block"),
    Case("block", lambda a, b: tnp.block([[[a]], [[b]]]), lambda a, b: np.block([[[a]], [[b]]]),
         (normal((2,)), normal((1, 2))), wrt=(0, 1), label="depth 3"),
    Case("insert", lambda a, v: tnp.insert(a, [1, 3, 3], v, axis=1),
         lambda a, v: np.insert(a, [1, 3, 3], v, axis=1), (normal((2, 4)), normal((3,))),
         wrt=(0, 1), note="obj is read (the result's shape depends on it); values cast to "
                          "arr's dtype"),
    Case("insert", lambda a, v: tnp.insert(a, 2, v), lambda a, v: np.insert(a, 2, v),
         (normal((2, 3)), normal((2,))), wrt=(0, 1), label="flattened, one block"),
    Case("delete", lambda a: tnp.delete(a, [0, -1], axis=1),
         lambda a: np.delete(a, [0, -1], axis=1), (normal((2, 4)),),
         note="obj is read (the result's shape depends on it)"),
    Case("delete", lambda a: tnp.delete(a, slice(None, None, 2)),
         lambda a: np.delete(a, slice(None, None, 2)), (normal((2, 3)),), label="slice"),
    Case("append", tnp.append, np.append, (normal((2, 3)), normal((2,))), wrt=(0, 1)),
    Case("append", lambda a, b: tnp.append(a, b, axis=0), lambda a, b: np.append(a, b, axis=0),
         (normal((2, 3)), normal((1, 3))), wrt=(0, 1), label="axis"),
    # axes
    Case("moveaxis", lambda a: tnp.moveaxis(a, [0, -1], [-1, 1]),
         lambda a: np.moveaxis(a, [0, -1], [-1, 1]), (normal((2, 3, 4)),)),
    Case("swapaxes", lambda a: tnp.swapaxes(a, 0, -1), lambda a: np.swapaxes(a, 0, -1),
         (normal((2, 3, 4)),)),
    Case("matrix_transpose", tnp.matrix_transpose, np.matrix_transpose, (normal((2, 3, 4)),)),
    Case("linalg.matrix_transpose", tnp.linalg.matrix_transpose, np.linalg.matrix_transpose,
         (normal((3, 4)),)),
    Case("permute_dims", lambda a: tnp.permute_dims(a, (2, 0, 1)),
         lambda a: np.permute_dims(a, (2, 0, 1)), (normal((2, 3, 4)),),
         note="the Array API's name of transpose"),
    Case("unstack", lambda a: tnp.unstack(a, axis=1), lambda a: np.unstack(a, axis=1),
         (normal((2, 3, 4)),)),
    Case("concat", lambda a, b: tnp.concat([a, b], axis=-1),
         lambda a, b: np.concat([a, b], axis=-1), (normal((2, 3)), normal((2, 1))), wrt=(0, 1),
         note="the Array API's name of concatenate"),
    Case("rollaxis", lambda a: tnp.rollaxis(a, -1, 1), lambda a: np.rollaxis(a, -1, 1),
         (normal((2, 3, 4)),)),
    Case("ravel", tnp.ravel, np.ravel, (normal((2, 3)),)),
    Case("atleast_1d", tnp.atleast_1d, np.atleast_1d, (normal(()),)),
    Case("atleast_2d", tnp.atleast_2d, np.atleast_2d, (normal((3,)),)),
    Case("atleast_3d", lambda a, b: tnp.atleast_3d(a, b), lambda a, b: np.atleast_3d(a, b),
         (normal((3,)), normal((2, 3))), wrt=(0, 1)),
    # indexing along an axis
    Case("take_along_axis", lambda a: tnp.take_along_axis(a, _TAKE, 1),
         lambda a: np.take_along_axis(a, _TAKE, 1), (normal((2, 4, 5)),),
         note="repeated indices add their cotangents"),
    Case("take_along_axis", lambda a: tnp.take_along_axis(a, _PUT_NONE, None),
         lambda a: np.take_along_axis(a, _PUT_NONE, None), (normal((2, 4)),),
         label="axis=None"),
    Case("put_along_axis", lambda a, v: tnp.put_along_axis(a, _PUT, v, 1, inplace=False),
         lambda a, v: _put(a, _PUT, v, 1), (normal((2, 4, 3)), normal((2, 3, 3))), wrt=(0, 1),
         note="functional (inplace=False, as jax.numpy): returns the new array; where indices "
              "repeat, the last value is written and only it is differentiated"),
    Case("put_along_axis", lambda a, v: tnp.put_along_axis(a, _PUT_NONE, v, None,
                                                           inplace=False),
         lambda a, v: _put(a, _PUT_NONE, v, None), (normal((2, 4)), normal(())), wrt=(0, 1),
         label="axis=None, broadcast value"),
]


# --- selection, index tricks, mapping functions ------------------------------------------------

_MASK = np.array([[True, False, True], [False, False, True]])
_OTHER = np.array([[True, True, False], [False, True, False]])
_MATVEC = "(n,n),(n)->(n)"


def _piecewise(xp):
    return lambda x: xp.piecewise(x, [x < -0.5, x > 0.5],
                                  [lambda v: v ** 2, lambda v: xp.sin(v) * v, 0.25])


def _along_rows(xp):
    return lambda a: xp.apply_along_axis(lambda v: xp.stack([xp.sum(v * v), v[0] * v[-1]]), 1, a)


PIECEWISE_NOTE = ("each function differentiates where its condition holds (later conditions "
                  "win); 0 where a constant is chosen. Under jit/vmap every function runs on all "
                  "of x (JAX's way)")

CASES += [
    Case("select", lambda a, b: tnp.select([_MASK, _OTHER], [a, b ** 2], default=-1.0),
         lambda a, b: np.select([_MASK, _OTHER], [a, b ** 2], default=-1.0),
         (normal((2, 3)), normal((3,))), wrt=(0, 1),
         note="the derivative goes to the choice made at each position"),
    Case("select", lambda a, d: tnp.select([_MASK], [a], default=d),
         lambda a, d: np.select([_MASK], [a], default=d), (normal(()), normal((2, 1))),
         wrt=(0, 1), label="broadcast choice and default"),
    Case("choose", lambda a, b: tnp.choose(_CHOICE, [a, b, 2.0]),
         lambda a, b: np.choose(_CHOICE, [a, b, 2.0]), (normal((2, 3)), normal((3,))),
         wrt=(0, 1), note="the derivative goes to the choice read at each position"),
    Case("compress", lambda a: tnp.compress([True, False, True], a, axis=1),
         lambda a: np.compress([True, False, True], a, axis=1), (normal((2, 4)),),
         note="the condition is read (the result's shape depends on it)"),
    Case("extract", lambda a: tnp.extract(_EXTRACT, a), lambda a: np.extract(_EXTRACT, a),
         (normal((2, 3)),), note="the condition is read (the result's shape depends on it)"),
    Case("piecewise", _piecewise(tnp), _piecewise(np), (normal((3, 4)),), dtypes=("float64",),
         note=PIECEWISE_NOTE),
    Case("piecewise", lambda x: tnp.piecewise(x, x > 0, [lambda v: 2 * v, lambda v: -v]),
         lambda x: np.piecewise(x, x > 0, [lambda v: 2 * v, lambda v: -v]), (normal((5,)),),
         dtypes=("float64", "float32"), label="one condition and otherwise", note=PIECEWISE_NOTE),
    Case("r_", lambda a, b: tnp.r_[a, 2.0, b, 0:3], lambda a, b: np.r_[a, 2.0, b, 0:3],
         (normal((2,)), normal((3,))), wrt=(0, 1), note="concatenate: linear in every array"),
    Case("r_", lambda a, b: tnp.r_["-1,2,0", a, b], lambda a, b: np.r_["-1,2,0", a, b],
         (normal((3,)), normal((3, 2))), wrt=(0, 1), label="directive"),
    Case("c_", lambda a, b: tnp.c_[a, b, a * 2], lambda a, b: np.c_[a, b, a * 2],
         (normal((3,)), normal((3, 2))), wrt=(0, 1), note="concatenate: linear in every array"),
    Case("apply_along_axis", _along_rows(tnp), _along_rows(np), (normal((3, 4)),),
         note="one call per slice: the derivative is func1d's"),
    Case("apply_along_axis", lambda a: tnp.apply_along_axis(tnp.outer, 0, a, np.arange(2.0)),
         lambda a: np.apply_along_axis(np.outer, 0, a, np.arange(2.0)), (normal((3, 2)),),
         label="matrix results, extra argument"),
    Case("apply_over_axes", lambda a: tnp.apply_over_axes(tnp.sum, a * a, [0, -1]),
         lambda a: np.apply_over_axes(np.sum, a * a, [0, -1]), (normal((2, 3, 4)),),
         note="func's derivative, axis by axis"),
    Case("ix_", lambda a, b: tnp.ix_(a, b), lambda a, b: np.ix_(a, b),
         (normal((3,)), normal((2,))), wrt=(0, 1), note="reshapes: linear"),
    Case("ix_", lambda a: tnp.ix_(tnp.astype(a, np.int64), [True, False, True]),
         lambda a: np.ix_(a.astype(np.int64), [True, False, True]), (fixed([2, 0]),), wrt=(),
         dtypes=("float64",), label="integers and booleans",
         note="a boolean sequence is read (its true entries' positions)"),
    Case("packbits", lambda a: tnp.packbits(tnp.astype(a, np.int64), axis=-1),
         lambda a: np.packbits(a.astype(np.int64), axis=-1), (fixed([[1, 0, 1] * 4, [0, 1] * 6]),),
         wrt=(), dtypes=("float64",), note="integers: not differentiated"),
    Case("unpackbits", lambda a: tnp.unpackbits(tnp.astype(a, np.uint8), axis=0, count=-3,
                                                bitorder="little"),
         lambda a: np.unpackbits(a.astype(np.uint8), axis=0, count=-3, bitorder="little"),
         (fixed([[176, 3], [255, 0]]),), wrt=(), dtypes=("float64",),
         note="integers: not differentiated"),
    Case("vectorize", lambda a, b: tnp.vectorize(lambda x, y: tnp.sin(x) * y + x)(a, b),
         lambda a, b: np.vectorize(lambda x, y: np.sin(x) * y + x)(a, b),
         (normal((3, 1)), normal((4,))), wrt=(0, 1), note="vmap over the broadcast elements"),
    Case("vectorize", lambda m, v: tnp.vectorize(lambda p, q: p @ q, signature=_MATVEC)(m, v),
         lambda m, v: np.vectorize(lambda p, q: p @ q, signature=_MATVEC)(m, v),
         (normal((2, 3, 3)), normal((4, 1, 3))), wrt=(0, 1), label="signature"),
]
