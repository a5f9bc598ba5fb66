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
* per object ``o``: ``object_stable_o`` (linear speed < 0.05 m/s and angular
  < 0.25 rad/s, from consecutive evaluations), ``object_sliding_o`` (horizontal
  speed in the world frame above ``sliding_m_s``, 0.01 m/s), ``object_sync_o`` (while
  grasped, slip relative to the gripper since grasp onset < 0.03 m and
  < 0.3 rad; true when not grasped; the reference survives a one-frame
  contact dropout), ``object_supported_o`` (the object's lowest point, from
  its shape, within ``support_gap_m`` of the top face of a support other
  than itself, its centre over that face: :mod:`.geometry`) and
  ``object_settled_o`` (supported, stable, gripper farther than 0.01 m);
* ``gripper_approaching_o``: the gripper within ``approach_m`` (0.05 m) of
  the object and closer than at the previous frame; ``pick_approach``: the
  gripper approaching some object while nothing is grasped (SafeManip's pick
  onset test, before its 10-frame persistence, which the property file adds).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .base import Freshness, Predicates, all_unknown
from .geometry import Shape, SupportSurface, rests_on


def quat_to_matrix(q: Sequence[float]) -> np.ndarray:
    """Rotation matrix of a quaternion (x, y, z, w)."""
    x, y, z, w = q
    n = math.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def slerp(q0: np.ndarray, q1: np.ndarray, a: float) -> np.ndarray:
    q0 = q0 / np.linalg.norm(q0)
    q1 = q1 / np.linalg.norm(q1)
    dot = float(np.dot(q0, q1))
    if dot < 0:
        q1, dot = -q1, -dot
    if dot > 0.9995:
        q = q0 + a * (q1 - q0)
        return q / np.linalg.norm(q)
    theta = math.acos(dot)
    return (math.sin((1 - a) * theta) * q0 + math.sin(a * theta) * q1) / math.sin(theta)


def make_pose(translation: Sequence[float], quaternion: Sequence[float]) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = quat_to_matrix(quaternion)
    T[:3, 3] = translation
    return T


def rotation_angle(R: np.ndarray) -> float:
    return math.acos(max(-1.0, min(1.0, (np.trace(R) - 1) / 2)))


@dataclass
class _Link:
    parent: str
    static: bool
    stamps: list[float] = field(default_factory=list)
    # As received: a message carries every link, a frame's lookups read a few.
    translations: list[tuple[float, float, float]] = field(default_factory=list)
    rotations: list[tuple[float, float, float, float]] = field(default_factory=list)
    static_pose: np.ndarray | None = None      # a static link's pose, built once


_MISS = object()
_MEMO_LIMIT = 512


