"""``jit``: trace a function once per argument signature, optimize the graph, run it compiled.

``jit(f)`` traces ``f`` the first time it sees a signature (the structure of the
arguments, each array's shape and dtype, the values of the static arguments:
``static_argnums`` and ``static_argnames``, by position or by keyword),
hands the graph to :func:`tidu.optimize` and compiles the result into a
:class:`tidu.graph.Program`. Later calls with that signature run the program:
``f``'s Python code, and so its side effects, run once per trace, as in JAX.

While ``jit`` traces, only shapes and dtypes are known: Python control flow on a
traced value (``if x > 0``), ``float(x)`` or a boolean mask (whose result's
shape depends on its values) raise
:class:`~primitives.tensor.core.ConcretizationError` instead of baking the
first call's values into the program. Mark such arguments static. Integer index
arrays are data: new index values run the same program, and one out of range
raises ``IndexError`` when the call runs.

Closures follow Python's rule (:mod:`.closure`): arrays ``f`` reads from its
closure, globals, default arguments, modules or an object's attributes, and
from the lists, dicts and objects nested in them, are read at each call along
the path they were found on (``layers[0] = (W2, b2)`` is seen), not frozen at
the trace, and a new shape or dtype of one traces again; so do new contents of
one up to 1 MiB (NumPy's own functions may have read it while ``f`` traced: the
compiled program is reused when the trace comes out the same), a rebound
number, string, ``None`` or function the code names, and a new length of a list
it loops over. Static arguments are the exception, frozen by design as
in JAX: they are part of the signature. No result shares memory with an
argument, such an array, a constant or another result (:mod:`.fresh`).

Called on tensors or on other transforms' traced values (``grad(jit(f))``,
``jit`` on eager ``Tensor``s), the traced graph is replayed through their front
end, so derivatives flow through it; ``jit(grad(f))`` compiles the whole
gradient computation into one program.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> calls = []
>>> @jit
... def f(x):
...     calls.append(1)                       # a side effect: runs once per trace
...     return tnp.sum(tnp.sin(x) * x)
>>> float(f(np.ones(3))), float(f(np.zeros(3))), len(calls)
(2.5244129544236893, 0.0, 1)
"""

from __future__ import annotations

import functools
import math
import inspect
import numbers
import threading
from typing import Callable, Sequence

import numpy as np

from tidu import MemoryBudgetError, hoisted, measure_program, optimize, recompute, rematerialize
from tidu.graph import Program, compiled
from primitives.tensor.backends import NUMPY, as_array, common_library, device_of, library_of
from primitives.tensor.transforms.checkpoint import saves
from primitives.tensor.transforms.closure import (Guard, external_values, same_bits, staging,
                                                 stored_while_traced)
from primitives.tensor.transforms.fresh import fresh
from primitives.tensor.transforms.run import GraphRun
from primitives.tensor.core import Frontend, array_below, dtype_of, shape_of
from primitives.tensor.errors import TensorOverflowError
from primitives.tensor.ops.dot import DotGeneral
from primitives.tensor.ops.shape import ReduceSum
from primitives.tensor.transforms.functional import (WEAK_NUMBERS, FunctionalError, GraphTrace,
                                                     check_callable, check_output, in_library_of,
                                                     is_differentiated, weakened)
from primitives.tensor.transforms.pytree import leaf_hint, tree_flatten, tree_unflatten

_CACHE_SIZE = 256           # traces kept per jitted function (oldest dropped first)


