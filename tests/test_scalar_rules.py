"""Every rule of ``primitives.scalar`` through ``tidu.testing``, at real and complex points.

For each ``ScalarOp`` member, ``Pow(p)`` and ``Scale(c)``: ``eval`` matches
Python's ``math``/``cmath``; ``check_primitive`` (JVP against finite
differences, dot-product test of the transpose) passes at points hypothesis
picks in the op's safe domain; and the rules are closed: the linearized graph
can itself be linearized (forward over forward, checked against finite
differences, and its transpose by the dot product), and so can the transposed
graph (forward over reverse).
"""

from __future__ import annotations

import cmath
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primitives.scalar import Pow, ScalarOp, Scale, exp, imag, real, trace_scalar
from tidu import linear_transpose, linearize
from tidu.graph import GraphBuilder, Input, Local, evaluate
from tidu.testing import CheckUsageError, check_jvp, check_primitive, check_transpose

SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
SEEDS = st.integers(0, 2**32 - 1)

# --- points ----------------------------------------------------------------------

REAL = st.floats(-20, 20)
REAL_SMALL = st.floats(-8, 8)
POSITIVE = st.floats(0.05, 20)
NONZERO = st.one_of(st.floats(0.1, 20), st.floats(-20, -0.1))
COMPLEX = st.builds(complex, st.floats(-3, 3), st.floats(-3, 3))
# away from 0 and from the branch cut of log, sqrt and fractional powers (the negative reals)
COMPLEX_CUT = COMPLEX.filter(lambda z: abs(z) > 0.1 and not (z.real < 0 and abs(z.imag) < 0.1))
COMPLEX_NONZERO = COMPLEX.filter(lambda z: abs(z) > 0.1)
# tanh has poles where cosh vanishes
COMPLEX_TANH = COMPLEX.filter(lambda z: abs(cmath.cosh(z)) > 0.2)

S = ScalarOp
# op -> (real points per input, complex points per input); None: not at real points
UNARY = {
    S.NEG: (REAL, COMPLEX),
    S.CONJ: (REAL, COMPLEX),
    S.TO_COMPLEX: (REAL, None),       # takes real inputs only: its transpose is REAL
    S.REAL: (REAL, COMPLEX),
    S.IMAG: (None, COMPLEX),          # real points: see test_imag_at_real_points
    S.EXP: (REAL, COMPLEX),
    S.LOG: (POSITIVE, COMPLEX_CUT),
    S.SIN: (REAL, COMPLEX),
    S.COS: (REAL, COMPLEX),
    S.SINCOS: (REAL, COMPLEX),
    S.SQRT: (POSITIVE, COMPLEX_CUT),
    S.TANH: (REAL_SMALL, COMPLEX_TANH),
    S.ABS: (NONZERO, COMPLEX_NONZERO),      # not differentiable at 0: see test_scalar_edges
    S.SIGN: (NONZERO, COMPLEX_NONZERO),
}
BINARY = {
    S.ADD: ((REAL, REAL), (COMPLEX, COMPLEX)),
    S.SUB: ((REAL, REAL), (COMPLEX, COMPLEX)),
    S.MUL: ((REAL, REAL), (COMPLEX, COMPLEX)),
    S.MUL_CONJ: ((REAL, REAL), (COMPLEX, COMPLEX)),
    S.DIV: ((REAL, NONZERO), (COMPLEX, COMPLEX_NONZERO)),
    S.DIV_OR_ZERO: ((REAL, NONZERO), (COMPLEX, COMPLEX_NONZERO)),
}
POW_EXPONENTS = [0, 1, 2, 3, -1, -2, 0.5, 2.5, 1 / 3]
INTEGER_EXPONENTS = [p for p in POW_EXPONENTS if isinstance(p, int)]
SCALES_REAL = [2.0, -0.5, 3]
SCALES_COMPLEX = [1j, 2 - 1j]


def pow_points(p, kind):
    if kind == "real":
        return POSITIVE if p not in INTEGER_EXPONENTS or p < 0 else REAL_SMALL
    return COMPLEX_NONZERO if p in INTEGER_EXPONENTS else COMPLEX_CUT


