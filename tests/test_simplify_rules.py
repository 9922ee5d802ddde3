"""The shipped sets' ``simplify`` rules and ``constant`` hooks, through ``tidu.optimize``.

Each rule is shown to fire (the operations left are exactly the expected ones)
and to keep values: the optimized program gives what ``evaluate`` gives on the
original graph, as NumPy compares values (NaN matching NaN, ``-0.0 == 0.0``,
same dtype and shape), for random inputs and inf, NaN and signed zeros. Rules
that must not fire are shown not to. Whole primal / linear / transposed triples
of both sets are optimized, checked for values and size, and the optimized
linear programs are transposed again to show the rules kept roles valid and the
linear map: that transpose is a different program (the transpose of a value read
twice is a sum, and CSE, the rules and the optimizer's own order change which
sums it makes, in which order), so the scalar ones are compared in exact rational
arithmetic (:class:`Exact`), where the order of sums does not matter.
The module docstrings of ``primitives/scalar/ops.py`` and
``primitives/tensor/ops/simplify.py`` state the value policy these tests check,
including its two documented IEEE exceptions (tested below as documented).
"""

from __future__ import annotations

import cmath
import math
import operator
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primitives import tensor as tnp
from primitives.scalar import Const, Pow, Scale, ScalarOp, trace_scalar
from primitives.tensor.transforms.functional import make_graph
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.constants import MAX_LITERAL_ELEMENTS, Full, Literal, constant_op
from primitives.tensor.ops.dot import DotGeneral
from primitives.tensor.ops.elementwise import Real
from primitives.tensor.ops.select import Compare, Select
from primitives.tensor.ops.shape import BroadcastInDim, ReduceSum, Reshape, Transpose
from tidu import LinearizedGraph, linear_transpose, linearize, optimize
from tidu.graph import PRIMARY, Derived, GraphBuilder, Input, Linearized, Local, evaluate

SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
LIN = Linearized((True,))
EDGE_FLOATS = [0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, math.nan, 1e308, 5e-324]
any_float = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(EDGE_FLOATS)


# --- helpers ------------------------------------------------------------------------------


def same(expected, got) -> bool:
    """Equal as NumPy compares values (NaN matching NaN), with the same dtype and shape."""
    if isinstance(expected, (int, float, complex)):
        if not isinstance(got, (int, float, complex)):
            return False
        expected, got = np.asarray(expected, complex), np.asarray(got, complex)
    else:
        expected, got = np.asarray(expected), np.asarray(got)
        if expected.dtype != got.dtype or expected.shape != got.shape:
            return False
    if expected.dtype.kind == "c":
        return same(expected.real, got.real) and same(expected.imag, got.imag)
    return bool(np.array_equal(expected, got, equal_nan=expected.dtype.kind in "fc"))


def build(make, *input_names):
    """A graph of the ops ``make(b, *input ids)`` adds; its outputs are what ``make`` returns."""
    b = GraphBuilder()
    ids = [b.add_input(name) for name in input_names]
    b.set_outputs(make(b, *ids))
    return b.build()


def op(b, operation, *ids, role=PRIMARY):
    """Add ``operation`` on ``ids``; return its one output id."""
    return b.add_operation(operation, [Local(i) for i in ids], role)[0]


def operations(program) -> Counter:
    return Counter(node.operation for node in program.operations)


def check_values(graph, program, values):
    """The optimized ``program`` gives what ``graph`` gives on ``values`` (a name -> value map)."""
    values = {Input(name): value for name, value in values.items()}
    expected = evaluate(graph, graph.output_keys, values)
    got = evaluate(program, program.output_keys, values)
    for e, g in zip(expected, got):
        assert same(e, g), (e, g)


def needed_operations(outputs) -> int:
    """How many operations ``outputs`` depend on, found by following their keys."""
    seen, stack = set(), [k.operation for k in outputs if type(k) is Derived]
    while stack:
        op_key = stack.pop()
        if op_key not in seen:
            seen.add(op_key)
            stack.extend(k.operation for k in op_key.inputs if type(k) is Derived)
    return len(seen)


# --- the scalar set -------------------------------------------------------------------------

SCALAR_FIRES = {
    "x + 0": (lambda b, x: [op(b, ScalarOp.ADD, x, op(b, Const(0.0)))], []),
    "0 + x": (lambda b, x: [op(b, ScalarOp.ADD, op(b, Const(0.0)), x)], []),
    "x + -0.0": (lambda b, x: [op(b, ScalarOp.ADD, x, op(b, Const(-0.0)))], []),
    "x - 0": (lambda b, x: [op(b, ScalarOp.SUB, x, op(b, Const(0.0)))], []),
    "x * 1": (lambda b, x: [op(b, ScalarOp.MUL, x, op(b, Const(1.0)))], []),
    "1 * x": (lambda b, x: [op(b, ScalarOp.MUL, op(b, Const(1)), x)], []),
    "x / 1": (lambda b, x: [op(b, ScalarOp.DIV, x, op(b, Const(1.0)))], []),
    "x div_or_zero 1": (lambda b, x: [op(b, ScalarOp.DIV_OR_ZERO, x, op(b, Const(1.0)))], []),
    "x * conj(1)": (lambda b, x: [op(b, ScalarOp.MUL_CONJ, x, op(b, Const(1.0)))], []),
    "neg(neg x)": (lambda b, x: [op(b, ScalarOp.NEG, op(b, ScalarOp.NEG, x))], []),
    "conj(conj x)": (lambda b, x: [op(b, ScalarOp.CONJ, op(b, ScalarOp.CONJ, x))], []),
    "Scale(1)": (lambda b, x: [op(b, Scale(1.0), x)], []),
    "Pow(1)": (lambda b, x: [op(b, Pow(1), x)], []),
    "a chain": (lambda b, x: [op(b, ScalarOp.NEG, op(b, ScalarOp.NEG, op(b, ScalarOp.MUL, op(
        b, ScalarOp.ADD, x, op(b, Const(0.0))), op(b, Const(1.0)))))], []),
    "folding": (lambda b, x: [op(b, ScalarOp.MUL, op(b, ScalarOp.SIN, op(b, Const(0.5))), x)],
                [Const(math.sin(0.5)), ScalarOp.MUL]),
}


@pytest.mark.parametrize("name", SCALAR_FIRES)
def test_scalar_rule_fires_and_keeps_values(name):
    make, left = SCALAR_FIRES[name]
    graph = build(make, "x")
    program = optimize(graph, graph.output_keys)
    assert operations(program) == Counter(left)
    if not left:
        assert program.output_keys == (Input("x"),)
    for x in EDGE_FLOATS + [3, -7]:
        check_values(graph, program, {"x": x})


