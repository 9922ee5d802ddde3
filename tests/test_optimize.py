"""``tidu.optimize``: inlining, dead code elimination, CSE, constant folding, simplification.

A tiny op set written here (``Op`` and ``Const``, with a few ``simplify`` rules
and a ``constant`` hook) proves the mechanism; the shipped scalar set checks it
on real primal / linear / transposed triples. Every optimized graph is checked
against ``evaluate`` on the original graphs, for its operation count (never more
than the outputs needed), and for being closed (no ``External``, no parent).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import sys
from collections import Counter

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tidu
from primitives.scalar import Const as ScalarConst
from primitives.scalar import Scale, ScalarOp, cos, sin, trace_scalar
from tidu import Primitive, RuleContractError, TiduError, linear_transpose, linearize
from tidu.compile import optimize, producer
from tidu.errors import InvalidArgumentError, UnknownValueError
from tidu.graph import (
    PRIMARY,
    Derived,
    EvaluableGraphOperation,
    External,
    GraphBuilder,
    Input,
    Linearized,
    Local,
    evaluate,
    resolve,
)

SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


# --- a tiny op set with simplify rules ------------------------------------------------


class TinyOp(Primitive, EvaluableGraphOperation):
    """What ``Op`` and ``Const`` share: how to make a constant, and the rules."""

    __slots__ = ()

    @classmethod
    def constant(cls, value):
        return Const(value) if abs(value) <= 1e6 else None     # big values stay computed

    def simplify(self, rewriter, inputs, role, ctx):
        rule = RULES.get(self)
        return None if rule is None else rule(rewriter, inputs, role)


class Op(TinyOp, enum.Enum):
    ADD = "add"
    MUL = "mul"
    NEG = "neg"
    SIN = "sin"
    INV = "inv"            # 1 / x: raises ZeroDivisionError at 0
    SWAP = "swap"          # (a, b) -> (b, a): two outputs
    TIMES_CTX = "times_ctx"

    def input_count(self):
        return 2 if self in (Op.ADD, Op.MUL, Op.SWAP) else 1

    def output_count(self):
        return 2 if self is Op.SWAP else 1

    def eval(self, ctx, inputs):
        return EVAL[self](ctx, *inputs)


EVAL = {
    Op.ADD: lambda ctx, a, b: [a + b],
    Op.MUL: lambda ctx, a, b: [a * b],
    Op.NEG: lambda ctx, a: [-a],
    Op.SIN: lambda ctx, a: [math.sin(a)],
    Op.INV: lambda ctx, a: [1 / a],
    Op.SWAP: lambda ctx, a, b: [b, a],
    Op.TIMES_CTX: lambda ctx, a: [a * ctx],
}


@dataclasses.dataclass(frozen=True)
class Const(TinyOp):
    value: float

    def input_count(self):
        return 0

    def output_count(self):
        return 1

    def eval(self, ctx, inputs):
        return [self.value]


def const_value(key):
    """The value of ``key`` if a ``Const`` makes it, else ``None``."""
    made_by = producer(key)
    return made_by.operation.value if made_by and isinstance(made_by.operation, Const) else None


def made_by_op(key, op):
    """The producer of ``key`` if it is ``op``, else ``None``."""
    made_by = producer(key)
    return made_by if made_by is not None and made_by.operation is op else None


def add_rule(rewriter, inputs, role):
    x, y = inputs
    if const_value(y) == 0:
        return [x]                                     # x + 0 = x
    if const_value(x) == 0:
        return [y]                                     # 0 + y = y
    return None


def mul_rule(rewriter, inputs, role):
    x, y = inputs
    if const_value(y) == 1:
        return [x]                                     # x * 1 = x
    if const_value(x) == 1:
        return [y]                                     # 1 * y = y
    if const_value(x) == 0 or const_value(y) == 0:
        return rewriter.emit(Const(0.0), [])           # x * 0 = 0 (finite x)
    neg_x, neg_y = made_by_op(x, Op.NEG), made_by_op(y, Op.NEG)
    if neg_x and neg_y:                                # (-a) * (-b) = a * b
        return rewriter.emit(Op.MUL, [neg_x.inputs[0], neg_y.inputs[0]], role)
    return None


def neg_rule(rewriter, inputs, role):
    inner = producer(inputs[0])
    if inner is not None and inner.operation is Op.NEG:
        return [inner.inputs[0]]                       # -(-x) = x
    if inner is not None and inner.operation is Op.MUL:
        x, c = inner.inputs
        if const_value(c) is not None:                 # -(x * c) = x * (-c)
            [minus_c] = rewriter.emit(Const(-const_value(c)), [])
            return rewriter.emit(Op.MUL, [x, minus_c], role)
    return None


def swap_rule(rewriter, inputs, role):
    first, second = inputs
    inner = made_by_op(first, Op.SWAP)                 # swap(swap(a, b)) = (a, b)
    if inner and first.output_slot == 0 and second == inner.output_keys()[1]:
        return list(inner.inputs)
    return None


RULES = {Op.ADD: add_rule, Op.MUL: mul_rule, Op.NEG: neg_rule, Op.SWAP: swap_rule}


# --- helpers ----------------------------------------------------------------------------


def needed(outputs):
    """``(operation keys, Input keys)`` the outputs depend on, found by following keys."""
    ops, inputs, stack = set(), set(), list(outputs)
    while stack:
        key = stack.pop()
        if type(key) is not Derived:
            inputs.add(key)
        elif key.operation not in ops:
            ops.add(key.operation)
            stack.extend(key.operation.inputs)
    return ops, inputs


def check_closed(program, outputs):
    """The contract's structural half: closed, same inputs, no more operations."""
    ops, inputs = needed(outputs)
    assert program.parents == ()
    for node in program.operations:
        assert all(type(ref) is Local for ref in node.inputs), node
    assert set(program.input_keys) == inputs
    assert len(program.output_keys) == len(outputs)
    assert len(program.operations) <= len(ops)
    signatures = [(node.operation, node.key.inputs) for node in program.operations]
    assert len(set(signatures)) == len(signatures), "equal operations on equal inputs"


