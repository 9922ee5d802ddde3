"""Issue 21: dtypes whatever else is imported, errors that name the culprit, and four gaps.

Written as a hostile user would: every error is a ``tidu.TiduError`` naming the thing at
fault, the library keeps working afterwards, and every derivative is checked against
central finite differences, by the dot-product test, and against JAX or PyTorch where
they are installed.

Two groups of tests here need changes outside the files this work owned; they FAIL until
the lead applies the patches given in the issue-21 report:

- ``test_transpose_method_takes_ndarrays_forms`` (the ``ArrayOperators.transpose``
  patch in ``primitives/tensor/api.py``);
- ``test_grad_argnums_names_the_argument_at_fault`` (``_check_differentiable`` in
  ``primitives/tensor/functional.py``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import FunctionalError, TensorShapeError, TensorTypeError
from tidu import (LinearizedGraph, TiduError, linear_transpose, linear_transpose_with_builder,
                  linearize)
from tidu.errors import InvalidArgumentError, UnknownValueError
from tidu.example_ops import trace
from tidu.graph import Input, evaluate
from tidu.rules import GraphPrimitiveBuilder
from tensor_helpers import numeric_grad


def _torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")


def _jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: it is the reference here")
    return jax, pytest.importorskip("jax.numpy")


def dot_product_test(f, x, rng, rtol=1e-10):
    """``<v, J u> == <Jᵀ v, u>`` with tnp's own ``jvp`` and ``vjp`` of ``f`` at ``x``."""
    u = rng.normal(size=np.shape(x))
    out, jvp_out = tnp.jvp(f, (x,), (u,))
    v = rng.normal(size=np.shape(out))
    _, vjp_fn = tnp.vjp(f, x)
    (vjp_out,) = vjp_fn(v)
    left, right = np.sum(v * np.asarray(jvp_out)), np.sum(np.asarray(vjp_out) * u)
    assert left == pytest.approx(right, rel=rtol, abs=1e-12)


# --- A. dtypes: the same behaviour whether or not ml_dtypes is loaded ----------------------


def _float16_entries(torch):
    """Every front end, each returning a result that should be a float16 torch tensor."""
    x = torch.tensor([0.25, -0.5, 1.0], dtype=torch.float16)
    loss = lambda v: tnp.sum(tnp.sin(v) * v)                     # noqa: E731

    def eager():
        t = tnp.tensor(x, requires_grad=True)
        loss(t).backward()
        return t.grad

    def eager_double():
        t = tnp.tensor(x, requires_grad=True)
        g = tnp.sum(t * t * t).backward(create_graph=True).grad(t)
        return tnp.sum(g).backward().grad(t)

    return x, {
        "function": lambda: tnp.sin(x),
        "grad": lambda: tnp.grad(loss)(x),
        "vjp": lambda: tnp.vjp(tnp.sin, x)[1](x)[0],
        "jvp": lambda: tnp.jvp(tnp.sin, (x,), (x,))[1],
        "jit": lambda: tnp.jit(tnp.sin)(x),
        "jit(grad)": lambda: tnp.jit(tnp.grad(loss))(x),
        "vmap": lambda: tnp.vmap(tnp.sin)(x),
        "hvp": lambda: tnp.hvp(loss, (x,), (x,)),
        "eager": eager,
        "eager double backward": eager_double,
    }


def test_torch_float16_keeps_its_dtype_through_every_transform():
    torch = _torch()
    x, entries = _float16_entries(torch)
    # the reference: PyTorch's own autograd, in float32 then rounded to float16
    x32 = x.float().requires_grad_(True)
    (torch.sin(x32) * x32).sum().backward()
    want_grad = x32.grad.half()
    for name, entry in entries.items():
        result = entry()
        result = result.data if isinstance(result, tnp.Tensor) else result
        assert isinstance(result, torch.Tensor), name
        assert result.dtype == torch.float16, f"{name} gave {result.dtype}"
    got = entries["grad"]()
    np.testing.assert_allclose(got.float().numpy(), want_grad.float().numpy(), rtol=5e-3,
                               atol=5e-3)
    np.testing.assert_allclose(entries["eager"]().float().numpy(), want_grad.float().numpy(),
                               rtol=5e-3, atol=5e-3)


