"""``python -m benchmarks.table bench.json``: the table of docs/performance.md from a run's JSON.

``python -m benchmarks --json bench.json`` writes the run; this prints the markdown table of
the section "## Latest table" (its rows, wording and number formats) and the machine line of
the paragraph above it. ``--check docs/performance.md`` prints nothing but the rows where the
doc's table and the JSON's differ, and exits 1 if any do (0 if they agree), so the doc and the
run it names can be checked against each other.

Every figure comes from the JSON: a peer the run skipped (not installed) shows as ``—``, a
workload the run skipped shows its note, and a workload the run did not have (the NumPy A/B
of a ``--quick`` run) has no row. The device rows of ``python -m benchmarks`` have their own
section in docs/performance.md and no row here.

    python -m benchmarks.table bench.json
    python -m benchmarks.table bench.json --check docs/performance.md
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections.abc import Callable

HEADER = ("workload", "size", "tidu", "peer", "ratio")
SECTION = "## Latest table"
NOT_IN_TABLE = {"device"}          # docs/performance.md's "Speed devices, A/B" section

# A row is five cells. ``None``: the column means nothing for this kind of row (written
# ``| |``); ``""``: a value this row lacks, e.g. the ratio to a peer that did not run
# (written ``|  |``). The doc writes them so; ``--check`` compares the stripped text.
Row = list[str | None]


def render(cells: Row) -> str:
    """One markdown table line.

    >>> render(["memory", "999 ops", "671 / 668 MB", None, "1.00"])
    '| memory | 999 ops | 671 / 668 MB | | 1.00 |'
    >>> render(["transform: random DAG", "1,000 ops", "7.81 µs/op", "—", ""])
    '| transform: random DAG | 1,000 ops | 7.81 µs/op | — |  |'
    """
    return "|" + "|".join(" " if cell is None else f" {cell} " for cell in cells) + "|"


def _peers(tidu: list[float], peers: dict, fmt: str = ".2f", unit: str = "",
           names: dict | None = None) -> tuple[str, str]:
    """The peer cell and the ratio cell: each peer's figure, and each tidu figure / each
    peer's; ``("—", "")`` when the run had no peer."""
    if not peers:
        return "—", ""
    names = names or {}
    peer_cell = " / ".join(f"{names.get(name, name)} {value:{fmt}}{unit}"
                           for name, value in peers.items())
    ratios = [t / value for value in peers.values() for t in tidu]
    return peer_cell, " / ".join(f"{r:.2f}" for r in ratios)


def _transform(row: dict) -> list[Row]:
    tidu = row["tidu_us_per_op"]
    peer, _ = _peers([tidu], row["peers"], ".0f", " µs/op")
    ratio = ""
    if row["peers"]:
        [r] = [tidu / value for value in row["peers"].values()]
        ratio = f"{r:.3f} (1/{1 / r:.1f})" if r < 1 else f"{r:.2f}"
    return [[f"transform: {row['case']}", f"{row['n_ops']:,} ops", f"{tidu:.2f} µs/op", peer,
             ratio]]


def _eager(row: dict) -> list[Row]:
    tidu = row["tidu_us_per_op"]
    label = (f"eager scalar, {row['case']} (record {row['record_us_per_op']:.2f} + backward "
             f"{row['backward_us_per_op']:.2f})")
    names = {"python tape (floor)": "python tape"}
    return [[label, f"{row['n_ops']:,} ops", f"{tidu:.2f} µs/op",
             *_peers([tidu], row["peers"], names=names)]]


def _mlp_floor(row: dict) -> list[Row]:
    floor = row["floor_ms"]
    rows = [[f"MLP floor: {row['case']}", None, f"{floor:.2f} ms", None, "1.00"]]
    for name, step in row["steps"].items():
        rows.append([f"MLP step, {name}", None, f"{step['ms']:.2f} ms", f"floor {floor:.2f}",
                     f"{step['over_floor']:.3f}"])
    for name, inside in row["products_inside"].items():
        ratio = f"{inside['over_floor']:.2f}" if "over_floor" in inside else ""
        rows.append([f"time inside np.matmul, {name}", f"{inside['calls']:.0f} calls",
                     f"{inside['ms']:.2f} ms", None, ratio])
    return rows


def _mlp(row: dict) -> list[Row]:
    label = (f"MLP eager `Tensor` step (forward {row['tidu_forward_ms']:.2f} ms; "
             f"backward/forward {row['backward_over_forward']:.2f})")
    return [[label, None, f"{row['tidu_ms']:.2f} ms", *_peers([row["tidu_ms"]], row["peers"])]]


