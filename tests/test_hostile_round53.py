"""Hostile round 53: eager checkpoint strategies, double backward and ``Gradients``, and
``jit(memory_budget=...)``; each test failed before its fix (the comment says what was wrong)."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
import tidu


def test_the_smallest_feasible_budget_is_the_smallest_that_works():
    # A short program whose recomputation holds more than it frees (an operation's inputs
    # and outputs at once): the error named the smallest budget of the recomputing plans
    # (10800 bytes here), while the program as it is fits in 8640, and every budget from
    # there up was accepted.
    def f(x):
        y = x * x
        return tnp.sum(tnp.tanh(y) * x * y)

    x = np.random.default_rng(0).standard_normal((16, 16))
    step = tnp.grad(f)
    with pytest.raises(tidu.MemoryBudgetError) as caught:
        tnp.jit(step, memory_budget=0)(x)
    smallest = caught.value.smallest_feasible
    assert str(smallest) in str(caught.value)
    with pytest.raises(tidu.MemoryBudgetError):
        tnp.jit(step, memory_budget=smallest - 1)(x)
    assert np.array_equal(tnp.jit(step, memory_budget=smallest)(x), tnp.jit(step)(x))


def test_create_graph_gradients_and_grad_do_not_alias():
    # With create_graph the leaf's .grad was the Gradients' Tensor itself: zeroing
    # x.grad.data in place (as an optimizer does) zeroed grads.grad(x), and scaling one
    # scaled the other.
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    grads = (x * x * x).sum().backward(create_graph=True)
    x.grad.data[:] = 0.0
    np.testing.assert_array_equal(grads.grad(x).data, [3.0, 12.0])
    grads.grad(x).data *= 10.0
    np.testing.assert_array_equal(x.grad.data, [0.0, 0.0])
    y = tnp.tensor([1.0, 2.0], requires_grad=True)
    grads = (y * y * y).sum().backward(create_graph=True)
    grads.grad(y).data *= 10.0
    np.testing.assert_array_equal(y.grad.data, [3.0, 12.0])
    # both keep the history: d/dy sum(3 y^2) = 6 y
    np.testing.assert_array_equal(tnp.sum(y.grad).backward().grad(y), [6.0, 12.0])


def test_hvp_refuses_an_array_for_its_tuple_of_primals():
    # tnp.hvp took list(primals): an array (1, 2) became its one row, and f was
    # differentiated there, returning a (2,) result with no error (jvp refuses).
    with pytest.raises(tnp.FunctionalError, match="hvp: primals and tangents must be tuples"):
        tnp.hvp(lambda x: tnp.sum(x ** 3), np.array([[1.0, 2.0]]), np.array([[1.0, 0.0]]))
    np.testing.assert_array_equal(
        tnp.hvp(lambda x: tnp.sum(x ** 3), (np.array([[1.0, 2.0]]),), [np.array([[1.0, 0.0]])]),
        [[6.0, 0.0]])


@pytest.mark.parametrize("shape", [(5, 1), (1, 5), ()])
def test_try_hvp_refuses_a_tangent_of_another_shape_than_its_leaf(shape):
    # try_hvp checked the seed but not the tangents: a (5, 1) tangent for a (5,) leaf
    # broadcast through the rules to a (5, 5) "Hessian-vector product", with no error.
    from tidu.eager import EagerError, try_hvp
    from primitives.tensor.eager import NumpyExecutor

    x = tnp.tensor(np.linspace(0.0, 1.0, 5), requires_grad=True)
    loss = (tnp.sin(x) * x).sum()
    with pytest.raises(EagerError, match=r"try_hvp: the tangent of leaf .* shape"):
        try_hvp(loss.key, loss.grad_fn, np.ones(()), {x.key: np.ones(shape)}, NumpyExecutor())
    _, products = try_hvp(loss.key, loss.grad_fn, np.ones(()), {x.key: np.ones(5)},
                          NumpyExecutor())
    v = x.data
    np.testing.assert_allclose(products[x.key], 2 * np.cos(v) - v * np.sin(v), rtol=1e-12)


@pytest.mark.parametrize("size", [-8, 2.5, float("nan"), "8", None])
def test_sizes_that_are_no_numbers_of_bytes_are_refused(size):
    # rematerialize took int() of each size: a negative one planned a program of peak 0,
    # 2.5 bytes one of peak 4.5, "8" was taken as 8, None and NaN raised a bare TypeError or
    # ValueError; program_peak raised bare errors too (a KeyError for a missing size).
    from tidu import program_peak, rematerialize
    from tidu.errors import InvalidArgumentError
    from tidu.example_ops import Op
    from tidu.graph import GraphBuilder, Local

    b = GraphBuilder()
    x = b.add_input("x")
    [s] = b.add_operation(Op.SIN, [Local(x)])
    [y] = b.add_operation(Op.MUL, [Local(s), Local(x)])
    b.set_outputs([y])
    graph = b.build()
    sizes = {key: 8 for key in graph.value_keys if key not in graph.input_keys}
    sizes[next(iter(sizes))] = size
    for call in (lambda: rematerialize(graph, 100, sizes), lambda: program_peak(graph, sizes)):
        with pytest.raises(InvalidArgumentError, match="must be a number of bytes"):
            call()
    with pytest.raises(InvalidArgumentError, match="program_peak: no size for"):
        program_peak(graph, {})
    with pytest.raises(InvalidArgumentError, match="program_peak: sizes must map"):
        program_peak(graph, None)
