"""The eager front end: ``Tensor`` (PyTorch-like) with ``Gradients`` (Burn-like).

>>> x = tensor([1.0, 2.0], requires_grad=True)
>>> grads = (x * x).sum().backward()
>>> grads.grad(x)
array([2., 4.])
>>> x.grad
array([2., 4.])

Data safety
-----------
A recorded op keeps the arrays it read and made (its *saved values*) for
backward. Writing to one of them later would make backward use the new values
with the old graph: a wrong gradient with no error. PyTorch prevents that with a
version counter on every in-place op; NumPy writes do not pass through tidu, so
here every array a ``Tensor`` holds is owned by tidu and reaches the user only
through ``t.data``, copy-on-write:

- ``tensor(arr)`` and ``Tensor(arr)`` copy ``arr`` (as ``torch.tensor`` does), so
  writing to ``arr`` later changes nothing. Ops' results are wrapped without a
  copy; a NumPy array passed to an op that records is copied, since its owner may
  write to it later (wrap a big constant in ``tensor`` once to avoid that copy).
- ``t.data`` is a writable handle: ``p.data -= lr * p.grad`` and
  ``p.data[i] = v`` update ``p`` as in PyTorch. If a recorded op, a view or another
  tensor still uses ``p``'s array, ``t.data`` first gives ``p`` a copy of its own
  (copy-on-write): the saved values stay as they were, so backward differentiates
  the computation that was recorded. Otherwise the array itself is handed out.
- A handle (or a view of it) kept across ops stays writable and updates ``t``, as
  in PyTorch: while one may still be held, an op that records ``t`` saves a copy of
  ``t``'s array, so a write through it can never reach a saved value. A NumPy
  array's reference count says when the handle and its views are all gone (a view
  holds its base); from then on ops save the array itself again.
- ``t.data = array`` gives ``t`` new data; ops recorded before keep the old arrays. A
  tensor a recorded op computed keeps its shape and its kind (real or complex): its
  gradient goes back through that op.
  The caller's ``array`` (or a view of it) counts as a handle.
- A tensor on another library's array (PyTorch, CuPy, Dask: ``tnp.tensor(torch_t)``)
  keeps it in that library. Their reference counts say nothing about views, so once
  ``t.data`` was read, every op that records ``t`` saves a copy of it.
- NumPy conversions (``np.asarray(t)``, ``t.numpy()``, ``stop_gradient``) see a
  read-only view of a read-only array (so the view cannot be made writable again).
- Tensors are immutable otherwise: ``x[i] = v`` and in-place methods raise;
  ``x += y`` makes a new tensor and rebinds ``x`` (as for a Python number), and
  raises where NumPy's in-place update would differ: when another name holds
  ``x``, ``x`` is a leaf that requires grad (update it with ``x.data += y``), or
  ``x``'s values are a view of another tensor's (``x = w[1:3]``, ``w.T``), which
  NumPy and PyTorch would change too.

The cost on the record path is one attribute test per tensor operand.

``t.grad`` is checked on assignment (same shape and dtype as ``t``, or ``None``),
and ``backward`` computes every gradient before it changes any ``.grad`` (all or
nothing), accumulating under a lock so that backward calls from many threads on a
shared leaf lose nothing. A tensor pickles as a leaf: its data and
``requires_grad``, not its history (as in PyTorch).

Higher order
------------
``backward(create_graph=True)`` records the backward work itself, as PyTorch
does: the gradients (in the returned :class:`Gradients` and in the leaves'
``.grad``) are then ``Tensor``s with history, which can be differentiated again
(double backward; any order by repeating). ``primitives.tensor.autograd`` has
``grad`` (``torch.autograd.grad``) and ``hvp``, a Hessian-vector product by
forward over reverse on the recorded trace (:func:`tidu.eager.try_hvp`).

>>> x = tensor([1.0, 2.0], requires_grad=True)
>>> g = (x * x * x).sum().backward(create_graph=True).grad(x)     # 3 x^2, with history
>>> g.sum().backward().grad(x)                                    # 6 x
array([ 6., 12.])

Room: the eager package, above the transforms (``checkpoint`` traces its block with
:func:`primitives.tensor.transforms.make_graph`); imports :mod:`.executor`, the NumPy
surface's ``ArrayOperators``, the floor and ``tidu.eager``.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import operator
import numbers
import sys
import threading
import weakref
from collections.abc import Mapping
from typing import Callable

import numpy as np

from tidu.eager import SMALL_BYTES, EagerInput, RecordedGraph, Recorder, try_backward
from tidu.eager import try_backward_recorded
from tidu.graph import Input
from primitives.tensor.numpy.methods import ArrayOperators
from primitives.tensor.backends import (NUMPY, as_array, device_of, is_view, library_of,
                                        numpy_dtype, owned_copy, to_host, to_library)
from primitives.tensor.buffers import is_cached
from primitives.tensor.errors import BackwardError, TensorShapeError, TensorTypeError
from primitives.tensor.core import Frontend, dtype_of, shape_of
from primitives.tensor.eager.executor import NumpyExecutor
from primitives.tensor.eager.grad_mode import enable_grad, no_grad
from primitives.tensor.eager.grad_mode import mode as _grad_mode
from primitives.tensor.eager.strategy import block as _block, current_strategy
from primitives.tensor.eager.strategy import process_strategy as _process
from primitives.tensor.transforms.checkpoint import checked_policy, checkpoint_scope, saves
from primitives.tensor.transforms.fresh import fresh
from primitives.tensor.transforms.functional import FunctionalError, Traced, unmark_checkpointed
from primitives.tensor.transforms.pytree import tree_flatten, tree_unflatten

_recorder = Recorder()
EXECUTOR = NumpyExecutor()
_CONSTANT = Input("tensor-constant")      # the key of every constant operand (never differentiated)
_leaves: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
_leaf_key_lock = threading.Lock()
_grad_lock = threading.Lock()             # one backward's .grad updates happen as one step


_recorded: dict = {}           # op -> its one-op RecordedGraph (shared: keys are placeholders)
_RECORDED_CACHE_SIZE = 4096    # ops carry shapes, so a program can make many: keep the first


def _arg_keys(count: int) -> tuple:
    """The placeholder input keys of a one-op recorded graph of ``count`` inputs (any
    number: ``concatenate`` and ``stack`` take one per array)."""
    return tuple(f"arg{i}" for i in range(count))


def _recorded_graph(op) -> RecordedGraph:
    try:
        recorded = _recorded.get(op)
    except TypeError:                      # an unhashable op: from_primitive says so
        recorded = None
    if recorded is None:
        recorded = RecordedGraph.from_primitive(op, _arg_keys(op.input_count()))
        if len(_recorded) < _RECORDED_CACHE_SIZE:
            _recorded[op] = recorded
    return recorded


def _can_require_grad(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.inexact)


def _as_array(value):
    """An op's result as an array: NumPy's 0-d results are scalars (made 0-d arrays here, in
    one C call: this is the eager hot path), other libraries' arrays stay as they are."""
    return np.asarray(value) if isinstance(value, np.generic) else as_array(value)


def _is_inexact(array) -> bool:
    """Whether ``array`` holds floating point or complex numbers (values that carry a gradient)."""
    return dtype_of(array).kind in "fc"


def new_tensor(data: np.ndarray, requires_grad: bool = False, key=None, trace=None) -> "Tensor":
    """A tensor on ``data``, which tidu owns (nothing else writes to it): no copy, no checks.

    An op's output is made with the ``trace`` that recorded it and its eager ``key``.
    """
    t = Tensor.__new__(Tensor)
    t._data, t._requires_grad, t._grad, t._key, t._trace = data, requires_grad, None, key, trace
    t._exposed = False
    return t


# Backward keeps the cotangents of the leaves and of the computed tensors still referenced:
# the only ones Gradients.grad can be asked for. The rest are freed after their last use,
# so backward's peak memory is about the forward's (see docs/performance.md).
_referenced: dict = {}         # key of a leaf or recorded op's output -> weak ref to its Tensor
_referenced_limit = [1024]     # size at which dead references are next dropped


def _register_leaf(key, leaf: "Tensor") -> None:
    """Let backward find ``leaf`` by ``key`` (for ``.grad``) and keep its cotangent."""
    _leaves[key] = leaf
    _referenced[key] = weakref.ref(leaf)


def _computed(data: np.ndarray, key, trace) -> "Tensor":
    """The tensor of a recorded op's output ``key``, weakly referenced for backward."""
    t = Tensor.__new__(Tensor)                      # new_tensor, inlined: the hot path
    t._data, t._requires_grad, t._grad, t._key, t._trace = data, True, None, key, trace
    t._exposed = False
    _referenced[key] = weakref.ref(t)
    if len(_referenced) > _referenced_limit[0]:
        _drop_dead_references()
    return t


def _drop_dead_references() -> None:
    # Other threads insert without the lock. dict.copy runs no Python code, so no thread
    # switch can resize the dict under it (building a list of items can: its allocations
    # may start the garbage collector). Keys are fresh per op and leaf: a pop drops no live entry.
    with _leaf_key_lock:
        for key, ref in _referenced.copy().items():
            if ref() is None:
                _referenced.pop(key, None)
        _referenced_limit[0] = max(1024, 2 * len(_referenced))


