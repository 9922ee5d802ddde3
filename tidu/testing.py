"""Testing tools for rule authors: JVPs against finite differences, transposes by the dot product.

What ChainRulesTestUtils gives Julia rule authors, for tidu primitive sets:

- :func:`check_jvp` compares the JVP of a graph (through :func:`tidu.linearize`)
  with central finite differences;
- :func:`check_transpose` runs the dot-product test ``<ct, J t> == <Jᵀ ct, t>``
  on a :class:`~tidu.LinearizedGraph` and its :func:`~tidu.linear_transpose`;
- :func:`check_primitive` does both for one operation on given inputs.

Operands may be Python ``float`` and ``complex``, NumPy scalars and NumPy arrays
(0-d and empty ones too). Complex numbers follow tidu's convention: a JVP is the
real-linear derivative, so a finite difference along a complex direction ``t``
measures it exactly, and transposes are taken with respect to the real inner
product ``<a, b> = Re(conj(a) b)`` (summed over elements). Inputs that cannot be
differentiated (Python ``int`` and ``bool``, integer and boolean arrays) are
skipped. Random tangents and cotangents come from
``numpy.random.default_rng(rng)``, with the shape and dtype of what they stand for.

A failed check raises :class:`CheckFailure`, an ``AssertionError`` (so pytest
shows it as a test failure) naming the op or graph output, the input, and both numbers.

>>> import enum
>>> from tidu import Primitive
>>> from tidu.graph import EvaluableGraphOperation, External, Linearized, Local
>>> class Op(Primitive, EvaluableGraphOperation, enum.Enum):
...     MUL = "mul"
...     SQUARE = "square"
...     @classmethod
...     def add(cls): return cls.MUL   # never needed here
...     def input_count(self): return 2 if self is Op.MUL else 1
...     def output_count(self): return 1
...     def eval(self, ctx, xs): return [xs[0] * xs[1]] if self is Op.MUL else [xs[0] ** 2]
...     def jvp_rule(self, b, xs, outs, ts, ctx):   # wrong: d(x^2) = 2x dx, not x dx
...         return b.add_primitive(Op.MUL, [Local(ts[0]), External(xs[0])],
...                                Linearized((True, False)))
>>> check_primitive(Op.SQUARE, 1.5)
Traceback (most recent call last):
...
tidu.testing.CheckFailure: SQUARE output 0 wrt input 0: expected ... (central finite differences), got ... (JVP); ...
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, Hashable, Mapping, Sequence

import numpy as np

from tidu.errors import TiduError
from tidu.graph import Derived, GraphBuilder, Input, Local, ValueKey, evaluate, resolve
from tidu.graph.keys import key_inputs
from tidu.graph.operation import op_name
from tidu.linearize import linearize
from tidu.linearized import LinearizedGraph
from tidu.transpose import linear_transpose

__all__ = ["CheckFailure", "CheckUsageError", "check_jvp", "check_transpose", "check_primitive"]


class CheckUsageError(TiduError, ValueError, TypeError, KeyError):
    """A checker was called wrongly (a missing primal, a tangent of the wrong shape)."""

    __str__ = Exception.__str__       # not KeyError's quoting


class CheckFailure(TiduError, AssertionError):
    """A rule check failed: a JVP disagrees with finite differences, or a transpose
    fails the dot-product test, or a tangent or cotangent has the wrong shape or kind.

    >>> issubclass(CheckFailure, AssertionError)
    True
    """


# --- values ---------------------------------------------------------------------

_F64_EPS = float(np.finfo(np.float64).eps)


def _is_differentiable(value) -> bool:
    """Floats and complex numbers (Python, NumPy scalars, NumPy arrays) are; the rest is not."""
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, (float, complex, np.floating, np.complexfloating)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "fc"
    return False


def _is_complex(value) -> bool:
    return isinstance(value, complex) or np.iscomplexobj(value)


def _machine_eps(value) -> float:
    """Unit roundoff of the value's precision (Python numbers are double)."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None and dtype.kind in "fc":
        return float(np.finfo(dtype).eps)
    return _F64_EPS


