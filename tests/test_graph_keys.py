"""Structural value keys: identity across independently built graphs, roles, interning."""

from __future__ import annotations

import gc
import itertools
import math
import pickle
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tidu
from tidu.graph import (
    PRIMARY,
    Derived,
    External,
    GraphBuilder,
    Input,
    Linearized,
    Local,
    OperationKey,
    ValueKey,
    evaluate,
    keys,
)

from graph_ops import ScalarOp, Scale, Shift, build_chain, reference_eval

_fresh = itertools.count()


def fresh(prefix: str) -> str:
    """An input name no other test has interned yet."""
    return f"{prefix}-{next(_fresh)}"


def sin_mul_graph(builder: GraphBuilder, x_name="x", c_name="c"):
    """``y = sin(x) * x + c``; returns the local ids ``[s, m, y]``."""
    x = builder.add_input(x_name)
    c = builder.add_input(c_name)
    [s] = builder.add_operation(ScalarOp.SIN, [Local(x)])
    [m] = builder.add_operation(ScalarOp.MUL, [Local(s), Local(x)])
    [y] = builder.add_operation(ScalarOp.ADD, [Local(m), Local(c)])
    builder.set_outputs([y])
    return [s, m, y]


# --- Input keys ------------------------------------------------------------------


def test_input_keys_are_interned_by_user_key():
    assert Input("x") is Input("x")
    assert Input(("a", 1)) is Input(("a", 1))
    assert Input("x") is not Input("y")
    assert Input("x").key == "x"
    assert isinstance(Input("x"), ValueKey)
    assert hash(Input("x")) == hash(Input("x"))
    assert repr(Input("x")) == "Input('x')"


def test_input_key_repr_is_bounded():
    assert len(repr(Input("x" * 10_000))) < 100


# --- structural identity across builders --------------------------------------------


def test_equal_structure_gives_identical_keys_across_builders():
    b1, b2 = GraphBuilder(), GraphBuilder()
    ids1, ids2 = sin_mul_graph(b1), sin_mul_graph(b2)
    g1, g2 = b1.build(), b2.build()
    for i1, i2 in zip(ids1, ids2):
        k1, k2 = g1.values[i1].key, g2.values[i2].key
        assert k1 is k2
        assert k1 == k2 and hash(k1) == hash(k2)
        assert k1.operation is k2.operation
    assert g1.value_keys == g2.value_keys
    assert g1.operation_keys == g2.operation_keys


def test_keys_do_not_depend_on_local_ids():
    """Adding the inputs in another order (so local ids differ) gives the same keys."""
    b1 = GraphBuilder()
    ids1 = sin_mul_graph(b1)
    b2 = GraphBuilder()
    b2.add_input("unrelated")
    b2.add_input("c")
    ids2 = sin_mul_graph(b2)
    assert ids1 != ids2
    assert [b1.global_key(i) for i in ids1] == [b2.global_key(i) for i in ids2]
    for i1, i2 in zip(ids1, ids2):
        assert b1.global_key(i1) is b2.global_key(i2)


def test_operation_key_fields_describe_the_structure():
    b = GraphBuilder()
    s, m, y = sin_mul_graph(b)
    key = b.global_key(y)
    assert type(key) is Derived and key.output_slot == 0
    op_key = key.operation
    assert isinstance(op_key, OperationKey)
    assert op_key.operation is ScalarOp.ADD
    assert op_key.inputs == (b.global_key(m), Input("c"))
    assert op_key.role is PRIMARY
    # A key built by hand from the same structure is the very same object.
    by_hand = OperationKey(ScalarOp.ADD, (b.global_key(m), Input("c")), PRIMARY)
    assert by_hand is op_key
    assert Derived(by_hand, 0) is key


def test_different_op_gives_different_key():
    b = GraphBuilder()
    x = b.add_input("x")
    [a] = b.add_operation(ScalarOp.SIN, [Local(x)])
    [c] = b.add_operation(ScalarOp.COS, [Local(x)])
    assert b.global_key(a) is not b.global_key(c)
    assert b.global_key(a) != b.global_key(c)
    assert a != c


