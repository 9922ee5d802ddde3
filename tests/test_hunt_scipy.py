"""A hostile sweep of ``tnp.scipy.stats``, ``tnp.scipy.signal``, ``tnp.scipy.integrate`` and of
the same functions on PyTorch tensors: each test pins a bug found (and fixed) or a property
checked against SciPy, JAX or central differences.
"""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.errors import (
    TensorNotSupportedError,
    TensorShapeError,
    TensorTypeError,
)
from primitives.tensor.scipy import integrate, signal, stats
from tidu import TiduError

from tensor_helpers import numeric_grad

scipy_stats = pytest.importorskip("scipy.stats", reason="SciPy is the oracle")
scipy_signal = pytest.importorskip("scipy.signal", reason="SciPy is the oracle")

CONTINUOUS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
DISCRETE = ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf")


# --- stats: values at the edges -------------------------------------------------------------


@pytest.mark.parametrize("name, params", [
    ("gamma", (2.5,)), ("gamma", (0.5, 0.1, 2.0)), ("beta", (2.0, 3.0)),
    ("poisson", (3.0,)), ("bernoulli", (0.3,)), ("norm", ()), ("t", (3.0,))])
def test_a_nan_point_gives_nan_as_in_scipy(name, params):
    # was: gamma/beta/poisson/bernoulli gave a density 0 (log -inf) and a cdf 0 or 1 at NaN
    methods = DISCRETE if name in ("poisson", "bernoulli") else CONTINUOUS
    x = np.array([np.nan, 0.0, 1.0])
    for method in methods:
        with np.errstate(all="ignore"):
            got = getattr(getattr(stats, name), method)(x, *params)
            want = getattr(getattr(scipy_stats, name), method)(x, *params)
        assert np.isnan(got[0]), (name, method, got)
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


def test_float32_is_kept_by_every_continuous_method():
    # was: beta.cdf, sf, logcdf, logsf returned float64 for float32 data (a where of two
    # Python numbers); every other method keeps float32, as jax.scipy.stats does
    x = np.array([-0.2, 0.3, 0.6, 1.2], np.float32)
    one = np.float32(1.0)
    cases = {"norm": (), "t": (np.float32(3.0),), "gamma": (np.float32(2.0),),
             "beta": (np.float32(2.0), np.float32(3.0))}
    for name, params in cases.items():
        for method in CONTINUOUS:
            got = getattr(getattr(stats, name), method)(x, *params, 0, one)
            assert got.dtype == np.float32, (name, method)
            want = getattr(getattr(scipy_stats, name), method)(x.astype(float), *params)
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    g = tnp.grad(lambda s: tnp.sum(stats.beta.cdf(x / 2, 2.0, 3.0, 0, s)))(np.float32(1.5))
    assert np.asarray(g).dtype == np.float32


LOG_ZERO_CASES = [  # (log-probability of a parameter, the parameter): -inf by the support
    (lambda s: stats.gamma.logcdf(-1.0, 2.5, 0.0, s), 1.5),
    (lambda s: stats.beta.logcdf(-0.5, 2.0, 3.0, 0.0, s), 1.5),
    (lambda s: stats.beta.logsf(1.5, 2.0, 3.0, 0.0, s), 1.2),
    (lambda mu: stats.poisson.logcdf(-1.0, mu), 2.0),
    (lambda p: stats.bernoulli.logcdf(-1.0, p), 0.3),
    (lambda p: stats.bernoulli.logsf(1.0, p), 0.3),
    (lambda p: stats.bernoulli.logsf(2.0, p), 0.3),
]


@pytest.mark.parametrize("f, p", LOG_ZERO_CASES, ids=range(len(LOG_ZERO_CASES)))
def test_forward_mode_agrees_with_reverse_where_a_log_probability_is_minus_inf(f, p):
    # was: jvp / jacfwd gave NaN (log's tangent 0/0) where grad gave 0
    assert float(f(p)) == -np.inf
    assert float(tnp.grad(f)(p)) == 0.0
    assert float(tnp.jvp(f, (p,), (1.0,))[1]) == 0.0
    assert float(tnp.jacfwd(f)(p)) == 0.0


