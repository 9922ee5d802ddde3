"""``linearize``: JVPs of small scalar graphs against hand-derived derivatives.

Covers ``x*x``, ``f(x, y)``, fan-out, multi-output ``SINCOS``, inactive inputs
and outputs (symbolic zeros), aliases (checkpointed subgraphs), pass ids and
tangent keys. Every expected number is derived by hand in a comment.
"""

from __future__ import annotations

import gc
import math

import pytest

from primitives.scalar import ScalarOp, cos, sin, sincos, trace_scalar
from tidu import LinearizedGraph, TangentKey, linearize
from tidu.errors import TiduError
from tidu.graph import Derived, GraphBuilder, Input, Linearized, Local, PRIMARY, evaluate


def jvp(graphs, outputs, wrt, primals, tangents, **kwargs):
    """Linearize, then evaluate the tangent outputs (``None`` stays ``None``)."""
    graphs = list(graphs) if isinstance(graphs, (list, tuple)) else [graphs]
    lin = linearize(graphs, outputs, wrt, **kwargs)
    values = {Input(k): v for k, v in primals.items()}
    values.update(zip(lin.tangent_input_keys, tangents))
    keys = [k for k in lin.tangent_output_keys if k is not None]
    results = iter(evaluate(graphs + [lin.graph], keys, values))
    return lin, [None if k is None else next(results) for k in lin.tangent_output_keys]


def ops_of(graph, op=None, role=None):
    """The operation nodes of ``graph``, optionally only one op and/or role kind."""
    found = []
    for node in graph.operations:
        if op is not None and node.operation != op:
            continue
        if role == "linear" and node.role is PRIMARY:
            continue
        if role == "primary" and node.role is not PRIMARY:
            continue
        found.append(node)
    return found


# --- x * x ------------------------------------------------------------------------


def test_square_jvp():
    # d(x*x) = 2 x dx: at x = 3, dx = 0.5 gives 3
    g = trace_scalar(lambda x: x * x, ["x"])
    lin, [t] = jvp(g, g.output_keys, ["x"], {"x": 3.0}, [0.5])
    assert t == pytest.approx(3.0)
    assert isinstance(lin, LinearizedGraph)
    assert [k for k, _ in lin.tangent_inputs] == ["x"]
    # the linear graph refers to the primal graph, not a copy of it
    assert g in lin.graph.parents
    assert all(node.role is not PRIMARY for node in lin.graph.operations)


def test_square_jvp_is_linear_in_the_tangent():
    g = trace_scalar(lambda x: x * x, ["x"])
    lin = linearize(g, g.output_keys, ["x"])
    [tx] = lin.tangent_input_keys
    for dx in (-2.0, 0.0, 1.0, 7.5):
        [t] = evaluate([g, lin.graph], lin.tangent_output_keys, {Input("x"): -1.25, tx: dx})
        assert t == pytest.approx(2 * -1.25 * dx)


# --- f(x, y) ------------------------------------------------------------------------


def test_two_input_function():
    # f = x*y + sin(x): df = (y + cos x) dx + x dy
    g = trace_scalar(lambda x, y: x * y + sin(x), ["x", "y"])
    x, y = 0.7, -1.3
    for dx, dy in [(1.0, 0.0), (0.0, 1.0), (0.25, -2.0)]:
        _, [t] = jvp(g, g.output_keys, ["x", "y"], {"x": x, "y": y}, [dx, dy])
        assert t == pytest.approx((y + math.cos(x)) * dx + x * dy)


def test_linear_graph_structure_of_multiply():
    # the tutorial's rule: d(x*y) = dx*y + x*dy, both terms linear, summed by ADD
    g = trace_scalar(lambda x, y: x * y, ["x", "y"])
    lin = linearize(g, g.output_keys, ["x", "y"])
    muls = ops_of(lin.graph, ScalarOp.MUL)
    assert sorted(n.role.active_mask for n in muls) == [(False, True), (True, False)]
    [add] = ops_of(lin.graph, ScalarOp.ADD)
    assert add.role is Linearized((True, True))
    assert lin.tangent_outputs == [add.outputs[0]]


