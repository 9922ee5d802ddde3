"""A small eager scalar frontend: ``Scalar`` values that record through ``tidu.eager``.

>>> x = Scalar(2.0, requires_grad=True)
>>> y = x * x + sin(x)
>>> grads = y.backward()
>>> round(grads[x.key], 12) == round(2 * 2.0 + __import__("math").cos(2.0), 12)
True

Second derivatives, two ways: ``backward(create_graph=True)`` records the
backward work, so the gradients are ``Scalar``s that can be differentiated
again (any order, by repeating); :func:`hvp` runs forward over reverse on the
recorded trace (:func:`tidu.eager.try_hvp`), without recording anything.

>>> dx = y.backward(create_graph=True)[x.key]           # 2x + cos x, with history
>>> d2x = dx.backward()[x.key]                           # 2 - sin x
>>> abs(d2x - (2 - __import__("math").sin(2.0))) < 1e-12, hvp(y, x, 1.0) == d2x
(True, True)
"""

from __future__ import annotations

import threading
from numbers import Complex, Number, Real
from operator import attrgetter
from typing import Any

from tidu.eager import (EagerError, EagerInput, RecordedGraph, Recorder, try_backward,
                        try_backward_recorded, try_hvp)
from tidu import TiduError
from tidu.graph import Input
from primitives.scalar.executor import ScalarExecutor
from primitives.scalar.functions import (  # noqa: F401  (re-exported for eager code)
    conj, cos, exp, imag, log, real, sign, sin, sincos, sqrt, tanh)
from primitives.scalar.ops import Pow, ScalarOp, ScalarTypeError

_recorder = Recorder()
_ARG_KEYS = [tuple(f"arg{i}" for i in range(n)) for n in range(4)]
_executor = ScalarExecutor()
_ops: dict = {}          # op -> (its RecordedGraph, whether it takes complex operands only)
_OPS_MAX = 1024          # ops with parameters (Pow, Scale) can be many: cache the first ones


class ImmutableScalarError(TiduError, AttributeError):
    """A write to a ``Scalar``'s ``data``, ``trace`` or ``key`` once they are set."""


