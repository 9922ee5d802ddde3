"""``vectorize``: NumPy's ``np.vectorize`` for tnp, a function of scalars (or of core arrays)
mapped over broadcast arrays by :func:`~primitives.tensor.vmap`.

NumPy names it, but it maps with a transform, so it lives here, above the NumPy
surface (:mod:`primitives.tensor.numpy`), and ``tnp.vectorize`` is this class.

It imports :mod:`.vmap` of the transforms, and the NumPy surface's
:mod:`~primitives.tensor.numpy.lowering` and :mod:`~primitives.tensor.numpy.indexing`.
"""

from __future__ import annotations

import re

import numpy as np

from primitives.tensor.core import data_if_known, dtype_of, shape_of
from primitives.tensor.errors import ConcretizationError, TensorShapeError, TensorTypeError
from primitives.tensor.numpy.indexing import getitem
from primitives.tensor.numpy.lowering import as_dtype, broadcast_to, operand, reshape, stack
from primitives.tensor.transforms.vmap import vmap

__all__ = ["vectorize"]


def _parse_signature(signature: str) -> tuple:
    """NumPy's generalized-ufunc signature ``"(m,n),(n)->(m)"``: the core dimension names of
    each input and output."""
    argument = r"\((?:\w+(?:,\w+)*)?\)"
    arguments = rf"{argument}(?:,{argument})*"
    cleaned = re.sub(r"\s+", "", signature)
    if not re.fullmatch(rf"{arguments}->{arguments}", cleaned):
        raise TensorShapeError(f"vectorize: not a valid gufunc signature: {signature}")
    inputs, outputs = cleaned.split("->")

    def dims(part):
        return [tuple(re.findall(r"\w+", arg)) for arg in re.findall(argument, part)]
    return dims(inputs), dims(outputs)


