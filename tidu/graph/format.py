"""Readable text listings of graphs and short labels for keys.

>>> from tidu.graph import GraphBuilder, Local
>>> b = GraphBuilder(); x = b.add_input("x")
>>> print(b.build())
graph(a = 'x'):
  return
"""

from __future__ import annotations

from tidu.graph.keys import PRIMARY, Derived, ValueKey
from tidu.graph.operation import op_name, short_repr
from tidu.graph.refs import Local


def key_label(key: ValueKey) -> str:
    """A one-line label: an input's user key, or ``OP#serial:slot`` for a derived value."""
    if type(key) is Derived:
        return f"{key.operation!r}:{key.output_slot}"
    return short_repr(key.key)


def value_name(local_id: int) -> str:
    """Spreadsheet-style names for local ids: a, b, ..., z, ba, bb, ..."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    name = letters[local_id % 26]
    local_id //= 26
    while local_id:
        name = letters[local_id % 26] + name
        local_id //= 26
    return name


def format_graph(graph) -> str:
    """The listing ``str(graph)`` shows: inputs, one line per operation, outputs.

    External references print as ``ext(label)``; non-primary roles in brackets.
    """
    lines = [
        "graph(" + ", ".join(f"{value_name(i)} = {key_label(graph.values[i].key)}"
                             for i in graph.inputs) + "):"
    ]
    for node in graph.operations:
        args = " ".join(
            value_name(ref) if type(ref) is Local else f"ext({key_label(ref[0])})"
            for ref in node.inputs
        )
        role = "" if node.role is PRIMARY else f"[{node.role!r}]"
        outs = ", ".join(value_name(i) for i in node.outputs)
        lines.append(f"  {outs} = {op_name(node.operation)}{role} {args}".rstrip())
    lines.append("  return " + ", ".join(value_name(i) for i in graph.outputs))
    return "\n".join(lines)
