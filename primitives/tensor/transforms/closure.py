"""Python's closure rule for traced programs: arrays (and numbers) a function reads from
outside are read at each call.

A jitted function (or a cached custom rule) is traced once and run many times.
The arrays it reads from its closure, its globals, a bound method's object,
or the attributes and items of those, belong to the caller, who may write into
them or rebind them, at any level, between calls. :func:`external_values` finds
them before the trace, each as a :class:`Reference` that reads it again later by
following the path it was found along from the variable (global ``layers``,
then ``[0]``, then ``[1]``), so that rebinding any level of the path is seen; a
step that fails, or meets a container of another type than it did, reads as a
change. While the trace runs, :func:`staging` makes every ``tnp`` op applied to
one of them part of the traced graph (not a constant computed once), and the
traced program takes the arrays as inputs that are read again at each call
(:meth:`Reference.read`). This is what ``torch.compile`` does when it lifts
globals into graph inputs; JAX instead freezes them at trace time.

What is followed, from these roots: ``f``'s closure cells, the globals its code
names, its default arguments (``__defaults__``, ``__kwdefaults__``), a bound
method's object, a ``functools.partial``'s arguments and the jitted object
itself:

- the items of lists, tuples and dicts and the attributes of objects (their
  ``__dict__`` and ``__slots__``), nested up to :data:`_MAX_DEPTH` (6) steps
  below the root, and the attributes the code names of a module or a class a
  variable holds (``cfg.W`` after ``import cfg``, ``Config.W``) or of an object's
  class (``self.scale`` held by the class); an object found along two paths is
  followed along both;
- the functions reached on the way, whose own roots are followed in turn: a
  global function, an object's ``__call__`` and the methods and properties the
  code names (``self.forward``), ``grad(loss)``'s ``loss``, a ``custom_jvp``
  function's rules;
- breadth first, at most :data:`_MAX_OBJECTS` (256) functions, objects, modules
  and containers in all, so that a scan stays cheap (it runs at each trace; a
  call only reads the paths found, a few item and attribute lookups each). A
  function that reaches more warns (``RuntimeWarning``): what lies beyond is read
  once, when it traces; pass such data as arguments.

Arrays count wherever they are found. A number counts when the code names the
way to it: a closure variable, a global, a default or a ``partial``'s argument;
an attribute or a dict item whose name or key is among the names and constants
of the code reached (``self.scale``, ``cfg["scale"]``: ``co_names`` and
``co_consts``), every attribute and key on the way being named so; an item of a
list or tuple of at most :data:`_MAX_NUMBER_ITEMS` (32) items found at such a
place (``for w, b, scale in layers``; a longer one is data, as a log of losses,
and ``f`` cannot tell which of its items it reads). A counter the code never
names (``self.step``, ``stats["calls"]`` in an object ``f`` reaches) changes
nothing. A number is compared with what is there after the trace, bit for bit
(one made anew with the same value is no change): rebinding it traces again, but
a counter that ``f`` itself steps while it is traced is not compared (two functions
stepping one counter would trace by turns). Strings, ``None``, callables,
containers and immutable values (an ``Enum`` member, a ``dtype``, a slice,
bytes...) found where a number would count are compared the same way, by what
decides what they do (:func:`_which`): rebinding ``act = tnp.tanh`` to
``tnp.sin``, ``mode = "sum"`` to ``"mean"``,
``MODE = Mode.SUM`` to ``Mode.MEAN``, ``DTYPE = np.dtype("float32")`` to
another, or ``self.head`` to an object of another class traces again, and
so does a layer appended to the list ``f`` loops over, or a coefficient to a list
of numbers (the length of a list or tuple, the keys of a dict; one of numbers only
that the trace itself changed, a log ``f`` appends to while traced, is not
compared, or two functions appending to one log would trace again by turns); a
new ``partial`` of the same function, or a new object of the same class, is read
along its paths as before (a keyword added to a ``partial`` traces again).

An array or a number that ``f`` stores where it reads it while traced (a parameter
made at the first call: ``if "w" not in params: params["w"] = ...``) is found by a
scan after the trace (:func:`stored_while_traced`): that trace is not kept, and the
next call traces again and finds it before tracing.

Not followed: library modules and the attributes of library objects (tidu's,
NumPy's...: :data:`_LIBRARY_MODULES`), the globals of library functions, the numbers,
strings and tuples of them a library function's closure holds (``grad``'s ``argnums``:
its code never rebinds them; the functions there are followed, not compared), Python's
standard library's modules and functions' globals, sets, the length of a list of
numbers only that ``f`` changes while traced, the methods of a class patched after the
trace, numbers
``f`` reads by a computed key or by iterating a dict, and the arguments ``jit``
marks static (``static_argnums``: part of the trace's signature, so frozen by
design, as in JAX: a new value traces again, a value written into does not).

NumPy's own functions and operators applied to such an array while tracing
(``V * 2`` on two NumPy arrays, ``float(np.max(V))``, ``if np.all(V > 0)``) are
not ``tnp`` ops and compute at once, and nothing tells which arrays they read. So
a traced program keeps a copy of the contents of every NumPy array it reads from
outside, up to :data:`COMPARED_BYTES` (1 MiB), and traces again when one changes,
in any bit (:class:`Guard`: a 0.0 that becomes -0.0 changes ``1 / V``), even one
only ``tnp`` ops read; so does a changed number (``scale = 2.0`` rebound), as
``torch.compile``'s guards do. ``jit`` then reuses the compiled program when the
new trace gives the same graph, which is the case when only ``tnp`` ops read what
changed: an optimizer step writing into closed-over weights re-runs ``f``'s
Python code, not the compilation (pass arrays that change at every call as
arguments to skip that too). Comparing costs a pass over the array at each call,
hence the bound: a bigger array is checked for rebinding, shape and dtype, not
for writes into it, which ``tnp`` ops read at each call and NumPy's own
functions do not see; use ``tnp`` functions on it, or pass it as an argument.

>>> import numpy as np
>>> def make():
...     V = np.ones(2)
...     return lambda x: x * V
>>> [ref.where for ref in external_values(make())]
["closure variable 'V' of make.<locals>.<lambda>"]
>>> def mlp(layers):
...     return lambda x: [x * w + b for w, b in layers]
>>> [ref.where for ref in external_values(mlp([(np.ones(2), np.zeros(2))]))]
["closure variable 'layers' of mlp.<locals>.<lambda>",
 "closure variable 'layers' of mlp.<locals>.<lambda>[0]",
 "closure variable 'layers' of mlp.<locals>.<lambda>[0][0]",
 "closure variable 'layers' of mlp.<locals>.<lambda>[0][1]"]
>>> [ref.value for ref in external_values(mlp([(np.ones(2), np.zeros(2))]))][:2]
[(1,), (2,)]
"""

