"""``jit``: the same results as the function, traced once per signature, composing with the
other transforms in both orders, and refusing to bake traced values into the program."""

import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import primitives.tensor as tnp
from primitives.tensor import FunctionalError
from primitives.tensor import jit
from primitives.tensor import ConcretizationError
from tidu import TiduError

RNG = np.random.default_rng(0)
X = RNG.standard_normal(6)
M = RNG.standard_normal((3, 4))
N = RNG.standard_normal((4, 2))

# (name, function, arguments): every front-end function, through jit
CASES = [
    ("exp", lambda a: tnp.exp(a), (X,)),
    ("log", lambda a: tnp.log(tnp.abs(a) + 1.0), (X,)),
    ("sin-cos", lambda a: tnp.sin(a) * tnp.cos(a), (X,)),
    ("tanh-sqrt", lambda a: tnp.tanh(a) + tnp.sqrt(a * a + 1.0), (X,)),
    ("arith", lambda a, b: (a + b) * (a - b) / (b * b + 1.0) - (-a), (X, X[::-1].copy())),
    ("power", lambda a: a ** 3 + tnp.power(a * a + 1.0, 0.5), (X,)),
    ("abs-sign", lambda a: tnp.abs(a) * tnp.sign(a), (X,)),
    ("max-min", lambda a: tnp.maximum(a, 0.1) + tnp.minimum(a, -0.1), (X,)),
    ("where", lambda a: tnp.where(a > 0, a, 2 * a), (X,)),
    ("clip", lambda a: tnp.clip(a, -0.5, 0.5), (X,)),
    ("sum-mean", lambda a: tnp.sum(a, axis=0) + tnp.mean(a, axis=1, keepdims=True), (M,)),
    ("reduce-max", lambda a: tnp.max(a, axis=1) - tnp.min(a), (M,)),
    ("logsumexp", lambda a: tnp.logsumexp(a, axis=1), (M,)),
    ("reshape-transpose", lambda a: tnp.transpose(tnp.reshape(a, (4, 3))) * 2.0, (M,)),
    ("broadcast", lambda a: tnp.broadcast_to(a[0], (3, 4)) + tnp.expand_dims(a[:, 0], 1), (M,)),
    ("squeeze", lambda a: tnp.squeeze(a[:1]), (M,)),
    ("matmul", lambda a, b: a @ b, (M, N)),
    ("dot-outer", lambda a: tnp.dot(a, a) + tnp.outer(a, a), (X,)),
    ("tensordot", lambda a, b: tnp.tensordot(a, b, axes=1), (M, N)),
    ("einsum", lambda a, b: tnp.einsum("ij,jk->ik", a, b) + tnp.einsum("ii", a[:, :3]), (M, N)),
    ("indexing", lambda a: a[1:, ::2] + a[[0, 2], 1:3].sum() + a[..., None][0, 0], (M,)),
    ("take", lambda a: tnp.take(a, [3, 0, 0]), (X,)),
    ("concat-stack", lambda a: tnp.concatenate([a, a * 2]) + tnp.stack([a, a])[1].sum(), (X,)),
    ("pad", lambda a: tnp.pad(a, 1, constant_values=0.5), (X,)),
    ("astype", lambda a: tnp.astype(a, np.float32) * 2, (X,)),
    ("complex", lambda a: tnp.real(a * (1 + 2j)) + tnp.imag(tnp.conj(a * 1j)), (X,)),
    ("numpy-dispatch", lambda a: np.sum(np.where(a > 0, np.exp(a), a)), (X,)),
    ("list-stack", lambda a: tnp.sum([a, 2 * a], axis=0), (X,)),
    ("stop-gradient", lambda a: a * tnp.stop_gradient(a), (X,)),
]


