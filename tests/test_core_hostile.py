"""Hostile uses of the core: op identity across op sets and number types, an interning race,
checkers given directions that check nothing, measuring graphs that are not self-contained,
and executor hooks patched after a class was first used."""

from __future__ import annotations

import enum
import gc
import itertools
import math
import sys
import threading
import time
import weakref
from unittest import mock

import numpy as np
import pytest

from primitives.exact import exact_identity
from primitives.scalar import Const, ScalarExecutor, ScalarOp, Scale
from primitives.scalar.eager import Scalar, sin
from tidu import Primitive, TiduError, linearize, measure_program
from tidu.eager import BackwardExecutor, overridden_hooks, try_backward
from tidu.errors import InvalidArgumentError
from tidu.example_ops import sin as traced_sin
from tidu.example_ops import trace
from tidu.graph import (
    PRIMARY,
    Derived,
    EvaluableGraphOperation,
    GraphBuilder,
    Input,
    Linearized,
    Local,
    OperationKey,
    evaluate,
)
from tidu.testing import CheckUsageError, check_jvp, check_transpose

_fresh = itertools.count()


def fresh(prefix: str) -> str:
    """An input name no other test has interned yet."""
    return f"hostile-{prefix}-{next(_fresh)}"


# --- ops of different types never share a key --------------------------------------------


class SetA(EvaluableGraphOperation, enum.IntEnum):
    NEG = 1

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, xs):
        return [-xs[0]]


class SetB(EvaluableGraphOperation, enum.IntEnum):
    EXP = 1

    def input_count(self):
        return 1

    def output_count(self):
        return 1

    def eval(self, ctx, xs):
        return [math.exp(xs[0])]


def test_int_enum_ops_of_two_sets_get_two_keys():
    assert SetA.NEG == SetB.EXP and hash(SetA.NEG) == hash(SetB.EXP)    # what Python says
    name = fresh("intenum")
    b = GraphBuilder()
    x = b.add_input(name)
    [n] = b.add_operation(SetA.NEG, [Local(x)])
    [e] = b.add_operation(SetB.EXP, [Local(x)])
    b.set_outputs([n, e])
    g = b.build()
    assert [k.operation for k in g.operation_keys] == [SetA.NEG, SetB.EXP]
    assert evaluate(g, g.output_keys, {Input(name): 2.0}) == [-2.0, math.exp(2.0)]
    neg = OperationKey(SetA.NEG, (Input(name),), PRIMARY)
    exp = OperationKey(SetB.EXP, (Input(name),), PRIMARY)
    assert neg is not exp and exp.operation is SetB.EXP
    assert g.output_keys == (Derived(neg, 0), Derived(exp, 0))       # built again: same keys
    b2 = GraphBuilder()                                              # EXP alone, built later
    [e2] = b2.add_operation(SetB.EXP, [Local(b2.add_input(name))])
    b2.set_outputs([e2])
    g2 = b2.build()
    assert g2.output_keys == (Derived(exp, 0),)
    assert evaluate(g2, g2.output_keys, {Input(name): 2.0}) == [math.exp(2.0)]


def test_equal_labels_of_different_types_get_different_keys():
    x = Input(fresh("labels"))
    labels = (1, 1.0, True, 1 + 0j)                   # equal, with equal hashes
    made = [(label, OperationKey(label, (x,), PRIMARY)) for label in labels]
    assert len({id(key) for _, key in made}) == 4
    for label, key in made:
        assert type(key.operation) is type(label)
        assert OperationKey(label, (x,), PRIMARY) is key                  # and stay interned
    linear = Linearized((True,))
    assert OperationKey(2, (x,), linear) is not OperationKey(2.0, (x,), linear)


# --- exact parameters of NumPy scalars --------------------------------------------------


@pytest.mark.parametrize("kind", [np.float16, np.float32, np.float64, np.longdouble])
def test_exact_identity_of_numpy_floats(kind):
    assert exact_identity(kind(-0.0)) != exact_identity(kind(0.0))
    assert exact_identity(kind(0.0)) == exact_identity(kind(0.0))
    assert exact_identity(kind("nan")) == exact_identity(-kind("nan"))
    assert exact_identity(kind(1.5)) != exact_identity(1.5)          # the type is part of it


