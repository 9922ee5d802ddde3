"""JAX's ``mode=`` of ``x.at[key]``: ``"clip"`` clamps an index out of range, ``"drop"`` and
``"fill"`` drop an update there and fill a ``get`` there, compared with JAX's values and
gradients, with finite differences, eagerly on NumPy arrays and tensors, and under
``grad``, ``jit`` (indices traced) and ``vmap``."""

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.errors import (TensorIndexError, TensorNotSupportedError,
                                      TensorShapeError, TensorTypeError)
from tidu import TiduError
from tensor_helpers import numeric_grad

X = np.arange(12.0).reshape(3, 4) + 0.5
X3 = np.arange(24.0).reshape(2, 3, 4) - 3.25

# keys of X (3, 4) mixing in-range, negative in-range ([-n, -1]) and out-of-range indices
KEYS = [
    np.array([1, 5, -1, -4, 2]),                       # rows: 5 and -4 out of range
    (np.array([0, 3, -3, 2]), np.array([1, 1, -5, 4])),  # one element each
    (slice(None), np.array([1, 4, -1, -5])),            # columns, a slice before
    (7, slice(1, 3)),                                   # an int out of range, a slice
    (-4, 2),                                            # two ints: the first out of range
    (-1, -2),                                           # two negative ints in range
    (np.array([[0, 9], [-1, 2]]), 1),                   # a 2-d index array and an int
    (None, ..., np.array([5, 3])),                      # None and an ellipsis
]
MODES = ("clip", "drop", "fill")


def _jax():
    jax = pytest.importorskip("jax", reason="compares x.at[...] modes with JAX's")
    jax.config.update("jax_enable_x64", True)
    return jax


def _values(x, key, seed=0):
    """Update values of ``x[key]``'s shape, with no two equal."""
    shape = tnp.at(np.zeros_like(x))[key].get(mode="clip").shape
    return np.random.default_rng(seed).normal(size=shape)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("key", KEYS, ids=range(len(KEYS)))
def test_get_set_add_match_jax(key, mode):
    jnp = _jax().numpy
    v = _values(X, key)
    np.testing.assert_array_equal(tnp.at(X)[key].get(mode=mode),
                                  jnp.asarray(X).at[key].get(mode=mode))
    for method in ("set", "add"):
        got = getattr(tnp.at(X)[key], method)(v, mode=mode)
        want = getattr(jnp.asarray(X).at[key], method)(v, mode=mode)
        # (add sums repeated positions in its own order: equal to rounding)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, err_msg=f"{method} {mode}")


def test_nonadjacent_index_arrays_and_a_boolean_mask_match_jax():
    jnp = _jax().numpy
    key = (np.array([0, 5, -2]), slice(None), np.array([1, -1, 4]))   # index axes go first
    v = _values(X3, key)
    for mode in MODES:
        np.testing.assert_array_equal(tnp.at(X3)[key].get(mode=mode),
                                      jnp.asarray(X3).at[key].get(mode=mode))
        np.testing.assert_array_equal(tnp.at(X3)[key].add(v, mode=mode),
                                      jnp.asarray(X3).at[key].add(v, mode=mode))
    mask = np.array([True, False, True])          # always in range: the mode changes nothing
    np.testing.assert_array_equal(tnp.at(X)[mask].add(1.0, mode="drop"),
                                  jnp.asarray(X).at[mask].add(1.0, mode="drop"))


