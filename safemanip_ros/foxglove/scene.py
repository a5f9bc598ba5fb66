"""What Foxglove shows of the monitor, as Foxglove's JSON messages.

Pure: message fields in, JSON-able dicts out; no rclpy, no Foxglove SDK.
The node (:mod:`safemanip_ros.nodes.foxglove_node`) decodes our ROS
messages into the small records here and logs what these functions return
on the server's channels, so what a panel shows is tested without a
server, and the server only carries it.

* :func:`verdicts_json` — every property instance's verdict, kept by a
  :class:`~safemanip_ros.monitor.board.VerdictBoard` from the monitor's
  ``VerdictArray`` stream, as one state row per instance for Foxglove's
  State Transitions panel.
* :func:`event_json`, :func:`action_json`, :func:`gate_json`,
  :func:`log_json` — violation events, supervisor actions, gate decisions,
  and the Log panel's lines.
* :class:`ViolationScene` — ``foxglove.SceneUpdate`` entities that colour
  the objects an open violation names (its binding), and the gripper while
  a hold is on; a closed violation or a released hold deletes its entity.
* :func:`frame_transforms` — TF as ``foxglove.FrameTransforms``.

Example::

    >>> from types import SimpleNamespace as Msg
    >>> board = VerdictBoard()
    >>> board.update(Msg(episode_id='ep', verdicts=[
    ...     Msg(property='no_drop', instance='no_drop[cube]', verdict=3, mode=0, recovery_verdict=3)]))
    >>> row = verdicts_json(board, 0, 1)['instances'][0]
    >>> row['verdict'], row['violated']
    ('presumably_true', False)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..grounding.geometry import Shape
from ..monitor.board import VerdictBoard

if TYPE_CHECKING:
    from ..grounding.config import RobotConfig

__all__ = ['ACTIONS', 'EVENTS', 'GATE_DECISIONS', 'ORIGIN_POSE', 'SEVERITIES', 'VERDICTS', 'EventRecord', 'GateRecord',
           'TransformRecord', 'ViolationScene', 'action_json', 'event_json', 'scene_boxes', 'scene_entity',
           'diagnostics_json', 'event_line', 'frame_transforms', 'gate_json', 'log_json', 'time_json',
           'verdicts_json']

VERDICTS = ('false', 'true', 'presumably_false', 'presumably_true')
"""Verdict codes (``safemanip_ros/Verdict``) as words."""
EVENTS = ('opened', 'closed', 'pending_at_end')
SEVERITIES = ('info', 'warning', 'error', 'critical')
ACTIONS = ('log', 'alert', 'pause', 'retract', 'stop', 'resume')
GATE_DECISIONS = ('undecided', 'pass', 'fail')

# foxglove.Log levels: UNKNOWN 0, DEBUG 1, INFO 2, WARNING 3, ERROR 4, FATAL 5.
_LOG_LEVEL = {'info': 2, 'warning': 3, 'error': 4, 'critical': 5}
VIOLATION_RGBA = {'r': 0.9, 'g': 0.1, 'b': 0.1, 'a': 0.55}
HOLD_RGBA = {'r': 1.0, 'g': 0.55, 'b': 0.0, 'a': 0.6}
CLOSED_RGBA = {'r': 0.9, 'g': 0.1, 'b': 0.1, 'a': 0.25}
CLOSED_SHOWN_NS = 2_000_000_000
"""How long an object stays marked, paler, after the last violation naming it closed (ns)."""
ORIGIN_POSE = {'position': {'x': 0.0, 'y': 0.0, 'z': 0.0}, 'orientation': {'x': 0.0, 'y': 0.0, 'z': 0.0, 'w': 1.0}}
"""An entity's pose at its frame's origin, as Foxglove's JSON."""
DEFAULT_SIZE_M = (0.06, 0.06, 0.06)
"""An object's box where the configuration gives no shape (m)."""
VIOLATION_MARGIN_M = 0.01
"""A violated object's red box is this much larger than the object's (m): it encloses the object's grey box
(:mod:`.robot`)."""


