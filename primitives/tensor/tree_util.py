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

Also JAX's :class:`Partial` (a ``functools.partial`` whose bound arguments are leaves, so a
function with its parameters passes through ``jit`` and ``grad``), :func:`tree_transpose`,
:func:`register_static` and :func:`treedef_is_leaf`.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from primitives.tensor.errors import TensorShapeError, TensorTypeError
from primitives.tensor.transforms.pytree import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    SequenceKey,
    TreeDef,
    flatten_up_to,
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

__all__ = ["DictKey", "FlattenedIndexKey", "GetAttrKey", "Partial", "SequenceKey", "TreeDef",
           "keystr", "register_dataclass", "register_pytree_node", "register_pytree_node_class",
           "register_static", "tree_all", "tree_flatten", "tree_flatten_with_path",
           "tree_leaves", "tree_leaves_with_path", "tree_map", "tree_map_with_path",
           "tree_reduce", "tree_structure", "tree_transpose", "tree_unflatten",
           "treedef_is_leaf"]


class Partial(functools.partial):
    """``functools.partial`` as a pytree node (JAX's ``tree_util.Partial``): the bound
    arguments (positional and keyword) are its children, the function its static part. So a
    function with the arrays it was given can be an argument of ``jit`` (which traces the
    arrays and keys its cache on the function) or of ``grad`` (whose gradient is a
    ``Partial`` of the same function, holding the arguments' gradients).

    A plain ``functools.partial`` given as the function stays whole, its own arguments
    part of the function, as in JAX. A ``Partial`` given as the function is merged into
    the new one (its arguments are leaves too; JAX would make them static, hiding their
    derivatives).

    >>> import numpy as np
    >>> from primitives import tensor as tnp
    >>> scaled = Partial(tnp.multiply, np.array([2.0, 3.0]))
    >>> tnp.jit(lambda f, x: f(x))(scaled, np.array([1.0, 1.0]))
    array([2., 3.])
    >>> tnp.grad(lambda f: tnp.sum(f(np.array([1.0, 10.0]))))(scaled).args
    (array([ 1., 10.]),)
    """

    def __new__(cls, func: Callable, *args: Any, **kwargs: Any) -> "Partial":
        if not callable(func):
            raise TensorTypeError(f"Partial: the function must be callable, got "
                                  f"{type(func).__name__}")
        if isinstance(func, functools.partial) and not isinstance(func, Partial):
            func = _WholePartial(func)          # its arguments stay static, not merged
        return super().__new__(cls, func, *args, **kwargs)


class _WholePartial:
    """A plain ``functools.partial`` bound as a :class:`Partial`'s function: called as it
    is, hashed and compared as it is (by identity), so its arguments stay in the static
    part."""

    __slots__ = ("partial",)

    def __init__(self, partial: functools.partial) -> None:
        self.partial = partial

    def __call__(self, *args, **kwargs):
        return self.partial(*args, **kwargs)

    def __hash__(self) -> int:
        return hash(self.partial)

    def __eq__(self, other) -> bool:
        return isinstance(other, _WholePartial) and self.partial == other.partial

    def __repr__(self) -> str:
        return repr(self.partial)


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, children: Partial(func, *children[0], **children[1]))


def register_static(cls: type) -> type:
    """Make ``cls`` a pytree node with no leaves (JAX's ``register_static``): an instance is
    part of the structure, so ``jit`` passes it to the function as it is and traces again
    for an unequal one, with no ``static_argnums``. Its instances must be hashable; returns
    ``cls`` (a class decorator).

    >>> from primitives import tensor as tnp
    >>> @register_static
    ... class Mode(str):
    ...     pass
    >>> tnp.tree_util.tree_leaves([1.0, Mode("sum")])
    [1.0]
    >>> import numpy as np
    >>> tnp.jit(lambda x, m: tnp.sum(x) if m == "sum" else x)(np.ones(3), Mode("sum"))
    array(3.)
    """
    if not isinstance(cls, type):
        raise TensorTypeError(f"register_static: expected a class, got {type(cls).__name__}")
    if cls.__hash__ is None:
        raise TensorTypeError(f"register_static: {cls.__name__} is not hashable; its "
                              "instances are part of the structure (jit's cache key), so "
                              "they must be (define __hash__ with __eq__)")
    try:
        register_pytree_node(cls, lambda x: ((), x), lambda x, _: x)
    except TensorTypeError as error:
        raise TensorTypeError(f"register_static: {error}") from None
    return cls


def treedef_is_leaf(treedef: TreeDef) -> bool:
    """Whether ``treedef`` has a single node: a leaf, or a node without children (``None``,
    ``()``, ``{}``, a :func:`register_static` instance), as JAX's ``treedef_is_leaf``.

    >>> treedef_is_leaf(tree_structure(1.0)), treedef_is_leaf(tree_structure(None))
    (True, True)
    >>> treedef_is_leaf(tree_structure([1.0]))
    False
    """
    if not isinstance(treedef, TreeDef):
        raise TensorTypeError(f"treedef_is_leaf: expected a TreeDef (what tree_structure "
                              f"returns), got {type(treedef).__name__}")
    return not treedef.children


def tree_transpose(outer_treedef: TreeDef, inner_treedef: TreeDef | None,
                   pytree_to_transpose: Any) -> Any:
    """A tree of structure ``outer_treedef`` whose subtrees at its leaves have structure
    ``inner_treedef``, turned into one of structure ``inner_treedef`` whose subtrees have
    structure ``outer_treedef`` (JAX's ``tree_transpose``: a list of pairs into a pair of
    lists). ``inner_treedef`` ``None``: the structure of the first subtree. Every subtree
    must have that structure exactly (JAX only counts the leaves).

    >>> pairs = [(1, "a"), (2, "b")]
    >>> tree_transpose(tree_structure([0, 0]), tree_structure((0, 0)), pairs)
    ([1, 2], ['a', 'b'])
    >>> tree_transpose(tree_structure([0, 0]), None, pairs)
    ([1, 2], ['a', 'b'])
    """
    what = "tree_transpose"
    if not isinstance(outer_treedef, TreeDef) or not (
            inner_treedef is None or isinstance(inner_treedef, TreeDef)):
        raise TensorTypeError(f"{what}: outer_treedef and inner_treedef must be TreeDefs "
                              f"(what tree_structure returns; inner_treedef may be None), got "
                              f"{type(outer_treedef).__name__} and "
                              f"{type(inner_treedef).__name__}")
    subtrees = flatten_up_to(outer_treedef, pytree_to_transpose, what)
    if inner_treedef is None:
        if not subtrees:
            raise TensorShapeError(f"{what}: outer_treedef {outer_treedef!r} has no leaves, "
                                   "so the inner structure cannot be inferred; pass "
                                   "inner_treedef")
        inner_treedef = tree_structure(subtrees[0])
    columns = []
    for position, subtree in enumerate(subtrees):
        leaves, structure = tree_flatten(subtree)
        if structure != inner_treedef:
            raise TensorShapeError(f"{what}: the subtree at leaf {position} of the outer "
                                   f"structure {outer_treedef!r} has structure "
                                   f"{structure!r}, not the inner structure "
                                   f"{inner_treedef!r}")
        columns.append(leaves)
    count = inner_treedef.num_leaves
    return tree_unflatten(inner_treedef, [
        tree_unflatten(outer_treedef, [leaves[k] for leaves in columns]) for k in range(count)])
