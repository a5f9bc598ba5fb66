"""Raw-input bags grounded column-wise: a whole rollout at once.

The message-by-message path of :func:`~.rollouts.read_bag` feeds every
``JointState``, ``TFMessage`` and ``ContactArray`` to the grounding classes
and evaluates them at every frame.  This module computes the very same
frames from the bag's columns (:mod:`.layouts`) with array operations:

* **frames**: the frame schedule (every ``1 / rate_hz`` of bag time, split
  at gaps) and, for each frame, how many messages of each topic came before
  it — what the grounding had been fed when the frame was built;
* **joints**: every sample's predicates at once
  (:func:`~safemanip_ros.grounding.joints.sample_predicates`, the function
  the live grounding calls for its one sample), then each frame takes its
  newest sample's, if fresh;
* **fixtures** and **wrench**: likewise per sample, then per frame;
* **contacts**: what each message layout's body pairs mean is worked out
  once per set of pairs above the force threshold
  (:meth:`~safemanip_ros.grounding.contacts.ContactGrounding.touches`); the
  grasp-onset state runs frame by frame on those;
* **TF**: each link's samples become arrays, each frame's view of the tree
  is a span of them, and all frames are looked up and evaluated together
  (:meth:`~safemanip_ros.grounding.tf.TfGrounding.evaluate_frames`, the
  live grounding's code).

It takes the bags it can reproduce exactly: inputs on those three topics
only (plus ``/tf_static``), every message decoded by a layout, each input
stream in stamp order (no sample the live classes would drop or take as a
clock reset; ``/tf`` may interleave publishers, each link in order), each TF message of one stamp and no NaN transform on a
configured frame's chain, each TF child with one parent throughout, no
camera, at most :data:`MAX_BYTES` of raw messages.  For anything
else :func:`grounded_rollouts` returns None and the message loop runs.
Input-health counters (live diagnostics) are not computed here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..bag import OpenBag
from ..bag.layouts import Columns, decode_shared
from ..grounding.base import Column, within_staleness
from ..grounding.contacts import ContactGrounding, ContactSample, Touches, wrench_over
from ..grounding.joints import GripperMotion, JointStateGrounding, fixture_predicates, sample_predicates
from ..grounding.messages import GroundingSet
from ..grounding.rawinputs import (
    contact_bodies,
    contact_forces,
    joint_names,
    joint_positions,
    joint_velocities,
    stamps_s,
    tf_links,
    tf_stamps_s,
    tf_values,
    wrench_values,
)
from ..grounding.tf import GRASP_FALSE, GRASP_TRUE, GRASP_UNKNOWN, Link, Links, TfGrounding, are_poses, first_kept
from ..monitor.clock import frame_grid, frame_segments, period_ns_of

TYPES = {'/joint_states': 'sensor_msgs/msg/JointState', '/tf': 'tf2_msgs/msg/TFMessage',
         '/tf_static': 'tf2_msgs/msg/TFMessage', '/contacts': 'safemanip_ros/msg/ContactArray',
         '/wrench': 'geometry_msgs/msg/WrenchStamped'}

# A bag is held in memory as columns: one with more raw message bytes than
# this (tens of minutes of a robot's TF) is grounded by the message loop.
MAX_BYTES = 256 * 2**20


class _NotColumnar(Exception):
    """The bag needs the message-by-message path (internal)."""


@dataclass
class _Topic:
    """One topic's messages in bag order: global positions among all raw
    messages, and per message the layout columns and row holding it."""

    index: np.ndarray                    # int64[n]: position among all raw messages
    parts: list[tuple[Columns, np.ndarray]]   # (columns of a layout, the topic positions of its rows)

    @functools.cached_property
    def stamps_s(self) -> np.ndarray:
        """Header stamp per message, ``int(sec) + int(nanosec) * 1e-9`` (``stamp_s``)."""
        out = np.empty(len(self.index))
        for c, at in self.parts:
            out[at] = stamps_s(c)
        return out


@dataclass
class _Stream:
    """One topic's samples within a segment, as its live grounding source
    would have been fed them."""

    msgs: np.ndarray      # the segment's messages (positions in the topic), in order
    stamps: np.ndarray    # their header stamps (s)
    newest: np.ndarray    # per frame: the newest of them fed before it (index into msgs; -1: none)
    fresh: np.ndarray     # per frame: that sample within the staleness limit (Freshness.fresh)

    @property
    def at(self) -> np.ndarray:
        """Per frame, the sample it reads (0 where there is none: ``fresh`` is False there)."""
        rows: np.ndarray = np.maximum(self.newest, 0)
        return rows


def _stream(topic: _Topic | None, lo: int, hi: int, fed: np.ndarray, now_s: np.ndarray,
            staleness_s: float) -> _Stream:
    """A topic's messages in the segment ``[lo, hi)`` (global positions),
    the newest fed before each frame (``fed``: messages before each frame)
    and its freshness at the frame times ``now_s``."""
    if topic is None:
        msgs, stamps, newest = np.zeros(0, np.int64), np.zeros(0), np.full(len(fed), -1)
    else:
        a, b = np.searchsorted(topic.index, [lo, hi])
        msgs = np.arange(a, b)
        stamps = topic.stamps_s[msgs]
        _in_order(stamps)
        newest = np.searchsorted(topic.index[a:b], fed) - 1
    return _Stream(msgs, stamps, newest, _fresh(stamps, newest, now_s, staleness_s))


def grounded_rollouts(path: Path, bag: OpenBag, conns: list[Any], grounding: GroundingSet, predicates: list[str],
                      rate_hz: float, max_gap_s: float, typestore: Any,
                      warnings: list[str]) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] | None:
    """``(name, values, unknown, frame_ns)`` per rollout of a raw-input bag, the same
    frames as the message loop builds, or None when the bag is not one this
    module reproduces (see the module docstring).  Appends gap warnings to
    ``warnings``."""
    from .rollouts import _gap_warning

    if any(c.topic not in TYPES for c in conns) or grounding.camera is not None:
        return None
    try:
        topics, times = _read(bag, conns, str(path), typestore)
    except _NotColumnar:
        return None
    if not len(times):
        return []
    period_ns, max_gap_ns = period_ns_of(rate_hz), int(max_gap_s * 1e9)
    out = []
    name = path.name
    index = {p: j for j, p in enumerate(predicates)}
    for k, (lo, hi, first_ns, last_ns, gap_stamp) in enumerate(frame_segments(times, period_ns, max_gap_ns)):
        if k:
            name = f'{path.name}#gap{k}'
        if gap_stamp is not None:
            warnings.append(_gap_warning(path, gap_stamp, last_ns, max_gap_s))
        frame_ns, fed = _schedule(times[lo:hi], lo, first_ns, last_ns, period_ns)
        try:
            cols = _ground(grounding, topics, lo, hi, frame_ns * 1e-9, fed)
        except _NotColumnar:
            return None
        n = len(frame_ns)
        values, unknown = np.zeros((n, len(predicates)), bool), np.ones((n, len(predicates)), bool)
        for pname, (v, known) in cols.items():
            j = index.get(pname)
            if j is not None:
                values[:, j] = v & known
                unknown[:, j] = ~known
        out.append((name, values, unknown, frame_ns))
    return out


def _read(bag: OpenBag, conns: list[Any], where: str, typestore: Any) -> tuple[dict[str, _Topic], np.ndarray]:
    """Every message of ``conns`` decoded by layout, grouped by topic, and
    the bag time (ns) of each in bag order."""
    times: list[np.ndarray] = []
    pieces: dict[str, list[tuple[np.ndarray, Columns]]] = {}
    offset = 0
    size = 0
    for batch in bag.batches(conns):
        size += sum(map(len, batch.raws))
        if size > MAX_BYTES:
            raise _NotColumnar      # a long recording: the message loop streams it in constant memory
        by_topic: dict[str, list[int]] = {}
        for i, conn in enumerate(batch.connections):
            by_topic.setdefault(conn.topic, []).append(i)
        for topic, rows in by_topic.items():
            columns, rejected = decode_shared(typestore, TYPES[topic], [batch.raws[i] for i in rows], where)
            if len(rejected):
                raise _NotColumnar
            at = np.array(rows, dtype=np.int64) + offset
            for c in columns:
                pieces.setdefault(topic, []).append((at[c.rows], c))
        times.append(batch.time_ns)
        offset += len(batch)
    topics = {}
    for topic, parts in pieces.items():
        index = np.sort(np.concatenate([g for g, _ in parts]))
        topics[topic] = _Topic(index, [(c, np.searchsorted(index, g)) for g, c in parts])
    return topics, (np.concatenate(times) if times else np.zeros(0, np.int64))


def _schedule(times_ns: np.ndarray, first: int, first_ns: int, last_ns: int,
              period_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """A segment's frame times (ns) and, per frame, how many messages (global
    positions; the segment's start at ``first``) the message loop had fed
    before building it: every message up to the first stamped after the frame."""
    frame_ns = frame_grid(first_ns, last_ns, period_ns)
    fed = first + np.searchsorted(np.maximum.accumulate(times_ns), frame_ns, side='right')
    return frame_ns, fed.astype(np.int64)


def _fresh(stamps: np.ndarray, newest: np.ndarray, now_s: np.ndarray, staleness_s: float) -> np.ndarray:
    """:meth:`~safemanip_ros.grounding.base.Freshness.fresh` per frame, given
    the newest sample's index (-1: none yet)."""
    have = newest >= 0
    stamp = np.where(have, stamps[np.maximum(newest, 0)] if len(stamps) else 0.0, 0.0)
    fresh: np.ndarray = have & within_staleness(now_s, stamp, staleness_s)
    return fresh


