"""The tracing path of ``tnp.grad`` without ``jit`` (issue 23): its shortcuts give what the
general path gives, bit for bit, and the errors it gave."""

import itertools
import re

import numpy as np
import pytest

import primitives.tensor as tnp
import tidu
from benchmarks import small_grad
from primitives.tensor.numpy import lowering
from primitives.tensor.numpy.indexing import getitem
from primitives.tensor.transforms import make_graph
from primitives.tensor.ops.linalg import MatrixBand
from primitives.tensor.ops.shape import BroadcastInDim, Reshape
from tidu.graph import GraphBuilder, Local


# --- dtype promotion, shapes and conversions without asking NumPy ----------------------------

_VALUES = [2.0, 3, True, 1j, 2 ** 70, np.float32(1), np.int8(1), np.zeros(2, np.float16),
           np.zeros(2, np.float32), np.zeros(2, np.int16), np.zeros(2, np.complex64),
           np.zeros(2, ">f8"), np.zeros(2, "<f8"), np.zeros(2, np.bool_), np.zeros(2, np.uint64),
           np.zeros(2, np.longdouble), np.zeros(2, ">c8"), np.zeros(2, "U2")]


def _numpy_result_type(*args):
    return np.result_type(*[a if type(a) in (float, int, bool, complex) else np.asarray(a).dtype
                            for a in args])


@pytest.mark.parametrize("x, y", list(itertools.product(_VALUES, _VALUES)))
def test_result_dtype_is_numpys_with_weak_numbers(x, y):
    try:
        want = _numpy_result_type(x, y)
    except Exception as error:                  # noqa: BLE001 - the same refusal, then
        with pytest.raises(type(error)):
            lowering.result_dtype(x, y)
        return
    got = lowering.result_dtype(x, y)
    assert got == want and got.str == want.str           # byte order too (">f8" * 2.0)


@pytest.mark.parametrize("value", [2.0, 3, True, np.zeros(3), np.zeros((2, 1), np.float32),
                                   np.broadcast_to(np.zeros(1), (3,)), np.zeros(2, ">f8")])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.dtype(">f8")])
def test_as_dtype_of_plain_values_is_np_asarray(value, dtype):
    got = lowering.as_dtype(value, dtype)
    want = np.asarray(value, dtype=dtype)
    assert type(got) is type(want) and got.dtype == want.dtype and got.dtype.str == want.dtype.str
    np.testing.assert_array_equal(got, want)
    if isinstance(value, np.ndarray):
        assert (got is value) == (want is value)


@pytest.mark.parametrize("value", [np.zeros(3), np.zeros((2, 1), np.float32), np.zeros(2, ">f8"),
                                   np.arange(3), np.broadcast_to(np.zeros(1), (3,))])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.dtype(">f8")])
@pytest.mark.parametrize("copy", [True, False])
def test_astype_of_arrays_copies_as_np_astype(value, dtype, copy):
    got = tnp.astype(value, dtype, copy=copy)
    want = np.astype(value, dtype, copy=copy)
    assert type(got) is type(want) and got.dtype.str == want.dtype.str
    np.testing.assert_array_equal(got, want)
    assert (got is value) == (want is value)
    assert np.shares_memory(got, value) == np.shares_memory(want, value)


def test_astype_result_is_never_the_callers_array_to_write_to():
    a = np.ones(3)
    tnp.astype(a, np.float64)[0] = 5.0                  # NumPy copies: a is unchanged
    np.testing.assert_array_equal(a, np.ones(3))
    x = tnp.tensor(a, requires_grad=True)
    u = tnp.astype(x, np.float64)                      # a new tensor on x's values, whose
    assert u is not x and not u.is_leaf                # state is its own (round 60a)
    assert np.astype(x, np.float32).dtype == np.float32      # NumPy's function dispatches here
    grads = (np.astype(x, np.float32) * 2.0).sum().backward()
    np.testing.assert_array_equal(grads.grad(x), [2.0, 2.0, 2.0])
    assert x.astype(np.float64, copy=False) is x
    assert x.astype(dtype=np.float32).dtype == np.float32        # ndarray.astype's keyword


@pytest.mark.parametrize("old, new", [((2, 3), (6,)), ((2, 3), (3, 2)), ((), (1, 1)), ((1,), ()),
                                      ((2, 3), (-1,)), ((2, 3), (3, -1)), ((0, 3), (3, 0)),
                                      ((0, 3), (-1, 3)), ((4,), (2, 2)), ((6,), (np.int64(2), 3))])
def test_reshape_gives_numpys_shape(old, new):
    x = np.arange(int(np.prod(old)), dtype=float).reshape(old)
    assert lowering.reshape(x, new).shape == x.reshape(new).shape


