"""Plans: what backward, ``try_hvp`` and ``create_graph`` run at a node, built once and cached.

A node's work depends only on its structure (its operation, or its recorded
graph), which of its inputs and outputs are active, and ``ctx`` (rules may read
it), so it is planned once per such signature:

- :class:`BackwardPlan`: the node's graph linearized with respect to its
  active inputs; the *replay* graph of the primal values the transpose reads
  that the node did not save (for the executor hooks); and the *fused*
  backward graph (replay and transpose in one) for executors that override no
  hook.
- :class:`TangentPlan`: forward mode at a node (``try_hvp``'s first sweep).
- :class:`HvpPlan`: a node's backward graph, linearized (``try_hvp``'s reverse walk).
- :class:`RecordedBackward`: a node's backward graph as a recordable graph
  (``create_graph``).

Plans of primitive nodes are shared per ``ctx`` value (:func:`plans_for`);
those of a composite node live on its ``RecordedGraph``. Every cache is bounded.

>>> from tidu.eager import EagerInput, RecordedGraph, Recorder
>>> from tidu.example_ops import Op
>>> from tidu.graph import Input
>>> recorder = Recorder()
>>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.5)
>>> recorded = RecordedGraph.from_primitive(Op.SIN, recorder.fresh_input_keys(1))
>>> node = recorder.record(recorded, [x], Op.SIN.eval(None, [0.5]))
>>> plan = backward_plan(node, (0,), (0,), None)
>>> plan is backward_plan(node, (0,), (0,), None)          # cached per signature
True
>>> [op.operation for op in plan.replay_graph().operation_keys]   # cos(x), for the transpose
[<Op.COS: 'cos'>]
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from tidu import LinearizedGraph, linearize
from tidu.graph import PRIMARY, External, Graph, GraphBuilder, Input, Local, ValueKey, compiled
from tidu.graph import schedule
from tidu.eager.executor import BackwardExecutor, graph_runner, transposed_of
from tidu.eager.record import RecordedGraph


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


class _Compiled:
    """A plan's graph, compiled by the last executor that ran it (``graph_runner``)."""

    __slots__ = ("_compiled",)

    def _runner(self, executor: BackwardExecutor, graph: Graph, load_keys: tuple
                ) -> Callable[[Sequence[Any]], Sequence[Any]]:
        compiled = self._compiled
        if compiled is None or compiled[0] is not executor:
            compiled = self._compiled = (executor, graph_runner(executor, graph, load_keys))
        return compiled[1]


_UNBUILT = object()