def _word(table: Sequence[str], code: int) -> str:
    return table[code] if 0 <= code < len(table) else f'unknown({code})'


def time_json(stamp_ns: int) -> dict[str, int]:
    """A Foxglove timestamp (``{sec, nsec}``) of ``stamp_ns``."""
    sec, nsec = divmod(int(stamp_ns), 1_000_000_000)
    return {'sec': sec, 'nsec': nsec}


def verdicts_json(board: VerdictBoard, stamp_ns: int, frame: int) -> dict[str, Any]:
    """The ``/safemanip/verdicts`` message of a monitor frame: one row per
    instance of ``board``, sorted by instance, with property, instance,
    verdict and recovery verdict as words, ``violated`` (a violation
    episode is open) and ``state`` (``violated`` or the verdict) for a
    State Transitions panel."""
    rows = []
    for name in sorted(board.by_instance):
        v = board.by_instance[name]
        violated = int(v.mode) == 1
        verdict = _word(VERDICTS, int(v.verdict))
        rows.append({'property': v.property, 'instance': v.instance, 'verdict': verdict, 'violated': violated,
                     'recovery_verdict': _word(VERDICTS, int(v.recovery_verdict)),
                     'state': 'violated' if violated else verdict})
    return {'timestamp': time_json(stamp_ns), 'episode_id': board.episode_id or '', 'frame': int(frame),
            'instances': rows}


@dataclass(frozen=True)
class EventRecord:
    """A ``ViolationEvent``'s fields (codes as in the message)."""

    stamp_ns: int
    event: int
    property: str
    instance: str
    binding: tuple[tuple[str, str], ...]
    category: str
    severity: int
    episode_id: str
    start_frame: int
    end_frame: int
    recovered: bool
    count: int


def event_json(e: EventRecord) -> dict[str, Any]:
    """The ``/safemanip/violations`` message of a violation event."""
    return {'timestamp': time_json(e.stamp_ns), 'event': _word(EVENTS, e.event), 'property': e.property,
            'instance': e.instance, 'binding': [{'key': k, 'value': v} for k, v in e.binding],
            'category': e.category, 'severity': _word(SEVERITIES, e.severity), 'episode_id': e.episode_id,
            'start_frame': e.start_frame, 'end_frame': e.end_frame, 'recovered': e.recovered, 'count': e.count}


def log_json(stamp_ns: int, level: str, text: str, name: str) -> dict[str, Any]:
    """A ``foxglove.Log`` line (the Log panel): ``level`` one of :data:`SEVERITIES`."""
    return {'timestamp': time_json(stamp_ns), 'level': _LOG_LEVEL.get(level, 0), 'message': text, 'name': name,
            'file': '', 'line': 0}


def event_line(e: EventRecord) -> str:
    """One line for the Log panel."""
    what = _word(EVENTS, e.event)
    if e.event == 1:
        what += ' (recovered)' if e.recovered else ''
    return f'{e.instance} {what}: frames {e.start_frame}-{e.end_frame} of {e.episode_id} (count {e.count})'


def action_json(stamp_ns: int, action: int, property_: str, instance: str, reason: str, frame: int,
                success: bool) -> dict[str, Any]:
    """The ``/safemanip/supervisor`` message of a supervisor action."""
    return {'timestamp': time_json(stamp_ns), 'action': _word(ACTIONS, action), 'property': property_,
            'instance': instance, 'reason': reason, 'frame': int(frame), 'success': bool(success)}


@dataclass(frozen=True)
class GateRecord:
    """A ``GateDecision``'s fields."""

    stamp_ns: int
    name: str
    robot: str
    unit: str
    limit: float
    alpha: float
    decision: int
    observations: int
    violations: int
    rollouts: int
    decided_after: int


def gate_json(g: GateRecord) -> dict[str, Any]:
    """The ``/safemanip/gate`` message: a limit's decision and evidence for
    one robot (``rate``: violations per observation so far, for a Plot)."""
    return {'timestamp': time_json(g.stamp_ns), 'name': g.name, 'robot': g.robot, 'unit': g.unit,
            'limit': g.limit, 'alpha': g.alpha, 'decision': _word(GATE_DECISIONS, g.decision),
            'observations': g.observations, 'violations': g.violations, 'rollouts': g.rollouts,
            'rate': g.violations / g.observations if g.observations else 0.0, 'decided_after': g.decided_after}


