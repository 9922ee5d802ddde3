"""The closure rule along paths: what ``f`` reads through containers, attributes, modules and
default arguments is read again at each call of ``jit(f)``, following the path from the
variable, so that rebinding at any level, or writing in place, gives ``f``'s answer now.

A number counts when ``f``'s code names the way to it (an attribute or a dict key it uses);
a counter it never names changes nothing, and a counter ``f`` steps while it is traced does
not make the next call trace again.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import primitives.tensor as tnp
from primitives.tensor.transforms.closure import external_values

X = np.array([1.0, 2.0])

# a module the functions below read attributes of (as ``import cfg`` then ``cfg.W``)
CFG = types.ModuleType("jit_closure_paths_cfg")
CFG.W = np.ones(2)
CFG.SCALE = 2.0
LAYERS = [(np.ones(2), np.zeros(2))]
SCALES = {"s": 2.0}


def _same(jitted, f, *args):
    np.testing.assert_array_equal(jitted(*args), f(*args))


# --- (a) a list of (w, b) tuples, a slot rebound -------------------------------------------


def test_a_rebound_slot_of_a_closed_over_list_of_layers_is_read():
    layers = [(np.ones(2), np.zeros(2)), [np.ones(2), np.zeros(2)]]

    def mlp(x):
        for w, b in layers:
            x = x * w + b
        return tnp.sum(x)

    jm = tnp.jit(mlp)
    _same(jm, mlp, X)
    layers[0] = (np.full(2, 5.0), np.ones(2))            # a slot of the outer list
    _same(jm, mlp, X)
    assert float(jm(X)) == 17.0
    layers[1][0] = np.full(2, 2.0)                       # a slot of an inner list
    _same(jm, mlp, X)


def test_a_rebound_slot_of_a_global_list_of_layers_is_read():
    def mlp(x):
        for w, b in LAYERS:
            x = x * w + b
        return tnp.sum(x)

    saved = LAYERS[0]
    try:
        jm = tnp.jit(mlp)
        _same(jm, mlp, X)
        LAYERS[0] = (np.full(2, 5.0), np.zeros(2))
        assert float(jm(X)) == float(mlp(X)) == 15.0
    finally:
        LAYERS[0] = saved


def test_rebinding_at_any_level_of_an_attribute_path():
    class Linear:
        def __init__(self, w):
            self.w = w

    class Model:
        def __init__(self):
            self.layers = [Linear(np.ones(2))]

        def __call__(self, x):
            return tnp.sum(x * self.layers[0].w)

    model = Model()
    jm = tnp.jit(model)
    _same(jm, model, X)
    model.layers[0].w = np.full(2, 2.0)                  # the leaf
    _same(jm, model, X)
    model.layers[0] = Linear(np.full(2, 3.0))            # a middle level
    _same(jm, model, X)
    model.layers = [Linear(np.full(2, 4.0))]             # the first level
    _same(jm, model, X)
    assert float(jm(X)) == 12.0


def test_an_object_reached_by_two_paths_is_read_along_each():
    class Affine:
        def __init__(self, w):
            self.w = w

    class Model:
        def __init__(self):
            self.first = self.second = Affine(np.ones(2))    # shared until rebound

        def __call__(self, x):
            return tnp.sum(x * self.first.w) + tnp.sum(x * self.second.w)

    for rebound in ("first", "second"):
        model = Model()
        jm = tnp.jit(model)
        _same(jm, model, X)
        setattr(model, rebound, Affine(np.full(2, 3.0)))
        _same(jm, model, X)
        assert float(jm(X)) == 12.0


# --- (b) nested containers, written in place, read by NumPy itself -------------------------


def test_a_nested_dict_written_in_place_and_read_by_numpy_is_read():
    p = {"l": {"w": np.ones(2)}}
    g = lambda x: tnp.sum(x * np.exp(p["l"]["w"]))          # noqa: E731
    jg = tnp.jit(g)
    _same(jg, g, X)
    p["l"]["w"][:] = 0.0                                     # in place, two levels down
    _same(jg, g, X)
    assert float(jg(X)) == 3.0
    p["l"] = {"w": np.full(2, np.log(2.0))}                  # the middle level rebound
    _same(jg, g, X)


# --- (c), (d) numbers in a dict and in an attribute ----------------------------------------


def test_a_number_in_a_dict_rebound_is_read():
    cfg = {"scale": 2.0}
    h = lambda x: x * cfg["scale"]                           # noqa: E731
    jh = tnp.jit(h)
    _same(jh, h, X)
    cfg["scale"] = 3.0
    _same(jh, h, X)
    np.testing.assert_array_equal(jh(X), [3.0, 6.0])


def test_a_number_attribute_of_a_jitted_object_rebound_is_read():
    class Layer:
        def __init__(self):
            self.scale = 2.0

        def __call__(self, x):
            return x * self.scale

    layer = Layer()
    jl = tnp.jit(layer)
    _same(jl, layer, X)
    layer.scale = 3.0
    _same(jl, layer, X)
    np.testing.assert_array_equal(jl(X), [3.0, 6.0])


def test_a_number_attribute_read_in_a_method_the_call_names_is_read():
    class Layer:
        def __init__(self):
            self.scale = 2.0

        def __call__(self, x):
            return self.forward(x)

        def forward(self, x):
            return x * self.scale

    layer = Layer()
    jl = tnp.jit(layer)
    _same(jl, layer, X)
    layer.scale = 3.0
    _same(jl, layer, X)


def test_a_path_step_that_now_fails_runs_f_again():
    cfg = {"scale": 2.0}
    h = lambda x: x * cfg["scale"]                           # noqa: E731
    jh = tnp.jit(h)
    jh(X)
    del cfg["scale"]
    with pytest.raises(KeyError):                            # what h does now
        jh(X)


# --- (e) attributes of a module -------------------------------------------------------------


def test_an_attribute_of_a_module_named_by_a_global_is_read():
    saved = CFG.W, CFG.SCALE
    k = lambda x: tnp.sum(x * CFG.W) * CFG.SCALE             # noqa: E731
    try:
        jk = tnp.jit(k)
        _same(jk, k, X)
        CFG.W = np.full(2, 3.0)                              # an array rebound
        _same(jk, k, X)
        CFG.SCALE = 5.0                                      # a number rebound
        _same(jk, k, X)
        assert float(jk(X)) == 45.0
    finally:
        CFG.W, CFG.SCALE = saved


def test_an_attribute_of_an_imported_module_is_read(tmp_path, monkeypatch):
    (tmp_path / "jit_closure_paths_mod.py").write_text("import numpy as np\nW = np.ones(2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import jit_closure_paths_mod as mod                      # a closure variable here
    try:
        k = lambda x: tnp.sum(x * mod.W)                     # noqa: E731
        jk = tnp.jit(k)
        _same(jk, k, X)
        mod.W = np.full(2, 3.0)
        _same(jk, k, X)
        assert float(jk(X)) == 9.0
    finally:
        sys.modules.pop("jit_closure_paths_mod", None)


def test_library_modules_are_not_walked():
    wheres = [ref.where for ref in external_values(lambda x: tnp.sum(x * np.pi) * CFG.SCALE)]
    assert wheres == [("global 'CFG' of test_library_modules_are_not_walked.<locals>."
                       "<lambda>.SCALE")]


# --- (f) default arguments ------------------------------------------------------------------


def test_a_default_array_written_in_place_is_read():
    def d(x, w=np.ones(2)):                                # noqa: B008 (the point)
        return tnp.sum(x * np.exp(w))

    jd = tnp.jit(d)
    _same(jd, d, X)
    d.__defaults__[0][:] = 0.0
    _same(jd, d, X)
    assert float(jd(X)) == 3.0


def test_a_keyword_only_default_number_rebound_is_read():
    def d(x, *, scale=2.0):
        return x * scale

    jd = tnp.jit(d)
    _same(jd, d, X)
    d.__kwdefaults__["scale"] = 3.0
    _same(jd, d, X)


# --- what must not trace again ----------------------------------------------------------------


def _layer_model():
    """``(params, body, jit(f), traces)``: ``f`` counts its traces and runs ``body``, which
    reads a layer of ``params`` from its closure."""
    traces = []
    params = {"l1": {"w": np.ones(2), "b": [np.zeros(2)]}, "scale": 2.0}

    def body(x):
        layer = params["l1"]
        return tnp.sum(x * layer["w"] + layer["b"][0]) * params["scale"]

    def f(x):
        traces.append(1)
        return body(x)

    return params, body, tnp.jit(f), traces


def test_an_unchanged_closure_does_not_trace_again():
    params, body, jf, traces = _layer_model()
    for step in range(5):
        _same(jf, body, X + step)
        params["l1"]["b"][0] = params["l1"]["b"][0].copy()   # rebound, same contents
    assert len(traces) == 1


def test_a_written_closure_traces_again_and_reuses_the_compiled_program(monkeypatch):
    """A closed-over array ``f`` reads with ``tnp`` ops, written in place or rebound: ``f``
    traces again (NumPy itself may have read it too), and the same graph comes out, so the
    compiled program is reused."""
    jit_module = sys.modules["primitives.tensor.transforms.jit"]
    compiled, compiles = jit_module.compiled, []
    monkeypatch.setattr(jit_module, "compiled", lambda graph: compiles.append(1) or compiled(graph))
    params, body, jf, traces = _layer_model()
    for step in range(5):
        _same(jf, body, X)
        params["l1"]["w"] += 1.0                  # written in place
        params["l1"]["b"][0] = np.full(2, float(step))   # rebound, same shape
    assert len(traces) == 5 and len(compiles) == 1


def test_a_big_array_read_by_tnp_and_written_in_place_does_not_trace_again():
    from primitives.tensor.transforms.closure import COMPARED_BYTES
    W = np.ones(COMPARED_BYTES // 8 + 1)
    traces = []

    def f(x):
        traces.append(1)
        return x * tnp.sum(W)

    jf = tnp.jit(f)
    for step in range(3):
        np.testing.assert_array_equal(jf(X), X * W.sum())
        W[0] += 1.0
    assert len(traces) == 1


def test_an_unrelated_counter_does_not_trace_again():
    traces = []

    class Stats:
        def __init__(self):
            self.calls = 0

        def tick(self):
            self.calls += 1

    class Model:
        def __init__(self):
            self.w, self.scale = np.ones(2), 2.0
            self.stats, self.step, self.history = Stats(), 0, [0.0]
            self.info = {"count": 0, "scale": 1.0}

        def __call__(self, x):
            traces.append(1)
            return tnp.sum(x * self.w) * self.scale

    def scaled(x):
        traces.append(1)
        return x * cfg["scale"]

    model = Model()
    cfg = {"scale": 3.0, "step": 0}
    jm, jc = tnp.jit(model), tnp.jit(scaled)
    for _ in range(5):
        assert float(jm(X)) == 6.0
        np.testing.assert_array_equal(jc(X), [3.0, 6.0])
        model.stats.tick()                        # another object's counter
        model.step += 1                           # an attribute f never names
        model.history[0] += 1.0                   # in a list f never names
        model.info["count"] += 1                  # in a dict f never names
        model.info["scale"] += 1.0                # a key f names, in a dict it does not
        cfg["step"] += 1                          # a key f never names
    assert len(traces) == 2                       # one trace of each


def test_a_counter_f_steps_while_traced_does_not_trace_again():
    counts = {"traces": 0}

    class Model:
        def __init__(self):
            self.traced = 0

        def __call__(self, x):
            counts["traces"] += 1                 # named by f, stepped only when traced
            self.traced += 1
            return x * 2.0

    model = Model()
    jm = tnp.jit(model)
    for _ in range(4):
        np.testing.assert_array_equal(jm(X), [2.0, 4.0])
    assert counts["traces"] == model.traced == 1


def test_class_attributes_and_slots_rebound_or_written_are_read():
    class Config:
        W = np.array([1.0, 1.0])
        scale = 2.0

    class Slotted:
        __slots__ = ("w",)

    class Net:
        shift = 0.5

        def __call__(self, x):
            return x * self.shift

    holder = Slotted()
    holder.w = np.array([1.0, 3.0])
    f = lambda x: x * Config.W * Config.scale + holder.w        # noqa: E731
    jf, net = tnp.jit(f), Net()
    jnet = tnp.jit(net)
    _same(jnet, net, X)
    changes = [
        lambda: setattr(Config, "W", np.array([8.0, 1.0])),     # a class's array rebound
        lambda: setattr(Config, "scale", 5.0),                  # a class's number rebound
        lambda: setattr(holder, "w", np.array([4.0, 0.0])),     # a slot rebound
        lambda: Config.W.__setitem__(1, -1.0),                  # written in place
        lambda: holder.w.__setitem__(0, 1.0),
    ]
    for change in changes:                          # one at a time: no retrace hides another
        _same(jf, f, X)
        change()
        _same(jf, f, X)
    np.testing.assert_array_equal(jf(X), [41.0, -10.0])
    Net.shift = 7.0                                 # a class attribute read through self
    np.testing.assert_array_equal(jnet(X), [7.0, 14.0])
    net.shift = 9.0                                 # the instance's own now hides the class's
    np.testing.assert_array_equal(jnet(X), [9.0, 18.0])


# --- random nestings ------------------------------------------------------------------------


class _Box:
    """An object level of a random nesting."""


def _wrap(kind: str, inner, level: int):
    if kind == "dict":
        return {f"k{level}": inner, "other": 0}
    if kind == "list":
        return [0, inner]
    if kind == "tuple":
        return (0, inner)
    if kind == "class":                         # an attribute of a class itself
        return type(f"Class{level}", (), {f"a{level}": inner, "other": 0})
    if kind == "class of object":               # an instance reading its class's attribute
        return type(f"Class{level}", (), {f"a{level}": inner, "other": 0})()
    box = _slotted(level)() if kind == "slots" else _Box()
    setattr(box, f"a{level}", inner)
    box.other = 0
    return box


def _slotted(level: int) -> type:
    return type(f"Slotted{level}", (), {"__slots__": (f"a{level}", "other")})


_ATTRIBUTE_KINDS = ("object", "slots", "class", "class of object")


def _access(kind: str, level: int) -> str:
    return {"dict": f"[{f'k{level}'!r}]", "list": "[1]", "tuple": "[1]"}.get(kind,
                                                                         f".a{level}")


def _nest(kinds: list, leaf, start: int = 0):
    """``leaf`` nested in ``kinds[start:]``, the levels numbered from ``start``."""
    node = leaf
    for level in reversed(range(start, len(kinds))):
        node = _wrap(kinds[level], node, level)
    return node


def _node(root, kinds: list, level: int):
    """The value at ``level`` of the nesting (0: the root, ``len(kinds)``: the leaf)."""
    node = root
    for at in range(level):
        node = getattr(node, f"a{at}") if kinds[at] in _ATTRIBUTE_KINDS else \
            node[f"k{at}" if kinds[at] == "dict" else 1]
    return node


def _set(parent, kind: str, level: int, value) -> None:
    if kind == "class of object":               # rebinding the class's attribute
        setattr(type(parent), f"a{level}", value)
    elif kind in _ATTRIBUTE_KINDS:
        setattr(parent, f"a{level}", value)
    else:
        parent[f"k{level}" if kind == "dict" else 1] = value


@settings(max_examples=60, deadline=None, database=None)
@given(kinds=st.lists(st.sampled_from(["dict", "list", "tuple", "object", "slots", "class",
                                        "class of object"]), min_size=1,
                      max_size=4),
       leaf=st.sampled_from(["tnp array", "numpy array", "number"]),
       where=st.sampled_from(["global", "closure"]),
       data=st.data())
def test_random_nestings_read_after_a_change_at_a_random_level(kinds, leaf, where, data):
    value = 0.5 if leaf == "number" else np.array([0.5, -1.0])
    path = "root" + "".join(_access(kind, level) for level, kind in enumerate(kinds))
    read = f"np.exp({path})" if leaf == "numpy array" else path
    body = f"tnp.sum(x * {read})"
    root = _nest(kinds, value)
    if where == "global":
        namespace = {"tnp": tnp, "np": np, "root": root}
        f = eval(f"lambda x: {body}", namespace)

        def rebind_root(new):
            namespace["root"] = new
    else:
        f = eval(f"lambda root: lambda x: {body}", {"tnp": tnp, "np": np})(root)

        def rebind_root(new):
            f.__closure__[0].cell_contents = new
    jf = tnp.jit(f)
    _same(jf, f, X)

    new_value = value + 1.5
    change = data.draw(st.sampled_from(["rebind", "write"] if leaf != "number" else
                                       ["rebind"]), label="change")
    if change == "write":
        _node(root, kinds, len(kinds))[...] = new_value
    else:
        level = data.draw(st.integers(0, len(kinds)), label="level")
        while level > 0 and kinds[level - 1] == "tuple":      # a tuple's slot: rebuild it
            level -= 1
        rebuilt = _nest(kinds, new_value, start=level)
        if level == 0:
            rebind_root(rebuilt)
        else:
            _set(_node(root, kinds, level - 1), kinds[level - 1], level - 1, rebuilt)
    _same(jf, f, X)


def test_an_array_read_by_a_tnp_op_and_by_numpy_itself_is_read_by_both():
    v = np.ones(3)
    f = tnp.jit(lambda x: x * np.exp(v) + tnp.sum(v))
    np.testing.assert_allclose(f(X[:1]), np.full(3, np.e + 3.0))
    v[:] = 0.0                                    # written in place
    np.testing.assert_allclose(f(X[:1]), np.ones(3))
    v = np.full(3, 2.0)                           # noqa: F841 (rebound: read by f)
    np.testing.assert_allclose(f(X[:1]), np.full(3, np.exp(2.0) + 6.0))


def test_a_custom_vjp_rule_reading_an_array_by_tnp_and_by_numpy_is_current():
    v = np.ones(3)

    @tnp.custom_vjp
    def f(x):
        return x * 2.0

    f.defvjp(lambda x: (f(x), None),
             lambda _, ct: (ct * np.exp(v) + ct * tnp.sum(v),))   # NumPy's exp, tnp's sum
    g = tnp.grad(lambda x: tnp.sum(f(x)))
    jg = tnp.jit(g)
    for value in (1.0, 0.0, 2.0):
        v[:] = value                              # written in place
        expected = np.full(3, np.exp(value) + 3 * value)
        np.testing.assert_allclose(g(np.ones(3)), expected)
        np.testing.assert_allclose(jg(np.ones(3)), expected)


def test_python_control_flow_on_numpy_s_reading_of_a_lifted_array_is_current():
    v = np.ones(2)

    def f(x):
        if np.all(v > 0):                         # NumPy's own reading, at trace time
            return x * tnp.sum(v)
        return -x * tnp.sum(v)

    jf = tnp.jit(f)
    _same(jf, f, X)
    v[0] = -3.0
    _same(jf, f, X)
    v[0] = 3.0
    _same(jf, f, X)


def test_a_python_number_numpy_computes_from_a_lifted_array_is_current():
    v = np.array([1.0, 2.0])

    def f(x):
        scale = float(np.max(v))                  # NumPy's own reading, as a Python number
        return x * scale + tnp.sum(v)

    jf = tnp.jit(f)
    g = tnp.jit(tnp.grad(lambda x: tnp.sum(f(x) ** 2)))
    _same(jf, f, X)
    np.testing.assert_allclose(g(X), tnp.grad(lambda x: tnp.sum(f(x) ** 2))(X))
    v[1] = 5.0
    _same(jf, f, X)
    np.testing.assert_allclose(g(X), tnp.grad(lambda x: tnp.sum(f(x) ** 2))(X))


# --- which function, string or None a variable holds ------------------------------------------

ACT = tnp.tanh


def test_a_rebound_global_function_traces_again():
    global ACT
    f = tnp.jit(lambda x: ACT(x) * 2.0)
    try:
        np.testing.assert_allclose(f(X), np.tanh(X) * 2.0)
        ACT = tnp.sin
        np.testing.assert_allclose(f(X), np.sin(X) * 2.0)
    finally:
        ACT = tnp.tanh


def test_a_rebound_closure_function_attribute_string_and_none_trace_again():
    act, mode, mask = np.cos, "sum", None

    class Model:
        def __init__(self):
            self.act = tnp.tanh

        def __call__(self, x):
            return self.act(x)

    model = Model()
    cases = [
        (tnp.jit(lambda x: act(x) + 1.0), lambda: np.cos(X) + 1.0, lambda: np.exp(X) + 1.0),
        (tnp.jit(lambda x: tnp.sum(x) if mode == "sum" else tnp.mean(x)),
         lambda: X.sum(), lambda: X.mean()),
        (tnp.jit(lambda x: x if mask is None else x * mask), lambda: X, lambda: X * [0.0, 1.0]),
        (tnp.jit(model), lambda: np.tanh(X), lambda: np.sin(X)),
    ]
    for jitted, before, _ in cases:
        np.testing.assert_allclose(jitted(X), before())
    act, mode, mask, model.act = np.exp, "mean", np.array([0.0, 1.0]), tnp.sin
    for jitted, _, after in cases:
        np.testing.assert_allclose(jitted(X), after())


def test_a_callable_object_of_another_class_traces_again_and_one_of_the_same_class_does_not():
    traces = []

    class Head:
        def __init__(self, w):
            self.w = w

        def __call__(self, x):
            traces.append(1)
            return x * self.w

    class Shifted(Head):
        def __call__(self, x):
            traces.append(1)
            return x - self.w

    class Net:
        def __init__(self):
            self.head = Head(np.ones(2))

        def __call__(self, x):
            return self.head(x)

    net = Net()
    jn = tnp.jit(net)
    np.testing.assert_allclose(jn(X), X)
    net.head = Head(np.ones(2))                  # the same class and contents: no new trace
    np.testing.assert_allclose(jn(X), X)
    assert len(traces) == 1
    net.head = Shifted(np.ones(2))
    np.testing.assert_allclose(jn(X), X - 1.0)
    assert len(traces) == 2


def test_unchanged_functions_do_not_trace_again():
    traces = []

    def helper(x):
        traces.append(1)
        return tnp.tanh(x)

    cfg = {"act": tnp.sin}
    jf = tnp.jit(lambda x: helper(x) + cfg["act"](x))
    for _ in range(3):
        np.testing.assert_allclose(jf(X), np.tanh(X) + np.sin(X))
    assert len(traces) == 1


def test_a_layer_appended_to_the_list_f_loops_over_traces_again():
    layers = [(np.eye(2), np.zeros(2))]
    params = {"a": np.ones(2)}

    def mlp(x):
        for w, b in layers:
            x = tnp.tanh(x @ w + b)
        return x + sum(v for v in params.values())

    def expected(x):
        for w, b in layers:
            x = np.tanh(x @ w + b)
        return x + sum(params.values())

    jm = tnp.jit(mlp)
    _same(jm, expected, X)
    layers.append((2.0 * np.eye(2), np.ones(2)))
    _same(jm, expected, X)
    params["b"] = np.full(2, 2.0)                 # a new key of a dict of arrays
    _same(jm, expected, X)
    layers.pop(0)
    _same(jm, expected, X)


def test_a_log_of_numbers_f_appends_to_while_traced_does_not_trace_again():
    log = []                                      # shared by two jitted functions
    f = tnp.jit(lambda x: log.append(1) or x * 2.0)
    g = tnp.jit(lambda x: log.append(1) or x * 3.0)
    for _ in range(3):
        _same(f, lambda x: x * 2.0, X)
        _same(g, lambda x: x * 3.0, X)
    assert len(log) == 2


def test_a_scan_that_stops_short_warns():
    data = [{"x": np.full(2, float(n))} for n in range(300)]   # 301 containers to visit

    def f(x):
        return x + data[299]["x"]

    with pytest.warns(RuntimeWarning, match=r"f reaches more than 256 .* pass such data as"):
        np.testing.assert_array_equal(tnp.jit(f)(X), X + 299.0)


def test_a_rebound_decorated_function_traces_again():
    @tnp.custom_jvp
    def double(x):
        return 2.0 * x

    @tnp.custom_jvp
    def triple(x):
        return 3.0 * x

    for fn in (double, triple):
        fn.defjvp(lambda primals, tangents, fn=fn: (fn(*primals), fn(*tangents)))
    act = double
    f = tnp.jit(lambda x: act(x))
    np.testing.assert_allclose(f(X), 2.0 * X)
    act = triple
    np.testing.assert_allclose(f(X), 3.0 * X)


def test_a_closed_over_array_read_by_numpy_and_tnp_is_current_in_every_composition():
    v = np.array([1.0, 2.0])

    def f(x):
        return tnp.sum(x * np.cos(v)) + tnp.sum(v) * tnp.sum(x)

    def grad_now(x):                              # d f / d x, by hand, with v as it is now
        return np.cos(v) + v.sum()

    compositions = {"grad(jit)": tnp.grad(tnp.jit(f)), "jit(grad)": tnp.jit(tnp.grad(f)),
                    "vmap(jit(grad))": tnp.vmap(tnp.jit(tnp.grad(f))),
                    "jit(vmap(grad))": tnp.jit(tnp.vmap(tnp.grad(f)))}
    for value in ([1.0, 2.0], [0.5, -3.0], [0.0, 0.0]):
        v[:] = value                              # written in place between calls
        for name, g in compositions.items():
            batched = name.startswith(("vmap", "jit(vmap"))
            got = g(np.stack([X, X])) if batched else g(X)
            want = np.stack([grad_now(X)] * 2) if batched else grad_now(X)
            np.testing.assert_allclose(got, want, err_msg=name)


# --- a library's own closure: its parameters are not compared, what it holds is ------------


def test_a_transforms_own_parameters_are_not_read_at_each_call():
    """``value_and_grad(loss)`` holds ``argnums``, ``has_aux`` and ``loss`` in its closure, which
    tidu's code never rebinds: the guard reads none of them at each call (it did, five reads
    per call of a jitted training step), yet still follows ``loss`` to what it reads."""
    def loss(x):
        return tnp.sum(x * SCALES["s"])

    refs = external_values(tnp.value_and_grad(loss, argnums=0, has_aux=False))
    # the global dict's keys and its item: loss's own reads, nothing of value_and_grad's
    name = loss.__qualname__
    assert [r.where for r in refs] == [f"global 'SCALES' of {name}",
                                       f"global 'SCALES' of {name}['s']"]
    step = tnp.jit(tnp.value_and_grad(loss))
    assert float(step(X)[0]) == 6.0
    SCALES["s"] = 3.0                   # what loss reads through grad's closure: read again
    value, gradient = step(X)
    assert float(value) == 9.0
    np.testing.assert_array_equal(gradient, [3.0, 3.0])


def test_arrays_and_lists_in_a_library_closure_are_still_read():
    """What a library closure holds that can change in place (an array, a list) is still read
    at each call: only numbers, strings, tuples of them and functions are taken as fixed."""
    w = np.ones(2)
    layers = [np.ones(2)]

    def make(weights, stack):          # a closure in a module tidu treats as a library's
        def apply(x):
            out = x * weights
            for layer in stack:
                out = out * layer
            return tnp.sum(out)
        return apply
    make.__module__ = apply_module = "primitives.fake_library"
    apply = make(w, layers)
    apply.__module__ = apply_module
    step = tnp.jit(apply)
    assert float(step(X)) == 3.0
    w[:] = 2.0
    assert float(step(X)) == 6.0
    layers.append(np.full(2, 10.0))
    assert float(step(X)) == 60.0


@pytest.mark.parametrize("name", ["numpy_helpers", "torch_utils", "jax_models.layers", "dask_jobs",
                                  "scipy_fit"])
def test_a_users_module_named_like_a_library_is_followed(name):
    """A module of the user's whose name starts with a library's (``torch_utils``) was taken
    for the library: its globals were not read again, and a rebound array gave the first
    trace's result."""
    module = types.ModuleType(name)
    exec(_LOSS_READING_W, module.__dict__)
    sys.modules[name] = module
    try:
        _assert_w_is_read_again(module)
    finally:
        del sys.modules[name]


