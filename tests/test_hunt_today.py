"""Hostile review of the day's additions (ae1259e..): jit's static arguments by keyword,
checkpoint with pytrees and closures, the eager optimizers' groups, state dicts and
schedulers (against torch), logsumexp(b=, return_sign=), reshape(order="F"),
array(ndmin=) and odeint in float32.

Bugs these tests found (fixed beside them):

- jit: equal static values of different types shared a trace (``f(x, True)`` then
  ``f(x, 1)`` returned the ``True`` trace's result: ``flag is True`` was read once).
- jit: a negative ``static_argnums`` counted from the call's arguments, so the same
  parameter was static in ``f(x, 3)`` and ``x`` was in ``f(x, n=3)`` / ``f(x)``.
- logsumexp(b=): the derivative in a weight that is 0 was 0 (it is exp(a - lse));
  a negative sum gave NaN with a zero derivative (now NaN too).
- reshape(order="F"): lower-case orders (NumPy takes them) were refused, and a shape
  error named the reversed shapes.
"""

from __future__ import annotations

import functools
import pickle
import threading

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import FunctionalError, Tensor, optim
from tidu import TiduError

RNG = np.random.default_rng(2026)
W = np.array([[0.3, -0.2], [0.5, 0.1]])
V = np.array([0.7, -1.1])


def _fd(fn, x, eps=1e-6):
    """Central finite differences of a scalar ``fn`` at the float64 array ``x``."""
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        out[i] = (float(fn(x + e)) - float(fn(x - e))) / (2 * eps)
    return out


# --- jit: static arguments ---------------------------------------------------------------------


def test_jit_static_cache_key_separates_position_keyword_and_default():
    calls = []

    def f(x, n=2):
        calls.append(n)
        return x * n

    x = np.array([1.0, 2.0])
    for static in ({"static_argnames": "n"}, {"static_argnums": 1}, {"static_argnums": -1}):
        j = tnp.jit(f, **static)
        seq = [((x,), {"n": 3}), ((x, 4), {}), ((x,), {}), ((x,), {"n": 5}), ((x, 3), {}),
               ((x,), {}), ((x,), {"n": 3}), ((x, 4), {})]
        for args, kwargs in seq:
            np.testing.assert_array_equal(j(*args, **kwargs), f(*args, **kwargs))
        # f's closure list changes at each call, which jit's closure guard may answer by
        # tracing again: the values, which must be f's for that very call, are what counts
        for args, kwargs in seq[::-1]:
            np.testing.assert_array_equal(j(*args, **kwargs), f(*args, **kwargs))


def test_jit_static_values_equal_but_of_other_types_trace_apart():
    def f(x, flag):
        return x * 2.0 if flag is True else x * 5.0

    x = np.array([1.0, 2.0])
    by_position = tnp.jit(f, static_argnums=1)
    by_name = tnp.jit(f, static_argnames="flag")
    for v in (True, 1, 1.0, np.int64(1), True, 1):     # all equal, and hash alike
        np.testing.assert_array_equal(by_position(x, v), f(x, v))
        np.testing.assert_array_equal(by_name(x, flag=v), f(x, v))


def test_jit_static_tuples_of_bool_and_int_trace_apart():
    def f(x, cfg):
        return x * (2.0 if cfg[0] is True else 5.0)

    j = tnp.jit(f, static_argnums=1)
    x = np.array([1.0])
    np.testing.assert_array_equal(j(x, (True,)), [2.0])
    np.testing.assert_array_equal(j(x, (1,)), [5.0])
    np.testing.assert_array_equal(j(x, (True,)), [2.0])


def test_jit_negative_static_argnums_is_the_same_parameter_by_keyword_and_default():
    seen = []

    def f(x, n=2):
        seen.append(type(n))                    # n reaches f as a Python int (static)
        return x ** n

    j = tnp.jit(f, static_argnums=-1)
    x = np.array([1.5, 2.0])
    np.testing.assert_allclose(j(x, 3), x ** 3)
    np.testing.assert_allclose(j(x, n=3), x ** 3)      # was: x static, "not hashable"
    np.testing.assert_allclose(j(x), x ** 2)
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(j(v, n=3)))(x), 3 * x ** 2)
    assert set(seen) == {int}


def test_jit_static_value_changed_retraces_and_default_change_is_read():
    def g(x, n=2):
        return x * n

    j = tnp.jit(g, static_argnames="n")
    x = np.array([1.0, 2.0])
    for n in (2, 3, 2, 7):
        np.testing.assert_array_equal(j(x, n=n), x * n)
    np.testing.assert_array_equal(j(x), x * 2)
    g.__defaults__ = (7,)
    np.testing.assert_array_equal(j(x), x * 7)