@dataclass(frozen=True)
class TransformRecord:
    """One ``geometry_msgs/TransformStamped``."""

    stamp_ns: int
    parent: str
    child: str
    translation: tuple[float, float, float]
    rotation_xyzw: tuple[float, float, float, float]


def diagnostics_json(stamp_ns: int, statuses: Iterable[tuple[int, str, str, str, Sequence[tuple[str, str]]]]
                     ) -> dict[str, Any]:
    """A ``diagnostic_msgs/msg/DiagnosticArray`` as JSON (Foxglove's
    Diagnostics panels): each status as (level, name, message, hardware id,
    key-value pairs)."""
    return {'header': {'stamp': time_json(stamp_ns), 'frame_id': ''},
            'status': [{'level': level, 'name': name, 'message': message, 'hardware_id': hw,
                        'values': [{'key': k, 'value': v} for k, v in values]}
                       for level, name, message, hw, values in statuses]}


def frame_transforms(transforms: Iterable[TransformRecord]) -> dict[str, Any]:
    """A ``foxglove.FrameTransforms`` message."""
    return {'transforms': [
        {'timestamp': time_json(t.stamp_ns), 'parent_frame_id': t.parent.lstrip('/'),
         'child_frame_id': t.child.lstrip('/'),
         'translation': dict(zip('xyz', t.translation)), 'rotation': dict(zip('xyzw', t.rotation_xyzw))}
        for t in transforms]}


class ViolationScene:
    """3D markers of the open violations and the hold.

    ``entity_frames``: entity → its TF frame (a robot configuration's
    objects and supports); ``sizes_m``: entity → box size (x, y, z) in
    metres; ``gripper_frame``: the frame marked while a hold is on.  An
    open violation marks each entity of its binding that has a frame; an
    entity stays marked while any violation naming it is open, and then
    for :data:`CLOSED_SHOWN_NS` more, paler (Foxglove removes it itself): a
    violation that opens and closes in one frame is seen too."""

    def __init__(self, entity_frames: Mapping[str, str], sizes_m: Mapping[str, tuple[float, float, float]],
                 gripper_frame: str) -> None:
        self.entity_frames = dict(entity_frames)
        self.sizes_m = dict(sizes_m)
        self.gripper_frame = gripper_frame
        self._open: dict[str, set[str]] = {}        # instance → entities it names
        self._closed: dict[str, list[str]] = {}     # entity → instances naming it closed since the last update
        self._held = False
        self._shown: set[str] = set()               # entity ids shown now

    @classmethod
    def of_robot(cls, robot: RobotConfig) -> ViolationScene:
        """The scene of a robot configuration: its objects and supports by
        their TF frames, boxes the size of their shapes, its gripper frame."""
        return cls(*scene_boxes(robot), robot.tf.gripper_frame)

    def event(self, e: EventRecord) -> None:
        if e.event == 0:
            self._open[e.instance] = {v for _, v in e.binding if v in self.entity_frames}
        else:
            for ent in self._open.pop(e.instance, ()):
                self._closed.setdefault(ent, []).append(e.instance)

    def hold(self, on: bool) -> None:
        self._held = on

    def update(self, stamp_ns: int) -> dict[str, Any]:
        """The ``foxglove.SceneUpdate`` for now: an entity per marked
        object (a red box, the instances naming it as text), the gripper (an
        orange sphere) while held, a paler box for :data:`CLOSED_SHOWN_NS`
        on an object whose violations all closed since the last update,
        and deletions of what is no longer marked."""
        by_entity: dict[str, list[str]] = {}
        for instance, names in sorted(self._open.items()):
            for ent in names:
                by_entity.setdefault(ent, []).append(instance)
        ts = time_json(stamp_ns)
        entities: list[dict[str, Any]] = []
        closed = {ent: names for ent, names in self._closed.items() if ent not in by_entity}
        self._closed = {}
        for ent, instances in sorted(by_entity.items()):
            entities.append(self._box(ent, instances, ts, VIOLATION_RGBA))
        lingering = [self._box(ent, [f'{i} (closed)' for i in names], ts, CLOSED_RGBA, CLOSED_SHOWN_NS)
                     for ent, names in sorted(closed.items())]
        if self._held:
            entities.append(scene_entity('hold/gripper', self.gripper_frame, ts, 'hold', {
                'spheres': [{'pose': ORIGIN_POSE, 'size': {'x': 0.12, 'y': 0.12, 'z': 0.12}, 'color': HOLD_RGBA}]}))
        shown = {str(e['id']) for e in entities}
        gone = sorted(self._shown - shown - {str(e['id']) for e in lingering})   # those replace themselves
        self._shown = shown
        return {'deletions': [{'timestamp': ts, 'type': 0, 'id': i} for i in gone], 'entities': entities + lingering}

    def _box(self, ent: str, instances: list[str], ts: dict[str, int], rgba: dict[str, float],
             lifetime_ns: int = 0) -> dict[str, Any]:
        size = tuple(x + VIOLATION_MARGIN_M for x in self.sizes_m.get(ent, DEFAULT_SIZE_M))
        return scene_entity(f'violation/{ent}', self.entity_frames[ent], ts, ', '.join(instances), {
            'cubes': [{'pose': ORIGIN_POSE, 'size': dict(zip('xyz', size)), 'color': rgba}],
            'texts': [{'pose': {**ORIGIN_POSE, 'position': {'x': 0.0, 'y': 0.0, 'z': size[2] / 2 + 0.05}},
                       'billboard': True, 'font_size': 14.0, 'scale_invariant': True,
                       'color': {'r': 1.0, 'g': 1.0, 'b': 1.0, 'a': 1.0}, 'text': '\n'.join(instances)}]},
            lifetime_ns=lifetime_ns)


