"""NumPy functions applied to tensors and traced values: they differentiate or they raise.

A ``Tensor`` or tracer handed to a NumPy function goes through NumPy's dispatch
protocols (NEP 13 ``__array_ufunc__``, NEP 18 ``__array_function__``) to here:

- a NumPy function with a differentiable ``tnp`` version (registered with
  :func:`implements`) runs that version, so ``np.where(v > 0, v, 0.0)`` records
  ``where`` and its gradient flows;
- a function whose result carries no derivative (``np.shape``, ``np.argmax``,
  boolean ufuncs such as ``np.isnan``...) runs on the data (its arrays and 0-d results,
  of an eager ``Tensor``, given back as tensors without grad: :func:`results_as_tensors`);
- anything else raises :class:`TensorNotSupportedError` naming the NumPy function,
  rather than computing on the data and dropping the derivative.

Values that carry no gradient (a ``Tensor`` that does not require grad, an integer
tracer) are plain data to every NumPy function. Converting a value that carries a
gradient to an array (``np.asarray``, ``float()``...) raises: see :func:`constant_data`.
An error for a NumPy function without a tnp version points to tnp's function of
that name when there is one: the names come from the registrations
(:func:`implements`) and from the NumPy package's namespace (:func:`provides`).

It is the bottom of the NumPy package: it imports nothing of it (only ``core`` and
``errors``), and every family module registers here.

>>> import primitives.tensor as tnp
>>> t = tnp.tensor([-1.0, 2.0], requires_grad=True)
>>> y = np.where(t > 0, t, 0.0)          # dispatched to tnp.where: y has history
>>> y.backward(np.ones(2)).grad(t)
array([0., 1.])
>>> np.argmax(t).tolist()                  # an integer result: no derivative to lose
1
"""

from __future__ import annotations

import sys
from typing import Callable

import numpy as np

from primitives.tensor.backends import NUMPY, call_on_host, library_of
from primitives.tensor.core import Frontend, array_below, data_of
from primitives.tensor.errors import TensorNotSupportedError, TensorTypeError

_IMPLEMENTATIONS: dict = {}      # NumPy function or ufunc -> its differentiable tnp version
_NAMES: set = set()              # tnp's names ("sum", "linalg.det"...): what errors suggest

# NumPy functions whose results are shapes, indices or booleans: no derivative to lose.
_NOT_DIFFERENTIABLE = {
    np.shape, np.ndim, np.size, np.argwhere, np.nonzero,
    np.flatnonzero, np.count_nonzero, np.isclose, np.allclose, np.array_equal,
    np.array_equiv, np.isneginf,
    np.isposinf, np.may_share_memory, np.shares_memory, np.array2string, np.array_repr,
    np.array_str, np.result_type, np.linalg.matrix_rank,
}
# Those of them whose results are arrays (indices, masks, counts by axis): of an eager
# Tensor, Tensors that do not require grad, as tnp.where(condition)'s and tnp.isnan's.
_ARRAY_RESULTS = {np.argwhere, np.nonzero, np.flatnonzero, np.count_nonzero, np.isclose,
                  np.isneginf, np.isposinf}

# NumPy functions that write into their first argument: refused on a tensor or traced value
# (NumPy's own "read-only" ValueError named neither), with what to write instead.
_WRITE_INTO_FIRST = {
    np.fill_diagonal: "x.at[i, i].set(value) with i = tnp.arange(n)",
    np.put: "x.at[indices].set(values) on the flattened x (x.ravel())",
    np.place: "tnp.where(mask, values, x)",
    np.putmask: "tnp.where(mask, values, x)",
    np.copyto: "src itself (tnp.asarray(src)), or tnp.where(where, src, dst)",
}


def implements(*numpy_functions) -> Callable:
    """Register the decorated function as the differentiable version of ``numpy_functions``
    (tnp has them by their NumPy names: :func:`provides` them too).

    >>> def a_numpy_function(x): ...                 # (not a real one: nothing is replaced)
    >>> @implements(a_numpy_function)
    ... def its_tnp_version(x): ...
    >>> _IMPLEMENTATIONS[a_numpy_function] is its_tnp_version
    True
    """
    def register(fn: Callable) -> Callable:
        for numpy_function in numpy_functions:
            _IMPLEMENTATIONS[numpy_function] = fn
        provides([_numpy_name(f).removeprefix("numpy.") for f in numpy_functions])
        return fn
    return register


def provides(names, namespace: str = "") -> None:
    """Record that ``tnp.{namespace}{name}`` exists for each of ``names`` (the NumPy package
    records its namespace, ``linalg.`` and ``fft.``), so an error can point to it.

    >>> provides(["det"], "linalg.")
    >>> "linalg.det" in _NAMES
    True
    """
    _NAMES.update(namespace + name for name in names)


def _qualified(fn) -> str:
    module = getattr(fn, "__module__", None) or "numpy"
    return f"{module}.{fn.__name__}"


