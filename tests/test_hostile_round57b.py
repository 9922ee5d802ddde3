"""Hostile round 57b: the NumPy 2 and Array API names users porting NumPy, JAX or Array API
code reach for, called as ``tnp.f`` and as ``np.f`` on tensors and traced values.

Each test names what was wrong in a one-line comment. Derivatives are checked against JAX
(``jax.numpy`` has every function here) and central finite differences.
"""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import ConcretizationError
from tidu import TiduError

try:
    import jax
    import jax.numpy as jnp
except ImportError:                      # the oracle of some tests: they skip without it
    jax = jnp = None
requires_jax = pytest.mark.skipif(jax is None, reason="JAX is the oracle here; not installed")

RNG = np.random.default_rng(57)


def normal(*shape):
    return RNG.standard_normal(shape)


def jax_grad(f, *args, argnums=0):
    with jax.enable_x64(True):
        out = jax.grad(f, argnums=argnums)(*[jnp.asarray(a) for a in args])
    return tuple(map(np.asarray, out)) if isinstance(out, tuple) else np.asarray(out)


def weighted(out, weights):
    """A scalar loss of ``out`` (an array or a tuple of arrays) with fixed weights."""
    leaves = out if isinstance(out, tuple) else (out,)
    return sum((leaf * w).sum() for leaf, w in zip(leaves, weights))


def check_everywhere(name, args, kwargs=None, batched=0, jax_name=None):
    """``tnp.name``: NumPy's values and dtypes on arrays, under ``jit`` and ``vmap`` (over
    axis 0 of ``args[batched]``), ``np.name`` on a tensor requiring grad gives a tensor with
    history, and ``grad`` of a weighted sum equals JAX's (float64 arguments)."""
    kwargs = kwargs or {}
    fn = getattr(tnp, name) if "." not in name else getattr(tnp.linalg, name.split(".")[1])
    np_fn = getattr(np, name) if "." not in name else getattr(np.linalg, name.split(".")[1])
    jax_name = jax_name or name
    jnp_fn = getattr(jnp, jax_name) if "." not in jax_name else getattr(
        jnp.linalg, jax_name.split(".")[1])
    want = np_fn(*args, **kwargs)
    for got in (fn(*args, **kwargs), tnp.jit(lambda *a: fn(*a, **kwargs))(*args)):
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            assert g.dtype == w.dtype and g.shape == w.shape, name
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    stacked = list(args)
    stacked[batched] = np.stack([args[batched], 2 * args[batched]])
    in_axes = tuple(0 if i == batched else None for i in range(len(args)))
    got = tnp.vmap(lambda *a: fn(*a, **kwargs), in_axes=in_axes)(*stacked)
    for k in range(2):
        row = list(args)
        row[batched] = stacked[batched][k]
        want_k = np_fn(*row, **kwargs)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want_k if isinstance(want_k, tuple) else (want_k,)):
            np.testing.assert_allclose(g[k], w, rtol=1e-12, atol=1e-12)
    weights = [RNG.standard_normal(np.shape(w)) for w in
               (want if isinstance(want, tuple) else (want,))]
    argnums = tuple(range(len(args)))
    got = tnp.grad(lambda *a: weighted(fn(*a, **kwargs), weights), argnums=argnums)(*args)
    expected = jax_grad(lambda *a: weighted(jnp_fn(*a, **kwargs), weights), *args,
                        argnums=argnums)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)
    tensors = [tnp.tensor(a, requires_grad=True) for a in args]
    out = np_fn(*tensors, **kwargs)
    grads = weighted(out, weights).backward()
    for t, e in zip(tensors, expected):
        g = grads.grad(t)                      # None: no path from t (a zero derivative)
        np.testing.assert_allclose(np.zeros_like(e) if g is None else g, e, rtol=1e-10,
                                   atol=1e-12)


# --- the Array API's names -----------------------------------------------------------------


