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
    TensorNotSupportedError,
    TensorShapeError,
    abs,
    absolute,
    add,
    amax,
    amin,
    astype,
    broadcast_to,
    concatenate,
    conj,
    conjugate,
    cos,
    divide,
    dot,
    dot_general,
    einsum,
    equal,
    exp,
    expand_dims,
    getitem,
    greater,
    greater_equal,
    imag,
    less,
    less_equal,
    log,
    logsumexp,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    multiply,
    negative,
    not_equal,
    outer,
    pad,
    power,
    real,
    reshape,
    sign,
    sin,
    sqrt,
    squeeze,
    stack,
    stop_gradient,
    subtract,
    sum,
    take,
    tanh,
    tensordot,
    transpose,
    where,
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
