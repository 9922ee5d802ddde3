"""Training programs ported from PyTorch to tidu's eager ``Tensor``, checked against torch.

Each program is written twice, as a PyTorch user would write it and as the same user
ports it to ``primitives.tensor`` (``tnp``): a hand-written LSTM trained with Adam and
gradient clipping, a causal self-attention block, gradient accumulation with frozen and
tied parameters, a WGAN-GP gradient penalty (double backward), a resumed run with a
learning-rate schedule, and a float32 model with embedding lookups. The torch halves
skip without torch; every program also checks tidu alone against central finite
differences, which runs everywhere. The last part is hostile use: conversions to NumPy
mid-graph, writes to values backward needs, backward twice, graphs used after a
backward, threads.
"""

from __future__ import annotations

import math
import pickle
import threading

import numpy as np
import pytest
from tensor_helpers import numeric_grad

import tidu
from primitives import tensor as tnp
from primitives.tensor import nn

TORCH_REASON = "these tests compare tidu's eager Tensor with PyTorch: pip install torch"
RTOL = 1e-10


def _torch():
    torch = pytest.importorskip("torch", reason=TORCH_REASON)
    torch.set_num_threads(1)
    return torch


def _close(a, b, rtol=RTOL, atol=1e-12, what=""):
    a = a.detach().numpy() if hasattr(a, "detach") and not isinstance(a, tnp.Tensor) else a
    a = a.data if isinstance(a, tnp.Tensor) else a
    b = b.detach().numpy() if hasattr(b, "detach") and not isinstance(b, tnp.Tensor) else b
    b = b.data if isinstance(b, tnp.Tensor) else b
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, err_msg=what)


def _leaves(values, dtype=np.float64):
    return [tnp.tensor(np.array(v, dtype=dtype), requires_grad=True) for v in values]


def _torch_leaves(torch, values, dtype=None):
    dtype = dtype or torch.float64
    return [torch.tensor(np.array(v), dtype=dtype, requires_grad=True) for v in values]


def _directional_fd(loss_of_arrays, arrays, position, direction, eps=1e-6):
    """d/dt loss(arrays with arrays[position] + t * direction) at t = 0, by central differences."""
    def at(t):
        moved = list(arrays)
        moved[position] = arrays[position] + t * direction
        return float(loss_of_arrays(moved))
    return (at(eps) - at(-eps)) / (2 * eps)


# ---------------------------------------------------------------------------------------
# 1. A character-level LSTM written by hand, Adam, gradient clipping by global norm
# ---------------------------------------------------------------------------------------

V, EMB, HID, SEQ, BATCH = 7, 4, 5, 6, 3


def _lstm_init(seed=0):
    rng = np.random.default_rng(seed)
    return [0.5 * rng.standard_normal((V, EMB)),            # E: embedding, looked up by index
            0.4 * rng.standard_normal((EMB, 4 * HID)),      # Wx
            0.4 * rng.standard_normal((HID, 4 * HID)),      # Wh
            0.1 * rng.standard_normal(4 * HID),             # b
            0.4 * rng.standard_normal((HID, V)),            # Wo
            np.zeros(V)]                                    # bo


def _lstm_data(seed=1):
    rng = np.random.default_rng(seed)
    text = rng.integers(0, V, size=(BATCH, SEQ + 1))       # repeated characters: repeated rows of E
    return text[:, :-1], text[:, 1:]


def lstm_loss_tidu(params, ids, targets):
    E, Wx, Wh, b, Wo, bo = params
    h = tnp.zeros((BATCH, HID))
    c = tnp.zeros((BATCH, HID))
    total = 0.0
    for t in range(SEQ):
        x = E[ids[:, t]]
        z = x @ Wx + h @ Wh + b
        i = nn.sigmoid(z[:, :HID])
        f = nn.sigmoid(z[:, HID:2 * HID])
        g = tnp.tanh(z[:, 2 * HID:3 * HID])
        o = nn.sigmoid(z[:, 3 * HID:])
        c = f * c + i * g
        h = o * tnp.tanh(c)
        logp = nn.log_softmax(h @ Wo + bo, axis=-1)
        total = total - tnp.mean(logp[tnp.arange(BATCH), targets[:, t]])
    return total / SEQ


def lstm_loss_torch(torch, params, ids, targets):
    E, Wx, Wh, b, Wo, bo = params
    h = torch.zeros(BATCH, HID, dtype=E.dtype)
    c = torch.zeros(BATCH, HID, dtype=E.dtype)
    total = 0.0
    for t in range(SEQ):
        x = E[ids[:, t]]
        z = x @ Wx + h @ Wh + b
        i = torch.sigmoid(z[:, :HID])
        f = torch.sigmoid(z[:, HID:2 * HID])
        g = torch.tanh(z[:, 2 * HID:3 * HID])
        o = torch.sigmoid(z[:, 3 * HID:])
        c = f * c + i * g
        h = o * torch.tanh(c)
        logp = torch.log_softmax(h @ Wo + bo, dim=-1)
        total = total - logp[torch.arange(BATCH), targets[:, t]].mean()
    return total / SEQ


def clip_grad_norm_tidu(params, max_norm):
    """torch.nn.utils.clip_grad_norm_, by hand (tnp has none): the grads scaled in place."""
    total = math.sqrt(sum(float(np.sum(p.grad ** 2)) for p in params))
    coef = min(max_norm / (total + 1e-6), 1.0)
    for p in params:
        p.grad *= coef
    return total


