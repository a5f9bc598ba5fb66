"""Do a robot configuration's names match what the robot publishes?

:class:`ObservedNames` collects the joint names, TF frames, contact body
names and topics of a bag (or of the live graph, collected by
``safemanip doctor --live``); :func:`check_names` compares them with every
name a configuration uses and says what matches nothing, what the robot
publishes that the configuration does not map, what it grounds and which
properties it cannot ground.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .config import RobotConfig

_READ_TYPES = {'joint_states': 'sensor_msgs/msg/JointState', 'tf': 'tf2_msgs/msg/TFMessage',
               'contacts': 'safemanip_ros/msg/ContactArray'}


def _kind(topic: str) -> str:
    """Which raw input a topic name is (as :meth:`ObservedNames.add_message` tells them apart), or ''."""
    if topic in ('/tf', '/tf_static'):
        return 'tf'
    if topic.endswith('joint_states'):
        return 'joint_states'
    return 'contacts' if topic.endswith('contacts') else ''


@dataclass
class ObservedNames:
    """Names seen in the inputs (each set is empty when its topic is absent)."""

    topics: dict[str, str] = field(default_factory=dict)     # topic → message type
    joints: set[str] = field(default_factory=set)
    frames: set[str] = field(default_factory=set)
    contact_bodies: set[str] = field(default_factory=set)
    contact_messages: int = 0
    joint_range: dict[str, tuple[float, float]] = field(default_factory=dict)    # joint → (min, max) position
    parents: dict[str, str] = field(default_factory=dict)                         # TF child → parent
    static_frames: set[str] = field(default_factory=set)

    def add_message(self, topic: str, msg: object) -> None:
        """One message of a raw input topic (rclpy or rosbags object)."""
        if topic.endswith('joint_states'):
            self.joints.update(msg.name)                                        # type: ignore[attr-defined]
            for name, q in zip(msg.name, msg.position):                         # type: ignore[attr-defined]
                lo, hi = self.joint_range.get(name, (float(q), float(q)))
                self.joint_range[name] = (min(lo, float(q)), max(hi, float(q)))
        elif topic in ('/tf', '/tf_static'):
            for t in msg.transforms:                                            # type: ignore[attr-defined]
                self.frames.update((t.header.frame_id, t.child_frame_id))
                self.parents[t.child_frame_id] = t.header.frame_id
                if topic == '/tf_static':
                    self.static_frames.add(t.child_frame_id)
        elif topic.endswith('contacts'):
            self.contact_messages += 1
            for c in msg.contacts:                                              # type: ignore[attr-defined]
                self.contact_bodies.update((c.body1, c.body2))

    @classmethod
    def from_bag(cls, path: str | Path, max_messages_per_topic: int = 2000) -> 'ObservedNames':
        """Names in a bag's raw input topics (the first messages of each)."""
        from ..bag import open_bag, typestore
        ts = typestore()
        out = cls()
        with open_bag(path) as bag:
            out.topics = {c.topic: c.msgtype for c in bag.connections}
            # Only the types these names come from: a topic of another type (Gazebo's contacts, say) is
            # listed in `topics` for doctor to report, not read as if it were ours.
            wanted = [c for c in bag.connections if _READ_TYPES.get(_kind(c.topic)) == c.msgtype]
            seen: dict[str, int] = {}
            for conn, _, raw in bag.messages(wanted):
                if seen.get(conn.topic, 0) >= max_messages_per_topic and conn.topic != '/tf_static':
                    continue
                seen[conn.topic] = seen.get(conn.topic, 0) + 1
                out.add_message(conn.topic, ts.deserialize_cdr(raw, conn.msgtype))
        return out


@dataclass
class Finding:
    kind: str         # 'joint', 'frame', 'contact body', 'topic'
    name: str
    where: str        # the configuration field that names it
    problem: str      # 'matches nothing', 'not mapped', 'never in contact'


@dataclass
class DoctorReport:
    mismatches: list[Finding]
    warnings: list[Finding]
    grounded: list[str]
    unsupported: dict[str, tuple[str, ...]]

    @property
    def ok(self) -> bool:
        return not self.mismatches


