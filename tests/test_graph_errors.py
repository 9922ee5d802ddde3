"""Every misuse of tidu.graph raises a TiduError naming the culprit, and leaves the builder usable."""

from __future__ import annotations

import dataclasses
import re

import pytest

import tidu
from tidu import errors
from tidu.graph import (
    PRIMARY,
    Derived,
    EvaluableGraphOperation,
    External,
    GraphBuilder,
    GraphOperation,
    Input,
    Linearized,
    Local,
    OperationKey,
    evaluate,
    resolve,
)

from graph_ops import ScalarOp, Scale


# --- misbehaving ops ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class BadCount(EvaluableGraphOperation):
    """An op whose output_count() is whatever it was given."""

    count: object

    def input_count(self):
        return 1

    def output_count(self):
        return self.count

    def eval(self, ctx, inputs):
        return [inputs[0]]


@dataclasses.dataclass(frozen=True)
class BadInputCount(EvaluableGraphOperation):
    count: object

    def input_count(self):
        return self.count

    def output_count(self):
        return 1


@dataclasses.dataclass(eq=True)          # eq without frozen: __hash__ is None
class MutableOp(EvaluableGraphOperation):
    weight: float

    def input_count(self):
        return 1

    def output_count(self):
        return 1


@dataclasses.dataclass(frozen=True)
class Opaque(GraphOperation):
    """A GraphOperation without eval: fine in a graph, not evaluable."""

    tag: str

    def input_count(self):
        return 1

    def output_count(self):
        return 1


@dataclasses.dataclass(frozen=True)
class WrongArity(EvaluableGraphOperation):
    """Declares two outputs; eval returns ``self.returns``."""

    returns: tuple

    def input_count(self):
        return 1

    def output_count(self):
        return 2

    def eval(self, ctx, inputs):
        return self.returns


@dataclasses.dataclass(frozen=True)
class ReturnsScalar(EvaluableGraphOperation):
    """One output, but eval forgets the list and returns the bare value."""

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, inputs):
        return inputs[0] + 1.0


class NotAnOp:
    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def __repr__(self):
        return "NotAnOp()"


# --- builder misuse ------------------------------------------------------------------


def fresh_builder():
    """x (id 0) and s = sin(x) (id 1)."""
    b = GraphBuilder()
    x = b.add_input("x")
    b.add_operation(ScalarOp.SIN, [Local(x)])
    return b


