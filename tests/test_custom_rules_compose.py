"""``custom_jvp`` and ``custom_vjp`` under every transform, composed in any order (issue 21).

- ``vmap`` composed with ``grad``, ``jvp``, ``jacfwd``, ``jacrev``, ``hessian``, ``jit``
  and itself, in both orders, checked against JAX's ``custom_jvp``/``custom_vjp``
  written the same way and against central differences; ``in_axes`` with ``None``,
  batch axes other than 0, ``out_axes``, pytree arguments and results, eager tensors.
  Differentiating a batched call does batched work: the opaque function still runs
  once per example, and no more.
- Rules are traced when a derivative is first needed, so a rule may call its own
  function: JAX's ``polygamma`` idiom (to second order), a fixed-point solver whose
  ``bwd`` solves its adjoint with itself (to second order).
- The rule cache is thread-safe: threads making the first call of new functions at once.
- A JVP rule that is not linear in its tangents raises a ``TiduError`` naming the
  function on every path (``jvp``, ``grad``, ``jit(grad)``, ``vmap(grad)``, ...).

The functions here are real-valued: tidu's reverse mode is JAX's for real inputs (for
complex ones it is the conjugate).
"""

from __future__ import annotations

import functools
import sys
import threading
import types

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor.transforms import make_graph
from primitives.tensor import FunctionalError
from tidu import TiduError

RNG = np.random.default_rng(21)
X = RNG.standard_normal((3, 2))            # 3 examples of 2
Y = RNG.standard_normal(2)                 # shared by the examples
T = RNG.standard_normal((3, 2))            # a tangent of X
X3 = RNG.standard_normal((2, 2, 4))        # for vmap of vmap: batch axes 0 and 2
CALLS = {"sin_times": 0}


def numerical_grad(f, x, eps=1e-6):
    """Central differences of scalar ``f`` at every entry of ``x``."""
    x = np.asarray(x, dtype=float)
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        grad[index] = (np.asarray(f(x + step)) - np.asarray(f(x - step))) / (2 * eps)
    return grad


def numerical_jacobian(f, x, eps=1e-6):
    """Central differences of array-valued ``f``: shape ``f(x).shape + x.shape``."""
    x = np.asarray(x, dtype=float)
    out_shape = np.shape(f(x))
    jacobian = np.zeros(out_shape + x.shape)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        jacobian[(Ellipsis,) + index] = (np.asarray(f(x + step)) - np.asarray(f(x - step))) / (
            2 * eps)
    return jacobian


# --- the custom functions, in tidu and (the same code) in JAX ----------------------------


@tnp.custom_jvp
def sin_times(x, y):
    """``sin(x) * y`` by opaque NumPy code, with its JVP rule."""
    CALLS["sin_times"] += 1
    return np.sin(x) * y


@sin_times.defjvp
def _sin_times_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return sin_times(x, y), tnp.cos(x) * y * tx + tnp.sin(x) * ty


@tnp.custom_vjp
def sin_times_vjp(x, y):
    """``sin(x) * y`` by opaque NumPy code, with its VJP rule."""
    return np.sin(x) * y


sin_times_vjp.defvjp(lambda x, y: (sin_times_vjp(x, y), (x, y)),
                     lambda res, ct: (ct * tnp.cos(res[0]) * res[1], ct * tnp.sin(res[0])))


@tnp.custom_jvp
def affine(params, x):
    """A pytree in and out: ``({'w', 'b'}, x) -> (z, sum(z^2))`` with ``z = w sin(x) + b``."""
    z = params["w"] * np.sin(x) + params["b"]
    return z, np.sum(z * z)


@affine.defjvp
def _affine_jvp(primals, tangents):
    (params, x), (dparams, dx) = primals, tangents
    z, _ = affine(params, x)
    dz = dparams["w"] * tnp.sin(x) + params["w"] * tnp.cos(x) * dx + dparams["b"]
    return affine(params, x), (dz, tnp.sum(2.0 * z * dz))


@tnp.custom_vjp
def affine_vjp(params, x):
    z = params["w"] * np.sin(x) + params["b"]
    return z, np.sum(z * z)


def _affine_fwd(params, x):
    z, total = affine_vjp(params, x)
    return (z, total), (params["w"], x, z)


def _affine_bwd(residuals, cts):
    w, x, z = residuals
    ct_z, ct_total = cts
    dz = ct_z + 2.0 * z * ct_total
    return {"w": dz * tnp.sin(x), "b": dz}, dz * w * tnp.cos(x)


affine_vjp.defvjp(_affine_fwd, _affine_bwd)

TIDU = types.SimpleNamespace(
    custom_jvp=sin_times, custom_vjp=sin_times_vjp, affine_jvp=affine, affine_vjp=affine_vjp,
    grad=tnp.grad, vmap=tnp.vmap, jit=tnp.jit, jvp=tnp.jvp, jacfwd=tnp.jacfwd,
    jacrev=tnp.jacrev, hessian=tnp.hessian, sum=tnp.sum, cos=tnp.cos)


