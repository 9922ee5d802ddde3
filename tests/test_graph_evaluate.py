"""evaluate: results, cross-graph CSE, DCE, last-use release, context."""

from __future__ import annotations

import dataclasses
import math
import tracemalloc

import numpy as np
import pytest

from tidu.graph import (
    EvaluableGraphOperation,
    External,
    GraphBuilder,
    Input,
    Local,
    evaluate,
    resolve,
)

from graph_ops import EVALS, FailEvaluated, ScalarOp, Scale, build_chain, reset_counts


@pytest.fixture(autouse=True)
def _clean_counts():
    reset_counts()
    yield


def sin_mul_add(builder: GraphBuilder):
    x, c = builder.add_input("x"), builder.add_input("c")
    [s] = builder.add_operation(ScalarOp.SIN, [Local(x)])
    [m] = builder.add_operation(ScalarOp.MUL, [Local(s), Local(x)])
    [y] = builder.add_operation(ScalarOp.ADD, [Local(m), Local(c)])
    builder.set_outputs([y])
    return y


def test_evaluate_computes_the_outputs():
    b = GraphBuilder()
    y = sin_mul_add(b)
    x = b.add_input("x")
    s, k = b.add_operation(ScalarOp.SINCOS, [Local(x)])
    q, r = b.add_operation(ScalarOp.DIVMOD, [Local(k), Local(s)])
    [h] = b.add_operation(Scale(4.0), [Local(x)])
    g = b.build()
    key = lambda i: g.values[i].key  # noqa: E731
    result = evaluate(g, [key(y), key(k), key(q), key(r), key(h), Input("c")],
                      {Input("x"): 0.5, Input("c"): 2.0})
    assert result == [math.sin(0.5) * 0.5 + 2.0, math.cos(0.5),
                      *divmod(math.cos(0.5), math.sin(0.5)), 2.0, 2.0]
    assert evaluate(g, [], {Input("x"): 0.5}) == []


def test_evaluate_accepts_graph_list_and_view():
    b = GraphBuilder()
    y = sin_mul_add(b)
    g = b.build()
    inputs = {Input("x"): 1.0, Input("c"): 0.0}
    expected = [math.sin(1.0)]
    key = g.values[y].key
    assert evaluate(g, [key], inputs) == expected
    assert evaluate([g], [key], inputs) == expected
    assert evaluate(iter([g]), [key], inputs) == expected
    assert evaluate(resolve(g), (key,), inputs) == expected


def test_repeated_outputs_and_shared_subexpressions_run_once():
    b = GraphBuilder()
    x = b.add_input("x")
    [s] = b.add_operation(ScalarOp.SIN, [Local(x)])
    [m] = b.add_operation(ScalarOp.MUL, [Local(s), Local(s)])
    [a] = b.add_operation(ScalarOp.ADD, [Local(m), Local(s)])
    g = b.build()
    ks, km, ka = (g.values[i].key for i in (s, m, a))
    assert evaluate(g, [ka, ks, ka, km], {Input("x"): 2.0}) == [
        math.sin(2.0) ** 2 + math.sin(2.0), math.sin(2.0),
        math.sin(2.0) ** 2 + math.sin(2.0), math.sin(2.0) ** 2]
    assert EVALS == {ScalarOp.SIN: 1, ScalarOp.MUL: 1, ScalarOp.ADD: 1}


def test_cross_graph_cse_evaluates_shared_ops_once():
    # Two graphs built independently, both containing y = sin(x) * x + c.
    b1, b2 = GraphBuilder(), GraphBuilder()
    y1 = sin_mul_add(b1)
    y2 = sin_mul_add(b2)
    [n1] = b1.add_operation(ScalarOp.NEG, [Local(y1)])
    [s2] = b2.add_operation(Scale(3.0), [Local(y2)])
    g1, g2 = b1.build(), b2.build()
    k1, k2 = g1.values[n1].key, g2.values[s2].key
    inputs = {Input("x"): 0.25, Input("c"): 1.0}
    y = math.sin(0.25) * 0.25 + 1.0
    assert evaluate([g1, g2], [k1, k2], inputs) == [-y, 3.0 * y]
    assert EVALS == {ScalarOp.SIN: 1, ScalarOp.MUL: 1, ScalarOp.ADD: 1,
                     ScalarOp.NEG: 1, Scale(3.0): 1}


def test_external_chain_evaluates_through_parents_once():
    b1 = GraphBuilder()
    y = sin_mul_add(b1)
    g1 = b1.build()
    b2 = GraphBuilder()
    b2.add_parent(g1)
    [z] = b2.add_operation(ScalarOp.MUL, [External(g1.values[y].key), External(g1.values[y].key)])
    [w] = b2.add_operation(ScalarOp.SUB, [Local(z), External(g1.values[y].key)])
    g2 = b2.build()
    inputs = {Input("x"): 2.0, Input("c"): 0.5}
    yv = math.sin(2.0) * 2.0 + 0.5
    assert evaluate(g2, [g2.values[w].key, g1.values[y].key], inputs) == [yv * yv - yv, yv]
    assert EVALS[ScalarOp.SIN] == 1 and EVALS[ScalarOp.ADD] == 1
    assert EVALS[ScalarOp.MUL] == 2 and EVALS[ScalarOp.SUB] == 1


def test_dce_never_runs_unneeded_ops():
    b = GraphBuilder()
    x = b.add_input("x")
    [f] = b.add_operation(ScalarOp.FAIL, [Local(x)])
    [after_fail] = b.add_operation(ScalarOp.NEG, [Local(f)])
    [n] = b.add_operation(ScalarOp.SIN, [Local(x)])
    b.set_outputs([n, after_fail])
    g = b.build()
    assert evaluate(g, [g.values[n].key], {Input("x"): 1.0}) == [math.sin(1.0)]
    assert EVALS == {ScalarOp.SIN: 1}
    with pytest.raises(FailEvaluated):
        evaluate(g, [g.values[after_fail].key], {Input("x"): 1.0})
    assert EVALS[ScalarOp.NEG] == 0


