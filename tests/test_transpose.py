"""``linear_transpose`` and ``linear_transpose_with_builder``: VJPs against hand-derived values.

Also: fan-out summed with ``add()``, multi-output ops seeded on one slot,
inactive outputs, a value emitted by two rules counted once, ``ctx`` reaching
every rule, and the caller-builder walk agreeing with the graph one.
"""

from __future__ import annotations

import enum
import math

import pytest

from primitives.scalar import ScalarOp, cos, sin, sincos, trace_scalar
from tidu import (
    CotangentSeed,
    GraphPrimitiveBuilder,
    Primitive,
    linear_transpose,
    linear_transpose_with_builder,
    linearize,
)
from tidu.graph import (
    PRIMARY,
    EvaluableGraphOperation,
    External,
    GraphBuilder,
    Input,
    Linearized,
    Local,
    evaluate,
)

LIN = Linearized((True,))
LIN_TF = Linearized((True, False))
LIN_FT = Linearized((False, True))
LIN_TT = Linearized((True, True))


def vjp(graphs, outputs, wrt, primals, seeds, ctx=None):
    """Linearize and transpose; evaluate the input cotangents (``None`` stays ``None``).

    ``seeds`` has one entry per output; entries for outputs with a zero tangent are ignored.
    """
    graphs = list(graphs) if isinstance(graphs, (list, tuple)) else [graphs]
    lin = linearize(graphs, outputs, wrt, ctx=ctx)
    tr = linear_transpose(lin, ctx=ctx)
    values = {Input(k): v for k, v in primals.items()}
    active = [s for s, t in zip(seeds, lin.tangent_outputs) if t is not None]
    assert len(active) == len(tr.tangent_inputs)
    values.update(zip(tr.tangent_input_keys, active))
    keys = [k for k in tr.tangent_output_keys if k is not None]
    results = iter(evaluate(graphs + [lin.graph, tr.graph], keys, values))
    return lin, tr, [None if k is None else next(results) for k in tr.tangent_output_keys]


def count_ops(graph, op):
    return sum(1 for node in graph.operations if node.operation == op)


# --- basic VJPs ----------------------------------------------------------------------------


def test_square_vjp():
    # d(x*x)/dx = 2x = 6 at 3; seed 0.5 gives 3
    g = trace_scalar(lambda x: x * x, ["x"])
    lin, tr, [ct] = vjp(g, g.output_keys, ["x"], {"x": 3.0}, [0.5])
    assert ct == pytest.approx(3.0)
    # x's tangent is used twice (dx*x and x*dx): the two cotangents are summed with ADD
    assert count_ops(tr.graph, ScalarOp.ADD) == 1


def test_two_input_function_vjp():
    # f = x*y + sin(x): grad = (y + cos x, x)
    g = trace_scalar(lambda x, y: x * y + sin(x), ["x", "y"])
    x, y = 0.7, -1.3
    _, _, cts = vjp(g, g.output_keys, ["x", "y"], {"x": x, "y": y}, [2.0])
    assert cts == pytest.approx([2.0 * (y + math.cos(x)), 2.0 * x])


def test_transposed_graph_shape():
    g = trace_scalar(lambda x, y: x * y + sin(x), ["x", "y"])
    lin = linearize(g, g.output_keys, ["x", "y"])
    tr = linear_transpose(lin)
    # one cotangent seed per active tangent output, with a tidu-private key
    [(seed_key, seed_id)] = tr.tangent_inputs
    assert isinstance(seed_key, CotangentSeed)
    assert tr.graph.value_keys[seed_id] == Input(seed_key)
    # one cotangent per tangent input of the linear graph
    assert len(tr.tangent_outputs) == len(lin.tangent_inputs)
    assert lin.graph in tr.graph.parents
    # transposes are linear work; only conj/cos-like primal factors are PRIMARY
    for node in tr.graph.operations:
        if node.role is PRIMARY:
            assert all(isinstance(ref, External) for ref in node.inputs)


def test_multiple_outputs_vjp():
    # outputs (x*y, sin y, x - y), seeds (a, b, c): grad = (a y + c, a x + b cos y - c)
    g = trace_scalar(lambda x, y: (x * y, sin(y), x - y), ["x", "y"])
    x, y, a, b, c = 1.5, 0.4, 0.3, -0.8, 2.0
    _, _, cts = vjp(g, g.output_keys, ["x", "y"], {"x": x, "y": y}, [a, b, c])
    assert cts == pytest.approx([a * y + c, a * x + b * math.cos(y) - c])


