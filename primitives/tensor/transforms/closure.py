"""Python's closure rule for traced programs: arrays (and numbers) a function reads from
outside are read at each call.

A jitted function (or a cached custom rule) is traced once and run many times.
The arrays it reads from its closure, its globals, a bound method's object,
or the attributes and items of those, belong to the caller, who may write into
them or rebind them between calls. :func:`external_values` finds them before
the trace, each as a :class:`Reference` that reads it again later; while the
trace runs, :func:`staging` makes every ``tnp`` op applied to one of them part
of the traced graph (not a constant computed once), and the traced program
takes the arrays as inputs that are read again at each call
(:meth:`Reference.read`). This is what ``torch.compile`` does when it lifts
globals into graph inputs; JAX instead freezes them at trace time.

NumPy's own functions and operators applied to such an array while tracing
(``V * 2`` on two NumPy arrays) are not ``tnp`` ops and compute at once: the
program that uses their result keeps a copy of the array's contents and traces
again when the array changes, in any bit (:class:`Guard`: a 0.0 that becomes -0.0
changes ``1 / V``); so does a changed number (``scale = 2.0`` rebound), as
``torch.compile``'s guards do. Comparing costs a pass over the
array at each call, so that is done for arrays up to :data:`COMPARED_BYTES`
(1 MiB); a bigger array read only by NumPy's own functions is checked for
rebinding, shape and dtype, not for writes into it: use ``tnp`` functions on
it, or pass it as an argument.

>>> import numpy as np
>>> def make():
...     V = np.ones(2)
...     return lambda x: x * V
>>> [ref.where for ref in external_values(make())]
["closure variable 'V' of make.<locals>.<lambda>"]
"""

from __future__ import annotations

import functools
import numbers
import types
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

from primitives.tensor.core import Frontend, set_staging

_MISSING = object()
COMPARED_BYTES = 1 << 20    # closed-over arrays read only by NumPy itself: compared up to this
_MAX_OBJECTS = 256          # how many functions and objects one scan visits at most
_LIBRARY_MODULES = ("primitives.", "tidu.", "numpy", "scipy", "jax", "torch", "dask")


class Reference:
    """Where a function reads an array from: ``read()`` gives what is there now (``None``
    once it is gone); ``value`` is what was there when the function was traced.

    >>> box = {"w": np.zeros(2)}
    >>> ref = Reference(lambda: box["w"], "box['w']", box["w"])
    >>> box["w"] = np.ones(2)
    >>> ref.read() is box["w"], ref.value is box["w"]
    (True, False)
    """

    __slots__ = ("read", "where", "value")

    def __init__(self, read: Callable[[], Any], where: str, value) -> None:
        self.read = read
        self.where = where
        self.value = value

    def __repr__(self) -> str:
        return f"Reference({self.where})"


def _is_read(value) -> bool:
    """What the closure rule follows: arrays, and Python or NumPy numbers (a changed number
    traces again, as ``torch.compile``'s guards do)."""
    return _is_array(value) or (isinstance(value, (numbers.Number, np.generic))
                                and not isinstance(value, Frontend))


def _is_array(value) -> bool:
    if isinstance(value, np.ndarray):
        return True
    module = type(value).__module__ or ""
    return module.split(".")[0] in ("torch", "dask", "cupy") and hasattr(value, "shape")


def _is_library(fn) -> bool:
    module = getattr(fn, "__module__", None) or ""
    return module.startswith(_LIBRARY_MODULES)


def _cell_reader(cell) -> Callable[[], Any]:
    def read():
        try:
            return cell.cell_contents
        except ValueError:              # an empty cell: the variable was deleted
            return None
    return read


def _code_names(code) -> set:
    """The global names ``code`` and the code nested in it (lambdas, comprehensions) use."""
    names, pending = set(), [code]
    while pending:
        current = pending.pop()
        names.update(current.co_names)
        pending.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return names