# tnp had no concat, permute_dims, matrix_transpose, vecdot, unstack, cumulative_sum,
# cumulative_prod, matvec, vecmat (AttributeError; np.<name> on a tensor: "tnp has no ...")
@requires_jax
@pytest.mark.parametrize("name, args, kwargs", [
    ("concat", ([normal(2, 3), normal(2, 1)],), {"axis": 1}),
    ("permute_dims", (normal(2, 3, 4),), {"axes": (2, 0, 1)}),
    ("matrix_transpose", (normal(2, 3, 4),), {}),
    ("vecdot", (normal(2, 1, 3), normal(4, 3)), {}),
    ("vecdot", (normal(3, 2), normal(3, 1)), {"axis": 0}),
    ("unstack", (normal(2, 3, 4),), {"axis": 1}),
    ("cumulative_sum", (normal(2, 3),), {"axis": 1, "include_initial": True}),
    ("cumulative_prod", (normal(2, 3),), {"axis": 0, "include_initial": True}),
    ("cumulative_sum", (normal(4),), {}),
    ("matvec", (normal(2, 1, 3, 4), normal(5, 4)), {}),
    ("vecmat", (normal(5, 1, 3), normal(2, 3, 4)), {}),
])
def test_array_api_names(name, args, kwargs):
    if name == "concat":                           # a list argument: differentiate its items
        a, b = args[0]
        want = np.concat([a, b], **kwargs)
        np.testing.assert_array_equal(tnp.concat([a, b], **kwargs), want)
        weights = normal(*want.shape)
        got = tnp.grad(lambda u, v: tnp.sum(tnp.concat([u, v], **kwargs) * weights),
                       argnums=(0, 1))(a, b)
        np.testing.assert_allclose(np.concatenate(got, axis=1), weights)
        np.testing.assert_array_equal(tnp.vmap(lambda u: tnp.concat([u, b], **kwargs))(
            np.stack([a, a])), np.stack([want, want]))
        return
    check_everywhere(name, args, kwargs)


# np.linalg's Array API functions (outer, diagonal, trace, cross, matmul, tensordot, vecdot,
# matrix_transpose) were missing from tnp.linalg; np.linalg.matmul on a tensor was refused
# with "tnp has no linalg.matmul" though tnp.linalg.matmul existed
@requires_jax
@pytest.mark.parametrize("name, args, kwargs", [
    ("linalg.outer", (normal(3), normal(4)), {}),
    ("linalg.diagonal", (normal(2, 3, 4),), {"offset": -1}),
    ("linalg.trace", (normal(2, 3, 4),), {"offset": 1}),
    ("linalg.cross", (normal(3, 2), normal(3, 1)), {"axis": 0}),
    ("linalg.matmul", (normal(2, 3, 4), normal(4)), {}),
    ("linalg.tensordot", (normal(2, 3), normal(3, 2)), {"axes": 1}),
    ("linalg.vecdot", (normal(2, 3), normal(3)), {}),
    ("linalg.matrix_transpose", (normal(2, 3, 4),), {}),
])
def test_linalg_array_api_names(name, args, kwargs):
    check_everywhere(name, args, kwargs)


def test_array_api_names_refuse_what_numpy_refuses():
    # each refusal is a TiduError naming the function, where NumPy raises ValueError
    for call, match in [
        (lambda: tnp.matrix_transpose(np.ones(3)), "matrix_transpose"),
        (lambda: tnp.vecdot(np.ones(3), np.ones(4)), "vecdot"),
        (lambda: tnp.vecdot(np.ones(3), 2.0), "vecdot"),
        (lambda: tnp.matvec(np.ones((2, 3)), np.ones(2)), "matvec"),
        (lambda: tnp.vecmat(np.ones(3), np.ones(3)), "vecmat"),
        (lambda: tnp.unstack(np.float64(1.0)), "unstack"),
        (lambda: tnp.cumulative_sum(np.ones((2, 3))), "cumulative_sum: .*axis"),
        (lambda: tnp.linalg.outer(np.ones((2, 2)), np.ones(2)), "linalg.outer"),
        (lambda: tnp.linalg.cross(np.ones(2), np.ones(2)), "linalg.cross"),
        (lambda: tnp.linalg.trace(np.ones(3)), "linalg.trace"),
    ]:
        with pytest.raises(TiduError, match=match):
            call()
    # the complex conjugation of vecdot and vecmat is NumPy's (antilinear in x1)
    z, w = normal(3) + 1j * normal(3), normal(3) - 1j * normal(3)
    np.testing.assert_allclose(tnp.vecdot(z, w), np.vecdot(z, w))
    m = normal(3, 2) + 1j * normal(3, 2)
    np.testing.assert_allclose(tnp.vecmat(z, m), np.vecmat(z, m))
    # dtypes: NumPy's for integers and float32
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert tnp.vecdot(x, x).dtype == np.vecdot(x, x).dtype == np.int32
    assert tnp.cumulative_sum(np.arange(3, dtype=np.int8)).dtype == np.int64


# --- elementwise ---------------------------------------------------------------------------


