"""``vmap``: a function written for one example, run on a batch (JAX's ``jax.vmap``).

``vmap(f, in_axes, out_axes)(*args)`` traces ``f`` once at one example's shapes
(abstractly, as :func:`~primitives.tensor.jit` does: Python control flow on a
batched value raises), hands the graph to :func:`tidu.batch` with the
positions of the batch axes, and runs the batched graph: compiled on plain
arrays; replayed through their front end on eager ``Tensor``s or on another
transform's traced values, so it composes with ``grad``, ``jvp``, ``jit``, the
Jacobians and itself (``vmap(grad(loss))`` gives per-example gradients).

``in_axes`` and ``out_axes`` as in JAX: an int (negative counts from the end),
``None`` (not batched), or a container per argument (``in_axes`` a tuple with
one entry per positional argument), each entry a prefix of that argument's
structure. Keyword arguments are batched along axis 0, as in JAX. The batch
size comes from the batched arguments; if they disagree, the error names them.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> vmap(lambda x, w: tnp.dot(x, w), in_axes=(0, None))(np.ones((3, 2)), np.array([1.0, 2.0]))
array([3., 3., 3.])
"""

from __future__ import annotations

import functools
import inspect
import numbers
import threading
from typing import Any, Callable

import numpy as np

from tidu import batch, optimize
from tidu.graph import Input
from primitives.tensor import numpy as api
from primitives.tensor.backends import NUMPY, as_array, device_of, library_of, operands
from primitives.tensor.core import Frontend, array_below, dtype_of, shape_of
from primitives.tensor.transforms.functional import (FunctionalError, GraphTrace, check_callable,
                                                     check_output, function_name, in_library_of,
                                                     is_differentiated, keepable, result_array)
from primitives.tensor.transforms.run import GraphRun
from primitives.tensor.numpy.manipulation import moveaxis
from primitives.tensor.transforms.pytree import (child_names, flatten_one_level, tree_flatten,
                                                 tree_unflatten)

__all__ = ["vmap"]


def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0,
         axis_size: int | None = None, axis_name: Any = None,
         spmd_axis_name: Any = None) -> Callable:
    """``f`` mapped over a batch axis of its arguments (``jax.vmap``'s semantics).

    ``in_axes``: an int, ``None``, or a tuple with one entry per positional
    argument (a list is taken as a tuple, as JAX does); each entry an int,
    ``None`` or a container matching a prefix of the argument's structure.
    ``out_axes`` likewise for the result. Negative axes count from the end.
    Keyword arguments are batched along axis 0. ``axis_size`` (as in JAX) gives the
    batch size: needed when no argument is batched, checked against them otherwise.
    ``axis_name`` and ``spmd_axis_name`` are taken so that JAX code runs; tidu has no
    collectives (``psum`` and the like) that would read them, so they change nothing.
    ``f`` runs once per call (Python
    control flow and what ``f`` closes over are read at each call); the batched
    program is made and compiled once per structure of that trace, so a later call of
    the same structure traces and runs (``jit`` takes the trace away too). Complex
    values follow tidu's convention in every transform composed with it.

    >>> import numpy as np
    >>> import primitives.tensor as tnp
    >>> xs = np.arange(6.0).reshape(2, 3)
    >>> vmap(tnp.sum, in_axes=1)(xs)                    # one sum per column
    array([3., 5., 7.])
    >>> vmap(lambda p: p["w"] * p["b"], in_axes=({"w": 0, "b": None},))(
    ...     {"w": np.array([1.0, 2.0]), "b": np.array(10.0)})
    array([10., 20.])
    """
    check_callable(f, "vmap")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not (in_axes is None or _is_axis(in_axes) or isinstance(in_axes, tuple)):
        raise FunctionalError(f"vmap of {function_name(f)}: in_axes must be an int, None or a "
                              f"tuple with one entry per positional argument, got {in_axes!r}")
    _check_spec(in_axes, f, "in_axes")
    _check_spec(out_axes, f, "out_axes")
    if axis_size is not None and (not _is_axis(axis_size) or axis_size < 0):
        raise FunctionalError(f"vmap of {function_name(f)}: axis_size must be None or a "
                              f"nonnegative int, got {axis_size!r}")

    @functools.wraps(f)
    def vmapped(*args, **kwargs):
        return _Call(f, in_axes, out_axes, args, kwargs, axis_size).result()

    return vmapped


