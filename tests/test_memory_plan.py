"""The memory plan of compiled programs: reused buffers never hold a value that is read later.

A compiled :class:`tidu.graph.Program` tells an operation with the
``eval_reusing`` hook which of its inputs die at its step (read for the last
time, made by the program, not an output). Two op sets check that promise:

- ``Box`` ops written here, whose ``eval_reusing`` writes into the first
  reusable input *without any check of its own*: any mistake in tidu's liveness
  changes a result, which the tests compare with an evaluation that never
  reuses anything;
- the NumPy tensor set, whose ``eval_reusing`` also checks that nothing else
  (a view, another register holding the same array) uses the buffer: its
  random graphs mix elementwise ops with ops that return views or their input
  itself.

Graphs are random DAGs with fan-out (hypothesis); outputs may be inputs, repeat,
or alias each other; the caller's values are checked to be unchanged.
"""

from __future__ import annotations

import contextlib
import enum
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidu.graph import EvaluableGraphOperation, GraphBuilder, Input, Local, Program, evaluate
from tidu.graph import program as program_module
from primitives.tensor import buffers
from primitives.tensor.eager.executor import NumpyExecutor
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.elementwise import ConvertElementType
from primitives.tensor.ops.shape import Reshape, Transpose


@pytest.fixture(params=["straight-line", "interpreter"])
def form(request, monkeypatch):
    """Run a test with small programs as generated code, then with the step loop."""
    if request.param == "interpreter":
        monkeypatch.setattr(program_module, "_STRAIGHT_LINE_MAX_STEPS", -1)
    return request.param


def run_both_forms(program: Program, input_keys: list, values: list) -> list[list]:
    """``program``'s outputs from generated straight-line code and from the step loop."""
    results = []
    for limit in (10_000, -1):
        saved = program_module._STRAIGHT_LINE_MAX_STEPS
        program_module._STRAIGHT_LINE_MAX_STEPS = limit
        try:
            results.append(program.runner(input_keys)(values))
        finally:
            program_module._STRAIGHT_LINE_MAX_STEPS = saved
    return results


# --- a set that trusts tidu: eval_reusing writes into the first reusable input, unchecked ------


class Box:
    """A mutable number: an op that writes into a box changes it for every holder."""

    __slots__ = ("value",)

    def __init__(self, value: float) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Box({self.value!r})"


IN_PLACE_WRITES = [0]


class BoxOp(EvaluableGraphOperation, enum.Enum):
    NEG = "neg"
    SIN = "sin"
    ADD = "add"
    MUL = "mul"
    SUB = "sub"
    SUM_DIFF = "sum_diff"         # two outputs: a + b, a - b

    def input_count(self):
        return 1 if self in (BoxOp.NEG, BoxOp.SIN) else 2

    def output_count(self):
        return 2 if self is BoxOp.SUM_DIFF else 1

    def numbers(self, inputs) -> list:
        a = inputs[0].value
        b = inputs[1].value if len(inputs) > 1 else None
        return {BoxOp.NEG: lambda: [-a], BoxOp.SIN: lambda: [math.sin(a)],
                BoxOp.ADD: lambda: [a + b], BoxOp.MUL: lambda: [a * b],
                BoxOp.SUB: lambda: [a - b], BoxOp.SUM_DIFF: lambda: [a + b, a - b]}[self]()

    def eval(self, ctx, inputs):
        return [Box(v) for v in self.numbers(inputs)]

    def eval_reusing(self, ctx, inputs, reusable):
        numbers = self.numbers(inputs)
        out = inputs[reusable[0]]                 # no check: tidu's promise is all we have
        out.value = numbers[0]
        IN_PLACE_WRITES[0] += 1
        return [out] + [Box(v) for v in numbers[1:]]


class PlainSin(EvaluableGraphOperation, enum.Enum):
    """An op without the hook, mixed in."""

    SIN = "plain_sin"

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, inputs):
        return [Box(math.sin(inputs[0].value))]


OPS = [BoxOp.NEG, BoxOp.SIN, BoxOp.ADD, BoxOp.MUL, BoxOp.SUB, BoxOp.SUM_DIFF, PlainSin.SIN]


