"""``custom_jvp`` and ``custom_vjp``: your own derivative rule for a function, with JAX's API.

Wrap a numerically stable formula or an external solver, and say how to
differentiate it, without writing a primitive class::

    @custom_jvp
    def f(x): ...                          # any code on NumPy arrays (SciPy, a C solver...)

    @f.defjvp
    def f_jvp(primals, tangents):          # written with tnp functions
        return f(*primals), tangent_out    # tangent_out linear in the tangents

    @custom_vjp
    def g(x): ...
    def g_fwd(x): return g(x), residuals   # residuals: arrays (a pytree) for bwd
    def g_bwd(residuals, ct): return (ct_x,)   # one cotangent (or None) per argument
    g.defvjp(g_fwd, g_bwd)

How it works. On plain arrays the function simply runs. On tensors or traced
values (``grad``, ``jvp``, ``jit``, ``vmap``, ``Tensor.backward``...) a call is one op
(:mod:`primitives.tensor.ops.custom`) whose evaluation runs ``f`` (``custom_jvp``)
or ``fwd`` (``custom_vjp``) on arrays, so the function itself may be
opaque code; it must be pure (a new argument signature runs it one or two extra
times: to learn its result's types, and when its rule is traced). Its
derivative is the rule: ``jvp_fn`` or ``bwd`` is traced once per argument
signature (structure, shapes, dtypes, array library, nondiff arguments) into a
graph of tensor ops, which the transforms emit in place of the function's
derivative. A rule is traced when a derivative of the call is first needed, not
at the call, so a rule may call its own function (at other arguments too, as
JAX's ``polygamma`` idiom does: ``f(x, n + 1) * t`` in the JVP of ``f(x, n)``;
or a fixed-point solver whose ``bwd`` solves its adjoint with the same solver).
Those ops are differentiated like any others, so:

- ``custom_jvp`` works in forward and reverse mode and to any order (the
  derivative of the rule is the derivative of ``jvp_fn``'s code). One limit:
  reverse mode through a custom_jvp function that a JVP rule applies to a
  *tangent* would need the transpose of its opaque code, and raises (forward
  mode works);
- ``custom_vjp`` works in reverse mode; forward mode (``jvp``, ``jacfwd``) of it
  raises :class:`~primitives.tensor.transforms.functional.FunctionalError`, as JAX does.
  Second order, as in JAX: a transform nested *outside* a reverse-mode transform
  (``grad(grad(f))``, ``jacrev(jacrev(f))``) differentiates the code of ``fwd``
  and ``bwd``, so those must be written with tnp functions (a custom function
  they call, such as ``f`` itself in ``fwd``, is differentiated by its own rule;
  forward mode over it, as in ``hessian = jacfwd(jacrev(f))``, then raises).
  A ``vmap`` or ``jit`` between the two (``grad(vmap(grad(f)))``, ``grad`` of a
  ``jit(grad(f))`` traced before on plain arrays) changes nothing: ``fwd``'s code
  runs in their trace where a transform outside differentiates it. The eager
  ``Tensor.backward(create_graph=True)`` follows PyTorch instead: the call stays
  one op, its outputs are differentiated by ``bwd`` again, and its residuals
  by reverse mode through ``fwd``'s code.
- ``vmap`` of a call runs the function once per example (its code is opaque and
  may not batch), while its rules are batched like the rest of the graph
  (:func:`tidu.batch` of the traced rule), so derivatives of the batched call do
  batched work and every transform composes with ``vmap`` in any order:
  ``vmap(grad(f))``, ``grad(vmap(f))``, ``jacfwd(vmap(f))``, ``hessian`` of a
  sum of ``vmap(f)``, ``vmap(vmap(f))``, ``jit`` of any of them.

As in JAX, arguments at ``nondiff_argnums`` (functions, options: hashable
values) are not differentiated and come first in the rules:
``jvp_fn(*nondiff, primals, tangents)``, ``bwd(*nondiff, residuals, ct)``.

Rules are traced like ``jit`` traces: shapes and dtypes only (Python ``if`` on a
value raises :class:`~primitives.tensor.errors.ConcretizationError`; use
``tnp.where``), once per signature, at the arrays of the signature's first call
(kept), when its derivative is first needed; threads that need it at once get
the same traced rule. Arrays a rule reads from its closure or globals follow
Python's rule, as in ``jit`` (:mod:`primitives.tensor.transforms.closure`): they are read
each time the rule is used, so writing into them or rebinding them changes the
next derivative (a change the traced graph cannot follow traces the rule
again). A function or rule that closes over
a ``Tensor`` or traced value raises (its derivative would be lost); pass it as an
argument. So does an ``f`` or ``fwd`` that binds an array where the JVP rule or
``bwd`` reads it from outside (a global dict, its closure): the traced rule would read
another call's value; pass it in the residuals (or as an argument). Rules are
checked when traced: structures, shapes and dtypes (the
``out`` of ``jvp_fn`` and ``fwd`` must be like ``f``'s result), and linearity
(zero tangents must give a zero ``tangent_out``, a zero cotangent zero ``bwd``
results, and every op the rule applies to its tangents or cotangents must be
linear in them: ``t * t``, ``sin(t)`` or ``where(t > 0, ...)`` raise); a rule that
needs the derivative of its own function at the same signature while it is
traced raises; every error names the function.

Other array libraries. On PyTorch, Dask or CuPy arrays (or tensors of them) the
function runs on those arrays (write it with their functions, or the Array API
through ``array_api_compat.array_namespace``) and the call's results are arrays
of that library; NumPy results are converted to it. Nothing is computed for the
checks on Dask arrays: the linearity check reads values, so it is skipped for
lazy Dask results (a rule first traced on Dask arrays is checked for structure,
shapes and dtypes only).

Complex numbers. ``jvp_fn`` is forward mode, with JAX's meaning. ``bwd`` is
reverse mode in tidu's convention (the adjoint under ``Re<a, b>``, PyTorch's):
for holomorphic ``f`` it returns ``ct * conj(f'(z))``. A JAX ``bwd`` written for
complex inputs converts as ``tidu_bwd(res, ct) = conj(jax_bwd(res, conj(ct)))``.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> @tnp.custom_jvp
... def log1pexp(x):
...     return np.logaddexp(0.0, x)            # plain NumPy: runs on arrays
>>> @log1pexp.defjvp
... def log1pexp_jvp(primals, tangents):
...     (x,), (t,) = primals, tangents
...     return log1pexp(x), t * (1 - tnp.exp(-log1pexp(x)))   # sigmoid(x) * t, stable
>>> tnp.grad(lambda x: tnp.sum(log1pexp(x)))(np.array([-1000.0, 0.0, 1000.0]))
array([0. , 0.5, 1. ])
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Callable, Sequence

import numpy as np

from tidu import ADRuleError, ADRuleKind, TiduError
from tidu.graph import External, Linearized, Local
from tidu.rules import GraphPrimitiveBuilder
from primitives.tensor.backends import NUMPY, as_array, library_of, to_library
from primitives.tensor.transforms.closure import (Guard, external_values, is_array, staging,
                                                   unstaged)
from primitives.tensor.transforms.fresh import memory_of
from primitives.tensor.core import Frontend, bind, bind_below, dtype_of, shape_of
from primitives.tensor.numpy.creation import zeros_like
from primitives.tensor.transforms.functional import (FunctionalError, GraphTrace, check_callable,
                                                     check_output, is_differentiated, vjp)
from primitives.tensor.ops.custom import (
    CustomJVPCall,
    CustomVJPCall,
    RuleGraph,
    run_per_example,
    zero_or,
)
from primitives.tensor.transforms.pytree import (TreeDef, flatten_one_level, tree_flatten,
                                                 tree_unflatten)
from primitives.tensor.transforms.vmap import vmap

_RULES_PER_FUNCTION = 64        # argument signatures whose rules a function keeps
_BATCHED_PER_RULE = 64          # batchings (axes, size) whose batched rules a rule keeps
_PUBLISH = threading.Lock()     # guards the rule caches and each rule's traced graph
_TRACING = threading.local()    # .rules: the rules this thread is tracing (to catch a loop);
                                # .trace: the trace of the innermost one

__all__ = ["custom_jvp", "custom_vjp"]


def _name(f) -> str:
    return getattr(f, "__qualname__", None) or type(f).__name__


def _has_inexact_leaf(tree) -> bool:
    """Whether ``tree`` holds a floating point or complex leaf: one with a tangent (an
    integer or boolean has none: JAX's ``float0``)."""
    return any(dtype_of(leaf).kind in "fc" for leaf in tree_flatten(tree)[0])


def _on_plain_values(method: Callable) -> Callable:
    """``method``, which runs the user's function on its inputs' values (an op's ``eval``, a
    rule's first call), with staging paused: those values may be the very arrays an
    enclosing ``jit`` lifts from ``f``'s closure (an initial guess passed to
    ``fixed_point``), and the function's ops on them are computed, not staged."""
    @functools.wraps(method)
    def on_plain_values(*args, **kwargs):
        with unstaged():
            return method(*args, **kwargs)
    return on_plain_values


class _CustomFunction:
    """What ``custom_jvp`` and ``custom_vjp`` share: the function, its ``nondiff_argnums``,
    and its rules by argument signature."""

    kind = "custom"

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        check_callable(fun, type(self).__name__)
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(sorted(set(nondiff_argnums)))
        self._signature = _signature(fun)
        self._rules: dict = {}

    def _missing_rule(self) -> FunctionalError | None:
        """The error to raise when the rule is not defined yet."""
        raise NotImplementedError

    def rule_functions(self) -> list:
        """The rules' functions (whose closures :mod:`.closure` reads, for ``jit``)."""
        return []

    def _prepare(self, args: tuple, kwargs: dict) -> tuple:
        """``(positional args, rule, differentiated leaves)``; the rule is ``None`` when no
        argument is a tensor or traced value (then the function simply runs)."""
        missing = self._missing_rule()
        if missing is not None:
            raise missing
        args = _positional(self.fun, self._signature, args, kwargs, self.kind)
        static, dynamic = self._split(args)
        leaves, in_tree = tree_flatten(dynamic)
        if not any(isinstance(leaf, Frontend) for leaf in leaves):
            return args, None, leaves
        return args, _rule_for(self, in_tree, leaves, static), leaves

    def _split(self, args: tuple) -> tuple:
        """``((position, value) of each nondiff argument, the other arguments as a tuple)``."""
        for n in self.nondiff_argnums:
            if not 0 <= n < len(args):
                raise FunctionalError(f"{self.kind} function {_name(self.fun)}: "
                                      f"nondiff_argnums {n} out of range for {len(args)} "
                                      "arguments")
            if any(isinstance(leaf, Frontend) for leaf in tree_flatten(args[n])[0]):
                raise FunctionalError(f"{self.kind} function {_name(self.fun)}: nondiff "
                                      f"argument {n} holds a tensor or traced value, whose "
                                      "derivative would be lost; make it a regular argument")
        static = tuple((n, args[n]) for n in self.nondiff_argnums)
        return static, tuple(a for n, a in enumerate(args) if n not in self.nondiff_argnums)


class custom_jvp(_CustomFunction):
    """A function with a custom JVP rule (``jax.custom_jvp``); see the module docstring.

    ``@f.defjvp`` registers ``jvp_fn(primals, tangents) -> (out, tangent_out)``:
    ``primals`` and ``tangents`` are tuples with one entry per argument of ``f``
    (pytrees as ``f``'s arguments); ``out`` is ``f(*primals)`` and ``tangent_out``
    has its structure, shapes and dtypes. Arguments at ``nondiff_argnums``
    (hashable: functions, options) are not differentiated; as in JAX they are
    passed to the rule first: ``jvp_fn(*nondiff_args, primals, tangents)``.
    :meth:`defjvps` registers one JVP per argument instead, summed.

    >>> import numpy as np
    >>> import primitives.tensor as tnp
    >>> @tnp.custom_jvp
    ... def f(x, y):
    ...     return np.sin(x) * y
    >>> @f.defjvp
    ... def f_jvp(primals, tangents):
    ...     (x, y), (tx, ty) = primals, tangents
    ...     return f(x, y), tnp.cos(x) * tx * y + tnp.sin(x) * ty
    >>> x, y = np.array(0.5), np.array(2.0)
    >>> tnp.jvp(f, (x, y), (np.array(1.0), np.array(0.0)))[1]
    array(1.75516512)
    >>> tnp.grad(f, argnums=(0, 1))(x, y)
    (array(1.75516512), array(0.47942554))
    """

    kind = "custom_jvp"

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        super().__init__(fun, nondiff_argnums)
        self.jvp = None

    def rule_functions(self) -> list:
        return [self.jvp] if self.jvp is not None else []

    def defjvp(self, jvp: Callable) -> Callable:
        """Register ``jvp(primals, tangents) -> (out, tangent_out)``; returns ``jvp``."""
        self.jvp = jvp
        self._rules = {}
        return jvp

    def defjvps(self, *jvps: Callable | None) -> None:
        """Register one JVP per argument of ``f`` (JAX's ``custom_jvp.defjvps``):
        ``jvps[i](tangent_i, out, *primals)`` is the tangent of the result from argument
        ``i``'s tangent (a tree like the result), ``None`` when argument ``i`` contributes
        none; the JVP is their sum. An argument of integers or booleans has no tangent:
        its function is not called (JAX would call it with a ``float0`` tangent, which
        raises at the first operation). There must be one per argument (JAX would drop the
        tangents of arguments past the last silently); not with ``nondiff_argnums``.

        >>> import numpy as np
        >>> import primitives.tensor as tnp
        >>> @tnp.custom_jvp
        ... def f(x, y):
        ...     return np.sin(x) * y
        >>> f.defjvps(lambda tx, out, x, y: tnp.cos(x) * tx * y,
        ...           lambda ty, out, x, y: tnp.sin(x) * ty)
        >>> tnp.grad(f, argnums=(0, 1))(np.array(0.5), np.array(2.0))
        (array(1.75516512), array(0.47942554))
        """
        name = _name(self.fun)
        if self.nondiff_argnums:
            raise FunctionalError(f"custom_jvp function {name}: defjvps cannot be used with "
                                  "nondiff_argnums; use defjvp")
        for position, jvp in enumerate(jvps):
            if jvp is not None and not callable(jvp):
                raise FunctionalError(f"custom_jvp function {name}: defjvps takes a function "
                                      f"(or None) per argument; entry {position} is a "
                                      f"{type(jvp).__name__}")

        def jvp_of_each_argument(primals, tangents):
            if len(primals) != len(jvps):
                raise FunctionalError(f"custom_jvp function {name}: defjvps got {len(jvps)} "
                                      f"JVP functions for {len(primals)} arguments; give one "
                                      "per argument (None for an argument without one)")
            out = self(*primals)
            out_leaves, out_tree = tree_flatten(out)
            total = None
            for position, (jvp, tangent, primal) in enumerate(zip(jvps, tangents, primals)):
                if jvp is None or not _has_inexact_leaf(primal):
                    continue        # an integer or boolean argument has no tangent
                leaves, tree = tree_flatten(jvp(tangent, out, *primals))
                if tree != out_tree:
                    raise FunctionalError(f"custom_jvp function {name}: the defjvps function "
                                          f"for argument {position} returned structure "
                                          f"{tree!r}, but {name} returns {out_tree!r}")
                total = leaves if total is None else [a + b for a, b in zip(total, leaves)]
            if total is None:               # no argument contributes: a zero tangent
                total = [zeros_like(o) for o in out_leaves]
            return out, tree_unflatten(out_tree, total)

        jvp_of_each_argument.__name__ = jvp_of_each_argument.__qualname__ = f"{name}.defjvps"
        self.defjvp(jvp_of_each_argument)

    def _missing_rule(self) -> FunctionalError | None:
        if self.jvp is None:
            return FunctionalError(f"custom_jvp function {_name(self.fun)} has no JVP rule: "
                                   f"define one with @{_name(self.fun)}.defjvp")
        return None

    def __call__(self, *args, **kwargs):
        args, rule, leaves = self._prepare(args, kwargs)
        if rule is None:
            return self.fun(*args)
        return tree_unflatten(rule.out_tree, bind(rule.op, *leaves))


class custom_vjp(_CustomFunction):
    """A function with a custom VJP rule (``jax.custom_vjp``); see the module docstring.

    ``f.defvjp(fwd, bwd)``: ``fwd(*args) -> (out, residuals)`` with ``out`` equal
    to ``f(*args)`` and ``residuals`` a pytree of arrays; ``bwd(residuals, ct)``
    returns a tuple with one cotangent per argument of ``f`` (``None`` for an
    argument, or part of one, that gets a zero cotangent). ``bwd`` follows tidu's
    complex convention (the conjugate of JAX's for complex inputs). With
    ``nondiff_argnums``, as in JAX, ``bwd(*nondiff_args, residuals, ct)`` returns
    cotangents for the other arguments only.

    >>> import numpy as np
    >>> import primitives.tensor as tnp
    >>> @tnp.custom_vjp
    ... def solve(a, b):
    ...     return np.linalg.solve(a, b)       # any solver: it runs on NumPy arrays
    >>> def solve_fwd(a, b):
    ...     x = solve(a, b)
    ...     return x, (a, x)
    >>> def solve_bwd(residuals, ct):          # x = a^-1 b: ct_b = a^-T ct, ct_a = -ct_b x^T
    ...     a, x = residuals
    ...     ct_b = solve(tnp.transpose(a), ct)
    ...     return -tnp.outer(ct_b, x), ct_b
    >>> solve.defvjp(solve_fwd, solve_bwd)
    >>> a, b = np.array([[2.0, 1.0], [0.0, 4.0]]), np.array([1.0, 2.0])
    >>> tnp.grad(lambda b: tnp.sum(solve(a, b)))(b)
    array([0.5  , 0.125])
    """

    kind = "custom_vjp"

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        super().__init__(fun, nondiff_argnums)
        self.fwd = None
        self.bwd = None

    def rule_functions(self) -> list:
        return [f for f in (self.fwd, self.bwd) if f is not None]

    def defvjp(self, fwd: Callable, bwd: Callable) -> None:
        """Register ``fwd(*args) -> (out, residuals)`` and ``bwd(residuals, ct) -> tuple``."""
        self.fwd = fwd
        self.bwd = bwd
        self._rules = {}

    def _missing_rule(self) -> FunctionalError | None:
        if self.fwd is None:
            return FunctionalError(f"custom_vjp function {_name(self.fun)} has no VJP rule: "
                                   f"define one with {_name(self.fun)}.defvjp(fwd, bwd)")
        return None

    def __call__(self, *args, **kwargs):
        args, rule, leaves = self._prepare(args, kwargs)
        if rule is None:
            return self.fun(*args)
        outs = bind(rule.op, *leaves)
        return tree_unflatten(rule.out_tree, outs[:len(rule.out_avals)])


def _signature(fun) -> inspect.Signature | None:
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):          # a builtin without one
        return None


