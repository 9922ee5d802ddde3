"""``vmap``: a batched function equals a Python loop over its examples, for every in_axes and
out_axes form JAX allows, composed with every other transform in both orders, on arrays,
eager tensors and traced values; and bad uses raise errors that name the arguments."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import primitives.tensor as tnp
from primitives.tensor import (ConcretizationError, FunctionalError, grad, hessian, hvp, jacfwd,
                               jacrev, jit, jvp, vjp, vmap)
from tidu import TiduError

RNG = np.random.default_rng(0)


def loop(f, args, in_axes, out_axis=0):
    """The reference: ``f`` on each example, results stacked along ``out_axis``."""
    size = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [f(*[a if ax is None else np.take(a, n, axis=ax) for a, ax in zip(args, in_axes)])
            for n in range(size)]
    if isinstance(outs[0], tuple):
        return tuple(np.stack([np.asarray(o[k]) for o in outs], axis=out_axis)
                     for k in range(len(outs[0])))
    return np.stack([np.asarray(o) for o in outs], axis=out_axis)


def close(got, want, tol=1e-10):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            close(g, w, tol)
        return
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# (name, f, example shapes): f of arrays of those shapes, built from the tensor set
CASES = [
    ("elementwise", lambda a, b: tnp.sin(a) * b + tnp.exp(-a * a) / (b * b + 1.0), [(3,), (3,)]),
    ("broadcasting", lambda a, b: a[:, None] * b - tnp.tanh(b), [(3,), (3, 4)]),
    ("reductions", lambda a, b: tnp.sum(a * b, axis=0) + tnp.max(a, axis=0) - tnp.mean(b),
     [(2, 3), (2, 3)]),
    ("logsumexp", lambda a, b: tnp.logsumexp(a, axis=-1) * tnp.min(b), [(2, 4), (3,)]),
    ("matmul", lambda a, b: tnp.tanh(a @ b) @ tnp.transpose(b), [(2, 3), (3, 4)]),
    ("dot-einsum", lambda a, b: tnp.dot(a, b) + tnp.einsum("ij,j->i", tnp.outer(a, b), b),
     [(3,), (3,)]),
    ("shape-ops", lambda a, b: tnp.reshape(tnp.transpose(a), (-1,)) * tnp.ravel(b)[::-1],
     [(2, 3), (3, 2)]),
    ("indexing", lambda a, b: a[1:, ::2].sum() + a[[0, 1], 1] * b[2] + tnp.take(b, [2, 0]),
     [(2, 3), (3,)]),
    ("concat-stack-pad", lambda a, b: tnp.concatenate([a, tnp.pad(b, 1)]) + tnp.stack([a, a])[1]
     .sum(), [(3,), (1,)]),
    ("where-clip", lambda a, b: tnp.where(a > b, a, 2 * b) + tnp.clip(a, -0.5, 0.5), [(3,), (3,)]),
    ("maximum-abs", lambda a, b: tnp.maximum(a, b) * tnp.abs(b) + a ** 3, [(4,), (4,)]),
    ("cumsum-sort", lambda a, b: tnp.cumsum(a) + tnp.sort(b), [(4,), (4,)]),
]


def batched_args(shapes, in_axes, size, rng):
    args = []
    for shape, axis in zip(shapes, in_axes):
        if axis is None:
            args.append(rng.standard_normal(shape))
        else:
            full = list(shape)
            full.insert(axis % (len(shape) + 1), size)
            args.append(rng.standard_normal(full))
    return args


@pytest.mark.parametrize("name, f, shapes", CASES, ids=[c[0] for c in CASES])
def test_vmap_equals_the_loop_for_every_batch_axis(name, f, shapes):
    rng = np.random.default_rng(1)
    choices = [[None, 0, -1] + list(range(1, len(s) + 1)) for s in shapes]
    for axes in [(a, b) for a in choices[0] for b in choices[1]]:
        if axes == (None, None):
            continue
        args = batched_args(shapes, axes, 3, rng)
        normalized = [None if ax is None else ax % np.ndim(a) for a, ax in zip(args, axes)]
        close(vmap(f, in_axes=axes)(*args), loop(f, args, normalized))


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_vmap_of_random_programs_equals_the_loop(seed):
    """A random chain of tensor-set functions of a batched ``x`` and a shared ``w``."""
    rng = np.random.default_rng(seed)
    unary = [tnp.sin, tnp.tanh, lambda v: v * v, lambda v: tnp.exp(-v * v),
             lambda v: tnp.cumsum(v, axis=-1), lambda v: v[..., ::-1]]
    steps = [(rng.integers(4), rng.integers(len(unary))) for _ in range(rng.integers(2, 6))]

    def f(x, w):
        h = x
        for kind, u in steps:
            if kind == 0:
                h = unary[u](h)
            elif kind == 1:
                h = h * w + 0.5
            elif kind == 2:
                h = tnp.tanh(h @ tnp.reshape(w, (3, 1)) * tnp.ones((1, 3)))
            else:
                h = h - tnp.sum(h, axis=-1, keepdims=True) / 3
        return h

    axis = int(rng.integers(-3, 3))
    size = int(rng.integers(1, 4))
    x = rng.standard_normal((2, 3))
    xs = np.moveaxis(rng.standard_normal((size, 2, 3)), 0, axis % 3)
    w = rng.standard_normal(3)
    out_axis = int(rng.integers(-3, 3))
    got = vmap(f, in_axes=(axis, None), out_axes=out_axis)(xs, w)
    close(got, loop(f, [xs, w], [axis % 3, None], out_axis % 3))
    assert f(x, w).shape == (2, 3)


# --- in_axes and out_axes forms -----------------------------------------------------------


def test_in_axes_nested_tuples_dicts_and_prefixes():
    params = {"w": RNG.standard_normal((4, 3)), "b": RNG.standard_normal(3)}
    xs = RNG.standard_normal((5, 4))

    def f(p, x):
        return tnp.tanh(x @ p["w"] + p["b"])

    want = np.stack([f(params, x) for x in xs])
    close(vmap(f, in_axes=(None, 0))(params, xs), want)
    close(vmap(f, in_axes=({"w": None, "b": None}, 0))(params, xs), want)
    close(vmap(f, in_axes=[None, 0])(params, xs), want)          # a list: a tuple, as JAX
    # per-example parameters: the dict batched along a prefix of its structure
    ws = RNG.standard_normal((5, 4, 3))
    per_example = {"w": ws, "b": params["b"]}
    close(vmap(f, in_axes=({"w": 0, "b": None}, 0))(per_example, xs),
          np.stack([f({"w": w, "b": params["b"]}, x) for w, x in zip(ws, xs)]))
    # nested tuples, negative axes, and an argument that is a tuple batched as a whole
    pair = (RNG.standard_normal((3, 5)), RNG.standard_normal((5, 2)))
    close(vmap(lambda t, x: t[0] * x[0] + t[1][1] * x[1], in_axes=((-1, 0), 0))(pair, xs),
          np.stack([pair[0][:, n] * x[0] + pair[1][n][1] * x[1] for n, x in enumerate(xs)]))
    close(vmap(lambda t: t[0] + t[1], in_axes=(-1,))((pair[0], 2 * pair[0])), 3 * pair[0].T)


def test_keyword_arguments_are_batched_along_axis_0_as_in_jax():
    xs, scales = RNG.standard_normal((4, 3)), RNG.standard_normal(4)
    got = vmap(lambda x, scale: tnp.sum(x) * scale, in_axes=(0,))(xs, scale=scales)
    close(got, xs.sum(axis=1) * scales)


def test_unbatched_arguments_are_passed_as_they_are():
    """As in JAX: an argument with in_axes None reaches f unchanged (Python control flow on
    it works), and a non-array may be passed that way."""
    def f(x, n, mode):
        assert mode == "twice" and n == 3
        return x * n if n > 2 else x
    close(vmap(f, in_axes=(0, None, None))(np.arange(4.0), 3, "twice"), np.arange(4.0) * 3)


def test_out_axes_ints_negative_nested_and_none():
    xs = RNG.standard_normal((4, 2, 3))
    w = RNG.standard_normal(3)

    def f(x, w):
        return x * w, tnp.sum(w)                    # the second does not depend on x

    per = [f(x, w) for x in xs]
    products = np.stack([p[0] for p in per])
    for out_axes, axis in [(0, 0), (1, 1), (2, 2), (-1, 2), (-3, 0)]:
        got = vmap(lambda x: f(x, w)[0], out_axes=out_axes)(xs)
        close(got, np.moveaxis(products, 0, axis))
    a, s = vmap(f, in_axes=(0, None), out_axes=(1, None))(xs, w)
    close(a, np.moveaxis(products, 0, 1))
    close(s, np.asarray(np.sum(w)))                                 # returned once
    a, s = vmap(f, in_axes=(0, None))(xs, w)                        # broadcast to the batch
    close(s, np.full(4, np.sum(w)))
    d = vmap(lambda x: {"p": x * 2, "q": (x, tnp.sum(x))}, out_axes={"p": -1, "q": (0, 0)})(xs)
    close(d["p"], np.moveaxis(xs * 2, 0, -1))
    close(d["q"][1], xs.sum(axis=(1, 2)))


def test_size_zero_batch_and_constant_outputs():
    xs = np.zeros((0, 3))
    out = vmap(lambda x: tnp.sin(x) * 2 + tnp.sum(x))(xs)
    assert out.shape == (0, 3) and out.dtype == np.float64
    ones = vmap(lambda x: np.ones(2))(RNG.standard_normal((3, 5)))
    close(ones, np.ones((3, 2)))
    x = RNG.standard_normal((3, 2))
    same = vmap(lambda v: v)(x)
    close(same, x)
    assert same is not x                        # a new array, as JAX returns


def test_dtypes_float32_int_and_complex_are_kept():
    x32 = RNG.standard_normal((3, 4)).astype(np.float32)
    close(vmap(lambda v: tnp.tanh(v) @ v)(x32[:, :, None] * np.ones((1, 1, 4), np.float32)),
          loop(lambda v: tnp.tanh(v) @ v, [x32[:, :, None] * np.ones((1, 1, 4), np.float32)],
               [0]), tol=1e-5)
    ints = np.arange(12).reshape(3, 4)
    close(vmap(lambda v: v * 2 + tnp.sum(v))(ints), loop(lambda v: v * 2 + tnp.sum(v), [ints], [0]))
    z = RNG.standard_normal((3, 2)) + 1j * RNG.standard_normal((3, 2))
    close(vmap(lambda v: tnp.conj(v) * v + tnp.exp(v))(z),
          loop(lambda v: tnp.conj(v) * v + tnp.exp(v), [z], [0]))


# --- compositions -------------------------------------------------------------------------


def loss(w, x, y):
    return tnp.sum((tnp.tanh(x @ w) - y) ** 2)


W = RNG.standard_normal((3, 2))
XS = RNG.standard_normal((5, 3))
YS = RNG.standard_normal((5, 2))


def test_vmap_of_grad_is_per_example_gradients():
    got = vmap(grad(loss), in_axes=(None, 0, 0))(W, XS, YS)
    close(got, np.stack([grad(loss)(W, x, y) for x, y in zip(XS, YS)]))
    both = vmap(grad(loss, argnums=(0, 1)), in_axes=(None, 0, 0))(W, XS, YS)
    close(both, loop(lambda x, y: grad(loss, argnums=(0, 1))(W, x, y), [XS, YS], [0, 0]))


def test_grad_of_a_summed_vmap_is_the_batch_gradient():
    def total(w):
        return tnp.sum(vmap(loss, in_axes=(None, 0, 0))(w, XS, YS))
    close(grad(total)(W), sum(grad(loss)(W, x, y) for x, y in zip(XS, YS)))
    # w closed over rather than passed: the derivative still flows through
    close(grad(lambda w: tnp.sum(vmap(lambda x, y: loss(w, x, y))(XS, YS)))(W),
          grad(total)(W))


def test_vmap_of_vmap_and_in_the_other_axis():
    xs = RNG.standard_normal((4, 5, 3))

    def f(x):
        return tnp.sin(x) @ W
    close(vmap(vmap(f))(xs), np.stack([[f(x) for x in row] for row in xs]))
    close(vmap(vmap(f), in_axes=1, out_axes=1)(xs),
          np.stack([[f(x) for x in row] for row in xs]))
    close(vmap(vmap(lambda x, y: x * y, in_axes=(0, None)), in_axes=(None, 0))(
        np.arange(3.0), np.arange(4.0)), np.outer(np.arange(4.0), np.arange(3.0)))


def test_jit_of_vmap_and_vmap_of_jit():
    f = vmap(grad(loss), in_axes=(None, 0, 0))
    want = f(W, XS, YS)
    jitted = jit(f)
    close(jitted(W, XS, YS), want)
    close(jitted(W, XS, YS), want)                          # the compiled program
    close(jitted(W + 1.0, XS, YS), f(W + 1.0, XS, YS))       # no stale values
    close(vmap(jit(grad(loss)), in_axes=(None, 0, 0))(W, XS, YS), want)


def test_jvp_vjp_and_jacobians_of_vmap_and_the_other_order():
    f = vmap(lambda x: tnp.sin(x) * tnp.sum(x ** 2))
    xs, ts = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    per_row = [jvp(lambda x: tnp.sin(x) * tnp.sum(x ** 2), (x,), (t,)) for x, t in zip(xs, ts)]
    out, tangent = jvp(f, (xs,), (ts,))
    close(out, np.stack([p[0] for p in per_row]))
    close(tangent, np.stack([p[1] for p in per_row]))
    # vmap of jvp: the tangents batched too
    g = vmap(lambda x, t: jvp(lambda v: tnp.sin(v) * tnp.sum(v ** 2), (x,), (t,)))
    close(g(xs, ts), (out, tangent))
    out, pullback = vjp(f, xs)
    close(pullback(ts)[0], np.stack([vjp(lambda v: tnp.sin(v) * tnp.sum(v ** 2), x)[1](t)[0]
                                     for x, t in zip(xs, ts)]))
    # Jacobians of a vmapped function are block diagonal
    block = np.stack([jacfwd(lambda v: tnp.sin(v) * tnp.sum(v ** 2))(x) for x in xs])
    for jac in (jacfwd, jacrev):
        full = jac(f)(xs)
        assert full.shape == (4, 3, 4, 3)
        close(np.stack([full[n, :, n] for n in range(4)]), block)
        assert np.all(full[0, :, 1] == 0)
        close(vmap(jac(lambda v: tnp.sin(v) * tnp.sum(v ** 2)))(xs), block)


def test_second_order_under_vmap():
    def f(x):
        return tnp.sum(tnp.sin(x) * x[::-1]) + tnp.prod(x) ** 2

    xs, vs = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    close(vmap(hessian(f))(xs), np.stack([hessian(f)(x) for x in xs]))
    close(vmap(lambda x, v: hvp(f, (x,), (v,)))(xs, vs),
          np.stack([hvp(f, (x,), (v,)) for x, v in zip(xs, vs)]))
    close(vmap(grad(grad(lambda s: tnp.sin(s) * s ** 3)))(xs[:, 0]),
          np.stack([grad(grad(lambda s: tnp.sin(s) * s ** 3))(s) for s in xs[:, 0]]))
    # and the derivative of a vmapped gradient (grad of vmap of grad)
    close(grad(lambda w: tnp.sum(vmap(grad(loss), in_axes=(None, 0, 0))(w, XS, YS) ** 2))(W),
          grad(lambda w: tnp.sum(tnp.stack([grad(loss)(w, x, y) for x, y in zip(XS, YS)]) ** 2))(W))


def test_complex_per_example_gradients_follow_tidus_convention():
    """vmap(grad) equals the loop of grad, which is the conjugate of JAX's for complex x."""
    zs = RNG.standard_normal((4, 3)) + 1j * RNG.standard_normal((4, 3))

    def f(z):
        return tnp.sum(tnp.real(z * tnp.conj(z) * (1 + 2j) + tnp.sin(z)))
    got = vmap(grad(f))(zs)
    close(got, np.stack([grad(f)(z) for z in zs]))
    # f = |z|^2 + Re(sin z): the gradient is 2 z + conj(cos z) (JAX: its conjugate)
    close(got, 2 * zs + np.conj(np.cos(zs)))


