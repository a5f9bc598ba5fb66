"""Retracting along the way the arm came.

:class:`JointHistory` keeps the measured joint positions of the last
``window_s`` seconds; :func:`retract_path` returns them in reverse order as
trajectory points (seconds from start, positions) whose timing keeps every
joint at or below ``max_speed_rad_s``.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

import numpy as np


class JointHistory:
    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, np.ndarray]] = deque()

    def add(self, stamp_s: float, positions: Sequence[float]) -> None:
        q = np.asarray(positions, dtype=float)
        if np.isnan(q).any():
            return
        if self._samples and stamp_s <= self._samples[-1][0]:
            if stamp_s < self._samples[-1][0] - 1.0:   # clock reset: start over
                self._samples.clear()
            else:
                return
        self._samples.append((stamp_s, q))
        while self._samples and stamp_s - self._samples[0][0] > self.window_s:
            self._samples.popleft()

    def max_speed_rad_s(self, over_s: float) -> float | None:
        """Largest joint speed between the newest sample and the one about
        ``over_s`` before it (None with fewer than two samples in that span)."""
        if len(self._samples) < 2:
            return None
        t1, q1 = self._samples[-1]
        for t0, q0 in reversed(self._samples):
            if t1 - t0 >= over_s:
                break
        if t1 <= t0:
            return None
        return float(np.max(np.abs(q1 - q0)) / (t1 - t0))

    def latest(self) -> np.ndarray | None:
        return self._samples[-1][1] if self._samples else None

    def positions(self) -> list[np.ndarray]:
        return [q for _, q in self._samples]


def retract_path(history: JointHistory, max_speed_rad_s: float, min_step_rad: float = 1e-3
                 ) -> list[tuple[float, np.ndarray]]:
    """Reverse of the recorded path, timed so no joint exceeds ``max_speed_rad_s``.

    Points closer than ``min_step_rad`` to the previous one are skipped
    (stationary stretches); the first point is the current position at t = 0.
    """
    path = history.positions()[::-1]
    if not path:
        return []
    out = [(0.0, path[0])]
    t = 0.0
    for q in path[1:]:
        step = float(np.max(np.abs(q - out[-1][1])))
        if step < min_step_rad:
            continue
        t += step / max_speed_rad_s
        out.append((t, q))
    return out