def _random_like(value, rng: np.random.Generator):
    """A random direction of ``value``'s type, shape and dtype (complex for complex values)."""
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        dtype = value.dtype if value.dtype.kind in "fc" else np.dtype(np.float64)
        shape = np.shape(value)
        if dtype.kind == "c":
            real = rng.standard_normal(shape)
            out = (real + 1j * rng.standard_normal(shape)).astype(dtype)
        else:
            out = rng.standard_normal(shape).astype(dtype)
        return out if isinstance(value, np.ndarray) else out[()]
    if isinstance(value, complex):
        return complex(rng.standard_normal(), rng.standard_normal())
    return float(rng.standard_normal())


def _zeros_like(value):
    if isinstance(value, np.ndarray):
        return np.zeros_like(value)
    if isinstance(value, np.generic):
        return value.dtype.type(0)
    return 0j if isinstance(value, complex) else 0.0


def _step(value, h: float, direction):
    """``value + h * direction`` with ``value``'s type and dtype."""
    if isinstance(value, np.ndarray):
        return np.asarray(value + h * np.asarray(direction), dtype=value.dtype)
    if isinstance(value, np.generic):
        return value.dtype.type(value + h * direction)
    if isinstance(value, complex):
        return complex(value + h * direction)
    return float(value + h * direction)


def _wide(value) -> np.ndarray:
    """``value`` as a float64 or complex128 array, for exact-enough comparisons."""
    array = np.asarray(value)
    return array.astype(np.complex128 if np.iscomplexobj(array) else np.float64)


def _max_abs(value) -> float:
    array = np.abs(_wide(value))
    return float(array.max()) if array.size else 0.0


def _inner(a, b) -> float:
    """The real inner product ``Re(sum(conj(a) * b))``."""
    return float(np.sum(np.real(np.conj(_wide(a)) * _wide(b))))


def _abs_inner(a, b) -> float:
    """``sum(|a| |b|)``: the scale against which ``_inner(a, b)`` is judged."""
    return float(np.sum(np.abs(_wide(a)) * np.abs(_wide(b))))


def _fmt(value) -> str:
    """A number (or a small array) printed with enough digits to compare."""
    if isinstance(value, np.ndarray) and value.ndim > 0:
        return np.array2string(value, precision=10, threshold=12, separator=", ",
                               max_line_width=200)
    value = value[()] if isinstance(value, np.ndarray) else value
    if isinstance(value, (complex, np.complexfloating)):
        return f"{complex(value):.10g}"
    if isinstance(value, numbers.Real):
        return f"{float(value):.10g}"
    return repr(value)


def _user_key(key):
    """Primal maps are keyed by user input keys; accept ``Input(key)`` too."""
    return key.key if isinstance(key, Input) else key


def _generator(rng) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _default_eps(eps_machine: float) -> float:
    """Relative finite-difference step: ~1e-6 for double precision, ~1e-3 for single."""
    if eps_machine <= 1e-15:
        return 1e-6
    if eps_machine <= 1e-6:
        return 1e-3
    return 3e-2


def _default_tolerances(eps_machine: float) -> tuple[float, float, float, float]:
    """``(jvp rtol, jvp atol, transpose rtol, transpose atol)`` for a precision."""
    if eps_machine <= 1e-15:
        return 1e-6, 1e-9, 1e-9, 1e-12
    if eps_machine <= 1e-6:
        return 2e-3, 1e-5, 1e-4, 1e-6
    return 5e-2, 1e-3, 1e-2, 1e-3


# --- labels -----------------------------------------------------------------------


def _output_label(index: int, key) -> str:
    if isinstance(key, Derived):
        return f"{op_name(key.operation.operation)} output {key.output_slot} (graph output {index})"
    return f"graph output {index} ({key!r})"


def _input_label(key) -> str:
    return f"input {key!r}"


# --- check_jvp ----------------------------------------------------------------------


