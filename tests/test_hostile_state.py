"""Hostile state handling: results that alias what the caller holds, values recorded for a
backward that the caller changes afterwards, and the optimizers' state (compared with
PyTorch where it has the same API)."""

import numpy as np
import pytest

import primitives.tensor as tnp

# --- has_aux: aux arrays f returns as they are -----------------------------------------

_W = np.array([5.0, 6.0])


@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "vjp", "jvp", "jacrev",
                                       "jacfwd"])
def test_aux_returned_from_closure_is_a_copy(transform):
    held = np.array([5.0, 6.0])
    x = np.array([1.0, 2.0])

    def f(a):
        return tnp.sum(a * a), {"held": held, "global": _W, "view": held[:1]}

    if transform == "grad":
        aux = tnp.grad(f, has_aux=True)(x)[1]
    elif transform == "value_and_grad":
        aux = tnp.value_and_grad(f, has_aux=True)(x)[0][1]
    elif transform == "vjp":
        aux = tnp.vjp(f, x, has_aux=True)[2]
    elif transform == "jvp":
        aux = tnp.jvp(f, (x,), (np.ones(2),), has_aux=True)[2]
    else:
        aux = getattr(tnp, transform)(f, has_aux=True)(x)[1]
    for name, value in aux.items():
        assert not np.shares_memory(value, held), name
        assert not np.shares_memory(value, _W), name
    aux["held"][:] = 0
    aux["global"][:] = 0
    np.testing.assert_array_equal(held, [5.0, 6.0])
    np.testing.assert_array_equal(_W, [5.0, 6.0])


# --- custom rules: outputs and residuals a function holds ------------------------------

def test_custom_vjp_residual_from_closure_written_before_backward():
    residual = np.ones(3)

    @tnp.custom_vjp
    def f(a):
        return a * 2

    f.defvjp(lambda a: (a * 2, residual), lambda r, ct: (ct * r,))
    x = tnp.tensor(np.ones(3), requires_grad=True)
    y = f(x)
    residual[:] = 7                 # after the forward: the recorded residual must not move
    tnp.sum(y).backward()
    np.testing.assert_array_equal(x.grad, [1.0, 1.0, 1.0])


def test_custom_vjp_residual_attribute_rebound_and_written():
    class Model:
        def __init__(self):
            self.r = np.ones(3)

    model = Model()

    @tnp.custom_vjp
    def f(a):
        return a * 2

    f.defvjp(lambda a: (a * 2, model.r), lambda r, ct: (ct * r,))
    x = tnp.tensor(np.ones(3), requires_grad=True)
    tnp.sum(f(x)).backward()                    # the rule is made for this signature
    model.r = np.full(3, 3.0)                   # rebound: read again at the next call
    x.grad = None
    y = f(x)
    model.r[:] = 7
    tnp.sum(y).backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0, 3.0])


def test_custom_jvp_output_from_closure_is_owned_by_the_tensor():
    held = np.array([1.0, 2.0])

    @tnp.custom_jvp
    def f(a):
        return held

    f.defjvp(lambda p, t: (held, t[0] * 0.0))
    x = tnp.tensor(np.ones(2), requires_grad=True)
    y = f(x)
    held[:] = 9
    np.testing.assert_array_equal(y.data, [1.0, 2.0])


# --- optimizers -------------------------------------------------------------------------

def test_empty_chain_update_is_new_arrays():
    t = tnp.optim.chain()
    grads = {"a": np.ones(2), "b": [np.zeros(1)]}
    updates, state = t.update(grads, t.init(grads))
    assert state == ()
    assert not np.shares_memory(updates["a"], grads["a"])
    assert not np.shares_memory(updates["b"][0], grads["b"][0])
    updates["a"][:] = 5
    np.testing.assert_array_equal(grads["a"], [1.0, 1.0])


