"""Rematerialization: fit what a program holds to a memory budget by computing values again.

A reverse-mode program (``jit(grad(f))``'s graph, say) keeps every forward value
its backward half reads, from the moment it is made until that read: its peak,
at the *turn* from forward to backward, is about the sum of those *residuals*.
:func:`rematerialize` schedules the same program to hold at most ``budget``
bytes of the values it makes (its arguments are the caller's and are not
counted): it lets residuals go and runs their producers again, on copies of the
operations (:class:`Recompute`), where the backward half reads them.

How it chooses (docs/guides/memory.md): the *spine* is what the deepest value
before the turn is computed from (a chain's state, a network's layer outputs);
its *cuts* are values everything deeper is computed from. Cuts spaced some
residual bytes apart are kept as checkpoints (the spacing that holds least, as
in Chen et al.'s sublinear-memory training); the other residuals are recomputed
from them, and the budget's slack keeps the residuals dearest to recompute per
byte. Below what that two-level plan can hold, the spine is reversed by binomial
checkpointing (Griewank's revolve): a few cuts are held, and each recomputation
holds the cuts of revolve's schedule, so that no step runs more often than the
number of checkpoints forces (at most 8 times more). Each candidate is checked by
simulating the program on sizes alone. On a general DAG the rule is a sound
heuristic, not an optimum: values are always recomputed from their real inputs.

Sizes and costs come from one run of the program (:func:`measure_program`)
through two hooks of the primitive set: :meth:`tidu.Primitive.value_nbytes`
and :meth:`tidu.Primitive.recompute_cost`.

>>> from tidu.example_ops import Op
>>> from tidu.graph import GraphBuilder, Local
>>> b = GraphBuilder(); x = b.add_input("x")
>>> [y] = b.add_operation(Op.SIN, [Local(x)]); [z] = b.add_operation(Op.SIN, [Local(y)])
>>> [w] = b.add_operation(Op.MUL, [Local(z), Local(y)]); b.set_outputs([w])
>>> g = b.build()
>>> sizes = {key: 8 for key in g.value_keys}
>>> program_peak(g, sizes)           # y, z and w at the multiplication
24
>>> rematerialize(g, 24, sizes).recomputed
0
"""

from __future__ import annotations

import bisect
import functools
import heapq
import math
import numbers
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from tidu.errors import InvalidArgumentError, InvalidOperationError, MemoryBudgetError
from tidu.rules import Primitive
from tidu.graph import (
    PRIMARY,
    EvaluableGraphOperation,
    Graph,
    GraphBuilder,
    Local,
    ValueKey,
    compiled,
    op_name,
)


class Recompute(EvaluableGraphOperation):
    """``operation`` run again (copy number ``copy``): its outputs are the same values.

    Copies are distinct operations, so the graph keeps them apart from the
    original and from each other.

    >>> from tidu.example_ops import Op
    >>> Recompute(Op.SIN, 1).eval(None, [0.0]), Recompute(Op.SIN, 1) == Recompute(Op.SIN, 2)
    ([0.0], False)
    """

    __slots__ = ("operation", "copy", "eval_reusing")

    def __init__(self, operation, copy: int) -> None:
        self.operation = operation
        self.copy = copy
        reusing = getattr(operation, "eval_reusing", None)
        if reusing is not None:
            self.eval_reusing = reusing

    def input_count(self) -> int:
        return self.operation.input_count()

    def output_count(self) -> int:
        return self.operation.output_count()

    def eval(self, ctx, inputs: Sequence) -> Sequence:
        return self.operation.eval(ctx, inputs)

    def __eq__(self, other) -> bool:
        return (type(other) is Recompute and self.copy == other.copy
                and self.operation == other.operation)

    def __hash__(self) -> int:
        return hash((Recompute, self.operation, self.copy))

    def __repr__(self) -> str:
        return f"recompute[{op_name(self.operation)}]"


@dataclass(frozen=True)
class Rematerialized:
    """What :func:`rematerialize` made: the program, and what it holds and recomputes."""

    graph: Graph                        # same inputs and output values, in order
    peak: int                           # bytes it holds at most, run as a Program
    recomputed: int                     # operations it runs again
    recompute_cost: float               # their cost, as the primitive set counts it
    sizes: Mapping[ValueKey, int]       # bytes of each value ``graph`` makes


