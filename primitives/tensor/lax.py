"""Structured control flow with ``jax.lax``'s names: ``cond``, ``switch``, ``select``,
``select_n``, ``fori_loop``, ``while_loop``, ``scan``, ``associative_scan`` and ``map``.

tidu traces Python as it runs, so a loop here is a Python loop: under ``jit`` and the
differentiation transforms it is unrolled into the graph, each step differentiated as
any other code (``while_loop`` included, which JAX cannot reverse-differentiate). What
must be known to run the loop, a trip count or a ``while_loop``'s condition, is read
as a value; under ``jit`` or ``vmap``, where values are not known while tracing, an
unknown one raises :class:`ConcretizationError` naming the function (pass it as a
Python number, or mark it static). A ``cond`` or ``switch`` whose predicate is not
known runs every branch and selects, elementwise, as JAX does under ``vmap``; as with
``tnp.where``, a branch not taken whose derivative is infinite there gives a NaN
gradient.

The rules JAX checks are checked: a loop's carry keeps its structure, shapes and
dtypes from step to step, the branches of a ``cond`` return the same, and the leaves
``scan`` slices share their leading length. Results are fresh: a result that is one of
the operands (``cond(p, lambda x: x, ...)``, a carry no step changed) is a copy of it.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> from primitives.tensor import lax
>>> lax.scan(lambda c, x: (c + x, c * x), 0.0, np.array([1.0, 2.0, 3.0]))
(np.float64(6.0), array([0., 2., 9.]))
>>> tnp.grad(lambda x: lax.fori_loop(0, 3, lambda i, v: tnp.sin(v), x))(0.5)
array(0.69726644)
>>> tnp.jit(lambda p, x: lax.cond(p, tnp.sin, tnp.cos, x))(True, 0.0)
array(0.)
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from primitives.tensor import numpy as api
from primitives.tensor.core import Frontend, dtype_of, shape_of
from primitives.tensor.errors import (ConcretizationError, TensorAxisError, TensorShapeError,
                                      TensorTypeError)
from primitives.tensor.numpy.lowering import stop_gradient, where
from primitives.tensor.transforms.fresh import fresh
from primitives.tensor.transforms.pytree import tree_flatten, tree_unflatten

__all__ = ["cond", "switch", "select", "select_n", "fori_loop", "while_loop", "scan",
           "associative_scan", "map", "stop_gradient"]

_PYTHON_NUMBERS = (bool, int, float, complex)
_REAL_NUMBERS = (bool, int, float)


# --- values that must be known ----------------------------------------------------------


def _check_function(fn, function: str, what: str) -> None:
    if not callable(fn):
        raise TensorTypeError(f"{function}: {what} must be a function, got "
                              f"{type(fn).__name__}")


def _known_bool(pred, function: str, what: str = "the predicate") -> bool | None:
    """``pred`` (a boolean or real scalar, as JAX takes) as a bool, or ``None`` where its
    value is not known (traced by ``jit`` or batched by ``vmap``)."""
    if shape_of(pred) != ():
        raise TensorShapeError(f"{function}: {what} must be a scalar, got shape "
                               f"{shape_of(pred)}")
    if type(pred) not in _REAL_NUMBERS and dtype_of(pred).kind not in "biuf":
        # a complex, string or None predicate is refused, not read as a truth value
        raise TensorTypeError(f"{function}: {what} must be a boolean or a real number, got "
                              f"{_describe(pred)}")
    try:
        return bool(pred)
    except ConcretizationError:
        return None


def _describe(value) -> str:
    kind = type(value)
    if kind in _PYTHON_NUMBERS or kind is str or value is None:
        return f"{kind.__name__} {value!r}"
    dtype = getattr(value, "dtype", None)
    return f"a value of dtype {dtype_of(value)}" if dtype is not None else kind.__name__


def _known_int(value, function: str, what: str) -> int:
    try:
        return operator.index(value)
    except ConcretizationError:
        raise ConcretizationError(
            f"{function}: {what} is traced, so its value is not known while tracing, and "
            f"the loop cannot be unrolled; pass a Python int, or mark the argument static "
            f"(jit's static_argnums)") from None
    except TypeError:
        raise TensorTypeError(f"{function}: {what} must be an integer, got "
                              f"{type(value).__name__}") from None


# --- checks JAX makes ---------------------------------------------------------------------


def _types(tree) -> tuple:
    """The structure of ``tree`` and each leaf's (shape, dtype); a Python number's dtype is
    ``None`` (weak: it may become an array of any dtype of its kind)."""
    leaves, structure = tree_flatten(tree)
    return _leaf_types(structure, leaves)


def _leaf_types(structure, leaves: list) -> tuple:
    return structure, [(shape_of(leaf), None if type(leaf) in _PYTHON_NUMBERS
                        else dtype_of(leaf)) for leaf in leaves]


def _check_same_types(before, after, function: str, what: str) -> None:
    _check_types(_types(before), _types(after), function, what)


def _check_types(before: tuple, after: tuple, function: str, what: str) -> None:
    """Refuse ``after`` (what :func:`_types` gives) unless it has the types of ``before``."""
    (tree_a, types_a), (tree_b, types_b) = before, after
    if tree_a != tree_b:
        raise TensorTypeError(f"{function}: {what} must keep its structure, {tree_a!r}; "
                              f"got {tree_b!r}")
    for n, ((shape_a, dtype_a), (shape_b, dtype_b)) in enumerate(zip(types_a, types_b)):
        if shape_a != shape_b:
            raise TensorShapeError(f"{function}: {what} must keep its shapes: leaf {n} had "
                                   f"shape {shape_a}, then {shape_b}")
        if dtype_a is not None and dtype_b is not None and dtype_a != dtype_b:
            raise TensorTypeError(f"{function}: {what} must keep its dtypes: leaf {n} was "
                                  f"{dtype_a}, then {dtype_b} (cast it in the function)")


def _fresh(result, operands) -> Any:
    """``result`` with each leaf that is one of ``operands``' leaves (or shares its memory)
    replaced by a copy."""
    leaves, structure = tree_flatten(result)
    held = [leaf for leaf in tree_flatten(operands)[0] if _is_array(leaf)]
    own = {id(leaf) for leaf in held if isinstance(leaf, Frontend)}
    arrays = [n for n, leaf in enumerate(leaves) if _is_array(leaf)]
    copied = fresh([api.copy(leaves[n]) if id(leaves[n]) in own else leaves[n]
                    for n in arrays], held)
    for n, leaf in zip(arrays, copied):
        leaves[n] = leaf
    return tree_unflatten(structure, leaves)


def _is_array(leaf) -> bool:
    """Whether ``leaf`` is an array (of any library) or a tidu value, not another object
    a carry may hold (a string, a function), which is passed on as it is."""
    return type(leaf) is np.ndarray or isinstance(leaf, Frontend) or (
        hasattr(leaf, "shape") and hasattr(leaf, "dtype"))


# --- branches -------------------------------------------------------------------------------


def cond(pred, true_fun: Callable, false_fun: Callable, *operands) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)`` (``jax.lax.cond``).

    When ``pred`` is not known (under ``jit`` or ``vmap``), both branches run and each
    leaf of the result is selected with ``where``; they must return the same structure,
    shapes and dtypes.

    >>> cond(1.0 > 0.0, lambda x: x + 1, lambda x: x - 1, np.array(2.0))
    np.float64(3.0)
    >>> import primitives.tensor as tnp
    >>> tnp.vmap(lambda p, x: cond(p, tnp.sin, tnp.cos, x))(np.array([True, False]),
    ...                                                    np.zeros(2))
    array([0., 1.])
    """
    _check_function(true_fun, "cond", "true_fun")
    _check_function(false_fun, "cond", "false_fun")
    taken = _known_bool(pred, "cond")
    if taken is not None:
        return _fresh((true_fun if taken else false_fun)(*operands), operands)
    on_true, on_false = true_fun(*operands), false_fun(*operands)
    _check_same_types(on_true, on_false, "cond", "the false branch's result (against the "
                                                 "true branch's)")
    return _selected(pred, on_true, on_false, operands)


