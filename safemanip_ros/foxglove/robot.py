"""The robot and its scene in Foxglove's 3D panel, drawn from TF alone.

A robot stack need not publish a URDF, and a simulator's TF is often flat
(every body a child of the world, as robosuite's bridge publishes it), so
the figure is built from what the monitor already reads: the robot
configuration's robot and finger bodies, its gripper frame, and TF.

* **The arm** — a ball at each robot frame TF places in the world and a
  bar between linked frames: a frame and its TF parent when both are the
  robot's, and otherwise the shortest bars that join everything into one
  tree (a minimum spanning tree over the frames' positions; for a serial
  arm whose TF is flat, that is the chain of its links).  The bars are
  chosen again only when the set of frames seen changes, so the figure
  does not rewire as the arm moves.
* **The scene** — a grey box on each object and support the configuration
  names, the size of its shape, locked to its frame.  A violation's red box
  (:class:`~.scene.ViolationScene`) is drawn slightly larger around it.

Pure: TF records in, a ``foxglove.SceneUpdate`` (JSON) out.

Example::

    >>> fig = RobotFigure('world', ['base', 'hand'], {}, {})
    >>> tr = lambda child, x: TransformRecord(0, 'world', child, (x, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
    >>> fig.bars_between([tr('base', 0.0), tr('hand', 0.5)])
    [('base', 'hand')]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .scene import DEFAULT_SIZE_M, ORIGIN_POSE, TransformRecord, scene_boxes, scene_entity, time_json

if TYPE_CHECKING:
    from ..grounding.config import RobotConfig

__all__ = ['ARM_RGBA', 'OBJECT_RGBA', 'RobotFigure']

Pose = tuple[tuple[float, float, float], tuple[float, float, float, float]]

ARM_RGBA = {'r': 0.55, 'g': 0.6, 'b': 0.7, 'a': 1.0}
OBJECT_RGBA = {'r': 0.7, 'g': 0.7, 'b': 0.7, 'a': 0.35}
BAR_M = 0.025
"""The bars' thickness (m)."""
BALL_M = 0.045
"""A robot frame's ball (m)."""
_IDENTITY: Pose = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))