@pytest.fixture(scope="module")
def jax_ns():
    """The same functions and transforms in JAX (float64), or a skip where it is missing."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    @jax.custom_jvp
    def sin_times_jax(x, y):
        return jnp.sin(x) * y

    @sin_times_jax.defjvp
    def _(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return sin_times_jax(x, y), jnp.cos(x) * y * tx + jnp.sin(x) * ty

    @jax.custom_vjp
    def sin_times_vjp_jax(x, y):
        return jnp.sin(x) * y

    sin_times_vjp_jax.defvjp(
        lambda x, y: (sin_times_vjp_jax(x, y), (x, y)),
        lambda res, ct: (ct * jnp.cos(res[0]) * res[1], ct * jnp.sin(res[0])))

    @jax.custom_jvp
    def affine_jax(params, x):
        z = params["w"] * jnp.sin(x) + params["b"]
        return z, jnp.sum(z * z)

    @affine_jax.defjvp
    def _(primals, tangents):
        (params, x), (dparams, dx) = primals, tangents
        z, _ = affine_jax(params, x)
        dz = dparams["w"] * jnp.sin(x) + params["w"] * jnp.cos(x) * dx + dparams["b"]
        return affine_jax(params, x), (dz, jnp.sum(2.0 * z * dz))

    @jax.custom_vjp
    def affine_vjp_jax(params, x):
        z = params["w"] * jnp.sin(x) + params["b"]
        return z, jnp.sum(z * z)

    def fwd(params, x):
        z, total = affine_vjp_jax(params, x)
        return (z, total), (params["w"], x, z)

    def bwd(residuals, cts):
        w, x, z = residuals
        dz = cts[0] + 2.0 * z * cts[1]
        return {"w": dz * jnp.sin(x), "b": dz}, dz * w * jnp.cos(x)

    affine_vjp_jax.defvjp(fwd, bwd)
    namespace = types.SimpleNamespace(
        custom_jvp=sin_times_jax, custom_vjp=sin_times_vjp_jax, affine_jvp=affine_jax,
        affine_vjp=affine_vjp_jax, grad=jax.grad, vmap=jax.vmap, jit=jax.jit, jvp=jax.jvp,
        jacfwd=jax.jacfwd, jacrev=jax.jacrev, hessian=jax.hessian, sum=jnp.sum, cos=jnp.cos,
        jax=jax)
    with jax.enable_x64(True):
        yield namespace


def example_loss(M, f):
    """One example's loss through custom function ``f``, written in namespace ``M``."""
    return lambda x, y: M.sum(f(x, y) ** 2 * M.cos(x))


def batch_loss(M, f, in_axes):
    return lambda xs, y: M.sum(M.vmap(example_loss(M, f), in_axes=in_axes)(xs, y))


def numpy_batch_loss(a, b, in_axes):
    """``batch_loss`` in NumPy, for central differences (shared arguments broadcast)."""
    a = a if in_axes[0] is None else np.moveaxis(a, in_axes[0], 0)
    b = b if in_axes[1] is None else np.moveaxis(b, in_axes[1], 0)
    return np.sum((np.sin(a) * b) ** 2 * np.cos(a))


# name -> the composition, written once for both namespaces; f is the custom function
COMPOSITIONS = {
    "vmap(grad)": lambda M, f: M.vmap(M.grad(example_loss(M, f), argnums=(0, 1)),
                                      in_axes=(0, None))(X, Y),
    "grad(vmap)": lambda M, f: M.grad(batch_loss(M, f, (0, None)), argnums=(0, 1))(X, Y),
    "grad(vmap) batch axis 1": lambda M, f: M.grad(batch_loss(M, f, (1, None)),
                                                   argnums=(0, 1))(X.T, Y),
    "grad(vmap) first argument shared": lambda M, f: M.grad(
        batch_loss(M, f, (None, 0)), argnums=(0, 1))(Y, X),
    "jit(vmap(grad))": lambda M, f: M.jit(M.vmap(M.grad(example_loss(M, f), argnums=(0, 1)),
                                                 in_axes=(0, None)))(X, Y),
    "grad(jit(vmap))": lambda M, f: M.grad(M.jit(batch_loss(M, f, (0, None))))(X, Y),
    "vmap(jit(grad))": lambda M, f: M.vmap(M.jit(M.grad(example_loss(M, f))),
                                           in_axes=(0, None))(X, Y),
    "jacrev(vmap) out_axes 1": lambda M, f: M.jacrev(
        M.vmap(f, in_axes=(1, None), out_axes=1), argnums=(0, 1))(X.T, Y),
    "grad(vmap(vmap))": lambda M, f: M.grad(lambda xs, y: M.sum(M.vmap(
        M.vmap(example_loss(M, f), in_axes=(0, None)), in_axes=(2, None))(xs, y)),
        argnums=(0, 1))(X3, Y),
    "vmap(vmap(grad))": lambda M, f: M.vmap(M.vmap(M.grad(example_loss(M, f), argnums=1),
                                                   in_axes=(0, None)), in_axes=(2, None))(X3, Y),
    "grad(grad(vmap))": lambda M, f: M.grad(lambda y: M.sum(M.grad(
        batch_loss(M, f, (0, None)), argnums=1)(X, y)))(Y),
    "grad(vmap(grad))": lambda M, f: M.grad(lambda xs: M.sum(M.vmap(
        M.grad(example_loss(M, f)), in_axes=(0, None))(xs, Y) ** 2))(X),
    "jacrev(jacrev(sum vmap))": lambda M, f: M.jacrev(M.jacrev(batch_loss(M, f, (0, None))))(
        X, Y),
    "vmap(jacrev(jacrev))": lambda M, f: M.vmap(M.jacrev(M.jacrev(example_loss(M, f))),
                                                in_axes=(0, None))(X, Y),
    # forward mode: a custom_vjp function has none, in JAX as in tidu
    "jvp(vmap)": lambda M, f: M.jvp(lambda xs: M.vmap(f, in_axes=(0, None))(xs, Y), (X,),
                                    (T,)),
    "vmap(jvp)": lambda M, f: M.vmap(lambda x, t: M.jvp(lambda x: f(x, Y), (x,), (t,))[1])(
        X, T),
    "jacfwd(vmap)": lambda M, f: M.jacfwd(M.vmap(f, in_axes=(0, None)), argnums=(0, 1))(X, Y),
    "hessian(sum vmap)": lambda M, f: M.hessian(batch_loss(M, f, (0, None)))(X, Y),
    "vmap(hessian)": lambda M, f: M.vmap(M.hessian(example_loss(M, f)), in_axes=(0, None))(
        X, Y),
    "jacfwd(vmap(grad))": lambda M, f: M.jacfwd(lambda xs: M.vmap(
        M.grad(example_loss(M, f)), in_axes=(0, None))(xs, Y))(X),
    "hessian(vmap(vmap))": lambda M, f: M.hessian(lambda xs: M.sum(M.vmap(
        M.vmap(example_loss(M, f), in_axes=(0, None)), in_axes=(2, None))(xs, Y)))(X3),
}
FORWARD_MODE = {"jvp(vmap)", "vmap(jvp)", "jacfwd(vmap)", "hessian(sum vmap)", "vmap(hessian)",
                "jacfwd(vmap(grad))", "hessian(vmap(vmap))"}


