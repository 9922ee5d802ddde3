"""Build a small graph with tidu.graph, evaluate it, and print both readably.

The op set is defined right here: tidu.graph knows no concrete operation.
"""

import argparse
import enum
import math

from tidu.graph import EvaluableGraphOperation, External, GraphBuilder, Input, Local, evaluate


class Op(EvaluableGraphOperation, enum.Enum):
    """A three-op scalar set, just for this example."""

    MUL = "mul"
    ADD = "add"
    SINCOS = "sincos"

    def input_count(self) -> int:
        return 1 if self is Op.SINCOS else 2

    def output_count(self) -> int:
        return 2 if self is Op.SINCOS else 1

    def eval(self, ctx, inputs):
        if self is Op.MUL:
            return [inputs[0] * inputs[1]]
        if self is Op.ADD:
            return [inputs[0] + inputs[1]]
        return [math.sin(inputs[0]), math.cos(inputs[0])]


def main() -> None:
    # f(x, y) = sin(x*y) + cos(x*y) * x
    b = GraphBuilder()
    x, y = b.add_input("x"), b.add_input("y")
    [xy] = b.add_operation(Op.MUL, [Local(x), Local(y)])
    s, c = b.add_operation(Op.SINCOS, [Local(xy)])
    [cx] = b.add_operation(Op.MUL, [Local(c), Local(x)])
    [f] = b.add_operation(Op.ADD, [Local(s), Local(cx)])
    assert b.add_operation(Op.MUL, [Local(x), Local(y)]) == [xy]  # equal ops are one node
    b.set_outputs([f])
    graph = b.build()

    # A second graph refers to the first one's values by key.
    b2 = GraphBuilder()
    b2.add_parent(graph)
    [g] = b2.add_operation(Op.MUL, [External(graph.values[f].key), External(Input("y"))])
    b2.set_outputs([g])
    second = b2.build()

    print("graph f:")
    print(graph)
    print("graph g (refers to f):")
    print(second)

    inputs = {Input("x"): 0.5, Input("y"): 2.0}
    [f_value, g_value] = evaluate([graph, second], [graph.output_keys[0], second.output_keys[0]],
                                  inputs)
    expected = math.sin(1.0) + math.cos(1.0) * 0.5
    print(f"f(0.5, 2.0) = {f_value:.12f}   (by hand {expected:.12f})")
    print(f"g(0.5, 2.0) = {g_value:.12f}   (f * y)")
    assert abs(f_value - expected) < 1e-15 and abs(g_value - 2.0 * expected) < 1e-15


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()   # for --help
    main()
