"""``jacfwd``, ``jacrev``, ``jacobian``, ``hessian`` and ``has_aux``/keyword arguments of the
functional transforms of ``primitives.tensor``, with JAX's names and semantics.

Jacobians are checked against finite differences, against ``torch.func`` and JAX
where installed (complex: tidu's ``jacrev`` of a real function is the conjugate
of JAX's; holomorphic Jacobians are JAX's numbers), on pytrees and ``argnums``
tuples, composed with each other and with ``jit`` in both orders, and on random
small functions built from tnp functions (hypothesis).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from primitives import tensor as tnp
from primitives.tensor.transforms import make_graph
from primitives.tensor import FunctionalError

from tensor_helpers import abs2, random

RNG = np.random.default_rng(20)
X = np.array([0.3, -1.2, 0.8])
W = RNG.standard_normal((2, 3))


def fd_jacobian(f, x, eps=1e-6):
    """Central differences: shape out.shape + x.shape (real x), or d/dRe for complex x."""
    x = np.asarray(x)
    columns = []
    for k in range(x.size):
        e = np.zeros(x.size, dtype=x.dtype)
        e[k] = 1
        e = e.reshape(x.shape)
        columns.append((np.asarray(f(x + eps * e)) - np.asarray(f(x - eps * e))) / (2 * eps))
    out_shape = np.shape(f(x))
    return np.stack(columns, axis=-1).reshape(out_shape + x.shape)


def g(x):
    """R^3 -> R^(2, 3): products, matmul, reductions and broadcasting."""
    return tnp.sin(x) * tnp.reshape(tnp.matmul(W, x), (2, 1)) + tnp.exp(x) * x[::-1]


def scalar(x):
    return tnp.sum(tnp.sin(x) * x[::-1]) + tnp.sum(x ** 3) * tnp.mean(tnp.tanh(x))


# --- finite differences, shapes, dtypes -------------------------------------------------


@pytest.mark.parametrize("transform", [tnp.jacfwd, tnp.jacrev, tnp.jacobian])
def test_jacobian_against_finite_differences(transform):
    J = transform(g)(X)
    assert isinstance(J, np.ndarray) and J.shape == (2, 3, 3) and J.dtype == np.float64
    np.testing.assert_allclose(J, fd_jacobian(g, X), rtol=1e-6, atol=1e-8)


def test_jacobian_is_jacrev():
    assert tnp.jacobian is tnp.jacrev


@pytest.mark.parametrize("transform", [tnp.jacfwd, tnp.jacrev])
def test_matrix_input_scalar_and_float32(transform):
    A = RNG.standard_normal((2, 3))
    f = lambda a: tnp.sum(tnp.tanh(a) * a, axis=1)      # noqa: E731
    J = transform(f)(A)
    assert J.shape == (2, 2, 3)
    np.testing.assert_allclose(J, fd_jacobian(f, A), rtol=1e-6, atol=1e-8)
    J32 = transform(f)(A.astype(np.float32))
    assert J32.dtype == np.float32
    np.testing.assert_allclose(J32, J, rtol=1e-5, atol=1e-6)
    scalar_in = transform(lambda s: tnp.stack([s, s * s]))(np.array(3.0))
    np.testing.assert_allclose(scalar_in, [1.0, 6.0])
    assert transform(lambda s: s * s)(np.array(2.0)).shape == ()


@pytest.mark.parametrize("transform", [tnp.jacfwd, tnp.jacrev])
def test_size_zero_and_independent_blocks(transform):
    J = transform(lambda x, y: (x * 2.0, tnp.sum(x) + 0.0 * tnp.sum(y)),
                  argnums=(0, 1))(np.zeros(0), np.ones(2))
    assert J[0][0].shape == (0, 0) and J[0][1].shape == (0, 2)
    assert J[1][0].shape == (0,) and np.array_equal(J[1][1], np.zeros(2))
    const = transform(lambda x, y: x * 3.0, argnums=1)(np.ones(2), np.ones(3))
    assert const.shape == (2, 3) and not const.any()


def test_hessian_against_finite_differences_of_grad():
    H = tnp.hessian(scalar)(X)
    assert H.shape == (3, 3)
    np.testing.assert_allclose(H, fd_jacobian(tnp.grad(scalar), X), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(H, H.T, atol=1e-12)


def test_transforms_trace_f_once():
    calls = []

    def f(x):
        calls.append(1)
        return tnp.sin(x) * x

    for transform in (tnp.jacfwd, tnp.jacrev):
        calls.clear()
        transform(f)(np.ones(50))
        assert len(calls) == 1          # one trace; the linear program runs 50 times


# --- against torch.func and JAX ---------------------------------------------------------


def test_against_torch_func():
    torch = pytest.importorskip("torch", reason="PyTorch compares the Jacobians")
    tf = pytest.importorskip("torch.func", reason="torch.func compares the Jacobians")
    Wt = torch.tensor(W)

    def g_torch(x):
        return torch.sin(x) * (Wt @ x).reshape(2, 1) + torch.exp(x) * x.flip(0)

    def scalar_torch(x):
        return (torch.sum(torch.sin(x) * x.flip(0))
                + torch.sum(x ** 3) * torch.mean(torch.tanh(x)))

    xt = torch.tensor(X)
    np.testing.assert_allclose(tnp.jacfwd(g)(X), tf.jacfwd(g_torch)(xt).numpy(), rtol=1e-12)
    np.testing.assert_allclose(tnp.jacrev(g)(X), tf.jacrev(g_torch)(xt).numpy(), rtol=1e-12)
    np.testing.assert_allclose(tnp.hessian(scalar)(X), tf.hessian(scalar_torch)(xt).numpy(),
                               rtol=1e-10, atol=1e-12)
    # a real function of complex input: rows are gradients in PyTorch's convention, as tidu's
    z = random(3, np.complex128, RNG)

    def real_of_complex(v):
        return abs2(tnp.sin(v)) * tnp.real(v)

    def real_of_complex_torch(v):
        return (torch.sin(v) * torch.conj(torch.sin(v))).real * v.real

    _, torch_vjp = tf.vjp(real_of_complex_torch, torch.tensor(z))   # torch's jacrev refuses
    rows = [torch_vjp(torch.tensor(e))[0].numpy() for e in np.eye(3)]  # complex inputs
    np.testing.assert_allclose(tnp.jacrev(real_of_complex)(z), np.stack(rows), rtol=1e-12)


@pytest.fixture
def jax_numpy():
    jax = pytest.importorskip("jax", reason="JAX compares the complex conventions")
    jax.config.update("jax_enable_x64", True)
    return jax, pytest.importorskip("jax.numpy")


def test_complex_conventions_against_jax(jax_numpy):
    jax, jnp = jax_numpy
    z = random(3, np.complex128, RNG)
    # holomorphic: both modes give f'(z), JAX's numbers
    holo, holo_jax = (lambda v: tnp.sin(v) * v[::-1]), (lambda v: jnp.sin(v) * v[::-1])
    expected = np.asarray(jax.jit(jax.jacfwd(holo_jax, holomorphic=True))(z))
    np.testing.assert_allclose(tnp.jacfwd(holo, holomorphic=True)(z), expected, rtol=1e-12)
    np.testing.assert_allclose(tnp.jacrev(holo, holomorphic=True)(z), expected, rtol=1e-12)
    jax_jacrev = jax.jit(jax.jacrev(holo_jax, holomorphic=True))
    np.testing.assert_allclose(np.asarray(jax_jacrev(z)), expected)
    total, total_jax = (lambda v: tnp.sum(holo(v))), (lambda v: jnp.sum(holo_jax(v)))
    np.testing.assert_allclose(tnp.hessian(total, holomorphic=True)(z),
                               np.asarray(jax.jit(jax.hessian(total_jax, holomorphic=True))(z)),
                               rtol=1e-12)
    # a real function of complex input: tidu's jacrev is the conjugate of JAX's (= its grad)
    real_f = lambda v: abs2(tnp.sin(v)) * tnp.real(v)                           # noqa: E731
    real_f_jax = lambda v: (jnp.sin(v) * jnp.conj(jnp.sin(v))).real * v.real     # noqa: E731
    J = tnp.jacrev(real_f)(z)
    jax_rows = np.asarray(jax.jit(jax.jacrev(real_f_jax))(z))
    np.testing.assert_allclose(J, np.conj(jax_rows), rtol=1e-12)
    np.testing.assert_allclose(J[1], tnp.grad(lambda v: real_f(v)[1])(z), rtol=1e-12)
    # a complex function of real input: both modes give JAX's jacfwd
    x = RNG.standard_normal(3)
    cplx, cplx_jax = (lambda v: tnp.exp(1j * v) * v[::-1]), (lambda v: jnp.exp(1j * v) * v[::-1])
    expected = np.asarray(jax.jit(jax.jacfwd(cplx_jax))(x))
    np.testing.assert_allclose(tnp.jacfwd(cplx)(x), expected, rtol=1e-12)
    np.testing.assert_allclose(tnp.jacrev(cplx)(x), expected, rtol=1e-12)


def test_holomorphic_true_on_a_non_holomorphic_function_is_the_real_axis_derivative():
    """JAX's jacfwd and jacrev disagree here; tidu's both give d f / d Re(z), exactly."""
    z = random(3, np.complex128, RNG)
    f = lambda v: tnp.conj(v) * v[::-1] + v * v                                  # noqa: E731
    forward = tnp.jacfwd(f, holomorphic=True)(z)
    reverse = tnp.jacrev(f, holomorphic=True)(z)
    np.testing.assert_allclose(forward, reverse, rtol=1e-12)
    np.testing.assert_allclose(forward, fd_jacobian(f, z), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("call, message", [
    (lambda z: tnp.jacfwd(tnp.sin)(z), "holomorphic=True"),
    (lambda z: tnp.jacrev(tnp.sin)(z), "holomorphic=True"),
    (lambda z: tnp.hessian(lambda v: tnp.sum(abs2(v)))(z), "holomorphic=True"),
    (lambda z: tnp.jacrev(lambda v: abs2(v), holomorphic=True)(z), "output 0"),
    (lambda z: tnp.jacfwd(tnp.sin, holomorphic=True)(np.real(z)), "input 0"),
])
def test_complex_jacobians_that_are_not_complex_matrices_raise(call, message):
    z = random(2, np.complex128, RNG)
    with pytest.raises(FunctionalError, match=message):
        call(z)
    assert np.allclose(tnp.jacrev(tnp.sin)(np.real(z)), np.diag(np.cos(np.real(z))))


# --- pytrees, argnums, has_aux, keyword arguments ---------------------------------------


def pytree_f(params, x):
    """A dict of parameters and an input; returns a tuple (matrix, {'s': scalar})."""
    y = tnp.tanh(tnp.matmul(params["w"], x) + params["b"])
    return y[:, None] * x, {"s": tnp.sum(y * y)}


PARAMS = {"w": RNG.standard_normal((2, 3)), "b": RNG.standard_normal(2)}


@pytest.mark.parametrize("transform", [tnp.jacfwd, tnp.jacrev])
def test_pytrees_output_structure_outside_input_structure_inside(transform):
    J = transform(pytree_f, argnums=(0, 1))(PARAMS, X)
    assert isinstance(J, tuple) and isinstance(J[1], dict) and set(J[1]) == {"s"}
    d_params, d_x = J[0]
    assert set(d_params) == {"w", "b"}
    assert d_params["w"].shape == (2, 3, 2, 3) and d_params["b"].shape == (2, 3, 2)
    assert d_x.shape == (2, 3, 3) and J[1]["s"][0]["w"].shape == (2, 3)
    np.testing.assert_allclose(d_x, fd_jacobian(lambda x: pytree_f(PARAMS, x)[0], X),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(
        J[1]["s"][0]["b"],
        fd_jacobian(lambda b: pytree_f({"w": PARAMS["w"], "b": b}, X)[1]["s"], PARAMS["b"]),
        rtol=1e-6, atol=1e-8)
    only_x = transform(pytree_f, argnums=1)(PARAMS, X)
    np.testing.assert_allclose(only_x[0], d_x)
    np.testing.assert_allclose(transform(pytree_f, argnums=-1)(PARAMS, X)[0], d_x)
    twice = transform(pytree_f, argnums=(1, 0, 1))(PARAMS, X)[0]
    np.testing.assert_allclose(twice[0], d_x)
    np.testing.assert_allclose(twice[2], d_x)
    np.testing.assert_allclose(twice[1]["w"], d_params["w"])


def test_jacrev_and_jacfwd_agree_on_pytrees_and_hessian_of_pytree_input():
    loss = lambda p, x: pytree_f(p, x)[1]["s"]                                  # noqa: E731
    forward, reverse = tnp.jacfwd(loss)(PARAMS, X), tnp.jacrev(loss)(PARAMS, X)
    for k in PARAMS:
        np.testing.assert_allclose(forward[k], reverse[k], rtol=1e-12)
        np.testing.assert_allclose(reverse[k], tnp.grad(loss)(PARAMS, X)[k], rtol=1e-12)
    H = tnp.hessian(loss)(PARAMS, X)
    assert H["w"]["b"].shape == (2, 3, 2) and H["b"]["w"].shape == (2, 2, 3)
    np.testing.assert_allclose(H["w"]["b"], np.moveaxis(H["b"]["w"], 0, -1), rtol=1e-9,
                               atol=1e-12)


@pytest.mark.parametrize("transform", [tnp.jacfwd, tnp.jacrev, tnp.hessian])
def test_has_aux_and_keyword_arguments(transform):
    def f(x, scale=1.0):
        y = scale * tnp.sum(tnp.sin(x) * x)
        return (y if transform is tnp.hessian else y * x), {"y": y, "label": "text"}

    J, aux = transform(f, has_aux=True)(X, scale=2.0)
    plain = transform(lambda x: f(x, 2.0)[0])(X)
    np.testing.assert_allclose(J, plain)
    assert type(aux["y"]) is np.ndarray and aux["label"] == "text"
    np.testing.assert_allclose(aux["y"], 2.0 * np.sum(np.sin(X) * X))
    with pytest.raises(FunctionalError, match="pair"):
        transform(lambda x: tnp.sum(x), has_aux=True)(X)


def test_grad_argnums_tuple_with_keyword_arguments():
    """The issue's example: ``tnp.grad(f, argnums=(1, 0))(a, b, k=2.0)``."""
    def f(a, b, k=1.0):
        return tnp.sum(k * a * tnp.sin(b))

    a, b = np.array([1.0, 2.0]), np.array([0.5, -0.3])
    gb, ga = tnp.grad(f, argnums=(1, 0))(a, b, k=2.0)
    np.testing.assert_allclose(gb, 2.0 * a * np.cos(b))
    np.testing.assert_allclose(ga, 2.0 * np.sin(b))
    value, (gb2, ga2) = tnp.value_and_grad(f, argnums=(1, 0))(a, b, k=2.0)
    np.testing.assert_allclose(value, 2.0 * np.sum(a * np.sin(b)))
    np.testing.assert_allclose(gb2, gb)