def optimized_values(program, values, ctx=None):
    return evaluate(program, program.output_keys, values, ctx)


def chain(op, n, start=None):
    """``op`` applied ``n`` times to input x (or to a constant ``start``)."""
    b = GraphBuilder()
    if start is None:
        value = b.add_input("x")
    else:
        [value] = b.add_operation(Const(start), [])
    for _ in range(n):
        [value] = b.add_operation(op, [Local(value)])
    b.set_outputs([value])
    return b.build()


def graph_of(f, *keys):
    """Trace ``f`` over the tiny set: ``f`` gets one input id per key and the builder."""
    b = GraphBuilder()
    ids = [b.add_input(k) for k in keys]
    b.set_outputs(f(b, *ids))
    return b.build()


def op(b, operation, *ids):
    return b.add_operation(operation, [Local(i) for i in ids])


def const(b, value):
    return b.add_operation(Const(value), [])[0]


# --- random programs of the tiny set ----------------------------------------------------

CONSTANTS = [0.0, 1.0, -1.0, 2.0, 0.5]


@st.composite
def tiny_programs(draw):
    """Random DAGs over one or two graphs (the second reads the first by External key)."""
    n_inputs = draw(st.integers(0, 3))
    first = GraphBuilder()
    keys = [first.global_key(first.add_input(f"x{i}")) for i in range(n_inputs)]
    keys.append(first.global_key(const(first, draw(st.sampled_from(CONSTANTS)))))
    n_ops = draw(st.integers(1, 14))
    split = draw(st.integers(0, n_ops))
    graphs, builder = [], first

    def ref(key):
        local = builder.local_id(key)
        return Local(local) if local is not None else External(key)

    def pick():
        index = draw(st.integers(0, len(keys) - 1))
        return keys[max(index, len(keys) - 3)] if draw(st.booleans()) else keys[index]

    for step in range(n_ops):
        if step == split:
            graphs.append(builder.build())
            builder = GraphBuilder()
            builder.add_parent(graphs[0])
        kind = draw(st.sampled_from(["const", "add", "mul", "neg", "negneg", "sin", "swap"]))
        if kind == "const":
            outs = builder.add_operation(Const(draw(st.sampled_from(CONSTANTS))), [])
        elif kind in ("add", "mul", "swap"):
            outs = builder.add_operation(Op[kind.upper()], [ref(pick()), ref(pick())])
        elif kind == "negneg":
            [inner] = builder.add_operation(Op.NEG, [ref(pick())])
            outs = builder.add_operation(Op.NEG, [Local(inner)])
        else:
            outs = builder.add_operation(Op[kind.upper()], [ref(pick())])
        keys.extend(builder.global_key(i) for i in outs)
    graphs.append(builder.build())
    outputs = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=4))
    values = {Input(f"x{i}"): draw(st.floats(-2, 2)) for i in range(n_inputs)}
    return graphs, outputs, values


