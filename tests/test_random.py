"""``primitives.tensor.random``: NumPy's draws bit for bit, constants, refused where stale.

The module-level functions reproduce ``np.random`` after the same seed, return
plain NumPy values, refuse parameters that carry a derivative, and raise
``TracedRandomError`` under ``jit`` and ``vmap`` (a draw there would be made
once and reused); under ``grad`` and on the eager ``Tensor`` each call draws
anew. ``choice``/``permutation`` of a tensor differentiate; ``shuffle`` of one
is refused.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import primitives.tensor as tnp
from primitives.tensor import random
from primitives.tensor.errors import TensorTypeError
from primitives.tensor.transforms.functional import FunctionalError
from tidu import TiduError

# (name, args, kwargs) of module-level draws, each compared with np.random's
DRAWS = [
    ("rand", (2, 3), {}), ("randn", (4,), {}), ("randn", (), {}), ("random", (), {"size": 5}),
    ("random_sample", ((2, 2),), {}), ("standard_normal", (3,), {}),
    ("normal", (1.0, 2.0), {"size": (2, 3)}), ("normal", (), {}),
    ("uniform", (-1.0, 1.0, 4), {}), ("randint", (0, 10), {"size": 6}),
    ("randint", (5,), {}), ("exponential", (2.0, 3), {}), ("poisson", (3.0, 4), {}),
    ("binomial", (10, 0.3, 4), {}), ("beta", (2.0, 3.0, 2), {}), ("gamma", (2.0,), {"size": 3}),
    ("multivariate_normal", ([0.0, 1.0], [[1.0, 0.5], [0.5, 2.0]], 3), {}),
    ("dirichlet", ([1.0, 2.0, 3.0], 2), {}), ("laplace", (0.0, 1.0, 3), {}),
    ("choice", (10,), {"size": 4}), ("choice", (np.arange(5.0) * 2, 3, False), {}),
    ("choice", (4, 6), {"p": [0.1, 0.2, 0.3, 0.4]}), ("permutation", (6,), {}),
    ("permutation", (np.arange(8.0).reshape(4, 2),), {}), ("bytes", (5,), {}),
]


@pytest.mark.parametrize("name,args,kwargs", DRAWS,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(DRAWS)])
def test_draws_equal_numpys_bit_for_bit(name, args, kwargs):
    random.seed(12)
    ours = getattr(random, name)(*args, **kwargs)
    np.random.seed(12)
    theirs = getattr(np.random, name)(*args, **kwargs)
    assert type(ours) is type(theirs)
    np.testing.assert_array_equal(ours, theirs)
    if isinstance(ours, np.ndarray):
        assert ours.dtype == theirs.dtype


def test_seed_then_randn_equals_numpy():
    random.seed(0)
    a = random.randn(3)
    np.random.seed(0)
    np.testing.assert_array_equal(a, np.random.randn(3))
    random.seed(0)
    np.testing.assert_array_equal(random.randn(3), a)          # seed resets the state


def test_the_module_state_is_its_own():
    random.seed(5)
    np.random.seed(99)                      # does not touch tnp.random's state
    a = random.rand(2)
    random.seed(5)
    np.testing.assert_array_equal(a, random.rand(2))
    state = random.get_state()
    b = random.normal(size=3)
    random.set_state(state)
    np.testing.assert_array_equal(b, random.normal(size=3))


def test_shuffle_is_numpys_in_place_on_arrays():
    a, b = np.arange(10), np.arange(10)
    random.seed(3)
    assert random.shuffle(a) is None
    np.random.seed(3)
    np.random.shuffle(b)
    np.testing.assert_array_equal(a, b)
    items = [1, 2, 3, 4]
    random.shuffle(items)
    assert sorted(items) == [1, 2, 3, 4]


def test_generators_are_numpys():
    ours, theirs = random.default_rng(7), np.random.default_rng(7)
    assert isinstance(ours, np.random.Generator)
    for _ in range(2):
        np.testing.assert_array_equal(ours.normal(size=3), theirs.normal(size=3))
        np.testing.assert_array_equal(ours.integers(0, 100, 4), theirs.integers(0, 100, 4))
        np.testing.assert_array_equal(ours.permutation(5), theirs.permutation(5))
    assert random.default_rng(ours) is ours
    np.testing.assert_array_equal(random.default_rng(np.random.PCG64(3)).random(2),
                                  np.random.default_rng(3).random(2))
    legacy, reference = random.RandomState(4), np.random.RandomState(4)
    assert isinstance(legacy, np.random.RandomState)
    np.testing.assert_array_equal(legacy.randn(3), reference.randn(3))
    np.testing.assert_array_equal(legacy.choice(9, 3), reference.choice(9, 3))


def test_draws_are_constants_in_every_front_end():
    x = np.array([1.0, 2.0, 3.0])
    random.seed(1)
    noise = random.randn(3)
    random.seed(1)
    g = tnp.grad(lambda v: tnp.sum(v * random.randn(3)))(x)   # the draw: a constant factor
    np.testing.assert_array_equal(g, noise)
    t = tnp.tensor(x, requires_grad=True)
    random.seed(1)
    np.testing.assert_array_equal(tnp.sum(t * random.randn(3)).backward().grad(t), noise)


def test_grad_draws_fresh_at_each_call():
    f = tnp.grad(lambda v: tnp.sum(v * random.randn(2)))
    random.seed(2)
    first, second = f(np.ones(2)), f(np.ones(2))
    assert not np.array_equal(first, second)


@pytest.mark.parametrize("draw", [
    lambda x: random.randn(*x.shape), lambda x: random.normal(size=x.shape),
    lambda x: random.uniform(size=3), lambda x: random.choice(5),
    lambda x: random.permutation(3), lambda x: random.permutation(x),
    lambda x: random.default_rng(0).normal(size=3),
    lambda x: random.RandomState(0).rand(3),
])
def test_draws_under_jit_raise(draw):
    f = tnp.jit(lambda x: x + draw(x))
    with pytest.raises(random.TracedRandomError, match=r"jit of \S*<lambda>") as info:
        f(np.zeros(3))
    assert isinstance(info.value, FunctionalError) and isinstance(info.value, TiduError)
    assert "pass the sample in as an argument" in str(info.value)
    # drawn outside and passed in: a new sample at every call
    g = tnp.jit(lambda x, noise: x + noise)
    a, b = g(np.zeros(3), random.randn(3)), g(np.zeros(3), random.randn(3))
    assert not np.array_equal(a, b)


def test_draw_errors_name_the_function():
    with pytest.raises(random.TracedRandomError, match=r"tnp\.random\.randn"):
        tnp.jit(lambda x: x * random.randn())(np.ones(1))
    rng = random.default_rng(0)
    with pytest.raises(random.TracedRandomError, match=r"Generator\.standard_normal"):
        tnp.jit(lambda x: x * rng.standard_normal())(np.ones(1))


def test_draws_under_vmap_raise():
    with pytest.raises(random.TracedRandomError, match=r"vmap of \S*<lambda>.*every example"):
        tnp.vmap(lambda x: x + random.randn())(np.zeros(3))


def test_draws_under_jit_of_grad_and_grad_of_jit_raise():
    loss = lambda v: tnp.sum(v * random.randn(2))                   # noqa: E731
    with pytest.raises(random.TracedRandomError):
        tnp.jit(tnp.grad(loss))(np.ones(2))
    with pytest.raises(random.TracedRandomError):
        tnp.grad(tnp.jit(loss))(np.ones(2))


def test_draws_after_a_jit_trace_and_in_other_threads_are_allowed():
    tnp.jit(lambda x: x * 2)(np.ones(2))
    assert random.tracing_transform() is None
    random.randn(2)
    results, started, release = [], threading.Event(), threading.Event()

    def slow(x):                        # traced by jit in the main thread, paused midway
        started.set()
        release.wait(5)
        return x

    def other_thread():
        started.wait(5)
        try:
            results.append(random.randn(2).shape)   # not under any trace in this thread
        finally:
            release.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    tnp.jit(slow)(np.ones(2))
    thread.join()
    assert results == [(2,)]


def test_parameters_that_carry_a_derivative_are_refused():
    mu = tnp.tensor([0.0, 1.0], requires_grad=True)
    with pytest.raises(TensorTypeError, match=r"tnp\.random\.normal.*derivative"):
        random.normal(loc=mu)
    with pytest.raises(TensorTypeError, match="standard_normal"):
        tnp.grad(lambda m: tnp.sum(random.normal(m, 1.0)))(np.zeros(2))
    with pytest.raises(TensorTypeError, match=r"tnp\.random\.choice"):
        random.choice(3, p=tnp.tensor([0.2, 0.3, 0.5]))
    with pytest.raises(TensorTypeError, match=r"Generator\.normal"):
        random.default_rng(0).normal([mu])
    # the reparameterized form differentiates
    random.seed(0)
    eps = random.standard_normal(2)
    random.seed(0)
    g = tnp.grad(lambda m: tnp.sum((m + 2.0 * random.standard_normal(2)) ** 2))(np.zeros(2))
    np.testing.assert_allclose(g, 2 * 2.0 * eps)


def test_permutation_and_choice_of_tensors_differentiate():
    x = np.array([10.0, 20.0, 30.0, 40.0])
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    random.seed(4)
    order = np.random.RandomState(4).permutation(4)
    g = tnp.grad(lambda v: tnp.sum(random.permutation(v) * weights))(x)
    want = np.zeros(4)
    want[order] = weights
    np.testing.assert_array_equal(g, want)
    t = tnp.tensor(x, requires_grad=True)
    random.seed(4)
    picked = random.permutation(t)
    assert isinstance(picked, tnp.Tensor)
    np.testing.assert_array_equal(picked.data, x[order])
    # choice with replacement: repeated picks accumulate
    random.seed(5)
    idx = np.random.RandomState(5).choice(4, size=6)
    random.seed(5)
    g = tnp.grad(lambda v: tnp.sum(random.choice(v, size=6)))(x)
    np.testing.assert_array_equal(g, np.bincount(idx, minlength=4).astype(float))
    # a Generator's, along an axis
    m = np.arange(6.0).reshape(2, 3)
    rng_order = np.random.default_rng(1).permutation(3)
    got = tnp.grad(lambda v: tnp.sum(random.default_rng(1).permutation(v, axis=1)
                                     * np.arange(3.0)))(m)
    want = np.zeros((2, 3))
    want[:, rng_order] = np.arange(3.0)
    np.testing.assert_array_equal(got, want)


def test_shuffle_of_a_tensor_is_refused():
    with pytest.raises(TensorTypeError, match="permutation"):
        random.shuffle(tnp.tensor([1.0, 2.0]))
    with pytest.raises(TensorTypeError, match=r"Generator\.shuffle"):
        random.default_rng(0).shuffle(tnp.tensor([1.0, 2.0]))


def test_numpys_other_names_are_here():
    for name in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64", "SeedSequence",
                 "BitGenerator"):
        assert getattr(random, name) is getattr(np.random, name)
    ours = random.Generator(random.PCG64(random.SeedSequence(3)))
    np.testing.assert_array_equal(ours.random(3), np.random.default_rng(3).random(3))
    random.seed(8)
    a, b = random.ranf(2), random.sample(2)
    np.random.seed(8)
    np.testing.assert_array_equal(np.concatenate([a, b]), np.random.random_sample(4))

