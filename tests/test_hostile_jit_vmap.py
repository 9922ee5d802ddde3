"""Hostile uses of jit, vmap, traced indices, the closure rule, copies and custom rules:
each case either gives the right answer or raises a clear ``TiduError`` (the ones listed in
``CLEAR``); nothing in between. Run as a user porting JAX or PyTorch code would.
"""

from __future__ import annotations

import copy
import pickle
import sys
import threading

import numpy as np
import pytest

import primitives.tensor as tnp
from tidu import TiduError

CASES = {}
CLEAR = {
    "pickle tracer in vmap",
    "boolean mask under vmap(grad)",
    "bool & float",
    "~ on float tracer",
    "out-of-range in eager Tensor index tensor",
    "float index array clear error",
    "bfloat16 torch",
    "grad of function returning int",
    "custom_vjp bwd wrong shape",
}
NEEDS_TORCH = {
    "jit closure torch tensor",
    "jit result torch aliasing",
    "float16 torch through jit(grad)",
    "bfloat16 torch",
}


def case(name):
    def register(fn):
        CASES[name] = fn
        return fn

    return register


x = np.array([0.3, -0.7, 1.1, 2.0])


def eq(a, b) -> bool:
    return bool(np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), atol=1e-10))


@case("uint8 index under jit")
def _():
    return eq(tnp.jit(lambda v, i: v[i])(x, np.array([3, 1], np.uint8)), x[[3, 1]])


@case("int32 then int64 index")
def _():
    f = tnp.jit(lambda v, i: v[i])
    return eq(f(x, np.array([1], np.int32)), [x[1]]) and eq(f(x, np.array([2])), [x[2]])


@case("2-D traced index")
def _():
    return eq(
        tnp.jit(lambda v, i: v[i])(x, np.array([[0, 1], [2, 3]])), x[np.array([[0, 1], [2, 3]])]
    )


@case("repeated indices accumulate under jit grad")
def _():
    return eq(tnp.jit(tnp.grad(lambda v, i: tnp.sum(v[i])))(x, np.array([0, 0, 1])), [2, 1, 0, 0])


@case("list of 0-d tracers as index")
def _():
    return eq(tnp.jit(lambda v, i, j: v[[i, j]])(x, np.array(2), np.array(0)), x[[2, 0]])


@case("None with traced index")
def _():
    return eq(tnp.jit(lambda v, i: v[None, i])(x, np.array([1, 2])), x[None, [1, 2]])


@case("index as kwarg")
def _():
    return eq(tnp.jit(lambda v, i=None: v[i])(x, i=np.array([3])), [x[3]])


@case("jvp through traced index")
def _():
    out, t = tnp.jvp(lambda v: v[tnp.argmin(v)] * 2, (x,), (np.ones(4),))
    return eq(t, 2)


@case("vmap put_along_axis batched indices")
def _():
    A = np.zeros((3, 4))
    I = np.array([[1], [3], [0]])
    V = np.array([[5.0], [6.0], [7.0]])
    got = tnp.vmap(lambda a, i, v: tnp.put_along_axis(a, i, v, 0, inplace=False))(A, I, V)
    ref = A.copy()
    np.put_along_axis(ref, I, V, 1)
    return eq(got, ref)


@case("vmap take_along_axis grad")
def _():
    A = np.arange(12.0).reshape(3, 4)
    I = np.array([[1, 1], [3, 0], [0, 2]])
    g = tnp.grad(lambda a: tnp.sum(tnp.vmap(lambda r, i: tnp.take_along_axis(r, i, 0))(a, I) ** 2))(
        A
    )
    ref = np.zeros_like(A)
    for r in range(3):
        for c in I[r]:
            ref[r, c] += 2 * A[r, c]
    return eq(g, ref)


@case("closure int index array changes")
def _():
    IDX = np.array([0, 1])
    f = tnp.jit(lambda v: tnp.sum(v[IDX]))
    a = float(f(x))
    IDX[:] = [2, 3]
    return eq(a, x[0] + x[1]) and eq(f(x), x[2] + x[3])


@case("closure used for shape")
def _():
    V = np.ones(2)
    f = tnp.jit(lambda v: v * tnp.zeros(V.shape) + tnp.sum(V))
    a = f(np.ones(2))
    V = np.ones(3)
    return eq(a, [2, 2]) and eq(f(np.ones(3)), [3, 3, 3])


@case("closure deleted")
def _():
    g = {}
    exec(
        "import primitives.tensor as tnp\nimport numpy as np\nW = np.ones(2)\nf = tnp.jit(lambda v: v * W)",
        g,
    )
    f = g["f"]
    f(np.ones(2))
    del g["W"]
    try:
        f(np.ones(2))
        return False
    except NameError:
        return True