# np.heaviside, np.divmod, np.modf on a tensor were refused ("tnp has no heaviside"), tnp had
# none of them
@requires_jax
@pytest.mark.parametrize("name, args", [
    ("heaviside", (np.array([[-1.5, 0.0, 2.0], [0.0, 0.3, -0.2]]), normal(3))),
    ("divmod", (RNG.uniform(-4, 4, (2, 3)), np.array([1.3, -0.7, 2.1]))),
    ("modf", (RNG.uniform(-4, 4, (2, 3)),)),
])
def test_elementwise_names(name, args):
    check_everywhere(name, args)


# np.ldexp on a tensor was refused and tnp had no ldexp
@requires_jax
def test_ldexp():
    x, k = normal(2, 3), np.array([[3, -2, 0], [1, 1100, -1]])
    with np.errstate(over="ignore"):
        want = np.ldexp(x, k)
        for got in (tnp.ldexp(x, k), tnp.jit(tnp.ldexp)(x, k),
                    tnp.vmap(tnp.ldexp)(x, k)):
            np.testing.assert_array_equal(got, want)
    tiny = np.array([1e-300])                        # 2**1100 alone overflows; the result not
    np.testing.assert_allclose(tnp.ldexp(tiny, np.array([1100])), np.ldexp(tiny, 1100))
    assert tnp.ldexp(np.float32([1.5]), np.int64(3)).dtype == np.float32
    assert tnp.ldexp(np.arange(3, dtype=np.int8), 2).dtype == np.ldexp(
        np.arange(3, dtype=np.int8), 2).dtype
    k = np.array([3, -2, 0])
    g = tnp.grad(lambda v: tnp.sum(tnp.ldexp(v, k) ** 2))(x[0])
    np.testing.assert_allclose(g, jax_grad(lambda v: jnp.sum(jnp.ldexp(v, k) ** 2), x[0]))
    t = tnp.tensor(x[0], requires_grad=True)
    np.testing.assert_allclose(tnp.sum(np.ldexp(t, k)).backward().grad(t), 2.0 ** k)
    with pytest.raises(TiduError, match="ldexp: the exponents"):
        tnp.ldexp(x, 2.0)


def test_heaviside_nan_and_modf_signs_are_numpys():
    # NaN in x1 is NaN (not x2); modf's zero fractions keep x's sign; no RuntimeWarning
    x = np.array([np.nan, -0.0, 0.0, -3.0, np.inf, -np.inf])
    np.testing.assert_array_equal(tnp.heaviside(x, 0.5), np.heaviside(x, 0.5))
    with np.errstate(all="raise"):
        for got, want in zip(tnp.modf(x), np.modf(x)):
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    g = tnp.grad(lambda v: tnp.sum(tnp.modf(v)[0] * 3.0))(np.array([0.5, -2.25]))
    np.testing.assert_array_equal(g, [3.0, 3.0])


# --- building and editing arrays -----------------------------------------------------------


# np.diagflat, np.vander, np.insert, np.delete on a tensor were refused and tnp had none
@requires_jax
@pytest.mark.parametrize("name, args, kwargs", [
    ("diagflat", (normal(2, 2),), {"k": -1}),
    ("vander", (np.array([0.5, 1.5, -2.0]),), {"N": 4, "increasing": True}),
    ("vander", (normal(3),), {}),
    ("insert", (normal(2, 4), [1, 3, 3], normal(3)), {"axis": 1}),
    ("insert", (normal(2, 3), 2, normal(2)), {}),
    ("delete", (normal(2, 4), np.array([0, -1])), {"axis": 1}),
    ("delete", (normal(5),), {"obj": slice(None, None, 2)}),
])
def test_building_and_editing(name, args, kwargs):
    if name == "insert":                         # obj is static: close over it
        arr, obj, values = args
        fn = getattr(tnp, name)
        want = np.insert(arr, obj, values, **kwargs)
        for got in (fn(arr, obj, values, **kwargs),
                    tnp.jit(lambda a, v: fn(a, obj, v, **kwargs))(arr, values),
                    tnp.vmap(lambda a: fn(a, obj, values, **kwargs))(np.stack([arr, arr]))[1]):
            np.testing.assert_array_equal(got, want)
        weights = normal(*want.shape)
        got = tnp.grad(lambda a, v: tnp.sum(fn(a, obj, v, **kwargs) * weights),
                       argnums=(0, 1))(arr, values)
        expected = jax_grad(lambda a, v: jnp.sum(jnp.insert(a, np.asarray(obj), v, **kwargs)
                                                 * weights),
                            arr, values, argnums=(0, 1))
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-12)
        t, u = tnp.tensor(arr, requires_grad=True), tnp.tensor(values, requires_grad=True)
        grads = tnp.sum(np.insert(t, obj, u, **kwargs) * weights).backward()
        np.testing.assert_allclose(grads.grad(t), expected[0], rtol=1e-12)
        np.testing.assert_allclose(grads.grad(u), expected[1], rtol=1e-12)
        return
    if name == "delete" and "obj" in kwargs:
        obj = kwargs["obj"]
        fn = lambda a: tnp.delete(a, obj)                                    # noqa: E731
        want = np.delete(args[0], obj)
        np.testing.assert_array_equal(tnp.jit(fn)(args[0]), want)
        g = tnp.grad(lambda a: tnp.sum(fn(a) ** 2))(args[0])
        np.testing.assert_allclose(g, jax_grad(lambda a: jnp.sum(jnp.delete(a, obj) ** 2),
                                               args[0]))
        return
    if name == "delete":
        arr, obj = args
        check_everywhere(name, (arr,), {"obj": obj, **kwargs})
        return
    check_everywhere(name, args, kwargs)


