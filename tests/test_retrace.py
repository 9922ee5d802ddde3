"""Tracing again along the last graph (``primitives/tensor/transforms/retrace.py``): a
``RetraceBuilder`` given any template answers every call as a ``GraphBuilder`` does and
builds the same graph, key for key; ``grad`` without ``jit`` uses it and its gradients
are those of a trace made from scratch, bit for bit, whatever path each call takes."""

import enum
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import primitives.tensor as tnp
from primitives.scalar import ScalarOp
from primitives.tensor.transforms import functional
from primitives.tensor.transforms.retrace import RetraceBuilder
from thread_helpers import run_threads
from tidu.errors import ArityError, InvalidOperationError, UnknownValueError
from tidu.graph import GraphBuilder, GraphOperation, Local

# TIDU_RANDOM_EXAMPLES=5000 for a long run; the default keeps the suite fast
EXAMPLES = int(os.environ.get("TIDU_RANDOM_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

OPS = [ScalarOp.SIN, ScalarOp.NEG, ScalarOp.ADD, ScalarOp.MUL, ScalarOp.SINCOS]


# --- the builder: the same answers and the same graph as a GraphBuilder ----------------------


@st.composite
def programs(draw, max_steps=12):
    """A list of builder calls: ``("input", name)`` or ``("op", op, picks)``, where each pick
    chooses among the ids returned so far (modulo their number)."""
    steps = [("input", draw(st.sampled_from("xyz")))]
    for _ in range(draw(st.integers(0, max_steps))):
        if draw(st.integers(0, 5)) == 0:
            steps.append(("input", draw(st.sampled_from("xyz"))))
        else:
            op = draw(st.sampled_from(OPS))
            picks = tuple(draw(st.integers(0, 50)) for _ in range(op.input_count()))
            steps.append(("op", op, picks))
    return steps


@st.composite
def program_pairs(draw):
    """A template's program and a second one: the same, cut short, grown, changed at one
    step, or a step repeated (the builder's deduplication)."""
    first = draw(programs())
    kind = draw(st.sampled_from(["same", "prefix", "longer", "changed", "repeated", "other"]))
    at = draw(st.integers(0, len(first) - 1))      # (the first step stays an input)
    if kind == "same":
        second = list(first)
    elif kind == "prefix":
        second = first[:at + 1]
    elif kind == "longer":
        second = first + draw(programs())[1:]
    elif kind == "changed":
        at = max(at, 1)
        second = first[:at] + draw(programs(max_steps=1))[-1:] + first[at + 1:]
    elif kind == "repeated":
        second = first[:at + 1] + [first[at]] + first[at + 1:]
    else:
        second = draw(programs())
    return first, second, draw(st.integers(0, 50)), draw(st.integers(0, 50))


def _run(builder, program, output_pick):
    """Make ``program``'s calls on ``builder``; what each returned, and what it built."""
    ids, answers = [], []
    for step in program:
        if step[0] == "input":
            got = [builder.add_input(step[1])]
        else:
            _, op, picks = step
            got = builder.add_operation(op, [Local(ids[p % len(ids)]) for p in picks])
        answers.append((got, [builder.global_key(i) for i in got]))
        ids.extend(got)
    builder.set_outputs([ids[output_pick % len(ids)]])
    return answers, builder.build()


def _same_graph(got, want) -> None:
    assert len(got.value_keys) == len(want.value_keys)
    assert all(a is b for a, b in zip(got.value_keys, want.value_keys))
    assert all(a is b for a, b in zip(got.operation_keys, want.operation_keys))
    assert len(got.operation_keys) == len(want.operation_keys)
    assert got.inputs == want.inputs and got.outputs == want.outputs
    assert all(a is b for a, b in zip(got.output_keys, want.output_keys))


@SETTINGS
@given(program_pairs())
def test_a_retrace_answers_and_builds_as_a_graph_builder_on_any_template(pair):
    first, second, first_output, second_output = pair
    _, template = _run(GraphBuilder(), first, first_output)
    want_answers, want = _run(GraphBuilder(), second, second_output)
    got_answers, got = _run(RetraceBuilder(template), second, second_output)
    assert len(got_answers) == len(want_answers)
    for (got_ids, got_keys), (want_ids, want_keys) in zip(got_answers, want_answers):
        assert got_ids == want_ids
        assert all(a is b for a, b in zip(got_keys, want_keys))
    _same_graph(got, want)
    if second == first and want.outputs == template.outputs:
        assert got is template                  # a repeat builds nothing


def test_a_repeated_trace_is_the_template_and_one_that_differs_is_new():
    def trace(builder, op, output_count=1):
        x = builder.add_input("x")
        y = builder.add_input("y")
        [s] = builder.add_operation(ScalarOp.SIN, [Local(x)])
        [z] = builder.add_operation(op, [Local(s), Local(y)])
        builder.set_outputs([z] if output_count == 1 else [z, s])
        return builder.build()
    template = trace(GraphBuilder(), ScalarOp.MUL)
    assert trace(RetraceBuilder(template), ScalarOp.MUL) is template
    for op, count in ((ScalarOp.ADD, 1), (ScalarOp.MUL, 2)):
        got = trace(RetraceBuilder(template), op, count)
        assert got is not template
        _same_graph(got, trace(GraphBuilder(), op, count))


class Incomplete(GraphOperation, enum.Enum):
    """An op that does not say how many outputs it has."""
    OP = "op"

    def input_count(self):
        return 1


def test_a_retrace_refuses_misuse_as_a_graph_builder_does_and_stays_usable():
    template = GraphBuilder()
    x = template.add_input("x")
    template.add_operation(ScalarOp.SIN, [Local(x)])
    template.set_outputs([x])
    template = template.build()
    builder = RetraceBuilder(template)
    x = builder.add_input("x")
    with pytest.raises(ArityError, match="SIN"):
        builder.add_operation(ScalarOp.SIN, [Local(x), Local(x)])
    with pytest.raises(UnknownValueError):
        builder.global_key(7)
    with pytest.raises(UnknownValueError):
        builder.set_outputs([7])
    with pytest.raises(InvalidOperationError, match="Incomplete"):
        builder.add_operation(Incomplete.OP, [Local(x)])
    with pytest.raises(InvalidOperationError, match="hashable"):
        builder.add_operation([ScalarOp.SIN], [Local(x)])
    [y] = builder.add_operation(ScalarOp.SIN, [Local(x)])
    builder.set_outputs([y])
    reference = GraphBuilder()
    [want] = reference.add_operation(ScalarOp.SIN, [Local(reference.add_input("x"))])
    reference.set_outputs([want])
    _same_graph(builder.build(), reference.build())


# --- grad: each call's gradient is a fresh trace's, bit for bit --------------------------------


def _loss(x, steps, twice, scale):
    y = x
    for _ in range(steps):
        y = tnp.sin(y) * y
    if twice:                               # the same op again: the builder's deduplication
        y = y + tnp.sin(x) * x
    return tnp.sum(y * y) * scale


def _vjp_from_scratch(f, *primals, has_aux=False):
    """``tnp.vjp`` of a trace made from scratch: under no template key, it follows none."""
    return functional._vjp(f, primals, has_aux, "vjp", None)


def _fresh(x, steps, twice, scale):
    """The value and gradient of a trace made from scratch."""
    value, vjp_fn = _vjp_from_scratch(lambda v: _loss(v, steps, twice, scale), x)
    return value, vjp_fn(np.ones((), value.dtype))[0]


def _fresh_gradient(x, steps, twice, scale):
    return _fresh(x, steps, twice, scale)[1]


CALLS = [(3, False, 1.0), (3, False, 1.0), (2, False, 1.0), (4, True, 1.0), (4, False, 2.0),
         (3, True, 1.0), (3, True, 1.0), (0, False, 1.0), (3, False, 1.0)]


def test_grad_follows_its_last_trace_and_gives_a_fresh_traces_gradient_on_every_path(
        no_templates, repeated):
    g = tnp.grad(_loss)
    x = np.array([0.3, -1.2, 2.0])
    for steps, twice, scale in CALLS:
        got = g(x, steps, twice, scale)
        want = _fresh_gradient(x, steps, twice, scale)
        assert got.tobytes() == want.tobytes()
        h = 1e-6
        numeric = [(_loss(x + h * e, steps, twice, scale) - _loss(x - h * e, steps, twice, scale))
                   / (2 * h) for e in np.eye(3)]
        np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-8)
    # the first call has no template; then a repeat of the last call's structure follows it
    # to its end, and a change of path does not
    assert repeated == [True, False, False, False, False, True, False, False]


def test_grad_from_threads_gives_each_call_its_own_gradient():
    g = tnp.value_and_grad(_loss)
    x = np.array([0.5, 1.5])
    results = {}

    def worker(n):
        for k in range(30):
            steps, twice, scale = CALLS[(n + k) % len(CALLS)]
            results[(n, k)] = (g(x, steps, twice, scale), (steps, twice, scale))
    run_threads(worker, 4)
    assert len(results) == 120
    for (value, gradient), args in results.values():
        want_value = _loss(x, *args)
        assert value.tobytes() == np.asarray(want_value).tobytes()
        assert gradient.tobytes() == _fresh_gradient(x, *args).tobytes()


def test_grad_keeps_no_template_of_a_program_too_big_to_keep(no_templates, monkeypatch):
    made = []
    monkeypatch.setattr(functional, "RetraceBuilder",
                        lambda template: made.append(template) or RetraceBuilder(template))
    g = tnp.grad(_loss)
    x = np.array([0.3, -1.2])
    g(x, 3, False, 1.0)
    g(x, 3, False, 1.0)
    assert len(made) == 1                   # the second call followed the first
    monkeypatch.setattr(functional, "_TEMPLATES", {})
    monkeypatch.setattr(functional, "_DERIVATIVES_MAX_OPS", 5)
    g(x, 3, False, 1.0)                     # 9 ops: more than the bound, not kept
    got = g(x, 3, False, 1.0)
    assert len(made) == 1 and not functional._TEMPLATES
    assert got.tobytes() == _fresh_gradient(x, 3, False, 1.0).tobytes()


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 4), st.booleans(), st.sampled_from([1.0, 2.0]),
                          st.sampled_from([np.float64, np.float32]), st.integers(1, 3)),
                min_size=2, max_size=6))
