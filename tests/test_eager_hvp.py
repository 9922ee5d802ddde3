"""``tidu.eager.try_hvp``: Hessian-vector products by forward over reverse on the eager tape.

Random eager programs of three primitive sets (the tensor set, the scalar set,
and ``Tiny``, a set written here with only JVP and transpose rules and run by
an executor with only the two required hooks) are differentiated with
``try_hvp`` and checked against the functional ``tnp.hvp`` (tensor set),
central differences of eager gradients, and PyTorch's double backward (when
installed). Then: partial tangents, ``keep``, complex inputs (tidu's
convention), composite nodes with retained values, ops without a JVP rule
(``ADRuleError`` naming the op and ``JVP``), misuse, and a 10^5-node tape.
"""

from __future__ import annotations

import enum
import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from primitives import tensor as tnp
from primitives.scalar import ScalarExecutor
from primitives.scalar.eager import Scalar, cos, exp, hvp as scalar_hvp, real, sin
from primitives.tensor import autograd
from primitives.tensor.eager import NumpyExecutor
from tidu import ADRuleError, ADRuleKind, Primitive, TiduError
from tidu.eager import (BackwardExecutor, EagerError, EagerInput, RecordedGraph, Recorder,
                        try_backward, try_hvp)
from tidu.errors import InvalidArgumentError
from tidu.graph import (PRIMARY, EvaluableGraphOperation, External, Input, Linearized, Local,
                        compiled, evaluate)

from test_ad_random import bounded, random_dags
from test_eager_random import op_by_op

SETTINGS = settings(max_examples=8, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


class MinimalExecutor(BackwardExecutor):
    """Only the two required methods: its execute_forward is called per node (the seed's hooks)."""

    def execute_forward(self, graph, initial_data):
        return dict(zip(graph.output_keys, compiled(graph).run(initial_data)))

    def add_operands(self, a, b):
        return a + b


def assert_close(got, want, rtol=1e-9, atol=1e-11, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, what
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * max(1.0, np.abs(want).max()),
                               err_msg=str(what))


# --- random tensor programs --------------------------------------------------------------

SHAPES = {"a": (2, 3), "b": (3,), "c": (3, 2), "d": (2, 3)}
UNARY = ["sin", "cos", "tanh", "exp_sin", "square", "neg", "logsumexp", "mean0", "mix"]
BINARY = ["add", "mul", "sub"]


@st.composite
def tensor_programs(draw):
    """(steps, wrt, directions, seed): each step an op on earlier values (inputs a, b first)."""
    steps = []
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(UNARY + BINARY))
        arity = 2 if kind in BINARY else 1
        steps.append((kind, tuple(draw(st.integers(0, 1 + i)) for _ in range(arity))))
    wrt = sorted(draw(st.sets(st.sampled_from("abcd"), min_size=1)))
    directions = sorted(draw(st.sets(st.sampled_from(wrt))))
    return steps, wrt, directions, draw(st.integers(0, 2**16))


class TiduOps:
    sin, cos, tanh, exp, matmul, sum = tnp.sin, tnp.cos, tnp.tanh, tnp.exp, tnp.matmul, tnp.sum

    @staticmethod
    def logsumexp(v):
        return tnp.logsumexp(v, axis=-1, keepdims=True)

    @staticmethod
    def mean0(v):
        return tnp.mean(v, axis=0)

    @staticmethod
    def broadcast(v):
        return tnp.broadcast_to(v, (2, 3))


class TorchOps:
    def __init__(self):
        import torch
        self.sin, self.cos, self.tanh, self.exp = torch.sin, torch.cos, torch.tanh, torch.exp
        self.matmul, self.sum = torch.matmul, torch.sum
        self.logsumexp = lambda v: torch.logsumexp(v, dim=-1, keepdim=True)
        self.mean0 = lambda v: torch.mean(v, dim=0)
        self.broadcast = lambda v: torch.broadcast_to(v, (2, 3))


def run_program(ops, steps, values: dict):
    """The program's real scalar loss from input values ``a, b, c, d`` (any library)."""
    pool = [values["a"], values["b"]]
    for kind, args in steps:
        u = pool[args[0]]
        v = pool[args[-1]]
        if kind == "sin":
            r = ops.sin(u)
        elif kind == "cos":
            r = ops.cos(u)
        elif kind == "tanh":
            r = ops.tanh(u)
        elif kind == "exp_sin":
            r = ops.exp(ops.sin(u))
        elif kind == "square":
            r = u * u
        elif kind == "neg":
            r = -u
        elif kind == "logsumexp":
            r = ops.logsumexp(u) if len(u.shape) else u
        elif kind == "mean0":
            r = ops.mean0(u) if len(u.shape) else u
        elif kind == "mix":
            r = ops.matmul(ops.matmul(ops.broadcast(u), values["c"]), values["d"])
        elif kind == "add":
            r = u + v
        elif kind == "mul":
            r = u * v
        else:
            r = u - v
        pool.append(r)
    pool += [values["c"], values["d"]]
    loss = 0.0
    for weight, value in zip([0.7, -1.1, 0.4, 1.3, -0.6, 0.9, 0.5, -0.8, 1.2, 0.3], pool):
        loss = loss + weight * ops.sum(ops.sin(value))
    return loss


