"""``BackwardExecutor``: what a runtime gives tidu so backward runs on its data.

As in seed 004, backward linearizes each recorded node and asks the executor
to run its transpose: ``run_transposed_linear(linear, cotangents,
external_data, ctx)`` once per node that receives a cotangent, after
``execute_forward`` wherever the primal values the transpose reads must be
replayed. ``add_operands`` sums two cotangents of one value.

The base class's ``run_transposed_linear`` is as fast as tidu can make it:
when an executor's class overrides neither hook, backward runs each node's
*fused plan* instead (the replay and the transpose in one graph, compiled once
per plan with ``compile_graph``), which is what the two default hooks compute.
An override of either hook is always called: see :func:`overridden_hooks`.

>>> from tidu.graph import compiled
>>> class Executor(BackwardExecutor):
...     def execute_forward(self, graph, data):
...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
...     def add_operands(self, a, b):
...         return a + b
>>> sorted(overridden_hooks(Executor()))       # its execute_forward is the one it wrote
['execute_forward']
"""

from __future__ import annotations

import abc
import threading
import weakref
from typing import Any, Callable, Mapping, Sequence

from tidu import LinearizedGraph, linear_transpose
from tidu.errors import InvalidArgumentError, MissingValueError
from tidu.graph import Graph, ValueKey, compiled


