"""Testing tools for rule authors: JVPs against finite differences, transposes by the dot product.

What ChainRulesTestUtils gives Julia rule authors, for tidu primitive sets:

- :func:`check_jvp` compares the JVP of a graph (through :func:`tidu.linearize`)
  with central finite differences;
- :func:`check_transpose` runs the dot-product test ``<ct, J t> == <Jᵀ ct, t>``
  on a :class:`~tidu.LinearizedGraph` and its :func:`~tidu.linear_transpose`;
- :func:`check_batch` compares one operation batched by :func:`tidu.batch` with a
  Python loop over the batch, for batch axes at every position;
- :func:`check_primitive` does the first two for one operation on given inputs (and
  :func:`check_batch`, for an op whose set defines batch rules), and with
  ``order=2`` differentiates the graphs its rules emitted once more, so every op
  a rule emits is shown to have working rules of its own.

Each returns a :class:`CheckReport` saying what it compared: the ops, the output
and input slots, the points, the number of comparisons and the worst error next
to its tolerance. A check that would compare nothing (no differentiable input,
a tangent for a key that is not an input, an empty selection, directions that
are all zero) raises :class:`CheckUsageError` instead of passing.

Operands may be Python ``float`` and ``complex``, NumPy scalars and NumPy arrays
(0-d and empty ones too; an empty array has its shapes and kinds checked, but no
values, and the report's ``elements`` says so). Complex numbers follow tidu's
convention: a JVP is the real-linear derivative, so a finite difference along a
complex direction ``t`` measures it exactly, and transposes are taken with
respect to the real inner product ``<a, b> = Re(conj(a) b)`` (summed over
elements). Inputs that cannot be differentiated (Python ``int`` and ``bool``,
integer and boolean arrays) get no tangent. Random tangents and cotangents come
from ``numpy.random.default_rng(rng)``, with the shape and dtype of what they stand for.

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

import itertools
import math
import numbers
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from tidu.batching import batch
from tidu.errors import ADRuleError, ADRuleKind, NotEvaluableError, TiduError
from tidu.graph import (
    PRIMARY,
    Derived,
    EvaluableGraphOperation,
    External,
    Graph,
    GraphBuilder,
    Input,
    Linearized,
    Local,
    ValueKey,
    evaluate,
    resolve,
)
from tidu.graph import key_inputs, op_name, postorder
from tidu.linearization import linearize
from tidu.linearized import LinearizedGraph
from tidu.rules import CotangentSeed, GraphPrimitiveBuilder, Primitive, TangentKey, fresh_pass_id
from tidu.transpose import linear_transpose

__all__ = ["CheckFailure", "CheckReport", "CheckUsageError", "check_batch", "check_jvp",
           "check_transpose", "check_primitive"]


class CheckUsageError(TiduError, ValueError):
    """A checker was called wrongly, or so that it would check nothing.

    Raised for a missing primal, a tangent of the wrong shape, a tangent or
    cotangent for a key that is no input or output, empty selections, and calls
    where nothing is differentiable.

    >>> from tidu.example_ops import Op
    >>> check_primitive(Op.MUL, 3, 2)
    Traceback (most recent call last):
    ...
    tidu.testing.CheckUsageError: check_primitive: no input of MUL is differentiable ...
    """

    __str__ = Exception.__str__


class CheckFailure(TiduError, AssertionError):
    """A rule check failed: a JVP disagrees with finite differences, or a transpose
    fails the dot-product test, or a tangent or cotangent has the wrong shape or kind.

    >>> issubclass(CheckFailure, AssertionError)
    True
    """


@dataclass(frozen=True)
class CheckReport:
    """What a check compared; every check returns one.

    ``ops`` names the operations whose rules were under test; ``output_slots``
    and ``input_slots`` count the outputs and the differentiable inputs compared;
    ``points`` counts the points derivatives were compared at (the primal point,
    and at ``order=2`` also the points of the linear and transposed graphs);
    ``jvp_comparisons`` counts (output, tangent choice) pairs compared with finite
    differences, covering ``elements`` numbers; ``dot_products`` counts dot-product
    tests; ``batch_comparisons`` counts (output, choice of batch axes) pairs whose
    batched value was compared with a Python loop over the batch. ``worst_error``
    is the comparison closest to failing, measured against ``tolerance``, and
    ``worst_at`` says which it was.

    >>> from tidu.example_ops import Op
    >>> report = check_primitive(Op.MUL, 1.5, -0.5, rng=0)
    >>> report.ops, report.output_slots, report.input_slots, report.points
    (('MUL',), 1, 2, 1)
    >>> # JVPs: x, y, both; dot products: x alone, y alone, both (2 + 1), and MUL's own
    >>> # transpose rule with role Linearized(.T), which MUL's JVP never emits (1)
    >>> report.jvp_comparisons, report.dot_products
    (3, 6)
    >>> report.batch_comparisons                     # batch axes (0, None), (None, 0), (0, 0)
    3
    >>> report.worst_error <= report.tolerance
    True
    >>> print(report)                                      # doctest: +ELLIPSIS
    checked MUL at 1 point: 1 output slot, 2 input slots; 3 JVP comparisons (3 numbers)
    with finite differences, 6 dot-product tests, 3 batch comparisons with a loop;
    worst |error| ... (tolerance ...) at ...
    """

    ops: tuple[str, ...]
    output_slots: int
    input_slots: int
    points: int
    jvp_comparisons: int
    elements: int
    dot_products: int
    worst_error: float
    tolerance: float
    worst_at: str
    order: int = 1
    batch_comparisons: int = 0

    def __str__(self) -> str:
        def count(n: int, noun: str) -> str:
            return f"{n} {noun}{'' if n == 1 else 's'}"

        order = f" to order {self.order}" if self.order > 1 else ""
        compared = []
        if self.jvp_comparisons or self.dot_products or not self.batch_comparisons:
            compared.append(f"{count(self.jvp_comparisons, 'JVP comparison')} "
                            f"({count(self.elements, 'number')}) with finite differences, "
                            f"{count(self.dot_products, 'dot-product test')}")
        if self.batch_comparisons:
            compared.append(f"{count(self.batch_comparisons, 'batch comparison')} with a loop")
        text = (f"checked {', '.join(self.ops)}{order} at {count(self.points, 'point')}: "
                f"{count(self.output_slots, 'output slot')}, "
                f"{count(self.input_slots, 'input slot')}; " + ", ".join(compared))
        if self.worst_at:
            text += (f"; worst |error| {self.worst_error:.3g} (tolerance {self.tolerance:.3g}) "
                     f"at {self.worst_at}")
        return text


class _Tally:
    """What a check has compared so far, and the comparison closest to failing."""

    def __init__(self) -> None:
        self.jvp_comparisons = 0
        self.elements = 0
        self.dot_products = 0
        self.batch_comparisons = 0
        self.worst = (-1.0, 0.0, 0.0, "")     # (error / tolerance, error, tolerance, where)

    def saw(self, error: float, tolerance: float, where: str) -> None:
        if tolerance > 0:
            ratio = error / tolerance
        else:
            ratio = math.inf if error > 0 else 0.0
        if ratio > self.worst[0]:
            self.worst = (ratio, error, tolerance, where)

    def saw_elements(self, error: np.ndarray, tolerance: np.ndarray, where: str) -> None:
        """One JVP comparison, element by element."""
        self.jvp_comparisons += 1
        self.elements += int(error.size)
        if error.size:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.nan_to_num(error / tolerance, nan=0.0)   # 0/0 where both are NaN
            index = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
            self.saw(float(error[index]), float(tolerance[index]), where)

    def report(self, ops: Sequence[str], output_slots: int, input_slots: int, points: int,
               order: int = 1) -> CheckReport:
        _, error, tolerance, where = self.worst
        return CheckReport(tuple(ops), output_slots, input_slots, points,
                           self.jvp_comparisons, self.elements, self.dot_products,
                           float(error), float(tolerance), where, order, self.batch_comparisons)


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


def _is_zero(direction) -> bool:
    """Whether ``direction`` is ``None`` or all zeros (an empty array is neither)."""
    if direction is None:
        return True
    array = np.asarray(direction)
    return array.size > 0 and not np.any(array)


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


def _inputs_read(outputs: Sequence[ValueKey]) -> set:
    """The user keys of the graph inputs that ``outputs`` are computed from."""
    return {key.key for key in postorder(outputs, key_inputs) if type(key) is not Derived}


def _ops_between(sources: set, outputs: Sequence[ValueKey]) -> tuple[str, ...]:
    """Names of the operations on a path from ``sources`` to ``outputs``: those whose rules run."""
    depends = set(sources)
    names: dict[str, None] = {}
    for key in postorder(outputs, key_inputs):
        if type(key) is Derived and any(k in depends for k in key_inputs(key)):
            depends.add(key)
            names.setdefault(op_name(key.operation.operation), None)
    return tuple(names)


def _describe(value) -> str:
    """``value`` and its type, for messages about what is not differentiable."""
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array"
    return f"{_fmt(value)} ({type(value).__name__})"


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
              rtol: float = 1e-6, atol: float = 1e-9, rng=None, ctx: Any = None) -> CheckReport:
    """Check the JVP of ``outputs`` against central finite differences; raise :class:`CheckFailure`.

    ``graphs`` is a ``Graph``, graphs, or a ``ResolvedView``; ``outputs`` are value
    keys; ``primals`` maps user input keys (``"x"``; an ``Input("x")`` is unwrapped) to values.
    ``tangents`` maps some of those keys to directions; by default every
    differentiable primal that the outputs read gets a random one.

    Each tangent input is checked alone (the graph linearized with respect to
    that input only, so the rules' symbolic-zero paths run), then all of them
    together. The reference is ``(f(x + eps t) - f(x - eps t)) / (2 eps)``; for
    a complex ``x`` and complex ``t`` that is the real-linear derivative. The
    default ``eps`` is scale-aware: about ``1e-6 * max(1, |x|) / |t|`` in double
    precision, ``1e-3`` times that in single. An element passes when
    ``|jvp - fd| <= atol + rtol * |fd|`` plus the estimated finite-difference
    error (from the same difference at ``2 eps`` and the rounding of the values).
    Each tangent must also have its output's shape, and be real where the output is.

    A zero tangent checks nothing (the JVP and the finite difference are both
    zero), so an input given one is left out of the comparisons and the report.

    Raises :class:`CheckUsageError` when there is nothing to check (no outputs,
    an empty ``tangents``, no differentiable input that an output reads, no
    output reading any input given a tangent, only zero tangents for the inputs
    the outputs read) or a tangent is given for a key that is not an input of
    the graphs or whose primal is not differentiable. Returns a :class:`CheckReport`.

    >>> from tidu.example_ops import trace, sin
    >>> graph = trace(lambda x, y: sin(x) * y, ["x", "y"])
    >>> report = check_jvp(graph, graph.output_keys, {"x": 0.3, "y": 2.0 + 1.0j}, rng=0)
    >>> report.ops, report.input_slots, report.jvp_comparisons   # x, y, then both together
    (('SIN', 'MUL'), 2, 3)
    >>> check_jvp(graph, graph.output_keys, {"x": 0.3, "y": 2.0}, {"x": 1.0}).ops
    ('SIN', 'MUL')
    >>> check_jvp(graph, graph.output_keys, {"x": 0.3, "y": 2.0}, {"z": 1.0})
    Traceback (most recent call last):
    ...
    tidu.testing.CheckUsageError: check_jvp: tangent given for 'z', which has no primal value
    """
    view = resolve(graphs)
    tally = _Tally()
    outputs = list(outputs)
    checked = _check_jvp(view, outputs, primals, tangents, eps=eps, rtol=rtol, atol=atol,
                         rng=_generator(rng), ctx=ctx, output_label=_output_label,
                         input_label=_input_label, tally=tally, subject="check_jvp")
    ops = _ops_between({Input(k) for k in checked}, outputs)
    return tally.report(ops, len(outputs), len(checked), points=1)


def _checked_direction(subject: str, what: str, key, direction, primal) -> None:
    """A given tangent must have its primal's shape, and be real where the primal is."""
    if direction is None:
        raise CheckUsageError(f"{subject}: the {what} of {key!r} is None: give a direction")
    if np.shape(direction) != np.shape(primal):
        raise CheckUsageError(f"{subject}: the {what} of {key!r} has shape "
                              f"{np.shape(direction)}, its primal {np.shape(primal)}")
    if _is_complex(direction) and not _is_complex(primal):
        raise CheckUsageError(f"{subject}: complex {what} given for the real input {key!r}")


def _check_jvp(view, outputs: list, primals: Mapping, tangents: Mapping | None, *, eps, rtol,
               atol, rng, ctx, output_label: Callable[[int, Any], str],
               input_label: Callable[[Any], str], tally: _Tally, subject: str,
               on_linear: Callable[[LinearizedGraph], None] | None = None) -> list:
    """Compare; return the keys that got a tangent. ``on_linear`` sees each linear graph first."""
    if not outputs:
        raise CheckUsageError(f"{subject}: no outputs given: nothing to check")
    for key in outputs:
        if not isinstance(key, ValueKey) or key not in view:
            raise CheckUsageError(f"{subject}: output {key!r} is not a value of the graphs given")
    primals = {_user_key(k): v for k, v in primals.items()}
    read = _inputs_read(outputs)
    missing = sorted((k for k in read if k not in primals), key=repr)
    if missing:
        raise CheckUsageError(f"{subject}: no primal value for {missing[0]!r}, an input the "
                              "outputs read")
    if tangents is None:
        tangents = {k: _random_like(v, rng) for k, v in primals.items()
                    if _is_differentiable(v) and k in read}
        if not tangents:
            inputs = ", ".join(f"{k!r} = {_describe(primals[k])}"
                               for k in sorted(read, key=repr)) or "none"
            raise CheckUsageError(f"{subject}: nothing to differentiate: no input the outputs "
                                  f"read holds a float or complex value (inputs read: {inputs})")
    else:
        if not tangents:
            raise CheckUsageError(f"{subject}: an empty mapping of tangents: nothing to check "
                                  "(pass None for random tangents)")
        given = {}
        for key, direction in tangents.items():
            key = _user_key(key)
            if key not in primals:
                raise CheckUsageError(f"{subject}: tangent given for {key!r}, which has no "
                                      "primal value")
            if Input(key) not in view:
                raise CheckUsageError(f"{subject}: tangent given for {key!r}, which is not an "
                                      "input of the graphs")
            if not _is_differentiable(primals[key]):
                raise CheckUsageError(f"{subject}: tangent given for {key!r}, whose primal "
                                      f"{_describe(primals[key])} is not differentiable")
            _checked_direction(subject, "tangent", key, direction, primals[key])
            given[key] = direction
        if not read.intersection(given):
            raise CheckUsageError(f"{subject}: no output reads any of the inputs given tangents "
                                  f"({', '.join(map(repr, given))}): nothing to compare")
        tangents = {key: t for key, t in given.items() if not _is_zero(t)}
        if not read.intersection(tangents):
            zero = [key for key in given if key in read]
            ops = ", ".join(_ops_between({Input(k) for k in zero}, outputs))
            raise CheckUsageError(
                f"{subject}: every tangent given for an input the outputs read "
                f"({', '.join(map(repr, zero))}) is zero: the JVP of {ops} would be compared "
                "with a finite difference of 0, which would check nothing (give a non-zero "
                "direction)")
    values = {Input(k): v for k, v in primals.items()}
    primal_out = evaluate(view, outputs, values, ctx)

    for key in tangents:
        _compare_jvp(view, outputs, primals, values, primal_out, {key: tangents[key]},
                     input_label(key), eps, rtol, atol, ctx, output_label, input_label, tally,
                     on_linear)
    if len(tangents) > 1:
        label = "inputs " + ", ".join(input_label(k).removeprefix("input ") for k in tangents)
        _compare_jvp(view, outputs, primals, values, primal_out, tangents, label + " together",
                     eps, rtol, atol, ctx, output_label, input_label, tally, on_linear)
    return list(tangents)


def _compare_jvp(view, outputs, primals, values, primal_out, tangents: dict, in_label: str,
                 eps, rtol, atol, ctx, output_label, input_label, tally: _Tally,
                 on_linear) -> None:
    lin = linearize(view, outputs, list(tangents), ctx=ctx)
    if on_linear is not None:
        on_linear(lin)
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
        both_nan = np.isnan(got_w) & np.isnan(expected)
        error = np.where(both_nan, 0.0, np.abs(got_w - expected))
        tolerance = (atol + rtol * np.abs(expected) + 2 * np.abs(expected - expected_2h)
                     + 4 * eps_out * (np.abs(p) + np.abs(m)) / (2 * h)
                     + 4 * input_noise * _max_abs(expected))
        bad = ~(error <= tolerance) & ~both_nan
        if np.any(bad):
            raise CheckFailure(_jvp_message(label, in_label, expected, got_w, error, tolerance,
                                            bad, h, tangents, primals, input_label))
        tally.saw_elements(error, tolerance, f"{label} wrt {in_label}")
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
                    rng=None, ctx: Any = None) -> CheckReport:
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

    A zero direction (a zero tangent, or a zero or ``None`` cotangent for a
    tangent output that is not a symbolic zero) makes its pairs compare 0 with
    0: they are not tested, nor counted in the report.

    Raises :class:`CheckUsageError` when there is nothing to test: ``linear``
    has no tangent inputs or every tangent output is a symbolic zero, every
    tangent or every cotangent given is zero, or a tangent or cotangent is given
    for a key or position that ``linear`` does not have (or whose tangent output
    is a symbolic zero). Returns a :class:`CheckReport`.

    >>> from tidu import linearize
    >>> from tidu.example_ops import trace, sin
    >>> graph = trace(lambda x, y: sin(x) * y, ["x", "y"])
    >>> lin = linearize(graph, graph.output_keys, ["x", "y"])
    >>> check_transpose(graph, lin, {"x": 0.3, "y": 2.0}, rng=0).dot_products   # x, y, both
    3
    >>> report = check_transpose(graph, lin, {"x": 0.3 + 1j, "y": 2.0j}, cotangents=[1.0 - 1j])
    >>> report.worst_error <= report.tolerance
    True
    """
    view = resolve(graphs)
    tally = _Tally()
    active = _check_transpose(view, linear, primals, cotangents, tangents, rtol=rtol, atol=atol,
                              rng=_generator(rng), ctx=ctx,
                              output_label=lambda i: f"tangent output {i} "
                                                     f"({linear.tangent_output_keys[i]!r})",
                              input_label=_input_label, subject="check_transpose", tally=tally)
    return tally.report(_linear_ops(linear), active, len(linear.tangent_inputs), points=1)


def _linear_ops(linear: LinearizedGraph) -> tuple[str, ...]:
    """Names of the linear (tangent) operations of ``linear``'s graph."""
    return tuple(dict.fromkeys(op_name(node.operation) for node in linear.graph.operations
                               if node.role is not PRIMARY))


