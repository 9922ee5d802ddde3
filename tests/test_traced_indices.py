"""Integer index arrays are data under every transform: operands of gather and scatter ops,
checked when the program runs, never parameters baked into a trace (issue 21, item 1).

Each case is run eagerly on NumPy (the oracle), then under grad, jit, jit(grad), vmap and
the eager Tensor, with JAX as a second oracle where it is installed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import primitives.tensor as tnp
from primitives.tensor import ConcretizationError
from tidu import TiduError
from tensor_helpers import numeric_grad

RNG = np.random.default_rng(0)
W = RNG.normal(size=(4, 3))
X = RNG.normal(size=(5, 4))
Y = np.array([0, 2, 1, 1, 0])


def cross_entropy(w, x, y):
    logits = x @ w
    return tnp.mean(tnp.logsumexp(logits, axis=1) - logits[tnp.arange(len(y)), y])


def cross_entropy_numpy(w, x, y):
    logits = x @ w
    m = logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(axis=1)) + m[:, 0]
    return np.mean(lse - logits[np.arange(len(y)), y])


def cross_entropy_grad(w, x, y):
    """The gradient in closed form: x^T (softmax - onehot) / n."""
    logits = x @ w
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    return x.T @ p / len(y)


def test_cross_entropy_with_integer_labels_under_every_transform():
    expected = cross_entropy_grad(W, X, Y)
    np.testing.assert_allclose(tnp.grad(cross_entropy)(W, X, Y), expected, rtol=1e-12)
    step = tnp.jit(tnp.grad(cross_entropy))
    np.testing.assert_allclose(step(W, X, Y), expected, rtol=1e-12)
    value, g = tnp.jit(tnp.value_and_grad(cross_entropy))(W, X, Y)
    assert float(value) == pytest.approx(cross_entropy_numpy(W, X, Y), rel=1e-12)
    np.testing.assert_allclose(g, expected, rtol=1e-12)


def test_per_example_label_gradients_compose_and_come_back_fresh():
    # vmap over jit(grad) and jit over vmap(grad) agree with a loop of the NumPy gradient;
    # a result written in place changes neither the next call's result nor an argument
    batch_x, batch_y = X[:4].reshape(2, 2, 4), Y[:4].reshape(2, 2)
    expected = np.stack([cross_entropy_grad(W, bx, by) for bx, by in zip(batch_x, batch_y)])
    inner = tnp.grad(cross_entropy)
    for f in (tnp.vmap(tnp.jit(inner), in_axes=(None, 0, 0)),
              tnp.jit(tnp.vmap(inner, in_axes=(None, 0, 0)))):
        got = f(W, batch_x, batch_y)
        np.testing.assert_allclose(got, expected, rtol=1e-12)
        got[...] = 7.0
        np.testing.assert_allclose(f(W, batch_x, batch_y), expected, rtol=1e-12)
    np.testing.assert_array_equal(batch_y, Y[:4].reshape(2, 2))


def test_new_labels_never_retrace():
    calls = []

    def loss(w, x, y):
        calls.append(1)
        return cross_entropy(w, x, y)

    step = tnp.jit(tnp.grad(loss))
    for seed in range(5):
        y = np.random.default_rng(seed).integers(0, 3, size=5)
        np.testing.assert_allclose(step(W, X, y), cross_entropy_grad(W, X, y), rtol=1e-12)
    assert len(calls) == 1


def test_out_of_range_index_raises_index_error_at_run_time_under_jit():
    f = tnp.jit(lambda v, i: v[i])
    v = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(f(v, np.array([-1, 0])), [3.0, 1.0])
    for bad in (np.array([3]), np.array([0, -4])):
        with pytest.raises(IndexError, match="out of bounds for axis 0 with size 3") as info:
            f(v, bad)
        assert isinstance(info.value, TiduError)
    np.testing.assert_array_equal(f(v, np.array([2])), [3.0])      # still usable


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.int64, np.uint64])
def test_checked_indices_are_a_fresh_intp_array_in_range(dtype):
    from primitives.tensor.ops.indexing import checked_indices
    index = np.array([0, 4, 2, 4], dtype)
    checked = checked_indices(index, 5, 0)              # in range: the quick path
    assert checked.dtype == np.intp and checked.tolist() == [0, 4, 2, 4]
    assert not np.shares_memory(checked, index)
    if np.dtype(dtype).kind == "i":
        assert checked_indices(np.array([-5, 4, -1], dtype), 5, 0).tolist() == [0, 4, 4]
    assert checked_indices(np.array([], dtype), 5, 0).shape == (0,)
    for bad in ([5], [0, 7]):
        with pytest.raises(IndexError, match=f"index {bad[-1]} is out of bounds for axis 2"):
            checked_indices(np.array(bad, dtype), 5, 2)
    if np.dtype(dtype).kind == "i":
        with pytest.raises(IndexError, match="index -6 is out of bounds"):
            checked_indices(np.array([1, -6], dtype), 5, 0)


def test_out_of_range_names_the_axis():
    f = tnp.jit(lambda m, i, j: m[i, j])
    m = np.arange(6.0).reshape(2, 3)
    with pytest.raises(IndexError, match="axis 1 with size 3"):
        f(m, np.array([0]), np.array([3]))
    with pytest.raises(IndexError, match="axis 0 with size 2"):
        f(m, np.array([2]), np.array([0]))


@pytest.mark.parametrize("transform", ["eager", "grad", "jit", "jit_grad", "tensor"])
@pytest.mark.parametrize("case", [
    ("x[i]", lambda x, i, j: x[i]),
    ("x[i, j]", lambda x, i, j: x[i, j]),
    ("x[:, j]", lambda x, i, j: x[:, j]),
    ("x[i, :, None]", lambda x, i, j: x[i, :, None]),
    ("x[i][:, j]", lambda x, i, j: x[i][:, j]),
    ("x[arange, j]", lambda x, i, j: x[tnp.arange(len(j)), j]),
    ("x[i, 1]", lambda x, i, j: x[i, 1]),
    ("take", lambda x, i, j: tnp.take(x, i, axis=0)),
    ("take flat", lambda x, i, j: tnp.take(x, j)),
    ("take_along_axis", lambda x, i, j: tnp.take_along_axis(x, tnp.reshape(j, (1, -1)) +
                                                            tnp.zeros((3, 1), dtype=int),
                                                            axis=1)),
], ids=lambda c: c[0] if isinstance(c, tuple) else c)
def test_indexing_forms(case, transform):
    name, index = case
    x = RNG.normal(size=(3, 4))
    i, j = np.array([2, -1, 0]), np.array([1, 3, 3])

    def numpy_value(x):
        return _numpy_index(name, x, i, j)

    expected_value = numpy_value(x)
    weights = RNG.normal(size=expected_value.shape)
    expected_grad = numeric_grad(lambda v: np.sum(numpy_value(v) * weights), x)

    def loss(x, i, j):
        return tnp.sum(index(x, i, j) * weights)

    if transform == "eager":
        np.testing.assert_allclose(index(x, i, j), expected_value)
    elif transform == "grad":
        np.testing.assert_allclose(tnp.grad(loss)(x, i, j), expected_grad, atol=1e-8)
    elif transform == "jit":
        np.testing.assert_allclose(tnp.jit(index)(x, i, j), expected_value)
    elif transform == "jit_grad":
        np.testing.assert_allclose(tnp.jit(tnp.grad(loss))(x, i, j), expected_grad, atol=1e-8)
    else:
        t = tnp.tensor(x, requires_grad=True)
        g = loss(t, tnp.tensor(i), tnp.tensor(j)).backward().grad(t)
        np.testing.assert_allclose(g, expected_grad, atol=1e-8)


def _numpy_index(name, x, i, j):
    return {
        "x[i]": lambda: x[i],
        "x[i, j]": lambda: x[i, j],
        "x[:, j]": lambda: x[:, j],
        "x[i, :, None]": lambda: x[i, :, None],
        "x[i][:, j]": lambda: x[i][:, j],
        "x[arange, j]": lambda: x[np.arange(len(j)), j],
        "x[i, 1]": lambda: x[i, 1],
        "take": lambda: np.take(x, i, axis=0),
        "take flat": lambda: np.take(x, j),
        "take_along_axis": lambda: np.take_along_axis(x, j.reshape(1, -1) + np.zeros((3, 1),
                                                                                    dtype=int),
                                                      axis=1),
    }[name]()


def test_index_by_argmax_under_jit_grad_and_hessian():
    x = np.array([0.3, -0.7, 1.1])
    f = lambda v: tnp.sum(v[tnp.argmax(v)] * v)           # noqa: E731
    expected = x[2] + np.array([0.0, 0.0, x.sum()])
    np.testing.assert_allclose(tnp.grad(f)(x), expected)
    np.testing.assert_allclose(tnp.jit(tnp.grad(f))(x), expected)
    hessian = np.array([[0, 0, 1], [0, 0, 1], [1, 1, 2]], dtype=float)
    np.testing.assert_allclose(tnp.hessian(f)(x), hessian)
    np.testing.assert_allclose(tnp.jit(tnp.hessian(f))(x), hessian)
    _, tangent = tnp.jvp(f, (x,), (np.ones(3),))
    assert float(tangent) == pytest.approx(expected.sum())


def test_put_along_axis_with_traced_indices_last_write_wins():
    a = RNG.normal(size=(3, 4))
    values = RNG.normal(size=(3, 2))
    indices = np.array([[0, 3], [1, 1], [-1, 2]])         # row 1 writes position 1 twice
    reference = a.copy()
    np.put_along_axis(reference, indices, values, 1)

    def put(a, i, v):
        return tnp.put_along_axis(a, i, v, 1, inplace=False)

    np.testing.assert_array_equal(tnp.jit(put)(a, indices, values), reference)
    loss = lambda a, v, i: tnp.sum(put(a, i, v) ** 2)       # noqa: E731
    eager = tnp.grad(lambda a, v: loss(a, v, indices), argnums=(0, 1))(a, values)
    traced = tnp.jit(tnp.grad(loss, argnums=(0, 1)))(a, values, indices)
    for e, t in zip(eager, traced):
        np.testing.assert_allclose(t, e)
    assert traced[1][1, 0] == 0.0                           # overwritten: no derivative
    assert traced[1][1, 1] == 2 * values[1, 1]


def test_vmap_with_batched_indices_operand_or_both():
    x = RNG.normal(size=(5, 4))
    y = np.array([0, 3, 1, 1, 2])
    np.testing.assert_array_equal(tnp.vmap(lambda r, i: r[i])(x, y), x[np.arange(5), y])
    np.testing.assert_array_equal(tnp.vmap(lambda i: tnp.take(x[0], i))(y), x[0][y])  # indices
    np.testing.assert_array_equal(tnp.vmap(lambda r: r[y[:2]])(x), x[:, y[:2]])   # operand only
    np.testing.assert_array_equal(tnp.vmap(lambda r, i: tnp.take(r, i), in_axes=(None, 0))(
        x[0], y), x[0][y])
    per_example = tnp.vmap(tnp.grad(lambda r, i: r[i] ** 2))(x, y)
    expected = np.zeros_like(x)
    expected[np.arange(5), y] = 2 * x[np.arange(5), y]
    np.testing.assert_array_equal(per_example, expected)
    with pytest.raises(IndexError, match="out of bounds"):
        tnp.vmap(lambda r, i: r[i])(x, np.array([0, 4, 1, 1, 2]) + 1)


def test_vmap_matches_jax():
    jax = pytest.importorskip("jax", reason="JAX is the oracle for vmap of traced indices")
    jnp = pytest.importorskip("jax.numpy")
    x = RNG.normal(size=(5, 4, 3))
    i = np.array([[0, 2], [3, 1], [1, 1], [0, 0], [2, 3]])

    def f(tn, r, k):
        return tn.sum(tn.sin(r[k, 1:]) * r[k[::-1], :2].sum())

    ours = tnp.vmap(tnp.grad(lambda r, k: f(tnp, r, k)))(x, i)
    with jax.enable_x64(True):
        theirs = jax.vmap(jax.grad(lambda r, k: f(jnp, r, k)))(x, i)
    np.testing.assert_allclose(ours, np.asarray(theirs), rtol=1e-12, atol=1e-12)


def test_boolean_mask_in_eager_and_grad_clear_error_under_jit_and_vmap():
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_array_equal(tnp.grad(lambda v: tnp.sum(v[v > 0] ** 2))(x), [1.0, 0.0, 4.0])
    t = tnp.tensor(x, requires_grad=True)
    np.testing.assert_array_equal(tnp.sum(t[t > 0] ** 2).backward().grad(t), [1.0, 0.0, 4.0])
    for transform in (tnp.jit, tnp.vmap):
        with pytest.raises(ConcretizationError, match="boolean mask.*tnp.where"):
            transform(lambda v: tnp.sum(v[v > 0]))(x if transform is tnp.jit else x[None])
    # a mask known in advance still works under jit
    mask = np.array([True, False, True])
    np.testing.assert_array_equal(tnp.jit(lambda v: v[mask])(x), x[mask])


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_advanced_indices_match_numpy_and_jit(data):
    """Random shapes and integer indices (negative ones too), one or two index arrays among
    slices: the value equals NumPy's eagerly and under jit; the gradient passes the
    dot-product test against the forward map."""
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    x = RNG.normal(size=shape)
    key, index_arrays = [], []
    for size in shape:
        kind = data.draw(st.sampled_from(["slice", "array", "int"]))
        if kind == "slice":
            key.append(slice(None))
        elif kind == "int":
            key.append(data.draw(st.integers(-size, size - 1)))
        else:
            index_arrays.append(np.array(data.draw(st.lists(st.integers(-size, size - 1),
                                                            min_size=2, max_size=2))))
            key.append(index_arrays[-1])
    expected = x[tuple(key)]
    positions = [n for n, k in enumerate(key) if isinstance(k, np.ndarray)]

    def f(x, *arrays):
        k = list(key)
        for n, a in zip(positions, arrays):
            k[n] = a
        return x[tuple(k)]

    arrays = [key[n] for n in positions]
    np.testing.assert_array_equal(f(x, *arrays), expected)
    np.testing.assert_array_equal(tnp.jit(f)(x, *arrays), expected)
    ct = RNG.normal(size=np.shape(expected))
    t = RNG.normal(size=x.shape)
    _, vjp_fn = tnp.vjp(lambda v: f(v, *arrays), x)
    (back,) = vjp_fn(ct)
    forward = tnp.jvp(lambda v: f(v, *arrays), (x,), (t,))[1]
    assert np.sum(ct * forward) == pytest.approx(np.sum(back * t), rel=1e-12, abs=1e-12)


def test_boolean_algebra_on_traced_and_tensor_booleans():
    x = np.array([-2.0, 0.5, 3.0])
    a, b = x > 0, x < 1
    for name, op, np_op in [("and", lambda p, q: p & q, np.logical_and),
                            ("or", lambda p, q: p | q, np.logical_or),
                            ("xor", lambda p, q: p ^ q, np.logical_xor)]:
        fn = getattr(tnp, f"logical_{name}")
        expected = np_op(a, b)
        np.testing.assert_array_equal(fn(a, b), expected)
        np.testing.assert_array_equal(
            tnp.jit(lambda v: op(v > 0, v < 1))(x), expected)
        np.testing.assert_array_equal(
            tnp.vmap(lambda v: fn(v > 0, v < 1))(x), expected)
        t = tnp.tensor(x, requires_grad=True)
        np.testing.assert_array_equal(op(t > 0, t < 1).data, expected)
    np.testing.assert_array_equal(tnp.jit(lambda v: ~(v > 0))(x), ~a)
    np.testing.assert_array_equal(tnp.jit(lambda v: tnp.logical_not(v > 0))(x), ~a)
    # masks combine into a where: the gradient flows only through the selected entries
    g = tnp.jit(tnp.grad(lambda v: tnp.sum(tnp.where((v > 0) & (v < 1), v * v, 0.0))))(x)
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0])
    # integers: bitwise, as NumPy
    n = np.array([3, 5, 12])
    np.testing.assert_array_equal(tnp.jit(lambda k: (k & 6) | (k ^ 1))(n), (n & 6) | (n ^ 1))
    np.testing.assert_array_equal(tnp.invert(n), ~n)
    with pytest.raises(TiduError, match="bitwise_and"):
        tnp.bitwise_and(x, x)                                # floats: NumPy has no loop
