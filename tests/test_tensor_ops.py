"""Every tensor primitive through ``tidu.testing``, and the NumPy-named functions built on them.

- ``check_primitive`` (JVP against central finite differences, dot-product test
  of the transpose) on every op, in float64, float32 (the checker loosens its
  tolerances by precision) and complex128 where the op takes complex values,
  on shapes hypothesis draws, size-0 and size-1 axes and broadcasting included;
- closure: the linearized graph of each op is linearized again (checked against
  finite differences, its transpose by the dot product), and the transposed
  graph too, so every op a rule emits has working rules of its own;
- the API functions agree with NumPy on values and dtypes, and their gradients
  (``primitives.tensor.grad``) agree with finite differences.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primitives import tensor as tnp
from primitives.tensor import numpy as T
from primitives.tensor.buffers import MIN_BYTES
from primitives.tensor.errors import TensorNotSupportedError, TensorShapeError
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.dot import DotGeneral
from primitives.tensor.ops.indexing import Concatenate, Gather, Pad, Rev, ScatterAdd, Slice
from primitives.tensor.ops.reduce import LogSoftmaxLinear, ReduceMax, ReduceMin
from primitives.tensor.ops.constants import Full
from primitives.tensor.ops.elementwise import ComplexAbs, Imag, Maximum, Minimum, Real
from primitives.tensor.ops.select import Compare, Select
from primitives.tensor.ops.shape import BroadcastInDim, ReduceSum, Reshape, Transpose
from tidu import ADRuleError, linear_transpose, linearize
from tidu.graph import GraphBuilder, Input, Local, evaluate
from tidu.testing import CheckUsageError, check_jvp, check_primitive, check_transpose
from tensor_helpers import numeric_grad, ops_run

SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
SEEDS = st.integers(0, 2**32 - 1)
DTYPES = ["float64", "float32", "complex128"]
REAL_DTYPES = ["float64", "float32"]

# --- data -------------------------------------------------------------------------------

SIZES = st.sampled_from([0, 1, 1, 2, 3])
SHAPES = st.lists(SIZES, min_size=0, max_size=3).map(tuple)
NONEMPTY = st.lists(st.integers(1, 3), min_size=0, max_size=3).map(tuple)


def rand(rng, shape, dtype, domain="any"):
    """Random values of ``dtype``; ``positive``: real part >= 0.5; ``nonzero``: |x| >= 0.5."""
    real = rng.standard_normal(shape)
    if domain == "positive":
        real = 0.5 + np.abs(real)
    elif domain == "nonzero":
        real = np.where(real < 0, -0.5, 0.5) + real
    if np.dtype(dtype).kind == "c":
        return (real + 1j * rng.standard_normal(shape)).astype(dtype)
    return real.astype(dtype)


def one_op_graph(op):
    b = GraphBuilder()
    ids = [b.add_input(slot) for slot in range(op.input_count())]
    b.set_outputs(b.add_operation(op, [Local(i) for i in ids]))
    return b.build()


def differentiable(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind in "fc"


def check_closed(op, args, seed):
    """Forward over forward and forward over reverse through ``op``'s rules."""
    rng = np.random.default_rng(seed)
    graph = one_op_graph(op)
    primals = dict(enumerate(args))
    wrt = [k for k, v in primals.items() if differentiable(v)]
    lin = linearize(graph, graph.output_keys, wrt)
    tangent_outputs = [k for k in lin.tangent_output_keys if k is not None]
    if not tangent_outputs:
        return
    first = dict(primals)
    for key, slot in zip(lin.tangent_input_keys, wrt):
        first[key.key] = rand(rng, args[slot].shape, args[slot].dtype)
    check_jvp([lin.graph, graph], tangent_outputs, first, rng=rng)
    second = linearize([lin.graph, graph], tangent_outputs,
                       [k for k, v in first.items() if differentiable(v)])
    check_transpose([lin.graph, graph], second, first, rng=rng)
    transposed = linear_transpose(lin)
    outputs = op.eval(None, list(args))
    backward = dict(primals)
    active = [o for o, t in zip(outputs, lin.tangent_outputs) if t is not None]
    for key, value in zip(transposed.tangent_input_keys, active):
        backward[key.key] = rand(rng, value.shape, value.dtype)
    cotangent_outputs = [k for k in transposed.tangent_output_keys if k is not None]
    check_jvp([transposed.graph, lin.graph, graph], cotangent_outputs, backward, rng=rng)


def check_op(op, *args, seed=0, closed=True, **tolerances):
    """``check_primitive``, then (in double precision) the closure check.

    The checkers' random directions use another stream than the one that drew ``args``.
    """
    seed = (seed + 0x9E3779B9) % 2**32
    check_primitive(op, *args, rng=seed, **tolerances)
    values = list(args) + list(op.eval(None, list(args)))
    if closed and all(not differentiable(v) or v.dtype in (np.float64, np.complex128)
                      for v in values):
        check_closed(op, list(args), seed)


# --- elementwise --------------------------------------------------------------------------

UNARY = {  # op -> (domain, takes complex)
    ew.neg: ("any", True), ew.conj: ("any", True), ew.exp: ("any", True),
    ew.log: ("positive", True), ew.sin: ("any", True), ew.cos: ("any", True),
    ew.tanh: ("any", True), ew.sqrt: ("positive", True), ew.abs_real: ("nonzero", False),
    ew.sign: ("nonzero", False),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(UNARY), ids=lambda op: op.name)
@settings(SETTINGS)
@given(shape=SHAPES, seed=SEEDS)
def test_unary_rules(op, dtype, shape, seed):
    domain, takes_complex = UNARY[op]
    if np.dtype(dtype).kind == "c" and not takes_complex:
        return
    x = rand(np.random.default_rng(seed), shape, dtype, domain)
    check_op(op, x, seed=seed)


BINARY = {ew.add: "any", ew.sub: "any", ew.mul: "any", ew.mul_conj: "any", ew.div: "nonzero"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(BINARY), ids=lambda op: op.name)
@settings(SETTINGS)
@given(shape=SHAPES, seed=SEEDS)
def test_binary_rules(op, dtype, shape, seed):
    rng = np.random.default_rng(seed)
    check_op(op, rand(rng, shape, dtype), rand(rng, shape, dtype, BINARY[op]), seed=seed)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("conjugate", [False, True])
@settings(SETTINGS, max_examples=5)
@given(shape=SHAPES, seed=SEEDS)
def test_tanh_scaled_rules(conjugate, dtype, shape, seed):
    """``t (1 - y²)`` and ``t conj(1 - y²)`` (tanh's tangent and cotangent in one op): JVPs
    in both inputs against finite differences, the transposes by the dot-product test, and
    the graphs they make checked again (second order)."""
    rng = np.random.default_rng(seed)
    t, y = rand(rng, shape, dtype), np.tanh(rand(rng, shape, dtype))
    check_op(ew.TanhScaled(conjugate), t, y, seed=seed)


def test_tanh_scaled_values_in_place_and_into_a_buffer():
    """Into ``t`` or ``y`` (a compiled program's dead inputs) or a new array: the same bits
    as ``t * (1 - y*y)`` for reals, complex ones conjugated with ``conjugate`` (to the last
    bit or so: NumPy's complex products differ in it from one loop to another); the inputs
    of a plain ``eval`` are left alone."""

    def same(got, want):
        assert got.dtype == want.dtype
        if want.dtype.kind == "c":
            np.testing.assert_allclose(got, want, rtol=4e-16, atol=0)
        else:
            assert got.tobytes() == want.tobytes()

    rng = np.random.default_rng(3)
    for dtype in ("float32", "float64", "complex128"):
        t = rand(rng, (64, 1024), dtype)                   # big enough to be written in place
        y = np.tanh(rand(rng, (64, 1024), dtype))
        for conjugate in (False, True):
            factor = 1 - y * y
            want = t * (np.conj(factor) if conjugate else factor)
            op = ew.TanhScaled(conjugate)
            t0, y0 = t.copy(), y.copy()
            [got] = op.eval(None, [t, y])
            same(got, want)
            assert np.array_equal(t, t0) and np.array_equal(y, y0)
            for position in (0, 1):
                inputs = [t.copy(), y.copy()]
                [into] = op.eval_reusing(None, inputs, (position,))
                assert into is inputs[position]
                same(into, want)
    [scalar] = ew.TanhScaled(False).eval(None, [2.0, np.float64(0.5)])   # numbers: 0-d
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and scalar == 1.5