def test_jvp_and_vjp_are_adjoint_for_every_method_with_broadcast_parameters():
    rng = np.random.default_rng(0)
    x = np.array([[0.2], [0.7], [1.4]])
    cases = [("norm", m, (x, np.array([0.1, -0.3]), np.array([1.5, 0.7])), (0, 1, 2))
             for m in CONTINUOUS + ("ppf", "isf") if m not in ("ppf", "isf")]
    cases += [("norm", m, (x / 2, np.array([0.1, -0.3]), np.array([1.5, 0.7])), (0, 1, 2))
              for m in ("ppf", "isf")]
    cases += [("t", m, (x, np.array([2.5, 7.0]), 0.1, np.array([1.5, 0.7])),
               (0, 1, 2, 3) if m in ("logpdf", "pdf") else (0, 2, 3)) for m in CONTINUOUS]
    cases += [("gamma", m, (x + 0.3, np.array([0.7, 2.5]), np.array([-0.1, 0.2]), 1.5),
               (0, 1, 2, 3) if m in ("logpdf", "pdf") else (0, 2, 3)) for m in CONTINUOUS]
    cases += [("beta", m, (x / 2, np.array([0.7, 2.5]), 3.0, np.array([-0.1, 0.05]), 1.7),
               (0, 1, 2, 3, 4) if m in ("logpdf", "pdf") else (0, 3, 4)) for m in CONTINUOUS]
    cases += [("poisson", m, (np.array([[-1.0], [1.0], [4.0]]), np.array([0.7, 3.0])), (1,))
              for m in DISCRETE]
    cases += [("bernoulli", m, (np.array([[-1.0], [0.0], [1.0], [2.0]]), np.array([0.2, 0.6])),
               (1,)) for m in DISCRETE]
    for name, method, args, argnums in cases:
        fn = getattr(getattr(stats, name), method)

        def f(*diff, args=args, argnums=argnums, fn=fn):
            a = list(args)
            for i, v in zip(argnums, diff):
                a[i] = v
            return fn(*a)

        primals = tuple(np.asarray(args[i], float) for i in argnums)
        tangents = tuple(rng.normal(size=np.shape(p)) for p in primals)
        out, jt = tnp.jvp(f, primals, tangents)
        ct = rng.normal(size=np.shape(out))
        cts = tnp.vjp(f, *primals)[1](ct)
        assert np.all(np.isfinite(jt)), (name, method)
        lhs = np.sum(ct * jt)
        rhs = sum(np.sum(c * t) for c, t in zip(cts, tangents))
        np.testing.assert_allclose(lhs, rhs, rtol=1e-10, err_msg=f"{name}.{method}")


@pytest.mark.parametrize("name, method, args, i", [
    ("t", "logcdf", (np.array([-1.0, 0.3, 2.0]), 3.5, 0.5, 2.0), 2),
    ("t", "logsf", (np.array([-1.0, 0.3, 2.0]), 3.5, 0.5, 2.0), 3),
    ("gamma", "logcdf", (np.array([0.4, 1.3, 5.0]), 2.5, 0.1, 1.5), 0),
    ("gamma", "sf", (np.array([0.4, 1.3, 5.0]), 2.5, 0.1, 1.5), 3),
    ("beta", "logcdf", (np.array([0.1, 0.4, 0.8]), 2.5, 1.7, -0.1, 1.2), 0),
    ("beta", "logsf", (np.array([0.1, 0.4, 0.8]), 2.5, 1.7, -0.1, 1.2), 4),
    ("poisson", "sf", (np.array([0.0, 1.5, 4.0]), 2.5), 1),
    ("bernoulli", "logsf", (np.array([0.0, 0.5]), 0.3), 1),
])
def test_gradients_not_covered_before_match_central_differences(name, method, args, i):
    fn = getattr(getattr(stats, name), method)
    ref = getattr(getattr(scipy_stats, name), method)
    got = tnp.grad(lambda *a: tnp.sum(fn(*a)), argnums=i)(*args)

    def along(v):
        a = list(args)
        a[i] = v
        return np.sum(ref(*a))

    np.testing.assert_allclose(got, numeric_grad(along, args[i]), rtol=1e-6, atol=1e-9)


