"""Tracing a function again: :class:`RetraceBuilder` follows the graph its last trace made.

``grad`` without ``jit`` traces ``f`` on every call (Python control flow may take
another path), yet most calls make the same graph as the call before. Built op
by op through a :class:`tidu.graph.GraphBuilder`, each op is checked and interned
again (a key computed and looked up in the intern table) only to find the key the
last graph already holds. A ``RetraceBuilder`` is given that last graph, the
*template*, and answers the builder's calls by comparing each with the template's
next value: the same input key, or the same op on the same local ids. While they
agree it hands out the template's local ids and keys and builds nothing (an op the
trace has added already gives its ids again, as a builder's do); at the first call
that differs it builds, in a real ``GraphBuilder``, what was traced so far
(the template's first values, already interned) and passes every call on to it.
Either way :meth:`build` returns the graph a ``GraphBuilder`` would have built, key
for key: the template itself when the whole trace agreed.

Room: the transforms package; imports ``tidu`` and ``tidu.graph`` only.

>>> from tidu.graph import GraphBuilder, Local
>>> from primitives.tensor.ops import elementwise as ew
>>> def trace(builder, op):
...     x = builder.add_input("x")
...     [y] = builder.add_operation(op, [Local(x), Local(x)])
...     builder.set_outputs([y])
...     return builder.build()
>>> first = trace(GraphBuilder(), ew.mul)
>>> trace(RetraceBuilder(first), ew.mul) is first           # the same graph: the template
True
>>> trace(RetraceBuilder(first), ew.add).output_keys == trace(GraphBuilder(), ew.add).output_keys
True
"""

from __future__ import annotations

from typing import Hashable, Sequence

from tidu import TiduError
from tidu.graph import (PRIMARY, Derived, Graph, GraphBuilder, Input, Local, OperationKey,
                        operation_counts)


class RetraceBuilder:
    """The :class:`~tidu.graph.GraphBuilder` calls a trace makes (``add_input``,
    ``add_operation`` on ``Local`` references, ``global_key``, ``set_outputs``, ``build``),
    answered from ``template`` while the trace repeats it (see the module).

    >>> from tidu.graph import GraphBuilder, Local
    >>> from primitives.tensor.ops import elementwise as ew
    >>> b = GraphBuilder(); x = b.add_input("x"); b.set_outputs(b.add_operation(ew.sin, [Local(x)]))
    >>> template = b.build()
    >>> again = RetraceBuilder(template)
    >>> again.add_operation(ew.sin, [Local(again.add_input("x"))])   # the template's ids
    [1]
    >>> again.global_key(1) is template.value_keys[1]
    True
    """

    __slots__ = ("_template_keys", "_template", "_next", "_builder", "_outputs")

    def __init__(self, template: Graph) -> None:
        self._template = template
        self._template_keys = template.value_keys
        self._next = 0                  # the local id the next new value gets
        self._builder = None            # the GraphBuilder once the trace has differed
        self._outputs = None

    def add_input(self, key: Hashable) -> int:
        """:meth:`GraphBuilder.add_input <tidu.graph.GraphBuilder.add_input>`."""
        builder = self._builder
        if builder is None:
            local_id, keys = self._next, self._template_keys
            if local_id < len(keys):
                found = keys[local_id]
                if isinstance(found, Input) and found.key == key:
                    self._next = local_id + 1
                    return local_id
            try:                            # an input this trace has added already
                again = self._template.local_id(Input(key))
            except TiduError:               # the builder's own check says what is wrong
                again = None
            if again is not None and again < local_id:
                return again
            builder = self._differ()
        return builder.add_input(key)

    def add_operation(self, op, inputs: Sequence, role=PRIMARY) -> list[int]:
        """:meth:`GraphBuilder.add_operation <tidu.graph.GraphBuilder.add_operation>`."""
        builder = self._builder
        if builder is None and role is PRIMARY:
            first, keys = self._next, self._template_keys
            found = keys[first] if first < len(keys) else None
            if type(found) is Derived:
                op_key = found.operation
                other = op_key.operation
                if (other is op or (type(other) is type(op) and other == op)) \
                        and op_key.role is PRIMARY \
                        and _same_inputs(op_key.inputs, inputs, keys, first):
                    n_out = op_key.output_count
                    self._next = first + n_out
                    return [first] if n_out == 1 else list(range(first, first + n_out))
            again = self._traced_already(op, inputs)
            if again is not None:
                return again
        if builder is None:
            builder = self._differ()
        return builder.add_operation(op, inputs, role)

    def global_key(self, id: int):
        """:meth:`GraphBuilder.global_key <tidu.graph.GraphBuilder.global_key>`."""
        builder = self._builder
        if builder is None and type(id) is int and 0 <= id < self._next:
            return self._template_keys[id]
        return (builder or self._differ()).global_key(id)

    def set_outputs(self, ids: Sequence[int]) -> None:
        """:meth:`GraphBuilder.set_outputs <tidu.graph.GraphBuilder.set_outputs>`."""
        if self._builder is None:
            ids = tuple(ids)
            if all(type(i) is int and 0 <= i < self._next for i in ids):
                self._outputs = ids
                return
        (self._builder or self._differ()).set_outputs(ids)

    def build(self) -> Graph:
        """What a ``GraphBuilder`` given the same calls builds: the template if they repeated
        it to its end, with its outputs."""
        template = self._template
        if self._builder is None and self._next == len(self._template_keys) \
                and self._outputs == template.outputs:
            return template
        builder = self._builder or self._differ()
        return builder.build()

    def _traced_already(self, op, inputs: Sequence) -> list[int] | None:
        """The ids of ``op`` on ``inputs`` if this trace has added it already (``f`` computes
        ``sin(x)`` twice: a builder gives the first one's ids again), else ``None``."""
        keys, traced = self._template_keys, self._next
        if not all(type(ref) is Local and 0 <= ref < traced for ref in inputs):
            return None
        try:
            if operation_counts(op)[0] != len(inputs):
                return None
            op_key = OperationKey(op, [keys[ref] for ref in inputs], PRIMARY)
        except TiduError:                   # the builder's own check says what is wrong
            return None
        first = self._template.local_id(Derived(op_key, 0))
        if first is None or first >= traced:
            return None
        n_out = op_key.output_count
        return [first] if n_out == 1 else list(range(first, first + n_out))

    def _differ(self) -> GraphBuilder:
        """Switch to a real builder holding the template's first values (the trace so far)."""
        builder = GraphBuilder()
        keys = self._template_keys
        local_id = 0
        while local_id < self._next:
            key = keys[local_id]
            if isinstance(key, Input):
                builder.add_input(key.key)
                local_id += 1
            else:
                op_key = key.operation
                builder.add_unchecked(op_key.operation, op_key.inputs, op_key.role,
                                      op_key.output_count)
                local_id += op_key.output_count
        if self._outputs is not None:
            builder.set_outputs(self._outputs)
        self._builder = builder
        return builder


def _same_inputs(op_inputs: tuple, refs: Sequence, keys: tuple, first: int) -> bool:
    """Whether ``refs`` (``Local`` ids below ``first``) name the keys ``op_inputs``."""
    if len(op_inputs) != len(refs):
        return False
    for key, ref in zip(op_inputs, refs):
        if type(ref) is not Local or not 0 <= ref < first or keys[ref] is not key:
            return False
    return True
