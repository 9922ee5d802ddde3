"""``optim.clip_grad_norm_`` and ``optim.clip_grad_value_``: ``torch.nn.utils``' gradient
clipping for eager tensors.

- The total norm is torch's (a norm of the gradients' norms, ``inf`` and the quirky
  ``norm_type=0`` included), returned as a ``Tensor`` of torch's dtype; gradients are
  scaled by ``min(max_norm / (total + 1e-6), 1)`` computed as torch does (reciprocal, then
  times ``max_norm``, in the norm's dtype), bit for bit from the same norm.
- ``.grad`` is assigned new arrays: the ``Gradients`` of ``backward``, arrays read before
  and arrays shared by two tensors keep their values.
- Misuse raises ``TiduError``s naming the function; a non-finite norm with
  ``error_if_nonfinite=True`` a ``NonFiniteNormError`` (also a ``RuntimeError``, as torch).

The first part needs only NumPy; the tests against torch skip without it.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.tensor import optim
from primitives.tensor.errors import TensorNotSupportedError, TensorTypeError
from primitives.tensor.optim import NonFiniteNormError, OptimizerError
from tidu import TiduError


def _with_grads(*grads):
    """Leaf tensors (zeros) whose ``.grad`` are copies of ``grads`` (``None`` stays None)."""
    tensors = []
    for g in grads:
        if g is None:
            tensors.append(tnp.tensor(np.zeros(1), requires_grad=True))
            continue
        g = np.asarray(g)
        t = tnp.tensor(np.zeros(g.shape, g.dtype), requires_grad=True)
        t.grad = g.copy()
        tensors.append(t)
    return tensors


def _coef(total: float, max_norm: float) -> float:
    """torch's coefficient in float64: ``(1 / (total + 1e-6)) * max_norm``, clamped to 1."""
    return min((1.0 / (total + 1e-6)) * max_norm, 1.0)


# --- NumPy only --------------------------------------------------------------------------


def test_exported():
    assert tnp.optim.clip_grad_norm_ is optim.clip_grad_norm_
    assert tnp.optim.clip_grad_value_ is optim.clip_grad_value_
    assert {"clip_grad_norm_", "clip_grad_value_", "NonFiniteNormError"} <= set(optim.__all__)


def test_two_norm_by_hand():
    w, b = _with_grads([12.0, 0.0], [5.0])
    total = optim.clip_grad_norm_([w, b], max_norm=0.1)
    assert isinstance(total, tnp.Tensor) and not total.requires_grad and total.grad is None
    assert total.shape == () and total.dtype == np.float64 and total.item() == 13.0
    coef = _coef(13.0, 0.1)
    assert coef != 0.1 / (13.0 + 1e-6)           # torch's rounding: reciprocal, then times
    np.testing.assert_array_equal(w.grad, np.array([12.0, 0.0]) * coef)
    np.testing.assert_array_equal(b.grad, np.array([5.0]) * coef)
    assert w.grad.dtype == np.float64


def test_below_max_norm_unchanged():
    g = np.array([0.3, -0.4])
    (w,) = _with_grads(g)
    assert optim.clip_grad_norm_(w, max_norm=1.0).item() == pytest.approx(0.5)
    np.testing.assert_array_equal(w.grad, g)    # the coefficient clamps to exactly 1


def test_backward_then_clip_then_step():
    w = tnp.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=1.0)
    tnp.sum(w * w).backward()                     # grad [2, 4], norm sqrt(20)
    norm = optim.clip_grad_norm_([w], max_norm=2.0)
    assert norm.item() == pytest.approx(math.sqrt(20.0))
    clipped = np.array([2.0, 4.0]) * _coef(norm.item(), 2.0)
    np.testing.assert_array_equal(w.grad, clipped)
    opt.step()
    np.testing.assert_array_equal(w.data, np.array([1.0, 2.0]) - clipped)


def test_none_grads_skipped():
    w, unused, b = _with_grads([6.0, 0.0], None, [8.0])
    assert optim.clip_grad_norm_([w, unused, b], 1.0).item() == 10.0
    assert unused.grad is None
    optim.clip_grad_value_([w, unused, b], 1.0)
    assert unused.grad is None
    np.testing.assert_array_equal(b.grad, [8.0 * _coef(10.0, 1.0)])   # below 1


