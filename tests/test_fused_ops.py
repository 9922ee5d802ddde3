"""Fused ops (``primitives/tensor/ops/fused.py``) and the ``optimize`` patterns that make them.

``square_affine_mul[scale, offset](t, y) = t * (scale * y*y + offset)`` (``conj``:
``t * conj(...)``) replaces ``mul(t, affine(mul(y, y)))``, which is how ``tanh``'s
(and ``tan``'s) derivative times a tangent or cotangent is built. Checked here:

- values: bit for bit the chain's on NumPy (float32, float64, complex; inf, NaN and
  signed zeros; every buffer-reuse path), to rounding on PyTorch (``tanh_backward``);
- rules: finite differences, the dot-product test and the batch rule
  (``tidu.testing.check_primitive``, second order too);
- the pattern: it fires on the derivatives of ``tanh`` and ``tan`` (forward and
  reverse), not where it must not, and is switched off at its seam;
- programs: ``jit`` results equal the unfused ``jit``'s exactly on NumPy (the MLP
  step of ``benchmarks/mlp.py`` too), closely on PyTorch; fused programs still
  differentiate (``grad(jit(grad))``), batch (``vmap(jit(grad))``) and transpose again.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops import simplify
from primitives.tensor.ops.fused import SquareAffineMul
from primitives.tensor.transforms.functional import make_graph
from tidu import LinearizedGraph, linear_transpose, optimize
from tidu.graph import PRIMARY, GraphBuilder, Input, Linearized, Local, evaluate
from tidu.testing import check_primitive

RNG = np.random.default_rng(23)
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 1e20, -1e20, math.inf, -math.inf, math.nan, 5e-324]
FLOAT_DTYPES = [np.float32, np.float64]
COMPLEX_DTYPES = [np.complex64, np.complex128]
AFFINES = [(-1, 1), (1, 1), (2.5, -0.75), (-1, 0.0), (1, 0), (0, 2), (-0.0, 1.5)]


def same(expected, got) -> bool:
    """Equal values (NaN matching NaN), dtype and shape."""
    expected, got = np.asarray(expected), np.asarray(got)
    if expected.dtype != got.dtype or expected.shape != got.shape:
        return False
    if expected.dtype.kind == "c":
        return same(expected.real, got.real) and same(expected.imag, got.imag)
    return bool(np.array_equal(expected, got, equal_nan=expected.dtype.kind in "fc"))


def chain(t, y, scale, offset, conj):
    """What the fused op replaces, op by op: ``mul(t, affine(mul(y, y)))`` (or ``mul_conj``)."""
    [square] = ew.mul.eval(None, [y, y])
    [factor] = ew.Affine(scale, offset).eval(None, [square])
    return (ew.mul_conj if conj else ew.mul).eval(None, [t, factor])[0]


@np.errstate(all="ignore")
def sample(shape, dtype, rng=RNG):
    values = np.asarray(rng.standard_normal(shape) * 2)
    flat = values.reshape(-1)
    flat[: min(len(EDGES), flat.size)] = EDGES[: flat.size]
    rng.shuffle(flat)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.permutation(values.reshape(-1)).reshape(shape)
    return values.astype(dtype)


# --- values -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + COMPLEX_DTYPES)
@pytest.mark.parametrize("scale, offset", AFFINES)
@pytest.mark.parametrize("conj", [False, True])
@pytest.mark.parametrize("shape", [(), (7,), (64, 1024)])          # 0-d, small, big (buffers)
def test_values_equal_the_chain_bit_for_bit(dtype, scale, offset, conj, shape):
    t, y = sample(shape, dtype), sample(shape, dtype)
    with np.errstate(all="ignore"):
        expected = chain(t, y, scale, offset, conj)
        [got] = SquareAffineMul(scale, offset, conj).eval(None, [t, y])
    assert same(expected, got)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + COMPLEX_DTYPES)
@pytest.mark.parametrize("reusable", [(), (0,), (1,), (0, 1)])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_reusing_an_input_keeps_the_values_and_writes_only_that_input(dtype, reusable):
    shape = (64, 1024)                                   # big enough to be reused
    op = SquareAffineMul(-1, 1, True)
    t, y = sample(shape, dtype), sample(shape, dtype)
    expected = chain(t, y, -1, 1, True)
    inputs = [t.copy(), y.copy()]
    with np.errstate(all="ignore"):
        [got] = op.eval_reusing(None, inputs, reusable)
    assert same(expected, got)
    written = [i for i in (0, 1) if not same([t, y][i], inputs[i])]
    assert written == ([1] if 1 in reusable else [0] if 0 in reusable else [])
    assert got is (inputs[written[0]] if written else got)


@pytest.mark.parametrize("t_dtype, y_dtype", [(np.float64, np.float32), (np.float32, np.float64)])
def test_mixed_dtypes_follow_the_chain(t_dtype, y_dtype):
    t, y = sample((64, 1024), t_dtype), sample((64, 1024), y_dtype)
    with np.errstate(all="ignore"):
        expected = chain(t, y, -1, 1, False)
        [got] = SquareAffineMul(-1, 1).eval(None, [t, y])
    assert same(expected, got) and got.dtype == np.float64


def test_an_input_held_elsewhere_is_not_written():
    t, y = sample((64, 1024), np.float64), sample((64, 1024), np.float64)
    kept_t, kept_y = t.copy(), y.copy()
    inputs = [t, y]                                      # the names t, y hold them too
    SquareAffineMul(-1, 1).eval_reusing(None, inputs, (0, 1))
    assert same(kept_t, t) and same(kept_y, y)
    same_array = sample((64, 1024), np.float64)          # t is y: nothing may be written
    inputs = [same_array, same_array]
    expected = chain(same_array, same_array, -1, 1, False)
    del same_array
    [got] = SquareAffineMul(-1, 1).eval_reusing(None, inputs, (0, 1))
    assert same(expected, got) and got is not inputs[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("conj", [False, True])
def test_torch_tanh_backward_and_formula_agree_to_rounding(dtype, conj):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    rng = np.random.default_rng(4)
    t = rng.standard_normal((50, 60)).astype(dtype)
    y = np.tanh(3 * rng.standard_normal((50, 60))).astype(dtype)
    for scale, offset in [(-1, 1), (2.5, -0.75)]:
        [got] = SquareAffineMul(scale, offset, conj).eval(
            None, [torch.from_numpy(t), torch.from_numpy(y)])
        assert isinstance(got, torch.Tensor) and got.dtype == torch.from_numpy(t).dtype
        expected = chain(t, y, scale, offset, conj)
        # one rounding of y*y, the affine step and the product each (a fused multiply-add
        # rounds fewer times): bounded by a few ulps of |t| (|scale| y*y + |offset|)
        bound = 4 * np.finfo(dtype).eps * np.abs(t) * (abs(scale) * y * y + abs(offset))
        assert np.all(np.abs(got.numpy() - expected) <= bound)


def test_torch_complex_uses_the_conjugate():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    rng = np.random.default_rng(6)
    t, y = (rng.standard_normal((4, 3)) + 1j * rng.standard_normal((4, 3)) for _ in "ty")
    for conj in (False, True):
        [got] = SquareAffineMul(-1, 1, conj).eval(None, [torch.from_numpy(t),
                                                         torch.from_numpy(y)])
        np.testing.assert_allclose(got.numpy(), chain(t, y, -1, 1, conj), rtol=1e-12)


def test_dask_follows_the_formula():
    da = pytest.importorskip("dask.array", reason="Dask is not installed")
    t, y = sample((6, 4), np.float64), sample((6, 4), np.float64)
    [got] = SquareAffineMul(2.5, -0.75, True).eval(None, [da.from_array(t, chunks=3),
                                                          da.from_array(y, chunks=3)])
    with np.errstate(all="ignore"):
        assert same(chain(t, y, 2.5, -0.75, True), np.asarray(got.compute(scheduler="sync")))


def test_equality_repr_and_hash():
    assert SquareAffineMul(-1, 1) == SquareAffineMul(-1, 1, False)
    assert SquareAffineMul(-1, 1) != SquareAffineMul(-1, 1, True)
    assert SquareAffineMul(0.0, 1) != SquareAffineMul(-0.0, 1)          # exact parameters
    assert hash(SquareAffineMul(2, 1)) == hash(SquareAffineMul(2, 1))
    assert repr(SquareAffineMul(-1, 1, True)) == "square_affine_mul[scale=-1, offset=1, conj]"


# --- rules --------------------------------------------------------------------------------------


@pytest.mark.parametrize("conj", [False, True])
@pytest.mark.parametrize("scale, offset", [(-1, 1), (2.5, -0.75)])
def test_rules_by_finite_differences_dot_product_and_batching(conj, scale, offset):
    rng = np.random.default_rng(3)
    op = SquareAffineMul(scale, offset, conj)
    t, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    report = check_primitive(op, t, y, order=2, rng=0)
    assert report.jvp_comparisons > 0 and report.batch_comparisons > 0
    tc = t + 1j * rng.standard_normal((3, 4))
    yc = y + 1j * rng.standard_normal((3, 4))
    check_primitive(op, tc, yc, order=2, rng=1)
    check_primitive(op, t.astype(np.float32), y.astype(np.float32), rng=2)


@pytest.mark.parametrize("conj", [False, True])
def test_transpose_of_the_linear_op_flips_conj(conj):
    b = GraphBuilder()
    t, y = b.add_input("t"), b.add_input("y")
    [out] = b.add_operation(SquareAffineMul(-1, 1, conj), [Local(t), Local(y)],
                            Linearized((True, False)))
    b.set_outputs([out])
    transposed = linear_transpose(LinearizedGraph(b.build(), [("t", t)], [out]))
    assert [n.operation for n in transposed.graph.operations] == [SquareAffineMul(-1, 1, not conj)]
    rng = np.random.default_rng(8)
    tv, yv, ct = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3)) for _ in "abc")
    values = {Input("y"): yv, transposed.tangent_input_keys[0]: ct}
    [got] = evaluate(transposed.graph, transposed.tangent_output_keys, values)
    [forward] = SquareAffineMul(-1, 1, conj).eval(None, [tv, yv])
    # the dot-product test, Re <ct, A t> = Re <A^T ct, t>
    assert np.isclose(np.vdot(ct, forward).real, np.vdot(got, tv).real, rtol=1e-12)


# --- the pattern in optimize ----------------------------------------------------------------------


@contextlib.contextmanager
def fusion(enabled: bool):
    saved = simplify.FUSE_SQUARE_AFFINE_MUL
    simplify.FUSE_SQUARE_AFFINE_MUL = enabled
    try:
        yield
    finally:
        simplify.FUSE_SQUARE_AFFINE_MUL = saved


def fused_ops(program) -> list:
    return [node.operation for node in program.operations
            if type(node.operation) is SquareAffineMul]


def gradient_program(f, *args, forward=False):
    """``f``'s (value and) gradient, or its JVP with ``forward``, optimized as ``jit`` does."""
    traced = make_graph(f, *args)
    argnums = tuple(range(len(args)))
    lin = traced.linearized(argnums)
    if forward:
        graphs, outputs = [traced.graph, lin.graph], list(lin.tangent_output_keys)
        values = {lin.tangent_input_keys[i]: RNG.standard_normal(np.shape(a))
                  for i, a in enumerate(args)}
    else:
        tr = traced.transposed(argnums)
        graphs = [traced.graph, lin.graph, tr.graph]
        outputs = [k for k in tr.tangent_output_keys if k is not None]
        values = {key: np.asarray(1.0) for key in tr.tangent_input_keys}
    values.update({k: v for k, v in traced.trace.values.items() if type(k) is Input})
    return graphs, outputs + list(traced.graph.output_keys), values