def test_grad_and_value_and_grad_has_aux():
    def loss(w, x):
        pred = tnp.tanh(w * x)
        return tnp.sum(pred ** 2), (pred, 7)

    w = np.array([0.5, -1.5])
    g, (pred, seven) = tnp.grad(loss, has_aux=True)(w, X[:2])
    (value, (pred2, _)), g2 = tnp.value_and_grad(loss, has_aux=True)(w, X[:2])
    p = np.tanh(w * X[:2])
    np.testing.assert_allclose(g, 2 * p * (1 - p * p) * X[:2])
    np.testing.assert_allclose(pred, p)
    assert type(pred) is np.ndarray and seven == 7 and np.array_equal(g, g2)
    np.testing.assert_allclose(value, np.sum(p ** 2))
    with pytest.raises(FunctionalError, match="pair"):
        tnp.grad(lambda w: tnp.sum(w), has_aux=True)(w)
    with pytest.raises(FunctionalError, match="pair"):
        tnp.grad(lambda w: (tnp.sum(w), 1, 2), has_aux=True)(w)


def test_vjp_and_jvp_has_aux():
    f = lambda x: (tnp.sin(x), tnp.cos(x))                                      # noqa: E731
    out, vjp_fn, aux = tnp.vjp(f, X, has_aux=True)
    np.testing.assert_allclose(out, np.sin(X))
    np.testing.assert_allclose(aux, np.cos(X))
    np.testing.assert_allclose(vjp_fn(np.ones(3))[0], np.cos(X))
    out, tangent, aux = tnp.jvp(f, (X,), (np.ones(3),), has_aux=True)
    np.testing.assert_allclose(tangent, np.cos(X))
    assert type(aux) is np.ndarray
    np.testing.assert_allclose(aux, np.cos(X))


