"""Misuse of tidu's core raises a ``TiduError`` naming the culprit; the engine works after.

Written as a hostile user would try things: ``None`` and wrong kinds at every
entry point (``try_backward``, ``linearize``, ``linear_transpose``, ``resolve``,
``evaluate``, ``compiled``/``Program``, ``to_networkx``, ``GraphBuilder``,
``Recorder``, ``tidu.viz``), generators where sequences belong (accepted: read
once), and operations whose ``eval`` returns a bare value (refused by every
runner, even when the value has a length). Each misuse is followed by a normal
computation that must still be right.

Also here, because a long-running program is the hostile user of shared state:
the GC pause never overrides the program's ``gc.disable()`` (threads included),
and every process-global table stays bounded however many ops and shapes a
program sees.
"""

from __future__ import annotations

import gc
import math
import re
import sys
import threading
from dataclasses import dataclass

import numpy as np
import pytest

import tidu
from primitives.scalar import Pow, ScalarExecutor, ScalarOp, ScalarTypeError, Scale, trace_scalar
from primitives.scalar.eager import Scalar, apply, sin
from tidu import (
    GraphPrimitiveBuilder,
    LinearizedGraph,
    Primitive,
    linear_transpose,
    linear_transpose_with_builder,
    linearize,
)
from tidu._gc import gc_paused
from tidu.eager import EagerInput, ImmediateBuilder, RecordedGraph, Recorder, try_backward
from tidu.errors import EvalOutputError, InvalidArgumentError
from tidu.viz import layout
from tidu.graph import (
    EvaluableGraphOperation,
    GraphBuilder,
    Input,
    Linearized,
    Local,
    OperationKey,
    Program,
    compiled,
    evaluate,
    resolve,
    to_networkx,
)


def engine_works() -> None:
    """A normal computation end to end, checked against hand derivatives."""
    graph = trace_scalar(lambda x, y: sin(x) * y, ["x", "y"])
    lin = linearize(graph, graph.output_keys, ["x", "y"])
    tr = linear_transpose(lin)
    [seed] = tr.tangent_input_keys
    gx, gy = evaluate([graph, lin.graph, tr.graph], tr.tangent_output_keys,
                      {Input("x"): 0.5, Input("y"): 2.0, seed: 1.0})
    assert gx == pytest.approx(2 * math.cos(0.5)) and gy == pytest.approx(math.sin(0.5))
    assert compiled(graph).run({Input("x"): 0.5, Input("y"): 2.0}) == [2 * math.sin(0.5)]
    x = Scalar(0.5, requires_grad=True)
    assert (sin(x) * 2.0).backward()[x.key] == pytest.approx(2 * math.cos(0.5))


@pytest.fixture(scope="module")
def setting():
    """A traced graph, its linearization, and an eager output with its leaf."""
    graph = trace_scalar(lambda x: sin(x) * x, ["x"])
    lin = linearize(graph, graph.output_keys, ["x"])
    x = Scalar(0.5, requires_grad=True)
    y = sin(x) * x
    return graph, lin, x, y


