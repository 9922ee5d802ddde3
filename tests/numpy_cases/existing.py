"""Cases for the functions ``primitives.tensor`` had before the NumPy-coverage work (api.py)."""

import numpy as np

import primitives.tensor as tnp
from numpy_cases import REAL_DTYPES, Case, distinct, normal, positive, uniform

MASK = np.array([[True, False, True], [True, True, False]])
KINK = "not differentiable at 0: the derivative there is 0 (JAX, PyTorch)"
TIES = "ties split the derivative evenly among the tied values (JAX)"

CASES = [
    # elementwise
    Case("exp", tnp.exp, np.exp, (normal((2, 3)),)),
    Case("log", tnp.log, np.log, (positive((2, 3)),)),
    Case("sin", tnp.sin, np.sin, (normal((2, 3)),)),
    Case("cos", tnp.cos, np.cos, (normal((2, 3)),)),
    Case("tanh", tnp.tanh, np.tanh, (normal((2, 3)),)),
    Case("sqrt", tnp.sqrt, np.sqrt, (positive((2, 3)),),
         note="the principal branch; not differentiable at 0"),
    Case("add", tnp.add, np.add, (normal((2, 3)), normal((3,))), wrt=(0, 1)),
    Case("subtract", tnp.subtract, np.subtract, (normal((2, 3)), normal((2, 1))), wrt=(0, 1)),
    Case("multiply", tnp.multiply, np.multiply, (normal((2, 3)), normal(())), wrt=(0, 1)),
    Case("divide", tnp.divide, np.divide, (normal((2, 3)), positive((3,))), wrt=(0, 1)),
    Case("negative", tnp.negative, np.negative, (normal((2, 3)),)),
    Case("positive", tnp.positive, np.positive, (normal((2, 3)),)),
    Case("conj", tnp.conj, np.conj, (normal((2, 3)),),
         note="antiholomorphic: reverse mode conjugates the cotangent"),
    Case("abs", tnp.abs, np.abs, (normal((2, 3)),),
         note=f"{KINK}; complex: d|z| = Re(conj(z) dz)/|z|"),
    Case("sign", tnp.sign, np.sign, (normal((2, 3)),), dtypes=REAL_DTYPES,
         note="piecewise constant: derivative 0"),
    Case("real", tnp.real, np.real, (normal((2, 3)),)),
    Case("imag", tnp.imag, np.imag, (normal((2, 3)),)),
    Case("clip", lambda x: tnp.clip(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7),
         (distinct((2, 3)),), dtypes=REAL_DTYPES,
         note="derivative 1 strictly inside, 0 outside, 1/2 at a bound (JAX)"),
    # reductions and extrema
    Case("sum", tnp.sum, np.sum, (normal((2, 3)),)),
    Case("sum", lambda x: tnp.sum(x, axis=(0, 2), keepdims=True),
         lambda x: np.sum(x, axis=(0, 2), keepdims=True), (normal((2, 3, 2)),), label="axes"),
    Case("sum", lambda x: tnp.sum(x, axis=0, where=MASK, initial=1.5),
         lambda x: np.sum(x, axis=0, where=MASK, initial=1.5), (normal((2, 3)),),
         label="where initial"),
    Case("sum", lambda x: x.sum(1, np.complex128, None, True),
         lambda x: x.sum(1, np.complex128, None, True), (normal((2, 3)),), label="dtype"),
    Case("mean", lambda x: tnp.mean(x, axis=-1), lambda x: np.mean(x, axis=-1),
         (normal((2, 3)),)),
    Case("mean", lambda x: tnp.mean(x, axis=1, where=MASK), lambda x: np.mean(x, axis=1,
         where=MASK), (normal((2, 3)),), label="where"),
    Case("max", lambda x: tnp.max(x, axis=1, initial=0.3, where=MASK),
         lambda x: np.max(x, axis=1, initial=0.3, where=MASK), (distinct((2, 3)),),
         dtypes=REAL_DTYPES, label="where initial", note=TIES),
    Case("max", lambda x: tnp.max(x, axis=1), lambda x: np.max(x, axis=1),
         (distinct((2, 3)),), dtypes=REAL_DTYPES, note=TIES),
    Case("min", tnp.min, np.min, (distinct((2, 3)),), dtypes=REAL_DTYPES, note=TIES),
    Case("amax", lambda x: tnp.amax(x, axis=0), lambda x: np.amax(x, axis=0),
         (distinct((2, 3)),), dtypes=REAL_DTYPES, note=TIES),
    Case("amin", lambda x: tnp.amin(x, axis=0, keepdims=True),
         lambda x: np.amin(x, axis=0, keepdims=True), (distinct((2, 3)),),
         dtypes=REAL_DTYPES, note=TIES),
    Case("maximum", tnp.maximum, np.maximum, (distinct((2, 3)), uniform((3,), -0.1, 0.1)),
         wrt=(0, 1), dtypes=REAL_DTYPES, note=TIES),
    Case("minimum", tnp.minimum, np.minimum, (distinct((2, 3)), uniform((3,), -0.1, 0.1)),
         wrt=(0, 1), dtypes=REAL_DTYPES, note=TIES),
    Case("logsumexp", lambda x: tnp.logsumexp(x, axis=1), lambda x: np.log(
        np.sum(np.exp(x), axis=1)), (normal((2, 3)),), dtypes=REAL_DTYPES,
         note="scipy.special's name; computed with the max subtracted (stable)"),
    # shapes
    Case("reshape", lambda x: tnp.reshape(x, (3, -1)), lambda x: np.reshape(x, (3, -1)),
         (normal((2, 3)),)),
    Case("transpose", tnp.transpose, np.transpose, (normal((2, 3, 4)),)),
    Case("transpose", lambda x: tnp.transpose(x, (1, 2, 0)),
         lambda x: np.transpose(x, (1, 2, 0)), (normal((2, 3, 4)),), label="axes"),
    Case("broadcast_to", lambda x: tnp.broadcast_to(x, (2, 4, 3)),
         lambda x: np.broadcast_to(x, (2, 4, 3)), (normal((4, 1)),)),
    Case("expand_dims", lambda x: tnp.expand_dims(x, (0, 3)),
         lambda x: np.expand_dims(x, (0, 3)), (normal((2, 3)),)),
    Case("squeeze", tnp.squeeze, np.squeeze, (normal((1, 3, 1)),)),
    Case("concatenate", lambda x, y: tnp.concatenate([x, y], axis=1),
         lambda x, y: np.concatenate([x, y], axis=1), (normal((2, 3)), normal((2, 1))),
         wrt=(0, 1)),
    Case("stack", lambda x, y: tnp.stack([x, y], axis=-1),
         lambda x, y: np.stack([x, y], axis=-1), (normal((2, 3)), normal((2, 3))), wrt=(0, 1)),
    Case("pad", lambda x: tnp.pad(x, ((1, 0), (2, 1)), constant_values=0.5),
         lambda x: np.pad(x, ((1, 0), (2, 1)), constant_values=0.5), (normal((2, 3)),)),
    Case("take", lambda x: tnp.take(x, [2, 0, 2], axis=1),
         lambda x: np.take(x, [2, 0, 2], axis=1), (normal((2, 3)),),
         note="repeated indices add their cotangents"),
    Case("getitem", lambda x: x[1:, ::-1][:, [0, 0, 2]], lambda x: x[1:, ::-1][:, [0, 0, 2]],
         (normal((3, 4)),), note="x[key]; repeated indices add their cotangents"),
    Case("where", lambda x, y: tnp.where(x > 0, x, y), lambda x, y: np.where(x > 0, x, y),
         (distinct((2, 3)), normal((3,))), wrt=(0, 1), dtypes=REAL_DTYPES),
    # products
    Case("matmul", tnp.matmul, np.matmul, (normal((2, 2, 3)), normal((3, 4))), wrt=(0, 1)),
    Case("dot", tnp.dot, np.dot, (normal((2, 3)), normal((3,))), wrt=(0, 1)),
    Case("tensordot", lambda a, b: tnp.tensordot(a, b, ([0, 2], [1, 0])),
         lambda a, b: np.tensordot(a, b, ([0, 2], [1, 0])),
         (normal((2, 3, 4)), normal((4, 2, 2))), wrt=(0, 1)),
    Case("outer", tnp.outer, np.outer, (normal((3,)), normal((2, 2))), wrt=(0, 1)),
    Case("einsum", lambda a, b: tnp.einsum("bij,jk->bki", a, b),
         lambda a, b: np.einsum("bij,jk->bki", a, b), (normal((2, 3, 4)), normal((4, 2))),
         wrt=(0, 1), label="subscripts"),
    # no derivative: comparisons and constants made like an array
    *[Case(name, getattr(tnp, name), getattr(np, name), (distinct((2, 3)), distinct((3,))),
           wrt=(), dtypes=REAL_DTYPES)
      for name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")],
    Case("zeros_like", tnp.zeros_like, np.zeros_like, (normal((2, 3)),), wrt=()),
    Case("ones_like", tnp.ones_like, np.ones_like, (normal((2, 3)),), wrt=()),
    Case("full_like", lambda a: tnp.full_like(a, 2.5), lambda a: np.full_like(a, 2.5),
         (normal((2, 3)),), wrt=()),
    Case("array", lambda a, b: tnp.array([a, b, a]), lambda a, b: np.array([a, b, a]),
         (normal((2, 3)), normal((2, 3))), wrt=(0, 1),
         note="a list of tensors stacks, with gradients"),
    Case("asarray", tnp.asarray, np.asarray, (normal((2, 3)),)),
]

# added with the NumPy port: functions NumPy code reaches for (convolve, cov, interp...)
from numpy_cases import fixed  # noqa: E402

KNOTS = np.array([-1.0, 0.0, 0.5, 2.0])
CASES += [
    Case("take", lambda x: tnp.take(x, np.intp(4)), lambda x: np.take(x, np.intp(4)),
         (normal((2, 3)),), label="scalar index"),
    *[Case("convolve", lambda a, v, mode=mode: tnp.convolve(a, v, mode),
           lambda a, v, mode=mode: np.convolve(a, v, mode), (normal((5,)), normal((3,))),
           wrt=(0, 1), label=mode) for mode in ("full", "same", "valid")],
    Case("convolve", tnp.convolve, np.convolve, (normal((2,)), normal((4,))), wrt=(0, 1),
         label="longer second"),
    *[Case("correlate", lambda a, v, mode=mode: tnp.correlate(a, v, mode),
           lambda a, v, mode=mode: np.correlate(a, v, mode), shapes, wrt=(0, 1),
           label=f"{mode} {len(shapes[0](np.random.default_rng(0), 'float64'))}",
           note="conjugates its second argument, as NumPy")
      for mode in ("full", "same", "valid")
      for shapes in ((normal((5,)), normal((3,))), (normal((2,)), normal((4,))))],
    Case("cov", tnp.cov, np.cov, (normal((3, 5)),)),
    Case("cov", lambda x, y: tnp.cov(x, y, rowvar=False, ddof=0),
         lambda x, y: np.cov(x, y, rowvar=False, ddof=0), (normal((5, 2)), normal((5, 1))),
         wrt=(0, 1), label="y rowvar ddof"),
    Case("corrcoef", tnp.corrcoef, np.corrcoef, (normal((3, 6)),), dtypes=REAL_DTYPES,
         note="real parts clipped to [-1, 1] as NumPy (the diagonal's derivative is 0)"),
    Case("meshgrid", lambda a, b: tnp.meshgrid(a, b), lambda a, b: np.meshgrid(a, b),
         (normal((3,)), normal((2,))), wrt=(0, 1)),
    Case("meshgrid", lambda a, b: tnp.meshgrid(a, b, indexing="ij", sparse=True),
         lambda a, b: np.meshgrid(a, b, indexing="ij", sparse=True),
         (normal((3,)), normal((2,))), wrt=(0, 1), label="ij sparse"),
    Case("interp", lambda x, fp: tnp.interp(x, KNOTS, fp), lambda x, fp: np.interp(x, KNOTS, fp),
         (fixed([-2.0, -0.7, 0.2, 1.1, 1.9, 3.0]), normal((4,))), wrt=(0, 1),
         dtypes=("float64", "float32"),
         jit=False, note="xp constant; at a knot, the slope of the segment to its right; "
         "0 outside; reads x's values (not under jit)"),
]
