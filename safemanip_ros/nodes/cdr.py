"""Pieces of classic CDR (little endian), the encoding rmw_fastrtps writes,
for the messages the monitor and grounding publish as bytes they encode
themselves (``metrics_wire``, ``event_wire``, ``verdict_wire``,
``predicate_wire``).  Offsets count from the start of the body, after the
encapsulation header, as CDR aligns them."""

from __future__ import annotations

import struct

from ..stamps import NS_PER_S

ENCAPSULATION = b'\x00\x01\x00\x00'
"""The encapsulation header: CDR, little endian."""


def padding(offset: int, alignment: int) -> bytes:
    """The zero bytes that bring ``offset`` to a multiple of ``alignment``."""
    return b'\x00' * (-offset % alignment)


def string(text: str, offset: int) -> bytes:
    """A CDR string at ``offset``: padding to 4, length with the terminating
    NUL, the UTF-8 bytes, the NUL."""
    data = text.encode('utf-8') + b'\x00'
    return padding(offset, 4) + struct.pack('<I', len(data)) + data


def time(stamp_ns: int) -> bytes:
    """A ``builtin_interfaces/Time`` at a 4-aligned offset: seconds floored,
    nanoseconds 0 to 10**9 - 1; 8 bytes."""
    sec, nanosec = divmod(int(stamp_ns), NS_PER_S)
    return struct.pack('<iI', sec, nanosec)


def header(stamp_ns: int, frame_id: str = '') -> bytes:
    """A ``std_msgs/Header`` at the start of the body: the stamp
    (:func:`time`) and ``frame_id`` (empty: 13 bytes)."""
    return time(stamp_ns) + string(frame_id, 8)
