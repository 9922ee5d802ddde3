"""Errors of ``primitives.tensor``: the class NumPy/JAX/PyTorch users expect, and a message
naming the operation and the shapes involved.

Shape errors are ``ValueError``s (NumPy's ``AxisError`` for axes), dtype errors
``TypeError``s, misuse of backward and of the transforms ``TiduError``s that are
also ``ValueError``s. Each op error is checked on NumPy arrays, on eager tensors
and inside a functional transform.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor import BackwardError, FunctionalError, tensor
from tidu import TiduError


def under(frontend, fn, *arrays):
    """Run ``fn`` on ``arrays`` as NumPy arrays, eager tensors, or inside ``grad``."""
    if frontend == "numpy":
        return fn(*arrays)
    if frontend == "eager":
        return fn(*[tensor(a, requires_grad=True) for a in arrays])
    return tnp.grad(lambda *xs: tnp.sum(fn(*xs)), argnums=tuple(range(len(arrays))))(*arrays)


FRONTENDS = ["numpy", "eager", "functional"]


def shapes_named(message, *shapes):
    return all(str(s) in message for s in shapes)


# --- op errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("fn,name", [(tnp.add, "add"), (tnp.multiply, "mul"),
                                     (tnp.divide, "div"), (tnp.subtract, "sub"),
                                     (lambda a, b: a + b, "add"), (lambda a, b: a / b, "div")])
def test_broadcast_shape_mismatch(frontend, fn, name):
    if frontend == "numpy" and fn.__name__ == "<lambda>":
        pytest.skip("operators on plain arrays are NumPy's own")
    with pytest.raises(ValueError) as info:
        under(frontend, fn, np.ones((2, 3)), np.ones(4))
    message = str(info.value)
    assert name in message and shapes_named(message, (2, 3), (4,)), message
    assert "broadcast" in message


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("new_shape", [(4,), (5, -1), (-1, -1)])
def test_reshape_to_an_incompatible_shape(frontend, new_shape):
    with pytest.raises(ValueError) as info:
        under(frontend, lambda a: tnp.reshape(a, new_shape), np.ones((2, 3)))
    message = str(info.value)
    assert "reshape" in message and shapes_named(message, (2, 3), new_shape), message


@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("fn,name", [(tnp.sum, "sum"), (tnp.mean, "mean")])
@pytest.mark.parametrize("axis,bad", [(2, 2), (-3, -3), ((0, 5), 5)])
def test_axis_out_of_range(frontend, fn, name, axis, bad):
    with pytest.raises(np.exceptions.AxisError) as info:       # a ValueError and an IndexError
        under(frontend, lambda a: fn(a, axis=axis), np.ones((2, 3)))
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert name in message and str(bad) in message and "dimension 2" in message, message


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_broadcast_to_and_transpose_errors(frontend):
    with pytest.raises(ValueError) as info:
        under(frontend, lambda a: tnp.broadcast_to(a, (3, 3)), np.ones((2, 3)))
    assert "broadcast_to" in str(info.value) and shapes_named(str(info.value), (2, 3), (3, 3))
    with pytest.raises(ValueError) as info:
        under(frontend, lambda a: tnp.transpose(a, (0, 0)), np.ones((2, 3)))
    assert "transpose" in str(info.value)


def test_power_differentiates_in_the_exponent_too():
    x_np = np.array([0.5, 2.0])
    x = tensor(x_np, requires_grad=True)
    g = tnp.sum(x ** x).backward().grad(x)
    np.testing.assert_allclose(g, x_np ** x_np * (np.log(x_np) + 1), rtol=1e-12)
    with pytest.raises(TypeError, match="power"):
        tnp.power(x, "2")


# --- requires_grad on non-differentiable dtypes -------------------------------------------------


@pytest.mark.parametrize("data", [np.arange(3), np.array([True, False]), np.array(1, np.int8)])
def test_requires_grad_on_integer_or_bool_array(data):
    with pytest.raises(TypeError) as info:
        tensor(data, requires_grad=True)
    assert str(data.dtype) in str(info.value) and "grad" in str(info.value)
    with pytest.raises(TypeError):
        tnp.Tensor(data, requires_grad=True)
    assert not tensor(data).requires_grad                            # fine without grad


# --- backward ---------------------------------------------------------------------------------------


def test_backward_of_a_non_scalar_needs_a_seed():
    x = tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(BackwardError) as info:
        (x * 2.0).backward()
    assert isinstance(info.value, TiduError) and isinstance(info.value, ValueError)
    message = str(info.value)
    assert "backward" in message and "seed" in message and "(2, 3)" in message, message
    assert x.grad is None                                            # nothing accumulated


@pytest.mark.parametrize("seed_shape", [(3,), (3, 2), (), (1, 2, 3)])
def test_backward_seed_of_the_wrong_shape(seed_shape):
    x = tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(BackwardError) as info:
        (x * 2.0).backward(np.ones(seed_shape))
    message = str(info.value)
    assert "seed" in message and shapes_named(message, seed_shape, (2, 3)), message
    assert x.grad is None


def test_zero_dim_backward_with_a_non_scalar_seed():
    x = tensor(np.array(1.0), requires_grad=True)
    with pytest.raises(BackwardError):
        (x * x).backward(np.ones(2))


def test_wrong_seed_message_names_backward():
    x = tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(BackwardError, match="backward"):
        (x * 2.0).backward(np.ones(3))


# --- grad, vjp, jvp ---------------------------------------------------------------------------------


def test_grad_of_a_non_scalar_function():
    with pytest.raises(FunctionalError) as info:
        tnp.grad(lambda a: a * 2.0)(np.ones(3))
    assert isinstance(info.value, TiduError) and isinstance(info.value, TypeError)
    message = str(info.value)
    assert "grad" in message and "(3,)" in message, message
    with pytest.raises(FunctionalError):
        tnp.value_and_grad(lambda a: tnp.sum(a, axis=0))(np.ones((2, 2)))
    with pytest.raises(FunctionalError):                  # shape (1,) is not a scalar (JAX)
        tnp.grad(lambda a: tnp.reshape(tnp.sum(a), (1,)))(np.ones(3))


def test_grad_of_a_complex_valued_function():
    with pytest.raises(FunctionalError) as info:
        tnp.grad(lambda z: tnp.sum(z * z))(np.ones(3) + 1j)
    message = str(info.value)
    assert "grad" in message and "complex" in message, message
    with pytest.raises(FunctionalError):                  # complex even from a real input
        tnp.grad(lambda x: tnp.sum(x * 1j))(np.ones(3))


def test_hvp_of_a_non_scalar_function():
    with pytest.raises(FunctionalError, match="hvp: .* must return a real floating point scalar"):
        tnp.hvp(lambda a: a * 2.0, (np.ones(3),), (np.ones(3),))


@pytest.mark.parametrize("argnums", [2, -3, (0, 2)])
def test_grad_argnums_out_of_range(argnums):
    with pytest.raises(FunctionalError) as info:
        tnp.grad(lambda a, b: tnp.sum(a * b), argnums=argnums)(np.ones(2), np.ones(2))
    assert "argnums" in str(info.value) and "2 arguments" in str(info.value)


def test_grad_with_respect_to_an_integer_input():
    with pytest.raises(TypeError, match="int64"):
        tnp.grad(lambda x: tnp.sum(x * x))(np.arange(3))


def test_vjp_fn_with_a_cotangent_of_the_wrong_shape():
    _, vjp_fn = tnp.vjp(lambda a: a * 2.0, np.ones(3))
    with pytest.raises(tnp.TensorShapeError) as info:
        vjp_fn(np.ones(4))
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "cotangent" in message and shapes_named(message, (4,), (3,)), message
    with pytest.raises(tnp.TensorShapeError):
        vjp_fn(np.ones(()))
    np.testing.assert_array_equal(vjp_fn(np.ones(3))[0], 2 * np.ones(3))   # still usable


def test_vjp_fn_with_the_wrong_number_of_cotangents():
    _, vjp_fn = tnp.vjp(lambda a: (a * 2.0, tnp.sum(a)), np.ones(3))
    with pytest.raises(FunctionalError) as info:
        vjp_fn((np.ones(3),))
    assert re.search(r"\(1 arrays\) for an output of structure \(\*, \*\)", str(info.value)), \
        str(info.value)
    with pytest.raises(tnp.TensorShapeError):
        vjp_fn((np.ones(3), np.ones(3)))                              # second has the wrong shape


def test_vjp_fn_message_names_vjp():
    _, vjp_fn = tnp.vjp(lambda a: a * 2.0, np.ones(3))
    with pytest.raises(tnp.TensorShapeError, match="vjp"):
        vjp_fn(np.ones(4))


def test_jvp_with_mismatched_counts():
    with pytest.raises(FunctionalError) as info:
        tnp.jvp(lambda a, b: a * b, (np.ones(3), np.ones(3)), (np.ones(3),))
    message = str(info.value)
    assert "jvp" in message and "2 primals" in message and "1 tangents" in message, message
    with pytest.raises(FunctionalError, match="jvp"):
        tnp.jvp(lambda a: a, (np.ones(3),), ())


def test_jvp_with_mismatched_shapes():
    with pytest.raises(tnp.TensorShapeError) as info:
        tnp.jvp(lambda a: a * 2.0, (np.ones((2, 3)),), (np.ones(3),))
    message = str(info.value)
    assert "jvp" in message and shapes_named(message, (2, 3), (3,)), message
    with pytest.raises(tnp.TensorShapeError, match="hvp: tangent of shape"):
        tnp.hvp(lambda a: tnp.sum(a * a), (np.ones(3),), (np.ones(2),))


def test_jvp_primals_must_be_a_tuple_or_list():
    with pytest.raises(TypeError, match="tuple"):
        tnp.jvp(_first_doubled, np.ones(1), np.ones(1))    # today: silently f(np.float64(1.0))


def _first_doubled(*args):
    return args[0] * 2.0


@pytest.mark.parametrize("misuse, builtin", [
    (lambda: tnp.einsum("ij,jk", np.ones((2, 2))), ValueError),
    (lambda: tnp.tensor(np.ones(3))[5], IndexError),
    (lambda: tnp.power(tnp.tensor(np.ones(2)), "2"), TypeError),
    (lambda: tnp.concatenate([]), ValueError),
    (lambda: tnp.tensor(np.arange(3), requires_grad=True), TypeError),
])
def test_misuse_raises_a_tidu_error_that_is_also_the_numpy_builtin(misuse, builtin):
    from tidu import TiduError

    with pytest.raises(builtin) as info:
        misuse()
    assert isinstance(info.value, TiduError)


def test_graph_cannot_be_constructed_or_changed():
    from tidu.errors import ImmutableGraphError
    from tidu.graph import Graph, GraphBuilder

    with pytest.raises(ImmutableGraphError, match="GraphBuilder.build"):
        Graph()
    graph = GraphBuilder().build()
    with pytest.raises(AttributeError, match="immutable; cannot set 'inputs'"):
        graph.inputs = ()