_BFLOAT16_SCRIPT = textwrap.dedent("""
    import sys
    if sys.argv[1] == "with":
        import ml_dtypes  # noqa: F401  (what importing jax does)
    import torch
    import primitives.tensor as tnp
    from tidu import TiduError
    x = torch.ones(3, dtype=torch.bfloat16)
    c = torch.ones(3, dtype=torch.float32)
    loss = lambda v: tnp.sum(tnp.sin(v))
    entries = {
        "tensor": lambda: tnp.tensor(x),
        "function": lambda: tnp.sin(x),
        "sum": lambda: tnp.sum(x),
        "grad": lambda: tnp.grad(loss)(x),
        "vjp": lambda: tnp.vjp(tnp.sin, x)[1](x),
        "jvp": lambda: tnp.jvp(tnp.sin, (x,), (x,)),
        "jit": lambda: tnp.jit(tnp.sin)(x),
        "vmap": lambda: tnp.vmap(tnp.sin)(x),
        "constant": lambda: tnp.grad(lambda v: tnp.sum(v * x))(c),
        "eager": lambda: tnp.tensor(x, requires_grad=True),
        "eager constant": lambda: tnp.tensor(c, requires_grad=True) * x,
    }
    for name, entry in entries.items():
        try:
            result = entry()
        except TiduError as error:
            assert isinstance(error, tnp.TensorTypeError), (name, type(error))
            assert "bfloat16" in str(error), (name, str(error))
            print(name, "TensorTypeError")
        else:
            print(name, "RESULT", getattr(result, "dtype", type(result)))
    # the library is usable afterwards
    assert float(tnp.grad(loss)(c.double()).sum()) > 0
    print("ml_dtypes loaded:", "ml_dtypes" in sys.modules)
""")


def _run_bfloat16_script(mode: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _BFLOAT16_SCRIPT, mode], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_torch_bfloat16_is_refused_naming_it_with_and_without_ml_dtypes():
    _torch()
    pytest.importorskip("ml_dtypes", reason="ml_dtypes (JAX's dtypes) is not installed")
    without = _run_bfloat16_script("without")
    with_ = _run_bfloat16_script("with")
    assert without[-1] == "ml_dtypes loaded: False"
    assert with_[-1] == "ml_dtypes loaded: True"
    assert without[:-1] == with_[:-1]                    # the same, whatever is imported
    assert all(line.endswith("TensorTypeError") for line in without[:-1]), without


def test_torch_bfloat16_is_refused_in_this_process_too():
    torch = _torch()
    x = torch.ones(2, dtype=torch.bfloat16)
    for entry in (lambda: tnp.sin(x), lambda: tnp.grad(lambda v: tnp.sum(v))(x),
                  lambda: tnp.jit(tnp.exp)(x), lambda: tnp.tensor(x, requires_grad=True)):
        with pytest.raises(TensorTypeError, match="bfloat16"):
            entry()
    assert isinstance(tnp.tensor(x.float()), tnp.Tensor)


def test_tensor_takes_a_torch_dtype():
    torch = _torch()
    t = tnp.tensor(torch.ones(2, dtype=torch.float64), dtype=torch.float16)
    assert t.data.dtype == torch.float16 and t.dtype == np.float16
    assert tnp.tensor(np.ones(2), dtype=torch.float32).dtype == np.float32
    with pytest.raises(TensorTypeError, match="bfloat16"):
        tnp.tensor(np.ones(2), dtype=torch.bfloat16)


# --- B. errors that name the culprit ---------------------------------------------------------


