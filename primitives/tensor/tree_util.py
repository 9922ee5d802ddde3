"""JAX's ``jax.tree_util`` for tidu's pytrees: flatten, map and rebuild nested containers,
and register new node types (a dataclass of parameters, a user class) so that every
transform (``grad``, ``jit``, ``vmap``, ``vjp``, ``custom_vjp``, ``odeint``, the
optimizers, ``ravel_pytree``) takes them apart and puts them back together.

Nodes are tuples, named tuples, lists, dicts (keys sorted), ``OrderedDict`` (keys in
order), ``defaultdict`` (keys sorted) and ``None`` (an empty node), and the registered
types; anything else is a leaf.

>>> import dataclasses
>>> import numpy as np
>>> from primitives import tensor as tnp
>>> @tnp.tree_util.register_dataclass
... @dataclasses.dataclass
... class Linear:
...     w: np.ndarray
...     b: np.ndarray
>>> params = Linear(np.array([1.0, 2.0]), np.array([0.5]))
>>> grads = tnp.grad(lambda p: tnp.sum(p.w ** 2) + tnp.sum(p.b))(params)
>>> grads
Linear(w=array([2., 4.]), b=array([1.]))
>>> tnp.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)
Linear(w=array([0.8, 1.6]), b=array([0.4]))
"""

from primitives.tensor.transforms.pytree import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    SequenceKey,
    TreeDef,
    keystr,
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    tree_all,
    tree_flatten,
    tree_flatten_with_path,
    tree_leaves,
    tree_leaves_with_path,
    tree_map,
    tree_map_with_path,
    tree_reduce,
    tree_structure,
    tree_unflatten,
)

__all__ = ["DictKey", "FlattenedIndexKey", "GetAttrKey", "SequenceKey", "TreeDef", "keystr",
           "register_dataclass", "register_pytree_node", "register_pytree_node_class",
           "tree_all", "tree_flatten", "tree_flatten_with_path", "tree_leaves",
           "tree_leaves_with_path", "tree_map", "tree_map_with_path", "tree_reduce",
           "tree_structure", "tree_unflatten"]
