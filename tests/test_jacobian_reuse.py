"""``jacrev``, ``jacfwd`` and ``hessian`` without ``jit`` make their programs once per
structure (``Derivatives.derived``): a second call of the same structure transposes and
compiles nothing, and still reads every new value (arguments, closed-over arrays), gives
fresh results, and gives a structure of its own its own programs. ``vjp``, ``jvp`` and
``hvp`` follow their last trace (``transforms/retrace.py``) as ``grad`` does."""


import sys

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor.transforms import functional
from thread_helpers import run_threads


@pytest.fixture
def made(monkeypatch):
    """What is made per call: ``linear_transpose`` runs, compiled programs, batched graphs."""
    counts = {"transpose": 0, "program": 0, "batch": 0}

    def counting(name, real):
        def call(*args, **kwargs):
            counts[name] += 1
            return real(*args, **kwargs)
        return call
    monkeypatch.setattr(functional, "linear_transpose",
                        counting("transpose", functional.linear_transpose))
    monkeypatch.setattr(functional.Program, "for_values",
                        counting("program", functional.Program.for_values))
    monkeypatch.setattr(functional, "batch", counting("batch", functional.batch))
    monkeypatch.setattr(functional, "_DERIVATIVES", {})
    monkeypatch.setattr(functional, "_TEMPLATES", {})
    monkeypatch.setattr(functional, "_template_ops", [0])
    return counts


def _numeric_jacobian(f, x, h=1e-6):
    columns = [(np.asarray(f(x + h * e)) - np.asarray(f(x - h * e))) / (2 * h)
               for e in np.eye(x.size).reshape(x.size, *x.shape)]
    return np.moveaxis(np.array(columns), 0, -1).reshape(np.shape(f(x)) + x.shape)


W = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


def _f(x):
    return tnp.sin(W @ x) * tnp.sum(x * x)


def _f_numpy(x):
    return np.sin(W @ x) * np.sum(x * x)


@pytest.mark.parametrize("jacobian", [tnp.jacrev, tnp.jacfwd])
def test_a_second_call_makes_nothing_and_reads_new_arguments(made, jacobian):
    j = jacobian(_f)
    x = np.array([0.3, -1.2, 2.0])
    first = j(x)
    after_first = dict(made)
    for step in range(3):
        x = x + 0.5
        got = j(x)
        np.testing.assert_allclose(got, _numeric_jacobian(_f_numpy, x), rtol=1e-7, atol=1e-9)
    assert made == after_first                  # nothing transposed or compiled again
    assert not np.shares_memory(first, got)


@pytest.mark.parametrize("jacobian", [tnp.jacrev, tnp.jacfwd])
def test_a_closed_over_array_changed_in_place_is_read_at_each_call(made, jacobian):
    w = np.array([1.0, 2.0, 3.0])
    j = jacobian(lambda x: tnp.tanh(x * w))
    x = np.array([0.1, 0.2, 0.3])
    for _ in range(3):
        w *= 1.5
        np.testing.assert_allclose(j(x), np.diag(w / np.cosh(x * w) ** 2), rtol=1e-13)


@pytest.mark.parametrize("jacobian", [tnp.jacrev, tnp.jacfwd])
def test_another_structure_gets_its_own_programs(made, jacobian):
    def f(x, branch):
        return tnp.sin(x) if branch else tnp.exp(x) * x

    x = np.array([0.4, -0.6])
    for branch in (True, False, True, False):
        want = np.diag(np.cos(x)) if branch else np.diag(np.exp(x) * (1 + x))
        np.testing.assert_allclose(jacobian(f)(x, branch), want, rtol=1e-14)


@pytest.mark.parametrize("jacobian", [tnp.jacrev, tnp.jacfwd])
def test_the_batched_basis_is_made_once(made, jacobian):
    x = np.linspace(-1.0, 1.0, 40)          # 40 basis vectors: the batched path
    j = jacobian(lambda v: tnp.sin(v) * v)
    j(x)
    batches = made["batch"]
    assert batches >= 1
    for step in range(2):
        x = x * 0.5
        np.testing.assert_allclose(j(x), np.diag(np.cos(x) * x + np.sin(x)), rtol=1e-14)
    assert made["batch"] == batches


def test_jacrev_of_several_outputs_transposes_each_once(made):
    def f(x):
        return tnp.sin(x), tnp.sum(x * x), x[:2] * x[1:]

    j = tnp.jacrev(f)
    x = np.array([0.5, 1.5, -2.0])
    j(x)
    transposes = made["transpose"]
    for _ in range(2):
        x = x - 0.25
        a, b, c = j(x)
        np.testing.assert_allclose(a, np.diag(np.cos(x)), rtol=1e-14)
        np.testing.assert_allclose(b, 2 * x, rtol=1e-14)
        np.testing.assert_allclose(c, _numeric_jacobian(lambda v: v[:2] * v[1:], x), rtol=1e-8)
        assert not (np.shares_memory(a, b) or np.shares_memory(b, c))
    assert made["transpose"] == transposes