def test_gradients_grad_of_an_array_says_it_takes_a_tensor():
    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    grads = tnp.sum(x * x).backward()
    for call in (lambda: grads.grad(np.array([1.0, 2.0])), lambda: grads.grad(x.data),
                 lambda: grads.remove(np.ones(2)), lambda: grads.replace(np.ones(2), np.ones(2))):
        with pytest.raises(TensorTypeError, match=r"takes a Tensor.*ndarray"):
            call()
    assert np.ones(2) not in grads
    np.testing.assert_array_equal(grads.grad(x), [2.0, 4.0])       # still usable


def _square_linear():
    graph = trace(lambda x: x * x, ["x"])
    return graph, linearize(graph, graph.output_keys, ["x"])


@pytest.mark.parametrize("field, bad", [("inputs", 999), ("outputs", 999), ("outputs", -1),
                                        ("inputs", -2)])
def test_linear_transpose_names_an_out_of_range_id(field, bad):
    graph, lin = _square_linear()
    broken = (LinearizedGraph(lin.graph, [("x", bad)], lin.tangent_outputs) if field == "inputs"
              else LinearizedGraph(lin.graph, lin.tangent_inputs, [bad]))
    with pytest.raises(UnknownValueError, match=rf"tangent_{field}\[0\] is local id {bad}\b"):
        linear_transpose(broken)
    with pytest.raises(UnknownValueError, match=rf"{bad}"):
        linear_transpose_with_builder(broken, GraphPrimitiveBuilder(), [None])
    with pytest.raises(TiduError, match=rf"{bad}"):
        broken.tangent_output_keys if field == "outputs" else broken.tangent_input_keys
    # the valid graph still transposes: d(x^2) = 2x
    tr = linear_transpose(lin)
    [(seed, _)] = tr.tangent_inputs
    assert evaluate([graph, lin.graph, tr.graph], tr.tangent_output_keys,
                    {Input("x"): 3.0, Input(seed): 1.0}) == [6.0]


def test_linear_transpose_refuses_an_id_that_is_not_an_int():
    _, lin = _square_linear()
    with pytest.raises(InvalidArgumentError, match=r"tangent_outputs\[0\] is '2'"):
        linear_transpose(LinearizedGraph(lin.graph, lin.tangent_inputs, ["2"]))
    with pytest.raises(InvalidArgumentError, match=r"tangent_inputs\[0\]"):
        linear_transpose(LinearizedGraph(lin.graph, [3], lin.tangent_outputs))


@pytest.mark.parametrize("seed", [42, -1, 1])
def test_linear_transpose_with_builder_names_a_seed_the_builder_never_made(seed):
    _, lin = _square_linear()
    builder = GraphPrimitiveBuilder()
    builder.add_parent(lin.graph)
    builder.add_input("only-value")                                # id 0; id 1 never made
    with pytest.raises(UnknownValueError, match=rf"cotangent seed {seed} "):
        linear_transpose_with_builder(lin, builder, [seed])
    with pytest.raises(InvalidArgumentError, match=r"cotangent_seeds\[0\] is True"):
        linear_transpose_with_builder(lin, builder, [True])
    [cotangent] = linear_transpose_with_builder(lin, builder, [0])  # the real seed works
    assert cotangent is not None


def test_trace_scalar_of_a_non_number_names_the_function():
    from primitives.scalar import ScalarTypeError, trace_scalar

    def returns_text(x):
        return "not a number"

    with pytest.raises(ScalarTypeError, match=r"returns_text returned a str"):
        trace_scalar(returns_text, ["x"])
    with pytest.raises(ScalarTypeError, match=r"<lambda> returned a NoneType"):
        trace_scalar(lambda x: None, ["x"])
    with pytest.raises(ScalarTypeError, match=r"returned a ndarray .* at position 1"):
        trace_scalar(lambda x: (x, np.ones(2)), ["x"])
    leaked = []
    trace_scalar(lambda x: leaked.append(x) or x, ["x"])
    with pytest.raises(ScalarTypeError, match=r"another trace_scalar"):
        trace_scalar(lambda y: leaked[0], ["y"])
    with pytest.raises(ScalarTypeError, match=r"another trace_scalar"):
        trace_scalar(lambda y: y + leaked[0], ["y"])
    with pytest.raises(InvalidArgumentError, match=r"input_keys"):
        trace_scalar(lambda x: x, 1)
    graph = trace_scalar(lambda x: (x * x, 2.0), ["x"])             # numbers still work
    assert len(graph.outputs) == 2


