"""What HIPS autograd keeps in ``autograd.misc``: ``flatten`` and the loop-style optimizers
(:mod:`.optimizers`), so autograd programs port by changing their imports.

>>> import numpy as np
>>> flat, unflatten = flatten({"w": np.ones(2), "b": np.array(3.0)})
>>> flat.tolist(), unflatten(flat)["b"]
([3.0, 1.0, 1.0], array(3.))
"""

from primitives.tensor.transforms.flatten import ravel_pytree as flatten
from primitives.tensor.misc import optimizers

__all__ = ["flatten", "optimizers"]
