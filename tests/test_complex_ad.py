"""Complex numbers: JAX's convention as tidu documents it.

Graphs are traced with ``complex_inputs`` naming the complex inputs: types are
explicit, and mixing real and complex values goes through ``TO_COMPLEX``.

Forward mode is the real-linear derivative ``df = f_z dz + f_zbar conj(dz)``;
transposes are taken w.r.t. ``<a, b> = Re(conj(a) b)``. So the VJP of a
holomorphic ``f`` with seed ``ct`` is ``ct * conj(f'(z))``, and the VJP of
``|z|^2 = z * conj(z)`` with seed 1 is ``2z``.
"""

from __future__ import annotations

import cmath
import random

import pytest

from primitives.scalar import Scale, conj, exp, imag, log, real, sin, sqrt, tanh, trace_scalar
from tidu import linear_transpose, linearize
from tidu.graph import GraphBuilder, Input, Local, evaluate

Z, W = 0.3 + 0.8j, -1.1 + 0.4j



def jvp_vjp(g, wrt, primals, tangents, seeds):
    """``(J t, J^T ct)`` for a traced graph; ``None`` stays ``None``."""
    lin = linearize(g, g.output_keys, wrt)
    tr = linear_transpose(lin)
    values = {Input(k): v for k, v in primals.items()}
    values.update(zip(lin.tangent_input_keys, tangents))
    values.update(zip(tr.tangent_input_keys,
                      [s for s, t in zip(seeds, lin.tangent_outputs) if t is not None]))
    keys = lin.tangent_output_keys + tr.tangent_output_keys
    present = [k for k in keys if k is not None]
    results = iter(evaluate([g, lin.graph, tr.graph], present, values))
    out = [None if k is None else next(results) for k in keys]
    n = len(lin.tangent_output_keys)
    return out[:n], out[n:]


def inner(a, b):
    """The real inner product ``Re(conj(a) b)``; ``None`` is zero."""
    if a is None or b is None:
        return 0.0
    return (complex(a).conjugate() * b).real


def test_product():
    # d(zw) = w dz + z dw; VJP: (ct conj(w), ct conj(z))
    g = trace_scalar(lambda z, w: z * w, ["z", "w"], complex_inputs=["z", "w"])
    dz, dw, ct = 0.5 - 1j, 2j, 1.5 + 0.5j
    [t], cts = jvp_vjp(g, ["z", "w"], {"z": Z, "w": W}, [dz, dw], [ct])
    assert t == pytest.approx(W * dz + Z * dw)
    assert cts == pytest.approx([ct * W.conjugate(), ct * Z.conjugate()])


def test_conj():
    # d conj(z) = conj(dz): not holomorphic, but real-linear; its transpose is conj too
    g = trace_scalar(lambda z: conj(z), ["z"], complex_inputs=["z"])
    [t], [c] = jvp_vjp(g, ["z"], {"z": Z}, [0.25 + 2j], [1 - 3j])
    assert t == pytest.approx(0.25 - 2j)
    assert c == pytest.approx(1 + 3j)


def test_exp():
    # d exp z = exp z dz; VJP ct conj(exp z)
    g = trace_scalar(lambda z: exp(z), ["z"], complex_inputs=["z"])
    [t], [c] = jvp_vjp(g, ["z"], {"z": Z}, [1j], [2.0 - 1j])
    assert t == pytest.approx(cmath.exp(Z) * 1j)
    assert c == pytest.approx((2.0 - 1j) * cmath.exp(Z).conjugate())


def test_abs_squared():
    # |z|^2 = z conj z: d = conj(z) dz + z conj(dz) = 2 Re(conj(z) dz); VJP of seed 1 is 2z
    g = trace_scalar(lambda z: z * conj(z), ["z"], complex_inputs=["z"])
    dz = 0.7 - 0.2j
    [t], [c] = jvp_vjp(g, ["z"], {"z": Z}, [dz], [1.0])
    assert t == pytest.approx(2 * (Z.conjugate() * dz).real)
    assert c == pytest.approx(2 * Z)


def test_abs_squared_as_real_output():
    # real(z conj z) returns a float; the gradient is still 2z
    g = trace_scalar(lambda z: real(z * conj(z)), ["z"], complex_inputs=["z"])
    [t], [c] = jvp_vjp(g, ["z"], {"z": Z}, [1.0], [1.0])
    assert isinstance(t, float)
    assert t == pytest.approx(2 * Z.real)
    assert c == pytest.approx(2 * Z)


