"""The JAX names round 59 added to ``primitives.tensor``: ``eval_shape`` and
``ShapeDtypeStruct``, ``remat``/``checkpoint(static_argnums=...)``, ``custom_jvp.defjvps``,
a jitted function's ``clear_cache``, ``lax.select_n`` and ``lax.associative_scan``, and
``tree_util``'s ``Partial``, ``tree_transpose``, ``register_static`` and
``treedef_is_leaf`` (``tree.transpose``). Each is checked against JAX (the ``jx`` fixture:
float64 on) and its misuse raises a ``TiduError`` naming it."""

import functools

import numpy as np
import pytest
from tidu import TiduError

import primitives.tensor as tnp
from primitives.tensor import lax, tree_util
from primitives.tensor.errors import ConcretizationError
from tensor_helpers import numeric_grad

RNG = np.random.default_rng(59)


# ---- eval_shape, ShapeDtypeStruct -----------------------------------------------------------


def test_eval_shape_matches_jax_on_a_pytree(jx):
    jax, jnp = jx

    def model(np_like):
        def f(params, x, scale):
            h = np_like.tanh(x @ params["w"] + params["b"])
            return {"out": h * scale, "norms": (np_like.sum(h * h, axis=1), h.T)}
        return f

    params = {"w": tnp.ShapeDtypeStruct((3, 4), np.float32), "b": np.zeros(4, np.float32)}
    ours = tnp.eval_shape(model(tnp), params, np.ones((5, 3), np.float32), 2.0)
    jax_params = {"w": jax.ShapeDtypeStruct((3, 4), jnp.float32), "b": np.zeros(4, np.float32)}
    theirs = jax.eval_shape(model(jnp), jax_params, np.ones((5, 3), np.float32), 2.0)
    ours_leaves, ours_tree = tnp.tree_util.tree_flatten(ours)
    theirs_leaves = jax.tree_util.tree_leaves(theirs)
    assert repr(ours_tree) == "{'norms': (*, *), 'out': *}"
    assert [(s.shape, s.dtype) for s in ours_leaves] == \
        [(s.shape, np.dtype(s.dtype)) for s in theirs_leaves]
    assert all(type(s) is tnp.ShapeDtypeStruct for s in ours_leaves)


def test_eval_shape_never_reads_the_arguments_data():
    """Anything with shape and dtype stands for an array (as in JAX): one that has no data
    at all works, so the function ran on zeros, not on the argument."""
    class Spec:
        shape, dtype = (2, 3), np.dtype(np.float64)

        def __array__(self, *args, **kwargs):
            raise AssertionError("eval_shape read the argument's data")

    seen = []

    def f(x):
        seen.append(x.shape)
        return tnp.exp(x).sum(axis=0)

    assert tnp.eval_shape(f, Spec()) == tnp.ShapeDtypeStruct((3,), np.float64)
    assert seen == [(2, 3)]


def test_eval_shape_weak_types_kwargs_and_numbers(jx):
    jax, jnp = jx
    out = tnp.eval_shape(lambda x, *, n: (x * n, n, 3), np.ones(2, np.float32), n=2.5)
    assert out == (tnp.ShapeDtypeStruct((2,), np.float32),
                   tnp.ShapeDtypeStruct((), np.float64, weak_type=True),
                   tnp.ShapeDtypeStruct((), np.int64, weak_type=True))
    theirs = jax.eval_shape(lambda x, *, n: (x * n, n, 3), np.ones(2, np.float32), n=2.5)
    assert [s.weak_type for s in out] == [s.weak_type for s in theirs]
    assert out[0].dtype == np.dtype(theirs[0].dtype)


def test_eval_shape_under_grad_and_of_a_jitted_function():
    f = tnp.jit(lambda x: tnp.outer(x, x))
    assert tnp.eval_shape(f, tnp.ShapeDtypeStruct((4,), np.float32)) == \
        tnp.ShapeDtypeStruct((4, 4), np.float32)
    shapes = []

    def loss(x):
        shapes.append(tnp.eval_shape(lambda v: v[:2] * 2, x))
        return tnp.sum(x ** 2)

    np.testing.assert_allclose(tnp.grad(loss)(np.array([1.0, 2.0, 3.0])), [2.0, 4.0, 6.0])
    assert shapes == [tnp.ShapeDtypeStruct((2,), np.float64)]


