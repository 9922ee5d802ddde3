"""Fixtures shared by the test modules."""

from __future__ import annotations

import numpy as np
import pytest

from primitives.tensor.ops import elementwise as ew


@pytest.fixture
def sin_counter(monkeypatch):
    """Count evaluations of the ``sin`` primitive (eager and traced): ``count[0]``."""
    count = [0]
    rules = ew._UNARY["sin"]

    def counting_sin(a):
        count[0] += 1
        return np.sin(a)

    monkeypatch.setitem(ew._UNARY, "sin", rules._replace(fn=counting_sin))
    return count