@SETTINGS
@given(tiny_programs(), st.sampled_from(["list", "last", "view"]))
def test_random_tiny_programs_keep_their_values(program_case, how):
    graphs, outputs, values = program_case
    expected = evaluate(graphs, outputs, values)
    assume(all(math.isfinite(v) for v in expected))    # inf * 0 is nan, which x * 0 = 0 drops
    given_graphs = {"list": graphs, "last": graphs[-1], "view": resolve(graphs)}[how]
    program = optimize(given_graphs, outputs)
    check_closed(program, outputs)
    assert optimized_values(program, values) == expected


# --- the shipped scalar set: primal, linear and transposed graphs -------------------------

@st.composite
def scalar_triples(draw):
    n_inputs = draw(st.integers(1, 3))
    keys = [f"x{i}" for i in range(n_inputs)]
    b = GraphBuilder()
    ids = [b.add_input(k) for k in keys]
    unary = [ScalarOp.SIN, ScalarOp.COS, ScalarOp.TANH, ScalarOp.NEG, ScalarOp.SINCOS]
    binary = [ScalarOp.ADD, ScalarOp.SUB, ScalarOp.MUL]

    def pick():
        index = draw(st.integers(0, len(ids) - 1))
        return Local(ids[max(index, len(ids) - 3)] if draw(st.booleans()) else ids[index])

    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            ids += b.add_operation(draw(st.sampled_from(binary)), [pick(), pick()])
        elif kind == 1:
            ids += b.add_operation(draw(st.sampled_from(unary)), [pick()])
        elif kind == 2:
            ids += b.add_operation(Scale(draw(st.sampled_from([0.5, -2.0, 1.0]))), [pick()])
        else:
            [c] = b.add_operation(ScalarConst(draw(st.sampled_from([0.0, 1.0, 2.5]))), [])
            ids += b.add_operation(ScalarOp.MUL, [pick(), Local(c)])
    extra = draw(st.lists(st.integers(0, len(ids) - 1), max_size=2))
    b.set_outputs([ids[-1]] + [ids[i] for i in extra])
    primal = b.build()
    wrt = draw(st.lists(st.sampled_from(keys), min_size=1, unique=True))
    values = {Input(k): draw(st.floats(-1.5, 1.5)) for k in keys}
    return primal, wrt, values


