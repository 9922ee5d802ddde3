"""Batch rules of the elementwise, selection, reduction, scan and shape ops of the tensor set.

Every op goes through ``tidu.testing.check_batch`` (its batched graph against a
Python loop over the batch) with batch axes at every position and ``None`` per
input, batched twice (``order=2``), on shapes with size-1 axes, in float64 and
complex128 where the op takes complex values. Then: batched graphs of several
ops (an operand broadcast to a higher rank, then combined with a batched one),
rules that move nothing when nothing needs moving, linear roles (the gradient
of a batched graph with respect to a shared input sums over the batch), and
the error for an axis counted from the end.
"""

from __future__ import annotations

import numpy as np
import pytest

from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops import reduce as reduce_ops  # noqa: F401  registers its unary op
from primitives.tensor.ops.reduce import (Argmax, Argmin, LogSoftmaxLinear, ReduceMax,
                                          ReduceMin, ReduceProd)
from primitives.tensor.ops.scan import (
    Argsort,
    Cumprod,
    Cumsum,
    LinearRecurrence,
    Sort,
    SortPermutation,
)
from primitives.tensor.ops.elementwise import ComplexAbs, Imag, Maximum, Minimum, Real
from primitives.tensor.ops.select import Compare, Select
from primitives.tensor.ops.shape import (
    BroadcastAxis,
    BroadcastInDim,
    MoveAxis,
    ReduceSum,
    Reshape,
    SumAxis,
    Transpose,
)
from tidu import ADRuleError, ADRuleKind, batch, linear_transpose, linearize
from tidu.graph import GraphBuilder, Input, Local, evaluate
from tidu.testing import check_batch
from tensor_helpers import case_id

SHAPE = (2, 1, 3)          # a size-1 axis between two others
RNG = np.random.default_rng(0)


def real(shape=SHAPE, low=0.2, high=0.9):
    return RNG.uniform(low, high, shape)


def cplx(shape=SHAPE):
    return real(shape) + 1j * real(shape, -0.5, 0.5)


def check(op, *inputs, order=2):
    with np.errstate(all="ignore"):
        report = check_batch(op, *inputs, order=order, rng=1)
    assert report.batch_comparisons > 0
    return report


# --- elementwise ------------------------------------------------------------------------

BOOLEAN_UNARY = {"isnan", "isinf", "isfinite"}       # complex in, bool out: nothing to batch-check
BITWISE = {"invert", "bitwise_and", "bitwise_or", "bitwise_xor"}     # integers and booleans
COMPLEX_BINARY = {"add", "sub", "mul", "mul_conj", "div", "div_conj", "div_or_zero",
                  "div_or_zero_conj"}


@pytest.mark.parametrize("name", sorted(ew._UNARY))
def test_unary(name):
    if name in BITWISE:
        check(ew.Unary(name), RNG.integers(-4, 8, SHAPE))
        return
    # in every op's domain: check_batch fails an all-NaN output (its tolerance is NaN)
    check(ew.Unary(name), real() + (1 if name == "arccosh" else 0))
    if ew.Unary(name).takes_complex and name not in BOOLEAN_UNARY:
        check(ew.Unary(name), cplx(), order=1)


@pytest.mark.parametrize("name", sorted(ew._BINARY))
def test_binary(name):
    if name in BITWISE:
        check(ew.Binary(name), RNG.integers(-4, 8, (2, 3)), RNG.integers(-4, 8, (2, 3)))
        return
    x, y = real((2, 3)), real((2, 3))
    y[0, 0] = x[0, 0]                            # a tie, for the extremum weights
    check(ew.Binary(name), x, y)
    if name in COMPLEX_BINARY:
        check(ew.Binary(name), cplx((1, 3)), cplx((1, 3)), order=1)


def test_binary_on_a_zero_divisor_and_size_one_axes():
    check(ew.div_or_zero, real((1, 2)), np.array([[0.0, 0.5]]))
    check(ew.add, real((1, 1)), real((1, 1)))
    check(ew.mul, np.array(1.5), np.array(-2.0))            # rank 0: the batch axis only


