"""GraphBuilder and Graph: construction, immutability, CSE, External refs, parents, resolve,
listing and networkx export."""

from __future__ import annotations

import pickle
from collections.abc import MutableSequence, Sequence

import networkx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidu.graph import (
    PRIMARY,
    Derived,
    External,
    Graph,
    GraphBuilder,
    Input,
    Linearized,
    Local,
    ResolvedView,
    resolve,
    to_networkx,
)

from graph_ops import ScalarOp, Scale


def small_builder():
    """x, c inputs; s, k = sincos(x); m = s * x; y = m + c; outputs [y, k]."""
    b = GraphBuilder()
    x = b.add_input("x")
    c = b.add_input("c")
    s, k = b.add_operation(ScalarOp.SINCOS, [Local(x)])
    [m] = b.add_operation(ScalarOp.MUL, [Local(s), Local(x)])
    [y] = b.add_operation(ScalarOp.ADD, [Local(m), Local(c)])
    b.set_outputs([y, k])
    return b, dict(x=x, c=c, s=s, k=k, m=m, y=y)


# --- construction -----------------------------------------------------------------


def test_construction_ids_values_and_operations():
    b, ids = small_builder()
    assert ids == dict(x=0, c=1, s=2, k=3, m=4, y=5)
    assert len(b) == 6
    g = b.build()
    assert g.inputs == (0, 1)
    assert g.outputs == (5, 3)
    assert g.parents == ()
    assert len(g.values) == 6 and len(g.operations) == 3

    assert [v.producer for v in g.values] == [None, None, (0, 0), (0, 1), (1, 0), (2, 0)]
    assert g.values[0].key is Input("x") and g.values[1].key is Input("c")
    assert g.input_keys == (Input("x"), Input("c"))
    assert g.output_keys == (g.values[5].key, g.values[3].key)

    sincos, mul, add = g.operations
    assert sincos.operation is ScalarOp.SINCOS
    assert sincos.inputs == (Local(0),) and type(sincos.inputs[0]) is Local
    assert sincos.outputs == (2, 3)
    assert sincos.role is PRIMARY
    assert mul.inputs == (Local(2), Local(0)) and mul.outputs == (4,)
    assert add.operation is ScalarOp.ADD and add.inputs == (Local(4), Local(1))
    # the op node's key ties it to its value keys
    assert g.values[2].key == Derived(sincos.key, 0)
    assert g.values[3].key == Derived(sincos.key, 1)
    assert g.operation_keys == (sincos.key, mul.key, add.key)


def test_global_key_and_local_id():
    b, ids = small_builder()
    key_y = b.global_key(ids["y"])
    assert type(key_y) is Derived and key_y.operation.operation is ScalarOp.ADD
    assert b.global_key(ids["k"]).output_slot == 1
    assert b.global_key(ids["x"]) is Input("x")
    assert b.local_id(key_y) == ids["y"]
    g = b.build()
    assert g.local_id(key_y) == ids["y"]
    assert key_y in g and Input("nope") not in g
    assert g.local_id(Input("nope")) is None


def test_add_input_of_existing_key_returns_the_same_id():
    b = GraphBuilder()
    x = b.add_input("x")
    y = b.add_input("y")
    assert b.add_input("x") == x
    assert b.add_input(("t", 1)) == 2
    assert b.add_input(("t", 1)) == 2
    assert len(b) == 3
    assert b.build().inputs == (x, y, 2)


def test_set_outputs_replaces_and_accepts_any_sequence():
    b, ids = small_builder()
    b.set_outputs(iter([ids["m"], ids["m"], ids["x"]]))
    assert b.build().outputs == (ids["m"], ids["m"], ids["x"])
    b.set_outputs([])
    assert b.build().outputs == ()


def test_graph_is_immutable():
    b, ids = small_builder()
    g = b.build()
    for name in ("inputs", "outputs", "parents", "values", "operations", "new_attr", "_keys"):
        with pytest.raises(AttributeError):
            setattr(g, name, ())
    with pytest.raises(AttributeError):
        del g.inputs
    assert isinstance(g.inputs, tuple) and isinstance(g.outputs, tuple)
    assert isinstance(g.parents, tuple)
    assert isinstance(g.value_keys, tuple) and isinstance(g.operation_keys, tuple)
    for seq in (g.values, g.operations):
        assert isinstance(seq, Sequence) and not isinstance(seq, MutableSequence)
        with pytest.raises(TypeError):
            seq[0] = None
        with pytest.raises(TypeError):
            del seq[0]
    node = g.operations[0]
    with pytest.raises(AttributeError):
        node.inputs = ()
    assert isinstance(node.inputs, tuple) and isinstance(node.outputs, tuple)
    with pytest.raises(TypeError):
        Graph()