def assert_trees_close(got, want, rtol=1e-12, atol=1e-13):
    import jax

    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        assert type(g) is np.ndarray
        np.testing.assert_allclose(g, np.asarray(w), rtol=rtol, atol=atol)


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
@pytest.mark.parametrize("name", list(COMPOSITIONS))
def test_compositions_with_vmap_agree_with_jax(name, kind, jax_ns):
    compose = COMPOSITIONS[name]
    if kind == "custom_vjp" and name in FORWARD_MODE:
        with pytest.raises(FunctionalError, match="forward-mode .* custom_vjp function "
                                                  "sin_times_vjp"):
            compose(TIDU, TIDU.custom_vjp)
        with pytest.raises(TypeError, match="custom_vjp"):
            compose(jax_ns, jax_ns.custom_vjp)
        return
    assert_trees_close(compose(TIDU, getattr(TIDU, kind)), compose(jax_ns, getattr(jax_ns, kind)))


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
@pytest.mark.parametrize("in_axes, xs, y", [((0, None), X, Y), ((1, None), X.T, Y),
                                            ((None, 0), Y, X), ((1, 0), X.T, X)])
def test_gradients_of_batched_calls_against_finite_differences(kind, in_axes, xs, y):
    f = getattr(TIDU, kind)
    g_xs, g_y = tnp.grad(batch_loss(TIDU, f, in_axes), argnums=(0, 1))(xs, y)
    np.testing.assert_allclose(g_xs, numerical_grad(lambda v: numpy_batch_loss(v, y, in_axes),
                                                    xs), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g_y, numerical_grad(lambda v: numpy_batch_loss(xs, v, in_axes),
                                                   y), rtol=1e-6, atol=1e-8)
    per_example = tnp.vmap(tnp.grad(example_loss(TIDU, f), argnums=1), in_axes=in_axes)(xs, y)
    if in_axes[1] is None:      # y shared: its gradient is the sum of the examples'
        np.testing.assert_allclose(np.sum(per_example, axis=0), g_y, rtol=1e-12)