def test_grad_on_any_sequence_of_paths_dtypes_and_shapes_is_a_fresh_traces(calls):
    g = tnp.value_and_grad(_loss)
    for steps, twice, scale, dtype, size in calls:
        x = np.linspace(-1.0, 1.5, size).astype(dtype)
        value, gradient = g(x, steps, twice, scale)
        want_value, want_gradient = _fresh(x, steps, twice, scale)
        assert gradient.dtype == want_gradient.dtype == dtype
        assert value.tobytes() == want_value.tobytes()
        assert gradient.tobytes() == want_gradient.tobytes()


def test_grad_with_aux_argnums_and_pytrees_follows_its_last_trace():
    def loss(params, x, k=1.0):
        w, b = params["w"], params["b"]
        y = tnp.tanh(x @ w + b)
        return tnp.sum(y * y) * k, {"y": y}
    g = tnp.grad(loss, argnums=(0, 1), has_aux=True)
    params = {"w": np.arange(6.0).reshape(3, 2) / 10, "b": np.array([0.1, -0.2])}
    x = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    for k in (1.0, 1.0, 3.0, 1.0):
        (grads, aux) = g(params, x, k=k)
        value, vjp_fn, want_aux = _vjp_from_scratch(lambda p, v: loss(p, v, k=k), params, x,
                                                    has_aux=True)
        want = vjp_fn(np.ones(()))
        for a, b in zip([grads[0]["w"], grads[0]["b"], grads[1], aux["y"]],
                        [want[0]["w"], want[0]["b"], want[1], want_aux["y"]]):
            assert a.tobytes() == b.tobytes()


