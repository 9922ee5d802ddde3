"""A hostile round on round 59's new code (eval_shape, checkpoint's static arguments,
custom_jvp.defjvps, jit.clear_cache, lax.select_n / associative_scan, tree_util's
Partial / register_static / tree_transpose): each test failed before its fix."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor.errors import (TensorNotSupportedError, TensorOverflowError,
                                      TensorTypeError)
from primitives.tensor.transforms.functional import FunctionalError
from tidu import TiduError


# ---- custom_jvp.defjvps: an integer argument has no tangent ----------------------------


def _power(lib, numpy):
    @lib.custom_jvp
    def power(x, n):
        return x ** n
    power.defjvps(lambda tx, out, x, n: n * x ** (n - 1) * tx,
                  lambda tn, out, x, n: numpy.log(x) * out * tn)
    return power


def test_defjvps_skips_the_rule_of_an_integer_argument(jx):
    """The rule of an integer argument is not called (its tangent is zero): before, it ran
    on an integer tangent and raised that the JVP rule was not linear. JAX's rule for n
    gets a float0 tangent and raises; without it, JAX gives these derivatives."""
    jax, jnp = jx
    power = _power(tnp, tnp)

    @jax.custom_jvp
    def power_jax(x, n):
        return x ** n
    power_jax.defjvps(lambda tx, out, x, n: n * x ** (n - 1) * tx, None)

    x = np.array([0.5, 1.5])
    np.testing.assert_allclose(tnp.jacfwd(power)(x, 3), jax.jacfwd(power_jax)(x, 3))
    np.testing.assert_allclose(tnp.jacrev(power)(x, 3), jax.jacrev(power_jax)(x, 3))
    np.testing.assert_allclose(tnp.grad(power)(np.array(0.5), 3), 0.75)
    np.testing.assert_allclose(tnp.hessian(power)(np.array(0.5), 3), 3.0)
    np.testing.assert_allclose(
        tnp.vmap(tnp.grad(power), in_axes=(None, 0))(np.array(0.5), np.array([2, 3])),
        jax.vmap(jax.grad(power_jax), in_axes=(None, 0))(0.5, jnp.array([2, 3])))
    # a float n still gets its rule: d/dn x**n = log(x) x**n
    np.testing.assert_allclose(tnp.grad(power, argnums=1)(np.array(0.5), np.array(3.0)),
                               np.log(0.5) * 0.5 ** 3)


# ---- lax.associative_scan: fn may not change a leaf's dtype -----------------------------


def test_associative_scan_refuses_fn_changing_the_dtype(jx):
    """Before, an fn turning integers into floats went through, the first element (never
    combined) and the rest then promoted together; JAX refuses it too."""
    jax, jnp = jx
    half_sum = lambda a, b: (a + b) * 0.5          # noqa: E731
    with pytest.raises(TypeError):
        jax.lax.associative_scan(half_sum, jnp.arange(5))
    with pytest.raises(TensorTypeError, match="associative_scan.*dtype float64, not int64"):
        tnp.lax.associative_scan(half_sum, np.arange(5))
    with pytest.raises(TensorTypeError, match="associative_scan.*leaf 1"):
        tnp.lax.associative_scan(lambda a, b: (a[0] + b[0], a[1] * b[1] + b[0]),
                                 (np.arange(5), np.linspace(0, 1, 5).astype(np.float32)))
    # a dtype kept (a Python number promotes as a number) is the scan as JAX's, bit for bit
    x = np.random.default_rng(0).standard_normal((9, 2)).astype(np.float32)
    combine = lambda a, b: a * 0.5 + b * 2.0 - a * b          # noqa: E731
    out = tnp.lax.associative_scan(combine, x, reverse=True)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, jax.lax.associative_scan(combine, x, reverse=True))


# ---- eval_shape: memory and dtypes -------------------------------------------------------


def test_eval_shape_out_of_memory_is_a_tidu_error():
    """tidu runs f on zeros: NumPy refusing the memory, or the size, is a TiduError naming
    eval_shape (and still a MemoryError); before, NumPy's own errors escaped."""
    def bigger(x):
        raise MemoryError("Unable to allocate 74.5 GiB")
    with pytest.raises(TensorNotSupportedError, match="eval_shape of .*bigger.*74.5 GiB") \
            as caught:
        tnp.eval_shape(bigger, np.ones(2))
    assert isinstance(caught.value, MemoryError) and isinstance(caught.value, TiduError)
    too_big = tnp.ShapeDtypeStruct((2 ** 31, 2 ** 31), np.float64)   # > 2**63 bytes
    with pytest.raises(TensorNotSupportedError, match="eval_shape of .*more bytes than"):
        tnp.eval_shape(lambda a: a, too_big)
    # tidu is usable afterwards
    assert tnp.grad(lambda x: tnp.sum(x * x))(np.ones(2)).tolist() == [2.0, 2.0]


def _refuses_huge_allocations() -> bool:
    """Whether the kernel refuses an 8 TiB allocation up front (Linux's overcommit modes 0
    and 2; mode 1 would hand it out and fail later)."""
    try:
        return Path("/proc/sys/vm/overcommit_memory").read_text().strip() in ("0", "2")
    except OSError:
        return False


