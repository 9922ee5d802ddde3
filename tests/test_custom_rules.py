"""``custom_jvp`` and ``custom_vjp``: a user's derivative rules for a composite or opaque function.

Checked against finite differences and analytic derivatives: a numerically stable
``log1pexp`` (custom_jvp and custom_vjp), an opaque NumPy linear solve and an
opaque fixed-point solver (Python loops with data-dependent stopping), under
grad/jvp/vjp/jacfwd/jacrev, eager ``Tensor.backward``, ``jit`` in both orders,
and second order; the clear errors (forward mode of a custom_vjp function, rules
returning the wrong structure, shapes, dtypes or a non-linear result, closures
over traced values), each a ``TiduError`` naming the function.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor.transforms import make_graph
from primitives.tensor import ConcretizationError, FunctionalError
from tidu import TiduError

RNG = np.random.default_rng(7)
X = np.array([-3.0, -0.4, 0.2, 2.5])


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def fd(f, x, t, eps=1e-6):
    return (np.asarray(f(x + eps * t)) - np.asarray(f(x - eps * t))) / (2 * eps)


# --- a stable log1pexp with custom_jvp ----------------------------------------------------

CALLS = {"log1pexp": 0}


@tnp.custom_jvp
def log1pexp(x):
    CALLS["log1pexp"] += 1
    return np.logaddexp(0.0, x)            # NumPy itself: the op runs it on arrays


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = log1pexp(x)
    return y, t * (1.0 - tnp.exp(-y))     # sigmoid(x) t, stable for large |x|


def softplus_loss(x):
    return tnp.sum(log1pexp(x) * x)


def softplus_loss_grad(x):
    return sigmoid(x) * x + np.logaddexp(0.0, x)


def test_custom_jvp_on_plain_arrays_runs_the_function():
    assert type(log1pexp(X)) is np.ndarray
    np.testing.assert_allclose(log1pexp(X), np.logaddexp(0.0, X))


def test_custom_jvp_first_and_second_order_in_every_transform():
    np.testing.assert_allclose(tnp.grad(softplus_loss)(X), softplus_loss_grad(X), rtol=1e-12)
    out, tangent = tnp.jvp(log1pexp, (X,), (np.ones(4),))
    np.testing.assert_allclose(tangent, sigmoid(X), rtol=1e-12)
    _, vjp_fn = tnp.vjp(log1pexp, X)
    np.testing.assert_allclose(vjp_fn(np.arange(4.0))[0], sigmoid(X) * np.arange(4.0))
    for jacobian in (tnp.jacfwd, tnp.jacrev):
        np.testing.assert_allclose(jacobian(log1pexp)(X), np.diag(sigmoid(X)), rtol=1e-12)
    second = sigmoid(X) * (1 - sigmoid(X))
    total = lambda x: tnp.sum(log1pexp(x))                                     # noqa: E731
    np.testing.assert_allclose(np.diag(tnp.hessian(total)(X)), second, rtol=1e-10)
    np.testing.assert_allclose(tnp.hvp(total, (X,), (np.ones(4),)), second, rtol=1e-10)
    np.testing.assert_allclose(tnp.grad(lambda x: tnp.grad(total)(x)[1])(X)[1], second[1])
    np.testing.assert_allclose(tnp.jvp(tnp.grad(total), (X,), (np.ones(4),))[1], second)


def test_custom_jvp_ops_pass_the_primitive_checks():
    """The recorded op, real and complex: JVP against finite differences, the dot-product test
    of its transposed JVP, and the same for the rules its rules emit (second order)."""
    from tidu.testing import check_primitive

    for custom, x in ((log1pexp, X), (complex_square, np.array([0.3 + 1j, -0.5 + 0.2j]))):
        (node,) = make_graph(custom, x).graph.operations     # the call, as one op
        report = check_primitive(node.operation, x, order=2, rng=0)
        assert "to order 2" in str(report)


def test_custom_jvp_is_stable_where_autodiff_of_the_formula_is_not():
    big = np.array([-1000.0, 0.0, 1000.0])
    np.testing.assert_array_equal(tnp.grad(lambda x: tnp.sum(log1pexp(x)))(big), [0, 0.5, 1])
    with np.errstate(all="ignore"):
        naive = tnp.grad(lambda x: tnp.sum(tnp.log(1.0 + tnp.exp(x))))(big)
    assert np.isnan(naive[2])              # exp overflows: inf / inf


def test_custom_jvp_with_jit_in_both_orders_and_eager_tensors():
    jitted_grad = tnp.jit(tnp.grad(softplus_loss))
    grad_of_jit = tnp.grad(tnp.jit(softplus_loss))
    for x in (X, X + 1.5):
        np.testing.assert_allclose(jitted_grad(x), softplus_loss_grad(x), rtol=1e-12)
        np.testing.assert_allclose(grad_of_jit(x), softplus_loss_grad(x), rtol=1e-12)
    np.testing.assert_allclose(tnp.jit(log1pexp)(X), np.logaddexp(0.0, X))
    x = tnp.tensor(X, requires_grad=True)
    y = softplus_loss(x)
    assert isinstance(y, tnp.Tensor)
    np.testing.assert_allclose(y.backward().grad(x), softplus_loss_grad(X), rtol=1e-12)
    np.testing.assert_allclose(x.grad, softplus_loss_grad(X), rtol=1e-12)


def test_custom_jvp_runs_the_function_once_per_call_after_the_first():
    jitted = tnp.jit(softplus_loss)
    jitted(X)                                # first call: traces the rule once
    CALLS["log1pexp"] = 0
    jitted(X + 1.0)
    jitted(X + 2.0)
    assert CALLS["log1pexp"] == 2            # the compiled program calls it, once per call
    x = tnp.tensor(X, requires_grad=True)
    softplus_loss(x).backward()             # the first derivative traces the JVP rule (which
    CALLS["log1pexp"] = 0                   # calls log1pexp), whichever test runs first
    softplus_loss(x).backward()             # forward once; the JVP reuses the forward value
    assert CALLS["log1pexp"] == 1


# --- pytrees, several arguments, keyword arguments, complex ------------------------------


@tnp.custom_jvp
def scaled_norm(params, x, power=2):
    """({'w': w, 'b': b}, x) -> (sum((w x + b)^power), w x + b); an int argument."""
    z = params["w"] * x + params["b"]
    return np.sum(z ** power), z


@scaled_norm.defjvp
def scaled_norm_jvp(primals, tangents):
    (params, x, power), (dparams, dx, _) = primals, tangents
    z = params["w"] * x + params["b"]
    dz = dparams["w"] * x + params["w"] * dx + dparams["b"]
    return scaled_norm(params, x, power), (tnp.sum(power * z ** (power - 1) * dz), dz)


def test_custom_jvp_pytrees_integer_and_keyword_arguments():
    params = {"w": RNG.standard_normal(3), "b": RNG.standard_normal(3)}
    x = RNG.standard_normal(3)
    loss = lambda p, x: scaled_norm(p, x, power=3)[0]                           # noqa: E731
    g_params, g_x = tnp.grad(loss, argnums=(0, 1))(params, x)
    z = params["w"] * x + params["b"]
    np.testing.assert_allclose(g_params["w"], 3 * z ** 2 * x)
    np.testing.assert_allclose(g_params["b"], 3 * z ** 2)
    np.testing.assert_allclose(g_x, 3 * z ** 2 * params["w"])
    J = tnp.jacfwd(lambda x: scaled_norm(params, x)[1])(x)
    np.testing.assert_allclose(J, np.diag(params["w"]))


@tnp.custom_jvp
def complex_square(z):
    return np.square(z)


@complex_square.defjvp
def complex_square_jvp(primals, tangents):
    (z,), (t,) = primals, tangents
    return complex_square(z), 2.0 * z * t


def test_custom_jvp_of_complex_values_follows_tidus_convention():
    z = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)

    def loss(square):
        return lambda v: tnp.sum(tnp.real(square(v) * tnp.conj(square(v))))

    np.testing.assert_allclose(tnp.grad(loss(complex_square))(z),
                               tnp.grad(loss(lambda v: v * v))(z), rtol=1e-12)
    np.testing.assert_allclose(tnp.jacfwd(complex_square, holomorphic=True)(z),
                               np.diag(2 * z), rtol=1e-12)
    np.testing.assert_allclose(tnp.jacrev(complex_square, holomorphic=True)(z),
                               np.diag(2 * z), rtol=1e-12)


# --- an opaque linear solve: custom_vjp (and custom_jvp) ----------------------------------

SOLVES = {"n": 0}


@tnp.custom_vjp
def solve(a, b):
    SOLVES["n"] += 1
    return np.linalg.solve(a, b)            # LAPACK: opaque to tidu


def solve_fwd(a, b):
    x = solve(a, b)
    return x, (a, x)


def solve_bwd(residuals, ct):
    """x = a^-1 b: ct_b = a^-T ct, ct_a = -ct_b x^T (real matrices)."""
    a, x = residuals
    ct_b = solve(tnp.transpose(a), ct)
    return -tnp.outer(ct_b, x), ct_b


solve.defvjp(solve_fwd, solve_bwd)

A = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
B = RNG.standard_normal(3)


def solve_loss(a, b):
    x = solve(a, b)
    return tnp.sum(x * x * x)


def numpy_solve_loss(a, b):
    return np.sum(np.linalg.solve(a, b) ** 3)


def test_custom_vjp_solver_against_finite_differences():
    g_a, g_b = tnp.grad(solve_loss, argnums=(0, 1))(A, B)
    for k in range(3):
        e = np.eye(3)[k]
        np.testing.assert_allclose(g_b[k], fd(lambda b: numpy_solve_loss(A, b), B, e), rtol=1e-6)
    dA = RNG.standard_normal((3, 3))
    np.testing.assert_allclose(np.sum(g_a * dA), fd(lambda a: numpy_solve_loss(a, B), A, dA),
                               rtol=1e-6)
    np.testing.assert_allclose(tnp.jacrev(lambda b: solve(A, b))(B), np.linalg.inv(A),
                               rtol=1e-12)


def test_custom_vjp_under_jit_both_orders_and_eager():
    expected = tnp.grad(solve_loss, argnums=1)(A, B)
    np.testing.assert_allclose(tnp.jit(tnp.grad(solve_loss, argnums=1))(A, B), expected)
    np.testing.assert_allclose(tnp.grad(tnp.jit(solve_loss), argnums=1)(A, B), expected)
    b = tnp.tensor(B, requires_grad=True)
    loss = solve_loss(A, b)
    np.testing.assert_allclose(loss.backward().grad(b), expected, rtol=1e-12)
    SOLVES["n"] = 0
    solve_loss(A, b).backward()
    assert SOLVES["n"] == 2                 # fwd once, bwd's adjoint solve once: no recompute


def test_custom_vjp_solver_reverse_over_reverse():
    """Nested reverse mode runs fwd and bwd at the outer level, where each call of ``solve``
    is again differentiated by its own rule: the Hessian of sum(solve(a, b)^3) in b."""
    x, inv = np.linalg.solve(A, B), np.linalg.inv(A)
    expected = inv.T @ np.diag(6 * x) @ inv
    hessian_b = tnp.jacrev(tnp.grad(solve_loss, argnums=1), argnums=1)
    np.testing.assert_allclose(hessian_b(A, B), expected, rtol=1e-10)
    np.testing.assert_allclose(tnp.jit(hessian_b)(A, B), expected, rtol=1e-10)
    np.testing.assert_allclose(
        tnp.grad(lambda b: tnp.grad(solve_loss, argnums=1)(A, b)[0])(B), expected[0], rtol=1e-10)


def test_forward_mode_of_a_custom_vjp_function_raises_naming_it():
    for call in (lambda: tnp.jvp(lambda b: solve(A, b), (B,), (B,)),
                 lambda: tnp.jacfwd(lambda b: solve(A, b))(B),
                 lambda: tnp.hessian(lambda b: solve_loss(A, b))(B)):
        with pytest.raises(FunctionalError, match="forward-mode.*custom_vjp function solve"):
            call()
    np.testing.assert_allclose(solve(A, B), np.linalg.solve(A, B))   # still usable


@tnp.custom_jvp
def solve_jvp_style(a, b):
    return np.linalg.solve(a, b)


@solve_jvp_style.defjvp
def _solve_jvp(primals, tangents):
    (a, b), (da, db) = primals, tangents
    x = solve_jvp_style(a, b)
    return x, solve_jvp_style(a, db - tnp.matmul(da, x))    # linear in the tangents


def test_custom_jvp_applied_to_tangents_works_forward_and_says_why_not_in_reverse():
    """Its JVP rule applies the opaque solver to a tangent: forward mode (to any order) works;
    reverse mode would need the solver's transpose, which tidu cannot see: a clear error."""
    loss = lambda b: tnp.sum(solve_jvp_style(A, b) ** 3)                        # noqa: E731
    x = np.linalg.solve(A, B)
    inv = np.linalg.inv(A)
    np.testing.assert_allclose(tnp.jacfwd(loss)(B), inv.T @ (3 * x ** 2), rtol=1e-10)
    np.testing.assert_allclose(tnp.jacfwd(tnp.jacfwd(loss))(B), inv.T @ np.diag(6 * x) @ inv,
                               rtol=1e-10)
    np.testing.assert_allclose(tnp.jacfwd(lambda a: solve_jvp_style(a, B))(A),
                               tnp.jacrev(lambda a: solve(a, B))(A), rtol=1e-10)
    with pytest.raises(FunctionalError, match="custom_jvp function solve_jvp_style applied to "
                                              "a tangent"):
        tnp.grad(loss)(B)


