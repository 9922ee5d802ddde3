"""The "NumPy coverage" page: generated from the table of cases, and the table is complete.

Every NumPy function ``primitives.tensor`` implements (registered for NumPy's
dispatch) has at least one case in ``tests/numpy_cases``, so the page lists it
and ``tests/test_numpy_functions.py`` checks it.
"""

from __future__ import annotations

import sys
from pathlib import Path


import primitives.tensor as tnp
from primitives.tensor.numpy import dispatch as interop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs" / "hooks"))
import numpy_coverage  # noqa: E402

# NumPy functions with a tnp version that are not differentiable array functions:
# they return shapes or read only the dtype, and are tested elsewhere.
NOT_IN_THE_TABLE = {"shape", "ndim", "size", "iscomplexobj", "isrealobj"}


def _resolve(name: str):
    found = tnp
    for part in name.split("."):
        found = getattr(found, part, None)
    return found


def test_every_implemented_numpy_function_has_a_case():
    names = {row["name"] for row in numpy_coverage.coverage_rows()}
    covered = {_resolve(name) for name in names}
    numpy_versions = {f for f in interop._IMPLEMENTATIONS.values()
                      if not f.__module__.startswith("primitives.tensor.scipy")}   # SciPy's:
    missing = sorted({f.__name__ for f in numpy_versions - covered      # tests/test_scipy_*
                      if f.__name__.lstrip("_") not in names} - NOT_IN_THE_TABLE)
    assert not missing, f"tnp functions registered for NumPy's dispatch with no case: {missing}"


def test_the_page_is_generated_from_the_cases():
    page = (ROOT / "docs" / "numpy-coverage.md").read_text(encoding="utf-8")
    assert numpy_coverage.MARKER in page and numpy_coverage.END in page
    assert page == numpy_coverage.with_current_table(page), (
        "docs/numpy-coverage.md's table is stale: run python docs/hooks/numpy_coverage.py")
    for row in numpy_coverage.coverage_rows():
        assert f"| `{row['name']}` |" in page
    assert "| `exp` | `x` |" in page
