"""``odeint`` (adjoint method) and ``fixed_point`` (implicit differentiation): values against
closed forms and SciPy, derivatives against central differences and JAX, under the
transforms reverse mode composes with, and the errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import SolverError
from primitives.tensor.fixedpoint import fixed_point
from primitives.tensor.ode import odeint
from tensor_helpers import numeric_grad
from tidu import TiduError

T = np.array([0.0, 0.4, 1.1, 1.5])
Y0 = np.array([0.4, 0.1])
A = np.array([1.3, 0.2])


def pendulum(y, t, a):
    """A driven pendulum: nonlinear in y, time-dependent, two parameters."""
    return tnp.stack([y[1], -a[0] * tnp.sin(y[0]) + a[1] * tnp.cos(t)])


def loss(y0, t, a):
    return tnp.sum(odeint(pendulum, y0, t, a) * np.array([1.0, 0.3]))


def test_values_match_closed_forms_and_scipy():
    ys = odeint(lambda y, t, k: -k * y, np.array([1.0, 2.0]), T, np.array(0.7))
    np.testing.assert_allclose(ys, np.exp(-0.7 * T)[:, None] * [1.0, 2.0], rtol=1e-7)
    scipy_integrate = pytest.importorskip("scipy.integrate", reason="SciPy is the oracle")
    theirs = scipy_integrate.odeint(lambda y, t, a: np.asarray(pendulum(y, t, a)), Y0, T,
                                    args=(A,), rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(odeint(pendulum, Y0, T, A, rtol=1e-10, atol=1e-10), theirs,
                               rtol=1e-8, atol=1e-9)
    np.testing.assert_array_equal(odeint(pendulum, Y0, T, args=(A,)), odeint(pendulum, Y0, T, A))


def test_adjoint_derivatives_in_y0_t_and_args():
    grads = tnp.grad(loss, argnums=(0, 1, 2))(Y0, T, A)
    expected = (numeric_grad(lambda v: loss(v, T, A), Y0),
                numeric_grad(lambda v: loss(Y0, v, A), T),
                numeric_grad(lambda v: loss(Y0, T, v), A))
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_matches_jax_odeint():
    jax = pytest.importorskip("jax", reason="JAX's odeint is the oracle")
    jnp = pytest.importorskip("jax.numpy")
    ode = pytest.importorskip("jax.experimental.ode")

    def jax_loss(y0, t, a):
        f = lambda y, s, a: jnp.stack([y[1], -a[0] * jnp.sin(y[0]) + a[1] * jnp.cos(s)])  # noqa
        return jnp.sum(ode.odeint(f, y0, t, a) * jnp.array([1.0, 0.3]))

    with jax.enable_x64(True):
        theirs = jax.grad(jax_loss, argnums=(0, 1, 2))(Y0, T, A)
    for got, want in zip(tnp.grad(loss, argnums=(0, 1, 2))(Y0, T, A), theirs):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-6, atol=1e-8)


def test_under_jit_vmap_and_the_eager_tensor():
    expected = tnp.grad(loss, argnums=2)(Y0, T, A)
    np.testing.assert_allclose(tnp.jit(tnp.grad(loss, argnums=2))(Y0, T, A), expected,
                               rtol=1e-12)
    batch = np.stack([A, A * 1.1])
    per_example = tnp.vmap(tnp.grad(loss, argnums=2), in_axes=(None, None, 0))(Y0, T, batch)
    np.testing.assert_allclose(per_example[0], expected, rtol=1e-10)
    np.testing.assert_allclose(per_example[1], tnp.grad(loss, argnums=2)(Y0, T, A * 1.1),
                               rtol=1e-10)
    a = tnp.tensor(A, requires_grad=True)
    np.testing.assert_allclose(loss(Y0, T, a).backward().grad(a), expected, rtol=1e-12)


def test_pytree_state():
    def f(state, t):
        return {"x": state["v"], "v": -state["x"]}            # a harmonic oscillator
    ys = odeint(f, {"x": np.array(1.0), "v": np.array(0.0)}, T)
    np.testing.assert_allclose(ys["x"], np.cos(T), rtol=1e-7)
    np.testing.assert_allclose(ys["v"], -np.sin(T), rtol=1e-7, atol=1e-9)
    g = tnp.grad(lambda x0: tnp.sum(odeint(f, {"x": x0, "v": np.array(0.0)}, T)["x"]))(
        np.array(1.0))
    assert float(g) == pytest.approx(np.cos(T).sum(), rel=1e-6)


def pendulum_as_list(y, t, a):
    """``pendulum`` in SciPy's idiom: the derivative of a state of one array as a list."""
    return [y[1], -a[0] * tnp.sin(y[0]) + a[1] * tnp.cos(t)]


