"""``tnp.pad``: NumPy's ``pad`` in every mode but a callable one, differentiable in ``x``.

Room: above :mod:`.reductions` and :mod:`.mathfuncs` (the statistics and the rounding its
modes need) and :mod:`.manipulation` (the modes made of constants and of ``x``'s own
entries, which :mod:`.products` pads with, and the per-axis loop).

>>> pad(np.arange(3.0), (1, 2), mode="maximum")
array([2., 0., 1., 2., 2., 2.])
"""

from __future__ import annotations

import builtins

import numpy as np

from primitives.tensor.core import dtype_of, shape_of
from primitives.tensor.errors import TensorNotSupportedError, TensorShapeError
from primitives.tensor.numpy import manipulation
from primitives.tensor.numpy.dispatch import implements
from primitives.tensor.numpy.lowering import (add, as_dtype, broadcast_to, divide, multiply,
                                              new_value, operand, subtract)
from primitives.tensor.numpy.mathfuncs import floor, round
from primitives.tensor.numpy.reductions import max, mean, median, min

__all__ = ["pad"]

_STATISTICS = {"maximum": max, "minimum": min, "mean": mean, "median": median}
_MODES = manipulation._OWN_MODES + ("linear_ramp",) + tuple(_STATISTICS)


@implements(np.pad)
def pad(x, pad_width, mode: str = "constant", **kwargs):
    """``np.pad`` in every mode but a callable one, differentiable in ``x``: ``"constant"``
    (``constant_values``; ``"empty"`` pads with zeros), ``"edge"``, ``"reflect"``,
    ``"symmetric"``, ``"wrap"`` (gathers of ``x``'s entries), ``"maximum"``, ``"minimum"``,
    ``"mean"``, ``"median"`` (``stat_length``) and ``"linear_ramp"`` (``end_values``). As
    NumPy, axes are padded one after another, values are cast to ``x``'s dtype (rounded for
    an integer ``x``), and ``reflect_type`` is ``"even"`` only.

    >>> pad(np.arange(3.0), (2, 1), mode="reflect")
    array([2., 1., 0., 1., 2., 1.])
    """
    if mode not in _MODES:
        raise TensorNotSupportedError(f"pad: mode {mode!r} is not supported (one of "
                                      f"{', '.join(_MODES)})")
    if mode in manipulation._OWN_MODES:
        return manipulation.pad(x, pad_width, mode, **kwargs)
    manipulation.check_pad_options(mode, kwargs, {"end_values"} if mode == "linear_ramp"
                                   else {"stat_length"})
    x, widths = operand(x), manipulation.pad_widths(x, pad_width)
    if not widths.any():
        return new_value(x)

    def block(x, axis: int, side: int, width: int):
        if mode == "linear_ramp":
            return _ramp(x, axis, side, width, kwargs.get("end_values", 0))
        side_shape = shape_of(x)[:axis] + (width,) + shape_of(x)[axis + 1:]
        return broadcast_to(_statistic(x, axis, side, mode, kwargs.get("stat_length")),
                            side_shape)
    return manipulation.pad_by_axis(x, widths, mode, block)


def _rounded(value, dtype, rounding=round):
    """``value`` cast to ``dtype``, rounded first for an integer one (NumPy's pad does)."""
    if np.dtype(dtype).kind in "iub":
        value = rounding(value)
    return as_dtype(value, dtype)


def _statistic(x, axis: int, side: int, mode: str, stat_length):
    """The maximum, minimum, mean or median of the ``stat_length`` entries at one end of
    ``x``'s ``axis`` (all of them by default), with that axis kept."""
    n = shape_of(x)[axis]
    count = n if stat_length is None else builtins.min(
        int(manipulation.pad_pairs(stat_length, shape_of(x), "stat_length",
                                   integral=True)[axis, side]), n)
    if count <= 0:
        raise TensorShapeError(f"pad: stat_length of 0 (or an empty axis {axis}) yields no "
                               f"value for mode {mode!r}")
    stat = _STATISTICS[mode](manipulation.edge_slice(x, axis, side, count), axis=axis,
                             keepdims=True)
    return _rounded(stat, dtype_of(x))


def _ramp(x, axis: int, side: int, width: int, end_values):
    """``linear_ramp``'s ``width`` entries from ``end_values`` to the edge of ``x`` (the edge
    itself excluded): NumPy's ``linspace(end, edge, width, endpoint=False)``, computed as it
    does (``end + i * ((edge - end) / width)``, floored for an integer ``x``)."""
    if shape_of(x)[axis] == 0:
        raise TensorShapeError(f"pad: can't extend empty axis {axis} using modes other than "
                               "'constant' or 'empty'")
    end = manipulation.pad_pairs(end_values, shape_of(x), "end_values")[axis, side]
    step = divide(subtract(manipulation.edge_slice(x, axis, side, 1), end), float(width))
    steps = np.arange(width, dtype=np.float64)[::-1 if side else 1]
    ramp = add(multiply(step, steps.reshape((width,) + (1,) * (len(shape_of(x)) - axis - 1))),
               end)
    return _rounded(ramp, dtype_of(x), floor)