class _StillReferenced:
    """The keys whose cotangents a backward keeps: leaves and live computed tensors."""

    __slots__ = ()

    def __contains__(self, key) -> bool:
        ref = _referenced.get(key)
        return ref is not None and ref() is not None


_STILL_REFERENCED = _StillReferenced()


def _owned_data(t: "Tensor"):
    """``t``'s array, to be saved or shared. While a handle that ``t.data`` gave out (or
    ``t.data = array``'s array) may still be held, or a view of it, what is saved is a
    copy: a write through either must not reach a saved value. A NumPy array's reference
    count tells when both are gone (a view holds its base); another library's cannot."""
    if not t._exposed:
        return t._data
    if (type(t._data) is np.ndarray and _EXACT_REFS
            and _data_refs(t) <= _SOLE_REFS + is_cached(t._data)):
        t._exposed = False                  # no handle and no view of it is left
        return t._data
    return library_of(t._data).copy(t._data)


def _data_refs(t: "Tensor") -> int:
    return sys.getrefcount(t._data)


class Tensor(ArrayOperators, Frontend):
    """An array (NumPy, PyTorch, CuPy or Dask) that records the ops applied to it when it
    requires grad.

    ``Tensor(data)`` copies ``data``; see the module docstring for how ``.data``
    stays safe to write. ``dtype`` is a NumPy dtype whatever the library (tidu describes
    dtypes by NumPy's); ``data`` and ``device`` are the library's own.
    """

    __slots__ = ("_data", "_requires_grad", "_grad", "_key", "_trace", "_exposed",
                 "_leaf_hooks", "__weakref__")
    level = 1

    def __init__(self, data, requires_grad: bool = False) -> None:
        self._data = _copied(data, None, requires_grad)
        self._requires_grad = bool(requires_grad)
        self._grad = None
        self._key = None
        self._trace = None
        self._exposed = False

    @property
    def data(self) -> np.ndarray:
        """The array, writable: copied first if a recorded op, a view or another tensor uses it.

        >>> p = tensor([1.0, 2.0], requires_grad=True)
        >>> y = p * p
        >>> p.data -= 1.0                     # y's recorded op keeps p's old values
        >>> p.data, y.backward(np.ones(2)).grad(p)
        (array([0., 1.]), array([2., 4.]))
        """
        # A computed tensor's array that its node holds weakly, to be made again for backward
        # (a checkpoint strategy let it go), is copied first: the node must not take written
        # values for the ones it made (tidu.eager.checkpointing keeps only the latter).
        remade = self._trace is not None and self._trace.dropped is not None
        if type(self._data) is not np.ndarray:
            if not self._exposed and (remade or not (
                    _EXACT_REFS and _data_refs(self) <= _SOLE_REFS
                    and not is_view(self._data))):
                self._data = library_of(self._data).copy(self._data)
            self._exposed = True
            return self._data
        if not self._exposed or not self._data.flags.writeable:
            # (the buffer cache's own reference does not count: it reuses only idle arrays)
            if (not remade and _EXACT_REFS
                    and _data_refs(self) <= _SOLE_REFS + is_cached(self._data)
                    and self._data.base is None):
                self._data.flags.writeable = True
            else:
                self._data = self._data.copy()
            self._exposed = True
        return self._data

    @data.setter
    def data(self, value) -> None:
        if value is self._data:               # p.data -= x: the handle t.data gave out
            return
        # another tensor's array is shared, not handed out: the getter copies it before
        # anyone may write to it (that tensor, and what recorded ops saved of it, keep theirs)
        held_by_caller = not isinstance(value, Tensor)
        if not held_by_caller:
            value = _owned_data(value)
        if library_of(value) is not NUMPY:
            array = as_array(value)
        else:
            try:
                array = np.asarray(value)
            except ValueError as error:       # ragged nesting
                raise TensorShapeError(f"assigning .data a {type(value).__name__}: "
                                       f"{error}") from None
            if array.dtype.kind not in "biufc":     # None, a string, an object: as tensor()
                raise TensorTypeError(f"assigning .data: a tensor holds numbers (bool, integer, "
                                      f"floating point, complex); a {type(value).__name__} "
                                      f"gives dtype {array.dtype}")
        if self._requires_grad and not _can_require_grad(dtype_of(array)):
            raise TensorTypeError(f"a tensor that requires grad needs floating point or complex "
                                  f"data, got dtype {dtype_of(array)}")
        if self._trace is not None and self._requires_grad and shape_of(array) != self.shape:
            # ops recorded from now on would send gradients of the new shape into the op
            # that made the old one, which broadcasts or reshapes them into a wrong gradient
            raise TensorShapeError(
                f"assigning .data of shape {shape_of(array)} to a tensor of shape {self.shape} "
                "that a recorded op computed: backward would pass a gradient of the new shape "
                "to that op; keep the shape, or assign to a leaf (t = t.detach(); t.data = ...)")
        if self._trace is not None and self._requires_grad and \
                dtype_of(array).kind != self.dtype.kind:
            raise TensorTypeError(
                f"assigning .data of dtype {dtype_of(array)} to a tensor of dtype {self.dtype} "
                "that a recorded op computed: backward would pass a complex gradient where a "
                "real one belongs, or the reverse; keep it real or complex as it is, or assign "
                "to a leaf (t = t.detach(); t.data = ...)")
        if type(array) is not np.ndarray:
            # (a PyTorch tensor's autograd history is not taken: t.data = w, as PyTorch's)
            library = library_of(array)
            self._data = library.copy(array) if is_view(array) else library.detached(array)
            self._exposed = held_by_caller
            return
        if not array.dtype.isnative:          # (">f8" here): what NumPy computes in, as tensor()
            array = array.astype(array.dtype.newbyteorder("="))
            self._exposed = False
        elif array.base is not None or not array.flags.writeable:
            array = array.copy()              # a view: its base stays writable elsewhere
            self._exposed = False
        else:
            self._exposed = held_by_caller
        self._data = array

    @property
    def requires_grad(self) -> bool:
        """Whether ops on this tensor are recorded; settable on leaves of a float/complex dtype."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self._trace is not None:
            raise BackwardError("requires_grad can only be changed on leaf tensors; this one "
                                "was computed by a recorded op (use .detach() for a copy "
                                "without history)")
        value = bool(value)
        if value and not _can_require_grad(self.dtype):
            raise TensorTypeError(f"only floating point and complex tensors can require grad, "
                                  f"got dtype {self.dtype}")
        self._requires_grad = value
        if value and self._key is not None:
            _register_leaf(self._key, self)    # a key made earlier must still find this leaf

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set :attr:`requires_grad` on this leaf and return it (PyTorch's).

        >>> w = tensor([1.0, 2.0]).requires_grad_()
        >>> w.requires_grad
        True
        """
        self.requires_grad = requires_grad
        return self

    def retain_grad(self) -> None:
        """Accumulate this computed tensor's gradient into its ``.grad`` at each backward, as
        a leaf's (PyTorch's ``retain_grad``; on a leaf, a no-op).

        >>> x = tensor([1.0, 2.0], requires_grad=True)
        >>> h = x * 2
        >>> h.retain_grad()
        >>> _ = (h * h).sum().backward()
        >>> h.grad
        array([4., 8.])
        """
        if not self._requires_grad:
            raise BackwardError("retain_grad of a tensor that does not require grad (it gets no "
                                "gradient)")
        if self._trace is not None:
            _leaves[self._key] = self           # backward fills the .grad of what is there

    @property
    def retains_grad(self) -> bool:
        """Whether :meth:`retain_grad` was called on this computed tensor (``False`` for a
        leaf, as in PyTorch)."""
        return self._trace is not None and _leaves.get(self._key) is self

    def register_hook(self, hook: Callable) -> "HookHandle":
        """Call ``hook(grad)`` each time backward computes this tensor's gradient (PyTorch's
        ``register_hook``); a value it returns (not ``None``) replaces the gradient.

        ``grad`` is a ``Tensor``: the full gradient of this tensor, summed over all its uses
        (those recorded before the hook was registered too), a new one of its own (writing
        to ``grad.data`` changes no other gradient; with ``None`` returned, what was written
        is kept, as in PyTorch). With ``create_graph=True`` it has history, and what the
        hook computes from it is recorded and differentiated in turn. For a computed tensor,
        the returned gradient is what flows on to the tensors it was computed from (and what
        ``retain_grad``, ``autograd.grad`` and ``Gradients`` give for it); for a leaf, what is
        accumulated into ``.grad``. It must have the tensor's shape and dtype (a ``Tensor``
        or an array), else backward raises :class:`BackwardError`. Hooks run in the order
        they were registered, each on the previous one's result, and live as long as the
        recorded op that made the tensor (a leaf's, as long as the leaf), not the Python
        object: a hook holding its leaf is collected with it; one holding the computed
        tensor it hooks keeps the recording alive until removed (as in PyTorch). A hook
        may register or remove hooks: one added to a tensor that backward reaches later
        runs in that backward. The returned handle's ``remove()`` takes the hook off.

        Where PyTorch differs: a write into ``grad`` reaches no other gradient (in PyTorch
        it may reach another input's of the same op, or the seed); an array may be
        returned as well as a ``Tensor``; ``autograd.grad(outputs=[a, b], ...)`` refuses a
        hooked tensor both reach (tidu walks once per output, so the hook would see part
        of its gradient each time), and ``autograd.hvp`` one the loss reaches (it cannot
        run Python hooks: differentiate ``grad(..., create_graph=True)`` instead); a hook
        on a tensor that an ``inputs``/``autograd.grad`` input does not depend on may
        still run (its result changes no gradient asked for); ``grad(loss, [x, h])``
        gives ``h``'s hooked gradient (PyTorch gives it unhooked there, hooked in
        ``grad(loss, h)``).

        >>> x = tensor([1.0, 2.0], requires_grad=True)
        >>> h = x * 3
        >>> handle = h.register_hook(lambda g: g * 10)      # the gradient flowing to x, x 10
        >>> _ = (h * h).sum().backward()
        >>> x.grad                                          # 10 * 2h * 3
        array([180., 360.])
        >>> handle.remove()
        """
        if not self._requires_grad:
            raise BackwardError("register_hook on a tensor that does not require grad (it gets "
                                "no gradient): make the leaves with requires_grad=True")
        if not callable(hook):
            raise TensorTypeError(f"register_hook: the hook must be callable, got a "
                                  f"{type(hook).__name__}")
        key = self.key
        with _leaf_key_lock:
            hooks = _hooks_of(key)
            if hooks is None:
                hooks = _KeyHooks(self)
                _hooks[key] = weakref.ref(hooks, functools.partial(_forget_hooks, key))
                # the hooks go with what backward reaches: the node that made the key, or
                # the leaf (whose key dies with it). A leaf holds its own, so that a hook
                # holding the leaf makes a cycle the garbage collector frees (as in PyTorch)
                if self._trace is not None:
                    _node_hooks[key] = hooks
                    weakref.finalize(self._trace, _drop_hooks, key, hooks)
                else:
                    self._leaf_hooks = hooks
            handle = HookHandle(key, hooks)
            hooks.functions[handle.id] = hook
        return handle

    def _rebound(self, result):
        """``x op= y`` on a tensor that retains its grad: so does the tensor ``x`` names now
        (PyTorch updates ``x`` in place, and its ``.grad`` is that of the updated values)."""
        if type(result) is Tensor and self.retains_grad and result._trace is not None:
            result.retain_grad()
        return result

    def _same_layout(self, other) -> bool:
        # ArrayOperators' check, on the arrays: x * y on 0-d tensors is dispatch-bound
        if type(other) is not Tensor:
            return False
        mine, theirs = self._data, other._data
        return type(mine) is type(theirs) and mine.shape == theirs.shape \
            and mine.dtype == theirs.dtype

    def _update_in_place(self, name: str, other) -> "Tensor | None":
        """In a ``no_grad`` block, ``x op= y`` is ``x.data op= y``: in place (ops recorded
        before keep the old values), ``x`` stays what it was (a leaf, say); elsewhere
        ``None``: it is recorded as ``x = x op y``."""
        if is_view(self._data):
            # PyTorch and NumPy write through a view to its base; tidu's tensors share no
            # memory, so v op= ... would change v alone. (Whether anyone still sees w cannot
            # be told: recorded ops hold arrays too, so a view of a dead w is refused as well.)
            raise TensorTypeError(
                f"Tensor.{name} on a tensor whose values are a view of another's (v = w[...], "
                "a reshape or transpose of w): the update would change v alone, not w, where "
                "NumPy and PyTorch change both; build the new w instead (w = "
                "w.at[...].add(...), tnp.where, tnp.concatenate), or write v = v + ... "
                "(v = w[...].copy() in a no_grad block) to update only v")
        if _grad_mode.enabled:
            return None
        value = other._data if isinstance(other, Tensor) else other
        handle = self.data
        try:
            updated = getattr(operator, name.strip("_"))(handle, value)
        except (TypeError, ValueError) as error:   # NumPy's casting and broadcasting rules
            raise (TensorShapeError if isinstance(error, ValueError) else TensorTypeError)(
                f"Tensor.{name} in a no_grad block (in place, as x.data): {error}") from None
        self.data = updated
        return self

    @property
    def grad(self):
        """The gradient accumulated by backward calls (leaves, and computed tensors after
        :meth:`retain_grad` or in ``backward``'s ``inputs``), or ``None``.

        An array, or a ``Tensor`` with history after ``backward(create_graph=True)``.
        Assigning checks it: ``None``, or an array of this tensor's shape and dtype
        (a ``Tensor``'s values are copied; a ``Tensor`` with history is kept as one).

        >>> x = tensor([1.0, 2.0], requires_grad=True)
        >>> x.grad = tensor([3.0, 4.0])
        >>> x.grad *= 2.0
        >>> x.grad
        array([6., 8.])
        """
        if self._key in _shared_grads:         # handed over by a backward: take a copy if
            _unshare(self)                       # its Gradients are still alive
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if isinstance(value, Tensor):
            if value is not self._grad:      # (x.grad *= s in a no_grad block: x.grad itself)
                value = _tensor_gradient(self, value, "assigning .grad")
        elif value is not None:
            value = _checked_gradient(self, value, "assigning .grad")
        _shared_grads.pop(self._key, None)
        self._grad = value

    @property
    def value_below(self):
        if type(self._data) is not np.ndarray:
            return self._data             # tidu writes into no other library's arrays
        if not self._exposed:
            # a read-only view of a writable array can be made writable again (while a
            # handle is out, its owner may write anyway, and ops save copies)
            self._data.flags.writeable = False
        view = self._data.view()          # for NumPy conversions: they may not write to it
        view.flags.writeable = False
        return view

    @property
    def shape(self) -> tuple:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        data = self._data
        if type(data) is np.ndarray:            # (isinstance on np.dtype's metaclass costs)
            return data.dtype
        dtype = data.dtype
        return dtype if isinstance(dtype, np.dtype) else numpy_dtype(dtype)

    @property
    def device(self):
        """The device of the data (``"cpu"`` for NumPy)."""
        return device_of(self._data)

    @property
    def grad_fn(self):
        """The recorded node that computed this tensor (``None`` for a leaf or a constant, as
        PyTorch's ``grad_fn``): a ``tidu.eager`` trace, which with :attr:`key` is what
        ``tidu.eager``'s functions take (``graph_of_recording``, ``try_backward``).

        >>> x = tensor([1.0], requires_grad=True)
        >>> x.grad_fn is None, (x * 2).grad_fn is not None
        (True, True)
        """
        return self._trace

    @property
    def is_leaf(self) -> bool:
        """Whether no recorded op made this tensor (PyTorch's ``is_leaf``): tensors made by
        ``tensor()`` and results that do not require grad.

        >>> x = tensor([1.0], requires_grad=True)
        >>> x.is_leaf, (x * 2).is_leaf
        (True, False)
        """
        return self._trace is None

    @property
    def key(self):
        """This tensor's eager value key (made on first use for leaves)."""
        key = self._key
        if key is None:
            with _leaf_key_lock:        # two threads asking at once get the same key
                key = self._key
                if key is None:
                    key = Input(_recorder.key_source.fresh_input_key())
                    if self._requires_grad:
                        _register_leaf(key, self)
                    self._key = key
        return key

    def detach(self) -> "Tensor":
        """The same values, cut from the recorded history (no copy: each side copies on write)."""
        return new_tensor(_owned_data(self))

    @property
    def carries_gradient(self) -> bool:
        return self._requires_grad

    def numpy(self) -> np.ndarray:
        """The data as a NumPy array; like PyTorch, refused while the tensor requires grad."""
        return np.asarray(self)

    def item(self):
        """The value of a one-element tensor as a Python number (explicitly without gradient,
        as ``torch.Tensor.item``).

        >>> tensor([[2.5]], requires_grad=True).item()
        2.5
        """
        if math.prod(self.shape) != 1:
            raise TensorShapeError(f"item() of a tensor of shape {self.shape}: only a tensor of "
                                   "one element has one value (use tolist())")
        return to_host(self._data).item()

    def __format__(self, spec: str) -> str:
        """``f"{loss:.4f}"``: a one-element tensor formats as its number (a string carries no
        gradient, as in PyTorch); without a spec, any tensor formats as ``str``.

        >>> f"{tensor(2.0, requires_grad=True):.3f}"
        '2.000'
        """
        if not spec:
            return str(self)
        if math.prod(self.shape) != 1:
            raise TensorTypeError(f"format spec {spec!r} for a tensor of shape {self.shape}: "
                                  "only a one-element tensor formats as a number")
        return format(self.item(), spec)

    def tolist(self):
        """The values as nested Python lists (explicitly without gradient, as PyTorch's)."""
        return to_host(self._data).tolist()

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self._requires_grad else ""
        if type(self._data) is not np.ndarray:
            return f"tensor({self._data!r}{grad})"
        return f"tensor({np.array2string(self._data, separator=', ')}{grad})"

    def __reduce__(self):
        """Pickle as a leaf: the data and ``requires_grad``, no history or ``.grad``, as
        PyTorch does (a pickle is data; :meth:`__deepcopy__` keeps the history)."""
        return _leaf, (self._data, self._requires_grad)

    def __copy__(self) -> "Tensor":
        """A leaf: a leaf sharing this tensor's array (each side copies it on write); a tensor
        with history: a recorded copy (``tnp.copy``), which keeps the history."""
        if self._trace is not None:
            return self.copy()
        return _leaf(_owned_data(self), self._requires_grad)

    def __deepcopy__(self, memo) -> "Tensor":
        """A leaf: a new leaf with a copy of the data, ``requires_grad`` and a copy of
        ``.grad`` (PyTorch's); a tensor with history: a recorded copy (``tnp.copy``), which
        keeps the history (PyTorch raises)."""
        if self._trace is not None:
            return self.copy()
        leaf = _leaf(library_of(self._data).copy(self._data), self._requires_grad)
        grad = self.grad
        if isinstance(grad, Tensor):    # with history (backward(create_graph=True)): its
            leaf._grad = copy.deepcopy(grad, memo)  # recorded copy; the setter takes arrays
        elif grad is not None:
            leaf.grad = copy.deepcopy(grad, memo)
        return leaf

    @classmethod
    def bind(cls, op, args) -> list:
        # The common case first, without the general loop: one or two tensors that require
        # grad and hold NumPy arrays no handle was given out for, in grad mode.
        if len(args) == 1:
            a = args[0]
            if (type(a) is Tensor and a._requires_grad and not a._exposed
                    and type(a._data) is np.ndarray and _grad_mode.enabled):
                d, tr = a._data, a._trace          # (_input_record's test, inlined)
                return _recorded_outputs(op, op.eval(None, [d]), (
                    tr if tr is not None and tr.data is d else _input_record(a, d),), _FIRST,
                    d.nbytes < SMALL_BYTES)
        elif len(args) == 2:
            a, b = args
            if (type(a) is Tensor and type(b) is Tensor and a._requires_grad
                    and b._requires_grad and not a._exposed and not b._exposed
                    and type(a._data) is np.ndarray and type(b._data) is np.ndarray
                    and _grad_mode.enabled):
                d, e, ta, tb = a._data, b._data, a._trace, b._trace
                return _recorded_outputs(op, op.eval(None, [d, e]), (
                    ta if ta is not None and ta.data is d else _input_record(a, d),
                    tb if tb is not None and tb.data is e else _input_record(b, e)), _BOTH,
                    d.nbytes < SMALL_BYTES > e.nbytes)
        data = []
        inputs = []                     # per argument: its EagerInput if it requires grad
        active = []                     # the positions of the arguments that require grad
        differentiated = None           # the type of the first array that requires grad
        mixed = False
        for position, a in enumerate(args):
            if isinstance(a, Tensor):
                d = _owned_data(a) if a._exposed else a._data
                data.append(d)
                if a._requires_grad:
                    if differentiated is None:
                        differentiated = type(d)
                    elif type(d) is not differentiated:
                        mixed = True
                    inputs.append(_input_record(a, d))
                    active.append(position)
                    continue
            else:
                data.append(a if type(a) is np.ndarray else as_array(a))
            inputs.append(None)
        if differentiated is None or not _grad_mode.enabled:
            return [new_tensor(r if type(r) is np.ndarray else _as_array(r)) for r in op.eval(None, data)]
        if mixed:
            _check_one_library(op, args, data)
        if len(active) < len(args):         # constants, recorded as such
            for position, a in enumerate(args):
                if inputs[position] is None:
                    d = data[position]
                    if type(d) is not np.ndarray:
                        if type(d) is not differentiated:
                            _check_constant_library(op, args, position, d)
                        _check_not_recorded_by_torch(op, d)
                    if (d is a or is_view(d)) and not isinstance(a, Tensor):
                        # the caller's array, saved: it may write to it
                        d = data[position] = _saved_constant(d)
                    inputs[position] = EagerInput(_CONSTANT, None, False, d)
        return _recorded_outputs(op, op.eval(None, data), tuple(inputs), tuple(active))

    def backward(self, seed=None, create_graph: bool = False, *,
                 retain_graph: bool | None = None, inputs=None, gradient=None) -> "Gradients":
        """Backpropagate from this tensor; also accumulate into leaves' ``.grad``.

        A real tensor of one element defaults to a seed of 1; any other (a complex
        one too, as in PyTorch) needs a ``seed`` of its shape, real for a real tensor (a Tensor's value is used as a
        constant, unless ``create_graph`` is set). Every ``.grad`` is updated only
        once all gradients are known.

        The returned :class:`Gradients` hold the gradients of the leaves and of
        the computed tensors still referenced when backward runs (the only ones
        one can ask for); every other cotangent is freed after its last use.

        With ``create_graph=True`` the backward work is recorded (PyTorch's
        ``create_graph``): the gradients, and what accumulates into ``.grad``,
        are ``Tensor``s whose history can be differentiated again; a seed that is
        a ``Tensor`` with history (of this tensor's dtype) keeps it.

        PyTorch's keywords: ``gradient`` is ``seed``; ``retain_graph`` is accepted and
        changes nothing (tidu never frees the recording, so backward may always run
        again); ``inputs`` (a ``Tensor`` or a list of them, each requiring grad)
        accumulates into those tensors' ``.grad`` only, computed ones included, and
        the ``Gradients`` hold theirs only. (Positionally the second argument is
        ``create_graph``, not PyTorch's ``retain_graph``.)

        >>> x = tensor([1.0, 2.0], requires_grad=True)
        >>> grads = (x * x).sum().backward()
        >>> grads.grad(x), x.grad                     # Gradients, and .grad accumulated
        (array([2., 4.]), array([2., 4.]))
        >>> y = x ** 3
        >>> y.backward(np.ones(2)).grad(x)             # a seed of y's shape
        array([ 3., 12.])
        >>> g = (x ** 3).sum().backward(create_graph=True).grad(x)   # 3 x^2, with history
        >>> g.sum().backward().grad(x)                 # its derivative: 6 x
        array([ 6., 12.])
        """
        if not self._requires_grad:
            raise BackwardError("backward of a tensor that does not require grad (no input of "
                                "the ops that made it requires grad): make the leaves with "
                                "tnp.tensor(..., requires_grad=True)")
        if gradient is not None:
            if seed is not None:
                raise BackwardError("backward: seed and gradient (PyTorch's name for the seed) "
                                    "are the same argument; pass one of them")
            seed = gradient
        targets = None if inputs is None else _backward_inputs(inputs)
        keep = _STILL_REFERENCED if targets is None else frozenset(targets)
        zeros: set = set()
        cotangents = _distinct(backward_cotangents(self, seed, keep, create_graph, zeros))
        for key in zeros:
            t = _tensor_of(key) if targets is None else targets[key]
            if t is not None:
                cotangents[key] = zero_gradient(t, create_graph)
        gradients = Gradients(cotangents)
        _accumulate_into_leaves(cotangents, gradients, targets)
        return gradients


