"""The scalar primitive set: ops over Python ``float`` and ``complex``, each with its rules.

Complex numbers follow tidu's convention (JAX's forward mode, the real inner
product ``<a, b> = Re(conj(a) b)`` for transposes, so reverse mode is PyTorch's
and ChainRules': ``jax.grad`` returns its conjugate): a JVP is the real-linear
derivative ``f_z dz + f_zbar conj(dz)``; the transpose of ``t -> c*t`` is
``ct -> conj(c)*ct``. Rules are closed over the set, so any order works.

Types are explicit, as in JAX: the operands of a binary op are both real or
both complex, and a real value becomes complex only through ``TO_COMPLEX``,
whose transpose takes the real part. That is what keeps a real input's
cotangent real. ``Scale``/``Pow`` with a complex parameter, and ``REAL``/``IMAG``,
take complex inputs. The frontends (``trace_scalar``, the eager ``Scalar``)
insert ``TO_COMPLEX`` for you.

Edge values follow IEEE 754 as PyTorch and JAX do, never a Python exception:
where ``math``/``cmath`` would raise, ``eval`` gives NumPy's answer instead, so
``1/0 = inf``, ``0/0 = nan``, ``log(0) = -inf``, ``log(-1) = sqrt(-1) = nan``,
``exp(1000) = inf``, ``0.0 ** -1 = inf``; a real base below zero to a
non-integer power is ``nan`` (not Python's complex result); a complex 0 to a
power with negative real part is ``inf+nanj`` (PyTorch's value). Derivatives
then follow: ``sqrt'(0) = inf``, ``log'(0) = inf``, ``(x ** 0)' = 0`` everywhere.
``ABS`` and ``SIGN`` use PyTorch's convention at 0: ``sign(0) = 0``, so
``abs'(0) = 0`` for real and complex inputs alike (JAX agrees for complex
inputs; for real ones ``jax.grad(jnp.abs)(0.0)`` is 1). ``sign(-0.0)`` is
``-0.0`` and ``sign(nan)`` is ``nan``, as in NumPy and JAX.

The parameter of ``Const``, ``Pow`` and ``Scale`` is compared exactly, type
included, because equal ops are merged into one graph node: ``Const(0.0)`` and
``Const(-0.0)`` differ (``1 / -0.0`` is ``-inf``), ``Const(1)``, ``Const(1.0)``
and ``Const(1+0j)`` differ, and ``Const(nan)`` equals itself.

For ``tidu.optimize``, ``constant(value)`` makes ``Const(value)`` and
``simplify`` rewrites (see :func:`_simplify_mul` and the functions beside it):
``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x``, ``x / 1``,
``Scale(1)(x)`` and ``Pow(1)(x)`` to ``x``; ``NEG(NEG x)`` and ``CONJ(CONJ x)``
to ``x``. Each gives the value the original gives for every float and complex
input, bit for bit (signed zeros, inf and NaN included), with two exceptions
IEEE 754 leaves open, where the rules keep ``x``: ``-0.0 + 0`` is ``+0.0``
(in either part of a complex number; ``x - (-0.0)`` too); and Python computes
a complex value times or divided by ``1`` (``x * 1`` and ``x / 1`` in all their
forms, ``Scale(1)``, ``Pow(1)``) as a full complex product or quotient, so an
infinite or NaN part can make the other part NaN (``(inf+0j) * 1.0`` is
``inf+nanj``, ``complex(nan, 1) ** 1`` is ``nan+nanj``) and a zero part can
change sign (``complex(0.5, -0.0) * 1.0`` is ``0.5+0j``). ``x * 0`` is left
alone (``inf * 0`` is NaN). Scales are not folded into each other or into
``NEG``: for complex ``x``, ``-(2.0 * x)`` and ``-2.0 * x`` differ in the sign
of a zero part, which a later ``LOG`` or ``SQRT`` turns into a jump of
``2 pi i`` across its branch cut.

>>> ScalarOp.MUL.eval(None, [2.0, 3.0])
[6.0]
>>> ScalarOp.SINCOS.output_count()
2
>>> ScalarOp.DIV.eval(None, [1.0, 0.0]), ScalarOp.LOG.eval(None, [0.0])
([inf], [-inf])
>>> Const(0.0) == Const(-0.0), Const(float("nan")) == Const(float("nan"))
(False, True)
"""

