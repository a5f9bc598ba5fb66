"""When the live monitor publishes the closings of violation episodes.

In a frame where hundreds of instances recover at once (the end of one
contact closes every violation it opened) the monitor has one
``ViolationEvent`` per instance to publish, each a DDS write of its own (tens
of microseconds apiece to a recorder in another process): together more than
a 100 Hz frame period.  A closing is not what a hold waits for (an opening
is, and goes out at once), so a :class:`ClosingQueue` lets closings out, in
the order they happened, while the frame's work stays within its budget, and
passes the rest to the frames after.  None waits longer than ``max_wait_s``,
and an instance's queued closing goes out before its next event: per instance
the order of events is kept (between instances a later opening may go out
before an earlier closing; each event carries its own frames and stamps).

Pure and deterministic: seconds on any monotonic clock, given by the caller.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


@dataclass
class _Closing:
    instance: int
    queued_s: float
    payload: bytes
    paced: bool = False         # left for a later frame


@dataclass
class ClosingQueue:
    """Encoded closings waiting for a frame with room; ``max_wait_s``: the
    longest any waits, whatever the frames' load.  ``paced`` counts the
    closings that went to a later frame than their own, ``longest_wait_s``
    is the longest any waited from :meth:`push` to going out."""

    max_wait_s: float = 0.5
    paced: int = 0
    longest_wait_s: float = 0.0
    _queue: deque[_Closing] = field(default_factory=deque, repr=False)
    # Queued closings per instance: every opening asks, and most instances have none queued.
    _queued: Counter[int] = field(default_factory=Counter, repr=False)

    def __post_init__(self) -> None:
        if not self.max_wait_s >= 0:
            raise ValueError(f'max_wait_s {self.max_wait_s}: expected >= 0')

    def __len__(self) -> int:
        return len(self._queue)

    def push(self, instance: int, payload: bytes, now_s: float) -> None:
        """Queue instance ``instance``'s closing, made at ``now_s``."""
        self._queue.append(_Closing(instance, now_s, payload))
        self._queued[instance] += 1

    def take(self, instance: int, now_s: float) -> list[bytes]:
        """The queued closings of ``instance``, in order, removed at ``now_s``:
        they go out before its next event."""
        if not self._queued[instance]:
            return []
        mine = [c for c in self._queue if c.instance == instance]
        self._queue = deque(c for c in self._queue if c.instance != instance)
        return [self._out(c, now_s) for c in mine]

    def release(self, deadline_s: float, clock: Callable[[], float]) -> Iterator[bytes]:
        """The queued closings in order, removed as they are yielded, while
        ``clock()`` (read before each) is before ``deadline_s``, and after it
        those queued ``max_wait_s`` ago or more; the caller publishes each as
        it comes, so the clock sees what publishing took.  One call a frame:
        what it leaves is left for a later frame."""
        while self._queue:
            now_s = clock()
            if now_s >= deadline_s and now_s - self._queue[0].queued_s < self.max_wait_s:
                break
            yield self._out(self._queue.popleft(), now_s)
        for c in self._queue:
            if not c.paced:
                c.paced = True
                self.paced += 1

    def drain(self, now_s: float) -> list[bytes]:
        """Every queued closing, in order, removed at ``now_s`` (a rollout ends)."""
        out = [self._out(c, now_s) for c in self._queue]
        self._queue.clear()
        return out

    def _out(self, closing: _Closing, now_s: float) -> bytes:
        """``closing``, already removed from the queue, goes out at ``now_s``."""
        self._queued[closing.instance] -= 1
        if not self._queued[closing.instance]:
            del self._queued[closing.instance]
        self.longest_wait_s = max(self.longest_wait_s, now_s - closing.queued_s)
        return closing.payload
