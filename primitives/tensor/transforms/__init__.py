"""The functional transforms (JAX's): ``grad``, ``jvp``, ``vjp``, the Jacobians, ``jit``,
``vmap``, ``custom_jvp``/``custom_vjp``, ``ravel_pytree``, ``eval_shape``; and
``make_graph``, the traced graph they all start from.

Room: above the NumPy surface (:mod:`..numpy`) and the primitives (:mod:`..ops`); below
the eager ``Tensor`` (:mod:`..eager`), which uses ``make_graph`` for ``checkpoint``. Its
modules, lowest first: ``pytree``, ``fresh``, ``run`` (the one place a graph runs),
``closure``, ``functional`` (the trace and the differentiation transforms), ``vmap``,
``vectorize`` (NumPy's ``vectorize``, by ``vmap``), ``jit``, ``custom``, ``flatten``,
``shapes`` (``eval_shape``).

>>> import numpy as np
>>> from primitives.tensor import transforms
>>> traced = transforms.make_graph(lambda x: x * 2.0, np.ones(2))
>>> len(traced.graph.operation_keys)
1
"""

from primitives.tensor.transforms.functional import (
    FunctionalError,
    grad,
    hessian,
    hvp,
    jacfwd,
    jacobian,
    jacrev,
    jvp,
    linearize,
    make_graph,
    value_and_grad,
    vjp,
)
from primitives.tensor.transforms.vmap import vmap
from primitives.tensor.transforms.vectorize import vectorize
from primitives.tensor.transforms.jit import jit
from primitives.tensor.transforms.custom import custom_jvp, custom_vjp
from primitives.tensor.transforms.flatten import ravel_pytree
from primitives.tensor.transforms.shapes import ShapeDtypeStruct, eval_shape

__all__ = ["FunctionalError", "ShapeDtypeStruct", "custom_jvp", "custom_vjp", "eval_shape",
           "grad", "hessian", "hvp", "jacfwd", "jacobian", "jacrev", "jit", "jvp", "linearize",
           "make_graph", "ravel_pytree", "value_and_grad", "vectorize", "vjp", "vmap"]