def misuses():
    """``(id, misuse(setting), error class, patterns the message must contain)``."""
    ex = ScalarExecutor()
    return [
        # try_backward
        ("seed-none", lambda g, lin, x, y: try_backward(y.key, y.trace, None, ex),
         InvalidArgumentError, [r"seed", r"None", r"cotangent of %\d+"]),
        ("executor-none", lambda g, lin, x, y: try_backward(y.key, y.trace, 1.0, None),
         InvalidArgumentError, [r"BackwardExecutor", r"None"]),
        ("executor-class", lambda g, lin, x, y: try_backward(y.key, y.trace, 1.0, ScalarExecutor),
         InvalidArgumentError, [r"class ScalarExecutor", r"instance"]),
        ("executor-none-no-trace", lambda g, lin, x, y: try_backward(x.key, None, 1.0, None),
         InvalidArgumentError, [r"BackwardExecutor"]),
        ("output-key-is-a-scalar", lambda g, lin, x, y: try_backward(y, y.trace, 1.0, ex),
         InvalidArgumentError, [r"output_key", r"ValueKey", r"Scalar\("]),
        ("trace-is-a-scalar", lambda g, lin, x, y: try_backward(y.key, y, 1.0, ex),
         InvalidArgumentError, [r"Trace", r"Scalar"]),
        ("scalar-seed-str", lambda g, lin, x, y: try_backward(y.key, y.trace, "1", ex),
         ScalarTypeError, [r"'1'", r"str", r"not a number"]),
        ("scalar-seed-array", lambda g, lin, x, y: try_backward(y.key, y.trace, np.ones(3), ex),
         ScalarTypeError, [r"ndarray"]),
        ("scalar-seed-complex-for-real", lambda g, lin, x, y: try_backward(y.key, y.trace, 1j, ex),
         ScalarTypeError, [r"1j", r"complex", r"real"]),
        # linear_transpose
        ("transpose-a-graph", lambda g, lin, x, y: linear_transpose(g),
         InvalidArgumentError, [r"linear_transpose", r"LinearizedGraph", r"Graph", r"linearize"]),
        ("transpose-none", lambda g, lin, x, y: linear_transpose(None),
         InvalidArgumentError, [r"LinearizedGraph", r"None"]),
        ("transpose-with-builder-a-graph",
         lambda g, lin, x, y: linear_transpose_with_builder(g, GraphPrimitiveBuilder(), [None]),
         InvalidArgumentError, [r"linear_transpose_with_builder", r"LinearizedGraph"]),
        ("transpose-with-builder-none-builder",
         lambda g, lin, x, y: linear_transpose_with_builder(lin, None, [None]),
         InvalidArgumentError, [r"add_primitive", r"NoneType"]),
        ("transpose-with-builder-none-seeds",
         lambda g, lin, x, y: linear_transpose_with_builder(lin, GraphPrimitiveBuilder(), None),
         InvalidArgumentError, [r"cotangent_seeds", r"None"]),
        # linearize
        ("linearize-none", lambda g, lin, x, y: linearize(None, g.output_keys, ["x"]),
         InvalidArgumentError, [r"linearize", r"None"]),
        ("linearize-a-linearized-graph", lambda g, lin, x, y: linearize(lin, g.output_keys, ["x"]),
         InvalidArgumentError, [r"LinearizedGraph", r"\.graph"]),
        ("linearize-outputs-none", lambda g, lin, x, y: linearize(g, None, ["x"]),
         InvalidArgumentError, [r"linearize", r"outputs", r"None"]),
        ("linearize-one-output-key", lambda g, lin, x, y: linearize(g, g.output_keys[0], ["x"]),
         InvalidArgumentError, [r"outputs", r"pass \[Derived"]),
        ("linearize-wrt-str", lambda g, lin, x, y: linearize(g, g.output_keys, "x"),
         InvalidArgumentError, [r"wrt", r"'x'", r"pass \['x'\]"]),
        ("linearize-wrt-int", lambda g, lin, x, y: linearize(g, g.output_keys, 3),
         InvalidArgumentError, [r"wrt", r"pass \[3\]"]),
        ("linearize-aliases-list",
         lambda g, lin, x, y: linearize(g, g.output_keys, ["x"], aliases=[("x", g.output_keys[0])]),
         InvalidArgumentError, [r"aliases", r"list"]),
        # resolve, evaluate, compiled, Program, to_networkx
        ("resolve-none", lambda g, lin, x, y: resolve(None), InvalidArgumentError, [r"None"]),
        ("resolve-int", lambda g, lin, x, y: resolve(3), InvalidArgumentError, [r"int"]),
        ("resolve-str", lambda g, lin, x, y: resolve("graph"), InvalidArgumentError, [r"str"]),
        ("resolve-a-linearized-graph", lambda g, lin, x, y: resolve(lin),
         InvalidArgumentError, [r"LinearizedGraph", r"\.graph"]),
        ("resolve-list-holding-none", lambda g, lin, x, y: resolve([g, None]),
         InvalidArgumentError, [r"None"]),
        ("evaluate-values-none", lambda g, lin, x, y: evaluate(g, g.output_keys, None),
         InvalidArgumentError, [r"evaluate", r"values", r"NoneType"]),
        ("evaluate-outputs-none", lambda g, lin, x, y: evaluate(g, None, {Input("x"): 1.0}),
         InvalidArgumentError, [r"evaluate", r"outputs"]),
        ("compiled-none", lambda g, lin, x, y: compiled(None),
         InvalidArgumentError, [r"compiled", r"Graph", r"NoneType"]),
        ("compiled-a-linearized-graph", lambda g, lin, x, y: compiled(lin),
         InvalidArgumentError, [r"LinearizedGraph"]),
        ("program-none", lambda g, lin, x, y: Program(None), InvalidArgumentError, [r"Program"]),
        ("program-run-values-none", lambda g, lin, x, y: compiled(g).run(None),
         InvalidArgumentError, [r"Program\.run", r"NoneType"]),
        ("runner-too-few-values", lambda g, lin, x, y: compiled(g).runner(g.input_keys)([]),
         InvalidArgumentError, [r"1 values", r"got 0 values"]),
        ("runner-too-many-values",
         lambda g, lin, x, y: compiled(g).runner(g.input_keys)([1.0, 2.0]),
         InvalidArgumentError, [r"1 values", r"got 2 values"]),
        ("runner-values-none", lambda g, lin, x, y: compiled(g).runner(g.input_keys)(None),
         InvalidArgumentError, [r"NoneType"]),
        ("runner-input-keys-none", lambda g, lin, x, y: compiled(g).runner(None),
         InvalidArgumentError, [r"runner", r"input_keys"]),
        ("to-networkx-none", lambda g, lin, x, y: to_networkx(None),
         InvalidArgumentError, [r"to_networkx", r"NoneType"]),
        ("to-networkx-a-linearized-graph", lambda g, lin, x, y: to_networkx(lin),
         InvalidArgumentError, [r"LinearizedGraph", r"\.graph"]),
        # GraphBuilder
        ("add-operation-inputs-none",
         lambda g, lin, x, y: GraphBuilder().add_operation(ScalarOp.NEG, None),
         InvalidArgumentError, [r"add_operation\(NEG\)", r"inputs", r"None"]),
        ("add-operation-one-local",
         lambda g, lin, x, y: GraphBuilder().add_operation(ScalarOp.NEG, Local(0)),
         InvalidArgumentError, [r"NEG", r"pass \[Local\(0\)\]"]),
        ("set-outputs-none", lambda g, lin, x, y: GraphBuilder().set_outputs(None),
         InvalidArgumentError, [r"set_outputs", r"None"]),
        ("add-parent-a-linearized-graph", lambda g, lin, x, y: GraphBuilder().add_parent(lin),
         InvalidArgumentError, [r"add_parent", r"LinearizedGraph"]),
        # Recorder
        ("record-a-graph", lambda g, lin, x, y: Recorder().record(g, [], []),
         InvalidArgumentError, [r"RecordedGraph", r"Graph"]),
        ("record-graph-bare-array-outputs",
         lambda g, lin, x, y: Recorder().record_graph(
             RecordedGraph.from_primitive(ScalarOp.NEG, ["a"]),
             [EagerInput(x.key, None, True, 0.5)], np.array([-0.5])),
         InvalidArgumentError, [r"NEG", r"outputs", r"ndarray"]),
        ("recorded-graph-input-keys-none",
         lambda g, lin, x, y: RecordedGraph(g, None, g.output_keys),
         InvalidArgumentError, [r"RecordedGraph", r"input_keys", r"None"]),
        ("from-primitive-input-keys-none",
         lambda g, lin, x, y: RecordedGraph.from_primitive(ScalarOp.NEG, None),
         InvalidArgumentError, [r"from_primitive\(NEG\)", r"input_keys"]),
        ("fresh-input-keys-negative", lambda g, lin, x, y: Recorder().fresh_input_keys(-1),
         InvalidArgumentError, [r"fresh_input_keys", r"-1"]),
        ("linearized-graph-of-none", lambda g, lin, x, y: LinearizedGraph(None, [], []),
         InvalidArgumentError, [r"LinearizedGraph", r"NoneType"]),
        # viz
        ("viz-layout-none", lambda g, lin, x, y: layout(None),
         InvalidArgumentError, [r"None", r"Graph"]),
    ]


