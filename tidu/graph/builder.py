"""``GraphBuilder`` and the immutable ``Graph`` it builds.

>>> import enum
>>> from tidu.graph import EvaluableGraphOperation, Input, Local, evaluate
>>> class Op(EvaluableGraphOperation, enum.Enum):
...     MUL = "mul"
...     def input_count(self): return 2
...     def output_count(self): return 1
...     def eval(self, ctx, inputs): return [inputs[0] * inputs[1]]
>>> b = GraphBuilder()
>>> x = b.add_input("x")
>>> [y] = b.add_operation(Op.MUL, [Local(x), Local(x)])
>>> b.add_operation(Op.MUL, [Local(x), Local(x)]) == [y]   # equal ops are one node
True
>>> b.set_outputs([y])
>>> g = b.build()
>>> evaluate(g, [g.values[y].key], {Input("x"): 3.0})
[9.0]
"""

from __future__ import annotations

import warnings
from array import array
from bisect import bisect_right
from collections import namedtuple
from typing import Hashable, Sequence
from collections.abc import Sequence as SequenceABC

from tidu.errors import (
    ArityError,
    ImmutableGraphError,
    InvalidArgumentError,
    InvalidKeyError,
    InvalidOperationError,
    InvalidReferenceError,
    UnknownValueError,
    sequence_argument,
)
from tidu.graph.keys import (
    PRIMARY,
    Input,
    Linearized,
    OperationKey,
    OperationRole,
    ValueKey,
    derived_key,
    flatten,
    intern_input,
    intern_operation_outputs,
    unflatten,
)
from tidu.graph.operation import GraphOperation, op_name
from tidu.graph.refs import External, Local

ValueNode = namedtuple("ValueNode", "key producer")
ValueNode.__doc__ = """A value of a graph: its global ``key`` and its ``producer``,
``(operation index, output slot)`` or ``None`` for a graph input."""

OperationNode = namedtuple("OperationNode", "operation inputs outputs role key")
OperationNode.__doc__ = """An operation of a graph: the ``operation``, its ``inputs``
(``Local``/``External``), the local ids of its ``outputs``, its ``role`` and its ``key``."""


def operation_counts(op) -> tuple[int, int]:
    """Check that ``op`` is a usable operation; return ``(input_count, output_count)``."""
    if not isinstance(op, GraphOperation):
        raise InvalidOperationError(f"{op!r} is not a GraphOperation")
    try:
        hash(op)
    except TypeError:
        raise InvalidOperationError(f"operation {op_name(op)} is not hashable") from None
    try:
        n_in = op.input_count()
        n_out = op.output_count()
    except NotImplementedError as missing:
        raise InvalidOperationError(
            f"{op_name(op)} does not implement {missing}: a GraphOperation must define "
            "input_count() and output_count()"
        ) from None
    if type(n_in) is not int or n_in < 0:
        raise InvalidOperationError(
            f"{op_name(op)}.input_count() returned {n_in!r}; expected a non-negative int"
        )
    if type(n_out) is not int or n_out < 1:
        raise InvalidOperationError(
            f"{op_name(op)}.output_count() returned {n_out!r}; expected a positive int"
        )
    return n_in, n_out


