"""NumPy's names added for issue 24 (item 5), beyond what the table of cases checks.

The table (``tests/numpy_cases``, run by ``test_numpy_functions.py``) checks each
function's values against NumPy or SciPy and its derivatives on sample inputs. Here:

- the conventions the table cannot state: ``gradient``'s derivative in evenly spaced
  traced coordinates, ``partition`` equal to NumPy's on many arrays (ties, NaNs),
  ``piecewise`` calling its functions on the selected entries only, ``vectorize`` on
  functions that branch on values, ``nan*`` functions never putting a NaN into a
  gradient, ``eig``'s gauge (invariant quantities against finite differences, values
  and dtypes against NumPy's, eigenvalue gradients against JAX);
- every function under ``grad``, ``jit`` (or ``ConcretizationError`` where it reads
  values), ``vmap`` and on the eager ``Tensor``;
- JAX as an oracle where it has the function;
- NumPy's non-differentiable utilities (``allclose``...) as NumPy's own, on tensors and
  traced values;
- misuse raises a ``TiduError`` naming the function.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.signal

import primitives.tensor as tnp
from primitives.tensor import ConcretizationError, TensorNotSupportedError
from primitives.tensor.scipy import signal
from primitives.tensor.numpy.linalg import LinAlgError
from tensor_helpers import numeric_grad
from tidu import TiduError

try:
    import jax
    import jax.numpy as jnp
except ImportError:                      # the oracle of some tests: they skip without it
    jax = jnp = None
requires_jax = pytest.mark.skipif(jax is None, reason="JAX is the oracle here; not installed")

RNG = np.random.default_rng(20240)


def normal(*shape, complex_=False):
    x = RNG.standard_normal(shape)
    return x + 1j * RNG.standard_normal(shape) if complex_ else x


def jax_grad(f, *args):
    with jax.enable_x64(True):
        return np.asarray(jax.grad(f)(*[jnp.asarray(a) for a in args]))


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


# --- gradient ----------------------------------------------------------------------------------


@requires_jax
def test_gradient_matches_numpy_and_jax():
    f = normal(4, 6)
    x = np.cumsum(RNG.uniform(0.2, 1.0, 6))
    for args, kwargs in [((), {}), ((0.3,), {"edge_order": 2}), ((2.0, x), {}),
                         ((x,), {"axis": 1, "edge_order": 2}), ((), {"axis": (1, 0)})]:
        got, want = tnp.gradient(f, *args, **kwargs), np.gradient(f, *args, **kwargs)
        for g, w in zip(got if isinstance(got, tuple) else [got],
                        want if isinstance(want, tuple) else [want]):
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-13)
    assert tnp.gradient(np.arange(4)).dtype == np.float64                 # ints: float64
    assert tnp.gradient(f.astype(np.float32), x, axis=1).dtype == np.float32
    loss = lambda v: (v ** 2).sum()                                              # noqa: E731
    want = jax_grad(lambda v: loss(jnp.gradient(v, 0.5)[1]), f)
    np.testing.assert_allclose(tnp.grad(lambda v: loss(tnp.gradient(v, 0.5)[1]))(f), want,
                               rtol=1e-12)


def test_gradient_differentiates_in_the_coordinates_even_when_evenly_spaced():
    f = normal(6)
    for x in (np.cumsum(RNG.uniform(0.2, 1.0, 6)), np.arange(6.0) * 0.5):   # uneven, even
        for edge_order in (1, 2):
            def loss(c, lib=tnp):
                return lib.sum(lib.gradient(f, c, edge_order=edge_order) ** 2)
            np.testing.assert_allclose(tnp.grad(loss)(x), numeric_grad(lambda c: loss(c, np), x),
                                       rtol=1e-6, atol=1e-6)
    h = 0.7
    g = tnp.grad(lambda s: tnp.sum(tnp.gradient(f, s, edge_order=2) ** 2))(h)
    np.testing.assert_allclose(g, numeric_grad(
        lambda s: np.sum(np.gradient(f, float(s), edge_order=2) ** 2), np.array(h)), rtol=1e-6)


def test_gradient_under_transforms_and_errors():
    f = normal(3, 5)
    want = np.gradient(f, axis=1)
    np.testing.assert_allclose(tnp.jit(lambda v: tnp.gradient(v, axis=1))(f), want)
    np.testing.assert_allclose(tnp.vmap(tnp.gradient)(f), want)
    t = tnp.tensor(f, requires_grad=True)
    grads = tnp.sum(tnp.gradient(t, axis=1) ** 2).backward()
    np.testing.assert_allclose(grads.grad(t),
                               tnp.grad(lambda v: tnp.sum(tnp.gradient(v, axis=1) ** 2))(f))
    with pytest.raises(TiduError, match="gradient: 'edge_order'"):
        tnp.gradient(f, edge_order=3)
    with pytest.raises(TiduError, match="too small"):
        tnp.gradient(np.ones(2), edge_order=2)
    with pytest.raises(TiduError, match="invalid number of arguments"):
        tnp.gradient(f, 1.0, 2.0, 3.0)
    with pytest.raises(TiduError, match="must match the length"):
        tnp.gradient(f, np.arange(3.0), axis=1)


# --- r_ and c_ ---------------------------------------------------------------------------------


def test_index_tricks_on_traced_values():
    a, b = normal(3), normal(2, 3)
    assert tnp.r_[a, 1.0, 0:2] is not None and isinstance(tnp.r_[a, 0:2], np.ndarray)
    f = lambda u, lib=tnp: lib.sum(lib.r_[u, u ** 2, 0.5, 1:3] ** 2)      # noqa: E731
    np.testing.assert_allclose(tnp.grad(f)(a), numeric_grad(lambda u: f(u, np), a), rtol=1e-6)
    np.testing.assert_allclose(tnp.jit(lambda u, v: tnp.c_[v.T, u])(a, b), np.c_[b.T, a])
    np.testing.assert_allclose(tnp.vmap(lambda u: tnp.r_[u, 2.0])(b), np.c_[b, np.full(2, 2.0)])
    t = tnp.tensor(a, requires_grad=True)
    out = tnp.r_["0,2", t, 2 * t]
    assert out.shape == (2, 3)
    np.testing.assert_allclose(tnp.sum(out).backward().grad(t), np.full(3, 3.0))
    # a complex step is linspace: differentiable in its bounds
    g = tnp.grad(lambda s: tnp.sum(tnp.r_[s[0]:s[1]:5j] ** 2))(np.array([0.0, 1.0]))
    np.testing.assert_allclose(g, numeric_grad(
        lambda s: np.sum(np.r_[s[0]:s[1]:5j] ** 2), np.array([0.0, 1.0])), rtol=1e-6)
    with pytest.raises(TensorNotSupportedError, match="numpy.matrix"):
        tnp.r_["r", t, t]
    with pytest.raises(TiduError, match="first entry"):
        tnp.r_[t, "0"]


# --- partition ---------------------------------------------------------------------------------


def test_partition_is_numpys_output_exactly():
    for trial in range(300):
        n = int(RNG.integers(1, 40))
        x = RNG.integers(0, 6, (2, n)).astype(float) if trial % 2 else RNG.standard_normal((2, n))
        if trial % 5 == 0:
            x[0, RNG.integers(0, n)] = np.nan
        kth = list(RNG.integers(0, n, int(RNG.integers(1, 3))))
        assert np.array_equal(tnp.partition(x, kth), np.partition(x, kth), equal_nan=True)
        assert np.array_equal(tnp.argpartition(x, kth), np.argpartition(x, kth))


def test_partition_derivative_follows_the_permutation():
    x = RNG.permutation(30) * 0.1
    weights = normal(30)
    g = tnp.grad(lambda v: tnp.sum(tnp.partition(v, [4, 20]) * weights))(x)
    # distinct values: entry j of the partition is x[source[j]], and gets weights[j]
    source = np.flatnonzero(np.partition(x, [4, 20])[:, None] == x[None, :]) % 30
    want = np.zeros(30)
    want[source] = weights
    np.testing.assert_allclose(g, want)
    xs = RNG.standard_normal((3, 12))
    np.testing.assert_array_equal(tnp.jit(lambda v: tnp.partition(v, 5))(xs), np.partition(xs, 5))
    np.testing.assert_array_equal(tnp.vmap(lambda v: tnp.partition(v, 5))(xs),
                                  np.partition(xs, 5))
    np.testing.assert_array_equal(tnp.vmap(lambda v: tnp.argpartition(v, 2))(xs),
                                  np.argpartition(xs, 2))
    jitted = tnp.jit(lambda v: tnp.argpartition(v, 3, axis=0))
    for _ in range(2):                                      # computed at run time: new data
        ys = RNG.standard_normal((8, 2))
        np.testing.assert_array_equal(jitted(ys), np.argpartition(ys, 3, axis=0))
    t = tnp.tensor(xs, requires_grad=True)
    grads = tnp.sum(tnp.partition(t, [0, -1], axis=1)[:, 0]).backward()
    np.testing.assert_allclose(grads.grad(t), xs == xs.min(axis=1, keepdims=True))
    with pytest.raises(TiduError, match=r"kth\(=12\) out of bounds"):
        tnp.partition(xs, 12)
    with pytest.raises(TiduError, match="Partition index must be integer"):
        tnp.partition(xs, 1.0)
    with pytest.raises(ConcretizationError):
        tnp.jit(lambda v, k: tnp.partition(v, k))(xs, np.array(2))


# --- select, piecewise, real_if_close --------------------------------------------------------


def test_select():
    x = np.linspace(-2, 2, 7)
    cond = [x < -1, x > 1]
    np.testing.assert_array_equal(tnp.select(cond, [x, x ** 2], 0), np.select(cond, [x, x ** 2], 0))
    assert tnp.select([x > 0], [1], 0).dtype == np.select([x > 0], [1], 0).dtype
    f = lambda v: tnp.sum(tnp.select([v < -1, v > 1], [v ** 3, tnp.sin(v)], default=v))  # noqa
    np.testing.assert_allclose(tnp.grad(f)(x), np.select(cond, [3 * x ** 2, np.cos(x)], 1.0))
    np.testing.assert_allclose(tnp.jit(tnp.grad(f))(x), tnp.grad(f)(x))
    rows = normal(2, 3)
    np.testing.assert_allclose(tnp.vmap(lambda r: tnp.select([r > 0], [r], -r))(rows),
                               np.abs(rows))
    t = tnp.tensor(x, requires_grad=True)
    np.testing.assert_allclose(tnp.sum(tnp.select([x > 0], [t ** 2])).backward().grad(t),
                               np.where(x > 0, 2 * x, 0))
    with pytest.raises(TiduError, match="invalid entry 0 in condlist"):
        tnp.select([x], [x])
    with pytest.raises(TiduError, match="same length"):
        tnp.select([x > 0], [x, x])


def test_piecewise_calls_functions_on_the_selected_entries():
    x = np.array([-4.0, -1.0, 0.25, 4.0])
    seen = []

    def root(v):
        seen.append(np.shape(v))
        return tnp.sqrt(v)                          # nan at negative entries, never selected
    f = lambda v: tnp.sum(tnp.piecewise(v, [v < 0, v >= 0], [lambda u: u ** 2, root]))  # noqa
    g = tnp.grad(f)(x)
    np.testing.assert_allclose(g, [-8.0, -2.0, 1.0, 0.25])
    assert seen == [(2,)]
    np.testing.assert_allclose(tnp.piecewise(x, [x < 0], [lambda u: -u, lambda u: u / 2]),
                               np.piecewise(x, [x < 0], [lambda u: -u, lambda u: u / 2]))
    t = tnp.tensor(x, requires_grad=True)
    np.testing.assert_allclose(f(t).backward().grad(t), g)
    # under jit: every function on all of x (JAX's), same values
    h = lambda v: tnp.piecewise(v, [v < 0], [lambda u: u ** 2, lambda u: 3 * u])  # noqa: E731
    np.testing.assert_allclose(tnp.jit(h)(x), np.piecewise(x, [x < 0], [lambda u: u ** 2,
                                                                          lambda u: 3 * u]))
    np.testing.assert_allclose(tnp.vmap(h)(x), tnp.jit(h)(x))
    assert tnp.piecewise(np.arange(4), [np.arange(4) > 1], [lambda u: u * 2.5]).dtype == np.int64
    with pytest.raises(TiduError, match="either 1 or 2 functions"):
        tnp.piecewise(x, [x < 0], [1.0, 2.0, 3.0])


def test_real_if_close():
    z = np.array([1.0 + 1e-15j, 2.0 - 1e-16j])
    assert tnp.real_if_close(z).dtype == np.float64
    assert tnp.real_if_close(z + 1e-3j).dtype == np.complex128
    g = tnp.grad(lambda v: tnp.sum(tnp.real_if_close(v * v)))(z)
    np.testing.assert_allclose(g, 2 * np.conj(z))
    with pytest.raises(ConcretizationError, match="real_if_close"):
        tnp.jit(tnp.real_if_close)(z)


# --- eig ---------------------------------------------------------------------------------------


def general(n, complex_=False, batch=()):
    s = np.eye(n) + 0.3 * normal(*batch, n, n, complex_=complex_)
    w = np.arange(n) - n / 2 + (0.4j * RNG.uniform(-1, 1, batch + (n,)) if complex_ else 0)
    return (s * w[..., None, :]) @ np.linalg.inv(s)


def test_eig_values_and_dtypes_are_numpys():
    for a in (general(4), general(3, True), normal(5, 5), normal(2, 3, 3),
              normal(4, 4).astype(np.float32), np.array([[0.0, -1.0], [1.0, 0.0]])):
        w, v = tnp.linalg.eig(a)
        ref_w, ref_v = np.linalg.eig(a)
        assert w.dtype == ref_w.dtype and v.dtype == ref_v.dtype
        np.testing.assert_array_equal(w, ref_w)
        np.testing.assert_array_equal(v, ref_v)
        np.testing.assert_array_equal(tnp.linalg.eigvals(a), np.linalg.eigvals(a))
    np.testing.assert_array_equal(tnp.linalg.eig(np.eye(2, dtype=int))[0], [1.0, 1.0])


@requires_jax
def test_eig_derivatives():
    for a in (general(4), normal(4, 4), general(3, True)):
        weights = normal(*a.shape[:-1])

        def eigenvalues(m, lib=tnp):               # real and imaginary parts, weighted
            w = lib.linalg.eigvals(m)
            return lib.sum(lib.real(w) * weights + lib.imag(w) ** 2)

        np.testing.assert_allclose(tnp.grad(eigenvalues)(a), numeric_grad(
            lambda m: eigenvalues(m, np), a), rtol=1e-6, atol=1e-6)
        if not np.iscomplexobj(a):                 # JAX differentiates eigvals of real input
            want = jax_grad(lambda m: jnp.sum(jnp.real(jnp.linalg.eigvals(m)) * weights
                                              + jnp.imag(jnp.linalg.eigvals(m)) ** 2), a)
            np.testing.assert_allclose(tnp.grad(eigenvalues)(a), want, rtol=1e-9, atol=1e-9)

        def invariants(m, lib=tnp):                # gauge-invariant: |V|², projector, sin(A)
            w, v = lib.linalg.eig(m)
            p = v[:, :1] @ lib.conj(v[:, :1]).T
            sin = (v * lib.sin(w)) @ lib.linalg.inv(v)
            return (lib.sum(lib.abs(v) ** 2 * weights[:, None]) + lib.sum(lib.abs(p) ** 2)
                    + lib.sum(lib.real(sin) * weights))

        np.testing.assert_allclose(tnp.grad(invariants)(a), numeric_grad(
            lambda m: invariants(m, np), a), rtol=1e-6, atol=1e-6)
    # a real matrix with real eigenvalues: real eigenvectors, differentiated as they are
    a = general(3)
    c = normal(3, 3)
    f = lambda m, lib=tnp: lib.sum(lib.linalg.eig(m)[1] * c)                    # noqa: E731
    np.testing.assert_allclose(tnp.grad(f)(a), numeric_grad(lambda m: f(m, np), a),
                               rtol=1e-6, atol=1e-6)


def test_eig_eigenvectors_stay_normalized_and_solve_the_tangent_equation():
    a, da = general(4, True), normal(4, 4, complex_=True)
    (w, v), (dw, dv) = tnp.jvp(lambda m: tuple(tnp.linalg.eig(m)), (a,), (da,))
    # A V = V diag(w), differentiated
    np.testing.assert_allclose(da @ v + a @ dv, dv * w + v * dw, atol=1e-10)
    np.testing.assert_allclose(np.real(np.sum(np.conj(v) * dv, axis=0)), 0, atol=1e-12)


def test_eig_under_transforms():
    a = general(3, True, batch=(2,))
    np.testing.assert_array_equal(tnp.jit(tnp.linalg.eigvals)(a), np.linalg.eigvals(a))
    w, v = tnp.vmap(lambda m: tuple(tnp.linalg.eig(m)))(a)
    np.testing.assert_allclose(w, np.linalg.eig(a)[0])
    np.testing.assert_allclose(np.abs(v), np.abs(np.linalg.eig(a)[1]))
    per_example = tnp.vmap(tnp.grad(lambda m: tnp.sum(tnp.abs(tnp.linalg.eigvals(m)) ** 2)))(a)
    for i in range(2):
        np.testing.assert_allclose(per_example[i], tnp.grad(
            lambda m: tnp.sum(tnp.abs(tnp.linalg.eigvals(m)) ** 2))(a[i]), rtol=1e-10)
    t = tnp.tensor(general(3), requires_grad=True)
    grads = tnp.sum(tnp.linalg.eigvals(t)).backward()             # d trace = I
    np.testing.assert_allclose(grads.grad(t), np.eye(3), atol=1e-12)
    with pytest.raises(ConcretizationError, match="astype\\(complex\\)"):
        tnp.jit(tnp.linalg.eigvals)(general(3))
    with pytest.raises(LinAlgError, match="square"):
        tnp.linalg.eig(np.ones((2, 3)))


# --- apply_along_axis, vectorize --------------------------------------------------------------


def test_apply_along_axis_under_transforms():
    a = normal(3, 4, 2)
    fn = lambda v: tnp.stack([tnp.sum(v ** 2), tnp.max(v)])                   # noqa: E731
    want = np.apply_along_axis(lambda v: np.stack([np.sum(v ** 2), np.max(v)]), 1, a)
    np.testing.assert_allclose(tnp.apply_along_axis(fn, 1, a), want)
    np.testing.assert_allclose(tnp.jit(lambda x: tnp.apply_along_axis(fn, 1, x))(a), want)
    np.testing.assert_allclose(tnp.vmap(lambda x: tnp.apply_along_axis(fn, 0, x))(a), want)
    loss = lambda x, lib=tnp: lib.sum(lib.apply_along_axis(                    # noqa: E731
        lambda v: lib.sum(lib.sin(v)) * v, 2, x) ** 2)
    np.testing.assert_allclose(tnp.grad(loss)(a), numeric_grad(lambda x: loss(x, np), a),
                               rtol=1e-6, atol=1e-6)
    with pytest.raises(TiduError, match="iteration dimensions are 0"):
        tnp.apply_along_axis(fn, 1, np.ones((0, 3)))


def test_vectorize():
    a, b = normal(2, 1), normal(3)
    f = tnp.vectorize(lambda x, y, scale=1.0: tnp.exp(x) * y * scale)
    np.testing.assert_allclose(f(a, b, scale=2.0), 2 * np.exp(a) * b)
    grads = tnp.grad(lambda x: tnp.sum(f(x, b, scale=np.array([1.0, 2.0, 3.0]))))(a)
    np.testing.assert_allclose(grads, np.exp(a) * np.sum(b * [1.0, 2.0, 3.0]))
    t = tnp.tensor(a, requires_grad=True)
    np.testing.assert_allclose(tnp.sum(f(t, b)).backward().grad(t), np.exp(a) * b.sum())
    np.testing.assert_allclose(tnp.jit(lambda x: f(x, b))(a), np.exp(a) * b)
    np.testing.assert_allclose(tnp.vmap(lambda x: f(x, b))(a), np.exp(a) * b)
    # outputs: tuples, otypes, excluded arguments, the decorator forms
    two = tnp.vectorize(lambda x: (x, x * 2), otypes=[np.float32, np.int64])(np.arange(3.0))
    assert [o.dtype for o in two] == [np.float32, np.int64]
    power = tnp.vectorize(lambda x, n: x ** len(n), excluded={1})
    np.testing.assert_allclose(power(np.arange(3.0), [0, 0]), np.arange(3.0) ** 2)

    @tnp.vectorize(otypes="d")
    def halve(x):
        """Half."""
        return x / 2
    assert halve.__doc__ == "Half." and halve(np.arange(3)).dtype == np.float64
    assert tnp.vectorize(lambda x: x, otypes="f")(np.zeros((0, 2))).shape == (0, 2)
    with pytest.raises(TiduError, match="size 0 inputs"):
        tnp.vectorize(lambda x: x)(np.zeros(0))
    # signature: core dimensions
    rows = tnp.vectorize(lambda v: tnp.stack([tnp.sum(v), tnp.prod(v)]), signature="(n)->(k)")
    x = normal(2, 3, 4)
    np.testing.assert_allclose(rows(x), np.stack([x.sum(-1), x.prod(-1)], -1))
    with pytest.raises(TiduError, match="inconsistent size for core dimension"):
        tnp.vectorize(lambda u, v: u, signature="(n),(n)->()")(np.ones(2), np.ones(3))
    with pytest.raises(TiduError, match="signature"):
        tnp.vectorize(lambda u: u, signature="(n)->(n")


def test_vectorize_of_a_function_that_branches_on_values():
    relu = tnp.vectorize(lambda x: x if x > 0 else 0.0 * x)
    x = np.array([-1.0, 2.0, 0.5])
    np.testing.assert_allclose(relu(x), np.maximum(x, 0))
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(relu(v) ** 2))(x), 2 * np.maximum(x, 0))
    t = tnp.tensor(x, requires_grad=True)
    np.testing.assert_allclose(tnp.sum(relu(t)).backward().grad(t), x > 0)
    with pytest.raises(ConcretizationError):
        tnp.jit(relu)(x)


# --- the nan* functions and where= -----------------------------------------------------------


def with_nans(*shape):
    x = normal(*shape)
    x[RNG.random(shape) < 0.3] = np.nan
    return x


NAN_REDUCTIONS = ["nansum", "nanmean", "nanvar", "nanstd", "nanprod", "nanmax", "nanmin",
                  "nanmedian"]


@pytest.mark.parametrize("name", NAN_REDUCTIONS + ["nancumsum", "nancumprod", "nanquantile"])
def test_nan_functions_values_and_gradients(name):
    x = with_nans(4, 5)
    x[0] = np.nan                                              # an all-NaN row
    x[1:, 0] = RNG.standard_normal(3)                          # the others hold numbers
    call = {"nanquantile": lambda lib, v: lib.nanquantile(v, [0.25, 0.5], axis=-1)}.get(
        name, lambda lib, v: getattr(lib, name)(v, axis=-1))
    want = quiet(call, np, x)
    np.testing.assert_allclose(call(tnp, x), want, rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(tnp.jit(lambda v: call(tnp, v))(x), want, rtol=1e-12,
                               equal_nan=True)
    np.testing.assert_allclose(tnp.vmap(lambda row: call(tnp, row))(x),
                               want.T if name == "nanquantile" else want, rtol=1e-12,
                               equal_nan=True)
    # the gradient: zero at NaNs and in the all-NaN row, right elsewhere, never NaN
    weights = np.nan_to_num(normal(*np.shape(want)) * (want == want))
    loss = lambda v, lib=tnp: lib.sum(lib.nan_to_num(call(lib, v)) * weights)  # noqa: E731
    g = tnp.grad(loss)(x)
    assert np.isfinite(g).all() and (g[np.isnan(x)] == 0).all()
    np.testing.assert_allclose(g, numeric_grad(lambda v: quiet(loss, v, np), x), rtol=1e-6,
                               atol=1e-6)


@requires_jax
def test_nan_functions_against_jax():
    x = with_nans(3, 6)
    x[:, 0] = RNG.standard_normal(3)                           # no all-NaN row
    for name, kwargs in [("nanvar", {"ddof": 1}), ("nanstd", {}), ("nanmean", {}),
                         ("nanmax", {}), ("nanprod", {}), ("nanmedian", {})]:
        want = jax_grad(lambda v: jnp.sum(getattr(jnp, name)(v, axis=1, **kwargs) ** 2), x)
        got = tnp.grad(lambda v: tnp.sum(getattr(tnp, name)(v, axis=1, **kwargs) ** 2))(x)
        np.testing.assert_allclose(got, np.nan_to_num(want), rtol=1e-10, atol=1e-12,
                                   err_msg=name)


def test_nanargmax_all_nan_slices():
    x = np.array([[np.nan, 1.0, 2.0], [np.nan, np.nan, np.nan]])
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        tnp.nanargmax(x, axis=1)
    with pytest.raises(TiduError, match="nanargmin: All-NaN"):
        tnp.nanargmin(tnp.tensor(x), axis=1)
    np.testing.assert_array_equal(tnp.jit(lambda v: tnp.nanargmax(v, axis=1))(x), [2, -1])
    np.testing.assert_array_equal(tnp.nanargmin(x[:1], axis=1), np.nanargmin(x[:1], axis=1))


@requires_jax
@pytest.mark.parametrize("name", ["var", "std", "mean", "sum", "prod"])
def test_where_against_jax(name):
    x, mask = normal(3, 5), RNG.random((3, 5)) > 0.4
    mask[:, :2] = True                          # two entries per row at least (ddof=1)
    kwargs = {"ddof": 1} if name in ("var", "std") else {}
    np.testing.assert_allclose(getattr(tnp, name)(x, axis=1, where=mask, **kwargs),
                               getattr(np, name)(x, axis=1, where=mask, **kwargs), rtol=1e-12)
    want = jax_grad(lambda v: jnp.sum(getattr(jnp, name)(v, axis=1, where=mask, **kwargs) ** 2),
                    x)
    got = tnp.grad(lambda v: tnp.sum(getattr(tnp, name)(v, axis=1, where=mask, **kwargs) ** 2))(x)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    x[~mask] = np.nan                                     # unselected NaNs stay out of the gradient
    got = tnp.grad(lambda v: tnp.sum(getattr(tnp, name)(v, axis=1, where=mask, **kwargs)))(x)
    assert np.isfinite(got).all() and (got[~mask] == 0).all()
    t = tnp.tensor(np.nan_to_num(x), requires_grad=True)
    tnp.sum(getattr(tnp, name)(t, axis=1, where=mask, **kwargs)).backward()


# --- NumPy's own utilities ---------------------------------------------------------------------


def test_utilities_are_numpys_own():
    for name in ("allclose", "array_equal", "array_equiv", "seterr", "geterr",
                 "errstate", "printoptions", "set_printoptions", "get_printoptions",
                 "isscalar"):
        assert getattr(tnp, name) is getattr(np, name), name
    # (these read any library's dtype first: tnp.finfo(torch.float32))
    for name in ("iinfo", "finfo", "result_type", "promote_types", "can_cast", "issubdtype",
                 "isdtype", "eye", "arange"):
        assert getattr(tnp, name).__wrapped__ is getattr(np, name), name
    # (these read PyTorch tensors on the host: NumPy's own would call the tensors' methods)
    for name in ("count_nonzero", "nonzero", "argwhere", "isposinf", "isclose", "array_repr"):
        assert getattr(tnp, name).__wrapped__ is getattr(np, name), name
    assert tnp.ndim(np.ones((2, 3))) == 2
    with tnp.errstate(divide="ignore"):
        assert tnp.geterr()["divide"] == "ignore"
    with tnp.printoptions(precision=2):
        assert tnp.get_printoptions()["precision"] == 2


def test_utilities_read_the_data_of_tensors_and_grads_values():
    x = normal(3)
    t = tnp.tensor(x, requires_grad=True)
    assert tnp.allclose(t, x) and tnp.array_equal(t, x) and tnp.isclose(t, x).all()
    assert tnp.count_nonzero(t) == 3

    def loss(v):
        assert tnp.allclose(v, x) and tnp.array_equiv(v, x)     # data under grad: no derivative
        return tnp.sum(v ** 2)
    np.testing.assert_allclose(tnp.grad(loss)(x), 2 * x)
    with pytest.raises(ConcretizationError):
        tnp.jit(lambda v: tnp.allclose(v, x))(x)


# --- scipy.signal ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["convolve", "correlate"])
def test_signal_values_match_scipy(name):
    ours, theirs = getattr(signal, name), getattr(scipy.signal, name)
    for s1, s2 in [((9,), (4,)), ((4,), (9,)), ((5, 6), (2, 3)), ((2, 3), (4, 5)),
                   ((3, 4, 2), (2, 2, 2)), ((3,), (3,)), ((), ())]:
        for complex_ in (False, True):
            a, b = normal(*s1, complex_=complex_), normal(*s2, complex_=complex_)
            for mode in ("full", "same", "valid"):
                for method in ("auto", "direct", "fft"):
                    want = theirs(a, b, mode, method)
                    got = ours(a, b, mode, method)
                    assert got.shape == want.shape and got.dtype == want.dtype
                    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    ints = ours(np.arange(6), np.array([1, -2, 1]), "same")
    assert ints.dtype == np.int64
    np.testing.assert_array_equal(ints, theirs(np.arange(6), np.array([1, -2, 1]), "same"))
    assert ours(np.ones(4, np.float32), np.ones(2, np.float32)).dtype == np.float32


@requires_jax
@pytest.mark.parametrize("name", ["convolve", "correlate"])
def test_signal_derivatives_and_transforms(name):
    ours, theirs = getattr(signal, name), getattr(scipy.signal, name)
    a, b = normal(4, 5, complex_=True), normal(2, 3, complex_=True)
    c = normal(4, 5)

    def loss(x, k, lib=None):
        out = ours(x, k, "same") if lib is None else theirs(x, k, "same")
        return np.sum(np.real(out * c)) if lib is not None else tnp.sum(tnp.real(out * c))
    ga, gb = tnp.grad(loss, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, numeric_grad(lambda x: loss(x, b, np), a), rtol=1e-6,
                               atol=1e-6)
    np.testing.assert_allclose(gb, numeric_grad(lambda k: loss(a, k, np), b), rtol=1e-6,
                               atol=1e-6)
    x, k = normal(3, 8), normal(3)
    want = np.stack([theirs(r, k, "valid") for r in x])
    np.testing.assert_allclose(tnp.vmap(lambda r: ours(r, k, "valid"))(x), want, rtol=1e-12)
    np.testing.assert_allclose(tnp.jit(lambda r, q: ours(r, q[None], "valid"))(x, k),
                               theirs(x, k[None], "valid"), rtol=1e-12)
    t = tnp.tensor(k, requires_grad=True)
    grads = tnp.sum(ours(x[0], t, "full")).backward()
    np.testing.assert_allclose(grads.grad(t), np.full(3, x[0].sum()), rtol=1e-12)
    if name == "convolve":                                    # JAX as the oracle
        want = jax_grad(lambda q: jnp.sum(jax.scipy.signal.convolve(x, q, "same") ** 2),
                        k[None])
        got = tnp.grad(lambda q: tnp.sum(ours(x, q, "same") ** 2))(k[None])
        np.testing.assert_allclose(got, want, rtol=1e-10)
    with pytest.raises(TiduError, match="same dimensionality"):
        ours(np.ones(3), np.ones((1, 3)))
    with pytest.raises(TiduError, match="at least as large"):
        ours(np.ones((2, 5)), np.ones((3, 2)), "valid")
    with pytest.raises(TiduError, match="mode flags"):
        ours(np.ones(3), np.ones(3), "circular")