_LOSS_READING_W = "import numpy as np\nW = np.ones(2)\ndef loss(x):\n    return x * W\n"


def _assert_w_is_read_again(module) -> None:
    """``jit(module.loss)`` gives the new result once the module's global ``W`` is rebound."""
    step = tnp.jit(module.loss)
    np.testing.assert_array_equal(step(X), [1.0, 2.0])
    module.W = np.full(2, 5.0)
    np.testing.assert_array_equal(step(X), [5.0, 10.0])


@pytest.mark.parametrize("name", ["statistics", "calendar", "test", "code"])
def test_a_users_module_named_like_the_standard_library_is_followed(name, tmp_path):
    """A user's file named like a standard-library module (``test.py``, ``statistics.py``,
    found first on ``sys.path``) was taken for Python's own by its name: its globals were
    not read again, and a rebound array gave the first trace's result."""
    path = tmp_path / f"{name}.py"
    path.write_text(_LOSS_READING_W)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    original = sys.modules.get(name)
    sys.modules[name] = module
    try:
        _assert_w_is_read_again(module)
    finally:
        if original is None:
            del sys.modules[name]
        else:
            sys.modules[name] = original


def test_the_standard_library_itself_is_not_followed():
    """Python's own modules stay unfollowed (a scan of their globals would be noise)."""
    import statistics

    from primitives.tensor.transforms.closure import _is_library_code

    assert _is_library_code(statistics.mean) and _is_library_code(math.fsum)
    assert not _is_library_code(test_the_standard_library_itself_is_not_followed)