def jit(f: Callable, static_argnums: int | Sequence[int] = (),
        memory_budget: int | None = None, *,
        static_argnames: str | Sequence[str] = (),
        donate_argnums: int | Sequence[int] = (), donate_argnames: str | Sequence[str] = (),
        keep_unused: bool = False, inline: bool = False) -> Callable:
    """``f`` traced and compiled once per (argument structure, shapes, dtypes, static args).

    ``f`` takes and returns arrays, numbers or (nested) tuples, lists and dicts
    of them; the arguments at ``static_argnums`` and those named in
    ``static_argnames`` are passed to ``f`` as they are (they must be hashable)
    and a new value traces again. As in ``jax.jit``, ``f``'s signature links
    the two: a static parameter is static whether the caller passes it by
    position or by keyword (unlike JAX, also when both lists are given), and one
    the caller leaves out takes its default. A negative number in ``static_argnums``
    counts from the end of ``f``'s positional parameters (from the call's arguments
    when ``f`` takes ``*args``), and equal static values of different types
    (``True``, ``1``, ``1.0``) are different signatures. A static argument is part of the
    signature, so frozen by design (as in JAX): unlike what ``f`` reads from its
    closure, what is written into it later is not read again.

    ``donate_argnums``, ``donate_argnames``, ``keep_unused`` and ``inline`` are JAX's
    hints, taken so that JAX code runs: they change nothing here (tidu never reuses an
    argument's memory for a result, so a donated argument stays valid).

    A Python number argument (``float``, ``int``, ``complex``) is traced, not static,
    and promotes as a number, as in ``f``'s own call (NumPy's NEP 50, JAX's weak
    types): ``jit(f)(float32_array, 2.5)`` computes in float32, and an integer out of
    range of an array's integer dtype raises an ``OverflowError`` as NumPy does (a
    ``TensorOverflowError``).

    ``memory_budget`` (bytes) bounds what the compiled program holds at once of
    the values it makes (intermediates and results; the arguments are the
    caller's): tidu recomputes values rather than keeping them
    (:func:`tidu.rematerialize`), which is what a ``grad`` program needs
    when it keeps too many forward values for its backward half. Too small a
    budget raises :class:`tidu.MemoryBudgetError` naming the smallest that works.
    The first call traces ``f`` with its values, so it holds what ``f`` holds (a value
    ``f`` no longer refers to is freed, as without ``jit``); calls after it run within
    the budget.

    >>> import numpy as np
    >>> import primitives.tensor as tnp
    >>> step = jit(tnp.grad(lambda w, x, y: tnp.mean((x @ w - y) ** 2)))
    >>> x, y = np.eye(2), np.array([1.0, 2.0])
    >>> step(np.zeros(2), x, y)                       # traced, compiled and run
    array([-1., -2.])
    >>> power = jit(lambda v, n: v ** n, static_argnums=1)
    >>> power(np.array([2.0]), 3), power(np.array([2.0]), n=2)   # n static either way
    (array([8.]), array([4.]))
    >>> scale = jit(lambda v, how="double": v * 2 if how == "double" else v,
    ...             static_argnames="how")
    >>> scale(np.array([1.0]), how="same")
    array([1.])

    The jitted function's ``clear_cache()`` drops its traced programs (JAX's): the next
    call traces ``f`` again.

    >>> traces = []
    >>> double = jit(lambda v: traces.append(1) or v * 2)
    >>> _ = double(np.ones(2)); double.clear_cache(); _ = double(np.ones(2))
    >>> len(traces)
    2
    """
    check_callable(f, "jit")
    _check_hints(f, donate_argnums, donate_argnames)
    statics = (static_argnums,) if isinstance(static_argnums, numbers.Integral) \
        else tuple(static_argnums)
    if memory_budget is not None and (not isinstance(memory_budget, numbers.Integral)
                                      or isinstance(memory_budget, bool) or memory_budget < 0):
        raise FunctionalError(f"jit of {_name(f)}: memory_budget must be a number of bytes "
                              f">= 0 or None, got {memory_budget!r}")
    arguments = _StaticArguments(f, statics, static_argnames)
    cache: dict = {}
    lock = threading.Lock()

    @functools.wraps(f)
    def jitted(*args, **kwargs):
        if arguments:
            static, dynamic, static_kw, kwargs = arguments.split(args, kwargs)
            statics = (_static_key(static), _static_key(static_kw))
        else:
            static, dynamic, static_kw, statics = (), args, (), _NO_STATICS
        leaves, structure = tree_flatten((dynamic, kwargs))
        layouts = []
        plain = True                    # every leaf a NumPy array (the usual call)
        for position, leaf in enumerate(leaves):
            if type(leaf) is np.ndarray:
                layouts.append((leaf.shape, leaf.dtype))
            elif type(leaf) in WEAK_NUMBERS:
                layouts.append(_weak_layout(leaf))
                leaves[position] = np.asarray(leaf)
                if leaves[position].dtype.kind == "O":
                    raise TensorOverflowError(f"jit of {_name(f)}: the Python integer {leaf} "
                                              f"is out of bounds for int64 and uint64, so it "
                                              f"cannot be traced")
            else:
                leaf = leaves[position] = _leaf(leaf, f)
                # a trace under a transform that differentiates the leaf may differ (a
                # custom_vjp call differentiated again runs fwd's code): not shared with others
                layout = (shape_of(leaf), dtype_of(leaf))
                layouts.append(layout + (True,) if is_differentiated(leaf) else layout)
                plain = plain and type(leaf) is np.ndarray
        signature = (structure, statics, tuple(layouts))
        try:
            with lock:
                traced = cache.get(signature)
        except TypeError:
            kinds = [type(v).__name__ for _, v in static + static_kw]
            raise FunctionalError(f"jit of {_name(f)}: a static argument is not hashable "
                                  f"({kinds})") from None
        if traced is not None:
            result = traced(leaves, plain)
            if result is not _STALE:
                return result if plain else _in_library_of_leaves(result, leaves, f)
        # a new signature, or what f reads from outside changed in a way only a trace sees
        traced = _Traced(f, static, structure, leaves, memory_budget, previous=traced,
                         static_kwargs=static_kw,
                         weak_leaves=tuple(layout[0] == "weak" for layout in layouts))
        if traced.reusable:
            with lock:
                cache.pop(signature, None)
                if len(cache) >= _CACHE_SIZE:
                    cache.pop(next(iter(cache)))
                cache[signature] = traced
        return traced.first_result if plain else \
            _in_library_of_leaves(traced.first_result, leaves, f)

    def clear_cache() -> None:
        """Drop every traced program of this jitted function: the next call traces again."""
        with lock:
            cache.clear()

    jitted.clear_cache = clear_cache
    return jitted


