"""Transform tree with time lookup, and the geometric predicates built on it.

:class:`TransformTree` keeps ``/tf`` (timestamped, buffered) and
``/tf_static`` transforms, and answers "pose of frame B in frame A at time
t" by chaining parent links, interpolating each dynamic link between its
bracketing samples (linear translation, spherical rotation) — what tf2's
``lookup_transform`` does.  A lookup outside a link's buffered interval (more
than ``tolerance_s`` past its newest sample) returns ``None``: unknown, never
a stale pose.  (On a ROS distro ``tf2_ros`` could serve the same lookups; this
implementation gives identical results and needs no ROS.)

:class:`TfGrounding` turns configured entity frames into predicates:

* ``near_<name>``: two frames closer than a distance;
* ``inside_<name>``: a frame's origin inside a box given in another frame;
* per object ``o``, read as measurements (:mod:`.tracking`: a detector's
  poses are noisy, late and missing; while grasped the exact gripper
  carries the object): ``object_stable_o`` (linear speed < 0.05 m/s and
  angular < 0.25 rad/s, fitted over a window of detections, with
  hysteresis), ``object_sliding_o`` (horizontal speed in the world frame
  above ``sliding_m_s``, 0.01 m/s), ``object_sync_o`` (while grasped, slip
  relative to the gripper since grasp onset < 0.03 m and < 0.3 rad; true
  when not grasped; the reference survives a one-frame contact dropout),
  ``object_supported_o`` (the object's lowest point, from its shape, within
  ``support_gap_m`` of the top face of a support other than itself, its
  centre over that face: :mod:`.geometry`) and ``object_settled_o``
  (supported, stable, gripper farther than 0.01 m); unknown once the object
  has not been detected for the tracking staleness limit;
* ``gripper_approaching_o``: the gripper within ``approach_m`` (0.05 m) of
  the object and closer than at the previous frame; ``pick_approach``: the
  gripper approaching some object while nothing is grasped (SafeManip's pick
  onset test, before its 10-frame persistence, which the property file adds).
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..stamps import stamp_s
from . import poses, windows
from .base import Column, Freshness, InputHealth, Predicates, all_unknown, kleene_and
from .geometry import Shape, SupportSurface, support_gaps_m, turns_onto_itself
from .preconditions import TRUE, UNKNOWN, Bodies, Supports, pick_columns, place_columns
from .tracking import Measurement, MotionLimits, ObjectTrack, TrackConfig, TrackFrames


def quat_to_matrix(q: Sequence[float]) -> np.ndarray:
    """Rotation matrix of a quaternion (x, y, z, w)."""
    return poses.quat_to_rot(np.asarray(q, dtype=float))


def make_pose(translation: Sequence[float], quaternion: Sequence[float]) -> np.ndarray:
    """4x4 pose from a translation (m) and a quaternion (x, y, z, w)."""
    return poses.to_matrix(quat_to_matrix(quaternion), np.asarray(translation, dtype=float))


@dataclass(eq=False)
class Link:
    """One child frame's link to its parent.  Its samples only grow (stamps
    non-decreasing); ``start`` moves past those trimmed from the buffer, so
    a frame evaluated later still finds exactly the samples it saw.  A
    static link's one sample is its newest."""

    parent: str
    static: bool
    stamps: list[float] = field(default_factory=list)
    # As received: a message carries every link, a frame's lookups read a few.
    translations: list[tuple[float, float, float]] = field(default_factory=list)
    rotations: list[tuple[float, float, float, float]] = field(default_factory=list)
    start: int = 0
    _arrays: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(stamps [n], translations [n, 3], rotations [n, 4]) of every sample so far."""
        n = len(self.stamps)
        if self._arrays is None or self._arrays[0] != n:
            self._arrays = (n, np.array(self.stamps), np.array(self.translations, dtype=float).reshape(n, 3),
                            np.array(self.rotations, dtype=float).reshape(n, 4))
        return self._arrays[1:]

    @classmethod
    def from_arrays(cls, parent: str, static: bool, stamps_s: np.ndarray, translations_m: np.ndarray,
                    rotations_xyzw: np.ndarray) -> 'Link':
        """A link holding ``n`` samples given as arrays (``[n]``, ``[n, 3]``,
        ``[n, 4]``, stamps non-decreasing), read through :meth:`arrays`
        only (the offline audit builds its links this way)."""
        link = cls(parent, static)
        link.stamps = stamps_s.tolist()
        link._arrays = (len(stamps_s), stamps_s, translations_m, rotations_xyzw)
        return link

    def has_arrays(self) -> bool:
        """:meth:`arrays` is built for every sample (no list to copy from)."""
        return self._arrays is not None and self._arrays[0] == len(self.stamps)

    def compact(self) -> None:
        """Forget the samples before ``start`` (none may be read again)."""
        if self.start:
            del self.stamps[:self.start], self.translations[:self.start], self.rotations[:self.start]
            self.start = 0
            self._arrays = None


Links = dict[str, Link]
Spans = tuple[tuple[int, int], ...]
"""Per link of a :data:`Links` (in its order): the samples ``[start, end)`` a lookup may read."""
# Shared by the lookups of one view and times: ("link" | "root", frame) -> poses.
Memo = dict[tuple[str, str], Any]
# (root frame, R, t, ok): a frame's pose in its tree's root; R, t and ok are None for the root itself.
_RootPose = tuple[str, None, None, None] | tuple[str, np.ndarray, np.ndarray, np.ndarray]

# One transform as (parent, child, translation m, rotation xyzw), and messages grouped by stamp (s).
TfTransform = tuple[str, str, tuple[float, float, float], tuple[float, float, float, float]]
TfSample = list[tuple[float, list[TfTransform]]]

_MISS = object()
_COMPACT_ABOVE = 256     # samples trimmed from a link before its lists are shortened


@dataclass
class Lookup:
    """Poses of one frame in another at many times: rotations ``R[n, 3, 3]``,
    translations ``t[n, 3]`` (m), and ``ok[n]`` (False: unknown — a link on
    the way has no sample near that time, or the frames are not connected;
    ``R`` and ``t`` are then meaningless)."""

    R: np.ndarray
    t: np.ndarray
    ok: np.ndarray


def _upright(S: Lookup, shape: Shape | None, surface: SupportSurface) -> Lookup:
    """A support's poses turned, each, to the look-alike orientation (its
    shape's turns onto itself) whose z axis points most nearly up: its top
    face is the face facing up, whichever of its equal faces a detector's
    pose called the top (a pose flip), or the support has toppled onto.
    Only where the top face sits as high above the frame as the bottom
    below it (the shape's half-height): otherwise top and bottom differ and
    the pose is taken as given."""
    if shape is None or shape.kind not in ('box', 'cylinder') or \
            not math.isclose(surface.top_z_m, shape.half_extent_z(), abs_tol=1e-9) or not len(S.R):
        return S
    turns = turns_onto_itself(shape)
    if len(turns) == 1:
        return S
    # World z of each turned z axis: (R @ T)[2, 2] = R[2, :] @ T[:, 2]; the identity wins a tie.
    best = np.argmax(S.R[:, 2, :] @ turns[:, :, 2].T - 1e-12 * np.arange(len(turns)), axis=1)
    if not best.any():
        return S
    return Lookup(S.R @ turns[best], S.t, S.ok)


def _gross(kept_p: list[tuple[float, ...]], start: int, gate_m: float) -> bool:
    """Whether the newest of the positions ``kept_p[start:]`` lies farther
    than ``gate_m`` from the per-axis median of their detections (a run of
    equal positions, one held over frames, counts once; fewer than three:
    never)."""
    window = kept_p[start:]
    distinct = [q for i, q in enumerate(window) if i == 0 or q != window[i - 1]]
    if len(distinct) < 3:
        return False
    return math.dist(window[-1], [statistics.median(axis) for axis in zip(*distinct)]) > gate_m


def are_poses(v: np.ndarray) -> np.ndarray:
    """Which rows ``v[n, 7]`` (translation, quaternion xyzw) are poses: every
    component finite and the rotation of non-zero norm (what
    :meth:`TransformTree.set_transform` takes)."""
    q = v[:, 3:]
    out: np.ndarray = np.isfinite(v).all(axis=1) & (np.sqrt(q[:, 0] * q[:, 0] + q[:, 1] * q[:, 1]
                                                            + q[:, 2] * q[:, 2] + q[:, 3] * q[:, 3]) > 0)
    return out


def first_kept(stamps: np.ndarray, end: np.ndarray, buffer_s: float) -> np.ndarray:
    """The tree's buffer over a link's samples ``stamps`` (in order) fed up to
    each ``end``: the first sample it keeps, the first within ``buffer_s``
    of the newest (the exact float comparison the tree makes as it trims
    one sample at a time, not a rearranged one)."""
    newest = stamps[np.maximum(end - 1, 0)]
    i = np.minimum(np.searchsorted(stamps, newest - buffer_s, 'left'), np.maximum(end - 1, 0))
    while True:
        back = (i > 0) & (newest - stamps[np.maximum(i - 1, 0)] <= buffer_s)
        if not back.any():
            break
        i = np.where(back, i - 1, i)
    while True:
        ahead = newest - stamps[i] > buffer_s
        if not ahead.any():
            break
        i = np.where(ahead, i + 1, i)
    out: np.ndarray = np.where(end > 0, i, 0)
    return out


class TransformTree:
    """Frames linked child → parent; ``buffer_s`` of history per dynamic link.

    A lookup reads the tree as it was when its time was *viewed*
    (:meth:`view`): the offline audit views each frame as the messages
    before it have been fed and looks all of a rollout's frames up at once
    (:meth:`lookup_many`); live, a frame is viewed and looked up at once.
    Both go through the same arithmetic (:mod:`.poses`), so a pose does not
    depend on how many were computed together.  Changing which links exist
    or forgetting history starts a new set of links (views of the old one
    stay valid)."""

    def __init__(self, buffer_s: float = 10.0, tolerance_s: float = 0.05,
                 link_tolerance_s: Mapping[str, float] | None = None) -> None:
        """``link_tolerance_s``: child frame → its own tolerance (a detector's
        objects, published slower and later than the robot's links)."""
        self.links: Links = {}
        self.buffer_s = buffer_s
        self.tolerance_s = tolerance_s
        self.link_tolerance_s = dict(link_tolerance_s or {})

    def set_transform(self, parent: str, child: str, stamp_s: float, translation: Sequence[float],
                      rotation_xyzw: Sequence[float], static: bool = False) -> bool:
        """Add one transform; returns False for an out-of-order dynamic sample
        or one that is not a pose (:func:`are_poses`)."""
        tx, ty, tz = translation
        qx, qy, qz, qw = rotation_xyzw
        t = (float(tx), float(ty), float(tz))
        q = (float(qx), float(qy), float(qz), float(qw))
        if not all(map(math.isfinite, t + q)) or not math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw) > 0:
            return False        # are_poses, for one
        link = self.links.get(child)
        if link is None or link.parent != parent or link.static != static:
            link = Link(parent, static)
            self.links = {**self.links, child: link}      # a new set: views of the old one keep theirs
        if static:
            link.stamps.append(stamp_s)
            link.translations.append(t)
            link.rotations.append(q)
            link.start = len(link.stamps) - 1
            if link.start > _COMPACT_ABOVE:
                link.compact()
            return True
        stamps = link.stamps
        if len(stamps) > link.start and stamp_s < stamps[-1]:
            return False
        stamps.append(stamp_s)
        link.translations.append(t)
        link.rotations.append(q)
        while stamps[-1] - stamps[link.start] > self.buffer_s:      # first_kept, one sample on
            link.start += 1
        return True

    def clear(self) -> None:
        self.links = {}

    def clear_dynamic(self) -> None:
        """Forget every dynamic sample (static links stay)."""
        self.links = {child: (link if link.static else Link(link.parent, False))
                      for child, link in self.links.items()}

    def view(self) -> tuple[Links, Spans]:
        """The tree as it is now, for :meth:`lookup_many`."""
        return self.links, tuple((link.start, len(link.stamps)) for link in self.links.values())

    def compact(self) -> None:
        """Shorten the links' lists (call when no earlier view is still to be looked up)."""
        for link in self.links.values():
            if link.start > _COMPACT_ABOVE:
                link.compact()

    def lookup(self, target: str, source: str, time_s: float) -> np.ndarray | None:
        """4x4 pose of ``source`` in ``target`` at ``time_s``, or None."""
        links, spans = self.view()
        res = self.lookup_many(target, source, np.array([time_s]), links, np.array([spans]).reshape(1, -1, 2))
        return poses.to_matrix(res.R[0], res.t[0]) if res.ok[0] else None

    def pose_of(self, target: str, source: str, time_s: float
                ) -> tuple[tuple[float, float, float], tuple[float, float, float, float]] | None:
        """:meth:`lookup` as (translation m, rotation xyzw), or None."""
        T = self.lookup(target, source, time_s)
        if T is None:
            return None
        from scipy.spatial.transform import Rotation
        x, y, z = (float(v) for v in T[:3, 3])
        qx, qy, qz, qw = (float(v) for v in Rotation.from_matrix(T[:3, :3]).as_quat())
        return (x, y, z), (qx, qy, qz, qw)

    def lookup_many(self, target: str, source: str, times_s: np.ndarray, links: Links,
                    spans: np.ndarray, memo: Memo | None = None) -> Lookup:
        """Pose of ``source`` in ``target`` at each of ``times_s`` [n], each
        time read in the view of ``links`` whose spans are ``spans[k]``
        ([n, len(links), 2], from :meth:`view`).  ``memo``: a dict shared by
        the lookups of the same times and view (each link's poses and each
        chain computed once)."""
        return self.lookup_rows(target, [source], times_s, links, spans, memo)

    def lookup_rows(self, target: str, sources: Sequence[str], times_s: np.ndarray, links: Links,
                    spans: np.ndarray, memo: Memo | None = None) -> Lookup:
        """:meth:`lookup_many` for several sources at once: rows ``j * n + k``
        hold source ``j`` at time ``k`` (one array pass for all sources)."""
        n, m = len(times_s), len(sources)
        memo = {} if memo is None else memo
        self.prefetch([target, *sources], times_s, links, spans, memo)
        a = self._to_root(target, links, memo)
        Rb: np.ndarray = np.zeros((m, n, 3, 3))
        tb: np.ndarray = np.zeros((m, n, 3))
        okb: np.ndarray = np.zeros((m, n), bool)
        b_root = np.zeros(m, bool)
        for j, source in enumerate(sources):
            b = self._to_root(source, links, memo)
            if a is None or b is None or a[0] != b[0]:
                continue
            if b[1] is None:
                Rb[j], okb[j], b_root[j] = np.eye(3), True, True
            else:
                Rb[j], tb[j], okb[j] = b[1], b[2], b[3]
        Rb, tb, okb = Rb.reshape(m * n, 3, 3), tb.reshape(m * n, 3), okb.reshape(m * n)
        if a is None:
            return Lookup(Rb, tb, np.zeros(m * n, bool))
        if a[1] is None:
            return Lookup(Rb, tb, okb)       # the target is the root: no inverse to apply
        Ri, ti = poses.invert(a[1], a[2])
        if m > 1:
            Ri, ti, oka = np.concatenate([Ri] * m), np.concatenate([ti] * m), np.concatenate([a[3]] * m)
        else:
            oka = a[3]
        R, t = poses.compose(Ri, ti, Rb, tb)
        at_root = np.repeat(b_root, n)
        if at_root.any():       # a source that is the root itself: the target's inverse
            R, t = np.where(at_root[:, None, None], Ri, R), np.where(at_root[:, None], ti, t)
        return Lookup(R, t, oka & okb)

    def prefetch(self, frames: Sequence[str], times_s: np.ndarray, links: Links, spans: np.ndarray,
                 memo: Memo) -> None:
        """Compute, in one pass over arrays, the poses of every link on the
        chains of ``frames`` not yet in ``memo`` (for :meth:`lookup_many`):
        a frame's few links interpolated together, not one call each."""
        order = {child: i for i, child in enumerate(links)}
        wanted: list[str] = []
        for frame in frames:
            seen: set[str] = set()
            while frame in links and frame not in seen:
                seen.add(frame)
                if ('link', frame) not in memo and frame not in wanted:
                    wanted.append(frame)
                frame = links[frame].parent
        if not wanted:
            return
        n = len(times_s)
        tol = self.link_tolerance_s
        rows = [self._link_rows(links[c], times_s, spans[:, order[c], 0], spans[:, order[c], 1],
                                tol.get(c, self.tolerance_s)) for c in wanted]
        R, t, ok = _pose_between(np.concatenate([times_s] * len(rows)), *_stack_rows(rows))
        for j, child in enumerate(wanted):
            part = slice(j * n, (j + 1) * n)
            memo[('link', child)] = (R[part], t[part], ok[part])

    def _to_root(self, frame: str, links: Links, memo: Memo) -> _RootPose | None:
        """(root frame, R, t, ok): the pose of ``frame`` in its root at each
        time (R and t None when ``frame`` is the root), or None when the
        chain has a cycle; from the link poses :meth:`prefetch` put in ``memo``."""
        hit = memo.get(('root', frame), _MISS)
        if hit is not _MISS:
            cached: _RootPose | None = hit
            return cached
        start = frame
        R: np.ndarray | None = None
        t: np.ndarray | None = None
        ok: np.ndarray | None = None
        seen = set()
        result: _RootPose | None = None
        while frame in links:
            if frame in seen:
                break    # a cycle in the tree
            seen.add(frame)
            Rl, tl, okl = memo[('link', frame)]
            if R is None or t is None:
                R, t, ok = Rl, tl, okl
            else:
                R, t = poses.compose(Rl, tl, R, t)
                ok = ok & okl
            frame = links[frame].parent
        else:
            result = (frame, None, None, None) if R is None or t is None or ok is None else (frame, R, t, ok)
        memo[('root', start)] = result
        return result

    def _link_rows(self, link: Link, times_s: np.ndarray, start: np.ndarray, end: np.ndarray,
                   tol: float) -> _Sample | tuple[np.ndarray, ...]:
        """Which of a link's samples ``[start, end)`` give its pose at each
        time, as :func:`_pose_between` takes them: the sample itself at or
        before the first stamp and at or after the newest, the two around
        the time otherwise (interpolated: linear translation, spherical
        rotation); unknown more than ``tolerance_s`` outside them or with
        no sample."""
        n = len(times_s)
        if n == 1 and not link.has_arrays():
            # Live: find the two samples with bisect and copy only those.
            tm, s, e = float(times_s[0]), int(start[0]), int(end[0])
            if e <= s:
                return _NO_SAMPLE
            st = link.stamps
            if link.static:
                r0 = r1 = e - 1
                ok = True
            else:
                ok = st[s] - tol <= tm <= st[e - 1] + tol
                i = bisect.bisect_left(st, tm, s, e)
                r0, r1 = (s, s) if i == s else (e - 1, e - 1) if i >= e else (i - 1, i)
            return _Sample(st[r0], st[r1], link.translations[r0], link.translations[r1], link.rotations[r0],
                           link.rotations[r1], r0 != r1, ok)
        stamps, trans, rots = link.arrays()
        if not len(stamps):
            return (np.zeros(n), np.zeros(n), np.zeros((2, n, 3)), np.tile(_UNIT_Q, (2, n, 1)), np.zeros(n, bool),
                    np.zeros(n, bool))
        nonempty = end > start
        last_row = np.maximum(end - 1, 0)
        if link.static:
            rows0 = rows1 = last_row
            known = nonempty
        else:
            first_row = np.minimum(start, len(stamps) - 1)
            known = nonempty & (stamps[first_row] - tol <= times_s) & (times_s <= stamps[last_row] + tol)
            at = np.clip(np.searchsorted(stamps, times_s, 'left'), start, end)
            at_first, at_last = at == start, at >= end
            rows0 = np.where(at_first, first_row, np.where(at_last, last_row, at - 1))
            rows1 = np.where(at_first, first_row, np.where(at_last, last_row, at))
        return (stamps[rows0], stamps[rows1], np.stack([trans[rows0], trans[rows1]]),
                np.stack([rots[rows0], rots[rows1]]), rows0 != rows1, known)


_UNIT_Q = np.array([0.0, 0.0, 0.0, 1.0])


class _Sample(tuple[Any, ...]):
    """One time's rows of one link, as Python values (live lookups: arrays
    are built once for all of a frame's links, :func:`_stack_rows`)."""

    def __new__(cls, t0: float, t1: float, tr0: Sequence[float], tr1: Sequence[float], q0: Sequence[float],
                q1: Sequence[float], between: bool, ok: bool) -> '_Sample':
        return super().__new__(cls, (t0, t1, tr0, tr1, q0, q1, between, ok))


_NO_SAMPLE = _Sample(0.0, 0.0, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0),
                     False, False)


