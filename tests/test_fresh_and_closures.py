"""Python's closure rule for jit, fresh results from every transform, copies of traced values
and tensors, and jit's cache under threads (issue 21, items 3, 4, 5 and 7).

A jitted function returns what ``f`` returns when called now: arrays it reads from its
closure, its globals or an object's attributes are read at each call. No result of a
transform aliases an argument, a constant or another result.
"""

from __future__ import annotations

import copy
import pickle
import sys
import threading

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import FunctionalError
from tidu import TiduError

X = np.array([0.3, -0.7, 1.1])
GLOBAL_W = np.array([1.0, 2.0])


# --- one closure rule: Python's -----------------------------------------------------------


def test_closed_over_array_written_in_place_is_read_at_each_call():
    V = np.array([1.0, 2.0])
    f = tnp.jit(lambda v: v * V + tnp.sum(V))
    np.testing.assert_array_equal(f(np.ones(2)), [4.0, 5.0])
    V[:] = 10
    np.testing.assert_array_equal(f(np.ones(2)), [30.0, 30.0])      # Python's answer


def test_rebound_closure_variable_same_shape_and_new_shape():
    V = np.array([1.0, 2.0])
    f = tnp.jit(lambda v: v * V + tnp.sum(V))
    f(np.ones(2))
    V = np.array([5.0, 6.0])                                         # noqa: F841 (read by f)
    np.testing.assert_array_equal(f(np.ones(2)), [16.0, 17.0])
    V = np.array([5.0, 6.0, 7.0])                                    # noqa: F841
    np.testing.assert_array_equal(f(np.ones(3)), [23.0, 24.0, 25.0])   # new shape: retraced


def test_global_read_at_each_call():
    global GLOBAL_W
    f = tnp.jit(lambda v: tnp.sum(v * GLOBAL_W))
    saved = GLOBAL_W
    try:
        assert float(f(np.ones(2))) == 3.0
        GLOBAL_W = np.array([10.0, 10.0])
        assert float(f(np.ones(2))) == 20.0
        GLOBAL_W[0] = 0.0
        assert float(f(np.ones(2))) == 10.0
    finally:
        GLOBAL_W = saved


def test_attribute_of_a_bound_method_and_of_a_closed_over_object():
    class Model:
        def __init__(self):
            self.w = np.array([1.0, 2.0])

        def __call__(self, v):
            return tnp.sum(v * self.w)

    model = Model()
    f = tnp.jit(model)
    g = tnp.jit(lambda v: tnp.sum(v * model.w))
    h = tnp.jit(tnp.grad(model.__call__))
    assert float(f(np.ones(2))) == 3.0 and float(g(np.ones(2))) == 3.0
    model.w = np.array([3.0, 3.0])
    assert float(f(np.ones(2))) == 6.0 and float(g(np.ones(2))) == 6.0
    np.testing.assert_array_equal(h(np.ones(2)), [3.0, 3.0])
    model.w *= 2
    np.testing.assert_array_equal(h(np.ones(2)), [6.0, 6.0])


def test_numpy_computation_on_a_closed_over_array_retraces_when_it_changes():
    W = np.array([2.0])
    calls = []

    def f(v):
        calls.append(1)
        return v * (W * 2)                       # NumPy's own product: computed when traced

    jf = tnp.jit(f)
    np.testing.assert_array_equal(jf(np.ones(1)), [4.0])
    np.testing.assert_array_equal(jf(np.ones(1)), [4.0])
    assert len(calls) == 1
    W[:] = 3
    np.testing.assert_array_equal(jf(np.ones(1)), [6.0])
    assert len(calls) == 2


def test_numpy_computation_on_a_closed_over_array_sees_every_bit_change():
    """Read by NumPy at trace time, an array is compared bit for bit: a 0.0 that becomes
    -0.0 changes ``1 / s`` (``==`` would call them equal and return the stale ``inf``); a
    NaN written over itself changes nothing, so no new trace."""
    s = np.array([0.0, np.nan, 2.0])
    calls = []

    def f(v):
        calls.append(1)
        return v * (1.0 / s)                     # NumPy's own division: computed when traced

    jf = tnp.jit(f)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(jf(np.ones(3)), [np.inf, np.nan, 0.5])
        s[1] = np.nan
        np.testing.assert_array_equal(jf(np.ones(3)), [np.inf, np.nan, 0.5])
        assert len(calls) == 1
        s[0] = -0.0
        np.testing.assert_array_equal(jf(np.ones(3)), [-np.inf, np.nan, 0.5])
    assert len(calls) == 2


