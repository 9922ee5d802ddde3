"""PyTorch tensors through the transforms and the eager ``Tensor``; mixing libraries.

``tests/test_backends_cases.py`` runs every function's case on PyTorch and Dask;
this file checks the contract around them (API.md, "Array backends"). PyTorch is
not in the test extra (its CPU wheel is large): install it to run these,
``pip install ".[torch]"`` (the CPU build: ``pip install torch --index-url
https://download.pytorch.org/whl/cpu``).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import TensorTypeError
from backend_helpers import compositions, least_squares_data as _data, least_squares_loss as loss

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install '.[torch]')")



# --- PyTorch --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torch_transforms_keep_library_dtype_and_device(dtype):
    X, w, y = _data()
    tX, tw, ty = (torch.tensor(a, dtype=dtype) for a in (X, w, y))
    expected_value, expected_grad = tnp.value_and_grad(loss)(w, X, y)
    value, gradient = tnp.value_and_grad(loss)(tw, tX, ty)
    jitted = tnp.jit(tnp.value_and_grad(loss))(tw, tX, ty)[1]
    for result in (value, gradient, jitted):
        assert isinstance(result, torch.Tensor) and result.dtype == dtype
        assert result.device == tw.device
    tol = 1e-12 if dtype == torch.float64 else 1e-4
    np.testing.assert_allclose(value.numpy(), expected_value, rtol=tol)
    np.testing.assert_allclose(gradient.numpy(), expected_grad, rtol=tol, atol=tol)
    np.testing.assert_allclose(jitted.numpy(), expected_grad, rtol=tol, atol=tol)


def test_torch_gradients_agree_with_torch_autograd():
    X, w, y = _data()
    tX, ty = torch.tensor(X), torch.tensor(y)
    tw = torch.tensor(w, requires_grad=True)
    ((tX @ tw - ty) ** 2).mean().backward()
    np.testing.assert_allclose(tnp.grad(loss)(torch.tensor(w), tX, ty).numpy(),
                               tw.grad.numpy(), rtol=1e-12)


def test_torch_jacobians_hessian_and_vmap():
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)
    f = lambda v: tnp.sin(v) * v[::-1]            # noqa: E731
    for transform in (tnp.jacfwd, tnp.jacrev):
        got = transform(f)(x)
        assert isinstance(got, torch.Tensor)
        np.testing.assert_allclose(got.numpy(), transform(f)(x.numpy()), rtol=1e-12)
    h = tnp.hessian(lambda v: tnp.sum(v ** 3))(x)
    assert isinstance(h, torch.Tensor)
    np.testing.assert_allclose(h.numpy(), np.diag(6 * x.numpy()), rtol=1e-12)
    xs = torch.tensor(np.arange(12.0).reshape(4, 3))
    per_row = tnp.vmap(tnp.grad(lambda v: tnp.sum(tnp.sin(v))))(xs)
    assert isinstance(per_row, torch.Tensor)
    np.testing.assert_allclose(per_row.numpy(), np.cos(xs.numpy()), rtol=1e-12)
    out, tangent = tnp.jvp(tnp.exp, (x,), (torch.ones(3, dtype=torch.float64),))
    assert isinstance(tangent, torch.Tensor)
    np.testing.assert_allclose(tangent.numpy(), np.exp(x.numpy()), rtol=1e-12)


def test_torch_eager_tensor_backward_create_graph_and_hvp():
    data = torch.tensor([1.0, 2.0], dtype=torch.float64)
    x = tnp.tensor(data, requires_grad=True)
    assert isinstance(x.data, torch.Tensor) and x.dtype == np.float64 and x.device == data.device
    g = tnp.sum(x * x * x).backward(create_graph=True).grad(x)      # 3 x^2, with history
    second = tnp.sum(g).backward().grad(x)                          # 6 x
    assert isinstance(second, torch.Tensor)
    np.testing.assert_allclose(second.numpy(), [6.0, 12.0])
    y = tnp.tensor(data, requires_grad=True)
    hv = tnp.autograd.hvp(tnp.sum(y ** 3), y, torch.tensor([1.0, 0.0], dtype=torch.float64))
    assert isinstance(hv, torch.Tensor)
    np.testing.assert_allclose(hv.numpy(), [6.0, 0.0])


def test_torch_eager_data_writes_do_not_change_saved_values():
    """A handle from ``t.data`` written after ``t`` was used: backward keeps the values the op
    read (PyTorch arrays cannot be made read-only, so the op saved a copy)."""
    p = tnp.tensor(torch.tensor([1.0, 2.0], dtype=torch.float64), requires_grad=True)
    handle = p.data
    y = tnp.sum(p * p)
    handle -= 1.0                            # PyTorch's in-place update of the parameter
    np.testing.assert_allclose(y.backward().grad(p).numpy(), [2.0, 4.0])
    np.testing.assert_allclose(p.data.numpy(), [0.0, 1.0])


def test_numpy_constants_become_the_inputs_library():
    x = torch.tensor([1.0, 2.0], dtype=torch.float32)
    scale = np.array([3.0, 4.0], dtype=np.float32)
    g = tnp.grad(lambda v: tnp.sum(v * scale))(x)
    assert isinstance(g, torch.Tensor) and g.dtype == torch.float32
    np.testing.assert_allclose(g.numpy(), scale)
    # a gradient that is a constant (f ignores x) is still an array of x's library
    zero = tnp.grad(lambda v, c: tnp.sum(c), argnums=0)(x, torch.ones(2))
    assert isinstance(zero, torch.Tensor) and not zero.any()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_torch_cuda_results_stay_on_the_device():
    x = torch.tensor([0.5, 1.5], device="cuda", dtype=torch.float64)
    g = tnp.grad(lambda v: tnp.sum(tnp.exp(v) * np.array([1.0, 2.0])))(x)
    assert g.device == x.device
    np.testing.assert_allclose(g.cpu().numpy(), np.exp([0.5, 1.5]) * [1.0, 2.0])


# --- mixing libraries -----------------------------------------------------------------------


def test_two_libraries_in_one_op_name_both():
    da = pytest.importorskip("dask.array", reason="Dask is not installed")
    with pytest.raises(TensorTypeError, match=r"torch.*dask|dask.*torch"):
        tnp.add(torch.ones(2, dtype=torch.float64), da.ones(2))
    t = tnp.tensor(torch.ones(2, dtype=torch.float64), requires_grad=True)
    with pytest.raises(TensorTypeError, match=r"torch.*dask|dask.*torch"):
        t * da.ones(2)
    assert tnp.sum(t * t).backward().grad(t) is not None          # still usable afterwards


def test_differentiated_inputs_of_two_libraries_name_both():
    da = pytest.importorskip("dask.array", reason="Dask is not installed")
    f = lambda a, b: tnp.sum(a * b)            # noqa: E731
    with pytest.raises(TensorTypeError, match=r"torch and numpy"):
        tnp.grad(f, argnums=(0, 1))(torch.ones(2, dtype=torch.float64), np.ones(2))
    with pytest.raises(TensorTypeError, match=r"dask and torch"):
        tnp.grad(f, argnums=(0, 1))(da.ones(2), torch.ones(2, dtype=torch.float64))
    with pytest.raises(TensorTypeError, match=r"torch.*dask|dask.*torch"):
        tnp.jit(f)(torch.ones(2, dtype=torch.float64), da.ones(2))
    # a NumPy constant beside differentiated torch inputs is fine (converted)
    g = tnp.grad(f)(torch.ones(2, dtype=torch.float64), np.full(2, 3.0))
    assert isinstance(g, torch.Tensor)




def test_torch_autograd_records_through_tidu_functions():
    """tidu computes with PyTorch's own functions, so a tensor that requires grad in PyTorch's
    sense gets PyTorch's gradient through them, equal to tidu's own."""
    x = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    f = lambda v: tnp.sum(tnp.sin(v) * tnp.flip(v) + tnp.cumsum(v) ** 2)   # noqa: E731
    f(x).backward()
    expected = tnp.grad(f)(x.detach())
    np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=1e-12)


def test_torch_backward_from_threads_on_a_shared_leaf():
    w = tnp.tensor(torch.ones(3, dtype=torch.float64), requires_grad=True)
    errors = []

    def work():
        try:
            for _ in range(25):
                tnp.sum(w * w).backward()
        except Exception as error:         # noqa: BLE001  (reported below)
            errors.append(error)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    np.testing.assert_allclose(w.grad.numpy(), [200.0, 200.0, 200.0])      # 4 x 25 x 2w


@pytest.mark.parametrize("name", list(compositions()))
def test_torch_transforms_compose_in_both_orders(name):
    fn = compositions()[name]
    x = np.array([0.3, -1.2, 2.0])
    got = fn(torch.tensor(x))
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), fn(x), rtol=1e-12)


def test_vjp_fn_keeps_the_primal_a_torch_tensor_had():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    _, vjp_fn = tnp.vjp(lambda v: tnp.sum(v * v), x)
    x[0] = 100.0                                   # PyTorch's in-place write, after vjp
    np.testing.assert_allclose(vjp_fn(np.array(1.0))[0].numpy(), [2.0, 4.0])


def test_a_torch_tensor_that_requires_grad_becomes_a_tidu_leaf_without_torch_history():
    """As ``torch.tensor(t)``: the copy is detached, so tidu's leaf carries no PyTorch graph
    (PyTorch would record every op tidu runs on it, and refuse its in-place updates)."""
    source = torch.ones(2, dtype=torch.float64, requires_grad=True) * 3
    w = tnp.tensor(source, requires_grad=True)
    assert not w.data.requires_grad and w.data.grad_fn is None
    opt = tnp.optim.SGD([w], lr=0.5)
    tnp.sum(w * w).backward()
    opt.step()                                    # writes w's data in place: no torch error
    assert torch.equal(w.data, torch.zeros(2, dtype=torch.float64))
    assert source.grad_fn is not None             # the caller's tensor is untouched


def test_torch_products_and_arithmetic_promote_as_the_namespace_does():
    """On operands of one dtype, ``dot_general``, ``add``, ``sub`` and ``mul`` call the
    standard's operators (no namespace wrapper); on mixed dtypes they still promote as
    the Array API says (a 0-d float64 with a float32 array: float64), values as NumPy's."""
    from primitives.tensor.ops import elementwise as ew
    from primitives.tensor.ops.dot import DotGeneral

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    matmul = DotGeneral((((1,), (0,)), ((), ())), (3, 4), (4, 5))
    for x, y in ((a, b), (a.astype(np.float32), b), (a, b.astype(np.float32))):
        [got] = matmul.eval(None, [torch.from_numpy(x), torch.from_numpy(y)])
        assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
        np.testing.assert_allclose(got.numpy(), x @ y, rtol=1e-6)
    batched = DotGeneral((((2,), (1,)), ((0,), (0,))), (2, 3, 4), (2, 4, 5))
    x, y = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    [got] = batched.eval(None, [torch.from_numpy(x), torch.from_numpy(y)])
    np.testing.assert_allclose(got.numpy(), x @ y, rtol=1e-12)
    big = torch.ones(3, dtype=torch.float32)
    for op, fn in ((ew.add, np.add), (ew.sub, np.subtract), (ew.mul, np.multiply)):
        [same] = op.eval(None, [big, big * 2])
        assert same.dtype == torch.float32
        np.testing.assert_array_equal(same.numpy(), fn(np.ones(3), 2.0))
        [mixed] = op.eval(None, [torch.tensor(2.5, dtype=torch.float64), big])
        assert mixed.dtype == torch.float64           # torch's own rule would give float32
        np.testing.assert_array_equal(mixed.numpy(), fn(2.5, np.ones(3)))