def test_negative_indices_wrap_first_as_in_jax():
    jnp = _jax().numpy
    x = np.arange(5.0)
    # -5 is 0 (in range), -6 is out of range: filled, or clamped to 0 (not to 4)
    np.testing.assert_array_equal(tnp.at(x)[np.array([-5, -6, -1])].get(mode="fill"),
                                  [0.0, np.nan, 4.0])
    np.testing.assert_array_equal(tnp.at(x)[np.array([-5, -6, -1])].get(mode="clip"),
                                  [0.0, 0.0, 4.0])
    assert float(tnp.at(x)[-6].get(mode="clip")) == 0.0
    # wrap_negative_indices=False: a negative index is out of range
    for mode in MODES:
        i = np.array([-1, 1, 7])
        np.testing.assert_array_equal(
            tnp.at(x)[i].get(mode=mode, wrap_negative_indices=False),
            jnp.asarray(x).at[i].get(mode=mode, wrap_negative_indices=False))
        np.testing.assert_array_equal(
            tnp.at(x)[i].set(np.array([7.0, 8.0, 9.0]), mode=mode, wrap_negative_indices=False),
            jnp.asarray(x).at[i].set(np.array([7.0, 8.0, 9.0]), mode=mode,
                                     wrap_negative_indices=False))
    # slices keep NumPy's rules whatever the flag
    np.testing.assert_array_equal(tnp.at(x)[-2:].get(mode="fill", wrap_negative_indices=False),
                                  [3.0, 4.0])


def test_add_in_drop_mode_sums_duplicates_and_drops_the_rest():
    i = np.array([1, 7, 1, -9, 4, -1])
    got = tnp.at(np.zeros(5))[i].add(np.array([1.0, 10.0, 100.0, 1000.0, 2.0, 3.0]),
                                     mode="drop")
    np.testing.assert_array_equal(got, [0.0, 101.0, 0.0, 0.0, 5.0])
    # in clip mode, 7 goes to 4 and -9 (wrapped to -4) to 0
    got = tnp.at(np.zeros(5))[i].add(np.array([1.0, 10.0, 100.0, 1000.0, 2.0, 3.0]),
                                     mode="clip")
    np.testing.assert_array_equal(got, [1000.0, 101.0, 0.0, 0.0, 15.0])
    # set keeps the last write to a position; a dropped one writes nothing
    got = tnp.at(np.zeros(5))[i].set(np.array([1.0, 10.0, 100.0, 1000.0, 2.0, 3.0]),
                                     mode="drop")
    np.testing.assert_array_equal(got, [0.0, 100.0, 0.0, 0.0, 3.0])


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128", "int8", "int32",
                                   "int64", "uint8", "uint32", "bool"])
def test_default_fill_values_match_jax(dtype):
    jnp = _jax().numpy
    x = (np.arange(4) % 2).astype(dtype)
    got = tnp.at(x)[np.array([0, 4, -5])].get(mode="fill")
    want = jnp.asarray(x).at[np.array([0, 4, -5])].get(mode="fill")
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    got = tnp.at(x)[1].get(mode="fill", fill_value=2.7)          # cast to x's dtype
    np.testing.assert_array_equal(got, jnp.asarray(x).at[1].get(mode="fill", fill_value=2.7))
    got = tnp.at(x)[9].get(mode="fill", fill_value=2.7)
    np.testing.assert_array_equal(got, jnp.asarray(x).at[9].get(mode="fill", fill_value=2.7))


def test_fill_value_is_only_gets_and_only_with_fill_or_drop():
    x = np.arange(4.0)
    assert float(tnp.at(x)[9].get(mode="drop", fill_value=-1.0)) == -1.0
    assert float(tnp.at(x)[9].get(mode="clip", fill_value=-1.0)) == 3.0   # ignored, as JAX
    for method in ("set", "add"):                     # JAX: an unexpected keyword (TypeError)
        with pytest.raises(TensorTypeError, match=rf"x\.at\[\.\.\.\]\.{method} takes no "
                                                  "fill_value"):
            getattr(tnp.at(x)[9], method)(1.0, mode="fill", fill_value=0.0)
    with pytest.raises(TensorShapeError, match=r"x\.at\[\.\.\.\]\.get: fill_value must be a "
                                               r"scalar, got an array of shape \(1,\)"):
        tnp.at(x)[9].get(mode="fill", fill_value=np.array([1.0]))
    # a fill value x's dtype cannot hold is refused, not cut (JAX refuses a complex one)
    with pytest.raises(TensorTypeError, match=r"x\.at\[\.\.\.\]\.get: a complex fill_value"):
        tnp.at(x)[9].get(mode="fill", fill_value=1 + 2j)
    with pytest.raises(TensorShapeError, match=r"x\.at\[\.\.\.\]\.get: fill_value=300 does "
                                               "not fit int8"):
        tnp.at(np.arange(4, dtype=np.int8))[9].get(mode="fill", fill_value=300)
    with pytest.raises(TensorShapeError, match=r"fill_value=nan does not fit int64"):
        tnp.at(np.arange(4))[9].get(mode="fill", fill_value=float("nan"))


