"""Run AD rules for a transform, replaying recorded rule templates where allowed.

A transform calls the same rule on many nodes that differ only in the values
they touch. When an op's rules are structural (see
:meth:`tidu.Primitive.structural_rules`), the first call for an (op, role,
zero pattern) is recorded: each operation it emitted, with every input named by
position (a tangent or cotangent it was given, a primal value it was given, or
an output of an earlier emission), and where its results came from. Later nodes
with the same op, role and zero pattern replay that template straight into the
graph builder, which gives exactly the operations the rule would emit, without
calling the rule or re-checking what it emits.

A template is recorded only when every id and key the rule was given is
distinct and everything it emitted can be named by position; otherwise the rule
is called for every node, as for ops whose rules are not structural.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from operator import is_
from typing import Any

from tidu.errors import ADRuleError, ADRuleKind
from tidu.graph import External, Local
from tidu.graph.operation import op_name
from tidu.rules.builder import GraphPrimitiveBuilder, are_ids, check_rule_results

_is_none = partial(is_, None)
_CALL = "call"          # templates[...] value: record nothing, call the rule every time


class RuleRunner:
    """Calls the JVP and transpose rules of one transform, emitting into ``builder``."""

    __slots__ = ("_can_replay", "_size", "builder", "ctx", "templates")

    def __init__(self, builder, ctx: Any) -> None:
        self.builder = builder
        self.ctx = ctx
        self.templates: dict = {}           # (op, role, zero pattern) -> RuleTemplate or _CALL
        self._can_replay = type(builder) is GraphPrimitiveBuilder
        self._size = builder._keys.__len__ if self._can_replay else _unknown_size

    def jvp(self, operation, primal_inputs: tuple, primal_outputs: list,
            tangents: list) -> list:
        """The output tangent ids of ``operation``'s JVP (``None`` for zeros)."""
        rule_key = (operation, None, tuple(map(_is_none, tangents)))
        template = self.templates.get(rule_key)
        if type(template) is RuleTemplate:
            return template.replay(self.builder, tangents, primal_inputs + tuple(primal_outputs))
        rule = getattr(operation, "jvp_rule", None)
        if rule is None:
            raise ADRuleError(op_name(operation), ADRuleKind.JVP, "it is not a tidu.Primitive")
        recorder = None
        if template is None:
            recorder = self._recorder(rule_key, tangents, primal_inputs + tuple(primal_outputs))
        results = rule(self.builder if recorder is None else recorder, primal_inputs, primal_outputs, tangents,
                       self.ctx)
        results = self._checked(results, len(primal_outputs), operation, ADRuleKind.JVP,
                                "tangents")
        if recorder is not None:
            self.templates[rule_key] = recorder.template(results)
        return results

    def transpose(self, operation, cotangents: list, inputs: tuple, role) -> list:
        """The input cotangent ids of linear ``operation``'s transpose (``None`` for zeros)."""
        rule_key = (operation, role, tuple(map(_is_none, cotangents)))
        template = self.templates.get(rule_key)
        if type(template) is RuleTemplate:
            return template.replay(self.builder, cotangents, inputs)
        rule = getattr(operation, "transpose_rule", None)
        if rule is None:
            raise ADRuleError(op_name(operation), ADRuleKind.TRANSPOSE,
                              "it is not a tidu.Primitive")
        recorder = None
        if template is None:
            recorder = self._recorder(rule_key, cotangents, inputs)
        results = rule(self.builder if recorder is None else recorder, cotangents, list(map(External, inputs)), role,
                       self.ctx)
        results = self._checked(results, len(inputs), operation, ADRuleKind.TRANSPOSE,
                                "cotangents")
        if recorder is not None:
            self.templates[rule_key] = recorder.template(results)
        return results

    def _checked(self, results, expected: int, operation, kind, what: str) -> list:
        if are_ids(results, expected, self._size()):
            return results
        return check_rule_results(results, expected, self.builder, operation, kind, what)

    def _recorder(self, rule_key, local_ids: list, external_keys: tuple):
        """A recording builder for this rule call, or ``None`` when none can be recorded."""
        if not self._can_replay or not _structural(rule_key[0]):
            self.templates[rule_key] = _CALL
            return None
        ids = [i for i in local_ids if i is not None]
        if len(set(ids)) != len(ids) or len(set(external_keys)) != len(external_keys):
            return None                      # ambiguous here; maybe not at another node
        return _RecordingBuilder(self.builder, local_ids, external_keys)


def _structural(operation) -> bool:
    structural = getattr(operation, "structural_rules", None)
    return structural is not None and structural() is True


def _unknown_size() -> int:
    return -1


class RuleTemplate:
    """What one rule call emitted, by position; :meth:`replay` emits it again.

    Positions (slots) are: ``0`` for a zero, then one per given local id (tangent
    or cotangent, in order), one per given key (primal values), then one per
    output of each step, in order.
    """

    __slots__ = ("dense", "results", "steps")

    def __init__(self, steps: tuple, results: tuple, dense: bool) -> None:
        self.steps = steps          # (op, role, output count, input slots) per emission
        self.results = results      # a slot per result
        self.dense = dense          # whether every local id given is an id (no zero)

    def replay(self, builder, local_ids: Sequence, external_keys: tuple) -> list:
        """Emit the steps for a node given these ids and keys; return its result ids."""
        keys = builder._keys
        if self.dense:                     # no zero among the local ids
            slot_keys = [None, *map(keys.__getitem__, local_ids), *external_keys]
        else:
            slot_keys = [None, *[None if i is None else keys[i] for i in local_ids],
                         *external_keys]
        add = builder.add_checked
        key_at = slot_keys.__getitem__
        for op, role, n_out, input_slots in self.steps:
            first = add(op, tuple(map(key_at, input_slots)), role, n_out)
            if n_out == 1:
                slot_keys.append(keys[first])
            else:
                slot_keys += keys[first:first + n_out]
        # every slot's key is a value of the builder but the zero slot's None
        return list(map(builder._index.get, map(key_at, self.results)))


class _RecordingBuilder:
    """Forwards ``add_primitive`` to a builder and records each call by position."""

    __slots__ = (
        "dense",
        "inner",
        "next_slot",
        "replayable",
        "slot_of_id",
        "slot_of_key",
        "steps",
    )

    def __init__(self, inner, local_ids: list, external_keys: tuple) -> None:
        self.inner = inner
        self.slot_of_id = {i: slot for slot, i in enumerate(local_ids, 1) if i is not None}
        self.slot_of_key = {k: slot for slot, k in enumerate(external_keys, 1 + len(local_ids))}
        self.next_slot = 1 + len(local_ids) + len(external_keys)
        self.dense = None not in local_ids
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

    def template(self, results: list) -> RuleTemplate | str:
        """The template of the recorded call, or ``_CALL`` if it cannot be replayed."""
        result_slots = tuple(0 if r is None else self.slot_of_id.get(r) for r in results)
        if not self.replayable or None in result_slots:
            return _CALL
        return RuleTemplate(tuple(self.steps), result_slots, self.dense)