class Scalar:
    """A number that records the ops applied to it when it (or an input) requires grad.

    A ``Scalar`` is its own eager record (what :meth:`tidu.eager.Recorder.record`
    reads): ``data``, ``requires_grad``, ``trace`` and ``key``. It is immutable: the
    trace of every later op holds it and backward reads it there, so a new ``data``
    would give the gradient of a computation that never ran. Writing ``data``
    raises :class:`ImmutableScalarError` (make a new ``Scalar``); ``requires_grad``
    may change on a leaf, and ``trace`` and ``key`` may be set once, on a leaf
    whose key was never made (to wrap an eager record as a ``Scalar``).

    >>> x = Scalar(3.0, requires_grad=True)
    >>> y = x * x
    >>> x.data = 10.0
    Traceback (most recent call last):
    ...
    primitives.scalar.eager.ImmutableScalarError: Scalar(3.0, requires_grad=True).data cannot be changed: the ops recorded on a Scalar read its value in backward; make a new Scalar(value, requires_grad=...) instead
    """

    __slots__ = ("data", "requires_grad", "trace", "key")

    def __init__(self, value, requires_grad: bool = False) -> None:
        if type(value) not in _NUMBER_TYPES:
            value = _check_number(value, requires_grad)
        _set = object.__setattr__
        _set(self, "data", value)
        _set(self, "requires_grad", requires_grad)
        _set(self, "trace", None)

    def __setattr__(self, name: str, value) -> None:
        if name == "requires_grad":
            if self.trace is not None:
                raise ImmutableScalarError(
                    f"{self!r}.requires_grad can only be changed on a leaf Scalar; this one was "
                    "computed by a recorded op")
            if value:
                _check_number(self.data, True)
        elif name == "trace" or name == "key":
            if _key_made(self) or (name == "trace" and self.trace is not None):
                raise ImmutableScalarError(
                    f"{self!r}.{name} cannot be changed: the ops recorded on a Scalar find its "
                    "history by it in backward")
        elif name == "data":
            raise ImmutableScalarError(
                f"{self!r}.data cannot be changed: the ops recorded on a Scalar read its value "
                "in backward; make a new Scalar(value, requires_grad=...) instead")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise ImmutableScalarError(f"{self!r}.{name} cannot be deleted: a Scalar is immutable")

    def __reduce__(self):
        """Pickle as a leaf: the number and ``requires_grad``, not the history (as a
        ``Tensor`` pickles, and PyTorch's tensors)."""
        return Scalar, (self.data, self.requires_grad)

    def __copy__(self) -> "Scalar":
        return self                     # immutable: a copy is the value itself

    def __deepcopy__(self, memo) -> "Scalar":
        return self

    value = property(attrgetter("data"), doc="The number.")

    def __getattr__(self, name: str):
        # Only reached while the ``key`` slot is unset: a leaf's key is made on first use,
        # under a lock so that two threads asking at once get the same key.
        if name != "key":
            raise AttributeError(f"'Scalar' object has no attribute {name!r}")
        with _leaf_key_lock:
            try:
                return _key_slot.__get__(self, Scalar)
            except AttributeError:
                key = Input(_recorder.key_source.fresh_input_key())
                _key_slot.__set__(self, key)
                return key

    def backward(self, seed=None, executor=None, create_graph: bool = False) -> dict:
        """Cotangents of every value this one depends on, by key (``grads[x.key]``).

        ``seed=None`` means 1, as for ``Tensor.backward``. A seed must be a
        number, and real for a real value; a ``Scalar`` that does not require grad
        has nothing to differentiate, and raises (as in PyTorch).

        With ``create_graph=True`` the backward work is recorded (PyTorch's
        ``create_graph``) and the cotangents are ``Scalar``s whose history can be
        differentiated again; a seed that is a ``Scalar`` with history keeps it.
        """
        if not self.requires_grad:
            raise EagerError(f"backward of {self!r}, which does not require grad: nothing "
                             "was recorded (make an input Scalar(..., requires_grad=True))")
        if seed is None:
            seed = 1.0 if type(self.data) is not complex else 1.0 + 0j
        executor = _executor if executor is None else executor
        if create_graph:
            return self._recorded_backward(seed, executor)
        grads = try_backward(self.key, self.trace, seed, executor)  # checks traced values' seeds
        if self.trace is None:
            executor.check_seed(seed, self.data)
        return grads

    def _recorded_backward(self, seed, executor) -> dict:
        """``backward(create_graph=True)``: ``{key: Scalar}``, each with its recorded history."""
        if isinstance(seed, Scalar):
            seed = (EagerInput(seed.key, seed.trace, True, seed.data) if seed.requires_grad
                    else seed.data)
        data = seed.data if isinstance(seed, EagerInput) else seed
        records = try_backward_recorded(self.key, self.trace, seed, executor, _recorder)
        if self.trace is None:
            executor.check_seed(data, self.data)
        return {key: _from_record(record) for key, record in records.items()}

    def __repr__(self) -> str:
        return f"Scalar({self.data!r}{', requires_grad=True' if self.requires_grad else ''})"

    def __add__(self, other): return _apply_real(_ADD, self, other)
    def __radd__(self, other): return _apply_real(_ADD, other, self)
    def __sub__(self, other): return _apply_real(_SUB, self, other)
    def __rsub__(self, other): return _apply_real(_SUB, other, self)
    def __mul__(self, other): return _apply_real(_MUL, self, other)
    def __rmul__(self, other): return _apply_real(_MUL, other, self)
    def __truediv__(self, other): return _apply_real(_DIV, self, other)
    def __rtruediv__(self, other): return _apply_real(_DIV, other, self)
    def __neg__(self): return _apply_real(_NEG, self)

    def __pow__(self, exponent):
        if isinstance(exponent, Scalar):
            raise ScalarTypeError(f"{self!r} ** {exponent!r}: the exponent must be a number; "
                                  "for a differentiable exponent write exp(y * log(x))")
        if _is_complex(exponent):            # (as a Scalar's data: one complex type)
            exponent = complex(exponent)
        return apply(Pow(exponent), self)

    def __abs__(self):
        return self.apply_op(ScalarOp.ABS)

    def __bool__(self) -> bool:
        """The truth of the number, as for a Python number (``Scalar(0.0)`` is false)."""
        return bool(self.data)

    def apply_op(self, op):
        """``op`` applied to this value (what ``primitives.scalar.sin`` etc. call)."""
        recorded = _REAL_OPS.get(op)
        if recorded is not None and type(self.data) is float:
            return _run(op, recorded, (self,))
        return apply(op, self)


