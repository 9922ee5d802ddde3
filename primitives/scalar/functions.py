"""The scalar set's functions, defined once for numbers, traced scalars and eager ``Scalar``s.

A value that knows how to apply an op to itself (``apply_op``: the tracer adds it
to a graph, the eager ``Scalar`` runs and records it) gets that; a plain number
is evaluated directly.

>>> sin(0.0), sincos(0.0)
(0.0, (0.0, 1.0))
"""

from __future__ import annotations

from primitives.scalar.ops import ScalarOp


def _function(op: ScalarOp):
    def fn(x):
        apply_op = getattr(x, "apply_op", None)
        if apply_op is not None:
            return apply_op(op)
        results = op.eval(None, [x])
        return results[0] if len(results) == 1 else tuple(results)
    fn.__name__ = fn.__qualname__ = op.name.lower()
    fn.__doc__ = (f"``{op.name.lower()}(x)`` on a number, a traced scalar or an eager "
                  "``Scalar``.")
    return fn


exp = _function(ScalarOp.EXP)
log = _function(ScalarOp.LOG)
sin = _function(ScalarOp.SIN)
cos = _function(ScalarOp.COS)
sincos = _function(ScalarOp.SINCOS)
sqrt = _function(ScalarOp.SQRT)
tanh = _function(ScalarOp.TANH)
conj = _function(ScalarOp.CONJ)
real = _function(ScalarOp.REAL)
imag = _function(ScalarOp.IMAG)
sign = _function(ScalarOp.SIGN)
# |x| is Python's abs(x): Scalar and ScalarTracer define __abs__ (ScalarOp.ABS).
