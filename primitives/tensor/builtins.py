"""autograd's ``autograd.builtins`` (``tuple``, ``list``, ``dict``): containers that carry
derivatives. tidu's transforms take Python's own containers as pytrees, so these are
Python's own, kept so that ported autograd programs need only their imports changed.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> float(tnp.grad(lambda x: tnp.sum(tuple((x, 2 * x))[1]))(np.array(1.0)))
2.0
"""

import builtins

tuple = builtins.tuple
list = builtins.list
dict = builtins.dict

__all__ = ["tuple", "list", "dict"]