def check_jvp(graphs, outputs: Sequence[ValueKey], primals: Mapping[Hashable, Any],
              tangents: Mapping[Hashable, Any] | None = None, *, eps: float | None = None,
              rtol: float = 1e-6, atol: float = 1e-9, rng=None, ctx: Any = None) -> None:
    """Check the JVP of ``outputs`` against central finite differences; raise :class:`CheckFailure`.

    ``graphs`` is a ``Graph``, graphs, or a ``ResolvedView``; ``outputs`` are value
    keys; ``primals`` maps user input keys (``"x"``; an ``Input("x")`` is unwrapped) to values.
    ``tangents`` maps some of those keys to directions; by default every
    differentiable primal that is an input of the graphs gets a random one.

    Each tangent input is checked alone (the graph linearized with respect to
    that input only, so the rules' symbolic-zero paths run), then all of them
    together. The reference is ``(f(x + eps t) - f(x - eps t)) / (2 eps)``; for
    a complex ``x`` and complex ``t`` that is the real-linear derivative. The
    default ``eps`` is scale-aware: about ``1e-6 * max(1, |x|) / |t|`` in double
    precision, ``1e-3`` times that in single. An element passes when
    ``|jvp - fd| <= atol + rtol * |fd|`` plus the estimated finite-difference
    error (from the same difference at ``2 eps`` and the rounding of the values).
    Each tangent must also have its output's shape, and be real where the output is.

    >>> from primitives.scalar import trace_scalar, sin
    >>> graph = trace_scalar(lambda x, y: sin(x) * y, ["x", "y"])
    >>> check_jvp(graph, graph.output_keys, {"x": 0.3, "y": 2.0 + 1.0j}, rng=0)
    >>> check_jvp(graph, graph.output_keys, {"x": 0.3, "y": 2.0}, {"x": 1.0})
    """
    view = resolve(graphs)
    _check_jvp(view, list(outputs), primals, tangents, eps=eps, rtol=rtol, atol=atol,
               rng=_generator(rng), ctx=ctx, output_label=_output_label, input_label=_input_label)


def _check_jvp(view, outputs: list, primals: Mapping, tangents: Mapping | None, *, eps, rtol,
               atol, rng, ctx, output_label: Callable[[int, Any], str],
               input_label: Callable[[Any], str]) -> None:
    primals = {_user_key(k): v for k, v in primals.items()}
    if tangents is None:
        tangents = {k: _random_like(v, rng) for k, v in primals.items()
                    if _is_differentiable(v) and Input(k) in view}
    else:
        given = {}
        for key, direction in tangents.items():
            key = _user_key(key)
            if key not in primals:
                raise CheckUsageError(f"check_jvp: tangent given for {key!r}, which has no primal value")
            primal = primals[key]
            if not _is_differentiable(primal):
                continue
            if np.shape(direction) != np.shape(primal):
                raise CheckUsageError(f"check_jvp: the tangent of {key!r} has shape "
                                 f"{np.shape(direction)}, its primal {np.shape(primal)}")
            if _is_complex(direction) and not _is_complex(primal):
                raise CheckUsageError(f"check_jvp: complex tangent given for the real input {key!r}")
            given[key] = direction
        tangents = given
    if not tangents:
        return
    values = {Input(k): v for k, v in primals.items()}
    primal_out = evaluate(view, outputs, values, ctx)

    for key in tangents:
        _compare_jvp(view, outputs, primals, values, primal_out, {key: tangents[key]},
                     input_label(key), eps, rtol, atol, ctx, output_label, input_label)
    if len(tangents) > 1:
        label = "inputs " + ", ".join(input_label(k).removeprefix("input ") for k in tangents)
        _compare_jvp(view, outputs, primals, values, primal_out, tangents, label + " together",
                     eps, rtol, atol, ctx, output_label, input_label)