def test_no_grads_at_all():
    ts = _with_grads(None, None)
    total = optim.clip_grad_norm_(ts, 1.0)
    assert total.item() == 0.0 and total.dtype == np.float64   # tidu's default dtype
    assert all(t.grad is None for t in ts)
    assert optim.clip_grad_norm_([], 1.0).item() == 0.0


def test_single_tensor_and_generator():
    (w,) = _with_grads([3.0, 4.0])
    assert optim.clip_grad_norm_(w, 1.0).item() == 5.0
    ts = _with_grads([3.0, 4.0], [12.0])
    assert optim.clip_grad_norm_((t for t in ts), 1.0).item() == 13.0
    for t, g in zip(ts, ([3.0, 4.0], [12.0])):
        np.testing.assert_array_equal(t.grad, np.array(g) * _coef(13.0, 1.0))
    ts = _with_grads([3.0, -4.0])
    assert optim.clip_grad_value_((t for t in ts), 1.0) is None
    np.testing.assert_array_equal(ts[0].grad, [1.0, -1.0])


def test_empty_generator_warns_as_torch():
    with pytest.warns(UserWarning, match="empty generator, no gradient clipping"):
        assert optim.clip_grad_norm_((t for t in []), 1.0).item() == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optim.clip_grad_norm_([], 1.0)            # an empty list: no warning, as torch


def test_other_norms_by_hand():
    grads = ([3.0, 0.0, -4.0], [1.0, -2.0, 5.0])

    def total(p):
        return optim.clip_grad_norm_(_with_grads(*grads), 1e9, norm_type=p).item()

    assert total(math.inf) == 5.0
    assert total("inf") == 5.0                    # float("inf"), as torch converts it
    assert total(-math.inf) == 0.0
    assert total(1) == 15.0
    assert total(3.0) == pytest.approx((27 + 64 + 1 + 8 + 125) ** (1 / 3), rel=1e-15)
    assert total(0.5) == pytest.approx(sum(math.sqrt(abs(x)) for g in grads for x in g) ** 2,
                                       rel=1e-15)
    # torch's 0-"norm" is a norm of the per-tensor counts: the tensors with a nonzero entry
    assert total(0) == 2.0
    assert optim.clip_grad_norm_(_with_grads([0.0, 0.0], [1.0]), 1e9, 0).item() == 1.0
    # negative orders: 1 / sum(1 / |g|) for -1; a zero entry gives 0
    assert total(-1) == 0.0
    assert optim.clip_grad_norm_(_with_grads([1.0, 2.0], [4.0]), 1e9, -1).item() == \
        pytest.approx(1 / (1 + 1 / 2 + 1 / 4))


def test_inf_norm_scales_by_max():
    w, b = _with_grads([3.0, -8.0], [4.0])
    assert optim.clip_grad_norm_([w, b], 2.0, norm_type=math.inf).item() == 8.0
    np.testing.assert_array_equal(w.grad, np.array([3.0, -8.0]) * _coef(8.0, 2.0))
    np.testing.assert_array_equal(b.grad, np.array([4.0]) * _coef(8.0, 2.0))


def test_zero_norm_type_scales_by_count():
    ts = _with_grads([3.0, 0.0], [0.0], [1.0, 2.0])
    assert optim.clip_grad_norm_(ts, 1.0, norm_type=0).item() == 2.0
    np.testing.assert_array_equal(ts[0].grad, np.array([3.0, 0.0]) * _coef(2.0, 1.0))


def test_dtypes_of_the_norm():
    def total(*grads):
        return optim.clip_grad_norm_(_with_grads(*grads), 1.0)

    f32 = total(np.array([3.0, 4.0], np.float32))
    assert f32.dtype == np.float32 and f32.item() == 5.0
    mixed = total(np.array([3.0, 4.0], np.float32), np.array([12.0]))
    assert mixed.dtype == np.float64 and mixed.item() == 13.0
    assert total(np.array([3 + 4j], np.complex64)).dtype == np.float32
    assert total(np.array([3 + 4j], np.complex128)).dtype == np.float64
    assert total(np.array([3.0], np.float16), np.array([4.0], np.float32)).dtype == np.float32
    assert total(np.array([3.0, 4.0], np.float16)).dtype == np.float16