def test_a_tanh_gradient_is_one_op_per_tanh(monkeypatch):
    """``tanh``'s JVP is one ``tanh_scaled`` op (not ``mul(t, 1 - y*y)``): a ``jit``-ed
    gradient runs one op per tanh in its backward half, its ``conjugate`` form."""
    def loss(x):
        return tnp.sum(tnp.tanh(tnp.tanh(x)))

    x = np.linspace(-1.0, 1.0, 5)
    step = tnp.jit(tnp.grad(loss))
    step(x)                                             # traced
    got, ran = ops_run(step, (x,), (ew.TanhScaled, ew.Affine, ew.Binary), monkeypatch)
    inner = np.tanh(x)
    np.testing.assert_allclose(got, (1 - np.tanh(inner) ** 2) * (1 - inner ** 2), rtol=1e-14)
    assert ran == ["tanh_scaled[conjugate=True]"] * 2, ran



def _log_softmax(x, axes):
    if not x.size:
        return x
    shifted = x - np.max(x, axis=axes, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axes, keepdims=True))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("transposed", [False, True])
@settings(SETTINGS, max_examples=5)
@given(shape=SHAPES.filter(len), seed=SEEDS, data=st.data())
def test_log_softmax_linear_rules(transposed, dtype, shape, seed, data):
    """``t - sum(exp(y) t)`` and its transpose ``t - exp(y) sum(t)`` (log_softmax's tangent
    and cotangent maps in one op), over any axes: JVPs in both inputs against finite
    differences, the transposes by the dot-product test, the graphs they make checked
    again (second order)."""
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    rng = np.random.default_rng(seed)
    t, y = rand(rng, shape, dtype), _log_softmax(rand(rng, shape, dtype), axes)
    # In float32, t - exp(y) * sum(t) cancels to about eps * |t|, and the finite differences
    # divide that by a step of ~5e-4 (the checker's noise term sees only the small output):
    # one stored draw was off by 6.7e-5 against an exact JVP
    scale = max(1.0, float(np.max(np.abs(t), initial=0)))
    tolerances = {} if dtype == "float64" else {"atol": 3e-4 * scale}
    check_op(LogSoftmaxLinear(axes, shape, transposed), t, y, seed=seed, **tolerances)


def test_log_softmax_linear_values_in_place_and_into_a_buffer():
    """Into ``t`` or ``y`` (a compiled program's dead inputs) or a new array: the bits of
    the composite it replaces; the inputs of a plain ``eval`` are left alone."""
    rng = np.random.default_rng(4)
    for dtype, shape, axes in (("float32", (256, 128), (1,)), ("float64", (64, 8, 64), (0, 2)),
                               ("float64", (3, 4), (0,))):
        t = rand(rng, shape, dtype)
        y = _log_softmax(rand(rng, shape, dtype), axes)
        p = np.exp(y)
        wants = {False: t - np.sum(t * p, axis=axes, keepdims=True),
                 True: t - p * np.sum(t, axis=axes, keepdims=True)}
        for transposed, want in wants.items():
            op = LogSoftmaxLinear(axes, shape, transposed)
            t0, y0 = t.copy(), y.copy()
            [got] = op.eval(None, [t, y])
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
            assert np.array_equal(t, t0) and np.array_equal(y, y0)
            for position in (0, 1):
                inputs = [t.copy(), y.copy()]
                [into] = op.eval_reusing(None, inputs, (position,))
                assert into.tobytes() == want.tobytes()
                assert (into is inputs[position]) == (t.nbytes >= MIN_BYTES)  # small: new
    [scalar] = LogSoftmaxLinear((), (), True).eval(None, [2.0, np.float64(0.0)])
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and scalar == 0.0


def test_a_log_softmax_gradient_is_one_op(monkeypatch):
    """``log_softmax``'s JVP is one op on real dtypes, so a ``jit``-ed gradient runs one
    ``log_softmax_linear`` (its transposed form) in its backward half: no ``exp``, sum or
    broadcast."""
    w = np.random.default_rng(5).standard_normal((4, 3))

    def loss(x):
        return tnp.sum(tnp.nn.log_softmax(x, axis=1) * w)

    x = np.random.default_rng(6).standard_normal((4, 3))
    step = tnp.jit(tnp.grad(loss))
    step(x)                                             # traced
    got, ran = ops_run(step, (x,), (LogSoftmaxLinear, ew.Unary, ew.Binary, ReduceSum),
                        monkeypatch)
    p = np.exp(_log_softmax(x, 1))
    np.testing.assert_allclose(got, w - p * w.sum(axis=1, keepdims=True), rtol=1e-14)
    # (mul_conj: the loss's own product with w, transposed)
    assert ran == ["mul_conj", "log_softmax_linear[axes=(1,), shape=(4, 3), transposed=True]"], ran

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [ew.Scale(2.5), ew.Scale(-1), ew.Affine(1, 1.5), ew.Affine(-2.0, 0.5), ew.IntegerPow(2),
                                ew.IntegerPow(3), ew.IntegerPow(-2), ew.IntegerPow(0),
                                ew.IntegerPow(1), ew.Pow(2.5), ew.Pow(-0.5)], ids=repr)
@settings(SETTINGS, max_examples=5)
@given(shape=SHAPES, seed=SEEDS)
def test_parametrized_elementwise_rules(op, dtype, shape, seed):
    domain = "positive" if isinstance(op, ew.Pow) else "nonzero"
    check_op(op, rand(np.random.default_rng(seed), shape, dtype, domain), seed=seed)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("scale, offset", [(-1, 1), (-1, -0.0), (1, 0.5), (1, -0.0), (-1, 1e6)])
