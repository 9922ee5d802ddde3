"""The eager front end (PyTorch's): ``Tensor`` records each op it runs, ``backward`` walks
the record through :class:`NumpyExecutor` (a ``tidu.eager.BackwardExecutor``).

Room: above the transforms (``checkpoint`` traces its block with
:func:`..transforms.make_graph`); modules ``executor`` (the engine: how the tensor set runs
backward), ``frontend`` (``Tensor``, ``Gradients``, ``tensor``, ``checkpoint``) and
``strategy`` (``checkpoint_strategy``, ``set_checkpoint_strategy``: what recorded ops keep)
and ``grad_mode`` (``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``is_grad_enabled``:
whether ops are recorded).

>>> import numpy as np
>>> from primitives.tensor.eager import NumpyExecutor, tensor
>>> x = tensor(np.array([1.0, 2.0]), requires_grad=True)
>>> (x * x).sum().backward().grad(x)
array([2., 4.])
>>> isinstance(NumpyExecutor(), NumpyExecutor)
True
"""

from primitives.tensor.eager.executor import ImmediateNumpyBuilder, NumpyExecutor
from primitives.tensor.eager.frontend import Gradients, Tensor, checkpoint, tensor
from primitives.tensor.eager.grad_mode import (enable_grad, is_grad_enabled, no_grad,
                                               set_grad_enabled)
from primitives.tensor.eager.strategy import checkpoint_strategy, set_checkpoint_strategy

__all__ = ["Gradients", "ImmediateNumpyBuilder", "NumpyExecutor", "Tensor", "checkpoint",
           "checkpoint_strategy", "enable_grad", "is_grad_enabled", "no_grad",
           "set_checkpoint_strategy", "set_grad_enabled", "tensor"]