class GraphBuilder:
    """Builds a :class:`Graph` one input and one operation at a time.

    Local ids are positions in the graph's ``values``. Adding an operation that
    is structurally equal to one already added returns the existing ids, so
    every value key appears once per graph. A failed call leaves the builder
    as it was.
    """

    __slots__ = ("_keys", "_op_keys", "_op_first", "_index",
                 "_inputs", "_outputs", "_parents", "_counts")

    def __init__(self) -> None:
        # local id -> key: an Input for a graph input, an op's Derived output otherwise
        self._keys: list[ValueKey] = []
        self._op_keys: list[OperationKey] = []    # op index -> key
        self._op_first: list[int] = []           # op index -> local id of its first output
        # (increasing: a value's producer is found by bisection, not stored per value)
        self._index: dict[ValueKey, int] = {}     # key -> local id
        self._inputs: list[int] = []
        self._outputs: tuple[int, ...] = ()
        self._parents: list[Graph] = []
        # id(op) -> (op, (input_count, output_count)): each op checked once per builder,
        # found by identity (an op's own hash and equality can cost more than the lookup);
        # the entry holds the op, so its id is not reused while the builder lives
        self._counts: dict = {}

    def __len__(self) -> int:
        return len(self._keys)

    def add_input(self, key: Hashable) -> int:
        """Add (or find) the graph input named ``key``; return its local id."""
        value_key = intern_input(key)
        found = self._index.get(value_key)
        if found is not None:
            return found
        local_id = len(self._keys)
        self._keys.append(value_key)
        self._index[value_key] = local_id
        self._inputs.append(local_id)
        return local_id

    def add_operation(self, op, inputs: Sequence, role: OperationRole = PRIMARY) -> list[int]:
        """Add ``op`` applied to ``inputs`` (``Local``/``External``); return its output ids."""
        entry = self._counts.get(id(op))
        if entry is not None and entry[0] is op:
            n_in, n_out = entry[1]
        else:
            try:
                hash(op)                    # (the first complaint, before "not an operation")
            except TypeError:
                raise InvalidOperationError(f"operation {op_name(op)} is not hashable") from None
            n_in, n_out = operation_counts(op)
            self._counts[id(op)] = (op, (n_in, n_out))
        try:
            n_given = len(inputs)
        except TypeError:                   # a generator, say: read it once
            inputs = sequence_argument(inputs, f"add_operation({op_name(op)})", "inputs")
            n_given = len(inputs)
        if n_given != n_in:
            raise ArityError(f"{op_name(op)} takes {n_in} inputs, got {n_given}")
        if role is not PRIMARY and (type(role) is not Linearized
                                    or len(role._active_mask) != n_in):
            self._check_role(op, role, n_in)
        keys = self._keys
        n_values = len(keys)
        input_keys = []
        for ref in inputs:
            kind = type(ref)
            if kind is Local and 0 <= ref < n_values:
                input_keys.append(keys[ref])
            elif kind is External and isinstance(ref[0], ValueKey):
                input_keys.append(ref[0])
            else:
                self._raise_bad_input(op, inputs)
        first = self.add_unchecked(op, tuple(input_keys), role, n_out)
        return [first] if n_out == 1 else list(range(first, first + n_out))

    def add_unchecked(self, op, input_keys: tuple, role: OperationRole, n_out: int) -> int:
        """``add_operation`` without its checks; return the first output's id.

        For callers that have checked already: the op has ``n_out`` outputs and takes
        ``len(input_keys)`` inputs in ``role``, and ``input_keys`` are value keys of
        this builder or of another graph (replayed rule templates, inlined graphs).
        Nothing here checks that again: wrong arguments make a wrong graph, not an error.

        >>> import enum
        >>> from tidu.graph import PRIMARY, GraphOperation
        >>> class Op(GraphOperation, enum.Enum):
        ...     NEG = "neg"
        ...     def input_count(self): return 1
        ...     def output_count(self): return 1
        >>> b = GraphBuilder(); x = b.add_input("x")
        >>> b.add_unchecked(Op.NEG, (b.global_key(x),), PRIMARY, 1) == b.add_operation(
        ...     Op.NEG, [Local(x)])[0]                         # the same node
        True
        """
        keys = self._keys
        op_key, made = intern_operation_outputs(op, input_keys, role, n_out)
        if made is None:                   # an existing key: maybe already in this builder
            made = (derived_key(op_key, 0),) if n_out == 1 else \
                [derived_key(op_key, slot) for slot in range(n_out)]
            first = self._index.get(made[0])
            if first is not None:
                return first
        first = len(keys)
        self._op_keys.append(op_key)
        self._op_first.append(first)
        if n_out == 1:
            self._index[made[0]] = first
            keys.append(made[0])
            return first
        for key in made:
            self._index[key] = len(keys)
            keys.append(key)
        return first

    def add_checked(self, op, input_keys: tuple, role: OperationRole, n_out: int) -> int:
        """Deprecated (it never checked): the old name of :meth:`add_unchecked`, kept one
        release with a ``DeprecationWarning``."""
        warnings.warn("GraphBuilder.add_checked is deprecated: it does not check its "
                      "arguments; call add_unchecked", DeprecationWarning, stacklevel=2)
        return self.add_unchecked(op, input_keys, role, n_out)

    def _raise_bad_input(self, op, inputs: Sequence) -> None:
        """Raise the error naming the first input that is not a valid reference."""
        n_values = len(self._keys)
        for position, ref in enumerate(inputs):
            kind = type(ref)
            if kind is Local:
                if not 0 <= ref < n_values:
                    raise UnknownValueError(
                        f"input {position} of {op_name(op)}: {ref!r} is not a value "
                        f"of this builder (it has {n_values} values)"
                    )
            elif kind is External:
                key = ref[0]
                if not isinstance(key, ValueKey):
                    raise InvalidKeyError(
                        f"input {position} of {op_name(op)}: External({key!r}) does not hold "
                        "a ValueKey"
                    )
            else:
                raise InvalidReferenceError(
                    f"input {position} of {op_name(op)} is {ref!r}; expected Local or External"
                )
        raise AssertionError("unreachable: every input is valid")

    @staticmethod
    def _check_role(op, role, n_in: int) -> None:
        if not isinstance(role, Linearized):
            raise InvalidKeyError(
                f"role of {op_name(op)} is {role!r}; expected PRIMARY or Linearized"
            )
        if len(role.active_mask) != n_in:
            raise ArityError(
                f"{op_name(op)} takes {n_in} inputs but its role {role!r} masks "
                f"{len(role.active_mask)}"
            )

    def set_outputs(self, ids: Sequence[int]) -> None:
        """Declare which local values are the graph's outputs."""
        ids = tuple(sequence_argument(ids, "set_outputs", "ids"))
        for local_id in ids:
            self._check_id(local_id)
        self._outputs = tuple(map(int, ids))

    def add_parent(self, graph: "Graph") -> None:
        """Register ``graph`` as one whose values this graph refers to with ``External``."""
        if not isinstance(graph, Graph):
            raise InvalidArgumentError(f"add_parent needs a Graph, got {type(graph).__name__}")
        if all(parent is not graph for parent in self._parents):
            self._parents.append(graph)

    def global_key(self, id: int) -> ValueKey:
        """The global :class:`ValueKey` of local value ``id``."""
        keys = self._keys
        if type(id) is int and 0 <= id < len(keys):     # the common case, checked inline
            return keys[id]
        self._check_id(id)
        return keys[id]

    def local_id(self, key: ValueKey) -> int | None:
        """The local id of ``key`` in this builder, or ``None``."""
        return self._index.get(key)

    def _check_id(self, local_id) -> None:
        if not isinstance(local_id, int) or isinstance(local_id, bool) or not (
            0 <= local_id < len(self._keys)
        ):
            raise UnknownValueError(
                f"{local_id!r} is not a value id of this builder (it has {len(self._keys)} values)"
            )

    def build(self) -> "Graph":
        """Freeze what was added into an immutable :class:`Graph`."""
        return Graph._make(
            tuple(self._keys), tuple(self._op_keys), array("q", self._op_first),
            tuple(self._inputs), self._outputs, tuple(self._parents),
        )