def random_box_graph(seed: int, n_inputs: int, n_ops: int):
    """A DAG whose ops read recent values (fan-out) and whose outputs may repeat or be inputs."""
    rng = random.Random(seed)
    builder = GraphBuilder()
    ids = [builder.add_input(f"x{i}") for i in range(n_inputs)]
    for _ in range(n_ops):
        op = rng.choice(OPS)
        window = ids[-6:]
        ids += builder.add_operation(op, [Local(rng.choice(window))
                                          for _ in range(op.input_count())])
    outputs = [rng.choice(ids) for _ in range(rng.randint(1, 4))]
    builder.set_outputs(outputs)
    return builder.build()


def reference(graph, values: dict) -> list:
    """The outputs by plain evaluation: every op on fresh boxes, nothing freed or reused."""
    env = dict(values)
    for op_key in graph.operation_keys:
        results = op_key.operation.eval(None, [env[k] for k in op_key.inputs])
        env.update(zip(op_key.output_keys(), results))
    return [env[k].value for k in graph.output_keys]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_inputs=st.integers(1, 3), n_ops=st.integers(0, 40))
def test_reused_buffers_never_hold_a_value_read_later(seed, n_inputs, n_ops):
    graph = random_box_graph(seed, n_inputs, n_ops)
    numbers = [0.3 + 0.4 * i for i in range(n_inputs)]
    want = reference(graph, {Input(f"x{i}"): Box(v) for i, v in enumerate(numbers)})
    input_keys = list(graph.input_keys)
    boxes = [Box(v) for v in numbers]
    for got in run_both_forms(Program(graph), input_keys, boxes):
        assert [b.value for b in got] == want
        assert [b.value for b in boxes] == numbers          # the caller's values: untouched
        keys = graph.output_keys
        for i in range(len(keys)):                          # distinct values: distinct boxes
            for j in range(i):
                assert (got[i] is got[j]) == (keys[i] == keys[j])
    by_key = {key: Box(v) for key, v in zip(input_keys, numbers)}
    got = evaluate(graph, graph.output_keys, by_key)
    assert [b.value for b in got] == want
    assert [by_key[k].value for k in input_keys] == numbers


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_ops=st.integers(1, 30))
def test_evaluate_never_writes_into_given_intermediate_values(seed, n_ops):
    # The caller supplies some intermediate values: their producers do not run, and the
    # given boxes must come back unchanged though they die inside the program.
    graph = random_box_graph(seed, 2, n_ops)
    rng = random.Random(seed)
    values = {Input("x0"): Box(0.3), Input("x1"): Box(0.7)}
    env = dict(values)
    for op_key in graph.operation_keys:
        env.update(zip(op_key.output_keys(), op_key.operation.eval(None, [env[k] for k in
                                                                          op_key.inputs])))
    given = {k: Box(env[k].value) for k in rng.sample(sorted(env, key=repr), min(3, len(env)))}
    values.update(given)
    snapshot = {k: b.value for k, b in values.items()}
    got = evaluate(graph, graph.output_keys, values)
    assert [b.value for b in got] == [env[k].value for k in graph.output_keys]
    assert {k: b.value for k, b in values.items()} == snapshot


def test_a_chain_reuses_one_buffer(form):
    # x -> neg -> sin -> neg ...: after the first op, every op writes into its input.
    builder = GraphBuilder()
    value = builder.add_input("x")
    for op in [BoxOp.NEG, BoxOp.SIN] * 5:
        [value] = builder.add_operation(op, [Local(value)])
    builder.set_outputs([value])
    graph = builder.build()
    IN_PLACE_WRITES[0] = 0
    x = Box(0.5)
    [out] = Program(graph).runner(graph.input_keys)([x])
    assert IN_PLACE_WRITES[0] == 9 and x.value == 0.5
    want = 0.5
    for _ in range(5):
        want = math.sin(-want)
    assert out.value == want


def test_an_input_read_twice_by_one_step_is_not_offered(form):
    builder = GraphBuilder()
    x = builder.add_input("x")
    [s] = builder.add_operation(BoxOp.SIN, [Local(x)])
    [m] = builder.add_operation(BoxOp.MUL, [Local(s), Local(s)])      # s * s
    builder.set_outputs([m])
    graph = builder.build()
    [step_sin, step_mul] = Program(graph).steps
    assert step_mul[6] == ()              # reusable positions: none (s is read twice)
    [out] = Program(graph).runner(graph.input_keys)([Box(0.5)])
    assert out.value == math.sin(0.5) ** 2


# --- the NumPy set: views and identity results, checked by the set ------------------------------