from __future__ import annotations

import cmath
import enum
import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

from tidu import ADRuleError, ADRuleKind, Primitive, TiduError
from tidu.compile import forwarded, producer
from tidu.graph import PRIMARY, EvaluableGraphOperation, External, Linearized, Local
from primitives.exact import exact_identity

LIN = Linearized((True,))
LIN_TF = Linearized((True, False))
LIN_FT = Linearized((False, True))
LIN_TT = Linearized((True, True))


def _emit(builder, op, inputs, role=PRIMARY) -> int:
    """Emit a one-output op; return its id."""
    return builder.add_primitive(op, inputs, role)[0]


def _scale(builder, tangent: int, factor_key) -> int:
    """``tangent * factor`` where ``factor`` is a primal value (tangent work)."""
    return _emit(builder, ScalarOp.MUL, [Local(tangent), External(factor_key)], LIN_TF)


def _conj_of(builder, key) -> External | Local:
    """A reference to ``conj(key)``, emitted as primal work."""
    return Local(_emit(builder, ScalarOp.CONJ, [External(key)]))


def _not_linear(op, role, detail: str):
    return ADRuleError(op.name if isinstance(op, enum.Enum) else repr(op),
                       ADRuleKind.TRANSPOSE, f"{detail} (role {role!r})")


class _Rules(NamedTuple):
    arity: int
    outputs: int
    eval: Callable
    jvp: Callable | None          # (builder, xs, outs, txs) -> tangent ids
    transpose: Callable | None    # (builder, cts, inputs, role) -> cotangent ids


def _ieee(numpy_name: str, *args):
    """NumPy's IEEE 754 value of ``numpy.<numpy_name>(*args)`` as a Python number.

    The slow path of ``eval``: taken only where Python raises (``1/0``, ``log(0)``,
    overflow) instead of giving ``inf`` or ``nan`` as PyTorch and JAX do.
    """
    import numpy as np

    kind = np.complex128 if any(isinstance(a, complex) for a in args) else np.float64
    with np.errstate(all="ignore"):
        value = getattr(np, numpy_name)(*map(kind, args))
    return complex(value) if kind is np.complex128 else float(value)


def _cplx(real_fn, complex_fn, numpy_name: str):
    def fn(x):
        try:
            return complex_fn(x) if isinstance(x, complex) else real_fn(x)
        except (ArithmeticError, ValueError):         # e.g. log(0), exp(1000), sin(inf)
            return _ieee(numpy_name, x)
    fn.__name__ = real_fn.__name__
    return fn


_exp = _cplx(math.exp, cmath.exp, "exp")
_log = _cplx(math.log, cmath.log, "log")
_sin = _cplx(math.sin, cmath.sin, "sin")
_cos = _cplx(math.cos, cmath.cos, "cos")
_sqrt = _cplx(math.sqrt, cmath.sqrt, "sqrt")
_tanh = _cplx(math.tanh, cmath.tanh, "tanh")


def _div(a, b):
    try:
        return a / b
    except ZeroDivisionError:                          # inf or nan, as in IEEE 754
        return _ieee("true_divide", a, b)


def _div_or_zero(a, b):
    if b == 0:
        return 0j if isinstance(a, complex) or isinstance(b, complex) else 0.0
    return _div(a, b)