@pytest.mark.parametrize("method", ["get", "set", "add"])
def test_an_unknown_mode_is_refused_naming_at_and_the_mode(method):
    x = tnp.tensor(np.arange(4.0))
    args = () if method == "get" else (1.0,)
    for mode in ("bogus", "FILL", 3):
        with pytest.raises(TensorShapeError, match=rf"x\.at\[\.\.\.\]\.{method}: unknown "
                                                   rf"mode={mode!r}") as caught:
            getattr(x.at[1], method)(*args, mode=mode)
        assert isinstance(caught.value, (TiduError, ValueError))   # JAX's is a ValueError


def test_the_default_and_promise_in_bounds_raise_for_an_index_out_of_range():
    x = np.arange(4.0)
    for mode in (None, "promise_in_bounds"):
        with pytest.raises(IndexError):
            tnp.at(x)[np.array([1, 4])].get(mode=mode)
        with pytest.raises(IndexError):
            tnp.at(x)[np.array([1, 4])].add(1.0, mode=mode)
        with pytest.raises(TensorNotSupportedError, match="wrap_negative_indices=False"):
            tnp.at(x)[1].get(mode=mode, wrap_negative_indices=False)
    assert not isinstance(tnp.at(x)[np.array([1, 4])].get(mode="fill"), Exception)


def test_empty_axes():
    jnp = _jax().numpy
    x = np.zeros((0, 3))
    for mode in MODES:                    # nothing to write in an empty array: as JAX
        for method in ("set", "add"):
            got = getattr(tnp.at(x)[np.array([0, 1])], method)(1.0, mode=mode)
            want = getattr(jnp.asarray(x).at[np.array([0, 1])], method)(1.0, mode=mode)
            assert got.shape == want.shape == (2 * 0, 3)
        # JAX raises for a get from an empty axis; so does tidu, naming the call
        with pytest.raises(TensorIndexError, match=rf"x\.at\[\.\.\.\]\.get: mode='{mode}' "
                                                   "cannot index axis 0, of length 0"):
            tnp.at(x)[np.array([0, 1])].get(mode=mode)
    assert tnp.at(x)[np.array([], dtype=int)].get(mode="fill").shape == (0, 3)


# --- gradients ------------------------------------------------------------------------------


def _loss(result, weights):
    return tnp.sum(tnp.sin(result) * weights)