def _selected(pred, on_true, on_false, operands, function: str = "cond") -> Any:
    true_leaves, structure = tree_flatten(on_true)
    false_leaves = tree_flatten(on_false)[0]
    leaves = []
    for n, (a, b) in enumerate(zip(true_leaves, false_leaves)):
        if _is_array(a) or _is_array(b) or type(a) in _PYTHON_NUMBERS \
                or type(b) in _PYTHON_NUMBERS:
            leaves.append(where(pred, a, b))
        elif a is b or (type(a) is type(b) and a == b):     # a name, a function: kept
            leaves.append(a)
        else:
            raise TensorTypeError(
                f"{function}: leaf {n} of the results is {a!r} in one branch and {b!r} in "
                "another; a traced predicate selects between arrays, so the branches must "
                "agree on what is not an array")
    return _fresh(tree_unflatten(structure, leaves), operands)


def switch(index, branches: Sequence[Callable], *operands) -> Any:
    """``branches[index](*operands)``, ``index`` clamped to the branches
    (``jax.lax.switch``); an index not known runs every branch and selects, as
    :func:`cond`.

    >>> switch(5, [lambda x: x, lambda x: 2 * x], np.array(3.0))
    np.float64(6.0)
    """
    if callable(branches) or not isinstance(branches, Iterable):
        raise TensorTypeError(f"switch: branches must be a non-empty sequence of functions, "
                              f"got {type(branches).__name__}")
    branches = list(branches)
    if not branches or not all(callable(b) for b in branches):
        raise TensorTypeError("switch: branches must be a non-empty sequence of functions")
    if shape_of(index) != ():
        raise TensorShapeError(f"switch: the index must be a scalar, got shape "
                               f"{shape_of(index)}")
    if type(index) is not int and dtype_of(index).kind not in "iu":
        # as JAX: a float index (traced, it would pick a branch by equality) or a bool
        raise TensorTypeError(f"switch: the index must be an integer, got {_describe(index)}")
    try:
        known = operator.index(index)
    except ConcretizationError:
        known = None
    except TypeError:
        raise TensorTypeError(f"switch: the index must be an integer, got "
                              f"{type(index).__name__}") from None
    if known is not None:
        chosen = branches[min(max(known, 0), len(branches) - 1)]
        return _fresh(chosen(*operands), operands)
    results = [branch(*operands) for branch in branches]
    for n, result in enumerate(results[1:], 1):
        _check_same_types(results[0], result, "switch", f"branch {n}'s result (against "
                                                        "branch 0's)")
    clamped = api.clip(index, 0, len(branches) - 1)
    out = results[-1]
    for n in range(len(results) - 2, -1, -1):
        out = _selected(clamped == n, results[n], out, (), "switch")
    return _fresh(out, operands)


