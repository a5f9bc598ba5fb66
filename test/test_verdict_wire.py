"""The verdicts the monitor publishes as bytes read back as the
``VerdictArray`` rclpy would have made, element for element: through
rclpy's own deserialization and through rosbags (what bag readers use), for
generated names (any length and alignment, non-ASCII), any subset of the
instances in any order (so elements start at both 8-byte phases), frame
numbers up to 2**64-1 and times before and after 1970."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safemanip_ros.bag.typestore import typestore
from safemanip_ros.nodes.verdict_wire import VerdictArrayWire

NAMES = st.text(st.characters(blacklist_categories=('Cs',), blacklist_characters='\x00'), max_size=9)
CODE = st.integers(0, 3)


@st.composite
def _case(draw: st.DrawFn) -> tuple:
    instances = draw(st.lists(st.tuples(NAMES, NAMES), max_size=7))
    n = len(instances)
    which = draw(st.lists(st.integers(0, n - 1), max_size=9)) if n else []
    codes = [draw(st.lists(CODE, min_size=n, max_size=n)) for _ in range(3)]
    return (instances, draw(st.integers(-2**31 * 10**9, 2**31 * 10**9 - 1)), draw(st.integers(0, 2**64 - 1)),
            draw(NAMES), which, *codes)


CASES = _case()


@settings(max_examples=300, deadline=None)
@given(CASES)
def test_rosbags_reads_the_bytes_as_the_message(case):
    instances, stamp_ns, frame, rollout, which, verdicts, modes, recs = case
    raw = VerdictArrayWire(instances).encode(stamp_ns, frame, rollout, which, verdicts, modes, recs)
    msg = typestore().deserialize_cdr(raw, 'safemanip_ros/msg/VerdictArray')
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == divmod(stamp_ns, 10**9)
    assert (msg.header.frame_id, msg.frame, msg.episode_id) == ('', frame, rollout)
    assert [(v.property, v.instance, v.frame, v.verdict, v.mode, v.recovery_verdict) for v in msg.verdicts] == \
        [(*instances[d], frame, verdicts[d], modes[d], recs[d]) for d in which]


def test_every_instance_of_a_thousand():
    """The soak's size: one message of every instance, names of mixed lengths."""
    instances = [(f'soak_{i:04d}', 'x' * (i % 7)) for i in range(1000)]
    codes = [i % 4 for i in range(1000)]
    raw = VerdictArrayWire(instances).encode(10**9, 7, 'ep', range(1000), codes, [c % 2 for c in codes], codes)
    msg = typestore().deserialize_cdr(raw, 'safemanip_ros/msg/VerdictArray')
    assert len(msg.verdicts) == 1000
    assert [(v.property, v.instance, v.verdict, v.mode) for v in msg.verdicts] == \
        [(*inst, c, c % 2) for inst, c in zip(instances, codes)]


@pytest.mark.ros
@settings(max_examples=150, deadline=None)
@given(CASES)
def test_rclpy_reads_the_bytes_as_the_message_it_would_have_made(case):
    from rclpy.serialization import deserialize_message, serialize_message

    from safemanip_ros.msg import Verdict, VerdictArray
    from safemanip_ros.nodes.conversions import time_from_ns
    instances, stamp_ns, frame, rollout, which, verdicts, modes, recs = case
    expected = VerdictArray(frame=frame, episode_id=rollout)
    expected.header.stamp = time_from_ns(stamp_ns)
    expected.verdicts = [Verdict(property=instances[d][0], instance=instances[d][1], frame=frame,
                                 verdict=verdicts[d], mode=modes[d], recovery_verdict=recs[d]) for d in which]
    raw = VerdictArrayWire(instances).encode(stamp_ns, frame, rollout, which, verdicts, modes, recs)
    assert deserialize_message(raw, VerdictArray) == expected
    assert len(raw) == len(serialize_message(expected))
