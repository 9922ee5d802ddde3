"""``tidu.batch``: batched graphs against a Python loop over the batch.

The op set here is NumPy-backed and written like ``jax.lax``: elementwise ops
(``E``) take operands of one shape, so batch rules broadcast unbatched operands
(``Broadcast``) and move batch axes (``MoveAxis``) explicitly; ``ReduceSum``
reduces one axis. Every op has JVP, transpose and batch rules, so batching
composes with ``linearize`` and ``linear_transpose`` in both orders.
"""

from __future__ import annotations

import enum
import math
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidu import (
    ADRuleError,
    ADRuleKind,
    LinearizedGraph,
    Primitive,
    RuleContractError,
    TiduError,
    linear_transpose,
    linearize,
    sum_tangent_terms,
)
from tidu.batching import BatchAxisError, BatchedGraph, BatchedKey, batch, input_role
from tidu.errors import InvalidArgumentError, UnknownValueError
from tidu.graph import (
    PRIMARY,
    EvaluableGraphOperation,
    External,
    GraphBuilder,
    Input,
    Linearized,
    Local,
    evaluate,
    resolve,
)
from tidu.testing import check_batch, check_jvp, check_primitive, check_transpose

LIN = Linearized((True,))
LIN_TF = Linearized((True, False))
LIN_FT = Linearized((False, True))


def emit(b, op, inputs, role=PRIMARY) -> int:
    return b.add_primitive(op, inputs, role)[0]


class E(Primitive, EvaluableGraphOperation, enum.Enum):
    """Elementwise ops on arrays of one shape."""

    ADD = "add"
    MUL = "mul"
    NEG = "neg"
    SIN = "sin"
    COS = "cos"
    EXP = "exp"

    @classmethod
    def add(cls):
        return cls.ADD

    def input_count(self):
        return 2 if self in (E.ADD, E.MUL) else 1

    def output_count(self):
        return 1

    def eval(self, ctx, xs):
        if len({np.shape(x) for x in xs}) != 1:
            raise ValueError(f"{self.name} needs operands of one shape, got "
                             f"{[np.shape(x) for x in xs]}")
        fn = {E.ADD: np.add, E.MUL: np.multiply, E.NEG: np.negative, E.SIN: np.sin,
              E.COS: np.cos, E.EXP: np.exp}[self]
        return [fn(*xs)]

    def jvp_rule(self, b, primals, outputs, tangents, ctx):
        if self is E.ADD:
            return [sum_tangent_terms(b, tangents, E)]
        if self is E.NEG:
            return b.add_primitive(E.NEG, [Local(tangents[0])], LIN)
        if self is E.MUL:
            x, y = primals
            dx, dy = tangents
            terms = [None if dx is None else emit(b, E.MUL, [Local(dx), External(y)], LIN_TF),
                     None if dy is None else emit(b, E.MUL, [External(x), Local(dy)], LIN_FT)]
            return [sum_tangent_terms(b, terms, E)]
        [x], [dx] = primals, tangents
        if self is E.EXP:
            return b.add_primitive(E.MUL, [Local(dx), External(outputs[0])], LIN_TF)
        if self is E.SIN:
            cos = emit(b, E.COS, [External(x)])
            return b.add_primitive(E.MUL, [Local(dx), Local(cos)], LIN_TF)
        sin = emit(b, E.SIN, [External(x)])
        scaled = emit(b, E.MUL, [Local(dx), Local(sin)], LIN_TF)
        return b.add_primitive(E.NEG, [Local(scaled)], LIN)

    def transpose_rule(self, b, cotangents, inputs, role, ctx):
        if role is PRIMARY or self not in (E.ADD, E.MUL, E.NEG):
            raise ADRuleError(self.name, ADRuleKind.TRANSPOSE, "not linear")
        [ct] = cotangents
        if self is E.ADD:
            return [ct if active else None for active in role.active_mask]
        if self is E.NEG:
            return b.add_primitive(E.NEG, [Local(ct)], LIN)
        if role.active_mask == (True, False):
            return [emit(b, E.MUL, [Local(ct), inputs[1]], LIN_TF), None]
        return [None, emit(b, E.MUL, [inputs[0], Local(ct)], LIN_FT)]

    def batch_rule(self, b, inputs, axes, role, axis_size, ctx):
        if isinstance(ctx, list):                       # a test's call log
            ctx.append((self, tuple(axes)))
        # batch along the first batched operand's axis; move or broadcast the others to it
        target = next(axis for axis in axes if axis is not None)
        refs = []
        for i, (ref, axis) in enumerate(zip(inputs, axes)):
            if axis is None:
                ref = Local(emit(b, Broadcast(target, axis_size), [ref], input_role(role, i)))
            elif axis != target:
                ref = Local(emit(b, MoveAxis(axis, target), [ref], input_role(role, i)))
            refs.append(ref)
        return b.add_primitive(self, refs, role), [target]


class _LinearShapeOp(Primitive, EvaluableGraphOperation):
    """A one-input linear op: its JVP applies itself to the tangent."""

    @classmethod
    def add(cls):
        return E.ADD

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def jvp_rule(self, b, primals, outputs, tangents, ctx):
        return b.add_primitive(self, [Local(tangents[0])], LIN)


@dataclass(frozen=True)
class ReduceSum(_LinearShapeOp):
    axis: int
    size: int           # the length of the summed axis, for the transpose

    def eval(self, ctx, xs):
        return [np.sum(xs[0], axis=self.axis)]

    def transpose_rule(self, b, cotangents, inputs, role, ctx):
        return b.add_primitive(Broadcast(self.axis, self.size), [Local(cotangents[0])], LIN)

    def batch_rule(self, b, inputs, axes, role, axis_size, ctx):
        [axis] = axes
        if axis <= self.axis:                           # the batch axis stays in front
            return b.add_primitive(ReduceSum(self.axis + 1, self.size), inputs, role), [axis]
        return b.add_primitive(self, inputs, role), [axis - 1]