@SETTINGS
@given(st.sampled_from(sorted(SCALAR_FIRES)), any_float)
def test_scalar_rules_keep_random_values(name, x):
    graph = build(SCALAR_FIRES[name][0], "x")
    check_values(graph, optimize(graph, graph.output_keys), {"x": x})


SCALAR_STAYS = {
    "x * 0": lambda b, x: [op(b, ScalarOp.MUL, x, op(b, Const(0.0)))],       # inf * 0 is NaN
    "0 * x": lambda b, x: [op(b, ScalarOp.MUL, op(b, Const(0)), x)],
    "x * (1 + ulp)": lambda b, x: [op(b, ScalarOp.MUL, x, op(b, Const(1.0000000000000002)))],
    "x + tiny": lambda b, x: [op(b, ScalarOp.ADD, x, op(b, Const(5e-324)))],
    "0 - x": lambda b, x: [op(b, ScalarOp.SUB, op(b, Const(0.0)), x)],
    "1 / x": lambda b, x: [op(b, ScalarOp.DIV, op(b, Const(1.0)), x)],
    "Scale(2) Scale(3)": lambda b, x: [op(b, Scale(2.0), op(b, Scale(3.0), x))],   # rounds twice
    "Scale(1e300) Scale(1e-300)": lambda b, x: [op(b, Scale(1e300), op(b, Scale(1e-300), x))],
    "Scale(1j)": lambda b, x: [op(b, Scale(1j), x)],
    # a real factor times a complex x is a full complex product, whose zeros have their own
    # signs: -(2.5 * (1+0j)) is -2.5-0j, (-2.5) * (1+0j) is -2.5+0j (then log differs by 2 pi i)
    "Scale(-1) Scale(3)": lambda b, x: [op(b, Scale(-1), op(b, Scale(3.0), x))],
    "Scale(2) Scale(-1)": lambda b, x: [op(b, Scale(2.0), op(b, Scale(-1.0), x))],
    "Scale(-1) Scale(-1)": lambda b, x: [op(b, Scale(-1), op(b, Scale(-1), x))],
    "neg(Scale(2.5))": lambda b, x: [op(b, ScalarOp.NEG, op(b, Scale(2.5), x))],
    "Scale(2.5)(neg)": lambda b, x: [op(b, Scale(2.5), op(b, ScalarOp.NEG, x))],
    "Pow(2)": lambda b, x: [op(b, Pow(2), x)],
    "neg(conj x)": lambda b, x: [op(b, ScalarOp.NEG, op(b, ScalarOp.CONJ, x))],
    "neg of linear neg": lambda b, x: [op(b, ScalarOp.NEG, op(b, ScalarOp.NEG, x, role=LIN))],
    "linear x * 1, the 1 active": lambda b, x: [op(b, ScalarOp.MUL, x, op(b, Const(1.0)),
                                                   role=Linearized((False, True)))],
}


@pytest.mark.parametrize("name", SCALAR_STAYS)
def test_scalar_rule_does_not_fire_where_it_must_not(name):
    graph = build(SCALAR_STAYS[name], "x")
    program = optimize(graph, graph.output_keys)
    assert len(program.operations) == needed_operations(graph.output_keys)
    for x in EDGE_FLOATS:
        check_values(graph, program, {"x": x})


def test_scalar_x_times_zero_keeps_nan():
    graph = build(SCALAR_STAYS["x * 0"], "x")
    program = optimize(graph, graph.output_keys)
    assert math.isnan(evaluate(program, program.output_keys, {Input("x"): math.inf})[0])


def test_scalar_constant_hook():
    assert ScalarOp.SIN.constant(0.5) == Const(0.5)
    assert Scale.constant(2j) == Const(2j) and Pow.constant(-0.0) == Const(-0.0)
    assert Const.constant(np.float64(1.0)) is None        # only Python numbers
    assert ScalarOp.ADD.constant("text") is None


def test_scalar_linear_rule_forwards_only_the_tangent():
    b = GraphBuilder()
    x, t = b.add_input("x"), b.add_input("t")
    [one] = b.add_operation(Const(1.0), [])
    [scaled] = b.add_operation(ScalarOp.MUL, [Local(t), Local(one)], Linearized((True, False)))
    [summed] = b.add_operation(ScalarOp.ADD, [Local(scaled), Local(x)], Linearized((True, False)))
    b.set_outputs([summed])
    graph = b.build()
    program = optimize(graph, graph.output_keys)
    assert [node.operation for node in program.operations] == [ScalarOp.ADD]
    assert program.operations[0].role == Linearized((True, False))
    check_values(graph, program, {"x": 2.0, "t": -0.5})


# the two documented IEEE exceptions, pinned so the docs and the code agree


def test_documented_exception_signed_zero_of_x_plus_zero():
    graph = build(SCALAR_FIRES["x + 0"][0], "x")
    program = optimize(graph, graph.output_keys)
    [before] = evaluate(graph, graph.output_keys, {Input("x"): -0.0})
    [after] = evaluate(program, program.output_keys, {Input("x"): -0.0})
    assert math.copysign(1, before) == 1 and math.copysign(1, after) == -1 and before == after


def test_documented_exception_complex_infinity_times_one():
    graph = build(lambda b, x: [op(b, ScalarOp.MUL, x, op(b, Const(1 + 0j)))], "x")
    program = optimize(graph, graph.output_keys)
    assert len(program.operations) == 0
    check_values(graph, program, {"x": complex(1.5, -2.0)})   # exact for finite parts
    [before] = evaluate(graph, graph.output_keys, {Input("x"): complex(math.inf, 0.0)})
    [after] = evaluate(program, program.output_keys, {Input("x"): complex(math.inf, 0.0)})
    assert math.isnan(before.imag) and after == complex(math.inf, 0.0)


# complex inputs, signed zeros, infinities and NaNs in either part: every rule keeps the value
# bit for bit, except the two documented families (tested as documented)

COMPLEX_PARTS = [0.0, -0.0, 0.5, -2.25, math.inf, -math.inf, math.nan]
COMPLEX_EDGES = [complex(re, im) for re in COMPLEX_PARTS for im in COMPLEX_PARTS]
any_complex = (st.complex_numbers(allow_nan=True, allow_infinity=True)
               | st.sampled_from(COMPLEX_EDGES))
ADDS_ZERO = {"x + 0", "0 + x", "x + -0.0", "a chain"}    # -0.0 + 0 is +0.0, in either part
TIMES_ONE = {"x * 1", "1 * x", "x / 1", "x div_or_zero 1", "x * conj(1)", "Scale(1)", "Pow(1)",
             "a chain"}                                  # Python's full complex product by 1


