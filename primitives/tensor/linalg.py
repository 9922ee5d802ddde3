"""``numpy.linalg`` with derivatives: inverses, determinants, solves, norms and
decompositions, batched over leading axes as NumPy does.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.linalg.det(np.eye(2) * 2.0)   # doctest: +SKIP
np.float64(4.0)
"""

from __future__ import annotations

__all__: list[str] = []
