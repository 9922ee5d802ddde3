"""JAX's ``jax.tree``: :mod:`..tree_util`'s functions by their short names (``map``,
``leaves``, ``structure``, ``flatten``, ``unflatten``, ``reduce``, ``all``, ``transpose``,
and the ``*_with_path`` ones).

>>> from primitives import tensor as tnp
>>> tnp.tree.map(lambda x: x + 1, {"a": 1, "b": (2, None)})
{'a': 2, 'b': (3, None)}
>>> leaves, structure = tnp.tree.flatten([1, {"x": 2}])
>>> tnp.tree.unflatten(structure, [10, 20])
[10, {'x': 20}]
>>> tnp.tree.transpose(tnp.tree.structure([0, 0]), None, [(1, 2), (3, 4)])
([1, 3], [2, 4])
"""

from primitives.tensor.transforms.pytree import tree_all as all  # noqa: A004
from primitives.tensor.transforms.pytree import tree_flatten as flatten
from primitives.tensor.transforms.pytree import tree_flatten_with_path as flatten_with_path
from primitives.tensor.transforms.pytree import tree_leaves as leaves
from primitives.tensor.transforms.pytree import tree_leaves_with_path as leaves_with_path
from primitives.tensor.transforms.pytree import tree_map as map  # noqa: A004
from primitives.tensor.transforms.pytree import tree_map_with_path as map_with_path
from primitives.tensor.transforms.pytree import tree_reduce as reduce
from primitives.tensor.transforms.pytree import tree_structure as structure
from primitives.tensor.transforms.pytree import tree_unflatten as unflatten
from primitives.tensor.tree_util import tree_transpose as transpose

__all__ = ["all", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map",
           "map_with_path", "reduce", "structure", "transpose", "unflatten"]
