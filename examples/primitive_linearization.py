"""Linearize and transpose a small ScalarOp graph, and read the three graphs.

    f(x, y) = x * y + sin(x)

1. The primal graph is built op by op with a GraphBuilder (``trace_scalar``
   would build the same graph from a Python function).
2. ``linearize`` turns it into the linear graph of its JVP: tangents
   ``(dx, dy)`` in, ``df`` out. Each operation's JVP rule emits the tangent
   work; ``MUL``'s rule is the tutorial's ``dx*y + x*dy``.
3. ``linear_transpose`` turns the linear graph into its transpose: a cotangent
   seed ``ct`` in, ``(ct * df/dx, ct * df/dy)`` out.
4. ``evaluate`` runs all three graphs together: the linear graph refers to the
   primal graph's values (``ext(...)`` in the listings), and the transposed
   graph to both.

By hand: df/dx = y + cos(x), df/dy = x.
"""

import argparse
import math

from primitives.scalar import ScalarOp
from tidu import linear_transpose, linearize
from tidu.graph import GraphBuilder, Input, Local, evaluate


def build_primal():
    """f(x, y) = x * y + sin(x), one operation at a time."""
    b = GraphBuilder()
    x = b.add_input("x")                                      # local ids of the inputs
    y = b.add_input("y")
    [xy] = b.add_operation(ScalarOp.MUL, [Local(x), Local(y)])  # each op returns its output ids
    [s] = b.add_operation(ScalarOp.SIN, [Local(x)])
    [f] = b.add_operation(ScalarOp.ADD, [Local(xy), Local(s)])
    b.set_outputs([f])
    return b.build()


def heading(text):
    print()
    print(text)
    print("-" * len(text))


def main():
    primal = build_primal()
    linear = linearize(primal, primal.output_keys, ["x", "y"])
    transposed = linear_transpose(linear)

    heading("primal graph: f(x, y) = x*y + sin(x)")
    print(primal)
    heading("linear graph (JVP): (dx, dy) -> df")
    print(linear.graph)
    print("tangent inputs:", ", ".join(f"{key} -> {tkey.key!r}" for (key, _), tkey
                                       in zip(linear.tangent_inputs, linear.tangent_input_keys)))
    heading("transposed graph (VJP): ct -> (ct * df/dx, ct * df/dy)")
    print(transposed.graph)
    print("cotangent seed:", transposed.tangent_input_keys[0].key)
    print()
    print("In the listings, ext(...) is a value of another graph; [Linearized(T.)] marks")
    print("linear work and which inputs are tangents (T) or primal factors (.).")

    x, y = 0.5, 2.0
    dx, dy = 1.0, 0.25
    ct = 1.0
    values = {
        Input("x"): x,
        Input("y"): y,
        linear.tangent_input_keys[0]: dx,
        linear.tangent_input_keys[1]: dy,
        transposed.tangent_input_keys[0]: ct,
    }
    [f_value, jvp, vjp_x, vjp_y] = evaluate(
        [primal, linear.graph, transposed.graph],
        [primal.output_keys[0], linear.tangent_output_keys[0], *transposed.tangent_output_keys],
        values,
    )

    f_hand = x * y + math.sin(x)
    dfdx, dfdy = y + math.cos(x), x               # derived by hand
    jvp_hand = dfdx * dx + dfdy * dy

    heading(f"numbers at x = {x}, y = {y}")
    rows = [
        ("f(x, y)", f_value, "x*y + sin(x)", f_hand),
        (f"JVP df(dx={dx}, dy={dy})", jvp, "(y + cos x) dx + x dy", jvp_hand),
        ("VJP df/dx (ct = 1)", vjp_x, "y + cos(x)", dfdx),
        ("VJP df/dy (ct = 1)", vjp_y, "x", dfdy),
    ]
    for label, got, formula, hand in rows:
        print(f"{label:<26} = {got:15.12f}    by hand {formula:<22} = {hand:15.12f}")

    assert abs(f_value - f_hand) < 1e-12
    assert abs(jvp - jvp_hand) < 1e-12
    assert abs(vjp_x - ct * dfdx) < 1e-12
    assert abs(vjp_y - ct * dfdy) < 1e-12
    print()
    print("all derivatives match the hand-derived ones")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()   # for --help
    main()
