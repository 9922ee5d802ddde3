"""Operation-agnostic graph storage: structural value keys, builders, evaluation.

>>> from tidu.graph import GraphBuilder, Input
>>> b = GraphBuilder()
>>> b.global_key(b.add_input("x")) is Input("x")
True
"""

from tidu.graph.builder import Graph, GraphBuilder, OperationNode, ValueNode
from tidu.graph.evaluate import evaluate
from tidu.graph.export import to_networkx
from tidu.graph.format import format_graph, key_label, value_name
from tidu.graph.builder import operation_counts
from tidu.graph.keys import (
    PRIMARY,
    Derived,
    FreshInput,
    Input,
    Linearized,
    OperationKey,
    OperationRole,
    ValueKey,
    key_inputs,
)
from tidu.graph.operation import EvaluableGraphOperation, GraphOperation, op_name, short_repr
from tidu.graph.walk import postorder
from tidu.graph.program import Program, checked_eval_results, compiled, schedule
from tidu.graph.refs import External, Local
from tidu.graph.resolve import ResolvedView, ValueDefinition, resolve

__all__ = [
    "GraphOperation", "EvaluableGraphOperation", "op_name", "short_repr", "operation_counts",
    "checked_eval_results", "key_inputs", "postorder", "key_label", "value_name",
    "ValueKey", "Input", "FreshInput", "Derived", "OperationKey",
    "OperationRole", "PRIMARY", "Linearized",
    "Local", "External",
    "GraphBuilder", "Graph", "ValueNode", "OperationNode",
    "resolve", "ResolvedView", "ValueDefinition",
    "evaluate", "to_networkx", "format_graph", "Program", "compiled", "schedule",
]