def _numpy_name(fn) -> str:
    """``"numpy.linalg.det"``, ``"scipy.special.gammaln"``: the name errors give ``fn``."""
    return f"{_ufunc_module(fn)}.{fn.__name__}" if isinstance(fn, np.ufunc) else _qualified(fn)


def _not_supported(name: str, short: str) -> TensorNotSupportedError:
    if short in _NAMES:
        instead = f"use tnp.{short}"
    elif short.startswith("scipy.") and not any(n.startswith("scipy.") for n in _NAMES):
        instead = ("import primitives.tensor.scipy (tnp.scipy), where SciPy's functions tnp "
                   "differentiates are, or write it with tnp functions")
    else:
        instead = f"tnp has no {short} yet: write it with tnp functions"
    return TensorNotSupportedError(
        f"{name} has no differentiable tidu version and would drop the derivative; {instead}, "
        "or pass the value on as a constant on purpose with tnp.stop_gradient(x)")


def carries_gradient(value) -> bool:
    """Whether ``value`` is a frontend value a derivative can flow through."""
    return isinstance(value, Frontend) and value.carries_gradient


def constant_data(value, what: str):
    """The data under ``value`` for a conversion named ``what``; raises if that would drop
    a derivative (the value carries a gradient).

    >>> constant_data(np.ones(2), "float()")
    array([1., 1.])
    """
    data = data_of(value, what)      # under jit or vmap: no values yet (ConcretizationError)
    if carries_gradient(value):
        kind = type(value).__name__
        raise TensorTypeError(f"{what} on a {kind} that carries a gradient would drop its "
                              "derivative; use tnp functions on it, or take its value as a "
                              "constant on purpose with tnp.stop_gradient(x) (or .detach() "
                              "and .item() on a Tensor)")
    return data


def _leaves(value):
    """``value``, or the values in it if it is a (nested) list or tuple (``np.block``'s
    arguments): NumPy's dispatch finds tensors in there too."""
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _any_gradient(args, kwargs: dict) -> bool:
    return any(map(carries_gradient, _leaves([args, list(kwargs.values())])))


def _plain(value, name: str):
    """``value`` with every tensor or traced value in it (nested in lists or tuples too)
    replaced by its data, for ``name``, a NumPy function that computes on the data:
    another call of it with a tensor left in would dispatch back here, for ever."""
    if isinstance(value, Frontend):
        return data_of(value, name)
    if isinstance(value, (list, tuple)) and any(isinstance(v, Frontend) for v in _leaves(value)):
        items = [_plain(item, name) for item in value]
        return items if isinstance(value, list) else tuple(items)
    return value


def _on_data(func, name: str, args: tuple, kwargs: dict):
    """``func`` on the data of ``args`` and ``kwargs``; a tensor given as ``out=`` is refused
    (writing into it would change an immutable value)."""
    if any(isinstance(v, Frontend) for v in _leaves(kwargs.get("out"))):
        raise TensorNotSupportedError(f"{name} with out= a tensor or traced value: they are "
                                      "immutable; assign the result instead")
    return call_on_host(func, [_plain(a, name) for a in args],
                        {k: _plain(v, name) for k, v in kwargs.items()})


def array_function(func, args: tuple, kwargs: dict):
    """NEP 18: ``func(*args, **kwargs)`` where some argument is a tensor or tracer (maybe
    in a list, as ``np.block([x, y])`` has them)."""
    impl = _IMPLEMENTATIONS.get(func)
    if impl is not None:
        return _call(impl, lambda: _qualified(func), args, kwargs)
    name = _qualified(func)
    instead = _WRITE_INTO_FIRST.get(func)
    if instead is not None and args and isinstance(args[0], Frontend):
        raise TensorNotSupportedError(f"{name} writes into its first argument in place, but "
                                      f"tensors and traced values are immutable; make a new "
                                      f"array instead: {instead}")
    if func in _NOT_DIFFERENTIABLE or not _any_gradient(args, kwargs):
        result = _on_data(func, name, args, kwargs)
        return results_as_tensors(result, args, kwargs) if func in _ARRAY_RESULTS else result
    raise _not_supported(name, name.removeprefix("numpy."))


def eager_tensor_among(args, kwargs: dict):
    """The first eager ``Tensor`` among ``args`` and ``kwargs``' values (also in nested lists
    and tuples, where NumPy's dispatch finds them), or ``None`` (traced values are not).

    >>> import primitives.tensor as tnp
    >>> eager_tensor_among((np.ones(2), [tnp.tensor(1.0)]), {})
    tensor(1.)
    """
    return next((v for v in _leaves([args, list(kwargs.values())])
                 if isinstance(v, Frontend) and not v.is_tracer), None)