def program_inputs(seed):
    rng = np.random.default_rng(seed)
    values = {k: 0.6 * rng.standard_normal(shape) for k, shape in SHAPES.items()}
    vectors = {k: rng.standard_normal(shape) for k, shape in SHAPES.items()}
    return values, vectors


def eager_loss(steps, wrt, values):
    leaves = {k: tnp.tensor(v, requires_grad=k in wrt) for k, v in values.items()}
    return run_program(TiduOps, steps, leaves), leaves


def eager_gradients(steps, wrt, values) -> dict:
    loss, leaves = eager_loss(steps, wrt, values)
    grads = loss.backward()
    return {k: grads.grad(leaves[k]) for k in wrt}


def torch_hvp(steps, wrt, values, vectors) -> dict:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    leaves = {k: torch.tensor(v, requires_grad=k in wrt) for k, v in values.items()}
    loss = run_program(TorchOps(), steps, leaves)
    grads = torch.autograd.grad(loss, [leaves[k] for k in wrt], create_graph=True)
    dot = sum((g * torch.tensor(vectors[k])).sum() for g, k in zip(grads, wrt))
    hv = torch.autograd.grad(dot, [leaves[k] for k in wrt], allow_unused=True)
    return {k: np.zeros(SHAPES[k]) if h is None else h.detach().numpy() for k, h in zip(wrt, hv)}


def tidu_hvp(steps, wrt, directions, values, vectors, executor) -> dict:
    loss, leaves = eager_loss(steps, wrt, values)
    tangents = {leaves[k].key: vectors[k] for k in directions}
    grads, hv = try_hvp(loss.key, loss._trace, np.ones(()), tangents, executor)
    want = loss.backward().grad
    for k in wrt:                                     # the first result is try_backward's
        assert_close(grads[leaves[k].key], want(leaves[k]), what=k)
    return {k: hv.get(leaves[k].key, np.zeros(SHAPES[k])) for k in wrt}


@SETTINGS
@given(tensor_programs())
def test_tensor_programs_against_the_functional_hvp_and_finite_differences(program):
    steps, wrt, directions, seed = program
    values, vectors = program_inputs(seed)
    vectors = {k: vectors[k] if k in directions else np.zeros(SHAPES[k]) for k in SHAPES}
    for executor in (NumpyExecutor(), MinimalExecutor()):
        got = tidu_hvp(steps, wrt, directions, values, vectors, executor)
        functional = tnp.hvp(
            lambda *xs: run_program(TiduOps, steps, {**values, **dict(zip(wrt, xs))}),
            [values[k] for k in wrt], [vectors[k] for k in wrt])
        functional = [functional] if len(wrt) == 1 else functional
        for k, want in zip(wrt, functional):
            assert_close(got[k], want, what=(k, type(executor).__name__))
    eps = 1e-5
    up = eager_gradients(steps, wrt, {k: values[k] + eps * vectors[k] for k in SHAPES})
    down = eager_gradients(steps, wrt, {k: values[k] - eps * vectors[k] for k in SHAPES})
    for k in wrt:
        assert_close(got[k], (up[k] - down[k]) / (2 * eps), rtol=1e-5, atol=1e-6, what=k)


@SETTINGS
@given(tensor_programs())
def test_tensor_programs_against_pytorch_double_backward(program):
    steps, wrt, directions, seed = program
    values, vectors = program_inputs(seed)
    vectors = {k: vectors[k] if k in directions else np.zeros(SHAPES[k]) for k in SHAPES}
    want = torch_hvp(steps, wrt, values, vectors)
    got = tidu_hvp(steps, wrt, directions, values, vectors, NumpyExecutor())
    for k in wrt:
        assert_close(got[k], want[k], what=k)
    loss, leaves = eager_loss(steps, wrt, values)     # and through the autograd helper
    helper = autograd.hvp(loss, [leaves[k] for k in wrt], [vectors[k] for k in wrt])
    for k, h in zip(wrt, helper):
        assert_close(h, want[k], what=k)


