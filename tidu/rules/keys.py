"""Keys for the inputs transforms create: tangents of user inputs and cotangent seeds.

>>> tangent_key("x", 3)
Tangent('x', pass_id=3)
>>> tangent_key("x", 3) == TangentKey("x", 3)
True
"""

from __future__ import annotations

import itertools
from typing import Hashable

from tidu.graph import short_repr

# Fresh pass ids start far from the small ids people pick by hand.
_pass_ids = itertools.count(1 << 20)


def fresh_pass_id() -> int:
    """A pass id no earlier call returned (process-wide, thread-safe)."""
    return next(_pass_ids)


class TangentKey:
    """The tangent of input ``base`` in differentiation pass ``pass_id``."""

    __slots__ = ("base", "pass_id", "_hash")

    def __init__(self, base: Hashable, pass_id: int) -> None:
        self.base = base
        self.pass_id = pass_id
        self._hash = hash((TangentKey, base, pass_id))

    def __eq__(self, other) -> bool:
        return self is other or (
            type(other) is TangentKey and self._hash == other._hash
            and self.pass_id == other.pass_id and self.base == other.base
        )

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Tangent({short_repr(self.base)}, pass_id={self.pass_id})"

    def __reduce__(self):
        return (TangentKey, (self.base, self.pass_id))


class CotangentSeed:
    """The cotangent seed of tangent output ``index`` of a transpose in pass ``pass_id``.

    A tidu-private key type, so seeds never collide with users' input keys.
    """

    __slots__ = ("pass_id", "index", "_hash")

    def __init__(self, pass_id: int, index: int) -> None:
        self.pass_id = pass_id
        self.index = index
        self._hash = hash((CotangentSeed, pass_id, index))

    def __eq__(self, other) -> bool:
        return type(other) is CotangentSeed and (self.pass_id, self.index) == (
            other.pass_id, other.index)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Cotangent({self.index}, pass_id={self.pass_id})"

    def __reduce__(self):
        return (CotangentSeed, (self.pass_id, self.index))


def tangent_key(key: Hashable, pass_id: int) -> Hashable:
    """``key.tangent_of(pass_id)`` where the key defines it, else a :class:`TangentKey`."""
    tangent_of = getattr(key, "tangent_of", None)
    if tangent_of is not None:
        return tangent_of(pass_id)
    return TangentKey(key, pass_id)