def test_jit_unhashable_static_is_named_and_library_stays_usable():
    def f(x, n=2):
        return x * len(n) if isinstance(n, list) else x * n

    j = tnp.jit(f, static_argnames="n")
    x = np.array([1.0, 2.0])
    for call in (lambda: j(x, n=[1, 2]), lambda: j(x, [1, 2]), lambda: j(x, n={"a": 1})):
        with pytest.raises(FunctionalError, match=r"jit of .*f.*not hashable"):
            call()
    np.testing.assert_array_equal(j(x, n=3), x * 3)


def test_jit_static_argnames_misuse_is_named():
    def f(x, n=2):
        return x * n

    with pytest.raises(FunctionalError, match="static_argnames.*'q'"):
        tnp.jit(f, static_argnames="q")
    with pytest.raises(FunctionalError, match="parameter names"):
        tnp.jit(f, static_argnames=[1])

    def po(x, n, /):
        return x * n

    with pytest.raises(FunctionalError, match="by keyword"):
        tnp.jit(po, static_argnames="n")
    np.testing.assert_array_equal(tnp.jit(po, static_argnums=1)(np.ones(2), 3), [3.0, 3.0])


def test_jit_static_with_partial_method_and_var_arguments():
    def f(x, n=2):
        return x * n

    x = np.array([1.0, 2.0])
    p = tnp.jit(functools.partial(f, n=3), static_argnames="n")
    np.testing.assert_array_equal(p(x), x * 3)
    np.testing.assert_array_equal(p(x, n=4), x * 4)
    np.testing.assert_array_equal(p(x), x * 3)

    class M:
        def m(self, x, mode="a"):
            return x * (2.0 if mode == "a" else 3.0)

    jm = tnp.jit(M().m, static_argnames="mode")
    np.testing.assert_array_equal(jm(x), x * 2)
    np.testing.assert_array_equal(jm(x, mode="b"), x * 3)
    np.testing.assert_array_equal(jm(x, "b"), x * 3)
    np.testing.assert_array_equal(tnp.jit(M().m, static_argnums=1)(x, mode="b"), x * 3)

    def h(x, *args, **kw):
        return x * kw.get("k", 1) * (args[0] if args else 1)

    jh = tnp.jit(h, static_argnames="k")
    for k in (2, 3, 2):
        np.testing.assert_array_equal(jh(x, k=k), x * k)
    jh2 = tnp.jit(h, static_argnums=1)
    np.testing.assert_array_equal(jh2(x, 2), x * 2)
    np.testing.assert_array_equal(jh2(x, 3), x * 3)
    with pytest.raises(FunctionalError, match="jit of .*h"):
        jh2(x)


def test_jit_static_keywords_compose_with_grad_and_vmap():
    def loss(x, n=2, *, how="sum"):
        return tnp.sum(x ** n) if how == "sum" else tnp.mean(x ** n)

    x = np.array([1.0, 2.0, 3.0])
    j = tnp.jit(loss, static_argnames=("n", "how"))
    np.testing.assert_allclose(tnp.grad(j)(x, n=3), 3 * x ** 2)
    np.testing.assert_allclose(tnp.grad(j)(x, n=3, how="mean"), x ** 2)
    np.testing.assert_allclose(tnp.grad(j)(x), 2 * x)
    jg = tnp.jit(tnp.grad(loss), static_argnames=("n", "how"))
    np.testing.assert_allclose(jg(x, n=3), 3 * x ** 2)
    np.testing.assert_allclose(jg(x), 2 * x)
    np.testing.assert_allclose(jg(x, 3, how="mean"), x ** 2)
    xs = np.stack([x, 2 * x])
    np.testing.assert_allclose(tnp.vmap(lambda v: j(v, n=3))(xs), (xs ** 3).sum(1))
    np.testing.assert_allclose(tnp.vmap(tnp.grad(lambda v: j(v, n=3, how="mean")))(xs),
                               xs ** 2)


def test_jit_static_cache_is_thread_safe():
    def f(x, n=1, *, mode="add"):
        return x * n + (1.0 if mode == "add" else -1.0)

    j = tnp.jit(f, static_argnames=("n", "mode"))
    x = np.arange(3.0)
    errors = []

    def worker(seed):
        rs = np.random.RandomState(seed)
        for _ in range(40):
            n, mode, how = int(rs.randint(1, 5)), ["add", "sub"][rs.randint(2)], rs.randint(3)
            if how == 0:
                out = j(x, n, mode=mode)
            elif how == 1:
                out = j(x, n=n, mode=mode)
            else:
                out = j(x, mode=mode) if n == 1 else j(x, n, mode=mode)
            if not np.array_equal(out, f(x, n, mode=mode)):
                errors.append((n, mode, how))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# --- checkpoint: pytrees, keywords, closures ---------------------------------------------------


def _block(w, v, *, scale=1.0, cfg=None):
    n = cfg["n"] if cfg else 1
    h = v
    for _ in range(n):
        h = tnp.tanh(w @ h) * scale
    return {"h": h, "n": n, "tag": None}


def _pytree_loss(w, v, ck):
    b = tnp.checkpoint(_block) if ck else _block
    out = b(w, v, scale=1.5, cfg={"n": 3, "name": "layer"})
    assert out["tag"] is None
    return tnp.sum(out["h"] ** 2)


