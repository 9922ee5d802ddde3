"""Run AD rules for a transform, replaying recorded rule templates where allowed.

A transform calls the same rule on many nodes that differ only in the values
they touch. When an op's rules are structural (see
:meth:`tidu.Primitive.structural_rules`), the first call for an (op, role,
zero pattern) is recorded: each operation it emitted, with every input named by
position (a tangent or cotangent it was given, a primal value it was given, or
an output of an earlier emission), and where its results came from. The record
is compiled into a small straight-line function that later nodes with the same
op, role and zero pattern call to emit the same operations straight into the
graph builder, without calling the rule or re-checking what it emits.

A template is recorded only when every id and key the rule was given is
distinct and everything it emitted can be named by position; otherwise the rule
is called for every node, as for ops whose rules are not structural.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from operator import is_
from typing import Any

from tidu.errors import ADRuleError, ADRuleKind, RuleContractError, TiduError
from tidu.graph import PRIMARY, Derived, External, Input, Local
from tidu.graph import op_name
from tidu.rules.builder import GraphPrimitiveBuilder, are_ids, check_rule_results
from tidu.rules.helpers import BOTH_LINEAR

_is_none = partial(is_, None)
_CALL = "call"          # templates[...] value: record nothing, call the rule every time


class RuleRunner:
    """Calls the JVP and transpose rules of one transform, emitting into ``builder``."""

    __slots__ = ("_add", "_adders", "_can_replay", "_keys", "_size", "builder", "ctx",
                 "templates")

    def __init__(self, builder, ctx: Any) -> None:
        self.builder = builder
        self.ctx = ctx
        self.templates: dict = {}   # (op, role, zero pattern) -> compiled template or _CALL
        self._adders: dict = {}     # op type -> its set's add(), once it added fine
        self._can_replay = type(builder) is GraphPrimitiveBuilder
        if self._can_replay:
            self._keys = builder._keys          # ids are positions in this list
            self._add = builder.add_unchecked
            self._size = self._keys.__len__
        else:
            self._size = _unknown_size

    def jvp(self, operation, primal_inputs: tuple, primal_outputs: list,
            tangents: list) -> list:
        """The output tangent ids of ``operation``'s JVP (``None`` for zeros)."""
        rule_key = (operation, None, tuple(map(_is_none, tangents)))
        replay = self.templates.get(rule_key)
        if replay is not None and replay is not _CALL:
            return replay(self._keys, self._add, tangents, primal_inputs, primal_outputs)
        rule = getattr(operation, "jvp_rule", None)
        if rule is None:
            raise ADRuleError(op_name(operation), ADRuleKind.JVP, "it is not a tidu.Primitive")
        recorder = None
        if replay is None:
            recorder = self._recorder(rule_key, tangents, primal_inputs, primal_outputs)
        start = len(self.builder._op_keys) if self._can_replay else None
        try:
            results = rule(self.builder if recorder is None else recorder, primal_inputs,
                           primal_outputs, tangents, self.ctx)
        except Exception as error:
            _note_rule(error, operation, ADRuleKind.JVP)
            raise
        results = self._checked(results, len(primal_outputs), operation, ADRuleKind.JVP,
                                "tangents")
        if start is not None:
            if len(self.builder._op_keys) > start:
                self._check_linear_work(start, operation, ADRuleKind.JVP)
            self._check_linear_results(results, operation, ADRuleKind.JVP)
        if recorder is not None:
            self.templates[rule_key] = recorder.compile(results)
        return results

    def transpose(self, operation, cotangents: list, inputs: tuple, role) -> list:
        """The input cotangent ids of linear ``operation``'s transpose (``None`` for zeros)."""
        rule_key = (operation, role, tuple(map(_is_none, cotangents)))
        replay = self.templates.get(rule_key)
        if replay is not None and replay is not _CALL:
            return replay(self._keys, self._add, cotangents, inputs, ())
        rule = getattr(operation, "transpose_rule", None)
        if rule is None:
            raise ADRuleError(op_name(operation), ADRuleKind.TRANSPOSE,
                              "it is not a tidu.Primitive")
        recorder = None
        if replay is None:
            recorder = self._recorder(rule_key, cotangents, inputs, ())
        start = len(self.builder._op_keys) if self._can_replay else None
        try:
            results = rule(self.builder if recorder is None else recorder, cotangents,
                           list(map(External, inputs)), role, self.ctx)
        except Exception as error:
            _note_rule(error, operation, ADRuleKind.TRANSPOSE)
            raise
        results = self._checked(results, len(inputs), operation, ADRuleKind.TRANSPOSE,
                                "cotangents")
        if start is not None:
            if len(self.builder._op_keys) > start:
                self._check_linear_work(start, operation, ADRuleKind.TRANSPOSE)
            self._check_linear_results(results, operation, ADRuleKind.TRANSPOSE)
        if recorder is not None:
            self.templates[rule_key] = recorder.compile(results)
        return results

    def add(self, op_type, first: int, second: int) -> int:
        """The id of ``first + second``, summed with the ``add()`` of ``op_type``'s set."""
        add = self._adders.get(op_type)
        if add is not None and self._can_replay:
            keys = self._keys
            return self._add(add, (keys[first], keys[second]), BOTH_LINEAR, 1)
        if add is None:
            if not hasattr(op_type, "add"):
                raise ADRuleError(op_type.__name__, ADRuleKind.TRANSPOSE,
                                  "its set defines no add() to sum cotangents")
            add = op_type.add()
        [total] = self.builder.add_primitive(add, [Local(first), Local(second)], BOTH_LINEAR)
        self._adders[op_type] = add             # checked by add_primitive: one output
        return total

    def _check_linear_work(self, start: int, operation, kind) -> None:
        """Raise :class:`~tidu.errors.RuleContractError` if an operation the rule of
        ``operation`` emitted (the builder's operations from index ``start`` on) reads a linear value (a tangent
        or cotangent: an input of this builder, or the output of an operation it holds
        with a ``Linearized`` role) as a constant: with role ``PRIMARY``, or at an input
        its ``active_mask`` marks ``False``. Such work is not linear in the tangents (the
        JVP of ``sin`` emitting ``sin(dx)``, a transpose emitting ``sin(ct)``): a
        transpose or an evaluation of it would give a wrong derivative without an error.
        A rule replayed from a template was checked when it was recorded."""
        builder = self.builder
        index = builder._index
        for op_key in builder._op_keys[start:]:
            role = op_key.role
            mask = None if role is PRIMARY else role.active_mask
            for position, key in enumerate(op_key.inputs):
                if (mask is None or not mask[position]) and key in index and (
                        isinstance(key, Input) or key.operation.role is not PRIMARY):
                    what = "tangent" if kind is ADRuleKind.JVP else "cotangent"
                    where = ("with role PRIMARY" if mask is None else
                             f"at input {position}, which its role {role!r} marks constant")
                    raise RuleContractError(
                        op_name(operation), kind,
                        f"it emitted {op_name(op_key.operation)} reading the {what} "
                        f"{key!r} {where}: work on a {what} must be linear in it (role "
                        f"Linearized, with the mask True at that input); PRIMARY is for work "
                        f"on primal values only")

    def _check_linear_results(self, results: list, operation, kind) -> None:
        """Raise :class:`~tidu.errors.RuleContractError` if the rule of ``operation`` returned,
        as a tangent or cotangent, the output of work with role ``PRIMARY``: a primal value,
        which does not depend on the tangents (the JVP of ``sin`` returning ``cos(x)``, not
        ``dx * cos(x)``). Evaluated, it would be a wrong derivative without an error."""
        keys = self._keys
        for slot, local_id in enumerate(results):
            if local_id is None:
                continue
            key = keys[local_id]
            if type(key) is Derived and key._operation._role is PRIMARY:
                what = "tangent" if kind is ADRuleKind.JVP else "cotangent"
                raise RuleContractError(
                    op_name(operation), kind,
                    f"the {what} it returned for slot {slot} is id {local_id}, an output of "
                    f"{op_name(key._operation._operation)} with role PRIMARY: a primal value, "
                    f"which does not depend on the {what}s it was given (return an id it was "
                    f"given, the output of work with a Linearized role, or None for a zero)")

    def _checked(self, results, expected: int, operation, kind, what: str) -> list:
        if are_ids(results, expected, self._size()):
            return results
        return check_rule_results(results, expected, self.builder, operation, kind, what)

    def _recorder(self, rule_key, local_ids: list, keys: tuple, more_keys: list | tuple):
        """A recording builder for this rule call, or ``None`` when none can be recorded."""
        if not self._can_replay or not _structural(rule_key[0]):
            self.templates[rule_key] = _CALL
            return None
        ids = [i for i in local_ids if i is not None]
        all_keys = (*keys, *more_keys)
        if len(set(ids)) != len(ids) or len(set(all_keys)) != len(all_keys):
            return None                      # ambiguous here; maybe not at another node
        return _RecordingBuilder(self.builder, local_ids, keys, more_keys)