def _mlp_jit(row: dict) -> list[Row]:
    return [[f"MLP {row['case']}", None, f"{row['tidu_ms']:.2f} ms",
             *_peers([row["tidu_ms"]], row["peers"])]]


def _scaling(row: dict) -> list[Row]:
    small, large = str(row["small_n"]), str(row["large_n"])
    figures = [f"{row['sizes'][n]['us_per_op']:.2f}" if n in row["sizes"] else "—"
               for n in (small, large)]
    growth = f"growth {row['growth']:.2f}" if "growth" in row else ""
    rows = [[f"scaling: {row['case']}", f"{int(small):,} / {int(large):,} ops",
             " / ".join(figures) + " µs/op", None, growth]]
    for n in (small, large):
        if n not in row["sizes"]:
            rows.append([f" …at {int(n):,} ops: {row.get('note', 'not run')}",
                         None, None, None, None])
            continue
        size = row["sizes"][n]
        parts = ", ".join(f"{key.removesuffix('_us_per_op')} {value:.2f}"
                          for key, value in size.items()
                          if key.endswith("_us_per_op") and key != "us_per_op")
        rows.append([f" …at {int(n):,} ops: {parts}; peak RSS {size['peak_rss_mb']:,.0f} MB",
                     None, None, None, None])
    return rows


def _graph_memory(row: dict) -> list[Row]:
    if "n_ops" not in row:
        return [[f"graph memory: {row['case']}", None, row["note"], None, ""]]
    target = row["target_bytes_per_op"]
    retained = row["retained_bytes_per_op"]
    label = (f"graph memory: {row['case']}, {row['n_ops']:,} ops (primal "
             f"{row['primal_bytes_per_op']:.0f} + linear {row['linear_bytes_per_op']:.0f} + "
             f"transposed {row['transposed_bytes_per_op']:.0f} B/op)")
    return [[label, None, f"{retained / 1024:.2f} KB/op kept (peak "
             f"{row['peak_bytes_per_op'] / 1024:.2f})", f"target {target / 1024:.0f} KB/op",
             f"{retained / target:.2f}"]]


def _memory(row: dict) -> list[Row]:
    return [[f"memory: backward peak / forward held, {row['case']}", f"{row['n_ops']:,} ops",
             f"{row['backward_peak_mb']:.0f} / {row['forward_mb']:.0f} MB", None,
             f"{row['backward_over_forward']:.2f}"]]


def _several(label: str, row: dict, keys: list[str], unit: str) -> list[Row]:
    """A row of several tidu figures (``keys`` of ``row``) against each peer."""
    if not all(key in row for key in keys):
        return [[label, None, row.get("note", "not run"), "—", ""]]
    tidu = [row[key] for key in keys]
    return [[label, None, " / ".join(f"{t:.2f}" for t in tidu) + f" {unit}",
             *_peers(tidu, row["peers"])]]


def _hvp(row: dict) -> list[Row]:
    return _several("HVP of the MLP loss: try_hvp / create_graph / tnp.hvp", row,
                    ["tidu try_hvp ms", "tidu create_graph ms", "tidu tnp.hvp ms"], "ms")


def _vmap(row: dict) -> list[Row]:
    label = (f"{row['case']}: vmap(grad) (one batched grad {row['tidu batched grad ms']:.2f} "
             "ms; in a process of its own)")
    return [[label, None, f"{row['tidu_ms']:.2f} ms", *_peers([row["tidu_ms"]], row["peers"])]]


TRANSFORM_NAMES = {"grad": "grad", "hessian": "hessian", "jacobian": "jacrev"}


def _small_grad(row: dict) -> list[Row]:
    label = f"`tnp.{TRANSFORM_NAMES[row.get('transform', 'grad')]}` without jit: {row['case']}"
    names = {"jax grad (no jit)": "jax (no jit)"}
    return [[label, None, f"{row['tidu_ms']:.2f} ms",
             *_peers([row["tidu_ms"]], row["peers"], names=names)]]


def _torch_arrays(row: dict) -> list[Row]:
    return _several("MLP step on torch tensors: jit / eager Tensor / value_and_grad", row,
                    ["tidu jit(value_and_grad) ms", "tidu eager Tensor ms",
                     "tidu value_and_grad ms"], "ms")


