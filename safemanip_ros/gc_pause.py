"""Pausing Python's cyclic garbage collector while many acyclic objects are made."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off inside the block (left as it was after).

    For code that makes 10^5-10^7 small objects that form no cycles (monitor
    results, result files read back, report entries): each full pass of the
    collector traverses every object alive, so passes set off while such
    objects pile up cost several times the work of making them (a resumed
    audit of 5,000 episodes spent about 15 % of its time in them).  Reference
    counting still frees everything that is dropped; a cycle made inside
    waits for the next pass after the block."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
