"""Eager reverse mode: ``BackwardExecutor`` and ``try_backward``.

``try_backward`` walks the trace from an output back to the leaves, last node
first. At each node it takes a cached *backward plan* for the node's structure
and the slots that carry cotangents: one backward graph that recomputes the
primal values the node's transposed JVP reads and runs that transpose, from the
node's data and output cotangents to its active inputs' cotangents. The
executor compiles that graph once per plan (``compile_graph``) and runs it at
every node with the plan; it sums the cotangents of a value read twice
(``add_operands``). That is the one path: an executor's override of the old
``run_transposed_linear`` hook is ignored, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import abc
import threading
import warnings
from operator import attrgetter
from typing import Any, Callable, Container, Mapping, Sequence

from tidu import LinearizedGraph, linear_transpose, linearize
from tidu.errors import InvalidArgumentError, MissingValueError
from tidu.graph import External, Graph, GraphBuilder, Input, Local, ValueKey, schedule
from tidu.eager.record import EagerError
from tidu.eager.trace import Trace


class BackwardExecutor(abc.ABC):
    """What a runtime provides so tidu can run backward on its data.

    Required: ``execute_forward`` (evaluate a graph of the runtime's operations
    on its data) and ``add_operands`` (sum two cotangents of one value).
    Optional: ``compile_graph`` (turn a backward graph into a function of
    positional values, once per plan; the default calls ``execute_forward``,
    override it for speed) and ``check_seed`` (refuse seeds that do not fit
    the output, such as one of the wrong shape or dtype: tidu knows neither).

    ``run_transposed_linear`` is deprecated and no longer called by
    :func:`try_backward`: an override of it is ignored (with a
    ``DeprecationWarning`` once per class), since every node runs its fused
    backward graph through ``compile_graph``. Calling it directly still works
    for this release.
    """

    @abc.abstractmethod
    def execute_forward(self, graph: Graph, initial_data: Mapping[ValueKey, Any]
                        ) -> Mapping[ValueKey, Any]:
        """Evaluate ``graph`` from ``initial_data``; return at least its outputs' values, by key."""

    @abc.abstractmethod
    def add_operands(self, a, b):
        """``a + b`` for two cotangents of the same value.

        tidu hands over ``a`` where it can: it keeps no reference to it. A runtime
        that can tell nothing else holds ``a`` (no view, no other key) may add
        ``b`` into it in place and return it.
        """

    def check_seed(self, seed, output) -> None:
        """Raise a :class:`tidu.TiduError` if ``seed`` cannot be the cotangent of ``output``.

        ``try_backward`` calls it once, with the recorded output's data, before
        any work: tidu knows no shapes or dtypes, so the runtime checks that the
        seed has the output's shape and a dtype its cotangent may have. The default
        accepts any seed (``None`` is refused by ``try_backward`` itself).
        """

    def compile_graph(self, graph: Graph, input_keys: Sequence[ValueKey]
                      ) -> Callable[[Sequence[Any]], Sequence[Any]]:
        """A function from the values of ``input_keys`` (in order) to ``graph``'s outputs' values.

        Backward compiles each cached backward plan once and then calls the
        result at every node with that plan. The default runs
        ``execute_forward``; override it to skip that call's dict round trip,
        e.g. with ``tidu.graph.compiled(graph).runner(input_keys)``.
        """
        outputs = graph.output_keys

        def run(values: Sequence[Any]) -> list:
            computed = self.execute_forward(graph, dict(zip(input_keys, values)))
            try:
                return [computed[key] for key in outputs]
            except KeyError as missing:
                raise MissingValueError(f"the executor's execute_forward did not provide "
                                        f"{missing.args[0]!r}") from None
        return run

    def run_transposed_linear(self, linear: LinearizedGraph, cotangent_out: Sequence[Any | None],
                              external_data: Mapping[ValueKey, Any], ctx
                              ) -> Sequence[Any | None]:
        """Deprecated: cotangents of ``linear``'s tangent inputs, given ones of its tangent outputs.

        :func:`try_backward` no longer calls it. This runs the transposed graph
        with ``execute_forward``.
        """
        warnings.warn(_DEPRECATED_HOOK, DeprecationWarning, stacklevel=2)
        transposed = transposed_of(linear, ctx)
        data = dict(external_data)
        seeds = iter(transposed.tangent_input_keys)
        for output_id, cotangent in zip(linear.tangent_outputs, cotangent_out):
            if output_id is None:
                continue
            if cotangent is None:
                raise MissingValueError(
                    f"no cotangent given for tangent output {linear.graph.value_keys[output_id]!r}")
            data[next(seeds)] = cotangent
        values = self.execute_forward(transposed.graph, data)
        return [None if key is None else values[key] for key in transposed.tangent_output_keys]