# --- random scalar programs (the scalar set) ------------------------------------------------


def torch_scalar_graph(graph, leaves: dict):
    """The graph's outputs computed with PyTorch ops, from torch leaves by input key."""
    import torch
    from primitives.scalar import ScalarOp

    unary = {ScalarOp.SIN: torch.sin, ScalarOp.COS: torch.cos, ScalarOp.TANH: torch.tanh,
             ScalarOp.NEG: torch.neg, ScalarOp.EXP: torch.exp}
    binary = {ScalarOp.ADD: torch.add, ScalarOp.SUB: torch.sub, ScalarOp.MUL: torch.mul}
    values = {Input(k): v for k, v in leaves.items()}
    for op_key in graph.operation_keys:
        args = [values[k] for k in op_key.inputs]
        op = op_key.operation
        if op is ScalarOp.SINCOS:
            results = [torch.sin(args[0]), torch.cos(args[0])]
        else:
            results = [unary[op](*args) if op in unary else binary[op](*args)]
        values.update(zip(op_key.output_keys(), results))
    return [values[k] for k in graph.output_keys]


@SETTINGS
@given(random_dags())
def test_scalar_programs_against_finite_differences_and_pytorch(case):
    graph, wrt, primals, seed = case
    assume(bounded(graph, primals))
    rng = np.random.default_rng(seed)
    keys = sorted(primals)
    cts = [float(c) for c in rng.standard_normal(len(graph.output_keys))]
    direction = {k: float(rng.standard_normal()) for k in wrt}

    def loss_and_leaves(point):
        leaves = {k: Scalar(point[k], requires_grad=k in wrt) for k in keys}
        return sum(c * out for c, out in zip(cts, op_by_op(graph, leaves))), leaves

    def gradient(point):
        loss, leaves = loss_and_leaves(point)
        if not isinstance(loss, Scalar) or loss.trace is None:
            return {k: 0.0 for k in wrt}
        grads = try_backward(loss.key, loss.trace, 1.0, ScalarExecutor())
        return {k: grads.get(leaves[k].key, 0.0) for k in wrt}

    loss, leaves = loss_and_leaves(primals)
    assume(isinstance(loss, Scalar) and loss.trace is not None)
    tangents = {leaves[k].key: v for k, v in direction.items()}
    eps = 1e-5
    up = gradient({k: primals[k] + eps * direction.get(k, 0.0) for k in keys})
    down = gradient({k: primals[k] - eps * direction.get(k, 0.0) for k in keys})
    for executor in (ScalarExecutor(), MinimalExecutor()):
        _, hv = try_hvp(loss.key, loss.trace, 1.0, tangents, executor)
        for k in wrt:
            numeric = (up[k] - down[k]) / (2 * eps)
            assert abs(hv.get(leaves[k].key, 0.0) - numeric) <= 1e-5 + 1e-5 * abs(numeric)

    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    tleaves = {k: torch.tensor(primals[k], dtype=torch.float64, requires_grad=k in wrt)
               for k in keys}
    tloss = sum(c * out for c, out in zip(cts, torch_scalar_graph(graph, tleaves)))
    grads = torch.autograd.grad(tloss, [tleaves[k] for k in wrt], create_graph=True,
                                allow_unused=True)
    dot = sum(g * direction[k] for g, k in zip(grads, wrt) if g is not None and g.requires_grad)
    want = ([0.0] * len(wrt) if isinstance(dot, int)
            else torch.autograd.grad(dot, [tleaves[k] for k in wrt], allow_unused=True))
    for k, w in zip(wrt, want):
        w = 0.0 if w is None else float(w)
        assert abs(hv.get(leaves[k].key, 0.0) - w) <= 1e-10 + 1e-9 * abs(w)


# --- a primitive set written here: JVP and transpose rules only, no HVP rule -----------------