# --- fan-out ---------------------------------------------------------------------------------


def test_value_used_three_times_is_summed():
    # f = x*x + x: x's tangent feeds three linear ops; grad = 2x + 1
    g = trace_scalar(lambda x: x * x + x, ["x"])
    x = 1.75
    lin, tr, [ct] = vjp(g, g.output_keys, ["x"], {"x": x}, [1.0])
    assert ct == pytest.approx(2 * x + 1)
    # three contributions need two ADDs (all linear), and the last one is the cotangent
    adds = [node for node in tr.graph.operations if node.operation is ScalarOp.ADD]
    assert len(adds) == 2
    assert all(node.role is LIN_TT for node in adds)
    assert tr.tangent_outputs[0] in {node.outputs[0] for node in adds}


def test_intermediate_used_three_times():
    # v = sin x; f = v*v + v; grad = (2v + 1) cos x
    g = trace_scalar(lambda x: (lambda v: v * v + v)(sin(x)), ["x"])
    x = 0.9
    _, tr, [ct] = vjp(g, g.output_keys, ["x"], {"x": x}, [1.0])
    assert ct == pytest.approx((2 * math.sin(x) + 1) * math.cos(x))
    assert count_ops(tr.graph, ScalarOp.ADD) >= 2


def test_diamond():
    # a = sin x, b = cos x, f = a * b; grad = cos(2x); two paths summed once
    g = trace_scalar(lambda x: sin(x) * cos(x), ["x"])
    _, tr, [ct] = vjp(g, g.output_keys, ["x"], {"x": 0.3}, [1.0])
    assert ct == pytest.approx(math.cos(0.6))
    assert count_ops(tr.graph, ScalarOp.ADD) == 1


def test_output_listed_twice_sums_its_seeds():
    g = trace_scalar(lambda x: sin(x), ["x"])
    [out] = g.output_keys
    _, tr, [ct] = vjp(g, [out, out], ["x"], {"x": 0.5}, [1.0, 2.5])
    assert len(tr.tangent_inputs) == 2
    assert ct == pytest.approx(3.5 * math.cos(0.5))


def test_value_emitted_by_two_rules_is_counted_once():
    # f = (-x) + (c - x): NEG's rule and SUB's rule both emit NEG[lin](dx), one value
    g = trace_scalar(lambda x, c: -x + (c - x), ["x", "c"])
    lin, tr, [ct] = vjp(g, g.output_keys, ["x"], {"x": 1.0, "c": 2.0}, [1.0])
    assert count_ops(lin.graph, ScalarOp.NEG) == 1
    assert ct == pytest.approx(-2.0)
    # and through a caller's builder too
    assert run_with_builder(g, lin, [1.0], {"x": 1.0, "c": 2.0}) == pytest.approx([-2.0])


# --- multi-output ops seeded on one slot ------------------------------------------------------


def test_sincos_transpose_one_output_linearized():
    # only sin's slot is an output: the linear graph still emits d cos, which gets no cotangent
    g = trace_scalar(lambda x: sincos(x), ["x"])
    s_key, c_key = g.output_keys
    x = 0.6
    _, tr, [ct] = vjp(g, [s_key], ["x"], {"x": x}, [1.0])
    assert ct == pytest.approx(math.cos(x))
    _, tr, [ct] = vjp(g, [c_key], ["x"], {"x": x}, [1.0])
    assert ct == pytest.approx(-math.sin(x))


@pytest.mark.parametrize("seeds, expected", [
    ((2.0, None), lambda x: 2.0 * math.cos(x)),
    ((None, 2.0), lambda x: -2.0 * math.sin(x)),
    ((2.0, 3.0), lambda x: 2.0 * math.cos(x) - 3.0 * math.sin(x)),
])
def test_sincos_seeded_on_one_slot(seeds, expected):
    g = trace_scalar(lambda x: sincos(x), ["x"])
    x = 0.6
    lin = linearize(g, g.output_keys, ["x"])
    builder = GraphPrimitiveBuilder()
    builder.add_parent(lin.graph)
    seed_ids = [None if s is None else builder.add_input(("seed", i))
                for i, s in enumerate(seeds)]
    [ct] = linear_transpose_with_builder(lin, builder, seed_ids)
    builder.set_outputs([ct])
    graph = builder.build()
    values = {Input("x"): x}
    values.update({Input(("seed", i)): s for i, s in enumerate(seeds) if s is not None})
    [value] = evaluate([g, lin.graph, graph], [graph.value_keys[ct]], values)
    assert value == pytest.approx(expected(x))