class BackwardPlan(_Compiled):
    """What backward does at a node of one structure with given active inputs and outputs.

    ``linear`` maps the active inputs' tangents (in ``active_inputs`` order) to the
    tangents of the distinct graph values behind the active outputs; output slots
    naming the same value (a graph may list one value twice) form one group in
    ``output_groups``, whose cotangents backward sums first. ``group_seeds``
    is aligned with ``linear.tangent_outputs``: a group's slots, or ``None``
    where its value does not depend on the active inputs (no seed);
    ``seed_groups`` lists the groups that take a seed (``one_seed``: the node has
    one output slot, which takes one). ``input_keys``,
    ``output_keys`` and ``data_keys`` (retained values) name the node's data in
    the node's graph.

    The executor hooks get ``linear`` and the primal values it reads: the node's
    data and what :meth:`replay_graph` recomputes from it. The fused path runs
    :meth:`fused`, the replay and the transpose of ``linear`` in one graph: from
    the node's data (``input_keys``, ``output_keys``, then ``data_keys``) and
    one seed per ``seed_groups`` entry (``load_keys``), it computes the active
    inputs' cotangents; ``cotangent_outputs`` gives, per active input, the index
    of its cotangent among the graph's outputs (``None`` for a zero). The plan is
    built with one ``ctx`` and used only with that ``ctx``.

    >>> from tidu.eager import EagerInput, RecordedGraph, Recorder
    >>> from tidu.example_ops import Op
    >>> from tidu.graph import Input
    >>> recorder = Recorder()
    >>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 3.0)
    >>> node = recorder.record(RecordedGraph.from_primitive(Op.MUL, ["a", "b"]), [x, x], [9.0])
    >>> plan = backward_plan(node, (0, 1), (0,), None)
    >>> plan.replay_graph() is None           # the transpose reads only the inputs
    True
    >>> print(plan.fused())                   # ct conj(b) and ct conj(a), from the node's data
    graph(a = Cotangent(0, pass_id=...)):
      b = CONJ ext(arg1)
      c = MUL[Linearized(T.)] a b
      d = CONJ ext(arg0)
      e = MUL[Linearized(T.)] a d
      return c, e
    """

    __slots__ = ("graph", "linear", "input_keys", "output_keys", "data_keys", "active_inputs",
                 "output_groups", "group_seeds", "seed_groups", "one_seed", "seed_keys",
                 "backward_graph",
                 "load_keys", "cotangent_outputs", "all_outputs", "derived", "_replay", "_ctx",
                 "_reads", "_hook_reads")

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
        self.group_seeds = tuple(None if output_id is None else slots for slots, output_id
                                 in zip(self.output_groups, self.linear.tangent_outputs))
        self.seed_groups = tuple(slots for slots in self.group_seeds if slots is not None)
        # one output slot, one seed: its cotangent is the seed as it is (the common case)
        self.one_seed = len(self.output_keys) == 1 and len(self.seed_groups) == 1
        self._ctx = ctx
        self._compiled = None
        self._replay = _UNBUILT
        self._hook_reads = None
        self.derived: dict = {}        # plans built on this one (HvpPlan, RecordedBackward)
        self.backward_graph = None

    @property
    def ctx(self):
        """The ``ctx`` the plan was built with (and is used with)."""
        return self._ctx

    def replay_graph(self) -> Graph | None:
        """The graph recomputing, from the node's data, the primal values ``linear`` reads
        that the node did not save (``None``: it saved them all). It has no inputs: it
        reads the node's data as ``External`` keys; its outputs are the recomputed values."""
        replay = self._replay
        if replay is _UNBUILT:
            known = set(self.input_keys) | set(self.output_keys) | set(self.data_keys)
            missing = [key for key in _primal_values_read(self.linear) if key not in known]
            replay = self._replay = _fused_graph(missing, known, ()) if missing else None
        return replay

    def fused(self) -> Graph:
        """``backward_graph``, built first if needed (with the plan's ``ctx``)."""
        if self.backward_graph is None:
            self._fuse()
        return self.backward_graph

    def _fuse(self) -> None:
        transposed = transposed_of(self.linear, self._ctx)
        self.seed_keys = seed_keys = tuple(transposed.tangent_input_keys)
        self.load_keys = self.input_keys + self.output_keys + self.data_keys + seed_keys
        targets = [key for key in transposed.tangent_output_keys if key is not None]
        outputs = iter(range(len(targets)))
        self.cotangent_outputs = tuple(None if key is None else next(outputs)
                                       for key in transposed.tangent_output_keys)
        self.all_outputs = self.cotangent_outputs == tuple(range(len(targets)))
        backward_graph = _fused_graph(targets, set(self.load_keys), seed_keys)
        self._reads = read_positions(backward_graph, self.load_keys)
        self.backward_graph = backward_graph    # last: other threads test it to skip _fuse

    @property
    def reads(self) -> tuple:
        """Positions in ``load_keys`` of the values the fused graph reads (built if needed)."""
        self.fused()
        return self._reads

    @property
    def hook_reads(self) -> tuple:
        """Positions among the node's data (inputs, outputs, retained values) that the hooks
        path reads: what :meth:`replay_graph` replays from, and what ``linear`` reads itself."""
        reads = self._hook_reads
        if reads is None:
            node_keys = self.input_keys + self.output_keys + self.data_keys
            read = set(_primal_values_read(self.linear))
            replay = self.replay_graph()
            if replay is not None:
                read.update(key for key, _ in compiled(replay).loads)
            reads = self._hook_reads = tuple(i for i, key in enumerate(node_keys) if key in read)
        return reads

    def runner(self, executor: BackwardExecutor) -> Callable[[Sequence[Any]], Sequence[Any]]:
        """The fused graph compiled for ``executor`` (:func:`~tidu.eager.executor.graph_runner`;
        kept for the last executor used), built first if needed."""
        compiled = self._compiled
        if compiled is not None and compiled[0] is executor:
            return compiled[1]
        return self._runner(executor, self.fused(), self.load_keys)