class BackwardExecutor(abc.ABC):
    """What a runtime provides so tidu can run backward on its data.

    Required: ``execute_forward`` (evaluate a graph of the runtime's operations
    on its data) and ``add_operands`` (sum two cotangents of one value).
    The hook ``run_transposed_linear`` (run a node's transposed linear map) has
    a default. Optional: ``compile_graph`` (turn a graph into a function of
    positional values, once per cached plan: the speed hook) and ``check_seed``
    (refuse seeds that do not fit the output, such as one of the wrong shape or
    dtype: tidu knows neither).

    Which hooks backward calls per node is decided per class, again whenever
    the class's hook methods change (:func:`overridden_hooks`): an override of
    ``run_transposed_linear`` or ``execute_forward`` is called at every node, as
    the seed describes; without one, each node runs its fused plan through
    ``compile_graph``. A class that defines ``compile_graph`` at or below the
    class its ``execute_forward`` comes from vouches that the two compute the
    same: backward then never calls that ``execute_forward``.

    >>> from tidu.graph import compiled
    >>> class Executor(BackwardExecutor):
    ...     def execute_forward(self, graph, data):
    ...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
    ...     def compile_graph(self, graph, input_keys):   # vouches for execute_forward
    ...         return compiled(graph).runner(input_keys)
    ...     def add_operands(self, a, b):
    ...         return a + b
    >>> overridden_hooks(Executor())                     # so backward runs fused plans
    frozenset()
    """

    @abc.abstractmethod
    def execute_forward(self, graph: Graph, initial_data: Mapping[ValueKey, Any]
                        ) -> Mapping[ValueKey, Any]:
        """Evaluate ``graph`` from ``initial_data``; return at least its outputs' values, by key.

        ``initial_data`` holds values for the graph's inputs and for the keys it
        reads as ``External`` references (the node's saved values, say).
        """

    @abc.abstractmethod
    def add_operands(self, a, b):
        """``a + b`` for two cotangents of the same value.

        tidu hands over ``a`` where it can: it keeps no reference to it. A runtime
        that can tell nothing else holds ``a`` (no view, no other key) may add
        ``b`` into it in place and return it.
        """

    def run_transposed_linear(self, linear: LinearizedGraph, cotangent_out: Sequence[Any | None],
                              external_data: Mapping[ValueKey, Any], ctx
                              ) -> Sequence[Any | None]:
        """Cotangents of ``linear``'s tangent inputs, given ones of its tangent outputs.

        ``cotangent_out`` has one entry per ``linear.tangent_outputs`` (ignored
        where that output is a symbolic zero); ``external_data`` holds the primal
        values the transpose reads, by key. Returns one cotangent per
        ``linear.tangent_inputs``, ``None`` for a symbolic zero.

        The default transposes ``linear`` once (kept on it) and runs the
        transposed graph: with the function ``compile_graph`` made for it, or,
        when the class overrides ``execute_forward`` below its ``compile_graph``,
        with ``execute_forward``. Override it to run transposes your own way,
        e.g. with :func:`tidu.linear_transpose_with_builder` and an
        :class:`~tidu.eager.ImmediateBuilder`.

        >>> from tidu import linearize
        >>> from tidu.example_ops import trace
        >>> from tidu.graph import Input, compiled
        >>> class Executor(BackwardExecutor):
        ...     def execute_forward(self, graph, data):
        ...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
        ...     def add_operands(self, a, b):
        ...         return a + b
        >>> graph = trace(lambda x, y: x * y, ["x", "y"])
        >>> linear = linearize(graph, graph.output_keys, ["x", "y"])
        >>> Executor().run_transposed_linear(linear, [2.0], {Input("x"): 3.0, Input("y"): 5.0},
        ...                                  None)
        [10.0, 6.0]
        """
        transposed = _transposed_run(linear, ctx)
        seeds = transposed.seeds(linear, cotangent_out)
        if seeds is None:                        # every tangent output is a zero
            return [None] * len(linear.tangent_inputs)
        values = [_external(external_data, key) for key in transposed.data_keys]
        results = transposed.runner(self)(values + seeds)
        return [None if i is None else results[i] for i in transposed.outputs]

    def check_seed(self, seed, output) -> None:
        """Raise a :class:`tidu.TiduError` if ``seed`` cannot be the cotangent of ``output``.

        ``try_backward`` calls it once, with the recorded output's data, before
        any work: tidu knows no shapes or dtypes, so the runtime checks that the
        seed has the output's shape and a dtype its cotangent may have. The default
        accepts any seed (``None`` is refused by ``try_backward`` itself).

        >>> from tidu.example_ops import Op
        >>> class Executor(BackwardExecutor):
        ...     def execute_forward(self, graph, data): ...
        ...     def add_operands(self, a, b): return a + b
        >>> Executor().check_seed("anything", 1.0) is None
        True
        """

    def compile_graph(self, graph: Graph, input_keys: Sequence[ValueKey]
                      ) -> Callable[[Sequence[Any]], Sequence[Any]]:
        """A function from the values of ``input_keys`` (in order) to ``graph``'s outputs' values.

        Backward compiles each cached plan's graph once and then calls the
        result at every node with that plan. The default runs
        ``execute_forward``; override it to skip that call's dict round trip,
        e.g. with ``tidu.graph.compiled(graph).runner(input_keys)``. A class
        that defines ``compile_graph`` (at or below the class its
        ``execute_forward`` comes from) vouches that the function computes what
        ``execute_forward`` would.

        >>> from tidu.example_ops import trace
        >>> from tidu.graph import compiled
        >>> class Executor(BackwardExecutor):
        ...     def execute_forward(self, graph, data):
        ...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
        ...     def add_operands(self, a, b):
        ...         return a + b
        >>> graph = trace(lambda x, y: x * y, ["x", "y"])
        >>> Executor().compile_graph(graph, graph.input_keys)([3.0, 5.0])
        [15.0]
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


def _external(external_data: Mapping, key):
    try:
        return external_data[key]
    except KeyError:
        raise MissingValueError(f"run_transposed_linear: external_data has no value for "
                                f"{key!r}, which the transpose reads") from None


# --- which hooks a class overrides ---------------------------------------------------------

_HOOKS = ("run_transposed_linear", "execute_forward")
# class -> (weak references to its three methods as last seen, the hooks it overrides with
# them); weak, as a method using super() refers to its class, which would then never die
_overrides: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def overridden_hooks(executor: BackwardExecutor) -> frozenset:
    """The hooks of ``executor`` that backward must call per node: a subset of
    ``{"run_transposed_linear", "execute_forward"}``. Empty: it runs fused plans.

    ``run_transposed_linear`` counts as overridden unless it is the base
    class's. ``execute_forward`` counts as overridden when it comes from a class
    below the one ``compile_graph`` comes from (a subclass of ``NumpyExecutor``
    that overrides it, or a runtime that writes it and keeps the default
    ``compile_graph``): that ``compile_graph`` cannot know it. A ``compile_graph``
    at or below ``execute_forward``'s class vouches for it, so that
    ``execute_forward`` is not called. Decided per class and kept until one of
    the class's three methods changes (a hook patched onto it, or onto a base
    class, counts from the next call); an attribute set on the instance itself
    counts too.

    >>> from tidu.graph import compiled
    >>> class Fast(BackwardExecutor):
    ...     def execute_forward(self, graph, data):
    ...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
    ...     def compile_graph(self, graph, input_keys):
    ...         return compiled(graph).runner(input_keys)
    ...     def add_operands(self, a, b):
    ...         return a + b
    >>> class Counting(Fast):
    ...     def execute_forward(self, graph, data):
    ...         return super().execute_forward(graph, data)
    >>> overridden_hooks(Fast()), sorted(overridden_hooks(Counting()))
    (frozenset(), ['execute_forward'])
    """
    cls = type(executor)
    methods = (cls.run_transposed_linear, cls.execute_forward, cls.compile_graph)
    seen = _overrides.get(cls)
    if seen is not None and all(ref() is method for ref, method in zip(seen[0], methods)):
        hooks = seen[1]
    else:
        hooks = _class_overrides(cls)
        with _lock:
            _overrides[cls] = (tuple(map(_weak, methods)), hooks)
    own = getattr(executor, "__dict__", None)
    if own and any(name in own for name in _HOOKS):
        hooks = hooks.union(name for name in _HOOKS if name in own)
    return hooks


def _weak(method) -> Callable:
    """A weak reference to ``method``, or, for one that takes none (a builtin), a strong one."""
    try:
        return weakref.ref(method)
    except TypeError:
        return lambda: method


def _class_overrides(cls) -> frozenset:
    hooks = set()
    if cls.run_transposed_linear is not BackwardExecutor.run_transposed_linear:
        hooks.add("run_transposed_linear")
    mro = cls.__mro__
    if _defined_at(mro, "execute_forward") < _defined_at(mro, "compile_graph"):
        hooks.add("execute_forward")
    return frozenset(hooks)


def _defined_at(mro: tuple, name: str) -> int:
    """The position in ``mro`` of the class that defines ``name``."""
    return next(i for i, cls in enumerate(mro) if name in cls.__dict__)


def graph_runner(executor: BackwardExecutor, graph: Graph, input_keys: Sequence[ValueKey]
                 ) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """``executor.compile_graph(graph, input_keys)``, or, when the executor overrides
    ``execute_forward`` (:func:`overridden_hooks`), the base class's function, which
    calls that override: every graph tidu runs on the runtime's data goes through it.

    >>> from tidu.example_ops import trace
    >>> from tidu.graph import compiled
    >>> class Executor(BackwardExecutor):
    ...     def execute_forward(self, graph, data):
    ...         print("execute_forward")
    ...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
    ...     def compile_graph(self, graph, input_keys):
    ...         return compiled(graph).runner(input_keys)
    ...     def add_operands(self, a, b):
    ...         return a + b
    >>> class Counting(Executor):
    ...     def execute_forward(self, graph, data):
    ...         return super().execute_forward(graph, data)
    >>> graph = trace(lambda x: x * x, ["x"])
    >>> graph_runner(Executor(), graph, graph.input_keys)([3.0])
    [9.0]
    >>> graph_runner(Counting(), graph, graph.input_keys)([3.0])
    execute_forward
    [9.0]
    """
    if "execute_forward" in overridden_hooks(executor):
        return BackwardExecutor.compile_graph(executor, graph, input_keys)
    return executor.compile_graph(graph, input_keys)


# --- transposes, kept on their linear graphs -------------------------------------------------

def transposed_of(linear: LinearizedGraph, ctx=None) -> LinearizedGraph:
    """``linear_transpose(linear, ctx)``, computed once per linear graph and kept on it.

    >>> from tidu import linearize
    >>> from tidu.example_ops import trace
    >>> graph = trace(lambda x: x * x, ["x"])
    >>> linear = linearize(graph, graph.output_keys, ["x"])
    >>> transposed_of(linear) is transposed_of(linear)
    True
    """
    memo = linear.__dict__.get("_transposed")
    if memo is None:
        with _lock:
            memo = linear.__dict__.get("_transposed")
            if memo is None:
                memo = linear_transpose(linear, ctx)
                object.__setattr__(linear, "_transposed", memo)
    return memo


class _TransposedRun:
    """How the default ``run_transposed_linear`` runs one linear graph's transpose.

    ``data_keys`` are the primal keys the transposed graph reads, then come the
    seeds' keys; ``outputs`` gives per tangent input of ``linear`` the index of
    its cotangent among the graph's outputs (``None``: a zero).
    """

    __slots__ = ("graph", "data_keys", "load_keys", "outputs", "_compiled")

    def __init__(self, transposed: LinearizedGraph) -> None:
        self.graph = transposed.graph
        seed_keys = tuple(transposed.tangent_input_keys)
        seed_set = set(seed_keys)
        self.data_keys = tuple(key for key, _ in compiled(self.graph).loads
                               if key not in seed_set)
        self.load_keys = self.data_keys + seed_keys
        at = iter(range(len(self.graph.output_keys)))
        self.outputs = tuple(None if key is None else next(at)
                             for key in transposed.tangent_output_keys)
        self._compiled = None

    def seeds(self, linear: LinearizedGraph, cotangent_out: Sequence) -> list | None:
        """The seed values, one per tangent output of ``linear`` that is not a zero."""
        cotangent_out = list(cotangent_out)
        if len(cotangent_out) != len(linear.tangent_outputs):
            raise InvalidArgumentError(
                f"run_transposed_linear: {len(cotangent_out)} cotangents for the "
                f"{len(linear.tangent_outputs)} tangent outputs of the linear graph")
        seeds = []
        for output_id, cotangent in zip(linear.tangent_outputs, cotangent_out):
            if output_id is None:
                continue
            if cotangent is None:
                raise MissingValueError(f"run_transposed_linear: no cotangent given for tangent "
                                        f"output {linear.graph.value_keys[output_id]!r}")
            seeds.append(cotangent)
        return seeds or None

    def runner(self, executor: BackwardExecutor) -> Callable[[Sequence[Any]], Sequence[Any]]:
        """The transposed graph compiled for ``executor`` (kept for the last one used, while
        whether it goes through ``execute_forward`` stays as it was)."""
        hooked = "execute_forward" in overridden_hooks(executor)
        compiled_run = self._compiled
        if compiled_run is None or compiled_run[0] is not executor or compiled_run[1] != hooked:
            run = graph_runner(executor, self.graph, self.load_keys)
            compiled_run = self._compiled = (executor, hooked, run)
        return compiled_run[2]


def _transposed_run(linear: LinearizedGraph, ctx) -> _TransposedRun:
    if not isinstance(linear, LinearizedGraph):
        raise InvalidArgumentError(f"run_transposed_linear needs a LinearizedGraph, got "
                                   f"{type(linear).__name__}")
    run = linear.__dict__.get("_transposed_run")
    if run is None:
        run = _TransposedRun(transposed_of(linear, ctx))
        object.__setattr__(linear, "_transposed_run", run)
    return run