MISUSES = misuses()


@pytest.mark.parametrize("misuse, error, patterns", [m[1:] for m in MISUSES],
                         ids=[m[0] for m in MISUSES])
def test_misuse_raises_a_named_tidu_error_and_the_engine_still_works(setting, misuse, error,
                                                                      patterns):
    with pytest.raises(error) as info:
        misuse(*setting)
    assert isinstance(info.value, tidu.TiduError)
    message = str(info.value)
    for pattern in patterns:
        assert re.search(pattern, message), f"{message!r} lacks {pattern!r}"
    engine_works()
    graph, lin, x, y = setting
    assert y.backward()[x.key] == pytest.approx(math.cos(0.5) * 0.5 + math.sin(0.5))


def test_the_new_error_class_has_one_builtin_base():
    assert issubclass(InvalidArgumentError, tidu.TiduError)
    assert issubclass(InvalidArgumentError, TypeError)
    assert not issubclass(InvalidArgumentError, ValueError)


# --- the seed check hook ----------------------------------------------------------------


class SeedCheckingExecutor(ScalarExecutor):
    """Checks seeds as a runtime with shapes would, and counts forward runs."""

    def __init__(self) -> None:
        self.checked = []
        self.forward_runs = 0

    def check_seed(self, seed, output) -> None:
        self.checked.append((seed, output))
        if seed < 0:
            raise ScalarTypeError(f"seed {seed!r} refused for output {output!r}")

    def compile_graph(self, graph, input_keys):
        run = super().compile_graph(graph, input_keys)

        def counted(values):
            self.forward_runs += 1
            return run(values)
        return counted