_FIRST, _BOTH = (0,), (0, 1)


def _input_record(t: Tensor, d):
    """The record of ``t`` (data ``d``, requiring grad) as an input of a node: the node that
    made ``t`` when it keeps ``d`` as its one output (such a ``Trace`` is its output's
    record: one object less per use), else a new ``EagerInput``."""
    trace = t._trace
    if trace is not None and trace.data is d:
        return trace
    key = t._key
    return EagerInput(t.key if key is None else key, trace, True, d)


def _recorded_outputs(op, results, inputs: tuple, active: tuple, small_inputs: bool = False
                      ) -> list:
    """The tensors of ``op``'s ``results``, its node recorded on ``inputs`` (the positions
    ``active`` require grad): floating point and complex outputs require grad.

    ``small_inputs`` says every input's data is under ``SMALL_BYTES``: a node whose values
    all are keeps them all under any checkpoint strategy, so it is recorded without one."""
    try:
        recorded = _recorded[op]
    except (KeyError, TypeError):           # new, or an unhashable op
        recorded = _recorded_graph(op)
    if len(results) == 1:                   # the common case, without the loops
        result = results[0]
        if type(result) is not np.ndarray:
            result = _as_array(result)
        strategy = None if small_inputs and result.nbytes < SMALL_BYTES else (
            _block.strategy or _process[0])     # current_strategy(), inlined: hot path
        trace = _recorder.record_active(recorded, inputs, active, (result,), None, strategy)
        if result.dtype.kind in "fc" if type(result) is np.ndarray else _is_inexact(result):
            return [_computed(result, trace.output_key, trace)]
        return [new_tensor(result)]         # ints, bools: no grad
    results = tuple([r if type(r) is np.ndarray else _as_array(r) for r in results])
    trace = _recorder.record_active(recorded, inputs, active, results, None,
                                    _block.strategy or _process[0])
    return [_computed(result, key, trace)
            if (result.dtype.kind in "fc" if type(result) is np.ndarray
                else _is_inexact(result)) else new_tensor(result)
            for result, key in zip(results, trace.output_keys)]   # ints, bools: no grad