@case("list of params mutated")
def _():
    ps = [np.ones(2), np.ones(2)]
    f = tnp.jit(lambda v: tnp.sum(v * ps[0] + ps[1]))
    a = f(np.ones(2))
    ps[0] = np.full(2, 3.0)
    return eq(a, 4) and eq(f(np.ones(2)), 8)


@case("jit returns dict with one array twice")
def _():
    out = tnp.jit(lambda v: {"a": v * 2, "b": v * 2})(x)
    return not np.shares_memory(out["a"], out["b"])


@case("vjp_fn called twice")
def _():
    _, fn = tnp.vjp(lambda v: v * 3, x)
    a = fn(np.ones(4))[0]
    b = fn(np.ones(4))[0]
    return not np.shares_memory(a, b) and eq(a, 3)


@case("deepcopy dict of tracers inside grad")
def _():
    return eq(
        tnp.grad(lambda v: tnp.sum(copy.deepcopy({"k": (v, np.ones(4))})["k"][0] ** 2))(x), 2 * x
    )


@case("pickle tracer in vmap")
def _():
    tnp.vmap(lambda v: (pickle.dumps(v), v)[1])(x[:, None])
    return False


@case("copy.copy tensor leaf requires grad")
def _():
    t = tnp.tensor(x, requires_grad=True)
    c = copy.copy(t)
    y = tnp.sum(c * t)
    g = y.backward()
    return eq(g.grad(t), x)


@case("deepcopy of nonleaf under create_graph")
def _():
    t = tnp.tensor(x, requires_grad=True)
    y = copy.deepcopy(t * t)
    g = tnp.sum(y).backward(create_graph=True).grad(t)
    return eq(tnp.sum(g * 1.0).backward().grad(t), 2 * np.ones(4))


@case("grad argnums int arg named")
def _():
    try:
        tnp.grad(lambda a, b: a * b, argnums=1)(1.0, 2)
        return False
    except TiduError as e:
        return "argument 1" in str(e)


@case("boolean mask under vmap(grad)")
def _():
    tnp.vmap(tnp.grad(lambda v: tnp.sum(v[v > 0])))(x[None])
    return False


@case("bool & float")
def _():
    tnp.jit(lambda v: (v > 0) & v)(x)
    return False


@case("~ on float tracer")
def _():
    tnp.jit(lambda v: ~v)(x)
    return False


@case("jit of vmap of traced index")
def _():
    return eq(
        tnp.jit(tnp.vmap(lambda r, i: r[i]))(np.arange(6.0).reshape(2, 3), np.array([2, 0])), [2, 3]
    )


@case("hessian through take")
def _():
    return eq(
        tnp.hessian(lambda v: tnp.sum(tnp.take(v, np.array([1, 1])) ** 3))(x)[1, 1], 12 * x[1]
    )


@case("out-of-range in eager Tensor index tensor")
def _():
    t = tnp.tensor(x, requires_grad=True)
    t[tnp.tensor(np.array([9]))]
    return False


@case("jit: index from static-shaped arange plus traced offset")
def _():
    return eq(tnp.jit(lambda v, k: v[tnp.arange(2) + k])(x, np.array(2)), x[2:4])


@case("float index array clear error")
def _():
    tnp.jit(lambda v: v[v])(x)
    return False


@case("index with empty traced array")
def _():
    return tnp.jit(lambda v, i: v[i])(x, np.zeros(0, dtype=int)).shape == (0,)


@case("empty axis with traced index")
def _():
    return tnp.jit(lambda v, i: v[i])(np.zeros((0, 2)), np.zeros(0, dtype=int)).shape == (0, 2)


@case("grad(jit(f)) with closure written between calls")
def _():
    V = np.ones(4)
    f = tnp.jit(lambda v: tnp.sum(v * V))
    g = tnp.grad(f)
    a = g(x)
    V[:] = 3
    return eq(a, 1) and eq(g(x), 3)


@case("jit inside jit closure")
def _():
    V = np.ones(4)
    inner = tnp.jit(lambda v: v * V)
    outer = tnp.jit(lambda v: tnp.sum(inner(v)))
    a = outer(x)
    V[:] = 2
    return eq(a, x.sum()) and eq(outer(x), 2 * x.sum())


@case("jit static arg + closure")
def _():
    V = np.ones(4)
    f = tnp.jit(lambda v, n: tnp.sum(v**n * V), static_argnums=1)
    a = f(x, 2)
    V[:] = 0
    return eq(a, (x**2).sum()) and eq(f(x, 2), 0)


@case("jit on Tensor with closure")
def _():
    V = np.ones(4)
    f = tnp.jit(lambda v: tnp.sum(v * V))
    t = tnp.tensor(x, requires_grad=True)
    f(t)
    V[:] = 5
    return eq(f(t).backward().grad(t), 5)


@case("vmap with closure write")
def _():
    V = np.ones(4)
    f = tnp.vmap(lambda v: tnp.sum(v * V))
    first = f(x[None])
    V[:] = 2
    return eq(first, x.sum()) and eq(f(x[None]), 2 * x.sum())