# (id, misuse, expected error class, regexes the message must match)
BUILDER_MISUSES = [
    ("too-many-inputs", lambda b: b.add_operation(ScalarOp.NEG, [Local(0), Local(1)]),
     errors.ArityError, [r"NEG", r"\b1\b", r"\b2\b"]),
    ("too-few-inputs", lambda b: b.add_operation(ScalarOp.ADD, [Local(0)]),
     errors.ArityError, [r"ADD", r"\b2\b", r"\b1\b"]),
    ("no-inputs", lambda b: b.add_operation(ScalarOp.SINCOS, []),
     errors.ArityError, [r"SINCOS", r"\b1\b", r"\b0\b"]),
    ("unknown-local", lambda b: b.add_operation(ScalarOp.NEG, [Local(7)]),
     errors.UnknownValueError, [r"NEG", r"Local\(7\)"]),
    ("unknown-local-just-past-end", lambda b: b.add_operation(ScalarOp.MUL, [Local(0), Local(2)]),
     errors.UnknownValueError, [r"MUL", r"Local\(2\)"]),
    ("negative-local", lambda b: b.add_operation(ScalarOp.NEG, [Local(-1)]),
     errors.UnknownValueError, [r"NEG", r"Local\(-1\)"]),
    ("raw-int-input", lambda b: b.add_operation(ScalarOp.NEG, [0]),
     errors.InvalidReferenceError, [r"NEG", r"\b0\b", r"Local or External"]),
    ("string-input", lambda b: b.add_operation(ScalarOp.ADD, [Local(0), "s"]),
     errors.InvalidReferenceError, [r"ADD", r"'s'", r"input 1"]),
    ("key-as-input", lambda b: b.add_operation(ScalarOp.NEG, [Input("x")]),
     errors.InvalidReferenceError, [r"NEG", r"Input\('x'\)"]),
    ("external-of-non-key", lambda b: b.add_operation(ScalarOp.NEG, [External("x")]),
     errors.InvalidKeyError, [r"NEG", r"'x'"]),
    ("not-a-graph-operation", lambda b: b.add_operation(NotAnOp(), [Local(0)]),
     errors.InvalidOperationError, [r"NotAnOp\(\)", r"GraphOperation"]),
    ("string-op", lambda b: b.add_operation("sin", [Local(0)]),
     errors.InvalidOperationError, [r"'sin'"]),
    ("unhashable-op", lambda b: b.add_operation(MutableOp(2.0), [Local(0)]),
     errors.InvalidOperationError, [r"MutableOp\(weight=2\.0\)", r"hashable"]),
    ("unhashable-non-op", lambda b: b.add_operation([ScalarOp.NEG], [Local(0)]),
     errors.InvalidOperationError, [r"NEG", r"hashable"]),
    ("output-count-0", lambda b: b.add_operation(BadCount(0), [Local(0)]),
     errors.InvalidOperationError, [r"BadCount\(count=0\)", r"output_count", r"positive"]),
    ("output-count-negative", lambda b: b.add_operation(BadCount(-1), [Local(0)]),
     errors.InvalidOperationError, [r"BadCount\(count=-1\)", r"returned -1"]),
    ("output-count-float", lambda b: b.add_operation(BadCount(1.5), [Local(0)]),
     errors.InvalidOperationError, [r"BadCount\(count=1\.5\)", r"returned 1\.5"]),
    ("output-count-bool", lambda b: b.add_operation(BadCount(True), [Local(0)]),
     errors.InvalidOperationError, [r"BadCount\(count=True\)", r"returned True"]),
    ("input-count-negative", lambda b: b.add_operation(BadInputCount(-1), []),
     errors.InvalidOperationError, [r"BadInputCount", r"input_count", r"-1"]),
    ("input-count-str", lambda b: b.add_operation(BadInputCount("1"), [Local(0)]),
     errors.InvalidOperationError, [r"BadInputCount", r"input_count"]),
    ("bad-role", lambda b: b.add_operation(ScalarOp.NEG, [Local(0)], role="linear"),
     errors.InvalidKeyError, [r"NEG", r"'linear'"]),
    ("role-mask-length", lambda b: b.add_operation(ScalarOp.NEG, [Local(0)],
                                                   role=Linearized((True, False))),
     errors.ArityError, [r"NEG", r"Linearized\(T\.\)"]),
    ("set-outputs-unknown", lambda b: b.set_outputs([0, 99]),
     errors.UnknownValueError, [r"\b99\b"]),
    ("set-outputs-negative", lambda b: b.set_outputs([-1]),
     errors.UnknownValueError, [r"-1\b"]),
    ("set-outputs-non-int", lambda b: b.set_outputs(["a"]),
     errors.UnknownValueError, [r"'a'"]),
    ("global-key-unknown", lambda b: b.global_key(2),
     errors.UnknownValueError, [r"\b2\b"]),
    ("unhashable-input-key", lambda b: b.add_input(["x"]),
     errors.InvalidKeyError, [r"\['x'\]", r"hashable"]),
    ("add-parent-non-graph", lambda b: b.add_parent("g"),
     errors.InvalidArgumentError, [r"str"]),
]


@pytest.mark.parametrize("misuse,error,patterns",
                         [m[1:] for m in BUILDER_MISUSES], ids=[m[0] for m in BUILDER_MISUSES])