def test_lstm_gradient_matches_finite_differences():
    ids, targets = _lstm_data()
    arrays = _lstm_init()
    params = _leaves(arrays)
    grads = lstm_loss_tidu(params, ids, targets).backward()
    rng = np.random.default_rng(5)
    loss_of = lambda a: lstm_loss_tidu(a, ids, targets)
    for position, p in enumerate(params):                  # every parameter, one direction each
        direction = rng.standard_normal(p.shape)
        fd = _directional_fd(loss_of, arrays, position, direction)
        assert np.isclose(np.sum(grads.grad(p) * direction), fd, rtol=1e-6, atol=1e-8), position
    # the embedding, entry by entry: rows looked up several times sum their cotangents
    fd_E = numeric_grad(lambda E: loss_of([E] + arrays[1:]), arrays[0])
    np.testing.assert_allclose(params[0].grad, fd_E, rtol=1e-6, atol=1e-8)


def test_lstm_trained_with_adam_and_clipping_matches_torch_step_by_step():
    torch = _torch()
    ids, targets = _lstm_data()
    arrays = _lstm_init()
    ours, theirs = _leaves(arrays), _torch_leaves(torch, arrays)
    opt = tnp.optim.Adam(ours, lr=0.05, betas=(0.8, 0.99))
    topt = torch.optim.Adam(theirs, lr=0.05, betas=(0.8, 0.99))
    tids, ttargets = torch.tensor(ids), torch.tensor(targets)
    clipped = 0
    for step in range(6):
        opt.zero_grad()
        topt.zero_grad()
        loss = lstm_loss_tidu(ours, ids, targets)
        tloss = lstm_loss_torch(torch, theirs, tids, ttargets)
        _close(loss.item(), tloss.item(), what=f"loss at step {step}")
        loss.backward()
        tloss.backward()
        for p, q in zip(ours, theirs):
            _close(p.grad, q.grad, what=f"grad at step {step}")
        norm = clip_grad_norm_tidu(ours, max_norm=0.1)
        tnorm = torch.nn.utils.clip_grad_norm_(theirs, max_norm=0.1)
        _close(norm, tnorm.item())
        clipped += norm > 0.1
        for p, q in zip(ours, theirs):
            _close(p.grad, q.grad, what=f"clipped grad at step {step}")
        opt.step()
        topt.step()
        for p, q in zip(ours, theirs):
            _close(p, q, what=f"parameter after step {step}")
    assert clipped >= 3                                    # the clipping did something
    assert lstm_loss_tidu(ours, ids, targets).item() < math.log(V)


# ---------------------------------------------------------------------------------------
# 2. A causal self-attention block: QKV, -inf mask, softmax, hand-written layer norm
# ---------------------------------------------------------------------------------------

B_, T_, D_, HEADS = 2, 5, 6, 2
HD = D_ // HEADS


def _attention_init(seed=2):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((B_, T_, D_)),                # x (differentiated too)
            *(0.4 * rng.standard_normal((D_, D_)) for _ in range(4)),   # Wq, Wk, Wv, Wo
            1.0 + 0.1 * rng.standard_normal(D_),              # gamma
            0.1 * rng.standard_normal(D_),                    # beta
            0.3 * rng.standard_normal((D_, 2 * D_)),          # W1 (MLP)
            0.3 * rng.standard_normal((2 * D_, D_))]          # W2


CAUSAL = np.tril(np.ones((T_, T_), dtype=bool))             # row 0: all keys masked but one


def attention_tidu(params):
    x, Wq, Wk, Wv, Wo, gamma, beta, W1, W2 = params

    def heads(t):
        return t.reshape(B_, T_, HEADS, HD).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ Wq), heads(x @ Wk), heads(x @ Wv)
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(HD)
    scores = tnp.where(CAUSAL, scores, -np.inf)             # masked_fill(~mask, -inf)
    att = nn.softmax(scores, axis=-1)
    out = (att @ v).transpose(0, 2, 1, 3).reshape(B_, T_, D_)
    y = x + out @ Wo

    mu = tnp.mean(y, axis=-1, keepdims=True)
    var = tnp.mean((y - mu) ** 2, axis=-1, keepdims=True)
    y = (y - mu) / tnp.sqrt(var + 1e-5) * gamma + beta
    return y + nn.gelu(y @ W1, approximate=True) @ W2


def attention_torch(torch, params):
    x, Wq, Wk, Wv, Wo, gamma, beta, W1, W2 = params

    def heads(t):
        return t.view(B_, T_, HEADS, HD).transpose(1, 2)

    q, k, v = heads(x @ Wq), heads(x @ Wk), heads(x @ Wv)
    scores = q @ k.transpose(-1, -2) / math.sqrt(HD)
    scores = scores.masked_fill(~torch.tensor(CAUSAL), float("-inf"))
    att = torch.softmax(scores, dim=-1)
    out = (att @ v).transpose(1, 2).reshape(B_, T_, D_)
    y = x + out @ Wo
    mu = y.mean(-1, keepdim=True)
    var = ((y - mu) ** 2).mean(-1, keepdim=True)
    y = (y - mu) / torch.sqrt(var + 1e-5) * gamma + beta
    return y + torch.nn.functional.gelu(y @ W1, approximate="tanh") @ W2


_R = np.random.default_rng(3).standard_normal((B_, T_, D_))


def test_attention_gradients_match_finite_differences_and_have_no_nan():
    arrays = _attention_init()
    params = _leaves(arrays)
    out = attention_tidu(params)
    grads = tnp.sum(out * _R).backward()
    for p in params:
        assert np.all(np.isfinite(grads.grad(p)))         # the -inf entries give no NaN
    loss_of = lambda a: tnp.sum(attention_tidu(a) * _R)
    rng = np.random.default_rng(4)
    for position, p in enumerate(params):
        direction = rng.standard_normal(p.shape)
        fd = _directional_fd(loss_of, arrays, position, direction)
        assert np.isclose(np.sum(grads.grad(p) * direction), fd, rtol=1e-6, atol=1e-7), position
    np.testing.assert_allclose(
        grads.grad(params[1]), numeric_grad(lambda w: loss_of([arrays[0], w] + arrays[2:]),
                                            arrays[1]), rtol=1e-6, atol=1e-7)


