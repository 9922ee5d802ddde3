"""Pause Python's cyclic garbage collector around tidu's own bulk work.

Transforms allocate many small acyclic objects (keys, graph entries). With the
collector on, each full collection walks every live object, so long
transforms slow down as the heap grows. tidu's objects are freed by reference
counting; pausing the cyclic collector for the length of one transform only
delays collecting unrelated cyclic garbage until the transform ends.
"""

from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def gc_paused():
    """Disable the cyclic GC inside the block (nestable, thread-safe); restore it after."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