class _ValueView(SequenceABC):
    """``graph.values``: a read-only sequence of :class:`ValueNode`, made on access."""

    __slots__ = ("_graph",)

    def __init__(self, graph: "Graph") -> None:
        self._graph = graph

    def __len__(self) -> int:
        return len(self._graph._keys)

    def __getitem__(self, index):
        graph = self._graph
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        local_id = range(len(graph._keys))[index]
        key = graph._keys[local_id]
        if isinstance(key, Input):
            return ValueNode(key, None)
        return ValueNode(key, (bisect_right(graph._op_first, local_id) - 1, key._slot))

    def __iter__(self):
        op_first = self._graph._op_first
        op_index = -1               # the last op whose first output is at or before local_id
        for local_id, key in enumerate(self._graph._keys):
            if isinstance(key, Input):
                yield ValueNode(key, None)
                continue
            while op_index + 1 < len(op_first) and op_first[op_index + 1] <= local_id:
                op_index += 1
            yield ValueNode(key, (op_index, key._slot))

    def __repr__(self) -> str:
        return f"<{len(self)} values>"


class _OperationView(SequenceABC):
    """``graph.operations``: a read-only sequence of :class:`OperationNode`, made on access."""

    __slots__ = ("_graph",)

    def __init__(self, graph: "Graph") -> None:
        self._graph = graph

    def __len__(self) -> int:
        return len(self._graph._op_keys)

    def __getitem__(self, index):
        graph = self._graph
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        key = graph._op_keys[index]
        first = graph._op_first[index]
        return OperationNode(key._operation, graph._input_refs(key, first),
                             tuple(range(first, first + key._n_out)), key._role, key)

    def __iter__(self):
        for index in range(len(self)):
            yield self[index]

    def __repr__(self) -> str:
        return f"<{len(self)} operations>"


