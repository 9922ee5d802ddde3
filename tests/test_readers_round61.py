"""Round 61: one rule for what NumPy's value readers give an eager ``Tensor``.

``tnp.count_nonzero(t)`` (creation's wrappers) and ``np.count_nonzero(t)`` (NumPy's
dispatch) now both end in ``dispatch.results_as_tensors``: a ``Tensor`` in gives
``Tensor``s out, without grad, in the tensor's library, 0-d results included (before,
``np.count_nonzero(t)`` was an ``np.int64`` and ``np.isclose`` of a 0-d tensor an
``np.bool_``, while tnp's were 0-d tensors). Python ``bool``s (``np.allclose``) stay.
"""

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.eager.frontend import Tensor
from primitives.tensor.core import array_below
from primitives.tensor.errors import ConcretizationError, TensorNotSupportedError

VALUES = np.array([0.0, 3.0, np.inf, -np.inf, -2.0])
INTEGERS = np.array([1, 3, 0, 7])

# (name, arguments built from the array x) for every reader both mechanisms give
READERS = [
    ("nonzero", lambda x: (x,)),
    ("argwhere", lambda x: (x,)),
    ("flatnonzero", lambda x: (x,)),
    ("count_nonzero", lambda x: (x,)),
    ("isposinf", lambda x: (x,)),
    ("isneginf", lambda x: (x,)),
    ("isclose", lambda x: (x, 3.0)),
    ("bitwise_count", lambda x: (x,)),
]


def _data(name: str, zero_d: bool) -> np.ndarray:
    data = INTEGERS if name == "bitwise_count" else VALUES
    return np.asarray(data[1]) if zero_d else data


def _as_list(result):
    return list(result) if isinstance(result, tuple) else [result]


def _same_type_and_values(result, expected_values, expected_types) -> None:
    results = _as_list(result)
    assert len(results) == len(expected_values)
    for r, e, kind in zip(results, expected_values, expected_types):
        assert type(r) is kind
        assert np.asarray(r).dtype == np.asarray(e).dtype
        assert np.asarray(r).shape == np.shape(e)
        np.testing.assert_array_equal(np.asarray(r), e)


@pytest.mark.parametrize("zero_d", [False, True], ids=["1-d", "0-d"])
@pytest.mark.parametrize("name, arguments", READERS, ids=[r[0] for r in READERS])
def test_tnp_and_numpys_reader_of_a_tensor_agree_0d_included(name, arguments, zero_d):
    data = _data(name, zero_d)
    if name == "nonzero" and zero_d:                     # NumPy refuses 0-d, both ways
        for fn in (tnp.nonzero, np.nonzero):
            with pytest.raises(ValueError):
                fn(tnp.tensor(data))
        return
    requires_grad = data.dtype.kind == "f"
    t = tnp.tensor(data, requires_grad=requires_grad)
    expected = getattr(np, name)(*arguments(data))
    for fn in (getattr(tnp, name), getattr(np, name)):
        result = fn(*arguments(t))
        _same_type_and_values(result, _as_list(expected), [Tensor] * len(_as_list(expected)))
        assert not any(r.requires_grad for r in _as_list(result))


@pytest.mark.parametrize("zero_d", [False, True], ids=["1-d", "0-d"])
@pytest.mark.parametrize("name, arguments", READERS, ids=[r[0] for r in READERS])
def test_numpy_in_gives_numpy_out_unchanged(name, arguments, zero_d):
    data = _data(name, zero_d)
    if name == "nonzero" and zero_d:
        return
    expected = getattr(np, name)(*arguments(data))
    kinds = [type(e) for e in _as_list(expected)]        # np.intp, np.bool_, ndarray
    _same_type_and_values(getattr(tnp, name)(*arguments(data)), _as_list(expected), kinds)


@pytest.mark.parametrize("call", [
    "f.count_nonzero(t, axis=0)", "f.count_nonzero(t, keepdims=True)",
    "f.count_nonzero(m, axis=1)", "f.isclose(t, t + 1e-12)", "f.isclose(s, 1.0)",
    "f.isposinf(s)", "f.isneginf(s)", "f.count_nonzero(s)",
])
def test_readers_with_options_and_0d_give_the_same_tensors(call):
    data = {"t": VALUES, "m": VALUES.reshape(1, -1), "s": np.asarray(1.0)}
    tensors = {k: tnp.tensor(v, requires_grad=True) for k, v in data.items()}
    expected = eval(call, {"f": np, **data})
    for namespace in (tnp, np):
        result = eval(call, {"f": namespace, **tensors})
        _same_type_and_values(result, [expected], [Tensor])