def test_mixed_dtypes_each_scaled_in_its_own():
    w, b = _with_grads(np.array([3.0, 4.0], np.float32), np.array([12.0]))
    optim.clip_grad_norm_([w, b], 1.0)
    coef = _coef(13.0, 1.0)
    assert w.grad.dtype == np.float32 and b.grad.dtype == np.float64
    # torch's mul_ of a float32 tensor by a float64 0-d tensor: the factor rounded first
    np.testing.assert_array_equal(w.grad, np.array([3.0, 4.0], np.float32) * np.float32(coef))
    np.testing.assert_array_equal(b.grad, np.array([12.0]) * coef)


def test_float32_coefficient_in_float32():
    (w,) = _with_grads(np.array([3.0, 4.0], np.float32))
    optim.clip_grad_norm_(w, 0.1)
    f = np.float32
    coef = (f(1) / (f(5) + f(1e-6))) * f(0.1)
    assert w.grad.dtype == np.float32
    np.testing.assert_array_equal(w.grad, np.array([3.0, 4.0], np.float32) * coef)


def test_complex_gradients_use_abs():
    (z,) = _with_grads(np.array([3 + 4j, -12j]))
    assert optim.clip_grad_norm_(z, 1.0).item() == 13.0
    assert z.grad.dtype == np.complex128
    np.testing.assert_array_equal(z.grad, np.array([3 + 4j, -12j]) * _coef(13.0, 1.0))


def test_gradients_of_backward_keep_their_values():
    w = tnp.tensor([3.0, 4.0], requires_grad=True)
    b = tnp.tensor([12.0], requires_grad=True)
    grads = (tnp.sum(w * w) / 2 + tnp.sum(b * b) / 2).backward()
    optim.clip_grad_norm_([w, b], 1.0)            # .grad shared with `grads` until read
    np.testing.assert_array_equal(grads.grad(w), [3.0, 4.0])
    np.testing.assert_array_equal(grads.grad(b), [12.0])
    np.testing.assert_array_equal(w.grad, np.array([3.0, 4.0]) * _coef(13.0, 1.0))
    optim.clip_grad_value_([w, b], 0.1)
    np.testing.assert_array_equal(grads.grad(w), [3.0, 4.0])
    np.testing.assert_array_equal(w.grad, [0.1, 0.1])


def test_gradients_read_first_keep_their_values():
    w = tnp.tensor([3.0, 4.0], requires_grad=True)
    grads = tnp.sum(w * w / 2).backward()
    from_backward, earlier = grads.grad(w), w.grad
    optim.clip_grad_norm_(w, 1.0)
    np.testing.assert_array_equal(from_backward, [3.0, 4.0])
    np.testing.assert_array_equal(earlier, [3.0, 4.0])
    np.testing.assert_array_equal(grads.grad(w), [3.0, 4.0])
    assert w.grad is not earlier and w.grad is not from_backward


def test_an_array_shared_by_two_tensors_is_not_scaled_twice():
    shared = np.array([3.0, 4.0])
    w = tnp.tensor(np.zeros(2), requires_grad=True)
    v = tnp.tensor(np.zeros(2), requires_grad=True)
    w.grad = shared
    v.grad = shared
    total = optim.clip_grad_norm_([w, v], 1.0).item()
    assert total == pytest.approx(math.sqrt(50.0))
    np.testing.assert_array_equal(shared, [3.0, 4.0])
    np.testing.assert_array_equal(w.grad, shared * _coef(total, 1.0))
    np.testing.assert_array_equal(v.grad, shared * _coef(total, 1.0))
    optim.clip_grad_value_([w, v], 0.1)
    np.testing.assert_array_equal(shared, [3.0, 4.0])


def test_a_tensor_listed_twice_counts_twice_as_torch():
    (w,) = _with_grads([3.0, 4.0])
    total = optim.clip_grad_norm_([w, w], 1.0).item()
    assert total == pytest.approx(math.sqrt(50.0))
    coef = _coef(total, 1.0)
    np.testing.assert_array_equal(w.grad, np.array([3.0, 4.0]) * coef * coef)