@pytest.mark.filterwarnings("ignore:.*reaches more than:RuntimeWarning")
@pytest.mark.parametrize("how", ["grad", "jit(grad)", "grad(jit)", "vmap(grad)"])
def test_checkpoint_pytree_and_keywords_under_transforms(how):
    ref = tnp.grad(_pytree_loss)(W, V, False)
    np.testing.assert_allclose(ref, _fd(lambda w: _pytree_loss(w, V, False), W), atol=1e-7)
    if how == "grad":
        got = tnp.grad(_pytree_loss)(W, V, True)
    elif how == "jit(grad)":
        got = tnp.jit(tnp.grad(_pytree_loss), static_argnums=2)(W, V, True)
    elif how == "grad(jit)":
        got = tnp.grad(tnp.jit(_pytree_loss, static_argnums=2))(W, V, True)
    else:
        got = tnp.vmap(tnp.grad(_pytree_loss), in_axes=(0, None, None))(np.stack([W, W]),
                                                                         V, True)[1]
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)


def test_checkpoint_pytree_eager_matches_without_and_finite_differences():
    def run(ck, wv=W):
        w, v = tnp.tensor(wv, requires_grad=True), tnp.tensor(V, requires_grad=True)
        b = tnp.checkpoint(_block) if ck else _block
        out = b(w, v, scale=1.5, cfg={"n": 3, "name": "x"})
        loss = tnp.sum(out["h"] ** 2)
        return loss, w, v, out

    loss, w, v, out = run(True)
    loss.backward()
    ref_loss, rw, rv, _ = run(False)
    ref_loss.backward()
    np.testing.assert_allclose(w.grad, rw.grad, rtol=1e-12)
    np.testing.assert_allclose(v.grad, rv.grad, rtol=1e-12)
    np.testing.assert_allclose(w.grad, _fd(lambda wv: run(False, wv)[0].data, W), atol=1e-7)
    assert int(np.asarray(out["n"].data if isinstance(out["n"], Tensor) else out["n"])) == 3
    if isinstance(out["n"], Tensor):
        assert not out["n"].requires_grad


def _layer_loss(w, ck, kind="arr"):
    def f(h, scale=1.0):
        return tnp.tanh(w @ h) * scale          # w: traced by the enclosing transform

    b = tnp.checkpoint(f) if ck else f
    arg = {"arr": V, "tensor": tnp.tensor(V), "traced": w[0] * 0 + V}[kind]
    return tnp.sum(b(arg, scale=2.0) ** 2)


@pytest.mark.parametrize("kind", ["arr", "tensor", "traced"])
def test_checkpoint_reading_traced_closure_values(kind):
    ref = np.asarray(tnp.grad(_layer_loss)(W, False, "arr"))
    np.testing.assert_allclose(ref, _fd(lambda w: _layer_loss(w, False), W), atol=1e-7)
    results = [tnp.grad(_layer_loss)(W, True, kind),
               tnp.jit(tnp.grad(_layer_loss), static_argnums=(1, 2))(W, True, kind),
               tnp.grad(tnp.jit(_layer_loss, static_argnums=(1, 2)))(W, True, kind),
               tnp.vmap(tnp.grad(_layer_loss), in_axes=(0, None, None))(
                   np.stack([W, W]), True, kind)[0]]
    for got in results:
        got = got.data if isinstance(got, Tensor) else got
        np.testing.assert_allclose(got, ref, rtol=1e-12)
    np.testing.assert_allclose(tnp.jit(_layer_loss, static_argnums=(1, 2))(W, True, kind),
                               _layer_loss(W, False, "arr"), rtol=1e-12)


def test_checkpoint_eager_grad_tensor_meeting_traced_closure_is_refused():
    def mix(w):
        v = tnp.tensor(V, requires_grad=True)
        return tnp.sum(tnp.checkpoint(lambda h: tnp.tanh(w @ h))(v))

    with pytest.raises(FunctionalError, match="checkpoint of .*lambda"):
        tnp.grad(mix)(W)
    np.testing.assert_allclose(tnp.grad(_layer_loss)(W, True), tnp.grad(_layer_loss)(W, False))


def test_checkpoint_same_tensor_argument_and_closure():
    def eager(ck):
        w = tnp.tensor(W, requires_grad=True)

        def f(a):
            return tnp.sum(tnp.sin(a * w))

        (tnp.checkpoint(f) if ck else f)(w).backward()
        return w.grad

    np.testing.assert_allclose(eager(True), eager(False), rtol=1e-12)
    np.testing.assert_allclose(eager(True), 2 * W * np.cos(W * W), rtol=1e-12)

    def functional(w, ck):
        def f(a):
            return tnp.sum(tnp.sin(a * w))

        return (tnp.checkpoint(f) if ck else f)(w)

    np.testing.assert_allclose(tnp.grad(functional)(W, True), 2 * W * np.cos(W * W))


