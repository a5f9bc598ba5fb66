"""Rollouts to audit, from recorded bags and from trace files.

* **rosbag2 bags** (MCAP or SQLite3, read with rosbags) holding grounded
  predicate topics (``safemanip_ros/msg/PredicateArray``, any topic name).
  Frames are rebuilt at ``rate_hz`` in *bag time* with the same
  sample-and-hold rule as the live monitor node
  (:class:`~safemanip_ros.monitor.frames.SampleHold`).  A bag is one rollout,
  unless it has a ``/rollout`` topic (``std_msgs/msg/String``; ``/episode``,
  its older name, is read too): each message
  there starts a new rollout named by its text.  A gap in bag time longer
  than ``max_gap_s`` (default 10 s) also ends the rollout (the next one is
  named ``<name>#gap<k>``): frames are never built across a gap, and the gap
  is reported in the rollout's ``warnings``.  A split file that cannot be
  opened (a truncated last split after a crash) is left out with a warning
  and the other splits are read; a bag or message that cannot be read
  raises :mod:`safemanip_ros.bag`'s error naming it (rosbags is read there
  alone), anything else is a bug and propagates.
* **JSONL traces**: ``safemanip monitor-trace`` frames (one object per line,
  predicate → true/false/null; one rollout per file), SpecRLBench steps (one
  list of true propositions per line; one rollout per file) or batches (one
  JSON array of steps per line; one rollout per line).
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..bag import OpenBag, is_bag, open_bag, typestore
from ..bag.columns import PREDICATE_TYPE
from ..errors import SafemanipError
from ..monitor.assembly import FrameAssembly
from ..monitor.clock import FrameSchedule, frame_grid, frame_segments, period_ns_of, recorded_period_ns
from ..monitor.frames import SampleHold, held_fresh, merge_repeated
from ..stamps import stamp_ns as stamp_to_ns

if TYPE_CHECKING:
    from ..grounding.config import RobotConfig
    from ..grounding.messages import GroundingSet

VERDICT_TYPE = 'safemanip_ros/msg/VerdictArray'
STATUS_TYPE = 'safemanip_ros/msg/MonitorStatus'
ROLLOUT_TOPICS = ('/rollout', '/episode')
"""Topics whose messages start a new rollout in a bag (``/episode``: the name before "rollout" became
the one word for a run, still read)."""


class AuditInputError(SafemanipError):
    """An input that cannot be audited (names the file and the reason)."""


_log = logging.getLogger(__name__)

DEFAULT_MAX_GAP_S = 10.0
# Grounded frames evaluated together in the message loop (a long recording's
# TF history is dropped between batches, as the live grounding trims it).
_VIEWED_FRAMES = 1024


@dataclass
class Rollout:
    """One recorded rollout (a rollout of a bag or a trace) as frames: the
    values and unknown flags of the suite's predicates, ``bool[T, P]``;
    ``reader``: which of :data:`READERS` read a bag's; ``frame_ns``: each
    frame's time, ``int64[T]`` ns on the bag's clock (None: a trace, whose
    frames have no time)."""

    source: str
    name: str
    values: np.ndarray       # bool[T, P]
    unknown: np.ndarray      # bool[T, P]
    warnings: list[str] = field(default_factory=list)
    reader: str = ''
    frame_ns: np.ndarray | None = None


def discover(paths: list[str | Path]) -> list[Path]:
    """Bags and .jsonl files named, or found (not recursively into bags) under
    named folders, each folder's finds in path order.  Symbolic links are
    taken as what they point to, but not descended into (as ``Path.rglob``)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if is_bag(p) or (p.is_file() and p.suffix == '.jsonl'):
            out.append(p)
        elif p.is_dir():
            out += sorted(_sources_under(p))
        else:
            out.append(p)   # reported as unreadable by the engine, with the reason
    return out


SPLIT_SUFFIXES = ('.mcap', '.db3')
"""The files of a rosbag2 recording: a folder holding one is a bag, with or without its metadata."""


