"""Functional transforms with JAX's semantics: grad, value_and_grad, jvp, vjp, hvp.

One difference, for complex inputs: reverse mode is the adjoint under the real inner
product ``Re<a, b>`` (PyTorch's and ChainRules' convention), so ``grad`` and ``vjp``
return the complex conjugate of what ``jax.grad`` and ``jax.vjp`` return
(``jax_grad == np.conj(tidu_grad)``). Forward mode (``jvp``) agrees with JAX.

A transformed function must return arrays or numbers (``grad``: a real float
scalar), and traced values must not outlive their transform ("escaped tracers"):
both raise :class:`FunctionalError` instead of giving zero derivatives.

``f`` is traced into a tidu graph (with concrete values, so Python control
flow works), then ``linearize`` and ``linear_transpose`` give its derivatives.
The linear and transposed graphs are run through ``bind``, so transforms nest:
``hvp`` is ``jvp`` of ``grad``.

>>> import numpy as np
>>> from primitives.tensor import api as tnp
>>> grad(lambda x: tnp.sum(x * x))(np.array([1.0, 2.0]))
array([2., 4.])
"""

from __future__ import annotations

import functools
import itertools
import numbers
from typing import Any, Callable, Sequence

import numpy as np

from tidu import TiduError, linear_transpose, linearize
from tidu.graph import Graph, GraphBuilder, Local
from primitives.tensor.api import ArrayOperators
from primitives.tensor.errors import TensorShapeError
from primitives.tensor.pytree import tree_flatten, tree_unflatten
from primitives.tensor.core import Frontend, dtype_of, interpret, shape_of

_levels = itertools.count(2)


class FunctionalError(TiduError, TypeError):
    """A functional transform used on something it does not support (a ``TypeError``, as
    JAX raises for bad arguments and escaped tracers)."""


class GraphTrace:
    """The graph being recorded while ``f`` runs on tracers; ``values`` holds what they saw.

    ``transform`` names the transform that records it, for errors; once it has
    traced ``f``, ``active`` is false and its tracers can no longer be used.
    """

    def __init__(self, capture: Callable[[Any], bool] | None = None,
                 transform: str = "a transform", abstract: bool = False) -> None:
        self.level = next(_levels)
        self.transform = transform
        self.active = True
        self.abstract = abstract        # values not to be read: jit's trace is for any input
        self.builder = GraphBuilder()
        self.values: dict = {}          # value key -> value one level below
        self._constants = itertools.count()
        self.capture = capture          # values for which lift() records the data, not the value
        self.captured: dict = {}        # input key -> captured value

    def new_input(self, key, value) -> "Tracer":
        local_id = self.builder.add_input(key)
        self.values[self.builder.global_key(local_id)] = value
        return Tracer(self, local_id, value)

    def lift(self, value) -> "Tracer":
        """A tracer for ``value``: itself if it is ours, else a constant input."""
        if isinstance(value, Tracer) and value.trace is self:
            return value
        key = ("constant", next(self._constants))
        if self.capture is not None and self.capture(value):
            self.captured[key] = value
            return self.new_input(key, value.value_below)
        return self.new_input(key, value)

    def key_of(self, tracer: "Tracer"):
        return self.builder.global_key(tracer.id)

    def build(self, outputs: Sequence["Tracer"]) -> Graph:
        self.builder.set_outputs([t.id for t in outputs])
        return self.builder.build()


