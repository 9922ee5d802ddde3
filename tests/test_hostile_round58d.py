"""Round 58d, hostile: ``tnp.lax`` and the registered pytree nodes tested as an expert JAX
user would, against ``jax.lax`` and ``jax.tree_util``. Each test here failed before its fix."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import lax, tree_util
from primitives.tensor.errors import TensorShapeError, TensorTypeError

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

BRANCHES = [lambda: np.array(10.0), lambda: np.array(20.0), lambda: np.array(30.0)]


# --- lax ---------------------------------------------------------------------------------


@pytest.mark.parametrize("index", [0.5, 1.7, 1j, True])
def test_switch_refuses_an_index_that_is_not_an_integer_known_traced_or_batched(index):
    # a traced float index used to pick a branch by equality after clipping: 0.5 and 1.7
    # both ran the last branch, silently (JAX refuses any index that is not an integer)
    with pytest.raises(TypeError, match="Index type must be an integer"):
        jax.jit(lambda i: jax.lax.switch(i, BRANCHES))(index)
    with pytest.raises(TensorTypeError, match="switch: the index must be an integer"):
        lax.switch(index, BRANCHES)
    with pytest.raises(TensorTypeError, match="switch: the index must be an integer"):
        tnp.jit(lambda i: lax.switch(i, BRANCHES))(index)
    with pytest.raises(TensorTypeError, match="switch: the index must be an integer"):
        tnp.vmap(lambda i: lax.switch(i, BRANCHES))(np.array([index, index]))


def test_switch_still_takes_integer_indices_of_any_integer_dtype():
    for index in (np.int8(1), np.uint32(7), np.int64(-3), 1):
        want = jax.lax.switch(index, BRANCHES)
        assert lax.switch(index, BRANCHES) == want
        assert tnp.jit(lambda i: lax.switch(i, BRANCHES))(index) == want
    np.testing.assert_array_equal(
        tnp.vmap(lambda i: lax.switch(i, BRANCHES))(np.array([-1, 0, 1, 2, 9], np.int32)),
        [10.0, 10.0, 20.0, 30.0, 30.0])


@pytest.mark.parametrize("pred", [None, "yes", 1j])
def test_a_predicate_that_is_not_a_boolean_or_real_number_is_refused(pred):
    # None and "" were read as false, any other string as true; a traced complex 1j took
    # the false branch (where's truth of a complex differs from bool's)
    with pytest.raises(TypeError):
        jax.lax.cond(pred, lambda: 1.0, lambda: 2.0)
    with pytest.raises(TensorTypeError, match="cond: the predicate must be a boolean or a real"):
        lax.cond(pred, lambda: 1.0, lambda: 2.0)
    with pytest.raises(TensorTypeError, match="while_loop: cond_fun's result must be a "
                                              "boolean or a real"):
        lax.while_loop(lambda v: pred, lambda v: v + 1.0, 0.0)
    if pred is not None:
        with pytest.raises(TensorTypeError, match="cond: the predicate must be a boolean"):
            tnp.jit(lambda p: lax.cond(p, *BRANCHES[:2]))(np.asarray(pred))


def test_real_predicates_keep_jaxs_truth():
    assert lax.cond(2**70, *BRANCHES[:2]) == 10.0             # a Python int, by its type
    for pred in (0.5, -1, 2, np.float32(0.0), np.array(True)):
        want = jax.lax.cond(pred, *BRANCHES[:2])
        assert lax.cond(pred, *BRANCHES[:2]) == want
        assert tnp.jit(lambda p: lax.cond(p, *BRANCHES[:2]))(pred) == want


def test_functions_that_are_not_callable_are_refused_by_name():
    x = np.ones(2)
    cases = [
        ("cond: true_fun must be a function", lambda: lax.cond(True, 1, 2, x)),
        ("cond: false_fun must be a function", lambda: lax.cond(True, tnp.sin, None, x)),
        ("switch: branches must be a non-empty sequence of functions, got function",
         lambda: lax.switch(0, tnp.sin, x)),
        ("fori_loop: body_fun must be a function", lambda: lax.fori_loop(0, 2, None, x)),
        ("while_loop: cond_fun must be a function", lambda: lax.while_loop(1, tnp.sin, x)),
        ("while_loop: body_fun must be a function",
         lambda: lax.while_loop(lambda v: False, "body", x)),
        ("scan: f must be a function", lambda: lax.scan(None, 0.0, x)),
        ("map: f must be a function", lambda: lax.map(None, x)),
    ]
    for message, call in cases:
        with pytest.raises(TensorTypeError, match=message):
            call()


def test_a_length_zero_scan_checks_its_carry_as_jax_does():
    # the step is traced once for the shapes of y: its carry must keep the carry's types
    with pytest.raises(TypeError, match="carry input and carry output must have equal types"):
        jax.lax.scan(lambda c, x: (c[:1], x), np.zeros(2), np.zeros((0, 2)))
    with pytest.raises(TensorShapeError, match="scan: the carry must keep its shapes"):
        lax.scan(lambda c, x: (c[:1], x), np.zeros(2), np.zeros((0, 2)))
    with pytest.raises(TensorTypeError, match="scan: f must return a pair"):
        lax.scan(lambda c, x: c, np.zeros(2), np.zeros((0, 2)))
    carry, ys = lax.scan(lambda c, x: (c + x, (x, c)), np.ones(2), np.zeros((0, 2)))
    np.testing.assert_array_equal(carry, [1.0, 1.0])
    assert ys[0].shape == ys[1].shape == (0, 2)


def test_a_negative_scan_length_is_refused_by_name():
    with pytest.raises(TensorShapeError, match="scan: length must not be negative, got -1"):
        lax.scan(lambda c, x: (c, x), 0.0, None, length=-1)


def test_scan_takes_a_list_pair_as_jax_does():
    step = lambda c, x: [c + x, c * x]                                   # noqa: E731
    xs = np.arange(1.0, 4.0)
    carry, ys = lax.scan(step, 1.0, xs)
    want_carry, want_ys = jax.lax.scan(step, 1.0, xs)
    assert carry == want_carry
    np.testing.assert_array_equal(ys, want_ys)
    grad = tnp.grad(lambda xs: tnp.sum(lax.scan(step, 1.0, xs)[1]))(xs)
    want = jax.grad(lambda xs: jnp.sum(jax.lax.scan(step, 1.0, xs)[1]))(xs)
    np.testing.assert_allclose(grad, want)


def test_a_carry_may_hold_objects_that_are_not_arrays():
    # a name or a function riding in the carry: results were copied through NumPy's clone,
    # which raised a bare AttributeError ('str' object has no attribute 'copy')
    x = np.array([1.0, 2.0])
    carry, ys = lax.scan(lambda c, v: ((c[0], c[1] + v), v * 2), ("tag", 0.0), x)
    assert carry == ("tag", 3.0)
    out = lax.fori_loop(0, 2, lambda i, c: (c[0], c[1] * 2), (tnp.sin, x))
    assert out[0] is tnp.sin and not np.shares_memory(out[1], x)
    out = lax.cond(True, lambda c: c, lambda c: c, ("tag", x))
    assert out[0] == "tag" and not np.shares_memory(out[1], x)


def test_scan_stacks_ys_of_every_dtype_as_jax_does():
    # ys of NumPy arrays are stacked by NumPy directly (no op per step): same dtypes
    xs = np.arange(1.0, 4.0, dtype=np.float32)
    step = lambda c, x: (c * x, (c, c > 2, (c * 2).astype(np.int16), 1.5))   # noqa: E731
    carry, ys = lax.scan(step, np.float32(1.0), xs)
    want_carry, want_ys = jax.lax.scan(step, np.float32(1.0), xs)
    assert carry.dtype == np.float32 and carry == want_carry
    for y, want in zip(ys, want_ys):
        np.testing.assert_array_equal(y, want)
        assert y.dtype == want.dtype or (y.dtype == np.float64 and want.weak_type)
    assert not np.shares_memory(ys[0], xs)


# --- pytree nodes -------------------------------------------------------------------------


def test_two_threads_registering_one_type_at_once_the_second_is_refused():
    # the check ("already registered?") and the registration were not one step: two threads
    # that both checked before either registered both succeeded, the second silently
    # replacing the first's functions. A metaclass whose hash sleeps makes them overlap.
    import threading
    import time

    class SlowHash(type):
        def __hash__(cls):
            time.sleep(0.02)
            return id(cls) >> 4

    class Node(metaclass=SlowHash):
        def __init__(self, x):
            self.x = x

    outcomes = []

    def register(tag):
        try:
            tree_util.register_pytree_node(Node, lambda n: ((n.x,), tag),
                                           lambda aux, children: Node(*children))
            outcomes.append("registered")
        except TensorTypeError as error:
            outcomes.append(str(error))

    threads = [threading.Thread(target=register, args=(tag,)) for tag in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes)[-1] == "registered"
    assert "register_pytree_node: Node is already a pytree node type" in sorted(outcomes)[0]


@pytest.mark.parametrize("kind", ["namedtuple", "list"])
def test_nesting_700_deep_flattens_and_unflattens(kind):
    # one frame for each level (was two: a comprehension or generator per node), so nesting
    # as deep as 700 (JAX's C++ goes deeper) round-trips under the default recursion limit
    from typing import NamedTuple

    class Pair(NamedTuple):
        left: object
        right: object

    tree = 0.0
    for depth in range(1, 700):
        tree = Pair(tree, float(depth)) if kind == "namedtuple" else [tree, float(depth)]
    leaves, structure = tree_util.tree_flatten(tree)
    assert leaves == [float(n) for n in range(700)]
    back = tree_util.tree_unflatten(structure, leaves)
    assert tree_util.tree_leaves(back) == leaves


def test_a_structure_has_jaxs_num_leaves_and_unflatten():
    from collections import OrderedDict

    for tree in ({"b": (1, None, [2]), "a": OrderedDict(z=3, y=4)}, None, 5, [(), {}]):
        structure, want = tree_util.tree_structure(tree), jax.tree_util.tree_structure(tree)
        assert structure.num_leaves == want.num_leaves
        leaves = list(range(want.num_leaves))
        assert structure.unflatten(leaves) == want.unflatten(leaves)


def test_key_paths_match_jaxs_for_every_kind_of_node():
    # tree_flatten_with_path, tree_map_with_path, keystr were missing (AttributeError)
    import dataclasses
    from collections import OrderedDict, defaultdict, namedtuple
    from typing import Any

    jtu = jax.tree_util
    Point = namedtuple("Point", "x y")

    def make(register):
        @dataclasses.dataclass
        class Layer:
            w: Any
            b: Any
            name: str = dataclasses.field(default="l", metadata={"static": True})

        register(Layer)
        return Layer

    class Box:
        def __init__(self, *items):
            self.items = items

    for register in (tree_util.register_pytree_node, jtu.register_pytree_node):
        register(Box, lambda box: (box.items, None), lambda _, items: Box(*items))
    ours, theirs = make(tree_util.register_dataclass), make(jtu.register_dataclass)

    def tree(layer):
        return {"z": [1, (2, None)], "a": Point(3, {"k": 4}),
                "o": OrderedDict([("q", 5), ("p", layer(6, [7]))]),
                "d": defaultdict(list, {"m": 8}), "box": Box(9, [10])}

    pairs, structure = tree_util.tree_flatten_with_path(tree(ours))
    want_pairs, want_structure = jtu.tree_flatten_with_path(tree(theirs))
    assert [leaf for _, leaf in pairs] == [leaf for _, leaf in want_pairs]
    assert structure == tree_util.tree_structure(tree(ours))
    for (path, _), (want_path, _) in zip(pairs, want_pairs):
        assert tree_util.keystr(path) == jtu.keystr(want_path)
        assert tree_util.keystr(path, simple=True, separator="/") == \
            jtu.keystr(want_path, simple=True, separator="/")
        assert repr(path) == repr(want_path)
    mapped = tree_util.tree_map_with_path(lambda p, x, y: (tree_util.keystr(p), x + y),
                                          tree(ours), tree(ours))
    want = jtu.tree_map_with_path(lambda p, x, y: (jtu.keystr(p), x + y),
                                  tree(theirs), tree(theirs))
    assert tree_util.tree_leaves(mapped) == jtu.tree_leaves(want)
    assert tnp.tree.leaves_with_path([1, {"w": 2}]) == \
        [((tree_util.SequenceKey(0),), 1),
         ((tree_util.SequenceKey(1), tree_util.DictKey("w")), 2)]
    is_pair = lambda x: isinstance(x, tuple) and len(x) == 2        # noqa: E731
    assert [tree_util.keystr(p) for p, _ in tree_util.tree_leaves_with_path(
        tree(ours), is_leaf=is_pair)] == [jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(
            tree(theirs), is_leaf=is_pair)]


def test_a_traced_cond_keeps_equal_non_array_leaves_and_names_itself_for_others():
    # a name riding along with the arrays reached where(), whose error named where
    def branches(tag_true, tag_false):
        return (lambda v: (tag_true, v * 2.0, tnp.sin)), (lambda v: (tag_false, -v, tnp.sin))

    seen = []

    def f(p, x):
        tag, y, fn = lax.cond(p, *branches("tag", "tag"), x)
        seen.append((tag, fn))
        return y

    np.testing.assert_array_equal(tnp.jit(f)(True, np.ones(2)), [2.0, 2.0])
    assert seen == [("tag", tnp.sin)]
    with pytest.raises(TensorTypeError, match="cond: leaf 0 of the results is 'a' in one "
                                              "branch and 'b' in another"):
        tnp.jit(lambda p, x: lax.cond(p, *branches("a", "b"), x))(True, np.ones(2))
    with pytest.raises(TensorTypeError, match="switch: leaf 0 of the results"):
        tnp.vmap(lambda i, x: lax.switch(i, branches("a", "b"), x))(np.array([0, 1]),
                                                                     np.ones((2, 2)))