def _interleaved(stamps: np.ndarray, clock_jump_s: float) -> np.ndarray:
    """The newest stamp so far at each message of a stream whose publishers
    interleave (``/tf``: a detector's poses stamped at capture arrive after
    the robot's newer links; :meth:`~safemanip_ros.grounding.tf.TfGrounding.update`);
    a jump back beyond ``clock_jump_s`` (a reset) is the message loop's."""
    if not len(stamps):
        return stamps
    newest = np.maximum.accumulate(stamps)
    if (stamps < newest - clock_jump_s).any():
        raise _NotColumnar
    return newest


def _in_order(stamps: np.ndarray) -> None:
    if len(stamps) > 1 and (np.diff(stamps) < 0).any():
        raise _NotColumnar          # a sample the live class drops, or a clock reset


def _ground(grounding: GroundingSet, topics: dict[str, _Topic], lo: int, hi: int, now_s: np.ndarray,
            fed: np.ndarray) -> dict[str, Column]:
    cols = _joints(grounding, topics.get('/joint_states'), lo, hi, now_s, fed)
    if grounding.fixtures.names:
        cols.update(_fixtures(grounding, topics.get('/joint_states'), lo, hi, now_s, fed))
    if grounding.wrench is not None:
        cols.update(_wrench(grounding, topics.get('/wrench'), lo, hi, now_s, fed))
    closed = cols.get('gripper_closed')
    contact_cols = _contacts(grounding, topics.get('/contacts'), lo, hi, now_s, fed, closed)
    cols.update(contact_cols)
    cols.update(_tf(grounding, topics.get('/tf'), topics.get('/tf_static'), lo, hi, now_s, fed, contact_cols))
    return cols


