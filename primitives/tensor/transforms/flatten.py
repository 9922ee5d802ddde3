"""``ravel_pytree``: a pytree of arrays as one flat vector and back (``jax.flatten_util``'s).

>>> import numpy as np
>>> params = {"w": np.ones((2, 2)), "b": np.array([5.0, 6.0])}
>>> flat, unravel = ravel_pytree(params)
>>> flat                                   # dict keys in sorted order: "b" first
array([5., 6., 1., 1., 1., 1.])
>>> unravel(flat * 2)["b"]
array([10., 12.])

It is written with ``tnp`` functions, so it works on tensors and inside every
transform, and derivatives flow through both directions: a loss of the tree
can be differentiated as a function of the flat vector.

>>> import primitives.tensor as tnp
>>> loss = lambda p: tnp.sum(p["w"] ** 2) + tnp.sum(p["b"])
>>> tnp.grad(lambda v: loss(unravel(v)))(flat)
array([1., 1., 2., 2., 2., 2.])
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from primitives.tensor import numpy as api
from primitives.tensor.core import dtype_of, shape_of
from primitives.tensor.errors import TensorShapeError, TensorTypeError
from primitives.tensor.numpy.manipulation import ravel
from primitives.tensor.transforms.pytree import TreeDef, leaf_hint, tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


def ravel_pytree(tree: Any) -> tuple[Any, Callable]:
    """``(flat, unravel)``: ``flat`` the leaves of ``tree`` raveled and concatenated in
    ``tree_flatten`` order (dict keys sorted, ``None`` an empty node), in their common
    dtype (NumPy's promotion); ``unravel(v)`` rebuilds a tree of ``tree``'s structure from
    a vector ``v`` of ``flat``'s length, each leaf with its original shape and dtype.

    When every leaf has the same dtype, ``unravel`` keeps the dtype of ``v`` (as JAX's,
    so a float32 vector gives float32 leaves); with mixed dtypes it requires ``v`` in the
    common dtype and casts each piece back (a ``TensorTypeError`` otherwise). A tree with
    no leaves gives an empty float64 vector.

    >>> import numpy as np
    >>> flat, unravel = ravel_pytree((np.arange(2), [np.float32(0.5)]))
    >>> flat, flat.dtype
    (array([0. , 1. , 0.5]), dtype('float64'))
    >>> unravel(flat)
    (array([0, 1]), [array(0.5, dtype=float32)])
    """
    given, structure = tree_flatten(tree)
    leaves = [leaf if hasattr(leaf, "shape") else api.asarray(leaf) for leaf in given]
    shapes = [tuple(shape_of(leaf)) for leaf in leaves]
    sizes = [int(np.prod(shape, dtype=np.int64)) for shape in shapes]
    dtypes = [dtype_of(leaf) for leaf in leaves]
    for position, (leaf, dtype) in enumerate(zip(leaves, dtypes)):
        if np.dtype(dtype).kind not in "biufc":      # an iterator, a string: not numbers
            raise TensorTypeError(f"ravel_pytree: leaf {position} holds {dtype} values, not "
                                  f"numbers ({leaf_hint(given[position])})")
    if not leaves:
        return np.zeros(0), _Unravel(structure, [], [], [], None)
    common = np.result_type(*dtypes)
    same = all(d == common for d in dtypes)
    pieces = [ravel(leaf) if same else ravel(api.astype(leaf, common)) for leaf in leaves]
    flat = api.concatenate(pieces)
    if type(flat) is np.ndarray and any(type(leaf) is np.ndarray and
                                        np.may_share_memory(flat, leaf) for leaf in leaves):
        flat = flat.copy()                  # one leaf raveled: not a view of it
    return flat, _Unravel(structure, shapes, sizes, dtypes, None if same else common)


class _Unravel:
    """``unravel`` of :func:`ravel_pytree`: a vector back into the tree (a plain callable
    object, so it can be passed to ``jit`` as a static argument: it hashes by content)."""

    def __init__(self, structure: TreeDef, shapes: list, sizes: list, dtypes: list,
                 common) -> None:
        self.structure = structure
        self.shapes = shapes
        self.sizes = sizes
        self.dtypes = dtypes
        self.common = common                # None: one dtype, and unravel keeps v's
        self.total = sum(sizes)

    def __call__(self, flat):
        shape = tuple(shape_of(flat))
        if shape != (self.total,):
            raise TensorShapeError(f"unravel (of ravel_pytree): expected a vector of shape "
                                   f"({self.total},), got shape {shape}")
        if self.common is not None and dtype_of(flat) != self.common:
            raise TensorTypeError(f"unravel (of ravel_pytree): the tree's leaves have dtypes "
                                  f"{sorted({d.name for d in self.dtypes})}, raveled as "
                                  f"{self.common}; got a vector of dtype {dtype_of(flat)}")
        leaves = []
        start = 0
        for shape, size, dtype in zip(self.shapes, self.sizes, self.dtypes):
            piece = api.reshape(flat[start:start + size], shape)
            if self.common is not None and dtype != self.common:
                piece = api.astype(piece, dtype)
            elif type(piece) is np.ndarray:
                piece = piece.copy()        # not a view of flat: writing one changes neither
            leaves.append(piece)
            start += size
        return tree_unflatten(self.structure, leaves)

    def _key(self) -> tuple:
        return (self.structure, tuple(self.shapes),
                tuple(d.str for d in self.dtypes), None if self.common is None else
                self.common.str)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Unravel) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"unravel({self.structure!r})"