@pytest.mark.parametrize("op, make", [
    (ew.Scale(2.5), real), (ew.Scale(1j), cplx), (ew.Scale(-0.0), real),
    (ew.Affine(2.0, -1.0), real), (ew.Affine(1, 0.5j), cplx),
    (ew.IntegerPow(3), real), (ew.IntegerPow(-2), real), (ew.IntegerPow(0), real),
    (ew.Pow(0.5), real), (ew.Pow(1.5 + 0.5j), cplx),
    (ew.ConvertElementType("complex128", "float64"), real),
    (ew.ConvertElementType("float64", "complex128"), cplx),
    (ew.ConvertElementType("float32", "float64"), real),
    (ew.ConvertElementType("int64", "float64"), lambda: real() * 10),
    (ew.Round(1), real), (ew.SincDerivative(1), real), (ew.SincDerivative(2), real),
    (ComplexAbs("complex128"), cplx), (Real("complex128"), cplx), (Imag("complex128"), cplx),
], ids=case_id)
def test_ops_with_a_parameter(op, make):
    check(op, make())


@pytest.mark.parametrize("conjugate", [False, True])
def test_tanh_scaled(conjugate):
    op = ew.TanhScaled(conjugate)
    check(op, real((2, 3)), np.tanh(real((2, 3))))
    check(op, cplx((1, 3)), np.tanh(cplx((1, 3))), order=1)



@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("axes", [(0,), (2,), (0, 2)])
def test_log_softmax_linear(transposed, axes):
    y = np.log(real())
    y -= np.log(np.sum(np.exp(y), axis=axes, keepdims=True))
    check(LogSoftmaxLinear(axes, SHAPE, transposed), real(), y)

def test_tanh_tangents_batched_over_one_primal_form_its_factor_once(monkeypatch):
    """Tangents batched, ``y`` not (``jacfwd``, ``vmap`` of a ``jvp``): ``1 - y²`` is formed
    once, unbatched, and the batch of tangents multiplied by it, not the fused op run on B
    copies of ``y``."""
    import primitives.tensor as tnp

    x = np.linspace(-1.5, 1.5, 4)
    tangents = np.random.default_rng(2).standard_normal((3, 4))

    def tangent_of_tanh(x, t):
        return tnp.jvp(tnp.tanh, (x,), (t,))[1]

    step = tnp.jit(tnp.vmap(tangent_of_tanh, in_axes=(None, 0)))
    step(x, tangents)                                   # traced
    ran = []
    for cls in (ew.TanhScaled, ew.Affine):
        def logged(self, ctx, inputs, _eval=cls.eval):
            ran.append((type(self).__name__, inputs[0].shape))
            return _eval(self, ctx, inputs)
        monkeypatch.setattr(cls, "eval", logged)
    got = step(x, tangents)
    monkeypatch.undo()
    np.testing.assert_allclose(got, tangents * (1 - np.tanh(x) ** 2), rtol=1e-14)
    np.testing.assert_allclose(tnp.jacfwd(tnp.tanh)(x), np.diag(1 - np.tanh(x) ** 2),
                               rtol=1e-14)
    assert ran == [("Affine", (4,))], ran


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_power_batches_its_shape(dtype):
    x = real((2, 1)) if dtype == "float64" else cplx((2, 1))
    check(ew.Power((2, 1), dtype), x, real((2, 1), 0.5, 2.0).astype(dtype))
    check(ew.Power((), dtype), x[0, 0], np.array(2.0, dtype))


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare(name):
    x, y = real((2, 3)), real((2, 3))
    y[1, :] = x[1, :]
    check(Compare(name), x, y)


@pytest.mark.parametrize("op", [Maximum("float64"), Minimum("float64")], ids=case_id)
def test_extrema(op):
    x, y = real((3, 1)), real((3, 1))
    y[0] = x[0]
    check(op, x, y)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_select(dtype):
    pred = np.array([[True, False, True], [False, False, True]])
    make = real if dtype == "float64" else cplx
    check(Select((2, 3), dtype), pred, make((2, 3)), make((2, 3)))
    check(Select((), dtype), np.array(False), make(()), make(()))


# --- reductions and scans -----------------------------------------------------------------


@pytest.mark.parametrize("op, shape", [
    (ReduceMax((1,), (2, 3), "float64"), (2, 3)), (ReduceMin((0, 2), SHAPE, "float64"), SHAPE),
    (ReduceMax((), (2,), "float64"), (2,)), (ReduceMin((0,), (1,), "float64"), (1,)),
    (ReduceProd((0,), (3, 2), "float64"), (3, 2)), (ReduceProd((0, 2), SHAPE, "float64"), SHAPE),
    (ReduceProd((1,), (2, 2), "complex128"), (2, 2)),
    (Argmax(1), (2, 3)), (Argmin(0), (3, 2)), (Argmax(0), (1,)),
    (Cumsum(0), (3, 2)), (Cumsum(1, True), (2, 3)), (Cumsum(1), SHAPE),
    (Cumprod(1, (2, 3), "float64"), (2, 3)), (Cumprod(0, (3, 1), "complex128", True), (3, 1)),
    (Sort(1, (2, 3), "float64"), (2, 3)), (Sort(0, (3,), "float64"), (3,)),
    (SortPermutation(0, (3, 2)), (3, 2)), (SortPermutation(1, (2, 3)), (2, 3)),
    (SortPermutation(0, (1,)), (1,)), (SortPermutation(1, (2, 0)), (2, 0)),
    (Argsort(1), (2, 3)), (Argsort(0, "stable"), (3, 2)),
], ids=case_id)
def test_reductions_and_scans(op, shape):
    x = real(shape) if "complex" not in repr(op) else cplx(shape)
    if shape and shape[0] == 3:
        x[1] = x[0]                               # ties: stable orders, split weights
    check(op, x)


