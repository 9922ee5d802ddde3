"""Vector and matrix products with NumPy's names: ``inner``, ``vdot``, ``kron``, ``cross``.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.inner(np.ones(3), np.arange(3.0))   # doctest: +SKIP
np.float64(3.0)
"""

from __future__ import annotations

__all__: list[str] = []