def _is_axis(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_spec(spec, f, what: str) -> None:
    """Axis specs hold ints and ``None`` in pytree nodes (tuples, lists, dicts, registered
    types: a nesting that is a prefix of the arguments')."""
    if spec is None or _is_axis(spec):
        return
    node = flatten_one_level(spec)
    if node is None:
        raise FunctionalError(f"vmap of {function_name(f)}: {what} holds {spec!r} "
                              f"({type(spec).__name__}); it must be an int, None, or a tuple, "
                              "list, dict or registered pytree node of them")
    for child in node[1]:
        _check_spec(child, f, what)


def _node(tree):
    """A node's structure without its children (``None`` for a leaf), and its children with
    their path suffixes (pytree order)."""
    node = flatten_one_level(tree)
    if node is None:
        return None, None
    shell, children = node
    return shell, list(zip(child_names(shell, len(children)), children))


def _leaf_paths(tree, path: str, out: list) -> None:
    kind, children = _node(tree)
    if kind is None:
        out.append(path)
        return
    for suffix, child in children:
        _leaf_paths(child, path + suffix, out)


def _leaf_specs(spec, tree, path: str, out: list, f, what: str) -> None:
    """Append ``(path, axis)`` for each leaf of ``tree``, ``spec`` being a prefix of it."""
    if spec is None or _is_axis(spec):
        paths: list = []
        _leaf_paths(tree, path, paths)
        out.extend((p, spec) for p in paths)
        return
    kind, children = _node(tree)
    spec_kind, spec_children = _node(spec)
    same = kind is not None and kind == spec_kind and len(children) == len(spec_children)
    if not same:
        raise FunctionalError(
            f"vmap of {function_name(f)}: {what} {spec!r} for {path} does not match its "
            f"structure {tree_flatten(tree)[1]!r}; {what} must be a prefix of it (an int or "
            "None applies to everything below it)")
    for (suffix, child), (_, child_spec) in zip(children, spec_children):
        _leaf_specs(child_spec, child, path + suffix, out, f, what)


def _argument_names(f, count: int) -> list[str]:
    """``"argument x"`` for each positional argument, from ``f``'s signature where it can."""
    try:
        parameters = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    names = []
    for i in range(count):
        if i < len(parameters) and parameters[i].kind in (parameters[i].POSITIONAL_ONLY,
                                                          parameters[i].POSITIONAL_OR_KEYWORD):
            names.append(f"argument {parameters[i].name}")
        else:
            names.append(f"argument {i}")
    return names


def _data(value):
    """The array under a front-end value, to trace ``f`` at (never part of the result)."""
    return as_array(array_below(value))


def _describe(path: str, value) -> str:
    return f"{path} of type {dtype_of(value).name}{list(shape_of(value))}"


class _Call:
    """One call of a vmapped function: the arguments' batch axes, the trace, the result."""

    def __init__(self, f, in_axes, out_axes, args: tuple, kwargs: dict,
                 axis_size: int | None = None) -> None:
        self.f = f
        self.name = function_name(f)
        self.out_axes = out_axes
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise FunctionalError(
                f"vmap of {self.name}: in_axes has {len(in_axes)} entries ({in_axes!r}) but "
                f"{len(args)} positional arguments were given; give one entry per argument")
        per_arg = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        specs: list = []
        for name, spec, arg in zip(_argument_names(f, len(args)), per_arg, args):
            _leaf_specs(spec, arg, name, specs, f, "in_axes")
        for key in sorted(kwargs):      # the order tree_flatten gives a dict's leaves
            _leaf_specs(0, kwargs[key], f"keyword argument {key}", specs, f, "in_axes")
        self.leaves, self.structure = tree_flatten((list(args), kwargs))
        self.axes = [self._axis(path, axis, leaf) for (path, axis), leaf
                     in zip(specs, self.leaves)]
        self.axis_size = self._axis_size(specs, axis_size)

    def _axis(self, path: str, axis, leaf) -> int | None:
        if axis is None:
            return None
        if not isinstance(leaf, (Frontend, np.ndarray, np.generic, numbers.Number)) and \
                library_of(leaf) is NUMPY:
            raise FunctionalError(f"vmap of {self.name}: {path} is a {type(leaf).__name__}, "
                                  f"which cannot be batched along axis {axis}; pass arrays, or "
                                  "give it in_axes None")
        ndim = len(shape_of(leaf))
        if not -ndim <= axis < ndim:
            raise FunctionalError(
                f"vmap of {self.name} was asked to map {path} along axis {axis}, so its rank "
                f"should be at least {axis + 1 if axis >= 0 else -axis}, but it is {ndim} "
                f"(its shape is {tuple(shape_of(leaf))})")
        return axis % ndim

    def _axis_size(self, specs: list, given: int | None = None) -> int:
        sizes: dict[int, list[str]] = {}
        for (path, _), leaf, axis in zip(specs, self.leaves, self.axes):
            if axis is not None:
                sizes.setdefault(shape_of(leaf)[axis], []).append(
                    f"axis {axis} of {_describe(path, leaf)}")
        if given is not None:
            given = int(given)
            if sizes and set(sizes) != {given}:
                lines = "\n".join(f"  * size {size}: {', '.join(where)}"
                                  for size, where in sizes.items())
                raise FunctionalError(f"vmap of {self.name} got axis_size={given} but the "
                                      f"mapped axes have other sizes:\n{lines}")
            return given
        if not sizes:
            raise FunctionalError(f"vmap of {self.name}: no argument is batched (in_axes is "
                                  "None for every one, and there are no keyword arguments); "
                                  "at least one must have a batch axis, or pass axis_size")
        if len(sizes) > 1:
            lines = "\n".join(f"  * size {size}: {', '.join(where)}"
                              for size, where in sizes.items())
            raise FunctionalError(f"vmap of {self.name} got inconsistent sizes for the array "
                                  f"axes to be mapped:\n{lines}")
        return next(iter(sizes))

    def result(self):
        graph, trace, out_structure, leaf_inputs = self._trace()
        in_axes = {("arg", i): axis for i, axis in enumerate(self.axes) if axis is not None}
        batched, run = _batched_program(graph, in_axes, self.axis_size)
        values = {key: trace.values[key] for key in graph.input_keys
                  if key.key[0] == "constant"}    # what f closed over
        values.update((Input(("arg", i)), self.leaves[i]) for i in leaf_inputs
                      if self.axes[i] is None)
        for (key, _), input_key in zip(batched.inputs, batched.input_keys):
            values[input_key] = self.leaves[key[1]]
        outputs = self._run(run, values)
        specs: list = []
        _leaf_specs(self.out_axes, tree_unflatten(out_structure, outputs), "the output",
                    specs, self.f, "out_axes")
        results = [self._placed(out, axis, path, want) for out, axis, (path, want)
                   in zip(outputs, batched.out_axes, specs)]
        return tree_unflatten(out_structure, results)

    def _trace(self):
        """``f`` traced at example 0 (abstractly: the graph holds for every example)."""
        trace = GraphTrace(transform=f"vmap of {self.name}", abstract=True)
        inputs = list(self.leaves)
        leaf_inputs = []                # leaves that are inputs of the graph
        for i, (leaf, axis) in enumerate(zip(self.leaves, self.axes)):
            if axis is None and not isinstance(leaf, Frontend):
                continue                # passed to f as it is, as JAX passes unmapped values
            data = _data(leaf)
            if axis is not None:
                shape = shape_of(data)
                data = data[(slice(None),) * axis + (0,)] if self.axis_size else \
                    _stand_in(data, shape[:axis] + shape[axis + 1:])
            inputs[i] = trace.new_input(("arg", i), data, is_differentiated(leaf))
            leaf_inputs.append(i)
        args, kwargs = tree_unflatten(self.structure, inputs)
        try:
            with np.errstate(all="ignore"):     # the trace's values are thrown away
                out = self.f(*args, **kwargs)
            out_leaves, out_structure = tree_flatten(out)
            for position, value in enumerate(out_leaves):
                check_output(value, "vmap", self.f, position)
            outs = [trace.lift(o) for o in out_leaves]
        finally:
            trace.active = False
        return trace.build(outs), trace, out_structure, leaf_inputs

    def _run(self, run: GraphRun, values: dict) -> list:
        outs = run([values[k] for k in run.input_keys], held=values.values())
        return in_library_of(outs, self.leaves)

    def _placed(self, out, axis: int | None, path: str, want):
        """``out`` with its batch axis (``axis``, or none) where ``out_axes`` asks."""
        if want is None:
            if axis is not None:
                raise FunctionalError(
                    f"vmap of {self.name}: {path} depends on the batched arguments, but its "
                    "out_axes is None (only an output that is the same for every example can "
                    "be returned without a batch axis)")
            return result_array(out)
        ndim = len(shape_of(out)) + (axis is None)
        if not -ndim <= want < ndim:
            raise FunctionalError(f"vmap of {self.name}: out_axes {want} for {path}, which has "
                                  f"{ndim} axes with the batch axis")
        want %= ndim
        if axis is None:                # the same for every example: broadcast it
            shape = list(shape_of(out))
            shape.insert(want, self.axis_size)
            if isinstance(out, Frontend):
                return api.broadcast_to(api.expand_dims(out, want), tuple(shape))
            xp, (out,) = operands([result_array(out)])
            return xp.asarray(xp.broadcast_to(xp.expand_dims(out, axis=want), tuple(shape)),
                              copy=True)
        if axis == want:
            return result_array(out)
        if isinstance(out, Frontend):
            return moveaxis(out, axis, want)
        xp, (out,) = operands([out])
        return xp.moveaxis(out, axis, want)


def _stand_in(like, shape: tuple):
    """An example of ``shape`` to trace at when there are none (``axis_size`` 0): zeros with
    ones on the diagonal of the last two axes, as zeros are singular and ``solve``,
    ``cholesky``... of them raise for a batch that holds no matrix at all."""
    xp, dtype, device = library_of(like).xp, dtype_of(like), device_of(like)
    if len(shape) < 2:
        return xp.zeros(shape, dtype=dtype, device=device)
    eye = xp.eye(shape[-2], shape[-1], dtype=dtype, device=device)
    return xp.asarray(xp.broadcast_to(eye, shape), copy=True)


_PROGRAMS: dict = {}            # structure -> (batched, run, operations), oldest first
_PROGRAMS_MAX_OPS = 20_000      # traced operations of the kept programs, in all
_programs_lock = threading.Lock()
_kept_ops = [0]


def _batched_program(graph, in_axes: dict, axis_size: int) -> tuple:
    """``(batched, run)``: ``graph`` batched along ``in_axes`` (:func:`tidu.batch`) and its
    optimized program, made once per structure and kept (tidu's keys are structural: the
    output keys, the batch axes and the size name the program). Kept, the most recent up
    to 20,000 traced operations in all, only for a :func:`~.functional.keepable` graph."""
    key = (graph.output_keys, tuple(sorted(in_axes.items())), axis_size)
    found = _PROGRAMS.get(key)
    if found is not None:
        return found[0], found[1]
    batched = batch(graph, graph.output_keys, in_axes, axis_size)
    program = optimize([graph, batched.graph], batched.output_keys)
    run = GraphRun(batched.output_keys, list(program.input_keys))
    ops = len(graph.operation_keys)
    if ops <= _PROGRAMS_MAX_OPS and keepable(graph):
        with _programs_lock:
            old = _PROGRAMS.pop(key, None)
            if old is not None:
                _kept_ops[0] -= old[2]
            _PROGRAMS[key] = (batched, run, ops)
            _kept_ops[0] += ops
            while _kept_ops[0] > _PROGRAMS_MAX_OPS:
                _kept_ops[0] -= _PROGRAMS.pop(next(iter(_PROGRAMS)))[2]
    return batched, run