class Tiny(Primitive, EvaluableGraphOperation, enum.Enum):
    """Real scalars: ADD, MUL, NEG, SIN, COS, EXP."""

    ADD = "add"
    MUL = "mul"
    NEG = "neg"
    SIN = "sin"
    COS = "cos"
    EXP = "exp"

    @classmethod
    def add(cls):
        return cls.ADD

    def input_count(self):
        return 2 if self in (Tiny.ADD, Tiny.MUL) else 1

    def output_count(self):
        return 1

    def eval(self, ctx, xs):
        x = xs[0]
        return [{Tiny.ADD: lambda: x + xs[-1], Tiny.MUL: lambda: x * xs[-1],
                 Tiny.NEG: lambda: -x, Tiny.SIN: lambda: math.sin(x),
                 Tiny.COS: lambda: math.cos(x), Tiny.EXP: lambda: math.exp(x)}[self]()]

    def jvp_rule(self, b, primals, outputs, tangents, ctx):
        def mul(t, factor_ref):
            return b.add_primitive(Tiny.MUL, [Local(t), factor_ref], Linearized((True, False)))[0]

        if self is Tiny.ADD:
            present = [t for t in tangents if t is not None]
            if len(present) == 1:
                return present
            return b.add_primitive(Tiny.ADD, [Local(t) for t in present],
                                   Linearized((True, True)))
        if self is Tiny.NEG:
            return b.add_primitive(Tiny.NEG, [Local(tangents[0])], Linearized((True,)))
        if self is Tiny.MUL:
            terms = [mul(t, External(other)) for t, other in zip(tangents, reversed(primals))
                     if t is not None]
            if len(terms) == 1:
                return terms
            return b.add_primitive(Tiny.ADD, [Local(t) for t in terms], Linearized((True, True)))
        [t] = tangents
        if self is Tiny.EXP:
            return [mul(t, External(outputs[0]))]
        if self is Tiny.SIN:
            [d] = b.add_primitive(Tiny.COS, [External(primals[0])], PRIMARY)
            return [mul(t, Local(d))]
        [s] = b.add_primitive(Tiny.SIN, [External(primals[0])], PRIMARY)
        [d] = b.add_primitive(Tiny.NEG, [Local(s)], PRIMARY)
        return [mul(t, Local(d))]

    def transpose_rule(self, b, cotangents, inputs, role, ctx):
        [ct] = cotangents
        if self is Tiny.ADD:
            return [ct if linear else None for linear in role.active_mask]
        if self is Tiny.NEG:
            return b.add_primitive(Tiny.NEG, [Local(ct)], Linearized((True,)))
        if self is Tiny.MUL and role is not PRIMARY:
            linear = role.active_mask.index(True)
            [out] = b.add_primitive(Tiny.MUL, [Local(ct), inputs[1 - linear]],
                                    Linearized((True, False)))
            return [out, None] if linear == 0 else [None, out]
        raise ADRuleError(self.name, ADRuleKind.TRANSPOSE, "not linear")


class Var:
    """A tiny eager front end for ``Tiny``: its own eager record (key, trace, requires_grad,
    data)."""

    recorder = Recorder()
    shared = {}

    def __init__(self, data, requires_grad=False, key=None, trace=None):
        self.data, self.requires_grad, self.trace = data, requires_grad, trace
        self.key = key if key is not None else Input(self.recorder.fresh_input_keys(1)[0])

    def apply(self, op, *others):
        args = (self, *others)
        recorded = self.shared.get(op)
        if recorded is None:
            recorded = self.shared[op] = RecordedGraph.from_primitive(op, [f"x{i}" for i in
                                                                           range(len(args))])
        [value] = op.eval(None, [a.data for a in args])
        trace = self.recorder.record(recorded, args, [value])
        return Var(value) if trace is None else Var(value, True, trace.output_key, trace)


@st.composite
def tiny_programs(draw):
    steps = []
    for i in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(list(Tiny)))
        arity = op.input_count()
        steps.append((op, tuple(draw(st.integers(0, 1 + i)) for _ in range(arity))))
    unit = st.floats(-1.2, 1.2, allow_nan=False)
    return steps, [draw(unit), draw(unit)], [draw(unit), draw(unit)]


def run_tiny(steps, leaves, apply):
    pool = list(leaves)
    for op, args in steps:
        pool.append(apply(op, *[pool[i] for i in args]))
    loss = pool[2]
    for value in pool[3:]:
        loss = apply(Tiny.ADD, loss, value)
    return loss