def test_nonfinite_norm_raises_when_asked():
    (w,) = _with_grads([3.0, np.nan])
    with pytest.raises(NonFiniteNormError, match=r"optim\.clip_grad_norm_.*non-finite") as info:
        optim.clip_grad_norm_(w, 1.0, error_if_nonfinite=True)
    assert isinstance(info.value, (OptimizerError, TiduError, RuntimeError, ValueError))
    np.testing.assert_array_equal(w.grad, [3.0, np.nan])    # untouched
    (w,) = _with_grads([3.0, np.inf])
    with pytest.raises(RuntimeError):
        optim.clip_grad_norm_(w, 1.0, norm_type=math.inf, error_if_nonfinite=True)
    (w,) = _with_grads([1e200, 1e200])             # overflows: inf
    with pytest.raises(TiduError):
        optim.clip_grad_norm_(w, 1.0, error_if_nonfinite=True)


def test_nonfinite_norm_scales_by_its_coefficient():
    w, b = _with_grads([3.0, np.nan], [1.0])
    assert math.isnan(optim.clip_grad_norm_([w, b], 1.0).item())
    assert np.isnan(w.grad).all() and np.isnan(b.grad).all()
    w, b = _with_grads([3.0, np.inf], [1.0])
    assert optim.clip_grad_norm_([w, b], 1.0).item() == math.inf
    np.testing.assert_array_equal(w.grad, [0.0, np.nan])       # 0 * inf
    np.testing.assert_array_equal(b.grad, [0.0])


def test_float32_sum_overflows_as_torch():
    (w,) = _with_grads(np.array([1e20, 1e20], np.float32))
    assert optim.clip_grad_norm_(w, 1.0).item() == math.inf      # torch sums in float32
    (w,) = _with_grads(np.array([1e20, 1e20], np.float64))
    assert optim.clip_grad_norm_(w, 1.0).item() == pytest.approx(math.sqrt(2) * 1e20)


def test_gradient_with_history_is_clipped_by_value():
    w = tnp.tensor([3.0, 4.0], requires_grad=True)
    tnp.sum(w * w / 2).backward(create_graph=True)
    assert isinstance(w.grad, tnp.Tensor)
    assert optim.clip_grad_norm_(w, 1.0).item() == 5.0
    assert isinstance(w.grad, np.ndarray)         # its values, clipped; no history
    np.testing.assert_array_equal(w.grad, np.array([3.0, 4.0]) * _coef(5.0, 1.0))
    w.grad = None
    tnp.sum(w * w / 2).backward(create_graph=True)
    optim.clip_grad_value_(w, 3.5)
    np.testing.assert_array_equal(w.grad, [3.0, 3.5])


def test_clip_grad_value():
    w, b = _with_grads([1.5, -3.0, np.nan, 0.2], np.array([-0.3, 0.7], np.float32))
    assert optim.clip_grad_value_([w, b], 0.5) is None
    np.testing.assert_array_equal(w.grad, [0.5, -0.5, np.nan, 0.2])
    assert b.grad.dtype == np.float32
    np.testing.assert_array_equal(b.grad, np.array([-0.3, 0.5], np.float32))
    (w,) = _with_grads([1.5, -3.0, 0.2])
    optim.clip_grad_value_(w, -1.0)               # torch: clamp_min(1) then clamp_max(-1)
    np.testing.assert_array_equal(w.grad, [-1.0, -1.0, -1.0])
    optim.clip_grad_value_(w, math.nan)           # a nan bound: all nan, as torch.clamp
    assert np.isnan(w.grad).all()
    (w,) = _with_grads(np.array([0.25, -1.0], np.float16))
    optim.clip_grad_value_(w, 0.1)
    assert w.grad.dtype == np.float16
    np.testing.assert_array_equal(w.grad, np.array([0.1, -0.1], np.float16))