def test_every_scalar_op_is_covered():
    assert set(UNARY) | set(BINARY) == set(ScalarOp)


# --- eval matches math / cmath ------------------------------------------------------

MATH = {
    S.NEG: lambda m, x: [-x],
    S.CONJ: lambda m, x: [x.conjugate()],
    S.REAL: lambda m, x: [x.real],
    S.IMAG: lambda m, x: [x.imag],
    S.EXP: lambda m, x: [m.exp(x)],
    S.LOG: lambda m, x: [m.log(x)],
    S.SIN: lambda m, x: [m.sin(x)],
    S.COS: lambda m, x: [m.cos(x)],
    S.SINCOS: lambda m, x: [m.sin(x), m.cos(x)],
    S.SQRT: lambda m, x: [m.sqrt(x)],
    S.TANH: lambda m, x: [m.tanh(x)],
    S.ADD: lambda m, x, y: [x + y],
    S.SUB: lambda m, x, y: [x - y],
    S.MUL: lambda m, x, y: [x * y],
    S.MUL_CONJ: lambda m, x, y: [x * y.conjugate()],
    S.TO_COMPLEX: lambda m, x: [complex(x)],
    S.DIV: lambda m, x, y: [x / y],
    S.DIV_OR_ZERO: lambda m, x, y: [x / y],
    S.ABS: lambda m, x: [abs(x)],
    S.SIGN: lambda m, x: [x / abs(x)],
}


def _real_and_complex_cases():
    for op, (real_points, complex_points) in UNARY.items():
        if real_points is not None:
            yield pytest.param(op, (real_points,), id=f"{op.name}-real")
        if complex_points is not None:
            yield pytest.param(op, (complex_points,), id=f"{op.name}-complex")
    for op, (real_points, complex_points) in BINARY.items():
        yield pytest.param(op, real_points, id=f"{op.name}-real")
        yield pytest.param(op, complex_points, id=f"{op.name}-complex")


def real_and_complex_cases():
    return list(_real_and_complex_cases())


@pytest.mark.parametrize("op, points", real_and_complex_cases())
@SETTINGS
@given(data=st.data())
def test_eval_matches_math(op, points, data):
    args = [data.draw(p) for p in points]
    module = cmath if any(isinstance(a, complex) for a in args) else math
    got = op.eval(None, args)
    assert got == MATH[op](module, *args)
    for value, arg in zip(got, args):
        expect_complex = (module is cmath and op not in (S.REAL, S.IMAG, S.ABS)
                          or op is S.TO_COMPLEX)
        assert isinstance(value, complex if expect_complex else float)


@pytest.mark.parametrize("p", POW_EXPONENTS)
@SETTINGS
@given(data=st.data())
def test_pow_and_scale_eval(p, data):
    x = data.draw(pow_points(p, "real"))
    z = data.draw(pow_points(p, "complex"))
    assert Pow(p).eval(None, [x]) == [x ** p]
    assert Pow(p).eval(None, [z]) == [z ** p]
    for c in SCALES_REAL + SCALES_COMPLEX:
        assert Scale(c).eval(None, [x]) == [c * x]
        assert Scale(c).eval(None, [z]) == [c * z]


# --- first order: check_primitive -----------------------------------------------------


@pytest.mark.parametrize("op, points", real_and_complex_cases())
@SETTINGS
@given(data=st.data(), seed=SEEDS)
def test_scalar_op_rules(op, points, data, seed):
    check_primitive(op, *[data.draw(p) for p in points], rng=seed)


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("p", POW_EXPONENTS)
@SETTINGS
@given(data=st.data(), seed=SEEDS)
def test_pow_rules(p, kind, data, seed):
    check_primitive(Pow(p), data.draw(pow_points(p, kind)), rng=seed)


@SETTINGS
@given(z=COMPLEX_CUT, seed=SEEDS)
def test_pow_complex_exponent_rules(z, seed):
    check_primitive(Pow(0.5 + 1j), z, rng=seed)