def test_eval_shape_misuse_names_it():
    with pytest.raises(TiduError, match="eval_shape of .*<lambda>: leaf 1 of the arguments is a "
                                        "str"):
        tnp.eval_shape(lambda x, s: x, np.ones(2), "abc")
    with pytest.raises(TiduError, match="eval_shape: .*<lambda> returned str"):
        tnp.eval_shape(lambda x: "abc", np.ones(2))
    with pytest.raises(ConcretizationError, match="eval_shape of .*<lambda>"):
        tnp.eval_shape(lambda x: x if x > 0 else -x, 1.0)
    with pytest.raises(TiduError, match="eval_shape"):
        tnp.eval_shape("not a function", 1.0)
    with pytest.raises(TiduError, match="eval_shape.*dtype <U1"):
        tnp.eval_shape(lambda x: x, np.array(["a"]))


def test_shape_dtype_struct_is_jax_like(jx):
    jax, jnp = jx
    ours = tnp.ShapeDtypeStruct([2, 3], "float32")
    theirs = jax.ShapeDtypeStruct((2, 3), jnp.float32)
    assert repr(ours) == repr(theirs)
    assert (ours.shape, ours.dtype, ours.ndim, ours.size) == \
        (theirs.shape, np.dtype(theirs.dtype), theirs.ndim, theirs.size)
    assert ours == tnp.ShapeDtypeStruct((2, 3), np.float32) and \
        hash(ours) == hash(tnp.ShapeDtypeStruct((2, 3), np.float32))
    assert ours != tnp.ShapeDtypeStruct((2, 3), np.float32, weak_type=True)
    assert tnp.tree_util.tree_leaves([ours]) == [ours]           # a leaf, not a node
    for bad, match in (((("a",), np.float32), "shape must be a sequence of ints"),
                       (((-1,), np.float32), "negative"),
                       (((2,), "not a dtype"), "is not a dtype")):
        with pytest.raises(TiduError, match=f"ShapeDtypeStruct: .*{match}"):
            tnp.ShapeDtypeStruct(*bad)
    with pytest.raises(TiduError, match="ShapeDtypeStruct: sharding"):
        tnp.ShapeDtypeStruct((2,), np.float32, sharding="gpu")


# ---- remat, checkpoint(static_argnums) -------------------------------------------------------


def _repeated_sin(np_like):
    def f(x, n, scale=1.0):
        for _ in range(n):                     # n must be a Python int: static
            x = np_like.sin(x) * scale
        return x
    return f


def test_remat_is_checkpoint_with_static_argnums_matching_jax(jx):
    jax, jnp = jx
    assert tnp.remat is tnp.checkpoint
    x = RNG.normal(size=3)
    theirs = jax.grad(lambda v: jnp.sum(jax.remat(_repeated_sin(jnp), static_argnums=1)(v, 3)))(x)
    for static in ({"static_argnums": 1}, {"static_argnums": (-1,)}, {"static_argnames": "n"}):
        block = tnp.remat(_repeated_sin(tnp), **static)
        np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(block(v, 3)))(x), theirs)
        np.testing.assert_allclose(tnp.jit(tnp.grad(lambda v: tnp.sum(block(v, 3))))(x), theirs)
        t = tnp.tensor(x, requires_grad=True)
        np.testing.assert_allclose(tnp.sum(block(t, 3)).backward().grad(t), theirs)
    by_keyword = tnp.checkpoint(_repeated_sin(tnp), static_argnums=1)
    t = tnp.tensor(x, requires_grad=True)
    np.testing.assert_allclose(tnp.sum(by_keyword(t, n=3)).backward().grad(t), theirs)


def test_a_static_argument_reaches_the_function_as_its_python_value():
    """Without static_argnums an eager checkpoint traces a NumPy scalar argument; with it the
    function gets the scalar itself."""
    seen = []

    def f(x, n):
        seen.append(type(n))
        return x * n

    x = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = tnp.checkpoint(f, static_argnums=1)(x, np.float64(3.0))
    np.testing.assert_allclose(tnp.sum(y).backward().grad(x), [3.0, 3.0])
    tnp.checkpoint(f)(x, np.float64(3.0))
    assert seen[0] is np.float64 and seen[1] is not np.float64