@pytest.mark.parametrize("forward", [False, True])
@pytest.mark.parametrize("fn, expected", [(tnp.tanh, SquareAffineMul(-1, 1)),
                                          (tnp.tan, SquareAffineMul(1, 1))])
def test_the_pattern_fires_on_derivatives_and_keeps_values(fn, expected, forward):
    x = np.linspace(-1.2, 1.3, 12).reshape(3, 4)
    graphs, outputs, values = gradient_program(lambda v: tnp.sum(fn(v) * v), x, forward=forward)
    program = optimize(graphs, outputs)
    want = expected if forward else SquareAffineMul(expected.scale, expected.offset, True)
    assert fused_ops(program) == [want]
    assert not any(node.operation == ew.Affine(expected.scale, expected.offset)
                   for node in program.operations)
    with fusion(False):
        plain = optimize(graphs, outputs)
    assert fused_ops(plain) == []
    assert len(program.operations) == len(plain.operations) - 2
    for e, g in zip(evaluate(plain, plain.output_keys, values),
                    evaluate(program, program.output_keys, values)):
        assert same(e, g)


def test_the_pattern_leaves_other_chains_alone():
    def graph_of(make):
        b = GraphBuilder()
        t, y, z = (b.add_input(name) for name in "tyz")
        b.set_outputs([make(b, Local(t), Local(y), Local(z))])
        return b.build()

    def emit(b, op, refs, role=PRIMARY):
        return Local(b.add_operation(op, refs, role)[0])

    cases = {
        "y * z, not a square": lambda b, t, y, z: emit(
            b, ew.mul, [t, emit(b, ew.Affine(-1, 1), [emit(b, ew.mul, [y, z])])]),
        "a complex affine": lambda b, t, y, z: emit(
            b, ew.mul, [t, emit(b, ew.Affine(1j, 1), [emit(b, ew.mul, [y, y])])]),
        "the factor is linear": lambda b, t, y, z: emit(
            b, ew.mul, [t, emit(b, ew.Affine(-1, 1), [emit(b, ew.mul, [y, y])])],
            Linearized((True, True))),
        "mul_conj with the factor first": lambda b, t, y, z: emit(
            b, ew.mul_conj, [emit(b, ew.Affine(-1, 1), [emit(b, ew.mul, [y, y])]), t]),
        "a division": lambda b, t, y, z: emit(
            b, ew.div, [t, emit(b, ew.Affine(-1, 1), [emit(b, ew.mul, [y, y])])]),
    }
    for name, make in cases.items():
        graph = graph_of(make)
        assert fused_ops(optimize(graph, graph.output_keys)) == [], name