def test_built_graph_is_a_snapshot():
    b, ids = small_builder()
    g = b.build()
    b.add_operation(ScalarOp.NEG, [Local(ids["y"])])
    b.add_input("late")
    b.set_outputs([0])
    assert len(g.values) == 6 and len(g.operations) == 3
    assert g.outputs == (ids["y"], ids["k"])
    assert len(b.build().values) == 8


def test_values_and_operations_sequences():
    b, ids = small_builder()
    g = b.build()
    values = list(g.values)
    assert [v.key for v in values] == list(g.value_keys)
    assert g.values[-1] == values[-1]
    assert g.values[1:3] == tuple(values[1:3])
    ops = list(g.operations)
    assert [o.key for o in ops] == list(g.operation_keys)
    assert g.operations[::2] == (ops[0], ops[2])
    with pytest.raises(IndexError):
        g.values[6]
    assert "6 values" in repr(g.values) and "3 operations" in repr(g.operations)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["input", "NEG", "MUL", "SINCOS", "DIVMOD"]),
                          st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=30))
def test_every_value_names_its_producer_indexed_iterated_and_pickled(steps):
    """A value's producer is not stored per value: it is found from the operations' first
    outputs. For random graphs (inputs between ops, one- and two-output ops, repeats that
    CSE folds) it agrees with the operations' outputs, by index, negative index, iteration
    and after pickling."""
    b = GraphBuilder()
    b.add_input("x0")
    for kind, i, j in steps:
        n = len(b)
        if kind == "input":
            b.add_input(f"x{i % 4}")           # repeats find the existing input
        else:
            op = getattr(ScalarOp, kind)
            arity = 2 if kind in ("MUL", "DIVMOD") else 1
            b.add_operation(op, [Local(i % n), Local(j % n)][:arity])
    g = b.build()
    want = [None] * len(g.values)
    for op_index, node in enumerate(g.operations):
        for slot, local_id in enumerate(node.outputs):
            want[local_id] = (op_index, slot)
    for copy in (g, pickle.loads(pickle.dumps(g))):
        assert [v.producer for v in copy.values] == want
        assert [copy.values[i].producer for i in range(len(want))] == want
        assert [copy.values[-i].producer for i in range(1, len(want) + 1)] == want[::-1]
        assert all((v.producer is None) == (i in copy.inputs) for i, v in enumerate(copy.values))


# --- within-builder CSE ------------------------------------------------------------


def test_equal_operation_returns_existing_ids_and_adds_no_node():
    b, ids = small_builder()
    n_values = len(b)
    assert b.add_operation(ScalarOp.MUL, [Local(ids["s"]), Local(ids["x"])]) == [ids["m"]]
    assert b.add_operation(ScalarOp.SINCOS, [Local(ids["x"])]) == [ids["s"], ids["k"]]
    assert b.add_operation(Scale(2.0), [Local(ids["x"])]) == [n_values]
    assert b.add_operation(Scale(2.0), [Local(ids["x"])]) == [n_values]
    assert len(b) == n_values + 1
    g = b.build()
    assert len(g.operations) == 4
    assert len(set(g.value_keys)) == len(g.values)


def test_add_unchecked_matches_add_operation():
    b, ids = small_builder()
    keys = b.build().value_keys
    x_key, s_key = keys[ids["x"]], keys[ids["s"]]
    # an op already in the builder: its first output id, nothing added
    n_values = len(b)
    assert b.add_unchecked(ScalarOp.MUL, (s_key, x_key), PRIMARY, 1) == ids["m"]
    assert b.add_unchecked(ScalarOp.SINCOS, (x_key,), PRIMARY, 2) == ids["s"]
    assert len(b) == n_values
    # a new op: the ids and keys add_operation would give
    other, other_ids = small_builder()
    first = b.add_unchecked(ScalarOp.DIVMOD, (x_key, s_key), PRIMARY, 2)
    assert other.add_operation(ScalarOp.DIVMOD, [Local(other_ids["x"]), Local(other_ids["s"])]
                               ) == [first, first + 1]
    assert b.build().value_keys == other.build().value_keys
    assert b.add_operation(ScalarOp.DIVMOD, [Local(ids["x"]), Local(ids["s"])]) == [first,
                                                                                    first + 1]


def test_add_checked_is_the_deprecated_name_of_add_unchecked():
    b, ids = small_builder()
    keys = b.build().value_keys
    with pytest.warns(DeprecationWarning, match="add_unchecked"):
        first = b.add_checked(ScalarOp.MUL, (keys[ids["s"]], keys[ids["x"]]), PRIMARY, 1)
    assert first == ids["m"]