def test_squared_distance_gradient():
    # L = |z - a|^2: the cotangent of z is 2 (z - a), the steepest-ascent direction
    a = 0.5 - 0.5j
    g = trace_scalar(lambda z: real((z - a) * conj(z - a)), ["z"], complex_inputs=["z"])
    _, [c] = jvp_vjp(g, ["z"], {"z": Z}, [0.0], [1.0])
    assert c == pytest.approx(2 * (Z - a))


def test_real_and_imag():
    # Re and Im are real-linear: transposes map a real seed s to s and i s
    g = trace_scalar(lambda z: (real(z), imag(z)), ["z"], complex_inputs=["z"])
    ts, [c] = jvp_vjp(g, ["z"], {"z": Z}, [2 - 3j], [1.5, 0.5])
    assert ts == pytest.approx([2.0, -3.0])
    assert c == pytest.approx(1.5 + 0.5j)


@pytest.mark.parametrize("fn, deriv", [
    (exp, cmath.exp),
    (sin, cmath.cos),
    (log, lambda z: 1 / z),
    (sqrt, lambda z: 0.5 / cmath.sqrt(z)),
    (tanh, lambda z: 1 - cmath.tanh(z) ** 2),
    (lambda z: z ** 3, lambda z: 3 * z * z),
    (lambda z: 1.0 / z, lambda z: -1 / z ** 2),
    (lambda z: (2 - 1j) * z, lambda z: 2 - 1j),
], ids=["exp", "sin", "log", "sqrt", "tanh", "cube", "recip", "times-const"])
def test_holomorphic_vjp_is_seed_times_conj_derivative(fn, deriv):
    g = trace_scalar(fn, ["z"], complex_inputs=["z"])
    dz, ct = 0.6 + 0.1j, -0.4 + 1.2j
    [t], [c] = jvp_vjp(g, ["z"], {"z": Z}, [dz], [ct])
    assert t == pytest.approx(deriv(Z) * dz)
    assert c == pytest.approx(ct * deriv(Z).conjugate())


def test_real_part_times_complex():
    # f = Re(z) w: df = Re(dz) w; <ct, df> = Re(conj(ct) w) Re(dz), so z's cotangent is real
    g = trace_scalar(lambda z, w: real(z) * w, ["z", "w"], complex_inputs=["z", "w"])
    _, cts = jvp_vjp(g, ["z", "w"], {"z": Z, "w": W}, [0.0, 0.0], [1.0])
    assert cts == pytest.approx([W.real, Z.real])


def test_imag_part_times_i():
    # f = i Im(z): <1, df> = Re(i Im(dz)) = 0, so the cotangent of z is 0
    g = trace_scalar(lambda z: imag(z) * 1j, ["z"], complex_inputs=["z"])
    _, [c] = jvp_vjp(g, ["z"], {"z": Z}, [0.0], [1.0])
    assert c == pytest.approx(0.0)


def test_real_input_times_complex():
    # f = x z with x real: TO_COMPLEX promotes x, and its transpose keeps x's cotangent
    # real: Re(ct conj z)
    g = trace_scalar(lambda x, z: x * z, ["x", "z"], complex_inputs=["z"])
    ct = 1.0 - 0.5j
    _, [cx, cz] = jvp_vjp(g, ["x", "z"], {"x": 2.0, "z": Z}, [0.0, 0.0], [ct])
    assert isinstance(cx, float)
    assert cx == pytest.approx((ct * Z.conjugate()).real)
    assert cz == pytest.approx(ct * 2.0)


def test_undeclared_complex_input_is_not_a_silent_wrong_gradient():
    from tidu import TiduError

    # z is traced as real; feeding it a complex value is caught where the primal runs
    g = trace_scalar(lambda z: (2 - 1j) * z, ["z"])
    with pytest.raises(TiduError, match="TO_COMPLEX got the complex value"):
        evaluate(g, g.output_keys, {Input("z"): Z})