def external_values(f: Callable) -> list[Reference]:
    """The arrays and numbers ``f`` reads from outside, found without running it: in its
    closure cells and the globals its code names, in the attributes and items (one level) of
    the objects found there, in a bound method's object and a ``functools.partial``'s
    arguments, and likewise in the functions it reaches that way (``grad(loss)`` reaches
    ``loss``; a ``custom_jvp`` function its rules). Library functions (tidu's, NumPy's...)
    are passed through, but their globals are not read."""
    found: list[Reference] = []
    seen: set = set()
    pending = [(f, _name(f))]

    def add(value, read, where: str, named: bool = False) -> None:
        """``named``: a variable of the code (a closure cell, a global), whose numbers count;
        in attributes and containers only arrays do (a counter there is not read by f)."""
        if _is_array(value) or (named and _is_read(value)):
            found.append(Reference(read, where, value))
        elif callable(value) or hasattr(value, "__dict__") or isinstance(value, (list, tuple,
                                                                                dict)):
            pending.append((value, where))

    while pending and len(seen) < _MAX_OBJECTS:
        obj, where = pending.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, Frontend)):
            continue
        seen.add(id(obj))
        if isinstance(obj, functools.partial):
            pending.append((obj.func, where))
            for n, arg in enumerate(obj.args):
                add(arg, _item_reader(obj.args, n), f"argument {n} of {where}", named=True)
            for key, arg in obj.keywords.items():
                add(arg, _item_reader(obj.keywords, key), f"keyword {key!r} of {where}",
                    named=True)
        elif isinstance(obj, types.MethodType):
            pending.append((obj.__func__, where))
            _scan_attributes(obj.__self__, f"{where}.__self__", add)
        elif isinstance(obj, types.FunctionType):
            _scan_function(obj, add)
        elif isinstance(obj, (list, tuple)):
            for n, item in enumerate(obj):
                if _is_array(item):
                    add(item, _item_reader(obj, n), f"{where}[{n}]")
        elif isinstance(obj, dict):
            for key, item in list(obj.items()):
                if _is_array(item):
                    add(item, _item_reader(obj, key), f"{where}[{key!r}]")
        else:
            rules = getattr(obj, "rule_functions", None)
            if callable(rules):         # custom_jvp / custom_vjp: the rules are traced, while
                pending.extend((rule, where) for rule in rules())   # the function runs each call
            elif getattr(obj, "__wrapped__", None) is not None:
                pending.append((obj.__wrapped__, where))
            if not _is_library(type(obj)):
                _scan_attributes(obj, where, add)
                call = getattr(type(obj), "__call__", None)
                if isinstance(call, types.FunctionType):
                    pending.append((types.MethodType(call, obj), where))
    return found


def _scan_function(fn: types.FunctionType, add) -> None:
    name = _name(fn)
    for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        add(value, _cell_reader(cell), f"closure variable {var!r} of {name}", named=True)
    wrapped = getattr(fn, "__wrapped__", None)
    if wrapped is not None:
        add(wrapped, lambda: None, name)
    if _is_library(fn):
        return
    globals_ = fn.__globals__
    for var in _code_names(fn.__code__):
        value = globals_.get(var, _MISSING)
        if value is not _MISSING:
            add(value, _item_reader(globals_, var), f"global {var!r} of {name}", named=True)


def _scan_attributes(obj, where: str, add) -> None:
    attributes = getattr(obj, "__dict__", None)
    if not isinstance(attributes, dict):
        return
    for attr, value in list(attributes.items()):
        if _is_array(value):
            add(value, _attribute_reader(obj, attr), f"{where}.{attr}")
        elif isinstance(value, (list, tuple, dict)):
            add(value, lambda: None, f"{where}.{attr}")


def _item_reader(container, key) -> Callable[[], Any]:
    def read():
        try:
            return container[key]
        except (KeyError, IndexError):
            return None
    return read


def _attribute_reader(obj, attr: str) -> Callable[[], Any]:
    return lambda: getattr(obj, attr, None)


def _name(f) -> str:
    return getattr(f, "__qualname__", None) or type(f).__name__