def test_second_derivatives_of_batched_calls_against_finite_differences():
    """The Hessian of a sum over a batch (custom_jvp: forward over reverse) and its second
    reverse derivative (both kinds), against central differences of a gradient that an
    existing path computes without vmap (one example at a time)."""
    def looped_grad(f):
        return lambda xs: np.stack([tnp.grad(example_loss(TIDU, f))(x, Y) for x in xs])

    expected = numerical_jacobian(looped_grad(sin_times), X)
    loss = batch_loss(TIDU, sin_times, (0, None))
    np.testing.assert_allclose(tnp.hessian(loss)(X, Y), expected, rtol=1e-6, atol=1e-8)
    for f in (sin_times, sin_times_vjp):
        second = tnp.jacrev(tnp.grad(batch_loss(TIDU, f, (0, None))))(X, Y)
        np.testing.assert_allclose(second, expected, rtol=1e-6, atol=1e-8)
        per_example = tnp.vmap(tnp.jacrev(tnp.grad(example_loss(TIDU, f))),
                               in_axes=(0, None))(X, Y)
        np.testing.assert_allclose(per_example, [expected[i, :, i] for i in range(3)],
                                   rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("kind", ["affine_jvp", "affine_vjp"])
def test_pytree_arguments_and_results_with_shared_and_batched_leaves(kind, jax_ns):
    """``in_axes`` a prefix of a dict argument (``w`` shared, ``b`` batched along axis 1),
    a tuple result with ``out_axes`` per leaf."""
    params = {"w": RNG.standard_normal(2), "b": RNG.standard_normal((2, 3))}
    xs = RNG.standard_normal((3, 2))

    def run(M):
        f = getattr(M, kind)
        mapped = M.vmap(f, in_axes=({"w": None, "b": 1}, 0), out_axes=(1, 0))

        def loss(p, xs):
            z, total = mapped(p, xs)
            return M.sum(z * M.cos(z)) + M.sum(total)

        per_example = M.vmap(M.grad(lambda p, x: M.sum(f(p, x)[1]), argnums=(0, 1)),
                             in_axes=({"w": None, "b": 1}, 0))(params, xs)
        return mapped(params, xs), M.grad(loss, argnums=(0, 1))(params, xs), per_example

    got, want = run(TIDU), run(jax_ns)
    assert_trees_close(got, want)
    (z, total), (g_params, g_xs), _ = got
    assert z.shape == (2, 3) and total.shape == (3,)

    def numpy_loss(w, b, xs):
        zs = w * np.sin(xs) + b.T
        return np.sum(zs * np.cos(zs)) + np.sum(zs * zs)

    np.testing.assert_allclose(g_params["w"], numerical_grad(
        lambda w: numpy_loss(w, params["b"], xs), params["w"]), rtol=1e-6)
    np.testing.assert_allclose(g_params["b"], numerical_grad(
        lambda b: numpy_loss(params["w"], b, xs), params["b"]), rtol=1e-6)
    np.testing.assert_allclose(g_xs, numerical_grad(
        lambda v: numpy_loss(params["w"], params["b"], v), xs), rtol=1e-6)


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
def test_eager_tensors_through_a_batched_call(kind):
    f = getattr(TIDU, kind)
    xs = tnp.tensor(X, requires_grad=True)
    loss = batch_loss(TIDU, f, (0, None))
    first = loss(xs, Y).backward(create_graph=True).grad(xs)
    np.testing.assert_allclose(getattr(first, "data", first), tnp.grad(loss)(X, Y), rtol=1e-12)
    second = tnp.sum(first).backward().grad(xs)
    np.testing.assert_allclose(second, np.sum(tnp.jacrev(tnp.grad(loss))(X, Y), axis=(0, 1)),
                               rtol=1e-10)


# --- a rule that calls its own function, batched ----------------------------------------

SOFTPLUS_CALLS = {"n": 0}


@tnp.custom_jvp
def log1pexp(x):
    SOFTPLUS_CALLS["n"] += 1
    return np.logaddexp(0.0, x)


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = log1pexp(x)                          # the rule calls the function: one op with it
    return y, t * (1.0 - tnp.exp(-y))


def test_differentiating_a_batched_call_does_batched_work():
    """The opaque function runs once per example (and once when vmap traces f at one
    example); the derivative is the rule's graph, batched: the function's call in the rule
    is the batched call itself, not a loop of its own."""
    xs = RNG.standard_normal((8, 3))
    loss = tnp.jit(tnp.grad(lambda xs: tnp.sum(tnp.vmap(log1pexp)(xs) ** 2)))
    loss(xs)                                  # traces
    SOFTPLUS_CALLS["n"] = 0
    g = loss(xs + 1.0)
    assert SOFTPLUS_CALLS["n"] == 8
    y, s = np.logaddexp(0.0, xs + 1.0), 1.0 / (1.0 + np.exp(-(xs + 1.0)))
    np.testing.assert_allclose(g, 2 * y * s, rtol=1e-12)
    SOFTPLUS_CALLS["n"] = 0
    tnp.grad(lambda xs: tnp.sum(tnp.vmap(log1pexp)(xs) ** 2))(xs)
    assert SOFTPLUS_CALLS["n"] <= 8 + 1       # + vmap's trace at one example
    ops = [repr(node.operation) for node in make_graph(
        tnp.grad(lambda xs: tnp.sum(tnp.vmap(log1pexp, in_axes=1)(xs))), xs).graph.operations]
    assert "custom_jvp[log1pexp, in_axes=(1,), axis_size=3]" in ops
    assert not any("batch_loop" in op for op in ops)


def test_batched_custom_ops_pass_the_primitive_checks():
    """The batched op itself: JVP against finite differences, the dot-product test of its
    transposed JVP, batching it again, to second order."""
    from tidu.testing import check_primitive

    xs = RNG.standard_normal((4, 3))
    for axis in (0, 1):
        graph = make_graph(tnp.vmap(log1pexp, in_axes=axis), xs).graph
        (op,) = [node.operation for node in graph.operations
                 if type(node.operation).__name__ == "CustomJVPCall"]
        assert "axis_size" in repr(op)
        assert "to order 2" in str(check_primitive(op, xs, order=2, rng=0))


def test_a_rule_that_calls_its_function_under_vmap_to_second_order():
    xs = RNG.standard_normal((4, 3))
    s = 1.0 / (1.0 + np.exp(-xs))
    total = lambda xs: tnp.sum(tnp.vmap(log1pexp)(xs))                        # noqa: E731
    np.testing.assert_allclose(tnp.grad(total)(xs), s, rtol=1e-12)
    hessian = tnp.hessian(total)(xs)
    np.testing.assert_allclose(hessian.reshape(12, 12), np.diag((s * (1 - s)).ravel()),
                               rtol=1e-10, atol=1e-14)
    per_example = tnp.vmap(tnp.hessian(lambda x: tnp.sum(log1pexp(x))))(xs)
    np.testing.assert_allclose(per_example, [np.diag(r) for r in s * (1 - s)], rtol=1e-10,
                               atol=1e-14)
    np.testing.assert_allclose(tnp.vmap(tnp.vmap(tnp.grad(log1pexp)))(xs), s, rtol=1e-12)


# --- rules traced when first differentiated: a rule may call its own function ------------


try:
    from scipy import special
except ImportError:                          # pragma: no cover
    special = None
needs_scipy = pytest.mark.skipif(special is None, reason="needs scipy.special.polygamma")


@functools.partial(tnp.custom_jvp, nondiff_argnums=(1,))
def polygamma(x, n):
    """JAX's idiom: opaque SciPy, whose JVP calls the function itself at ``n + 1``."""
    return special.polygamma(n, x)


@polygamma.defjvp
def _polygamma_jvp(n, primals, tangents):
    (x,), (t,) = primals, tangents
    return polygamma(x, n), polygamma(x, n + 1) * t


@tnp.custom_jvp
def polygamma_same_signature(x, n):
    """The same with ``n`` an array argument: the rule calls the function at its own
    signature (one op, one rule)."""
    return special.polygamma(np.asarray(n).astype(int), x)


@polygamma_same_signature.defjvp
def _polygamma_same_jvp(primals, tangents):
    (x, n), (t, _) = primals, tangents
    return polygamma_same_signature(x, n), polygamma_same_signature(x, n + 1.0) * t


XP = np.array([0.6, 1.3, 2.9])


@needs_scipy
@pytest.mark.parametrize("digamma", [lambda x: polygamma(x, 0),
                                     lambda x: polygamma_same_signature(x, np.zeros(x.shape))],
                         ids=["nondiff n", "array n"])
def test_a_jvp_rule_that_calls_its_own_function_to_second_order(digamma):
    total = lambda x: tnp.sum(digamma(x))                                       # noqa: E731
    numeric = lambda x: np.sum(special.polygamma(0, x))                         # noqa: E731
    first = tnp.grad(total)(XP)
    np.testing.assert_allclose(first, numerical_grad(numeric, XP), rtol=1e-6)
    expected = numerical_jacobian(tnp.grad(total), XP)          # finite differences of grad
    np.testing.assert_allclose(expected, np.diag(special.polygamma(2, XP)), rtol=1e-5,
                               atol=1e-8)
    for second in (tnp.hessian(total)(XP), tnp.jacrev(tnp.grad(total))(XP),
                   tnp.jacfwd(tnp.jacfwd(total))(XP),
                   np.diag(tnp.grad(lambda x: tnp.sum(tnp.grad(total)(x)))(XP)),
                   np.diag(tnp.vmap(tnp.grad(tnp.grad(digamma)))(XP)),
                   tnp.jit(tnp.hessian(total))(XP)):
        np.testing.assert_allclose(second, expected, rtol=1e-5, atol=1e-8)
    third = tnp.jacfwd(tnp.jacfwd(tnp.jacfwd(digamma)))(XP)            # shape (3, 3, 3, 3)
    np.testing.assert_allclose(np.einsum("iiii->i", third), special.polygamma(3, XP),
                               rtol=1e-10)


@needs_scipy
def test_polygamma_idiom_agrees_with_jax(jax_ns):
    jax = jax_ns.jax
    import jax.numpy as jnp
    from jax.scipy.special import polygamma as jax_polygamma

    @functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
    def polygamma_jax(x, n):
        return jax_polygamma(n, x)

    @polygamma_jax.defjvp
    def _(n, primals, tangents):
        (x,), (t,) = primals, tangents
        return polygamma_jax(x, n), polygamma_jax(x, n + 1) * t

    def second(M, f):
        return M.hessian(lambda x: M.sum(f(x, 0)))(XP)

    np.testing.assert_allclose(second(TIDU, polygamma), second(jax_ns, polygamma_jax),
                               rtol=1e-10)
    assert jnp.asarray(XP).dtype == jnp.float64


@functools.partial(tnp.custom_vjp, nondiff_argnums=(0,))
def fixed_point(f, params, x0):
    """The ``x`` with ``x = f(params, x)``, iterated until it stops changing (opaque)."""
    x = np.asarray(x0)
    for _ in range(10000):
        new = np.asarray(f(params, x))
        if np.max(np.abs(new - x)) < 1e-15:
            return new
        x = new
    raise RuntimeError("no convergence")


def _fixed_point_fwd(f, params, x0):
    x = fixed_point(f, params, x0)
    return x, (params, x)


@functools.lru_cache(maxsize=None)
def adjoint_map(f):
    """``u -> ct + (df/dx)^T u`` at ``(params, x)``: its fixed point is the adjoint of
    ``fixed_point`` (autograd's ``fixed_point`` recipe); one function per ``f``."""
    def adjoint(packed, u):
        params, x, ct = packed
        _, vjp_x = tnp.vjp(lambda x: f(params, x), x)
        return ct + vjp_x(u)[0]

    return adjoint


def _fixed_point_bwd(f, residuals, ct):
    """Implicit differentiation; the adjoint is solved by ``fixed_point`` itself."""
    params, x = residuals
    u = fixed_point(adjoint_map(f), (params, x, ct), ct * 0.0)
    _, vjp_params = tnp.vjp(lambda p: f(p, x), params)
    return vjp_params(u)[0], None


fixed_point.defvjp(_fixed_point_fwd, _fixed_point_bwd)


def tanh_layer(params, x):
    w, b = params
    return tnp.tanh(tnp.matmul(w, x) + b)


W_FP = 0.3 * RNG.standard_normal((3, 3))
B_FP = RNG.standard_normal(3)
WEIGHTS = np.array([1.0, -2.0, 0.5])


def fixed_point_loss(w, b):
    return tnp.sum(fixed_point(tanh_layer, (w, b), np.zeros(3)) * WEIGHTS)


def test_a_bwd_that_calls_its_own_function_to_second_order():
    def numeric(w, b):
        return np.sum(fixed_point(tanh_layer, (w, b), np.zeros(3)) * WEIGHTS)

    g_w, g_b = tnp.grad(fixed_point_loss, argnums=(0, 1))(W_FP, B_FP)
    np.testing.assert_allclose(g_b, numerical_grad(lambda b: numeric(W_FP, b), B_FP), rtol=1e-6)
    np.testing.assert_allclose(g_w, numerical_grad(lambda w: numeric(w, B_FP), W_FP), rtol=1e-6,
                               atol=1e-9)
    grad_b = tnp.grad(fixed_point_loss, argnums=1)
    hessian_b = tnp.jacrev(grad_b, argnums=1)(W_FP, B_FP)
    np.testing.assert_allclose(hessian_b, numerical_jacobian(lambda b: grad_b(W_FP, b), B_FP),
                               rtol=1e-5, atol=1e-8)
    bs = RNG.standard_normal((4, 3))
    batched = tnp.grad(lambda bs: tnp.sum(tnp.vmap(lambda b: fixed_point_loss(W_FP, b))(bs)))(bs)
    np.testing.assert_allclose(batched, [grad_b(W_FP, b) for b in bs], rtol=1e-12)


def test_a_rule_that_needs_its_own_derivative_while_traced_raises():
    @tnp.custom_jvp
    def circular(x):
        return np.sin(x)

    @circular.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        slope = tnp.grad(lambda v: tnp.sum(circular(v)))(x)   # its own derivative, same types
        return circular(x), slope * t

    with pytest.raises(FunctionalError, match="JVP rule of custom_jvp function .*circular needs "
                                              "its own derivative"):
        tnp.grad(lambda x: tnp.sum(circular(x)))(XP)


# --- threads ------------------------------------------------------------------------------


def fresh_functions(round_: int):
    @tnp.custom_jvp
    def f(x):
        return np.sin(x) * x

    @f.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), (tnp.cos(x) * x + tnp.sin(x)) * t

    @tnp.custom_vjp
    def g(x):
        return np.exp(x) * x

    g.defvjp(lambda x: (g(x), (x,)), lambda res, ct: (ct * tnp.exp(res[0]) * (1.0 + res[0]),))
    f.__qualname__, g.__qualname__ = f"f{round_}", f"g{round_}"
    return f, g