def test_scale_by_complex_constant():
    # Scale(c) transposes to Scale(conj(c))
    b = GraphBuilder()
    z = b.add_input("z")
    [y] = b.add_operation(Scale(1 + 2j), [Local(z)])
    b.set_outputs([y])
    g = b.build()
    [t], [c] = jvp_vjp(g, ["z"], {"z": Z}, [1j], [1.0])
    assert t == pytest.approx((1 + 2j) * 1j)
    assert c == pytest.approx(1 - 2j)


def test_quotient():
    # z / w: VJP (ct conj(1/w), ct conj(-z/w^2))
    g = trace_scalar(lambda z, w: z / w, ["z", "w"], complex_inputs=["z", "w"])
    ct = 0.5 + 0.5j
    [t], cts = jvp_vjp(g, ["z", "w"], {"z": Z, "w": W}, [1.0, 1j], [ct])
    assert t == pytest.approx(1 / W - Z / W**2 * 1j)
    assert cts == pytest.approx([ct * (1 / W).conjugate(), ct * (-Z / W**2).conjugate()])


NONHOLOMORPHIC = [
    pytest.param(lambda z, w: z * conj(w) + exp(conj(z)), id="mixed"),
    pytest.param(lambda z, w: sin(z * conj(z)) / (w + 3.0), id="sin-abs2"),
    pytest.param(lambda z, w: (real(z) * w, imag(w * w) + z), id="re-im"),
]


@pytest.mark.parametrize("fn", NONHOLOMORPHIC)
def test_jvp_matches_finite_differences_and_dot_product(fn):
    g = trace_scalar(fn, ["z", "w"], complex_inputs=["z", "w"])
    rng = random.Random(4)
    tangents = [complex(rng.uniform(-1, 1), rng.uniform(-1, 1)) for _ in range(2)]
    seeds = [complex(rng.uniform(-1, 1), rng.uniform(-1, 1)) for _ in g.outputs]
    ts, cts = jvp_vjp(g, ["z", "w"], {"z": Z, "w": W}, tangents, seeds)

    eps = 1e-6

    def at(scale):
        vals = {Input("z"): Z + scale * tangents[0], Input("w"): W + scale * tangents[1]}
        return evaluate(g, g.output_keys, vals)

    fd = [(p - m) / (2 * eps) for p, m in zip(at(eps), at(-eps))]
    assert [0.0 if t is None else t for t in ts] == pytest.approx(fd, rel=1e-6, abs=1e-8)
    # real outputs get real seeds: Re(conj(ct) t) must use ct's real part there
    seeds = [s.real if isinstance(t, float) else s for s, t in zip(seeds, ts)]
    _, cts = jvp_vjp(g, ["z", "w"], {"z": Z, "w": W}, tangents, seeds)
    lhs = sum(inner(s, t) for s, t in zip(seeds, ts))
    rhs = sum(inner(c, t) for c, t in zip(cts, tangents))
    assert lhs == pytest.approx(rhs, rel=1e-10)


def test_hessian_of_abs_squared():
    # forward over reverse on |z|^2: the gradient 2z differentiates to 2v
    g = trace_scalar(lambda z: real(z * conj(z)), ["z"], complex_inputs=["z"])
    lin = linearize(g, g.output_keys, ["z"])
    tr = linear_transpose(lin)
    lin2 = linearize([g, lin.graph, tr.graph], tr.tangent_output_keys, ["z"])
    v = 0.3 - 0.9j
    [hv] = evaluate([g, lin.graph, tr.graph, lin2.graph], lin2.tangent_output_keys,
                    {Input("z"): Z, tr.tangent_input_keys[0]: 1.0,
                     lin2.tangent_input_keys[0]: v})
    assert hv == pytest.approx(2 * v)


def test_second_derivative_of_holomorphic_function():
    # forward over forward of exp(z^2): f'' = (2 + 4 z^2) exp(z^2)
    g = trace_scalar(lambda z: exp(z * z), ["z"], complex_inputs=["z"])
    lin = linearize(g, g.output_keys, ["z"])
    lin2 = linearize([g, lin.graph], lin.tangent_output_keys, ["z"])
    [d2] = evaluate([g, lin.graph, lin2.graph], lin2.tangent_output_keys,
                    {Input("z"): Z, lin.tangent_input_keys[0]: 1.0,
                     lin2.tangent_input_keys[0]: 1.0})
    assert d2 == pytest.approx((2 + 4 * Z * Z) * cmath.exp(Z * Z))