from __future__ import annotations

import collections
import enum
import functools
import numbers
import operator
import os
import sys
import sysconfig
import types
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

from primitives.tensor.core import Frontend, set_staging

_MISSING = object()
COMPARED_BYTES = 1 << 20    # closed-over NumPy arrays are compared up to this size
_BYTES_COMPARED_AS_BYTES = 1 << 16   # above this, copying to bytes costs more than a ufunc
_MAX_OBJECTS = 256          # how many functions, objects and containers one scan visits at most
_MAX_DEPTH = 6              # how many items and attributes a path follows below its root
_MAX_NUMBER_ITEMS = 32      # the numbers of a longer list or tuple do not count (it is data)
_LIBRARY_MODULES = frozenset({"primitives", "tidu", "numpy", "scipy", "jax", "jaxlib", "torch",
                               "torchvision", "torchaudio", "dask", "distributed"})
"""Top-level packages whose modules are libraries: a whole name, so that a module of the
user's named ``torch_utils`` or ``numpy_helpers`` is followed as the user's own code."""


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


class _Found(Reference):
    """An array or number found along a path, which ``path`` names (its root and steps):
    a scan after the trace tells by it what ``f`` stored while traced."""

    __slots__ = ("path",)

    def __init__(self, read: Callable[[], Any], where: str, value, path: tuple) -> None:
        super().__init__(read, where, value)
        self.path = path


def _is_number(value) -> bool:
    """A Python or NumPy number (a changed one traces again, as ``torch.compile``'s guards
    do), not a traced value."""
    return isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, Frontend)


def is_array(value: object) -> bool:
    """Whether ``value`` is an array a function may read from outside: NumPy's, or a
    PyTorch, Dask or CuPy array (an instance with a ``shape``).

    >>> is_array(np.zeros(2)), is_array([0.0])
    (True, False)
    """
    if isinstance(value, np.ndarray):
        return True
    module = type(value).__module__ or ""
    return module.split(".")[0] in ("torch", "dask", "cupy") and hasattr(value, "shape")


def _is_library(fn) -> bool:
    """A library's function or class (tidu's, NumPy's...), whose globals or instances'
    attributes are not followed."""
    module = getattr(fn, "__module__", None) or ""
    return module.partition(".")[0] in _LIBRARY_MODULES


def _is_library_code(fn) -> bool:
    """A function whose globals (and names) are not followed: a library's, or Python's own."""
    return _is_library(fn) or _is_standard_library(getattr(fn, "__module__", None))


def _is_library_module(module: types.ModuleType) -> bool:
    """A module whose attributes are not followed: a library's, or Python's own."""
    name = getattr(module, "__name__", None) or ""
    return name.partition(".")[0] in _LIBRARY_MODULES or _is_standard_library(name)