def test_try_backward_delegates_the_seed_check_to_the_executor_before_any_work():
    x = Scalar(0.25, requires_grad=True)
    y = x * x
    executor = SeedCheckingExecutor()
    with pytest.raises(ScalarTypeError, match=r"-2\.0.*0\.0625"):
        try_backward(y.key, y.trace, -2.0, executor)
    assert executor.checked == [(-2.0, 0.0625)] and executor.forward_runs == 0
    grads = try_backward(y.key, y.trace, 2.0, executor)
    assert grads[x.key] == 1.0 and executor.checked[-1] == (2.0, 0.0625)
    assert executor.forward_runs == 1


def test_a_multi_output_node_checks_the_seed_against_its_own_slot():
    from primitives.scalar.eager import sincos

    x = Scalar(0.3, requires_grad=True)
    s, c = sincos(x)
    executor = SeedCheckingExecutor()
    grads = try_backward(c.key, c.trace, 1.0, executor)
    assert executor.checked == [(1.0, math.cos(0.3))]
    assert grads[x.key] == pytest.approx(-math.sin(0.3))


# --- generators are read once ---------------------------------------------------------------


def generator(items):
    return (item for item in items)


def test_generators_as_graphs_outputs_and_wrt_give_the_list_result():
    graph = trace_scalar(lambda x, y: sin(x) * y, ["x", "y"])
    by_list = linearize([graph], list(graph.output_keys), ["x", "y"], pass_id=7)
    by_gen = linearize(generator([graph]), generator(graph.output_keys), generator(["x", "y"]),
                       pass_id=7)
    assert by_gen.tangent_inputs == by_list.tangent_inputs
    assert by_gen.graph.value_keys == by_list.graph.value_keys
    values = {Input("x"): 0.5, Input("y"): 2.0}
    values.update(zip(by_list.tangent_input_keys, [1.0, 0.0]))
    assert evaluate(generator([graph, by_gen.graph]), generator(by_gen.tangent_output_keys),
                    values) == [2.0 * math.cos(0.5)]
    assert resolve(generator([graph])).graphs == (graph,)


