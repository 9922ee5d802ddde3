"""The ops behind ``custom_jvp`` and ``custom_vjp``: a user's function and rules as primitives.

A call of a custom function on tensors or traced values is recorded as one op
that holds a *rule*: the user's function and its rules for one argument
signature (made by :mod:`primitives.tensor.custom`). The op's ``eval`` runs
the user's function on arrays (of its inputs' library), so it may call any code
for them: NumPy, SciPy, PyTorch... Its derivative rules do not look inside that
function: they emit the user's rule, traced once into a graph of tensor ops,
into the transform's builder (:func:`emit_graph`). As those ops are ordinary
primitives, the emitted work can be differentiated again.

- :class:`CustomJVPCall` (``custom_jvp``): its JVP rule emits the traced
  ``jvp_fn``; reverse mode transposes that tangent work as usual.
- :class:`CustomVJPCall` (``custom_vjp``): ``eval`` runs ``fwd``, whose residuals
  are extra outputs the user never sees. Its JVP rule applies
  :class:`CustomVJPLinear`, a linear op on the tangents whose transpose emits the
  traced ``bwd``. It has no forward evaluation: forward mode of a ``custom_vjp``
  function raises, as in JAX.

``rule`` fields are compared by identity, so each signature of each custom
function is one op and the transforms' per-op caches are reused across calls.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from tidu import ADRuleError, ADRuleKind
from tidu.graph import PRIMARY, External, Graph, Linearized, Local
from primitives.tensor.backends import NUMPY, as_array, device_of, library_of, operands
from primitives.tensor.core import dtype_of, shape_of
from primitives.tensor.ops.base import TensorPrimitive, emit, tensor_op
from primitives.tensor.ops.select import zeros


class HeldConstant(TensorPrimitive):
    """A nullary op returning one array, held as it is (for constants of a traced rule that
    :func:`~primitives.tensor.ops.simplify.constant_op` would not store), in its own library.
    Equal by identity."""

    __slots__ = ("value",)
    name = "held_constant"

    def __init__(self, value) -> None:
        library = library_of(value)
        if library is NUMPY:
            value = np.array(value)         # a copy of its own, read-only: no one writes into it
            value.flags.writeable = False
        else:
            value = library.copy(value)     # a copy of its own
        self.value = value

    def input_count(self) -> int:
        return 0

    def eval(self, ctx, inputs):
        return [self.value]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [None]

    def params(self) -> str:
        return f"shape={shape_of(self.value)}, dtype={dtype_of(self.value)}"


def constant(builder, value) -> Local:
    """Emit ``value`` as a constant (primal work); return its reference."""
    from primitives.tensor.ops.simplify import constant_op

    array = as_array(value)
    op = constant_op(array) or HeldConstant(array)
    return Local(emit(builder, op, []))


def emit_graph(builder, graph: Graph, refs: Sequence, linear: Sequence[bool],
               outputs: Sequence[int]) -> list[int | None]:
    """Emit the operations of a traced ``graph`` that its values ``outputs`` (local ids) need.

    ``refs`` gives one reference (``Local`` or ``External``) per graph input, in
    order; ``linear[i]`` says whether input ``i`` is a tangent (or cotangent).
    An operation that reads linear work is emitted as ``Linearized`` with that
    mask, any other as ``PRIMARY`` work. Returns, per output, the id of the
    emitted value, or ``None`` where it depends on no linear input.
    """
    env: dict[int, tuple] = {}               # graph id -> (reference, is linear)
    for local_id, ref, is_linear in zip(graph.inputs, refs, linear):
        env[local_id] = (ref, is_linear)
    operations = graph.operations
    needed = set(outputs)
    wanted = []
    for node in reversed(operations):        # only the work the outputs need
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
    results = []
    for graph_id in outputs:
        ref, is_linear = env[graph_id]
        results.append(ref.id if is_linear else None)
    return results


def zero_or(builder, tangent: int | None, shape, dtype) -> tuple:
    """``(reference, is linear)`` for a tangent id, or zeros of ``shape`` for ``None``."""
    if tangent is None:
        return Local(zeros(builder, shape, dtype)), False
    return Local(tangent), True


@tensor_op
class CustomJVPCall(TensorPrimitive):
    """A call of a ``custom_jvp`` function: ``eval`` runs it, the JVP rule emits ``jvp_fn``'s
    traced graph (whose primal part reading this op's inputs is this op itself)."""

    rule: Any
    name = "custom_jvp"

    def input_count(self) -> int:
        return len(self.rule.in_avals)

    def output_count(self) -> int:
        return len(self.rule.out_avals)

    def eval(self, ctx, inputs):
        return self.rule.run(inputs)

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return self.rule.emit_jvp(builder, primal_inputs, tangent_inputs)

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        return BatchLoop.emit(builder, self, self.rule.out_avals, inputs, axes, role, axis_size)

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        raise self.rule.transpose_error()      # reached when a JVP rule applies it to a tangent

    def params(self) -> str:
        return self.rule.name


@tensor_op
class CustomVJPCall(TensorPrimitive):
    """A call of a ``custom_vjp`` function: ``eval`` runs ``fwd``; its outputs are the
    function's, then the residuals. The tangent of the outputs is :class:`CustomVJPLinear`
    of the input tangents and the residuals."""

    rule: Any
    name = "custom_vjp"

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
        refs += [External(key) for key in residuals]
        mask += [False] * len(residuals)
        return builder.add_primitive(CustomVJPLinear(self.rule), refs, Linearized(tuple(mask)))

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        avals = list(self.rule.out_avals) + list(self.rule.res_avals)
        return BatchLoop.emit(builder, self, avals, inputs, axes, role, axis_size)

    def params(self) -> str:
        return self.rule.name


@tensor_op
class CustomVJPLinear(TensorPrimitive):
    """The tangent of a ``custom_vjp`` call: linear in its first inputs (the input tangents),
    read with the residuals. Only its transpose exists (it emits the traced ``bwd``).

    Its outputs are the tangents of the call's outputs, then of its residuals:
    those exist only so a residual's tangent is never a silent zero (using one raises).
    """

    rule: Any
    name = "custom_vjp_linear"

    def input_count(self) -> int:
        return len(self.rule.in_avals) + len(self.rule.res_avals)

    def output_count(self) -> int:
        return len(self.rule.out_avals) + len(self.rule.res_avals)

    def eval(self, ctx, inputs):
        raise self.rule.forward_mode_error()

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        raise self.rule.forward_mode_error()

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        return self.rule.emit_bwd(builder, cotangent_outputs, inputs, role.active_mask)

    def params(self) -> str:
        return self.rule.name


@tensor_op
class BatchLoop(TensorPrimitive):
    """``op`` on a batch of ``axis_size`` examples, one at a time: the batch rule of ops
    that run opaque user code. Input ``i`` has its batch axis at ``in_axes[i]`` (``None``:
    shared by every example); each output of ``op``, of shape and dtype ``out_avals[j]``
    per example, is stacked along a new axis 0.

    It has no derivative rules: differentiate inside ``vmap``, not outside.

    >>> from primitives.tensor.ops.elementwise import sin
    >>> loop = BatchLoop(sin, (1,), 3, (((2,), "float64"),))
    >>> loop.eval(None, [np.zeros((2, 3))])[0].shape
    (3, 2)
    """

    op: Any
    in_axes: tuple
    axis_size: int
    out_avals: tuple
    name = "batch_loop"

    @classmethod
    def emit(cls, builder, op, out_avals, inputs, axes, role, axis_size) -> tuple[list, list]:
        """Emit ``op`` batched by a loop; a batch rule's result (every output at axis 0)."""
        avals = tuple((tuple(shape), np.dtype(dtype).name) for shape, dtype in out_avals)
        ids = builder.add_primitive(cls(op, tuple(axes), axis_size, avals), inputs, role)
        return ids, [0] * len(ids)

    def input_count(self) -> int:
        return self.op.input_count()

    def output_count(self) -> int:
        return self.op.output_count()

    def eval(self, ctx, inputs):
        xp, inputs = operands(inputs, self)
        if xp is NUMPY.xp:
            stacked = [np.empty((self.axis_size,) + shape, dtype)
                       for shape, dtype in self.out_avals]
            for k in range(self.axis_size):
                example = [x if axis is None else np.take(x, k, axis=axis)
                           for x, axis in zip(inputs, self.in_axes)]
                for out, value in zip(stacked, self.op.eval(ctx, example)):
                    out[k] = value
            return stacked
        if self.axis_size == 0:
            like = next(x for x in inputs if library_of(x) is not NUMPY)
            return [xp.zeros((0,) + shape, dtype=dtype, device=device_of(like))
                    for shape, dtype in self.out_avals]
        # other libraries: the examples' results stacked (Dask arrays cannot be written into)
        results = []
        for k in range(self.axis_size):
            example = [x if axis is None else x[(slice(None),) * axis + (k,)]
                       for x, axis in zip(inputs, self.in_axes)]
            results.append(self.op.eval(ctx, example))
        stacked = []
        for j in range(len(self.out_avals)):
            xp_j, values = operands([as_array(r[j]) for r in results], self)
            stacked.append(xp_j.stack(values))
        return stacked

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        raise ADRuleError(repr(self), ADRuleKind.JVP, f"{self.op!r} runs opaque code, batched "
                          "by a loop without derivative rules: differentiate inside vmap "
                          "(vmap(grad(f))), not outside (grad(vmap(f)))")

    def batch_rule(self, builder, inputs, axes, role, axis_size, ctx):
        avals = tuple(((self.axis_size,) + shape, dtype) for shape, dtype in self.out_avals)
        return BatchLoop.emit(builder, self, avals, inputs, axes, role, axis_size)

    def params(self) -> str:
        return f"{self.op!r}, in_axes={self.in_axes}, axis_size={self.axis_size}"