@case("jit closure torch tensor")
def _():
    import torch

    V = torch.ones(4, dtype=torch.float64)
    f = tnp.jit(lambda v: v * V)
    first = f(torch.tensor(x)).numpy()
    V[:] = 3
    return eq(first, x) and eq(f(torch.tensor(x)).numpy(), 3 * x)


@case("jit result torch aliasing")
def _():
    import torch

    t = torch.tensor(x)
    r = tnp.jit(lambda v: v)(t)
    r[0] = 99
    return t[0].item() == x[0]


@case("8 threads first call of jit with closure")
def _():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    V = np.arange(4.0)
    f = tnp.jit(tnp.grad(lambda v: tnp.sum(v * V)))
    out, errs = [None] * 8, []
    b = threading.Barrier(8)

    def w(n):
        try:
            b.wait()
            out[n] = f(x + n)
        except Exception as e:
            errs.append(e)

    ts = [threading.Thread(target=w, args=(n,)) for n in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    sys.setswitchinterval(old)
    return not errs and all(eq(o, V) for o in out)


@case("8 threads vmap(grad) custom")
def _():
    @tnp.custom_jvp
    def f(v):
        return np.sin(v)

    @f.defjvp
    def fj(p, t):
        return f(p[0]), tnp.cos(p[0]) * t[0]

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    out, errs = [None] * 8, []
    b = threading.Barrier(8)

    def w(n):
        try:
            b.wait()
            out[n] = tnp.vmap(tnp.grad(lambda v: tnp.sum(f(v))))(np.ones((3, 4)) * n)
        except Exception as e:
            errs.append(e)

    ts = [threading.Thread(target=w, args=(n,)) for n in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    sys.setswitchinterval(old)
    return not errs and all(eq(o, np.cos(np.ones((3, 4)) * n)) for n, o in enumerate(out))


@case("float16 torch through jit(grad)")
def _():
    import torch

    g = tnp.jit(tnp.grad(lambda v: tnp.sum(v * v)))(torch.ones(3, dtype=torch.float16))
    return g.dtype == torch.float16 and eq(g.float().numpy(), 2)


@case("bfloat16 torch")
def _():
    import torch

    tnp.sin(torch.ones(3, dtype=torch.bfloat16))
    return False


@case("jit cache over 256 signatures with closure")
def _():
    V = np.ones(1)
    f = tnp.jit(lambda v: v * V)
    for n in range(1, 300):
        f(np.ones(n))
    V[:] = 2
    return eq(f(np.ones(3)), 2)


@case("grad of function returning int")
def _():
    tnp.grad(lambda v: tnp.argmax(v))(x)
    return False


@case("custom_vjp bwd wrong shape")
def _():
    @tnp.custom_vjp
    def h(v):
        return v

    h.defvjp(lambda v: (v, ()), lambda r, ct: (ct[:2],))
    tnp.grad(lambda v: tnp.sum(h(v)))(x)
    return False


@case("jit(grad) custom rule closure rebinding")
def _():
    F = np.array(2.0)

    @tnp.custom_jvp
    def h(v):
        return v * 1.0

    @h.defjvp
    def hj(p, t):
        return h(p[0]), t[0] * F

    s = tnp.jit(tnp.grad(lambda v: tnp.sum(h(v))))
    a = s(x)
    F = np.array(3.0)
    return eq(a, 2) and eq(s(x), 3)


@case("deepcopy of jitted function output then reuse")
def _():
    f = tnp.jit(lambda v: v * 2)
    a = copy.deepcopy(f(x))
    a[:] = 0
    return eq(f(x), 2 * x)


@case("linspace grad start/stop")
def _():
    return eq(tnp.grad(lambda a: tnp.sum(tnp.linspace(a, 2.0, 5)))(np.array(0.0)), 2.5)


@case("full traced fill under jit grad")
def _():
    return eq(tnp.jit(tnp.grad(lambda a: tnp.sum(tnp.full((3,), a))))(np.array(1.0)), 3)


@case("transpose list on tracer")
def _():
    return tnp.jit(lambda v: v.transpose([1, 0, 2]))(np.zeros((2, 3, 4))).shape == (3, 2, 4)


@case("eigh UPLO=U equals numpy")
def _():
    a = np.random.default_rng(0).normal(size=(4, 4))
    w, v = tnp.linalg.eigh(a, UPLO="U")
    W, Vn = np.linalg.eigh(a, UPLO="U")
    return np.array_equal(w, W) and np.array_equal(v, Vn)


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_case(name):
    if name in NEEDS_TORCH:
        pytest.importorskip("torch", reason="PyTorch is not installed")
    if name in CLEAR:
        with pytest.raises(TiduError):
            CASES[name]()
    else:
        assert CASES[name]() in (True, np.True_), name