def _positional(fun, signature, args: tuple, kwargs: dict, kind: str) -> tuple:
    """``args`` with ``kwargs`` and defaults moved to their positions (as JAX does)."""
    if signature is None:
        if kwargs:
            raise FunctionalError(f"{kind} function {_name(fun)}: keyword arguments need a "
                                  "function with a signature")
        return args
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as error:
        raise FunctionalError(f"{kind} function {_name(fun)}: {error}") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise FunctionalError(f"{kind} function {_name(fun)}: keyword-only arguments "
                              f"{sorted(bound.kwargs)} cannot be passed to a custom rule; "
                              "make them positional")
    return tuple(bound.args)


def _bottom(value, custom: _CustomFunction, position: int):
    """The array under a tensor or traced value (jit's traces have real values too), of any
    array library."""
    while isinstance(value, Frontend):
        value = value.value_below
    if isinstance(value, (np.ndarray, np.generic, int, float, complex)):
        array = np.asarray(value)
    else:
        array = value if library_of(value) is not NUMPY else None
    if array is None or dtype_of(array).kind not in "biufc":
        raise FunctionalError(f"{custom.kind} function {_name(custom.fun)}: argument leaf "
                              f"{position} is a {type(value).__name__}; it takes arrays, "
                              "numbers or pytrees of them (mark other arguments in "
                              "nondiff_argnums)")
    return array


