"""Draw the graphs of f(x, y) = x * y + sin(x): primal, linearized, transposed, merged.

    python examples/show_graphs.py                 # writes into ./build/graphs
    python examples/show_graphs.py docs/images     # or any directory
    python examples/show_graphs.py --format svg --engine matplotlib out/
    python examples/show_graphs.py --help

writes ``f_primal``, ``f_linearized``, ``f_transposed`` and ``f_merged`` (SVG
and PNG unless ``--format`` says otherwise) into the output directory and
prints their paths. The default directory, ``build/graphs`` under the current
directory, is ignored by git. Needs matplotlib (``pip install ".[viz]"``);
uses Graphviz instead when its ``dot`` program is installed, unless
``--engine matplotlib``.

In the merged picture the linearized graph's references to ``x``, ``y`` and the
transposed graph's references to ``cos(x)`` are arrows from the graph that
holds those values.
"""

import argparse
import os

import matplotlib  # noqa: F401  (the viz extra; the example runner skips this script without it)

from primitives.scalar import sin, trace_scalar
from tidu.viz import draw_primal_linear_transposed

DEFAULT_DIRECTORY = os.path.join("build", "graphs")
FORMATS = ("svg", "png")


def f(x, y):
    return x * y + sin(x)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Draw the primal, linearized, transposed and merged graphs of "
                    "f(x, y) = x * y + sin(x).")
    parser.add_argument("directory", nargs="?", default=DEFAULT_DIRECTORY,
                        help=f"where to write the pictures (default: {DEFAULT_DIRECTORY}, "
                             "which git ignores; created if missing)")
    parser.add_argument("--format", dest="formats", action="append", choices=FORMATS,
                        help="picture format; repeat for several (default: svg and png)")
    parser.add_argument("--engine", choices=("auto", "graphviz", "matplotlib"), default="auto",
                        help="auto (default) uses Graphviz's dot when installed, else matplotlib")
    return parser.parse_args(argv)


def main(argv=None) -> list[str]:
    args = parse_args(argv)
    os.makedirs(args.directory, exist_ok=True)
    graph = trace_scalar(f, ["x", "y"])
    print("f(x, y) = x * y + sin(x)")
    print(graph)
    written = draw_primal_linear_transposed(graph, graph.output_keys, ["x", "y"],
                                            os.path.join(args.directory, "f_"),
                                            formats=args.formats or ("svg", "png"),
                                            engine=args.engine)
    print("wrote:")
    for name in written:
        print(" ", name)
    return written


if __name__ == "__main__":
    main()