_NUMBER_TYPES = frozenset((float, int, complex))


def _check_number(value, requires_grad: bool):
    """Refuse what a ``Scalar`` cannot hold: anything but a number, and a ``bool`` that
    requires grad (as PyTorch refuses ``requires_grad`` on booleans). Return the value to
    hold: a complex number of another type (NumPy's ``complex128`` and ``complex64``) as a
    ``complex``, so that a ``Scalar``'s data is complex exactly when its type is
    ``complex`` (what the hot paths test).

    >>> Scalar("a", requires_grad=True)
    Traceback (most recent call last):
    ...
    primitives.scalar.ops.ScalarTypeError: Scalar('a'): a Scalar holds a number (a float, complex or int), got a str
    """
    if isinstance(value, Number) and not (requires_grad and isinstance(value, bool)):
        return complex(value) if _is_complex(value) else value
    what = "a bool, which cannot require grad" if isinstance(value, bool) else \
        f"a {type(value).__name__}"
    hint = ("; for arrays use primitives.tensor (tnp.tensor)" if hasattr(value, "shape") or
            isinstance(value, (list, tuple)) else "")
    raise ScalarTypeError(f"Scalar({value!r}): a Scalar holds a number (a float, complex or "
                          f"int), got {what}{hint}")


_ADD, _SUB, _MUL, _DIV, _NEG = ScalarOp.ADD, ScalarOp.SUB, ScalarOp.MUL, ScalarOp.DIV, ScalarOp.NEG


def _is_complex(value) -> bool:
    """Whether the number ``value`` is complex and not real: a Python ``complex``, NumPy's
    ``complex128`` (a subclass of it) or ``complex64`` (which is not)."""
    return isinstance(value, Complex) and not isinstance(value, Real)


def _promoted(args: tuple) -> tuple:
    """Every operand complex: real ones go through ``TO_COMPLEX`` (recorded like any op)."""
    return tuple(a if type(a.data) is complex else apply(ScalarOp.TO_COMPLEX, a) for a in args)


def _op_info(op) -> tuple[RecordedGraph, bool]:
    """``op``'s shared recorded graph, and whether it takes complex operands only."""
    info = _ops.get(op)
    if info is None:
        # The recorded graph's input keys only name its inputs; every recorded output gets
        # a fresh eager key anyway, so one graph with placeholder keys serves every call.
        recorded = RecordedGraph.from_primitive(op, _ARG_KEYS[op.input_count()])
        parameter = getattr(op, "exponent", getattr(op, "factor", 0.0))
        complex_only = op in (ScalarOp.REAL, ScalarOp.IMAG) or _is_complex(parameter)
        info = (recorded, complex_only)
        if len(_ops) < _OPS_MAX:
            _ops[op] = info
    return info


def apply(op, *args) -> Any:
    """Run ``op`` on ``args`` (Scalars or numbers), recording it if any input requires grad.

    Real operands meeting complex ones (or an op that takes complex operands)
    are promoted with ``TO_COMPLEX`` first.
    """
    for a in args:
        if type(a) is not Scalar:
            args = tuple(map(_lift, args))
            break
    recorded, complex_only = _op_info(op)
    if op is not ScalarOp.TO_COMPLEX and (complex_only or any(type(a.data) is complex
                                                              for a in args)):
        args = _promoted(args)
    return _run(op, recorded, args)


def _run(op, recorded: RecordedGraph, args: tuple) -> Any:
    """Evaluate ``op`` on the Scalars ``args`` and record it."""
    results = op.eval(None, [a.data for a in args])
    trace = _recorder.record(recorded, args, results)
    if len(results) == 1:
        return _constant(results[0]) if trace is None else _result(results[0], trace,
                                                                trace.output_key)
    if trace is None:
        return tuple(map(_constant, results))
    return tuple(_result(v, trace, key) for v, key in zip(results, trace.output_keys))


def _apply_real(op, *args) -> Any:
    """``apply(op, *args)``, faster when every operand is a real ``Scalar`` holding a float."""
    for a in args:
        if type(a) is not Scalar or type(a.data) is not float:
            return apply(op, *args)
    return _run(op, _REAL_OPS[op], args)