def measure_program(graph: Graph, values: Mapping[Any, Any], ctx: Any = None
                    ) -> tuple[dict[ValueKey, int], dict]:
    """Sizes of the values ``graph`` makes and costs of its operations, from one run.

    ``values`` are values for its inputs (as :meth:`tidu.graph.Program.run` takes
    them). Returns ``(sizes, costs)``: bytes per value key (the producing
    operation's :meth:`~tidu.Primitive.value_nbytes`) and cost per operation key
    (its :meth:`~tidu.Primitive.recompute_cost`). The run holds what the program
    holds: no more.

    >>> from tidu.example_ops import Op
    >>> from tidu.graph import GraphBuilder, Input, Local
    >>> b = GraphBuilder(); x = b.add_input("x")
    >>> b.set_outputs(b.add_operation(Op.SIN, [Local(x)])); g = b.build()
    >>> sizes, costs = measure_program(g, {Input("x"): 0.5})
    >>> list(sizes.values()), list(costs.values())
    ([8], [16.0])
    """
    if not isinstance(graph, Graph):
        raise InvalidArgumentError(f"measure_program needs a Graph, got {type(graph).__name__}")
    sizes: dict = {}
    costs: dict = {}
    builder = GraphBuilder()
    local = {key: builder.add_input(key.key) for key in graph.input_keys}
    for op_key in graph.operation_keys:
        measuring = _Measuring(op_key, sizes, costs)
        refs = [Local(_local_id(local, key, op_key, "measure_program")) for key in op_key.inputs]
        local.update(zip(op_key.output_keys(), builder.add_operation(measuring, refs)))
    builder.set_outputs([_local_id(local, key, None, "measure_program")
                         for key in graph.output_keys])
    compiled(builder.build()).run(values, ctx)
    return sizes, costs


def _local_id(ids: Mapping, key: ValueKey, reader, who: str):
    """``ids[key]``, or :func:`_not_self_contained`'s error."""
    i = ids.get(key)
    if i is None:
        raise _not_self_contained(who, reader, key)
    return i


def _not_self_contained(who: str, reader, key: ValueKey) -> InvalidArgumentError:
    """The error of a graph that reads ``key`` from elsewhere (a parent graph, as a linear
    graph's ``External`` reads do); ``reader`` is the operation key reading it, or ``None``
    for the graph's outputs."""
    what = "an output is" if reader is None else f"{reader!r} reads"
    return InvalidArgumentError(f"{who}: {what} {key!r}, which the graph neither takes nor "
                                "makes before it (pass a self-contained graph, as "
                                "tidu.optimize makes)")


class _Measuring(EvaluableGraphOperation):
    """The operation of ``op_key``, noting its output sizes and its cost as it runs."""

    __slots__ = ("op_key", "sizes", "costs")

    def __init__(self, op_key, sizes: dict, costs: dict) -> None:
        self.op_key, self.sizes, self.costs = op_key, sizes, costs

    def input_count(self) -> int:
        return len(self.op_key.inputs)

    def output_count(self) -> int:
        return self.op_key.output_count

    def eval(self, ctx, inputs):
        operation = self.op_key.operation
        results = operation.eval(ctx, inputs)
        if not isinstance(operation, Primitive):
            raise InvalidOperationError(
                f"{op_name(operation)} is not a tidu.Primitive: a memory budget needs value "
                "sizes (Primitive.value_nbytes)")
        for key, value in zip(self.op_key.output_keys(), results):
            self.sizes[key] = int(operation.value_nbytes(value))
        self.costs[self.op_key] = float(operation.recompute_cost(inputs, results))
        return results


def _size(sizes: Mapping, key: ValueKey, who: str) -> int:
    """``sizes[key]``, a number of bytes (an integer >= 0), or an InvalidArgumentError."""
    try:
        size = sizes[key]
    except KeyError:
        raise InvalidArgumentError(f"{who}: no size for {key!r}") from None
    except TypeError:
        raise InvalidArgumentError(f"{who}: sizes must map each value the graph makes to its "
                                   f"bytes (as measure_program gives them), got "
                                   f"{type(sizes).__name__}") from None
    if not isinstance(size, numbers.Integral) or isinstance(size, bool) or size < 0:
        raise InvalidArgumentError(f"{who}: the size of {key!r} must be a number of bytes "
                                   f">= 0, got {size!r}")
    return int(size)


def _cost(costs: Mapping | None, op_key, made: int) -> float:
    """The cost of running ``op_key`` again: ``costs[op_key]`` (a finite number >= 0), or the
    bytes it makes when ``costs`` has none for it."""
    if costs is None or op_key not in costs:
        return float(made or 1)
    cost = costs[op_key]
    if (not isinstance(cost, numbers.Real) or isinstance(cost, bool) or not math.isfinite(cost)
            or cost < 0):
        raise InvalidArgumentError(f"rematerialize: the cost of {op_key!r} must be a finite "
                                   f"number >= 0, got {cost!r}")
    return float(cost)


def program_peak(graph: Graph, sizes: Mapping[ValueKey, int]) -> int:
    """The most bytes of values it makes that ``graph``, run as a Program, holds at once.

    A value is held from its operation until its last read (its inputs are held
    while an operation runs); outputs until the end. Inputs are the caller's.
    """
    return _peak_and_position(graph, sizes)[0]