def test_vander_derivative_is_exact_at_zero():
    # powers by repeated products: JAX's vander gives NaN at x = 0, the derivative is k x**(k-1)
    x, w = np.array([0.0, 1.5, -2.0]), normal(3, 4)
    g = tnp.grad(lambda v: tnp.sum(tnp.vander(v, 4, increasing=True) * w))(x)
    np.testing.assert_allclose(g, (w[:, 1:] * np.arange(1, 4) * x[:, None] ** np.arange(3)).sum(1))


# np.block on tensors was refused ("tnp has no block") and tnp had no block
@requires_jax
def test_block():
    a, b, c = normal(2, 2), normal(2, 1), normal(2)
    f = lambda lib, a, b, c: lib.block([[a, b], [c, 2.0]])                    # noqa: E731
    want = f(np, a, b, c)
    for got in (f(tnp, a, b, c), tnp.jit(lambda *v: f(tnp, *v))(a, b, c), f(np, *[
            tnp.tensor(v) for v in (a, b, c)])):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    got = tnp.vmap(lambda u: f(tnp, u, b, c))(np.stack([a, 2 * a]))
    np.testing.assert_array_equal(got[1], f(np, 2 * a, b, c))
    weights = normal(*want.shape)
    g = tnp.grad(lambda *v: tnp.sum(f(tnp, *v) * weights), argnums=(0, 1, 2))(a, b, c)
    e = jax_grad(lambda *v: jnp.sum(f(jnp, *v) * weights), a, b, c, argnums=(0, 1, 2))
    for gi, ei in zip(g, e):
        np.testing.assert_allclose(gi, ei)
    t = tnp.tensor(a, requires_grad=True)
    out = np.block([[t, b], [c, 2.0]])                # NumPy's dispatch finds t in the lists
    np.testing.assert_allclose((out * weights).sum().backward().grad(t), e[0])
    assert tnp.block([np.float32([1.0]), 2.0]).dtype == np.block([np.float32([1.0]), 2.0]).dtype
    for bad, match in [([[a], a], "depths are mismatched"), ((a, a), "tuple"),
                       ([], "cannot be empty"), ([a, c], "block: concatenate")]:
        with pytest.raises(TiduError, match=match):
            tnp.block(bad)


def test_insert_and_delete_read_obj():
    # obj decides the result's shape: a traced obj raises ConcretizationError naming the
    # function, as compress does; NumPy's errors are TiduErrors naming it
    x = normal(5)
    with pytest.raises(ConcretizationError, match="delete: reading obj"):
        tnp.jit(lambda a, i: tnp.delete(a, i))(x, np.array([1, 2]))
    with pytest.raises(ConcretizationError, match="insert: reading obj"):
        tnp.jit(lambda a, i: tnp.insert(a, i, 0.0))(x, np.array(1))
    np.testing.assert_array_equal(tnp.delete(x, tnp.tensor(np.array([0, 4]))), x[1:4])
    with pytest.raises(TiduError, match="delete: index 9 is out of bounds"):
        tnp.delete(x, 9)
    with pytest.raises(TiduError, match="insert: index 9 is out of bounds"):
        tnp.insert(x, 9, 1.0)
    with pytest.raises(TiduError, match="insert: could not broadcast"):
        tnp.insert(normal(3, 4), 1, normal(3, 2), axis=1)
    assert tnp.insert(np.arange(4), 1, 2.7).dtype == np.insert(np.arange(4), 1, 2.7).dtype