def _lift(value) -> Scalar:
    if isinstance(value, Scalar):
        return value
    if type(value) not in _NUMBER_TYPES:
        value = _check_number(value, False)
    return _constant(value)


def _constant(value) -> Scalar:
    """``Scalar(value)`` for a checked number (the eager path's: no ``__init__``)."""
    out = _new_scalar(_Unfrozen)
    out.data = value
    out.requires_grad = False
    out.trace = None
    out.__class__ = Scalar
    return out


def _result(value, trace, key) -> Scalar:
    out = _new_scalar(_Unfrozen)        # filled in as a plain object, then made a Scalar:
    out.data = value                    # cheaper than four calls past Scalar.__setattr__
    out.requires_grad = True
    out.trace = trace
    out.key = key
    out.__class__ = Scalar
    return out


class _Unfrozen:
    """``Scalar``'s layout without its ``__setattr__``: what :func:`_result` fills in."""

    __slots__ = Scalar.__slots__


def _key_made(scalar: Scalar) -> bool:
    try:
        _key_slot.__get__(scalar, Scalar)
    except AttributeError:
        return False
    return True


def _from_record(record) -> Scalar:
    """The Scalar of an eager record (with its history when it requires grad)."""
    if isinstance(record, Scalar):
        return record
    if not record.requires_grad:
        return Scalar(record.data)
    if record.trace is None:                 # a leaf: only a seed with history can be one
        out = Scalar(record.data, requires_grad=True)
        _key_slot.__set__(out, record.key)
        return out
    return _result(record.data, record.trace, record.key)


def hvp(loss: Scalar, inputs, vectors):
    """The Hessian of the real ``loss`` with respect to ``inputs``, times ``vectors``.

    ``inputs`` is one leaf ``Scalar`` that requires grad, or a sequence of them,
    and ``vectors`` one number per input (same structure). Forward over reverse
    on the recorded trace (:func:`tidu.eager.try_hvp`); returns numbers.

    >>> x, y = Scalar(1.5, requires_grad=True), Scalar(-0.5, requires_grad=True)
    >>> hvp(x * x * y, [x, y], [1.0, 0.0])                # [[2y, 2x], [2x, 0]] [1, 0]
    (-1.0, 3.0)
    """
    single = isinstance(inputs, Scalar)
    inputs = [inputs] if single else list(inputs)
    vectors = [vectors] if single else list(vectors)
    if len(vectors) != len(inputs):
        raise EagerError(f"hvp: {len(vectors)} vectors for {len(inputs)} inputs")
    if not isinstance(loss, Scalar) or not loss.requires_grad or type(loss.data) is complex:
        raise EagerError(f"hvp: loss must be a real Scalar computed from inputs that require "
                         f"grad, got {loss!r}")
    tangents = {}
    for position, (x, v) in enumerate(zip(inputs, vectors)):
        if not isinstance(x, Scalar) or not x.requires_grad or x.trace is not None:
            raise EagerError(f"hvp: inputs[{position}] must be a leaf Scalar that requires grad, "
                             f"got {x!r}")
        if x.key in tangents:
            raise EagerError(f"hvp: inputs[{position}] appears twice")
        if (isinstance(v, bool) or not isinstance(v, Number)
                or _is_complex(v) and type(x.data) is not complex):
            raise EagerError(f"hvp: vectors[{position}] is {v!r}: it must be a number, complex "
                             f"only for a complex input (inputs[{position}] is {x!r})")
        tangents[x.key] = v
    _, products = try_hvp(loss.key, loss.trace, 1.0, tangents, _executor, keep=tangents.keys(),
                          leaf_cotangents=False)
    result = tuple(products.get(x.key, 0.0 * x.data) for x in inputs)
    return result[0] if single else result


_new_scalar = object.__new__
_key_slot = Scalar.key             # the slot itself, past __getattr__
_leaf_key_lock = threading.Lock()


# Ops that take real operands, with their shared recorded graphs: _apply_real's fast path.
_REAL_OPS = {op: _op_info(op)[0] for op in ScalarOp
             if op not in (ScalarOp.REAL, ScalarOp.IMAG, ScalarOp.TO_COMPLEX)}
