"""Round 60a: tnp functions that had nothing to do handed an eager ``Tensor`` back as itself.

1. ``u = t.reshape(t.shape)`` (and ``transpose`` of a 1-d ``t``, ``real`` of real values,
   ``ravel`` of a 1-d one, ``squeeze`` with no axis of length one, ``astype`` to its own
   dtype...) was ``t``: ``u.requires_grad_(False)`` switched ``t``'s gradient off with no
   error (a silent wrong gradient), and ``u.data = ...`` replaced ``t``'s values. Now ``u``
   is a new tensor on ``t``'s values (one recorded same-shape reshape, PyTorch's view);
   arrays and traced values still come back as they are, and ``tnp.asarray(t)`` is ``t``
   (``np.asarray``'s and ``torch.as_tensor``'s contract). The functions NumPy makes a new
   array for (``concatenate`` of one array, ``sum`` of a 0-d one, ``pad`` by nothing, through
   ``lowering.new_value``) and ``einsum("ij->ij")``, ``real_if_close`` of real values and
   ``diff(n=0)`` gave ``t`` too.
2. ``nonzero``, ``argwhere``, ``flatnonzero``, ``count_nonzero``, ``isneginf``, ``isposinf``
   and ``bitwise_count`` gave NumPy arrays for a ``Tensor``; now ``Tensor``s without grad,
   as ``argsort`` and ``searchsorted`` give.
"""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.eager import Tensor
from primitives.tensor.errors import ConcretizationError
from tidu import TiduError

RNG = np.random.default_rng(60)

