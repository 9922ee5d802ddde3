"""mkdocs hook: the "NumPy coverage" page's table, generated from the tests' table of cases.

``tests/numpy_cases`` lists every NumPy-named function of ``primitives.tensor``
on sample inputs, and ``tests/test_numpy_functions.py`` checks each case in
every way its fields say. This hook writes the page's table from the same
cases, so the page states exactly what the tests check: which arguments are
differentiated, in which dtypes, whether second order is checked, and the
gradient convention noted with the case.

The page holds the table between ``<!-- numpy-coverage-table -->`` and
``<!-- end numpy-coverage-table -->``, so it reads in the repository too; the hook
puts the current table there when the site is built, ``python
docs/hooks/numpy_coverage.py`` writes it into the file, and
``tests/test_numpy_coverage.py`` checks that the file's table is current.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- numpy-coverage-table -->"
END = "<!-- end numpy-coverage-table -->"
PAGE = ROOT / "docs" / "numpy-coverage.md"

FAMILY_TITLES = {
    "existing": "Core functions",
    "elementwise": "Elementwise",
    "statistics": "Reductions, scans, sorting, statistics",
    "manipulation": "Shapes and indexing",
    "products": "Products",
    "linalg": "numpy.linalg",
    "fft": "numpy.fft",
    "signal": "scipy.signal",
}


def _argument_names(case) -> list[str]:
    try:
        names = list(inspect.signature(case.fn).parameters)
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"arg {i}" for i in case.wrt]


def coverage_rows() -> list[dict]:
    """One row per function: what its cases check, merged over the cases."""
    rows: dict = {}
    for family, cases in _family_lists():
        for case in cases:
            row = rows.setdefault(case.name, {
                "name": case.name, "family": family, "wrt": [], "dtypes": [], "forward": True,
                "first_order": False, "second_order": False, "notes": [], "cases": 0})
            row["cases"] += 1
            # the function's own parameter names where a case calls it directly, else the
            # names of the case's lambda
            own = case.fn is _public(case.name)
            names = row.setdefault("own" if own else "other", [])
            for name in _argument_names(case):
                if name not in names:
                    names.append(name)
            for dtype in case.dtypes:
                if dtype not in row["dtypes"]:
                    row["dtypes"].append(dtype)
            if case.wrt:
                row["first_order"] = True
                row["second_order"] |= case.second_order
            if case.note and case.note not in row["notes"]:
                row["notes"].append(case.note)
    for row in rows.values():
        row["wrt"] = row.pop("own", None) or row.pop("other", [])
        row.pop("other", None)
    return list(rows.values())


def _public(name: str):
    import primitives.tensor as tnp

    found = tnp
    for part in name.split("."):
        found = getattr(found, part, None)
    return found


def _family_lists() -> list[tuple[str, list]]:
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import importlib
    import pkgutil

    import numpy_cases

    lists = []
    for info in sorted(pkgutil.iter_modules(numpy_cases.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"numpy_cases.{info.name}")
        lists.append((info.name, list(getattr(module, "CASES", []))))
    return lists


def coverage_table() -> str:
    """The page's tables as Markdown, one per family of functions."""
    rows = coverage_rows()
    out = []
    order = list(FAMILY_TITLES)
    families = sorted({r["family"] for r in rows},
                      key=lambda f: order.index(f) if f in order else len(order))
    yes = "✓"
    for family in families:
        out += [f"### {FAMILY_TITLES.get(family, family)}", "",
                "| function | differentiable in | dtypes | forward | 1st order | 2nd order "
                "| gradient convention |",
                "|---|---|---|---|---|---|---|"]
        for r in sorted((r for r in rows if r["family"] == family), key=lambda r: r["name"]):
            wrt = ", ".join(f"`{n}`" for n in r["wrt"]) or "— (no derivative)"
            out.append(f"| `{r['name']}` | {wrt} | {', '.join(r['dtypes'])} | {yes} | "
                       f"{yes if r['first_order'] else '—'} | "
                       f"{yes if r['second_order'] else '—'} | {'; '.join(r['notes'])} |")
        out.append("")
    return "\n".join(out)


def with_current_table(markdown: str) -> str:
    """``markdown`` with the region between the markers holding :func:`coverage_table`."""
    if MARKER not in markdown:
        return markdown
    before, rest = markdown.split(MARKER, 1)
    after = rest.split(END, 1)[1] if END in rest else rest
    return f"{before}{MARKER}\n\n{coverage_table()}\n{END}{after}"


def on_page_markdown(markdown: str, page, config, files) -> str:
    return with_current_table(markdown)


if __name__ == "__main__":              # python docs/hooks/numpy_coverage.py: refresh the page
    PAGE.write_text(with_current_table(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
