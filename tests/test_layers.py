"""Layers only look down, through public names: tidu.graph <- tidu <- tidu.eager <- primitives.

A module may import another package's internals only from inside that package;
from outside it uses the names the package exports (its ``__init__``), or a public
module named here.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Packages whose submodules are private to them, and the public modules beside them.
PACKAGES = ("tidu.graph", "tidu.rules", "tidu.eager", "tidu.compile")
PUBLIC_MODULES = {"tidu", "tidu.errors", "tidu.testing", "tidu.viz", "tidu.example_ops",
                  "tidu.graph", "tidu.rules", "tidu.eager", "tidu.compile"}
# The transforms' own modules: private to the rules-and-transforms layer (tidu's top-level
# modules, tidu.rules, tidu.compile); the layers above import them from ``tidu``.
TRANSFORM_MODULES = {"tidu.linearization", "tidu.linearized", "tidu.transpose", "tidu.batching"}
TRANSFORM_LAYER = ("tidu.rules", "tidu.compile")
# The A/B benchmark turns each speed device off at its seam, which is internal by nature.
SEAM_SWITCHES = {"benchmarks.devices"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def sources():
    for folder in ("tidu", "primitives", "examples", "benchmarks"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def owning_package(module: str) -> str | None:
    return next((p for p in PACKAGES if module == p or module.startswith(p + ".")), None)


@pytest.mark.parametrize("path", list(sources()), ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_use_only_public_names_of_other_packages(path):
    importer = module_name(path)
    if importer in SEAM_SWITCHES:
        pytest.skip(f"{importer} switches internal seams off on purpose (A/B)")
    wrong = []
    for line, module in imports_of(path):
        if not module.startswith("tidu.") or module in PUBLIC_MODULES:
            continue
        if module == "tidu._gc":                     # a utility of every tidu layer
            inside = importer.startswith("tidu.")
        elif module in TRANSFORM_MODULES:
            inside = importer.count(".") == 1 and importer.startswith("tidu.") or \
                importer.startswith(TRANSFORM_LAYER)
        else:
            package = owning_package(module)
            inside = package is not None and (importer == package or
                                              importer.startswith(package + "."))
        if not inside:
            wrong.append(f"line {line}: {module}")
    assert not wrong, f"{importer} imports private tidu modules: {wrong}"


def test_tidu_graph_imports_without_the_ad_layer():
    code = ("import sys, tidu.graph; loaded = [m for m in ('tidu.rules', 'tidu.eager', "
            "'tidu.compile', 'tidu.linearization', 'tidu.transpose') if m in sys.modules]; "
            "print(loaded)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_tidu_docstrings_use_no_downstream_primitive_set():
    for path in sorted((ROOT / "tidu").rglob("*.py")):
        text = path.read_text()
        assert ">>> from primitives" not in text and ">>> import primitives" not in text, path


def test_the_lazy_top_level_still_offers_every_name():
    import tidu

    for name in tidu.__all__:
        assert getattr(tidu, name) is not None, name
    assert callable(tidu.linearize) and callable(tidu.optimize)
    with pytest.raises(AttributeError, match="no_such_name"):
        tidu.no_such_name


# --- the whole tree: no import circle, no import that runs upward ---------------------------

# Rooms from the bottom up; a module may import its own room and the rooms below it. A module
# belongs to the room of the longest prefix naming it.
ROOMS = [
    ["tidu.errors", "tidu._gc"],
    ["tidu.graph"],
    ["tidu"],                                    # rules and transforms
    ["tidu.eager"],
    ["tidu.example_ops", "tidu.testing", "tidu.viz"],
    ["primitives", "primitives.exact"],
    ["primitives.scalar"],
    ["primitives.tensor.errors", "primitives.tensor.backends", "primitives.tensor.buffers",
     "primitives.tensor.memory", "primitives.tensor.core"],
    ["primitives.tensor.ops"],
    ["primitives.tensor.numpy"],
    ["primitives.tensor.transforms"],
    ["primitives.tensor.eager"],
    ["primitives.tensor.autograd", "primitives.tensor.nn", "primitives.tensor.optim",
     "primitives.tensor.random", "primitives.tensor.ode", "primitives.tensor.fixedpoint",
     "primitives.tensor.builtins", "primitives.tensor.misc", "primitives.tensor.scipy",
     "primitives.tensor.lax", "primitives.tensor.tree_util", "primitives.tensor.tree"],
    ["primitives.tensor"],                       # the package's face
    ["examples", "benchmarks"],
]


def room_of(module: str) -> int:
    matches = [(len(prefix), rank) for rank, room in enumerate(ROOMS) for prefix in room
               if module == prefix or module.startswith(prefix + ".")]
    assert matches, f"{module} is in no room of ROOMS: add it"
    return max(matches)[1]


def import_graph(paths: dict | None = None):
    """Every import among ``paths`` (module name -> file; default: the tree), function-level
    ones included, as module -> module edges.

    Importing ``a.b.c`` runs the packages ``a`` and ``a.b`` too, unless the importer is
    inside them (then they are already running)."""
    import networkx as nx

    if paths is None:
        paths = {module_name(path): path for path in sources()}
    graph = nx.DiGraph()

    def known(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    for importer, path in paths.items():
        graph.add_node(importer)
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = importer.split(".")[:None if is_package else -1]
                    parts = parts[:len(parts) - node.level + 1]
                    base = ".".join(parts + [base] if base else parts)
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base
                         for alias in node.names]
            else:
                continue
            for name in names:
                target = known(name)
                if target is None or target == importer:
                    continue
                graph.add_edge(importer, target)
                parts = target.split(".")
                for i in range(1, len(parts)):
                    package = ".".join(parts[:i])
                    if package in paths and not importer.startswith(package + "."):
                        graph.add_edge(importer, package)
    return graph


def test_the_tree_has_no_import_circle():
    import networkx as nx

    circles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert not circles, f"modules importing each other (function-level imports count): {circles}"


def test_no_import_runs_upward():
    upward = [f"{a} -> {b}" for a, b in import_graph().edges if room_of(b) > room_of(a)]
    assert not upward, f"imports into a higher room (see ROOMS): {sorted(upward)}"


def test_the_import_graph_sees_function_level_and_relative_imports(tmp_path):
    """The checker itself finds imports hidden in functions, relative ones and packages."""
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    files = {
        "pkg": "",
        "pkg.low": "def f():\n    from pkg.sub import high\n",
        "pkg.sub": "",
        "pkg.sub.high": "from ..low import f\nfrom . import other\n",
        "pkg.sub.other": "import pkg.low\n",
    }
    paths = {}
    for name, text in files.items():
        parts = name.split(".")
        is_package = name in ("pkg", "pkg.sub")
        path = tmp_path.joinpath(*parts, "__init__.py") if is_package else \
            tmp_path.joinpath(*parts[:-1], parts[-1] + ".py")
        path.write_text(text)
        paths[name] = path
    graph = import_graph(paths)
    assert graph.has_edge("pkg.low", "pkg.sub.high")          # inside a function
    assert graph.has_edge("pkg.low", "pkg.sub")               # running the package
    assert graph.has_edge("pkg.sub.high", "pkg.low")          # relative, two levels
    assert graph.has_edge("pkg.sub.high", "pkg.sub.other")    # relative submodule
    assert not graph.has_edge("pkg.sub.other", "pkg")         # its own package runs already
    assert room_of("primitives.tensor.ops.base") < room_of("primitives.tensor.numpy.lowering")