def _check_hints(f, donate_argnums, donate_argnames) -> None:
    """JAX's donation hints are ignored, but only when they are what JAX takes."""
    nums = (donate_argnums,) if isinstance(donate_argnums, numbers.Integral) else donate_argnums
    names = (donate_argnames,) if isinstance(donate_argnames, str) else donate_argnames
    if not isinstance(nums, (tuple, list)) or not all(
            isinstance(n, numbers.Integral) and not isinstance(n, bool) for n in nums):
        raise FunctionalError(f"jit of {_name(f)}: donate_argnums must be an int or a tuple "
                              f"of ints, got {donate_argnums!r}")
    if not isinstance(names, (tuple, list)) or not all(isinstance(n, str) for n in names):
        raise FunctionalError(f"jit of {_name(f)}: donate_argnames must be a str or a tuple "
                              f"of str, got {donate_argnames!r}")


class _StaticArguments:
    """Which arguments of a call are static: those at ``static_argnums`` and those named in
    ``static_argnames``, each list completed from ``f``'s signature by the other (JAX's rule),
    so that a static parameter is static however the caller passes it."""

    def __init__(self, f, statics: tuple, static_argnames) -> None:
        names = (static_argnames,) if isinstance(static_argnames, str) \
            else tuple(static_argnames)
        for name in names:
            if not isinstance(name, str):
                raise FunctionalError(f"jit of {_name(f)}: static_argnames takes parameter "
                                      f"names (str), got {name!r}")
        parameters = _parameters(f) if statics or names else None
        # positions a parameter of f may be given at (None: f's signature is unknown)
        self.positional = None if parameters is None else sum(
            p.kind in (_POSITIONAL, _EITHER) for p in parameters)
        if parameters is not None and not any(p.kind is _VAR_POSITIONAL for p in parameters):
            # a negative number counts from the end of f's positional parameters, not of the
            # call's arguments: static_argnums=-1 of f(x, n=2) is n in f(x, 3), f(x, n=3) and
            # f(x) alike (counted from the call, it would be x in the last two)
            statics = tuple(n + self.positional
                            if isinstance(n, numbers.Integral) and not isinstance(n, bool)
                            and -self.positional <= n < 0 else n for n in statics)
        self.f, self.statics = f, statics
        inferred_names, positions = [], []
        if parameters is not None:
            by_keyword = {p.name for p in parameters if p.kind in (_EITHER, _KEYWORD)}
            unknown = [n for n in names if n not in by_keyword]
            if unknown and not any(p.kind is _VAR_KEYWORD for p in parameters):
                raise FunctionalError(
                    f"jit of {_name(f)}: static_argnames {unknown} name no parameter that "
                    f"{_name(f)} takes by keyword (its parameters: "
                    f"{', '.join(p.name for p in parameters)})")
            for index, p in enumerate(parameters):
                if p.kind is not _EITHER:
                    continue
                if p.name in names:
                    positions.append(index)
                elif any(isinstance(n, numbers.Integral) and n == index for n in statics):
                    inferred_names.append(p.name)
        self.names = frozenset(names + tuple(inferred_names))
        self.named_positions = tuple(positions)      # static when passed by position

    def __bool__(self) -> bool:
        return bool(self.statics or self.names)

    def split(self, args: tuple, kwargs: dict):
        """``(static positional, dynamic positional, static keyword, dynamic keyword)``: the
        static ones as sorted ``(position or name, value)`` pairs."""
        count = len(args)
        positions = {n for n in self.named_positions if n < count}
        for n in self.statics:
            if isinstance(n, numbers.Integral) and not isinstance(n, bool) \
                    and count <= n < (self.positional or 0):
                continue          # a parameter of f passed by keyword or left to its default
            positions.add(_static_position(n, count, self.f))
        static = tuple((n, args[n]) for n in sorted(positions))
        dynamic = tuple([a for n, a in enumerate(args) if n not in positions]) if positions \
            else args
        if self.names and kwargs:
            static_kw = tuple(sorted((k, v) for k, v in kwargs.items() if k in self.names))
            if static_kw:
                kwargs = {k: v for k, v in kwargs.items() if k not in self.names}
        else:
            static_kw = ()
        return static, dynamic, static_kw, kwargs


