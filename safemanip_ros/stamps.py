"""ROS time stamps (``builtin_interfaces/Time``: ``sec``, ``nanosec``) as
numbers: the one conversion every layer uses, for rclpy's messages and
rosbags' alike (both are read by attribute); and :class:`StampSkew`, which
finds inputs stamped on another clock than the receiving node's.  No ROS
import."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NS_PER_S = 1_000_000_000

CLOCK_MISMATCH_S = 5.0
"""A sample stamped further than this from the receiving node's clock is on
another clock: a simulator's ``/clock`` against the system time (one side
with ``use_sim_time``), or machines whose clocks are not synchronised: far
beyond any transport delay or stall the live stack tolerates."""


def stamp_ns(stamp: Any) -> int:
    """The stamp in integer nanoseconds."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def stamp_s(stamp: Any) -> float:
    """The stamp in seconds, ``int(sec) + int(nanosec) * 1e-9`` (the same float
    as the bag column decoders compute)."""
    return int(stamp.sec) + int(stamp.nanosec) * 1e-9


@dataclass
class StampSkew:
    """Samples whose stamps are more than :data:`CLOCK_MISMATCH_S` from the
    node's clock, per input: counted, and each input's first one reported.

    A sample stamped far ahead is seen by no frame until the clock reaches
    it, one far behind is stale on arrival: either way the frames read the
    input as unknown, and this names the reason."""

    limit_s: float = CLOCK_MISMATCH_S
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def limit_ns(self) -> int:
        return int(self.limit_s * NS_PER_S)

    def check(self, source: str, stamp_ns: int, now_ns: int) -> float | None:
        """The skew in seconds (stamp − now) of a sample off the node's clock,
        else None (also while the clock reads 0: ``/clock`` not heard yet,
        nothing to compare with).  :meth:`first` says whether it is the
        source's first."""
        if not now_ns or abs(stamp_ns - now_ns) <= self.limit_ns:
            return None
        self.counts[source] = self.counts.get(source, 0) + 1
        return (stamp_ns - now_ns) * 1e-9

    def first(self, source: str) -> bool:
        return self.counts.get(source) == 1

    @staticmethod
    def explain(source: str, skew_s: float, sim_time: bool) -> str:
        """One line for the operator (``sim_time``: the node's clock is ``/clock``)."""
        clock = 'ROS time from /clock' if sim_time else 'ROS time, the system clock'
        side = ('ahead of' if skew_s > 0 else 'behind')
        consequence = ('no frame sees it until the clock gets there' if skew_s > 0 else 'it is stale on arrival')
        return (f'{source}: a sample stamped {abs(skew_s):.1f} s {side} this node\'s clock ({clock}): {consequence}, '
                f'and the input reads as unknown. Is it on another clock (use_sim_time set on one side only, '
                f'or clocks not synchronised)?')


def utc_now() -> str:
    """Now in UTC, ISO 8601 to the second (``2026-12-07T01:02:03Z``): the time an alert was sent."""
    import datetime
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