# --- an opaque fixed-point solver ----------------------------------------------------------


@tnp.custom_vjp
def fixed_point(w, b):
    """The x with x = tanh(w x + b), by iteration until it stops changing (opaque)."""
    x = np.zeros_like(b)
    for _ in range(1000):
        new = np.tanh(w @ x + b)
        if np.max(np.abs(new - x)) < 1e-14:
            return new
        x = new
    raise RuntimeError("no convergence")


def fixed_point_fwd(w, b):
    x = fixed_point(w, b)
    return x, (w, x)


def fixed_point_bwd(residuals, ct):
    """Implicit function theorem: (I - D w)^T u = ct with D = diag(1 - x^2);
    ct_b = D u and ct_w = ct_b x^T."""
    w, x = residuals
    d = 1.0 - x * x
    u = solve(tnp.transpose(np.eye(len(x)) - d[:, None] * w), ct)
    ct_b = d * u
    return tnp.outer(ct_b, x), ct_b


fixed_point.defvjp(fixed_point_fwd, fixed_point_bwd)

W_FP = 0.4 * RNG.standard_normal((3, 3))
B_FP = RNG.standard_normal(3)


def test_custom_vjp_fixed_point_solver_against_finite_differences():
    loss = lambda w, b: tnp.sum(fixed_point(w, b) * np.arange(1.0, 4.0))        # noqa: E731
    numpy_loss = lambda w, b: np.sum(fixed_point(w, b) * np.arange(1.0, 4.0))   # noqa: E731
    g_w, g_b = tnp.grad(loss, argnums=(0, 1))(W_FP, B_FP)
    for t in RNG.standard_normal((2, 3)):
        np.testing.assert_allclose(np.dot(g_b, t), fd(lambda b: numpy_loss(W_FP, b), B_FP, t),
                                   rtol=1e-6)
    dW = RNG.standard_normal((3, 3))
    np.testing.assert_allclose(np.sum(g_w * dW), fd(lambda w: numpy_loss(w, B_FP), W_FP, dW),
                               rtol=1e-6)
    w = tnp.tensor(W_FP, requires_grad=True)
    loss(w, B_FP).backward()
    np.testing.assert_allclose(w.grad, g_w, rtol=1e-12)
    np.testing.assert_allclose(tnp.jit(tnp.grad(loss))(W_FP, B_FP), g_w, rtol=1e-12)


