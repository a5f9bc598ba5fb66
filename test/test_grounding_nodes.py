"""Grounding nodes in their own processes over real DDS: messages in →
expected predicate arrays out (and marker poses on /tf)."""

from __future__ import annotations

import contextlib
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
from conftest import REPO
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import TransformStamped
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from ros_helpers import ros_node, spin_until, stop_process
from sensor_msgs.msg import CameraInfo, Image, JointState
from tf2_msgs.msg import TFMessage

from safemanip_ros.msg import Contact, ContactArray, PredicateArray
from safemanip_ros.nodes.conversions import predicate_values, time_from_ns

CONFIG = str(REPO / 'config' / 'robots' / 'panda_demo.yaml')
BIN = Path(sys.executable).parent
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
STATIC = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
ARM = [f'robot0_joint{i}' for i in range(1, 8)]
FINGERS = ['gripper0_finger_joint1', 'gripper0_finger_joint2']

pytestmark = pytest.mark.ros


class Harness:
    def __init__(self, log_dir: Path, executable: str, *params: str) -> None:
        args = [str(BIN / executable), '--ros-args', '-p', f'config:={CONFIG}']
        for p in params:
            args += ['-p', p]
        # A log file, not a pipe: a full pipe would block the node.  In the test's folder: kept on failure.
        self.log = open(log_dir / f'{executable}.log', 'w+')
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, text=True)
        self._ros = contextlib.ExitStack()
        self.node, self.executor = self._ros.enter_context(ros_node(f'test_{executable}'))
        self.latest: dict[str, dict] = {}

    def listen(self, topic: str) -> None:
        self.node.create_subscription(PredicateArray, topic,
                                      lambda m: self.latest.__setitem__(topic, predicate_values(m)), RELIABLE)

    def now_stamp(self):
        return time_from_ns(time.time_ns())

    def spin_until(self, cond, timeout_s: float = 30.0, each=None) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if each is not None:
                each()
            self.executor.spin_once(timeout_sec=0.05)
            if cond():
                return True
        return False

    def close(self) -> None:
        self._ros.close()
        stop_process(self.proc)
        self.log.close()


@pytest.fixture
def harness_factory(tmp_path):
    made = []

    def make(*a):
        h = Harness(tmp_path, *a)
        made.append(h)
        return h
    yield make
    for h in made:
        h.close()


def test_joint_state_node(harness_factory):
    h = harness_factory('joint_state_grounding')
    topic = 'predicates/joint_states'
    h.listen(topic)
    pub = h.node.create_publisher(JointState, 'joint_states', RELIABLE)
    fingers = [0.04]

    def send():
        msg = JointState()
        msg.header.stamp = h.now_stamp()
        msg.name = ARM + FINGERS + ['microwave_door_hinge']
        msg.position = [0.0, 0.0, 0.0, -1.5, 0.0, 1.5, 0.0] + [fingers[0]] * 2 + [-1.2]
        msg.velocity = [0.0] * 10
        pub.publish(msg)

    assert h.spin_until(lambda: h.latest.get(topic, {}).get('gripper_open') is True, each=send), \
        h.latest.get(topic)
    v = h.latest[topic]
    assert v['arm_stopped'] is True and v['joint_near_limit'] is False and v['gripper_closed'] is False
    assert v['fixture_fully_open_microwave'] is True and v['fixture_fully_closed_microwave'] is False

    def close_gripper():
        fingers[0] = max(0.0, fingers[0] - 0.004)
        send()
    assert h.spin_until(lambda: h.latest[topic].get('gripper_closing') is True, each=close_gripper)
    # Stop publishing: past the 0.2 s staleness limit everything is unknown, not false.
    assert h.spin_until(lambda: all(x is None for x in h.latest[topic].values()), timeout_s=10)


