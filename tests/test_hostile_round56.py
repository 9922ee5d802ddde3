"""Hostile round 56, my own finds: cases left by earlier rounds and fixed here."""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp


# Was wrong: nanmean/nanvar/nanstd of float16 summed in float16, so 10⁵ ones (one NaN among
# them) gave NaN (inf / inf); mean already summed in float32 (NumPy gives inf, JAX 1.0 and 0).
@pytest.mark.parametrize("name, want", [("nanmean", 1.0), ("nanvar", 0.0), ("nanstd", 0.0)])
def test_nan_reductions_of_many_float16_values_accumulate_in_float32(name, want):
    x = np.ones(100_000, np.float16)
    x[3] = np.nan
    got = getattr(tnp, name)(x)
    assert got.dtype == np.float16 and float(got) == want
    small = np.array([1.0, 2.0, np.nan], np.float16)
    grad = tnp.grad(getattr(tnp, name))(small) if name != "nanstd" else None
    if grad is not None:
        assert grad.dtype == np.float16
        want_grad = {"nanmean": [0.5, 0.5, 0.0], "nanvar": [-0.5, 0.5, 0.0]}[name]
        assert np.array_equal(grad, np.array(want_grad, np.float16))


X = np.array(2.0)


# Was wrong: jit compared the length of a closed-over list, tuple or dict only when it held
# more than numbers, so a coefficient appended to a list of numbers (or a tuple of them
# rebound to a longer one) gave the old polynomial, silently.
def test_a_coefficient_appended_to_a_closed_over_list_of_numbers_traces_again():
    coefficients = [1.0, 2.0]
    poly = tnp.jit(lambda x: sum(k * x ** i for i, k in enumerate(coefficients)))
    assert float(poly(X)) == 5.0
    coefficients.append(3.0)
    assert float(poly(X)) == 17.0
    coefficients[:] = [1.0]
    assert float(poly(X)) == 1.0


COEFFICIENTS = (1.0, 2.0)
WEIGHTS = {"a": 1.0}


def test_a_tuple_or_dict_of_numbers_rebound_or_grown_traces_again():
    global COEFFICIENTS
    poly = tnp.jit(lambda x: sum(k * x ** i for i, k in enumerate(COEFFICIENTS)))
    total = tnp.jit(lambda x: sum(w * x for w in WEIGHTS.values()))
    assert float(poly(X)) == 5.0 and float(total(X)) == 2.0
    COEFFICIENTS = (1.0, 2.0, 3.0)
    WEIGHTS["b"] = 10.0
    assert float(poly(X)) == 17.0 and float(total(X)) == 22.0
    COEFFICIENTS = (1.0, 2.0)


def test_a_log_two_jitted_functions_append_to_while_traced_still_traces_once_each():
    log = []
    f = tnp.jit(lambda x: log.append(1) or x * 2.0)
    g = tnp.jit(lambda x: log.append(1) or x * 3.0)
    for _ in range(3):
        assert float(f(X)) == 4.0 and float(g(X)) == 6.0
    assert len(log) == 2


# Was wrong: copy.deepcopy of a leaf dropped its .grad (PyTorch's deepcopy keeps a copy).
def test_deepcopy_of_a_leaf_keeps_a_copy_of_its_grad():
    import copy

    x = tnp.tensor([1.0, 2.0], requires_grad=True)
    assert copy.deepcopy(x).grad is None
    tnp.sum(x * x).backward()
    y = copy.deepcopy(x)
    assert np.array_equal(y.grad, [2.0, 4.0]) and not np.shares_memory(y.grad, x.grad)
    tnp.sum(y * 3.0).backward()                        # y's own grad accumulates alone
    assert np.array_equal(y.grad, [5.0, 7.0]) and np.array_equal(x.grad, [2.0, 4.0])


# Was wrong: ravel_pytree of a leaf that holds no numbers (an iterator passed where a list
# was meant, a string, an object) returned an object or string vector, silently.
@pytest.mark.parametrize("tree", [iter([np.ones(2)]), "abc", (np.ones(2), object())],
                         ids=["iterator", "string", "object"])
def test_ravel_pytree_of_a_leaf_that_holds_no_numbers_is_refused(tree):
    from primitives.tensor.errors import TensorTypeError

    with pytest.raises(TensorTypeError, match="ravel_pytree: leaf"):
        tnp.ravel_pytree(tree)
    flat, unravel = tnp.ravel_pytree((np.ones(2), 3.0))   # still usable
    assert flat.tolist() == [1.0, 1.0, 3.0]


# Was wrong: tnp.at(a)[key].get() of a plain NumPy array returned NumPy's view for a basic
# index (a slice, an ellipsis), so writing into the result wrote into a; JAX's is new.
@pytest.mark.parametrize("key", [slice(None), (Ellipsis,), slice(1, 3)], ids=["all", "...", "1:3"])
def test_at_get_of_a_numpy_array_is_a_new_array(key):
    a = np.arange(4.0)
    got = tnp.at(a)[key].get()
    assert np.array_equal(got, a[key]) and not np.shares_memory(got, a)
    got[...] = -1.0
    assert np.array_equal(a, np.arange(4.0))
