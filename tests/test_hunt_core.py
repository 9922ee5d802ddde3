"""Hostile checks of the core and the eager tape: each test failed before its fix."""

from __future__ import annotations

import copy
import enum
import math
import pickle

import numpy as np
import pytest

import primitives.tensor as tnp
import tidu
from tidu import linear_transpose, linearize
from tidu.eager import BackwardExecutor, EagerInput, RecordedGraph, Recorder, try_backward
from tidu.example_ops import Op
from tidu.graph import (PRIMARY, EvaluableGraphOperation, External, GraphBuilder, Input,
                        Linearized, Local, compiled, evaluate)
from primitives.scalar.eager import ImmutableScalarError, Scalar, sin
from primitives.tensor import autograd


# --- create_graph gradients are distinct tensors ------------------------------------------


def test_create_graph_gradients_are_not_the_seed_nor_each_other():
    # x + y passes the seed on to both inputs: each gradient must be its own tensor, and
    # neither may be the caller's seed (writing x.grad.data would change it)
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    y = tnp.tensor([3.0, 4.0], requires_grad=True)
    w = tnp.tensor([1.0, 1.0], requires_grad=True)
    seed = w * 2
    grads = (x + y).backward(seed, create_graph=True)
    gx, gy = grads.grad(x), grads.grad(y)
    assert gx is not seed and gy is not seed and gx is not gy
    assert x.grad is not seed and x.grad is not y.grad
    x.grad.data[:] = 0.0                        # (x.grad is gx, as tests/test_create_graph.py has it)
    np.testing.assert_array_equal(seed.data, [2.0, 2.0])
    np.testing.assert_array_equal(gy.data, [2.0, 2.0])
    gy.data[0] = 7.0
    np.testing.assert_array_equal(seed.data, [2.0, 2.0])
    # the gradients keep their history (the seed 2 w): d/dw sum(grad(y)) = 2
    np.testing.assert_array_equal(tnp.sum(grads.grad(y) * 1.0).backward().grad(w), [2.0, 2.0])


def test_autograd_grad_create_graph_does_not_return_grad_outputs():
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    w = tnp.tensor([1.0, 1.0], requires_grad=True)
    seed = w * 3
    (gx,) = autograd.grad(x * 1.0 + 0.0, x, grad_outputs=seed, create_graph=True)
    (gx2,) = autograd.grad(x + 0.0, x, grad_outputs=seed, create_graph=True)
    assert gx2 is not seed
    gx2.data[:] = -1.0
    np.testing.assert_array_equal(seed.data, [3.0, 3.0])
    np.testing.assert_array_equal(gx.data, [3.0, 3.0])


# --- autograd.hvp results are distinct ------------------------------------------------------


def test_hvp_results_do_not_share_memory():
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    y = tnp.tensor([3.0, 4.0], requires_grad=True)
    hx, hy = autograd.hvp(tnp.sum((x + y) ** 2), [x, y], [np.ones(2), np.ones(2)])
    np.testing.assert_array_equal(hx, [4.0, 4.0])
    assert not np.shares_memory(hx, hy)
    hx[0] = 99.0
    np.testing.assert_array_equal(hy, [4.0, 4.0])


# --- the eager Scalar is immutable ----------------------------------------------------------


def test_scalar_data_cannot_change_under_a_recording():
    x = Scalar(3.0, requires_grad=True)
    c = Scalar(2.0)
    y = x * x * c
    for target, name, value in ((x, "data", 10.0), (c, "data", 5.0), (y, "data", 1.0),
                                (x, "key", 5), (y, "trace", None), (y, "requires_grad", False)):
        with pytest.raises(ImmutableScalarError, match=name):
            setattr(target, name, value)
    with pytest.raises(tidu.TiduError):
        del x.data
    assert y.backward()[x.key] == 12.0          # 2 * c * x, with the recorded values


def test_scalar_leaf_may_still_be_set_up():
    z = Scalar(2.0)
    z.requires_grad = True                      # a leaf: as for Tensor
    assert (z * z).backward()[z.key] == 4.0
    x = Scalar(0.5, requires_grad=True)
    y = sin(x)
    wrapped = Scalar(y.data, True)              # wrapping an eager record, once
    wrapped.trace, wrapped.key = y.trace, y.key
    assert wrapped.backward()[x.key] == y.backward()[x.key]
    with pytest.raises(ImmutableScalarError):
        wrapped.key = x.key
    with pytest.raises(tidu.TiduError):
        Scalar(True).requires_grad = True       # a bool cannot require grad


