"""Cases for the products of ``primitives.tensor.numpy.products`` and ``einsum``'s sublist form."""

import functools
import warnings

import numpy as np

import primitives.tensor as tnp
from primitives.tensor.numpy.products import einsum_subscripts
from numpy_cases import REAL_DTYPES, Case, distinct, fixed, normal, positive

POLYFIT_NOTE = ("a least-squares solve (pinv), differentiated at constant rank; under jit "
                "and vmap too")
ROOTS_NOTE = ("the companion matrix's eigenvalues, differentiable where simple; zero "
              "coefficients are read and stripped (ConcretizationError under jit)")
VDOT_NOTE = "antilinear in the first argument (conjugated, as in NumPy)"


def _quiet(fn):
    """``fn`` with NumPy 2's deprecation of 2-vectors in ``cross`` silenced (both warn)."""
    @functools.wraps(fn)
    def call(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return fn(*args)
    return call


def _einsum_sublist(*args):
    spec, operands = einsum_subscripts(*args)
    return tnp.einsum(spec, *operands)


CASES = [
    Case("inner", tnp.inner, np.inner, (normal((2, 3)), normal((4, 3))), wrt=(0, 1)),
    Case("inner", tnp.inner, np.inner, (normal((3,)), normal((2, 1, 3))), wrt=(0, 1),
         label="vector-3d"),
    Case("inner", tnp.inner, np.inner, (normal(()), normal((2, 3))), wrt=(0, 1), label="0d"),
    Case("vdot", tnp.vdot, np.vdot, (normal((2, 3)), normal((6,))), wrt=(0, 1),
         note=VDOT_NOTE),
    Case("vecdot", tnp.vecdot, np.vecdot, (normal((2, 1, 3)), normal((4, 3))), wrt=(0, 1),
         note=VDOT_NOTE),
    Case("vecdot", lambda a, b: tnp.vecdot(a, b, axis=0), lambda a, b: np.vecdot(a, b, axis=0),
         (normal((3, 2)), normal((3, 1))), wrt=(0, 1), label="axis", note=VDOT_NOTE),
    Case("linalg.vecdot", tnp.linalg.vecdot, np.linalg.vecdot, (normal((2, 3)), normal((3,))),
         wrt=(0, 1), note=VDOT_NOTE),
    Case("matvec", tnp.matvec, np.matvec, (normal((2, 1, 3, 4)), normal((5, 4))), wrt=(0, 1)),
    Case("vecmat", tnp.vecmat, np.vecmat, (normal((5, 1, 3)), normal((2, 3, 4))), wrt=(0, 1),
         note="antilinear in the vectors x1 (conjugated, as in NumPy)"),
    Case("linalg.matmul", tnp.linalg.matmul, np.linalg.matmul, (normal((2, 3, 4)), normal((4,))),
         wrt=(0, 1)),
    Case("linalg.tensordot", lambda a, b: tnp.linalg.tensordot(a, b, axes=1),
         lambda a, b: np.linalg.tensordot(a, b, axes=1), (normal((2, 3)), normal((3, 2))),
         wrt=(0, 1)),
    Case("kron", tnp.kron, np.kron, (normal((2, 3)), normal((3, 2))), wrt=(0, 1)),
    Case("kron", tnp.kron, np.kron, (normal((2,)), normal((2, 1, 3))), wrt=(0, 1),
         label="ndim-differ"),
    Case("cross", tnp.cross, np.cross, (normal((4, 3)), normal((3,))), wrt=(0, 1)),
    Case("cross", lambda a, b: tnp.cross(a, b, axisa=0, axisb=1, axisc=0),
         lambda a, b: np.cross(a, b, axisa=0, axisb=1, axisc=0),
         (normal((3, 2)), normal((2, 3))), wrt=(0, 1), label="axes"),
    Case("cross", _quiet(tnp.cross), _quiet(np.cross), (normal((2, 2)), normal((2,))),
         wrt=(0, 1), label="2-vectors"),
    Case("cross", _quiet(lambda a, b: tnp.cross(a, b, axis=0)),
         _quiet(lambda a, b: np.cross(a, b, axis=0)), (normal((2, 4)), normal((3, 1))),
         wrt=(0, 1), label="2x3-vectors"),
    Case("cross", _quiet(tnp.cross), _quiet(np.cross), (normal((3,)), normal((2,))),
         wrt=(0, 1), label="3x2-vectors"),
    Case("einsum", lambda a, b: _einsum_sublist(a, [0, 1], b, [1, 27], [27, 0]),
         lambda a, b: np.einsum(a, [0, 1], b, [1, 27], [27, 0]),
         (normal((2, 3)), normal((3, 4))), wrt=(0, 1), label="sublist"),
    Case("einsum", lambda a, b: _einsum_sublist(a, [Ellipsis, 30, 2], b, [2, 3]),
         lambda a, b: np.einsum(a, [Ellipsis, 30, 2], b, [2, 3]),
         (normal((2, 3, 4)), normal((4, 2))), wrt=(0, 1), label="sublist-implicit"),
    # polynomial arithmetic
    Case("polyadd", tnp.polyadd, np.polyadd, (normal((4,)), normal((2,))), wrt=(0, 1)),
    Case("polysub", tnp.polysub, np.polysub, (normal((2,)), normal((3,))), wrt=(0, 1)),
    Case("polymul", tnp.polymul, np.polymul, (normal((3,)), normal((2,))), wrt=(0, 1)),
    Case("polyder", lambda p: tnp.polyder(p, 2), lambda p: np.polyder(p, 2), (normal((5,)),)),
    Case("polyint", lambda p, k: tnp.polyint(p, 2, k), lambda p, k: np.polyint(p, 2, k),
         (normal((3,)), normal((2,))), wrt=(0, 1), note="differentiable in p and in k"),
    Case("polyfit", lambda x, y, w: tnp.polyfit(x, y, 2, w=w),
         lambda x, y, w: np.polyfit(x, y, 2, w=w), (distinct((8,)), normal((8,)), positive((8,))),
         wrt=(0, 1, 2), dtypes=REAL_DTYPES, rtol=1e-5, note=POLYFIT_NOTE),
    Case("polyfit", lambda x, y: tnp.polyfit(x, y, 1, cov=True),
         lambda x, y: np.polyfit(x, y, 1, cov=True), (distinct((6,)), normal((6, 2))),
         wrt=(0, 1), dtypes=("float64",), rtol=1e-5, label="2-d y, cov", note=POLYFIT_NOTE),
    Case("roots", tnp.roots, np.roots, (fixed(np.poly([2.0, -0.5, 1.25])),),
         dtypes=("float64", "complex128"), jit=False, note=ROOTS_NOTE),
    Case("roots", tnp.roots, np.roots, (fixed([0.0, 1.0, 0.5, 2.0, 0.0]),), wrt=(),
         dtypes=("float64",), jit=False, label="complex roots, zeros stripped", note=ROOTS_NOTE),
    Case("roots", tnp.roots, np.roots, (fixed([1.0, 0.5, 2.0]),), dtypes=("float64",),
         jit=False, label="complex roots", note=ROOTS_NOTE),
    Case("poly", tnp.poly, np.poly, (normal((3,)),), dtypes=REAL_DTYPES,
         note="differentiable in the roots"),
    Case("poly", tnp.poly, np.poly, (fixed([[2.0, 1.0], [-1.5, 3.0]]),), dtypes=("float64",),
         label="characteristic polynomial",
         note="a real matrix's is real (complex roots: read for NumPy's real-or-complex rule)"),
    Case("polydiv", tnp.polydiv, np.polydiv, (normal((5,)), positive((3,))), wrt=(0, 1),
         dtypes=("float64", "complex128"), jit=False,
         note="the remainder's leading near-zeros are read and dropped (NumPy's)"),
]