def read_positions(graph: Graph, load_keys: Sequence[ValueKey]) -> tuple:
    """The positions in ``load_keys`` of the values ``graph``'s program reads.

    >>> from tidu.example_ops import trace
    >>> read_positions(trace(lambda x, y: x * x, ["x", "y"]), [Input("y"), Input("x")])
    (1,)
    """
    read = {key for key, _ in compiled(graph).loads}
    return tuple(i for i, key in enumerate(load_keys) if key in read)


def _primal_values_read(linear: LinearizedGraph) -> tuple:
    """Keys of the primal values the linear operations of ``linear`` read (not tangents)."""
    graph = linear.graph
    linear_values = {graph.value_keys[i] for _, i in linear.tangent_inputs}
    needed: dict = {}
    for op_key in graph.operation_keys:
        if op_key.role is PRIMARY:
            continue
        linear_values.update(op_key.output_keys())
        for key in op_key.inputs:
            if key not in linear_values:
                needed[key] = None
    return tuple(needed)


def _fused_graph(targets: Sequence[ValueKey], known: set, input_keys: Sequence[ValueKey]
                 ) -> Graph:
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


class TangentPlan(_Compiled):
    """Forward mode at a node: its outputs' tangents from those of some of its inputs.

    ``graph`` is the node's JVP with respect to the inputs at positions
    ``with_tangent``, fused with the recomputation of the primal values it
    reads, from the node's data (inputs, outputs, then the retained values
    ``data_keys``) and those inputs' tangents (``load_keys``, in that order).
    ``output_positions`` gives, per output slot, the index of its tangent among
    the graph's outputs (``None``: a zero tangent).

    >>> from tidu.eager import EagerInput, RecordedGraph, Recorder
    >>> from tidu.example_ops import Op
    >>> from tidu.graph import Input
    >>> recorder = Recorder()
    >>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.5)
    >>> node = recorder.record(RecordedGraph.from_primitive(Op.SIN, ["a"]), [x], [0.25])
    >>> plan = tangent_plan(node, (0,), None, plans_for(None))
    >>> [op.operation for op in plan.graph.operation_keys]     # t * cos(x)
    [<Op.COS: 'cos'>, <Op.MUL: 'mul'>]
    """

    __slots__ = ("graph", "data_keys", "load_keys", "output_positions", "reads")

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
        self.graph = _fused_graph(targets, set(self.load_keys), tangent_inputs)
        self.reads = read_positions(self.graph, self.load_keys)
        self._compiled = None

    def runner(self, executor: BackwardExecutor) -> Callable[[Sequence[Any]], Sequence[Any]]:
        """``graph`` compiled for ``executor`` (kept for the last executor used)."""
        return self._runner(executor, self.graph, self.load_keys)


class HvpPlan(_Compiled):
    """Forward over reverse at a node: its backward graph, linearized.

    Built on a :class:`BackwardPlan`: ``graph`` computes the active inputs'
    cotangents and their tangents, from what the backward graph reads
    (``plan.load_keys``), then the tangents of the active inputs marked in
    ``input_mask`` and of the seeds marked in ``seed_mask``. ``wanted`` marks
    the active inputs whose cotangents are computed (``None``: all); every
    tangent is. Per active input, ``cotangent_outputs`` and ``tangent_outputs``
    index the graph's outputs (``None``: zero, or not computed).

    >>> from tidu.eager import EagerInput, RecordedGraph, Recorder
    >>> from tidu.example_ops import Op
    >>> from tidu.graph import Input
    >>> recorder = Recorder()
    >>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.5)
    >>> node = recorder.record(RecordedGraph.from_primitive(Op.SIN, ["a"]), [x], [0.25])
    >>> plan = backward_plan(node, (0,), (0,), None)
    >>> hvp = hvp_plan(plan, (True,), (False,), None)     # x has a tangent, the seed none
    >>> hvp.cotangent_outputs, hvp.tangent_outputs      # ct cos(x), then -ct sin(x) t
    ((0,), (1,))
    """

    __slots__ = ("graph", "load_keys", "cotangent_outputs", "tangent_outputs", "reads")

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
        self.graph = _fused_graph(targets, set(self.load_keys), plan.seed_keys + tangent_inputs)
        self.reads = read_positions(self.graph, self.load_keys)
        self.cotangent_outputs = tuple(cotangent_at[i] if want and i is not None else None
                                       for i, want in zip(plan.cotangent_outputs, wanted))
        self.tangent_outputs = tuple(None if i is None else tangent_at.get(i)
                                     for i in plan.cotangent_outputs)
        self._compiled = None

    def runner(self, executor: BackwardExecutor) -> Callable[[Sequence[Any]], Sequence[Any]]:
        """``graph`` compiled for ``executor`` (kept for the last executor used)."""
        return self._runner(executor, self.graph, self.load_keys)