def _dask(row: dict) -> list[Row]:
    if "speedup" not in row:
        return [[f"Dask {row['case']}: 2 workers vs 1", None, row.get("note", "not run"),
                 "—", ""]]
    label = (f"Dask {row['case']}: 2 workers vs 1 (worker peak {row['worker_peak_mb']:.0f} "
             f"of {row['worker_limit_mb']:.0f} MB)")
    return [[label, None, f"{row['two_workers_s']:.2f} s", f"1 worker {row['one_worker_s']:.2f} s",
             f"speed-up {row['speedup']:.2f}"]]


AB_NAMES = {"eager 0-d chain, us/op": "eager 0-d chain", "eager MLP step, ms": "eager MLP step",
            "jit MLP step, ms": "`jit` MLP step",
            "grad, 150 ops on 16 floats, ms": "`grad` of 150 ops on 16 floats"}


def _numpy_ab(row: dict) -> list[Row]:
    base = row["case"].split(" / ", 1)[1].split(" ", 1)[0]    # "this tree / BASE (before ..."
    pairs = {key: value for key, value in row.items()
             if isinstance(value, dict) and "new_over_old" in value}
    if not pairs:
        return [[f"this tree / `{base}` (before the array backends)", None,
                 row.get("note", "not run"), "—", ""]]
    label = (f"this tree / `{base}` (before the array backends), fresh processes: "
             + " / ".join(AB_NAMES.get(key, key.rsplit(", ", 1)[0]) for key in pairs))
    return [[label, None, *(" / ".join(f"{pair[side]:.2f}" for pair in pairs.values())
                            for side in ("new", "old", "new_over_old"))]]


ROWS: dict[str, Callable[[dict], list[Row]]] = {
    "transform": _transform, "eager scalar": _eager, "mlp floor": _mlp_floor, "mlp": _mlp,
    "mlp jit": _mlp_jit, "scaling": _scaling, "graph memory": _graph_memory,
    "memory": _memory, "hvp": _hvp, "vmap": _vmap, "small grad": _small_grad,
    "torch arrays": _torch_arrays, "dask": _dask, "numpy A/B": _numpy_ab}


def table_rows(result: dict) -> list[Row]:
    """The table's rows (five cells each) from the JSON of ``python -m benchmarks``, in the
    run's order; a workload this table does not know is named on stderr and left out.

    >>> table_rows({"rows": [{"workload": "memory", "case": "chain of 1 MB arrays",
    ...     "n_ops": 60, "forward_mb": 42.1, "backward_peak_mb": 45.1,
    ...     "backward_over_forward": 1.0715, "peers": {}}]})
    [['memory: backward peak / forward held, chain of 1 MB arrays', '60 ops', '45 / 42 MB', \
None, '1.07']]
    """
    rows = []
    for row in result["rows"]:
        if row["workload"] in ROWS:
            rows += ROWS[row["workload"]](row)
        elif row["workload"] not in NOT_IN_TABLE:
            print(f"benchmarks.table: no table row for workload {row['workload']!r}",
                  file=sys.stderr)
    return rows


def format_table(result: dict) -> str:
    """The markdown table of docs/performance.md's "## Latest table" for a run's JSON.

    >>> print(format_table({"rows": []}))
    | workload | size | tidu | peer | ratio |
    |---|---|---|---|---|
    """
    lines = [render(list(HEADER)), "|" + "---|" * len(HEADER)]
    return "\n".join(lines + [render(row) for row in table_rows(result)])


# --- the machine line --------------------------------------------------------------------------

_POOLS = {"openblas": "OpenBLAS", "openmp": "OpenMP", "mkl": "MKL", "blis": "BLIS"}
_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


def _cpu_name(model: str) -> str:
    """``Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz`` -> ``Intel Xeon Gold 6248``."""
    model = re.sub(r"\((R|TM|tm|r)\)", "", model).split(" @ ")[0]
    words = [word for word in model.split() if word not in ("CPU", "Processor")]
    return " ".join(words) or model