def _sources_under(folder: Path) -> Iterator[Path]:
    """The bags and .jsonl files under ``folder`` (a folder that is not a
    bag), in no order; a folder it cannot list is yielded itself, so that
    nothing under it is passed over unsaid.  One ``scandir`` per folder: a fleet's folders hold
    thousands of bags of several files each, and only a folder's
    ``metadata.yaml`` is looked at."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        yield folder           # unreadable: the engine says why, naming it, rather than pass it over
        return
    if any(e.name.endswith(SPLIT_SUFFIXES) and e.is_file() for e in entries):
        yield folder           # a recording without metadata.yaml: the engine says so, naming it
        return
    for entry in entries:
        path = folder / entry.name
        if entry.is_dir():
            if is_bag(path):
                yield path
            elif not entry.is_symlink():
                yield from _sources_under(path)
        elif entry.name.endswith('.jsonl') and not entry.name.startswith('.'):
            # (hidden files are tools' own: a bag writer's split index, say).  One that is not a regular
            # file (a broken link, a pipe) is yielded too: the engine skips it and says so.
            yield path


def read_bag(path: Path, predicates: list[str], rate_hz: float, staleness_s: float, robot: RobotConfig | None = None,
             max_gap_s: float = DEFAULT_MAX_GAP_S, columnar: bool = True,
             allow_unknown: bool = False, suite_reads: list[str] | None = None,
             known: Collection[str] = (), objects_from_images: bool = False) -> list[Rollout]:
    """Rollouts of a bag of predicate topics, or — given a robot configuration
    (:class:`~safemanip_ros.grounding.config.RobotConfig`) — of raw inputs
    grounded offline, by the first of :data:`READERS` that reads it:
    column-wise where that reproduces the message loop exactly, else message
    by message (``columnar=False``: always message by message; each
    rollout's ``reader`` says which read it).

    A predicate name in the bag that the suite does not read
    (``suite_reads``, default ``predicates``) is an error naming the bag and
    topic when it is a near miss of a name the suite reads and the bag never
    gives: a misspelt name would leave that predicate unknown in every frame
    (``allow_unknown`` ignores it).  Other names are kept out silently: a
    recording of the live stack holds every grounded predicate, and other
    sources may publish their own, read by the suite or not.  Names in
    ``known`` (the suite's, read by properties ``--only`` left out) are
    never an error.

    ``objects_from_images``: the objects of the configuration's
    ``camera.objects`` are found again in the bag's ``/image`` and ``/depth``
    (with ``/camera_info``), as ``camera_grounding`` finds them live, and
    their recorded transforms are left out (offline perception of a
    recording's pixels)."""
    with open_bag(path) as bag:     # an unreadable bag or message raises the bag package's error, naming it
        return _read_open_bag(path, bag, predicates, rate_hz, staleness_s, robot, max_gap_s, columnar,
                              _NameRule(list(suite_reads or predicates), allow_unknown, frozenset(known)),
                              objects_from_images)


@dataclass(frozen=True)
class _NameRule:
    """:func:`read_bag`'s rule for predicate names the suite does not read."""

    suite_reads: list[str]
    allow_unknown: bool = False
    known: frozenset[str] = frozenset()

    def check(self, path: Path, seen: _NamesSeen) -> None:
        if self.allow_unknown:
            return
        read = set(self.suite_reads)
        never_given = sorted(read - set().union(*seen.values()))
        if not never_given:
            return
        for topic in sorted(seen):
            for name in sorted(seen[topic] - read - self.known):
                near = difflib.get_close_matches(name, never_given, n=1, cutoff=0.8)
                if near:
                    raise AuditInputError(f'{path}: topic {topic}: unknown predicate {name!r}: did you mean '
                                          f'{near[0]!r}, which the suite reads and the bag never gives? '
                                          f'(--allow-unknown-predicates ignores it)')


class _NamesSeen(dict[str, set[str]]):
    """Topic → the predicate names its messages gave (and, apart, the names
    a message of the topic gave twice)."""

    def __init__(self) -> None:
        super().__init__()
        self.repeated: dict[str, set[str]] = {}

    def add(self, topic: str, names: list[str] | tuple[str, ...]) -> None:
        self.setdefault(topic, set()).update(names)
        if len(set(names)) != len(names):
            self.repeated.setdefault(topic, set()).update(n for n in names if names.count(n) > 1)

    def repeat_warnings(self, path: Path) -> list[str]:
        return [f'{path}: topic {topic}: a message names {", ".join(map(repr, sorted(names)))} twice; '
                f'unknown where its values disagree' for topic, names in sorted(self.repeated.items())]


@dataclass
class BagInputs:
    """What a bag reader works from: the open bag, the connections it reads
    (predicate topics, or raw inputs with their ``grounding``), the monitor's
    and rollout topics, and how frames are built."""

    path: Path
    bag: OpenBag
    warnings: list[str]
    conns: list[Any]
    grounding: GroundingSet | None
    verdict_conns: list[Any]
    rollout_conns: list[Any]
    predicates: list[str]
    rate_hz: float
    staleness_s: float
    max_gap_s: float
    columnar: bool
    names: _NameRule


class NotThisReader(Exception):
    """Raised by a reader that finds, reading, a bag it does not reproduce
    exactly (a message its column decoder does not take): the next reader
    reads it."""


class BagReader(Protocol):
    """One way of turning a bag into rollouts: ``can_read`` from what the bag
    holds, ``read`` the rollouts (the same frames every reader that can read
    a bag builds from it)."""

    name: str

    def can_read(self, b: BagInputs) -> bool: ...

    def read(self, b: BagInputs) -> list[Rollout]: ...


class LiveRecording:
    """A recording of the live monitor (its VerdictArray topic): its very frames rebuilt."""

    name = 'live recording'

    def can_read(self, b: BagInputs) -> bool:
        return b.grounding is None and bool(b.verdict_conns)

    def read(self, b: BagInputs) -> list[Rollout]:
        return _live_rollouts(b.path, b.bag, b.conns, b.verdict_conns, b.predicates, b.rate_hz, b.staleness_s,
                              b.warnings, b.names)


class PredicateColumns:
    """Predicate topics, no rollout topic: decoded and framed column-wise."""

    name = 'predicate columns'

    def can_read(self, b: BagInputs) -> bool:
        return b.grounding is None and not b.rollout_conns and b.columnar

    def read(self, b: BagInputs) -> list[Rollout]:
        return _predicate_columns_rollouts(b.path, b.bag, b.conns, b.predicates, b.rate_hz, b.staleness_s,
                                           b.max_gap_s, b.warnings, b.names)


class GroundedColumns:
    """Raw inputs, no rollout topic: grounded column-wise (:mod:`.grounded`)."""

    name = 'grounded columns'

    def can_read(self, b: BagInputs) -> bool:
        return b.grounding is not None and not b.rollout_conns and b.columnar

    def read(self, b: BagInputs) -> list[Rollout]:
        from .grounded import grounded_rollouts
        assert b.grounding is not None
        gap_warnings: list[str] = []
        grounded = grounded_rollouts(b.path, b.bag, b.conns, b.grounding, b.predicates, b.rate_hz, b.max_gap_s,
                                     typestore(), gap_warnings)
        if grounded is None:
            raise NotThisReader('inputs the column-wise grounding does not reproduce exactly')
        warnings = list(dict.fromkeys(b.warnings + gap_warnings + b.grounding.name_warnings(str(b.path))))
        return [Rollout(str(b.path), name, values, unknown, list(warnings), frame_ns=frame_ns)
                for name, values, unknown, frame_ns in grounded]


class MessageLoop:
    """Any bag of predicate topics or raw inputs, message by message."""

    name = 'message loop'

    def can_read(self, b: BagInputs) -> bool:
        return True

    def read(self, b: BagInputs) -> list[Rollout]:
        return _message_loop_rollouts(b)


READERS: tuple[BagReader, ...] = (LiveRecording(), PredicateColumns(), GroundedColumns(), MessageLoop())
"""The bag readers in the order they are tried: the first that can read a
bag reads it (the last reads any)."""


def _read_open_bag(path: Path, bag: OpenBag, predicates: list[str], rate_hz: float,
                   staleness_s: float, robot: RobotConfig | None, max_gap_s: float, columnar: bool,
                   names: _NameRule, objects_from_images: bool = False) -> list[Rollout]:
    conns = [c for c in bag.connections if c.msgtype == PREDICATE_TYPE]
    grounding: GroundingSet | None = None
    if not conns:
        from ..grounding.messages import IMAGE_TOPICS, RAW_TOPICS, GroundingSet, raw_topics
        expected = raw_topics(robot)
        raw_conns = [c for c in bag.connections if expected.get(c.topic) == c.msgtype]
        topics = sorted(f'{c.topic} ({c.msgtype})' for c in bag.connections)
        if not raw_conns or robot is None:
            need = (f'predicate topics ({PREDICATE_TYPE})' if robot is None else
                    f'predicate topics ({PREDICATE_TYPE}) or raw inputs ({", ".join(RAW_TOPICS)})')
            raise AuditInputError(f'{path}: no {need}; the bag has: {", ".join(topics) or "no topics"}'
                                  + ('' if robot is not None or not raw_conns else
                                     ' (raw inputs need --config ROBOT.yaml to be grounded)'))
        if objects_from_images:
            if not robot.camera.objects:
                raise AuditInputError(f'{path}: objects from images: the robot configuration gives no '
                                      f'camera.objects (the colours to find)')
            missing = sorted({'/image', '/depth', '/camera_info'} - {c.topic for c in raw_conns})
            if missing:
                raise AuditInputError(f'{path}: objects from images: the bag has no {", ".join(missing)}')
        # Images are read only where they are used: colour regions, or objects found in them again.
        images = {'/image'} if robot.camera.regions or objects_from_images else set()
        images |= {'/depth', '/camera_info'} if objects_from_images else set()
        conns = [c for c in raw_conns if c.topic not in IMAGE_TOPICS or c.topic in images]
        grounding = GroundingSet(robot, any(c.topic == '/wrench' for c in raw_conns),
                                 any(c.topic == '/image' for c in conns), objects_from_images)
    inputs = BagInputs(path, bag, bag.warnings, conns, grounding,
                       [c for c in bag.connections if c.msgtype == VERDICT_TYPE],
                       [c for c in bag.connections if c.topic in ROLLOUT_TOPICS],
                       predicates, rate_hz, staleness_s, max_gap_s, columnar, names)
    for reader in READERS:
        if not reader.can_read(inputs):
            continue
        try:
            rollouts = reader.read(inputs)
        except NotThisReader as why:
            _log.debug('%s: not read as %s (%s)', path, reader.name, why)
            continue
        for ep in rollouts:
            ep.reader = reader.name
        return rollouts
    raise AssertionError(f'{path}: no reader took it (the message loop takes any)')


def _message_loop_rollouts(b: BagInputs) -> list[Rollout]:
    """The rollouts of a bag fed message by message through the live
    grounding classes and :class:`SampleHold` (any bag: a rollout topic,
    inputs the column-wise readers do not reproduce)."""
    path, bag, warnings, conns, grounding, rollout_conns = b.path, b.bag, b.warnings, b.conns, b.grounding, \
        b.rollout_conns
    predicates, rate_hz, staleness_s, max_gap_s, names = b.predicates, b.rate_hz, b.staleness_s, b.max_gap_s, b.names
    gaps = 0
    rollouts: list[Rollout] = []
    hold = SampleHold(predicates, staleness_s)
    name = path.name
    rows_v: list[np.ndarray] = []
    seen = _NamesSeen()         # predicate names per topic (predicate bags)
    rows_u: list[np.ndarray] = []
    rows_t: list[int] = []
    schedule = FrameSchedule(period_ns_of(rate_hz), int(max_gap_s * 1e9))

    viewed: list[tuple[float, dict[str, Any]]] = []     # grounded frames still to be evaluated (TF together)

    def drain(grounding: GroundingSet) -> None:
        """Evaluate the viewed frames (the grounding then forgets the TF samples none can read again)."""
        for (now_s, _), values in zip(viewed, grounding.flush([v for _, v in viewed])):
            for pname, value in values.items():
                hold.update(pname, value, now_s)
            v, u = hold.frame(now_s)
            rows_v.append(v)
            rows_u.append(u)
        viewed.clear()

    def close(current: str) -> None:
        if grounding is not None and viewed:
            drain(grounding)
        if rows_v:
            rollouts.append(Rollout(str(path), current, np.array(rows_v), np.array(rows_u), list(warnings),
                                    frame_ns=np.array(rows_t, np.int64)))

    def emit(frame_ns: int) -> None:
        """Append the frame at ``frame_ns`` (grounded raw inputs are
        viewed now and evaluated when the rollout closes)."""
        now_s = frame_ns * 1e-9
        rows_t.append(frame_ns)
        if grounding is not None:
            viewed.append((now_s, grounding.view(now_s)))
            if len(viewed) >= _VIEWED_FRAMES:
                drain(grounding)
            return
        v, u = hold.frame(now_s)
        rows_v.append(v)
        rows_u.append(u)

    for conn, stamp_ns, raw, sample in _with_samples(bag, conns + rollout_conns, grounding is not None,
                                                     str(path)):
        frames, gap_after = schedule.take(stamp_ns)
        for frame_ns in frames:             # frames strictly before this message
            emit(frame_ns)
        if gap_after is not None:           # a hole in the recording ended the segment
            close(name)
            gaps += 1
            warnings.append(_gap_warning(path, stamp_ns, gap_after, max_gap_s))
            rows_v, rows_u, rows_t = [], [], []
            name = f'{name.split("#gap")[0]}#gap{gaps}'
            hold = SampleHold(predicates, staleness_s)
            if grounding is not None:
                grounding = grounding.fresh_copy()
        if grounding is not None and sample is not None:
            grounding.feed_sample(conn.topic, sample)      # decoded column-wise
            continue
        msg = bag.decode(raw, conn, stamp_ns)
        if conn.topic in ROLLOUT_TOPICS:
            close(name)
            rows_v, rows_u, rows_t = [], [], []
            name = msg.data or f'{path.name}#{len(rollouts)}'
            hold = SampleHold(predicates, staleness_s)
            if grounding is not None:
                grounding = grounding.fresh_copy()
            schedule.restart(stamp_ns)
            continue
        if grounding is not None:
            grounding.feed(conn.topic, msg)
            continue
        preds = msg.predicates
        given = [p.name for p in preds]
        seen.add(conn.topic, given)
        hold.update_many(given, [p.value for p in preds], [p.unknown for p in preds], stamp_ns * 1e-9)
    if grounding is None:
        names.check(path, seen)
    last = schedule.last()
    if last is not None:                # the frame holding the last messages
        emit(last)
    if grounding is not None:
        warnings.extend(grounding.name_warnings(str(path)))
    close(name)
    for ep in rollouts:                 # every rollout of this bag: the bag's names given twice
        ep.warnings.extend(seen.repeat_warnings(path))
    if grounding is not None:
        for ep in rollouts:      # every rollout of this bag carries the bag's name warnings
            ep.warnings[:] = list(dict.fromkeys(ep.warnings + warnings))
    return rollouts


def _with_samples(bag: OpenBag, conns: list[Any], raw_inputs: bool,
                  where: str) -> Iterator[tuple[Any, int, bytes, Any]]:
    """``(connection, bag time ns, bytes, sample)`` per message in bag
    order; with ``raw_inputs`` the grounding sample of each raw input
    message the column decoder takes (:mod:`safemanip_ros.grounding.rawinputs`), else None."""
    decoder = None
    if raw_inputs:
        from ..grounding.rawinputs import SampleDecoder
        decoder = SampleDecoder(typestore())
    for batch in bag.batches(conns):
        samples = decoder.decode(batch, where) if decoder is not None else [None] * len(batch)
        yield from zip(batch.connections, batch.time_ns.tolist(), batch.raws, samples)


def _gap_warning(path: Path, stamp_ns: int, next_frame_ns: int, max_gap_s: float) -> str:
    """The warning for a hole in a recording that splits the rollout."""
    return (f'{path}: {(stamp_ns - next_frame_ns) * 1e-9:.3g} s without messages at bag time '
            f'{next_frame_ns * 1e-9:.3f} s (> {max_gap_s:g} s): rollout split')


def _predicate_columns_rollouts(path: Path, bag: OpenBag, conns: list[Any], predicates: list[str], rate_hz: float,
                                staleness_s: float, max_gap_s: float, warnings: list[str],
                                names: _NameRule) -> list[Rollout]:
    """The rollouts of a bag of predicate topics, decoded column-wise
    (:mod:`.columns`) and framed with arrays: the same frames as feeding
    each message through :class:`SampleHold` in bag order (frame ``T_k``
    sees every message stamped at or before it; a hole longer than
    ``max_gap_s`` ends the rollout).  :class:`NotThisReader` when a message
    does not decode (the message loop then reports it)."""
    from ..bag.columns import ColumnDecodeError, decode_predicate_arrays
    batch = bag.read_all(conns)
    if not batch.raws:
        return []
    try:
        groups = decode_predicate_arrays(batch.raws, str(path))
    except ColumnDecodeError as err:
        raise NotThisReader(f'a message the column decoder does not take: {err}') from err
    seen = _NamesSeen()
    for g in groups:
        for topic in {batch.connections[i].topic for i in g.rows.tolist()}:
            seen.add(topic, g.layout.names)
    names.check(path, seen)
    warnings.extend(seen.repeat_warnings(path))
    t = batch.time_ns
    period_ns = period_ns_of(rate_hz)
    max_gap_ns = int(max_gap_s * 1e9)
    # Segments and their frame times, exactly as the message loop steps next_frame.
    # (first message, end message, first frame ns, last frame ns, warnings so far)
    segments: list[tuple[int, int, int, int, int]] = []
    for seg_first, end, seg_start, last_frame, gap_stamp in frame_segments(t, period_ns, max_gap_ns):
        segments.append((seg_first, end, seg_start, last_frame, len(warnings)))
        if gap_stamp is not None:
            warnings.append(_gap_warning(path, gap_stamp, last_frame, max_gap_s))
    index = {p: j for j, p in enumerate(predicates)}
    rollouts = []
    for s_no, (lo, hi, f0, f1, n_warnings) in enumerate(segments):
        frames = frame_grid(f0, f1, period_ns)
        best_t = np.full((len(frames), len(predicates)), np.iinfo(np.int64).min, np.int64)
        best_row = np.full((len(frames), len(predicates)), -1, np.int64)
        val = np.zeros((len(frames), len(predicates)), bool)
        known = np.zeros((len(frames), len(predicates)), bool)
        for g in groups:
            inside = (g.rows >= lo) & (g.rows < hi)
            if not inside.any():
                continue
            # A layout naming a predicate twice gives it once, as SampleHold does.
            given, g_values, g_unknown = merge_repeated(g.layout.names, g.values, g.unknown)
            cols = np.array([index.get(n, -1) for n in given], np.intp)
            keep = cols >= 0
            if not keep.any():
                continue
            cols = cols[keep]
            rows = g.rows[inside]
            tg = t[rows]
            i = np.searchsorted(tg, frames, side='right') - 1
            has = i >= 0
            i = np.maximum(i, 0)
            cand_t = np.where(has, tg[i], np.iinfo(np.int64).min)[:, None]
            cand_row = np.where(has, rows[i], -1)[:, None]
            take = has[:, None] & ((cand_t > best_t[:, cols]) | ((cand_t == best_t[:, cols]) &
                                                                  (cand_row > best_row[:, cols])))
            v = g_values[inside][i][:, keep]
            u = g_unknown[inside][i][:, keep]
            sub_t, sub_r = best_t[:, cols], best_row[:, cols]
            sub_v, sub_k = val[:, cols], known[:, cols]
            sub_t[take] = np.broadcast_to(cand_t, take.shape)[take]
            sub_r[take] = np.broadcast_to(cand_row, take.shape)[take]
            sub_v[take] = (v & ~u)[take]
            sub_k[take] = (~u)[take]
            best_t[:, cols], best_row[:, cols], val[:, cols], known[:, cols] = sub_t, sub_r, sub_v, sub_k
        # SampleHold's freshness test, in the same float arithmetic.
        has_row = best_row >= 0
        fresh = known & has_row & held_fresh(frames[:, None] * 1e-9, np.where(has_row, best_t, 0) * 1e-9, staleness_s)
        name = path.name if s_no == 0 else f'{path.name}#gap{s_no}'
        rollouts.append(Rollout(str(path), name, val & fresh, ~fresh, list(warnings[:n_warnings]), frame_ns=frames))
    return rollouts


def _live_rollouts(path: Path, bag: OpenBag, conns: list[Any], verdict_conns: list[Any], predicates: list[str], rate_hz: float,
                   staleness_s: float, warnings: list[str], names: _NameRule) -> list[Rollout]:
    """Rollouts of a bag recorded beside the live monitor (it has the
    monitor's ``VerdictArray`` topic): the monitor's own frames, rebuilt.

    The live monitor applies predicate samples in header-stamp order (stamp 0:
    receive time) and builds frame ``k`` of a rollout at time ``T_k``: the
    stamp of the verdicts it published for that frame, or — for a frame a late
    tick caught up on, whose verdicts were not published — its scheduled time
    ``T_0 + k / rate_hz``, its samples' age judged as the tick judged it
    (:meth:`FrameClock.replayed_ageing`).  The same samples at the same times
    give the same frames, so the audit reports what the monitor reported live."""
    frames_in = FrameAssembly(predicates, rate_hz, staleness_s)         # as the live node assembles them
    seen = _NamesSeen()
    published: dict[str, dict[int, int]] = {}
    order: list[str] = []
    # The monitor's status says the rate and staleness it ran with (recordings made before it did: inferred).
    status_conns = [c for c in bag.connections if c.msgtype == STATUS_TYPE and 'staleness_s' in _msgdef_text(c)]
    recorded: dict[str, tuple[float, float]] = {}       # rollout → (rate_hz, staleness_s)
    for seq, (conn, bag_ns, raw) in enumerate(bag.messages(list(conns) + list(verdict_conns) + status_conns)):
        msg = bag.decode(raw, conn, bag_ns)
        stamp_ns = stamp_to_ns(msg.header.stamp)
        if conn.msgtype == VERDICT_TYPE:
            if msg.episode_id not in published:
                published[msg.episode_id] = {}
                order.append(msg.episode_id)
            published[msg.episode_id][int(msg.frame)] = stamp_ns
            continue
        if conn.msgtype == STATUS_TYPE:
            if msg.episode_id and msg.rate_hz > 0:
                recorded.setdefault(msg.episode_id, (float(msg.rate_hz), float(msg.staleness_s)))
            continue
        preds = msg.predicates
        given = [p.name for p in preds]
        seen.add(conn.topic, given)
        frames_in.push(stamp_ns or bag_ns, given, [p.value for p in preds], [p.unknown for p in preds])
    names.check(path, seen)
    warnings.extend(seen.repeat_warnings(path))

    clock, hold = frames_in.clock, frames_in.hold
    rollouts: list[Rollout] = []
    for rollout_id in order:
        frames = published[rollout_id]
        # Rebuilt at another rate, the frames are not the monitor's: every window another length.
        live_hz, live_staleness_s = recorded.get(rollout_id, (None, None))
        if live_hz is None:
            live_ns = recorded_period_ns(frames)
            live_hz = None if live_ns is None or abs(live_ns - clock.period_ns) <= 0.2 * clock.period_ns \
                else 1e9 / live_ns
        if live_hz is not None and abs(live_hz - rate_hz) > 1e-6 * rate_hz:
            raise AuditInputError(f'{path}: rollout {rollout_id}: the live monitor built its frames at '
                                  f'{live_hz:.4g} Hz, this audit at {rate_hz:g} Hz: its rollouts would not be the '
                                  f'monitor\'s (audit it with --rate-hz {live_hz:.4g})')
        # Samples held as long as the monitor held them: its frames, not others.
        hold.staleness_s = staleness_s if live_staleness_s is None else live_staleness_s
        if live_staleness_s is not None and live_staleness_s != staleness_s:
            warnings.append(f'{path}: rollout {rollout_id}: samples held {live_staleness_s:g} s, as the live '
                            f'monitor held them (not --staleness-s {staleness_s:g}): its frames rebuilt')
        if 0 not in frames:
            warnings.append(f'{path}: rollout {rollout_id}: its first frame was not recorded; frames scheduled '
                            f'from the first one recorded')
        rows_v, rows_u, rows_t = [], [], []
        for t_k, aged_k in zip(clock.replayed(frames), clock.replayed_ageing(frames)):
            v, u = frames_in.frame(t_k, aged_k)
            rows_v.append(v)
            rows_u.append(u)
            rows_t.append(t_k)
        rollouts.append(Rollout(str(path), rollout_id or path.name, np.array(rows_v), np.array(rows_u),
                                list(warnings), frame_ns=np.array(rows_t, np.int64)))
    return rollouts


def _msgdef_text(conn: Any) -> str:
    """A connection's message definition as text ('' where the bag has none;
    older rosbags give the text itself, newer an object holding it)."""
    msgdef = getattr(conn, 'msgdef', None)
    return str(getattr(msgdef, 'data', msgdef) or '')


def read_jsonl(path: Path, predicates: list[str], allow_unknown: bool = False,
               known: Collection[str] = ()) -> list[Rollout]:
    """Rollouts of a trace file (:mod:`safemanip_ros.ltlf.trace`: the same
    rules as ``check`` and ``monitor-trace``): one per file, or one per line
    of a batch."""
    from ..errors import TraceError
    from ..monitor.frames import read_matrices
    try:
        traces = read_matrices(path, predicates, allow_unknown, known)
    except TraceError as err:
        raise AuditInputError(err.one_line()) from err
    return [Rollout(str(path), name, values, unknown) for name, values, unknown in traces]