def _rule_for(custom: _CustomFunction, in_tree: TreeDef, leaves: list, static: tuple):
    """The rule of ``custom`` for this argument signature (structure, shapes, dtypes and
    nondiff arguments), made on first use. Making it runs the function (for its result's
    types), not the rule: that is traced when a derivative is first needed."""
    data = [_bottom(leaf, custom, i) for i, leaf in enumerate(leaves)]
    key = (in_tree, tuple((shape_of(d), dtype_of(d).str, library_of(d).name) for d in data),
           static)
    rules = custom._rules
    try:
        rule = rules.get(key)
    except TypeError:
        raise FunctionalError(f"{custom.kind} function {_name(custom.fun)}: its nondiff "
                              "arguments must be hashable (they key its traced rules)") from None
    if rule is None:
        rule_class = _JVPRule if isinstance(custom, custom_jvp) else _VJPRule
        made = rule_class(custom, in_tree, data, static)     # user code: outside the lock
        rule = _cached(rules, key, lambda: made, _RULES_PER_FUNCTION)
    return rule


def _cached(cache: dict, key, make: Callable, limit: int):
    """``cache[key]``, set to ``make()`` if absent (the oldest entry dropped past ``limit``):
    under the lock, so threads that race get the same object. ``make`` runs no user code."""
    with _PUBLISH:
        value = cache.get(key)
        if value is None:
            if len(cache) >= limit:
                cache.pop(next(iter(cache)))
            value = cache[key] = make()
        return value