def test_multiple_outputs():
    # (x*y, sin(y), x - y): tangents (y dx + x dy, cos(y) dy, dx - dy)
    g = trace_scalar(lambda x, y: (x * y, sin(y), x - y), ["x", "y"])
    x, y, dx, dy = 1.5, 0.4, 0.3, -0.8
    _, ts = jvp(g, g.output_keys, ["x", "y"], {"x": x, "y": y}, [dx, dy])
    assert ts == pytest.approx([y * dx + x * dy, math.cos(y) * dy, dx - dy])


def test_output_that_is_an_input():
    # the tangent of an input key requested as output is the tangent input itself
    g = trace_scalar(lambda x, y: (x, x * y), ["x", "y"])
    lin, ts = jvp(g, g.output_keys, ["x", "y"], {"x": 2.0, "y": 3.0}, [0.5, 0.25])
    assert ts == pytest.approx([0.5, 3.0 * 0.5 + 2.0 * 0.25])
    assert lin.tangent_outputs[0] == lin.tangent_inputs[0][1]


# --- fan-out -----------------------------------------------------------------------


def test_value_used_three_times():
    # v = sin(x) used three times: f = v*v + v; df = (2v + 1) cos(x) dx
    g = trace_scalar(lambda x: (lambda v: v * v + v)(sin(x)), ["x"])
    x = 0.9
    _, [t] = jvp(g, g.output_keys, ["x"], {"x": x}, [1.0])
    assert t == pytest.approx((2 * math.sin(x) + 1) * math.cos(x))


def test_diamond():
    # a = sin x, b = cos x, f = a*b: df = (cos^2 x - sin^2 x) dx = cos(2x) dx
    g = trace_scalar(lambda x: sin(x) * cos(x), ["x"])
    _, [t] = jvp(g, g.output_keys, ["x"], {"x": 0.3}, [2.0])
    assert t == pytest.approx(2.0 * math.cos(0.6))


# --- multi-output SINCOS -------------------------------------------------------------


def test_sincos_both_slots():
    # d sin = cos dx, d cos = -sin dx; the rule reuses the primal outputs
    g = trace_scalar(lambda x: sincos(x), ["x"])
    x = 0.6
    lin, ts = jvp(g, g.output_keys, ["x"], {"x": x}, [1.5])
    assert ts == pytest.approx([1.5 * math.cos(x), -1.5 * math.sin(x)])
    # no SIN or COS recomputed: the JVP refers to SINCOS's own outputs
    assert not ops_of(lin.graph, ScalarOp.SIN) and not ops_of(lin.graph, ScalarOp.COS)
    externals = {ref.key for node in lin.graph.operations for ref in node.inputs
                 if not isinstance(ref, Local)}
    assert set(g.output_keys) <= externals


def test_sincos_one_slot_requested():
    # only the cos output of SINCOS is asked for: tangent -sin(x) dx
    g = trace_scalar(lambda x: sincos(x), ["x"])
    s_key, c_key = g.output_keys
    x = 1.1
    _, [t] = jvp(g, [c_key], ["x"], {"x": x}, [1.0])
    assert t == pytest.approx(-math.sin(x))
    _, [t] = jvp(g, [s_key], ["x"], {"x": x}, [1.0])
    assert t == pytest.approx(math.cos(x))


def test_sincos_feeding_further_work():
    # s, c = sincos(x); f = s*s + c*c = 1, so df = 0 (numerically)
    g = trace_scalar(lambda x: (lambda s, c: s * s + c * c)(*sincos(x)), ["x"])
    _, [t] = jvp(g, g.output_keys, ["x"], {"x": 0.77}, [1.0])
    assert t == pytest.approx(0.0, abs=1e-12)


# --- inactive inputs and outputs ------------------------------------------------------


def test_wrt_subset():
    # f = x*y + sin(x) w.r.t. x only: df = (y + cos x) dx; no dy tangent exists
    g = trace_scalar(lambda x, y: x * y + sin(x), ["x", "y"])
    x, y = 0.2, 4.0
    lin, [t] = jvp(g, g.output_keys, ["x"], {"x": x, "y": y}, [1.0])
    assert t == pytest.approx(y + math.cos(x))
    assert [k for k, _ in lin.tangent_inputs] == ["x"]
    assert len(lin.graph.inputs) == 1
    # a zero dy costs nothing: only the dx*y term of MUL's rule, no x*dy, no sum for it
    muls = ops_of(lin.graph, ScalarOp.MUL, "linear")
    assert all(node.role.active_mask in {(True, False)} for node in muls)