def test_a_bigger_closed_over_array_is_compared_bit_for_bit_too():
    """Past 64 KiB a guard compares an array's bits as integers (no copy to bytes)."""
    s = np.zeros(3 << 13)                        # 192 KiB, odd multiple of 8 bytes
    calls = []

    def f(v):
        calls.append(1)
        return v * (1.0 / s[:3])                 # NumPy's own division: computed when traced

    jf = tnp.jit(f)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(jf(np.ones(3)), [np.inf] * 3)
        s[-1] = np.nan
        s[-1] = np.nan                           # the same bits again
        np.testing.assert_array_equal(jf(np.ones(3)), [np.inf] * 3)
        s[1] = -0.0
        np.testing.assert_array_equal(jf(np.ones(3)), [np.inf, -np.inf, np.inf])
    assert len(calls) == 3


def test_closure_through_grad_and_dict_of_params():
    params = {"w": np.array([1.0, -1.0]), "b": np.array(0.5)}

    def loss(x):
        return tnp.sum(tnp.tanh(x * params["w"] + params["b"]))

    step = tnp.jit(tnp.grad(loss))
    for _ in range(3):
        expected = tnp.grad(loss)(X[:2])
        np.testing.assert_allclose(step(X[:2]), expected, rtol=1e-14)
        params["w"] = params["w"] * 1.5
        params["b"] -= 0.25


def test_in_place_update_loop_compiles_once(monkeypatch):
    """``w`` written at each step: ``loss`` traces again (NumPy itself might have read ``w``
    while it traced), gives the same graph, and the one compiled program runs every step."""
    jit_module = sys.modules["primitives.tensor.transforms.jit"]
    compiled, compiles = jit_module.compiled, []
    monkeypatch.setattr(jit_module, "compiled", lambda graph: compiles.append(1) or compiled(graph))
    w = np.array([1.0, 2.0, 3.0])
    calls = []

    def loss(x):
        calls.append(1)
        return tnp.sum((x * w) ** 2)

    step = tnp.jit(tnp.grad(loss))
    for _ in range(5):
        g = step(X)
        np.testing.assert_allclose(g, 2 * X * w * w)
        w -= 0.1 * g[:3]
    assert len(calls) == 5 and len(compiles) == 1


# --- fresh results ------------------------------------------------------------------------


def _shares(a, b) -> bool:
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.shares_memory(a, b)


@pytest.mark.parametrize("name, run", [
    ("jit identity", lambda a, C: [tnp.jit(lambda v: v)(a)]),
    ("jit view", lambda a, C: [tnp.jit(lambda v: v[1:])(a)]),
    ("jit 0-d view", lambda a, C: [tnp.jit(lambda v: v[0])(a)]),
    ("jit constant", lambda a, C: [tnp.jit(lambda v: C)(a)]),
    ("jit pair", lambda a, C: list(tnp.jit(lambda v: (v * 2, v * 2))(a))),
    ("jit grad linear", lambda a, C: [tnp.jit(tnp.grad(lambda v: tnp.sum(v * C)))(a)]),
    ("grad linear", lambda a, C: [tnp.grad(lambda v: tnp.sum(v * C))(a)]),
    ("grad twice", lambda a, C: list(tnp.grad(lambda v, w: tnp.sum(v + w), (0, 1))(a, C))),
    ("vjp identity", lambda a, C: list(tnp.vjp(lambda v: v, a)[1](C))),
    ("vjp pair", lambda a, C: list(tnp.vjp(lambda v: (v, v), a)[1]((C, np.ones(3))))),
    ("jvp identity", lambda a, C: list(tnp.jvp(lambda v: v, (a,), (C,)))),
    ("vmap identity", lambda a, C: [tnp.vmap(lambda v: v)(a)]),
    ("vmap constant", lambda a, C: [tnp.vmap(lambda v: C, out_axes=None)(a)]),
    ("jacrev identity", lambda a, C: [tnp.jacrev(lambda v: v)(a)]),
    ("hessian", lambda a, C: [tnp.hessian(lambda v: tnp.sum(v * C))(a)]),
])
def test_results_share_no_memory(name, run):
    a, C = np.arange(1.0, 4.0), np.array([1.0, 2.0, 3.0])
    before = a.copy(), C.copy()
    outs = run(a, C)
    for i, out in enumerate(outs):
        for other in [a, C] + outs[:i]:
            assert not _shares(out, other), name
    for out in outs:                              # writing into results changes nothing else
        if isinstance(out, np.ndarray):
            out[...] = -99
    np.testing.assert_array_equal(a, before[0])
    np.testing.assert_array_equal(C, before[1])


