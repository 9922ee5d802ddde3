"""Eight threads, each recording its own computation and running backward on it, all at once.

The threads share the process-wide state tidu keeps (the frontend's recorder,
interned keys, the cache of backward plans) and start together at a barrier;
each mixes primitive nodes, fresh parameterised ops (so plans are built
concurrently), a composite node and a multi-output op. Every gradient is
checked against its hand-derived value.
"""

from __future__ import annotations

import math
import sys
import threading

import pytest

from primitives.scalar import Pow, Scale, ScalarExecutor, ScalarOp
from primitives.scalar.eager import Scalar, apply, exp, sin, sincos
from tidu.eager import EagerInput, RecordedGraph, Recorder, try_backward
from tidu.graph import GraphBuilder, Input, Local, compiled

THREADS = 8
ROUNDS = 80


class ForwardExecutor(ScalarExecutor):
    """Overrides ``execute_forward``: every node goes through the hooks, from eight threads."""

    def execute_forward(self, graph, initial_data):
        return dict(zip(graph.output_keys, compiled(graph).run(initial_data)))


def close(a, b, rel=1e-11) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def frontend_case(i: int, r: int):
    """y = sin(x)**p * x + k*x + exp(w*x) + sincos(x)[1], with a thread- and round-specific p."""
    x0 = 0.2 + 0.05 * i + 0.003 * r
    w0 = 0.5 - 0.01 * r
    p = 2.0 + i + 0.25 * r                       # fresh Pow: a backward plan built by this thread
    k = float(i + 1)
    x = Scalar(x0, requires_grad=True)
    w = Scalar(w0, requires_grad=True)
    _, c = sincos(x)
    y = apply(Pow(p), sin(x)) * x + apply(Scale(k), x) + exp(w * x) + c
    executor = ForwardExecutor() if (i + r) % 2 else ScalarExecutor()
    grads = y.backward(executor=executor)
    want_x = (p * math.sin(x0) ** (p - 1) * math.cos(x0) * x0 + math.sin(x0) ** p + k
              + w0 * math.exp(w0 * x0) - math.sin(x0))
    want_w = x0 * math.exp(w0 * x0)
    return [(grads[x.key], want_x), (grads[w.key], want_w)], [x.key, w.key, y.key, c.key]


def low_level_case(i: int, r: int, recorder: Recorder):
    """f(a, b) = sin(a) * b + a as one node (retained or not), then z = f * a."""
    ka, kb = recorder.fresh_input_keys(2)
    builder = GraphBuilder()
    ia, ib = builder.add_input(ka), builder.add_input(kb)
    [s] = builder.add_operation(ScalarOp.SIN, [Local(ia)])
    [m] = builder.add_operation(ScalarOp.MUL, [Local(s), Local(ib)])
    [o] = builder.add_operation(ScalarOp.ADD, [Local(m), Local(ia)])
    builder.set_outputs([o])
    graph = builder.build()
    recorded = RecordedGraph(graph, [ka, kb], graph.output_keys)
    a0, b0 = 0.1 * (i + 1) + 0.01 * r, 1.0 - 0.1 * i
    [la, lb] = recorder.fresh_input_keys(2)
    a = EagerInput(Input(la), None, True, a0)
    b = EagerInput(Input(lb), None, True, b0)
    f0 = math.sin(a0) * b0 + a0
    retained = {graph.value_keys[s]: math.sin(a0)} if r % 2 else None
    [f] = recorder.record_graph(recorded, [a, b], [f0], retained_values=retained)
    f_in = EagerInput(f.key, f.trace, True, f0)
    mul = RecordedGraph.from_primitive(ScalarOp.MUL, recorder.fresh_input_keys(2))
    [z] = recorder.record_graph(mul, [f_in, a], [f0 * a0])
    grads = try_backward(z.key, z.trace, 1.0, ScalarExecutor())
    want_a = (math.cos(a0) * b0 + 1.0) * a0 + f0
    want_b = math.sin(a0) * a0
    return [(grads[a.key], want_a), (grads[b.key], want_b)], [a.key, b.key, f.key, z.key]


def test_eight_threads_record_and_backward_concurrently():
    barrier = threading.Barrier(THREADS)
    results: list = [None] * THREADS
    keys: list = [None] * THREADS
    errors: list = []

    def work(i: int) -> None:
        try:
            recorder = Recorder()
            checks, seen = [], []
            barrier.wait(timeout=30)
            for r in range(ROUNDS):
                for case in (frontend_case(i, r), low_level_case(i, r, recorder)):
                    checks.extend(case[0])
                    seen.extend(case[1])
            results[i] = checks
            keys[i] = seen
        except BaseException as exc:       # reported below, with the thread's index
            errors.append((i, exc))
            barrier.abort()

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)          # switch threads often, to interleave more
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        sys.setswitchinterval(old)

    assert not errors, errors
    assert all(not t.is_alive() for t in threads)
    for i, checks in enumerate(results):
        assert checks is not None and len(checks) == ROUNDS * 4
        wrong = [(got, want) for got, want in checks if not close(got, want)]
        assert not wrong, (i, wrong[:3])
    # eager keys made concurrently never collide
    all_keys = [k for per_thread in keys for k in per_thread]
    assert len(set(all_keys)) == len(all_keys)


@pytest.mark.parametrize("make_leaf", ["scalar", "tensor"])
def test_a_leaf_gets_one_key_when_threads_ask_at_once(make_leaf):
    from primitives import tensor as tnp

    make = {"scalar": lambda: Scalar(1.0, requires_grad=True),
            "tensor": lambda: tnp.tensor(1.0, requires_grad=True)}[make_leaf]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)          # switch threads as often as possible
    try:
        for _ in range(200):
            x = make()
            seen = []
            start = threading.Barrier(4)

            def ask():
                start.wait()
                seen.append(x.key)

            threads = [threading.Thread(target=ask) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len({id(k) for k in seen}) == 1 and seen[0] is x.key
    finally:
        sys.setswitchinterval(old)