def identical(expected, got) -> bool:
    """The same number: same type, same sign of every zero, NaN where NaN (any payload)."""
    if type(expected) is not type(got):
        return False
    if isinstance(expected, complex):
        return identical(expected.real, got.real) and identical(expected.imag, got.imag)
    if expected != expected:
        return got != got
    return expected == got and math.copysign(1, expected) == math.copysign(1, got)


def scalar_graph(name):
    make = SCALAR_FIRES[name][0] if name in SCALAR_FIRES else SCALAR_STAYS[name]
    graph = build(make, "x")
    return graph, optimize(graph, graph.output_keys)


def values_of(graph, program, x):
    return (evaluate(graph, graph.output_keys, {Input("x"): x}),
            evaluate(program, program.output_keys, {Input("x"): x}))


@pytest.mark.parametrize("name", list(SCALAR_FIRES) + list(SCALAR_STAYS))
def test_scalar_rules_keep_complex_edge_values(name):
    graph, program = scalar_graph(name)
    for z in COMPLEX_EDGES:
        expected, got = values_of(graph, program, z)
        for e, g in zip(expected, got):
            if name in TIMES_ONE:
                assert not cmath.isfinite(z) or same(e, g), (z, e, g)
            elif name in ADDS_ZERO:
                assert same(e, g), (z, e, g)
            else:
                assert identical(e, g), (z, e, g)


@SETTINGS
@given(st.sampled_from(sorted(set(SCALAR_FIRES) - TIMES_ONE - ADDS_ZERO)), any_complex)
def test_scalar_rules_keep_random_complex_values_bit_for_bit(name, z):
    expected, got = values_of(*scalar_graph(name), z)
    assert all(identical(e, g) for e, g in zip(expected, got)), (z, expected, got)


BRANCH_CUT = {
    "log(neg(Scale(2)))": lambda b, x: op(b, ScalarOp.LOG, op(b, ScalarOp.NEG, op(b, Scale(2.0),
                                                                                  x))),
    "sqrt(Scale(2)(neg))": lambda b, x: op(b, ScalarOp.SQRT, op(b, Scale(2.0), op(
        b, ScalarOp.NEG, x))),
    "log(Scale(-1)(Scale(-1)))": lambda b, x: op(b, ScalarOp.LOG, op(b, Scale(-1), op(
        b, Scale(-1.0), x))),
    "log(Scale(-1)(Scale(0.5)))": lambda b, x: op(b, ScalarOp.LOG, op(b, Scale(-1), op(
        b, Scale(0.5), x))),
}


@pytest.mark.parametrize("name", BRANCH_CUT)
def test_negated_scales_keep_complex_values_off_the_branch_cut(name):
    graph = build(lambda b, x: [BRANCH_CUT[name](b, x)], "x")
    program = optimize(graph, graph.output_keys)
    for z in (0.5 + 0j, -0.5 + 0j, complex(0.5, -0.0), complex(-0.5, -0.0)):
        [expected], [got] = values_of(graph, program, z)
        assert identical(expected, got), (z, expected, got)


def test_documented_exception_complex_times_one_signs_and_nans():
    cases = [("Scale(1)", complex(0.5, -0.0), complex(0.5, 0.0)),       # 0.5*0 + -0.0*1 = +0.0
             ("x * 1", complex(0.5, -0.0), complex(0.5, 0.0)),
             ("x / 1", complex(-0.5, -0.0), complex(-0.5, 0.0)),
             ("Pow(1)", complex(math.nan, 1.0), complex(math.nan, math.nan)),
             ("Pow(1)", complex(0.5, -0.0), complex(0.5, 0.0)),
             ("Scale(1)", complex(math.inf, 0.0), complex(math.inf, math.nan))]
    for name, z, unoptimized in cases:
        graph, program = scalar_graph(name)
        assert program.output_keys == (Input("x"),)            # the rule fired: x is kept
        [before], [after] = values_of(graph, program, z)
        assert identical(before, unoptimized) and identical(after, z), (name, z, before)


# --- scalar-set triples with constants: values, size, and transposable results -------------


@st.composite
def scalar_programs(draw):
    """Random scalar graphs rich in the patterns the rules rewrite."""
    keys = ["x0", "x1"]
    b = GraphBuilder()
    ids = [b.add_input(k) for k in keys]

    def pick():
        return Local(ids[-1] if draw(st.booleans()) else draw(st.sampled_from(ids)))

    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["const", "binary", "unary", "scale", "pow", "double"]))
        if kind == "const":
            [c] = b.add_operation(Const(draw(st.sampled_from([0.0, -0.0, 1.0, 1, 2.5]))), [])
            op_ = draw(st.sampled_from([ScalarOp.ADD, ScalarOp.SUB, ScalarOp.MUL, ScalarOp.DIV]))
            pair = [pick(), Local(c)] if draw(st.booleans()) else [Local(c), pick()]
            ids += b.add_operation(op_, pair)
        elif kind == "binary":
            op_ = draw(st.sampled_from([ScalarOp.ADD, ScalarOp.SUB, ScalarOp.MUL]))
            ids += b.add_operation(op_, [pick(), pick()])
        elif kind == "unary":
            op_ = draw(st.sampled_from([ScalarOp.SIN, ScalarOp.TANH, ScalarOp.NEG, ScalarOp.CONJ]))
            ids += b.add_operation(op_, [pick()])
        elif kind == "scale":
            ids += b.add_operation(Scale(draw(st.sampled_from([1.0, -1, -1.0, 2.5]))), [pick()])
        elif kind == "pow":
            ids += b.add_operation(Pow(draw(st.sampled_from([1, 2]))), [pick()])
        else:                                              # neg(neg), scale(neg), neg(scale)
            first = draw(st.sampled_from([ScalarOp.NEG, Scale(-1.0), Scale(3.0)]))
            [inner] = b.add_operation(first, [pick()])
            ids += b.add_operation(draw(st.sampled_from([ScalarOp.NEG, Scale(-1)])),
                                   [Local(inner)])
    b.set_outputs([ids[-1]])
    primal = b.build()
    wrt = draw(st.lists(st.sampled_from(keys), min_size=1, unique=True))
    values = {Input(k): draw(any_float) for k in keys}
    return primal, wrt, values


def transposed_again(program, linear):
    """The transpose of an optimized linear ``program`` computing ``linear``'s tangent outputs.

    Returns it and the tangent input keys it is transposed for (those the program reads).
    """
    present = [key for key in linear.tangent_input_keys if key in program.input_keys]
    tangent_inputs = [(key.key, program.local_id(key)) for key in present]
    linear_program = LinearizedGraph(program, tangent_inputs, list(program.outputs))
    return linear_transpose(linear_program), present