def test_grad_written_inline_in_a_loop_follows_the_last_trace(no_templates, repeated):
    x = np.array([0.3, -1.2, 2.0])
    for steps in (3, 3, 3, 2, 2):
        got = tnp.grad(_loss)(x, steps, False, 1.0)      # a new grad function each time
        assert got.tobytes() == _fresh_gradient(x, steps, False, 1.0).tobytes()
    assert repeated == [True, True, False, True]
    tnp.grad(_loss, argnums=0, has_aux=False)(x, 2, False, 1.0)
    tnp.value_and_grad(lambda v: _loss(v, 2, False, 1.0))(x)    # another function's code
    assert repeated == [True, True, False, True, True]


class _Callable:
    def __call__(self, x):
        return tnp.sum(tnp.sin(x) * x)


@tnp.custom_vjp
def _sin_times(x, y):
    return np.sin(x) * y


_sin_times.defvjp(lambda x, y: (_sin_times(x, y), (x, y)),
                  lambda res, ct: (ct * tnp.cos(res[0]) * res[1], ct * tnp.sin(res[0])))


def test_templates_are_kept_within_the_op_budget_and_never_of_custom_rules(no_templates,
                                                                          monkeypatch):
    x = np.array([0.3, -1.2])
    g = tnp.grad(lambda v: tnp.sum(_sin_times(v, v)))      # a custom rule: not kept
    g(x)
    assert not functional._TEMPLATES
    tnp.grad(_Callable())(x)                               # no code to remember it by
    assert not functional._TEMPLATES
    monkeypatch.setattr(functional, "_DERIVATIVES_MAX_OPS", 12)
    for argnums, steps in ((0, 1), ((0, 3), 2), (3, 3)):     # three keys, 5 + 7 + 1 ops
        tnp.grad(_loss, argnums=argnums)(x, steps, False, 1.0)
    kept = {key[1]: len(graph.operation_keys) for key, graph in functional._TEMPLATES.items()}
    assert kept == {(0, 3): 7, (3,): 1}                     # the oldest went past 12
    assert functional._template_ops[0] == 8