@pytest.mark.parametrize("name, f, args", CASES, ids=[c[0] for c in CASES])
def test_jit_gives_the_functions_results(name, f, args):
    expected = f(*args)
    jitted = jit(f)
    for _ in range(2):                          # the trace, then the compiled program
        got = jitted(*args)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        assert np.asarray(got).dtype == np.asarray(expected).dtype
    shifted = [a + 0.25 for a in args]          # same signature, new values: no stale data
    np.testing.assert_allclose(jitted(*shifted), f(*shifted), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name, f, args", [c for c in CASES if c[0] not in (
    "astype", "numpy-dispatch")], ids=[c[0] for c in CASES if c[0] not in ("astype",
                                                                          "numpy-dispatch")])
def test_jit_of_grad_and_grad_of_jit(name, f, args):
    loss = lambda *a: tnp.sum(tnp.real(f(*a)) ** 2)      # noqa: E731
    expected = tnp.grad(loss, argnums=tuple(range(len(args))))(*args)
    for transformed in (jit(tnp.grad(loss, argnums=tuple(range(len(args))))),
                        tnp.grad(jit(loss), argnums=tuple(range(len(args))))):
        for _ in range(2):
            got = transformed(*args)
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


def _loss(w, x):
    return tnp.sum(tnp.tanh(x @ w) ** 2)


W = RNG.standard_normal((4, 2))


def _no_jit(f, static_argnums=()):
    return f


@pytest.mark.parametrize("compose", [
    lambda j: j(tnp.value_and_grad(_loss)),
    lambda j: tnp.value_and_grad(j(_loss)),
    lambda j: j(j(tnp.grad(_loss))),
    lambda j: j(lambda w, x: tnp.hvp(lambda v: _loss(v, x), [w], [np.ones_like(w)])),
    lambda j: lambda w, x: tnp.hvp(j(lambda v: _loss(v, x)), [w], [np.ones_like(w)]),
    lambda j: lambda w, x: tnp.jvp(j(_loss), (w, x), (np.ones_like(w), np.zeros_like(x))),
    lambda j: j(lambda w, x: tnp.jvp(_loss, (w, x), (np.ones_like(w), np.zeros_like(x)))),
    lambda j: lambda w, x: tnp.vjp(j(_loss), w, x)[1](np.float64(1.0)),
    lambda j: j(lambda w, x: tnp.vjp(_loss, w, x)[1](np.float64(1.0))),
], ids=["jit(value_and_grad)", "value_and_grad(jit)", "jit(jit(grad))", "jit(hvp)",
        "hvp(jit)", "jvp(jit)", "jit(jvp)", "vjp(jit)", "jit(vjp)"])
def test_compositions_agree_with_the_untransformed_function(compose):
    """Each composition with ``jit`` against the same composition without it."""
    reference = _leaves(compose(_no_jit)(W, M))
    transformed = compose(jit)
    for _ in range(2):                          # the trace, then the compiled program
        got = _leaves(transformed(W, M))
        assert len(got) == len(reference)
        for g, r in zip(got, reference):
            np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12)


def _leaves(tree):
    from primitives.tensor.transforms.pytree import tree_flatten
    return tree_flatten(tree)[0]


def test_traced_once_per_signature():
    calls = []

    @jit
    def f(x, scale):
        calls.append((np.shape(x), x.dtype))
        return tnp.sum(x * scale)

    f(np.ones(3), 2.0)
    f(np.zeros(3), 5.0)                               # same shapes and dtypes
    assert len(calls) == 1
    f(np.ones(4), 2.0)                                # new shape
    f(np.ones(3, np.float32), 2.0)                    # new dtype
    f(np.ones(3), np.float32(2.0))                    # scale's dtype changed
    assert len(calls) == 4
    assert float(f(np.full(3, 2.0), 3.0)) == 18.0 and len(calls) == 4


