"""Cases for reductions, scans, sorting and statistics (``primitives.tensor.numpy.reductions``)."""

import warnings

import numpy as np

import primitives.tensor as tnp
from numpy_cases import REAL_DTYPES, Case, distinct, fixed, normal, positive, uniform

# rows with no zero, one zero and two zeros: prod's and cumprod's derivatives must stay exact
WITH_ZEROS = [[2.0, 0.0, 3.0, -1.5], [0.0, 1.5, 0.0, 2.0], [1.25, -2.0, 0.5, 3.0]]
WITH_NANS = [[1.0, np.nan, 2.0], [np.nan, np.nan, np.nan], [0.5, -1.0, 3.0]]

PROD_NOTE = ("exact where entries are zero, to every order (the derivative in a[j] is the "
             "product of the others, from exclusive cumulative products)")
CUMPROD_NOTE = "exact where entries are zero, to every order (a linear recurrence)"
SORT_NOTE = "the derivative follows the stable sort permutation (ties: original order); real only"
QUANTILE_NOTE = ("the derivative goes to the order statistics read, weighted as interpolated "
                 "(ties: stable sort order); q is not differentiated; real only")
UNIQUE_NOTE = ("the values are read (the result's shape depends on them); each distinct value's "
               "derivative goes to its first occurrence (as JAX)")
SET_NOTE = ("the values are read (the result's shape depends on them); each value's derivative "
            "goes to its first occurrence (ar1's first)")
LEX_TIES = [[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0], [1.0, 0.0, 1.0, 0.0]]   # lexsort's 2nd
REPEATS = [[1.5, -2.0, 1.5], [0.5, np.nan, 0.5], [1.5, -2.0, 1.5]]
BINS = np.array([0, 3, 3, 1, 0])                 # bincount's x
HIST_NOTE = ("counts are piecewise constant in the samples (derivative 0), linear in the "
             "weights; edges from the samples' range follow their min and max (as JAX)")
STD_NOTE = "derivative 0 at zero variance (PyTorch's convention; JAX gives nan)"