def test_scalar_frontend_refuses_a_non_number():
    from primitives.scalar import ScalarTypeError
    from primitives.scalar.eager import Scalar

    for value in ("a", None, [1.0], np.ones(2)):
        with pytest.raises(ScalarTypeError, match=r"a Scalar holds a number"):
            Scalar(value, requires_grad=True)
    with pytest.raises(ScalarTypeError, match=r"bool"):
        Scalar(True, requires_grad=True)
    x = Scalar(2.0, requires_grad=True)
    with pytest.raises(ScalarTypeError, match=r"'a'"):
        x * "a"
    assert (x * x).backward()[x.key] == 4.0                          # still usable


def _torch_and_numpy_tensors(torch):
    return (tnp.tensor(torch.ones(3, dtype=torch.float64), requires_grad=True),
            tnp.tensor(np.ones(3), requires_grad=True))


def test_eager_tensors_of_two_libraries_that_require_grad_are_refused():
    torch = _torch()
    a, b = _torch_and_numpy_tensors(torch)
    for call in (lambda: a + b, lambda: b * a, lambda: tnp.maximum(a, b),
                 lambda: tnp.where(a.data > 0, b, a)):
        with pytest.raises(TensorTypeError, match=r"(torch and numpy|numpy and torch)"):
            call()
    # one library per differentiated input is fine, and a constant of the other converts
    c = a * tnp.tensor(np.full(3, 2.0))
    grads = tnp.sum(c).backward()
    assert isinstance(grads.grad(a), torch.Tensor)
    np.testing.assert_array_equal(grads.grad(a).numpy(), [2.0, 2.0, 2.0])


def test_eager_tensors_of_torch_and_dask_that_require_grad_are_refused():
    torch = _torch()
    da = pytest.importorskip("dask.array", reason="Dask is not installed")
    a = tnp.tensor(torch.ones(3, dtype=torch.float64), requires_grad=True)
    d = tnp.tensor(da.ones(3), requires_grad=True)
    with pytest.raises(TensorTypeError, match=r"torch and dask"):
        a + d
    n = tnp.tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TensorTypeError, match=r"numpy and dask"):
        n + d


def test_grad_argnums_names_the_argument_at_fault():
    """FAILS until the lead applies the functional.py patch (issue-21 report): today the
    message names "argument 0", the position among the differentiated arguments."""
    with pytest.raises(FunctionalError, match=r"argument 1 has dtype int"):
        tnp.grad(lambda a, b: a * b, argnums=1)(1.0, 2)


# --- C. gaps ---------------------------------------------------------------------------------


def test_transpose_method_takes_ndarrays_forms():
    """FAILS until the lead applies the api.py patch to ``ArrayOperators.transpose``
    (issue-21 report): ndarray takes ``x.transpose((1, 0, 2))`` and ``[1, 0, 2]`` too."""
    a = np.arange(24.0).reshape(2, 3, 4)
    weights = np.random.default_rng(0).normal(size=(3, 2, 4))
    forms = [lambda x: x.transpose([1, 0, 2]), lambda x: x.transpose((1, 0, 2)),
             lambda x: x.transpose(1, 0, 2)]
    for form in forms:
        np.testing.assert_array_equal(form(tnp.tensor(a)).data, form(a))
        np.testing.assert_array_equal(tnp.jit(form)(a), form(a))
        np.testing.assert_array_equal(tnp.grad(lambda x: tnp.sum(form(x) * weights))(a),
                                      weights.transpose(1, 0, 2))
    for form in (lambda x: x.transpose(), lambda x: x.transpose(None)):
        np.testing.assert_array_equal(form(tnp.tensor(a)).data, form(a))
        np.testing.assert_array_equal(tnp.jit(form)(a), form(a))