def _power(x, p):
    """``x ** p`` with IEEE 754 edge values (see the module docstring)."""
    try:
        result = x ** p
    except (ArithmeticError, ValueError):              # 0 ** -1, overflow
        if x == 0 and (isinstance(x, complex) or isinstance(p, complex)):
            return complex(math.inf, math.nan)          # PyTorch's value; NumPy gives nan+nanj
        return _ieee("power", x, p)
    if type(result) is complex and not isinstance(x, complex) and not isinstance(p, complex):
        return math.nan                                # (-8.0) ** (1/3): nan, not complex
    return result


def _sign(x):
    """``x / abs(x)``, and ``x`` itself at 0 and NaN (``sign(0) = 0``, ``sign(-0.0) = -0.0``)."""
    if isinstance(x, complex):
        return x / abs(x) if x != 0 else x
    return 1.0 if x > 0 else -1.0 if x < 0 else float(x)


# --- arithmetic: linear in each input ---------------------------------------------

def _add_jvp(b, xs, outs, t):
    tx, ty = t
    if tx is None or ty is None:
        return [tx if ty is None else ty]
    return [_emit(b, ScalarOp.ADD, [Local(tx), Local(ty)], LIN_TT)]


def _add_transpose(b, cts, inputs, role):
    [ct] = cts
    mask = _mask(ScalarOp.ADD, role)
    return [ct if mask[0] else None, ct if mask[1] else None]


def _sub_jvp(b, xs, outs, t):
    tx, ty = t
    if ty is None:
        return [tx]
    if tx is None:
        return [_emit(b, ScalarOp.NEG, [Local(ty)], LIN)]
    return [_emit(b, ScalarOp.SUB, [Local(tx), Local(ty)], LIN_TT)]


def _sub_transpose(b, cts, inputs, role):
    [ct] = cts
    mask = _mask(ScalarOp.SUB, role)
    return [ct if mask[0] else None,
            _emit(b, ScalarOp.NEG, [Local(ct)], LIN) if mask[1] else None]


def _neg_jvp(b, xs, outs, t):
    return [_emit(b, ScalarOp.NEG, [Local(t[0])], LIN)]


def _neg_transpose(b, cts, inputs, role):
    return [_emit(b, ScalarOp.NEG, [Local(cts[0])], LIN)]


def _mul_jvp(b, xs, outs, t):
    x, y = xs
    tx, ty = t
    terms = []
    if tx is not None:
        terms.append(_emit(b, ScalarOp.MUL, [Local(tx), External(y)], LIN_TF))
    if ty is not None:
        terms.append(_emit(b, ScalarOp.MUL, [External(x), Local(ty)], LIN_FT))
    if len(terms) == 1:
        return terms
    return [_emit(b, ScalarOp.ADD, [Local(terms[0]), Local(terms[1])], LIN_TT)]


def _mul_transpose(b, cts, inputs, role):
    # t -> t*y transposes to ct -> ct*conj(y), one MUL_CONJ
    [ct] = cts
    x, y = inputs
    mask = _mask(ScalarOp.MUL, role)
    if mask == (True, False):
        return [_emit(b, ScalarOp.MUL_CONJ, [Local(ct), y], LIN_TF), None]
    if mask == (False, True):
        return [None, _emit(b, ScalarOp.MUL_CONJ, [Local(ct), x], LIN_TF)]
    raise _not_linear(ScalarOp.MUL, role, "MUL is linear in one input at a time")


def _mul_conj_jvp(b, xs, outs, t):
    # d(x conj(y)) = dx conj(y) + x conj(dy)
    x, y = xs
    tx, ty = t
    terms = []
    if tx is not None:
        terms.append(_emit(b, ScalarOp.MUL_CONJ, [Local(tx), External(y)], LIN_TF))
    if ty is not None:
        terms.append(_emit(b, ScalarOp.MUL_CONJ, [External(x), Local(ty)], LIN_FT))
    if len(terms) == 1:
        return terms
    return [_emit(b, ScalarOp.ADD, [Local(terms[0]), Local(terms[1])], LIN_TT)]


