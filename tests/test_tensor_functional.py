"""Functional transforms of ``primitives.tensor`` with JAX's semantics.

``grad``/``value_and_grad`` (``argnums`` an int, a tuple, negative), ``jvp``,
``vjp`` (one cotangent per primal, zeros for unused primals), ``hvp`` (against
an analytic Hessian and finite differences of ``grad``), nesting, complex
numbers, result types and dtypes, and the inspectable traced graphs (checked
with ``tidu.testing``). Constants on the left of an operator are written with
the module's functions (``tnp.multiply(c, x)``) in most tests, and with operators in
``test_numpy_array_on_the_left``.
"""

from __future__ import annotations

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor.transforms import make_graph
from primitives.tensor import FunctionalError
from tidu.testing import check_jvp, check_transpose

from tensor_helpers import abs2, random


def fd_jvp(f, x, t, eps=1e-6):
    return (np.asarray(f(x + eps * t)) - np.asarray(f(x - eps * t))) / (2 * eps)


def is_array(r, dtype=None, shape=None):
    return (isinstance(r, np.ndarray) and (dtype is None or r.dtype == dtype)
            and (shape is None or r.shape == shape))


# --- grad and argnums --------------------------------------------------------------------


def f2(x, y):
    """sum(x^2 y + sin(x) y^3); dx = 2xy + cos(x) y^3, dy = x^2 + 3 sin(x) y^2."""
    return tnp.sum(tnp.multiply(tnp.multiply(x, x), y) + tnp.multiply(tnp.sin(x), y ** 3))


def df2(x, y):
    return 2 * x * y + np.cos(x) * y ** 3, x * x + 3 * np.sin(x) * y ** 2


X = np.array([0.5, -1.0, 2.0])
Y = np.array([1.5, 0.25, -0.75])


def test_grad_default_argnum_is_zero():
    g = tnp.grad(f2)(X, Y)
    assert is_array(g, np.float64, (3,))
    np.testing.assert_allclose(g, df2(X, Y)[0], rtol=1e-12)


def test_grad_argnums_int_tuple_negative():
    gx, gy = df2(X, Y)
    g1 = tnp.grad(f2, argnums=1)(X, Y)
    assert is_array(g1, np.float64, (3,))
    np.testing.assert_allclose(g1, gy, rtol=1e-12)
    both = tnp.grad(f2, argnums=(0, 1))(X, Y)
    assert isinstance(both, tuple) and len(both) == 2
    np.testing.assert_allclose(both[0], gx, rtol=1e-12)
    np.testing.assert_allclose(both[1], gy, rtol=1e-12)
    single = tnp.grad(f2, argnums=(1,))(X, Y)
    assert isinstance(single, tuple) and len(single) == 1
    np.testing.assert_allclose(single[0], gy, rtol=1e-12)
    np.testing.assert_allclose(tnp.grad(f2, argnums=-1)(X, Y), gy, rtol=1e-12)
    np.testing.assert_allclose(tnp.grad(f2, argnums=-2)(X, Y), gx, rtol=1e-12)
    rev = tnp.grad(f2, argnums=(1, 0))(X, Y)                         # order follows argnums
    np.testing.assert_allclose(rev[0], gy, rtol=1e-12)
    np.testing.assert_allclose(rev[1], gx, rtol=1e-12)


def test_grad_with_constant_operand_written_with_module_functions():
    c = np.array([3.0, -1.0, 0.5])
    g = tnp.grad(lambda y: tnp.sum(tnp.multiply(c, y) + tnp.subtract(c, y) * y))(Y)
    np.testing.assert_allclose(g, c + c - 2 * Y, rtol=1e-12)


def test_grad_of_a_python_scalar_and_independent_output():
    g = tnp.grad(lambda x: x * x * x)(2.0)
    assert is_array(g, np.float64, ()) and float(g) == pytest.approx(12.0)
    z = tnp.grad(lambda x: tnp.sum(np.ones(3)))(np.ones(2, np.float32))
    assert is_array(z, np.float32, (2,)) and not z.any()


def test_value_and_grad():
    v, g = tnp.value_and_grad(f2)(X, Y)
    assert is_array(v, np.float64, ()) and is_array(g, np.float64, (3,))
    np.testing.assert_allclose(v, np.sum(X * X * Y + np.sin(X) * Y ** 3), rtol=1e-14)
    np.testing.assert_allclose(g, df2(X, Y)[0], rtol=1e-12)
    v2, gs = tnp.value_and_grad(f2, argnums=(0, 1))(X, Y)
    assert isinstance(gs, tuple) and len(gs) == 2
    np.testing.assert_allclose(v2, v)
    np.testing.assert_allclose(gs[1], df2(X, Y)[1], rtol=1e-12)