def test_generators_in_builders_and_recorders():
    builder = GraphBuilder()
    x = builder.add_input("x")
    [y] = builder.add_operation(ScalarOp.MUL, generator([Local(x), Local(x)]))
    builder.set_outputs(generator([y]))
    graph = builder.build()
    assert evaluate(graph, graph.output_keys, {Input("x"): 3.0}) == [9.0]
    assert compiled(graph).runner(generator(graph.input_keys))([3.0]) == [9.0]

    recorder = Recorder()
    leaf = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 2.0)
    recorded = RecordedGraph.from_primitive(ScalarOp.NEG, generator(["a"]))
    assert recorded.input_keys == ("a",)
    trace = recorder.record(recorded, generator([leaf]), generator([-2.0]))
    assert trace.output_data == (-2.0,) and trace.inputs == (leaf,)
    [out] = recorder.record_graph(recorded, generator([leaf]), generator([-2.0]))
    assert out.requires_grad
    assert try_backward(out.key, out.trace, 1.0, ScalarExecutor())[leaf.key] == -1.0


def test_generator_of_seeds_for_linear_transpose_with_builder():
    graph = trace_scalar(lambda x: x * x, ["x"])
    lin = linearize(graph, graph.output_keys, ["x"])
    builder = ImmediateBuilder({Input("x"): 2.0})
    seed = builder.push(1.0)
    [ct] = linear_transpose_with_builder(lin, builder, generator([seed]))
    assert builder.values[ct] == 4.0


def test_complex_inputs_given_as_a_generator_mark_every_key():
    """``key in generator`` consumed it: the second complex input was traced as real."""
    graph = trace_scalar(lambda a, b: a * b, ["a", "b"], complex_inputs=generator(["b", "a"]))
    ops = [node.operation for node in graph.operations]
    assert ScalarOp.TO_COMPLEX not in ops and ops == [ScalarOp.MUL]


# --- eval must return a list or tuple -------------------------------------------------------


@dataclass(frozen=True)
class Returns(EvaluableGraphOperation):
    """Doubles its input, returned as ``kind``: one of the ways to get ``eval`` wrong."""

    kind: str
    n_out: int = 1

    def input_count(self) -> int:
        return 1

    def output_count(self) -> int:
        return self.n_out

    def eval(self, ctx, inputs):
        values = [inputs[0] * 2] * self.n_out
        return {"list": values, "tuple": tuple(values), "float": values[0],
                "array": np.array(values), "generator": (v for v in values)}[self.kind]


def graph_with(op, chain: int = 0):
    """``x -> NEG x chain times -> op``, outputs every output of ``op``."""
    builder = GraphBuilder()
    [value] = [builder.add_input("x")]
    for _ in range(chain):
        [value] = builder.add_operation(ScalarOp.NEG, [Local(value)])
    builder.set_outputs(builder.add_operation(op, [Local(value)]))
    return builder.build()


RUNNERS = {
    "evaluate": lambda g: evaluate(g, g.output_keys, {Input("x"): 1.5}),
    "Program.run": lambda g: compiled(g).run({Input("x"): 1.5}),
    "runner": lambda g: compiled(g).runner(g.input_keys)([1.5]),
    "immediate": lambda g: _immediate(g),
}


def _immediate(graph):
    """The last op of ``graph`` run on 1.5 by an ``ImmediateBuilder``."""
    builder = ImmediateBuilder({})
    builder.push(1.5)
    ids = builder.add_primitive(graph.operations[-1].operation, [Local(0)])
    return [builder.values[i] for i in ids]


@pytest.mark.parametrize("runner", list(RUNNERS))
@pytest.mark.parametrize("chain", [0, 80], ids=["short", "long"])   # long: the interpreter
@pytest.mark.parametrize("kind, n_out", [("float", 1), ("array", 1), ("array", 2),
                                         ("generator", 1)])
def test_a_bare_eval_result_is_refused_naming_the_op(runner, chain, kind, n_out):
    if runner == "immediate" and chain:
        pytest.skip("the immediate builder runs one op")
    graph = graph_with(Returns(kind, n_out), chain)
    with pytest.raises(EvalOutputError, match=rf"Returns\(kind='{kind}'.*(list or tuple)"):
        RUNNERS[runner](graph)
    engine_works()


