"""``linearize``: from a graph to the linear graph of its JVP.

Walk what the outputs depend on, dependencies first; at every operation with a
non-zero input tangent call its JVP rule, which emits the tangent work into the
linear graph; zeros (``None``) cost nothing. Structural rules are called once per
pattern of zeros and replayed after that (:mod:`tidu.rules.replay`).

>>> from tidu.graph import Input
>>> from tidu.example_ops import trace
>>> graph = trace(lambda x: x * x, ["x"])
>>> lin = linearize(graph, graph.output_keys, ["x"])
>>> from tidu.graph import evaluate
>>> [tx_key] = lin.tangent_input_keys
>>> evaluate([graph, lin.graph], lin.tangent_output_keys, {Input("x"): 3.0, tx_key: 1.0})
[6.0]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Hashable, Sequence

from tidu._gc import gc_paused
from tidu.errors import InvalidArgumentError, UnknownValueError, sequence_argument
from tidu.graph import Derived, Input, ResolvedView, ValueKey, resolve
from tidu.graph import postorder
from tidu.linearized import LinearizedGraph
from tidu.rules import GraphPrimitiveBuilder, RuleRunner, fresh_pass_id, tangent_key


def linearize(
    graphs,
    outputs: Sequence[ValueKey],
    wrt: Sequence[Hashable],
    pass_id: int | None = None,
    ctx: Any = None,
    aliases: Mapping[Hashable, ValueKey] | None = None,
) -> LinearizedGraph:
    """The linear graph mapping tangents of the ``wrt`` inputs to tangents of ``outputs``.

    ``graphs`` is a ``Graph``, graphs, or a ``ResolvedView``. ``outputs`` and
    ``wrt`` are sequences (any iterable is read once; one key goes in a list:
    ``wrt=["x"]``). Each ``wrt`` input key gets a tangent input keyed
    ``tangent_key(key, pass_id)``; ``pass_id=None`` picks a fresh one. ``aliases``
    maps an input key to a value key whose tangent that input shares. ``ctx`` is
    passed to every rule.
    """
    view = _resolved(graphs, "linearize")
    outputs = sequence_argument(outputs, "linearize", "outputs")
    wrt = sequence_argument(wrt, "linearize", "wrt")
    if aliases is not None and not isinstance(aliases, Mapping):
        raise InvalidArgumentError(f"linearize: aliases must be a mapping from input keys to "
                                   f"value keys, got {type(aliases).__name__}")
    with gc_paused():
        return _linearize(view, outputs, wrt, pass_id, ctx, aliases)


def _resolved(graphs, function: str) -> ResolvedView:
    """``resolve(graphs)``, with a misuse error that names ``function``."""
    try:
        return resolve(graphs)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"{function}: {error}") from None


def _linearize(view, outputs: list, wrt: list, pass_id, ctx, aliases) -> LinearizedGraph:
    if pass_id is None:
        pass_id = fresh_pass_id()
    aliases = dict(aliases or {})
    # Outputs and inputs are checked against the graphs' own lists first: asking the view
    # about any other key makes each graph's key -> local id index, a dict and an int per value
    inputs = {key for graph in view.graphs for key in graph.input_keys}
    named = inputs.union(*[graph.output_keys for graph in view.graphs])
    for key in outputs:
        if not isinstance(key, ValueKey) or (key not in named and key not in view):
            raise UnknownValueError(f"linearize output {key!r} is not a value of the graphs given")

    builder = GraphPrimitiveBuilder()
    for graph in view.graphs:
        builder.add_parent(graph)

    tangents: dict[ValueKey, int] = {}       # value key -> tangent id; absent means zero
    tangent_inputs = []
    for key in wrt:
        value_key = Input(key)
        if value_key not in inputs:          # (every Input key of a graph is its input)
            raise UnknownValueError(f"linearize wrt {key!r}: no graph given has this input")
        tangent_id = builder.add_input(tangent_key(key, pass_id))
        tangents[value_key] = tangent_id
        tangent_inputs.append((key, tangent_id))
    alias_keys = {}
    for key, target in aliases.items():
        if not isinstance(target, ValueKey):
            raise UnknownValueError(f"alias of {key!r} is {target!r}, not a ValueKey")
        value_key = Input(key)
        if value_key not in tangents:          # a wrt tangent takes precedence
            alias_keys[value_key] = target

    def dependencies(key):
        if type(key) is Derived:
            return key._operation._inputs
        target = alias_keys.get(key)
        return (target,) if target is not None else ()

    jvp = RuleRunner(builder, ctx).jvp
    tangent_of = tangents.get
    visited_ops = set()                        # ops with several outputs are met once per output
    for key in postorder(outputs, dependencies):
        if type(key) is not Derived:
            target = alias_keys.get(key)
            if target is not None and key not in tangents and target in tangents:
                tangents[key] = tangents[target]
            continue
        op_key = key._operation
        tangent_in = list(map(tangent_of, op_key._inputs))
        if tangent_in.count(None) == len(tangent_in):
            continue
        if op_key._n_out == 1:
            [tangent] = jvp(op_key._operation, op_key._inputs, [key], tangent_in)
            if tangent is not None:
                tangents[key] = tangent
            continue
        if op_key in visited_ops:
            continue
        visited_ops.add(op_key)
        primal_outputs = list(op_key.output_keys())
        tangent_out = jvp(op_key._operation, op_key._inputs, primal_outputs, tangent_in)
        for out_key, tangent in zip(primal_outputs, tangent_out):
            if tangent is not None:
                tangents[out_key] = tangent

    tangent_outputs = [tangents.get(key) for key in outputs]
    builder.set_outputs([t for t in tangent_outputs if t is not None])
    return LinearizedGraph(builder.build(), tangent_inputs, tangent_outputs, pass_id)