def test_unneeded_missing_input_is_not_required():
    b = GraphBuilder()
    x, unused = b.add_input("x"), b.add_input("unused")
    [n] = b.add_operation(ScalarOp.NEG, [Local(x)])
    b.add_operation(ScalarOp.NEG, [Local(unused)])
    g = b.build()
    assert evaluate(g, [g.values[n].key], {Input("x"): 3}) == [-3]


def test_given_intermediate_values_short_cut_their_producers():
    b = GraphBuilder()
    x = b.add_input("x")
    [f] = b.add_operation(ScalarOp.FAIL, [Local(x)])
    [n] = b.add_operation(ScalarOp.NEG, [Local(f)])
    g = b.build()
    kf, kn = g.values[f].key, g.values[n].key
    # x is not even needed once the FAIL output is given
    assert evaluate(g, [kn], {kf: 5.0}) == [-5.0]
    assert EVALS == {ScalarOp.NEG: 1}
    assert evaluate(g, [kf], {kf: 7}) == [7]


def test_values_mapping_is_not_modified():
    b = GraphBuilder()
    y = sin_mul_add(b)
    g = b.build()
    inputs = {Input("x"): 1.0, Input("c"): 2.0}
    snapshot = dict(inputs)
    evaluate(g, [g.values[y].key], inputs)
    assert inputs == snapshot


@dataclasses.dataclass(frozen=True)
class AddContext(EvaluableGraphOperation):
    """Adds ``ctx[name]``: checks that evaluate hands ``ctx`` to every eval."""

    name: str

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, inputs):
        return [inputs[0] + ctx[self.name]]


def test_ctx_is_passed_to_eval():
    b = GraphBuilder()
    x = b.add_input("x")
    [a] = b.add_operation(AddContext("p"), [Local(x)])
    [c] = b.add_operation(AddContext("q"), [Local(a)])
    g = b.build()
    assert evaluate(g, [g.values[c].key], {Input("x"): 1}, ctx={"p": 10, "q": 100}) == [111]
    assert evaluate(g, [g.values[c].key], {Input("x"): 1}, {"p": 0, "q": 0}) == [1]


def test_evaluate_works_on_numpy_arrays():
    b = GraphBuilder()
    y = sin_mul_add(b)
    g = b.build()
    x = np.linspace(0.0, 1.0, 5)
    [out] = evaluate(g, [g.values[y].key], {Input("x"): x, Input("c"): 1.0})
    np.testing.assert_allclose(out, np.sin(x) * x + 1.0)


# --- last-use release ---------------------------------------------------------------

MB = 1 << 20


def _chain_peak(n_ops: int, outputs_every: int | None) -> tuple[int, list]:
    builder, last = build_chain(n_ops, ScalarOp.NEG, input_name="big")
    graph = builder.build()
    if outputs_every is None:
        wanted = [graph.values[last].key]
    else:
        wanted = [graph.values[i].key for i in range(outputs_every, last + 1, outputs_every)]
    x = np.ones(MB // 8)          # 1 MB of float64
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = evaluate(graph, wanted, {Input("big"): x})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, result


def test_intermediates_are_released_after_their_last_use():
    peak, [result] = _chain_peak(300, None)
    assert peak < 10 * MB, f"evaluating a 300-op chain of 1 MB arrays peaked at {peak / MB:.1f} MB"
    np.testing.assert_array_equal(result, np.ones(MB // 8))   # even number of NEG
    assert EVALS[ScalarOp.NEG] == 300


def test_tracemalloc_sees_the_arrays_the_outputs_keep():
    """Control for the test above: requested outputs are kept, and the peak shows it."""
    peak, results = _chain_peak(300, 10)
    assert len(results) == 30
    assert peak > 25 * MB


# --- one evaluator: evaluate runs a compiled program, kept per output and given keys -----------


def test_evaluate_compiles_once_per_output_and_given_keys(monkeypatch):
    from tidu.graph import program as program_module

    compiled_for = []
    original = program_module.Program.for_values.__func__

    def counting(cls, outputs, known):
        compiled_for.append((tuple(outputs), frozenset(known)))
        return original(cls, outputs, known)

    monkeypatch.setattr(program_module.Program, "for_values", classmethod(counting))
    b = GraphBuilder()
    y = sin_mul_add(b)
    g = b.build()
    key = g.values[y].key
    for x in (0.1, 0.2, 0.3):
        assert evaluate(g, [key], {Input("x"): x, Input("c"): 1.0}) == [math.sin(x) * x + 1.0]
    assert len(compiled_for) == 1
    s_key = g.operation_keys[0].output_keys()[0]    # sin(x), given: another program
    assert evaluate(g, [key], {s_key: 2.0, Input("x"): 3.0, Input("c"): 1.0}) == [7.0]
    assert len(compiled_for) == 2


def test_a_given_value_wins_over_the_same_value_computed_again():
    # DIVMOD runs for its remainder; the quotient the caller gave is kept.
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    q, r = b.add_operation(ScalarOp.DIVMOD, [Local(x), Local(y)])
    [n] = b.add_operation(ScalarOp.NEG, [Local(q)])
    g = b.build()
    kq, kr, kn = (g.values[i].key for i in (q, r, n))
    assert evaluate(g, [kn, kr, kq], {Input("x"): 7, Input("y"): 2, kq: 100}) == [-100, 1, 100]
