"""Round 57d: dtype arguments and small misuse errors of the NumPy layer (any library's dtype
where NumPy takes a dtype, NumPy's ``dtype=``/``casting=`` of ``concatenate``/``stack``/
``einsum``, ``out=`` of the elementwise functions, PyTorch tensors that require grad as
``q``/``constant_values``, booleans in ``power`` and ``round``); each test failed before its
fix."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import TensorTypeError

X = np.array([0.5, 2.0, -1.25])


def _torch():
    return pytest.importorskip("torch", reason="PyTorch's dtypes and tensors as arguments")


# the dtype= of these functions (NumPy's own, or reading it with np.dtype) refused torch.float32
DTYPE_CALLS = {
    "asarray": lambda d: tnp.asarray([1.0, 2.0], dtype=d),
    "array": lambda d: tnp.array([1.0, 2.0], dtype=d),
    "zeros": lambda d: tnp.zeros(2, dtype=d),
    "ones": lambda d: tnp.ones(2, d),
    "full": lambda d: tnp.full(2, 1.5, dtype=d),
    "empty": lambda d: tnp.empty((1, 2), dtype=d),
    "eye": lambda d: tnp.eye(2, 2, 0, d),
    "identity": lambda d: tnp.identity(2, dtype=d),
    "arange": lambda d: tnp.arange(3, dtype=d),
    "linspace": lambda d: tnp.linspace(0.0, 1.0, 3, dtype=d),
    "logspace": lambda d: tnp.logspace(0.0, 1.0, 3, dtype=d),
    "geomspace": lambda d: tnp.geomspace(1.0, 2.0, 3, True, d),
    "tri": lambda d: tnp.tri(2, dtype=d),
    "zeros_like": lambda d: tnp.zeros_like(X, dtype=d),
    "ones_like": lambda d: tnp.ones_like(X, dtype=d),
    "full_like": lambda d: tnp.full_like(X, 2.5, dtype=d),
    "empty_like": lambda d: tnp.empty_like(X, dtype=d),
    "prod": lambda d: tnp.prod(X, dtype=d),
    "cumsum": lambda d: tnp.cumsum(X, dtype=d),
    "cumprod": lambda d: tnp.cumprod(X, dtype=d),
    "cumulative_sum": lambda d: tnp.cumulative_sum(X, dtype=d),
    "var": lambda d: tnp.var(X, dtype=d),
    "std": lambda d: tnp.std(X, dtype=d),
    "nansum": lambda d: tnp.nansum(X, dtype=d),
    "nancumsum": lambda d: tnp.nancumsum(X, dtype=d),
}


@pytest.mark.parametrize("name", list(DTYPE_CALLS))
def test_any_library_dtype_where_numpy_takes_a_dtype(name):
    torch = _torch()
    got = DTYPE_CALLS[name](torch.float32)
    want = DTYPE_CALLS[name](np.float32)
    assert got.dtype == np.float32 and type(got) is type(want)
    np.testing.assert_array_equal(got, want) if name not in ("empty", "empty_like") else None


# an unknown dtype was NumPy's TypeError (or worse), not a TensorTypeError naming the function
@pytest.mark.parametrize("name", list(DTYPE_CALLS))
@pytest.mark.parametrize("bad", ["bfloat16", object()], ids=["bfloat16", "object"])
def test_unknown_dtype_is_a_tensor_type_error_naming_the_function(name, bad):
    with pytest.raises(TensorTypeError, match=rf"^{name}: dtype .* is not supported"):
        DTYPE_CALLS[name](bad)


# NumPy's dtype utilities (re-exported) refused PyTorch's dtypes
def test_dtype_utilities_take_any_library_dtype():
    torch = _torch()
    assert tnp.result_type(torch.float32, np.int8, 1.0) == np.float32
    assert tnp.promote_types(torch.float16, torch.int16) == np.float32
    assert tnp.can_cast(torch.float32, np.float64) and not tnp.can_cast(torch.float64,
                                                                           torch.float32)
    assert tnp.finfo(torch.float32).eps == np.finfo(np.float32).eps
    assert tnp.iinfo(torch.int16).max == np.iinfo(np.int16).max
    assert tnp.issubdtype(torch.float32, np.floating) and not tnp.issubdtype(torch.int8,
                                                                              np.floating)
    assert tnp.isdtype(torch.float32, "real floating") and not tnp.isdtype(torch.int8, "bool")
    # NumPy's own arguments as ever: abstract types, kinds, arrays, Python numbers
    assert tnp.issubdtype(np.float32, np.floating) and tnp.result_type(X, 1j) == np.complex128
    assert tnp.isdtype(np.int8, ("integral", "bool"))
    for fn, call in [("result_type", lambda: tnp.result_type("bfloat16", X)),
                     ("finfo", lambda: tnp.finfo(torch.bfloat16)),
                     ("can_cast", lambda: tnp.can_cast(np.float32, object()))]:
        with pytest.raises(TensorTypeError, match=f"^{fn}: "):
            call()