def _distinct(cotangents: dict) -> dict:
    """``cotangents`` with each array that shares memory with another's replaced by a copy:
    backward hands one cotangent to several values (both inputs of ``a + b``, a reshape's
    input as a view), and no gradient may change when another is written to."""
    keys = list(cotangents)
    return dict(zip(keys, fresh([cotangents[key] for key in keys], held=())))


def _saved_constant(d):
    """A copy of the caller's array ``d`` for a recorded op to keep. A broadcast view (what
    a Python number operand becomes) is copied as its one distinct row and broadcast
    again, read-only: ``0.1 * t`` keeps 8 bytes, not an array of ``t``'s shape.

    >>> _saved_constant(np.broadcast_to(np.float32(0.1), (512, 256))).base.nbytes
    4
    """
    if type(d) is np.ndarray and d.size > 1 and 0 in d.strides:
        distinct = d[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in d.strides)]
        return np.broadcast_to(distinct.copy(), d.shape)
    return library_of(d).copy(d)


def _check_not_recorded_by_torch(op, d) -> None:
    """Refuse a PyTorch tensor that PyTorch's own autograd records (it requires grad, in
    PyTorch's grad mode) as a constant of a recorded op: the op keeps a detached copy, so
    PyTorch's gradient through it would be silently lost."""
    if library_of(d).records(d):
        raise TensorTypeError(
            f"{op!r}: a PyTorch tensor that requires grad in PyTorch's autograd, as a constant "
            "of an op tidu records: PyTorch's gradient through it would be lost; make it a "
            "tidu tensor (tnp.tensor(w, requires_grad=True)) to differentiate it, or pass "
            "w.detach() for a constant")