def test_aux_carries_no_inner_derivative_but_an_outer_one():
    """Under a nested transform, aux is the outer level's value (as in JAX): the outer
    transform differentiates it; the inner one does not."""
    def inner(x):
        return tnp.sum(x * x), tnp.sum(tnp.sin(x))        # value, aux

    def outer(x):
        g, aux = tnp.grad(inner, has_aux=True)(x)
        return aux + 0.0 * tnp.sum(g)

    np.testing.assert_allclose(tnp.grad(outer)(X), np.cos(X))


# --- composition ------------------------------------------------------------------------


def test_second_order_compositions_agree():
    expected = tnp.hessian(scalar)(X)
    for composed in (tnp.jacfwd(tnp.jacrev(scalar)), tnp.jacrev(tnp.jacfwd(scalar)),
                     tnp.jacrev(tnp.jacrev(scalar)), tnp.jacfwd(tnp.jacfwd(scalar)),
                     tnp.jacfwd(tnp.grad(scalar)), tnp.jit(tnp.hessian(scalar)),
                     tnp.hessian(tnp.jit(scalar)), tnp.jacrev(tnp.jit(tnp.grad(scalar)))):
        np.testing.assert_allclose(composed(X), expected, rtol=1e-10, atol=1e-12)


def test_jit_of_jacobians_reuses_its_trace_correctly():
    calls = []

    def f(x):
        calls.append(1)
        return tnp.tanh(x) * x[::-1]

    jitted = tnp.jit(tnp.jacrev(f))
    results = [jitted(x) for x in (X, X + 1.0, -X)]
    assert len(calls) == 1                  # one trace, by jit
    for x, result in zip((X, X + 1.0, -X), results):
        np.testing.assert_allclose(result, fd_jacobian(f, x), rtol=1e-6, atol=1e-8)
    grad_of_jit = tnp.grad(tnp.jit(lambda x: tnp.sum(tnp.jacfwd(f)(x) ** 2)))
    for x in (X, 2 * X):
        np.testing.assert_allclose(
            grad_of_jit(x), fd_jacobian(lambda v: np.sum(fd_jacobian(f, v, 1e-5) ** 2), x, 1e-4),
            rtol=1e-4, atol=1e-6)