def test_float32_in_float32_out():
    x = np.array([0.3, -1.2], np.float32)
    v, g = tnp.value_and_grad(lambda x: tnp.sum(tnp.tanh(x) * tnp.exp(x)))(x)
    assert is_array(v, np.float32, ()) and is_array(g, np.float32, (2,))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(g, (1 - np.tanh(x64) ** 2) * np.exp(x64)
                               + np.tanh(x64) * np.exp(x64), rtol=1e-5)
    # an f32 primal in an f64 computation still gets an f32 gradient
    g64 = tnp.grad(lambda x: tnp.sum(tnp.multiply(x, np.array([2.0, 3.0]))))(x)
    assert is_array(g64, np.float32, (2,))
    np.testing.assert_array_equal(g64, [2.0, 3.0])


def test_broadcast_gradients_have_operand_shapes():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 1)), rng.standard_normal((4,))
    ga, gb = tnp.grad(lambda a, b: tnp.sum(abs2(a * b)), argnums=(0, 1))(a, b)
    assert ga.shape == (3, 1) and gb.shape == (4,)
    np.testing.assert_allclose(ga, 2 * a * np.sum(b ** 2), rtol=1e-12)
    np.testing.assert_allclose(gb, 2 * b * np.sum(a ** 2), rtol=1e-12)


def test_size_zero_gradients():
    g = tnp.grad(lambda x, y: tnp.sum(tnp.tanh(x) * y), argnums=(0, 1))(
        np.zeros((0, 3)), np.ones((1, 3)))
    assert g[0].shape == (0, 3) and g[1].shape == (1, 3)
    np.testing.assert_array_equal(g[1], np.zeros((1, 3)))


# --- jvp -----------------------------------------------------------------------------------------


def test_jvp_against_finite_differences():
    rng = np.random.default_rng(1)
    x, t = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    f = lambda x: tnp.sum(tnp.sin(x) * tnp.exp(x), axis=0) / (tnp.sum(x * x) + 1.0)
    out, tan = tnp.jvp(f, (x,), (t,))
    assert is_array(out, np.float64, (3,)) and is_array(tan, np.float64, (3,))
    np.testing.assert_allclose(out, np.asarray(f(x)), rtol=1e-15)
    np.testing.assert_allclose(tan, fd_jvp(f, x, t), rtol=1e-6, atol=1e-8)


def test_jvp_two_primals_and_tuple_output():
    out, tan = tnp.jvp(lambda x, y: (x * y, tnp.sin(x)), (X, Y), (np.ones(3), np.zeros(3)))
    assert isinstance(out, tuple) and isinstance(tan, tuple) and len(tan) == 2
    np.testing.assert_allclose(out[0], X * Y)
    np.testing.assert_allclose(tan[0], Y, rtol=1e-15)
    np.testing.assert_allclose(tan[1], np.cos(X), rtol=1e-15)


def test_jvp_float32_and_independent_output():
    x = np.ones(3, np.float32)
    out, tan = tnp.jvp(tnp.sin, (x,), (np.full(3, 2.0, np.float32),))
    assert is_array(out, np.float32) and is_array(tan, np.float32)
    np.testing.assert_allclose(tan, 2 * np.cos(1.0), rtol=1e-6)
    out, tan = tnp.jvp(lambda x: np.ones(2, np.float32), (np.ones(3),), (np.ones(3),))
    assert is_array(tan, np.float32, (2,)) and not tan.any()


def test_jvp_of_holomorphic_complex_function():
    rng = np.random.default_rng(2)
    z, t = random((4,), np.complex128, rng), random((4,), np.complex128, rng)
    _, tan = tnp.jvp(lambda z: tnp.sin(z) * z, (z,), (t,))
    assert tan.dtype == np.complex128
    np.testing.assert_allclose(tan, (np.cos(z) * z + np.sin(z)) * t, rtol=1e-12)


# --- vjp -------------------------------------------------------------------------------------------


def test_vjp_one_cotangent_per_primal_with_zeros_for_unused():
    x, unused = np.array([0.5, 1.5]), np.ones((2, 2), np.float32)
    out, vjp_fn = tnp.vjp(lambda x, u: tnp.sin(x) * x, x, unused)
    assert is_array(out, np.float64, (2,))
    ct = np.array([2.0, -1.0])
    cts = vjp_fn(ct)
    assert isinstance(cts, tuple) and len(cts) == 2
    np.testing.assert_allclose(cts[0], ct * (np.cos(x) * x + np.sin(x)), rtol=1e-12)
    assert is_array(cts[1], np.float32, (2, 2)) and not cts[1].any()
    again = vjp_fn(ct)                                                 # reusable
    np.testing.assert_array_equal(again[0], cts[0])
    single = tnp.vjp(tnp.exp, x)[1](ct)
    assert isinstance(single, tuple) and len(single) == 1