SHAPE = (2, 3)


@contextlib.contextmanager
def reusing_small_arrays():
    """The NumPy set reuses only big buffers; these tests use small ones."""
    saved = buffers.MIN_BYTES
    buffers.MIN_BYTES = 0
    try:
        yield
    finally:
        buffers.MIN_BYTES = saved
        buffers.release_cached_arrays()


def numpy_ops():
    """(op applied as a unit, arity): each unit keeps the shape (2, 3) and float64."""
    reshape_there = Reshape((3, 2), SHAPE)
    reshape_back = Reshape(SHAPE, (3, 2))
    return [
        ([ew.sin], 1), ([ew.neg], 1), ([ew.tanh], 1), ([ew.exp], 1),
        ([ew.Scale(0.5)], 1), ([ew.Affine(-1, 1)], 1),
        ([ew.conj], 1),                                   # real input: returns it, same object
        ([ConvertElementType("float64", "float64")], 1),  # copy=False: the same object
        ([reshape_there, reshape_back], 1),               # a view of its input
        ([Transpose((1, 0)), Transpose((1, 0))], 1),      # a view of its input
        ([ew.add], 2), ([ew.sub], 2), ([ew.mul], 2), ([ew.mul_conj], 2),
    ]


def random_numpy_graph(seed: int, n_inputs: int, n_units: int):
    rng = random.Random(seed)
    units = numpy_ops()
    builder = GraphBuilder()
    ids = [builder.add_input(f"x{i}") for i in range(n_inputs)]
    for _ in range(n_units):
        ops, arity = rng.choice(units)
        args = [rng.choice(ids[-6:]) for _ in range(arity)]
        for op in ops:
            [out] = builder.add_operation(op, [Local(a) for a in args])
            args = [out]
        ids.append(out)
    builder.set_outputs([rng.choice(ids) for _ in range(rng.randint(1, 4))])
    return builder.build()


def numpy_reference(graph, values: dict) -> list:
    env = {k: v.copy() for k, v in values.items()}
    for op_key in graph.operation_keys:
        env.update(zip(op_key.output_keys(),
                       op_key.operation.eval(None, [env[k] for k in op_key.inputs])))
    return [np.array(env[k]) for k in graph.output_keys]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_inputs=st.integers(1, 3), n_units=st.integers(0, 25))
def test_numpy_programs_with_views_and_aliases_match_plain_evaluation(seed, n_inputs, n_units):
    graph = random_numpy_graph(seed, n_inputs, n_units)
    rng = np.random.default_rng(seed % 1000)
    arrays = [0.5 * rng.standard_normal(SHAPE) for _ in range(n_inputs)]
    originals = [a.copy() for a in arrays]
    with np.errstate(all="ignore"), reusing_small_arrays():   # products may overflow: inf, nan
        want = numpy_reference(graph, dict(zip(graph.input_keys, arrays)))
        runs = run_both_forms(Program(graph), list(graph.input_keys), arrays)
        runs.append(evaluate(graph, graph.output_keys, dict(zip(graph.input_keys, arrays))))
    for got in runs:
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        for a, o in zip(arrays, originals):
            np.testing.assert_array_equal(a, o)             # the caller's arrays: untouched


def test_numpy_elementwise_chain_writes_into_its_dead_inputs(form):
    builder = GraphBuilder()
    x = builder.add_input("x")
    [s] = builder.add_operation(ew.sin, [Local(x)])
    value = s
    for op in [ew.exp, ew.neg, ew.Scale(2.0), ew.Affine(-1, 1), ew.tanh]:
        [value] = builder.add_operation(op, [Local(value)])
    [total] = builder.add_operation(ew.add, [Local(value), Local(x)])
    builder.set_outputs([total])
    graph = builder.build()
    seen = set()
    original = ew.Unary.eval_reusing

    def spy(self, ctx, inputs, reusable):
        [result] = original(self, ctx, inputs, reusable)
        seen.add(id(result))
        return [result]

    data = np.linspace(0.0, 1.0, 7)
    try:
        ew.Unary.eval_reusing = spy
        with reusing_small_arrays():
            [out] = Program(graph).runner([Input("x")])([data])
    finally:
        ew.Unary.eval_reusing = original
    np.testing.assert_allclose(out, np.tanh(1 - 2 * -np.exp(np.sin(data))) + data)
    np.testing.assert_array_equal(data, np.linspace(0.0, 1.0, 7))
    assert len(seen) == 1, "every unary op after sin wrote into sin's buffer"


