"""Small helpers rule authors use.

>>> import enum
>>> from tidu.rules import Primitive, GraphPrimitiveBuilder
>>> class Op(Primitive, enum.Enum):
...     ADD = "add"
...     @classmethod
...     def add(cls): return cls.ADD
...     def input_count(self): return 2
...     def output_count(self): return 1
>>> b = GraphPrimitiveBuilder()
>>> t = [b.add_input("a"), b.add_input("b")]
>>> sum_tangent_terms(b, [t[0], None, t[1]], Op)
2
>>> sum_tangent_terms(b, [None], Op) is None
True
"""

from __future__ import annotations

from typing import Sequence

from tidu.graph import Linearized, Local

BOTH_LINEAR = Linearized((True, True))


def sum_tangent_terms(builder, terms: Sequence[int | None], op_set) -> int | None:
    """Sum tangent ids with ``op_set.add()``; ``None`` terms are zeros; all-zero gives ``None``."""
    total = None
    for term in terms:
        if term is None:
            continue
        if total is None:
            total = term
        else:
            [total] = builder.add_primitive(op_set.add(), [Local(total), Local(term)], BOTH_LINEAR)
    return total