def test_misuse_raises_tidu_errors():
    (w,) = _with_grads([1.0])
    for fn, args in ((optim.clip_grad_norm_, (1.0,)), (optim.clip_grad_value_, (1.0,))):
        name = fn.__name__
        with pytest.raises(TensorTypeError, match=name):
            fn([w, np.ones(1)], *args)
        with pytest.raises(TensorTypeError, match=name):
            fn(np.ones(3), *args)
        with pytest.raises(TensorTypeError, match=name):
            fn(3.0, *args)
        with pytest.raises(TensorTypeError, match=name):
            fn([w], "abc")
    with pytest.raises(TensorTypeError, match="norm_type"):
        optim.clip_grad_norm_([w], 1.0, norm_type="two")
    (z,) = _with_grads(np.array([1 + 1j]))
    with pytest.raises(TensorNotSupportedError, match="clip_grad_value_.*complex"):
        optim.clip_grad_value_(z, 1.0)
    empty, full = _with_grads(np.zeros(0), [1.0])
    for p in (math.inf, -math.inf, -1.0):         # torch: no identity for these norms
        with pytest.raises(OptimizerError, match="clip_grad_norm_.*empty"):
            optim.clip_grad_norm_([empty, full], 1.0, norm_type=p)
    assert optim.clip_grad_norm_([empty, full], 1.0).item() == 1.0


# --- against torch -----------------------------------------------------------------------


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="these tests compare with torch.nn.utils")


def _pair(torch, arrays):
    """tidu leaves and torch parameters with copies of ``arrays`` as gradients (``None``:
    no gradient)."""
    ours, theirs = [], []
    for a in arrays:
        if a is None:
            ours.append(tnp.tensor(np.zeros(1), requires_grad=True))
            theirs.append(torch.zeros(1, dtype=torch.float64, requires_grad=True))
            continue
        t = tnp.tensor(np.zeros(a.shape, a.dtype), requires_grad=True)
        t.grad = a.copy()
        p = torch.zeros(a.shape, dtype=torch.from_numpy(a).dtype, requires_grad=True)
        p.grad = torch.from_numpy(a.copy())
        ours.append(t)
        theirs.append(p)
    return ours, theirs


DTYPES = {"float64": [np.float64], "float32": [np.float32], "float16": [np.float16],
          "complex64": [np.complex64], "complex128": [np.complex128],
          "mixed": [np.float32, np.float64, np.float16, np.complex64]}


def _dtyped_grads(rng, kind, integers=False):
    """Gradients of a few shapes (and one ``None``), of the dtypes of ``DTYPES[kind]`` in
    turn: integers (exact norms) or normal draws of various scales."""
    dtypes = DTYPES[kind]
    grads = []
    for i, shape in enumerate([(3, 4), (5,), (), (2, 1, 3)]):
        dtype = np.dtype(dtypes[i % len(dtypes)])

        def draw(shape=shape):
            if integers:
                return rng.integers(-20, 21, size=shape).astype(float)
            return rng.normal(size=shape) * rng.uniform(0.1, 10)

        g = draw() + 1j * draw() if dtype.kind == "c" else draw()
        grads.append(np.asarray(g).astype(dtype))
    grads.insert(2, None)
    return grads


def _compare(torch, ours, theirs, total, their_total, exact):
    assert str(total.dtype) == str(their_total.dtype).removeprefix("torch.")
    # torch sums float32 in float32 (tidu in float64): as close as the least precise dtype
    bits = min(np.finfo(p.grad.numpy().dtype).bits for p in theirs if p.grad is not None)
    rtol = {64: 1e-13, 32: 3e-6, 16: 2e-3}[bits]
    if exact:
        assert total.item() == their_total.item() or \
            (math.isnan(total.item()) and math.isnan(their_total.item()))
    else:
        assert total.item() == pytest.approx(their_total.item(), rel=rtol, nan_ok=True)
    for t, p in zip(ours, theirs):
        if p.grad is None:
            assert t.grad is None
            continue
        assert t.grad.dtype == p.grad.numpy().dtype
        if exact:
            np.testing.assert_array_equal(t.grad, p.grad.numpy())
        else:
            np.testing.assert_allclose(t.grad, p.grad.numpy(), rtol=rtol, atol=0)


@pytest.mark.parametrize("kind", sorted(DTYPES))
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, -math.inf, 0.0])
@pytest.mark.parametrize("max_norm", [0.37, 1e4])
def test_bit_for_bit_when_the_norms_are_exact(torch, kind, norm_type, max_norm):
    """Integer gradients make every norm of these orders exact (or correctly rounded) in
    both, so the gradients must come out bit for bit: the coefficient is torch's. (Not the
    1-norm of complex gradients, a sum of irrational |z|, nor complex128's |z|, which
    torch rounds correctly only almost always.)"""
    from torch.nn.utils import clip_grad_norm_
    exact = norm_type in (2.0, 0.0) or kind not in ("complex64", "complex128", "mixed") or \
        (norm_type != 1.0 and kind != "complex128")
    rng = np.random.default_rng(7)
    for _ in range(5):
        grads = _dtyped_grads(rng, kind, integers=True)
        ours, theirs = _pair(torch, grads)
        total = optim.clip_grad_norm_(ours, max_norm, norm_type)
        their_total = clip_grad_norm_(theirs, max_norm, norm_type)
        _compare(torch, ours, theirs, total, their_total, exact=exact)