class TransformTree:
    """Frames linked child → parent; ``buffer_s`` of history per dynamic link.

    Lookups at one time share their chains: the pose of a frame in its root
    (and its inverse) is computed once per (frame, time) until the tree
    changes — a frame of predicates looks up the same object, gripper and
    support chains many times — and once for all times when every link on
    the way is static (a support surface), until a static link is set or a
    link replaced.  The memos hold exactly what the computation would
    return, so results do not depend on them."""

    def __init__(self, buffer_s: float = 10.0, tolerance_s: float = 0.05) -> None:
        self.links: dict[str, _Link] = {}
        self.buffer_s = buffer_s
        self.tolerance_s = tolerance_s
        self._memo: dict[tuple[str, float, bool], object] = {}
        self._static_memo: dict[tuple[str, bool], object] = {}

    def set_transform(self, parent: str, child: str, stamp_s: float, translation: Sequence[float],
                      rotation_xyzw: Sequence[float], static: bool = False) -> bool:
        """Add one transform; returns False for an out-of-order dynamic sample
        or a NaN or zero-norm one."""
        tx, ty, tz = translation
        qx, qy, qz, qw = rotation_xyzw
        t = (float(tx), float(ty), float(tz))
        q = (float(qx), float(qy), float(qz), float(qw))
        if any(map(math.isnan, t + q)) or not math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw) > 0:
            return False
        link = self.links.get(child)
        replaced = link is None or link.parent != parent or link.static != static
        if replaced:
            link = self.links[child] = _Link(parent, static)
        self._memo.clear()
        if static or replaced:      # static chains (and their memo) change only here
            self._static_memo.clear()
        if static:
            link.stamps, link.translations, link.rotations = [stamp_s], [t], [q]
            link.static_pose = make_pose(t, q)
            return True
        if link.stamps and stamp_s < link.stamps[-1]:
            return False
        link.stamps.append(stamp_s)
        link.translations.append(t)
        link.rotations.append(q)
        while link.stamps and link.stamps[-1] - link.stamps[0] > self.buffer_s:
            link.stamps.pop(0)
            link.translations.pop(0)
            link.rotations.pop(0)
        return True

    def clear(self) -> None:
        self.links.clear()
        self._memo.clear()
        self._static_memo.clear()

    def clear_dynamic(self) -> None:
        """Forget every dynamic sample (static links stay)."""
        for link in self.links.values():
            if not link.static:
                link.stamps.clear(), link.translations.clear(), link.rotations.clear()
        self._memo.clear()

    def _link_pose(self, link: _Link, time_s: float) -> np.ndarray | None:
        if link.static:
            return link.static_pose
        stamps = link.stamps
        if not stamps or time_s < stamps[0] - self.tolerance_s or time_s > stamps[-1] + self.tolerance_s:
            return None
        i = bisect.bisect_left(stamps, time_s)
        if i == 0:
            return make_pose(link.translations[0], link.rotations[0])
        if i >= len(stamps):
            return make_pose(link.translations[-1], link.rotations[-1])
        t0, t1 = stamps[i - 1], stamps[i]
        a = 0.0 if t1 == t0 else (time_s - t0) / (t1 - t0)
        trans = (1 - a) * np.array(link.translations[i - 1]) + a * np.array(link.translations[i])
        return make_pose(trans, slerp(np.array(link.rotations[i - 1]), np.array(link.rotations[i]), a))

    def _to_root(self, frame: str, time_s: float) -> tuple[str, np.ndarray | None] | None:
        """(root frame, pose of ``frame`` in it — None when ``frame`` is the
        root), or None when a link on the way is unknown at ``time_s``."""
        hit = self._static_memo.get((frame, False), _MISS)
        if hit is _MISS:
            hit = self._memo.get((frame, time_s, False), _MISS)
        if hit is not _MISS:
            return hit      # type: ignore[return-value]
        start = frame
        T: np.ndarray | None = None       # None: the identity (the frame is a root)
        seen = set()
        static = True
        root: tuple[str, np.ndarray | None] | None = None
        while frame in self.links:
            if frame in seen:
                break   # a cycle in the tree
            seen.add(frame)
            link = self.links[frame]
            static = static and link.static
            pose = self._link_pose(link, time_s)
            if pose is None:
                break
            T = pose if T is None else pose @ T
            frame = link.parent
        else:
            root = (frame, T)
        if static:
            self._static_memo[(start, False)] = root
        else:
            self._remember((start, time_s, False), root)
        return root

    def _root_inverse(self, frame: str, time_s: float, to_root: np.ndarray) -> np.ndarray:
        """The inverse of ``to_root``, the pose of ``frame`` in its root at ``time_s``."""
        if (frame, False) in self._static_memo:
            hit = self._static_memo.get((frame, True), _MISS)
            if hit is _MISS:
                hit = self._static_memo[(frame, True)] = np.linalg.inv(to_root)
            return hit      # type: ignore[return-value]
        key = (frame, time_s, True)
        hit = self._memo.get(key, _MISS)
        if hit is _MISS:
            hit = np.linalg.inv(to_root)
            self._remember(key, hit)
        return hit      # type: ignore[return-value]

    def _remember(self, key: tuple[str, float, bool], value: object) -> None:
        """Memo one result (values are never modified: lookups return new arrays)."""
        if len(self._memo) >= _MEMO_LIMIT:     # live: many times between two transforms
            self._memo.clear()
        self._memo[key] = value

    def lookup(self, target: str, source: str, time_s: float) -> np.ndarray | None:
        """4x4 pose of ``source`` in ``target`` at ``time_s``, or None."""
        a = self._to_root(target, time_s)
        b = self._to_root(source, time_s)
        if a is None or b is None or a[0] != b[0]:
            return None
        if b[1] is None:
            return np.eye(4) if a[1] is None else self._root_inverse(target, time_s, a[1]).copy()
        if a[1] is None:
            return b[1].copy()          # in the root itself: no inverse to apply
        return self._root_inverse(target, time_s, a[1]) @ b[1]


@dataclass
class TfConfig:
    world_frame: str
    gripper_frame: str
    objects: dict[str, str] = field(default_factory=dict)            # object entity → frame
    supports: dict[str, SupportSurface] = field(default_factory=dict)  # support entity → its top face
    near: dict[str, tuple[str, str, float]] = field(default_factory=dict)    # name → (frame a, frame b, m)
    inside: dict[str, tuple[str, str, tuple[float, float, float], tuple[float, float, float]]] = \
        field(default_factory=dict)                                   # name → (frame, box frame, min, max)
    stable_linear_m_s: float = 0.05
    stable_angular_rad_s: float = 0.25
    sliding_m_s: float = 0.01      # object_sliding: horizontal speed (drags slower than the stability bound)
    slip_m: float = 0.03
    slip_rad: float = 0.3
    support_gap_m: float = 0.02
    gripper_clearance_m: float = 0.01
    approach_m: float = 0.05
    staleness_s: float = 0.2
    shapes: dict[str, Shape] = field(default_factory=dict)           # object entity → shape (default: point)
    interiors: dict[str, tuple[str, tuple[float, float, float], tuple[float, float, float]]] = \
        field(default_factory=dict)           # fixture → (frame, min, max): its interior volume


