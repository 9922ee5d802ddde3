"""The one reverse walk over an eager trace, and what runs at a node.

:func:`try_backward <tidu.eager.try_backward>`, :func:`try_backward_recorded
<tidu.eager.try_backward_recorded>` and :func:`try_hvp <tidu.eager.try_hvp>`
share :func:`reverse_walk`: one loop over the trace's nodes, newest first,
that takes the cotangents of each node's outputs (releasing those not kept),
finds the node's :class:`~tidu.eager.plans.BackwardPlan`, asks a
:class:`NodeStep` for the cotangents of the node's active inputs, and
accumulates them. The steps differ in what a cotangent is: the runtime's value
(``try_backward``), an eager record with history (``create_graph``), or a
cotangent with its tangent (``try_hvp``).

Each step computes a node's cotangents with a :class:`NodeRunner`, which
follows the seed's flow for an executor that overrides a hook (replay the
primal with ``execute_forward`` where needed, then ``run_transposed_linear``)
and runs the node's fused plan for one that does not.

>>> from tidu.eager import EagerInput, RecordedGraph, Recorder
>>> from tidu.example_ops import Op
>>> from tidu.graph import Input
>>> recorder = Recorder()
>>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.5)
>>> node = recorder.record(RecordedGraph.from_primitive(Op.SIN, ["a"]), [x], [0.25])
>>> y = EagerInput(node.output_key, node, True, 0.25)
>>> later = recorder.record(RecordedGraph.from_primitive(Op.NEG, ["a"]), [y], [-0.25])
>>> nodes_last_first(later) == [later, node]
True
"""

from __future__ import annotations

from operator import attrgetter
from typing import Callable, Container, Mapping, Sequence

from tidu.errors import InvalidArgumentError, MissingValueError
from tidu.graph import ValueKey
from tidu.eager.checkpointing import Rematerializer, output_data
from tidu.eager.executor import BackwardExecutor, overridden_hooks
from tidu.eager.plans import BackwardPlan, backward_plan, plans_for
from tidu.eager.record import EagerError
from tidu.eager.trace import Trace


# --- the walk ------------------------------------------------------------------------------


class NodeStep:
    """What :func:`reverse_walk` runs at a node: a small strategy object.

    ``run(node, plan, cotangent_out)`` gets the cotangents of the node's output
    slots (``None`` for a slot without one) and returns one cotangent (or
    ``None``) per ``plan.active_inputs``; ``add(a, b)`` sums two cotangents of one
    value (``a`` is handed over: the walk keeps no reference to it). ``plans``
    is the plan cache for ``ctx``; ``retained=False`` plans composite nodes
    without their retained values.

    >>> class Counting(NodeStep):
    ...     def __init__(self):
    ...         super().__init__(None)
    ...         self.nodes = 0
    ...     def run(self, node, plan, cotangent_out):
    ...         self.nodes += 1
    ...         return [cotangent_out[0]] * len(plan.active_inputs)   # d(x + y) = (1, 1)
    ...     def add(self, a, b):
    ...         return a + b
    >>> from tidu.eager import EagerInput, RecordedGraph, Recorder
    >>> from tidu.example_ops import Op
    >>> from tidu.graph import Input
    >>> recorder = Recorder()
    >>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 1.0)
    >>> node = recorder.record(RecordedGraph.from_primitive(Op.ADD, ["a", "b"]), [x, x], [2.0])
    >>> cotangents = {node.output_key: 1.0}
    >>> step = Counting()
    >>> reverse_walk([node], cotangents, step, None)
    >>> cotangents[x.key], step.nodes
    (2.0, 1)
    """

    retained = True

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.plans = plans_for(ctx)

    def run(self, node, plan: BackwardPlan, cotangent_out: list) -> Sequence:
        """The cotangents of ``plan.active_inputs`` (see the class)."""
        raise NotImplementedError

    def add(self, a, b):
        """``a + b`` for two cotangents of one value (see the class)."""
        raise NotImplementedError