def test_output_independent_of_wrt_is_none():
    # (x*y, sin(y)) w.r.t. x: the second output has a symbolic zero tangent
    g = trace_scalar(lambda x, y: (x * y, sin(y)), ["x", "y"])
    lin, ts = jvp(g, g.output_keys, ["x"], {"x": 2.0, "y": 0.5}, [1.0])
    assert ts[0] == pytest.approx(0.5)
    assert ts[1] is None and lin.tangent_outputs[1] is None
    assert lin.tangent_output_keys[1] is None
    assert len(lin.graph.outputs) == 1
    # no work at all for sin(y)
    assert not ops_of(lin.graph, ScalarOp.COS)


def test_wrt_input_nothing_depends_on():
    # f = sin(x), w.r.t. (x, y): y's tangent is an input the linear graph never reads
    g = trace_scalar(lambda x, y: sin(x), ["x", "y"])
    lin, [t] = jvp(g, g.output_keys, ["x", "y"], {"x": 0.0, "y": 1.0}, [3.0, 5.0])
    assert t == pytest.approx(3.0)
    y_tangent = lin.tangent_inputs[1][1]
    assert all(Local(y_tangent) not in node.inputs for node in lin.graph.operations)


def test_constant_function_has_no_linear_work():
    g = trace_scalar(lambda x, y: sin(y) * 2.0, ["x", "y"])
    lin = linearize(g, g.output_keys, ["x"])
    assert lin.tangent_outputs == [None]
    assert len(lin.graph.operations) == 0


def test_only_what_the_outputs_depend_on_is_visited():
    # outputs (x*y, cos(x)); linearizing only the first emits nothing for cos
    g = trace_scalar(lambda x, y: (x * y, cos(x)), ["x", "y"])
    lin = linearize(g, g.output_keys[:1], ["x", "y"])
    assert not ops_of(lin.graph, ScalarOp.SIN) and not ops_of(lin.graph, ScalarOp.NEG)


def test_output_requested_twice():
    g = trace_scalar(lambda x: sin(x), ["x"])
    [out] = g.output_keys
    _, ts = jvp(g, [out, out], ["x"], {"x": 0.5}, [1.0])
    assert ts == pytest.approx([math.cos(0.5)] * 2)


def test_unknown_output_or_wrt_raises_tidu_error():
    g = trace_scalar(lambda x: sin(x), ["x"])
    with pytest.raises(TiduError):
        linearize(g, [Input("nope")], ["x"])
    with pytest.raises(TiduError):
        linearize(g, g.output_keys, ["nope"])


def test_outputs_and_wrt_are_checked_without_the_primal_graphs_index():
    # Outputs and wrt inputs are the graph's own: no key -> local id index is made (a dict
    # and an int per primal value). Another value of the graph is still a valid output, and a
    # key of another graph, or an input of none, is still refused.
    g = trace_scalar(lambda x, y: sin(x * y) * x, ["x", "y"])
    linearize(g, g.output_keys, ["x", "y"])
    assert g._index is None
    inner = g.operation_keys[1].output_keys()[0]               # sin(x * y), not an output
    _, [t] = jvp(g, [inner], ["x"], {"x": 0.5, "y": 1.5}, [1.0])
    assert t == pytest.approx(math.cos(0.75) * 1.5)
    other = trace_scalar(lambda x: cos(x), ["x"])
    with pytest.raises(TiduError, match="linearize output"):
        linearize(g, other.output_keys, ["x"])
    with pytest.raises(TiduError, match="linearize wrt 'z'"):
        linearize(g, g.output_keys, ["z"])


# --- aliases ---------------------------------------------------------------------------


def checkpointed():
    """``f(x) = sin(x) * x + h`` where ``h`` stands for ``sin(x)`` from another graph.

    Graph A computes ``s = sin(x)``; graph B takes ``x`` and ``h`` as inputs.
    """
    a = GraphBuilder()
    x = a.add_input("x")
    [s] = a.add_operation(ScalarOp.SIN, [Local(x)])
    a.set_outputs([s])
    graph_a = a.build()

    b = GraphBuilder()
    x, h = b.add_input("x"), b.add_input("h")
    [p] = b.add_operation(ScalarOp.MUL, [Local(h), Local(x)])
    [f] = b.add_operation(ScalarOp.ADD, [Local(p), Local(h)])
    b.set_outputs([f])
    return graph_a, b.build()