def test_torch_affine_one_minus_is_numpys_bits():
    """``affine(-1, c)`` (``1 - x*x`` in arcsin's derivative) on PyTorch floats is ``c - x``, one
    kernel with the bits of ``-x + c`` as on NumPy; integers keep ``x * -1 + c``."""
    from primitives.tensor.ops.elementwise import Affine

    rng = np.random.default_rng(2)
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal(50).astype(dtype)
        for op in (Affine(-1, 1), Affine(-1, 0.3), Affine(1, -2.5), Affine(2, 1)):
            [got] = op.eval(None, [torch.from_numpy(x)])
            [want] = op.eval(None, [x])
            assert got.dtype == torch.from_numpy(want).dtype
            np.testing.assert_array_equal(got.numpy(), want)
    [ints] = Affine(-1, 1).eval(None, [torch.tensor([1, 2, 3])])
    assert ints.dtype == torch.int64 and ints.tolist() == [0, -1, -2]


def test_torch_jit_grad_in_both_orders_fresh_after_a_write():
    """On PyTorch tensors, ``grad(jit)`` and ``jit(grad)`` (the operator arithmetic, the
    one-kernel ``tanh_backward`` and the hoisted sums) give NumPy's ``grad``, and a result written
    into changes no later call."""
    rng = np.random.default_rng(4)
    ps = [rng.standard_normal((5, 4)), rng.standard_normal(4)]
    x = rng.standard_normal((6, 5))

    def loss(ps, x):
        return tnp.sum(tnp.tanh(x @ ps[0] + ps[1]) ** 2)

    expected = tnp.grad(loss)(ps, x)
    tps, tx = [torch.from_numpy(p.copy()) for p in ps], torch.from_numpy(x)
    for f in (tnp.grad(tnp.jit(loss)), tnp.jit(tnp.grad(loss))):
        got = f(tps, tx)
        assert all(isinstance(g, torch.Tensor) for g in got)
        got[1][:] = 99.0
        for g, e in zip(f(tps, tx), expected):
            np.testing.assert_allclose(g.numpy(), e, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_torch_tanh_scaled_is_one_kernel_with_numpys_values(dtype, monkeypatch):
    """``tanh_scaled`` (tanh's tangent and cotangent) on PyTorch tensors: ``tanh_backward``,
    one kernel, where it computes the op (``t conj(1 - y²)``, and ``t (1 - y²)`` on reals);
    the values of the NumPy op either way."""
    from primitives.tensor.ops.elementwise import TanhScaled

    rng = np.random.default_rng(5)
    t = rng.standard_normal((3, 4)).astype(dtype)
    y = np.tanh(rng.standard_normal((3, 4)).astype(dtype) + (0.3j if dtype == np.complex128
                                                             else 0)).astype(dtype)
    fused = []
    real_kernel = torch.ops.aten.tanh_backward

    class Spy:
        def __getattr__(self, name):
            return getattr(torch.ops.aten, name)

        def tanh_backward(self, *args):
            fused.append(1)
            return real_kernel(*args)

    monkeypatch.setattr(torch.ops, "aten", Spy())
    for conjugate in (False, True):
        fused.clear()
        [want] = TanhScaled(conjugate).eval(None, [t, y])
        [got] = TanhScaled(conjugate).eval(None, [torch.from_numpy(t), torch.from_numpy(y)])
        assert isinstance(got, torch.Tensor) and got.dtype == torch.from_numpy(want).dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6 if dtype == np.float32 else 1e-14)
        assert len(fused) == (1 if conjugate or dtype != np.complex128 else 0)



