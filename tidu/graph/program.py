"""A graph compiled for repeated evaluation: a slot-indexed list of steps.

A :class:`Graph`'s operations are already in dependency order, so compiling is
one pass: keep the steps the outputs need, give every value a register, and
note after which step each register is last read so it can be released.
Runtimes that evaluate the same graph many times (eager backward) use this
instead of :func:`evaluate`, which re-plans on every call.

>>> import enum
>>> from tidu.graph import EvaluableGraphOperation, GraphBuilder, Local, Input
>>> class Op(EvaluableGraphOperation, enum.Enum):
...     MUL = "mul"
...     def input_count(self): return 2
...     def output_count(self): return 1
...     def eval(self, ctx, inputs): return [inputs[0] * inputs[1]]
>>> b = GraphBuilder(); x = b.add_input("x")
>>> [y] = b.add_operation(Op.MUL, [Local(x), Local(x)]); b.set_outputs([y])
>>> program = compiled(b.build())
>>> program.run({Input("x"): 3.0})
[9.0]
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping, Sequence

from tidu.errors import (
    InvalidArgumentError,
    MissingValueError,
    NotEvaluableError,
    sequence_argument,
)
from tidu.graph.builder import Graph
from tidu.graph.evaluate import checked_eval_results
from tidu.graph.operation import EvaluableGraphOperation, op_name


class Program:
    """``graph`` compiled to compute ``outputs`` (value keys) from given values."""

    __slots__ = ("loads", "steps", "outputs", "n_registers", "__weakref__")

    def __init__(self, graph: Graph, outputs: Sequence | None = None) -> None:
        if not isinstance(graph, Graph):
            raise InvalidArgumentError(f"Program needs a Graph, got {type(graph).__name__}")
        keys = graph.value_keys
        index = graph._index
        out_keys = graph.output_keys if outputs is None else tuple(outputs)
        registers: dict = {}            # value key -> register

        def register(key):
            slot = registers.get(key)
            if slot is None:
                slot = registers[key] = len(registers)
            return slot

        # Keep only what the outputs need: one backward pass over the ops.
        needed = set(out_keys)
        kept = []
        for op_key in reversed(graph.operation_keys):
            if any(k in needed for k in op_key.output_keys()):
                kept.append(op_key)
                needed.update(op_key.inputs)
        kept.reverse()
        # Values read before any kept op produces them are loaded from the caller's data.
        # (A graph may read a value as External and produce it again later.)
        produced: set = set()
        loaded: set = set()
        for op_key in kept:
            loaded.update(k for k in op_key.inputs if k not in produced)
            produced.update(op_key.output_keys())
        loaded.update(k for k in out_keys if k not in produced)
        self.loads = tuple((key, register(key)) for key in _ordered(loaded, keys, index))
        last_read: dict = {}
        for position, op_key in enumerate(kept):
            for key in op_key.inputs:
                last_read[key] = position
        for key in out_keys:
            last_read[key] = len(kept)              # outputs stay to the end
        steps = []
        for position, op_key in enumerate(kept):
            operation = op_key.operation
            if not isinstance(operation, EvaluableGraphOperation):
                raise NotEvaluableError(f"{op_name(operation)} ({op_key!r}) has no eval")
            reads = tuple(register(k) for k in op_key.inputs)
            writes = tuple(register(k) for k in op_key.output_keys())
            frees = tuple({registers[k] for k in op_key.inputs if last_read[k] == position})
            steps.append((operation, reads, writes, frees))
        self.steps = tuple(steps)
        self.outputs = tuple(register(k) for k in out_keys)
        self.n_registers = len(registers)

    def run(self, values: Mapping[Any, Any], ctx: Any = None) -> list:
        """The outputs' values, given values for every loaded key."""
        env = [None] * self.n_registers
        for key, slot in self.loads:
            try:
                env[slot] = values[key]
            except KeyError:
                raise MissingValueError(f"no value given for {key!r}") from None
            except TypeError:
                raise InvalidArgumentError(f"Program.run: values must be a mapping from value "
                                           f"keys to values, got {type(values).__name__}") from None
        for operation, reads, writes, frees in self.steps:
            results = operation.eval(ctx, [env[r] for r in reads])
            if type(results) is not list or len(results) != len(writes):
                results = checked_eval_results(operation, results, len(writes))
            for w, result in zip(writes, results):
                env[w] = result
            for r in frees:
                env[r] = None
        return [env[r] for r in self.outputs]

    def runner(self, input_keys: Sequence, ctx: Any = None) -> Callable[[Sequence[Any]], list]:
        """A function from the values of ``input_keys`` (in order) to the outputs' values.

        Like :meth:`run` with the lookups by key done once, here; every key the
        program loads must be among ``input_keys``. The function takes exactly one
        value per input key; another count raises :class:`~tidu.errors.InvalidArgumentError`.

        >>> import enum
        >>> from tidu.graph import EvaluableGraphOperation, GraphBuilder, Local
        >>> class Op(EvaluableGraphOperation, enum.Enum):
        ...     SUB = "sub"
        ...     def input_count(self): return 2
        ...     def output_count(self): return 1
        ...     def eval(self, ctx, inputs): return [inputs[0] - inputs[1]]
        >>> b = GraphBuilder(); x = b.add_input("x"); y = b.add_input("y")
        >>> b.set_outputs(b.add_operation(Op.SUB, [Local(x), Local(y)]))
        >>> g = b.build()
        >>> compiled(g).runner([g.input_keys[1], g.input_keys[0]])([1.0, 5.0])
        [4.0]
        """
        input_keys = sequence_argument(input_keys, "Program.runner", "input_keys")
        position = {key: i for i, key in enumerate(input_keys)}
        for key, _ in self.loads:
            if key not in position:
                raise MissingValueError(f"{key!r} is loaded by the program but not an input key")
        loads = tuple((position[key], slot) for key, slot in self.loads)
        if len(self.steps) <= _STRAIGHT_LINE_MAX_STEPS:
            return _straight_line(loads, len(input_keys), self.steps, self.outputs, ctx)
        return _interpreter(loads, len(input_keys), self.steps, self.outputs, self.n_registers,
                            ctx)


