"""Hostile round 54b: the core API as a primitive set's author uses it (a set written here
from API.md, rules that break the contract, hand-made linear graphs, tidu.testing's checkers,
eager traces); each test failed before its fix."""

from __future__ import annotations

import copy
import enum
import math
import pickle

import pytest

from tidu import LinearizedGraph, Primitive, RuleContractError, TiduError, linear_transpose, \
    linearize
from tidu.errors import GraphError, InvalidArgumentError
from tidu.eager import BackwardExecutor, EagerInput, RecordedGraph, Recorder, \
    try_backward
from tidu.graph import PRIMARY, EvaluableGraphOperation, External, GraphBuilder, Input, \
    Linearized, Local, evaluate
from tidu.testing import CheckFailure, check_primitive

LIN, TF, FT, TT = (Linearized((True,)), Linearized((True, False)), Linearized((False, True)),
                   Linearized((True, True)))


class Op(Primitive, EvaluableGraphOperation, enum.Enum):
    """A small set as a stranger writes it: SPLIT(x) = (x, -x), whose JVP emits NEG."""

    ADD = "add"
    MUL = "mul"
    NEG = "neg"
    SIN = "sin"
    COS = "cos"
    SPLIT = "split"

    @classmethod
    def add(cls):
        return cls.ADD

    def input_count(self):
        return 2 if self in (Op.ADD, Op.MUL) else 1

    def output_count(self):
        return 2 if self is Op.SPLIT else 1

    def eval(self, ctx, xs):
        return {Op.ADD: lambda: [xs[0] + xs[1]], Op.MUL: lambda: [xs[0] * xs[1]],
                Op.NEG: lambda: [-xs[0]], Op.SIN: lambda: [math.sin(xs[0])],
                Op.COS: lambda: [math.cos(xs[0])], Op.SPLIT: lambda: [xs[0], -xs[0]]}[self]()

    def jvp_rule(self, b, xs, outs, ts, ctx):
        if self is Op.ADD:
            if None in ts:
                return [ts[0] if ts[1] is None else ts[1]]
            return b.add_primitive(Op.ADD, [Local(ts[0]), Local(ts[1])], TT)
        if self is Op.MUL:
            terms = []
            if ts[0] is not None:
                terms += b.add_primitive(Op.MUL, [Local(ts[0]), External(xs[1])], TF)
            if ts[1] is not None:
                terms += b.add_primitive(Op.MUL, [External(xs[0]), Local(ts[1])], FT)
            if len(terms) == 2:
                return b.add_primitive(Op.ADD, [Local(terms[0]), Local(terms[1])], TT)
            return terms
        if self is Op.NEG:
            return b.add_primitive(Op.NEG, [Local(ts[0])], LIN)
        if self is Op.SIN:
            [c] = b.add_primitive(Op.COS, [External(xs[0])], PRIMARY)
            return b.add_primitive(Op.MUL, [Local(ts[0]), Local(c)], TF)
        if self is Op.SPLIT:
            return [ts[0], *b.add_primitive(Op.NEG, [Local(ts[0])], LIN)]
        return super().jvp_rule(b, xs, outs, ts, ctx)

    def transpose_rule(self, b, cts, inputs, role, ctx):
        mask = role.active_mask
        if self is Op.ADD:
            return [cts[0] if mask[0] else None, cts[0] if mask[1] else None]
        if self is Op.NEG:
            return b.add_primitive(Op.NEG, [Local(cts[0])], LIN)
        if self is Op.MUL and mask == (True, False):
            return [b.add_primitive(Op.MUL, [Local(cts[0]), inputs[1]], TF)[0], None]
        if self is Op.MUL and mask == (False, True):
            return [None, b.add_primitive(Op.MUL, [inputs[0], Local(cts[0])], FT)[0]]
        if self is Op.SPLIT:
            first, second = cts
            if second is not None:
                [second] = b.add_primitive(Op.NEG, [Local(second)], LIN)
            if first is None or second is None:
                return [second if first is None else first]
            return b.add_primitive(Op.ADD, [Local(first), Local(second)], TT)
        return super().transpose_rule(b, cts, inputs, role, ctx)


def one_op_graph(op):
    b = GraphBuilder()
    ids = [b.add_input(f"x{i}") for i in range(op.input_count())]
    b.set_outputs(b.add_operation(op, [Local(i) for i in ids]))
    return b.build()