def reverse_walk(nodes: Sequence, cotangents: dict, step: NodeStep, keep: Container | None,
                 zeros: set | None = None) -> None:
    """Run ``step`` at every node of ``nodes`` (newest first), accumulating into ``cotangents``.

    ``cotangents`` maps eager value keys to cotangents (as ``step`` defines
    them) and starts with the seed. A node none of whose outputs has a cotangent
    is skipped. With ``keep``, a cotangent whose key is not in it is released
    right after its last use (its node's step). With ``zeros`` (a set), every
    key the walk reaches with a zero cotangent is added to it: the active inputs
    of a skipped node, and an active input whose cotangent a node's step gives as
    ``None`` (another path may still give it one). One loop, no recursion: traces
    of millions of nodes are fine. See :class:`NodeStep` for an example.
    """
    plans, ctx, retained = step.plans, step.ctx, step.retained
    run, add = step.run, step.add
    get, pop = cotangents.get, cotangents.pop
    last_plans: dict = {}               # RecordedGraph -> (active inputs, outputs, plan)
    for node in nodes:
        key = node.output_key
        if key is not None:                 # one output
            cotangent = get(key) if keep is None or key in keep else pop(key, None)
            if cotangent is None:
                if zeros is not None:
                    _add_active_keys(zeros, node)
                continue
            cotangent_out = [cotangent]
            active_outputs = _FIRST_ONLY
        else:
            cotangent_out = _output_cotangents(cotangents, node.output_keys, keep)
            active_outputs = tuple([i for i, c in enumerate(cotangent_out) if c is not None])
            if not active_outputs:
                if zeros is not None:
                    _add_active_keys(zeros, node)
                continue
        # Nodes of one primitive share its RecordedGraph, and a frontend's active-slot tuples
        # are its constants: the plan this walk last ran for them is found by identity,
        # without hashing the op (a dataclass op's hash is a Python call)
        recorded, active_inputs = node.recorded, node.active_inputs
        last = last_plans.get(recorded)
        if last is not None and last[0] is active_inputs and last[1] is active_outputs:
            plan = last[2]
        else:
            op = recorded.primitive
            plan = plans.get((op, active_inputs, active_outputs)) if op is not None else None
            if plan is None:
                plan = backward_plan(node, active_inputs, active_outputs, ctx, plans, retained)
            if op is not None:              # a composite's plan also depends on its retained
                last_plans[recorded] = (active_inputs, active_outputs, plan)
        inputs = node.inputs
        for position, cotangent in zip(plan.active_inputs, run(node, plan, cotangent_out)):
            if cotangent is not None:
                key = inputs[position].key
                if key in cotangents:       # handed over (popped), so it may be summed in place
                    cotangents[key] = add(pop(key), cotangent)
                else:
                    cotangents[key] = cotangent
            elif zeros is not None:
                zeros.add(inputs[position].key)


_FIRST_ONLY = (0,)


def walk(nodes: Sequence, cotangents: dict, step: NodeStep | None, keep: Container | None,
         zeros: set | None, hooks: Mapping | None) -> None:
    """The walk of a backward: :func:`hooked_walk` when there are ``hooks`` (with no
    ``nodes`` too: a leaf's own hook), else :func:`reverse_walk`."""
    if hooks:
        hooked_walk(nodes, cotangents, step, keep, zeros, hooks)
    elif nodes:
        reverse_walk(nodes, cotangents, step, keep, zeros)


