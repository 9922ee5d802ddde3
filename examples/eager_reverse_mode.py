"""Eager reverse mode, as in the tidu tutorial: record `x * x`, then run backward.

A downstream eager frontend executes each primitive at once, records the
invocation with a `Recorder`, and asks `try_backward` for gradients. The
executor here has the two hooks a runtime needs: run a graph on Python floats
(the replayed primal values, then each node's transpose), and add two cotangents.
"""

import argparse
import math

from tidu.eager import BackwardExecutor, EagerInput, RecordedGraph, Recorder, try_backward
from tidu.graph import Input, compiled

from primitives.scalar import ScalarOp


class TutorialExecutor(BackwardExecutor):
    """Runs backward work on Python floats, one operation at a time."""

    def execute_forward(self, graph, initial_data):
        # Run a graph on floats: a node's replayed primal values, or its transpose.
        return dict(zip(graph.output_keys, compiled(graph).run(initial_data)))

    def add_operands(self, a, b):
        return a + b


def record_primitive(recorder, op, inputs):
    """Execute `op` now and record it as a one-operation graph."""
    outputs = op.eval(None, [item.data for item in inputs])
    recorded = RecordedGraph.from_primitive(op, recorder.fresh_input_keys(len(inputs)))
    return outputs, recorder.record_graph(recorded, inputs, outputs)


def eager_leaf(recorder, value, requires_grad=True):
    [key] = recorder.fresh_input_keys(1)
    return EagerInput(Input(key), None, requires_grad, value)


def main() -> None:
    recorder = Recorder()
    executor = TutorialExecutor()

    # x * x at x = 3: the gradient is 6.
    x = eager_leaf(recorder, 3.0)
    [value], [y] = record_primitive(recorder, ScalarOp.MUL, [x, x])
    grads = try_backward(y.key, y.trace, 1.0, executor)
    print(f"x = 3.0, y = x * x = {value}, dy/dx = {grads[x.key]}")
    assert value == 9.0 and grads[x.key] == 6.0

    # A longer chain: y = exp(sin(x) * x) - x at x = 0.7.
    x = eager_leaf(recorder, 0.7)
    [s], [s_out] = record_primitive(recorder, ScalarOp.SIN, [x])
    s_in = EagerInput(s_out.key, s_out.trace, s_out.requires_grad, s)
    [p], [p_out] = record_primitive(recorder, ScalarOp.MUL, [s_in, x])
    p_in = EagerInput(p_out.key, p_out.trace, p_out.requires_grad, p)
    [e], [e_out] = record_primitive(recorder, ScalarOp.EXP, [p_in])
    e_in = EagerInput(e_out.key, e_out.trace, e_out.requires_grad, e)
    [value], [y] = record_primitive(recorder, ScalarOp.SUB, [e_in, x])
    grads = try_backward(y.key, y.trace, 1.0, executor)
    by_hand = math.exp(math.sin(0.7) * 0.7) * (math.cos(0.7) * 0.7 + math.sin(0.7)) - 1.0
    print(f"x = 0.7, y = exp(sin(x) * x) - x = {value:.12f}")
    print(f"  dy/dx = {grads[x.key]:.12f}   (by hand {by_hand:.12f})")
    assert abs(grads[x.key] - by_hand) < 1e-12

    # Calling backward again gives the same answer: traces are never changed.
    assert try_backward(y.key, y.trace, 1.0, executor)[x.key] == grads[x.key]
    print("backward twice: same gradient")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()   # for --help
    main()