def _joints(grounding: GroundingSet, topic: _Topic | None, lo: int, hi: int, now_s: np.ndarray,
            fed: np.ndarray) -> dict[str, Column]:
    joints: JointStateGrounding = grounding.joints
    cfg = joints.config
    arrays = joints.arrays
    n_frames = len(now_s)
    stream = _stream(topic, lo, hi, fed, now_s, cfg.staleness_s)
    wanted = list(cfg.arm_joints) + list(cfg.gripper_joints)
    out: dict[str, Column] = {name: (np.zeros(n_frames, bool), np.zeros(n_frames, bool))
                              for name in cfg.predicate_names}
    if not len(stream.msgs):
        return out
    assert topic is not None
    width = len(wanted)
    n_all = len(topic.index)
    pos_all, vel_all = np.full((n_all, width), np.nan), np.full((n_all, width), np.nan)
    has_vel_all = np.zeros(n_all, bool)
    for c, at in topic.parts:
        names = joint_names(c)
        positions = joint_positions(c)
        index = {n: i for i, n in enumerate(names)}
        idx = np.array([index.get(j, -1) for j in wanted], dtype=np.intp)
        if positions.shape[1] != len(names) or not names:
            idx = np.full(width, -1)          # malformed: every joint unknown
        take = idx >= 0
        if positions.shape[1]:
            pos_all[np.ix_(at, np.flatnonzero(take))] = positions[:, idx[take]]
        velocity = joint_velocities(c)
        if velocity is not None:
            has_vel_all[at] = True
            vel_all[np.ix_(at, np.flatnonzero(take))] = velocity[:, idx[take]]
    msgs, stamps = stream.msgs, stream.stamps
    pos, vel, has_vel = pos_all[msgs], vel_all[msgs], has_vel_all[msgs]
    pos[~np.isfinite(pos)] = np.nan          # ±inf is not a position: unknown, like NaN
    vel[~np.isfinite(vel)] = np.nan
    n = len(msgs)
    has_prev = np.arange(n) > 0
    prev_pos = np.vstack([np.full((1, width), np.nan), pos[:-1]])
    prev_stamp = np.concatenate([[np.nan], stamps[:-1]])
    known, opened, closed = GripperMotion().samples(arrays, pos, stamps)
    rows = sample_predicates(arrays, pos, vel, has_vel, prev_pos, has_prev, stamps, prev_stamp, known, opened, closed)
    at, fresh = stream.at, stream.fresh
    for name, (v, k) in rows.items():
        out[name] = (v[at] & fresh, k[at] & fresh)
    return out


