"""``grad`` and ``value_and_grad`` with ``holomorphic=True``: the complex derivative ``f'(z)``,
as ``jax.grad(f, holomorphic=True)``. Checked against the derivatives written by hand, by
central differences along the real and the imaginary axis (equal only for a holomorphic
``f``), through ``jit``, ``vmap`` and a second ``grad``, and against JAX where installed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import primitives.tensor as tnp
from primitives.tensor.transforms.functional import FunctionalError

# (f, f', f'') on complex scalars; tnp functions, so they trace
FUNCTIONS = {
    "cube": (lambda z: z ** 3, lambda z: 3 * z ** 2, lambda z: 6 * z),
    "sin_times_z": (lambda z: tnp.sin(z) * z, lambda z: np.cos(z) * z + np.sin(z),
                    lambda z: 2 * np.cos(z) - z * np.sin(z)),
    "exp": (tnp.exp, np.exp, np.exp),
    "reciprocal": (lambda z: 1 / z, lambda z: -1 / z ** 2, lambda z: 2 / z ** 3),
    "log": (tnp.log, lambda z: 1 / z, lambda z: -1 / z ** 2),
    "tanh": (tnp.tanh, lambda z: 1 - np.tanh(z) ** 2,
             lambda z: -2 * np.tanh(z) * (1 - np.tanh(z) ** 2)),
}
POINTS = st.complex_numbers(min_magnitude=0.2, max_magnitude=1.5, allow_nan=False,
                            allow_infinity=False).filter(
    lambda z: z.real > 0 or abs(z.imag) > 0.05)      # off log's branch cut (the differences)


@settings(max_examples=25, deadline=None)
@given(z=POINTS, name=st.sampled_from(sorted(FUNCTIONS)))
def test_the_derivative_is_f_prime(z, name):
    f, first, _ = FUNCTIONS[name]
    z = np.complex128(z)
    got = tnp.grad(f, holomorphic=True)(z)
    assert isinstance(got, np.ndarray) and got.shape == () and got.dtype == np.complex128
    np.testing.assert_allclose(got, first(z), rtol=1e-12)
    h = 1e-6                                   # along either axis: the same for holomorphic f
    along_real = (complex(f(z + h)) - complex(f(z - h))) / (2 * h)
    along_imaginary = (complex(f(z + 1j * h)) - complex(f(z - 1j * h))) / (2j * h)
    np.testing.assert_allclose(got, along_real, rtol=1e-7)
    np.testing.assert_allclose(got, along_imaginary, rtol=1e-7)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_through_jit_vmap_and_a_second_grad(name):
    f, first, second = FUNCTIONS[name]
    zs = np.array([0.3 + 0.7j, -0.9 + 0.2j, 1.1 - 0.4j])
    derivative = tnp.grad(f, holomorphic=True)
    np.testing.assert_allclose(tnp.jit(derivative)(zs[0]), first(zs[0]), rtol=1e-12)
    np.testing.assert_allclose(tnp.vmap(derivative)(zs), first(zs), rtol=1e-12)
    np.testing.assert_allclose(tnp.jit(tnp.vmap(derivative))(zs), first(zs), rtol=1e-12)
    np.testing.assert_allclose(tnp.grad(derivative, holomorphic=True)(zs[1]), second(zs[1]),
                               rtol=1e-11)
    # jvp of it (forward over the holomorphic reverse): f''(z) * t
    _, tangent = tnp.jvp(derivative, (zs[2],), (np.complex128(0.5 - 2j),))
    np.testing.assert_allclose(tangent, second(zs[2]) * (0.5 - 2j), rtol=1e-11)


def test_value_and_grad_argnums_aux_and_pytrees():
    a, b = np.complex128(0.5 + 1j), np.complex128(-2 + 0.3j)

    def f(a, b):
        return a * b ** 2, a + b

    (value, aux), (da, db) = tnp.value_and_grad(f, argnums=(0, 1), has_aux=True,
                                                holomorphic=True)(a, b)
    assert value == a * b ** 2 and aux == a + b
    np.testing.assert_allclose([da, db], [b ** 2, 2 * a * b], rtol=1e-14)
    tree = {"a": np.array([a, 1j]), "b": (np.complex128(b),)}
    g = tnp.grad(lambda t: tnp.sum(t["a"] ** 2) * t["b"][0], holomorphic=True)(tree)
    np.testing.assert_allclose(g["a"], 2 * tree["a"] * b, rtol=1e-14)
    np.testing.assert_allclose(g["b"][0], np.sum(tree["a"] ** 2), rtol=1e-14)
    da_again = tnp.grad(lambda a, b: a * b ** 2, holomorphic=True)(a, b)    # argnums=0
    np.testing.assert_allclose(da_again, b ** 2, rtol=1e-14)


def test_the_result_is_fresh_and_reads_closed_over_arrays_now():
    shift = np.array([1.0 + 1j])
    f = tnp.jit(tnp.grad(lambda z: tnp.sum((z + shift) ** 2), holomorphic=True))
    z = np.array([0.5j])
    first = f(z)
    np.testing.assert_allclose(first, 2 * (z + shift))
    first[...] = 99                           # written into: the next call is not affected
    shift[...] = 2.0
    np.testing.assert_allclose(f(z), 2 * (z + 2.0))
    identity = tnp.grad(lambda z: z, holomorphic=True)
    one = identity(np.complex128(3j))
    assert one == 1
    one[...] = 5
    assert identity(np.complex128(3j)) == 1


def test_an_eager_tensor_argument_keeps_its_history():
    t = tnp.tensor(np.array([0.3 + 0.7j]), requires_grad=True)
    g = tnp.grad(lambda z: tnp.sum(z ** 3), holomorphic=True)(t)        # 3 z**2
    np.testing.assert_allclose(g.data, 3 * t.data ** 2)
    # d Re(3 z**2) in tidu's convention (PyTorch's): conj(6 z)
    gradient = tnp.sum(tnp.real(g)).backward().grad(t)
    np.testing.assert_allclose(gradient, np.conj(6 * t.data))


@pytest.mark.parametrize("f, args, match", [
    (lambda z: z * z, (np.float64(2.0),), "argument 0 has dtype float64; a holomorphic"),
    (lambda z, w: z * w, (np.complex128(1j), np.float64(2.0)), None),     # argnums=0 only
    (lambda z: tnp.abs(z), (np.complex128(1j),), "must return a complex scalar; it returned "
                                                 r"shape \(\), dtype float64"),
    (lambda z: z * np.ones(2), (np.complex128(1j),), r"shape \(2,\), dtype complex128"),
])
def test_misuse_is_refused_by_name(f, args, match):
    if match is None:
        np.testing.assert_allclose(tnp.grad(f, holomorphic=True)(*args), 2.0)
        with pytest.raises(FunctionalError, match="argument 1 has dtype float64"):
            tnp.grad(f, argnums=1, holomorphic=True)(*args)
        return
    with pytest.raises(FunctionalError, match=r"grad.*holomorphic=True.*" + match):
        tnp.grad(f, holomorphic=True)(*args)
    assert tnp.grad(lambda z: z * z, holomorphic=True)(np.complex128(1j)) == 2j   # still usable


def test_a_complex_output_without_holomorphic_says_how():
    with pytest.raises(FunctionalError, match="real floating point scalar.*pass holomorphic=True"):
        tnp.grad(lambda z: z * z)(np.complex128(1j))
    with pytest.raises(FunctionalError, match=r"shape \(2,\), dtype complex128$"):  # no hint
        tnp.grad(lambda z: z * np.ones(2))(np.complex128(1j))


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_agrees_with_jax(jx, name):
    jax, jnp = jx
    f, _, _ = FUNCTIONS[name]
    jax_f = {"cube": lambda z: z ** 3, "sin_times_z": lambda z: jnp.sin(z) * z,
             "exp": jnp.exp, "reciprocal": lambda z: 1 / z, "log": jnp.log,
             "tanh": jnp.tanh}[name]
    for z in (0.3 + 0.7j, -0.9 + 0.2j):
        expected = complex(jax.grad(jax_f, holomorphic=True)(jnp.complex128(z)))
        np.testing.assert_allclose(tnp.grad(f, holomorphic=True)(np.complex128(z)), expected,
                                   rtol=1e-13)


def test_composes_with_jit_and_vmap_in_both_orders():
    f, first, _ = FUNCTIONS["sin_times_z"]
    zs = np.array([0.3 + 0.7j, -0.9 + 0.2j])
    np.testing.assert_allclose(tnp.grad(tnp.jit(f), holomorphic=True)(zs[0]), first(zs[0]),
                               rtol=1e-12)
    summed = tnp.grad(lambda v: tnp.sum(tnp.vmap(f)(v)), holomorphic=True)(zs)
    np.testing.assert_allclose(summed, first(zs), rtol=1e-12)
    np.testing.assert_allclose(tnp.vmap(tnp.jit(tnp.grad(f, holomorphic=True)))(zs), first(zs),
                               rtol=1e-12)