class Tracer(ArrayOperators, Frontend):
    """A value inside a traced function: a graph value plus what it is one level down."""

    __slots__ = ("trace", "id", "value_below", "level")
    is_tracer = True

    def __init__(self, trace: GraphTrace, id: int, value) -> None:
        self.trace = trace
        self.id = id
        self.value_below = value
        self.level = trace.level

    @property
    def shape(self) -> tuple:
        return shape_of(self.value_below)

    @property
    def dtype(self) -> np.dtype:
        return dtype_of(self.value_below)

    @property
    def carries_gradient(self) -> bool:
        return self.dtype.kind in "fc"

    @classmethod
    def bind(cls, op, args) -> list:
        from primitives.tensor.core import bind

        top = None
        for a in args:
            if isinstance(a, Tracer):
                if not a.trace.active:
                    raise FunctionalError(
                        f"escaped tracer: a value traced inside {a.trace.transform} was used "
                        f"by {op!r} after that transform returned (it was stored outside f, "
                        "e.g. in a list or a global); return it from f instead")
                if top is None or a.level > top.level:
                    top = a
        trace = top.trace
        lifted = [trace.lift(a) for a in args]
        results = bind(op, *[t.value_below for t in lifted])
        ids = trace.builder.add_operation(op, [Local(t.id) for t in lifted])
        outs = []
        for local_id, result in zip(ids, results):
            trace.values[trace.builder.global_key(local_id)] = result
            outs.append(Tracer(trace, local_id, result))
        return outs

    def __repr__(self) -> str:
        return f"Tracer(shape={self.shape}, dtype={self.dtype})"


class Traced:
    """``f`` traced at some primals: its graph, and its linearization and transpose on demand."""

    def __init__(self, f: Callable, primals: Sequence, capture=None,
                 transform: str = "make_graph") -> None:
        self.trace = GraphTrace(capture, transform)
        self.input_keys = [("arg", i) for i in range(len(primals))]
        tracers = [self.trace.new_input(k, p) for k, p in zip(self.input_keys, primals)]
        try:
            out = f(*tracers)
            self.single_output = not isinstance(out, (tuple, list))
            outs = [out] if self.single_output else list(out)
            for position, o in enumerate(outs):
                check_output(o, transform, f, None if self.single_output else position)
            outs = [self.trace.lift(o) for o in outs]
        finally:
            self.trace.active = False
        self.graph = self.trace.build(outs)
        self.output_keys = list(self.graph.output_keys)
        self.outputs = [self.trace.values[k] for k in self.output_keys]
        self._linear = {}

    def linearized(self, argnums: Sequence[int]):
        """The linear graph of the outputs with respect to arguments ``argnums``."""
        argnums = tuple(argnums)
        if argnums not in self._linear:
            self._linear[argnums] = linearize(self.graph, self.output_keys,
                                              [self.input_keys[i] for i in argnums])
        return self._linear[argnums]

    def transposed(self, argnums: Sequence[int]):
        """The transposed graph of :meth:`linearized` (cotangent seeds to input cotangents)."""
        return linear_transpose(self.linearized(argnums))

    def output(self):
        outs = [_array(o) for o in self.outputs]
        return outs[0] if self.single_output else tuple(outs)


def make_graph(f: Callable, *primals, transform: str = "make_graph") -> Traced:
    """Trace ``f`` at ``primals`` into a graph for inspection: ``.graph``,
    ``.linearized(argnums)``, ``.transposed(argnums)`` (``jax.make_jaxpr``'s role).

    >>> import numpy as np
    >>> import primitives.tensor as tnp
    >>> traced = tnp.make_graph(lambda x: tnp.sin(x) * x, np.ones(3))
    >>> len(traced.graph.operations)
    2
    """
    return Traced(f, [_as_value(p) for p in primals], transform=transform)


def _function_name(f) -> str:
    return getattr(f, "__qualname__", None) or type(f).__name__


def check_output(value, transform: str, f, position: int | None) -> None:
    """A traced function returns arrays, numbers or traced values (JAX's rule): not ``None``,
    strings or other objects, which would otherwise become silent zero derivatives."""
    where = "" if position is None else f" at position {position}"
    if isinstance(value, Tracer) and not value.trace.active:
        raise FunctionalError(f"{transform}: {_function_name(f)} returned{where} an escaped "
                              f"tracer of {value.trace.transform}, which has already returned")
    if isinstance(value, Frontend):
        return
    if isinstance(value, (np.ndarray, np.generic, numbers.Number)) and \
            np.asarray(value).dtype.kind in "biufc":
        return
    raise FunctionalError(f"{transform}: {_function_name(f)} returned "
                          f"{type(value).__name__}{where}; a transformed function must return "
                          "arrays or numbers (or a tuple or list of them)")