def test_a_list_of_a_one_array_states_entries_is_that_array():
    # SciPy's odeint and JAX's accept the idiom; tidu refused it with a structure error
    np.testing.assert_array_equal(odeint(pendulum_as_list, Y0, T, A), odeint(pendulum, Y0, T, A))
    listed = tnp.grad(lambda a: tnp.sum(odeint(pendulum_as_list, Y0, T, a)), argnums=0)(A)
    stacked = tnp.grad(lambda a: tnp.sum(odeint(pendulum, Y0, T, a)), argnums=0)(A)
    np.testing.assert_array_equal(listed, stacked)
    rows = odeint(lambda y, t: [[y[0, 1], -y[0, 0]], (y[1, 1], 0.0)], np.eye(2), T)
    np.testing.assert_allclose(rows[:, 0], np.stack([np.cos(T), -np.sin(T)], 1), rtol=1e-7,
                               atol=1e-9)
    np.testing.assert_allclose(rows[:, 1], np.stack([T, np.ones_like(T)], 1), rtol=1e-7)
    with pytest.raises(TiduError, match=r"shape \(3,\) for a state leaf of shape \(2,\)"):
        odeint(lambda y, t: [y[1], -y[0], 0.0], Y0, T)
    with pytest.raises(TiduError, match="structure"):      # a pytree state: its structure
        odeint(lambda s, t: [s["v"], -s["x"]], {"x": np.array(1.0), "v": np.array(0.0)}, T)


def test_float32_inputs_give_float32_values_and_derivatives_of_the_float64_solve():
    # the solve runs in float64 (rtol's default is below float32's resolution); values and
    # derivatives come back in each input's dtype, as JAX's odeint returns them
    f32 = lambda v: np.asarray(v, np.float32)                    # noqa: E731
    ys = odeint(pendulum, f32(Y0), f32(T), f32(A))
    assert ys.dtype == np.float32
    np.testing.assert_array_equal(ys, odeint(pendulum, f32(Y0).astype(np.float64),
                                             f32(T).astype(np.float64),
                                             f32(A).astype(np.float64)).astype(np.float32))
    grads32 = tnp.grad(loss, argnums=(0, 1, 2))(f32(Y0), f32(T), f32(A))
    grads64 = tnp.grad(loss, argnums=(0, 1, 2))(*(f32(v).astype(np.float64) for v in (Y0, T, A)))
    for got, want in zip(grads32, grads64):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, want.astype(np.float32))
    mixed = odeint(lambda s, t: {"x": s["v"], "v": -s["x"]},
                   {"x": np.float32(1.0), "v": np.array(0.0)}, T)
    assert mixed["x"].dtype == np.float32 and mixed["v"].dtype == np.float64
    y0 = tnp.tensor(f32(Y0), requires_grad=True)                 # the eager tensor too
    assert loss(y0, T, A).backward().grad(y0).dtype == np.float32


def test_a_traced_or_tensor_value_read_from_outside_the_arguments_is_refused_by_name():
    # odeint and fixed_point differentiate through their arguments only (a custom_vjp); a
    # value func reads from its closure would lose its derivative: refused, naming the fix
    from primitives.tensor.transforms.functional import FunctionalError
    for transform in (tnp.grad, lambda f: tnp.jit(tnp.grad(f)), tnp.jit):
        with pytest.raises(FunctionalError, match="odeint's func .*<lambda> reads a Tracer .* "
                                                  "argument after t"):
            transform(lambda w: tnp.sum(odeint(lambda y, s: -w * y, Y0, T)))(0.5)
        with pytest.raises(FunctionalError, match="fixed_point reads a Tracer .* argument a"):
            transform(lambda a: tnp.sum(fixed_point(lambda _, x: 0.5 * (x + a / x), None,
                                                    np.ones(1))))(4.0)
    rate = tnp.tensor(np.float64(0.5), requires_grad=True)
    with pytest.raises(FunctionalError, match="reads a Tensor"):
        odeint(lambda y, s: -rate * y, Y0, T)
    # passed as arguments, the same computations differentiate
    got = tnp.grad(lambda w: tnp.sum(odeint(lambda y, s, w: -w * y, Y0, T, w)))(0.5)
    assert float(got) == pytest.approx(float(np.sum(Y0) * np.sum(-T * np.exp(-0.5 * T))),
                                       rel=1e-6)
    assert float(tnp.grad(lambda a: tnp.sum(newton_sqrt(a)))(np.array(4.0))) == \
        pytest.approx(0.25, rel=1e-8)


def test_errors_name_the_problem():
    with pytest.raises(TiduError, match="increase strictly"):
        odeint(pendulum, Y0, np.array([0.0, 1.0, 0.5]), A)
    with pytest.raises(SolverError, match="mxstep"):
        odeint(pendulum, Y0, T, A, mxstep=2)
    with pytest.raises(TiduError, match="args"):
        odeint(pendulum, Y0, T, A, args=(A,))
    with pytest.raises(TiduError):                          # forward mode: custom_vjp
        tnp.jvp(lambda a: loss(Y0, T, a), (A,), (np.ones(2),))
    np.testing.assert_allclose(odeint(pendulum, Y0, T, A)[0], Y0)   # still usable