def _mul_conj_transpose(b, cts, inputs, role):
    # t -> t conj(y) transposes to ct -> ct y;  t -> x conj(t) to ct -> x conj(ct)
    [ct] = cts
    x, y = inputs
    mask = _mask(ScalarOp.MUL_CONJ, role)
    if mask == (True, False):
        return [_emit(b, ScalarOp.MUL, [Local(ct), y], LIN_TF), None]
    if mask == (False, True):
        return [None, _emit(b, ScalarOp.MUL_CONJ, [x, Local(ct)], LIN_FT)]
    raise _not_linear(ScalarOp.MUL_CONJ, role, "MUL_CONJ is linear in one input at a time")


def _div_jvp(b, xs, outs, t):
    x, y = xs
    tx, ty = t
    terms = []
    if tx is not None:
        terms.append(_emit(b, ScalarOp.DIV, [Local(tx), External(y)], LIN_TF))
    if ty is not None:
        # d(x/y) = -(x/y)/y dy
        ratio = _emit(b, ScalarOp.DIV, [External(outs[0]), External(y)])
        scaled = _emit(b, ScalarOp.MUL, [Local(ty), Local(ratio)], LIN_TF)
        terms.append(_emit(b, ScalarOp.NEG, [Local(scaled)], LIN))
    if len(terms) == 1:
        return terms
    return [_emit(b, ScalarOp.ADD, [Local(terms[0]), Local(terms[1])], LIN_TT)]


def _div_transpose(b, cts, inputs, role):
    [ct] = cts
    if _mask(ScalarOp.DIV, role) != (True, False):
        raise _not_linear(ScalarOp.DIV, role, "DIV is linear in its numerator only")
    return [_emit(b, ScalarOp.DIV, [Local(ct), _conj_of(b, inputs[1].key)], LIN_TF), None]


def _div_or_zero_jvp(b, xs, outs, t):
    # as DIV, with DIV_OR_ZERO throughout: every term is 0 where y is 0
    x, y = xs
    tx, ty = t
    terms = []
    if tx is not None:
        terms.append(_emit(b, ScalarOp.DIV_OR_ZERO, [Local(tx), External(y)], LIN_TF))
    if ty is not None:
        ratio = _emit(b, ScalarOp.DIV_OR_ZERO, [External(outs[0]), External(y)])
        scaled = _emit(b, ScalarOp.MUL, [Local(ty), Local(ratio)], LIN_TF)
        terms.append(_emit(b, ScalarOp.NEG, [Local(scaled)], LIN))
    if len(terms) == 1:
        return terms
    return [_emit(b, ScalarOp.ADD, [Local(terms[0]), Local(terms[1])], LIN_TT)]


def _div_or_zero_transpose(b, cts, inputs, role):
    [ct] = cts
    if _mask(ScalarOp.DIV_OR_ZERO, role) != (True, False):
        raise _not_linear(ScalarOp.DIV_OR_ZERO, role, "DIV_OR_ZERO is linear in its numerator only")
    return [_emit(b, ScalarOp.DIV_OR_ZERO, [Local(ct), _conj_of(b, inputs[1].key)], LIN_TF),
            None]


def _conj_jvp(b, xs, outs, t):
    return [_emit(b, ScalarOp.CONJ, [Local(t[0])], LIN)]


def _conj_transpose(b, cts, inputs, role):
    return [_emit(b, ScalarOp.CONJ, [Local(cts[0])], LIN)]


def _real_jvp(b, xs, outs, t):
    return [_emit(b, ScalarOp.REAL, [Local(t[0])], LIN)]


def _real_transpose(b, cts, inputs, role):
    return [cts[0]]                       # <ct, Re t> = Re(conj(ct) t) for real ct


class ScalarTypeError(TiduError, TypeError):
    """A value of the wrong kind for a scalar op (e.g. a complex value where a real one belongs)."""


def _to_complex(a) -> complex:
    if isinstance(a, complex):
        raise ScalarTypeError(
            f"TO_COMPLEX got the complex value {a!r}: it promotes real values only (its "
            "transpose keeps the real part). Declare complex inputs, e.g. "
            "trace_scalar(f, keys, complex_inputs=[...]).")
    return complex(a)


