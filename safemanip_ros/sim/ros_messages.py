"""One simulator sample as the ROS messages a real stack publishes —
``/joint_states``, ``/tf``, ``/tf_static``, ``/contacts``, ``/clock`` and
the policy's phases as ``/skill_events`` —
built with either message implementation: rclpy's classes (the live
bridge node) or rosbags' typestore classes (rollouts written straight to a
bag).  Both take the same keyword fields, so one function builds both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..grounding.skills import END, START
from .world import SimSample

TOPICS = {
    '/joint_states': 'sensor_msgs/msg/JointState',
    '/tf': 'tf2_msgs/msg/TFMessage',
    '/tf_static': 'tf2_msgs/msg/TFMessage',
    '/contacts': 'safemanip_ros/msg/ContactArray',
    '/clock': 'rosgraph_msgs/msg/Clock',
    '/skill_events': 'safemanip_ros/msg/SkillEvent',
}
WORLD_FRAME = 'world'


@dataclass(frozen=True)
class MessageTypes:
    """The message classes to build with (rclpy or rosbags)."""

    Time: Any
    Header: Any
    JointState: Any
    TFMessage: Any
    TransformStamped: Any
    Transform: Any
    Vector3: Any
    Quaternion: Any
    Contact: Any
    ContactArray: Any
    Point: Any
    Clock: Any | None = None
    SkillEvent: Any | None = None
    Image: Any | None = None
    CameraInfo: Any | None = None
    RegionOfInterest: Any | None = None
    # A uint8[] field's value from bytes: rosbags takes a numpy array; rclpy takes the bytes as they are
    # (a numpy array there is copied element by element: 3.5 ms for a 128 px image against 0.03 ms).
    byte_array: Callable[[bytes], Any] = field(default=lambda raw: np.frombuffer(raw, np.uint8))

    @classmethod
    def from_typestore(cls, ts: Any) -> 'MessageTypes':
        t = ts.types
        return cls(t['builtin_interfaces/msg/Time'], t['std_msgs/msg/Header'], t['sensor_msgs/msg/JointState'],
                   t['tf2_msgs/msg/TFMessage'], t['geometry_msgs/msg/TransformStamped'],
                   t['geometry_msgs/msg/Transform'], t['geometry_msgs/msg/Vector3'],
                   t['geometry_msgs/msg/Quaternion'], t['safemanip_ros/msg/Contact'],
                   t['safemanip_ros/msg/ContactArray'], t['geometry_msgs/msg/Point'],
                   t.get('rosgraph_msgs/msg/Clock'), t['safemanip_ros/msg/SkillEvent'], t['sensor_msgs/msg/Image'],
                   t['sensor_msgs/msg/CameraInfo'], t['sensor_msgs/msg/RegionOfInterest'])


def stamp(types: MessageTypes, time_s: float) -> Any:
    sec = int(time_s // 1)
    return types.Time(sec=sec, nanosec=int(round((time_s - sec) * 1e9)) % 1_000_000_000)


def joint_state(types: MessageTypes, s: SimSample) -> Any:
    return types.JointState(header=types.Header(stamp=stamp(types, s.stamp_s), frame_id=''), name=list(s.joint_names),
                            position=np.asarray(s.joint_positions, dtype=np.float64),
                            velocity=np.asarray(s.joint_velocities, dtype=np.float64),
                            effort=np.zeros(0, dtype=np.float64))


def transforms(types: MessageTypes, s: SimSample, bodies: list[str]) -> Any:
    """A TFMessage with one ``world → body`` transform per body."""
    out = []
    header_stamp = stamp(types, s.stamp_s)
    for body in bodies:
        (x, y, z), (qx, qy, qz, qw) = s.poses[body]
        out.append(types.TransformStamped(
            header=types.Header(stamp=header_stamp, frame_id=WORLD_FRAME), child_frame_id=body,
            transform=types.Transform(translation=types.Vector3(x=x, y=y, z=z),
                                      rotation=types.Quaternion(x=qx, y=qy, z=qz, w=qw))))
    return types.TFMessage(transforms=out)


def detection(types: MessageTypes, stamp_s: float,
              poses: dict[str, tuple[tuple[float, float, float], tuple[float, float, float, float]]]) -> Any:
    """A detector's TFMessage: one ``world → object`` transform per object
    seen, stamped with the capture time ``stamp_s``."""
    header_stamp = stamp(types, stamp_s)
    return types.TFMessage(transforms=[
        types.TransformStamped(
            header=types.Header(stamp=header_stamp, frame_id=WORLD_FRAME), child_frame_id=body,
            transform=types.Transform(translation=types.Vector3(x=x, y=y, z=z),
                                      rotation=types.Quaternion(x=qx, y=qy, z=qz, w=qw)))
        for body, ((x, y, z), (qx, qy, qz, qw)) in sorted(poses.items())])


CAMERA_TOPICS = {'/image': 'sensor_msgs/msg/Image', '/depth': 'sensor_msgs/msg/Image',
                 '/camera_info': 'sensor_msgs/msg/CameraInfo'}
"""What an RGB-D driver publishes, as a recording of the camera level holds it."""


def rgbd(types: MessageTypes, stamp_s: float, frame: str, rgb: np.ndarray, depth_m: np.ndarray,
         K: np.ndarray) -> tuple[Any, Any, Any]:
    """An RGB-D driver's messages for one capture: the ``rgb8`` image, its
    aligned depth (``32FC1``, metres along the optical axis, little-endian)
    and the ``CameraInfo`` of the pinhole ``K`` (no distortion), all
    stamped ``stamp_s`` in the optical ``frame``."""
    assert types.Image is not None and types.CameraInfo is not None and types.RegionOfInterest is not None
    header = types.Header(stamp=stamp(types, stamp_s), frame_id=frame)
    h, w = depth_m.shape
    image = types.Image(header=header, height=h, width=w, encoding='rgb8', is_bigendian=0, step=3 * w,
                        data=types.byte_array(np.ascontiguousarray(rgb, np.uint8).tobytes()))
    depth = types.Image(header=header, height=h, width=w, encoding='32FC1', is_bigendian=0, step=4 * w,
                        data=types.byte_array(depth_m.astype('<f4').tobytes()))
    k = np.asarray(K, float)
    info = types.CameraInfo(header=header, height=h, width=w, distortion_model='plumb_bob',
                            d=np.zeros(5), k=k.reshape(-1).astype(np.float64),
                            r=np.eye(3).reshape(-1), p=np.array([k[0, 0], 0.0, k[0, 2], 0.0, 0.0, k[1, 1], k[1, 2],
                                                                 0.0, 0.0, 0.0, 1.0, 0.0]),
                            binning_x=0, binning_y=0,
                            roi=types.RegionOfInterest(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))
    return image, depth, info


def contacts(types: MessageTypes, s: SimSample) -> Any:
    zero = types.Point(x=0.0, y=0.0, z=0.0)
    up = types.Vector3(x=0.0, y=0.0, z=0.0)
    return types.ContactArray(header=types.Header(stamp=stamp(types, s.stamp_s), frame_id=WORLD_FRAME), contacts=[
        types.Contact(body1=a, body2=b, position=zero, normal=up, normal_force_n=f, depth_m=0.0)
        for a, b, f in s.contacts])


def skill_event(types: MessageTypes, stamp_s: float, skill: str, target: str, phase: int) -> Any:
    """A ``safemanip_ros/SkillEvent`` (``phase``: :data:`START` or :data:`END`)."""
    skill_event_type = _present(types.SkillEvent, 'safemanip_ros/msg/SkillEvent')
    return skill_event_type(header=types.Header(stamp=stamp(types, stamp_s), frame_id=''), skill=skill,
                            target=target, phase=phase)


class PhaseEvents:
    """A scripted policy's phases as its stack's skill events: each phase
    is a skill (its name), entered with a START and left with an END at the
    stamp of the first sample acted on in the next phase."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.phase: str | None = None

    def changes(self, phase: str) -> list[tuple[str, str, int]]:
        """``(skill, target, phase)`` events when the policy is now in ``phase``."""
        if phase == self.phase:
            return []
        out = [] if self.phase is None else [(self.phase, self.target, END)]
        self.phase = phase
        return out + [(phase, self.target, START)]

    def close(self) -> list[tuple[str, str, int]]:
        """The END of the phase the policy finished in."""
        out = [] if self.phase is None else [(self.phase, self.target, END)]
        self.phase = None
        return out


def clock(types: MessageTypes, s: SimSample) -> Any:
    return _present(types.Clock, 'rosgraph_msgs/msg/Clock')(clock=stamp(types, s.stamp_s))


def _present(msg_type: Any | None, name: str) -> Any:
    """An optional message type the caller needs (a bug when absent: callers check first)."""
    if msg_type is None:
        raise RuntimeError(f'{name} is not among the message types')
    return msg_type