def test_cse_distinguishes_role_and_order():
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    [a] = b.add_operation(ScalarOp.SUB, [Local(x), Local(y)])
    [c] = b.add_operation(ScalarOp.SUB, [Local(y), Local(x)])
    [d] = b.add_operation(ScalarOp.SUB, [Local(x), Local(y)], role=Linearized((True, True)))
    assert len({a, c, d}) == 3
    g = b.build()
    assert g.operations[2].role is Linearized((True, True))
    assert len(g.operations) == 3


# --- External references, parents and resolve --------------------------------------


def two_graphs():
    b1, ids1 = small_builder()
    g1 = b1.build()
    key_y = g1.values[ids1["y"]].key
    b2 = GraphBuilder()
    b2.add_parent(g1)
    t = b2.add_input("t")
    [z] = b2.add_operation(ScalarOp.MUL, [External(key_y), Local(t)])
    [w] = b2.add_operation(ScalarOp.ADD, [Local(z), External(Input("x"))])
    b2.set_outputs([w])
    return g1, ids1, b2.build(), dict(t=t, z=z, w=w)


def test_external_references_in_operation_inputs():
    g1, ids1, g2, ids2 = two_graphs()
    key_y = g1.values[ids1["y"]].key
    mul, add = g2.operations
    assert mul.inputs == (External(key_y), Local(ids2["t"]))
    assert type(mul.inputs[0]) is External and mul.inputs[0].key is key_y
    assert type(mul.inputs[1]) is Local
    assert add.inputs == (Local(ids2["z"]), External(Input("x")))
    # External values are not values of g2
    assert len(g2.values) == 3
    assert key_y not in g2
    assert mul.key.inputs == (key_y, Input("t"))
    assert g2.parents == (g1,)


def test_same_structure_via_external_or_rebuilt_is_the_same_key():
    g1, ids1, g2, ids2 = two_graphs()
    # Rebuild g1's y locally in a third builder: the MUL on it is g2's MUL.
    b3, ids3 = small_builder()
    t = b3.add_input("t")
    [z] = b3.add_operation(ScalarOp.MUL, [Local(ids3["y"]), Local(t)])
    assert b3.global_key(z) is g2.values[ids2["z"]].key


def test_resolve_over_parent_chain():
    g1, ids1, g2, ids2 = two_graphs()
    b3 = GraphBuilder()
    b3.add_parent(g2)
    [u] = b3.add_operation(ScalarOp.NEG, [External(g2.values[ids2["w"]].key)])
    g3 = b3.build()
    view = resolve(g3)
    assert isinstance(view, ResolvedView)
    assert view.graphs == (g3, g2, g1)

    # a value of g1, found through g3 -> g2 -> g1
    key_m = g1.values[ids1["m"]].key
    d = view.resolve_value(key_m)
    assert d.graph is g1 and d.local_id == ids1["m"]
    assert d.operation is ScalarOp.MUL
    assert d.inputs == (g1.values[ids1["s"]].key, Input("x"))
    assert d.role is PRIMARY and d.output_slot == 0
    assert d.key is key_m and not d.is_input

    # second output slot of a multi-output op
    d = view.resolve_value(g1.values[ids1["k"]].key)
    assert d.operation is ScalarOp.SINCOS and d.output_slot == 1 and d.local_id == ids1["k"]

    # inputs
    d = view.resolve_value(Input("t"))
    assert d.graph is g2 and d.is_input and d.operation is None
    assert d.inputs == () and d.role is None and d.output_slot is None

    # own value
    d = view.resolve_value(g3.values[u].key)
    assert d.graph is g3 and d.inputs == (g2.values[ids2["w"]].key,)

    assert view.resolve_value(Input("nowhere")) is None
    assert resolve(g1).resolve_value(Input("t")) is None
    assert resolve(view) is view


def test_resolve_over_several_graphs_first_wins_and_dedupes():
    g1, ids1, g2, ids2 = two_graphs()
    view = resolve([g1, g2, g1])
    assert view.graphs == (g1, g2)
    # Input("x") is defined in g1 only
    assert view.resolve_value(Input("x")).graph is g1
    # A graph defining the same key as its parent: the one given first wins.
    b = GraphBuilder()
    b.add_parent(g1)
    b.add_input("x")
    g4 = b.build()
    assert resolve(g4).resolve_value(Input("x")).graph is g4
    assert resolve([g1, g4]).resolve_value(Input("x")).graph is g1
    assert resolve(iter([g2])).graphs == (g2, g1)