@pytest.mark.parametrize("old, new", [((2, 3), (4,)), ((2, 3), (-1, -1)), ((2, 3), (-2, -3)),
                                      ((0, 3), (-1, -1))])
def test_reshape_refuses_what_numpy_refuses(old, new):
    x = np.zeros(old)
    with pytest.raises(ValueError):
        x.reshape(new)
    with pytest.raises(ValueError):
        lowering.reshape(x, new)


def test_cached_ops_are_one_object_per_parameters():
    op = lowering.cached_op(Reshape, (6,), (2, 3))
    assert op is lowering.cached_op(Reshape, (6,), (2, 3)) and op == Reshape((6,), (2, 3))
    assert lowering.cached_op(Reshape, (3, 2), (2, 3)) is not op
    assert lowering.cached_op(BroadcastInDim, (2, 3), (1,), (3,)) is not op


def test_dtype_name_is_numpys():
    for dtype in map(np.dtype, ["f8", ">f8", "c8", "i4", "?", "U3", "M8[s]"]):
        assert lowering.dtype_name(dtype) == dtype.name
        assert lowering.dtype_name(dtype) == dtype.name          # once remembered


_NUMBERS = [2.0, -1.5, 3, True, 0, 2 ** 70, 1e300]
_NUMBER_OPS = [tnp.add, tnp.subtract, tnp.multiply, tnp.divide, tnp.maximum, tnp.greater,
               tnp.power]


def _through(general: bool, make, *args):
    """``make(*args)`` with ``elementwise``'s shortcuts or (``general``) its general path
    alone: what it returns, or the error it raises (without display numbers)."""
    saved = lowering._promoted_pair
    if general:
        lowering._promoted_pair = lambda x, y: None
    try:
        with np.errstate(all="ignore"):
            return make(*args)
    except Exception as error:                  # noqa: BLE001 - the same refusal, then
        return type(error), re.sub(r"[%#]\d+", "", str(error))    # (display numbers)
    finally:
        lowering._promoted_pair = saved


def _on_array(fn, number, dtype, first):
    x = np.array([0.5, -2.0, 3.0]).astype(dtype)
    out = fn(number, x) if first else fn(x, number)
    return np.asarray(out).tobytes(), np.asarray(out).dtype.str


def _on_tensor(fn, number, dtype, first):
    x = tnp.tensor(np.array([0.5, -2.0, 3.0]).astype(dtype), requires_grad=True)
    out = fn(number, x) if first else fn(x, number)
    if out.dtype.kind != "f":
        return out.detach().numpy().tobytes(), out.dtype.str
    (out * out).sum().backward()
    return out.detach().numpy().tobytes(), out.dtype.str, x.grad.tobytes()


def _traced(fn, number, dtype, first):
    def f(x):
        out = fn(number, x) if first else fn(x, number)
        return tnp.sum(out * out) if out.dtype.kind == "f" else tnp.sum(out * 1.0)
    x = np.array([0.5, -2.0, 3.0]).astype(dtype)
    traced = make_graph(f, x)
    ops = [op.operation for op in traced.graph.operations]
    if x.dtype.kind != "f":
        return ops
    return ops, np.asarray(tnp.grad(f)(x)).tobytes()


@pytest.mark.parametrize("make", [_on_array, _on_tensor, _traced])
@pytest.mark.parametrize("fn", _NUMBER_OPS, ids=lambda fn: fn.__name__)
def test_a_python_number_operand_gives_what_the_general_path_gives(fn, make):
    """``2.0 * x`` and the like take a shortcut to the constant the general path makes (a
    weak number in the value's floating dtype, broadcast): values, dtypes, graphs and
    gradients are the general path's, bit for bit, and so are its refusals."""
    taken = 0
    for number, dtype, number_first in itertools.product(
            _NUMBERS, [np.float16, np.float32, np.float64, np.complex64, ">f8", np.int32],
            [True, False]):
        if make is not _on_array and np.dtype(dtype).kind in "ic" and fn is not tnp.add:
            continue                            # (non-float leaves: only one op is enough)
        with np.errstate(all="ignore"):
            shortcut = lowering._promoted_pair(
                *((number, np.zeros(3, dtype)) if number_first else (np.zeros(3, dtype), number)))
        taken += shortcut is not None
        want = _through(True, make, fn, number, dtype, number_first)
        got = _through(False, make, fn, number, dtype, number_first)
        assert got == want, (fn.__name__, number, dtype, number_first)
    assert taken > 0                            # the shortcut was taken, not only refused


_PAIR_SHAPES = [((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)), ((3,), (3,)), ((2, 3), (4,)),
                ((0, 3), (1, 3)), ((2, 1, 3), (4, 1))]