class TfGrounding:
    def __init__(self, config: TfConfig, tree: TransformTree | None = None) -> None:
        self.config = config
        # A frame is built from the newest pose within the staleness limit (sample-and-hold, as
        # every other source), not only within the 50 ms interpolation tolerance.
        self.tree = tree or TransformTree(tolerance_s=max(0.05, config.staleness_s))
        self.freshness = Freshness(config.staleness_s)
        self._prev_pose: dict[str, tuple[float, np.ndarray]] = {}
        self._grasp_ref: dict[str, np.ndarray] = {}
        self._ungrasped_frames: dict[str, int] = {}
        objs = sorted(config.objects)
        self._prev_distance: dict[str, float] = {}
        self.names = ([f'near_{n}' for n in sorted(config.near)] + [f'inside_{n}' for n in sorted(config.inside)]
                      + [f'object_{k}_{o}' for k in ('stable', 'sync', 'supported', 'settled', 'sliding') for o in objs]
                      + [f'gripper_approaching_{o}' for o in objs] + (['pick_approach'] if objs else [])
                      + [f'{k}_{f}' for f in sorted(config.interiors) for k in ('reach_in', 'object_reach_in')])

    @property
    def health(self):
        return self.freshness.health

    def update(self, stamp_s: float, transforms: Sequence[tuple[str, str, Sequence[float], Sequence[float]]],
               static: bool = False) -> None:
        """A TFMessage: (parent, child, translation, rotation xyzw) per transform."""
        if not static:
            if not self.freshness.accept(stamp_s):
                return
            if self.freshness.reset_needed:
                self.tree.clear_dynamic()
                self._prev_pose.clear()
                self._grasp_ref.clear()
                self.freshness.reset_needed = False
        for parent, child, trans, rot in transforms:
            if not self.tree.set_transform(parent, child, stamp_s, trans, rot, static=static):
                self.health.nan_values += 1

    def evaluate(self, now_s: float, grasped: Mapping[str, bool | None] | None = None) -> Predicates:
        cfg = self.config
        if not self.freshness.fresh(now_s):
            return all_unknown(self.names)
        out: Predicates = {}
        lookup = self.tree.lookup
        for name, (a, b, dist) in sorted(cfg.near.items()):
            T = lookup(a, b, now_s)
            out[f'near_{name}'] = None if T is None else bool(np.linalg.norm(T[:3, 3]) < dist)
        for name, (frame, box, lo, hi) in sorted(cfg.inside.items()):
            T = lookup(box, frame, now_s)
            out[f'inside_{name}'] = None if T is None else bool(
                np.all(T[:3, 3] >= np.asarray(lo)) and np.all(T[:3, 3] <= np.asarray(hi)))
        grasped = grasped or {}
        for obj, frame in sorted(cfg.objects.items()):
            W = lookup(cfg.world_frame, frame, now_s)
            G = lookup(cfg.gripper_frame, frame, now_s)
            stable = supported = settled = sync = sliding = None
            if W is not None:
                prev = self._prev_pose.get(obj)
                if prev is not None and now_s > prev[0]:
                    dt = now_s - prev[0]
                    lin = np.linalg.norm(W[:3, 3] - prev[1][:3, 3]) / dt
                    ang = rotation_angle(prev[1][:3, :3].T @ W[:3, :3]) / dt
                    stable = bool(lin < cfg.stable_linear_m_s and ang < cfg.stable_angular_rad_s)
                    # Sliding: horizontal speed in the world (a drag; lifting and setting down are vertical).
                    sliding = bool(np.linalg.norm((W[:2, 3] - prev[1][:2, 3])) / dt > cfg.sliding_m_s)
                if prev is None or now_s != prev[0]:
                    self._prev_pose[obj] = (now_s, W)
                supported = self._supported(obj, frame, now_s)
            g = grasped.get(obj)
            if g:
                self._ungrasped_frames[obj] = 0
            elif g is False:
                # The slip reference survives a one-frame contact dropout: it
                # is dropped only after two consecutive ungrasped frames.
                self._ungrasped_frames[obj] = self._ungrasped_frames.get(obj, 0) + 1
                if self._ungrasped_frames[obj] >= 2:
                    self._grasp_ref.pop(obj, None)
            if g is None and obj in grasped:
                # sync = (not grasped) or (slip under the limits): with the grasp unknown it is still
                # true when the object has not slipped from an ongoing grasp's reference.
                ref = self._grasp_ref.get(obj)
                sync = True if ref is not None and G is not None and self._slip_ok(ref, G) else None
            elif g and G is not None:
                sync = self._slip_ok(self._grasp_ref.setdefault(obj, G), G)
            elif g:
                sync = None
            else:
                sync = True
            if stable is not None and supported is not None and G is not None:
                settled = bool(stable and supported and np.linalg.norm(G[:3, 3]) > cfg.gripper_clearance_m)
            out[f'object_stable_{obj}'] = stable
            out[f'object_sync_{obj}'] = sync
            out[f'object_supported_{obj}'] = supported
            out[f'object_settled_{obj}'] = settled
            out[f'object_sliding_{obj}'] = sliding
            approaching = None
            if G is not None:
                dist = float(np.linalg.norm(G[:3, 3]))
                prev = self._prev_distance.get(obj)
                approaching = None if prev is None else bool(dist < cfg.approach_m and dist < prev)
                self._prev_distance[obj] = dist
            out[f'gripper_approaching_{obj}'] = approaching
        for fixture, (box, lo, hi) in sorted(cfg.interiors.items()):
            out[f'reach_in_{fixture}'] = self._inside(cfg.gripper_frame, box, lo, hi, now_s)
            held_inside = [_and(grasped.get(o), self._inside(frame, box, lo, hi, now_s))
                           for o, frame in sorted(cfg.objects.items())]
            out[f'object_reach_in_{fixture}'] = _or(held_inside)
        if cfg.objects:
            approach = [out[f'gripper_approaching_{o}'] for o in cfg.objects]
            held = [grasped.get(o) for o in cfg.objects]
            if any(a is True for a in approach) and all(h is False for h in held):
                out['pick_approach'] = True
            elif all(a is False for a in approach) or any(h is True for h in held):
                out['pick_approach'] = False
            else:
                out['pick_approach'] = None
        return out


    def _slip_ok(self, ref: np.ndarray, G: np.ndarray) -> bool:
        """The object's pose in the gripper moved less than the slip limits since ``ref``."""
        slip_m = float(np.linalg.norm(G[:3, 3] - ref[:3, 3]))
        return slip_m < self.config.slip_m and rotation_angle(ref[:3, :3].T @ G[:3, :3]) < self.config.slip_rad

    def _inside(self, frame: str, box: str, lo: tuple[float, float, float], hi: tuple[float, float, float],
                now_s: float) -> bool | None:
        T = self.tree.lookup(box, frame, now_s)
        if T is None:
            return None
        return bool(np.all(T[:3, 3] >= np.asarray(lo)) and np.all(T[:3, 3] <= np.asarray(hi)))

    def _supported(self, obj: str, frame: str, now_s: float) -> bool | None:
        """The object rests on some support other than itself (None when a
        support's pose is unknown and no other support holds it)."""
        cfg = self.config
        shape = cfg.shapes.get(obj, Shape())
        unknown = False
        for sup, surface in sorted(cfg.supports.items()):
            if sup == obj:
                continue          # an object never supports itself
            S = self.tree.lookup(surface.frame, frame, now_s)
            if S is None:
                unknown = True
                continue
            if rests_on(S, shape, surface, cfg.support_gap_m):
                return True
        return None if unknown else False


def _and(a: bool | None, b: bool | None) -> bool | None:
    """Kleene conjunction (None = unknown)."""
    if a is False or b is False:
        return False
    return True if a and b else None


def _or(values: list[bool | None]) -> bool | None:
    """Kleene disjunction of several values (False when there are none)."""
    if any(v is True for v in values):
        return True
    return None if any(v is None for v in values) else False


def transforms_by_stamp(transforms) -> list[tuple[float, list[tuple[str, str, tuple, tuple]]]]:
    """Group ``geometry_msgs/TransformStamped`` objects (rclpy or rosbags, read
    by attribute) into (stamp seconds, [(parent, child, translation,
    rotation xyzw)]) in time order, the form :meth:`TfGrounding.update` takes."""
    by_stamp: dict[float, list] = {}
    for t in transforms:
        tr, q = t.transform.translation, t.transform.rotation
        stamp = t.header.stamp.sec + t.header.stamp.nanosec * 1e-9
        by_stamp.setdefault(stamp, []).append(
            (t.header.frame_id, t.child_frame_id, (tr.x, tr.y, tr.z), (q.x, q.y, q.z, q.w)))
    return sorted(by_stamp.items())
