"""Hostile round 56c: state that outlives a call (threads, escaped tracers, closures,
copies, re-entrancy, exceptions mid-trace) and the error contract around it."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
from primitives import tensor as tnp

X = np.array([1.0, 2.0, 3.0])


def _cube_sum(a):
    return tnp.sum(a ** 3)


@pytest.mark.parametrize("call, message", [
    (lambda: tnp.hvp(_cube_sum, (X,), (np.ones(4),)), "hvp: tangent of shape"),
    (lambda: tnp.hvp(_cube_sum, (X,), (X, X)), "hvp: 1 primals but 2 tangents"),
    (lambda: tnp.hvp(_cube_sum, (np.ones(3, int),), (X,)), "hvp: argument 0 has dtype"),
    (lambda: tnp.hvp(lambda a: a, (X,), (X,)), "hvp: .* must return a real floating"),
    (lambda: tnp.hvp(_cube_sum, ("a",), (X,)), "hvp: expected an array or a number"),
    (lambda: tnp.jvp(_cube_sum, ("a",), (X,)), "jvp: expected an array or a number"),
    (lambda: tnp.jvp(_cube_sum, (1.0,), ("a",)), "jvp: expected an array or a number"),
    (lambda: tnp.vjp(_cube_sum, iter([X])), "vjp: expected an array or a number"),
])
def test_argument_errors_of_hvp_jvp_and_vjp_name_the_transform_called(call, message) -> None:
    # Was wrong: hvp's argument errors named jvp or grad (the transforms it runs on), and
    # a non-array primal or tangent of jvp / vjp / hvp raised "expected an array or a
    # number, got str" naming no transform at all (grad and the Jacobians named theirs)
    with pytest.raises(tidu.TiduError, match=f"^{message}"):
        call()