def _to_complex_jvp(b, xs, outs, t):
    return [_emit(b, ScalarOp.TO_COMPLEX, [Local(t[0])], LIN)]


def _to_complex_transpose(b, cts, inputs, role):
    return [_emit(b, ScalarOp.REAL, [Local(cts[0])], LIN)]   # back onto the reals


def _imag_jvp(b, xs, outs, t):
    return [_emit(b, ScalarOp.IMAG, [Local(t[0])], LIN)]


def _imag_transpose(b, cts, inputs, role):
    return [_emit(b, Scale(1j), [Local(cts[0])], LIN)]   # <ct, Im t> = Re(conj(i ct) t)


def _mask(op, role) -> tuple:
    if role is PRIMARY:
        raise _not_linear(op, role, f"{op.name} was not emitted as linear work")
    return role.active_mask


# --- transcendental: rules reuse primal outputs where the derivative allows ------

def _exp_jvp(b, xs, outs, t):
    return [_scale(b, t[0], outs[0])]


def _log_jvp(b, xs, outs, t):
    return [_emit(b, ScalarOp.DIV, [Local(t[0]), External(xs[0])], LIN_TF)]


def _sin_jvp(b, xs, outs, t):
    cos_x = _emit(b, ScalarOp.COS, [External(xs[0])])
    return [_emit(b, ScalarOp.MUL, [Local(t[0]), Local(cos_x)], LIN_TF)]


def _cos_jvp(b, xs, outs, t):
    sin_x = _emit(b, ScalarOp.SIN, [External(xs[0])])
    scaled = _emit(b, ScalarOp.MUL, [Local(t[0]), Local(sin_x)], LIN_TF)
    return [_emit(b, ScalarOp.NEG, [Local(scaled)], LIN)]


def _sincos_jvp(b, xs, outs, t):
    sin_x, cos_x = outs
    d_sin = _scale(b, t[0], cos_x)
    d_cos = _emit(b, ScalarOp.NEG, [Local(_scale(b, t[0], sin_x))], LIN)
    return [d_sin, d_cos]


def _abs_jvp(b, xs, outs, t):
    # d|x| = Re(conj(sign x) dx): sign(x) dx for real x; 0 at x = 0, where sign is 0
    sign = _emit(b, ScalarOp.SIGN, [External(xs[0])])
    product = _emit(b, ScalarOp.MUL_CONJ, [Local(t[0]), Local(sign)], LIN_TF)
    return [_emit(b, ScalarOp.REAL, [Local(product)], LIN)]


def _sign_jvp(b, xs, outs, t):
    # s = x/|x|: ds = (dx conj(s) - s conj(dx)) / (2 conj(x)), which is 0 for real x,
    # and 0 at x = 0 by DIV_OR_ZERO (PyTorch's convention for sign and sgn)
    sign = outs[0]
    forward = _emit(b, ScalarOp.MUL_CONJ, [Local(t[0]), External(sign)], LIN_TF)
    backward = _emit(b, ScalarOp.MUL_CONJ, [External(sign), Local(t[0])], LIN_FT)
    difference = _emit(b, ScalarOp.SUB, [Local(forward), Local(backward)], LIN_TT)
    twice_conj = _emit(b, Scale(2.0), [_conj_of(b, xs[0])])
    return [_emit(b, ScalarOp.DIV_OR_ZERO, [Local(difference), Local(twice_conj)], LIN_TF)]


def _sqrt_jvp(b, xs, outs, t):
    twice = _emit(b, Scale(2.0), [External(outs[0])])
    return [_emit(b, ScalarOp.DIV, [Local(t[0]), Local(twice)], LIN_TF)]