def _refuse_zero_directions(subject: str, what: str, zero: list, linear) -> None:
    """Raise if every direction is zero: each dot product would be 0 == 0."""
    if all(zero):
        ops = ", ".join(_linear_ops(linear)) or "the linear graph"
        raise CheckUsageError(f"{subject}: every {what} given is zero (or None): the dot-product "
                              f"test of {ops} would compare 0 with 0, which would check nothing "
                              f"(give a non-zero {what})")


def _check_transpose(view, linear: LinearizedGraph, primals: Mapping, cotangents, tangents, *,
                     rtol, atol, rng, ctx, output_label: Callable[[int], str],
                     input_label: Callable[[Any], str], subject: str, tally: _Tally,
                     transposed: LinearizedGraph | None = None) -> int:
    """Run the dot-product tests; return the number of active tangent outputs."""
    if not isinstance(linear, LinearizedGraph):
        raise CheckUsageError(f"{subject}: expected a LinearizedGraph (what tidu.linearize "
                              f"returns), got {type(linear).__name__}")
    primals = {_user_key(k): v for k, v in primals.items()}
    values = {Input(k): v for k, v in primals.items()}
    keys = [key for key, _ in linear.tangent_inputs]
    tangent_keys = linear.tangent_input_keys
    active = [i for i, o in enumerate(linear.tangent_outputs) if o is not None]
    if not keys:
        raise CheckUsageError(f"{subject}: the linear graph has no tangent inputs: nothing to "
                              "transpose")
    if not active:
        raise CheckUsageError(f"{subject}: every tangent output of the linear graph is a "
                              "symbolic zero (None): the dot-product test would compare 0 with 0")
    for key in keys:
        if key not in primals:
            raise CheckUsageError(f"{subject}: no primal value for {key!r}, a tangent input of the "
                                  "linear graph")

    # tangents
    if tangents is None:
        t = [_random_like(primals[k], rng) for k in keys]
    elif isinstance(tangents, Mapping):
        given = {_user_key(k): v for k, v in tangents.items()}
        for key in given:
            if key not in keys:
                raise CheckUsageError(f"{subject}: tangent given for {key!r}, which is not a "
                                      f"tangent input of the linear graph (those are {keys!r})")
        t = [given[k] if k in given else _random_like(primals[k], rng) for k in keys]
    else:
        t = list(tangents)
        if len(t) != len(keys):
            raise CheckUsageError(f"{subject}: {len(t)} tangents for {len(keys)} tangent inputs")
    for key, direction in zip(keys, t):
        _checked_direction(subject, "tangent", key, direction, primals[key])
    t_is_zero = [_is_zero(v) for v in t]
    _refuse_zero_directions(subject, "tangent", t_is_zero, linear)
    zero_t = [_zeros_like(v) for v in t]

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
        for position in cotangents:
            if position not in active:
                raise CheckUsageError(f"{subject}: cotangent given for tangent output "
                                      f"{position!r}, which is not a non-zero tangent output "
                                      f"(those are at {active})")
        ct = [cotangents[i] if i in cotangents else _random_like(jt_all[a], rng)
              for a, i in enumerate(active)]
    else:
        cotangents = list(cotangents)
        if len(cotangents) != len(linear.tangent_outputs):
            raise CheckUsageError(f"{subject}: {len(cotangents)} cotangents for "
                                  f"{len(linear.tangent_outputs)} tangent outputs")
        for i, cotangent in enumerate(cotangents):
            if cotangent is not None and i not in active:
                raise CheckUsageError(f"{subject}: cotangent given for tangent output {i}, "
                                      "which is a symbolic zero (pass None there)")
        ct = [cotangents[i] for i in active]
    ct_is_zero = [_is_zero(c) for c in ct]
    _refuse_zero_directions(subject, "cotangent", ct_is_zero, linear)
    for a in range(len(active)):
        if ct[a] is None:
            ct[a] = _zeros_like(jt_all[a])
    zero_ct = [_zeros_like(c) for c in ct]

    if transposed is None:
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
        tally.dot_products += 1
        tally.saw(abs(lhs - rhs), tolerance, f"{subject}, {out_label} and {in_label}")

    for a, i in enumerate(active):
        for j, key in enumerate(keys):
            if ct_is_zero[a] or t_is_zero[j]:
                continue                        # 0 == 0: nothing to test
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
    return len(active)


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