# --- inactive inputs and outputs -----------------------------------------------------------------


def test_output_independent_of_wrt_has_no_seed():
    # (sin(y), x*y, cos(y)) w.r.t. x: only the middle output has a tangent, so one seed
    g = trace_scalar(lambda x, y: (sin(y), x * y, cos(y)), ["x", "y"])
    lin, tr, [ct] = vjp(g, g.output_keys, ["x"], {"x": 2.0, "y": 0.5}, [10.0, 3.0, 20.0])
    assert lin.tangent_outputs[0] is None and lin.tangent_outputs[2] is None
    assert [s.index for s, _ in tr.tangent_inputs] == [1]
    assert ct == pytest.approx(3.0 * 0.5)
    assert len(tr.graph.outputs) == 1


def test_input_with_no_path_gets_none():
    # f = sin(x) w.r.t. (x, y): y's cotangent is a symbolic zero, not an output
    g = trace_scalar(lambda x, y: sin(x), ["x", "y"])
    _, tr, cts = vjp(g, g.output_keys, ["x", "y"], {"x": 0.25, "y": 1.0}, [1.0])
    assert cts[0] == pytest.approx(math.cos(0.25))
    assert cts[1] is None and tr.tangent_outputs[1] is None
    assert len(tr.graph.outputs) == 1


def test_no_active_output_gives_empty_transpose():
    g = trace_scalar(lambda x, y: sin(y), ["x", "y"])
    lin = linearize(g, g.output_keys, ["x"])
    tr = linear_transpose(lin)
    assert tr.tangent_inputs == [] and tr.tangent_outputs == [None]
    assert len(tr.graph.operations) == 0


def test_output_that_is_an_input():
    # outputs (x, x*y): the first seed flows straight to x's cotangent
    g = trace_scalar(lambda x, y: (x, x * y), ["x", "y"])
    _, _, cts = vjp(g, g.output_keys, ["x", "y"], {"x": 2.0, "y": 3.0}, [5.0, 1.0])
    assert cts == pytest.approx([5.0 + 3.0, 2.0])


def test_aliased_checkpoint_vjp():
    # f(x) = h*x + h with h standing for sin(x) computed in another graph
    a = GraphBuilder()
    x_id = a.add_input("x")
    [s] = a.add_operation(ScalarOp.SIN, [Local(x_id)])
    graph_a = a.build()
    g = trace_scalar(lambda x, h: h * x + h, ["x", "h"])
    x = 0.8
    lin = linearize([graph_a, g], g.output_keys, ["x"], aliases={"h": graph_a.value_keys[s]})
    tr = linear_transpose(lin)
    [ct] = evaluate([graph_a, g, lin.graph, tr.graph], tr.tangent_output_keys,
                    {Input("x"): x, Input("h"): math.sin(x), tr.tangent_input_keys[0]: 1.0})
    assert ct == pytest.approx(math.cos(x) * x + math.sin(x) + math.cos(x))


# --- linear_transpose_with_builder ---------------------------------------------------------------


def run_with_builder(g, lin, seeds, primals):
    """Transpose ``lin`` into a fresh GraphPrimitiveBuilder and evaluate the cotangents."""
    builder = GraphPrimitiveBuilder()
    builder.add_parent(lin.graph)
    seed_ids = [builder.add_input(("my-seed", i)) if t is not None else None
                for i, t in enumerate(lin.tangent_outputs)]
    cts = linear_transpose_with_builder(lin, builder, seed_ids)
    assert len(cts) == len(lin.tangent_inputs)
    builder.set_outputs([c for c in cts if c is not None])
    graph = builder.build()
    values = {Input(k): v for k, v in primals.items()}
    values.update({Input(("my-seed", i)): s for i, s in enumerate(seeds)})
    keys = [graph.value_keys[c] for c in cts if c is not None]
    results = iter(evaluate([g, lin.graph, graph], keys, values))
    return [None if c is None else next(results) for c in cts]


