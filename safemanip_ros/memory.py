"""Keeping freed memory in a process that churns large arrays (glibc's malloc).

An audit allocates and frees buffers of a few MB per bag: a bag's messages
joined into one array, the layout match's temporaries, the columns.  glibc
serves every allocation above its mmap threshold (128 KiB when a process
starts) with a fresh ``mmap`` and unmaps it on ``free``, so each bag faults
its pages in again.  glibc raises the threshold by itself once it has freed
such a block, but only block by block: the first audit in a process decoded
predicate bags about 3x slower than the next one in the same process (8.6
against 2.8 ms per bag of 1,200 messages, 40 bags).  Fixing both thresholds
when an audit starts serves those buffers from the heap and keeps what is
freed for the next bag: the first audit then decodes as fast as the next.

The explicit LTLf construction churns the same way, one breadth-first layer
at a time: the nested window at k = 100 faulted 33,000 pages in its first
exploration in a process and 8,000 in its second; with the thresholds fixed,
12,000.  ``safemanip compile`` fixes them (in 8 fresh processes the compile
took 0.71 s against 0.80 s, medians).

The cost is memory the process keeps rather than hands back: up to
:data:`TRIM_THRESHOLD_BYTES` of free heap (measured: peak resident memory
176 → 190 MB over those 40 bags).  Only audit and compile processes call
this; the live nodes, and ``compile_formula`` called as a library, keep
glibc's defaults (a host process's allocator is not ours to retune).
"""

from __future__ import annotations

import ctypes
import functools

MMAP_THRESHOLD_BYTES = 32 << 20
"""Allocations below this come from the heap (glibc's own adaptive limit is 32 MiB on 64-bit)."""

TRIM_THRESHOLD_BYTES = 64 << 20
"""Free memory at the heap's top kept, not returned to the system, up to this much."""

_M_TRIM_THRESHOLD = -1      # <malloc.h>
_M_MMAP_THRESHOLD = -3


@functools.cache
def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds for this process (once; a
    forked worker inherits them).  Returns whether they were set: False
    where the C library has no ``mallopt`` (not glibc), which changes only
    speed."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # mallopt returns 1 on success, 0 on error.
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) & bool(mallopt(_M_TRIM_THRESHOLD,
                                                                                 TRIM_THRESHOLD_BYTES))
