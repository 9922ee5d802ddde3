"""Pictures of graphs: ``tidu.viz`` layouts, SVG/PNG files, the example script."""

from __future__ import annotations

import builtins
import os
import subprocess
import sys
from pathlib import Path

import pytest

from primitives.scalar import sin, sincos, trace_scalar
from tidu import TiduError, linear_transpose, linearize

matplotlib = pytest.importorskip("matplotlib")

from tidu import viz

ROOT = Path(__file__).resolve().parent.parent
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def f(x, y):
    return x * y + sin(x)


@pytest.fixture
def graphs():
    primal = trace_scalar(f, ["x", "y"])
    linear = linearize(primal, primal.output_keys, ["x", "y"])
    transposed = linear_transpose(linear)
    return primal, linear, transposed


def overlap(a, b) -> bool:
    return (abs(a.x - b.x) * 2 < a.width + b.width - 1e-9
            and abs(a.y - b.y) * 2 < a.height + b.height - 1e-9)


def test_layout_of_primal(graphs):
    primal, _, _ = graphs
    lay = viz.layout(primal)
    kinds = sorted(node.kind for node in lay.nodes.values())
    assert kinds == ["input", "input", "operation", "operation", "operation", "output"]
    labels = {node.label for node in lay.nodes.values() if node.kind == "operation"}
    assert labels == {"c = MUL", "d = SIN", "e = ADD"}
    assert not any(node.linear for node in lay.nodes.values())
    assert {edge.kind for edge in lay.edges} == {"local"}
    assert len(lay.edges) == 2 + 1 + 2 + 1   # MUL, SIN, ADD inputs and the output
    # data flows downwards; nothing overlaps
    for edge in lay.edges:
        assert lay.nodes[edge.source].y > lay.nodes[edge.target].y
    nodes = list(lay.nodes.values())
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            assert not overlap(a, b), (a.label, b.label)


def test_linear_graph_alone_shows_external_nodes(graphs):
    _, linear, _ = graphs
    lay = viz.layout(linear)
    externals = {node.label for node in lay.nodes.values() if node.kind == "external"}
    assert externals == {"ext 'x'", "ext 'y'"}
    linear_ops = [node for node in lay.nodes.values() if node.linear]
    assert linear_ops and all(node.style["linestyle"] == "dashed" for node in linear_ops)
    primal_ops = [node for node in lay.nodes.values()
                  if node.kind == "operation" and not node.linear]
    assert [node.label for node in primal_ops] == ["c = COS"]   # primal work in the JVP
    assert primal_ops[0].style != linear_ops[0].style
    assert lay.edges_of_kind("external")


def test_merged_references_are_edges_from_the_graph_that_holds_them(graphs):
    primal, linear, transposed = graphs
    drawn = [primal, linear.graph, transposed.graph]
    lay = viz.layout(drawn, names=["primal", "linear", "transposed"])
    assert [c.title for c in lay.clusters] == ["primal", "linear", "transposed"]
    assert not [n for n in lay.nodes.values() if n.kind == "external"]
    cross = lay.edges_of_kind("cross")
    # every External reference of the linear graph is an edge from a primal node
    for index, node in enumerate(linear.graph.operations):
        for position, ref in enumerate(node.inputs):
            if type(ref).__name__ != "External":
                continue
            [edge] = [e for e in cross if e.target == (1, "op", index) and e.position == position]
            assert edge.source[0] == 0
            assert primal.value_keys[edge.source[2]] == ref[0]    # an input node of primal
    # the transposed graph refers to the primal inputs and to the linear graph's COS
    sources = {(e.source[0], lay.nodes[e.source].label) for e in cross if e.target[0] == 2}
    assert sources == {(0, "a: 'x'"), (0, "b: 'y'"), (1, "c = COS")}
    # each graph sits in its own column band
    for node in lay.nodes.values():
        cluster = lay.clusters[node.graph]
        assert cluster.x0 <= node.x - node.width / 2 and node.x + node.width / 2 <= cluster.x1
    for left, right in zip(lay.clusters, lay.clusters[1:]):
        assert left.x1 < right.x0
    # cross edges end at their target's top
    for edge in cross:
        target = lay.nodes[edge.target]
        assert edge.points[-1][1] == pytest.approx(target.y + target.height / 2)


def test_multi_output_edges_carry_their_slot():
    graph = trace_scalar(lambda x: sincos(x)[0] * sincos(x)[1], ["x"])
    lay = viz.layout(graph)
    slots = sorted(edge.slot for edge in lay.edges if edge.slot is not None)
    assert slots == [0, 1]
    [op] = [n for n in lay.nodes.values() if n.label.endswith("SINCOS")]
    assert op.label == "b, c = SINCOS"


