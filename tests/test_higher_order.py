"""Higher-order derivatives by repeated ``linearize`` (each call a fresh pass id).

Forward over forward, reverse over forward, forward over reverse (Hessian-vector
products against an analytic Hessian), reverse over reverse, and third and
fourth derivatives of ``x^3`` and ``x^4``, both as products and via ``Pow``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from primitives.scalar import cos, exp, log, sin, sqrt, tanh, trace_scalar
from tidu import linear_transpose, linearize
from tidu.graph import Input, evaluate


def derivatives(g, order, x, tangents):
    """``[f(x), f'(x) t1, f''(x) t1 t2, ...]`` by ``order`` nested forward passes."""
    graphs = [g]
    output = g.output_keys[0]
    values = {Input("x"): x}
    keys = [output]
    pass_ids = []
    for k in range(order):
        if output is None:
            keys.append(None)          # a symbolic zero stays zero
            continue
        lin = linearize(graphs, [output], ["x"])
        pass_ids.append(lin.pass_id)
        graphs.append(lin.graph)
        values[lin.tangent_input_keys[0]] = tangents[k]
        [output] = lin.tangent_output_keys
        keys.append(output)
    assert len(set(pass_ids)) == len(pass_ids)
    present = [k for k in keys if k is not None]
    results = iter(evaluate(graphs, present, values))
    return [0.0 if k is None else next(results) for k in keys]


# --- forward over forward ---------------------------------------------------------------------


def test_second_derivative_forward_over_forward():
    # f = sin(x) x: f' = cos x x + sin x, f'' = 2 cos x - x sin x
    g = trace_scalar(lambda x: sin(x) * x, ["x"])
    x = 0.7
    f, d1, d2 = derivatives(g, 2, x, [1.0, 1.0])
    assert f == pytest.approx(math.sin(x) * x)
    assert d1 == pytest.approx(math.cos(x) * x + math.sin(x))
    assert d2 == pytest.approx(2 * math.cos(x) - x * math.sin(x))
    # bilinear in the two tangents
    _, _, d2 = derivatives(g, 2, x, [0.5, -3.0])
    assert d2 == pytest.approx(-1.5 * (2 * math.cos(x) - x * math.sin(x)))


@pytest.mark.parametrize("fn, d1, d2, x", [
    (sin, math.cos, lambda x: -math.sin(x), 0.4),
    (cos, lambda x: -math.sin(x), lambda x: -math.cos(x), 0.4),
    (exp, math.exp, math.exp, 0.3),
    (log, lambda x: 1 / x, lambda x: -1 / x**2, 1.7),
    (sqrt, lambda x: 0.5 / math.sqrt(x), lambda x: -0.25 * x**-1.5, 2.2),
    (tanh, lambda x: 1 - math.tanh(x)**2,
     lambda x: -2 * math.tanh(x) * (1 - math.tanh(x)**2), 0.6),
    (lambda x: 1.0 / x, lambda x: -1 / x**2, lambda x: 2 / x**3, 1.3),
    (lambda x: x ** 2.5, lambda x: 2.5 * x**1.5, lambda x: 3.75 * x**0.5, 1.9),
    (lambda x: -x - (x - 2.0), lambda x: -2.0, lambda x: 0.0, 0.5),
], ids=["sin", "cos", "exp", "log", "sqrt", "tanh", "recip", "pow2.5", "affine"])
def test_second_derivatives_of_unary_functions(fn, d1, d2, x):
    # the scalar rules are closed over the set, so a second pass always works
    g = trace_scalar(fn, ["x"])
    _, got1, got2 = derivatives(g, 2, x, [1.0, 1.0])
    assert got1 == pytest.approx(d1(x))
    assert got2 == pytest.approx(d2(x), abs=1e-12)


# --- third and fourth derivatives -------------------------------------------------------------


CUBES = {"x*x*x": lambda x: x * x * x, "x**3": lambda x: x ** 3}
FOURTHS = {"x*x*x*x": lambda x: x * x * x * x, "(x*x)*(x*x)": lambda x: (x * x) * (x * x),
           "x**4": lambda x: x ** 4}


@pytest.mark.parametrize("name", sorted(CUBES))
def test_derivatives_of_cube(name):
    # x^3: 3x^2, 6x, 6, 0 (each times the product of the tangents)
    g = trace_scalar(CUBES[name], ["x"])
    x = 1.5
    t = [0.5, 2.0, -1.5, 3.0]
    f, d1, d2, d3, d4 = derivatives(g, 4, x, t)
    assert f == pytest.approx(x**3)
    assert d1 == pytest.approx(3 * x**2 * t[0])
    assert d2 == pytest.approx(6 * x * t[0] * t[1])
    assert d3 == pytest.approx(6 * t[0] * t[1] * t[2])
    assert d4 == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("name", sorted(FOURTHS))
def test_derivatives_of_fourth_power(name):
    # x^4: 4x^3, 12x^2, 24x, 24
    g = trace_scalar(FOURTHS[name], ["x"])
    x = -1.25
    f, d1, d2, d3, d4 = derivatives(g, 4, x, [1.0] * 4)
    assert [f, d1, d2, d3, d4] == pytest.approx([x**4, 4 * x**3, 12 * x**2, 24 * x, 24.0])


def test_fifth_derivative_of_fourth_power_is_zero():
    g = trace_scalar(lambda x: x * x * x * x, ["x"])
    *_, d5 = derivatives(g, 5, 0.8, [1.0] * 5)
    assert d5 == pytest.approx(0.0, abs=1e-12)


# --- Hessians of a two-variable function ------------------------------------------------------


def f2(x, y):
    return x * x * y + sin(x * y)


def hessian(x, y):
    # f = x^2 y + sin(xy)
    s, c = math.sin(x * y), math.cos(x * y)
    return np.array([
        [2 * y - y * y * s, 2 * x + c - x * y * s],
        [2 * x + c - x * y * s, -x * x * s],
    ])


def gradient(x, y):
    c = math.cos(x * y)
    return np.array([2 * x * y + y * c, x * x + x * c])


POINT = (0.7, -1.1)


def test_gradient_by_reverse_mode():
    g = trace_scalar(f2, ["x", "y"])
    lin = linearize(g, g.output_keys, ["x", "y"])
    tr = linear_transpose(lin)
    cts = evaluate([g, lin.graph, tr.graph], tr.tangent_output_keys,
                   {Input("x"): POINT[0], Input("y"): POINT[1], tr.tangent_input_keys[0]: 1.0})
    assert np.allclose(cts, gradient(*POINT))


@pytest.mark.parametrize("v", [(1.0, 0.0), (0.0, 1.0), (0.3, -2.0)])
def test_hvp_forward_over_reverse(v):
    g = trace_scalar(f2, ["x", "y"])
    lin = linearize(g, g.output_keys, ["x", "y"])
    tr = linear_transpose(lin)
    # differentiate the gradient graph (forward) in direction v
    lin2 = linearize([g, lin.graph, tr.graph], tr.tangent_output_keys, ["x", "y"])
    assert len({lin.pass_id, tr.pass_id, lin2.pass_id}) == 3
    values = {Input("x"): POINT[0], Input("y"): POINT[1], tr.tangent_input_keys[0]: 1.0}
    values.update(zip(lin2.tangent_input_keys, v))
    hv = evaluate([g, lin.graph, tr.graph, lin2.graph], lin2.tangent_output_keys, values)
    assert np.allclose(hv, hessian(*POINT) @ np.array(v))


def test_full_hessian_forward_over_reverse():
    g = trace_scalar(f2, ["x", "y"])
    lin = linearize(g, g.output_keys, ["x", "y"])
    tr = linear_transpose(lin)
    lin2 = linearize([g, lin.graph, tr.graph], tr.tangent_output_keys, ["x", "y"])
    graphs = [g, lin.graph, tr.graph, lin2.graph]
    rows = []
    for e in np.eye(2):
        values = {Input("x"): POINT[0], Input("y"): POINT[1], tr.tangent_input_keys[0]: 1.0}
        values.update(zip(lin2.tangent_input_keys, e))
        rows.append(evaluate(graphs, lin2.tangent_output_keys, values))
    assert np.allclose(np.array(rows).T, hessian(*POINT))


@pytest.mark.parametrize("t", [(1.0, 0.0), (0.0, 1.0), (0.3, -2.0)])
def test_hvp_reverse_over_forward(t):
    # the gradient (w.r.t. x, y) of the JVP  grad f . t  is H t
    g = trace_scalar(f2, ["x", "y"])
    lin = linearize(g, g.output_keys, ["x", "y"])
    lin2 = linearize([g, lin.graph], lin.tangent_output_keys, ["x", "y"])
    tr2 = linear_transpose(lin2)
    values = {Input("x"): POINT[0], Input("y"): POINT[1], tr2.tangent_input_keys[0]: 1.0}
    values.update(zip(lin.tangent_input_keys, t))
    hv = evaluate([g, lin.graph, lin2.graph, tr2.graph], tr2.tangent_output_keys, values)
    assert np.allclose(hv, hessian(*POINT) @ np.array(t))


def test_hvp_reverse_over_reverse():
    # transposing the forward-over-reverse map gives H^T w = H w
    g = trace_scalar(f2, ["x", "y"])
    lin = linearize(g, g.output_keys, ["x", "y"])
    tr = linear_transpose(lin)
    lin2 = linearize([g, lin.graph, tr.graph], tr.tangent_output_keys, ["x", "y"])
    tr2 = linear_transpose(lin2)
    w = (0.25, 1.5)
    values = {Input("x"): POINT[0], Input("y"): POINT[1], tr.tangent_input_keys[0]: 1.0}
    values.update(zip(tr2.tangent_input_keys, w))
    hw = evaluate([g, lin.graph, tr.graph, lin2.graph, tr2.graph], tr2.tangent_output_keys, values)
    assert np.allclose(hw, hessian(*POINT).T @ np.array(w))


def test_mixed_partial_forward_over_forward():
    # d/dy (d/dx f) = f_xy, with the two passes over different inputs
    g = trace_scalar(f2, ["x", "y"])
    lin = linearize(g, g.output_keys, ["x"])
    lin2 = linearize([g, lin.graph], lin.tangent_output_keys, ["y"])
    values = {Input("x"): POINT[0], Input("y"): POINT[1],
              lin.tangent_input_keys[0]: 1.0, lin2.tangent_input_keys[0]: 1.0}
    [fxy] = evaluate([g, lin.graph, lin2.graph], lin2.tangent_output_keys, values)
    assert fxy == pytest.approx(hessian(*POINT)[0, 1])


def test_third_order_forward_over_forward_over_reverse():
    # f = x^4 (single input): gradient 4x^3, then two forward passes: 12x^2, 24x
    g = trace_scalar(lambda x: x ** 4, ["x"])
    lin = linearize(g, g.output_keys, ["x"])
    tr = linear_transpose(lin)
    graphs = [g, lin.graph, tr.graph]
    values = {Input("x"): 0.9, tr.tangent_input_keys[0]: 1.0}
    outputs = tr.tangent_output_keys
    keys = [outputs[0]]
    for _ in range(2):
        nxt = linearize(graphs, outputs, ["x"])
        graphs.append(nxt.graph)
        values[nxt.tangent_input_keys[0]] = 1.0
        outputs = nxt.tangent_output_keys
        keys.append(outputs[0])
    got = evaluate(graphs, keys, values)
    assert got == pytest.approx([4 * 0.9**3, 12 * 0.9**2, 24 * 0.9])