@dataclass(frozen=True)
class Broadcast(_LinearShapeOp):
    """A new axis of length ``size`` at ``axis``."""

    axis: int
    size: int

    def eval(self, ctx, xs):
        return [np.repeat(np.expand_dims(xs[0], self.axis), self.size, axis=self.axis)]

    def transpose_rule(self, b, cotangents, inputs, role, ctx):
        return b.add_primitive(ReduceSum(self.axis, self.size), [Local(cotangents[0])], LIN)

    def batch_rule(self, b, inputs, axes, role, axis_size, ctx):
        [axis] = axes
        if self.axis < axis:                            # the new axis goes in front of it
            return b.add_primitive(self, inputs, role), [axis + 1]
        return b.add_primitive(Broadcast(self.axis + 1, self.size), inputs, role), [axis]


@dataclass(frozen=True)
class MoveAxis(_LinearShapeOp):
    source: int
    destination: int

    def eval(self, ctx, xs):
        return [np.moveaxis(xs[0], self.source, self.destination)]

    def transpose_rule(self, b, cotangents, inputs, role, ctx):
        return b.add_primitive(MoveAxis(self.destination, self.source),
                               [Local(cotangents[0])], LIN)

    def batch_rule(self, b, inputs, axes, role, axis_size, ctx):
        [ref], [axis] = inputs, axes
        if axis != 0:
            ref = Local(emit(b, MoveAxis(axis, 0), [ref], role))
        moved = MoveAxis(self.source + 1, self.destination + 1)
        return b.add_primitive(moved, [ref], role), [0]


# --- a tracer for the op set -------------------------------------------------------------


class V:
    """A traced array: its id in a builder and its shape."""

    def __init__(self, builder, id, shape):
        self.builder, self.id, self.shape = builder, id, tuple(shape)

    def apply(self, op, *others, shape=None):
        [out] = self.builder.add_operation(op, [Local(v.id) for v in (self, *others)])
        return V(self.builder, out, self.shape if shape is None else shape)

    def __add__(self, other): return self.apply(E.ADD, other)
    def __mul__(self, other): return self.apply(E.MUL, other)
    def __neg__(self): return self.apply(E.NEG)
    def sin(self): return self.apply(E.SIN)
    def cos(self): return self.apply(E.COS)
    def exp(self): return self.apply(E.EXP)

    def sum(self, axis):
        shape = self.shape[:axis] + self.shape[axis + 1:]
        return self.apply(ReduceSum(axis, self.shape[axis]), shape=shape)

    def broadcast(self, axis, size):
        return self.apply(Broadcast(axis, size), shape=self.shape[:axis] + (size,) +
                          self.shape[axis:])

    def moveaxis(self, source, destination):
        shape = list(self.shape)
        shape.insert(destination, shape.pop(source))
        return self.apply(MoveAxis(source, destination), shape=shape)


def trace(fn, shapes: dict):
    builder = GraphBuilder()
    args = [V(builder, builder.add_input(name), shape) for name, shape in shapes.items()]
    out = fn(*args)
    builder.set_outputs([v.id for v in (out if isinstance(out, tuple) else (out,))])
    return builder.build()


# --- the reference: a Python loop over the batch ----------------------------------------


def loop(graphs, outputs, values: dict, in_axes: dict, size: int) -> list:
    """Each output for each example, stacked along a new first axis."""
    results = []
    for k in range(size):
        example = {Input(key): value if in_axes.get(key) is None else
                   np.take(value, k, axis=in_axes[key]) for key, value in values.items()}
        results.append(evaluate(graphs, outputs, example))
    return [np.stack([r[j] for r in results]) for j in range(len(outputs))]


def front(value, axis, size):
    """The batched value with its batch axis first (``size`` copies if it has none)."""
    value = np.asarray(value)
    return np.broadcast_to(value, (size, *value.shape)) if axis is None else \
        np.moveaxis(value, axis, 0)


def assert_matches_loop(graphs, outputs, values, in_axes, size) -> BatchedGraph:
    batched = batch(graphs, outputs, in_axes, size)
    got = batched.evaluate(values)
    expected = loop(graphs, outputs, values, in_axes, size)
    assert len(got) == len(expected) == len(outputs)
    for value, axis, reference in zip(got, batched.out_axes, expected):
        np.testing.assert_allclose(front(value, axis, size), reference, rtol=1e-12, atol=1e-12)
    return batched


def batched_values(rng, shapes: dict, in_axes: dict, size: int) -> dict:
    """Random inputs: a batch where ``in_axes`` names an axis, one example elsewhere."""
    values = {}
    for key, shape in shapes.items():
        axis = in_axes.get(key)
        if axis is not None:
            shape = shape[:axis] + (size,) + shape[axis:]
        values[key] = rng.standard_normal(shape)
    return values


def mlp_like(x, w):
    """Two outputs of shape (2,): ``sum_j sin(x_ij w_ij) x_ij`` and ``sum_j exp(..._ij)``,
    the second through a moved axis."""
    h = (x * w).sin() * x
    return h.sum(1), (h.moveaxis(0, 1).exp()).sum(0)


SHAPES = {"x": (2, 3), "w": (2, 3)}


# --- the op set's rules are right --------------------------------------------------------


