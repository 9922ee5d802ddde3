"""How ``jit`` and ``checkpoint`` take their arguments, as JAX's do.

- ``jit(f, static_argnums=..., static_argnames=...)``: a static argument is
  static however it is passed (by position or by keyword: the name and the
  position are inferred from ``f``'s signature both ways), is passed to ``f``
  as it is, must be hashable, and a new value traces again.
- ``checkpoint(f)(*args, **kwargs)`` takes keyword arguments and pytrees (nested
  tuples, lists and dicts) of tensors or arrays, with other leaves (numbers,
  strings) passed through as constants, and returns what ``f`` returns, on
  eager ``Tensor``s (gradients to every tensor leaf, block recomputed in
  backward) and under ``grad``, ``jit`` and ``vmap``. Gradients are checked
  against the same function without ``checkpoint``, against finite
  differences and against JAX.
"""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import FunctionalError, Tensor
from tidu import TiduError

from tensor_helpers import numeric_grad, warm_call_peak

RNG = np.random.default_rng(7)
X = RNG.standard_normal(5)


# --- jit: static arguments by keyword and by name ------------------------------------------------


def _power(x, n, mode="sum"):
    _power.calls.append((n, mode))
    out = x ** n
    return tnp.sum(out) if mode == "sum" else tnp.mean(out)


@pytest.fixture
def power():
    _power.calls = []
    return _power


def test_a_static_argnum_passed_by_keyword_is_static(power):
    g = tnp.jit(power, static_argnums=1)
    x = np.full(3, 2.0)
    assert float(g(x, n=3)) == 24.0                       # n by keyword: static, not traced
    assert float(g(x, n=2)) == 12.0                       # a new value traces again
    assert float(g(2 * x, n=3)) == 192.0                  # same value: the compiled program
    assert power.calls == [(3, "sum"), (2, "sum")]
    assert float(g(x, 3)) == 24.0                         # by position: static too
    assert power.calls == [(3, "sum"), (2, "sum"), (3, "sum")]


def test_a_static_argnum_must_be_static_for_python_control_flow():
    def f(x, n):
        for _ in range(n):                                # needs n's value
            x = tnp.sin(x)
        return x
    g = tnp.jit(f, static_argnums=(1,))
    np.testing.assert_allclose(g(X, n=2), np.sin(np.sin(X)), rtol=1e-15)
    np.testing.assert_allclose(g(x=X, n=3), np.sin(np.sin(np.sin(X))), rtol=1e-15)


def test_static_argnames_by_keyword_and_by_position(power):
    g = tnp.jit(power, static_argnames=("n", "mode"))
    x = np.full(2, 3.0)
    assert float(g(x, n=2, mode="mean")) == 9.0
    assert float(g(x, 2, "sum")) == 18.0                  # positional: the signature names them
    assert float(g(x, 2, mode="sum")) == 18.0
    assert float(g(x + 1, n=2, mode="mean")) == 16.0      # compiled: no new trace
    assert power.calls == [(2, "mean"), (2, "sum"), (2, "sum")]
    h = tnp.jit(power, static_argnames="mode")            # one name as a string
    assert float(h(x, 2.0, mode="mean")) == 9.0 and float(h(x, 3.0, mode="mean")) == 27.0
    assert len(power.calls) == 4 and power.calls[-1][1] == "mean"    # n traced: one trace
    assert not isinstance(power.calls[-1][0], float)


def test_static_argnames_for_keyword_only_and_defaulted_parameters():
    calls = []

    def f(x, *, scale=2.0, op="mul"):
        calls.append(op)
        return x * scale if op == "mul" else x + scale
    g = tnp.jit(f, static_argnames="op")
    np.testing.assert_allclose(g(X), 2.0 * X, rtol=1e-15)
    np.testing.assert_allclose(g(X, op="add", scale=3.0), X + 3.0, rtol=1e-15)
    np.testing.assert_allclose(g(X, op="add", scale=4.0), X + 4.0, rtol=1e-15)  # scale traced
    assert calls == ["mul", "add"]
    h = tnp.jit(lambda x, n=2: x ** n, static_argnums=1)   # not passed: its default, as in JAX
    np.testing.assert_allclose(h(X), X ** 2, rtol=1e-15)
    np.testing.assert_allclose(h(X, 3), X ** 3, rtol=1e-15)


