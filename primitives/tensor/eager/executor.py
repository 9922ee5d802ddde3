"""Running tensor backward work: ``NumpyExecutor`` and an immediate builder.

The executor runs on the arrays it is given, of any library (:mod:`.backends`);
its name says where the set started.

>>> from tidu.graph import GraphBuilder, Local, Input
>>> from primitives.tensor.ops import elementwise as ew
>>> b = GraphBuilder(); x = b.add_input("x")
>>> b.set_outputs(b.add_operation(ew.exp, [Local(x)])); g = b.build()
>>> NumpyExecutor().execute_forward(g, {Input("x"): np.zeros(2)})[g.output_keys[0]]
array([1., 1.])
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tidu.eager import BackwardExecutor, ImmediateBuilder
from tidu.graph import Graph, ValueKey, compiled
from primitives.tensor import buffers
from primitives.tensor.backends import as_array
from primitives.tensor.buffers import is_cached
from primitives.tensor.core import dtype_of, shape_of
from primitives.tensor.errors import BackwardError
from primitives.tensor.ops import elementwise as ew


def _array(value):
    """NumPy gives 0-d results as scalars; every value this executor returns is an array."""
    if type(value) is np.ndarray:
        return value
    return np.asarray(value) if isinstance(value, np.generic) else as_array(value)


def _refs_of_argument(a, b) -> int:
    return sys.getrefcount(a)


# The reference count of an argument the caller handed over (held by no one else), as a
# function of add_operands' shape sees it; exact only with the GIL.
_HANDED_OVER_REFS = _refs_of_argument(np.empty(0), None)
_EXACT_REFS = getattr(sys, "_is_gil_enabled", lambda: True)()


def _summable_in_place(a: np.ndarray, b: np.ndarray) -> bool:
    """For two NumPy arrays, ``a`` big (the caller checks both): ``a += b`` gives ``a + b``,
    as ``a`` owns writable float memory of the sum's shape and dtype."""
    return (a.shape == b.shape and a.dtype == b.dtype and a.dtype.kind in "fc"
            and a.base is None and a.flags.writeable)


class NumpyExecutor(BackwardExecutor):
    """A :class:`BackwardExecutor` for tensor-primitive graphs over arrays of any library.

    Everything it returns is an array (0-d results included, never a NumPy scalar). It
    overrides neither hook, so backward runs each node's fused plan through
    :meth:`compile_graph`; a subclass that overrides ``execute_forward`` or
    ``run_transposed_linear`` has that override called at every node instead
    (:func:`tidu.eager.try_backward`).
    """

    def execute_forward(self, graph: Graph, initial_data: Mapping[ValueKey, Any]
                        ) -> Mapping[ValueKey, Any]:
        return dict(zip(graph.output_keys, map(_array, compiled(graph).run(initial_data))))

    def compile_graph(self, graph: Graph, input_keys: Sequence[ValueKey]
                      ) -> Callable[[Sequence[Any]], list]:
        """``graph``'s compiled program as a function of the values of ``input_keys``, in order.

        Like :meth:`execute_forward`, every value it returns is an array.
        """
        return compiled(graph).runner(input_keys, outputs_as=(np.ndarray, _array))

    def add_operands(self, a, b):
        """``a + b``, summed into ``a`` when tidu handed it over and nothing else holds it."""
        if type(a) is np.ndarray and type(b) is np.ndarray:
            # (a small sum costs less with a new array)
            if (a.nbytes >= buffers.MIN_BYTES and _summable_in_place(a, b) and _EXACT_REFS
                    and sys.getrefcount(a) <= _HANDED_OVER_REFS + is_cached(a)):
                return np.add(a, b, out=a)
            return np.add(a, b, out=...)          # (an array even when 0-d)
        return ew.add.eval(None, [a, b])[0]

    def check_seed(self, seed, output) -> None:
        """A seed must be an array (or nested list) of numbers of ``output``'s shape, real
        when ``output`` is real: the one check of ``Tensor.backward``'s seed, made before the
        seed is cast to the output's dtype (which would drop an imaginary part).

        >>> NumpyExecutor().check_seed(np.ones(2, complex), np.zeros(2))
        Traceback (most recent call last):
        ...
        primitives.tensor.errors.BackwardError: backward: a complex seed (complex128) for a ...
        """
        try:
            seed_shape, seed_dtype = shape_of(seed), dtype_of(seed)
        except (TypeError, ValueError) as error:
            raise BackwardError(f"backward: the seed is not an array of numbers "
                                f"({error})") from None
        out_dtype = dtype_of(output)
        if seed_dtype.kind not in "biufc":
            raise BackwardError(f"backward: a seed of dtype {seed_dtype}; it must hold numbers")
        if seed_dtype.kind == "c" and out_dtype.kind != "c":
            raise BackwardError(f"backward: a complex seed ({seed_dtype}) for a real output "
                                f"({out_dtype})")
        if seed_shape != shape_of(output):
            raise BackwardError(f"backward: seed of shape {seed_shape} for an output of shape "
                                f"{shape_of(output)}")


ImmediateNumpyBuilder = ImmediateBuilder
"""The immediate builder for this set: :class:`tidu.eager.ImmediateBuilder`."""