# Small programs (eager backward's per-node work) run as generated straight-line
# Python: no environment list, no loop. Larger ones loop over their steps.
_STRAIGHT_LINE_MAX_STEPS = 64


def _straight_line(loads, n_values: int, steps, outputs, ctx) -> Callable[[Sequence[Any]], list]:
    """``steps`` as the source of one Python function over local variables ``r<register>``.

    The values arrive by one unpacking (``[r0, _, r1] = values``), which also checks
    their number; a step whose ``eval`` did not return a list of the right length
    goes through :func:`checked_eval_results`.
    """
    namespace: dict = {"ctx": ctx, "_checked": checked_eval_results,
                       "_wrong_count": _wrong_value_count}
    targets = ["_"] * n_values
    for i, slot in loads:
        targets[i] = f"r{slot}"
    lines = ["def run(values):",
             "    try:",
             f"        [{', '.join(targets)}] = values",
             "    except (TypeError, ValueError):",
             f"        _wrong_count(values, {n_values})"]
    for k, (operation, reads, writes, frees) in enumerate(steps):
        namespace[f"op{k}"] = operation
        namespace[f"eval{k}"] = operation.eval
        lines.append(f"    out = eval{k}(ctx, [{', '.join(f'r{r}' for r in reads)}])")
        lines.append(f"    if type(out) is not list or len(out) != {len(writes)}: "
                     f"out = _checked(op{k}, out, {len(writes)})")
        lines += [f"    r{w} = out[{j}]" for j, w in enumerate(writes)]
        lines += [f"    r{r} = None" for r in frees]          # release big values early
    lines.append(f"    return [{', '.join(f'r{r}' for r in outputs)}]")
    exec("\n".join(lines), namespace)
    return namespace["run"]


def _wrong_value_count(values, expected: int) -> None:
    """Raise the error for a runner called with other than one value per input key."""
    try:
        given = f"{len(values)} values"
    except TypeError:
        given = type(values).__name__
    raise InvalidArgumentError(f"this runner takes a sequence of {expected} values, one per "
                               f"input key; got {given}")


def _interpreter(loads, n_values: int, steps, outputs, n_registers, ctx
                 ) -> Callable[[Sequence[Any]], list]:
    """A loop over ``steps`` with values in a list indexed by register."""
    steps = tuple((operation.eval, operation, reads, writes, frees)
                  for operation, reads, writes, frees in steps)

    def run(values: Sequence[Any]) -> list:
        try:
            if len(values) != n_values:
                _wrong_value_count(values, n_values)
        except TypeError:
            _wrong_value_count(values, n_values)
        env = [None] * n_registers
        for i, slot in loads:
            env[slot] = values[i]
        for evaluate, operation, reads, writes, frees in steps:
            results = evaluate(ctx, [env[r] for r in reads])
            if type(results) is not list or len(results) != len(writes):
                results = checked_eval_results(operation, results, len(writes))
            for w, result in zip(writes, results):
                env[w] = result
            for r in frees:
                env[r] = None
        return [env[r] for r in outputs]
    return run


def _ordered(keys: set, graph_keys, index) -> list:
    """``keys`` in a stable order: the graph's own inputs by id first, then the rest."""
    local = sorted((k for k in keys if k in index), key=index.__getitem__)
    return local + [k for k in keys if k not in index]


_lock = threading.Lock()


def compiled(graph: Graph) -> Program:
    """The :class:`Program` computing ``graph``'s outputs, compiled once and kept on the graph."""
    try:
        program = graph._program
    except AttributeError:
        raise InvalidArgumentError(f"compiled needs a Graph, got {type(graph).__name__}") from None
    if program is None:
        with _lock:
            program = graph._program
            if program is None:
                program = Program(graph)
                object.__setattr__(graph, "_program", program)
    return program