def test_vjp_tuple_outputs():
    out, vjp_fn = tnp.vjp(lambda x: (tnp.sin(x), tnp.sum(x * x)), X)
    assert isinstance(out, tuple) and out[1].shape == ()
    (g,) = vjp_fn((np.ones(3), np.array(2.0)))
    np.testing.assert_allclose(g, np.cos(X) + 4 * X, rtol=1e-12)
    (g0,) = vjp_fn((np.zeros(3), np.array(1.0)))
    np.testing.assert_allclose(g0, 2 * X, rtol=1e-12)


def test_vjp_is_the_adjoint_of_jvp():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((3, 1)), rng.standard_normal((4,))
    tx, ty = rng.standard_normal((3, 1)), rng.standard_normal((4,))
    f = lambda x, y: tnp.tanh(x * y) / (tnp.exp(y) + 1.0)
    _, jt = tnp.jvp(f, (x, y), (tx, ty))
    ct = rng.standard_normal((3, 4))
    cx, cy = tnp.vjp(f, x, y)[1](ct)
    np.testing.assert_allclose(np.sum(ct * jt), np.sum(cx * tx) + np.sum(cy * ty), rtol=1e-12)


def test_vjp_of_holomorphic_function_is_ct_times_conj_derivative():
    rng = np.random.default_rng(4)
    z, ct = random((3,), np.complex128, rng), random((3,), np.complex128, rng)
    out, vjp_fn = tnp.vjp(tnp.exp, z)
    np.testing.assert_allclose(out, np.exp(z))
    (g,) = vjp_fn(ct)
    assert is_array(g, np.complex128, (3,))
    np.testing.assert_allclose(g, ct * np.conj(np.exp(z)), rtol=1e-12)


def test_vjp_of_real_primal_through_complex_intermediate_is_real():
    x = np.array([0.5, -2.0])
    _, vjp_fn = tnp.vjp(lambda x: x * (1.0 + 1.0j), x)
    (g,) = vjp_fn(np.array([1.0 + 0.0j, 0.0 + 1.0j]))
    assert is_array(g, np.float64, (2,))
    np.testing.assert_allclose(g, [1.0, 1.0])     # Re(conj(1+i) ct)


def test_grad_of_abs_squared_is_two_z():
    z = np.array([1.0 + 2.0j, -0.5 + 0.3j])
    g = tnp.grad(lambda z: tnp.sum(abs2(z)))(z)
    assert is_array(g, np.complex128, (2,))
    np.testing.assert_allclose(g, 2 * z, rtol=1e-15)


# --- hvp and nesting ----------------------------------------------------------------------------------


def cubic(x):
    return tnp.sum(x ** 3) + tnp.sum(x) ** 2


def cubic_hessian(x):
    return np.diag(6 * x) + 2 * np.ones((x.size, x.size))


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_hvp_against_analytic_hessian(dtype, rtol):
    x = np.array([1.0, -2.0, 0.5], dtype)
    v = np.array([0.1, -0.2, 0.3], dtype)
    hv = tnp.hvp(cubic, (x,), (v,))
    assert is_array(hv, np.dtype(dtype), (3,))
    np.testing.assert_allclose(hv, cubic_hessian(x.astype(np.float64)) @ v, rtol=rtol)


def test_hvp_against_finite_differences_of_grad():
    rng = np.random.default_rng(5)
    x, v = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    f = lambda x: tnp.sum(tnp.tanh(x) * tnp.sin(x)) + tnp.sum(tnp.exp(tnp.sum(x, axis=1)))
    hv = tnp.hvp(f, (x,), (v,))
    assert hv.shape == (2, 3)
    np.testing.assert_allclose(hv, fd_jvp(tnp.grad(f), x, v, eps=1e-5), rtol=1e-6, atol=1e-8)


def test_hvp_several_primals_returns_a_tuple():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    va, vb = np.array([0.1, -0.2, 0.3]), np.array([1.0, 0.0, -1.0])
    # f = sum(a^2 b): H = [[2b, 2a], [2a, 0]] (diagonal blocks)
    ha, hb = tnp.hvp(lambda a, b: tnp.sum(a * a * b), (a, b), (va, vb))
    np.testing.assert_allclose(ha, 2 * b * va + 2 * a * vb, rtol=1e-12)
    np.testing.assert_allclose(hb, 2 * a * va, rtol=1e-12)


