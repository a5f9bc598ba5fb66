"""Reading predicate frames (the ``safemanip monitor-trace`` format).

One frame per line: a JSON object mapping predicate name → ``true``,
``false`` or ``null`` (unknown).  A predicate the suite reads but the frame
omits is unknown for that frame, never false.  A name the suite does not
know is an error listing the known names.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import MonitorInputError


def read_frames(path: str | Path, predicates: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(values, unknown)``, both ``bool[T, P]`` in ``predicates`` order."""
    path = Path(path)
    index = {p: j for j, p in enumerate(predicates)}
    values: list[np.ndarray] = []
    unknown: list[np.ndarray] = []
    try:
        fh = open(path, encoding='utf-8')
    except OSError as err:
        raise MonitorInputError(f'{path}: cannot read trace: {err.strerror or err}') from err
    with fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                frame = json.loads(line)
            except json.JSONDecodeError as err:
                raise MonitorInputError(f'{path}:{number}: invalid JSON: {err.msg} at column {err.colno}') from err
            if not isinstance(frame, dict):
                raise MonitorInputError(f'{path}:{number}: a frame must be a JSON object of predicate -> '
                                        f'true/false/null, got {type(frame).__name__}')
            v = np.zeros(len(predicates), bool)
            u = np.ones(len(predicates), bool)
            for name, value in frame.items():
                j = index.get(name)
                if j is None:
                    raise MonitorInputError(f'{path}:{number}: unknown predicate {name!r}; known predicates: '
                                            f'{", ".join(predicates)}')
                if value is None:
                    continue
                if not isinstance(value, bool):
                    raise MonitorInputError(f'{path}:{number}: {name!r} must be true, false or null, '
                                            f'got {json.dumps(value)}')
                v[j] = value
                u[j] = False
            values.append(v)
            unknown.append(u)
    if not values:
        raise MonitorInputError(f'{path}: no frames')
    return np.array(values), np.array(unknown)


class SampleHold:
    """Frames from asynchronous predicate samples (SEMANTICS.md §1).

    ``update`` records the newest value of a predicate (``None`` = published
    as unknown) at a time in seconds; ``frame(now_s)`` gives the values and
    unknown flags for ``predicates``: a predicate is unknown when it was never
    seen, was published as unknown, or its newest sample is older than
    ``staleness_s``.  The live monitor node feeds it with receive times, the
    offline audit with bag times — the same frames either way.
    """

    def __init__(self, predicates: list[str], staleness_s: float) -> None:
        self.predicates = list(predicates)
        self.index = {p: j for j, p in enumerate(self.predicates)}
        self.staleness_s = staleness_s
        self._value = np.zeros(len(self.predicates), bool)
        self._known = np.zeros(len(self.predicates), bool)
        self._time = np.full(len(self.predicates), -np.inf)
        self._layouts: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray, bool]] = {}

    def update(self, name: str, value: bool | None, time_s: float) -> None:
        j = self.index.get(name)
        if j is None:
            return          # predicates no property reads are ignored
        self._known[j] = value is not None
        self._value[j] = bool(value)
        self._time[j] = time_s

    def update_many(self, names: list[str], values: list[bool], unknown: list[bool], time_s: float) -> None:
        """``update`` for a whole predicate array at once (one numpy assignment)."""
        key = tuple(names)
        cached = self._layouts.get(key)
        if cached is None:   # publishers repeat their layout: resolve the names once
            idx = np.array([self.index.get(n, -1) for n in names], dtype=np.intp)
            keep = idx >= 0
            cached = self._layouts[key] = (idx[keep], keep, bool(keep.all()))
        idx, keep, everything = cached
        if not idx.size:
            return
        unk = np.array(unknown, dtype=bool)
        val = np.array(values, dtype=bool)
        if not everything:
            unk, val = unk[keep], val[keep]
        self._known[idx] = ~unk
        self._value[idx] = val & ~unk
        self._time[idx] = time_s

    def frame(self, now_s: float) -> tuple[np.ndarray, np.ndarray]:
        fresh = self._known & (now_s - self._time <= self.staleness_s)
        return self._value & fresh, ~fresh