def test_attention_block_matches_torch():
    torch = _torch()
    arrays = _attention_init()
    ours, theirs = _leaves(arrays), _torch_leaves(torch, arrays)
    out, tout = attention_tidu(ours), attention_torch(torch, theirs)
    _close(out, tout, what="outputs")
    grads = tnp.sum(out * _R).backward()
    (tout * torch.tensor(_R)).sum().backward()
    names = ["x", "Wq", "Wk", "Wv", "Wo", "gamma", "beta", "W1", "W2"]
    for name, p, q in zip(names, ours, theirs):
        _close(grads.grad(p), q.grad, what=name)
        _close(p.grad, q.grad, what=name)


def test_a_row_masked_everywhere_but_once_has_a_finite_gradient_as_in_torch():
    torch = _torch()
    s = np.random.default_rng(6).standard_normal((4, 4))
    mask = np.zeros((4, 4), dtype=bool)
    mask[:, 2] = True                                      # every row keeps one key only
    mask[3] = True
    w = np.arange(16.0).reshape(4, 4)
    ours = tnp.tensor(s, requires_grad=True)
    p = nn.softmax(tnp.where(mask, ours, -np.inf), axis=-1)
    lp = nn.log_softmax(tnp.where(mask, ours, -np.inf), axis=-1)
    loss = tnp.sum(p * w) + tnp.sum(tnp.where(mask, lp, 0.0))
    theirs = torch.tensor(s, requires_grad=True)
    tp = torch.softmax(theirs.masked_fill(~torch.tensor(mask), float("-inf")), dim=-1)
    tlp = torch.log_softmax(theirs.masked_fill(~torch.tensor(mask), float("-inf")), dim=-1)
    tloss = (tp * torch.tensor(w)).sum() + torch.where(torch.tensor(mask), tlp, 0.0).sum()
    _close(loss.item(), tloss.item())
    loss.backward()
    tloss.backward()
    assert np.all(np.isfinite(ours.grad))
    _close(ours.grad, theirs.grad)


# ---------------------------------------------------------------------------------------
# 3. Gradient accumulation, zero_grad both ways, a frozen layer, detach, weight tying,
#    in-place updates outside the graph
# ---------------------------------------------------------------------------------------

VOC, DIM, MICRO = 6, 3, 3


def _tied_init(seed=7):
    rng = np.random.default_rng(seed)
    return [0.6 * rng.standard_normal((VOC, DIM)),        # E: input embedding and output layer
            0.6 * rng.standard_normal((DIM, DIM)),        # W
            0.1 * rng.standard_normal(DIM)]               # P


def _tied_batches(seed=8, steps=4):
    rng = np.random.default_rng(seed)
    return [[(rng.integers(0, VOC, 4), rng.integers(0, VOC, 4)) for _ in range(MICRO)]
            for _ in range(steps)]


def tied_loss_tidu(E, W, P, ids, targets):
    h = tnp.tanh(E[ids] @ W + P)
    logits = h @ E.T                                       # the same E: weight tying
    ce = -tnp.mean(nn.log_softmax(logits, axis=-1)[tnp.arange(len(ids)), targets])
    anchor = tnp.mean(h.detach(), axis=0)                  # a target without gradient
    return ce + 0.1 * tnp.mean((h - anchor) ** 2)


def tied_loss_torch(torch, E, W, P, ids, targets):
    h = torch.tanh(E[ids] @ W + P)
    logits = h @ E.T
    ce = -torch.log_softmax(logits, dim=-1)[torch.arange(len(ids)), targets].mean()
    anchor = h.detach().mean(0)
    return ce + 0.1 * ((h - anchor) ** 2).mean()


def test_accumulated_tied_gradient_matches_finite_differences():
    arrays = _tied_init()
    params = _leaves(arrays)
    micro = _tied_batches()[0]
    for ids, targets in micro:                             # accumulate into .grad
        (tied_loss_tidu(*params, ids, targets) / MICRO).backward()

    def total(a):
        leaves = [tnp.tensor(v) for v in a]
        return sum(tied_loss_tidu(*leaves, ids, targets).item() for ids, targets in micro) / MICRO

    for position, p in enumerate(params):
        fd = numeric_grad(lambda v, n=position: total(arrays[:n] + [v] + arrays[n + 1:]),
                          arrays[position])
        np.testing.assert_allclose(p.grad, fd, rtol=1e-6, atol=1e-9)


def test_gradient_accumulation_freezing_and_tying_match_torch():
    torch = _torch()
    arrays = _tied_init()
    ours, theirs = _leaves(arrays), _torch_leaves(torch, arrays)
    E, W, P = ours
    tE, tW, tP = theirs
    opt = tnp.optim.SGD(ours, lr=0.3, momentum=0.9, weight_decay=1e-3)
    topt = torch.optim.SGD(theirs, lr=0.3, momentum=0.9, weight_decay=1e-3)
    for step, micro in enumerate(_tied_batches()):
        if step == 2:                                      # freeze W for one step
            W.requires_grad = False
            tW.requires_grad_(False)
        if step == 3:
            W.requires_grad = True
            tW.requires_grad_(True)
        for ids, targets in micro:
            loss = tied_loss_tidu(E, W, P, ids, targets) / MICRO
            tloss = tied_loss_torch(torch, tE, tW, tP, torch.tensor(ids),
                                    torch.tensor(targets)) / MICRO
            _close(loss.item(), tloss.item())
            loss.backward()
            tloss.backward()
        for p, q in zip(ours, theirs):
            assert (p.grad is None) == (q.grad is None)
            if p.grad is not None:
                _close(p.grad, q.grad, what=f"accumulated grad at step {step}")
        opt.step()
        topt.step()
        E.data *= 0.99                                     # torch: with no_grad(): E.mul_(0.99)
        with torch.no_grad():
            tE.mul_(0.99)
        for p, q in zip(ours, theirs):
            _close(p, q, what=f"parameter after step {step}")
        set_to_none = step % 2 == 0
        opt.zero_grad(set_to_none=set_to_none)
        topt.zero_grad(set_to_none=set_to_none)
        for p, q in zip(ours, theirs):
            assert (p.grad is None) == (q.grad is None)
            if p.grad is not None:
                assert not np.any(p.grad)
    # step 2 ran with W frozen and a zero .grad (set_to_none=False before): momentum and
    # weight decay still moved it, in torch as in tidu
    assert not np.array_equal(W.data, arrays[1])