class Graph:
    """An immutable graph: values, operations, inputs, outputs and parent graphs.

    ``values`` and ``operations`` are read-only sequences of :class:`ValueNode`
    and :class:`OperationNode`. ``str(graph)`` is a readable listing;
    ``repr(graph)`` is one short line.
    """

    __slots__ = ("_keys", "_op_keys", "_op_first", "inputs",
                 "outputs", "parents", "_index", "_program", "__weakref__")

    @classmethod
    def _make(cls, keys, op_keys, op_first, inputs, outputs, parents) -> "Graph":
        graph = object.__new__(cls)
        setter = object.__setattr__
        for name, value in (("_keys", keys), ("_op_keys", op_keys), ("_op_first", op_first),
                            ("inputs", inputs), ("outputs", outputs), ("parents", parents),
                            ("_index", None), ("_program", None)):
            setter(graph, name, value)
        return graph

    def __init__(self, *args, **kwargs) -> None:
        raise ImmutableGraphError("Graph is made by GraphBuilder.build()")

    def __setattr__(self, name, value):
        raise ImmutableGraphError(f"Graph is immutable; cannot set {name!r}")

    def __delattr__(self, name):
        raise ImmutableGraphError(f"Graph is immutable; cannot delete {name!r}")

    @property
    def values(self) -> _ValueView:
        """Every value, by local id: nodes with ``.key`` and ``.producer``."""
        return _ValueView(self)

    @property
    def operations(self) -> _OperationView:
        """Every operation, in the order added (dependencies first)."""
        return _OperationView(self)

    @property
    def value_keys(self) -> tuple:
        """The key of every value, by local id."""
        return self._keys

    @property
    def operation_keys(self) -> tuple:
        """The :class:`OperationKey` of every operation, in order."""
        return self._op_keys

    @property
    def input_keys(self) -> tuple:
        """The keys of the graph's inputs, in order."""
        keys = self._keys
        return tuple([keys[i] for i in self.inputs])

    @property
    def output_keys(self) -> tuple:
        """The keys of the graph's outputs, in order."""
        keys = self._keys
        return tuple([keys[i] for i in self.outputs])

    def local_id(self, key: ValueKey) -> int | None:
        """The local id of ``key`` in this graph, or ``None``."""
        return self._local_ids().get(key)

    def _local_ids(self) -> dict:
        """key -> local id, made when first asked for: most graphs (linear and transposed
        ones) are never asked, and a dict and an int per value is a tenth of their memory.
        Threads that race each make an equal dict."""
        index = self._index
        if index is None:
            index = {key: local_id for local_id, key in enumerate(self._keys)}
            object.__setattr__(self, "_index", index)
        return index

    def _input_refs(self, op_key: OperationKey, first_output: int) -> tuple:
        """An operation's inputs as ``Local`` (defined earlier here) or ``External`` refs."""
        index = self._local_ids()
        refs = []
        for key in op_key._inputs:
            local_id = index.get(key)
            refs.append(Local(local_id) if local_id is not None and local_id < first_output
                        else External(key))
        return tuple(refs)

    def __contains__(self, key) -> bool:
        return key in self._local_ids()

    def __repr__(self) -> str:
        return (f"<Graph {len(self.inputs)} inputs, {len(self._op_keys)} operations, "
                f"{len(self.outputs)} outputs, {len(self.parents)} parents>")

    def __str__(self) -> str:
        from tidu.graph.format import format_graph

        return format_graph(self)

    def __reduce__(self):
        table, refs = flatten(self._keys)
        return (_rebuild_graph, (table, refs, self._op_first, self.inputs, self.outputs,
                                 self.parents))


def _rebuild_graph(table, refs, op_first, inputs, outputs, parents) -> Graph:
    keys = tuple(unflatten(table, refs))
    op_keys = tuple(keys[first]._operation for first in op_first)
    return Graph._make(keys, op_keys, array("q", op_first), tuple(inputs),
                       tuple(outputs), tuple(parents))