def _is_standard_library(module_name: str | None) -> bool:
    """Whether ``module_name`` is Python's own: a standard-library name whose module was
    loaded from the standard library (a user's ``test.py`` or ``statistics.py``, first on
    ``sys.path``, has such a name too, and is followed as the user's code)."""
    top = (module_name or "").partition(".")[0]
    if top not in sys.stdlib_module_names:
        return False
    module = sys.modules.get(top)
    known = _standard_modules.get(top)
    if known is None or known[0] is not module:
        known = _standard_modules[top] = (module, module is None or _from_standard_library(module))
    return known[1]


_standard_modules: dict = {}     # name -> (the module checked, whether it is Python's own)
_STANDARD_DIRS = tuple({os.path.join(os.path.realpath(sysconfig.get_path(name)), "")
                        for name in ("stdlib", "platstdlib")})
_INSTALLED_DIRS = tuple({os.path.join(os.path.realpath(sysconfig.get_path(name)), "")
                         for name in ("purelib", "platlib")})


def _from_standard_library(module: types.ModuleType) -> bool:
    """Built into the interpreter, frozen, or loaded from a file in the standard library's
    directories (not from ``site-packages`` below them)."""
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None)
    if origin in ("built-in", "frozen"):
        return True
    path = getattr(module, "__file__", None) or origin
    if not isinstance(path, str):
        return False                    # made in memory: the user's
    path = os.path.realpath(path)
    return path.startswith(_STANDARD_DIRS) and not path.startswith(_INSTALLED_DIRS)


def _cell_reader(cell) -> Callable[[], Any]:
    def read():
        try:
            return cell.cell_contents
        except ValueError:              # an empty cell: the variable was deleted
            return None
    return read


def _item_reader(container, key) -> Callable[[], Any]:
    def read():
        try:
            return container[key]
        except (KeyError, IndexError):
            return None
    return read


def _path_reader(root: Callable[[], Any], steps: tuple) -> Callable[[], Any]:
    """What is at the end of ``steps`` from ``root()`` now; ``None`` if a step fails or meets
    a container of another type than when the path was found (both read as a change)."""
    def read():
        value = root()
        try:
            for kind, get, key in steps:
                if type(value) is not kind:
                    return None
                value = get(value, key)
        except Exception:               # noqa: BLE001 -- KeyError, AttributeError...: gone
            return None
        return value
    return read


class _Location:
    """Where a scan found a value: a root (``root()`` reads it; ``key`` names it) and the
    steps from it, each ``(type of the container, operator.getitem or getattr, key or
    attribute name)``. ``needs``: the dict keys and attribute names on the way, which the
    code must name for a number found here to count; ``holders``: the containers on the way
    (ids), not followed again (a cycle)."""

    __slots__ = ("holders", "key", "needs", "root", "steps", "where")

    def __init__(self, root: Callable[[], Any], key: tuple, where: str, steps: tuple = (),
                 needs: tuple = (), holders: tuple = ()) -> None:
        self.root, self.key, self.where = root, key, where
        self.steps, self.needs, self.holders = steps, needs, holders

    @classmethod
    def constant(cls, value, where: str) -> _Location:
        return cls(lambda: value, ("constant", id(value)), where)

    def item(self, container, key) -> _Location:
        """``container[key]``, ``container`` being found here; a dict's key must be named."""
        named = (key,) if isinstance(container, dict) else ()
        return self.part(container, key, True, f"{self.where}[{key!r}]", named)

    def attribute(self, obj, name: str) -> _Location:
        """``obj.name``, ``obj`` being found here; ``name`` must be named."""
        return self.part(obj, name, False, f"{self.where}.{name}", (name,))

    def part(self, holder, key, is_item: bool, where: str, needs: tuple = ()) -> _Location:
        """A step from here that the code need not name (a default, a ``partial``'s
        argument)."""
        step = (type(holder), operator.getitem if is_item else getattr, key)
        return _Location(self.root, self.key, where, self.steps + (step,), self.needs + needs,
                         self.holders + (id(holder),))

    def reader(self) -> Callable[[], Any]:
        return _path_reader(self.root, self.steps) if self.steps else self.root


def external_values(f: Callable, warn: bool = True) -> list[Reference]:
    """The arrays and numbers ``f`` reads from outside, and the functions, strings, lengths
    and keys that decide what it does, found without running it, each with the path to
    read it along again (see the module docstring for what is followed, and when a number
    counts). Library functions (tidu's, NumPy's...) are passed through, but
    their globals are not read. ``warn=False``: no warning when ``f`` reaches more than the
    scan follows (for a caller that only looks for arrays a function may return).

    >>> def affine(params):
    ...     return lambda x: x * params["layer"]["w"]
    >>> refs = external_values(affine({"layer": {"w": np.ones(2)}, "step": 0}))
    >>> [ref for ref in refs if isinstance(ref.value, np.ndarray)]
    [Reference(closure variable 'params' of affine.<locals>.<lambda>['layer']['w'])]
    """
    return _Scan(f).references(warn)


