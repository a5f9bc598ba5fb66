"""The frame clock: when frames are, for the live monitor and the audit alike.

Frames are the ticks of a fixed rate (SEMANTICS.md §1) on a clock of
nanoseconds: ROS time live (``/clock`` in simulation), bag time or the
monitor's own published stamps offline.  This module decides every "when"
of a frame, and nothing else:

* :class:`FrameClock` — the live schedule: exactly one frame per period;
  a late tick catches up on the periods it missed (up to
  :data:`MAX_CATCH_UP_FRAMES`), so a window of k frames is always k
  periods of input time; a clock that jumps back restarts the schedule.
  It also fixes the time of the newest frame a tick builds
  (:meth:`FrameClock.newest_frame_ns`), and, offline, the times of the
  frames of a recorded live run (:meth:`FrameClock.replayed`).
* :func:`ageing_ns` — the time at which each frame of a tick judges its
  samples' age: the monitor's own stall does not age them.
* :func:`frame_grid` and :func:`frame_segments` — the offline schedule of a
  recording without the monitor's stamps: frames every period from the
  first message, a hole longer than ``max_gap_ns`` ending the rollout.
* :class:`Arming` — when the live monitor starts judging: once every input
  that carries predicates it reads has given a known value, or after a
  timeout (before that, unknowns are the start-up, not a fault).

Pure: no rclpy, no wall clock (every time is an argument).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

FRAME_CUTOFF_NS = 1_000_000
"""A frame built now takes the samples stamped up to 1 ms ago: younger ones
may still be on their way through DDS and go to the next frame."""

MAX_CATCH_UP_FRAMES = 600
"""Most missed frame periods one late tick catches up on (30 s at 20 Hz)."""


def period_ns_of(rate_hz: float) -> int:
    """The frame period in ns of a rate in Hz (nearest ns)."""
    return int(round(1e9 / rate_hz))


@dataclass
class Tick:
    """What one tick of the live clock asks for: the frames due (ns, oldest
    first; the last is the one nearest to the tick) and the periods skipped
    beyond the catch-up limit (never monitored; the schedule restarts)."""

    due_ns: list[int]
    skipped: int = 0


@dataclass
class FrameClock:
    """The live frame schedule at ``period_ns`` (module docstring)."""

    period_ns: int
    max_catch_up: int = MAX_CATCH_UP_FRAMES
    next_frame_ns: int | None = None

    @classmethod
    def at_rate(cls, rate_hz: float) -> FrameClock:
        return cls(period_ns_of(rate_hz))

    def restart(self) -> None:
        """The next tick starts the schedule afresh (a new phase, a new rollout)."""
        self.next_frame_ns = None

    def tick(self, now_ns: int) -> Tick:
        """The frames due at a tick at ``now_ns``.

        The first tick, or one whose clock went back more than two periods
        (a simulation reset), starts the schedule at ``now_ns``.  The frame
        nearest to the tick is due now even when the tick is up to half a
        period early (a timer that fires a hair early must not leave its
        frame to the next tick)."""
        period = self.period_ns
        if self.next_frame_ns is None or now_ns < self.next_frame_ns - 2 * period:
            self.next_frame_ns = now_ns
        due: list[int] = []
        horizon_ns = now_ns + period // 2
        while self.next_frame_ns <= horizon_ns and len(due) < self.max_catch_up:
            due.append(self.next_frame_ns)
            self.next_frame_ns += period
        skipped = 0
        if self.next_frame_ns <= now_ns:          # stalled beyond the catch-up limit: restart from now
            skipped = (now_ns - self.next_frame_ns) // period + 1
            self.next_frame_ns = now_ns + period
        return Tick(due, skipped)

    @staticmethod
    def newest_frame_ns(scheduled_ns: int, now_ns: int, sampled_now: bool) -> int:
        """The time of the newest frame of a tick built at ``now_ns``.

        Where the grounding is sampled in this process at the tick
        (``sampled_now``), the frame is at ``now_ns`` and sees those very
        samples.  Otherwise it is when it is built less
        :data:`FRAME_CUTOFF_NS` for samples still in flight, never later
        than scheduled.  Caught-up frames keep their scheduled times."""
        return now_ns if sampled_now else min(scheduled_ns, now_ns - FRAME_CUTOFF_NS)

    def replayed(self, published_ns: dict[int, int]) -> list[int]:
        """The times of frames ``0 … max(published_ns)`` of a recorded live
        rollout, from the stamps its verdicts were published with
        (frame → ns).  A frame a late tick caught up on published no
        verdicts: it was scheduled one period after another from the first
        recorded frame, whose scheduled time is its stamp plus the cutoff."""
        first = min(published_ns)
        anchor = published_ns[first] + FRAME_CUTOFF_NS - first * self.period_ns
        return [published_ns.get(k, anchor + k * self.period_ns) for k in range(max(published_ns) + 1)]

    def replayed_ageing(self, published_ns: dict[int, int]) -> list[int]:
        """When each frame of :meth:`replayed` judged its samples' age
        (:func:`ageing_ns`).  A tick published its newest frame only: the
        unpublished frames before a published one are the rest of its tick.
        Frames before the first recorded one are not a tick's: each its own."""
        times = self.replayed(published_ns)
        first = min(published_ns)
        out: list[int] = []
        for k, t_k in enumerate(times):
            caught_up_after_another = k > first and k not in published_ns and k - 1 not in published_ns
            out.append(out[-1] if caught_up_after_another else t_k)
        return out


def recorded_period_ns(published_ns: dict[int, int]) -> int | None:
    """The frame period a live run was monitored at, from the stamps its
    verdicts were published with (frame → ns): the median step between
    consecutive frames both published (a tick that caught up published its
    newest frame only).  None with fewer than three such steps."""
    steps = [published_ns[k + 1] - published_ns[k] for k in published_ns if k + 1 in published_ns]
    return int(np.median(steps)) if len(steps) >= 3 else None


