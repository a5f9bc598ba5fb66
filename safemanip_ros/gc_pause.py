"""Pausing Python's cyclic garbage collector while many acyclic objects are made, and
timing its passes."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off inside the block (left as it was after).

    For code that makes 10^5-10^7 small objects that form no cycles (monitor
    results, result files read back, report entries): each full pass of the
    collector traverses every object alive, so passes set off while such
    objects pile up cost several times the work of making them (a resumed
    audit of 5,000 rollouts spent about 15 % of its time in them).  Reference
    counting still frees everything that is dropped; a cycle made inside
    waits for the next pass after the block."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class CollectorTime:
    """The seconds Python's cyclic garbage collector has run in this
    process since :meth:`watch` (``gc.callbacks``): a frame that ran long
    can tell a collector pass from its own work.  One for the process
    (:func:`collector_time`); a callback costs about a microsecond."""

    def __init__(self) -> None:
        self.total_s = 0.0
        self.passes = 0
        self._start_s: float | None = None
        self._watching = False

    def watch(self) -> None:
        """Start counting (again calls do nothing)."""
        if not self._watching:
            gc.callbacks.append(self._on_pass)
            self._watching = True

    def _on_pass(self, phase: str, info: dict[str, int]) -> None:
        if phase == 'start':
            self._start_s = time.perf_counter()
        elif self._start_s is not None:
            self.total_s += time.perf_counter() - self._start_s
            self.passes += 1
            self._start_s = None


_COLLECTOR_TIME = CollectorTime()


def collector_time() -> CollectorTime:
    """This process's :class:`CollectorTime`, counting from its first call."""
    _COLLECTOR_TIME.watch()
    return _COLLECTOR_TIME
