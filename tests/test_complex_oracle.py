"""Complex derivatives against PyTorch (the oracle) and JAX (through the conversion).

tidu's reverse mode is the adjoint under ``Re<a, b> = Re(sum(conj(a) * b))``,
PyTorch's and ChainRules' convention, so every VJP and gradient must equal
PyTorch's. JAX transposes under the bilinear pairing instead, so
``jax_vjp(ct) == conj(tidu_vjp(conj(ct)))`` and, for a real loss,
``jax.grad == conj(tidu_grad)``. Forward mode agrees with both.

Each front end is checked: the functional ``tnp.vjp``/``tnp.grad``/``tnp.jvp``,
the eager ``Tensor.backward``, and the scalar set (traced graphs through
``linearize``/``linear_transpose``, and the eager ``Scalar``). Points are
random (hypothesis), kept away from the singularities of ``log``, ``/`` and
``abs``; ``abs`` at 0 is checked on its own.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import primitives.scalar as scalar
from primitives import tensor as tnp
from primitives.scalar.eager import Scalar
from tidu import linear_transpose, linearize
from tidu.graph import Input, evaluate

SIZE = 3
EXAMPLES = settings(max_examples=6, deadline=None)

# f(m, *args) is written once against a namespace m: tnp, torch, jax.numpy or the scalar set.
OPS = {
    # holomorphic
    "exp": (1, lambda m, z: m.exp(z)),
    "sin": (1, lambda m, z: m.sin(z)),
    "log": (1, lambda m, z: m.log(z)),
    "mul": (2, lambda m, z, w: z * w),
    "div": (2, lambda m, z, w: z / w),
    # not holomorphic
    "abs": (1, lambda m, z: m.abs(z)),
    "conj": (1, lambda m, z: m.conj(z)),
    "real": (1, lambda m, z: m.real(z)),
    "imag": (1, lambda m, z: m.imag(z)),
    "abs2": (1, lambda m, z: m.real(z * m.conj(z))),
    "sin_times_conj": (2, lambda m, z, w: m.sin(z) * m.conj(w)),
}
REAL_OUTPUT = {"abs", "real", "imag", "abs2"}


def real_loss(m, z, w):
    """A real scalar of complex intermediates, holomorphic and not."""
    u = m.exp(z) * w + m.sin(z / w)
    v = m.log(u * m.conj(u) + 1.0)
    return m.sum(m.real(v) * m.imag(u) + m.abs(u - 3.0 * w) ** 2)


TNP = SimpleNamespace(exp=tnp.exp, sin=tnp.sin, log=tnp.log, abs=tnp.abs, conj=tnp.conj,
                      real=tnp.real, imag=tnp.imag, sum=tnp.sum)


def torch_namespace(torch):
    return SimpleNamespace(exp=torch.exp, sin=torch.sin, log=torch.log, abs=torch.abs,
                           conj=torch.conj_physical, real=torch.real, imag=torch.imag,
                           sum=torch.sum)


def jax_namespace(jnp):
    return SimpleNamespace(exp=jnp.exp, sin=jnp.sin, log=jnp.log, abs=jnp.abs, conj=jnp.conj,
                           real=jnp.real, imag=jnp.imag, sum=jnp.sum)


def scalar_abs(z):
    return scalar.sqrt(scalar.real(z * scalar.conj(z)))


SCALAR = SimpleNamespace(exp=scalar.exp, sin=scalar.sin, log=scalar.log, abs=scalar_abs,
                         conj=scalar.conj, real=scalar.real, imag=scalar.imag)


def need_torch():
    return pytest.importorskip("torch", reason="PyTorch is the oracle for complex gradients")


def need_jax():
    jax = pytest.importorskip("jax", reason="JAX is compared through the conjugation")
    return jax


def complex_number():
    """A complex number with |z| in [0.3, 2.5]: away from the poles of log, / and abs."""
    part = st.floats(-1.5, 1.5, allow_nan=False, allow_infinity=False)
    return st.builds(complex, part, part).filter(lambda c: 0.3 <= abs(c))


def complex_array():
    return st.lists(complex_number(), min_size=SIZE, max_size=SIZE).map(
        lambda xs: np.array(xs, dtype=np.complex128))


def cotangent(draw, name, shape=(SIZE,)):
    """A cotangent for op ``name``'s output: real for real outputs, complex otherwise."""
    values = draw(st.lists(complex_number(), min_size=int(np.prod(shape, dtype=int)),
                           max_size=int(np.prod(shape, dtype=int))))
    ct = np.array(values, dtype=np.complex128).reshape(shape)
    return ct.real.copy() if name in REAL_OUTPUT else ct


def close(got, want, what):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-12,
                               err_msg=what)


def draw_case(data, name):
    arity, f = OPS[name]
    args = [data.draw(complex_array()) for _ in range(arity)]
    return f, args, cotangent(data.draw, name)


# --- the tensor set against PyTorch -------------------------------------------------------