# name -> (function of t, t's shape); each has nothing to do on a t of that shape
IDENTITIES = {
    "reshape": (lambda t: tnp.reshape(t, t.shape), (2, 3)),
    "reshape -1 of 1-d": (lambda t: tnp.reshape(t, -1), (3,)),
    "np.reshape": (lambda t: np.reshape(t, t.shape), (2, 3)),
    "Tensor.reshape": (lambda t: t.reshape(*t.shape), (2, 3)),
    "reshape order F": (lambda t: tnp.reshape(t, t.shape, order="F"), (3,)),
    "transpose identity": (lambda t: tnp.transpose(t, (0, 1)), (2, 3)),
    "transpose 1-d": (lambda t: tnp.transpose(t), (3,)),
    "transpose 0-d": (lambda t: tnp.transpose(t), ()),
    "np.transpose": (lambda t: np.transpose(t), (3,)),
    "permute_dims": (lambda t: tnp.permute_dims(t, (0, 1)), (2, 3)),
    "Tensor.T 1-d": (lambda t: t.T, (3,)),
    "Tensor.transpose": (lambda t: t.transpose(0, 1), (2, 3)),
    "real": (lambda t: tnp.real(t), (3,)),
    "np.real": (lambda t: np.real(t), (3,)),
    "Tensor.real": (lambda t: t.real, (3,)),
    "conj": (lambda t: tnp.conj(t), (3,)),
    "conjugate": (lambda t: tnp.conjugate(t), (3,)),
    "Tensor.conj": (lambda t: t.conj(), (3,)),
    "positive": (lambda t: +t, (3,)),
    "astype": (lambda t: tnp.astype(t, t.dtype), (3,)),
    "Tensor.astype": (lambda t: t.astype(t.dtype), (3,)),
    "broadcast_to": (lambda t: tnp.broadcast_to(t, t.shape), (2, 3)),
    "np.broadcast_to": (lambda t: np.broadcast_to(t, t.shape), (2, 3)),
    "broadcast_arrays": (lambda t: tnp.broadcast_arrays(t, np.ones(3))[0], (3,)),
    "ravel": (lambda t: tnp.ravel(t), (3,)),
    "Tensor.ravel": (lambda t: t.ravel(), (3,)),
    "Tensor.flatten": (lambda t: t.flatten(), (3,)),
    "squeeze": (lambda t: tnp.squeeze(t), (2, 3)),
    "squeeze axis ()": (lambda t: tnp.squeeze(t, ()), (3,)),
    "Tensor.squeeze": (lambda t: t.squeeze(), (2, 3)),
    "expand_dims ()": (lambda t: tnp.expand_dims(t, ()), (2, 3)),
    "moveaxis": (lambda t: tnp.moveaxis(t, 0, 0), (2, 3)),
    "swapaxes": (lambda t: tnp.swapaxes(t, 1, 1), (2, 3)),
    "Tensor.swapaxes": (lambda t: t.swapaxes(0, 0), (2, 3)),
    "rollaxis": (lambda t: tnp.rollaxis(t, 0), (2, 3)),
    "flip of nothing": (lambda t: tnp.flip(t, ()), (3,)),
    "atleast_1d": (lambda t: tnp.atleast_1d(t), (3,)),
    "atleast_2d": (lambda t: tnp.atleast_2d(t), (2, 3)),
    "atleast_3d": (lambda t: tnp.atleast_3d(t), (2, 3, 1)),
    "atleast_1d of two": (lambda t: tnp.atleast_1d(t, np.ones(2))[0], (3,)),
    "split in one": (lambda t: tnp.split(t, 1)[0], (3,)),
    "array_split in one": (lambda t: tnp.array_split(t, 1)[0], (3,)),
    "roll by 0": (lambda t: tnp.roll(t, 0, axis=0), (3,)),
    "repeat once": (lambda t: tnp.repeat(t, 1), (3,)),
    "tile once": (lambda t: tnp.tile(t, 1), (3,)),
    "full of t": (lambda t: tnp.full(t.shape, t), (3,)),
    "hstack of one": (lambda t: tnp.hstack([t]), (3,)),
    "vstack of one": (lambda t: tnp.vstack((t,)), (2, 3)),
    "dstack of one": (lambda t: tnp.dstack([t]), (2, 3, 1)),
    "column_stack of one": (lambda t: tnp.column_stack([t]), (2, 3)),
    "block of one": (lambda t: tnp.block([[t]]), (2, 3)),
    "r_ of one": (lambda t: tnp.r_[t], (3,)),
    "getitem [:]": (lambda t: t[:], (3,)),
    # through lowering.new_value (NumPy makes a new array for these) and its neighbours
    "concatenate of one": (lambda t: tnp.concatenate([t]), (2, 3)),
    "sum of 0-d": (lambda t: tnp.sum(t), ()),
    "sum over no axes": (lambda t: tnp.sum(t, axis=()), (2, 3)),
    "prod of 0-d": (lambda t: tnp.prod(t), ()),
    "amax of 0-d": (lambda t: tnp.amax(t), ()),
    "min of 0-d": (lambda t: tnp.min(t), ()),
    "logsumexp over no axes": (lambda t: tnp.logsumexp(t, axis=()), (3,)),
    "pad by nothing": (lambda t: tnp.pad(t, 0), (2, 3)),
    "einsum ij->ij": (lambda t: tnp.einsum("ij->ij", t), (2, 3)),
    "real_if_close of real": (lambda t: tnp.real_if_close(t), (3,)),
    "diff n=0": (lambda t: tnp.diff(t, n=0), (3,)),
}


def _leaf(shape, requires_grad=True) -> Tensor:
    return tnp.tensor(RNG.normal(size=shape), requires_grad=requires_grad)