# ---------------------------------------------------------------------------------------
# 4. WGAN-GP: a gradient penalty through autograd.grad(create_graph=True)
# ---------------------------------------------------------------------------------------

ZD, XD, HC, NB, LAMBDA = 2, 3, 4, 5, 10.0


def _gan_init(seed=9):
    rng = np.random.default_rng(seed)
    critic = [0.7 * rng.standard_normal((XD, HC)), 0.1 * rng.standard_normal(HC),
              0.7 * rng.standard_normal(HC)]
    gen = [0.7 * rng.standard_normal((ZD, XD)), 0.1 * rng.standard_normal(XD)]
    data = [(rng.standard_normal((NB, XD)) + 1.0, rng.standard_normal((NB, ZD)),
             rng.uniform(size=(NB, 1))) for _ in range(3)]
    return critic, gen, data


def critic_tidu(x, W1, b1, w2):
    return tnp.tanh(x @ W1 + b1) @ w2


def gradient_penalty_tidu(critic, real, fake, eps, via_backward=False):
    xh = eps * real + (1 - eps) * fake                      # fake detached: no history
    xh.requires_grad = True                                 # torch: .requires_grad_(True)
    d = critic_tidu(xh, *critic)
    if via_backward:
        d.backward(np.ones(NB), create_graph=True)
        gx = xh.grad
    else:
        (gx,) = tnp.autograd.grad(d, xh, grad_outputs=np.ones(NB), create_graph=True)
    return tnp.mean((tnp.sqrt(tnp.sum(gx ** 2, axis=1)) - 1) ** 2)


def critic_tidu_torch(x, W1, b1, w2):
    return (x @ W1 + b1).tanh() @ w2


def gradient_penalty_torch(torch, critic, real, fake, eps, via_backward=False):
    xh = (eps * real + (1 - eps) * fake).requires_grad_(True)
    d = critic_tidu_torch(xh, *critic)
    if via_backward:
        d.backward(torch.ones(NB, dtype=torch.float64), create_graph=True)
        gx = xh.grad
    else:
        (gx,) = torch.autograd.grad(d, xh, grad_outputs=torch.ones(NB, dtype=torch.float64),
                                    create_graph=True)
    return ((gx.pow(2).sum(1).sqrt() - 1) ** 2).mean()


def test_gradient_penalty_second_derivative_matches_finite_differences():
    critic_arrays, gen_arrays, data = _gan_init()
    real, z, eps = data[0]
    fake = tnp.tensor(z @ gen_arrays[0] + gen_arrays[1])
    critic = _leaves(critic_arrays)
    gp = gradient_penalty_tidu(critic, tnp.tensor(real), fake, tnp.tensor(eps))
    grads = gp.backward()

    def gp_at(arrays):
        return gradient_penalty_tidu([tnp.tensor(a) for a in arrays], tnp.tensor(real), fake,
                                     tnp.tensor(eps)).item()

    for position, p in enumerate(critic):
        fd = numeric_grad(lambda v, n=position: gp_at(critic_arrays[:n] + [v]
                                                      + critic_arrays[n + 1:]),
                          critic_arrays[position])
        np.testing.assert_allclose(grads.grad(p), fd, rtol=1e-6, atol=1e-8)
    # backward(create_graph=True) and .grad give the same penalty and derivative
    again = _leaves(critic_arrays)
    gp2 = gradient_penalty_tidu(again, tnp.tensor(real), fake, tnp.tensor(eps),
                                via_backward=True)
    assert gp2.item() == pytest.approx(gp.item(), rel=1e-13)
    for p in again:
        assert isinstance(p.grad, tnp.Tensor) and p.grad.requires_grad   # with history
        p.grad = None
    gp2.backward()
    for p, q in zip(again, critic):
        np.testing.assert_allclose(p.grad, q.grad, rtol=1e-12)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("via_backward", [False, True])
def test_wgan_gp_training_matches_torch(via_backward):
    torch = _torch()
    critic_arrays, gen_arrays, data = _gan_init()
    critic, gen = _leaves(critic_arrays), _leaves(gen_arrays)
    tcritic, tgen = _torch_leaves(torch, critic_arrays), _torch_leaves(torch, gen_arrays)
    c_opt = tnp.optim.Adam(critic, lr=0.01, betas=(0.5, 0.9))
    g_opt = tnp.optim.Adam(gen, lr=0.01, betas=(0.5, 0.9))
    tc_opt = torch.optim.Adam(tcritic, lr=0.01, betas=(0.5, 0.9))
    tg_opt = torch.optim.Adam(tgen, lr=0.01, betas=(0.5, 0.9))
    for step, (real, z, eps) in enumerate(data):
        treal, tz, teps = (torch.tensor(a) for a in (real, z, eps))
        real_t, z_t, eps_t = tnp.tensor(real), tnp.tensor(z), tnp.tensor(eps)
        # critic step
        c_opt.zero_grad()
        tc_opt.zero_grad()
        fake = (z_t @ gen[0] + gen[1]).detach()
        tfake = (tz @ tgen[0] + tgen[1]).detach()
        gp = gradient_penalty_tidu(critic, real_t, fake, eps_t, via_backward)
        tgp = gradient_penalty_torch(torch, tcritic, treal, tfake, teps, via_backward)
        if via_backward:                                    # drop the create_graph .grad
            c_opt.zero_grad()
            tc_opt.zero_grad()
        c_loss = (tnp.mean(critic_tidu(fake, *critic)) - tnp.mean(critic_tidu(real_t, *critic))
                  + LAMBDA * gp)
        tc_loss = (critic_tidu_torch(tfake, *tcritic).mean()
                   - critic_tidu_torch(treal, *tcritic).mean() + LAMBDA * tgp)
        _close(gp.item(), tgp.item(), what=f"penalty at step {step}")
        _close(c_loss.item(), tc_loss.item())
        c_loss.backward()
        tc_loss.backward()
        for p, q in zip(critic, tcritic):
            _close(p.grad, q.grad, what=f"critic grad at step {step}")
        c_opt.step()
        tc_opt.step()
        # generator step, through the critic
        g_opt.zero_grad()
        tg_opt.zero_grad()
        g_loss = -tnp.mean(critic_tidu(z_t @ gen[0] + gen[1], *critic))
        tg_loss = -critic_tidu_torch(tz @ tgen[0] + tgen[1], *tcritic).mean()
        g_loss.backward()
        tg_loss.backward()
        g_opt.step()
        tg_opt.step()
        for p, q in zip(critic + gen, tcritic + tgen):
            _close(p, q, what=f"parameter after step {step}")


