"""``vmap`` without ``jit`` batches, optimizes and compiles a trace once per structure
(``vmap._batched_program``): ``f`` still runs at every call, so every new argument,
closed-over array and Python branch is read, and results are fresh; a custom rule's
program is batched anew at each call."""

import importlib

import numpy as np
import pytest

import primitives.tensor as tnp
from thread_helpers import run_threads
vmap_module = importlib.import_module("primitives.tensor.transforms.vmap")   # (the package
# exports the function under the module's name)


@pytest.fixture
def made(monkeypatch):
    """How many times a call batches a graph and optimizes a program."""
    counts = {"batch": 0, "optimize": 0}

    def counting(name, real):
        def call(*args, **kwargs):
            counts[name] += 1
            return real(*args, **kwargs)
        return call
    monkeypatch.setattr(vmap_module, "batch", counting("batch", vmap_module.batch))
    monkeypatch.setattr(vmap_module, "optimize", counting("optimize", vmap_module.optimize))
    monkeypatch.setattr(vmap_module, "_PROGRAMS", {})
    monkeypatch.setattr(vmap_module, "_kept_ops", [0])
    return counts


def _f(x, w):
    return tnp.sum(tnp.tanh(x @ w) ** 2)


def _f_numpy(x, w):
    return np.sum(np.tanh(x @ w) ** 2, axis=-1)


RNG = np.random.default_rng(0)
W = RNG.standard_normal((4, 3))


def test_a_second_call_batches_nothing_and_reads_new_arguments(made):
    g = tnp.vmap(_f, in_axes=(0, None))
    results = []
    for step in range(4):
        xs = RNG.standard_normal((5, 4)) + step
        got = g(xs, W)
        np.testing.assert_allclose(got, _f_numpy(xs, W), rtol=1e-13)
        assert not np.shares_memory(got, xs)
        results.append(got)
    assert made == {"batch": 1, "optimize": 1}
    results[0][:] = -1.0                        # the results are fresh: no call sees it
    np.testing.assert_allclose(g(xs, W), _f_numpy(xs, W), rtol=1e-13)
    assert not np.shares_memory(results[1], results[2])


def test_a_closed_over_array_changed_in_place_is_read_at_each_call(made):
    w = np.array([1.0, 2.0, 3.0])
    g = tnp.vmap(lambda x: tnp.sin(x * w))
    xs = np.linspace(0.0, 1.0, 6).reshape(2, 3)
    for _ in range(3):
        w *= 1.5
        np.testing.assert_allclose(g(xs), np.sin(xs * w), rtol=1e-14)
    assert made["batch"] == 1


def test_other_structures_get_their_own_programs(made):
    def f(x, branch):
        return tnp.sin(x) if branch else tnp.exp(x) * x

    for branch, shape, axis in [(True, (3, 2), 0), (False, (3, 2), 0), (True, (4, 2), 0),
                                (True, (3, 2), 1), (True, (3, 2), 0)]:
        xs = RNG.standard_normal(shape)
        want = np.sin(xs) if branch else np.exp(xs) * xs
        np.testing.assert_allclose(tnp.vmap(f, in_axes=(axis, None), out_axes=axis)(
            xs, branch), want, rtol=1e-14)
    assert made["batch"] == 4                   # the last call repeats the first


def test_a_custom_rule_is_batched_at_each_call(made):
    scale = np.array([2.0])

    @tnp.custom_jvp
    def f(x):
        return tnp.sin(x)
    f.defjvp(lambda primals, tangents: (f(primals[0]),
                                       tangents[0] * scale[0] * tnp.cos(primals[0])))
    xs = np.array([[0.1, 0.2], [0.3, 0.4]])
    g = tnp.vmap(tnp.grad(lambda x: tnp.sum(f(x))))
    for s in (2.0, 3.0, 5.0):
        scale[0] = s
        np.testing.assert_allclose(g(xs), s * np.cos(xs), rtol=1e-14)
    assert made["batch"] >= 3


def test_tensors_through_a_kept_program_get_their_gradients(made):
    g = tnp.vmap(_f, in_axes=(0, None))
    for _ in range(2):
        xs = RNG.standard_normal((5, 4))
        w = tnp.tensor(W.copy(), requires_grad=True)
        grads = tnp.sum(g(xs, w)).backward()
        t = np.tanh(xs @ W)
        np.testing.assert_allclose(grads.grad(w), xs.T @ (2 * t * (1 - t * t)), rtol=1e-12)


def test_kept_programs_are_bounded_by_their_operations(monkeypatch, made):
    monkeypatch.setattr(vmap_module, "_PROGRAMS_MAX_OPS", 12)
    xs = RNG.standard_normal((3, 4))
    for n in range(1, 6):                   # n + 1 ops each
        def f(x, n=n):
            for _ in range(n):
                x = tnp.sin(x)
            return tnp.sum(x)
        tnp.vmap(f)(xs)
    kept = [ops for _, _, ops in vmap_module._PROGRAMS.values()]
    assert kept == [5, 6] and vmap_module._kept_ops[0] == 11     # the newest that fit


def test_vmap_from_threads():
    g = tnp.vmap(_f, in_axes=(0, None))
    results = {}

    def worker(n):
        for _ in range(20):
            xs = np.full((3, 4), 0.1 * n)
            results[n] = (xs, g(xs, W))
    run_threads(worker, 4)
    assert len(results) == 4
    for xs, got in results.values():
        np.testing.assert_allclose(got, _f_numpy(xs, W), rtol=1e-13)