class RecordedBackward:
    """A backward plan's fused graph as a :class:`RecordedGraph` of the values it reads.

    ``recorded`` has one input per value the backward graph reads, in the
    plan's load order (``positions`` are their indices in ``plan.load_keys``),
    and the backward graph's outputs. ``passed`` gives, per output, the index
    among those inputs of the one it is (a cotangent passed on unchanged, as
    ``ADD``'s), or ``None``; ``recorded`` is ``None`` when every output is one.

    >>> from tidu.eager import EagerInput, RecordedGraph, Recorder
    >>> from tidu.example_ops import Op
    >>> from tidu.graph import Input
    >>> recorder = Recorder()
    >>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 3.0)
    >>> node = recorder.record(RecordedGraph.from_primitive(Op.ADD, ["a", "b"]), [x, x], [6.0])
    >>> recorded_backward(backward_plan(node, (0, 1), (0,), None)).passed   # ct, ct
    (0, 0)
    """

    __slots__ = ("recorded", "positions", "passed")

    def __init__(self, plan: BackwardPlan) -> None:
        backward = plan.fused()
        read = {key for op_key in backward.operation_keys for key in op_key.inputs}
        read.update(backward.output_keys)
        index = {key: i for i, key in enumerate(plan.load_keys)}
        loads = [key for key in index if key in read]
        self.positions = tuple(index[key] for key in loads)
        builder = GraphBuilder()
        ids = {key: builder.add_input(_Canonical(i)) for i, key in enumerate(loads)}
        for op_key in backward.operation_keys:
            outputs = builder.add_operation(op_key.operation,
                                            [Local(ids[key]) for key in op_key.inputs],
                                            op_key.role)
            ids.update(zip(op_key.output_keys(), outputs))
        builder.set_outputs([ids[key] for key in backward.output_keys])
        graph = builder.build()
        loaded = {key: i for i, key in enumerate(loads)}
        self.passed = tuple(loaded.get(key) for key in backward.output_keys)
        self.recorded = None if None not in self.passed else RecordedGraph(
            graph, [_Canonical(i) for i in range(len(loads))], graph.output_keys)


_RECORDED = object()          # the key of a BackwardPlan's RecordedBackward in its ``derived``
_TANGENT = object()           # the cache-key tag of tangent plans (equal to no op)


def recorded_backward(plan: BackwardPlan) -> RecordedBackward:
    """``plan``'s :class:`RecordedBackward`, built once and kept on the plan (see there)."""
    recorded = plan.derived.get(_RECORDED)
    if recorded is None:
        recorded = plan.derived[_RECORDED] = RecordedBackward(plan)
    return recorded


def hvp_plan(plan: BackwardPlan, input_mask: tuple, seed_mask: tuple, wanted: tuple | None
             ) -> HvpPlan:
    """``plan``'s :class:`HvpPlan` for these masks, built once and kept on the plan (see there)."""
    masks = (input_mask, seed_mask, wanted)
    hvp = plan.derived.get(masks)
    if hvp is None:
        hvp = plan.derived[masks] = HvpPlan(plan, *masks)
    return hvp


# --- the caches --------------------------------------------------------------------------

# Plans of primitive nodes, shared across calls: {ctx key: {(op, active inputs,
# active outputs): plan}}. Rules may read ctx, so each ctx value has its own plans.
_plans: dict = {}
_PLAN_CACHE_SIZE = 4096          # plans per ctx value
_CTX_CACHE_SIZE = 16             # ctx values with plans