# --- which rule emitted an operation ------------------------------------------------


class _Stage(NamedTuple):
    """A graph :func:`check_primitive` made, and the rules whose emissions it holds."""

    graph: Graph
    rule: ADRuleKind | None     # the kind of rule that emitted its operations; None: the op checked
    sources: tuple              # the stages whose operations' rules emitted them


class _Provenance:
    """Says which rule emitted an operation at fault, so an error points where the bug is written.

    Worked out only when something fails: every rule that may have emitted the
    operation is called again on a scratch builder, to see which one does.
    """

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    @contextmanager
    def blame(self, stages: Sequence[_Stage], doing: str) -> Iterator[None]:
        """Re-raise an ``ADRuleError`` for an op of ``stages`` with the rule that emitted it."""
        try:
            yield
        except ADRuleError as error:
            origin = self._origin_of(error.op, stages)
            if origin is None:                  # the op checked itself: the error says it all
                raise
            detail = f"{error.detail}; " if error.detail else ""
            raise ADRuleError(error.op, error.rule, f"{detail}{origin} (found {doing})") from error

    def check_evaluable(self, stage: _Stage, doing: str) -> None:
        """Every operation of ``stage`` must have an ``eval``: the checks run them."""
        for op_key in stage.graph.operation_keys:
            if not isinstance(op_key.operation, EvaluableGraphOperation):
                raise NotEvaluableError(f"{op_name(op_key.operation)} has no eval: it is "
                                        f"{self._origin(op_key, stage)} (found {doing})")

    def _origin_of(self, name: str, stages: Sequence[_Stage]) -> str | None:
        for stage in stages:
            for op_key in stage.graph.operation_keys:
                if op_name(op_key.operation) == name:
                    return self._origin(op_key, stage)
        return None

    def _origin(self, op_key, stage: _Stage) -> str | None:
        """``"emitted by the jvp rule of MUL, which the transpose rule of ... emits"``."""
        parts = []
        while stage.rule is not None:
            rule = stage.rule.value
            candidates = [(k, s) for s in stage.sources for k in s.graph.operation_keys
                          if stage.rule is ADRuleKind.JVP or k.role is not PRIMARY]
            found = next(((k, s) for k, s in candidates
                          if self._emits(k, stage.rule, op_key.operation)), None)
            if found is None:
                names = ", ".join(dict.fromkeys(op_name(k.operation) for k, _ in candidates))
                also = " (or by add(), which sums cotangents)" if rule == "transpose" else ""
                parts.append(f"the {rule} rule of one of {names}{also}")
                break
            op_key, stage = found
            parts.append(f"the {rule} rule of {op_name(op_key.operation)}")
        if not parts:
            return None
        return "emitted by " + ", which ".join(
            part if i == 0 else part + " emits" for i, part in enumerate(parts))

    def _emits(self, op_key, rule: ADRuleKind, target) -> bool:
        """Whether ``op_key``'s ``rule``, for some choice of zeros, emits ``target``."""
        inputs, outputs = op_key.inputs, list(op_key.output_keys())
        slots = len(inputs) if rule is ADRuleKind.JVP else len(outputs)
        for live in _live_choices(slots):
            builder = GraphPrimitiveBuilder()
            ids = [builder.add_input(("tidu.testing probe", i)) if on else None
                   for i, on in enumerate(live)]
            try:
                if rule is ADRuleKind.JVP:
                    op_key.operation.jvp_rule(builder, inputs, outputs, ids, self.ctx)
                else:
                    op_key.operation.transpose_rule(builder, ids, [External(k) for k in inputs],
                                                    op_key.role, self.ctx)
            except Exception:          # noqa: BLE001 -- a choice of zeros it is never given
                continue
            if any(k.operation == target for k in builder.build().operation_keys):
                return True
        return False