def test_different_inputs_give_different_keys():
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    [sx] = b.add_operation(ScalarOp.SIN, [Local(x)])
    [sy] = b.add_operation(ScalarOp.SIN, [Local(y)])
    assert b.global_key(sx) != b.global_key(sy)
    # Input order matters: ADD(x, y) and ADD(y, x) are different operations.
    [xy] = b.add_operation(ScalarOp.SUB, [Local(x), Local(y)])
    [yx] = b.add_operation(ScalarOp.SUB, [Local(y), Local(x)])
    assert b.global_key(xy) != b.global_key(yx)
    assert xy != yx


def test_different_roles_give_different_keys():
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    [p] = b.add_operation(ScalarOp.MUL, [Local(x), Local(y)])
    [l1] = b.add_operation(ScalarOp.MUL, [Local(x), Local(y)], role=Linearized((True, False)))
    [l2] = b.add_operation(ScalarOp.MUL, [Local(x), Local(y)], role=Linearized((False, True)))
    [l1_again] = b.add_operation(ScalarOp.MUL, [Local(x), Local(y)], Linearized([True, False]))
    keys_ = [b.global_key(i) for i in (p, l1, l2)]
    assert len(set(keys_)) == 3
    assert len({p, l1, l2}) == 3
    assert l1_again == l1
    assert b.global_key(l1).operation.role is Linearized((True, False))
    assert b.global_key(p).operation.role is PRIMARY


def test_different_slots_give_different_keys():
    b = GraphBuilder()
    x = b.add_input("x")
    s, c = b.add_operation(ScalarOp.SINCOS, [Local(x)])
    ks, kc = b.global_key(s), b.global_key(c)
    assert ks is not kc
    assert ks.operation is kc.operation
    assert (ks.output_slot, kc.output_slot) == (0, 1)
    assert ks.operation.output_keys() == (ks, kc)
    assert Derived(ks.operation, 1) is kc


def test_roles():
    assert repr(PRIMARY) == "PRIMARY"
    assert Linearized((True, False)) is Linearized([True, False])
    assert Linearized((True, False)) is not Linearized((False, True))
    assert Linearized((True, False)) != PRIMARY
    assert Linearized((True, False)).active_mask == (True, False)
    assert repr(Linearized((True, False))) == "Linearized(T.)"
    assert pickle.loads(pickle.dumps(PRIMARY)) is PRIMARY
    assert pickle.loads(pickle.dumps(Linearized((False, True)))) is Linearized((False, True))


def test_linearized_rejects_non_bool_masks_whatever_was_interned_before():
    Linearized((True, False))  # an equal bool mask is already interned
    with pytest.raises(tidu.TiduError, match=r"\(1, 0\)"):
        Linearized((1, 0))
    with pytest.raises(tidu.TiduError):
        Linearized((1, 2))


def test_frozen_dataclass_ops_equal_by_value_give_same_keys():
    b1, b2 = GraphBuilder(), GraphBuilder()
    x1, x2 = b1.add_input("x"), b2.add_input("x")
    [a] = b1.add_operation(Scale(2.0), [Local(x1)])
    [b] = b2.add_operation(Scale(2.0), [Local(x2)])   # a different but equal object
    [c] = b2.add_operation(Scale(3.0), [Local(x2)])
    assert b1.global_key(a) is b2.global_key(b)
    assert b2.global_key(c) is not b2.global_key(b)


def test_unequal_ops_with_equal_hashes_get_distinct_stable_keys():
    assert hash(Scale(2.0)) == hash(Shift(2.0)) and Scale(2.0) != Shift(2.0)
    name = fresh("collide")
    scale = OperationKey(Scale(2.0), (Input(name),), PRIMARY)
    shift = OperationKey(Shift(2.0), (Input(name),), PRIMARY)
    assert scale is not shift
    assert scale.operation == Scale(2.0) and shift.operation == Shift(2.0)
    assert OperationKey(Shift(2.0), (Input(name),), PRIMARY) is shift
    assert OperationKey(Scale(2.0), (Input(name),), PRIMARY) is scale
    # With the first-interned key dead, both still resolve to the right (single) key.
    del scale
    gc.collect()
    scale2 = OperationKey(Scale(2.0), (Input(name),), PRIMARY)
    assert scale2.operation == Scale(2.0)
    assert OperationKey(Shift(2.0), (Input(name),), PRIMARY) is shift
    assert OperationKey(Scale(2.0), (Input(name),), PRIMARY) is scale2


