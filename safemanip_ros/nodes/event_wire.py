"""``ViolationEvent`` messages as serialized bytes (CDR), made without
rclpy's conversion of a Python message.

A frame can open or close a violation for hundreds of instances at once,
and every event is its own message on ``violations`` (subscribers and bags
see one event per message).  Converting each event's Python message field
by field cost rclpy about as much as sending it to a subscriber in another
process (the recorder), in the frame's deadline work.  An instance's names,
binding, category and severity never change, and its rollout id only with
the rollout, so :class:`ViolationEventWire` encodes them once and, per
event, packs the stamps, frames, flags and count around them; rclpy publishes bytes as they are (``Publisher.publish(bytes)``).
The bytes are those rclpy would make (checked against
``rclpy.serialization`` and rosbags in the tests), so every subscriber and
bag reader sees an ordinary ``ViolationEvent``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from ..spec.suite import Instance
from ..stamps import NS_PER_S
from .cdr import ENCAPSULATION, header, padding, string

_EVENT_OFFSET = len(header(0))      # the event code follows the header
# start_frame, end_frame (8-aligned), start_stamp, end_stamp, recovered, count (4-aligned).
_TAIL = struct.Struct('<QQiIiI?3xI')


def _fixed_part(inst: Instance, severity: int) -> bytes:
    """property through severity, encoded from just after the event code."""
    out = b''
    for text in (inst.property, inst.instance):
        out += string(text, _EVENT_OFFSET + 1 + len(out))
    out += padding(_EVENT_OFFSET + 1 + len(out), 4) + struct.pack('<I', len(inst.binding))
    for key, value in inst.binding:
        for text in (key, value):
            out += string(text, _EVENT_OFFSET + 1 + len(out))
    out += string(inst.category, _EVENT_OFFSET + 1 + len(out))
    return out + bytes((severity,))


class ViolationEventWire:
    """Encodes ``ViolationEvent`` for a fixed list of property instances;
    ``severity_codes`` maps their severity names to ``ViolationEvent.SEVERITY_*``."""

    def __init__(self, instances: Sequence[Instance], severity_codes: Mapping[str, int]) -> None:
        self._fixed = [_fixed_part(inst, severity_codes[inst.severity]) for inst in instances]
        self._rollout: str | None = None
        self._with_rollout: list[bytes | None] = [None] * len(self._fixed)

    def _middle(self, d: int, episode_id: str) -> bytes:
        """Instance ``d``'s fixed part, the rollout id and the padding before
        start_frame: made at the instance's first event of a rollout."""
        if episode_id != self._rollout:
            self._rollout, self._with_rollout = episode_id, [None] * len(self._fixed)
        middle = self._with_rollout[d]
        if middle is None:
            offset = _EVENT_OFFSET + 1 + len(self._fixed[d])
            part = string(episode_id, offset)
            middle = self._fixed[d] + part + padding(offset + len(part), 8)
            self._with_rollout[d] = middle
        return middle

    def encode(self, d: int, event: int, episode_id: str, stamp_ns: int, start_frame: int, end_frame: int,
               start_ns: int, end_ns: int, recovered: bool, count: int) -> bytes:
        """The serialized event of instance ``d``: ``event`` (one of
        ``ViolationEvent.EVENT_*``), header stamp ``stamp_ns`` (frame_id
        empty), frames ``start_frame``..``end_frame`` at times ``start_ns``
        and ``end_ns``, ``recovered`` and the instance's ``count``.  Times are
        in nanoseconds and split as ``builtin_interfaces/Time`` does (the
        seconds floored, the nanoseconds 0 to 10**9 - 1)."""
        start_sec, start_nanosec = divmod(start_ns, NS_PER_S)
        end_sec, end_nanosec = divmod(end_ns, NS_PER_S)
        return b''.join((ENCAPSULATION, header(stamp_ns), bytes((event,)),
                         self._middle(d, episode_id),
                         _TAIL.pack(start_frame, end_frame, start_sec, start_nanosec, end_sec, end_nanosec,
                                    recovered, count)))