_POSITIONAL, _EITHER = inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
_KEYWORD, _VAR_KEYWORD = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD
_VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL


def _parameters(f) -> list | None:
    """``f``'s parameters in order, or ``None`` when Python cannot tell its signature."""
    try:
        return list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        return None


def _static_key(value):
    """``value`` with the type of each element beside it: equal values of different types
    (``True``, ``1``, ``1.0``, ``np.int64(1)``) are different static arguments, each with its
    own trace (``f`` may well read the type: ``flag is True``, ``n.dtype``)."""
    if type(value) is tuple:
        return (tuple, tuple([_static_key(v) for v in value]))
    return (type(value), value)


def _static_position(n, count: int, f) -> int:
    if not isinstance(n, numbers.Integral) or not -count <= n < count:
        raise FunctionalError(f"jit of {_name(f)}: static_argnums {n!r} out of range for "
                              f"{count} arguments")
    return int(n) % count


_NARROW_INTEGERS = [np.iinfo(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                          np.uint32)]


def _weak_layout(number) -> tuple:
    """The signature of a Python number argument: traced as a number (:class:`WeakTracer`:
    ``float32_array * 2.5`` stays float32, as without ``jit``), apart from a 0-d array; an
    integer also by the narrow integer dtypes it fits (``int8_array + n`` overflows as NumPy's
    does, checked when traced)."""
    if type(number) is int:
        return ("weak", int, tuple(b.min <= number <= b.max for b in _NARROW_INTEGERS))
    return ("weak", type(number))


def _leaf(value, f):
    if type(value) is np.ndarray:       # the usual argument: taken as it is
        return value
    if isinstance(value, Frontend):
        return value
    if isinstance(value, (np.ndarray, np.generic, numbers.Number)):
        return np.asarray(value)
    if library_of(value) is not NUMPY:
        return as_array(value)
    raise FunctionalError(f"jit of {_name(f)}: an argument holds a {type(value).__name__}; "
                          f"pass arrays and numbers (or mark the argument static; "
                          f"{leaf_hint(value)})")


def _in_library_of_leaves(result, leaves: list, f):
    """``result`` with NumPy arrays (constants) in the library of the arguments (some leaves
    are not NumPy arrays): arrays of two libraries other than NumPy among them are a
    ``TensorTypeError``."""
    below = [array_below(leaf) for leaf in leaves]
    library = common_library(below, f"jit of {_name(f)}")
    if library is NUMPY:
        return result
    out_leaves, structure = tree_flatten(result)
    like = next(b for b in below if library_of(b) is library)
    return tree_unflatten(structure, in_library_of(out_leaves, [like]))


def _name(f) -> str:
    return getattr(f, "__qualname__", None) or type(f).__name__