class _Scan:
    """One walk of what ``f`` reads from outside, breadth first from ``f``."""

    def __init__(self, f) -> None:
        self.found: dict = {}               # (root, steps) -> (Reference, names it needs)
        self.vocabulary: set = set()        # the names and constants of the code reached
        self.seen: set = set()              # functions (ids); objects with their locations
        self.visits = 0
        self.named: list = []               # [module or object, location, names done]
        self.name = _name(f)
        self.pending = collections.deque([(f, _Location.constant(f, self.name))])

    def references(self, warn: bool = True) -> list[Reference]:
        while True:
            while self.pending and self.visits < _MAX_OBJECTS:
                self._visit(*self.pending.popleft())
            # the code is known now: the module attributes and methods it names
            if self.visits >= _MAX_OBJECTS or not self._follow_named():
                break
        if warn and self.pending and self.visits >= _MAX_OBJECTS:
            warnings.warn(
                f"{self.name} reaches more than {_MAX_OBJECTS} functions, objects and "
                "containers from its closure and globals: the arrays and numbers beyond them "
                "are read once, when it is traced, not at each call (a jitted result would not "
                "see them change); pass such data as arguments", RuntimeWarning, stacklevel=5)
        return [ref for ref, needs in self.found.values()
                if all(name in self.vocabulary for name in needs)]

    def _add(self, value, where: _Location, numbers_count: bool = True) -> None:
        """``value``, found at ``where``: an array or number to read, or more to follow; a
        function, a string, ``None`` or a container's length or keys to compare with what
        is there at each call (:func:`_which`)."""
        if is_array(value) or (numbers_count and _is_number(value)):
            key = (where.key, where.steps)
            if key not in self.found:
                needs = () if is_array(value) else where.needs
                self.found[key] = (_Found(where.reader(), where.where, value, key), needs)
            return
        if numbers_count and (value is None or isinstance(value, (str, list, tuple, dict)) or
                              (callable(value) and not isinstance(value, Frontend)) or
                              _is_atom(value)):
            key = (where.key, where.steps, "which")
            if key not in self.found and (where.steps or where.key[0] != "constant"):
                self.found[key] = (_which_reference(where, value), where.needs)
        if isinstance(value, (list, tuple, dict)) or callable(value) or \
                hasattr(value, "__dict__") or hasattr(type(value), "__slots__"):
            self.pending.append((value, where))

    def _visit(self, obj, where: _Location) -> None:
        if isinstance(obj, type):
            if not _is_library(obj) and self._visit_once(obj, where):
                self.named.append([obj, where, set()])      # its attributes the code names
            return
        if isinstance(obj, Frontend):
            return
        if isinstance(obj, types.FunctionType):     # found anywhere, read the same way
            if id(obj) not in self.seen:
                self.seen.add(id(obj))
                self.visits += 1
                self._function(obj)
            return
        if not self._visit_once(obj, where):
            return
        if isinstance(obj, types.ModuleType):
            if not _is_library_module(obj):
                self.named.append([obj, where, set()])
        elif isinstance(obj, functools.partial):
            self._partial(obj, where)
        elif isinstance(obj, types.MethodType):
            self.pending.append((obj.__func__, where))
            self._add(obj.__self__, where.part(obj, "__self__", False, f"{where.where}.__self__"))
        elif isinstance(obj, (list, tuple, dict)):
            self._container(obj, where)
        else:
            self._object(obj, where)

    def _visit_once(self, obj, where: _Location) -> bool:
        """Whether ``obj``, found at ``where``, is visited now: an object found by two paths
        is visited along both, but once along each and never inside itself (a cycle)."""
        visit = (id(obj), where.key, where.steps)
        if visit in self.seen or id(obj) in where.holders:
            return False
        self.seen.add(visit)
        self.visits += 1
        return True

    def _function(self, fn: types.FunctionType) -> None:
        name = _name(fn)
        library = _is_library_code(fn)
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if library and (type(value) is types.FunctionType or _never_changes(value)):
                # a library's own parameter (``grad``'s ``argnums``, its ``f``): its code
                # never rebinds its closure, so only what a function holds is read again
                if type(value) is types.FunctionType:
                    self.pending.append((value, _Location.constant(value, name)))
                continue
            self._add(value, _Location(_cell_reader(cell), ("cell", id(cell)),
                                       f"closure variable {var!r} of {name}"))
        wrapped = getattr(fn, "__wrapped__", None)
        if wrapped is not None:
            self._add(wrapped, _Location.constant(wrapped, name))
        if library:
            return
        self.vocabulary |= _code_vocabulary(fn.__code__)
        globals_ = fn.__globals__
        for var in _code_names(fn.__code__):
            value = globals_.get(var, _MISSING)
            if value is not _MISSING:
                self._add(value, _Location(_item_reader(globals_, var),
                                           ("global", id(globals_), var),
                                           f"global {var!r} of {name}"))
        self._defaults(fn, name)

    def _defaults(self, fn: types.FunctionType, name: str) -> None:
        """The default arguments of ``fn``: read through ``fn.__defaults__`` (which may be
        rebound) and ``fn.__kwdefaults__``."""
        here = _Location.constant(fn, name)
        code, defaults = fn.__code__, fn.__defaults__ or ()
        params = code.co_varnames[code.co_argcount - len(defaults):code.co_argcount]
        holder = here.part(fn, "__defaults__", False, name)
        for n, (param, value) in enumerate(zip(params, defaults)):
            self._add(value, holder.part(defaults, n, True, f"default {param!r} of {name}"))
        keywords = fn.__kwdefaults__ or {}
        holder = here.part(fn, "__kwdefaults__", False, name)
        for param, value in list(keywords.items()):
            self._add(value, holder.part(keywords, param, True, f"default {param!r} of {name}"))

    def _partial(self, obj: functools.partial, where: _Location) -> None:
        self.pending.append((obj.func, where))
        args = where.part(obj, "args", False, where.where)
        for n, arg in enumerate(obj.args):
            self._add(arg, args.part(obj.args, n, True, f"argument {n} of {where.where}"))
        keywords = where.part(obj, "keywords", False, where.where)
        # a keyword added later changes the call as a rebound one does: its keys compared
        self.found.setdefault((keywords.key, keywords.steps, "which"),
                              (_which_reference(keywords, obj.keywords), ()))
        for key, arg in list(obj.keywords.items()):
            self._add(arg, keywords.part(obj.keywords, key, True,
                                         f"keyword {key!r} of {where.where}"))

    def _container(self, obj, where: _Location) -> None:
        if len(where.steps) >= _MAX_DEPTH:
            return
        items = list(obj.items()) if isinstance(obj, dict) else list(enumerate(obj))
        numbers_count = isinstance(obj, dict) or len(obj) <= _MAX_NUMBER_ITEMS
        for key, item in items:
            self._add(item, where.item(obj, key), numbers_count)

    def _object(self, obj, where: _Location) -> None:
        attributes = getattr(obj, "__dict__", None)
        attributes = attributes if isinstance(attributes, dict) else {}
        if callable(getattr(type(obj), "rule_functions", None)):
            # custom_jvp / custom_vjp: the rules are traced, while the function runs each call
            self.pending.extend((rule, where) for rule in obj.rule_functions())
        elif attributes.get("__wrapped__") is not None:
            self.pending.append((attributes["__wrapped__"], where))
        if _is_library(type(obj)):
            return
        call = getattr(type(obj), "__call__", None)
        if isinstance(call, types.FunctionType):
            self.pending.append((call, where))
        self.named.append([obj, where, set()])      # its methods the code names
        if len(where.steps) >= _MAX_DEPTH:
            return
        for attr, value in list(attributes.items()):
            if not _data_descriptor(type(obj), attr):   # else obj.attr is not this value
                self._add(value, where.attribute(obj, attr))
        for attr in _slot_names(type(obj)):
            value = getattr(obj, attr, _MISSING)
            if value is not _MISSING:
                self._add(value, where.attribute(obj, attr))

    def _follow_named(self) -> bool:
        """Follow what the code reached names of the modules and objects found: a module's
        attributes, an object's methods and properties. Whether that found more to visit."""
        before = len(self.pending)
        for holder, where, followed in self.named:
            for name in self.vocabulary - followed:
                followed.add(name)
                if not isinstance(name, str):
                    continue
                if isinstance(holder, types.ModuleType):
                    value = vars(holder).get(name, _MISSING)
                    if value is not _MISSING and len(where.steps) < _MAX_DEPTH:
                        self._add(value, where.attribute(holder, name))
                    continue
                cls = holder if isinstance(holder, type) else type(holder)
                method = _method(cls, name)
                if method is not None:
                    self.pending.append((method, where))
                    continue
                # a class attribute read as cls.name, or as obj.name where obj's own
                # attributes (its __dict__, its slots) do not hold it: read at each call
                value = _class_attribute(cls, name)
                if value is not _MISSING and len(where.steps) < _MAX_DEPTH and (
                        isinstance(holder, type) or not _own_attribute(holder, name)):
                    self._add(value, where.attribute(holder, name))
        return len(self.pending) > before