class _Rule:
    """A custom function at one argument signature: how to run it, and its rules, each
    traced into a graph when :meth:`traced` first asks for it (once, whichever thread asks
    first). ``_pending`` holds what each trace reads (the first call's arrays), kept to trace
    again if what the rule reads from outside changes."""

    kind = "custom"
    _WHAT = {"jvp": "JVP rule", "bwd": "bwd rule", "residuals": "fwd rule"}

    def __init__(self, custom, in_tree: TreeDef, data: list, static: tuple) -> None:
        self.custom = custom
        self.name = self.label = _name(custom.fun)
        self.in_tree = in_tree
        self.in_avals = [(shape_of(d), dtype_of(d)) for d in data]
        self.static = static                 # (position, value) of the nondiff arguments
        self.static_args = tuple(value for _, value in static)
        self._batched: dict = {}
        self._traced: dict = {}              # rule name -> what its _trace_<name> gave
        self._pending: dict = {}             # rule name -> what its _trace_<name> reads
        self._guards: dict = {}              # rule name -> (Guard, the constants it reads)
        self._outside: dict = {}             # f or fwd -> readers of the arrays it holds
        self._rule_readers: dict = {}        # jvp_fn or bwd -> the same (_rule_outside)

    # --- the traced rules, made on demand -----------------------------------------------

    def traced(self, which: str):
        """Rule ``which`` (``"jvp"``, ``"bwd"`` or ``"residuals"``) traced into a graph (a
        :class:`~primitives.tensor.ops.custom.RuleGraph`, see ``_trace_<which>``), traced now
        if this is the first derivative that needs it, or if an array the rule reads from
        outside has changed in a way its graph cannot follow (:mod:`.closure`)."""
        traced = self._traced.get(which)
        if traced is not None and self._current(which):
            return traced
        return self._trace_once(which, stale=traced)

    def _current(self, which: str) -> bool:
        """Whether the traced rule ``which`` still reads what its function reads now: the same
        arrays from its closure and globals (written into or not: its graph holds them)."""
        guard, constants = self._guards.get(which, (None, ()))
        if guard is None:
            return True
        now = guard.constants(list(constants))
        return now is not None and all(a is b for a, b in zip(now, constants))

    def _rule_function(self, which: str):
        return {"jvp": "jvp_fn", "bwd": "bwd_fn", "residuals": "fwd_fn"}[which]

    def _trace_once(self, which: str, stale=None):
        """Trace rule ``which`` outside any lock (tracing runs user code, which may call custom
        functions, this one included), then publish it unless another thread has published
        first. A rule that needs itself while it is being traced raises. The arrays the rule's
        function reads from outside are read at each use (:mod:`.closure`): ``tnp`` ops on them
        are staged into its graph, and a change its graph cannot follow traces it again."""
        with _PUBLISH:
            if self._traced.get(which) is not stale:
                return self._traced[which]
            data = self._pending.get(which)
        busy = _TRACING.__dict__.setdefault("rules", set())
        what = self._WHAT[which]
        if (self, which) in busy:
            raise FunctionalError(
                f"the {what} of {self.kind} function {self.name} needs its own derivative (a "
                f"derivative of {self.name} at these argument types) while it is being "
                "traced, which would never end; a rule must not differentiate its own function")
        busy.add((self, which))
        function = getattr(self, self._rule_function(which), None)
        externals = external_values(function) if function is not None else []
        outer = getattr(_TRACING, "trace", None)
        try:
            with staging(lambda: getattr(_TRACING, "trace", None), externals):
                traced = getattr(self, f"_trace_{which}")(data)
        except BaseException as error:
            if isinstance(error, TiduError) and self.name not in str(error):
                error.add_note(f"(while tracing the {what} of {self.kind} function "
                               f"{self.name}, when its derivative was first needed: rules are "
                               "traced like jit, for shapes and dtypes, and a traced value a "
                               "rule closes over must be passed as an argument instead)")
            raise
        finally:
            busy.discard((self, which))
            _TRACING.trace = outer
        rule = traced[0] if isinstance(traced, tuple) else traced
        with _PUBLISH:
            if self._traced.get(which) is stale:
                self._traced[which] = traced
                if externals:
                    self._guards[which] = (Guard(externals, list(rule.constants)),
                                           rule.constants)
            return self._traced[which]

    def batched(self, axes: tuple, axis_size: int) -> "_Rule":
        """This rule on a batch (``vmap``): inputs batched along ``axes`` (``None``: shared),
        outputs along axis 0; one rule (one op) per ``(axes, axis_size)``."""
        return _cached(self._batched, (axes, axis_size),
                       lambda: self.batched_class(self, axes, axis_size), _BATCHED_PER_RULE)

    # --- running the function -----------------------------------------------------------

    def args(self, leaves: list) -> list:
        """The function's positional arguments from the differentiated leaves."""
        args = list(tree_unflatten(self.in_tree, leaves))
        for position, value in self.static:
            args.insert(position, value)
        return args

    def _arrays(self, values: list, tree: TreeDef, expected_tree: TreeDef,
                expected_avals, what: str) -> list:
        """``values`` (leaves of structure ``tree``) checked against the structure and types
        recorded at the first call, as arrays (of their own library: NumPy for numbers)."""
        if tree != expected_tree:
            raise FunctionalError(f"{self.kind} function {self.name}: {what} has structure "
                                  f"{tree!r}, expected {expected_tree!r}")
        arrays = []
        for position, value in enumerate(values):
            if isinstance(value, Frontend):
                raise FunctionalError(
                    f"{self.kind} function {self.name}: {what} holds a "
                    f"{type(value).__name__} at leaf {position}: the function closes over a "
                    "tensor or traced value, whose derivative would be lost; pass it as an "
                    "argument")
            array = as_array(value)
            if dtype_of(array).kind not in "biufc":
                raise FunctionalError(f"{self.kind} function {self.name}: {what} holds a "
                                      f"{type(value).__name__} at leaf {position}; expected "
                                      "arrays or numbers")
            arrays.append(array)
        if expected_avals is not None:
            self._check_types(arrays, expected_avals, what)
        return arrays

    def _check_types(self, values: list, expected_avals, what: str) -> None:
        for position, (value, (shape, dtype)) in enumerate(zip(values, expected_avals)):
            if shape_of(value) != shape or dtype_of(value) != dtype:
                raise FunctionalError(
                    f"{self.kind} function {self.name}: {what} leaf {position} has shape "
                    f"{shape_of(value)} and dtype {dtype_of(value)}, expected {shape} and "
                    f"{dtype} (the first call's, for these argument types)")

    def _call_checked(self, function, args, what: str, rule, rule_what: str, hint: str,
                      first: bool):
        """``function(*args)`` (``f`` or ``fwd``), refused if it binds an array where ``rule``
        (the JVP rule or ``bwd``) reads it from outside: the traced rule reads its closure
        when a program starts, and a jit program may not run ``function`` at all, so it
        would read another call's (or example's) value, silently."""
        before = self._rule_outside(rule, first)
        result = function(*args)
        after = self._rule_outside(rule, first)
        if (after - before) if first else any(a is not b for a, b in zip(before, after)):
            raise FunctionalError(
                f"the {what} {_name(function)} of {self.kind} function {self.name} binds an "
                f"array where its {rule_what} {_name(rule)} reads it from outside (its closure, "
                f"a global or an attribute): the {rule_what} would read the value of another "
                f"call or example; pass it {hint}")
        return result

    def _rule_outside(self, rule, first: bool):
        """What ``rule`` reads from outside now. At the first call, the memory of those
        arrays, their paths found anew (a path the function creates, such as a new key of a
        global dict, is seen too); later, the values at the paths found then (cheap)."""
        if first:
            return {_array_memory(ref.value)
                    for ref in external_values(rule, warn=False)} - {None}
        readers = self._rule_readers.get(rule)
        if readers is None:
            readers = self._rule_readers[rule] = [
                ref.read for ref in external_values(rule, warn=False)
                if _array_memory(ref.value) is not None]
        return [read() for read in readers]

    def _outside_arrays(self, function) -> set:
        """The memory (:func:`.fresh.memory_of`) of the arrays ``function`` (``f`` or
        ``fwd``) reads from outside now: its closure, globals, attributes (:mod:`.closure`;
        the paths are found once per signature, read at each call, so a rebinding is seen)."""
        readers = self._outside.get(function)
        if readers is None:
            readers = [ref.read for ref in external_values(function, warn=False)
                       if _array_memory(ref.value) is not None]
            self._outside[function] = readers
        return {_array_memory(read()) for read in readers} - {None}

    def _own_results(self, arrays: list, inputs: list, function=None) -> list:
        """Results that alias an input or are NumPy views are copied: ops own their outputs.
        So are results that are arrays ``function`` holds (its closure's, a global, an
        attribute), returned as they are: an output or a residual the caller writes into
        later (or ``f`` itself, at its next call) would change the recorded value and so
        the gradient. On arrays of another library, NumPy results (of NumPy code in the
        function) become arrays of that library, as any op's results."""
        like = _foreign_array(inputs)
        outside = self._outside_arrays(function) if function is not None else ()
        owned = []
        for array in arrays:
            held = bool(outside) and memory_of(array) in outside
            if type(array) is np.ndarray:
                if held or array.base is not None or any(array is i for i in inputs):
                    array = array.copy()
                if like is not None:
                    array = to_library(array, library_of(like), like)
            elif held or any(array is i for i in inputs):
                array = library_of(array).copy(array)
            owned.append(array)
        return owned

    # --- tracing the rule ---------------------------------------------------------------

    def _new_trace(self, inputs: list, what: str) -> tuple:
        """A trace for a rule, which traces as jit does (shapes and dtypes only), and
        tracers of ``inputs`` in it."""
        trace = GraphTrace(transform=f"the {what} of {self.kind} function {self.name}",
                           abstract=True)
        _TRACING.trace = trace              # what closure arrays are staged into
        tracers = [trace.new_input((what, i), value) for i, value in enumerate(inputs)]
        return trace, tracers

    def _constants(self, trace: GraphTrace, graph, count: int, what: str) -> tuple:
        """The values of a traced rule's constant inputs (after its ``count`` arguments)."""
        values = tuple(trace.values[key] for key in graph.input_keys[count:])
        for value in values:
            if isinstance(value, Frontend):
                raise FunctionalError(
                    f"the {what} of {self.kind} function {self.name} closes over a "
                    f"{type(value).__name__}: its derivative would be lost; pass it as an "
                    "argument of the function")
        return values

    def _check_zero(self, values: list, what: str, linear_args: str) -> None:
        """With zero tangents (cotangents) a linear rule gives zeros: ``t + 1`` does not."""
        for position, value in enumerate(values):
            if _any_nonzero(value):
                raise FunctionalError(
                    f"the {what} of {self.kind} function {self.name} is not linear: with "
                    f"zero {linear_args} it gave a nonzero result at leaf {position}")

    def _check_linear(self, graph, linear_ids, what: str, linear_args: str) -> None:
        """Each op of the traced rule that reads its tangents (cotangents) must be linear in
        them: it has a transpose for that use (``t * t``, ``sin(t)``, ``t > 0`` have none).
        A custom function applied to them counts as linear (its code is opaque)."""
        linear = set(linear_ids)
        for node in graph.operations:
            mask = tuple(ref.id in linear for ref in node.inputs)
            if not any(mask):
                continue
            linear.update(node.outputs)
            if isinstance(node.operation, (CustomJVPCall, CustomVJPCall)):
                continue
            problem = _transpose_problem(graph, node, mask)
            if problem is not None:
                raise FunctionalError(
                    f"the {what} of {self.kind} function {self.name} is not linear in its "
                    f"{linear_args}: it applies {node.operation!r} to them, which has no "
                    f"transpose for that use ({problem}); a {what} must be linear in its "
                    f"{linear_args}")


