"""``grad`` without ``jit`` reuses a program's derivative graphs for every program of the
same structure (``derivatives_of``), and never where that could go stale."""

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.transforms import functional


@pytest.fixture
def linearizations(monkeypatch):
    """How many times ``tidu.linearize`` runs."""
    calls = []
    real = functional.linearize_graph

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(functional, "linearize_graph", counting)
    monkeypatch.setattr(functional, "_DERIVATIVES", {})
    return calls


def test_a_program_traced_again_reuses_its_derivatives_and_reads_new_values(linearizations):
    w = np.array([0.5, -1.0, 2.0])

    def loss(x):
        return tnp.sum(tnp.sin(x * w) * x)

    g = tnp.grad(loss)
    for step in range(4):
        x = np.linspace(-1.0, 1.0, 3) + step
        w[:] = w + 0.25                           # a closed-over array, changed in place
        expected = np.sin(x * w) + x * np.cos(x * w) * w
        np.testing.assert_allclose(g(x), expected, rtol=1e-14)
    assert len(linearizations) == 1


def test_python_control_flow_gives_each_structure_its_own_derivatives(linearizations):
    def f(x):
        return tnp.sum(tnp.sin(x)) if tnp.sum(x) > 0 else tnp.sum(tnp.cos(x))

    g = tnp.grad(f)
    for x in (np.ones(2), -np.ones(2), 2 * np.ones(2), -2 * np.ones(2)):
        expected = np.cos(x) if x.sum() > 0 else -np.sin(x)
        np.testing.assert_allclose(g(x), expected, rtol=1e-14)
    assert len(linearizations) == 2


def test_a_dead_value_of_the_first_trace_is_not_needed_by_later_ones(linearizations):
    # the second call, which compiles the shared program, computes cos(x) unused: the key
    # sin's derivative reads too. Later traces without it must not be asked for it.
    def f(x, first):
        if first:
            tnp.cos(x)
        return tnp.sum(tnp.sin(x))

    g = tnp.grad(f)
    x = np.array([0.3, 0.7])
    for first in (False, True, False, True, False):
        np.testing.assert_allclose(g(x, first), np.cos(x), rtol=1e-15)
        x = x + 1.0


def test_a_dead_constant_of_the_first_trace_is_not_needed_by_later_ones(linearizations):
    def f(x, first):
        if first:
            x * np.full(2, 3.0)                  # dead, on a constant the trace lifts
        return tnp.sum(tnp.sin(x))

    g = tnp.grad(f)
    x = np.array([0.3, 0.7])
    for first in (True, False, True, False):     # the second call compiles
        np.testing.assert_allclose(g(x, first), np.cos(x), rtol=1e-15)


def test_shapes_in_one_structure(linearizations):
    """An elementwise program has one structure for every shape: its derivatives serve all."""
    g = tnp.grad(lambda x: tnp.sum(tnp.exp(x) * x))
    for n in (1, 3, 5, 3):
        x = np.linspace(0.0, 1.0, n)
        np.testing.assert_allclose(g(x), np.exp(x) * (1 + x), rtol=1e-14)


def test_custom_rules_are_traced_each_time(linearizations):
    scale = np.array([2.0, 2.0])

    @tnp.custom_vjp
    def h(x):
        return x * 1.0
    h.defvjp(lambda x: (h(x), ()), lambda res, ct: (ct * scale,))
    g = tnp.grad(lambda x: tnp.sum(h(x)))
    np.testing.assert_array_equal(g(np.ones(2)), [2.0, 2.0])
    scale[:] = 3.0
    np.testing.assert_array_equal(g(np.ones(2)), [3.0, 3.0])
    assert len(linearizations) == 2
    assert not functional._DERIVATIVES


def test_reused_results_are_fresh_and_tensors_still_get_derivatives(linearizations):
    g = tnp.grad(lambda x: tnp.sum(x * x))
    x = np.arange(3.0)
    first, second = g(x), g(x)
    assert not np.shares_memory(first, second) and not np.shares_memory(second, x)
    t = tnp.tensor(np.arange(3.0), requires_grad=True)
    tnp.sum(g(t) * t).backward()                  # d/dt sum(2t * t) = 4t
    np.testing.assert_array_equal(t.grad, 4 * np.arange(3.0))
    hess = tnp.hessian(lambda x: tnp.sum(tnp.sin(x) * x))
    for x in (np.array([0.1, 0.2]), np.array([1.0, -1.0])):
        np.testing.assert_allclose(hess(x), np.diag(2 * np.cos(x) - x * np.sin(x)),
                                   rtol=1e-14, atol=1e-15)