def test_add_parent_is_idempotent():
    g1, *_ = two_graphs()
    b = GraphBuilder()
    b.add_parent(g1)
    b.add_parent(g1)
    assert b.build().parents == (g1,)


# --- text -------------------------------------------------------------------------


def test_str_lists_the_graph_and_repr_is_one_line():
    g1, ids1, g2, ids2 = two_graphs()
    text = str(g1)
    assert text.splitlines() == [
        "graph(a = 'x', b = 'c'):",
        "  c, d = SINCOS a",
        "  e = MUL c a",
        "  f = ADD e b",
        "  return f, d",
    ]
    serial = g1.operations[2].key.serial
    lines = str(g2).splitlines()
    assert lines[0] == "graph(a = 't'):"
    assert lines[1] == f"  b = MUL ext(ADD#{serial}:0) a"
    assert lines[2] == "  c = ADD b ext('x')"
    assert repr(g2) == "<Graph 1 inputs, 2 operations, 1 outputs, 1 parents>"

    b = GraphBuilder()
    x = b.add_input("x")
    b.add_operation(ScalarOp.NEG, [Local(x)], role=Linearized((True,)))
    assert "  b = NEG[Linearized(T)] a" in str(b.build()).splitlines()


def test_small_graph_pickles():
    g1, ids1, g2, ids2 = two_graphs()
    copy = pickle.loads(pickle.dumps(g2))
    assert copy.value_keys == g2.value_keys
    assert copy.operation_keys == g2.operation_keys
    assert copy.parents[0].value_keys == g1.value_keys
    assert copy.outputs == g2.outputs


# --- networkx -----------------------------------------------------------------------


def test_to_networkx_nodes_edges_and_attributes():
    g1, ids1, g2, ids2 = two_graphs()
    nx1 = to_networkx(g1)
    assert isinstance(nx1, networkx.MultiDiGraph)
    # 6 values + 3 ops; edges: SINCOS 1 in + 2 out, MUL 2 + 1, ADD 2 + 1
    assert nx1.number_of_nodes() == 9
    assert nx1.number_of_edges() == 9
    assert networkx.is_directed_acyclic_graph(nx1)

    x = nx1.nodes[("value", ids1["x"])]
    assert x["kind"] == "value" and x["is_input"] and not x["is_output"]
    assert x["slot"] is None and x["key"] is Input("x")
    k = nx1.nodes[("value", ids1["k"])]
    assert k["slot"] == 1 and k["is_output"] and not k["is_input"]
    m = nx1.nodes[("value", ids1["m"])]
    assert not m["is_output"] and not m["is_input"] and m["slot"] == 0

    sincos = nx1.nodes[("op", 0)]
    assert sincos["kind"] == "operation" and sincos["op"] is ScalarOp.SINCOS
    assert sincos["role"] is PRIMARY and sincos["linear"] is False
    assert sincos["label"] == "SINCOS"

    out_edges = sorted((v, d["slot"]) for _, v, d in nx1.out_edges(("op", 0), data=True))
    assert out_edges == [(("value", ids1["s"]), 0), (("value", ids1["k"]), 1)]
    in_edges = sorted((u, d["position"]) for u, _, d in nx1.in_edges(("op", 1), data=True))
    assert in_edges == [(("value", ids1["x"]), 1), (("value", ids1["s"]), 0)]

    nx2 = to_networkx(g2)
    key_y = g1.values[ids1["y"]].key
    # 3 values + 2 ops + 2 external nodes; edges: MUL 2+1, ADD 2+1
    assert nx2.number_of_nodes() == 7
    assert nx2.number_of_edges() == 6
    ext = ("external", key_y)
    assert nx2.nodes[ext]["kind"] == "external" and nx2.nodes[ext]["key"] is key_y
    assert list(nx2.successors(ext)) == [("op", 0)]
    assert nx2.nodes[("external", Input("x"))]["kind"] == "external"
    assert nx2.has_edge(("external", Input("x")), ("op", 1))


def test_to_networkx_linear_role_and_repeated_input():
    b = GraphBuilder()
    x = b.add_input("x")
    [sq] = b.add_operation(ScalarOp.MUL, [Local(x), Local(x)], role=Linearized((True, False)))
    b.set_outputs([sq])
    out = to_networkx(b.build())
    node = out.nodes[("op", 0)]
    assert node["linear"] is True and node["role"] is Linearized((True, False))
    # x feeds both positions: two parallel edges
    assert out.number_of_edges(("value", x), ("op", 0)) == 2
    positions = sorted(d["position"] for _, _, d in out.in_edges(("op", 0), data=True))
    assert positions == [0, 1]
