"""Pictures of graphs: primal, linearized, transposed, or several merged.

``draw(graphs, "f.svg")`` writes an SVG or PNG (chosen by the file extension).
Each graph is drawn in its own labelled column; data flows top to bottom.

* operations are boxes labelled ``outputs = NAME`` (with parameters for
  non-enum operations such as ``Pow(exponent=2.0)``); linear operations (role
  not ``PRIMARY``) are blue with a dashed border and show their active mask,
  e.g. ``[T.]``: input 0 is a tangent, input 1 a primal factor;
* graph inputs are green pills, outputs orange boxes;
* an ``External`` reference to a value of another graph drawn alongside is an
  arrow from that graph's node (purple); a reference to a graph not drawn gets
  a small grey ``ext`` node showing the key;
* an operation's inputs arrive left to right in input order.

The layout is pure Python (layers from a topological order, barycenter ordering,
dummy points for long edges) drawn with matplotlib (the ``viz`` extra:
``pip install 'tidu[viz]'``); no system Graphviz is needed. If Graphviz's ``dot``
is on the ``PATH``, ``engine="graphviz"`` (or the default ``"auto"``) uses it.
matplotlib is imported only when drawing.

Graphs with more than ``max_nodes`` nodes (default 1500) raise
:class:`~tidu.errors.TiduError` rather than produce an unreadable picture;
pass ``max_nodes=None`` to draw them anyway (slowly, and very large).

>>> from tidu.example_ops import trace
>>> g = trace(lambda x, y: x * y, ["x", "y"])
>>> lay = layout(g)
>>> sorted(node.kind for node in lay.nodes.values())
['input', 'input', 'operation', 'output']
>>> len(lay.edges)
3
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidu.errors import InvalidArgumentError, TiduError
from tidu.graph import PRIMARY, Graph, Linearized, Local, key_label, op_name, value_name

__all__ = ["Cluster", "Layout", "LayoutEdge", "LayoutNode", "draw",
           "draw_primal_linear_transposed", "graphviz_available", "layout"]

FONT_SIZE = 10.0                 # points
CHAR_WIDTH = 0.6 * FONT_SIZE / 72  # inches per character of a monospace font
LINE_HEIGHT = 1.35 * FONT_SIZE / 72
WRAP = 22                        # characters per label line
MAX_LINES = 3
NODE_GAP = 0.35                  # inches between nodes in a layer
LAYER_GAP = 0.55                 # inches between layers
BAND_GAP = 0.7                   # inches between graph columns
DEFAULT_MAX_NODES = 1500

STYLES = {
    "operation": {"facecolor": "#fff4d6", "edgecolor": "#8a6d1a", "linestyle": "solid",
        "linewidth": 1.2, "shape": "box"},
    "linear": {"facecolor": "#dbe9ff", "edgecolor": "#1f5bb5", "linestyle": "dashed",
        "linewidth": 1.5, "shape": "box"},
    "input": {"facecolor": "#d9f2d9", "edgecolor": "#2e7d32", "linestyle": "solid",
        "linewidth": 1.5, "shape": "pill"},
    "output": {"facecolor": "#ffd9b3", "edgecolor": "#c25e00", "linestyle": "solid",
        "linewidth": 2.2, "shape": "box"},
    "external": {"facecolor": "#eeeeee", "edgecolor": "#777777", "linestyle": "dotted",
        "linewidth": 1.2, "shape": "box"},
}
EDGE_COLORS = {"local": "#333333", "cross": "#8e3fb5", "external": "#777777"}
LEGEND = [
    ("input", "graph input"),
    ("operation", "primal operation"),
    ("linear", "linear operation [T = tangent input, . = primal factor]"),
    ("output", "graph output"),
    ("external", "external value (graph not drawn)"),
]


@dataclass
class LayoutNode:
    """A node of a picture: ``kind`` is input, operation, output or external.

    ``graph`` is the index of the drawn graph it belongs to; ``x``, ``y`` its
    centre and ``width``, ``height`` its size, in inches; ``style`` its colours.
    """

    id: tuple
    kind: str
    graph: int
    label: str
    linear: bool = False
    key: Any = None
    x: float = 0.0
    y: float = 0.0
    width: float = 0.0
    height: float = 0.0
    style: dict = field(default_factory=dict)


@dataclass
class LayoutEdge:
    """Data flow from ``source`` to ``target`` (node ids).

    ``kind`` is ``"local"`` (inside one graph), ``"cross"`` (an ``External``
    reference to a value of another drawn graph) or ``"external"`` (from an
    ``ext`` node). ``position`` is the input position at the target (``None``
    into an output node); ``slot`` the output slot of a multi-output source.
    ``points`` is the drawn polyline, source to target.
    """

    source: tuple
    target: tuple
    kind: str
    position: int | None = None
    slot: int | None = None
    key: Any = None
    points: list = field(default_factory=list)


@dataclass
class Cluster:
    """The column band of one drawn graph."""

    graph: int
    title: str
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass
class Layout:
    """Everything :func:`draw` draws: nodes by id, edges, one cluster per graph."""

    nodes: dict
    edges: list
    clusters: list
    width: float = 0.0
    height: float = 0.0

    def edges_of_kind(self, kind: str) -> list:
        return [edge for edge in self.edges if edge.kind == kind]


# --- building the node/edge structure ------------------------------------------


def _as_graphs(graphs) -> list:
    if isinstance(graphs, Graph) or hasattr(graphs, "tangent_inputs"):
        graphs = [graphs]
    if not hasattr(graphs, "__iter__") or isinstance(graphs, (str, bytes)):
        raise InvalidArgumentError(f"cannot draw {graphs!r}: expected a Graph, a "
                                   "LinearizedGraph or a sequence of them")
    out = []
    for graph in graphs:
        graph = getattr(graph, "graph", graph)   # a LinearizedGraph
        if not isinstance(graph, Graph):
            raise InvalidArgumentError(f"cannot draw {graph!r}: expected a Graph or "
                                       "LinearizedGraph")
        out.append(graph)
    if not out:
        raise TiduError("draw needs at least one graph")
    return out


def _wrap(text: str) -> str:
    lines = []
    for part in text.split("\n"):
        lines.extend(textwrap.wrap(part, WRAP, break_long_words=True,
                                   break_on_hyphens=False) or [""])
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES]
        lines[-1] = lines[-1][:WRAP - 1] + "…"
    return "\n".join(lines)


def _role_text(role) -> str:
    if isinstance(role, Linearized):
        return "[" + "".join("T" if flag else "." for flag in role.active_mask) + "]"
    return f"[{role!r}]"


def _op_label(graph: Graph, node) -> str:
    outs = ", ".join(value_name(i) for i in node.outputs)
    name = op_name(node.operation)
    text = f"{outs} = {name}"
    if node.role is not PRIMARY:
        text += " " + _role_text(node.role)
    return _wrap(text)


def _size(label: str, kind: str) -> tuple[float, float]:
    lines = label.split("\n")
    width = max(len(line) for line in lines) * CHAR_WIDTH + 0.24
    height = len(lines) * LINE_HEIGHT + 0.16
    if kind == "input":
        width += 0.12
    return max(width, 0.5), height


def _structure(graphs: list, names: Sequence[str] | None):
    nodes: dict = {}
    edges: list = []
    # where each value key is drawn: producer (op node, slot) preferred over input node
    home: dict = {}
    for gi, graph in enumerate(graphs):
        ops = graph.operations
        for local_id in graph.inputs:
            key = graph.value_keys[local_id]
            node_id = (gi, "input", local_id)
            label = _wrap(f"{value_name(local_id)}: {key_label(key)}")
            nodes[node_id] = LayoutNode(node_id, "input", gi, label, key=key)
            home.setdefault(key, (node_id, None))
        for index, op_node in enumerate(ops):
            node_id = (gi, "op", index)
            linear = op_node.role is not PRIMARY
            nodes[node_id] = LayoutNode(node_id, "operation", gi, _op_label(graph, op_node),
                                        linear=linear, key=op_node.key)
            multi = len(op_node.outputs) > 1
            for slot, local_id in enumerate(op_node.outputs):
                key = graph.value_keys[local_id]
                previous = home.get(key)
                if previous is None or previous[0][1] == "input":
                    home[key] = (node_id, slot if multi else None)

    def source_of(gi, graph, local_id):
        value = graph.values[local_id]
        if value.producer is None:
            return (gi, "input", local_id), None
        op_index, slot = value.producer
        multi = len(graph.operations[op_index].outputs) > 1
        return (gi, "op", op_index), (slot if multi else None)

    for gi, graph in enumerate(graphs):
        externals: dict = {}
        for index, op_node in enumerate(graph.operations):
            target = (gi, "op", index)
            for position, ref in enumerate(op_node.inputs):
                if type(ref) is Local:
                    source, slot = source_of(gi, graph, int(ref))
                    edges.append(LayoutEdge(source, target, "local", position, slot))
                    continue
                key = ref[0]
                found = home.get(key)
                if found is not None and found[0][0] != gi:
                    edges.append(LayoutEdge(found[0], target, "cross", position, found[1], key))
                    continue
                if found is not None:              # same graph (defined later): draw locally
                    edges.append(LayoutEdge(found[0], target, "local", position, found[1]))
                    continue
                ext_id = externals.get(key)
                if ext_id is None:
                    ext_id = externals[key] = (gi, "external", len(externals))
                    nodes[ext_id] = LayoutNode(ext_id, "external", gi,
                                               _wrap(f"ext {key_label(key)}"), key=key)
                edges.append(LayoutEdge(ext_id, target, "external", position, None, key))
        for position, local_id in enumerate(graph.outputs):
            node_id = (gi, "output", position)
            label = f"output {position}" if len(graph.outputs) > 1 else "output"
            nodes[node_id] = LayoutNode(node_id, "output", gi,
                                        _wrap(f"{label}: {value_name(local_id)}"),
                                        key=graph.value_keys[local_id])
            source, slot = source_of(gi, graph, local_id)
            edges.append(LayoutEdge(source, node_id, "local", None, slot))

    for node in nodes.values():
        style_name = "linear" if node.linear else node.kind
        node.style = dict(STYLES[style_name])
        node.width, node.height = _size(node.label, node.kind)
    if names is None:
        names = ["graph"] if len(graphs) == 1 else [f"graph {i}" for i in range(len(graphs))]
    names = list(names)
    if len(names) != len(graphs):
        raise TiduError(f"{len(names)} names for {len(graphs)} graphs")
    return nodes, edges, names


# --- layered layout -----------------------------------------------------------


def _isotonic(values: list) -> list:
    """Least-squares non-decreasing fit (pool adjacent violators), iterative."""
    blocks: list = []   # [sum, count]
    for value in values:
        blocks.append([value, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    out = []
    for total, count in blocks:
        out.extend([total / count] * count)
    return out


def _place(order: list, desired: dict, half: dict) -> dict:
    """Centres for ``order`` as close as possible to ``desired`` without overlap."""
    offsets = []
    offset = 0.0
    for i, node in enumerate(order):
        if i:
            offset += half[order[i - 1]] + half[node] + NODE_GAP
        offsets.append(offset)
    fitted = _isotonic([desired[node] - off for node, off in zip(order, offsets)])
    return {node: fit + off for node, fit, off in zip(order, fitted, offsets)}


def _crossings(rows, down, rank) -> int:
    """Edge crossings between adjacent layers of every band (ports count as positions)."""
    total = 0
    for band in rows:
        for row in band:
            segments = [(rank[u], rank[v] + off) for u in row for v, off in down[u]]
            segments.sort()
            for i, (a1, b1) in enumerate(segments):
                for a2, b2 in segments[i + 1:]:
                    if a2 != a1 and b2 < b1:
                        total += 1
    return total


def layout(graphs, *, names: Sequence[str] | None = None,
           max_nodes: int | None = DEFAULT_MAX_NODES) -> Layout:
    """Compute the picture of ``graphs`` (a graph, a ``LinearizedGraph``, or a list).

    Returns a :class:`Layout`: nodes with positions, sizes and styles, edges with
    polylines, and one :class:`Cluster` (column band) per graph.
    """
    import networkx

    graphs = _as_graphs(graphs)
    total = sum(len(g.inputs) + len(g.operation_keys) + len(g.outputs) for g in graphs)
    if max_nodes is not None and total > max_nodes:
        raise TiduError(
            f"the graphs have {total} nodes, more than max_nodes={max_nodes}: a picture this "
            "big is unreadable; draw a smaller graph (e.g. trace a smaller function) or pass "
            "max_nodes=None to draw it anyway")
    nodes, edges, names = _structure(graphs, names)

    dag = networkx.DiGraph()
    dag.add_nodes_from(nodes)
    dag.add_edges_from((edge.source, edge.target) for edge in edges)
    layer: dict = {}
    for node in networkx.topological_sort(dag):
        preds = [layer[p] for p in dag.predecessors(node)]
        layer[node] = max(preds) + 1 if preds else 0
    for node in nodes:                         # sources sit just above their first use
        if dag.in_degree(node) == 0 and dag.out_degree(node):
            layer[node] = max(layer[node], min(layer[s] for s in dag.successors(node)) - 1)

    # per graph: layers of real and dummy nodes, edges split at every layer.
    # up/down hold (neighbour, port offset): the offset, a fraction of the target's
    # width in (-0.5, 0.5), is where an edge enters its target (inputs left to right).
    n_layers = max(layer.values()) + 1
    half: dict = {node: nodes[node].width / 2 for node in nodes}
    up: dict = {node: [] for node in nodes}
    down: dict = {node: [] for node in nodes}
    rows: list = [[[] for _ in range(n_layers)] for _ in graphs]
    for node in nodes:
        rows[nodes[node].graph][layer[node]].append(node)
    n_inputs: dict = {}
    for edge in edges:
        if edge.position is not None:
            n_inputs[edge.target] = n_inputs.get(edge.target, 0) + 1
    ports: list = []
    for edge in edges:
        count = n_inputs.get(edge.target, 1)
        ports.append(0.0 if edge.position is None or count < 2
                     else 0.7 * ((edge.position + 0.5) / count - 0.5))
    chains: list = []
    channel_edges: dict = {}                     # layer above a cross edge's target -> edges
    for index, edge in enumerate(edges):
        chain = [edge.source]
        gs, gt = edge.source[0], edge.target[0]
        # a cross edge runs down its source's band, then along the gap above its target
        end = layer[edge.target] if gs == gt else layer[edge.target] - 1
        for depth in range(layer[edge.source] + 1, end + (0 if gs == gt else 1)):
            dummy = ("dummy", index, depth)
            half[dummy] = 0.05
            up[dummy], down[dummy] = [], []
            rows[gs][depth].append(dummy)
            layer[dummy] = depth
            chain.append(dummy)
        if gs == gt:
            chain.append(edge.target)
            for a, b in itertools.pairwise(chain):
                offset = ports[index] if b == edge.target else 0.0
                down[a].append((b, offset))
                up[b].append((a, offset))
        else:
            for a, b in itertools.pairwise(chain):
                down[a].append((b, 0.0))
                up[b].append((a, 0.0))
            chain.append(edge.target)
            channel_edges.setdefault(layer[edge.target] - 1, []).append(index)
        chains.append(chain)

    # barycenter ordering, a few sweeps down and up
    rank: dict = {}
    for band in rows:
        for row in band:
            for i, node in enumerate(row):
                rank[node] = i
    for band in rows:
        band_nodes = [node for row in band for node in row]
        best = [rank[node] for node in band_nodes]
        best_crossings = _crossings([band], down, rank)
        for sweep in range(12):
            downward = sweep % 2 == 0
            neighbours = up if downward else down
            sign = -1.0 if downward else 1.0
            indices = range(1, n_layers) if downward else range(n_layers - 2, -1, -1)
            for depth in indices:
                row = band[depth]

                def key(node, neighbours=neighbours, sign=sign):
                    near = neighbours[node]
                    if not near:
                        return rank[node]
                    return sum(rank[n] + sign * off for n, off in near) / len(near)
                row.sort(key=key)
                for i, node in enumerate(row):
                    rank[node] = i
            crossings = _crossings([band], down, rank)
            if crossings < best_crossings:     # ties keep the earlier (insertion) order
                best, best_crossings = [rank[node] for node in band_nodes], crossings
            if not crossings:
                break
        rank.update(zip(band_nodes, best))
        for row in band:
            row.sort(key=rank.__getitem__)

    # x coordinates per band: pack, then pull towards neighbours
    xs: dict = {}
    for band in rows:
        for row in band:
            position = 0.0
            for i, node in enumerate(row):
                if i:
                    position += half[row[i - 1]] + half[node] + NODE_GAP
                xs[node] = position
            for node in row:
                xs[node] -= position / 2
        for sweep in range(8):
            downward = sweep % 2 == 0
            neighbours = up if downward else down
            indices = range(n_layers) if downward else range(n_layers - 1, -1, -1)
            for depth in indices:
                row = band[depth]
                if not row:
                    continue
                desired = {}
                for node in row:
                    near = neighbours[node]
                    if not near:
                        desired[node] = xs[node]
                    elif downward:     # put my ports under my sources
                        desired[node] = sum(xs[n] - off * 2 * half[node]
                                            for n, off in near) / len(near)
                    else:              # sit above the ports I feed
                        desired[node] = sum(xs[n] + off * 2 * half[n]
                                            for n, off in near) / len(near)
                xs.update(_place(row, desired, half))

    # layers top to bottom; a gap holding cross edges grows with their number
    heights = [max((nodes[n].height for band in rows for n in band[d] if n in nodes),
                   default=0.3) for d in range(n_layers)]
    ys = []
    gap_top = []
    top = 0.0
    for d in range(n_layers):
        ys.append(top - heights[d] / 2)
        top -= heights[d]
        gap = LAYER_GAP + 0.16 * len(channel_edges.get(d, ()))
        gap_top.append((top, gap))
        top -= gap
    bottom = top + gap_top[-1][1]
    title_room = 0.45
    clusters = []
    left = 0.0
    for gi, band in enumerate(rows):
        members = [n for row in band for n in row]
        title_width = len(names[gi]) * CHAR_WIDTH * 1.2 + 0.3
        if members:
            lo = min(xs[n] - half[n] for n in members)
            hi = max(xs[n] + half[n] for n in members)
        else:
            lo, hi = 0.0, 0.0
        width = max(hi - lo, title_width)
        shift = left + 0.25 - lo + (width - (hi - lo)) / 2
        for n in members:
            xs[n] += shift
        clusters.append(Cluster(gi, names[gi], left, bottom - 0.25, left + width + 0.5,
                                title_room + 0.1))
        left += width + 0.5 + BAND_GAP
    for node_id, node in nodes.items():
        node.x, node.y = xs[node_id], ys[layer[node_id]]

    # polylines: leave the source bottom, enter the target top at its input port
    channel_y: dict = {}
    for depth, members in channel_edges.items():
        members.sort(key=lambda i: nodes[edges[i].target].x)
        gap_y, gap = gap_top[depth]
        for k, index in enumerate(members):
            channel_y[index] = gap_y - gap * (k + 1) / (len(members) + 1)
    for index, (edge, chain) in enumerate(zip(edges, chains)):
        source, target = nodes[edge.source], nodes[edge.target]
        tx = target.x + ports[index] * target.width
        points = [(source.x, source.y - source.height / 2)]
        for dummy in chain[1:-1]:
            points.append((xs[dummy], ys[layer[dummy]]))
        if index in channel_y:
            cy = channel_y[index]
            points.append((points[-1][0], cy))
            points.append((tx, cy))
        points.append((tx, target.y + target.height / 2))
        edge.points = points
    width = left - BAND_GAP
    return Layout(nodes, edges, clusters, width, title_room + 0.1 - (bottom - 0.25))


# --- drawing ------------------------------------------------------------------


def graphviz_available() -> bool:
    """Whether Graphviz's ``dot`` program is on the ``PATH``."""
    return shutil.which("dot") is not None