@pytest.mark.skipif(not _refuses_huge_allocations(),
                    reason="needs a kernel refusing an 8 TiB allocation up front")
def test_eval_shape_of_an_absurd_product_refuses_clearly():
    """A (2**20, 2**20) product asks NumPy for 8 TiB: refused as a TiduError, at once."""
    s = tnp.ShapeDtypeStruct((2 ** 20, 2 ** 20), np.float64)
    with pytest.raises(MemoryError, match="eval_shape of .*TiB"):
        tnp.eval_shape(lambda a, b: a @ b, s, s)


def test_eval_shape_refuses_a_shape_dtype_struct_of_objects(jx):
    """An array of objects or strings is refused as an argument; before, a
    ShapeDtypeStruct of one was taken and traced."""
    for dtype in (object, "U3"):
        with pytest.raises(FunctionalError, match="eval_shape of .*ShapeDtypeStruct of dtype"):
            tnp.eval_shape(lambda a: a, tnp.ShapeDtypeStruct((2,), dtype))
        with pytest.raises(FunctionalError, match="eval_shape of .*array of dtype"):
            tnp.eval_shape(lambda a: a, np.zeros(2, dtype))


# ---- a Python integer no int64 holds: jit and eval_shape ---------------------------------


def test_python_integer_out_of_int64_is_refused_clearly(jx):
    """Before, 2**70 became an object array and jit failed with a KeyError deep in the
    promotion code; eval_shape of 2**63 said int64 (JAX refuses both: OverflowError)."""
    jax, _ = jx
    with pytest.raises(OverflowError):
        jax.eval_shape(lambda x: x + 1, 2 ** 63)
    for value in (2 ** 70, -2 ** 70):
        with pytest.raises(TensorOverflowError, match="jit of .*Python integer"):
            tnp.jit(lambda x: x + 1)(value)
        with pytest.raises(TensorOverflowError, match="jit of .*Python integer"):
            tnp.jit(lambda x: x * 1.5)(value)
    for value in (2 ** 63, 2 ** 70, -2 ** 63 - 1):
        with pytest.raises(TensorOverflowError, match="eval_shape of .*Python integer"):
            tnp.eval_shape(lambda x: x + 1, value)
    # in range: as before
    assert tnp.eval_shape(lambda x: x + 1, 2 ** 63 - 1) == \
        tnp.ShapeDtypeStruct((), np.int64, weak_type=True)
    assert tnp.jit(lambda x: x + 1)(2 ** 62) == 2 ** 62 + 1


def test_associative_scan_takes_a_numpy_integer_axis(jx):
    """An axis computed from a shape (np.int64) was refused; JAX takes it."""
    jax, _ = jx
    x = np.arange(6.0).reshape(2, 3)
    for axis in (np.int64(1), np.int32(-1)):
        np.testing.assert_array_equal(tnp.lax.associative_scan(np.add, x, axis=axis),
                                      jax.lax.associative_scan(np.add, x, axis=int(axis) % 2))
    for axis in (1.0, True, "1"):
        with pytest.raises(TensorTypeError, match="associative_scan: axis must be an int"):
            tnp.lax.associative_scan(np.add, x, axis=axis)


# ---- eval_shape: placeholders the usual linear algebra takes; no floating point noise -----


def test_eval_shape_of_linear_algebra_on_placeholders(jx):
    """Before, eval_shape traced on zeros: inv, solve and cholesky raised LinAlgError
    (singular, not positive definite) for shapes JAX evaluates."""
    jax, jnp = jx
    square = tnp.ShapeDtypeStruct((4, 3, 3), np.float32)
    vectors = tnp.ShapeDtypeStruct((4, 3, 2), np.float32)
    cases = [(tnp.linalg.inv, jnp.linalg.inv, (square,)),
             (tnp.linalg.solve, jnp.linalg.solve, (square, vectors)),
             (tnp.linalg.cholesky, jnp.linalg.cholesky, (square,)),
             (lambda a: tnp.linalg.inv(a @ a.T), lambda a: jnp.linalg.inv(a @ a.T),
              (tnp.ShapeDtypeStruct((3, 3), np.complex128),))]
    for ours, theirs, args in cases:
        got = tnp.eval_shape(ours, *args)
        expected = jax.eval_shape(theirs, *[jax.ShapeDtypeStruct(a.shape, a.dtype)
                                            for a in args])
        assert (got.shape, got.dtype) == (expected.shape, expected.dtype)


def test_eval_shape_ignores_floating_point_errors_of_its_placeholders():
    """log(0) on a placeholder is no error of the caller's: before, np.errstate(all="raise")
    made eval_shape of log raise FloatingPointError, and warnings were printed."""
    s = tnp.ShapeDtypeStruct((3,), np.float64)
    with np.errstate(all="raise"):
        assert tnp.eval_shape(tnp.log, s) == s
        assert tnp.eval_shape(lambda x: 1 / x + tnp.arccos(x - 2), s) == s
        with pytest.raises(FloatingPointError):         # the caller's own setting is kept
            np.log(np.zeros(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tnp.eval_shape(lambda x: tnp.log(x) // x, s) == s