@SETTINGS
@given(tiny_programs())
def test_a_set_with_only_jvp_and_transpose_rules_gets_eager_hvp(program):
    steps, point, direction = program

    def var_loss(at):
        leaves = [Var(v, requires_grad=True) for v in at]
        return run_tiny(steps, leaves, lambda op, *a: a[0].apply(op, *a[1:])), leaves

    def gradient(at):
        loss, leaves = var_loss(at)
        grads = try_backward(loss.key, loss.trace, 1.0, MinimalExecutor())
        return [grads.get(leaf.key, 0.0) for leaf in leaves]

    loss, leaves = var_loss(point)
    assume(all(abs(v) < 1e3 for v in (loss.data, *gradient(point))))
    _, hv = try_hvp(loss.key, loss.trace, 1.0, dict(zip([x.key for x in leaves], direction)),
                    MinimalExecutor())
    got = [hv.get(x.key, 0.0) for x in leaves]
    eps = 1e-5
    up = gradient([p + eps * d for p, d in zip(point, direction)])
    down = gradient([p - eps * d for p, d in zip(point, direction)])
    for g, u, d in zip(got, up, down):
        numeric = (u - d) / (2 * eps)
        assert abs(g - numeric) <= 1e-5 + 1e-5 * abs(numeric)

    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    functions = {Tiny.ADD: torch.add, Tiny.MUL: torch.mul, Tiny.NEG: torch.neg,
                 Tiny.SIN: torch.sin, Tiny.COS: torch.cos, Tiny.EXP: torch.exp}
    tleaves = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in point]
    tloss = run_tiny(steps, tleaves, lambda op, *a: functions[op](*a))
    grads = torch.autograd.grad(tloss, tleaves, create_graph=True, allow_unused=True)
    dot = sum(g * d for g, d in zip(grads, direction) if g is not None and g.requires_grad)
    want = ([None] * 2 if isinstance(dot, int)
            else torch.autograd.grad(dot, tleaves, allow_unused=True))
    for g, w in zip(got, want):
        w = 0.0 if w is None else float(w)
        assert abs(g - w) <= 1e-10 + 1e-9 * abs(w)


# --- semantics ------------------------------------------------------------------------------


def test_leaves_not_named_have_zero_tangent_and_the_seed_scales_both_results():
    x, y = Scalar(0.4, requires_grad=True), Scalar(1.5, requires_grad=True)
    f = sin(x) * y * y               # H = [[-sin x y^2, 2y cos x], [2y cos x, 2 sin x]]
    grads, hv = try_hvp(f.key, f.trace, 2.0, {y.key: 1.0}, ScalarExecutor())
    assert math.isclose(grads[x.key], 2 * math.cos(0.4) * 1.5 ** 2)
    assert math.isclose(hv[x.key], 2 * 2 * 1.5 * math.cos(0.4))
    assert math.isclose(hv[y.key], 2 * 2 * math.sin(0.4))
    _, none = try_hvp(f.key, f.trace, 1.0, {}, ScalarExecutor())
    assert none == {}                                # zero tangents everywhere: all zero


def test_keep_restricts_both_results_to_the_same_values():
    x = tnp.tensor(np.array([0.3, -0.8]), requires_grad=True)
    h = tnp.sin(x) * x
    loss = tnp.sum(h * h)
    tangents = {x.key: np.array([1.0, 2.0])}
    full = try_hvp(loss.key, loss._trace, np.ones(()), tangents, NumpyExecutor())
    assert h.key in full[0] and h.key in full[1]     # intermediates too, by default
    kept = try_hvp(loss.key, loss._trace, np.ones(()), tangents, NumpyExecutor(), keep={x.key})
    assert set(kept[0]) == set(kept[1]) == {x.key}
    np.testing.assert_array_equal(kept[1][x.key], full[1][x.key])
    np.testing.assert_array_equal(kept[0][x.key], full[0][x.key])
    # the Hessian-vector product alone: the leaf's cotangent is not computed
    only = try_hvp(loss.key, loss._trace, np.ones(()), tangents, NumpyExecutor(),
                   keep={x.key}, leaf_cotangents=False)
    assert only[0] == {} and set(only[1]) == {x.key}
    np.testing.assert_array_equal(only[1][x.key], full[1][x.key])


def test_the_trace_is_unchanged_and_try_hvp_can_run_again_with_other_tangents():
    x = Scalar(0.9, requires_grad=True)
    f = exp(sin(x)) * x
    first = try_hvp(f.key, f.trace, 1.0, {x.key: 1.0}, ScalarExecutor())
    assert try_hvp(f.key, f.trace, 1.0, {x.key: 1.0}, ScalarExecutor()) == first
    doubled = try_hvp(f.key, f.trace, 1.0, {x.key: 2.0}, ScalarExecutor())[1][x.key]
    assert math.isclose(doubled, 2 * first[1][x.key])
    assert f.backward()[x.key] == first[0][x.key]


def test_multi_output_op_seeded_on_one_slot():
    from primitives.scalar.eager import sincos
    x = Scalar(0.6, requires_grad=True)
    s, c = sincos(x * x)                       # d²/dx² cos(x²) = -2 sin(x²) - 4x² cos(x²)
    _, hv = try_hvp(c.key, c.trace, 1.0, {x.key: 1.0}, ScalarExecutor())
    assert math.isclose(hv[x.key], -2 * math.sin(0.36) - 4 * 0.36 * math.cos(0.36))