def test_eager_tensors_as_arguments_carry_gradients():
    w = tnp.tensor(W, requires_grad=True)
    xs = tnp.tensor(XS)
    per_example = vmap(lambda x: tnp.tanh(x @ w))(xs)
    assert isinstance(per_example, tnp.Tensor)
    close(per_example.data, np.tanh(XS @ W))
    total = tnp.sum(per_example ** 2)
    gradients = total.backward()
    close(gradients.grad(w), grad(lambda v: tnp.sum(tnp.tanh(XS @ v) ** 2))(W))
    xt = tnp.tensor(XS, requires_grad=True)
    out = vmap(lambda x, v: tnp.sum(tnp.sin(x) * v), in_axes=(0, None))(xt, XS[0])
    close(out.backward(np.ones(5)).grad(xt), np.cos(XS) * XS[0])


def test_linalg_and_fft_under_vmap():
    mats = RNG.standard_normal((3, 4, 4)) + 4 * np.eye(4)
    for f in [tnp.linalg.inv, tnp.linalg.det, lambda a: tnp.linalg.solve(a, a[0]),
              lambda a: tnp.linalg.eigh(a @ tnp.transpose(a))[0],
              lambda a: tnp.real(tnp.fft.fft(a, axis=0)), lambda a: tnp.fft.irfft(tnp.fft.rfft(a))]:
        close(vmap(f)(mats), loop(f, [mats], [0]))
        moved = np.moveaxis(mats, 0, 2)
        close(vmap(f, in_axes=2)(moved), loop(f, [moved], [2]))
    close(vmap(grad(lambda a: tnp.linalg.slogdet(a)[1]))(mats),
          np.stack([np.linalg.inv(m).T for m in mats]))