def hooked_walk(nodes: Sequence, cotangents: dict, step: NodeStep, keep: Container | None,
                zeros: set | None, hooks: Mapping) -> None:
    """:func:`reverse_walk`, calling ``hooks[key]`` once for each key in ``hooks`` it reaches.

    ``hooks[key](cotangent)`` is called when the key's cotangent is complete (every use
    of the key summed in), before it flows on to the node that made the key; a leaf's
    (a key no node of ``nodes`` made) after the walk, if it is in ``keep`` (when given).
    ``cotangent`` is as ``step`` defines it, or ``None`` for a key the walk reached with
    a zero cotangent (through ``sign``, say). The hook returns the cotangent to use from
    then on (in the result, and what flows on), or ``None`` to leave it as it is. The
    walk runs in segments between the nodes that made hooked keys, so each segment's loop
    is :func:`reverse_walk`'s, unchanged: a walk without hooks costs nothing more.
    ``hooks`` is read as the walk goes, never iterated: it may be a live view, and a key a
    hook adds to it is called if the walk reaches that key later (as in PyTorch; not if
    the node that made it ran already).

    >>> from tidu.eager import EagerInput, RecordedGraph, Recorder
    >>> from tidu.example_ops import Op
    >>> from tidu.graph import Input
    >>> class Adding(NodeStep):
    ...     def run(self, node, plan, cotangent_out):
    ...         return [cotangent_out[0]] * len(plan.active_inputs)   # d(x + y) = (1, 1)
    ...     def add(self, a, b):
    ...         return a + b
    >>> recorder = Recorder()
    >>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 1.0)
    >>> h = recorder.record(RecordedGraph.from_primitive(Op.ADD, ["a", "b"]), [x, x], [2.0])
    >>> y = recorder.record(RecordedGraph.from_primitive(Op.ADD, ["a", "b"]), [h, h], [4.0])
    >>> cotangents = {y.output_key: 1.0}
    >>> hooked_walk([y, h], cotangents, Adding(None), None, None,
    ...             {h.output_key: lambda ct: print("h gets", ct) or 10 * ct})
    h gets 2.0
    >>> cotangents[h.output_key], cotangents[x.key]          # 10 * 2, then 2 * 20
    (20.0, 40.0)
    """
    reached: set = set()            # the keys this walk reached with a zero cotangent
    called = set()
    start = 0
    for index, node in enumerate(nodes):
        key = node.output_key
        if key is not None:                 # one output
            if key not in hooks:
                continue
            hooked = [key]
        else:
            hooked = [key for key in node.output_keys if key in hooks]
            if not hooked:
                continue
        if index > start:
            reverse_walk(nodes[start:index], cotangents, step, keep, reached)
        start = index
        for key in hooked:
            _call_hook(hooks, key, cotangents, reached)
            called.add(key)
    if start < len(nodes):
        reverse_walk(nodes[start:], cotangents, step, keep, reached)
    # the leaves' hooks: looked up from what the walk reached, not from every hook (a model
    # may hook each of its many parameters, and a walk reach few of them)
    leaves = [key for key in (*cotangents, *reached)
              if key in hooks and key not in called and (keep is None or key in keep)]
    if leaves:
        # a hook added by a hook that ran at a node, to a key whose node ran already, is not
        # a leaf's: it does not run (without such a hook, nothing could add one)
        made = _made_keys(nodes) if called else ()
        for key in leaves:
            if key not in called and key not in made:
                called.add(key)
                _call_hook(hooks, key, cotangents, reached)
    if zeros is not None:
        zeros.update(reached)


def _made_keys(nodes: Sequence) -> set:
    """The output keys of ``nodes``."""
    made = set(map(_output_key, nodes))
    if None in made:                        # nodes of several outputs
        for node in nodes:
            if node.output_key is None:
                made.update(node.output_keys)
    return made


_output_key = attrgetter("output_key")


def _call_hook(hooks: Mapping, key, cotangents: dict, reached: set) -> None:
    """``cotangents[key] = hooks[key](cotangent)`` for a key the walk reached (a zero
    cotangent is passed as ``None``), unless the hook returns ``None``."""
    cotangent = cotangents.get(key)
    if cotangent is None and key not in reached:
        return
    result = hooks[key](cotangent)
    if result is not None:
        cotangents[key] = result


def _add_active_keys(zeros: set, node) -> None:
    inputs = node.inputs
    zeros.update([inputs[position].key for position in node.active_inputs])


def _output_cotangents(cotangents: dict, keys: tuple, keep: Container | None) -> list:
    """The cotangent of each of a node's output keys (``None``: none), released unless kept."""
    if keep is None:
        return [cotangents.get(key) for key in keys]
    return [cotangents.get(key) if key in keep else cotangents.pop(key, None) for key in keys]


def nodes_last_first(output_trace: Trace) -> list:
    """Every trace node reachable from ``output_trace``, consumers before their inputs.

    A node is always recorded after the nodes of its inputs, so ordering by
    recording serial, newest first, is a reverse topological order. See the
    module's example.
    """
    seen = {output_trace}
    stack = [output_trace]
    while stack:
        for item in stack.pop().inputs:
            # a one-output node is its output's record: itself, without the property's call
            parent = item if type(item) is Trace else item.trace
            if parent is not None and parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return sorted(seen, key=_serial, reverse=True)


_serial = attrgetter("serial")