@SETTINGS
@given(scalar_triples())
def test_random_scalar_gradients_keep_their_values(case):
    primal, wrt, values = case
    lin = linearize(primal, primal.output_keys, wrt)
    tr = linear_transpose(lin)
    graphs = [primal, lin.graph, tr.graph]
    values = dict(values)
    values.update({key: 0.5 + i for i, key in enumerate(tr.tangent_input_keys)})
    values.update({key: 1.5 - i for i, key in enumerate(lin.tangent_input_keys)})
    outputs = [k for k in tr.tangent_output_keys + lin.tangent_output_keys if k is not None]
    outputs += list(primal.output_keys)
    program = optimize(graphs, outputs)
    check_closed(program, outputs)
    expected = evaluate(graphs, outputs, values)
    assert optimized_values(program, values) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_scalar_gradient_triple_is_one_closed_graph():
    primal = trace_scalar(lambda x, y: x * y + sin(x) * cos(y) * x, ["x", "y"])
    lin = linearize(primal, primal.output_keys, ["x", "y"])
    tr = linear_transpose(lin)
    graphs = [primal, lin.graph, tr.graph]
    program = optimize(graphs, tr.tangent_output_keys)
    check_closed(program, tr.tangent_output_keys)
    # inputs in the order the graphs list them: primal inputs, then the seed
    assert program.input_keys == (Input("x"), Input("y"), tr.tangent_input_keys[0])
    # the linear ops stay linear: the program can still be transposed by role
    assert any(isinstance(node.role, Linearized) for node in program.operations)
    values = {Input("x"): 0.3, Input("y"): -1.2, tr.tangent_input_keys[0]: 1.0}
    assert optimized_values(program, values) == evaluate(graphs, tr.tangent_output_keys, values)


# --- inlining, dead code, outputs -----------------------------------------------------


def test_dead_code_is_dropped():
    def f(b, x, y):
        [used] = op(b, Op.SIN, x)
        op(b, Op.MUL, x, y)                           # dead
        return [used]
    g = graph_of(f, "x", "y")
    program = optimize(g, g.output_keys)
    assert [node.operation for node in program.operations] == [Op.SIN]
    assert program.input_keys == (Input("x"),)         # y is not needed


def test_output_listed_twice_and_an_input_as_output():
    g = graph_of(lambda b, x, y: [op(b, Op.SIN, x)[0], x, op(b, Op.SIN, x)[0]], "x", "y")
    outputs = [g.output_keys[0], Input("x"), g.output_keys[0], Input("y")]
    program = optimize(g, outputs)
    assert len(program.operations) == 1
    assert program.input_keys == (Input("x"), Input("y"))
    assert program.outputs[0] == program.outputs[2]
    assert program.output_keys[1] == Input("x") and program.output_keys[3] == Input("y")
    values = {Input("x"): 0.25, Input("y"): 7.0}
    assert optimized_values(program, values) == [math.sin(0.25), 0.25, math.sin(0.25), 7.0]


def test_no_outputs_is_an_empty_program():
    g = graph_of(lambda b, x: op(b, Op.SIN, x), "x")
    program = optimize(g, [])
    assert len(program.operations) == 0 and program.outputs == () and program.inputs == ()


def test_graphs_can_be_a_generator():
    g = graph_of(lambda b, x: op(b, Op.SIN, x), "x")
    program = optimize((graph for graph in [g]), g.output_keys)
    assert len(program.operations) == 1


def test_externals_are_inlined_across_three_graphs():
    first = graph_of(lambda b, x: op(b, Op.SIN, x), "x")
    second = GraphBuilder()
    second.add_parent(first)
    [y] = second.add_operation(Op.NEG, [External(first.output_keys[0])])
    second.set_outputs([y])
    second = second.build()
    third = GraphBuilder()
    third.add_parent(second)
    [z] = third.add_operation(Op.MUL, [External(second.output_keys[0]),
                                       External(first.output_keys[0])])
    third.set_outputs([z])
    third = third.build()
    program = optimize(third, third.output_keys)       # parents are followed
    check_closed(program, third.output_keys)
    assert [node.operation for node in program.operations] == [Op.SIN, Op.NEG, Op.MUL]
    assert optimized_values(program, {Input("x"): 2.0}) == [-math.sin(2.0) ** 2]


def test_tidu_exports_optimize():
    assert tidu.optimize is optimize


# --- CSE ------------------------------------------------------------------------------


def test_equal_work_in_two_graphs_is_one_operation():
    def f(b, x):
        [s] = op(b, Op.SIN, x)
        return op(b, Op.MUL, s, s)
    g1, g2 = graph_of(f, "x"), graph_of(f, "x")
    program = optimize([g1, g2], [g1.output_keys[0], g2.output_keys[0]])
    assert [node.operation for node in program.operations] == [Op.SIN, Op.MUL]
    assert program.outputs[0] == program.outputs[1]


