"""Property test: random scalar DAGs.

Random graphs over 1-3 inputs from {ADD, SUB, MUL, SIN, COS, EXP(sin v), TANH,
NEG, SINCOS}, with several outputs (possibly repeated, possibly inputs) and a
random subset of inputs to differentiate. For each:

- the JVP matches central finite differences (``tidu.testing.check_jvp``);
- the transpose passes the dot-product test (``tidu.testing.check_transpose``);
- independently of ``tidu.testing``, the VJP matches finite differences of
  ``sum_j ct_j f_j`` along each ``wrt`` input, and ``linear_transpose_with_builder``
  agrees with ``linear_transpose``.
"""

from __future__ import annotations

import math
import os

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from primitives.scalar import ScalarOp
from tidu import GraphPrimitiveBuilder, linear_transpose, linear_transpose_with_builder, linearize
from tidu.graph import GraphBuilder, Input, Local, evaluate
from tidu.testing import check_jvp, check_transpose

UNARY = {"SIN": ScalarOp.SIN, "COS": ScalarOp.COS, "TANH": ScalarOp.TANH, "NEG": ScalarOp.NEG}
BINARY = {"ADD": ScalarOp.ADD, "SUB": ScalarOp.SUB, "MUL": ScalarOp.MUL}
KINDS = sorted(UNARY) + sorted(BINARY) + ["EXP", "SINCOS"]
KEYS = ["x0", "x1", "x2"]

# TIDU_RANDOM_EXAMPLES=5000 for a long run; the default keeps the suite fast
EXAMPLES = int(os.environ.get("TIDU_RANDOM_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def random_dags(draw, complex_values=False, extra_kinds=()):
    n_inputs = draw(st.integers(1, 3))
    keys = KEYS[:n_inputs]
    b = GraphBuilder()
    values = [b.add_input(k) for k in keys]

    def pick():
        # lean towards recent values, so graphs get deep as well as wide
        index = draw(st.integers(0, len(values) - 1))
        recent = draw(st.booleans())
        return values[max(index, len(values) - 3)] if recent else values[index]

    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(KINDS + list(extra_kinds)))
        if kind in BINARY:
            outs = b.add_operation(BINARY[kind], [Local(pick()), Local(pick())])
        elif kind == "EXP":               # of a bounded value
            [s] = b.add_operation(ScalarOp.SIN, [Local(pick())])
            outs = b.add_operation(ScalarOp.EXP, [Local(s)])
        elif kind == "SINCOS":
            outs = b.add_operation(ScalarOp.SINCOS, [Local(pick())])
        elif kind == "CONJ":
            outs = b.add_operation(ScalarOp.CONJ, [Local(pick())])
        else:
            outs = b.add_operation(UNARY[kind], [Local(pick())])
        values.extend(outs)

    extra = draw(st.lists(st.integers(0, len(values) - 1), max_size=3))
    outputs = [values[-1]] + [values[i] for i in extra]
    b.set_outputs(outputs)
    graph = b.build()

    wrt = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=n_inputs, unique=True))
    unit = st.floats(-1.5, 1.5, allow_nan=False)
    if complex_values:
        primals = {k: complex(draw(unit), draw(unit)) for k in keys}
    else:
        primals = {k: draw(unit) for k in keys}
    seed = draw(st.integers(0, 2**32 - 1))
    return graph, wrt, primals, seed


def bounded(graph, primals, limit=1e3):
    """Every value of the graph is finite and moderate (MUL chains can blow up)."""
    try:
        all_values = evaluate(graph, list(graph.value_keys),
                              {Input(k): v for k, v in primals.items()})
    except OverflowError:          # cmath.exp / sin / cos of a large complex value
        return False
    return all(math.isfinite(abs(v)) and abs(v) < limit for v in all_values)


def vjp_matches_finite_differences(graph, wrt, primals, seed):
    """Own check: ``J^T ct`` against FD of ``<ct, f>`` along each wrt input (real values)."""
    rng = np.random.default_rng(seed)
    outputs = list(graph.output_keys)
    lin = linearize(graph, outputs, wrt)
    tr = linear_transpose(lin)
    cts = [float(c) for c in rng.standard_normal(len(outputs))]
    values = {Input(k): v for k, v in primals.items()}
    active = [c for c, t in zip(cts, lin.tangent_outputs) if t is not None]
    values.update(zip(tr.tangent_input_keys, active))
    present = [k for k in tr.tangent_output_keys if k is not None]
    results = iter(evaluate([graph, lin.graph, tr.graph], present, values))
    grads = [0.0 if k is None else next(results) for k in tr.tangent_output_keys]

    def loss(shift_key, h):
        shifted = dict({Input(k): v for k, v in primals.items()})
        shifted[Input(shift_key)] += h
        return sum(c * f for c, f in zip(cts, evaluate(graph, outputs, shifted)))

    h = 1e-6
    for key, grad in zip(wrt, grads):
        fd = (loss(key, h) - loss(key, -h)) / (2 * h)
        assert abs(grad - fd) <= 1e-6 + 1e-5 * abs(fd), (key, grad, fd)

    # the caller-builder walk gives the same cotangents
    builder = GraphPrimitiveBuilder()
    builder.add_parent(lin.graph)
    seed_ids = [builder.add_input(("seed", i)) if t is not None else None
                for i, t in enumerate(lin.tangent_outputs)]
    ids = linear_transpose_with_builder(lin, builder, seed_ids)
    builder.set_outputs([i for i in ids if i is not None])
    other = builder.build()
    values = {Input(k): v for k, v in primals.items()}
    values.update({Input(("seed", i)): c for i, c in enumerate(cts)})
    present = [other.value_keys[i] for i in ids if i is not None]
    results = iter(evaluate([graph, lin.graph, other], present, values))
    again = [0.0 if i is None else next(results) for i in ids]
    assert np.allclose(again, grads, rtol=1e-12, atol=1e-15)


@SETTINGS
@given(random_dags())
def test_random_real_dags(case):
    graph, wrt, primals, seed = case
    assume(bounded(graph, primals))
    outputs = list(graph.output_keys)
    assume(any(t is not None for t in linearize(graph, outputs, wrt).tangent_outputs))
    rng = np.random.default_rng(seed)
    check_jvp(graph, outputs, primals, {k: float(rng.standard_normal()) for k in wrt},
              rng=seed)
    lin = linearize(graph, outputs, wrt)
    check_transpose(graph, lin, primals, rng=seed)
    vjp_matches_finite_differences(graph, wrt, primals, seed)


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 2))
@given(random_dags(complex_values=True, extra_kinds=("CONJ",)))
def test_random_complex_dags(case):
    graph, wrt, primals, seed = case
    assume(bounded(graph, primals, limit=1e2))
    outputs = list(graph.output_keys)
    assume(any(t is not None for t in linearize(graph, outputs, wrt).tangent_outputs))
    check_jvp(graph, outputs, primals, rng=seed)
    lin = linearize(graph, outputs, wrt)
    check_transpose(graph, lin, primals, rng=seed)