@pytest.mark.parametrize("kind", [np.complex64, np.complex128])
def test_exact_identity_of_numpy_complex(kind):
    assert exact_identity(kind(complex(0.0, -0.0))) != exact_identity(kind(0j))
    assert exact_identity(kind(complex(-0.0, 0.0))) != exact_identity(kind(0j))
    assert exact_identity(kind(complex(math.nan, 1))) == exact_identity(kind(complex(-math.nan,
                                                                                     1)))
    assert exact_identity(kind(1j)) != exact_identity(1j)
    assert exact_identity(np.complex64(1j)) != exact_identity(np.complex128(1j))


@pytest.mark.parametrize("kind", [np.float16, np.float32, np.complex64])
def test_numpy_signed_zero_constants_are_different_computations(kind):
    b = GraphBuilder()
    x = b.add_input(fresh("np0"))
    [plus] = b.add_operation(Const(kind(0.0)), [])
    [minus] = b.add_operation(Const(kind(-0.0)), [])
    [a] = b.add_operation(ScalarOp.DIV, [Local(x), Local(plus)])
    [c] = b.add_operation(ScalarOp.DIV, [Local(x), Local(minus)])
    b.set_outputs([a, c])
    g = b.build()
    assert Const(kind(0.0)) != Const(kind(-0.0))
    assert g.output_keys[0] is not g.output_keys[1]
    if kind is not np.complex64:
        with np.errstate(all="ignore"):
            over_plus, over_minus = evaluate(g, g.output_keys, {g.input_keys[0]: kind(1.0)})
        assert over_plus == math.inf and over_minus == -math.inf


def test_numpy_scalars_stay_apart_from_python_numbers():
    assert Const(np.float32(0.5)) != Const(0.5) and Const(np.float64(0.5)) != Const(0.5)
    assert Const(np.float32(0.5)) == Const(np.float32(0.5))
    assert hash(Const(np.float32(-0.0))) == hash(Const(np.float32(-0.0)))
    assert Const(np.int64(1)) != Const(1) and Const(np.int64(1)) == Const(np.int64(1))


# --- one structure, one key, whatever thread interns it ----------------------------------


