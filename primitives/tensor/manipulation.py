"""Array manipulation with NumPy's names: diagonals and triangles, flips and rolls,
repeating, splitting and stacking, axis moves, and the functional forms of indexing.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.flip(np.arange(3.0))   # doctest: +SKIP
array([2., 1., 0.])
"""

from __future__ import annotations

__all__: list[str] = []