def test_a_composite_node_with_and_without_retained_values():
    from primitives.scalar import trace_scalar
    block = trace_scalar(lambda a, b: sin(a) * b * a, ["a", "b"])
    recorded = RecordedGraph(block, ["a", "b"], block.output_keys)
    inner = [key for key in block.value_keys if key not in block.input_keys][:1]
    for retained in (None, inner):
        recorder = Recorder()
        u = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.3)
        v = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 1.7)
        values = compiled(block).run({Input("a"): 0.3, Input("b"): 1.7})
        kept = None if retained is None else dict(zip(retained, evaluate(
            block, retained, {Input("a"): 0.3, Input("b"): 1.7})))
        [out] = recorder.record_graph(recorded, [u, v], values, kept)
        _, hv = try_hvp(out.key, out.trace, 1.0, {u.key: 1.0, v.key: -1.0}, ScalarExecutor())
        # f = a b sin a: f_aa = b (2 cos a - a sin a), f_ab = sin a + a cos a, f_bb = 0
        f_aa = 1.7 * (2 * math.cos(0.3) - 0.3 * math.sin(0.3))
        f_ab = math.sin(0.3) + 0.3 * math.cos(0.3)
        assert math.isclose(hv[u.key], f_aa - f_ab) and math.isclose(hv[v.key], f_ab)


def test_checkpointed_block():
    x = tnp.tensor(np.array([0.2, 1.1]), requires_grad=True)
    loss = tnp.sum(tnp.checkpoint(lambda v: tnp.sin(v) * v * v)(x))
    v = np.array([1.0, -0.5])
    want = (2 * np.sin(x.data) + 4 * x.data * np.cos(x.data) - x.data ** 2 * np.sin(x.data)) * v
    np.testing.assert_allclose(autograd.hvp(loss, x, v), want, rtol=1e-12)


# --- complex numbers ------------------------------------------------------------------------


def test_complex_tensor_inputs_follow_the_convention():
    rng = np.random.default_rng(3)
    z0 = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    w = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    v = rng.standard_normal(3) + 1j * rng.standard_normal(3)

    def loss(z):
        return tnp.sum(tnp.real(tnp.sin(z) * w * tnp.conj(z))) + tnp.sum(tnp.abs(z * z) ** 2)

    def gradient(at):
        z = tnp.tensor(at, requires_grad=True)
        return loss(z).backward().grad(z)

    z = tnp.tensor(z0, requires_grad=True)
    got = autograd.hvp(loss(z), z, v)
    eps = 1e-6
    numeric = (gradient(z0 + eps * v) - gradient(z0 - eps * v)) / (2 * eps)
    np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got, tnp.hvp(loss, [z0], [v]), rtol=1e-12)
    # |z|^2: the real Hessian is 2 I, so H v = 2 v
    np.testing.assert_allclose(autograd.hvp(tnp.sum(tnp.abs(z) ** 2), z, v), 2 * v, rtol=1e-12)


def test_complex_scalar_inputs_follow_the_convention():
    z = Scalar(0.3 + 0.8j, requires_grad=True)
    f = real(z * z * z)              # Re z^3 = a^3 - 3ab^2: H = [[6a, -6b], [-6b, -6a]]
    a, b = 0.3, 0.8
    hv = scalar_hvp(f, z, 1.0 + 2.0j)                # v = (1, 2)
    assert abs(hv - complex(6 * a - 12 * b, -6 * b - 12 * a)) < 1e-12


@SETTINGS
@given(random_dags(complex_values=True, extra_kinds=("CONJ",)))
def test_complex_scalar_programs_against_finite_differences(case):
    graph, wrt, primals, seed = case
    assume(bounded(graph, primals, limit=1e2))
    rng = np.random.default_rng(seed)
    keys = sorted(primals)
    cts = [complex(*rng.standard_normal(2)) for _ in graph.output_keys]
    direction = {k: complex(*rng.standard_normal(2)) for k in wrt}

    def loss_and_leaves(point):
        leaves = {k: Scalar(point[k], requires_grad=k in wrt) for k in keys}
        outputs = op_by_op(graph, leaves)
        return sum(real(c * out) for c, out in zip(cts, outputs)), leaves

    def gradient(point):
        loss, leaves = loss_and_leaves(point)
        grads = try_backward(loss.key, loss.trace, 1.0, ScalarExecutor())
        return {k: grads.get(leaves[k].key, 0.0) for k in wrt}

    loss, leaves = loss_and_leaves(primals)
    _, hv = try_hvp(loss.key, loss.trace, 1.0, {leaves[k].key: v for k, v in direction.items()},
                    ScalarExecutor())
    eps = 1e-6
    up = gradient({k: primals[k] + eps * direction.get(k, 0.0) for k in keys})
    down = gradient({k: primals[k] - eps * direction.get(k, 0.0) for k in keys})
    for k in wrt:
        numeric = (up[k] - down[k]) / (2 * eps)
        assert abs(hv.get(leaves[k].key, 0.0) - numeric) <= 1e-5 + 1e-5 * abs(numeric)


