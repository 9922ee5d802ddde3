"""Hostile round 56d: what review of round 56's changes found (``jit``'s closure guard,
``linearize``, the thread check, the new NumPy functions), each test failing before
its fix."""

from __future__ import annotations

import numpy as np

import primitives.tensor as tnp

X = np.array([1.0, 2.0])


# Was wrong: a parameter (array or number) that f makes at its first call and stores
# outside (a lazy initialisation, ``if not params: params["w"] = ...``, ``self.scale = 1.0``)
# was frozen into the first trace: rebinding it later returned the first trace's result,
# silently, for ever.
def test_a_parameter_made_and_stored_while_traced_is_read_at_later_calls():
    params: dict = {}
    config: dict = {}
    layers: list = []

    class Model:
        def __call__(self, x):
            if not hasattr(self, "w"):
                self.w = np.ones(2)
            return x * self.w

    def f(x):
        if "w" not in params:
            params["w"] = np.ones(2)
        return x * params["w"]

    def g(x):
        if not layers:
            layers.append(np.ones(2))
        return x * layers[0]

    class Scaled:
        def __call__(self, x):
            if not hasattr(self, "scale"):
                self.scale = 1.0
            return x * self.scale + config.setdefault("shift", 0.0)

    model, scaled = Model(), Scaled()
    jitted = [tnp.jit(f), tnp.jit(g), tnp.jit(model), tnp.jit(scaled)]
    for step in range(3):
        assert [float(j(X)[1]) for j in jitted] == [2.0 * 3 ** step] * 3 + [
            2.0 * 3 ** step + step]
        params["w"], layers[0], model.w = params["w"] * 3, layers[0] * 3, model.w * 3
        scaled.scale, config["shift"] = scaled.scale * 3, config["shift"] + 1


LEARNING_RATE = 0.1
MODE = "sum"


# Was wrong: a closed-over number or string was compared by identity only, so one computed
# anew before each call with the same value (a learning rate from a schedule, a mode read
# from a config) traced again at every call.
def test_an_equal_number_or_string_made_anew_does_not_trace_again():
    global LEARNING_RATE, MODE
    traces = []

    def step(x):
        traces.append(None)
        return (tnp.sum(x) if MODE == "sum" else tnp.mean(x)) * LEARNING_RATE

    jitted = tnp.jit(step)
    try:
        for _ in range(3):
            LEARNING_RATE, MODE = float("0.1"), "".join(["su", "m"])
            assert float(jitted(X)) == 0.1 * 3.0
        assert len(traces) == 1
        LEARNING_RATE, MODE = float("-0.0"), "mean"      # a new value traces again
        assert str(float(jitted(X))) == "-0.0" and len(traces) == 2
    finally:
        LEARNING_RATE, MODE = 0.1, "sum"


# Was wrong: two jitted functions stepping one counter while traced (``traces[0] += 1``)
# traced by turns at every call, each trace changing the number the other's guard
# compared; a number the trace itself changed is now not compared, as a log's length.
def test_two_functions_stepping_one_counter_while_traced_trace_once_each():
    traces = [0]
    counts = {"traces": 0}

    def f(x):
        traces[0] += 1
        counts["traces"] += 1
        return x * 2.0

    def g(x):
        traces[0] += 1
        counts["traces"] += 1
        return x * 3.0

    jf, jg = tnp.jit(f), tnp.jit(g)
    for _ in range(3):
        assert float(jf(X)[1]) == 4.0 and float(jg(X)[1]) == 6.0
    assert traces == [2] and counts == {"traces": 2}


# Was wrong: tnp.choose refused a boolean ``a`` (TensorTypeError 'a must hold integers'),
# which NumPy casts to 0 and 1.
def test_choose_takes_a_boolean_index_as_numpy_does():
    pick = np.array([True, False, True])
    choices = [np.arange(3.0), -np.arange(3.0)]
    np.testing.assert_array_equal(tnp.choose(pick, choices), np.choose(pick, choices))
    np.testing.assert_array_equal(tnp.grad(lambda c: tnp.sum(tnp.choose(pick, [c, 2 * c])))(
        np.ones(3)), [2.0, 1.0, 2.0])