def _finite_difference_gradient(f, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """d/dt sum(f(t) * weights) at ``values``, by central differences."""
    def loss(v):
        return float(np.sum(np.asarray(f(tnp.tensor(v)).detach().numpy()) * weights))
    grad = np.zeros_like(values)
    for index in np.ndindex(values.shape):
        step = np.zeros_like(values)
        step[index] = 1e-6
        grad[index] = (loss(values + step) - loss(values - step)) / 2e-6
    return grad


@pytest.mark.parametrize("name", list(IDENTITIES))
def test_a_result_with_nothing_done_is_a_new_tensor_with_its_own_state(name):
    f, shape = IDENTITIES[name]
    t = _leaf(shape)
    u = f(t)
    assert u is not t
    assert u.shape == t.shape and np.array_equal(u.data, t.data)
    with pytest.raises(TiduError, match="requires_grad"):
        u.requires_grad_(False)              # a computed tensor, as PyTorch's view
    assert t.requires_grad
    weights = RNG.normal(size=shape)
    (u * weights).sum().backward()
    np.testing.assert_allclose(t.grad, _finite_difference_gradient(f, t.data.copy(), weights),
                               rtol=1e-6, atol=1e-8)
    before = t.data.copy()
    u.data = np.full(shape, 7.0)
    assert np.array_equal(t.data, before)


@pytest.mark.parametrize("name", list(IDENTITIES))
def test_a_leaf_without_grad_keeps_its_state(name):
    f, shape = IDENTITIES[name]
    t = _leaf(shape, requires_grad=False)
    u = f(t)
    assert u is not t and not u.requires_grad
    u.requires_grad_(True)                   # u's own flag (u is a leaf: t records nothing)
    assert not t.requires_grad
    before = t.data.copy()
    u.data = np.full(shape, 7.0)
    assert np.array_equal(t.data, before)


@pytest.mark.parametrize("name", ["reshape", "transpose 1-d", "squeeze", "ravel",
                                  "Tensor.T 1-d", "moveaxis"])
def test_gradients_agree_with_pytorch(name):
    """(torch.atleast_2d of a 2-d tensor, as np.atleast_2d, is its argument itself: tnp's
    gives a new tensor there too, so that no function hands an eager Tensor back.)"""
    torch = pytest.importorskip("torch")
    f, shape = IDENTITIES[name]
    values, weights = RNG.normal(size=shape), RNG.normal(size=shape)
    t = tnp.tensor(values, requires_grad=True)
    (f(t) * weights).sum().backward()
    reference = torch.tensor(values, requires_grad=True)
    view = {"reshape": lambda r: r.reshape(r.shape), "transpose 1-d": lambda r: r.permute(0),
            "squeeze": lambda r: r.squeeze(), "ravel": lambda r: r.ravel(),
            "Tensor.T 1-d": lambda r: r.permute(0),
            "moveaxis": lambda r: torch.movedim(r, 0, 0)}[name](reference)
    assert view is not reference            # PyTorch's own result is a new tensor too
    (view * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(t.grad, reference.grad.numpy())


def test_a_computed_tensor_stays_computed_and_differentiates_once():
    t = _leaf((3,))
    h = t * 2.0
    u = tnp.reshape(h, (3,))
    assert u is not h
    with pytest.raises(TiduError):
        u.requires_grad_(False)
    u.sum().backward()
    np.testing.assert_array_equal(t.grad, np.full(3, 2.0))


@pytest.mark.parametrize("name", ["reshape", "transpose 1-d", "real", "ravel", "squeeze",
                                  "broadcast_to", "moveaxis", "atleast_1d", "flip of nothing"])
def test_arrays_and_traced_values_come_back_as_they_are(name):
    f, shape = IDENTITIES[name]
    a = RNG.normal(size=shape)
    assert f(a) is a                        # NumPy-like: no copy where nothing changes
    seen = []

    def traced(x):
        seen.append(f(x) is x)              # a tracer is immutable: no op is needed
        return tnp.sum(f(x) ** 2)

    assert np.allclose(tnp.grad(traced)(a), 2 * a)
    assert np.allclose(tnp.jit(tnp.grad(traced))(a), 2 * a)
    assert seen and all(seen)


def test_asarray_of_a_tensor_is_the_tensor():
    t = _leaf((3,))
    assert tnp.asarray(t) is t and tnp.array(t, copy=False) is t
    assert tnp.asarray(t, dtype=t.dtype) is t
    assert tnp.array(t) is not t and tnp.asarray(t, copy=True) is not t


def test_internal_same_shape_steps_record_no_extra_op():
    """t[1:3] (a slice, then a reshape to the slice's own shape) and take of a 1-d t record
    one op, as before: the package's own calls of reshape stay free."""
    t = _leaf((4,))
    for u in (t[1:3], tnp.take(t, np.array([0, 2])), t[np.array([1, 2])]):
        # the op that made u has only the leaf t as input (inputs of a second op on top of
        # the first would be the first's record, which has a .trace)
        assert all(getattr(i, "trace", None) is None for i in u._trace.inputs)
    assert not all(getattr(i, "trace", None) is None
                   for i in tnp.reshape(t[1:3], (2,))._trace.inputs)   # (the check can fail)


# --- 2. functions that read values give a Tensor Tensors ---------------------------------


READERS = {
    "nonzero": lambda x: tnp.nonzero(x),
    "argwhere": lambda x: tnp.argwhere(x),
    "flatnonzero": lambda x: tnp.flatnonzero(x),
    "count_nonzero": lambda x: tnp.count_nonzero(x),
    "count_nonzero axis": lambda x: tnp.count_nonzero(x, axis=0),
    "isneginf": lambda x: tnp.isneginf(x),
    "isposinf": lambda x: tnp.isposinf(x),
}
VALUES = np.array([[1.0, 0.0, -np.inf], [np.inf, 0.0, 2.0]])


@pytest.mark.parametrize("name", list(READERS))
def test_readers_give_a_tensor_tensors_without_grad(name):
    f = READERS[name]
    expected = f(VALUES)
    got = f(tnp.tensor(VALUES, requires_grad=True))
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert type(g) is Tensor and not g.requires_grad
        assert g.dtype == np.asarray(e).dtype and np.array_equal(g.data, e)
    for e in expected:                        # NumPy in, NumPy out
        assert isinstance(e, (np.ndarray, np.integer))


def test_bitwise_count_gives_a_tensor_a_tensor():
    values = np.array([3, 7, 0], dtype=np.int64)
    got = tnp.bitwise_count(tnp.tensor(values))
    assert type(got) is Tensor and np.array_equal(got.data, np.bitwise_count(values))
    assert type(tnp.bitwise_count(values)) is np.ndarray


@pytest.mark.parametrize("name", ["nonzero", "argwhere", "flatnonzero"])
def test_readers_whose_shapes_depend_on_the_values_refuse_under_jit_and_vmap(name):
    f = READERS[name]
    with pytest.raises(ConcretizationError):
        tnp.jit(f)(VALUES)
    with pytest.raises(ConcretizationError):
        tnp.vmap(f)(VALUES)


@pytest.mark.parametrize("name", ["count_nonzero", "count_nonzero axis", "isneginf", "isposinf"])
def test_readers_whose_shapes_are_static_trace_under_jit_and_vmap(name):
    f = READERS[name]
    np.testing.assert_array_equal(tnp.jit(f)(VALUES), f(VALUES))
    np.testing.assert_array_equal(tnp.vmap(f)(VALUES), [f(row) for row in VALUES])


def test_a_count_read_under_grad_is_a_constant():
    grad = tnp.grad(lambda x: (x * tnp.count_nonzero(x)).sum())(np.array([1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(grad, [2.0, 2.0, 2.0])


def test_readers_of_a_tensor_on_torch_data_give_tensors_on_torch_data():
    torch = pytest.importorskip("torch")
    x = tnp.tensor(torch.from_numpy(VALUES))
    for name, f in READERS.items():
        got, want = f(x), f(VALUES)
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            assert type(g) is Tensor and isinstance(g.data, torch.Tensor), name
            np.testing.assert_array_equal(g.data.numpy(), w, err_msg=name)
    raw = tnp.nonzero(torch.from_numpy(VALUES))        # a torch tensor in: torch tensors out
    assert all(type(r) is torch.Tensor for r in raw)
