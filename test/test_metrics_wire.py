"""The running metrics the monitor publishes as bytes read back as the
``MonitorMetrics`` rclpy would have made, field for field: through rclpy's
own deserialization and through rosbags (what audits and bags read), for
generated names (any length and alignment, non-ASCII) and counts up to
2**32-1.  The bytes differ from rclpy's only in padding, which rclpy leaves
unset."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safemanip_ros.bag.typestore import typestore
from safemanip_ros.nodes.metrics_wire import COUNT_FIELDS, RunningMetricsWire

NAMES = st.text(st.characters(blacklist_categories=('Cs',), blacklist_characters='\x00'), max_size=9)
INSTANCES = st.lists(st.tuples(NAMES, NAMES, NAMES), max_size=6)
COUNTS = st.integers(0, 2**32 - 1)


def _case(draw: st.DrawFn) -> tuple:
    instances = draw(INSTANCES)
    counts = np.array([[draw(COUNTS) for _ in COUNT_FIELDS] for _ in instances], dtype=np.uint64)
    return instances, counts.reshape(len(instances), len(COUNT_FIELDS)), draw(NAMES), \
        draw(st.integers(0, 2**31 * 10**9 - 1)), draw(st.integers(0, 2**64 - 1))


CASES = st.composite(_case)()


@settings(max_examples=200, deadline=None)
@given(CASES)
def test_rosbags_reads_the_bytes_as_the_message(case):
    instances, counts, rollout, stamp_ns, frames = case
    raw = RunningMetricsWire(instances).encode(stamp_ns, rollout, frames, counts)
    msg = typestore().deserialize_cdr(raw, 'safemanip_ros/msg/MonitorMetrics')
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == divmod(stamp_ns, 10**9)
    assert (msg.header.frame_id, msg.episode_id, msg.frames, msg.final) == ('', rollout, frames, False)
    assert [(m.property, m.instance, m.category) for m in msg.properties] == instances
    assert [[getattr(m, f) for f in COUNT_FIELDS] for m in msg.properties] == counts.tolist()


def test_counts_of_another_shape_are_refused():
    wire = RunningMetricsWire([('a', 'a', 'c')])
    with pytest.raises(ValueError, match=r'expected \(1, 6\)'):
        wire.encode(0, '', 0, np.zeros((2, 6)))


@pytest.mark.ros
@settings(max_examples=100, deadline=None)
@given(CASES)
def test_rclpy_reads_the_bytes_as_the_message_it_would_have_made(case):
    from rclpy.serialization import deserialize_message, serialize_message

    from safemanip_ros.msg import MonitorMetrics, PropertyMetrics
    from safemanip_ros.nodes.conversions import time_from_ns
    instances, counts, rollout, stamp_ns, frames = case
    expected = MonitorMetrics(episode_id=rollout, frames=frames, final=False)
    expected.header.stamp = time_from_ns(stamp_ns)
    expected.properties = [PropertyMetrics(property=p, instance=i, category=c,
                                           **dict(zip(COUNT_FIELDS, map(int, row))))
                           for (p, i, c), row in zip(instances, counts)]
    raw = RunningMetricsWire(instances).encode(stamp_ns, rollout, frames, counts)
    assert deserialize_message(raw, MonitorMetrics) == expected
    assert len(raw) == len(serialize_message(expected))
