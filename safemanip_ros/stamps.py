"""ROS time stamps (``builtin_interfaces/Time``: ``sec``, ``nanosec``) as
numbers: the one conversion every layer uses, for rclpy's messages and
rosbags' alike (both are read by attribute).  No ROS import."""

from __future__ import annotations

from typing import Any

NS_PER_S = 1_000_000_000


def stamp_ns(stamp: Any) -> int:
    """The stamp in integer nanoseconds."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def stamp_s(stamp: Any) -> float:
    """The stamp in seconds, ``int(sec) + int(nanosec) * 1e-9`` (the same float
    as the bag column decoders compute)."""
    return int(stamp.sec) + int(stamp.nanosec) * 1e-9
