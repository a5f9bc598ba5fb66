"""What every grounding source shares: freshness of its input and honest
*unknown* values.

A predicate value is ``True``, ``False`` or ``None`` (unknown).  A source's
predicates are unknown when its newest sample is older than the staleness
limit, when an input is NaN or missing, or right after an out-of-order stamp;
each such event is counted in :class:`InputHealth` and never folded into
``False`` (SEMANTICS.md §1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

Value = bool | None
Predicates = dict[str, Value]
Column = tuple[np.ndarray, np.ndarray]
"""One predicate over frames: ``(value bool[n], known bool[n])``; the
value counts only where known (the array form of :data:`Value`)."""


@dataclass
class InputHealth:
    """Counters of why a source's predicates were unknown."""

    samples: int = 0
    stale_evaluations: int = 0
    nan_values: int = 0
    missing_inputs: int = 0
    out_of_order: int = 0
    clock_jumps: int = 0
    malformed: int = 0          # messages whose arrays were empty or of mismatched lengths
    gross_outliers: int = 0     # object detections left out as grossly wrong (a mis-association, a depth hole)
    orientation_flips: int = 0  # object detections whose orientation was read as an equivalent one (a symmetric shape)

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Freshness:
    """Tracks one input stream's stamps.

    ``accept(stamp_s)`` is False for a sample older than the newest one (it
    is dropped and counted), except that a jump back of more than
    ``clock_jump_s`` is taken as a clock reset (simulation restart, bag loop):
    counted, and the stream starts over (``reset_needed`` tells the source to
    forget its history).  ``fresh(now_s)`` says whether the newest sample is
    within ``staleness_s`` of ``now_s``.
    """

    staleness_s: float
    clock_jump_s: float = 1.0
    interleaved: bool = False
    health: InputHealth = field(default_factory=InputHealth)
    last_stamp_s: float | None = None
    reset_needed: bool = False
    judged_at_s: float | None = None
    """Set while a frame a late tick caught up on is evaluated: the newest
    sample's age is taken at this time (the tick's first frame), not at the
    frame's; a stalled process is not a stale sensor."""
    _rejected_since: float | None = None

    def accept(self, stamp_s: float) -> bool:
        last = self.last_stamp_s
        if last is not None and stamp_s < last:
            if last - stamp_s > self.clock_jump_s:
                self.health.clock_jumps += 1
                self.reset_needed = True
            elif self.interleaved:
                self.health.samples += 1      # taken; the stream's newest stamp stays
                return True
            else:
                self.health.out_of_order += 1
                self._rejected_since = stamp_s
                return False
        self.last_stamp_s = stamp_s
        self.health.samples += 1
        self._rejected_since = None
        return True

    def fresh(self, now_s: float) -> bool:
        last = self.last_stamp_s
        aged_at_s = now_s if self.judged_at_s is None else min(now_s, self.judged_at_s)
        ok = last is not None and bool(within_staleness(now_s, last, self.staleness_s, aged_at_s)) \
            and self._rejected_since is None
        if not ok:
            self.health.stale_evaluations += 1
        return ok


def within_staleness(now_s: Any, stamp_s: Any, staleness_s: float, aged_at_s: Any = None) -> Any:
    """A sample stamped ``stamp_s`` is fresh at ``now_s``: stamped no later
    than now (a hair after, by rounding, still counts) and at most
    ``staleness_s`` old at ``aged_at_s`` (default ``now_s``: a frame a late
    tick caught up on is aged at the tick's first frame).  Floats or arrays."""
    aged = now_s if aged_at_s is None else aged_at_s
    return (-1e-6 <= now_s - stamp_s) & (aged - stamp_s <= staleness_s)


def all_unknown(names: Iterable[str]) -> Predicates:
    return {name: None for name in names}


def kleene_and(a: Column, b: Column) -> Column:
    """Kleene conjunction per frame: false where either is known false."""
    va, ka = a[0] & a[1], a[1]
    vb, kb = b[0] & b[1], b[1]
    return va & vb, (ka & kb) | (ka & ~va) | (kb & ~vb)