def test_operations_equal_after_simplification_are_merged():
    def f(b, x, y):
        [nn] = op(b, Op.NEG, op(b, Op.NEG, x)[0])
        [p] = op(b, Op.MUL, nn, y)                     # becomes x * y ...
        [q] = op(b, Op.MUL, x, y)                      # ... which is this one
        return op(b, Op.ADD, p, q)
    g = graph_of(f, "x", "y")
    program = optimize(g, g.output_keys)
    assert [node.operation for node in program.operations] == [Op.MUL, Op.ADD]
    [add] = [node for node in program.operations if node.operation is Op.ADD]
    assert add.inputs[0] == add.inputs[1]
    assert optimized_values(program, {Input("x"): 3.0, Input("y"): 0.5}) == [3.0]


def test_roles_are_kept_and_separate():
    b = GraphBuilder()
    x, t = b.add_input("x"), b.add_input("t")
    [primal] = b.add_operation(Op.MUL, [Local(x), Local(t)])
    [linear] = b.add_operation(Op.MUL, [Local(x), Local(t)], Linearized((False, True)))
    b.set_outputs([primal, linear])
    g = b.build()
    program = optimize(g, g.output_keys)
    assert [node.role for node in program.operations] == [PRIMARY, Linearized((False, True))]


# --- constant folding -----------------------------------------------------------------


def test_operations_on_constants_fold():
    def f(b, x):
        [s] = op(b, Op.SIN, const(b, 2.0))
        [p] = op(b, Op.ADD, s, const(b, 0.5))
        return op(b, Op.MUL, p, x)
    g = graph_of(f, "x")
    program = optimize(g, g.output_keys)
    assert [type(node.operation) for node in program.operations] == [Const, Op]
    assert program.operations[0].operation == Const(math.sin(2.0) + 0.5)
    assert optimized_values(program, {Input("x"): 3.0}) == evaluate(g, g.output_keys,
                                                                     {Input("x"): 3.0})


def test_two_output_operation_folds_into_two_constants():
    g = graph_of(lambda b: op(b, Op.SWAP, const(b, 1.5), const(b, 2.5)))
    program = optimize(g, g.output_keys)
    assert {node.operation for node in program.operations} == {Const(1.5), Const(2.5)}
    assert optimized_values(program, {}) == [2.5, 1.5]


def test_folding_uses_ctx():
    g = graph_of(lambda b: op(b, Op.TIMES_CTX, const(b, 3.0)))
    program = optimize(g, g.output_keys, ctx=2.0)
    assert [node.operation for node in program.operations] == [Const(6.0)]


def test_constant_hook_may_refuse():
    g = graph_of(lambda b: op(b, Op.MUL, const(b, 1e4), const(b, 1e4)))   # 1e8 > 1e6
    program = optimize(g, g.output_keys)
    assert Op.MUL in [node.operation for node in program.operations]
    assert optimized_values(program, {}) == [1e8]


def test_an_operation_that_raises_is_not_folded_and_still_raises():
    g = graph_of(lambda b: op(b, Op.INV, const(b, 0.0)))
    program = optimize(g, g.output_keys)
    assert Op.INV in [node.operation for node in program.operations]
    with pytest.raises(ZeroDivisionError):
        optimized_values(program, {})


def test_ops_without_the_hooks_are_left_alone():
    class Plain(EvaluableGraphOperation, enum.Enum):  # not a Primitive: no hooks
        ONE = "one"
        NEG = "neg"
        def input_count(self): return 0 if self is Plain.ONE else 1
        def output_count(self): return 1
        def eval(self, ctx, inputs): return [1.0] if self is Plain.ONE else [-inputs[0]]
    b = GraphBuilder()
    [one] = b.add_operation(Plain.ONE, [])
    [y] = b.add_operation(Plain.NEG, [Local(one)])
    b.set_outputs(b.add_operation(Plain.NEG, [Local(y)]))
    g = b.build()
    program = optimize(g, g.output_keys)
    assert len(program.operations) == 3
    assert optimized_values(program, {}) == [1.0]


