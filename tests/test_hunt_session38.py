"""Hostile review of the day's eager, grad-mode, clipping, x.at[], odeint and scipy work.

Passing tests are regression tests of properties that held; the four bugs it found (a bare
``@no_grad``, a ``no_grad`` generator, an in-place update of a view in ``no_grad``, and
``expm``'s documented limit under ``jit``) have tests that failed before their fixes.
"""

import contextlib
import threading
import warnings

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.stats as ss

import primitives.tensor as tnp
import tidu
from primitives.tensor import optim
from primitives.tensor.scipy import linalg as L
from primitives.tensor.scipy import stats as S

T = tnp.tensor


def _fd(f, x, eps=1e-6):
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


# --- grad mode --------------------------------------------------------------------------------


def test_no_grad_update_keeps_recorded_values_of_leaf_and_of_saved_outputs():
    for strategy in (None, "balanced"):
        x = T(np.array([0.5, 1.0]), requires_grad=True)
        cm = tnp.checkpoint_strategy(strategy) if strategy else contextlib.nullcontext()
        with cm:
            a = tnp.exp(x)                     # exp's backward reads its output
            b = tnp.sin(a)
        with tnp.no_grad():
            a += 100.0                         # a non-leaf updated in place
            x -= 1.0                           # the leaf too
        assert x.is_leaf and x.requires_grad
        b.sum().backward()
        x0 = np.array([0.5, 1.0])
        np.testing.assert_allclose(x.grad, np.cos(np.exp(x0)) * np.exp(x0))


def test_no_grad_update_of_arrays_shared_through_data_and_exposed_handles():
    arr = np.array([1.0, 2.0])
    t1 = T(np.zeros(2), requires_grad=True)
    t2 = T(np.zeros(2), requires_grad=True)
    t1.data = arr
    t2.data = arr
    y = (t2 * t2).sum()
    with tnp.no_grad():
        t1 += 1.0
    np.testing.assert_array_equal(y.backward().grad(t2), [2.0, 4.0])
    t4 = T(np.array([1.0, 2.0]), requires_grad=True)
    h = t4.data
    y = (t4 * t4).sum()
    h += 1.0
    np.testing.assert_array_equal(y.backward().grad(t4), [2.0, 4.0])


def test_held_gradients_survive_no_grad_step_and_clip_grad_norm():
    w = T(np.array([3.0, 4.0]), requires_grad=True)
    gs = (w * w).sum().backward()
    held, held_grad = gs.grad(w), w.grad
    total = optim.clip_grad_norm_([w], 1.0)
    assert total.item() == 10.0
    with tnp.no_grad():
        w -= 0.1 * w.grad
    np.testing.assert_array_equal(held, [6.0, 8.0])
    np.testing.assert_array_equal(held_grad, [6.0, 8.0])
    assert not np.shares_memory(w.grad, held)


def test_jit_closing_over_a_tensor_reads_no_grad_updates():
    w = T(np.array([1.0, 2.0]))
    g = tnp.jit(tnp.grad(lambda x: (x * w).sum()))
    np.testing.assert_array_equal(g(np.ones(2)), [1.0, 2.0])
    with tnp.no_grad():
        w *= 3
    np.testing.assert_array_equal(g(np.ones(2)), [3.0, 6.0])


def test_grad_mode_is_thread_local_and_restored_after_an_exception():
    seen = {}
    with tnp.no_grad():
        th = threading.Thread(target=lambda: seen.setdefault("thread", tnp.is_grad_enabled()))
        th.start()
        th.join()
        seen["main"] = tnp.is_grad_enabled()
    assert seen == {"thread": True, "main": False}
    with pytest.raises(ZeroDivisionError):
        with tnp.no_grad():
            1 / 0
    assert tnp.is_grad_enabled()