# full / full_like


def test_full_differentiates_in_its_fill_value():
    shape, weights = (2, 3), np.arange(6.0).reshape(2, 3)
    loss = lambda v: tnp.sum(tnp.full(shape, v) * weights ** 2)        # noqa: E731
    np.testing.assert_allclose(tnp.grad(loss)(1.5), np.sum(weights ** 2))
    np.testing.assert_allclose(tnp.jit(tnp.grad(loss))(1.5), np.sum(weights ** 2))
    row = np.array([0.5, -1.0, 2.0])
    row_loss = lambda r: tnp.sum(tnp.sin(tnp.full((4, 3), r)))       # noqa: E731
    np.testing.assert_allclose(tnp.grad(row_loss)(row), 4 * np.cos(row), rtol=1e-12)
    np.testing.assert_allclose(
        tnp.grad(row_loss)(row),
        numeric_grad(lambda r: np.sum(np.sin(np.full((4, 3), r))), row), rtol=1e-7)
    dot_product_test(lambda r: tnp.full((2, 3), r) * weights, row, np.random.default_rng(1))
    # eager
    t = tnp.tensor(1.5, requires_grad=True)
    loss(t).backward()
    np.testing.assert_allclose(t.grad, np.sum(weights ** 2))
    # vmap over fill values
    np.testing.assert_array_equal(tnp.vmap(lambda v: tnp.full((2,), v))(np.array([1.0, 2.0])),
                                  [[1.0, 1.0], [2.0, 2.0]])


def test_full_keeps_numpy_semantics():
    np.testing.assert_array_equal(tnp.full((2, 2), 3), np.full((2, 2), 3))
    assert tnp.full((2, 2), 3).dtype == np.full((2, 2), 3).dtype
    assert tnp.full(3, 1.5, dtype=np.float32).dtype == np.float32
    out = tnp.grad(lambda v: tnp.sum(tnp.full(3, v, dtype=np.float32)))(np.float32(2.0))
    assert out.dtype == np.float32 and out == 3.0
    traced_dtype = []
    tnp.grad(lambda v: (traced_dtype.append(tnp.full((2,), v).dtype), tnp.sum(v))[1])(
        np.float32(2.0))
    assert traced_dtype == [np.float32]                         # NumPy: the fill value's dtype
    with pytest.raises(TensorShapeError, match=r"full: could not broadcast"):
        tnp.grad(lambda v: tnp.sum(tnp.full((2, 3), v)))(np.ones(2))


def test_full_like_differentiates_in_its_fill_value():
    a = np.zeros((2, 3), dtype=np.float32)
    g = tnp.grad(lambda v: tnp.sum(tnp.full_like(a, v) * 2.0))(np.float32(0.5))
    assert g == 12.0
    assert tnp.jit(lambda v: tnp.full_like(a, v))(np.float32(0.5)).dtype == np.float32
    t = tnp.tensor(np.array(0.5), requires_grad=True)
    tnp.sum(tnp.full_like(np.zeros(4), t) ** 2).backward()
    assert t.grad == 4.0


def test_full_against_jax():
    jax, jnp = _jax()
    row = np.array([0.5, -1.0, 2.0])
    with jax.enable_x64(True):
        want = jax.grad(lambda r: jnp.sum(jnp.cos(jnp.full((4, 3), r)) * jnp.arange(12.0)
                                          .reshape(4, 3)))(row)
    got = tnp.grad(lambda r: tnp.sum(tnp.cos(tnp.full((4, 3), r)) *
                                     np.arange(12.0).reshape(4, 3)))(row)
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-12)