def _peak_and_position(graph: Graph, sizes: Mapping[ValueKey, int],
                       operations: list | None = None) -> tuple[int, int]:
    operations = graph.operation_keys if operations is None else operations
    last_read: dict = {}
    for position, op_key in enumerate(operations):
        for key in op_key.inputs:
            last_read[key] = position
    end = len(operations)
    for key in graph.output_keys:
        last_read[key] = end
    held = peak = at = 0
    dying = [0] * (end + 1)
    for position, op_key in enumerate(operations):
        made = 0
        for key in op_key.output_keys():
            size = _size(sizes, key, "program_peak")
            made += size
            read = last_read.get(key)
            dying[position if read is None or read <= position else read] += size
        if held + made > peak:
            peak, at = held + made, position
        held += made - dying[position]
    return peak, at


def rematerialize(graph: Graph, budget: int, sizes: Mapping[ValueKey, int],
                  costs: Mapping | None = None) -> Rematerialized:
    """``graph`` scheduled to hold at most ``budget`` bytes of the values it makes.

    ``graph`` is self-contained (as :func:`tidu.optimize` makes them); ``sizes``
    gives the bytes of every value it makes and ``costs`` the cost of running
    each operation again (default: the bytes of its outputs), as
    :func:`measure_program` returns them. The result computes the same outputs
    from the same inputs, in order, recomputing what it must (see the module's
    text for how it chooses). A budget it cannot meet raises
    :class:`~tidu.errors.MemoryBudgetError` naming the smallest it can.

    >>> from tidu.example_ops import Op
    >>> from tidu.graph import GraphBuilder, Local
    >>> b = GraphBuilder(); [y] = b.add_operation(Op.SIN, [Local(b.add_input("x"))])
    >>> b.set_outputs([y]); g = b.build()
    >>> rematerialize(g, 8, {g.values[y].key: 8}).graph is g     # it fits as it is
    True
    """
    if not isinstance(graph, Graph):
        raise InvalidArgumentError(f"rematerialize needs a Graph, got {type(graph).__name__}")
    if not isinstance(budget, numbers.Integral) or isinstance(budget, bool) or budget < 0:
        raise InvalidArgumentError(f"rematerialize: budget must be a number of bytes >= 0, "
                                   f"got {budget!r}")
    budget = int(budget)
    plan = _Plan(graph, sizes, costs)
    if plan.peak_unchanged <= budget:
        return Rematerialized(graph, plan.peak_unchanged, 0, 0.0, dict(sizes))
    unchanged = plan.peak_unchanged
    plan = _Plan(graph, sizes, costs, _outputs_as_soon_as_possible(plan))
    if plan.peak_unchanged <= budget:       # the new order alone fits
        return _Simulation(plan, set(), set(), emit=True).run()
    unchanged = min(unchanged, plan.peak_unchanged)
    checkpoints, smallest = _fewest_bytes_held(plan)
    dropped = plan.residuals - checkpoints
    if smallest > budget:               # below the two-level plan: revolve on the spine
        revolved, revolve_smallest = _revolve(plan, budget)
        if revolved is not None:
            return revolved
        if revolve_smallest is not None:
            smallest = min(smallest, revolve_smallest)
        # (recomputing can cost more than it frees: an operation's inputs and outputs at
        # once, on a short program; then the program as it is holds the least)
        smallest = min(smallest, unchanged)
        raise MemoryBudgetError(
            f"rematerialize: a budget of {budget} bytes is below what this program of "
            f"{len(plan.ops)} operations needs when it recomputes what it can; the smallest "
            f"that works is {smallest} bytes (without recomputing: {unchanged})",
            smallest)
    # Spend what the budget leaves on keeping the residuals dearest to recompute per byte
    # (a bisection on how many, to 1/16 of them).
    ranked = sorted(dropped, key=lambda i: -plan.cost[plan.producer[i]] / max(plan.size[i], 1))
    low, high = 0, len(ranked)          # keeping ranked[:low] fits
    step = max(1, len(ranked) // 16)
    while high - low > step:
        middle = (low + high + 1) // 2
        kept = checkpoints | set(ranked[:middle])
        if _Simulation(plan, kept, plan.residuals - kept).run().peak <= budget:
            low = middle
        else:
            high = middle - 1
    kept = checkpoints | set(ranked[:low])
    return _Simulation(plan, kept, plan.residuals - kept, emit=True).run()


def recompute(graph: Graph, values, sizes: Mapping[ValueKey, int],
              costs: Mapping | None = None) -> Rematerialized:
    """``graph`` recomputing ``values`` where its backward half reads them, keeping the rest.

    JAX's ``checkpoint`` on a compiled program: ``values`` are the values a block
    made (the caller leaves out those its policy saves). Those the backward half
    reads are let go after the forward half, and the operations making only them
    run where they are read, from the block's inputs, which are kept. So is the
    primal work the block's derivative rules did on its values alone (``cos(x)``
    for ``sin(x)``). ``sizes`` and ``costs`` are as :func:`rematerialize` takes them.

    >>> from tidu.example_ops import Op
    >>> from tidu.graph import GraphBuilder, Local
    >>> b = GraphBuilder(); y = b.add_operation(Op.SIN, [Local(b.add_input("x"))])[0]
    >>> late = y
    >>> for _ in range(3):                  # y waits through these for the last product
    ...     [late] = b.add_operation(Op.COS, [Local(late)])
    >>> [out] = b.add_operation(Op.MUL, [Local(late), Local(y)])
    >>> b.set_outputs([out]); g = b.build()
    >>> sizes = {key: 8 for key in g.value_keys}
    >>> sizes[g.values[out].key] = 64     # the product is the program's peak: its turn
    >>> recompute(g, [g.values[y].key], sizes).recomputed
    1
    """
    if not isinstance(graph, Graph):
        raise InvalidArgumentError(f"recompute needs a Graph, got {type(graph).__name__}")
    plan = _Plan(graph, sizes, costs)
    plan = _Plan(graph, sizes, costs, _outputs_as_soon_as_possible(plan))
    region = {plan.vid[key] for key in values if key in plan.vid and not plan.given[plan.vid[key]]}
    for position in range(plan.turn):       # the rules' primal work on the block's values
        outs = plan.outs[position]
        inner = [i for i in plan.ins[position] if not plan.given[i]]
        if inner and all(i in region for i in inner) and all(
                plan.reads[o] and plan.reads[o][0] >= plan.turn for o in outs):
            region.update(outs)
    dropped = plan.residuals & region
    inputs = {i for d in region for i in plan.ins[plan.producer[d]]
              if not plan.given[i] and i not in region}
    return _Simulation(plan, (plan.residuals - dropped) | inputs, dropped, emit=True).run()


def _outputs_as_soon_as_possible(plan: "_Plan") -> list:
    """The operations in an order that lets values go sooner: as they were, except that
    the operations feeding only the program's outputs (a weight's gradient, and the
    products only it reads) run as soon as their inputs are made, not at the end, so
    what they read is let go sooner."""
    n = len(plan.ops)
    feeds_outputs = [False] * n
    for position in range(n - 1, plan.turn - 1, -1):
        outs = plan.outs[position]
        feeds_outputs[position] = all(
            plan.is_output[o] or (plan.reads[o] and all(feeds_outputs[r] for r in plan.reads[o]))
            for o in outs) and any(plan.is_output[o] or plan.reads[o] for o in outs)
    made = [plan.given[i] for i in range(len(plan.keys))]
    placed = [False] * n
    order = []

    def place(position: int) -> None:
        ready = [position]
        while ready:
            q = ready.pop()
            if placed[q]:
                continue
            placed[q] = True
            order.append(plan.ops[q])
            for o in plan.outs[q]:
                made[o] = True
                for reader in plan.reads[o]:
                    if feeds_outputs[reader] and not placed[reader] \
                            and all(made[i] for i in plan.ins[reader]):
                        ready.append(reader)

    for position in range(n):
        if not placed[position] and all(made[i] for i in plan.ins[position]):
            place(position)
    return order if len(order) == n else list(plan.ops)   # (every one is placed)


def _fewest_bytes_held(plan: "_Plan") -> tuple[set, int]:
    """The checkpoints (cuts spaced some residual bytes apart) with which the program holds
    least, and that peak. The search starts from Chen et al.'s rule, √(number of cuts)
    stretches, and moves by factors of 2, then √2, while the peak falls."""
    tried: dict = {}                        # span -> (peak, checkpoints)
    peaks: dict = {}                        # checkpoints -> peak: nearby spans often agree

    def peak(span: int) -> int:
        if span not in tried:
            kept = frozenset(plan.checkpoints(span))
            if kept not in peaks:
                peaks[kept] = _Simulation(plan, kept, plan.residuals - kept).run().peak
            tried[span] = (peaks[kept], kept)
        return tried[span][0]

    total = sum(plan.size[i] for i in plan.residuals)
    best = max(1, int(total / math.sqrt(max(len(plan.spine[0]), 1))))
    for step in (2, 0.5, 2 ** 0.5, 2 ** -0.5):     # coarse, then finer
        while True:
            nearby = max(1, int(best * step))
            if nearby == best or peak(nearby) >= peak(best):
                break
            best = nearby
    return set(tried[best][1]), tried[best][0]


def _binomial(snapshots: int, repetitions: int) -> int:
    """β(s, r) = C(s + r, s): the most steps ``s`` checkpoints (the start's included) reverse
    when no step runs more than ``r`` times more (Griewank)."""
    return math.comb(snapshots + repetitions, snapshots)


def _repetitions(steps: int, snapshots: int) -> int:
    """The fewest repetitions ``r`` with β(snapshots, r) >= steps."""
    r = 0
    while _binomial(snapshots, r) < steps:
        r += 1
    return r


def _split(steps: int, snapshots: int) -> int:
    """Revolve's first checkpoint, ``m`` steps from the start, for reversing ``steps`` steps
    with ``snapshots`` checkpoints (the start's included) in the fewest step runs, ``r``
    repetitions at most: every ``m`` in ``[max(β(s, r-2), n - β(s-1, r)),
    min(β(s, r-1), n - β(s-1, r-1))]`` is optimal (checked against the exhaustive
    recurrence in ``tests/test_remat.py``); the largest is taken.

    >>> [_split(10, 3), _split(10, 2), _split(2, 5)]
    [4, 6, 1]
    """
    if steps < 2:
        return 1
    r = _repetitions(steps, snapshots)
    upper = min(_binomial(snapshots, r - 1), steps - _binomial(snapshots - 1, r - 1))
    return max(1, min(steps - 1, upper))


def _descent(start: int, target: int, free: int) -> list:
    """The steps after which to hold a checkpoint, recomputing from the one after ``start``
    (-1: the arguments) to make step ``target``'s values, with ``free`` checkpoints
    to spare: revolve's schedule, one split at a time to the right.

    >>> _descent(-1, 9, 2)              # 10 steps, the start and 2 checkpoints
    [3, 6]
    """
    held = []
    while free > 0 and target - start > 1:
        start += _split(target - start, free + 1)
        held.append(start)
        free -= 1
    return held


def _revolve(plan: "_Plan", budget: int) -> "tuple[Rematerialized | None, int | None]":
    """The program under binomial checkpointing with as many checkpoints as ``budget``
    allows (bisection on their number; no step run more than 8 times more), or ``None``,
    with the smallest peak it reaches (``None``: the program is no chain)."""
    cuts = plan.spine[0]
    n = len(cuts)
    if n < 3:
        return None, None

    def run(slots: int, emit: bool = False) -> Rematerialized:
        kept = {cuts[j][1] for j in _descent(-1, n - 1, slots)}
        return _Simulation(plan, kept, plan.residuals - kept, emit, slots).run()

    low = 1
    while _repetitions(n, low + 1) > 8:
        low += 1
    high = max(low, min(n - 1, 2 * math.isqrt(2 * n)))
    smallest = run(low).peak
    if smallest > budget:
        return None, smallest
    while high > low:                       # the most checkpoints that fit
        middle = (low + high + 1) // 2
        if run(middle).peak <= budget:
            low = middle
        else:
            high = middle - 1
    return run(low, emit=True), smallest


class _Plan:
    """``graph`` as integers (value ids, each operation's input and output ids, the reads of
    each value), its turn, its residuals and where its forward half can be cut."""

    def __init__(self, graph: Graph, sizes: Mapping, costs: Mapping | None,
                 order: list | None = None) -> None:
        self.graph = graph
        self.ops = list(graph.operation_keys) if order is None else order
        vid: dict = {}
        for key in graph.input_keys:
            vid[key] = len(vid)
        n_given = len(vid)
        self.ins, self.outs, producer = [], [], []
        for position, op_key in enumerate(self.ops):
            row = []
            for key in op_key.inputs:
                i = vid.get(key)
                if i is None:
                    raise _not_self_contained("rematerialize", op_key, key)
                row.append(i)
            self.ins.append(row)
            made = []
            for key in op_key.output_keys():
                vid[key] = len(vid)
                producer.append(position)
                made.append(vid[key])
            self.outs.append(made)
        self.vid = vid
        self.keys = list(vid)
        self.producer = [-1] * n_given + producer
        self.given = [True] * n_given + [False] * len(producer)
        self.size = [0] * n_given + [_size(sizes, k, "rematerialize")
                                     for k in self.keys[n_given:]]
        self.made = [sum(self.size[o] for o in outs) for outs in self.outs]
        if costs is not None and not isinstance(costs, Mapping):
            raise InvalidArgumentError(
                f"rematerialize: costs must map operation keys to their costs (as "
                f"measure_program gives them), got {type(costs).__name__}")
        self.cost = [_cost(costs, op_key, self.made[p]) for p, op_key in enumerate(self.ops)]
        self.reads: list = [[] for _ in self.keys]      # positions reading each value, in order
        for position, row in enumerate(self.ins):
            for i in dict.fromkeys(row):
                self.reads[i].append(position)
        self.is_output = [False] * len(self.keys)
        for key in graph.output_keys:
            self.is_output[_local_id(vid, key, None, "rematerialize")] = True
        self.peak_unchanged, self.turn = _peak_and_position(graph, sizes, self.ops)
        # residuals: made before the turn, read after it (what the peak is made of)
        self.residuals = {i for i in range(n_given, len(self.keys))
                          if self.producer[i] < self.turn and not self.is_output[i]
                          and self.reads[i] and self.reads[i][-1] >= self.turn}

    # --- where the forward half can be cut --------------------------------------------

    @functools.cached_property
    def spine(self) -> tuple[list, list]:
        """``(cuts, residual bytes by depth)``: the spine's cuts as ``(depth, value)``, by
        depth, computed on first use (:func:`recompute` needs none).

        A value's depth is the longest chain of operations behind it. The *spine*
        is what the deepest value made before the turn is computed from (a chain's
        state, a network's layers). Depths are then counted again along the
        *chain*, the values made from the spine's first operation: a slice of an
        argument that a later step reads is off the chain (it is recomputed from
        the arguments). A spine value is a *cut* if it is alone at its depth and no
        spine operation reads across it, so that everything deeper on the spine is
        computed from it.
        """
        turn = self.turn
        n = len(self.keys)
        depth = [0] * n
        for position in range(turn):
            inner = [i for i in self.ins[position] if not self.given[i]]
            d = 1 + max((depth[i] for i in inner), default=-1) if inner else 0
            for o in self.outs[position]:
                depth[o] = d
        made_early = [o for p in range(turn) for o in self.outs[p]]
        deepest = max(made_early, key=depth.__getitem__, default=None)
        spine = set()
        stack = [deepest] if deepest is not None else []
        while stack:
            v = stack.pop()
            if v in spine or self.given[v]:
                continue
            spine.add(v)
            stack.extend(self.ins[self.producer[v]])
        # Depths again, counting only chain values: those made from the first spine
        # operation. A slice of an argument that a later step reads is off the chain:
        # it marks no place in the forward half and is recomputed from the arguments.
        first = min((self.producer[v] for v in spine), default=turn)
        chain = [False] * n
        for position in range(turn):
            if position >= first and (position == first
                                      or any(chain[i] for i in self.ins[position])):
                inner = [depth[i] for i in self.ins[position] if chain[i]]
                d = 1 + max(inner, default=0)
                for o in self.outs[position]:
                    chain[o] = True
                    depth[o] = d
            else:
                for o in self.outs[position]:
                    depth[o] = 0
        spine = {v for v in spine if chain[v]}
        across = [0] * (max(depth, default=0) + 2)
        at_depth = [0] * len(across)
        for v in spine:
            at_depth[depth[v]] += 1
            for u in self.ins[self.producer[v]]:
                if u in spine and depth[u] + 1 < depth[v]:
                    across[depth[u] + 1] += 1
                    across[depth[v]] -= 1
        covered, cut_at = 0, set()
        for d in range(len(across)):
            covered += across[d]
            if covered == 0 and at_depth[d] == 1 and d > 0:
                cut_at.add(d)
        residual_bytes = [0] * (max(depth, default=0) + 1)
        for i in self.residuals:
            residual_bytes[depth[i]] += self.size[i]
        self.chain_depth = depth
        return sorted((depth[v], v) for v in spine if depth[v] in cut_at), residual_bytes

    @functools.cached_property
    def cut_values(self) -> set:
        """The spine's cuts, as a set of value ids."""
        return {v for _, v in self.spine[0]}

    @functools.cached_property
    def step_of(self) -> list:
        """Per value, the index of the first cut at or below its chain depth: the *step*
        of the chain that makes it (-1: off the chain, made from the arguments)."""
        cuts, _ = self.spine
        cut_depths = [d for d, _ in cuts]
        depth = self.chain_depth
        return [bisect.bisect_left(cut_depths, depth[v]) if depth[v] > 0 else -1
                for v in range(len(self.keys))]

    def reach(self, dropped: set) -> list:
        """For each value, the last read of a ``dropped`` residual made from it: until then
        it may serve to recompute that residual (0: never)."""
        reach = [0] * len(self.keys)
        for i in dropped:
            reach[i] = self.reads[i][-1]
        for position in range(self.turn - 1, -1, -1):
            far = max(reach[o] for o in self.outs[position])
            if far:
                for i in self.ins[position]:
                    if reach[i] < far:
                        reach[i] = far
        return reach

    def checkpoints(self, span: int) -> set:
        """Cuts of the spine spaced about ``span`` residual bytes apart: values to keep
        through the backward half, to recompute the residuals between them from."""
        cuts, residual_bytes = self.spine
        kept: set = set()
        since, last = 0, 0
        for d, v in cuts:
            since += sum(residual_bytes[last + 1:d + 1])
            last = d
            if since >= span:
                kept.add(v)
                since = 0
        return kept


class _Simulation:
    """The program run in its order on sizes alone under one policy: ``kept`` values are
    held while they can serve a recomputation; ``dropped`` residuals are let go at the
    turn and recomputed, from the values held, where the backward half reads them.
    With ``emit``, the operations run (copies included) make the new graph."""

    def __init__(self, plan: _Plan, kept: set, dropped: set, emit: bool = False,
                 slots: int | None = None) -> None:
        self.plan, self.kept, self.dropped = plan, kept, dropped
        # Binomial checkpointing (revolve): ``slots`` cut values may be held at once; a
        # recomputation in the backward half holds the cuts of revolve's schedule and the
        # residuals of the steps read next, and lets the other values it makes go.
        self.slots = slots
        self.snapshots: set = set()       # cut values held as revolve's checkpoints
        self.designated: set = set()      # cuts the running recomputation is to hold
        self.transient: set = set()       # held for this recomputation, until the chain moves on
        self.current = -2                 # the step the running recomputation is for
        if slots is not None:
            self.designated = set(kept)   # the forward half's checkpoints
        n = len(plan.keys)
        self.resident = [False] * n
        self.sources: list = []             # heap of (reach, value): values held for copies
        self.reach = plan.reach(dropped)
        self.next_read = [0] * n            # index into plan.reads[i] of the next read
        self.pins = [0] * n
        self.held = self.peak = 0
        self.recomputed = 0
        self.recompute_cost = 0.0
        self.now = 0
        self.done = [False] * len(plan.ops)     # whether the operation itself was added
        self.deferred = self._deferred()
        # reads by deferred operations happen where those run: they hold nothing here
        self.reads = [[p for p in reads if not self.deferred[p]] for reads in plan.reads]
        self.builder = GraphBuilder() if emit else None
        self.local = [None] * n
        self.sizes: dict = {}
        if emit:
            for key in plan.graph.input_keys:
                self.local[plan.vid[key]] = self.builder.add_input(key.key)

    def _drop_residuals_read_only_later(self, position: int) -> None:
        """Let dropped residuals that the operation at ``position`` read or made go as soon
        as nothing before the turn reads them."""
        plan = self.plan
        for i in [*plan.ins[position], *plan.outs[position]]:
            if i in self.dropped and self.resident[i] and self.pins[i] == 0:
                reads = self.reads[i]
                k = self.next_read[i]
                while k < len(reads) and reads[k] <= position:
                    k += 1
                if k == len(reads) or reads[k] >= plan.turn:
                    self._drop(i)

    def _deferred(self) -> list:
        """Operations before the turn that nothing before it needs: the ones making only
        dropped residuals (and what only they read). They run where the backward half
        reads their results, so the forward half holds neither those nor their inputs."""
        plan = self.plan
        needed = [False] * len(plan.keys)
        for i in self.kept:
            needed[i] = True
        for key in plan.graph.output_keys:
            needed[plan.vid[key]] = True
        deferred = [False] * len(plan.ops)
        for position in range(plan.turn - 1, -1, -1):
            if any(needed[o] or (o not in self.dropped and plan.reads[o]
                                 and plan.reads[o][-1] >= plan.turn) for o in plan.outs[position]):
                for i in plan.ins[position]:
                    needed[i] = True
            else:
                deferred[position] = True
        return deferred

    def run(self) -> Rematerialized:
        plan = self.plan
        for position in range(len(plan.ops)):
            self.now = position
            if position == plan.turn:
                for i in self.dropped:
                    if self.resident[i]:
                        self._drop(i)
            if not self.deferred[position]:
                self._execute(position)
                if position < plan.turn:
                    self._drop_residuals_read_only_later(position)
            while self.sources and self.sources[0][0] <= position:
                i = heapq.heappop(self.sources)[1]
                if self.resident[i] and self.pins[i] == 0 and not self._wanted(i):
                    self._drop(i)
            for i in dict.fromkeys(plan.ins[position]):
                if plan.given[i]:
                    continue
                reads = self.reads[i]
                k = self.next_read[i]
                while k < len(reads) and reads[k] <= position:
                    k += 1
                self.next_read[i] = k
                if k == len(reads) and not plan.is_output[i] and self.resident[i]:
                    self._retire(i)
        graph = None
        if self.builder is not None:
            self.builder.set_outputs([self.local[plan.vid[key]]
                                      for key in plan.graph.output_keys])
            graph = self.builder.build()
        return Rematerialized(graph, self.peak, self.recomputed, self.recompute_cost,
                              self.sizes)

    # --- running operations -------------------------------------------------------------

    def _execute(self, position: int) -> None:
        """Run the operation at ``position``, first recomputing the inputs it lacks.

        A stack of frames, one per operation waiting for inputs: each pins the inputs
        it has (so that making the others cannot let them go) and asks for copies of
        the producers of those it lacks.
        """
        plan = self.plan
        resident, given = self.resident, plan.given
        if all(resident[i] or given[i] for i in plan.ins[position]):
            self._emit(position, False, (), None)  # the common case: nothing to recompute
            return
        if self.slots is not None and self.now >= plan.turn:
            self._plan_descent([i for i in plan.ins[position] if not (resident[i] or given[i])])
        frames = [(position, False, [], ())]   # (operation, a copy?, pinned, values asked)
        while frames:
            q, copy, pinned, asked = frames[-1]
            if copy and all(self.resident[o] for o in asked):
                self._release(pinned)          # made by a copy of the same operation
                frames.pop()
                continue
            missing = []
            for i in plan.ins[q]:
                if plan.given[i]:
                    continue
                if self.resident[i]:
                    if i not in pinned:
                        self.pins[i] += 1
                        pinned.append(i)
                elif i not in missing:
                    missing.append(i)
            if missing:
                if self.slots is not None:   # one at a time, the chain's first: what
                    # comes from the arguments is made last, and held by this frame only
                    missing = [max(missing, key=plan.step_of.__getitem__)]
                for i in missing:
                    frames.append((plan.producer[i], True, [], (i,)))
                continue
            self._emit(q, copy, asked, frames[-2][2] if copy else None)
            self._release(pinned)
            frames.pop()
        if self.transient:                    # the recomputation is done
            self._let_go_of_transients(math.inf)

    def _plan_descent(self, missing: list) -> None:
        """Revolve's schedule for the recomputation about to run: from the latest cut held
        below the step of ``missing``, the cuts to hold (:func:`_descent`)."""
        plan = self.plan
        step_of, cuts = plan.step_of, plan.spine[0]
        target = max(step_of[i] for i in missing)
        self.current = target
        start = max((step_of[v] for v in self.snapshots if step_of[v] < target), default=-1)
        free = self.slots - len(self.snapshots)
        self.designated = {cuts[j][1] for j in _descent(start, target, free)}

    def _let_go_of_transients(self, before_step: float) -> None:
        """Drop the values held for this recomputation only, of steps before ``before_step``
        (the chain's state has moved past them), unless a waiting frame pins them."""
        step_of = self.plan.step_of
        for i in [i for i in self.transient if step_of[i] < before_step and self.pins[i] == 0]:
            self._drop(i)

    def _holds(self, o: int) -> bool:
        """Revolve: whether a value recomputed in the backward half is held past its use."""
        if o in self.designated or o in self.snapshots:
            return True
        return self.plan.step_of[o] >= self.current - 1   # off the chain (-1): from arguments

    def _wanted(self, i: int) -> bool:
        """Whether value ``i`` is read again by the program (or is an output)."""
        return self.plan.is_output[i] or self.next_read[i] < len(self.reads[i])

    def _emit(self, q: int, copy: bool, asked: tuple, waiting: list | None) -> None:
        """Run the operation at ``q`` (or a copy of it); hold the outputs read later, and
        those ``asked`` for, pinned for the frame ``waiting`` for them."""
        plan = self.plan
        made = self.held + plan.made[q]
        if made > self.peak:
            self.peak = made
        copy = copy and self.done[q]        # a deferred operation's first run is no copy
        self.done[q] = True
        if copy:
            self.recomputed += 1
            self.recompute_cost += plan.cost[q]
        revolving = waiting is not None and self.slots is not None and self.now >= plan.turn
        ids = self._add_operation(q, copy)
        for o, local in zip(plan.outs[q], ids):
            if self.resident[o] or not (o in asked or self._wanted(o)):
                continue                     # a copy's output still held, or nobody's
            transient = revolving and not self._holds(o)
            if transient and o not in asked:
                continue
            self.local[o] = local
            self.resident[o] = True
            self.held += plan.size[o]
            if transient:
                self.transient.add(o)
            elif o in self.designated:
                self.snapshots.add(o)
            if revolving and o in self.plan.cut_values:      # the chain moved past
                self._let_go_of_transients(self.plan.step_of[o])
            if o in asked:
                self.pins[o] += 1
                waiting.append(o)

    def _add_operation(self, q: int, copy: bool) -> list:
        plan = self.plan
        if self.builder is None:
            return plan.outs[q]
        op_key = plan.ops[q]
        if copy:
            operation, role = Recompute(op_key.operation, self.recomputed), PRIMARY
        else:
            operation, role = op_key.operation, op_key.role
        ids = self.builder.add_operation(operation, [Local(self.local[i]) for i in plan.ins[q]],
                                         role)
        for o, local in zip(plan.outs[q], ids):
            self.sizes[self.builder.global_key(local)] = plan.size[o]
        return ids

    def _release(self, pinned: list) -> None:
        """Unpin values a frame held; retire those the program reads no more."""
        for i in pinned:
            self.pins[i] -= 1
            if self.pins[i] == 0 and self.resident[i] and i not in self.transient \
                    and not self._wanted(i):
                self._retire(i)

    # --- memory -----------------------------------------------------------------------

    def _retire(self, i: int) -> None:
        """Value ``i`` was read for the last time. Hold it while a residual made from it
        may need recomputing (before the turn, only if it is a checkpoint); else let go."""
        reach = self.reach[i]
        if i in self.transient:
            self._drop(i)
        elif reach > self.now and (i in self.kept or self.now >= self.plan.turn):
            heapq.heappush(self.sources, (reach, i))
        else:
            self._drop(i)

    def _drop(self, i: int) -> None:
        self.resident[i] = False
        self.held -= self.plan.size[i]
        self.snapshots.discard(i)
        self.transient.discard(i)