@pytest.mark.parametrize("c", SCALES_REAL + SCALES_COMPLEX)
@SETTINGS
@given(z=COMPLEX, seed=SEEDS)
def test_scale_rules_complex_points(c, z, seed):
    check_primitive(Scale(c), z, rng=seed)


@pytest.mark.parametrize("c", SCALES_REAL)
@SETTINGS
@given(x=REAL, seed=SEEDS)
def test_scale_rules_real_points(c, x, seed):
    check_primitive(Scale(c), x, rng=seed)


def test_int_inputs_are_not_differentiated():
    assert check_primitive(S.MUL, 3, 2.5, rng=0).input_slots == 1
    with pytest.raises(CheckUsageError, match="is differentiable"):
        check_primitive(Pow(2), 3, rng=0)                 # nothing to check: said, not passed
    with pytest.raises(CheckUsageError, match="is differentiable"):
        check_primitive(S.DIV, 2, 4, rng=0)


# --- real and complex meet only through TO_COMPLEX ------------------------------------
#
# As in JAX, promotion is explicit: binary ops take operands of one kind, and a real
# value becomes complex through TO_COMPLEX, whose transpose (REAL) keeps a real
# input's cotangent real. check_transpose fails when a real input gets a complex
# cotangent, so these tests would catch a frontend that forgot to promote.


def promoted_graph(op, *params):
    """x (real) -> TO_COMPLEX -> op(., *params), built by hand."""
    b = GraphBuilder()
    x = b.add_input("x")
    [z] = b.add_operation(S.TO_COMPLEX, [Local(x)])
    b.set_outputs(b.add_operation(op, [Local(z)]))
    return b.build()


@pytest.mark.parametrize("c", SCALES_COMPLEX)
def test_complex_scale_of_a_promoted_real(c):
    graph = promoted_graph(Scale(c))
    lin = linearize(graph, graph.output_keys, ["x"])
    check_jvp(graph, graph.output_keys, {"x": 0.7}, rng=0)
    check_transpose(graph, lin, {"x": 0.7}, rng=0)


def test_imag_of_a_real_traces_through_to_complex_and_has_zero_gradient():
    graph = trace_scalar(lambda x: imag(x), ["x"])
    assert [node.operation for node in graph.operations] == [S.TO_COMPLEX, S.IMAG]
    lin = linearize(graph, graph.output_keys, ["x"])
    check_transpose(graph, lin, {"x": 0.7}, rng=0)
    tr = linear_transpose(lin)
    [(seed, _)] = tr.tangent_inputs
    [g] = evaluate([graph, lin.graph, tr.graph], tr.tangent_output_keys,
                   {Input("x"): 0.7, Input(seed): 1.0})
    assert g == 0.0 and isinstance(g, float)


@pytest.mark.parametrize("op", [op for op in BINARY if op is not S.DIV_OR_ZERO])  # no operator
def test_real_with_complex_operand_is_promoted(op):
    fn = {S.ADD: lambda x: x + (1.5 - 0.5j), S.SUB: lambda x: x - (1.5 - 0.5j),
          S.MUL: lambda x: x * (1.5 - 0.5j), S.DIV: lambda x: x / (1.5 - 0.5j),
          S.MUL_CONJ: lambda x: x * (1.5 + 0.5j)}[op]
    graph = trace_scalar(fn, ["x"])
    assert graph.operations[0].operation is S.TO_COMPLEX or any(
        node.operation is S.TO_COMPLEX for node in graph.operations)
    lin = linearize(graph, graph.output_keys, ["x"])
    check_jvp(graph, graph.output_keys, {"x": 0.7}, rng=0)
    check_transpose(graph, lin, {"x": 0.7}, rng=0)