# --- errors ---------------------------------------------------------------------------------


class Partial(Primitive, EvaluableGraphOperation, enum.Enum):
    """CUBE has rules, but its JVP emits THREE_SQUARES, which has no JVP rule; OPAQUE has none."""

    CUBE = "cube"
    THREE_SQUARES = "three_squares"
    OPAQUE = "opaque"
    MUL = "mul"
    ADD = "add"

    @classmethod
    def add(cls):
        return cls.ADD

    def input_count(self):
        return 2 if self in (Partial.MUL, Partial.ADD) else 1

    def output_count(self):
        return 1

    def eval(self, ctx, xs):
        x = xs[0]
        return [{Partial.CUBE: x ** 3, Partial.THREE_SQUARES: 3 * x * x, Partial.OPAQUE: x,
                 Partial.MUL: x * xs[-1], Partial.ADD: x + xs[-1]}[self]]

    def jvp_rule(self, b, primals, outputs, tangents, ctx):
        if self is Partial.CUBE:
            [d] = b.add_primitive(Partial.THREE_SQUARES, [External(primals[0])], PRIMARY)
            return b.add_primitive(Partial.MUL, [Local(tangents[0]), Local(d)],
                                   Linearized((True, False)))
        if self is Partial.MUL:           # only ever linear in its first input here
            return b.add_primitive(Partial.MUL, [Local(tangents[0]), External(primals[1])],
                                   Linearized((True, False)))
        raise ADRuleError(self.name, ADRuleKind.JVP)

    def transpose_rule(self, b, cotangents, inputs, role, ctx):
        if self is Partial.MUL and role is not PRIMARY:
            return [b.add_primitive(Partial.MUL, [Local(cotangents[0]), inputs[1]],
                                    Linearized((True, False)))[0], None]
        raise ADRuleError(self.name, ADRuleKind.TRANSPOSE)


def _partial_node(op, value=0.5):
    recorder = Recorder()
    x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, value)
    recorded = RecordedGraph.from_primitive(op, recorder.fresh_input_keys(1))
    [y] = recorder.record_graph(recorded, [x], op.eval(None, [value]))
    return x, y


def test_an_op_without_jvp_rule_in_the_backward_work_raises_naming_it():
    x, y = _partial_node(Partial.CUBE)
    assert try_backward(y.key, y.trace, 1.0, MinimalExecutor())[x.key] == 3 * 0.25   # works
    with pytest.raises(ADRuleError) as caught:
        try_hvp(y.key, y.trace, 1.0, {x.key: 1.0}, MinimalExecutor())
    assert caught.value.op == "THREE_SQUARES" and caught.value.rule is ADRuleKind.JVP
    assert "THREE_SQUARES" in str(caught.value) and "jvp" in str(caught.value)
    # zero tangents need no JVP: the plain backward runs
    assert try_hvp(y.key, y.trace, 1.0, {}, MinimalExecutor()) == ({x.key: 0.75, y.key: 1.0}, {})


def test_an_op_without_any_jvp_rule_raises_naming_it_and_tidu_stays_usable():
    x, y = _partial_node(Partial.OPAQUE)
    with pytest.raises(ADRuleError) as caught:
        try_hvp(y.key, y.trace, 1.0, {x.key: 1.0}, MinimalExecutor())
    assert caught.value.op == "OPAQUE" and caught.value.rule is ADRuleKind.JVP
    assert isinstance(caught.value, TiduError)
    s = Scalar(0.5, requires_grad=True)
    assert math.isclose(scalar_hvp(sin(s), s, 1.0), -math.sin(0.5))


