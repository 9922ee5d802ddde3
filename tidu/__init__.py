"""tidu: automatic differentiation of primitive computation graphs."""

from tidu.errors import ADRuleError, ADRuleKind, TiduError

__all__ = ["TiduError", "ADRuleError", "ADRuleKind"]
