"""Eager reverse mode: ``try_backward``.

``try_backward`` walks the trace from an output back to the leaves, last node
first (:func:`~tidu.eager.walk.reverse_walk`). As in seed 004, it linearizes
each node that receives a cotangent and has the executor run the transpose:
``execute_forward`` replays the primal values the transpose reads that the
node did not save, then ``run_transposed_linear`` maps the node's output
cotangents to its active inputs' cotangents; ``add_operands`` sums the
cotangents of a value read twice.

That is what happens when the executor overrides either hook
(:func:`~tidu.eager.overridden_hooks`), and what the default hooks
compute otherwise, faster: each node then runs its cached *fused plan*, one
backward graph doing the replay and the transpose, compiled once per plan by
``compile_graph`` (:mod:`tidu.eager.plans`).

>>> from tidu.eager import EagerInput, RecordedGraph, Recorder
>>> from tidu.example_ops import Op
>>> from tidu.graph import Input, compiled
>>> class Executor(BackwardExecutor):
...     def execute_forward(self, graph, data):
...         return dict(zip(graph.output_keys, compiled(graph).run(data)))
...     def add_operands(self, a, b):
...         return a + b
>>> class Tracing(Executor):
...     def run_transposed_linear(self, linear, cotangents, external_data, ctx):
...         print("run_transposed_linear", cotangents)
...         return super().run_transposed_linear(linear, cotangents, external_data, ctx)
>>> recorder = Recorder()
>>> x = EagerInput(Input(recorder.fresh_input_keys(1)[0]), None, True, 3.0)
>>> node = recorder.record(RecordedGraph.from_primitive(Op.MUL, ["a", "b"]), [x, x], [9.0])
>>> try_backward(node.output_key, node, 1.0, Tracing())[x.key]
run_transposed_linear [1.0]
6.0
"""

from __future__ import annotations

from typing import Any, Callable, Container, Mapping

from tidu.graph import ValueKey
from tidu.eager.executor import BackwardExecutor
from tidu.eager.walk import NodeRunner, NodeStep, check_start, kept, nodes_last_first, \
    only_zero_keys, walk


class _Backward(NodeStep):
    """``try_backward``'s step: cotangents are the runtime's values."""

    def __init__(self, executor: BackwardExecutor, ctx) -> None:
        super().__init__(ctx)
        self.runner = NodeRunner(executor)
        self.run = self.runner.run
        self.add = executor.add_operands


def try_backward(output_key: ValueKey, output_trace, seed, executor: BackwardExecutor,
                 ctx=None, *, keep: Container | None = None, zeros: set | None = None,
                 hooks: Mapping[ValueKey, Callable] | None = None) -> dict[ValueKey, Any]:
    """Propagate ``seed`` (the cotangent of ``output_key``) back through the trace.

    Returns the accumulated cotangent of every eager value key that received
    one (leaves and intermediates; inputs with ``requires_grad=False`` get
    none). With ``keep`` (a container of keys, e.g. the leaves), only the keys
    in it are returned, and every other cotangent is released right after its
    last use, so backward holds little more than the forward's saved values. An
    output with no trace gets just the seed back. The trace is not changed, so
    calling this twice gives the same result. Plans are cached per ``ctx`` value,
    since rules may read it. With ``zeros`` (a set), the keys the walk reached
    whose cotangent is zero, and so that are not in the result, are added to it
    (only those in ``keep``, if given): a leaf reached only through ``sign`` has
    a zero gradient, not none, as a frontend may want to tell apart from a leaf
    the output does not depend on.

    With ``hooks`` (a mapping from keys to callables; PyTorch's ``register_hook``),
    ``hooks[key](cotangent)`` is called once for each key in it that the walk reaches,
    when that key's cotangent is complete (summed over every use), before it flows on to
    the node that made the key; for a leaf, after the walk, and only if it is in
    ``keep`` (when given). A key reached with a zero cotangent (only through ``sign``,
    say) passes ``None``. The hook returns the cotangent to use instead (in the result,
    and what flows on to the inputs of the node that made the key), or ``None`` to keep
    it. Without ``hooks`` the walk is the same loop as before, at the same cost
    (:func:`~tidu.eager.walk.hooked_walk`).

    ``executor.run_transposed_linear`` is called once per node that receives a
    cotangent, after ``execute_forward`` wherever the node's primal values must
    be replayed, when the executor overrides either hook; otherwise every node
    runs its fused plan (see the module). A missing rule raises
    :class:`tidu.ADRuleError`.

    Checked first, at O(1) cost: ``output_key`` is a ``ValueKey`` output by
    ``output_trace``, ``executor`` a :class:`BackwardExecutor`, ``seed`` not
    ``None``; then ``executor.check_seed(seed, output_data)`` checks what only the
    runtime knows (shape, dtype). Misuse raises a :class:`tidu.TiduError`.
    See the module for an example.
    """
    check_start("try_backward", output_key, output_trace, seed, executor, keep)
    cotangents: dict[ValueKey, Any] = {output_key: seed}
    nodes, step = (), None
    if output_trace is not None:
        nodes = nodes_last_first(output_trace)
        step = _Backward(executor, ctx)
        step.runner.walk_nodes(nodes)
    walk(nodes, cotangents, step, keep, zeros, hooks)
    result = kept(cotangents, keep)
    only_zero_keys(zeros, result, keep)
    return result