GRAD_KEYS = [np.array([1, 5, -1, -4, 1]), (slice(None), np.array([1, 4, -1, -5])),
             (7, slice(1, 3)), (np.array([0, 3, 2]), np.array([1, 1, 4]))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("key", GRAD_KEYS, ids=range(len(GRAD_KEYS)))
def test_gradients_match_jax_and_finite_differences(key, mode):
    jax = _jax()
    jnp = jax.numpy
    v = _values(X, key, seed=1)
    w_get = _values(X, key, seed=2)
    w_upd = np.random.default_rng(3).normal(size=X.shape)

    def get(x, xp):     # NaN fills would make the loss NaN: fill with a number
        out = (tnp.at(x) if xp is tnp else x.at)[key].get(mode=mode, fill_value=0.25)
        return xp.sum(xp.sin(out) * w_get)

    def update(method):
        def f(x, v, xp):
            out = getattr((tnp.at(x) if xp is tnp else x.at)[key], method)(v, mode=mode)
            return xp.sum(xp.sin(out) * w_upd)
        return f

    got = tnp.grad(lambda x: get(x, tnp))(X)
    np.testing.assert_allclose(got, jax.grad(lambda x: get(x, jnp))(X), atol=1e-12)
    np.testing.assert_allclose(got, numeric_grad(lambda x: float(get(x, tnp)), X),
                               atol=1e-6)
    for method in ("set", "add"):
        f = update(method)
        got_x, got_v = tnp.grad(lambda x, v: f(x, v, tnp), argnums=(0, 1))(X, v)
        want_x, want_v = jax.grad(lambda x, v: f(x, v, jnp), argnums=(0, 1))(X, v)
        np.testing.assert_allclose(got_x, want_x, atol=1e-12, err_msg=method)
        np.testing.assert_allclose(got_v, want_v, atol=1e-12, err_msg=method)
        np.testing.assert_allclose(got_v, numeric_grad(lambda v: float(f(X, v, tnp)), v),
                                   atol=1e-6, err_msg=method)


def test_gradient_positions_dropped_clamped_and_filled():
    x = np.arange(5.0)
    i = np.array([1, 7, -6, 3])
    ones = np.ones(4)
    # a dropped update gets zero gradient; a clamped one reaches its slot's value
    g = tnp.grad(lambda v: tnp.sum(tnp.at(x)[i].add(v, mode="drop") * x))(ones)
    np.testing.assert_array_equal(g, [1.0, 0.0, 0.0, 3.0])
    g = tnp.grad(lambda v: tnp.sum(tnp.at(x)[i].add(v, mode="clip") * x))(ones)
    np.testing.assert_array_equal(g, [1.0, 4.0, 0.0, 3.0])
    # a filled get gives x no gradient there; a clamped one sends it to the clamped slot
    g = tnp.grad(lambda x: tnp.sum(tnp.at(x)[i].get(mode="fill", fill_value=0.0)))(x)
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0, 1.0, 0.0])
    g = tnp.grad(lambda x: tnp.sum(tnp.at(x)[i].get(mode="clip")))(x)
    np.testing.assert_array_equal(g, [1.0, 1.0, 0.0, 1.0, 1.0])
    # a fill value that is differentiated gets the sum over the filled positions
    g = tnp.grad(lambda f: tnp.sum(tnp.at(x)[i].get(mode="fill", fill_value=f) * 2.0))(0.5)
    assert float(g) == 4.0


def test_eager_tensors_backward():
    x = tnp.tensor(X, requires_grad=True)
    v = tnp.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    i = tnp.tensor(np.array([0, 3, -1]))                     # a tensor index: data
    out = x.at[i, 2].add(v, mode="drop") + x.at[i, 9].get(mode="clip")[:, None]
    tnp.sum(out * out).backward()
    xd, vd = X.copy(), np.array([1.0, 2.0, 3.0])
    want = xd.copy()
    want[[0, 2], 2] += vd[[0, 2]]
    clipped = xd[[0, 2, 2], 3]
    np.testing.assert_allclose(out.data, np.concatenate(
        [want[:1] + clipped[0], want[1:2] + clipped[1], want[2:] + clipped[2]]))
    np.testing.assert_allclose(v.grad, [2 * out.data[0, 2], 0.0, 2 * out.data[2, 2]])
    row_sums = 2 * out.data.sum(axis=1)         # the clipped get's gradient, per read row
    want_x = 2 * out.data
    want_x[0, 3] += row_sums[0]
    want_x[2, 3] += row_sums[1] + row_sums[2]
    np.testing.assert_allclose(x.grad, want_x)