@SETTINGS
@given(scalar_programs())
def test_random_scalar_triples_optimize_exactly(case):
    primal, wrt, values = case
    lin = linearize(primal, primal.output_keys, wrt)
    tr = linear_transpose(lin)
    graphs = [primal, lin.graph, tr.graph]
    values = dict(values)
    values.update({key: 0.75 for key in tr.tangent_input_keys})
    values.update({key: -1.25 + i for i, key in enumerate(lin.tangent_input_keys)})
    outputs = [k for k in tr.tangent_output_keys + lin.tangent_output_keys if k is not None]
    outputs += list(primal.output_keys)
    program = optimize(graphs, outputs)
    assert len(program.operations) <= needed_operations(outputs)
    expected = evaluate(graphs, outputs, values)
    got = evaluate(program, program.output_keys, values)
    assert all(same(e, g) for e, g in zip(expected, got)), (expected, got)


def cotangents_of(graphs, transposed, keys, values) -> dict:
    """``{tangent input key: cotangent}`` of a transposed graph, ``None`` for zeros."""
    found = [k for k in transposed.tangent_output_keys if k is not None]
    computed = iter(evaluate(graphs, found, values))
    return {key: None if out is None else next(computed)
            for key, out in zip(keys, transposed.tangent_output_keys)}


def _exact_or_none(x):
    """``x`` as an :class:`Exact`, or ``None`` for what a fraction cannot hold (inf, NaN)."""
    if type(x) is Exact:
        return x
    if type(x) in (int, float, Fraction) and math.isfinite(x):
        return Exact(x)
    return None


def _as_float(x) -> float:
    try:
        return float(x)
    except OverflowError:                    # an exact value beyond the floats
        return math.inf if x > 0 else -math.inf


def _exact_operator(fraction_op, float_op):
    def forward(a, b):
        other = _exact_or_none(b)
        return float_op(_as_float(a), b) if other is None else Exact(fraction_op(a, other))

    def reverse(b, a):
        other = _exact_or_none(a)
        return float_op(a, _as_float(b)) if other is None else Exact(fraction_op(other, b))
    return forward, reverse


class Exact(Fraction):
    """A real number that stays a fraction through the scalar ops' linear work.

    Seeding a transposed scalar program's cotangents with ``Exact`` values makes
    its sums and products exact: a float coefficient (a primal value) is taken
    at its exact value, so the result is the linear map applied without
    rounding, whatever order the sums are made in. An inf or NaN coefficient
    turns the value into an IEEE float from there on.
    """

    __slots__ = ()
    __add__, __radd__ = _exact_operator(Fraction.__add__, operator.add)
    __sub__, __rsub__ = _exact_operator(Fraction.__sub__, operator.sub)
    __mul__, __rmul__ = _exact_operator(Fraction.__mul__, operator.mul)
    __truediv__, __rtruediv__ = _exact_operator(Fraction.__truediv__, operator.truediv)

    def __neg__(self):
        return Exact(Fraction.__neg__(self))

    def __pos__(self):
        return self

    def conjugate(self):
        return self

    def __repr__(self) -> str:
        return f"Exact({_as_float(self)!r})"


def check_transposes_again(case) -> dict:
    """The optimized linear program of ``case`` keeps its values to the bit and, transposed
    again, has the reference transpose's zeros and, in exact arithmetic, its values.

    Its floating-point cotangents are not compared: the transpose of a value read
    by several operations sums their cotangents in reverse program order, and the
    optimized program reads values from other places (CSE; ``neg(neg x) -> x``;
    ``neg(scale[c] x) -> scale[-c] x`` beside a live ``scale[c] x``) and in
    another order (operations are listed as the outputs need them), so it rounds
    other sums: ``(a + b) + c`` for ``(a + c) + b``, ``3a - 3b`` for
    ``3(a - b)``. ``optimize`` keeps the values of the program it is given, not
    the rounding of a transpose made from it. Returns the cotangents compared.
    """
    primal, wrt, values = case
    lin = linearize(primal, primal.output_keys, wrt)
    if lin.tangent_outputs[0] is None:
        return {}                                         # the output does not depend on wrt
    program = optimize([primal, lin.graph], lin.tangent_output_keys)
    forward = dict(values)
    forward.update({key: -1.25 + i for i, key in enumerate(lin.tangent_input_keys)})
    expected = evaluate([primal, lin.graph], lin.tangent_output_keys, forward)
    got = evaluate(program, program.output_keys, forward)
    assert all(same(e, g) for e, g in zip(expected, got)), (expected, got)
    again, present = transposed_again(program, lin)
    reference = linear_transpose(lin)
    values = dict(values)
    values.update({key: Exact(0.75)
                   for key in reference.tangent_input_keys + again.tangent_input_keys})
    expected = cotangents_of([primal, lin.graph, reference.graph], reference,
                             lin.tangent_input_keys, values)
    got = cotangents_of([program, again.graph], again, present, values)
    for key, value in expected.items():
        if value is None:                    # a zero: the optimized program has none either
            assert got.get(key) is None
        elif type(value) is Exact:
            assert value == got[key], (key, value, got[key])
        else:                                # an inf or NaN coefficient: IEEE's value
            assert same(_as_float(value), _as_float(got[key])), (key, value, got[key])
    return got


@SETTINGS
@given(scalar_programs())
def test_optimized_scalar_linear_programs_still_transpose(case):
    check_transposes_again(case)


def _fan_out(b, x0, x1):                       # c = neg(scale[3] x0) is read twice
    c = op(b, ScalarOp.NEG, op(b, Scale(3.0), x0))
    e = op(b, ScalarOp.SIN, c)
    g = op(b, ScalarOp.SIN, op(b, ScalarOp.NEG, c))
    for _ in range(3):
        g = op(b, ScalarOp.SIN, g)
    return [op(b, ScalarOp.ADD, g, e)]


def _reordered(b, x0, x1):                     # nothing to rewrite: only the order changes
    op(b, ScalarOp.NEG, x1)
    return [op(b, ScalarOp.MUL, op(b, ScalarOp.TANH, x0), x0)]


def _cancelling(b, x0, x1):                    # tanh'(x1) is 0 and x1 * 0.75 is big
    op(b, ScalarOp.TANH, op(b, ScalarOp.ADD, x1, op(b, Const(2.5))))
    return [op(b, ScalarOp.MUL, op(b, ScalarOp.TANH, op(b, Pow(1), x1)), x1)]