@functools.partial(tnp.custom_vjp, nondiff_argnums=(0,))
def iterate(f, a, x0):
    """JAX's idiom: the function iterated is a nondiff (static) argument."""
    x = x0
    for _ in range(200):
        x = f(a, x)
    return x


def iterate_fwd(f, a, x0):
    x = iterate(f, a, x0)
    return x, (a, x)


def iterate_bwd(f, residuals, ct):
    """For x = a cos(x): dx/da = cos(x) / (1 + a sin(x)); x0 gets no cotangent."""
    a, x = residuals
    return ct * tnp.cos(x) / (1.0 + a * tnp.sin(x)), None


iterate.defvjp(iterate_fwd, iterate_bwd)


@functools.partial(tnp.custom_jvp, nondiff_argnums=(1,))
def power(x, n):
    return x ** n


@power.defjvp
def power_jvp(n, primals, tangents):
    (x,), (t,) = primals, tangents
    return power(x, n), n * x ** (n - 1) * t


def test_nondiff_argnums_pass_static_values_to_the_rules_first():
    cosine_map = lambda a, x: a * np.cos(x)                                     # noqa: E731
    a, x0 = np.array([0.5, 0.7]), np.zeros(2)
    loss = lambda a: tnp.sum(iterate(cosine_map, a, x0))                        # noqa: E731
    expected = [fd(lambda a: np.sum(iterate(cosine_map, a, x0)), a, e) for e in np.eye(2)]
    np.testing.assert_allclose(tnp.grad(loss)(a), expected, rtol=1e-6)
    np.testing.assert_allclose(tnp.jit(tnp.grad(loss))(a), expected, rtol=1e-6)
    np.testing.assert_allclose(tnp.grad(lambda x: tnp.sum(power(x, 3)))(a), 3 * a ** 2)
    np.testing.assert_allclose(tnp.hessian(lambda x: tnp.sum(power(x, n=3)))(a),
                               np.diag(6 * a))
    np.testing.assert_allclose(tnp.grad(lambda x: tnp.sum(power(x, 2)))(a), 2 * a)
    with pytest.raises(FunctionalError, match="power: its nondiff arguments must be hashable"):
        tnp.grad(lambda x: tnp.sum(power(x, [3])))(a)
    with pytest.raises(FunctionalError, match="power: nondiff argument 1 holds a tensor"):
        tnp.grad(lambda n: tnp.sum(power(a, n)))(np.array(2.0))


