"""Reusing the big output arrays of tensor ops across steps: a small caching allocator.

NumPy takes every array from ``malloc``, and glibc gives large freed blocks
back to the OS, so a training loop that makes the same big temporaries every
step page-faults their memory in again each time (about a third of an MLP
step). PyTorch avoids that with a caching allocator; this is the same idea for
the arrays tensor ops make. Ops ask :func:`output_like` for a buffer for a big
result; the cache hands back one of its arrays of that shape and dtype that
nobody else references any more (its own reference is the only one left), or
makes and keeps a new one. Only the outputs of tidu's tensor ops go through
it; the process's ``malloc`` policy is not touched.

Idle cached arrays stay allocated until reused: the cache keeps at most 256 MiB
of arrays (:func:`set_cache_limit` changes that; 0 turns it off), at most 64 of
one shape and dtype, and a table entry only for shapes it holds arrays of (so at
most 256 MiB / 128 KiB = 2048 entries); :func:`release_cached_arrays` drops the
idle ones.

An array is handed out again only when the cache's reference is the last one:
a saved value of a recorded op, a tensor, a view or any other holder keeps it
from reuse. The same test, :func:`unshared`, tells an op whether it may write
its result into an input that a compiled program no longer reads (the
program's memory plan, ``tidu.graph.program``).

>>> a = output_like(np.zeros((512, 512), np.float32))
>>> a.shape, a.dtype.name
((512, 512), 'float32')
>>> output_like(np.zeros(3)) is None          # small results: plain NumPy allocation
True

Room: the floor of the tensor package; imports nothing of it.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

MIN_BYTES = 1 << 17
"""Results smaller than this come from plain ``malloc``, which reuses them without page faults."""

_MAX_PER_SHAPE = 64          # bounds the scan for an idle array
_lock = threading.Lock()
_cached: dict = {}           # (shape, dtype) -> list of arrays this cache made
_cached_ids: set = set()     # id() of each array in _cached: they have one reference more
_limits = {"bytes": 256 << 20, "held": 0}


def _first_refcount(arrays) -> int:
    for array in arrays:
        return sys.getrefcount(array)


# The reference count an array has inside the scan below when only the list holds it;
# measured with the same code shape, so it is right for this interpreter.
_IDLE_REFS = _first_refcount([np.empty(0)])
_ENABLED = getattr(sys, "_is_gil_enabled", lambda: True)()   # refcounts are exact under the GIL


def _refs_of_item(values, i: int) -> int:
    return sys.getrefcount(values[i])


# The reference count of an array held by nothing but one list, as _refs_of_item sees it.
_LIST_ONLY_REFS = _refs_of_item([np.empty(0)], 0)


def unshared(values: list, i: int) -> bool:
    """Whether nothing but the list ``values`` (and this cache) references ``values[i]``:
    no variable, view, tensor or other list, so writing into it changes no one else's value.

    >>> unshared([np.zeros(3)], 0)
    True
    >>> a = np.zeros(3)
    >>> unshared([a], 0)                 # the name ``a`` holds it too
    False
    """
    return _ENABLED and _refs_of_item(values, i) <= _LIST_ONLY_REFS + is_cached(values[i])


def is_cached(array) -> bool:
    """Whether this cache holds a reference to ``array`` (so it has one reference more)."""
    return id(array) in _cached_ids


def _take_idle(arrays):
    """An array of ``arrays`` referenced by nothing but the list, or ``None``."""
    for array in arrays:
        if sys.getrefcount(array) <= _IDLE_REFS:
            # A tensor that held it may have made it read-only (primitives.tensor.eager.frontend).
            array.flags.writeable = True
            return array
    return None


def empty(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """An uninitialized array of ``shape`` and ``dtype``, reused from the cache when one is idle."""
    key = (shape, dtype)
    arrays = _cached.get(key)
    if arrays is not None:
        array = _take_idle(arrays)
        if array is not None:
            return array
    array = np.empty(shape, dtype)
    with _lock:
        if _limits["held"] + array.nbytes > _limits["bytes"]:
            _drop_idle()                   # make room: idle arrays of other shapes go first
        arrays = _cached.get(key, [])
        if len(arrays) < _MAX_PER_SHAPE and _limits["held"] + array.nbytes <= _limits["bytes"]:
            arrays.append(array)
            _cached_ids.add(id(array))
            _cached[key] = arrays          # only shapes with arrays have a key (bounded)
            _limits["held"] += array.nbytes
    return array


def output_like(x) -> np.ndarray | None:
    """A buffer of ``x``'s shape and dtype for a big floating-point result, else ``None``.

    ``None`` means: let NumPy allocate (small arrays, other dtypes, no cache).
    """
    if x.nbytes < MIN_BYTES or x.dtype.kind not in "fc" or not _ENABLED:
        return None
    return empty(x.shape, x.dtype)


def release_cached_arrays() -> int:
    """Drop the cache's idle arrays (back to ``malloc``); returns the bytes freed."""
    with _lock:
        return _drop_idle()


def _drop_idle() -> int:
    freed = 0
    for key in list(_cached):
        kept = []
        for array in _cached[key]:
            if sys.getrefcount(array) <= _IDLE_REFS:
                freed += array.nbytes
                _cached_ids.discard(id(array))
            else:
                kept.append(array)
        if kept:
            _cached[key] = kept
        else:
            del _cached[key]               # no key per shape ever seen: the table stays bounded
    _limits["held"] -= freed
    return freed


def set_cache_limit(limit_bytes: int) -> None:
    """Keep at most ``limit_bytes`` of arrays in the cache (0 turns caching off)."""
    with _lock:
        _limits["bytes"] = int(limit_bytes)
    if limit_bytes == 0:
        release_cached_arrays()