def ageing_ns(due_ns: list[int]) -> list[int]:
    """When each frame of one tick (``due_ns``, oldest first) judges how old
    its samples are (their staleness): the frames a late tick catches up on
    at the tick's first frame, the newest at its own time.  A stalled monitor
    is not a stale sensor: the samples it could not take during its stall
    still hold, and each frame takes those stamped at or before it; only the
    frame built now calls a silent input stale."""
    return [due_ns[0]] * (len(due_ns) - 1) + [due_ns[-1]]


def frame_grid(first_ns: int, last_ns: int, period_ns: int) -> np.ndarray:
    """The frame times ``first_ns, first_ns + period_ns, …`` up to ``last_ns`` (int64 ns)."""
    return np.arange(first_ns, last_ns + 1, period_ns, dtype=np.int64)


@dataclass
class FrameSchedule:
    """The frames of a recording read message by message, in bag time: a
    segment's frames lie on the grid of its first message's time, every
    ``period_ns``; the frames strictly before each message are built before
    it is applied (a frame sees every message logged at or before it), and a
    message more than ``max_gap_ns`` past the next frame ends the segment
    (frames are never built across a hole in the recording).
    :func:`frame_segments` computes the same segments for a whole recording
    at once; a property test holds them equal.

    Example::

        >>> s = FrameSchedule(period_ns=10, max_gap_ns=100)
        >>> s.take(5), s.take(27), s.take(300)
        (([], None), ([5, 15, 25], None), ([35], 35))
        >>> s.last()
        300
    """

    period_ns: int
    max_gap_ns: int
    next_frame_ns: int | None = None

    def take(self, stamp_ns: int) -> tuple[list[int], int | None]:
        """A message logged at ``stamp_ns``: the frames (ns) to build before
        it, and, when it opens a new segment after a gap, the last frame of
        the segment it ends (which is among the frames returned)."""
        if self.next_frame_ns is None:
            self.next_frame_ns = stamp_ns
        frames: list[int] = []
        if stamp_ns - self.next_frame_ns > self.max_gap_ns:
            # A hole in the recording: end the segment here instead of building frames across it
            # (10^18 ns once meant 2.6 GB).
            gap_after = self.next_frame_ns
            frames.append(gap_after)
            self.next_frame_ns = stamp_ns
            return frames, gap_after
        while stamp_ns > self.next_frame_ns:
            frames.append(self.next_frame_ns)
            self.next_frame_ns += self.period_ns
        return frames, None

    def restart(self, stamp_ns: int) -> None:
        """A new segment from ``stamp_ns`` (a rollout marker in the recording)."""
        self.next_frame_ns = stamp_ns

    def last(self) -> int | None:
        """The frame holding the last messages (None: no message)."""
        return self.next_frame_ns


def frame_segments(t: np.ndarray, period_ns: int, max_gap_ns: int) -> list[tuple[int, int, int, int, int | None]]:
    """The segments that messages logged at ``t`` (ns, reading order) make:
    ``(first message, end message, first frame ns, last frame ns, stamp of
    the message that opened a gap after it or None)`` — :class:`FrameSchedule`'s
    segments, computed per segment with a running maximum instead of
    message by message."""
    out: list[tuple[int, int, int, int, int | None]] = []
    first, n = 0, len(t)
    while first < n:
        start = int(t[first])
        ahead = np.maximum.accumulate(t[first:]) - start        # >= 0: the segment's first stamp is its start
        after = start + -(-ahead // period_ns) * period_ns        # next_frame once each message is taken
        before = np.empty_like(after)
        before[0], before[1:] = start, after[:-1]
        gaps = np.flatnonzero(t[first:] - before > max_gap_ns)
        if not gaps.size:
            out.append((first, n, start, int(after[-1]), None))
            break
        k = int(gaps[0])
        out.append((first, first + k, start, int(before[k]), int(t[first + k])))
        first += k
    return out


@dataclass
class Arming:
    """When the live monitor arms (module docstring).

    Per input (a predicate topic): whether it carries predicates the suite
    reads (``relevant``) and whether one of those has had a known value
    (``known``).  Armed once every input that has a publisher has been heard,
    and each relevant one has given a known value; after ``timeout_s``
    (seconds on the caller's clock; 0: never) it arms anyway and
    :attr:`timed_out_waiting` names the inputs it never heard from."""

    timeout_s: float
    armed: bool = False
    since_s: float | None = None
    relevant: dict[str, bool] = field(default_factory=dict)
    known: dict[str, bool] = field(default_factory=dict)
    timed_out_waiting: list[str] | None = None

    def heard(self, topic: str, read: int, known: int) -> None:
        """A message on ``topic`` with ``read`` predicates the suite reads,
        ``known`` of them with a known value."""
        self.relevant[topic] = self.relevant.get(topic, False) or read > 0
        self.known[topic] = self.known.get(topic, False) or known > 0

    def check(self, now_s: float, topics: list[str], published: set[str]) -> bool:
        """Whether armed at ``now_s``; ``topics``: the inputs listened to,
        ``published``: those of them that have a publisher now."""
        if self.armed:
            return True
        if self.since_s is None:
            self.since_s = now_s
        waiting = [t for t in topics if (t in published and t not in self.relevant)
                   or (self.relevant.get(t) and not self.known.get(t))]
        ready = not waiting and any(self.relevant.values())
        if not ready and self.timeout_s > 0 and now_s - self.since_s >= self.timeout_s:
            self.timed_out_waiting = waiting
            ready = True
        self.armed = ready
        return ready