def _transpose_problem(graph, node, mask: tuple) -> str | None:
    """Why op ``node`` of ``graph`` cannot be transposed in its inputs ``mask``, or ``None``:
    its transpose rule is tried on a scratch builder."""
    builder = GraphPrimitiveBuilder()
    cotangents = [builder.add_input(("cotangent", slot)) for slot in range(len(node.outputs))]
    inputs = [External(graph.value_keys[ref.id]) for ref in node.inputs]
    try:
        node.operation.transpose_rule(builder, cotangents, inputs, Linearized(mask), None)
    except ADRuleError as error:
        if error.rule is ADRuleKind.TRANSPOSE:
            return str(error)
        raise
    return None


class _JVPRule(_Rule):
    """``custom_jvp`` at one signature: ``run`` evaluates ``f``; ``emit_jvp`` emits the traced
    ``jvp_fn``."""

    kind = "custom_jvp"

    @_on_plain_values
    def __init__(self, custom, in_tree: TreeDef, data: list, static: tuple) -> None:
        super().__init__(custom, in_tree, data, static)
        self.jvp_fn = custom.jvp
        out_leaves, self.out_tree = tree_flatten(self._f(data, first=True))
        outs = self._arrays(out_leaves, self.out_tree, self.out_tree, None, "its result")
        self.out_avals = [(shape_of(o), dtype_of(o)) for o in outs]
        self._pending["jvp"] = data          # the rule is traced at the first call's arrays
        self.op = CustomJVPCall(self)

    def _f(self, inputs: list, first: bool = False):
        return self._call_checked(self.custom.fun, self.args(inputs), "function", self.jvp_fn,
                                  "JVP rule", "as an argument, or compute it in the JVP rule",
                                  first)

    @_on_plain_values
    def run(self, inputs: list) -> list:
        leaves, tree = tree_flatten(self._f(inputs))
        return self._own_results(
            self._arrays(leaves, tree, self.out_tree, self.out_avals, "its result"), inputs,
            self.custom.fun)

    def _trace_jvp(self, data: list) -> RuleGraph:
        """``jvp_fn`` traced at the first call's primals and zero tangents, checked: a graph
        from (primals, tangents, constants) to the tangents of the outputs."""
        jvp_fn, what = self.jvp_fn, "JVP rule"
        zeros = [np.zeros(shape, dtype) for shape, dtype in self.in_avals]
        trace, tracers = self._new_trace(data + zeros, what)
        primals, tangents = tracers[:len(data)], tracers[len(data):]
        try:
            pair = jvp_fn(*self.static_args, tree_unflatten(self.in_tree, primals),
                          tree_unflatten(self.in_tree, tangents))
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise FunctionalError(f"the JVP rule {_name(jvp_fn)} of custom_jvp function "
                                      f"{self.name} must return a pair (out, tangent_out), "
                                      f"got {type(pair).__name__}")
            outs, out_tree = tree_flatten(pair[0])
            tangents_out, tangent_tree = tree_flatten(pair[1])
            for part, tree in (("its out", out_tree), ("its tangent_out", tangent_tree)):
                if tree != self.out_tree:
                    raise FunctionalError(f"the JVP rule of custom_jvp function {self.name}: "
                                          f"{part} has structure {tree!r}, but {self.name} "
                                          f"returns {self.out_tree!r}")
            for position, value in enumerate(outs + tangents_out):
                check_output(value, f"the JVP rule of custom_jvp function {self.name}", jvp_fn,
                             position)
            lifted = [trace.lift(v) for v in outs + tangents_out]
        finally:
            trace.active = False
        graph = trace.build(lifted)
        n_args, n_out = 2 * len(data), len(self.out_avals)
        constants = self._constants(trace, graph, n_args, what)
        values = [tracer.value_below for tracer in lifted]
        self._check_types(values[:n_out], self.out_avals, "its JVP rule's out")
        self._check_types(values[n_out:], self.out_avals, "its JVP rule's tangent_out")
        self._check_zero(values[n_out:], what, "tangents")
        self._check_linear(graph, graph.inputs[len(data):n_args], what, "tangents")
        return RuleGraph(graph, n_args, constants, tuple(graph.outputs[n_out:]))

    def transpose_error(self) -> FunctionalError:
        return FunctionalError(
            f"reverse mode through custom_jvp function {self.name} applied to a tangent (in a "
            "JVP rule): that needs the transpose of its own code, which tidu does not see; "
            "write the tangent with tnp functions, or give it a custom_vjp rule")

    def emit_jvp(self, builder, primal_inputs, tangent_inputs) -> list:
        rule = self.traced("jvp")
        refs = [External(key) for key in primal_inputs]
        linear = [False] * len(primal_inputs)
        for tangent, (shape, dtype) in zip(tangent_inputs, self.in_avals):
            ref, is_linear = zero_or(builder, tangent, shape, dtype)
            refs.append(ref)
            linear.append(is_linear)
        tangents = rule.emit(builder, refs, linear)
        return [t if np.issubdtype(dtype, np.inexact) else None
                for t, (_, dtype) in zip(tangents, self.out_avals)]