def _note_rule(error: Exception, operation, kind) -> None:
    """Name the op whose rule raised ``error`` in a note (Python 3.11+), unless it is a
    :class:`tidu.TiduError` (whose message names it) or says so already: the exception a
    rule's own bug raises (a ``KeyError``, say) keeps its type, and tells where it came from.
    """
    add_note = getattr(error, "add_note", None)
    if add_note is None or isinstance(error, TiduError):
        return
    note = f"(raised by the {kind.value} rule of {op_name(operation)})"
    if note not in getattr(error, "__notes__", ()):
        add_note(note)


def _structural(operation) -> bool:
    structural = getattr(operation, "structural_rules", None)
    return structural is not None and structural() is True


def _unknown_size() -> int:
    return -1


class _RecordingBuilder:
    """Forwards ``add_primitive`` to a builder and records each call by position.

    Positions (slots) are: ``0`` for a zero, then one per local id given
    (tangent or cotangent, in order), one per key given (primal values, in
    order), then one per output of each recorded operation, in order.
    """

    __slots__ = ("inner", "next_slot", "replayable", "shape", "slot_of_id", "slot_of_key",
                 "steps")

    def __init__(self, inner, local_ids: list, keys: tuple, more_keys: list | tuple) -> None:
        self.inner = inner
        self.shape = (len(local_ids), len(keys), len(more_keys))
        self.slot_of_id = {i: slot for slot, i in enumerate(local_ids, 1) if i is not None}
        self.slot_of_key = {k: slot for slot, k in enumerate((*keys, *more_keys),
                                                             1 + len(local_ids))}
        self.next_slot = 1 + len(local_ids) + len(keys) + len(more_keys)
        self.steps: list = []
        self.replayable = True

    def add_primitive(self, op, inputs, role) -> list[int]:
        ids = self.inner.add_primitive(op, inputs, role)    # checks everything, raises as usual
        input_slots = tuple(map(self._slot_of_ref, inputs))
        for local_id in ids:
            if local_id in self.slot_of_id:  # found an op already named: replay may not
                self.replayable = False
            else:
                self.slot_of_id[local_id] = self.next_slot
            self.next_slot += 1
        self.steps.append((op, role, len(ids), input_slots))
        return ids

    def _slot_of_ref(self, ref) -> int:
        slot = (self.slot_of_id.get(ref) if type(ref) is Local
                else self.slot_of_key.get(ref[0]) if type(ref) is External else None)
        if slot is None:
            self.replayable = False
            return 0
        return slot

    def __getattr__(self, name: str):
        self.replayable = False             # the rule uses more than add_primitive
        return getattr(self.inner, name)

    def __len__(self) -> int:
        self.replayable = False
        return len(self.inner)

    def __contains__(self, local_id) -> bool:
        self.replayable = False
        return local_id in self.inner

    def compile(self, results: list) -> Callable | str:
        """The compiled template of the recorded call, or ``_CALL`` if it cannot be replayed."""
        result_slots = tuple(0 if r is None else self.slot_of_id.get(r) for r in results)
        if not self.replayable or None in result_slots:
            return _CALL
        template = (tuple(self.steps), result_slots, self.shape)
        replay = _compiled.get(template)
        if replay is None:
            if len(_compiled) > _MAX_COMPILED:
                _compiled.clear()
            replay = _compiled[template] = compile_template(*template)
        return replay


