"""The eager front end: ``Tensor`` (PyTorch-like) with ``Gradients`` (Burn-like).

>>> x = tensor([1.0, 2.0], requires_grad=True)
>>> grads = (x * x).sum().backward()
>>> grads.grad(x)
array([2., 4.])
>>> x.grad
array([2., 4.])
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from tidu import TiduError
from tidu.eager import EagerInput, RecordedGraph, Recorder, try_backward
from tidu.graph import Input
from primitives.tensor.api import ArrayOperators, TensorTypeError
from primitives.tensor.core import Frontend
from primitives.tensor.executor import NumpyExecutor

_recorder = Recorder()
_executor = NumpyExecutor()
_CONSTANT = Input("tensor-constant")      # the key of every constant operand (never differentiated)
_ARG_KEYS = [tuple(f"arg{i}" for i in range(n)) for n in range(8)]
_leaves: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
_leaf_key_lock = threading.Lock()


class BackwardError(TiduError, ValueError):
    """Backward was asked for something it cannot do (no seed for a non-scalar, a bad seed)."""


_recorded: dict = {}           # op -> its one-op RecordedGraph (shared: keys are placeholders)


def _recorded_graph(op) -> RecordedGraph:
    try:
        recorded = _recorded.get(op)
    except TypeError:                      # an unhashable op: from_primitive says so
        recorded = None
    if recorded is None:
        recorded = RecordedGraph.from_primitive(op, _ARG_KEYS[op.input_count()])
        if len(_recorded) < 4096:          # ops carry shapes, so a program can make many
            _recorded[op] = recorded
    return recorded


def _traced(data: np.ndarray, trace, key) -> "Tensor":
    """A tensor requiring grad, made by the recorded ``trace`` as its value ``key``."""
    t = Tensor.__new__(Tensor)
    t.data, t.requires_grad, t.grad, t._key, t._trace = data, True, None, key, trace
    return t


class Tensor(ArrayOperators, Frontend):
    """A NumPy array that records the ops applied to it when it requires grad."""

    __slots__ = ("data", "requires_grad", "grad", "_key", "_trace", "__weakref__")
    level = 1

    def __init__(self, data, requires_grad: bool = False) -> None:
        data = np.asarray(data)
        if requires_grad and not np.issubdtype(data.dtype, np.inexact):
            raise TensorTypeError(f"only floating point and complex tensors can require grad, "
                            f"got dtype {data.dtype}")
        self.data = data
        self.requires_grad = bool(requires_grad)
        self.grad = None
        self._key = None
        self._trace = None

    @property
    def value_below(self):
        return self.data

    @property
    def shape(self) -> tuple:
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def key(self):
        """This tensor's eager value key (made on first use for leaves)."""
        key = self._key
        if key is None:
            with _leaf_key_lock:        # two threads asking at once get the same key
                key = self._key
                if key is None:
                    key = Input(_recorder.key_source.fresh_input_key())
                    if self.requires_grad:
                        _leaves[key] = self
                    self._key = key
        return key

    def detach(self) -> "Tensor":
        """The same data, cut from the recorded history."""
        return Tensor(self.data)

    def numpy(self) -> np.ndarray:
        return self.data

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def item(self):
        return self.data.item()

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"tensor({np.array2string(self.data, separator=', ')}{grad})"

    @classmethod
    def bind(cls, op, args) -> list:
        data = [a.data if isinstance(a, Tensor) else np.asarray(a) for a in args]
        results = [r if type(r) is np.ndarray else np.asarray(r) for r in op.eval(None, data)]
        inputs = []
        requires_grad = False
        for a, d in zip(args, data):
            if isinstance(a, Tensor) and a.requires_grad:
                requires_grad = True
                inputs.append(EagerInput(a.key, a._trace, True, d))
            else:
                inputs.append(EagerInput(_CONSTANT, None, False, d))
        if not requires_grad:
            return [Tensor(r) for r in results]
        trace = _recorder.record(_recorded_graph(op), inputs, results)
        return [_traced(result, trace, key) for result, key in zip(results, trace.output_keys)]

    def backward(self, seed=None) -> "Gradients":
        """Backpropagate from this tensor; also accumulate into leaves' ``.grad``.

        A non-scalar tensor needs an explicit ``seed`` of its shape.
        """
        if seed is None:
            if self.data.size != 1 or self.data.ndim != 0:
                raise BackwardError(f"backward of a tensor of shape {self.shape} needs a seed "
                                    "(only 0-d tensors default to a seed of 1)")
            seed = np.ones_like(self.data)
        seed = np.asarray(seed.data if isinstance(seed, Tensor) else seed)
        if seed.shape != self.shape:
            raise BackwardError(f"backward: seed of shape {seed.shape} for a tensor of shape "
                                f"{self.shape}")
        seed = seed.astype(self.dtype, copy=False)
        cotangents = try_backward(self.key, self._trace, seed, _executor)
        given = set()      # arrays already handed to a leaf: one array never backs two .grad
        for key, value in cotangents.items():
            leaf = _leaves.get(key)
            if leaf is not None and leaf.requires_grad and leaf._trace is None:
                if leaf.grad is not None:
                    leaf.grad = leaf.grad + value
                elif id(value) in given or not value.flags.writeable:
                    leaf.grad = value.copy()
                else:
                    leaf.grad = value
                given.add(id(leaf.grad))
        return Gradients(cotangents)


