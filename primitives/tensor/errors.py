"""The errors the tensor front ends raise on misuse: each a ``TiduError`` with one builtin base.

>>> from tidu import TiduError
>>> issubclass(TensorAxisError, TiduError) and issubclass(TensorAxisError, np.exceptions.AxisError)
True
"""

from __future__ import annotations

import numpy as np

from tidu import TiduError


class TensorShapeError(TiduError, ValueError):
    """Shapes or arguments that do not fit an operation (a ``ValueError``, as in NumPy)."""


class TensorTypeError(TiduError, TypeError):
    """An argument of the wrong type for an operation (a ``TypeError``, as in NumPy)."""


class TensorIndexError(TiduError, IndexError):
    """An index that does not fit the array (an ``IndexError``, as in NumPy)."""


class TensorOverflowError(TiduError, OverflowError):
    """A Python integer out of range of the integer dtype it meets (NumPy's ``OverflowError``,
    raised where ``jit`` traces the number)."""


class TensorAttributeError(TiduError, AttributeError):
    """An eager ``Tensor``'s own attribute asked of a traced value (an ``AttributeError``, so
    ``hasattr`` stays false)."""


class TensorAxisError(TiduError, np.exceptions.AxisError):
    """An axis out of range for the array (NumPy's ``AxisError``)."""

    def __init__(self, fn: str, axis, ndim: int) -> None:
        super().__init__(f"{fn}: axis {axis} is out of bounds for array of dimension {ndim}")


class BackwardError(TiduError, ValueError):
    """Eager autograd asked for something it cannot do (a bad seed, backward of a tensor that
    does not require grad, changing ``requires_grad`` of a computed tensor)."""


class ConcretizationError(TiduError, TypeError):
    """The data of a value is needed while ``jit`` traces, where only its shape and dtype
    are known (JAX's ``ConcretizationTypeError``)."""


class TensorNotSupportedError(TiduError, NotImplementedError):
    """A NumPy feature these functions do not implement (a ``NotImplementedError``)."""


class SolverError(TiduError, RuntimeError):
    """An iterative solver (``odeint``, ``fixed_point``) that did not reach its tolerance
    within its step or iteration budget (a ``RuntimeError``)."""


def number_argument(function: str, name: str, value, kind: type = float):
    """``value`` as a ``kind`` (``float`` or ``int``), or a :class:`TensorTypeError` naming
    ``function`` and its argument ``name`` (a string is refused, not parsed).

    >>> number_argument("odeint", "rtol", 1e-3), number_argument("f", "max_iter", 9.0, int)
    (0.001, 9)
    >>> number_argument("odeint", "rtol", "1e-3")
    Traceback (most recent call last):
    ...
    primitives.tensor.errors.TensorTypeError: odeint: rtol must be a float number, got '1e-3'
    """
    if not isinstance(value, (str, bytes)):
        try:
            return kind(value)
        except TiduError:                   # a tensor refusing the conversion says why
            raise
        except (TypeError, ValueError, OverflowError):
            pass
    raise TensorTypeError(f"{function}: {name} must be a {kind.__name__} number, got {value!r}")