@pytest.mark.parametrize("op, shapes", [
    (E.ADD, [(2, 3), (2, 3)]), (E.MUL, [(3,), (3,)]), (E.NEG, [(2,)]), (E.SIN, [(2, 2)]),
    (E.COS, [()]), (E.EXP, [(3,)]), (ReduceSum(1, 3), [(2, 3)]), (ReduceSum(0, 2), [(2, 3)]),
    (Broadcast(0, 2), [(3,)]), (Broadcast(1, 4), [(3,)]), (Broadcast(2, 2), [(2, 3)]),
    (MoveAxis(0, 2), [(2, 3, 4)]), (MoveAxis(1, 0), [(2, 3)]),
], ids=repr)
def test_every_op_of_the_test_set_passes_check_primitive(op, shapes):
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape) for shape in shapes]
    report = check_primitive(op, *inputs, rng=1, order=2)
    assert report.batch_comparisons > 0 and report.worst_error <= report.tolerance


# --- the transform -----------------------------------------------------------------------


@pytest.mark.parametrize("x_axis", [None, 0, 1, 2])
@pytest.mark.parametrize("w_axis", [None, 0, 1, 2])
def test_batch_axes_at_every_position_match_the_loop(x_axis, w_axis):
    graph = trace(mlp_like, SHAPES)
    in_axes = {"x": x_axis, "w": w_axis}
    values = batched_values(np.random.default_rng(0), SHAPES, in_axes, 4)
    batched = assert_matches_loop(graph, graph.output_keys, values, in_axes, 4)
    if x_axis is None and w_axis is None:
        assert batched.out_axes == [None, None] and len(batched.graph.operations) == 0
    else:
        assert None not in batched.out_axes


def test_unbatched_work_stays_unbatched():
    # cos(w) * w depends on w only: it is computed once, in the original graph
    graph = trace(lambda x, w: (x * (w.cos() * w), w.exp()), SHAPES)
    batched = batch(graph, graph.output_keys, {"x": 0, "w": None}, axis_size=5)
    ops = [node.operation for node in batched.graph.operations]
    assert ops == [Broadcast(0, 5), E.MUL]                 # broadcast cos(w)*w, multiply
    assert batched.out_axes == [0, None]
    assert batched.output_keys[1] == graph.output_keys[1]  # exp(w): the original value
    assert list(batched.graph.parents) == [graph]
    values = batched_values(np.random.default_rng(1), SHAPES, {"x": 0}, 5)
    out, exp_w = batched.evaluate(values)
    np.testing.assert_allclose(exp_w, np.exp(values["w"]))
    np.testing.assert_allclose(out, values["x"] * (np.cos(values["w"]) * values["w"]))


def test_batch_rules_run_only_where_a_batched_value_flows():
    graph = trace(lambda x, w: (x * w.sin()).sin() + w.cos(), SHAPES)
    seen = []                              # E's batch rule logs its calls into a list ctx
    batch(graph, graph.output_keys, {"x": 1}, axis_size=2, ctx=seen)
    # sin(w) and cos(w) read only w: never batched; MUL, SIN, ADD see x's batch axis
    assert seen == [(E.MUL, (1, None)), (E.SIN, (1,)), (E.ADD, (1, None))]


def test_an_input_listed_as_none_or_not_at_all_is_unbatched():
    graph = trace(mlp_like, SHAPES)
    a = batch(graph, graph.output_keys, {"x": 0, "w": None}, axis_size=3)
    b = batch(graph, graph.output_keys, {"x": 0}, axis_size=3)
    assert [k for k, _ in a.inputs] == [k for k, _ in b.inputs] == ["x"]
    assert [n.operation for n in a.graph.operations] == [n.operation for n in b.graph.operations]


def test_an_output_that_is_an_input():
    graph = trace(lambda x, w: (x, w, x * w), SHAPES)
    values = batched_values(np.random.default_rng(2), SHAPES, {"x": 1}, 3)
    batched = assert_matches_loop(graph, graph.output_keys, values, {"x": 1}, 3)
    assert batched.out_axes == [1, None, 1]
    assert batched.output_keys[0] == batched.input_keys[0]


def test_output_listed_twice_and_a_shared_subexpression():
    graph = trace(lambda x, w: ((x * w).sin() + (x * w).cos(),), SHAPES)
    [out] = graph.output_keys
    values = batched_values(np.random.default_rng(3), SHAPES, {"x": 0, "w": 2}, 2)
    batched = assert_matches_loop(graph, [out, out], values, {"x": 0, "w": 2}, 2)
    assert batched.output_keys[0] == batched.output_keys[1]
    assert [n.operation for n in batched.graph.operations].count(E.MUL) == 1


def test_batched_input_keys_and_pass_ids():
    graph = trace(mlp_like, SHAPES)
    a = batch(graph, graph.output_keys, {"x": 0}, axis_size=2)
    b = batch(graph, graph.output_keys, {"x": 0}, axis_size=2)
    assert a.pass_id != b.pass_id and a.input_keys != b.input_keys
    assert a.input_keys == [Input(BatchedKey("x", a.pass_id))]
    fixed = batch(graph, graph.output_keys, {"x": 0}, axis_size=2, pass_id=7)
    assert fixed.input_keys == [Input(BatchedKey("x", 7))]
    assert repr(BatchedKey("x", 7)) == "Batched('x', pass_id=7)"
    assert a.inputs == [("x", a.graph.inputs[0])] and a.axis_size == 2


def test_accepts_graphs_a_view_and_a_graph_that_refers_to_another():
    first = trace(lambda x, w: x * w, SHAPES)
    b = GraphBuilder()
    b.add_parent(first)
    [out] = b.add_operation(E.SIN, [External(first.output_keys[0])])
    b.set_outputs([out])
    second = b.build()
    values = batched_values(np.random.default_rng(4), SHAPES, {"w": 1}, 3)
    for graphs in (second, [second, first], resolve(second)):   # parents are followed
        batched = assert_matches_loop(graphs, second.output_keys, values, {"w": 1}, 3)
        assert list(batched.graph.parents) == [second, first]
    generated = batch((g for g in [second]), (k for k in second.output_keys), {"w": 1}, 3)
    assert generated.out_axes == [1]