def _fixtures(grounding: GroundingSet, topic: _Topic | None, lo: int, hi: int, now_s: np.ndarray,
              fed: np.ndarray) -> dict[str, Column]:
    """:class:`~safemanip_ros.grounding.joints.FixtureGrounding` over the
    segment's joint states: each fixture joint's position per sample (NaN
    when missing or NaN), the previous sample's, and the frames' newest."""
    fixtures = grounding.fixtures
    cfg = fixtures.config
    n_frames = len(now_s)
    out: dict[str, Column] = {name: (np.zeros(n_frames, bool), np.zeros(n_frames, bool)) for name in fixtures.names}
    stream = _stream(topic, lo, hi, fed, now_s, cfg.staleness_s)
    if topic is None or not len(stream.msgs):
        return out
    order = sorted(cfg.joints)
    q_all = np.full((len(topic.index), len(order)), np.nan)
    for c, at in topic.parts:
        positions = joint_positions(c)
        index = {n: i for i, n in enumerate(joint_names(c))}
        for j, fixture in enumerate(order):
            i = index.get(cfg.joints[fixture][0])
            if i is not None and i < positions.shape[1]:
                q_all[at, j] = positions[:, i]
    q = q_all[stream.msgs]
    prev = np.vstack([np.full((1, len(order)), np.nan), q[:-1]])
    at = stream.at
    for j, fixture in enumerate(order):
        for name, (v, k) in fixture_predicates(cfg, fixture, q[at, j], prev[at, j]).items():
            out[name] = (v, k & stream.fresh)
    return out


def _wrench(grounding: GroundingSet, topic: _Topic | None, lo: int, hi: int, now_s: np.ndarray,
            fed: np.ndarray) -> dict[str, Column]:
    """:class:`~safemanip_ros.grounding.contacts.WrenchGrounding` per frame."""
    assert grounding.wrench is not None
    cfg = grounding.wrench.config
    n_frames = len(now_s)
    stream = _stream(topic, lo, hi, fed, now_s, cfg.staleness_s)
    if topic is None or not len(stream.msgs):
        return {'contact_force_over_threshold': (np.zeros(n_frames, bool), np.zeros(n_frames, bool))}
    v_all = np.zeros((len(topic.index), 6))
    for c, at in topic.parts:
        v_all[at] = wrench_values(c)
    over, finite = wrench_over(cfg, v_all[stream.msgs])
    at, fresh = stream.at, stream.fresh
    return {'contact_force_over_threshold': (over[at] & fresh, finite[at] & fresh)}


