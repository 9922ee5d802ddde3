"""Reductions, scans and sorting: their primitives' rules, and conventions the table cannot state.

- every primitive of ``ops/scan.py`` and the new ones of ``ops/reduce.py`` through
  ``check_primitive`` (``order=2``) and the closure check, on hypothesis shapes with
  size-0 and size-1 axes, in float64, float32 and complex128 where the op takes complex;
  products with zeros placed at random;
- products with one and two zeros against the exact gradient and Hessian (and PyTorch's);
- sort and median: where tied values' derivatives go; ``std`` at zero variance;
- the integer-valued functions (``argsort``, ``argmax``, ``argmin``) on arrays, tensors,
  tracers and under ``jit``, with no derivative;
- misuse raises a ``TiduError`` naming the function.

The forward values and derivatives of every function on sample inputs are in
``tests/numpy_cases/statistics.py`` (run by ``test_numpy_functions.py``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import primitives.tensor as tnp
from primitives.tensor import TensorAxisError, TensorNotSupportedError, TensorShapeError, \
    TensorTypeError
from primitives.tensor.ops.reduce import Argmax, Argmin, ReduceProd, sqrt_zero_slope_at_zero
from primitives.tensor.ops.scan import (Argsort, Cumprod, Cumsum, LinearRecurrence, Sort,
                                        SortPermutation)
from test_tensor_ops import (DTYPES, REAL_DTYPES, SEEDS, SETTINGS, SHAPES, axes_of, check_op,
                             one_op_graph, rand)
from tidu import TiduError, linearize

NONEMPTY_1D_PLUS = st.lists(st.sampled_from([0, 1, 1, 2, 3]), min_size=1, max_size=3).map(tuple)


def with_zeros(rng, x, fraction=0.3):
    """``x`` with about ``fraction`` of its entries set to exactly zero."""
    return np.where(rng.random(np.shape(x)) < fraction, 0, x).astype(x.dtype)[()]


def spaced(rng, shape, dtype):
    """Distinct values at least 0.2 apart: finite differences never cross a tie."""
    values = rng.permutation(math.prod(shape)).reshape(shape) * 0.25 - 1.0
    return (values + 0.02 * rng.standard_normal(shape)).astype(dtype)


# --- the primitives' rules ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS, max_examples=10)
@given(data=st.data(), shape=NONEMPTY_1D_PLUS, seed=SEEDS)
def test_scan_rules(dtype, data, shape, seed):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(0, len(shape) - 1))
    reverse = data.draw(st.booleans())
    x = with_zeros(rng, rand(rng, shape, dtype))
    check_op(Cumsum(axis, reverse), x, seed=seed, order=2)
    check_op(Cumprod(axis, shape, dtype, reverse), x, seed=seed, order=2)
    check_op(LinearRecurrence(axis, shape, dtype, reverse), x, rand(rng, shape, dtype),
             seed=seed, order=2)


@pytest.mark.parametrize("dtype", DTYPES)
@settings(SETTINGS, max_examples=10)
@given(data=st.data(), seed=SEEDS)
def test_reduce_prod_rules(dtype, data, seed):
    shape = data.draw(SHAPES)
    axes = data.draw(axes_of(shape))
    rng = np.random.default_rng(seed)
    x = with_zeros(rng, rand(rng, shape, dtype))
    check_op(ReduceProd(axes, shape, dtype), x, seed=seed, order=2)


@pytest.mark.parametrize("dtype", REAL_DTYPES)
@settings(SETTINGS, max_examples=10)
@given(data=st.data(), shape=NONEMPTY_1D_PLUS, seed=SEEDS)
def test_sort_rules(dtype, data, shape, seed):
    axis = data.draw(st.integers(0, len(shape) - 1))
    x = spaced(np.random.default_rng(seed), shape, dtype)
    [out] = Sort(axis, shape, dtype).eval(None, [x])
    np.testing.assert_array_equal(out, np.sort(x, axis=axis))
    [positions] = SortPermutation(axis, shape).eval(None, [x])
    np.testing.assert_array_equal(x.ravel()[positions], out)
    check_op(Sort(axis, shape, dtype), x, seed=seed, order=2)


@pytest.mark.parametrize("dtype", REAL_DTYPES)
def test_std_square_root_rules(dtype):
    rng = np.random.default_rng(0)
    check_op(sqrt_zero_slope_at_zero, rand(rng, (2, 3), dtype, "positive"), order=2)


@pytest.mark.parametrize("op", [Argsort(0), Argsort(1, "stable"), SortPermutation(1, (3, 4)),
                                Argmax(1), Argmin(0)], ids=repr)
def test_integer_ops_have_no_tangent(op):
    x = np.array([[3.0, 1.0, 2.0, 1.0], [0.0, 5.0, 5.0, -1.0], [2.0, 2.0, 2.0, 2.0]])
    [out] = op.eval(None, [x])
    assert out.dtype.kind == "i"
    graph = one_op_graph(op)
    assert linearize(graph, graph.output_keys, [0]).tangent_outputs == [None]


def test_linear_recurrence_transposes_in_its_second_operand_only():
    from tidu import ADRuleError
    from tidu.graph import GraphBuilder, Linearized

    op = LinearRecurrence(0, (3,), "float64")
    with pytest.raises(ADRuleError, match="second operand"):
        op.transpose_rule(GraphBuilder(), [0], [None, None], Linearized((True, False)), None)


# --- products with zeros: exact gradients and Hessians -----------------------------------------


def _prod_gradient(x):
    return np.array([np.prod(np.delete(x, j)) for j in range(x.size)])


def _prod_hessian(x):
    n = x.size
    h = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                h[i, j] = np.prod(np.delete(x, [i, j]))
    return h


@pytest.mark.parametrize("x", [[2.0, 0.0, 3.0, -1.5], [0.0, 1.5, 0.0, 2.0], [0.0, 0.0, 0.0, 4.0],
                               [1.25, -2.0, 0.5, 3.0]], ids=["one zero", "two zeros",
                                                             "three zeros", "no zero"])
def test_prod_gradient_and_hessian_with_zeros_are_exact(x):
    x = np.array(x)
    gradient = tnp.grad(tnp.prod)(x)
    np.testing.assert_allclose(gradient, _prod_gradient(x), rtol=1e-14, atol=0)
    assert np.isfinite(gradient).all()
    hessian = np.stack([tnp.jvp(tnp.grad(tnp.prod), (x,), (e,))[1] for e in np.eye(x.size)])
    np.testing.assert_allclose(hessian, _prod_hessian(x), rtol=1e-14, atol=0)
    # reverse over reverse agrees
    rows = [tnp.grad(lambda v, i=i: tnp.grad(tnp.prod)(v)[i])(x) for i in range(x.size)]
    np.testing.assert_allclose(np.stack(rows), _prod_hessian(x), rtol=1e-14, atol=0)


def test_prod_over_several_axes_with_zeros_matches_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    x = np.array([[[2.0, 0.0], [3.0, 1.5]], [[0.0, -1.0], [0.5, 0.0]], [[1.0, 2.0], [0.0, 4.0]]])

    def f(v):
        return tnp.sum(tnp.prod(v, axis=(0, 2)) * np.array([1.0, -2.0]))

    def f_torch(v):
        return (torch.prod(torch.prod(v, dim=2), dim=0) * torch.tensor([1.0, -2.0],
                                                                      dtype=v.dtype)).sum()

    xt = torch.tensor(x)
    np.testing.assert_allclose(tnp.grad(f)(x), torch.func.grad(f_torch)(xt).numpy(), rtol=1e-13)
    direction = np.random.default_rng(0).standard_normal(x.shape)
    _, hvp = tnp.jvp(tnp.grad(f), (x,), (direction,))
    _, hvp_torch = torch.func.jvp(torch.func.grad(f_torch), (xt,), (torch.tensor(direction),))
    np.testing.assert_allclose(hvp, hvp_torch.numpy(), rtol=1e-13, atol=1e-14)


def test_cumprod_jacobian_with_zeros_matches_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    x = np.array([2.0, 0.0, 3.0, 0.0, -1.5])
    jacobian = np.stack([tnp.grad(lambda v, i=i: tnp.cumprod(v)[i])(x) for i in range(5)])
    expected = torch.autograd.functional.jacobian(lambda v: torch.cumprod(v, 0),
                                                  torch.tensor(x))
    np.testing.assert_allclose(jacobian, expected.numpy(), rtol=1e-14)
    # by hand: y = [x0, x0 x1, x0 x1 x2, ...]; only x1 moves y1 and y2 (x0 x2 = 6)
    np.testing.assert_allclose(jacobian[2], [0.0, 6.0, 0.0, 0.0, 0.0])
    assert not jacobian[3:].any()            # two zeros before: every derivative is 0


def test_cumprod_second_order_with_zeros_is_exact():
    x = np.array([[2.0, 0.0, 3.0, 0.5], [0.0, 1.5, 0.0, 2.0]])
    w = np.array([[1.0, -1.0, 2.0, 0.5], [0.3, 1.0, -2.0, 1.5]])

    def f(v):
        return tnp.sum(tnp.cumprod(v, axis=-1) * w)

    def f_numpy(v):
        return float(np.sum(np.cumprod(v, axis=-1) * w))

    direction = np.random.default_rng(1).standard_normal(x.shape)
    _, second = tnp.jvp(tnp.grad(f), (x,), (direction,))
    # f is a polynomial of degree 4 in each row: fourth-order central differences of the
    # gradient are exact up to rounding
    h = 1e-3
    grads = [tnp.grad(f)(x + k * h * direction) for k in (-2, -1, 1, 2)]
    numeric = (grads[0] - 8 * grads[1] + 8 * grads[2] - grads[3]) / (12 * h)
    np.testing.assert_allclose(second, numeric, rtol=1e-9, atol=1e-10)
    assert f(x) == f_numpy(x)


# --- where derivatives go at ties and kinks ----------------------------------------------------


def test_sort_passes_tied_tangents_on_in_stable_order():
    x = np.array([1.0, 0.0, 1.0, 1.0])
    seed = np.array([10.0, 20.0, 30.0, 40.0])             # cotangent of sort(x) = [0, 1, 1, 1]
    gradient = tnp.grad(lambda v: tnp.sum(tnp.sort(v) * seed))(x)
    np.testing.assert_array_equal(gradient, [20.0, 10.0, 30.0, 40.0])
    _, tangent = tnp.jvp(tnp.sort, (x,), (np.array([1.0, 2.0, 3.0, 4.0]),))
    np.testing.assert_array_equal(tangent, [2.0, 1.0, 3.0, 4.0])


def test_median_sends_the_derivative_to_the_selected_order_statistics():
    odd = np.array([5.0, 1.0, 3.0, 3.0, 9.0])   # stable sort: x1 x2 x3 x0 x4; middle: x3
    np.testing.assert_array_equal(tnp.grad(tnp.median)(odd), [0, 0, 0, 1, 0])
    even = np.array([4.0, 1.0, 7.0, 2.0])              # sorted: 1 2 4 7: mean of x[3], x[0]
    np.testing.assert_array_equal(tnp.grad(tnp.median)(even), [0.5, 0, 0, 0.5])
    linear = tnp.grad(lambda v: tnp.quantile(v, 0.25))(even)   # 0.25 * 3 = 0.75 of 1 -> 2
    np.testing.assert_allclose(linear, [0, 0.25, 0, 0.75])


def test_median_and_quantile_of_a_slice_with_nan_are_nan():
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(tnp.median(x, axis=1), np.median(x, axis=1))
    np.testing.assert_array_equal(tnp.quantile(x, [0.2, 0.9], axis=1),
                                  np.quantile(x, [0.2, 0.9], axis=1))
    gradient = tnp.grad(lambda v: tnp.sum(tnp.median(v, axis=1)))(x)
    np.testing.assert_array_equal(gradient, [[0, 0, 0], [0, 1, 0]])


def test_std_at_zero_variance_has_zero_derivatives_as_pytorch():
    x = np.full((2, 3), 1.5)
    np.testing.assert_array_equal(tnp.grad(lambda v: tnp.sum(tnp.std(v, axis=1)))(x), 0.0)
    _, second = tnp.jvp(tnp.grad(lambda v: tnp.sum(tnp.std(v, axis=1))), (x,), (np.ones((2, 3)),))
    np.testing.assert_array_equal(second, 0.0)
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    xt = torch.tensor(x, requires_grad=True)
    xt.std(dim=1, correction=0).sum().backward()
    np.testing.assert_array_equal(xt.grad.numpy(), 0.0)


def test_var_and_std_of_complex_match_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    rng = np.random.default_rng(0)
    z = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    weights = rng.standard_normal(3)
    for ours, theirs in ((tnp.var, torch.var), (tnp.std, torch.std)):
        value = ours(z, axis=1, ddof=1)
        assert np.asarray(value).dtype == np.float64
        gradient = tnp.grad(lambda v: tnp.sum(ours(v, axis=1, ddof=1) * weights))(z)
        zt = torch.tensor(z, requires_grad=True)
        (theirs(zt, dim=1, correction=1) * torch.tensor(weights)).sum().backward()
        np.testing.assert_allclose(gradient, zt.grad.numpy(), rtol=1e-12)


def test_sort_and_quantile_gradients_match_torch():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    rng = np.random.default_rng(0)
    x = rng.permutation(12).reshape(3, 4) * 0.3 + 0.01 * rng.standard_normal((3, 4))
    seed = rng.standard_normal((3, 4))
    xt = torch.tensor(x, requires_grad=True)
    (torch.sort(xt, dim=0).values * torch.tensor(seed)).sum().backward()
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(tnp.sort(v, axis=0) * seed))(x),
                               xt.grad.numpy(), rtol=1e-14)
    q = np.array([0.1, 0.5, 0.8])
    xt = torch.tensor(x, requires_grad=True)
    torch.quantile(xt, torch.tensor(q), dim=1).sum().backward()
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(tnp.quantile(v, q, axis=1)))(x),
                               xt.grad.numpy(), rtol=1e-13)


# --- integer results on every front end ------------------------------------------------------


def test_integer_valued_functions_on_tensors_tracers_and_jit():
    x = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    for fn in (lambda v: tnp.argsort(v, axis=1), lambda v: tnp.argmax(v, axis=0),
               lambda v: tnp.argmin(v), lambda v: np.argmax(v, axis=1)):
        expected = fn(x)
        assert np.asarray(expected).dtype.kind == "i"
        on_tensor = fn(tnp.tensor(x, requires_grad=True))
        assert isinstance(on_tensor, tnp.Tensor)
        np.testing.assert_array_equal(on_tensor.tolist(), expected)
        np.testing.assert_array_equal(tnp.jit(fn)(x), expected)
    # an index used as data under jit and grad: the derivative flows through the values only
    def f(v):
        return tnp.sum(v * tnp.argsort(v, axis=1))
    np.testing.assert_array_equal(tnp.grad(f)(x), np.argsort(x, axis=1))
    np.testing.assert_array_equal(tnp.jit(tnp.grad(f))(x), np.argsort(x, axis=1))


def test_eager_tensor_gradients_through_scans():
    x = np.array([[2.0, 0.0, 3.0], [1.0, -1.0, 0.5]])
    t = tnp.tensor(x, requires_grad=True)
    loss = tnp.sum(tnp.cumprod(t, axis=1)) + tnp.sum(tnp.cumsum(t)) + tnp.prod(t[1])
    loss.backward()
    np.testing.assert_allclose(t.grad, tnp.grad(lambda v: tnp.sum(tnp.cumprod(v, axis=1))
                                                 + tnp.sum(tnp.cumsum(v)) + tnp.prod(v[1]))(x))
    # row 0 = [2, 0, 3]: cumprod gives [1, 2 + 2 * 3, 0]; cumsum of 6 entries gives [6, 5, 4]
    np.testing.assert_allclose(t.grad[0], [1 + 6, 8 + 5, 0 + 4])


# --- misuse ----------------------------------------------------------------------------------


@pytest.mark.parametrize("call, error, name", [
    (lambda: tnp.sort(np.ones(3) * 1j), TensorTypeError, "sort"),
    (lambda: tnp.median(np.ones(3) * 1j), TensorTypeError, "median"),
    (lambda: tnp.ptp(np.ones(3) * 1j), TensorTypeError, "ptp"),
    (lambda: tnp.quantile(np.ones(3), 1.5), TensorShapeError, "quantile"),
    (lambda: tnp.percentile(np.ones(3), -1), TensorShapeError, "percentile"),
    (lambda: tnp.quantile(np.ones(3), 0.5, method="weibull"), TensorNotSupportedError, "quantile"),
    (lambda: tnp.quantile(np.ones((2, 0)), 0.5, axis=1), TensorShapeError, "quantile"),
    (lambda: tnp.diff(np.ones(3), n=-1), TensorShapeError, "diff"),
    (lambda: tnp.diff(np.float64(1.0)), TensorShapeError, "diff"),
    (lambda: tnp.argmax(np.ones((2, 0)), axis=1), TensorShapeError, "argmax"),
    (lambda: tnp.prod(np.ones(3), out=np.ones(())), TensorNotSupportedError, "prod"),
    (lambda: tnp.cumsum(np.ones((2, 2)), axis=2), TensorAxisError, "cumsum"),
    (lambda: tnp.var(np.ones((2, 2)), axis=(0, 0)), TensorShapeError, "var"),
    (lambda: tnp.var(np.ones(3), ddof=1, correction=1), TensorShapeError, "var"),
    (lambda: tnp.sort(np.ones(3), kind="bogo"), TensorShapeError, "sort"),
    (lambda: tnp.argsort(np.ones(3), order="f"), TensorNotSupportedError, "argsort"),
    (lambda: tnp.average(np.ones((2, 3)), weights=np.ones(3)), TensorTypeError, "average"),
    (lambda: tnp.average(np.ones((2, 3)), axis=1, weights=np.ones(2)), TensorShapeError,
     "average"),
])
def test_misuse_raises_a_tidu_error_naming_the_function(call, error, name):
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, TiduError)
    assert name in str(info.value)


def test_a_differentiated_q_is_differentiated():
    x = np.array([1.0, 2.0, 4.0])      # the slope of the linear interpolation: 2 * (4 - 2)
    np.testing.assert_allclose(tnp.grad(lambda q: tnp.quantile(x, q))(np.array(0.75)), 4.0)
    np.testing.assert_allclose(tnp.jit(tnp.grad(lambda q: tnp.quantile(x, q)))(0.75), 4.0)
    np.testing.assert_allclose(tnp.jit(lambda v, q: tnp.quantile(v, q))(x, np.array(0.5)), 2.0)
    with pytest.raises(TiduError, match="Quantiles must be in the range"):
        tnp.grad(lambda q: tnp.quantile(x, q))(np.array(1.5))
    np.testing.assert_allclose(tnp.quantile(x, 0.5), 2.0)