def _check_linear_use(op, graph: Graph, role, inputs: list, primals: dict, rng, ctx,
                      tally: _Tally, tolerances: dict) -> None:
    """The dot-product test of ``op``'s transpose rule for ``op`` with ``role``: linear in
    the inputs at ``inputs`` (tangents), the others read as constants (the primals).

    Skipped where ``op`` is not linear in those inputs (checked numerically, with the others
    fixed) or its transpose rule has no case for ``role`` (raises ``ADRuleError``).
    """
    if getattr(type(op), "transpose_rule", Primitive.transpose_rule) is Primitive.transpose_rule:
        return                              # the set defines no transpose rules
    builder = GraphBuilder()
    builder.add_parent(graph)
    pass_id = fresh_pass_id()
    refs, tangent_inputs = [], []
    for slot in range(len(primals)):
        if slot in inputs:
            local_id = builder.add_input(TangentKey(slot, pass_id))
            refs.append(Local(local_id))
            tangent_inputs.append((slot, local_id))
        else:
            refs.append(External(Input(slot)))
    outputs = builder.add_operation(op, refs, role)
    builder.set_outputs(outputs)
    linear = LinearizedGraph(builder.build(), tangent_inputs, outputs, pass_id)
    if not _is_linear(linear, graph, primals, rng, ctx):
        return
    try:
        transposed = linear_transpose(linear, ctx)
    except ADRuleError:
        return                              # no transpose for this use of op
    name = op_name(op)
    _check_transpose(resolve(graph), linear, primals, None, None, rng=rng, ctx=ctx,
                     output_label=lambda i: f"{name} output {i}",
                     input_label=lambda key: f"input {key}",
                     subject=f"transpose rule of {name} with role {role!r}", tally=tally,
                     transposed=transposed, **tolerances)


