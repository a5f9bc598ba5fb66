"""A scripted robot for trying the stack without one: the Panda of
``config/robots/panda_demo.yaml`` standing still, as its driver publishes
it — ``joint_states``, the end effector on ``/tf`` and ``contacts`` — with
the arm touching a body when told.

Used by the live tests and benches (``test_live_faults.py``,
``test_stack_integration.py``, ``bench_live.py``, ``bench_soak.py``), so each
does not carry its own copy of the robot.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from geometry_msgs.msg import TransformStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from tf2_msgs.msg import TFMessage

from safemanip_ros.msg import Contact, ContactArray

from .conversions import time_from_ns
from .qos import RELIABLE

ARM = [f'robot0_joint{i}' for i in range(1, 8)]
FINGERS = ['gripper0_finger_joint1', 'gripper0_finger_joint2']
POSE = [0.1, -0.3, 0.0, -2.0, 0.0, 1.8, 0.7]
"""The arm's joint positions (rad): within every limit of the demo robot."""
TOUCH = ('robot0_link4', 'shelf_top')
"""The contact that is forbidden in the demo scene: the arm's fourth link on the shelf."""


@dataclass
class RobotStandIn:
    """Publishers of one robot on ``node``; :meth:`publish` sends one sample
    of each, stamped ``stamp_ns`` (default: now).  ``touching`` names the
    body pair in contact (None: free); ``joints_on`` False silences the
    joint states alone (a sensor failing)."""

    node: Node
    pose: list[float] = field(default_factory=lambda: list(POSE))
    qos: QoSProfile = field(default_factory=lambda: RELIABLE)
    touching: tuple[str, str] | None = None
    joints_on: bool = True

    def __post_init__(self) -> None:
        self.js = self.node.create_publisher(JointState, 'joint_states', self.qos)
        self.tf = self.node.create_publisher(TFMessage, '/tf', self.qos)
        self.contacts = self.node.create_publisher(ContactArray, 'contacts', self.qos)

    def touch(self, pair: tuple[str, str] | None = TOUCH) -> None:
        self.touching = pair

    def publish(self, stamp_ns: int | None = None) -> None:
        stamp = time_from_ns(time.time_ns() if stamp_ns is None else stamp_ns)
        if self.joints_on:
            self.js.publish(JointState(header=Header(stamp=stamp), name=ARM + FINGERS,
                                       position=self.pose + [0.04, 0.04], velocity=[0.0] * 9))
        t = TransformStamped()
        t.header = Header(stamp=stamp, frame_id='world')
        t.child_frame_id = 'gripper0_eef'
        t.transform.rotation.w = 1.0
        self.tf.publish(TFMessage(transforms=[t]))
        msg = ContactArray(header=Header(stamp=stamp))
        if self.touching is not None:
            msg.contacts = [Contact(body1=self.touching[0], body2=self.touching[1], normal_force_n=5.0)]
        self.contacts.publish(msg)

    def subscribers_ready(self) -> bool:
        """The stack's grounding listens: joint states (grounding and recorder) and contacts."""
        return self.js.get_subscription_count() >= 1 and self.contacts.get_subscription_count() >= 1

    def destroy(self) -> None:
        for pub in (self.js, self.tf, self.contacts):
            self.node.destroy_publisher(pub)
