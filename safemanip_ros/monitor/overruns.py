"""Which missed frame deadlines the monitor's log says, at most one line a
second: the worst of each second, not its first.

ros2_control's controller manager, like rclpy's ``throttle_duration_sec``,
says the first overrun of a second and drops the rest; a frame that took
0.7 s went unsaid behind a tick 32 ms late a moment before it.  Here each
overrun is counted at once, the worst one (longest) waits for the second to
pass, and a line then says it with how many it stands for and how long
ago it happened.  Pure: the monitor node calls :meth:`OverrunLog.note` for
each overrun and :meth:`OverrunLog.due` on each tick, and logs what they
return.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Worst:
    length_s: float
    text: str
    at_s: float
    since: int = 1      # overruns it stands for (itself and those not said since the last line)


class OverrunLog:
    """Counts overruns and picks the lines to log, ``gap_s`` apart at least."""

    def __init__(self, gap_s: float = 1.0) -> None:
        self.gap_s = gap_s
        self.count = 0
        self._said_at_s: float | None = None
        self._worst: _Worst | None = None

    def note(self, now_s: float, length_s: float, text: str) -> str | None:
        """Count an overrun at ``now_s`` (monotonic seconds), ``length_s``
        long (a frame's build time, a tick's lateness: what ranks it), said
        by ``text``.  Returns the line to log now, or None (kept, if it is
        the worst so far, for :meth:`due`)."""
        self.count += 1
        if self._worst is None or length_s > self._worst.length_s:
            since = 1 if self._worst is None else self._worst.since + 1
            self._worst = _Worst(length_s, text, now_s, since)
        else:
            self._worst.since += 1
        return self.due(now_s)

    def due(self, now_s: float, waiting: bool = False) -> str | None:
        """The line to log at ``now_s``, if one waits and the last was
        ``gap_s`` ago or more (``waiting``: whenever one waits — a rollout's
        end, after which no tick may come)."""
        worst = self._worst
        if worst is None or (not waiting and self._said_at_s is not None and now_s - self._said_at_s < self.gap_s):
            return None
        self._said_at_s, self._worst = now_s, None
        line = f'{worst.text}; {self.count} overrun(s) so far'
        if worst.since > 1:
            line += f', this the longest of the {worst.since} since the last line'
        if now_s > worst.at_s:      # said later than it happened: when it did
            line += f', {now_s - worst.at_s:.3f} s ago'
        return line