def select(pred, on_true, on_false):
    """``on_true`` where ``pred``, else ``on_false``, elementwise (``jax.lax.select``:
    ``tnp.where``).

    >>> select(np.array([True, False]), np.ones(2), np.zeros(2))
    array([1., 0.])
    """
    return where(pred, on_true, on_false)


def select_n(which, *cases):
    """``cases[which]``, elementwise (``jax.lax.select_n``): ``which`` is a boolean (two
    cases at most: ``False`` picks ``cases[0]``) or an integer, a scalar or of the cases'
    shape; the cases share their shape and dtype (a Python number takes the others'
    dtype). An integer out of ``[0, len(cases))`` picks the nearest case, as JAX does on
    CPU. Differentiable in the cases (each gets the cotangent where it was picked), not in
    ``which``.

    >>> select_n(np.array([0, 2, 1]), np.zeros(3), np.ones(3), np.full(3, 2.0))
    array([0., 2., 1.])
    >>> select_n(True, np.array(1.0), np.array(5.0))
    array(5.)
    """
    if not cases:
        raise TensorTypeError("select_n: needs at least one case")
    shape = shape_of(cases[0])
    for n, case in enumerate(cases):
        if shape_of(case) != shape:
            shapes = ", ".join(str(shape_of(c)) for c in cases)
            raise TensorShapeError(f"select_n: the cases must share their shape, got {shapes}")
    dtypes = {dtype_of(case) for case in cases if type(case) not in _PYTHON_NUMBERS}
    if len(dtypes) > 1:
        raise TensorTypeError(f"select_n: the cases must share their dtype, got "
                              f"{', '.join(sorted(str(d) for d in dtypes))} (cast them first)")
    if shape_of(which) not in ((), shape):
        raise TensorShapeError(f"select_n: which must be a scalar or have the cases' shape "
                               f"{shape}, got shape {shape_of(which)}")
    if type(which) is bool:
        boolean = True
    elif type(which) is int:
        boolean = False
    elif type(which) in _PYTHON_NUMBERS or dtype_of(which).kind not in "biu":
        raise TensorTypeError(f"select_n: which must be boolean or integer, got "
                              f"{_describe(which)}")
    else:
        boolean = dtype_of(which).kind == "b"
    if boolean and len(cases) > 2:
        raise TensorTypeError(f"select_n: a boolean which selects between two cases, got "
                              f"{len(cases)}; use an integer which")
    if len(cases) == 1:
        return api.copy(cases[0])
    if boolean:
        return where(which, cases[1], cases[0])
    out = cases[0]
    for n in range(1, len(cases)):          # which >= n: case n or a later one
        out = where(which >= n, cases[n], out)
    return out