@pytest.mark.parametrize("fn, primals", [
    (lambda x, y: x * y + sin(x), {"x": 0.7, "y": -1.3}),
    (lambda x, y: (x * x * y, cos(x - y), sincos(y)[1] * x), {"x": 1.2, "y": 0.1}),
    (lambda x, y: (lambda v: v * v + v)(sin(x) * y), {"x": 0.3, "y": 2.0}),
])
def test_with_graph_builder_matches_linear_transpose(fn, primals):
    g = trace_scalar(fn, ["x", "y"])
    lin = linearize(g, g.output_keys, ["x", "y"])
    seeds = [0.5 + i for i in range(len(g.outputs))]
    _, _, expected = vjp(g, g.output_keys, ["x", "y"], primals, seeds)
    got = run_with_builder(g, lin, seeds, primals)
    assert got == pytest.approx(expected)


class EagerBuilder:
    """A caller's builder that executes each op at once (an eager runtime).

    Only ``add_primitive``: the bare PrimitiveBuilder protocol, no ``__len__``.
    """

    def __init__(self, graphs, primal_values):
        self.graphs = graphs
        self.primal_values = primal_values
        self.values = []

    def push(self, value):
        self.values.append(value)
        return len(self.values) - 1

    def resolve(self, ref):
        if isinstance(ref, Local):
            return self.values[ref]
        [value] = evaluate(self.graphs, [ref.key], self.primal_values)
        return value

    def add_primitive(self, op, inputs, role):
        results = op.eval(None, [self.resolve(ref) for ref in inputs])
        return [self.push(r) for r in results]


def test_with_eager_builder():
    # f = x*y + sin(x) * x: grad = (y + cos(x) x + sin(x), x)
    g = trace_scalar(lambda x, y: x * y + sin(x) * x, ["x", "y"])
    x, y = 0.4, 2.5
    lin = linearize(g, g.output_keys, ["x", "y"])
    primal = {Input("x"): x, Input("y"): y}
    builder = EagerBuilder([g, lin.graph], primal)
    seed = builder.push(1.5)
    cts = linear_transpose_with_builder(lin, builder, [seed])
    got = [builder.values[c] for c in cts]
    assert got == pytest.approx([1.5 * (y + math.cos(x) * x + math.sin(x)), 1.5 * x])


def test_with_builder_none_seed_gives_none():
    g = trace_scalar(lambda x: x * x, ["x"])
    lin = linearize(g, g.output_keys, ["x"])
    builder = GraphPrimitiveBuilder()
    assert linear_transpose_with_builder(lin, builder, [None]) == [None]
    assert len(builder) == 0


def test_with_builder_wrong_seed_count_raises():
    from tidu import TiduError

    g = trace_scalar(lambda x: x * x, ["x"])
    lin = linearize(g, g.output_keys, ["x"])
    builder = GraphPrimitiveBuilder()
    s = builder.add_input("s")
    with pytest.raises(TiduError):
        linear_transpose_with_builder(lin, builder, [s, s])


# --- a test op set: ctx reaches every rule; a linear two-output op ------------------------------


class Ctx:
    def __init__(self):
        self.log = []


