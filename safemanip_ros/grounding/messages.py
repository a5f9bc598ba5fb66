"""Message → grounding adapters: the one place where ROS messages become
grounding calls, used by the live grounding nodes (rclpy messages) and by
the offline audit (rosbags messages) alike.  Messages are read by attribute
only (both kinds have the same field names), so this module imports no ROS.
Each message type first becomes a *sample* (plain tuples: what its grounding
source takes), then is fed; the offline audit can build the same samples
without messages (:mod:`safemanip_ros.grounding.rawinputs`).

:class:`GroundingSet` holds every grounding source of a robot configuration
and evaluates them all at one frame time, with the grasp state the TF
grounding needs taken from the *same* frame's contact evaluation — the
offline audit and ``safemanip run`` see identical frames.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..stamps import stamp_ns, stamp_s
from .base import Predicates
from .camera import CameraError, CameraGrounding, depth_metres, image_to_array
from .colour_depth import RgbdPairs
from .config import RobotConfig
from .contacts import ContactGrounding, ContactSample, WrenchGrounding
from .joints import FixtureGrounding, JointStateGrounding
from .skills import SkillGrounding
from .tf import TfGrounding, TfSample, transforms_by_stamp

# The raw topics a robot stack publishes and the type each must have.
RAW_TOPICS = {'/joint_states': 'sensor_msgs/msg/JointState', '/tf': 'tf2_msgs/msg/TFMessage',
              '/tf_static': 'tf2_msgs/msg/TFMessage', '/contacts': 'safemanip_ros/msg/ContactArray',
              '/wrench': 'geometry_msgs/msg/WrenchStamped', '/image': 'sensor_msgs/msg/Image',
              '/depth': 'sensor_msgs/msg/Image', '/camera_info': 'sensor_msgs/msg/CameraInfo'}
IMAGE_TOPICS = frozenset({'/image', '/depth', '/camera_info'})
"""A camera's topics: read offline only where used (colour regions; objects found again in the pixels)."""
SKILL_EVENT_TYPE = 'safemanip_ros/msg/SkillEvent'


def absolute(topic: str) -> str:
    """A topic name as a bag records it (``skill_events`` → ``/skill_events``)."""
    return topic if topic.startswith('/') else '/' + topic


def raw_topics(robot: RobotConfig | None) -> dict[str, str]:
    """The raw topics a recording of this robot may hold, with their types:
    :data:`RAW_TOPICS` and, where configured, the skill-event topic."""
    out = dict(RAW_TOPICS)
    if robot is not None and robot.skills.topic:
        out[absolute(robot.skills.topic)] = SKILL_EVENT_TYPE
    return out


# What each message type gives its grounding, independent of where the
# message came from: a message read by attribute (below), or a bag's
# messages decoded column-wise (safemanip_ros.grounding.rawinputs builds the same
# tuples, value for value).
JointSample = tuple[float, list[str], np.ndarray, Any]
"""(stamp s, names, positions, velocities — None unless one per name)."""
ContactsSample = tuple[float, list[ContactSample]]
WrenchSample = tuple[float, tuple[float, float, float], tuple[float, float, float]]


def joint_state_sample(msg: Any) -> JointSample:
    """``sensor_msgs/JointState``; velocities only when they match the names."""
    names = list(msg.name)
    velocity = msg.velocity if len(msg.velocity) == len(names) and len(names) else None
    return stamp_s(msg.header.stamp), names, np.asarray(msg.position, dtype=float), velocity


def contacts_sample(msg: Any) -> ContactsSample:
    """``safemanip_ros/ContactArray``."""
    return stamp_s(msg.header.stamp), [ContactSample(c.body1, c.body2, c.normal_force_n) for c in msg.contacts]


SkillSample = tuple[float, str, str, int]
"""(stamp s, stack skill name, target, phase)."""


def skill_event_sample(msg: Any) -> SkillSample:
    """``safemanip_ros/SkillEvent``."""
    return stamp_s(msg.header.stamp), str(msg.skill), str(msg.target), int(msg.phase)


def wrench_sample(msg: Any) -> WrenchSample:
    """``geometry_msgs/WrenchStamped``."""
    f, t = msg.wrench.force, msg.wrench.torque
    return stamp_s(msg.header.stamp), (f.x, f.y, f.z), (t.x, t.y, t.z)


def feed_joint_sample(joints: JointStateGrounding, fixtures: FixtureGrounding | None, sample: JointSample) -> None:
    t, names, positions, velocity = sample
    joints.update(t, names, positions, velocity)
    if fixtures is not None:
        fixtures.update(t, names, positions)


def feed_tf_sample(tf: TfGrounding, sample: TfSample, static: bool) -> None:
    for stamp, items in sample:
        tf.update(stamp, items, static=static)


def feed_joint_state(joints: JointStateGrounding, fixtures: FixtureGrounding | None, msg: Any) -> None:
    """``sensor_msgs/JointState``."""
    feed_joint_sample(joints, fixtures, joint_state_sample(msg))


