"""The package's face: NumPy's names and the transforms; engine pieces in their rooms, the old
names one release more with a DeprecationWarning; every name of shared/API.md works."""

import warnings

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import eager, transforms


@pytest.mark.parametrize("name, home", [("NumpyExecutor", eager),
                                        ("ImmediateNumpyBuilder", eager)])
def test_a_moved_engine_name_warns_and_is_the_same_object(name, home):
    with pytest.warns(DeprecationWarning, match=f"{name} moved to {home.__name__}.{name}"):
        old = getattr(tnp, name)
    assert old is getattr(home, name)
    assert name not in tnp.__all__
    with pytest.warns(DeprecationWarning):
        exec(f"from primitives.tensor import {name}", {})


API_NAMES = [  # shared/API.md, the primitives.tensor names
    "tensor", "Tensor", "Gradients", "exp", "log", "sin", "cos", "tanh", "sqrt", "abs", "maximum",
    "where", "sum", "mean", "max", "reshape", "transpose", "broadcast_to", "matmul", "einsum",
    "concatenate", "logsumexp", "conj", "real", "imag", "grad", "value_and_grad", "jvp", "vjp",
    "hvp", "jit", "jacfwd", "jacrev", "jacobian", "hessian", "vmap", "custom_jvp", "custom_vjp",
    "release_cached_arrays", "set_cache_limit", "retain_freed_memory", "checkpoint",
    "stop_gradient", "prod", "var", "std", "cumsum", "cumprod", "diff", "sort", "clip", "kron",
    "cross", "inner", "linalg", "fft", "random", "nn", "optim", "autograd", "make_graph",
]


def test_every_api_name_works_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in API_NAMES:
            assert getattr(tnp, name) is not None, name
        assert callable(tnp.autograd.grad) and callable(tnp.linalg.solve)
        assert callable(tnp.fft.rfft) and callable(tnp.optim.adam)
        x = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
        assert tnp.autograd.grad(tnp.sum(x * x), [x])[0].tolist() == [2.0, 4.0]
    # make_graph is listed there for primitives.tensor: it stays, not a moved engine name
    assert tnp.make_graph is transforms.make_graph and "make_graph" in tnp.__all__


def test_the_face_exports_each_name_once_and_every_name_it_lists():
    assert len(tnp.__all__) == len(set(tnp.__all__))
    missing = [name for name in tnp.__all__ if not hasattr(tnp, name)]
    assert not missing