def _is_linear(linear: LinearizedGraph, graph: Graph, primals: dict, rng, ctx) -> bool:
    """Whether ``linear``'s outputs are linear in its tangent inputs, tried on random
    directions: ``f(a + b) = f(a) + f(b)``, ``f(c a) = c f(a)`` and ``f(0) = 0``, to
    ``1000 eps`` relative. An output that is not floating point or complex is no tangent
    (a conversion to integers is zero on small directions, but not linear)."""
    keys = linear.tangent_input_keys
    slots = [slot for slot, _ in linear.tangent_inputs]
    values = {Input(k): v for k, v in primals.items()}

    def f(tangents) -> list:
        env = dict(values)
        env.update(zip(keys, tangents))
        return [np.asarray(v) for v in evaluate([linear.graph, graph],
                                                 linear.tangent_output_keys, env, ctx)]

    a = [_random_like(primals[slot], rng) for slot in slots]
    b = [_random_like(primals[slot], rng) for slot in slots]
    try:
        with np.errstate(all="ignore"):
            fa, fb = f(a), f(b)
            sums = f([_step(x, 1.0, y) for x, y in zip(a, b)])
            scaled = f([_step(_zeros_like(x), -1.75, x) for x in a])
            zero = f([_zeros_like(x) for x in a])
    except (ArithmeticError, ValueError, TypeError):
        return False                        # an eval that takes no such values: not linear
    if not all(np.issubdtype(x.dtype, np.inexact) for x in fa):
        return False                        # an integer output has no tangent
    fa, fb, sums, scaled, zero = ([_wide(x) for x in outs] for outs in
                                  (fa, fb, sums, scaled, zero))
    if any(x.size == 0 for x in fa) or any(np.size(x) == 0 for x in a):
        return False                        # no numbers: nothing tells linear from not
    # linear work is exact but for rounding; x + c with a small constant c is not linear
    tolerance = 1000 * min(_machine_eps(primals[slot]) for slot in slots)
    for x, y, s, c, z in zip(fa, fb, sums, scaled, zero):
        scale = _max_abs(x) + _max_abs(y) + _max_abs(s)
        if not (_max_abs(s - x - y) <= tolerance * scale and _max_abs(z) <= tolerance * scale
                and _max_abs(c + 1.75 * x) <= tolerance * (_max_abs(c) + 1.75 * _max_abs(x))):
            return False
    return True


def _live_choices(slots: int) -> list[tuple[bool, ...]]:
    """Which slots carry a (co)tangent: all first, then every other non-empty choice (or, for
    many slots, each one alone)."""
    if slots > 4:
        return [(True,) * slots] + [tuple(i == j for j in range(slots)) for i in range(slots)]
    return list(itertools.product((True, False), repeat=slots))[:-1]


def _subsets(items: list) -> list[list]:
    """Each item alone, then all of them (once, if there is one)."""
    return [[item] for item in items] + ([items] if len(items) > 1 else [])


# --- check_batch --------------------------------------------------------------------

_MAX_AXIS_CHOICES = 64


def check_batch(op, *primal_inputs, in_axes: Sequence[int | None] | str = "all",
                axis_size: int = 3, order: int = 1, rtol: float | None = None,
                atol: float = 0.0, rng=None, ctx: Any = None) -> CheckReport:
    """Check ``op``'s batch rule: ``op`` batched by :func:`tidu.batch` against a Python loop.

    ``primal_inputs`` are one example's operands. Of each, a batch of
    ``axis_size`` examples is made: the operand, then the operand times a real
    factor drawn per example in ``[0.8, 1.2]`` for floating values (so
    symmetric, triangular or positive definite operands keep their structure,
    and signs their domain), a permutation of its elements for integer and
    boolean arrays (so indices stay in range), the same value for Python ints
    and bools. NumPy values are stacked along their batch axis; Python numbers
    batch into a list (batch axis 0), the form :mod:`tidu.example_ops` takes.

    ``in_axes`` holds one batch axis per input: a position in the batched value
    (negative counts from its end) or ``None`` for an input shared by every
    example. The default, ``"all"``, checks every choice of a position or
    ``None`` per input but all ``None`` (or, past 64 choices, each input alone
    at each position and all inputs at each position). For each choice the op
    is batched and evaluated, and every output, its batch axis moved to the
    front (repeated, for batch axis ``None``), must have the shape, dtype and
    values of the loop's results stacked: integers and booleans exactly,
    floating values within ``atol + rtol * (|expected| + max |expected|)``
    (``rtol`` defaults to ``1000 * eps`` of the output's precision), NaN matching NaN.

    ``order=2`` also batches each batched graph again, along the same positions
    (a ``vmap`` of a ``vmap``), against a double loop: the ops a batch rule
    emits must have batch rules too, for the inputs batched the first time.

    Raises :class:`CheckUsageError` for a wrong number of inputs or of
    ``in_axes``, a position out of range, ``in_axes`` that batch nothing, a bad
    ``axis_size`` or ``order``, or an op without ``eval``; :class:`CheckFailure`
    naming the output and batch axes for a mismatch; :class:`~tidu.ADRuleError`
    for a missing batch rule. Returns a :class:`CheckReport`.

    >>> from tidu.example_ops import Op
    >>> check_batch(Op.MUL, 1.5, -0.5, rng=0).batch_comparisons   # (0, None), (None, 0), (0, 0)
    3
    >>> check_batch(Op.SINCOS, 0.5 - 2j, in_axes=[0], order=2).batch_comparisons   # 2 outputs
    4
    >>> check_batch(Op.SIN, 0.3, in_axes=[None])
    Traceback (most recent call last):
    ...
    tidu.testing.CheckUsageError: check_batch: in_axes [None] batch no input of SIN: nothing to compare
    """
    name = op_name(op)
    graph = _one_op_graph(op, primal_inputs, order, "check_batch")
    if type(axis_size) is not int or axis_size < 1:
        raise CheckUsageError(f"check_batch: axis_size must be a positive int, got {axis_size!r}")
    ndims = [np.ndim(value) for value in primal_inputs]
    if isinstance(in_axes, str) and in_axes == "all":
        choices = _batch_axis_choices(ndims)
    else:
        choices = [_checked_in_axes(in_axes, ndims, name)]
    tally = _Tally()
    _check_batch(op, graph, primal_inputs, choices, axis_size, order, rtol, atol,
                 _generator(rng), ctx, tally)
    batched_slots = sum(any(axes[i] is not None for axes in choices) for i in range(len(ndims)))
    return tally.report((name,), op.output_count(), batched_slots, points=1, order=order)