# --- custom_vjp to second order (fwd and bwd written with tnp) ----------------------------


@tnp.custom_vjp
def softplus(x):
    return np.logaddexp(0.0, x)


def softplus_fwd(x):
    y = tnp.logaddexp(0.0, x) if hasattr(tnp, "logaddexp") else tnp.log(1.0 + tnp.exp(x))
    return y, (y,)


def softplus_bwd(residuals, ct):
    (y,) = residuals
    return (ct * (1.0 - tnp.exp(-y)),)


softplus.defvjp(softplus_fwd, softplus_bwd)


def test_custom_vjp_second_order_through_fwd_and_bwd():
    loss = lambda x: tnp.sum(softplus(x) ** 2)                                  # noqa: E731
    s, y = sigmoid(X), np.logaddexp(0.0, X)
    np.testing.assert_allclose(tnp.grad(loss)(X), 2 * y * s, rtol=1e-12)
    second = 2 * s * s + 2 * y * s * (1 - s)
    np.testing.assert_allclose(np.diag(tnp.hessian(loss)(X)), second, rtol=1e-10)
    np.testing.assert_allclose(tnp.grad(lambda x: tnp.grad(loss)(x)[2])(X)[2], second[2])
    np.testing.assert_allclose(tnp.hvp(loss, (X,), (np.ones(4),)), second, rtol=1e-10)
    np.testing.assert_allclose(np.diag(tnp.jit(tnp.hessian(loss))(X)), second, rtol=1e-10)
    np.testing.assert_allclose(
        tnp.grad(lambda x: tnp.sum(tnp.jit(tnp.grad(loss))(x)))(X), second, rtol=1e-10)


