"""Activation functions and friends with ``jax.nn``'s names, semantics and derivatives.

Each is written with ``tnp`` functions, so it works on NumPy arrays, eager
``Tensor``s and under every transform (``grad``, ``jit``, ``vmap``, the
Jacobians, in any nesting). They are numerically stable where ``jax.nn`` is
(``softplus`` and ``sigmoid`` at ±800, ``log_softmax`` with ``-inf`` logits),
and their derivatives follow ``jax.nn``'s conventions at the kinks:
``relu'(0) = 0``, ``relu6'(0) = relu6'(6) = 0``, ``leaky_relu'(0) = 1``,
``elu'(0) = alpha``; ``celu`` and ``standardize`` split ties evenly, as JAX's
``maximum`` does.

>>> import numpy as np
>>> import primitives.tensor as tnp
>>> x = np.array([-2.0, 0.0, 3.0])
>>> relu(x), tnp.grad(lambda v: tnp.sum(relu(v)))(x)
(array([0., 0., 3.]), array([0., 0., 1.]))
>>> logits = np.array([[2.0, 1.0, -np.inf]])
>>> np.round(np.exp(log_softmax(logits)), 4)
array([[0.7311, 0.2689, 0.    ]])
>>> one_hot(np.array([0, 2]), 3)
array([[1., 0., 0.],
       [0., 0., 1.]])
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import numbers
import operator

import numpy as np

from tidu import TiduError
from primitives.tensor import numpy as api
from primitives.tensor.numpy.lowering import exp, normalize_axes, stop_gradient, tanh, where
from primitives.tensor.numpy.reductions import log_softmax_over
from primitives.tensor.core import Frontend, shape_of
from primitives.tensor.transforms.custom import custom_jvp
from primitives.tensor.errors import (TensorAxisError, TensorNotSupportedError,
                                      TensorShapeError, TensorTypeError)
from primitives.tensor.numpy.manipulation import moveaxis, split
from primitives.tensor.numpy.mathfuncs import expm1, logaddexp

__all__ = [
    "relu", "relu6", "sigmoid", "log_sigmoid", "softplus", "soft_sign", "silu", "swish",
    "gelu", "elu", "celu", "selu", "leaky_relu", "hard_tanh", "hard_sigmoid", "hard_silu",
    "hard_swish", "mish", "squareplus", "sparse_plus", "glu", "tanh", "softmax",
    "log_softmax", "logsumexp", "one_hot", "standardize",
]


def _operand(x):
    """``x`` as an array (lists and numbers converted); tensors and traced values as they are."""
    return x if isinstance(x, Frontend) else api.asarray(x)


# --- rectifiers -------------------------------------------------------------------------


def relu(x):
    """``max(x, 0)``; its derivative at 0 is 0 (JAX's choice), and NaN propagates.

    >>> import primitives.tensor as tnp
    >>> tnp.grad(lambda v: tnp.sum(relu(v)))(np.array([-1.0, 0.0, 2.0]))
    array([0., 0., 1.])
    """
    x = _operand(x)
    return where(x <= 0, 0, x)


def relu6(x):
    """``min(max(x, 0), 6)``; its derivative is 0 at 0 and at 6 (as ``jax.nn.relu6``).

    >>> relu6(np.array([-1.0, 3.0, 7.0]))
    array([0., 3., 6.])
    """
    x = _operand(x)
    return where(x <= 0, 0, where(x >= 6, 6, x))


def leaky_relu(x, negative_slope=1e-2):
    """``x`` where ``x >= 0``, else ``negative_slope * x`` (derivative 1 at 0).

    >>> leaky_relu(np.array([-2.0, 3.0]))
    array([-0.02,  3.  ])
    """
    x = _operand(x)
    return where(x >= 0, x, negative_slope * x)


def elu(x, alpha=1.0):
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)`` (derivative ``alpha`` at 0).

    >>> elu(np.array([-1.0, 2.0]))
    array([-0.63212056,  2.        ])
    """
    x = _operand(x)
    return where(x > 0, x, alpha * expm1(where(x > 0, 0.0, x)))


def celu(x, alpha=1.0):
    """``max(x, 0) + alpha * expm1(min(x, 0) / alpha)`` (as ``jax.nn.celu``).

    >>> celu(np.array([-1.0, 2.0]))
    array([-0.63212056,  2.        ])
    """
    x = _operand(x)
    return api.maximum(x, 0.0) + alpha * expm1(api.minimum(x, 0.0) / alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    """``scale * elu(x, alpha)`` with the self-normalizing constants of Klambauer et al.

    >>> selu(np.array([-1.0, 1.0]))
    array([-1.11133074,  1.05070099])
    """
    return _SELU_SCALE * elu(x, _SELU_ALPHA)


def hard_tanh(x):
    """``x`` clipped to ``[-1, 1]`` (derivative 1 at ±1, as ``jax.nn.hard_tanh``).

    >>> hard_tanh(np.array([-3.0, 0.5, 3.0]))
    array([-1. ,  0.5,  1. ])
    """
    x = _operand(x)
    return where(x > 1, 1, where(x < -1, -1, x))


def hard_sigmoid(x):
    """``relu6(x + 3) / 6``.

    >>> hard_sigmoid(np.array([-4.0, 0.0, 4.0]))
    array([0. , 0.5, 1. ])
    """
    return relu6(_operand(x) + 3.0) / 6.0


def hard_silu(x):
    """``x * hard_sigmoid(x)`` (also called ``hard_swish``).

    >>> hard_silu(np.array([-4.0, 1.0, 4.0]))
    array([-0.        ,  0.66666667,  4.        ])
    """
    x = _operand(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def sparse_plus(x):
    """0 for ``x <= -1``, ``x`` for ``x >= 1``, ``(x + 1)**2 / 4`` between.

    >>> sparse_plus(np.array([-2.0, 0.0, 2.0]))
    array([0.  , 0.25, 2.  ])
    """
    x = _operand(x)
    return where(x <= -1.0, 0.0, where(x >= 1.0, x, (x + 1.0) * (x + 1.0) / 4))


# --- smooth activations -------------------------------------------------------------------


def sigmoid(x):
    """The logistic function ``1 / (1 + exp(-x))``, computed without overflow for any ``x``
    (both sides of 0 use ``exp(-|x|)``, so no derivative meets an infinity).

    >>> sigmoid(np.array([-800.0, 0.0, 800.0]))
    array([0. , 0.5, 1. ])
    """
    x = _operand(x)
    positive = x >= 0
    z = exp(where(positive, -x, x))             # exp(-|x|), with the derivative of each side
    return where(positive, 1 / (1 + z), z / (1 + z))


def log_sigmoid(x):
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large ``|x|``.

    >>> log_sigmoid(np.array([-800.0, 800.0]))
    array([-800.,   -0.])
    """
    return -softplus(-_operand(x))


def softplus(x):
    """``log(1 + exp(x))``, as ``logaddexp(x, 0)``: stable for large ``|x|``.

    >>> softplus(np.array([-800.0, 800.0])), softplus(np.array([0.0]))
    (array([  0., 800.]), array([0.69314718]))
    """
    return logaddexp(_operand(x), 0.0)


def soft_sign(x):
    """``x / (|x| + 1)``.

    >>> soft_sign(np.array([-1.0, 3.0]))
    array([-0.5 ,  0.75])
    """
    x = _operand(x)
    return x / (api.abs(x) + 1)


def silu(x):
    """``x * sigmoid(x)`` (also called ``swish``).

    >>> silu(np.array([0.0, 1.0]))
    array([0.        , 0.73105858])
    """
    x = _operand(x)
    return x * sigmoid(x)


swish = silu


def mish(x):
    """``x * tanh(softplus(x))``.

    >>> mish(np.array([0.0, 1.0]))
    array([0.        , 0.86509839])
    """
    x = _operand(x)
    return x * tanh(softplus(x))


def squareplus(x, b=4):
    """``(x + sqrt(x**2 + b)) / 2``, a smooth ReLU.

    For negative ``x`` it is computed as ``b / 2 / (sqrt(x**2 + b) - x)``, the same value
    without cancellation, and ``sqrt(x**2 + b)`` as ``hypot(x, sqrt(b))``, which does not
    overflow: the value and its derivative are right at -800 in float32 and at ±1e308
    (where the plain formula gives ``inf`` and a derivative of 0.5).

    >>> squareplus(np.array([0.0, 1.5]))
    array([1., 2.])
    >>> squareplus(np.array([-1e300, 1e300]))
    array([1.e-300, 1.e+300])
    """
    x = _operand(x)
    root_b = math.sqrt(b) if isinstance(b, numbers.Real) and b >= 0 else api.sqrt(b)
    positive = x >= 0
    x_pos = where(positive, x, 0.0)     # each branch sees only its own side of 0: the
    x_neg = where(positive, -1.0, x)    # other's derivative, masked, is never 0 * inf
    rising = x_pos / 2 + api.hypot(x_pos, root_b) / 2        # (halves: x + s overflows)
    falling = (b / 4) / (api.hypot(x_neg, root_b) / 2 - x_neg / 2)
    return where(positive, rising, falling)


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_SQRT_HALF = math.sqrt(0.5)
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


@custom_jvp
def _erfc_fallback(x):
    import scipy.special
    return scipy.special.erfc(x)


@_erfc_fallback.defjvp
def _erfc_fallback_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _erfc_fallback(x), t * (-_TWO_OVER_SQRT_PI * exp(-(x * x)))


def _erfc():
    """``erfc`` of the tensor front end (``tnp.scipy.special``) when it has one, else a
    custom_jvp over SciPy's (derivative ``-2/sqrt(pi) exp(-x^2)``, differentiable again).
    SciPy is optional: without it the exact ``gelu`` raises."""
    try:
        return importlib.import_module("primitives.tensor.scipy.special").erfc
    except (ImportError, AttributeError, TiduError):      # no such module, or no SciPy
        pass
    if importlib.util.find_spec("scipy") is None:
        raise TensorNotSupportedError("nn.gelu(approximate=False) needs erfc, from SciPy, "
                                      "which is not installed: install scipy, or use the "
                                      "default approximate=True")
    return _erfc_fallback


def gelu(x, approximate: bool = True):
    """The Gaussian error linear unit ``x * Phi(x)``: with ``approximate`` (the default, as
    in ``jax.nn``) its tanh form ``x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``;
    otherwise exact, ``x/2 erfc(-x/sqrt(2))``.

    >>> gelu(np.array([-1.0, 0.0, 1.0]))
    array([-0.15880801,  0.        ,  0.84119199])
    >>> gelu(np.array([-1.0, 0.0, 1.0]), approximate=False)
    array([-0.15865525,  0.        ,  0.84134475])
    """
    x = _operand(x)
    if approximate:
        cdf = 0.5 * (1.0 + tanh(_SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))))
        return x * cdf
    return 0.5 * x * _erfc()(-x * _SQRT_HALF)


def glu(x, axis: int = -1):
    """The gated linear unit: ``x`` split in two halves ``a, b`` along ``axis``,
    ``a * sigmoid(b)``.

    >>> glu(np.array([1.0, 2.0, 0.0, 800.0]))
    array([0.5, 2. ])
    """
    x = _operand(x)
    shape = shape_of(x)
    if not -len(shape) <= axis < len(shape):
        raise TensorAxisError("nn.glu", axis, len(shape))
    if shape[axis] % 2:
        raise TensorShapeError(f"nn.glu: axis {axis} has size {shape[axis]}, which must be "
                               "even (it is split into two halves)")
    a, b = split(x, 2, axis)
    return a * sigmoid(b)


# --- normalizations ----------------------------------------------------------------------


def _max_keepdims(x, axis):
    """``max(x, axis, keepdims=True)``, ``-inf`` where ``axis`` is empty (as JAX's: the
    softmax family of an empty array is empty, its logsumexp ``-inf``)."""
    if 0 in shape_of(x):
        return api.max(x, axis=axis, keepdims=True, initial=-np.inf)
    return api.max(x, axis=axis, keepdims=True)


def _masked(x, where, axis):
    """``x`` with ``-inf`` where the boolean mask ``where`` is False (``jax.nn``'s ``where=``
    leaves those entries out), and whether each slice along ``axis`` keeps any entry
    (keepdims; ``None`` without a mask). A slice that keeps none is filled with 0 instead,
    so no ``-inf - -inf`` or ``0 / 0`` is computed; callers set its result."""
    if where is None:
        return x, None
    where = api.broadcast_to(where, shape_of(x))
    kept = api.any(where, axis=axis, keepdims=True)
    return api.where(kept, api.where(where, x, -np.inf), 0.0), kept   # Python floats: keep dtype


def softmax(x, axis=-1, where=None):
    """``exp(x) / sum(exp(x), axis)``, shifted by the maximum for stability (the shift is
    held constant: it cancels in the value, so it has no derivative). ``-inf`` entries
    get probability 0; so do the entries ``where`` (a boolean mask broadcast to ``x``,
    ``jax.nn``'s) leaves out, a slice left out entirely included.

    >>> softmax(np.array([1.0, 1.0, -np.inf]))
    array([0.5, 0.5, 0. ])
    >>> softmax(np.array([1.0, 5.0, 1.0]), where=np.array([True, False, True]))
    array([0.5, 0. , 0.5])
    """
    x, kept = _masked(_operand(x), where, axis)
    unnormalized = exp(x - stop_gradient(_max_keepdims(x, axis)))
    out = unnormalized / api.sum(unnormalized, axis=axis, keepdims=True)
    return out if where is None else api.where(where, out, 0.0)


def log_softmax(x, axis=-1, where=None):
    """``x - logsumexp(x, axis)``, computed stably, as one op; ``-inf`` entries stay ``-inf``
    and the derivative stays finite. As ``jax.nn.log_softmax``, the shift is the maximum
    even where it is not finite (a row holding ``+inf`` is NaN). Entries a boolean mask
    ``where`` leaves out are ``-inf`` (``jax.nn``'s), with derivative 0.

    >>> log_softmax(np.array([0.0, 0.0]))
    array([-0.69314718, -0.69314718])
    >>> log_softmax(np.array([0.0, 5.0, 0.0]), where=np.array([True, False, True]))
    array([-0.69314718,        -inf, -0.69314718])
    """
    x = _operand(x)
    axes = normalize_axes(axis, len(shape_of(x)), "log_softmax")
    x, _ = _masked(x, where, axes)
    out = log_softmax_over(x, axes, False)
    return out if where is None else api.where(where, out, -np.inf)


def logsumexp(a, axis=None, b=None, keepdims: bool = False, return_sign: bool = False,
              where=None):
    """``log(sum(b * exp(a), axis))`` (``jax.nn.logsumexp``, SciPy's semantics): stable for
    large ``a``; with ``return_sign`` a pair ``(log|sum|, sign(sum))``, else NaN where the
    sum is negative. Terms with ``b == 0`` are left out, and so are those a boolean mask
    ``where`` (``jax.nn``'s) leaves out: a sum of none is ``-inf`` (sign 0). ``tnp.logsumexp``
    itself.

    >>> float(logsumexp(np.array([1000.0, 1000.0])))
    1000.6931471805599
    >>> [float(v) for v in logsumexp(np.zeros(2), b=np.array([1.0, -2.0]), return_sign=True)]
    [0.0, -1.0]
    >>> float(logsumexp(np.array([0.0, 9.0, 0.0]), where=np.array([True, False, True])))
    0.6931471805599453
    """
    a = _operand(a)
    b = None if b is None else _operand(b)
    a, kept = _masked(a, where, normalize_axes(axis, len(shape_of(a)), "logsumexp"))
    out = api.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)
    if where is None:
        return out
    if not keepdims:
        kept = api.squeeze(kept, axis=normalize_axes(axis, len(shape_of(a)), "logsumexp"))
    if return_sign:
        return api.where(kept, out[0], -np.inf), api.where(kept, out[1], 0.0)
    return api.where(kept, out, -np.inf)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, *,
                algorithm: str = "fast"):
    """``(x - mean) / sqrt(variance + epsilon)`` over ``axis`` (``jax.nn.standardize``):
    ``mean`` and ``variance`` computed when not given, the variance as
    ``mean(x**2) - mean**2`` clipped at 0 (``algorithm="fast"``, JAX's default) or as
    ``mean((x - mean)**2)`` (``"stable"``).

    >>> standardize(np.array([1.0, 3.0]), epsilon=0.0)
    array([-1.,  1.])
    """
    x = _operand(x)
    if mean is None:
        mean = api.mean(x, axis=axis, keepdims=True)
    if variance is None:
        if algorithm == "stable":
            variance = api.mean((x - mean) * (x - mean), axis=axis, keepdims=True)
        elif algorithm == "fast":
            variance = api.maximum(api.mean(x * x, axis=axis, keepdims=True) - mean * mean,
                                   0.0)
        else:
            raise TensorTypeError(f"nn.standardize: unknown algorithm {algorithm!r}; "
                                  "expected 'fast' or 'stable'")
    return (x - mean) / api.sqrt(variance + epsilon)


def one_hot(x, num_classes: int, *, dtype=np.float64, axis: int = -1):
    """``x``'s integer labels as one-hot vectors along a new axis ``axis``: position ``i``
    is 1 where ``x == i``, so labels outside ``[0, num_classes)`` give all zeros (as in
    JAX). Written as a comparison with ``arange(num_classes)``, so traced labels work
    under ``jit`` and ``vmap`` without retracing; ``num_classes`` must be a Python int.

    >>> one_hot(np.array([1, 5]), 3, dtype=np.int64)
    array([[0, 1, 0],
           [0, 0, 0]])
    >>> one_hot(np.array([0, 1]), 2, axis=0)
    array([[1., 0.],
           [0., 1.]])
    """
    try:
        num_classes = operator.index(num_classes)
    except TypeError:
        raise TensorTypeError(f"nn.one_hot: num_classes must be a Python int (it is the size "
                              f"of the result), got {type(num_classes).__name__}") from None
    if not isinstance(axis, numbers.Integral):
        raise TensorTypeError(f"nn.one_hot: axis must be an int, got {type(axis).__name__}")
    x = _operand(x)
    ndim = len(shape_of(x)) + 1
    if not -ndim <= axis < ndim:
        raise TensorAxisError("nn.one_hot", axis, ndim)
    hot = api.equal(api.expand_dims(x, -1), np.arange(num_classes))
    if axis % ndim != ndim - 1:
        hot = moveaxis(hot, -1, axis)
    return api.astype(hot, dtype)
