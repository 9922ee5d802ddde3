"""``python -m benchmarks.table``: the table of docs/performance.md from a run's JSON.

One ``python -m benchmarks --quick --json`` run (the session's, which
``test_benchmarks.py`` reads too: ``quick_benchmark_run`` in ``conftest.py``), then the
table from it: every row there, each figure the JSON's in the doc's format, ``--check``
passing on the table it printed and failing, with the row named, on a changed figure;
skipped peers and workloads as the JSON says.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import table
from benchmark_helpers import ROOT, benchmark_env

# one worker runs both modules that read the shared quick run (conftest.py), so it runs once
pytestmark = pytest.mark.xdist_group("quick_benchmark_run")


@pytest.fixture(scope="module")
def run(quick_benchmark_run) -> tuple[Path, dict]:
    """The JSON of the quick run ``test_benchmarks.py`` reads too: its path and content."""
    path, result, _ = quick_benchmark_run
    return path, result


def _table(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks.table", *map(str, args)],
                          cwd=ROOT, env=benchmark_env(), capture_output=True, text=True,
                          timeout=60)


def _printed_rows(stdout: str) -> list[list[str]]:
    return table.doc_table_rows("## Latest table\n" + stdout)


def _rows_of(result: dict, workload: str) -> list[dict]:
    return [row for row in result["rows"] if row["workload"] == workload]


def test_every_row_with_the_json_figures(run):
    path, result = run
    done = _table(path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""                   # every workload of the run is known
    lines = done.stdout.splitlines()
    assert "| workload | size | tidu | peer | ratio |" in lines
    rows = _printed_rows(done.stdout)
    by_label = {}
    for row in rows:
        by_label.setdefault(row[0], []).append(row)

    expected_count = 0
    for row in _rows_of(result, "transform"):
        expected_count += 1
        tidu = row["tidu_us_per_op"]
        label = f"transform: {row['case']}"
        [printed] = [r for r in by_label[label] if r[1] == f"{row['n_ops']:,} ops"]
        assert printed[2] == f"{tidu:.2f} µs/op"
        if "jax" in row["peers"]:
            jax = row["peers"]["jax"]
            assert printed[3] == f"jax {jax:.0f} µs/op"
            assert printed[4] == f"{tidu / jax:.3f} (1/{jax / tidu:.1f})"
        else:
            assert printed[3:] == ["—", ""]

    for row in _rows_of(result, "eager scalar"):
        expected_count += 1
        label = (f"eager scalar, {row['case']} (record {row['record_us_per_op']:.2f} + "
                 f"backward {row['backward_us_per_op']:.2f})")
        [printed] = by_label[label]
        tidu = row["tidu_us_per_op"]
        assert printed[1:3] == [f"{row['n_ops']:,} ops", f"{tidu:.2f} µs/op"]
        peers = row["peers"]
        assert printed[3] == " / ".join(
            f"{name.replace(' (floor)', '')} {ms:.2f}" for name, ms in peers.items())
        assert printed[4] == " / ".join(f"{tidu / ms:.2f}" for ms in peers.values())

    [floor] = _rows_of(result, "mlp floor")
    floor_ms = floor["floor_ms"]
    assert by_label[f"MLP floor: {floor['case']}"] == [
        [f"MLP floor: {floor['case']}", "", f"{floor_ms:.2f} ms", "", "1.00"]]
    for name, step in floor["steps"].items():
        assert by_label[f"MLP step, {name}"] == [
            [f"MLP step, {name}", "", f"{step['ms']:.2f} ms", f"floor {floor_ms:.2f}",
             f"{step['over_floor']:.3f}"]]
    for name, inside in floor["products_inside"].items():
        ratio = f"{inside['over_floor']:.2f}" if "over_floor" in inside else ""
        assert by_label[f"time inside np.matmul, {name}"] == [
            [f"time inside np.matmul, {name}", f"{inside['calls']:.0f} calls",
             f"{inside['ms']:.2f} ms", "", ratio]]
    expected_count += 1 + len(floor["steps"]) + len(floor["products_inside"])

    [mlp] = _rows_of(result, "mlp")
    label = (f"MLP eager `Tensor` step (forward {mlp['tidu_forward_ms']:.2f} ms; "
             f"backward/forward {mlp['backward_over_forward']:.2f})")
    assert by_label[label][0][2:4] == [f"{mlp['tidu_ms']:.2f} ms", " / ".join(
        f"{name} {ms:.2f}" for name, ms in mlp["peers"].items())]
    for row in _rows_of(result, "mlp jit"):
        [printed] = by_label[f"MLP {row['case']}"]
        assert printed[2] == f"{row['tidu_ms']:.2f} ms"
        assert printed[4] == " / ".join(f"{row['tidu_ms'] / ms:.2f}"
                                        for ms in row["peers"].values())
    expected_count += 1 + len(_rows_of(result, "mlp jit"))

    for row in _rows_of(result, "scaling"):
        small, large = row["sizes"][str(row["small_n"])], row["sizes"][str(row["large_n"])]
        [printed] = by_label[f"scaling: {row['case']}"]
        assert printed[1:] == [f"{row['small_n']:,} / {row['large_n']:,} ops",
                               f"{small['us_per_op']:.2f} / {large['us_per_op']:.2f} µs/op",
                               "", f"growth {row['growth']:.2f}"]
        for n, size in row["sizes"].items():        # one sub-row a size: its parts, its RSS
            parts = ", ".join(f"{key.removesuffix('_us_per_op')} {value:.2f}"
                              for key, value in size.items()
                              if key.endswith("_us_per_op") and key != "us_per_op")
            assert f"…at {int(n):,} ops: {parts}; peak RSS {size['peak_rss_mb']:,.0f} MB" \
                in by_label
        expected_count += 1 + len(row["sizes"])

    [graphs] = _rows_of(result, "graph memory")
    [printed] = [r for r in rows if r[0].startswith("graph memory: ")]
    assert f"{graphs['n_ops']:,} ops (primal {graphs['primal_bytes_per_op']:.0f} + " in printed[0]
    assert printed[2] == (f"{graphs['retained_bytes_per_op'] / 1024:.2f} KB/op kept (peak "
                          f"{graphs['peak_bytes_per_op'] / 1024:.2f})")
    assert printed[4] == f"{graphs['retained_bytes_per_op'] / 1024:.2f}"   # target: 1 KB/op
    [memory] = _rows_of(result, "memory")
    [printed] = by_label[f"memory: backward peak / forward held, {memory['case']}"]
    assert printed[1:] == [f"{memory['n_ops']:,} ops", f"{memory['backward_peak_mb']:.0f} / "
                           f"{memory['forward_mb']:.0f} MB", "",
                           f"{memory['backward_over_forward']:.2f}"]
    expected_count += 2

    [hvp] = _rows_of(result, "hvp")
    [printed] = by_label["HVP of the MLP loss: try_hvp / create_graph / tnp.hvp"]
    assert printed[2] == (f"{hvp['tidu try_hvp ms']:.2f} / {hvp['tidu create_graph ms']:.2f}"
                          f" / {hvp['tidu tnp.hvp ms']:.2f} ms")
    [vmap] = _rows_of(result, "vmap")
    [printed] = [r for r in rows if r[0].startswith(f"{vmap['case']}: vmap(grad)")]
    assert f"one batched grad {vmap['tidu batched grad ms']:.2f} ms" in printed[0]
    assert printed[2] == f"{vmap['tidu_ms']:.2f} ms"
    expected_count += 2

    for row in _rows_of(result, "small grad"):
        name = {"grad": "grad", "hessian": "hessian", "jacobian": "jacrev"}[row["transform"]]
        [printed] = by_label[f"`tnp.{name}` without jit: {row['case']}"]
        assert printed[2] == f"{row['tidu_ms']:.2f} ms"
        assert printed[3].startswith(f"autograd {row['peers']['autograd']:.2f}")
        expected_count += 1

    [torch_row] = _rows_of(result, "torch arrays")
    [printed] = by_label["MLP step on torch tensors: jit / eager Tensor / value_and_grad"]
    if "tidu_ms" in torch_row:
        assert printed[2].startswith(f"{torch_row['tidu jit(value_and_grad) ms']:.2f} / ")
    else:
        assert printed[2:4] == [torch_row["note"], "—"]
    [dask] = _rows_of(result, "dask")
    [printed] = [r for r in rows if r[0].startswith(f"Dask {dask['case']}: 2 workers vs 1")]
    if "speedup" in dask:
        assert printed[2:] == [f"{dask['two_workers_s']:.2f} s",
                               f"1 worker {dask['one_worker_s']:.2f} s",
                               f"speed-up {dask['speedup']:.2f}"]
    expected_count += 2

    assert not _rows_of(result, "numpy A/B")          # a --quick run has no A/B: no row
    assert not [r for r in rows if r[0].startswith("this tree /")]
    assert len(rows) == expected_count                 # nothing more, nothing invented

    machine = lines[0]
    assert machine.startswith(f"One run of `python -m benchmarks --quick` "
                              f"({result['machine']['date']}, commit ")
    assert f"Python {result['machine']['python']}, NumPy {result['machine']['numpy']}" in machine
    assert f"{os.cpu_count()} cores (" in machine
    assert "**one compute thread for every library**" in machine
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True)
    if commit.returncode == 0:
        assert f"commit `{commit.stdout.strip()}`" in machine


NUMBER = r"-?\d[\d,.]*"   # signed: a quick run on a busy box may time a difference below 0


def test_the_rows_are_the_docs_rows_figures_aside(run):
    """Each printed row is worded as a row of docs/performance.md's table: the same text
    and layout once every figure is masked. The doc's run had every peer; a run without
    some (CI installs none) prints fewer peers in a row, so then its workload and size
    cells are compared."""
    path, result = run
    printed = [line for line in _table(path).stdout.splitlines()[2:] if line.startswith("|")]
    doc = (ROOT / "docs" / "performance.md").read_text()
    section = doc.split("## Latest table", 1)[1].split("\n## ", 1)[0]
    doc_lines = {re.sub(NUMBER, "#", line) for line in section.splitlines()
                 if line.startswith("|")}
    doc_heads = {tuple(line.split("|")[1:3]) for line in doc_lines}
    every_peer = all(result["machine"].get(name) for name in ("torch", "jax", "autograd", "dask"))
    assert printed
    for line in printed:
        masked = re.sub(NUMBER, "#", line)
        if every_peer:
            assert masked in doc_lines, line
        else:
            assert tuple(masked.split("|")[1:3]) in doc_heads, line


def test_check_passes_on_its_own_table_and_names_a_changed_figure(run, tmp_path):
    path, result = run
    printed = _table(path).stdout
    table_lines = [line for line in printed.splitlines() if line.startswith("|")]
    doc = tmp_path / "performance.md"
    prose = "# Performance\n\n## Latest table\n\nOne run.\n\n{}\n\n## After\n\n| a | b |\n"
    doc.write_text(prose.format("\n".join(table_lines)))
    done = _table(path, "--check", doc)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "agrees" in done.stdout

    # one figure changed: the HVP row's create_graph time
    [hvp] = _rows_of(result, "hvp")
    old = f"{hvp['tidu create_graph ms']:.2f}"
    new = f"{hvp['tidu create_graph ms'] + 1.0:.2f}"
    changed = [line.replace(f" / {old} / ", f" / {new} / ") if line.startswith("| HVP")
               else line for line in table_lines]
    assert changed != table_lines
    doc.write_text(prose.format("\n".join(changed)))
    done = _table(path, "--check", doc)
    assert done.returncode == 1
    [report] = [line for line in done.stdout.splitlines() if "HVP" in line]
    assert "tidu: doc" in report and new in report and old in report
    assert len(done.stdout.splitlines()) == 2          # the heading and that one row

    # a row missing from the doc, and no table at all
    doc.write_text(prose.format("\n".join(line for line in table_lines
                                          if not line.startswith("| memory:"))))
    done = _table(path, "--check", doc)
    assert done.returncode == 1 and "only in the JSON: | memory:" in done.stdout
    doc.write_text("# Performance\n")
    assert _table(path, "--check", doc).returncode == 1


def test_skipped_peers_and_workloads_come_out_as_the_json_says(run):
    _, result = run
    skipped = copy.deepcopy(result)
    for row in skipped["rows"]:
        if row["workload"] == "transform":
            row["peers"] = {}
        if row["workload"] == "hvp":
            row["peers"] = {}
            row["note"] = "torch is not installed: skipped (pip install '.[bench]')"
        if row["workload"] == "torch arrays":
            for key in [key for key in row if key.endswith(" ms") or key == "tidu_ms"]:
                del row[key]
            row["peers"] = {}
            row["note"] = "torch is not installed: skipped (pip install '.[torch]')"
        if row["workload"] == "dask":
            row.clear()
            row.update({"workload": "dask", "case": "least-squares step, 40,000 x 8",
                        "peers": {}, "note": "dask.distributed is not installed: skipped"})
    rows = table.table_rows(skipped)
    for row in rows:
        if row[0].startswith(("transform: ", "HVP ")):
            assert row[3:] == ["—", ""], row
    [torch_row] = [row for row in rows if row[0].startswith("MLP step on torch tensors")]
    assert torch_row[2:] == ["torch is not installed: skipped (pip install '.[torch]')",
                             "—", ""]
    [dask] = [row for row in rows if row[0].startswith("Dask ")]
    assert dask[2] == "dask.distributed is not installed: skipped"
    assert len(rows) == len(table.table_rows(result))


def test_the_numpy_ab_row_of_a_full_run():
    """The A/B row only a full run has, worded as the doc's."""
    pair = {"new": 8.21, "old": 14.72, "new_over_old": 8.21 / 14.72}
    row = {"workload": "numpy A/B", "case": "this tree / 0a6b4a4 (before array backends)",
           "peers": {}, "eager 0-d chain, us/op": pair,
           "grad, 150 ops on 16 floats, ms": {"new": 1.81, "old": 8.1, "new_over_old": 0.2235}}
    [printed] = table.table_rows({"rows": [row]})
    assert table.render(printed) == (
        "| this tree / `0a6b4a4` (before the array backends), fresh processes: eager 0-d "
        "chain / `grad` of 150 ops on 16 floats | | 8.21 / 1.81 | 14.72 / 8.10 | 0.56 / 0.22 |")