def newton_sqrt(a):
    return fixed_point(lambda a, x: 0.5 * (x + a / x), a, np.ones_like(a))


def test_fixed_point_value_and_implicit_derivative():
    a = np.array([2.0, 9.0, 0.25])
    np.testing.assert_allclose(newton_sqrt(a), np.sqrt(a), rtol=1e-15)
    g = tnp.grad(lambda a: tnp.sum(newton_sqrt(a) ** 3))(a)
    np.testing.assert_allclose(g, 1.5 * np.sqrt(a), rtol=1e-9)       # d/da a^(3/2)
    np.testing.assert_allclose(tnp.jit(tnp.grad(lambda a: tnp.sum(newton_sqrt(a))))(a),
                               0.5 / np.sqrt(a), rtol=1e-9)
    per_example = tnp.vmap(tnp.grad(lambda a: tnp.sum(newton_sqrt(a))))(a[:, None])
    np.testing.assert_allclose(per_example[:, 0], 0.5 / np.sqrt(a), rtol=1e-9)


def test_fixed_point_pytree_parameters_against_finite_differences():
    def f(params, x):                                        # x = tanh(W x + b): a contraction
        return tnp.tanh(params["w"] @ x + params["b"])
    params = {"w": np.array([[0.3, -0.2], [0.1, 0.4]]), "b": np.array([0.5, -0.3])}

    def objective(w, b):
        return tnp.sum(fixed_point(f, {"w": w, "b": b}, np.zeros(2)) ** 2)

    gw, gb = tnp.grad(objective, argnums=(0, 1))(params["w"], params["b"])
    np.testing.assert_allclose(gw, numeric_grad(lambda w: objective(w, params["b"]),
                                                params["w"]), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(gb, numeric_grad(lambda b: objective(params["w"], b),
                                                params["b"]), rtol=1e-6, atol=1e-9)


def test_fixed_point_errors():
    with pytest.raises(SolverError, match="max_iter=5"):
        fixed_point(lambda a, x: 2 * x + a, np.array(1.0), np.array(0.0), max_iter=5)
    with pytest.raises(SolverError, match="no fixed point"):
        with np.errstate(over="ignore"):
            fixed_point(lambda a, x: x * x + a, np.array(3.0), np.array(0.0))   # diverges


# --- the user's function is told apart by identity, not by its own == ----------------------


class _Decay:
    """A callable whose == ignores its rate: legal Python, and the rules traced for one rate
    were reused for every other (the derivative of the first, silently)."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, y, t):
        return -self.rate * y

    def __eq__(self, other):
        return isinstance(other, _Decay)

    def __hash__(self):
        return 0


class _Affine(_Decay):
    def __call__(self, a, x):
        return 0.5 * x + self.rate * a


@dataclasses.dataclass
class _DataclassDecay:                  # unhashable (eq without frozen): it was refused
    rate: float

    def __call__(self, y, t):
        return -self.rate * y


def test_odeint_derivative_follows_each_function_object():
    # (the rates in turn, in one test: the second object of an equal class used to get the
    # first one's rules)
    for rate in (1.0, 2.0, 0.5):
        for func in (_Decay(rate), _DataclassDecay(rate)):
            dy0 = tnp.grad(lambda y0: tnp.sum(odeint(func, y0, np.array([0.0, 1.0]))[-1]))(
                np.array([1.0]))
            np.testing.assert_allclose(dy0, [np.exp(-rate)], rtol=1e-6)


def test_fixed_point_derivative_follows_each_function_object():
    # x = 0.5 x + rate a, so x* = 2 rate a and dx*/da = 2 rate
    affine = dataclasses.make_dataclass("Affine", [("rate", float)],
                                        namespace={"__call__": _Affine.__call__})
    for rate in (1.0, 3.0):
        for f in (_Affine(rate), affine(rate)):
            da = tnp.grad(lambda a: tnp.sum(fixed_point(f, a, np.zeros(1))))(np.array([1.0]))
            np.testing.assert_allclose(da, [2.0 * rate], rtol=1e-8)


def test_a_bound_method_keeps_its_traced_rules_across_accesses():
    class Model:
        def __init__(self, rate):
            self.rate = rate

        def rhs(self, y, t):
            return -self.rate * y

    model = Model(0.7)
    from primitives.tensor.transforms.custom import ByIdentity
    assert ByIdentity(model.rhs) == ByIdentity(model.rhs)       # a new bound method each time
    assert ByIdentity(model.rhs) != ByIdentity(Model(0.7).rhs)
    dy0 = tnp.grad(lambda y0: tnp.sum(odeint(model.rhs, y0, np.array([0.0, 1.0]))[-1]))
    np.testing.assert_allclose(dy0(np.array([1.0])), [np.exp(-0.7)], rtol=1e-6)