def test_the_factor_first_and_a_primal_product_fuse_too():
    b = GraphBuilder()
    t, y = b.add_input("t"), b.add_input("y")
    [square] = b.add_operation(ew.mul, [Local(y), Local(y)])
    [factor] = b.add_operation(ew.Affine(2.5, -0.75), [Local(square)])
    [out] = b.add_operation(ew.mul, [Local(factor), Local(t)])     # factor first, PRIMARY
    b.set_outputs([out])
    graph = b.build()
    program = optimize(graph, graph.output_keys)
    assert fused_ops(program) == [SquareAffineMul(2.5, -0.75)]
    values = {Input("t"): sample((3, 5), np.float32), Input("y"): sample((3, 5), np.float32)}
    with np.errstate(all="ignore"):
        assert same(evaluate(graph, graph.output_keys, values)[0],
                    evaluate(program, program.output_keys, values)[0])


# --- jit programs ------------------------------------------------------------------------------


def mlp_loss(ps, x, y):
    h = x
    for i in range(0, len(ps) - 2, 2):
        h = tnp.tanh(tnp.matmul(h, ps[i]) + ps[i + 1])
    z = tnp.matmul(h, ps[-2]) + ps[-1]
    return tnp.mean(tnp.logsumexp(z, axis=1) - z[tnp.arange(len(y)), y])