# --- jit and vmap ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_jit_with_traced_indices(mode):
    jnp = _jax().numpy
    calls = []

    def f(x, i, j, v):
        calls.append(1)
        return (tnp.at(x)[i, j].get(mode=mode),
                tnp.at(x)[i, j].set(v, mode=mode),
                tnp.at(x)[:, j].add(1.0, mode=mode))

    jf = tnp.jit(f)
    for i, j in ((np.array([0, 5, -1]), np.array([1, 1, -7])),
                 (np.array([2, -4, 9]), np.array([3, 0, 0]))):
        v = np.array([10.0, 20.0, 30.0])
        for got, want in zip(jf(X, i, j, v), (jnp.asarray(X).at[i, j].get(mode=mode),
                                              jnp.asarray(X).at[i, j].set(v, mode=mode),
                                              jnp.asarray(X).at[:, j].add(1.0, mode=mode))):
            np.testing.assert_array_equal(got, want)
    assert len(calls) == 1                      # new index values do not trace again
    grad = tnp.jit(tnp.grad(lambda v, i: tnp.sum(tnp.at(X)[i].set(v, mode=mode) ** 2)))
    rows = np.ones((3, 4))
    np.testing.assert_array_equal(grad(rows, np.array([0, 3, 2])),
                                  2 * np.array([1.0, 0.0, 1.0])[:, None] * rows)


def test_vmap_over_indices_and_values():
    jnp = _jax().numpy
    jax = _jax()
    i = np.array([0, 5, -1, -5, 2])
    v = np.arange(5.0) + 1.0
    x = np.arange(4.0)
    for mode in MODES:
        got = tnp.vmap(lambda i: tnp.at(x)[i].get(mode=mode))(i)
        np.testing.assert_array_equal(got, jax.vmap(lambda i: jnp.asarray(x).at[i].get(
            mode=mode))(i))
        got = tnp.vmap(lambda i, v: tnp.at(x)[i].add(v, mode=mode))(i, v)
        np.testing.assert_array_equal(got, jax.vmap(lambda i, v: jnp.asarray(x).at[i].add(
            v, mode=mode))(i, v))
        xs = np.arange(20.0).reshape(5, 4)
        got = tnp.vmap(lambda x: tnp.at(x)[np.array([3, 4])].set(-1.0, mode=mode))(xs)
        np.testing.assert_array_equal(got, jax.vmap(lambda x: x.at[np.array([3, 4])].set(
            -1.0, mode=mode))(xs))
        got = tnp.vmap(lambda x, i: tnp.at(x)[i].get(mode=mode))(xs, i)     # both batched
        np.testing.assert_array_equal(got, jax.vmap(lambda x, i: x.at[i].get(mode=mode))(xs, i))
        got = tnp.vmap(tnp.grad(lambda x, i: tnp.sum(tnp.at(x)[i].get(mode=mode) ** 2)))(xs, i)
        np.testing.assert_array_equal(got, jax.vmap(jax.grad(lambda x, i: jnp.sum(
            x.at[i].get(mode=mode, fill_value=0.0) ** 2)))(xs, i))


# --- fresh results --------------------------------------------------------------------------


def test_results_are_fresh():
    x, v = X.copy(), np.ones(4)
    for mode in MODES:
        for result in (tnp.at(x)[1].get(mode=mode), tnp.at(x)[1, :].get(mode=mode),
                       tnp.at(x)[5].get(mode="clip"), tnp.at(x)[:].get(mode=mode)):
            assert not np.may_share_memory(result, x)
        for method in ("set", "add"):
            result = getattr(tnp.at(x)[1], method)(v, mode=mode)
            assert not np.may_share_memory(result, x) and not np.may_share_memory(result, v)
            result = getattr(tnp.at(x)[9], method)(v, mode=mode)
            assert not np.may_share_memory(result, x) and not np.may_share_memory(result, v)
    t = tnp.tensor(x)
    for result in (t.at[1].get(mode="clip"), t.at[9].set(v, mode="drop")):
        assert not np.may_share_memory(result.data, t.data)
    np.testing.assert_array_equal(x, X)


