"""Fresh results: what a transform returns shares no memory with anything else.

A compiled program may return one of its inputs as it is (``jit(lambda x: x)``),
a view of one (``x[1:]``), a constant it holds (``grad`` of a linear function
is a constant), or one array twice (``(y, y)``). Writing into such a result
would change the caller's data or the next call's answer. :func:`fresh` copies
exactly those results and leaves every other one as it is (no cost).

>>> a = np.arange(3.0)
>>> out = fresh([a[1:], a + 1], held=[a])
>>> np.shares_memory(out[0], a), out[0].tolist()
(False, [1.0, 2.0])

Room: the bottom of the transforms package; imports :mod:`..backends` and :mod:`..core`.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from primitives.tensor.backends import library_of
from primitives.tensor.core import Frontend


def memory_of(value):
    """A token for the memory block under an array (its owner's identity for NumPy, the
    storage pointer for PyTorch), or ``None`` for values that are not arrays."""
    if type(value) is np.ndarray:
        return id(value if value.base is None else value.base)
    if isinstance(value, (Frontend, np.generic, int, float, complex, bool)) or value is None:
        return None
    storage = getattr(value, "untyped_storage", None)
    if storage is not None:                        # a PyTorch tensor
        return ("torch", storage().data_ptr())
    return id(value)                               # Dask and CuPy results: the object itself


def fresh(outputs: list, held: Iterable) -> list:
    """``outputs`` with each array that shares memory with an array of ``held`` (inputs,
    constants) or with an earlier output replaced by a copy of it, in its library.

    >>> y = np.ones(2)
    >>> first, second = fresh([y, y], held=[])
    >>> first is y, second is y
    (True, False)
    """
    taken = set()
    for h in held:
        if type(h) is np.ndarray:                   # memory_of's common case, inline
            taken.add(id(h if h.base is None else h.base))
        else:
            taken.add(memory_of(h))
    taken.discard(None)
    result = []
    for out in outputs:
        memory = memory_of(out)
        if memory is not None:
            if memory in taken:
                out = library_of(out).clone(out)
                memory = memory_of(out)
            taken.add(memory)
        result.append(out)
    return result