def _race(name: str, n: int) -> tuple[list, list]:
    """The keys of ``Scale(i)(Input(name))``, ``i < n``, made at once by a builder and by
    ``OperationKey`` in two threads."""
    results: dict = {}
    barrier = threading.Barrier(2, timeout=30)

    def via_builder():
        b = GraphBuilder()
        x = b.add_input(name)
        barrier.wait()
        out = []
        for i in range(n):
            [v] = b.add_operation(Scale(float(i)), [Local(x)])
            out.append(b.global_key(v))
        results["builder"] = out

    def via_key():
        x = Input(name)
        barrier.wait()
        results["key"] = [Derived(OperationKey(Scale(float(i)), (x,), PRIMARY), 0)
                          for i in range(n)]

    threads = [threading.Thread(target=via_builder), threading.Thread(target=via_key)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert set(results) == {"builder", "key"}, "a thread failed or hangs"
    return results["builder"], results["key"]


def test_builder_and_operation_key_racing_on_one_structure_agree():
    """The builder's lock-free publish and ``OperationKey``'s locked one never keep two keys."""
    deadline, rounds = time.perf_counter() + 3.0, 0
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        while rounds < 8 or (time.perf_counter() < deadline and rounds < 200):
            rounds += 1
            built, made = _race(fresh("race"), 2000)
            split = [i for i, (a, b) in enumerate(zip(built, made)) if a is not b]
            assert not split, f"round {rounds}: two live keys for Scale({split[0]}.0)(x)"
    finally:
        sys.setswitchinterval(interval)


# --- checkers refuse directions that check nothing -----------------------------------------


class Wrong(Primitive, EvaluableGraphOperation, enum.Enum):
    TRIPLE = "triple"          # y = 3 x, linear; its transpose rule is wrong (-7 ct)
    PAIR = "pair"              # (3 x, 3 x); its transpose rule is wrong for output 1

    @classmethod
    def add(cls):
        return ScalarOp.ADD

    def input_count(self):
        return 1

    def output_count(self):
        return 1 if self is Wrong.TRIPLE else 2

    def eval(self, ctx, xs):
        return [3.0 * xs[0]] * self.output_count()

    def jvp_rule(self, b, xs, outs, ts, ctx):
        return b.add_primitive(self, [Local(ts[0])], Linearized((True,)))

    def transpose_rule(self, b, cts, inputs, role, ctx):
        if self is Wrong.TRIPLE:
            return b.add_primitive(Scale(-7.0), [Local(cts[0])], Linearized((True,)))
        [first] = b.add_primitive(Scale(3.0), [Local(cts[0])], Linearized((True,)))
        [second] = b.add_primitive(Scale(-7.0), [Local(cts[1])], Linearized((True,)))
        return b.add_primitive(ScalarOp.ADD, [Local(first), Local(second)],
                               Linearized((True, True)))


def wrong_graph(op):
    b = GraphBuilder()
    x = b.add_input("x")
    b.set_outputs(b.add_operation(op, [Local(x)]))
    g = b.build()
    return g, linearize(g, g.output_keys, ["x"])


@pytest.mark.parametrize("given", [{"cotangents": [None]}, {"cotangents": [0.0]},
                                   {"cotangents": {0: 0.0}}, {"tangents": [0.0]},
                                   {"tangents": {"x": 0.0}}, {"tangents": [-0.0]}])
def test_check_transpose_refuses_zero_directions(given):
    g, lin = wrong_graph(Wrong.TRIPLE)
    with pytest.raises(CheckUsageError, match="zero.*TRIPLE.*check nothing"):
        check_transpose(g, lin, {"x": 1.0}, rng=0, **given)
    with pytest.raises(TiduError, match="dot-product test fails"):     # still usable
        check_transpose(g, lin, {"x": 1.0}, rng=0)


def test_check_transpose_does_not_count_pairs_a_zero_direction_makes_vacuous():
    g, lin = wrong_graph(Wrong.PAIR)
    report = check_transpose(g, lin, {"x": 1.0}, cotangents=[1.0, 0.0])   # output 1 is wrong
    assert report.dot_products == 2                   # output 0 alone, and both together
    with pytest.raises(TiduError, match="dot-product test fails for tangent output 1"):
        check_transpose(g, lin, {"x": 1.0}, cotangents=[0.0, 1.0])
    with pytest.raises(CheckUsageError, match="check nothing"):
        check_transpose(g, lin, {"x": 1.0}, cotangents=[None, np.float64(0.0)])


def test_check_transpose_refuses_a_none_tangent():
    g, lin = wrong_graph(Wrong.TRIPLE)
    with pytest.raises(CheckUsageError, match="tangent of 'x' is None"):
        check_transpose(g, lin, {"x": 1.0}, tangents=[None])


def test_symbolic_zero_outputs_still_take_none():
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    [s] = b.add_operation(Wrong.TRIPLE, [Local(y)])              # does not read x
    [p] = b.add_operation(ScalarOp.MUL, [Local(x), Local(y)])
    b.set_outputs([s, p])
    g = b.build()
    lin = linearize(g, g.output_keys, ["x"])
    assert lin.tangent_outputs[0] is None
    report = check_transpose(g, lin, {"x": 0.5, "y": 2.0}, cotangents=[None, 2.0])
    assert report.dot_products == 1


@pytest.mark.parametrize("value, tangent", [(4.0, 0.0), (4.0, -0.0), (1 + 1j, 0j),
                                           (np.ones(3), np.zeros(3)),
                                           (np.float32(1.0), np.float32(0.0))])
def test_check_jvp_refuses_zero_tangents(value, tangent):
    g, _ = wrong_graph(Wrong.TRIPLE)                   # its JVP rule is right
    with pytest.raises(CheckUsageError, match="zero.*TRIPLE.*check nothing"):
        check_jvp(g, g.output_keys, {"x": value}, {"x": tangent})
    assert check_jvp(g, g.output_keys, {"x": value}, {"x": tangent + 1}).jvp_comparisons == 1


def test_check_jvp_checks_only_the_inputs_given_a_direction():
    g = trace(lambda x, y: traced_sin(x) * y, ["x", "y"])
    report = check_jvp(g, g.output_keys, {"x": 0.3, "y": 2.0}, {"x": 0.0, "y": 1.0})
    assert report.input_slots == 1 and report.jvp_comparisons == 1
    assert report.ops == ("MUL",)
    report = check_jvp(g, g.output_keys, {"x": 0.3, "y": 2.0}, {"x": 1.0, "y": 1.0})
    assert report.input_slots == 2 and report.jvp_comparisons == 3


def test_check_jvp_keeps_empty_arrays():
    g, _ = wrong_graph(Wrong.TRIPLE)
    report = check_jvp(g, g.output_keys, {"x": np.ones(0)}, {"x": np.ones(0)})
    assert report.input_slots == 1


# --- measure_program on a graph that is not self-contained ----------------------------------


def test_measure_program_names_a_read_the_graph_does_not_make():
    g = trace(lambda x, y: traced_sin(x) * y + x, ["x", "y"])
    lin = linearize(g, g.output_keys, ["x"])
    values = {Input("x"): 0.5, Input("y"): 2.0, lin.tangent_input_keys[0]: 1.0}
    with pytest.raises(InvalidArgumentError, match=r"measure_program: .* reads Input\('x'\), "
                                                   "which the graph neither takes nor makes"):
        measure_program(lin.graph, values)
    sizes, costs = measure_program(g, {Input("x"): 0.5, Input("y"): 2.0})   # still usable
    assert len(sizes) == 3 and len(costs) == 3


# --- executor hooks: a hook patched later is called ---------------------------------------


def _gradient(executor):
    x = Scalar(0.5, requires_grad=True)
    y = sin(x) * x
    return try_backward(y.key, y.trace, 1.0, executor)[x.key]


def _fresh_executor_class():
    return type("Patched", (ScalarExecutor,), {})


def test_a_hook_patched_after_the_first_backward_is_called():
    cls = _fresh_executor_class()
    expected = _gradient(cls())                                  # the class is used once
    assert overridden_hooks(cls()) == frozenset()
    calls = []

    def spy(self, *args):
        calls.append(args)
        return BackwardExecutor.run_transposed_linear(self, *args)

    with mock.patch.object(cls, "run_transposed_linear", spy):
        assert overridden_hooks(cls()) == {"run_transposed_linear"}
        assert _gradient(cls()) == expected
    assert len(calls) == 2                                       # sin and the product
    assert overridden_hooks(cls()) == frozenset()                # unpatched: fused plans again
    assert _gradient(cls()) == expected and len(calls) == 2


def test_execute_forward_patched_after_use_is_called_on_the_same_executor():
    cls = _fresh_executor_class()
    executor = cls()
    expected = _gradient(executor)
    calls = []

    def counting(self, graph, data):
        calls.append(graph)
        return ScalarExecutor.execute_forward(self, graph, data)

    with mock.patch.object(cls, "execute_forward", counting):
        assert overridden_hooks(executor) == {"execute_forward"}
        assert _gradient(executor) == expected
    assert calls
    names = [fresh("x"), fresh("y")]
    graph = trace(lambda x, y: x * y, names)
    lin = linearize(graph, graph.output_keys, names)
    data = {Input(names[0]): 3.0, Input(names[1]): 5.0}
    for patched in (False, True, False):                  # the transposed run follows the patch
        calls.clear()
        if patched:
            with mock.patch.object(cls, "execute_forward", counting):
                assert executor.run_transposed_linear(lin, [2.0], data, None) == [10.0, 6.0]
            assert calls
        else:
            assert executor.run_transposed_linear(lin, [2.0], data, None) == [10.0, 6.0]
            assert not calls


def test_a_hook_patched_on_a_base_class_is_seen_by_its_subclasses():
    base = _fresh_executor_class()
    sub = type("Sub", (base,), {})
    _gradient(sub())
    with mock.patch.object(base, "run_transposed_linear",
                           lambda self, *a: BackwardExecutor.run_transposed_linear(self, *a)):
        assert overridden_hooks(sub()) == {"run_transposed_linear"}
    assert overridden_hooks(sub()) == frozenset()


def test_compile_graph_beside_execute_forward_vouches_for_it():
    class Both(ScalarExecutor):
        def execute_forward(self, graph, data):
            raise AssertionError("compile_graph vouches for execute_forward: not called")

        def compile_graph(self, graph, input_keys):
            return ScalarExecutor.compile_graph(self, graph, input_keys)

    assert overridden_hooks(Both()) == frozenset()
    assert _gradient(Both()) == _gradient(ScalarExecutor())


def test_a_hook_using_super_does_not_keep_its_class_alive():
    class Counting(ScalarExecutor):
        def execute_forward(self, graph, data):
            return super().execute_forward(graph, data)

    assert overridden_hooks(Counting()) == {"execute_forward"}
    gone = weakref.ref(Counting)
    del Counting
    gc.collect()
    assert gone() is None