def check_start(function: str, output_key, output_trace, seed, executor, keep) -> None:
    """The O(1) checks of a walk's arguments, each a :class:`tidu.TiduError` naming ``function``.

    ``output_key`` is a ``ValueKey`` output by ``output_trace`` (a ``Trace`` or
    ``None``), ``executor`` a :class:`BackwardExecutor` instance, ``seed`` (the
    seed's data) not ``None``, ``keep`` a container; then
    ``executor.check_seed(seed, output_data)`` checks what only the runtime knows.

    >>> from tidu.graph import Input
    >>> check_start("try_backward", Input("y"), None, None, None, None)
    Traceback (most recent call last):
    ...
    tidu.errors.InvalidArgumentError: try_backward needs a BackwardExecutor, got None
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
        executor.check_seed(seed, output_data(output_trace, output_keys.index(output_key),
                                              executor))


def kept(values: dict, keep: Container | None) -> dict:
    """``values`` restricted to the keys in ``keep`` (all of them without ``keep``).

    >>> kept({"a": 1, "b": 2}, {"b"}), kept({"a": 1}, None)
    ({'b': 2}, {'a': 1})
    """
    if keep is None:
        return values
    return {key: value for key, value in values.items() if key in keep}


def only_zero_keys(zeros: set | None, values: dict, keep: Container | None) -> None:
    """Leave in ``zeros`` (what :func:`reverse_walk` collected) the keys that ended with
    no value in ``values``, and are in ``keep`` if it is given.

    >>> zeros = {"a", "b", "c"}
    >>> only_zero_keys(zeros, {"a": 1.0}, {"a", "b"}); zeros
    {'b'}
    """
    if zeros:
        zeros.difference_update([key for key in zeros
                                 if key in values or (keep is not None and key not in keep)])


# --- what runs at a node -----------------------------------------------------------------


def node_data(node, data_keys: tuple) -> list:
    """The node's inputs', outputs' and retained (``data_keys``) values: a plan's load order.

    >>> from tidu.eager import EagerInput, RecordedGraph, Recorder
    >>> from tidu.example_ops import Op
    >>> from tidu.graph import Input
    >>> recorder = Recorder()
    >>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 3.0)
    >>> node = recorder.record(RecordedGraph.from_primitive(Op.NEG, ["a"]), [x], [-3.0])
    >>> node_data(node, ())
    [3.0, -3.0]
    """
    values = [item.data for item in node.inputs]
    values += node.output_data
    if data_keys:
        retained = node.retained
        values += [retained[key] for key in data_keys]
    return values


def group_sums(groups: Sequence, values: Sequence, add: Callable) -> list:
    """Per group of slots (``None``: no group), the sum of its ``values`` that are not ``None``
    (``None`` if there are none).

    >>> group_sums([(0, 2), None, (1,)], [1.0, None, 2.0], lambda a, b: a + b)
    [3.0, None, None]
    """
    sums = []
    for slots in groups:
        total = None
        if slots is not None:
            for slot in slots:
                value = values[slot]
                if value is not None:
                    total = value if total is None else add(total, value)
        sums.append(total)
    return sums


class NodeRunner:
    """Computes a node's active inputs' cotangents for one executor, by its hooks or its plan.

    ``hooked`` is set when the executor overrides ``run_transposed_linear`` or
    ``execute_forward`` (:func:`~tidu.eager.overridden_hooks`): then
    :meth:`by_hooks` runs each node, as seed 004 describes; otherwise
    :meth:`by_plan`, the node's fused plan compiled once with ``compile_graph``
    (what the default hooks compute, in one call). ``run`` is the one to use.

    >>> from tidu.eager import EagerInput, RecordedGraph, Recorder
    >>> from tidu.example_ops import Op
    >>> from tidu.graph import Input, compiled
    >>> class Executor(BackwardExecutor):
    ...     def execute_forward(self, graph, data):
    ...         print("execute_forward")
    ...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
    ...     def add_operands(self, a, b):
    ...         return a + b
    >>> recorder = Recorder()
    >>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 0.0)
    >>> node = recorder.record(RecordedGraph.from_primitive(Op.SIN, ["a"]), [x], [0.0])
    >>> runner = NodeRunner(Executor())
    >>> runner.hooked, runner.run(node, backward_plan(node, (0,), (0,), None), [2.0])
    execute_forward
    execute_forward
    (True, [2.0])
    """

    __slots__ = ("executor", "hooked", "remat")

    def __init__(self, executor: BackwardExecutor) -> None:
        self.executor = executor
        self.hooked = bool(overridden_hooks(executor))
        self.remat = Rematerializer((), executor)   # the walk's, once it starts (walk_nodes)

    @property
    def run(self) -> Callable:
        """:meth:`by_hooks` or :meth:`by_plan` (a property: a bound method kept on the runner
        would make a reference cycle, and the walk's nodes would outlive it)."""
        return self.by_hooks if self.hooked else self.by_plan

    def walk_nodes(self, nodes: Sequence, counted: bool = True) -> Rematerializer:
        """Start a walk over ``nodes`` (newest first): values a checkpoint strategy did not
        keep are recomputed for it by one :class:`~tidu.eager.checkpointing.Rematerializer`."""
        self.remat = Rematerializer(nodes, self.executor, counted)
        return self.remat

    def by_plan(self, node, plan: BackwardPlan, cotangent_out: list) -> list:
        """The active inputs' cotangents, from one run of the plan's fused graph."""
        run = plan.runner(self.executor)
        inputs = node.inputs                  # node_data, inlined: the hot path (and without
        if len(inputs) == 2:                  # a comprehension, a call more in Python 3.11)
            values = [inputs[0].data, inputs[1].data]
        elif len(inputs) == 1:
            values = [inputs[0].data]
        else:
            values = [item.data for item in inputs]
        if node.key is not None:              # one output: its value, without a tuple
            values.append(node.data)
        else:
            values += node.output_data
        if plan.data_keys:
            retained = node.retained
            values += [retained[key] for key in plan.data_keys]
        if node.dropped is not None:
            self.remat.fill(node, values, plan.reads)
        if plan.one_seed:
            values.append(cotangent_out[0])
        else:
            values += group_sums(plan.seed_groups, cotangent_out, self.executor.add_operands)
        try:
            results = run(values)
        except MissingValueError as error:
            raise _at(error, node) from None
        if plan.all_outputs:
            return results
        return [None if i is None else results[i] for i in plan.cotangent_outputs]

    def fused_outputs(self, node, plan: BackwardPlan, values: list) -> Sequence:
        """The plan's fused graph's outputs, from the values of ``plan.load_keys``."""
        run = plan.runner(self.executor)
        try:
            return run(values)
        except MissingValueError as error:
            raise _at(error, node) from None

    def by_hooks(self, node, plan: BackwardPlan, cotangent_out: list) -> Sequence:
        """The active inputs' cotangents from ``run_transposed_linear``, after the replay."""
        seeds = group_sums(plan.group_seeds, cotangent_out, self.executor.add_operands)
        return self.transpose(node, plan, seeds)

    def transpose(self, node, plan: BackwardPlan, seeds: list) -> Sequence:
        """``run_transposed_linear(plan.linear, seeds, primal data, ctx)``: ``seeds`` has one
        cotangent per tangent output of ``plan.linear`` (``None`` where that is a zero)."""
        executor = self.executor
        try:
            data = self.primal_data(node, plan)
            results = executor.run_transposed_linear(plan.linear, seeds, data, plan.ctx)
        except MissingValueError as error:
            raise _at(error, node) from None
        if not isinstance(results, (list, tuple)) or len(results) != len(plan.active_inputs):
            got = (f"{len(results)} values" if isinstance(results, (list, tuple))
                   else f"a {type(results).__name__}")
            raise EagerError(f"{type(executor).__name__}.run_transposed_linear returned {got} "
                             f"for the backward of {node.recorded!r}: it must return a list "
                             f"with one cotangent (or None) per tangent input of the linear "
                             f"graph, here {len(plan.active_inputs)}")
        return results

    def primal_data(self, node, plan: BackwardPlan) -> dict:
        """The primal values ``plan.linear`` reads, by key: the node's data, and what
        ``execute_forward`` replays of the plan's replay graph."""
        values = self.remat.fill(node, node_data(node, plan.data_keys), plan.hook_reads)
        data = {key: value for key, value in zip(plan.input_keys + plan.output_keys
                                                 + plan.data_keys, values)
                if value is not None}
        replay = plan.replay_graph()
        if replay is not None:
            computed = self.executor.execute_forward(replay, data)
            for key in replay.output_keys:
                try:
                    data[key] = computed[key]
                except KeyError:
                    raise MissingValueError(f"the executor's execute_forward did not provide "
                                            f"{key!r}") from None
        return data


def _at(error: MissingValueError, node) -> MissingValueError:
    """``error``, saying which node's backward needed the missing value."""
    return MissingValueError(f"{error}, which the backward of {node.recorded!r} needs")