class Forgot(Primitive, EvaluableGraphOperation, enum.Enum):
    """Rules that return a primal value (role PRIMARY) where a tangent or cotangent belongs."""

    JVP = "jvp"              # sin's JVP returning cos(x), not dx * cos(x)
    TRANSPOSE = "transpose"  # scale-by-x's transpose returning x, not ct * x

    @classmethod
    def add(cls):
        return Op.ADD

    def input_count(self):
        return 1 if self is Forgot.JVP else 2

    def output_count(self):
        return 1

    def eval(self, ctx, xs):
        return [math.sin(xs[0])] if self is Forgot.JVP else [xs[0] * xs[1]]

    def jvp_rule(self, b, xs, outs, ts, ctx):
        if self is Forgot.JVP:
            return b.add_primitive(Op.COS, [External(xs[0])], PRIMARY)
        return b.add_primitive(Forgot.TRANSPOSE, [Local(ts[0]), External(xs[1])], TF)

    def transpose_rule(self, b, cts, inputs, role, ctx):
        return [b.add_primitive(Op.NEG, [inputs[1]], PRIMARY)[0], None]


def test_a_jvp_rule_returning_a_primal_value_as_its_tangent_is_refused():
    # was: linearize accepted it, and the JVP evaluated to cos(x) whatever the tangent
    # (cos(0.3) for a tangent of 2.0): a wrong derivative without an error
    graph = one_op_graph(Forgot.JVP)
    with pytest.raises(RuleContractError, match=r"jvp rule of JVP: .*slot 0 .*COS with role "
                                                r"PRIMARY"):
        linearize(graph, graph.output_keys, ["x0"])
    linear = linearize(one_op_graph(Op.SIN), one_op_graph(Op.SIN).output_keys, ["x0"])
    assert linear.tangent_outputs[0] is not None         # the engine still works


def test_a_transpose_rule_returning_a_primal_value_as_a_cotangent_is_refused():
    # was: the transpose gave -x as the cotangent of t in t * x, whatever the seed
    graph = one_op_graph(Forgot.TRANSPOSE)
    linear = linearize(graph, graph.output_keys, ["x0"])
    with pytest.raises(RuleContractError, match=r"transpose rule of TRANSPOSE: .*NEG with role "
                                                r"PRIMARY"):
        linear_transpose(linear)


def hand_made_linear(role, op=Op.MUL):
    b = GraphBuilder()
    t = b.add_input("t")
    [out] = b.add_operation(op, [Local(t)] * op.input_count(), role)
    b.set_outputs([out])
    return LinearizedGraph(b.build(), [("t", t)], [out])


def test_transposing_a_graph_that_is_not_linear_names_the_op():
    # was: t * t with role Linearized(T.) (the mask calls t a constant) transposed to
    # ct * t, the transpose of a map that is not linear: a wrong result without an error
    with pytest.raises(GraphError, match=r"not linear: MUL with role Linearized\(T\.\) reads "
                                         r"the tangent Input\('t'\) at input 1"):
        linear_transpose(hand_made_linear(TF))
    # was: an AttributeError from inside the rule ('_Primary' has no 'active_mask')
    for op in (Op.MUL, Op.SIN):
        with pytest.raises(GraphError, match=rf"not linear: {op.name} has role PRIMARY"):
            linear_transpose(hand_made_linear(PRIMARY, op))
    # a linear one still transposes: t -> -t gives ct -> -ct
    transposed = linear_transpose(hand_made_linear(LIN, Op.NEG))
    [(seed, _)] = transposed.tangent_inputs
    assert evaluate(transposed.graph, transposed.tangent_output_keys, {Input(seed): 2.0}) == [-2.0]


class Unordered(Primitive, EvaluableGraphOperation, enum.Enum):
    """SPLIT with JVP rules that return their ids in a set or a dict."""

    SET = "set"
    DICT = "dict"

    def input_count(self):
        return 1

    def output_count(self):
        return 2

    def eval(self, ctx, xs):
        return [xs[0], -xs[0]]

    def jvp_rule(self, b, xs, outs, ts, ctx):
        [negated] = b.add_primitive(Op.NEG, [Local(ts[0])], LIN)
        return {ts[0], negated} if self is Unordered.SET else {ts[0]: 0, negated: 1}


@pytest.mark.parametrize("op, kind", [(Unordered.SET, "set"), (Unordered.DICT, "dict")])
def test_a_rule_returning_a_set_or_a_dict_of_ids_is_refused(op, kind):
    # was: list() of it was taken: a set's order is not the slots' (here the ids 0 and 1
    # came back in order by luck), and a dict gave its keys
    graph = one_op_graph(op)
    with pytest.raises(RuleContractError, match=rf"jvp rule of {op.name}: returned a {kind}, "
                                                r"not a sequence"):
        linearize(graph, graph.output_keys, ["x0"])


