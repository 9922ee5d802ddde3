"""Draw the graphs of f(x, y) = x * y + sin(x): primal, linearized, transposed, merged.

    python examples/show_graphs.py [output directory]

writes ``f_primal``, ``f_linearized``, ``f_transposed`` and ``f_merged`` as
SVG and PNG into the output directory (default: the current directory) and
prints their names. Needs matplotlib (``pip install 'tidu[viz]'``); uses
Graphviz instead when its ``dot`` program is installed.

In the merged picture the linearized graph's references to ``x``, ``y`` and the
transposed graph's references to ``cos(x)`` are arrows from the graph that
holds those values.
"""

import os
import sys

import matplotlib  # noqa: F401  (the viz extra; the example runner skips this script without it)

from primitives.scalar import sin, trace_scalar
from tidu.viz import draw_primal_linear_transposed


def f(x, y):
    return x * y + sin(x)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    directory = argv[0] if argv else os.curdir
    os.makedirs(directory, exist_ok=True)
    graph = trace_scalar(f, ["x", "y"])
    print("f(x, y) = x * y + sin(x)")
    print(graph)
    written = draw_primal_linear_transposed(graph, graph.output_keys, ["x", "y"],
                                            os.path.join(directory, "f_"))
    print("wrote:")
    for name in written:
        print(" ", name)
    return written


if __name__ == "__main__":
    main()
