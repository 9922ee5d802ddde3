"""The ops behind ``custom_jvp`` and ``custom_vjp``: a user's function and rules as primitives.

A call of a custom function on tensors or traced values is recorded as one op
that holds a *rule*: the user's function and its rules for one argument
signature (made by :mod:`primitives.tensor.transforms.custom`). The op's ``eval`` runs
the user's function on arrays (of its inputs' library), so it may call any code
for them: NumPy, SciPy, PyTorch... Its derivative rules do not look inside that
function: they emit the user's rule, traced into a :class:`RuleGraph` of tensor
ops (when a derivative is first needed), into the transform's builder. As those
ops are ordinary primitives, the emitted work can be differentiated again.

- :class:`CustomJVPCall` (``custom_jvp``): its JVP rule emits the traced
  ``jvp_fn``; reverse mode transposes that tangent work as usual.
- :class:`CustomVJPCall` (``custom_vjp``): ``eval`` runs ``fwd``, whose residuals
  are extra outputs the user never sees. Its JVP rule applies
  :class:`CustomVJPLinear`, a linear op on the tangents whose transpose emits the
  traced ``bwd``. It has no forward evaluation: forward mode of a ``custom_vjp``
  function raises, as in JAX.

Batching (``vmap``) a call gives the same kind of op over a *batched rule*: its
``eval`` runs the function once per example (the function is opaque code, which
may not batch), while its derivative rules emit the user's traced rule batched
by :func:`tidu.batch` (:meth:`RuleGraph.batched`), so that differentiating the
batched call does batched work and composes with every other transform.

``rule`` fields are compared by identity, so each signature of each custom
function is one op and the transforms' per-op caches are reused across calls.

It imports :mod:`.base`, :mod:`.shape` and :mod:`.constants`, of
:mod:`primitives.tensor.ops`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from tidu import batch, optimize
from tidu.graph import PRIMARY, External, Graph, Input, Linearized, Local
from tidu.rules import GraphPrimitiveBuilder
from primitives.tensor.backends import NUMPY, as_array, device_of, library_of, operands
from primitives.tensor.ops.base import TensorPrimitive, emit, tensor_op
from primitives.tensor.ops.constants import constant, zeros
from primitives.tensor.ops.shape import BroadcastAxis, MoveAxis, SumAxis


def _emit_operations(builder, graph: Graph, refs: Sequence, linear: Sequence[bool],
                     outputs: Sequence[int]) -> list[tuple]:
    """Emit what ``graph``'s values ``outputs`` need; ``(reference, is linear)`` per output.

    An operation that reads linear work is emitted as ``Linearized`` with that
    mask, any other as ``PRIMARY`` work.
    """
    env: dict[int, tuple] = {}               # graph id -> (reference, is linear)
    for local_id, ref, is_linear in zip(graph.inputs, refs, linear):
        env[local_id] = (ref, is_linear)
    needed = set(outputs)
    wanted = []
    for node in reversed(graph.operations):  # only the work the outputs need
        if needed.intersection(node.outputs):
            needed.update(ref.id for ref in node.inputs)
            wanted.append(node)
    for node in reversed(wanted):
        inputs = [env[ref.id] for ref in node.inputs]
        mask = tuple(is_linear for _, is_linear in inputs)
        role = Linearized(mask) if any(mask) else PRIMARY
        ids = builder.add_primitive(node.operation, [ref for ref, _ in inputs], role)
        for graph_id, new_id in zip(node.outputs, ids):
            env[graph_id] = (Local(new_id), any(mask))
    return [env[graph_id] for graph_id in outputs]


def emit_graph(builder, graph: Graph, refs: Sequence, linear: Sequence[bool],
               outputs: Sequence[int]) -> list[int | None]:
    """Emit the operations of a traced ``graph`` that its values ``outputs`` (local ids) need.

    ``refs`` gives one reference (``Local`` or ``External``) per graph input, in
    order; ``linear[i]`` says whether input ``i`` is a tangent (or cotangent).
    An operation that reads linear work is emitted as ``Linearized`` with that
    mask, any other as ``PRIMARY`` work. Returns, per output, the id of the
    emitted value, or ``None`` where it depends on no linear input.
    """
    return [ref.id if is_linear else None
            for ref, is_linear in _emit_operations(builder, graph, refs, linear, outputs)]


@dataclass(frozen=True, eq=False)
class RuleGraph:
    """A user's rule traced into a graph of tensor ops, ready to emit into a transform.

    ``graph``'s first ``n_args`` inputs are the rule's arguments (primals and
    tangents of a JVP rule; residuals and cotangents of a ``bwd``); its other
    inputs are constants the rule closed over, whose values are ``constants``.
    ``outputs`` are the local ids of what the rule gives (tangents, cotangents).
    """

    graph: Graph
    n_args: int
    constants: tuple
    outputs: tuple

    def emit(self, builder, refs: Sequence, linear: Sequence[bool]) -> list[int | None]:
        """Emit the rule on arguments ``refs`` (``linear[i]``: argument ``i`` is a tangent or
        cotangent); per output, its id, or ``None`` where it depends on no linear argument."""
        refs = list(refs) + [constant(builder, value) for value in self.constants]
        linear = list(linear) + [False] * len(self.constants)
        return emit_graph(builder, self.graph, refs, linear, self.outputs)

    def batched(self, arg_axes: Sequence, axis_size: int, out_axes: Sequence) -> "RuleGraph":
        """The rule on a batch of ``axis_size`` examples, as a rule graph of the same layout.

        Argument ``i`` of the new rule has its batch axis at ``arg_axes[i]``
        (``None``: shared by every example; constants are shared). Output ``j``
        gets its batch axis at ``out_axes[j]``; ``None`` there means the sum over
        the batch (the cotangent of an argument every example shares).

        >>> from primitives.tensor.ops.elementwise import mul
        >>> builder = GraphPrimitiveBuilder()
        >>> x, t = builder.add_input("x"), builder.add_input("t")
        >>> builder.set_outputs(builder.add_primitive(mul, [Local(x), Local(t)]))
        >>> rule = RuleGraph(builder.build(), 2, (), (2,))
        >>> shared = rule.batched([0, None], 3, [None])     # sum over the batch of x * t
        >>> from tidu.graph import evaluate
        >>> g = shared.graph
        >>> evaluate(g, g.output_keys, {g.input_keys[0]: np.arange(3.0), g.input_keys[1]: 2.0})
        [array(6.)]
        """
        graph = self.graph
        keys = graph.input_keys
        in_axes = {keys[i].key: axis for i, axis in enumerate(arg_axes) if axis is not None}
        outputs = [graph.value_keys[i] for i in self.outputs]
        batched = batch(graph, outputs, in_axes, axis_size)
        # one self-contained graph (the unbatched work is read from the original otherwise)
        program = optimize([graph, batched.graph], batched.output_keys)
        # ... rebuilt with this rule's inputs, in order, and each output's batch axis placed
        builder = GraphPrimitiveBuilder()
        local = {key: builder.add_input(key.key) for key in keys}
        for (key, _), batched_key in zip(batched.inputs, batched.input_keys):
            local[batched_key] = local[Input(key)]
        refs = [Local(local[key]) for key in program.input_keys]
        emitted = _emit_operations(builder, program, refs, [False] * len(refs), program.outputs)
        placed = [_place(builder, ref, axis, want, axis_size)
                  for (ref, _), axis, want in zip(emitted, batched.out_axes, out_axes)]
        builder.set_outputs(placed)
        new_graph = builder.build()
        return RuleGraph(new_graph, self.n_args, self.constants, tuple(new_graph.outputs))


def _place(builder, ref, axis: int | None, want: int | None, axis_size: int) -> int:
    """A batched value's id with its batch axis moved from ``axis`` (``None``: the same for
    every example) to ``want``, or summed over the batch where ``want`` is ``None``."""
    if axis is None:
        ref, axis = Local(emit(builder, BroadcastAxis(0, axis_size), [ref])), 0
    if want is None:
        return emit(builder, SumAxis(axis, axis_size), [ref])
    if axis != want:
        return emit(builder, MoveAxis(axis, want), [ref])
    return ref.id


def zero_or(builder, tangent: int | None, shape, dtype) -> tuple:
    """``(reference, is linear)`` for a tangent id, or zeros of ``shape`` for ``None``."""
    if tangent is None:
        return Local(zeros(builder, shape, dtype)), False
    return Local(tangent), True


def run_per_example(run: Callable, inputs: list, in_axes: Sequence, axis_size: int,
                    out_avals: Sequence, op) -> list:
    """``run`` (one example's inputs to its outputs) on a batch of ``axis_size`` examples,
    one at a time: input ``i`` has its batch axis at ``in_axes[i]`` (``None``: shared);
    each output, of shape and dtype ``out_avals[j]`` per example, is stacked along a new
    axis 0. ``op`` names the work in errors.

    >>> run_per_example(lambda xs: [xs[0] * xs[1]], [np.arange(6.0).reshape(2, 3), 10.0],
    ...                 (1, None), 3, [((2,), np.dtype(float))], "example")
    [array([[ 0., 30.],
           [10., 40.],
           [20., 50.]])]
    """
    xp, inputs = operands(inputs, op)
    if xp is NUMPY.xp:
        stacked = [np.empty((axis_size,) + tuple(shape), dtype) for shape, dtype in out_avals]
        for k in range(axis_size):
            example = [x if axis is None else np.take(x, k, axis=axis)
                       for x, axis in zip(inputs, in_axes)]
            for out, value in zip(stacked, run(example)):
                out[k] = value
        return stacked
    like = next(x for x in inputs if library_of(x) is not NUMPY)
    if axis_size == 0:
        return [xp.zeros((0,) + tuple(shape), dtype=dtype, device=device_of(like))
                for shape, dtype in out_avals]
    # other libraries: the examples' results stacked (Dask arrays cannot be written into)
    results = []
    for k in range(axis_size):
        example = [x if axis is None else x[(slice(None),) * axis + (k,)]
                   for x, axis in zip(inputs, in_axes)]
        results.append(run(example))
    stacked = []
    for j in range(len(out_avals)):
        xp_j, values = operands([as_array(r[j]) for r in results], op)
        stacked.append(xp_j.stack(values))
    return stacked


@tensor_op
class CustomJVPCall(TensorPrimitive):
    """A call of a ``custom_jvp`` function: ``eval`` runs it, the JVP rule emits ``jvp_fn``'s
    traced graph (whose primal part reading this op's inputs is this op itself). Batched,
    it is the same op over the batched rule."""

    rule: Any
    name = "custom_jvp"
    rules_read_fields_only = False      # the user's rules: see TensorPrimitive

    def input_count(self) -> int:
        return len(self.rule.in_avals)

    def output_count(self) -> int:
        return len(self.rule.out_avals)

    def eval(self, ctx, inputs):
        return self.rule.run(inputs)

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return self.rule.emit_jvp(builder, primal_inputs, tangent_inputs)

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        op = self.rule.batched(tuple(axes), axis_size).op
        return builder.add_primitive(op, inputs, role), [0] * self.output_count()

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        raise self.rule.transpose_error()      # reached when a JVP rule applies it to a tangent

    def params(self) -> str:
        return self.rule.label


@tensor_op
class CustomVJPCall(TensorPrimitive):
    """A call of a ``custom_vjp`` function: ``eval`` runs ``fwd``; its outputs are the
    function's, then the residuals. The tangent of the outputs is :class:`CustomVJPLinear`
    of the input tangents and the residuals. Batched, it is the same op over the batched
    rule (outputs and residuals batched along axis 0)."""

    rule: Any
    name = "custom_vjp"
    rules_read_fields_only = False      # the user's rules: see TensorPrimitive

    def input_count(self) -> int:
        return len(self.rule.in_avals)

    def output_count(self) -> int:
        return len(self.rule.out_avals) + len(self.rule.res_avals)

    def eval(self, ctx, inputs):
        return self.rule.run(inputs)

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        refs, mask = [], []
        for tangent, (shape, dtype) in zip(tangent_inputs, self.rule.in_avals):
            ref, is_linear = zero_or(builder, tangent, shape, dtype)
            refs.append(ref)
            mask.append(is_linear)
        residuals = primal_outputs[len(self.rule.out_avals):]
        refs += [External(key) for key in list(residuals) + list(primal_inputs)]
        mask += [False] * (len(residuals) + len(primal_inputs))
        return builder.add_primitive(CustomVJPLinear(self.rule), refs, Linearized(tuple(mask)))

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        op = self.rule.batched(tuple(axes), axis_size).op
        return builder.add_primitive(op, inputs, role), [0] * self.output_count()

    def params(self) -> str:
        return self.rule.label


@tensor_op
class CustomVJPLinear(TensorPrimitive):
    """The tangent of a ``custom_vjp`` call: linear in its first inputs (the input tangents),
    read with the residuals and the call's inputs. Only its transpose exists.

    Its outputs are the tangents of the call's outputs, then of its residuals. The
    transpose emits the traced ``bwd`` for the outputs' cotangents, and reverse mode
    through ``fwd``'s code for the residuals' (when something differentiates the
    residuals again, e.g. ``grad`` of ``vmap(grad(f))``).
    """

    rule: Any
    name = "custom_vjp_linear"
    rules_read_fields_only = False      # the user's rules: see TensorPrimitive

    def input_count(self) -> int:
        return 2 * len(self.rule.in_avals) + len(self.rule.res_avals)

    def output_count(self) -> int:
        return len(self.rule.out_avals) + len(self.rule.res_avals)

    def eval(self, ctx, inputs):
        raise self.rule.forward_mode_error()

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        raise self.rule.forward_mode_error()

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        raise self.rule.forward_mode_error()   # batched forward mode (jacfwd's basis)

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return self.rule.emit_bwd(builder, cotangent_outputs, inputs, role.active_mask)

    def params(self) -> str:
        return self.rule.label