def _compare_jvp(view, outputs, primals, values, primal_out, tangents: dict, in_label: str,
                 eps, rtol, atol, ctx, output_label, input_label) -> None:
    lin = linearize(view, outputs, list(tangents), ctx=ctx)
    lin_values = dict(values)
    for (key, _), tangent_key in zip(lin.tangent_inputs, lin.tangent_input_keys):
        lin_values[tangent_key] = tangents[key]
    active = [(i, k) for i, k in enumerate(lin.tangent_output_keys) if k is not None]
    results = evaluate([lin.graph, *view.graphs], [k for _, k in active], lin_values, ctx)
    jvp: list = [None] * len(outputs)
    for (i, _), result in zip(active, results):
        jvp[i] = result

    # finite differences at eps and 2 eps; their gap estimates the error of the first
    x_scale = max([1.0] + [_max_abs(primals[k]) for k in tangents])
    t_scale = max(_max_abs(t) for t in tangents.values())
    eps_in = min(_machine_eps(primals[k]) for k in tangents)
    eps_out = min([eps_in] + [_machine_eps(v) for v in primal_out])
    if eps is None:
        h = _default_eps(eps_out) * x_scale / (t_scale if t_scale > 0 else 1.0)
    else:
        h = float(eps)

    def shifted(scale: float) -> list:
        moved = dict(values)
        for key, direction in tangents.items():
            moved[Input(key)] = _step(primals[key], scale, direction)
        return evaluate(view, outputs, moved, ctx)

    plus, minus, plus2, minus2 = shifted(h), shifted(-h), shifted(2 * h), shifted(-2 * h)
    # relative size of the input rounding next to the step
    input_noise = eps_in * x_scale / (h * t_scale) if t_scale > 0 else 0.0

    for i, key in enumerate(outputs):
        out = primal_out[i]
        got = jvp[i]
        label = output_label(i, key)
        if got is None:
            got = np.zeros(np.shape(out)) if isinstance(out, np.ndarray) else 0.0
        elif np.shape(got) != np.shape(out):
            raise CheckFailure(f"{label} wrt {in_label}: the tangent has shape {np.shape(got)} "
                               f"but the output has shape {np.shape(out)}")
        elif _is_complex(got) and _is_differentiable(out) and not _is_complex(out):
            raise CheckFailure(f"{label} wrt {in_label}: the output is real but its tangent is "
                               f"complex ({_fmt(got)})")
        p, m = _wide(plus[i]), _wide(minus[i])
        expected = (p - m) / (2 * h)
        expected_2h = (_wide(plus2[i]) - _wide(minus2[i])) / (4 * h)
        got_w = _wide(got)
        error = np.abs(got_w - expected)
        tolerance = (atol + rtol * np.abs(expected) + 2 * np.abs(expected - expected_2h)
                     + 4 * eps_out * (np.abs(p) + np.abs(m)) / (2 * h)
                     + 4 * input_noise * _max_abs(expected))
        bad = ~(error <= tolerance) & ~(np.isnan(got_w) & np.isnan(expected))
        if np.any(bad):
            raise CheckFailure(_jvp_message(label, in_label, expected, got_w, error, tolerance,
                                            bad, h, tangents, primals, input_label))


def _jvp_message(label, in_label, expected, got, error, tolerance, bad, h, tangents,
                 primals, input_label) -> str:
    where = ""
    if expected.ndim:
        index = np.unravel_index(int(np.argmax(np.where(bad, error, -1.0))), expected.shape)
        where = (f" at index {tuple(int(i) for i in index)} ({int(bad.sum())} of "
                 f"{expected.size} elements off)")
        exp_v, got_v, err_v, tol_v = (expected[index], got[index], error[index], tolerance[index])
    else:
        exp_v, got_v, err_v, tol_v = expected[()], got[()], error[()], tolerance[()]
    at = ", ".join(f"{input_label(k)} = {_fmt(primals[k])}" for k in tangents)
    along = ", ".join(_fmt(t) for t in tangents.values())
    return (f"{label} wrt {in_label}: expected {_fmt(exp_v)} (central finite differences), "
            f"got {_fmt(got_v)} (JVP){where}; |error| {float(err_v):.3g} > tolerance "
            f"{float(tol_v):.3g}; at {at}; tangent {along}; eps {h:.3g}")


# --- check_transpose ----------------------------------------------------------------


