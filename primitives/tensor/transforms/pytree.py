"""Nested containers of arrays ("pytrees", as JAX calls them): flatten to leaves and back.

Tuples, named tuples (such as NumPy's ``EighResult``), lists and dicts (keys
sorted, as in JAX) are nodes, ``None`` is an empty node, anything else is a leaf. The structure is a hashable :class:`TreeDef`, so
it can key a cache.

>>> leaves, tree = tree_flatten({"b": (1, 2), "a": [3, None]})
>>> leaves
[3, 1, 2]
>>> tree_unflatten(tree, [30, 10, 20])
{'a': [30, None], 'b': (10, 20)}
>>> import numpy as np
>>> result = np.linalg.eigh(np.eye(2))
>>> type(tree_unflatten(tree_flatten(result)[1], [1.0, 2.0])).__name__
'EighResult'
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from primitives.tensor.errors import TensorShapeError, TensorTypeError


class TreeDef(NamedTuple):
    """A pytree's structure: ``kind`` is "leaf", "none", "tuple", "namedtuple", "list" or
    "dict"; ``keys`` the dict's keys (sorted); ``children`` the children's structures;
    ``node_type`` a named tuple's class."""

    kind: str
    keys: tuple = ()
    children: tuple = ()
    node_type: type | None = None

    def __repr__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        if self.kind == "namedtuple":
            return f"{self.node_type.__name__}({', '.join(map(repr, self.children))})"
        inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.keys, self.children)) \
            if self.kind == "dict" else ", ".join(map(repr, self.children))
        return {"tuple": f"({inner})", "list": f"[{inner}]", "dict": f"{{{inner}}}"}[self.kind]


LEAF = TreeDef("leaf")


def tree_flatten(tree: Any) -> tuple[list, TreeDef]:
    """The leaves of ``tree`` in order, and its structure."""
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def _flatten(tree, leaves: list) -> TreeDef:
    # recursion follows the nesting of containers, not the size of any graph
    if tree is None:
        return TreeDef("none")
    kind = type(tree)
    if kind is tuple or kind is list:
        children = []
        for t in tree:
            if type(t) is np.ndarray:               # the usual leaf, without a call
                leaves.append(t)
                children.append(LEAF)
            else:
                children.append(_flatten(t, leaves))
        return TreeDef(kind.__name__, (), tuple(children))
    if isinstance(tree, tuple) and hasattr(type(tree), "_fields"):
        return TreeDef("namedtuple", (), tuple(_flatten(t, leaves) for t in tree), type(tree))
    if type(tree) is dict:
        keys = _sorted_keys(tree)
        return TreeDef("dict", keys, tuple(_flatten(tree[k], leaves) for k in keys))
    leaves.append(tree)
    return LEAF


def _sorted_keys(tree: dict) -> tuple:
    """A dict's keys, sorted: its leaves' order must not depend on how it was built."""
    try:
        return tuple(sorted(tree))
    except TypeError:
        kinds = ", ".join(sorted({type(key).__name__ for key in tree}))
        raise TensorTypeError(f"tree_flatten: dict keys must be sortable (its leaves are taken "
                              f"in the order of its sorted keys, as in JAX); got keys of types "
                              f"{kinds}, which do not compare with <: use keys of one "
                              "comparable type (str, int...)") from None


def tree_unflatten(tree: TreeDef, leaves) -> Any:
    """The pytree of structure ``tree`` with ``leaves`` in order.

    >>> tree_unflatten(tree_flatten((1, [2]))[1], [3])
    Traceback (most recent call last):
    ...
    primitives.tensor.errors.TensorShapeError: tree_unflatten: 1 leaves for the structure (*, [*]), which holds more
    """
    if not isinstance(tree, TreeDef):
        raise TensorTypeError(f"tree_unflatten: the structure must be a TreeDef (what "
                              f"tree_flatten returns), got {type(tree).__name__}")
    leaves = list(leaves)
    it = iter(leaves)
    try:
        out = _unflatten(tree, it)
    except StopIteration:
        raise TensorShapeError(f"tree_unflatten: {len(leaves)} leaves for the structure "
                               f"{tree!r}, which holds more") from None
    if next(it, _END) is not _END:
        raise TensorShapeError(f"tree_unflatten: {len(leaves)} leaves for the structure "
                               f"{tree!r}, which holds fewer")
    return out


_END = object()


def _unflatten(tree: TreeDef, it) -> Any:
    if tree.kind == "leaf":
        return next(it)
    if tree.kind == "none":
        return None
    children = [next(it) if c is LEAF else _unflatten(c, it) for c in tree.children]
    if tree.kind == "dict":
        return dict(zip(tree.keys, children))
    if tree.kind == "namedtuple":
        return tree.node_type(*children)
    return tuple(children) if tree.kind == "tuple" else children


def tree_map(fn, tree: Any) -> Any:
    """``tree`` with ``fn`` applied to every leaf.

    >>> tree_map(lambda x: x * 2, (1, [2]))
    (2, [4])
    """
    leaves, structure = tree_flatten(tree)
    return tree_unflatten(structure, [fn(leaf) for leaf in leaves])