def _contacts(grounding: GroundingSet, topic: _Topic | None, lo: int, hi: int, now_s: np.ndarray, fed: np.ndarray,
              fingers_closed: Column | None) -> dict[str, Column]:
    contacts = ContactGrounding(grounding.contacts.config)
    cfg = contacts.config
    n_frames = len(now_s)
    stream = _stream(topic, lo, hi, fed, now_s, cfg.staleness_s)
    kept: list[Touches | None] = []
    if topic is not None and len(stream.msgs):
        n_all = len(topic.index)
        kept_all: list[Any] = [None] * n_all
        for c, at in topic.parts:
            bodies = contact_bodies(c)
            for b1, b2 in bodies:
                grounding.contact_bodies_seen.update((b1, b2))
            forces = contact_forces(c)
            finite = np.isfinite(forces).all(axis=1)
            keep = forces >= cfg.min_force_n
            memo: dict[bytes, Touches] = {}
            for row, (pos, ok) in enumerate(zip(at.tolist(), finite.tolist())):
                if not ok:
                    continue        # a force that is not a number: the sample is unknown
                key = keep[row].tobytes()
                touches = memo.get(key)
                if touches is None:
                    touches = memo[key] = contacts.touches(
                        [ContactSample(b1, b2, 0.0) for (b1, b2), kp in zip(bodies, keep[row].tolist()) if kp])
                kept_all[pos] = touches
        kept = [kept_all[m] for m in stream.msgs.tolist()]
    closed_v = fingers_closed[0].tolist() if fingers_closed is not None else [False] * n_frames
    closed_k = fingers_closed[1].tolist() if fingers_closed is not None else [False] * n_frames
    # Rows of predicate values: evaluate_touches on the same touches and closure as its last call
    # gives the same values and leaves its state as it was (a grasp's onset is taken once), so
    # a run of equal inputs is evaluated once.
    # Each frame's row of values as an index into the distinct rows evaluated (-1: no fresh sample).
    names = contacts.names
    evaluated: list[tuple[bool | None, ...]] = []
    row_of = np.full(n_frames, -1, np.intp)
    last_input: tuple[object, bool | None] | None = None
    for f, (ok, s) in enumerate(zip(stream.fresh.tolist(), stream.newest.tolist())):
        touches = kept[s] if ok else None
        if touches is None:
            continue
        closed = closed_v[f] if closed_k[f] else None
        if last_input is None or last_input[0] is not touches or last_input[1] != closed:
            got = contacts.evaluate_touches(touches, closed)
            last_input = (touches, closed)
            evaluated.append(tuple(got[name] for name in names))
        row_of[f] = len(evaluated) - 1
    table_v = np.array([[bool(v) for v in row] for row in evaluated] + [[False] * len(names)], bool)
    table_k = np.array([[v is not None for v in row] for row in evaluated] + [[False] * len(names)], bool)
    values, known = table_v[row_of], table_k[row_of]      # row -1: the all-unknown row
    return {name: (values[:, j], known[:, j]) for j, name in enumerate(names)}