# ---------------------------------------------------------------------------------------
# 5. A learning-rate schedule and a resumed run (state_dict / load_state_dict)
# ---------------------------------------------------------------------------------------

def _regression_init(seed=10):
    rng = np.random.default_rng(seed)
    params = [0.5 * rng.standard_normal((3, 8)), np.zeros(8), 0.5 * rng.standard_normal((8, 1)),
              np.zeros(1)]
    x = rng.standard_normal((16, 3))
    y = np.sin(x @ np.array([[1.0], [-2.0], [0.5]]))
    return params, x, y


def regression_loss_tidu(params, x, y):
    W1, b1, W2, b2 = params
    return tnp.mean((nn.silu(x @ W1 + b1) @ W2 + b2 - y) ** 2)


def regression_loss_torch(torch, params, x, y):
    W1, b1, W2, b2 = params
    return ((torch.nn.functional.silu(x @ W1 + b1) @ W2 + b2 - y) ** 2).mean()


def _make_tidu_run(arrays):
    params = _leaves(arrays)
    opt = tnp.optim.AdamW([{"params": [params[0], params[2]]},
                           {"params": [params[1], params[3]], "weight_decay": 0.0}],
                          lr=0.05, weight_decay=0.05)
    return params, opt, tnp.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6, eta_min=1e-3)


def _make_torch_run(torch, arrays):
    params = _torch_leaves(torch, arrays)
    opt = torch.optim.AdamW([{"params": [params[0], params[2]]},
                             {"params": [params[1], params[3]], "weight_decay": 0.0}],
                            lr=0.05, weight_decay=0.05)
    return params, opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6, eta_min=1e-3)


def _train_tidu(params, opt, scheduler, x, y, steps):
    losses, lrs = [], []
    for _ in range(steps):
        opt.zero_grad()
        loss = regression_loss_tidu(params, x, y)
        loss.backward()
        opt.step()
        scheduler.step()
        losses.append(loss.item())
        lrs.append([group["lr"] for group in opt.param_groups])
    return losses, lrs


def test_resumed_run_is_bit_identical_and_the_schedule_decreases_the_loss():
    arrays, x, y = _regression_init()
    params, opt, scheduler = _make_tidu_run(arrays)
    first_losses, first_lrs = _train_tidu(params, opt, scheduler, x, y, 4)
    saved = pickle.dumps({"params": [p.data for p in params], "opt": opt.state_dict(),
                          "sched": scheduler.state_dict()})
    rest_losses, rest_lrs = _train_tidu(params, opt, scheduler, x, y, 8)

    checkpoint = pickle.loads(saved)
    resumed, opt2, scheduler2 = _make_tidu_run(checkpoint["params"])
    opt2.load_state_dict(checkpoint["opt"])
    scheduler2.load_state_dict(checkpoint["sched"])
    losses2, lrs2 = _train_tidu(resumed, opt2, scheduler2, x, y, 8)
    assert losses2 == rest_losses and lrs2 == rest_lrs
    for p, q in zip(params, resumed):
        assert np.array_equal(p.data, q.data)
    assert rest_losses[-1] < first_losses[0] / 2
    # the schedule's closed form at every step (and beyond T_max, where it rises again)
    for epoch, lr in enumerate(first_lrs + rest_lrs, start=1):
        expected = 1e-3 + (0.05 - 1e-3) * (1 + math.cos(math.pi * epoch / 6)) / 2
        assert lr == pytest.approx([expected, expected], rel=1e-12)
    # the gradient the optimizer used is the loss's: finite differences at the end
    g = tnp.autograd.grad(regression_loss_tidu(resumed, x, y), resumed[0])[0]
    fd = numeric_grad(lambda w: regression_loss_tidu([w] + [p.data for p in resumed[1:]],
                                                     x, y), resumed[0].data)
    np.testing.assert_allclose(g.data, fd, rtol=1e-6, atol=1e-9)


