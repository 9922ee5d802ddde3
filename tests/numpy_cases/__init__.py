"""The NumPy-named functions of ``primitives.tensor``, each on sample inputs: one table.

Every :class:`Case` is run by ``tests/test_numpy_functions.py`` in every way its
fields declare (forward against NumPy, JVP against finite differences, the
dot-product test of the VJP, the eager ``Tensor`` against the VJP, second order),
and the docs page "NumPy coverage" is generated from the same table
(``docs/hooks/numpy_coverage.py``), so the page states what the tests check.

A family of functions keeps its cases in a module of this package (``elementwise``,
``statistics``, ...) as a list named ``CASES``; :func:`all_cases` collects them.

>>> case = Case("exp", lambda x: tnp.exp(x), np.exp, (normal((2, 3)),))
>>> case.id
'exp'
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import primitives.tensor as tnp  # noqa: F401  (the doctest uses it)

ALL_DTYPES = ("float64", "float32", "complex128")
REAL_DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class Case:
    """One NumPy-named function called on sample inputs.

    ``fn`` takes the inputs (arrays, tensors or traced values) and returns an array
    or a tuple/list of arrays; ``reference`` is NumPy's computation on the same
    NumPy arrays. ``inputs`` are factories ``(rng, dtype) -> np.ndarray`` (see
    :func:`normal` and friends). ``wrt`` names the differentiated inputs (empty:
    the function has no derivative, e.g. ``argsort``, and only its forward values
    are checked). ``dtypes`` are the input dtypes tried; ``second_order=False``
    skips the second-order check (say why in ``note``). ``note`` is the gradient
    convention shown in the docs (ties, non-differentiable points, complex).
    ``label`` tells several cases of one function apart. ``jit=False`` skips the forward
    check under ``jit``, for functions that read their arguments' values (say why in
    ``note``).
    """

    name: str
    fn: Callable
    reference: Callable
    inputs: tuple
    wrt: tuple = (0,)
    dtypes: tuple = ALL_DTYPES
    second_order: bool = True
    note: str = ""
    label: str = ""
    rtol: float = 1e-6           # first/second-order checks in float64 (loosened for float32)
    jit: bool = True
    options: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.name}[{self.label}]" if self.label else self.name

    def sample(self, dtype, seed: int = 0) -> list:
        """The inputs drawn for ``dtype`` (the same arrays for the same seed)."""
        rng = np.random.default_rng(seed)
        return [make(rng, dtype) for make in self.inputs]

    def restricted(self, args: list) -> Callable:
        """``fn`` as a function of the differentiated inputs (``wrt``), the others ``args``'s."""
        def f(*diff):
            full = list(args)
            for i, v in zip(self.wrt, diff):
                full[i] = v
            return self.fn(*full)
        return f


# --- input factories: (rng, dtype) -> array -------------------------------------------------

def _draw(rng, shape, dtype, low=None, high=None):
    dtype = np.dtype(dtype)

    def part():
        if low is None:
            return rng.standard_normal(shape)
        return rng.uniform(low, high, shape)
    x = part()
    if dtype.kind == "c":
        x = x + 1j * part()
    return np.asarray(x).astype(dtype)


def normal(shape):
    """Standard-normal values (complex: both parts)."""
    return lambda rng, dtype: _draw(rng, shape, dtype)


def uniform(shape, low, high):
    """Values uniform in ``[low, high)`` (complex: both parts)."""
    return lambda rng, dtype: _draw(rng, shape, dtype, low, high)


def positive(shape):
    """Values in ``[0.5, 2)`` (complex: both parts)."""
    return uniform(shape, 0.5, 2.0)


def distinct(shape):
    """Real values with well-separated entries (no ties anywhere), shuffled."""
    def make(rng, dtype):
        n = int(np.prod(shape))
        values = (np.arange(n) - n / 2) * 0.37 + rng.uniform(-0.05, 0.05, n)
        return rng.permutation(values).reshape(shape).astype(dtype)
    return make


def spd(n, batch=()):
    """Symmetric (Hermitian) positive definite ``n × n`` matrices, well conditioned."""
    def make(rng, dtype):
        a = _draw(rng, batch + (n, n), dtype)
        return (a @ np.conj(np.swapaxes(a, -1, -2)) / n + np.eye(n)).astype(dtype)
    return make


def fixed(value):
    """The same array every time (cast to the case's dtype)."""
    return lambda rng, dtype: np.asarray(value).astype(dtype)


def all_cases() -> list[Case]:
    """Every module's ``CASES``, in module order."""
    cases = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        cases.extend(getattr(module, "CASES", []))
    return cases
