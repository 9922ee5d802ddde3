"""How an operation names its inputs while a graph is being built.

``Local(id)`` is a value of the graph under construction (an id the builder
returned); ``External(key)`` is a value of another graph, named by its key.

>>> Local(3).id, Local(3) == Local(3), Local(3) == External(3)
(3, True, False)
"""

from __future__ import annotations

from operator import itemgetter

from tidu.graph.operation import short_repr


class Local(int):
    """A value of the graph being built, by local id.

    An ``int`` subclass so that making one is as cheap as making an int; it is
    never equal to an ``External``.
    """

    __slots__ = ()
    __match_args__ = ("id",)
    id = property(int, doc="The local value id.")

    def __repr__(self) -> str:
        return f"Local({int(self)!r})"


class External(tuple):
    """A value of another graph, by its :class:`~tidu.graph.ValueKey`."""

    __slots__ = ()
    __match_args__ = ("key",)
    key = property(itemgetter(0))

    def __new__(cls, key) -> "External":
        return tuple.__new__(cls, (key,))

    def __eq__(self, other):
        return type(other) is External and tuple.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return f"External({short_repr(self[0])})"

    def __getnewargs__(self):
        return (self[0],)