# np.tril_indices_from/triu_indices_from/diag_indices_from on a tensor requiring grad were
# refused, though they read only its shape; now they read it, under jit and vmap too
def test_indices_from_read_the_shape_only():
    x = np.arange(12.0).reshape(3, 4)
    t = tnp.tensor(x, requires_grad=True)
    for name, args in [("tril_indices_from", (-1,)), ("triu_indices_from", ()),
                       ("diag_indices_from", ())]:
        y = x[:, :3] if name == "diag_indices_from" else x
        for got in (getattr(np, name)(t[:, :3] if name == "diag_indices_from" else t, *args),
                    getattr(tnp, name)(y, *args)):
            for g, w in zip(got, getattr(np, name)(y, *args)):
                np.testing.assert_array_equal(g, w)
    g = tnp.grad(lambda a: tnp.sum(a[np.triu_indices_from(a)] ** 2))(x)
    np.testing.assert_allclose(g, np.triu(2 * x))
    np.testing.assert_array_equal(tnp.vmap(lambda a: a[tnp.tril_indices_from(a)])(
        np.stack([x, x])), np.stack([x[np.tril_indices_from(x)]] * 2))
    with pytest.raises(TiduError, match="tril_indices_from: input array must be 2-d"):
        tnp.tril_indices_from(np.ones(3))


# --- unique, isin, bincount ----------------------------------------------------------------


# np.unique & co., np.isin and np.bincount on tensors or traced values were refused and tnp
# had none of them (JAX has them all)
@requires_jax
def test_unique_values_and_their_gradient():
    x = np.array([3.0, 1.0, 3.0, np.nan, 2.0, np.nan, 1.0])
    for name in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
        got, want = getattr(tnp, name)(x), getattr(np, name)(x)
        assert type(got).__name__ == type(want).__name__
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
        assert getattr(got, "_fields", None) == getattr(want, "_fields", None)
    kwargs = dict(return_index=True, return_inverse=True, return_counts=True)
    for g, w in zip(tnp.unique(x, **kwargs), np.unique(x, **kwargs)):
        np.testing.assert_array_equal(g, w)
    m = np.array([[1.0, 2.0], [0.0, 5.0], [1.0, 2.0]])
    for g, w in zip(tnp.unique(m, axis=0, **kwargs), np.unique(m, axis=0, **kwargs)):
        np.testing.assert_array_equal(g, w)
    # each distinct value's derivative goes to its first occurrence, as JAX's (its traceable
    # unique, with size=; without it JAX reads the values and returns a zero gradient)
    v, weights = np.array([3.0, 1.0, 3.0, 2.0, 1.0]), np.array([0.5, -1.0, 2.0])
    g = tnp.grad(lambda a: tnp.sum(tnp.unique(a) * weights))(v)
    np.testing.assert_array_equal(g, jax_grad(lambda a: jnp.sum(jnp.unique(a, size=3) * weights),
                                              v))
    np.testing.assert_array_equal(g, [2.0, 0.5, 0.0, -1.0, 0.0])
    t = tnp.tensor(v, requires_grad=True)
    out = np.unique_counts(t)
    np.testing.assert_array_equal(out.counts, [2, 1, 2])
    np.testing.assert_array_equal((out.values * weights).sum().backward().grad(t), g)
    rows = tnp.grad(lambda a: tnp.sum(tnp.unique(a, axis=0) * m[:2]))(m)
    np.testing.assert_array_equal(rows, [[0.0, 5.0], [1.0, 2.0], [0.0, 0.0]])
    # the shape depends on the values: refused under jit and vmap, naming the function
    for transform, name in [(tnp.jit, "unique"), (tnp.vmap, "unique_values")]:
        with pytest.raises(ConcretizationError, match=f"{name}: reading the values"):
            transform(getattr(tnp, name))(m)