def _one_op_graph(op, primal_inputs: tuple, order, subject: str) -> Graph:
    """A graph of ``op`` on inputs keyed ``0, 1, ...``, once the call is checked."""
    name = op_name(op)
    if order not in (1, 2) or isinstance(order, bool):
        raise CheckUsageError(f"{subject}: order must be 1 or 2, got {order!r}")
    if not isinstance(op, EvaluableGraphOperation):
        raise CheckUsageError(f"{subject}: {name} is not an EvaluableGraphOperation: "
                              "the checks need its eval")
    n_inputs = op.input_count()
    if len(primal_inputs) != n_inputs:
        raise CheckUsageError(f"{subject}: {name} takes {n_inputs} inputs, "
                              f"got {len(primal_inputs)}")
    builder = GraphBuilder()
    ids = [builder.add_input(slot) for slot in range(n_inputs)]
    builder.set_outputs(builder.add_operation(op, [Local(i) for i in ids]))
    return builder.build()


def _has_batch_rule(op) -> bool:
    """Whether ``op``'s set overrides :meth:`Primitive.batch_rule` (batching is opt-in)."""
    rule = getattr(type(op), "batch_rule", None)
    return rule is not None and rule is not Primitive.batch_rule


def _batch_axis_choices(ndims: list) -> list[tuple]:
    """Every choice of a batch position or ``None`` per input but all ``None`` (or, past
    ``_MAX_AXIS_CHOICES``, each input alone at each position and all at each position)."""
    options = [[None, *range(ndim + 1)] for ndim in ndims]
    if math.prod(map(len, options)) <= _MAX_AXIS_CHOICES + 1:
        return [axes for axes in itertools.product(*options) if axes.count(None) < len(axes)]
    choices = []
    for i, ndim in enumerate(ndims):
        for position in range(ndim + 1):
            choices.append(tuple(position if j == i else None for j in range(len(ndims))))
    for position in range(max(ndims) + 1):
        together = tuple(min(position, ndim) for ndim in ndims)
        if together not in choices:
            choices.append(together)
    return choices


def _checked_in_axes(in_axes, ndims: list, name: str) -> tuple:
    if isinstance(in_axes, (str, bytes)) or not hasattr(in_axes, "__len__"):
        raise CheckUsageError(f"check_batch: in_axes must be \"all\" or one batch axis (int or "
                              f"None) per input of {name}, got {in_axes!r}")
    if len(in_axes) != len(ndims):
        raise CheckUsageError(f"check_batch: {len(in_axes)} in_axes for the {len(ndims)} "
                              f"inputs of {name}")
    axes = []
    for i, (axis, ndim) in enumerate(zip(in_axes, ndims)):
        if axis is None:
            axes.append(None)
            continue
        if isinstance(axis, bool) or not isinstance(axis, numbers.Integral) or \
                not -(ndim + 1) <= axis <= ndim:
            raise CheckUsageError(f"check_batch: batch axis {axis!r} of input {i} of {name}: "
                                  f"expected None or a position in its batch, which has "
                                  f"{ndim + 1} axes")
        axes.append(int(axis) % (ndim + 1))
    if axes.count(None) == len(axes):
        raise CheckUsageError(f"check_batch: in_axes {list(in_axes)} batch no input of {name}: "
                              "nothing to compare")
    return tuple(axes)


def _check_batch(op, graph: Graph, primals: tuple, choices: list, size: int, order: int,
                 rtol, atol, rng, ctx, tally: _Tally) -> None:
    """Compare ``op`` batched along each choice of axes with the loop; count in ``tally``."""
    name = op_name(op)
    outputs = list(graph.output_keys)
    # Rounding in a batched op is relative to its operands (a reduction summed in another
    # order can differ by eps * sum |terms| even where the terms cancel): the tolerance
    # scales with the largest operand as well as the largest result.
    operand_scale = max([_max_abs(v) for v in primals if _is_differentiable(v)] + [0.0])
    for axes in choices:
        label = f"{name} batched along axes {_axes_text(axes)}"
        inner = batch(graph, outputs, dict(enumerate(axes)), size, ctx)
        # examples[i][outer][inner] for a batched input i; one outer batch at order 1
        n_outer = size if order == 2 else 1
        examples = {i: [_examples(value, size, rng, first=outer == 0) for outer in range(n_outer)]
                    for i, (value, axis) in enumerate(zip(primals, axes)) if axis is not None}

        def loop(outer: int) -> list:
            """The outputs of each example of batch ``outer``, stacked: one array per output."""
            results = [evaluate(graph, outputs, {
                Input(i): examples[i][outer][k] if i in examples else value
                for i, value in enumerate(primals)}, ctx) for k in range(size)]
            return [_stacked_results([r[j] for r in results]) for j in range(len(outputs))]

        def batch_of(outer: int) -> dict:
            return {i: _stack(examples[i][outer], axes[i]) if i in examples else value
                    for i, value in enumerate(primals)}

        got = inner.evaluate(batch_of(0), ctx)
        for j, (value, expected) in enumerate(zip(got, loop(0))):
            where = f"{label}, output {j} (batch axis {inner.out_axes[j]})"
            _compare_batched(_to_front(value, inner.out_axes[j], size, where), expected, where,
                             rtol, atol, operand_scale, tally)
        if order == 1:
            continue

        # order 2: batch the batched graph again, along the same positions
        where_batched = f"while batching the batched graph of {name} again (order 2)"
        try:
            outer = batch(inner.graph, inner.output_keys,
                          {key.key: axes[i] for (i, _), key in zip(inner.inputs, inner.input_keys)},
                          size, ctx)
        except ADRuleError as error:
            if error.op == name:
                raise
            detail = f"{error.detail}; " if error.detail else ""
            raise ADRuleError(error.op, error.rule, f"{detail}emitted by the batch rule of "
                              f"{name} (found {where_batched})") from error
        nested = {i: value for i, value in enumerate(primals) if i not in examples}
        for (i, _), key in zip(inner.inputs, inner.input_keys):
            nested[key.key] = _stack([batch_of(o)[i] for o in range(size)], axes[i])
        got = outer.evaluate(nested, ctx)
        expected = [np.stack(per_output) for per_output in zip(*(loop(o) for o in range(size)))]
        for j, value in enumerate(got):
            where = (f"{label} twice (order 2), output {j} (batch axes {outer.out_axes[j]} "
                     f"outside, {inner.out_axes[j]} inside)")
            outside = _to_front(value, outer.out_axes[j], size, where)
            both = np.stack([_to_front(part, inner.out_axes[j], size, where)
                             for part in outside])
            _compare_batched(both, expected[j], where, rtol, atol, operand_scale, tally)


def _axes_text(axes: tuple) -> str:
    return "(" + ", ".join(map(str, axes)) + ("," if len(axes) == 1 else "") + ")"


def _examples(value, count: int, rng: np.random.Generator, first: bool) -> list:
    """``count`` examples like ``value``: ``value`` itself first (if ``first``), then
    perturbations of it with its type, shape and dtype."""
    out = [value] if first else []
    while len(out) < count:
        out.append(_perturbed(value, rng))
    return out