class RecOp(Primitive, EvaluableGraphOperation, enum.Enum):
    """A real scalar set whose rules log ``(op, rule, ctx)``. ``PAIR(x) = (2x, -x)`` is linear."""

    ADD = "add"
    MUL = "mul"
    NEG = "neg"
    SIN = "sin"
    COS = "cos"
    PAIR = "pair"

    @classmethod
    def add(cls):
        return cls.ADD

    def input_count(self):
        return 2 if self in (RecOp.ADD, RecOp.MUL) else 1

    def output_count(self):
        return 2 if self is RecOp.PAIR else 1

    def eval(self, ctx, inputs):
        if self is RecOp.ADD:
            return [inputs[0] + inputs[1]]
        if self is RecOp.MUL:
            return [inputs[0] * inputs[1]]
        if self is RecOp.NEG:
            return [-inputs[0]]
        if self is RecOp.SIN:
            return [math.sin(inputs[0])]
        if self is RecOp.COS:
            return [math.cos(inputs[0])]
        return [2 * inputs[0], -inputs[0]]

    def jvp_rule(self, b, xs, outs, ts, ctx):
        ctx.log.append((self, "jvp", ctx))
        if self is RecOp.ADD:
            if ts[0] is None or ts[1] is None:
                return [ts[0] if ts[1] is None else ts[1]]
            return b.add_primitive(RecOp.ADD, [Local(ts[0]), Local(ts[1])], LIN_TT)
        if self is RecOp.MUL:
            terms = []
            if ts[0] is not None:
                terms += b.add_primitive(RecOp.MUL, [Local(ts[0]), External(xs[1])], LIN_TF)
            if ts[1] is not None:
                terms += b.add_primitive(RecOp.MUL, [External(xs[0]), Local(ts[1])], LIN_FT)
            if len(terms) == 1:
                return terms
            return b.add_primitive(RecOp.ADD, [Local(terms[0]), Local(terms[1])], LIN_TT)
        if self is RecOp.NEG:
            return b.add_primitive(RecOp.NEG, [Local(ts[0])], LIN)
        if self is RecOp.SIN:
            [c] = b.add_primitive(RecOp.COS, [External(xs[0])], PRIMARY)
            return b.add_primitive(RecOp.MUL, [Local(ts[0]), Local(c)], LIN_TF)
        if self is RecOp.COS:
            [s] = b.add_primitive(RecOp.SIN, [External(xs[0])], PRIMARY)
            [m] = b.add_primitive(RecOp.MUL, [Local(ts[0]), Local(s)], LIN_TF)
            return b.add_primitive(RecOp.NEG, [Local(m)], LIN)
        return b.add_primitive(RecOp.PAIR, [Local(ts[0])], LIN)

    def transpose_rule(self, b, cts, inputs, role, ctx):
        ctx.log.append((self, "transpose", ctx))
        if self is RecOp.ADD:
            return [cts[0] if m else None for m in role.active_mask]
        if self is RecOp.MUL:
            if role.active_mask == (True, False):
                return [b.add_primitive(RecOp.MUL, [Local(cts[0]), inputs[1]], LIN_TF)[0], None]
            return [None, b.add_primitive(RecOp.MUL, [inputs[0], Local(cts[0])], LIN_FT)[0]]
        if self is RecOp.NEG:
            return b.add_primitive(RecOp.NEG, [Local(cts[0])], LIN)
        if self is RecOp.PAIR:
            # (2x, -x)^T (c0, c1) = 2 c0 - c1, each term only when its seed is non-zero
            terms = []
            if cts[0] is not None:
                terms += b.add_primitive(RecOp.ADD, [Local(cts[0]), Local(cts[0])], LIN_TT)
            if cts[1] is not None:
                terms += b.add_primitive(RecOp.NEG, [Local(cts[1])], LIN)
            if len(terms) == 1:
                return terms
            return b.add_primitive(RecOp.ADD, [Local(terms[0]), Local(terms[1])], LIN_TT)
        return super().transpose_rule(b, cts, inputs, role, ctx)


def rec_graph():
    """``p0, p1 = PAIR(x*y)``; outputs ``(sin(x)*y + p0, cos(-p1))``."""
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    [xy] = b.add_operation(RecOp.MUL, [Local(x), Local(y)])
    p0, p1 = b.add_operation(RecOp.PAIR, [Local(xy)])
    [s] = b.add_operation(RecOp.SIN, [Local(x)])
    [sy] = b.add_operation(RecOp.MUL, [Local(s), Local(y)])
    [f] = b.add_operation(RecOp.ADD, [Local(sy), Local(p0)])
    [n] = b.add_operation(RecOp.NEG, [Local(p1)])
    [c] = b.add_operation(RecOp.COS, [Local(n)])
    b.set_outputs([f, c])
    return b.build()


