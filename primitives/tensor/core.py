"""One entry point for applying a primitive to any kind of value: ``bind``.

Values come in levels: plain NumPy arrays and numbers (level 0), eager
``Tensor``s (level 1) and functional ``Tracer``s (one level per nested
transform, above those). ``bind`` hands the op to the highest-level argument's
frontend, which treats lower-level arguments as constants. So the NumPy-named
functions are written once and work under every front end and nesting.

>>> from primitives.tensor.ops import elementwise as ew
>>> bind(ew.mul, np.array([2.0]), np.array([3.0]))
[array([6.])]
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tidu.graph import Derived, ValueKey, schedule
from primitives.tensor.backends import as_array, numpy_dtype
from primitives.tensor.errors import ConcretizationError


class Frontend:
    """A kind of value that ops can be bound to. Subclasses set ``level`` and ``bind``."""

    __slots__ = ()
    level = 0
    is_tracer = False       # a value of a functional transform's trace (not an eager Tensor)
    weak = False            # a traced Python number: promotes as one (NEP 50), jit's argument

    @property
    def carries_gradient(self) -> bool:
        """Whether a derivative can flow through this value (so it may not become a constant)."""
        return False

    @classmethod
    def bind(cls, op, args: Sequence) -> list:
        raise NotImplementedError


def level_of(value) -> int:
    return value.level if isinstance(value, Frontend) else 0


class _GradMode(threading.local):
    enabled = True              # this thread's grad mode (primitives.tensor.eager.grad_mode)
    stack: list | None = None   # the modes the open blocks replaced, innermost last


grad_mode = _GradMode()
"""This thread's grad mode, kept here so that the traces of the transforms read it too: a
``no_grad`` block entered inside a traced function makes constants there."""


class _Staging(threading.local):
    lift: Callable | None = None


_staging = _Staging()


class _Tracing(threading.local):
    def __init__(self) -> None:
        self.transforms: list = []        # the abstract traces open on this thread, innermost last


_tracing = _Tracing()


def open_trace(trace) -> None:
    """Note that ``trace`` (an abstract trace: ``jit``, ``vmap``, a custom rule) is tracing on
    this thread, until :func:`close_trace` (or until it is garbage: a trace abandoned
    without being closed does not stay open)."""
    _tracing.transforms.append(weakref.ref(trace))


def close_trace(trace) -> None:
    _tracing.transforms[:] = [ref for ref in _tracing.transforms
                              if ref() is not None and ref() is not trace]


def tracing_transform() -> str | None:
    """The name of the innermost abstract trace open on this thread (``"jit of f"``), or
    ``None``: code that would read values once and reuse them (a random draw) asks this.

    >>> import numpy as np
    >>> import primitives.tensor as tnp
    >>> seen = []
    >>> _ = tnp.jit(lambda x: (seen.append(tracing_transform()), x)[1])(np.zeros(1))
    >>> seen
    ['jit of <lambda>']
    """
    transforms = _tracing.transforms
    while transforms:
        trace = transforms[-1]()
        if trace is not None:
            return trace.transform
        transforms.pop()
    return None


def set_staging(lift: Callable | None) -> Callable | None:
    """Make ``lift(args)`` see the plain arguments of every op this thread binds: it returns
    them with some lifted into a trace (then the op is recorded there), or ``None``. Returns
    the previous hook (see :func:`..closure.staging`)."""
    previous, _staging.lift = _staging.lift, lift
    return previous


def bind(op, *args) -> list:
    """Apply ``op`` to ``args``; returns one value per output, of the highest-level kind."""
    top = None
    for arg in args:
        if isinstance(arg, Frontend) and (top is None or arg.level > top.level):
            top = arg
    if top is None:
        lift = _staging.lift
        if lift is not None:
            lifted = lift(args)
            if lifted is not None:
                return bind(op, *lifted)
        return op.eval(None, [a if type(a) is np.ndarray else as_array(a) for a in args])
    return top.bind(op, args)


def bind_below(op, args: Sequence) -> list:
    """:func:`bind` for a front end computing the values under its own: plain arguments are
    computed, never staged (they are the values of what is being staged)."""
    for arg in args:
        if isinstance(arg, Frontend):
            return bind(op, *args)
    return op.eval(None, [a if type(a) is np.ndarray else as_array(a) for a in args])


def interpret(outputs: Sequence[ValueKey], values: Mapping[ValueKey, Any]) -> list:
    """Compute ``outputs`` from ``values`` by binding each needed op, dependencies first.

    Unlike ``tidu.graph.evaluate`` this works on frontend values (a nested
    transform's tracers record the ops), so transforms compose. A value it computes
    is dropped after the last op that reads it (not at the end), so it holds at once
    about what the compiled program would.

    >>> from tidu.graph import GraphBuilder, Local
    >>> from primitives.tensor.ops import elementwise as ew
    >>> b = GraphBuilder(); x = b.add_input("x")
    >>> [y] = b.add_operation(ew.sin, [Local(x)]); [z] = b.add_operation(ew.neg, [Local(y)])
    >>> b.set_outputs([z]); g = b.build()
    >>> interpret(g.output_keys, {g.input_keys[0]: np.zeros(2)})
    [array([-0., -0.])]
    """
    env = dict(values)
    ops = schedule(outputs, env)
    reads_left: dict = {}           # computed value -> ops still to read it
    for op_key in ops:
        for key in op_key.inputs:
            if key not in values:
                reads_left[key] = reads_left.get(key, 0) + 1
    for key in outputs:             # (never dropped)
        reads_left[key] = -1
    for op_key in ops:
        results = bind(op_key.operation, *[env[k] for k in op_key.inputs])
        for slot, result in enumerate(results):
            env[Derived(op_key, slot)] = result
        for key in op_key.inputs:
            left = reads_left.get(key, -1) - 1
            if left == 0:
                del env[key]
            elif left > 0:
                reads_left[key] = left
    return [env[k] for k in outputs]


def shape_of(value) -> tuple:
    """The shape of any value, as a tuple (``()`` for a Python number)."""
    kind = type(value)
    if kind is np.ndarray:                      # the hot path: a tuple already
        return value.shape
    if kind is float or kind is int or kind is bool or kind is complex:
        return ()
    shape = getattr(value, "shape", None)       # (a front end's property, read once)
    if shape is None:
        return np.shape(value)
    return shape if type(shape) is tuple else tuple(shape)


def dtype_of(value) -> np.dtype:
    """The NumPy dtype of any value (a PyTorch tensor's ``torch.float32`` is ``float32``)."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return np.asarray(value).dtype
    if isinstance(dtype, np.dtype) and dtype.isbuiltin != 2:
        return dtype
    return numpy_dtype(dtype)       # another library's, or an extension's (refused)


def data_of(value, what: str = "reading its data"):
    """The level-0 data under any frontend value; under ``jit``, a :class:`ConcretizationError`
    naming ``what`` needed it."""
    while isinstance(value, Frontend):
        if value.is_tracer and value.graph_trace.abstract:
            transform = value.graph_trace.transform
            static = (", or mark the argument static (static_argnums)"
                      if transform.startswith("jit") else "")
            raise ConcretizationError(
                f"{what}: the values of an array traced by {transform} are not known while it "
                f"traces, only its shape and dtype; compute with tnp functions (tnp.where "
                f"instead of if){static}")
        value = value.value_below
    return value



def data_if_known(value):
    """``value``'s data if it can be read now (arrays, eager ``Tensor``s, ``grad``'s traced
    values), ``None`` while ``jit`` or ``vmap`` traces it.

    >>> data_if_known(np.ones(1))
    array([1.])
    """
    try:
        return data_of(value)
    except ConcretizationError:
        return None


def array_below(value):
    """The level-0 array under a ``Tensor`` or traced value, for its metadata only (library,
    device): unlike :func:`data_of` it does not refuse under ``jit``, so never read its values.
    """
    while isinstance(value, Frontend):
        value = value.value_below
    return value