@pytest.mark.parametrize("name", sorted(OPS))
@EXAMPLES
@given(data=st.data())
def test_functional_vjp_matches_torch(name, data):
    torch = need_torch()
    f, args, ct = draw_case(data, name)
    _, vjp_fn = tnp.vjp(lambda *a: f(TNP, *a), *args)
    got = vjp_fn(ct)
    leaves = [torch.tensor(a, requires_grad=True) for a in args]
    out = f(torch_namespace(torch), *leaves)
    want = torch.autograd.grad(out, leaves, grad_outputs=torch.tensor(ct))
    assert len(got) == len(args)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == np.complex128, f"{name}: cotangent {i} of a complex input is {g.dtype}"
        close(g, w.numpy(), f"{name}: vjp input {i}")


@pytest.mark.parametrize("name", sorted(OPS))
@EXAMPLES
@given(data=st.data())
def test_eager_backward_matches_torch(name, data):
    torch = need_torch()
    f, args, ct = draw_case(data, name)
    tensors = [tnp.tensor(a, requires_grad=True) for a in args]
    grads = f(TNP, *tensors).backward(seed=ct)
    leaves = [torch.tensor(a, requires_grad=True) for a in args]
    f(torch_namespace(torch), *leaves).backward(gradient=torch.tensor(ct))
    for i, (t, leaf) in enumerate(zip(tensors, leaves)):
        close(grads.grad(t), leaf.grad.numpy(), f"{name}: eager grad of input {i}")


@pytest.mark.parametrize("name", sorted(OPS))
@EXAMPLES
@given(data=st.data())
def test_functional_jvp_matches_torch(name, data):
    torch = need_torch()
    arity, f = OPS[name]
    args = [data.draw(complex_array()) for _ in range(arity)]
    tangents = [data.draw(complex_array()) for _ in range(arity)]
    _, got = tnp.jvp(lambda *a: f(TNP, *a), args, tangents)
    _, want = torch.func.jvp(lambda *a: f(torch_namespace(torch), *a),
                             tuple(map(torch.tensor, args)), tuple(map(torch.tensor, tangents)))
    close(got, want.numpy(), f"{name}: jvp")


@EXAMPLES
@given(z=complex_array(), w=complex_array())
def test_grad_of_real_loss_matches_torch(z, w):
    torch = need_torch()
    gz, gw = tnp.grad(lambda a, b: real_loss(TNP, a, b), argnums=(0, 1))(z, w)
    tz, tw = (torch.tensor(a, requires_grad=True) for a in (z, w))
    real_loss(torch_namespace(torch), tz, tw).backward()
    close(gz, tz.grad.numpy(), "grad z")
    close(gw, tw.grad.numpy(), "grad w")
    # the eager front end gives the same
    ez, ew = tnp.tensor(z, requires_grad=True), tnp.tensor(w, requires_grad=True)
    grads = real_loss(TNP, ez, ew).backward()
    close(grads.grad(ez), tz.grad.numpy(), "eager grad z")
    close(grads.grad(ew), tw.grad.numpy(), "eager grad w")


def test_abs_squared_gradient_is_two_z_like_torch():
    """The worked example of the docs, with nothing random: grad |z|^2 = 2z, not 2 conj(z)."""
    torch = need_torch()
    z = np.array([0.3 + 0.8j, -1.0 + 0.5j, 2.0 - 1.5j])
    g = tnp.grad(lambda v: tnp.sum(tnp.abs(v) ** 2))(z)
    close(g, 2 * z, "tidu grad")
    t = torch.tensor(z, requires_grad=True)
    torch.sum(torch.abs(t) ** 2).backward()
    close(g, t.grad.numpy(), "torch grad")
    assert not np.allclose(g, 2 * np.conj(z))      # JAX's answer is a different number


def test_abs_at_zero_has_gradient_zero_like_torch():
    """``abs'(0)`` of a complex input is 0 (PyTorch and JAX), not NaN: the stated edge value."""
    torch = need_torch()
    z = np.array([0j, 1.0 + 1.0j])
    t = torch.tensor(z, requires_grad=True)
    torch.sum(torch.abs(t)).backward()
    want = t.grad.numpy()
    assert want[0] == 0
    close(tnp.grad(lambda v: tnp.sum(tnp.abs(v)))(z), want, "functional abs'(0)")
    e = tnp.tensor(z, requires_grad=True)
    close(tnp.sum(tnp.abs(e)).backward().grad(e), want, "eager abs'(0)")


# --- the tensor set against JAX, through the conjugation ----------------------------------


@pytest.mark.parametrize("name", sorted(OPS))
@EXAMPLES
@given(data=st.data())
def test_vjp_is_jax_vjp_conjugated(name, data):
    jax = need_jax()
    f, args, ct = draw_case(data, name)
    _, vjp_fn = tnp.vjp(lambda *a: f(TNP, *a), *args)
    with jax.enable_x64(True):
        _, jax_vjp = jax.vjp(lambda *a: f(jax_namespace(jax.numpy), *a), *args)
        want = jax_vjp(ct)
    got = vjp_fn(np.conj(ct))
    for i, (g, w) in enumerate(zip(got, want)):
        close(np.conj(g), np.asarray(w), f"{name}: jax_vjp(ct) == conj(tidu_vjp(conj(ct))), input {i}")


