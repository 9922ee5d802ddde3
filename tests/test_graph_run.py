"""One place runs a graph for the transforms (``transforms.run``: ``GraphRun``, ``run_graph``):
jit, vmap, jvp, vjp and the Jacobians all run their graphs there, on plain arrays and on
tensors, and its results are fresh."""

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.transforms import run


@pytest.fixture
def calls(monkeypatch):
    """Whether each run's results were tensors, for every run of a graph in ``transforms.run``
    (both of its entry points end in its ``fresh``)."""
    seen = []
    original = run.fresh

    def counting(outputs, held):
        seen.append(any(isinstance(o, tnp.Tensor) for o in outputs))
        return original(outputs, held)

    monkeypatch.setattr(run, "fresh", counting)
    return seen


def f(x):
    return tnp.sin(x) * x


X = np.linspace(0.1, 1.0, 4)
CALLS = {
    "jit (second call)": lambda: [jitted(X) for jitted in [tnp.jit(f)] * 2][-1],
    "vmap": lambda: tnp.vmap(f)(np.stack([X, X])),
    "jvp": lambda: tnp.jvp(f, (X,), (np.ones(4),))[1],
    "vjp_fn": lambda: tnp.vjp(f, X)[1](np.ones(4))[0],
    "jacfwd, per basis vector": lambda: tnp.jacfwd(f)(X),
    "jacrev, batched basis": lambda: tnp.jacrev(f)(np.linspace(0.1, 1.0, 40)),
}


@pytest.mark.parametrize("name", CALLS)
def test_every_transform_runs_its_graph_in_the_one_place(name, calls):
    CALLS[name]()
    assert calls, f"{name} ran a graph outside transforms.run"


def test_tensors_replay_through_the_same_place_with_their_derivatives(calls):
    t = tnp.tensor(X, requires_grad=True)
    jitted = tnp.jit(f)
    jitted(t)
    y = jitted(t)                         # the second call runs the traced graph
    assert True in calls
    expected = np.sin(X) + X * np.cos(X)
    np.testing.assert_allclose(tnp.sum(y).backward().grad(t), expected)


def test_results_never_share_memory_with_what_the_run_was_given():
    from tidu.graph import GraphBuilder, Local
    from primitives.tensor.ops import elementwise as ew

    b = GraphBuilder()
    x = b.add_input("x")
    b.set_outputs([x, x] + b.add_operation(ew.neg, [Local(x)]))
    graph = b.build()
    given, held = np.arange(3.0), np.zeros(3)
    first, second, negated = run.GraphRun(graph.output_keys, graph.input_keys)([given],
                                                                               held=[held])
    assert not np.shares_memory(first, given) and not np.shares_memory(second, given)
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, given)
    np.testing.assert_array_equal(negated, -given)


def test_a_program_for_a_list_of_known_keys_is_the_program_for_their_set():
    """``Program.for_values`` takes the known keys as a list too (``GraphRun`` gives one),
    and compiles what it compiles for their set: the same loads and steps."""
    from tidu.graph import GraphBuilder, Local, Program
    from primitives.tensor.ops import elementwise as ew

    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    v = x
    for _ in range(50):
        [v] = b.add_operation(ew.mul, [Local(v), Local(y)])
    b.set_outputs([v])
    g = b.build()
    known = list(g.input_keys)
    by_list, by_set = Program.for_values(g.output_keys, known), Program.for_values(
        g.output_keys, set(known))
    assert by_list.loads == by_set.loads and by_list.outputs == by_set.outputs
    assert [s[1:5] for s in by_list.steps] == [s[1:5] for s in by_set.steps]
    assert by_list.run({g.input_keys[0]: 2.0, g.input_keys[1]: 1.0}) == [2.0]
