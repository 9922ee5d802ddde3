"""Edge values of ``primitives.scalar``: one convention, checked against PyTorch and JAX.

Values follow IEEE 754 where Python would raise (``1/0 = inf``, ``log(0) = -inf``),
and derivatives follow from them (``sqrt'(0) = inf``). ``abs'(0)`` is 0 for real
and complex inputs (PyTorch's convention; ``jax.grad(jnp.abs)(0.0)`` is 1, which
is checked and documented as the one disagreement). Every case runs through both
frontends (eager ``Scalar.backward`` and ``trace_scalar`` + ``linearize`` +
``linear_transpose``), which must agree with each other and with PyTorch; JAX is
checked too, with its complex gradient conjugated (tidu's convention is PyTorch's).

Also: ``Const``/``Pow``/``Scale`` parameters compare exactly in hash-consing
(``Const(-0.0)`` keeps its sign, ``Const(nan)`` equals itself, ``Const(1)``,
``Const(1.0)`` and ``Const(1+0j)`` stay apart), and ``Scalar.backward(seed=None)``
means a seed of 1.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from primitives.scalar import Const, Pow, Scale, ScalarOp, ScalarTypeError, sign, trace_scalar
from primitives.scalar.eager import Scalar, apply, exp, log, real, sin, sqrt, tanh
from tidu import linear_transpose, linearize
from tidu.eager import EagerError
from tidu.graph import PRIMARY, GraphBuilder, Input, OperationKey, evaluate

INF, NAN = math.inf, math.nan


def same(a, b) -> bool:
    """Equal as IEEE values: NaN matches NaN, infinities' signs must agree, finite values
    to rounding (the sign of a zero is not compared: PyTorch's sign(-0.0) is 0.0, NumPy's
    and JAX's -0.0)."""
    a, b = complex(a), complex(b)
    return all((math.isnan(x) and math.isnan(y)) or x == y
               or (math.isfinite(x) and math.isfinite(y) and abs(x - y) <= 1e-12 * abs(y))
               for x, y in ((a.real, b.real), (a.imag, b.imag)))


# --- the cases: (name, f on Scalars / tracers, f in torch, f in jax, point) -----------
#
# f(x) must be real-valued (a loss); each gives a value and a gradient at the point.

CASES = [
    ("sqrt at 0", lambda x: sqrt(x), "sqrt", 0.0),
    ("sqrt at -1", lambda x: sqrt(x), "sqrt", -1.0),
    ("log at 0", lambda x: log(x), "log", 0.0),
    ("log at -0.0", lambda x: log(x), "log", -0.0),
    ("log at -1", lambda x: log(x), "log", -1.0),
    ("1/x at 0", lambda x: 1.0 / x, "reciprocal", 0.0),
    ("1/x at -0.0", lambda x: 1.0 / x, "reciprocal", -0.0),
    ("x/x at 0", lambda x: x / x, "self_ratio", 0.0),
    ("x**-1 at 0", lambda x: x ** -1, "pow-1", 0.0),
    ("x**0.5 at 0", lambda x: x ** 0.5, "pow0.5", 0.0),
    ("x**1.5 at 0", lambda x: x ** 1.5, "pow1.5", 0.0),
    ("x**2 at 0", lambda x: x ** 2, "pow2", 0.0),
    ("x**0 at 0", lambda x: x ** 0, "pow0", 0.0),
    ("x**(1/3) at -8", lambda x: x ** (1 / 3), "cbrt_pow", -8.0),
    ("x**400 at 10", lambda x: x ** 400, "pow400", 10.0),
    ("exp at 1000", lambda x: exp(x), "exp", 1000.0),
    ("sin at inf", lambda x: sin(x), "sin", INF),
    ("tanh at 1000", lambda x: tanh(x), "tanh", 1000.0),
    ("abs at 0", lambda x: abs(x), "abs", 0.0),
    ("abs at -0.0", lambda x: abs(x), "abs", -0.0),
    ("abs at -2", lambda x: abs(x), "abs", -2.0),
    ("abs at complex 0", lambda z: abs(z), "abs", 0j),
    ("abs at 3-4j", lambda z: abs(z), "abs", 3 - 4j),
    ("abs at nan", lambda x: abs(x), "abs_nan", NAN),
]

TORCH = {
    "sqrt": lambda t, x: t.sqrt(x), "log": lambda t, x: t.log(x),
    "reciprocal": lambda t, x: 1.0 / x, "self_ratio": lambda t, x: x / x,
    "pow-1": lambda t, x: x ** -1, "pow0.5": lambda t, x: x ** 0.5,
    "pow1.5": lambda t, x: x ** 1.5, "pow2": lambda t, x: x ** 2, "pow0": lambda t, x: x ** 0,
    "cbrt_pow": lambda t, x: x ** (1 / 3), "pow400": lambda t, x: x ** 400,
    "exp": lambda t, x: t.exp(x), "sin": lambda t, x: t.sin(x), "tanh": lambda t, x: t.tanh(x),
    "abs": lambda t, x: t.abs(x), "abs_nan": lambda t, x: t.abs(x),
}


def eager_value_and_grad(f, x):
    leaf = Scalar(x, requires_grad=True)
    y = f(leaf)
    grads = y.backward()
    return y.data, grads.get(leaf.key, 0.0)       # no entry: a zero cotangent


def graph_value_and_grad(f, x):
    graph = trace_scalar(f, ["x"], complex_inputs=["x"] if isinstance(x, complex) else [])
    lin = linearize(graph, graph.output_keys, ["x"])
    tr = linear_transpose(lin)
    [y] = evaluate(graph, graph.output_keys, {Input("x"): x})
    [out] = tr.tangent_output_keys
    if out is None:
        return y, 0.0
    [seed_key] = tr.tangent_input_keys
    [g] = evaluate([graph, lin.graph, tr.graph], [out], {Input("x"): x, seed_key: 1.0})
    return y, g


@pytest.mark.parametrize("name, f, oracle, x", CASES, ids=[c[0] for c in CASES])
def test_edge_values_follow_torch(name, f, oracle, x):
    torch = pytest.importorskip("torch", reason="PyTorch is the oracle for edge values")
    dtype = torch.complex128 if isinstance(x, complex) else torch.float64
    leaf = torch.tensor(x, dtype=dtype, requires_grad=True)
    out = TORCH[oracle](torch, leaf)
    [expected_grad] = torch.autograd.grad(out, leaf)
    expected = (out.item(), expected_grad.item())
    if oracle == "abs_nan":
        expected = (NAN, NAN)     # torch: sign(nan) = 0; here NaN propagates (NumPy, JAX)

    for frontend in (eager_value_and_grad, graph_value_and_grad):
        value, grad = frontend(f, x)
        assert same(value, expected[0]), (frontend.__name__, value, expected)
        assert same(grad, expected[1]), (frontend.__name__, grad, expected)
        assert isinstance(value, float)        # a real loss stays real
        assert isinstance(grad, complex if isinstance(x, complex) else float)


JAX = {
    "sqrt": "sqrt", "log": "log", "exp": "exp", "sin": "sin", "tanh": "tanh", "abs": "abs",
}


@pytest.mark.parametrize("name, f, oracle, x",
                         [c for c in CASES if c[2] in JAX], ids=[c[0] for c in CASES
                                                                if c[2] in JAX])
def test_edge_values_against_jax(name, f, oracle, x):
    jax = pytest.importorskip("jax", reason="JAX is the second oracle for edge values")
    jnp = pytest.importorskip("jax.numpy")
    jax.config.update("jax_enable_x64", True)
    fn = getattr(jnp, JAX[oracle])
    value, grad = eager_value_and_grad(f, x)
    assert same(value, complex(fn(x)))
    expected = complex(jax.grad(fn)(x))
    if isinstance(x, complex):
        expected = expected.conjugate()        # jax.grad returns the conjugate of tidu's
    if oracle == "abs" and x == 0 and not isinstance(x, complex):
        # The one disagreement: JAX takes abs'(0) = 1 for real x, PyTorch and tidu 0.
        assert expected == 1.0 and grad == 0.0
        return
    assert same(grad, expected), (grad, expected)


def test_abs_second_derivative_is_zero_at_and_away_from_zero():
    graph = trace_scalar(lambda x: abs(x), ["x"])
    lin = linearize(graph, graph.output_keys, ["x"])
    second = linearize([lin.graph, graph], lin.tangent_output_keys, ["x"])
    [t_key] = lin.tangent_input_keys
    for x in (0.0, -0.0, 2.0, -3.0):
        [h] = evaluate([second.graph, lin.graph, graph], second.tangent_output_keys,
                       {Input("x"): x, t_key: 1.0, second.tangent_input_keys[0]: 1.0})
        assert h == 0.0, (x, h)


def test_complex_abs_second_derivative_matches_torch_and_is_zero_at_zero():
    """The JVP of the gradient of |z| (the gradient transposed, then linearized) against
    ``torch.func.jvp`` of ``torch.func.grad(torch.abs)``: the same convention, so equal."""
    torch = pytest.importorskip("torch", reason="PyTorch is the oracle for abs''")
    from torch.func import grad, jvp

    graph = trace_scalar(lambda z: abs(z), ["z"], complex_inputs=["z"])
    lin = linearize(graph, graph.output_keys, ["z"])
    tr = linear_transpose(lin)
    [seed_key] = tr.tangent_input_keys
    hess = linearize([tr.graph, lin.graph, graph], tr.tangent_output_keys, ["z"])
    for z, v in ((0j, 1 + 0.5j), (3 - 4j, 0.3 - 1.1j), (-1 + 2j, 1j)):
        [g, hv] = evaluate([hess.graph, tr.graph, lin.graph, graph],
                           [*tr.tangent_output_keys, *hess.tangent_output_keys],
                           {Input("z"): z, seed_key: 1.0, hess.tangent_input_keys[0]: v})
        zt, vt = (torch.tensor(w, dtype=torch.complex128) for w in (z, v))
        expected_g, expected_hv = jvp(lambda w: grad(torch.abs)(w), (zt,), (vt,))
        assert abs(g - expected_g.item()) < 1e-12 and abs(hv - expected_hv.item()) < 1e-12, (
            z, g, hv, expected_g, expected_hv)
    assert g != 0 and hv != 0                     # not vacuous away from 0


def test_sign_of_complex_values_and_its_zero():
    assert sign(0.0) == 0.0 and math.copysign(1, sign(-0.0)) == -1 and math.isnan(sign(NAN))
    assert sign(-2.5) == -1.0 and sign(3) == 1.0
    assert sign(0j) == 0j and sign(3 - 4j) == (3 - 4j) / 5


def test_div_or_zero_is_zero_where_the_divisor_is_zero():
    op = ScalarOp.DIV_OR_ZERO
    assert op.eval(None, [1.0, 0.0]) == [0.0] and op.eval(None, [1j, 0j]) == [0j]
    assert op.eval(None, [1.0, 4.0]) == [0.25]
    assert math.isnan(op.eval(None, [1.0, NAN])[0])


def test_python_exceptions_become_ieee_values():
    assert ScalarOp.DIV.eval(None, [1.0, 0.0]) == [INF]
    assert ScalarOp.DIV.eval(None, [-1.0, 0.0]) == [-INF]
    assert ScalarOp.DIV.eval(None, [1.0, -0.0]) == [-INF]
    assert math.isnan(ScalarOp.DIV.eval(None, [0.0, 0.0])[0])
    assert ScalarOp.DIV.eval(None, [1, 0]) == [INF]                  # ints too
    assert same(ScalarOp.DIV.eval(None, [1 + 0j, 0j])[0], complex(INF, NAN))   # as torch
    assert same(ScalarOp.DIV.eval(None, [1 + 1j, 0j])[0], complex(INF, INF))
    assert same(ScalarOp.LOG.eval(None, [0j])[0], complex(-INF, 0.0))
    assert ScalarOp.EXP.eval(None, [1000.0]) == [INF]
    assert same(ScalarOp.EXP.eval(None, [1000 + 1j])[0], complex(INF, INF))
    assert math.isnan(ScalarOp.COS.eval(None, [INF])[0])
    assert ScalarOp.SINCOS.eval(None, [INF]) != ScalarOp.SINCOS.eval(None, [INF])  # nan, nan
    assert Pow(-1).eval(None, [0.0]) == [INF] and Pow(-1).eval(None, [-0.0]) == [-INF]
    assert Pow(401).eval(None, [-10.0]) == [-INF]
    assert math.isnan(Pow(0.5).eval(None, [-4.0])[0])                 # not Python's complex
    assert same(Pow(-1).eval(None, [0j])[0], complex(INF, NAN))       # as torch and JAX
    assert same(Pow(0.5 + 1j).eval(None, [0j])[0], complex(INF, NAN))


def test_sqrt_of_a_zero_scalar_has_an_infinite_derivative():
    """The issue's example: ZeroDivisionError before."""
    x = Scalar(0.0, requires_grad=True)
    assert sqrt(x).backward()[x.key] == INF


# --- hash-consing of parameters ---------------------------------------------------------


def const_key(value):
    return OperationKey(Const(value), (), PRIMARY)


def test_signed_zero_constants_stay_apart():
    assert const_key(0.0) is not const_key(-0.0)
    assert Const(0.0) != Const(-0.0) and Scale(-0.0) != Scale(0.0)
    # one graph holding both: x / (+0.0) and x / (-0.0) keep their signs
    graph = trace_scalar(lambda x: (x * 0.0) + x / -0.0, ["x"])
    consts = [node.operation for node in graph.operations if isinstance(node.operation, Const)]
    assert sorted(math.copysign(1, c.value) for c in consts) == [-1, 1]
    [y] = evaluate(graph, graph.output_keys, {Input("x"): 1.0})
    assert y == -INF
    value, grad = graph_value_and_grad(lambda x: x * 0.0 + x / -0.0, 1.0)
    assert value == -INF and grad == -INF


def test_nan_constants_are_one_node():
    a, b = float("nan"), float("nan")
    assert a is not b
    assert Const(a) == Const(b) and hash(Const(a)) == hash(Const(b))
    assert const_key(a) is const_key(b)
    builder = GraphBuilder()
    assert builder.add_operation(Const(a), []) == builder.add_operation(Const(b), [])


def test_int_float_and_complex_parameters_stay_apart():
    keys = {const_key(1), const_key(1.0), const_key(1 + 0j), const_key(True)}
    assert len(keys) == 4
    assert Pow(2) != Pow(2.0) and Scale(2.0) != Scale(2 + 0j)
    [one] = evaluate(*_const_graph(1 + 0j))
    assert isinstance(one, complex)


def _const_graph(value):
    builder = GraphBuilder()
    builder.add_operation(Const(1.0), [])
    [c] = builder.add_operation(Const(value), [])
    builder.set_outputs([c])
    graph = builder.build()
    return graph, graph.output_keys, {}


def test_eager_op_cache_keeps_a_complex_factor():
    """``Scale(2+0j)`` was served ``Scale(2.0)``'s recorded graph (equal by ``==``)."""
    x = Scalar(1.5, requires_grad=True)
    apply(Scale(2.0), x)
    y = apply(Scale(2 + 0j), x)
    assert isinstance(y.data, complex)
    assert type(y.trace.recorded.primitive.factor) is complex   # the op that ran is recorded
    grad = real(y).backward()[x.key]
    assert grad == 2.0 and isinstance(grad, float)


FLOATS = st.floats(allow_nan=True, allow_infinity=True)


@settings(max_examples=60, deadline=None)
@given(a=FLOATS, b=FLOATS)
@example(a=0.0, b=-0.0)
@example(a=float("nan"), b=-float("nan"))
@example(a=1.5, b=1.5)
def test_constant_keys_are_equal_exactly_when_the_bits_are(a, b):
    exact = (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a)
                                                  == math.copysign(1, b))
    assert (const_key(a) is const_key(b)) == exact
    assert (Const(a) == Const(b)) == exact
    if exact:
        assert hash(Const(a)) == hash(Const(b))


