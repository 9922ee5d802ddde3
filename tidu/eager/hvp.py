"""Eager Hessian-vector products: ``try_hvp``, forward over reverse on the recorded trace.

A node's backward is a graph (its :class:`~tidu.eager.BackwardPlan`'s backward
graph, from the node's data and output cotangents to its inputs' cotangents).
Forward over reverse at a node is therefore :func:`tidu.linearize` of that
graph, with respect to the node's primal inputs and its incoming cotangents:
no primitive set writes an HVP rule. ``try_hvp`` makes two sweeps over the
trace:

1. forward, oldest node first: each node's outputs' tangents from its inputs'
   (the node's JVP, fused with the recomputation of the primal values it reads),
   starting from the leaves' tangents the caller gives;
2. reverse, newest node first, as :func:`~tidu.eager.try_backward` does, but
   propagating pairs (cotangent, tangent of the cotangent): each node runs one
   fused graph, the linearized backward graph, that gives both for its inputs.
   A node whose inputs and incoming cotangents all have zero tangents runs its
   plain backward graph.

Both sweeps run every node's work through the executor's ``compile_graph``
(one compiled graph per cached plan) and ``add_operands``: an executor that
runs ``try_backward`` runs ``try_hvp`` unchanged.

>>> import math
>>> from tidu.eager import BackwardExecutor, EagerInput, RecordedGraph, Recorder
>>> from tidu.example_ops import Op
>>> from tidu.graph import Input, compiled
>>> class Executor(BackwardExecutor):          # the two hooks try_backward needs: no more
...     def execute_forward(self, graph, data):
...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
...     def add_operands(self, a, b):
...         return a + b
>>> recorder = Recorder()
>>> def call(op, *args):                       # run op now and record it
...     recorded = RecordedGraph.from_primitive(op, recorder.fresh_input_keys(len(args)))
...     [value] = op.eval(None, [a.data for a in args])
...     [out] = recorder.record_graph(recorded, args, [value])
...     return EagerInput(out.key, out.trace, True, value)
>>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.5)
>>> y = call(Op.MUL, call(Op.SIN, x), x)       # y'' = 2 cos x - x sin x
>>> grads, hv = try_hvp(y.key, y.trace, 1.0, {x.key: 1.0}, Executor())
>>> abs(hv[x.key] - (2 * math.cos(0.5) - 0.5 * math.sin(0.5))) < 1e-12
True
"""

from __future__ import annotations

from typing import Any, Callable, Container, Mapping, Sequence

from tidu import linearize
from tidu.errors import InvalidArgumentError, MissingValueError
from tidu.graph import Graph, ValueKey
from tidu.eager.backward import (
    BackwardExecutor,
    BackwardPlan,
    _nodes_last_first,
    _output_cotangents,
    _plans_for,
    _run_node,
    _warn_if_overridden,
    backward_plan,
    canonical_graph,
    check_start,
    composite_cached,
    fused_graph,
    kept,
    store_plan,
)
from tidu.eager.record import EagerError

_TANGENT = object()             # the cache-key tag of tangent plans (equal to no op)


class _Compiled:
    """A plan's fused graph, compiled by the last executor that ran it."""

    __slots__ = ("graph", "load_keys", "_compiled")

    def runner(self, executor: BackwardExecutor) -> Callable[[Sequence[Any]], Sequence[Any]]:
        compiled = self._compiled
        if compiled is None or compiled[0] is not executor:
            compiled = self._compiled = (executor,
                                         executor.compile_graph(self.graph, self.load_keys))
        return compiled[1]