@pytest.mark.parametrize("op", [LinearRecurrence(0, (3, 2), "float64"),
                                LinearRecurrence(1, (2, 3), "complex128", True)], ids=case_id)
def test_linear_recurrence(op):
    make = real if op.dtype == "float64" else cplx
    check(op, make(op.shape), make(op.shape))


def test_sort_permutation_indexes_each_examples_own_flattening():
    # each example's positions index that example alone, not the batch
    x = real((3, 2))
    report = check(SortPermutation(0, (3, 2)), x)
    assert report.batch_comparisons == 2 * 3      # axes 0, 1, 2; batched twice


# --- shape ops ----------------------------------------------------------------------------


@pytest.mark.parametrize("op, shape", [
    (BroadcastInDim((2, 3, 4), (0, 2), (2, 4)), (2, 4)),
    (BroadcastInDim((2, 3, 4), (1,), (1,)), (1,)),
    (BroadcastInDim((2, 3), (), ()), ()),
    (BroadcastInDim((2, 1, 3), (0, 1, 2), (1, 1, 3)), (1, 1, 3)),
    (ReduceSum((0, 2), (2, 3, 4)), (2, 3, 4)), (ReduceSum((), (2,)), (2,)),
    (ReduceSum((1,), SHAPE), SHAPE),
    (Reshape((6, 1), (2, 3)), (2, 3)), (Reshape((), (1, 1)), (1, 1)), (Reshape((3, 2), SHAPE), SHAPE),
    (Transpose((1, 0, 2)), (2, 3, 4)), (Transpose((2, 0, 1)), SHAPE), (Transpose(()), ()),
    (MoveAxis(0, 2), (2, 3, 4)), (MoveAxis(2, 0), (2, 3, 4)), (MoveAxis(1, 1), (2, 3)),
    (BroadcastAxis(1, 3), (2, 1)), (BroadcastAxis(0, 2), ()), (BroadcastAxis(2, 1), (2, 3)),
    (SumAxis(1, 3), (2, 3)), (SumAxis(0, 1), (1,)),
], ids=case_id)
def test_shape_ops(op, shape):
    check(op, real(shape))


# --- graphs of several ops ----------------------------------------------------------------


def graph_of(fn, n_inputs: int):
    builder = GraphBuilder()
    ids = [builder.add_input(k) for k in range(n_inputs)]

    def apply(op, *refs):
        return builder.add_operation(op, [Local(r) for r in refs])[0]

    builder.set_outputs(fn(apply, *ids))
    return builder.build()


def against_loop(graph, values: list, in_axes: dict, size: int):
    batched = batch(graph, graph.output_keys, in_axes, size)
    got = batched.evaluate(dict(enumerate(values)))
    for value, axis, key in zip(got, batched.out_axes, graph.output_keys):
        expected = np.stack([
            evaluate(graph, [key], {Input(k): v if in_axes.get(k) is None else
                                    np.take(v, b, axis=in_axes[k]) for k, v in enumerate(values)})[0]
            for b in range(size)])
        value = np.broadcast_to(value, expected.shape) if axis is None else \
            np.moveaxis(value, axis, 0)
        np.testing.assert_allclose(value, expected, rtol=1e-13)
    return batched


def broadcast_then_multiply(apply, x, y):
    # x of shape (3,) meets y of shape (2, 3): the NumPy front end broadcasts x first
    wide = apply(BroadcastInDim((2, 3), (1,), (3,)), x)
    product = apply(ew.mul, wide, y)
    return [apply(ReduceSum((1,), (2, 3)), apply(ew.sin, product)), product]


