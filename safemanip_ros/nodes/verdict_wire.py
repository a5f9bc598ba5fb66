"""``VerdictArray`` messages as serialized bytes (CDR), made without
rclpy's conversion of a Python message.

A frame publishes every instance's verdict once a period
(``verdicts_full_period_s``) and, between, those that changed, which in the
soak's frames is hundreds at once.  rclpy converting one ``Verdict`` message
per instance field by field cost a few milliseconds of a 10 ms frame.  An
instance's names never change, so :class:`VerdictArrayWire` encodes them
once (in the two forms CDR's 8-byte alignment of the frame number can
need) and, per publication, joins them with the frame and the three codes;
rclpy publishes bytes as they are (``Publisher.publish(bytes)``).  The bytes
are those rclpy would make (checked against ``rclpy.serialization`` and
rosbags in the tests), so every subscriber and bag reader sees an ordinary
``VerdictArray``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from .cdr import ENCAPSULATION, header, padding, string


class VerdictArrayWire:
    """Encodes ``VerdictArray`` for a fixed list of instances given as
    (property, instance)."""

    def __init__(self, instances: Sequence[tuple[str, str]]) -> None:
        # An element starts 4-aligned (its first string's length), so its names encode the
        # same wherever it lands; the padding before its uint64 frame depends only on
        # whether it starts 8-aligned: both forms are made once.
        names = []
        for prop, inst in instances:
            out = string(prop, 0)
            names.append(out + string(inst, len(out)))
        self._forms = ([n + padding(len(n), 8) for n in names], [n + padding(4 + len(n), 8) for n in names])

    def __len__(self) -> int:
        return len(self._forms[0])

    def encode(self, stamp_ns: int, frame: int, episode_id: str, which: Sequence[int],
               verdicts: Sequence[int], modes: Sequence[int], recovery_verdicts: Sequence[int]) -> bytes:
        """The serialized message: header stamp ``stamp_ns`` (frame_id empty),
        ``frame``, ``episode_id``, and one ``Verdict`` (same frame) for each
        instance index in ``which``, in that order, with that index's entry of
        ``verdicts``, ``modes`` and ``recovery_verdicts`` (each 0 to 255)."""
        frame_bytes = struct.pack('<Q', frame)
        head = header(stamp_ns)
        head += padding(len(head), 8) + frame_bytes
        head += string(episode_id, len(head))
        head += padding(len(head), 4) + struct.pack('<I', len(which))
        parts = [ENCAPSULATION, head]
        offset = len(head)              # 4-aligned
        forms = self._forms
        for d in which:
            names = forms[(offset >> 2) & 1][d]
            tail = bytes((verdicts[d], modes[d], recovery_verdicts[d]))
            offset += len(names) + 11
            pad = padding(offset, 4)
            parts += (names, frame_bytes, tail, pad)
            offset += len(pad)
        if which:
            parts.pop()                 # no padding after the last element (CDR pads before a field)
        return b''.join(parts)