def test_kept_programs_are_bounded_in_number_and_operations(monkeypatch, linearizations):
    monkeypatch.setattr(functional, "_DERIVATIVES_KEPT", 3)
    monkeypatch.setattr(functional, "_kept_ops", [0])
    for k in range(6):
        g = tnp.grad(lambda x, k=k: tnp.sum(x ** (k + 2)))
        np.testing.assert_allclose(g(np.array([2.0])), [(k + 2) * 2.0 ** (k + 1)])
    assert len(functional._DERIVATIVES) == 3
    kept = sum(len(d.graph.operation_keys) for d in functional._DERIVATIVES.values())
    assert functional._kept_ops[0] == kept
    monkeypatch.setattr(functional, "_DERIVATIVES_MAX_OPS", kept)
    g = tnp.grad(lambda x: tnp.sum(tnp.sin(x) * tnp.cos(x) * x))     # more than fits now
    np.testing.assert_allclose(g(np.array([0.5])), [np.cos(1.0) * 0.5 + np.sin(1.0) / 2],
                               rtol=1e-14)
    assert functional._kept_ops[0] <= kept
    assert functional._kept_ops[0] == sum(len(d.graph.operation_keys)
                                          for d in functional._DERIVATIVES.values())


def test_threads_share_one_set_of_derivatives(monkeypatch):
    import sys
    import threading

    monkeypatch.setattr(functional, "_DERIVATIVES", {})
    errors = []

    def work(g, n, results, barrier):
        try:
            barrier.wait()
            for step in range(3):          # the first call makes the graphs, the next compile
                x = np.full(3, 0.1 * (n + step))
                results[n] = (x, g(x))
        except Exception as error:          # noqa: BLE001 (reported below)
            errors.append(error)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for power in range(2, 8):           # a new structure each round: all threads start it
            g = tnp.grad(lambda x, power=power: tnp.sum(tnp.tanh(x) * x ** power))
            results, barrier = [None] * 8, threading.Barrier(8)
            threads = [threading.Thread(target=work, args=(g, n, results, barrier))
                       for n in range(8)]
            [t.start() for t in threads]
            [t.join() for t in threads]
            assert not errors, errors[0]
            for x, got in results:
                expected = x ** power / np.cosh(x) ** 2 + power * np.tanh(x) * x ** (power - 1)
                np.testing.assert_allclose(got, expected, rtol=1e-13)
    finally:
        sys.setswitchinterval(old)


def test_jvp_compiles_its_tangent_program_from_the_second_use_same_bits(monkeypatch,
                                                                       linearizations):
    compiled_runs = []
    real_tangents = functional.Derivatives.tangents

    def op_by_op(self, values):
        keys = [k for k in self.linear.tangent_output_keys if k is not None]
        return functional.run_graph(keys, values)

    def spied(self, values):
        compiled_runs.append(self.uses >= 2)
        return real_tangents(self, values)

    w = np.array([0.5, -1.0, 2.0])

    def f(x):
        return tnp.tanh(x * w) * tnp.sum(x * x), tnp.exp(x[:2])

    t = np.array([1.0, 0.25, -0.5])
    for step in range(4):
        x = np.linspace(-1.0, 1.0, 3) + 0.3 * step
        w[:] = w + 0.1                              # read at each call, compiled or not
        monkeypatch.setattr(functional.Derivatives, "tangents", spied)
        out, tangent = tnp.jvp(f, (x,), (t,))
        monkeypatch.setattr(functional.Derivatives, "tangents", op_by_op)
        want_out, want = tnp.jvp(f, (x,), (t,))
        for got, expected in zip(tangent, want):
            assert got.tobytes() == expected.tobytes()
        h = 1e-6
        numeric = [(a - b) / (2 * h) for a, b in zip(f(x + h * t), f(x - h * t))]
        np.testing.assert_allclose(tangent[0], numeric[0], rtol=1e-6)
        np.testing.assert_allclose(tangent[1], numeric[1], rtol=1e-6)
        assert not np.shares_memory(tangent[0], out[0])
    assert compiled_runs == [False, True, True, True]
    assert len(linearizations) == 1