def test_threads_making_the_first_call_of_new_functions_at_once():
    """8 threads released together by a barrier, switching threads as often as Python
    allows, each differentiate brand new custom functions (and their batched calls)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for round_ in range(4):
            f, g = fresh_functions(round_)
            barrier = threading.Barrier(8, timeout=60)
            errors, results = [], {}

            def work(i, f=f, g=g, barrier=barrier, errors=errors, results=results):
                x = np.linspace(-1.0, 1.0, 5) + 0.1 * i
                try:
                    barrier.wait()
                    results[i] = (tnp.grad(lambda x: tnp.sum(f(x)))(x),
                                  tnp.grad(lambda x: tnp.sum(g(x)))(x),
                                  tnp.grad(lambda x: tnp.sum(tnp.vmap(f)(x[:, None])))(x))
                except Exception as error:                     # noqa: BLE001
                    errors.append(error)

            threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert errors == []
            for i, (g_f, g_g, g_vmap) in results.items():
                x = np.linspace(-1.0, 1.0, 5) + 0.1 * i
                np.testing.assert_allclose(g_f, np.cos(x) * x + np.sin(x), rtol=1e-12)
                np.testing.assert_allclose(g_g, np.exp(x) * (1.0 + x), rtol=1e-12)
                np.testing.assert_allclose(g_vmap, g_f, rtol=1e-12)
            assert len(results) == 8
            # one rule per signature, whichever thread made it: (5,) and vmap's (1,) for f
            assert len(f._rules) == 2 and len(g._rules) == 1
    finally:
        sys.setswitchinterval(old)


# --- a JVP rule that is not linear names the function, on every path -------------------


def nonlinear_function(tangent_out, name):
    def wrapped(x):
        return np.sin(x)

    wrapped.__qualname__ = name
    custom = tnp.custom_jvp(wrapped)
    custom.defjvp(lambda p, t: (tnp.sin(p[0]), tangent_out(p[0], t[0])))
    return custom


NONLINEAR = {
    "t * t": lambda x, t: t * t,
    "t + 1": lambda x, t: t + 1.0,
    "sin(t)": lambda x, t: tnp.sin(t),
    "cos(x) * abs(t)": lambda x, t: tnp.cos(x) * tnp.abs(t),
    "where(t > 0)": lambda x, t: tnp.where(t > 0, t, 0.0),
}
PATHS = {
    "jvp": lambda f: tnp.jvp(f, (XP,), (np.ones(3),)),
    "grad": lambda f: tnp.grad(lambda x: tnp.sum(f(x)))(XP),
    "jit(grad)": lambda f: tnp.jit(tnp.grad(lambda x: tnp.sum(f(x))))(XP),
    "grad(jit)": lambda f: tnp.grad(tnp.jit(lambda x: tnp.sum(f(x))))(XP),
    "vmap(grad)": lambda f: tnp.vmap(tnp.grad(lambda x: tnp.sum(f(x))))(XP[None]),
    "grad(vmap)": lambda f: tnp.grad(lambda x: tnp.sum(tnp.vmap(f)(x)))(XP[None]),
    "jacfwd": lambda f: tnp.jacfwd(f)(XP),
    "backward": lambda f: tnp.sum(f(tnp.tensor(XP, requires_grad=True))).backward(),
}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("rule", list(NONLINEAR))
def test_a_nonlinear_jvp_rule_raises_naming_the_function(rule, path):
    custom = nonlinear_function(NONLINEAR[rule], "Scope.not_linear")
    with pytest.raises(TiduError, match="JVP rule of custom_jvp function Scope.not_linear is "
                                        "not linear") as raised:
        PATHS[path](custom)
    assert isinstance(raised.value, FunctionalError)


def test_a_nonlinear_bwd_rule_raises_naming_the_function():
    def wrapped(x):
        return np.sin(x)

    wrapped.__qualname__ = "Scope.bad_bwd"
    custom = tnp.custom_vjp(wrapped)
    custom.defvjp(lambda x: (custom(x), (x,)), lambda res, ct: (ct * ct * tnp.cos(res[0]),))
    for path in (lambda: tnp.grad(lambda x: tnp.sum(custom(x)))(XP),
                 lambda: tnp.vjp(custom, XP)[1](np.ones(3)),
                 lambda: tnp.grad(lambda x: tnp.sum(tnp.vmap(custom)(x)))(XP[None])):
        with pytest.raises(FunctionalError, match="bwd rule of custom_vjp function "
                                                  "Scope.bad_bwd is not linear in its "
                                                  "cotangents"):
            path()


def test_linear_rules_that_look_alike_still_work():
    """What the linearity check must not refuse: a tangent scaled by primal work, selected
    by a primal predicate, reduced, reshaped, a custom function applied to the tangent in
    forward mode."""
    a = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 0.0, 4.0]])
    rules = [lambda x, t: tnp.cos(x) * t,
             lambda x, t: tnp.where(x > 0, tnp.cos(x) * t, t * tnp.cos(x)),
             lambda x, t: tnp.reshape(tnp.reshape(t * tnp.cos(x), (3, 1)), (3,)),
             lambda x, t: tnp.cos(x) * t + 0.0 * tnp.sum(t),
             lambda x, t: tnp.linalg.solve(a, tnp.matmul(a, t)) * tnp.cos(x),
             lambda x, t: tnp.real(tnp.fft.ifft(tnp.fft.fft(t * tnp.cos(x)))),
             lambda x, t: tnp.take(tnp.cos(x) * t, np.array([2, 0, 1]))[np.array([1, 2, 0])],
             lambda x, t: tnp.cumsum(tnp.cos(x) * t) - tnp.concatenate(
                 [np.zeros(1), tnp.cumsum(tnp.cos(x) * t)[:-1]])]
    for tangent_out in rules:
        custom = nonlinear_function(tangent_out, "fine")
        np.testing.assert_allclose(tnp.grad(lambda x: tnp.sum(custom(x)))(XP), np.cos(XP),
                                   rtol=1e-12)
        np.testing.assert_allclose(tnp.jvp(custom, (XP,), (np.ones(3),))[1], np.cos(XP),
                                   rtol=1e-12)


# --- forward-only rules and other array libraries, batched ---------------------------------


@tnp.custom_jvp
def solve_jvp_style(a, b):
    return np.linalg.solve(a, b)


@solve_jvp_style.defjvp
def _solve_jvp(primals, tangents):
    (a, b), (da, db) = primals, tangents
    x = solve_jvp_style(a, b)
    return x, solve_jvp_style(a, db - tnp.matmul(da, x))   # the opaque solve on a tangent


def test_a_batched_rule_that_applies_its_function_to_tangents():
    """Forward mode works batched; reverse mode would need the opaque solver's transpose and
    raises naming the function, batched or not."""
    a = np.array([[3.0, 1.0], [0.5, 2.0]])
    bs = RNG.standard_normal((4, 2))
    jacobian = tnp.jacfwd(tnp.vmap(solve_jvp_style, in_axes=(None, 0)), argnums=1)(a, bs)
    inverse = np.linalg.inv(a)
    np.testing.assert_allclose(jacobian, np.einsum("ik,jl->ijkl", np.eye(4), inverse),
                               rtol=1e-12, atol=1e-15)
    tangents = tnp.vmap(lambda b, t: tnp.jvp(lambda b: solve_jvp_style(a, b), (b,), (t,))[1])(
        bs, bs)
    np.testing.assert_allclose(tangents, bs @ inverse.T, rtol=1e-12)
    with pytest.raises(FunctionalError, match="custom_jvp function solve_jvp_style applied to "
                                              "a tangent"):
        tnp.grad(lambda bs: tnp.sum(tnp.vmap(solve_jvp_style, in_axes=(None, 0))(a, bs)))(bs)


@pytest.mark.parametrize("library", ["torch", "dask"])
@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
def test_batched_calls_on_other_array_libraries(library, kind):
    """The function runs per example on the library's arrays; results are of that library."""
    module = pytest.importorskip("torch" if library == "torch" else "dask.array")
    from array_api_compat import array_namespace

    def sin_times_any(x, y):
        return array_namespace(x).sin(x) * y

    if kind == "custom_jvp":
        f = tnp.custom_jvp(sin_times_any)
        f.defjvp(lambda p, t: (f(*p), tnp.cos(p[0]) * p[1] * t[0] + tnp.sin(p[0]) * t[1]))
    else:
        f = tnp.custom_vjp(sin_times_any)
        f.defvjp(lambda x, y: (f(x, y), (x, y)),
                 lambda r, ct: (ct * tnp.cos(r[0]) * r[1], ct * tnp.sin(r[0])))
    convert = module.tensor if library == "torch" else \
        functools.partial(module.from_array, chunks=2)
    xs, y = convert(X), convert(Y)
    g_xs, g_y = tnp.grad(batch_loss(TIDU, f, (0, None)), argnums=(0, 1))(xs, y)
    assert type(g_xs) is type(xs) and type(g_y) is type(y)
    if library == "dask":
        g_xs, g_y = g_xs.compute(), g_y.compute()
    expected = tnp.grad(batch_loss(TIDU, sin_times, (0, None)), argnums=(0, 1))(X, Y)
    np.testing.assert_allclose(np.asarray(g_xs), expected[0], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(g_y), expected[1], rtol=1e-12)


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
def test_a_rule_on_a_closed_over_array_under_grad_of_jit(kind):
    c = np.array([2.0, 3.0])
    weights = np.array([1.0, -1.0])
    f = tnp.custom_vjp(lambda x, c: x * c) if kind == "custom_vjp" else \
        tnp.custom_jvp(lambda x, c: x * c)
    if kind == "custom_vjp":              # the residual is the closed-over array itself
        f.defvjp(lambda x, c: (x * c, c), lambda c, g: (g * c, None))
    else:
        f.defjvp(lambda primals, tangents: (primals[0] * primals[1], tangents[0] * primals[1]))

    def loss(v):
        return tnp.sum(f(v, c) * weights)
    want = c * weights
    for transform in (tnp.grad(loss), tnp.jit(tnp.grad(loss)), tnp.grad(tnp.jit(loss)),
                      tnp.jit(tnp.grad(tnp.jit(loss)))):
        np.testing.assert_array_equal(transform(X[0]), want)