def test_affine_of_unit_scale_is_one_pass_with_the_bits_of_two(dtype, scale, offset):
    # 1 - x (in arcsin's derivative) is offset - x in one pass; its bits are (x*scale) + offset's
    edges = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 3e-8, 7.0], dtype)
    x = np.tile(edges, (1 << 17) // edges.nbytes + 1)   # big enough to be written in place
    two_passes = np.multiply(x, scale)
    with np.errstate(all="ignore"):
        two_passes += offset
        got = ew.Affine(scale, offset).eval(None, [x])[0]
        reused = ew.Affine(scale, offset).eval_reusing(None, [x.copy()], (0,))[0]  # (in place)
    assert got.dtype == reused.dtype == x.dtype
    assert got.tobytes() == two_passes.tobytes() and reused.tobytes() == two_passes.tobytes()
    assert not np.shares_memory(got, x)


@settings(SETTINGS, max_examples=5)
@given(shape=SHAPES, seed=SEEDS)
def test_complex_scale_rules(shape, seed):
    x = rand(np.random.default_rng(seed), shape, "complex128")
    check_op(ew.Scale(2 - 1j), x, seed=seed)
    check_op(ew.Pow(0.5 + 1j), x + 2.0, seed=seed)


@pytest.mark.parametrize("new, old", [("float32", "float64"), ("float64", "float32"),
                                      ("complex128", "float64"), ("float64", "complex128"),
                                      ("complex64", "complex128"), ("int64", "float64"),
                                      ("float64", "int64")])
@settings(SETTINGS, max_examples=5)
@given(shape=SHAPES, seed=SEEDS)
def test_convert_element_type_rules(new, old, shape, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, shape, old) if np.dtype(old).kind in "fc" else rng.integers(-5, 5, shape)
    single = "float32" in (new, old) or "complex64" in (new, old)
    # check_primitive judges by the inputs' precision; a single-precision output needs more
    # (the op is linear, so a long finite-difference step has no truncation error and
    # keeps float32 rounding small against it)
    tolerances = {"rtol": 1e-3, "atol": 1e-5, "eps": 1e-1} if single else {}
    op = ew.ConvertElementType(new, old)
    if np.dtype(old).kind not in "fc":                      # an integer input has no tangent
        graph = one_op_graph(op)
        assert linearize(graph, graph.output_keys, [0]).tangent_outputs == [None]
        return
    check_op(op, x.astype(old), seed=seed, **tolerances)


def test_integer_inputs_get_no_tangent():
    x = np.arange(6).reshape(2, 3)
    with pytest.raises(CheckUsageError):                    # nothing differentiable to check
        check_primitive(ew.mul, x, x, rng=0)
    graph = one_op_graph(ew.ConvertElementType("float64", "int64"))
    assert linearize(graph, graph.output_keys, [0]).tangent_outputs == [None]
    graph = one_op_graph(ReduceMax((0,), (3,), "int64"))
    assert linearize(graph, graph.output_keys, [0]).tangent_outputs == [None]


# --- shape ops ----------------------------------------------------------------------------


@st.composite
def broadcast_cases(draw):
    out = draw(st.lists(SIZES, min_size=0, max_size=3).map(tuple))
    dims = tuple(sorted(draw(st.sets(st.sampled_from(range(len(out))), max_size=len(out))))) \
        if out else ()
    operand = tuple(draw(st.sampled_from([out[d], 1])) for d in dims)
    return BroadcastInDim(out, dims, operand), operand


@st.composite
def axes_of(draw, shape, nonempty_reduced=False):
    axes = [a for a in range(len(shape)) if draw(st.booleans())]
    if nonempty_reduced:
        axes = [a for a in axes if shape[a] > 0]
    return tuple(axes)


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(data=st.data(), seed=SEEDS)
def test_shape_op_rules(dtype, data, seed):
    rng = np.random.default_rng(seed)
    op, operand = data.draw(broadcast_cases())
    check_op(op, rand(rng, operand, dtype), seed=seed)
    shape = data.draw(SHAPES)
    x = rand(rng, shape, dtype)
    check_op(ReduceSum(data.draw(axes_of(shape)), shape), x, seed=seed)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    check_op(Transpose(perm), x, seed=seed)
    check_op(Reshape(tuple(shape[p] for p in perm), shape), x, seed=seed)
    check_op(Reshape((math.prod(shape),), shape), x, seed=seed)
    check_op(Rev(data.draw(axes_of(shape))), x, seed=seed)


# --- reductions -------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [ReduceMax, ReduceMin])
@pytest.mark.parametrize("dtype", REAL_DTYPES)
@settings(SETTINGS)
@given(data=st.data(), seed=SEEDS)
def test_reduce_extremum_rules(cls, dtype, data, seed):
    shape = data.draw(SHAPES)
    axes = data.draw(axes_of(shape, nonempty_reduced=True))
    rng = np.random.default_rng(seed)
    # distinct values, at least 0.2 apart, so that finite differences never cross a tie
    spaced = rng.permutation(math.prod(shape)).reshape(shape) * 0.25 - 1.0
    x = (spaced + 0.02 * rng.standard_normal(shape)).astype(dtype)
    check_op(cls(axes, shape, dtype), x, seed=seed)


def jvp_of(op, args, tangents):
    """The JVP of a one-op graph, evaluated (tangents: slot -> direction)."""
    graph = one_op_graph(op)
    lin = linearize(graph, graph.output_keys, list(tangents))
    values = {Input(k): v for k, v in enumerate(args)}
    values.update({key: tangents[slot] for key, slot in zip(lin.tangent_input_keys, tangents)})
    return evaluate([lin.graph, graph], lin.tangent_output_keys, values)[0]


def test_reduce_max_ties_split_the_tangent_evenly():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    t = np.array([[10.0, 1.0, 2.0], [3.0, 6.0, 9.0]])
    np.testing.assert_allclose(jvp_of(ReduceMax((1,), (2, 3), "float64"), [x], {0: t}),
                               [1.5, 6.0])
    np.testing.assert_allclose(jvp_of(ReduceMin((0, 1), (2, 3), "float64"), [x], {0: t}),
                               10.0)
    # as JAX: the gradient of max at a tie is shared
    np.testing.assert_allclose(tnp.grad(lambda v: T.max(v))(np.array([1.0, 3.0, 3.0])),
                               [0.0, 0.5, 0.5])


# --- dot_general ----------------------------------------------------------------------------


@st.composite
def dot_cases(draw):
    counts = [draw(st.integers(0, 2)) for _ in range(4)]       # batch, contract, lhs, rhs free
    labels = {kind: [f"{kind}{i}" for i in range(n)] for kind, n in zip("bclr", counts)}
    size = {label: draw(SIZES) for group in labels.values() for label in group}
    lhs = draw(st.permutations(labels["b"] + labels["c"] + labels["l"]))
    rhs = draw(st.permutations(labels["b"] + labels["c"] + labels["r"]))
    contract = draw(st.permutations(labels["c"]))
    batch = draw(st.permutations(labels["b"]))
    dims = ((tuple(lhs.index(c) for c in contract), tuple(rhs.index(c) for c in contract)),
            (tuple(lhs.index(b) for b in batch), tuple(rhs.index(b) for b in batch)))
    spec = ("".join(chr(97 + sorted(size).index(a)) for a in lhs) + ","
            + "".join(chr(97 + sorted(size).index(a)) for a in rhs) + "->"
            + "".join(chr(97 + sorted(size).index(a)) for a in batch
                      + [a for a in lhs if a[0] == "l"] + [a for a in rhs if a[0] == "r"]))
    return dims, tuple(size[a] for a in lhs), tuple(size[a] for a in rhs), spec


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS, max_examples=40)
@given(case=dot_cases(), seed=SEEDS)
def test_dot_general_rules(dtype, case, seed):
    dims, lhs_shape, rhs_shape, spec = case
    rng = np.random.default_rng(seed)
    x, y = rand(rng, lhs_shape, dtype), rand(rng, rhs_shape, dtype)
    op = DotGeneral(dims, lhs_shape, rhs_shape, dtype)
    [out] = op.eval(None, [x, y])
    assert out.shape == op.out_shape() and out.dtype == np.dtype(dtype)
    np.testing.assert_allclose(out, np.einsum(spec, x, y), rtol=1e-5, atol=1e-5)
    check_op(op, x, y, seed=seed)


@pytest.mark.parametrize("dims, lhs_shape, rhs_shape, spec", [
    ((((1,), (1,)), ((), ())), (5, 3), (4, 3), "ik,jk->ij"),        # x @ y.T
    ((((0,), (0,)), ((), ())), (3, 5), (3, 4), "ki,kj->ij"),        # x.T @ y
    ((((2,), (2,)), ((0,), (0,))), (2, 5, 3), (2, 4, 3), "bik,bjk->bij"),
    ((((1,), (0,)), ((), ())), (5, 3), (3, 4), "ik,kj->ij"),        # x @ y: no swap needed
])
def test_dot_general_cotangents_come_out_in_the_operands_layout(dims, lhs_shape, rhs_shape,
                                                                spec):
    """Each cotangent is one product, its operands in the order that gives the operand's own
    layout: no transpose op, and no transposed view for the ops after it to read strided."""
    op = DotGeneral(dims, lhs_shape, rhs_shape, "float64")
    graph = one_op_graph(op)
    lin = linearize(graph, graph.output_keys, [0, 1])
    tr = linear_transpose(lin)
    assert not any(isinstance(node.operation, Transpose) for node in tr.graph.operations)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(lhs_shape), rng.standard_normal(rhs_shape)
    ct = rng.standard_normal(op.out_shape())
    values = {Input(0): x, Input(1): y, tr.tangent_input_keys[0]: ct}
    gx, gy = evaluate([graph, lin.graph, tr.graph], tr.tangent_output_keys, values)
    lhs, rest = spec.split(",")
    rhs, out = rest.split("->")
    np.testing.assert_allclose(gx, np.einsum(f"{out},{rhs}->{lhs}", ct, y), rtol=1e-12)
    np.testing.assert_allclose(gy, np.einsum(f"{lhs},{out}->{rhs}", x, ct), rtol=1e-12)
    assert gx.flags.c_contiguous and gy.flags.c_contiguous