def command_positions(arm_joints: list[str], msg: Any) -> list[float] | None:
    """The last point of a ``trajectory_msgs/JointTrajectory`` in
    ``arm_joints`` order (NaN for a joint it does not name), or None."""
    if not msg.points:
        return None
    index = {n: i for i, n in enumerate(msg.joint_names)}
    target = msg.points[-1].positions
    return [float(target[index[j]]) if j in index and index[j] < len(target) else float('nan') for j in arm_joints]


def feed_contacts(contacts: ContactGrounding, msg: Any) -> None:
    """``safemanip_ros/ContactArray``."""
    contacts.update(*contacts_sample(msg))


def feed_wrench(wrench: WrenchGrounding, msg: Any) -> None:
    """``geometry_msgs/WrenchStamped``."""
    wrench.update(*wrench_sample(msg))


def feed_tf(tf: TfGrounding, msg: Any, static: bool) -> None:
    """``tf2_msgs/TFMessage`` from ``/tf`` or ``/tf_static``."""
    feed_tf_sample(tf, transforms_by_stamp(msg.transforms), static)


def sample_of(topic: str, msg: Any) -> Any:
    """The sample :meth:`GroundingSet.feed_sample` takes for a message of a
    raw topic (the ``sensor_msgs/Image`` message itself for ``/image``)."""
    if topic == '/joint_states':
        return joint_state_sample(msg)
    if topic in ('/tf', '/tf_static'):
        return transforms_by_stamp(msg.transforms)
    if topic == '/contacts':
        return contacts_sample(msg)
    if topic == '/wrench':
        return wrench_sample(msg)
    return msg


SOURCE_ORDER = ('joint_states', 'contacts', 'skills', 'tf', 'camera')
"""The order the grounding sources are evaluated in at one frame, offline
(:meth:`GroundingSet.view`) and live (``nodes.grounding_nodes.GroundingChain``):
each reads only sources before it.  The contact grounding reads the joint
grounding's finger closure (:func:`closure_of`), the TF grounding the contact
grounding's raw grasps (:func:`grasps_of`) and the skill grounding's pick
target (:func:`pick_target_of`): from the same frame in one process, from the
source's topic across processes."""


def closure_of(values: Predicates) -> tuple[bool, bool | None]:
    """(given, value) of the finger closure the contact grounding reads:
    the joint grounding's ``gripper_closed`` (None: unknown)."""
    return 'gripper_closed' in values, values.get('gripper_closed')


def grasps_of(values: Predicates, objects: Iterable[str]) -> dict[str, bool | None]:
    """The raw grasp per object the TF grounding reads, for the objects
    ``values`` (the contact grounding's) names: ``object_grasped_raw_<o>``."""
    return {o: values[key] for o in objects if (key := f'object_grasped_raw_{o}') in values}


def pick_target_of(values: Predicates) -> str | None:
    """The object whose ``pick_target_<o>`` is true in ``values`` (the skill
    grounding's), if exactly one."""
    named = [k.removeprefix('pick_target_') for k, v in values.items() if v is True and k.startswith('pick_target_')]
    return named[0] if len(named) == 1 else None


def names_pick_target(values: Predicates) -> bool:
    """Whether ``values`` carry the skill grounding's pick targets."""
    return any(k.startswith('pick_target_') for k in values)


def image_array(msg: Any) -> np.ndarray:
    """``sensor_msgs/Image`` as an array (raises :class:`CameraError`)."""
    return image_to_array(msg.encoding, msg.height, msg.width, msg.step, bytes(msg.data), bool(msg.is_bigendian))


