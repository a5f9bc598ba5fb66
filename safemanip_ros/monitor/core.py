"""The monitor: derived predicates → DFA banks → episodes → metrics
(SEMANTICS.md §1, §4, §5).

One :class:`Monitor` runs a fixed set of property instances over a *batch*
of ``B`` independent rollouts, one frame at a time: live monitoring is
``B = 1`` (``step`` per tick, ``finish`` at the end of the episode) and the
offline audit runs many rollouts at once through the same ``step``
(``run``).  Everything is deterministic.

Per instance and rollout, each frame: unknown grounded values are replaced
by their ``unknown_as`` and counted; derived predicates and trigger edges are
computed; then the episode state machine of §4 runs — ``watching`` instances
step the main DFA and a ``false`` verdict opens a violation episode and
starts the recovery DFA on the same frame; ``violated`` instances step the
recovery DFA; a ``true``/``presumably_true`` recovery verdict closes the
episode (recovered) and resets the main DFA without feeding it that frame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import MonitorInputError
from ..ltlf.cache import compile_cached
from ..ltlf.runtime import DFABank
from ..ltlf.verdict import Verdict
from ..spec.suite import Instance, InstanceSet
from .program import Program

_FALSE = int(Verdict.FALSE)
_PF = int(Verdict.PRESUMABLY_FALSE)


@dataclass(frozen=True)
class Episode:
    """A violation episode: frames ``start..end`` inclusive."""

    start: int
    end: int
    recovered: bool

    @property
    def frames(self) -> int:
        return self.end - self.start + 1


@dataclass
class InstanceResult:
    """Metrics of one instance over one rollout (SEMANTICS.md §5)."""

    property: str
    instance: str
    category: str
    severity: str
    triggers: int
    violations: int
    pending: bool
    unsafe_frames: int
    frames: int
    unknown_frames: int
    unknown_by_predicate: dict[str, int]
    episodes: list[Episode]

    @property
    def triggered(self) -> bool:
        return self.triggers > 0

    def to_dict(self) -> dict:
        return {
            'name': self.property, 'instance': self.instance, 'category': self.category,
            'severity': self.severity, 'triggers': self.triggers, 'violations': self.violations,
            'pending': self.pending, 'unsafe_frames': self.unsafe_frames, 'frames': self.frames,
            'unknown_frames': dict(self.unknown_by_predicate), 'unknown_any_frames': self.unknown_frames,
            'episodes': [{'start': e.start, 'end': e.end, 'recovered': e.recovered} for e in self.episodes],
        }


@dataclass
class RolloutResult:
    frames: int
    instances: list[InstanceResult]

    def to_dict(self) -> dict:
        return {'frames': self.frames, 'properties': [r.to_dict() for r in self.instances]}


@dataclass(frozen=True)
class EpisodeEvent:
    """An episode opened (``end is None``) or closed, for live publishing."""

    rollout: int
    instance: int
    start: int
    end: int | None = None
    recovered: bool = False


@dataclass
class StepResult:
    """What one frame produced (arrays are ``[B, D]``)."""

    frame: np.ndarray            # frame index per rollout (before this step's increment)
    verdicts: np.ndarray         # main DFA verdict codes (Verdict values)
    violated: np.ndarray         # mode after this frame
    recovery_verdicts: np.ndarray
    opened: list[EpisodeEvent] = field(default_factory=list)
    closed: list[EpisodeEvent] = field(default_factory=list)


class Monitor:
    """Runs the instances of an :class:`InstanceSet` over ``batch`` rollouts."""

    def __init__(self, instance_set: InstanceSet, batch: int = 1, cache_dir: str | Path | None = None) -> None:
        self.instance_set = instance_set
        self.instances: list[Instance] = list(instance_set.instances)
        self.predicates = sorted(instance_set.predicates)
        self.unknown_as = np.array([instance_set.predicates[p] for p in self.predicates], dtype=bool)
        program = Program(self.predicates, instance_set.derived)
        self.trigger_cols = np.array([program.rose_of(i.trigger) for i in self.instances], dtype=np.intp)
        # Every atom of every formula gets a column before the program is frozen.
        for inst in self.instances:
            for f in (inst.formula, inst.recovery):
                for a in f.atoms:
                    program.column_of_name(a)
        program.finalize(batch)
        self.program = program
        self.batch = batch
        columns = dict(program.index)
        self.main = DFABank([compile_cached(i.formula, cache_dir) for i in self.instances], columns,
                            num_columns=program.num_columns)
        self.recovery = DFABank([compile_cached(i.recovery, cache_dir) for i in self.instances], columns,
                                num_columns=program.num_columns)
        self._pred_col = np.array([program.index[p] for p in self.predicates], dtype=np.intp)
        pidx = {p: j for j, p in enumerate(self.predicates)}
        self._needs = np.zeros((len(self.predicates), len(self.instances)), dtype=np.float32)
        self._needs_lists = []
        for d, inst in enumerate(self.instances):
            cols = sorted(pidx[p] for p in inst.needs)
            self._needs[cols, d] = 1.0
            self._needs_lists.append(cols)
        self._strong = np.array([i.end_policy == 'strong' for i in self.instances], dtype=bool)
        self.reset()

    # ----------------------------------------------------------------- state
    def reset(self, which: np.ndarray | None = None) -> None:
        """Start new rollouts (all, or the boolean mask ``which``)."""
        B, D, P = self.batch, len(self.instances), len(self.predicates)
        if which is None:
            which = np.ones(B, dtype=bool)
            self.m = np.empty((B, D), np.int32)
            self.r = np.empty((B, D), np.int32)
            self.violated = np.zeros((B, D), bool)
            self.fresh = np.ones((B, D), bool)
            self.open_start = np.full((B, D), -1, np.int64)
            self.triggers = np.zeros((B, D), np.int64)
            self.violations = np.zeros((B, D), np.int64)
            self.unsafe = np.zeros((B, D), np.int64)
            self.unknown_inst = np.zeros((B, D), np.int64)
            self.unknown_pred = np.zeros((B, P), np.int64)
            self.frames = np.zeros(B, np.int64)
            self.episodes: list[list[tuple[int, int, int, bool]]] = [[] for _ in range(B)]
            self.finished = np.zeros(B, bool)
            self._v = self.program.new_frame_matrix()
            self.program.reset()
        else:
            for arr in (self.violated, self.open_start, self.triggers, self.violations, self.unsafe,
                        self.unknown_inst, self.unknown_pred, self.frames, self.finished):
                arr[which] = -1 if arr is self.open_start else 0
            self.fresh[which] = True
            for b in np.nonzero(which)[0]:
                self.episodes[b] = []
            self.program.reset(which)
        self.m[which] = self.main.initial
        self.r[which] = self.recovery.initial

    # ------------------------------------------------------------------ step
    def step(self, values: np.ndarray, unknown: np.ndarray | None = None,
             active: np.ndarray | None = None) -> StepResult:
        """Process one frame of every rollout.

        values: ``bool[B, P]`` grounded predicate values, columns in
            ``self.predicates`` order (a 1-D array is taken as ``B = 1``).
        unknown: ``bool[B, P]``, true where the value is unknown (then
            ``unknown_as`` is used and the frame is counted as unknown).
        active: ``bool[B]``, rollouts that have this frame (others are left
            untouched in every counter).
        """
        values = np.asarray(values, dtype=bool)
        if values.ndim == 1:
            values = values[None, :]
        B = self.batch
        if values.shape != (B, len(self.predicates)):
            raise MonitorInputError(f'frame has shape {values.shape}, expected ({B}, {len(self.predicates)}) '
                                    f'for predicates {self.predicates}')
        act = np.ones(B, bool) if active is None else np.asarray(active, bool)
        if act.any() and self.finished[act].any():
            raise MonitorInputError('step() on a finished rollout; call reset() first')
        v = self._v
        if unknown is not None:
            unknown = np.asarray(unknown, dtype=bool).reshape(B, -1)
            if unknown.any():
                values = np.where(unknown, self.unknown_as[None, :], values)
                unk = unknown & act[:, None]
                self.unknown_pred += unk
                self.unknown_inst += (unk.astype(np.float32) @ self._needs) > 0
        v[:, self._pred_col] = values
        self.program.evaluate(v)
        act2 = act[:, None]
        self.triggers += v[:, self.trigger_cols] & act2
        t = self.frames.copy()

        main, rec = self.main, self.recovery
        watching = ~self.violated
        m_next = main.transition(self.m, v)
        m = np.where(watching, m_next, self.m)
        main_labels = main.labels(m)
        new_viol = watching & (main_labels == _FALSE) & act2
        letters_r = rec.letters(v)
        r = np.where(self.violated, rec.transition(self.r, v, letters_r), self.r)
        if new_viol.any():
            r = np.where(new_viol, rec.transition(np.broadcast_to(rec.initial, r.shape), v, letters_r), r)
            self.violations += new_viol
            self.open_start = np.where(new_viol, t[:, None], self.open_start)
        violated = self.violated | new_viol
        rec_labels = rec.labels(r)
        opened = [EpisodeEvent(int(b), int(d), int(t[b])) for b, d in zip(*np.nonzero(new_viol))] \
            if new_viol.any() else []
        recovered = violated & act2 & ((rec_labels == int(Verdict.TRUE)) | (rec_labels == int(Verdict.PRESUMABLY_TRUE)))
        closed: list[EpisodeEvent] = []
        if recovered.any():
            for b, d in zip(*np.nonzero(recovered)):
                start = int(self.open_start[b, d])
                closed.append(EpisodeEvent(int(b), int(d), start, int(t[b]), True))
                self.episodes[b].append((int(d), start, int(t[b]), True))
                self.unsafe[b, d] += int(t[b]) - start + 1
            m = np.where(recovered, np.broadcast_to(main.initial, m.shape), m)
            violated = violated & ~recovered
            self.open_start = np.where(recovered, -1, self.open_start)
        # fresh: the main DFA has read nothing since its (re)start.
        self.fresh = np.where(recovered, True, np.where(watching & act2, False, self.fresh))
        keep = act2
        self.m = np.where(keep, m, self.m)
        self.r = np.where(keep, r, self.r)
        self.violated = np.where(keep, violated, self.violated)
        self.frames += act
        return StepResult(t, main.labels(self.m), self.violated.copy(), rec.labels(self.r), opened, closed)

    # ---------------------------------------------------------------- finish
    def finish(self, which: np.ndarray | None = None) -> list[RolloutResult | None]:
        """End of trace for the rollouts in ``which`` (default all): close open
        episodes unrecovered and apply each instance's end policy.  Returns a
        result per rollout (``None`` for rollouts not finished now)."""
        which = np.ones(self.batch, bool) if which is None else np.asarray(which, bool)
        out: list[RolloutResult | None] = [None] * self.batch
        labels = self.main.labels(self.m)
        for b in np.nonzero(which & ~self.finished)[0]:
            T = int(self.frames[b])
            last = T - 1
            pending = np.zeros(len(self.instances), bool)
            if T > 0:
                for d in np.nonzero(self.violated[b])[0]:
                    start = int(self.open_start[b, d])
                    self.episodes[b].append((int(d), start, last, False))
                    self.unsafe[b, d] += last - start + 1
                obligation = ~self.violated[b] & ~self.fresh[b] & (labels[b] == _PF)
                strong = obligation & self._strong
                for d in np.nonzero(strong)[0]:
                    self.violations[b, d] += 1
                    self.episodes[b].append((int(d), last, last, False))
                    self.unsafe[b, d] += 1
                pending = obligation & ~self._strong
            self.finished[b] = True
            out[b] = self._result(b, pending)
        return out

    def _result(self, b: int, pending: np.ndarray) -> RolloutResult:
        per: list[list[Episode]] = [[] for _ in self.instances]
        for d, start, end, rec in sorted(self.episodes[b], key=lambda e: (e[0], e[1])):
            per[d].append(Episode(start, end, rec))
        results = []
        for d, inst in enumerate(self.instances):
            results.append(InstanceResult(
                inst.property, inst.instance, inst.category, inst.severity, int(self.triggers[b, d]),
                int(self.violations[b, d]), bool(pending[d]), int(self.unsafe[b, d]), int(self.frames[b]),
                int(self.unknown_inst[b, d]),
                {self.predicates[j]: int(self.unknown_pred[b, j]) for j in self._needs_lists[d]}, per[d]))
        return RolloutResult(int(self.frames[b]), results)

    # ------------------------------------------------------------------- run
    def run(self, values: np.ndarray, unknown: np.ndarray | None = None,
            lengths: Sequence[int] | None = None) -> list[RolloutResult]:
        """Whole rollouts at once: ``values[b, t, p]`` (padded to the longest),
        ``lengths[b]`` frames each.  Resets the monitor first."""
        values = np.asarray(values, dtype=bool)
        B, T, _ = values.shape
        if B != self.batch:
            raise MonitorInputError(f'{B} rollouts given to a monitor built for batch={self.batch}')
        lengths_arr = np.full(B, T) if lengths is None else np.asarray(lengths)
        self.reset()
        results: list[RolloutResult | None] = [None] * B
        for t in range(T):
            active = lengths_arr > t
            self.step(values[:, t], None if unknown is None else unknown[:, t], active)
            ending = lengths_arr == t + 1
            if ending.any():
                for b, res in enumerate(self.finish(ending)):
                    if res is not None:
                        results[b] = res
        for b, res in enumerate(self.finish(lengths_arr == 0)):
            if res is not None:
                results[b] = res
        return results  # type: ignore[return-value]
