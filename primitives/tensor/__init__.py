"""A NumPy tensor primitive set with an eager ``Tensor`` and functional transforms.

``primitives.tensor`` (``tnp``) is NumPy's namespace with derivatives, JAX's
transforms, PyTorch's eager ``Tensor``, and the libraries around them. The
package is built in rooms, each importing only the rooms below it
(docs/architecture.md has the picture):

- ``errors``, ``backends``, ``buffers``, ``memory``, ``core``: the floor (array
  libraries, buffers, ``bind``);
- ``ops``: the primitives, modelled on ``jax.lax``, with their rules;
- ``numpy``: NumPy's names, lowered to the primitives;
- ``transforms``: ``grad``, ``jvp``, ``vjp``, the Jacobians, ``jit``, ``vmap``,
  custom rules;
- ``eager``: ``Tensor`` and the ``NumpyExecutor`` its backward runs through;
- ``autograd``, ``nn``, ``optim``, ``random``, ``scipy``, ``misc``, ``odeint``,
  ``fixed_point``, ``tree_util``/``tree`` (JAX's pytree functions): libraries on top;
- this face, which exports their public names.

>>> import numpy as np
>>> from primitives import tensor as tnp
>>> x = tnp.tensor(np.array([0.0, 1.0]), requires_grad=True)
>>> tnp.sum(tnp.exp(x)).backward().grad(x)
array([1.        , 2.71828183])
>>> tnp.grad(lambda v: tnp.sum(tnp.exp(v)))(np.array([0.0, 1.0]))
array([1.        , 2.71828183])
"""

import importlib
import warnings

from primitives.tensor.errors import (
    BackwardError,
    ConcretizationError,
    SolverError,
    TensorAttributeError,
    TensorAxisError,
    TensorIndexError,
    TensorNotSupportedError,
    TensorOverflowError,
    TensorShapeError,
    TensorTypeError,
)
from primitives.tensor.buffers import release_cached_arrays, set_cache_limit
from primitives.tensor.memory import retain_freed_memory
# NumPy's namespace: every family's names and the submodules linalg and fft; the family
# modules stay reachable as tnp.<family>.
from primitives.tensor import numpy
from primitives.tensor.numpy import *                                    # noqa: F401,F403
from primitives.tensor.numpy import (creation, manipulation, mathfuncs, products,  # noqa: F401
                                     reductions)
from primitives.tensor.transforms import (
    FunctionalError,
    ShapeDtypeStruct,
    custom_jvp,
    custom_vjp,
    eval_shape,
    grad,
    hessian,
    hvp,
    jacfwd,
    jacobian,
    jacrev,
    jit,
    jvp,
    linearize,
    make_graph,
    ravel_pytree,
    value_and_grad,
    vectorize,
    vjp,
    vmap,
)
from primitives.tensor.transforms.checkpoint import with_static_args
from primitives.tensor.eager import (Gradients, Tensor, checkpoint_strategy, enable_grad,
                                     is_grad_enabled, no_grad, set_checkpoint_strategy,
                                     set_grad_enabled, tensor)
from primitives.tensor.eager import checkpoint as _eager_checkpoint
from primitives.tensor import autograd, lax, nn, optim, random, tree, tree_util
from primitives.tensor.ode import odeint
from primitives.tensor.fixedpoint import fixed_point

# JAX's checkpoint (static_argnums, static_argnames) over the eager one; remat its JAX alias
checkpoint = remat = with_static_args(_eager_checkpoint, FunctionalError)

__all__ = [
    "BackwardError", "ConcretizationError", "SolverError", "TensorAttributeError",
    "TensorAxisError", "TensorIndexError", "TensorNotSupportedError", "TensorOverflowError",
    "TensorShapeError", "TensorTypeError",
    "release_cached_arrays", "retain_freed_memory", "set_cache_limit",
    "FunctionalError", "ShapeDtypeStruct", "custom_jvp", "custom_vjp", "eval_shape", "grad",
    "hessian", "hvp", "jacfwd", "jacobian", "jacrev", "jit", "jvp", "linearize", "make_graph",
    "ravel_pytree", "value_and_grad", "vectorize", "vjp", "vmap",
    "Gradients", "Tensor", "checkpoint", "remat", "checkpoint_strategy",
    "set_checkpoint_strategy",
    "tensor", "enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled",
    "autograd", "fixed_point", "lax", "nn", "odeint", "optim", "random", "tree", "tree_util",
    *numpy.__all__,
]

# Engine pieces, at home in their rooms since the floor plan; the old names work one more
# release, with a DeprecationWarning.
_MOVED = {
    "NumpyExecutor": "primitives.tensor.eager",
    "ImmediateNumpyBuilder": "primitives.tensor.eager",
}


def __getattr__(name: str):
    """``tnp.scipy`` on first use (SciPy is an optional dependency); the moved engine names
    with a ``DeprecationWarning``."""
    if name == "scipy":
        return importlib.import_module("primitives.tensor.scipy")
    home = _MOVED.get(name)
    if home is not None:
        warnings.warn(f"primitives.tensor.{name} moved to {home}.{name}; the old name goes "
                      "in the next release", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(home), name)
    raise AttributeError(f"module 'primitives.tensor' has no attribute {name!r}")