class GroundingSet:
    """Every grounding source of a robot configuration, fed by topic and
    evaluated together at one frame time (the offline audit; the same
    adapters feed the live nodes)."""

    def __init__(self, robot: RobotConfig, use_wrench: bool, use_camera: bool,
                 objects_from_images: bool = False) -> None:
        """``objects_from_images``: the configuration's ``camera.objects``
        found in the ``/image`` and ``/depth`` pairs (:class:`RgbdPairs`,
        as ``camera_grounding`` finds them live) and fed to the TF grounding
        as ``world → object``, placed through the camera's pose on TF; their
        transforms on ``/tf`` (a detector's, recorded) are left out."""
        self.robot = robot
        self._flags = (use_wrench, use_camera, objects_from_images)
        self.pairs = RgbdPairs(robot.camera.objects) if objects_from_images else None
        self._found_again = frozenset(look.name for look in robot.camera.objects) if objects_from_images \
            else frozenset()
        self.joints = JointStateGrounding(robot.joints)
        self.fixtures = FixtureGrounding(robot.fixtures)
        self.contacts = ContactGrounding(robot.contacts)
        self.tf = TfGrounding(robot.tf)
        self.wrench = WrenchGrounding(robot.wrench) if use_wrench else None
        self.camera = CameraGrounding(robot.camera) if use_camera and robot.camera.regions else None
        self.skills = SkillGrounding(robot.skills) if robot.skills.topic else None
        self._skill_topic = absolute(robot.skills.topic) if robot.skills.topic else None
        self.contact_bodies_seen: set[str] = set()

    def fresh_copy(self) -> 'GroundingSet':
        """The same sources with no history (a new rollout starts); the
        contact bodies seen so far are kept (:meth:`name_warnings` is about
        the whole recording)."""
        copy = GroundingSet(self.robot, *self._flags)
        copy.contact_bodies_seen = self.contact_bodies_seen
        return copy

    def feed(self, topic: str, msg: Any) -> None:
        """One message of a raw topic."""
        self.feed_sample(topic, skill_event_sample(msg) if topic == self._skill_topic else sample_of(topic, msg))

    def feed_sample(self, topic: str, sample: Any) -> None:
        """One message of a raw topic as its sample (:func:`sample_of`)."""
        if topic == '/joint_states':
            feed_joint_sample(self.joints, self.fixtures, sample)
        elif topic in ('/tf', '/tf_static'):
            if self._found_again:
                sample = [(stamp, kept) for stamp, items in sample
                          if (kept := [x for x in items if x[1] not in self._found_again])]
            feed_tf_sample(self.tf, sample, static=topic == '/tf_static')
        elif topic == '/contacts':
            self.contacts.update(*sample)
            for c in sample[1]:
                self.contact_bodies_seen.update((c.body1, c.body2))
        elif topic == '/wrench' and self.wrench is not None:
            self.wrench.update(*sample)
        elif topic == '/image' and (self.camera is not None or self.pairs is not None):
            try:
                img = image_array(sample)
            except CameraError:
                (self.camera or self.tf).health.missing_inputs += 1
                return
            if self.camera is not None:
                self.camera.update(stamp_s(sample.header.stamp), img)
            self._pair('image', sample, img)
        elif topic == '/depth' and self.pairs is not None:
            try:
                metres = depth_metres(sample.encoding, image_array(sample))
            except CameraError:
                self.tf.health.missing_inputs += 1
                return
            self._pair('depth', sample, metres)
        elif topic == '/camera_info' and self.pairs is not None:
            self.pairs.set_intrinsics(np.asarray(sample.k, float))
        elif topic == self._skill_topic and self.skills is not None:
            self.skills.update(*sample)

    def _pair(self, kind: str, msg: Any, array: np.ndarray) -> None:
        """An image or depth image for :attr:`pairs`; the objects of a whole pair to the TF grounding."""
        if self.pairs is None:
            return
        located = self.pairs.add(kind, stamp_ns(msg.header.stamp), msg.header.frame_id or self.robot.camera_frame,
                                 array, (self.tf.tree, self.robot.tf.world_frame))
        if located is None:
            return
        if located.problem is not None:
            self.tf.health.missing_inputs += 1
            return
        if located.found:
            self.tf.update(located.stamp_ns * 1e-9, located.transforms())

    def name_warnings(self, source: str) -> list[str]:
        """What the contacts seen so far say about the configuration's names:
        bodies it does not map (their contacts count as forbidden) and the
        case where none of its bodies ever appears."""
        c = self.robot.contacts
        configured = set(c.robot_bodies) | set(c.finger_bodies) | set(c.body_entity)
        out = []
        unmapped = sorted(self.contact_bodies_seen - configured)
        if unmapped:
            out.append(f'{source}: {len(unmapped)} contact bodies are not in {self.robot.source} (their contacts '
                       f'count as forbidden): {", ".join(unmapped[:12])}{" ..." if len(unmapped) > 12 else ""}')
        if self.contact_bodies_seen and not self.contact_bodies_seen & configured:
            out.append(f'{source}: none of the {len(configured)} contact bodies of {self.robot.source} appears in '
                       f'/contacts: check the names (safemanip doctor --config {self.robot.source} BAG)')
        return out

    def evaluate(self, now_s: float) -> Predicates:
        """Every predicate at the frame ``now_s`` (seconds)."""
        out = self.view(now_s)
        out.update(self.tf.flush()[-1])
        return out

    def view(self, now_s: float) -> Predicates:
        """The frame at ``now_s`` as the inputs are now: every predicate but
        the TF ones, which :meth:`flush` adds (for all frames viewed since
        the last flush at once).  Sources in :data:`SOURCE_ORDER`."""
        out = self.joints.evaluate(now_s)
        if self.fixtures.names:
            out.update(self.fixtures.evaluate(now_s))
        contact = self.contacts.evaluate(now_s, closure_of(out)[1])
        out.update(contact)
        if self.skills is not None:
            out.update(self.skills.evaluate(now_s))
        objects = self.robot.tf.objects
        self.tf.view(now_s, {**dict.fromkeys(objects), **grasps_of(contact, objects)}, pick_target_of(out))
        if self.wrench is not None:
            out.update(self.wrench.evaluate(now_s))
        if self.camera is not None:
            out.update(self.camera.evaluate(now_s))
        return out

    def flush(self, viewed: list[Predicates]) -> list[Predicates]:
        """``viewed`` (what :meth:`view` returned for each frame since the
        last flush, in order) completed with the TF predicates."""
        for out, tf in zip(viewed, self.tf.flush(), strict=True):
            out.update(tf)
        return viewed