@requires_jax
def test_isin_and_bincount():
    x = np.array([[1.5, -2.0, np.nan], [0.5, 3.0, 1.5]])
    tests = np.array([1.5, np.nan, 3.0])
    for invert in (False, True):
        want = np.isin(x, tests, invert=invert)
        for got in (tnp.isin(x, tests, invert=invert),
                    tnp.jit(lambda a, b: tnp.isin(a, b, invert=invert))(x, tests),
                    np.isin(tnp.tensor(x, requires_grad=True), tests, invert=invert)):
            np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(tnp.vmap(tnp.isin)(x, np.stack([tests, tests[::-1]])),
                                  np.isin(x, tests))
    bins, w = np.array([0, 3, 3, 1, 0]), normal(5)
    for kwargs in ({}, {"weights": w}, {"weights": w.astype(np.float32), "minlength": 7}):
        got, want = tnp.bincount(bins, **kwargs), np.bincount(bins, **kwargs)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(tnp.jit(lambda u: tnp.bincount(bins, weights=u))(w),
                               np.bincount(bins, weights=w))
    g = tnp.grad(lambda u: tnp.sum(tnp.bincount(bins, weights=u) ** 2))(w)
    np.testing.assert_allclose(g, jax_grad(lambda u: jnp.sum(
        jnp.bincount(bins, weights=u, length=4) ** 2), w))
    t = tnp.tensor(w, requires_grad=True)
    np.testing.assert_allclose(tnp.sum(np.bincount(bins, weights=t) ** 2).backward().grad(t), g)
    with pytest.raises(ConcretizationError, match="bincount: reading the values"):
        tnp.jit(tnp.bincount)(bins)
    for call, match in [(lambda: tnp.bincount(np.array([-1, 2])), "bincount: .*negative"),
                        (lambda: tnp.bincount(np.array([0.5])), "bincount: Cannot cast"),
                        (lambda: tnp.bincount(bins, weights=w[:2]), "bincount: the weights")]:
        with pytest.raises(TiduError, match=match):
            call()


# --- polynomials, differences, phases, bins, resizing --------------------------------------


# np.polyadd/polysub/polymul/polyder/polyint, np.ediff1d, np.unwrap, np.fix and np.resize on
# tensors were refused and tnp had none of them
@requires_jax
@pytest.mark.parametrize("name, args, kwargs", [
    ("polyadd", (normal(4), normal(2)), {}),
    ("polysub", (normal(2), normal(3)), {}),
    ("polymul", (normal(3), normal(2)), {}),
    ("polyder", (normal(5),), {"m": 2}),
    ("polyint", (normal(3), normal(2)), {"m": 2}),
    ("ediff1d", (normal(2, 3), normal(2)), {}),
    ("unwrap", (np.cumsum(3 * normal(3, 6), axis=1),), {"axis": 1}),
    ("fix", (RNG.uniform(-3, 3, (2, 3)),), {}),
    ("resize", (normal(2, 2),), {"new_shape": (3, 3)}),
])
def test_polynomials_and_friends(name, args, kwargs):
    if name == "polyint":                      # k positional in both
        p, k = args
        f = lambda lib, p, k: lib.polyint(p, 2, k)                            # noqa: E731
        np.testing.assert_allclose(f(tnp, p, k), f(np, p, k))
        np.testing.assert_allclose(tnp.jit(lambda *a: f(tnp, *a))(p, k), f(np, p, k))
        w = normal(5)
        g = tnp.grad(lambda *a: tnp.sum(f(tnp, *a) * w), argnums=(0, 1))(p, k)
        e = jax_grad(lambda *a: jnp.sum(f(jnp, *a) * w), p, k, argnums=(0, 1))
        for gi, ei in zip(g, e):
            np.testing.assert_allclose(gi, ei, rtol=1e-12)
        return
    if name == "ediff1d":
        a, b = args
        f = lambda lib, a, b: lib.ediff1d(a, to_begin=b, to_end=2.0)        # noqa: E731
        np.testing.assert_allclose(tnp.jit(lambda *v: f(tnp, *v))(a, b), f(np, a, b))
        w = normal(8)
        g = tnp.grad(lambda *v: tnp.sum(f(tnp, *v) * w), argnums=(0, 1))(a, b)
        e = jax_grad(lambda *v: jnp.sum(f(jnp, *v) * w), a, b, argnums=(0, 1))
        for gi, ei in zip(g, e):
            np.testing.assert_allclose(gi, ei, rtol=1e-12)
        return
    # (JAX has no fix any more: its trunc is the same function)
    check_everywhere(name, args, kwargs, jax_name="trunc" if name == "fix" else None)


