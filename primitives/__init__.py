"""Primitive sets built on tidu: ``primitives.scalar`` (Python floats and complex numbers)."""
