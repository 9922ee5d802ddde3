"""Primitive sets built on tidu: ``primitives.scalar`` (Python floats and complex numbers) and
``primitives.tensor`` (NumPy-like arrays); :mod:`primitives.exact`, the exact identity of op
parameters, is shared by both."""