def test_misuse_of_stats_names_the_function():
    # was: NumPy's own ValueError / DTypePromotionError, not naming the function
    with pytest.raises(TensorShapeError, match="norm.logpdf.*broadcast"):
        stats.norm.logpdf(np.zeros(3), np.zeros(2))
    with pytest.raises(TensorShapeError, match="gamma.cdf"):
        tnp.grad(lambda s: tnp.sum(stats.gamma.cdf(np.ones(3), 2.0, np.zeros(2), s)))(1.0)
    with pytest.raises(TensorTypeError, match="norm.logpdf"):
        stats.norm.logpdf([1.0, "a"])
    with pytest.raises(TensorTypeError, match="complex"):
        stats.t.logpdf(1j, 3.0)


def test_edge_shapes_and_integer_data_are_scipys():
    for name, method, args in [("norm", "logpdf", (np.zeros(0),)),
                               ("gamma", "cdf", (np.zeros((0, 3)), 2.0)),
                               ("beta", "logcdf", (np.zeros((2, 0)), 2.0, np.ones((1, 1)))),
                               ("poisson", "logpmf", (np.array([0, 1, 3]), 2)),
                               ("norm", "logcdf", (np.array([-2, 0, 3]), 1, 2))]:
        got = getattr(getattr(stats, name), method)(*args)
        want = getattr(getattr(scipy_stats, name), method)(*args)
        assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-12)
    x = np.array([0.5, 1.5])
    for out in (stats.norm.logpdf(x), stats.gamma.pdf(x, 2.0),
                tnp.jit(lambda v: stats.t.cdf(v, 3.0))(x)):
        assert not np.shares_memory(out, x)


# --- stats and signal on PyTorch tensors ----------------------------------------------------


TORCH_STATS = [  # (name, method, arguments; defaults for loc and scale)
    ("t", "logpdf", (np.array([-0.5, 0.3, 2.0]), 3.5)),
    ("t", "cdf", (np.array([-0.5, 0.3, 2.0]), 3.5)),
    ("gamma", "logpdf", (np.array([0.5, 1.0, 3.0]), 2.5)),
    ("gamma", "logcdf", (np.array([-0.5, 1.0, 3.0]), 2.5)),
    ("beta", "logpdf", (np.array([0.2, 0.5, 0.9]), 2.5, 1.5)),
    ("beta", "cdf", (np.array([0.2, 0.5, 1.9]), 2.5, 1.5)),
    ("beta", "logsf", (np.array([0.2, 0.5, 0.9]), 2.5, 1.5)),
    ("poisson", "logcdf", (np.array([-1.0, 1.0, 3.0]), 2.5)),
    ("bernoulli", "logsf", (np.array([0.0, 1.0]), 0.3)),
    ("norm", "logsf", (np.array([-0.5, 0.3, 9.0]), 0.2)),
]


@pytest.mark.parametrize("name, method, args", TORCH_STATS,
                         ids=[f"{c[0]}.{c[1]}" for c in TORCH_STATS])
def test_torch_shape_parameters_with_default_loc_and_scale(name, method, args):
    # was: NotImplementedError "bitwise_and_cpu" for t, gamma, beta: a NumPy bool (of the
    # default scale) & a PyTorch bool tensor
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    fn = getattr(getattr(stats, name), method)
    diff = 1 if name in ("poisson", "bernoulli", "norm") else 0
    want = fn(*args)
    want_grad = tnp.grad(lambda *a: tnp.sum(fn(*a)), argnums=diff)(*args)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-4)):
        targs = [torch.tensor(np.asarray(a), dtype=dtype) for a in args]
        got = fn(*targs)
        assert isinstance(got, torch.Tensor) and got.dtype == dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
        g = tnp.grad(lambda *a: tnp.sum(fn(*a)), argnums=diff)(*targs)
        assert isinstance(g, torch.Tensor) and g.dtype == dtype
        np.testing.assert_allclose(g.numpy(), want_grad, rtol=tol, atol=tol)
        leaves = [tnp.tensor(a, requires_grad=(i == diff)) for i, a in enumerate(targs)]
        eager = tnp.sum(fn(*leaves)).backward().grad(leaves[diff])
        np.testing.assert_allclose(eager.numpy(), want_grad, rtol=tol, atol=tol)


