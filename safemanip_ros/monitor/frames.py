"""Predicate frames for the monitor: from trace files (the one reader,
:mod:`safemanip_ros.ltlf.trace`) and from asynchronous samples
(:class:`SampleHold`, shared by the live node and the audit)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..ltlf.trace import Trace, read_traces


def trace_matrix(trace: Trace, predicates: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(values, unknown)``, both ``bool[T, P]`` in ``predicates`` order:
    ``null`` and names a frame does not mention are unknown; a step list
    makes the names it does not list false."""
    T, P = len(trace.frames), len(predicates)
    values = np.zeros((T, P), bool)
    unknown = np.zeros((T, P), bool)
    for t, frame in enumerate(trace.frames):
        for j, name in enumerate(predicates):
            v = frame.value(name)
            if v is None:
                unknown[t, j] = True
            else:
                values[t, j] = v
    return values, unknown


def read_frames(path: str | Path, predicates: list[str], allow_unknown: bool = False
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(values, unknown)`` of a one-trace file (``monitor-trace``); a name
    outside ``predicates`` is an error unless ``allow_unknown``."""
    from ..errors import TraceError
    traces = read_traces(path, predicates, allow_unknown)
    if len(traces) != 1:
        raise TraceError(f'{path}: a batch of {len(traces)} traces; monitor-trace reads one trace per file')
    return trace_matrix(traces[0], predicates)


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