# Was wrong: a condition longer than the axis and nonzero beyond it raised 'index 3 is out of
# bounds for axis 0 with size 3' from take, naming neither compress nor extract.
def test_compress_and_extract_name_themselves_for_a_condition_beyond_the_axis():
    import pytest

    from primitives.tensor import TensorIndexError
    a = np.arange(12.0).reshape(3, 4)
    with pytest.raises(TensorIndexError, match=r"compress: .*index 3.* axis 0 with size 3"):
        tnp.compress([1, 0, 1, 1], a, axis=0)
    with pytest.raises(TensorIndexError, match=r"extract: .*index 12.* size 12"):
        tnp.extract(np.ones(13), a)
    np.testing.assert_array_equal(tnp.compress([1, 0, 1, 0, 0], a, axis=0),
                                  np.compress([1, 0, 1, 0, 0], a, axis=0))


# Was wrong: JAX's x.at[...] keywords out_sharding and wrap_negative_indices (at their
# defaults, a valid JAX call) raised Python's TypeError (unexpected keyword argument).
def test_jax_out_sharding_and_wrap_negative_indices_keywords_of_indexed_updates():
    import pytest

    from primitives.tensor import TensorNotSupportedError
    x = tnp.tensor(np.arange(4.0))
    hints = {"out_sharding": None, "wrap_negative_indices": True}
    np.testing.assert_array_equal(x.at[-1].set(9.0, **hints), [0.0, 1.0, 2.0, 9.0])
    np.testing.assert_array_equal(x.at[-1].add(1.0, **hints), [0.0, 1.0, 2.0, 4.0])
    assert float(x.at[-1].get(**hints)) == 3.0
    with pytest.raises(TensorNotSupportedError, match=r"x.at\[...\].set: .*wrap_negative"):
        x.at[-1].set(9.0, wrap_negative_indices=False)


# Was wrong: copy.deepcopy of a leaf whose .grad has history (after
# backward(create_graph=True)) raised 'converting to a NumPy array ... would drop its
# derivative' from the .grad setter; the copy now holds a recorded copy of that gradient.
def test_deepcopy_of_a_leaf_whose_grad_has_history():
    import copy
    w = tnp.tensor(np.arange(3.0), requires_grad=True)
    tnp.sum(w ** 3).backward(create_graph=True)
    twin = copy.deepcopy(w)
    assert isinstance(twin.grad, tnp.Tensor) and twin.grad is not w.grad
    np.testing.assert_array_equal(twin.grad.detach().numpy(), [0.0, 3.0, 12.0])
    np.testing.assert_array_equal(twin.detach().numpy(), [0.0, 1.0, 2.0])


# Was wrong: a jitted function that makes an array again at each trace and stores it where
# it reads it (``self.mask = np.tril(...)``) traced again at every call once the attribute
# held an array before a trace (from a second input shape on): the guard compared the
# array by identity; one of the same type and contents is now no change.
def test_an_array_f_stores_again_at_each_trace_does_not_trace_at_every_call():
    traces = []

    class Masked:
        mask = None

        def __call__(self, x):
            traces.append(None)
            self.mask = np.tril(np.ones((2, 2)))
            return x @ self.mask

    jitted = tnp.jit(Masked())
    np.testing.assert_array_equal(jitted(X), [3.0, 2.0])
    for _ in range(5):
        np.testing.assert_array_equal(jitted(np.ones((3, 2))), [[2.0, 1.0]] * 3)
    assert len(traces) <= 3

    class Decaying:                     # stateful: what f reads changes at each call
        def __init__(self):
            self.buffer = np.ones(2)

        def __call__(self, x):
            self.buffer = self.buffer * 0.5
            return x * self.buffer

    decaying = tnp.jit(Decaying())
    assert [float(decaying(X)[0]) for _ in range(3)] == [0.5, 0.25, 0.125]