def test_schedule_and_resumed_run_match_torch():
    torch = _torch()
    arrays, x, y = _regression_init()
    params, opt, scheduler = _make_tidu_run(arrays)
    tparams, topt, tscheduler = _make_torch_run(torch, arrays)
    tx, ty = torch.tensor(x), torch.tensor(y)
    for step in range(10):
        losses, lrs = _train_tidu(params, opt, scheduler, x, y, 1)
        topt.zero_grad()
        tloss = regression_loss_torch(torch, tparams, tx, ty)
        tloss.backward()
        topt.step()
        tscheduler.step()
        _close(losses[0], tloss.item(), what=f"loss at step {step}")
        assert lrs[0] == pytest.approx([g["lr"] for g in topt.param_groups], rel=1e-13)
        assert scheduler.get_last_lr() == pytest.approx(tscheduler.get_last_lr(), rel=1e-13)
        for p, q in zip(params, tparams):
            _close(p, q, what=f"parameter after step {step}")
    ours, theirs = opt.state_dict(), topt.state_dict()
    assert sorted(ours["state"]) == sorted(theirs["state"])
    for index, state in theirs["state"].items():
        assert set(ours["state"][index]) == set(state)
        assert float(ours["state"][index]["step"]) == float(state["step"])
        _close(ours["state"][index]["exp_avg_sq"], state["exp_avg_sq"])
    for group, tgroup in zip(ours["param_groups"], theirs["param_groups"]):
        assert group["params"] == tgroup["params"]
        for key in ("lr", "initial_lr", "weight_decay", "eps"):
            assert group[key] == pytest.approx(tgroup[key], rel=1e-13), key
    ours_s, theirs_s = scheduler.state_dict(), tscheduler.state_dict()
    assert ours_s["last_epoch"] == theirs_s["last_epoch"]
    assert ours_s["base_lrs"] == theirs_s["base_lrs"]


def _numpy_state_dict(torch, state_dict):
    """A torch state dict with its tensors as NumPy arrays (0-d ones as Python numbers)."""
    def convert(value):
        if isinstance(value, torch.Tensor):
            return value.item() if value.ndim == 0 else value.detach().numpy().copy()
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value
    return convert(state_dict)


def test_a_torch_checkpoint_resumes_in_tidu():
    """Port the checkpoint too: train 4 steps in torch, convert its state dicts to NumPy,
    load them into tidu and go on: the run goes on as torch's does."""
    torch = _torch()
    arrays, x, y = _regression_init()
    tparams, topt, tscheduler = _make_torch_run(torch, arrays)
    tx, ty = torch.tensor(x), torch.tensor(y)

    def torch_steps(n):
        for _ in range(n):
            topt.zero_grad()
            regression_loss_torch(torch, tparams, tx, ty).backward()
            topt.step()
            tscheduler.step()

    torch_steps(4)
    params, opt, scheduler = _make_tidu_run([p.detach().numpy() for p in tparams])
    opt.load_state_dict(_numpy_state_dict(torch, topt.state_dict()))
    scheduler.load_state_dict(_numpy_state_dict(torch, tscheduler.state_dict()))
    _train_tidu(params, opt, scheduler, x, y, 5)
    torch_steps(5)
    for p, q in zip(params, tparams):
        _close(p, q)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx(
        [g["lr"] for g in topt.param_groups], rel=1e-13)


# ---------------------------------------------------------------------------------------
# 6. float32 all the way, and embedding lookups with repeated indices
# ---------------------------------------------------------------------------------------

NV, ND, NC = 6, 4, 3
_IDX = np.array([[0, 2, 2, 5], [1, 1, 1, 1], [3, 0, 3, 2], [5, 5, 4, 0], [2, 2, 0, 1]])
_LABELS = np.array([0, 2, 1, 1, 0])


def _bag_init(seed=11):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((NV, ND)), 0.5 * rng.standard_normal((ND, NC)), np.zeros(NC)]


def bag_loss_tidu(E, W, b, idx=_IDX, labels=_LABELS):
    x = tnp.mean(E[idx], axis=1)                           # an embedding bag by indexing
    logits = x @ W + b
    ce = tnp.mean(nn.logsumexp(logits, axis=-1) - logits[tnp.arange(len(labels)), labels])
    return ce + 1e-2 * tnp.sum(W * W)


def bag_loss_torch(torch, E, W, b, idx=_IDX, labels=_LABELS):
    x = torch.nn.functional.embedding(torch.tensor(idx), E).mean(1)
    logits = x @ W + b
    ce = (torch.logsumexp(logits, dim=-1) - logits[torch.arange(len(labels)), labels]).mean()
    return ce + 1e-2 * (W * W).sum()


def test_repeated_indices_accumulate_their_gradient():
    arrays = _bag_init()
    E, W, b = _leaves(arrays)
    bag_loss_tidu(E, W, b).backward()
    fd = numeric_grad(lambda e: bag_loss_tidu(tnp.tensor(e), W.detach(), b.detach()).item(),
                      arrays[0])
    np.testing.assert_allclose(E.grad, fd, rtol=1e-6, atol=1e-9)
    # sum(E[idx]) counts each row's uses; take() and a tensor of indices agree
    E.grad = None
    counts = np.bincount(_IDX.ravel(), minlength=NV)[:, None] * np.ones(ND)
    assert np.array_equal(tnp.sum(E[_IDX]).backward().grad(E), counts)
    assert np.array_equal(tnp.sum(E[tnp.tensor(_IDX)]).backward().grad(E), counts)
    assert np.array_equal(tnp.sum(tnp.take(E, _IDX.ravel(), axis=0)).backward().grad(E), counts)


def test_float32_model_stays_float32_and_matches_torch_float32():
    torch = _torch()
    arrays = _bag_init()
    ours = _leaves(arrays, dtype=np.float32)
    theirs = _torch_leaves(torch, arrays, dtype=torch.float32)
    opt = tnp.optim.Adam(ours, lr=0.1)
    topt = torch.optim.Adam(theirs, lr=0.1)
    for step in range(4):
        opt.zero_grad()
        topt.zero_grad()
        loss = bag_loss_tidu(*ours)
        tloss = bag_loss_torch(torch, *theirs)
        assert loss.dtype == np.float32
        _close(loss.item(), tloss.item(), rtol=1e-5, atol=1e-6)
        grads = loss.backward()
        tloss.backward()
        for p, q in zip(ours, theirs):
            assert grads.grad(p).dtype == np.float32 and p.grad.dtype == np.float32
            _close(p.grad, q.grad, rtol=1e-4, atol=1e-6, what=f"grad at step {step}")
        opt.step()
        topt.step()
        for p, q in zip(ours, theirs):
            assert p.dtype == np.float32 and p.data.dtype == np.float32
            _close(p, q, rtol=1e-4, atol=1e-5, what=f"parameter after step {step}")
    for state in opt.state_dict()["state"].values():
        assert state["exp_avg"].dtype == np.float32 and state["exp_avg_sq"].dtype == np.float32
    # the same gather, torch's index_select
    E = tnp.tensor(arrays[0], requires_grad=True)
    tE = torch.tensor(arrays[0], requires_grad=True)
    w = np.random.default_rng(12).standard_normal((_IDX.size, ND))
    tnp.sum(tnp.take(E, _IDX.ravel(), axis=0) * w).backward()
    (torch.index_select(tE, 0, torch.tensor(_IDX.ravel())) * torch.tensor(w)).sum().backward()
    _close(E.grad, tE.grad)