def _pair(fn, shapes, dtype, make_value):
    rng = np.random.default_rng(0)
    x, y = (make_value(rng.uniform(0.5, 2.0, shape).astype(dtype)) for shape in shapes)
    out = fn(x, y)
    return x, y, out


def _pair_on_array(fn, shapes, dtype):
    _, _, out = _pair(fn, shapes, dtype, lambda a: a)
    return np.asarray(out).tobytes(), np.asarray(out).dtype.str, np.shape(out)


def _pair_on_tensor(fn, shapes, dtype):
    x, y, out = _pair(fn, shapes, dtype, lambda a: tnp.tensor(a, requires_grad=True))
    if out.dtype.kind != "f":
        return out.detach().numpy().tobytes(), out.shape
    (out * out).sum().backward()
    return out.detach().numpy().tobytes(), out.dtype.str, x.grad.tobytes(), y.grad.tobytes()


def _pair_traced(fn, shapes, dtype):
    rng = np.random.default_rng(0)
    x, y = (rng.uniform(0.5, 2.0, shape).astype(dtype) for shape in shapes)

    def f(a, b):
        out = fn(a, b)
        return tnp.sum(out * out) if out.dtype.kind == "f" else tnp.sum(out * 1.0)
    ops = [op.operation for op in make_graph(f, x, y).graph.operations]
    return ops, [g.tobytes() for g in tnp.grad(f, argnums=(0, 1))(x, y)]


@pytest.mark.parametrize("make", [_pair_on_array, _pair_on_tensor, _pair_traced])
@pytest.mark.parametrize("fn", _NUMBER_OPS, ids=lambda fn: fn.__name__)
def test_two_values_of_one_dtype_broadcast_as_the_general_path_does(fn, make):
    """Two operands of one dtype skip the general path's promotion: values, shapes, graphs
    and gradients are its own, bit for bit, and so are its errors (shapes that clash)."""
    for shapes, dtype in itertools.product(_PAIR_SHAPES, [np.float32, np.float64]):
        want = _through(True, make, fn, shapes, dtype)
        got = _through(False, make, fn, shapes, dtype)
        assert got == want, (fn.__name__, shapes, dtype)
    assert lowering._promoted_pair(np.ones((2, 3)), np.ones(3)) is not None


@pytest.mark.parametrize("offset", [-1, 0, 2])
def test_a_diagonal_over_its_axes_in_either_order_makes_no_transpose(offset):
    """``diagonal(a, k, -1, -2)`` (the axes autograd's diagonal supports) is
    ``diagonal(a, -k, -2, -1)``: NumPy's entries, and no transpose op in the graph."""
    a = np.arange(20.0).reshape(4, 5)
    for axes in ((-1, -2), (-2, -1), (1, 0)):
        traced = make_graph(lambda m: tnp.diagonal(m, offset, *axes), a)
        names = [op.operation.name for op in traced.graph.operations]
        assert "transpose" not in names, (axes, names)
        np.testing.assert_array_equal(traced.outputs[0], np.diagonal(a, offset, *axes))


@pytest.mark.parametrize("axes", [(0, 1), (1, 0), (-1, -2)])
def test_a_diagonal_of_a_numpy_array_is_a_new_array(axes):
    """Written into, ``tnp.diagonal``'s result leaves the array it came from as it was (NumPy
    gives a read-only view; a writable view would change the caller's array)."""
    a = np.arange(16.0).reshape(4, 4)
    d = tnp.diagonal(a, 0, *axes)
    d[:] = -1.0
    np.testing.assert_array_equal(a, np.arange(16.0).reshape(4, 4))


# --- indexing with Python ints --------------------------------------------------------------


@pytest.mark.parametrize("index", [0, 2, -1, -3, (1, 0), (-2, slice(None)), (Ellipsis, -1)])
def test_int_indices_select_what_numpy_selects(index):
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(getitem(x, index), x[index])
    traced = tnp.grad(lambda a: tnp.sum(a[index] * 2.0))(x)
    expected = np.zeros_like(x)
    expected[index] = 2.0
    np.testing.assert_array_equal(traced, expected)


@pytest.mark.parametrize("shape", [(3,), (1,), (3, 2), (1, 4), (2, 1, 3)])
def test_one_int_index_makes_the_general_paths_graph(shape):
    x = np.arange(float(np.prod(shape))).reshape(shape)
    for i in range(-shape[0], shape[0]):
        short = make_graph(lambda a: a[i], x)        # the row path
        general = make_graph(lambda a: a[(i,)], x)   # the general one
        assert len(short.graph.operation_keys) == len(general.graph.operation_keys)
        assert all(p is q for p, q in zip(short.graph.operation_keys,
                                          general.graph.operation_keys))
        np.testing.assert_array_equal(getitem(x, i), x[i])