class vectorize:
    """``np.vectorize``: ``pyfunc`` of scalars (or, with ``signature``, of core arrays)
    applied over broadcast arrays, by :func:`~primitives.tensor.vmap` over their flattened
    (loop) axes, so ``pyfunc`` written with tnp functions differentiates under every
    transform. Arguments broadcast as in NumPy (``excluded`` positions and keywords are
    passed unchanged); ``otypes`` casts the outputs; ``signature`` (``"(n),(n)->()"``)
    maps over the loop axes in front of the core ones. ``pyfunc`` may also branch on
    values (``if x > 0``): where the values are known (arrays, the eager ``Tensor``,
    ``grad``) it is then called once per element, as NumPy does; under ``jit`` and
    ``vmap`` that raises ``ConcretizationError`` (write it with ``tnp.where``).
    ``cache`` has no effect. Used as a decorator, with or without arguments.

    >>> import primitives.tensor as tnp
    >>> f = vectorize(lambda x, y: tnp.sin(x) * y)
    >>> f(np.zeros(3), 2.0)
    array([0., 0., 0.])
    >>> tnp.grad(lambda x: tnp.sum(f(x, np.array([[1.0], [2.0]]))))(np.zeros(2))
    array([3., 3.])
    >>> vectorize(lambda v, w: tnp.dot(v, w), signature="(n),(n)->()")(np.ones((4, 3)), np.ones(3))
    array([3., 3., 3., 3.])
    >>> vectorize(lambda x: x if x > 0 else 0.0)(np.array([-1.0, 2.0]))       # branches
    array([0., 2.])
    """

    def __init__(self, pyfunc=np._NoValue, otypes=None, doc=None, excluded=None,
                 cache: bool = False, signature=None) -> None:
        if pyfunc is not np._NoValue and not callable(pyfunc):
            raise TensorTypeError(f"vectorize: pyfunc must be callable, got "
                                  f"{type(pyfunc).__name__}")
        self.pyfunc = pyfunc
        self.cache = cache
        self.signature = signature
        self.__doc__ = doc if doc is not None or pyfunc is np._NoValue else pyfunc.__doc__
        if isinstance(otypes, str):
            invalid = [c for c in otypes if c not in np.typecodes["All"]]
            if invalid:
                raise TensorShapeError(f"vectorize: Invalid otype specified: {invalid[0]}")
            otypes = [np.dtype(c) for c in otypes]
        elif otypes is not None:
            otypes = [np.dtype(t) for t in otypes]
        self.otypes = otypes
        self.excluded = set(excluded or ())
        self._core = None if signature is None else _parse_signature(signature)

    def __call__(self, *args, **kwargs):
        if self.pyfunc is np._NoValue:           # @vectorize(otypes=...): now the function
            if len(args) != 1 or kwargs or not callable(args[0]):
                raise TensorTypeError("vectorize: a decorator takes the one function it wraps")
            self.pyfunc = args[0]
            if self.__doc__ is None:
                self.__doc__ = args[0].__doc__
            return self
        positions = [i for i in range(len(args)) if i not in self.excluded]
        names = [n for n in kwargs if n not in self.excluded]

        def func(*mapped):
            call_args = list(args)
            for i, value in zip(positions, mapped):
                call_args[i] = value
            call_kwargs = dict(kwargs)
            call_kwargs.update(zip(names, mapped[len(positions):]))
            return self.pyfunc(*call_args, **call_kwargs)

        inputs = [operand(args[i], "vectorize") for i in positions]
        inputs += [operand(kwargs[n], "vectorize") for n in names]
        if not inputs:
            return func()
        if self._core is None:
            return self._call_scalars(func, inputs)
        return self._call_signature(func, inputs)

    # --- the two ways of looping ---------------------------------------------------------

    def _call_scalars(self, func, inputs: list):
        try:
            shape = np.broadcast_shapes(*[shape_of(a) for a in inputs])
        except ValueError:
            raise TensorShapeError("vectorize: arguments cannot be broadcast together, shapes "
                                   f"{[shape_of(a) for a in inputs]}") from None
        size = int(np.prod(shape, dtype=np.int64))
        if size == 0:
            if self.otypes is None:
                raise TensorShapeError("vectorize: cannot call `vectorize` on size 0 inputs "
                                       "unless `otypes` is set")
            return self._outputs([np.empty(shape, t) for t in self.otypes])
        flat = [reshape(broadcast_to(a, shape), (size,)) for a in inputs]
        outputs = self._map(func, flat)
        for out in outputs:
            if shape_of(out) != (size,):
                raise TensorShapeError(f"vectorize: pyfunc returned an array of shape "
                                       f"{shape_of(out)[1:]} for scalar arguments; give a "
                                       "signature (such as '(n)->(n)') for functions of arrays")
        return self._outputs([reshape(out, shape) for out in outputs])

    def _call_signature(self, func, inputs: list):
        input_dims, output_dims = self._core
        if len(inputs) != len(input_dims):
            raise TensorTypeError(f"vectorize: wrong number of positional arguments: expected "
                                  f"{len(input_dims)}, got {len(inputs)}")
        sizes, loops, cores = {}, [], []
        for a, dims in zip(inputs, input_dims):
            a_shape = shape_of(a)
            if len(a_shape) < len(dims):
                raise TensorShapeError(f"vectorize: {len(a_shape)}-dimensional argument does not "
                                       f"have enough dimensions for all core dimensions {dims}")
            core = a_shape[len(a_shape) - len(dims):]
            for dim, n in zip(dims, core):
                if sizes.setdefault(dim, n) != n:
                    raise TensorShapeError(f"vectorize: inconsistent size for core dimension "
                                           f"{dim!r}: {n} vs {sizes[dim]}")
            loops.append(a_shape[:len(a_shape) - len(dims)])
            cores.append(core)
        try:
            loop = np.broadcast_shapes(*loops)
        except ValueError:
            raise TensorShapeError(f"vectorize: loop dimensions {loops} cannot be broadcast "
                                   "together") from None
        size = int(np.prod(loop, dtype=np.int64))
        if size == 0:
            if self.otypes is None or any(d not in sizes for dims in output_dims for d in dims):
                raise TensorShapeError("vectorize: cannot call `vectorize` on size 0 inputs "
                                       "unless `otypes` is set and every output core dimension "
                                       "is an input's")
            return self._outputs([np.empty(loop + tuple(sizes[d] for d in dims), t)
                                  for dims, t in zip(output_dims, self.otypes)])
        flat = [reshape(broadcast_to(a, loop + core), (size,) + core)
                for a, core in zip(inputs, cores)]
        outputs = self._map(func, flat)
        if len(outputs) != len(output_dims):
            raise TensorShapeError(f"vectorize: wrong number of outputs from pyfunc: expected "
                                   f"{len(output_dims)}, got {len(outputs)}")
        shaped = []
        for out, dims in zip(outputs, output_dims):
            core = shape_of(out)[1:]
            if len(core) != len(dims):
                raise TensorShapeError(f"vectorize: output has {len(core)} core dimensions, the "
                                       f"signature {self.signature!r} says {len(dims)}")
            for dim, n in zip(dims, core):
                if sizes.setdefault(dim, n) != n:
                    raise TensorShapeError(f"vectorize: inconsistent size for core dimension "
                                           f"{dim!r}: {n} vs {sizes[dim]}")
            shaped.append(reshape(out, loop + core))
        return self._outputs(shaped)

    def _map(self, func, flat: list) -> list:
        """``func`` over axis 0 of the ``flat`` arguments: its outputs, stacked along axis 0."""
        def one(*values):
            out = func(*values)
            leaves = out if isinstance(out, tuple) else (out,)
            return tuple(operand(leaf, "vectorize") for leaf in leaves)

        try:
            return list(vmap(one)(*flat))
        except ConcretizationError:
            if any(data_if_known(a) is None for a in flat):
                raise                               # under jit or vmap: values are unknown
        # pyfunc reads values (Python control flow): one call per element, as NumPy
        calls = [one(*[getitem(a, i) for a in flat]) for i in range(shape_of(flat[0])[0])]
        return [stack([as_dtype(c[k], dtype_of(calls[0][k])) for c in calls])
                for k in range(len(calls[0]))]

    def _outputs(self, outputs: list):
        if self.otypes is not None:
            if len(self.otypes) != len(outputs):
                raise TensorShapeError(f"vectorize: {len(outputs)} outputs for "
                                       f"{len(self.otypes)} otypes")
            outputs = [as_dtype(out, t) for out, t in zip(outputs, self.otypes)]
        if self._core is not None:
            return outputs[0] if len(self._core[1]) == 1 else tuple(outputs)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
