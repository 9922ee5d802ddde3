"""Hostile round 55b: the functional transforms (grad, jvp, vjp, Jacobians, vmap, jit,
custom rules) against JAX, finite differences and their own error contract."""

from __future__ import annotations

import numpy as np
import pytest

import tidu
from primitives import tensor as tnp


@pytest.mark.parametrize("transform", [tnp.grad, tnp.value_and_grad])
@pytest.mark.parametrize("result", [
    lambda a: (tnp.sum(a), a),          # forgot has_aux=True
    lambda a: [tnp.sum(a)],
    lambda a: {"loss": tnp.sum(a)},
])
def test_grad_of_a_container_output_names_grad(transform, result) -> None:
    # grad of f returning a ragged tuple raised NumPy's ValueError ("setting an array
    # element with a sequence") from np.shape: no TiduError, no name of grad or f
    with pytest.raises(tidu.TiduError, match="grad: .* must return a real floating point "
                                             "scalar; it returned a (tuple|list|dict)"):
        transform(result)(np.arange(3.0))


@pytest.mark.parametrize("make", [
    lambda f: tnp.grad(f), lambda f: tnp.value_and_grad(f), lambda f: tnp.jacfwd(f),
    lambda f: tnp.jacrev(f), lambda f: tnp.hessian(f), lambda f: tnp.vmap(f),
    lambda f: tnp.jit(f), lambda f: tnp.custom_jvp(f), lambda f: tnp.custom_vjp(f),
    lambda f: tnp.jvp(f, (np.ones(2),), (np.ones(2),)), lambda f: tnp.vjp(f, np.ones(2)),
    lambda f: tnp.hvp(f, (np.ones(2),), (np.ones(2),)),
])
def test_a_transform_of_a_non_callable_names_the_transform(make) -> None:
    # grad(3)(x), jit(3)(x), ... raised Python's "'int' object is not callable" at the
    # call (no TiduError, no transform named); JAX refuses when the transform is made
    with pytest.raises(tidu.TiduError, match="expected a callable function, got 3"):
        make(3)(np.ones(2))


def test_jax_hint_arguments_of_jit_and_vmap_are_taken() -> None:
    # jax.jit(f, donate_argnums=0) and jax.vmap(f, axis_name="batch"), common in JAX
    # training code, raised Python's TypeError (unexpected keyword argument); they are
    # hints with nothing to do here, and a donated argument still never aliases a result
    x = np.arange(3.0)
    step = tnp.jit(lambda a, b: (a, a * b), donate_argnums=(0,), donate_argnames="b",
                   keep_unused=True, inline=True)
    out, scaled = step(x, 2.0)
    assert not np.shares_memory(out, x) and np.array_equal(scaled, 2.0 * x)
    per_row = tnp.vmap(tnp.grad(lambda r: tnp.sum(r ** 2)), axis_name="batch",
                       spmd_axis_name=None)(np.ones((2, 3)))
    assert np.array_equal(per_row, np.full((2, 3), 2.0))
    with pytest.raises(tidu.TiduError, match="jit of .*donate_argnums must be an int"):
        tnp.jit(lambda a: a, donate_argnums="a")


def _side_channel_custom_vjp():
    """A custom_vjp whose fwd hands a value to bwd through a global dict, not residuals."""
    store: dict = {}

    @tnp.custom_vjp
    def f(a):
        return tnp.sin(a)

    def fwd(a):
        store["a"] = a
        return tnp.sin(a), None

    def bwd(_, ct):
        return (ct * tnp.cos(store["a"]),)

    f.defvjp(fwd, bwd)
    return f


@pytest.mark.parametrize("transform", ["grad", "jit_grad", "vmap_grad"])
def test_custom_vjp_fwd_passing_values_to_bwd_outside_residuals_raises(transform) -> None:
    # bwd is traced once and reads its closure when a program starts, before fwd runs
    # (and a jit program whose outputs do not need f's value never runs fwd): jit(grad)
    # at 2x gave the gradient at x, vmap(grad) the first example's for every example
    f = _side_channel_custom_vjp()
    loss_grad = tnp.grad(lambda a: tnp.sum(f(a)))
    x = np.array([0.3, 0.7, 1.1])
    run = {"grad": lambda: loss_grad(x),
           "jit_grad": lambda: (tnp.jit(loss_grad)(x), tnp.jit(loss_grad)(2 * x)),
           "vmap_grad": lambda: tnp.vmap(loss_grad)(np.stack([x, 2 * x]))}[transform]
    with pytest.raises(tidu.TiduError, match=r"fwd rule \S*fwd of custom_vjp function \S*f "
                                             r"binds an array where its bwd rule \S*bwd reads"):
        run()


def test_custom_vjp_bwd_reading_a_global_array_still_reads_it_each_call() -> None:
    # the check above must not refuse a pure fwd whose bwd reads an outside array
    scale = {"w": np.array([1.0, 2.0, 3.0])}

    @tnp.custom_vjp
    def f(a):
        return tnp.sin(a)

    f.defvjp(lambda a: (tnp.sin(a), tnp.cos(a)), lambda c, ct: (ct * c * scale["w"],))
    step = tnp.jit(tnp.vmap(tnp.grad(lambda a: tnp.sum(f(a)))))
    xs = np.array([[0.3, 0.7, 1.1], [0.1, 0.2, 0.3]])
    np.testing.assert_allclose(step(xs), np.cos(xs) * scale["w"])
    scale["w"] = np.array([4.0, 5.0, 6.0])
    np.testing.assert_allclose(step(xs), np.cos(xs) * scale["w"])


def test_custom_jvp_function_passing_values_to_its_rule_outside_arguments_raises() -> None:
    # the same for custom_jvp: f wrote cos(a) into a global that the JVP rule read, and
    # jit(grad) at 2x gave the gradient at x (f's value was not needed, so f never ran)
    store: dict = {}

    @tnp.custom_jvp
    def f(a):
        store["c"] = np.cos(a)
        return np.sin(a)

    @f.defjvp
    def f_jvp(primals, tangents):
        return f(primals[0]), tangents[0] * store["c"]

    step = tnp.jit(tnp.grad(lambda a: tnp.sum(f(a))))
    with pytest.raises(tidu.TiduError, match=r"custom_jvp function \S*f binds an array where "
                                             r"its JVP rule \S*f_jvp reads it"):
        step(np.array([0.3, 0.7, 1.1]))
