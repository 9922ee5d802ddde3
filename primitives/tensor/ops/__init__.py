"""The tensor primitives, one module per op family."""