def _stack_rows(rows: list[Any]) -> tuple[np.ndarray, ...]:
    """Rows of several links (:meth:`TransformTree._link_rows`) as the
    arrays :func:`_pose_between` takes, link after link."""
    if all(isinstance(r, _Sample) for r in rows):
        t0, t1, tr0, tr1, q0, q1, between, ok = zip(*rows)
        return (np.array(t0, dtype=float), np.array(t1, dtype=float), np.array([tr0, tr1], dtype=float),
                np.array([q0, q1], dtype=float), np.array(between, dtype=bool), np.array(ok, dtype=bool))
    arrays = [_stack_rows([r]) if isinstance(r, _Sample) else r for r in rows]
    return tuple(np.concatenate(x, axis=1 if i in (2, 3) else 0) for i, x in enumerate(zip(*arrays)))


def _pose_between(times_s: np.ndarray, t0: np.ndarray, t1: np.ndarray, trans: np.ndarray, rots: np.ndarray,
                  between: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(R, t, ok) of a link at ``times_s`` from the samples around each time
    (stamps ``t0``/``t1``, ``trans[0|1]``, ``rots[0|1]``): the first sample
    where not ``between``, else interpolated at the time's fraction of the
    way from one to the other."""
    span = t1 - t0
    a = np.divide(times_s - t0, span, out=np.zeros_like(span), where=between & (span != 0))
    a_ = a[:, None]
    translation = np.where(between[:, None], (1 - a_) * trans[0] + a_ * trans[1], trans[0])
    rotation = poses.slerp(rots[0], rots[1], a) if between.any() else rots[0]
    rotation = np.where(between[:, None], rotation, rots[0])
    return poses.quat_to_rot(rotation), translation, ok


@dataclass
class TfConfig:
    world_frame: str
    gripper_frame: str
    objects: dict[str, str] = field(default_factory=dict)            # object entity → frame
    supports: dict[str, SupportSurface] = field(default_factory=dict)  # support entity → its top face
    near: dict[str, tuple[str, str, float]] = field(default_factory=dict)    # name → (frame a, frame b, m)
    inside: dict[str, tuple[str, str, tuple[float, float, float], tuple[float, float, float]]] = \
        field(default_factory=dict)                                   # name → (frame, box frame, min, max)
    # What counts as moving and as slipped: the tracker's defaults (tracking.MotionLimits).
    stable_linear_m_s: float = MotionLimits.stable_linear_m_s
    stable_angular_rad_s: float = MotionLimits.stable_angular_rad_s
    sliding_m_s: float = MotionLimits.sliding_m_s      # object_sliding: horizontal speed (drags slower than the stability bound)
    slip_m: float = MotionLimits.slip_m
    slip_rad: float = MotionLimits.slip_rad
    support_gap_m: float = 0.02
    gripper_clearance_m: float = 0.01
    approach_m: float = 0.05
    pick_clear_m: float = 0.01        # pick: no other object this close (SafeManip's clutter distance)
    place_clear_m: float = 0.03       # place: the footprint margin foreign objects are counted in
    place_max_foreign: int = 1        # place: at most this many foreign objects in it
    staleness_s: float = 0.2
    shapes: dict[str, Shape] = field(default_factory=dict)           # object entity → shape (default: point)
    support_shapes: dict[str, Shape] = field(default_factory=dict)   # support entity → shape (its turns: _upright)
    interiors: dict[str, tuple[str, tuple[float, float, float], tuple[float, float, float]]] = \
        field(default_factory=dict)           # fixture → (frame, min, max): its interior volume
    track: TrackConfig = field(default_factory=TrackConfig)          # how object detections are read
    pick_approach: bool = True        # False: a skill source says when a pick starts (grounding/skills.py)


SUPPORT_QUANTILE = 1.96
"""Standard errors of an object's estimated height added to the support
tolerance (95 %, one-sided 97.5 %): wider reads a hovering object as set
down — and a grasped one moving just above the table as dragged."""

# An object's grasp state per frame, as :meth:`TfGrounding.evaluate_frames` takes it
# (absent: no grasp input for the object, as opposed to an unknown state).
GRASP_TRUE, GRASP_FALSE, GRASP_UNKNOWN, GRASP_ABSENT = 1, 0, -1, -2


@dataclass
class _PendingFrame:
    """A frame viewed, not yet evaluated."""

    now_s: float
    fresh: bool
    epoch: int                              # the grounding's reset count when it was viewed
    grasped: tuple[int, ...]                # per object (sorted): its GRASP_* code
    links: Links
    spans: Spans
    target: int = -1                        # the object a pick skill names (index; -1: none)


class TfGrounding:
    """TF predicates of the configured entities (see the module docstring).

    A frame is first *viewed* (:meth:`view`: the tree, freshness and grasp
    state as they are at its time), then evaluated with every other viewed
    frame at once (:meth:`flush`): the offline audit views each frame of an
    rollout as the messages before it have been fed and evaluates them
    together over arrays; live, :meth:`evaluate` views and flushes one.
    The state carried from frame to frame (previous poses, the slip
    reference of a grasp, the previous gripper distance) is the same either
    way."""

    def __init__(self, config: TfConfig, tree: TransformTree | None = None) -> None:
        self.config = config
        # A frame is built from the newest pose within the staleness limit (sample-and-hold, as
        # every other source), not only within the 50 ms interpolation tolerance.
        # An entity's pose may come from a detector: held up to its own staleness limit.
        tol = max(0.05, config.staleness_s)
        support_frames = {s.frame for s in config.supports.values()}
        self.tree = tree or TransformTree(tolerance_s=tol, link_tolerance_s={
            **{f: max(tol, config.track.support_staleness_s) for f in support_frames},
            **{f: max(tol, config.track.staleness_s) for f in config.objects.values()}})
        self.freshness = Freshness(config.staleness_s, interleaved=True)
        self._objects = sorted(config.objects)
        # Every frame a lookup starts from (their chains' links are interpolated together).
        self._tf_frames = sorted({config.world_frame, config.gripper_frame, *config.objects.values(),
                               *(s.frame for s in config.supports.values()),
                               *(f for a, b, _ in config.near.values() for f in (a, b)),
                               *(f for frame, box, _, _ in config.inside.values() for f in (frame, box)),
                               *(box for box, _, _ in config.interiors.values())})
        # Carried between flushes (and between frames within one).
        self._tracks: dict[str, ObjectTrack] = {}           # object → its detections and grasp state
        self._seen: dict[str, tuple[int, float]] = {}       # object → (reset count, newest detection taken)
        self._prev_gripper: tuple[float, np.ndarray, np.ndarray] | None = None    # (time s, R, t) in the world
        self._prev_distance: dict[str, float] = {}
        # Support → its recent times (s), positions in the world and which were left out as gross outliers,
        # over the track's window (_support_track).
        self._support_seen: dict[str, tuple[list[float], list[tuple[float, ...]], list[bool]]] = {}
        self._epoch = 0               # resets of the input stream so far
        self._state_epoch = 0         # the reset the carried state belongs to
        self._pending: list[_PendingFrame] = []
        objs = self._objects
        self.names = ([f'near_{n}' for n in sorted(config.near)] + [f'inside_{n}' for n in sorted(config.inside)]
                      + [f'object_{k}_{o}' for k in ('stable', 'sync', 'supported', 'settled', 'sliding') for o in objs]
                      + [f'gripper_approaching_{o}' for o in objs] + (['pick_approach'] if objs and config.pick_approach else [])
                      + (['preconditions_satisfied_pick'] if objs else [])
                      + [f'preconditions_satisfied_place_{o}' for o in objs]
                      + [f'{k}_{f}' for f in sorted(config.interiors) for k in ('reach_in', 'object_reach_in')])

    @property
    def health(self) -> InputHealth:
        return self.freshness.health

    def update(self, stamp_s: float, transforms: Sequence[tuple[str, str, Sequence[float], Sequence[float]]],
               static: bool = False) -> None:
        """A TFMessage: (parent, child, translation, rotation xyzw) per transform."""
        if not static:
            if not self.freshness.accept(stamp_s):       # interleaved: each link checks its own order
                return
            if self.freshness.reset_needed:
                self.tree.clear_dynamic()
                self._epoch += 1          # frames from here on start without previous poses or grasp references
                self.freshness.reset_needed = False
        for parent, child, trans, rot in transforms:
            if not self.tree.set_transform(parent, child, stamp_s, trans, rot, static=static):
                self.health.nan_values += 1

    def evaluate(self, now_s: float, grasped: Mapping[str, bool | None] | None = None,
                 pick_target: str | None = None) -> Predicates:
        """Predicate values for the frame at ``now_s`` (seconds), given each
        object's grasp state (missing: no grasp input) and the object a
        running pick skill names, if any."""
        self.view(now_s, grasped, pick_target)
        return self.flush()[-1]

    def view(self, now_s: float, grasped: Mapping[str, bool | None] | None = None,
             pick_target: str | None = None) -> None:
        """Take the frame at ``now_s`` as the inputs are now; :meth:`flush`
        evaluates it.  ``pick_target``: the object a running pick skill names
        (the pick precondition is then judged on it, not on the object
        nearest the gripper)."""
        grasped = grasped or {}
        links, spans = self.tree.view()
        target = self._objects.index(pick_target) if pick_target in self._objects else -1
        self._pending.append(_PendingFrame(now_s, self.freshness.fresh(now_s), self._epoch,
                                           tuple(_grasp_code(grasped, o) for o in self._objects), links, spans,
                                           target))

    def flush(self) -> list[Predicates]:
        """The predicates of every frame viewed since the last flush, in order."""
        frames, self._pending = self._pending, []
        out: list[Predicates] = [all_unknown(self.names) if not f.fresh else {} for f in frames]
        live = [f for f in frames if f.fresh]
        if live:
            for pos, values in zip([k for k, f in enumerate(frames) if f.fresh], self._evaluate(live)):
                out[pos] = values
        self.tree.compact()
        return out

    def _evaluate(self, frames: list[_PendingFrame]) -> list[Predicates]:
        # Frames viewed on the same set of links are looked up together.
        groups: dict[int, tuple[Links, list[int]]] = {}
        for k, f in enumerate(frames):
            groups.setdefault(id(f.links), (f.links, []))[1].append(k)
        cols = self.evaluate_frames(
            np.array([f.now_s for f in frames]), [f.epoch for f in frames],
            np.array([f.grasped for f in frames], np.int8).reshape(len(frames), len(self._objects)).T,
            [(links, np.array(rows), np.array([frames[k].spans for k in rows], dtype=np.int64).reshape(
                len(rows), len(links), 2)) for links, rows in groups.values()],
            targets=np.array([f.target for f in frames], np.int64))
        names = list(cols)
        if not names:
            return [{} for _ in frames]
        value = np.array([v for v, _ in cols.values()]).T.tolist()      # [frames][names], in two calls
        known = np.array([k for _, k in cols.values()]).T.tolist()
        return [{name: (bool(v) if k else None) for name, v, k in zip(names, vs, ks)}
                for vs, ks in zip(value, known)]

    def evaluate_frames(self, times: np.ndarray, epochs: list[int], grasped: np.ndarray | list[np.ndarray],
                        groups: list[tuple[Links, np.ndarray, np.ndarray]],
                        targets: np.ndarray | None = None) -> dict[str, Column]:
        """The predicates of fresh frames at ``times`` [n] (seconds, in
        order), as one column per name: each frame's reset count, each
        object's grasp state per frame (int8 ``[objects, n]``:
        :data:`GRASP_TRUE`, :data:`GRASP_FALSE`, :data:`GRASP_UNKNOWN` or
        :data:`GRASP_ABSENT`), and the frames in ``groups`` of (links, frame
        rows, spans ``[rows, links, 2]``) the tree is read in.  Carries the
        state between frames on to the next call.  ``targets`` [n]: per
        frame, the index of the object a pick skill names (-1 or None: the
        pick precondition is judged on the object nearest the gripper)."""
        cfg = self.config
        n = len(times)
        memo: dict[tuple[str, tuple[str, ...]], Lookup] = {}
        chains: list[Memo] = [{} for _ in groups]         # per group: its links' poses and chains
        for (links, rows, spans), chain in zip(groups, chains):
            self.tree.prefetch(self._tf_frames, times[rows], links, spans, chain)

        def lookup_rows(target: str, sources: tuple[str, ...]) -> Lookup:
            """Each of ``sources`` in ``target``: rows ``j * n + k`` (source j, frame k)."""
            hit = memo.get((target, sources))
            if hit is None:
                if len(groups) == 1 and len(groups[0][1]) == n:
                    links, rows, spans = groups[0]
                    hit = self.tree.lookup_rows(target, sources, times, links, spans, chains[0])
                else:
                    m = len(sources)
                    R, t, ok = np.zeros((m * n, 3, 3)), np.zeros((m * n, 3)), np.zeros(m * n, dtype=bool)
                    for (links, rows, spans), chain in zip(groups, chains):
                        res = self.tree.lookup_rows(target, sources, times[rows], links, spans, chain)
                        at = (np.arange(m)[:, None] * n + rows[None, :]).ravel()
                        R[at], t[at], ok[at] = res.R, res.t, res.ok
                    hit = Lookup(R, t, ok)
                memo[(target, sources)] = hit
            return hit

        def lookup(target: str, source: str) -> Lookup:
            return lookup_rows(target, (source,))

        objs = self._objects
        m = len(objs)
        codes = np.array(grasped, np.int8).reshape(m, n)      # [objects, frames]
        # Each object's grasp state as a column (no grasp input reads as unknown).
        held, held_known = codes == GRASP_TRUE, codes >= GRASP_FALSE
        cols: dict[str, Column] = {}
        fused: dict[str, tuple[np.ndarray, np.ndarray]] = {}     # object frame → (positions [n, 3], known [n])
        if objs:
            per_object, cols['preconditions_satisfied_pick'] = self._objects_frames(
                times, epochs, codes, groups, lookup, np.full(n, -1) if targets is None else targets)
            for j, obj in enumerate(objs):
                position = per_object[j].pop('position')
                fused[cfg.objects[obj]] = position
                for kind, (v, k) in per_object[j].items():
                    cols[f'{kind}_{obj}'] = v, k
            approaching = (np.concatenate([per_object[j]['gripper_approaching'][0] for j in range(m)]),
                           np.concatenate([per_object[j]['gripper_approaching'][1] for j in range(m)]))

        def origin_in(target: str, frame: str) -> tuple[np.ndarray, np.ndarray]:
            """``frame``'s origin in ``target`` per frame [n, 3] and known [n]: an object's from its
            track (a detector's pose read as a measurement), any other frame's from TF."""
            if frame not in fused:
                T = lookup(target, frame)
                return T.t, T.ok
            p, ok = fused[frame]
            W = lookup(target, cfg.world_frame)
            return poses.mat_vec(W.R, p) + W.t, ok & W.ok

        for name, (a, b, dist) in sorted(cfg.near.items()):
            pa, ka = origin_in(cfg.world_frame, a)
            pb, kb = origin_in(cfg.world_frame, b)
            known_ab = ka & kb
            cols[f'near_{name}'] = (poses.norm3(pa - pb) < dist) & known_ab, known_ab
        for name, (frame, box, lo, hi) in sorted(cfg.inside.items()):
            cols[f'inside_{name}'] = self._inside(*origin_in(box, frame), lo, hi)
        for fixture, (box, lo, hi) in sorted(cfg.interiors.items()):
            gripper_in_box = lookup(box, cfg.gripper_frame)
            cols[f'reach_in_{fixture}'] = self._inside(gripper_in_box.t, gripper_in_box.ok, lo, hi)
            # Some object held and inside (Kleene: unknown unless some is, or every one is known not to be).
            if objs:
                at = [origin_in(box, cfg.objects[o]) for o in objs]
                inside, inside_known = (c.reshape(m, n) for c in self._inside(
                    np.concatenate([p for p, _ in at]), np.concatenate([k for _, k in at]), lo, hi))
                both, both_known = kleene_and((held, held_known), (inside, inside_known))
                reach = np.asarray(both.any(axis=0))
                cols[f'object_reach_in_{fixture}'] = reach, reach | both_known.all(axis=0)
            else:
                cols[f'object_reach_in_{fixture}'] = np.zeros(n, bool), np.ones(n, bool)
        if objs and cfg.pick_approach:
            # Some object approached while nothing is held: true; every approach known false, or
            # something held: false; else unknown.
            near, near_known = approaching[0].reshape(m, n), approaching[1].reshape(m, n)
            pick = near.any(axis=0) & (held_known & ~held).all(axis=0)
            cols['pick_approach'] = pick, pick | (near_known & ~near).all(axis=0) | held.any(axis=0)
        self._state_epoch = epochs[-1]
        return cols

    def _measurements(self, times: np.ndarray, epochs: list[int],
                      groups: list[tuple[Links, np.ndarray, np.ndarray]]) -> list[list[list[Measurement]]]:
        """Per object, per frame: the detections first visible in that
        frame's view (samples of the object frame's own dynamic link; one
        per frame at its time for an object without one), each with the
        object's pose in the world and in the gripper at its stamp."""
        cfg = self.config
        n, objs = len(times), self._objects
        where = np.zeros((n, 2), np.int64)          # frame → (group, row in it)
        for g, (_, rows, _) in enumerate(groups):
            where[rows, 0], where[rows, 1] = g, np.arange(len(rows))
        times_l, where_l = times.tolist(), where.tolist()
        out: list[list[list[Measurement]]] = [[[] for _ in range(n)] for _ in objs]
        # Per group: (object, frame, stamp, row in the group) of each detection, every object's together: the
        # gripper's pose at a stamp is looked up once for all of them.
        asks: list[list[tuple[int, int, float, int]]] = [[] for _ in groups]
        for j, obj in enumerate(objs):
            frame = cfg.objects[obj]
            epoch, last = self._seen.get(obj, (epochs[0], -math.inf))
            place = [(list(links).index(frame) if frame in links and not links[frame].static else -1)
                     for links, _, _ in groups]
            for k in range(n):
                if epochs[k] != epoch:
                    epoch, last = epochs[k], -math.inf
                g, r = where_l[k]
                at = place[g]
                if at < 0:
                    new = [times_l[k]] if times_l[k] > last else []
                else:
                    stamps = groups[g][0][frame].stamps
                    s, e = (int(x) for x in groups[g][2][r, at])
                    new = stamps[bisect.bisect_right(stamps, last, s, e):e] if e > s else []
                for stamp in new:
                    asks[g].append((j, k, stamp, r))
                if new:
                    last = new[-1]
            self._seen[obj] = (epoch, last)
        for g, ask in enumerate(asks):
            if not ask:
                continue
            links, _, spans = groups[g]
            js, ks, ts, rs = zip(*ask)
            present = sorted(set(js))
            sources = tuple(cfg.objects[objs[j]] for j in present) + (cfg.gripper_frame,)
            # Objects detected together share a stamp (one camera image): each (stamp, view) looked up once.
            moments = list(dict.fromkeys(zip(ts, rs)))
            u = len(moments)
            place_of = {m: i for i, m in enumerate(moments)}
            res = self.tree.lookup_rows(cfg.world_frame, sources, np.array([m[0] for m in moments], dtype=float),
                                        links, spans[[m[1] for m in moments]], {})
            grip = len(present) * u
            Ri, ti = poses.invert(res.R[grip:], res.t[grip:])
            # Each detection's own rows: its object's (place among the sources) * u + its moment; the gripper's.
            moment = np.array([place_of[m] for m in zip(ts, rs)])
            own = np.array([present.index(j) for j in js]) * u + moment
            Rrel, trel = poses.compose(Ri[moment], ti[moment], res.R[own], res.t[own])
            ok_o, ok_g = res.ok[own].tolist(), res.ok[grip + moment].tolist()
            for x in range(len(ts)):
                if ok_o[x]:
                    row = int(own[x])
                    out[js[x]][ks[x]].append(Measurement(ts[x], res.t[row], res.R[row], trel[x], Rrel[x], ok_g[x]))
        return out

    def _objects_frames(self, times: np.ndarray, epochs: list[int], codes: np.ndarray,
                        groups: list[tuple[Links, np.ndarray, np.ndarray]],
                        lookup: Callable[[str, str], Lookup], targets: np.ndarray
                        ) -> tuple[list[dict[str, Column]], Column]:
        """Per object: its stable, sliding, sync, supported, settled,
        gripper_approaching and place-precondition columns over the frames
        (:mod:`.tracking`, :mod:`.preconditions`), given the grasp state
        codes ``[objects, frames]``, and under ``'position'`` its estimated
        position in the world ([n, 3], known [n]); and the pick-precondition
        column."""
        cfg = self.config
        n, objs = len(times), self._objects
        meas = self._measurements(times, epochs, groups)
        Gw = lookup(cfg.world_frame, cfg.gripper_frame)
        supports = sorted(cfg.supports.items())
        sup_w = [_upright(lookup(cfg.world_frame, surface.frame), cfg.support_shapes.get(sup), surface)
                 for sup, surface in supports]
        newest_links = groups[-1][0] if groups else {}
        sup_noise = [cfg.track.position_noise_m if surface.frame in newest_links
                     and not newest_links[surface.frame].static else 0.0 for _, surface in supports]
        # Positions of their own: a gross outlier is replaced below (_support_track).
        sup_w = [Lookup(S.R, S.t.copy(), S.ok) for S in sup_w]
        sup_still = np.full((len(supports), n), UNKNOWN, np.int8)
        shapes = [cfg.shapes.get(o, Shape()) for o in objs]
        kinds = ('object_stable', 'object_sliding', 'object_sync', 'object_supported', 'object_settled',
                 'gripper_approaching', 'preconditions_satisfied_place')
        vals = {kind: np.zeros((len(objs), n), bool) for kind in kinds}
        known = {kind: np.zeros((len(objs), n), bool) for kind in kinds}
        position, position_known = np.zeros((len(objs), n, 3)), np.zeros((len(objs), n), bool)
        rotation = np.tile(np.eye(3), (len(objs), n, 1, 1))
        pick, pick_known = np.zeros(n, bool), np.zeros(n, bool)
        gaps = np.full((len(objs), len(supports), n), np.nan)      # each object's gap above each support
        below = np.zeros((len(objs), len(supports), n))             # how far into each it may still rest on it
        limits = MotionLimits(cfg.stable_linear_m_s, cfg.stable_angular_rad_s, cfg.sliding_m_s, cfg.slip_m,
                              cfg.slip_rad)
        times_l, g_ok = times.tolist(), Gw.ok.tolist()
        # Runs of frames of one reset count: a reset forgets every track and previous pose.
        bounds = [0] + [k for k in range(1, n) if epochs[k] != epochs[k - 1]] + [n]
        for a, b in zip(bounds[:-1], bounds[1:]):
            if epochs[a] != self._state_epoch:
                self._state_epoch = epochs[a]
                self._tracks, self._prev_gripper, self._prev_distance, self._support_seen = {}, None, {}, {}
            motion = self._gripper_motion(times_l[a:b], Gw.R[a:b], Gw.t[a:b], g_ok[a:b])
            for s, ((sup, _), S, noise_m) in enumerate(zip(supports, sup_w, sup_noise)):
                S.t[a:b], sup_still[s, a:b] = self._support_track(sup, times[a:b], S.t[a:b], S.ok[a:b], noise_m)
            for j, obj in enumerate(objs):
                track = self._tracks.get(obj)
                if track is None:
                    track = self._tracks[obj] = ObjectTrack(cfg.track, limits, shapes[j])
                left_out, flipped = track.gross_outliers, track.orientation_flips
                est = track.run(times_l[a:b], codes[j, a:b].tolist(), meas[j][a:b], Gw.R[a:b], Gw.t[a:b],
                                g_ok[a:b], motion)
                self.freshness.health.gross_outliers += track.gross_outliers - left_out
                self.freshness.health.orientation_flips += track.orientation_flips - flipped
                position[j, a:b], position_known[j, a:b], rotation[j, a:b] = est.p_w, est.known, est.R_w
                for kind, col in (('object_stable', est.stable), ('object_sliding', est.sliding),
                                  ('object_sync', est.sync)):
                    vals[kind][j, a:b], known[kind][j, a:b] = col
                supported = self._supported(est, shapes[j], supports, sup_w, sup_noise, obj, a, b, gaps[j, :, a:b],
                                           below[j, :, a:b])
                vals['object_supported'][j, a:b], known['object_supported'][j, a:b] = supported
                dist = poses.norm3(est.p_w - Gw.t[a:b])
                dist_ok = est.known & Gw.ok[a:b]
                settled_k = est.stable[1] & supported[1] & dist_ok
                vals['object_settled'][j, a:b] = settled_k & est.stable[0] & supported[0] & \
                    (dist > cfg.gripper_clearance_m)
                known['object_settled'][j, a:b] = settled_k
                # Approaching: within approach_m and closer than at the previous frame with a known distance.
                prev = self._prev_distance.get(obj)
                last = np.maximum.accumulate(np.where(dist_ok, np.arange(b - a), -1))
                before = np.concatenate([[-1], last[:-1]])
                prev_d = np.where(before >= 0, dist[np.maximum(before, 0)], np.nan if prev is None else prev)
                has_prev = (before >= 0) | (prev is not None)
                vals['gripper_approaching'][j, a:b] = dist_ok & has_prev & (dist < cfg.approach_m) & (dist < prev_d)
                known['gripper_approaching'][j, a:b] = dist_ok & has_prev
                if last[-1] >= 0:
                    self._prev_distance[obj] = float(dist[last[-1]])
            self._preconditions(a, b, objs, shapes, position, position_known, rotation, vals, known, codes, Gw,
                                supports, sup_w, sup_noise, targets, pick, pick_known, times, gaps[:, :, a:b],
                                below[:, :, a:b], sup_still)
        return [{**{kind: (vals[kind][j], known[kind][j]) for kind in kinds},
                 'position': (position[j], position_known[j])} for j in range(len(objs))], (pick, pick_known)

    def _gripper_motion(self, times_s: list[float], R: np.ndarray, t: np.ndarray,
                        ok: list[bool]) -> list[tuple[float, float, float] | None]:
        """The gripper's motion at each frame (speed m/s, horizontal speed
        m/s, angular speed rad/s) since the previous frame its pose was
        known at (None: unknown); carries the last known pose on."""
        out: list[tuple[float, float, float] | None] = [None] * len(times_s)
        prev = self._prev_gripper
        prev_k: list[int] = []          # per frame with a known pose: the previous one's index (-1: carried)
        now_k: list[int] = []
        last = -1
        for k, (now, known_k) in enumerate(zip(times_s, ok)):
            if not known_k:
                continue
            if (last >= 0 and now > times_s[last]) or (last < 0 and prev is not None and now > prev[0]):
                prev_k.append(last)
                now_k.append(k)
            last = k
        if now_k:
            at, before = np.array(now_k), np.array(prev_k)
            carried = before < 0
            R0, t0 = R[np.maximum(before, 0)], t[np.maximum(before, 0)]
            t_then = np.array(times_s)[np.maximum(before, 0)]
            if carried.any():
                assert prev is not None
                R0[carried], t0[carried], t_then[carried] = prev[1], prev[2], prev[0]
            dt = np.array(times_s)[at] - t_then
            d = t[at] - t0
            speed = poses.norm3(d) / dt
            horizontal = np.hypot(d[:, 0], d[:, 1]) / dt
            angular = poses.relative_angle(R0, R[at]) / dt
            for k, s_, h_, a_ in zip(now_k, speed.tolist(), horizontal.tolist(), angular.tolist()):
                out[k] = (s_, h_, a_)
        if last >= 0:
            self._prev_gripper = (times_s[last], R[last].copy(), t[last].copy())
        return out

    def _supported(self, est: TrackFrames, shape: Shape, supports: list[tuple[str, SupportSurface]],
                   sup_w: list[Lookup], sup_noise: list[float], obj: str, a: int, b: int,
                   gaps: np.ndarray, below: np.ndarray) -> Column:
        """*supported* per frame of ``[a, b)``: the object's bottom within the
        support gap (plus its position's uncertainty) of a support's top face
        beneath it.  A pose from the gripper sinks below the surface as the
        fingers push on (the object slides up in the grip): as far as the grip may slip.
        Writes each support's gap (:func:`~.geometry.support_gaps_m`, NaN for
        the object itself) into ``gaps[supports, b - a]`` and how far below
        its face the object still rests on it into ``below[supports, b - a]``,
        for the place preconditions (one rule for what lies beneath)."""
        cfg = self.config
        n = b - a
        state = np.zeros(n, np.int8)            # 0 false, 1 true, -1 unknown (Kleene, supports in turn)
        for s, ((sup, surface), S, noise) in enumerate(zip(supports, sup_w, sup_noise)):
            if sup == obj:
                gaps[s] = np.nan
                continue       # an object never supports itself
            ok = S.ok[a:b]
            Ri, ti = poses.invert(S.R[a:b], S.t[a:b])
            R, t = poses.compose(Ri, ti, est.R_w, est.p_w)
            gap = gaps[s] = support_gaps_m(R, t, shape, surface)
            tol_m = cfg.support_gap_m + SUPPORT_QUANTILE * np.hypot(est.position_se_m, noise)
            below_m = below[s] = tol_m + np.where(est.from_gripper, cfg.slip_m, 0.0)
            hit = ok & (gap >= -below_m) & (gap <= tol_m)
            open_ = state != 1
            state = np.where(open_ & ~ok & (state == 0), -1, state)
            state = np.where(open_ & hit, 1, state)
        return est.known & (state == 1), est.known & (state >= 0)

    def _preconditions(self, a: int, b: int, objs: list[str], shapes: list[Shape], position: np.ndarray,
                       position_known: np.ndarray, rotation: np.ndarray, vals: dict[str, np.ndarray],
                       known: dict[str, np.ndarray], codes: np.ndarray, Gw: Lookup,
                       supports: list[tuple[str, SupportSurface]], sup_w: list[Lookup], sup_noise: list[float],
                       targets: np.ndarray, pick: np.ndarray, pick_known: np.ndarray, times: np.ndarray,
                       gaps: np.ndarray, below: np.ndarray, sup_still: np.ndarray) -> None:
        """The pick and per-object place preconditions of frames ``[a, b)``
        (:mod:`.preconditions`), written into ``pick`` and ``vals``/``known``."""
        cfg = self.config
        stable = np.where(known['object_stable'][:, a:b], vals['object_stable'][:, a:b], UNKNOWN).astype(np.int8)
        held = np.where(codes[:, a:b] == GRASP_UNKNOWN, UNKNOWN, codes[:, a:b] == GRASP_TRUE).astype(np.int8)
        bodies = Bodies(objs, position[:, a:b], position_known[:, a:b], rotation[:, a:b], shapes, stable, held)
        sup_stable = []
        for (sup, _), S, still in zip(supports, sup_w, sup_still):
            st = still[a:b]
            if sup in objs:
                # A support that is itself a tracked object is as stable as its track says.
                mine = stable[objs.index(sup)]
                st = np.where(S.ok[a:b] & (mine != UNKNOWN), mine, st).astype(np.int8)
            sup_stable.append(st)
        n = b - a
        at = Supports([sup for sup, _ in supports],
                      np.array([S.R[a:b] for S in sup_w]).reshape(len(supports), n, 3, 3),
                      np.array([S.t[a:b] for S in sup_w]).reshape(len(supports), n, 3),
                      np.array([S.ok[a:b] for S in sup_w], bool).reshape(len(supports), n),
                      [surface for _, surface in supports], np.array(sup_stable, np.int8).reshape(len(supports), n))
        ready = pick_columns(Gw.t[a:b], Gw.ok[a:b], bodies, cfg.pick_clear_m, targets[a:b])
        pick[a:b], pick_known[a:b] = ready == TRUE, ready != UNKNOWN
        place = place_columns(bodies, at, cfg.place_clear_m, cfg.place_max_foreign, cfg.support_gap_m, gaps,
                              below)
        vals['preconditions_satisfied_place'][:, a:b] = place == TRUE
        known['preconditions_satisfied_place'][:, a:b] = place != UNKNOWN

    def _support_track(self, sup: str, times: np.ndarray, t: np.ndarray, ok: np.ndarray,
                       noise_m: float) -> tuple[np.ndarray, np.ndarray]:
        """A support's position and stability per frame.  Position: as
        looked up, unless it is a gross outlier (when it arrived, farther
        than :data:`~.windows.GROSS_SIGMAS` noise deviations from the
        median of the detections in the track's window, three or more
        there: a mis-association, a depth hole), which the window's newest
        position that is not one stands in for.  Stability: over the window
        it moved no farther, from the oldest position that is no outlier,
        than the stability bound allows plus three standard deviations of
        its detections' noise (unknown until it has been seen twice, and
        where its pose is unknown): a detected support's noise over one
        50 ms frame reads as 0.1 m/s.  Each pose left out counts once in the
        input health's ``gross_outliers``.  Carries its recent positions on
        to the next call."""
        cfg = self.config
        carried_t, carried_p, carried_out = self._support_seen.get(sup, ([], [], []))
        kept_t, kept_p, kept_out = list(carried_t), list(carried_p), list(carried_out)
        start = 0
        position = t.copy()
        out = np.full(len(times), UNKNOWN, np.int8)
        times_l, rows = times.tolist(), t.tolist()
        gate_m = windows.GROSS_SIGMAS * noise_m
        for k in np.flatnonzero(ok).tolist():
            now, p = times_l[k], tuple(rows[k])
            new_detection = False
            if len(kept_t) == start or now > kept_t[-1]:
                # A pose held over frames (a missed detection's) is one detection, judged once.
                held = len(kept_p) > start and kept_p[-1] == p
                new_detection = not held
                kept_out.append(kept_out[-1] if held else False)
                kept_t.append(now)
                kept_p.append(p)
            while len(kept_t) - start > 2 and now - kept_t[start + 1] >= cfg.track.window_s:
                start += 1
            if new_detection and noise_m > 0 and _gross(kept_p, start, gate_m):
                kept_out[-1] = True
                self.freshness.health.gross_outliers += 1
            if len(kept_t) - start < 2:
                continue
            first = start
            if True in kept_out[start:]:
                kept = [i for i in range(start, len(kept_t)) if not kept_out[i]]
                if kept:
                    first = kept[0]
                    if kept_out[-1] and kept_p[-1] == p:
                        position[k] = kept_p[kept[-1]]
            moved_m = math.dist(position[k], kept_p[first])
            out[k] = moved_m <= cfg.stable_linear_m_s * (now - kept_t[first]) + 3.0 * math.sqrt(2.0) * noise_m
        self._support_seen[sup] = (kept_t[start:], kept_p[start:], kept_out[start:])
        return position, out

    @staticmethod
    def _inside(t: np.ndarray, ok: np.ndarray, lo: tuple[float, float, float],
                hi: tuple[float, float, float]) -> Column:
        """Points ``t[n, 3]`` (known where ``ok``) inside the box ``[lo, hi]``."""
        within = np.all(t >= np.asarray(lo), axis=1) & np.all(t <= np.asarray(hi), axis=1)
        return within & ok, ok


def _grasp_code(grasped: Mapping[str, bool | None], obj: str) -> int:
    """``obj``'s grasp state in ``grasped`` (True, False, None or missing) as its code."""
    if obj not in grasped:
        return GRASP_ABSENT
    g = grasped[obj]
    return GRASP_UNKNOWN if g is None else GRASP_TRUE if g else GRASP_FALSE


def transforms_by_stamp(transforms: Iterable[Any]) -> TfSample:
    """Group ``geometry_msgs/TransformStamped`` objects (rclpy or rosbags, read
    by attribute) into (stamp seconds, [(parent, child, translation,
    rotation xyzw)]) in time order, the form :meth:`TfGrounding.update` takes."""
    by_stamp: dict[float, list[TfTransform]] = {}
    for t in transforms:
        tr, q = t.transform.translation, t.transform.rotation
        stamp = stamp_s(t.header.stamp)
        by_stamp.setdefault(stamp, []).append(
            (t.header.frame_id, t.child_frame_id, (tr.x, tr.y, tr.z), (q.x, q.y, q.z, q.w)))
    return sorted(by_stamp.items())