class RobotFigure:
    """The arm and the scene's objects as ``foxglove.SceneUpdate`` entities
    (module docstring).  ``root``: the frame the arm is drawn in (the
    configuration's world frame); ``robot_frames``: the robot's TF frames
    (bodies, fingers, gripper); ``object_frames``: entity → its frame;
    ``sizes_m``: entity → box size (x, y, z)."""

    def __init__(self, root: str, robot_frames: Iterable[str], object_frames: Mapping[str, str],
                 sizes_m: Mapping[str, tuple[float, float, float]]) -> None:
        self.root = root.lstrip('/')
        self.robot_frames = {f.lstrip('/') for f in robot_frames}
        self.object_frames = {ent: f.lstrip('/') for ent, f in object_frames.items()}
        self.sizes_m = dict(sizes_m)
        self._links: dict[str, TransformRecord] = {}      # child frame → its newest transform
        self._bars: list[tuple[str, str]] = []
        self._bars_for: frozenset[str] = frozenset()

    @classmethod
    def of_robot(cls, robot: RobotConfig) -> RobotFigure:
        """The figure of a robot configuration: its robot and finger bodies
        and gripper frame, its objects and supports as boxes."""
        return cls(robot.tf.world_frame, {*robot.contacts.robot_bodies, *robot.contacts.finger_bodies,
                                          robot.tf.gripper_frame}, *scene_boxes(robot))

    def _in_root(self, frame: str, known: dict[str, Pose | None]) -> Pose | None:
        """``frame``'s pose in the root frame by the newest transforms, None where TF does not reach the
        root; ``known`` holds the poses found so far this update (frames share their ancestors)."""
        if frame == self.root:
            return _IDENTITY
        if frame in known:
            return known[frame]
        known[frame] = None                  # meanwhile: a loop in a bad TF tree reaches the root nowhere
        t = self._links.get(frame)
        parent = None if t is None else self._in_root(t.parent.lstrip('/'), known)
        pose = None if parent is None or t is None else _compose(parent, (t.translation, t.rotation_xyzw))
        known[frame] = pose
        return pose

    def _take(self, transforms: Iterable[TransformRecord]) -> dict[str, tuple[float, float, float]]:
        """Take ``transforms``: each robot frame's position in the root frame now; the bars chosen again
        when the set of frames placed changed."""
        for t in transforms:
            self._links[t.child.lstrip('/')] = t
        known: dict[str, Pose | None] = {}
        positions = {f: p[0] for f in sorted(self.robot_frames) if (p := self._in_root(f, known)) is not None}
        if frozenset(positions) != self._bars_for:
            self._bars_for = frozenset(positions)
            self._bars = self._spanning_bars(positions)
        return positions

    def bars_between(self, transforms: Iterable[TransformRecord]) -> list[tuple[str, str]]:
        """Take ``transforms``; the bars of the arm now (pairs of frames)."""
        self._take(transforms)
        return list(self._bars)

    def _spanning_bars(self, positions: Mapping[str, tuple[float, float, float]]) -> list[tuple[str, str]]:
        """TF's own parent links among the robot frames, then the shortest
        bars joining the rest into one tree (Kruskal)."""
        group = {f: f for f in positions}

        def top(f: str) -> str:
            while group[f] != f:
                group[f] = group[group[f]]
                f = group[f]
            return f

        bars: list[tuple[str, str]] = []
        for f in positions:
            parent = self._links[f].parent.lstrip('/')
            if parent in positions and top(parent) != top(f):
                group[top(f)] = top(parent)
                bars.append((parent, f))
        names = sorted(positions)
        pairs = sorted((_distance(positions[a], positions[b]), a, b)
                       for i, a in enumerate(names) for b in names[i + 1:])
        for _, a, b in pairs:
            if top(a) != top(b):
                group[top(a)] = top(b)
                bars.append((a, b))
        return bars

    def update(self, transforms: Iterable[TransformRecord], stamp_ns: int) -> dict[str, Any]:
        """The ``foxglove.SceneUpdate`` after ``transforms``: the arm as it
        is now (in the root frame) and the scene's objects (in their frames)."""
        at = self._take(transforms)
        ts = time_json(stamp_ns)
        entities: list[dict[str, Any]] = []
        if at:
            points = [dict(zip('xyz', at[f])) for a, b in self._bars for f in (a, b)]
            entities.append(scene_entity('robot/arm', self.root, ts, 'robot', {
                'lines': [{'type': 2, 'pose': ORIGIN_POSE, 'thickness': BAR_M, 'scale_invariant': False,
                           'points': points, 'color': ARM_RGBA, 'colors': [], 'indices': []}] if points else [],
                'spheres': [{'pose': {**ORIGIN_POSE, 'position': dict(zip('xyz', p))}, 'size': {'x': BALL_M, 'y': BALL_M, 'z': BALL_M},
                             'color': ARM_RGBA} for _, p in sorted(at.items())]},
                frame_locked=False))          # drawn where the arm is now, in the root frame
        for ent, frame in sorted(self.object_frames.items()):
            size = self.sizes_m.get(ent, DEFAULT_SIZE_M)
            entities.append(scene_entity(f'scene/{ent}', frame, ts, ent, {
                'cubes': [{'pose': ORIGIN_POSE, 'size': dict(zip('xyz', size)), 'color': OBJECT_RGBA}]}))
        return {'deletions': [], 'entities': entities}


def _distance(a: Sequence[float], b: Sequence[float]) -> float:
    return float(sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5)


# Scalar on purpose: a figure composes a few dozen poses per TF batch, where grounding.poses' numpy forms
# (made for batches) cost more in call overhead than the arithmetic (bench_foxglove: +0.4-0.8 ms a frame).
def _rotate(q: Sequence[float], v: Sequence[float]) -> tuple[float, float, float]:
    """``v`` rotated by the unit quaternion ``q`` (x, y, z, w)."""
    x, y, z, w = q
    # v' = v + 2w (u x v) + 2 u x (u x v), u = (x, y, z)
    cx, cy, cz = y * v[2] - z * v[1], z * v[0] - x * v[2], x * v[1] - y * v[0]
    return (v[0] + 2 * (w * cx + y * cz - z * cy), v[1] + 2 * (w * cy + z * cx - x * cz),
            v[2] + 2 * (w * cz + x * cy - y * cx))


def _compose(a: Pose, b: Pose) -> Pose:
    """Pose ``b`` (in ``a``'s frame) in ``a``'s parent frame."""
    (ta, qa), (tb, qb) = a, b
    r = _rotate(qa, tb)
    x1, y1, z1, w1 = qa
    x2, y2, z2, w2 = qb
    return ((ta[0] + r[0], ta[1] + r[1], ta[2] + r[2]),
            (w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
             w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2))