def _threads(settings: dict) -> str:
    """``one compute thread for every library`` and how each was held to it."""
    count = settings.get("threads")
    variables = [settings.get(name) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                 "MKL_NUM_THREADS")]
    if len(set(variables)) == 1:
        parts = [f"`OMP/OPENBLAS/MKL_NUM_THREADS={variables[0]}`"]
    else:
        parts = [" ".join(f"`{name}={value}`" for name, value in
                          zip(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"),
                              variables))]
    pools = settings.get("threadpoolctl")
    if isinstance(pools, dict):
        counts: dict = {}
        for pool, n in pools.items():
            counts.setdefault(_POOLS.get(pool.split()[0], pool.split()[0]), set()).add(n)
        parts[0] += ", threadpoolctl: " + ", ".join(
            f"{api} {'/'.join(str(n) for n in sorted(ns))}" for api, ns in counts.items())
    elif pools:
        parts[0] += f", threadpoolctl {pools}"
    if "torch" in settings:
        parts.append(f"torch {settings['torch']}")
    if "jax" in settings:
        started = re.fullmatch(r"CPU pool started under a (\d+)-CPU affinity mask",
                               settings["jax"])
        parts.append(f"JAX's pool started under a {_WORDS.get(int(started[1]), started[1])}"
                     "-CPU mask" if started else f"jax: {settings['jax']}")
    threads = (f"{_WORDS.get(count, count)} compute thread{'s' if count != 1 else ''}"
               if count else "compute threads not recorded")
    return f"**{threads} for every library** ({'; '.join(parts)})"


def machine_line(result: dict) -> str:
    """The run and its machine, as the paragraph above the table names them; a fact the
    JSON does not hold is said to be missing, never guessed.

    >>> print(machine_line({"quick": True, "machine": {"python": "3.11.7", "numpy": "2.4.6",
    ...     "processor": "Intel(R) Xeon(R) Processor", "date": "2026-11-29",
    ...     "commit": "3c6b99d", "uncommitted_changes": False, "cores": 2,
    ...     "architecture": "x86_64", "l2_cache": {"bytes": 2**20, "cpus": 1},
    ...     "memory_bytes": 24 * 2**30, "system": "Linux", "numpy_blas": "scipy-openblas",
    ...     "torch": "2.14.1+cu130", "jax": None}, "threads": {"threads": 1,
    ...     "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
    ...     "threadpoolctl": {"openblas (libscipy_openblas)": 1}, "torch": 1}}))
    One run of `python -m benchmarks --quick` (2026-11-29, commit `3c6b99d`). Machine: \
2 cores (Intel Xeon, x86_64, 1 MiB L2 cache per core), 24 GB, Linux, Python 3.11.7, \
NumPy 2.4.6 (OpenBLAS), torch 2.14.1 (CPU), jax not installed, autograd not recorded, \
dask not recorded; **one compute thread for every library** \
(`OMP/OPENBLAS/MKL_NUM_THREADS=1`, threadpoolctl: OpenBLAS 1; torch 1).
    """
    machine = result.get("machine", {})
    command = "python -m benchmarks" + (" --quick" if result.get("quick") else "")
    commit = machine.get("commit")
    commit = (f"commit `{commit}`" + (" with uncommitted changes"
                                      if machine.get("uncommitted_changes") else "")
              if commit else "commit not recorded")
    run = f"One run of `{command}` ({machine.get('date', 'date not recorded')}, {commit})."

    cpu = [_cpu_name(machine["processor"])] if machine.get("processor") else []
    cpu += [machine["architecture"]] if machine.get("architecture") else []
    l2 = machine.get("l2_cache")
    if l2:
        size = (f"{l2['bytes'] / 2**20:g} MiB" if l2["bytes"] >= 2**20
                else f"{l2['bytes'] / 2**10:g} KiB")
        cpu.append(f"{size} L2 cache " + ("per core" if l2.get("cpus") == 1 else
                                          f"per {l2['cpus']} CPUs" if l2.get("cpus")
                                          else "each"))
    cores = f"{machine['cores']} cores" if machine.get("cores") else "cores not recorded"
    facts = [f"{cores} ({', '.join(cpu)})" if cpu else cores]
    if machine.get("memory_bytes"):
        facts.append(f"{machine['memory_bytes'] / 2**30:.0f} GB")
    facts.append(machine.get("system") or machine.get("platform", "OS not recorded"))
    facts.append(f"Python {machine.get('python', 'not recorded')}")
    blas = machine.get("numpy_blas")
    blas = "OpenBLAS" if blas and "openblas" in blas.lower() else blas
    facts.append(f"NumPy {machine.get('numpy', 'not recorded')}" + (f" ({blas})" if blas else ""))
    for name in ("torch", "jax", "autograd", "dask"):
        if name not in machine:
            facts.append(f"{name} not recorded")
        elif machine[name] is None:
            facts.append(f"{name} not installed")
        else:       # the benchmarks run PyTorch on the CPU, whatever its build
            version = machine[name].split("+")[0] if name == "torch" else machine[name]
            facts.append(f"{name} {version}" + (" (CPU)" if name == "torch" else ""))
    threads = _threads(result["threads"]) if "threads" in result else "threads not recorded"
    return f"{run} Machine: {', '.join(facts)}; {threads}."


