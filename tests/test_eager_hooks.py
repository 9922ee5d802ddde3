"""``try_backward``'s and ``try_backward_recorded``'s ``hooks``, in tidu's own terms (the
scalar primitive set): each hooked key's hook runs once, on its complete cotangent, before
that cotangent flows on; its result replaces the cotangent. Checked against hand-derived
derivatives, with the fused plans (``ScalarExecutor``) and an executor that runs each
node's transpose (``MinimalExecutor``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from primitives import tensor as tnp
from primitives.scalar import ScalarExecutor, ScalarOp
from primitives.tensor.eager.frontend import EXECUTOR
from tidu.eager import Recorder, try_backward, try_backward_recorded

from test_eager_backward import EXECUTOR_IDS, EXECUTORS, close, leaf, record_primitive


def chain(recorder: Recorder, x0: float = 0.7):
    """x -> s = sin x -> p = s * x -> y = p * s, with the keys' records."""
    x = leaf(recorder, x0)
    [s] = record_primitive(recorder, ScalarOp.SIN, [x])
    [p] = record_primitive(recorder, ScalarOp.MUL, [s, x])
    [y] = record_primitive(recorder, ScalarOp.MUL, [p, s])
    return x, s, p, y


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_intermediate_hook_gets_the_complete_cotangent_and_scales_what_flows_on(make_executor):
    recorder = Recorder()
    x, s, p, y = chain(recorder)
    seen = []

    def times_ten(ct):
        seen.append(ct)
        return 10.0 * ct

    grads = try_backward(y.key, y.trace, 1.0, make_executor(), hooks={s.key: times_ten})
    sx, cx, x0 = math.sin(0.7), math.cos(0.7), 0.7
    # y = s^2 x: dy/ds = 2 s x, summed over both uses of s (through p and directly)
    assert len(seen) == 1 and close(seen[0], 2 * sx * x0)
    assert close(grads[s.key], 10 * 2 * sx * x0)                 # the result holds the hooked
    # x gets the hooked cotangent through sin, plus its own direct use (s^2, not hooked)
    assert close(grads[x.key], 10 * 2 * sx * x0 * cx + sx * sx)
    # without hooks, the same walk gives the plain derivative
    plain = try_backward(y.key, y.trace, 1.0, make_executor())
    assert close(plain[x.key], 2 * sx * x0 * cx + sx * sx)


@pytest.mark.parametrize("make_executor", EXECUTORS, ids=EXECUTOR_IDS)
def test_leaf_root_and_order(make_executor):
    recorder = Recorder()
    x, s, p, y = chain(recorder)
    order = []

    def note(name, factor):
        return lambda ct: order.append(name) or factor * ct

    hooks = {x.key: note("x", 3.0), y.key: note("y", 2.0), p.key: note("p", 1.0)}
    grads = try_backward(y.key, y.trace, 1.0, make_executor(), hooks=hooks)
    assert order == ["y", "p", "x"]                 # consumers first, the leaf last
    assert grads[y.key] == 2.0                      # the seed, hooked
    plain = try_backward(y.key, y.trace, 1.0, make_executor())
    assert close(grads[x.key], 3.0 * 2.0 * plain[x.key])


def test_none_keeps_the_cotangent_and_keep_limits_leaf_hooks():
    recorder = Recorder()
    x, s, p, y = chain(recorder)
    calls = []
    hooks = {s.key: lambda ct: calls.append("s"), x.key: lambda ct: calls.append("x")}
    grads = try_backward(y.key, y.trace, 1.0, ScalarExecutor(), keep={s.key}, hooks=hooks)
    plain = try_backward(y.key, y.trace, 1.0, ScalarExecutor(), keep={s.key})
    assert grads == plain and set(grads) == {s.key}
    assert calls == ["s"]                           # a leaf outside keep: no hook


def test_a_key_reached_with_a_zero_cotangent_passes_none():
    # the tensor set's sign gives no cotangent (a zero) where the scalar set's gives 0.0:
    # y = sum(sign(h)) with h = x * x reaches h with a zero cotangent
    x = tnp.tensor(np.array([1.5, -2.0]), requires_grad=True)
    h = x * x
    y = tnp.sum(tnp.sign(h))
    seen = []
    zeros: set = set()
    grads = try_backward(y.key, y.grad_fn, np.ones(()), EXECUTOR, zeros=zeros,
                         hooks={h.key: lambda ct: seen.append(ct) or np.ones(2)})
    assert seen == [None]
    np.testing.assert_array_equal(grads[x.key], 2 * x.data)   # the hook's 1 flows on to x
    assert zeros == set()                                      # nothing left at zero
    # returning None leaves it at zero
    zeros = set()
    grads = try_backward(y.key, y.grad_fn, np.ones(()), EXECUTOR, zeros=zeros,
                         hooks={h.key: lambda ct: None})
    assert x.key not in grads and zeros == {x.key, h.key}


def test_output_without_trace_runs_its_own_hook():
    recorder = Recorder()
    x = leaf(recorder, 2.0)
    assert try_backward(x.key, None, 1.0, ScalarExecutor(),
                        hooks={x.key: lambda ct: 5 * ct}) == {x.key: 5.0}


def test_recorded_backward_hooks_get_records_and_their_work_is_differentiated():
    # y = sin(x)^2; the hook on s = sin x multiplies its cotangent by s itself (a record with
    # history): dy/dx becomes (2 s) * s * cos x = 2 s^2 cos x, whose derivative needs the
    # hook's product recorded
    recorder = Recorder()
    x = leaf(recorder, 0.4)
    [s] = record_primitive(recorder, ScalarOp.SIN, [x])
    [y] = record_primitive(recorder, ScalarOp.MUL, [s, s])

    def times_s(ct):
        [product] = record_primitive(recorder, ScalarOp.MUL, [ct, s])
        return product

    dx = try_backward_recorded(y.key, y.trace, 1.0, ScalarExecutor(), recorder,
                               hooks={s.key: times_s})[x.key]
    sx, cx = math.sin(0.4), math.cos(0.4)
    assert close(dx.data, 2 * sx * sx * cx)
    d2x = try_backward(dx.key, dx.trace, 1.0, ScalarExecutor())[x.key]
    assert close(d2x, 4 * sx * cx * cx - 2 * sx ** 3)          # d/dx of 2 sin^2 cos


def test_multi_output_node_hooks_each_output():
    recorder = Recorder()
    x = leaf(recorder, 0.3)
    [s, c] = record_primitive(recorder, ScalarOp.SINCOS, [x])
    [y] = record_primitive(recorder, ScalarOp.MUL, [s, c])
    calls = []
    hooks = {s.key: lambda ct: calls.append("s") or 2 * ct,
             c.key: lambda ct: calls.append("c") or 3 * ct}
    grads = try_backward(y.key, y.trace, 1.0, ScalarExecutor(), hooks=hooks)
    sx, cx = math.sin(0.3), math.cos(0.3)
    assert sorted(calls) == ["c", "s"]
    assert close(grads[x.key], 2 * cx * cx - 3 * sx * sx)