def test_full_with_a_torch_fill_value_stays_in_torch():
    torch = _torch()
    fill = torch.tensor([1.0, 2.0], dtype=torch.float64)
    out = tnp.full((3, 2), fill)
    assert isinstance(out, torch.Tensor) and out.shape == (3, 2)
    out[0, 0] = 9.0                                 # a new array: the fill value is untouched
    assert fill[0] == 1.0 and out[1, 0] == 1.0
    g = tnp.grad(lambda v: tnp.sum(tnp.full((3, 2), v) ** 2))(fill)
    assert isinstance(g, torch.Tensor)
    np.testing.assert_allclose(g.numpy(), [6.0, 12.0])


# linspace


_LINSPACE_CASES = [
    dict(start=0.1, stop=2.0, num=7),
    dict(start=-1.0, stop=3.0, num=5, endpoint=False),
    dict(start=2.0, stop=-2.0, num=2),
    dict(start=0.3, stop=0.7, num=1),
    dict(start=0.3, stop=0.7, num=1, endpoint=False),
    dict(start=0.3, stop=0.7, num=0),
    dict(start=0.0, stop=5e-323, num=4),                      # NumPy's denormal branch
    dict(start=np.array([0.0, 1.0]), stop=np.array([1.0, 1.0]), num=6),
    dict(start=np.array([0.0, 1.0]), stop=np.array([[3.0], [5.0]]), num=6, axis=1),
    dict(start=np.array([0.0, 1.0]), stop=np.array([[3.0], [5.0]]), num=4, axis=-1,
         endpoint=False),
    dict(start=np.float32(0.1), stop=np.float32(2.5), num=9),
    dict(start=np.array(0.1, np.float32), stop=2.5, num=9),
    dict(start=0.25, stop=7.9, num=6, dtype=np.int64),
    dict(start=1.0 + 2.0j, stop=-1.0j, num=5),
]


@pytest.mark.parametrize("case", _LINSPACE_CASES, ids=lambda c: repr(sorted(c.items())))
def test_linspace_gives_numpys_values_bit_for_bit(case):
    case = dict(case)
    start, stop = case.pop("start"), case.pop("stop")
    want = np.linspace(start, stop, **case)
    plain = tnp.linspace(start, stop, **case)
    assert plain.dtype == want.dtype and np.array_equal(plain, want, equal_nan=True)
    # a tensor (or a jit argument) holds an array: a Python number in it is no longer weak
    as_start = np.linspace(np.asarray(start), stop, **case)
    as_stop = np.linspace(start, np.asarray(stop), **case)
    for traced, want in ((tnp.jit(lambda a: tnp.linspace(a, stop, **case))(start), as_start),
                         (tnp.linspace(tnp.tensor(start), stop, **case).data, as_start),
                         (tnp.linspace(start, tnp.tensor(stop), **case).data, as_stop)):
        traced = np.asarray(traced)
        assert traced.dtype == want.dtype and traced.shape == want.shape
        assert np.array_equal(traced, want, equal_nan=True)


def _linspace_loss(start, stop, **kwargs):
    weights = np.cos(np.arange(1.0, 40.0))
    samples = tnp.linspace(start, stop, **kwargs)
    flat = tnp.reshape(samples, (-1,))
    return tnp.sum(flat ** 2 * weights[:flat.shape[0]])


def _numpy_linspace_loss(start, stop, **kwargs):
    weights = np.cos(np.arange(1.0, 40.0))
    flat = np.linspace(start, stop, **kwargs).reshape(-1)
    return np.sum(flat ** 2 * weights[:flat.shape[0]])


@pytest.mark.parametrize("kwargs", [dict(num=7), dict(num=5, endpoint=False), dict(num=1),
                                    dict(num=4, axis=-1)], ids=repr)