# --- loops ----------------------------------------------------------------------------------


def fori_loop(lower, upper, body_fun: Callable, init_val, *, unroll: Any = None) -> Any:
    """``val = body_fun(i, val)`` for ``i`` from ``lower`` to ``upper - 1``
    (``jax.lax.fori_loop``); ``i`` is a Python int. The bounds must be known (``unroll``
    is accepted for JAX's signature; the loop is always unrolled).

    >>> fori_loop(0, 4, lambda i, v: v + i, np.array(0.0))
    np.float64(6.0)
    """
    _check_function(body_fun, "fori_loop", "body_fun")
    start = _known_int(lower, "fori_loop", "lower")
    stop = _known_int(upper, "fori_loop", "upper")
    val = init_val
    types = _types(val) if start < stop else None
    for i in range(start, stop):            # each step's types kept for the next step's check
        val = body_fun(i, val)
        types = _checked_types(val, types, "fori_loop", "the loop value")
    return _fresh(val, init_val)


def while_loop(cond_fun: Callable, body_fun: Callable, init_val) -> Any:
    """``val = body_fun(val)`` while ``cond_fun(val)`` (``jax.lax.while_loop``). The
    condition must be known at each step (not under ``jit`` or ``vmap`` when it depends
    on traced values); each step is differentiated, in both modes.

    >>> while_loop(lambda v: v < 10, lambda v: v * 2, np.array(1.0))
    np.float64(16.0)
    """
    _check_function(cond_fun, "while_loop", "cond_fun")
    _check_function(body_fun, "while_loop", "body_fun")
    val, types = init_val, None
    while True:
        go = _known_bool(cond_fun(val), "while_loop", "cond_fun's result")
        if go is None:
            raise ConcretizationError(
                "while_loop: the condition is traced, so its value is not known while "
                "tracing (under jit or vmap) and the number of steps cannot be known; use "
                "fori_loop with known bounds, or call it outside jit")
        if not go:
            return _fresh(val, init_val)
        if types is None:
            types = _types(val)
        val = body_fun(val)
        types = _checked_types(val, types, "while_loop", "the loop value")


def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False,
         unroll: Any = 1) -> tuple:
    """``carry, y = f(carry, x)`` over the slices ``x`` of ``xs`` along its leading axis
    (``jax.lax.scan``): the final carry and the ``y`` s stacked. ``xs`` is a pytree (its
    leaves share their leading length) or ``None`` with ``length``; ``reverse`` runs from
    the last slice, ``ys[i]`` still belonging to ``xs[i]``. ``unroll`` is accepted for JAX's
    signature; the loop is always unrolled.

    >>> carry, ys = scan(lambda c, x: (c * x, c), np.array(1.0), np.arange(1.0, 5.0))
    >>> carry, ys
    (np.float64(24.0), array([1., 1., 2., 6.]))
    >>> scan(lambda c, _: (c + 1, None), 0, length=3)
    (3, None)
    """
    _check_function(f, "scan", "f")
    x_leaves, x_tree = tree_flatten(xs)
    steps = _scan_length(x_leaves, length)
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    carry, carry_types = init, _types(init)
    per_step, y_types = [], None            # each step's y leaves; the first y's types
    for i in order:
        x = tree_unflatten(x_tree, [leaf[i] for leaf in x_leaves])
        carry, y, carry_types = _step(f, carry, carry_types, x)
        y_leaves, y_tree = tree_flatten(y)
        if y_types is None:
            y_types = _leaf_types(y_tree, y_leaves)
        else:
            _check_types(y_types, _leaf_types(y_tree, y_leaves), "scan", "y")
        per_step.append(y_leaves)
    if reverse:
        per_step.reverse()
    if steps == 0:                      # the shapes of y: one call on zeros, as JAX traces f
        x = tree_unflatten(x_tree, [api.zeros(shape_of(leaf)[1:], dtype_of(leaf))
                                    for leaf in x_leaves])
        y_leaves, y_tree = tree_flatten(_step(f, init, carry_types, x)[1])
        stacked = [api.zeros((0, *shape_of(y)), np.asarray(y).dtype if type(y) in
                             _PYTHON_NUMBERS else dtype_of(y)) for y in y_leaves]
    else:
        stacked = [_stack([leaves[k] for leaves in per_step]) for k in range(len(per_step[0]))]
    return _fresh((carry, tree_unflatten(y_tree, stacked)), (init, xs))