# Programs the test above failed on when it compared float cotangents (in comments: the
# reference transpose's cotangent, then the transposed optimized program's).
TRANSPOSES_AGAIN = {
    # 3(u - v) against 3u - 3v: scale[-3] x0 and scale[3] x0 are each read once
    # 0.06534294350535386, 0.06534294350535363
    "scale and neg, read twice": (_fan_out, ["x0"], (1.0, 0.0)),
    # (a + b) + c against (b + c) + a: the same operations in another order
    # -0.8068666366791306, -0.8068666366791304
    "reordered sum": (_reordered, ["x0"], (-2.25, -2.25)),
    # (-0.75 + x1 ct) - x1 ct against (x1 ct - x1 ct) - 0.75
    # 0.0, -0.75
    "cancelling sum": (_cancelling, ["x1"], (-3.925064566199743e16, -5.235982211798482e16)),
}


@pytest.mark.parametrize("name", sorted(TRANSPOSES_AGAIN))
def test_optimized_scalar_linear_program_transposes_to_the_same_map(name):
    make, wrt, (x0, x1) = TRANSPOSES_AGAIN[name]
    primal = build(make, "x0", "x1")
    got = check_transposes_again((primal, wrt, {Input("x0"): x0, Input("x1"): x1}))
    assert [type(value) for value in got.values()] == [Exact]   # compared exactly


def test_scalar_gradient_of_a_traced_function_shrinks():
    primal = trace_scalar(lambda x, y: -(-(x * 1.0 + 0.0)) * y, ["x", "y"])
    lin = linearize(primal, primal.output_keys, ["x", "y"])
    tr = linear_transpose(lin)
    graphs = [primal, lin.graph, tr.graph]
    outputs = tr.tangent_output_keys
    program = optimize(graphs, outputs)
    assert len(program.operations) < needed_operations(outputs)
    assert not any(node.operation is ScalarOp.NEG for node in program.operations)
    values = {Input("x"): 0.5, Input("y"): -3.0, tr.tangent_input_keys[0]: 1.0}
    assert evaluate(program, program.output_keys, values) == evaluate(graphs, outputs, values)


# --- the tensor set: constants ---------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [
    (np.zeros((512, 784), np.float32), Full((512, 784), "float32", 0.0)),
    (np.full((2, 3), 2.5), Full((2, 3), "float64", 2.5)),
    (np.ones(4, bool), Full((4,), "bool", True)),
    (np.array(7, np.int8), Full((), "int8", 7)),
    (np.float32(1.5), Full((), "float32", 1.5)),             # a NumPy scalar: 0-d
    (np.full(3, 1 - 2j, np.complex64), Full((3,), "complex64", 1 - 2j)),
])
def test_constant_op_makes_full_for_uniform_arrays(value, expected):
    made = constant_op(value)
    assert made == expected
    assert same(np.asarray(value), made.eval(None, [])[0])


def test_constant_op_keeps_the_sign_of_zero_and_nan():
    negative_zero = constant_op(np.full((300, 2), -0.0))     # uniform: any size
    assert type(negative_zero) is Literal and negative_zero != constant_op(np.zeros((300, 2)))
    assert np.signbit(negative_zero.eval(None, [])[0]).all()
    assert type(constant_op(np.full(2, complex(1.0, -0.0)))) is Literal
    nan = constant_op(np.full(3, np.nan))
    assert nan == constant_op(np.full(3, np.nan)) and hash(nan) == hash(constant_op(
        np.full(3, np.nan)))                               # NaN equals itself: one op
    payload = np.array([np.nan]).view(np.uint64) ^ np.uint64(1)   # a NaN that is not np.nan
    odd = constant_op(np.repeat(payload.view(np.float64), 3))
    assert type(odd) is Literal
    assert odd.eval(None, [])[0].view(np.uint64).tolist() == [int(payload[0])] * 3


def test_constant_op_literals_are_small_and_equal_by_value():
    values = np.arange(6.0).reshape(2, 3)
    made = constant_op(values)
    assert type(made) is Literal and made == constant_op(values.copy())
    assert same(values, made.eval(None, [])[0])
    assert constant_op(np.array([0.0, -0.0])) != constant_op(np.array([0.0, 0.0]))
    with_nan = np.array([1.0, np.nan])
    assert constant_op(with_nan) == constant_op(with_nan.copy())
    assert type(constant_op(np.arange(float(MAX_LITERAL_ELEMENTS)))) is Literal
    assert constant_op(np.arange(MAX_LITERAL_ELEMENTS + 1.0)) is None
    assert type(constant_op(np.arange(6.0)[::2])) is Literal      # a strided view
    assert same(np.arange(6.0)[::2], constant_op(np.arange(6.0)[::2]).eval(None, [])[0])


@pytest.mark.parametrize("value", [2.5, 3, np.array(["a"]), np.array([object()]),
                                   np.arange(3.0).astype(">f8")])
def test_constant_op_refuses(value):
    assert constant_op(value) is None


def test_literal_eval_gives_a_fresh_array_each_time():
    literal = constant_op(np.array([1.0, 2.0]))
    first = literal.eval(None, [])[0]
    first[0] = 99.0
    assert literal.eval(None, [])[0].tolist() == [1.0, 2.0]
    assert literal.jvp_rule(None, [], [], [], None) == [None]


def test_folding_makes_literals_and_fulls():
    def make(b):
        [a] = b.add_operation(constant_op(np.array([1.0, -2.0])), [])
        [c] = b.add_operation(Full((2,), "float64", 3.0), [])
        return [op(b, ew.add, a, c), op(b, ew.mul, c, c)]
    graph = build(make)
    program = optimize(graph, graph.output_keys)
    assert operations(program) == Counter([constant_op(np.array([4.0, 1.0])),
                                           Full((2,), "float64", 9.0)])
    check_values(graph, program, {})


def test_a_large_non_uniform_constant_stays_computed():
    def make(b):
        [c] = b.add_operation(Full((300,), "float64", 1.0), [])
        return [op(b, ew.exp, op(b, ew.Scale(0.5), c)),          # uniform: folds
                op(b, ReduceSum((0,), (300,)), op(b, ew.exp, c))]
    graph = build(make)
    program = optimize(graph, graph.output_keys)
    assert Full((300,), "float64", math.exp(0.5)) in operations(program)
    check_values(graph, program, {})


# --- the tensor set: each rule ----------------------------------------------------------------

F64 = "float64"
SHAPE = (2, 3)


def full(b, value, shape=SHAPE, dtype=F64):
    return b.add_operation(Full(shape, dtype, value), [])[0]


def floating(b, x):
    """``exp(x)``: a value whose dtype the rules know to be floating."""
    return op(b, ew.exp, x)


def positive(b, x):
    return op(b, Compare("gt"), x, full(b, 0.0))