class _VJPRule(_Rule):
    """``custom_vjp`` at one signature: ``run`` evaluates ``fwd`` (outputs, then residuals);
    ``emit_bwd`` emits the traced ``bwd`` (and, where the residuals are differentiated in
    turn, reverse mode through ``fwd``'s code)."""

    kind = "custom_vjp"

    @_on_plain_values
    def __init__(self, custom, in_tree: TreeDef, data: list, static: tuple) -> None:
        super().__init__(custom, in_tree, data, static)
        self.fwd_fn, self.bwd_fn = custom.fwd, custom.bwd
        outs, self.out_tree, residuals, self.res_tree = self._fwd(data, first=True)
        outs = self._arrays(outs, self.out_tree, self.out_tree, None, "fwd's out")
        residuals = self._arrays(residuals, self.res_tree, self.res_tree, None,
                                 "fwd's residuals")
        self.out_avals = [(shape_of(o), dtype_of(o)) for o in outs]
        self.res_avals = [(shape_of(r), dtype_of(r)) for r in residuals]
        primal, primal_tree = tree_flatten(custom.fun(*self.args(data)))
        self._arrays(primal, primal_tree, self.out_tree, self.out_avals,
                     "its result (compared with fwd's out)")
        self._pending["bwd"] = residuals     # bwd is traced at the first call's residuals,
        self._pending["residuals"] = data    # fwd's derivative at its arrays
        self.op = CustomVJPCall(self)

    def _fwd(self, inputs: list, first: bool = False) -> tuple:
        fwd = self.fwd_fn
        pair = self._call_checked(fwd, self.args(inputs), "fwd rule", self.bwd_fn, "bwd rule",
                                  "from fwd to bwd in the residuals", first)
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise FunctionalError(f"the fwd rule {_name(fwd)} of custom_vjp function "
                                  f"{self.name} must return a pair (out, residuals), got "
                                  f"{type(pair).__name__}")
        outs, out_tree = tree_flatten(pair[0])
        residuals, res_tree = tree_flatten(pair[1])
        return outs, out_tree, residuals, res_tree

    @_on_plain_values
    def run(self, inputs: list) -> list:
        outs, out_tree, residuals, res_tree = self._fwd(inputs)
        outs = self._arrays(outs, out_tree, self.out_tree, self.out_avals, "fwd's out")
        residuals = self._arrays(residuals, res_tree, self.res_tree, self.res_avals,
                                 "fwd's residuals")
        return self._own_results(outs + residuals, inputs, self.fwd_fn)

    def values_below(self, below: list) -> list:
        """The call's outputs one level below a differentiating trace that records it.

        If a value below is differentiated in turn (``grad(grad(f))``, ``hessian``),
        ``fwd``'s own code runs there, as in JAX: that transform differentiates the
        outputs and residuals through it. Otherwise the op is recorded below too.
        """
        if not any(is_differentiated(value) for value in below):
            return bind_below(self.op, below)
        return self.fwd_code(below)

    def fwd_code(self, values: list) -> list:
        """``fwd``'s code run on ``values`` (front-end values): outputs, then residuals."""
        outs, out_tree, residuals, res_tree = self._fwd(values)
        for part, tree, expected in (("fwd's out", out_tree, self.out_tree),
                                     ("fwd's residuals", res_tree, self.res_tree)):
            if tree != expected:
                raise FunctionalError(f"custom_vjp function {self.name}: {part} has structure "
                                      f"{tree!r}, expected {expected!r}")
        self._check_types(outs, self.out_avals, "fwd's out")
        self._check_types(residuals, self.res_avals, "fwd's residuals")
        return outs + residuals

    def _trace_bwd(self, residual_data: list) -> tuple:
        """``bwd`` traced at the first call's residuals and zero cotangents, checked:
        ``(graph from (residuals, cotangents, constants) to the input cotangents it gives,
        the input leaf of each)``."""
        bwd, what = self.bwd_fn, "bwd rule"
        n_res = len(self.res_avals)
        zeros = [np.zeros(shape, dtype) for shape, dtype in self.out_avals]
        trace, tracers = self._new_trace(list(residual_data) + zeros, what)
        residuals, cotangents = tracers[:n_res], tracers[n_res:]
        try:
            result = bwd(*self.static_args, tree_unflatten(self.res_tree, residuals),
                         tree_unflatten(self.out_tree, cotangents))
            leaves = self._cotangent_leaves(result)
            given = [(i, value) for i, value in enumerate(leaves) if value is not None]
            for position, value in given:
                check_output(value, f"the bwd rule of custom_vjp function {self.name}", bwd,
                             position)
            lifted = [trace.lift(value) for _, value in given]
        finally:
            trace.active = False
        graph = trace.build(lifted)
        n_args = n_res + len(zeros)
        constants = self._constants(trace, graph, n_args, what)
        values = [tracer.value_below for tracer in lifted]
        self._check_types(values, [self.in_avals[i] for i, _ in given], "its bwd rule's result")
        self._check_zero(values, what, "cotangents")
        self._check_linear(graph, graph.inputs[n_res:n_args], what, "cotangents")
        return RuleGraph(graph, n_args, constants, tuple(graph.outputs)), \
            tuple(i for i, _ in given)

    def _trace_residuals(self, data: list) -> tuple:
        """Reverse mode through ``fwd``'s code to its residuals, traced at the first call's
        arrays: ``(graph from (inputs, residual cotangents, constants) to input cotangents,
        the input leaf of each)``. Needed where the call is one op whose residuals are
        differentiated in turn: ``grad(vmap(grad(f)))``, ``backward(create_graph=True)``."""
        what, n_in = "fwd rule", len(self.in_avals)
        positions = tuple(i for i, (_, dtype) in enumerate(self.in_avals)
                          if np.issubdtype(dtype, np.inexact))
        zeros = [np.zeros(shape, dtype) for shape, dtype in self.res_avals]
        trace, tracers = self._new_trace(list(data) + zeros, what)
        inputs, cotangents = tracers[:n_in], tracers[n_in:]

        def residuals_of(*chosen):
            leaves = list(inputs)
            for position, value in zip(positions, chosen):
                leaves[position] = value
            return self.fwd_code(leaves)[len(self.out_avals):]

        try:
            _, vjp_fn = vjp(residuals_of, *[inputs[i] for i in positions],
                            transform=f"the {what} of custom_vjp function {self.name}")
            lifted = [trace.lift(ct) for ct in vjp_fn(list(cotangents))]
        finally:
            trace.active = False
        graph = trace.build(lifted)
        n_args = n_in + len(zeros)
        constants = self._constants(trace, graph, n_args, what)
        return RuleGraph(graph, n_args, constants, tuple(graph.outputs)), positions

    def _cotangent_leaves(self, result) -> list:
        """``bwd``'s result as one value (or ``None``) per input leaf."""
        arguments = self.in_tree.children
        if isinstance(result, list):
            result = tuple(result)
        if not isinstance(result, tuple) or len(result) != len(arguments):
            got = f"a tuple of {len(result)}" if isinstance(result, tuple) else "an array" \
                if isinstance(result, (Frontend, np.ndarray)) else type(result).__name__
            raise FunctionalError(f"the bwd rule {_name(self.bwd_fn)} of custom_vjp "
                                  f"function {self.name} must return a tuple with one "
                                  f"cotangent (or None) per argument: {len(arguments)}, got "
                                  f"{got}")
        leaves: list = []
        for position, (value, tree) in enumerate(zip(result, arguments)):
            _leaves_like(value, tree, leaves, self, position)
        return leaves

    def emit_bwd(self, builder, cotangent_outputs, inputs, active_mask) -> list:
        """The transpose of :class:`~primitives.tensor.ops.custom.CustomVJPLinear`, whose
        inputs are the input tangents, the residuals and the primal inputs: ``bwd`` for the
        outputs' cotangents, reverse mode through ``fwd``'s code for the residuals'."""
        n_in, n_out, n_res = len(self.in_avals), len(self.out_avals), len(self.res_avals)
        residual_refs, primal_refs = inputs[n_in:n_in + n_res], inputs[n_in + n_res:]
        parts = ((cotangent_outputs[:n_out], "bwd", residual_refs, self.out_avals),
                 (cotangent_outputs[n_out:], "residuals", primal_refs, self.res_avals))
        cotangents: list = [None] * len(inputs)
        for seeds, rule_name, refs, avals in parts:
            if all(ct is None for ct in seeds):
                continue
            rule, positions = self.traced(rule_name)
            refs, linear = list(refs), [False] * len(refs)
            for ct, (shape, dtype) in zip(seeds, avals):
                ref, is_linear = zero_or(builder, ct, shape, dtype)
                refs.append(ref)
                linear.append(is_linear)
            for position, ct in zip(positions, rule.emit(builder, refs, linear)):
                if ct is not None and active_mask[position] and \
                        np.issubdtype(self.in_avals[position][1], np.inexact):
                    cotangents[position] = _accumulate(builder, cotangents[position], ct)
        return cotangents

    def forward_mode_error(self) -> FunctionalError:
        return FunctionalError(
            f"forward-mode differentiation (jvp, jacfwd, hessian) of custom_vjp function "
            f"{self.name}: it has a reverse-mode rule only, as in JAX (defined with custom_jvp "
            "instead, it would have both modes)")