def mlp_data(dtype, sizes=(20, 16, 12, 5), batch=9, rng=None):
    rng = rng or np.random.default_rng(5)
    ps = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        ps += [(rng.standard_normal((a, b)) / math.sqrt(a)).astype(dtype),
               (0.1 * rng.standard_normal(b)).astype(dtype)]
    x = rng.standard_normal((batch, sizes[0])).astype(dtype)
    return ps, x, rng.integers(sizes[-1], size=batch)


def jitted(f, enabled: bool, *args):
    """``jit(f)`` traced (and so optimized) with the fusion on or off; its first result."""
    step = tnp.jit(f)
    with fusion(enabled):
        first = step(*args)
    return step, first


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_jit_mlp_step_equals_the_unfused_step_exactly(dtype):
    ps, x, y = mlp_data(dtype)
    f = tnp.value_and_grad(mlp_loss)
    fused_step, (value, grads) = jitted(f, True, ps, x, y)
    plain_step, (plain_value, plain_grads) = jitted(f, False, ps, x, y)
    assert same(plain_value, value)
    assert all(same(e, g) for e, g in zip(plain_grads, grads))
    _, expected = tnp.value_and_grad(mlp_loss)(ps, x, y)          # no jit, no optimize
    assert all(np.allclose(g, e, rtol=1e-5, atol=1e-6) for g, e in zip(grads, expected))
    ps2, x2, y2 = mlp_data(dtype, rng=np.random.default_rng(9))   # the compiled programs again
    assert all(same(e, g) for e, g in zip(plain_step(ps2, x2, y2)[1], fused_step(ps2, x2, y2)[1]))