@requires_jax
def test_digitize():
    # np.digitize on a tensor was refused; tnp.digitize counts with searchsorted, so a traced x
    # works under jit and vmap, and decreasing bins are read (never assumed increasing)
    x, bins = 3 * normal(4, 5), np.array([-2.0, 0.0, 0.5, 3.0])
    for edges in (bins, bins[::-1]):
        for right in (False, True):
            want = np.digitize(x, edges, right=right)
            for got in (tnp.digitize(x, edges, right=right),
                        tnp.jit(lambda u: tnp.digitize(u, edges, right=right))(x),
                        tnp.vmap(lambda u: tnp.digitize(u, edges, right=right))(x),
                        np.digitize(tnp.tensor(x, requires_grad=True), edges, right=right)):
                np.testing.assert_array_equal(got, want)
                assert got.dtype == want.dtype
    with pytest.raises(ConcretizationError, match="digitize: reading bins"):
        tnp.jit(tnp.digitize)(x, bins)
    with pytest.raises(TiduError, match="digitize: bins must be monotonically"):
        tnp.digitize(x, np.array([0.0, 2.0, 1.0]))


def test_polynomial_errors_name_the_function():
    for call, match in [(lambda: tnp.polyder(normal(3), -1), "polyder: Order"),
                        (lambda: tnp.polyint(normal(3), 3, [1.0, 2.0]), "polyint: k must"),
                        (lambda: tnp.polyadd(normal(2, 2), normal(2)), "polyadd: coefficients"),
                        (lambda: tnp.resize(normal(3), (-1, 2)), "resize: all elements"),
                        (lambda: tnp.ediff1d(np.arange(3), to_begin=0.5), "ediff1d: dtype")]:
        with pytest.raises(TiduError, match=match):
            call()


# the Array API's dtype names and shape helpers: tnp.bool, uint16/32/64, broadcast_shapes,
# empty_like and linalg.matrix_rank were missing; np.empty_like of a tensor requiring grad was
# refused, though it reads only the shape and dtype
def test_array_api_dtypes_and_shape_helpers():
    assert tnp.bool is np.bool and tnp.uint64 is np.uint64 and tnp.uint16 is np.uint16
    assert tnp.zeros(2, dtype=tnp.bool).dtype == np.bool_
    assert tnp.broadcast_shapes((2, 1), (3,)) == (2, 3)
    t = tnp.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    for e in (np.empty_like(t), tnp.empty_like(t), tnp.jit(tnp.empty_like)(t.detach())):
        assert e.shape == (2, 3) and e.dtype == np.float32
    assert tnp.empty_like(np.ones(2), dtype=np.int8).dtype == np.int8
    assert tnp.linalg.matrix_rank(np.diag([1.0, 0.0, 2.0])) == 2
    assert np.linalg.matrix_rank(tnp.tensor(np.eye(3), requires_grad=True)) == 3


# np.union1d/intersect1d/setdiff1d/setxor1d and np.trim_zeros on tensors were refused and tnp
# had none of them; each reads the values (as unique) and differentiates the entries it keeps
def test_set_operations_and_trim_zeros():
    a, b = np.array([3.0, 1.0, np.nan, 2.0, 1.0, 5.0]), np.array([[2.0, 3.0], [np.nan, 7.0]])
    for name, kwargs in [("union1d", {}), ("intersect1d", {"return_indices": True}),
                         ("setdiff1d", {}), ("setxor1d", {})]:
        got, want = getattr(tnp, name)(a, b, **kwargs), getattr(np, name)(a, b, **kwargs)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
        with pytest.raises(ConcretizationError, match=f"{name}: reading the values"):
            tnp.jit(getattr(tnp, name))(a, b)
    np.testing.assert_array_equal(tnp.setdiff1d(np.array([4.0, 1.0, 3.0]), b, assume_unique=True),
                                  np.setdiff1d(np.array([4.0, 1.0, 3.0]), b, assume_unique=True))
    # each value's derivative goes to its first occurrence (in ar1, then ar2)
    u, v = np.array([3.0, 1.0, 2.0, 1.0]), np.array([2.0, 4.0, 6.0])
    w = np.arange(1.0, 5.0)
    g = tnp.grad(lambda p, q: tnp.sum(tnp.setxor1d(p, q) * w), argnums=(0, 1))(u, v)
    np.testing.assert_array_equal(g[0], [2.0, 1.0, 0.0, 0.0])              # 3 -> w[1], 1 -> w[0]
    np.testing.assert_array_equal(g[1], [0.0, 3.0, 4.0])
    g = tnp.grad(lambda p: tnp.sum(tnp.intersect1d(p, v) * 5.0))(u)
    np.testing.assert_array_equal(g, [0.0, 0.0, 5.0, 0.0])
    t = tnp.tensor(u, requires_grad=True)
    grads = tnp.sum(np.union1d(t, v) * np.arange(1.0, 6.0)).backward()   # union: 1 2 3 4 6
    np.testing.assert_array_equal(grads.grad(t), [3.0, 1.0, 2.0, 0.0])
    x = np.array([[0.0, 1.5, 0.0, 2.0, 0.0], [0.0, 0.0, -1.0, 0.0, 0.0]])
    for kwargs in ({}, {"axis": 1}, {"trim": "b", "axis": 0}, {"trim": "f"}):
        np.testing.assert_array_equal(tnp.trim_zeros(x, **kwargs), np.trim_zeros(x, **kwargs))
    g = tnp.grad(lambda p: tnp.sum(tnp.trim_zeros(p, axis=1) ** 2))(x)
    np.testing.assert_array_equal(g, np.where(np.arange(5) % 4 != 0, 2 * x, 0.0))
    with pytest.raises(ConcretizationError, match="trim_zeros: reading filt"):
        tnp.vmap(tnp.trim_zeros)(x)
    with pytest.raises(TiduError, match="trim_zeros: unexpected character"):
        tnp.trim_zeros(x, "x")


