"""The rule contract: ``Primitive``, ``PrimitiveBuilder`` and helpers for rule authors."""

from tidu.rules.builder import GraphPrimitiveBuilder, PrimitiveBuilder, PrimitiveValue
from tidu.rules.helpers import sum_tangent_terms
from tidu.rules.keys import CotangentSeed, TangentKey, fresh_pass_id, tangent_key
from tidu.rules.primitive import Primitive
from tidu.rules.replay import RuleRunner

__all__ = [
    "Primitive", "PrimitiveBuilder", "PrimitiveValue", "GraphPrimitiveBuilder",
    "sum_tangent_terms", "TangentKey", "CotangentSeed", "tangent_key", "fresh_pass_id",
    "RuleRunner",
]