def test_static_arguments_are_part_of_the_signature():
    calls = []

    def f(x, n, mode="sum"):
        calls.append(n)
        out = x ** n
        return tnp.sum(out) if mode == "sum" else tnp.mean(out)
    g = jit(f, static_argnums=1)
    assert float(g(np.full(2, 2.0), 2)) == 8.0 and float(g(np.full(2, 2.0), 3)) == 16.0
    assert float(g(np.full(2, 3.0), 2)) == 18.0 and calls == [2, 3]
    h = jit(f, static_argnums=(1, -1))
    assert float(h(np.full(2, 2.0), 2, "mean")) == 4.0
    with pytest.raises(FunctionalError, match="not hashable"):
        jit(lambda x, s: x, static_argnums=1)(np.ones(2), [1, 2])
    with pytest.raises(FunctionalError, match="static_argnums"):
        jit(lambda x: x, static_argnums=3)(np.ones(2))


def test_pytrees_in_and_out():
    params = {"w": W, "b": np.zeros(2), "layers": [np.ones(2), None]}

    def f(p, x, *, scale):
        y = tnp.tanh(x @ p["w"] + p["b"]) * p["layers"][0] * scale
        return {"sum": tnp.sum(y), "parts": (y, [p["b"]])}
    got = jit(f)(params, M, scale=2.0)
    want = f(params, M, scale=2.0)
    assert set(got) == {"sum", "parts"} and isinstance(got["parts"], tuple)
    np.testing.assert_allclose(got["sum"], want["sum"])
    np.testing.assert_allclose(got["parts"][0], want["parts"][0])
    grads = jit(tnp.grad(lambda w, b: tnp.sum(f({"w": w, "b": b, "layers": [np.ones(2)]},
                                                   M, scale=1.0)["parts"][0]),
                         argnums=(0, 1)))(W, np.zeros(2))
    assert grads[0].shape == W.shape and grads[1].shape == (2,)


@pytest.mark.parametrize("body, what", [
    (lambda v: v if tnp.sum(v) > 0 else -v, "bool()"),
    (lambda v: v * float(tnp.sum(v)), "float()"),
    (lambda v: v[int(tnp.argmax(v)) if hasattr(tnp, "argmax") else int(tnp.sum(v > 0))], "int()"),
    (lambda v: np.asarray(v) * 2, "NumPy array"),
    (lambda v: np.unique(v), "numpy.unique"),
])
def test_values_are_not_read_while_jit_traces(body, what):
    x = np.arange(1.0, 4.0)
    with pytest.raises(TiduError) as info:
        jit(body)(x)
    assert isinstance(info.value, (ConcretizationError, TiduError))
    assert "jit" in str(info.value) or "drop" in str(info.value) or "numpy" in str(info.value)
    np.testing.assert_allclose(jit(lambda v: v * 2)(x), 2 * x)        # still usable


def test_traced_index_values_are_data_not_read_while_tracing():
    x = np.arange(1.0, 4.0)
    f = jit(lambda v: v[np.asarray([0, 1]) + tnp.astype(v[:2], np.int64) - 1])
    np.testing.assert_array_equal(f(x), x[[0, 2]])
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 3"):
        f(x + 1)                                  # the same program, checked when it runs


def test_integer_arguments_and_static_branching():
    def f(x, n):
        for _ in range(n):                     # Python control flow on a static value
            x = tnp.sin(x)
        return x
    g = jit(f, static_argnums=1)
    np.testing.assert_allclose(g(X, 3), np.sin(np.sin(np.sin(X))))
    with pytest.raises(ConcretizationError, match="static"):
        jit(f)(X, 3)                           # n traced: range(n) needs its value


