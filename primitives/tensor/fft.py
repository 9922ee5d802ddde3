"""``numpy.fft`` with derivatives: the transforms are linear, so their JVPs are
themselves and their transposes are the adjoint transforms.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> tnp.fft.fft(np.ones(2))   # doctest: +SKIP
array([2.+0.j, 0.+0.j])
"""

from __future__ import annotations

__all__: list[str] = []
