"""``x + y``, ``x - y``, ``x * y`` bind their op straight from the operator when both
operands are of one front end, shape and dtype; every other case takes ``tnp.add`` etc.
Each case must give what the tnp function gives, value and gradient."""

import numpy as np
import pytest

from primitives import tensor as tnp

OPERATORS = {"add": (lambda a, b: a + b, tnp.add), "sub": (lambda a, b: a - b, tnp.subtract),
             "mul": (lambda a, b: a * b, tnp.multiply)}
CASES = {
    "one shape and dtype": (np.array([1.0, -2.0]), np.array([3.0, 0.5])),
    "two dtypes": (np.array([1.0, -2.0], np.float32), np.array([3.0, 0.5])),
    "broadcast": (np.array([[1.0], [2.0]]), np.array([3.0, 0.5, -1.0])),
    "0-d": (np.array(0.7), np.array(-1.3)),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", list(OPERATORS))
def test_eager_operator_matches_the_tnp_function(name, case):
    operator, function = OPERATORS[name]
    a0, b0 = CASES[case]
    results = []
    for f in (operator, function):
        a, b = tnp.tensor(a0, requires_grad=True), tnp.tensor(b0, requires_grad=True)
        out = f(a, b)
        grads = (out * out).sum().backward()
        results.append((out.data, out.dtype, grads.grad(a), grads.grad(b)))
    (v1, d1, ga1, gb1), (v2, d2, ga2, gb2) = results
    assert d1 == d2
    np.testing.assert_array_equal(v1, v2)
    np.testing.assert_array_equal(ga1, ga2)
    np.testing.assert_array_equal(gb1, gb2)


@pytest.mark.parametrize("name", list(OPERATORS))
def test_operator_on_tracers_of_two_levels_differentiates_both(name):
    operator, function = OPERATORS[name]

    def second(op):
        # inner tracer (level of the inner grad) meets the outer one in op: the top wins
        return tnp.grad(lambda x: tnp.grad(lambda y: op(x, y * y).sum())(x * 1.5).sum())(
            np.array([0.5, 2.0]))

    np.testing.assert_array_equal(second(operator), second(function))


@pytest.mark.parametrize("name", list(OPERATORS))
def test_operator_under_jit_vmap_and_grad_in_both_orders(name):
    operator, function = OPERATORS[name]
    xs = np.arange(6.0).reshape(3, 2)
    for op in (operator, function):
        def f(w, op=op):
            return op(w, w * 2.0).sum()

        a = tnp.jit(tnp.vmap(tnp.grad(f)))(xs)
        b = tnp.vmap(tnp.jit(tnp.grad(f)))(xs)
        c = tnp.grad(lambda w, f=f: tnp.vmap(f)(w).sum())(xs)
        np.testing.assert_allclose(a, b)
        np.testing.assert_allclose(a, c)
    by_operator = tnp.jit(tnp.vmap(tnp.grad(lambda w: operator(w, w * 2.0).sum())))(xs)
    by_function = tnp.jit(tnp.vmap(tnp.grad(lambda w: function(w, w * 2.0).sum())))(xs)
    np.testing.assert_array_equal(by_operator, by_function)
