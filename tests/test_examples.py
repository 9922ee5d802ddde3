"""Every script in ``examples/`` runs as a subprocess and exits 0.

Scripts that import a package that is not installed (an optional extra) are
skipped. Some scripts also have lines their output must contain.
"""

from __future__ import annotations

import ast
import re
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
    "eager_reverse_mode.py": [
        "x = 3.0, y = x * x = 9.0, dy/dx = 6.0",
        "backward twice: same gradient",
    ],
    "seed_executor.py": ["run_transposed_linear calls: 1, execute_forward calls: 0",
                         "run_transposed_linear calls: 9, execute_forward calls: 3",
                         "same gradients as ScalarExecutor and as by hand"],
    "gradient_two_inputs.py": ["df/dx = -1.252947193096", "df/dy = -0.256311071824"],
    "newton_step.py": ["hvp vs finite differences of gradients", "Newton-CG loss",
                       "Newton-CG: loss"],
    "distributed_least_squares.py": ["cluster: 2 workers", "value_and_grad returned Arrays: "
                                     "one Dask graph of", "step  1: loss", "step  3: loss",
                                     "relative error of the fitted weights",
                                     "peak memory of a worker"],
    "train_mlp.py": ["first gradient vs finite differences: worst relative error",
                     "epoch   1: train loss", "final test accuracy"],
}
# script name -> command-line arguments (keep the suite fast)
ARGS = {"train_mlp.py": ["--epochs", "1", "--subset", "300"],
        "per_example_gradients.py": ["--steps", "10", "--batch", "16"],
        # a small dataset (the default one is 1.3 GB: 3.2x a worker's memory limit)
        "distributed_least_squares.py": ["--rows", "200000", "--features", "8",
                                         "--chunk-rows", "25000", "--steps", "3"]}


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
def test_example_runs(script, tmp_path):
    missing = missing_imports(script)
    if missing:
        pytest.skip(f"{script.name} needs {', '.join(missing)}, not installed")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    # run in a scratch directory: examples that write files (show_graphs.py) write there
    result = subprocess.run([sys.executable, str(script), *ARGS.get(script.name, [])],
                            cwd=tmp_path, env=env,
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


def load_train_mlp():
    script = ROOT / "examples" / "train_mlp.py"
    if missing_imports(script):
        pytest.skip("train_mlp.py needs the examples extra")
    spec = importlib.util.spec_from_file_location("train_mlp", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_train_mlp_reaches_95_percent_on_digits():
    assert load_train_mlp().main(["--epochs", "30"]) > 0.95


def test_train_mlp_with_jit_learns_exactly_as_eager(capsys):
    """--jit runs the same arithmetic through one compiled program per step."""
    module = load_train_mlp()
    eager = module.main(["--epochs", "2", "--subset", "400"])
    eager_out = capsys.readouterr().out
    jitted = module.main(["--epochs", "2", "--subset", "400", "--jit"])
    jit_out = capsys.readouterr().out
    assert eager == jitted
    loss_lines = lambda out: [line for line in out.splitlines() if "train loss" in line]  # noqa
    assert loss_lines(eager_out) == loss_lines(jit_out) and loss_lines(jit_out)


def run_show_graphs(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    script = ROOT / "examples" / "show_graphs.py"
    if missing_imports(script):
        pytest.skip("show_graphs.py needs the viz extra (matplotlib)")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_show_graphs_cli(tmp_path):
    """--help works; the default folder is build/graphs (git-ignored); --format picks formats."""
    shown = run_show_graphs(["--help"], tmp_path)
    assert shown.returncode == 0 and "build/graphs" in shown.stdout and "--format" in shown.stdout
    assert not list(tmp_path.iterdir()), "--help wrote files"

    default = run_show_graphs(["--format", "svg", "--engine", "matplotlib"], tmp_path)
    assert default.returncode == 0, default.stderr
    written = sorted(p.name for p in (tmp_path / "build" / "graphs").iterdir())
    assert written == ["f_linearized.svg", "f_merged.svg", "f_primal.svg", "f_transposed.svg"]
    assert "build/graphs/f_merged.svg" in default.stdout.replace(os.sep, "/")
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "build/" in ignored or "/build/" in ignored, "the default output folder is not ignored"

    wrong = run_show_graphs(["--format", "jpg"], tmp_path)
    assert wrong.returncode == 2 and "invalid choice: 'jpg'" in wrong.stderr


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_help_describes_every_option(script):
    """``--help`` prints the example's purpose, and every option has a description (with its
    default where it has one); README lists the example."""
    result = subprocess.run([sys.executable, str(script), "--help"], capture_output=True,
                            text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:") and len(result.stdout.splitlines()) >= 3
    lines = result.stdout.split("options:", 1)[-1].splitlines()
    for n, line in enumerate(lines):
        if not line.startswith("  -") or line.strip().startswith("-h"):
            continue
        described = len(re.split(r"\s{2,}", line.strip(), maxsplit=1)) == 2 or (
            n + 1 < len(lines) and lines[n + 1].startswith("    ")
            and not lines[n + 1].strip().startswith("-"))
        assert described, f"{script.name}: option {line.split()[0]} has no description"
    assert f"examples/{script.name}" in (ROOT / "README.md").read_text(encoding="utf-8")