def _train_pair(name, kwargs, groups=False, toggle=None, steps=6):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    w0, v0 = rng.normal(size=3) + 1j * rng.normal(size=3), rng.normal(size=2)
    tw, tv = (torch.tensor(a, requires_grad=True) for a in (w0, v0))
    nw, nv = (tnp.tensor(a.copy(), requires_grad=True) for a in (w0, v0))
    extra = {"lr": 0.03, "amsgrad": True} if "Adam" in name else {"lr": 0.03}
    theirs = getattr(torch.optim, name)(
        [{"params": [tw]}, {"params": [tv], **extra}] if groups else [tw, tv], **kwargs)
    ours = getattr(tnp.optim, name)(
        [{"params": [nw]}, {"params": [nv], **extra}] if groups else [nw, nv], **kwargs)
    for k in range(steps):
        if toggle is not None and k == steps // 2:
            for opt in (theirs, ours):
                for group in opt.param_groups:
                    group[toggle] = not group[toggle]
        theirs.zero_grad()
        ours.zero_grad()
        ((tw.abs() ** 3 * torch.tensor([1.0, 2.0, 0.5])).sum()
         + ((tv - 0.3) ** 4).sum()).backward()
        (tnp.sum(tnp.abs(nw) ** 3 * np.array([1.0, 2.0, 0.5]))
         + tnp.sum((nv - 0.3) ** 4)).backward()
        theirs.step()
        ours.step()
    for t, n in ((tw, nw), (tv, nv)):
        expected = t.detach().numpy()
        np.testing.assert_allclose(n.data, expected, rtol=1e-10,
                                   atol=1e-12 * max(1.0, np.abs(expected).max()))
    return ours


@pytest.mark.parametrize("name,kwargs", [
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.05, maximize=True)),
    ("SGD", dict(lr=0.01, momentum=0.9, nesterov=True, weight_decay=0.1, maximize=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.1, maximize=True)),
])
@pytest.mark.parametrize("groups", [False, True])
def test_amsgrad_maximize_and_decoupled_decay_match_torch(name, kwargs, groups):
    ours = _train_pair(name, kwargs, groups)
    if kwargs.get("amsgrad"):
        assert all("max_exp_avg_sq" in s for s in ours.state.values())


@pytest.mark.parametrize("name,kwargs,toggle", [
    ("Adam", dict(lr=0.05, weight_decay=0.1), "maximize"),
    ("SGD", dict(lr=0.01, momentum=0.9), "maximize"),
    ("AdamW", dict(lr=0.05, amsgrad=True), "maximize"),
])
def test_a_groups_maximize_written_between_steps_is_read_as_torch(name, kwargs, toggle):
    _train_pair(name, kwargs, toggle=toggle)