def test_unsigned_indices_above_the_largest_intp_are_out_of_range():
    # (cast to intp they would wrap to negative, in-range indices; JAX 0.10 reads some so)
    x = np.arange(5.0)
    i = np.array([2**64 - 1, 3, 2**63], dtype=np.uint64)
    np.testing.assert_array_equal(tnp.at(x)[i].get(mode="fill"), [np.nan, 3.0, np.nan])
    np.testing.assert_array_equal(tnp.at(x)[i].get(mode="clip"), [4.0, 3.0, 4.0])
    add = tnp.jit(lambda i: tnp.at(x)[i].add(1.0, mode="drop"))
    np.testing.assert_array_equal(add(i), [0.0, 1.0, 2.0, 4.0, 4.0])


def test_many_indexed_axes_stay_small():
    # out-of-range flags are or-ed into one index (no table of 2 or n + 1 slots per axis,
    # which for 20 axes of 2 would be 3**20 positions)
    shape = (2,) * 20
    key = tuple(np.array([0, 1, 2]) for _ in range(20))
    np.testing.assert_array_equal(tnp.at(np.ones(shape))[key].get(mode="fill"),
                                  [1.0, 1.0, np.nan])
    got = tnp.at(np.zeros(shape))[key].add(np.array([1.0, 2.0, 3.0]), mode="drop")
    assert got[(0,) * 20] == 1.0 and got[(1,) * 20] == 2.0 and got.sum() == 3.0


def test_forward_mode():
    x = np.arange(5.0)
    i = np.array([1, 7, -6, 3])
    _, tangent = tnp.jvp(lambda x: tnp.at(x)[i].get(mode="fill", fill_value=0.0), (x,),
                         (np.arange(5.0) + 1.0,))
    np.testing.assert_array_equal(tangent, [2.0, 0.0, 0.0, 4.0])
    _, tangent = tnp.jvp(lambda v: tnp.at(x)[i].set(v, mode="clip"), (np.zeros(4),),
                         (np.array([1.0, 2.0, 3.0, 4.0]),))
    np.testing.assert_array_equal(tangent, [3.0, 1.0, 0.0, 4.0, 2.0])


@pytest.mark.parametrize("mode", (None,) + MODES)
def test_a_whole_array_get_of_a_tensor_is_a_new_tensor(mode):
    # (indexing a tensor with `:` or `...` gives the tensor itself back; JAX's get is new)
    t = tnp.tensor(X, requires_grad=True)
    for key in (slice(None), Ellipsis, ()):
        out = t.at[key].get(mode=mode)
        assert out is not t and not np.may_share_memory(out.data, t.data)
        tnp.sum(out * 2.0).backward()
        np.testing.assert_array_equal(t.grad, np.full(X.shape, 2.0))
        t.grad = None


@pytest.mark.parametrize("method", ["get", "set", "add", "multiply", "min", "apply"])
def test_errors_of_the_key_name_the_method(method):
    x = np.arange(5.0)
    args = () if method == "get" else (np.sin,) if method == "apply" else (1.0,)
    for key, error, message in ((np.array([1.0]), TensorIndexError, "only integers"),
                                ((0, 0), TensorIndexError, "too many indices"),
                                ("a", TensorTypeError, "expected an array")):
        for mode in (None, "clip"):
            with pytest.raises(error, match=rf"^x\.at\[\.\.\.\]\.{method}: {message}"):
                getattr(tnp.at(x)[key], method)(*args, mode=mode)
    with pytest.raises(IndexError, match=rf"^x\.at\[\.\.\.\]\.{method}: index 9 is out of "):
        getattr(tnp.at(x)[np.array([1, 9])], method)(*args)