def _check_one_library(op, args, data) -> None:
    """Tensors that require grad, in one op, hold arrays of one library (else a
    :class:`TensorTypeError` naming both, as the functional transforms raise): a gradient
    flowing into a leaf of one library from an op computed in another would come back in
    the wrong library, or not at all."""
    first = None
    for position, a in enumerate(args):
        if isinstance(a, Tensor) and a._requires_grad:
            library = library_of(data[position])
            if first is None:
                first = library
            elif library is not first:
                raise TensorTypeError(
                    f"{getattr(op, 'name', op)}: tensors that require grad from two array "
                    f"libraries, {first.name} and {library.name} (argument {position}); "
                    "convert them to one library, or detach() one of them")


def _check_constant_library(op, args, position: int, constant) -> None:
    """A constant in an op with tensors that require grad is a NumPy value (converted to
    their library) or of their library: one of a third library would make the op compute
    in it, and the tensors' gradients come back in it (a NumPy leaf's ``.grad`` a PyTorch
    tensor)."""
    library = library_of(constant)
    if library is NUMPY:
        return
    theirs = next(library_of(a._data) for a in args if isinstance(a, Tensor) and a._requires_grad)
    if library is not theirs:
        raise TensorTypeError(
            f"{getattr(op, 'name', op)}: a constant of {library.name} (argument {position}) "
            f"with tensors that require grad of {theirs.name}: their gradients would come back "
            f"in {library.name}; convert the constant to {theirs.name} (or make the tensors "
            f"from {library.name} arrays)")


# The count _data_refs gives when only the tensor holds its array (measured, so it is right
# for this interpreter); exact only with the GIL, so without it t.data always copies.
_SOLE_REFS = _data_refs(new_tensor(np.empty(0)))
_EXACT_REFS = getattr(sys, "_is_gil_enabled", lambda: True)()


# --- register_hook -------------------------------------------------------------------------

# Only keys with hooks are here. A computed tensor's _KeyHooks live as long as the node that
# made it (_node_hooks holds them); a leaf's as long as the leaf (its _leaf_hooks).
_hooks: dict = {}              # key of a tensor -> weak reference to its _KeyHooks
_node_hooks: dict = {}         # key of a computed tensor -> its _KeyHooks
_hook_ids = itertools.count()


def _hooks_of(key) -> "_KeyHooks | None":
    ref = _hooks.get(key)
    return ref() if ref is not None else None


class HookHandle:
    """What :meth:`Tensor.register_hook` returns: ``remove()`` takes the hook off (again: no
    effect), as PyTorch's ``RemovableHandle``; in a ``with`` block, at the block's end.

    >>> x = tensor([1.0], requires_grad=True)
    >>> with x.register_hook(lambda g: g * 2):
    ...     (x * 1.0).sum().backward().grad(x)
    array([2.])
    >>> (x * 1.0).sum().backward().grad(x)
    array([1.])
    """

    __slots__ = ("id", "_key", "_hooks")

    def __init__(self, key, hooks: "_KeyHooks") -> None:
        self.id = next(_hook_ids)
        self._key = key
        self._hooks = weakref.ref(hooks)    # a kept handle keeps no hook (nor leaf) alive

    def remove(self) -> None:
        """Take the hook off (a second call does nothing)."""
        with _leaf_key_lock:
            hooks = self._hooks()
            if hooks is not None:
                hooks.functions.pop(self.id, None)
                if not hooks.functions:
                    _drop_hooks(self._key, hooks)

    def __enter__(self) -> "HookHandle":
        return self

    def __exit__(self, *exc_info) -> None:
        self.remove()


def _drop_hooks(key, hooks: "_KeyHooks") -> None:
    """Forget ``key``'s ``hooks`` (all removed, or their node is gone)."""
    if _hooks_of(key) is hooks:
        _hooks.pop(key, None)
    if _node_hooks.get(key) is hooks:
        _node_hooks.pop(key, None)


def _forget_hooks(key, ref) -> None:
    """The weak reference ``ref`` to ``key``'s hooks died (their leaf was collected)."""
    if _hooks.get(key) is ref:
        _hooks.pop(key, None)


class _KeyHooks:
    """The hooks of one key, in registration order, and how to make its zero gradient."""

    __slots__ = ("functions", "zeros", "__weakref__")

    def __init__(self, t: Tensor) -> None:
        self.functions: dict = {}         # handle id -> hook
        if t._trace is None:              # a leaf's .data may be given another shape later
            leaf = weakref.ref(t)         # (its hooks run only while it lives: it holds them)
            self.zeros = lambda: zero_gradient(leaf())      # noqa: E731
            return
        shape, dtype = t.shape, t.dtype
        data = t._data
        if type(data) is np.ndarray:
            self.zeros = lambda: np.zeros(shape, dtype)   # noqa: E731
        else:                             # (without keeping the array alive)
            xp, own_dtype, device = library_of(data).xp, data.dtype, device_of(data)
            self.zeros = lambda: xp.zeros(shape, dtype=own_dtype, device=device)  # noqa: E731

    def run(self, create_graph: bool, cotangent):
        """The hooks on ``cotangent`` (an array, an ``EagerInput`` record when
        ``create_graph``, ``None`` for a zero), for ``tidu.eager``'s ``hooks``: the new
        cotangent, or ``None`` to keep it."""
        functions = list(self.functions.values())
        if not functions:
            return None
        if create_graph:
            given = (new_tensor(self.zeros()) if cotangent is None
                     else _from_record(cotangent))
        else:
            zeros = cotangent is None
            given = new_tensor(self.zeros() if zeros else library_of(cotangent).copy(cotangent))
        g = given
        # as PyTorch's: what a hook computes is recorded only in a backward that records
        with (enable_grad() if create_graph else no_grad()):
            for hook in functions:
                result = hook(g)
                if result is not None:
                    g = self._checked(result, g, hook)
        if g is given and not given._exposed:       # unchanged (not written through .data)
            return None
        data = _owned_data(g)
        if create_graph:
            return (EagerInput(g.key, g._trace, True, data) if g._requires_grad
                    else EagerInput(_CONSTANT, None, False, data))
        # the hook may still hold what it returned (or the tensor it was given): a copy
        return library_of(data).copy(data)

    def _checked(self, result, g: Tensor, hook) -> Tensor:
        """The hook's ``result`` as a ``Tensor`` of ``g``'s shape and dtype, or an error."""
        name = getattr(hook, "__name__", type(hook).__name__)
        if not isinstance(result, Tensor):
            if not (isinstance(result, (np.ndarray, np.generic))
                    or library_of(result) is not NUMPY):
                raise BackwardError(f"register_hook: hook {name!r} returned a "
                                    f"{type(result).__name__}; a hook returns the new "
                                    f"gradient (a Tensor or an array of shape {g.shape} and "
                                    f"dtype {g.dtype}) or None")
            result = new_tensor(as_array(result) if library_of(result) is not NUMPY
                                else np.asarray(result))
        if result.shape != g.shape or result.dtype != g.dtype:
            raise BackwardError(f"register_hook: hook {name!r} returned a gradient of shape "
                                f"{result.shape} and dtype {result.dtype} for a gradient of "
                                f"shape {g.shape} and dtype {g.dtype}; it must keep both")
        if library_of(result._data) is not library_of(g._data):
            raise BackwardError(f"register_hook: hook {name!r} returned an array of "
                                f"{library_of(result._data).name} for a gradient of "
                                f"{library_of(g._data).name}")
        return result