def test_alias_shares_the_tangent_of_its_target():
    graph_a, graph_b = checkpointed()
    [s_key] = graph_a.output_keys
    x = 0.8
    lin = linearize([graph_a, graph_b], graph_b.output_keys, ["x"], aliases={"h": s_key})
    values = {Input("x"): x, Input("h"): math.sin(x), lin.tangent_input_keys[0]: 1.0}
    [t] = evaluate([graph_a, graph_b, lin.graph], lin.tangent_output_keys, values)

    # the un-checkpointed function f(x) = sin(x)*x + sin(x)
    whole = trace_scalar(lambda x: sin(x) * x + sin(x), ["x"])
    _, [expected] = jvp(whole, whole.output_keys, ["x"], {"x": x}, [1.0])
    assert t == pytest.approx(expected)
    # by hand: cos(x) x + sin(x) + cos(x)
    assert t == pytest.approx(math.cos(x) * x + math.sin(x) + math.cos(x))


def test_without_alias_the_input_is_a_constant():
    graph_a, graph_b = checkpointed()
    x = 0.8
    lin = linearize([graph_a, graph_b], graph_b.output_keys, ["x"])
    values = {Input("x"): x, Input("h"): math.sin(x), lin.tangent_input_keys[0]: 1.0}
    [t] = evaluate([graph_b, lin.graph], lin.tangent_output_keys, values)
    assert t == pytest.approx(math.sin(x))          # d(h*x + h)/dx with h fixed


def test_alias_to_another_input():
    # g(x, h) = x*h with h aliased to x: d(x*x) = 2x dx
    g = trace_scalar(lambda x, h: x * h, ["x", "h"])
    lin = linearize(g, g.output_keys, ["x"], aliases={"h": Input("x")})
    [t] = evaluate([g, lin.graph], lin.tangent_output_keys,
                   {Input("x"): 3.0, Input("h"): 3.0, lin.tangent_input_keys[0]: 1.0})
    assert t == pytest.approx(6.0)


def test_alias_chain():
    # h2 -> h1 -> sin(x): g(x, h1, h2) = h1 * h2, i.e. sin(x)^2: d = 2 sin cos
    graph_a, _ = checkpointed()
    [s_key] = graph_a.output_keys
    g = trace_scalar(lambda h1, h2: h1 * h2, ["h1", "h2"])
    x = 0.4
    lin = linearize([graph_a, g], g.output_keys, ["x"],
                    aliases={"h2": Input("h1"), "h1": s_key})
    [t] = evaluate([graph_a, g, lin.graph], lin.tangent_output_keys,
                   {Input("x"): x, Input("h1"): math.sin(x), Input("h2"): math.sin(x),
                    lin.tangent_input_keys[0]: 1.0})
    assert t == pytest.approx(2 * math.sin(x) * math.cos(x))


def test_wrt_tangent_takes_precedence_over_alias():
    # h is both in wrt and aliased: it keeps its own tangent
    graph_a, graph_b = checkpointed()
    [s_key] = graph_a.output_keys
    x = 0.8
    lin = linearize([graph_a, graph_b], graph_b.output_keys, ["x", "h"], aliases={"h": s_key})
    tx, th = lin.tangent_input_keys
    [t] = evaluate([graph_a, graph_b, lin.graph], lin.tangent_output_keys,
                   {Input("x"): x, Input("h"): math.sin(x), tx: 0.0, th: 1.0})
    assert t == pytest.approx(x + 1.0)              # d(h*x + h)/dh


# --- pass ids and tangent keys --------------------------------------------------------


def test_fresh_pass_ids_give_distinct_tangent_keys():
    g = trace_scalar(lambda x: sin(x), ["x"])
    first = linearize(g, g.output_keys, ["x"])
    second = linearize(g, g.output_keys, ["x"])
    assert first.pass_id != second.pass_id
    assert first.tangent_input_keys != second.tangent_input_keys
    # tangent work is distinct; primal work (COS x) is the same value in both
    assert first.tangent_output_keys[0] != second.tangent_output_keys[0]
    [cos1] = [n.key for n in first.graph.operations if n.role is PRIMARY]
    [cos2] = [n.key for n in second.graph.operations if n.role is PRIMARY]
    assert cos1 is cos2