def test_checkpoint_keeps_its_policy_and_fd_gradient():
    f = tnp.checkpoint(lambda w, x, n: tnp.tanh(x @ w) ** n, "dots_saveable", static_argnums=2)
    w, x = RNG.normal(size=(3, 2)), RNG.normal(size=(4, 3))
    loss = tnp.jit(lambda w: tnp.sum(f(w, x, 2)))
    np.testing.assert_allclose(tnp.grad(loss)(w),
                               numeric_grad(lambda v: float(loss(v)), w), rtol=1e-6)


def test_checkpoint_static_misuse_names_it():
    f = tnp.checkpoint(lambda x, n: x * len(n), static_argnums=1)
    x = tnp.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(TiduError, match="checkpoint of .*<lambda>: static argument 1 is an "
                                        "unhashable list"):
        f(x, [1, 2])
    with pytest.raises(TiduError, match="checkpoint of .*<lambda>: static argument 1 is an "
                                        "unhashable ndarray"):
        f(x, np.ones(2))
    with pytest.raises(TiduError, match="static argument 1 holds a tensor"):
        f(x, x)
    with pytest.raises(TiduError, match="static_argnums 3 is out of range"):
        tnp.checkpoint(lambda *a: a[0], static_argnums=3)(x, 1)
    with pytest.raises(TiduError, match="static_argnums must be an int or a tuple"):
        tnp.checkpoint(lambda x: x, static_argnums="0")
    with pytest.raises(TiduError, match="static_argnames must be a str"):
        tnp.checkpoint(lambda x: x, static_argnames=(1,))
    with pytest.raises(TiduError, match="checkpoint: unknown policy"):
        tnp.remat(lambda x: x, policy="sometimes")


# ---- custom_jvp.defjvps -----------------------------------------------------------------------


def _with_defjvps(jax_like, np_like):
    @jax_like.custom_jvp
    def f(x, y, z):
        return np_like.sin(x) * y + z ** 2

    f.defjvps(lambda tx, out, x, y, z: np_like.cos(x) * tx * y,
              lambda ty, out, x, y, z: np_like.sin(x) * ty,
              lambda tz, out, x, y, z: 2 * z * tz)
    return f


def test_defjvps_matches_jax_in_every_transform(jx):
    jax, jnp = jx
    ours, theirs = _with_defjvps(tnp, tnp), _with_defjvps(jax, jnp)
    x, y, z = RNG.normal(size=(3, 4))
    args = (x, y, z)
    np.testing.assert_allclose(ours(*args), theirs(*args))

    def loss(f):
        return lambda x, y, z: (f(x, y, z) ** 2).sum()

    for a, b in zip(tnp.grad(loss(ours), argnums=(0, 1, 2))(*args),
                    jax.grad(loss(theirs), argnums=(0, 1, 2))(*args)):
        np.testing.assert_allclose(a, b)
    tangents = tuple(RNG.normal(size=(3, 4)))
    np.testing.assert_allclose(tnp.jvp(ours, args, tangents)[1],
                               jax.jvp(theirs, args, tangents)[1])
    np.testing.assert_allclose(tnp.jit(tnp.grad(loss(ours)))(*args),
                               jax.grad(loss(theirs))(*args))
    np.testing.assert_allclose(tnp.vmap(tnp.grad(ours, argnums=2))(*args),
                               jax.vmap(jax.grad(theirs, argnums=2))(*args))
    np.testing.assert_allclose(tnp.grad(loss(ours))(*args),
                               numeric_grad(lambda v: float(loss(ours)(v, y, z)), x))


def test_defjvps_none_means_no_contribution(jx):
    jax, jnp = jx

    def make(jax_like, np_like):
        @jax_like.custom_jvp
        def f(x, y):
            return {"a": x * y, "b": np_like.exp(x)}

        f.defjvps(lambda tx, out, x, y: {"a": tx * y, "b": out["b"] * tx}, None)
        return f

    ours, theirs = make(tnp, tnp), make(jax, jnp)
    x, y = RNG.normal(size=(2, 3))
    for a, b in zip(tnp.grad(lambda x, y: tnp.sum(ours(x, y)["a"] + ours(x, y)["b"]),
                             argnums=(0, 1))(x, y),
                    jax.grad(lambda x, y: jnp.sum(theirs(x, y)["a"] + theirs(x, y)["b"]),
                             argnums=(0, 1))(x, y)):
        np.testing.assert_allclose(a, b)
    t = tnp.tensor(y, requires_grad=True)
    np.testing.assert_allclose(tnp.sum(ours(x, t)["a"]).backward().grad(t), np.zeros(3))