def test_an_op_whose_rule_returns_an_unbatched_output_is_copied_downstream():
    # ZerosLike of a batched value is the same for every example: its rule says so (axis
    # None), and the ops that read only such values are copied, unbatched, into the new graph
    @dataclass(frozen=True)
    class ZerosLike(_LinearShapeOp):
        def eval(self, ctx, xs):
            return [np.zeros_like(xs[0])]

        def batch_rule(self, b, inputs, axes, role, axis_size, ctx):
            one = emit(b, ReduceSum(axes[0], axis_size), inputs, role)   # any one example
            return b.add_primitive(self, [Local(one)], role), [None]

    def f(x, w):
        zeros = x.apply(ZerosLike())
        return (zeros + w).exp() + x, zeros + w

    graph = trace(f, SHAPES)
    values = batched_values(np.random.default_rng(5), SHAPES, {"x": 1}, 3)
    batched = assert_matches_loop(graph, graph.output_keys, values, {"x": 1}, 3)
    assert batched.out_axes == [1, None]
    ops = [n.operation for n in batched.graph.operations]
    assert ops.count(E.EXP) == 1 and ops.count(Broadcast(1, 3)) == 1   # exp copied, unbatched


def test_a_multi_output_op_is_batched_once():
    from tidu.example_ops import Op

    b = GraphBuilder()
    x = b.add_input("x")
    sin, cos = b.add_operation(Op.SINCOS, [Local(x)])
    [out] = b.add_operation(Op.MUL, [Local(sin), Local(cos)])
    b.set_outputs([sin, out, cos])
    graph = b.build()
    batched = batch(graph, graph.output_keys, {"x": 0}, axis_size=3)
    assert [n.operation for n in batched.graph.operations] == [Op.SINCOS, Op.MUL]
    xs = [0.1, 0.5, -2.0]
    got = batched.evaluate({"x": xs})
    assert got == [[math.sin(v) for v in xs], [math.sin(v) * math.cos(v) for v in xs],
                   [math.cos(v) for v in xs]]


# --- random graphs ----------------------------------------------------------------------


@st.composite
def random_programs(draw):
    """A random program over inputs a (2, 3), b (2, 3), c (3,), with random batch axes."""
    shapes = {"a": (2, 3), "b": (2, 3), "c": (3,)}
    in_axes = {key: draw(st.one_of(st.none(), st.integers(0, len(shape))))
               for key, shape in shapes.items()}
    steps = draw(st.lists(st.tuples(st.sampled_from(["unary", "binary", "sum", "broadcast",
                                                     "move"]),
                                    st.integers(0, 10**6), st.integers(0, 10**6),
                                    st.integers(0, 10**6)), min_size=1, max_size=10))
    size = draw(st.integers(1, 3))
    return shapes, in_axes, steps, size, draw(st.integers(0, 2**16))


def build(shapes, steps):
    """The graph of ``steps``; each step picks its operands by index among the values so far."""
    builder = GraphBuilder()
    values = [V(builder, builder.add_input(key), shape) for key, shape in shapes.items()]
    for kind, i, j, k in steps:
        x = values[i % len(values)]
        if kind == "unary":
            values.append(x.apply([E.NEG, E.SIN, E.COS][j % 3]))
        elif kind == "binary":
            same = [v for v in values if v.shape == x.shape]
            values.append(x.apply([E.ADD, E.MUL][k % 2], same[j % len(same)]))
        elif kind == "sum" and x.shape:
            values.append(x.sum(j % len(x.shape)))
        elif kind == "broadcast" and len(x.shape) < 3:
            values.append(x.broadcast(j % (len(x.shape) + 1), 1 + k % 3))
        elif kind == "move" and len(x.shape) > 1:
            values.append(x.moveaxis(j % len(x.shape), k % len(x.shape)))
    outputs = values[len(shapes):][-3:] or values[:1]
    builder.set_outputs([v.id for v in outputs])
    return builder.build()


@settings(max_examples=40, deadline=None)
@given(random_programs())
def test_random_graphs_match_the_loop(program):
    shapes, in_axes, steps, size, seed = program
    graph = build(shapes, steps)
    values = batched_values(np.random.default_rng(seed), shapes, in_axes, size)
    assert_matches_loop(graph, graph.output_keys, values, in_axes, size)


# --- compositions with linearize and linear_transpose ----------------------------------


def per_example(values: dict, in_axes: dict, k: int) -> dict:
    return {key: value if in_axes.get(key) is None else np.take(value, k, axis=in_axes[key])
            for key, value in values.items()}


@pytest.fixture
def problem():
    graph = trace(mlp_like, SHAPES)
    rng = np.random.default_rng(6)
    return graph, rng


def test_batch_of_a_linearized_graph_is_a_forward_jacobian(problem):
    graph, rng = problem
    linear = linearize(graph, graph.output_keys, ["x"])
    [tangent_key] = [key.key for key in linear.tangent_input_keys]
    x, w = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    basis = np.eye(6).reshape(6, 2, 3)                      # every direction: the Jacobian
    batched = batch([graph, linear.graph], linear.tangent_output_keys, {tangent_key: 0}, 6)
    columns = batched.evaluate({"x": x, "w": w, tangent_key: basis})
    for column, axis, out_index in zip(columns, batched.out_axes, range(2)):
        for k in range(6):
            [expected] = evaluate([graph, linear.graph], [linear.tangent_output_keys[out_index]],
                                  {Input("x"): x, Input("w"): w,
                                   linear.tangent_input_keys[0]: basis[k]})
            np.testing.assert_allclose(np.take(column, k, axis=axis), expected, rtol=1e-12)
    # the primal graph's work is not batched: only tangent work is in the batched graph
    assert all(node.role is not PRIMARY for node in batched.graph.operations
               if node.operation in (E.MUL, E.ADD, E.NEG))


