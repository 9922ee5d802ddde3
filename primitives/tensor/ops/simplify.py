"""Rewrite patterns of the tensor set for ``tidu.optimize`` (placeholder: no rewrites yet)."""

from __future__ import annotations


def simplify(op, rewriter, inputs, role, ctx):
    """A cheaper computation of ``op`` on ``inputs`` (one key per output), or ``None``."""
    return None


def constant_op(value):
    """An op with no inputs producing ``value``, or ``None`` (no folding)."""
    return None
