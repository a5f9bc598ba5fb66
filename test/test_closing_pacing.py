"""The pacing of violation closings (monitor/pacing.py): out in order within
a frame's budget, the rest in the frames after, none later than its longest
wait, an instance's closing before its next event, and every one at an
episode's end.  A clock that advances by what each publish costs stands in
for the frame's time, so the cases are exact."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from safemanip_ros.monitor.pacing import ClosingQueue

PUBLISH_S = 0.00004     # one event's DDS write to another process, about


class Frame:
    """A frame's clock: starts at ``start_s``, each publish advances it."""

    def __init__(self, start_s: float) -> None:
        self.now_s = start_s

    def __call__(self) -> float:
        return self.now_s

    def publish(self, out: list[bytes], payload: bytes) -> None:
        out.append(payload)
        self.now_s += PUBLISH_S


def _release(q: ClosingQueue, frame: Frame, deadline_s: float) -> list[bytes]:
    out: list[bytes] = []
    for payload in q.release(deadline_s, frame):
        frame.publish(out, payload)
    return out


def test_a_burst_goes_out_over_the_next_frames_in_order():
    q = ClosingQueue(max_wait_s=0.5)
    for d in range(200):
        q.push(d, bytes([d]), 0.001)
    period_s, budget_s = 0.01, 0.006
    sent: list[bytes] = []
    frames = 0
    while q:
        start_s = frames * period_s + 0.001
        sent += _release(q, Frame(start_s), start_s + budget_s - 0.001)   # 1 ms of the frame used before
        frames += 1
    assert sent == [bytes([d]) for d in range(200)]
    assert frames == 2                    # 125 fit in the first frame's 5 ms, the rest in the next
    assert q.paced == 75
    assert 0.01 < q.longest_wait_s < 0.02


def test_none_waits_longer_than_its_longest_wait_whatever_the_load():
    q = ClosingQueue(max_wait_s=0.05)
    q.push(0, b'a', 0.0)
    q.push(1, b'b', 0.03)
    for k in range(1, 5):                     # frames already past their budget when they release
        frame = Frame(k * 0.01)
        assert _release(q, frame, deadline_s=k * 0.01 - 0.001) == []
    out = _release(q, Frame(0.05), deadline_s=0.0)
    assert out == [b'a']                       # 50 ms waited; b (20 ms) waits on
    assert _release(q, Frame(0.08), deadline_s=0.0) == [b'b']
    assert q.paced == 2 and q.longest_wait_s == pytest.approx(0.05)


def test_an_instance_closing_goes_before_its_next_event_and_leaves_the_others_queued():
    q = ClosingQueue()
    for d, p in ((3, b'c3'), (5, b'c5'), (3, b'c3-again')):
        q.push(d, p, 0.0)
    assert q.take(3, 0.002) == [b'c3', b'c3-again']
    assert q.take(4, 0.002) == []
    assert len(q) == 1
    assert q.drain(0.003) == [b'c5'] and not q


def test_an_episode_end_takes_every_closing():
    q = ClosingQueue()
    for d in range(10):
        q.push(d, bytes([d]), 0.0)
    assert _release(q, Frame(1.0), deadline_s=0.0) == [bytes([d]) for d in range(10)]   # all waited 1 s
    for d in range(10):
        q.push(d, bytes([d]), 2.0)
    assert q.drain(2.001) == [bytes([d]) for d in range(10)]
    assert len(q) == 0


def test_a_negative_wait_is_refused():
    with pytest.raises(ValueError, match='max_wait_s -1'):
        ClosingQueue(max_wait_s=-1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.integers(0, 40)), max_size=60),
       st.floats(0.0, 0.02))
def test_per_instance_order_and_nothing_lost(ops, budget_s):
    """Frames push closings of a few instances, some frames open an instance
    (taking its closings first); every closing goes out once, each
    instance's in the order pushed, none after its longest wait plus a frame."""
    q = ClosingQueue(max_wait_s=0.05)
    sent: list[tuple[int, int]] = []
    pushed: dict[int, list[int]] = {}
    seq = 0
    for k, (d, opens, closes) in enumerate(ops):
        frame = Frame(k * 0.01)
        if opens:
            for payload in q.take(d, frame()):
                sent.append((d, int.from_bytes(payload, 'big')))
        for _ in range(closes % 4):
            pushed.setdefault(d, []).append(seq)
            q.push(d, seq.to_bytes(4, 'big'), frame())
            seq += 1
        for payload in q.release(frame() + budget_s, frame):
            n = int.from_bytes(payload, 'big')
            sent.append((next(i for i, s in pushed.items() if n in s), n))
            frame.now_s += PUBLISH_S
    for payload in q.drain(len(ops) * 0.01):
        n = int.from_bytes(payload, 'big')
        sent.append((next(i for i, s in pushed.items() if n in s), n))
    assert sorted(n for _, n in sent) == list(range(seq))
    for d, seqs in pushed.items():
        assert [n for i, n in sent if i == d] == seqs
    assert q.longest_wait_s <= 0.05 + 0.01 + 0.01        # its longest wait, the next frame, publishes before it