def test_a_value_returned_twice_gets_both_cotangents():
    a = np.arange(3.0)
    (back,) = tnp.vjp(lambda v: (v, 2 * v, v), a)[1]((np.ones(3), np.ones(3), np.full(3, 5.0)))
    np.testing.assert_array_equal(back, np.full(3, 8.0))


def test_writing_a_result_does_not_change_the_next_call():
    C = np.array([1.0, 2.0, 3.0])
    step = tnp.jit(tnp.grad(lambda v: tnp.sum(v * C)))
    g = step(X)
    g *= -0.1
    np.testing.assert_array_equal(step(X), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(C, [1.0, 2.0, 3.0])
    _, vjp_fn = tnp.vjp(lambda v: v * C, X)
    first = vjp_fn(np.ones(3))[0]
    first[:] = 0
    np.testing.assert_array_equal(vjp_fn(np.ones(3))[0], C)


# --- copies -------------------------------------------------------------------------------


def test_copies_of_traced_values_keep_their_derivative():
    for copier in (copy.copy, copy.deepcopy, lambda v: v.copy(), tnp.copy):
        np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(copier(v) * v))(X), 2 * X)
        np.testing.assert_allclose(tnp.jit(tnp.grad(lambda v: tnp.sum(copier(v) * v)))(X),
                                   2 * X)
    nested = tnp.grad(lambda v: tnp.sum(copy.deepcopy({"a": [v, 2 * v]})["a"][1] * v))(X)
    np.testing.assert_allclose(nested, 4 * X)


def test_pickling_a_traced_value_raises():
    with pytest.raises(FunctionalError, match="pickling a value traced by grad"):
        tnp.grad(lambda v: (pickle.dumps(v), tnp.sum(v))[1])(X)
    with pytest.raises(TiduError, match="pickling"):
        tnp.jit(lambda v: (pickle.dumps(v * 2), v)[1])(X)


def test_copies_of_tensors_keep_history_or_become_leaves():
    t = tnp.tensor(X, requires_grad=True)
    y = t * t
    for copier in (copy.copy, copy.deepcopy, lambda v: v.copy()):
        z = copier(y)
        np.testing.assert_allclose(tnp.sum(3 * z).backward().grad(t), 6 * X)
    leaf = copy.deepcopy(t)
    assert leaf.requires_grad and leaf is not t and not np.shares_memory(leaf.data, t.data)
    assert pickle.loads(pickle.dumps(y)).requires_grad          # a pickle is data (PyTorch's)
    restored = pickle.loads(pickle.dumps(t))
    assert restored.requires_grad
    np.testing.assert_array_equal(restored.data, X)


def test_matrix_transpose_property():
    m = np.arange(6.0).reshape(1, 2, 3)
    np.testing.assert_array_equal(tnp.jit(lambda v: v.mT)(m), np.swapaxes(m, -1, -2))
    t = tnp.tensor(m, requires_grad=True)
    np.testing.assert_array_equal(t.mT.data, np.swapaxes(m, -1, -2))
    with pytest.raises(TiduError, match="at least 2 dimensions"):
        tnp.tensor(np.ones(3)).mT


# --- threads ------------------------------------------------------------------------------