class TangentPlan(_Compiled):
    """Forward mode at a node: its outputs' tangents from those of some of its inputs.

    ``graph`` is the node's JVP with respect to the inputs at positions
    ``with_tangent``, fused with the recomputation of the primal values it
    reads, from the node's data (inputs, outputs, then the retained values
    ``data_keys``) and those inputs' tangents (``load_keys``, in that order).
    ``output_positions`` gives, per output slot, the index of its tangent among
    the graph's outputs (``None``: a zero tangent).
    """

    __slots__ = ("data_keys", "output_positions")

    def __init__(self, graph: Graph, input_keys: tuple, output_keys: tuple, data_keys: tuple,
                 with_tangent: tuple, ctx) -> None:
        distinct = list(dict.fromkeys(output_keys))
        linear = linearize(graph, distinct, [input_keys[p].key for p in with_tangent], ctx=ctx)
        tangent_of = dict(zip(distinct, linear.tangent_output_keys))
        targets = list(dict.fromkeys(k for k in linear.tangent_output_keys if k is not None))
        index = {key: i for i, key in enumerate(targets)}
        self.output_positions = tuple(None if tangent_of[key] is None else index[tangent_of[key]]
                                      for key in output_keys)
        tangent_inputs = tuple(linear.tangent_input_keys)
        self.data_keys = data_keys
        self.load_keys = input_keys + output_keys + data_keys + tangent_inputs
        self.graph = fused_graph(targets, set(self.load_keys), tangent_inputs)
        self._compiled = None


class HvpPlan(_Compiled):
    """Forward over reverse at a node: its backward graph, linearized.

    Built on a :class:`BackwardPlan`: ``graph`` computes the active inputs'
    cotangents and their tangents, from what the backward graph reads
    (``plan.load_keys``), then the tangents of the active inputs marked in
    ``input_mask`` and of the seeds marked in ``seed_mask``. ``wanted`` marks
    the active inputs whose cotangents are computed (``None``: all); every
    tangent is. Per active input, ``cotangent_outputs`` and ``tangent_outputs``
    index the graph's outputs (``None``: zero, or not computed).
    """

    __slots__ = ("cotangent_outputs", "tangent_outputs")

    def __init__(self, plan: BackwardPlan, input_mask: tuple, seed_mask: tuple,
                 wanted: tuple | None) -> None:
        backward = plan.fused()
        wrt = [plan.input_keys[p].key for p, has in zip(plan.active_inputs, input_mask) if has]
        wrt += [key.key for key, has in zip(plan.seed_keys, seed_mask) if has]
        cotangents = list(backward.output_keys)
        linear = linearize([backward, plan.graph], cotangents, wrt, ctx=plan.ctx)
        if wanted is None:
            wanted = (True,) * len(plan.active_inputs)
        computed = sorted({i for i, want in zip(plan.cotangent_outputs, wanted)
                           if want and i is not None})
        targets = [cotangents[i] for i in computed]
        cotangent_at = {i: n for n, i in enumerate(computed)}
        tangent_at = {}
        for i, key in enumerate(linear.tangent_output_keys):
            if key is not None:
                tangent_at[i] = len(targets)
                targets.append(key)
        tangent_inputs = tuple(linear.tangent_input_keys)
        self.load_keys = plan.load_keys + tangent_inputs
        self.graph = fused_graph(targets, set(self.load_keys), plan.seed_keys + tangent_inputs)
        self.cotangent_outputs = tuple(cotangent_at[i] if want and i is not None else None
                                       for i, want in zip(plan.cotangent_outputs, wanted))
        self.tangent_outputs = tuple(None if i is None else tangent_at.get(i)
                                     for i in plan.cotangent_outputs)
        self._compiled = None


def try_hvp(output_key: ValueKey, output_trace, seed, tangents: Mapping[ValueKey, Any],
            executor: BackwardExecutor, ctx=None, *, keep: Container | None = None,
            leaf_cotangents: bool = True
            ) -> tuple[dict[ValueKey, Any], dict[ValueKey, Any]]:
    """Cotangents (as :func:`try_backward` returns them) and their tangents along ``tangents``.

    ``tangents`` maps leaf keys to tangent values (leaves not named have a zero
    tangent; the seed is a constant). The second dict holds, for every key of
    the first whose cotangent has a non-zero tangent, that tangent (a key absent
    from it has a zero one): for a real scalar output seeded with 1, the
    gradient and the Hessian-vector product ``H v``. Complex values follow
    tidu's convention: a cotangent is the adjoint under ``Re<a, b>`` and its
    tangent is the JVP of that (forward mode as in JAX), so for a real loss of
    ``z`` the result is the real Hessian in ``(Re z, Im z)`` applied to
    ``(Re v, Im v)``, packed as a complex number.

    ``keep`` restricts both results to its keys, releasing every other
    cotangent and tangent after its last use; ``ctx`` is passed to the rules.
    ``leaf_cotangents=False`` skips the leaves' cotangents where their tangents
    are computed (the first dict may then lack them): for callers that want the
    Hessian-vector products only, it saves the work of the gradient.
    A node whose work needs an op without a JVP rule (the node's own, or one
    its backward graph runs) raises :class:`tidu.ADRuleError` naming that op;
    naming a non-leaf in ``tangents`` raises :class:`~tidu.eager.EagerError`.
    The other argument checks are :func:`try_backward`'s.
    """
    check_start("try_hvp", output_key, output_trace, seed, executor, keep)
    if not isinstance(tangents, Mapping):
        raise InvalidArgumentError(f"try_hvp: tangents must be a mapping from leaf keys to "
                                   f"tangent values, got {type(tangents).__name__}")
    cotangents: dict[ValueKey, Any] = {output_key: seed}
    cotangent_tangents: dict[ValueKey, Any] = {}
    if output_trace is not None:
        _warn_if_overridden(executor)
        nodes = _nodes_last_first(output_trace)
        plans = _plans_for(ctx)
        primal_tangents = _forward_tangents(nodes, tangents, executor, ctx, plans)
        _reverse(nodes, cotangents, cotangent_tangents, primal_tangents, executor, ctx, plans,
                 keep, leaf_cotangents)
    return kept(cotangents, keep), kept(cotangent_tangents, keep)