@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_torch_log_softmax_linear_is_one_kernel_with_numpys_values(dtype, monkeypatch):
    """``log_softmax_linear`` on PyTorch tensors: its transposed form (log_softmax's
    cotangent map) is PyTorch's one-kernel log-softmax backward over one axis; every form
    has the NumPy op's values."""
    from primitives.tensor.ops.reduce import LogSoftmaxLinear

    rng = np.random.default_rng(6)
    t = rng.standard_normal((5, 4)).astype(dtype)
    y = torch.log_softmax(torch.from_numpy(rng.standard_normal((5, 4)).astype(dtype)), 1).numpy()
    fused = []
    real_kernel = torch._log_softmax_backward_data

    def spy(*args):
        fused.append(args[2])
        return real_kernel(*args)

    monkeypatch.setattr(torch, "_log_softmax_backward_data", spy)
    for axes, transposed, kernels in (((1,), True, [1]), ((0,), True, [0]),
                                      ((1,), False, []), ((0, 1), True, [])):
        fused.clear()
        op = LogSoftmaxLinear(axes, (5, 4), transposed)
        [want] = op.eval(None, [t, y])
        [got] = op.eval(None, [torch.from_numpy(t), torch.from_numpy(y)])
        assert isinstance(got, torch.Tensor) and got.dtype == torch.from_numpy(want).dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5 if dtype == np.float32 else 1e-13,
                                   atol=1e-6 if dtype == np.float32 else 1e-15)
        assert fused == kernels

