"""Elementwise mathematical functions with NumPy's names: trigonometric, hyperbolic,
exponential and logarithmic, rounding, and the two-argument functions.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.sinh(np.zeros(2))   # doctest: +SKIP
array([0., 0.])
"""

from __future__ import annotations

__all__: list[str] = []
