"""Functional transforms with JAX's semantics: grad, value_and_grad, jvp, vjp, hvp, jacfwd,
jacrev (= jacobian), hessian, and make_graph to look at what is traced.

As in JAX: ``argnums`` (an int or a tuple), pytree arguments and results,
``has_aux`` (``f`` returns ``(output, aux)``; ``aux`` comes back without
derivatives), and keyword arguments passed through to ``f`` undifferentiated
(``grad(f, argnums=(1, 0))(a, b, k=2.0)``). One difference, for complex
inputs: reverse mode is the adjoint under the real inner product ``Re<a, b>``
(PyTorch's and ChainRules' convention), so ``grad``, ``vjp`` and the rows of
``jacrev`` for a real output are the complex conjugate of what JAX returns
(``jax_grad == np.conj(tidu_grad)``). Forward mode (``jvp``, ``jacfwd``) agrees with
JAX, and so do holomorphic derivatives (``holomorphic=True`` of ``grad``,
``value_and_grad`` and the Jacobians).

A transformed function must return arrays or numbers (``grad``: a real float
scalar), and traced values must not outlive their transform ("escaped tracers")
nor leave the thread that traces them (a thread pool inside ``f``; as JAX): each
raises :class:`FunctionalError` instead of giving wrong or zero derivatives.
Different threads may each run transforms of their own at once.

``f`` is traced into a tidu graph (with concrete values, so Python control
flow works), then ``linearize`` and ``linear_transpose`` give its derivatives.
The linear and transposed graphs are run through ``bind``, so transforms nest:
``hvp`` is ``jvp`` of ``grad``, ``hessian`` is ``jacfwd`` of ``jacrev``. The
Jacobians trace and linearize ``f`` once and run the linear (or transposed)
program on every basis vector: batched over all of them at once (``tidu.batch``,
what ``vmap`` does) from 32 on, once per basis vector below; compiled when the
values are plain arrays.

>>> import numpy as np
>>> from primitives.tensor import numpy as tnp
>>> grad(lambda x: tnp.sum(x * x))(np.array([1.0, 2.0]))
array([2., 4.])
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import numbers
import threading
from typing import Any, Callable, Sequence

import numpy as np

from tidu import LinearizedGraph, TiduError, batch, linear_transpose
from tidu import linearize as linearize_graph
from tidu.graph import Derived, Graph, GraphBuilder, Linearized, Local, Program, schedule
from primitives.tensor import numpy as api
from primitives.tensor.numpy.lowering import is_python_scalar
from primitives.tensor.numpy.methods import ArrayOperators
from primitives.tensor.errors import TensorAttributeError, TensorShapeError, TensorTypeError
from primitives.tensor.transforms.fresh import fresh
from primitives.tensor.transforms.retrace import RetraceBuilder
from primitives.tensor.transforms.run import GraphRun, run_graph
from primitives.tensor.ops import elementwise as ew
from primitives.tensor.ops.custom import CustomVJPCall
from primitives.tensor.transforms.checkpoint import scope as checkpoint_scope
from primitives.tensor.transforms.pytree import (is_node, leaf_hint, tree_flatten,
                                                 tree_unflatten)
from primitives.tensor.backends import (NUMPY, as_array, library_of, operands, owned_copy,
                                        to_library)
from primitives.tensor.core import (Frontend, array_below, bind_below, close_trace, dtype_of,
                                    grad_mode, open_trace, shape_of)
from primitives.tensor.numpy.creation import zeros_like

_levels = itertools.count(2)


class FunctionalError(TiduError, TypeError):
    """A functional transform used on something it does not support (a ``TypeError``, as
    JAX raises for bad arguments and escaped tracers)."""


class GraphTrace:
    """The graph being recorded while ``f`` runs on tracers; ``values`` holds what they saw.

    ``transform`` names the transform that records it, for errors; once it has
    traced ``f``, ``active`` is false and its tracers can no longer be used.
    ``template``, the graph an earlier trace of ``f`` made, is followed while this
    trace repeats it (:mod:`.retrace`); the graph built is the same either way.

    An ``abstract`` trace (``jit``, ``vmap``, ``eval_shape``, a custom rule) is for any
    input, and only its inputs' values are read afterwards, so ``values`` keeps just
    those: each op's result lives in its tracer and dies with it, and tracing holds what
    ``f`` holds when it runs, not every value it made. The results' values are read from
    the tracers ``f`` returned (their ``value_below``).
    """

    def __init__(self, capture: Callable[[Any], bool] | None = None,
                 transform: str = "a transform", abstract: bool = False,
                 own_constants: bool = False, template: Graph | None = None) -> None:
        self.level = next(_levels)
        self.thread = threading.get_ident()     # the one thread that may bind into it
        self.own_constants = own_constants  # constants copied: the graph may outlive the call
        self.transform = transform
        self.abstract = abstract        # values not to be read: jit's trace is for any input
        self._active = False
        self.active = True
        self.builder = GraphBuilder() if template is None else RetraceBuilder(template)
        self.values: dict = {}          # value key -> value one level below (abstract:
                                        # inputs only)
        self._constants = itertools.count()
        self.capture = capture          # values for which lift() records the data, not the value
        self.captured: dict = {}        # input key -> captured value
        self.checkpointed: dict = {}    # value key -> (op, policy), made in a checkpointed block
        # abstract traces: the local ids of values a transform outside differentiates (they
        # depend on one of its traced values), for custom_vjp's second order (is_differentiated)
        self.differentiated: set = set()
        # grad mode when the trace began: a no_grad block entered after that, inside the
        # traced function, makes constants (as torch.func); one around the transform does not
        self._grad_enabled_at_start = grad_mode.enabled
        self._grad_blocks_at_start = len(grad_mode.stack or ())

    @property
    def active(self) -> bool:
        """Whether ``f`` is still being traced (afterwards its tracers are escaped)."""
        return self._active

    @active.setter
    def active(self, value: bool) -> None:
        if self.abstract and value != self._active:
            (open_trace if value else close_trace)(self)
        self._active = value

    def in_inner_no_grad(self) -> bool:
        """Whether grad mode, now off, was switched off inside the traced function."""
        return not grad_mode.enabled and (self._grad_enabled_at_start or
                                          len(grad_mode.stack or ()) > self._grad_blocks_at_start)

    def new_input(self, key, value, differentiated: bool = False) -> "Tracer":
        """An input of the graph, standing for ``value`` one level below; ``differentiated``:
        a transform outside this abstract trace differentiates it (``value`` being the data
        below the value it differentiates)."""
        local_id = self.builder.add_input(key)
        self.values[self.builder.global_key(local_id)] = value
        if self.abstract and (differentiated or is_differentiated(value)):
            self.differentiated.add(local_id)
        return Tracer(self, local_id, value)

    def lift(self, value) -> "Tracer":
        """A tracer for ``value``: itself if it is ours, else a constant input."""
        if isinstance(value, Tracer) and value.graph_trace is self:
            return value
        key = ("constant", next(self._constants))
        if self.capture is not None and self.capture(value):
            self.captured[key] = value
            return self.new_input(key, value.value_below)
        if self.own_constants:
            value = _owned(value)
        return self.new_input(key, value)

    def key_of(self, tracer: "Tracer"):
        return self.builder.global_key(tracer.id)

    def build(self, outputs: Sequence["Tracer"]) -> Graph:
        self.builder.set_outputs([t.id for t in outputs])
        return self.builder.build()


def _other_thread(trace: GraphTrace, op) -> FunctionalError:
    """A tracer used on another thread than its trace's: the graph builder is not shared
    between threads (concurrent ops interleave its ids: wrong derivatives), and what the
    trace reads per thread (grad mode, closure staging) would be another thread's, as JAX."""
    return FunctionalError(
        f"a value traced inside {trace.transform} was used by {op!r} on another thread than "
        "the one tracing it (a thread pool inside the transformed function?): a transform "
        "traces f on the thread that calls it; compute on that thread, or apply the "
        "transform inside each worker")