def _accumulate(builder, total: int | None, ct: int) -> int:
    """The id of ``total + ct`` (cotangents of one input from two rules), or ``ct``."""
    if total is None:
        return ct
    return builder.add_primitive(CustomVJPCall.add(), [Local(total), Local(ct)],
                                 Linearized((True, True)))[0]


class _Batched:
    """A rule on a batch (``vmap``): ``base`` with its inputs batched along ``in_axes``
    (``None``: shared by every example) and its outputs along axis 0. ``run`` loops over the
    examples (the function is opaque code); each rule is ``base``'s traced rule batched by
    :func:`tidu.batch` (traced when first needed, like any rule)."""

    def __init__(self, base: _Rule, in_axes: tuple, axis_size: int) -> None:
        self.base = base
        self.custom = base.custom
        self.name = base.name
        self.label = f"{base.label}, in_axes={in_axes}, axis_size={axis_size}"
        self.in_axes = in_axes
        self.axis_size = axis_size
        self.in_avals = [(shape if axis is None else shape[:axis] + (axis_size,) + shape[axis:],
                          dtype) for (shape, dtype), axis in zip(base.in_avals, in_axes)]
        self.out_avals = self._stacked(base.out_avals)
        self._batched = {}
        self._traced = {}
        self._pending = {}                   # nothing to read: base's traced rules are batched
        self._sources = {}                   # rule name -> base's traced rule it batched

    def _current(self, which: str) -> bool:
        """Whether ``base``'s rule is still the one this batched rule was made from."""
        return self.base.traced(which) is self._sources.get(which)

    def _stacked(self, avals) -> list:
        return [((self.axis_size,) + tuple(shape), dtype) for shape, dtype in avals]

    def run(self, inputs: list) -> list:
        example_avals = list(self.base.out_avals) + list(getattr(self.base, "res_avals", ()))
        return run_per_example(self.base.run, inputs, self.in_axes, self.axis_size,
                               example_avals, self.op)

    def transpose_error(self) -> FunctionalError:
        return self.base.transpose_error()

    def forward_mode_error(self) -> FunctionalError:
        return self.base.forward_mode_error()