# name -> (graph maker on input x of SHAPE, float64; the operations left)
TENSOR_FIRES = {
    "x + 0": (lambda b, x: [op(b, ew.add, x, full(b, 0.0))], []),
    "0 + x": (lambda b, x: [op(b, ew.add, full(b, 0.0), x)], []),
    "x - 0": (lambda b, x: [op(b, ew.sub, x, full(b, 0))], []),
    "x * 1": (lambda b, x: [op(b, ew.mul, x, full(b, 1.0))], []),
    "1 * x": (lambda b, x: [op(b, ew.mul, full(b, 1.0), x)], []),
    "x * conj(1)": (lambda b, x: [op(b, ew.mul_conj, x, full(b, 1.0))], []),
    "x / 1": (lambda b, x: [op(b, ew.div, x, full(b, 1.0))], []),
    "x div_or_zero 1": (lambda b, x: [op(b, ew.div_or_zero, x, full(b, 1.0))], []),
    "x * uniform literal 1": (lambda b, x: [op(b, ew.mul, x, b.add_operation(
        Literal(SHAPE, F64, np.array([1.0]).tobytes()), [])[0])], []),
    "neg(neg x)": (lambda b, x: [op(b, ew.neg, op(b, ew.neg, x))], []),
    "conj(conj x)": (lambda b, x: [op(b, ew.conj, op(b, ew.conj, x))], []),
    "scale[1] of exp": (lambda b, x: [op(b, ew.Scale(1), floating(b, x))], [ew.exp]),
    "linear scale[1]": (lambda b, x: [op(b, ew.Scale(1.0), x, role=LIN)], []),
    "neg(scale[2]) of exp": (lambda b, x: [op(b, ew.neg, op(b, ew.Scale(2.0), floating(b, x)))],
                             [ew.exp, ew.Scale(-2.0)]),
    "linear scale[2](neg)": (lambda b, x: [op(b, ew.Scale(2.0), op(b, ew.neg, x, role=LIN),
                                              role=LIN)], [ew.Scale(-2.0)]),
    "linear scale[-1](scale[3])": (lambda b, x: [op(b, ew.Scale(-1), op(
        b, ew.Scale(3.0), x, role=LIN), role=LIN)], [ew.Scale(-3.0)]),
    "transpose twice to x": (lambda b, x: [op(b, Transpose((1, 0)), op(b, Transpose((1, 0)), x))],
                             []),
    "transpose twice to one": (lambda b, x: [op(b, Transpose((0, 2, 1)), op(
        b, Transpose((1, 0, 2)), op(b, Reshape((1, 2, 3), SHAPE), x)))],
        [Reshape((1, 2, 3), SHAPE), Transpose((1, 2, 0))]),
    "identity transpose": (lambda b, x: [op(b, Transpose((0, 1)), x)], []),
    "reshape twice to one": (lambda b, x: [op(b, Reshape((3, 2), (6,)), op(
        b, Reshape((6,), SHAPE), x))], [Reshape((3, 2), SHAPE)]),
    "reshape twice to x": (lambda b, x: [op(b, Reshape(SHAPE, (3, 2)), op(
        b, Reshape((3, 2), SHAPE), x))], []),
    "reshape to the same shape": (lambda b, x: [op(b, Reshape(SHAPE, SHAPE), x)], []),
    "identity broadcast": (lambda b, x: [op(b, BroadcastInDim(SHAPE, (0, 1), SHAPE), x)], []),
    "reduce_sum over no axis of exp": (lambda b, x: [op(b, ReduceSum((), SHAPE), floating(b, x))],
                                       [ew.exp]),
    "sum of a size-1 broadcast": (lambda b, x: [op(b, ReduceSum((0,), (1,) + SHAPE), op(
        b, BroadcastInDim((1,) + SHAPE, (1, 2), SHAPE), floating(b, x)))], [ew.exp]),
    "sum over size-1 axes": (lambda b, x: [op(b, ReduceSum((0, 1), (1, 1, 6)), op(
        b, BroadcastInDim((1, 1, 6), (1, 2), (1, 6)), op(b, Reshape((1, 6), SHAPE), x, role=LIN),
        role=LIN), role=LIN)], [Reshape((6,), SHAPE)]),
    "convert there and back": (lambda b, x: [op(b, ew.ConvertElementType("float32", F64), op(
        b, ew.ConvertElementType(F64, "float32"), op(b, ew.ConvertElementType("float32", F64),
                                                       x)))],
        [ew.ConvertElementType("float32", F64)]),
    "convert through a wider dtype": (lambda b, x: [op(b, ew.ConvertElementType("float16", F64), op(
        b, ew.ConvertElementType(F64, "float32"), op(b, ew.ConvertElementType("float32", F64),
                                                       x)))],
        [ew.ConvertElementType("float32", F64), ew.ConvertElementType("float16", "float32")]),
    "convert to its own dtype": (lambda b, x: [op(b, ew.ConvertElementType(F64, F64), x)], []),
    "select(p, a, a)": (lambda b, x: [op(b, Select(SHAPE, F64), positive(b, x), x, x)], []),
    "zeros through reshape": (lambda b, x: [op(b, Reshape((6,), SHAPE), full(b, 0.0), role=LIN)],
                              [Full((6,), F64, 0.0)]),
    "zeros through transpose": (lambda b, x: [op(b, Transpose((1, 0)), full(b, 0.0), role=LIN)],
                                [Full((3, 2), F64, 0.0)]),
    "zeros through broadcast": (lambda b, x: [op(b, BroadcastInDim((4,) + SHAPE, (1, 2), SHAPE),
                                                 full(b, 0.0), role=LIN)],
                                [Full((4,) + SHAPE, F64, 0.0)]),
    "zeros through reduce_sum": (lambda b, x: [op(b, ReduceSum((1,), SHAPE), full(b, 0.0),
                                                  role=LIN)], [Full((2,), F64, 0.0)]),
    "zeros through scale": (lambda b, x: [op(b, ew.Scale(2.5), full(b, 0.0), role=LIN)],
                            [Full(SHAPE, F64, 0.0)]),
    "zeros through neg": (lambda b, x: [op(b, ew.neg, full(b, 0.0), role=LIN)],
                          [Literal(SHAPE, F64, np.array([-0.0]).tobytes())]),
    "zeros through convert": (lambda b, x: [op(b, ew.ConvertElementType("float32", F64),
                                               full(b, 0.0), role=LIN)],
                              [Full(SHAPE, "float32", 0.0)]),
    "zeros through real": (lambda b, x: [op(b, Real("complex128"), full(b, 0j, dtype="complex128"),
                                            role=LIN)], [Full(SHAPE, F64, 0.0)]),
    "zeros through a linear chain": (lambda b, x: [op(b, ew.add, x, op(
        b, Reshape(SHAPE, (3, 2)), op(b, Transpose((1, 0)), full(b, 0.0), role=LIN), role=LIN),
        role=Linearized((True, True)))], []),
}
ROUNDED = {                   # a sum of n copies becomes a product by n: equal to rounding
    "linear sum of a broadcast": (lambda b, x: [op(b, ReduceSum((0,), (4,) + SHAPE), op(
        b, BroadcastInDim((4,) + SHAPE, (1, 2), SHAPE), x, role=LIN), role=LIN)],
        [ew.Scale(4)]),
    "sum of a broadcast of exp": (lambda b, x: [op(b, ReduceSum((0, 2), (3, 2, 5, 3)), op(
        b, BroadcastInDim((3, 2, 5, 3), (1, 3), SHAPE), floating(b, x)))], [ew.exp, ew.Scale(15)]),
}
tensor_inputs = st.lists(any_float, min_size=6, max_size=6).map(
    lambda xs: np.array(xs).reshape(SHAPE))