@pytest.mark.parametrize("runner", list(RUNNERS))
@pytest.mark.parametrize("chain", [0, 80], ids=["short", "long"])
def test_a_tuple_eval_result_is_accepted(runner, chain):
    if runner == "immediate" and chain:
        pytest.skip("the immediate builder runs one op")
    graph = graph_with(Returns("tuple", 2), chain)
    assert list(RUNNERS[runner](graph)) == [3.0, 3.0]


@pytest.mark.parametrize("returns", [[1.0], [1.0, 2.0, 3.0]])
def test_a_list_of_the_wrong_length_is_refused_by_the_runner(returns):
    @dataclass(frozen=True)
    class Fixed(EvaluableGraphOperation):
        def input_count(self): return 1
        def output_count(self): return 2
        def eval(self, ctx, inputs): return list(returns)

    graph = graph_with(Fixed())
    with pytest.raises(EvalOutputError, match=rf"Fixed.*{len(returns)} values for 2 outputs"):
        compiled(graph).runner(graph.input_keys)([1.0])


# --- the GC pause and the program's gc.disable() ---------------------------------------------


def automatic_collections_while_allocating() -> int:
    """How many collections start while 30,000 containers are made (none while paused)."""
    started = []

    def count(phase, info):
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(count)
    try:
        kept = [[i] for i in range(30_000)]
        del kept
    finally:
        gc.callbacks.remove(count)
    return len(started)


@pytest.fixture
def restore_gc():
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()


def long_graph(n=3000):
    builder = GraphBuilder()
    [x] = [builder.add_input("x")]
    for _ in range(n):
        [x] = builder.add_operation(ScalarOp.SIN, [Local(x)])
    builder.set_outputs([x])
    return builder.build()


def test_a_disable_made_during_a_pause_stays(restore_gc):
    gc.enable()
    with gc_paused():
        gc.disable()
    assert not gc.isenabled()
    gc.enable()
    graph = long_graph(200)
    with gc_paused():
        linearize(graph, graph.output_keys, ["x"])
        gc.disable()
        linearize(graph, graph.output_keys, ["x"])       # a nested pause ends inside
    assert not gc.isenabled()


def test_a_disable_made_in_another_thread_during_a_pause_stays(restore_gc):
    gc.enable()
    paused, release = threading.Event(), threading.Event()

    def holder():
        with gc_paused():
            paused.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    paused.wait(10)
    gc.disable()                  # the program, while another thread's pause is on
    release.set()
    thread.join(10)
    assert not gc.isenabled()


def test_a_transform_in_one_thread_does_not_resume_collection_under_anothers_pause(restore_gc):
    gc.enable()
    thresholds = gc.get_threshold()
    graph = long_graph()
    paused, release = threading.Event(), threading.Event()

    def holder():
        with gc_paused():
            paused.set()
            release.wait(20)

    thread = threading.Thread(target=holder)
    thread.start()
    paused.wait(10)
    try:
        worker = threading.Thread(target=lambda: linearize(graph, graph.output_keys, ["x"]))
        worker.start()
        worker.join(20)
        # the worker's transform began and ended inside the holder's pause
        assert automatic_collections_while_allocating() == 0
        assert gc.isenabled()     # the program's flag was never touched
    finally:
        release.set()
        thread.join(10)
    assert automatic_collections_while_allocating() > 0      # resumed with the last pause
    assert gc.get_threshold() == thresholds