def test_defjvps_misuse_names_it():
    @tnp.custom_jvp
    def f(x, y):
        return x * y

    f.defjvps(lambda tx, out, x, y: tx * y)          # one function for two arguments
    with pytest.raises(TiduError, match="custom_jvp function .*f: defjvps got 1 JVP "
                                        "functions for 2 arguments"):
        tnp.grad(f)(np.array(1.0), np.array(2.0))
    f.defjvps(lambda tx, out, x, y: (tx * y,), None)
    with pytest.raises(TiduError, match="the defjvps function for argument 0 returned "
                                        "structure"):
        tnp.grad(f)(np.array(1.0), np.array(2.0))
    with pytest.raises(TiduError, match="entry 1 is a str"):
        f.defjvps(None, "no")
    g = tnp.custom_jvp(lambda n, x: x * n, nondiff_argnums=(0,))
    with pytest.raises(TiduError, match="defjvps cannot be used with nondiff_argnums"):
        g.defjvps(None, lambda tx, out, n, x: tx * n)


# ---- jit's clear_cache ----------------------------------------------------------------------


def test_clear_cache_traces_again():
    traces = []

    @tnp.jit
    def f(x):
        traces.append(x.shape)
        return tnp.sin(x) * 2

    x = np.array([0.1, 0.2])
    first = f(x)
    f(x)
    f(np.ones(3))
    assert len(traces) == 2
    f.clear_cache()
    again = f(x)
    assert len(traces) == 3 and traces[-1] == (2,)
    np.testing.assert_allclose(again, first)
    assert again is not first
    f(x)
    assert len(traces) == 3                    # the new trace is kept


# ---- lax.select_n, lax.associative_scan -----------------------------------------------------


def test_select_n_matches_jax(jx):
    jax, jnp = jx
    cases = [RNG.normal(size=5) for _ in range(3)]
    which = np.array([0, 2, 1, 1, 0])
    np.testing.assert_allclose(lax.select_n(which, *cases), jax.lax.select_n(which, *cases))
    mask = np.array([True, False, True, False, False])
    np.testing.assert_allclose(lax.select_n(mask, *cases[:2]),
                               jax.lax.select_n(mask, *cases[:2]))
    np.testing.assert_allclose(lax.select_n(np.int32(1), *cases),
                               jax.lax.select_n(np.int32(1), *cases))
    out = lax.select_n(True, cases[0])
    np.testing.assert_array_equal(out, cases[0])
    assert not np.shares_memory(out, cases[0])

    def loss(np_like, select):
        return lambda a, b, c: np_like.sum(select(which, a, b, c) ** 2 * np.arange(5.0))

    for a, b in zip(tnp.grad(loss(tnp, lax.select_n), argnums=(0, 1, 2))(*cases),
                    jax.grad(loss(jnp, jax.lax.select_n), argnums=(0, 1, 2))(*cases)):
        np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(
        tnp.vmap(lambda w, a, b: lax.select_n(w, a, b))(mask, cases[0], cases[1]),
        jax.vmap(lambda w, a, b: jax.lax.select_n(w, a, b))(mask, cases[0], cases[1]))
    np.testing.assert_allclose(tnp.jit(lax.select_n)(which, *cases),
                               jax.lax.select_n(which, *cases))


def test_select_n_misuse_names_it():
    a = np.ones(3)
    for args, error in (((0,), "needs at least one case"),
                        ((0, a, np.ones(2)), "share their shape"),
                        ((0, a, a.astype(np.float32)), "share their dtype"),
                        ((np.ones(2, int), a, a), "which must be a scalar or have"),
                        ((0.5, a, a), "which must be boolean or integer"),
                        ((True, a, a, a), "boolean which selects between two cases")):
        with pytest.raises(TiduError, match=f"select_n: .*{error}"):
            lax.select_n(*args)


