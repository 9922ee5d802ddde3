"""The seed tutorial's executor: backward runs each node's transpose op by op, as it is built.

Seed 004 (the eager reverse-mode tutorial this project comes from) writes a
`BackwardExecutor` with both hooks:

- `execute_forward(graph, initial_data)` replays a graph on concrete values;
- `run_transposed_linear(linear, cotangents, external_data, ctx)` runs the
  transpose of a node's linear map with `tidu.linear_transpose_with_builder`
  and an *immediate* builder, which evaluates each primitive as the transpose
  rules add it, reading primal values from the data tidu supplies.

`try_backward` calls `run_transposed_linear` once per recorded node that
receives a cotangent, after `execute_forward` wherever the primal values the
transpose reads must be replayed (`cos(x)` for `sin`, nothing for `mul`). This
script runs it on the scalar set (`primitives.scalar`), counts the calls, and
checks the gradients against the shipped `ScalarExecutor` (which overrides no
hook, so it runs fused, compiled plans) and against hand-derived ones.

    python examples/seed_executor.py
"""

import argparse
import math

from tidu import linear_transpose_with_builder
from tidu.eager import BackwardExecutor, EagerInput, RecordedGraph, Recorder, try_backward
from tidu.errors import MissingValueError
from tidu.graph import Input, Local

from primitives.scalar import ScalarExecutor, ScalarOp


class ScalarBuilder:
    """A `PrimitiveBuilder` that evaluates each primitive as it is added.

    Its ids index `locals`; `External` inputs are read from the data tidu supplies.
    """

    def __init__(self, external_data):
        self.locals = []
        self.external_data = external_data

    def __len__(self):
        return len(self.locals)

    def push_value(self, value):
        self.locals.append(value)
        return len(self.locals) - 1

    def resolve_input(self, ref):
        if type(ref) is Local:
            return self.locals[ref]
        return self.external_data[ref.key]

    def add_primitive(self, op, inputs, role):
        outputs = op.eval(None, [self.resolve_input(ref) for ref in inputs])
        start = len(self.locals)
        self.locals.extend(outputs)
        return list(range(start, len(self.locals)))


class SeedExecutor(BackwardExecutor):
    """Both hooks of seed 004, counting their calls."""

    def __init__(self):
        self.forward_calls = 0
        self.transpose_calls = 0

    def execute_forward(self, graph, initial_data):
        """Replay `graph` op by op; its inputs, and what it reads from other graphs, must be
        in `initial_data`."""
        self.forward_calls += 1
        values = {}
        for input_id in graph.inputs:
            key = graph.values[input_id].key
            if key not in initial_data:
                raise MissingValueError(f"missing concrete value for graph input {key!r}")
            values[input_id] = initial_data[key]
        for node in graph.operations:
            args = [values[ref] if type(ref) is Local else initial_data[ref.key]
                    for ref in node.inputs]
            values.update(zip(node.outputs, node.operation.eval(None, args)))
        return {graph.values[i].key: value for i, value in values.items()}

    def run_transposed_linear(self, linear, cotangent_outputs, external_data, ctx):
        self.transpose_calls += 1
        builder = ScalarBuilder(external_data)
        seed_ids = [None if value is None else builder.push_value(value)
                    for value in cotangent_outputs]
        ids = linear_transpose_with_builder(linear, builder, seed_ids, ctx)
        return [None if i is None else builder.locals[i] for i in ids]

    def add_operands(self, a, b):
        return a + b


def record_primitive(recorder, op, inputs):
    """Execute `op` now, record it as a one-operation graph; its outputs as eager inputs."""
    outputs = op.eval(None, [item.data for item in inputs])
    recorded = RecordedGraph.from_primitive(op, recorder.fresh_input_keys(len(inputs)))
    records = recorder.record_graph(recorded, inputs, outputs)
    return [EagerInput(r.key, r.trace, r.requires_grad, value)
            for r, value in zip(records, outputs)]


def eager_leaf(recorder, value, requires_grad=True):
    [key] = recorder.fresh_input_keys(1)
    return EagerInput(Input(key), None, requires_grad, value)


def run():
    recorder = Recorder()

    # The seed's driver: x * x at x = 3, one node, one transpose; the gradient is 6.
    x = eager_leaf(recorder, 3.0)
    [y] = record_primitive(recorder, ScalarOp.MUL, [x, x])
    executor = SeedExecutor()
    gradient = try_backward(y.key, y.trace, 1.0, executor)[x.key]
    print(f"x = 3, y = x * x = {y.data}, dy/dx = {gradient}")
    print(f"  run_transposed_linear calls: {executor.transpose_calls}, "
          f"execute_forward calls: {executor.forward_calls}")
    assert gradient == 6.0 and (executor.transpose_calls, executor.forward_calls) == (1, 0)

    # A chain, y = sin(y) * y + c three times: 9 nodes; each SIN node's transpose reads
    # cos(y), which execute_forward replays first.
    x0, c0 = 0.5, 0.1
    x, c = eager_leaf(recorder, x0), eager_leaf(recorder, c0)
    y = x
    for _ in range(3):
        [s] = record_primitive(recorder, ScalarOp.SIN, [y])
        [p] = record_primitive(recorder, ScalarOp.MUL, [s, y])
        [y] = record_primitive(recorder, ScalarOp.ADD, [p, c])
    executor = SeedExecutor()
    grads = try_backward(y.key, y.trace, 1.0, executor)
    print(f"y = sin(y) * y + c, 3 times: dy/dx = {grads[x.key]:.12f}, dy/dc = {grads[c.key]:.12f}")
    print(f"  run_transposed_linear calls: {executor.transpose_calls}, "
          f"execute_forward calls: {executor.forward_calls}")
    assert (executor.transpose_calls, executor.forward_calls) == (9, 3)

    # The same gradients as the shipped executor's fused plans, and as by hand.
    fused = try_backward(y.key, y.trace, 1.0, ScalarExecutor())
    v, dx, dc = x0, 1.0, 0.0
    for _ in range(3):
        slope = math.cos(v) * v + math.sin(v)
        v, dx, dc = math.sin(v) * v + c0, slope * dx, slope * dc + 1.0
    for key, by_hand in ((x.key, dx), (c.key, dc)):
        assert abs(grads[key] - fused[key]) <= 1e-14 * abs(by_hand)
        assert abs(grads[key] - by_hand) <= 1e-12 * abs(by_hand)
    print("same gradients as ScalarExecutor and as by hand")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()   # for --help
    run()