# ---------------------------------------------------------------------------------------
# Hostile use
# ---------------------------------------------------------------------------------------

def _small_graph():
    x = tnp.tensor(np.array([0.3, -0.8, 1.1]), requires_grad=True)
    return x, tnp.tanh(x) * x


def _small_grad(x):
    t = np.tanh(x)
    return t + x * (1 - t ** 2)


@pytest.mark.parametrize("convert", [
    lambda y: y.numpy(), lambda y: np.asarray(y), lambda y: np.array(y),
    lambda y: float(tnp.sum(y)), lambda y: int(tnp.sum(y)), lambda y: complex(tnp.sum(y)),
    lambda y: math.exp(tnp.sum(y)), lambda y: np.float64(tnp.sum(y)),
    lambda y: np.emath.sqrt(y), lambda y: np.add(y, 1.0, out=np.zeros(3)),
], ids=["numpy", "asarray", "array", "float", "int", "complex", "math.exp", "np.float64",
        "np.emath.sqrt", "out="])
def test_a_conversion_to_numpy_mid_graph_raises_and_loses_nothing(convert):
    x, y = _small_graph()
    with pytest.raises(tidu.TiduError):
        convert(y)
    loss = tnp.sum(y)
    np.testing.assert_allclose(loss.backward().grad(x), _small_grad(x.data), rtol=1e-12)


def test_a_value_taken_as_a_constant_on_purpose_is_a_constant():
    x, y = _small_graph()
    for constant in (y.detach().numpy(), np.array(y.tolist()), tnp.stop_gradient(y)):
        x.grad = None
        tnp.sum(y * constant).backward()
        np.testing.assert_allclose(x.grad, _small_grad(x.data) * y.data, rtol=1e-12)
    assert tnp.sum(y).item() == pytest.approx(float(np.sum(np.tanh(x.data) * x.data)))


def test_writing_a_leafs_data_before_backward_keeps_the_recorded_gradient():
    """torch: p.data -= ... after the forward pass makes backward read the new values (the
    .data loophole of its version counter); tidu keeps the values the ops recorded."""
    start = np.array([0.4, -1.3])
    p = tnp.tensor(start, requires_grad=True)
    loss = tnp.sum(tnp.sin(p) * p)
    p.data -= 0.5                                          # an optimizer step, too early
    p.data[0] = 10.0
    fd = numeric_grad(lambda v: np.sum(np.sin(v) * v), start)
    np.testing.assert_allclose(loss.backward().grad(p), fd, rtol=1e-8)
    assert np.allclose(p.data, [10.0, -1.8])


def test_an_in_place_update_of_a_saved_value_gives_the_right_gradient():
    """torch refuses (a.add_ changes what exp's backward reads: a version-counter error);
    in tidu `a += 1` makes a new value, and the gradient is that program's."""
    start = np.array([0.3, -0.2])
    x = tnp.tensor(start, requires_grad=True)
    a = tnp.exp(x)
    b = a * a
    a += 1.0
    fd = numeric_grad(lambda v: np.sum(np.exp(v) ** 2 * (np.exp(v) + 1)), start)
    np.testing.assert_allclose(tnp.sum(b * a).backward().grad(x), fd, rtol=1e-8)
    # where NumPy's in-place update would be seen through another name: refused
    c = tnp.exp(x)
    alias = c
    with pytest.raises(tidu.TiduError, match="another name"):
        c += 1.0
    assert alias is c
    with pytest.raises(tidu.TiduError, match="leaf"):
        x += 1.0
    for write in (lambda: c.__setitem__(0, 1.0), lambda: c.fill(0.0), lambda: c.sort()):
        with pytest.raises(tidu.TiduError):
            write()


def test_in_place_ops_torch_refuses_are_computed_right_by_tidu():
    torch = _torch()
    tx = torch.tensor([0.3, -0.2], dtype=torch.float64, requires_grad=True)
    ta = tx.exp()
    tb = ta * ta
    ta.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (tb * ta).sum().backward()


def test_backward_twice_accumulates_as_torch_with_retain_graph():
    torch = _torch()
    x, y = _small_graph()
    loss = tnp.sum(y)
    loss.backward()
    loss.backward()                                        # tidu keeps the recording
    tx = torch.tensor(x.data, requires_grad=True)
    tloss = (torch.tanh(tx) * tx).sum()
    tloss.backward(retain_graph=True)
    tloss.backward()
    _close(x.grad, tx.grad)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        tloss.backward()                                   # torch freed it


def test_a_graph_reused_after_its_backward_gives_the_right_gradient():
    rng = np.random.default_rng(13)
    W0, xs = rng.standard_normal((3, 3)), rng.standard_normal((4, 3))
    W = tnp.tensor(W0, requires_grad=True)
    h = tnp.tanh(xs @ W)
    tnp.sum(h).backward()                                  # torch frees h's graph here
    W.grad = None
    tnp.sum(h ** 2).backward()                             # torch: needs retain_graph=True
    fd = numeric_grad(lambda w: np.sum(np.tanh(xs @ w) ** 2), W0)
    np.testing.assert_allclose(W.grad, fd, rtol=1e-7, atol=1e-9)