def stored_while_traced(f: Callable, before: list[Reference], constants: list) -> bool:
    """Whether a trace of ``f`` read what ``f`` stored outside while traced, where
    :func:`external_values` (``before``, found before the trace) did not look: an array
    it took as a fixed constant, or a number under a dict key or an attribute, as a
    parameter made at the first call (``if "w" not in params: params["w"] = ...``,
    ``self.scale = 2.0``). That trace would keep it however it is rebound later, so it
    must not be reused as it is: the next call traces again, and finds it."""
    known = {id(ref.value) for ref in before}
    fixed = {id(c) for c in constants if is_array(c)} - known
    paths = {ref.path for ref in before if type(ref) is _Found}
    return any(id(ref.value) in fixed or _stored_number(ref, paths)
               for ref in external_values(f, warn=False))


def _stored_number(ref: Reference, paths: set) -> bool:
    """A number found where the scan before the trace found none, held by a variable, a
    dict key or an attribute; not a list's item (a log ``f`` appends to at each trace
    would trace again at each call)."""
    if type(ref) is not _Found or not _is_number(ref.value) or ref.path in paths:
        return False
    steps = ref.path[1]
    return not steps or steps[-1][0] not in (list, tuple)


def _numbers_only(value) -> bool:
    """A list, tuple or dict holding numbers, strings and ``None`` only (or nothing): one
    ``f`` may append to while it traces, as a log (see :class:`_NumbersLength`)."""
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple)):
        return False
    return all(_is_number(item) or item is None or isinstance(item, str) for item in value)


