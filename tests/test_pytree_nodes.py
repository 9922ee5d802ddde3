"""Registered pytree nodes (``tnp.tree_util``, JAX's ``jax.tree_util``): dataclasses, user
classes, ``OrderedDict`` and ``defaultdict`` through every transform, and the tree functions."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, defaultdict
from typing import Any

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import tree_util
from primitives.tensor.errors import BackwardError, TensorShapeError, TensorTypeError
from primitives.tensor.transforms.functional import FunctionalError
from tidu import TiduError

from tensor_helpers import numeric_grad


@tree_util.register_dataclass
@dataclasses.dataclass
class Params:
    w: Any
    b: Any
    activation: str = dataclasses.field(default="tanh", metadata={"static": True})


@dataclasses.dataclass
class Unregistered:
    w: Any


@tree_util.register_pytree_node_class
class Scaled:
    """A user class: ``value`` a child, ``scale`` its static part."""

    def __init__(self, value, scale):
        self.value, self.scale = value, scale

    def tree_flatten(self):
        return (self.value,), self.scale

    @classmethod
    def tree_unflatten(cls, scale, children):
        return cls(children[0], scale)


class Box:
    """Registered below with register_pytree_node; its unflatten refuses a negative tag."""

    def __init__(self, contents, tag):
        self.contents, self.tag = contents, tag


def _unflatten_box(tag, children):
    if tag < 0:
        raise ValueError("negative tag")
    return Box(list(children), tag)


tree_util.register_pytree_node(Box, lambda box: (box.contents, box.tag), _unflatten_box)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 2))
Y = RNG.normal(size=(4, 3))


def _params() -> Params:
    return Params(RNG.normal(size=(2, 3)), RNG.normal(size=3))


def loss(p: Params, x=X, y=Y):
    act = tnp.tanh if p.activation == "tanh" else tnp.sin
    return tnp.mean((act(x @ p.w + p.b) - y) ** 2)


def numeric_tree_grad(f, tree, eps=1e-6):
    """Central differences of scalar ``f`` for each leaf of ``tree``, as a tree like it."""
    leaves, structure = tree_util.tree_flatten(tree)
    grads = []
    for n, leaf in enumerate(leaves):
        def at(value, n=n):
            moved = list(leaves)
            moved[n] = value
            return f(tree_util.tree_unflatten(structure, moved))
        grads.append(numeric_grad(at, leaf, eps))
    return tree_util.tree_unflatten(structure, grads)


def assert_trees_close(got, want, **tolerance):
    got_leaves, got_structure = tree_util.tree_flatten(got)
    want_leaves, want_structure = tree_util.tree_flatten(want)
    assert got_structure == want_structure
    for a, b in zip(got_leaves, want_leaves):
        assert type(a) is np.ndarray
        np.testing.assert_allclose(a, b, **tolerance)


# ---- flatten, unflatten and the structure ---------------------------------------------------


def test_a_registered_dataclass_flattens_its_data_fields_and_keeps_its_meta_fields():
    p = Params(np.ones(2), np.zeros(1), "sin")
    leaves, structure = tree_util.tree_flatten(p)
    assert leaves[0] is p.w and leaves[1] is p.b and len(leaves) == 2
    assert repr(structure) == "Params[('sin',)](*, *)"
    back = tree_util.tree_unflatten(structure, [1, 2])
    assert back == Params(1, 2, "sin")
    # the meta fields are part of the structure: equal only for equal meta values
    assert structure != tree_util.tree_structure(Params(np.ones(2), np.zeros(1)))
    assert structure == tree_util.tree_structure(Params(3.0, 4.0, "sin"))
    assert hash(structure) == hash(tree_util.tree_structure(Params(3.0, 4.0, "sin")))


def test_register_pytree_node_and_node_class_follow_jax_signatures():
    leaves, structure = tree_util.tree_flatten(Box([1, (2, 3)], tag=7))
    assert leaves == [1, 2, 3]
    box = tree_util.tree_unflatten(structure, ["a", "b", "c"])
    assert type(box) is Box and box.contents == ["a", ("b", "c")] and box.tag == 7
    scaled = tree_util.tree_map(lambda v: v * 2, Scaled(np.array([1.0, 2.0]), 10))
    assert type(scaled) is Scaled and scaled.scale == 10
    np.testing.assert_array_equal(scaled.value, [2.0, 4.0])


def test_register_dataclass_with_explicit_fields_drop_fields_and_as_a_decorator_factory():
    @dataclasses.dataclass
    class Layer:
        kernel: Any
        name: str
        cache: Any = None

    tree_util.register_dataclass(Layer, data_fields=["kernel"], meta_fields=["name"],
                                 drop_fields=["cache"])
    leaves, structure = tree_util.tree_flatten(Layer(np.ones(1), "dense", cache="dropped"))
    assert len(leaves) == 1 and tree_util.tree_unflatten(structure, [5]) == Layer(5, "dense")

    @tree_util.register_dataclass(data_fields=["b", "a"], meta_fields=[])
    @dataclasses.dataclass
    class Pair:
        a: Any
        b: Any

    assert tree_util.tree_leaves(Pair(1, 2)) == [2, 1]        # data_fields' order

    class Plain:                                 # not a dataclass: fields given, kwargs init
        def __init__(self, x, tag):
            self.x, self.tag = x, tag

    tree_util.register_dataclass(Plain, ["x"], ["tag"])
    plain = tree_util.tree_map(lambda v: v + 1, Plain(1, "t"))
    assert (plain.x, plain.tag) == (2, "t")


def test_ordered_dict_keeps_insertion_order_and_defaultdict_sorts_and_keeps_its_factory():
    ordered = OrderedDict([("b", 1), ("a", 2)])
    leaves, structure = tree_util.tree_flatten(ordered)
    assert leaves == [1, 2]
    back = tree_util.tree_unflatten(structure, [10, 20])
    assert type(back) is OrderedDict and list(back.items()) == [("b", 10), ("a", 20)]
    assert structure != tree_util.tree_structure(OrderedDict([("a", 2), ("b", 1)]))
    assert structure != tree_util.tree_structure({"b": 1, "a": 2})

    counts = defaultdict(list, {"b": 1, "a": 2})
    leaves, structure = tree_util.tree_flatten(counts)
    assert leaves == [2, 1]
    back = tree_util.tree_unflatten(structure, [20, 10])
    assert type(back) is defaultdict and back.default_factory is list
    assert dict(back) == {"a": 20, "b": 10} and back["new"] == []
    assert structure != tree_util.tree_structure(defaultdict(int, {"b": 1, "a": 2}))
    assert repr(structure) == "defaultdict(list, {'a': *, 'b': *})"


def test_structures_match_jax_leaf_order(jx):
    jax, _ = jx

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class JaxParams:
        w: Any
        b: Any
        activation: str = dataclasses.field(default="tanh", metadata={"static": True})

    tree = [OrderedDict([("z", 1), ("a", (2, 3))]), defaultdict(int, {"y": 4, "x": 5})]
    assert tree_util.tree_leaves(tree) == jax.tree_util.tree_leaves(tree)
    assert tree_util.tree_leaves(Params(6, 7)) == jax.tree_util.tree_leaves(JaxParams(6, 7))


# ---- the tree functions --------------------------------------------------------------------


def test_tree_map_of_several_trees_a_prefix_and_is_leaf():
    got = tree_util.tree_map(lambda a, b: a + b, Params(1, [2, 3]), Params(10, [20, 30]))
    assert got == Params(11, [22, 33])
    # the second tree may hold whole subtrees where the first has leaves (JAX's prefix rule)
    assert tree_util.tree_map(lambda a, b: (a, b), [1, 2], [(3, 4), {"k": 5}]) == \
        [(1, (3, 4)), (2, {"k": 5})]
    assert tree_util.tree_map(lambda t: len(t), [(1, 2), (3,)],
                              is_leaf=lambda t: type(t) is tuple) == [2, 1]
    assert tree_util.tree_leaves([None, (1, None)]) == [1]


def test_tree_reduce_all_structure_and_the_short_names():
    tree = {"a": 1, "b": Params(2, 3)}
    assert tree_util.tree_reduce(lambda x, y: x + y, tree) == 6
    assert tree_util.tree_reduce(lambda x, y: x + y, tree, 100) == 106
    assert tree_util.tree_all([True, Params(1, True)]) and not tree_util.tree_all((1, 0))
    assert tree_util.tree_all([])
    assert tree_util.tree_structure(tree) == tree_util.tree_flatten(tree)[1]
    with pytest.raises(TensorTypeError, match="tree_reduce: .*initializer"):
        tree_util.tree_reduce(lambda x, y: x + y, [None])
    short = {"map": "tree_map", "leaves": "tree_leaves", "structure": "tree_structure",
             "flatten": "tree_flatten", "unflatten": "tree_unflatten", "reduce": "tree_reduce",
             "all": "tree_all"}
    for name, long in short.items():
        assert getattr(tnp.tree, name) is getattr(tree_util, long)


# ---- misuse: each a TiduError naming the type or the function ------------------------------


def test_registering_a_type_twice_or_a_builtin_node_is_refused():
    with pytest.raises(TensorTypeError, match="register_pytree_node: Params is already"):
        tree_util.register_pytree_node(Params, lambda p: ((), None), lambda a, c: None)
    with pytest.raises(TensorTypeError, match="register_dataclass: Scaled is already"):
        tree_util.register_dataclass(Scaled, ["value"], ["scale"])
    for builtin in (tuple, dict, OrderedDict, defaultdict):
        with pytest.raises(TensorTypeError, match="already a pytree node type"):
            tree_util.register_pytree_node(builtin, lambda x: ((), None), lambda a, c: None)
    with pytest.raises(TensorTypeError, match="ndarray is a pytree leaf"):
        tree_util.register_pytree_node(np.ndarray, lambda x: ((), None), lambda a, c: None)
    with pytest.raises(TensorTypeError, match="expected a class"):
        tree_util.register_pytree_node(Params(1, 2), lambda x: ((), None), lambda a, c: None)


def test_register_dataclass_checks_its_fields():
    @dataclasses.dataclass
    class Two:
        a: Any
        b: Any

    with pytest.raises(TensorTypeError, match=r"register_dataclass: .*Two.*missing \['b'\]"):
        tree_util.register_dataclass(Two, data_fields=["a"], meta_fields=[])
    with pytest.raises(TensorTypeError, match="both data_fields and meta_fields"):
        tree_util.register_dataclass(Two, data_fields=["a", "b"])
    with pytest.raises(TensorTypeError, match="both data and meta"):
        tree_util.register_dataclass(Two, data_fields=["a", "b"], meta_fields=["a"])

    class NotADataclass:
        pass

    with pytest.raises(TensorTypeError, match="NotADataclass is not a dataclass"):
        tree_util.register_dataclass(NotADataclass)


def test_unhashable_aux_data_failing_functions_and_mismatched_trees_are_named_errors():
    class Listy:
        def __init__(self, x):
            self.x = x

    tree_util.register_pytree_node(Listy, lambda v: ((v.x,), ["unhashable"]),
                                   lambda aux, children: Listy(*children))
    with pytest.raises(TensorTypeError, match="Listy returned aux_data of unhashable type list"):
        tree_util.tree_flatten(Listy(1))
    with pytest.raises(TensorTypeError, match="unflatten function _unflatten_box of pytree node "
                                              "type Box raised ValueError: negative tag"):
        tree_util.tree_map(lambda v: v, Box([1], tag=-1))

    class Broken:
        pass

    def broken_flatten(value):
        raise KeyError("no children")

    tree_util.register_pytree_node(Broken, broken_flatten, lambda aux, children: Broken())
    with pytest.raises(TensorTypeError, match="flatten function .*broken_flatten of pytree "
                                              "node type Broken raised KeyError"):
        tnp.grad(lambda b: 0.0)(Broken())
    with pytest.raises(TensorShapeError, match="tree_map: the trees' structures differ at .w"):
        tree_util.tree_map(lambda a, b: a, Params([1], 2), Params((1,), 2))
    with pytest.raises(TensorShapeError, match="tree_map: .*at the root"):
        tree_util.tree_map(lambda a, b: a, Params(1, 2), Params(1, 2, "sin"))
    with pytest.raises(TensorShapeError, match=r"tree_map: .*\['a'\]"):
        tree_util.tree_map(lambda a, b: a, {"a": (1, 2)}, {"a": (1,)})


def test_a_tidu_error_in_a_users_unflatten_keeps_its_class_and_names_the_type():
    class Strict:
        def __init__(self, x):
            self.x = x

    def unflatten(aux, children):
        raise BackwardError("refused")

    tree_util.register_pytree_node(Strict, lambda s: ((s.x,), None), unflatten)
    with pytest.raises(BackwardError) as caught:
        tree_util.tree_map(lambda v: v, Strict(1))
    assert isinstance(caught.value, TiduError)
    assert "unflatten function" in "".join(caught.value.__notes__)
    assert "Strict" in "".join(caught.value.__notes__)


# ---- the transforms ------------------------------------------------------------------------


def test_grad_of_a_dataclass_matches_finite_differences_and_jax(jx):
    jax, jnp = jx
    p = _params()
    g = tnp.grad(loss)(p)
    assert type(g) is Params and g.activation == "tanh"
    assert_trees_close(g, numeric_tree_grad(lambda q: float(loss(q)), p), rtol=1e-6,
                       atol=1e-8)

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class JaxParams:
        w: Any
        b: Any

    want = jax.grad(lambda q: jnp.mean((jnp.tanh(X @ q.w + q.b) - Y) ** 2))(JaxParams(p.w, p.b))
    np.testing.assert_allclose(g.w, want.w, rtol=1e-12)
    np.testing.assert_allclose(g.b, want.b, rtol=1e-12)


def test_the_meta_field_is_static_and_a_new_value_retraces_jit():
    traces = []

    def traced_loss(q):
        traces.append(q.activation)
        return loss(q)

    step = tnp.jit(tnp.value_and_grad(traced_loss))
    p = _params()
    value, g = step(p)
    np.testing.assert_allclose(value, loss(p), rtol=1e-12)
    assert_trees_close(g, tnp.grad(loss)(p), rtol=1e-12)
    step(Params(p.w + 1, p.b))                     # same structure: the compiled program
    assert traces == ["tanh"]
    sin_params = Params(p.w, p.b, "sin")
    value, g = step(sin_params)                    # a new aux_data: a new trace
    assert traces == ["tanh", "sin"]
    np.testing.assert_allclose(value, loss(sin_params), rtol=1e-12)
    assert_trees_close(g, numeric_tree_grad(lambda q: float(loss(q)), sin_params),
                       rtol=1e-6, atol=1e-8)


def test_has_aux_returns_a_dataclass_of_plain_arrays():
    def with_aux(q):
        hidden = tnp.tanh(X @ q.w + q.b)
        return tnp.mean((hidden - Y) ** 2), Params(hidden, tnp.sum(hidden), "stats")

    p = _params()
    g, aux = tnp.grad(with_aux, has_aux=True)(p)
    assert type(aux) is Params and aux.activation == "stats"
    assert type(aux.w) is np.ndarray and type(aux.b) is np.ndarray
    np.testing.assert_allclose(aux.w, np.tanh(X @ p.w + p.b), rtol=1e-12)
    assert_trees_close(g, tnp.grad(loss)(p), rtol=1e-12)


def test_an_unregistered_dataclass_is_refused_with_a_hint_not_leaked():
    with pytest.raises(FunctionalError, match="register_dataclass"):
        tnp.grad(lambda u: tnp.sum(u.w))(Unregistered(np.ones(2)))
    with pytest.raises(FunctionalError, match="aux a Unregistered that holds traced values.*"
                                              "register_dataclass"):
        tnp.grad(lambda x: (tnp.sum(x), Unregistered(x * 2)), has_aux=True)(np.ones(2))
    with pytest.raises(FunctionalError, match="returned Unregistered.*register_dataclass"):
        tnp.jit(lambda x: Unregistered(x))(np.ones(2))
    # an aux object that holds no traced value is passed as it is
    tag = Unregistered("label")
    assert tnp.grad(lambda x: (tnp.sum(x), tag), has_aux=True)(np.ones(2))[1] is tag


def test_vmap_takes_a_dataclass_prefix_for_in_axes_and_gives_per_example_gradients():
    p = _params()
    per_example = tnp.vmap(tnp.grad(lambda q, x, y: loss(q, x[None], y[None])),
                           in_axes=(Params(None, None), 0, 0))(p, X, Y)
    assert type(per_example) is Params and per_example.w.shape == (4, 2, 3)
    for i in range(4):
        one = tnp.grad(lambda q: loss(q, X[i:i + 1], Y[i:i + 1]))(p)
        np.testing.assert_allclose(per_example.w[i], one.w, rtol=1e-12)
        np.testing.assert_allclose(per_example.b[i], one.b, rtol=1e-12)
    batched = Params(RNG.normal(size=(5, 2, 3)), p.b)
    out = tnp.vmap(lambda q: tnp.sum(q.w, axis=0) + q.b, in_axes=(Params(0, None),))(batched)
    np.testing.assert_allclose(out, batched.w.sum(axis=1) + p.b, rtol=1e-12)
    with pytest.raises(FunctionalError, match="in_axes .* does not match"):
        tnp.vmap(lambda q: q.w, in_axes=(Params(0, None, "sin"),))(batched)


def test_vjp_and_jvp_with_dataclass_outputs_cotangents_and_tangents(jx):
    jax, jnp = jx
    x = RNG.normal(size=3)

    def f(v):
        return Params(tnp.sin(v) * v, tnp.sum(v ** 3))

    out, pullback = tnp.vjp(f, x)
    assert type(out) is Params
    ct = Params(RNG.normal(size=3), np.array(0.7))
    (got,) = pullback(ct)
    _, jax_pullback = jax.vjp(lambda v: (jnp.sin(v) * v, jnp.sum(v ** 3)), x)
    (want,) = jax_pullback((ct.w, ct.b))
    np.testing.assert_allclose(got, want, rtol=1e-12)

    p, t = _params(), _params()
    value, tangent = tnp.jvp(loss, (p,), (t,))
    eps = 1e-6
    fd = (loss(tree_util.tree_map(lambda a, b: a + eps * b, p, t))
          - loss(tree_util.tree_map(lambda a, b: a - eps * b, p, t))) / (2 * eps)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6)
    with pytest.raises(FunctionalError, match=r"jvp: tangents of structure .*Params\[\('sin',\)\]"):
        tnp.jvp(loss, (p,), (Params(t.w, t.b, "sin"),))


def test_custom_vjp_with_dataclass_arguments_residuals_outputs_and_cotangents():
    calls = []

    @tnp.custom_vjp
    def affine(q, x):
        return Params(x @ q.w, q.b)

    def affine_fwd(q, x):
        return affine(q, x), Params(x, q.w, "residuals")

    def affine_bwd(residuals, ct):
        calls.append(type(residuals).__name__)
        assert type(ct) is Params
        return Params(residuals.w.T @ ct.w, ct.b), ct.w @ residuals.b.T

    affine.defvjp(affine_fwd, affine_bwd)

    def objective(q, x):
        out = affine(q, x)
        return tnp.sum(tnp.tanh(out.w + out.b) ** 2)

    p = _params()
    g_p, g_x = tnp.grad(objective, argnums=(0, 1))(p, X)
    assert calls and all(kind == "Params" for kind in calls)
    plain = lambda q, x: np.sum(np.tanh(x @ q.w + q.b) ** 2)
    assert_trees_close(g_p, numeric_tree_grad(lambda q: plain(q, X), p), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g_x, numeric_grad(lambda x: plain(p, x), X), rtol=1e-6)

    @tnp.custom_vjp
    def wrong(q):
        return q.b

    wrong.defvjp(lambda q: (q.b, None), lambda res, ct: (Params(ct, ct, "other"),))
    with pytest.raises(FunctionalError, match="cotangent of argument 0 has structure "
                                              r"Params\[\('other',\)\]"):
        tnp.grad(lambda q: tnp.sum(wrong(q)))(p)


def test_odeint_with_a_dataclass_state_and_dataclass_args():
    def decay(state, t, rates):
        return Params(-rates.w * state.w, -rates.b * state.b)

    y0 = Params(np.array([1.0, 2.0]), np.array(3.0))
    rates = Params(np.array([0.5, 1.5]), np.array(0.2))
    ts = np.array([0.0, 1.0])
    path = tnp.odeint(decay, y0, ts, rates, rtol=1e-10, atol=1e-10)
    assert type(path) is Params
    np.testing.assert_allclose(path.w[1], y0.w * np.exp(-rates.w), rtol=1e-7)

    def final(y, r):
        end = tnp.odeint(decay, y, ts, r, rtol=1e-10, atol=1e-10)
        return tnp.sum(end.w[1] ** 2) + end.b[1]

    g_y, g_r = tnp.grad(final, argnums=(0, 1))(y0, rates)
    assert type(g_y) is Params and type(g_r) is Params
    # y(1) = y0 exp(-r): d/dy0 and d/dr of sum(y_w(1)^2) + y_b(1) in closed form
    np.testing.assert_allclose(g_y.w, 2 * y0.w * np.exp(-2 * rates.w), rtol=1e-6)
    np.testing.assert_allclose(g_y.b, np.exp(-rates.b), rtol=1e-6)
    np.testing.assert_allclose(g_r.w, -2 * y0.w ** 2 * np.exp(-2 * rates.w), rtol=1e-6)
    np.testing.assert_allclose(g_r.b, -y0.b * np.exp(-rates.b), rtol=1e-6)


def test_functional_optimizers_train_a_dataclass_as_they_train_a_dict():
    p = _params()
    as_dict = {"w": p.w, "b": p.b}
    optimizer = tnp.optim.adam(0.05)
    states = optimizer.init(p), optimizer.init(as_dict)
    params = p, as_dict
    dict_loss = lambda d: loss(Params(d["w"], d["b"]))
    for _ in range(5):
        updated = []
        new_states = []
        for q, state, f in zip(params, states, (loss, dict_loss)):
            updates, state = optimizer.update(tnp.grad(f)(q), state, q)
            updated.append(tnp.optim.apply_updates(q, updates))
            new_states.append(state)
        params, states = tuple(updated), tuple(new_states)
    trained, trained_dict = params
    assert type(trained) is Params
    np.testing.assert_allclose(trained.w, trained_dict["w"], rtol=1e-12)
    np.testing.assert_allclose(trained.b, trained_dict["b"], rtol=1e-12)
    assert loss(trained) < loss(p)
    with pytest.raises(TiduError, match="structure"):
        optimizer.update(tnp.grad(loss)(p), optimizer.init(Params(p.w, p.b, "sin")), p)

    from primitives.tensor.misc import optimizers
    x = optimizers.adam(lambda q, i: tnp.grad(loss)(q), p, num_iters=5, step_size=0.05)
    assert type(x) is Params
    np.testing.assert_allclose(x.w, trained.w, rtol=1e-10)


def test_ravel_pytree_of_a_dataclass_and_user_nodes():
    tree = [Params(np.arange(3.0), np.array(7.0)), Scaled(np.ones((1, 2)), 4),
            OrderedDict([("z", np.array(1.0)), ("a", np.array(2.0))])]
    flat, unravel = tnp.ravel_pytree(tree)
    np.testing.assert_array_equal(flat, [0, 1, 2, 7, 1, 1, 1, 2])
    back = unravel(flat * 10)
    assert type(back[0]) is Params and type(back[1]) is Scaled and back[1].scale == 4
    np.testing.assert_array_equal(back[0].w, [0, 10, 20])
    assert list(back[2]) == ["z", "a"]


def test_ordered_dict_defaultdict_and_a_node_class_through_grad_and_jit():
    ordered = OrderedDict([("w", np.array([1.0, 2.0])), ("b", np.array(3.0))])
    g = tnp.grad(lambda d: tnp.sum(d["w"] ** 2) * d["b"])(ordered)
    assert type(g) is OrderedDict and list(g) == ["w", "b"]
    np.testing.assert_allclose(g["w"], [6.0, 12.0])
    np.testing.assert_allclose(g["b"], 5.0)
    counts = defaultdict(float, ordered)
    g = tnp.jit(tnp.grad(lambda d: tnp.sum(d["w"] ** 2) * d["b"]))(counts)
    assert type(g) is defaultdict and g.default_factory is float
    np.testing.assert_allclose(g["w"], [6.0, 12.0])
    g = tnp.grad(lambda s: tnp.sum(s.value ** 2) * s.scale)(Scaled(np.array([1.0, 2.0]), 3.0))
    assert type(g) is Scaled and g.scale == 3.0
    np.testing.assert_allclose(g.value, [6.0, 12.0])


def test_jit_reads_a_closed_over_dataclass_at_each_call():
    held = Params(np.ones(2), np.array(0.0))
    f = tnp.jit(lambda x: tnp.sum(held.w * x) + held.b)
    assert float(f(np.ones(2))) == 2.0
    held.w = np.full(2, 5.0)
    assert float(f(np.ones(2))) == 10.0


def test_jacobians_and_hessian_of_a_dataclass_match_jax(jx):
    jax, jnp = jx

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class JaxParams:
        w: Any
        b: Any

    p = Params(np.array([1.0, 2.0]), np.array(0.3))
    f = lambda q, m: m.sum(m.sin(q.w) * q.b) + q.b ** 2
    pairs = [(tnp.jacrev, jax.jacrev), (tnp.jacfwd, jax.jacfwd), (tnp.hessian, jax.hessian)]
    for ours, theirs in pairs:
        got = ours(lambda q: f(q, tnp))(p)
        want = theirs(lambda q: f(q, jnp))(JaxParams(p.w, p.b))
        got_leaves = tree_util.tree_leaves(got)
        assert len(got_leaves) == len(jax.tree_util.tree_leaves(want))
        for a, b in zip(got_leaves, jax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(a, b, rtol=1e-12)
    hess = tnp.hessian(lambda q: f(q, tnp))(p)
    assert type(hess) is Params and type(hess.w) is Params


def test_custom_jvp_fixed_point_vmap_out_axes_and_checkpoint_take_a_dataclass():
    @tnp.custom_jvp
    def scale(q):
        return Params(q.w * q.b, q.b)

    @scale.defjvp
    def scale_jvp(primals, tangents):
        (q,), (t,) = primals, tangents
        return scale(q), Params(t.w * q.b + q.w * t.b, t.b)

    p = Params(np.array([1.0, 2.0]), np.array(3.0))
    g = tnp.grad(lambda q: tnp.sum(scale(q).w))(p)
    np.testing.assert_allclose(g.w, [3.0, 3.0])
    np.testing.assert_allclose(g.b, 3.0)

    # x = (x + a) / 2 at x = a: d sum(x.w) / da = 2 (two components)
    solve = lambda a: tnp.fixed_point(lambda a, x: Params(0.5 * x.w + 0.5 * a, 0.5 * x.b + a),
                                      a, Params(np.zeros(2), np.array(0.0)))
    assert type(solve(np.array(1.0))) is Params
    np.testing.assert_allclose(tnp.grad(lambda a: tnp.sum(solve(a).w))(np.array(1.0)), 2.0,
                               rtol=1e-6)

    out = tnp.vmap(lambda w: Params(w * 2, tnp.sum(w)), out_axes=Params(1, 0))(np.ones((3, 2)))
    assert out.w.shape == (2, 3) and out.b.shape == (3,)

    t = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    held = tnp.checkpoint(lambda q: Params(q.w * q.b, q.b))(Params(t, np.array(3.0)))
    assert type(held) is Params
    np.testing.assert_allclose(tnp.sum(held.w).backward().grad(t), [3.0, 3.0])


def test_an_unflatten_that_converts_to_numpy_raises_instead_of_dropping_the_derivative():
    @tree_util.register_dataclass
    @dataclasses.dataclass
    class Converting:
        w: Any

        def __post_init__(self):
            self.w = np.asarray(self.w, dtype=float)       # would drop a traced value's grad

    with pytest.raises(TensorTypeError, match="drop its derivative") as caught:
        tnp.grad(lambda c: tnp.sum(c.w ** 2))(Converting(np.ones(2)))
    assert "unflatten function" in "".join(caught.value.__notes__)
    with pytest.raises(TiduError, match="not known while it traces"):
        tnp.jit(lambda c: tnp.sum(c.w ** 2))(Converting(np.ones(2)))