class _BatchedJVPRule(_Batched, _JVPRule):
    """A ``custom_jvp`` call batched: its JVP rule is ``jvp_fn``'s traced graph, batched."""

    def __init__(self, base: _JVPRule, in_axes: tuple, axis_size: int) -> None:
        super().__init__(base, in_axes, axis_size)
        self.op = CustomJVPCall(self)

    def _trace_jvp(self, data) -> RuleGraph:
        rule = self._sources["jvp"] = self.base.traced("jvp")
        return rule.batched(self.in_axes * 2, self.axis_size, [0] * len(rule.outputs))


class _BatchedVJPRule(_Batched, _VJPRule):
    """A ``custom_vjp`` call batched: residuals stacked along axis 0; ``bwd`` (and reverse
    mode through ``fwd``) traced, then batched: cotangents of shared inputs are summed over
    the batch."""

    def __init__(self, base: _VJPRule, in_axes: tuple, axis_size: int) -> None:
        super().__init__(base, in_axes, axis_size)
        self.res_avals = self._stacked(base.res_avals)
        self.op = CustomVJPCall(self)

    def fwd_code(self, values: list) -> list:
        """``fwd``'s code on the batch: ``base``'s, mapped by ``vmap``."""
        return list(vmap(lambda *leaves: self.base.fwd_code(list(leaves)),
                         in_axes=self.in_axes)(*values))

    def _trace_bwd(self, data) -> tuple:
        # arguments: residuals and output cotangents, all batched along axis 0
        return self._batched_cotangents("bwd", [0] * len(self.base.res_avals + self.base.out_avals))

    def _trace_residuals(self, data) -> tuple:
        # arguments: the primal inputs (batched as the call's), the residuals' cotangents
        return self._batched_cotangents("residuals",
                                        list(self.in_axes) + [0] * len(self.base.res_avals))

    def _batched_cotangents(self, rule_name: str, arg_axes: list) -> tuple:
        traced = self._sources[rule_name] = self.base.traced(rule_name)
        rule, positions = traced
        out_axes = [self.in_axes[position] for position in positions]   # None: summed
        return rule.batched(arg_axes, self.axis_size, out_axes), positions


_JVPRule.batched_class = _BatchedJVPRule
_VJPRule.batched_class = _BatchedVJPRule


def _array_memory(value):
    """:func:`.fresh.memory_of` an array (of any library), ``None`` for anything else (a
    class such as ``torch.Tensor`` has a ``shape`` too)."""
    if isinstance(value, type) or not is_array(value):
        return None
    return memory_of(value)


def _foreign_array(inputs: list):
    """The first array among ``inputs`` of a library other than NumPy (``None``: none)."""
    for x in inputs:
        if type(x) is not np.ndarray and library_of(x) is not NUMPY:
            return x
    return None


def _any_nonzero(value) -> bool:
    """Whether ``value`` has a nonzero element, read in its own library. A lazy Dask array is
    not computed for a check: it counts as zero (the check is skipped)."""
    value = as_array(value)
    if type(value) is np.ndarray:
        return bool(np.any(np.abs(value) > 0))
    library = library_of(value)
    if library.name == "dask":
        return False
    return bool(library.xp.any(library.xp.abs(value) > 0))


def _leaves_like(value, tree: TreeDef, leaves: list, rule: _VJPRule, position: int) -> None:
    """Append the leaves of cotangent ``value`` laid out as argument structure ``tree``;
    ``None`` stands for zeros of a whole subtree, a tuple and a list stand for each other
    and dicts of the same keys too. Recursion follows the nesting only."""
    if value is None:
        leaves.extend([None] * _leaf_count(tree))
        return
    node = flatten_one_level(value)
    if tree.kind == "leaf" and node is None:
        leaves.append(value)
        return
    if node is None or not _same_node(node[0], tree) or len(node[1]) != len(tree.children):
        raise FunctionalError(f"the bwd rule of custom_vjp function {rule.name}: the cotangent "
                              f"of argument {position} has structure "
                              f"{tree_flatten(value)[1]!r}, but the argument has {tree!r}")
    children = [value[k] for k in tree.keys] if tree.kind in _DICTS else node[1]
    for child, child_tree in zip(children, tree.children):
        _leaves_like(child, child_tree, leaves, rule, position)


_SEQUENCES = ("tuple", "list", "namedtuple")
_DICTS = ("dict", "ordereddict", "defaultdict")


def _same_node(shell: TreeDef, tree: TreeDef) -> bool:
    """Whether a cotangent's node ``shell`` (without children) stands for argument node
    ``tree``: any sequence for a sequence, any dict of its keys for a dict, else the same
    node (type and ``aux_data``)."""
    if tree.kind in _SEQUENCES:
        return shell.kind in _SEQUENCES
    if tree.kind in _DICTS:
        return shell.kind in _DICTS and set(shell.keys) == set(tree.keys)
    return shell == tree._replace(children=())


def _leaf_count(tree: TreeDef) -> int:
    if tree.kind == "leaf":
        return 1
    return sum(_leaf_count(child) for child in tree.children)


class ByIdentity:
    """``fun``, callable as itself, equal only to a wrapper of the same function object: how a
    solver (``odeint``, ``fixed_point``) passes its user's function at ``nondiff_argnums``,
    where rules are cached by equality. The user's own ``==`` is not used: one that ignores
    the function's parameters would reuse another object's traced rules (a wrong
    derivative), and an unhashable callable (a dataclass instance) would be refused. A bound
    method is the same when its object and function are (``obj.f`` makes a new one at each
    access).

    >>> f = lambda x: 2 * x
    >>> ByIdentity(f) == ByIdentity(f), ByIdentity(f) == ByIdentity(lambda x: 2 * x)
    (True, False)
    >>> ByIdentity(f)(3)
    6
    """

    __slots__ = ("fun", "_parts")

    def __init__(self, fun: Callable) -> None:
        self.fun = fun          # held: the ids below are not reused while this lives
        self._parts = (id(getattr(fun, "__self__", None)), id(getattr(fun, "__func__", fun)))

    def __eq__(self, other) -> bool:
        return type(other) is ByIdentity and other._parts == self._parts

    def __hash__(self) -> int:
        return hash(self._parts)

    def __call__(self, *args):
        return self.fun(*args)


def outside_values_refused(tree, function: str, hint: str):
    """``tree`` (what ``function`` returned when called on plain arrays), unless a leaf is a
    traced value or a tensor that carries a gradient: then ``function`` read it from outside
    its arguments (a closure, a global), where a solver's ``custom_vjp`` would lose its
    derivative, and a :class:`FunctionalError` naming ``function`` says to pass it as ``hint``.

    >>> outside_values_refused(np.ones(2), "odeint's func", "an argument")
    array([1., 1.])
    """
    for leaf in tree_flatten(tree)[0]:
        if isinstance(leaf, Frontend) and (leaf.is_tracer or leaf.carries_gradient):
            raise FunctionalError(
                f"{function} reads a {type(leaf).__name__} from outside its arguments (its "
                f"closure or a global): its derivative would be lost; pass it as {hint}")
    return tree
