"""Hostile round 53b: pytrees through the transforms, and the optimizers' training loops."""

import collections

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import optim
from primitives.tensor.optim import OptimizerError
from primitives.tensor.transforms.functional import FunctionalError
from tidu import TiduError

Pair = collections.namedtuple("Pair", "a b")


def test_custom_vjp_takes_a_named_tuple_argument():
    # bwd's cotangent for a named-tuple argument was always refused: "has structure
    # Pair(*, *), but the argument has Pair(*, *)" (named tuples were not a known node)
    @tnp.custom_vjp
    def f(p, s):
        return p.a * p.b * s

    def f_fwd(p, s):
        return f(p, s), (p, s)

    def f_bwd(res, ct):
        p, s = res
        return Pair(ct * p.b * s, tnp.sum(ct * p.a) * s), tnp.sum(ct * p.a * p.b)

    f.defvjp(f_fwd, f_bwd)
    p = Pair(np.array([1.0, 2.0]), np.array(3.0))
    loss = lambda p, s: tnp.sum(f(p, s) ** 2)                          # noqa: E731
    g_p, g_s = tnp.grad(loss, argnums=(0, 1))(p, np.array(0.5))
    assert type(g_p) is Pair
    # loss = s^2 b^2 sum(a^2): d/da = 2 s^2 b^2 a, d/db = 2 s^2 b sum(a^2), d/ds = 2 s b^2 sum(a^2)
    np.testing.assert_allclose(g_p.a, 2 * 0.25 * 9 * np.array([1.0, 2.0]))
    np.testing.assert_allclose(g_p.b, 2 * 0.25 * 3 * 5)
    np.testing.assert_allclose(g_s, 2 * 0.5 * 9 * 5)
    # a cotangent of another shape still raises, naming the function
    f.defvjp(f_fwd, lambda res, ct: (Pair(ct[:1], tnp.sum(ct)), tnp.sum(ct)))
    with pytest.raises(FunctionalError, match=r"custom_vjp function \S*\bf: its bwd rule's result "
                                              r"leaf 0 has shape \(1,\)"):
        tnp.grad(loss)(p, np.array(0.5))


def test_adam_resumes_from_torch_state_of_a_0d_tensor():
    # torch's "step" (a 0-d float32 tensor) was kept as a 0-d float32 array for a 0-d
    # parameter (only other shapes turned it into a number), so the bias corrections
    # 1 - beta ** step were rounded to float32: the steps drifted from torch's by ~2e-6
    torch = pytest.importorskip("torch", reason="PyTorch's Adam and its state dict are the oracle")
    tw = torch.tensor(1.0, requires_grad=True)
    t_opt = torch.optim.Adam([tw], lr=0.1)
    (tw * tw).backward()
    t_opt.step()
    w = tnp.tensor(tw.detach().numpy().copy(), requires_grad=True)
    opt = optim.Adam([w], lr=0.1)
    opt.load_state_dict(t_opt.state_dict())
    assert opt.state[w]["step"] == 1 and isinstance(opt.state[w]["step"], int)
    for _ in range(3):
        t_opt.zero_grad()
        (tw * tw).backward()
        t_opt.step()
        opt.zero_grad()
        (w * w).backward()
        opt.step()
    assert w.data == tw.detach().numpy()


def test_schedule_returning_a_vector_raises():
    # a schedule's value was not checked: a vector broadcast the updates (and then the
    # parameters) to its shape, silently
    opt = optim.sgd(lambda count: np.array([0.1, 0.2]))
    params = np.ones(1)
    with pytest.raises(OptimizerError, match="optim.sgd.*real scalar.*schedule"):
        opt.update(np.ones(1), opt.init(params))
    step = tnp.jit(lambda g, s: opt.update(g, s))
    with pytest.raises(OptimizerError, match="optim.sgd"):
        step(np.ones(1), opt.init(params))
    returns_a_function = optim.adam(lambda count: optim.sgd)
    with pytest.raises(OptimizerError, match="optim.adam.*function.*schedule"):
        returns_a_function.update(np.ones(1), returns_a_function.init(params))
    good = optim.sgd(lambda count: 0.5 ** count)                       # still usable
    updates, _ = tnp.jit(lambda g, s: good.update(g, s))(np.ones(1), good.init(params))
    np.testing.assert_array_equal(updates, [-1.0])


def test_update_with_another_optimizers_state_raises():
    # adam.update with sgd's state raised AttributeError ('TraceState' object has no
    # attribute 'mu'); rmsprop.update with adam's state silently used adam's nu
    params = {"w": np.ones(2)}
    grads = {"w": np.ones(2)}
    with pytest.raises(OptimizerError, match="optim.adam.*TraceState.*ScaleByAdamState"):
        optim.adam(0.1).update(grads, optim.sgd(0.1, momentum=0.9).init(params))
    with pytest.raises(OptimizerError, match="optim.rmsprop.*ScaleByAdamState"):
        optim.rmsprop(0.1).update(grads, optim.adam(0.1).init(params))
    with pytest.raises(OptimizerError, match="optim.sgd.*ScaleByScheduleState"):
        opt = optim.sgd(lambda count: 0.1, momentum=0.5)
        opt.update(grads, (optim.sgd(0.1, momentum=0.5).init(params)[0], "state"))


def test_adamw_mask_leaf_that_is_not_a_bool_raises():
    # a mask leaf holding an array of bools (one per element) raised NumPy's ValueError
    # ("truth value of an array ... is ambiguous") from inside the update
    opt = optim.adamw(0.1, weight_decay=0.5, mask={"a": np.array([True, False]), "b": False})
    params = {"a": np.ones(2), "b": np.ones(1)}
    with pytest.raises(OptimizerError, match="optim.adamw.*mask"):
        opt.update({"a": np.zeros(2), "b": np.zeros(1)}, opt.init(params), params)


def test_grad_errors_name_the_transform_called():
    # grad's argnums errors said "value_and_grad", value_and_grad's dtype errors said
    # "grad"; an unknown node type (an OrderedDict then, a node since round 58a; a class
    # not registered as one now) named neither function nor argument
    f = lambda x, y: x * y                                              # noqa: E731
    with pytest.raises(FunctionalError, match=r"^grad: argnums 2 out of range"):
        tnp.grad(f, argnums=2)(2.0, 3.0)
    with pytest.raises(FunctionalError, match=r"^value_and_grad: argument 1 has dtype int"):
        tnp.value_and_grad(f, argnums=1)(2.0, 3)

    class Box:
        a = np.array(1.0)
    with pytest.raises(TiduError, match=r"^grad: argument 1: .*Box"):
        tnp.grad(lambda x, d: x * d.a, argnums=(0, 1))(2.0, Box())
    assert tnp.grad(f, argnums=1)(2.0, 3.0) == 2.0