# --- each simplification rule -------------------------------------------------------


@pytest.mark.parametrize("build, expect_ops, inputs, expected", [
    # x + 0 and 0 + x
    (lambda b, x: op(b, Op.ADD, x, const(b, 0.0)), [], {"x": 2.0}, 2.0),
    (lambda b, x: op(b, Op.ADD, const(b, 0.0), x), [], {"x": 2.0}, 2.0),
    # x * 1 and 1 * x
    (lambda b, x: op(b, Op.MUL, x, const(b, 1.0)), [], {"x": 2.0}, 2.0),
    (lambda b, x: op(b, Op.MUL, const(b, 1.0), x), [], {"x": 2.0}, 2.0),
    # x * 0 and 0 * x: a constant
    (lambda b, x: op(b, Op.MUL, x, const(b, 0.0)), [Const(0.0)], {"x": 2.0}, 0.0),
    (lambda b, x: op(b, Op.MUL, const(b, 0.0), op(b, Op.SIN, x)[0]), [Const(0.0)],
     {"x": 2.0}, 0.0),
    # neg(neg(x))
    (lambda b, x: op(b, Op.NEG, op(b, Op.NEG, x)[0]), [], {"x": 2.0}, 2.0),
    # (-a) * (-b) = a * b
    (lambda b, x: op(b, Op.MUL, op(b, Op.NEG, x)[0], op(b, Op.NEG, op(b, Op.SIN, x)[0])[0]),
     [Op.SIN, Op.MUL], {"x": 2.0}, 2.0 * math.sin(2.0)),
    # -(x * c) = x * (-c)
    (lambda b, x: op(b, Op.NEG, op(b, Op.MUL, op(b, Op.SIN, x)[0], const(b, 2.0))[0]),
     [Op.SIN, Const(-2.0), Op.MUL], {"x": 2.0}, -2.0 * math.sin(2.0)),
    # nested: -(x * -1) emits x * 1, which is rewritten to x in turn
    (lambda b, x: op(b, Op.NEG, op(b, Op.MUL, x, const(b, -1.0))[0]), [], {"x": 2.0}, 2.0),
])
def test_each_rule(build, expect_ops, inputs, expected):
    g = graph_of(build, *inputs)
    program = optimize(g, g.output_keys)
    assert Counter(node.operation for node in program.operations) == Counter(expect_ops)
    assert optimized_values(program, {Input(k): v for k, v in inputs.items()}) == [expected]
    assert program.input_keys == tuple(Input(k) for k in inputs)   # kept even if unused


def test_rule_forwarding_two_outputs():
    def f(b, x, y):
        [s] = op(b, Op.SIN, y)
        first, second = op(b, Op.SWAP, x, s)
        return op(b, Op.SWAP, first, second)          # swap(swap(x, s)) = (x, s)
    g = graph_of(f, "x", "y")
    program = optimize(g, g.output_keys)
    assert [node.operation for node in program.operations] == [Op.SIN]
    assert program.output_keys[0] == Input("x")
    assert optimized_values(program, {Input("x"): 1.0, Input("y"): 2.0}) == [1.0, math.sin(2.0)]


def test_rules_apply_to_a_fixed_point():
    # ((x * 1) + 0) * (-(-(1))) : every rewrite exposes the next one
    def f(b, x):
        [p] = op(b, Op.MUL, x, const(b, 1.0))
        [q] = op(b, Op.ADD, p, const(b, 0.0))
        [one] = op(b, Op.NEG, op(b, Op.NEG, const(b, 1.0))[0])
        return op(b, Op.MUL, q, one)
    g = graph_of(f, "x")
    program = optimize(g, g.output_keys)
    assert len(program.operations) == 0
    assert program.output_keys == (Input("x"),)


# --- large graphs -----------------------------------------------------------------------


@pytest.fixture
def default_recursion_limit():
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)                        # CPython's default
    yield
    sys.setrecursionlimit(saved)


def test_100000_op_chain_collapses_without_recursion(default_recursion_limit):
    g = chain(Op.NEG, 100_000)                         # an even number of negations
    program = optimize(g, g.output_keys)
    assert len(program.operations) == 0 and program.output_keys == (Input("x"),)