def _matplotlib():
    try:
        import matplotlib  # noqa: F401
        from matplotlib import patches
        from matplotlib.figure import Figure
        from matplotlib.path import Path
    except ImportError as missing:
        raise TiduError(
            "drawing graphs needs matplotlib, which is not installed: "
            "pip install 'tidu[viz]' (the viz extra) or pip install matplotlib"
        ) from missing
    return Figure, patches, Path


def _format(path) -> str:
    suffix = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    if suffix not in ("svg", "png"):
        raise TiduError(f"cannot tell the picture format of {os.fspath(path)!r}: "
                        "use a .svg or .png file name")
    return suffix


def _draw_matplotlib(lay: Layout, path, fmt: str, title: str | None) -> None:
    Figure, patches, Path = _matplotlib()
    from matplotlib import rc_context

    legend = _legend(lay)
    legend_height = 0.32 * len(legend) + 0.7
    title_height = 0.5 if title else 0.0
    legend_width = 5.4
    width = max(lay.width, legend_width) + 0.4
    height = lay.height + legend_height + title_height + 0.3
    dpi = 150
    if max(width, height) * dpi > 30000:
        dpi = max(20, int(30000 / max(width, height)))
    x0 = -0.2
    y_top = title_height + 0.1 + max(c.y1 for c in lay.clusters)
    with rc_context({"svg.fonttype": "none", "font.family": "monospace",
                     "font.size": FONT_SIZE}):
        fig = Figure(figsize=(width, height), dpi=dpi)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_xlim(x0, x0 + width)
        ax.set_ylim(y_top - height, y_top)
        ax.set_axis_off()
        if title:
            ax.text(x0 + width / 2, y_top - 0.3, title, ha="center", va="center",
                    fontsize=FONT_SIZE + 4, fontweight="bold", family="sans-serif")
        for cluster in lay.clusters:
            ax.add_patch(patches.FancyBboxPatch(
                (cluster.x0, cluster.y0), cluster.x1 - cluster.x0, cluster.y1 - cluster.y0,
                boxstyle="round,pad=0,rounding_size=0.15", facecolor="#f7f7f9",
                edgecolor="#c8c8d0", linewidth=1.0, zorder=0))
            ax.text((cluster.x0 + cluster.x1) / 2, cluster.y1 - 0.25, cluster.title,
                    ha="center", va="center", fontsize=FONT_SIZE + 2, fontweight="bold",
                    family="sans-serif", color="#333344", zorder=1)
        for edge in lay.edges:
            color = EDGE_COLORS[edge.kind]
            points = edge.points
            style = "solid" if edge.kind == "local" else ((0, (4, 2)))
            codes = [Path.MOVETO] + [Path.LINETO] * (len(points) - 1)
            arrow = patches.FancyArrowPatch(
                path=Path(points, codes), arrowstyle="-|>,head_length=6,head_width=3.5",
                color=color, linewidth=1.3, linestyle=style, zorder=2,
                shrinkA=0, shrinkB=0, joinstyle="round")
            ax.add_patch(arrow)
            if edge.slot is not None:
                sx, sy = points[0]
                ax.text(sx + 0.05, sy - 0.1, f":{edge.slot}", fontsize=FONT_SIZE - 2,
                        color=color, ha="left", va="center", zorder=5)
        for node in lay.nodes.values():
            _node_patch(ax, patches, node)
        # legend
        lx, ly = x0 + 0.3, y_top - height + legend_height - 0.25
        ax.text(lx, ly, "legend", fontsize=FONT_SIZE, fontweight="bold", va="center",
                family="sans-serif")
        for i, (kind, text) in enumerate(legend):
            y = ly - 0.32 * (i + 1)
            if kind == "cross":
                ax.add_patch(patches.FancyArrowPatch(
                    (lx, y), (lx + 0.4, y), arrowstyle="-|>,head_length=6,head_width=3.5",
                    color=EDGE_COLORS["cross"], linestyle=(0, (4, 2)), linewidth=1.3))
                ax.text(lx + 0.55, y, text, va="center", fontsize=FONT_SIZE - 1)
                continue
            style = STYLES[kind]
            ax.add_patch(patches.FancyBboxPatch(
                (lx, y - 0.09), 0.4, 0.18, boxstyle=_boxstyle(style["shape"], 0.18),
                facecolor=style["facecolor"], edgecolor=style["edgecolor"],
                linestyle=style["linestyle"], linewidth=style["linewidth"]))
            ax.text(lx + 0.55, y, text, va="center", fontsize=FONT_SIZE - 1)
        fig.savefig(os.fspath(path), format=fmt, dpi=dpi, facecolor="white")


