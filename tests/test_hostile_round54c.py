"""Hostile round 54c: tidu.batch, tidu.compile and the scalar set at their edges; each test
failed before its fix."""

import numpy as np
import pytest

from primitives.scalar import real
from primitives.scalar.eager import Scalar


# A NumPy complex value in a Scalar (np.complex128, a subclass of complex, or np.complex64,
# which is not) was taken for real: meeting a real Scalar it was not promoted with
# TO_COMPLEX, so the real input's gradient came back complex with a nonzero imaginary part
# (13.2+2.4j instead of 13.2), and real()/imag() of it raised from TO_COMPLEX.
@pytest.mark.parametrize("kind", [np.complex128, np.complex64])
def test_numpy_complex_scalar_keeps_a_real_inputs_gradient_real(kind):
    expected = {}
    for make in (complex, kind):
        z = Scalar(make(1 + 2j), requires_grad=True)
        w = Scalar(3.0, requires_grad=True)
        grads = abs(z * w * w + z + z * z).backward()
        expected.setdefault("w", grads[w.key])
        expected.setdefault("z", grads[z.key])
        assert not isinstance(grads[w.key], complex)
        assert grads[w.key] == pytest.approx(expected["w"])
        assert grads[z.key] == pytest.approx(expected["z"])
        assert real(z * w).backward()[w.key] == 1.0


# The same through a complex exponent: x ** np.complex128(0.5j) made a result whose data was
# NumPy's complex, which the frontend's hot paths (type(data) is complex) took for real.
@pytest.mark.parametrize("kind", [np.complex128, np.complex64])
def test_a_numpy_complex_exponent_gives_the_python_complex_ones_gradients(kind):
    grads = {}
    for make in (complex, kind):
        x, w = Scalar(1.5, requires_grad=True), Scalar(2.0, requires_grad=True)
        power = x ** make(0.5j)
        assert type(power.data) is complex
        got = abs(power * w + w).backward()
        grads[make] = (got[x.key], got[w.key])
    assert grads[kind] == pytest.approx(grads[complex])
    assert not any(isinstance(g, complex) for g in grads[kind])


# bool() of a Scalar was always True (object's default), so `if x:` or `x or default` took
# the wrong branch for Scalar(0.0); bool() of a value trace_scalar traces was always True
# too, so `lambda x: x if x else -x` silently traced one branch for every input.
def test_bool_of_a_scalar_is_the_numbers_and_a_tracer_refuses():
    from primitives.scalar import ScalarTypeError, trace_scalar

    assert not Scalar(0.0, requires_grad=True) and not Scalar(0j) and Scalar(-2.0)
    with pytest.raises(ScalarTypeError, match="bool.*trace_scalar"):
        trace_scalar(lambda x: x if x else -x, ["x"])
