"""Reductions, scans, sorting and statistics with NumPy's names.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.prod(np.array([2.0, 3.0]))   # doctest: +SKIP
np.float64(6.0)
"""

from __future__ import annotations

__all__: list[str] = []