def test_hessian_again_agrees_with_the_first_call_and_finite_differences(made):
    def f(x):
        return tnp.sum(tnp.sin(x) * x[::-1]) + tnp.prod(x)

    def gradient(x):
        return np.cos(x) * x[::-1] + np.sin(x[::-1]) + np.prod(x) / x

    h = tnp.hessian(f)
    x = np.array([0.3, 0.8, -0.5])
    for step in range(3):
        got = h(x + step)
        np.testing.assert_allclose(got, _numeric_jacobian(gradient, x + step), rtol=1e-6,
                                   atol=1e-8)
        np.testing.assert_allclose(got, got.T, rtol=1e-12)


def test_jacobians_from_threads():
    j = tnp.jacrev(lambda x: tnp.sin(x) * x[0])
    results = {}

    def worker(n):
        x = np.array([0.1 * n + 0.5, 1.0, -0.5])
        for _ in range(20):
            results[n] = (x, j(x))
    run_threads(worker, 4)
    assert len(results) == 4
    for x, got in results.values():
        want = np.diag(np.cos(x) * x[0])
        want[:, 0] += np.sin(x)
        np.testing.assert_allclose(got, want, rtol=1e-14)


# --- vjp, jvp and hvp follow their last trace -------------------------------------------------


def _loss(x, steps):
    y = x
    for _ in range(steps):
        y = tnp.sin(y) * y
    return tnp.sum(y * y)


def _from_scratch(x, steps):
    value, vjp_fn = functional._vjp(lambda v: _loss(v, steps), (x,), False, "vjp", None)
    return value, vjp_fn(np.ones(()))[0]


def test_vjp_follows_its_last_trace_and_gives_a_fresh_traces_cotangents(no_templates, repeated):
    x = np.array([0.3, -1.2, 2.0])
    for steps in (3, 3, 2, 2, 4):
        value, vjp_fn = tnp.vjp(lambda v: _loss(v, steps), x)
        want_value, want = _from_scratch(x, steps)
        got = vjp_fn(np.ones(()))[0]
        assert value.tobytes() == want_value.tobytes() and got.tobytes() == want.tobytes()
        x = x + 0.1                 # a new point: the cotangents of the new call's values
    assert repeated == [True, False, True, False]


def test_a_vjp_fn_kept_from_an_earlier_call_still_gives_its_own_cotangents(no_templates, repeated):
    x1, x2 = np.array([0.5, 1.0]), np.array([-0.5, 2.0])
    def f(v):
        return _loss(v, 2)

    _, first = tnp.vjp(f, x1)
    _, second = tnp.vjp(f, x2)          # follows the first's graph
    assert repeated == [True]
    assert first(np.ones(()))[0].tobytes() == _from_scratch(x1, 2)[1].tobytes()
    assert second(np.ones(()))[0].tobytes() == _from_scratch(x2, 2)[1].tobytes()


def test_jvp_follows_its_last_trace(no_templates, repeated):
    x, t = np.array([0.3, -1.2]), np.array([1.0, 0.5])
    for steps in (2, 2, 3):
        out, tangent = tnp.jvp(lambda v: _loss(v, steps), (x,), (t,))
        value, gradient = _from_scratch(x, steps)
        assert out.tobytes() == value.tobytes()
        np.testing.assert_allclose(tangent, gradient @ t, rtol=1e-13)
    assert repeated == [True, False]


def test_hvp_follows_its_last_traces(no_templates, repeated):
    x, t = np.array([0.3, -1.2]), np.array([1.0, 0.5])
    h = 1e-6

    def loss(v):
        return _loss(v, 2)

    for _ in range(3):
        numeric = (_from_scratch(x + h * t, 2)[1] - _from_scratch(x - h * t, 2)[1]) / (2 * h)
        np.testing.assert_allclose(tnp.hvp(loss, (x,), (t,)), numeric, rtol=1e-6, atol=1e-8)
        x = x + 0.2
    # the second and third calls: the outer jvp's trace and the grad traced inside it
    assert repeated == [True] * 4