# --- --check ------------------------------------------------------------------------------------


def doc_table_rows(text: str) -> list[list[str]]:
    """The rows of the table in the "## Latest table" section of a markdown text (header
    and separator left out), each cell stripped.

    >>> doc_table_rows("## Latest table\\n\\nSome run.\\n\\n| workload | size |\\n|---|---|\\n"
    ...                "| memory | 999 ops |\\n\\n## Next\\n| other | table |")
    [['memory', '999 ops']]
    """
    section = text.split(SECTION, 1)[1] if SECTION in text else ""
    section = re.split(r"^## ", section, maxsplit=1, flags=re.M)[0]
    lines = [line.strip() for line in section.splitlines() if line.strip().startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def _shape(cells: list[str]) -> tuple:
    """A row's kind and place with its figures left out: what pairs a doc row with the
    JSON's before their figures are compared."""
    return tuple(re.sub(r"\d[\d,.]*", "#", cell) for cell in cells[:2])


def differences(doc: list[list[str]], run: list[list[str]]) -> list[str]:
    """Where the doc's rows and the run's differ, one line each (``[]`` when they agree).

    >>> differences([["memory", "999 ops", "671 MB"]], [["memory", "999 ops", "672 MB"]])
    ["row 1 'memory' (999 ops): tidu: doc '671 MB', JSON '672 MB'"]
    >>> differences([], [["memory", "999 ops", "672 MB"]])
    ['only in the JSON: | memory | 999 ops | 672 MB |']
    """
    found = []
    matcher = difflib.SequenceMatcher(a=[_shape(row) for row in doc],
                                      b=[_shape(row) for row in run], autojunk=False)
    for tag, doc_start, doc_end, run_start, run_end in matcher.get_opcodes():
        if tag == "equal":
            for offset in range(doc_end - doc_start):
                doc_row, run_row = doc[doc_start + offset], run[run_start + offset]
                cells = [f"{column}: doc {d!r}, JSON {r!r}" for column, d, r
                         in zip(HEADER, doc_row, run_row) if d != r]
                if len(doc_row) != len(run_row):
                    cells.append(f"doc has {len(doc_row)} cells, JSON {len(run_row)}")
                if cells:
                    where = f" ({doc_row[1]})" if len(doc_row) > 1 and doc_row[1] else ""
                    found.append(f"row {doc_start + offset + 1} {doc_row[0]!r}{where}: "
                                 + "; ".join(cells))
            continue
        found += [f"only in the doc: {render(row)}" for row in doc[doc_start:doc_end]]
        found += [f"only in the JSON: {render(row)}" for row in run[run_start:run_end]]
    return found


def main(argv: list[str] | None = None) -> int:
    """Print the table of ``bench.json`` (or, with ``--check DOC``, how DOC's differs);
    return the exit status: 1 if ``--check`` found a difference, else 0.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
    ...     json.dump({"rows": []}, file)
    >>> main([file.name])
    One run of `python -m benchmarks` (date not recorded, commit not recorded). Machine: \
cores not recorded, OS not recorded, Python not recorded, NumPy not recorded, torch not \
recorded, jax not recorded, autograd not recorded, dask not recorded; threads not recorded.
    <BLANKLINE>
    | workload | size | tidu | peer | ratio |
    |---|---|---|---|---|
    0
    """
    parser = argparse.ArgumentParser(prog="python -m benchmarks.table",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("json", help="the JSON of `python -m benchmarks --json`")
    parser.add_argument("--check", metavar="DOC", default=None,
                        help="compare DOC's '## Latest table' with the JSON's; exit 1 if "
                             "they differ")
    args = parser.parse_args(argv)
    with open(args.json) as file:
        result = json.load(file)
    rows = table_rows(result)
    if args.check is None:
        print(machine_line(result))
        print()
        print(format_table(result))
        notes = result.get("notes", [])
        if notes:
            print()
            print("Notes of the run: " + "; ".join(notes))
        return 0
    with open(args.check, encoding="utf-8") as file:
        text = file.read()
    doc = doc_table_rows(text)
    found = differences(doc, [[(cell or "").strip() for cell in row] for row in rows])
    if not doc:
        found = [f"no table in a {SECTION!r} section"]
    if found:
        print(f"{args.check}'s table differs from {args.json}:")
        print("\n".join(found))
        return 1
    print(f"{args.check}'s table agrees with {args.json} ({len(doc)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