def test_a_buffer_a_view_still_uses_is_not_reused(form):
    # v = reshape(reshape(s)) is a view of s; when s dies at neg(s), v is read later.
    builder = GraphBuilder()
    x = builder.add_input("x")
    [s] = builder.add_operation(ew.sin, [Local(x)])
    [r] = builder.add_operation(Reshape((3, 2), SHAPE), [Local(s)])
    [v] = builder.add_operation(Reshape(SHAPE, (3, 2)), [Local(r)])
    [n] = builder.add_operation(ew.neg, [Local(s)])
    [out] = builder.add_operation(ew.add, [Local(n), Local(v)])
    builder.set_outputs([out])
    graph = builder.build()
    data = np.arange(6.0).reshape(SHAPE)
    with reusing_small_arrays():
        [got] = Program(graph).runner([Input("x")])([data])
    np.testing.assert_array_equal(got, np.zeros(SHAPE))


# --- cotangent sums accumulate in place when the buffer is not shared ---------------------------


def test_add_operands_sums_in_place_only_into_a_handed_over_array():
    with reusing_small_arrays():
        check_add_operands(NumpyExecutor())
    small = {"k": np.zeros(4)}                      # by default, small sums make a new array
    first_id = id(small["k"])
    assert id(NumpyExecutor().add_operands(small.pop("k"), np.ones(4))) != first_id


def check_add_operands(executor):
    b = np.ones(4)
    handed = {"k": np.zeros(4)}
    first = handed["k"]
    first_id = id(first)
    del first
    out = executor.add_operands(handed.pop("k"), b)
    assert id(out) == first_id and list(out) == [1.0] * 4          # summed in place
    held = np.zeros(4)
    out = executor.add_operands(held, b)
    assert out is not held and list(held) == [0.0] * 4                # someone holds it: a copy
    base = np.zeros(4)
    out = executor.add_operands(base[:], b)                             # a view: never written
    assert list(base) == [0.0] * 4
    f32 = executor.add_operands(np.zeros(4, np.float32), b)            # the sum is float64
    assert f32.dtype == np.float64


def test_backward_accumulation_never_changes_a_cotangent_shared_with_another_key():
    # u = x + y gives x and y the same cotangent object; x then receives another one.
    from primitives import tensor as tnp

    x = tnp.tensor(np.ones(3), requires_grad=True)
    y = tnp.tensor(np.ones(3), requires_grad=True)
    seed = np.full(3, 2.0)
    u = x + y
    total = u + x * 3.0
    grads = total.backward(seed)
    np.testing.assert_array_equal(grads.grad(y), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(grads.grad(x), [8.0, 8.0, 8.0])
    np.testing.assert_array_equal(seed, [2.0, 2.0, 2.0])             # the caller's seed


def test_try_backward_hands_over_the_cotangent_it_sums():
    # tidu keeps no reference to the first operand of add_operands, so a runtime may sum
    # into it: the operand's reference count is that of a temporary passed in.
    import sys

    from tidu.eager import try_backward
    from primitives import tensor as tnp

    counts = []

    class Counting(NumpyExecutor):
        def add_operands(self, a, b):
            counts.append(sys.getrefcount(a))
            return np.add(a, b)

    executor = Counting()
    executor.add_operands(np.zeros(5), np.zeros(5))
    [temporary] = counts
    x = tnp.tensor(np.linspace(0, 1, 5), requires_grad=True)
    loss = tnp.sin(x) * tnp.exp(x) + tnp.tanh(x)          # x fans out three ways
    grads = try_backward(loss.key, loss._trace, np.ones(5), executor)
    want = (np.cos(x.data) * np.exp(x.data) + np.sin(x.data) * np.exp(x.data)
            + 1 - np.tanh(x.data) ** 2)
    np.testing.assert_allclose(grads[x.key], want)
    assert counts[1:] == [temporary, temporary]


def test_unshared_counts_the_cache_reference():
    big = buffers.empty((300, 300), np.dtype(np.float64))      # cached: the cache holds it too
    assert buffers.is_cached(big)
    values = [big]
    del big
    assert buffers.unshared(values, 0)
    other = values[0]
    assert not buffers.unshared(values, 0)
    del other