def test_linspace_differentiates_in_start_and_stop(kwargs):
    start, stop = np.array([0.2, -0.4]), np.array([[1.5], [3.0]])
    g_start, g_stop = tnp.grad(lambda a, b: _linspace_loss(a, b, **kwargs), argnums=(0, 1))(
        start, stop)
    np.testing.assert_allclose(
        g_start, numeric_grad(lambda a: _numpy_linspace_loss(a, stop, **kwargs), start),
        rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(
        g_stop, numeric_grad(lambda b: _numpy_linspace_loss(start, b, **kwargs), stop),
        rtol=1e-6, atol=1e-8)
    rng = np.random.default_rng(3)
    dot_product_test(lambda a: tnp.linspace(a, stop, **kwargs), start, rng)
    dot_product_test(lambda b: tnp.linspace(start, b, **kwargs), stop, rng)
    # eager and jit agree with grad
    a, b = tnp.tensor(start, requires_grad=True), tnp.tensor(stop, requires_grad=True)
    grads = _linspace_loss(a, b, **kwargs).backward()
    np.testing.assert_allclose(grads.grad(a), g_start, rtol=1e-12)
    np.testing.assert_allclose(grads.grad(b), g_stop, rtol=1e-12)
    jitted = tnp.jit(tnp.grad(lambda a, b: _linspace_loss(a, b, **kwargs), argnums=(0, 1)))
    np.testing.assert_allclose(jitted(start, stop)[0], g_start, rtol=1e-12)


def test_linspace_retstep_and_scalar_derivatives():
    # sample i is start + i (stop - start) / 4: d/dstart = 1 - i/4, d/dstop = i/4
    jac = tnp.jacfwd(lambda ab: tnp.linspace(ab[0], ab[1], 5))(np.array([1.0, 2.0]))
    np.testing.assert_allclose(jac, np.stack([1 - np.arange(5) / 4, np.arange(5) / 4], 1))
    samples, step = tnp.linspace(tnp.tensor(1.0, requires_grad=True), 3.0, 5, retstep=True)
    want_samples, want_step = np.linspace(1.0, 3.0, 5, retstep=True)
    assert np.array_equal(samples.data, want_samples) and step.data == want_step
    g = tnp.grad(lambda s: tnp.linspace(s, 3.0, 5, retstep=True)[1])(1.0)
    assert g == -0.25


def test_linspace_against_jax():
    jax, jnp = _jax()
    start, stop = np.array([0.2, -0.4]), np.array([[1.5], [3.0]])
    weights = np.cos(np.arange(24.0)).reshape(2, 2, 6)

    def jax_loss(a, b):
        return jnp.sum(jnp.linspace(a, b, 6, axis=-1) ** 2 * weights)

    with jax.enable_x64(True):
        want = jax.grad(jax_loss, argnums=(0, 1))(start, stop)
    got = tnp.grad(lambda a, b: tnp.sum(tnp.linspace(a, b, 6, axis=-1) ** 2 * weights),
                   argnums=(0, 1))(start, stop)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-12)


def test_linspace_against_torch():
    torch = _torch()
    a = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    b = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    w = torch.cos(torch.arange(8.0, dtype=torch.float64))
    # torch.linspace takes no tensor start/stop with history: write it as JAX does
    (((a + (b - a) * torch.arange(8, dtype=torch.float64) / 7) ** 2) * w).sum().backward()
    got = tnp.grad(lambda s, e: tnp.sum(tnp.linspace(s, e, 8) ** 2 * w.numpy()),
                   argnums=(0, 1))(0.3, 2.0)
    np.testing.assert_allclose([float(g) for g in got], [a.grad.item(), b.grad.item()],
                               rtol=1e-12)


# eigh / eigvalsh with UPLO="U"


def _matrices():
    rng = np.random.default_rng(21)
    real = rng.normal(size=(4, 4))                        # not symmetric: one triangle counts
    batch = rng.normal(size=(2, 3, 3))
    complex_ = rng.normal(size=(3, 3)) + 1j * rng.normal(size=(3, 3))
    single = rng.normal(size=(4, 4)).astype(np.float32)
    return [real, batch, complex_, single]