# --- errors -------------------------------------------------------------------------------


def test_inconsistent_sizes_name_the_arguments():
    def f(x, y, *, scale):
        return x * y * scale
    with pytest.raises(FunctionalError) as error:
        vmap(f)(np.ones((3, 2)), np.ones((4, 2)), scale=np.ones(3))
    message = str(error.value)
    assert "inconsistent sizes" in message
    assert "size 3: axis 0 of argument x of type float64[3, 2], axis 0 of keyword argument " \
           "scale of type float64[3]" in message
    assert "size 4: axis 0 of argument y of type float64[4, 2]" in message
    with pytest.raises(FunctionalError, match=r"argument p\['b'\] of type float64\[2\]"):
        vmap(lambda p: p["a"] + p["b"])({"a": np.ones(3), "b": np.ones(2)})
    assert isinstance(error.value, TiduError) and isinstance(error.value, TypeError)


def test_bad_in_axes_and_out_axes_raise_clear_errors():
    x = np.ones((3, 2))
    bad = [
        (lambda: vmap(tnp.sin, in_axes=1.5), "in_axes must be an int, None or a tuple"),
        (lambda: vmap(tnp.sin, in_axes={"x": 0}), "in_axes must be an int, None or a tuple"),
        (lambda: vmap(tnp.sin, in_axes=(0, "a")), r"in_axes holds 'a'"),
        (lambda: vmap(lambda a, b: a * b, in_axes=(0,))(x, x), "in_axes has 1 entries"),
        (lambda: vmap(lambda p: p[0], in_axes=((0, 0),))((x,)), r"does not match its structure"),
        (lambda: vmap(lambda p: p, in_axes=({"a": 0},))({"b": x}), r"does not match"),
        (lambda: vmap(lambda p: p, in_axes=((0,),))(x), r"does not match"),
        (lambda: vmap(tnp.sin, in_axes=2)(x), r"map argument x along axis 2.* shape is \(3, 2\)"),
        (lambda: vmap(tnp.sin, in_axes=-3)(x), r"along axis -3"),
        (lambda: vmap(tnp.sin)(np.float64(2.0)), r"rank should be at least 1, but it is 0"),
        (lambda: vmap(lambda a: a, in_axes=(0,))("ab"), "is a str, which cannot be batched"),
        (lambda: vmap(lambda a, b: a + b, in_axes=None)(x, x), "no argument is batched"),
        (lambda: vmap(tnp.sin, out_axes=None)(x), "depends on the batched arguments, but its "
                                                  "out_axes is None"),
        (lambda: vmap(tnp.sin, out_axes=3)(x), "out_axes 3 for the output"),
        (lambda: vmap(tnp.sin, out_axes=(0, 1))(x), "out_axes .* does not match"),
        (lambda: vmap(lambda a: "s")(x), "returned str"),
    ]
    for call, pattern in bad:
        with pytest.raises(FunctionalError, match=pattern):
            call()
    close(vmap(tnp.sin)(x), np.sin(x))                  # still usable afterwards