class _WalkHooks(Mapping):
    """The registered hooks as ``tidu.eager``'s ``hooks`` argument (key -> callable): a live
    view of ``_hooks``, so a backward builds nothing per hook, and a hook registered by
    another hook while the walk runs is found when the walk reaches its key (as PyTorch)."""

    __slots__ = ("create_graph", "called")
    __contains__ = staticmethod(_hooks.__contains__)    # the walk's test at each node

    def __init__(self, create_graph: bool, called: set | None) -> None:
        self.create_graph, self.called = create_graph, called

    def __getitem__(self, key) -> Callable:
        hooks = _hooks_of(key)
        if hooks is None:                   # removed while the walk ran
            return _no_hook
        return functools.partial(_run_hooks, hooks, self.create_graph, self.called, key)

    def __iter__(self):
        return iter(_hooks.copy())          # (copy: runs no Python code, so no collection)

    def __len__(self) -> int:
        return len(_hooks)


def _no_hook(cotangent) -> None:
    return None


def _walk_hooks(create_graph: bool, called: set | None) -> _WalkHooks | None:
    """The registered hooks as ``tidu.eager``'s ``hooks`` argument, or ``None`` when there is
    none (the plain walk).

    ``called`` (a set shared by the walks of one ``autograd.grad`` of several outputs)
    collects the keys whose hooks ran: a second walk reaching one raises, since that hook
    would run on a part of the gradient, not on all of it as in PyTorch's one walk."""
    if not _hooks:
        return None
    return _WalkHooks(create_graph, called)


def _run_hooks(hooks: _KeyHooks, create_graph: bool, called: set | None, key, cotangent):
    if called is not None:
        if key in called:
            raise BackwardError(
                "grad: a tensor with a hook (register_hook) is reached from more than one of "
                "the outputs; tidu runs one backward per output, so the hook would see a part "
                "of the gradient each time: pass one output (their sum, the grad_outputs "
                "folded in: tnp.sum(a * ga) + tnp.sum(b * gb))")
        called.add(key)
    return hooks.run(create_graph, cotangent)


def reaches_a_hook(t: Tensor) -> bool:
    """Whether backward from ``t`` reaches a tensor with a hook (one loop over its history).

    >>> x = tensor([1.0], requires_grad=True)
    >>> y = (x * 2).sum()
    >>> reaches_a_hook(y), x.register_hook(print) is not None, reaches_a_hook(y)
    (False, True, True)
    """
    if not _hooks:
        return False
    if t.key in _hooks:
        return True
    stack = [t._trace] if t._trace is not None else []
    seen = set(map(id, stack))
    while stack:
        node = stack.pop()
        for item in node.inputs:
            if not item.requires_grad:
                continue
            if item.key in _hooks:
                return True
            parent = item.trace
            if parent is not None and id(parent) not in seen:
                seen.add(id(parent))
                stack.append(parent)
    return False


def _leaf(data: np.ndarray, requires_grad: bool) -> Tensor:
    """A leaf on ``data`` (what a pickled tensor becomes)."""
    return new_tensor(data, requires_grad)


def backward_cotangents(t: Tensor, seed, keep, create_graph: bool, zeros: set | None = None,
                        hooks_called: set | None = None) -> dict:
    """The cotangents of ``t``'s backward for the keys in ``keep``: arrays, or Tensors with
    history when ``create_graph``. With ``zeros`` (a set), the keys in ``keep`` that
    backward reached with a zero cotangent are added to it (they are not in the result).
    The registered hooks run (:meth:`Tensor.register_hook`); with ``hooks_called`` (a set
    shared by several calls), a hook that already ran in one of them raises."""
    if create_graph:
        return _recorded_backward(t, seed, keep, zeros, hooks_called)
    return try_backward(t.key, t._trace, _checked_seed(t, seed), EXECUTOR, keep=keep,
                        zeros=zeros, hooks=_walk_hooks(False, hooks_called))


def zero_gradient(t: Tensor, create_graph: bool = False):
    """The gradient of ``t`` when backward reached it with a zero cotangent (through ``sign``,
    ``round``...): zeros of its shape and dtype, as PyTorch gives; a ``Tensor`` without
    history when ``create_graph``."""
    zeros = library_of(t._data).xp.zeros_like(t._data)
    return new_tensor(zeros) if create_graph else zeros


def _tensor_of(key) -> "Tensor | None":
    """The live leaf or computed tensor of ``key`` (``None`` once it is gone)."""
    leaf = _leaves.get(key)
    if leaf is not None:
        return leaf
    ref = _referenced.get(key)
    return ref() if ref is not None else None


def _recorded_backward(t: Tensor, seed, keep, zeros: set | None = None,
                       hooks_called: set | None = None) -> dict:
    """``t``'s backward with its work recorded: ``{key: Tensor}`` (see ``create_graph``)."""
    if isinstance(seed, Tensor) and seed._requires_grad:
        if seed.shape != t.shape or seed.dtype != t.dtype:
            raise BackwardError(f"backward: a seed with history must have the tensor's shape "
                                f"and dtype, {t.shape} {t.dtype}; got {seed.shape} {seed.dtype}")
        seed = EagerInput(seed.key, seed._trace, True, _owned_data(seed))
    else:
        seed = _checked_seed(t, seed)
    records = try_backward_recorded(t.key, t._trace, seed, EXECUTOR, _recorder, keep=keep,
                                    zeros=zeros, hooks=_walk_hooks(True, hooks_called))
    return {key: _from_record(record) for key, record in records.items()}


def _from_record(record: EagerInput) -> Tensor:
    """The tensor of an eager record (with history when it requires grad)."""
    data = record.data if type(record.data) is np.ndarray else as_array(record.data)
    if not record.requires_grad:
        return new_tensor(data)
    if record.trace is None:                  # a leaf itself (the seed of a leaf's backward)
        leaf = _leaves.get(record.key)
        return _another(leaf) if leaf is not None else new_tensor(data, True, record.key)
    ref = _referenced.get(record.key)
    t = ref() if ref is not None else None
    # A tensor that exists already (the seed, an input of the graph, or the gradient of
    # another key: backward passes one cotangent to both inputs of x + y) is not handed out
    # itself: writing to one gradient's .data must change no other tensor.
    return _another(t) if t is not None else _computed(data, record.key, record.trace)


def _another(t: "Tensor") -> "Tensor":
    """A new ``Tensor`` object for the value ``t`` is: its key and history, its array shared
    (each side copies it on write, as for :meth:`Tensor.detach`)."""
    return new_tensor(_owned_data(t), t._requires_grad, t._key, t._trace)


def _checked_gradient(t: Tensor, value, what: str):
    """``value`` as the gradient of ``t``: an array of ``t``'s shape and dtype (in ``t``'s
    library), or an error."""
    array = as_array(value) if library_of(value) is not NUMPY else np.asarray(value)
    if shape_of(array) != t.shape:
        raise TensorShapeError(f"{what}: a gradient of shape {shape_of(array)} for a tensor of "
                               f"shape {t.shape}")
    if dtype_of(array) != t.dtype:
        raise TensorTypeError(f"{what}: a gradient of dtype {dtype_of(array)} for a tensor of "
                              f"dtype {t.dtype}")
    return in_library_of_tensor(t, array)


def _tensor_gradient(t: Tensor, g: Tensor, what: str):
    """The ``Tensor`` ``g`` as the gradient of ``t``: with history, a ``Tensor`` keeping it
    (as ``backward(create_graph=True)`` gives one); otherwise a copy of its values, writable
    as any gradient (``g``'s own array may be saved by a recorded op)."""
    if not g._requires_grad:
        return _checked_gradient(t, library_of(g._data).copy(g._data), what)
    if g.shape != t.shape:
        raise TensorShapeError(f"{what}: a gradient of shape {g.shape} for a tensor of shape "
                               f"{t.shape}")
    if g.dtype != t.dtype:
        raise TensorTypeError(f"{what}: a gradient of dtype {g.dtype} for a tensor of dtype "
                              f"{t.dtype}")
    if library_of(g._data) is not library_of(t._data):
        raise TensorTypeError(f"{what}: a Tensor of {library_of(g._data).name} for a tensor of "
                              f"{library_of(t._data).name}")
    return _another(g)


def in_library_of_tensor(t: Tensor, array):
    """``array`` in the library of ``t``'s data (a NumPy array for a PyTorch tensor is
    converted; two other libraries are a ``TensorTypeError``)."""
    library = library_of(t._data)
    if library_of(array) is library:
        return array
    if library_of(array) is not NUMPY:
        raise TensorTypeError(f"an array of {library_of(array).name} for a tensor of "
                              f"{library.name}")
    return to_library(array, library, t._data)


def _checked_seed(t: Tensor, seed) -> np.ndarray:
    """The seed for ``t.backward``, as a new array of ``t``'s dtype (it may become a ``.grad``).

    The executor's ``check_seed`` checks it (numbers, ``t``'s shape, not complex for a
    real ``t``) before the cast, which would hide a complex seed's imaginary part.
    """
    if seed is None:
        if math.prod(t.shape) != 1:
            raise BackwardError(f"backward of a tensor of shape {t.shape} needs a seed (only "
                                "one-element tensors default to a seed of 1)")
        if t.dtype.kind == "c":
            raise BackwardError(f"backward of a complex tensor ({t.dtype}) needs a seed: a "
                                "seed of 1 would differentiate its real part only (PyTorch "
                                "refuses too); pass seed=1 if that is meant, or take a real "
                                "loss first (abs(z) ** 2, z.real)")
        if type(t._data) is not np.ndarray:
            return library_of(t._data).xp.ones_like(t._data)
        return np.ones_like(t._data)
    if isinstance(seed, Tensor):
        seed = seed._data                    # as PyTorch: its value, not its history
    EXECUTOR.check_seed(seed, t._data)
    array = as_array(seed) if library_of(seed) is not NUMPY else np.asarray(seed)
    if type(t._data) is np.ndarray and type(array) is np.ndarray:
        return np.array(array, dtype=t.dtype)
    try:
        array = in_library_of_tensor(t, array)
    except TensorTypeError as error:
        raise BackwardError(f"backward: the seed is {error}") from None
    xp = library_of(array).xp
    return xp.asarray(xp.astype(array, t.dtype), copy=True)