def _tanh_jvp(b, xs, outs, t):
    # (1 - tanh^2) dx = dx - dx * tanh^2, with no constant needed
    squared = _emit(b, ScalarOp.MUL, [External(outs[0]), External(outs[0])])
    scaled = _emit(b, ScalarOp.MUL, [Local(t[0]), Local(squared)], LIN_TF)
    return [_emit(b, ScalarOp.SUB, [Local(t[0]), Local(scaled)], LIN_TT)]


class ScalarOp(Primitive, EvaluableGraphOperation, enum.Enum):
    """Scalar ops without parameters. ``Pow``, ``Scale`` and ``Const`` carry one."""

    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    MUL_CONJ = "mul_conj"      # x * conj(y): what MUL's transpose emits
    DIV = "div"
    DIV_OR_ZERO = "div_or_zero"  # x / y, and 0 where y == 0: what ABS's derivatives use
    NEG = "neg"
    CONJ = "conj"
    TO_COMPLEX = "to_complex"  # real -> complex promotion
    REAL = "real"
    IMAG = "imag"
    EXP = "exp"
    LOG = "log"
    SIN = "sin"
    COS = "cos"
    SINCOS = "sincos"
    SQRT = "sqrt"
    TANH = "tanh"
    ABS = "abs"                # |x|, real for complex x too
    SIGN = "sign"              # x / |x|, and 0 at 0

    __hash__ = object.__hash__   # members are singletons: identity hashing is exact and fast

    @classmethod
    def add(cls) -> "ScalarOp":
        return cls.ADD

    def input_count(self) -> int:
        return _RULES[self].arity

    def structural_rules(self) -> bool:
        return True          # the rules below depend only on which tangents are zero

    def output_count(self) -> int:
        return _RULES[self].outputs

    def eval(self, ctx, inputs):
        return self._eval(*inputs)

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return _RULES[self].jvp(builder, primal_inputs, primal_outputs, tangent_inputs)

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        rule = _RULES[self].transpose
        if rule is None:
            raise ADRuleError(self.name, ADRuleKind.TRANSPOSE, f"{self.name} is not linear")
        return rule(builder, cotangent_outputs, inputs, role)

    @classmethod
    def constant(cls, value) -> "Const | None":
        return _constant(value)

    def simplify(self, rewriter, inputs, role, ctx):
        rule = _SIMPLIFY.get(self)
        return None if rule is None else rule(rewriter, inputs, role)

    def __repr__(self) -> str:
        return f"ScalarOp.{self.name}"


_RULES = {
    ScalarOp.ADD: _Rules(2, 1, lambda a, b: [a + b], _add_jvp, _add_transpose),
    ScalarOp.SUB: _Rules(2, 1, lambda a, b: [a - b], _sub_jvp, _sub_transpose),
    ScalarOp.MUL: _Rules(2, 1, lambda a, b: [a * b], _mul_jvp, _mul_transpose),
    ScalarOp.MUL_CONJ: _Rules(2, 1, lambda a, b: [a * b.conjugate()], _mul_conj_jvp,
                              _mul_conj_transpose),
    ScalarOp.DIV: _Rules(2, 1, lambda a, b: [_div(a, b)], _div_jvp, _div_transpose),
    ScalarOp.DIV_OR_ZERO: _Rules(2, 1, lambda a, b: [_div_or_zero(a, b)], _div_or_zero_jvp,
                                 _div_or_zero_transpose),
    ScalarOp.NEG: _Rules(1, 1, lambda a: [-a], _neg_jvp, _neg_transpose),
    ScalarOp.CONJ: _Rules(1, 1, lambda a: [a.conjugate()], _conj_jvp, _conj_transpose),
    ScalarOp.TO_COMPLEX: _Rules(1, 1, lambda a: [_to_complex(a)], _to_complex_jvp,
                                _to_complex_transpose),
    ScalarOp.REAL: _Rules(1, 1, lambda a: [float(a.real)], _real_jvp, _real_transpose),
    ScalarOp.IMAG: _Rules(1, 1, lambda a: [float(a.imag)], _imag_jvp, _imag_transpose),
    ScalarOp.EXP: _Rules(1, 1, lambda a: [_exp(a)], _exp_jvp, None),
    ScalarOp.LOG: _Rules(1, 1, lambda a: [_log(a)], _log_jvp, None),
    ScalarOp.SIN: _Rules(1, 1, lambda a: [_sin(a)], _sin_jvp, None),
    ScalarOp.COS: _Rules(1, 1, lambda a: [_cos(a)], _cos_jvp, None),
    ScalarOp.SINCOS: _Rules(1, 2, lambda a: [_sin(a), _cos(a)], _sincos_jvp, None),
    ScalarOp.SQRT: _Rules(1, 1, lambda a: [_sqrt(a)], _sqrt_jvp, None),
    ScalarOp.TANH: _Rules(1, 1, lambda a: [_tanh(a)], _tanh_jvp, None),
    ScalarOp.ABS: _Rules(1, 1, lambda a: [abs(a)], _abs_jvp, None),
    ScalarOp.SIGN: _Rules(1, 1, lambda a: [_sign(a)], _sign_jvp, None),
}
for _op, _rules in _RULES.items():
    _op._eval = _rules.eval          # eval is the hot path of eager runs: skip the lookup


