"""``PredicateArray`` messages as serialized bytes (CDR), made without
rclpy's conversion of a Python message.

Each grounding source publishes its predicates every frame, and in
``safemanip run`` it does so inside the monitor's frame.  rclpy converting a
``PredicateArray`` of ``Predicate`` messages (each with its own ``Time``)
field by field, after the Python objects were made for it, cost the frame
a fraction of a millisecond per source and left garbage for the collector.
A source's names and its own name never change, so
:class:`PredicateArrayWire` encodes each name once and, per publication,
joins them with the two flags and the stamp; rclpy publishes bytes as
they are (``Publisher.publish(bytes)``).  The bytes are those rclpy would
make from :func:`.conversions.predicate_array` (checked against
``rclpy.serialization`` and rosbags in the tests), so every subscriber and
bag reader sees an ordinary ``PredicateArray``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from .cdr import ENCAPSULATION, header, padding, string, time


class PredicateArrayWire:
    """Encodes ``PredicateArray`` messages of one grounding ``source``
    (each predicate's ``data_stamp`` is the array's stamp, as
    :func:`.conversions.predicate_array` makes it)."""

    def __init__(self, source: str) -> None:
        self.source = source
        # A Predicate starts 4-aligned (its name's length) and has no field wider than 4 bytes,
        # so each part encodes the same wherever the element lands: the name with the padding
        # that follows the two flags, and the source (4-aligned after its own padding).
        source_bytes = string(source, 0)
        self._source = source_bytes + padding(len(source_bytes), 4)
        self._names: dict[str, tuple[bytes, bytes]] = {}

    def _name(self, name: str) -> tuple[bytes, bytes]:
        encoded = self._names.get(name)
        if encoded is None:
            data = string(name, 0)
            encoded = self._names[name] = (data, padding(len(data) + 2, 4))
        return encoded

    def encode(self, values: Mapping[str, bool | None], stamp_ns: int, seq: int = 0, frame_id: str = '') -> bytes:
        """The serialized message: header stamp ``stamp_ns`` and ``frame_id``,
        ``seq`` (0 to 2**64 - 1), and one ``Predicate`` per entry of
        ``values`` in its order, ``None`` published as unknown (value false)."""
        head = header(stamp_ns, frame_id)
        head += padding(len(head), 8) + struct.pack('<QI', seq, len(values))
        tail = self._source + time(stamp_ns)
        parts = [ENCAPSULATION, head]
        name = self._name
        for key, value in values.items():
            data, pad = name(key)
            parts += (data, _UNKNOWN if value is None else _TRUE if value else _FALSE, pad, tail)
        return b''.join(parts)


# (value, unknown) of a Predicate.
_TRUE, _FALSE, _UNKNOWN = b'\x01\x00', b'\x00\x00', b'\x00\x01'
