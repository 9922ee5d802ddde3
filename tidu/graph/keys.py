"""Structural value identity: ``Input``, ``Derived``, ``OperationKey`` and roles.

A value is named by how it was made. ``Input(key)`` names a graph input;
``Derived(op_key, slot)`` names output ``slot`` of the operation ``op_key``,
which in turn names its operation, its input value keys and its role. Keys
built independently from equal structure are the *same object*: every key is
hash-consed on creation, so equality and hashing are identity checks and cost
O(1) however deep the graph behind a key is.

>>> x = Input("x")
>>> op = OperationKey("neg", (x,), PRIMARY)
>>> Derived(op, 0) == Derived(OperationKey("neg", (Input("x"),), PRIMARY), 0)
True

The intern tables hold their entries weakly, so keys of graphs nobody refers to
any more are freed rather than piling up in a long-running program.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from operator import attrgetter
from typing import Hashable

from tidu.errors import InvalidKeyError, InvalidOperationError, UnknownValueError
from tidu.graph.operation import GraphOperation, op_name, short_repr

# --- roles ---------------------------------------------------------------------


class OperationRole:
    """Why an operation is in a graph: primal work or linear (tangent) work."""

    __slots__ = ()


class _Primary(OperationRole):
    __slots__ = ()
    _instance: "_Primary | None" = None

    def __new__(cls) -> "_Primary":
        if cls._instance is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "PRIMARY"

    def __reduce__(self):
        return (_Primary, ())


PRIMARY = _Primary()
"""The role of ordinary (primal) operations."""


class Linearized(OperationRole):
    """Linear work emitted by a JVP rule; ``active_mask[i]`` marks input ``i`` as a tangent.

    Roles are interned, so equal masks give the same object. The table holds
    them weakly and drops dead ones when it has doubled, so it stays within
    twice the live roles.

    >>> Linearized((True, False)) is Linearized([True, False])
    True
    >>> Linearized((True, False)).active_mask
    (True, False)
    """

    __slots__ = ("_active_mask", "__weakref__")
    _interned: dict = {}        # mask -> weakref to the one live role with that mask
    active_mask = property(attrgetter("_active_mask"))

    def __new__(cls, active_mask) -> "Linearized":
        mask = tuple(active_mask)
        # checked before the lookup: (1, 0) would find the role interned for (True, False)
        if not all(type(flag) is bool for flag in mask):
            raise InvalidKeyError(f"Linearized active_mask must hold bools, got {mask!r}")
        ref = cls._interned.get(mask)
        role = ref() if ref is not None else None
        if role is None:
            with _lock:
                ref = cls._interned.get(mask)
                role = ref() if ref is not None else None
                if role is None:
                    role = object.__new__(cls)
                    role._active_mask = mask
                    _sweep_roles_if_needed()
                    cls._interned[mask] = weakref.ref(role)
        return role

    def __repr__(self) -> str:
        return "Linearized(" + "".join("T" if flag else "." for flag in self._active_mask) + ")"

    def __reduce__(self):
        return (Linearized, (self._active_mask,))


_roles_bar = [64]          # table size at which the next new role sweeps dead entries


def _sweep_roles_if_needed() -> None:
    """Drop dead roles once the table doubled since the last sweep. Call under ``_lock``."""
    table = Linearized._interned
    if len(table) < _roles_bar[0]:
        return
    for mask, ref in list(table.items()):
        if ref() is None:
            del table[mask]
    _roles_bar[0] = max(64, 2 * len(table))


# --- interning -----------------------------------------------------------------
#
# Tables map a structure to a weak reference to the one live key with that
# structure. An operation's structure is one hash of its op, its role and its
# inputs' tuple; roles and value keys hash by identity, so it reads nothing behind
# them, and the int it gives (cut to 60 bits: two of an int's 30-bit digits) takes under a third
# of the memory of the ids packed into bytes.
# A key found under a structure is the one asked for when its inputs and role are
# the same objects and its op is the same op: of one type and equal (members of
# two ``IntEnum`` op sets, or ``1`` and ``1.0``, hash and compare equal but are
# different ops). Two different operations with equal structures are rare; the
# second one is interned in ``_collisions`` under ``(type(op), op, id(role),
# id(input)...)``. Ids are safe because a live key keeps its role and inputs alive.

_lock = threading.Lock()
_serials = itertools.count()     # OperationKey.serial, given on first use
_op_serials: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # key -> its serial
_serial_lock = threading.Lock()
_input_table: dict = {}     # user key -> weakref(Input)
_op_table: dict = {}        # structure -> weakref(OperationKey)
_collisions: dict = {}      # (type(op), op, id(role), id(input)...) -> weakref
_dead = [0]                 # weakref callbacks count deaths; tables are swept lazily
_SWEEP_MIN = 4096
# Deaths above which a sweep is worth checking for. Tables only shrink in sweeps, so
# the sweep threshold never falls below a bar computed since the last sweep.
_sweep_bar = [_SWEEP_MIN]


def _on_dead(_ref) -> None:
    _dead[0] += 1


def _sweep_if_needed() -> None:
    """Drop dead entries once deaths outnumber half the live table. Call under ``_lock``.

    Entries are deleted in place (never by rebinding a table), so an operation
    key published without the lock (see :func:`intern_operation_outputs`) is never lost.
    """
    threshold = max(_SWEEP_MIN, (len(_op_table) + len(_input_table)) // 2)
    if _dead[0] <= threshold:
        _sweep_bar[0] = threshold
        return
    _dead[0] = 0
    _sweep_bar[0] = _SWEEP_MIN
    for table in (_op_table, _input_table, _collisions):
        # dict.copy() is one step for the interpreter: lock-free inserts cannot interleave
        dead = [(structure, ref) for structure, ref in table.copy().items() if ref() is None]
        for structure, ref in dead:
            if table.get(structure) is ref:
                del table[structure]


def _sweep_soon() -> None:
    """Sweep (taking the lock) if enough keys died."""
    with _lock:
        _sweep_if_needed()


def interned_count() -> int:
    """How many live keys the intern tables hold (for memory tests and diagnostics)."""
    tables = (_op_table, _input_table, _collisions)
    return sum(1 for table in tables for r in table.copy().values() if r() is not None)


# --- keys ----------------------------------------------------------------------


class ValueKey:
    """Common base of :class:`Input` and :class:`Derived`."""

    __slots__ = ()


class Input(ValueKey):
    """The value of a graph input named by a user-chosen hashable ``key``.

    >>> Input("x") is Input("x")
    True
    >>> Input("x")
    Input('x')
    """

    __slots__ = ("_key", "__weakref__")
    key = property(attrgetter("_key"))

    def __new__(cls, key: Hashable) -> "Input":
        return intern_input(key)

    def __repr__(self) -> str:
        return f"Input({short_repr(self._key)})"

    def __reduce__(self):
        return (Input, (self._key,))


def intern_input(key: Hashable) -> Input:
    """The one ``Input`` for ``key`` (what ``Input(key)`` returns)."""
    if type(key) is FreshInput:
        return key
    try:
        ref = _input_table.get(key)
    except TypeError:
        raise InvalidKeyError(f"input key {key!r} is not hashable") from None
    if ref is not None:
        found = ref()
        if found is not None:
            return found
    with _lock:
        ref = _input_table.get(key)
        found = ref() if ref is not None else None
        if found is None:
            if _dead[0] > _sweep_bar[0]:
                _sweep_if_needed()
            found = object.__new__(Input)
            found._key = key
            _input_table[key] = weakref.ref(found, _on_dead)
        return found


class FreshInput(Input):
    """A new input key, unique by identity, that is its own key: ``Input(k) is k``.

    Eager recording names every value it makes with one (the default
    :class:`tidu.eager.CounterKeySource` gives them). No table is involved, so
    making one costs one small object; it shows as ``%n``.

    >>> k = FreshInput()
    >>> Input(k) is k and k.key is k, k == FreshInput()
    (True, False)
    """

    __slots__ = ()
    key = property(lambda self: self)

    # object's own constructor: no intern table, and no Python call (eager recording makes
    # one key per recorded output)
    __new__ = object.__new__

    def __repr__(self) -> str:
        return f"%{_display_number(self, '_key', _fresh_serials)}"

    def __reduce__(self):
        return (FreshInput, ())             # unpickled, it is a new key (shared within one pickle)

    # A copy in this process is the key itself: it names the same value (keys are immutable;
    # interned keys copy to themselves through their __reduce__)
    def __copy__(self) -> "FreshInput":
        return self

    def __deepcopy__(self, memo) -> "FreshInput":
        return self


_fresh_serials = itertools.count()


def _display_number(key, slot: str, numbers) -> int:
    """``key``'s number for display, kept in ``slot``: the next of ``numbers`` the first time
    it is asked for (most keys are never shown; an int object per key costs memory)."""
    try:
        return getattr(key, slot)
    except AttributeError:
        with _serial_lock:
            if not hasattr(key, slot):
                setattr(key, slot, next(numbers))
        return getattr(key, slot)


class OperationKey:
    """An operation applied to input value keys in a role: the identity of one op node.

    >>> k = OperationKey("add", (Input("a"), Input("b")), PRIMARY)
    >>> k.operation, k.inputs, k.role
    ('add', (Input('a'), Input('b')), PRIMARY)
    """

    # _out: weakref to the Derived key of a one-output op, or a list of them. (Six slots:
    # a seventh, such as the display number, would move every key up a 16-byte size class.)
    __slots__ = ("_operation", "_inputs", "_role", "_n_out", "_out", "__weakref__")
    operation = property(attrgetter("_operation"))
    inputs = property(attrgetter("_inputs"))
    role = property(attrgetter("_role"))
    output_count = property(attrgetter("_n_out"))

    @property
    def serial(self) -> int:
        """A short process-unique number, for display (given when first asked for)."""
        number = _op_serials.get(self)
        if number is None:
            with _serial_lock:
                number = _op_serials.setdefault(self, next(_serials))
        return number

    def __new__(cls, operation, inputs, role: OperationRole = PRIMARY) -> "OperationKey":
        inputs = tuple(inputs)
        for position, key in enumerate(inputs):
            if not isinstance(key, ValueKey):
                raise InvalidKeyError(
                    f"input {position} of {op_name(operation)} is {key!r}, not a ValueKey"
                )
        if not isinstance(role, OperationRole):
            raise InvalidKeyError(f"role of {op_name(operation)} is {role!r}, not an OperationRole")
        try:
            hash(operation)
        except TypeError:
            raise InvalidOperationError(f"operation {op_name(operation)} is not hashable") from None
        return intern_operation(operation, inputs, role)

    def output_keys(self) -> tuple:
        """The ``Derived`` key of every output slot, in order."""
        return tuple(derived_key(self, slot) for slot in range(self._n_out))

    def __repr__(self) -> str:
        role = "" if self._role is PRIMARY else f"[{self._role!r}]"
        return f"{op_name(self._operation)}{role}#{self.serial}"

    def __reduce__(self):
        table, input_refs = flatten(self._inputs)
        return (_unflatten_operation, (table, self._operation, self._role, self._n_out,
                                       input_refs))


def _output_count_of(operation) -> int:
    if isinstance(operation, GraphOperation):
        count = operation.output_count()
        if type(count) is not int or count < 1:
            raise InvalidOperationError(
                f"{op_name(operation)}.output_count() returned {count!r}; expected a positive int"
            )
        return count
    return 1  # plain hashables work as operation labels in keys


_STRUCTURE_BITS = (1 << 60) - 1     # a 60-bit int takes 32 bytes; a 64-bit hash takes 48


def _structure(operation, inputs: tuple, role: OperationRole) -> int:
    """The intern-table key of an operation: the hash of ``(op, role, inputs)``, to 60 bits."""
    return hash((operation, role, inputs)) & _STRUCTURE_BITS


def _is_operation(key: OperationKey, operation, inputs: tuple, role: OperationRole) -> bool:
    """Whether ``key`` is ``operation`` on ``inputs`` in ``role`` (inlined on the fast paths)."""
    other = key._operation
    return key._inputs == inputs and key._role is role and (
        other is operation or (type(other) is type(operation) and other == operation))


def intern_operation(operation, inputs: tuple, role: OperationRole,
                     output_count: int | None = None) -> OperationKey:
    """The one ``OperationKey`` for this structure; ``inputs`` must be a tuple of value keys."""
    structure = _structure(operation, inputs, role)
    ref = _op_table.get(structure)
    if ref is not None:
        found = ref()
        if found is not None and found._inputs == inputs and found._role is role:
            other = found._operation
            if other is operation or (type(other) is type(operation) and other == operation):
                return found                      # _is_operation, inlined
    return _intern_operation_slow(structure, operation, inputs, role, output_count)


def intern_operation_outputs(operation, inputs: tuple, role: OperationRole,
                             output_count: int) -> tuple[OperationKey, tuple | None]:
    """``(op_key, outputs)``: :func:`intern_operation`, and whether this call made the key.

    ``outputs`` is ``None`` when the key already existed; otherwise the key is new
    (so no builder holds it yet) and ``outputs`` holds its ``Derived`` keys, made
    with it before it is published: the path builders take for every operation.
    """
    structure = _structure(operation, inputs, role)
    ref = _op_table.get(structure)
    if ref is not None or _collisions:
        found = ref() if ref is not None else None
        if found is not None and found._inputs == inputs and found._role is role:
            other = found._operation
            if other is operation or (type(other) is type(operation) and other == operation):
                return found, None
        return _intern_operation_slow(structure, operation, inputs, role, output_count), None
    if output_count == 1:                  # most ops: made inline, this is the hot path
        key = object.__new__(OperationKey)
        key._operation = operation
        key._inputs = inputs
        key._role = role
        key._n_out = 1
        derived = object.__new__(Derived)
        derived._operation = key
        derived._slot = 0
        key._out = weakref.ref(derived)
        outputs = (derived,)
    else:
        key, outputs = _new_key_with_outputs(operation, inputs, role, output_count)
    # Published without the lock: setdefault is atomic, an entry is only ever
    # replaced under the lock, and sweeps delete in place.
    ref = weakref.ref(key, _on_dead)
    if _op_table.setdefault(structure, ref) is ref:
        if _dead[0] > _sweep_bar[0]:
            _sweep_soon()
        return key, outputs
    # another thread interned this structure since our lookup, or its entry is dead
    return _intern_operation_slow(structure, operation, inputs, role, output_count), None


def _new_key_with_outputs(operation, inputs, role, output_count) -> tuple:
    """A new, not yet published operation key and its ``Derived`` keys."""
    key = _new_operation_key(operation, inputs, role, output_count)
    outputs = []
    for slot in range(output_count):
        found = object.__new__(Derived)
        found._operation = key
        found._slot = slot
        if output_count == 1:
            key._out = weakref.ref(found)
        else:
            key._out[slot] = weakref.ref(found)
        outputs.append(found)
    return key, tuple(outputs)


def _live(ref):
    return ref() if ref is not None else None


def _intern_operation_slow(structure, operation, inputs, role, output_count) -> OperationKey:
    if output_count is None:
        output_count = _output_count_of(operation)
    full = (type(operation), operation, id(role), *map(id, inputs))
    with _lock:
        if _dead[0] > _sweep_bar[0]:
            _sweep_if_needed()
        while True:             # twice at most: again if a builder published it meanwhile
            ref = _op_table.get(structure)
            found = _live(ref)
            if found is not None:
                if _is_operation(found, operation, inputs, role):
                    return found         # another thread interned it since our lookup
                return _collision_key(full, operation, inputs, role, output_count)
            found = _live(_collisions.get(full)) if _collisions else None
            if found is not None:
                return found
            found = _new_operation_key(operation, inputs, role, output_count)
            new_ref = weakref.ref(found, _on_dead)
            if ref is not None:          # a dead entry: replaced only under the lock
                _op_table[structure] = new_ref
                return found
            # builders publish without the lock (intern_operation_outputs): publish as they
            # do, so that a key one of them published is never replaced
            if _op_table.setdefault(structure, new_ref) is new_ref:
                return found


def _collision_key(full: tuple, operation, inputs, role, output_count) -> OperationKey:
    """The key of an operation whose structure a live key of another one holds.

    Call under ``_lock``."""
    found = _live(_collisions.get(full))
    if found is None:
        found = _new_operation_key(operation, inputs, role, output_count)
        _collisions[full] = weakref.ref(found, _on_dead)
    return found


def _new_operation_key(operation, inputs, role, output_count) -> OperationKey:
    key = object.__new__(OperationKey)
    key._operation = operation
    key._inputs = inputs
    key._role = role
    key._n_out = output_count
    key._out = None if output_count == 1 else [None] * output_count
    return key


class Derived(ValueKey):
    """Output ``output_slot`` of the operation named by ``operation`` (an :class:`OperationKey`).

    >>> k = OperationKey("neg", (Input("x"),), PRIMARY)
    >>> Derived(k, 0) is Derived(k, 0)
    True
    """

    __slots__ = ("_operation", "_slot", "__weakref__")
    operation = property(attrgetter("_operation"))
    output_slot = property(attrgetter("_slot"))

    def __new__(cls, operation: OperationKey, output_slot: int) -> "Derived":
        if not isinstance(operation, OperationKey):
            raise InvalidKeyError(f"Derived needs an OperationKey, got {operation!r}")
        if type(output_slot) is not int or not 0 <= output_slot < operation._n_out:
            raise UnknownValueError(
                f"{operation!r} has {operation._n_out} outputs; no slot {output_slot!r}"
            )
        return derived_key(operation, output_slot)

    def __repr__(self) -> str:
        return f"Derived({self._operation!r}:{self._slot})"

    def __reduce__(self):
        table, [ref] = flatten([self])
        return (unflatten, (table, [ref], True))


def existing_derived(operation: OperationKey, slot: int) -> Derived | None:
    """The live ``Derived`` key for ``(operation, slot)``, or ``None`` if nothing holds one."""
    ref = operation._out if operation._n_out == 1 else operation._out[slot]
    return ref() if ref is not None else None


def derived_key(operation: OperationKey, slot: int) -> Derived:
    """The one ``Derived`` key for ``(operation, slot)``; the slot must be in range."""
    single = operation._n_out == 1
    ref = operation._out if single else operation._out[slot]
    if ref is not None:
        found = ref()
        if found is not None:
            return found
    with _lock:
        ref = operation._out if single else operation._out[slot]
        found = ref() if ref is not None else None
        if found is None:
            found = object.__new__(Derived)
            found._operation = operation
            found._slot = slot
            if single:
                operation._out = weakref.ref(found)
            else:
                operation._out[slot] = weakref.ref(found)
        return found


def key_inputs(key: ValueKey) -> tuple:
    """The value keys ``key`` is computed from (empty for an ``Input``)."""
    return key._operation._inputs if type(key) is Derived else ()


# --- pickling without recursion ------------------------------------------------
#
# A key's structure can be arbitrarily deep, so keys and graphs pickle as a flat
# table of operations in dependency order; unpickling re-interns them in order.
# A value reference in the table is ("i", user_key) or ("d", row, slot).


def flatten(keys) -> tuple[list, list]:
    """``(table, refs)``: the operations behind ``keys`` as rows, and a ref per key."""
    from tidu.graph.walk import postorder

    roots = [k._operation for k in keys if type(k) is Derived]
    op_keys = postorder(roots, lambda op_key: [k._operation for k in op_key._inputs
                                              if type(k) is Derived])
    row = {op_key: i for i, op_key in enumerate(op_keys)}

    def ref(key):
        return ("i", key.key) if isinstance(key, Input) else ("d", row[key._operation], key._slot)

    table = [(op_key._operation, op_key._role, op_key._n_out, tuple(map(ref, op_key._inputs)))
             for op_key in op_keys]
    return table, [ref(k) for k in keys]


def unflatten(table, refs, single: bool = False):
    """The keys ``refs`` name, after re-interning every row of ``table`` in order."""
    made: list = []

    def key_of(ref):
        return intern_input(ref[1]) if ref[0] == "i" else derived_key(made[ref[1]], ref[2])

    for operation, role, n_out, inputs in table:
        made.append(intern_operation(operation, tuple(map(key_of, inputs)), role, n_out))
    keys = [key_of(r) for r in refs]
    return keys[0] if single else keys


def _unflatten_operation(table, operation, role, n_out, input_refs) -> OperationKey:
    inputs = tuple(unflatten(table, input_refs))
    return intern_operation(operation, inputs, role, n_out)
