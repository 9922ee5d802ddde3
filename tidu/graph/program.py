"""Graphs compiled for evaluation: slot-indexed steps with a memory plan.

Compiling is one pass over operations already in dependency order: keep the
steps the outputs need, give every value a register, and note after which step
each register is last read. That liveness is the memory plan:

- a value is released right after its last read;
- a value that dies at a step, was made by the program (not given by the
  caller) and is read once by that step is *reusable*: an operation with the
  optional hook ``eval_reusing(ctx, inputs, reusable)`` may write its results
  into those inputs instead of allocating (NumPy's ``out=``). tidu knows no
  shapes, so the operation decides whether a buffer fits, and whether anything
  outside the program (a view, another register holding the same object) still
  uses it. When it is called, the program holds no reference to a reusable
  input but the ``inputs`` list.

Values the caller passes in and the program's outputs are never reusable, so
a run never writes into a caller's value or into a value it returns.

:func:`tidu.graph.evaluate` runs through a :class:`Program`; runtimes that run
one graph many times (eager backward) keep its :meth:`Program.runner`.

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
from typing import Any, Callable, Iterable, Mapping, Sequence

from tidu._gc import gc_paused
from tidu.errors import (
    EvalOutputError,
    InvalidArgumentError,
    MissingValueError,
    NotEvaluableError,
    sequence_argument,
)
from tidu.graph.builder import Graph
from tidu.graph.keys import Derived, OperationKey, ValueKey, existing_derived
from tidu.graph.operation import EvaluableGraphOperation, op_name
from tidu.graph.walk import postorder


def schedule(outputs: Iterable[ValueKey], known: Mapping | set) -> list[OperationKey]:
    """Operations needed to compute ``outputs`` from ``known`` keys, dependencies first.

    Of an operation's inputs, the one with the longest chain of operations behind it
    is computed first, so that what a short chain makes (``cos(x)`` for ``sin``'s
    derivative) is made just before it is read, not held while the long chain runs.
    An ``Input`` that is not known raises :class:`MissingValueError`.

    >>> from tidu.graph import Input, OperationKey
    >>> add = OperationKey("add", (Input("a"), Input("b")))
    >>> schedule([add.output_keys()[0]], {Input("a"), Input("b")}) == [add]
    True
    >>> x = Input("x")
    >>> deep = OperationKey("f", (OperationKey("g", (x,)).output_keys()[0],)).output_keys()[0]
    >>> short = OperationKey("h", (x,)).output_keys()[0]
    >>> [op.operation for op in schedule([OperationKey("mul", (short, deep)).output_keys()[0]],
    ...                                  {x})]
    ['g', 'f', 'h', 'mul']
    """
    producers: dict = {}                # operation -> the operations making its unknown inputs

    def producers_of(op_key):
        found = []
        for key in op_key._inputs:
            if key in known:
                continue
            if type(key) is not Derived:
                raise MissingValueError(f"no value given for {key!r} (input of {op_key!r})")
            found.append(key._operation)
        producers[op_key] = found
        return found

    roots = []
    for out in outputs:
        if out in known:
            continue
        if type(out) is not Derived:
            raise MissingValueError(f"no value given for {out!r}")
        roots.append(out._operation)
    order = postorder(roots, producers_of)
    depth: dict = {}                    # operation -> the longest chain of operations to it
    reordered = False
    for op_key in order:
        found = producers[op_key]
        if len(found) < 2:
            depth[op_key] = depth[found[0]] + 1 if found else 1
            continue
        depth[op_key] = 1 + max(map(depth.__getitem__, found))
        # postorder visits the last child first: the deepest goes last
        deepest_last = sorted(found, key=depth.__getitem__)
        if deepest_last != found:
            found[:] = deepest_last
            reordered = True
    return postorder(roots, producers.__getitem__) if reordered else order


def checked_eval_results(operation, results, n_out: int) -> list | tuple:
    """``results`` if it is a list or tuple of ``n_out`` values; else :class:`EvalOutputError`.

    Anything else is refused, even when it has a length: a NumPy array returned
    bare would otherwise be read as one output per row.
    """
    if not isinstance(results, (list, tuple)):
        raise EvalOutputError(
            f"{op_name(operation)}.eval returned a {type(results).__name__}, not a list or "
            f"tuple of its {n_out} output(s): wrap a single output as [value]")
    if len(results) != n_out:
        raise EvalOutputError(f"{op_name(operation)}.eval returned {len(results)} values for "
                              f"{n_out} outputs")
    return results


class Program:
    """``graph`` compiled to compute ``outputs`` (value keys; default: its outputs).

    ``loads`` pairs each key the caller gives with its register; each of
    ``steps`` is ``(call, reads, writes, n_out, frees, operation, reusable)``:
    ``call(ctx, args)`` runs the operation on the values of registers ``reads``,
    after the registers ``frees`` (inputs read for the last time) are released;
    ``reusable`` are the positions of the inputs it may write into. ``writes``
    pairs output slots with the registers they fill (outputs no one reads are
    dropped at once). ``outputs`` are the registers returned.
    """

    __slots__ = ("loads", "steps", "outputs", "n_registers", "__weakref__")

    def __init__(self, graph: Graph, outputs: Sequence | None = None) -> None:
        if not isinstance(graph, Graph):
            raise InvalidArgumentError(f"Program needs a Graph, got {type(graph).__name__}")
        out_keys = graph.output_keys if outputs is None else tuple(outputs)
        operations = graph.operation_keys
        with gc_paused():               # the steps outlive this: no collection walks them
            # Values read before any op produces them come from the caller's data.
            # (A graph may read a value as External and produce it again later.)
            self._compile(operations, out_keys, _read_before_produced(operations, out_keys))

    @classmethod
    def for_values(cls, outputs: Sequence[ValueKey], known) -> "Program":
        """The program computing ``outputs`` from values for the keys in ``known``.

        Only the operations ``outputs`` need from ``known`` run (a known
        intermediate cuts off its producers), so :meth:`run` needs values for
        the known keys they read.
        """
        if not isinstance(known, (Mapping, set, frozenset)):
            known = frozenset(known)    # (a list: every membership test would scan it)
        program = object.__new__(cls)
        with gc_paused():
            program._compile(schedule(outputs, known), tuple(outputs), known)
        return program

    def _compile(self, operations: Sequence[OperationKey], out_keys: tuple, given) -> None:
        """Steps for the ``operations`` (in order) that ``out_keys`` need; a value in ``given``
        comes from the caller, even where an operation computes it again.

        One backward pass, the liveness analysis: walking from the outputs back,
        an operation is kept if a value it makes is read later (has a register
        already), and an input seen for the first time is read for the last time
        at that step, which frees it. Registers are reused: before the operation
        that makes a value, its register holds nothing, so the values read
        earlier may take it (a step reads its inputs before it writes). A
        program needs as many registers as values are alive at once, not one
        per value.
        """
        registers: dict = {}            # value key -> register
        unused: list = []               # registers free before the step being walked
        for key in out_keys:
            registers.setdefault(key, len(registers))
        n_registers = len(registers)
        made: list = []                 # the keys steps write
        steps = []
        for op_key in reversed(operations):
            writes = _written_outputs(op_key, registers, given)
            if not writes:
                continue                # nothing later reads what it makes
            operation = op_key._operation
            if not isinstance(operation, EvaluableGraphOperation):
                raise NotEvaluableError(f"{op_name(operation)} ({op_key!r}) has no eval")
            made.append(op_key)
            unused.extend([register for _, register in writes])
            reads = []
            frees = []
            for key in op_key._inputs:
                register = registers.get(key)
                if register is None:    # its last read
                    if unused:
                        register = unused.pop()
                    else:
                        register, n_registers = n_registers, n_registers + 1
                    registers[key] = register
                    frees.append(register)
                reads.append(register)
            if frees and getattr(operation, "eval_reusing", None) is not None:
                reusable = _reusable(op_key._inputs, reads, frees, given)
                steps.append((_caller(operation, reusable), reads, writes, op_key._n_out,
                              frees, operation, reusable))
            else:
                steps.append((operation.eval, reads, writes, op_key._n_out, frees, operation,
                              ()))
        steps.reverse()
        self.steps = tuple(steps)
        self.loads = _loads(registers, given, made, steps)
        self.outputs = tuple([registers[key] for key in out_keys])
        self.n_registers = n_registers

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
        return _run_steps(env, self.steps, self.outputs, ctx)

    def runner(self, input_keys: Sequence, ctx: Any = None,
               outputs_as: tuple[type, Callable[[Any], Any]] | None = None
               ) -> Callable[[Sequence[Any]], list]:
        """A function from the values of ``input_keys`` (in order) to the outputs' values.

        Like :meth:`run` with the lookups by key done once, here; every key the
        program loads must be among ``input_keys``. The function takes exactly one
        value per input key; another count raises :class:`~tidu.errors.InvalidArgumentError`.
        With ``outputs_as=(kind, convert)``, an output whose type is not ``kind`` is
        returned as ``convert(output)`` (a runtime's scalars as its arrays, say).

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
        >>> compiled(g).runner(g.input_keys, outputs_as=(str, repr))([5.0, 1.0])
        ['4.0']
        """
        input_keys = sequence_argument(input_keys, "Program.runner", "input_keys")
        position = {key: i for i, key in enumerate(input_keys)}
        for key, _ in self.loads:
            if key not in position:
                raise MissingValueError(f"{key!r} is loaded by the program but not an input key")
        loads = tuple((position[key], slot) for key, slot in self.loads)
        if outputs_as is not None and not (
                isinstance(outputs_as, tuple) and len(outputs_as) == 2
                and isinstance(outputs_as[0], type) and callable(outputs_as[1])):
            raise InvalidArgumentError(f"Program.runner: outputs_as must be a (type, callable) "
                                       f"pair, got {outputs_as!r}")
        if len(self.steps) <= _STRAIGHT_LINE_MAX_STEPS:
            return _straight_line(loads, len(input_keys), self.steps, self.outputs, ctx,
                                  outputs_as)
        return _interpreter(loads, len(input_keys), self.steps, self.outputs, self.n_registers,
                            ctx, outputs_as)


def _read_before_produced(operations: Sequence[OperationKey], out_keys: tuple) -> set:
    produced: set = set()
    given: set = set()
    for op_key in operations:
        given.update([key for key in op_key._inputs if key not in produced])
        for slot in range(op_key._n_out):
            produced.add(existing_derived(op_key, slot))
    given.update([key for key in out_keys if key not in produced])
    return given


def _loads(registers: dict, given, made: list, steps: list) -> tuple:
    """``(key, register)`` for every value the caller gives; every other value read must
    be written by a step (of the operations ``made``), else :class:`MissingValueError`."""
    loads = tuple([(key, register) for key, register in registers.items() if key in given])
    if len(loads) + sum(len(step[2]) for step in steps) != len(registers):
        written = {existing_derived(op_key, slot) for op_key, step in zip(made[::-1], steps)
                   for slot, _ in step[2]}
        for key in registers:
            if key not in given and key not in written:
                raise MissingValueError(f"no value given for {key!r}")
    return loads


def _written_outputs(op_key: OperationKey, registers: dict, given) -> list:
    """``(slot, register)`` for the outputs of ``op_key`` read later (they have a register)
    and not given by the caller."""
    if op_key._n_out == 1:
        key = existing_derived(op_key, 0)
        register = registers.get(key)
        return [] if register is None or key in given else [(0, register)]
    writes = []
    for slot in range(op_key._n_out):
        key = existing_derived(op_key, slot)
        register = registers.get(key)
        if register is not None and key not in given:
            writes.append((slot, register))
    return writes


def _reusable(inputs: tuple, reads: list, frees: list, given) -> tuple:
    """Positions of the inputs a step may write into: read for the last time there, made by
    the program (not given), read once by the step."""
    return tuple([i for i, (key, register) in enumerate(zip(inputs, reads))
                  if register in frees and key not in given and reads.count(register) == 1])


def _caller(operation, reusable: tuple) -> Callable:
    """``call(ctx, args)`` for a step: ``operation.eval``, or its ``eval_reusing`` with
    the step's reusable positions."""
    if not reusable:
        return operation.eval
    eval_reusing = operation.eval_reusing

    def call(ctx, args):
        return eval_reusing(ctx, args, reusable)
    return call


def _run_steps(env: list, steps: tuple, outputs: tuple, ctx, outputs_as=None) -> list:
    """Run ``steps`` on the registers ``env``; return the values of ``outputs``."""
    for call, reads, writes, n_out, frees, operation, _ in steps:
        args = [env[r] for r in reads]
        for r in frees:
            env[r] = None
        results = call(ctx, args)
        args = None                 # release dead inputs now, not at the next step
        if type(results) is not list or len(results) != n_out:
            results = checked_eval_results(operation, results, n_out)
        for slot, w in writes:
            env[w] = results[slot]
        results = None              # outputs no one reads die here; the next step may reuse
    if outputs_as is not None:
        kind, convert = outputs_as
        return [env[r] if type(env[r]) is kind else convert(env[r]) for r in outputs]
    return [env[r] for r in outputs]


# Small programs (eager backward's per-node work) run as generated straight-line
# Python: no environment list, no loop (1.2-1.6x faster eager backward per node,
# docs/performance.md). Larger ones loop over their steps.
_STRAIGHT_LINE_MAX_STEPS = 64


def _straight_line(loads, n_values: int, steps, outputs, ctx, outputs_as=None
                   ) -> Callable[[Sequence[Any]], list]:
    """``steps`` as the source of one Python function over local variables ``r<register>``.

    The values arrive by one unpacking (``[r0, _, r1] = values``), which also checks
    their number; a step whose ``eval`` did not return a list of the right length
    goes through :func:`checked_eval_results`. A step with reusable inputs drops
    its registers' references before the call, as :func:`_run_steps` does.
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
    for k, (call, reads, writes, n_out, frees, operation, reusable) in enumerate(steps):
        namespace[f"op{k}"] = operation
        args = f"[{', '.join(f'r{r}' for r in reads)}]"
        if not reusable:
            namespace[f"eval{k}"] = operation.eval
            lines.append(f"    out = eval{k}(ctx, {args})")
            lines += [f"    r{r} = None" for r in frees]      # release big values early
        else:
            namespace[f"reuse{k}"] = operation.eval_reusing
            lines.append(f"    args = {args}")
            lines += [f"    r{r} = None" for r in frees]
            lines.append("    out = None")                         # the last step's results
            lines.append(f"    out = reuse{k}(ctx, args, {reusable!r})")
            lines.append("    args = None")
        lines.append(f"    if type(out) is not list or len(out) != {n_out}: "
                     f"out = _checked(op{k}, out, {n_out})")
        lines += [f"    r{w} = out[{slot}]" for slot, w in writes]
        if len(writes) < n_out:
            lines.append("    out = None")                         # outputs no one reads
    if outputs_as is None:
        lines.append(f"    return [{', '.join(f'r{r}' for r in outputs)}]")
    else:
        namespace["_kind"], namespace["_convert"] = outputs_as
        lines.append("    return [" + ", ".join(f"r{r} if type(r{r}) is _kind else _convert(r{r})"
                                                for r in outputs) + "]")
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


def _interpreter(loads, n_values: int, steps, outputs, n_registers, ctx, outputs_as=None
                 ) -> Callable[[Sequence[Any]], list]:
    """A loop over ``steps`` with values in a list indexed by register."""

    def run(values: Sequence[Any]) -> list:
        try:
            if len(values) != n_values:
                _wrong_value_count(values, n_values)
        except TypeError:
            _wrong_value_count(values, n_values)
        env = [None] * n_registers
        for i, slot in loads:
            env[slot] = values[i]
        return _run_steps(env, steps, outputs, ctx, outputs_as)
    return run


_lock = threading.Lock()
_CACHED_PER_GRAPH = 8            # evaluate's programs kept per graph (output and value keys)


def _programs(graph: Graph) -> dict:
    """The programs compiled for ``graph``, kept on it: ``None`` -> :func:`compiled`'s."""
    try:
        programs = graph._program
    except AttributeError:
        raise InvalidArgumentError(f"compiled needs a Graph, got {type(graph).__name__}") from None
    if programs is None:
        with _lock:
            programs = graph._program
            if programs is None:
                programs = {}
                object.__setattr__(graph, "_program", programs)
    return programs


def compiled(graph: Graph) -> Program:
    """The :class:`Program` computing ``graph``'s outputs, compiled once and kept on the graph."""
    programs = _programs(graph)
    program = programs.get(None)
    if program is None:
        program = programs[None] = Program(graph)
    return program


def compiled_for(graph: Graph, outputs: Sequence[ValueKey], known) -> Program:
    """:meth:`Program.for_values` of ``outputs`` and the keys of ``known``, kept on ``graph``.

    The program depends only on the keys, so any graph whose lifetime suits the
    caller may keep it; a few are kept per graph.
    """
    programs = _programs(graph)
    cache_key = (tuple(outputs), frozenset(known))
    program = programs.get(cache_key)
    if program is None:
        program = Program.for_values(outputs, cache_key[1])
        if len(programs) > _CACHED_PER_GRAPH:
            for key in list(programs):
                if key is not None:
                    programs.pop(key, None)
        programs[cache_key] = program
    return program