@pytest.mark.parametrize("kind", sorted(DTYPES))
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, 0.5, -1.0, math.inf])
def test_random_gradients_against_torch(torch, kind, norm_type):
    from torch.nn.utils import clip_grad_norm_
    rng = np.random.default_rng(3)
    for _ in range(5):
        grads = _dtyped_grads(rng, kind)
        ours, theirs = _pair(torch, grads)
        total = optim.clip_grad_norm_(ours, 0.5, norm_type)
        their_total = clip_grad_norm_(theirs, 0.5, norm_type)
        _compare(torch, ours, theirs, total, their_total, exact=False)


def test_coefficient_matches_torch_for_many_norms(torch):
    """Given the same (exact) total norm, torch's coefficient to the last bit, float64 and
    float32: one-element gradients make the norm the entry itself."""
    from torch.nn.utils import clip_grad_norm_
    rng = np.random.default_rng(11)
    for dtype in (np.float64, np.float32, np.float16):
        values = rng.uniform(0.5, 100.0, size=300).astype(dtype)
        max_norms = rng.uniform(0.01, 0.5, size=300)
        for value, max_norm in zip(values, max_norms):
            ours, theirs = _pair(torch, [np.array([value]), np.array([0.0], dtype)])
            total = optim.clip_grad_norm_(ours, max_norm)
            their_total = clip_grad_norm_(theirs, max_norm)
            assert total.item() == their_total.item()
            assert ours[0].grad[0] == theirs[0].grad.numpy()[0], (dtype, value, max_norm)


def test_nonfinite_against_torch(torch):
    from torch.nn.utils import clip_grad_norm_
    for grads in ([np.array([3.0, np.nan]), np.array([1.0])],
                  [np.array([3.0, np.inf]), np.array([1.0, -2.0])],
                  [np.array([1e20, 3.0], np.float32)]):
        for norm_type in (2.0, math.inf):
            ours, theirs = _pair(torch, grads)
            total = optim.clip_grad_norm_(ours, 1.0, norm_type)
            their_total = clip_grad_norm_(theirs, 1.0, norm_type)
            _compare(torch, ours, theirs, total, their_total, exact=True)
            ours, theirs = _pair(torch, grads)
            if not math.isfinite(total.item()):
                with pytest.raises(RuntimeError):
                    clip_grad_norm_(theirs, 1.0, norm_type, error_if_nonfinite=True)
                with pytest.raises(NonFiniteNormError):
                    optim.clip_grad_norm_(ours, 1.0, norm_type, error_if_nonfinite=True)