@pytest.mark.slow
def test_joint_state_node_survives_malformed_messages(harness_factory):
    """An empty JointState (first message, then again), mismatched arrays and
    +inf positions keep the node alive and give unknowns, not falses."""
    h = harness_factory('joint_state_grounding')
    topic = 'predicates/joint_states'
    h.listen(topic)
    pub = h.node.create_publisher(JointState, 'joint_states', RELIABLE)
    kind = ['empty']

    def send():
        msg = JointState()
        msg.header.stamp = h.now_stamp()
        if kind[0] == 'mismatched':
            msg.name = ARM + FINGERS
            msg.position = [0.0, 0.1]
        elif kind[0] == 'inf':
            msg.name = ARM + FINGERS
            msg.position = [float('inf')] * 7 + [0.04, 0.04]
        elif kind[0] == 'good':
            msg.name = ARM + FINGERS
            msg.position = [0.0, 0.0, 0.0, -1.5, 0.0, 1.5, 0.0, 0.04, 0.04]
        pub.publish(msg)

    for k in ('empty', 'mismatched', 'inf'):
        kind[0] = k
        assert h.spin_until(lambda: h.latest.get(topic, {}).get('joint_near_limit', False) is None
                            and 'gripper_open' in h.latest[topic], each=send, timeout_s=15), (k, h.latest.get(topic))
        assert h.proc.poll() is None, k
    # Fingers fine, arm at +inf: the arm's predicates are unknown, the gripper's known.
    assert h.spin_until(lambda: h.latest[topic].get('gripper_open') is True
                        and h.latest[topic].get('joint_near_limit', False) is None, each=send)
    kind[0] = 'empty'
    for _ in range(5):
        send()
        h.executor.spin_once(timeout_sec=0.05)
    kind[0] = 'good'
    assert h.spin_until(lambda: h.latest[topic].get('joint_near_limit') is False, each=send)
    assert h.proc.poll() is None
    # The input health says so on /diagnostics: WARN while malformed messages came, OK once good ones flow.
    statuses: list = []
    h.node.create_subscription(DiagnosticArray, '/diagnostics', lambda m: statuses.extend(
        s for s in m.status if s.name == 'safemanip/grounding/joint_states'), RELIABLE)
    kind[0] = 'empty'
    assert h.spin_until(lambda: any(s.level == DiagnosticStatus.WARN and 'malformed' in s.message
                                    for s in statuses), each=send), [s.message for s in statuses]
    counts = {kv.key: int(kv.value) for kv in statuses[-1].values}
    assert counts['malformed'] > 0 and counts['samples'] > 0, counts
    kind[0] = 'good'
    assert h.spin_until(lambda: statuses[-1].level == DiagnosticStatus.OK
                        and statuses[-1].message == 'inputs as expected', each=send), [s.message for s in statuses[-3:]]


@pytest.mark.slow
def test_joint_states_on_another_clock_are_named_once(harness_factory):
    """Joint states stamped 1000 s behind the node's clock (a simulator's
    /clock against a grounding on the system time) are stale on arrival:
    the predicates are unknown, and the node says why, once."""
    h = harness_factory('joint_state_grounding')
    topic = 'predicates/joint_states'
    h.listen(topic)
    pub = h.node.create_publisher(JointState, 'joint_states', RELIABLE)

    def send():
        msg = JointState()
        msg.header.stamp = time_from_ns(time.time_ns() - 1000 * 10**9)
        msg.name = ARM + FINGERS
        msg.position = [0.0, 0.0, 0.0, -1.5, 0.0, 1.5, 0.0, 0.04, 0.04]
        pub.publish(msg)
    assert h.spin_until(lambda: 'gripper_open' in h.latest.get(topic, {}), each=send)
    for _ in range(20):
        send()
        h.executor.spin_once(timeout_sec=0.05)
    assert all(v is None for v in h.latest[topic].values()), h.latest[topic]
    h.log.flush()
    h.log.seek(0)
    said = [line for line in h.log.read().splitlines() if 'behind this node' in line]
    assert len(said) == 1 and '/joint_states: a sample stamped 1000' in said[0] and 'use_sim_time' in said[0], said


