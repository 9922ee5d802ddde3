"""Pause Python's cyclic garbage collector around tidu's own bulk work.

Transforms allocate many small acyclic objects (keys, graph entries). With the
collector on, each full collection walks every live object, so long
transforms slow down as the heap grows. tidu's objects are freed by reference
counting; pausing the cyclic collector for the length of one transform only
delays collecting unrelated cyclic garbage until the transform ends.

When the pause ends after much allocation, the young objects are moved to the
oldest generation (``gc.freeze()`` then ``gc.unfreeze()``, both O(1)) instead
of being walked by the young collection that would otherwise run at the next
allocation: a transform's objects outlive it, and walking them all once cost
about a sixth of a long transform. Young cyclic garbage made just before the
pause then waits for the next full collection. This is skipped when the
program uses ``gc.freeze()`` itself.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_depth = 0
_was_enabled = False
_PROMOTE_MIN = 10_000     # young objects above which the end of a pause promotes them


class _GCPause:
    """The context manager :func:`gc_paused` returns."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth, _was_enabled
        with _lock:
            if _depth == 0:
                _was_enabled = gc.isenabled()
                gc.disable()
            _depth += 1

    def __exit__(self, *exc_info) -> None:
        global _depth
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                if gc.get_count()[0] > _PROMOTE_MIN and gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()


_PAUSE = _GCPause()


def gc_paused() -> _GCPause:
    """Disable the cyclic GC inside the block (nestable, thread-safe); restore it after."""
    return _PAUSE