@tnp.custom_vjp
def pair_product(inputs):
    """A dict argument; bwd gives None for a non-differentiable entry."""
    return inputs["x"] * inputs["y"]


pair_product.defvjp(lambda inputs: (pair_product(inputs), (inputs["y"],)),
                    lambda residuals, ct: ({"x": ct * residuals[0], "y": None},))


def test_custom_vjp_none_cotangents_and_pytree_arguments():
    inputs = {"x": X, "y": X[::-1].copy()}
    g = tnp.grad(lambda d: tnp.sum(pair_product(d)))(inputs)
    np.testing.assert_allclose(g["x"], inputs["y"])
    assert np.array_equal(g["y"], np.zeros(4))        # None: a zero cotangent, as JAX
    with_kwargs = tnp.grad(lambda x: tnp.sum(pair_product(inputs={"x": x, "y": X})))(X)
    np.testing.assert_allclose(with_kwargs, X)


@tnp.custom_vjp
def complex_scale(z, c):
    return z * c


complex_scale.defvjp(lambda z, c: (complex_scale(z, c), (z, c)),
                     lambda res, ct: (ct * tnp.conj(res[1]), ct * tnp.conj(res[0])))


def test_custom_vjp_of_complex_values_in_tidus_convention():
    z = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)
    c = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)

    def loss(scale):
        return lambda z, c: tnp.sum(tnp.real(scale(z, c) * tnp.conj(tnp.sin(scale(z, c)))))

    expected = tnp.grad(loss(lambda z, c: z * c), argnums=(0, 1))(z, c)
    for got, want in zip(tnp.grad(loss(complex_scale), argnums=(0, 1))(z, c), expected):
        np.testing.assert_allclose(got, want, rtol=1e-12)