# --- Scalar.backward seeds ----------------------------------------------------------------


def test_seed_none_means_one():
    x = Scalar(0.7, requires_grad=True)
    y = sin(x) * x
    assert y.backward(seed=None)[x.key] == y.backward(seed=1.0)[x.key] == y.backward()[x.key]
    assert y.backward(seed=None)[x.key] == pytest.approx(math.cos(0.7) * 0.7 + math.sin(0.7))
    z = Scalar(1 + 2j, requires_grad=True)
    w = z * z
    assert w.backward(seed=None)[z.key] == w.backward(seed=1.0)[z.key] == 2 * (1 - 2j)


@pytest.mark.parametrize("seed, culprit", [("1", "str"), ([1.0], "list"), (True, "bool"),
                                           (1j, "complex")])
def test_bad_seed_raises_and_backward_still_works(seed, culprit):
    x = Scalar(0.5, requires_grad=True)
    y = x * x
    with pytest.raises(ScalarTypeError, match=culprit):
        y.backward(seed=seed)
    with pytest.raises(ScalarTypeError, match=culprit):
        x.backward(seed=seed)                       # a leaf: no trace, checked all the same
    assert y.backward()[x.key] == 1.0


def test_backward_of_a_scalar_without_grad_raises():
    y = Scalar(2.0) * 3.0
    with pytest.raises(EagerError, match=r"Scalar\(6\.0\)"):
        y.backward()
    x = Scalar(2.0, requires_grad=True)
    assert (x * 3.0).backward()[x.key] == 3.0


def test_scalar_exponent_is_refused_not_dropped():
    x, y = Scalar(2.0, requires_grad=True), Scalar(3.0, requires_grad=True)
    with pytest.raises(ScalarTypeError, match=r"exponent"):
        x ** y
    assert (x ** 3.0).backward()[x.key] == 12.0