def test_nested_grad():
    x = np.array(0.7)
    f = lambda x: tnp.sin(x) * x
    d2 = tnp.grad(tnp.grad(f))(x)
    assert is_array(d2, np.float64, ())
    np.testing.assert_allclose(d2, 2 * np.cos(0.7) - 0.7 * np.sin(0.7), rtol=1e-12)
    d3 = tnp.grad(tnp.grad(tnp.grad(f)))(x)
    np.testing.assert_allclose(d3, -3 * np.sin(0.7) - 0.7 * np.cos(0.7), rtol=1e-12)
    d2f = tnp.grad(tnp.grad(tnp.exp))(np.float32(0.5))
    assert is_array(d2f, np.float32, ())


SECOND_DERIVATIVES = {
    "tanh": (tnp.tanh, lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
    "sqrt": (tnp.sqrt, lambda x: -0.25 * x ** -1.5),
    "log": (tnp.log, lambda x: -1 / x ** 2),
    "exp": (tnp.exp, np.exp),
    "sin": (tnp.sin, lambda x: -np.sin(x)),
    "cos": (tnp.cos, lambda x: -np.cos(x)),
    "pow2.5": (lambda x: x ** 2.5, lambda x: 3.75 * x ** 0.5),
    "reciprocal": (lambda x: 1.0 / x, lambda x: 2 / x ** 3),
    "x**4": (lambda x: x ** 4, lambda x: 12 * x ** 2),
    "x**-2": (lambda x: x ** -2, lambda x: 6 * x ** -4),
    "sin/x": (lambda x: tnp.sin(x) / x,
              lambda x: -np.sin(x) / x - 2 * np.cos(x) / x ** 2 + 2 * np.sin(x) / x ** 3),
    "mean of broadcast cube": (lambda x: tnp.mean(tnp.broadcast_to(x, (3,)) ** 3),
                               lambda x: 6 * x),
}


@pytest.mark.parametrize("name", list(SECOND_DERIVATIVES))
def test_second_derivatives_of_each_op(name):
    f, d2 = SECOND_DERIVATIVES[name]
    got = tnp.grad(tnp.grad(f))(np.array(0.7))
    np.testing.assert_allclose(got, d2(0.7), rtol=1e-10)


def test_hvp_of_a_real_loss_of_complex_input():
    # f(z) = sum |exp z|^2 = sum exp(2 Re z): gradient 2 exp(2x) (real), H v = 4 exp(2x) Re v
    z = np.array([0.3 + 0.4j, -1.0 + 0.2j])
    v = np.array([1.0 + 0.5j, -0.3 + 1.0j])
    f = lambda z: tnp.sum(abs2(tnp.exp(z)))
    hv = tnp.hvp(f, (z,), (v,))
    assert is_array(hv, np.complex128, (2,))
    np.testing.assert_allclose(hv, 4 * np.exp(2 * z.real) * v.real, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(hv, fd_jvp(tnp.grad(f), z, v), rtol=1e-6, atol=1e-8)


def test_grad_of_a_function_that_takes_a_gradient():
    # d/dy [ grad_x sum(x^2 y) at x ] . 1 = d/dy sum(2 x y) = 2 x
    x, y = np.array([1.0, -3.0]), np.array([2.0, 0.5])
    inner = tnp.grad(lambda x, y: tnp.sum(x * x * y))
    g = tnp.grad(lambda y: tnp.sum(inner(x, y)))(y)
    np.testing.assert_allclose(g, 2 * x, rtol=1e-12)


# --- inspection -----------------------------------------------------------------------------------------


def test_trace_graph_linearized_and_transposed_are_inspectable():
    x = np.array([0.2, 0.4])
    traced = make_graph(lambda x: tnp.sin(x) * x, x)
    listing = str(traced.graph)
    assert "sin" in listing and "mul" in listing
    assert len(traced.graph.operations) == 2
    lin = str(traced.linearized([0]))
    assert "cos" in lin                                # d sin = cos . t
    transposed = traced.transposed([0])
    assert "mul" in str(transposed)
    assert len(transposed.tangent_output_keys) == 1


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_traced_graphs_pass_tidu_testing(dtype):
    rng = np.random.default_rng(6)
    x, y = random((3, 1), dtype, rng), random((4,), dtype, rng)
    f = lambda x, y: tnp.tanh(x * y) / (tnp.exp(x) + 2.0) + tnp.sum(tnp.sqrt(y * y + 1.0))
    traced = make_graph(f, x, y)
    primals = {k.key: traced.trace.values[k] for k in traced.graph.input_keys}
    single = np.dtype(dtype) == np.float32
    check_jvp(traced.graph, traced.graph.output_keys, primals, rng=0,
              **(dict(rtol=1e-2, atol=1e-3) if single else {}))
    check_transpose(traced.graph, traced.linearized([0, 1]), primals, rng=0,
                    **(dict(rtol=1e-5, atol=1e-6) if single else {}))


# --- NumPy arrays on the left of an operator --------------------------------------------------------------


def test_numpy_array_on_the_left():
    # NumPy must defer to the tracer's reflected operators (at HEAD fb489f1 `c * y` made an
    # object array of tracers and grad silently returned zeros)
    c = np.array([3.0, -1.0])
    g = tnp.grad(lambda y: tnp.sum(c * y + c / (y + 1.0) - c ** 2 + c - y))(np.array([1.0, 2.0]))
    y = np.array([1.0, 2.0])
    np.testing.assert_allclose(g, c - c / (y + 1.0) ** 2 - 1.0, rtol=1e-12)
    np.testing.assert_allclose(tnp.grad(lambda y: tnp.sum(np.float64(2.5) * y))(y), [2.5, 2.5])
    g1 = tnp.grad(lambda x, y: tnp.sum(x * x * y + tnp.sin(x) * y ** 3), argnums=1)(X, Y)
    np.testing.assert_allclose(g1, df2(X, Y)[1], rtol=1e-12)


# --- pytrees: nested tuples, lists and dicts of arrays ---------------------------------------


def test_grad_of_a_dict_of_parameters():
    params = {"w": np.array([[1.0, 2.0], [3.0, 4.0]]), "b": [np.array([0.5, -0.5]), None]}
    x = np.array([1.0, -1.0])

    def loss(p, x):
        return tnp.sum(tnp.tanh(p["w"] @ x + p["b"][0]) ** 2)
    g = tnp.grad(loss)(params, x)
    assert set(g) == {"w", "b"} and g["b"][1] is None
    h = np.tanh(params["w"] @ x + params["b"][0])
    dz = 2 * h * (1 - h ** 2)
    np.testing.assert_allclose(g["w"], np.outer(dz, x))
    np.testing.assert_allclose(g["b"][0], dz)
    value, (gp, gx) = tnp.value_and_grad(loss, argnums=(0, 1))(params, x)
    np.testing.assert_allclose(gx, params["w"].T @ dz)
    np.testing.assert_allclose(value, np.sum(h ** 2))


def test_vjp_and_jvp_of_pytree_functions():
    def f(a, pair):
        return {"sum": tnp.sum(a * pair[0]), "both": (a * pair[1], pair[0])}
    a, pair = np.array([1.0, 2.0]), (np.array([3.0, 4.0]), np.array([5.0, 6.0]))
    out, vjp_fn = tnp.vjp(f, a, pair)
    assert set(out) == {"sum", "both"} and isinstance(out["both"], tuple)
    ct = {"sum": np.float64(1.0), "both": (np.ones(2), np.zeros(2))}
    ga, (g0, g1) = vjp_fn(ct)
    np.testing.assert_allclose(ga, pair[0] + pair[1])
    np.testing.assert_allclose(g0, a)
    np.testing.assert_allclose(g1, a)
    with pytest.raises(FunctionalError, match="structure"):
        vjp_fn((np.float64(1.0),))
    _, tangent = tnp.jvp(f, (a, pair), (np.ones(2), (np.zeros(2), np.ones(2))))
    np.testing.assert_allclose(tangent["sum"], np.sum(pair[0]))
    np.testing.assert_allclose(tangent["both"][0], pair[1] + a)
    with pytest.raises(FunctionalError, match="structure"):
        tnp.jvp(f, (a, pair), (np.ones(2), np.zeros(2)))
    # dot-product test through the pytree plumbing
    t = (np.array([0.3, -0.7]), (np.array([1.1, 0.2]), np.array([-0.4, 0.9])))
    _, jt = tnp.jvp(f, (a, pair), t)
    lhs = float(jt["sum"]) * 1.0 + float(np.dot(jt["both"][0], ct["both"][0]))
    rhs = float(np.dot(ga, t[0]) + np.dot(g0, t[1][0]) + np.dot(g1, t[1][1]))
    assert abs(lhs - rhs) < 1e-12