# --- ops with a parameter ---------------------------------------------------------


class _ParameterOp(Primitive, EvaluableGraphOperation):
    """Shared base of the parameterised scalar ops: one input, one output, sum with ADD.

    Equal when their parameters are exactly equal
    (:func:`primitives.exact.exact_identity`): graphs merge
    equal ops, so ``==`` on numbers (``0.0 == -0.0``, ``1 == 1.0 == 1+0j``,
    ``nan != nan``) would merge ops that compute different things.
    """

    __slots__ = ()

    _parameter = ""              # the name of the subclass's one field

    def __post_init__(self) -> None:
        fields = self.__dict__         # frozen: written directly, once
        parameter = fields[self._parameter]
        fields["_identity"] = (type(self), exact_identity(parameter))

    def __eq__(self, other) -> bool:
        return self is other or (isinstance(other, _ParameterOp)
                                 and self._identity == other._identity)

    def __hash__(self) -> int:
        return hash(self._identity)

    @classmethod
    def add(cls) -> ScalarOp:
        return ScalarOp.ADD

    @classmethod
    def constant(cls, value) -> "Const | None":
        return _constant(value)

    def input_count(self) -> int:
        return 1

    def output_count(self) -> int:
        return 1


@dataclass(frozen=True, eq=False)
class Pow(_ParameterOp):
    """``x ** exponent`` for a constant exponent.

    >>> Pow(3).eval(None, [2.0])
    [8.0]
    """

    exponent: float | int | complex
    _parameter = "exponent"

    def eval(self, ctx, inputs):
        return [_power(inputs[0], self.exponent)]

    def simplify(self, rewriter, inputs, role, ctx):
        """``Pow(1)(x) -> x``."""
        return [inputs[0]] if _is_real_number(self.exponent, 1) else None

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        if self.exponent == 0:
            return [None]
        if self.exponent == 1:
            return [tangent_inputs[0]]
        lower = _emit(builder, Pow(self.exponent - 1), [External(primal_inputs[0])])
        factor = _emit(builder, Scale(self.exponent), [Local(lower)])
        return [_emit(builder, ScalarOp.MUL, [Local(tangent_inputs[0]), Local(factor)], LIN_TF)]