def _check_differentiable(primals: Sequence, what: str) -> None:
    for position, p in enumerate(primals):
        if not np.issubdtype(dtype_of(p), np.inexact):
            raise FunctionalError(f"{what}: argument {position} has dtype {dtype_of(p)}; "
                                  "only floating point and complex inputs are differentiable")


def _as_value(x):
    if isinstance(x, Frontend):
        return x
    if isinstance(x, numbers.Number) or isinstance(x, (np.ndarray, np.generic, list, tuple)):
        return np.asarray(x)
    raise FunctionalError(f"expected an array or a number, got {type(x).__name__}")


def _array(x):
    """Top-level results are NumPy arrays (0-d arrays, not NumPy scalars)."""
    return np.asarray(x) if isinstance(x, (np.generic, numbers.Number)) else x


def _zeros_like(x):
    return np.zeros(shape_of(x), dtype=dtype_of(x))


def _cast_like(value, like):
    from primitives.tensor.api import astype
    return astype(value, dtype_of(like))


class _Flat:
    """``f`` as a function of the leaves of its (pytree) arguments, returning the leaves of
    its result; the structures, to rebuild both sides."""

    def __init__(self, f: Callable, args: Sequence) -> None:
        self.f = f
        self.leaves, self.in_trees = [], []
        for arg in args:
            leaves, tree = tree_flatten(arg)
            self.leaves += leaves
            self.in_trees.append((tree, len(leaves)))
        self.out_tree = None
        functools.update_wrapper(self, f)

    def __call__(self, *leaves):
        out_leaves, self.out_tree = tree_flatten(self.f(*self.unflatten_inputs(leaves)))
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


def vjp(f: Callable, *primals, transform: str = "vjp"):
    """``(f(*primals), vjp_fn)``; ``vjp_fn(ct)`` returns one cotangent per primal, as a tuple.

    Primals, outputs and cotangents may be pytrees (nested tuples, lists and
    dicts of arrays). For complex inputs this is the adjoint under ``Re<a, b>``
    (PyTorch's convention): ``jax.vjp`` returns the complex conjugate of it.
    """
    flat = _Flat(f, primals)
    _check_differentiable([_as_value(p) for p in flat.leaves], transform)
    traced = make_graph(flat, *flat.leaves, transform=transform)
    argnums = tuple(range(len(flat.leaves)))
    transposed = traced.transposed(argnums)
    linear = traced.linearized(argnums)
    primal_values = [traced.trace.values[k] for k in traced.graph.input_keys]

    def vjp_fn(cotangent):
        cts = flat.flatten_like_output(cotangent, "vjp_fn: cotangent")
        values = dict(traced.trace.values)
        seeds = iter(transposed.tangent_input_keys)
        for output_id, ct, out in zip(linear.tangent_outputs, cts, traced.outputs):
            if shape_of(ct) != shape_of(out):
                raise TensorShapeError(f"vjp: cotangent of shape {shape_of(ct)} for an output "
                                       f"of shape {shape_of(out)}")
            if output_id is not None:
                values[next(seeds)] = _cast_like(ct, out)
        keys = transposed.tangent_output_keys
        computed = interpret([k for k in keys if k is not None], values)
        it = iter(computed)
        leaves = [_array(_zeros_like(p) if k is None else _cast_like(next(it), p))
                  for k, p in zip(keys, primal_values)]
        return tuple(flat.unflatten_inputs(leaves))

    return tree_unflatten(flat.out_tree, list(traced.output())), vjp_fn