def test_second_derivatives_through_a_transposed_weight_agree_in_every_order():
    """``h @ W.T``'s cotangents are made without a transpose now: Hessian-vector products by
    every composition (reverse over reverse, forward over reverse, under jit and vmap, eager
    create_graph) agree with each other and with finite differences of the gradient."""
    from primitives.tensor import autograd

    rng = np.random.default_rng(0)
    a, w, v = (rng.standard_normal(s) for s in ((5, 3), (4, 3), (4, 3)))

    def f(w):
        return tnp.sum(tnp.tanh(tnp.matmul(a, w.T)) ** 2)

    def grad_at(w):
        return np.asarray(tnp.grad(f)(w))

    eps = 1e-5
    want = (grad_at(w + eps * v) - grad_at(w - eps * v)) / (2 * eps)
    forward_over_reverse = tnp.jvp(tnp.grad(f), (w,), (v,))[1]
    reverse_over_reverse = tnp.grad(lambda w: tnp.sum(tnp.grad(f)(w) * v))(w)
    jitted = tnp.jit(lambda w: tnp.jvp(tnp.grad(f), (w,), (v,))[1])(w)
    batched = tnp.vmap(lambda u: tnp.jvp(tnp.grad(f), (w,), (u,))[1])(np.stack([v, 2 * v]))
    hessian = np.einsum("ijkl,kl->ij", tnp.jacfwd(tnp.grad(f))(w), v)
    hessian_rev = np.einsum("ijkl,kl->ij", tnp.jacrev(tnp.grad(f))(w), v)
    wt = tnp.tensor(w, requires_grad=True)
    (g,) = autograd.grad(f(wt), [wt], create_graph=True)
    (eager,) = autograd.grad(tnp.sum(g * v), [wt])
    for got in (forward_over_reverse, reverse_over_reverse, jitted, batched[1] / 2, hessian,
                hessian_rev, eager.data):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(forward_over_reverse, reverse_over_reverse, rtol=1e-12)


def test_dot_general_without_dtype_conjugates_complex_operands():
    rng = np.random.default_rng(0)
    x, y = rand(rng, (2, 3), "complex128"), rand(rng, (3, 4), "complex128")
    check_op(DotGeneral((((1,), (0,)), ((), ())), (2, 3), (3, 4)), x, y)


# --- select, comparisons, extrema, complex parts ------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(shape=SHAPES, seed=SEEDS)
def test_select_rules(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    pred = rng.random(shape) < 0.5
    check_op(Select(shape, dtype), pred, rand(rng, shape, dtype), rand(rng, shape, dtype),
             seed=seed)


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare_eval_and_no_tangent(name):
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 3, (4, 5)).astype(float), rng.integers(0, 3, (4, 5)).astype(float)
    [out] = Compare(name).eval(None, [x, y])
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, getattr(np, {"eq": "equal", "ne": "not_equal",
                                                    "lt": "less", "le": "less_equal",
                                                    "gt": "greater",
                                                    "ge": "greater_equal"}[name])(x, y))
    graph = one_op_graph(Compare(name))
    assert linearize(graph, graph.output_keys, [0, 1]).tangent_outputs == [None]
    with pytest.raises(ValueError, match="unknown comparison"):
        Compare("lessish")


@pytest.mark.parametrize("cls", [Maximum, Minimum])
@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(shape=SHAPES, seed=SEEDS)
def test_maximum_minimum_rules(cls, dtype, shape, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, shape, dtype)
    y = x + rand(rng, shape, dtype, "nonzero")      # no near-ties for the finite differences
    check_op(cls(dtype), x, y, seed=seed)


def test_maximum_ties_split_evenly():
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([1.0, 5.0, 0.0])
    t = jvp_of(Maximum("float64"), [x, y], {0: np.ones(3), 1: 10 * np.ones(3)})
    np.testing.assert_allclose(t, [5.5, 10.0, 1.0])
    t = jvp_of(Minimum("float64"), [x, y], {0: np.ones(3)})
    np.testing.assert_allclose(t, [0.5, 1.0, 0.0])
    np.testing.assert_allclose(tnp.grad(lambda v: T.sum(T.maximum(v, v)))(x), [1.0] * 3)


@settings(SETTINGS)
@given(shape=SHAPES, seed=SEEDS)
def test_complex_part_rules(shape, seed):
    rng = np.random.default_rng(seed)
    for dtype in ("complex128", "complex64"):
        z = rand(rng, shape, dtype, "positive")                 # |z| >= 0.5
        check_op(ComplexAbs(dtype), z, seed=seed)
        check_op(Real(dtype), z, seed=seed)
        check_op(Imag(dtype), z, seed=seed)


def test_full_is_a_constant():
    [out] = Full((2, 3), "float32").eval(None, [])
    assert out.dtype == np.float32 and out.shape == (2, 3) and not out.any()
    assert Full((2,), "complex128", 1.5).eval(None, [])[0].tolist() == [1.5, 1.5]
    assert Full((2,), "float64") == Full((2,), "float64")
    assert hash(Full((2,), "float64")) == hash(Full((2,), "float64"))


# --- slicing, padding, concatenation, gather/scatter ----------------------------------------


@st.composite
def slice_cases(draw):
    shape = draw(SHAPES)
    starts, limits, strides = [], [], []
    for n in shape:
        start = draw(st.integers(0, n))
        starts.append(start)
        limits.append(draw(st.integers(start, n)))
        strides.append(draw(st.integers(1, 3)))
    return Slice(tuple(starts), tuple(limits), tuple(strides), shape)


@st.composite
def pad_cases(draw):
    shape = draw(SHAPES)
    lows = tuple(draw(st.integers(0, 2)) for _ in shape)
    highs = tuple(draw(st.integers(0, 2)) for _ in shape)
    interiors = tuple(draw(st.integers(0, 2)) for _ in shape)
    return Pad(lows, highs, interiors, shape)


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(data=st.data(), seed=SEEDS)
def test_slice_and_pad_rules(dtype, data, seed):
    rng = np.random.default_rng(seed)
    op = data.draw(slice_cases())
    x = rand(rng, op.shape, dtype)
    [out] = op.eval(None, [x])
    assert out.shape == op.out_shape()
    check_op(op, x, seed=seed)
    op = data.draw(pad_cases())
    x = rand(rng, op.shape, dtype)
    [out] = op.eval(None, [x])
    assert out.shape == op.out_shape() and out.dtype == x.dtype
    check_op(op, x, seed=seed)


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(data=st.data(), seed=SEEDS)
def test_concatenate_rules(dtype, data, seed):
    rng = np.random.default_rng(seed)
    shape = data.draw(st.lists(SIZES, min_size=1, max_size=3).map(tuple))
    axis = data.draw(st.integers(0, len(shape) - 1))
    shapes = tuple(shape[:axis] + (data.draw(SIZES),) + shape[axis + 1:]
                   for _ in range(data.draw(st.integers(1, 3))))
    xs = [rand(rng, s, dtype) for s in shapes]
    op = Concatenate(axis, shapes, dtype)
    np.testing.assert_array_equal(op.eval(None, xs)[0], np.concatenate(xs, axis))
    check_op(op, *xs, seed=seed)


def test_concatenate_with_a_constant_operand():
    rng = np.random.default_rng(1)
    x, y = rand(rng, (2, 3), "float64"), rand(rng, (2, 1), "float64")
    graph = one_op_graph(Concatenate(1, ((2, 3), (2, 1)), "float64"))
    lin = linearize(graph, graph.output_keys, [0])            # operand 1 held constant
    check_jvp(graph, graph.output_keys, {0: x, 1: y}, {0: rand(rng, (2, 3), "float64")})
    check_transpose(graph, lin, {0: x, 1: y}, rng=0)