def test_static_arguments_by_keyword_compose_with_grad():
    def loss(w, x, p):
        return tnp.sum(tnp.abs(x * w) ** p)
    step = tnp.jit(tnp.grad(loss), static_argnames="p")
    w = np.array([0.5, -1.5, 2.0])
    for p in (2, 3):
        want = p * np.abs(X[:3] * w) ** (p - 1) * np.sign(X[:3] * w) * X[:3]
        np.testing.assert_allclose(step(w, X[:3], p=p), want, rtol=1e-12)
        np.testing.assert_allclose(step(w, X[:3], p), want, rtol=1e-12)
    g = tnp.grad(tnp.jit(loss, static_argnums=2))
    np.testing.assert_allclose(g(w, X[:3], p=2), 2 * X[:3] ** 2 * w, rtol=1e-12)


def test_static_argument_errors_are_named():
    with pytest.raises(FunctionalError, match="not hashable") as caught:
        tnp.jit(lambda x, s: x, static_argnames="s")(np.ones(2), s=[1, 2])
    assert isinstance(caught.value, TiduError) and "jit of" in str(caught.value)
    with pytest.raises(FunctionalError, match="not hashable"):
        tnp.jit(lambda x, s: x, static_argnums=1)(np.ones(2), s={"a": 1})
    with pytest.raises(FunctionalError, match=r"static_argnames.*'sz'"):
        tnp.jit(lambda x, s: x, static_argnames=("sz",))   # not a parameter of f
    with pytest.raises(FunctionalError, match="static_argnames"):
        tnp.jit(lambda x, s: x, static_argnames=(1,))      # a number where a name goes
    with pytest.raises(FunctionalError, match="static_argnums"):
        tnp.jit(lambda x: x, static_argnums=3)(np.ones(2))  # the existing error, kept
    with pytest.raises(FunctionalError, match="holds a str"):
        tnp.jit(lambda x, s: x)(np.ones(2), s="a")        # not static: refused as before


def test_static_argnames_with_var_keyword_and_unsignatured_callables():
    def f(x, **options):
        return x * options["scale"] if options["how"] == "scale" else x
    g = tnp.jit(f, static_argnames="how")                  # allowed: **options takes it
    np.testing.assert_allclose(g(X, how="scale", scale=3.0), 3 * X, rtol=1e-15)
    np.testing.assert_allclose(g(X, how="no", scale=3.0), X, rtol=1e-15)


def test_static_argnames_agree_with_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def make(np_):
        def f(x, n, mode="sum"):
            y = x ** n
            return np_.sum(y) if mode == "sum" else np_.mean(y)
        return f
    ours = tnp.jit(make(tnp), static_argnums=1, static_argnames="mode")
    theirs = jax.jit(make(jnp), static_argnums=1, static_argnames="mode")
    for args, kwargs in [((X, 2), {}), ((X,), {"n": 3}), ((X, 3), {"mode": "mean"}),
                         ((X,), {"n": 2, "mode": "mean"})]:
        np.testing.assert_allclose(ours(*args, **kwargs), theirs(*args, **kwargs), rtol=1e-12)


# --- checkpoint: keyword and pytree arguments, pytree results ---------------------------------


W = RNG.standard_normal((3, 3))
B = RNG.standard_normal(3)
H = RNG.standard_normal((4, 3))
C = RNG.standard_normal(3)


def block(params, h, *, act="sin", scale=1.0, steps=1):
    """A layer taking a dict of arrays (a list inside), a string, a float and an int."""
    for _ in range(steps):                              # needs a Python int: passed as it is
        z = h @ params["w"] + params["b"][0] * params["c"]
        a = tnp.sin(z) if act == "sin" else tnp.tanh(z)
        h = h + scale * a * a
    return {"h": h, "stats": [tnp.sum(a), (tnp.mean(z),)]}