def test_duplicates_and_empty_against_torch(torch):
    from torch.nn.utils import clip_grad_norm_
    ours, theirs = _pair(torch, [np.array([3.0, 4.0])])
    total = optim.clip_grad_norm_(ours * 2, 1.0)
    their_total = clip_grad_norm_(theirs * 2, 1.0)
    _compare(torch, ours, theirs, total, their_total, exact=True)
    ours, theirs = _pair(torch, [np.zeros(0), np.array([3.0, 4.0])])
    with pytest.raises(RuntimeError):
        clip_grad_norm_(theirs, 1.0, math.inf)
    with pytest.raises(OptimizerError):
        optim.clip_grad_norm_(ours, 1.0, math.inf)
    total = optim.clip_grad_norm_(ours, 1.0)
    their_total = clip_grad_norm_(theirs, 1.0)
    _compare(torch, ours, theirs, total, their_total, exact=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("clip_value", [0.1, 1.0, -0.5, 0.0])
def test_clip_grad_value_against_torch(torch, dtype, clip_value):
    from torch.nn.utils import clip_grad_value_
    rng = np.random.default_rng(5)
    grads = [np.asarray(rng.normal(size=s) * 2).astype(dtype) for s in [(4, 3), (7,), ()]]
    grads[0][0, 0] = np.nan
    grads.insert(1, None)
    ours, theirs = _pair(torch, grads)
    optim.clip_grad_value_(ours, clip_value)
    clip_grad_value_(theirs, clip_value)
    for t, p in zip(ours, theirs):
        if p.grad is not None:
            assert t.grad.dtype == p.grad.numpy().dtype
            np.testing.assert_array_equal(t.grad, p.grad.numpy())


@pytest.mark.parametrize("clip", ["norm", "norm_inf", "value"])
def test_training_step_by_step_against_torch(torch, clip):
    """SGD with momentum on a small regression, clipping between backward and step."""
    from torch.nn.utils import clip_grad_norm_, clip_grad_value_
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 3)), rng.normal(size=(16, 2))
    w0, b0 = rng.normal(size=(3, 2)) * 3, rng.normal(size=2)
    ours = [tnp.tensor(w0.copy(), requires_grad=True), tnp.tensor(b0.copy(), requires_grad=True)]
    theirs = [torch.tensor(w0.copy(), requires_grad=True),
              torch.tensor(b0.copy(), requires_grad=True)]
    opt = optim.SGD(ours, lr=0.05, momentum=0.9)
    their_opt = torch.optim.SGD(theirs, lr=0.05, momentum=0.9)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for step in range(25):
        opt.zero_grad()
        their_opt.zero_grad()
        tnp.mean((tnp.tensor(x) @ ours[0] + ours[1] - y) ** 2).backward()
        torch.mean((xt @ theirs[0] + theirs[1] - yt) ** 2).backward()
        if clip == "value":
            optim.clip_grad_value_(ours, 0.2)
            clip_grad_value_(theirs, 0.2)
        else:
            p = math.inf if clip == "norm_inf" else 2.0
            total = optim.clip_grad_norm_(ours, 0.5, p)
            their_total = clip_grad_norm_(theirs, 0.5, p)
            assert total.item() == pytest.approx(their_total.item(), rel=1e-12)
        for t, q in zip(ours, theirs):
            np.testing.assert_allclose(t.grad, q.grad.numpy(), rtol=1e-11, atol=1e-15)
        opt.step()
        their_opt.step()
        for t, q in zip(ours, theirs):
            np.testing.assert_allclose(t.data, q.detach().numpy(), rtol=1e-11, atol=1e-14)


def test_pytorch_backed_tensors(torch):
    """A tidu Tensor holding PyTorch data: its gradient stays a torch tensor, clipped as
    torch clips it."""
    from torch.nn.utils import clip_grad_norm_, clip_grad_value_
    rng = np.random.default_rng(2)
    values = [rng.normal(size=(3, 2)).astype(np.float32), rng.normal(size=4)]
    ours = [tnp.tensor(torch.from_numpy(v.copy()), requires_grad=True) for v in values]
    theirs = [torch.tensor(v.copy(), requires_grad=True) for v in values]
    for t, q in zip(ours, theirs):
        tnp.sum(t * t * t).backward()
        torch.sum(q * q * q).backward()
    total = optim.clip_grad_norm_(ours, 0.5)
    their_total = clip_grad_norm_(theirs, 0.5)
    assert total.dtype == np.float64 and total.item() == pytest.approx(their_total.item(),
                                                                        rel=1e-6)
    for t, q in zip(ours, theirs):
        assert isinstance(t.grad, torch.Tensor) and t.grad.dtype == q.grad.dtype
        torch.testing.assert_close(t.grad, q.grad, rtol=1e-6, atol=0)
    optim.clip_grad_value_(ours, 0.05)
    clip_grad_value_(theirs, 0.05)
    for t, q in zip(ours, theirs):
        assert isinstance(t.grad, torch.Tensor)
        torch.testing.assert_close(t.grad, q.grad, rtol=1e-6, atol=0)


def test_empty_generator_warning_is_torchs(torch):
    from torch.nn.utils import clip_grad_norm_
    with pytest.warns(UserWarning) as theirs:
        clip_grad_norm_((p for p in []), 1.0)
    with pytest.warns(UserWarning) as ours:
        optim.clip_grad_norm_((t for t in []), 1.0)
    assert str(ours[0].message) == str(theirs[0].message)