def test_first_calls_of_a_new_signature_from_eight_threads():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for round_ in range(3):
            C = np.arange(1.0, 4.0) + round_
            step = tnp.jit(tnp.grad(lambda v, y: tnp.sum(v[y] * tnp.take(C, y))))
            barrier = threading.Barrier(8)
            results, errors = [None] * 8, []

            def work(n):
                try:
                    barrier.wait()
                    y = np.array([n % 3, (n + 1) % 3])
                    results[n] = (y, step(X, y))
                except Exception as error:              # noqa: BLE001 (reported below)
                    errors.append(error)

            threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert not errors, errors
            for y, g in results:
                expected = np.zeros(3)
                np.add.at(expected, y, C[y])
                np.testing.assert_array_equal(g, expected)
    finally:
        sys.setswitchinterval(old)


# --- the same rule for custom rules -------------------------------------------------------


@pytest.mark.parametrize("size", [2, 300_000], ids=["small", "big"])
def test_arrays_custom_rules_close_over_are_read_at_each_call(size):
    scale = np.ones(size)              # uniform: a small one would be stored as a literal

    @tnp.custom_jvp
    def f(x):
        return x * 1.0

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), t * tnp.sum(scale)

    @tnp.custom_vjp
    def g(x):
        return x * 1.0

    g.defvjp(lambda x: (g(x), ()), lambda res, ct: (ct * tnp.sum(scale),))
    x = np.ones(2)
    for fn in (f, g):
        loss = tnp.grad(lambda v: tnp.sum(fn(v)))
        step = tnp.jit(loss)
        scale[:] = 1.0
        np.testing.assert_array_equal(step(x), [size, size])
        scale[:] = 2.0                                   # written in place
        np.testing.assert_array_equal(loss(x), [2 * size, 2 * size])
        np.testing.assert_array_equal(step(x), [2 * size, 2 * size])


def test_rebinding_what_a_custom_rule_reads():
    factor = np.array([1.0, 2.0])

    @tnp.custom_jvp
    def f(x):
        return x * 1.0

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), t * factor

    step = tnp.jit(tnp.grad(lambda v: tnp.sum(f(v))))
    np.testing.assert_array_equal(step(np.ones(2)), [1.0, 2.0])
    factor = np.array([5.0, 7.0])                        # noqa: F841 (read by the rule)
    np.testing.assert_array_equal(tnp.grad(lambda v: tnp.sum(f(v)))(np.ones(2)), [5.0, 7.0])
    np.testing.assert_array_equal(step(np.ones(2)), [5.0, 7.0])


def test_a_closed_over_number_rebound_traces_again():
    scale, calls = 2.0, []

    def f(v):
        calls.append(1)
        return v * scale

    jf = tnp.jit(f)
    np.testing.assert_array_equal(jf(np.ones(2)), [2.0, 2.0])
    np.testing.assert_array_equal(jf(np.ones(2)), [2.0, 2.0])
    assert len(calls) == 1
    scale = 3.0                                          # noqa: F841 (read by f)
    np.testing.assert_array_equal(jf(np.ones(2)), [3.0, 3.0])
    assert len(calls) == 2


def test_vjp_keeps_a_numbers_broadcast_constant_once():
    """``vjp`` owns copies of the constants ``f`` made; ``x * 2.0`` broadcasts the number to
    ``x``'s shape (a view of one value), which was copied in full: three such ops on a
    10⁶-float array held 23 MB more than the primal's own 8 MB copy."""
    import gc
    import tracemalloc

    from primitives.tensor.backends import owned_copy

    constant = np.broadcast_to(np.array(2.0), (1000, 1000))
    copy = owned_copy(constant)
    assert copy.base.size == 1 and not np.shares_memory(copy, constant)
    np.testing.assert_array_equal(copy, constant)
    x = np.ones(10**6)
    f = lambda x: x * 2.0 + 1.0 - 3.0                                  # noqa: E731
    tnp.vjp(f, x)                       # fills the buffer pool (kept for the next call)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out, vjp_fn = tnp.vjp(f, x)
        del out
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert held < 1.5 * x.nbytes, held
    np.testing.assert_array_equal(vjp_fn(np.ones(10**6))[0][:2], [2.0, 2.0])