def test_torch_jit_converts_numpy_constants_once_and_returns_fresh_results(monkeypatch):
    """A ``jit``-ed function called on PyTorch tensors converts the NumPy constants fixed
    at its trace once (not at every op of every call); a result that is such a constant is
    still a fresh tensor, and a closed-over array written between calls is read again."""
    from primitives.tensor.backends import library_of

    scale = np.array([3.0, 4.0])                       # read at each call: not cached
    f = tnp.jit(lambda v: (v / 2.0 * scale + np.float64(0.5) * tnp.sum(v), np.arange(2.0)))
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    f(x)                                                # traced
    torch_library = library_of(x)
    converted = []
    real = type(torch_library).from_numpy
    monkeypatch.setattr(type(torch_library), "from_numpy",
                        lambda self, array, like: converted.append(np.asarray(array).tolist())
                        or real(self, array, like))
    first = f(x)                        # the fixed constants (2.0, 0.5, arange), and scale
    assert len(converted) == 4 and [3.0, 4.0] in converted and [0.0, 1.0] in converted
    converted.clear()
    second = f(x)
    assert converted == [[3.0, 4.0]]   # the closed-over array only
    scale[:] = [5.0, 6.0]               # new contents of a small array: traced again,
    f(x)                                # (the trace's own result)
    third = f(x)                        # and the new trace's constants converted once
    converted.clear()
    f(x)
    assert converted == [[5.0, 6.0]]
    monkeypatch.undo()
    assert all(isinstance(r, torch.Tensor) for r in first + second + third)
    np.testing.assert_allclose(first[0].numpy(), [1.5 + 1.5, 4.0 + 1.5])
    np.testing.assert_allclose(third[0].numpy(), [2.5 + 1.5, 6.0 + 1.5])
    first[1][:] = 99.0
    np.testing.assert_array_equal(second[1].numpy(), [0.0, 1.0])
    np.testing.assert_array_equal(f(x)[1].numpy(), [0.0, 1.0])