CASES = [
    # --- prod ---
    Case("prod", tnp.prod, np.prod, (normal((2, 3)),), note=PROD_NOTE),
    Case("prod", lambda x: tnp.prod(x, axis=-1, keepdims=True),
         lambda x: np.prod(x, axis=-1, keepdims=True), (normal((2, 3)),), label="axis=-1 keepdims",
         note=PROD_NOTE),
    Case("prod", lambda x: tnp.prod(x, axis=(0, 2)), lambda x: np.prod(x, axis=(0, 2)),
         (normal((2, 3, 2)),), label="axis tuple", note=PROD_NOTE),
    Case("prod", lambda x: tnp.prod(x, axis=1), lambda x: np.prod(x, axis=1),
         (fixed(WITH_ZEROS),), label="zeros", note=PROD_NOTE),
    Case("prod", tnp.prod, np.prod, (fixed([[2.0, 0.0], [3.0, 0.0]]),), label="two zeros",
         note=PROD_NOTE),
    Case("prod", lambda x: tnp.prod(x, axis=0, initial=2.0),
         lambda x: np.prod(x, axis=0, initial=2.0), (normal((3, 2)),), label="initial",
         note=PROD_NOTE),
    Case("prod", lambda x: tnp.prod(tnp.astype(x, np.int8), axis=0),
         lambda x: np.prod(x.astype(np.int8), axis=0), (fixed([[1, 2], [3, -4]]),), wrt=(),
         dtypes=("float64",), label="int8 widens", note=PROD_NOTE),
    Case("prod", lambda x: tnp.prod(x, axis=1, dtype=np.complex128),
         lambda x: np.prod(x, axis=1, dtype=np.complex128), (normal((2, 3)),),
         dtypes=("float64",), label="dtype", note=PROD_NOTE),
    # --- cumsum, cumprod, diff ---
    Case("cumsum", tnp.cumsum, np.cumsum, (normal((2, 3)),), label="flattened",
         note="linear: the gradient is the reversed cumulative sum"),
    Case("cumsum", lambda x: tnp.cumsum(x, axis=-2), lambda x: np.cumsum(x, axis=-2),
         (normal((3, 2)),), label="axis=-2"),
    Case("cumsum", lambda x: tnp.cumsum(x, axis=0, dtype=np.complex128),
         lambda x: np.cumsum(x, axis=0, dtype=np.complex128), (normal((3,)),),
         dtypes=("float64",), label="dtype"),
    Case("cumsum", lambda x: tnp.cumsum(tnp.astype(x, np.bool_)),
         lambda x: np.cumsum(x.astype(np.bool_)), (fixed([1, 0, 1]),), wrt=(),
         dtypes=("float64",), label="bool widens"),
    Case("cumulative_sum", lambda x: tnp.cumulative_sum(x, axis=1, include_initial=True),
         lambda x: np.cumulative_sum(x, axis=1, include_initial=True), (normal((2, 3)),),
         note="linear; include_initial starts with 0"),
    Case("cumulative_sum", tnp.cumulative_sum, np.cumulative_sum, (normal((4,)),), label="1d"),
    Case("cumulative_prod", lambda x: tnp.cumulative_prod(x, axis=1, include_initial=True),
         lambda x: np.cumulative_prod(x, axis=1, include_initial=True), (fixed(WITH_ZEROS),),
         note=CUMPROD_NOTE + "; include_initial starts with 1"),
    Case("cumprod", lambda x: tnp.cumprod(x, axis=1), lambda x: np.cumprod(x, axis=1),
         (normal((2, 4)),), note=CUMPROD_NOTE),
    Case("cumprod", lambda x: tnp.cumprod(x, axis=1), lambda x: np.cumprod(x, axis=1),
         (fixed(WITH_ZEROS),), label="zeros", note=CUMPROD_NOTE),
    Case("cumprod", tnp.cumprod, np.cumprod, (fixed([[1.5, 0.0], [2.0, 0.0], [-1.0, 3.0]]),),
         label="flattened, two zeros", note=CUMPROD_NOTE),
    Case("diff", tnp.diff, np.diff, (normal((2, 4)),), note="linear"),
    Case("diff", lambda x: tnp.diff(x, n=2, axis=0), lambda x: np.diff(x, n=2, axis=0),
         (normal((4, 2)),), label="n=2 axis=0"),
    Case("diff", lambda x, p, q: tnp.diff(x, axis=-1, prepend=p, append=q),
         lambda x, p, q: np.diff(x, axis=-1, prepend=p, append=q),
         (normal((2, 3)), normal((2, 1)), normal((2, 2))), wrt=(0, 1, 2),
         label="prepend append"),
    Case("diff", lambda x: tnp.diff(x, n=3, prepend=1.0), lambda x: np.diff(x, n=3, prepend=1.0),
         (normal((3,)),), dtypes=("float64", "complex128"),        # 1.0 is float64 to NumPy here
         label="n=3 scalar prepend"),
    # --- var, std, average ---
    Case("var", tnp.var, np.var, (normal((3, 4)),), note="real for complex input: |x - mean|^2"),
    Case("var", lambda x: tnp.var(x, axis=(0, -1), ddof=1, keepdims=True),
         lambda x: np.var(x, axis=(0, -1), ddof=1, keepdims=True), (normal((2, 3, 2)),),
         label="axis tuple ddof=1 keepdims"),
    Case("var", lambda x: tnp.var(x, axis=1, ddof=2), lambda x: np.var(x, axis=1, ddof=2),
         (normal((2, 5)),), label="ddof=2"),
    Case("std", tnp.std, np.std, (normal((3, 4)),), note=STD_NOTE),
    Case("std", lambda x: tnp.std(x, axis=-1, ddof=1, keepdims=True),
         lambda x: np.std(x, axis=-1, ddof=1, keepdims=True), (normal((3, 4)),),
         label="axis=-1 ddof=1 keepdims", note=STD_NOTE),
    Case("average", lambda x: tnp.average(x, axis=0), lambda x: np.average(x, axis=0),
         (normal((3, 2)),), label="unweighted"),
    Case("average", lambda x, w: tnp.average(x, axis=1, weights=w),
         lambda x, w: np.average(x, axis=1, weights=w), (normal((3, 4)), positive((4,))),
         wrt=(0, 1), label="1-d weights", note="differentiable in a and weights"),
    Case("average", lambda x, w: tnp.average(x, weights=w, returned=True, keepdims=True),
         lambda x, w: np.average(x, weights=w, returned=True, keepdims=True),
         (normal((2, 3)), positive((2, 3))), wrt=(0, 1), label="returned keepdims"),
    Case("nansum", lambda x: tnp.nansum(x, axis=1), lambda x: np.nansum(x, axis=1),
         (fixed(WITH_NANS),), note="NaN entries count as 0 and get a zero derivative"),
    Case("nanmean", lambda x: tnp.nanmean(x, axis=-1, keepdims=True),
         lambda x: np.nanmean(x, axis=-1, keepdims=True), (fixed(WITH_NANS[:1] + WITH_NANS[2:]),),
         note="NaN entries are left out and get a zero derivative"),
    Case("ptp", lambda x: tnp.ptp(x, axis=1), lambda x: np.ptp(x, axis=1), (distinct((3, 4)),),
         dtypes=REAL_DTYPES, note="ties share the derivative evenly (as max and min); real only"),
    # --- sorting and order statistics ---
    Case("sort", tnp.sort, np.sort, (distinct((3, 4)),), dtypes=REAL_DTYPES, note=SORT_NOTE),
    Case("sort", lambda x: tnp.sort(x, axis=0), lambda x: np.sort(x, axis=0),
         (distinct((3, 4)),), dtypes=REAL_DTYPES, label="axis=0", note=SORT_NOTE),
    Case("sort", lambda x: tnp.sort(x, axis=None), lambda x: np.sort(x, axis=None),
         (distinct((2, 3)),), dtypes=REAL_DTYPES, label="flattened", note=SORT_NOTE),
    Case("argsort", lambda x: tnp.argsort(x, axis=0), lambda x: np.argsort(x, axis=0),
         (distinct((3, 4)),), wrt=(), dtypes=REAL_DTYPES,
         note="integer result, not differentiated"),
    Case("lexsort", lambda a, b: tnp.lexsort((a, b), axis=0),
         lambda a, b: np.lexsort((a, b), axis=0), (normal((3, 4)), fixed(LEX_TIES)), wrt=(),
         dtypes=REAL_DTYPES, note="integer result, not differentiated; stable sorts (jit and "
                                  "vmap take traced keys)"),
    Case("searchsorted", lambda a, v: tnp.searchsorted(a, v, side="right"),
         lambda a, v: np.searchsorted(a, v, side="right"),
         (lambda rng, dtype: np.sort(rng.standard_normal(6)).astype(dtype), distinct((2, 3))),
         wrt=(), dtypes=REAL_DTYPES, note="integer result, not differentiated"),
    Case("ediff1d", lambda a, b: tnp.ediff1d(a, to_begin=b, to_end=2.0),
         lambda a, b: np.ediff1d(a, to_begin=b, to_end=2.0), (normal((2, 3)), normal((2,))),
         wrt=(0, 1)),
    Case("unwrap", lambda p: tnp.unwrap(p * 4, axis=0), lambda p: np.unwrap(p * 4, axis=0),
         (normal((5, 2)),), dtypes=REAL_DTYPES,
         note="piecewise-constant corrections: the derivative is the identity"),
    Case("digitize", lambda x: tnp.digitize(x, [2.0, 0.5, -1.0], right=True),
         lambda x: np.digitize(x, [2.0, 0.5, -1.0], right=True), (normal((2, 3)),), wrt=(),
         dtypes=REAL_DTYPES, note="an integer result; bins are read (increasing or "
                                  "decreasing), x may be traced"),
    Case("sort_complex", tnp.sort_complex, np.sort_complex, (normal((2, 5)),), note=SORT_NOTE
         .replace("; real only", "; by real part, then imaginary part")),
    # --- unique, isin, bincount ---
    Case("unique", tnp.unique, np.unique, (distinct((2, 3)),), dtypes=REAL_DTYPES, jit=False,
         note=UNIQUE_NOTE),
    Case("unique", lambda x: tnp.unique(x, return_index=True, return_inverse=True,
                                        return_counts=True, axis=0),
         lambda x: np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                             axis=0),
         (fixed(REPEATS),), wrt=(), dtypes=REAL_DTYPES, jit=False, label="rows, everything"),
    Case("unique_values", tnp.unique_values, np.unique_values, (distinct((2, 3)),),
         dtypes=REAL_DTYPES, jit=False, note=UNIQUE_NOTE),
    *[Case(name, lambda x, name=name: tuple(getattr(tnp, name)(x)),
           lambda x, name=name: tuple(getattr(np, name)(x)), (fixed(REPEATS),), wrt=(),
           dtypes=REAL_DTYPES, jit=False, note=UNIQUE_NOTE)
      for name in ("unique_counts", "unique_inverse", "unique_all")],
    Case("union1d", tnp.union1d, np.union1d, (distinct((2, 2)), uniform((3,), 5.0, 6.0)),
         wrt=(0, 1), dtypes=REAL_DTYPES, jit=False, note=SET_NOTE),
    Case("setxor1d", tnp.setxor1d, np.setxor1d, (distinct((3,)), uniform((2,), 5.0, 6.0)),
         wrt=(0, 1), dtypes=REAL_DTYPES, jit=False, note=SET_NOTE),
    *[Case(name, getattr(tnp, name), getattr(np, name), (fixed(REPEATS), fixed([0.5, 3.0])),
           wrt=(), dtypes=REAL_DTYPES, jit=False, note=SET_NOTE)
      for name in ("intersect1d", "setdiff1d")],
    Case("isin", lambda x: tnp.isin(x, [1.5, np.nan, 0.5]),
         lambda x: np.isin(x, [1.5, np.nan, 0.5]), (fixed(REPEATS),), wrt=(),
         dtypes=REAL_DTYPES, note="a boolean result, by comparisons (jit and vmap take it)"),
    Case("bincount", lambda w: tnp.bincount(BINS, weights=w, minlength=6),
         lambda w: np.bincount(BINS, weights=w, minlength=6), (normal((5,)),),
         dtypes=REAL_DTYPES, note="differentiable in the weights; x is read (the result's "
                                  "length depends on it)"),
    # --- histograms ---
    Case("histogram", lambda a, w: tnp.histogram(a, bins=4, weights=w, density=True),
         lambda a, w: np.histogram(a, bins=4, weights=w, density=True),
         (normal((12,)), positive((12,))), wrt=(0, 1), dtypes=REAL_DTYPES, note=HIST_NOTE),
    Case("histogram", lambda a: tnp.histogram(a, bins=[-3.0, -0.5, 0.0, 1.0, 3.0]),
         lambda a: np.histogram(a, bins=[-3.0, -0.5, 0.0, 1.0, 3.0]), (normal((3, 4)),),
         wrt=(), dtypes=REAL_DTYPES, label="edges given", note=HIST_NOTE),
    Case("histogram_bin_edges", lambda a: tnp.histogram_bin_edges(a, bins=5),
         lambda a: np.histogram_bin_edges(a, bins=5), (normal((7,)),), dtypes=REAL_DTYPES,
         note=HIST_NOTE),
    Case("histogram2d", lambda x, y, w: tnp.histogram2d(x, y, bins=(2, 3), weights=w),
         lambda x, y, w: np.histogram2d(x, y, bins=(2, 3), weights=w),
         (normal((9,)), normal((9,)), positive((9,))), wrt=(0, 1, 2), dtypes=REAL_DTYPES,
         note=HIST_NOTE),
    Case("histogramdd", lambda s, w: tnp.histogramdd(s, bins=(2, 3, 2), weights=w,
                                                     density=True),
         lambda s, w: np.histogramdd(s, bins=(2, 3, 2), weights=w, density=True),
         (normal((10, 3)), positive((10,))), wrt=(0, 1), dtypes=REAL_DTYPES, note=HIST_NOTE),
    Case("argmax", lambda x: tnp.argmax(x, axis=-1, keepdims=True),
         lambda x: np.argmax(x, axis=-1, keepdims=True), (distinct((3, 4)),), wrt=(),
         note="integer result, not differentiated"),
    Case("argmin", tnp.argmin, np.argmin, (distinct((3, 4)),), wrt=(),
         note="integer result, not differentiated"),
    Case("median", tnp.median, np.median, (distinct((3, 4)),), dtypes=REAL_DTYPES,
         label="even count", note=QUANTILE_NOTE),
    Case("median", lambda x: tnp.median(x, axis=(0, 2), keepdims=True),
         lambda x: np.median(x, axis=(0, 2), keepdims=True), (distinct((3, 2, 3)),),
         dtypes=REAL_DTYPES, label="axis tuple keepdims (odd count)", note=QUANTILE_NOTE),
    Case("quantile", lambda x: tnp.quantile(x, [0.1, 0.5, 1.0], axis=-1),
         lambda x: np.quantile(x, [0.1, 0.5, 1.0], axis=-1), (distinct((2, 5)),),
         dtypes=("float64",), note=QUANTILE_NOTE),         # (a float64 q makes float64)
    Case("quantile", lambda x: tnp.quantile(x, 0.3, axis=(0, 1)),
         lambda x: np.quantile(x, 0.3, axis=(0, 1)), (distinct((2, 3, 2)),),
         dtypes=REAL_DTYPES, label="axis tuple", note=QUANTILE_NOTE),
    *[Case("quantile", lambda x, m=method: tnp.quantile(x, [0.3, 0.75], axis=0, method=m),
           lambda x, m=method: np.quantile(x, [0.3, 0.75], axis=0, method=m),
           (distinct((5, 2)),), dtypes=REAL_DTYPES if method != "midpoint" else ("float64",),
           label=method, note=QUANTILE_NOTE)
      for method in ("lower", "higher", "nearest", "midpoint")],
    Case("percentile", lambda x: tnp.percentile(x, 40, axis=1, keepdims=True),
         lambda x: np.percentile(x, 40, axis=1, keepdims=True), (distinct((3, 6)),),
         dtypes=REAL_DTYPES, note=QUANTILE_NOTE),
    Case("all", lambda x: tnp.all(x, axis=1), lambda x: np.all(x, axis=1),
         (fixed(WITH_ZEROS),), wrt=()),
    Case("any", lambda x: tnp.any(x > 1.0, axis=0, keepdims=True),
         lambda x: np.any(x > 1.0, axis=0, keepdims=True), (fixed(WITH_ZEROS),), wrt=(),
         dtypes=REAL_DTYPES),
]


