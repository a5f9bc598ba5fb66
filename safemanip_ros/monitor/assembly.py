"""Frame assembly: predicate samples in, frames out, on a clock of nanoseconds.

One object does every step between a predicate sample arriving and the
frame the monitor steps (SEMANTICS.md §1), for the live monitor node and
for the audit rebuilding a live monitor's frames from a recording:

* samples wait in stamp order (:class:`~.queue.StampQueue`) until a frame
  at or after their stamp is built, so a late tick stays causal;
* a sample stamped ahead of the clock (a publisher on another clock) is
  kept, the newest of each topic only, until the clock reaches it;
* the frame clock (:class:`~.clock.FrameClock`) says which frames a tick
  builds, catching up on the periods a stall missed, and when each judges
  its samples' age (:func:`~.clock.ageing_ns`);
* the sample-and-hold (:class:`~.frames.SampleHold`) turns the samples
  applied so far into each frame's values and unknown flags.

Pure: no rclpy, no wall clock.  Every time is an argument, so the timing
rules are tested on a simulated clock (test/test_frame_assembly.py).

Example (20 Hz, samples held 0.25 s)::

    >>> a = FrameAssembly(['gripper_open'], rate_hz=20.0, staleness_s=0.25)
    >>> a.push(0, ['gripper_open'], [True], [False])
    >>> [f.frame_ns for f in a.tick(10_000_000)]        # the first tick: one frame, now
    [9000000]
    >>> a.frame(9_000_000)[0].tolist()
    [True]
    >>> [f.frame_ns for f in a.tick(160_000_000)]       # a tick late by two periods catches up
    [60000000, 110000000, 159000000]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .clock import FrameClock, ageing_ns
from .frames import SampleHold
from .queue import StampQueue

__all__ = ['DueFrame', 'FrameAssembly', 'Sample']

Sample = tuple[list[str], list[bool], list[bool]]
"""A predicate array: names, values and unknown flags, in step."""


@dataclass(frozen=True)
class DueFrame:
    """A frame a tick builds: its time and when it judges its samples' age (ns)."""

    frame_ns: int
    aged_at_ns: int


class FrameAssembly:
    """Samples to frames for one monitor (module docstring).

    ``rate_hz``: the frame rate; ``staleness_s``: how long a sample holds.
    ``skipped`` counts the frame periods a stall beyond the catch-up limit
    left unmonitored (:class:`~.clock.FrameClock`)."""

    def __init__(self, predicates: list[str], rate_hz: float, staleness_s: float) -> None:
        self.hold = SampleHold(predicates, staleness_s)
        self.clock = FrameClock.at_rate(rate_hz)
        self._pending: StampQueue[Sample] = StampQueue()
        self._ahead: dict[str, tuple[int, Sample]] = {}
        self.skipped = 0

    def set_predicates(self, predicates: list[str], staleness_s: float) -> None:
        """Frames of other predicates from now on (a reloaded suite): the
        samples held so far are dropped, those waiting for their frame stay."""
        self.hold = SampleHold(predicates, staleness_s)

    @property
    def predicates(self) -> list[str]:
        return self.hold.predicates

    @property
    def staleness_s(self) -> float:
        return self.hold.staleness_s

    @property
    def period_ns(self) -> int:
        return self.clock.period_ns

    def push(self, stamp_ns: int, names: list[str], values: list[bool], unknown: list[bool]) -> None:
        """A sample stamped ``stamp_ns``, applied to the first frame at or after its stamp."""
        self._pending.push(stamp_ns, (names, values, unknown))

    def push_ahead(self, topic: str, stamp_ns: int, names: list[str], values: list[bool],
                   unknown: list[bool]) -> None:
        """A sample of ``topic`` stamped ahead of the clock: kept, replacing
        any earlier one of that topic, until a frame reaches its stamp.
        (All kept, they would grow the queue by every message of a
        publisher on another clock for as long as it runs.)"""
        self._ahead[topic] = (stamp_ns, (names, values, unknown))

    def hold_now(self, stamp_ns: int, names: list[str], values: list[bool], unknown: list[bool]) -> None:
        """A sample applied at once, with no frame to wait for (the monitor is
        not building frames): the held state a status reports."""
        self.hold.update_many(names, values, unknown, stamp_ns * 1e-9)

    def restart(self) -> None:
        """The next tick starts the frame schedule afresh (a new phase, a
        rollout, a clock that jumped); the samples held stay."""
        self.clock.restart()

    def tick(self, now_ns: int, sampled_now: bool = False) -> list[DueFrame]:
        """The frames a tick at ``now_ns`` builds, oldest first, each with
        the time its samples' age is judged at.  The newest frame is at
        ``now_ns`` where the grounding is sampled in this process at the
        tick (``sampled_now``), else at ``now_ns`` less the in-flight cutoff
        (:meth:`~.clock.FrameClock.newest_frame_ns`); caught-up frames keep
        their scheduled times."""
        tick = self.clock.tick(now_ns)
        self.skipped += tick.skipped
        due = tick.due_ns
        if not due:
            return []
        due[-1] = self.clock.newest_frame_ns(due[-1], now_ns, sampled_now)
        return [DueFrame(f, a) for f, a in zip(due, ageing_ns(due))]

    def frame(self, frame_ns: int, aged_at_ns: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Values and unknown flags of the frame at ``frame_ns``: every
        sample stamped at or before it applied in stamp order, each judged
        stale at ``aged_at_ns`` (default ``frame_ns``)."""
        for topic, (stamp_ns, sample) in list(self._ahead.items()):
            if stamp_ns <= frame_ns:            # the clock got there (a forward jump of /clock)
                self._pending.push(stamp_ns, sample)
                del self._ahead[topic]
        for stamp_ns, (names, values, unknown) in self._pending.due(frame_ns):
            self.hold.update_many(names, values, unknown, stamp_ns * 1e-9)
        return self.hold.frame(frame_ns * 1e-9, None if aged_at_ns is None else aged_at_ns * 1e-9)

    def held(self, now_ns: int) -> tuple[np.ndarray, np.ndarray]:
        """The held state at ``now_ns`` without applying waiting samples (a status, between frames)."""
        return self.hold.frame(now_ns * 1e-9)

    @property
    def waiting(self) -> int:
        """Samples waiting for their frame (ahead-of-clock ones included)."""
        return len(self._pending) + len(self._ahead)

    @property
    def waiting_ahead(self) -> int:
        """Samples kept because they are stamped ahead of the clock (at most one per topic)."""
        return len(self._ahead)