_compiled: dict = {}        # (steps, result slots, shape) -> replay function, shared by transforms
_MAX_COMPILED = 4096


def compile_template(steps: tuple, result_slots: tuple, shape: tuple) -> Callable:
    """A straight-line function ``replay(keys, add, local_ids, keys_a, keys_b) -> result ids``.

    ``steps`` holds ``(op, role, output count, input slots)`` per operation;
    ``shape`` is ``(len(local_ids), len(keys_a), len(keys_b))``. ``add`` is a
    builder's ``add_unchecked`` and ``keys`` its list of value keys. For the JVP of
    ``x * y`` with both tangents the source reads::

        def replay(keys, add, local_ids, keys_a, keys_b):
            s1, s2, = local_ids
            s3, s4, = keys_a
            s5, = keys_b
            v0 = add(op0, (keys[s1], s4, ), role0, 1)
            v1 = add(op1, (s3, keys[s2], ), role1, 1)
            v2 = add(op2, (keys[v0], keys[v1], ), role2, 1)
            return [v2]
    """
    id_of: dict = {0: "None"}        # slot -> expression of its id (local ids, outputs)
    key_of: dict = {}                # slot -> expression of its key (keys given)
    lines = []
    slot = 1
    for source, count, names in (("local_ids", shape[0], id_of), ("keys_a", shape[1], key_of),
                                 ("keys_b", shape[2], key_of)):
        if count:
            lines.append("".join(f"s{slot + i}, " for i in range(count)) + f"= {source}")
        for i in range(count):
            names[slot + i] = f"s{slot + i}"
        slot += count
    namespace: dict = {}
    for index, (op, role, n_out, input_slots) in enumerate(steps):
        namespace[f"op{index}"] = op
        namespace[f"role{index}"] = role
        inputs = "".join(f"{key_of[s] if s in key_of else f'keys[{id_of[s]}]'}, "
                         for s in input_slots)
        lines.append(f"v{index} = add(op{index}, ({inputs}), role{index}, {n_out})")
        for output in range(n_out):
            id_of[slot] = f"v{index} + {output}" if output else f"v{index}"
            slot += 1
    lines.append(f"return [{', '.join(id_of[s] for s in result_slots)}]")
    source = "def replay(keys, add, local_ids, keys_a, keys_b):\n    " + "\n    ".join(lines)
    exec(compile(source, "<tidu rule template>", "exec"), namespace)  # noqa: S102
    return namespace["replay"]