def test_scalar_pickle_and_copy_of_a_long_history():
    x = Scalar(0.5, requires_grad=True)
    v = x
    for _ in range(5000):                       # deeper than the recursion limit
        v = sin(v)
    loaded = pickle.loads(pickle.dumps(v))      # a leaf, as a Tensor pickles
    assert loaded.data == v.data and loaded.requires_grad and loaded.trace is None
    assert copy.copy(v) is v and copy.deepcopy(v) is v
    assert copy.deepcopy([v])[0].backward()[x.key] == v.backward()[x.key]


# --- rules whose work is not linear in the tangents ------------------------------------------

_LIN = Linearized((True,))


class _Sloppy(tidu.Primitive, EvaluableGraphOperation, enum.Enum):
    """Ops with broken rules: work on a tangent or cotangent that is not linear in it."""

    SIN_OF_TANGENT = "sin_of_tangent"         # JVP: sin(dx), emitted as PRIMARY work
    MASKED_TANGENT = "masked_tangent"         # JVP: dx * cos(x) with dx marked constant
    DOUBLE = "double"                         # 2x, whose transpose is sin(ct), PRIMARY
    RAISING = "raising"                       # a JVP rule with a bug of its own

    @classmethod
    def add(cls):
        return Op.ADD

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, inputs):
        return [2 * inputs[0] if self is _Sloppy.DOUBLE else math.sin(inputs[0])]

    def jvp_rule(self, builder, primals, outputs, tangents, ctx):
        (dx,) = tangents
        if self is _Sloppy.SIN_OF_TANGENT:
            return builder.add_primitive(Op.SIN, [Local(dx)], PRIMARY)
        if self is _Sloppy.MASKED_TANGENT:
            cos = builder.add_primitive(Op.COS, [External(primals[0])], PRIMARY)[0]
            return builder.add_primitive(Op.MUL, [Local(dx), Local(cos)], Linearized((False, True)))
        if self is _Sloppy.RAISING:
            raise KeyError("a bug in the rule")
        return builder.add_primitive(self, [Local(dx)], _LIN)

    def transpose_rule(self, builder, cotangents, inputs, role, ctx):
        return builder.add_primitive(Op.SIN, [Local(cotangents[0])], PRIMARY)


class _Executor(BackwardExecutor):
    def execute_forward(self, graph, data):
        return dict(zip(graph.output_keys, compiled(graph).run(data)))

    def add_operands(self, a, b):
        return a + b


def _one_op_graph(op):
    builder = GraphBuilder()
    x = builder.add_input("x")
    builder.set_outputs(builder.add_operation(op, [Local(x)]))
    return builder.build()


@pytest.mark.parametrize("op, kind", [(_Sloppy.SIN_OF_TANGENT, "jvp"),
                                      (_Sloppy.MASKED_TANGENT, "jvp"),
                                      (_Sloppy.DOUBLE, "transpose")])
def test_work_not_linear_in_a_tangent_is_refused(op, kind):
    graph = _one_op_graph(op)
    match = f"{kind} rule of {op.name}: it emitted (SIN|MUL) reading the"

    def graph_vjp():
        linear = linearize(graph, graph.output_keys, ["x"])
        transposed = linear_transpose(linear)
        return evaluate([graph, linear.graph, transposed.graph], transposed.tangent_output_keys,
                        {Input("x"): 0.3, transposed.tangent_input_keys[0]: 1.0})

    def eager_vjp():
        recorder = Recorder()
        x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.3)
        node = recorder.record(RecordedGraph.from_primitive(op, ["a"]), [x], op.eval(None, [0.3]))
        return try_backward(node.output_key, node, 1.0, _Executor())[x.key]

    for vjp in (graph_vjp, eager_vjp):       # before: sin(1.0) or cos(0.3), silently
        with pytest.raises(tidu.RuleContractError, match=match):
            vjp()
    graph = _one_op_graph(Op.SINCOS)           # rules that keep to the contract still pass
    linear_transpose(linearize(graph, graph.output_keys, ["x"]))


def test_a_rule_raising_its_own_error_is_named():
    graph = _one_op_graph(_Sloppy.RAISING)
    with pytest.raises(KeyError) as raised:
        linearize(graph, graph.output_keys, ["x"])
    if hasattr(raised.value, "add_note"):
        assert "(raised by the jvp rule of RAISING)" in raised.value.__notes__