def test_torch_signal_agrees_with_numpy_and_keeps_the_library():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    a, b = np.array([0.5, -1.0, 2.0, 0.3, 1.1]), np.array([1.0, -2.0, 0.5])
    for fname in ("convolve", "correlate"):
        fn = getattr(signal, fname)
        for mode in ("full", "same", "valid"):
            for method in ("direct", "fft"):
                want = getattr(scipy_signal, fname)(a, b, mode, method)
                got = fn(torch.tensor(a), torch.tensor(b), mode, method)
                assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
                np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)

                def loss(x, k, fn=fn, mode=mode, method=method):
                    return tnp.sum(fn(x, k, mode, method) ** 2)

                gn = tnp.grad(loss, argnums=(0, 1))(a, b)
                gt = tnp.grad(loss, argnums=(0, 1))(torch.tensor(a), torch.tensor(b))
                for x, y in zip(gt, gn):
                    assert isinstance(x, torch.Tensor)
                    np.testing.assert_allclose(x.numpy(), y, rtol=1e-12, atol=1e-12)
    # was: a NumPy array for the empty "same" result of PyTorch inputs
    empty = signal.convolve(torch.zeros((0, 2), dtype=torch.float32),
                            torch.ones((2, 2), dtype=torch.float32), "same")
    assert isinstance(empty, torch.Tensor) and empty.dtype == torch.float32
    assert tuple(empty.shape) == (0, 2)


# --- signal ---------------------------------------------------------------------------------


def test_signal_values_are_scipys_in_every_mode_method_and_dtype():
    rng = np.random.default_rng(1)
    shapes = [((1,), (3,)), ((2,), (5,)), ((4,), (4,)), ((7,), (2,)), ((3, 4), (2, 3)),
              ((2, 3), (3, 5)), ((1, 6), (3, 1))]
    for s1, s2 in shapes:
        for kind in ("f", "c", "i", "f32"):
            a, b = rng.normal(size=s1), rng.normal(size=s2)
            if kind == "c":
                a, b = a + 1j * rng.normal(size=s1), b - 1j * rng.normal(size=s2)
            elif kind == "i":
                a, b = np.round(3 * a).astype(np.int64), np.round(3 * b).astype(np.int64)
            elif kind == "f32":
                a, b = a.astype(np.float32), b.astype(np.float32)
            for fname in ("convolve", "correlate"):
                for mode in ("full", "same", "valid"):
                    if mode == "valid" and not (np.all(np.greater_equal(s1, s2))
                                                or np.all(np.less_equal(s1, s2))):
                        continue
                    for method in ("direct", "fft"):
                        want = getattr(scipy_signal, fname)(a, b, mode, method)
                        got = getattr(signal, fname)(a, b, mode, method)
                        assert got.shape == want.shape and got.dtype == want.dtype
                        tol = 1e-5 if kind == "f32" else 1e-10
                        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_signal_gradients_against_jax_and_the_dot_product_test():
    jax = pytest.importorskip("jax", reason="jax.scipy.signal is a reference")
    jsig = pytest.importorskip("jax.scipy.signal")
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(2, 3))
    for fname in ("convolve", "correlate"):
        for mode in ("full", "same", "valid"):
            w = rng.normal(size=getattr(scipy_signal, fname)(a, b, mode).shape)

            def ours(x, k, fname=fname, mode=mode, w=w):
                return tnp.sum(getattr(signal, fname)(x, k, mode) * w)

            def theirs(x, k, fname=fname, mode=mode, w=w):
                return (getattr(jsig, fname)(x, k, mode) * w).sum()

            with jax.enable_x64(True):
                want = jax.grad(theirs, argnums=(0, 1))(a, b)
            for got in (tnp.grad(ours, argnums=(0, 1))(a, b),
                        tnp.jit(tnp.grad(ours, argnums=(0, 1)))(a, b)):
                for g, r in zip(got, want):
                    np.testing.assert_allclose(g, np.asarray(r), rtol=1e-10, atol=1e-12)

            def f(x, k, fname=fname, mode=mode):
                return getattr(signal, fname)(x, k, mode, "fft")

            ta, tb = rng.normal(size=a.shape), rng.normal(size=b.shape)
            out, jt = tnp.jvp(f, (a, b), (ta, tb))
            ct = rng.normal(size=out.shape)
            ca, cb = tnp.vjp(f, a, b)[1](ct)
            np.testing.assert_allclose(np.sum(ct * jt), np.sum(ca * ta) + np.sum(cb * tb),
                                       rtol=1e-10)


