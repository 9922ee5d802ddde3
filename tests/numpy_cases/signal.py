"""Cases for ``scipy.signal.convolve`` and ``correlate`` (``primitives.tensor.scipy.signal``), with
SciPy's own functions as the reference."""

import scipy.signal

from primitives.tensor.scipy import signal
from numpy_cases import Case, normal

NOTE = ("bilinear: differentiable in both inputs (im2col: one gather and one product); "
        "correlate conjugates in2, as SciPy")


def _pair(name, mode, method="direct"):
    ours, theirs = getattr(signal, name), getattr(scipy.signal, name)
    return (lambda a, b: ours(a, b, mode, method)), (lambda a, b: theirs(a, b, mode, method))


CASES = [
    *[Case(f"scipy.signal.{name}", *_pair(name, mode), shapes, wrt=(0, 1), label=f"{mode} {label}",
           note=NOTE)
      for name in ("convolve", "correlate")
      for mode in ("full", "same", "valid")
      for label, shapes in (("1-d", (normal((7,)), normal((4,)))),
                            ("2-d", (normal((4, 5)), normal((2, 3)))))],
    Case("scipy.signal.convolve", *_pair("convolve", "valid"), (normal((2, 3)), normal((4, 5))),
         wrt=(0, 1), label="valid, in2 larger", note=NOTE),
    Case("scipy.signal.correlate", *_pair("correlate", "same"), (normal((3,)), normal((6,))),
         wrt=(0, 1), label="same, in2 larger", note=NOTE),
    Case("scipy.signal.convolve", *_pair("convolve", "same", "fft"),
         (normal((3, 4)), normal((2, 2))), wrt=(0, 1), label="same fft", note=NOTE),
    Case("scipy.signal.correlate", *_pair("correlate", "full", "fft"),
         (normal((5,)), normal((3,))), wrt=(0, 1), label="full fft", note=NOTE),
]