def test_jacobians_of_eager_tensors_differentiate_on():
    """jacrev on tensors: the result is a tensor with history, so backward reaches the leaf."""
    x = tnp.tensor(X, requires_grad=True)
    J = tnp.jacrev(lambda v: tnp.sin(v) * v)(x)
    assert isinstance(J, tnp.Tensor)
    total = tnp.sum(J)                   # sum of diag(cos(x) x + sin(x)): d/dx = 2cos - x sin
    grads = total.backward().grad(x)
    np.testing.assert_allclose(grads, 2 * np.cos(X) - X * np.sin(X), rtol=1e-12)


# --- random small functions (hypothesis) -------------------------------------------------

UNARY = [tnp.sin, tnp.tanh, tnp.exp, lambda v: v * v, lambda v: tnp.sqrt(v * v + 1.0),
         lambda v: v[::-1], lambda v: tnp.cumsum(v) if hasattr(tnp, "cumsum") else v + 1.0]
BINARY = [tnp.add, tnp.multiply, lambda a, b: a / (b * b + 1.0), tnp.maximum,
          lambda a, b: tnp.sum(a * b) * a]


@st.composite
def small_functions(draw):
    """A random program: each step applies a unary or binary function to earlier values."""
    steps = draw(st.lists(st.tuples(st.booleans(), st.integers(0, 100), st.integers(0, 100),
                                    st.integers(0, 100)), min_size=1, max_size=5))

    def f(x):
        values = [x]
        for binary, which, i, j in steps:
            a = values[i % len(values)]
            if binary:
                values.append(BINARY[which % len(BINARY)](a, values[j % len(values)]))
            else:
                values.append(UNARY[which % len(UNARY)](a))
        return values[-1] * tnp.sin(values[0])

    return f