def test_control_flow_on_a_batched_value_raises():
    with pytest.raises(ConcretizationError, match="traced by vmap of"):
        vmap(lambda x: x * 2 if x > 0 else x)(np.ones(3))
    with pytest.raises(ConcretizationError, match="vmap of"):
        vmap(lambda x: x * 2 if tnp.sum(x) > 0 else x, in_axes=1)(np.ones((3, 2)))
    with pytest.raises(TiduError):                      # float() of a batched value
        vmap(lambda x: x if float(tnp.sum(x)) > 0 else -x)(np.ones((3, 2)))


def test_escaped_tracer_of_vmap_raises():
    kept = []

    def f(x):
        kept.append(x)
        return x * 2
    vmap(f)(np.ones((2, 2)))
    with pytest.raises(FunctionalError, match="escaped tracer"):
        tnp.sin(kept[0])


# --- Jacobians batch their basis vectors ------------------------------------------------------


@pytest.mark.parametrize("batched_from", [1, 10**9])
def test_jacobians_over_batched_basis_vectors_equal_the_loop(monkeypatch, batched_from):
    """jacfwd/jacrev run their linear program on all basis vectors at once (tidu.batch) from
    a size on; both routes give the same blocks, also nested (hessian), complex and traced."""
    from primitives.tensor.transforms import functional

    monkeypatch.setattr(functional, "_BATCHED_BASIS_MIN", batched_from)
    rng = np.random.default_rng(5)
    w = rng.standard_normal((6, 5))
    x, y = rng.standard_normal(5), rng.standard_normal((2, 3))

    def f(a, b):
        return tnp.tanh(w @ tnp.sin(a)) * tnp.sum(b ** 2), tnp.sum(a) * b

    want = [[np.cos(x)[None, :] * w * (1 - np.tanh(w @ np.sin(x)) ** 2)[:, None] * np.sum(y ** 2),
             np.tanh(w @ np.sin(x))[:, None, None] * 2 * y[None]],
            [np.ones((2, 3, 5)) * y[:, :, None], np.sum(x) * np.eye(6).reshape(2, 3, 2, 3)]]
    for jac in (jacfwd, jacrev):
        got = jac(f, argnums=(0, 1))(x, y)
        for o in range(2):
            for i in range(2):
                np.testing.assert_allclose(got[o][i], want[o][i], rtol=1e-12, atol=1e-12)
    g = lambda a: tnp.sum(tnp.sin(a) * a[::-1]) + tnp.prod(a[:3]) ** 2
    h = hessian(g)(x)
    eps = 1e-6
    numeric = np.stack([(grad(g)(x + eps * e) - grad(g)(x - eps * e)) / (2 * eps)
                        for e in np.eye(5)])
    np.testing.assert_allclose(h, numeric, rtol=1e-6, atol=1e-6)
    # complex outputs of real inputs: both routes, as jacfwd
    z = lambda a: tnp.exp(1j * a) * a
    np.testing.assert_allclose(jacrev(z)(x), jacfwd(z)(x), rtol=1e-12, atol=1e-12)
    # a Jacobian inside grad: the batched program replays through grad's tracers
    np.testing.assert_allclose(
        grad(lambda a: tnp.sum(jacrev(lambda v: tnp.sin(v) * tnp.sum(v))(a) ** 2))(x),
        grad(lambda a: tnp.sum((np.eye(5) * tnp.cos(a)[:, None] * tnp.sum(a)
                                + tnp.sin(a)[:, None]) ** 2))(x), rtol=1e-10, atol=1e-10)