@pytest.mark.parametrize("index", [3, -4, 2 ** 70, -(2 ** 70), (0, 4)])
def test_an_int_index_out_of_range_is_numpys_index_error(index):
    x = np.arange(12.0).reshape(3, 4)
    with pytest.raises(IndexError) as numpy_error:
        x[index]
    with pytest.raises(IndexError) as ours:
        getitem(x, index)
    assert isinstance(ours.value, tidu.TiduError)
    if abs(np.ravel(index)[0]) < 2 ** 63:
        assert str(numpy_error.value).split("index ")[1].split(" ")[0] in str(ours.value)


# --- the graph builder's remembered operation counts -----------------------------------------


def test_builder_checks_counts_once_per_op_object_and_still_refuses_misuse():
    from tidu.errors import ArityError, InvalidOperationError
    from primitives.tensor.ops import elementwise as ew

    b = GraphBuilder()
    x = b.add_input("x")
    [y] = b.add_operation(ew.sin, [Local(x)])
    assert b._counts[id(ew.sin)] == (ew.sin, (1, 1))
    with pytest.raises(ArityError):
        b.add_operation(ew.sin, [Local(x), Local(y)])
    with pytest.raises(InvalidOperationError, match="hashable"):
        b.add_operation([ew.sin], [Local(x)])
    with pytest.raises(InvalidOperationError, match="GraphOperation"):
        b.add_operation("sin", [Local(x)])
    assert b.add_operation(ew.sin, [Local(x)]) == [y]


# --- a linalg mask made once ----------------------------------------------------------------


def test_matrix_band_weights_are_made_once_and_read_only():
    band = MatrixBand(1.0, 0.5, 0.0)
    x = np.arange(9.0).reshape(3, 3)
    first = band.weights(3, 3, x.dtype)
    assert band.weights(3, 3, x.dtype) is first and not first.flags.writeable
    np.testing.assert_array_equal(band.eval(None, [x])[0],
                                  np.tril(x, -1) + 0.5 * np.diag(np.diag(x)))
    assert band.weights(3, 3, np.dtype(np.complex64)).dtype == np.float32


# --- the benchmark's programs: gradients bit for bit, op by op and compiled ---------------------


@pytest.mark.parametrize("name", list(small_grad.PROGRAMS))
def test_small_programs_give_one_gradient_bit_for_bit_at_every_call(name):
    params, data = small_grad.make_problems()[name]
    step = small_grad.tidu_step(small_grad.PROGRAMS[name][0], params, data)
    calls = [step() for _ in range(4)]        # op by op, then from the compiled program
    leaves = [[np.asarray(g) for g in (c if isinstance(c, (list, tuple)) else [c])] for c in calls]
    for later in leaves[1:]:
        for a, b in zip(leaves[0], later):
            assert a.tobytes() == b.tobytes()
    try:
        peer = small_grad.autograd_step(small_grad.PROGRAMS[name][0], params, data)
    except ImportError:
        return
    small_grad._check(name, calls[0], peer())


def test_astype_under_jit_reads_closed_over_arrays_and_returns_fresh_results():
    w = np.ones(2, np.float32)
    scaled = tnp.jit(lambda x: x * tnp.astype(w, np.float64))
    np.testing.assert_array_equal(scaled(np.ones(2)), [1.0, 1.0])
    w[:] = 2.0                                      # written between calls: read again
    np.testing.assert_array_equal(scaled(np.ones(2)), [2.0, 2.0])
    same = tnp.jit(lambda x: tnp.astype(x, np.float64))
    a = np.ones(3)
    out = same(a)
    out[0] = 9.0                                    # the result is not the argument
    np.testing.assert_array_equal(a, np.ones(3))
    np.testing.assert_array_equal(same(a), np.ones(3))


def test_astype_composes_with_grad_and_vmap_in_both_orders():
    def f(x):
        return tnp.sum(tnp.sin(tnp.astype(x, np.float32)) * tnp.astype(x, np.float64))

    xs = np.linspace(0.1, 1.0, 6).reshape(2, 3)
    want = np.cos(xs.astype(np.float32)).astype(np.float64) * xs + np.sin(xs.astype(np.float32))
    np.testing.assert_allclose(tnp.vmap(tnp.grad(f))(xs), want, rtol=1e-6)
    summed = tnp.grad(lambda x: tnp.sum(tnp.vmap(f)(x)))
    np.testing.assert_allclose(summed(xs), want, rtol=1e-6)
    np.testing.assert_allclose(tnp.jit(tnp.grad(f))(xs[0]), want[0], rtol=1e-6)