def _check_scalar(out, f, transform: str):
    if shape_of(out) != () or dtype_of(out).kind != "f":
        raise FunctionalError(f"{transform}: {_function_name(f)} must return a real floating "
                              f"point scalar; it returned shape {shape_of(out)}, dtype "
                              f"{dtype_of(out)}")


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


def value_and_grad(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """``(f(x), df/dx)`` with JAX's semantics: ``argnums`` an int gives one gradient,
    a tuple gives a tuple (an argument named twice gets its gradient twice).

    For complex inputs the gradient is the conjugate of ``jax.grad``'s (see :func:`vjp`).
    """
    def wrapped(*args):
        nums = _argnums(argnums, len(args), "value_and_grad")
        distinct = tuple(dict.fromkeys(nums))

        @functools.wraps(f)
        def partial(*chosen):
            full = list(args)
            for n, value in zip(distinct, chosen):
                full[n] = value
            return f(*full)

        out, vjp_fn = vjp(partial, *[args[n] for n in distinct], transform="grad")
        _check_scalar(out, f, "grad")
        by_num = dict(zip(distinct, vjp_fn(np.ones((), dtype=dtype_of(out)))))
        grads = tuple(by_num[n] for n in nums)
        return out, grads[0] if isinstance(argnums, numbers.Integral) else grads
    return wrapped


def grad(f: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """The gradient of a real scalar function (``jax.grad``; for complex inputs its conjugate,
    PyTorch's convention)."""
    value_and_grad_f = value_and_grad(f, argnums)

    def wrapped(*args):
        return value_and_grad_f(*args)[1]
    return wrapped


def jvp(f: Callable, primals: Sequence, tangents: Sequence):
    """``(f(*primals), J·tangents)`` (JAX's ``jax.jvp``); primals and tangents may be pytrees."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise FunctionalError("jvp: primals and tangents must be tuples or lists (one entry "
                              f"per argument), got {type(primals).__name__} and "
                              f"{type(tangents).__name__}")
    if len(primals) != len(tangents):
        raise FunctionalError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    flat = _Flat(f, primals)
    tangent_leaves, tangent_tree = tree_flatten(list(tangents))
    if tangent_tree != tree_flatten(list(primals))[1]:
        raise FunctionalError(f"jvp: tangents of structure {tangent_tree!r} for primals of "
                              f"structure {tree_flatten(list(primals))[1]!r}")
    _check_differentiable([_as_value(p) for p in flat.leaves], "jvp")
    for p, t in zip(flat.leaves, tangent_leaves):
        if shape_of(p) != shape_of(t):
            raise TensorShapeError(f"jvp: tangent of shape {shape_of(t)} for a primal of shape "
                                   f"{shape_of(p)}")
    traced = make_graph(flat, *flat.leaves, transform="jvp")
    linear = traced.linearized(range(len(flat.leaves)))
    values = dict(traced.trace.values)
    for key, t, p in zip(linear.tangent_input_keys, tangent_leaves, flat.leaves):
        values[key] = _cast_like(_as_value(t), p)
    keys = linear.tangent_output_keys
    computed = iter(interpret([k for k in keys if k is not None], values))
    tangent_out = [_array(_zeros_like(o) if k is None else next(computed))
                   for k, o in zip(keys, traced.outputs)]
    return (tree_unflatten(flat.out_tree, list(traced.output())),
            tree_unflatten(flat.out_tree, tangent_out))


def hvp(f: Callable, primals: Sequence, tangents: Sequence):
    """The Hessian of real scalar ``f`` times ``tangents`` (forward over reverse)."""
    primals, tangents = list(primals), list(tangents)
    gradient = grad(f, argnums=tuple(range(len(primals))))
    _, result = jvp(lambda *xs: tuple(gradient(*xs)), primals, tangents)
    return result[0] if len(primals) == 1 else tuple(result)
