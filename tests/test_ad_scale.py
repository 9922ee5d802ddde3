"""A 100,000-op chain ``y = sin(y) * y + c`` linearized, transposed and evaluated.

Nothing may recurse per op (no RecursionError); the numbers must match a
hand-written forward-mode loop over floats.
"""

from __future__ import annotations

import math
import sys

import pytest

from primitives.scalar import ScalarOp
from tidu import linear_transpose, linearize
from tidu.graph import GraphBuilder, Input, Local, evaluate

STEPS = 33_334                   # 3 ops per step: 100,002 primal ops
X0, C = 0.5, 0.3


def chain(steps):
    b = GraphBuilder()
    y = b.add_input("x")
    c = b.add_input("c")
    for _ in range(steps):
        [s] = b.add_operation(ScalarOp.SIN, [Local(y)])
        [m] = b.add_operation(ScalarOp.MUL, [Local(s), Local(y)])
        [y] = b.add_operation(ScalarOp.ADD, [Local(m), Local(c)])
    b.set_outputs([y])
    return b.build()


def forward_mode_loop(steps, x0, c, dx, dc):
    """``(y, dy)`` by the textbook forward-mode recurrence, in plain floats."""
    y, dy = x0, dx
    for _ in range(steps):
        # d(sin(y) y + c) = (cos(y) y + sin(y)) dy + dc
        dy = (math.cos(y) * y + math.sin(y)) * dy + dc
        y = math.sin(y) * y + c
    return y, dy


@pytest.fixture(scope="module")
def transformed():
    limit = sys.getrecursionlimit()
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    sys.setrecursionlimit(depth + 500)   # a per-op recursion would need ~100,000 frames
    try:
        g = chain(STEPS)
        lin = linearize(g, g.output_keys, ["x", "c"])
        tr = linear_transpose(lin)
    finally:
        sys.setrecursionlimit(limit)
    yield g, lin, tr
    del g, lin, tr               # dropping the deep graphs must not recurse per op either


def test_sizes(transformed):
    g, lin, tr = transformed
    assert len(g.operations) == 3 * STEPS >= 100_000
    assert len(lin.graph.operations) >= len(g.operations)
    assert len(tr.graph.operations) >= len(g.operations)


def test_jvp_and_vjp_match_the_float_loop(transformed):
    g, lin, tr = transformed
    values = {Input("x"): X0, Input("c"): C, tr.tangent_input_keys[0]: 1.0}
    # tangent direction (dx, dc) = (0.5, 1.0)
    values.update(zip(lin.tangent_input_keys, [0.5, 1.0]))
    y, jvp, ct_x, ct_c = evaluate(
        [g, lin.graph, tr.graph],
        [g.output_keys[0], lin.tangent_output_keys[0], *tr.tangent_output_keys], values)

    y_ref, jvp_ref = forward_mode_loop(STEPS, X0, C, 0.5, 1.0)
    _, grad_x = forward_mode_loop(STEPS, X0, C, 1.0, 0.0)
    _, grad_c = forward_mode_loop(STEPS, X0, C, 0.0, 1.0)
    assert y == pytest.approx(y_ref, rel=1e-12)
    assert jvp == pytest.approx(jvp_ref, rel=1e-9, abs=1e-300)
    assert ct_x == pytest.approx(grad_x, rel=1e-9, abs=1e-300)
    assert ct_c == pytest.approx(grad_c, rel=1e-9)
    assert grad_c != 0.0


def test_short_chain_gradient_of_x(transformed):
    # on the long chain d y / d x underflows to 0; a short one checks the x path too
    g = chain(30)
    lin = linearize(g, g.output_keys, ["x", "c"])
    tr = linear_transpose(lin)
    values = {Input("x"): X0, Input("c"): C, tr.tangent_input_keys[0]: 1.0}
    ct_x, ct_c = evaluate([g, lin.graph, tr.graph], tr.tangent_output_keys, values)
    assert ct_x == pytest.approx(forward_mode_loop(30, X0, C, 1.0, 0.0)[1], rel=1e-9)
    assert ct_c == pytest.approx(forward_mode_loop(30, X0, C, 0.0, 1.0)[1], rel=1e-9)
    assert abs(ct_x) > 1e-12