class _NumbersLength(Reference):
    """The length or keys of a container of numbers only: compared at each call, as any
    container's, unless the trace itself changed them (:func:`_changed_while_traced`)."""

    __slots__ = ()


def _changed_while_traced(ref: Reference) -> bool:
    """Whether ``ref`` is the length of a container of numbers, or a number, that ``f``
    changed while it was traced (a log or a counter of traces): not compared, or ``f``
    would trace again at every call once another function steps the same log or counter
    (each trace changing what the other's guard compares: they would trace by turns)."""
    if type(ref) is _NumbersLength:
        return ref.read() is not ref.value
    if type(ref) is not _Found or not _is_number(ref.value):
        return False
    now = ref.read()
    return _is_number(now) and now is not ref.value and not _same_scalar(now, ref.value)


def _never_changes(value) -> bool:
    """Whether ``value``, held where nothing rebinds it, stays what it is: a number, a
    string, ``None``, an immutable value (:func:`_is_atom`) or a tuple of these. (A list,
    a dict, an array or an object may be written into; a function reads what it holds.)"""
    if value is None or isinstance(value, (str, numbers.Number)) or _is_atom(value):
        return True
    return type(value) is tuple and all(_never_changes(item) for item in value)


def _is_atom(value) -> bool:
    """An immutable value with nothing inside to follow (an ``Enum`` member, a ``dtype``, a
    slice, a range, bytes, a frozenset, ``...``, a date): compared at each call, as a string
    is, for ``f`` may branch on it or pass it to an op (``x.astype(DTYPE)``, ``x[SL]``)."""
    if isinstance(value, (enum.Enum, slice)):   # (a slice is unhashable before Python 3.12)
        return True
    if isinstance(value, (list, tuple, dict, set, Frontend)) or callable(value) or \
            hasattr(value, "__dict__") or hasattr(type(value), "__slots__"):
        return False                    # followed along its items or attributes instead
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _which_reference(where: _Location, value) -> Reference:
    """A reference to what decides what ``value``, found at ``where``, does (:func:`_which`):
    a length or keys read as the same object as the last read while they do not change (a
    guard compares by identity)."""
    read, last = where.reader(), [_which(value)]

    def read_which():
        now = _which(read())
        if type(now) is tuple and _same(now, last[0]):
            return last[0]
        last[0] = now
        return now
    kind = _NumbersLength if _numbers_only(value) else Reference
    return kind(read_which, where.where, last[0])


def _same(now: tuple, last: tuple) -> bool:
    """Whether two of :func:`_which`'s tuples are equal; one whose ``==`` fails or gives
    no plain answer is a change."""
    try:
        return bool(now == last)
    except Exception:                   # noqa: BLE001 -- an atom's own __eq__ may raise
        return False


def _which(value):
    """What decides what a value found on a path does, beyond the arrays and numbers read
    along paths below it, compared at each call: a string or ``None`` itself; a list's or
    tuple's length and a dict's keys (``for w, b in layers`` unrolls over them); a function
    or class itself, and a decorated one (``custom_jvp``, ``lru_cache``); a bound method's
    function and a ``partial``'s (their object and arguments are read along their own
    paths); another callable object's class (its attributes, likewise)."""
    if type(value) is types.FunctionType or type(value) is str or value is None:  # common
        return value
    if isinstance(value, (list, tuple)):        # its items are read along their own paths
        return (len(value),)
    if isinstance(value, dict):
        return tuple(value)
    if _is_atom(value):                 # by equality: an equal one made anew is no change
        return (type(value), value)
    while True:
        if isinstance(value, types.MethodType):
            value = value.__func__
        elif isinstance(value, functools.partial):
            value = value.func
        else:
            break
    if value is None or isinstance(value, (str, type, types.FunctionType,
                                           types.BuiltinFunctionType, np.ufunc)):
        return value
    if not callable(value) or getattr(value, "__wrapped__", None) is not None:
        return value                    # a decorated function (custom_jvp, lru_cache...)
    return type(value)


def _code_names(code) -> set:
    """The global names ``code`` and the code nested in it (lambdas, comprehensions) use."""
    names, pending = set(), [code]
    while pending:
        current = pending.pop()
        names.update(current.co_names)
        pending.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return names


