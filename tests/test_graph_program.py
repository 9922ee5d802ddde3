"""Program.runner: positional runs agree with evaluate, in both of its forms, and fail clearly."""

from __future__ import annotations

import math
import random
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidu import TiduError
from tidu.errors import EvalOutputError, MissingValueError
from tidu.graph import (PRIMARY, EvaluableGraphOperation, External, GraphBuilder, Input, Local,
                        OperationKey, compiled, evaluate)
from tidu.graph import program as program_module

from graph_ops import ScalarOp, build_chain

UNARY = [ScalarOp.SIN, ScalarOp.COS, ScalarOp.NEG]
BINARY = [ScalarOp.ADD, ScalarOp.MUL, ScalarOp.SUB]


@pytest.fixture(params=["straight-line", "interpreter"])
def form(request, monkeypatch):
    """Run each test with small programs as generated code, then with the step loop."""
    if request.param == "interpreter":
        monkeypatch.setattr(program_module, "_STRAIGHT_LINE_MAX_STEPS", -1)
    return request.param


def random_graph(seed: int, n_inputs: int, n_ops: int):
    rng = random.Random(seed)
    builder = GraphBuilder()
    ids = [builder.add_input(f"x{i}") for i in range(n_inputs)]
    for _ in range(n_ops):
        if rng.random() < 0.5:
            [out] = builder.add_operation(rng.choice(UNARY), [Local(rng.choice(ids))])
        else:
            [out] = builder.add_operation(rng.choice(BINARY),
                                          [Local(rng.choice(ids)), Local(rng.choice(ids))])
        ids.append(out)
    builder.set_outputs(rng.sample(ids, min(3, len(ids))))
    return builder.build()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_inputs=st.integers(1, 4), n_ops=st.integers(0, 90))
def test_runner_agrees_with_evaluate(seed, n_inputs, n_ops):
    graph = random_graph(seed, n_inputs, n_ops)
    values = {Input(f"x{i}"): 0.1 + 0.3 * i for i in range(n_inputs)}
    want = evaluate(graph, graph.output_keys, values)
    order = list(values)
    random.Random(seed).shuffle(order)
    for limit in (-1, 64):                      # the step loop, and generated code if small
        program_module._STRAIGHT_LINE_MAX_STEPS = limit
        try:
            got = compiled(graph).runner(order)([values[k] for k in order])
        finally:
            program_module._STRAIGHT_LINE_MAX_STEPS = 64
        assert got == want


def test_runner_needs_every_loaded_key(form):
    graph = random_graph(1, 2, 5)
    with pytest.raises(MissingValueError) as info:
        compiled(graph).runner([Input("x0")])
    assert "Input('x1')" in str(info.value)


class TwoForOne(EvaluableGraphOperation):
    """Claims one output, returns two."""

    def input_count(self): return 1
    def output_count(self): return 1
    def eval(self, ctx, inputs): return [inputs[0], inputs[0]]
    def __repr__(self): return "TwoForOne"


def test_runner_checks_the_output_count(form):
    builder = GraphBuilder()
    x = builder.add_input("x")
    builder.set_outputs(builder.add_operation(TwoForOne(), [Local(x)]))
    graph = builder.build()
    run = compiled(graph).runner(graph.input_keys)
    with pytest.raises(EvalOutputError) as info:
        run([1.0])
    assert isinstance(info.value, TiduError)
    assert "TwoForOne" in str(info.value) and "2 values for 1 outputs" in str(info.value)


class WithCtx(EvaluableGraphOperation):
    def input_count(self): return 1
    def output_count(self): return 1
    def eval(self, ctx, inputs): return [inputs[0] * ctx]


def test_runner_passes_its_ctx(form):
    builder = GraphBuilder()
    x = builder.add_input("x")
    builder.set_outputs(builder.add_operation(WithCtx(), [Local(x)]))
    graph = builder.build()
    assert compiled(graph).runner(graph.input_keys, ctx=3.0)([2.0]) == [6.0]