EDGE_ARRAYS = [np.array([[0.0, -0.0, 1.5], [-math.inf, math.inf, math.nan]]),
               np.array([[1e308, -5e-324, 2.0], [3.0, -4.0, 0.5]])]


@pytest.mark.parametrize("name", list(TENSOR_FIRES) + list(ROUNDED))
def test_tensor_rule_fires(name):
    make, left = TENSOR_FIRES[name] if name in TENSOR_FIRES else ROUNDED[name]
    graph = build(make, "x")
    program = optimize(graph, graph.output_keys)
    assert operations(program) == Counter(left)
    if not left:
        assert program.output_keys == (Input("x"),)
    for x in EDGE_ARRAYS:
        if name in TENSOR_FIRES:
            check_values(graph, program, {"x": x})


@SETTINGS
@given(st.sampled_from(sorted(TENSOR_FIRES)), tensor_inputs)
def test_tensor_rules_keep_random_values(name, x):
    graph = build(TENSOR_FIRES[name][0], "x")
    check_values(graph, optimize(graph, graph.output_keys), {"x": x})


def test_tensor_complex_conj_and_select():
    z = np.array([[1 + 2j, -0.0 - 0.0j, complex(math.inf, -1)], [complex(0, math.nan), 3j, -1]])
    for name in ("conj(conj x)", "neg(neg x)", "x + 0", "x - 0", "transpose twice to x"):
        graph = build(TENSOR_FIRES[name][0], "x")
        check_values(graph, optimize(graph, graph.output_keys), {"x": z})


@SETTINGS
@given(st.sampled_from(sorted(ROUNDED)),
       st.lists(st.floats(-1e300, 1e300) | st.sampled_from(EDGE_FLOATS), min_size=6,
                max_size=6).map(lambda xs: np.array(xs).reshape(SHAPE)))
def test_sum_of_copies_agrees_to_rounding(name, x):
    graph = build(ROUNDED[name][0], "x")
    program = optimize(graph, graph.output_keys)
    with np.errstate(all="ignore"):
        [expected] = evaluate(graph, graph.output_keys, {Input("x"): x})
        [got] = evaluate(program, program.output_keys, {Input("x"): x})
    assert expected.dtype == got.dtype and expected.shape == got.shape
    np.testing.assert_allclose(got, expected, rtol=16 * np.finfo(float).eps, equal_nan=True)


def test_integer_times_zero_is_zeros_and_float_times_zero_stays():
    ints = build(lambda b, x: [op(b, ew.mul, x, full(b, 0, dtype="int32"))], "x")
    program = optimize(ints, ints.output_keys)
    assert operations(program) == Counter([Full(SHAPE, "int32", 0)])
    check_values(ints, program, {"x": np.arange(6, dtype=np.int32).reshape(SHAPE)})
    bools = build(lambda b, x: [op(b, ew.mul, full(b, False, dtype="bool"), x)], "x")
    program = optimize(bools, bools.output_keys)
    assert operations(program) == Counter([Full(SHAPE, "bool", False)])
    check_values(bools, program, {"x": np.ones(SHAPE, bool)})
    floats = build(lambda b, x: [op(b, ew.mul, x, full(b, 0.0))], "x")
    program = optimize(floats, floats.output_keys)
    assert len(program.operations) == 2                   # inf * 0 is NaN: left alone
    check_values(floats, program, {"x": EDGE_ARRAYS[0]})


TENSOR_STAYS = {
    "x * (1 + ulp)": lambda b, x: [op(b, ew.mul, x, full(b, 1.0000000000000002))],
    "x / 2": lambda b, x: [op(b, ew.div, x, full(b, 2.0))],
    "int x / 1": lambda b, x: [op(b, ew.div, op(b, ew.ConvertElementType("int64", F64), x),
                                  full(b, 1, dtype="int64"))],            # gives floats
    "1 * x for mul_conj": lambda b, x: [op(b, ew.mul_conj, full(b, 1.0), x)],   # is conj(x)
    "0 - x": lambda b, x: [op(b, ew.sub, full(b, 0.0), x)],
    "zeros times x, linear": lambda b, x: [op(b, ew.mul, full(b, 0.0), x,
                                              role=Linearized((True, False)))],   # 0 * inf
    "zeros dot x, linear": lambda b, x: [op(b, DotGeneral((((1,), (0,)), ((), ())), (2, 2), SHAPE),
                                            full(b, 0.0, shape=(2, 2)), x,
                                            role=Linearized((True, False)))],
    "scale[1] of an input": lambda b, x: [op(b, ew.Scale(1.0), x)],      # an int x would change
    "scale[1j] of exp": lambda b, x: [op(b, ew.Scale(1j), floating(b, x))],
    "scale[2](scale[3])": lambda b, x: [op(b, ew.Scale(2.0), op(b, ew.Scale(3.0), x, role=LIN),
                                           role=LIN)],
    "neg(neg) in two roles": lambda b, x: [op(b, ew.neg, op(b, ew.neg, x, role=LIN))],
    "transposes that do not return": lambda b, x: [op(b, Transpose((1, 0)), op(
        b, Reshape((3, 2), SHAPE), x))],
    "reshape of a transpose": lambda b, x: [op(b, Reshape((6,), (3, 2)), op(
        b, Transpose((1, 0)), x))],
    "sum of an input's broadcast": lambda b, x: [op(b, ReduceSum((0,), (4,) + SHAPE), op(
        b, BroadcastInDim((4,) + SHAPE, (1, 2), SHAPE), x))],        # bool x sums as int64
    "sum over part of a broadcast": lambda b, x: [op(b, ReduceSum((0,), (4, 5) + SHAPE), op(
        b, BroadcastInDim((4, 5) + SHAPE, (2, 3), SHAPE), x, role=LIN), role=LIN)],
    "sum over a broadcast and data": lambda b, x: [op(b, ReduceSum((0, 1), (4,) + SHAPE), op(
        b, BroadcastInDim((4,) + SHAPE, (1, 2), SHAPE), x, role=LIN), role=LIN)],
    "sum to another shape": lambda b, x: [op(b, ReduceSum((1,), (6, 4)), op(
        b, BroadcastInDim((6, 4), (0, 1), (6, 1)), op(b, Reshape((6, 1), SHAPE), x, role=LIN),
        role=LIN), role=LIN)],                   # a scale and a reshape: not fewer ops
    "lossy convert chain": lambda b, x: [op(b, ew.ConvertElementType(F64, "float32"), op(
        b, ew.ConvertElementType("float32", F64), x))],
    "float to int through a wider float": lambda b, x: [op(b, ew.ConvertElementType(
        "int32", F64), op(b, ew.ConvertElementType(F64, "float32"), op(
            b, ew.ConvertElementType("float32", F64), x)))],
    "select of two values": lambda b, x: [op(b, Select(SHAPE, F64), positive(b, x), x,
                                             op(b, ew.neg, x))],
    "linear x + 0 with x inactive": lambda b, x: [op(b, ew.add, x, full(b, 0.0),
                                                     role=Linearized((False, True)))],
}


