"""The running ``MonitorMetrics`` message as serialized bytes (CDR), made
from the monitor's count arrays without a Python message.

Publishing the message object made rclpy convert one nested
``PropertyMetrics`` per instance field by field: with a thousand instances
that took most of a 100 Hz frame, once a second.  Only the counts change
between publications, so :class:`RunningMetricsWire` encodes each
instance's strings once and, per publication, joins them with the counts
packed by numpy; rclpy publishes bytes as they are
(``Publisher.publish(bytes)``).  The bytes are those rclpy would make
(classic CDR, little endian, as rmw_fastrtps writes; checked against
``rclpy.serialization`` in the tests), so every subscriber, recorder and
bag reader sees an ordinary ``MonitorMetrics``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from .cdr import ENCAPSULATION, header, padding, string

COUNT_FIELDS = ('triggers', 'violations', 'unsafe_frames', 'frames', 'pending', 'unknown_frames')
"""The uint32 fields of ``PropertyMetrics``, in message order (columns of the counts)."""


class RunningMetricsWire:
    """Encodes ``MonitorMetrics`` (running, not final) for a fixed list of
    instances given as (property, instance, category)."""

    def __init__(self, instances: Sequence[tuple[str, str, str]]) -> None:
        # Each element starts 4-aligned (the one before ends with uint32s), so its
        # encoding does not depend on where it lands: made once, with the padding
        # before its first count.
        self._prefixes = []
        for names in instances:
            out = b''
            for text in names:
                out += string(text, len(out))
            self._prefixes.append(out + padding(len(out), 4))
        self._count = struct.pack('<I', len(self._prefixes))
        self._parts: list[bytes] = [b''] * (2 * len(self._prefixes))
        self._parts[0::2] = self._prefixes

    def encode(self, stamp_ns: int, episode_id: str, frames: int, counts: np.ndarray) -> bytes:
        """The serialized message: header stamp ``stamp_ns`` (frame_id
        empty), ``episode_id``, ``frames``, ``final`` false, and one
        ``PropertyMetrics`` per instance with the row of ``counts``
        (instances x :data:`COUNT_FIELDS`, values 0 to 2**32-1)."""
        if counts.shape != (len(self._prefixes), len(COUNT_FIELDS)):
            raise ValueError(f'counts of shape {counts.shape}: expected ({len(self._prefixes)}, {len(COUNT_FIELDS)})')
        head = header(stamp_ns)
        head += string(episode_id, len(head))
        head += padding(len(head), 8) + struct.pack('<Q', frames) + b'\x00'    # frames, final
        head += padding(len(head), 4) + self._count
        rows = np.ascontiguousarray(counts, dtype='<u4').tobytes()
        size = 4 * len(COUNT_FIELDS)
        self._parts[1::2] = [rows[i:i + size] for i in range(0, len(rows), size)]
        return ENCAPSULATION + head + b''.join(self._parts)
