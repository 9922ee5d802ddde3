"""Hostile round 55a: the eager Tensor used as a PyTorch user would (``.data`` assignment,
``backward``'s and ``autograd.grad``'s keyword arguments, ``retain_grad``), compared with
torch where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import autograd
from primitives.tensor.errors import BackwardError, TensorShapeError, TensorTypeError


# Was wrong: ``t.data = None`` (or a string, an object) was accepted, leaving a tensor of
# dtype object whose next op raised NumPy's TypeError; a ragged list raised NumPy's ValueError.
@pytest.mark.parametrize("value", [None, "ab", object(), {"a": 1}, np.array(["a", "b"])])
def test_assigning_data_that_holds_no_numbers_is_refused(value):
    t = tnp.tensor([1.0, 2.0])
    with pytest.raises(TensorTypeError, match=r"\.data"):
        t.data = value
    with pytest.raises(TensorShapeError, match=r"\.data"):
        t.data = [[1.0], [1.0, 2.0]]
    assert np.array_equal((t + 1).data, [2.0, 3.0])      # t is unchanged and usable


# Was wrong: ``x.data = arr`` with ``arr`` in the other byte order (">f8", as files give)
# kept that dtype, so the next backward refused the leaf's float64 gradient as "another
# dtype" (tensor() already converts such arrays to this machine's order).
def test_assigning_data_in_the_other_byte_order_keeps_backward_working():
    other = ">f8" if np.little_endian else "<f8"
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    tnp.sum(x * x).backward()
    arr = np.array([3.0, 4.0], dtype=other)
    x.data = arr
    assert x.dtype == np.float64 and x.dtype.isnative
    tnp.sum(x * x).backward()
    assert np.array_equal(x.grad, [2.0 + 6.0, 4.0 + 8.0])
    arr[:] = 0.0                                      # a copy: the caller's array is not x's
    assert np.array_equal(x.data, [3.0, 4.0])