class Gradients:
    """Gradients from one backward call, by tensor (Burn's ``grad``/``remove``/``replace``)."""

    __slots__ = ("_by_key",)

    def __init__(self, by_key: dict) -> None:
        self._by_key = by_key

    def grad(self, t: Tensor):
        """The gradient of ``t``, or ``None`` if it received none."""
        return self._by_key.get(t.key)

    def remove(self, t: Tensor):
        """Take out and return the gradient of ``t`` (``None`` if absent)."""
        return self._by_key.pop(t.key, None)

    def replace(self, t: Tensor, g) -> None:
        """Set the gradient of ``t`` to ``g``."""
        self._by_key[t.key] = np.asarray(g)

    def __contains__(self, t: Tensor) -> bool:
        return t.key in self._by_key


def tensor(data, requires_grad: bool = False, dtype=None) -> Tensor:
    """A :class:`Tensor` from array-like ``data``."""
    data = data.data if isinstance(data, Tensor) else data
    return Tensor(np.asarray(data, dtype=dtype), requires_grad)


def checkpoint(f):
    """Record ``f`` as one eager node whose intermediates are recomputed during backward.

    ``f`` takes and returns tensors (or arrays); it is traced into a graph at
    the given values, run once, and recorded as a composite ``RecordedGraph``
    with no retained values, so memory for its intermediates is spent only
    while its backward runs.

    >>> x = tensor([0.5, 1.0], requires_grad=True)
    >>> from primitives.tensor import api as tnp
    >>> y = checkpoint(lambda v: tnp.sin(v) * v)(x)
    >>> np.allclose(tnp.sum(y).backward().grad(x), np.cos(x.data) * x.data + np.sin(x.data))
    True
    """
    from primitives.tensor.functional import Traced

    def wrapped(*args):
        if any(isinstance(a, Frontend) and not isinstance(a, Tensor) for a in args):
            return f(*args)              # under a functional transform: nothing to checkpoint
        tensors = [a if isinstance(a, Tensor) else Tensor(np.asarray(a)) for a in args]
        # Tensors the function closes over are captured as inputs of the node too.
        traced = Traced(f, [t.data for t in tensors], capture=lambda v: isinstance(v, Tensor))
        graph = traced.graph
        by_key = dict(zip(traced.input_keys, tensors))
        by_key.update(traced.trace.captured)
        inputs = []
        for key in graph.input_keys:
            t = by_key.get(key.key)
            if t is None:
                inputs.append(EagerInput(_CONSTANT, None, False, traced.trace.values[key]))
            else:
                inputs.append(EagerInput(t.key, t._trace, t.requires_grad, t.data))
        recorded = RecordedGraph(graph, [k.key for k in graph.input_keys], graph.output_keys)
        records = _recorder.record_graph(recorded, inputs, traced.outputs)
        outs = []
        for value, record in zip(traced.outputs, records):
            t = Tensor(value)
            t.requires_grad = False
            t.requires_grad, t._key, t._trace = record.requires_grad, record.key, record.trace
            outs.append(t)
        return outs[0] if traced.single_output else tuple(outs)

    return wrapped