def _node_data(node, data_keys: tuple) -> list:
    """The node's inputs', outputs' and retained values, in a plan's load order."""
    values = [item.data for item in node.inputs]
    values += node.output_data
    if data_keys:
        retained = node.retained
        values += [retained[key] for key in data_keys]
    return values


def _run(plan: _Compiled, executor: BackwardExecutor, values: list, node) -> Sequence:
    try:
        return plan.runner(executor)(values)
    except MissingValueError as error:
        raise MissingValueError(f"{error}, which try_hvp at {node.recorded!r} needs") from None


# --- forward sweep: the tangents of the nodes' outputs ------------------------------------


def _forward_tangents(nodes: list, tangents: Mapping, executor: BackwardExecutor, ctx,
                      plans: dict) -> dict:
    """The tangent of every value that has a non-zero one: the leaves' and the nodes' outputs'."""
    primal = dict(tangents)
    get = primal.get
    for node in reversed(nodes):                      # oldest first
        key = node.output_key
        if key is not None:
            named = key in tangents
        else:
            named = any(k in tangents for k in node.output_keys)
        if named:
            raise EagerError(f"try_hvp: tangents names an output of {node.recorded!r}: only "
                             "leaves take tangents")
        inputs = node.inputs
        with_tangent = tuple([p for p in node.active_inputs if get(inputs[p].key) is not None])
        if not with_tangent:
            continue
        plan = _tangent_plan(node, with_tangent, ctx, plans)
        values = _node_data(node, plan.data_keys)
        values += [get(inputs[p].key) for p in with_tangent]
        results = _run(plan, executor, values, node)
        if key is not None:
            index = plan.output_positions[0]
            if index is not None:
                primal[key] = results[index]
            continue
        for key, index in zip(node.output_keys, plan.output_positions):
            if index is not None:
                primal[key] = results[index]
    return primal


def _tangent_plan(node, with_tangent: tuple, ctx, plans: dict) -> TangentPlan:
    """The node's forward-mode plan, cached as its backward plans are."""
    recorded = node.recorded
    op = recorded.primitive
    if op is None:
        data_keys = tuple(node.retained) if node.retained else ()
        return composite_cached(
            recorded, (_TANGENT, with_tangent, data_keys), ctx, plans,
            lambda: TangentPlan(recorded.graph, tuple(recorded.graph.input_keys),
                                recorded.output_keys, data_keys, with_tangent, ctx))
    cache_key = (_TANGENT, op, with_tangent)
    plan = plans.get(cache_key)
    if plan is None:
        graph, input_keys, output_keys = canonical_graph(op)
        plan = TangentPlan(graph, input_keys, output_keys, (), with_tangent, ctx)
        store_plan(plans, cache_key, plan)
    return plan


# --- reverse sweep: (cotangent, tangent of the cotangent) pairs ---------------------------


