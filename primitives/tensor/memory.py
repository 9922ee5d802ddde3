"""An opt-in memory policy for NumPy-heavy training loops.

NumPy allocates every large array with ``malloc``; glibc serves big requests
with fresh ``mmap`` pages and hands freed ones back to the OS, so a training
step that allocates the same large temporaries each time page-faults them in
again every step. PyTorch avoids this with a caching allocator. The tensor
ops' own big results already reuse cached buffers
(:mod:`primitives.tensor.buffers`); this call extends the same effect to every
other NumPy allocation in the process by asking glibc to keep freed memory.

It changes the process-wide ``malloc`` policy (memory is returned to the OS
less eagerly), so it is off unless you call it.

>>> retain_freed_memory() in (True, False)     # False where glibc is not the allocator
True

Room: the floor of the tensor package; imports nothing of it.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def retain_freed_memory(limit_bytes: int = 1 << 30) -> bool:
    """Keep up to ``limit_bytes`` of freed memory for reuse (glibc only); ``True`` if applied.

    Serves blocks below 256 MiB from the heap rather than fresh ``mmap`` pages,
    and trims the heap only when more than ``limit_bytes`` are free.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, 256 << 20)) and bool(
        mallopt(_M_TRIM_THRESHOLD, int(min(limit_bytes, 2**31 - 1))))