@pytest.mark.parametrize("uplo", ["U", "u", "L"])
def test_eigh_matches_numpy_exactly_with_either_triangle(uplo):
    for a in _matrices():
        want_w, want_v = np.linalg.eigh(a, UPLO=uplo)
        for w, v in (tnp.linalg.eigh(a, UPLO=uplo),
                     tnp.jit(lambda m: tuple(tnp.linalg.eigh(m, UPLO=uplo)))(a),
                     tuple(r.data for r in tnp.linalg.eigh(tnp.tensor(a), UPLO=uplo))):
            assert np.array_equal(w, want_w) and np.array_equal(v, want_v), (a.shape, a.dtype)
        assert np.array_equal(tnp.linalg.eigvalsh(a, UPLO=uplo), np.linalg.eigvalsh(a, UPLO=uplo))


@pytest.mark.parametrize("uplo", ["U", "L"])
def test_eigh_upper_gradients_are_right(uplo):
    a = _matrices()[0]
    c = np.random.default_rng(5).normal(size=(4, 4))
    # a loss of the eigenvectors themselves (NumPy's signs are locally constant), and of w
    loss = lambda m: tnp.sum(tnp.linalg.eigh(m, UPLO=uplo)[1] * c) + \
        tnp.sum(tnp.linalg.eigh(m, UPLO=uplo)[0] ** 3)                       # noqa: E731
    numpy_loss = lambda m: np.sum(np.linalg.eigh(m, UPLO=uplo)[1] * c) + \
        np.sum(np.linalg.eigh(m, UPLO=uplo)[0] ** 3)                         # noqa: E731
    g = tnp.grad(loss)(a)
    np.testing.assert_allclose(g, numeric_grad(numpy_loss, a), rtol=1e-6, atol=1e-7)
    other = np.tril(g, -1) if uplo == "U" else np.triu(g, 1)
    assert not other.any()                              # only the triangle read has a gradient
    t = tnp.tensor(a, requires_grad=True)
    np.testing.assert_allclose(loss(t).backward().grad(t), g, rtol=1e-12)
    eigvals_loss = lambda m: tnp.sum(tnp.linalg.eigvalsh(m, UPLO=uplo) * np.arange(4.0))  # noqa
    np.testing.assert_allclose(
        tnp.grad(eigvals_loss)(a),
        numeric_grad(lambda m: np.sum(np.linalg.eigvalsh(m, UPLO=uplo) * np.arange(4.0)),
                           a), rtol=1e-6, atol=1e-7)
    dot_product_test(lambda m: tnp.linalg.eigh(m, UPLO=uplo)[1], a, np.random.default_rng(6))


def test_eigh_upper_complex_gauge_invariant_gradient():
    a = _matrices()[2]
    f = np.diag([1.0, -2.0, 0.5])

    def loss(m, lib):
        w, v = lib.linalg.eigh(m, UPLO="U")
        return lib.sum(lib.abs((v * lib.sin(w)[None, :]) @ lib.conj(v.T) @ f) ** 2)

    g = tnp.grad(lambda m: loss(m, tnp))(a)
    numpy_loss = lambda re, im: loss(re + 1j * im, np)                     # noqa: E731
    want = numeric_grad(lambda re: numpy_loss(re, a.imag), a.real) + \
        1j * numeric_grad(lambda im: numpy_loss(a.real, im), a.imag)
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7)
    assert not np.tril(g, -1).any()


def test_eigh_upper_against_torch():
    torch = _torch()
    a = _matrices()[0]
    sym = np.triu(a) + np.triu(a, 1).T                    # the matrix the upper triangle means
    ta = torch.tensor(sym, requires_grad=True)
    w, v = torch.linalg.eigh(ta)
    (w ** 3).sum().backward()                            # eigenvalues: no sign ambiguity
    got = tnp.grad(lambda m: tnp.sum(tnp.linalg.eigh(m, UPLO="U")[0] ** 3))(a)
    # torch's gradient is for the full symmetric matrix; fold it onto the upper triangle
    want = ta.grad.numpy()
    folded = np.triu(want) + np.triu(want.T, 1)
    np.testing.assert_allclose(got, folded, rtol=1e-10, atol=1e-12)