def test_batch_of_a_linearized_graph_over_primals_and_tangents(problem):
    graph, rng = problem
    linear = linearize(graph, graph.output_keys, ["x", "w"])
    tx, tw = (key.key for key in linear.tangent_input_keys)
    in_axes = {"x": 0, "w": None, tx: 2, tw: None}
    values = {"x": rng.standard_normal((4, 2, 3)), "w": rng.standard_normal((2, 3)),
              tx: rng.standard_normal((2, 3, 4)), tw: rng.standard_normal((2, 3))}
    assert_matches_loop([graph, linear.graph], linear.tangent_output_keys, values, in_axes, 4)


def test_batch_of_a_transposed_graph_per_example_gradients(problem):
    # vmap(grad): batch the reverse pass over the primal inputs and the cotangent seeds
    graph, rng = problem
    linear = linearize(graph, graph.output_keys, ["x", "w"])
    reverse = linear_transpose(linear)
    seeds = [key.key for key in reverse.tangent_input_keys]
    in_axes = {"x": 1, "w": None, seeds[0]: 0, seeds[1]: None}
    values = {"x": rng.standard_normal((2, 5, 3)), "w": rng.standard_normal((2, 3)),
              seeds[0]: rng.standard_normal((5, 2)), seeds[1]: rng.standard_normal(2)}
    batched = assert_matches_loop([graph, linear.graph, reverse.graph],
                                  reverse.tangent_output_keys, values, in_axes, 5)
    assert None not in batched.out_axes


def test_linearize_of_a_batched_graph(problem):
    graph, rng = problem
    in_axes = {"x": 2, "w": None}
    batched = batch(graph, graph.output_keys, in_axes, axis_size=4)
    [bx] = [key.key for key in batched.input_keys]
    linear = linearize([graph, batched.graph], batched.output_keys, [bx, "w"])
    xs, w = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3))
    txs, tw = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3))
    got = evaluate([graph, batched.graph, linear.graph], linear.tangent_output_keys,
                   {Input(bx): xs, Input("w"): w, linear.tangent_input_keys[0]: txs,
                    linear.tangent_input_keys[1]: tw})
    # the per-example JVPs
    plain = linearize(graph, graph.output_keys, ["x", "w"])
    for k in range(4):
        expected = evaluate([graph, plain.graph], plain.tangent_output_keys,
                            {Input("x"): xs[:, :, k], Input("w"): w,
                             plain.tangent_input_keys[0]: txs[:, :, k],
                             plain.tangent_input_keys[1]: tw})
        for value, axis, reference in zip(got, batched.out_axes, expected):
            np.testing.assert_allclose(np.take(value, k, axis=axis), reference, rtol=1e-12)
    # and against finite differences, through tidu.testing
    primals = {bx: xs, "w": w}
    report = check_jvp([graph, batched.graph], batched.output_keys, primals, rng=0)
    assert report.jvp_comparisons == 2 * 3          # x, w, both; for each output


def test_transpose_of_a_linearized_batched_graph_sums_shared_cotangents(problem):
    # grad of a batched loss: the per-example gradients of x, and for the shared w their
    # sum over the batch (Broadcast transposes to ReduceSum)
    graph, rng = problem
    batched = batch(graph, graph.output_keys, {"x": 0}, axis_size=3)
    [bx] = [key.key for key in batched.input_keys]
    linear = linearize([graph, batched.graph], batched.output_keys, [bx, "w"])
    reverse = linear_transpose(linear)
    xs, w = rng.standard_normal((3, 2, 3)), rng.standard_normal((2, 3))
    cts = [rng.standard_normal((3, 2)), rng.standard_normal((3, 2))]
    gx, gw = evaluate([graph, batched.graph, linear.graph, reverse.graph],
                      reverse.tangent_output_keys,
                      {Input(bx): xs, Input("w"): w, **dict(zip(reverse.tangent_input_keys, cts))})
    plain = linear_transpose(linearize(graph, graph.output_keys, ["x", "w"]))
    plain_linear = plain.graph.parents[0]
    gw_sum = np.zeros_like(w)
    for k in range(3):
        ex, ew = evaluate([graph, plain_linear, plain.graph], plain.tangent_output_keys,
                          {Input("x"): xs[k], Input("w"): w,
                           **dict(zip(plain.tangent_input_keys, [cts[0][k], cts[1][k]]))})
        np.testing.assert_allclose(gx[k], ex, rtol=1e-12)
        gw_sum += ew
    np.testing.assert_allclose(gw, gw_sum, rtol=1e-12)
    report = check_transpose([graph, batched.graph], linear, {bx: xs, "w": w}, rng=0)
    assert report.dot_products == 2 * 2 + 1        # each (output, input) pair, then all


def test_transpose_of_a_batched_linear_graph(problem):
    # batch a linear graph over the primal x and the tangent of w, at different axes: it
    # stays linear in the batched tangent (moved and broadcast with linear roles)
    graph, rng = problem
    linear = linearize(graph, graph.output_keys, ["w"])
    [tw] = [key.key for key in linear.tangent_input_keys]
    batched = batch([graph, linear.graph], linear.tangent_output_keys, {"x": 0, tw: 2},
                    axis_size=4)
    [_, (_, tw_id)] = batched.inputs
    as_linear = LinearizedGraph(batched.graph, [(batched.input_keys[1].key, tw_id)],
                                [batched.graph.local_id(k) for k in batched.output_keys])
    reverse = linear_transpose(as_linear)
    xs, w = rng.standard_normal((4, 2, 3)), rng.standard_normal((2, 3))
    cts = [rng.standard_normal((4, 2)), rng.standard_normal((4, 2))]
    bx = batched.input_keys[0]
    [gw] = evaluate([graph, linear.graph, batched.graph, reverse.graph],
                    reverse.tangent_output_keys,
                    {bx: xs, Input("w"): w, **dict(zip(reverse.tangent_input_keys, cts))})
    plain = linear_transpose(linear)
    for k in range(4):
        [expected] = evaluate([graph, linear.graph, plain.graph], plain.tangent_output_keys,
                              {Input("x"): xs[k], Input("w"): w,
                               **dict(zip(plain.tangent_input_keys, [cts[0][k], cts[1][k]]))})
        np.testing.assert_allclose(gw[:, :, k], expected, rtol=1e-12)
    shapes_of_tangents = {batched.input_keys[1].key: np.zeros((2, 3, 4))}
    report = check_transpose([graph, linear.graph], as_linear,
                             {bx.key: xs, "w": w, **shapes_of_tangents}, rng=1)
    assert report.dot_products == 2 + 1