def test_overlapping_transforms_in_threads_restore_the_programs_state(restore_gc):
    """Eight threads transform at once with a tiny switch interval; afterwards the
    program's state is back exactly: enabled or disabled, and its thresholds."""
    graph = long_graph(300)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for program_enabled in (True, False):
            (gc.enable if program_enabled else gc.disable)()
            gc.set_threshold(555, 11, 12)
            errors = []

            def work():
                try:
                    for _ in range(4):
                        linear_transpose(linearize(graph, graph.output_keys, ["x"]))
                except Exception as error:      # pragma: no cover - reported below
                    errors.append(error)

            threads = [threading.Thread(target=work) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not errors
            assert gc.isenabled() == program_enabled
            assert gc.get_threshold() == (555, 11, 12)
    finally:
        sys.setswitchinterval(interval)


def test_thresholds_the_program_sets_during_a_pause_are_kept(restore_gc):
    gc.enable()
    with gc_paused():
        gc.set_threshold(1234, 5, 6)
    assert gc.get_threshold() == (1234, 5, 6)
    with gc_paused():
        pass
    assert gc.get_threshold() == (1234, 5, 6)


# --- process-global tables are bounded ----------------------------------------------------------


@dataclass(frozen=True)
class ScaleBy(Primitive, EvaluableGraphOperation):
    """``factor * x`` with structural rules: each factor records its own rule template."""

    factor: float

    def input_count(self) -> int:
        return 1

    def output_count(self) -> int:
        return 1

    def structural_rules(self) -> bool:
        return True

    def eval(self, ctx, inputs):
        return [self.factor * inputs[0]]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return builder.add_primitive(Scale(self.factor), [Local(tangent_inputs[0])],
                                     Linearized((True,)))


def test_op_count_table_of_the_recorder_is_bounded():
    from tidu.eager import record

    limit = record._COUNTS_MAX
    assert isinstance(limit, int) and limit <= 10_000
    for i in range(limit + 500):
        RecordedGraph.from_primitive(Pow(i + 0.5), ["a"])
        assert len(record._counts) <= limit


def test_backward_plans_are_bounded(monkeypatch):
    from tidu.eager import plans as backward

    assert isinstance(backward._PLAN_CACHE_SIZE, int) and backward._PLAN_CACHE_SIZE <= 10_000
    monkeypatch.setattr(backward, "_PLAN_CACHE_SIZE", 32)
    for i in range(100):
        x = Scalar(1.5, requires_grad=True)
        y = apply(Pow(i + 0.25), x)                      # a new op: a new plan
        assert y.backward()[x.key] == pytest.approx((i + 0.25) * 1.5 ** (i - 0.75))
        assert len(backward._plans[(type(None), None)]) <= 32   # plans of ctx None
        assert len(backward._plans) <= backward._CTX_CACHE_SIZE


def test_rule_templates_are_bounded(monkeypatch):
    from tidu.rules import replay

    assert isinstance(replay._MAX_COMPILED, int) and replay._MAX_COMPILED <= 10_000
    monkeypatch.setattr(replay, "_MAX_COMPILED", 32)
    builder = GraphBuilder()
    [x] = [builder.add_input("x")]
    for i in range(200):
        [x] = builder.add_operation(ScaleBy(1.0 + i / 1000), [Local(x)])
    builder.set_outputs([x])
    graph = builder.build()
    lin = linearize(graph, graph.output_keys, ["x"])
    assert len(replay._compiled) <= 33
    [t] = lin.tangent_input_keys
    [dy] = evaluate([lin.graph, graph], lin.tangent_output_keys, {Input("x"): 1.0, t: 1.0})
    assert dy == pytest.approx(math.prod(1.0 + i / 1000 for i in range(200)))


def test_scalar_frontend_op_cache_is_bounded():
    from primitives.scalar import eager

    x = Scalar(1.1, requires_grad=True)
    for i in range(eager._OPS_MAX + 200):
        apply(Scale(float(i)), x)
    assert len(eager._ops) <= eager._OPS_MAX


def test_role_table_is_weak_and_swept():
    table = Linearized._interned
    for i in range(5000):
        Linearized(tuple(bool(i >> bit & 1) for bit in range(13)))   # 5000 masks, dropped
    live = sum(1 for ref in table.values() if ref() is not None)
    assert len(table) <= 2 * live + 64
    assert Linearized((True, False)) is Linearized([True, False])      # interning holds


def test_intern_tables_are_weak_and_swept():
    from tidu.graph import keys

    for i in range(40_000):
        OperationKey("tag", (Input(("transient", i)),))             # dropped at once
    live = keys.interned_count()
    size = len(keys._op_table) + len(keys._input_table) + len(keys._collisions)
    assert size <= 2 * live + 2 * keys._SWEEP_MIN + 16, (size, live)
