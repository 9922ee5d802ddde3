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
2. reverse, newest node first: the reverse walk of
   :func:`~tidu.eager.try_backward` (:func:`~tidu.eager.walk.reverse_walk`),
   propagating pairs (cotangent, tangent of the cotangent). On the fused path
   each node runs one graph, its backward graph linearized, that gives both for
   its inputs; a node whose inputs and incoming cotangents all have zero
   tangents runs its plain backward.

Every graph runs on the runtime's data through the executor (``compile_graph``,
once per cached plan, or ``execute_forward`` when the executor overrides it)
and sums go through ``add_operands``: an executor that runs ``try_backward``
runs ``try_hvp`` unchanged. The hooks are honoured as by ``try_backward``: an
executor that overrides one gets ``run_transposed_linear`` once per node that
receives a cotangent (after ``execute_forward`` replays what it reads), and the
tangents of the cotangents from the linearized backward graph.

>>> import math
>>> from tidu.eager import BackwardExecutor, EagerInput, RecordedGraph, Recorder
>>> from tidu.example_ops import Op
>>> from tidu.graph import Input, compiled
>>> class Executor(BackwardExecutor):          # the two methods try_backward needs: no more
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

from typing import Any, Container, Mapping, Sequence

from tidu.errors import InvalidArgumentError, MissingValueError, TiduError
from tidu.graph import ValueKey
from tidu.eager.executor import BackwardExecutor
from tidu.eager.plans import BackwardPlan, hvp_plan, tangent_plan
from tidu.eager.record import EagerError
from tidu.eager.walk import NodeRunner, NodeStep, check_start, group_sums, kept, node_data, \
    nodes_last_first, reverse_walk


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
    Hessian-vector products only, it saves the work of the gradient (on the
    fused path; an executor's ``run_transposed_linear`` computes them all).
    A node whose work needs an op without a JVP rule (the node's own, or one
    its backward graph runs) raises :class:`tidu.ADRuleError` naming that op;
    naming a non-leaf in ``tangents``, or a tangent the executor's ``check_seed``
    refuses for its leaf's value, raises :class:`~tidu.eager.EagerError`.
    The other argument checks are :func:`try_backward`'s. See the module for
    an example.
    """
    check_start("try_hvp", output_key, output_trace, seed, executor, keep)
    if not isinstance(tangents, Mapping):
        raise InvalidArgumentError(f"try_hvp: tangents must be a mapping from leaf keys to "
                                   f"tangent values, got {type(tangents).__name__}")
    pairs: dict[ValueKey, Any] = {output_key: _Pair(seed, None)}
    if output_trace is not None:
        nodes = nodes_last_first(output_trace)
        step = _Pairs(executor, ctx, leaf_cotangents)
        remat = step.runner.walk_nodes(nodes, counted=False)    # the forward sweep reads too
        step.primal = _forward_tangents(nodes, tangents, executor, step.plans, ctx, remat)
        reverse_walk(nodes, pairs, step, keep)
    cotangents = {key: p.cotangent for key, p in pairs.items() if p.cotangent is not None}
    cotangent_tangents = {key: p.tangent for key, p in pairs.items() if p.tangent is not None}
    return kept(cotangents, keep), kept(cotangent_tangents, keep)


def _run(plan, executor: BackwardExecutor, values: list, node) -> Sequence:
    try:
        return plan.runner(executor)(values)
    except MissingValueError as error:
        raise MissingValueError(f"{error}, which try_hvp at {node.recorded!r} needs") from None


# --- forward sweep: the tangents of the nodes' outputs ------------------------------------


def _forward_tangents(nodes: list, tangents: Mapping, executor: BackwardExecutor, plans: dict,
                      ctx, remat) -> dict:
    """The tangent of every value that has a non-zero one: the leaves' and the nodes' outputs'."""
    primal = dict(tangents)
    get = primal.get
    checked = set()
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
        for p in with_tangent:
            item = inputs[p]
            if item.trace is None and item.key not in checked:
                checked.add(item.key)
                _check_tangent(executor, item, get(item.key))
        plan = tangent_plan(node, with_tangent, ctx, plans)
        values = node_data(node, plan.data_keys)
        remat.fill(node, values, plan.reads)
        values += [get(inputs[p].key) for p in with_tangent]
        results = _run(plan, executor, values, node)
        for key, index in zip(node.output_keys, plan.output_positions):
            if index is not None:
                primal[key] = results[index]
    return primal


def _check_tangent(executor: BackwardExecutor, leaf, tangent) -> None:
    """A leaf's tangent must fit its value as a seed fits an output (``check_seed``): a
    tangent of another shape would broadcast through the rules to a wrong result."""
    if leaf.data is None:
        return
    try:
        executor.check_seed(tangent, leaf.data)
    except TiduError as error:
        raise EagerError(f"try_hvp: the tangent of leaf {leaf.key!r} does not fit its value "
                         f"({error})") from None


# --- reverse walk: (cotangent, tangent of the cotangent) pairs ----------------------------


class _Pair:
    """A cotangent and its tangent (either ``None``: zero, or not computed)."""

    __slots__ = ("cotangent", "tangent")

    def __init__(self, cotangent, tangent) -> None:
        self.cotangent = cotangent
        self.tangent = tangent

    def take_cotangent(self):
        """The cotangent, no longer held here (so a sum may reuse it in place)."""
        value, self.cotangent = self.cotangent, None
        return value

    def take_tangent(self):
        """The tangent, no longer held here."""
        value, self.tangent = self.tangent, None
        return value


class _Pairs(NodeStep):
    """``try_hvp``'s step: each node's cotangents with their tangents along the leaves'.

    A node whose inputs and incoming cotangents all have zero tangents runs its
    plain backward. Otherwise, on the fused path, one fused graph (the node's
    backward graph, linearized: :class:`~tidu.eager.plans.HvpPlan`) gives both;
    with executor hooks, the hooks give the cotangents and that graph, run
    through ``execute_forward`` when it is overridden, their tangents.
    """

    def __init__(self, executor: BackwardExecutor, ctx, leaf_cotangents: bool) -> None:
        super().__init__(ctx)
        self.executor = executor
        self.runner = NodeRunner(executor)
        self.leaf_cotangents = leaf_cotangents
        self.primal: dict = {}                    # the forward sweep's tangents

    def run(self, node, plan: BackwardPlan, incoming: list) -> list:
        forget = self.primal.pop
        for key in node.output_keys:       # every reader of the outputs ran: done with them
            forget(key, None)
        cotangent_out = [None if pair is None else pair.cotangent for pair in incoming]
        tangent_out = [None if pair is None else pair.tangent for pair in incoming]
        primal = self.primal.get
        inputs = node.inputs
        input_tangents = [primal(inputs[p].key) for p in plan.active_inputs]
        seed_tangents = group_sums(plan.seed_groups, tangent_out, self.executor.add_operands)
        runner = self.runner
        if _all_none(input_tangents) and _all_none(seed_tangents):
            return [None if c is None else _Pair(c, None)
                    for c in runner.run(node, plan, cotangent_out)]
        if runner.hooked:
            cotangents = runner.run(node, plan, cotangent_out)
            _, tangents = self._linearized(node, plan, cotangent_out, input_tangents,
                                           seed_tangents, (False,) * len(plan.active_inputs))
        else:
            wanted = None if self.leaf_cotangents else tuple([inputs[p].trace is not None
                                                              for p in plan.active_inputs])
            cotangents, tangents = self._linearized(node, plan, cotangent_out, input_tangents,
                                                    seed_tangents, wanted)
        return [None if c is None and t is None else _Pair(c, t)
                for c, t in zip(cotangents, tangents)]

    def _linearized(self, node, plan: BackwardPlan, cotangent_out: list, input_tangents: list,
                    seed_tangents: list, wanted: tuple | None) -> tuple[list, list]:
        """The active inputs' cotangents (those ``wanted``) and their tangents, from one run
        of the node's :class:`~tidu.eager.plans.HvpPlan`."""
        plan.fused()
        hvp = hvp_plan(plan, tuple([t is not None for t in input_tangents]),
                       tuple([t is not None for t in seed_tangents]), wanted)
        values = node_data(node, plan.data_keys)
        self.runner.remat.fill(node, values, hvp.reads)
        values += group_sums(plan.seed_groups, cotangent_out, self.executor.add_operands)
        values += [t for t in input_tangents if t is not None]
        values += [t for t in seed_tangents if t is not None]
        results = _run(hvp, self.executor, values, node)
        return ([None if i is None else results[i] for i in hvp.cotangent_outputs],
                [None if i is None else results[i] for i in hvp.tangent_outputs])

    def add(self, a: _Pair, b: _Pair) -> _Pair:
        """The pairwise sum; ``a`` is handed over, and so are its parts."""
        add = self.executor.add_operands
        if b.cotangent is not None:
            a.cotangent = (b.cotangent if a.cotangent is None
                           else add(a.take_cotangent(), b.cotangent))
        if b.tangent is not None:
            a.tangent = b.tangent if a.tangent is None else add(a.take_tangent(), b.tangent)
        return a


def _all_none(values: list) -> bool:
    for value in values:
        if value is not None:
            return False
    return True