# A leaf whose .grad was None takes its cotangent array as .grad without a copy, shared with
# the Gradients that backward returns: whichever side is read first while the other is alive
# takes a copy, so the two never alias. Most Gradients are dropped at once (loss.backward()),
# and then nothing is copied. Leaf key -> weak reference to the Gradients sharing its .grad.
_shared_grads: dict = {}
_shared_grads_limit = [1024]    # size at which entries of dropped Gradients are next removed


def _unshare(leaf: "Tensor") -> None:
    """``leaf.grad`` is about to be read: a copy of it if its Gradients still hold the array."""
    with _grad_lock:
        ref = _shared_grads.pop(leaf._key, None)
        gradients = ref() if ref is not None else None
        if gradients is not None and gradients._by_key.get(leaf._key) is leaf._grad:
            gradients._shared.discard(leaf._key)
            leaf._grad = _fresh(leaf._grad)


def _backward_inputs(inputs) -> dict:
    """``backward``'s ``inputs`` (a Tensor or a list or tuple of them, each requiring grad) by
    key."""
    tensors = [inputs] if isinstance(inputs, Tensor) else inputs
    if not isinstance(tensors, (list, tuple)):
        raise BackwardError(f"backward: inputs must be a Tensor or a list or tuple of them, got "
                            f"{type(inputs).__name__}")
    if not tensors:
        raise BackwardError("backward: inputs is empty (pass None to accumulate into every leaf)")
    targets = {}
    for position, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise BackwardError(f"backward: inputs[{position}] is a {type(t).__name__}, not a "
                                "Tensor")
        if not t._requires_grad:
            raise BackwardError(f"backward: inputs[{position}] does not require grad, so it has "
                                "no gradient")
        targets[t.key] = t
    return targets


def _accumulate_into_leaves(cotangents: dict, gradients: "Gradients",
                            targets: dict | None = None) -> None:
    """Add each leaf's cotangent to its ``.grad`` (with ``targets``, a dict key -> tensor:
    those tensors' only; else the leaves' and the computed tensors' that retain their
    gradient): all checked first, then all set under a lock."""
    updates = []
    for key, value in cotangents.items():
        # (a computed tensor is among the _leaves only once retain_grad() put it there)
        leaf = _leaves.get(key) if targets is None else targets.get(key)
        if leaf is None or not leaf._requires_grad:
            continue
        if shape_of(value) != leaf.shape or dtype_of(value) != leaf.dtype:
            raise BackwardError(f"backward: the gradient of leaf {leaf.key!r} is "
                                f"{dtype_of(value)} of shape {shape_of(value)} but the tensor is now {leaf.dtype} of "
                                f"shape {leaf.shape} (its .data was replaced after it was used)")
        grad = leaf._grad
        if grad is not None and (shape_of(grad) != leaf.shape or dtype_of(grad) != leaf.dtype):
            raise BackwardError(f"backward: the .grad of leaf {leaf.key!r} is {dtype_of(grad)} "
                                f"of shape {shape_of(grad)} but the tensor is now {leaf.dtype} "
                                f"of shape {leaf.shape} (its .data was replaced): set its .grad "
                                "to None (or zero_grad(set_to_none=True)) first")
        updates.append((leaf, value))
    with _grad_lock:
        # .grad never aliases another leaf's .grad, nor (once read) the Gradients: a first
        # gradient is handed over (see _shared_grads), a sum is a new array. (A Tensor
        # gradient, from create_graph, is another Tensor on its array: each copies on write.)
        handed = set()                  # ids of the arrays handed over by this call
        sums = []
        for leaf, value in updates:
            if leaf._grad is not None:
                sums.append((leaf, leaf._grad + value, False))
            elif _can_hand_over(value) and id(value) not in handed:
                handed.add(id(value))
                sums.append((leaf, value, True))
            else:
                sums.append((leaf, _fresh(value), False))
        for leaf, grad, shared in sums:
            _shared_grads.pop(leaf._key, None)
            if shared:
                _shared_grads[leaf._key] = weakref.ref(gradients)
                gradients._shared.add(leaf._key)
            leaf._grad = grad
        if len(_shared_grads) > _shared_grads_limit[0]:     # leaves made and dropped in a loop
            for key, ref in list(_shared_grads.items()):
                if ref() is None:
                    del _shared_grads[key]
            _shared_grads_limit[0] = max(1024, 2 * len(_shared_grads))


def _can_hand_over(value) -> bool:
    """A NumPy array that owns its memory: not a view of another cotangent (nor of a saved
    value), so a leaf may take it as its ``.grad``."""
    return type(value) is np.ndarray and value.base is None


def _fresh(value):
    return _another(value) if isinstance(value, Tensor) else library_of(value).copy(value)


class Gradients:
    """Gradients from one backward call, by tensor (Burn's ``grad``/``remove``/``replace``).

    Arrays, or ``Tensor``s with history after ``backward(create_graph=True)``.
    """

    __slots__ = ("_by_key", "_shared", "__weakref__")

    def __init__(self, by_key: dict) -> None:
        self._by_key = by_key
        self._shared: set = set()      # keys whose array a leaf's .grad holds too

    def _own(self, key):
        """The gradient of ``key``, first copied if a leaf's ``.grad`` still holds its array."""
        value = self._by_key.get(key)
        if key in self._shared:
            with _grad_lock:
                self._shared.discard(key)
                leaf = _leaves.get(key)
                if leaf is not None and leaf._grad is value:
                    value = self._by_key[key] = _fresh(value)
                    ref = _shared_grads.get(key)
                    if ref is not None and ref() is self:
                        del _shared_grads[key]
        return value

    def grad(self, t: Tensor):
        """The gradient of ``t``, or ``None`` if it received none.

        ``t`` is the ``Tensor`` itself, not its data: an array is refused with a
        :class:`TensorTypeError` (an array has no identity in the recording).

        >>> x = tensor([1.0, 2.0], requires_grad=True)
        >>> grads = (x * x).sum().backward()
        >>> grads.grad(x.data)
        Traceback (most recent call last):
        ...
        primitives.tensor.errors.TensorTypeError: Gradients.grad takes a Tensor (one of those backward differentiated), got a ndarray; pass the Tensor itself (x, not x.data or an array of its values)
        """
        return self._own(_key_of(t, "grad"))

    def remove(self, t: Tensor):
        """Take out and return the gradient of ``t`` (``None`` if absent)."""
        key = _key_of(t, "remove")
        value = self._own(key)
        self._by_key.pop(key, None)
        return value

    def replace(self, t: Tensor, g) -> None:
        """Set the gradient of ``t`` to ``g``, an array of ``t``'s shape and dtype (a
        ``Tensor``'s values are copied; a ``Tensor`` with history is kept as one)."""
        key = _key_of(t, "replace")
        self._shared.discard(key)
        self._by_key[key] = (_tensor_gradient(t, g, "Gradients.replace") if isinstance(g, Tensor)
                             else _checked_gradient(t, g, "Gradients.replace"))

    def __contains__(self, t: Tensor) -> bool:
        return isinstance(t, Tensor) and t.key in self._by_key


def _key_of(t, method: str):
    """The key of the ``Tensor`` ``t`` given to ``Gradients.<method>``."""
    if isinstance(t, Tensor):
        return t.key
    raise TensorTypeError(f"Gradients.{method} takes a Tensor (one of those backward "
                          f"differentiated), got a {type(t).__name__}; pass the Tensor itself "
                          "(x, not x.data or an array of its values)")


def tensor(data, requires_grad: bool = False, dtype=None) -> Tensor:
    """A :class:`Tensor` holding a copy of array-like ``data`` (as ``torch.tensor``).

    A tensor that requires grad is refused (its copy would silently lose its
    history): pass ``t.detach()`` for a constant copy. An array in the other byte
    order (``">f8"`` on most machines) is copied into this machine's: the same
    numbers, in the dtype NumPy computes them in (PyTorch refuses such arrays).

    >>> x = tensor([1.0, 2.0], requires_grad=True)
    >>> x.requires_grad, x.dtype, x.shape
    (True, dtype('float64'), (2,))
    >>> tensor(np.arange(3), dtype=np.float32).data
    array([0., 1., 2.], dtype=float32)
    """
    return new_tensor(_copied(data, dtype, requires_grad), bool(requires_grad))