_DEPRECATED_HOOK = ("BackwardExecutor.run_transposed_linear is deprecated and no longer called: "
                    "try_backward runs each node's fused backward graph through compile_graph")
_warned_classes: set = set()


def _warn_if_overridden(executor: BackwardExecutor) -> None:
    """One ``DeprecationWarning`` per executor class that overrides ``run_transposed_linear``."""
    cls = type(executor)
    if cls.run_transposed_linear is BackwardExecutor.run_transposed_linear:
        return
    if cls not in _warned_classes:
        _warned_classes.add(cls)
        warnings.warn(f"{cls.__name__} overrides run_transposed_linear, which is deprecated "
                      "and ignored: try_backward runs each node's fused backward graph through "
                      "compile_graph (override that to run backward work your own way)",
                      DeprecationWarning, stacklevel=3)


_memo_lock = threading.Lock()


def transposed_of(linear: LinearizedGraph, ctx=None) -> LinearizedGraph:
    """``linear_transpose(linear)``, computed once per linear graph and kept on it."""
    memo = linear.__dict__.get("_transposed")
    if memo is None:
        with _memo_lock:
            memo = linear.__dict__.get("_transposed")
            if memo is None:
                memo = linear_transpose(linear, ctx)
                object.__setattr__(linear, "_transposed", memo)
    return memo