def test_100000_op_chain_that_stays(default_recursion_limit):
    g = chain(Op.SIN, 100_000)
    program = optimize([g], g.output_keys)
    assert len(program.operations) == 100_000
    values = {Input("x"): 0.7}
    assert optimized_values(program, values) == evaluate(g, g.output_keys, values)


def test_long_constant_chain_folds_to_one_constant(default_recursion_limit):
    g = chain(Op.SIN, 20_000, start=0.7)               # 20 times the recursion limit
    program = optimize(g, g.output_keys)
    assert len(program.operations) == 1
    assert optimized_values(program, {}) == evaluate(g, g.output_keys, {})


# --- misuse and misbehaving rules ------------------------------------------------------


def test_bad_arguments():
    g = graph_of(lambda b, x: op(b, Op.SIN, x), "x")
    with pytest.raises(UnknownValueError, match="Input\\('nope'\\)"):
        optimize(g, [Input("nope")])
    with pytest.raises(InvalidArgumentError, match="optimize"):
        optimize(None, g.output_keys)
    with pytest.raises(InvalidArgumentError, match="optimize: outputs"):
        optimize(g, g.output_keys[0])
    assert len(optimize(g, g.output_keys).operations) == 1      # still usable


@dataclasses.dataclass(frozen=True)
class Bad(Primitive, EvaluableGraphOperation):
    """One input, one output (the identity); ``simplify`` misbehaves as ``how`` says."""

    how: str

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, inputs):
        return [inputs[0]]

    @classmethod
    def constant(cls, value):
        return Bad("not a constant")                    # has an input: breaks the contract

    def simplify(self, rewriter, inputs, role, ctx):
        if self.how == "unknown key":
            return [Input("somewhere else")]
        if self.how == "two results":
            return [inputs[0], inputs[0]]
        if self.how == "loops":                        # always a new, different op
            return rewriter.emit(Bad("loops"), rewriter.emit(Op.NEG, inputs), role)
        if self.how == "emits unknown input":
            return rewriter.emit(Op.NEG, [Input("somewhere else")])
        if self.how == "grows":                        # one op becomes four: (x * 2) * 0.5
            [two], [half] = rewriter.emit(Const(2.0), []), rewriter.emit(Const(0.5), [])
            [doubled] = rewriter.emit(Op.MUL, [inputs[0], two])
            return rewriter.emit(Op.MUL, [doubled, half])
        return None


@pytest.mark.parametrize("how, message", [
    ("unknown key", "not a value of the program"),
    ("two results", "expected None or a list of 1"),
    ("loops", "nest more than"),
    ("emits unknown input", "not a value of the program"),
])
def test_misbehaving_rules_raise_a_clear_error(how, message):
    g = graph_of(lambda b, x: op(b, Bad(how), x), "x")
    with pytest.raises(RuleContractError, match=message) as error:
        optimize(g, g.output_keys)
    assert "simplify" in str(error.value)
    assert isinstance(error.value, TiduError)
    assert len(optimize(chain(Op.NEG, 2), chain(Op.NEG, 2).output_keys).operations) == 0


def test_bad_constant_hook_raises():
    g = graph_of(lambda b: op(b, Bad("none"), const(b, 1.0)))
    with pytest.raises(RuleContractError, match="constant\\(\\) returned"):
        optimize(g, g.output_keys)


def test_rules_that_add_work_are_undone():
    g = graph_of(lambda b, x: op(b, Bad("grows"), x), "x")
    program = optimize(g, g.output_keys)
    assert [node.operation for node in program.operations] == [Bad("grows")]
    assert optimized_values(program, {Input("x"): 0.5}) == [0.5]


# --- hoisted: operations run as soon as their inputs exist ---------------------------------


def _op_names(graph):
    return [key.operation.name if isinstance(key.operation, Op) else "const"
            for key in graph.operation_keys]


def _is_neg(operation):
    return operation is Op.NEG