def _loss_of(outs):
    return tnp.sum(outs["h"] ** 2) + 3.0 * outs["stats"][0] - outs["stats"][1][0]


def _plain_loss(w, b, h, **kwargs) -> float:
    """The loss on NumPy arrays, without checkpoint: what finite differences are taken of."""
    return float(_loss_of(block({"w": w, "b": [b], "c": C, "name": "layer"}, h, **kwargs)))


KWARGS = {"act": "sin", "scale": 0.5, "steps": 2}


def test_eager_checkpoint_takes_keywords_and_pytrees(sin_counter):
    def leaves():
        w, b, h = (tnp.tensor(v, requires_grad=True) for v in (W, B, H))
        c = tnp.tensor(C)                                    # a tensor that needs no grad
        return w, b, h, c
    w, b, h, c = leaves()
    plain = block({"w": w, "b": [b], "c": c, "name": "layer"}, h, **KWARGS)
    expected = _loss_of(plain).backward()
    sin_counter[0] = 0

    wc, bc, hc, cc = leaves()
    out = tnp.checkpoint(block)({"w": wc, "b": [bc], "c": cc, "name": "layer"}, hc, **KWARGS)
    # the structure f returns, with Tensors that require grad
    assert isinstance(out, dict) and set(out) == {"h", "stats"}
    assert isinstance(out["stats"], list) and isinstance(out["stats"][1], tuple)
    assert all(isinstance(t, Tensor) and t.requires_grad
               for t in (out["h"], out["stats"][0], out["stats"][1][0]))
    np.testing.assert_allclose(out["h"].data, plain["h"].data, rtol=1e-15)
    assert not np.shares_memory(out["h"].data, hc.data)
    forward = sin_counter[0]
    assert forward == 2                                  # steps=2: sin once per step
    grads = _loss_of(out).backward()
    assert sin_counter[0] >= 2 * forward                 # the block ran again in backward
    for mine, theirs in [(wc, w), (bc, b), (hc, h)]:    # every tensor leaf that requires grad
        np.testing.assert_allclose(grads.grad(mine), expected.grad(theirs), rtol=1e-12)
        np.testing.assert_allclose(mine.grad, theirs.grad, rtol=1e-12)
    assert grads.grad(cc) is None and cc.grad is None   # a tensor that requires none
    # against finite differences of the plain function
    np.testing.assert_allclose(
        grads.grad(wc), numeric_grad(lambda v: _plain_loss(v, B, H, **KWARGS), W),
        rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(
        grads.grad(bc), numeric_grad(lambda v: _plain_loss(W, v, H, **KWARGS), B),
        rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(
        grads.grad(hc), numeric_grad(lambda v: _plain_loss(W, B, v, **KWARGS), H),
        rtol=1e-6, atol=1e-8)


def test_eager_checkpoint_array_leaves_are_constants_and_numbers_pass_as_they_are():
    x = tnp.tensor(np.array([0.5, 1.0], np.float32), requires_grad=True)
    seen = []

    def f(v, pair, *, scale, label=None):
        seen.append((type(scale), type(pair[1]), label))
        return [v * scale * pair[0], {"n": v * pair[1]}]
    array = np.array([2.0, 3.0], np.float32)
    out = tnp.checkpoint(f)(x, (array, 4), scale=2.0, label="a")
    assert seen == [(float, int, "a")]                  # numbers and strings reach f as they are
    assert isinstance(out, list) and isinstance(out[1], dict)
    assert out[0].dtype == np.float32 == out[1]["n"].dtype   # as without checkpoint
    array[...] = 0.0                                     # written after: the node kept a copy
    grads = (tnp.sum(out[0]) + tnp.sum(out[1]["n"])).backward()
    np.testing.assert_allclose(grads.grad(x), 2.0 * np.array([2.0, 3.0]) + 4, rtol=1e-6)
    assert tnp.checkpoint(lambda v, s: [])(x, "s") == []     # no array out: nothing recorded


def test_eager_checkpoint_gives_gradients_to_tensors_inside_other_objects():
    from types import SimpleNamespace
    layer = SimpleNamespace(w=tnp.tensor(np.array([2.0, 3.0]), requires_grad=True))
    x = tnp.tensor(np.array([1.0, -1.0]), requires_grad=True)
    y = tnp.checkpoint(lambda v, module: tnp.sin(v * module.w))(x, module=layer)
    grads = tnp.sum(y).backward()
    np.testing.assert_allclose(grads.grad(layer.w), np.cos(x.data * [2.0, 3.0]) * x.data,
                               rtol=1e-12)
    np.testing.assert_allclose(grads.grad(x), np.cos(x.data * [2.0, 3.0]) * [2.0, 3.0],
                               rtol=1e-12)


def _functional_loss(checkpointed: bool, **kwargs):
    wrap = tnp.checkpoint if checkpointed else (lambda f: f)

    def loss(params, h):
        return _loss_of(wrap(block)({**params, "c": C, "name": "layer"}, h, **kwargs))
    return loss


@pytest.mark.parametrize("transform", ["grad", "jit(grad)", "grad(jit)", "vmap(grad)"])
def test_checkpoint_takes_keywords_and_pytrees_under_the_transforms(transform):
    params = {"w": W, "b": [B]}

    def run(loss):
        if transform == "grad":
            return tnp.grad(loss)(params, H)
        if transform == "jit(grad)":
            step = tnp.jit(tnp.grad(loss))
            step(params, H)
            return step(params, H)                        # the compiled program
        if transform == "grad(jit)":
            return tnp.grad(tnp.jit(loss))(params, H)
        per_row = tnp.vmap(tnp.grad(loss), in_axes=(None, 0))(params, H[:, None, :])
        return {"w": tnp.sum(per_row["w"], axis=0), "b": [tnp.sum(per_row["b"][0], axis=0)]}

    got = run(_functional_loss(True, **KWARGS))
    want = run(_functional_loss(False, **KWARGS))
    assert set(got) == {"w", "b"} and isinstance(got["b"], list)
    np.testing.assert_allclose(got["w"], want["w"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got["b"][0], want["b"][0], rtol=1e-12, atol=1e-14)
    if transform != "vmap(grad)":                          # vmap: a sum of per-row losses
        np.testing.assert_allclose(
            got["w"], numeric_grad(lambda v: _plain_loss(v, B, H, **KWARGS), W),
            rtol=1e-6, atol=1e-8)


def test_checkpoint_with_pytrees_and_keywords_recomputes_under_jit():
    weights = [{"w": RNG.standard_normal((32, 32)) / 6, "b": [np.zeros(32)]} for _ in range(12)]
    h0 = RNG.standard_normal((128, 32))

    def layer(p, h, *, act, scale):
        a = tnp.tanh(h @ p["w"] + p["b"][0]) if act == "tanh" else tnp.sin(h @ p["w"])
        return {"h": h + scale * (a * a + tnp.sin(a))}

    def network(checkpointed):
        blk = tnp.checkpoint(layer) if checkpointed else layer

        def loss(ws, h):
            for p in ws:
                h = blk(p, h, act="tanh", scale=0.1)["h"]
            return tnp.sum(h)
        return loss

    def peak_and_grads(loss):
        return warm_call_peak(tnp.jit(tnp.grad(loss)), weights, h0)
    plain, expected = peak_and_grads(network(False))
    peak, grads = peak_and_grads(network(True))
    for g, e in zip(grads, expected):
        np.testing.assert_array_equal(g["w"], e["w"])
        np.testing.assert_array_equal(g["b"][0], e["b"][0])
    assert peak < 0.6 * plain                             # the blocks' values were recomputed


def test_checkpoint_with_pytrees_and_keywords_agrees_with_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def make(np_):
        def f(params, h, *, scale):
            a = np_.sin(h @ params["w"] + params["b"][0])
            return {"h": h + scale * a * a, "s": (np_.sum(a),)}
        return f

    def loss_of(out, np_):
        return np_.sum(out["h"] ** 2) + out["s"][0]
    params = {"w": W, "b": [B]}
    theirs = jax.grad(lambda p, h: loss_of(jax.checkpoint(make(jnp))(p, h, scale=0.5), jnp),
                      argnums=(0, 1))(params, H)
    ours = tnp.grad(lambda p, h: loss_of(tnp.checkpoint(make(tnp))(p, h, scale=0.5), tnp),
                    argnums=(0, 1))(params, H)
    np.testing.assert_allclose(ours[0]["w"], theirs[0]["w"], rtol=1e-12)
    np.testing.assert_allclose(ours[0]["b"][0], theirs[0]["b"][0], rtol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
    w, b, h = (tnp.tensor(v, requires_grad=True) for v in (W, B, H))     # and eagerly
    grads = loss_of(tnp.checkpoint(make(tnp))({"w": w, "b": [b]}, h, scale=0.5), tnp).backward()
    np.testing.assert_allclose(grads.grad(w), theirs[0]["w"], rtol=1e-12)
    np.testing.assert_allclose(grads.grad(b), theirs[0]["b"][0], rtol=1e-12)
    np.testing.assert_allclose(grads.grad(h), theirs[1], rtol=1e-12)


def test_checkpoint_misuse_is_named():
    x = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)

    def labelled(v, *, label):
        return v * 2.0, label                              # a string is not a result
    with pytest.raises(FunctionalError, match="checkpoint: .*labelled returned str") as caught:
        tnp.checkpoint(labelled)(x, label="a")
    assert isinstance(caught.value, TiduError)
    with pytest.raises(TiduError, match="dict keys must be sortable"):
        tnp.checkpoint(lambda d: d[1])({1: x, "a": x})
    assert tnp.checkpoint(labelled).__name__ == "labelled"


def test_checkpoint_of_a_block_reading_traced_weights_from_its_closure():
    # the common layer pattern: the block's argument is a plain array, the weights it reads
    # are the differentiated (traced) values: it runs on the enclosing trace, as in JAX
    weights = [RNG.standard_normal((32, 32)) / 6 for _ in range(12)]
    h0 = RNG.standard_normal((128, 32))

    def network(mode):
        def loss(ws, h_arg):
            h = h0 if mode == "closure" else h_arg        # "argument": h is traced too
            for w in ws:
                block = lambda h: h + 0.1 * tnp.sin(tnp.tanh(h @ w))      # noqa: E731, B023
                h = block(h) if mode == "plain" else tnp.checkpoint(block)(h)
            return tnp.sum(h * h)
        return loss

    expected = tnp.grad(network("plain"))(weights, h0)
    for transform in (tnp.grad, lambda f: tnp.jit(tnp.grad(f)), lambda f: tnp.grad(tnp.jit(f))):
        for got, want in zip(transform(network("closure"))(weights, h0), expected):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    w1 = weights[0]
    one = lambda w: tnp.sum(tnp.checkpoint(lambda v: tnp.sin(v @ w))(h0[:2]))     # noqa: E731
    np.testing.assert_allclose(
        tnp.grad(one)(w1), numeric_grad(lambda v: float(np.sum(np.sin(h0[:2] @ v))), w1),
        rtol=1e-6, atol=1e-8)
    batched = tnp.vmap(tnp.grad(one))(np.stack([w1, 2 * w1]))
    np.testing.assert_allclose(batched[1], tnp.grad(one)(2 * w1), rtol=1e-12)

    def peak(mode):
        return warm_call_peak(tnp.jit(tnp.grad(network(mode))), weights, h0)[0]
    plain, closure, argument = peak("plain"), peak("closure"), peak("argument")
    # the blocks were recomputed under jit, as when the block's argument is traced
    assert closure < 0.8 * plain and closure <= 1.01 * argument


def test_checkpoint_refuses_eager_tensors_meeting_values_traced_by_a_transform():
    x = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    f = lambda w: tnp.sum(tnp.checkpoint(lambda v: tnp.sin(v * w))(x))     # noqa: E731
    with pytest.raises(FunctionalError, match="checkpoint of .*eager Tensor"):
        tnp.grad(f)(np.float64(0.5))
    assert float(tnp.sum(tnp.checkpoint(tnp.sin)(x)).backward().grad(x)[0]) == np.cos(1.0)
