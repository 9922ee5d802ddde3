"""Regressions found by a hostile hunt over the functional transforms (compared with JAX)."""

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.transforms import FunctionalError


def _x():
    return np.array([1.0, 2.0, 3.0])


# has_aux: aux must not alias the arguments or the other results ---------------------------

@pytest.mark.parametrize("call", [
    lambda f, x: tnp.grad(f, has_aux=True)(x)[1],
    lambda f, x: tnp.value_and_grad(f, has_aux=True)(x)[0][1],
    lambda f, x: tnp.jvp(f, (x,), (np.ones(3),), has_aux=True)[2],
    lambda f, x: tnp.jacfwd(lambda s: (f(s)[0] * s, f(s)[1]), has_aux=True)(x)[1],
    lambda f, x: tnp.jacrev(lambda s: (f(s)[0] * s, f(s)[1]), has_aux=True)(x)[1],
    lambda f, x: tnp.hessian(f, has_aux=True)(x)[1],
], ids=["grad", "value_and_grad", "jvp", "jacfwd", "jacrev", "hessian"])
def test_aux_returning_the_argument_does_not_alias_it(call):
    x = _x()
    aux = call(lambda s: (tnp.sum(s * s), s), x)
    assert not np.shares_memory(aux, x)
    aux[0] = 77.0
    np.testing.assert_array_equal(x, [1.0, 2.0, 3.0])


def test_aux_returning_the_output_does_not_alias_it():
    x = _x()

    def f(s):
        y = s * 2
        return y, y
    out, tangent, aux = tnp.jvp(f, (x,), (np.ones(3),), has_aux=True)
    assert not np.shares_memory(aux, out)
    aux[0] = 77.0
    np.testing.assert_array_equal(out, [2.0, 4.0, 6.0])
    out, _, aux = tnp.vjp(f, x, has_aux=True)
    assert not np.shares_memory(aux, out)


def test_aux_leaves_that_are_not_arrays_pass_through():
    x = _x()
    g, aux = tnp.grad(lambda s: (tnp.sum(s), {"n": 3, "name": "a", "s": s, "t": s}),
                      has_aux=True)(x)
    assert aux["n"] == 3 and aux["name"] == "a"
    assert not np.shares_memory(aux["s"], aux["t"]) and not np.shares_memory(aux["s"], x)


# vmap's axis_size ------------------------------------------------------------------------

def test_vmap_axis_size_without_mapped_arguments():
    c = np.array([1.0, 2.0])
    out = tnp.vmap(lambda v: v * 2, in_axes=None, axis_size=3)(c)
    np.testing.assert_array_equal(out, np.tile(c * 2, (3, 1)))
    out = tnp.vmap(lambda: tnp.ones(2), axis_size=4)()
    assert out.shape == (4, 2)
    assert tnp.vmap(lambda v: v, in_axes=None, axis_size=0)(c).shape == (0, 2)
    g = tnp.grad(lambda v: tnp.sum(tnp.vmap(lambda w: w * w, in_axes=None, axis_size=3)(v)))(c)
    np.testing.assert_allclose(g, 6 * c)


def test_vmap_axis_size_checked_against_mapped_axes():
    x = _x()
    np.testing.assert_array_equal(tnp.vmap(lambda a: a * 2, axis_size=3)(x), x * 2)
    with pytest.raises(FunctionalError, match="axis_size=4"):
        tnp.vmap(lambda a: a * 2, axis_size=4)(x)
    with pytest.raises(FunctionalError, match="axis_size"):
        tnp.vmap(lambda a: a, axis_size=-1)


# an argument named twice in argnums -----------------------------------------------------

@pytest.mark.parametrize("transform", ["grad", "value_and_grad"])
def test_grad_argnums_repeated_gives_separate_arrays(transform):
    x = _x()
    result = getattr(tnp, transform)(lambda a, b: tnp.sum(tnp.sin(a) * b),
                                     argnums=(0, 1, 0))(x, 2.0)
    first, _, second = result if transform == "grad" else result[1]
    np.testing.assert_allclose(first, 2 * np.cos(x))
    assert not np.shares_memory(first, second)
    first[0] = 99.0
    np.testing.assert_allclose(second, 2 * np.cos(x))
