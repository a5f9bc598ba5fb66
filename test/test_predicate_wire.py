"""The predicates a grounding source publishes as bytes read back as the
``PredicateArray`` rclpy would have made from
:func:`~safemanip_ros.nodes.conversions.predicate_array`, element for
element: through rclpy's own deserialization and through rosbags, for
generated names and sources (every length modulo 4, non-ASCII), true, false
and unknown values, sequence numbers up to 2**64-1 and times before and
after 1970; and a name first seen late is encoded like the others."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safemanip_ros.bag.typestore import typestore
from safemanip_ros.nodes.predicate_wire import PredicateArrayWire

TEXT = st.text(st.characters(blacklist_categories=('Cs',), blacklist_characters='\x00'), max_size=9)
VALUES = st.dictionaries(TEXT, st.sampled_from([True, False, None]), max_size=8)


@st.composite
def _case(draw: st.DrawFn) -> tuple:
    return (draw(TEXT), draw(st.lists(VALUES, min_size=1, max_size=3)),
            draw(st.integers(-2**31 * 10**9, 2**31 * 10**9 - 1)), draw(st.integers(0, 2**64 - 1)), draw(TEXT))


CASES = _case()


@settings(max_examples=300, deadline=None)
@given(CASES)
def test_rosbags_reads_the_bytes_as_the_message(case):
    source, frames, stamp_ns, seq, frame_id = case
    wire = PredicateArrayWire(source)
    for values in frames:           # one wire across publications: names cached in one, used in the next
        raw = wire.encode(values, stamp_ns, seq, frame_id)
        msg = typestore().deserialize_cdr(raw, 'safemanip_ros/msg/PredicateArray')
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == divmod(stamp_ns, 10**9)
        assert (msg.header.frame_id, msg.seq) == (frame_id, seq)
        assert [(p.name, p.value, p.unknown, p.source, p.data_stamp.sec, p.data_stamp.nanosec)
                for p in msg.predicates] == \
            [(n, bool(v), v is None, source, *divmod(stamp_ns, 10**9)) for n, v in values.items()]


@pytest.mark.ros
@settings(max_examples=150, deadline=None)
@given(CASES)
def test_rclpy_reads_the_bytes_as_the_message_it_would_have_made(case):
    from rclpy.serialization import deserialize_message, serialize_message

    from safemanip_ros.msg import PredicateArray
    from safemanip_ros.nodes.conversions import predicate_array
    source, frames, stamp_ns, seq, frame_id = case
    wire = PredicateArrayWire(source)
    for values in frames:
        expected = predicate_array(values, stamp_ns, source, seq, frame_id)
        raw = wire.encode(values, stamp_ns, seq, frame_id)
        assert deserialize_message(raw, PredicateArray) == expected
        assert len(raw) == len(serialize_message(expected))     # rclpy leaves its padding bytes unset