def _perturbed(value, rng: np.random.Generator):
    factor = float(rng.uniform(0.8, 1.2))
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.kind in "fc":
            moved = (array * factor).astype(array.dtype)
        elif array.dtype.kind in "iub":
            moved = rng.permutation(array.reshape(-1)).reshape(array.shape)
        else:
            raise CheckUsageError(f"check_batch: cannot make a batch of {_describe(value)}")
        return moved if isinstance(value, np.ndarray) else moved[()]
    if isinstance(value, (bool, int)):
        return value
    if isinstance(value, (float, complex)):
        return value * factor
    raise CheckUsageError(f"check_batch: cannot make a batch of {_describe(value)}")


def _is_python_batch(items: list) -> bool:
    """Python numbers (and lists of them, a batch already) batch into lists."""
    return all(type(item) in (bool, int, float, complex, list) for item in items)


def _stack(items: list, axis: int):
    if _is_python_batch(items):
        return list(items)
    return np.stack([np.asarray(item) for item in items], axis)


def _stacked_results(results: list) -> np.ndarray:
    return np.stack([np.asarray(result) for result in results])


def _to_front(value, axis: int | None, size: int, where: str) -> np.ndarray:
    """``value`` with its batch axis first (``size`` copies of it if ``axis`` is ``None``)."""
    array = np.asarray(value)
    if axis is None:
        return np.broadcast_to(array, (size, *array.shape))
    if axis >= array.ndim:
        raise CheckFailure(f"{where}: the batch rule puts the batch axis at {axis}, but the "
                           f"batched output has {array.ndim} axes (shape {array.shape})")
    return np.moveaxis(array, axis, 0)


