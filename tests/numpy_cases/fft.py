"""Cases for ``primitives.tensor.numpy.fft`` (``tnp.fft.X`` against ``np.fft.X``)."""

import numpy as np

import primitives.tensor as tnp
from numpy_cases import REAL_DTYPES, Case, normal, positive

COMPLEX_NOTE = ("linear; reverse mode is the adjoint under Re<a, b> (ifft with the opposite "
                "norm), the conjugate of JAX's")
REAL_NOTE = ("real input, real gradient: each half-spectrum bin but DC and Nyquist counts "
             "twice in the adjoint")
IRFFT_NOTE = ("the imaginary parts of the DC and Nyquist bins are ignored, as in NumPy: "
              "their gradient is zero")


def _case(name, call, inputs, label="", dtypes=("float64", "float32", "complex128"), note=""):
    """``tnp.fft.<name>`` and ``np.fft.<name>`` called alike by ``call(module, a)``."""
    return Case(f"fft.{name}", lambda a: call(tnp.fft, a), lambda a: call(np.fft, a),
                inputs, dtypes=dtypes, note=note, label=label)


CASES = [
    _case("fft", lambda m, x: m.fft(x), (normal((2, 5)),), note=COMPLEX_NOTE),
    _case("fft", lambda m, x: m.fft(x, n=8, axis=0, norm="ortho"), (normal((3, 2)),),
          label="n-pad-ortho"),
    _case("fft", lambda m, x: m.fft(x, n=3, norm="forward"), (normal((2, 6)),),
          label="n-truncate-forward"),
    _case("ifft", lambda m, x: m.ifft(x), (normal((4, 3)),), note=COMPLEX_NOTE),
    _case("ifft", lambda m, x: m.ifft(x, 7, 0, "ortho"), (normal((4, 3)),), label="n-ortho"),
    _case("rfft", lambda m, x: m.rfft(x), (normal((3, 6)),), dtypes=REAL_DTYPES,
          note=REAL_NOTE),
    _case("rfft", lambda m, x: m.rfft(x, n=7, axis=0, norm="ortho"), (normal((5, 2)),),
          dtypes=REAL_DTYPES, label="odd-n-pad"),
    _case("rfft", lambda m, x: m.rfft(x, n=4, norm="forward"), (normal((2, 7)),),
          dtypes=REAL_DTYPES, label="even-n-truncate"),
    _case("irfft", lambda m, x: m.irfft(x), (normal((2, 4)),), note=IRFFT_NOTE),
    _case("irfft", lambda m, x: m.irfft(x, n=7, axis=0), (normal((4, 3)),), label="odd-n"),
    _case("irfft", lambda m, x: m.irfft(x, n=4, norm="ortho"), (normal((2, 5)),),
          label="truncate-ortho"),
    _case("irfft", lambda m, x: m.irfft(x, n=9, norm="forward"), (normal((3,)),),
          label="pad-forward"),
    _case("hfft", lambda m, x: m.hfft(x), (normal((2, 4)),)),
    _case("hfft", lambda m, x: m.hfft(x, n=5, norm="ortho"), (normal((3,)),), label="odd-n"),
    _case("ihfft", lambda m, x: m.ihfft(x), (normal((2, 5)),), dtypes=REAL_DTYPES),
    _case("ihfft", lambda m, x: m.ihfft(x, n=4, norm="forward"), (normal((6,)),),
          dtypes=REAL_DTYPES, label="even-n"),
    _case("fft2", lambda m, x: m.fft2(x), (normal((2, 3, 4)),), note=COMPLEX_NOTE),
    _case("fft2", lambda m, x: m.fft2(x, s=(4, 2), axes=(0, 2), norm="ortho"),
          (normal((3, 2, 3)),), label="s-axes"),
    _case("ifft2", lambda m, x: m.ifft2(x), (normal((3, 4)),), note=COMPLEX_NOTE),
    _case("fftn", lambda m, x: m.fftn(x), (normal((2, 3, 2)),), note=COMPLEX_NOTE),
    _case("fftn", lambda m, x: m.fftn(x, s=(5, -1), axes=(2, 0), norm="forward"),
          (normal((2, 1, 3)),), label="s-axes"),
    _case("fftn", lambda m, x: m.fftn(x, s=(4, 3), axes=(1, 1)), (normal((2, 3)),),
          label="repeated-axis"),
    _case("ifftn", lambda m, x: m.ifftn(x, axes=(0, 1), norm="ortho"), (normal((3, 2, 2)),),
          note=COMPLEX_NOTE),
    _case("rfft2", lambda m, x: m.rfft2(x), (normal((3, 4)),), dtypes=REAL_DTYPES,
          note=REAL_NOTE),
    _case("irfft2", lambda m, x: m.irfft2(x), (normal((3, 3)),), note=IRFFT_NOTE),
    _case("rfftn", lambda m, x: m.rfftn(x, s=(3, 5), axes=(2, 0), norm="ortho"),
          (normal((4, 2, 3)),), dtypes=REAL_DTYPES, note=REAL_NOTE),
    _case("rfftn", lambda m, x: m.rfftn(x, axes=(0, 1, 0)), (normal((2, 4)),),
          dtypes=REAL_DTYPES, label="repeated-axis"),
    _case("irfftn", lambda m, x: m.irfftn(x, s=(3, 6), axes=(1, 0)), (normal((4, 2)),),
          note=IRFFT_NOTE),
    _case("irfftn", lambda m, x: m.irfftn(x, axes=(1, 0, 1), norm="forward"),
          (normal((3, 2)),), label="repeated-axis"),
    _case("fftshift", lambda m, x: m.fftshift(x), (normal((3, 4)),)),
    _case("fftshift", lambda m, x: m.fftshift(x, axes=(1, 1)), (normal((2, 5)),),
          label="repeated-axis"),
    _case("ifftshift", lambda m, x: m.ifftshift(x, axes=0), (normal((5, 2)),)),
    Case("fft.fftfreq", lambda d: tnp.fft.fftfreq(5, d), lambda d: np.fft.fftfreq(5, d),
         (positive(()),), dtypes=("float64",), note="differentiable in the spacing d"),
    Case("fft.rfftfreq", lambda d: tnp.fft.rfftfreq(6, d), lambda d: np.fft.rfftfreq(6, d),
         (positive(()),), dtypes=("float64",), note="differentiable in the spacing d"),
]