def test_outputs_may_be_inputs_and_repeat(form):
    builder = GraphBuilder()
    x, y = builder.add_input("x"), builder.add_input("y")
    [s] = builder.add_operation(ScalarOp.SIN, [Local(x)])
    builder.set_outputs([y, s, y, x])
    graph = builder.build()
    assert compiled(graph).runner([Input("y"), Input("x")])([2.0, 0.5]) == [
        2.0, math.sin(0.5), 2.0, 0.5]


def test_outputs_as_converts_the_outputs_of_another_type(form):
    """``outputs_as=(kind, convert)``: outputs not of ``kind`` (Python floats here, an input
    passed through too) come back converted; outputs of ``kind`` come back as they are."""
    builder = GraphBuilder()
    x, y = builder.add_input("x"), builder.add_input("y")
    [s] = builder.add_operation(ScalarOp.SIN, [Local(x)])
    builder.set_outputs([s, y, s, x])
    graph = builder.build()
    given = np.array(2.0)
    out = compiled(graph).runner(graph.input_keys, outputs_as=(np.ndarray, np.asarray))(
        [0.5, given])
    assert [type(v) for v in out] == [np.ndarray] * 4
    assert out[1] is given and float(out[0]) == math.sin(0.5) and float(out[3]) == 0.5
    for wrong in [(np.asarray, np.ndarray), np.ndarray, (np.ndarray,)]:
        with pytest.raises(TiduError, match="outputs_as must be a"):
            compiled(graph).runner(graph.input_keys, outputs_as=wrong)


MB = 1 << 20


def test_runner_releases_intermediates(form):
    # 60 NEG ops on a 1 MB array: small enough for generated code; each value is
    # dropped after its last read, so the peak stays near two arrays.
    builder, last = build_chain(60, ScalarOp.NEG, input_name="big")
    builder.set_outputs([last])
    graph = builder.build()
    run = compiled(graph).runner([Input("big")])
    x = np.ones(MB // 8)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        [result] = run([x])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(result, x)           # an even number of NEG
    assert peak < 4 * MB, f"peak {peak / MB:.1f} MB"


def test_a_value_read_before_it_is_produced_is_loaded(form):
    # The shape of a fused backward graph: an op reads sincos(x)[0] as External (the
    # caller has it), and a later op recomputes sincos(x) for its other output.
    x = Input("x")
    sincos = OperationKey(ScalarOp.SINCOS, (x,), PRIMARY)
    sin_x, cos_x = sincos.output_keys()
    builder = GraphBuilder()
    builder.add_input("x")
    [early] = builder.add_operation(ScalarOp.NEG, [External(sin_x)])
    _, cos_id = builder.add_operation(ScalarOp.SINCOS, [External(x)])
    [late] = builder.add_operation(ScalarOp.ADD, [Local(early), Local(cos_id)])
    builder.set_outputs([late])
    graph = builder.build()
    assert graph.value_keys[cos_id] is cos_x
    run = compiled(graph).runner([x, sin_x])
    assert run([0.5, math.sin(0.5)]) == [-math.sin(0.5) + math.cos(0.5)]
    with pytest.raises(MissingValueError):
        compiled(graph).runner([x])


def test_outputs_no_one_reads_are_released_at_once(form):
    # 40 SINCOS on a 1 MB array, each step reading only the sin: every cos dies as it is made.
    builder = GraphBuilder()
    value = builder.add_input("big")
    for _ in range(40):
        value, _ = builder.add_operation(ScalarOp.SINCOS, [Local(value)])
    builder.set_outputs([value])
    graph = builder.build()
    run = compiled(graph).runner([Input("big")])
    x = np.full(MB // 8, 0.5)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        [result] = run([x])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    want = x
    for _ in range(40):
        want = np.sin(want)
    np.testing.assert_array_equal(result, want)
    assert peak < 5 * MB, f"peak {peak / MB:.1f} MB"


def test_a_program_skips_operations_whose_results_no_one_reads():
    builder = GraphBuilder()
    x = builder.add_input("x")
    [unused] = builder.add_operation(ScalarOp.FAIL, [Local(x)])
    [s] = builder.add_operation(ScalarOp.SIN, [Local(x)])
    builder.set_outputs([s])
    program = compiled(builder.build())
    assert program.run({Input("x"): 0.5}) == [math.sin(0.5)]       # FAIL would raise