@pytest.mark.parametrize("length", [0, 1, 2, 3, 5, 8, 13])
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_matches_jax_step_for_step(jx, length, reverse):
    """A non-associative ``fn`` exposes the order of the combinations: JAX's."""
    jax, jnp = jx
    x = RNG.normal(size=(2, length, 3))

    def fn(a, b):
        return {"p": a["p"] - 2 * b["p"], "q": (a["q"][0] * b["q"][0] + a["p"],)}

    ours = lax.associative_scan(fn, {"p": x, "q": (x + 1,)}, reverse=reverse, axis=-2)
    theirs = jax.lax.associative_scan(fn, {"p": jnp.array(x), "q": (jnp.array(x + 1),)},
                                      reverse=reverse, axis=1)
    np.testing.assert_allclose(ours["p"], theirs["p"])
    np.testing.assert_allclose(ours["q"][0], theirs["q"][0])
    assert not np.shares_memory(ours["p"], x)


def test_associative_scan_is_differentiable(jx):
    jax, jnp = jx
    mats = RNG.normal(size=(6, 2, 2)) * 0.7

    def loss(np_like, scan):
        return lambda m: np_like.sum(scan(np_like.matmul, m) ** 2)

    ours = tnp.grad(loss(tnp, lax.associative_scan))(mats)
    np.testing.assert_allclose(ours, jax.grad(loss(jnp, jax.lax.associative_scan))(mats))
    np.testing.assert_allclose(ours, numeric_grad(
        lambda m: float(loss(np, lambda f, v: lax.associative_scan(f, v))(m)), mats),
        rtol=1e-6, atol=1e-8)
    x = RNG.normal(size=(3, 7))
    np.testing.assert_allclose(
        tnp.jit(tnp.vmap(lambda v: lax.associative_scan(tnp.add, v, reverse=True)))(x),
        jax.vmap(lambda v: jax.lax.associative_scan(jnp.add, v, reverse=True))(x))
    np.testing.assert_allclose(lax.associative_scan(tnp.add, x, axis=1), np.cumsum(x, axis=1))


def test_associative_scan_calls_fn_about_twice_log2_n_times():
    calls = []

    def add(a, b):
        calls.append(a.shape)
        return a + b

    np.testing.assert_allclose(lax.associative_scan(add, np.arange(1000.0)),
                               np.cumsum(np.arange(1000.0)))
    assert len(calls) <= 2 * 10


def test_associative_scan_misuse_names_it():
    with pytest.raises(TiduError, match="associative_scan: fn must be a function"):
        lax.associative_scan("add", np.ones(3))
    with pytest.raises(TiduError, match="associative_scan: axis 2 is out of bounds"):
        lax.associative_scan(np.add, np.ones(3), axis=2)
    with pytest.raises(TiduError, match="associative_scan: the leaves of elems must share"):
        lax.associative_scan(lambda a, b: a, (np.ones(3), np.ones(4)))
    with pytest.raises(TiduError, match="associative_scan: fn must return elems' structure"):
        lax.associative_scan(lambda a, b: (a, b), np.ones(3))
    with pytest.raises(TiduError, match="associative_scan: fn must return leaves of its"):
        lax.associative_scan(lambda a, b: a[:1], np.ones(4))
    with pytest.raises(TiduError, match="associative_scan: elems has no arrays"):
        lax.associative_scan(np.add, ())


# ---- tree_util: Partial, tree_transpose, register_static, treedef_is_leaf --------------------


def test_partial_passes_through_jit_and_grad(jx):
    jax, jnp = jx
    w = RNG.normal(size=3)
    x = RNG.normal(size=3)

    def apply(f, x):
        return f(x, power=2.0)

    def model(w, x, power):
        return (w * x) ** power

    ours = tree_util.Partial(model, w)
    theirs = jax.tree_util.Partial(model, w)
    traces = []

    @tnp.jit
    def jitted(f, x):
        traces.append(1)
        return tnp.sum(apply(f, x))

    jitted(ours, x)
    np.testing.assert_allclose(jitted(tree_util.Partial(model, 2 * w), x),
                               np.sum((2 * w * x) ** 2))
    assert len(traces) == 1                    # the bound array is traced, not a constant
    grads = tnp.grad(lambda f: tnp.sum(apply(f, x)))(ours)
    assert type(grads) is tree_util.Partial and grads.func is model
    np.testing.assert_allclose(grads.args[0],
                               jax.grad(lambda f: jnp.sum(apply(f, x)))(theirs).args[0])
    assert tnp.tree_util.tree_leaves(tree_util.Partial(model, w, power=3.0)) == \
        jax.tree_util.tree_leaves(jax.tree_util.Partial(model, w, power=3.0))