def test_signal_under_vmap_and_misuse():
    A, B = np.arange(12.0).reshape(3, 4), np.array([[1.0, -1.0], [0.5, 2.0], [0.0, 1.0]])
    for fname in ("convolve", "correlate"):
        fn = getattr(signal, fname)
        got = tnp.vmap(lambda x, k, fn=fn: fn(x, k, "same"), in_axes=(1, 0))(A.T, B)
        want = np.stack([getattr(scipy_signal, fname)(x, k, "same") for x, k in zip(A, B)])
        np.testing.assert_allclose(got, want, rtol=1e-12)
    # was: a UFuncTypeError from NumPy
    with pytest.raises(TensorTypeError, match="signal.convolve"):
        signal.convolve(np.array(["a", "b"]), np.array(["c"]))
    with pytest.raises(TensorShapeError, match="signal.correlate"):
        signal.correlate(np.ones(3), np.ones((3, 1)))
    out = signal.convolve(np.array([1.0, 2.0]), np.array([1.0]))
    assert not np.shares_memory(out, np.array([1.0, 2.0]))


# --- integrate ------------------------------------------------------------------------------


def _decay(y, t, k):
    return -k * y


def test_odeint_takes_scipys_arguments_in_scipys_positions():
    scipy_integrate = pytest.importorskip("scipy.integrate", reason="SciPy is the oracle")
    t = np.array([0.0, 0.5, 1.0])
    want = scipy_integrate.odeint(_decay, np.array([1.0, 2.0]), t, (2.0,), rtol=1e-10,
                                  atol=1e-10)
    # was: the fifth positional (SciPy's Dfun) was rtol; rtol=None a TypeError
    got = integrate.odeint(_decay, np.array([1.0, 2.0]), t, (2.0,), None)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    got = integrate.odeint(_decay, np.array([1.0, 2.0]), t, (2.0,), rtol=None, atol=None,
                           mxstep=0)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # was: a list y0 a pytree of numbers (a TypeError), a number a 0-d state
    got = integrate.odeint(_decay, [1.0, 2.0], t, (2.0,))
    assert got.shape == (3, 2)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert integrate.odeint(_decay, 1.0, t, (2.0,)).shape == (3, 1)
    # was: tfirst a TypeError
    got = integrate.odeint(lambda s, y, k: -k * y, np.array([1.0, 2.0]), t, (2.0,),
                           tfirst=True)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    g = tnp.grad(lambda k: tnp.sum(integrate.odeint(lambda s, y, k: -k * y, [1.0], t, (k,),
                                                    tfirst=True)))(2.0)
    np.testing.assert_allclose(g, -0.5 * np.exp(-1.0) - np.exp(-2.0), rtol=1e-6)


def test_odeint_misuse_names_the_function():
    t = np.array([0.0, 1.0])
    # was: TypeError "'float' object is not iterable"
    with pytest.raises(TensorTypeError, match="scipy.integrate.odeint.*tuple"):
        integrate.odeint(_decay, np.array([1.0]), t, 2.0)
    with pytest.raises(TensorNotSupportedError, match="full_output"):
        integrate.odeint(_decay, np.array([1.0]), t, (2.0,), full_output=True)
    with pytest.raises(TiduError):
        integrate.odeint(_decay, np.array([1.0]), t, (2.0,), tcrit=np.array([0.5]))


# --- tnp's own functions -------------------------------------------------------


def test_a_list_of_a_number_and_a_string_is_a_tidu_error_everywhere():
    with pytest.raises(TiduError, match="exp: expected numbers"):
        tnp.exp([1.0, "a"])
    with pytest.raises(TiduError, match="sum: expected numbers"):
        tnp.sum(["a", "b"])
    assert tnp.array(["a", "b"]).dtype.kind == "U"      # an array of strings NumPy makes
    np.testing.assert_array_equal(tnp.exp([0.0, 1]), np.exp([0.0, 1]))