INSTANCES = 30


def _suite(path) -> None:
    """``INSTANCES`` properties over one predicate: a touch must end within 2 frames; it recovers once released."""
    lines = ['suite: pacing', 'rate_hz: 50', 'predicates:', '  touch: {description: the robot touches it}',
             'properties:']
    for i in range(INSTANCES):
        lines += [f'  - name: p_{i:02d}', '    description: a touch ends soon', '    category: collision_contact',
                  '    formula: "G(touch -> F[0,2] !touch)"', '    trigger: touch', '    recovery: "F !touch"',
                  '    severity: warning']
    path.write_text('\n'.join(lines) + '\n')


@pytest.mark.ros
def test_paced_closings_reach_subscribers_in_order_and_all_by_the_episode_end(tmp_path, monkeypatch):
    """A live monitor over DDS with no room in any frame for closings (budget
    0): every opening goes out in its frame; the closings of the burst wait
    their longest (0.5 s), never less, then all go out, each after its
    instance's opening; those queued when the episode ends go out before it
    ends; none is lost or repeated."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from ros_helpers import RELIABLE, spin_until
    from std_srvs.srv import Trigger

    from safemanip_ros.msg import MonitorMetrics, PredicateArray, ViolationEvent
    from safemanip_ros.nodes import monitor_node
    from safemanip_ros.nodes.conversions import ns_from_time, predicate_array
    from safemanip_ros.nodes.qos import RECORDED_EVENTS

    monkeypatch.setattr(monitor_node, 'CLOSINGS_BUDGET', 0.0)
    suite = tmp_path / 'suite.yaml'
    _suite(suite)
    rclpy.init(args=['--ros-args', '-r', '__ns:=/pacing_test', '-p', 'rate_hz:=50.0',
                     '-p', f'properties:=[{suite}]', '-p', 'predicate_topics:=[predicates/contacts]'])
    try:
        monitor = monitor_node.MonitorNode()
        client = rclpy.create_node('pacing_client', namespace='/pacing_test')
        ex = SingleThreadedExecutor()
        ex.add_node(monitor)
        ex.add_node(client)
        events: list[tuple[int, ViolationEvent]] = []     # (arrival on the node clock, event)
        finals: list[MonitorMetrics] = []
        client.create_subscription(ViolationEvent, 'violations',
                                   lambda m: events.append((client.get_clock().now().nanoseconds, m)),
                                   RECORDED_EVENTS)
        client.create_subscription(MonitorMetrics, 'metrics/final', finals.append, RECORDED_EVENTS)
        pub = client.create_publisher(PredicateArray, 'predicates/contacts', RELIABLE)
        monitor.trigger_configure()
        monitor.trigger_activate()
        touch = [False]

        def publish() -> None:
            pub.publish(predicate_array({'touch': touch[0]}, client.get_clock().now().nanoseconds, 'test'))

        def of(kind: int) -> list[tuple[int, ViolationEvent]]:
            return [(t, e) for t, e in events if e.event == kind]

        assert spin_until(ex, lambda: monitor._arming.armed and monitor._frames_total > 5, 60, each=publish)
        for episode_end in (False, True):
            before = len(of(ViolationEvent.EVENT_CLOSED))
            touch[0] = True
            assert spin_until(ex, lambda: len(of(ViolationEvent.EVENT_OPENED)) >= (INSTANCES * (1 + episode_end)),
                              60, each=publish)
            touch[0] = False
            assert spin_until(ex, lambda: len(monitor._closings) == INSTANCES, 60, each=publish)
            if episode_end:
                assert monitor._srv_end(Trigger.Request(), Trigger.Response()).success    # the service's callback
                assert len(monitor._closings) == 0
            assert spin_until(ex, lambda: len(of(ViolationEvent.EVENT_CLOSED)) == before + INSTANCES, 60,
                              each=publish)
            if not episode_end:
                for arrived_ns, e in of(ViolationEvent.EVENT_CLOSED)[before:]:
                    # Not before its longest wait from its frame (node clock: the system clock here).
                    assert arrived_ns - ns_from_time(e.header.stamp) >= 0.45e9, e
        assert spin_until(ex, lambda: bool(finals), 30)
        # Every instance: opened, closed (recovered), in that order, once per touch; none repeated.
        for i in range(INSTANCES):
            mine = [(e.event, e.recovered) for _, e in events if e.property == f'p_{i:02d}']
            assert mine == [(ViolationEvent.EVENT_OPENED, False), (ViolationEvent.EVENT_CLOSED, True)] * 2, mine
        assert monitor._closings.paced == 2 * INSTANCES
        assert monitor._closings.longest_wait_s >= 0.5
        monitor.trigger_deactivate()
        monitor.destroy_node()
        client.destroy_node()
    finally:
        rclpy.try_shutdown()