def test_partial_keeps_a_plain_partial_whole(jx):
    jax, _ = jx

    def f(name, x, y):
        return x * y if name == "mul" else x + y

    inner = functools.partial(f, "mul")
    ours = tree_util.Partial(inner, np.array(2.0))
    assert tnp.tree_util.tree_leaves(ours) == [2.0] == \
        jax.tree_util.tree_leaves(jax.tree_util.Partial(inner, np.array(2.0)))
    assert ours(np.array(3.0)) == 6.0
    assert tnp.tree_util.tree_structure(ours) == tnp.tree_util.tree_structure(
        tree_util.Partial(inner, np.array(5.0)))
    with pytest.raises(TiduError, match="Partial: the function must be callable"):
        tree_util.Partial(3.0)


def test_tree_transpose_matches_jax(jx):
    jax, _ = jx
    tree = [{"a": 1, "b": (2, 3)}, {"a": 4, "b": (5, 6)}, {"a": 7, "b": (8, 9)}]
    outer = tnp.tree_util.tree_structure([0, 0, 0])
    inner = tnp.tree_util.tree_structure({"a": 0, "b": (0, 0)})
    expected = jax.tree_util.tree_transpose(jax.tree_util.tree_structure([0, 0, 0]),
                                            jax.tree_util.tree_structure({"a": 0, "b": (0, 0)}),
                                            tree)
    assert tree_util.tree_transpose(outer, inner, tree) == expected
    assert tnp.tree.transpose(outer, None, tree) == expected
    with pytest.raises(TiduError, match="tree_transpose: the subtree at leaf 1"):
        tree_util.tree_transpose(outer, inner, [tree[0], {"a": 1, "c": (2, 3)}, tree[2]])
    with pytest.raises(TiduError, match="tree_transpose: the trees' structures differ"):
        tree_util.tree_transpose(outer, inner, tree[:2])
    with pytest.raises(TiduError, match="tree_transpose: outer_treedef and inner_treedef "
                                        "must be TreeDefs"):
        tree_util.tree_transpose([0, 0], None, tree)


def test_register_static_is_part_of_the_structure(jx):
    jax, _ = jx

    @tree_util.register_static
    class Mode(str):
        pass

    traces = []

    @tnp.jit
    def f(x, mode):
        traces.append(mode)
        return x + 1 if mode == "add" else x - 1

    np.testing.assert_allclose(f(np.ones(2), Mode("add")), [2.0, 2.0])
    np.testing.assert_allclose(f(np.ones(2), Mode("sub")), [0.0, 0.0])
    f(np.ones(2), Mode("add"))
    assert traces == ["add", "sub"]
    assert tnp.tree_util.tree_leaves({"m": Mode("x"), "v": 1.0}) == [1.0]
    assert tree_util.treedef_is_leaf(tnp.tree_util.tree_structure(Mode("x")))
    with pytest.raises(TiduError, match="register_static: .*already a pytree node"):
        tree_util.register_static(Mode)

    class Unhashable:
        __hash__ = None

    with pytest.raises(TiduError, match="register_static: Unhashable is not hashable"):
        tree_util.register_static(Unhashable)


def test_treedef_is_leaf_matches_jax(jx):
    jax, _ = jx
    for tree in (1.0, None, (), [], {}, [1.0], (None,), {"a": 1}):
        assert tree_util.treedef_is_leaf(tnp.tree_util.tree_structure(tree)) == \
            jax.tree_util.treedef_is_leaf(jax.tree_util.tree_structure(tree)), tree
    with pytest.raises(TiduError, match="treedef_is_leaf: expected a TreeDef"):
        tree_util.treedef_is_leaf([1])