@pytest.mark.parametrize("name", TENSOR_STAYS)
def test_tensor_rule_does_not_fire_where_it_must_not(name):
    graph = build(TENSOR_STAYS[name], "x")
    program = optimize(graph, graph.output_keys)
    assert operations(program) == operations(graph)
    with np.errstate(all="ignore"):
        for x in EDGE_ARRAYS:
            check_values(graph, program, {"x": x})


# --- tensor-set triples traced from NumPy-style functions -------------------------------------

RNG = np.random.default_rng(12)
TRACED = {        # name -> (f, argument shapes, whether every rule firing on it is exact)
    "tanh": (lambda x: tnp.sum(tnp.tanh(x) * x), [(2, 3)], True),
    "double negation and transpose": (
        lambda x: tnp.sum(tnp.transpose(tnp.transpose(x)) * -(-tnp.sin(x))), [(2, 3)], True),
    "logsumexp": (lambda z: tnp.sum(tnp.logsumexp(z, axis=1)), [(3, 4)], True),
    "where": (lambda x: tnp.sum(tnp.where(x > 0, x, 0.0) * tnp.exp(x)), [(5,)], True),
    "mean of a square": (lambda x: tnp.mean(x * x), [(2, 3)], True),
    "layer": (lambda w, x: tnp.sum(tnp.tanh(tnp.matmul(x, w) + 1.0)), [(3, 4), (2, 3)], True),
    "reshapes": (lambda x: tnp.sum(tnp.reshape(tnp.reshape(x, (6,)), (3, 2)) ** 2), [(2, 3)],
                 True),
    "sum of a broadcast": (lambda x: tnp.sum(tnp.sin(tnp.sum(tnp.broadcast_to(tnp.cos(x), (4, 3)),
                                                             axis=0))), [(3,)], False),
}
_traced_cache: dict = {}


def traced(name):
    """``(primal, linear, transposed, values)`` for ``TRACED[name]``, traced once."""
    if name not in _traced_cache:
        f, shapes, _ = TRACED[name]
        t = make_graph(f, *[RNG.standard_normal(shape) for shape in shapes])
        argnums = tuple(range(len(shapes)))
        lin, tr = t.linearized(argnums), t.transposed(argnums)
        values = {key: value for key, value in t.trace.values.items() if type(key) is Input}
        for i, key in zip(argnums, lin.tangent_input_keys):    # aligned with argnums
            values[key] = RNG.standard_normal(shapes[i])
        for key in tr.tangent_input_keys:
            values[key] = np.asarray(0.5)
        _traced_cache[name] = (t.graph, lin, tr, values)
    return _traced_cache[name]


def assert_values(expected, got, exact: bool):
    for e, g in zip(expected, got):
        if exact:
            assert same(e, g), (e, g)
        else:
            assert np.shape(e) == np.shape(g)
            np.testing.assert_allclose(g, e, rtol=1e-13, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", sorted(TRACED))
@settings(SETTINGS, max_examples=15)
@given(data=st.data())
def test_random_tensor_triples_optimize_to_the_same_values(name, data):
    primal, lin, tr, values = traced(name)
    values = dict(values)
    for i, shape in enumerate(TRACED[name][1]):              # new argument values, edges too
        size = math.prod(shape)
        drawn = data.draw(st.lists(st.floats(-3, 3) | st.sampled_from([0.0, -0.0, math.inf,
                                                                        math.nan]),
                                   min_size=size, max_size=size))
        values[Input(("arg", i))] = np.array(drawn).reshape(shape)
    graphs = [primal, lin.graph, tr.graph]
    outputs = [k for k in tr.tangent_output_keys + lin.tangent_output_keys if k is not None]
    outputs += list(primal.output_keys)
    program = optimize(graphs, outputs)
    assert len(program.operations) <= needed_operations(outputs)
    assert program.parents == ()
    with np.errstate(all="ignore"):
        expected = evaluate(graphs, outputs, values)
        got = evaluate(program, program.output_keys, values)
    assert_values(expected, got, TRACED[name][2])


@pytest.mark.parametrize("name", sorted(TRACED))
def test_tensor_triples_shrink(name):
    primal, lin, tr, _ = traced(name)
    outputs = [k for k in tr.tangent_output_keys if k is not None]
    program = optimize([primal, lin.graph, tr.graph], outputs)
    if name in ("double negation and transpose", "sum of a broadcast", "reshapes"):
        assert len(program.operations) < needed_operations(outputs)
    if name == "sum of a broadcast":                  # reduce_sum(broadcast(ct)) -> ct * 4
        assert ew.Scale(4) in operations(program)
        assert not any(type(node.operation) is ReduceSum for node in program.operations)
    if name == "double negation and transpose":
        assert not any(node.operation in (ew.neg, Transpose((1, 0)))
                       for node in program.operations)


@pytest.mark.parametrize("name", sorted(TRACED))
def test_optimized_tensor_linear_programs_still_transpose(name):
    primal, lin, tr, values = traced(name)
    program = optimize([primal, lin.graph], lin.tangent_output_keys)
    again, present = transposed_again(program, lin)
    values = dict(values)
    values.update({key: values[tr.tangent_input_keys[0]] for key in again.tangent_input_keys})
    expected = cotangents_of([primal, lin.graph, tr.graph], tr, lin.tangent_input_keys, values)
    got = cotangents_of([program, again.graph], again, present, values)
    for key in present:
        assert_values([expected[key]], [got[key]], TRACED[name][2])