def test_checkpoint_inside_checkpoint_eager_and_jit():
    def nested(w, v, ck):
        c = tnp.checkpoint if ck else (lambda f: f)
        inner = c(lambda h: tnp.tanh(w @ h))
        outer = c(lambda h, k: inner(inner(h)) * k)
        return tnp.sum(outer(v, 3) ** 2)

    ref = tnp.grad(nested)(W, V, False)
    np.testing.assert_allclose(ref, _fd(lambda w: nested(w, V, False), W), atol=1e-7)
    np.testing.assert_allclose(tnp.grad(nested)(W, V, True), ref, rtol=1e-12)
    np.testing.assert_allclose(tnp.jit(tnp.grad(nested), static_argnums=2)(W, V, True), ref,
                               rtol=1e-12)

    def eager(ck):
        w, v = tnp.tensor(W, requires_grad=True), tnp.tensor(V, requires_grad=True)
        nested(w, v, ck).backward()
        return w.grad, v.grad

    for a, b in zip(eager(True), eager(False)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_checkpoint_outputs_never_alias_inputs_or_each_other():
    x = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    c = np.array([3.0])
    a, b = tnp.checkpoint(lambda p, q: (p, q))(x, c)
    assert a is not x and not np.shares_memory(a.data, x.data)
    assert not np.shares_memory(np.asarray(b.data), c)
    tnp.sum(a * 2.0).backward()
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])
    arr = np.array([1.0, 2.0])
    o1, o2 = tnp.jit(tnp.checkpoint(lambda p: (p, p)))(arr)
    assert not np.shares_memory(o1, arr) and not np.shares_memory(o1, o2)
    const = np.array([1.0, 2.0])

    def g(w):
        return tnp.checkpoint(lambda h: (h, tnp.sum(w)))(const)[0]

    assert not np.shares_memory(tnp.jit(g)(W), const)
    assert not np.shares_memory(np.asarray(g(W)), const)


def test_checkpoint_int_and_bool_outputs_and_non_array_leaves():
    x = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    y, mask, count = tnp.checkpoint(lambda a: (a * 2, a > 1.5, tnp.sum(a > 0)))(x)
    np.testing.assert_array_equal(np.asarray(mask.data), [False, True])
    assert int(np.asarray(count.data)) == 2
    assert not mask.requires_grad and not count.requires_grad
    tnp.sum(y).backward()
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])

    def poly(a, n, name, nothing):
        assert name == "k" and nothing is None
        return sum(a ** i for i in range(n))

    arr = np.array([1.0, 2.0])
    f = tnp.checkpoint(poly)
    np.testing.assert_allclose(tnp.grad(lambda a: tnp.sum(f(a, 3, "k", None)))(arr), 1 + 2 * arr)
    xe = tnp.tensor(arr, requires_grad=True)
    tnp.sum(f(xe, 3, name="k", nothing=None)).backward()
    np.testing.assert_allclose(xe.grad, 1 + 2 * arr)
    assert tnp.grad(lambda a: tnp.checkpoint(
        lambda a: (tnp.sum(a * 2), a > 1.5, 3))(a)[0])(arr).tolist() == [2.0, 2.0]


# --- eager optimizers against torch.optim ------------------------------------------------------


def _torch_run(make_torch, make_ours, dtype, complex_first, lr_change, schedulers=None,
               steps=8):
    torch = pytest.importorskip("torch", reason="compared with torch.optim")
    rs = np.random.RandomState(3)
    shapes = [(3,), (2, 2), (4,)]

    def draw(i, s):
        v = rs.randn(*s)
        if complex_first and i == 0:
            return (v + 1j * rs.randn(*s)).astype(np.complex64 if dtype == np.float32
                                                  else np.complex128)
        return v.astype(dtype)

    init = [draw(i, s) for i, s in enumerate(shapes)]
    grads = [[draw(i, s) for i, s in enumerate(shapes)] for _ in range(steps)]
    T = [torch.tensor(a.copy(), requires_grad=True) for a in init]
    O = [tnp.tensor(a.copy(), requires_grad=True) for a in init]
    to, oo = make_torch(torch, T), make_ours(O)
    st, so = schedulers(torch, to, oo) if schedulers else ([], [])
    tol = 2e-6 if dtype == np.float32 else 1e-13
    for k in range(steps):
        for i in range(3):
            if (k + i) % 3 == 1:                # this tensor got no gradient this step
                T[i].grad = None
                O[i].grad = None
            else:
                T[i].grad = torch.tensor(grads[k][i])
                O[i].grad = grads[k][i].copy()
        if lr_change and k == 3:
            for g in to.param_groups:
                g["lr"] *= 0.3
            for g in oo.param_groups:
                g["lr"] *= 0.3
        to.step()
        oo.step()
        for s in st:
            s.step()
        for s in so:
            s.step()
        for a, b in zip(T, O):
            ta = a.detach().numpy()
            assert b.data.dtype == ta.dtype
            np.testing.assert_allclose(b.data, ta, rtol=tol, atol=tol)
        for ga, gb in zip(to.param_groups, oo.param_groups):
            assert gb["lr"] == pytest.approx(ga["lr"], rel=1e-12)


