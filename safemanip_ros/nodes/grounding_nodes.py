"""Grounding nodes: one per signal source, thin adapters around
:mod:`safemanip_ros.grounding`.

Each node loads the robot/scene configuration (parameter ``config``),
subscribes to its inputs, and publishes ``safemanip_ros/PredicateArray`` on
``predicates/<source>`` at ``rate_hz`` (default: the configuration's rate),
stamped with the node clock (``use_sim_time`` works).  Values that cannot be
determined (stale, NaN, missing, out of order) are published with
``unknown = true``.

Executables: ``joint_state_grounding``, ``contact_grounding``,
``tf_grounding``, ``camera_grounding``, ``skill_grounding``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import TransformStamped, WrenchStamped
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image, JointState
from tf2_msgs.msg import TFMessage
from trajectory_msgs.msg import JointTrajectory

from safemanip_ros.msg import ContactArray, PredicateArray, SkillEvent

from ..errors import SafemanipError
from ..grounding.base import Freshness, Predicates
from ..grounding.camera import CameraError, CameraGrounding, MarkerDetector, depth_metres
from ..grounding.colour_depth import RgbdPairs
from ..grounding.config import RobotConfig, load_robot_config
from ..grounding.contacts import ContactGrounding, WrenchGrounding
from ..grounding.joints import FixtureGrounding, JointStateGrounding
from ..grounding.messages import (
    SOURCE_ORDER,
    closure_of,
    command_positions,
    feed_contacts,
    feed_joint_state,
    feed_tf,
    feed_wrench,
    grasps_of,
    image_array,
    names_pick_target,
    pick_target_of,
    skill_event_sample,
)
from ..grounding.skills import SkillGrounding
from ..grounding.tf import TfGrounding, TransformTree, transforms_by_stamp
from ..monitor.queue import StampQueue
from ..settings import CONTACT_GROUNDING, GROUNDING, RATE_HZ, TF_GROUNDING
from ..stamps import StampSkew, stamp_ns, stamp_s
from .conversions import ns_from_time, predicate_values
from .guard import CallbackGuard
from .params import RosParameters, check_setting, declare_settings
from .predicate_wire import PredicateArrayWire
from .qos import RELIABLE, RELIABLE_INPUTS, SENSOR_INPUTS, SENSORS, SKILL_EVENTS, STATIC_TF
from .runner import run_node as _run
from .runner import take_delivered

HEALTH_WARNINGS = ('stale_evaluations', 'nan_values', 'missing_inputs', 'out_of_order', 'clock_jumps', 'malformed',
                   'gross_outliers')
"""Input-health counters whose growth is a warning on /diagnostics (``samples`` is not)."""
MAX_DEFERRED = 1000
"""Held-back inputs at most (a publisher whose clock runs far ahead is not buffered without bound)."""


def _stamp_ns(msg) -> int | None:  # type: ignore[no-untyped-def]
    """A message's header stamp (a TFMessage: its newest transform's), None
    when it has none or it is 0 ("now")."""
    header = getattr(msg, 'header', None)
    if header is not None:
        return ns_from_time(header.stamp) or None
    transforms = getattr(msg, 'transforms', None)
    if transforms:
        return max(ns_from_time(t.header.stamp) for t in transforms) or None
    return None


class GroundingNode(RosParameters, CallbackGuard, Node):
    """Loads the configuration, publishes the source's predicates on a timer
    and on each input."""

    source = ''
    fast_inputs = False     # inputs far above the frame rate (TF): publications rate-limited

    def __init__(self, node_name: str) -> None:
        self._inputs: list[Any] = []      # input subscriptions, drained before each in-process sample
        # (callback, msg) of inputs from the node's future, by stamp
        self._deferred: StampQueue[tuple[Callable[[Any], None], Any]] = StampQueue()
        self._skew = StampSkew()       # inputs stamped on another clock than ours
        self._inputs_freshness: list[Freshness] | None = None
        self.last_arrival_ns: int | None = None    # time.monotonic_ns() of the newest input message
        super().__init__(node_name)
        declare_settings(self, GROUNDING, {'output_topic': f'predicates/{self.source}'})
        path = self.get_parameter('config').value
        if not path:
            raise SafemanipError(f'{node_name}: parameter config (a config/robots/*.yaml file) is required')
        self.robot: RobotConfig = load_robot_config(path)
        reliability = self.get_parameter('input_reliability').value
        if reliability not in ('best_effort', 'reliable'):
            raise SafemanipError(f'{node_name}: input_reliability {reliability!r}: expected best_effort or reliable')
        # Sensor inputs: best effort (matches every publisher) unless the robot's publishers are reliable
        # (ros2_control's joint_state_broadcaster, simulators): then reliable, so a busy machine loses nothing.
        self.input_qos = SENSOR_INPUTS if reliability == 'best_effort' else RELIABLE_INPUTS
        rate = (float(check_setting(self, RATE_HZ)) if self.get_parameter('rate_hz').value != 0
                else self.robot.rate_hz)    # 0: the robot's rate
        self._pub = self.create_publisher(PredicateArray, self.get_parameter('output_topic').value, RELIABLE)
        self._wire = PredicateArrayWire(self.source)      # published as bytes: no message objects per frame
        self.sample_times_s = SampleTimes()
        self._seq = 0
        # In safemanip run the monitor samples this source on its own frame
        # clock (sample()): one hop, no timer of ours.
        self.sampled_by_monitor = bool(self.get_parameter('sampled_by_monitor').value)
        self._timer = None if self.sampled_by_monitor else self.create_timer(1.0 / rate, self._tick)
        # One hop: an input is published at once, not at the next tick of a
        # second unsynchronised timer (the timer keeps staleness visible when
        # inputs stop).  Sources whose inputs come fast (TF) publish at most
        # once per half period; the others within 5 ms of each input.
        self._on_input = bool(self.get_parameter('publish_on_input').value) and not self.sampled_by_monitor
        self._min_gap_ns = int(0.5e9 / rate) if self.fast_inputs else 5_000_000
        self._last_pub_ns = 0
        # The input health (why predicates were unknown, what was left out) on /diagnostics once a second.
        self._pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', RELIABLE)
        self._health_before: dict[str, int] = {}
        self.create_timer(1.0, self._publish_health)

    def _publish_health(self) -> None:
        """``safemanip/grounding/<source>``: the input health's counters;
        WARN when one that means bad or missing input grew in the last second."""
        health = getattr(getattr(self, 'grounding', None), 'health', None)
        if health is None:
            return
        counts = health.as_dict()
        grew = {k: n - self._health_before.get(k, 0) for k, n in counts.items()
                if k in HEALTH_WARNINGS and n > self._health_before.get(k, 0)}
        self._health_before = counts
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status.append(DiagnosticStatus(
            level=DiagnosticStatus.WARN if grew else DiagnosticStatus.OK, name=f'safemanip/grounding/{self.source}',
            hardware_id=self.get_name(),
            message=('in the last second: ' + ', '.join(f'{n} {k.replace("_", " ")}' for k, n in grew.items())
                     if grew else 'inputs as expected'),
            values=[KeyValue(key=k, value=str(n)) for k, n in counts.items()]))
        self._pub_diag.publish(arr)

    @property
    def output_topic(self) -> str:
        """The fully resolved topic this source publishes its predicates on."""
        return str(self._pub.topic_name)

    def input_arrived(self) -> None:
        """Publish now (called by input callbacks), unless just published."""
        if self._on_input and self.get_clock().now().nanoseconds - self._last_pub_ns >= self._min_gap_ns:
            self._tick()

    def evaluate(self, now_s: float) -> Predicates:
        raise NotImplementedError

    def create_subscription(self, msg_type: Any, topic: str, callback: Callable[..., Any], *args: Any,
                            **kwargs: Any) -> Any:
        """An input subscription: drained before each in-process sample, and
        a message stamped after this node's clock is held back until the
        clock reaches its stamp (simulators publish the state of step t
        just before /clock reaches t; a frame must not see its future)."""
        static = topic == '/tf_static'
        # The robot's inputs, not our own predicates (TF grounding hears the grasp): their arrival phase
        # is what the monitor's phase lock follows.
        robot_input = not static and msg_type is not PredicateArray

        def deferring(msg, _cb=callback):  # type: ignore[no-untyped-def]
            if robot_input:
                self.last_arrival_ns = time.monotonic_ns()
            stamp_ns = None if static else _stamp_ns(msg)
            if stamp_ns is None:
                _cb(msg)
                return
            self._check_clock(topic, stamp_ns)
            # Through the queue whenever it holds anything, so inputs are applied in stamp order.
            self._deferred.push(stamp_ns, (_cb, msg))
            if len(self._deferred) > MAX_DEFERRED:
                self._release_deferred(self._deferred.oldest_ns or 0)
            elif not self.sampled_by_monitor:
                # Sampled by the monitor, inputs are released on its clock only (sample()): every
                # node of a process has its own /clock subscription, and this one may run ahead.
                self._release_deferred(self.get_clock().now().nanoseconds)

        sub = super().create_subscription(msg_type, topic, deferring, *args, **kwargs)
        self._inputs.append(sub)
        return sub

    def _check_clock(self, topic: str, stamp_ns: int) -> None:
        """Say once per input when its stamps are on another clock than
        ours: its predicates read as unknown, and this is why."""
        skew_s = self._skew.check(topic, stamp_ns, self.get_clock().now().nanoseconds)
        if skew_s is not None and self._skew.first(topic):
            self.get_logger().error(StampSkew.explain(self.resolve_topic_name(topic), skew_s,
                                                      bool(self.get_parameter('use_sim_time').value)))

    def _release_deferred(self, now_ns: int) -> None:
        """Apply held-back inputs whose stamp the clock has reached, in stamp order."""
        for _, (callback, msg) in self._deferred.due(now_ns):
            callback(msg)

    def upstream(self, values: Predicates) -> None:
        """In-process sampling: the values the sources sampled before this
        one at the same frame (a source that reads another's predicates
        takes them from here instead of from the topic, one frame late)."""

    def sample(self, now_ns: int, upstream: Predicates | None = None, aged_at_ns: int | None = None) -> Predicates:
        """Evaluate at ``now_ns`` (node clock), publish as usual, and return
        the values (the monitor's frame, in one process).  Inputs already
        delivered are taken first: the executor takes one message per
        subscription per wake-up, so under load they would wait behind it.
        ``aged_at_ns``: a caught-up frame's inputs are judged stale at that
        time (:func:`~safemanip_ros.monitor.clock.ageing_ns`)."""
        t0 = time.perf_counter()
        for sub in self._inputs:
            take_delivered(sub, sub.callback)
        self._release_deferred(now_ns)
        if upstream:
            self.upstream(upstream)
        inputs = self._freshness()
        for f in inputs:
            f.judged_at_s = None if aged_at_ns is None else aged_at_ns * 1e-9
        t1 = time.perf_counter()
        try:
            values = self.evaluate(now_ns * 1e-9)
        finally:
            for f in inputs:
                f.judged_at_s = None
        t2 = time.perf_counter()
        self._pub.publish(self._wire.encode(values, now_ns, self._seq))
        self._seq += 1
        self._last_pub_ns = now_ns
        self.sample_times_s.add(t1 - t0, t2 - t1, time.perf_counter() - t2)
        return values

    def _freshness(self) -> list[Freshness]:
        """The freshness of each input this node grounds (its groundings'
        ``freshness``), found once."""
        if self._inputs_freshness is None:
            self._inputs_freshness = [v.freshness for v in vars(self).values()
                                      if isinstance(getattr(v, 'freshness', None), Freshness)]
        return self._inputs_freshness

    def _tick(self) -> None:
        now_ns = self.get_clock().now().nanoseconds
        self._release_deferred(now_ns)
        self._last_pub_ns = now_ns
        values = self.evaluate(now_ns * 1e-9)
        self._pub.publish(self._wire.encode(values, now_ns, self._seq))
        self._seq += 1


class JointStateGroundingNode(GroundingNode):
    """Subscribes ``joint_states`` (sensor_msgs/JointState) and, when the
    configuration names one, the command topic (trajectory_msgs/JointTrajectory)."""

    source = 'joint_states'

    def __init__(self) -> None:
        super().__init__('joint_state_grounding')
        self.grounding = JointStateGrounding(self.robot.joints)
        self.fixtures = FixtureGrounding(self.robot.fixtures)
        self.create_subscription(JointState, 'joint_states', self._on_joint_state, self.input_qos)
        if self.robot.command_topic:
            self.create_subscription(JointTrajectory, self.robot.command_topic, self._on_command, RELIABLE)

    def _on_joint_state(self, msg: JointState) -> None:
        feed_joint_state(self.grounding, self.fixtures, msg)
        self.input_arrived()

    def _on_command(self, msg: JointTrajectory) -> None:
        target = command_positions(self.robot.joints.arm_joints, msg)
        if target is not None:
            self.grounding.set_command(target)

    def evaluate(self, now_s: float) -> Predicates:
        out = self.grounding.evaluate(now_s)
        if self.fixtures.names:
            out.update(self.fixtures.evaluate(now_s))
        return out


class ContactGroundingNode(GroundingNode):
    """Subscribes ``contacts`` (safemanip_ros/ContactArray), ``wrench``
    (geometry_msgs/WrenchStamped; parameter ``wrench_topic``, empty = none)
    and, when the configuration has gripper joints, ``joint_states`` for the
    finger-closure half of the grasp test."""

    source = 'contacts'

    def __init__(self) -> None:
        super().__init__('contact_grounding')
        declare_settings(self, CONTACT_GROUNDING)
        self.grounding = ContactGrounding(self.robot.contacts)
        self.wrench = WrenchGrounding(self.robot.wrench)
        wrench_topic = self.get_parameter('wrench_topic').value or self.robot.wrench_topic
        self._use_wrench = bool(wrench_topic)
        self.fingers = JointStateGrounding(self.robot.joints)
        self._closure_upstream: tuple[bool, bool | None] = (False, None)
        self.create_subscription(ContactArray, 'contacts', self._on_contacts, self.input_qos)
        if self.robot.contacts.require_fingers_closed and not self.sampled_by_monitor:
            # Sampled in one process, the closure comes from the joint grounding's own sample of the
            # frame (upstream()): a second JointState subscription would only repeat its work.
            self.create_subscription(JointState, 'joint_states', self._on_joint_state, self.input_qos)
        if self._use_wrench:
            self.create_subscription(WrenchStamped, wrench_topic, self._on_wrench, self.input_qos)

    def _on_contacts(self, msg: ContactArray) -> None:
        feed_contacts(self.grounding, msg)
        self.input_arrived()

    def _on_wrench(self, msg: WrenchStamped) -> None:
        feed_wrench(self.wrench, msg)

    def _on_joint_state(self, msg: JointState) -> None:
        feed_joint_state(self.fingers, None, msg)

    def upstream(self, values: Predicates) -> None:
        # In one process the joint grounding's own gripper_closed at this frame is the closure.
        given, closed = closure_of(values)
        if given:
            self._closure_upstream = (True, closed)

    def evaluate(self, now_s: float) -> Predicates:
        given, closed = self._closure_upstream
        if not given:
            closed = closure_of(self.fingers.evaluate(now_s))[1]
        out = self.grounding.evaluate(now_s, closed)
        if self._use_wrench:
            out.update(self.wrench.evaluate(now_s))
        return out


class TfGroundingNode(GroundingNode):
    """Subscribes ``/tf`` and ``/tf_static``; takes grasp state from the
    contact grounding's ``object_grasped_raw_<object>`` (parameter
    ``grasp_topic``) for the slip predicates, and the object a running pick
    skill names from the skill grounding's ``pick_target_<object>``
    (parameter ``skills_topic``) for the pick precondition.  Sampled by the
    monitor, it takes both from the sources sampled before it instead
    (:meth:`upstream`), and subscribes neither topic."""

    source = 'tf'
    fast_inputs = True

    def __init__(self) -> None:
        super().__init__('tf_grounding')
        declare_settings(self, TF_GROUNDING)
        self.grounding = TfGrounding(self.robot.tf)
        self._grasped: dict[str, bool | None] = {o: None for o in self.robot.tf.objects}
        self._pick_target: str | None = None
        self.create_subscription(TFMessage, '/tf', lambda m: self._on_tf(m, False), self.input_qos)
        self.create_subscription(TFMessage, '/tf_static', lambda m: self._on_tf(m, True), STATIC_TF)
        # Sampled by the monitor, grasp and pick target come from the sources sampled before this one
        # (upstream): taking them again from DDS woke the executor 100 times a second for values it had.
        if not self.sampled_by_monitor:
            self.create_subscription(PredicateArray, self.get_parameter('grasp_topic').value, self._on_grasp,
                                     RELIABLE)
        if self.robot.skills.target_names and not self.sampled_by_monitor:
            self.create_subscription(PredicateArray, self.get_parameter('skills_topic').value,
                                     lambda m: self._take_target(predicate_values(m)), RELIABLE)

    def _on_tf(self, msg: TFMessage, static: bool) -> None:
        feed_tf(self.grounding, msg, static)
        self.input_arrived()

    def upstream(self, values: Predicates) -> None:
        self._take_grasp(values)
        self._take_target(values)

    def _take_target(self, values: Predicates) -> None:
        if names_pick_target(values):
            self._pick_target = pick_target_of(values)

    def _on_grasp(self, msg: PredicateArray) -> None:
        self._take_grasp(predicate_values(msg))

    def _take_grasp(self, values: Predicates) -> None:
        self._grasped.update(grasps_of(values, self._grasped))

    def evaluate(self, now_s: float) -> Predicates:
        return self.grounding.evaluate(now_s, self._grasped, self._pick_target)


class CameraGroundingNode(GroundingNode):
    """Subscribes ``image`` (sensor_msgs/Image) and ``camera_info``; publishes
    colour-region predicates and each configured marker's pose on ``/tf``
    (parent: the configuration's camera frame, child: the entity frame).
    With ``camera.objects`` configured it also subscribes ``depth`` (32FC1
    metres or 16UC1 millimetres, aligned with ``image``) and publishes, for
    each RGB-D pair of one stamp, the objects found in it by colour and depth
    (:mod:`safemanip_ros.grounding.colour_depth`) on ``/tf``, stamped with
    the capture: parent the world frame (the camera's pose then read from
    ``/tf`` and ``/tf_static``), child the entity's frame, upright."""

    source = 'camera'

    def __init__(self) -> None:
        super().__init__('camera_grounding')
        self.grounding = CameraGrounding(self.robot.camera)
        self.detector = MarkerDetector(self.robot.marker_dictionary, self.robot.marker_size_m) \
            if self.robot.markers else None
        self.looks = list(self.robot.camera.objects)
        self._info: CameraInfo | None = None
        self._pairs = RgbdPairs(self.looks)        # images waiting for their depth (or back), objects located
        self._tf_pub = self.create_publisher(TFMessage, '/tf', RELIABLE)
        # The camera's pose in the world, from TF: objects are published there, upright (no orientation is
        # estimated; the identity in the camera's frame would give every object the camera's tilt).
        self._tree = TransformTree()
        self._published = frozenset(look.name for look in self.looks)
        if self.looks:
            self.create_subscription(TFMessage, '/tf', lambda m: self._on_tf(m, False), self.input_qos)
            self.create_subscription(TFMessage, '/tf_static', lambda m: self._on_tf(m, True), STATIC_TF)
        self.create_subscription(CameraInfo, 'camera_info', self._on_info, SENSORS)
        self.create_subscription(Image, 'image', self._on_image, SENSORS)
        if self.looks:
            self.create_subscription(Image, 'depth', self._on_depth, SENSORS)

    def _on_info(self, msg: CameraInfo) -> None:
        self._info = msg
        self._pairs.set_intrinsics(np.array(msg.k))

    def _on_tf(self, msg: TFMessage, static: bool) -> None:
        for stamp, items in transforms_by_stamp(msg.transforms):
            for parent, child, translation, rotation in items:
                if child not in self._published:        # our own objects are not the camera's chain
                    self._tree.set_transform(parent, child, stamp, translation, rotation, static=static)

    def _decoded(self, msg: Image, what: str) -> np.ndarray | None:
        """``msg`` as an array (``what``: ``image``, or ``depth`` in metres), None (said and counted) when it
        cannot be used."""
        try:
            img = image_array(msg)
            return depth_metres(msg.encoding, img) if what == 'depth' else img
        except CameraError as err:
            self.get_logger().error(f'{what}: {err.one_line()}', throttle_duration_sec=5.0)
            self.grounding.health.missing_inputs += 1
            return None

    def _on_depth(self, msg: Image) -> None:
        metres = self._decoded(msg, 'depth')
        if metres is not None:
            self._pair('depth', msg, metres)

    def _pair(self, kind: str, msg: Image, array: np.ndarray) -> None:
        """Keep ``msg`` decoded; publish the objects once its partner of the same stamp has come."""
        located = self._pairs.add(kind, stamp_ns(msg.header.stamp), msg.header.frame_id or self.robot.camera_frame,
                                  array, (self._tree, self.robot.tf.world_frame))
        if located is None:
            return
        if located.problem is not None:
            self.get_logger().error(f'objects: {located.problem}', throttle_duration_sec=5.0)
            self.grounding.health.missing_inputs += 1
            return
        out = TFMessage()
        for parent, child, (x, y, z), (qx, qy, qz, qw) in located.transforms():
            t = TransformStamped()
            t.header.stamp = msg.header.stamp
            t.header.frame_id, t.child_frame_id = parent, child
            t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = x, y, z
            t.transform.rotation.x, t.transform.rotation.y, t.transform.rotation.z, t.transform.rotation.w = \
                qx, qy, qz, qw          # no orientation estimated: the identity, as documented
            out.transforms.append(t)
        if out.transforms:
            self._tf_pub.publish(out)

    def _on_image(self, msg: Image) -> None:
        img = self._decoded(msg, 'image')
        if img is None:
            return
        if self.looks:
            self._pair('image', msg, img)
        self.grounding.update(stamp_s(msg.header.stamp), img)
        if self.detector is None or self._info is None:
            return
        poses = self.detector.detect(img, np.array(self._info.k).reshape(3, 3), list(self._info.d))
        out = TFMessage()
        for pose in poses:
            frame = self.robot.markers.get(pose.marker_id)
            if frame is None:
                continue
            t = TransformStamped()
            t.header.stamp = msg.header.stamp
            t.header.frame_id = msg.header.frame_id or self.robot.camera_frame
            t.child_frame_id = frame
            t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = \
                (float(v) for v in pose.translation_m)
            q = _quaternion(pose.rotation)
            t.transform.rotation.x, t.transform.rotation.y, t.transform.rotation.z, t.transform.rotation.w = q
            out.transforms.append(t)
        if out.transforms:
            self._tf_pub.publish(out)

    def evaluate(self, now_s: float) -> Predicates:
        return self.grounding.evaluate(now_s)


class SkillGroundingNode(GroundingNode):
    """Subscribes the configuration's ``skills.topic``
    (safemanip_ros/SkillEvent, reliable: a lost START or END would be a
    wrong onset) and publishes ``<action>_approach`` for each SafeManip
    action the configuration maps a stack skill to.  A configuration without
    a ``skills:`` section is a configuration error here."""

    source = 'skills'

    def __init__(self) -> None:
        super().__init__('skill_grounding')
        sk = self.robot.skills
        if not sk.topic:
            raise SafemanipError(f'skill_grounding: {self.robot.source} has no skills: section (map the stack\'s '
                                 f'skill names to SafeManip actions, or do not start this node)')
        self.grounding = SkillGrounding(sk)
        self._warned: set[str] = set()
        self.create_subscription(SkillEvent, sk.topic, self._on_event, SKILL_EVENTS)

    def _on_event(self, msg: SkillEvent) -> None:
        sample = skill_event_sample(msg)
        self.grounding.update(*sample)
        skill = sample[1]
        if skill in self.grounding.unmapped and skill not in self._warned:
            self._warned.add(skill)
            self.get_logger().warning(f'skill {skill!r} is not in skills.actions of {self.robot.source} '
                                      f'({", ".join(sorted(self.robot.skills.actions))}): ignored')
        self.input_arrived()

    def evaluate(self, now_s: float) -> Predicates:
        return self.grounding.evaluate(now_s)


@dataclass
class SampleTimes:
    """Where a source's in-process samples spent their time, seconds, summed
    since :meth:`clear` (a frame's overrun line names them)."""

    inputs_s: float = 0.0       # taking the inputs delivered, releasing held ones
    evaluate_s: float = 0.0     # the grounding's evaluation
    publish_s: float = 0.0      # encoding and publishing the predicates

    def add(self, inputs_s: float, evaluate_s: float, publish_s: float) -> None:
        self.inputs_s += inputs_s
        self.evaluate_s += evaluate_s
        self.publish_s += publish_s

    def clear(self) -> None:
        self.inputs_s = self.evaluate_s = self.publish_s = 0.0

    @property
    def total_s(self) -> float:
        return self.inputs_s + self.evaluate_s + self.publish_s


class GroundingChain:
    """The grounding nodes of one process as one component the monitor
    samples at each frame (``safemanip run``): in :data:`SOURCE_ORDER`, each
    handed what the sources before it gave at the same frame."""

    def __init__(self, nodes: Iterable[GroundingNode]) -> None:
        self.nodes = sorted(nodes, key=lambda n: SOURCE_ORDER.index(n.source))

    def __bool__(self) -> bool:
        return bool(self.nodes)

    @property
    def last_arrival_ns(self) -> int | None:
        """``time.monotonic_ns()`` of the newest input of any source (None: none yet)."""
        return max((n.last_arrival_ns for n in self.nodes if n.last_arrival_ns), default=None)

    def clear_times(self) -> None:
        """Start the sources' :class:`SampleTimes` afresh."""
        for node in self.nodes:
            node.sample_times_s.clear()

    def times_said(self) -> str:
        """Each source's sampling time since :meth:`clear_times` (ms), the
        slowest one's parts too: ``joint_states 0.4, tf 8.7 (inputs 0.1,
        evaluate 8.5, publish 0.1)``."""
        slowest = max(self.nodes, key=lambda n: n.sample_times_s.total_s, default=None)
        parts = []
        for node in self.nodes:
            times = node.sample_times_s
            parts.append(f'{node.source} {times.total_s * 1e3:.1f}' + (
                f' (inputs {times.inputs_s * 1e3:.1f}, evaluate {times.evaluate_s * 1e3:.1f}, publish '
                f'{times.publish_s * 1e3:.1f})' if node is slowest else ''))
        return ', '.join(parts)

    def sample(self, now_ns: int, aged_at_ns: int | None = None) -> list[Predicates]:
        """Each source's values at ``now_ns`` (node clock; inputs aged at
        ``aged_at_ns``, default ``now_ns``), in the order of :attr:`nodes`;
        each source also publishes them as usual (:meth:`GroundingNode.sample`)."""
        upstream: Predicates = {}
        out = []
        for node in self.nodes:
            values = node.sample(now_ns, upstream, aged_at_ns)
            upstream.update(values)
            out.append(values)
        return out


def _quaternion(R: np.ndarray) -> tuple[float, float, float, float]:
    """(x, y, z, w) of a rotation matrix."""
    w = np.sqrt(max(0.0, 1.0 + R[0, 0] + R[1, 1] + R[2, 2])) / 2
    x = np.sqrt(max(0.0, 1.0 + R[0, 0] - R[1, 1] - R[2, 2])) / 2
    y = np.sqrt(max(0.0, 1.0 - R[0, 0] + R[1, 1] - R[2, 2])) / 2
    z = np.sqrt(max(0.0, 1.0 - R[0, 0] - R[1, 1] + R[2, 2])) / 2
    x = np.copysign(x, R[2, 1] - R[1, 2])
    y = np.copysign(y, R[0, 2] - R[2, 0])
    z = np.copysign(z, R[1, 0] - R[0, 1])
    return float(x), float(y), float(z), float(w)


def joint_state_main(args: list[str] | None = None) -> int:
    return _run(JointStateGroundingNode, 'joint_state_grounding', args)


def contact_main(args: list[str] | None = None) -> int:
    return _run(ContactGroundingNode, 'contact_grounding', args)


def tf_main(args: list[str] | None = None) -> int:
    return _run(TfGroundingNode, 'tf_grounding', args)


def camera_main(args: list[str] | None = None) -> int:
    return _run(CameraGroundingNode, 'camera_grounding', args)


def skill_main(args: list[str] | None = None) -> int:
    return _run(SkillGroundingNode, 'skill_grounding', args)


__all__ = ['CameraGroundingNode', 'ContactGroundingNode', 'JointStateGroundingNode', 'SkillGroundingNode',
           'TfGroundingNode']