def test_parameters_and_wrapping():
    from primitives.scalar import Pow
    from tidu.graph import GraphBuilder, Local

    b = GraphBuilder()
    x = b.add_input("a rather long input name that must be wrapped somewhere")
    [y] = b.add_operation(Pow(2.5), [Local(x)])
    b.set_outputs([y])
    lay = viz.layout(b.build())
    labels = [n.label for n in lay.nodes.values()]
    assert any("Pow(exponent=2.5)" in label.replace("\n", "") for label in labels)
    assert all(len(line) <= viz.WRAP for label in labels for line in label.split("\n"))


@pytest.mark.parametrize("kind", ["primal", "linear", "transposed", "merged"])
def test_svg_and_png_files(graphs, tmp_path, kind):
    primal, linear, transposed = graphs
    drawn = {"primal": [primal], "linear": [linear], "transposed": [transposed],
             "merged": [primal, linear, transposed]}[kind]
    svg = tmp_path / f"{kind}.svg"
    png = tmp_path / f"{kind}.png"
    viz.draw(drawn, svg, title=kind, engine="matplotlib")
    viz.draw(drawn, png, title=kind, engine="matplotlib")
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert kind in text                                   # the title
    if kind in ("primal", "merged"):
        assert "MUL" in text and "SIN" in text
    if kind in ("linear", "merged"):
        assert "COS" in text and "linear operation" in text
    if kind == "transposed":
        assert "MUL_CONJ" in text and "linear operation" in text
    if kind == "merged":
        assert "another drawn graph" in text
    else:
        assert "another drawn graph" not in text
    if kind == "primal":
        assert "linear operation" not in text


def test_draw_primal_linear_transposed(graphs, tmp_path):
    primal, _, _ = graphs
    written = viz.draw_primal_linear_transposed(primal, primal.output_keys, ["x", "y"],
                                                tmp_path / "f_", engine="matplotlib")
    names = sorted(Path(p).name for p in written)
    assert names == sorted(f"f_{kind}.{fmt}" for kind in
                           ("primal", "linearized", "transposed", "merged")
                           for fmt in ("svg", "png"))
    for path in written:
        assert Path(path).stat().st_size > 1000


def test_bad_arguments(graphs, tmp_path):
    primal, _, _ = graphs
    with pytest.raises(TiduError, match=".svg or .png"):
        viz.draw(primal, tmp_path / "f.pdf")
    with pytest.raises(TiduError, match="engine"):
        viz.draw(primal, tmp_path / "f.svg", engine="tikz")
    with pytest.raises(TiduError, match="Graph"):
        viz.layout([primal, "not a graph"])
    with pytest.raises(TiduError, match="names"):
        viz.layout(primal, names=["a", "b"])


def test_big_graph_refused_unless_asked(tmp_path):
    def chain(x):
        for _ in range(300):
            x = sin(x) * x
        return x

    graph = trace_scalar(chain, ["x"])
    with pytest.raises(TiduError, match="max_nodes"):
        viz.layout(graph, max_nodes=100)
    lay = viz.layout(graph)                 # 600 ops: layered without recursion
    assert len(lay.nodes) == 1 + 600 + 1
    viz.draw(graph, tmp_path / "big.png", engine="matplotlib", max_nodes=None)
    assert (tmp_path / "big.png").read_bytes()[:8] == PNG_MAGIC


def test_missing_matplotlib_is_a_clear_error(graphs, tmp_path, monkeypatch):
    primal, _, _ = graphs
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(TiduError, match=r"viz.*extra|tidu\[viz\]"):
        viz.draw(primal, tmp_path / "f.png", engine="matplotlib")
    viz.layout(primal)                      # the layout itself needs no matplotlib


def test_tidu_does_not_import_matplotlib():
    code = ("import sys, tidu, tidu.viz, tidu.graph; "
            "print('matplotlib' in sys.modules)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(not viz.graphviz_available(), reason="Graphviz dot is not installed")
def test_graphviz_engine(graphs, tmp_path):
    primal, linear, transposed = graphs
    viz.draw([primal, linear, transposed], tmp_path / "m.svg", engine="graphviz")
    viz.draw([primal, linear, transposed], tmp_path / "m.png", engine="graphviz")
    assert "MUL" in (tmp_path / "m.svg").read_text()
    assert (tmp_path / "m.png").read_bytes()[:8] == PNG_MAGIC


def test_dot_source_without_graphviz(graphs):
    primal, linear, _ = graphs
    source = viz._dot_source(viz.layout([primal, linear]), "t")
    assert source.startswith("digraph") and "cluster_0" in source and "cluster_1" in source
    assert "dashed" in source and "MUL" in source


def test_example_script_writes_into_a_directory(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "show_graphs.py"),
                             str(tmp_path / "pictures")],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr
    for kind in ("primal", "linearized", "transposed", "merged"):
        for fmt in ("svg", "png"):
            path = tmp_path / "pictures" / f"f_{kind}.{fmt}"
            assert path.exists() and str(path) in result.stdout
    # with no argument it writes into ./build/graphs (git-ignored)
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "show_graphs.py")],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "build" / "graphs" / "f_merged.svg").exists()
