"""tidu: automatic differentiation of primitive computation graphs.

Downstream primitive sets implement :class:`Primitive` (JVP and transpose
rules); :func:`linearize` and :func:`linear_transpose` turn graphs into linear
and transposed graphs; :func:`batch` batches a graph along an axis;
:func:`optimize` compiles what they produce (:func:`hoisted` reorders it);
:mod:`tidu.eager` drives eager reverse mode.

The names load on first use, so ``import tidu.graph`` stays free of the AD layer.
"""

from __future__ import annotations

import importlib

from tidu.errors import ADRuleError, ADRuleKind, MemoryBudgetError, RuleContractError, TiduError

_LAZY = {   # public name -> the module defining it
    "linearize": "tidu.linearization",
    "LinearizedGraph": "tidu.linearized",
    "linear_transpose": "tidu.transpose",
    "linear_transpose_with_builder": "tidu.transpose",
    "optimize": "tidu.compile",
    "hoisted": "tidu.compile",
    **{name: "tidu.remat" for name in ("rematerialize", "recompute", "measure_program", "program_peak", "Rematerialized")},
    **{name: "tidu.batching" for name in (
        "batch", "BatchedGraph", "BatchedKey", "BatchAxisError", "input_role")},
    **{name: "tidu.rules" for name in (
        "CotangentSeed", "GraphPrimitiveBuilder", "Primitive", "PrimitiveBuilder",
        "PrimitiveValue", "TangentKey", "sum_tangent_terms", "tangent_key")},
}

__all__ = [
    "TiduError", "ADRuleError", "ADRuleKind", "RuleContractError",
    "Primitive", "PrimitiveBuilder", "PrimitiveValue", "GraphPrimitiveBuilder",
    "LinearizedGraph", "linearize", "linear_transpose", "linear_transpose_with_builder",
    "sum_tangent_terms", "tangent_key", "TangentKey", "CotangentSeed", "optimize",
    "hoisted", "batch", "BatchedGraph", "BatchedKey", "BatchAxisError", "input_role",
    "rematerialize", "recompute", "measure_program", "program_peak", "Rematerialized",
    "MemoryBudgetError",
]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tidu' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