@st.composite
def gather_cases(draw):
    shape = draw(st.lists(SIZES, min_size=1, max_size=3).map(tuple))
    axis = draw(st.integers(0, len(shape) - 1))
    index_shape = draw(st.lists(SIZES, min_size=0, max_size=2).map(tuple))
    if shape[axis] == 0 and math.prod(index_shape) != 0:
        index_shape = index_shape + (0,)
    return axis, shape, index_shape


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS)
@given(case=gather_cases(), seed=SEEDS)
def test_gather_and_scatter_add_rules(dtype, case, seed):
    axis, shape, index_shape = case
    rng = np.random.default_rng(seed)
    index = rng.integers(0, max(shape[axis], 1), index_shape)   # repeats likely
    x = rand(rng, shape, dtype)
    gather = Gather(axis, shape, index_shape)
    [out] = gather.eval(None, [x, index])
    np.testing.assert_array_equal(out, np.take(x, index, axis))
    check_op(gather, x, index, seed=seed)
    scatter = ScatterAdd(axis, shape, index_shape)
    updates = rand(rng, out.shape, dtype)
    [summed] = scatter.eval(None, [updates, index])
    expected = np.zeros(shape, dtype)
    np.add.at(expected, (slice(None),) * axis + (index,), updates)
    np.testing.assert_allclose(summed, expected)
    check_op(scatter, updates, index, seed=seed)


def test_nonlinear_transposes_are_refused():
    from tidu.graph import Linearized
    matmul = DotGeneral((((1,), (0,)), ((), ())), (2, 2), (2, 2))
    with pytest.raises(ADRuleError):          # bilinear, not linear in both at once
        matmul.transpose_rule(GraphBuilder(), [0], [None, None], Linearized((True, True)), None)
    for op in (Maximum("float64"), Compare("lt"), ComplexAbs("complex128"),
               ReduceMax((0,), (2,), "float64")):
        with pytest.raises(ADRuleError):
            op.transpose_rule(GraphBuilder(), [0], [None] * op.input_count(),
                              Linearized((True,) * op.input_count()), None)


# --- the NumPy-named functions: values and dtypes -----------------------------------------


RNG = np.random.default_rng(1234)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((4, 5))
C = RNG.standard_normal((2, 3, 4))
D = RNG.standard_normal((2, 4, 5))

VALUE_CASES = {
    "matmul": (lambda m: m.matmul(A, B), lambda: np.matmul(A, B)),
    "matmul_vec": (lambda m: m.matmul(A[0], B), lambda: np.matmul(A[0], B)),
    "matmul_batched": (lambda m: m.matmul(C, B), lambda: np.matmul(C, B)),
    "matmul_broadcast": (lambda m: m.matmul(A, D), lambda: np.matmul(A, D)),
    "dot": (lambda m: m.dot(C, B), lambda: np.dot(C, B)),
    "dot_vec": (lambda m: m.dot(A[0], A[1]), lambda: np.dot(A[0], A[1])),
    "tensordot": (lambda m: m.tensordot(C, D, ([0, 2], [0, 1])),
                  lambda: np.tensordot(C, D, ([0, 2], [0, 1]))),
    "einsum_mm": (lambda m: m.einsum("ij,jk->ik", A, B), lambda: np.einsum("ij,jk->ik", A, B)),
    "einsum_bmm": (lambda m: m.einsum("bij,bjk->bik", C, D),
                   lambda: np.einsum("bij,bjk->bik", C, D)),
    "einsum_inner": (lambda m: m.einsum("i,i->", A[0], A[1]),
                     lambda: np.einsum("i,i->", A[0], A[1])),
    "einsum_three": (lambda m: m.einsum("ij,jk,kl", A, B, B.T),
                     lambda: np.einsum("ij,jk,kl", A, B, B.T)),
    "einsum_trace": (lambda m: m.einsum("ii", A[:, :3]), lambda: np.einsum("ii", A[:, :3])),
    "einsum_ellipsis": (lambda m: m.einsum("...ij,...jk", C, B),
                        lambda: np.einsum("...ij,...jk", C, B)),
    "max": (lambda m: m.max(C, axis=(0, 2), keepdims=True),
            lambda: np.max(C, axis=(0, 2), keepdims=True)),
    "min": (lambda m: m.min(C, axis=-1), lambda: np.min(C, axis=-1)),
    "maximum": (lambda m: m.maximum(A, A[0]), lambda: np.maximum(A, A[0])),
    "minimum": (lambda m: m.minimum(A, 0.0), lambda: np.minimum(A, 0.0)),
    "where": (lambda m: m.where(A > 0, A, B.T[:3]), lambda: np.where(A > 0, A, B.T[:3])),
    "abs": (lambda m: m.abs(A * (1 + 2j)), lambda: np.abs(A * (1 + 2j))),
    "sign": (lambda m: m.sign(A), lambda: np.sign(A)),
    "sign_complex": (lambda m: m.sign(np.array([0, 3 + 4j])), lambda: np.sign(np.array([0, 3 + 4j]))),
    "real": (lambda m: m.real(A * (1 + 2j)), lambda: np.real(A * (1 + 2j))),
    "imag": (lambda m: m.imag(A * (1 + 2j)), lambda: np.imag(A * (1 + 2j))),
    "imag_real": (lambda m: m.imag(A), lambda: np.imag(A)),
    "less": (lambda m: m.less(A, 0.1), lambda: np.less(A, 0.1)),
    "equal": (lambda m: m.equal(A, A[1]), lambda: np.equal(A, A[1])),
    "concatenate": (lambda m: m.concatenate([A, B.T, A[:1]], axis=0),
                    lambda: np.concatenate([A, B.T, A[:1]], axis=0)),
    "concatenate_none": (lambda m: m.concatenate([A, B], axis=None),
                         lambda: np.concatenate([A, B], axis=None)),
    "stack": (lambda m: m.stack([A, A], axis=-1), lambda: np.stack([A, A], axis=-1)),
    "pad": (lambda m: m.pad(A, ((1, 2), (0, 3))), lambda: np.pad(A, ((1, 2), (0, 3)))),
    "pad_value": (lambda m: m.pad(A, 1, constant_values=2.5),
                  lambda: np.pad(A, 1, constant_values=2.5)),
    "squeeze": (lambda m: m.squeeze(A[None, :, None]), lambda: np.squeeze(A[None, :, None])),
    "expand_dims": (lambda m: m.expand_dims(A, (0, 3)), lambda: np.expand_dims(A, (0, 3))),
    "take": (lambda m: m.take(A, [2, 0, -1], axis=1), lambda: np.take(A, [2, 0, -1], axis=1)),
}


@pytest.mark.parametrize("name", list(VALUE_CASES))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_api_values_match_numpy(name, dtype):
    ours, theirs = VALUE_CASES[name]
    global A, B, C, D
    saved = A, B, C, D
    try:
        A, B, C, D = (v.astype(dtype) for v in saved)
        expected = theirs()
        got = ours(T)
        assert np.shape(got) == expected.shape
        assert np.asarray(got).dtype == expected.dtype, (np.asarray(got).dtype, expected.dtype)
        tol = 1e-12 if dtype == "float64" else 1e-5
        np.testing.assert_allclose(np.asarray(got), expected, rtol=tol, atol=tol)
        eager = ours(tnp)                                   # same functions on Tensors
        eager_value = T.stop_gradient(eager)
        np.testing.assert_allclose(eager_value, expected, rtol=tol, atol=tol)
    finally:
        A, B, C, D = saved


def test_logsumexp_is_stable_and_matches():
    x = np.array([[1000.0, 1000.0], [-1000.0, -np.inf], [1.0, 2.0]])
    expected = np.array([1000 + np.log(2), -1000.0, np.log(np.e + np.e ** 2)])
    np.testing.assert_allclose(T.logsumexp(x, axis=1), expected)
    assert T.logsumexp(x.astype(np.float32), axis=1).dtype == np.float32
    assert T.logsumexp(x, axis=1, keepdims=True).shape == (3, 1)
    with np.errstate(divide="ignore"):                        # log(0), as in NumPy
        assert T.logsumexp(np.full((2, 0), 1.0), axis=1).tolist() == [-np.inf, -np.inf]
        assert np.isneginf(T.logsumexp(np.array([-np.inf, -np.inf])))