def _compare_batched(got: np.ndarray, expected: np.ndarray, where: str, rtol, atol,
                     operand_scale: float, tally: _Tally) -> None:
    """The batched output (batch axes first) against the loop's results stacked."""
    if got.shape != expected.shape:
        raise CheckFailure(f"{where}: the batched output, batch axes first, has shape "
                           f"{got.shape}, but the loop's results stacked have shape "
                           f"{expected.shape}")
    if got.dtype != expected.dtype:
        raise CheckFailure(f"{where}: the batched output has dtype {got.dtype}, but the loop's "
                           f"results have dtype {expected.dtype}")
    tally.batch_comparisons += 1
    if expected.dtype.kind not in "fc":
        if not np.array_equal(got, expected):
            index = tuple(int(i) for i in np.argwhere(got != expected)[0])
            raise CheckFailure(f"{where}: expected {_fmt(expected[index])} (the loop), got "
                               f"{_fmt(got[index])} (batched) at index {index}")
        return
    if expected.size == 0:
        return
    if rtol is None:
        rtol = 1000 * float(np.finfo(expected.dtype).eps)
    equal = (got == expected) | (np.isnan(got) & np.isnan(expected))
    with np.errstate(invalid="ignore"):
        error = np.where(equal, 0.0, np.abs(got - expected))
    error = np.nan_to_num(error, nan=np.inf)
    finite = np.where(np.isfinite(expected), np.abs(expected), 0)
    scale = max(float(np.max(finite)), operand_scale)
    tolerance = atol + rtol * (finite + scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(error == 0, 0.0, np.where(tolerance > 0, error / tolerance, np.inf))
    index = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    if not (error[index] == 0 or error[index] <= tolerance[index]):
        at = f" at index {tuple(int(i) for i in index)}" if expected.ndim else ""
        raise CheckFailure(f"{where}: expected {_fmt(expected[index])} (the loop), got "
                           f"{_fmt(got[index])} (batched){at}; |error| "
                           f"{float(error[index]):.3g} > tolerance {float(tolerance[index]):.3g}")
    tally.saw(float(error[index]), float(tolerance[index]), where)


# --- check_primitive ----------------------------------------------------------------


def check_primitive(op, *primal_inputs, order: int = 1, eps: float | None = None,
                    rtol: float | None = None, atol: float | None = None, rng=None,
                    ctx: Any = None) -> CheckReport:
    """Check ``op``'s JVP rule against finite differences and its linearization's transpose.

    Builds a one-operation graph of ``op`` (a ``Primitive`` that is also an
    ``EvaluableGraphOperation``) on inputs keyed ``0, 1, ...`` holding
    ``primal_inputs``, then runs :func:`check_jvp` on every output slot (each
    differentiable input alone, then all together) and :func:`check_transpose` on
    its linearization with respect to each differentiable input alone and all of
    them (and, for several outputs, each output alone), so the rules'
    symbolic-zero paths are transposed too. ``op``'s own transpose rule is also
    dot-product tested for each linear use of ``op`` its JVP does not emit (``op`` with
    role ``Linearized(mask)`` for each choice of differentiable inputs, for up to
    three, where ``op`` is linear in them: checked on random directions), skipping
    a use whose rule raises :class:`ADRuleError`. Tolerances default by precision:
    ``rtol=1e-6, atol=1e-9`` for the JVP and ``1e-9, 1e-12`` for the transpose
    in double precision, looser in single precision; ``rtol``/``atol`` given
    here apply to every check.

    ``order=2`` also differentiates what the rules emitted: the linear graph is
    checked as a function of the primals and tangents (its JVP against finite
    differences of the first-order JVP), linearized again and that transposed
    (the dot-product test), and the transposed graph is checked against finite
    differences as a function of the primals and cotangents (forward over
    reverse). So every op ``op``'s rules emit must have an ``eval``, a JVP rule
    and, where it is linear, a transpose rule. An op without one raises
    ``NotEvaluableError`` or ``ADRuleError`` naming the rule that emitted it.

    If ``op``'s set defines batch rules (overrides :meth:`tidu.Primitive.batch_rule`),
    :func:`check_batch` runs too, with batch axes at every position and ``None``
    (and at ``order=2`` batched twice); the report counts its ``batch_comparisons``.

    Raises :class:`CheckUsageError` when no input is differentiable (Python
    ``int``/``bool``, integer and boolean arrays), for a wrong number of inputs,
    an op without ``eval``, or an ``order`` other than 1 or 2. Returns a
    :class:`CheckReport`.

    >>> from tidu.example_ops import Op
    >>> check_primitive(Op.SIN, 0.3).jvp_comparisons
    1
    >>> report = check_primitive(Op.SINCOS, 0.5 - 2j, rng=0, order=2)
    >>> report.output_slots, report.points, report.order
    (2, 3, 2)
    >>> check_primitive(Op.MUL, 1.5, -0.5).input_slots
    2
    >>> check_primitive(Op.NEG, 2, rng=1)            # an int: nothing to differentiate
    Traceback (most recent call last):
    ...
    tidu.testing.CheckUsageError: check_primitive: no input of NEG is differentiable ...
    """
    name = op_name(op)
    graph = _one_op_graph(op, primal_inputs, order, "check_primitive")
    primals = dict(enumerate(primal_inputs))
    wrt = [slot for slot, value in primals.items() if _is_differentiable(value)]
    if not wrt:
        given = ", ".join(_describe(v) for v in primal_inputs) or "no inputs"
        raise CheckUsageError(f"check_primitive: no input of {name} is differentiable (got "
                              f"{given}), so there is nothing to check; pass float or complex "
                              "values")
    outputs = list(graph.output_keys)

    eps_machine = min(_machine_eps(primals[slot]) for slot in wrt)
    jvp_rtol, jvp_atol, tr_rtol, tr_atol = _default_tolerances(eps_machine)
    jvp_tolerances = {"rtol": jvp_rtol if rtol is None else rtol,
                      "atol": jvp_atol if atol is None else atol}
    transpose_tolerances = {"rtol": tr_rtol if rtol is None else rtol,
                            "atol": tr_atol if atol is None else atol}
    rng = _generator(rng)
    tally = _Tally()
    provenance = _Provenance(ctx)
    checked = _Stage(graph, None, ())

    def input_label(key) -> str:
        if isinstance(key, TangentKey):
            return f"tangent of {input_label(key.base)}"
        if isinstance(key, CotangentSeed):
            return f"cotangent of {name} output {key.index}"
        return f"input {key}"

    def jvp_check(graphs: list, stages: list, outs: list, values: dict, doing: str,
                  output_label: Callable[[int, Any], str]) -> None:
        """``_check_jvp``, with each linear graph it makes checked for evals before it runs."""
        def evaluable(linear: LinearizedGraph) -> None:
            provenance.check_evaluable(_Stage(linear.graph, ADRuleKind.JVP, tuple(stages)), doing)

        with provenance.blame(stages, doing):
            _check_jvp(resolve(graphs), outs, values, None, eps=eps, rng=rng, ctx=ctx,
                       output_label=output_label, input_label=input_label, tally=tally,
                       subject="check_primitive", on_linear=evaluable, **jvp_tolerances)

    def transpose_check(graphs: list, stages: list, outs: list, keys: list, values: dict,
                        source: str, output_label: Callable[[int], str], subject: str):
        """Linearize ``outs`` wrt ``keys``, transpose, run the dot-product test.

        Returns the linear graph, the transposed one and their stages (``None`` if
        every tangent output is zero: nothing to transpose).
        """
        doing = f"while linearizing {source}"
        with provenance.blame(stages, doing):
            linear = linearize(graphs, outs, keys, ctx=ctx)
        linear_stage = _Stage(linear.graph, ADRuleKind.JVP, tuple(stages))
        provenance.check_evaluable(linear_stage, doing)
        if all(t is None for t in linear.tangent_outputs):
            return None
        exercised.update(op_key.role for op_key in linear.graph.operation_keys
                         if op_key.operation == op)
        doing = f"while transposing the linearization of {source}"
        with provenance.blame([linear_stage], doing):
            transposed = linear_transpose(linear, ctx)
        transposed_stage = _Stage(transposed.graph, ADRuleKind.TRANSPOSE, (linear_stage,))
        provenance.check_evaluable(transposed_stage, doing)
        _check_transpose(resolve(graphs), linear, values, None, None, rng=rng, ctx=ctx,
                         output_label=output_label, input_label=input_label, subject=subject,
                         tally=tally, transposed=transposed, **transpose_tolerances)
        return linear, linear_stage, transposed, transposed_stage

    def finish(points: int) -> CheckReport:
        """Check op's own transpose rule for each linear use of op its JVP did not emit
        (SPLIT's JVP may emit NEG, never SPLIT: the transposes above never ran SPLIT's rule),
        batch the op too, if its set defines batch rules; report."""
        linear_uses = _subsets(wrt) if len(wrt) > 3 else [
            [slot for slot, live in zip(wrt, mask) if live]
            for mask in reversed(_live_choices(len(wrt)))]     # (every non-empty choice)
        for inputs in linear_uses:
            role = Linearized(tuple(slot in inputs for slot in range(len(primal_inputs))))
            if role not in exercised:
                _check_linear_use(op, graph, role, inputs, primals, rng, ctx, tally,
                                  transpose_tolerances)
        if _has_batch_rule(op):
            choices = _batch_axis_choices([np.ndim(value) for value in primal_inputs])
            _check_batch(op, graph, primal_inputs, choices, 3, order, rtol,
                         0.0 if atol is None else atol, rng, ctx, tally)
        return tally.report((name,), len(outputs), len(wrt), points=points, order=order)

    exercised: set = set()          # roles of op in the linear graphs transposed
    # first order: the JVP, then the transposes of the linearizations wrt each choice
    # of inputs and outputs, so that the rules' symbolic-zero paths are transposed too
    jvp_check([graph], [checked], outputs, primals, f"while checking the JVP of {name}",
              lambda i, key: f"{name} output {i}")
    first = None
    for slots in _subsets(list(range(len(outputs)))):
        for inputs in _subsets(wrt):
            found = transpose_check([graph], [checked], [outputs[i] for i in slots], inputs,
                                    primals, name,
                                    lambda i, slots=slots: f"{name} output {slots[i]}",
                                    f"transpose of {name}")
            if len(slots) == len(outputs) and inputs == wrt:
                first = found
    if order == 1 or first is None:
        return finish(points=1)

    # order 2: the linear graph as a function of the primals and tangents ...
    linear, linear_stage, transposed, transposed_stage = first
    active = [i for i, t in enumerate(linear.tangent_outputs) if t is not None]
    tangent_outputs = [linear.tangent_output_keys[i] for i in active]
    with_tangents = dict(primals)
    for key, slot in zip(linear.tangent_input_keys, wrt):
        with_tangents[key.key] = _random_like(primals[slot], rng)
    source = f"the linear graph of {name}, at order 2"
    jvp_check([linear.graph, graph], [linear_stage, checked], tangent_outputs, with_tangents,
              f"while linearizing {source}", lambda i, key: f"tangent of {name} output {active[i]}")
    read = _inputs_read(tangent_outputs)
    transpose_check([linear.graph, graph], [linear_stage, checked], tangent_outputs,
                    [k for k, v in with_tangents.items() if k in read and _is_differentiable(v)],
                    with_tangents, source,
                    lambda i: f"second-order tangent of {name} output {active[i]}",
                    f"transpose of the second-order linearization of {name}")
    points = 2

    # ... and the transposed graph as a function of the primals and cotangents
    primal_out = evaluate(graph, outputs, {Input(k): v for k, v in primals.items()}, ctx)
    with_cotangents = dict(primals)
    for key, i in zip(transposed.tangent_input_keys, active):
        with_cotangents[key.key] = _random_like(primal_out[i], rng)
    cotangent_slots = [slot for slot, c in zip(wrt, transposed.tangent_outputs) if c is not None]
    if cotangent_slots:
        jvp_check([transposed.graph, linear.graph, graph],
                  [transposed_stage, linear_stage, checked],
                  [k for k in transposed.tangent_output_keys if k is not None], with_cotangents,
                  f"while linearizing the transposed graph of {name}, at order 2",
                  lambda i, key: f"cotangent of {name} input {cotangent_slots[i]}")
        points += 1
    return finish(points)