def test_second_order_batch_of_a_hessian_vector_product(problem):
    graph, rng = problem
    first = linearize(graph, graph.output_keys, ["x"])
    second = linearize([graph, first.graph], first.tangent_output_keys, ["x"])
    [t1], [t2] = ([k.key for k in lin.tangent_input_keys] for lin in (first, second))
    in_axes = {"x": 1, "w": None, t1: 0, t2: None}
    values = {"x": rng.standard_normal((2, 3, 3)), "w": rng.standard_normal((2, 3)),
              t1: rng.standard_normal((3, 2, 3)), t2: rng.standard_normal((2, 3))}
    assert_matches_loop([graph, first.graph, second.graph], second.tangent_output_keys, values,
                        in_axes, 3)


def test_second_order_linearize_twice_of_a_batched_graph(problem):
    graph, rng = problem
    batched = batch(graph, graph.output_keys, {"x": 0, "w": 1}, axis_size=2)
    keys = [key.key for key in batched.input_keys]
    first = linearize([graph, batched.graph], batched.output_keys, keys)
    second = linearize([graph, batched.graph, first.graph], first.tangent_output_keys, keys)
    xs, ws = rng.standard_normal((2, 2, 3)), rng.standard_normal((2, 2, 3))
    t1 = [rng.standard_normal((2, 2, 3)) for _ in keys]
    t2 = [rng.standard_normal((2, 2, 3)) for _ in keys]
    got = evaluate([graph, batched.graph, first.graph, second.graph],
                   second.tangent_output_keys,
                   {Input(keys[0]): xs, Input(keys[1]): ws,
                    **dict(zip(first.tangent_input_keys, t1)),
                    **dict(zip(second.tangent_input_keys, t2))})
    # per example: the second derivative along (t1, t2) of the plain graph
    plain1 = linearize(graph, graph.output_keys, ["x", "w"])
    plain2 = linearize([graph, plain1.graph], plain1.tangent_output_keys, ["x", "w"])
    for k in range(2):
        slices = [t[k] if i == 0 else t[:, k] for i, t in enumerate(t1)], \
                 [t[k] if i == 0 else t[:, k] for i, t in enumerate(t2)]
        expected = evaluate([graph, plain1.graph, plain2.graph], plain2.tangent_output_keys,
                            {Input("x"): xs[k], Input("w"): ws[:, k],
                             **dict(zip(plain1.tangent_input_keys, slices[0])),
                             **dict(zip(plain2.tangent_input_keys, slices[1]))})
        for value, axis, reference in zip(got, batched.out_axes, expected):
            np.testing.assert_allclose(np.take(value, k, axis=axis), reference, rtol=1e-12)
    primals = {keys[0]: xs, keys[1]: ws, **{k.key: t for k, t in zip(first.tangent_input_keys,
                                                                        t1)}}
    report = check_jvp([graph, batched.graph, first.graph], first.tangent_output_keys, primals,
                       {keys[0]: t2[0], keys[1]: t2[1]}, rng=0)
    assert report.jvp_comparisons == 2 * 3          # x, w, both; for each output


def test_batch_of_a_batched_graph():
    graph = trace(mlp_like, SHAPES)
    inner = batch(graph, graph.output_keys, {"x": 0, "w": 2}, axis_size=3)
    keys = [key.key for key in inner.input_keys]
    rng = np.random.default_rng(7)
    values = {keys[0]: rng.standard_normal((4, 3, 2, 3)),
              keys[1]: rng.standard_normal((2, 4, 3, 3))}
    outer = assert_matches_loop([inner.graph], inner.output_keys, values,
                                {keys[0]: 0, keys[1]: 1}, 4)
    assert None not in outer.out_axes


# --- a deep graph ------------------------------------------------------------------------


STEPS = 33_334                        # 3 ops per step: 100,002 ops


def test_a_100000_op_chain_is_batched_without_recursion():
    limit = sys.getrecursionlimit()
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    builder = GraphBuilder()
    y = V(builder, builder.add_input("x"), (3,))
    c = V(builder, builder.add_input("c"), (3,))
    for _ in range(STEPS):
        y = y.sin() * y + c
    builder.set_outputs([y.id])
    graph = builder.build()
    sys.setrecursionlimit(depth + 500)      # a per-op recursion would need ~100,000 frames
    try:
        batched = batch(graph, graph.output_keys, {"x": 1}, axis_size=4)
    finally:
        sys.setrecursionlimit(limit)
    assert len(graph.operations) == 3 * STEPS >= 100_000
    assert len(batched.graph.operations) == len(graph.operations) + 1   # c broadcast once
    rng = np.random.default_rng(8)
    xs, c0 = rng.uniform(0.2, 0.8, (3, 4)), rng.uniform(0.1, 0.3, 3)
    [got] = batched.evaluate({"x": xs, "c": c0})
    expected = xs.T
    for _ in range(STEPS):
        expected = np.sin(expected) * expected + c0
    np.testing.assert_allclose(np.moveaxis(got, 1, 0), expected, rtol=1e-10)