def _logsumexp_steps(x, axes):
    """The log-sum-exp the op computes, step by step in NumPy: the reference for its values."""
    shift = np.max(x, axis=axes, keepdims=True)
    shift = np.where(np.isfinite(shift), shift, np.zeros_like(shift))
    total = np.sum(np.exp(x - shift), axis=axes, keepdims=True)
    return np.reshape(np.log(total) + shift, [n for i, n in enumerate(x.shape) if i not in axes])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       dtype=st.sampled_from(["float16", "float32", "float64"]), data=st.data())
def test_logsumexp_values_are_its_steps_bit_for_bit(shape, dtype, data):
    from primitives.tensor.ops.reduce import ReduceLogSumExp
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1)))))
    special = st.sampled_from([np.inf, -np.inf, np.nan, 6e4, -6e4, 1e300])
    values = data.draw(st.lists(st.one_of(st.floats(-50, 50), special),
                                min_size=math.prod(shape), max_size=math.prod(shape)))
    with np.errstate(all="ignore"):
        x = np.array(values, dtype=dtype).reshape(shape)
        [got] = ReduceLogSumExp(axes, tuple(shape), dtype).eval(None, [x])
        want = _logsumexp_steps(x, axes)
    assert got.dtype == x.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)                  # NaN where the steps give NaN
    assert not np.shares_memory(got, x)


@settings(max_examples=40, deadline=None)
@given(rows=st.sampled_from([[64], [100], [257], [8, 9], [3, 40]]), length=st.integers(2, 40),
       dtype=st.sampled_from(["float32", "float64", "int32", "int64", "uint32", "float16",
                              "int8"]),
       seed=st.integers(0, 2**32 - 1), transposed=st.booleans())
def test_max_min_and_logsumexp_over_many_short_rows_are_numpys(rows, length, dtype, seed,
                                                               transposed):
    """Many short rows are reduced on a copy with the row axis first (a faster NumPy loop):
    the extrema are NumPy's, NaN and infinities included, and logsumexp is its steps'
    bit for bit, on and off that path."""
    from primitives.tensor.ops.reduce import (ReduceLogSumExp, ReduceMax, ReduceMin,
                                              _many_short_rows, _numpy_extremum)
    rng = np.random.default_rng(seed)
    shape = (*rows, length)
    if np.dtype(dtype).kind == "f":
        pool = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.25, 6e4], dtype=dtype)
        x = np.where(rng.random(shape) < 0.05, rng.choice(pool, shape),
                     rng.standard_normal(shape) * 10).astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    if transposed:                                   # F-ordered: NumPy's loop is fast already
        x = np.asfortranarray(x)
    last = x.ndim - 1
    fast = _many_short_rows(x, (last,))
    assert fast == (not transposed and math.prod(rows) >= 64 and length <= 32
                    and dtype not in ("float16", "int8"))
    for ufunc, op, reference in ((np.maximum, ReduceMax, np.max), (np.minimum, ReduceMin, np.min)):
        want = reference(x, axis=last)
        got = _numpy_extremum(ufunc, x, (last,))
        np.testing.assert_array_equal(got, want)        # NaN where NumPy gives NaN
        assert got.dtype == want.dtype and got.shape == want.shape
        [from_op] = op((last,), shape, dtype).eval(None, [x])
        np.testing.assert_array_equal(from_op, want)
        assert not np.shares_memory(from_op, x)
    if np.dtype(dtype).kind == "f":
        with np.errstate(all="ignore"):
            [got] = ReduceLogSumExp((last,), shape, dtype).eval(None, [x])
            want = _logsumexp_steps(x, (last,))
        np.testing.assert_array_equal(got, want)


def test_logsumexp_of_big_finite_values_raises_no_floating_point_error():
    from primitives.tensor.ops.reduce import ReduceLogSumExp
    x = np.full((4, 2), 6e4, np.float16)          # the maxima sum past float16's range
    with np.errstate(all="raise"):
        [got] = ReduceLogSumExp((1,), (4, 2), "float16").eval(None, [x])
    np.testing.assert_array_equal(got, np.float16(6e4) + np.log(np.float16(2)))


GETITEM_KEYS = [
    (slice(1, 3), slice(None, None, 2)), ([0, 2],), (None, Ellipsis, 0), (slice(None, None, -1),),
    (slice(None, None, -2), 1), (0, slice(None), [1, 2]), ([0, 1], [1, 2]),
    ([[0], [1]], slice(None), [1, 2]), (slice(None), [0, 3], [1, 2]), (Ellipsis, [1, -1]),
    (1, None, [0, 1], None), (slice(5, 1, -1),), (slice(3, 3),), (-1, -2, -3), (np.array(1),),
    ([],), (slice(None), [], []), ([0, 1], None, [1, 2]), (None, [0, 1], [1, 2]), (),
    (Ellipsis,), (slice(-100, 100),), (np.array([[True, False, True, False, True]] * 4),),
    (slice(None), 0, Ellipsis, [0, 2]),      # an (empty) ellipsis separates advanced indices
]


@pytest.mark.parametrize("key", GETITEM_KEYS, ids=repr)
def test_getitem_matches_numpy(key):
    x = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    expected = x[key]
    got = T.getitem(x, key)
    assert np.shape(got) == expected.shape and np.asarray(got).dtype == np.float32
    np.testing.assert_array_equal(got, expected)
    # the gradient of x[key] is scatter-add of the seed (np.add.at)
    t = tnp.tensor(x.astype(np.float64), requires_grad=True)
    seed = np.random.default_rng(0).standard_normal(expected.shape)
    reference = np.zeros(x.shape)
    np.add.at(reference, key, seed)
    np.testing.assert_allclose(t[key].backward(seed).grad(t), reference)


@st.composite
def index_keys(draw):
    shape = draw(st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple))
    key, axis = [], 0
    ellipsis_used = False
    while axis < len(shape) and draw(st.booleans()) or draw(st.integers(0, 4)) == 0:
        kind = draw(st.sampled_from(["slice", "int", "array", "none", "ellipsis"]))
        if kind == "none":
            key.append(None)
            continue
        if kind == "ellipsis":
            if not ellipsis_used:       # (later entries then index the last axes; an int out of
                key.append(Ellipsis)    # their range makes both NumPy and us raise IndexError)
                ellipsis_used = True
            continue
        if axis >= len(shape):
            break
        n = shape[axis]
        if kind == "slice":
            key.append(slice(draw(st.one_of(st.none(), st.integers(-5, 5))),
                             draw(st.one_of(st.none(), st.integers(-5, 5))),
                             draw(st.sampled_from([None, 1, 2, -1, -2, 3]))))
        elif kind == "int" and n > 0:
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "array" and n > 0:
            index_shape = draw(st.sampled_from([(), (2,), (1, 2), (0,)]))
            key.append(np.asarray(draw(st.lists(st.integers(-n, n - 1), min_size=math.prod(
                index_shape), max_size=math.prod(index_shape))), dtype=int).reshape(index_shape))
        else:
            key.append(slice(None))
        axis += 1
    return shape, tuple(key)


@settings(SETTINGS, max_examples=100)
@given(case=index_keys(), seed=SEEDS)
def test_getitem_random_keys_match_numpy(case, seed):
    shape, key = case
    x = np.random.default_rng(seed).standard_normal(shape)
    try:
        expected = x[key]
    except IndexError:
        with pytest.raises(IndexError):
            T.getitem(x, key)
        return
    got = T.getitem(x, key)
    assert np.shape(got) == expected.shape
    np.testing.assert_array_equal(got, expected)
    seed_ct = np.random.default_rng(seed + 1).standard_normal(expected.shape)
    reference = np.zeros(shape)
    np.add.at(reference, key, seed_ct)
    _, vjp_fn = tnp.vjp(lambda v: T.getitem(v, key), x)
    np.testing.assert_allclose(vjp_fn(seed_ct)[0], reference)


