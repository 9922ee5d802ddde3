"""Hostile uses of what surrounds the transforms (random, nn, optim, ravel_pytree, odeint,
fixed_point, scipy.special/stats/signal, the new NumPy names, autograd's optimizers): each
gives the right answer or a clear ``TiduError`` (the cases in ``CLEAR``)."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from tensor_helpers import numeric_grad
from tidu import TiduError

CASES = {}
CLEAR = {"random under jit", "polygamma order grad"}


def case(name):
    def register(fn):
        CASES[name] = fn
        return fn

    return register


def eq(a, b) -> bool:
    return bool(np.allclose(np.asarray(a, float), np.asarray(b, float), atol=1e-9))


x = np.array([0.3, -0.7, 1.1])


@case("random under jit")
def _():
    tnp.jit(lambda v: v + tnp.random.randn(3))(x)
    return False


@case("random under grad ok")
def _():
    tnp.random.seed(0)
    g = tnp.grad(lambda v: tnp.sum(v * tnp.random.randn(3)))(x)
    tnp.random.seed(0)
    return eq(g, tnp.random.randn(3))


@case("nn.softmax grad vs fd")
def _():
    f = lambda v: tnp.sum(tnp.nn.softmax(v) * np.array([1.0, 2.0, 3.0]))
    return eq(tnp.grad(f)(x), numeric_grad(f, x))


@case("nn.one_hot traced labels jit")
def _():
    return eq(tnp.jit(lambda y: tnp.nn.one_hot(y, 3))(np.array([2, 0])), np.eye(3)[[2, 0]])


@case("nn.relu grad at 0")
def _():
    return eq(tnp.grad(lambda v: tnp.sum(tnp.nn.relu(v)))(np.array([0.0, 1.0])), [0.0, 1.0])


@case("optim adam jit step")
def _():
    opt = tnp.optim.adam(0.1)
    p = {"w": np.ones(2)}
    s = opt.init(p)

    @tnp.jit
    def step(p, s):
        g = tnp.grad(lambda q: tnp.sum(q["w"] ** 2))(p)
        u, s = opt.update(g, s, p)
        return tnp.optim.apply_updates(p, u), s

    for _ in range(50):
        p, s = step(p, s)
    return float(np.abs(p["w"]).max()) < 0.5


@case("ravel_pytree grad")
def _():
    flat, un = tnp.ravel_pytree({"a": np.ones(2), "b": np.array(3.0)})
    return eq(flat, [1.0, 1.0, 3.0]) and eq(
        tnp.grad(lambda f: tnp.sum(un(f)["a"] * un(f)["b"]))(flat), [3.0, 3.0, 2.0]
    )


@case("odeint vmap over y0")
def _():
    f = lambda y, t: -y
    ys = tnp.vmap(lambda y0: tnp.odeint(f, y0, np.array([0.0, 1.0]))[-1])(np.array([[1.0], [2.0]]))
    return eq(ys, np.exp(-1) * np.array([[1.0], [2.0]]))


@case("odeint jit grad closure param")
def _():
    k = np.array(0.5)
    L = tnp.jit(
        tnp.grad(lambda y0: tnp.sum(tnp.odeint(lambda y, t: -k * y, y0, np.array([0.0, 1.0]))))
    )
    a = L(np.array([1.0]))
    k[...] = 1.0
    b = L(np.array([1.0]))
    return eq(a, 1 + np.exp(-0.5)) and eq(b, 1 + np.exp(-1.0))


@case("fixed_point grad in eager Tensor")
def _():
    a = tnp.tensor(np.array(4.0), requires_grad=True)
    x = tnp.fixed_point(lambda a, x: 0.5 * (x + a / x), a, np.array(1.0))
    return eq(x.backward().grad(a), 0.25)


@case("scipy.stats.norm.logpdf vmap grad")
def _():
    g = tnp.vmap(tnp.grad(lambda m: tnp.scipy.stats.norm.logpdf(1.0, m, 2.0)))(np.array([0.0, 1.0]))
    return eq(g, (1.0 - np.array([0.0, 1.0])) / 4)


@case("scipy.special.gammaln grad jit")
def _():
    import scipy.special as sp

    return eq(
        tnp.jit(tnp.grad(lambda v: tnp.sum(tnp.scipy.special.gammaln(v))))(np.array([2.0, 3.5])),
        sp.digamma([2.0, 3.5]),
    )


@case("polygamma order grad")
def _():
    tnp.grad(lambda n: tnp.scipy.special.polygamma(n, 2.0))(np.array(1.0))
    return False


@case("signal.convolve grad")
def _():
    k = np.array([1.0, -2.0, 0.5])
    f = lambda v: tnp.sum(tnp.scipy.signal.convolve(v, k, mode="same") ** 2)
    return eq(tnp.grad(f)(x), numeric_grad(f, x))


@case("gradient fn grad")
def _():
    f = lambda v: tnp.sum(tnp.gradient(v) ** 2)
    return eq(tnp.grad(f)(x), numeric_grad(f, x))


@case("nanmean grad with nan")
def _():
    return eq(tnp.grad(lambda v: tnp.nanmean(v))(np.array([1.0, np.nan, 3.0])), [0.5, 0.0, 0.5])


@case("vectorize under grad")
def _():
    f = tnp.vectorize(lambda a, b: a * tnp.sin(b))
    return eq(tnp.grad(lambda v: tnp.sum(f(v, 2.0)))(x), np.sin(2.0) * np.ones(3))


@case("misc.optimizers.sgd pytree")
def _():
    from primitives.tensor.misc.optimizers import sgd

    p = sgd(tnp.grad(lambda p, i: tnp.sum(p["a"] ** 2)), {"a": np.ones(2)}, num_iters=300)
    return float(np.abs(p["a"]).max()) < 1e-3


@case("torch-style Adam on tensors")
def _():
    w = tnp.tensor(np.ones(2), requires_grad=True)
    opt = tnp.optim.Adam([w], lr=0.1)
    for _ in range(100):
        tnp.sum(w * w).backward()
        opt.step()
        opt.zero_grad()
    return float(np.abs(w.data).max()) < 0.2 and w.grad is None


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_case(name):
    pytest.importorskip("scipy", reason="scipy.special/stats/signal need SciPy")
    if name in CLEAR:
        with pytest.raises(TiduError):
            CASES[name]()
    else:
        assert CASES[name]() in (True, np.True_), name