def test_jit_mlp_step_on_the_benchmark_sizes_equals_the_unfused_step():
    ps, x, y = mlp_data(np.float32, sizes=(784, 512, 512, 10), batch=256)
    f = tnp.value_and_grad(mlp_loss)
    _, (value, grads) = jitted(f, True, ps, x, y)
    _, (plain_value, plain_grads) = jitted(f, False, ps, x, y)
    assert same(plain_value, value) and all(same(e, g) for e, g in zip(plain_grads, grads))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_jit_on_torch_tensors_agrees_with_the_unfused_step(dtype):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    ps, x, y = mlp_data(dtype)
    args = ([torch.from_numpy(p) for p in ps], torch.from_numpy(x), torch.from_numpy(y))
    f = tnp.value_and_grad(mlp_loss)
    _, (value, grads) = jitted(f, True, *args)
    _, (plain_value, plain_grads) = jitted(f, False, *args)
    assert all(isinstance(g, torch.Tensor) for g in grads)
    rtol = 8 * np.finfo(dtype).eps
    np.testing.assert_allclose(value.numpy(), plain_value.numpy(), rtol=rtol)
    for g, e in zip(grads, plain_grads):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=rtol, atol=rtol * 1e-3)


def test_fused_programs_differentiate_and_batch_again():
    def f(w, x):
        return tnp.sum(tnp.tanh(x @ w) ** 2) + tnp.sum(tnp.tan(0.3 * w))

    w, x = RNG.standard_normal((4, 3)), RNG.standard_normal((5, 4))
    inner = tnp.jit(tnp.grad(f))
    # second order through the fused program: d/dw of sum(grad f(w) * v)
    v = RNG.standard_normal((4, 3))
    hvp = tnp.grad(lambda w: tnp.sum(inner(w, x) * v))(w)
    expected = tnp.grad(lambda w: tnp.sum(tnp.grad(f)(w, x) * v))(w)
    np.testing.assert_allclose(hvp, expected, rtol=1e-10, atol=1e-12)
    # batched through the fused program
    ws = RNG.standard_normal((3, 4, 3))
    batched = tnp.vmap(inner, in_axes=(0, None))(ws, x)
    np.testing.assert_allclose(batched, np.stack([tnp.grad(f)(wi, x) for wi in ws]),
                               rtol=1e-12, atol=1e-12)
    # and the second-order program, itself jitted, holds fused ops whose rules were used
    jitted_hvp = tnp.jit(tnp.grad(lambda w: tnp.sum(inner(w, x) * v)))
    np.testing.assert_allclose(jitted_hvp(w), expected, rtol=1e-10, atol=1e-12)


def test_optimized_fused_linear_program_transposes_to_the_same_map():
    x = RNG.standard_normal((3, 4))
    traced = make_graph(lambda v: tnp.sum(tnp.tanh(v) * tnp.tan(v)), x)
    lin, tr = traced.linearized((0,)), traced.transposed((0,))
    program = optimize([traced.graph, lin.graph], lin.tangent_output_keys)
    assert len(fused_ops(program)) == 2                  # the linear work holds both
    [key] = lin.tangent_input_keys
    again = linear_transpose(LinearizedGraph(program, [(key.key, program.local_id(key))],
                                             list(program.outputs)))
    assert SquareAffineMul(-1, 1, True) in [n.operation for n in again.graph.operations]
    values = {k: v for k, v in traced.trace.values.items() if type(k) is Input}
    values.update({k: np.asarray(1.5) for k in list(again.tangent_input_keys)
                   + list(tr.tangent_input_keys)})
    [expected] = evaluate([traced.graph, lin.graph, tr.graph], tr.tangent_output_keys, values)
    [got] = evaluate([program, again.graph], again.tangent_output_keys, values)
    np.testing.assert_allclose(got, expected, rtol=1e-13)