def _vjp_gradient(f, x):
    value, vjp_fn = _vjp_from_scratch(f, x)
    return vjp_fn(np.ones((), value.dtype))[0]


def test_retraced_results_are_fresh_and_read_closures_at_each_call():
    x = np.array([0.3, -0.7, 1.1])
    g = tnp.grad(_loss)
    first = g(x, 3, False, 1.0)
    first[:] = 99.0                                  # written into: the next call is new
    second = g(x, 3, False, 1.0)
    assert second.tobytes() == _fresh_gradient(x, 3, False, 1.0).tobytes()
    assert not np.shares_memory(first, second) and not np.shares_memory(second, x)
    w = np.array([1.0, 2.0, 3.0])
    h = tnp.grad(lambda v: tnp.sum(tnp.sin(v) * w))
    h(x)
    w[:] = [5.0, 6.0, 7.0]                           # the closed-over array, changed
    np.testing.assert_allclose(h(x), np.cos(x) * w)


def test_retraced_grad_composes_with_grad_jit_vmap_and_tensors_in_both_orders():
    x = np.array([0.3, -0.7, 1.1])
    xs = np.stack([x, 2 * x])
    second = tnp.grad(lambda v: tnp.grad(lambda u: tnp.sum(tnp.sin(u) * u))(v).sum())
    jitted = tnp.jit(tnp.grad(lambda v: _loss(v, 2, False, 1.0)))
    per_row = tnp.vmap(tnp.grad(lambda v: tnp.sum(tnp.sin(v) * v)))
    of_vmap = tnp.grad(lambda v: tnp.sum(tnp.vmap(lambda r: tnp.sin(r) * r)(v)))
    t = tnp.tensor(x, requires_grad=True)
    for _ in range(3):                               # the later calls follow templates
        np.testing.assert_allclose(second(x), 2 * np.cos(x) - x * np.sin(x))
        assert jitted(x).tobytes() == _fresh_gradient(x, 2, False, 1.0).tobytes()
        np.testing.assert_allclose(per_row(xs), np.cos(xs) * xs + np.sin(xs))
        np.testing.assert_allclose(of_vmap(x), np.cos(x) * x + np.sin(x))
        inner = tnp.grad(lambda v: tnp.sum(tnp.sin(v) * v))(t)       # a Tensor through grad
        np.testing.assert_allclose(inner.sum().backward().grad(t),
                                   2 * np.cos(x) - x * np.sin(x))


def test_a_tracer_escaping_a_retraced_grad_still_raises():
    leak = []
    f = tnp.grad(lambda v: (leak.append(v), tnp.sum(v * v))[1])
    x = np.array([0.5, 2.0])
    f(x)
    f(x)
    with pytest.raises(functional.FunctionalError, match="escaped tracer"):
        leak[-1] * 2.0


def test_a_template_of_20_000_ops_is_followed_without_recursion():
    """The largest graph kept as a template, followed by a second call (a 100,000-op chain,
    never kept, runs the same loops; checked by hand, in issue 23's closing note)."""
    import sys
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1_000)
    try:
        x = np.array([0.3, -0.2])
        g = tnp.grad(_loss)
        first, again = g(x, 6_600, False, 1.0), g(x, 6_600, False, 1.0)     # 19,803 ops
    finally:
        sys.setrecursionlimit(limit)
    assert first.tobytes() == again.tobytes()
    assert first.tobytes() == _vjp_gradient(lambda v: _loss(v, 6_600, False, 1.0),
                                            x).tobytes()