def test_misuse_raises_clear_errors():
    x = Scalar(0.5, requires_grad=True)
    y = sin(x) * x
    z = cos(y)
    with pytest.raises(InvalidArgumentError, match="tangents must be a mapping"):
        try_hvp(z.key, z.trace, 1.0, [1.0], ScalarExecutor())
    with pytest.raises(EagerError, match="only leaves take tangents"):
        try_hvp(z.key, z.trace, 1.0, {y.key: 1.0}, ScalarExecutor())
    with pytest.raises(InvalidArgumentError, match="try_hvp needs a BackwardExecutor"):
        try_hvp(z.key, z.trace, 1.0, {}, ScalarExecutor)
    with pytest.raises(InvalidArgumentError, match="try_hvp: the seed"):
        try_hvp(z.key, z.trace, None, {}, ScalarExecutor())
    with pytest.raises(TiduError, match="complex"):
        try_hvp(z.key, z.trace, 1j, {}, ScalarExecutor())
    with pytest.raises(EagerError, match="not an output"):
        try_hvp(y.key, z.trace, 1.0, {}, ScalarExecutor())
    assert math.isclose(try_hvp(z.key, z.trace, 1.0, {x.key: 1.0}, ScalarExecutor())[0][x.key],
                        z.backward()[x.key])


def test_helper_misuse():
    x = tnp.tensor(np.ones(2), requires_grad=True)
    c = tnp.tensor(np.ones(2))
    loss = tnp.sum(x * x * c)
    for args, message in [((loss, x, np.ones(3)), "shape"),
                          ((loss, [x, x], [np.ones(2)] * 2), "twice"),
                          ((loss, c, np.ones(2)), "leaf tensor that requires grad"),
                          ((loss, x * 2, np.ones(2)), "leaf tensor that requires grad"),
                          ((x * x, x, np.ones(2)), "real scalar"),
                          ((loss, x, np.ones(2) * 1j), "dtype"),
                          ((loss, [x], [np.ones(2)] * 2), "2 vectors for 1 params")]:
        with pytest.raises(tnp.BackwardError, match=message):
            autograd.hvp(*args)
    np.testing.assert_array_equal(autograd.hvp(loss, x, np.array([1.0, 3.0])), [2.0, 6.0])
    assert x.grad is None                               # hvp leaves .grad alone


# --- a long tape -----------------------------------------------------------------------------


def test_hundred_thousand_nodes_without_recursion():
    steps = 33_334                                   # 3 recorded ops per step
    start = time.perf_counter()
    x = Scalar(0.5, requires_grad=True)
    c = Scalar(0.1, requires_grad=True)
    y = x
    for _ in range(steps):
        y = sin(y) * y + c
    grads, hv = try_hvp(y.key, y.trace, 1.0, {c.key: 1.0}, ScalarExecutor(),
                        keep={x.key, c.key})
    elapsed = time.perf_counter() - start
    # forward mode by hand: y' = sin(y) y + c; b = dy/dc, C = d²y/dc²
    v, b, second = 0.5, 0.0, 0.0
    for _ in range(steps):
        slope = math.cos(v) * v + math.sin(v)
        curvature = 2 * math.cos(v) - v * math.sin(v)
        v, b, second = math.sin(v) * v + 0.1, slope * b + 1.0, curvature * b * b + slope * second
    assert math.isclose(grads[c.key], b, rel_tol=1e-9)
    assert math.isclose(hv[c.key], second, rel_tol=1e-9)
    assert elapsed < 20                       # generous: a loaded machine; typically ~2 s


def test_scalar_helper_misuse():
    x, y = Scalar(0.5, requires_grad=True), Scalar(1.5)
    loss = x * x * y
    for args, message in [((loss, x, "1"), "must be a number"),
                          ((loss, x, 1j), "complex only for a complex input"),
                          ((loss, y, 1.0), "leaf Scalar that requires grad"),
                          ((loss, x * 2, 1.0), "leaf Scalar that requires grad"),
                          ((loss, [x, x], [1.0, 1.0]), "twice"),
                          ((loss, [x], [1.0, 2.0]), "2 vectors for 1 inputs"),
                          ((Scalar(1j, requires_grad=True), x, 1.0), "real Scalar")]:
        with pytest.raises(EagerError, match=message):
            scalar_hvp(*args)
    assert scalar_hvp(loss, x, 2.0) == 2 * 2 * 1.5


def test_threads_share_the_plan_caches_safely():
    import threading
    rng = np.random.default_rng(7)
    w0, v = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    x = rng.standard_normal((5, 3))

    def loss(w):
        return tnp.sum(tnp.tanh(tnp.matmul(x, w)) ** 2)

    want = tnp.hvp(loss, [w0], [v])
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                w = tnp.tensor(w0, requires_grad=True)
                results.append(autograd.hvp(loss(w), w, v))
                (g,) = autograd.grad(loss(w), w, create_graph=True)
                results.append(autograd.grad(tnp.sum(g * v), w)[0].data)
        except Exception as error:           # reported below, with the thread's traceback lost
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 40
    for got in results:
        np.testing.assert_allclose(got, want, rtol=1e-12)