def _code_vocabulary(code) -> set:
    """The names (globals, attributes) and the constants (``"scale"`` in ``cfg["scale"]``,
    the keys of a tuple of keys) ``code`` and the code nested in it use."""
    words, pending = set(), [code]
    while pending:
        current = pending.pop()
        words.update(current.co_names)
        for constant in current.co_consts:
            if isinstance(constant, types.CodeType):
                pending.append(constant)
            elif isinstance(constant, (str, int, bytes)):
                words.add(constant)
            elif isinstance(constant, (tuple, frozenset)):
                words.update(c for c in constant if isinstance(c, (str, int, bytes)))
                words.add(constant)
    return words


def _slot_names(cls: type) -> list:
    """The names of the ``__slots__`` attributes of ``cls`` and its bases (their values are
    not in an instance's ``__dict__``)."""
    names = []
    for klass in cls.__mro__:
        slots = vars(klass).get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else
                     [name for name in slots if name not in ("__dict__", "__weakref__")])
    return names


def _class_attribute(cls: type, name: str):
    """The plain value ``name`` names in the class ``cls`` or its bases (not a descriptor:
    a method, a property or a slot compute theirs), else ``_MISSING``."""
    for klass in cls.__mro__:
        if name in vars(klass):
            value = vars(klass)[name]
            return _MISSING if hasattr(type(value), "__get__") else value
    return _MISSING


def _own_attribute(obj, name: str) -> bool:
    """Whether ``obj`` holds ``name`` itself (in its ``__dict__``), overriding its class's."""
    attributes = getattr(obj, "__dict__", None)
    return isinstance(attributes, dict) and name in attributes


def _data_descriptor(cls: type, attr: str) -> bool:
    """Whether ``cls`` has a data descriptor (a property...) ``attr``, which the instance's
    ``__dict__`` entry of that name does not override."""
    for klass in cls.__mro__:
        if attr in vars(klass):
            return hasattr(type(vars(klass)[attr]), "__set__")
    return False


def _method(cls: type, name: str):
    """The function run by ``instance.name`` for an instance of ``cls``, if it is a method,
    a class or static method or a property."""
    try:
        attribute = getattr(cls, name, None)
    except Exception:                   # noqa: BLE001 -- a metaclass's own lookup failed
        return None
    if isinstance(attribute, property):
        return attribute.fget
    if isinstance(attribute, (types.FunctionType, types.MethodType)):
        return attribute
    return None


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


@contextmanager
def unstaged() -> Iterator[None]:
    """Ops on plain arrays in this block are computed, never staged into an enclosing trace:
    for code that evaluates an op on its inputs' values (a custom function's rule, a
    solver's iterations), whose arrays may be the very objects ``staging`` lifts.

    >>> from primitives.tensor.transforms.functional import GraphTrace
    >>> import primitives.tensor as tnp
    >>> V = np.arange(3.0)
    >>> trace = GraphTrace(abstract=True)
    >>> with staging(trace, [Reference(lambda: V, "V", V)]):
    ...     with unstaged():
    ...         total = tnp.sum(V)                  # computed
    >>> trace.active = False
    >>> float(total)
    3.0
    """
    previous = set_staging(None)
    try:
        yield
    finally:
        set_staging(previous)