# np.lexsort on a tensor requiring grad (or traced) was refused and tnp had no lexsort
def test_lexsort():
    rng = np.random.default_rng(5)
    for trial in range(60):
        n = int(rng.integers(1, 10))
        keys = [rng.integers(0, 3, (2, n)) for _ in range(int(rng.integers(1, 4)))]
        keys[0] = keys[0].astype(float)
        if trial % 3 == 0:
            keys[0][0, 0] = np.nan
        for axis in (-1, 0):
            want = np.lexsort(keys, axis=axis)
            got = tnp.lexsort(keys, axis=axis)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    a, b = normal(3, 5), rng.integers(0, 2, (3, 5)).astype(float)
    want = np.lexsort((a, b))
    np.testing.assert_array_equal(tnp.jit(lambda u, v: tnp.lexsort((u, v)))(a, b), want)
    np.testing.assert_array_equal(tnp.vmap(lambda u, v: tnp.lexsort((u, v)))(a, b), want)
    np.testing.assert_array_equal(np.lexsort((tnp.tensor(a, requires_grad=True), b)), want)
    np.testing.assert_array_equal(tnp.lexsort(np.stack([a, b])), want)
    with pytest.raises(TiduError, match="lexsort: all keys need to be the same shape"):
        tnp.lexsort((a, b[:, :2]))


# tnp.searchsorted (np.searchsorted on a tensor) of an `a` that is not 1-d raised NumPy's own
# ValueError ("object too deep for desired array") in eager mode; jit's TiduError said why
def test_searchsorted_refuses_a_not_1d_naming_itself():
    for a in (np.ones((2, 2)), tnp.tensor(np.ones((2, 2)), requires_grad=True), np.float64(1.0)):
        with pytest.raises(TiduError, match="searchsorted: a must be 1-dimensional"):
            np.searchsorted(a, 1.0) if isinstance(a, tnp.Tensor) else tnp.searchsorted(a, 1.0)
    assert tnp.searchsorted([1.0, 2.0], 1.5) == 1


# tnp.polyint (np.polyint on a traced value) of 2-d coefficients raised concatenate's error,
# naming neither polyint nor NumPy (test_numpy_interop's sweep found it)
def test_polyint_of_a_matrix_names_polyint():
    with pytest.raises(TiduError, match="polyint: coefficients must be a 1-d array"):
        tnp.grad(lambda v: tnp.sum(np.polyint(v)))(np.ones((2, 2)))


# the Array API's bitwise shifts (and NumPy's integer ufuncs gcd, lcm, bitwise_count) were
# missing from tnp; they are NumPy's own, on integer tensors' data, and under jit they say why
# they cannot run rather than failing on a missing name
def test_integer_ufunc_names():
    i = np.array([1, 6, -8])
    for name, args in [("bitwise_left_shift", (i, 2)), ("bitwise_right_shift", (i, 1)),
                       ("left_shift", (i, 3)), ("right_shift", (i, 2)), ("gcd", (i, 4)),
                       ("lcm", (i, 4)), ("bitwise_count", (i,))]:
        np.testing.assert_array_equal(getattr(tnp, name)(*args), getattr(np, name)(*args))
        got = getattr(tnp, name)(tnp.tensor(args[0]), *args[1:])
        np.testing.assert_array_equal(got, getattr(np, name)(*args))
    with pytest.raises(ConcretizationError, match="left_shift"):
        tnp.jit(lambda v: tnp.bitwise_left_shift(v, 1))(i)
