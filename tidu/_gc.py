"""Pause Python's cyclic garbage collector around tidu's own bulk work.

Transforms allocate many small acyclic objects (keys, graph entries). With the
collector on, each full collection walks every live object, so long
transforms slow down as the heap grows. tidu's objects are freed by reference
counting; pausing the cyclic collector for the length of one transform only
delays collecting unrelated cyclic garbage until the transform ends.

The pause never touches ``gc.enable()``/``gc.disable()``: those belong to the
program. It sets the first collection threshold to 0 instead, which stops
automatic collections whatever the enabled flag says, and puts the program's
thresholds back when the last pause ends. So a ``gc.disable()`` made by the
program, before or during a pause, is still in force afterwards, and pauses in
several threads nest: the collector resumes only when the last one ends. If the
program sets other thresholds during a pause, they are kept.

When the pause ends after much allocation, the young objects are moved to the
oldest generation (``gc.freeze()`` then ``gc.unfreeze()``, both O(1)) instead
of being walked by the young collection that would otherwise run at the next
allocation: a transform's objects outlive it, and walking them all once cost
about a sixth of a long transform. Young cyclic garbage made just before the
pause then waits for the next full collection. This is skipped when the
program uses ``gc.freeze()`` itself.

>>> import gc
>>> gc.disable()
>>> with gc_paused():
...     pass
>>> gc.isenabled()
False
>>> gc.enable()
"""

from __future__ import annotations

import gc
import threading

# Reentrant: a collection triggered by an allocation under the lock may run a
# finalizer that starts a transform in the same thread.
_lock = threading.RLock()
_depth = 0
_saved_thresholds: tuple = ()   # the program's thresholds when the first pause began
_PROMOTE_MIN = 10_000     # young objects above which the end of a pause promotes them


class _GCPause:
    """The context manager :func:`gc_paused` returns."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth, _saved_thresholds
        with _lock:
            if _depth == 0:
                thresholds = gc.get_threshold()
                gc.set_threshold(0, *thresholds[1:])
                _saved_thresholds = thresholds
            _depth += 1

    def __exit__(self, *exc_info) -> None:
        global _depth
        with _lock:
            _depth -= 1
            if _depth:
                return
            current = gc.get_threshold()
            if current != (0, *_saved_thresholds[1:]):
                return              # the program set thresholds during the pause: keep them
            if (gc.isenabled() and gc.get_count()[0] > _PROMOTE_MIN
                    and gc.get_freeze_count() == 0):
                gc.freeze()
                gc.unfreeze()
            gc.set_threshold(*_saved_thresholds)


_PAUSE = _GCPause()


def gc_paused() -> _GCPause:
    """Stop automatic cyclic collections inside the block (nestable, thread-safe).

    The program's ``gc.enable()``/``gc.disable()`` state is never changed.
    """
    return _PAUSE
