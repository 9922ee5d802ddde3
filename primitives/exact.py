"""Exact identity of op parameters, shared by every primitive set here.

Graphs merge equal ops, so an op's ``==`` must hold only when the ops compute
the same thing. ``==`` on numbers does not: ``-0.0 == 0.0`` (but ``1 / -0.0`` is
``-inf``), ``1 == 1.0 == 1+0j`` (but the results' types differ) and
``nan != nan`` (which would keep equal ops apart). :func:`exact_identity` is what
makes two parameters the same: their type and value, ``-0.0`` apart from ``0.0``,
every NaN equal to every NaN.

Room: the bottom of ``primitives``; imports only the standard library.

>>> exact_identity(-0.0) == exact_identity(0.0)
False
>>> exact_identity(1) == exact_identity(1.0), exact_identity(1.0) == exact_identity(1.0 + 0j)
(False, False)
>>> exact_identity(float("nan")) == exact_identity(-float("nan"))
True
>>> import numpy as np
>>> exact_identity(np.float64(-0.0)) == exact_identity(np.float64(0.0))
False
>>> exact_identity(np.float32(-0.0)) == exact_identity(np.float32(0.0))
False
"""

from __future__ import annotations

from math import copysign
from numbers import Complex, Rational, Real


def exact_identity(value) -> tuple:
    """A hashable key equal for two parameters exactly when they are the same value (of the
    same type: ``np.float64(-0.0)`` is apart from ``np.float64(0.0)`` and from ``-0.0``).

    Floating and complex numbers of other types (NumPy's ``float32``, ``float16``,
    ``complex64``, ... register as :class:`numbers.Real` and :class:`numbers.Complex`)
    keep their signed zeros and NaNs apart the same way."""
    kind = type(value)
    if isinstance(value, float):
        return (kind, float_identity(value))
    if isinstance(value, complex):
        return (kind, float_identity(value.real), float_identity(value.imag))
    if isinstance(value, Rational) or not isinstance(value, Complex):
        return (kind, value)              # exact already (ints, fractions), or not a number
    if isinstance(value, Real):
        return (kind, float_identity(value))
    return (kind, float_identity(value.real), float_identity(value.imag))


def float_identity(x: float):
    """``x`` with its sign (``-0.0`` apart from ``0.0``); one key for every NaN."""
    return (x, copysign(1.0, x)) if x == x else "nan"