_NO_STATICS = (_static_key(()), _static_key(()))   # a call with no static argument

_STALE = object()          # what a trace answers when what f reads from outside has changed


class _Traced:
    """``f`` traced at one signature: its optimized graph and compiled program, and the
    arrays it reads from outside (read again at each call: :mod:`.closure`).

    ``previous`` is the stale trace of the same signature, if any: when ``f`` traced again
    gives the same graph and constants (an array it reads changed, but nothing ``f``
    computed from it while tracing did), its optimized graph and program are reused."""

    def __init__(self, f, static: tuple, structure, leaves: list,
                 memory_budget: int | None = None, previous: "_Traced | None" = None,
                 static_kwargs: tuple = (), weak_leaves: tuple = ()) -> None:
        trace = GraphTrace(transform=f"jit of {_name(f)}", abstract=True)
        tracers = weakened([trace.new_input(("arg", i), leaf) for i, leaf in enumerate(leaves)],
                           weak_leaves)
        dynamic, kwargs = tree_unflatten(structure, tracers)
        args = list(dynamic)
        for position, value in static:
            args.insert(position, value)
        if static_kwargs:
            kwargs = {**kwargs, **dict(static_kwargs)}
        externals = external_values(f)
        try:
            with staging(trace, externals):
                out = f(*args, **kwargs)
            out_leaves, self.out_structure = tree_flatten(out)
            for position, value in enumerate(out_leaves):
                check_output(value, "jit", f, position)
            outs = [trace.lift(o) for o in out_leaves]
        finally:
            trace.active = False
        graph = trace.build(outs)
        self.arg_keys = list(graph.input_keys[:len(leaves)])
        constant_keys = list(graph.input_keys[len(leaves):])
        self.constants = [trace.values[k] for k in constant_keys]
        self.guard = Guard(externals, self.constants)
        # NumPy constants fixed at the trace, converted once per library and device the
        # arguments come in (not by each op at each call: a host-to-device copy on a GPU)
        self.fixed_numpy = tuple(
            p for p, c in enumerate(self.constants)
            if p not in self.guard.lifted_positions and isinstance(c, (np.ndarray, np.generic)))
        self.converted: dict = {}
        first = [tracer.value_below for tracer in outs]   # (not kept in trace.values)
        self.first_result = self._results(fresh(first, leaves + self.constants))
        # a closed-over tensor or traced value changes from call to call: trace again
        self.reusable = not any(isinstance(c, Frontend) for c in self.constants)
        # what f stored outside while traced and read (a parameter made at its first call):
        # traced once more, which finds it; unless the trace before stored too (f stores
        # at each trace, as a mask it recomputes: what it reads is what f would make now)
        self.stored = stored_while_traced(f, externals, self.constants)
        if self.stored and not (previous is not None and previous.stored):
            self.guard.expire()
        self.traced_keys = (graph.input_keys, graph.output_keys)
        if previous is not None and self._computed_by(previous):
            self.graph, self.input_keys, self.run = previous.graph, previous.input_keys, \
                previous.run
            return
        self.graph = _reordered(optimize(graph, graph.output_keys))
        self.input_keys = self.arg_keys + constant_keys
        program = compiled(self.graph)
        if not any(isinstance(v, Frontend) for v in leaves + self.constants):
            values = dict(zip(self.input_keys, leaves + self.constants))
            if memory_budget is not None:
                program = _within_budget(self.graph, memory_budget, values, f)
            elif trace.checkpointed:
                program = _recomputing(self.graph, trace.checkpointed, values)
        self.run = GraphRun(self.graph.output_keys, self.input_keys, program)

    def _computed_by(self, previous: "_Traced") -> bool:
        """Whether ``previous``'s program computes this trace: the same graph, and constants
        it may take in place of its own (:func:`_same_constant`)."""
        lifted = self.guard.lifted_positions
        return previous.reusable and self.reusable and \
            previous.traced_keys == self.traced_keys and \
            previous.guard.lifted_positions == lifted and \
            all(_same_constant(old, new, n in lifted)
                for n, (old, new) in enumerate(zip(previous.constants, self.constants)))

    def __call__(self, leaves: list, plain: bool):
        """The results for ``leaves`` (``plain``: all NumPy arrays), or ``_STALE``."""
        constants = self.guard.constants(self.constants)
        if constants is None:
            return _STALE
        if self.fixed_numpy and not plain:
            constants = self._constants_in_library_of(leaves, constants)
        return self._results(self.run(leaves + constants))

    def _constants_in_library_of(self, leaves: list, constants: list) -> list:
        """``constants`` with the NumPy ones fixed at the trace as arrays of the arguments'
        library and device, converted at the first call that needs them (arguments holding
        tensors or traced values replay through their front end: left as they are)."""
        like = None
        for leaf in leaves:
            if isinstance(leaf, Frontend):
                return constants
            if like is None and library_of(leaf) is not NUMPY:
                like = leaf
        if like is None:
            return constants
        key = (library_of(like).name, device_of(like))
        converted = self.converted.get(key)
        if converted is None:
            converted = in_library_of([constants[p] for p in self.fixed_numpy], [like])
            self.converted[key] = converted
        constants = list(constants)
        for position, value in zip(self.fixed_numpy, converted):
            constants[position] = value
        return constants

    def _results(self, outs: list):
        return tree_unflatten(self.out_structure, [_result(o) for o in outs])