def test_hessians_of_two_functions_called_in_turns_each_follow_their_own_trace(no_templates,
                                                                               repeated):
    # every jacrev(f) shares its wrapper's code: the key reads the wrapped function's too
    def f(x):
        return tnp.sum(tnp.sin(x) * x)

    def g(x):
        return tnp.sum(tnp.exp(x) * x[0])

    hf, hg = tnp.hessian(f), tnp.hessian(g)
    x = np.array([0.5, -1.0])
    for _ in range(3):
        np.testing.assert_allclose(hf(x), np.diag(2 * np.cos(x) - x * np.sin(x)), rtol=1e-14)
        want = np.diag(np.exp(x) * x[0])
        want[0, :] += np.exp(x)
        want[:, 0] += np.exp(x)
        np.testing.assert_allclose(hg(x), want, rtol=1e-14)
    assert len(repeated) >= 4 and all(repeated)


def test_what_a_big_program_keeps_is_bounded_by_its_operations(monkeypatch, made):
    monkeypatch.setattr(functional, "_DERIVED_MAX_OPS", 30)    # this program: 18 ops
    ws = [np.full(3, 0.5 * n + 1.0) for n in range(6)]

    def f(*xs):
        return sum(tnp.sin(x * w) for x, w in zip(xs, ws))

    xs = [np.linspace(0.1, 0.3, 3) + n for n in range(6)]
    j = tnp.jacfwd(f, argnums=tuple(range(6)))
    for _ in range(2):
        for block, x, w in zip(j(*xs), xs, ws):
            np.testing.assert_allclose(block, np.diag(w * np.cos(x * w)), rtol=1e-14)
    [derivatives] = [d for d in functional._DERIVATIVES.values() if d._derived]
    assert len(derivatives._derived) == 1


# --- composition, both orders, over repeated calls ---------------------------------------------

A = np.array([[0.5, -1.0], [2.0, 0.3], [1.0, 1.0]])
XS = np.array([[0.3, -0.2], [1.0, 0.5], [-0.7, 0.1]])


def _g(x):
    return tnp.tanh(A @ x) * tnp.sum(x * x)


def _g_jacobian(x):
    t = np.tanh(A @ x)
    return ((1 - t * t) * np.sum(x * x))[:, None] * A + 2 * np.outer(t, x)


@pytest.mark.parametrize("name", ["vmap(jacrev)", "vmap(jacfwd)", "jit(vmap(jacrev))",
                                  "vmap(jit(jacfwd))", "jacrev(vmap)", "jacfwd(jit)"])
def test_kept_programs_compose_both_ways_and_results_stay_fresh(name):
    make = {"vmap(jacrev)": lambda: tnp.vmap(tnp.jacrev(_g)),
            "vmap(jacfwd)": lambda: tnp.vmap(tnp.jacfwd(_g)),
            "jit(vmap(jacrev))": lambda: tnp.jit(tnp.vmap(tnp.jacrev(_g))),
            "vmap(jit(jacfwd))": lambda: tnp.vmap(tnp.jit(tnp.jacfwd(_g))),
            "jacrev(vmap)": lambda: tnp.jacrev(tnp.vmap(_g)),
            "jacfwd(jit)": lambda: tnp.vmap(tnp.jacfwd(tnp.jit(_g)))}[name]
    g = make()
    for step in range(3):
        xs = XS + 0.1 * step
        got = g(xs)
        for i, x in enumerate(xs):
            block = got[i, :, i, :] if name == "jacrev(vmap)" else got[i]
            np.testing.assert_allclose(block, _g_jacobian(x), rtol=1e-12, atol=1e-14)
        got[...] = 99.0                     # written into: the next call is not
        assert not np.shares_memory(got, xs)


def test_a_tensor_through_a_kept_jacobian_gets_its_gradient():
    for step in range(3):
        x = XS[0] + 0.1 * step
        t = tnp.tensor(x.copy(), requires_grad=True)
        got = tnp.sum(tnp.jacrev(_g)(t)).backward().grad(t)
        h = 1e-6
        want = [(_g_jacobian(x + h * e).sum() - _g_jacobian(x - h * e).sum()) / (2 * h)
                for e in np.eye(2)]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_jit_of_jacrev_reads_a_closed_over_array_written_between_calls():
    w = np.array([1.0, 2.0])
    j = tnp.jit(tnp.jacrev(lambda x: tnp.sin(x * w)))
    for s in (1.0, 2.0, 3.0):
        w[:] = [s, 2 * s]
        np.testing.assert_allclose(j(XS[0]), np.diag(w * np.cos(XS[0] * w)), rtol=1e-14)


def test_long_chains_need_no_recursion():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        def chain(x):
            for _ in range(10_000):             # 30,000 ops
                x = tnp.sin(x) * 0.999 + 0.001
            return x
        for _ in range(2):
            jacobian = tnp.jacfwd(chain)(np.array([0.3, 0.4]))
            assert jacobian[0, 1] == 0 and np.isfinite(jacobian).all()
            assert tnp.vmap(chain)(XS).shape == (3, 2)
    finally:
        sys.setrecursionlimit(old)