def _stack(column: list):
    """``tnp.stack(column)``; NumPy's own when every entry is a NumPy array (of one dtype,
    checked), with no op bound per entry (half a plain NumPy scan's time)."""
    if all(type(y) is np.ndarray or isinstance(y, np.generic) for y in column):
        return np.stack(column)
    return api.stack(column)


def _step(f: Callable, carry, carry_types: tuple, x) -> tuple:
    """``f(carry, x)``, checked: a pair (a tuple or a list, as JAX takes), whose carry has
    ``carry_types``; the new carry, y and the new carry's types."""
    out = f(carry, x)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TensorTypeError(f"scan: f must return a pair (carry, y), got "
                              f"{type(out).__name__}")
    return out[0], out[1], _checked_types(out[0], carry_types, "scan", "the carry")


def _checked_types(value, types: tuple, function: str, what: str) -> tuple:
    """The types of ``value``, a loop's new carry, refused unless they are ``types``."""
    new_types = _types(value)
    _check_types(types, new_types, function, what)
    return new_types


def _scan_length(x_leaves: list, length: int | None) -> int:
    lengths = set()
    for leaf in x_leaves:
        shape = shape_of(leaf)
        if not shape:
            raise TensorShapeError("scan: each leaf of xs must have a leading axis to scan "
                                   "over, got a scalar")
        lengths.add(shape[0])
    if length is not None:
        length = _known_int(length, "scan", "length")
        if length < 0:
            raise TensorShapeError(f"scan: length must not be negative, got {length}")
        lengths.add(length)
    if len(lengths) > 1:
        raise TensorShapeError(f"scan: the leaves of xs (and length) must share their leading "
                               f"length, got {sorted(lengths)}")
    if not lengths:
        raise TensorTypeError("scan: with no xs, give length")
    return lengths.pop()