def test_eager_tensors_through_jit_keep_their_gradients():
    f = jit(lambda w, x: tnp.sum(tnp.tanh(x @ w) ** 2))
    f(W, M)                                    # traced with arrays
    w = tnp.tensor(W, requires_grad=True)
    loss = f(w, tnp.tensor(M))                 # replayed on tensors: recorded eagerly
    np.testing.assert_allclose(loss.backward().grad(w), tnp.grad(_loss)(W, M))
    w2 = tnp.tensor(W, requires_grad=True)
    f2 = jit(lambda x: tnp.sum(tnp.tanh(x @ w2) ** 2))   # closes over a tensor
    np.testing.assert_allclose(f2(M).backward().grad(w2), tnp.grad(_loss)(W, M))
    np.testing.assert_allclose(f2(M).backward().grad(w2), tnp.grad(_loss)(W, M))


def test_transform_errors_under_jit():
    assert jit(lambda v: None)(X) is None                 # an empty pytree, as in JAX
    with pytest.raises(FunctionalError, match="returned str"):
        jit(lambda v: "loss")(X)
    with pytest.raises(FunctionalError, match="str"):
        jit(lambda v: v)("abc")
    leak = []
    jit(lambda v: (leak.append(v), v)[1])(X)
    with pytest.raises(FunctionalError, match="escaped tracer"):
        leak[0] + 1.0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["sin", "exp", "square", "sum0", "neg", "where", "mul"]),
                min_size=1, max_size=6),
       st.integers(1, 4), st.integers(1, 3))
def test_random_programs_jit_like_the_function(names, n, m):
    steps = {"sin": tnp.sin, "exp": lambda v: tnp.exp(v * 0.3), "square": lambda v: v * v,
             "sum0": lambda v: tnp.sum(v, axis=0, keepdims=True) + v, "neg": lambda v: -v,
             "where": lambda v: tnp.where(v > 0.2, v, v * 0.5), "mul": lambda v: v * v[:1]}

    def program(v):
        for name in names:
            v = steps[name](v)
        return tnp.sum(v * v)
    x = np.random.default_rng(len(names) * 7 + n).standard_normal((n, m))
    np.testing.assert_allclose(jit(program)(x), program(x), rtol=1e-12)
    np.testing.assert_allclose(jit(tnp.grad(program))(x), tnp.grad(program)(x), rtol=1e-10)
    np.testing.assert_allclose(tnp.grad(jit(program))(x), tnp.grad(program)(x), rtol=1e-10)


def test_a_returned_constant_cannot_be_changed_through_the_result():
    table = np.arange(3.0)
    f = jit(lambda v: (v * 2, table))
    f(X[:3])
    first = f(X[:3])[1]
    first[:] = -1.0                            # the caller owns what it got
    np.testing.assert_array_equal(f(X[:3])[1], np.arange(3.0))


def test_jit_sums_a_bias_gradient_before_the_products_that_read_its_cotangent(monkeypatch):
    """``jit`` runs each ``reduce_sum`` as soon as its operand exists (``tidu.hoisted``): a
    layer's bias gradient reads the layer's cotangent before the weight gradient's product
    does, the order PyTorch's autograd has; the results are those of the function."""
    from primitives.tensor.ops.dot import DotGeneral
    from primitives.tensor.ops.shape import ReduceSum

    rng = np.random.default_rng(1)
    ps = [rng.standard_normal((5, 4)), rng.standard_normal(4),
          rng.standard_normal((4, 3)), rng.standard_normal(3)]
    x = rng.standard_normal((6, 5))

    def loss(ps, x):
        h = tnp.tanh(x @ ps[0] + ps[1])
        return tnp.sum((h @ ps[2] + ps[3]) ** 2)

    expected = tnp.grad(loss)(ps, x)
    step = tnp.jit(tnp.grad(loss))
    step(ps, x)                                         # traced
    order = []
    for cls, name in ((ReduceSum, "sum"), (DotGeneral, "product")):
        def logged(self, ctx, inputs, _eval=cls.eval, _name=name):
            order.append((_name, inputs[-1].shape if _name == "sum" else
                          (inputs[0].shape, inputs[1].shape)))
            return _eval(self, ctx, inputs)
        monkeypatch.setattr(cls, "eval", logged)
    got = step(ps, x)
    monkeypatch.undo()
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12)
    sums = [i for i, (name, _) in enumerate(order) if name == "sum"]
    weight_products = [i for i, (name, shapes) in enumerate(order)
                       if name == "product" and shapes[0][0] == 6 and shapes[1][0] == 6]
    assert len(sums) == 2 and len(weight_products) == 2
    # each bias sum (of the (6, 3) then the (6, 4) cotangent) before its layer's xᵀ·ct
    assert sums[0] < min(weight_products) and sums[1] < max(weight_products)
    # the top layer's weight gradient hᵀ·ct runs before the layer below's, not after the
    # whole backward pass: h is read for the last time by tanh's derivative
    assert order[weight_products[0]][1] == ((6, 4), (6, 3))
    assert order[weight_products[1]][1] == ((6, 5), (6, 4))