@settings(max_examples=10, deadline=None)
@given(small_functions(), st.integers(0, 2 ** 31))
def test_random_functions_forward_reverse_and_finite_differences(f, seed):
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, 4)
    forward, reverse = tnp.jacfwd(f)(x), tnp.jacrev(f)(x)
    np.testing.assert_allclose(forward, reverse, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(tnp.jit(tnp.jacrev(f))(x), reverse, rtol=1e-9, atol=1e-9)
    scale = 1.0 + np.abs(reverse).max()
    np.testing.assert_allclose(reverse, fd_jacobian(f, x), rtol=1e-5, atol=1e-5 * scale)
    hess = tnp.hessian(lambda v: tnp.sum(f(v)))(x)
    np.testing.assert_allclose(hess, tnp.jacrev(tnp.jacfwd(lambda v: tnp.sum(f(v))))(x),
                               rtol=1e-8, atol=1e-8 * scale)


# --- errors -----------------------------------------------------------------------------


def test_misuse_raises_clear_errors_and_the_library_stays_usable():
    with pytest.raises(FunctionalError, match="argnums 2 out of range"):
        tnp.jacrev(lambda x, y: x * y, argnums=2)(X, X)
    with pytest.raises(FunctionalError, match="dtype int"):
        tnp.jacfwd(lambda x: x * 2)(np.arange(3))
    with pytest.raises(FunctionalError, match="returned str"):
        tnp.jacrev(lambda x: "no")(X)
    np.testing.assert_allclose(tnp.jacrev(tnp.sin)(X), np.diag(np.cos(X)))


def test_make_graph_shows_the_traced_program():
    traced = make_graph(lambda x, y: tnp.sum(tnp.sin(x) * y), X, X)
    names = [repr(node.operation).split("[")[0] for node in traced.graph.operations]
    assert names == ["sin", "mul", "reduce_sum"]
    assert len(traced.transposed((0,)).graph.operations) >= 2