# --- second order through a surrogate bwd: fwd's code, whatever lies between -------------
#
# When ``bwd`` is not the derivative of ``fwd`` (a straight-through estimator, a surrogate
# gradient), the second derivative tells whether fwd's outputs were differentiated through
# fwd's code (JAX's rule, and tidu's for grad(grad)) or through the custom rule again. A
# vmap or a jit (its trace cached by an earlier plain call) between the two grads must not
# change which.


@tnp.custom_vjp
def exp_surrogate(a):
    return tnp.exp(a)


exp_surrogate.defvjp(lambda a: (tnp.exp(a), (tnp.exp(a),)),
                     lambda res, ct: (3.0 * ct * res[0],))      # 3x the true derivative


def _surrogate_inner(a):                # e^a (3a + 1): bwd's 3 e^a a, and fwd's e^a
    return tnp.grad(lambda r: tnp.sum(exp_surrogate(r) * r))(a)


def _second_order_compositions(grad, vmap, jit, jacrev, hessian, inner, f_sum):
    cached = jit(inner)
    cached(np.array([0.1, 0.2]))          # its trace made on plain arrays first
    column = lambda a: a[:, None]                                  # noqa: E731
    return {
        "grad(grad)": lambda a: grad(lambda b: (inner(b)).sum())(a),
        "grad(jit(grad)), jit traced on plain arrays first":
            lambda a: grad(lambda b: cached(b).sum())(a),
        "grad(vmap(grad))": lambda a: grad(lambda b: vmap(inner)(b).sum())(column(a)).ravel(),
        "jit(grad(vmap(grad)))":
            lambda a: jit(grad(lambda b: vmap(inner)(b).sum()))(column(a)).ravel(),
        "jacrev(vmap(grad))":
            lambda a: jacrev(lambda b: vmap(inner)(b))(column(a)).reshape(a.size, a.size)
            .diagonal(),
        "vmap(grad(grad))": lambda a: vmap(grad(lambda b: inner(b).sum()))(column(a)).ravel(),
        "grad(vmap(vmap(grad)))":
            lambda a: grad(lambda b: vmap(vmap(inner))(b).sum())(a[:, None, None]).ravel(),
        "hessian": lambda a: hessian(f_sum)(a).diagonal(),
    }