# --- errors: each a TiduError naming the function ------------------------------------------


def make_vjp(bwd, fwd=None, name="wrapped"):
    def wrapped(x, y):
        return x * y

    wrapped.__qualname__ = name
    custom = tnp.custom_vjp(wrapped)
    custom.defvjp(fwd or (lambda x, y: (custom(x, y), (x, y))), bwd)
    return custom


@pytest.mark.parametrize("bwd, message", [
    (lambda res, ct: (ct * res[1],), "one cotangent .* per argument: 2, got a tuple of 1"),
    (lambda res, ct: ct * res[1], "per argument: 2, got an array"),
    (lambda res, ct: (ct * res[1], tnp.sum(ct * res[0])), "leaf 1 has shape \\(\\)"),
    (lambda res, ct: (ct * res[1], tnp.astype(ct * res[0], np.float32)), "dtype float32"),
    (lambda res, ct: (ct * res[1] + 1.0, ct * res[0]), "bwd rule .* is not linear"),
    (lambda res, ct: ((ct, ct), ct * res[0]), "cotangent of argument 0 has structure"),
    (lambda res, ct: (ct * res[1], "zero"), "returned str"),
])
def test_bad_bwd_rules_raise_naming_the_function(bwd, message):
    custom = make_vjp(bwd, name="my_product")
    with pytest.raises(TiduError, match=message) as error:
        tnp.grad(lambda x: tnp.sum(custom(x, X)))(X)
    assert "custom_vjp function my_product" in str(error.value)
    good = make_vjp(lambda res, ct: (ct * res[1], ct * res[0]))
    np.testing.assert_allclose(tnp.grad(lambda x: tnp.sum(good(x, X)))(X), X)


def test_bad_fwd_rules_raise_naming_the_function():
    not_a_pair = make_vjp(lambda res, ct: (ct, ct), fwd=lambda x, y: x * y, name="no_pair")
    with pytest.raises(FunctionalError, match="fwd rule .* of custom_vjp function no_pair"):
        tnp.grad(lambda x: tnp.sum(not_a_pair(x, X)))(X)
    wrong_out = make_vjp(lambda res, ct: (ct, ct), fwd=lambda x, y: ((x, y), ()), name="pair")
    with pytest.raises(FunctionalError, match="function pair: its result .*compared with fwd"):
        tnp.grad(lambda x: tnp.sum(wrong_out(x, X)))(X)
    undefined = tnp.custom_vjp(lambda x: x)
    with pytest.raises(FunctionalError, match="has no VJP rule"):
        undefined(tnp.tensor(X, requires_grad=True))


def make_jvp(jvp_fn, name="wrapped", fun=None):
    def wrapped(x):
        return np.sin(x)

    fun = fun or wrapped
    fun.__qualname__ = name
    custom = tnp.custom_jvp(fun)
    custom.defjvp(jvp_fn)
    return custom


@pytest.mark.parametrize("jvp_fn, error, message", [
    (lambda p, t: np.sin(p[0]), FunctionalError, "must return a pair"),
    (lambda p, t: (tnp.sin(p[0]), (t[0],)), FunctionalError, "tangent_out has structure"),
    (lambda p, t: (tnp.sin(p[0]), tnp.sum(t[0])), FunctionalError, "has shape \\(\\)"),
    (lambda p, t: (tnp.sin(p[0]), tnp.sin(p[0])), FunctionalError, "JVP rule .* not linear"),
    (lambda p, t: (tnp.sin(p[0]), t[0] if tnp.sum(p[0]) > 0 else -t[0]),
     ConcretizationError, "JVP rule of custom_jvp function bad_sine"),
])
def test_bad_jvp_rules_raise_naming_the_function(jvp_fn, error, message):
    custom = make_jvp(jvp_fn, name="bad_sine")
    with pytest.raises(error, match=message) as raised:
        tnp.grad(lambda x: tnp.sum(custom(x)))(X)
    assert "bad_sine" in str(raised.value)
    assert isinstance(raised.value, TiduError)
    good = make_jvp(lambda p, t: (tnp.sin(p[0]), tnp.cos(p[0]) * t[0]))
    np.testing.assert_allclose(tnp.grad(lambda x: tnp.sum(good(x)))(X), np.cos(X))