def test_gradient_of_a_real_function_through_complex_values():
    graph = trace_scalar(lambda x: real(exp(x * 1j)), ["x"])
    lin = linearize(graph, graph.output_keys, ["x"])
    check_transpose(graph, lin, {"x": 0.7}, rng=0)
    tr = linear_transpose(lin)
    [(seed, _)] = tr.tangent_inputs
    [g] = evaluate([graph, lin.graph, tr.graph], tr.tangent_output_keys,
                   {Input("x"): 0.7, Input(seed): 1.0})
    assert isinstance(g, float) and abs(g + math.sin(0.7)) < 1e-15


def test_real_function_through_complex_values_jvp():
    # forward mode: the tangent of cos(x) is -sin(x) t, and real
    graph = trace_scalar(lambda x: real(exp(x * 1j)) + imag(x), ["x"])
    check_jvp(graph, graph.output_keys, {"x": 0.7}, rng=0)


# --- higher order: the rules are closed ------------------------------------------------


def one_op_graph(op):
    b = GraphBuilder()
    ids = [b.add_input(slot) for slot in range(op.input_count())]
    b.set_outputs(b.add_operation(op, [Local(i) for i in ids]))
    return b.build()


def random_like(value, rng):
    if isinstance(value, complex):
        return complex(rng.standard_normal(), rng.standard_normal())
    return float(rng.standard_normal())


def check_closed(op, args, seed):
    """Forward over forward and forward over reverse through ``op``'s rules."""
    rng = np.random.default_rng(seed)
    graph = one_op_graph(op)
    primals = dict(enumerate(args))
    lin = linearize(graph, graph.output_keys, list(primals))
    tangent_outputs = [k for k in lin.tangent_output_keys if k is not None]
    if not tangent_outputs:
        return
    # the linear graph as a function of the primals and the tangents
    first = dict(primals)
    for key, value in zip(lin.tangent_input_keys, args):
        first[key.key] = random_like(value, rng)
    check_jvp([lin.graph, graph], tangent_outputs, first, rng=rng)
    second = linearize([lin.graph, graph], tangent_outputs, list(first))
    check_transpose([lin.graph, graph], second, first, rng=rng)
    # the transposed graph as a function of the primals and the cotangent seeds
    transposed = linear_transpose(lin)
    outputs = op.eval(None, list(args))
    backward = dict(primals)
    active = [o for o, t in zip(outputs, lin.tangent_outputs) if t is not None]
    for key, value in zip(transposed.tangent_input_keys, active):
        backward[key.key] = random_like(value, rng)
    cotangent_outputs = [k for k in transposed.tangent_output_keys if k is not None]
    check_jvp([transposed.graph, lin.graph, graph], cotangent_outputs, backward, rng=rng)


@pytest.mark.parametrize("op, points", real_and_complex_cases())
@settings(SETTINGS, max_examples=8)
@given(data=st.data(), seed=SEEDS)
def test_rules_are_closed(op, points, data, seed):
    check_closed(op, [data.draw(p) for p in points], seed)


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("p", POW_EXPONENTS)
@settings(SETTINGS, max_examples=8)
@given(data=st.data(), seed=SEEDS)
def test_pow_rules_are_closed(p, kind, data, seed):
    check_closed(Pow(p), [data.draw(pow_points(p, kind))], seed)


@pytest.mark.parametrize("c", SCALES_REAL + SCALES_COMPLEX)
@settings(SETTINGS, max_examples=8)
@given(z=COMPLEX, seed=SEEDS)
def test_scale_rules_are_closed(c, z, seed):
    check_closed(Scale(c), [z], seed)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_repeated_linearization_of_pow(n):
    # the n-th derivative of x**n is n!: linearize n times, each a check_jvp of the last
    graph = one_op_graph(Pow(n))
    graphs, outputs, primals = [graph], list(graph.output_keys), {0: 1.3}
    rng = np.random.default_rng(n)
    for order in range(n):
        check_jvp(graphs, outputs, primals, rng=rng)
        lin = linearize(graphs, outputs, list(primals))
        for key in lin.tangent_input_keys:
            primals[key.key] = float(rng.standard_normal())
        graphs = [lin.graph, *graphs]
        outputs = [k for k in lin.tangent_output_keys if k is not None]
    assert outputs
