"""The monitor: derived predicates → violation machines → violation episodes → metrics
(SEMANTICS.md §1, §4, §5).

One :class:`Monitor` runs a fixed set of property instances over a *batch*
of ``B`` independent rollouts: live monitoring is ``B = 1``, one frame at a
time (``step`` per tick, ``finish`` at the end of the rollout), and the
offline audit gives whole rollouts at once (``run``).  Both run the same
compiled pieces — the derived-predicate program (program.py) and one violation
machine per instance, §4 compiled into a table (machine.py) — and give the
same results.  Everything is deterministic.

Per instance and rollout, each frame: unknown grounded values are replaced
by their ``unknown_as`` and counted; derived predicates and trigger edges are
computed; then the violation machine of §4 runs — ``watching`` instances
step the main DFA and a ``false`` verdict opens a violation episode and
starts the recovery DFA on the same frame; ``violated`` instances step the
recovery DFA; a ``true``/``presumably_true`` recovery verdict closes the
episode (recovered) and restarts the main DFA *on that frame*
(m ← δ_M(m₀, v_t)), so a trigger rising on the closing frame is checked like
any other — except when the episode opened on the same frame (m ← m₀: that
frame's event is the one already counted).  A restarted M that is already
``false`` opens the next episode on the following frame (or, at the end of
the trace, counts as a one-frame episode at T-1).

An instance's :class:`~safemanip_ros.spec.suite.EpisodeRules` may name
SafeManip's own rules instead (its compatibility profile): recovery judged
from the frame after the violation, a failed restart at the end not counted,
short open episodes dropped at the end, and its primary verdict per instance
(``InstanceResult.paper``).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from itertools import chain, repeat
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Sequence, overload

import numpy as np

from ..errors import MonitorInputError, SpecError, StateBudgetError
from ..gc_pause import gc_paused
from ..ltlf.cache import compile_cached
from ..ltlf.dfa import DFA
from ..ltlf.verdict import Verdict
from ..spec.suite import Instance, InstanceSet
from .machine import CLOSED, OPENED, ViolationMachines
from .program import FALSE_COL, TRUE_COL, Program

_FALSE = int(Verdict.FALSE)
_PF = int(Verdict.PRESUMABLY_FALSE)


class Episode(NamedTuple):
    """A violation episode: frames ``start..end`` inclusive.  (A named tuple:
    an audit makes one per violation, and these are the cheapest to make.)"""

    start: int
    end: int
    recovered: bool

    @property
    def frames(self) -> int:
        return self.end - self.start + 1


class _EpisodeRows:
    """The episodes a :meth:`Monitor.finish` collected, in (rollout,
    instance, start) order, as arrays; their Python forms are made once,
    for all of them, when one is first read."""

    __slots__ = ('columns', '_lists', '_tuples')

    def __init__(self, columns: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        self.columns = columns              # start[n], end[n], recovered[n]
        self._lists: tuple[list[int], list[int], list[bool]] | None = None
        self._tuples: list[Episode] | None = None

    def lists(self) -> tuple[list[int], list[int], list[bool]]:
        if self._lists is None:
            starts, ends, recovered = (c.tolist() for c in self.columns)
            self._lists = (starts, ends, recovered)
        return self._lists

    def tuples(self) -> list[Episode]:
        if self._tuples is None:
            # tuple.__new__ straight from C: the cheapest way to make many named tuples; the
            # collector waits (each pass would walk every result made before them).
            with gc_paused():
                self._tuples = list(map(tuple.__new__, repeat(Episode), zip(*self.lists())))
        return self._tuples


class Episodes(Sequence[Episode]):
    """One instance's violation episodes over one rollout, in start order: a
    read-only sequence of :class:`Episode`, equal to any list or tuple of
    the same episodes.  It is a slice of the episodes the monitor collected
    at the end of the run, kept as arrays; the tuples are made when any of
    them is first read (an offline run over a fleet finds ~10^5 episodes,
    and most results are counted or written out with :meth:`as_dicts`)."""

    __slots__ = ('_rows', '_lo', '_hi')

    def __init__(self, rows: _EpisodeRows | None = None, lo: int = 0, hi: int = 0) -> None:
        self._rows = rows
        self._lo, self._hi = (lo, hi) if rows is not None else (0, 0)

    def _list(self) -> list[Episode]:
        return self._rows.tuples()[self._lo:self._hi] if self._rows is not None else []

    def __len__(self) -> int:
        return self._hi - self._lo

    @overload
    def __getitem__(self, index: int) -> Episode: ...

    @overload
    def __getitem__(self, index: slice) -> list[Episode]: ...

    def __getitem__(self, index: int | slice) -> Episode | list[Episode]:
        return self._list()[index]

    def __iter__(self) -> Iterator[Episode]:
        return iter(self._list())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Episodes, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None     # type: ignore[assignment]   # equal to lists, which are unhashable

    def __repr__(self) -> str:
        return f'Episodes({self._list()!r})'

    def as_dicts(self) -> list[dict[str, Any]]:
        """``[{'start', 'end', 'recovered'}]``, made from the collected rows."""
        if self._rows is None or self._hi == self._lo:
            return []
        lo, hi = self._lo, self._hi
        starts, ends, recovered = self._rows.lists()
        return [{'start': a, 'end': b, 'recovered': c}
                for a, b, c in zip(starts[lo:hi], ends[lo:hi], recovered[lo:hi])]


_NO_EPISODES = Episodes()


class InstanceResult(NamedTuple):
    """Metrics of one instance over one rollout (SEMANTICS.md §5).  (A named
    tuple, like :class:`Episode`: an audit makes one per instance and
    rollout, and the monitor makes them all with one map from C.)"""

    name: str                          # the property's name
    instance: str
    category: str
    severity: str
    triggers: int
    violations: int
    pending: bool
    unsafe_frames: int
    frames: int
    unknown_any_frames: int            # frames where some predicate the instance reads is unknown
    unknown_frames: dict[str, int]     # per predicate it reads, the frames where that one is unknown
    episodes: Sequence[Episode]        # an :class:`Episodes` from the monitor (empty unless it keeps them)
    paper: dict[str, Any] | None = None
    """SafeManip's own verdict (``paper_metric`` episode rule, else ``None``):
    ``violated`` (its primary verdict: the main formula over the whole trace)
    and ``exposure_frames`` (frames inside an episode by its count: an
    episode's closing frame excluded, dropped open episodes included)."""

    @builtins.property
    def triggered(self) -> bool:
        return self.triggers > 0

    def to_dict(self) -> dict[str, Any]:
        """The report's record of it (``audit.schema.InstanceRecord``): the
        fields by their own names, the episodes as ``{start, end, recovered}``."""
        out = self._asdict()
        if out['paper'] is None:
            del out['paper']          # only the SafeManip profile gives it
        out['unknown_frames'] = dict(self.unknown_frames)
        out['episodes'] = (self.episodes.as_dicts() if isinstance(self.episodes, Episodes) else
                           [{'start': e.start, 'end': e.end, 'recovered': e.recovered} for e in self.episodes])
        return out


@dataclass
class RolloutResult:
    frames: int
    instances: list[InstanceResult]
    verdicts: np.ndarray | None = None   # int8[T, D] main-DFA verdict per frame (run(keep_verdicts=True))

    def to_dict(self) -> dict[str, Any]:
        return {'frames': self.frames, 'properties': [r.to_dict() for r in self.instances]}


@dataclass(frozen=True)
class EpisodeEvent:
    """An episode opened (``end is None``) or closed, for live publishing."""

    rollout: int
    instance: int
    start: int
    end: int | None = None
    recovered: bool = False


@dataclass(frozen=True)
class RolloutSnapshot:
    """The running state of one rollout, for live publishing (per instance,
    in ``Monitor.instances`` order): counts so far and which instances are
    in an open violation episode."""

    frames: int
    triggers: tuple[int, ...]
    violations: tuple[int, ...]
    unsafe_frames: tuple[int, ...]
    unknown_frames: tuple[int, ...]
    violated: tuple[bool, ...]
    open_start: tuple[int, ...]      # start frame of the open episode, -1 when none

    @builtins.property
    def violated_count(self) -> int:
        return sum(self.violated)


_NONE = np.zeros(0, np.intp)


@dataclass
class StepResult:
    """What one frame produced (arrays are ``[B, D]``).

    Episode events are kept as index arrays and turned into
    :class:`EpisodeEvent` objects only when asked for (``opened``/``closed``).
    """

    frame: np.ndarray            # frame index per rollout (this frame)
    verdicts: np.ndarray         # main DFA verdict codes (Verdict values)
    violated: np.ndarray         # mode after this frame
    recovery_verdicts: np.ndarray
    opened_mask: np.ndarray | None = None   # [D, B]: episodes opened on this frame
    closed_at: tuple[np.ndarray, np.ndarray, np.ndarray] = (_NONE, _NONE, _NONE)  # (rollouts, instances, starts)

    @property
    def opened(self) -> list[EpisodeEvent]:
        if self.opened_mask is None:
            return []
        ds, bs = np.nonzero(self.opened_mask)
        return [EpisodeEvent(int(b), int(d), int(self.frame[b])) for b, d in zip(bs, ds)]

    @property
    def closed(self) -> list[EpisodeEvent]:
        bs, ds, starts = self.closed_at
        return [EpisodeEvent(int(b), int(d), int(s), int(self.frame[b]), True) for b, d, s in zip(bs, ds, starts)]


RUN_BLOCK_ROLLOUTS = 128
"""Most rollouts :meth:`Monitor.run` works on at once: their whole rollouts'
program columns stay within the caches (more is slower, not faster)."""

RUN_BLOCK_BYTES = 64 << 20
"""Working memory of one block of :meth:`Monitor.run` (columns and records);
a rollout too long for it has its columns evaluated in windows of frames."""


def _compiled(inst: Instance, cache_dir: str | Path | None) -> tuple[DFA, DFA]:
    """An instance's formula and recovery DFAs; a formula past the state
    budget is an error naming the instance (a suite must not hang start-up)."""
    try:
        return compile_cached(inst.formula, cache_dir), compile_cached(inst.recovery, cache_dir)
    except StateBudgetError as err:
        raise SpecError(f'{inst.instance}: {err}') from err


_COMPACT_CHUNKS = 256
"""Closed-episode chunks kept before they are merged into one
(:meth:`Monitor._compact_chunks`): merging costs one copy of every episode
kept, so it runs once per this many chunks."""


class Monitor:
    """Runs the instances of an :class:`InstanceSet` over ``batch`` rollouts."""

    def __init__(self, instance_set: InstanceSet, batch: int = 1, cache_dir: str | Path | None = None,
                 keep_episodes: bool = True) -> None:
        """``keep_episodes``: keep every closed episode for the results of
        :meth:`finish` (``InstanceResult.episodes``).  A live monitor whose
        rollout may run for hours passes ``False``: the counts stay exact, each
        episode is published as it opens and closes, and memory stays flat
        (an endless rollout would otherwise keep every episode it ever had)."""
        self.keep_episodes = keep_episodes
        self.instance_set = instance_set
        self.unsupported: dict[str, tuple[str, ...]] = dict(instance_set.unsupported)
        """Instances not run in this configuration → the predicates nothing grounds."""
        self.instances: list[Instance] = list(instance_set.instances)
        self.predicates = sorted(instance_set.predicates)
        self.known_predicates = instance_set.known
        """Every grounded name of the suite (``only`` runs read fewer): a
        trace may give these without being an unknown name."""
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
        # One episode machine per instance (SEMANTICS.md §4 as a table; machine.py).
        self.machines = ViolationMachines([_compiled(i, cache_dir) for i in self.instances], program.index, FALSE_COL,
                                        [i.rules.recovery_next_frame for i in self.instances])
        # Episode rules other than §4's (spec.suite.EpisodeRules), per instance.
        self._count_failed = np.array([i.rules.count_failed_restart_at_end for i in self.instances], dtype=bool)
        self._drop_open = np.array([i.rules.drop_open_shorter_than_frames for i in self.instances], dtype=np.int64)
        self._paper = np.array([i.rules.paper_metric for i in self.instances], dtype=bool)
        self._paper_on = bool(self._paper.any())         # read every frame: not recomputed there
        self._paper_cols = np.array([program.column_of_name(i.rules.paper_timeout) if i.rules.paper_timeout
                                     else TRUE_COL for i in self.instances], dtype=np.intp)
        self._pred_col = np.array([program.index[p] for p in self.predicates], dtype=np.intp)
        # The program puts its inputs in order after the constants: a slice copies them faster.
        P = len(self.predicates)
        contiguous = np.array_equal(self._pred_col, np.arange(TRUE_COL + 1, TRUE_COL + 1 + P))
        self._pred_cols: slice | np.ndarray = slice(TRUE_COL + 1, TRUE_COL + 1 + P) if contiguous else self._pred_col
        pidx = {p: j for j, p in enumerate(self.predicates)}
        needs = np.zeros((len(self.predicates), len(self.instances)), dtype=bool)
        self._needs_lists = []
        for d, inst in enumerate(self.instances):
            cols = sorted(pidx[p] for p in inst.needs)
            needs[cols, d] = True
            self._needs_lists.append(cols)
        self._needs_names = [[self.predicates[j] for j in cols] for cols in self._needs_lists]
        self._no_unknowns = [dict.fromkeys(names, 0) for names in self._needs_names]
        self._needs_f32 = needs.astype(np.float32)     # [P, D], for _reads_unknown's matrix product
        self._heads = [(i.property, i.instance, i.category, i.severity) for i in self.instances]
        self._strong = np.array([i.end_policy == 'strong' for i in self.instances], dtype=bool)
        self.reset()

    # ----------------------------------------------------------------- state
    # Internal arrays are instance-major, ``[D, B]`` (``[P, B]`` for
    # predicates): each instance's values for every rollout are contiguous.
    def resize(self, batch: int) -> None:
        """Start over with ``batch`` rollouts, every one reset.  The compiled
        program and episode machines are kept (building them again costs
        tens of milliseconds; the audit runs batches of every size)."""
        if batch < 1:
            raise MonitorInputError(f'batch must be at least 1, got {batch}')
        self.batch = batch
        self.program.reset(batch=batch)
        self.reset()

    def reset(self, which: np.ndarray | None = None) -> None:
        """Start new rollouts (all, or the boolean mask ``which``)."""
        B, D, P = self.batch, len(self.instances), len(self.predicates)
        if which is None:
            which = np.ones(B, dtype=bool)
            self.base = np.empty((D, B), np.int64)
            self.open_start = np.full((D, B), -1, np.int64)
            self.triggers = np.zeros((D, B), np.int64)
            self.violations = np.zeros((D, B), np.int64)
            self.unsafe = np.zeros((D, B), np.int64)
            self.unknown_inst = np.zeros((D, B), np.int64)
            self.unknown_pred = np.zeros((P, B), np.int64)
            self.frames = np.zeros(B, np.int64)
            self.finished = np.zeros(B, bool)
            self.paper_seen = np.zeros((D, B), bool)     # the paper_timeout predicate was true on some frame
            # Closed episodes as array chunks (instances, rollouts, starts, ends, recovered).
            self._episode_chunks: list[tuple[np.ndarray, ...]] = []
            self._v = self.program.new_frame_matrix()
            self.program.reset()
        else:
            for arr in (self.open_start, self.triggers, self.violations, self.unsafe,
                        self.unknown_inst, self.unknown_pred, self.paper_seen):
                arr[:, which] = -1 if arr is self.open_start else 0
            self.frames[which] = 0
            self.finished[which] = False
            self._episode_chunks = [tuple(a[~which[ch[1]]] for a in ch) for ch in self._episode_chunks]
            self.program.reset(which)
        self.base[:, which] = self.machines.initial_base[:, None]

    @builtins.property
    def violated(self) -> np.ndarray:
        """``bool[D, B]``: instances in an open violation episode."""
        out: np.ndarray = self.machines.violated[self.base]
        return out

    def snapshot(self, b: int = 0) -> RolloutSnapshot:
        """Counts so far of rollout ``b`` (live nodes publish these)."""
        def col(a: np.ndarray) -> tuple[int, ...]:
            return tuple(a[:, b].tolist())      # Python ints (bools), at C speed
        return RolloutSnapshot(int(self.frames[b]), col(self.triggers), col(self.violations), col(self.unsafe),
                               col(self.unknown_inst), tuple(self.violated[:, b].tolist()), col(self.open_start))

    def _reads_unknown(self, unknown: np.ndarray) -> np.ndarray:
        """``bool[n, D]``: for each row of unknown flags ``bool[n, P]``, the
        instances that read one of its unknown predicates: a float32 product
        of 0/1 counts (exact), over only the predicates unknown somewhere in
        the rows (live, one or two of them)."""
        cols = np.flatnonzero(unknown.any(axis=0))
        out: np.ndarray = (unknown[:, cols].astype(np.float32) @ self._needs_f32[cols]) > 0
        return out

    # ------------------------------------------------------------------ step
    def step(self, values: np.ndarray, unknown: np.ndarray | None = None,
             active: np.ndarray | None = None) -> StepResult:
        """Process one frame of every rollout.

        values: ``bool[B, P]`` grounded predicate values, columns in
            ``self.predicates`` order (a 1-D array is taken as ``B = 1``).
        unknown: ``bool[B, P]``, true where the value is unknown (then
            ``unknown_as`` is used and the frame is counted as unknown).
        active: ``bool[B]``, rollouts that have this frame: the others (ended
            ones) keep their episode state and every counter.  Their
            derived-predicate devices still read the frame, so this is for
            rollouts that have ended, not for pausing one.
        """
        values = np.asarray(values, dtype=bool)
        if values.ndim == 1:
            values = values[None, :]
        B = self.batch
        if values.shape != (B, len(self.predicates)):
            raise MonitorInputError(f'frame has shape {values.shape}, expected ({B}, {len(self.predicates)}) '
                                    f'for predicates {self.predicates}')
        all_active = active is None or bool(np.all(active))
        act = np.ones(B, bool) if active is None else np.asarray(active, bool)
        if self.finished[act].any():
            raise MonitorInputError('step() on a finished rollout; call reset() first')
        v = self._v
        values_cm = values.T
        if unknown is not None:
            unknown = np.asarray(unknown, dtype=bool).reshape(B, -1)
            if unknown.any():
                values_cm = np.where(unknown.T, self.unknown_as[:, None], values_cm)
                unk = unknown & act[:, None]
                self.unknown_pred += unk.T
                rows = np.flatnonzero(unk.any(axis=1))      # few rollouts have unknowns at once
                self.unknown_inst[:, rows] += self._reads_unknown(unk[rows]).T
        v[self._pred_cols] = values_cm
        self.program.evaluate(v)
        trig = v[self.trigger_cols]
        self.triggers += trig if all_active else trig & act
        if self._paper_on:
            self.paper_seen |= v[self._paper_cols] & act
        t = self.frames.copy()

        mach = self.machines
        rec = mach.records(self.base, mach.letters(v), v)     # first: a wide record made now may grow `outcome`
        outcome = mach.outcome[rec].astype(np.int64)
        events = outcome & 3
        if all_active:
            self.base = outcome >> 2
        else:
            events = np.where(act, events, 0)
            self.base = np.where(act, outcome >> 2, self.base)
        opened_mask = None
        closed_at = (_NONE, _NONE, _NONE)
        if events.any():
            opened = (events & OPENED) != 0
            if opened.any():
                self.violations += opened
                self.open_start = np.where(opened, t[None, :], self.open_start)
                opened_mask = opened
            closed = (events & CLOSED) != 0
            if closed.any():
                ds, bs = np.nonzero(closed)
                starts = self.open_start[ds, bs]
                self.unsafe[ds, bs] += t[bs] - starts + 1
                if self.keep_episodes:
                    self._episode_chunks.append((ds, bs, starts.copy(), t[bs], np.ones(bs.size, bool)))
                    if len(self._episode_chunks) >= _COMPACT_CHUNKS:
                        self._compact_chunks()
                closed_at = (bs, ds, starts)
                self.open_start = np.where(closed, -1, self.open_start)
        self.frames += act
        base = self.base
        return StepResult(t, mach.main_label[base].T, mach.violated[base].T, mach.recovery_label[base].T,
                          opened_mask, closed_at)

    # ---------------------------------------------------------------- finish
    def finish(self, which: np.ndarray | None = None) -> list[RolloutResult | None]:
        """End of trace for the rollouts in ``which`` (default all): close open
        episodes unrecovered and apply each instance's end policy.  Returns a
        result per rollout (``None`` for rollouts not finished now)."""
        which = np.ones(self.batch, bool) if which is None else np.asarray(which, bool)
        out: list[RolloutResult | None] = [None] * self.batch
        ending = which & ~self.finished
        if not ending.any():
            return out
        mach = self.machines
        labels, violated, fresh = mach.main_label[self.base], mach.violated[self.base], mach.fresh[self.base]
        last = self.frames - 1
        has_frames = ((self.frames > 0) & ending)[None, :]
        open_eps = violated & has_frames
        paper = self._paper_verdicts(labels, open_eps, has_frames) if self._paper_on else None
        if open_eps.any():
            ds, bs = np.nonzero(open_eps)
            starts = self.open_start[ds, bs]
            length = last[bs] - starts + 1
            # An open episode shorter than its rule's floor is dropped (drop_open_shorter_than_frames).
            keep = length >= self._drop_open[ds]
            if not keep.all():
                self.violations[ds[~keep], bs[~keep]] -= 1
                ds, bs, starts, length = ds[keep], bs[keep], starts[keep], length[keep]
            self.unsafe[ds, bs] += length
            self._keep((ds, bs, starts.copy(), last[bs], np.zeros(bs.size, bool)))
        # A restarted M that failed on the closing frame T-1 (false is a sink)
        # counts as a one-frame, unrecovered episode at T-1 (unless the rule says not).
        failed = ~violated & (labels == _FALSE) & has_frames & self._count_failed[:, None]
        if failed.any():
            ds, bs = np.nonzero(failed)
            self.violations[ds, bs] += 1
            self.unsafe[ds, bs] += 1
            self._keep((ds, bs, last[bs], last[bs], np.zeros(bs.size, bool)))
        obligation = ~violated & ~fresh & (labels == _PF) & has_frames
        strong = obligation & self._strong[:, None]
        if strong.any():
            ds, bs = np.nonzero(strong)
            self.violations[ds, bs] += 1
            self.unsafe[ds, bs] += 1
            self._keep((ds, bs, last[bs], last[bs], np.zeros(bs.size, bool)))
        pending = obligation & ~self._strong[:, None]
        with gc_paused():
            return self._finish_results(ending, pending, out, paper)

    def _paper_verdicts(self, labels: np.ndarray, open_eps: np.ndarray,
                        has_frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """SafeManip's primary verdict and exposure per (instance, rollout),
        before the end of trace changes any count.  The main formula over the
        whole trace, without restarts, is false exactly when an episode has
        opened (its first episode is where that run first fails, false being
        a sink) or, with none, when M ends with an open obligation; a
        ``paper_timeout`` predicate that never became true makes the latter
        satisfied (a trace cut before its timeout could fire).  Exposure counts
        a recovered episode's frames but its closing one, an open episode's
        to the end."""
        opened = self.violations > 0
        violated = has_frames & (opened | (labels == _PF)) & self.paper_seen
        open_frames = np.where(open_eps, self.frames[None, :] - self.open_start, 0)
        recovered = self.violations - open_eps
        exposure = self.unsafe - recovered + open_frames
        return violated, exposure

    def _finish_results(self, ending: np.ndarray, pending: np.ndarray, out: list[RolloutResult | None],
                        paper: tuple[np.ndarray, np.ndarray] | None = None) -> list[RolloutResult | None]:
        rollouts = np.flatnonzero(ending)
        n, D = rollouts.size, len(self.instances)
        episodes = self._collect_episodes(ending, rollouts)
        self.finished |= ending
        # Every field as one flat column over (rollout, instance), rollout-major, and every result
        # made by one map from C (an offline run makes ~10^5 of them: a Python call each cost more
        # than the rest of finishing).
        counts = [a[:, rollouts].T.ravel().tolist() for a in (self.triggers, self.violations, pending, self.unsafe,
                                                                self.unknown_inst)]
        frames = self.frames[rollouts]
        heads = [chain.from_iterable(repeat(column, n)) for column in zip(*self._heads)]
        if paper is None:
            papers: Iterator[dict[str, Any] | None] = repeat(None)
        else:
            flags = np.tile(self._paper, n).tolist()
            papers = iter([{'violated': v, 'exposure_frames': x} if on else None for on, v, x in zip(
                flags, paper[0][:, rollouts].T.ravel().tolist(), paper[1][:, rollouts].T.ravel().tolist())])
        fields = zip(*heads, *counts[:4], np.repeat(frames, D).tolist(), counts[4],
                     self._unknown_counts(rollouts), episodes, papers)
        results = list(map(tuple.__new__, repeat(InstanceResult), fields))
        for i, (b, T) in enumerate(zip(rollouts.tolist(), frames.tolist())):
            out[b] = RolloutResult(T, results[i * D:(i + 1) * D])
        return out

    def _unknown_counts(self, rollouts: np.ndarray) -> list[dict[str, int]]:
        """``unknown_frames`` (per predicate) of each (rollout, instance), rollout-major:
        per instance, unknown frames of each predicate it reads."""
        unknown = self.unknown_pred[:, rollouts].T
        out: list[dict[str, int]] = []
        for row, hit in zip(unknown, unknown.any(axis=1).tolist()):
            if not hit:       # most rollouts read no unknown value: copies of the zero templates
                out.extend(map(dict.copy, self._no_unknowns))
                continue
            counts = row.tolist()
            out.extend(dict(zip(names, map(counts.__getitem__, cols)))
                       for names, cols in zip(self._needs_names, self._needs_lists))
        return out

    def _keep(self, chunk: tuple[np.ndarray, ...]) -> None:
        """Episodes (instances, rollouts, starts, ends, recovered) for the results, when kept."""
        if self.keep_episodes:
            self._episode_chunks.append(chunk)

    def _compact_chunks(self) -> None:
        """Merge the closed-episode chunks into one (33 bytes an episode).  A
        live rollout that runs for hours closes a chunk of a few violation
        episodes most frames; kept as tiny arrays each, they cost ~700 bytes
        an episode and the monitor's memory grows by tens of MiB an hour."""
        chunks = self._episode_chunks
        self._episode_chunks = [tuple(np.concatenate([ch[i] for ch in chunks]) for i in range(5))]

    def _collect_episodes(self, which: np.ndarray, rollouts: np.ndarray) -> list[Episodes]:
        """Closed episodes of the rollouts in ``which`` (removed from the
        chunks; ``rollouts`` is ``flatnonzero(which)``), one :class:`Episodes`
        per (rollout, instance) in start order, rollout-major."""
        D = len(self.instances)
        out = [_NO_EPISODES] * (rollouts.size * D)
        if not self._episode_chunks:
            return out
        self._compact_chunks()
        cols = self._episode_chunks[0]
        take = which[cols[1]]
        self._episode_chunks = [tuple(c[~take] for c in cols)] if (~take).any() else []
        ds, bs, starts, ends, rec = (c[take] for c in cols)
        if not bs.size:
            return out
        rank = np.zeros(self.batch, np.int64)
        rank[rollouts] = np.arange(rollouts.size)
        group = rank[bs] * D + ds                            # the (rollout, instance)'s place in the output
        span = int(ends.max()) + 1
        order = np.argsort(group * span + starts)            # by rollout, instance, start (unique)
        group = group[order]
        rows = _EpisodeRows((starts[order], ends[order], rec[order]))
        # One group per (rollout, instance): a slice of the sorted episodes, not one step per episode.
        first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        bounds = np.r_[first, group.size].tolist()
        for place, episodes in zip(group[first].tolist(), map(Episodes, repeat(rows), bounds[:-1], bounds[1:])):
            out[place] = episodes
        return out

    # ------------------------------------------------------------------- run
    def run(self, values: np.ndarray, unknown: np.ndarray | None = None,
            lengths: Sequence[int] | None = None, keep_verdicts: bool = False) -> list[RolloutResult]:
        """Whole rollouts at once: ``values[b, t, p]`` (padded to the longest),
        ``lengths[b]`` frames each.  Resets the monitor first and leaves every
        rollout finished.  With ``keep_verdicts`` each result carries its
        per-frame verdicts.

        The same results as :meth:`step` frame by frame then :meth:`finish`
        (``test_monitor_batch``), computed over whole rollouts: the program's
        columns for all frames at once, then each instance's violation machine
        as one gather per frame, then the episodes and counts from all frames'
        events at once."""
        values = np.asarray(values, dtype=bool)
        if values.ndim != 3 or values.shape[0] != self.batch or values.shape[2] != len(self.predicates):
            raise MonitorInputError(f'rollouts have shape {values.shape}, expected ({self.batch}, frames, '
                                    f'{len(self.predicates)}) for predicates {self.predicates}')
        B, T, _ = values.shape
        if unknown is not None:
            unknown = np.asarray(unknown, dtype=bool)
            if unknown.shape != values.shape:
                raise MonitorInputError(f'unknown has shape {unknown.shape}, values {values.shape}')
        lengths_arr = np.full(B, T, np.int64) if lengths is None else np.asarray(lengths, np.int64)
        if lengths_arr.shape != (B,) or (lengths_arr < 0).any() or (lengths_arr > T).any():
            raise MonitorInputError(f'lengths must be {B} frame counts within [0, {T}], got {lengths_arr.tolist()}')
        self.reset()
        kept = np.zeros((T, B, len(self.instances)), np.int8) if keep_verdicts else None
        per_rollout = max(1, T * (self.program.num_columns + 24 * len(self.instances)))
        block = max(1, min(RUN_BLOCK_ROLLOUTS, RUN_BLOCK_BYTES // per_rollout))
        for lo in range(0, B, block):
            hi = min(B, lo + block)
            self._run_block(lo, values[lo:hi], None if unknown is None else unknown[lo:hi], lengths_arr[lo:hi],
                            kept)
        self.frames[:] = lengths_arr
        out = self.finish()
        results = [r for r in out if r is not None]
        assert len(results) == B            # every rollout ends at its length
        if kept is not None:
            for b, r in enumerate(results):
                r.verdicts = kept[:int(lengths_arr[b]), b]
        return results

    def _run_block(self, lo: int, values: np.ndarray, unknown: np.ndarray | None, lengths: np.ndarray,
                   kept: np.ndarray | None) -> None:
        """Rollouts ``lo..lo+b`` of :meth:`run`: their counters, closed
        episodes, open episodes and end states, ready for :meth:`finish`."""
        b, T, _ = values.shape
        D = len(self.instances)
        mach = self.machines
        # Bases, records and letters in the outcome table's own type (int32 unless it is huge): the
        # per-frame add, take and shift below then run without casting their operands.
        itype = mach.outcome.dtype
        outcomes = np.empty((T, D, b), itype)      # per frame: base after it << 2 | its events
        base = np.broadcast_to(mach.initial_base[:, None], (D, b)).astype(itype)
        rec = np.empty((D, b), itype)
        trig = np.empty((D, b, T), bool)
        by_code = mach.by_code
        code = base << 2                           # the outcome before frame 0: no events
        for t0, V in self._column_windows(values, unknown):
            width = V.shape[-1]
            trig[..., t0:t0 + width] = V[self.trigger_cols]
            if self._paper_on:
                within = (t0 + np.arange(width))[None, :] < lengths[:, None]            # [b, width]
                self.paper_seen[:, lo:lo + b] |= (V[self._paper_cols] & within).any(axis=-1)
            if by_code is not None:
                # Letters << 2 index the table by the last outcome itself: an add and a gather a frame.
                letters = np.ascontiguousarray(mach.letters(V, 2).transpose(2, 0, 1), itype)   # [width, D, b]
                for i in range(width):
                    out = outcomes[t0 + i]
                    np.add(code, letters[i], out=rec)
                    # The array's own take (no numpy-level wrapper per frame); 'clip' skips its out-buffering.
                    by_code.take(rec, out=out, mode='clip')
                    code = out
                continue
            letters = np.ascontiguousarray(mach.letters(V).transpose(2, 0, 1), itype)   # [width, D, b]: a frame's rows together
            for i in range(width):
                if mach.all_dense:
                    np.add(base, letters[i], out=rec)
                else:
                    rec = mach.records(base, letters[i], V[..., i])   # may grow mach.outcome
                out = outcomes[t0 + i]
                mach.outcome.take(rec, out=out, mode='clip')
                np.right_shift(out, 2, out=base)
        frame = np.arange(T, dtype=np.int64)
        events = (outcomes & 3).astype(np.int8, copy=False)
        if (lengths < T).any():
            active = frame[None, :] < lengths[:, None]                      # [b, T]
            events *= active.T[:, None, :]
            trig &= active
        blk = slice(lo, lo + b)
        self.triggers[:, blk] = np.count_nonzero(trig, axis=-1)
        # Every event of the block, sorted by (instance, rollout, frame).
        at = np.flatnonzero(events != 0)          # (nonzero on bool is several times faster than on int8)
        what = events.reshape(-1)[at]
        t_e, rest = np.divmod(at, D * b)         # rest = instance * b + rollout
        # ``at`` is frame-major, so a stable sort by (instance, rollout) keeps each one's events in
        # frame order; under 2^16 pairs numpy's stable sort is a radix sort (12x an int64 argsort here).
        order = np.argsort(rest.astype(np.uint16) if D * b <= 1 << 16 else rest, kind='stable')
        group, t_e, what = rest[order], t_e[order], what[order]
        is_open, is_close = (what & OPENED) != 0, (what & CLOSED) != 0
        g_o, t_o, g_c, t_c = group[is_open], t_e[is_open], group[is_close], t_e[is_close]
        self.violations[:, blk] = np.bincount(g_o, minlength=D * b).reshape(D, b)
        # Per (instance, rollout), the i-th close ends the i-th open (a frame
        # can open then close an episode, never close then open one).
        rank_c = np.arange(g_c.size) - np.searchsorted(g_c, g_c, 'left')
        match = np.searchsorted(g_o, g_c, 'left') + rank_c
        starts = t_o[match]
        if g_c.size:
            d_c, b_c = np.divmod(g_c, b)
            np.add.at(self.unsafe, (d_c, b_c + lo), t_c - starts + 1)
            self._keep((d_c, b_c + lo, starts, t_c, np.ones(g_c.size, bool)))
        unmatched = np.ones(g_o.size, bool)
        unmatched[match] = False
        d_u, b_u = np.divmod(g_o[unmatched], b)
        self.open_start[d_u, b_u + lo] = t_o[unmatched]
        ended = np.flatnonzero(lengths > 0)
        if ended.size:
            self.base[:, ended + lo] = outcomes[lengths[ended] - 1, :, ended].T >> 2   # [n, D] gathered
        if unknown is not None:
            unk = unknown & (frame[None, :, None] < lengths[:, None, None])   # [b, T, P]
            self.unknown_pred[:, blk] = unk.sum(axis=1).T
            rows_b, rows_t = np.nonzero(unk.any(axis=2))
            if rows_b.size:
                hit = self._reads_unknown(unk[rows_b, rows_t])
                counts = np.zeros((b, D), np.int64)
                np.add.at(counts, rows_b, hit)
                self.unknown_inst[:, blk] = counts.T
        if kept is not None:
            kept[:, blk] = mach.main_label[outcomes >> 2].transpose(0, 2, 1)

    def _column_windows(self, values: np.ndarray, unknown: np.ndarray | None) -> Iterator[tuple[int, np.ndarray]]:
        """The program's columns for the rollouts ``values`` (``bool[b, T,
        P]``) as (first frame, ``bool[C, b, W]``) windows of frames (time
        last): all frames at once (devices in closed form over time,
        :meth:`Program.evaluate_over_time`) when they fit in
        :data:`RUN_BLOCK_BYTES`, else windows of frames stepped one by one.
        Unknown inputs read as ``unknown_as``, as in :meth:`step`."""
        b, T, _ = values.shape
        prog = self.program
        C = prog.num_columns
        inputs = values.transpose(2, 0, 1)                                  # [P, b, T]
        if unknown is not None:
            inputs = np.where(unknown.transpose(2, 0, 1), self.unknown_as[:, None, None], inputs)
        if T * C * b <= RUN_BLOCK_BYTES:
            V = np.empty((C, b, T), bool)          # every column is written: constants, inputs, then the program
            V[FALSE_COL], V[TRUE_COL] = False, True
            V[self._pred_cols] = inputs
            yield 0, prog.evaluate_over_time(V)
            return
        width = max(1, RUN_BLOCK_BYTES // (C * b))
        prog.reset(batch=b)
        try:
            for t0 in range(0, T, width):
                frames = np.zeros((min(T, t0 + width) - t0, C, b), bool)   # frame-major for evaluate()
                frames[:, TRUE_COL] = True
                frames[:, self._pred_cols] = inputs[..., t0:t0 + frames.shape[0]].transpose(2, 0, 1)
                for i in range(frames.shape[0]):
                    prog.evaluate(frames[i])
                yield t0, frames.transpose(1, 2, 0)
        finally:
            prog.reset(batch=self.batch)
