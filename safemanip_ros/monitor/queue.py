"""Inputs waiting for the frame their stamp belongs to.

A frame at time ``T`` sees exactly the inputs stamped at or before ``T``,
applied in stamp order, whatever order they arrived in: a late tick (or a
whole rollout replayed offline) stays causal.  :class:`StampQueue` is that
one rule, used by the monitor node for predicate samples, by a grounding
node for messages from its clock's future, and by the audit rebuilding a
live monitor's frames from a recording.  Pure, so its order is tested on a
simulated clock.

Example::

    >>> q = StampQueue()
    >>> q.push(30, 'c'); q.push(10, 'a'); q.push(10, 'b')
    >>> [item for _, item in q.due(20)]
    ['a', 'b']
    >>> len(q), q.oldest_ns
    (1, 30)
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from typing import Generic, TypeVar

__all__ = ['StampQueue']

T = TypeVar('T')


class StampQueue(Generic[T]):
    """Items stamped in nanoseconds, released in stamp order (ties in the
    order they were pushed) once the clock reaches their stamp."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, T]] = []
        self._seq = itertools.count()

    def push(self, stamp_ns: int, item: T) -> None:
        heapq.heappush(self._heap, (stamp_ns, next(self._seq), item))

    def due(self, now_ns: int) -> Iterator[tuple[int, T]]:
        """``(stamp ns, item)`` of every item stamped at or before ``now_ns``,
        in order, each taken out of the queue as it is yielded."""
        heap = self._heap
        while heap and heap[0][0] <= now_ns:
            stamp_ns, _, item = heapq.heappop(heap)
            yield stamp_ns, item

    @property
    def oldest_ns(self) -> int | None:
        """The stamp of the next item due (None: empty)."""
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)