def _groups(ps, **second):
    return [{"params": ps[:2]}, {"params": ps[2:], **second}]


OPTIMIZERS = {
    "sgd": (lambda torch, p: torch.optim.SGD(_groups(p, lr=0.3, momentum=0.5), lr=0.1,
                                             momentum=0.9, dampening=0.1, weight_decay=0.01),
            lambda p: optim.SGD(_groups(p, lr=0.3, momentum=0.5), lr=0.1, momentum=0.9,
                                dampening=0.1, weight_decay=0.01)),
    "nesterov": (lambda torch, p: torch.optim.SGD(_groups(p, lr=0.3), lr=0.1, momentum=0.9,
                                                  nesterov=True),
                 lambda p: optim.SGD(_groups(p, lr=0.3), lr=0.1, momentum=0.9, nesterov=True)),
    "adam": (lambda torch, p: torch.optim.Adam(_groups(p, betas=(0.5, 0.9), weight_decay=0.1),
                                               lr=0.01),
             lambda p: optim.Adam(_groups(p, betas=(0.5, 0.9), weight_decay=0.1), lr=0.01)),
    "adamw": (lambda torch, p: torch.optim.AdamW(_groups(p, lr=0.05, weight_decay=0.3), lr=0.01),
              lambda p: optim.AdamW(_groups(p, lr=0.05, weight_decay=0.3), lr=0.01)),
    "rmsprop": (lambda torch, p: torch.optim.RMSprop(_groups(p, centered=True, momentum=0.5),
                                                     lr=0.01, weight_decay=0.1),
                lambda p: optim.RMSprop(_groups(p, centered=True, momentum=0.5), lr=0.01,
                                        weight_decay=0.1)),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("complex_first,lr_change", [(False, False), (True, True)])
def test_optimizer_groups_match_torch_step_by_step(name, dtype, complex_first, lr_change):
    make_torch, make_ours = OPTIMIZERS[name]
    _torch_run(make_torch, make_ours, dtype, complex_first, lr_change)


SCHEDULERS = {
    "step+exponential": lambda L, o: [L.StepLR(o, 2, 0.5), L.ExponentialLR(o, 0.9)],
    "cosine+multistep": lambda L, o: [L.CosineAnnealingLR(o, 3, 0.001),
                                      L.MultiStepLR(o, [2, 2, 5], 0.5)],
    "lambda": lambda L, o: [L.LambdaLR(o, [lambda e: 1 / (1 + e), lambda e: 0.9 ** e])],
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
@pytest.mark.parametrize("lr_change", [False, True])
def test_chained_schedulers_match_torch(name, lr_change):
    import warnings

    def schedulers(torch, to, oo):
        return (SCHEDULERS[name](torch.optim.lr_scheduler, to),
                SCHEDULERS[name](optim.lr_scheduler, oo))

    make_torch, make_ours = OPTIMIZERS["adam"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _torch_run(make_torch, make_ours, np.float64, False, lr_change, schedulers, steps=9)


def _trained_adam(tensors, steps=3):
    opt = optim.Adam([{"params": tensors[:1]}, {"params": tensors[1:], "lr": 0.5}], lr=0.1)
    for k in range(steps):
        for p in tensors:
            p.grad = np.cos(p.data) * (k + 1)
        opt.step()
    return opt


def _tensors(sizes=(2, 3), dtype=np.float64):
    return [tnp.tensor(np.linspace(-1, 1, n).astype(dtype), requires_grad=True) for n in sizes]


def test_state_dict_is_a_copy_both_ways():
    ps = _tensors()
    opt = _trained_adam(ps)
    live = opt.state[ps[0]]["exp_avg"].copy()
    sd = opt.state_dict()
    sd["state"][0]["exp_avg"][:] = 99.0
    sd["param_groups"][1]["lr"] = 123.0
    np.testing.assert_array_equal(opt.state[ps[0]]["exp_avg"], live)
    assert opt.param_groups[1]["lr"] == 0.5
    sd = opt.state_dict()
    saved = sd["state"][0]["exp_avg"].copy()
    opt.load_state_dict(sd)
    for p in ps:
        p.grad = np.ones_like(p.data)
    opt.step()
    np.testing.assert_array_equal(sd["state"][0]["exp_avg"], saved)
    assert not any(np.shares_memory(s["exp_avg"], sd["state"][i]["exp_avg"])
                   for i, s in enumerate(opt.state[p] for p in ps))


def test_load_state_dict_refuses_other_layouts_and_keeps_the_optimizer():
    sd = _trained_adam(_tensors()).state_dict()
    p3 = _tensors((2, 3, 4))
    target = optim.Adam([{"params": p3[:1]}, {"params": p3[1:]}], lr=0.1)
    with pytest.raises(optim.OptimizerError, match="load_state_dict.*param_groups\\[1\\]"):
        target.load_state_dict(sd)
    with pytest.raises(optim.OptimizerError, match="load_state_dict.*parameter groups"):
        optim.Adam(_tensors(), lr=0.1).load_state_dict(sd)
    wrong = _tensors((5, 3))
    other = optim.Adam([{"params": wrong[:1]}, {"params": wrong[1:]}], lr=0.7)
    with pytest.raises(optim.OptimizerError, match="shape"):
        other.load_state_dict(sd)
    assert other.param_groups[0]["lr"] == 0.7 and not other.state_dict()["state"]
    with pytest.raises(optim.OptimizerError, match="lacks"):
        optim.Adam(_tensors((2,)), lr=0.1).load_state_dict(
            optim.SGD(_tensors((2,)), lr=0.1).state_dict())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pickled_state_dict_resumes_bit_for_bit(dtype):
    a, b = _tensors(dtype=dtype), _tensors(dtype=dtype)
    oa = _trained_adam(a)
    for p, q in zip(a, b):
        q.data[...] = p.data
    ob = optim.Adam([{"params": b[:1]}, {"params": b[1:]}], lr=0.7)
    ob.load_state_dict(pickle.loads(pickle.dumps(oa.state_dict())))
    assert ob.param_groups[1]["lr"] == 0.5
    for _ in range(3):
        for p, q in zip(a, b):
            p.grad, q.grad = np.sin(p.data), np.sin(q.data)
        oa.step()
        ob.step()
    for p, q in zip(a, b):
        assert q.data.dtype == dtype
        np.testing.assert_array_equal(p.data, q.data)
    oc = pickle.loads(pickle.dumps(oa))
    t0 = oc.param_groups[0]["params"][0]
    assert t0 in oc.state and oc.state[0] is oc.state[t0]


def test_group_attribute_writes_are_checked_before_any_group_changes():
    ps = _tensors()
    opt = optim.Adam([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.5}], lr=0.1)
    with pytest.raises(optim.OptimizerError, match="different values"):
        opt.lr
    opt.lr = 0.01
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.01]
    with pytest.raises(optim.OptimizerError, match="lr"):
        opt.lr = -1.0
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.01]
    with pytest.raises(optim.OptimizerError, match="beta2"):
        opt.betas = (0.8, 1.5)
    with pytest.raises(optim.OptimizerError, match="more than one"):
        opt.add_param_group({"params": ps[0]})
    with pytest.raises(optim.OptimizerError, match="lr"):
        opt.add_param_group({"params": _tensors((2,)), "lr": -0.2})
    assert len(opt.param_groups) == 2