def test_builder_misuse_raises_named_error_and_builder_stays_usable(misuse, error, patterns):
    b = fresh_builder()
    b.set_outputs([1])
    before = b.build()

    with pytest.raises(error) as info:
        misuse(b)
    assert isinstance(info.value, tidu.TiduError)
    message = str(info.value)
    for pattern in patterns:
        assert re.search(pattern, message), f"{message!r} does not match {pattern!r}"

    # No partial state: the failed call added nothing and changed no outputs.
    assert len(b) == 2
    after_error = b.build()
    assert after_error.value_keys == before.value_keys
    assert after_error.operation_keys == before.operation_keys
    assert after_error.outputs == (1,)
    assert after_error.inputs == (0,) and after_error.parents == ()

    # Still usable: new ids continue where they were, and it builds.
    [c] = b.add_operation(ScalarOp.COS, [Local(0)])
    assert c == 2
    b.set_outputs([c])
    g = b.build()
    assert len(g.operations) == 2 and g.outputs == (2,)
    assert g.operations[1].inputs == (Local(0),)


def test_a_fixed_op_is_accepted_after_a_failure():
    """An op rejected once is not cached as bad or good: equal valid ops still work."""
    b = fresh_builder()
    with pytest.raises(errors.ArityError):
        b.add_operation(Scale(2.0), [Local(0), Local(1)])
    assert b.add_operation(Scale(2.0), [Local(1)]) == [2]
    with pytest.raises(errors.ArityError):
        b.add_operation(Scale(2.0), [])
    assert b.add_operation(Scale(2.0), [Local(1)]) == [2]


def test_error_classes_also_derive_from_the_expected_builtins():
    assert issubclass(errors.ArityError, ValueError)
    assert issubclass(errors.UnknownValueError, ValueError)
    assert issubclass(errors.InvalidOperationError, TypeError)
    assert issubclass(errors.InvalidReferenceError, TypeError)
    assert issubclass(errors.MissingValueError, ValueError)
    assert issubclass(errors.NotEvaluableError, TypeError)
    for name in ("GraphError", "InvalidOperationError", "ArityError", "UnknownValueError",
                 "InvalidReferenceError", "InvalidKeyError", "EvaluationError",
                 "MissingValueError", "NotEvaluableError", "EvalOutputError"):
        assert issubclass(getattr(errors, name), tidu.TiduError)


# --- key misuse -----------------------------------------------------------------------


def test_key_constructor_misuse():
    with pytest.raises(errors.InvalidKeyError, match=r"\[1\]"):
        Input([1])
    with pytest.raises(errors.InvalidKeyError, match=r"input 0 of NEG is 'x'"):
        OperationKey(ScalarOp.NEG, ("x",), PRIMARY)
    with pytest.raises(errors.InvalidKeyError, match=r"role of NEG"):
        OperationKey(ScalarOp.NEG, (Input("x"),), "primal")
    with pytest.raises(errors.InvalidOperationError, match=r"MutableOp"):
        OperationKey(MutableOp(1.0), (Input("x"),), PRIMARY)
    with pytest.raises(errors.InvalidOperationError, match=r"BadCount\(count=0\)"):
        OperationKey(BadCount(0), (Input("x"),), PRIMARY)
    op_key = OperationKey(ScalarOp.SINCOS, (Input("x"),), PRIMARY)
    with pytest.raises(errors.UnknownValueError, match=r"SINCOS#\d+ has 2 outputs; no slot 2"):
        Derived(op_key, 2)
    with pytest.raises(errors.UnknownValueError, match=r"no slot -1"):
        Derived(op_key, -1)
    with pytest.raises(errors.InvalidKeyError, match=r"OperationKey"):
        Derived(Input("x"), 0)
    with pytest.raises(errors.InvalidKeyError, match=r"\(1, 2\)"):
        Linearized((1, 2))


# --- evaluate misuse ------------------------------------------------------------------


