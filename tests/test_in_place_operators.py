"""``x += y`` and the other augmented assignments on tensors and traced values.

Tensors and traced values are immutable, so ``x += y`` rebinds ``x`` to ``x + y``
(as for a Python number, or a JAX array). That is what NumPy's in-place update
means whenever no one else can see the difference; where someone can (another
name holds ``x``), or where PyTorch refuses (a leaf that requires grad), it
raises a :class:`TensorTypeError` instead of computing something else than the
NumPy program does.
"""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import TensorTypeError, tensor
from tidu import TiduError

X = np.array([1.0, 2.0, 4.0])


def accumulated(x):
    total = 0.0
    for k in range(1, 4):
        total += k * x                     # float += value, then value += value
    total *= 2.0
    total -= x
    total /= 2.0
    total **= 2
    return tnp.sum(total)


def accumulated_by_hand(x):
    return np.sum(((2.0 * 6.0 * x - x) / 2.0) ** 2)


@pytest.mark.parametrize("transform", ["eager", "grad", "jit(grad)", "vmap(grad)"])
def test_accumulating_into_a_name_differentiates(transform):
    want = 2 * ((2.0 * 6.0 - 1.0) / 2.0) ** 2 * X       # d/dx sum((5.5 x)^2)
    if transform == "eager":
        x = tensor(X, requires_grad=True)
        y = accumulated(x)
        np.testing.assert_allclose(y.item(), accumulated_by_hand(X))
        got = y.backward().grad(x)
    elif transform == "grad":
        got = tnp.grad(accumulated)(X)
    elif transform == "jit(grad)":
        got = tnp.jit(tnp.grad(accumulated))(X)
    else:
        got = tnp.vmap(tnp.grad(accumulated))(np.stack([X, X]))[1]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_every_augmented_operator_gives_the_binary_operators_value():
    a, b = np.array([5.0, 7.0]), np.array([2.0, 3.0])
    cases = {"+=": np.add, "-=": np.subtract, "*=": np.multiply, "/=": np.divide,
             "//=": np.floor_divide, "%=": np.remainder, "**=": np.power}
    for symbol, f in cases.items():
        namespace = {"x": tensor(a), "y": tensor(b)}
        exec(f"x {symbol} y", namespace)
        np.testing.assert_array_equal(namespace["x"].data, f(a, b))
    m = {"x": tensor(np.eye(2) * 2.0), "y": tensor(np.ones((2, 2)))}
    exec("x @= y", m)
    np.testing.assert_array_equal(m["x"].data, 2.0 * np.ones((2, 2)))
    bits = {"x": tensor(np.array([True, False])), "y": tensor(np.array([True, True]))}
    exec("x ^= y", bits)
    np.testing.assert_array_equal(bits["x"].data, [False, True])


def center(v):
    v -= v.mean()                          # NumPy's idiom: changes the caller's array


def centred_energy(x):
    y = x * 2.0
    center(y)
    return (y ** 2).sum()


@pytest.mark.parametrize("transform", ["eager", "grad", "jit"])
def test_an_update_another_name_would_see_is_refused(transform):
    with pytest.raises(TensorTypeError, match="another name"):
        if transform == "eager":
            centred_energy(tensor(X, requires_grad=True))
        elif transform == "grad":
            tnp.grad(centred_energy)(X)
        else:
            tnp.jit(centred_energy)(X)
    assert np.isclose(centred_energy(X), np.sum((2 * X - np.mean(2 * X)) ** 2))   # NumPy
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(v * v))(X), 2 * X)        # usable


def test_updating_leaves_that_require_grad_is_refused_as_pytorch_does():
    w = tensor([1.0, 2.0], requires_grad=True)
    for statement in ("w -= 0.1", "w += w", "w *= 2.0"):
        with pytest.raises(TensorTypeError, match="leaf tensor that requires grad") as error:
            exec(statement, {"w": w})
        assert isinstance(error.value, TiduError)
    params = [w]
    tnp.sum(w * w).backward()
    with pytest.raises(TensorTypeError, match="x.data -= ..."):
        for p in params:
            p -= 0.1 * p.grad
    np.testing.assert_array_equal(w.data, [1.0, 2.0])          # nothing changed
    w.data -= 0.1 * w.grad                                     # the update that is meant
    np.testing.assert_allclose(w.data, [0.8, 1.6])


def test_containers_and_attributes_of_one_holder_are_rebound():
    x = tensor(X, requires_grad=True)
    items = [x * 1.0]
    items[0] += x
    box = {"total": x * 1.0}
    box["total"] += x

    class Holder:
        pass

    holder = Holder()
    holder.total = x * 1.0
    holder.total += x
    for value in (items[0], box["total"], holder.total):
        np.testing.assert_array_equal(tnp.sum(value).backward().grad(x), 2.0)
    shared = x * 1.0
    both = [shared, shared]                                    # two holders of one tensor
    with pytest.raises(TensorTypeError, match="another name"):
        both[0] += x


def test_a_constant_tensor_is_rebound_and_its_aliases_are_protected():
    c = tensor([1.0, 2.0])
    c += 1.0
    np.testing.assert_array_equal(c.data, [2.0, 3.0])
    alias = c
    with pytest.raises(TensorTypeError, match="another name"):
        c += 1.0
    assert alias is c
    np.testing.assert_array_equal(c.data, [2.0, 3.0])