# --- logsumexp(b=, return_sign=) ---------------------------------------------------------------


A2 = np.array([[0.3, -1.2, 2.0], [1.0, 0.5, -0.5]])
B2 = np.array([[1.0, 0.0, 2.0], [-1.0, 0.5, 0.3]])


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp_matches_scipy(axis, keepdims):
    special = pytest.importorskip("scipy.special", reason="compared with SciPy")
    ref = special.logsumexp(A2, axis=axis, b=B2, keepdims=keepdims, return_sign=True)
    got = tnp.logsumexp(A2, axis=axis, b=B2, keepdims=keepdims, return_sign=True)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-14)
    np.testing.assert_array_equal(got[1], ref[1])
    assert np.shape(got[0]) == np.shape(ref[0])
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(tnp.logsumexp(A2, axis=axis, b=B2, keepdims=keepdims),
                                   special.logsumexp(A2, axis=axis, b=B2, keepdims=keepdims))


def _lse_np(a, b):
    m = np.max(a[b != 0])
    return m + np.log(np.sum(b * np.exp(a - m)))


def test_logsumexp_derivative_in_a_zero_weight_is_not_zero():
    a, b = A2[0], B2[0]                     # b[1] == 0
    expected = np.exp(a - _lse_np(a, b))    # d/db_i log(sum b e^a) = e^{a_i} / sum
    np.testing.assert_allclose(_fd(lambda bb: _lse_np(a, bb), b), expected, rtol=1e-6)
    for grad in (tnp.grad(lambda bb: tnp.logsumexp(a, b=bb)),
                 tnp.jit(tnp.grad(lambda bb: tnp.logsumexp(a, b=bb))),
                 tnp.grad(lambda bb: tnp.logsumexp(a, b=bb, return_sign=True)[0])):
        np.testing.assert_allclose(grad(b), expected, rtol=1e-12)
    got = tnp.vmap(tnp.grad(lambda bb, aa: tnp.logsumexp(aa, b=bb)))(B2[:1], A2[:1])
    np.testing.assert_allclose(got[0], expected, rtol=1e-12)
    at = tnp.tensor(a, requires_grad=True)
    bt = tnp.tensor(b, requires_grad=True)
    tnp.logsumexp(at, b=bt).backward()
    np.testing.assert_allclose(bt.grad, expected, rtol=1e-12)
    np.testing.assert_allclose(at.grad, b * expected, rtol=1e-12)
    # the value keeps SciPy's rule: a weight-0 term adds nothing, even an infinite one
    inf_a = np.array([np.inf, 1.0, 800.0])
    zero_b = np.array([0.0, 1.0, 0.0])
    for dtype in (np.float64, np.float32):
        value, grad = tnp.value_and_grad(lambda bb: tnp.logsumexp(inf_a.astype(dtype), b=bb))(
            zero_b.astype(dtype))
        assert float(value) == 1.0 and np.asarray(value).dtype == dtype
        assert np.all(np.isfinite(grad)) and grad[1] == 1.0 and grad[0] == 0.0
        assert grad[2] > 1e30                 # e^{799}: beyond the dtype, capped, not NaN