def _copied(data, dtype, requires_grad: bool):
    """A new array of ``data`` for a leaf, checked (see :func:`tensor`); an array of another
    library than NumPy stays in its library, on its device."""
    if isinstance(data, Tensor):
        if data._requires_grad:
            raise TensorTypeError("tensor() of a Tensor that requires grad would copy its data "
                                  "without its history; use t.detach() for a constant copy, "
                                  "or t itself to keep the gradient")
        data = data._data
    library = library_of(data)
    if dtype is not None:
        dtype = numpy_dtype(dtype)            # a library's dtype (torch.float16) too
    if library is NUMPY:
        try:
            array = np.array(data, dtype=dtype)
        except ValueError as error:           # ragged nesting, a string that is no number
            raise TensorShapeError(f"tensor() of a {type(data).__name__}: {error}") from error
        if array.dtype.kind not in "biufc":
            raise TensorTypeError(f"tensor() holds numbers (bool, integer, floating point, "
                                  f"complex); a {type(data).__name__} gives dtype "
                                  f"{array.dtype}")
        if not array.dtype.isnative:          # (">f8" on this machine): what NumPy computes in
            array = array.astype(array.dtype.newbyteorder("="))
    else:
        xp = library.xp
        array = library.copy(as_array(data) if dtype is None
                             else xp.astype(as_array(data), dtype))
    numpy_dtype(array.dtype)                  # a dtype NumPy lacks (bfloat16) is refused here
    if requires_grad and not _can_require_grad(dtype_of(array)):
        raise TensorTypeError(f"only floating point and complex tensors can require grad, "
                              f"got dtype {dtype_of(array)}")
    return array


def checkpoint(f: Callable, policy=None) -> Callable:
    """``f`` with its intermediates recomputed during backward instead of kept.

    ``checkpoint(f)(*args, **kwargs)`` takes what ``f`` takes, as
    ``jax.checkpoint`` does: positional and keyword arguments, each an array, a
    ``Tensor`` or a (nested) tuple, list or dict of them; other leaves (Python
    numbers, strings, ``None``, objects) reach ``f`` as they are, as constants.
    It returns what ``f`` returns: an array or a (nested) tuple, list or dict of
    arrays (``Tensor``s on eager tensors).

    On eager tensors, ``f`` is traced at the given values, run once, and recorded
    as one node that keeps none of its intermediates, or those ``policy`` saves:
    JAX's names ``"nothing_saveable"`` (the default), ``"everything_saveable"``,
    ``"dots_saveable"``, ``"dots_with_no_batch_dims_saveable"``, or a function of
    the operation returning whether to keep its result
    (:mod:`primitives.tensor.transforms.checkpoint`). Every ``Tensor`` leaf of
    the arguments, and every one ``f`` closes over, gets its gradient through the
    node; array leaves are constants. Its gradient is ``f``'s: what ``f`` computes in
    a ``no_grad`` block is a constant there too, and inside ``no_grad`` the call is
    ``f``'s, recording nothing. Under the functional transforms ``f`` runs
    as it is, and ``jit`` compiles a program that recomputes what the block made
    and the policy does not save (docs/guides/memory.md).

    >>> x = tensor([0.5, 1.0], requires_grad=True)
    >>> from primitives.tensor import numpy as tnp
    >>> y = checkpoint(lambda v: tnp.sin(v) * v)(x)
    >>> np.allclose(tnp.sum(y).backward().grad(x), np.cos(x.data) * x.data + np.sin(x.data))
    True
    >>> block = checkpoint(lambda p, v, *, scale: {"y": tnp.tanh(p["w"] * v) * scale})
    >>> out = block({"w": x, "name": "layer"}, np.array([2.0, 3.0]), scale=2.0)
    >>> np.allclose(tnp.sum(out["y"]).backward().grad(x),
    ...             2.0 * np.array([2.0, 3.0]) / np.cosh(x.data * [2.0, 3.0]) ** 2)
    True
    """
    if not callable(f):
        raise FunctionalError(f"checkpoint: expected a callable function, got {f!r} "
                              f"({type(f).__name__})")
    policy = checked_policy(policy, FunctionalError)

    @functools.wraps(f)
    def wrapped(*args, **kwargs):
        leaves, in_tree = tree_flatten((args, kwargs))
        if any(isinstance(a, Frontend) and not isinstance(a, Tensor) for a in leaves):
            with checkpoint_scope(policy):  # under a functional transform: jit recomputes
                out = f(*args, **kwargs)
            unmark_checkpointed(out)
            return out
        if not _grad_mode.enabled:          # nothing is recorded: f itself, as in PyTorch
            return f(*args, **kwargs)
        return _checkpointed_on_tensors(f, policy, leaves, in_tree)

    return wrapped


def _checkpointed_on_tensors(f, policy, leaves: list, in_tree):
    """``f`` at the argument ``leaves`` (of structure ``in_tree``) recorded as one node whose
    inputs are the ``Tensor`` and array leaves (and the tensors ``f`` closes over): its
    results as ``Tensor``s, in the structure ``f`` returned."""
    positions = [n for n, a in enumerate(leaves) if _is_array_argument(a)]
    tensors = [leaves[n] if isinstance(leaves[n], Tensor) else new_tensor(owned_copy(leaves[n]))
               for n in positions]
    out_tree = []

    def flat(*traced):
        # f on its arguments with the traced values in place of the array leaves
        values = list(leaves)
        for n, value in zip(positions, traced):
            values[n] = value
        args, kwargs = tree_unflatten(in_tree, values)
        out_leaves, structure = tree_flatten(f(*args, **kwargs))
        out_tree.append(structure)
        return tuple(out_leaves)

    flat.__name__ = flat.__qualname__ = _function_name(f)
    # Tensors the function closes over are captured as inputs of the node too. (The scope
    # marks what f binds down to an enclosing jit, should f read a value it traces.)
    with checkpoint_scope(policy):
        traced = Traced(flat, [_owned_data(t) for t in tensors],
                        capture=lambda v: isinstance(v, Tensor), transform="checkpoint")
    if not traced.outputs:                       # f returned no array: nothing to record
        return tree_unflatten(out_tree[0], [])
    graph = traced.graph
    by_key = dict(zip(traced.input_keys, tensors))
    by_key.update(traced.trace.captured)
    if any(isinstance(traced.trace.values[key], Frontend) for key in graph.input_keys
           if key.key not in by_key):
        return _ran_on_enclosing_trace(f, traced, out_tree[0], by_key.values())
    if not traced.trace.captured and not any(isinstance(a, Tensor) for a in leaves):
        # no Tensor in or closed over: f's arrays, as a plain call returns them (none of
        # them the memory of a constant f read, or of another result)
        constants = [traced.trace.values[key] for key in graph.input_keys]
        return tree_unflatten(out_tree[0], fresh([as_array(v) for v in traced.outputs],
                                                 held=constants))
    inputs = []
    for key in graph.input_keys:
        t = by_key.get(key.key)
        if t is None:                # a constant f closed over: saved, so owned
            inputs.append(EagerInput(_CONSTANT, None, False,
                                     owned_copy(traced.trace.values[key])))
        else:
            inputs.append(EagerInput(t.key, t._trace, t._requires_grad, _owned_data(t)))
    recorded = RecordedGraph(graph, [k.key for k in graph.input_keys], graph.output_keys)
    kept = {key: traced.trace.values[key] for op_key in graph.operation_keys
            if saves(policy, op_key.operation) for key in op_key.output_keys()}
    records = _recorder.record_graph(recorded, inputs, traced.outputs, kept,
                                     current_strategy())
    outs = [_computed(as_array(value), record.key, record.trace)
            if record.requires_grad and _is_inexact(value)      # ints, bools: no grad
            else new_tensor(as_array(value), False, record.key, record.trace)
            for value, record in zip(traced.outputs, records)]
    return tree_unflatten(out_tree[0], outs)


def _ran_on_enclosing_trace(f, traced, out_tree, tensors):
    """The results of a checkpointed ``f`` that read a value traced by an enclosing
    transform (``grad``, ``jit``, ``vmap``) from outside its arguments: ``f`` ran on that
    trace, as the functional ``checkpoint`` runs (nothing is recorded on the tape). Eager
    tensors that require grad cannot meet such values: refused, as a gradient would be lost."""
    eager = [t for t in tensors if t._requires_grad]
    if eager:
        raise FunctionalError(
            f"checkpoint of {_function_name(f)}: it reads a value traced by a transform from "
            f"outside its arguments and takes {len(eager)} eager Tensor(s) that require grad; "
            "one computation cannot mix the two (pass arrays under the transform)")
    outs = list(traced.outputs)
    unmark_checkpointed(outs)
    return tree_unflatten(out_tree, outs)


def _is_array_argument(value) -> bool:
    """Whether a leaf of ``checkpoint``'s arguments is an input of the node: a ``Tensor`` or
    an array of numbers (of any library). Other leaves (Python numbers, strings, objects)
    reach ``f`` as they are, as JAX's static values would."""
    if isinstance(value, Tensor):
        return True
    if isinstance(value, (np.ndarray, np.generic)):
        return value.dtype.kind in "biufc"
    if isinstance(value, (numbers.Number, str, bytes)):
        return False
    return library_of(value) is not NUMPY


def _function_name(f) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) \
        or type(f).__name__
