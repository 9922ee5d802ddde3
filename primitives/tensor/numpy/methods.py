"""NumPy's array methods on tensors and traced values: each one calls the ``tnp`` function.

``x.prod(axis=0)`` is ``tnp.prod(x, axis=0)``, ``x.ravel()`` is ``tnp.ravel(x)``,
and so on, with the function's arguments and gradients. NumPy's in-place
methods (``sort``, ``fill``, ``put``...) would change a value that may be saved
for backward: tensors are immutable, so ``x.sort()`` raises and points to
``tnp.sort(x)``.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> x = tnp.tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
>>> y = x.prod(axis=1).sum() + x.ravel().std() + x.trace()
>>> y.backward().grad(x).round(4)
array([[2.6646, 0.8882],
       [4.1118, 4.3354]])
"""

from __future__ import annotations

import primitives.tensor as tnp      # looked up at call time: the package is complete by then
from primitives.tensor.errors import TensorTypeError


def _forwarding(name: str, function: str | None = None):
    function = function or name

    def method(self, *args, **kwargs):
        return getattr(tnp, function)(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``tnp.{function}(self, ...)``, as ``numpy.ndarray.{name}``."
    return method


def _in_place(name: str):
    def method(self, *args, **kwargs):
        raise TensorTypeError(f"{type(self).__name__}.{name}() would change the array in place, "
                              f"but tensors and traced values are immutable (a saved value must "
                              f"not change before backward); use tnp.{name}(x, ...), which "
                              f"returns a new array")
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Refused: ``numpy.ndarray.{name}`` works in place; use ``tnp.{name}``."
    return method


class ArrayMethods:
    """The ``numpy.ndarray`` methods that the ``tnp`` functions provide."""

    __slots__ = ()

    all = _forwarding("all")
    any = _forwarding("any")
    argmax = _forwarding("argmax")
    argmin = _forwarding("argmin")
    argsort = _forwarding("argsort")
    clip = _forwarding("clip")
    conjugate = _forwarding("conjugate")
    cumprod = _forwarding("cumprod")
    cumsum = _forwarding("cumsum")
    diagonal = _forwarding("diagonal")
    dot = _forwarding("dot")
    flatten = _forwarding("flatten", "ravel")
    max = _forwarding("max")
    mean = _forwarding("mean")
    min = _forwarding("min")
    prod = _forwarding("prod")
    ravel = _forwarding("ravel")
    repeat = _forwarding("repeat")
    round = _forwarding("round")
    std = _forwarding("std")
    sum = _forwarding("sum")
    swapaxes = _forwarding("swapaxes")
    take = _forwarding("take")
    trace = _forwarding("trace")
    var = _forwarding("var")

    sort = _in_place("sort")
    fill = _in_place("fill")
    put = _in_place("put")
    resize = _in_place("resize")