def test_logsumexp_negative_sum_gives_nan_value_and_nan_derivative():
    b = -np.ones(3)
    with np.errstate(invalid="ignore"):
        value, grad = tnp.value_and_grad(lambda a: tnp.logsumexp(a, b=b))(A2[0])
    assert np.isnan(value)
    assert np.all(np.isnan(grad))           # a zero derivative of a NaN would be silent
    out, sign = tnp.logsumexp(A2[0], b=b, return_sign=True)
    assert sign == -1.0 and np.isfinite(out)


def test_logsumexp_against_jax_and_dtypes():
    jax = pytest.importorskip("jax", reason="compared with jax.scipy.special.logsumexp")
    jax.config.update("jax_enable_x64", True)
    from jax.scipy.special import logsumexp as jlse
    b = np.abs(B2) + 0.1
    for axis in (None, 0, 1):
        jg = jax.grad(lambda a, bb: jlse(a, axis=axis, b=bb).sum(), argnums=(0, 1))(A2, b)
        tg = tnp.grad(lambda a, bb: tnp.sum(tnp.logsumexp(a, axis=axis, b=bb)),
                      argnums=(0, 1))(A2, b)
        for x, y in zip(tg, jg):
            np.testing.assert_allclose(x, np.asarray(y), rtol=1e-12)
    for dtype in (np.float32, np.float64):
        a32, b32 = A2.astype(dtype), b.astype(dtype)
        assert np.asarray(tnp.logsumexp(a32, b=b32)).dtype == dtype
        assert all(np.asarray(v).dtype == dtype
                   for v in tnp.logsumexp(a32, axis=1, b=b32, return_sign=True))
        assert tnp.grad(lambda bb: tnp.logsumexp(a32, b=bb))(b32).dtype == dtype
    with pytest.raises(TiduError, match="logsumexp"):
        tnp.logsumexp(A2 + 1j, b=B2)


# --- reshape(order="F"), array(ndmin=) ---------------------------------------------------------


X3 = np.arange(24.0).reshape(2, 3, 4)


@pytest.mark.parametrize("shape", [(4, 6), (-1, 2), (24,), 24, (2, -1, 3), (4, 3, 2)])
def test_reshape_fortran_matches_numpy_and_transforms(shape):
    expected = np.reshape(X3, shape, order="F")
    for order in ("F", "f"):
        got = tnp.reshape(X3, shape, order=order)
        np.testing.assert_array_equal(got, expected)
        assert not np.shares_memory(got, X3)
    np.testing.assert_array_equal(tnp.tensor(X3).reshape(shape, order="F").data, expected)
    np.testing.assert_array_equal(tnp.jit(lambda v: tnp.reshape(v, shape, order="F"))(X3),
                                  expected)
    weights = np.arange(expected.size, dtype=float).reshape(expected.shape) + 1.0
    grad = tnp.grad(lambda v: tnp.sum(tnp.reshape(v, shape, order="F") * weights))(X3)
    np.testing.assert_array_equal(grad, np.reshape(weights, X3.shape, order="F"))
    batched = tnp.vmap(lambda v: tnp.reshape(v, (4, 3), order="F"))(X3)
    np.testing.assert_array_equal(batched, np.stack([m.reshape((4, 3), order="F") for m in X3]))


def test_reshape_orders_in_lower_case_and_errors_name_the_callers_shapes():
    np.testing.assert_array_equal(tnp.reshape(X3, (4, 6), order="c"), X3.reshape(4, 6))
    with pytest.raises(TiduError, match=r"shape \(2, 3, 4\) into \(5, 5\)"):
        tnp.reshape(X3, (5, 5), order="F")
    with pytest.raises(TiduError, match="order='A'"):
        tnp.reshape(X3, (4, 6), order="A")
    with pytest.raises(TiduError, match="order"):
        tnp.reshape(X3, (4, 6), order="Q")
    np.testing.assert_array_equal(tnp.reshape(X3, (4, 6), order="F"), X3.reshape(4, 6, order="F"))


