"""Conversions between our messages and the core's plain Python values."""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from builtin_interfaces.msg import Time

from safemanip_ros.msg import Predicate, PredicateArray

from ..errors import SafemanipError
from ..stamps import NS_PER_S, stamp_ns


def time_from_ns(stamp_ns: int) -> Time:
    stamp = Time()
    set_time_ns(stamp, stamp_ns)
    return stamp


def set_time_ns(stamp: Time, stamp_ns: int) -> None:
    """Set ``stamp`` (a message's field, in place) to ``stamp_ns``."""
    stamp.sec, stamp.nanosec = int(stamp_ns // NS_PER_S), int(stamp_ns % NS_PER_S)


def ns_from_time(stamp: Time) -> int:
    return stamp_ns(stamp)


def predicate_array(values: Mapping[str, bool | None], stamp_ns: int, source: str, seq: int = 0,
                    frame_id: str = '') -> PredicateArray:
    """A ``PredicateArray``; a value of ``None`` is published as unknown."""
    msg = PredicateArray()
    msg.header.stamp = time_from_ns(stamp_ns)
    msg.header.frame_id = frame_id
    msg.seq = seq
    stamp = msg.header.stamp
    msg.predicates = [
        Predicate(name=name, value=bool(value) if value is not None else False, unknown=value is None,
                  source=source, data_stamp=stamp)
        for name, value in values.items()
    ]
    return msg


def predicate_values(msg: PredicateArray) -> dict[str, bool | None]:
    """Name → value, with ``None`` for unknown predicates."""
    return {p.name: (None if p.unknown else bool(p.value)) for p in msg.predicates}


def message_class(msgtype: str) -> Any:
    """The rclpy message class of ``package/msg/Type``, or a SafemanipError
    naming the type (malformed, or no such package or message here)."""
    parts = msgtype.split('/')
    if len(parts) != 3 or parts[1] != 'msg' or not all(parts):
        raise SafemanipError(f'{msgtype!r} is not a message type (package/msg/Type)')
    try:
        return getattr(importlib.import_module(f'{parts[0]}.msg'), parts[2])
    except (ImportError, AttributeError) as err:
        raise SafemanipError(f'no message type {msgtype} in this ROS installation') from err
