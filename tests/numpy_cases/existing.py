"""Cases for the functions ``primitives.tensor`` had before the NumPy-coverage work."""

import numpy as np

import primitives.tensor as tnp
from numpy_cases import REAL_DTYPES, Case, normal, positive

CASES = [
    Case("exp", tnp.exp, np.exp, (normal((2, 3)),)),
    Case("log", tnp.log, np.log, (positive((2, 3)),)),
    Case("sum", lambda x: tnp.sum(x, axis=1, keepdims=True),
         lambda x: np.sum(x, axis=1, keepdims=True), (normal((2, 3)),), label="axis"),
    Case("maximum", tnp.maximum, np.maximum, (normal((2, 3)), normal((3,))), wrt=(0, 1),
         dtypes=REAL_DTYPES, note="ties split the derivative evenly"),
    Case("matmul", tnp.matmul, np.matmul, (normal((2, 3)), normal((3, 4))), wrt=(0, 1)),
]