# --- errors ----------------------------------------------------------------------------


class NoBatch(Primitive, EvaluableGraphOperation, enum.Enum):
    TANH = "tanh"

    @classmethod
    def add(cls):
        return E.ADD

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, xs):
        return [np.tanh(xs[0])]


def test_a_missing_batch_rule_raises_and_the_library_stays_usable():
    graph = trace(lambda x, w: x.apply(NoBatch.TANH) * w, SHAPES)
    with pytest.raises(ADRuleError) as info:
        batch(graph, graph.output_keys, {"x": 0}, axis_size=2)
    assert info.value.op == "TANH" and info.value.rule is ADRuleKind.BATCH
    assert str(info.value) == "TANH has no batch rule"
    # batching only w never reaches TANH: fine
    values = batched_values(np.random.default_rng(9), SHAPES, {"w": 0}, 2)
    assert_matches_loop(graph, graph.output_keys, values, {"w": 0}, 2)


def test_an_op_that_is_not_a_primitive():
    class Plain(EvaluableGraphOperation, enum.Enum):
        SQUARE = "square"

        def input_count(self):
            return 1

        def output_count(self):
            return 1

        def eval(self, ctx, xs):
            return [xs[0] ** 2]

    graph = trace(lambda x, w: x.apply(Plain.SQUARE), SHAPES)
    with pytest.raises(ADRuleError, match="SQUARE has no batch rule: it is not a tidu.Primitive"):
        batch(graph, graph.output_keys, {"x": 0}, axis_size=2)


@pytest.mark.parametrize("in_axes, error, message", [
    ({"x": -1}, BatchAxisError, "batch axis of input 'x' is -1; expected a non-negative int"),
    ({"x": True}, BatchAxisError, "batch axis of input 'x' is True"),
    ({"x": 1.0}, BatchAxisError, "batch axis of input 'x' is 1.0"),
    ({"x": "0"}, BatchAxisError, "batch axis of input 'x' is '0'"),
    ({"z": 0}, UnknownValueError, "batch in_axes 'z': no graph given has this input"),
    ([0, None], InvalidArgumentError, "in_axes must be a mapping from input keys"),
    ((("x", 0),), InvalidArgumentError, "in_axes must be a mapping"),
])
def test_bad_in_axes_name_the_key(in_axes, error, message):
    graph = trace(mlp_like, SHAPES)
    with pytest.raises(error, match=message.replace("(", r"\(")) as info:
        batch(graph, graph.output_keys, in_axes, axis_size=2)
    assert isinstance(info.value, TiduError)


def test_numpy_integer_axes_are_accepted():
    graph = trace(mlp_like, SHAPES)
    batched = batch(graph, graph.output_keys, {"x": np.int64(1)}, axis_size=np.int32(2))
    assert batched.in_axes == {"x": 1} and type(batched.in_axes["x"]) is int
    assert batched.axis_size == 2 and type(batched.axis_size) is int


@pytest.mark.parametrize("axis_size", [-1, True, 2.0, None, "3"])
def test_bad_axis_size(axis_size):
    graph = trace(mlp_like, SHAPES)
    with pytest.raises(BatchAxisError, match="axis_size must be a non-negative int"):
        batch(graph, graph.output_keys, {"x": 0}, axis_size=axis_size)


def test_bad_outputs_and_graphs():
    graph = trace(mlp_like, SHAPES)
    with pytest.raises(UnknownValueError, match="batch output"):
        batch(graph, [Input("nope")], {"x": 0}, axis_size=2)
    with pytest.raises(InvalidArgumentError, match="outputs must be a sequence"):
        batch(graph, graph.output_keys[0], {"x": 0}, axis_size=2)
    with pytest.raises(InvalidArgumentError, match="batch: resolve needs"):
        batch("graph", graph.output_keys, {"x": 0}, axis_size=2)


def test_inconsistent_batch_sizes_name_the_input():
    graph = trace(mlp_like, SHAPES)
    batched = batch(graph, graph.output_keys, {"x": 0, "w": 1}, axis_size=3)
    rng = np.random.default_rng(10)
    good_x, good_w = rng.standard_normal((3, 2, 3)), rng.standard_normal((2, 3, 3))
    with pytest.raises(BatchAxisError, match=r"input 'w' has length 4 along its batch axis 1, "
                                             r"but the batch size \(axis_size\) is 3"):
        batched.evaluate({"x": good_x, "w": rng.standard_normal((2, 4, 3))})
    with pytest.raises(BatchAxisError, match="input 'x' has length 2 along its batch axis 0"):
        batched.evaluate({"x": rng.standard_normal((2, 2, 3)), "w": good_w})
    with pytest.raises(BatchAxisError, match=r"input 'w' has 1 axes \(shape \(3,\)\), so it "
                                             "has no batch axis 1"):
        batched.evaluate({"x": good_x, "w": np.ones(3)})
    with pytest.raises(BatchAxisError, match="input 'x' is 1.5, which has no axis 0"):
        batched.evaluate({"x": 1.5, "w": good_w})
    with pytest.raises(InvalidArgumentError, match="values must be a mapping"):
        batched.evaluate([good_x, good_w])
    assert len(batched.evaluate({"x": good_x, "w": good_w})) == 2      # still usable


