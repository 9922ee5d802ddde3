"""Batch rules of the array ops: ``dot_general``, indexing, ``linalg``, ``fft`` and the
custom-rule calls, each through ``tidu.testing.check_batch`` (a batched op against a
Python loop over the batch, batch axes at every position and ``None``; ``order=2``
batches the batched graph again, so the ops a rule emits must batch too).

Operands are float64 (complex128 where the op takes complex values) with size-1 axes.
"""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.transforms import make_graph
from primitives.tensor.ops.dot import DotGeneral
from primitives.tensor.ops.fft import Fft, HalfSpectrumWeight, Irfft, Rfft
from primitives.tensor.ops.indexing import Concatenate, Gather, Pad, Rev, ScatterAdd, Slice, Split
from primitives.tensor.ops.linalg import (
    Adjugate,
    Cholesky,
    Det,
    DiagEmbed,
    Eigh,
    MatrixBand,
    MatrixDiagonal,
    Pinv,
    Qr,
    Slogdet,
    Solve,
    Svd,
)
from tidu import ADRuleError, ADRuleKind, batch
from tidu.graph import GraphBuilder, Local
from tidu.testing import check_batch
from tensor_helpers import case_id

RNG = np.random.default_rng(20240615)


def real(*shape):
    return RNG.standard_normal(shape)