def test_threads_each_training_their_own_model_match_the_serial_runs():
    arrays, x, y = _regression_init()
    seeds = range(4)

    def run(seed, out):
        noise = np.random.default_rng(seed).standard_normal(y.shape) * 0.1
        params, opt, scheduler = _make_tidu_run(arrays)
        losses, _ = _train_tidu(params, opt, scheduler, x, y + noise, 6)
        out[seed] = (losses, [p.data.copy() for p in params])

    serial, threaded = {}, {}
    for seed in seeds:
        run(seed, serial)
    threads = [threading.Thread(target=run, args=(seed, threaded)) for seed in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for seed in seeds:
        assert threaded[seed][0] == serial[seed][0]
        for a, b in zip(threaded[seed][1], serial[seed][1]):
            assert np.array_equal(a, b)
    # several threads backpropagating through one shared graph into one leaf
    w = tnp.tensor(np.linspace(-1.0, 1.0, 40), requires_grad=True)
    loss = tnp.sum(tnp.tanh(w) ** 3)
    results = []

    def backward():
        for _ in range(10):
            results.append(loss.backward().grad(w))

    threads = [threading.Thread(target=backward) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = 3 * np.tanh(w.data) ** 2 * (1 - np.tanh(w.data) ** 2)
    assert len(results) == 40 and all(np.allclose(g, expected, rtol=1e-13) for g in results)
    np.testing.assert_allclose(w.grad, 40 * expected, rtol=1e-12)


# ---------------------------------------------------------------------------------------
# Bugs found while porting: each test failed before its fix
# ---------------------------------------------------------------------------------------

def test_formatting_a_scalar_loss_as_a_number():
    x = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    loss = tnp.sum(x * x)
    assert f"loss {loss:.3f}" == "loss 5.000"               # every training loop's print()
    assert f"{tnp.tensor(np.array(0.25)):.2f}" == "0.25"


def test_item_of_a_tensor_of_several_elements_is_a_tidu_error():
    x = tnp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    with pytest.raises(tidu.TiduError):
        (x * 2).item()


def test_grad_of_a_used_input_with_zero_derivative_is_zeros():
    x = tnp.tensor(np.array([0.3, -1.2]), requires_grad=True)
    (g,) = tnp.autograd.grad(tnp.sum(tnp.sign(x)), x)      # torch: tensor([0., 0.])
    assert np.array_equal(g.data, [0.0, 0.0])


def test_gradient_penalty_of_a_relu_critic_names_the_bias_unused():
    """A ReLU's derivative is a mask, a comparison of its input: tidu records it as a
    constant, so the bias reaches the penalty only through it and counts as unused (the
    error says so); torch gives zeros. With allow_unused=True the bias's gradient is None."""
    rng = np.random.default_rng(14)
    W = tnp.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = tnp.tensor(rng.standard_normal(4), requires_grad=True)
    xh = tnp.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    d = tnp.sum(nn.relu(xh @ W + b))
    (gx,) = tnp.autograd.grad(d, xh, create_graph=True)
    gp = tnp.sum(gx ** 2)
    with pytest.raises(tnp.BackwardError, match=r"inputs\[1\] .* only through a comparison"):
        tnp.autograd.grad(gp, [W, b])                     # torch: gb == zeros
    gw, gb = tnp.autograd.grad(gp, [W, b], allow_unused=True)
    assert gb is None and np.all(np.isfinite(gw.data)) and np.any(gw.data != 0)


def test_a_leaf_with_a_zero_gradient_is_updated_by_momentum_as_in_torch():
    torch = _torch()
    q = tnp.tensor(np.array([0.7, -0.4]), requires_grad=True)
    tq = torch.tensor([0.7, -0.4], dtype=torch.float64, requires_grad=True)
    opt = tnp.optim.SGD([q], lr=0.1, momentum=0.9, weight_decay=0.1)
    topt = torch.optim.SGD([tq], lr=0.1, momentum=0.9, weight_decay=0.1)
    for step in range(3):
        opt.zero_grad()
        topt.zero_grad()
        # a straight-through quantizer written wrongly: round() only in the last step
        loss = tnp.sum(q * q) if step < 2 else tnp.sum(tnp.round(q))
        tloss = (tq * tq).sum() if step < 2 else tq.round().sum()
        loss.backward()
        tloss.backward()
        opt.step()
        topt.step()
    _close(q, tq)


def test_a_constant_of_another_library_does_not_leak_into_grad():
    torch = _torch()
    x = tnp.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    opt = tnp.optim.SGD([x], lr=0.1)
    with pytest.raises(tnp.TensorTypeError, match="mul: a constant of torch"):
        x * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    loss = tnp.sum(x * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64).numpy())
    loss.backward()                                        # converted: the library is usable
    opt.step()
    assert type(x.grad) is np.ndarray and type(x.data) is np.ndarray
    np.testing.assert_allclose(x.data, [0.9, 1.8, 2.7])


def test_float32_leaves_get_float32_gradients_through_float64_constants():
    """NumPy's promotion: a float64 constant makes float64 intermediates (torch would stay
    float32 for a Python float, NumPy and tidu for a NumPy float64 do not), but each
    float32 leaf's gradient comes back float32, with float32 rounding only."""
    arrays = _bag_init()
    ours = _leaves(arrays, dtype=np.float32)
    E, W, b = ours
    loss = bag_loss_tidu(E, W, b) * np.float64(1.5) + 0.5 * tnp.sum(W * W)   # a Python float
    assert loss.dtype == np.float64
    loss.backward()
    reference = _leaves([a.astype(np.float32).astype(np.float64) for a in arrays])
    (bag_loss_tidu(*reference) * 1.5 + 0.5 * tnp.sum(reference[1] ** 2)).backward()
    for p, q in zip(ours, reference):
        assert p.grad.dtype == np.float32
        np.testing.assert_allclose(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    assert (0.5 * E).dtype == np.float32 and tnp.sqrt(E * E).dtype == np.float32