class _Canonical:
    """Input keys of the shared one-op graphs that primitive nodes' plans are built on."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __eq__(self, other):
        return type(other) is _Canonical and other.index == self.index

    def __hash__(self):
        return hash((_Canonical, self.index))

    def __repr__(self) -> str:
        return f"arg{self.index}"


class BackwardPlan:
    """What backward does at a node of one structure with given active inputs and outputs.

    ``linear`` maps the active inputs' tangents (in ``active_inputs`` order) to the
    tangents of the distinct graph values behind the active outputs; output slots
    naming the same value (a graph may list one value twice) form one group in
    ``output_groups``, whose cotangents backward sums first. ``input_keys``,
    ``output_keys`` and ``data_keys`` name the node's data in the node's graph.

    ``backward_graph`` fuses the recomputation of the primal values ``linear``
    reads with the transpose of ``linear``: from the node's data
    (``input_keys``, ``output_keys``, then ``data_keys``) and one seed per
    ``seed_groups`` entry, it computes the active inputs' cotangents;
    ``cotangent_outputs`` gives, per active input, the index of its cotangent
    among the graph's outputs (``None`` for a zero). The plan is built with one
    ``ctx`` and used only with that ``ctx``.
    """

    __slots__ = ("graph", "linear", "input_keys", "output_keys", "data_keys", "active_inputs",
                 "output_groups", "seed_groups", "seed_keys", "backward_graph", "load_keys",
                 "cotangent_outputs", "all_outputs", "derived", "_compiled", "_ctx")

    def __init__(self, graph: Graph, input_keys, output_keys, active_inputs, active_outputs,
                 data_keys, ctx) -> None:
        self.graph = graph
        self.input_keys = tuple(input_keys)
        self.output_keys = tuple(output_keys)
        self.data_keys = tuple(data_keys)
        self.active_inputs = tuple(active_inputs)
        groups: dict = {}
        for slot in active_outputs:
            groups.setdefault(self.output_keys[slot], []).append(slot)
        self.output_groups = tuple(tuple(slots) for slots in groups.values())
        wrt = [self.input_keys[i].key for i in self.active_inputs]
        self.linear = linearize(graph, list(groups), wrt, ctx=ctx)
        self._ctx = ctx
        self._compiled = None
        self.derived: dict = {}        # plans built on this one (try_hvp's, create_graph's)
        self.backward_graph = None

    def _fuse(self) -> None:
        transposed = transposed_of(self.linear, self._ctx)
        # A group whose value does not depend on the active inputs takes no seed.
        self.seed_groups = tuple(slots for slots, output_id
                                 in zip(self.output_groups, self.linear.tangent_outputs)
                                 if output_id is not None)
        self.seed_keys = seed_keys = tuple(transposed.tangent_input_keys)
        self.load_keys = self.input_keys + self.output_keys + self.data_keys + seed_keys
        targets = [key for key in transposed.tangent_output_keys if key is not None]
        outputs = iter(range(len(targets)))
        self.cotangent_outputs = tuple(None if key is None else next(outputs)
                                       for key in transposed.tangent_output_keys)
        self.all_outputs = self.cotangent_outputs == tuple(range(len(targets)))
        # last: other threads test it to skip _fuse
        self.backward_graph = fused_graph(targets, set(self.load_keys), seed_keys)

    def fused(self) -> Graph:
        """``backward_graph``, built first if needed (with the plan's ``ctx``)."""
        if self.backward_graph is None:
            self._fuse()
        return self.backward_graph

    @property
    def ctx(self):
        """The ``ctx`` the plan was built with (and is used with)."""
        return self._ctx

    def runner(self, executor: "BackwardExecutor") -> Callable[[Sequence[Any]], Sequence[Any]]:
        """``backward_graph`` compiled by ``executor`` (kept for the last executor used).

        The graph is built on first use, with the plan's ``ctx`` passed to the
        transpose rules.
        """
        compiled = self._compiled
        if compiled is None or compiled[0] is not executor:
            compiled = (executor, executor.compile_graph(self.fused(), self.load_keys))
            self._compiled = compiled
        return compiled[1]


def fused_graph(targets: Sequence[ValueKey], known: set, input_keys: Sequence[ValueKey]) -> Graph:
    """One graph computing ``targets`` from the ``known`` keys, by the operations they need.

    ``input_keys`` (``Input`` keys among ``known``) become the graph's inputs, so a
    target may be one of them; every other known value is read as ``External``.
    """
    builder = GraphBuilder()
    for key in input_keys:
        builder.add_input(key.key)
    for op_key in schedule(targets, known | set(input_keys)):
        builder.add_operation(op_key.operation, [External(k) for k in op_key.inputs], op_key.role)
    builder.set_outputs([builder.local_id(key) for key in targets])
    return builder.build()


# Plans of primitive nodes, shared across calls: {ctx key: {(op, active inputs,
# active outputs): plan}}. Rules may read ctx, so each ctx value has its own plans.
_plans: dict = {}
_PLAN_CACHE_SIZE = 4096          # plans per ctx value
_CTX_CACHE_SIZE = 16             # ctx values with plans


def _plans_for(ctx) -> dict:
    """The plan cache for ``ctx``: shared when ``ctx`` is hashable by value, else this call's own.

    A ctx hashed by identity (a plain object) may change between calls without
    changing its hash, so it gets fresh plans per call, as an unhashable one does.
    """
    key = _ctx_key(ctx)
    if key is None:
        return {}
    plans = _plans.get(key)
    if plans is None:
        if len(_plans) >= _CTX_CACHE_SIZE:
            _plans.clear()
        plans = _plans.setdefault(key, {})
    return plans


def _ctx_key(ctx):
    """``(type(ctx), ctx)``, the key of ``ctx``'s shared plans, or ``None`` if it gets none."""
    if ctx is not None and type(ctx).__hash__ in (None, object.__hash__):
        return None
    key = (type(ctx), ctx)
    try:
        hash(key)
    except TypeError:                     # hashable type, unhashable content: ((1, []),)
        return None
    return key


def canonical_graph(op) -> tuple[Graph, tuple, tuple]:
    """A one-op graph of ``op`` on placeholder inputs: the graph, its input and output keys."""
    builder = GraphBuilder()
    ids = [builder.add_input(_Canonical(i)) for i in range(op.input_count())]
    builder.set_outputs(builder.add_operation(op, [Local(i) for i in ids]))
    graph = builder.build()
    return graph, graph.input_keys, graph.output_keys


def backward_plan(node, active_inputs: tuple, active_outputs: tuple, ctx,
                  plans: dict | None = None, retained: bool = True) -> BackwardPlan:
    """The plan for ``node``: shared per (op, active slots) in ``plans`` for primitive nodes.

    ``plans`` defaults to the shared cache for ``ctx``. A composite node's plans
    are kept on its ``RecordedGraph`` (they live as long as it), per ``ctx`` value
    and retained keys. ``retained=False`` ignores the node's retained values: its
    backward graph recomputes them from the inputs.
    """
    recorded = node.recorded
    op = recorded.primitive
    if op is None:
        data_keys = tuple(node.retained) if retained and node.retained else ()
        return composite_cached(
            recorded, (active_inputs, active_outputs, data_keys), ctx,
            _plans_for(ctx) if plans is None else plans,
            lambda: BackwardPlan(recorded.graph, [Input(k) for k in recorded.input_keys],
                                 recorded.output_keys, active_inputs, active_outputs, data_keys,
                                 ctx))
    if plans is None:
        plans = _plans_for(ctx)
    cache_key = (op, active_inputs, active_outputs)
    plan = plans.get(cache_key)
    if plan is None:
        graph, input_keys, output_keys = canonical_graph(op)
        plan = BackwardPlan(graph, input_keys, output_keys, active_inputs, active_outputs, (), ctx)
        store_plan(plans, cache_key, plan)
    return plan


def store_plan(plans: dict, key, plan) -> None:
    """``plans[key] = plan``, starting the cache over when it is full."""
    if len(plans) >= _PLAN_CACHE_SIZE:
        plans.clear()
    plans[key] = plan


def composite_cached(recorded, detail: tuple, ctx, plans: dict, make: Callable[[], Any]):
    """``make()``, cached on the composite ``recorded`` graph under ``detail`` and ``ctx``.

    Kept there (living as long as the graph) only when ``plans`` is ``ctx``'s
    shared cache: a ``ctx`` that gets no shared plans gets fresh ones here too.
    """
    ctx_key = _ctx_key(ctx)
    shared = recorded._plans if ctx_key is not None and plans is _plans.get(ctx_key) else None
    cache_key = (ctx_key, detail)
    plan = None if shared is None else shared.get(cache_key)
    if plan is None:
        plan = make()
        if shared is not None:
            store_plan(shared, cache_key, plan)
    return plan


def _nodes_last_first(output_trace) -> list:
    """Every trace node reachable from ``output_trace``, consumers before their inputs.

    A node is always recorded after the nodes of its inputs, so ordering by
    recording serial, newest first, is a reverse topological order.
    """
    seen = {output_trace}
    stack = [output_trace]
    while stack:
        for item in stack.pop().inputs:
            parent = item.trace
            if parent is not None and parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return sorted(seen, key=_serial, reverse=True)


_serial = attrgetter("serial")


def try_backward(output_key: ValueKey, output_trace, seed, executor: BackwardExecutor,
                 ctx=None, *, keep: Container | None = None) -> dict[ValueKey, Any]:
    """Propagate ``seed`` (the cotangent of ``output_key``) back through the trace.

    Returns the accumulated cotangent of every eager value key that received
    one (leaves and intermediates; inputs with ``requires_grad=False`` get
    none). With ``keep`` (a container of keys, e.g. the leaves), only the keys
    in it are returned, and every other cotangent is released right after its
    last use, so backward holds little more than the forward's saved values. An
    output with no trace gets just the seed back. The trace is not changed, so
    calling this twice gives the same result. Plans are cached per ``ctx`` value,
    since rules may read it.

    Checked first, at O(1) cost: ``output_key`` is a ``ValueKey`` output by
    ``output_trace``, ``executor`` a :class:`BackwardExecutor`, ``seed`` not
    ``None``; then ``executor.check_seed(seed, output_data)`` checks what only the
    runtime knows (shape, dtype). Misuse raises a :class:`tidu.TiduError`.
    """
    check_start("try_backward", output_key, output_trace, seed, executor, keep)
    cotangents: dict[ValueKey, Any] = {output_key: seed}
    if output_trace is not None:
        _warn_if_overridden(executor)
        _propagate(cotangents, output_trace, executor, ctx, keep)
    return kept(cotangents, keep)


def check_start(function: str, output_key, output_trace, seed, executor, keep) -> None:
    """The O(1) checks of a backward walk's arguments (see :func:`try_backward`).

    ``seed`` is the seed's data; ``executor.check_seed`` is asked last.
    """
    if not isinstance(output_key, ValueKey):
        raise InvalidArgumentError(f"{function}: output_key must be a ValueKey, got "
                                   f"{output_key!r}")
    if not isinstance(executor, BackwardExecutor):
        got = (f"the class {executor.__name__} (pass an instance)" if isinstance(executor, type)
               else "None" if executor is None else type(executor).__name__)
        raise InvalidArgumentError(f"{function} needs a BackwardExecutor, got {got}")
    if seed is None:
        raise InvalidArgumentError(f"{function}: the seed (the cotangent of {output_key!r}) "
                                   "is None; pass a value, e.g. 1.0 for a real scalar output")
    if keep is not None and not hasattr(keep, "__contains__"):
        raise InvalidArgumentError(f"{function}: keep must be a container of value keys, got "
                                   f"{type(keep).__name__}")
    if output_trace is not None:
        if not isinstance(output_trace, Trace):
            raise InvalidArgumentError(f"{function}: output_trace must be a Trace or None, got "
                                       f"{type(output_trace).__name__}")
        output_keys = output_trace.output_keys
        if output_key not in output_keys:
            raise EagerError(f"{output_key!r} is not an output of {output_trace!r}")
        executor.check_seed(seed, output_trace.output_data[output_keys.index(output_key)])


def kept(values: dict, keep: Container | None) -> dict:
    """``values`` restricted to the keys in ``keep`` (all of them without ``keep``)."""
    if keep is None:
        return values
    return {key: value for key, value in values.items() if key in keep}


def _propagate(cotangents: dict, output_trace, executor: BackwardExecutor, ctx,
               keep: Container | None) -> None:
    """Run every node's backward, newest first, accumulating into ``cotangents``."""
    add = executor.add_operands
    get = cotangents.get
    plans = _plans_for(ctx)
    for node in _nodes_last_first(output_trace):
        key = node.output_key
        if key is not None:                 # one output
            cotangent = get(key) if keep is None or key in keep else cotangents.pop(key, None)
            if cotangent is None:
                continue
            cotangent_out = [cotangent]
            active_outputs = _FIRST_ONLY
        else:
            cotangent_out = _output_cotangents(cotangents, node.output_keys, keep)
            active_outputs = tuple(i for i, c in enumerate(cotangent_out) if c is not None)
            if not active_outputs:
                continue
        op = node.recorded.primitive
        plan = plans.get((op, node.active_inputs, active_outputs)) if op is not None else None
        if plan is None:
            plan = backward_plan(node, node.active_inputs, active_outputs, ctx, plans)
        cotangent_in = _run_node(node, plan, cotangent_out, executor)
        inputs = node.inputs
        for position, cotangent in zip(plan.active_inputs, cotangent_in):
            if cotangent is not None:
                key = inputs[position].key
                if key in cotangents:       # handed over (popped), so it may be summed in place
                    cotangents[key] = add(cotangents.pop(key), cotangent)
                else:
                    cotangents[key] = cotangent


_FIRST_ONLY = (0,)


def _output_cotangents(cotangents: dict, keys: tuple, keep: Container | None) -> list:
    """The cotangent of each of a node's output keys (``None``: none), released unless kept."""
    if keep is None:
        return [cotangents.get(key) for key in keys]
    return [cotangents.get(key) if key in keep else cotangents.pop(key, None) for key in keys]


def _seeds(groups, cotangent_out: list, executor: BackwardExecutor) -> list:
    """One cotangent per group of output slots, summed over the group."""
    seeds = []
    for slots in groups:
        seed = cotangent_out[slots[0]]
        for slot in slots[1:]:
            seed = executor.add_operands(seed, cotangent_out[slot])
        seeds.append(seed)
    return seeds


def _run_node(node, plan: BackwardPlan, cotangent_out: list, executor: BackwardExecutor
              ) -> list:
    """The active inputs' cotangents, from one run of the plan's compiled backward graph."""
    run = plan.runner(executor)
    values = [item.data for item in node.inputs]
    values += node.output_data
    if plan.data_keys:
        retained = node.retained
        values += [retained[key] for key in plan.data_keys]
    if len(cotangent_out) == 1 and len(plan.seed_groups) == 1:
        values.append(cotangent_out[0])
    else:
        values += _seeds(plan.seed_groups, cotangent_out, executor)
    try:
        results = run(values)
    except MissingValueError as error:
        raise MissingValueError(f"{error}, which the backward of {node.recorded!r} needs") from None
    if plan.all_outputs:
        return results
    return [None if i is None else results[i] for i in plan.cotangent_outputs]