@dataclass(frozen=True)
class BadRule(_LinearShapeOp):
    """Negation whose batch rule returns what ``result(b, inputs, axes)`` says."""

    kind: str

    def eval(self, ctx, xs):
        return [-xs[0]]

    def batch_rule(self, b, inputs, axes, role, axis_size, ctx):
        [out] = b.add_primitive(E.NEG, inputs, role)
        return {
            "ids only": lambda: [out],
            "one list": lambda: [out, axes[0]],
            "two axes": lambda: ([out], [0, 0]),
            "no id": lambda: ([None], [0]),
            "negative axis": lambda: ([out], [-1]),
            "bool axis": lambda: ([out], [True]),
            "stranger id": lambda: ([out + 100], [0]),
            "a key": lambda: ([b.global_key(out)], [0]),
            "axes not a sequence": lambda: ([out], 0),
            "axes a float": lambda: ([out], 0.5),
            "tuples": lambda: ((out,), (axes[0],)),
        }[self.kind]()


@pytest.mark.parametrize("kind, message", [
    ("ids only", r"returned \[\d+\]; a batch rule returns \(output ids, output batch axes\)"),
    ("one list", r"returned \[\d+, 0\]; a batch rule returns"),
    ("two axes", "returned 2 batch axes for 1 outputs"),
    ("no id", r"output 0 has no id \(None\)"),
    ("negative axis", "batch axis of output 0 is -1, not a non-negative int or None"),
    ("bool axis", "batch axis of output 0 is True"),
    ("stranger id", r"id of output 0 is \d+, which its builder never produced"),
    ("a key", "id of output 0 is Derived"),
    ("axes not a sequence", r"returned \(\[\d+\], 0\); a batch rule returns"),
    ("axes a float", "returned batch axes 0.5, not a sequence"),
])
def test_rule_contract_errors_name_the_op(kind, message):
    graph = trace(lambda x, w: x.apply(BadRule(kind)), SHAPES)
    with pytest.raises(RuleContractError, match=message) as info:
        batch(graph, graph.output_keys, {"x": 0}, axis_size=2)
    assert info.value.rule is ADRuleKind.BATCH
    assert str(info.value).startswith(f"batch rule of BadRule(kind='{kind}'): ")


def test_a_rule_may_return_tuples():
    graph = trace(lambda x, w: x.apply(BadRule("tuples")), SHAPES)
    values = batched_values(np.random.default_rng(11), SHAPES, {"x": 1}, 2)
    assert assert_matches_loop(graph, graph.output_keys, values, {"x": 1}, 2).out_axes == [1]


def test_input_role():
    assert input_role(PRIMARY, 0) is PRIMARY
    assert input_role(LIN_TF, 0) is LIN and input_role(LIN_TF, 1) is PRIMARY


# --- the example op set: batches of Python numbers are lists -----------------------------


def test_example_ops_per_example_gradients_against_a_loop():
    from tidu.example_ops import sin
    from tidu.example_ops import trace as trace_scalar

    graph = trace_scalar(lambda x, y: x * y + sin(x * x), ["x", "y"])
    linear = linearize(graph, graph.output_keys, ["x", "y"])
    reverse = linear_transpose(linear)
    [seed] = [key.key for key in reverse.tangent_input_keys]
    xs, y = [0.1, -0.7, 2.5 + 1j], 0.5 - 0.25j
    batched = batch([graph, linear.graph, reverse.graph], reverse.tangent_output_keys,
                    {"x": 0, seed: None}, axis_size=3)
    gx, gy = batched.evaluate({"x": xs, "y": y, seed: 1.0})
    for k, x in enumerate(xs):
        ex, ey = evaluate([graph, linear.graph, reverse.graph], reverse.tangent_output_keys,
                          {Input("x"): x, Input("y"): y, Input(seed): 1.0})
        assert gx[k] == pytest.approx(ex, rel=1e-14) and gy[k] == pytest.approx(ey, rel=1e-14)
    # complex: the gradient is conj of the derivative (tidu's convention)
    assert gx[2] == pytest.approx((y + 2 * xs[2] * np.cos(xs[2] ** 2)).conjugate())


def test_example_ops_decline_what_they_cannot_batch():
    from tidu.example_ops import Broadcast as ListBroadcast
    from tidu.example_ops import Op
    from tidu.example_ops import trace as trace_scalar

    graph = trace_scalar(lambda x, y: x * y, ["x", "y"])
    inner = batch(graph, graph.output_keys, {"x": 0}, axis_size=2)
    # y was broadcast to a list by the first batch: batching y now needs Broadcast's rule
    with pytest.raises(ADRuleError) as info:
        batch([graph, inner.graph], inner.output_keys, {"y": 0}, axis_size=3)
    assert info.value.op == "Broadcast(size=2)" and info.value.rule is ADRuleKind.BATCH
    # a batch of numbers has axis 0 only
    with pytest.raises(ADRuleError, match="batch axis 0 only"):
        batch(graph, graph.output_keys, {"x": 1}, axis_size=2)
    # lists of different lengths are refused by eval, not cut short
    with pytest.raises(TiduError, match="lists of one length"):
        Op.ADD.eval(None, [[1.0, 2.0], [1.0]])
    with pytest.raises(TiduError, match="lists of one length"):
        Op.MUL.eval(None, [[1.0, 2.0], 3.0])
    assert ListBroadcast(2).eval(None, [1.5]) == [[1.5, 1.5]]


@pytest.mark.parametrize("op, args", [("MUL", (1.5, -0.5)), ("ADD", (1 + 2j, 0.5 - 1j)),
                                      ("SINCOS", (0.3,)), ("CONJ", (0.3 - 1j,))])
def test_example_ops_pass_check_primitive_with_their_batch_rules(op, args):
    from tidu.example_ops import Op

    report = check_primitive(getattr(Op, op), *args, rng=0, order=2)
    assert report.batch_comparisons > 0


def test_check_batch_of_the_test_set_at_order_two():
    rng = np.random.default_rng(12)
    report = check_batch(E.MUL, rng.standard_normal((2, 3)), rng.standard_normal((2, 3)),
                         order=2, rng=0)
    assert report.batch_comparisons == 2 * (4 * 4 - 1)        # every choice, twice batched
