"""No recursion proportional to graph size: a 200,000-op chain through every graph operation."""

from __future__ import annotations

import gc

import pytest

from tidu.graph import (
    PRIMARY,
    Derived,
    GraphBuilder,
    Input,
    Local,
    OperationKey,
    evaluate,
    keys,
    resolve,
    to_networkx,
)

from graph_ops import EVALS, ScalarOp, reset_counts

N = 200_000


class DeepChain:
    """Builds the chain ``x -> NEG -> NEG -> ...`` (N ops) once, on first use, until dropped."""

    def __init__(self) -> None:
        self.graph = None
        self.last = None

    def get(self):
        if self.graph is None:
            builder = GraphBuilder()
            value = builder.add_input("deep-x")
            add = builder.add_operation
            neg = ScalarOp.NEG
            for _ in range(N):
                [value] = add(neg, [Local(value)])
            builder.set_outputs([value])
            self.graph, self.last = builder.build(), value
        return self.graph, self.last


@pytest.fixture(scope="module")
def chain():
    holder = DeepChain()
    yield holder
    holder.graph = None
    gc.collect()


@pytest.fixture
def deep(chain):
    return chain.get()


def test_construction(deep):
    graph, last = deep
    assert last == N
    assert len(graph.values) == N + 1 and len(graph.operations) == N
    assert graph.operations[-1].inputs == (Local(N - 1),)


def test_hash_equality_and_repr_of_the_deepest_key(deep):
    graph, last = deep
    key = graph.values[last].key
    assert hash(key) == hash(key)
    below = graph.values[last - 1].key
    # the same structure, rebuilt independently on top of the value below it
    rebuilt = Derived(OperationKey(ScalarOp.NEG, (below,), PRIMARY), 0)
    assert rebuilt is key and rebuilt == key and hash(rebuilt) == hash(key)
    assert key != below and {key: 1, below: 2}[key] == 1
    assert key.operation.inputs == (below,)
    text = repr(key)
    assert "\n" not in text and len(text) < 100 and "NEG" in text
    assert len(repr(key.operation)) < 100
    assert len(repr(graph)) < 100


def test_str_listing(deep):
    graph, last = deep
    lines = str(graph).splitlines()
    assert len(lines) == N + 2
    assert lines[0] == "graph(a = 'deep-x'):"
    assert lines[1] == "  b = NEG a"
    assert lines[-1].startswith("  return ")


def test_resolve(deep):
    graph, last = deep
    view = resolve(graph)
    d = view.resolve_value(graph.values[last].key)
    assert d.local_id == last and d.operation is ScalarOp.NEG
    assert d.inputs == (graph.values[last - 1].key,)
    assert view.resolve_value(Input("deep-x")).is_input


def test_evaluate(deep):
    graph, last = deep
    reset_counts()
    key = graph.values[last].key
    assert evaluate(graph, [key], {Input("deep-x"): 1.5}) == [1.5]   # N is even
    assert EVALS[ScalarOp.NEG] == N
    # the middle of the chain, given as a value, cuts the work in half
    reset_counts()
    middle = graph.values[N // 2].key
    assert evaluate(graph, [key], {middle: -2.0}) == [-2.0]
    assert EVALS[ScalarOp.NEG] == N // 2


def test_to_networkx(deep):
    graph, last = deep
    # Speed only: networkx allocates ~1M dicts here and the cyclic GC, rescanning
    # them as they pile up, would triple the time; recursion is what is tested.
    enabled = gc.isenabled()
    gc.disable()
    try:
        out = to_networkx(graph)
        assert out.number_of_nodes() == 2 * N + 1
        assert out.number_of_edges() == 2 * N
        assert out.nodes[("value", last)]["is_output"]
        assert list(out.predecessors(("op", N - 1))) == [("value", N - 1)]
        del out
    finally:
        if enabled:
            gc.enable()


def test_dropping_a_deep_graph_frees_its_keys(chain):
    """Deallocating a 200k-deep key chain must not overflow the C stack, and frees the keys.

    Runs last in this module: it drops the shared chain.
    """
    chain.get()
    gc.collect()
    with_chain = keys.interned_count()
    assert with_chain >= N + 1
    chain.graph = None
    gc.collect()
    assert keys.interned_count() <= with_chain - N


def test_deep_keys_and_graph_pickle_without_recursion(deep):
    import pickle

    graph, last = deep
    key = graph.values[last].key
    assert pickle.loads(pickle.dumps(key)) is key
    assert pickle.loads(pickle.dumps(key.operation)) is key.operation
    copy = pickle.loads(pickle.dumps(graph))
    assert copy.output_keys == graph.output_keys
    assert len(copy.operations) == N and copy.value_keys == graph.value_keys
