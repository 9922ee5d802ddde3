"""``primitives.tensor.scipy.special``: SciPy's special functions, differentiable.

- values against SciPy's (``rtol=1e-12`` in float64) on sweeps that include the tails
  (``log_ndtr`` at -40, ``expit`` at ±800, ``erfinv`` near ±1, ``xlogy`` at ``x = 0``),
  dtypes as SciPy's (``float32`` stays, integers become ``float64``);
- every primitive through ``tidu.testing.check_primitive`` to second order: JVP against
  finite differences, the dot-product test of its transpose, and its batch rule;
- derivatives against central differences and against JAX's ``jax.scipy.special`` (first
  and second order) where JAX has the function; the tails against exact values;
- every function through ``grad``, ``jit(grad)``, ``vmap(grad)``, ``hessian`` and the eager
  ``Tensor.backward``; SciPy's own ufuncs dispatching on tensors and traced values;
- no silent wrong gradient: differentiating ``polygamma``'s order or a shape parameter of
  ``gammainc``/``betainc``/``stdtr`` raises a ``TiduError`` naming it;
- PyTorch and Dask arrays (skipped without them).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from tensor_helpers import numeric_grad

import primitives.tensor as tnp
from primitives.tensor.errors import TensorShapeError, TensorTypeError
from primitives.tensor.scipy import special
from primitives.tensor.scipy._ops import Special
from tidu import ADRuleError, TiduError
from tidu.testing import check_batch, check_primitive

scipy_special = pytest.importorskip("scipy.special")

# --- points: (name, arguments) -> sweeps inside each function's domain ------------------------

WIDE = np.array([-7.5, -2.5, -0.3, 0.1, 0.7, 1.0, 2.5, 6.0, 30.0])
POSITIVE = np.array([1e-3, 0.1, 0.5, 1.0, 2.5, 7.0, 40.0, 170.0])
UNIT = np.array([1e-12, 1e-3, 0.1, 0.5, 0.9, 0.999, 1 - 1e-12])
SYMMETRIC_UNIT = np.array([-1 + 1e-12, -0.999, -0.5, 0.0, 0.3, 0.9, 1 - 1e-12])

UNARY = {  # name -> values where it is checked against SciPy
    "gammaln": np.concatenate([POSITIVE, [-0.5, -2.5, 1e5]]),
    "gamma": np.array([-2.5, -0.5, 0.1, 1.0, 4.5, 30.0, 170.5]),
    "digamma": np.concatenate([POSITIVE, [-0.5, -2.5]]),
    "psi": POSITIVE,
    "erf": WIDE,
    "erfc": np.concatenate([WIDE, [26.0]]),
    "erfcx": np.concatenate([WIDE, [1e3]]),
    "erfinv": SYMMETRIC_UNIT,
    "ndtr": np.concatenate([WIDE, [-38.0]]),
    "ndtri": UNIT,
    "log_ndtr": np.concatenate([WIDE, [-40.0, -1e5, 40.0]]),
    "expit": np.concatenate([WIDE, [-800.0, -40.0, 40.0, 800.0]]),
    "logit": UNIT,
    "i0": WIDE, "i1": WIDE, "i0e": np.concatenate([WIDE, [0.0, 1e3]]),
    "i1e": np.concatenate([WIDE, [0.0, 1e3]]),
}

# where the derivatives are checked against finite differences (smooth, moderate values)
SMOOTH = {
    "gammaln": np.array([0.3, 1.5, 4.0, -0.5]), "gamma": np.array([0.3, 1.5, 3.0, -0.5]),
    "digamma": np.array([0.3, 1.5, 4.0]), "psi": np.array([0.6, 2.0]),
    "erf": np.array([-1.5, 0.2, 1.1]), "erfc": np.array([-1.5, 0.2, 2.1]),
    "erfcx": np.array([-1.0, 0.5, 3.0]), "erfinv": np.array([-0.9, 0.1, 0.8]),
    "ndtr": np.array([-2.0, 0.3, 1.5]), "ndtri": np.array([0.05, 0.5, 0.8]),
    "log_ndtr": np.array([-6.0, -1.0, 0.5, 3.0]), "expit": np.array([-3.0, 0.2, 4.0]),
    "logit": np.array([0.05, 0.4, 0.9]), "i0": np.array([-1.5, 0.3, 2.0]),
    "i1": np.array([-1.5, 0.3, 2.0]), "i0e": np.array([-1.5, 0.3, 2.0]),
    "i1e": np.array([-1.5, 0.3, 2.0]),
}

BINARY = {  # name -> (first, second): broadcast against each other
    "betaln": (POSITIVE[:, None], np.array([0.5, 3.0, 1e4])),
    "xlogy": (np.array([0.0, -2.0, 0.5, 3.0])[:, None], np.array([0.0, 1e-300, 0.5, 2.0])),
    "xlog1py": (np.array([0.0, -2.0, 0.5])[:, None], np.array([-1.0, -0.5, 1e-20, 2.0])),
    "gammainc": (np.array([0.5, 1.0, 4.0])[:, None], np.array([0.0, 0.1, 1.0, 5.0, 50.0])),
    "gammaincc": (np.array([0.5, 1.0, 4.0])[:, None], np.array([0.0, 0.1, 1.0, 5.0, 50.0])),
    "stdtr": (np.array([1.0, 3.5, 30.0, np.inf])[:, None], np.array([-20.0, -1.0, 0.0, 2.5])),
    "pdtr": (np.array([-1.0, 0.0, 1.5, 4.0, 30.0])[:, None], np.array([0.0, 0.5, 3.0, 40.0])),
    "pdtrc": (np.array([-1.0, 0.0, 1.5, 4.0, 30.0])[:, None], np.array([0.0, 0.5, 3.0, 40.0])),
}


def scipy_fn(name: str):
    return getattr(scipy_special, name)


def assert_close(got, want, rtol=1e-12, atol=0.0):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


# --- values ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_are_scipys(name):
    x = UNARY[name]
    with np.errstate(all="ignore"):
        assert_close(getattr(special, name)(x), scipy_fn(name)(x))
    # float32 stays float32; integers compute in SciPy's dtype
    x32 = SMOOTH[name].astype(np.float32)
    assert getattr(special, name)(x32).dtype == scipy_fn(name)(x32).dtype == np.float32
    ints = np.array([0, 1], dtype=np.int8)
    with np.errstate(all="ignore"):
        assert getattr(special, name)(ints).dtype == scipy_fn(name)(ints).dtype


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_values_are_scipys(name):
    a, b = BINARY[name]
    assert_close(getattr(special, name)(a, b), scipy_fn(name)(a, b))


def test_more_values():
    x = np.array([0.2, 1.0, 3.5, 12.0])
    for n in range(5):
        assert_close(special.polygamma(n, x), scipy_special.polygamma(n, x))
    orders = np.array([[0], [1], [3]])
    assert_close(special.polygamma(orders, x), scipy_special.polygamma(orders, x))
    a, b = np.array([0.5, 2.0])[:, None, None], np.array([1.0, 3.0])[:, None]
    z = np.array([0.0, 0.2, 0.9, 1.0])
    assert_close(special.betainc(a, b, z), scipy_special.betainc(a, b, z))
    for d in (1, 2, 4):
        assert_close(special.multigammaln(np.array([2.0, 7.5]), d),
                     scipy_special.multigammaln(np.array([2.0, 7.5]), d))
    with pytest.raises(ValueError, match="a > 0.5"):
        special.multigammaln(1.0, 4)
    assert special.psi is special.digamma


LSE_CASES = [
    dict(a=np.array([[1.0, 2.0, 3.0], [1000.0, -np.inf, 999.0]])),
    dict(a=np.array([[1.0, 2.0, 3.0], [1000.0, -np.inf, 999.0]]), axis=1),
    dict(a=np.array([[1.0, 2.0, 3.0], [4.0, 0.5, -1.0]]), axis=0, keepdims=True),
    dict(a=np.array([[1.0, 2.0, 3.0], [4.0, 0.5, -1.0]]), axis=(0, 1)),
    dict(a=np.array([1.0, 2.0, 3.0]), b=np.array([1.0, -0.5, 0.25])),
    dict(a=np.array([[1.0, 2.0], [3.0, 4.0]]), b=np.array([2.0, 0.5]), axis=-1),
    dict(a=np.array([1.0, np.inf, 3.0]), b=np.array([1.0, 0.0, 2.0])),     # weight 0: ignored
    dict(a=np.array([1.0, 2.0]), b=np.array([1.0, -1.0]), return_sign=True),
    dict(a=np.array([[1.0, 2.0], [2.0, 1.0]]), b=np.array([[1.0, -1.0], [1.0, -1.0]]),
         axis=1, return_sign=True),
    dict(a=np.array([1.0, 2.0]), b=np.array([1.0, -1.0])),                 # negative: NaN
    dict(a=2.5),
    dict(a=np.zeros((2, 0)), axis=1),
]


@pytest.mark.parametrize("case", LSE_CASES, ids=range(len(LSE_CASES)))
def test_logsumexp_is_scipys(case):
    with np.errstate(all="ignore"):
        got, want = special.logsumexp(**case), scipy_special.logsumexp(**case)
    if case.get("return_sign"):
        assert_close(got[0], want[0])
        assert_close(got[1], want[1])
    else:
        assert np.shape(got) == np.shape(want)
        assert_close(got, want)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_softmax_and_log_softmax_are_scipys(axis):
    x = np.array([[1.0, 0.5, 1000.0], [-np.inf, 3.0, 7.0]])
    with np.errstate(all="ignore"):
        assert_close(special.softmax(x, axis), scipy_special.softmax(x, axis), atol=1e-300)
        assert_close(special.log_softmax(x, axis), scipy_special.log_softmax(x, axis))


# --- rules: every primitive, to second order --------------------------------------------------

PRIMITIVES = {  # op -> its operands (all differentiable)
    Special("gammaln"): [np.array([[0.4, 2.5, 6.0]])],
    Special("gamma"): [np.array([0.4, 2.5, -0.5])],
    Special("polygamma", 0): [np.array([0.4, 2.5, 6.0])],
    Special("polygamma", 2): [np.array([[0.4], [2.5]])],
    Special("erf"): [np.array([-1.2, 0.3, 1.9])],
    Special("erfc"): [np.array([-1.2, 0.3, 1.9])],
    Special("erfcx"): [np.array([-1.2, 0.3, 1.9])],
    Special("erfinv"): [np.array([-0.7, 0.1, 0.6])],
    Special("ndtr"): [np.array([-1.2, 0.3, 1.9])],
    Special("ndtri"): [np.array([0.1, 0.5, 0.8])],
    Special("log_ndtr"): [np.array([-5.0, 0.3, 1.9])],
    Special("expit"): [np.array([-3.0, 0.3, 1.9])],
    Special("logit"): [np.array([0.1, 0.4, 0.8])],
    Special("iv", 0): [np.array([-1.2, 0.3, 1.9])],
    Special("iv", 1): [np.array([-1.2, 0.3, 1.9])],
    Special("iv", 3): [np.array([-1.2, 0.3, 1.9])],
    Special("ive", 0): [np.array([-1.2, 0.3, 1.9])],
    Special("ive", 1): [np.array([-1.2, 0.3, 1.9])],
    Special("betaln"): [np.array([0.5, 2.0, 7.0]), np.array([1.5, 0.3, 4.0])],
    Special("xlogy"): [np.array([-0.5, 1.2, 3.0]), np.array([0.5, 2.0, 0.7])],
    Special("xlog1py"): [np.array([-0.5, 1.2, 3.0]), np.array([-0.5, 2.0, 0.7])],
    Special("xdivy"): [np.array([-0.5, 1.2, 3.0]), np.array([0.5, -2.0, 0.7])],
}


@pytest.mark.parametrize("op", list(PRIMITIVES), ids=repr)
def test_rules_to_second_order(op):
    with np.errstate(all="ignore"):
        report = check_primitive(op, *PRIMITIVES[op], order=2, rng=0)
    assert report.batch_comparisons > 0


@pytest.mark.parametrize("op, inputs", [
    (Special("gammainc"), [np.array([0.5, 2.0]), np.array([0.3, 4.0])]),
    (Special("gammaincc"), [np.array([0.5, 2.0]), np.array([0.3, 4.0])]),
    (Special("stdtr"), [np.array([1.5, 8.0]), np.array([-0.3, 2.0])]),
    (Special("pdtr"), [np.array([0.0, 3.5]), np.array([0.3, 2.0])]),
    (Special("betainc"), [np.array([0.5, 2.0]), np.array([1.5, 3.0]), np.array([0.3, 0.9])]),
], ids=repr)
def test_batch_rules_of_functions_with_a_shape_parameter(op, inputs):
    assert check_batch(op, *inputs, order=2, rng=0).batch_comparisons > 0


# --- derivatives ------------------------------------------------------------------------------


def _total(fn):
    return lambda v: tnp.sum(fn(v))


@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_unary_gradients_against_central_differences(name):
    fn = getattr(special, name)
    x = SMOOTH[name]
    want = numeric_grad(lambda v: np.sum(scipy_fn(name)(v)), x, eps=1e-6)
    assert_close(tnp.grad(_total(fn))(x), want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name, point, argnums", [
    ("betaln", (np.array([0.5, 3.0]), np.array([2.0, 0.7])), (0, 1)),
    ("xlogy", (np.array([-1.5, 2.0]), np.array([0.4, 3.0])), (0, 1)),
    ("xlog1py", (np.array([-1.5, 2.0]), np.array([-0.4, 3.0])), (0, 1)),
    ("gammainc", (np.array([0.5, 3.0]), np.array([0.4, 2.0])), (1,)),
    ("gammaincc", (np.array([0.5, 3.0]), np.array([0.4, 2.0])), (1,)),
    ("stdtr", (np.array([1.0, 7.5]), np.array([-2.0, 0.4])), (1,)),
    ("pdtr", (np.array([0.0, 2.5, 4.0]), np.array([0.4, 2.0, 7.0])), (1,)),
    ("pdtrc", (np.array([0.0, 2.5, 4.0]), np.array([0.4, 2.0, 7.0])), (1,)),
    ("betainc", (np.array([0.5, 3.0]), np.array([2.0, 0.7]), np.array([0.3, 0.6])), (2,)),
])
def test_gradients_of_several_arguments_against_central_differences(name, point, argnums):
    fn = getattr(special, name)
    grads = tnp.grad(lambda *a: tnp.sum(fn(*a)), argnums=argnums)(*point)
    for i, got in zip(argnums, grads):
        def along(v, i=i):
            args = list(point)
            args[i] = v
            return np.sum(scipy_fn(name)(*args))
        assert_close(got, numeric_grad(along, point[i]), rtol=1e-6, atol=1e-9)


def test_polygamma_derivatives_raise_the_order():
    x = np.array([0.3, 1.5, 6.0])
    for n in range(4):
        f = _total(lambda v, n=n: special.polygamma(n, v))
        assert_close(tnp.grad(f)(x), scipy_special.polygamma(n + 1, x), rtol=1e-12)
        assert_close(np.diag(tnp.hessian(f)(x)), scipy_special.polygamma(n + 2, x), rtol=1e-12)


def test_tails_and_edges():
    d = tnp.grad(special.log_ndtr)
    # pdf/cdf in the lower tail, against mpmath's values (JAX's rule loses digits there)
    assert_close(d(-40.0), 40.02496884720726372, rtol=1e-14)
    assert_close(d(-1e5), 100000.00000999999, rtol=1e-14)
    assert float(d(40.0)) == 0.0 and float(d(1e3)) == 0.0
    assert_close(tnp.grad(d)(-40.0), -0.99937733162156, rtol=1e-9)
    # expit: no NaN, and the tiny slopes in the tails (not y (1 - y), which is 0)
    e = tnp.grad(special.expit)
    assert [float(e(v)) for v in (-800.0, 800.0)] == [0.0, 0.0]
    assert_close(e(40.0), math.exp(-40.0), rtol=1e-12)
    assert_close(e(-40.0), math.exp(-40.0), rtol=1e-12)
    assert_close(tnp.grad(special.logit)(1e-12), 1 / (1e-12 * (1 - 1e-12)), rtol=1e-12)
    # erfinv near ±1: sqrt(pi)/2 exp(erfinv(x)**2)
    for x in (1 - 1e-12, -1 + 1e-12):
        want = math.sqrt(math.pi) / 2 * math.exp(scipy_special.erfinv(x) ** 2)
        assert_close(tnp.grad(special.erfinv)(x), want, rtol=1e-12)
    assert_close(tnp.grad(special.ndtri)(1e-12), math.sqrt(2 * math.pi)
                 * math.exp(scipy_special.ndtri(1e-12) ** 2 / 2), rtol=1e-12)
    # xlogy at x = 0: 0-safe in y (no NaN, even at y = 0); log(y) in x, x being linear
    gx, gy = tnp.grad(special.xlogy, argnums=(0, 1))(0.0, 2.0)
    assert_close(gx, math.log(2.0))
    assert float(gy) == 0.0
    assert float(tnp.grad(special.xlogy, argnums=1)(0.0, 0.0)) == 0.0
    assert float(tnp.grad(special.xlog1py, argnums=1)(0.0, -1.0)) == 0.0
    entropy = tnp.grad(lambda p: -tnp.sum(special.xlogy(p, p)))
    with np.errstate(divide="ignore"):
        g = entropy(np.array([0.0, 0.5]))
    assert g[0] == np.inf and np.isclose(g[1], math.log(2) - 1)      # -(log p + 1)
    # Bessel functions: i1'(0) = 1/2; i0e's kink at 0 has slope 0
    assert float(tnp.grad(special.i1)(0.0)) == 0.5
    assert float(tnp.grad(special.i1e)(0.0)) == 0.5
    assert float(tnp.grad(special.i0e)(0.0)) == 0.0
    assert float(tnp.grad(tnp.grad(special.i0))(0.0)) == 0.5
    assert_close(tnp.grad(special.i1)(1e-8), 0.5, rtol=1e-12)
    # logsumexp: the softmax of large values, weight 0 dropping an infinite term
    assert_close(tnp.grad(special.logsumexp)(np.array([1000.0, 1000.0])), [0.5, 0.5])
    g = tnp.grad(lambda a: special.logsumexp(a, b=np.array([1.0, 0.0])))(np.array([0.0, np.inf]))
    assert_close(g, [1.0, 0.0])


# --- against JAX --------------------------------------------------------------------------


JAX_UNARY = ["gammaln", "gamma", "digamma", "erf", "erfc", "erfinv", "ndtr", "ndtri",
             "log_ndtr", "expit", "logit", "i0", "i1", "i0e", "i1e"]
JAX_SECOND = ["gammaln", "digamma", "erf", "erfinv", "log_ndtr", "expit", "logit", "i1"]
# (second order of the others: check_primitive above; JAX compiles them slowly)
JAX_SEVERAL = {  # name -> (point, argnums)
    "betaln": ((np.array([0.5, 3.0]), np.array([2.0, 0.7])), (0, 1)),
    "xlogy": ((np.array([-1.5, 2.0, 0.0]), np.array([0.4, 3.0, 2.0])), (0, 1)),
    "xlog1py": ((np.array([-1.5, 2.0, 0.0]), np.array([-0.4, 3.0, 2.0])), (0, 1)),
    "gammainc": ((np.array([0.5, 3.0]), np.array([0.4, 2.0])), (1,)),
    "gammaincc": ((np.array([0.5, 3.0]), np.array([0.4, 2.0])), (1,)),
    "betainc": ((np.array([0.5, 3.0]), np.array([2.0, 0.7]), np.array([0.3, 0.6])), (2,)),
}
LSE_X = np.array([[0.5, -1.0, 2.0], [3.0, 0.1, -0.7]])
LSE_KWARGS = [{}, {"axis": 1}, {"axis": 0, "b": np.array([[1.0], [0.5]])},
              {"b": np.array([1.0, 0.5, 2.0])}]
SOFTMAX_W = np.array([0.3, -1.2, 2.0])


def _jax_references():
    """Every JAX derivative these tests compare with, from one jitted function (one
    compilation: JAX compiles slowly, function by function)."""
    jax = pytest.importorskip("jax", reason="jax.scipy.special is the reference")
    jsp = pytest.importorskip("jax.scipy.special")

    def references(smooth, several, lse_x, lse_weights, w):
        out = {}
        for name in JAX_UNARY:
            fn = getattr(jsp, name)
            out[name] = (jax.vmap(jax.grad(fn))(smooth[name]),
                         jax.vmap(jax.grad(jax.grad(fn)))(smooth[name])
                         if name in JAX_SECOND else None)
        for name, point in several.items():
            fn = getattr(jsp, name)
            out[name] = jax.grad(lambda *a, fn=fn: fn(*a).sum(),
                                 argnums=JAX_SEVERAL[name][1])(*point)
        out["logsumexp"] = [
            jax.grad(lambda a, k=k, b=b: jsp.logsumexp(a, axis=k.get("axis"), b=b).sum())(lse_x)
            for k, b in zip(LSE_KWARGS, lse_weights)]
        out["softmax"] = jax.grad(lambda a: (jsp.log_softmax(a, axis=1) @ w).sum()
                                  + (jsp.softmax(a, axis=1) @ w).sum())(lse_x)
        out["multigammaln"] = jax.grad(lambda a: jsp.multigammaln(a, 3))(lse_x[0, 0] + 4.0)
        return out

    with jax.enable_x64(True):
        several = {name: point for name, (point, _) in JAX_SEVERAL.items()}
        out = jax.jit(references)({n: SMOOTH[n] for n in JAX_UNARY}, several, LSE_X,
                                  [k.get("b") for k in LSE_KWARGS], SOFTMAX_W)
        return jax.tree_util.tree_map(np.asarray, out)


def test_first_and_second_derivatives_against_jax():
    want = _jax_references()
    for name in JAX_UNARY:
        x = SMOOTH[name]
        f = _total(getattr(special, name))
        assert_close(tnp.grad(f)(x), want[name][0], rtol=1e-11, atol=1e-14)
        if name in JAX_SECOND:
            assert_close(np.diag(tnp.hessian(f)(x)), want[name][1], rtol=1e-9, atol=1e-12)
    for name, (point, argnums) in JAX_SEVERAL.items():
        fn = getattr(special, name)
        got = tnp.grad(lambda *a, fn=fn: tnp.sum(fn(*a)), argnums=argnums)(*point)
        for g, w in zip(got, want[name]):
            assert_close(g, w, rtol=1e-10, atol=1e-14)
    for kwargs, w in zip(LSE_KWARGS, want["logsumexp"]):
        assert_close(tnp.grad(lambda a, k=kwargs: tnp.sum(special.logsumexp(a, **k)))(LSE_X), w)
    got = tnp.grad(lambda a: tnp.sum(special.log_softmax(a, axis=1) @ SOFTMAX_W)
                   + tnp.sum(special.softmax(a, axis=1) @ SOFTMAX_W))(LSE_X)
    assert_close(got, want["softmax"])
    assert_close(tnp.grad(lambda a: special.multigammaln(a, 3))(4.5), want["multigammaln"])


# --- transforms and the eager Tensor ------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SMOOTH))
def test_every_transform(name):
    fn = getattr(special, name)
    x = SMOOTH[name]
    g = tnp.grad(_total(fn))(x)
    assert_close(tnp.jit(tnp.grad(_total(fn)))(x), g, rtol=1e-15)
    assert_close(tnp.vmap(tnp.grad(fn))(x), g, rtol=1e-15)
    assert_close(tnp.vmap(fn)(x), fn(x), rtol=1e-15)
    d2 = np.diag(tnp.hessian(_total(fn))(x))
    assert_close(tnp.vmap(tnp.grad(tnp.grad(fn)))(x), d2, rtol=1e-13)
    assert_close(d2, numeric_grad(lambda v: np.sum(tnp.grad(_total(fn))(v)), x, eps=1e-5),
                 rtol=1e-5, atol=1e-7)
    _, tangent = tnp.jvp(fn, (x,), (np.ones_like(x),))
    assert_close(tangent, g, rtol=1e-15)
    t = tnp.tensor(x, requires_grad=True)
    assert_close(tnp.sum(fn(t)).backward().grad(t), g, rtol=1e-15)


@pytest.mark.filterwarnings("ignore:divide by zero")     # d xlogy(x, 0) / dx = log(0)
def test_transforms_of_binary_functions_and_reductions():
    a, y = np.array([0.5, 2.0, 0.0]), np.array([0.4, 3.0, 0.0])

    def f(a, y):
        return tnp.sum(special.xlogy(a, y) + special.betaln(a + 1, y + 1))

    g = tnp.grad(f, argnums=(0, 1))(a, y)
    for got in (tnp.jit(tnp.grad(f, argnums=(0, 1)))(a, y),
                tnp.vmap(tnp.grad(lambda a, y: f(a[None], y[None]), argnums=(0, 1)))(a, y)):
        for u, v in zip(got, g):
            assert_close(u, v, rtol=1e-15)
    ta, ty = tnp.tensor(a, requires_grad=True), tnp.tensor(y, requires_grad=True)
    grads = f(ta, ty).backward()
    assert_close(grads.grad(ta), g[0], rtol=1e-15)
    assert_close(grads.grad(ty), g[1], rtol=1e-15)
    # logsumexp's Hessian: diag(softmax) - softmax softmax^T
    x = np.array([0.5, -1.0, 2.0])
    s = scipy_special.softmax(x)
    assert_close(tnp.hessian(special.logsumexp)(x), np.diag(s) - np.outer(s, s), rtol=1e-13)
    assert_close(tnp.jit(tnp.hessian(special.logsumexp))(x), np.diag(s) - np.outer(s, s),
                 rtol=1e-13)
    per_row = tnp.vmap(tnp.grad(special.logsumexp))(np.stack([x, 2 * x]))
    assert_close(per_row, scipy_special.softmax(np.stack([x, 2 * x]), axis=1), rtol=1e-14)
    # higher order through the eager Tensor
    t = tnp.tensor(np.array([0.3, 1.2]), requires_grad=True)
    (d1,) = tnp.autograd.grad(tnp.sum(special.gammaln(t)), [t], create_graph=True)
    assert_close(tnp.sum(d1).backward().grad(t), scipy_special.polygamma(1, [0.3, 1.2]))


def test_scipy_ufuncs_dispatch_on_tensors_and_traced_values():
    x = np.array([0.4, 1.5, 3.0])
    t = tnp.tensor(x, requires_grad=True)
    assert_close(tnp.sum(scipy_special.gammaln(t)).backward().grad(t), scipy_special.psi(x))
    for name in ("erf", "expit", "log_ndtr", "i1", "digamma"):
        got = tnp.grad(lambda v, name=name: tnp.sum(scipy_fn(name)(v)))(x)
        assert_close(got, tnp.grad(_total(getattr(special, name)))(x), rtol=1e-15)
    got = tnp.jit(tnp.grad(lambda v: tnp.sum(scipy_special.xlogy(v, 2.0 * v))))(x)
    assert_close(got, np.log(2 * x) + 1, rtol=1e-14)
    assert_close(tnp.vmap(scipy_special.ndtri)(x / 4), scipy_special.ndtri(x / 4))


# --- errors: never a silent wrong gradient ----------------------------------------------------


def test_arguments_without_a_derivative_raise():
    with pytest.raises(TiduError, match="order n"):
        tnp.grad(lambda n: special.polygamma(n, 2.0))(1.0)
    with pytest.raises(TiduError, match="order n"):
        special.polygamma(tnp.tensor(1.0, requires_grad=True), 2.0)
    for name, args, argnum, what in [("gammainc", (2.0, 1.0), 0, "shape a"),
                                     ("gammaincc", (2.0, 1.0), 0, "shape a"),
                                     ("stdtr", (3.0, 1.0), 0, "degrees of freedom df"),
                                     ("betainc", (2.0, 3.0, 0.5), 1, "shape b"),
                                     ("pdtr", (2.0, 3.0), 0, "count k")]:
        fn = getattr(special, name)
        with pytest.raises(ADRuleError, match=f"{name}.*{what}"):
            tnp.grad(fn, argnums=argnum)(*args)
        with pytest.raises(ADRuleError, match=what):
            t = tnp.tensor(args[argnum], requires_grad=True)
            fn(*args[:argnum], t, *args[argnum + 1:]).backward()
        # differentiating in x alone works, also with the shape parameter traced by jit
        x_arg = len(args) - 1
        assert np.isfinite(tnp.jit(tnp.grad(fn, argnums=x_arg))(*args))


def test_bad_input_is_refused_clearly():
    with pytest.raises(TensorTypeError, match="complex"):
        special.gammaln(np.array([1.0 + 1j]))
    with pytest.raises(TensorTypeError, match="complex"):
        special.logsumexp(np.array([1.0 + 1j]))
    with pytest.raises(TensorShapeError, match="non-negative integer"):
        special.polygamma(1.5, 2.0)
    with pytest.raises(TensorShapeError, match="non-negative integer"):
        special.polygamma(-1, 2.0)
    with pytest.raises(TensorShapeError, match="positive integer"):
        special.multigammaln(3.0, 1.5)
    with pytest.raises(TiduError, match="order n"):
        tnp.jit(lambda n, x: special.polygamma(n, x))(1, 2.0)
    # a static order works under jit
    assert_close(tnp.jit(lambda x, n: special.polygamma(n, x), static_argnums=1)(2.0, 1),
                 scipy_special.polygamma(1, 2.0))


# --- other array libraries ----------------------------------------------------------------------


def test_pytorch_tensors():
    torch = pytest.importorskip("torch")
    x = np.array([0.3, 1.7, 2.5])
    tx = torch.tensor(x)
    for name in ("gammaln", "i1", "gamma"):          # torch.special; SciPy on the host for gamma
        fn = getattr(special, name)
        out = fn(tx)
        assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
        assert_close(out.numpy(), scipy_fn(name)(x))
        g = tnp.grad(_total(fn))(tx)                    # i1's derivative uses iv(2, .): host
        assert isinstance(g, torch.Tensor)
        assert_close(g.numpy(), tnp.grad(_total(fn))(x), rtol=1e-13)
    out = special.betainc(*(torch.tensor(v, dtype=torch.float64) for v in (2.0, 3.0, [0.2, 0.5])))
    assert_close(out.numpy(), scipy_special.betainc(2.0, 3.0, [0.2, 0.5]))


def test_dask_arrays_stay_lazy():
    da = pytest.importorskip("dask.array")
    x = np.array([0.3, 1.7, 2.5, 6.0])
    dx = da.from_array(x, chunks=2)
    out = special.log_ndtr(-dx)
    assert isinstance(out, da.Array)
    assert_close(out.compute(), scipy_special.log_ndtr(-x))
    g = tnp.grad(lambda v: tnp.sum(special.polygamma(1, v)))(dx)
    assert isinstance(g, da.Array)
    assert_close(g.compute(), scipy_special.polygamma(2, x), rtol=1e-13)