@settings(SETTINGS, max_examples=30)
@given(case=dot_cases(), seed=SEEDS)
def test_einsum_random_two_operand_specs(case, seed):
    _, lhs_shape, rhs_shape, spec = case
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(lhs_shape), rng.standard_normal(rhs_shape)
    expected = np.einsum(spec, x, y)
    got = T.einsum(spec, x, y)
    assert np.shape(got) == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-12)
    ct = rng.standard_normal(expected.shape)
    gx, gy = tnp.vjp(lambda a, b: T.einsum(spec, a, b), x, y)[1](ct)
    # <ct, einsum(x, y)> is linear in each operand: its gradient is exact under differences
    np.testing.assert_allclose(gx, numeric_grad(lambda a: np.sum(ct * np.einsum(spec, a, y)), x),
                               atol=1e-6)
    np.testing.assert_allclose(gy, numeric_grad(lambda b: np.sum(ct * np.einsum(spec, x, b)), y),
                               atol=1e-6)


def test_getitem_errors():
    x = tnp.tensor(np.zeros((2, 3)))
    with pytest.raises(IndexError, match="out of bounds"):
        x[2]
    with pytest.raises(IndexError, match="out of bounds"):
        x[:, [0, 3]]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError, match="broadcast"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="valid indices"):
        x[0.5]


# --- gradients of compositions ---------------------------------------------------------------

W1 = RNG.standard_normal((4, 6))
W2 = RNG.standard_normal((6, 3))

GRAD_CASES = {
    "matmul_chain": lambda x: T.sum(T.tanh(T.tanh(x @ W1) @ W2) * np.arange(3.0)),
    "matmul_vector": lambda x: T.sum(T.matmul(x[0], W1) ** 2) + T.dot(x[1], x[2]),
    "rmatmul": lambda x: T.sum(W1.T @ x.T),
    "einsum_mm": lambda x: T.sum(T.sin(T.einsum("ij,jk->ik", x, W1))),
    "einsum_bmm": lambda x: T.sum(T.einsum("bij,bjk->bik", T.reshape(x, (3, 1, 4)),
                                           T.reshape(W1[:, :3].T, (3, 4, 1))) ** 2),
    "einsum_inner": lambda x: T.einsum("i,i->", x[0], x[1]),
    "einsum_diag": lambda x: T.einsum("ii->", x[:, :3] * x[:, 1:]),
    "slices": lambda x: T.sum(x[1:3, ::2] ** 2) + T.sum(x[::-1, -1] * np.arange(3.0)),
    "fancy": lambda x: T.sum(x[[0, 2, 2]] * W1.T[:3]) + T.sum(x[[0, 1], [3, 3]] ** 3),
    "none_ellipsis": lambda x: T.sum(x[None, ..., 0] * np.arange(3.0)),
    "where": lambda x: T.sum(T.where(x > 0, x ** 2, T.sin(x))),
    "max_all": lambda x: T.max(x) + T.min(x, axis=0) @ np.arange(4.0),
    "maximum": lambda x: T.sum(T.maximum(x, 0.2) * T.minimum(x, x[0])),
    "logsumexp": lambda x: T.logsumexp(x * 30, axis=1) @ np.arange(3.0),
    "logsumexp_all": lambda x: T.logsumexp(x),
    "concatenate_pad": lambda x: T.sum(T.concatenate([x, x ** 2], 1)
                                       * T.pad(x, ((0, 0), (2, 2)))),
    "abs_sign": lambda x: T.sum(abs(x) * T.sign(x + 0.1)),
    "complex_path": lambda x: T.sum(T.abs(T.einsum("ij,jk->ik", x * (1 + 2j), W1 * (1 - 1j))))
    + T.sum(T.real(x * 1j) * T.imag(x * (2 + 1j))),
    "sign_complex": lambda x: T.sum(T.real(T.sign(x * (1 + 1j) + 0.5j)) * np.arange(4.0)),
    "squeeze_expand": lambda x: T.sum(T.squeeze(T.expand_dims(x, 0)) ** 2),
    "stack_take": lambda x: T.sum(T.stack([x, 2 * x]) * 1.5) + T.sum(T.take(x, [1, 1], 1)),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_api_gradients_match_finite_differences(name):
    f = GRAD_CASES[name]
    x = RNG.standard_normal((3, 4))
    g = tnp.grad(f)(x)
    assert g.shape == x.shape and g.dtype == np.float64
    np.testing.assert_allclose(g, numeric_grad(f, x), rtol=1e-6, atol=1e-7)
    t = tnp.tensor(x, requires_grad=True)
    np.testing.assert_allclose(f(t).backward().grad(t), g, rtol=1e-12, atol=1e-12)


def test_max_with_ties_shares_the_gradient():
    # not differentiable at ties; the gradient is split evenly among the tied maxima (JAX)
    x = np.array([[0.5, 0.5, 0.2], [1.0, 1.0, 1.0], [0.0, 2.0, 1.0]])
    f = lambda v: T.sum(T.max(v, axis=1) * np.array([2.0, 3.0, 1.0]))
    expected = [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0]]
    np.testing.assert_allclose(tnp.grad(f)(x), expected)
    t = tnp.tensor(x, requires_grad=True)
    np.testing.assert_allclose(f(t).backward().grad(t), expected)
    np.testing.assert_allclose(tnp.grad(lambda v: T.max(v))(x), np.where(x == 2.0, 1.0, 0.0))