# --- numerical derivatives, where=, the nan* functions, partitions ----------------------------

# rows with NaNs (no row all NaN: nanargmax raises on one, as NumPy's)
SOME_NANS = [[1.0, np.nan, 2.0, -0.5], [np.nan, 0.25, -1.5, np.nan], [0.5, -1.0, 3.0, 1.25]]
MASK = np.array([[True, False, True, True], [False, True, True, True], [True, True, False, True]])
COORDINATES = np.array([0.0, 0.4, 1.1, 1.5, 2.6])         # uneven sample points

GRADIENT_NOTE = ("linear in f; differentiable in the spacing (scalar steps and coordinates, "
                 "which keep their steps when they carry a derivative)")
NAN_NOTE = "NaN entries are left out and get a zero derivative (never a NaN one)"
NAN_EXTREMUM_NOTE = NAN_NOTE + "; ties share the derivative evenly (as max/min)"
PARTITION_NOTE = ("NumPy's exact output; the derivative follows the permutation producing it "
                  "(ties: in their original order); kth static")


def quiet(fn):
    """NumPy's function without its RuntimeWarnings (all-NaN slices, no degrees of freedom)."""
    def reference(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(*args)
    return reference


def partitioned(call, kth, axis=-1):
    """``call(xp, x)``'s partition as what a partition guarantees along ``axis``: the ``kth``
    entries, and each stretch between them sorted (for ``argpartition``'s indices of
    distinct values: the sets of positions of each stretch)."""
    def fn(xp, x):
        p = xp.moveaxis(call(xp, x), axis, -1)
        bounds = [0, *sorted(k % p.shape[-1] for k in kth), p.shape[-1]]
        out = [xp.sort(p[..., lo:hi], axis=-1) for lo, hi in zip(bounds[:-1], bounds[1:])]
        return tuple(out) + tuple(p[..., k] for k in kth)
    return fn


def both(fn):
    """``(fn(tnp, ...), fn(np, ...))``: a Case's function and reference."""
    return (lambda a: fn(tnp, a)), (lambda a: fn(np, a))


def coordinates(rng, dtype):
    return COORDINATES.astype(dtype)


CASES += [
    # --- gradient ---
    Case("gradient", lambda f: tnp.gradient(f), np.gradient, (normal((5,)),),
         note=GRADIENT_NOTE),
    Case("gradient", lambda f: tnp.gradient(f, 0.5, edge_order=2),
         lambda f: np.gradient(f, 0.5, edge_order=2), (normal((3, 4)),),
         label="scalar step, edge_order=2, both axes", note=GRADIENT_NOTE),
    Case("gradient", lambda f, coordinates: tnp.gradient(f, coordinates, axis=-1),
         lambda f, x: np.gradient(f, x, axis=-1), (normal((2, 5)), coordinates), wrt=(0, 1),
         dtypes=REAL_DTYPES, label="coordinates", note=GRADIENT_NOTE),
    Case("gradient", lambda f, coordinates, step: tnp.gradient(f, step, coordinates,
                                                               edge_order=2),
         lambda f, x, h: np.gradient(f, h, x, edge_order=2),
         (normal((3, 5)), coordinates, fixed(0.7)), wrt=(0, 1, 2), dtypes=("float64",),
         label="coordinates and step, edge_order=2", note=GRADIENT_NOTE),
    Case("gradient", lambda f: tnp.gradient(f, axis=(1, 0)), lambda f: np.gradient(f, axis=(1, 0)),
         (normal((3, 3, 2)),), label="axis tuple, in its order", note=GRADIENT_NOTE),
    # --- where= and mean= of var, std, prod ---
    Case("var", lambda x: tnp.var(x, axis=1, ddof=1, where=MASK),
         lambda x: np.var(x, axis=1, ddof=1, where=MASK), (normal((3, 4)),), label="where="),
    Case("var", lambda x, m: tnp.var(x, axis=0, mean=m), lambda x, m: np.var(x, axis=0, mean=m),
         (normal((3, 4)), normal((1, 4))), wrt=(0, 1), label="mean="),
    Case("std", lambda x: tnp.std(x, where=MASK, keepdims=True),
         lambda x: np.std(x, where=MASK, keepdims=True), (normal((3, 4)),), label="where=",
         note=STD_NOTE),
    Case("prod", lambda x: tnp.prod(x, axis=1, where=MASK),
         lambda x: np.prod(x, axis=1, where=MASK), (fixed(WITH_ZEROS),), label="where=",
         note=PROD_NOTE),
    # --- the nan* functions ---
    Case("nansum", lambda x: tnp.nansum(x, axis=0, where=MASK, initial=1.0),
         lambda x: np.nansum(x, axis=0, where=MASK, initial=1.0), (fixed(SOME_NANS),),
         label="where= initial", note=NAN_NOTE),
    Case("nanmean", lambda x: tnp.nanmean(x, axis=1, where=MASK),
         lambda x: np.nanmean(x, axis=1, where=MASK), (fixed(SOME_NANS),), label="where=",
         note=NAN_NOTE),
    Case("nanvar", lambda x: tnp.nanvar(x, axis=1), lambda x: np.nanvar(x, axis=1),
         (fixed(SOME_NANS),), note=NAN_NOTE + "; nan where no more than ddof numbers"),
    Case("nanvar", lambda x: tnp.nanvar(x, axis=0, ddof=1, keepdims=True),
         quiet(lambda x: np.nanvar(x, axis=0, ddof=1, keepdims=True)), (fixed(SOME_NANS),),
         label="ddof=1 keepdims"),
    Case("nanstd", lambda x: tnp.nanstd(x, axis=1), lambda x: np.nanstd(x, axis=1),
         (fixed(SOME_NANS),), note=NAN_NOTE + "; " + STD_NOTE),
    Case("nanprod", lambda x: tnp.nanprod(x, axis=1), lambda x: np.nanprod(x, axis=1),
         (fixed(WITH_NANS),), note=NAN_NOTE + "; " + PROD_NOTE),
    Case("nanmax", lambda x: tnp.nanmax(x, axis=1), lambda x: np.nanmax(x, axis=1),
         (fixed(SOME_NANS),), dtypes=REAL_DTYPES, note=NAN_EXTREMUM_NOTE),
    Case("nanmax", lambda x: tnp.nanmax(x, axis=0, initial=0.3, keepdims=True),
         quiet(lambda x: np.nanmax(x, axis=0, initial=0.3, keepdims=True)),
         (fixed(WITH_NANS),), dtypes=REAL_DTYPES, label="initial keepdims"),
    Case("nanmin", tnp.nanmin, np.nanmin, (fixed(SOME_NANS),), dtypes=REAL_DTYPES,
         note=NAN_EXTREMUM_NOTE),
    Case("nanargmax", lambda x: tnp.nanargmax(x, axis=1), lambda x: np.nanargmax(x, axis=1),
         (fixed(SOME_NANS),), wrt=(), dtypes=REAL_DTYPES,
         note="integer result; an all-NaN slice raises ValueError (under jit/vmap: -1, JAX's)"),
    Case("nanargmin", lambda x: tnp.nanargmin(x, keepdims=True),
         lambda x: np.nanargmin(x, keepdims=True), (fixed(SOME_NANS),), wrt=(),
         dtypes=REAL_DTYPES, note="integer result; an all-NaN slice raises as nanargmax"),
    Case("nancumsum", lambda x: tnp.nancumsum(x, axis=1), lambda x: np.nancumsum(x, axis=1),
         (fixed(WITH_NANS),), note=NAN_NOTE),
    Case("nancumprod", tnp.nancumprod, np.nancumprod, (fixed(SOME_NANS),),
         note=NAN_NOTE + "; " + CUMPROD_NOTE),
    Case("nanmedian", lambda x: tnp.nanmedian(x, axis=1), lambda x: np.nanmedian(x, axis=1),
         (fixed(SOME_NANS),), dtypes=REAL_DTYPES, note=NAN_NOTE + "; " + QUANTILE_NOTE),
    Case("nanmedian", lambda x: tnp.nanmedian(x, axis=0, keepdims=True),
         lambda x: np.nanmedian(x, axis=0, keepdims=True), (fixed(SOME_NANS),),
         dtypes=REAL_DTYPES, label="axis=0 keepdims"),
    *[Case("nanquantile", lambda x, m=method: tnp.nanquantile(x, [0.2, 0.5, 0.9], axis=1, method=m),
           lambda x, m=method: np.nanquantile(x, [0.2, 0.5, 0.9], axis=1, method=m),
           (fixed(SOME_NANS),), dtypes=("float64",), label=method,
           note=NAN_NOTE + "; " + QUANTILE_NOTE)
      for method in ("linear", "lower", "higher", "nearest", "midpoint")],
    Case("nanpercentile", lambda x: tnp.nanpercentile(x, 30, axis=0),
         lambda x: np.nanpercentile(x, 30, axis=0), (fixed(SOME_NANS),), dtypes=REAL_DTYPES,
         note=NAN_NOTE + "; " + QUANTILE_NOTE),
    # all-NaN slices: nan (forward only: a constant nan has no finite differences)
    *[Case(name, lambda x, f=getattr(tnp, name): f(x, axis=1),
           quiet(lambda x, f=getattr(np, name): f(x, axis=1)), (fixed(WITH_NANS),), wrt=(),
           dtypes=REAL_DTYPES, label="all-NaN slice")
      for name in ("nanvar", "nanstd", "nanmax", "nanmin", "nanmedian", "nanmean", "nanprod")],
    Case("nanquantile", lambda x: tnp.nanquantile(x, [0.2, 0.9], axis=1),
         quiet(lambda x: np.nanquantile(x, [0.2, 0.9], axis=1)), (fixed(WITH_NANS),), wrt=(),
         dtypes=("float64",), label="all-NaN slice"),
    # --- partitions: what a partition guarantees (NumPy's exact order within the sides,
    # which other libraries do not reproduce, is checked in tests/test_numpy_names.py) ---
    Case("partition", *both(partitioned(lambda xp, x: xp.partition(x, [3, 12]), [3, 12])),
         (distinct((3, 20)),), dtypes=REAL_DTYPES, note=PARTITION_NOTE),
    Case("partition", *both(partitioned(lambda xp, x: xp.partition(x, -2, axis=0), [5], 0)),
         (distinct((7, 3)),), dtypes=REAL_DTYPES, label="axis=0", note=PARTITION_NOTE),
    Case("partition", *both(partitioned(lambda xp, x: xp.partition(x, 5, axis=None), [5])),
         (fixed([[3.0, 1.0, 1.0, 2.0], [0.5, 2.0, 1.0, 4.0]]),), wrt=(), dtypes=REAL_DTYPES,
         label="flattened, ties"),
    Case("argpartition", *both(partitioned(lambda xp, x: xp.argpartition(x, [0, 4], axis=1),
                                           [0, 4])),
         (distinct((3, 20)),), wrt=(), dtypes=REAL_DTYPES,
         note="NumPy's integer indices, not differentiated"),
]
