"""Every script in ``examples/`` runs as a subprocess and exits 0.

Scripts that import a package that is not installed (an optional extra) are
skipped. Some scripts also have lines their output must contain.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

# script name -> substrings that must appear in its output, in order
EXPECTED_OUTPUT = {
    "primitive_linearization.py": [
        "primal graph: f(x, y) = x*y + sin(x)",
        "  c = MUL a b",
        "linear graph (JVP): (dx, dy) -> df",
        "MUL[Linearized(T.)]",
        "ADD[Linearized(TT)]",
        "transposed graph (VJP): ct -> (ct * df/dx, ct * df/dy)",
        "Cotangent(0",
        "VJP df/dx (ct = 1)         =  2.877582561890    by hand y + cos(x)",
        "VJP df/dy (ct = 1)         =  0.500000000000",
        "all derivatives match the hand-derived ones",
    ],
}


def missing_imports(script: Path) -> list[str]:
    """Top-level modules the script imports that cannot be found here."""
    tree = ast.parse(script.read_text(), filename=str(script))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return sorted(name for name in names if importlib.util.find_spec(name) is None)


def test_examples_exist():
    assert any(p.name == "primitive_linearization.py" for p in EXAMPLES)


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script):
    missing = missing_imports(script)
    if missing:
        pytest.skip(f"{script.name} needs {', '.join(missing)}, not installed")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (
        f"{script.name} exited {result.returncode}\n--- stdout\n{result.stdout}\n"
        f"--- stderr\n{result.stderr}")
    assert result.stdout.strip(), f"{script.name} printed nothing"
    position = 0
    for expected in EXPECTED_OUTPUT.get(script.name, []):
        found = result.stdout.find(expected, position)
        assert found >= 0, f"{script.name}: {expected!r} missing (in order) from\n{result.stdout}"
        position = found + len(expected)