class Guard:
    """The external arrays of one trace, to read again at each call.

    ``lifted`` are those the traced graph takes as constant inputs (positions in its list
    of constants): a call passes what is there now (one array found along several paths
    is one input: the paths must still agree). A new shape or dtype means the program is
    stale. So do new contents of a NumPy array up to :data:`COMPARED_BYTES`, written in
    place or rebound: NumPy's own functions may have read it too while ``f`` traced
    (``x * np.exp(V) + tnp.sum(V)``), and their result is part of the program (``jit``
    reuses the compiled program when the new trace is the same). The others (used by
    NumPy's own functions while tracing, or not at all) keep a copy of their contents, and
    numbers what is there after the trace: a change means the program is stale and must
    be traced again.

    >>> V, W = np.ones(2), np.ones(1 << 18)                 # W: bigger than COMPARED_BYTES
    >>> guard = Guard([Reference(lambda: V, "V", V), Reference(lambda: W, "W", W)],
    ...               constants=[V, W])                     # both constant inputs
    >>> W[:] = 5
    >>> guard.constants([V, W])[1] is W             # written in place: read as it is now
    True
    >>> V[:] = 5
    >>> guard.constants([V, W]) is None             # a compared array changed: stale
    True
    """

    def __init__(self, references: list[Reference], constants: list) -> None:
        references = [ref for ref in references if not _changed_while_traced(ref)]
        by_id: dict = {}
        for position, value in enumerate(constants):
            by_id.setdefault(id(value), []).append(position)
        paths: dict = {}
        for ref in references:
            if id(ref.value) in by_id:
                paths.setdefault(id(ref.value), []).append(ref)
        self.lifted = [(refs[0].read, refs[0].value, _copy(refs[0].value),
                        tuple(r.read for r in refs[1:]), by_id[key])
                       for key, refs in paths.items()]
        self.copied = [(ref.read, *_snapshot(ref)) for ref in references
                       if id(ref.value) not in by_id]
        self.lifted_positions = frozenset(p for *_, positions in self.lifted for p in positions)

    def expire(self) -> None:
        """Make the trace stale at the next call (:meth:`constants` gives ``None``)."""
        self.copied.append((_expired, None, None))

    def constants(self, constants: list) -> list | None:
        """``constants`` with the external arrays as they are now; ``None`` if the trace is
        stale (an array changed shape or dtype, a compared one its contents, or one read
        only at trace time changed)."""
        for read, expected, snapshot in self.copied:
            now = read()
            if now is expected:
                if not _equal(now, snapshot):
                    return None
            elif not (_same_scalar(now, expected) or _same_copy(now, expected, snapshot)):
                return None
        if not self.lifted:
            return constants
        constants = list(constants)
        for read, value, snapshot, others, positions in self.lifted:
            now = read()
            if snapshot is not value:           # compared by contents
                if not _equal(now, snapshot) or type(now) is not type(value):
                    return None
            elif now is not value:
                if not is_array(now) or now.shape != value.shape or \
                        now.dtype != value.dtype or type(now) is not type(value):
                    return None
            if others and any(other() is not now for other in others):
                return None                     # the paths now hold two arrays: two inputs
            for position in positions:
                constants[position] = now
        return constants


def _same_copy(now, expected, snapshot) -> bool:
    """Whether ``now``, an array found in place of ``expected`` (compared by contents,
    ``snapshot`` its copy), is one of its type with the same contents: what NumPy's
    functions computed from it while tracing stands (a mask ``f`` makes again and stores
    at each trace is no change)."""
    return snapshot is not expected and type(now) is type(expected) and _equal(now, snapshot)


def _expired() -> object:
    """What an expired guard reads (:meth:`Guard.expire`): never what it expects."""
    return _MISSING


def _same_scalar(now, expected) -> bool:
    """Whether ``now``, a number or string found in place of ``expected``, is the same value
    made anew (a learning rate or a mode computed again before each call): no change, bit
    for bit (``-0.0`` is not ``0.0``, ``1`` is not ``1.0``: each traces otherwise)."""
    kind = type(now)
    if kind is not type(expected):
        return False
    if kind is str or kind is int or kind is bool:
        return now == expected
    if kind is float:
        return now.hex() == expected.hex()
    if kind is complex:
        return now.real.hex() == expected.real.hex() and \
            now.imag.hex() == expected.imag.hex()
    return isinstance(now, np.generic) and now.dtype == expected.dtype and \
        now.tobytes() == expected.tobytes()


def _snapshot(ref: Reference) -> tuple:
    """What a guard compares ``ref`` with: the array found before the trace (the one the
    trace read) and a copy of its contents; or the number there after the trace, so that a
    counter the traced function steps is not a change."""
    if is_array(ref.value):
        return ref.value, _copy(ref.value)
    now = ref.read()
    return now, now


def _copy(value):
    """What a guard keeps of an array it compares by contents: a copy of a NumPy array up to
    :data:`COMPARED_BYTES`; a bigger one or another library's array is compared by identity,
    shape and dtype only (see the module docstring)."""
    if isinstance(value, np.ndarray) and value.nbytes <= COMPARED_BYTES:
        return value.copy()
    return value


def _equal(now, snapshot) -> bool:
    """Whether ``now`` holds what a guard kept of a value (:func:`_snapshot`, :func:`_copy`):
    it is the value kept, or a NumPy array of the copy's shape and dtype with its bits."""
    if now is snapshot:
        return True
    return isinstance(now, np.ndarray) and isinstance(snapshot, np.ndarray) and \
        now.shape == snapshot.shape and now.dtype == snapshot.dtype and same_bits(now, snapshot)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two NumPy arrays of one shape and dtype hold the same bits (objects: equal).
    Not ``==``: a 0.0 that became -0.0 changes ``1 / x``, and a NaN stays itself.

    >>> same_bits(np.array([0.0, np.nan]), np.array([-0.0, np.nan]))
    False
    """
    if a.dtype.hasobject:
        return bool(np.array_equal(a, b))
    if a.nbytes <= _BYTES_COMPARED_AS_BYTES:
        return a.tobytes() == b.tobytes()
    return bool((_words(a) == _words(b)).all())



def _words(array: np.ndarray) -> np.ndarray:
    """The bits of ``array`` as one flat array of the widest unsigned integers that divide
    its size (no copy for a C-contiguous array)."""
    flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    width = next(w for w in (8, 4, 2, 1) if flat.size % w == 0)
    return flat.view(f"u{width}")