def check_transpose(graphs, linear: LinearizedGraph, primals: Mapping[Hashable, Any], *,
                    cotangents=None, tangents=None, rtol: float = 1e-9, atol: float = 1e-12,
                    rng=None, ctx: Any = None) -> None:
    """The dot-product test ``<ct, J t> == <Jᵀ ct, t>`` for ``linear`` and its transpose.

    ``graphs`` are ``linear``'s primal graphs and ``primals`` maps their user
    input keys to values. ``J t`` comes from evaluating ``linear`` on tangents
    ``t`` (random, or ``tangents``: a mapping from the primal keys of
    ``linear.tangent_inputs``, or a sequence aligned with them); ``Jᵀ ct`` from
    evaluating :func:`~tidu.linear_transpose` of ``linear`` on cotangents ``ct``
    (random ones shaped like ``J t``, or ``cotangents``: a sequence aligned with
    ``linear.tangent_outputs``, or a mapping from their positions). Products use
    the real inner product ``Re(sum(conj(a) b))``.

    Every (tangent output, tangent input) pair is tested on its own, so a
    failure names both, then all of them at once. A pair passes when
    ``|<ct, J t> - <Jᵀ ct, t>| <= atol + rtol * (sum|ct||J t| + sum|Jᵀ ct||t|)``.
    Each input cotangent must have its primal's shape and kind: an array's
    cotangent its shape and real/complex dtype kind; a real scalar's a real number.
    The transposed graph must not read the tangent inputs (it must be linear in ``ct`` alone).

    >>> from tidu import linearize
    >>> from primitives.scalar import trace_scalar, sin
    >>> graph = trace_scalar(lambda x, y: sin(x) * y, ["x", "y"])
    >>> lin = linearize(graph, graph.output_keys, ["x", "y"])
    >>> check_transpose(graph, lin, {"x": 0.3, "y": 2.0}, rng=0)
    >>> check_transpose(graph, lin, {"x": 0.3 + 1j, "y": 2.0j}, cotangents=[1.0 - 1j])
    """
    view = resolve(graphs)
    _check_transpose(view, linear, primals, cotangents, tangents, rtol=rtol, atol=atol,
                     rng=_generator(rng), ctx=ctx,
                     output_label=lambda i: f"tangent output {i} ({linear.tangent_output_keys[i]!r})",
                     input_label=_input_label, subject="check_transpose")


