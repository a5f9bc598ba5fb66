"""The violation events the monitor publishes as bytes read back as the
``ViolationEvent`` rclpy would have made, field for field: through rclpy's
own deserialization and through rosbags (what bag readers use), for
generated instances (names of any length and alignment, non-ASCII, any
binding), every event code and severity, times before and after 1970 and
a wire reused across rollouts (its cached parts follow the rollout id)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safemanip_ros.bag.typestore import typestore
from safemanip_ros.ltlf.parser import parse
from safemanip_ros.nodes.event_wire import ViolationEventWire
from safemanip_ros.spec.suite import Instance

NAMES = st.text(st.characters(blacklist_categories=('Cs',), blacklist_characters='\x00'), max_size=9)
SEVERITY_CODES = {'info': 0, 'warning': 1, 'error': 2, 'critical': 3}     # ViolationEvent.SEVERITY_*
TRUE = parse('true')


def _instance(prop: str, instance: str, binding: tuple[tuple[str, str], ...], category: str,
              severity: str) -> Instance:
    """A property instance with the fields an event carries; its formulas do not matter here."""
    return Instance(prop, instance, binding, category, severity, response='alert', end_policy='strong',
                    description='', formula=TRUE, trigger=TRUE, recovery=TRUE, needs=frozenset())


INSTANCES = st.lists(st.builds(_instance, NAMES, NAMES, st.lists(st.tuples(NAMES, NAMES), max_size=3).map(tuple),
                               NAMES, st.sampled_from(sorted(SEVERITY_CODES))), min_size=1, max_size=5)
TIME_NS = st.integers(-2**31 * 10**9, 2**31 * 10**9 - 1)


@st.composite
def _events(draw: st.DrawFn) -> tuple[list[Instance], list[dict]]:
    """Instances and a run of their events over one to three rollouts."""
    instances = draw(INSTANCES)
    rollouts = draw(st.lists(NAMES, min_size=1, max_size=3))
    events = draw(st.lists(st.fixed_dictionaries({
        'd': st.integers(0, len(instances) - 1), 'event': st.integers(0, 2), 'episode_id': st.sampled_from(rollouts),
        'stamp_ns': TIME_NS, 'start_frame': st.integers(0, 2**64 - 1), 'end_frame': st.integers(0, 2**64 - 1),
        'start_ns': TIME_NS, 'end_ns': TIME_NS, 'recovered': st.booleans(), 'count': st.integers(0, 2**32 - 1)}),
        min_size=1, max_size=8))
    return instances, events


def _seconds(ns: int) -> tuple[int, int]:
    return divmod(ns, 10**9)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_events())
def test_rosbags_reads_the_bytes_as_the_event(case):
    instances, events = case
    wire = ViolationEventWire(instances, SEVERITY_CODES)
    for e in events:
        msg = typestore().deserialize_cdr(wire.encode(**e), 'safemanip_ros/msg/ViolationEvent')
        inst = instances[e['d']]
        assert (msg.property, msg.instance, msg.category, msg.severity) == \
            (inst.property, inst.instance, inst.category, SEVERITY_CODES[inst.severity])
        assert tuple((kv.key, kv.value) for kv in msg.binding) == inst.binding
        assert (msg.event, msg.episode_id, msg.start_frame, msg.end_frame, msg.recovered, msg.count) == \
            (e['event'], e['episode_id'], e['start_frame'], e['end_frame'], e['recovered'], e['count'])
        assert msg.header.frame_id == ''
        for stamp, ns in ((msg.header.stamp, e['stamp_ns']), (msg.start_stamp, e['start_ns']),
                          (msg.end_stamp, e['end_ns'])):
            assert (stamp.sec, stamp.nanosec) == _seconds(ns)


def test_an_instance_without_binding_and_empty_names():
    wire = ViolationEventWire([_instance('', '', (), '', 'critical')], SEVERITY_CODES)
    msg = typestore().deserialize_cdr(wire.encode(0, 1, '', 0, 0, 0, 0, 0, True, 1),
                                      'safemanip_ros/msg/ViolationEvent')
    assert (msg.property, msg.binding, msg.severity, msg.event, msg.recovered, msg.count) == ('', [], 3, 1, True, 1)


@pytest.mark.ros
@settings(max_examples=100, deadline=None)
@given(_events())
def test_rclpy_reads_the_bytes_as_the_message_it_would_have_made(case):
    from diagnostic_msgs.msg import KeyValue
    from rclpy.serialization import deserialize_message, serialize_message

    from safemanip_ros.msg import ViolationEvent
    from safemanip_ros.nodes.conversions import time_from_ns
    instances, events = case
    wire = ViolationEventWire(instances, SEVERITY_CODES)
    for e in events:
        inst = instances[e['d']]
        expected = ViolationEvent(event=e['event'], property=inst.property, instance=inst.instance,
                                  binding=[KeyValue(key=k, value=v) for k, v in inst.binding],
                                  category=inst.category, severity=SEVERITY_CODES[inst.severity],
                                  episode_id=e['episode_id'],
                                  start_frame=e['start_frame'], end_frame=e['end_frame'],
                                  start_stamp=time_from_ns(e['start_ns']), end_stamp=time_from_ns(e['end_ns']),
                                  recovered=e['recovered'], count=e['count'])
        expected.header.stamp = time_from_ns(e['stamp_ns'])
        raw = wire.encode(**e)
        assert deserialize_message(raw, ViolationEvent) == expected
        assert len(raw) == len(serialize_message(expected))


@pytest.mark.ros
def test_the_severity_codes_here_are_the_monitors():
    from safemanip_ros.nodes.monitor_node import SEVERITY
    assert SEVERITY == SEVERITY_CODES
