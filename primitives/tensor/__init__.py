"""A NumPy tensor primitive set with an eager ``Tensor`` and functional transforms.

>>> import numpy as np
>>> from primitives import tensor as tnp
>>> x = tnp.tensor(np.array([0.0, 1.0]), requires_grad=True)
>>> tnp.sum(tnp.exp(x)).backward().grad(x)
array([1.        , 2.71828183])
>>> tnp.grad(lambda v: tnp.sum(tnp.exp(v)))(np.array([0.0, 1.0]))
array([1.        , 2.71828183])
"""

from primitives.tensor.api import (
    TensorShapeError,
    add,
    astype,
    broadcast_to,
    conj,
    conjugate,
    cos,
    divide,
    exp,
    log,
    mean,
    multiply,
    negative,
    power,
    reshape,
    sin,
    sqrt,
    subtract,
    sum,
    tanh,
    transpose,
)
from primitives.tensor.eager import BackwardError, Gradients, Tensor, checkpoint, tensor
from primitives.tensor.executor import ImmediateNumpyBuilder, NumpyExecutor
from primitives.tensor.functional import (
    FunctionalError,
    grad,
    hvp,
    jvp,
    trace,
    value_and_grad,
    vjp,
)