class Wrong(Primitive, EvaluableGraphOperation, enum.Enum):
    """Right JVPs (emitting Op's ops), wrong transpose rules for their own linear uses."""

    SPLIT_BOTH = "split, both cotangents"     # drops the second cotangent when both come
    SPLIT_ZERO = "split, returns a zero"      # says the input's cotangent is zero
    MUL_SWAPPED = "mul, swapped slots"        # the cotangent of input 0 in slot 1

    @classmethod
    def add(cls):
        return Op.ADD

    def input_count(self):
        return 2 if self is Wrong.MUL_SWAPPED else 1

    def output_count(self):
        return 1 if self is Wrong.MUL_SWAPPED else 2

    def eval(self, ctx, xs):
        return Op.MUL.eval(ctx, xs) if self is Wrong.MUL_SWAPPED else Op.SPLIT.eval(ctx, xs)

    def jvp_rule(self, b, xs, outs, ts, ctx):
        op = Op.MUL if self is Wrong.MUL_SWAPPED else Op.SPLIT
        return op.jvp_rule(b, xs, outs, ts, ctx)

    def transpose_rule(self, b, cts, inputs, role, ctx):
        if self is Wrong.MUL_SWAPPED:
            return list(reversed(Op.MUL.transpose_rule(b, cts, inputs, role, ctx)))
        if self is Wrong.SPLIT_ZERO:
            return [None]
        if None in cts:
            return Op.SPLIT.transpose_rule(b, cts, inputs, role, ctx)
        return [cts[0]]


@pytest.mark.parametrize("op, args", [(Wrong.SPLIT_BOTH, (0.7,)), (Wrong.SPLIT_ZERO, (0.7,)),
                                      (Wrong.MUL_SWAPPED, (0.7, -1.3))])
def test_check_primitive_catches_a_wrong_transpose_rule_its_jvp_never_runs(op, args):
    # was: check_primitive passed: it transposed only the linearizations, made of the ops
    # the JVP emitted (Op's NEG and MUL), so the op's own transpose rule never ran; a rule
    # emitting the op linearly would then have given wrong gradients
    with pytest.raises(CheckFailure, match=rf"transpose rule of {op.name} with role "
                                           r"Linearized\("):
        check_primitive(op, *args, rng=0)
    with pytest.raises(CheckFailure, match=rf"transpose rule of {op.name}"):
        check_primitive(op, *args, rng=0, order=2)
    # the right SPLIT passes, with 3 dot products more than before: its own transpose
    # (output 0, output 1, both), besides the 5 of its linearizations
    assert check_primitive(Op.SPLIT, 0.7, rng=0).dot_products == 5 + 3


class Executor(BackwardExecutor):
    def execute_forward(self, graph, data):
        return dict(zip(graph.output_keys, evaluate(graph, graph.output_keys, data)))

    def add_operands(self, a, b):
        return a + b


def chain(length: int):
    recorder = Recorder()
    x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.7)
    value = x
    for _ in range(length):
        value = recorder.record(RecordedGraph.from_primitive(Op.NEG, ["a"]), [value],
                                [-value.data])
    return x, value


def test_a_trace_is_not_pickled_and_its_copies_are_itself():
    # was: a trace pickled with its recording serials, which order backward's walk: loaded
    # in a new process (serials from 0 again), a node recorded on it came "before" it, and
    # backward skipped it: no gradient, without an error. A deep trace raised RecursionError.
    x, shallow = chain(3)
    with pytest.raises(InvalidArgumentError,
                       match=r"<Trace of <RecordedGraph NEG>> cannot be pickled"):
        pickle.dumps(shallow)
    with pytest.raises(TiduError, match="cannot be pickled"):
        pickle.dumps(EagerInput(shallow.key, shallow, True, shallow.data))
    x, deep = chain(100_000)
    assert copy.deepcopy(deep) is deep and copy.copy(deep) is deep
    assert copy.deepcopy([x, deep])[1] is deep
    assert try_backward(deep.key, copy.deepcopy(deep), 1.0, Executor())[x.key] == 1.0


def test_a_conversion_to_integers_is_not_taken_for_a_linear_use():
    # check_primitive's probe for linear uses took float64 -> int64 on small directions (all
    # truncated to 0, so "linear") and dot-product tested its transpose rule, which passed a
    # cotangent back: a failure of a rule no linear graph ever runs. The probe now refuses
    # integer outputs, and the tensor set's rule says it has no transpose.
    import numpy as np

    from tidu import ADRuleError
    from primitives.tensor.ops import elementwise as ew

    op = ew.ConvertElementType("int64", "float64")
    for seed in range(40):
        x = np.random.default_rng(seed).uniform(-1, 1, ())
        check_primitive(op, x, rng=seed)
    with pytest.raises(ADRuleError, match="float64->int64 is not linear"):
        op.transpose_rule(None, [0], [External(Input("x"))], Linearized((True,)), None)