@contextmanager
def staging(trace, references: list[Reference]) -> Iterator[None]:
    """While tracing into ``trace``, ``tnp`` ops applied to the arrays of ``references`` are
    recorded in it (the arrays lifted as its constants) instead of computed once. ``trace``
    may be a function giving the trace, for one that is made inside the block.

    >>> import primitives.tensor as tnp
    >>> from primitives.tensor.transforms.functional import GraphTrace
    >>> V = np.arange(3.0)
    >>> trace = GraphTrace(abstract=True)
    >>> with staging(trace, [Reference(lambda: V, "V", V)]):
    ...     total = tnp.sum(V)                  # recorded, not computed once
    >>> trace.active = False                    # done tracing
    >>> type(total).__name__
    'Tracer'
    """
    ids = {id(ref.value) for ref in references}
    if not ids:
        yield
        return
    current = trace if callable(trace) else (lambda: trace)

    def external(value) -> bool:           # one of the arrays, or a NumPy view of one
        return id(value) in ids or (type(value) is np.ndarray and value.base is not None
                                    and id(value.base) in ids)

    def lift(args):
        if not any(external(a) for a in args):
            return None
        into = current()
        if into is None or not into.active:
            return None
        return [into.lift(a) if external(a) else a for a in args]

    previous = set_staging(lift)
    try:
        yield
    finally:
        set_staging(previous)


class Guard:
    """The external arrays of one trace, to read again at each call.

    ``lifted`` are those the traced graph takes as constant inputs (positions in its list
    of constants): a call passes what is there now, so writes into them and rebinding to
    an array of the same shape and dtype need no new trace. The others (used by NumPy's
    own functions while tracing, or not at all) keep a copy of their contents: a change
    means the program is stale and must be traced again.

    >>> V = np.ones(2)
    >>> guard = Guard([Reference(lambda: V, "V", V)], constants=[V])   # V: a constant input
    >>> V[:] = 5
    >>> guard.constants([V])[0] is V                # written in place: read as it is now
    True
    """

    def __init__(self, references: list[Reference], constants: list) -> None:
        by_id: dict = {}
        for position, value in enumerate(constants):
            by_id.setdefault(id(value), []).append(position)
        self.lifted = [(ref, by_id[id(ref.value)]) for ref in references
                       if id(ref.value) in by_id]
        self.copied = [(ref, _copy(ref.value)) for ref in references
                       if id(ref.value) not in by_id]

    def constants(self, constants: list) -> list | None:
        """``constants`` with the external arrays as they are now; ``None`` if the trace is
        stale (an array changed shape or dtype, or one read only at trace time changed)."""
        for ref, snapshot in self.copied:
            now = ref.read()
            if now is not ref.value or not _equal(now, snapshot):
                return None
        if not self.lifted:
            return constants
        constants = list(constants)
        for ref, positions in self.lifted:
            now = ref.read()
            if now is not ref.value:
                if not _is_array(now) or now.shape != ref.value.shape or \
                        now.dtype != ref.value.dtype or type(now) is not type(ref.value):
                    return None
            for position in positions:
                constants[position] = now
        return constants


def _copy(value):
    """What a guard keeps of an array it compares by contents: a copy of a NumPy array up to
    :data:`COMPARED_BYTES`; a bigger one or another library's array is compared by identity,
    shape and dtype only (see the module docstring)."""
    if isinstance(value, np.ndarray) and value.nbytes <= COMPARED_BYTES:
        return value.copy()
    return value


def _equal(now, snapshot) -> bool:
    if now is snapshot:
        return True
    if isinstance(snapshot, (numbers.Number, np.generic)):
        return type(now) is type(snapshot) and bool(now == snapshot)
    if not isinstance(snapshot, np.ndarray) or snapshot.nbytes > COMPARED_BYTES:
        return False
    if not (isinstance(now, np.ndarray) and now.shape == snapshot.shape
            and now.dtype == snapshot.dtype):
        return False
    if snapshot.dtype.hasobject:
        return np.array_equal(now, snapshot)
    # every bit, not ==: a 0.0 that became -0.0 changes 1 / x, and a NaN stays itself
    return now.tobytes() == snapshot.tobytes()

