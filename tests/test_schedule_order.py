"""``tidu.graph.schedule`` on random graphs: every needed operation once, after the
operations making its inputs, none that is not needed; and, since stop 61, of an
operation's inputs the one with the longest chain behind it first, so a value a short
chain makes is not held while a long one runs.

TIDU_RANDOM_EXAMPLES=5000 for a long run; the default keeps the suite fast.
"""

import os

from hypothesis import given, settings, strategies as st

from tidu.graph import Derived, Input, OperationKey, schedule

EXAMPLES = int(os.environ.get("TIDU_RANDOM_EXAMPLES", "60"))


@st.composite
def graphs(draw):
    """Value keys of a random DAG: three inputs, then ops of one or two earlier values."""
    values = [Input(("x", i)) for i in range(3)]
    for n in range(draw(st.integers(1, 30))):
        arity = draw(st.integers(1, 2))
        inputs = tuple(values[draw(st.integers(0, len(values) - 1))] for _ in range(arity))
        values.append(OperationKey(("op", n), inputs).output_keys()[0])
    outputs = draw(st.lists(st.sampled_from(values[3:]), min_size=1, max_size=3))
    known = set(values[:3]) | set(draw(st.lists(st.sampled_from(values[3:]), max_size=3)))
    return values, outputs, known


def needed_ops(outputs, known) -> set:
    """The operations ``outputs`` need from ``known``, by a plain search."""
    found, stack = set(), [k for k in outputs if k not in known]
    while stack:
        op_key = stack.pop().operation
        if op_key not in found:
            found.add(op_key)
            stack.extend(k for k in op_key.inputs if k not in known)
    return found


@settings(max_examples=EXAMPLES, deadline=None)
@given(graphs())
def test_every_needed_operation_once_after_its_inputs(graph):
    _, outputs, known = graph
    order = schedule(outputs, known)
    assert len(order) == len(set(order))
    assert set(order) == needed_ops(outputs, known)
    made = set(known)
    for op_key in order:
        assert all(key in made for key in op_key.inputs), op_key
        made.update(op_key.output_keys())
    assert all(key in made for key in outputs)


def chain_with_side_values(n: int):
    """``c_{i+1} = mul(c_i, side_i)`` with ``side_i = f(x)``: the shape of a transposed
    chain, whose cotangent reads a value made from a primal at each step."""
    x = Input("x")
    c = Input("seed")
    for i in range(n):
        side = OperationKey(("side", i), (x,)).output_keys()[0]
        c = OperationKey(("mul", i), (c, side)).output_keys()[0]
    return c, {x, Input("seed")}


def most_live(order, outputs) -> int:
    """The most computed values alive at once running ``order`` (each dropped after its
    last reader)."""
    last = {}
    for step, op_key in enumerate(order):
        for key in op_key.inputs:
            last[key] = step
    live, most = set(), 0
    for step, op_key in enumerate(order):
        live.update(op_key.output_keys())
        most = max(most, len(live))
        live -= {key for key in op_key.inputs if last.get(key) == step and key not in outputs}
    return most


def test_a_side_value_is_made_just_before_it_is_read():
    out, known = chain_with_side_values(50)
    order = schedule([out], known)
    # before stop 61 every side value came first: 50 of them alive at once
    assert most_live(order, [out]) <= 3
    names = [op_key.operation[0] for op_key in order]
    assert names == ["side", "mul"] * 50


def test_a_long_graph_schedules_without_recursion():
    out, known = chain_with_side_values(100_000)
    order = schedule([out], known)
    assert len(order) == 200_000
    assert isinstance(out, Derived) and order[-1] is out.operation