@pytest.mark.slow
def test_contact_node(harness_factory):
    h = harness_factory('contact_grounding')
    topic = 'predicates/contacts'
    h.listen(topic)
    pub = h.node.create_publisher(ContactArray, 'contacts', RELIABLE)
    joints_pub = h.node.create_publisher(JointState, 'joint_states', RELIABLE)
    pairs = [('gripper0_finger1_pad_collision', 'mug_g0'), ('gripper0_finger2_pad_collision', 'mug_g1')]
    force = [2.0]
    fingers_m: list[float] = []          # no joint states yet: the fingers' closure is unknown

    def send():
        msg = ContactArray()
        msg.header.stamp = h.now_stamp()
        msg.contacts = [Contact(body1=a, body2=b, normal_force_n=force[0]) for a, b in pairs]
        pub.publish(msg)
        if fingers_m:
            js = JointState()
            js.header.stamp = msg.header.stamp
            js.name = ['gripper0_finger_joint1', 'gripper0_finger_joint2']
            js.position = list(fingers_m)
            joints_pub.publish(js)

    # Finger contacts alone are not a grasp: SafeManip also needs every finger closed.
    assert h.spin_until(lambda: h.latest.get(topic, {}).get('forbidden_contact') is False, each=send), \
        h.latest.get(topic)
    assert h.latest[topic]['object_grasped_raw_mug'] is None
    fingers_m[:] = [0.04, 0.04]          # fully open fingers touching the mug: not a grasp
    assert h.spin_until(lambda: h.latest[topic].get('object_grasped_raw_mug') is False, each=send)
    fingers_m[:] = [0.02, 0.02]
    assert h.spin_until(lambda: h.latest.get(topic, {}).get('object_grasped_raw_mug') is True, each=send), \
        h.latest.get(topic)
    v = h.latest[topic]
    assert v['forbidden_contact'] is False and v['object_left_gripper_mug'] is False
    assert v['robot_contact_mug'] is True and v['object_grasped_raw_chicken'] is False
    pairs[:] = [('robot0_link4', 'shelf_top')]     # the arm hits the shelf: forbidden
    assert h.spin_until(lambda: h.latest[topic].get('forbidden_contact') is True, each=send)
    force[0] = float('nan')                         # a contact whose force is NaN: unknown, never "no contact"
    assert h.spin_until(lambda: h.latest[topic].get('forbidden_contact', False) is None, each=send)
    force[0] = 2.0
    assert h.spin_until(lambda: h.latest[topic].get('forbidden_contact') is True, each=send)


def _tf(parent, child, xyz, stamp):
    t = TransformStamped()
    t.header.stamp = stamp
    t.header.frame_id = parent
    t.child_frame_id = child
    t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = xyz
    t.transform.rotation.w = 1.0
    return t


@pytest.mark.slow
def test_tf_node(harness_factory):
    h = harness_factory('tf_grounding')
    topic = 'predicates/tf'
    h.listen(topic)
    static = h.node.create_publisher(TFMessage, '/tf_static', STATIC)
    dyn = h.node.create_publisher(TFMessage, '/tf', RELIABLE)
    static.publish(TFMessage(transforms=[_tf('world', 'shelf_top', (0.5, 0.0, 0.8), h.now_stamp()),
                                         _tf('world', 'table_top', (0.0, 0.0, 0.0), h.now_stamp())]))

    def send():
        stamp = h.now_stamp()
        dyn.publish(TFMessage(transforms=[_tf('world', 'mug_main', (0.5, 0.0, 0.81), stamp),
                                          _tf('world', 'chicken_main', (0.0, 0.0, 0.01), stamp),
                                          _tf('world', 'gripper0_eef', (0.5, 0.0, 1.2), stamp),
                                          _tf('world', 'microwave_main', (2.0, 0.0, 0.0), stamp)]))

    assert h.spin_until(lambda: h.latest.get(topic, {}).get('object_settled_mug') is True, each=send), \
        h.latest.get(topic)
    v = h.latest[topic]
    assert v['object_supported_mug'] and v['object_stable_mug'] and v['near_gripper_mug'] is False
    assert v['inside_mug_in_microwave'] is False
    assert v['object_sync_mug'] is None       # no grasp information yet: unknown, not true