def test_jit_moves_up_products_no_bigger_than_their_operands_only():
    """An outer product, bigger than its operands, is never run earlier than the graph
    has it: moving it up would hold its result for longer."""
    jit_module = sys.modules["primitives.tensor.transforms.jit"]
    from primitives.tensor.ops.dot import DotGeneral

    no_batch = ((), ())
    outer = DotGeneral((((1,), (0,)), no_batch), (100, 1), (1, 100))
    weight_gradient = DotGeneral((((0,), (0,)), no_batch), (256, 512), (256, 10))
    assert not jit_module._shrinking_product(outer)
    assert jit_module._shrinking_product(weight_gradient)


def test_jit_with_hoisted_sums_composes_and_returns_fresh_current_results():
    """The reordered program (sums first) under ``grad`` and ``vmap`` in both orders: the
    values of ``grad``; a result written into changes no later call; a closed-over array
    written between calls is read again."""
    rng = np.random.default_rng(4)
    ps = [rng.standard_normal((5, 4)), rng.standard_normal(4)]
    x = rng.standard_normal((6, 5))
    scale = np.array([2.0])

    def loss(ps, x):
        return tnp.sum(tnp.tanh(x @ ps[0] + ps[1]) * scale)

    for f in (tnp.grad(tnp.jit(loss)), tnp.jit(tnp.grad(loss))):
        expected = tnp.grad(loss)(ps, x)
        got = f(ps, x)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-12)
        got[1][:] = 99.0                                  # a result written into
        for g, e in zip(f(ps, x), expected):
            np.testing.assert_allclose(g, e, rtol=1e-12)
        scale[0] = 3.0                                    # the closure, between calls
        for g, e in zip(f(ps, x), tnp.grad(loss)(ps, x)):
            np.testing.assert_allclose(g, e, rtol=1e-12)
        scale[0] = 2.0
    xs = np.stack([x, 2 * x])
    per_row = [tnp.grad(loss)(ps, row) for row in xs]
    for f in (tnp.vmap(tnp.jit(tnp.grad(loss)), in_axes=(None, 0)),
              tnp.jit(tnp.vmap(tnp.grad(loss), in_axes=(None, 0)))):
        got = f(ps, xs)
        for k in range(2):
            np.testing.assert_allclose(got[k], np.stack([r[k] for r in per_row]), rtol=1e-12)