def test_no_grad_misuse_errors_are_tidu_errors():
    with tnp.no_grad():
        i = T(np.array([1, 2]))
        with pytest.raises(tidu.TiduError):
            i += 0.5
        x = T(np.ones(2), requires_grad=True)
        with pytest.raises(tidu.TiduError):
            x += np.ones((2, 2))
    assert tnp.is_grad_enabled()
    with pytest.raises(tidu.TiduError):
        (T(np.ones(2), requires_grad=True) * 2).requires_grad_()


def test_bare_no_grad_decorator():
    x = T(np.array([1.0]), requires_grad=True)
    f = tnp.no_grad(lambda: (x * 2).requires_grad)        # @tnp.no_grad, as torch's
    assert f() is False and tnp.is_grad_enabled()
    g = tnp.enable_grad(lambda: (x * 2).requires_grad)
    with tnp.no_grad():
        assert g() is True


def test_no_grad_decorated_generator_records_nothing():
    x = T(np.array([1.0]), requires_grad=True)

    @tnp.no_grad()
    def gen():
        yield (x * 2).requires_grad

    assert list(gen()) == [False]


def test_no_grad_update_of_a_view_reaches_its_base_or_raises():
    w = T(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    with tnp.no_grad():
        v = w[:2]
        with pytest.raises(tnp.TensorTypeError, match="view of another's"):
            v += 1.0                                  # torch would change w: refused by name
        own = w[:2].copy()
        own += 1.0                                    # a copy updates itself only
    assert w.tolist() == [1.0, 2.0, 3.0] and own.tolist() == [2.0, 3.0]


def test_no_grad_matches_torch_for_in_place_on_a_non_leaf():
    torch = pytest.importorskip("torch", reason="torch comparison")
    x = T(np.array([1.0, 2.0]), requires_grad=True)
    a = x * 3
    with tnp.no_grad():
        a += 10
    (a * x).sum().backward()
    xt = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    at = xt * 3
    with torch.no_grad():
        at += 10
    (at * xt).sum().backward()
    np.testing.assert_allclose(x.grad, xt.grad.numpy())


# --- zero gradients ---------------------------------------------------------------------------


def test_zero_gradients_in_a_big_balanced_graph_and_hvp():
    x = T(np.array([0.3, -1.2, 2.0]), requires_grad=True)
    w = T(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    with tnp.checkpoint_strategy("balanced"):
        h = tnp.sign(x)
        for _ in range(50):
            h = tnp.sin(h * w) + h
        loss = h.sum()
    loss.backward()
    np.testing.assert_array_equal(x.grad, np.zeros(3))
    assert np.isfinite(w.grad).all()
    x = T(np.array([0.3, -1.2]), requires_grad=True)
    w = T(np.array([1.0, 2.0]), requires_grad=True)
    hx, hw = tnp.autograd.hvp((tnp.sign(x) * w * w).sum(), [x, w], [np.ones(2), np.ones(2)])
    np.testing.assert_array_equal(hx, [0.0, 0.0])
    np.testing.assert_array_equal(hw, [2.0, -2.0])


def test_a_sibling_branch_does_not_make_an_unused_leaf_zero():
    x = T(np.array([1.0, 2.0]), requires_grad=True)
    w = T(np.array([3.0, 4.0]), requires_grad=True)
    b = w * 3
    _unused = x * b
    loss = b.sum()
    with pytest.raises(tidu.TiduError):
        tnp.autograd.grad(loss, [w, x])
    loss.backward()
    assert x.grad is None


def test_zero_gradient_create_graph_second_order():
    x = T(np.array([0.3, -1.2]), requires_grad=True)
    g, = tnp.autograd.grad((tnp.sign(x) * x * x).sum(), x, create_graph=True)
    g2, = tnp.autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(g2, [2.0, -2.0])


def test_third_library_constant_refused_and_library_usable_after():
    torch = pytest.importorskip("torch", reason="a torch constant")
    x = T(np.array([1.0, 2.0]), requires_grad=True)
    for f in (lambda: x * torch.tensor(2.0, dtype=torch.float64),
              lambda: tnp.where(torch.tensor([True, False]), x, 0.0),
              lambda: tnp.matmul(torch.eye(2, dtype=torch.float64), x)):
        with pytest.raises(tidu.TiduError):
            f()
    np.testing.assert_array_equal((x * 2).sum().backward().grad(x), [2.0, 2.0])
    a = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    tb = T(a * 2, requires_grad=True)
    (tb * tb).sum().backward()
    assert a.grad is None
    np.testing.assert_array_equal(np.asarray(tb.grad), [4.0, 8.0])


def test_format_and_item_errors():
    assert f"{T(np.float32(1.5)):.2f}" == "1.50"
    with pytest.raises(tidu.TiduError):
        f"{T(np.ones(2)):.2f}"
    with pytest.raises(tidu.TiduError):
        T(np.zeros(0)).item()


# --- clipping -------------------------------------------------------------------------------


def test_clip_grad_norm_matches_torch_bit_for_bit_in_float64():
    torch = pytest.importorskip("torch", reason="torch comparison")
    rng = np.random.default_rng(5)
    for p in (2.0, 1.0, float("inf"), -float("inf"), 0.0, 3.0, 0.5):
        grads = [rng.normal(size=4) * 3, rng.normal(size=3) + 1j * rng.normal(size=3)]
        ts = [T(np.zeros_like(g), requires_grad=True) for g in grads]
        tt = [torch.zeros(g.shape, dtype=torch.from_numpy(g).dtype, requires_grad=True)
              for g in grads]
        for t, u, g in zip(ts, tt, grads):
            t.grad = g.copy()
            u.grad = torch.from_numpy(g.copy())
        n1 = optim.clip_grad_norm_(ts, 1.0, p)
        n2 = torch.nn.utils.clip_grad_norm_(tt, 1.0, p)
        assert n1.item() == n2.item()
        for t, u in zip(ts, tt):
            np.testing.assert_array_equal(t.grad, u.grad.numpy())
    t = T(np.zeros(2), requires_grad=True)
    t.grad = np.array([np.nan, 1.0])
    with pytest.raises(optim.NonFiniteNormError if hasattr(optim, "NonFiniteNormError")
                       else tidu.TiduError):
        optim.clip_grad_norm_(t, 1.0, error_if_nonfinite=True)


# --- x.at[] -----------------------------------------------------------------------------------


def _np_set(x, idx, v):
    y = x.copy()
    y[idx] = v
    return y


def test_at_set_add_duplicates_negative_traced_and_vmapped_match_numpy_and_fd():
    rng = np.random.default_rng(0)
    x, v = rng.normal(size=5), rng.normal(size=4)
    idx = np.array([1, 3, 1, -1])
    w = np.arange(5.0)

    def f(x, v, idx):
        y = tnp.at(x)[idx].set(v * v)
        z = tnp.at(y)[idx].add(tnp.sin(v))
        return (z * z * w).sum()

    def ref(x, v):
        y = _np_set(x, idx, v * v)
        np.add.at(y, idx, np.sin(v))
        return (y * y * w).sum()

    assert np.isclose(f(x, v, idx), ref(x, v))
    np.testing.assert_allclose(tnp.grad(f, argnums=1)(x, v, idx), _fd(lambda v: ref(x, v), v),
                               rtol=1e-6)
    np.testing.assert_allclose(tnp.jit(tnp.grad(f, argnums=0))(x, v, idx),
                               _fd(lambda x: ref(x, v), x), rtol=1e-6, atol=1e-8)
    idxs = np.array([[0, 1, 0, 2], [4, 4, 4, 4], [-1, -2, -3, -4]])
    out = tnp.vmap(f, in_axes=(None, None, 0))(x, v, idxs)
    for row, o in zip(idxs, out):
        y = _np_set(x, row, v * v)
        np.add.at(y, row, np.sin(v))
        assert np.isclose(o, (y * y * w).sum())
    # a broadcast value written at repeated positions: one derivative per distinct position
    g = tnp.grad(lambda s: (tnp.at(np.zeros(4))[np.array([0, 0, 1, 2, 2, 2])].set(s)
                             * np.arange(1.0, 5.0)).sum())(2.0)
    assert g == 6.0


def test_at_misuse_raises_tidu_errors_eager_and_traced():
    x = np.arange(5.0)
    with pytest.raises(tidu.TiduError):
        tnp.at(x)[7].set(1.0)
    with pytest.raises(tidu.TiduError):
        tnp.jit(lambda x, i: tnp.at(x)[i].add(1.0))(x, np.array([1, -7]))
    with pytest.raises(tidu.TiduError):
        tnp.jit(lambda x: tnp.at(x)[x > 2].set(0.0))(x)
    with pytest.raises(tidu.TiduError):
        tnp.at(np.zeros((3, 4)))[0].set(np.ones(3))
    np.testing.assert_array_equal(tnp.at(x)[x > 2].set(0.0), [0, 1, 2, 0, 0])
    assert not np.shares_memory(tnp.at(x)[np.array([], dtype=int)].add(1.0), x)
    assert tnp.at(np.zeros(3, np.float32))[1].set(np.float64(1.0)).dtype == np.float32


def test_at_jit_reads_a_closed_over_index_at_each_call():
    holder = np.array([0, 1, 2, 3])
    v = np.array([1.0, 2.0, 3.0, 4.0])
    jf = tnp.jit(lambda x: tnp.at(x)[holder].set(v))
    np.testing.assert_array_equal(jf(np.zeros(5)), [1, 2, 3, 4, 0])
    holder[:] = 4
    np.testing.assert_array_equal(jf(np.zeros(5)), [0, 0, 0, 0, 4])


# --- scipy.linalg -----------------------------------------------------------------------------


def test_solve_triangular_all_flags_complex_and_batched_match_scipy():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(4, 4)) + 3 * np.eye(4)
    b = rng.normal(size=(4, 2))
    Ac = A + 1j * rng.normal(size=(4, 4))
    bc = b + 1j * rng.normal(size=(4, 2))
    for trans in (0, 1, 2, "N", "T", "C"):
        for lower in (False, True):
            for unit in (False, True):
                for a, bb in ((A, b), (Ac, bc), (A, b[:, 0])):
                    np.testing.assert_allclose(
                        L.solve_triangular(a, bb, trans=trans, lower=lower, unit_diagonal=unit),
                        sl.solve_triangular(a, bb, trans=trans, lower=lower,
                                            unit_diagonal=unit), rtol=1e-10, atol=1e-12)
    Ab = rng.normal(size=(3, 4, 4)) + 3 * np.eye(4)
    np.testing.assert_allclose(L.solve_triangular(Ab, b[:, 0], lower=True),
                               sl.solve_triangular(Ab, b[:, 0], lower=True))
    with pytest.raises(tidu.TiduError):
        L.solve_triangular(np.triu(A) - np.diag(np.diag(A)), b)


def test_unread_triangle_with_nan_has_zero_derivative():
    rng = np.random.default_rng(1)
    A = np.triu(rng.normal(size=(4, 4)) + 3 * np.eye(4))
    A[2, 0] = np.nan
    b = rng.normal(size=(4, 2))
    np.testing.assert_allclose(L.solve_triangular(A, b, check_finite=False),
                               sl.solve_triangular(A, b, check_finite=False))
    g = tnp.grad(lambda a: L.solve_triangular(a, b, check_finite=False).sum())(A)
    assert np.isfinite(g).all() and (np.tril(g, -1) == 0).all()


def test_cho_solve_takes_scipys_factor_with_garbage_triangle():
    rng = np.random.default_rng(2)
    A = rng.normal(size=(4, 4))
    P = A @ A.T + 4 * np.eye(4)
    P[3, 0] += 999
    b = rng.normal(size=(4, 2))
    for lower in (False, True):
        Q = P if not lower else P.T
        c = sl.cho_factor(Q, lower=lower)
        np.testing.assert_allclose(L.cho_solve(c, b), sl.cho_solve(c, b))


def test_linalg_gradients_match_finite_differences_eager_and_jit():
    rng = np.random.default_rng(2)
    A = rng.normal(size=(4, 4))
    P = A @ A.T + 4 * np.eye(4)
    P[3, 0] += 0.3
    b = rng.normal(size=(4, 2))
    W = rng.normal(size=(4, 2))
    cases = [
        (lambda a, m: (m.solve_triangular(a, b, trans=1, lower=True, unit_diagonal=True)
                       * W).sum(), A),
        (lambda a, m: (m.solve(a, b, assume_a="sym", lower=True) * W).sum(), P),
        (lambda a, m: (m.solve(a, b, assume_a="pos", transposed=True, lower=True) * W).sum(), P),
        (lambda a, m: (m.inv(a, assume_a="pos")[:, :2] * W).sum(), P),
        (lambda a, m: (m.cho_solve(m.cho_factor(a, lower=True), b) * W).sum(), P),
        (lambda a, m: (m.expm(a)[:, :2] * W).sum(), 3 * A),
    ]
    for f, x in cases:
        ref = _fd(lambda a: f(a, sl), x)
        scale = max(1.0, np.abs(ref).max())
        for g in (tnp.grad(lambda a: f(a, L))(x), tnp.jit(tnp.grad(lambda a: f(a, L)))(x)):
            assert np.abs(g - ref).max() / scale < 1e-7


def test_expm_batched_mixed_norms_jit_vmap_and_gradient_agree():
    rng = np.random.default_rng(3)
    Ms = np.stack([rng.normal(size=(3, 3)) * s for s in (0.001, 1, 10)])
    ref = sl.expm(Ms)
    for out in (L.expm(Ms), tnp.jit(L.expm)(Ms), tnp.vmap(L.expm)(Ms)):
        np.testing.assert_allclose(out, ref, rtol=1e-10)
    f = lambda m: (L.expm(m) ** 2).sum()
    np.testing.assert_allclose(tnp.jit(tnp.grad(f))(Ms), tnp.grad(f)(Ms), rtol=1e-12)
    K = rng.normal(size=(4, 4))
    K = K - K.T
    K /= np.abs(K).sum(0).max()
    np.testing.assert_allclose(tnp.jit(L.expm)(K * 3.5e5), sl.expm(K * 3.5e5), atol=1e-7)


def test_expm_under_jit_past_its_documented_squaring_limit():
    K = np.array([[0.0, 1.0], [-1.0, 0.0]])
    M = K * 5e5                         # needs 17 squarings by ceil, 16 by JAX's floor
    np.testing.assert_allclose(L.expm(M), sl.expm(M), atol=1e-8)    # eager: holds
    # under jit past the documented limit (a 1-norm of about 352,000 for max_squarings=16):
    # NaN, as the docstring says; one more squaring allowed gives the value
    assert np.isnan(tnp.jit(L.expm)(M)).all()
    np.testing.assert_allclose(tnp.jit(lambda m: L.expm(m, max_squarings=17))(M), sl.expm(M),
                               atol=1e-8)


def test_linalg_edge_cases():
    assert L.det(np.zeros((0, 0))) == 1.0
    assert L.inv(np.zeros((0, 0))).shape == (0, 0)
    half = np.eye(2, dtype=np.float16)
    assert L.solve_triangular(half, np.ones(2, np.float16)).dtype == np.float32
    for arrs in [(np.ones((2, 2)), 3, np.array([1, 2])), (np.zeros((0, 2)), np.ones((1, 1))),
                 (np.zeros((2, 0)), np.ones((1, 1)), np.zeros((0, 0)))]:
        np.testing.assert_array_equal(L.block_diag(*arrs), sl.block_diag(*arrs))
    with pytest.raises(tidu.TiduError):
        L.solve(np.array([[np.nan, 1.0], [1.0, 1.0]]), np.ones(2))
    with pytest.raises(tidu.TiduError):
        L.cholesky(np.array([[1.0, 2.0], [2.0, 1.0]]))


# --- scipy.stats ------------------------------------------------------------------------------


def test_new_distributions_match_scipy_at_support_edges_and_bad_parameters():
    xs = np.array([-np.inf, -3.0, -1e-300, 0.0, 1e-300, 0.2, 0.5, 1.5, 30.0, np.inf, np.nan])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, shapes in [("laplace", ()), ("cauchy", ()), ("logistic", ()), ("expon", ()),
                             ("halfnorm", ()), ("uniform", ()), ("lognorm", (0.5,)),
                             ("chi2", (3.0,)), ("chi2", (1.0,))]:
            for loc, scale in [(0.0, 1.0), (0.2, 1.3), (0.0, 0.0), (0.0, -1.0), (np.nan, 1.0)]:
                for m in ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"):
                    t = np.asarray(getattr(getattr(S, name), m)(xs, *shapes, loc, scale))
                    s = getattr(getattr(ss, name), m)(xs, *shapes, loc, scale)
                    np.testing.assert_allclose(t, s, rtol=1e-9, err_msg=f"{name}.{m}")
        ks = np.array([-1.0, 0.0, 0.5, 1.0, 3.0, 5.0, 6.0, np.inf, np.nan])
        for name, shapes in [("binom", (5, 0.3)), ("binom", (5, 1.0)), ("binom", (0, 0.3)),
                             ("nbinom", (2.5, 0.3)), ("nbinom", (2, 1.0)), ("geom", (0.3,)),
                             ("geom", (1.0,))]:
            for m in ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf"):
                t = np.asarray(getattr(getattr(S, name), m)(ks, *shapes))
                s = getattr(getattr(ss, name), m)(ks, *shapes)
                np.testing.assert_allclose(t, s, rtol=1e-9, err_msg=f"{name}.{m}{shapes}")


def test_new_distribution_gradients_are_finite_and_match_fd_on_the_support():
    xs = [-50.0, -0.3, 1e-8, 0.7, 3.0, 40.0]
    for name, shapes in [("laplace", ()), ("cauchy", ()), ("logistic", ()), ("expon", ()),
                         ("halfnorm", ()), ("lognorm", (0.7,))]:
        D, R = getattr(S, name), getattr(ss, name)
        for m in ("logpdf", "logcdf", "logsf"):
            for x in xs:
                for pos in (0, len(shapes) + 1, len(shapes) + 2):
                    args = [x, *shapes, 0.2, 1.3]

                    def f(v, lib):
                        a = list(args)
                        a[pos] = v
                        return getattr(lib, m)(*a)
                    ref = _fd(lambda v: float(f(v, R)), np.array(args[pos]))
                    if not np.isfinite(ref) or abs(ref) > 1e6:
                        continue
                    g = float(tnp.grad(lambda v: f(v, D))(args[pos]))
                    assert np.isclose(g, ref, rtol=1e-4, atol=1e-6), (name, m, x, pos)
    g = tnp.grad(lambda p: S.binom.logcdf(3, 5, p) + S.nbinom.logsf(3, 2.5, p)
                 + S.geom.logpmf(4, p))(0.3)
    ref = _fd(lambda p: ss.binom.logcdf(3, 5, p) + ss.nbinom.logsf(3, 2.5, p)
              + ss.geom.logpmf(4, p), np.array(0.3))
    assert np.isclose(g, ref, rtol=1e-5)


# --- odeint and custom rules under jit ----------------------------------------------------------


def test_odeint_pytree_and_int_args_gradient_eager_and_jit():
    ts = np.linspace(0, 1, 4)

    def rhs(y, t, p, n):
        return -p["k"] * y + tnp.sin(t) * p["w"][0] + n * 0.1 * y

    def loss(y0, k):
        p = {"k": k, "w": (np.array([0.3, -0.2]),)}
        return (tnp.odeint(rhs, y0, ts, p, 2) ** 2).sum()

    y0, k = np.array([1.0, 2.0]), np.array(0.7)
    g = tnp.grad(loss, argnums=(0, 1))(y0, k)
    gj = tnp.jit(tnp.grad(loss, argnums=(0, 1)))(y0, k)
    np.testing.assert_allclose(g[0], _fd(lambda y: float(loss(y, k)), y0), rtol=1e-5)
    np.testing.assert_allclose(g[1], _fd(lambda kk: float(loss(y0, kk)), k), rtol=1e-5)
    np.testing.assert_allclose(gj[0], g[0], rtol=1e-10)
    K = np.array([0.5])
    f = tnp.jit(lambda y0: tnp.odeint(lambda y, t, k: -k * y, y0, ts, K)[-1])
    np.testing.assert_allclose(f(y0), y0 * np.exp(-0.5), rtol=1e-6)
    K[:] = 2.0
    np.testing.assert_allclose(f(y0), y0 * np.exp(-2.0), rtol=1e-6)


def test_custom_vjp_and_jvp_rules_read_a_mutated_global_under_jit():
    G = np.array([2.0, 3.0])

    @tnp.custom_vjp
    def f(x):
        return tnp.sum(x * G)
    f.defvjp(lambda x: (f(x), None), lambda res, g: (g * G,))
    jg, jf = tnp.jit(tnp.grad(f)), tnp.jit(f)
    x = np.ones(2)
    np.testing.assert_array_equal(jg(x), [2.0, 3.0])
    G[:] = [10.0, 20.0]
    np.testing.assert_array_equal(jg(x), [10.0, 20.0])
    assert jf(x) == 30.0
    H = np.array([2.0, 3.0])

    @tnp.custom_jvp
    def h(x):
        return tnp.sum(tnp.sin(x) * H)

    @h.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return h(x), tnp.sum(tnp.cos(x) * H * t)
    jh = tnp.jit(tnp.grad(h))
    jh(x)
    H[:] = [10.0, 20.0]
    np.testing.assert_allclose(jh(x), np.cos(1.0) * np.array([10.0, 20.0]))


def test_python_number_conversions_of_many_elements_are_tidu_errors():
    many = T(np.array([1.0, 2.0]))
    for convert in (float, int, complex):
        with pytest.raises(tnp.TensorTypeError, match=r"of shape \(2,\): only a one-element"):
            convert(many)
    with pytest.raises(tnp.TensorShapeError, match="ambiguous"):
        bool(many)
    # one element of any shape converts, as in PyTorch (NumPy 2 takes 0-d arrays only)
    assert float(T(np.array([[2.5]]))) == 2.5 and int(T(np.array([3.7]))) == 3
    assert bool(T(np.array([1.0]))) and complex(T(np.array([1 + 2j]))) == 1 + 2j
    with pytest.raises(tnp.TensorTypeError, match="float"):
        tnp.grad(lambda x: float(x))(3.0)             # a derivative would be dropped


def test_grad_mode_decorators_refuse_what_is_not_a_function():
    for bad in (lambda: tnp.no_grad(5), lambda: tnp.enable_grad("x"),
                lambda: tnp.set_grad_enabled(False)(3)):
        with pytest.raises(tnp.TensorTypeError, match="decorates a function"):
            bad()
        assert tnp.is_grad_enabled()                 # usable after the error


def test_numpy_functions_that_copy_return_new_arrays_for_plain_inputs():
    """NumPy's concatenate of one array and pad by nothing return new arrays (so do
    scipy's block_diag of one): writing to the result must not change the input."""
    a = np.ones((2, 2))
    for result in (tnp.concatenate([a]), tnp.hstack([a]), tnp.pad(a, 0), L.block_diag(a)):
        assert not np.shares_memory(result, a)
        result[...] = 7.0
    assert (a == 1.0).all()
    t = T(a, requires_grad=True)                      # a new tensor on t's values, whose
    assert tnp.concatenate([t]) is not t              # state is its own (round 60a)
