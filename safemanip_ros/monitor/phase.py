"""Phase-locking the live frame clock to its inputs.

A frame samples the inputs that arrived before it.  A robot publishing at the
frame rate, with its messages landing just *after* the monitor's tick, has
every change wait almost a whole period (50 ms at 20 Hz) before a frame sees
it; landing just before the tick, the wait is a few milliseconds.  The
frame period is fixed (a window of k frames is k periods of the clock); its
phase is free.  :class:`PhaseLock` watches, at each frame, how long ago the
newest input arrived (the *lag*) and, when that lag has been steady and
large for a while, says how much earlier the ticks should come, so that
frames follow the inputs by about ``target_lag_s``.  "Steady" leaves out
the ``outliers`` most extreme lags at each end of the window: on a busy
computer one message in ten may land late (a scheduler hiccup, a garbage
collection), and that should not stop a phase that is otherwise steady.

Pure and deterministic (no clock of its own): the node feeds the lags and
moves its timer; inputs at another rate or in no steady phase (the lags
spread more than ``max_spread_s``) leave the phase alone.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field


@dataclass
class PhaseLock:
    """Lags in seconds; ``ticks`` frames of evidence before each shift."""

    period_s: float
    target_lag_s: float = 0.010      # frames follow the inputs by this (room for arrival jitter)
    shift_above_s: float = 0.020     # a median lag above this is worth a shift
    max_spread_s: float = 0.010      # lags spread wider than this: no steady phase to lock to
    ticks: int = 20
    outliers: int = 2                # lags left out of the spread at each end (of ``ticks``)
    shifts: int = 0                  # shifts made so far
    _lags: collections.deque[float] = field(default_factory=collections.deque, repr=False)

    def __post_init__(self) -> None:
        if self.ticks <= 2 * self.outliers:
            raise ValueError(f'PhaseLock: {self.ticks} ticks of evidence leave nothing once '
                             f'{self.outliers} outliers at each end are left out')

    def observe(self, lag_s: float | None) -> float | None:
        """The lag of this frame (seconds since the newest input arrived; None
        when nothing arrived yet).  Returns how much earlier (s, in
        ``(0, period_s)``) the next tick should come, or None to keep the
        phase.  After a shift the evidence starts afresh."""
        if lag_s is None or lag_s < 0 or lag_s >= self.period_s:
            self._lags.clear()          # no input within the last period: no phase to speak of
            return None
        self._lags.append(lag_s)
        if len(self._lags) > self.ticks:
            self._lags.popleft()
        if len(self._lags) < self.ticks:
            return None
        lags = sorted(self._lags)
        median = lags[len(lags) // 2]
        steady = lags[self.outliers:len(lags) - self.outliers]
        if steady[-1] - steady[0] > self.max_spread_s or median <= self.shift_above_s:
            return None
        self._lags.clear()
        self.shifts += 1
        return median - self.target_lag_s

    def reset(self) -> None:
        self._lags.clear()