def test_float32_gradients_stay_float32():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    w = W1.astype(np.float32)
    f = lambda v: T.sum(T.logsumexp(T.einsum("ij,jk->ik", v, w), axis=1)) + T.sum(
        T.max(v[1:, ::2], axis=0)) + T.sum(T.where(v > 0, v, 0.0)) + T.sum(
        T.concatenate([v, v[[0]]]) ** 2) + T.sum(T.pad(v @ w, 1))
    assert f(x).dtype == np.float32
    g = tnp.grad(f)(x)
    assert g.dtype == np.float32
    # the same function in double precision (its gradient checked above by finite differences)
    f64 = lambda v: T.sum(T.logsumexp(T.einsum("ij,jk->ik", v, W1), axis=1)) + T.sum(
        T.max(v[1:, ::2], axis=0)) + T.sum(T.where(v > 0, v, 0.0)) + T.sum(
        T.concatenate([v, v[[0]]]) ** 2) + T.sum(T.pad(v @ W1, 1))
    g64 = tnp.grad(f64)(x.astype(np.float64))
    np.testing.assert_allclose(g, g64, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(g64, numeric_grad(f64, x), rtol=1e-6, atol=1e-6)
    t = tnp.tensor(x, requires_grad=True)
    assert f(t).backward().grad(t).dtype == np.float32


@st.composite
def broadcast_pairs(draw):
    out = draw(st.lists(SIZES, min_size=0, max_size=3).map(tuple))
    def operand():
        k = draw(st.integers(0, len(out)))
        return tuple(draw(st.sampled_from([n, 1])) for n in out[len(out) - k:])
    return operand(), operand()


BROADCAST_FUNCTIONS = {
    "maximum": lambda a, b: T.maximum(a, b),
    "minimum": lambda a, b: T.minimum(a, b),
    "where": lambda a, b: T.where(T.greater(a, b), a * b, a - b),
    "concat_matmul": lambda a, b: T.sum(T.concatenate([T.expand_dims(a + b, -1)] * 2, -1)
                                        @ np.ones(2, np.float32)),
}


@pytest.mark.parametrize("name", list(BROADCAST_FUNCTIONS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@settings(SETTINGS)
@given(shapes=broadcast_pairs(), seed=SEEDS)
def test_broadcast_gradients_have_operand_shape_and_dtype(name, dtype, shapes, seed):
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal(s).astype(dtype) for s in shapes)
    fn = BROADCAST_FUNCTIONS[name]
    out = fn(x, y)
    assert np.asarray(out).dtype == np.dtype(dtype)
    ct = rng.standard_normal(np.shape(out)).astype(dtype)
    gx, gy = tnp.vjp(fn, x, y)[1](ct)
    assert gx.shape == x.shape and gy.shape == y.shape
    assert gx.dtype == np.dtype(dtype) and gy.dtype == np.dtype(dtype)
    if dtype == "float64":
        def loss(a, b):
            return np.sum(ct * np.asarray(fn(a, b)))
        np.testing.assert_allclose(gx, numeric_grad(lambda a: loss(a, y), x), atol=1e-6)
        np.testing.assert_allclose(gy, numeric_grad(lambda b: loss(x, b), y), atol=1e-6)


def test_broadcast_operand_gradients_keep_shape_and_dtype():
    x = RNG.standard_normal((3, 1)).astype(np.float32)
    bias = RNG.standard_normal((4,)).astype(np.float32)
    f = lambda v, b: T.sum(T.maximum(v, b) * T.where(v > b, 1.0, 2.0) + (v @ b[None]) ** 2)
    gx, gb = tnp.grad(f, argnums=(0, 1))(x, bias)
    assert gx.shape == (3, 1) and gx.dtype == np.float32
    assert gb.shape == (4,) and gb.dtype == np.float32


def test_hvp_through_contractions_and_indexing():
    f = lambda x: T.logsumexp(T.einsum("ij,jk->ik", x, W1)[[0, 2]], axis=1) @ np.ones(2) + T.sum(
        T.tanh(x[1:, ::-1]) ** 2) + T.max(T.concatenate([x, x ** 2]))
    x = RNG.standard_normal((3, 4))
    v = RNG.standard_normal((3, 4))
    h = 1e-5
    expected = (tnp.grad(f)(x + h * v) - tnp.grad(f)(x - h * v)) / (2 * h)
    np.testing.assert_allclose(tnp.hvp(f, (x,), (v,)), expected, rtol=1e-5, atol=1e-6)


def test_size_zero_operands():
    x = np.zeros((0, 4))
    f = lambda v: T.sum(v @ W1) + T.sum(v[:, 1:3]) + T.sum(T.einsum("ij,jk->ik", v, W1))
    g = tnp.grad(f)(x)
    assert g.shape == (0, 4)
    assert T.max(np.zeros((0, 3)), axis=1).shape == (0,)
    with pytest.raises(ValueError, match="zero-size"):
        T.max(np.zeros((0, 3)))
    assert T.concatenate([np.zeros((0, 2)), np.ones((1, 2))]).shape == (1, 2)


# --- operators on Tensors and tracers ---------------------------------------------------------


def test_tensor_operators():
    a = tnp.tensor(A, requires_grad=True)
    out = a @ B
    assert isinstance(out, tnp.Tensor) and out.shape == (3, 5)
    left = A.T @ a                                     # NumPy on the left defers to the Tensor
    assert isinstance(left, tnp.Tensor) and left.shape == (4, 4)
    assert isinstance(np.ones(4) + a, tnp.Tensor)
    np.testing.assert_array_equal((a > 0).data, A > 0)
    np.testing.assert_array_equal((a == a).data, np.ones((3, 4), bool))
    np.testing.assert_array_equal((a != 0).data, A != 0)
    np.testing.assert_array_equal((a <= 0).data, A <= 0)
    np.testing.assert_array_equal((a >= 0).data, A >= 0)
    np.testing.assert_array_equal((a < 0).data, A < 0)
    np.testing.assert_allclose(abs(a).data, np.abs(A))
    np.testing.assert_allclose(a[1:, [0, 2]].data, A[1:, [0, 2]])
    assert len({a, a}) == 1                            # hashable by identity
    assert bool(a[0, 0] == A[0, 0])
    assert [r.shape for r in a] == [(4,)] * 3
    np.testing.assert_allclose(a.max(axis=0).data, A.max(axis=0))
    np.testing.assert_allclose((a * 1j).imag.data, A)
    g = (T.sum(left) + T.sum(out)).backward().grad(a)
    np.testing.assert_allclose(g, A.sum(axis=1)[:, None] + B.sum(axis=1)[None, :])


def test_functional_tracer_operators():
    def f(x):
        y = x @ W1
        assert isinstance(y, type(x))
        return T.sum(W1.T @ x.T) + T.sum(abs(y[x[:, 0] > -10])) + T.sum(T.where(x < 0, x, 0))
    x = RNG.standard_normal((3, 4))
    np.testing.assert_allclose(tnp.grad(f)(x), numeric_grad(f, x), rtol=1e-6, atol=1e-7)


# --- errors ---------------------------------------------------------------------------------


def test_shape_errors_name_the_op_and_shapes():
    with pytest.raises(TensorShapeError, match=r"matmul.*\(3, 4\).*\(3, 5\)"):
        T.matmul(A, np.ones((3, 5)))
    with pytest.raises(TensorShapeError, match="matmul"):
        T.matmul(np.float64(1.0), A)
    with pytest.raises(TensorShapeError, match=r"matmul.*\(2, 3, 4\).*\(3, 4, 5\)"):
        T.matmul(C, np.ones((3, 4, 5)))
    with pytest.raises(TensorShapeError, match=r"dot.*not aligned"):
        T.dot(A, A)
    with pytest.raises(TensorShapeError, match="einsum.*'j'"):
        T.einsum("ij,jk->ik", A, A)
    with pytest.raises(ValueError, match="einsum"):
        T.einsum("ij->k", A)
    with pytest.raises(TensorShapeError, match="einsum"):
        T.einsum("ijk->", A)
    with pytest.raises(TensorShapeError, match=r"concatenate.*\(3, 4\).*\(4, 5\)"):
        T.concatenate([A, B], axis=1)
    with pytest.raises(TensorShapeError, match="where"):
        T.where(A > 0, A, B)
    with pytest.raises(TensorShapeError, match="squeeze"):
        T.squeeze(A, 0)
    with pytest.raises(TensorShapeError, match="stack"):
        T.stack([A, B])
    with pytest.raises(ValueError, match="negative"):
        T.pad(A, -1)
    with pytest.raises(TensorShapeError, match=r"maximum.*\(3, 4\) \(4, 5\)"):
        T.maximum(A, B)
    assert issubclass(TensorShapeError, ValueError)


def test_axis_errors():
    for call in (lambda: T.max(A, axis=2), lambda: T.min(A, axis=-3),
                 lambda: T.concatenate([A, A], axis=2), lambda: T.logsumexp(A, axis=5),
                 lambda: T.expand_dims(A, 3), lambda: T.squeeze(A, 4),
                 lambda: T.take(A, [0], axis=2)):
        with pytest.raises(np.exceptions.AxisError):
            call()


def test_unsupported_features_raise_clearly():
    with pytest.raises(TensorNotSupportedError):
        T.pad(A, 1, mode=lambda vector, widths, axis, options: None)   # a callable mode
    for got, want in zip(T.where(A > 0), np.nonzero(A > 0)):   # one argument: np.nonzero's
        np.testing.assert_array_equal(got, want)
    assert issubclass(TensorNotSupportedError, NotImplementedError)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_div_or_zero_is_div_away_from_zero_and_zero_at_zero(dtype):
    rng = np.random.default_rng(3)
    x, y = rand(rng, (4,), dtype), rand(rng, (4,), dtype) + 2.0
    check_op(ew.div_or_zero, x, y, seed=3)
    np.testing.assert_allclose(ew.div_or_zero.eval(None, [x, y])[0], x / y)
    y[1] = 0.0
    out = ew.div_or_zero.eval(None, [x, y])[0]
    assert out[1] == 0 and np.isfinite(out).all()
    graph = one_op_graph(ew.div_or_zero)
    lin = linearize(graph, graph.output_keys, [0, 1])
    values = {Input(0): x, Input(1): y, lin.tangent_input_keys[0]: np.ones(4, dtype),
              lin.tangent_input_keys[1]: np.ones(4, dtype)}
    [tangent] = evaluate([graph, lin.graph], lin.tangent_output_keys, values)
    assert tangent[1] == 0 and np.isfinite(tangent).all()


def test_ops_pickle_without_their_cached_hash():
    import pickle

    op = ew.ConvertElementType("float32", "float64")
    hash(op)                                       # caches the hash
    copy = pickle.loads(pickle.dumps(op))
    assert copy == op and "_hash" not in copy.__dict__ and hash(copy) == hash(op)