def _reverse(nodes: list, cotangents: dict, cotangent_tangents: dict, primal_tangents: dict,
             executor: BackwardExecutor, ctx, plans: dict, keep: Container | None,
             leaf_cotangents: bool) -> None:
    """Every node's backward, newest first, with the tangents of the cotangents alongside."""
    add = executor.add_operands
    primal = primal_tangents.get
    forget = primal_tangents.pop
    for node in nodes:
        key = node.output_key
        if key is not None:                   # one output
            forget(key, None)                 # every reader of the output ran already
            if keep is None or key in keep:
                cotangent, tangent = cotangents.get(key), cotangent_tangents.get(key)
            else:
                cotangent = cotangents.pop(key, None)
                tangent = cotangent_tangents.pop(key, None)
            if cotangent is None:
                continue
            cotangent_out, tangent_out, active_outputs = [cotangent], [tangent], _FIRST_ONLY
        else:
            output_keys = node.output_keys
            for key in output_keys:
                forget(key, None)
            cotangent_out = _output_cotangents(cotangents, output_keys, keep)
            tangent_out = _output_cotangents(cotangent_tangents, output_keys, keep)
            active_outputs = tuple([i for i, c in enumerate(cotangent_out) if c is not None])
            if not active_outputs:
                continue
        op = node.recorded.primitive
        plan = plans.get((op, node.active_inputs, active_outputs)) if op is not None else None
        if plan is None:
            plan = backward_plan(node, node.active_inputs, active_outputs, ctx, plans)
        if plan.backward_graph is None:
            plan.fused()
        groups = plan.seed_groups
        inputs = node.inputs
        input_tangents = [primal(inputs[p].key) for p in plan.active_inputs]
        seed_tangents = (tangent_out if len(tangent_out) == 1 and len(groups) == 1
                         else _summed(groups, tangent_out, executor))
        if _all_none(input_tangents) and _all_none(seed_tangents):
            cotangent_in, tangent_in = _run_node(node, plan, cotangent_out, executor), ()
        else:
            wanted = None if leaf_cotangents else tuple([inputs[p].trace is not None
                                                         for p in plan.active_inputs])
            cotangent_in, tangent_in = _run_hvp(node, plan, cotangent_out, input_tangents,
                                                seed_tangents, wanted, executor)
        for position, value in zip(plan.active_inputs, cotangent_in):
            if value is not None:
                key = inputs[position].key
                if key in cotangents:        # handed over (popped), so it may be summed in place
                    cotangents[key] = add(cotangents.pop(key), value)
                else:
                    cotangents[key] = value
        for position, value in zip(plan.active_inputs, tangent_in):
            if value is not None:
                key = inputs[position].key
                if key in cotangent_tangents:
                    cotangent_tangents[key] = add(cotangent_tangents.pop(key), value)
                else:
                    cotangent_tangents[key] = value


_FIRST_ONLY = (0,)


def _all_none(values: list) -> bool:
    for value in values:
        if value is not None:
            return False
    return True


def _summed(groups: tuple, values: list, executor: BackwardExecutor) -> list:
    """Per group of output slots, the sum of its values that are not ``None`` (or ``None``)."""
    sums = []
    for slots in groups:
        total = None
        for slot in slots:
            value = values[slot]
            if value is not None:
                total = value if total is None else executor.add_operands(total, value)
        sums.append(total)
    return sums


def _run_hvp(node, plan: BackwardPlan, cotangent_out: list, input_tangents: list,
             seed_tangents: list, wanted: tuple | None, executor: BackwardExecutor
             ) -> tuple[list, list]:
    """The active inputs' cotangents and their tangents, from one run of the node's HvpPlan."""
    masks = (tuple([t is not None for t in input_tangents]),
             tuple([t is not None for t in seed_tangents]), wanted)
    hvp = plan.derived.get(masks)
    if hvp is None:
        hvp = plan.derived[masks] = HvpPlan(plan, *masks)
    values = _node_data(node, plan.data_keys)
    if len(cotangent_out) == 1 and len(plan.seed_groups) == 1:
        values.append(cotangent_out[0])
    else:
        values += _summed(plan.seed_groups, cotangent_out, executor)
    values += [t for t in input_tangents if t is not None]
    values += [t for t in seed_tangents if t is not None]
    results = _run(hvp, executor, values, node)
    return ([None if i is None else results[i] for i in hvp.cotangent_outputs],
            [None if i is None else results[i] for i in hvp.tangent_outputs])