def scene_boxes(robot: RobotConfig) -> tuple[dict[str, str], dict[str, tuple[float, float, float]]]:
    """The objects and supports of a robot configuration: entity → TF
    frame, and entity → the size (x, y, z, m) of the box around its shape
    (a support: its top face, 2 cm thick; an object without a shape: none)."""
    frames = {**{name: s.frame for name, s in robot.tf.supports.items()}, **robot.tf.objects}
    sizes = {name: size for name, shape in robot.tf.shapes.items() if (size := _box_of(shape)) is not None}
    for name, s in robot.tf.supports.items():
        sizes.setdefault(name, (2 * s.half_x_m, 2 * s.half_y_m, 0.02))
    return frames, sizes


def _box_of(shape: Shape) -> tuple[float, float, float] | None:
    """The size (x, y, z, m) of the box around a shape (None: a point)."""
    d = shape.dims_m
    if shape.kind == 'box':
        return (2 * d[0], 2 * d[1], 2 * d[2])
    if shape.kind == 'cylinder':
        return (2 * d[0], 2 * d[0], 2 * d[1])
    if shape.kind == 'sphere':
        return (2 * d[0],) * 3
    return None


def scene_entity(entity_id: str, frame: str, ts: dict[str, int], label: str, shapes: dict[str, Any],
                 frame_locked: bool = True, lifetime_ns: int = 0) -> dict[str, Any]:
    """A ``foxglove.SceneEntity`` in ``frame`` holding ``shapes`` (its primitives by field), removed by
    Foxglove ``lifetime_ns`` after its timestamp (0: when replaced or deleted); ``frame_locked``: it moves
    with its frame."""
    sec, nsec = divmod(lifetime_ns, 1_000_000_000)
    return {'timestamp': ts, 'frame_id': frame.lstrip('/'), 'id': entity_id, 'lifetime': {'sec': sec, 'nsec': nsec},
            'frame_locked': frame_locked, 'metadata': [{'key': 'safemanip', 'value': label}], **shapes}
