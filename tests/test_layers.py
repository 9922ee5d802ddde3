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