@pytest.mark.parametrize("obj", [np.float64(3.0), 3.0, [1.0, 2.0], np.ones((2, 3)), [[1.0]]])
@pytest.mark.parametrize("ndmin", [0, 1, 2, 4])
def test_array_ndmin_matches_numpy(obj, ndmin):
    expected = np.array(obj, ndmin=ndmin)
    got = tnp.array(obj, ndmin=ndmin)
    assert np.shape(got) == expected.shape
    np.testing.assert_array_equal(np.asarray(got), expected)
    if isinstance(obj, np.ndarray):
        assert not np.shares_memory(got, obj)


def test_array_ndmin_under_transforms_and_on_tensors():
    v = np.array([1.0, 2.0])
    np.testing.assert_array_equal(tnp.grad(lambda a: tnp.sum(tnp.array(a, ndmin=3) * 2))(v),
                                  [2.0, 2.0])
    np.testing.assert_array_equal(
        tnp.grad(lambda a: tnp.sum(tnp.array([a, a], ndmin=4) * 2))(v), [4.0, 4.0])
    assert tnp.jit(lambda a: tnp.array(a, ndmin=3))(v).shape == (1, 1, 2)
    assert tnp.vmap(lambda a: tnp.array(a, ndmin=3))(np.ones((5, 2))).shape == (5, 1, 1, 2)
    t = tnp.tensor([[1.0, 2.0]], requires_grad=True)
    out = tnp.array(t, ndmin=2)
    assert out is not t and not np.shares_memory(out.data, t.data)
    tnp.sum(tnp.array(t, ndmin=3) * 3.0).backward()
    np.testing.assert_array_equal(t.grad, [[3.0, 3.0]])
    for bad in (-1, 2.0, "2"):
        with pytest.raises(TiduError, match="array: ndmin"):
            tnp.array([1.0], ndmin=bad)


# --- odeint in float32 -------------------------------------------------------------------------


def _rhs(y, t, k):
    return -k * y + tnp.sin(t)


def test_odeint_float32_dtypes_values_and_derivatives():
    y0 = np.array([1.0, 2.0], np.float32)
    ts = np.linspace(0, 1, 4).astype(np.float32)
    k = np.float32(0.7)
    ys = tnp.odeint(_rhs, y0, ts, k)
    assert ys.dtype == np.float32
    ref = tnp.odeint(_rhs, y0.astype(float), ts.astype(float), 0.7)
    np.testing.assert_allclose(ys, ref, rtol=2e-6)

    def loss(y0, ts, k):
        return tnp.sum(tnp.odeint(_rhs, y0, ts, k))

    g32 = tnp.grad(loss, argnums=(0, 1, 2))(y0, ts, k)
    g64 = tnp.grad(loss, argnums=(0, 1, 2))(y0.astype(float), ts.astype(float), 0.7)
    for a, b in zip(g32, g64):
        assert np.asarray(a).dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g64[2], _fd(lambda kk: tnp.sum(tnp.odeint(
        _rhs, y0.astype(float), ts.astype(float), float(kk))), np.array(0.7)), rtol=1e-6)
    assert tnp.jit(lambda y: tnp.odeint(_rhs, y, ts, k))(y0).dtype == np.float32
    assert tnp.vmap(lambda y: tnp.odeint(_rhs, y, ts, k))(np.stack([y0, y0])).dtype == np.float32
    gk = tnp.jit(tnp.grad(lambda kk: loss(y0, ts, kk)))(k)
    assert np.asarray(gk).dtype == np.float32
    np.testing.assert_allclose(gk, g64[2], rtol=1e-5)
    out = tnp.odeint(lambda y, t: {"a": -y["a"], "b": -y["b"]},
                     {"a": np.ones(2, np.float32), "b": np.ones(2)}, ts)
    assert out["a"].dtype == np.float32 and out["b"].dtype == np.float64
    assert tnp.odeint(lambda y, t: 1j * y, np.ones(2, np.complex64), ts).dtype == np.complex64
    y64 = np.ones(2)
    assert not np.shares_memory(tnp.odeint(lambda y, t: -y, y64, ts.astype(float)), y64)


def test_odeint_float32_against_jax():
    jax = pytest.importorskip("jax", reason="compared with jax.experimental.ode.odeint")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.experimental.ode import odeint as jodeint
    y0 = np.array([1.0, 2.0], np.float32)
    ts = np.linspace(0, 1, 4).astype(np.float32)
    k = np.float32(0.7)
    jf = lambda y, t, kk: -kk * y + jnp.sin(t)    # noqa: E731
    jg = jax.grad(lambda *a: jnp.sum(jodeint(jf, *a)), argnums=(0, 1, 2))(y0, ts, k)
    tg = tnp.grad(lambda *a: tnp.sum(tnp.odeint(_rhs, *a)), argnums=(0, 1, 2))(y0, ts, k)
    for a, b in zip(tg, jg):
        assert np.asarray(a).dtype == b.dtype == np.float32
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-5, atol=2e-6)