def test_closures_over_traced_values_raise_instead_of_losing_the_derivative():
    y = tnp.tensor(X, requires_grad=True)
    closes_over_tensor = make_jvp(lambda p, t: (tnp.sin(p[0]), tnp.cos(p[0]) * t[0]),
                                  fun=lambda x: x * y, name="closure")
    with pytest.raises(FunctionalError, match="closes over a tensor or traced value"):
        closes_over_tensor(tnp.tensor(X, requires_grad=True))

    def rule_closes_over_argument(x):
        inner = make_jvp(lambda p, t: (tnp.sin(p[0]), tnp.cos(x) * t[0]), name="rule_closure")
        return tnp.sum(inner(x))

    # the rule is traced when grad first needs it, after grad's trace of x has ended
    with pytest.raises(FunctionalError, match="escaped tracer(.|\n)*JVP rule of custom_jvp "
                                              "function rule_closure"):
        tnp.grad(rule_closes_over_argument)(X)

    def rule_closes_over_outer(y):
        inner = make_jvp(lambda p, t: (tnp.sin(p[0]), tnp.cos(y) * t[0]), name="outer_closure")
        return tnp.grad(lambda x: tnp.sum(inner(x)))(X)[0]

    # traced while the outer grad's trace of y is still running: read as a constant
    with pytest.raises(FunctionalError, match="JVP rule of custom_jvp function outer_closure "
                                              "closes over a Tracer"):
        tnp.grad(rule_closes_over_outer)(X[0])


def test_a_result_that_changes_type_with_the_values_raises():
    sometimes_longer = make_jvp(lambda p, t: (sometimes_longer(p[0]), t[0]),
                                fun=lambda x: x if x[0] < 10 else np.concatenate([x, x]),
                                name="unstable")
    x = tnp.tensor(X, requires_grad=True)
    sometimes_longer(x)
    with pytest.raises(FunctionalError, match="unstable: its result leaf 0 has shape \\(8,\\)"):
        sometimes_longer(tnp.tensor(X + 20.0, requires_grad=True))
    undefined = tnp.custom_jvp(lambda x: x)
    with pytest.raises(FunctionalError, match="has no JVP rule"):
        undefined(X)


def test_arguments_that_are_not_arrays_need_nondiff_argnums():
    @tnp.custom_jvp
    def apply(fn, x):
        return fn(x)

    apply.defjvp(lambda primals, tangents: (apply(*primals), tangents[1]))
    with pytest.raises(FunctionalError, match="custom_jvp function .*apply: argument leaf 0 "
                                              "is a ufunc.*nondiff_argnums"):
        tnp.grad(lambda x: tnp.sum(apply(np.sin, x)))(X)


def test_eager_create_graph_through_custom_rules():
    """Backward of the recorded backward (second order): custom_jvp differentiates its rule;
    custom_vjp its bwd, and its residuals through fwd's code (tnp code here)."""
    x = tnp.tensor(X, requires_grad=True)
    try:
        first = tnp.sum(log1pexp(x)).backward(create_graph=True).grad(x)
    except TypeError:
        pytest.skip("Tensor.backward has no create_graph")
    second = tnp.sum(first).backward().grad(x)
    np.testing.assert_allclose(second, sigmoid(X) * (1 - sigmoid(X)), rtol=1e-12)
    x = tnp.tensor(X, requires_grad=True)
    first = tnp.sum(softplus(x) ** 2).backward(create_graph=True).grad(x)
    s, y = sigmoid(X), np.logaddexp(0.0, X)
    np.testing.assert_allclose(first.data if hasattr(first, "data") else first, 2 * y * s,
                               rtol=1e-12)
    second = tnp.sum(first).backward().grad(x)
    np.testing.assert_allclose(second, 2 * s * s + 2 * y * s * (1 - s), rtol=1e-10)


def test_custom_ops_show_in_traced_graphs():
    graph = make_graph(lambda x, b: tnp.sum(log1pexp(x)) + tnp.sum(solve(A, b)),
                           X, B).graph
    names = {repr(node.operation) for node in graph.operations}
    assert "custom_jvp[log1pexp]" in names and "custom_vjp[solve]" in names