class _ExtremeHash:
    """An op label whose ``__hash__`` is far outside 64 bits (Python folds it into range)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        return -(2**100) if self.name == "low" else 2**100

    def __eq__(self, other) -> bool:
        return isinstance(other, _ExtremeHash) and other.name == self.name


@pytest.mark.parametrize("count", [0, 1, 2, 3, 7])
def test_keys_tell_input_count_order_role_and_extreme_hashes_apart(count):
    a, b = Input(fresh("a")), Input(fresh("b"))
    inputs = tuple(itertools.islice(itertools.cycle((a, b)), count))
    key = OperationKey("op", inputs, PRIMARY)
    assert OperationKey("op", inputs, PRIMARY) is key
    assert OperationKey("op", inputs + (a,), PRIMARY) is not key          # one more input
    assert OperationKey("op", inputs, Linearized((True,) * count)) is not key
    if count >= 2:
        swapped = (inputs[1], inputs[0]) + inputs[2:]
        assert OperationKey("op", swapped, PRIMARY) is not key
    for name in ("low", "high"):
        extreme = OperationKey(_ExtremeHash(name), inputs, PRIMARY)
        assert OperationKey(_ExtremeHash(name), inputs, PRIMARY) is extreme
        assert extreme.operation.name == name

def test_cse_key_via_external_equals_local():
    """An External naming a value of the same builder is the same operation as the Local."""
    b = GraphBuilder()
    x = b.add_input("x")
    [a] = b.add_operation(ScalarOp.SIN, [Local(x)])
    before = len(b)
    assert b.add_operation(ScalarOp.SIN, [External(Input("x"))]) == [a]
    assert len(b) == before



def test_display_numbers_are_given_when_first_shown_then_kept_and_unique():
    """A key's display number (``#n``, ``%n``) costs nothing until it is shown (no int object
    per key), then stays the same and differs from every other key's, across threads."""
    from tidu.graph import FreshInput

    op_keys = [OperationKey(ScalarOp.NEG, (Input(("display", i)),), PRIMARY) for i in range(50)]
    fresh_keys = [FreshInput() for _ in range(50)]
    from tidu.graph.keys import _op_serials

    assert not any(k in _op_serials for k in op_keys)            # not given at creation
    assert not any(hasattr(k, "_key") for k in fresh_keys)
    shown: list = []

    def show():
        shown.append(([k.serial for k in op_keys], [repr(k) for k in fresh_keys]))

    threads = [threading.Thread(target=show) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(seen == shown[0] for seen in shown)                  # one number per key
    serials, fresh_reprs = shown[0]
    assert len(set(serials)) == len(serials) and len(set(fresh_reprs)) == len(fresh_reprs)
    assert [repr(k) for k in op_keys] == [f"NEG#{n}" for n in serials]


# --- repr and pickling --------------------------------------------------------------


def test_key_reprs_are_short_and_name_op_slot_and_serial():
    b = GraphBuilder()
    x = b.add_input("x")
    s, c = b.add_operation(ScalarOp.SINCOS, [Local(x)])
    [lin] = b.add_operation(ScalarOp.NEG, [Local(c)], role=Linearized((True,)))
    kc = b.global_key(c)
    serial = kc.operation.serial
    assert repr(kc) == f"Derived(SINCOS#{serial}:1)"
    assert repr(kc.operation) == f"SINCOS#{serial}"
    assert repr(b.global_key(lin)).startswith("Derived(NEG[Linearized(T)]#")


def test_shallow_keys_pickle_to_the_same_objects():
    b = GraphBuilder()
    ids = sin_mul_graph(b)
    for local_id in ids:
        key = b.global_key(local_id)
        assert pickle.loads(pickle.dumps(key)) is key
    assert pickle.loads(pickle.dumps(Input("x"))) is Input("x")


# --- memory: keys of dead graphs are freed ------------------------------------------


def _table_size() -> int:
    return len(keys._op_table) + len(keys._input_table) + len(keys._collisions)


def test_keys_of_dead_graphs_are_freed():
    gc.collect()
    baseline = keys.interned_count()
    # The tables are swept once the deaths since the last sweep outnumber half their
    # entries: dropping more keys than are alive guarantees that.
    n = max(20_000, baseline + 1_000)
    builder, last = build_chain(n, ScalarOp.SIN, input_name=fresh("dead"))
    graph = builder.build()
    assert keys.interned_count() >= baseline + n
    assert _table_size() >= baseline + n
    deepest = graph.values[last].key

    del builder, graph, deepest
    gc.collect()
    # The intern tables hold keys weakly: the dead keys are gone at once ...
    assert keys.interned_count() <= baseline + 10
    # ... and the tables drop their dead entries on a later interning call.
    survivors = [Input(fresh("sweep")) for _ in range(3)]
    survivors.append(OperationKey(ScalarOp.NEG, (survivors[0],), PRIMARY))
    assert keys.interned_count() <= baseline + 20
    assert _table_size() <= keys.interned_count() + 10


def test_shared_prefix_survives_when_one_graph_dies():
    name = fresh("shared")
    b1, last1 = build_chain(50, ScalarOp.COS, input_name=name)
    g1 = b1.build()
    b2, last2 = build_chain(50, ScalarOp.COS, input_name=name)
    key = b2.global_key(last2)
    del b1, g1
    gc.collect()
    b3, last3 = build_chain(50, ScalarOp.COS, input_name=name)
    assert b3.global_key(last3) is key


# --- threads ------------------------------------------------------------------------


def test_concurrent_builders_get_identical_keys():
    n_threads, n_steps = 8, 1500
    name = fresh("threads")
    barrier = threading.Barrier(n_threads)
    results: list = [None] * n_threads
    errors: list = []

    def work(slot: int) -> None:
        try:
            b = GraphBuilder()
            barrier.wait()
            x = b.add_input(name)
            c = b.add_input(name + "-c")
            y = x
            for step in range(n_steps):
                [s] = b.add_operation(ScalarOp.SIN, [Local(y)])
                [m] = b.add_operation(Scale(float(step % 7)), [Local(s)])
                [y] = b.add_operation(ScalarOp.ADD, [Local(m), Local(c)])
            results[slot] = b.build()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors
    first = results[0]
    assert len(first.values) == 2 + 3 * n_steps
    for graph in results[1:]:
        assert len(graph.value_keys) == len(first.value_keys)
        assert all(a is b for a, b in zip(graph.value_keys, first.value_keys))
        assert all(a is b for a, b in zip(graph.operation_keys, first.operation_keys))


# --- hypothesis: random DAGs ---------------------------------------------------------

_OPS = [ScalarOp.NEG, ScalarOp.SIN, ScalarOp.COS, ScalarOp.ADD, ScalarOp.MUL,
        ScalarOp.SUB, ScalarOp.SINCOS, Scale(0.5), Scale(-2.0), Shift(0.5)]

# A step is (op, picks): each pick chooses an earlier value, modulo how many exist.
_steps = st.lists(
    st.tuples(st.sampled_from(_OPS), st.lists(st.integers(0, 1000), min_size=2, max_size=2)),
    min_size=1, max_size=25,
)


def _build(steps, input_names, input_order, prefix_junk=0):
    """Build the DAG; return (builder, keys of every step's outputs).

    ``input_order`` is the order in which inputs are added to the builder;
    values are always picked by their position in ``input_names`` + step outputs.
    """
    b = GraphBuilder()
    for j in range(prefix_junk):
        junk = b.add_input(("junk", j))
        b.add_operation(ScalarOp.NEG, [Local(junk)])
    ids = {name: b.add_input(name) for name in input_order}
    values = [ids[name] for name in input_names]
    step_keys = []
    for op, picks in steps:
        args = [Local(values[p % len(values)]) for p in picks[: op.input_count()]]
        outs = b.add_operation(op, args)
        values.extend(outs)
        step_keys.append(tuple(b.global_key(i) for i in outs))
    b.set_outputs(values)
    return b, values, step_keys


def _reference(steps, inputs):
    values = list(inputs)
    for op, picks in steps:
        args = [values[p % len(values)] for p in picks[: op.input_count()]]
        values.extend(reference_eval(op, args))
    return values


def _same_number(a, b) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@settings(max_examples=60, deadline=None)
@given(steps=_steps, xs=st.lists(st.floats(-3, 3), min_size=3, max_size=3))
def test_random_dags_built_twice_give_identical_keys_and_results(steps, xs):
    names = ["a", "b", "c"]
    b1, values1, keys1 = _build(steps, names, names)
    b2, values2, keys2 = _build(steps, names, names)
    assert values1 == values2
    for k1, k2 in zip(keys1, keys2):
        assert all(x is y for x, y in zip(k1, k2))
    g1, g2 = b1.build(), b2.build()
    assert g1.operation_keys == g2.operation_keys
    # one node per distinct structure
    assert len(set(g1.operation_keys)) == len(g1.operations)
    assert len(set(g1.value_keys)) == len(g1.values)

    inputs = {Input(n): x for n, x in zip(names, xs)}
    out_keys = [k for ks in keys1 for k in ks]
    r1 = evaluate(g1, out_keys, inputs)
    r2 = evaluate(g2, out_keys, inputs)
    expected = _reference(steps, xs)[len(names):]
    assert len(r1) == len(expected)
    assert all(_same_number(p, q) for p, q in zip(r1, r2))
    assert all(_same_number(p, q) for p, q in zip(r1, expected))


@settings(max_examples=60, deadline=None)
@given(steps=_steps, order=st.permutations(["a", "b", "c"]), junk=st.integers(0, 3))
def test_random_dags_with_permuted_inputs_give_the_same_keys(steps, order, junk):
    names = ["a", "b", "c"]
    _, _, keys1 = _build(steps, names, names)
    b2, values2, keys2 = _build(steps, names, list(order), prefix_junk=junk)
    for k1, k2 in zip(keys1, keys2):
        assert all(x is y for x, y in zip(k1, k2))
    # keys are independent of local ids: the builder maps each key back to its id
    for local_id in values2:
        assert b2.local_id(b2.global_key(local_id)) == local_id


def test_operations_whose_structures_all_collide_still_get_one_key_each(monkeypatch):
    # An operation's intern-table structure is a hash of (op, role, inputs): a key found
    # under it must be checked to be this operation on these inputs in this role. With
    # every structure equal, each operation must still get its own key, and the same one
    # again when asked again, in builders and through evaluate.
    monkeypatch.setattr(keys, "_structure", lambda operation, inputs, role: 0)
    a, b = Input(fresh("collide-a")), Input(fresh("collide-b"))
    made = {(op, ins, role): OperationKey(op, ins, role)
            for op in (ScalarOp.ADD, ScalarOp.MUL)
            for ins in ((a, b), (b, a), (a, a))
            for role in (PRIMARY, Linearized((True, False)))}
    assert len(set(map(id, made.values()))) == len(made)
    for (op, ins, role), key in made.items():
        assert OperationKey(op, ins, role) is key
        assert (key.operation, key.inputs, key.role) == (op, ins, role)
    builder = GraphBuilder()
    x, y = builder.add_input(a.key), builder.add_input(b.key)
    [p] = builder.add_operation(ScalarOp.MUL, [Local(x), Local(y)])
    [q] = builder.add_operation(ScalarOp.MUL, [Local(y), Local(x)])    # not the same op
    [r] = builder.add_operation(ScalarOp.ADD, [Local(p), Local(q)])
    assert builder.add_operation(ScalarOp.MUL, [Local(x), Local(y)]) == [p]
    assert len({p, q, r}) == 3
    builder.set_outputs([r])
    graph = builder.build()
    assert evaluate(graph, graph.output_keys, {a: 3.0, b: 5.0}) == [30.0]


def test_a_copied_key_is_the_key_itself():
    # A FreshInput's copy (copy.copy, copy.deepcopy) was a new key, equal to nothing: a
    # deep-copied record naming a value by it no longer named that value. Keys are
    # immutable, so a copy in this process is the key; pickling still makes a new one.
    import copy

    from tidu.graph import FreshInput

    fresh_key = FreshInput()
    op_key = OperationKey(ScalarOp.NEG, (fresh_key,), PRIMARY)
    derived = op_key.output_keys()[0]
    for key in (fresh_key, Input(fresh("copied")), op_key, derived):
        assert copy.copy(key) is key and copy.deepcopy(key) is key
    assert copy.deepcopy({"k": fresh_key})["k"] is fresh_key
    assert pickle.loads(pickle.dumps(fresh_key)) is not fresh_key