def _check_transpose(view, linear: LinearizedGraph, primals: Mapping, cotangents, tangents, *,
                     rtol, atol, rng, ctx, output_label: Callable[[int], str],
                     input_label: Callable[[Any], str], subject: str) -> None:
    primals = {_user_key(k): v for k, v in primals.items()}
    values = {Input(k): v for k, v in primals.items()}
    keys = [key for key, _ in linear.tangent_inputs]
    tangent_keys = linear.tangent_input_keys
    for key in keys:
        if key not in primals:
            raise CheckUsageError(f"{subject}: no primal value for {key!r}, a tangent input of the "
                           "linear graph")

    # tangents
    if tangents is None:
        t = [_random_like(primals[k], rng) for k in keys]
    elif isinstance(tangents, Mapping):
        given = {_user_key(k): v for k, v in tangents.items()}
        t = [given[k] if k in given else _random_like(primals[k], rng) for k in keys]
    else:
        t = list(tangents)
        if len(t) != len(keys):
            raise CheckUsageError(f"{subject}: {len(t)} tangents for {len(keys)} tangent inputs")
    zero_t = [_zeros_like(v) for v in t]

    active = [i for i, o in enumerate(linear.tangent_outputs) if o is not None]
    if not active or not keys:
        return
    active_keys = [linear.tangent_output_keys[i] for i in active]
    linear_graphs = [linear.graph, *view.graphs]

    def forward(tangent_values) -> list:
        env = dict(values)
        env.update(zip(tangent_keys, tangent_values))
        return evaluate(linear_graphs, active_keys, env, ctx)

    jt_all = forward(t)
    jt_each = []
    for j in range(len(keys)):
        only = list(zero_t)
        only[j] = t[j]
        jt_each.append(forward(only))

    # cotangents, one per active tangent output
    if cotangents is None:
        ct = [_random_like(jt_all[a], rng) for a in range(len(active))]
    elif isinstance(cotangents, Mapping):
        ct = [cotangents[i] if i in cotangents else _random_like(jt_all[a], rng)
              for a, i in enumerate(active)]
    else:
        cotangents = list(cotangents)
        if len(cotangents) != len(linear.tangent_outputs):
            raise CheckUsageError(f"{subject}: {len(cotangents)} cotangents for "
                             f"{len(linear.tangent_outputs)} tangent outputs")
        ct = [cotangents[i] for i in active]
    for a in range(len(active)):
        if ct[a] is None:
            ct[a] = _zeros_like(jt_all[a])
    zero_ct = [_zeros_like(c) for c in ct]

    transposed = linear_transpose(linear, ctx)
    seed_keys = transposed.tangent_input_keys
    out_keys = [k for k in transposed.tangent_output_keys if k is not None]
    _check_reads_no_tangent(out_keys, dict(zip(tangent_keys, keys)), subject, input_label)
    transposed_graphs = [transposed.graph, *linear_graphs]

    def backward(seeds) -> list:
        env = dict(values)
        env.update(zip(seed_keys, seeds))
        results = iter(evaluate(transposed_graphs, out_keys, env, ctx))
        return [None if k is None else next(results) for k in transposed.tangent_output_keys]

    def checked_cotangents(results, out_label):
        out = []
        for key, cot in zip(keys, results):
            if cot is None:
                out.append(_zeros_like(primals[key]))
                continue
            _check_cotangent_kind(primals[key], cot, subject, out_label, input_label(key))
            out.append(cot)
        return out

    ct_all = checked_cotangents(backward(ct), "all tangent outputs")
    ct_each = []
    for a, i in enumerate(active):
        only = list(zero_ct)
        only[a] = ct[a]
        ct_each.append(checked_cotangents(backward(only), output_label(i)))

    def compare(lhs, rhs, scale, out_label, in_label):
        tolerance = atol + rtol * scale
        if not abs(lhs - rhs) <= tolerance:
            raise CheckFailure(
                f"{subject}: dot-product test fails for {out_label} and {in_label}: "
                f"<ct, J t> = {lhs:.12g} but <J^T ct, t> = {rhs:.12g} "
                f"(|difference| {abs(lhs - rhs):.3g} > tolerance {tolerance:.3g})")

    for a, i in enumerate(active):
        for j, key in enumerate(keys):
            forward_part = jt_each[j][a]
            backward_part = ct_each[a][j]
            compare(_inner(ct[a], forward_part), _inner(backward_part, t[j]),
                    _abs_inner(ct[a], forward_part) + _abs_inner(backward_part, t[j]),
                    output_label(i), input_label(key))
    if len(active) > 1 or len(keys) > 1:
        lhs = sum(_inner(c, f) for c, f in zip(ct, jt_all))
        rhs = sum(_inner(c, tj) for c, tj in zip(ct_all, t))
        scale = (sum(_abs_inner(c, f) for c, f in zip(ct, jt_all))
                 + sum(_abs_inner(c, tj) for c, tj in zip(ct_all, t)))
        compare(lhs, rhs, scale, "all tangent outputs", "all tangent inputs together")


def _check_cotangent_kind(primal, cot, subject, out_label, in_label) -> None:
    """An input cotangent must live where its primal does (shape; real or complex)."""
    if not _is_differentiable(primal):
        return
    where = f"{subject}: the cotangent of {in_label} (from {out_label})"
    if isinstance(primal, (np.ndarray, np.generic)):
        if np.shape(cot) != np.shape(primal):
            raise CheckFailure(f"{where} has shape {np.shape(cot)}, but the primal has shape "
                               f"{np.shape(primal)}")
        if _is_complex(cot) != _is_complex(primal):
            raise CheckFailure(f"{where} is {'complex' if _is_complex(cot) else 'real'} "
                               f"({np.asarray(cot).dtype}), but the primal is "
                               f"{'complex' if _is_complex(primal) else 'real'} ({primal.dtype})")
        return
    if np.ndim(cot) != 0:
        raise CheckFailure(f"{where} has shape {np.shape(cot)}, but the primal is a scalar")
    if _is_complex(cot) and not _is_complex(primal):
        raise CheckFailure(f"{where} is complex ({_fmt(cot)}), but the primal is real "
                           f"({_fmt(primal)}); a real input's cotangent must be real")