@pytest.mark.parametrize("x_axis", [None, 0, 1])
@pytest.mark.parametrize("y_axis", [None, 0, 1, 2])
def test_operands_of_different_rank(x_axis, y_axis):
    if x_axis is None and y_axis is None:
        return
    graph = graph_of(broadcast_then_multiply, 2)
    size = 4
    x, y = real((3,)), real((2, 3))
    if x_axis is not None:
        x = np.stack([x * (1 + k) for k in range(size)], axis=x_axis)
    if y_axis is not None:
        y = np.stack([y * (1 - k / 8) for k in range(size)], axis=y_axis)
    against_loop(graph, [x, y], {0: x_axis, 1: y_axis}, size)


def ops_of(batched):
    return [node.operation for node in batched.graph.operations]


def test_nothing_moves_when_nothing_needs_to():
    graph = graph_of(lambda apply, x, y: [apply(ew.add, apply(ew.exp, x), y)], 2)
    assert ops_of(batch(graph, graph.output_keys, {0: 1, 1: 1}, 3)) == [ew.exp, ew.add]
    # a shared operand is broadcast along the batch axis, where the batched one has it
    assert ops_of(batch(graph, graph.output_keys, {0: 2}, 3)) == [ew.exp, BroadcastAxis(2, 3),
                                                                 ew.add]
    # operands batched at different axes: the second moves to the first's
    assert ops_of(batch(graph, graph.output_keys, {0: 0, 1: 2}, 3)) == [ew.exp, MoveAxis(2, 0),
                                                                       ew.add]
    # a reduction behind the batch axis and a cumulative sum keep it in place
    graph = graph_of(lambda apply, x: [apply(Cumsum(0), apply(ReduceSum((1,), (2, 3)), x))], 1)
    batched = batch(graph, graph.output_keys, {0: 1}, 3)
    assert ops_of(batched) == [ReduceSum((2,), (2, 3, 3)), Cumsum(0)] and batched.out_axes == [1]


def test_gradient_of_a_batched_graph_sums_over_the_batch_for_a_shared_input():
    # f(x, w) = sum(sin(x * w)); batched along x, its gradient in the shared w is the sum of
    # the per-example gradients: the broadcast of w transposes to a sum over the batch
    shape, size = (2, 3), 4
    graph = graph_of(lambda apply, x, w: [apply(ReduceSum((0, 1), shape),
                                                apply(ew.sin, apply(ew.mul, x, w)))], 2)
    batched = batch(graph, graph.output_keys, {0: 1}, size)
    [bx] = [key.key for key in batched.input_keys]
    linear = linearize([graph, batched.graph], batched.output_keys, [1])
    reverse = linear_transpose(linear)
    x, w = real((2, size, 3)), real(shape)
    [gw] = evaluate([graph, batched.graph, linear.graph, reverse.graph],
                    reverse.tangent_output_keys,
                    {Input(bx): x, Input(1): w, reverse.tangent_input_keys[0]: np.ones(size)})
    expected = sum(np.cos(x[:, k] * w) * x[:, k] for k in range(size))
    np.testing.assert_allclose(gw, expected, rtol=1e-13)


def test_per_example_gradients_batch_the_reverse_graph():
    # vmap(grad): the reverse graph of f batched along x; w and the seed are shared
    shape, size = (2, 3), 3
    graph = graph_of(lambda apply, x, w: [apply(ReduceMax((0, 1), shape, "float64"),
                                                apply(ew.mul, apply(Cumsum(1), x), w))], 2)
    linear = linearize(graph, graph.output_keys, [0, 1])
    reverse = linear_transpose(linear)
    [seed] = [key.key for key in reverse.tangent_input_keys]
    graphs = [graph, linear.graph, reverse.graph]
    x, w = real((size, 2, 3)), real(shape)
    against_loop_keys = {0: 0}
    batched = batch(graphs, reverse.tangent_output_keys, against_loop_keys, size)
    gx, gw = batched.evaluate({0: x, 1: w, seed: np.array(1.0)})
    for k in range(size):
        ex, ew_ = evaluate(graphs, reverse.tangent_output_keys,
                           {Input(0): x[k], Input(1): w, Input(seed): np.array(1.0)})
        np.testing.assert_allclose(np.moveaxis(gx, batched.out_axes[0], 0)[k], ex, rtol=1e-13)
        np.testing.assert_allclose(np.moveaxis(gw, batched.out_axes[1], 0)[k], ew_, rtol=1e-13)


def test_an_axis_counted_from_the_end_cannot_be_batched():
    graph = graph_of(lambda apply, x: [apply(Cumsum(-1), x)], 1)
    with pytest.raises(ADRuleError, match=r"cumsum\[.*\].*axis -1 counts from the end") as info:
        batch(graph, graph.output_keys, {0: 0}, 2)
    assert info.value.rule is ADRuleKind.BATCH