class Tracer(ArrayOperators, Frontend):
    """A value inside a traced function: a graph value plus what it is one level down."""

    __slots__ = ("graph_trace", "id", "value_below", "level")
    is_tracer = True

    def __init__(self, trace: GraphTrace, id: int, value) -> None:
        self.graph_trace = trace
        self.id = id
        self.value_below = value
        self.level = trace.level

    @property
    def shape(self) -> tuple:
        value = self.value_below
        return value.shape if type(value) is np.ndarray else shape_of(value)

    @property
    def dtype(self) -> np.dtype:
        value = self.value_below
        return value.dtype if type(value) is np.ndarray else dtype_of(value)

    @property
    def carries_gradient(self) -> bool:
        """Inexact, and not what ``stop_gradient`` returned: that is a constant at every
        level (it binds down through the traces below), so ``float()`` may take it."""
        if self.dtype.kind not in "fc":
            return False
        key = self.graph_trace.key_of(self)
        return not (type(key) is Derived and key.operation.operation is ew.stop_gradient)

    @classmethod
    def bind(cls, op, args) -> list:
        top = None
        thread = threading.get_ident()
        for a in args:
            if isinstance(a, Tracer):
                if not a.graph_trace._active:
                    raise FunctionalError(
                        f"escaped tracer: a value traced inside {a.graph_trace.transform} was used "
                        f"by {op!r} after that transform returned (it was stored outside f, "
                        "e.g. in a list or a global); return it from f instead")
                if a.graph_trace.thread != thread:
                    raise _other_thread(a.graph_trace, op)
                if top is None or a.level > top.level:
                    top = a
        trace = top.graph_trace
        refs, below = [], []
        plain = True                                # every value below a NumPy array
        for a in args:
            if type(a) is not Tracer or a.graph_trace is not trace:
                a = trace.lift(a)
            refs.append(Local(a.id))
            value = a.value_below
            below.append(value)
            if type(value) is not np.ndarray:
                plain = False
        if type(op) is CustomVJPCall and not trace.abstract:
            results = op.rule.values_below(below)   # a differentiation level below sees fwd
        elif plain:
            results = op.eval(None, below)          # (what bind_below does with arrays)
        else:
            results = bind_below(op, below)
        builder, values = trace.builder, trace.values
        ids = builder.add_operation(op, refs)
        marked = trace.differentiated
        if marked and any(ref.id in marked for ref in refs):
            marked.update(ids)
        if trace.abstract and checkpoint_scope.policy is not None:   # jit: marks for remat
            for local_id in ids:
                trace.checkpointed[builder.global_key(local_id)] = (op, checkpoint_scope.policy)
        constant = not grad_mode.enabled and op is not ew.stop_gradient and \
            trace.in_inner_no_grad()
        keep = not trace.abstract                   # (an abstract trace keeps inputs only)
        if len(ids) == 1 and not constant:          # the common case, without the loop
            [local_id], [result] = ids, results
            if keep:
                values[builder.global_key(local_id)] = result
            return [Tracer(trace, local_id, result)]
        outs = []
        for local_id, result in zip(ids, results):
            if keep:
                values[builder.global_key(local_id)] = result
            outs.append(Tracer(trace, local_id, result))
        if constant:                                # made in a no_grad block inside f
            outs = [api.stop_gradient(out) if out.dtype.kind in "fc" else out for out in outs]
        return outs

    def __repr__(self) -> str:
        return f"Tracer(shape={self.shape}, dtype={self.dtype})"

    def detach(self) -> "Tracer":
        """A constant of this value: ``tnp.stop_gradient`` (an eager ``Tensor``'s
        ``detach()``, for eager code run under a transform, as ``torch.func`` does)."""
        return api.stop_gradient(self)

    # A traced value is immutable: a copy is the value itself, with its derivative (as in JAX).
    def __copy__(self) -> "Tracer":
        return self

    def __deepcopy__(self, memo) -> "Tracer":
        return self

    def __reduce__(self):
        raise FunctionalError(f"pickling a value traced by {self.graph_trace.transform}: it "
                              "exists only while the transform traces; return it from the "
                              "function and pickle the result instead")


WEAK_NUMBERS = (float, int, complex)
"""The types of arguments traced as numbers (:class:`WeakTracer`), not as 0-d arrays."""


def weak_numbers(leaves: Sequence) -> tuple:
    """Per leaf, whether it is a Python number, to be traced as one (:func:`weakened`)."""
    return tuple(type(leaf) in WEAK_NUMBERS for leaf in leaves)


def weakened(tracers: list, weak: Sequence[bool]) -> list:
    """``tracers`` with those marked in ``weak`` made :class:`WeakTracer` s."""
    return [WeakTracer(t.graph_trace, t.id, t.value_below) if is_weak else t
            for t, is_weak in zip(tracers, weak)] + tracers[len(weak):]


class WeakTracer(Tracer):
    """A traced Python number (``jit``'s argument): it promotes as NumPy takes Python numbers
    (NEP 50), so ``float32_array * it`` stays float32, as when ``f`` runs without ``jit``.
    Python's arithmetic between it and numbers keeps it weak, as a Python number stays one;
    a ``tnp`` function of it gives an ordinary value, as NumPy's give NumPy scalars."""

    __slots__ = ()
    weak = True


def _keeps_weak(name: str):
    arithmetic = getattr(Tracer, name)

    def weak_arithmetic(self, *other):
        result = arithmetic(self, *other)
        if isinstance(result, Tracer) and all(is_python_scalar(o) or (
                isinstance(o, Frontend) and o.weak) for o in other):
            return WeakTracer(result.graph_trace, result.id, result.value_below)
        return result
    weak_arithmetic.__name__ = name
    return weak_arithmetic


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
              "__rmod__", "__pow__", "__rpow__", "__neg__", "__pos__", "__abs__"):
    setattr(WeakTracer, _name, _keeps_weak(_name))
del _name


def _eager_only(name: str) -> property:
    """The eager ``Tensor``'s ``name`` on a traced value: an ``AttributeError`` saying why
    (a property, not ``__getattr__``, which would slow every attribute of every tracer)."""
    def missing(self):
        raise TensorAttributeError(
            f"{name!r} of a traced value: inside {self.graph_trace.transform} a Tensor "
            "argument is traced, and the eager Tensor's own API (.grad, .backward(), "
            ".requires_grad, .data, .numpy()...) is not there; use tnp functions "
            "(tnp.stop_gradient(x) or x.detach() for a constant)")
    return property(missing)


for _name in ("data", "grad", "requires_grad", "requires_grad_", "is_leaf", "backward",
              "grad_fn", "numpy", "retain_grad", "register_hook", "clone", "zero_"):
    setattr(Tracer, _name, _eager_only(_name))
del _name


def is_differentiated(value) -> bool:
    """Whether a transform will differentiate through ``value``: it, or what it stands for at
    a lower level, carries a gradient; a value of an abstract trace (``jit``, ``vmap``) counts
    when it depends on a value a transform outside that trace differentiates.

    >>> import primitives.tensor as tnp
    >>> seen = []
    >>> _ = tnp.grad(lambda x: seen.append(is_differentiated(x)) or x)(1.0)
    >>> seen, is_differentiated(1.0)
    ([True], False)
    """
    while isinstance(value, Frontend):
        if isinstance(value, Tracer) and value.graph_trace.abstract:
            if value.id in value.graph_trace.differentiated:
                return True
        elif value.carries_gradient:
            return True
        value = value.value_below
    return False


def unmark_checkpointed(values) -> None:
    """Take a checkpointed block's results (a tree) out of the marks of every trace below:
    the code after the block reads them, so they are kept, not recomputed."""
    leaves, _ = tree_flatten(values)
    for value in leaves:
        while isinstance(value, Tracer):
            value.graph_trace.checkpointed.pop(value.graph_trace.key_of(value), None)
            value = value.value_below


class Traced:
    """``f`` traced at some primals: its graph, and its linearization and transpose on demand."""

    def __init__(self, f: Callable, primals: Sequence, capture=None,
                 transform: str = "make_graph", own_constants: bool = False,
                 template: Graph | None = None, weak: Sequence[bool] = ()) -> None:
        self.trace = GraphTrace(capture, transform, own_constants=own_constants,
                                template=template)
        self.input_keys = [("arg", i) for i in range(len(primals))]
        tracers = weakened([self.trace.new_input(k, p) for k, p in zip(self.input_keys, primals)],
                           weak)
        try:
            out = f(*tracers)
            self.single_output = not isinstance(out, (tuple, list))
            outs = [out] if self.single_output else list(out)
            for position, o in enumerate(outs):
                check_output(o, transform, f, None if self.single_output else position)
            outs = _distinct([self.trace.lift(o) for o in outs])
        finally:
            self.trace.active = False
        self.graph = self.trace.build(outs)
        self.output_keys = list(self.graph.output_keys)
        self.outputs = [self.trace.values[k] for k in self.output_keys]
        self._linear = {}

    def linearized(self, argnums: Sequence[int]):
        """The linear graph of the outputs with respect to arguments ``argnums``."""
        return self.derivatives(argnums).linear

    def transposed(self, argnums: Sequence[int]):
        """The transposed graph of :meth:`linearized` (cotangent seeds to input cotangents)."""
        return self.derivatives(argnums).transposed

    def derivatives(self, argnums: Sequence[int]) -> "Derivatives":
        """The derivative graphs for arguments ``argnums``: made once per program structure."""
        argnums = tuple(argnums)
        if argnums not in self._linear:
            self._linear[argnums] = derivatives_of(
                self.graph, self.output_keys, [self.input_keys[i] for i in argnums])
        return self._linear[argnums]

    def output(self):
        outs = [result_array(o) for o in self.outputs]
        return outs[0] if self.single_output else tuple(outs)