def _check_reads_no_tangent(out_keys, tangent_keys: dict, subject, input_label) -> None:
    """The transposed graph must not depend on the tangent inputs of the linear graph."""
    seen = set()
    stack = list(out_keys)
    while stack:
        key = stack.pop()
        if key in seen:
            continue
        seen.add(key)
        if key in tangent_keys:
            raise CheckFailure(f"{subject}: the transposed graph reads the tangent of "
                               f"{input_label(tangent_keys[key])} ({key!r}); a transpose "
                               "must depend on the cotangents only")
        stack.extend(key_inputs(key))


# --- check_primitive ----------------------------------------------------------------


def check_primitive(op, *primal_inputs, eps: float | None = None, rtol: float | None = None,
                    atol: float | None = None, rng=None, ctx: Any = None) -> None:
    """Check ``op``'s JVP rule against finite differences and its linearization's transpose.

    Builds a one-operation graph of ``op`` (a ``Primitive`` that is also an
    ``EvaluableGraphOperation``) on inputs keyed ``0, 1, ...`` holding
    ``primal_inputs``, then runs :func:`check_jvp` on every output slot (each
    differentiable input alone, then all together) and :func:`check_transpose` on
    its linearization with respect to every differentiable input. Tolerances
    default by precision: ``rtol=1e-6, atol=1e-9`` for the JVP and ``1e-9,
    1e-12`` for the transpose in double precision, looser in single precision;
    ``rtol``/``atol`` given here apply to both checks.

    >>> from primitives.scalar import ScalarOp, Pow
    >>> check_primitive(ScalarOp.SIN, 0.3)
    >>> check_primitive(ScalarOp.SINCOS, 0.5 - 2j, rng=0)
    >>> check_primitive(ScalarOp.DIV, 1.5, -0.5)
    >>> check_primitive(Pow(3), 2, rng=1)            # an int input is skipped: nothing to check
    """
    n_inputs = op.input_count()
    if len(primal_inputs) != n_inputs:
        raise CheckUsageError(f"check_primitive: {op_name(op)} takes {n_inputs} inputs, "
                        f"got {len(primal_inputs)}")
    builder = GraphBuilder()
    ids = [builder.add_input(slot) for slot in range(n_inputs)]
    builder.set_outputs(builder.add_operation(op, [Local(i) for i in ids]))
    graph = builder.build()
    outputs = list(graph.output_keys)
    primals = dict(enumerate(primal_inputs))
    wrt = [slot for slot, value in primals.items() if _is_differentiable(value)]
    if not wrt:
        return

    eps_machine = min(_machine_eps(v) for v in primal_inputs if _is_differentiable(v))
    jvp_rtol, jvp_atol, tr_rtol, tr_atol = _default_tolerances(eps_machine)
    name = op_name(op)
    rng = _generator(rng)
    view = resolve(graph)

    def output_label(index, key):
        return f"{name} output {index}"

    def input_label(slot):
        return f"input {slot}"

    _check_jvp(view, outputs, primals, None, eps=eps,
               rtol=jvp_rtol if rtol is None else rtol, atol=jvp_atol if atol is None else atol,
               rng=rng, ctx=ctx, output_label=output_label, input_label=input_label)
    linear = linearize(view, outputs, wrt, ctx=ctx)
    _check_transpose(view, linear, primals, None, None,
                     rtol=tr_rtol if rtol is None else rtol, atol=tr_atol if atol is None else atol,
                     rng=rng, ctx=ctx, output_label=lambda i: f"{name} output {i}",
                     input_label=input_label, subject=f"transpose of {name}")