@pytest.mark.parametrize("name", sorted(OPS))
@EXAMPLES
@given(data=st.data())
def test_jvp_equals_jax_jvp(name, data):
    jax = need_jax()
    arity, f = OPS[name]
    args = [data.draw(complex_array()) for _ in range(arity)]
    tangents = [data.draw(complex_array()) for _ in range(arity)]
    _, got = tnp.jvp(lambda *a: f(TNP, *a), args, tangents)
    with jax.enable_x64(True):
        _, want = jax.jvp(lambda *a: f(jax_namespace(jax.numpy), *a), tuple(args),
                          tuple(tangents))
    close(got, np.asarray(want), f"{name}: jvp")


@EXAMPLES
@given(z=complex_array(), w=complex_array())
def test_grad_is_jax_grad_conjugated(z, w):
    jax = need_jax()
    gz, gw = tnp.grad(lambda a, b: real_loss(TNP, a, b), argnums=(0, 1))(z, w)
    with jax.enable_x64(True):
        jz, jw = jax.grad(lambda a, b: real_loss(jax_namespace(jax.numpy), a, b),
                          argnums=(0, 1))(z, w)
    close(np.conj(gz), np.asarray(jz), "jax_grad == conj(tidu_grad), z")
    close(np.conj(gw), np.asarray(jw), "jax_grad == conj(tidu_grad), w")
    assert not np.allclose(gz, np.asarray(jz))       # they really differ: not a vacuous check


# --- the scalar set against PyTorch -------------------------------------------------------

SCALAR_OPS = sorted(OPS)


def scalar_vjp_by_graphs(f, args, ct):
    """VJP of the scalar set's traced ``f`` through linearize and linear_transpose."""
    keys = [f"z{i}" for i in range(len(args))]
    graph = trace_scalar_of(f, keys)
    linear = linearize(graph, graph.output_keys, keys)
    reverse = linear_transpose(linear)
    values = {Input(k): a for k, a in zip(keys, args)}
    values[reverse.tangent_input_keys[0]] = ct
    return evaluate([graph, linear.graph, reverse.graph], reverse.tangent_output_keys, values)


def trace_scalar_of(f, keys):
    return scalar.trace_scalar(lambda *a: f(SCALAR, *a), keys, complex_inputs=keys)


def torch_scalar_vjp(torch, f, args, ct):
    leaves = [torch.tensor(a, dtype=torch.complex128, requires_grad=True) for a in args]
    out = f(torch_namespace(torch), *leaves)
    seed = torch.tensor(ct, dtype=out.dtype)       # a bare Python complex would be complex64
    return [complex(g) for g in torch.autograd.grad(out, leaves, grad_outputs=seed)]


@pytest.mark.parametrize("name", SCALAR_OPS)
@EXAMPLES
@given(data=st.data())
def test_scalar_set_matches_torch(name, data):
    torch = need_torch()
    arity, f = OPS[name]
    args = [data.draw(complex_number()) for _ in range(arity)]
    ct = data.draw(complex_number())
    ct = ct.real if name in REAL_OUTPUT else ct
    want = torch_scalar_vjp(torch, f, args, ct)

    got = scalar_vjp_by_graphs(f, args, ct)
    for i, (g, w) in enumerate(zip(got, want)):
        assert abs(g - w) <= 1e-9 * (1 + abs(w)), f"{name}: graphs, input {i}: {g} vs {w}"

    leaves = [Scalar(a, requires_grad=True) for a in args]
    grads = f(SCALAR, *leaves).backward(seed=ct)
    for i, (leaf, w) in enumerate(zip(leaves, want)):
        g = grads[leaf.key]
        assert abs(g - w) <= 1e-9 * (1 + abs(w)), f"{name}: eager Scalar, input {i}: {g} vs {w}"


@EXAMPLES
@given(z=complex_number(), w=complex_number())
def test_scalar_real_loss_matches_torch(z, w):
    torch = need_torch()

    def loss(m, a, b):
        u = m.exp(a) * b + m.sin(a / b)
        return m.real(m.log(u * m.conj(u) + 1.0)) * m.imag(u) + m.abs(u - 3.0 * b) ** 2

    tz, tw = (torch.tensor(v, dtype=torch.complex128, requires_grad=True) for v in (z, w))
    loss(torch_namespace(torch), tz, tw).backward()
    want = [complex(tz.grad), complex(tw.grad)]
    leaves = [Scalar(z, requires_grad=True), Scalar(w, requires_grad=True)]
    grads = loss(SCALAR, *leaves).backward()
    got = [grads[leaf.key] for leaf in leaves]
    by_graphs = scalar_vjp_by_graphs(loss, [z, w], 1.0)
    for g, h, x in zip(got, by_graphs, want):
        assert abs(g - x) <= 1e-9 * (1 + abs(x)), (g, x)
        assert abs(h - x) <= 1e-9 * (1 + abs(x)), (h, x)