def configured_names(cfg: RobotConfig) -> dict[str, dict[str, str]]:
    """kind → name → the configuration field naming it."""
    joints = {j: 'joints.arm' for j in cfg.joints.arm_joints}
    joints.update({j: 'joints.gripper' for j in cfg.joints.gripper_joints})
    joints.update({j: f'fixtures.{f}.joint' for f, (j, _, _) in cfg.fixtures.joints.items()})
    frames = {cfg.tf.world_frame: 'world_frame', cfg.tf.gripper_frame: 'gripper_frame'}
    frames.update({f: f'entities.{e}.frame' for e, f in cfg.tf.objects.items()})
    frames.update({s.frame: f'entities.{e}.frame' for e, s in cfg.tf.supports.items()})
    for name, (a, b, _) in cfg.tf.near.items():
        frames.update({a: f'tf.near.{name}', b: f'tf.near.{name}'})
    for name, (a, b, _, _) in cfg.tf.inside.items():
        frames.update({a: f'tf.inside.{name}', b: f'tf.inside.{name}'})
    bodies = {b: 'contacts.robot_bodies' for b in cfg.contacts.robot_bodies}
    bodies.update({b: 'contacts.finger_bodies' for b in cfg.contacts.finger_bodies})
    bodies.update({b: f'entities.{e}.bodies' for b, e in cfg.contacts.body_entity.items()})
    return {'joint': joints, 'frame': frames, 'contact body': bodies}


def check_names(cfg: RobotConfig, seen: ObservedNames, unsupported: dict[str, tuple[str, ...]] | None = None,
                grounded: list[str] | None = None) -> DoctorReport:
    """Mismatches: a configured joint or frame that the inputs never carry,
    a contact body the inputs name that the configuration does not map (it
    would count as a forbidden contact), an input topic the configuration
    needs that is absent.  Warnings: configured contact bodies never seen in
    contact (they may simply not have touched anything)."""
    names = configured_names(cfg)
    mismatches: list[Finding] = []
    warnings: list[Finding] = []
    needs = {'/joint_states': 'joints', '/tf': 'world_frame'}
    if cfg.contacts.robot_bodies or cfg.contacts.finger_bodies:
        needs['/contacts'] = 'contacts'
    from .messages import RAW_TOPICS, absolute, raw_topics
    expected = raw_topics(cfg)
    if cfg.wrench_topic:
        needs[absolute(cfg.wrench_topic)] = 'wrench_topic'
        expected[absolute(cfg.wrench_topic)] = RAW_TOPICS['/wrench']
    if cfg.skills.topic:
        needs[absolute(cfg.skills.topic)] = 'skills.topic'
    # An input of another type (Gazebo's contacts, say) is not read: said so, and its names not judged.
    foreign = {t: k for t, k in seen.topics.items() if t in expected and k != expected[t]}
    present = {t for t in seen.topics if t not in foreign}
    for topic, where in needs.items():
        if topic in foreign:
            mismatches.append(Finding('topic', topic, where, f'has type {foreign[topic]}, not {expected[topic]}'))
        elif topic not in present and not (topic == '/tf' and '/tf_static' in present):
            mismatches.append(Finding('topic', topic, where, 'absent from the inputs'))
    if '/joint_states' in present:
        mismatches += [Finding('joint', n, w, 'matches nothing') for n, w in sorted(names['joint'].items())
                       if n not in seen.joints]
    if {'/tf', '/tf_static'} & present:
        mismatches += [Finding('frame', n, w, 'matches nothing') for n, w in sorted(names['frame'].items())
                       if n not in seen.frames]
    if '/contacts' in present:
        bodies = names['contact body']
        mismatches += [Finding('contact body', b, 'contacts / entities', 'not mapped by the configuration')
                       for b in sorted(seen.contact_bodies - set(bodies))]
        warnings += [Finding('contact body', b, w, 'never in contact in these inputs')
                     for b, w in sorted(bodies.items()) if b not in seen.contact_bodies]
    return DoctorReport(mismatches, warnings, grounded or [], dict(unsupported or {}))
