"""Nested containers of arrays ("pytrees", as JAX calls them): flatten to leaves and back.

Tuples, named tuples (such as NumPy's ``EighResult``), lists, dicts (keys sorted, as in
JAX), ``OrderedDict`` (keys in insertion order) and ``defaultdict`` (keys sorted, its
default factory kept) are nodes, ``None`` is an empty node, and so is every type
registered with :func:`register_pytree_node` (or :func:`register_pytree_node_class`,
:func:`register_dataclass`); anything else is a leaf. The structure is a hashable
:class:`TreeDef`, so it can key a cache.

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

import dataclasses
import functools
import operator
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
from tidu import TiduError

from primitives.tensor.errors import TensorShapeError, TensorTypeError


class TreeDef(NamedTuple):
    """A pytree's structure: ``kind`` is "leaf", "none", "tuple", "namedtuple", "list",
    "dict", "ordereddict", "defaultdict" or "custom" (a registered type); ``keys`` a dict's
    keys (sorted; an ``OrderedDict``'s in order); ``children`` the children's structures;
    ``node_type`` a named tuple's or a registered node's class; ``aux`` a registered node's
    ``aux_data`` (a ``defaultdict``'s default factory). Two structures are equal when all of
    these are."""

    kind: str
    keys: tuple = ()
    children: tuple = ()
    node_type: type | None = None
    aux: Hashable = None

    def __repr__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(map(repr, self.children))
        if self.kind in ("namedtuple", "custom"):
            aux = "" if self.aux in (None, ()) else f"[{self.aux!r}]"
            return f"{self.node_type.__name__}{aux}({inner})"
        if self.kind in _DICT_KINDS:
            inner = "{" + ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.keys, self.children)) \
                + "}"
            if self.kind == "ordereddict":
                return f"OrderedDict({inner})"
            if self.kind == "defaultdict":
                return f"defaultdict({getattr(self.aux, '__name__', repr(self.aux))}, {inner})"
            return inner
        return f"({inner})" if self.kind == "tuple" else f"[{inner}]"

    @property
    def num_leaves(self) -> int:
        """How many leaves a tree of this structure holds (JAX's ``PyTreeDef.num_leaves``).

        >>> tree_structure({"a": (1, 2), "b": None}).num_leaves
        2
        """
        count, pending = 0, [self]
        while pending:
            node = pending.pop()
            if node.kind == "leaf":
                count += 1
            else:
                pending.extend(node.children)
        return count

    def unflatten(self, leaves: Iterable) -> Any:
        """The tree of this structure with ``leaves`` (:func:`tree_unflatten`; JAX's
        ``PyTreeDef.unflatten``).

        >>> tree_structure([1, (2, 3)]).unflatten([4, 5, 6])
        [4, (5, 6)]
        """
        return tree_unflatten(self, leaves)


LEAF = TreeDef("leaf")
_NONE = TreeDef("none")
_DICT_KINDS = ("dict", "ordereddict", "defaultdict")


class _Node(NamedTuple):
    """A node type's one-level flatten (``tree -> (shell, children)``, the shell a
    :class:`TreeDef` without its children) and unflatten (``(shell, children) -> tree``);
    ``field_names`` names the children (a dataclass's data fields) in error messages."""

    flatten: Callable
    unflatten: Callable
    field_names: tuple | None = None


# Every node type past the built-in fast paths (tuple, list, dict, None), by exact type.
_NODES: dict[type, _Node] = {}


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, TreeDef]:
    """The leaves of ``tree`` in order, and its structure. ``is_leaf(x)`` true makes ``x`` a
    leaf even if it is a node (as in JAX).

    >>> tree_flatten([1, {"a": 2}])
    ([1, 2], [*, {'a': *}])
    >>> tree_flatten([1, (2, 3)], is_leaf=lambda x: type(x) is tuple)[0]
    [1, (2, 3)]
    """
    leaves: list = []
    if is_leaf is None:
        return leaves, _flatten(tree, leaves)
    return leaves, _flatten_unless(tree, leaves, is_leaf)


def _flatten(tree, leaves: list) -> TreeDef:
    # recursion follows the nesting of containers, not the size of any graph
    kind = type(tree)
    if kind is np.ndarray:
        leaves.append(tree)
        return LEAF
    if kind is tuple or kind is list:
        children = []
        for t in tree:
            if type(t) is np.ndarray:               # the usual leaf, without a call
                leaves.append(t)
                children.append(LEAF)
            else:
                children.append(_flatten(t, leaves))
        return TreeDef(kind.__name__, (), tuple(children))
    if kind is dict:
        keys = _sorted_keys(tree)
        children = []
        for key in keys:
            t = tree[key]
            if type(t) is np.ndarray:
                leaves.append(t)
                children.append(LEAF)
            else:
                children.append(_flatten(t, leaves))
        return TreeDef("dict", keys, tuple(children))
    if tree is None:
        return _NONE
    node = _NODES.get(kind)                         # only for types past the fast paths
    if node is not None:
        shell, children = node.flatten(tree)
    elif isinstance(tree, tuple) and hasattr(kind, "_fields"):
        shell, children = None, tree                # a named tuple
    else:
        leaves.append(tree)
        return LEAF
    structures = []
    for t in children:              # a loop, not a generator: one frame for each level
        structures.append(_flatten(t, leaves))
    if shell is None:
        return TreeDef("namedtuple", (), tuple(structures), kind)
    return shell._replace(children=tuple(structures))


def _flatten_unless(tree, leaves: list, is_leaf: Callable) -> TreeDef:
    """:func:`_flatten` with ``is_leaf`` asked first at every node (the slow path)."""
    if is_leaf(tree):
        leaves.append(tree)
        return LEAF
    node = flatten_one_level(tree)
    if node is None:
        leaves.append(tree)
        return LEAF
    shell, children = node
    structures = []
    for t in children:
        structures.append(_flatten_unless(t, leaves, is_leaf))
    return shell._replace(children=tuple(structures))


def flatten_one_level(tree: Any) -> tuple[TreeDef, list] | None:
    """``(shell, children)`` of a node (``shell`` its :class:`TreeDef` without children), or
    ``None`` for a leaf; children in :func:`tree_flatten`'s order.

    >>> flatten_one_level({"b": 1, "a": [2]})
    ({}, [[2], 1])
    >>> flatten_one_level(3) is None
    True
    """
    kind = type(tree)
    if kind is tuple or kind is list:
        return TreeDef(kind.__name__), list(tree)
    if kind is dict:
        keys = _sorted_keys(tree)
        return TreeDef("dict", keys), [tree[k] for k in keys]
    if tree is None:
        return _NONE, []
    node = _NODES.get(kind)
    if node is not None:
        shell, children = node.flatten(tree)
        return shell, list(children)
    if isinstance(tree, tuple) and hasattr(kind, "_fields"):
        return TreeDef("namedtuple", node_type=kind), list(tree)
    return None


def is_node(value: Any) -> bool:
    """Whether ``value`` is a pytree node (``None`` included), not a leaf.

    >>> is_node((1,)), is_node(None), is_node(np.ones(2))
    (True, True, False)
    """
    kind = type(value)
    return kind is tuple or kind is list or kind is dict or value is None or kind in _NODES \
        or (isinstance(value, tuple) and hasattr(kind, "_fields"))


def child_names(shell: TreeDef, count: int) -> list[str]:
    """How each of the ``count`` children of a node of structure ``shell`` is reached from
    it, for messages: ``['key']`` in a dict, ``.name`` in a registered dataclass, ``[i]``
    otherwise.

    >>> child_names(tree_flatten({"a": 1, "b": (2,)})[1], 2)
    ["['a']", "['b']"]
    """
    if shell.kind in _DICT_KINDS:
        return [f"[{key!r}]" for key in shell.keys]
    node = _NODES.get(shell.node_type) if shell.kind == "custom" else None
    if node is not None and node.field_names is not None and len(node.field_names) == count:
        return [f".{name}" for name in node.field_names]
    return [f"[{i}]" for i in range(count)]


def leaf_hint(value: Any) -> str:
    """Why ``value`` was taken as a leaf, for an error that refuses it: what the nodes are,
    and how to make its type one.

    >>> import dataclasses
    >>> leaf_hint(dataclasses.make_dataclass("P", ["w"])(1))[:40]
    'P is a dataclass, a pytree leaf until re'
    """
    name = type(value).__name__
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (f"{name} is a dataclass, a pytree leaf until registered: decorate it with "
                "tnp.tree_util.register_dataclass")
    return ("pytree nodes are tuples, lists, dicts, named tuples, None and the types "
            "registered with tnp.tree_util.register_pytree_node (or register_dataclass); "
            "anything else is a leaf")


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


def tree_unflatten(tree: TreeDef, leaves: Iterable) -> Any:
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
    kind = tree.kind
    if kind == "leaf":
        return next(it)
    if kind == "none":
        return None
    children = []
    for c in tree.children:         # a loop, not a comprehension: one frame for each level
        children.append(next(it) if c is LEAF else _unflatten(c, it))
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    if kind == "dict":
        return dict(zip(tree.keys, children))
    if kind == "namedtuple":
        return tree.node_type(*children)
    return _NODES[tree.node_type].unflatten(tree, children)


# ---- registered nodes ----------------------------------------------------------------


def register_pytree_node(nodetype: type, flatten_func: Callable[[Any], tuple[Iterable, Hashable]],
                         unflatten_func: Callable[[Hashable, Iterable], Any]) -> None:
    """Make ``nodetype`` a pytree node (JAX's ``register_pytree_node``):
    ``flatten_func(x)`` gives ``(children, aux_data)`` and ``unflatten_func(aux_data,
    children)`` rebuilds ``x``. ``aux_data`` (what is not a child: names, flags) must be
    hashable; it is part of the structure, compared for equality (``jit`` retraces for a
    new one). Instances are then taken apart by every transform.

    >>> class Pair:
    ...     def __init__(self, a, b, name):
    ...         self.a, self.b, self.name = a, b, name
    >>> register_pytree_node(Pair, lambda p: ((p.a, p.b), p.name),
    ...                      lambda name, children: Pair(*children, name))
    >>> leaves, tree = tree_flatten(Pair(1, [2], "p"))
    >>> leaves, tree
    ([1, 2], Pair['p'](*, [*]))
    >>> tree_unflatten(tree, [10, 20]).b
    [20]
    """
    what = "register_pytree_node"
    _check_new(nodetype, what)
    for name, fn in (("flatten_func", flatten_func), ("unflatten_func", unflatten_func)):
        if not callable(fn):
            raise TensorTypeError(f"{what}: {name} for {nodetype.__name__} must be callable, "
                                  f"got {type(fn).__name__}")
    _register(nodetype, _custom_node(nodetype, flatten_func, unflatten_func), what)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: ``cls`` is a pytree node taken apart by its ``tree_flatten(self)``
    method (giving ``(children, aux_data)``) and rebuilt by its ``tree_unflatten(aux_data,
    children)`` classmethod, as in JAX.

    >>> @register_pytree_node_class
    ... class Scaled:
    ...     def __init__(self, value, scale):
    ...         self.value, self.scale = value, scale
    ...     def tree_flatten(self):
    ...         return (self.value,), self.scale
    ...     @classmethod
    ...     def tree_unflatten(cls, scale, children):
    ...         return cls(children[0], scale)
    >>> tree_map(lambda v: v + 1, Scaled(1.0, 3)).value
    2.0
    """
    what = "register_pytree_node_class"
    _check_new(cls, what)
    for name in ("tree_flatten", "tree_unflatten"):
        if not callable(getattr(cls, name, None)):
            raise TensorTypeError(f"{what}: {cls.__name__} has no {name} method (it needs "
                                  "tree_flatten(self) and the classmethod "
                                  "tree_unflatten(aux_data, children))")
    _register(cls, _custom_node(cls, operator.methodcaller("tree_flatten"), cls.tree_unflatten),
              what)
    return cls


def register_dataclass(nodetype: type | None = None, data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] | None = None,
                       drop_fields: Sequence[str] = ()):
    """Make a dataclass (or a class built from keyword arguments) a pytree node, as JAX's
    ``register_dataclass``: ``data_fields`` are its children (arrays, pytrees), in that
    order; ``meta_fields`` its hashable static part (the structure's ``aux_data``). For a
    dataclass both may be left out: fields marked ``field(metadata={"static": True})`` are
    meta, the others data (``init=False`` fields and ``drop_fields`` are left out). Usable
    as a decorator, bare or with arguments.

    >>> @register_dataclass
    ... @dataclasses.dataclass
    ... class Params:
    ...     w: Any
    ...     b: Any
    ...     act: str = dataclasses.field(default="tanh", metadata={"static": True})
    >>> tree_flatten(Params(1.0, 2.0))
    ([1.0, 2.0], Params[('tanh',)](*, *))
    >>> tree_map(lambda v: 10 * v, Params(1.0, 2.0, "relu"))
    Params(w=10.0, b=20.0, act='relu')
    """
    if nodetype is None:
        return functools.partial(register_dataclass, data_fields=data_fields,
                                 meta_fields=meta_fields, drop_fields=drop_fields)
    what = "register_dataclass"
    _check_new(nodetype, what)
    name = nodetype.__name__
    if (data_fields is None) != (meta_fields is None):
        raise TensorTypeError(f"{what}: give both data_fields and meta_fields for {name}, or "
                              "neither (for a dataclass, to take them from its fields)")
    if data_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TensorTypeError(f"{what}: {name} is not a dataclass; give its data_fields "
                                  "and meta_fields")
        fields = [f for f in dataclasses.fields(nodetype)
                  if f.init and f.name not in drop_fields]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if set(data_fields) & set(meta_fields):
        raise TensorTypeError(f"{what}: fields {sorted(set(data_fields) & set(meta_fields))} "
                              f"of {name} are both data and meta fields")
    if dataclasses.is_dataclass(nodetype):
        init_fields = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        if init_fields != {*data_fields, *meta_fields}:
            missing = sorted(init_fields - {*data_fields, *meta_fields})
            unknown = sorted({*data_fields, *meta_fields} - init_fields)
            raise TensorTypeError(f"{what}: data_fields and meta_fields of {name} must be its "
                                  f"init fields (missing {missing}, not fields {unknown}); "
                                  "leave fields out with drop_fields")

    def flatten(x):
        return (tuple(getattr(x, f) for f in data_fields),
                tuple(getattr(x, f) for f in meta_fields))

    def unflatten(meta, data):
        return nodetype(**dict(zip(meta_fields, meta)), **dict(zip(data_fields, data)))

    flatten.__qualname__ = f"register_dataclass({name}).flatten"
    unflatten.__qualname__ = f"{name}(**fields)"
    _register(nodetype, _custom_node(nodetype, flatten, unflatten, data_fields), what)
    return nodetype


def _check_new(nodetype, what: str) -> None:
    if not isinstance(nodetype, type):
        raise TensorTypeError(f"{what}: expected a class, got {type(nodetype).__name__} "
                              f"{nodetype!r}")
    if nodetype in _NODES or nodetype in (tuple, list, dict, type(None)):
        raise TensorTypeError(f"{what}: {nodetype.__name__} is already a pytree node type "
                              "(each type is registered once)")
    if nodetype is np.ndarray:
        raise TensorTypeError(f"{what}: numpy.ndarray is a pytree leaf; it cannot be a node")


_REGISTERING = threading.Lock()


def _register(nodetype: type, node: _Node, what: str) -> None:
    """Add ``nodetype``'s node, checked again under a lock: of two threads registering one
    type at once, the second is refused (as it is when they do not overlap)."""
    with _REGISTERING:
        _check_new(nodetype, what)
        _NODES[nodetype] = node


def _custom_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                 field_names: tuple | None = None) -> _Node:
    """A registered type's node: the user's functions, their errors named (a tidu error
    keeps its class, with a note naming the function; any other becomes a
    :class:`TensorTypeError`), aux checked."""
    name = nodetype.__name__

    def flatten(tree):
        try:
            children, aux = flatten_func(tree)
            children = tuple(children)
        except Exception as error:
            where = f"tree_flatten: the flatten function {_fn_name(flatten_func)} of pytree " \
                    f"node type {name}"
            if isinstance(error, TiduError):
                error.add_note(f"(raised in {where})")
                raise
            raise TensorTypeError(f"{where} raised {type(error).__name__}: {error}") from error
        try:
            hash(aux)
        except TypeError:
            raise TensorTypeError(f"tree_flatten: the flatten function {_fn_name(flatten_func)} "
                                  f"of pytree node type {name} returned aux_data of unhashable "
                                  f"type {type(aux).__name__}; aux_data is compared and hashed "
                                  "as part of the structure (jit's cache key): make it "
                                  "hashable (a tuple, not a list or an array)") from None
        return TreeDef("custom", (), (), nodetype, aux), children

    def unflatten(shell, children):
        try:
            return unflatten_func(shell.aux, children)
        except Exception as error:
            where = f"tree_unflatten: the unflatten function {_fn_name(unflatten_func)} of " \
                    f"pytree node type {name}"
            if isinstance(error, TiduError):       # its class kept (a ConcretizationError...)
                error.add_note(f"(raised in {where})")
                raise
            raise TensorTypeError(f"{where} raised {type(error).__name__}: {error}") from error

    return _Node(flatten, unflatten, field_names)


def _fn_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _flatten_ordered(tree: OrderedDict):
    keys = tuple(tree)
    return TreeDef("ordereddict", keys, node_type=OrderedDict), [tree[k] for k in keys]


def _flatten_defaultdict(tree: defaultdict):
    keys = _sorted_keys(tree)
    return (TreeDef("defaultdict", keys, node_type=defaultdict, aux=tree.default_factory),
            [tree[k] for k in keys])


_NODES[OrderedDict] = _Node(_flatten_ordered,
                            lambda shell, children: OrderedDict(zip(shell.keys, children)))
_NODES[defaultdict] = _Node(_flatten_defaultdict, lambda shell, children: defaultdict(
    shell.aux, zip(shell.keys, children)))


# ---- functions of trees ----------------------------------------------------------------


def flatten_up_to(structure: TreeDef, tree: Any, what: str) -> list:
    """The subtrees of ``tree`` at the leaves of ``structure``, a prefix of ``tree``'s own
    (JAX's rule for the extra trees of ``tree_map``); a mismatch is a
    :class:`TensorShapeError` that ``what`` (the caller) begins.

    >>> flatten_up_to(tree_flatten((1, 2))[1], ([3, 4], 5), "tree_map")
    [[3, 4], 5]
    """
    out: list = []
    _up_to(structure, tree, out, what, "")
    return out


def _up_to(structure: TreeDef, tree, out: list, what: str, path: str) -> None:
    if structure.kind == "leaf":
        out.append(tree)
        return
    node = flatten_one_level(tree)
    shell = structure._replace(children=())
    if node is None or node[0] != shell or len(node[1]) != len(structure.children):
        raise TensorShapeError(f"{what}: the trees' structures differ at {path or 'the root'}: "
                               f"{structure!r} in the first, {tree_flatten(tree)[1]!r} in "
                               "another (each tree must have the first one's structure, or "
                               "have it as a prefix)")
    names = child_names(structure, len(structure.children))
    for name, child_structure, child in zip(names, structure.children, node[1]):
        _up_to(child_structure, child, out, what, path + name)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    """The leaves of ``tree`` in order.

    >>> tree_leaves({"b": [2, None], "a": 1})
    [1, 2]
    """
    return tree_flatten(tree, is_leaf)[0]


# ---- key paths ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DictKey:
    """The step into a dict (``OrderedDict``, ``defaultdict``) by ``key``, as JAX's.

    >>> str(DictKey("w"))
    "['w']"
    """

    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """The step into a tuple or list at index ``idx``, as JAX's.

    >>> str(SequenceKey(2))
    '[2]'
    """

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """The step into a named tuple's or registered dataclass's field ``name``, as JAX's.

    >>> str(GetAttrKey("bias"))
    '.bias'
    """

    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """The step to the ``key``-th child of a node registered by its flatten function.

    >>> str(FlattenedIndexKey(0))
    '[<flat index 0>]'
    """

    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


def _child_keys(shell: TreeDef, count: int) -> list:
    if shell.kind in _DICT_KINDS:
        return [DictKey(key) for key in shell.keys]
    if shell.kind == "namedtuple":
        return [GetAttrKey(name) for name in shell.node_type._fields]
    if shell.kind == "custom":
        names = _NODES[shell.node_type].field_names
        if names is not None and len(names) == count:
            return [GetAttrKey(name) for name in names]
        return [FlattenedIndexKey(i) for i in range(count)]
    return [SequenceKey(i) for i in range(count)]


def tree_flatten_with_path(tree: Any, is_leaf: Callable[[Any], bool] | None = None
                           ) -> tuple[list, TreeDef]:
    """``(path, leaf)`` for each leaf of ``tree`` in :func:`tree_flatten`'s order, and the
    structure; a path is a tuple of keys (:class:`DictKey`, :class:`SequenceKey`,
    :class:`GetAttrKey`, :class:`FlattenedIndexKey`), as in JAX.

    >>> pairs, _ = tree_flatten_with_path({"b": [7], "a": 5})
    >>> [(keystr(path), leaf) for path, leaf in pairs]
    [("['a']", 5), ("['b'][0]", 7)]
    """
    pairs: list = []
    return pairs, _with_path(tree, (), pairs, is_leaf)


def _with_path(tree, path: tuple, pairs: list, is_leaf) -> TreeDef:
    # recursion follows the nesting of containers, not the size of any graph
    node = None if is_leaf is not None and is_leaf(tree) else flatten_one_level(tree)
    if node is None:
        pairs.append((path, tree))
        return LEAF
    shell, children = node
    structures = []
    for key, child in zip(_child_keys(shell, len(children)), children):
        structures.append(_with_path(child, (*path, key), pairs, is_leaf))
    return shell._replace(children=tuple(structures))


def tree_leaves_with_path(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    """``(path, leaf)`` for each leaf of ``tree`` (:func:`tree_flatten_with_path`).

    >>> [keystr(path) for path, _ in tree_leaves_with_path([1, {"w": 2}])]
    ['[0]', "[1]['w']"]
    """
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(fn: Callable, tree: Any, *rest: Any,
                       is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``tree`` with each leaf replaced by ``fn(path, leaf, *matching_leaves_of_rest)``
    (:func:`tree_map` given each leaf's path), as in JAX: to treat leaves by name.

    >>> tree_map_with_path(lambda path, x: 0 if keystr(path).endswith("['b']") else x,
    ...                    {"w": 1.5, "b": 2.5})
    {'b': 0, 'w': 1.5}
    """
    pairs, structure = tree_flatten_with_path(tree, is_leaf)
    columns = [flatten_up_to(structure, other, "tree_map_with_path") for other in rest]
    return tree_unflatten(structure, [fn(path, leaf, *(column[n] for column in columns))
                                      for n, (path, leaf) in enumerate(pairs)])


def keystr(keys: tuple, *, simple: bool = False, separator: str = "") -> str:
    """A path as text: ``"['a'][0].w"``; with ``simple=True`` the bare keys, joined by
    ``separator`` (as JAX's ``keystr``).

    >>> path = (DictKey("layers"), SequenceKey(0), GetAttrKey("w"))
    >>> keystr(path), keystr(path, simple=True, separator="/")
    ("['layers'][0].w", 'layers/0/w')
    """
    if not simple:
        return separator.join(str(key) for key in keys)
    return separator.join(str(getattr(key, dataclasses.fields(key)[0].name)) for key in keys)


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> TreeDef:
    """The structure of ``tree`` (a hashable :class:`TreeDef`).

    >>> tree_structure({"a": (1, 2)})
    {'a': (*, *)}
    """
    return tree_flatten(tree, is_leaf)[1]


def tree_map(fn: Callable, tree: Any, *rest: Any,
             is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``tree`` with each leaf replaced by ``fn(leaf, *matching_leaves_of_rest)``; each of
    ``rest`` has ``tree``'s structure (or has it as a prefix: then ``fn`` gets its whole
    subtree at each of ``tree``'s leaves), as in JAX.

    >>> tree_map(lambda x: x * 2, (1, [2]))
    (2, [4])
    >>> tree_map(lambda x, y: x + y, {"a": 1, "b": 2}, {"a": 10, "b": 20})
    {'a': 11, 'b': 22}
    """
    leaves, structure = tree_flatten(tree, is_leaf)
    if not rest:
        return tree_unflatten(structure, [fn(leaf) for leaf in leaves])
    columns = [leaves] + [flatten_up_to(structure, other, "tree_map") for other in rest]
    return tree_unflatten(structure, [fn(*row) for row in zip(*columns)])


_NO_INITIAL = object()


def tree_reduce(function: Callable[[Any, Any], Any], tree: Any, initializer: Any = _NO_INITIAL,
                is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``functools.reduce(function, leaves)`` over ``tree``'s leaves (from ``initializer``
    when given).

    >>> tree_reduce(lambda a, b: a + b, {"a": 1, "b": (2, 3)})
    6
    """
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIAL:
        if not leaves:
            raise TensorTypeError("tree_reduce: a tree without leaves and no initializer "
                                  "has no value; pass initializer")
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every leaf of ``tree`` is true (``True`` for no leaves).

    >>> tree_all([True, {"a": 1}]), tree_all((True, 0))
    (True, False)
    """
    return all(tree_leaves(tree, is_leaf))
