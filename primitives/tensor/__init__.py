"""A NumPy tensor primitive set with an eager ``Tensor`` and functional transforms.

>>> import numpy as np
>>> from primitives import tensor as tnp
>>> x = tnp.tensor(np.array([0.0, 1.0]), requires_grad=True)
>>> tnp.sum(tnp.exp(x)).backward().grad(x)
array([1.        , 2.71828183])
>>> tnp.grad(lambda v: tnp.sum(tnp.exp(v)))(np.array([0.0, 1.0]))
array([1.        , 2.71828183])
"""

from primitives.tensor.errors import (
    BackwardError,
    ConcretizationError,
    SolverError,
    TensorAxisError,
    TensorIndexError,
    TensorNotSupportedError,
    TensorShapeError,
    TensorTypeError,
)
# NumPy's namespace (primitives.tensor.numpy): every family's names, and the submodules
# linalg and fft; the family modules stay reachable as tnp.<family>.
from primitives.tensor import numpy
from primitives.tensor.numpy import *                # noqa: F401,F403
from primitives.tensor.numpy import creation, manipulation, mathfuncs  # noqa: F401
from primitives.tensor.numpy import products, reductions  # noqa: F401
from primitives.tensor.eager.frontend import Gradients, Tensor, checkpoint, tensor
from primitives.tensor import autograd
from primitives.tensor.eager.executor import ImmediateNumpyBuilder, NumpyExecutor
from primitives.tensor.memory import retain_freed_memory
from primitives.tensor.buffers import release_cached_arrays, set_cache_limit
from primitives.tensor.transforms.jit import jit
from primitives.tensor.transforms.functional import (
    FunctionalError,
    grad,
    hessian,
    hvp,
    jacfwd,
    jacobian,
    jacrev,
    jvp,
    make_graph,
    value_and_grad,
    vjp,
)
from primitives.tensor.transforms.custom import custom_jvp, custom_vjp
from primitives.tensor.transforms.vmap import vmap
from primitives.tensor.transforms.vectorize import vectorize
from primitives.tensor.ode import odeint
from primitives.tensor.fixedpoint import fixed_point
from primitives.tensor import nn, optim, random
from primitives.tensor.transforms.flatten import ravel_pytree

__all__ = [
    "retain_freed_memory",
    "release_cached_arrays",
    "set_cache_limit",
    "ConcretizationError",
    "SolverError",
    "TensorAxisError",
    "TensorNotSupportedError",
    "TensorIndexError",
    "TensorShapeError",
    "TensorTypeError",
    "BackwardError",
    "Gradients",
    "Tensor",
    "autograd",
    "checkpoint",
    "tensor",
    "ImmediateNumpyBuilder",
    "NumpyExecutor",
    "FunctionalError",
    "custom_jvp",
    "custom_vjp",
    "grad",
    "hessian",
    "hvp",
    "jacfwd",
    "jacobian",
    "jacrev",
    "jit",
    "jvp",
    "make_graph",
    "value_and_grad",
    "vjp",
    "vmap",
    "vectorize",
    "odeint",
    "fixed_point",
    "nn",
    "optim",
    "random",
    "ravel_pytree",
]
__all__ += numpy.__all__


def __getattr__(name: str):
    """``tnp.scipy`` on first use: SciPy is an optional dependency, imported only then."""
    if name == "scipy":
        import importlib

        return importlib.import_module("primitives.tensor.scipy")
    raise AttributeError(f"module 'primitives.tensor' has no attribute {name!r}")