def _reordered(graph):
    """``graph`` with its products that are no bigger than their operands, then its sums,
    moved up to right after their operands exist (:func:`tidu.hoisted`); the order of
    PyTorch's autograd, which runs a layer's bias sum, then its weight gradient's product,
    then the product passing the cotangent on.

    - A bias gradient's sum then reads the layer's cotangent before the big products that
      also read it evict it from the cache (a (256, 512) sum: 26 against 54 µs in NumPy,
      16 against 95 in PyTorch).
    - A weight gradient's product ``hᵀ·ct`` would otherwise wait for the whole backward
      pass (the graph lists the outputs' work output by output), holding every layer's
      activation ``h`` until the end; run early, it is ``h``'s last reader before
      ``tanh``'s derivative, which then writes into ``h`` instead of a new buffer (the
      MLP step: about 0.02 of its floor, docs/performance.md).
    - A product bigger than its operands (an outer product) stays where it is, so that
      moving it up never holds more memory for longer.
    """
    return hoisted(hoisted(graph, _shrinking_product), _is_sum)


def _shrinking_product(op) -> bool:
    return type(op) is DotGeneral and \
        math.prod(op.out_shape()) <= math.prod(op.lhs_shape) + math.prod(op.rhs_shape)


def _is_sum(op) -> bool:
    return type(op) is ReduceSum


def _within_budget(graph, budget: int, values: dict, f) -> Program:
    """The program of ``graph`` rematerialized to hold at most ``budget`` bytes (sizes and
    costs measured by running it once on ``values``)."""
    sizes, costs = measure_program(graph, values)
    try:
        return compiled(rematerialize(graph, int(budget), sizes, costs).graph)
    except MemoryBudgetError as error:
        raise MemoryBudgetError(f"jit of {_name(f)}: {error}", error.smallest_feasible) from None


def _recomputing(graph, checkpointed: dict, values: dict) -> Program:
    """The program of ``graph`` recomputing the values checkpointed blocks made that their
    policies do not save (:mod:`.checkpoint`)."""
    recomputed = [key for key, (op, policy) in checkpointed.items() if not saves(policy, op)]
    sizes, costs = measure_program(graph, values)
    return compiled(recompute(graph, recomputed, sizes, costs).graph)


def _same_constant(old, new, lifted: bool) -> bool:
    """Whether a program compiled with constant ``old`` may take ``new`` instead: the same
    object; an array of the same shape and dtype, if it is an external array read at each
    call (``lifted``); or equal in every bit (optimizing may have folded its value)."""
    if old is new:
        return True
    if type(old) is not type(new) or not isinstance(old, (np.ndarray, np.generic,
                                                          numbers.Number)):
        return False                            # another library's array: compiled again
    old, new = np.asarray(old), np.asarray(new)
    if old.shape != new.shape or old.dtype != new.dtype:
        return False
    return lifted or same_bits(old, new)


def _result(value):
    """Top-level results are arrays (0-d arrays, not NumPy scalars) or front-end values."""
    if type(value) is np.ndarray:           # the usual result, without the ABC check below
        return value
    return np.asarray(value) if isinstance(value, (np.generic, numbers.Number)) else value