def associative_scan(fn: Callable, elems, reverse: bool = False, axis: int = 0) -> Any:
    """The prefix combinations of ``elems`` along ``axis`` by the associative ``fn``
    (``jax.lax.associative_scan``): ``[a, fn(a, b), fn(fn(a, b), c), ...]``; with
    ``reverse``, ``[..., fn(fn(z, y), x), fn(z, y), z]``. ``elems`` is a pytree of arrays
    sharing their length along ``axis``; ``fn(a, b)`` takes and returns trees like it,
    each leaf of its argument's dtype, with a slice of that axis in place (it is applied to
    many elements at once: elementwise code, or ``vmap``).

    Blelloch's parallel scan, as JAX's: ``log2(n)`` levels combining strided slices
    (pairs of neighbours, then pairs of those...), then as many levels back filling in
    the rest; about ``2 n`` calls' worth of elements in ``2 log2(n)`` calls of ``fn``.
    Written with tnp ops, so every transform differentiates and batches it.

    >>> associative_scan(np.add, np.arange(5.0))
    array([ 0.,  1.,  3.,  6., 10.])
    >>> associative_scan(np.add, np.arange(5.0), reverse=True)
    array([10., 10.,  9.,  7.,  4.])
    """
    _check_function(fn, "associative_scan", "fn")
    leaves, structure = tree_flatten(elems)
    if not leaves:
        raise TensorTypeError("associative_scan: elems has no arrays to scan")
    try:
        if isinstance(axis, (bool, np.bool_)):
            raise TypeError
        axis = operator.index(axis)             # a NumPy integer too, as JAX takes it
    except TypeError:
        raise TensorTypeError(f"associative_scan: axis must be an int, got "
                              f"{type(axis).__name__}") from None
    ndim = len(shape_of(leaves[0]))
    if not -ndim <= axis < ndim:
        raise TensorAxisError("associative_scan", axis, ndim)
    axis %= ndim
    lengths = [shape_of(leaf)[axis] if len(shape_of(leaf)) > axis else None
               for leaf in leaves]
    if len(set(lengths)) > 1 or lengths[0] is None:
        shapes = ", ".join(str(shape_of(leaf)) for leaf in leaves)
        raise TensorShapeError(f"associative_scan: the leaves of elems must share their "
                               f"length along axis {axis}, got shapes {shapes}")

    def part(level: list, start, stop=None, step=None) -> list:
        index = (slice(None),) * axis + (slice(start, stop, step),)
        return [leaf[index] for leaf in level]

    def combine(a: list, b: list) -> list:
        out_leaves, out_structure = tree_flatten(fn(tree_unflatten(structure, a),
                                                    tree_unflatten(structure, b)))
        if out_structure != structure:
            raise TensorTypeError(f"associative_scan: fn must return elems' structure "
                                  f"{structure!r}, got {out_structure!r}")
        for n, (out, given) in enumerate(zip(out_leaves, a)):
            if shape_of(out) != shape_of(given):
                raise TensorShapeError(f"associative_scan: fn must return leaves of its "
                                       f"arguments' shapes: leaf {n} has shape "
                                       f"{shape_of(out)}, not {shape_of(given)}")
            if dtype_of(out) != dtype_of(given):    # (JAX refuses it too)
                raise TensorTypeError(f"associative_scan: fn must return leaves of its "
                                      f"arguments' dtypes: leaf {n} has dtype "
                                      f"{dtype_of(out)}, not {dtype_of(given)} (cast "
                                      "elems, or fn's result)")
        return out_leaves

    if reverse:
        leaves = [api.flip(leaf, axis) for leaf in leaves]
    # Down: each level combines its neighbours pairwise (elements 0+1, 2+3, ...): level k
    # holds the combinations of 2**k elements, the scan's results at indices 2**k - 1, ...
    levels, length = [leaves], lengths[0]
    while length >= 2:
        level = levels[-1]
        levels.append(combine(part(level, 0, -1, 2), part(level, 1, None, 2)))
        length //= 2
    # Up: a level's scan from the one above it, whose results are its odd elements; each
    # even element is the odd one before it combined with the level's own element.
    scanned = levels.pop()
    while levels:
        level = levels.pop()
        length = shape_of(level[0])[axis]
        before = part(scanned, 0, -1) if length % 2 == 0 else scanned
        even = combine(before, part(level, 2, None, 2))
        even = [api.concatenate([first, rest], axis=axis)
                for first, rest in zip(part(level, 0, 1), even)]
        scanned = [_interleave(e, o, axis) for e, o in zip(even, scanned)]
    if reverse:
        scanned = [api.flip(leaf, axis) for leaf in scanned]
    return _fresh(tree_unflatten(structure, scanned), elems)


def _interleave(even, odd, axis: int):
    """``even[0], odd[0], even[1], odd[1], ...`` along ``axis`` (``even`` as long as ``odd``
    or one longer)."""
    count = shape_of(odd)[axis]
    index = (slice(None),) * axis
    pairs = api.stack([even[index + (slice(0, count),)], odd], axis=axis + 1)
    shape = shape_of(odd)
    out = api.reshape(pairs, shape[:axis] + (2 * count,) + shape[axis + 1:])
    if shape_of(even)[axis] > count:
        out = api.concatenate([out, even[index + (slice(count, None),)]], axis=axis)
    return out


def map(f: Callable, xs, *, batch_size: int | None = None) -> Any:
    """``f`` applied to each slice of ``xs`` along its leading axis, the results stacked
    (``jax.lax.map``; ``batch_size`` is accepted for JAX's signature, and the slices run
    one by one: the results are the same).

    >>> map(lambda x: x @ x, np.arange(6.0).reshape(3, 2))
    array([ 1., 13., 41.])
    """
    _check_function(f, "map", "f")
    return scan(lambda carry, x: (carry, f(x)), (), xs)[1]