def test_missing_input_value_names_the_key():
    b = GraphBuilder()
    x, c = b.add_input("x"), b.add_input("the-c")
    [y] = b.add_operation(ScalarOp.ADD, [Local(x), Local(c)])
    g = b.build()
    with pytest.raises(errors.MissingValueError, match=r"Input\('the-c'\)") as info:
        evaluate(g, [g.values[y].key], {Input("x"): 1.0})
    assert isinstance(info.value, tidu.TiduError)
    with pytest.raises(errors.MissingValueError, match=r"Input\('x'\)"):
        evaluate(g, [Input("x")], {})


def test_evaluate_output_that_is_not_a_value_of_the_graphs():
    b = GraphBuilder()
    b.add_input("x")
    g = b.build()
    with pytest.raises(errors.UnknownValueError, match=r"Input\('elsewhere'\)"):
        evaluate(g, [Input("elsewhere")], {Input("x"): 1})
    with pytest.raises(errors.UnknownValueError, match=r"'x'"):
        evaluate(g, ["x"], {Input("x"): 1})


def test_not_evaluable_op_is_named():
    b = GraphBuilder()
    x = b.add_input("x")
    [o] = b.add_operation(Opaque("mystery"), [Local(x)])   # building is fine
    [n] = b.add_operation(ScalarOp.NEG, [Local(o)])
    g = b.build()
    with pytest.raises(errors.NotEvaluableError, match=r"Opaque\(tag='mystery'\)") as info:
        evaluate(g, [g.values[n].key], {Input("x"): 1.0})
    assert isinstance(info.value, tidu.TiduError)
    # not needed -> not a problem
    assert evaluate(g, [Input("x")], {Input("x"): 1.0}) == [1.0]


@pytest.mark.parametrize("returns", [(1.0,), (1.0, 2.0, 3.0), ()], ids=["1", "3", "0"])
def test_eval_returning_the_wrong_number_of_outputs(returns):
    b = GraphBuilder()
    x = b.add_input("x")
    first, _ = b.add_operation(WrongArity(returns), [Local(x)])
    g = b.build()
    with pytest.raises(errors.EvalOutputError) as info:
        evaluate(g, [g.values[first].key], {Input("x"): 1.0})
    message = str(info.value)
    assert "WrongArity" in message
    assert re.search(rf"\b{len(returns)}\b", message) and re.search(r"\b2\b", message)


def test_eval_returning_a_bare_value_instead_of_a_sequence():
    b = GraphBuilder()
    x = b.add_input("x")
    [y] = b.add_operation(ReturnsScalar(), [Local(x)])
    g = b.build()
    with pytest.raises(errors.EvalOutputError, match=r"ReturnsScalar"):
        evaluate(g, [g.values[y].key], {Input("x"): 1.0})


def test_resolve_misuse():
    with pytest.raises(errors.InvalidArgumentError, match=r"str"):
        resolve(["not a graph"])
    with pytest.raises(errors.InvalidArgumentError, match=r"int"):
        evaluate([1], [], {})


def test_op_without_counts_is_an_invalid_operation():
    from tidu.errors import InvalidOperationError
    from tidu.graph import GraphOperation

    class Bare(GraphOperation):
        pass

    with pytest.raises(InvalidOperationError, match="Bare.*input_count"):
        GraphBuilder().add_operation(Bare(), [])


def test_supplied_value_wins_over_a_sibling_output():
    # slot 0 of SINCOS is supplied; slot 1 is needed, so SINCOS runs, but must not
    # overwrite the supplied slot-0 value that later ops read.
    builder = GraphBuilder()
    x = builder.add_input("x")
    s, c = builder.add_operation(ScalarOp.SINCOS, [Local(x)])
    [total] = builder.add_operation(ScalarOp.ADD, [Local(s), Local(c)])
    graph = builder.build()
    keys = graph.value_keys
    [value] = evaluate(graph, [keys[total]], {Input("x"): 0.0, keys[s]: 100.0})
    assert value == 101.0     # sin(0) would give 1.0
