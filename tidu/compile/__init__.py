"""The compiler half: ``optimize`` turns the graphs tidu makes into one lean program.

Passes, each a loop over operations (see the modules):

- :mod:`tidu.compile.inline`: follow the outputs' keys across graphs to the
  operations they need, and build the closed graph at the end;
- :mod:`tidu.compile.simplify`: add those operations again one at a time,
  dependencies first, merging equal ones (CSE), folding constants
  (:mod:`tidu.compile.fold`) and applying the primitive set's ``simplify`` rules;
- :mod:`tidu.compile.dce`: drop what the rewrites left unread;
- :mod:`tidu.compile.order` (on request, after ``optimize``): :func:`hoisted` runs
  the operations a caller names as soon as their inputs exist.

The primitive set takes part through two hooks of :class:`tidu.Primitive`:
``constant(value)`` (a classmethod making an operation with no inputs) and
``simplify(rewriter, inputs, role, ctx)``; both default to "nothing to do".
"""

from tidu.compile.order import hoisted
from tidu.compile.pipeline import optimize
from tidu.compile.simplify import MAX_NESTED_EMITS, Rewriter, forwarded, producer

__all__ = ["optimize", "hoisted", "Rewriter", "producer", "forwarded", "MAX_NESTED_EMITS"]