def plans_for(ctx) -> dict:
    """The plan cache for ``ctx``: shared when ``ctx`` is hashable by value, else this call's own.

    A ctx hashed by identity (a plain object) may change between calls without
    changing its hash, so it gets fresh plans per call, as an unhashable one does.
    A primitive node's :class:`BackwardPlan` is under ``(op, active inputs, active
    outputs)``, the key the reverse walk looks up first.

    >>> plans_for(None) is plans_for(None), plans_for([1]) is plans_for([1])
    (True, False)
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


def _canonical_graph(op) -> tuple[Graph, tuple, tuple]:
    """A one-op graph of ``op`` on placeholder inputs: the graph, its input and output keys."""
    builder = GraphBuilder()
    ids = [builder.add_input(_Canonical(i)) for i in range(op.input_count())]
    builder.set_outputs(builder.add_operation(op, [Local(i) for i in ids]))
    graph = builder.build()
    return graph, graph.input_keys, graph.output_keys


def backward_plan(node, active_inputs: tuple, active_outputs: tuple, ctx,
                  plans: dict | None = None, retained: bool = True) -> BackwardPlan:
    """The :class:`BackwardPlan` for ``node``: shared per (op, active slots) in ``plans``
    for primitive nodes.

    ``plans`` defaults to the shared cache for ``ctx``. A composite node's plans
    are kept on its ``RecordedGraph`` (they live as long as it), per ``ctx`` value
    and retained keys. ``retained=False`` ignores the node's retained values: its
    backward recomputes them from the inputs.

    >>> from tidu.eager import EagerInput, RecordedGraph, Recorder
    >>> from tidu.example_ops import Op
    >>> from tidu.graph import Input
    >>> recorder = Recorder()
    >>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.5)
    >>> node = recorder.record(RecordedGraph.from_primitive(Op.SIN, ["a"]), [x], [0.25])
    >>> backward_plan(node, (0,), (0,), None).active_inputs
    (0,)
    """
    data_keys = tuple(node.retained) if retained and node.retained else ()
    return recorded_plan(node.recorded, data_keys, active_inputs, active_outputs, ctx, plans)


def recorded_plan(recorded: RecordedGraph, data_keys: tuple, active_inputs: tuple,
                  active_outputs: tuple, ctx, plans: dict | None = None) -> BackwardPlan:
    """:func:`backward_plan` for a node of ``recorded`` that retained ``data_keys``."""
    op = recorded.primitive
    if plans is None:
        plans = plans_for(ctx)
    if op is None:
        return _composite_cached(
            recorded, (active_inputs, active_outputs, data_keys), ctx, plans,
            lambda: BackwardPlan(recorded.graph, [Input(k) for k in recorded.input_keys],
                                 recorded.output_keys, active_inputs, active_outputs, data_keys,
                                 ctx))
    cache_key = (op, active_inputs, active_outputs)
    plan = plans.get(cache_key)
    if plan is None:
        graph, input_keys, output_keys = _canonical_graph(op)
        plan = BackwardPlan(graph, input_keys, output_keys, active_inputs, active_outputs, (), ctx)
        _store_plan(plans, cache_key, plan)
    return plan


_READS = object()             # the cache-key tag of data_reads
_FORWARD = object()           # the cache-key tag of forward plans


def data_reads(recorded: RecordedGraph, active_inputs: tuple, data_keys: tuple = ()
               ) -> tuple | None:
    """Per input, then per output of a node of ``recorded``, whether its backward (every
    output with a cotangent, ``ctx=None``) reads that value; ``None`` when no plan can be
    built (an op without rules fails later, in backward, as it always has).

    >>> from tidu.example_ops import Op
    >>> data_reads(RecordedGraph.from_primitive(Op.SIN, ["a"]), (0,))   # cos(x): x, not sin x
    (True, False)
    >>> data_reads(RecordedGraph.from_primitive(Op.ADD, ["a", "b"]), (0, 1))
    (False, False, False)
    """
    plans = plans_for(None)
    op = recorded.primitive
    key = (_READS, op, active_inputs)
    # a primitive's reads are kept per op; a composite's plan is kept on its graph
    reads = plans.get(key, _UNBUILT) if op is not None else _UNBUILT
    if reads is _UNBUILT:
        try:
            plan = recorded_plan(recorded, data_keys, active_inputs,
                                 tuple(range(recorded.output_count)), None, plans)
            plan.fused()
            n_data = len(plan.input_keys) + len(plan.output_keys)
            read = set(plan.reads) | set(plan.hook_reads)
            reads = tuple(i in read for i in range(n_data))
        except Exception:              # noqa: BLE001 - the rule's error belongs to backward
            reads = None
        if op is not None:
            _store_plan(plans, key, reads)
    return reads


class ForwardPlan(_Compiled):
    """A node's own work again: its recorded graph, from its inputs' values, for recomputing
    outputs a checkpoint strategy did not keep. Runs through ``graph_runner``, so an
    executor's ``execute_forward`` override is called.

    >>> from tidu.example_ops import Op
    >>> from tidu.eager.executor import BackwardExecutor
    >>> class Executor(BackwardExecutor):
    ...     def execute_forward(self, graph, data):
    ...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
    ...     def add_operands(self, a, b):
    ...         return a + b
    >>> forward_plan(RecordedGraph.from_primitive(Op.MUL, ["a", "b"])).runner(Executor())([2., 3.])
    [6.0]
    """

    __slots__ = ("graph", "load_keys")

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.load_keys = graph.input_keys
        self._compiled = None

    def runner(self, executor: BackwardExecutor) -> Callable[[Sequence[Any]], Sequence[Any]]:
        """``graph`` compiled for ``executor`` (kept for the last executor used)."""
        return self._runner(executor, self.graph, self.load_keys)


def forward_plan(recorded: RecordedGraph) -> ForwardPlan:
    """The :class:`ForwardPlan` of nodes of ``recorded``: shared per op, or kept on a
    composite ``recorded``."""
    op = recorded.primitive
    if op is None:
        plan = recorded.plan_cache.get(_FORWARD)
        if plan is None:
            plan = recorded.plan_cache[_FORWARD] = ForwardPlan(recorded.graph)
        return plan
    plans = plans_for(None)
    key = (_FORWARD, op)
    plan = plans.get(key)
    if plan is None:
        plan = ForwardPlan(_canonical_graph(op)[0])
        _store_plan(plans, key, plan)
    return plan


def tangent_plan(node, with_tangent: tuple, ctx, plans: dict) -> TangentPlan:
    """The node's forward-mode :class:`TangentPlan`, cached as its backward plans are.

    See :class:`TangentPlan` for an example.
    """
    recorded = node.recorded
    op = recorded.primitive
    if op is None:
        data_keys = tuple(node.retained) if node.retained else ()
        return _composite_cached(
            recorded, (_TANGENT, with_tangent, data_keys), ctx, plans,
            lambda: TangentPlan(recorded.graph, tuple(recorded.graph.input_keys),
                                recorded.output_keys, data_keys, with_tangent, ctx))
    cache_key = (_TANGENT, op, with_tangent)
    plan = plans.get(cache_key)
    if plan is None:
        graph, input_keys, output_keys = _canonical_graph(op)
        plan = TangentPlan(graph, input_keys, output_keys, (), with_tangent, ctx)
        _store_plan(plans, cache_key, plan)
    return plan


def _store_plan(plans: dict, key, plan) -> None:
    """``plans[key] = plan``, starting the cache over when it is full."""
    if len(plans) >= _PLAN_CACHE_SIZE:
        plans.clear()
    plans[key] = plan


def _composite_cached(recorded, detail: tuple, ctx, plans: dict, make: Callable[[], Any]):
    """``make()``, cached on the composite ``recorded`` graph under ``detail`` and ``ctx``.

    Kept there (living as long as the graph) only when ``plans`` is ``ctx``'s
    shared cache: a ``ctx`` that gets no shared plans gets fresh ones here too.
    """
    ctx_key = _ctx_key(ctx)
    shared = recorded.plan_cache if ctx_key is not None and plans is _plans.get(ctx_key) else None
    cache_key = (ctx_key, detail)
    plan = None if shared is None else shared.get(cache_key)
    if plan is None:
        plan = make()
        if shared is not None:
            _store_plan(shared, cache_key, plan)
    return plan
