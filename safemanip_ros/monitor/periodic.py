"""When the live monitor publishes its periodic messages.

The running metrics, the status and the diagnostics go out every
``period_s``; they are housekeeping, not a frame's deadline work (the
verdicts and violation events are), and with a thousand instances they
cost about as much as a frame's own work.  Published in a frame that
already had much to do — every instance's verdicts, or hundreds of
violations closing at once — the two together overran the frame period.

A :class:`PeriodicSchedule` (one per message) therefore lets a message
wait, once due, for a frame that leaves room for it: the frame's work so far
plus what the message cost the last time within ``budget`` of the frame
period.  It never waits longer than ``max_wait`` of its own period (then it
goes out whatever the frame's load: the status is the monitor's heartbeat),
and the schedule does not drift: the next is due one period after this one
was due, not after it went out.

Pure and deterministic: seconds on any monotonic clock, given by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PeriodicSchedule:
    """``period_s``: how often; ``budget``: the share of a frame period the
    frame's own work and the periodic messages may fill together;
    ``max_wait``: the longest wait once due, a share of ``period_s``."""

    period_s: float
    budget: float = 0.7
    max_wait: float = 0.25
    cost_s: float | None = None         # what publishing took the last time (None: not yet published)
    _due_s: float | None = None         # None: due now (nothing published yet)

    def __post_init__(self) -> None:
        if not self.period_s > 0:
            raise ValueError(f'period_s {self.period_s}: expected > 0')
        if not 0 < self.budget <= 1:
            raise ValueError(f'budget {self.budget}: expected a share of the frame period in (0, 1]')
        if not 0 <= self.max_wait < 1:
            raise ValueError(f'max_wait {self.max_wait}: expected a share of the period in [0, 1)')

    def due(self, now_s: float) -> bool:
        """Whether the message is due at ``now_s``."""
        return self._due_s is None or now_s >= self._due_s

    def publish_now(self, now_s: float, used_s: float, frame_period_s: float) -> bool:
        """Whether a frame that started at ``now_s`` and has worked ``used_s``
        so far publishes the message: due, and either room for it in the
        frame (``used_s + cost_s <= budget * frame_period_s``; never
        published yet, it is taken to need half the budget) or waited
        ``max_wait`` already."""
        if not self.due(now_s):
            return False
        if self._due_s is None:
            self._due_s = now_s        # the first frame that asks: due from then
        cost_s = self.budget * frame_period_s / 2 if self.cost_s is None else self.cost_s
        if used_s + cost_s <= self.budget * frame_period_s:
            return True
        return now_s - self._due_s >= self.max_wait * self.period_s

    def published(self, now_s: float, cost_s: float) -> None:
        """It went out at ``now_s`` and took ``cost_s``: the next is due one
        period after this one was (one period after ``now_s`` when it was
        more than a period late: a stalled monitor does not publish a burst)."""
        self.cost_s = cost_s
        due = now_s if self._due_s is None else self._due_s
        self._due_s = due + self.period_s if now_s - due < self.period_s else now_s + self.period_s