class Derivatives:
    """A program's linear graph, its transpose (built when first asked for) and their runners.

    They depend only on the program's structure, which its output keys name
    (tidu's keys are structural), so :func:`derivatives_of` keeps the last few:
    a function traced again on new values (``grad`` in a training loop) reuses
    them, and only tracing and running are paid per call.
    """

    __slots__ = ("graph", "output_keys", "wrt", "_linear", "_transposed", "uses", "_lock",
                 "_derived", "_residuals")

    def __init__(self, graph: Graph, output_keys: Sequence, wrt: Sequence) -> None:
        self.graph, self.output_keys, self.wrt = graph, list(output_keys), list(wrt)
        self._linear = self._transposed = None
        self.uses = 0                   # programs it has served
        self._lock = threading.Lock()   # threads share it: each graph is made once
        self._derived: dict = {}        # what derived() made, by key, oldest first
        self._residuals: dict = {}      # kind -> residual_keys(kind)

    def derived(self, key, make: Callable[[], Any]) -> Any:
        """``make()``, made once for this structure under ``key`` (a hashable naming what
        it is and what it depends on): what the Jacobians compile from these graphs, so that
        a function's second call reuses it. The last few are kept: ``_DERIVED_KEPT``, fewer
        for a bigger program (each counted as its operations, ``_DERIVED_MAX_OPS`` in all,
        so that the 64 programs :func:`derivatives_of` keeps hold a bounded amount)."""
        found = self._derived.get(key)
        if found is None:
            found = make()              # (outside the lock: make may read self.linear)
            kept = min(_DERIVED_KEPT,
                       _DERIVED_MAX_OPS // max(1, len(self.graph.operation_keys)))
            with self._lock:
                found = self._derived.setdefault(key, found)
                while len(self._derived) > max(kept, 1):
                    self._derived.pop(next(iter(self._derived)))
        return found

    def transposed_for(self, output: int) -> LinearizedGraph:
        """The transpose of tangent output ``output`` of :attr:`linear` alone (the others
        taken as zero): a row block of ``jacrev``; :attr:`transposed` when it is the only one."""
        linear = self.linear
        only = [tangent if j == output else None
                for j, tangent in enumerate(linear.tangent_outputs)]
        if only == list(linear.tangent_outputs):
            return self.transposed
        return self.derived(("transposed", output), lambda: linear_transpose(
            LinearizedGraph(linear.graph, linear.tangent_inputs, only, linear.pass_id)))

    def cotangents(self, values: dict) -> list:
        """The transposed graph's outputs (``None`` ones left out) from ``values``: the
        traced values and the cotangent seeds. Op by op the first time; compiled once the
        structure is seen again (see :mod:`.run`)."""
        return self._outputs(self.transposed, "cotangents", values)

    def tangents(self, values: dict) -> list:
        """The linear graph's outputs (``None`` ones left out) from ``values``: the traced
        values and the tangent seeds (``jvp``); as :meth:`cotangents`."""
        return self._outputs(self.linear, "tangents", values)

    def residual_keys(self, kind: str) -> tuple:
        """The traced values that the transposed graph (``kind`` ``"cotangents"``) or the
        linear one (``"tangents"``) reads, in a fixed order: what a ``vjp_fn`` keeps of its
        trace (its residuals). Made once for this structure.

        >>> import numpy as np
        >>> from primitives.tensor import numpy as tnp
        >>> traced = make_graph(lambda x: tnp.sum(tnp.sin(x) * 2.0), np.ones(2))
        >>> derivatives = traced.derivatives([0])
        >>> len(traced.trace.values), len(derivatives.residual_keys("cotangents"))
        (5, 2)
        """
        found = self._residuals.get(kind)
        if found is None:
            derivative = self.transposed if kind == "cotangents" else self.linear
            # what every program of this structure has traced: what its outputs need (the
            # first one may hold more: a dead op, a constant it lifted and did not use)
            traced = set(self.output_keys)
            for op_key in schedule(self.output_keys, set(self.graph.input_keys)):
                traced.update(op_key.inputs)
                traced.update(op_key.output_keys())
            outputs = [k for k in derivative.tangent_output_keys if k is not None]
            read = dict.fromkeys(k for k in outputs if k in traced)
            for op_key in schedule(outputs, traced.union(derivative.tangent_input_keys)):
                read.update(dict.fromkeys(k for k in op_key.inputs if k in traced))
            found = self._residuals.setdefault(kind, tuple(read))
        return found

    def _outputs(self, derivative: LinearizedGraph, kind: str, values: dict) -> list:
        outputs = [k for k in derivative.tangent_output_keys if k is not None]
        if self.uses < 2:
            return run_graph(outputs, values)
        run = self.derived(kind, lambda: GraphRun(
            outputs, [*derivative.tangent_input_keys, *self.residual_keys(kind)]))
        return run([values[k] for k in run.input_keys])

    @property
    def linear(self) -> LinearizedGraph:
        if self._linear is None:
            with self._lock:
                if self._linear is None:
                    self._linear = linearize_graph(self.graph, self.output_keys, self.wrt)
        return self._linear

    @property
    def transposed(self) -> LinearizedGraph:
        if self._transposed is None:
            linear = self.linear
            with self._lock:
                if self._transposed is None:
                    self._transposed = linear_transpose(linear)
        return self._transposed


_DERIVED_KEPT = 32                  # per Derivatives: Jacobian programs, output transposes
_DERIVED_MAX_OPS = 2_500            # per Derivatives: what they keep, each counted as its
                                    # program's operations (a 100-op program keeps 25)
_DERIVATIVES: dict = {}             # (output keys, wrt) -> Derivatives, oldest first
_DERIVATIVES_KEPT = 64              # programs
_DERIVATIVES_MAX_OPS = 20_000       # their operations in all (a bigger program: jit it)
_derivatives_lock = threading.Lock()
_kept_ops = [0]


def keepable(graph: Graph) -> bool:
    """Whether what is made from ``graph`` may be kept for the later calls of its structure:
    it has at most 20,000 operations, and every op's rules read only its fields (a custom
    rule runs user code, which may read what changed since; its closure is not held)."""
    ops = graph.operation_keys
    return len(ops) <= _DERIVATIVES_MAX_OPS and all(
        getattr(k.operation, "rules_read_fields_only", False) for k in ops)


def derivatives_of(graph: Graph, output_keys: Sequence, wrt: Sequence) -> Derivatives:
    """The :class:`Derivatives` of ``output_keys`` with respect to ``wrt``: a recent one of
    the same structure when every op's rules read only its fields, else new."""
    key = (tuple(output_keys), tuple(wrt))
    ops = graph.operation_keys
    kept = _DERIVATIVES.get(key)            # (a graph kept already was read when it was kept)
    if (kept is None or kept.graph is not graph) and not keepable(graph):
        return Derivatives(graph, output_keys, wrt)
    with _derivatives_lock:
        found = _DERIVATIVES.pop(key, None)
        if found is None:
            found = Derivatives(graph, output_keys, wrt)
            _kept_ops[0] += len(ops)
            while _DERIVATIVES and (len(_DERIVATIVES) >= _DERIVATIVES_KEPT
                                    or _kept_ops[0] > _DERIVATIVES_MAX_OPS):
                oldest = _DERIVATIVES.pop(next(iter(_DERIVATIVES)))
                _kept_ops[0] -= len(oldest.graph.operation_keys)
        _DERIVATIVES[key] = found                   # the most recent last
        found.uses += 1
    return found


# The graph the last trace of each function made, for its next trace to follow
# (:mod:`.retrace`), by the function's code and how it is differentiated: ``grad(f)(x)``
# written in a loop makes a new function each time, and its traces still follow. A wrong
# template costs one switch to a builder, so any key would be safe; kept, as the
# derivative graphs are, up to 20,000 operations in all, of ops whose rules read only
# their fields (a custom rule's closure is not held after its function has gone).
_TEMPLATES: dict = {}
_templates_lock = threading.Lock()
_template_ops = [0]


def _template_key(f: Callable):
    """What the traces of ``f`` are remembered by: its code (a lambda made anew in a loop
    has the same, and a bound method its function's), with the code of each function it
    wraps (``functools.wraps``: every ``grad(g)`` shares its wrapper's code, not ``g``'s);
    ``None`` for a callable without code (a ``functools.partial``, an object with
    ``__call__``)."""
    code = getattr(f, "__code__", None)
    inner = getattr(f, "__wrapped__", None)
    if code is None or inner is None:
        return code
    codes = [code]
    while inner is not None and len(codes) < _WRAPPED_DEPTH:
        codes.append(getattr(inner, "__code__", None))
        inner = getattr(inner, "__wrapped__", None)
    return tuple(codes)


_WRAPPED_DEPTH = 8      # wrappers of wrappers read for a key (grad(grad(jacrev(f))) is 4)


def _keep_template(key, graph: Graph) -> None:
    """Remember ``graph`` as what the last trace under ``key`` made (the oldest forgotten
    beyond the bound); a ``key`` of ``None`` keeps nothing."""
    if key is None or key[0] is None or _TEMPLATES.get(key) is graph:
        return
    ops = graph.operation_keys
    keep = keepable(graph)
    with _templates_lock:
        old = _TEMPLATES.pop(key, None)
        if old is not None:
            _template_ops[0] -= len(old.operation_keys)
        if keep:
            _TEMPLATES[key] = graph
            _template_ops[0] += len(ops)
            while _template_ops[0] > _DERIVATIVES_MAX_OPS:
                oldest = _TEMPLATES.pop(next(iter(_TEMPLATES)))
                _template_ops[0] -= len(oldest.operation_keys)


def _traced(f: Callable, leaves: list, transform: str, template_key) -> Traced:
    """``Traced(f, leaves)``, following the last trace under ``template_key`` and leaving
    its own for the next (:func:`_vjp` does the same for its trace); a Python number is
    traced as a number (NEP 50), as ``f``'s own call takes it."""
    traced = Traced(f, [_as_value(leaf) for leaf in leaves], transform=transform,
                    template=_TEMPLATES.get(template_key), weak=weak_numbers(leaves))
    _keep_template(template_key, traced.graph)
    return traced


def _distinct(outs: list) -> list:
    """Traced outputs with a value returned twice (``return y, y``) copied the second time, so
    each output is its own value (reverse mode sums their cotangents through the copy)."""
    seen = set()
    for n, tracer in enumerate(outs):
        if tracer.id in seen:
            outs[n] = Tracer.bind(ew.copy, [tracer])[0]
        seen.add(tracer.id)
    return outs


def make_graph(f: Callable, *primals, transform: str = "make_graph") -> Traced:
    """Trace ``f`` at ``primals`` into a graph to look at (``jax.make_jaxpr``'s role).

    The result has ``.graph``, the traced program (printing it lists the
    operations; arguments are the inputs ``('arg', i)``), ``.outputs``, what
    ``f`` returned, and, for the arguments ``argnums``, ``.linearized(argnums)``
    (the JVP as a linear graph) and ``.transposed(argnums)`` (the VJP), as
    :class:`tidu.LinearizedGraph` objects that refer to ``.graph``.

    >>> import numpy as np
    >>> import primitives.tensor as tnp
    >>> traced = make_graph(lambda x: tnp.sin(x) * x, np.ones(3))
    >>> print(traced.graph)
    graph(a = ('arg', 0)):
      b = sin a
      c = mul b a
      return c
    >>> len(traced.transposed((0,)).graph.operations)     # the VJP: 3 products and a sum
    4
    """
    return Traced(f, [_as_value(p) for p in primals], transform=transform,
                  weak=weak_numbers(primals))


def function_name(f) -> str:
    return getattr(f, "__qualname__", None) or type(f).__name__


def check_callable(f, transform: str) -> None:
    """Refuse a non-callable ``f`` when the transform is made (JAX's time and TypeError),
    not later as Python's ``'int' object is not callable`` naming neither."""
    if not callable(f):
        raise FunctionalError(f"{transform}: expected a callable function, got {f!r} "
                              f"({type(f).__name__})")


def check_output(value, transform: str, f, position: int | None) -> None:
    """A traced function returns arrays, numbers or traced values (JAX's rule): not ``None``,
    strings or other objects, which would otherwise become silent zero derivatives."""
    where = "" if position is None else f" at position {position}"
    if isinstance(value, Tracer) and not value.graph_trace.active:
        raise FunctionalError(f"{transform}: {function_name(f)} returned{where} an escaped "
                              f"tracer of {value.graph_trace.transform}, which has already "
                              "returned")
    if isinstance(value, Frontend):
        return
    if isinstance(value, (np.ndarray, np.generic, numbers.Number)) and \
            np.asarray(value).dtype.kind in "biufc":
        return
    if library_of(value) is not NUMPY and dtype_of(value).kind in "biufc":
        return
    raise FunctionalError(f"{transform}: {function_name(f)} returned "
                          f"{type(value).__name__}{where}; a transformed function must return "
                          f"arrays or numbers (or a pytree of them: {leaf_hint(value)})")


def _check_differentiable(primals: Sequence, what: str) -> None:
    """Differentiated inputs are floating point or complex, and arrays of one library."""
    first = None
    for position, p in enumerate(primals):
        if dtype_of(p).kind not in "fc":        # (np.inexact, without asking NumPy)
            raise FunctionalError(f"{what}: argument {position} has dtype {dtype_of(p)}; "
                                  "only floating point and complex inputs are differentiable")
        library = library_of(array_below(p))
        if first is None:
            first = library
        elif library is not first:
            raise TensorTypeError(f"{what}: differentiated inputs of two array libraries, "
                                  f"{first.name} and {library.name} (argument {position}); "
                                  "convert them to one")


def _as_value(x, what: str = ""):
    """A leaf as a value; ``what`` (the transform and argument) begins the error."""
    if isinstance(x, Frontend):
        return x
    if isinstance(x, numbers.Number) or isinstance(x, (np.ndarray, np.generic, list, tuple)):
        return np.asarray(x)
    if library_of(x) is not NUMPY:
        return as_array(x)
    raise FunctionalError(f"{what + ': ' if what else ''}expected an array or a number, got "
                          f"{type(x).__name__} ({leaf_hint(x)})")


def _owned(x):
    """``x`` where writing to the caller's array cannot change it: traced values (immutable)
    as they are, arrays copied (:func:`..backends.owned_copy`, keeping a PyTorch tensor's
    autograd history, as every other result does), and an eager ``Tensor``
    (which the caller may update in place in a ``no_grad`` block, or rebind ``.data`` of) as
    a recorded copy (``tnp.copy``): a derivative still flows back to it."""
    if isinstance(x, Frontend):
        return x if x.is_tracer else api.copy(x)
    return owned_copy(_as_value(x), history=True)


def result_array(x):
    """Top-level results are arrays (0-d arrays, not NumPy scalars)."""
    return np.asarray(x) if isinstance(x, (np.generic, numbers.Number)) else x


def _zeros_like(x):
    """Zeros of ``x``'s shape and dtype, in the library of the array under it, on its device."""
    return zeros_like(array_below(x))


def _fresh_tree(tree, held: Sequence):
    """``tree`` with each array that shares memory with one of ``held`` (the arguments, the
    trace's constants, the seeds) or with another leaf copied (:func:`..fresh.fresh`)."""
    leaves, structure = tree_flatten(tree)
    return tree_unflatten(structure, fresh(leaves, held))


def _inputs_of(traced: "Traced") -> list:
    """What a traced function read: its arguments and its constants."""
    return [traced.trace.values[k] for k in traced.graph.input_keys]


def in_library_of(values: list, inputs: Sequence) -> list:
    """``values`` with NumPy arrays (constants, zeros) converted to the library of ``inputs``
    (the differentiated arguments), on their device: results are arrays of the inputs'
    library."""
    for value in inputs:
        if type(value) is np.ndarray:           # (NumPy's, without asking)
            continue
        below = array_below(value)
        library = library_of(below)
        if library is not NUMPY:
            return [to_library(result_array(v), library, below)
                    if not isinstance(v, Frontend) and library_of(v) is NUMPY else v
                    for v in values]
    return values


def _cast_like(value, like):
    """``value`` (a seed, tangent or cotangent) in ``like``'s dtype and library: a NumPy seed
    for a Dask output becomes a Dask array, so the work it starts is Dask's, not a NumPy
    array of the output's size computed here and shipped in the graph."""
    below = array_below(like)
    if not isinstance(value, Frontend) and library_of(below) is not NUMPY and \
            library_of(value) is NUMPY:
        value = to_library(np.asarray(value), library_of(below), below)
    return api.astype(value, dtype_of(like))


def _check_kind(given, like, where: str, noun: str, of: str) -> None:
    """A ``noun`` (tangent, cotangent) the caller gave ``where`` for a value ``of`` is complex
    only for a complex ``like``, as in JAX: casting it to a real dtype would drop its
    imaginary part (another precision of the same kind is cast, as before)."""
    if dtype_of(given).kind == "c" and dtype_of(like).kind != "c":
        raise FunctionalError(f"{where}: {noun} of dtype {dtype_of(given)} for a real {of} of "
                              f"dtype {dtype_of(like)}: a real {of} needs a real {noun} (of its "
                              "dtype kind, as in JAX); pass np.real(...) if dropping the "
                              "imaginary part is meant")


class _Flat:
    """``f`` as a function of the leaves of its (pytree) arguments, returning the leaves of
    its result; the structures, to rebuild both sides. With ``has_aux``, ``f`` returns
    ``(output, aux)`` and ``aux`` is kept aside."""

    def __init__(self, f: Callable, args: Sequence, has_aux: bool = False,
                 transform: str = "a transform") -> None:
        self.f = f
        self.has_aux = has_aux
        self.transform = transform
        self.leaves, self.in_trees = [], []
        for arg in args:
            leaves, tree = tree_flatten(arg)
            self.leaves += leaves
            self.in_trees.append((tree, len(leaves)))
        self.out_tree = None
        self.aux = None
        functools.update_wrapper(self, f)

    def __call__(self, *leaves):
        out = self.f(*self.unflatten_inputs(leaves))
        if self.has_aux:
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                got = f"a {type(out).__name__} of {len(out)}" if isinstance(
                    out, (tuple, list)) else type(out).__name__
                raise FunctionalError(f"{self.transform} with has_aux=True: "
                                      f"{function_name(self.f)} must return a pair "
                                      f"(output, aux), got {got}")
            out, self.aux = out
        out_leaves, self.out_tree = tree_flatten(out)
        return list(out_leaves)

    def unflatten_inputs(self, leaves) -> list:
        it = iter(leaves)
        return [tree_unflatten(tree, [next(it) for _ in range(n)]) for tree, n in self.in_trees]

    def flatten_like_output(self, value, what: str) -> list:
        leaves, tree = tree_flatten(value)
        if tree != self.out_tree:
            raise FunctionalError(f"{what} of structure {tree!r} ({len(leaves)} arrays) for an "
                                  f"output of structure {self.out_tree!r}")
        return leaves

    def aux_result(self, trace: GraphTrace, held: Sequence = ()):
        """``aux`` without derivatives: each traced value of ``trace`` becomes what it stands
        for one level down (a plain array, or an outer transform's value). An array that
        shares memory with one of ``held`` (the arguments, the constants, the other results)
        or with another aux array is copied: writing into ``aux`` changes nothing else."""
        leaves, tree = tree_flatten(self.aux)
        traced = [isinstance(v, Tracer) and v.graph_trace is trace for v in leaves]
        for v, t in zip(leaves, traced):
            if not t and _holds_tracer(v, trace):
                raise FunctionalError(
                    f"{self.transform} with has_aux=True: {function_name(self.f)} returned in "
                    f"aux a {type(v).__name__} that holds traced values, which would escape "
                    f"the trace ({leaf_hint(v)}, so that they are taken out as arrays)")
        leaves = [result_array(v.value_below) if t else v for v, t in zip(leaves, traced)]
        arrays = [n for n, v in enumerate(leaves) if _is_plain_array(v)]
        for n, v in zip(arrays, fresh([leaves[n] for n in arrays],
                                      [h for h in held if _is_plain_array(h)])):
            # an array f returns as it is (not computed in the trace) may be one f holds (a
            # closure's, a global, an attribute): the caller gets a copy of it
            leaves[n] = v if traced[n] or v is not leaves[n] else library_of(v).copy(v)
        return tree_unflatten(tree, leaves)


def _holds_tracer(value, trace: GraphTrace) -> bool:
    """Whether ``value``, an object taken as a pytree leaf (not an array or a number), holds
    a traced value of ``trace`` in its attributes (a dataclass not registered as a node)."""
    if isinstance(value, (Frontend, numbers.Number, np.ndarray, np.generic, str, bytes)) or \
            value is None or isinstance(value, type) or _is_plain_array(value):
        return False
    if dataclasses.is_dataclass(value):
        attributes = [getattr(value, field.name, None) for field in dataclasses.fields(value)]
    else:
        attributes = list(getattr(value, "__dict__", {}).values())
    return any(isinstance(v, Tracer) and v.graph_trace is trace
               for v in tree_flatten(attributes)[0])


def _is_plain_array(value) -> bool:
    """An array of a library (not a front-end value, a number or another object)."""
    if type(value) is np.ndarray:
        return True
    if isinstance(value, (Frontend, np.generic, numbers.Number, str, bytes)) or value is None:
        return False
    try:
        return library_of(value) is not NUMPY
    except TiduError:
        return False


def _with_args(f: Callable, args: Sequence, kwargs: dict, positions: Sequence[int]) -> Callable:
    """``f`` as a function of its arguments at ``positions``; the others and ``kwargs`` fixed
    (keyword arguments pass through and are not differentiated, as in JAX)."""
    @functools.wraps(f)
    def partial(*chosen):
        full = list(args)
        for n, value in zip(positions, chosen):
            full[n] = value
        return f(*full, **kwargs)
    return partial


def vjp(f: Callable, *primals, has_aux: bool = False, transform: str = "vjp"):
    """``(f(*primals), vjp_fn)``; ``vjp_fn(ct)`` returns one cotangent per primal, as a tuple.

    Primals, outputs and cotangents may be pytrees (nested tuples, lists and
    dicts of arrays). With ``has_aux=True``, ``f`` returns ``(output, aux)`` and
    this returns ``(output, vjp_fn, aux)``, ``aux`` without derivatives. For
    complex inputs this is the adjoint under ``Re<a, b>`` (PyTorch's
    convention): ``jax.vjp`` returns the complex conjugate of it
    (``jax_vjp_fn(ct) == conj(vjp_fn(conj(ct)))``).

    >>> import numpy as np
    >>> from primitives.tensor import numpy as tnp
    >>> out, vjp_fn = vjp(lambda x, y: x * y, np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    >>> vjp_fn(np.ones(2))
    (array([3., 4.]), array([1., 2.]))
    """
    check_callable(f, transform)
    return _vjp(f, primals, has_aux, transform,
                (_template_key(f), transform, len(primals), has_aux))


def _vjp(f: Callable, primals: Sequence, has_aux: bool, transform: str, template_key):
    """:func:`vjp`; with a ``template_key`` (:func:`_template_key` of the function ``f``
    stands for, then what else shapes the trace: the transform, the arguments
    differentiated, ``has_aux``), this trace follows the graph the last trace under that
    key made (:mod:`.retrace`), and leaves its own for the next."""
    flat = _Flat(f, primals, has_aux, transform)
    _check_differentiable([_as_value(p, transform) for p in flat.leaves], transform)
    # vjp_fn outlives this call: it differentiates at copies of the primals and of what f
    # closes over, so writing to the caller's arrays later cannot change its cotangents
    # (grad calls it at once, and copies nothing)
    owned = transform == "vjp"
    leaves = [_owned(leaf) for leaf in flat.leaves] if owned else flat.leaves
    traced = Traced(flat, [_as_value(leaf) for leaf in leaves], transform=transform,
                    own_constants=owned, template=_TEMPLATES.get(template_key),
                    weak=weak_numbers(flat.leaves))
    _keep_template(template_key, traced.graph)
    derivatives = traced.derivatives(range(len(flat.leaves)))
    transposed, linear = derivatives.transposed, derivatives.linear
    primal_values = _inputs_of(traced)     # the arguments, then the constants f read
    # what vjp_fn keeps of the trace: the values its backward pass reads, not every one
    # f made (the trace itself is dropped when this returns)
    residuals = {key: traced.trace.values[key]
                 for key in derivatives.residual_keys("cotangents")}
    outputs = traced.outputs

    def vjp_fn(cotangent):
        cts = flat.flatten_like_output(cotangent, "vjp_fn: cotangent")
        values = dict(residuals)
        seeds = iter(transposed.tangent_input_keys)
        for output_id, ct, out in zip(linear.tangent_outputs, cts, outputs):
            if shape_of(ct) != shape_of(out):
                raise TensorShapeError(f"vjp: cotangent of shape {shape_of(ct)} for an output "
                                       f"of shape {shape_of(out)}")
            _check_kind(ct, out, f"{transform}'s vjp_fn", "cotangent", "output")
            if output_id is not None:
                values[next(seeds)] = _cast_like(ct, out)
        keys = transposed.tangent_output_keys
        it = iter(derivatives.cotangents(values))
        leaves = [result_array(_zeros_like(p) if k is None else _cast_like(next(it), p))
                  for k, p in zip(keys, primal_values)]
        leaves = fresh(in_library_of(leaves, primal_values), primal_values + cts)
        return tuple(flat.unflatten_inputs(leaves))

    out_leaves = fresh(in_library_of(list(traced.output()), primal_values), primal_values)
    if owned:   # the eager Tensors vjp_fn reads: the caller gets copies, to write into
        out_leaves = [_owned(v) if isinstance(v, Frontend) else v for v in out_leaves]
    out = tree_unflatten(flat.out_tree, out_leaves)
    if has_aux:
        aux = flat.aux_result(traced.trace, primal_values + out_leaves)
        if owned:
            leaves, tree = tree_flatten(aux)
            aux = tree_unflatten(tree, [_owned(v) if isinstance(v, Frontend) else v
                                        for v in leaves])
        return out, vjp_fn, aux
    return out, vjp_fn


def _check_argnums_differentiable(args, positions, what, holomorphic_f=None) -> None:
    """Differentiated arguments hold floating point or complex arrays (complex only for
    ``holomorphic_f``, the function of ``holomorphic=True``, as JAX); an error names the
    argument by its position among all arguments (``argnums=1`` names argument 1)."""
    for n in positions:
        for leaf in tree_flatten(args[n])[0]:
            dtype = dtype_of(_as_value(leaf, f"{what}: argument {n}"))
            if dtype.kind not in "fc":          # (np.inexact, without asking NumPy)
                raise FunctionalError(f"{what}: argument {n} has dtype {dtype}; only floating "
                                      "point and complex inputs are differentiable")
            if holomorphic_f is not None and dtype.kind != "c":
                raise FunctionalError(f"{what} of {function_name(holomorphic_f)} with "
                                      f"holomorphic=True: argument {n} has dtype {dtype}; a "
                                      "holomorphic function takes complex arrays")


def _check_scalar(out, f, transform: str, holomorphic: bool = False):
    if is_node(out) or isinstance(out, (tuple, list, dict)):
        # np.shape of a ragged tuple raises NumPy's ValueError; name the container instead
        hint = (" (to return auxiliary data beside the value, pass has_aux=True)"
                if isinstance(out, (tuple, list)) else "")
        kind = "complex" if holomorphic else "real floating point"
        raise FunctionalError(f"{transform}: {function_name(f)} must return a {kind} scalar; "
                              f"it returned a {type(out).__name__}{hint}")
    if holomorphic:
        if shape_of(out) != () or dtype_of(out).kind != "c":
            raise FunctionalError(f"{transform} with holomorphic=True: {function_name(f)} must "
                                  f"return a complex scalar; it returned shape {shape_of(out)}, "
                                  f"dtype {dtype_of(out)}")
    elif shape_of(out) != () or dtype_of(out).kind != "f":
        hint = (" (for the derivative f'(z) of a holomorphic f, pass holomorphic=True)"
                if shape_of(out) == () and dtype_of(out).kind == "c" else "")
        raise FunctionalError(f"{transform}: {function_name(f)} must return a real floating "
                              f"point scalar; it returned shape {shape_of(out)}, dtype "
                              f"{dtype_of(out)}{hint}")


def _conjugated(tree):
    """``tree`` with every leaf conjugated: a NumPy array into a new array (0-d stays an
    array), anything else by ``tnp.conj`` (a traced value under an outer transform too)."""
    leaves, structure = tree_flatten(tree)
    return tree_unflatten(structure, [np.conjugate(leaf, out=...) if type(leaf) is np.ndarray
                                      else api.conj(leaf) for leaf in leaves])


def _argnums(argnums, count: int, transform: str) -> tuple:
    nums = (argnums,) if isinstance(argnums, numbers.Integral) else argnums
    if not isinstance(nums, (tuple, list)):
        raise FunctionalError(f"{transform}: argnums must be an int or a tuple of ints, got "
                              f"{argnums!r}")
    for n in nums:
        if not isinstance(n, numbers.Integral) or isinstance(n, bool):
            raise FunctionalError(f"{transform}: argnums must be ints, got {n!r}")
        if not -count <= n < count:
            raise FunctionalError(f"{transform}: argnums {n} out of range for {count} "
                                  "arguments")
    return tuple(int(n) % count for n in nums)


def _by_argnums(argnums, nums: tuple, distinct: tuple, values: Sequence):
    """``values`` (one per distinct argument) as JAX returns them: one for an int
    ``argnums``, else a tuple in ``argnums`` order (an argument named twice, twice)."""
    by_num = dict(zip(distinct, values))
    if isinstance(argnums, numbers.Integral):
        return by_num[nums[0]]
    return tuple(by_num[n] for n in nums)


def value_and_grad(f: Callable, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False, holomorphic: bool = False) -> Callable:
    """``(f(x), df/dx)`` with JAX's semantics: ``argnums`` an int gives one gradient,
    a tuple gives a tuple (an argument named twice gets its gradient twice).

    Keyword arguments pass through to ``f`` and are not differentiated. With
    ``has_aux=True``, ``f`` returns ``(value, aux)`` and the result is
    ``((value, aux), gradient)``, ``aux`` as plain values (no derivatives).
    For complex inputs the gradient is the conjugate of ``jax.grad``'s (see :func:`vjp`).
    With ``holomorphic=True``, ``f`` takes complex arguments and returns a complex scalar,
    and the result is its complex derivative ``f'(z)``, as ``jax.grad(f, holomorphic=True)``
    (the conjugate of tidu's cotangent for the seed 1).

    >>> import numpy as np
    >>> from primitives.tensor import numpy as tnp
    >>> def loss(w, x, scale=1.0):
    ...     return scale * tnp.sum(w * x), w * x
    >>> (value, aux), g = value_and_grad(loss, has_aux=True)(np.ones(2), np.arange(2.0),
    ...                                                       scale=3.0)
    >>> value, aux, g
    (array(3.), array([0., 1.]), array([0., 3.]))
    """
    return _value_and_grad(f, argnums, has_aux, holomorphic, "value_and_grad")


def _value_and_grad(f: Callable, argnums, has_aux: bool, holomorphic: bool, transform: str):
    """:func:`value_and_grad`, its errors naming ``transform`` (what the user called)."""
    check_callable(f, transform)
    template_key = _template_key(f)

    def wrapped(*args, **kwargs):
        nums = _argnums(argnums, len(args), transform)
        distinct = tuple(dict.fromkeys(nums))
        _check_argnums_differentiable(args, distinct, transform, f if holomorphic else None)
        partial = _with_args(f, args, kwargs, distinct)
        out, vjp_fn, *aux = _vjp(partial, [args[n] for n in distinct], has_aux, transform,
                                 (template_key, distinct, has_aux))
        _check_scalar(out, f, transform, holomorphic)
        cotangents = vjp_fn(np.ones((), dtype=dtype_of(out)))
        if holomorphic:             # tidu's cotangent is conj(f'(z)) for the seed 1
            cotangents = [_conjugated(tree) for tree in cotangents]
        grads = _by_argnums(argnums, nums, distinct, cotangents)
        if len(distinct) < len(nums):       # an argument named twice: its gradient, copied
            grads = _fresh_tree(grads, [])
        return ((out, aux[0]) if has_aux else out), grads
    return wrapped


def grad(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
         holomorphic: bool = False) -> Callable:
    """The gradient of a real scalar function (``jax.grad``; for complex inputs its conjugate,
    PyTorch's convention). Keyword arguments pass through to ``f`` undifferentiated; with
    ``has_aux=True`` it returns ``(gradient, aux)``. With ``holomorphic=True``, the
    derivative ``f'(z)`` of a complex scalar function of complex arguments, as JAX's.

    >>> import numpy as np
    >>> from primitives.tensor import numpy as tnp
    >>> grad(lambda a, b, k=1.0: tnp.sum(k * a * b), argnums=(1, 0))(
    ...     np.array([1.0, 2.0]), np.array([3.0, 4.0]), k=2.0)
    (array([2., 4.]), array([6., 8.]))
    >>> grad(lambda z: z ** 3, holomorphic=True)(np.complex128(1 + 1j))     # 3 z**2
    array(0.+6.j)
    """
    value_and_grad_f = _value_and_grad(f, argnums, has_aux, holomorphic, "grad")

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        value, gradient = value_and_grad_f(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient
    return wrapped


def jvp(f: Callable, primals: Sequence, tangents: Sequence, has_aux: bool = False):
    """``(f(*primals), J·tangents)`` (JAX's ``jax.jvp``); primals and tangents may be pytrees.

    With ``has_aux=True``, ``f`` returns ``(output, aux)`` and this returns
    ``(output, tangent_out, aux)``. Forward mode agrees with JAX for complex values.

    >>> import numpy as np
    >>> from primitives.tensor import numpy as tnp
    >>> jvp(tnp.sin, (np.array(0.0),), (np.array(2.0),))
    (array(0.), array(2.))
    """
    check_callable(f, "jvp")
    return _jvp(f, primals, tangents, has_aux, (_template_key(f), "jvp", has_aux))


def _jvp(f: Callable, primals: Sequence, tangents: Sequence, has_aux: bool, template_key,
         transform: str = "jvp"):
    """:func:`jvp`, its trace following the last one under ``template_key`` (see :func:`_vjp`);
    errors name ``transform`` (what the user called: ``hvp`` runs on this)."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise FunctionalError(f"{transform}: primals and tangents must be tuples or lists "
                              f"(one entry per argument), got {type(primals).__name__} and "
                              f"{type(tangents).__name__}")
    if len(primals) != len(tangents):
        raise FunctionalError(f"{transform}: {len(primals)} primals but {len(tangents)} "
                              "tangents")
    flat = _Flat(f, primals, has_aux, transform)
    tangent_leaves, tangent_tree = tree_flatten(list(tangents))
    if tangent_tree != tree_flatten(list(primals))[1]:
        raise FunctionalError(f"{transform}: tangents of structure {tangent_tree!r} for "
                              f"primals of structure {tree_flatten(list(primals))[1]!r}")
    _check_differentiable([_as_value(p, transform) for p in flat.leaves], transform)
    for p, t in zip(flat.leaves, tangent_leaves):
        if shape_of(p) != shape_of(t):
            raise TensorShapeError(f"{transform}: tangent of shape {shape_of(t)} for a primal "
                                   f"of shape {shape_of(p)}")
        _check_kind(t, p, transform, "tangent", "primal")
    traced = _traced(flat, flat.leaves, transform, template_key)
    linear = traced.linearized(range(len(flat.leaves)))
    values = dict(traced.trace.values)
    for key, t, p in zip(linear.tangent_input_keys, tangent_leaves, flat.leaves):
        values[key] = _cast_like(_as_value(t, transform), p)
    keys = linear.tangent_output_keys
    computed = iter(traced.derivatives(range(len(flat.leaves))).tangents(values))
    tangent_out = [result_array(_zeros_like(o) if k is None else next(computed))
                   for k, o in zip(keys, traced.outputs)]
    out = _fresh_tree((tree_unflatten(flat.out_tree,
                                      in_library_of(list(traced.output()), flat.leaves)),
                       tree_unflatten(flat.out_tree, in_library_of(tangent_out, flat.leaves))),
                      _inputs_of(traced) + tangent_leaves)
    if has_aux:
        held = _inputs_of(traced) + list(tangent_leaves) + tree_flatten(out)[0]
        return (*out, flat.aux_result(traced.trace, held))
    return out


def linearize(f: Callable, *primals, has_aux: bool = False):
    """``(f(*primals), f_jvp)`` (JAX's ``jax.linearize``): ``f_jvp(*tangents)`` is what
    ``jvp(f, primals, tangents)`` returns as its tangent, from the linear graph made here
    once, so that each call runs only the linear work (one per primal, pytrees alike).

    ``f_jvp`` outlives this call: it differentiates at copies of the primals and of what
    ``f`` closes over, so writing to the caller's arrays later changes nothing. With
    ``has_aux=True``, ``f`` returns ``(output, aux)`` and this returns
    ``(output, f_jvp, aux)``.

    >>> import numpy as np
    >>> from primitives.tensor import numpy as tnp
    >>> y, f_jvp = linearize(tnp.sin, np.array([0.0, np.pi]))
    >>> f_jvp(np.array([2.0, 1.0]))
    array([ 2., -1.])
    """
    check_callable(f, "linearize")
    flat = _Flat(f, primals, has_aux, "linearize")
    _check_differentiable([_as_value(p, "linearize") for p in flat.leaves], "linearize")
    leaves = [_owned(leaf) for leaf in flat.leaves]
    traced = Traced(flat, [_as_value(leaf) for leaf in leaves], transform="linearize",
                    own_constants=True, weak=weak_numbers(flat.leaves))
    linear = traced.linearized(range(len(leaves)))
    primal_values = _inputs_of(traced)         # the arguments, then the constants f read
    primal_tree = tree_flatten(list(primals))[1]
    # the primal values the tangent work reads (the JVP rules' residuals, such as cos x),
    # computed once here: each f_jvp call then runs the linear work alone, as JAX's
    read = _read_by_tangent_work(linear)
    residuals = run_graph(read, traced.trace.values) if read else []
    run = GraphRun([k for k in linear.tangent_output_keys if k is not None],
                   [*linear.tangent_input_keys, *read])

    def f_jvp(*tangents):
        tangent_leaves, tangent_tree = tree_flatten(list(tangents))
        if tangent_tree != primal_tree:
            raise FunctionalError(f"linearize's f_jvp of {function_name(f)}: tangents of "
                                  f"structure {tangent_tree!r} for primals of structure "
                                  f"{primal_tree!r}")
        where = f"linearize's f_jvp of {function_name(f)}"
        seeds = []
        for t, p in zip(tangent_leaves, leaves):
            t = _as_value(t, where)
            if shape_of(t) != shape_of(p):
                raise TensorShapeError(f"{where}: tangent of shape {shape_of(t)} for a primal "
                                       f"of shape {shape_of(p)}")
            _check_kind(t, p, where, "tangent", "primal")
            seeds.append(_cast_like(t, p))
        computed = iter(run([*seeds, *residuals]))
        out = [result_array(_zeros_like(o) if k is None else next(computed))
               for k, o in zip(linear.tangent_output_keys, traced.outputs)]
        out = fresh(in_library_of(out, primal_values), primal_values + tangent_leaves)
        return tree_unflatten(flat.out_tree, out)

    out_leaves = fresh(in_library_of(list(traced.output()), primal_values), primal_values)
    out_leaves = [_owned(v) if isinstance(v, Frontend) else v for v in out_leaves]
    out = tree_unflatten(flat.out_tree, out_leaves)
    if has_aux:
        return out, f_jvp, flat.aux_result(traced.trace, primal_values + out_leaves)
    return out, f_jvp


def _read_by_tangent_work(linear: LinearizedGraph) -> list:
    """The primal values the linear graph's tangent operations read, in order: the
    residuals its JVP rules made and the traced values they read as they are."""
    read: dict = {}
    for op_key in linear.graph.operation_keys:
        role = op_key.role
        if type(role) is Linearized:
            for key, active in zip(op_key.inputs, role.active_mask):
                if not active:
                    read.setdefault(key, None)
    return list(read)


def hvp(f: Callable, primals: Sequence, tangents: Sequence):
    """The Hessian of real scalar ``f`` times ``tangents`` (forward over reverse).

    >>> import numpy as np
    >>> from primitives.tensor import numpy as tnp
    >>> hvp(lambda x: tnp.sum(x ** 3), (np.array([1.0, 2.0]),), (np.array([1.0, 0.0]),))
    array([6., 0.])
    """
    check_callable(f, "hvp")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        # (list() of an array would pass its rows as the arguments)
        raise FunctionalError("hvp: primals and tangents must be tuples or lists (one entry "
                              f"per argument), got {type(primals).__name__} and "
                              f"{type(tangents).__name__}")
    primals, tangents = list(primals), list(tangents)
    value_and_gradient = _value_and_grad(f, tuple(range(len(primals))), False, False, "hvp")
    _, result = _jvp(lambda *xs: tuple(value_and_gradient(*xs)[1]), primals, tangents, False,
                     (_template_key(f), "hvp", len(primals)), "hvp")
    return result[0] if len(primals) == 1 else tuple(result)


# --- Jacobians ------------------------------------------------------------------------


def jacfwd(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """The Jacobian of ``f`` by forward mode (``jax.jacfwd``): one JVP per input element.

    For an output of shape ``S`` and an input of shape ``T`` the block has shape
    ``S + T``. Pytrees as JAX: the output's structure outside, the input's
    inside (a tuple over ``argnums`` when it is a tuple). Keyword arguments pass
    through; ``has_aux=True`` returns ``(jacobian, aux)``. ``f`` is traced and
    linearized once; the linear program runs on all basis tangents at once, batched
    (as ``vmap`` would), or once per basis tangent for fewer than 32 of them. That
    program is compiled once per structure of ``f``'s trace: a later call that traces
    the same structure only runs it.

    Complex numbers, as JAX: inputs must be real unless ``holomorphic=True``
    (then inputs and outputs are complex and the result is the derivative along
    each input's real axis, which is ``f'(z)`` for holomorphic ``f``; for other
    ``f`` it is that directional derivative, not ``f'``). A complex output of
    real inputs is fine.

    >>> import numpy as np
    >>> from primitives.tensor import numpy as tnp
    >>> jacfwd(lambda x: x[:2] * x[1:])(np.array([1.0, 2.0, 3.0]))
    array([[2., 1., 0.],
           [0., 3., 2.]])
    """
    return _jacobian(f, argnums, has_aux, holomorphic, "jacfwd")


def jacrev(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """The Jacobian of ``f`` by reverse mode (``jax.jacrev``): one VJP per output element.

    Shapes, pytrees, ``argnums``, keyword arguments and ``has_aux`` as
    :func:`jacfwd`. ``f`` is traced, linearized and transposed once (per output
    leaf); the transposed program runs on all basis cotangents at once, batched (as
    ``vmap`` would), or once per basis cotangent for fewer than 32 of them.

    Complex numbers. For a real output, row ``i`` is the gradient of ``out[i]`` in
    tidu's convention: for complex inputs that is the **conjugate of JAX's**
    (``jax.jacrev(f)(z) == conj(jacrev(f)(z))``; so ``jacrev`` of a scalar function
    equals :func:`grad`). A complex output needs real inputs or
    ``holomorphic=True``; it then takes two VJPs per output element and gives
    exactly what :func:`jacfwd` gives (for holomorphic ``f``, ``f'(z)``, JAX's
    numbers). Complex inputs and outputs without ``holomorphic=True`` raise, as in JAX.

    >>> import numpy as np
    >>> from primitives.tensor import numpy as tnp
    >>> jacrev(lambda x, y: x * y, argnums=(0, 1))(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    (array([[3., 0.],
           [0., 4.]]), array([[1., 0.],
           [0., 2.]]))
    """
    return _jacobian(f, argnums, has_aux, holomorphic, "jacrev")


jacobian = jacrev


def hessian(f: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """The Hessian, ``jacfwd(jacrev(f))`` (``jax.hessian``): for an input of shape ``T`` and a
    scalar output, shape ``T + T``. Complex inputs need ``holomorphic=True`` (then it is
    ``f''(z)`` for holomorphic ``f``).

    >>> import numpy as np
    >>> from primitives.tensor import numpy as tnp
    >>> hessian(lambda x: x[0] ** 2 * x[1])(np.array([1.0, 2.0]))
    array([[4., 2.],
           [2., 0.]])
    """
    return _jacobian(_jacobian(f, argnums, has_aux, holomorphic, "jacrev", "hessian"),
                     argnums, has_aux, holomorphic, "jacfwd", "hessian")


def _jacobian(f: Callable, argnums, has_aux: bool, holomorphic: bool, transform: str,
              name: str | None = None):
    """``jacfwd`` or ``jacrev`` (``transform``) of ``f``; errors about its arguments name
    ``name`` (``hessian``, which is two of them), or else the transform."""
    check_callable(f, name or transform)
    template_key = _template_key(f)
    name = name or transform

    @functools.wraps(f)
    def jacobian_of_f(*args, **kwargs):
        nums = _argnums(argnums, len(args), name)
        distinct = tuple(dict.fromkeys(nums))
        _check_argnums_differentiable(args, distinct, name)
        flat = _Flat(_with_args(f, args, kwargs, distinct), [args[n] for n in distinct],
                     has_aux, name)
        inputs = [_as_value(leaf) for leaf in flat.leaves]
        _check_differentiable(inputs, name)
        traced = _traced(flat, flat.leaves, name,
                         (template_key, transform, distinct, has_aux))
        _check_jacobian_dtypes(transform, f, holomorphic, inputs, traced.outputs)
        blocks = (_jacfwd_blocks if transform == "jacfwd" else _jacrev_blocks)(traced, inputs)
        per_output = [_by_argnums(argnums, nums, distinct,
                                  flat.unflatten_inputs(in_library_of(row, inputs)))
                      for row in blocks]
        result = _fresh_tree(tree_unflatten(flat.out_tree, per_output), _inputs_of(traced))
        if has_aux:
            held = _inputs_of(traced) + tree_flatten(result)[0]
            return result, flat.aux_result(traced.trace, held)
        return result
    return jacobian_of_f


def _is_complex(value) -> bool:
    return np.issubdtype(dtype_of(value), np.complexfloating)


def _check_jacobian_dtypes(transform: str, f, holomorphic: bool, inputs, outputs) -> None:
    """JAX's rules for complex Jacobians, with the reason in the message."""
    where = f"{transform} of {function_name(f)}"
    if holomorphic:
        for what, values in (("input", inputs), ("output", outputs)):
            for position, value in enumerate(values):
                if not _is_complex(value):
                    raise FunctionalError(f"{where} with holomorphic=True: {what} {position} has "
                                          f"dtype {dtype_of(value)}; a holomorphic function "
                                          "takes and returns complex arrays")
        return
    complex_in = [dtype_of(x) for x in inputs if _is_complex(x)]
    if transform == "jacfwd" and complex_in:
        raise FunctionalError(
            f"{where}: an input is complex ({complex_in[0]}). Forward mode gives a complex "
            "Jacobian only for a holomorphic function: pass holomorphic=True (the result is the "
            "derivative along the real axes, f'(z) for holomorphic f); for a real-valued f use "
            "jacrev (its complex gradient, tidu's convention), or use jvp")
    complex_out = [dtype_of(o) for o in outputs if _is_complex(o)]
    if transform == "jacrev" and complex_in and complex_out:
        raise FunctionalError(
            f"{where}: complex inputs and complex outputs. Their Jacobian is a complex matrix "
            "only for a holomorphic function: pass holomorphic=True (f'(z) for holomorphic f), "
            "or use vjp (tidu's convention)")


def _basis(like, index: int) -> np.ndarray:
    """The ``index``-th unit array of ``like``'s shape and dtype (C order)."""
    unit = np.zeros(int(np.prod(shape_of(like), dtype=np.int64)), dtype=dtype_of(like))
    unit[index] = 1
    return unit.reshape(shape_of(like))


def _block(pieces: list, axis: int, shape: tuple, dtype):
    """The Jacobian block from its rows (``axis=0``) or columns: stacked, in ``shape``."""
    if not pieces or any(piece is None for piece in pieces):
        return np.zeros(shape, dtype=dtype)
    if any(isinstance(piece, Frontend) for piece in pieces):     # an outer transform's values
        return api.astype(api.reshape(api.stack(pieces, axis=axis), shape), dtype)
    xp, pieces = operands(pieces)
    return _real_as(xp, xp.reshape(xp.stack(pieces, axis=axis), shape), dtype)


def _real_as(xp, block, dtype):
    """``block`` as ``dtype``: its real part when a real input's cotangent went through
    complex work."""
    if dtype_of(block).kind == "c" and np.dtype(dtype).kind != "c":
        block = xp.real(block)
    return xp.astype(block, np.dtype(dtype), copy=False)


def _jacfwd_blocks(traced: Traced, inputs: list) -> list:
    """``blocks[o][i]``: the Jacobian of output ``o`` with respect to input ``i``, from one
    linearization (the other inputs' tangents are zeros, for the work of input ``i``)."""
    outputs = traced.outputs
    derivatives = traced.derivatives(range(len(inputs)))
    linear = derivatives.linear
    tangent_keys = linear.tangent_input_keys
    blocks = [[None] * len(inputs) for _ in outputs]
    for i, x in enumerate(inputs):
        values = dict(traced.trace.values)
        values.update((key, _zeros_like(other)) for j, (key, other)
                      in enumerate(zip(tangent_keys, inputs)) if j != i)
        if _size(x) >= _BATCHED_BASIS_MIN:
            columns = _batched_basis(derivatives, [traced.graph, linear.graph],
                                     tangent_keys[i], linear.tangent_output_keys, values,
                                     _identity(x))
        else:
            run = _linear_map(derivatives, [tangent_keys[i]], linear.tangent_output_keys,
                              values)
            columns = [run([_basis(x, k)]) for k in range(_size(x))]
        for o, out in enumerate(outputs):
            dtype = dtype_of(out) if np.issubdtype(dtype_of(out), np.inexact) else dtype_of(x)
            shape = shape_of(out) + shape_of(x)
            blocks[o][i] = _block_of_batch(columns[o], True, shape, dtype) if type(
                columns) is _Batch else _block([column[o] for column in columns],
                                               len(shape_of(out)), shape, dtype)
    return blocks


def _jacrev_blocks(traced: Traced, inputs: list) -> list:
    """``blocks[o][i]`` by reverse mode: the linear graph transposed once per output leaf."""
    outputs = traced.outputs
    derivatives = traced.derivatives(range(len(inputs)))
    linear = derivatives.linear
    blocks = []
    for o, out in enumerate(outputs):
        complex_out = _is_complex(out)
        rows = []
        if linear.tangent_outputs[o] is not None:
            transposed = derivatives.transposed_for(o)
            if _size(out) >= _BATCHED_BASIS_MIN:
                basis = _identity(out)
                if complex_out:
                    basis = np.concatenate([basis, 1j * basis])
                [seed] = transposed.tangent_input_keys
                batched = _batched_basis(derivatives,
                                         [traced.graph, linear.graph, transposed.graph], seed,
                                         transposed.tangent_output_keys, traced.trace.values,
                                         basis)
                if complex_out:     # as below, for all rows at once
                    n = _size(out)
                    batched = _Batch(None if a is None else api.real(a[:n]) + 1j * api.real(a[n:])
                                     for a in batched)
                blocks.append([_block_of_batch(batched[i], False, shape_of(out) + shape_of(x),
                                               dtype_of(out) if complex_out else dtype_of(x))
                               for i, x in enumerate(inputs)])
                continue
            run = _linear_map(derivatives, transposed.tangent_input_keys,
                              transposed.tangent_output_keys, traced.trace.values)
            for k in range(_size(out)):
                unit = _basis(out, k)
                row = run([unit])
                if complex_out:     # d out / d Re(x) = Re(vjp(e)) + i Re(vjp(i e))
                    imaginary = run([1j * unit])
                    row = [None if a is None else api.real(a) + 1j * api.real(b)
                           for a, b in zip(row, imaginary)]
                rows.append(row)
        blocks.append([_block([row[i] for row in rows], 0, shape_of(out) + shape_of(x),
                              dtype_of(out) if complex_out else dtype_of(x))
                       for i, x in enumerate(inputs)])
    return blocks


def _size(value) -> int:
    return int(np.prod(shape_of(value), dtype=np.int64))


# From this many basis vectors on, a Jacobian batches its linear program over all of them at
# once (one program on a stack of basis vectors, tidu.batch) rather than running it once per
# basis vector: measured faster from about 30 on (n = 100: 3.6 ms against 5.7 ms), slower
# below (batching and scheduling cost about 1 ms).
_BATCHED_BASIS_MIN = 32


class _Batch(list):
    """One value per target, each with the basis vectors along axis 0 (``None``: zeros)."""


def _identity(like) -> np.ndarray:
    """All unit arrays of ``like``'s shape and dtype, stacked along a new axis 0 (C order)."""
    n = _size(like)
    return np.eye(n, dtype=dtype_of(like)).reshape((n,) + shape_of(like))


def _batched_basis(derivatives: Derivatives, graphs: list, seed_key, target_keys: Sequence,
                   values: dict, basis: np.ndarray) -> _Batch:
    """A linear program's ``target_keys`` for every seed in ``basis`` at once: the program
    batched along the seed (:func:`tidu.batch`), run compiled on plain arrays, replayed
    through their front end on an outer transform's values. The batched program is made
    once per structure (kept by ``derivatives``)."""
    targets = [key for key in target_keys if key is not None]

    def make():
        batched = batch(graphs, targets, {seed_key.key: 0}, len(basis))
        keys = list(dict.fromkeys([*values, batched.input_keys[0]]))
        return batched, GraphRun(batched.output_keys, keys)
    batched, run = derivatives.derived(
        ("batched", seed_key, tuple(targets), len(basis), frozenset(values)), make)
    env = dict(values)
    env[batched.input_keys[0]] = basis
    outs = run([env[key] for key in run.input_keys])
    # a target that does not read the seed is a linear map of zero seeds: zero
    found = iter(None if axis is None else out if axis == 0 else _front(out, axis)
                 for out, axis in zip(outs, batched.out_axes))
    return _Batch(None if key is None else next(found) for key in target_keys)


def _front(value, axis: int):
    if isinstance(value, Frontend):
        order = list(range(len(shape_of(value))))
        return api.transpose(value, [order.pop(axis)] + order)
    xp, (value,) = operands([value])
    return xp.moveaxis(value, axis, 0)


def _block_of_batch(piece, last: bool, shape: tuple, dtype):
    """The Jacobian block from a batch of rows (``last=False``) or of columns (basis axis 0)."""
    if piece is None:
        return np.zeros(shape, dtype=dtype)
    if isinstance(piece, Frontend):
        if last:
            order = list(range(1, len(shape_of(piece))))
            piece = api.transpose(piece, order + [0])
        return api.astype(api.reshape(piece, shape), dtype)
    xp, (piece,) = operands([piece])
    return _real_as(xp, xp.reshape(xp.moveaxis(piece, 0, -1) if last else piece, shape), dtype)


def _plain_or_traced(value):
    return value if isinstance(value, Frontend) else as_array(value)


class _LinearMap:
    """A linear (or transposed) graph's ``targets`` as a function of its ``seeds``, given the
    values of the ``known`` keys; what depends only on keys (the seed-free work to do first,
    the compiled program) is made once per structure (:func:`_linear_map`), and
    :meth:`bound` does the seed-free work for one set of values, so that each basis vector
    then costs one run of the program on plain arrays."""

    def __init__(self, seed_keys: Sequence, target_keys: Sequence, known: frozenset) -> None:
        self.seed_keys = list(seed_keys)
        self.target_keys = list(target_keys)
        self.targets = [key for key in self.target_keys if key is not None]
        dependent = set(self.seed_keys)
        once: dict = {}                 # values read by seed work, computed without the seeds
        for op_key in schedule(self.targets, known | dependent):
            if any(key in dependent for key in op_key.inputs):
                dependent.update(op_key.output_keys())
                once.update((key, None) for key in op_key.inputs
                            if key not in dependent and key not in known)
        once.update((key, None) for key in self.targets
                    if key not in dependent and key not in known)
        self.once = list(once)
        self.dependent = dependent
        program = Program.for_values(self.targets, known | set(self.seed_keys) | set(self.once))
        self.load_keys = [key for key, _ in program.loads]
        self.run = GraphRun(self.targets, self.load_keys, program)
        self.seed_slots = [self.load_keys.index(key) if key in self.load_keys else None
                           for key in self.seed_keys]

    def bound(self, values: dict) -> Callable[[Sequence], list]:
        """The map at ``values`` (one per known key): ``seeds -> targets``."""
        env = values
        if self.once:
            env = dict(values)
            env.update(zip(self.once, run_graph(self.once, values)))
        loaded = [None if key in self.dependent else _plain_or_traced(env[key])
                  for key in self.load_keys]

        def linear_map(seeds: Sequence) -> list:
            filled = list(loaded)
            for slot, seed in zip(self.seed_slots, seeds):
                if slot is not None:
                    filled[slot] = seed
            results = iter(self.run(filled))
            return [None if key is None else next(results) for key in self.target_keys]
        return linear_map


def _linear_map(derivatives: Derivatives, seed_keys: Sequence, target_keys: Sequence,
                values: dict) -> Callable[[Sequence], list]:
    """:class:`_LinearMap` of these keys, made once per structure (kept by ``derivatives``),
    bound to ``values``."""
    known = frozenset(values)
    linear_map = derivatives.derived(
        ("linear map", tuple(seed_keys), tuple(target_keys), known),
        lambda: _LinearMap(seed_keys, target_keys, known))
    return linear_map.bound(values)