@pytest.mark.parametrize("name", list(_second_order_compositions(
    tnp.grad, tnp.vmap, tnp.jit, tnp.jacrev, tnp.hessian, _surrogate_inner, None)))
def test_second_order_through_a_surrogate_bwd_is_fwds_code_in_every_composition(name):
    a = np.array([0.3, -0.5])
    f_sum = lambda r: tnp.sum(exp_surrogate(r) * r)                # noqa: E731
    got = _second_order_compositions(tnp.grad, tnp.vmap, tnp.jit, tnp.jacrev, tnp.hessian,
                                     _surrogate_inner, f_sum)[name](a)
    # d/da [3 e^a a (bwd's code) + e^a (fwd's code)]; the custom rule again would give 6 + 3a
    np.testing.assert_allclose(got, np.exp(a) * (4.0 + 3.0 * a), rtol=1e-13)


@pytest.mark.parametrize("name", list(_second_order_compositions(
    tnp.grad, tnp.vmap, tnp.jit, tnp.jacrev, tnp.hessian, _surrogate_inner, None)))
def test_second_order_through_a_straight_through_estimator_agrees_with_jax(name):
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    @jax.custom_vjp
    def ste_jax(x):
        return jnp.round(x)
    ste_jax.defvjp(lambda x: (jnp.round(x), None), lambda res, ct: (ct,))

    @tnp.custom_vjp
    def ste(x):
        return tnp.round(x)
    ste.defvjp(lambda x: (tnp.round(x), None), lambda res, ct: (ct,))

    a = np.array([0.3, 1.7, -2.2])
    with jax.enable_x64(True):
        want = _second_order_compositions(
            jax.grad, jax.vmap, jax.jit, jax.jacrev, jax.hessian,
            jax.grad(lambda x: jnp.sum(ste_jax(x) * x)), lambda x: jnp.sum(ste_jax(x) * x)
        )[name](jnp.asarray(a))
    got = _second_order_compositions(
        tnp.grad, tnp.vmap, tnp.jit, tnp.jacrev, tnp.hessian,
        tnp.grad(lambda x: tnp.sum(ste(x) * x)), lambda x: tnp.sum(ste(x) * x))[name](a)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-13)
    np.testing.assert_allclose(got, np.ones(3))     # round's derivative 0 in fwd's code
