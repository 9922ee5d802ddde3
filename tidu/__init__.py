"""tidu: automatic differentiation of primitive computation graphs.

Downstream primitive sets implement :class:`Primitive` (JVP and transpose
rules); :func:`linearize` and :func:`linear_transpose` turn graphs into linear
and transposed graphs; :mod:`tidu.eager` drives eager reverse mode.
"""

from tidu.errors import ADRuleError, ADRuleKind, RuleContractError, TiduError
from tidu.linearize import linearize
from tidu.linearized import LinearizedGraph
from tidu.rules import (
    CotangentSeed,
    GraphPrimitiveBuilder,
    Primitive,
    PrimitiveBuilder,
    PrimitiveValue,
    TangentKey,
    sum_tangent_terms,
    tangent_key,
)
from tidu.transpose import linear_transpose, linear_transpose_with_builder
from tidu.compile import optimize

__all__ = [
    "TiduError", "ADRuleError", "ADRuleKind", "RuleContractError",
    "Primitive", "PrimitiveBuilder", "PrimitiveValue", "GraphPrimitiveBuilder",
    "LinearizedGraph", "linearize", "linear_transpose", "linear_transpose_with_builder",
    "sum_tangent_terms", "tangent_key", "TangentKey", "CotangentSeed", "optimize",
]
