"""Hostile round 56c: state that outlives a call (threads, escaped tracers, closures,
copies, re-entrancy, exceptions mid-trace) and the error contract around it."""

from __future__ import annotations

import enum
import functools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tidu
from primitives import tensor as tnp

X = np.array([1.0, 2.0, 3.0])


def _cube_sum(a):
    return tnp.sum(a ** 3)


@pytest.mark.parametrize("call, message", [
    (lambda: tnp.hvp(_cube_sum, (X,), (np.ones(4),)), "hvp: tangent of shape"),
    (lambda: tnp.hvp(_cube_sum, (X,), (X, X)), "hvp: 1 primals but 2 tangents"),
    (lambda: tnp.hvp(_cube_sum, (np.ones(3, int),), (X,)), "hvp: argument 0 has dtype"),
    (lambda: tnp.hvp(lambda a: a, (X,), (X,)), "hvp: .* must return a real floating"),
    (lambda: tnp.hvp(_cube_sum, ("a",), (X,)), "hvp: expected an array or a number"),
    (lambda: tnp.jvp(_cube_sum, ("a",), (X,)), "jvp: expected an array or a number"),
    (lambda: tnp.jvp(_cube_sum, (1.0,), ("a",)), "jvp: expected an array or a number"),
    (lambda: tnp.vjp(_cube_sum, iter([X])), "vjp: expected an array or a number"),
])
def test_argument_errors_of_hvp_jvp_and_vjp_name_the_transform_called(call, message) -> None:
    # Was wrong: hvp's argument errors named jvp or grad (the transforms it runs on), and
    # a non-array primal or tangent of jvp / vjp / hvp raised "expected an array or a
    # number, got str" naming no transform at all (grad and the Jacobians named theirs)
    with pytest.raises(tidu.TiduError, match=f"^{message}"):
        call()


class _Act(enum.Enum):
    SIN = "sin"
    COS = "cos"


ACT = _Act.SIN
DTYPE = np.dtype("float32")
HEAD = slice(0, 2)
TAG = b"sum"


def test_a_rebound_enum_dtype_slice_or_bytes_global_traces_again() -> None:
    # Was wrong: rebinding a global Enum member, np.dtype instance, slice or bytes between
    # calls of a jitted function returned the first trace's result silently (only numbers,
    # strings, None, callables and containers were compared at each call)
    global ACT, DTYPE, HEAD, TAG
    act = tnp.jit(lambda x: tnp.sin(x) if ACT is _Act.SIN else tnp.cos(x))
    cast = tnp.jit(lambda x: x.astype(DTYPE))
    head = tnp.jit(lambda x: x[HEAD])
    tag = tnp.jit(lambda x: tnp.sum(x) if TAG == b"sum" else tnp.max(x))
    try:
        for f in (act, cast, head, tag):
            f(X)
        ACT, DTYPE, HEAD, TAG = _Act.COS, np.dtype("int64"), slice(1, 3), b"max"
        np.testing.assert_allclose(act(X), np.cos(X))
        assert cast(X + 0.5).dtype == np.int64
        np.testing.assert_array_equal(head(X), X[1:3])
        assert tag(X) == 3.0
    finally:
        ACT, DTYPE, HEAD, TAG = _Act.SIN, np.dtype("float32"), slice(0, 2), b"sum"


def test_an_enum_attribute_rebound_traces_again_and_an_equal_atom_does_not() -> None:
    # Was wrong: config.act = Act.COS on an object the jitted function reads was not seen
    class Config:
        def __init__(self) -> None:
            self.act, self.rows = _Act.SIN, slice(0, 2)
    config, traces = Config(), []

    def f(x):
        traces.append(1)
        return (tnp.sin(x) if config.act is _Act.SIN else tnp.cos(x))[config.rows]
    jitted = tnp.jit(f)
    jitted(X)
    config.act = _Act.COS
    np.testing.assert_allclose(jitted(X), np.cos(X)[:2])
    config.rows = slice(0, 2)           # equal, made anew: no new trace
    jitted(X)
    assert len(traces) == 2


def test_a_keyword_added_to_a_jitted_partial_traces_again() -> None:
    # Was wrong: partial.keywords["mode"] = "max" after the first call was not seen (the
    # keywords dict's values were read at each call, not its keys)
    def f(x, scale=1.0, mode="sum"):
        return tnp.sum(x * scale) if mode == "sum" else tnp.max(x * scale)
    bound = functools.partial(f, scale=2.0)
    jitted = tnp.jit(bound)
    assert jitted(X) == 12.0
    bound.keywords["mode"] = "max"
    assert jitted(X) == bound(X) == 6.0


@pytest.mark.parametrize("transform, name", [
    (tnp.grad, "grad"), (lambda f: tnp.jit(tnp.grad(f)), "grad"),
    (lambda f: lambda x: tnp.jvp(f, (x,), (np.ones_like(x),))[1], "jvp"),
    (lambda f: lambda x: tnp.vmap(f)(np.stack([x, x])), "vmap of"),
])
def test_a_thread_pool_inside_a_transformed_function_is_refused(transform, name) -> None:
    # Was wrong: workers binding ops into one trace at once interleaved its graph builder:
    # grad of sum(pool.map(g, chunks of x)) gave a wrong gradient silently in about one
    # call in thirty, or "Local(28) is not a value of this builder" (JAX refuses too)
    chunks = np.linspace(0.1, 2.0, 16)

    def f(x):
        with ThreadPoolExecutor(2) as pool:
            parts = list(pool.map(lambda c: tnp.sum(tnp.sin(c) * c),
                                  [x[:8], x[8:]]))
        return parts[0] + parts[1]
    with pytest.raises(tidu.TiduError, match=f"inside {name}.* on another thread"):
        transform(f)(chunks)
    # the eager Tensor records from any thread, and the library stays usable
    t = tnp.tensor(chunks, requires_grad=True)
    f(t).backward()
    np.testing.assert_allclose(t.grad, np.cos(chunks) * chunks + np.sin(chunks))
    np.testing.assert_allclose(tnp.grad(lambda v: tnp.sum(tnp.sin(v) * v))(chunks), t.grad)