def test_ctx_reaches_every_rule():
    g = rec_graph()
    ctx = Ctx()
    lin = linearize(g, g.output_keys, ["x", "y"], ctx=ctx)
    assert {op for op, kind, _ in ctx.log if kind == "jvp"} == set(RecOp)
    assert all(seen is ctx for _, _, seen in ctx.log)
    jvp_calls = len(ctx.log)
    assert jvp_calls == len(g.operations)

    tr = linear_transpose(lin, ctx=ctx)
    transposed = ctx.log[jvp_calls:]
    assert {op for op, _, _ in transposed} == {RecOp.ADD, RecOp.MUL, RecOp.NEG, RecOp.PAIR}
    assert all(kind == "transpose" and seen is ctx for _, kind, seen in transposed)

    other = Ctx()
    builder = GraphPrimitiveBuilder()
    seeds = [builder.add_input("s0"), builder.add_input("s1")]
    linear_transpose_with_builder(lin, builder, seeds, ctx=other)
    assert other.log and all(kind == "transpose" and seen is other
                             for _, kind, seen in other.log)
    assert len(other.log) == len(transposed)

    # and the numbers: f = sin(x) y + 2xy, h = cos(xy)
    x, y, a, c = 0.5, 1.5, 1.0, 2.0
    values = {Input("x"): x, Input("y"): y}
    values.update(zip(tr.tangent_input_keys, [a, c]))
    cts = evaluate([g, lin.graph, tr.graph], tr.tangent_output_keys, values)
    dh = -math.sin(x * y)
    assert cts == pytest.approx([a * (math.cos(x) * y + 2 * y) + c * dh * y,
                                 a * (math.sin(x) + 2 * x) + c * dh * x])


@pytest.mark.parametrize("seeds, expected", [
    ((1.5, None), 3.0),            # 2 * 1.5
    ((None, 1.5), -1.5),           # -1.5
    ((1.5, 4.0), -1.0),            # 2 * 1.5 - 4
])
def test_linear_two_output_op_seeded_on_one_slot(seeds, expected):
    b = GraphBuilder()
    x = b.add_input("x")
    outs = b.add_operation(RecOp.PAIR, [Local(x)])
    b.set_outputs(outs)
    g = b.build()
    ctx = Ctx()
    lin = linearize(g, g.output_keys, ["x"], ctx=ctx)
    builder = GraphPrimitiveBuilder()
    seed_ids = [None if s is None else builder.add_input(("s", i)) for i, s in enumerate(seeds)]
    [ct] = linear_transpose_with_builder(lin, builder, seed_ids, ctx=ctx)
    builder.set_outputs([ct])
    graph = builder.build()
    [value] = evaluate([g, lin.graph, graph], [graph.value_keys[ct]],
                       {Input(("s", i)): s for i, s in enumerate(seeds) if s is not None})
    assert value == pytest.approx(expected)
    # a zero seed costs nothing: only the active slot's term is emitted
    assert len(graph.operations) == (1 if None in seeds else 3)


def test_linear_two_output_op_one_slot_linearized():
    # linearize only PAIR's second output: the transpose's PAIR rule sees (None, ct)
    b = GraphBuilder()
    x = b.add_input("x")
    outs = b.add_operation(RecOp.PAIR, [Local(x)])
    g = b.build()
    ctx = Ctx()
    lin = linearize(g, [g.value_keys[outs[1]]], ["x"], ctx=ctx)
    tr = linear_transpose(lin, ctx=ctx)
    [ct] = evaluate([g, lin.graph, tr.graph], tr.tangent_output_keys,
                    {tr.tangent_input_keys[0]: 2.0})
    assert ct == pytest.approx(-2.0)


def test_output_listed_twice_in_a_linear_graph_without_operations():
    # outputs (x, x) w.r.t. x: the linear graph is just the tangent input, listed twice.
    # The two seeds are summed with the add() of the primal graph's op set.
    from tidu import TiduError

    g = trace_scalar(lambda x: (x, sin(x)), ["x"])
    [x_key, _] = g.output_keys
    lin = linearize(g, [x_key, x_key], ["x"])
    assert len(lin.graph.operations) == 0
    _, tr, [ct] = vjp(g, [x_key, x_key], ["x"], {"x": 0.5}, [1.0, 2.0])
    assert ct == pytest.approx(3.0)
    assert [node.operation for node in tr.graph.operations] == [ScalarOp.ADD]
    _, _, [ct] = vjp(g, [x_key, x_key, g.output_keys[1]], ["x"], {"x": 0.5}, [1.0, 2.0, 4.0])
    assert ct == pytest.approx(3.0 + 4.0 * math.cos(0.5))

    # with no operation anywhere there is no op set to sum with: a TiduError, not a crash
    bare = GraphBuilder()
    x = bare.add_input("x")
    bare.set_outputs([x, x])
    bare = bare.build()
    lin = linearize(bare, bare.output_keys, ["x"])
    with pytest.raises(TiduError):
        linear_transpose(lin)