def test_torch_group_options_are_not_silently_ignored():
    # before: a group's "amsgrad" / "maximize" was kept in the dict and ignored by step()
    torch = pytest.importorskip("torch")
    tw = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    nw = tnp.tensor([1.0, -2.0], requires_grad=True)
    theirs = torch.optim.Adam([{"params": [tw], "amsgrad": True, "maximize": True}], lr=0.1)
    ours = tnp.optim.Adam([{"params": [nw], "amsgrad": True, "maximize": True}], lr=0.1)
    for k in range(4):
        theirs.zero_grad()
        ours.zero_grad()
        (tw ** 2 * (k + 1) ** -2).sum().backward()
        tnp.sum(nw ** 2 * (k + 1) ** -2.0).backward()
        theirs.step()
        ours.step()
    np.testing.assert_allclose(nw.data, tw.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("Adam", dict(lr=0.1, amsgrad=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
])
def test_load_a_torch_state_dict(name, kwargs):
    torch = pytest.importorskip("torch")
    tw = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    theirs = getattr(torch.optim, name)([tw], **kwargs)
    for _ in range(2):
        theirs.zero_grad()
        (tw ** 2).sum().backward()
        theirs.step()
    nw = tnp.tensor(tw.detach().numpy().copy(), requires_grad=True)
    ours = getattr(tnp.optim, name)([nw], **kwargs)
    ours.load_state_dict(theirs.state_dict())
    for value in ours.state[nw].values():
        assert isinstance(value, (int, float, np.ndarray)), type(value)
    for _ in range(2):
        theirs.zero_grad()
        (tw ** 2).sum().backward()
        theirs.step()
        ours.zero_grad()
        tnp.sum(nw ** 2).backward()
        ours.step()
    np.testing.assert_allclose(nw.data, tw.detach().numpy(), rtol=1e-12)


def test_a_state_dict_saved_without_the_new_options_loads():
    w = tnp.tensor([1.0, 2.0], requires_grad=True)
    opt = tnp.optim.AdamW([w], lr=0.1)
    tnp.sum(w * w).backward()
    opt.step()
    saved = opt.state_dict()
    for group in saved["param_groups"]:
        for key in ("maximize", "amsgrad", "decoupled_weight_decay"):
            del group[key]
    again = tnp.optim.AdamW([w], lr=0.1)
    again.load_state_dict(saved)
    assert again.param_groups[0]["decoupled_weight_decay"] is True
    assert again.param_groups[0]["maximize"] is False


# --- vjp on eager Tensors: vjp_fn differentiates at the values of the call ------------

_X0 = np.array([0.3, 0.7])


def _written_in_place(t):
    with tnp.no_grad():
        t += 1.0


def test_vjp_of_a_tensor_written_in_place_afterwards():
    x = tnp.tensor(_X0.copy(), requires_grad=True)
    out, vjp_fn = tnp.vjp(lambda v: tnp.sin(v) * v, x)
    _written_in_place(x)
    (ct,) = vjp_fn(np.ones(2))
    # before: cos(x_new) * x_new + sin(x_old), a mix of the two points
    np.testing.assert_allclose(ct.data, np.cos(_X0) * _X0 + np.sin(_X0))


def test_vjp_of_a_tensor_whose_data_is_rebound_afterwards():
    x = tnp.tensor(_X0.copy(), requires_grad=True)
    out, vjp_fn = tnp.vjp(lambda v: tnp.sin(v) * v, x)
    x.data = np.array([5.0, 5.0])
    np.testing.assert_allclose(vjp_fn(np.ones(2))[0].data, np.cos(_X0) * _X0 + np.sin(_X0))


def test_vjp_output_tensor_written_in_place_afterwards():
    x = tnp.tensor(_X0.copy(), requires_grad=True)
    out, vjp_fn = tnp.vjp(tnp.exp, x)          # exp's derivative is its output
    _written_in_place(out)
    np.testing.assert_allclose(vjp_fn(np.ones(2))[0].data, np.exp(_X0))


def test_vjp_closed_over_tensor_written_in_place_afterwards():
    x = tnp.tensor(_X0.copy(), requires_grad=True)
    w = tnp.tensor([2.0, 3.0], requires_grad=True)
    out, vjp_fn = tnp.vjp(lambda v: tnp.sin(v * w), x)
    _written_in_place(w)
    wv = np.array([2.0, 3.0])
    (ct,) = vjp_fn(np.ones(2))
    np.testing.assert_allclose(ct.data, np.cos(_X0 * wv) * wv)
    # the copies vjp works on still carry derivatives back to x and w
    tnp.sum(ct + out).backward()
    np.testing.assert_allclose(x.grad, -np.sin(_X0 * wv) * wv ** 2 + np.cos(_X0 * wv) * wv)
    np.testing.assert_allclose(w.grad, -np.sin(_X0 * wv) * _X0 * wv + np.cos(_X0 * wv)
                               + np.cos(_X0 * wv) * _X0)


@pytest.mark.parametrize("name,kwargs", [("Adam", {}), ("SGD", {"momentum": 0.9}),
                                         ("RMSprop", {"centered": True})])
def test_step_after_data_rebound_to_another_shape_raises_before_updating(name, kwargs):
    # before: the (1,)-shaped state broadcast silently over the 3 new elements
    w = tnp.tensor([1.0], requires_grad=True)
    v = tnp.tensor([1.0, 1.0], requires_grad=True)
    opt = getattr(tnp.optim, name)([v, w], lr=0.1, **kwargs)
    tnp.sum(w * w + tnp.sum(v * v)).backward()
    opt.step()
    w.data = np.array([1.0, 2.0, 3.0])
    opt.zero_grad()
    tnp.sum(w * w).backward()
    tnp.sum(v * v).backward()
    before = v.data.copy()
    with pytest.raises(tnp.optim.OptimizerError, match="shape"):
        opt.step()
    np.testing.assert_array_equal(v.data, before)      # nothing half-done
    opt.state[w].clear()
    opt.step()                                          # a fresh state: usable again
    assert np.all(w.data < [1.0, 2.0, 3.0])