def test_explicit_pass_id():
    g = trace_scalar(lambda x: sin(x), ["x"])
    lin = linearize(g, g.output_keys, ["x"], pass_id=7)
    assert lin.pass_id == 7
    assert lin.tangent_input_keys == [Input(TangentKey("x", 7))]
    assert lin.tangent_input_keys[0].key.base == "x"
    # same pass id, same graph: structurally the same linear graph
    again = linearize(g, g.output_keys, ["x"], pass_id=7)
    assert again.tangent_output_keys == lin.tangent_output_keys


def test_plain_int_input_keys():
    g = trace_scalar(lambda a, b: a * b, [0, 1])
    lin, [t] = jvp(g, g.output_keys, [0, 1], {0: 2.0, 1: 5.0}, [1.0, 1.0])
    assert t == pytest.approx(7.0)
    assert lin.tangent_input_keys[0].key == TangentKey(0, lin.pass_id)


class NamedKey:
    """A user key type that names its own tangents."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return type(other) is NamedKey and other.name == self.name

    def __hash__(self):
        return hash(("NamedKey", self.name))

    def __repr__(self):
        return f"NamedKey({self.name!r})"

    def tangent_of(self, pass_id):
        return NamedKey(f"d{self.name}@{pass_id}")


def test_input_key_tangent_of_is_used():
    g = trace_scalar(lambda x: x * x, [NamedKey("x")])
    lin = linearize(g, g.output_keys, [NamedKey("x")], pass_id=3)
    assert lin.tangent_input_keys == [Input(NamedKey("dx@3"))]
    [t] = evaluate([g, lin.graph], lin.tangent_output_keys,
                   {Input(NamedKey("x")): 4.0, Input(NamedKey("dx@3")): 1.0})
    assert t == pytest.approx(8.0)


def test_accepts_a_resolved_view():
    from tidu.graph import resolve

    g = trace_scalar(lambda x: x * x, ["x"])
    lin = linearize(resolve(g), g.output_keys, ["x"])
    [t] = evaluate([g, lin.graph], lin.tangent_output_keys,
                   {Input("x"): 1.5, lin.tangent_input_keys[0]: 1.0})
    assert t == pytest.approx(3.0)


def test_linearize_a_graph_that_refers_to_another():
    # graph 2 computes sin(u) from graph 1's u = x*y via External: f = sin(xy)
    from tidu.graph import External

    g1 = trace_scalar(lambda x, y: x * y, ["x", "y"])
    b = GraphBuilder()
    b.add_parent(g1)
    [f] = b.add_operation(ScalarOp.SIN, [External(g1.output_keys[0])])
    b.set_outputs([f])
    g2 = b.build()
    x, y = 0.5, 1.5
    _, [t] = jvp([g2], g2.output_keys, ["x", "y"], {"x": x, "y": y}, [1.0, 2.0])
    assert t == pytest.approx(math.cos(x * y) * (y * 1.0 + x * 2.0))
    assert isinstance(g2.output_keys[0], Derived)


def test_empty_wrt_and_empty_outputs():
    from tidu import linear_transpose

    g = trace_scalar(lambda x: sin(x), ["x"])
    lin = linearize(g, g.output_keys, [])
    assert lin.tangent_inputs == [] and lin.tangent_outputs == [None]
    assert linear_transpose(lin).tangent_outputs == []
    lin = linearize(g, [], ["x"])
    assert lin.tangent_outputs == [] and len(lin.graph.operations) == 0
    assert linear_transpose(lin).tangent_outputs == [None]


# --- the garbage collector ---------------------------------------------------------------


def long_chain(n=4000):
    b = GraphBuilder()
    x = b.add_input("x")
    for _ in range(n):
        [x] = b.add_operation(ScalarOp.SIN, [Local(x)])
    b.set_outputs([x])
    return b.build()


def test_gc_state_is_restored_after_a_transform():
    graph = long_chain()
    assert gc.isenabled()
    linearize(graph, graph.output_keys, ["x"])
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.disable()
    try:
        linearize(graph, graph.output_keys, ["x"])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_programs_frozen_objects_stay_frozen():
    graph = long_chain()
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        linearize(graph, graph.output_keys, ["x"])
        # Frozen objects may die meanwhile (a sweep of the intern tables drops the weak
        # references of keys earlier tests left), which lowers the count a little;
        # unfreezing would empty it, and freezing more would raise it.
        assert frozen * 0.95 <= gc.get_freeze_count() <= frozen and gc.isenabled()
    finally:
        gc.unfreeze()
