"""The tensor primitives, one module per op family, in layers: a module imports only
modules of lower layers (never ``primitives.tensor`` above them, nor its ``numpy``,
``transforms`` or ``eager``).

=================  ========================================================================
layer              modules
=================  ========================================================================
the set            :mod:`.base`: ``TensorPrimitive``, the set's hooks (``TENSOR_SET``),
                   op-independent helpers
shapes, constants  :mod:`.shape` (with the batch helpers), :mod:`.constants`
predicates         :mod:`.select`: ``Select``, ``Compare``
elementwise        :mod:`.elementwise`
arrays             :mod:`.fft`, :mod:`.dot`, :mod:`.indexing`, :mod:`.scan`, :mod:`.reduce`,
                   :mod:`.linalg`: each imports only those before it
user rules         :mod:`.custom`
rewrites           :mod:`.simplify`
=================  ========================================================================

Importing any of these modules runs this file first: it imports them in that order
and installs the set's hooks (:data:`.base.TENSOR_SET`), so every op has them.
"""

from primitives.tensor.ops import base, shape, constants, select, elementwise  # noqa: F401
from primitives.tensor.ops import fft, dot, indexing, scan, reduce, linalg  # noqa: F401
from primitives.tensor.ops import custom, simplify  # noqa: F401

base.TENSOR_SET.install(add=elementwise.add, constant=constants.constant_op,
                        simplify=simplify.simplify)