def results_as_tensors(result, args: tuple, kwargs: dict):
    """The one rule for what NumPy's value readers (``np.nonzero``, ``np.count_nonzero``,
    ``np.isclose``, predicates such as ``np.isnan``, integer ufuncs...) give when an
    argument is an eager ``Tensor``: a ``Tensor`` in gives ``Tensor``s out, that do not
    require grad, in the tensor's library. Every array of ``result`` (one, or a tuple of
    them) and every NumPy scalar (a reader's 0-d result: a count, a truth value) becomes
    one, as PyTorch gives 0-d tensors (``torch.count_nonzero(t)``). Python numbers and
    ``None``, which NumPy gives for reasons other than being an array's value (the truth
    of ``np.allclose``), stay as they are; so does an array given as ``out=``, returned as
    NumPy returns it. Without an eager ``Tensor`` (NumPy values; traced values under
    ``jit`` or ``vmap``), ``result`` as it is. ``tnp``'s readers and NumPy's dispatch of
    its own readers both end here, so ``tnp.f(t)`` and ``np.f(t)`` agree.

    >>> import primitives.tensor as tnp
    >>> t = tnp.tensor([0.0, 3.0], requires_grad=True)
    >>> results_as_tensors(np.nonzero(np.array([0.0, 3.0])), (t,), {})
    (tensor([1]),)
    >>> np.count_nonzero(t), np.count_nonzero(np.array([0.0, 3.0]))
    (tensor(1), np.int64(1))
    """
    tensor = eager_tensor_among(args, kwargs)
    if tensor is None or kwargs.get("out") is not None:
        return result
    return _as_tensors_of(result, tensor)


def _as_tensors_of(result, tensor: Frontend):
    if isinstance(result, tuple):
        return tuple(_as_tensors_of(r, tensor) for r in result)
    if not isinstance(result, np.generic) and (       # (np.float64 is a float too)
            result is None or isinstance(result, (bool, int, float, complex, str))):
        return result
    below = array_below(tensor)
    library = library_of(below)
    if library is not NUMPY and library_of(result) is NUMPY:
        result = library.from_numpy(result, below)
    elif isinstance(result, np.generic):
        result = np.asarray(result)
    return type(tensor)(result)


def _ufunc_module(ufunc: np.ufunc) -> str:
    """``"scipy.special"`` for SciPy's special-function ufuncs, else ``"numpy"``."""
    special = sys.modules.get("scipy.special")
    if special is not None and getattr(special, ufunc.__name__, None) is ufunc:
        return "scipy.special"
    return "numpy"


def _ufunc_name(ufunc: np.ufunc, method: str) -> str:
    """``"numpy.add"``, ``"numpy.add.reduce"``, ``"scipy.special.erf"``: for messages."""
    return f"{_ufunc_module(ufunc)}.{ufunc.__name__}" + (
        "" if method == "__call__" else f".{method}")


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict):
    """NEP 13: ``ufunc`` (or its ``method``, e.g. ``reduce``) applied to tensors or tracers."""
    impl = _IMPLEMENTATIONS.get(ufunc) if method == "__call__" else None
    if impl is not None and "out" not in kwargs:
        return _call(impl, lambda: _ufunc_name(ufunc, method), inputs, kwargs)
    name = _ufunc_name(ufunc, method)
    if method == "at" and inputs and isinstance(inputs[0], Frontend):
        # ufunc.at writes into its first operand, and NumPy (2.4) ignores the read-only flag
        # of the view a tensor's data is read through: it would change the tensor and the
        # values recorded ops saved of it (a wrong gradient, no error)
        raise TensorNotSupportedError(
            f"{name} writes into its first argument in place, but tensors and traced values "
            f"are immutable (a recorded op may have saved its values); make a new array "
            f"instead, e.g. x = x.at[indices].add(values) or .set(values)")
    if not any(map(carries_gradient, inputs)) or all(t.endswith("?") for t in ufunc.types):
        result = _on_data(getattr(ufunc, method), name, inputs, kwargs)
        # (np.isnan(t) gives a Tensor as tnp.isnan(t); an array given as out= is returned)
        return results_as_tensors(result, inputs, kwargs)
    if "out" in kwargs:
        raise TensorNotSupportedError(f"{name} with out=: writing a differentiable result into "
                                      "an existing array would drop its derivative; assign "
                                      f"the result instead (y = tnp.{ufunc.__name__}(...))")
    raise _not_supported(name, name.removeprefix("numpy."))


def _call(impl: Callable, name_of: Callable[[], str], args: tuple, kwargs: dict):
    """``impl(*args, **kwargs)``; arguments it does not take are an error naming the NumPy
    function (``name_of()``, asked only then) and ``impl``'s signature."""
    try:
        return impl(*args, **kwargs)
    except TypeError as error:
        import inspect

        name = name_of()
        try:
            inspect.signature(impl).bind(*args, **kwargs)
        except TypeError:
            raise TensorNotSupportedError(
                f"{name}: {error}; tnp.{impl.__name__} takes {inspect.signature(impl)}"
            ) from None
        raise