def cplx(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def spd(*shape):
    a = RNG.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def check(op, *inputs, order=2, **kwargs):
    report = check_batch(op, *inputs, order=order, rng=0, **kwargs)
    expected = np.prod([np.ndim(x) + 2 for x in inputs]) - 1      # every choice but all None
    if expected <= 64:
        assert report.batch_comparisons == order * op.output_count() * expected
    assert report.worst_error <= report.tolerance
    return report


# --- dot_general ---------------------------------------------------------------------------

DOTS = [
    ((((1,), (0,)), ((), ())), (2, 3), (3, 1)),                  # matmul
    ((((0,), (1,)), ((), ())), (3, 1), (2, 3)),                  # contract lhs 0 with rhs 1
    ((((), ()), ((), ())), (2,), (1, 3)),                        # outer product
    ((((0,), (0,)), ((), ())), (3,), (3,)),                      # inner product
    ((((2,), (1,)), ((0,), (0,))), (2, 1, 3), (2, 3, 2)),        # batched matmul
    ((((0, 2), (2, 0)), ((1,), (1,))), (2, 3, 1), (1, 3, 2)),    # two contractions, a batch dim
]


@pytest.mark.parametrize("dims, lhs_shape, rhs_shape", DOTS, ids=str)
def test_dot_general_batched_lhs_rhs_and_both(dims, lhs_shape, rhs_shape):
    op = DotGeneral(dims, lhs_shape, rhs_shape, "float64")
    check(op, real(*lhs_shape), real(*rhs_shape))


def test_dot_general_complex():
    op = DotGeneral((((1,), (0,)), ((), ())), (2, 3), (3, 1), "complex128")
    check(op, cplx(2, 3), cplx(3, 1))


@pytest.mark.parametrize("lhs_axis, rhs_axis", [(0, None), (2, None), (None, 1), (None, 2),
                                                (1, 2)])
def test_dot_general_output_axis_follows_the_dimension_numbers(lhs_axis, rhs_axis):
    # (2, 3) x (3, 4): a batched lhs axis lands among the lhs free dims, a batched rhs axis
    # after them; both batched: a new batch dimension, in front
    op = DotGeneral((((1,), (0,)), ((), ())), (2, 3), (3, 4), "float64")
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    b.set_outputs(b.add_operation(op, [Local(x), Local(y)]))
    graph = b.build()
    batched = batch(graph, graph.output_keys, {"x": lhs_axis, "y": rhs_axis}, axis_size=5)
    expected = {(0, None): 0, (2, None): 1, (None, 1): 1, (None, 2): 2, (1, 2): 0}
    assert batched.out_axes == [expected[lhs_axis, rhs_axis]]
    assert len(batched.graph.operations) == 1            # no moves, no broadcasts


# --- slicing, padding, concatenation, gather, scatter --------------------------------------


@pytest.mark.parametrize("op, shape", [
    (Slice((0, 1), (2, 3), (1, 2), (2, 3)), (2, 3)),
    (Slice((0, 0), (1, 0), (1, 1), (1, 2)), (1, 2)),           # an empty result
    (Pad((1, 0), (0, 2), (1, 0), (2, 1)), (2, 1)),
    (Rev((1,)), (2, 3)),
    (Rev((0, 2)), (2, 1, 3)),
    (Split(1, (1, 2), (2, 3), "float64"), (2, 3)),
    (Split(0, (1,), (1, 2), "float64"), (1, 2)),
], ids=case_id)
def test_one_operand_indexing_ops(op, shape):
    check(op, real(*shape))


def test_concatenate_mixes_batched_and_shared_operands():
    op = Concatenate(1, ((2, 1), (2, 3), (2, 2)), "float64")
    check(op, real(2, 1), real(2, 3), real(2, 2))
    check(Concatenate(0, ((1,), (2,)), "complex128"), cplx(1), cplx(2))


GATHERS = [  # axis, operand shape, index shape
    (0, (3,), (2,)), (1, (2, 3), (2, 2)), (0, (3, 1), ()), (1, (1, 4, 2), (3,)),
]


@pytest.mark.parametrize("axis, shape, index_shape", GATHERS, ids=str)
def test_gather_with_batched_operand_indices_and_both(axis, shape, index_shape):
    indices = RNG.integers(0, shape[axis], index_shape)
    op = Gather(axis, shape, index_shape)
    check(op, real(*shape), indices)
    # each case alone, the indices different per example (check_batch permutes them)
    for in_axes in ([0, None], [None, 0], [len(shape), len(index_shape)], [0, len(index_shape)]):
        check_batch(op, real(*shape), indices, in_axes=in_axes, rng=1, order=2)


@pytest.mark.parametrize("axis, shape, index_shape", GATHERS, ids=str)
def test_scatter_add_with_batched_updates_indices_and_both(axis, shape, index_shape):
    indices = RNG.integers(0, shape[axis], index_shape)
    updates = real(*(shape[:axis] + index_shape + shape[axis + 1:]))
    op = ScatterAdd(axis, shape, index_shape)
    check(op, updates, indices)
    for in_axes in ([0, None], [None, 0], [updates.ndim, None], [updates.ndim, 0]):
        check_batch(op, updates, indices, in_axes=in_axes, rng=1, order=2)


def test_scatter_add_repeated_indices_accumulate_per_example():
    op = ScatterAdd(0, (3,), (4,))
    indices = np.array([[2, 2, 0, 2], [1, 1, 1, 1]])          # a batch of two index arrays
    b = GraphBuilder()
    u, i = b.add_input("u"), b.add_input("i")
    b.set_outputs(b.add_operation(op, [Local(u), Local(i)]))
    graph = b.build()
    batched = batch(graph, graph.output_keys, {"u": None, "i": 0}, axis_size=2)
    [out] = batched.evaluate({"u": np.array([1.0, 2.0, 3.0, 4.0]), "i": indices})
    np.testing.assert_array_equal(np.moveaxis(out, batched.out_axes[0], 0),
                                  [[3.0, 0.0, 7.0], [0.0, 10.0, 0.0]])


# --- linalg --------------------------------------------------------------------------------


@pytest.mark.parametrize("a_shape, b_shape", [((2, 2), (2, 3)), ((1, 2, 2), (1, 2, 1))], ids=str)
def test_solve(a_shape, b_shape):
    check(Solve(b_shape, "float64"), spd(*a_shape), real(*b_shape))
    check(Solve(b_shape, "complex128"), spd(*a_shape) + 0.1j * real(*a_shape), cplx(*b_shape),
          order=1)


@pytest.mark.parametrize("op, make", [
    (Cholesky((2, 2), "float64"), lambda: spd(2, 2)),
    (Cholesky((1, 2, 2), "complex128"), lambda: spd(1, 2, 2) + 0j),
    (Eigh((3, 3), "float64"), lambda: spd(3, 3)),
    (Eigh((1, 2, 2), "float64", compute_v=False), lambda: spd(1, 2, 2)),
    (Svd((2, 3), "float64"), lambda: real(2, 3)),
    (Svd((3, 2), "float64", full_matrices=True), lambda: real(3, 2)),
    (Svd((1, 2, 3), "complex128", compute_uv=False), lambda: cplx(1, 2, 3)),
    (Qr((3, 2), "float64"), lambda: real(3, 2)),
    (Qr((2, 3), "float64", "complete"), lambda: real(2, 3)),
    (Qr((1, 2, 2), "complex128", "r"), lambda: cplx(1, 2, 2)),
    (Slogdet((2, 2), "float64"), lambda: real(2, 2)),
    (Slogdet((1, 2, 2), "complex128"), lambda: cplx(1, 2, 2)),
    (Det((1, 3, 3), "float64"), lambda: real(1, 3, 3)),
    (Adjugate((3, 3), "float64"), lambda: real(3, 3)),
    (Adjugate((2, 2), "complex128"), lambda: cplx(2, 2)),
    (Pinv((2, 3), "float64"), lambda: real(2, 3)),
    (MatrixBand(1.0, 0.5, -2.0), lambda: real(1, 2, 2)),
    (MatrixBand(1.0, 0.5, 0.0), lambda: cplx(2, 3)),
    (MatrixDiagonal(), lambda: real(2, 2)),
    (MatrixDiagonal(), lambda: cplx(1, 3, 3)),
    (DiagEmbed(), lambda: real(1, 3)),
    (DiagEmbed(), lambda: cplx(2)),
], ids=case_id)
def test_linalg(op, make):
    check(op, make())


# --- fft -----------------------------------------------------------------------------------


@pytest.mark.parametrize("op, make", [
    (Fft((1, 0), False, "ortho"), lambda: cplx(2, 3)),
    (Fft((1,), True, "backward"), lambda: cplx(1, 4)),
    (Rfft((1, 0), 4), lambda: real(2, 4)),
    (Rfft((0,), 1, "forward"), lambda: real(1, 2)),
    (Irfft((0, 1), 4, "forward"), lambda: cplx(2, 3)),
    (HalfSpectrumWeight(1, 4, 2.0), lambda: cplx(2, 3)),
    (HalfSpectrumWeight(0, 5, 0.5), lambda: real(3, 1)),
], ids=case_id)
def test_fft(op, make):
    check(op, make())


def test_negative_axes_are_refused_not_shifted_wrongly():
    b = GraphBuilder()
    x = b.add_input("x")
    b.set_outputs(b.add_operation(Fft((-1,), False), [Local(x)]))
    graph = b.build()
    with pytest.raises(ADRuleError, match="counts from the end") as info:
        batch(graph, graph.output_keys, {"x": 0}, axis_size=2)
    assert info.value.rule is ADRuleKind.BATCH


# --- custom_jvp / custom_vjp calls: a loop over the batch ---------------------------------


@tnp.custom_jvp
def log1pexp(x):
    return np.logaddexp(0.0, x)           # NumPy itself: opaque to tidu


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = log1pexp(x)
    return y, t * (1.0 - tnp.exp(-y))


@tnp.custom_vjp
def cube(x):
    return x ** 3


def cube_fwd(x):
    return x ** 3, (x,)


def cube_bwd(residuals, ct):
    (x,) = residuals
    return (3.0 * x * x * ct,)


cube.defvjp(cube_fwd, cube_bwd)


@pytest.mark.parametrize("custom", [log1pexp, cube], ids=["custom_jvp", "custom_vjp"])
def test_custom_calls_batch_by_a_loop(custom):
    x = real(1, 3)
    (node,) = make_graph(custom, x).graph.operations
    check(node.operation, x)


def test_per_example_gradients_through_custom_rules_in_both_orders():
    x = real(4, 3)
    loss = lambda v: tnp.sum(log1pexp(v) * cube(v))                       # noqa: E731
    per_example = tnp.vmap(tnp.grad(loss))(x)
    for row, grad in zip(x, per_example):
        np.testing.assert_allclose(grad, tnp.grad(loss)(row), rtol=1e-12)
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(tnp.vmap(loss)(v)))(x), per_example,
                               rtol=1e-12)