def test_hoisted_moves_an_operation_to_right_after_its_last_input():
    def f(b, x, y):
        [s] = op(b, Op.SIN, x)
        [p] = op(b, Op.MUL, s, y)           # reads s: the "big product"
        [q] = op(b, Op.ADD, p, x)
        [n] = op(b, Op.NEG, s)              # reads s only: moves up, right after SIN
        [m] = op(b, Op.NEG, n)              # reads the moved NEG: follows it
        [k] = op(b, Op.NEG, q)              # its input is made last: stays
        return [q, n, m, k]
    graph = graph_of(f, "x", "y")
    moved = tidu.hoisted(graph, _is_neg)
    assert _op_names(moved) == ["SIN", "NEG", "NEG", "MUL", "ADD", "NEG"]
    assert moved.input_keys == graph.input_keys and moved.output_keys == graph.output_keys
    values = {Input("x"): 0.7, Input("y"): -1.3}
    assert evaluate(moved, moved.output_keys, values) == evaluate(graph, graph.output_keys,
                                                                   values)


def test_hoisted_puts_an_operation_of_inputs_first_and_leaves_the_rest():
    graph = graph_of(lambda b, x: [op(b, Op.SIN, x)[0], op(b, Op.NEG, x)[0]], "x")
    assert _op_names(tidu.hoisted(graph, _is_neg)) == ["NEG", "SIN"]
    assert tidu.hoisted(graph, lambda operation: False) is graph     # nothing moves
    already = graph_of(lambda b, x: [op(b, Op.NEG, op(b, Op.SIN, x)[0])[0]], "x")
    assert tidu.hoisted(already, _is_neg) is already                 # nothing could move


@SETTINGS
@given(tiny_programs(), st.sampled_from(["NEG", "SIN", "ADD", "SWAP"]))
def test_hoisted_random_programs_keep_their_values_and_a_dependency_order(case, name):
    graphs, outputs, values = case
    expected = evaluate(graphs, outputs, values)
    assume(all(math.isfinite(v) for v in expected))
    program = optimize(graphs, outputs)
    moved = tidu.hoisted(program, lambda operation: operation is Op[name])
    assert sorted(map(id, moved.operation_keys)) == sorted(map(id, program.operation_keys))
    made = set(moved.input_keys)
    for op_key in moved.operation_keys:                 # every read made before it
        assert all(key in made for key in op_key.inputs)
        made.update(op_key.output_keys())
        if op_key.operation is Op[name] and any(type(k) is Derived for k in op_key.inputs):
            # right after the last producer of what it reads, or after other moved ops
            position = moved.operation_keys.index(op_key)
            last = max(moved.operation_keys.index(k.operation) for k in op_key.inputs
                       if type(k) is Derived)
            between = moved.operation_keys[last + 1:position]
            assert all(other.operation is Op[name] for other in between)
    assert evaluate(moved, moved.output_keys, values) == expected


def test_hoisted_on_a_long_graph_needs_no_recursion():
    b = GraphBuilder()
    value = b.add_input("x")
    sums = []
    for _ in range(100_000):
        [value] = b.add_operation(Op.SIN, [Local(value)])
        sums.append(value)
    [total] = b.add_operation(Op.NEG, [Local(sums[10])])
    b.set_outputs([value, total])
    moved = tidu.hoisted(b.build(), _is_neg)
    assert moved.operation_keys[11].operation is Op.NEG


def test_hoisted_refuses_a_graph_that_reads_another_graphs_values():
    first = graph_of(lambda b, x: [op(b, Op.SIN, x)[0]], "x")
    b = GraphBuilder()
    b.add_parent(first)
    [y] = b.add_operation(Op.NEG, [External(first.output_keys[0])])
    b.set_outputs([y])
    with pytest.raises(InvalidArgumentError, match=r"hoisted: .* another graph"):
        tidu.hoisted(b.build(), lambda operation: False)
    closed = optimize(b.build(), [b.global_key(y)])         # the same work, closed
    assert _op_names(tidu.hoisted(closed, _is_neg)) == ["SIN", "NEG"]