def _tf(grounding: GroundingSet, dynamic: _Topic | None, static: _Topic | None, lo: int, hi: int,
        now_s: np.ndarray, fed: np.ndarray, contact_cols: dict[str, Column]) -> dict[str, Column]:
    tf = TfGrounding(grounding.tf.config)
    tree = tf.tree
    n_frames = len(now_s)
    # Every valid transform in the segment, in the order the message loop sets them.
    order: list[str] = []                     # children in the order their links appear
    parent_of: dict[str, tuple[str, bool]] = {}
    # child → its samples: (message positions, places in the message, stamps, values [n, 7]) per layout
    samples: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = {}
    dyn_pos_parts, dyn_t_parts = [], []       # message positions and stamps of the /tf messages with transforms
    needed = _needed_tf_frames(tf, [t for t in (dynamic, static) if t is not None], lo, hi)
    for topic, is_static in ((dynamic, False), (static, True)):
        if topic is None:
            continue
        for c, at in topic.parts:
            inside = (topic.index[at] >= lo) & (topic.index[at] < hi)
            if not inside.any():
                continue
            pairs = tf_links(c)
            if not pairs:
                continue
            stamps = tf_stamps_s(c)
            if (stamps != stamps[:, :1]).any():
                raise _NotColumnar          # transforms of several stamps in one message
            stamp = stamps[:, 0]
            glob = topic.index[at]
            if not is_static:
                dyn_pos_parts.append(glob[inside])
                dyn_t_parts.append(stamp[inside])
            values = tf_values(c)
            for k, (parent, child) in enumerate(pairs):
                if child not in needed:
                    continue    # on no chain a predicate reads: its samples change no lookup
                v = values[:, k]
                if not are_poses(v)[inside].all():
                    raise _NotColumnar      # a NaN or infinite transform (counted and dropped live)
                known = parent_of.get(child)
                if known is None:
                    parent_of[child] = (parent, is_static)
                elif known != (parent, is_static):
                    raise _NotColumnar      # a link re-parented or turned static
                samples.setdefault(child, []).append((glob[inside], np.full(int(inside.sum()), k), stamp[inside],
                                                      v[inside]))
    dyn_pos = np.concatenate(dyn_pos_parts) if dyn_pos_parts else np.zeros(0, np.int64)
    by_position = np.argsort(dyn_pos, kind='stable')       # positions are unique: bag order
    dyn_pos = dyn_pos[by_position]
    dyn_t = (np.concatenate(dyn_t_parts) if dyn_t_parts else np.zeros(0))[by_position]
    newest = np.searchsorted(dyn_pos, fed) - 1
    fresh = _fresh(_interleaved(dyn_t, tf.freshness.clock_jump_s), newest, now_s, tf.freshness.staleness_s)
    # Links in the order they appear; a frame sees those whose first sample came before it.
    links: dict[str, Link] = {}
    first_seen: list[tuple[int, str]] = []
    ends: dict[str, np.ndarray] = {}
    starts: dict[str, np.ndarray] = {}
    for child, parts in samples.items():
        glob, place, st, vals = (np.concatenate(x) for x in zip(*parts))
        order_ = np.lexsort((place, glob))         # bag order, then order within a message
        glob, st, vals = glob[order_], st[order_], vals[order_]
        parent, is_static = parent_of[child]
        link = Link.from_arrays(parent, is_static, st, vals[:, :3].copy(), vals[:, 3:].copy())
        end = np.searchsorted(glob, fed)
        if is_static:
            start = np.maximum(end - 1, 0)
        else:
            _in_order(st)
            start = first_kept(st, end, tree.buffer_s)
        links[child], ends[child], starts[child] = link, end, start
        first_seen.append((int(glob[0]), child))
    first_seen.sort()
    order = [child for _, child in first_seen]
    appeared = np.searchsorted(np.array([g for g, _ in first_seen], np.int64), fed, side='left')
    # One set of links per number of links that have appeared.
    groups = []
    live = np.flatnonzero(fresh)
    for size in np.unique(appeared[live]).tolist():
        rows = live[appeared[live] == size]
        children = order[:size]
        view: Links = {child: links[child] for child in children}
        spans = np.zeros((len(rows), len(children), 2), np.int64)
        for j, child in enumerate(children):
            spans[:, j, 0], spans[:, j, 1] = starts[child][rows], ends[child][rows]
        groups.append((view, np.searchsorted(live, rows), spans))
    out: dict[str, Column] = {name: (np.zeros(n_frames, bool), np.zeros(n_frames, bool)) for name in tf.names}
    if not len(live):
        return out
    grasped = []
    for obj in sorted(tf.config.objects):
        col = contact_cols.get(f'object_grasped_raw_{obj}')
        code = np.full(len(live), GRASP_UNKNOWN, np.int8)
        if col is not None:
            grasp_v, grasp_k = col[0][live], col[1][live]
            code[grasp_k] = np.where(grasp_v[grasp_k], GRASP_TRUE, GRASP_FALSE)
        grasped.append(code)
    cols = tf.evaluate_frames(now_s[live], [0] * len(live), grasped, groups)
    for name, (live_v, live_k) in cols.items():
        frame_v, frame_k = np.zeros(n_frames, bool), np.zeros(n_frames, bool)
        frame_v[live], frame_k[live] = live_v, live_k
        out[name] = (frame_v, frame_k)
    return out


def _needed_tf_frames(tf: TfGrounding, topics: list[_Topic], lo: int, hi: int) -> set[str]:
    """The frames whose links some lookup of the configuration walks: the
    configured frames and, up the tree, their parents.  A link re-parented
    within the segment makes the bag the message loop's."""
    cfg = tf.config
    wanted = {cfg.world_frame, cfg.gripper_frame, *cfg.objects.values()}
    wanted |= {s.frame for s in cfg.supports.values()}
    wanted |= {f for a, b, _ in cfg.near.values() for f in (a, b)}
    wanted |= {f for frame, box, _, _ in cfg.inside.values() for f in (frame, box)}
    wanted |= {box for box, _, _ in cfg.interiors.values()}
    parent_of: dict[str, str] = {}
    for topic in topics:
        for c, at in topic.parts:
            if not ((topic.index[at] >= lo) & (topic.index[at] < hi)).any():
                continue
            for parent, child in tf_links(c):
                if parent_of.setdefault(child, parent) != parent:
                    raise _NotColumnar
    needed: set[str] = set()
    for frame in wanted:
        while frame not in needed:
            needed.add(frame)
            if frame not in parent_of:
                break
            frame = parent_of[frame]
    return needed