def test_jit_signature_tells_dtypes_byte_orders_and_python_numbers_apart():
    """The signature is each argument's shape and dtype: a big-endian array of a native
    array's shape traces again (with its own result dtype and values), a Python number
    traces apart from a 0-d array (it promotes as a number), and each call's results are
    its own."""
    traces = []

    @jit
    def f(x, s):
        traces.append(1)
        return x * s

    native = np.arange(3.0)
    swapped = native.astype(">f8")
    first = f(native, 2.0)
    np.testing.assert_array_equal(first, [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(f(native, 3.0), [0.0, 3.0, 6.0])
    assert len(traces) == 1                            # 2.0 and 3.0: one signature
    np.testing.assert_array_equal(f(native, np.array(3.0)), [0.0, 3.0, 6.0])
    assert len(traces) == 2                            # a 0-d array: another
    traces.clear()
    got = f(swapped, 2.0)
    assert len(traces) == 1 and got.dtype == (native * 2.0).dtype
    np.testing.assert_array_equal(got, [0.0, 2.0, 4.0])
    again = f(native, 2.0)
    first[...] = -1.0                                  # written into: the next call is fresh
    np.testing.assert_array_equal(again, [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(f(native, 2.0), [0.0, 2.0, 4.0])
    assert not np.shares_memory(again, f(native, 2.0)) and len(traces) == 1


# Python numbers as arguments promote as numbers (NEP 50), as f's own call does

_WEAK_CASES = [
    ("float32 * float", lambda v, c: v * c, np.ones(3, np.float32), 2.5),
    ("float32 / int", lambda v, c: v / c, np.ones(3, np.float32), 3),
    ("float32 * complex", lambda v, c: v * c, np.ones(3, np.float32), 1j),
    ("int8 * int wraps", lambda v, c: v * c, np.array([100, -3], np.int8), 2),
    ("int32 + int", lambda v, c: v + c, np.arange(3, dtype=np.int32), 1),
    ("uint8 - int", lambda v, c: v - c, np.array([1, 9], np.uint8), 2),
    ("float16 where", lambda v, c: tnp.where(v > 0, v, c), np.array([1, -1], np.float16), 3.0),
    ("number arithmetic first", lambda v, c: v * (c * 2) / c + c ** 2 - abs(-c),
     np.ones(2, np.float32), 2.5),
    ("number alone", lambda v, c: c * 2 + v, np.ones(2, np.float32), 3),
    ("a tnp function of a number is a NumPy scalar", lambda v, c: v * tnp.sin(c),
     np.ones(2, np.float32), 0.5),
    ("float64 array and float", lambda v, c: v - c, np.arange(3.0), 0.25),
    ("bool", lambda v, c: v + c, np.array([1, 2], np.int8), True),
    # a reduction with no axes of a number is a NumPy scalar, as tnp.sin's (round 59f)
    ("sum of a number", lambda v, c: tnp.sum(c) * v, np.ones(2, np.float32), 2.0),
    ("prod of a number", lambda v, c: tnp.prod(c) * v, np.ones(2, np.float32), 2.0),
    ("max of a number", lambda v, c: tnp.max(c) * v, np.ones(2, np.float32), 2.0),
    ("positive of a number", lambda v, c: tnp.positive(c) * v, np.ones(2, np.float32), 2.0),
]


@pytest.mark.parametrize("name, f, v, c", _WEAK_CASES, ids=[case[0] for case in _WEAK_CASES])
def test_a_python_number_argument_promotes_as_without_jit(name, f, v, c):
    want = np.asarray(f(v, c))
    got = jit(f)(v, c)
    assert got.dtype == want.dtype, name
    np.testing.assert_array_equal(got, want)
    got = jit(f)(v, c + c)                          # another number: same trace, read anew
    np.testing.assert_array_equal(got, np.asarray(f(v, c + c)))


def test_a_python_integer_out_of_range_of_the_arrays_integers_raises_as_numpy():
    add = jit(lambda v, n: v + n)
    v = np.array([1, 2], np.int8)
    np.testing.assert_array_equal(add(v, 100), v + 100)
    for n in (200, 300, -129):                      # out of int8, like NumPy's own error
        with pytest.raises(OverflowError, match=f"Python integer {n} out of bounds for int8"):
            v + n
        with pytest.raises(tnp.TensorOverflowError,
                           match=f"Python integer {n} out of bounds for int8"):
            add(v, n)                               # a TiduError and an OverflowError
    np.testing.assert_array_equal(add(v, -128), v + -128)
    np.testing.assert_array_equal(add(np.array([1, 2], np.int64), 300), [301, 302])


def test_python_number_arguments_under_grad_keep_the_arrays_precision():
    loss = lambda w, scale, n: tnp.sum((w * scale) ** 2) / n      # noqa: E731
    w = np.array([1.0, -2.0], np.float32)
    g = jit(tnp.grad(loss))(w, 0.5, 4)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, tnp.grad(loss)(w, 0.5, 4), rtol=1e-6)
    np.testing.assert_allclose(g, 2 * 0.25 * w / 4, rtol=1e-6)


def test_python_number_arguments_compose_with_vmap_and_grad_in_both_orders():
    f = lambda v, c: v * c + c ** 2                                   # noqa: E731
    x = np.array([1.0, 2.0], np.float32)
    xs = np.stack([x, -x])
    jf = jit(f)
    for got, want in [(tnp.vmap(jf, in_axes=(0, None))(xs, 2.5), f(xs, 2.5)),
                      (jit(lambda v, c: tnp.vmap(lambda a: a * c)(v))(xs, 2.5), xs * 2.5),
                      (tnp.grad(lambda v, c: tnp.sum(jf(v, c)))(x, 2.5), np.full(2, 2.5)),
                      (jit(tnp.grad(lambda v, c: tnp.sum(f(v, c))))(x, 2.5), np.full(2, 2.5))]:
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # the number differentiated through jit: d/dc (c * sum(v) + 2 c^2) = sum(v) + 4 c
    np.testing.assert_allclose(tnp.grad(lambda v, c: tnp.sum(jf(v, c)), argnums=1)(x, 2.5),
                               3.0 + 10.0, rtol=1e-6)
    first = jf(x, 2.5)
    first[...] = -7.0                               # a result written into: the next is fresh
    np.testing.assert_allclose(jf(x, 2.5), f(x, 2.5))


def test_a_python_number_differentiated_promotes_as_in_f_itself():
    # grad, vjp, jvp and the Jacobians trace a Python number as one (NEP 50), so f's value
    # keeps its arrays' precision; the number's own derivative is of its dtype (float64), as
    # in JAX with x64. Before, the number was a float64 array and f computed in float64.
    a32 = np.array([1.0, 2.0, 3.0], np.float32)
    f = lambda x: tnp.sum(a32 * x ** 2)                               # noqa: E731
    assert np.asarray(f(2.0)).dtype == np.float32
    value, g = tnp.value_and_grad(f)(2.0)
    assert (value.dtype, g.dtype) == (np.float32, np.float64)
    np.testing.assert_allclose([value, g], [24.0, 24.0], rtol=1e-6)
    out, tangent = tnp.jvp(f, (2.0,), (1.0,))
    assert out.dtype == tangent.dtype == np.float32
    np.testing.assert_allclose(tangent, 24.0, rtol=1e-6)
    out, vjp_fn = tnp.vjp(lambda z: a32 * z, 1j)
    assert out.dtype == np.complex64 and vjp_fn(np.ones(3, np.complex64))[0].dtype == complex
    row = lambda x: a32 * x                                           # noqa: E731
    assert tnp.jacrev(row)(2.0).dtype == np.float64 and tnp.jacfwd(row)(2.0).dtype == np.float32
    np.testing.assert_allclose(tnp.hessian(f)(2.0), 12.0, rtol=1e-6)


def test_a_python_number_differentiated_gives_jaxs_dtypes(jx):
    jax, jnp = jx
    j32 = jnp.asarray(np.array([1.0, 2.0, 3.0], np.float32))
    value, g = jax.value_and_grad(lambda x: jnp.sum(j32 * x ** 2))(2.0)
    assert (value.dtype, g.dtype) == (np.float32, np.float64)      # as tidu's, above
    assert jax.jacrev(lambda x: j32 * x)(2.0).dtype == np.float64
    assert jax.jacfwd(lambda x: j32 * x)(2.0).dtype == np.float32
