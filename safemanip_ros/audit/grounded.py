"""Bags of raw robot inputs: ground them offline with the same grounding
classes the live nodes use, in bag time.

Topics read (the grounding nodes' defaults): ``/joint_states``
(sensor_msgs/JointState), ``/tf`` and ``/tf_static`` (tf2_msgs/TFMessage),
``/contacts`` (safemanip_ros/ContactArray), ``/wrench``
(geometry_msgs/WrenchStamped) and ``/image`` (sensor_msgs/Image, colour
regions).  Each frame (every 1/rate_hz of bag time) evaluates every source at
the frame's time, exactly as the grounding nodes' timers do; predicates a
source cannot determine are unknown.
"""

from __future__ import annotations

import numpy as np

from ..grounding.camera import CameraError, CameraGrounding, image_to_array
from ..grounding.config import RobotConfig
from ..grounding.contacts import ContactGrounding, ContactSample, WrenchGrounding
from ..grounding.joints import FixtureGrounding, JointStateGrounding
from ..grounding.tf import TfGrounding, transforms_by_stamp

RAW_TOPICS = {'/joint_states': 'sensor_msgs/msg/JointState', '/tf': 'tf2_msgs/msg/TFMessage',
              '/tf_static': 'tf2_msgs/msg/TFMessage', '/contacts': 'safemanip_ros/msg/ContactArray',
              '/wrench': 'geometry_msgs/msg/WrenchStamped', '/image': 'sensor_msgs/msg/Image'}


def _s(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


class OfflineGrounding:
    """All grounding sources of a robot configuration, fed from bag messages."""

    def __init__(self, robot: RobotConfig, use_wrench: bool, use_camera: bool) -> None:
        self.robot = robot
        self._flags = (use_wrench, use_camera)
        self.joints = JointStateGrounding(robot.joints)
        self.fixtures = FixtureGrounding(robot.fixtures)
        self.contacts = ContactGrounding(robot.contacts)
        self.tf = TfGrounding(robot.tf)
        self.wrench = WrenchGrounding(robot.wrench) if use_wrench else None
        self.camera = CameraGrounding(robot.camera) if use_camera and robot.camera.regions else None

    def fresh_copy(self) -> 'OfflineGrounding':
        """The same sources with no history (a new episode starts)."""
        return OfflineGrounding(self.robot, *self._flags)

    def feed(self, topic: str, msg) -> None:
        if topic == '/joint_states':
            vel = msg.velocity if len(msg.velocity) == len(msg.name) else None
            self.joints.update(_s(msg.header.stamp), list(msg.name), np.asarray(msg.position, float), vel)
            self.fixtures.update(_s(msg.header.stamp), list(msg.name), np.asarray(msg.position, float))
        elif topic in ('/tf', '/tf_static'):
            for stamp, items in transforms_by_stamp(msg.transforms):
                self.tf.update(stamp, items, static=topic == '/tf_static')
        elif topic == '/contacts':
            self.contacts.update(_s(msg.header.stamp),
                                 [ContactSample(c.body1, c.body2, c.normal_force_n) for c in msg.contacts])
        elif topic == '/wrench' and self.wrench is not None:
            f, t = msg.wrench.force, msg.wrench.torque
            self.wrench.update(_s(msg.header.stamp), (f.x, f.y, f.z), (t.x, t.y, t.z))
        elif topic == '/image' and self.camera is not None:
            try:
                img = image_to_array(msg.encoding, msg.height, msg.width, msg.step, bytes(msg.data),
                                     bool(msg.is_bigendian))
            except CameraError:
                self.camera.health.missing_inputs += 1
                return
            self.camera.update(_s(msg.header.stamp), img)

    def evaluate(self, now_s: float) -> dict[str, bool | None]:
        out = self.joints.evaluate(now_s)
        if self.fixtures.names:
            out.update(self.fixtures.evaluate(now_s))
        contact = self.contacts.evaluate(now_s)
        out.update(contact)
        grasped = {o: contact.get(f'object_grasped_raw_{o}') for o in self.robot.tf.objects}
        out.update(self.tf.evaluate(now_s, grasped))
        if self.wrench is not None:
            out.update(self.wrench.evaluate(now_s))
        if self.camera is not None:
            out.update(self.camera.evaluate(now_s))
        return out
