"""The NumPy surface of ``primitives.tensor``: NumPy's functions, by name, on arrays,
``Tensor``s and traced values, differentiable, and the operators and array methods
of tensors and traced values.

Its ``__all__`` is ``tnp``'s NumPy namespace: the names of every family module,
and the submodules :mod:`.linalg` and :mod:`.fft`. The package is layered; a
module imports only modules below it (listed in its docstring), never the package
above (``primitives.tensor``):

- :mod:`.dispatch`: NumPy's dispatch protocols (NEP 13, NEP 18), the registry of
  tnp's versions of NumPy functions (:func:`~.dispatch.implements`) and of tnp's
  names;
- :mod:`.lowering`: operands and dtype promotion, and the functions that are one
  op after promotion and broadcasting (``add``, ``exp``, ``reshape``, ``sum``,
  ``where``, ``dot_general``...);
- the families, each above :mod:`.lowering`: :mod:`.indexing` (``x[key]``,
  ``take``); :mod:`.mathfuncs` and :mod:`.manipulation` (above :mod:`.indexing`);
  :mod:`.products` (above :mod:`.manipulation`); :mod:`.reductions` (above
  :mod:`.mathfuncs` and :mod:`.products`); :mod:`.padding` (``pad``, above
  :mod:`.reductions`); :mod:`.linalg` (above :mod:`.products`)
  and :mod:`.fft`; :mod:`.creation` (above :mod:`.reductions`); :mod:`.histograms`
  (above :mod:`.creation`); :mod:`.polynomials` (above :mod:`.linalg` and :mod:`.creation`);
- :mod:`.methods`: the operators and ``ndarray`` methods of tensors and traced
  values (``ArrayOperators``), from one table of the tnp functions; it is the top,
  imported by the front ends.

``tnp.vectorize`` maps with ``vmap``, a transform, so it is above this package
(:mod:`primitives.tensor.transforms.vectorize`).

>>> import numpy as np
>>> from primitives.tensor import numpy as tnp
>>> float(tnp.sum(tnp.exp(np.zeros(3))))
3.0
"""

import numpy as _np

from primitives.tensor.numpy import (creation, dispatch, fft, histograms, indexing, linalg,
                                     lowering, manipulation, mathfuncs, padding, polynomials,
                                     products, reductions)
from primitives.tensor.numpy.lowering import *       # noqa: F401,F403
from primitives.tensor.numpy.indexing import *       # noqa: F401,F403
from primitives.tensor.numpy.mathfuncs import *      # noqa: F401,F403
from primitives.tensor.numpy.manipulation import *   # noqa: F401,F403
from primitives.tensor.numpy.products import *       # noqa: F401,F403
from primitives.tensor.numpy.reductions import *     # noqa: F401,F403
from primitives.tensor.numpy.padding import *        # noqa: F401,F403
from primitives.tensor.numpy.creation import *       # noqa: F401,F403
from primitives.tensor.numpy.histograms import *     # noqa: F401,F403
from primitives.tensor.numpy.polynomials import *    # noqa: F401,F403

__all__ = ["linalg", "fft", *lowering.__all__, *indexing.__all__, *mathfuncs.__all__,
           *manipulation.__all__, *products.__all__, *reductions.__all__, *padding.__all__,
           *creation.__all__, *histograms.__all__, *polynomials.__all__]

# the names errors may point to (tnp.<name>): not those of NumPy's own functions that tnp
# re-exports (logspace, geomspace...; some wrapped to read any library's dtype), which would
# drop a derivative just the same
def _numpys_own(name: str) -> bool:
    value = globals()[name]
    return getattr(value, "__wrapped__", value) is getattr(_np, name, None)


dispatch.provides([name for name in __all__ if not _numpys_own(name)])
dispatch.provides(linalg.__all__, "linalg.")
dispatch.provides(fft.__all__, "fft.")
