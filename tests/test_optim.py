"""``primitives.tensor.optim`` against the published update equations and torch.optim.

optax is not a dependency: the functional transformations are checked against
reference implementations of optax's equations written here, and against
``torch.optim`` where the two agree (SGD with momentum and Nesterov, Adam,
AdamW, RMSprop with ``eps=0``), over several steps in float64 to 1e-12. The
torch-style classes are checked against torch.optim directly. Also: pytrees,
schedules, jit of a whole step, differentiating through an update, dtypes, and
clear errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import optim
from primitives.tensor.errors import TensorTypeError
from primitives.tensor.transforms.pytree import tree_flatten
from tidu import TiduError

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
STEPS = 6


def _params():
    rng = np.random.default_rng(1)
    return {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2),
            "layers": [rng.standard_normal(4), np.array(0.7)]}


def _grads(step):
    """A different gradient tree at each step (fixed: the same for every optimizer)."""
    rng = np.random.default_rng(100 + step)
    return {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2),
            "layers": [rng.standard_normal(4), np.array(rng.standard_normal())]}


def _leaves(tree):
    return tree_flatten(tree)[0]


def _run_functional(opt, steps=STEPS, grads=_grads):
    params = _params()
    state = opt.init(params)
    for k in range(steps):
        updates, state = opt.update(grads(k), state, params)
        params = optim.apply_updates(params, updates)
    return params


def _run_reference(update_leaf, steps=STEPS):
    """``update_leaf(param, grad, slot, step) -> new param``, per leaf (slot: its state)."""
    params = _leaves(_params())
    slots = [{} for _ in params]
    for k in range(steps):
        grads = _leaves(_grads(k))
        params = [update_leaf(p, g, s, k + 1) for p, g, s in zip(params, grads, slots)]
    return params


def _run_torch(make, steps=STEPS):
    params = [torch.tensor(p, dtype=torch.float64, requires_grad=True)
              for p in _leaves(_params())]
    opt = make(params)
    for k in range(steps):
        for p, g in zip(params, _leaves(_grads(k))):
            p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
    return [p.detach().numpy() for p in params]


def _assert_trees_close(ours, want, rtol=1e-12):
    ours = _leaves(ours) if isinstance(ours, dict) else ours
    assert len(ours) == len(want)
    for a, b in zip(ours, want):
        assert np.shape(a) == np.shape(b)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-14)


# --- reference implementations of optax's equations ---------------------------------------


def ref_sgd(lr, momentum=0.0, nesterov=False):
    def update(p, g, s, k):
        if momentum:
            s["t"] = g + momentum * s.get("t", 0.0)
            g = g + momentum * s["t"] if nesterov else s["t"]
        return p - lr(k - 1) * g if callable(lr) else p - lr * g
    return update


def ref_adam(lr, b1=0.9, b2=0.999, eps=1e-8, eps_root=0.0, weight_decay=0.0):
    def update(p, g, s, k):
        s["m"] = (1 - b1) * g + b1 * s.get("m", 0.0)
        s["v"] = (1 - b2) * g * g + b2 * s.get("v", 0.0)
        m_hat = s["m"] / (1 - b1 ** k)
        v_hat = s["v"] / (1 - b2 ** k)
        u = m_hat / (np.sqrt(v_hat + eps_root) + eps) + weight_decay * p
        return p - (lr(k - 1) if callable(lr) else lr) * u
    return update


def ref_rmsprop(lr, decay=0.9, eps=1e-8, initial_scale=0.0, centered=False, momentum=None,
                nesterov=False, eps_in_sqrt=True):
    def update(p, g, s, k):
        s["v"] = (1 - decay) * g * g + decay * s.get("v", initial_scale)
        v = s["v"]
        if centered:
            s["m"] = (1 - decay) * g + decay * s.get("m", 0.0)
            v = v - s["m"] ** 2
        u = -lr * (g / np.sqrt(v + eps) if eps_in_sqrt else g / (np.sqrt(v) + eps))
        if momentum is not None:
            s["t"] = u + momentum * s.get("t", 0.0)
            u = u + momentum * s["t"] if nesterov else s["t"]
        return p + u
    return update


FUNCTIONAL_CASES = {
    "sgd": (lambda: optim.sgd(0.1), ref_sgd(0.1)),
    "sgd_momentum": (lambda: optim.sgd(0.1, momentum=0.9), ref_sgd(0.1, 0.9)),
    "sgd_nesterov": (lambda: optim.sgd(0.05, 0.8, nesterov=True), ref_sgd(0.05, 0.8, True)),
    "sgd_schedule": (lambda: optim.sgd(lambda k: 0.1 / (1 + k)),
                     ref_sgd(lambda k: 0.1 / (1 + k))),
    "adam": (lambda: optim.adam(0.01), ref_adam(0.01)),
    "adam_betas": (lambda: optim.adam(0.02, 0.8, 0.99, 1e-6, eps_root=1e-9),
                   ref_adam(0.02, 0.8, 0.99, 1e-6, 1e-9)),
    "adam_schedule": (lambda: optim.adam(lambda k: 0.01 * 0.9 ** k),
                      ref_adam(lambda k: 0.01 * 0.9 ** k)),
    "adamw": (lambda: optim.adamw(0.01), ref_adam(0.01, weight_decay=1e-4)),
    "adamw_decay": (lambda: optim.adamw(0.03, weight_decay=0.1),
                    ref_adam(0.03, weight_decay=0.1)),
    "rmsprop": (lambda: optim.rmsprop(0.01), ref_rmsprop(0.01)),
    "rmsprop_centered": (lambda: optim.rmsprop(0.01, 0.8, 1e-6, centered=True),
                         ref_rmsprop(0.01, 0.8, 1e-6, centered=True)),
    "rmsprop_momentum": (lambda: optim.rmsprop(0.01, momentum=0.9, nesterov=True,
                                               initial_scale=1.0),
                         ref_rmsprop(0.01, momentum=0.9, nesterov=True, initial_scale=1.0)),
    "rmsprop_eps_outside": (lambda: optim.rmsprop(0.01, eps=1e-3, eps_in_sqrt=False),
                            ref_rmsprop(0.01, eps=1e-3, eps_in_sqrt=False)),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONAL_CASES))
def test_functional_matches_the_update_equations(name):
    make, reference = FUNCTIONAL_CASES[name]
    _assert_trees_close(_run_functional(make()), _run_reference(reference))


@pytest.mark.parametrize("name", sorted(FUNCTIONAL_CASES))
def test_functional_step_under_jit(name):
    make, _ = FUNCTIONAL_CASES[name]
    opt = make()

    @tnp.jit
    def step(params, state, grads):
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state

    params = _params()
    state = opt.init(params)
    for k in range(STEPS):
        params, state = step(params, state, _grads(k))
    _assert_trees_close(params, _leaves(_run_functional(make())))


TORCH_CASES = {
    "sgd_momentum": (lambda: optim.sgd(0.1, momentum=0.9),
                     lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)),
    "sgd_nesterov": (lambda: optim.sgd(0.05, momentum=0.8, nesterov=True),
                     lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True)),
    "adam": (lambda: optim.adam(0.01, 0.85, 0.99, 1e-7),
             lambda ps: torch.optim.Adam(ps, lr=0.01, betas=(0.85, 0.99), eps=1e-7)),
    "adamw": (lambda: optim.adamw(0.01, weight_decay=0.05),
              lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.05)),
    # optax puts eps inside the root and torch outside: they agree for eps = 0
    "rmsprop": (lambda: optim.rmsprop(0.01, decay=0.95, eps=0.0),
                lambda ps: torch.optim.RMSprop(ps, lr=0.01, alpha=0.95, eps=0.0)),
    "rmsprop_eps_outside": (lambda: optim.rmsprop(0.01, 0.95, 1e-3, eps_in_sqrt=False),
                            lambda ps: torch.optim.RMSprop(ps, lr=0.01, alpha=0.95, eps=1e-3)),
    "rmsprop_centered": (lambda: optim.rmsprop(0.01, 0.9, 0.0, centered=True),
                         lambda ps: torch.optim.RMSprop(ps, lr=0.01, alpha=0.9, eps=0.0,
                                                        centered=True)),
    "rmsprop_momentum": (lambda: optim.rmsprop(0.01, 0.9, 0.0, momentum=0.5),
                         lambda ps: torch.optim.RMSprop(ps, lr=0.01, alpha=0.9, eps=0.0,
                                                        momentum=0.5)),
}


@pytest.mark.parametrize("name", sorted(TORCH_CASES))
def test_functional_matches_torch(name):
    ours, theirs = TORCH_CASES[name]
    _assert_trees_close(_run_functional(ours(), steps=10), _run_torch(theirs, steps=10))


# --- the torch-style classes ------------------------------------------------------------------


EAGER_CASES = {
    "SGD": (lambda ts: optim.SGD(ts, lr=0.1), lambda ps: torch.optim.SGD(ps, lr=0.1)),
    "SGD_momentum": (lambda ts: optim.SGD(ts, 0.1, momentum=0.9, dampening=0.1,
                                          weight_decay=0.01),
                     lambda ps: torch.optim.SGD(ps, 0.1, momentum=0.9, dampening=0.1,
                                                weight_decay=0.01)),
    "SGD_nesterov": (lambda ts: optim.SGD(ts, 0.1, momentum=0.9, nesterov=True),
                     lambda ps: torch.optim.SGD(ps, 0.1, momentum=0.9, nesterov=True)),
    "Adam": (lambda ts: optim.Adam(ts, lr=0.01), lambda ps: torch.optim.Adam(ps, lr=0.01)),
    "Adam_options": (lambda ts: optim.Adam(ts, 0.02, betas=(0.8, 0.99), eps=1e-6,
                                           weight_decay=0.1),
                     lambda ps: torch.optim.Adam(ps, 0.02, betas=(0.8, 0.99), eps=1e-6,
                                                 weight_decay=0.1)),
    "AdamW": (lambda ts: optim.AdamW(ts, lr=0.01), lambda ps: torch.optim.AdamW(ps, lr=0.01)),
    "RMSprop": (lambda ts: optim.RMSprop(ts, lr=0.01),
                lambda ps: torch.optim.RMSprop(ps, lr=0.01)),
    "RMSprop_options": (lambda ts: optim.RMSprop(ts, 0.01, alpha=0.9, eps=1e-4,
                                                 weight_decay=0.1, momentum=0.5,
                                                 centered=True),
                        lambda ps: torch.optim.RMSprop(ps, 0.01, alpha=0.9, eps=1e-4,
                                                       weight_decay=0.1, momentum=0.5,
                                                       centered=True)),
}


def _loss_weights():
    return [np.random.default_rng(7 + i).standard_normal(np.shape(p))
            for i, p in enumerate(_leaves(_params()))]


@pytest.mark.parametrize("name", sorted(EAGER_CASES))
def test_eager_optimizers_match_torch(name):
    """The same training loop (a quartic loss, so gradients change) in tidu and in torch."""
    ours, theirs = EAGER_CASES[name]
    weights = _loss_weights()
    tensors = [tnp.tensor(p, requires_grad=True) for p in _leaves(_params())]
    params = [torch.tensor(p, dtype=torch.float64, requires_grad=True)
              for p in _leaves(_params())]
    opt, reference = ours(tensors), theirs(params)
    for _ in range(8):
        opt.zero_grad()
        loss = sum(tnp.sum((t * w) ** 2 * (1 + t * t)) for t, w in zip(tensors, weights))
        loss.backward()
        opt.step()
        reference.zero_grad()
        loss = sum(((p * torch.tensor(w)) ** 2 * (1 + p * p)).sum()
                   for p, w in zip(params, weights))
        loss.backward()
        reference.step()
    for t, p in zip(tensors, params):
        np.testing.assert_allclose(t.data, p.detach().numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop", "SGD_momentum"])
def test_eager_optimizers_on_complex_tensors_match_torch(name):
    """torch treats a complex parameter as its real and imaginary parts (view_as_real)."""
    ours, theirs = EAGER_CASES[name]
    z0 = np.array([1.0 + 2.0j, -0.5 + 0.3j, 0.2 - 1.0j])
    t = tnp.tensor(z0, requires_grad=True)
    p = torch.tensor(z0, requires_grad=True)
    opt, reference = ours([t]), theirs([p])
    for k in range(5):
        g = np.array([0.3 - 1.0j, 2.0 + 0.1j, -0.7 + 0.4j]) * (k + 1) ** 0.5
        t.grad = g
        opt.step()
        p.grad = torch.tensor(g)
        reference.step()
    np.testing.assert_allclose(t.data, p.detach().numpy(), rtol=1e-12, atol=1e-14)


def test_step_skips_tensors_without_grad_and_zero_grad_sets_none():
    a = tnp.tensor([1.0, 2.0], requires_grad=True)
    b = tnp.tensor([3.0], requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    tnp.sum(a * a).backward()
    opt.step()
    np.testing.assert_allclose(a.data, [0.9, 1.9])
    np.testing.assert_array_equal(b.data, [3.0])
    assert a.grad is not None
    opt.zero_grad()
    assert a.grad is None and b.grad is None
    tnp.sum(b * b).backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(b.grad, [0.0])
    assert a.grad is None


def test_step_keeps_recorded_values():
    """Updating after a forward pass and before its backward changes no recorded value."""
    w = tnp.tensor([2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.5)
    tnp.sum(w * w).backward()
    y = tnp.sum(w * w * w)                  # records w = 2
    opt.step()                              # w = 2 - 0.5 * 4 = 0
    np.testing.assert_array_equal(w.data, [0.0])
    opt.zero_grad()
    np.testing.assert_array_equal(y.backward().grad(w), [12.0])     # 3 * 2^2


def test_step_with_closure_and_create_graph_gradients():
    w = tnp.tensor([1.0, -1.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = tnp.sum(w ** 2)
        loss.backward(create_graph=True)    # .grad is a Tensor with history
        return loss

    loss = opt.step(closure)
    assert float(loss.data) == 2.0
    np.testing.assert_allclose(w.data, [0.8, -0.8])


def test_float32_tensors_stay_float32():
    w = tnp.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    for cls in (optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop):
        opt = cls([w], lr=0.01)
        tnp.sum(w * w).backward()
        opt.step()
        opt.zero_grad()
        assert w.dtype == np.float32 and w.data.dtype == np.float32


def test_eager_errors_name_the_optimizer():
    w = tnp.tensor([1.0], requires_grad=True)
    with pytest.raises(TensorTypeError, match="optim.SGD"):
        optim.SGD(w, lr=0.1)                                # a Tensor, not a list of them
    with pytest.raises(TensorTypeError, match="optim.Adam"):
        optim.Adam([np.ones(2)], lr=0.1)
    with pytest.raises(TiduError, match="non-leaf"):
        optim.Adam([w * 2], lr=0.1)
    with pytest.raises(TiduError, match="more than once"):
        optim.SGD([w, w], lr=0.1)
    with pytest.raises(TiduError, match="empty"):
        optim.RMSprop([], lr=0.1)
    with pytest.raises(TiduError, match="Nesterov"):
        optim.SGD([w], lr=0.1, nesterov=True)


# --- the functional transformations: more -------------------------------------------------


def test_updates_are_added_and_state_is_a_pytree():
    opt = optim.adam(0.1)
    params = {"a": np.array([1.0, 2.0]), "b": (np.array(3.0),)}
    state = opt.init(params)
    updates, new_state = opt.update({"a": np.array([1.0, -1.0]), "b": (np.array(2.0),)},
                                    state)
    np.testing.assert_allclose(updates["a"], [-0.1, 0.1])      # Adam's first step
    assert type(updates["b"]) is tuple
    assert new_state is not state
    np.testing.assert_array_equal(state[0].mu["a"], [0.0, 0.0])  # init's state unchanged
    new = optim.apply_updates(params, updates)
    np.testing.assert_allclose(new["a"], [0.9, 2.1])


def test_apply_updates_keeps_each_parameter_dtype():
    params = [np.ones(2, np.float32), np.ones(2)]
    updates = [np.full(2, 0.5), np.full(2, 0.25, np.float32)]
    new = optim.apply_updates(params, updates)
    assert new[0].dtype == np.float32 and new[1].dtype == np.float64


def test_float32_parameters_keep_their_dtype():
    params = {"w": np.ones(3, np.float32)}
    for opt in (optim.sgd(0.1, 0.9), optim.adam(0.1), optim.adamw(0.1), optim.rmsprop(0.1),
                optim.adam(lambda k: 0.1 / (k + 1))):
        state = opt.init(params)
        updates, state = opt.update({"w": np.full(3, 0.5, np.float32)}, state, params)
        assert updates["w"].dtype == np.float32
        assert optim.apply_updates(params, updates)["w"].dtype == np.float32


def test_schedule_sees_the_step_count_under_jit():
    seen = []
    opt = optim.sgd(lambda k: 0.5 ** k)             # traced under jit: no Python branching
    step = tnp.jit(lambda p, s, g: opt.update(g, s, p))
    params, state = np.array([0.0]), opt.init(np.array([0.0]))
    for _ in range(4):
        updates, state = step(params, state, np.array([1.0]))
        seen.append(float(updates[0]))
    assert seen == [-1.0, -0.5, -0.25, -0.125]


def test_training_loop_with_jit_value_and_grad():
    x = RNG.standard_normal((20, 3))
    true_w = np.array([1.0, -2.0, 0.5])
    y = x @ true_w
    opt = optim.adam(0.05)
    params = {"w": np.zeros(3), "b": np.zeros(())}

    def loss(p):
        return tnp.mean((tnp.matmul(x, p["w"]) + p["b"] - y) ** 2)

    @tnp.jit
    def step(p, s):
        value, grads = tnp.value_and_grad(loss)(p)
        updates, s = opt.update(grads, s, p)
        return optim.apply_updates(p, updates), s, value

    state = opt.init(params)
    for _ in range(400):
        params, state, value = step(params, state)
    assert float(value) < 1e-4
    np.testing.assert_allclose(params["w"], true_w, atol=1e-2)


def test_differentiating_through_an_update():
    """Meta-gradient: d/d(lr) of the loss after one SGD step, against finite differences."""
    p0 = np.array([1.0, -2.0])

    def after_step(lr):
        opt = optim.sgd(lr)
        grads = tnp.grad(lambda p: tnp.sum(p ** 4))(p0)
        updates, _ = opt.update(grads, opt.init(p0))
        return tnp.sum(optim.apply_updates(p0, updates) ** 2)

    # lr is traced: through the schedule form, which takes any value
    def after_step_schedule(lr):
        opt = optim.sgd(lambda k: lr)
        grads = tnp.grad(lambda p: tnp.sum(p ** 4))(p0)
        updates, _ = opt.update(grads, opt.init(p0))
        return tnp.sum(optim.apply_updates(p0, updates) ** 2)

    lr = 0.01
    numeric = (float(after_step(lr + 1e-6)) - float(after_step(lr - 1e-6))) / 2e-6
    np.testing.assert_allclose(float(tnp.grad(after_step_schedule)(np.array(lr))), numeric,
                               rtol=1e-6)
    # and through Adam's moments with respect to the gradient
    opt = optim.adam(0.1)
    g = np.array([0.3, -0.2])
    f = lambda grads: tnp.sum(opt.update(grads, opt.init(p0))[0] ** 2)  # noqa: E731
    eps = 1e-7
    fd = np.array([(float(f(g + eps * e)) - float(f(g - eps * e))) / (2 * eps)
                   for e in np.eye(2)])
    np.testing.assert_allclose(tnp.grad(f)(g), fd, rtol=1e-5, atol=1e-9)


def test_adamw_mask():
    params = {"w": np.array([1.0]), "b": np.array([1.0])}
    grads = {"w": np.array([0.0]), "b": np.array([0.0])}
    opt = optim.adamw(0.1, weight_decay=0.5, mask={"w": True, "b": False})
    updates, _ = opt.update(grads, opt.init(params), params)
    np.testing.assert_allclose(updates["w"], [-0.05])
    np.testing.assert_allclose(updates["b"], [0.0])
    opt = optim.adamw(0.1, weight_decay=0.5, mask=lambda p: {"w": False, "b": True})
    updates, _ = opt.update(grads, opt.init(params), params)
    np.testing.assert_allclose(updates["b"], [-0.05])


def test_functional_errors_name_the_optimizer():
    opt = optim.adamw(0.1)
    state = opt.init({"w": np.ones(2)})
    with pytest.raises(TiduError, match="optim.adamw.*params"):
        opt.update({"w": np.ones(2)}, state)
    with pytest.raises(TiduError, match="optim.adamw.*structure"):
        opt.update({"v": np.ones(2)}, state, {"v": np.ones(2)})
    with pytest.raises(TiduError, match="optim.sgd.*learning_rate"):
        optim.sgd("fast")
    with pytest.raises(TiduError, match="chain"):
        optim.sgd(0.1).update({"w": np.ones(2)}, None)


def test_complex_parameters_follow_tidus_gradient_convention():
    """tidu's gradient of a real loss in z is dL/dRe + i dL/dIm: descent works as for reals."""
    target = np.array([1.0 + 1.0j, -2.0 + 0.5j])
    loss = lambda z: tnp.sum(tnp.abs(z - target) ** 2)  # noqa: E731
    opt = optim.adam(0.05)
    z = np.zeros(2, complex)
    state = opt.init(z)
    for _ in range(300):
        updates, state = opt.update(tnp.grad(loss)(z), state)
        z = optim.apply_updates(z, updates)
    np.testing.assert_allclose(z, target, atol=1e-2)
