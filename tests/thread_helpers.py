"""Running test work in several threads at once (imported by the thread tests)."""

from __future__ import annotations

import threading


def run_threads(work, count: int = 8) -> list:
    """Run ``work(i)`` for ``i`` in ``range(count)``, each in a thread of its own, all
    released together (a barrier); return the results, re-raising the first error a thread
    raised here, in the caller's thread."""
    barrier = threading.Barrier(count)
    results, errors = [None] * count, []

    def target(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as error:      # noqa: BLE001 - reported in the main thread
            errors.append(error)
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