def test_0d_results_match_pytorchs():
    torch = pytest.importorskip("torch")
    t = tnp.tensor(VALUES, requires_grad=True)
    s = tnp.tensor(3.0, requires_grad=True)
    count, torch_count = np.count_nonzero(t), torch.count_nonzero(torch.tensor(VALUES))
    assert count.shape == tuple(torch_count.shape) == ()
    assert count.item() == torch_count.item() and count.dtype == np.int64
    close = np.isclose(s, 3.0)
    torch_close = torch.isclose(torch.tensor(3.0, dtype=torch.float64), torch.tensor(3.0,
                                dtype=torch.float64))
    assert close.shape == tuple(torch_close.shape) == () and close.item() is torch_close.item()
    # (Python bools where PyTorch gives them: allclose, equal)
    assert type(np.allclose(t, VALUES)) is type(torch.allclose(torch.tensor(1.0),
                                                                 torch.tensor(1.0))) is bool
    assert type(np.array_equal(t, VALUES)) is bool


@pytest.mark.parametrize("call", [
    "np.isnan(s)", "np.signbit(s)", "np.isfinite(s)", "np.gcd(i, 6)", "np.left_shift(i, 1)",
    "np.add.reduce(v)", "np.maximum.reduce(v)", "np.logical_and.reduce(v)",
])
def test_numpys_ufuncs_on_a_tensors_data_give_0d_tensors(call):
    # (they gave NumPy scalars: np.isnan(s) an np.bool_ where tnp.isnan(s) is a Tensor)
    data = {"s": np.asarray(2.0), "i": np.asarray(4), "v": np.array([1.0, 2.0])}
    tensors = {"s": tnp.tensor(2.0, requires_grad=True), "i": tnp.tensor(4),
               "v": tnp.tensor([1.0, 2.0])}
    expected = eval(call, {"np": np, **data})
    result = eval(call, {"np": np, **tensors})
    _same_type_and_values(result, [expected], [Tensor])
    assert not result.requires_grad


def test_tnp_and_numpys_predicates_agree_on_0d():
    s = tnp.tensor(np.nan, requires_grad=True)
    for name in ("isnan", "isinf", "isfinite", "signbit"):
        ours, numpys = getattr(tnp, name)(s), getattr(np, name)(s)
        assert type(ours) is type(numpys) is Tensor
        assert ours.shape == numpys.shape == () and ours.item() == numpys.item()


def test_results_stay_in_the_tensors_library():
    torch = pytest.importorskip("torch")
    t = tnp.tensor(torch.tensor([0.0, 3.0, float("inf")]), requires_grad=True)
    for result in (np.count_nonzero(t), tnp.count_nonzero(t), np.isposinf(t),
                   np.isclose(t[1], 3.0), tnp.isclose(t[1], 3.0), np.nonzero(t)[0],
                   np.isnan(t[0])):
        assert type(result) is Tensor and not result.requires_grad
        assert isinstance(array_below(result), torch.Tensor)


def test_an_array_given_as_out_is_returned_itself():
    # (np.isposinf(t, out=o) gave a new Tensor, not o, as NumPy and PyTorch return out)
    t = tnp.tensor([1.0, np.inf], requires_grad=True)
    for fn in (np.isposinf, tnp.isposinf, np.isnan):
        out = np.zeros(2, bool)
        assert fn(t, out=out) is out
    np.testing.assert_array_equal(out, [False, False])
    out = np.zeros(2, bool)
    np.isposinf(t, out=out)
    np.testing.assert_array_equal(out, [False, True])


def test_readers_under_jit_and_vmap_are_unchanged():
    x = np.array([[0.0, np.inf], [2.0, 3.0]])
    assert type(tnp.jit(tnp.count_nonzero)(x)) is np.ndarray      # a traced result: NumPy's
    assert tnp.jit(tnp.count_nonzero)(x) == np.count_nonzero(x)
    np.testing.assert_array_equal(tnp.vmap(tnp.count_nonzero)(x), [1, 2])
    np.testing.assert_array_equal(tnp.jit(tnp.isposinf)(x), np.isposinf(x))
    np.testing.assert_array_equal(tnp.vmap(lambda r: tnp.isclose(r, 2.0))(x),
                                  np.isclose(x, 2.0))
    with pytest.raises(ConcretizationError, match="count_nonzero"):
        tnp.jit(np.count_nonzero)(x)
    with pytest.raises(ConcretizationError, match="nonzero"):
        tnp.jit(tnp.flatnonzero)(x)


def test_no_float_result_of_a_tensor_with_grad_comes_back_without_it():
    # readers' results are integers or booleans; a ufunc method with a float result on a
    # tensor that requires grad raises rather than give a Tensor without grad
    t = tnp.tensor([1.0, 2.0], requires_grad=True)
    for reader in (np.count_nonzero, np.isposinf, np.flatnonzero, np.isnan):
        assert np.asarray(reader(t)).dtype.kind in "biu"
    for call in (np.add.reduce, np.maximum.accumulate, lambda v: np.add.outer(v, v)):
        with pytest.raises(TensorNotSupportedError, match="numpy"):
            call(t)
    y = np.sum(t * tnp.isclose(t, 1.0))         # a mask from a reader: a constant factor
    y.backward()
    np.testing.assert_array_equal(np.asarray(t.grad), [1.0, 0.0])