def _legend(lay: Layout) -> list:
    """The legend rows for what the picture shows."""
    present = {"linear" if node.linear else node.kind for node in lay.nodes.values()}
    rows = [(kind, text) for kind, text in LEGEND if kind in present]
    if lay.edges_of_kind("cross"):
        rows.append(("cross", "reference to a value of another drawn graph (External)"))
    return rows


def _boxstyle(shape: str, height: float) -> str:
    if shape == "pill":
        return f"round,pad=0,rounding_size={height / 2:.3f}"
    return "round,pad=0,rounding_size=0.06"


def _node_patch(ax, patches, node: LayoutNode) -> None:
    style = node.style
    ax.add_patch(patches.FancyBboxPatch(
        (node.x - node.width / 2, node.y - node.height / 2), node.width, node.height,
        boxstyle=_boxstyle(style["shape"], node.height), facecolor=style["facecolor"],
        edgecolor=style["edgecolor"], linestyle=style["linestyle"],
        linewidth=style["linewidth"], zorder=3))
    ax.text(node.x, node.y, node.label, ha="center", va="center", zorder=4,
            fontsize=FONT_SIZE, linespacing=1.2,
            fontweight="bold" if node.kind in ("operation", "output") else "normal")


def _dot_source(lay: Layout, title: str | None) -> str:
    def quote(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    def ident(node_id):
        return quote("n" + "_".join(map(str, node_id[:2])) + "_" + str(node_id[2]))

    lines = ["digraph tidu {", '  rankdir=TB; node [fontname="monospace", fontsize=10];',
             "  newrank=true; compound=true;"]
    if title:
        lines.append(f"  labelloc=t; label={quote(title)}; fontsize=14;")
    shapes = {"box": "box", "pill": "box"}
    for cluster in lay.clusters:
        lines.append(f"  subgraph cluster_{cluster.graph} {{ label={quote(cluster.title)}; "
                     'style="rounded,filled"; fillcolor="#f7f7f9"; color="#c8c8d0";')
        for node_id, node in lay.nodes.items():
            if node.graph != cluster.graph:
                continue
            style = node.style
            styles = ["filled", "rounded"]
            if style["linestyle"] != "solid":
                styles.append(style["linestyle"])
            lines.append(f"    {ident(node_id)} [label={quote(node.label)}, "
                         f"shape={shapes[style['shape']]}, style={quote(','.join(styles))}, "
                         f"fillcolor={quote(style['facecolor'])}, "
                         f"color={quote(style['edgecolor'])}, penwidth={style['linewidth']}];")
        lines.append("  }")
    # The legend lists what this picture shows, stacked in a column after the graphs.
    shown = [(kind, text) for kind, text in _legend(lay) if kind in STYLES]
    lines.append('  subgraph cluster_legend { label="legend"; style=rounded;')
    for kind, text in shown:
        style = STYLES[kind]
        styles = ["filled", "rounded"] + ([style["linestyle"]]
                                          if style["linestyle"] != "solid" else [])
        lines.append(f"    legend_{kind} [label={quote(text)}, shape=box, "
                     f"style={quote(','.join(styles))}, fillcolor={quote(style['facecolor'])}, "
                     f"color={quote(style['edgecolor'])}];")
    if lay.edges_of_kind("cross"):
        lines.append('    legend_cross [label="purple dashed arrow: reference to a value of '
                     'another drawn graph (External)", shape=plaintext];')
        shown.append(("cross", ""))
    for (upper, _), (lower, _) in zip(shown, shown[1:]):
        lines.append(f"    legend_{upper} -> legend_{lower} [style=invis];")
    lines.append("  }")
    for edge in lay.edges:
        attrs = [f"color={quote(EDGE_COLORS[edge.kind])}"]
        if edge.kind != "local":
            attrs.append("style=dashed")
        if edge.slot is not None:
            attrs.append(f"taillabel={quote(':' + str(edge.slot))}")
        lines.append(f"  {ident(edge.source)} -> {ident(edge.target)} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines)


def _draw_graphviz(lay: Layout, path, fmt: str, title: str | None) -> None:
    dot = shutil.which("dot")
    if dot is None:
        raise TiduError("engine='graphviz' needs Graphviz's dot program on the PATH")
    with tempfile.NamedTemporaryFile("w", suffix=".dot", delete=False) as handle:
        handle.write(_dot_source(lay, title))
        source = handle.name
    try:
        result = subprocess.run([dot, f"-T{fmt}", "-o", os.fspath(path), source],
                                capture_output=True, text=True, timeout=300,
                                check=False)
    finally:
        os.unlink(source)
    if result.returncode != 0:
        raise TiduError(f"dot failed ({result.returncode}): {result.stderr.strip()}")


def draw(graphs, path, *, title: str | None = None, names: Sequence[str] | None = None,
         engine: str = "auto", max_nodes: int | None = DEFAULT_MAX_NODES):
    """Draw ``graphs`` (one graph, a ``LinearizedGraph``, or several merged) to ``path``.

    The format follows the extension: ``.svg`` or ``.png``. ``names`` titles the
    column of each graph. ``engine`` is ``"matplotlib"`` (pure Python),
    ``"graphviz"`` (needs ``dot``) or ``"auto"`` (Graphviz if ``dot`` is on the
    ``PATH``, else matplotlib). Returns the :class:`Layout` drawn.
    """
    fmt = _format(path)
    if engine not in ("auto", "matplotlib", "graphviz"):
        raise TiduError(f"unknown engine {engine!r}: use 'auto', 'matplotlib' or 'graphviz'")
    lay = layout(graphs, names=names, max_nodes=max_nodes)
    if engine == "graphviz" or (engine == "auto" and graphviz_available()):
        _draw_graphviz(lay, path, fmt, title)
    else:
        _draw_matplotlib(lay, path, fmt, title)
    return lay


def draw_primal_linear_transposed(graph: Graph, outputs: Sequence, wrt: Sequence[Hashable],
                                  prefix, *, formats: Sequence[str] = ("svg", "png"),
                                  engine: str = "auto") -> list[str]:
    """Linearize and transpose ``graph``; draw primal, linear, transposed and all merged.

    ``outputs`` are value keys of ``graph``, ``wrt`` input keys. Writes
    ``{prefix}primal.svg``, ``{prefix}linearized.svg``, ``{prefix}transposed.svg``
    and ``{prefix}merged.svg`` (and the same for every format in ``formats``);
    returns the file names written.
    """
    from tidu.linearization import linearize
    from tidu.transpose import linear_transpose

    linear = linearize(graph, outputs, wrt)
    transposed = linear_transpose(linear)
    pictures = [
        ("primal", [graph], ["primal"], "primal graph"),
        ("linearized", [linear.graph], ["linearized (JVP)"], "linearized graph (JVP)"),
        ("transposed", [transposed.graph], ["transposed (VJP)"], "transposed graph (VJP)"),
        ("merged", [graph, linear.graph, transposed.graph],
         ["primal", "linearized (JVP)", "transposed (VJP)"],
         "primal, linearized and transposed graphs"),
    ]
    written = []
    prefix = os.fspath(prefix)
    for fmt in formats:
        for suffix, graphs, names, title in pictures:
            path = f"{prefix}{suffix}.{fmt}"
            draw(graphs, path, title=title, names=names, engine=engine)
            written.append(path)
    return written