@pytest.mark.slow
def test_camera_node_regions_and_marker_pose(harness_factory):
    import cv2
    h = harness_factory('camera_grounding')
    topic = 'predicates/camera'
    h.listen(topic)
    poses: list = []
    h.node.create_subscription(TFMessage, '/tf', lambda m: poses.extend(m.transforms), RELIABLE)
    img_pub = h.node.create_publisher(Image, 'image', RELIABLE)
    info_pub = h.node.create_publisher(CameraInfo, 'camera_info', RELIABLE)
    K = [600.0, 0, 320, 0, 600.0, 240, 0, 0, 1]
    # Red patch in the shelf_left region, and marker 7 (the mug) 0.5 m in front of the camera.
    canvas = np.full((480, 640, 3), 255, np.uint8)
    cv2.rectangle(canvas, (40, 300), (200, 420), (255, 0, 0), -1)
    tile = cv2.aruco.generateImageMarker(cv2.aruco.getPredefinedDictionary(cv2.aruco.DICT_4X4_50), 7, 60)
    canvas[210:270, 290:350] = cv2.cvtColor(tile, cv2.COLOR_GRAY2RGB)   # 60 px = 0.05 m at 0.5 m and f=600

    def send():
        stamp = h.now_stamp()
        info = CameraInfo(width=640, height=480, k=K, d=[0.0] * 5, distortion_model='plumb_bob')
        info.header.stamp = stamp
        info_pub.publish(info)
        img = Image(height=480, width=640, encoding='rgb8', step=640 * 3, data=canvas.tobytes())
        img.header.stamp = stamp
        img.header.frame_id = 'agentview_optical'
        img_pub.publish(img)

    assert h.spin_until(lambda: h.latest.get(topic, {}).get('region_occupied_shelf_left') is True and poses,
                        each=send), (h.latest.get(topic), len(poses))
    t = poses[-1]
    assert t.child_frame_id == 'mug_main' and t.header.frame_id == 'agentview_optical'
    assert math.isclose(t.transform.translation.z, 0.5, abs_tol=0.01)


def test_one_process_samples_the_grounding_as_one_chain():
    """``safemanip run``'s grounding is one component (GroundingChain): handed
    its nodes in any order, it samples them in SOURCE_ORDER, and each source
    reads what the ones before it gave at the same frame, with no topic in
    between: the finger closure the contact grounding needs for a grasp (it
    has no joint_states subscription of its own in one process), and the
    grasp the TF grounding reads."""
    from safemanip_ros.grounding.messages import SOURCE_ORDER
    from safemanip_ros.nodes.grounding_nodes import (
        ContactGroundingNode,
        GroundingChain,
        JointStateGroundingNode,
        TfGroundingNode,
    )
    rclpy.init(args=['--ros-args', '-r', '__ns:=/chain_test', '-p', f'config:={CONFIG}',
                     '-p', 'sampled_by_monitor:=true'])
    try:
        tf, contacts, joints = TfGroundingNode(), ContactGroundingNode(), JointStateGroundingNode()
        robot = rclpy.create_node('chain_robot', namespace='/chain_test')
        ex = rclpy.executors.SingleThreadedExecutor()
        for n in (tf, contacts, joints, robot):
            ex.add_node(n)
        chain = GroundingChain([tf, contacts, joints])
        assert [n.source for n in chain.nodes] == [s for s in SOURCE_ORDER if s in ('joint_states', 'contacts', 'tf')]
        js_pub = robot.create_publisher(JointState, 'joint_states', RELIABLE)
        contact_pub = robot.create_publisher(ContactArray, 'contacts', RELIABLE)
        assert spin_until(ex, lambda: js_pub.get_subscription_count() and contact_pub.get_subscription_count())
        stamp = time_from_ns(time.time_ns() - 1_000_000)
        js = JointState(name=ARM + FINGERS, position=[0.0] * 7 + [0.02, 0.02])
        js.header.stamp = stamp
        pairs = [('gripper0_finger1_pad_collision', 'mug_g0'), ('gripper0_finger2_pad_collision', 'mug_g1')]
        touch = ContactArray(contacts=[Contact(body1=a, body2=b, normal_force_n=2.0) for a, b in pairs])
        touch.header.stamp = stamp
        js_pub.publish(js)
        contact_pub.publish(touch)
        assert spin_until(ex, lambda: joints.last_arrival_ns and contacts.last_arrival_ns)
        assert chain.last_arrival_ns == max(joints.last_arrival_ns, contacts.last_arrival_ns)
        assert tf._grasped['mug'] is None
        joint_values, contact_values, _ = chain.sample(joints.get_clock().now().nanoseconds)
        assert joint_values['gripper_closed'] is True
        assert contact_values['object_grasped_raw_mug'] is True      # the closure of this very frame
        assert tf._grasped['mug'] is True                            # handed on in-process, not from the topic
        assert not [s.topic_name for s in tf.subscriptions if 'predicates' in s.topic_name]   # nor subscribed
    finally:
        rclpy.shutdown()