@dataclass(frozen=True, eq=False)
class Scale(_ParameterOp):
    """``factor * x`` for a constant factor: linear, its transpose scales by ``conj(factor)``.

    >>> Scale(2.0).eval(None, [3.0])
    [6.0]
    """

    factor: float | int | complex
    _parameter = "factor"

    def eval(self, ctx, inputs):
        return [self.factor * inputs[0]]

    def jvp_rule(self, builder, primal_inputs, primal_outputs, tangent_inputs, ctx):
        return [_emit(builder, self, [Local(tangent_inputs[0])], LIN)]

    def transpose_rule(self, builder, cotangent_outputs, inputs, role, ctx):
        factor = self.factor.conjugate() if isinstance(self.factor, complex) else self.factor
        return [_emit(builder, Scale(factor), [Local(cotangent_outputs[0])], LIN)]

    def simplify(self, rewriter, inputs, role, ctx):
        """``Scale(1)(x) -> x``. Scales are not folded into each other or into ``NEG``:
        for a complex ``x`` the zeros of ``-(c * x)`` and ``(-c) * x`` differ in sign."""
        return [inputs[0]] if _is_real_number(self.factor, 1) else None


@dataclass(frozen=True, eq=False)
class Const(_ParameterOp):
    """A constant: no inputs, so it never carries a tangent.

    >>> Const(1.5).eval(None, [])
    [1.5]
    """

    value: float | int | complex
    _parameter = "value"

    def input_count(self) -> int:
        return 0

    def eval(self, ctx, inputs):
        return [self.value]


# --- simplification: the hooks of tidu.optimize ---------------------------------------


def _constant(value) -> Const | None:
    """``Const(value)`` for a Python number; ``None`` (no folding) for anything else."""
    return Const(value) if type(value) in (int, float, complex) else None


def _is_const(key, number) -> bool:
    """Whether a ``Const`` equal to ``number`` makes ``key``."""
    made = producer(key)
    return made is not None and type(made.operation) is Const and made.operation.value == number


def _is_real_number(number, value) -> bool:
    """Whether ``number`` is the int or float ``value`` (not a complex or bool one)."""
    return type(number) in (int, float) and number == value


def _made_by(key, op: ScalarOp, role):
    """The producer of ``key`` if it is ``op`` with ``role``."""
    made = producer(key)
    return made if made is not None and made.role == role and made.operation is op else None


def _simplify_add(rewriter, inputs, role):
    """``x + 0 -> x`` and ``0 + x -> x``."""
    if _is_const(inputs[1], 0):
        return forwarded(inputs, role, 0)
    if _is_const(inputs[0], 0):
        return forwarded(inputs, role, 1)
    return None


def _simplify_sub(rewriter, inputs, role):
    """``x - 0 -> x``."""
    return forwarded(inputs, role, 0) if _is_const(inputs[1], 0) else None


def _simplify_mul(rewriter, inputs, role):
    """``x * 1 -> x`` and ``1 * x -> x`` (``x * 0`` stays: ``inf * 0`` is NaN)."""
    if _is_const(inputs[1], 1):
        return forwarded(inputs, role, 0)
    if _is_const(inputs[0], 1):
        return forwarded(inputs, role, 1)
    return None


def _simplify_by_one(rewriter, inputs, role):
    """``x / 1 -> x``, and ``x * conj(1) -> x`` for ``MUL_CONJ``."""
    return forwarded(inputs, role, 0) if _is_const(inputs[1], 1) else None


def _simplify_neg(rewriter, inputs, role):
    """``NEG(NEG x) -> x`` (``NEG(Scale(c)(x))`` stays: see :meth:`Scale.simplify`)."""
    inner = _made_by(inputs[0], ScalarOp.NEG, role)
    return None if inner is None else [inner.inputs[0]]


def _simplify_conj(rewriter, inputs, role):
    """``CONJ(CONJ x) -> x``."""
    inner = _made_by(inputs[0], ScalarOp.CONJ, role)
    return None if inner is None else [inner.inputs[0]]


_SIMPLIFY = {
    ScalarOp.ADD: _simplify_add,
    ScalarOp.SUB: _simplify_sub,
    ScalarOp.MUL: _simplify_mul,
    ScalarOp.MUL_CONJ: _simplify_by_one,
    ScalarOp.DIV: _simplify_by_one,
    ScalarOp.DIV_OR_ZERO: _simplify_by_one,
    ScalarOp.NEG: _simplify_neg,
    ScalarOp.CONJ: _simplify_conj,
}
