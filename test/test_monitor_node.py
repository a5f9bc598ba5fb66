"""The lifecycle monitor node in its own process over DDS: configure and
activate through the lifecycle services, predicates in → verdicts, violation
events, metrics and diagnostics out; rollout, status and reload services."""

from __future__ import annotations

import json
import re
import time

import pytest
from conftest import REPO
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
from ros_helpers import RELIABLE, call_service, node_process, ros_node, spin_until
from std_srvs.srv import Trigger

from safemanip_ros.cli.watch import VerdictBoard
from safemanip_ros.msg import MonitorMetrics, MonitorStatus, VerdictArray, ViolationEvent
from safemanip_ros.nodes.conversions import ns_from_time, predicate_array
from safemanip_ros.srv import OpenViolations

pytestmark = pytest.mark.ros
CLEAR = {'forbidden_contact': False, 'reach_in_microwave': False, 'fixture_fully_open_microwave': False,
         'reach_in_cabinet': False, 'fixture_fully_open_cabinet': False}
"""Every predicate the fixture's properties read, all false: nothing violated."""


@pytest.fixture
def monitor_proc(tmp_path):
    with node_process('monitor', '-p', f'properties:=[{REPO / "config" / "properties" / "safemanip.yaml"}]',
                      '-p', f'scene:={REPO / "config" / "scenes" / "kitchen_demo.yaml"}',
                      '-p', 'only:=[reach_in_fixture_only_when_fully_open, no_forbidden_contact]',
                      '-p', 'metrics_period_s:=0.2', log=tmp_path / 'monitor.log') as proc:
        yield proc


def _call(node, executor, srv_type, name, request, timeout_s=30.0):
    return call_service(node, executor, srv_type, name, request, timeout_s)


def _configure_and_activate(node, executor) -> None:
    for transition in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE):
        req = ChangeState.Request()
        req.transition.id = transition
        assert _call(node, executor, ChangeState, '/monitor/change_state', req).success


@pytest.fixture
def client():
    """A test node in its own context, with an executor; shut down afterwards."""
    with ros_node('monitor_node_test') as pair:
        yield pair


@pytest.mark.slow
def test_monitor_node_end_to_end(monitor_proc, client, tmp_path):
    node, ex = client
    events, verdicts, metrics, status, diags = [], [], [], [], []
    node.create_subscription(ViolationEvent, 'violations', events.append, RELIABLE)
    node.create_subscription(VerdictArray, 'verdicts', verdicts.append, RELIABLE)
    node.create_subscription(MonitorMetrics, 'metrics', metrics.append, RELIABLE)
    node.create_subscription(MonitorStatus, 'status', status.append, RELIABLE)
    node.create_subscription(DiagnosticArray, '/diagnostics', diags.append, RELIABLE)
    pub = node.create_publisher(type(predicate_array({}, 0, '')), 'predicates', RELIABLE)
    _configure_and_activate(node, ex)
    frames = dict(CLEAR)

    def spin_publish(cond, timeout_s=30.0):
        return spin_until(ex, cond, timeout_s, each=lambda: pub.publish(predicate_array(frames, time.time_ns(), 'test')))

    assert spin_publish(lambda: len(verdicts) > 3 and status and diags)
    board = VerdictBoard()
    for m in verdicts:
        board.update(m)
    assert not events and len(board) == 3 and all(v.verdict != 0 for v in board.by_instance.values())
    # A rollout's first frame lists every instance; a frame in which nothing changed lists none.
    assert verdicts[0].frame == 0 and len(verdicts[0].verdicts) == 3
    assert any(not m.verdicts for m in verdicts[1:])
    assert {s.name for s in diags[-1].status} == {'safemanip/collision_contact', 'safemanip/enclosure_access',
                                                   'safemanip/callbacks', 'safemanip/timing',
                                                   'safemanip/unsupported', 'safemanip/clock'}
    frames['reach_in_microwave'] = True        # gripper enters a closed microwave
    assert spin_publish(lambda: any(e.event == ViolationEvent.EVENT_OPENED for e in events))
    opened = next(e for e in events if e.event == ViolationEvent.EVENT_OPENED)
    # The frame that opened it lists the instance whose mode changed (and, unless a full set was due, only it);
    # a frame caught up late is not published, its changes go out with the next one.
    assert spin_publish(lambda: any(m.frame >= opened.start_frame for m in verdicts))
    at_open = next(m for m in verdicts if m.frame >= opened.start_frame)
    assert 'reach_in_fixture_only_when_fully_open[fixture=microwave]' in {v.instance for v in at_open.verdicts}
    assert len(at_open.verdicts) in (1, 3)
    assert opened.instance == 'reach_in_fixture_only_when_fully_open[fixture=microwave]'
    assert opened.category == 'enclosure_access' and opened.severity == ViolationEvent.SEVERITY_ERROR
    assert [(kv.key, kv.value) for kv in opened.binding] == [('fixture', 'microwave')]
    # Asked while it is open, the monitor lists the violation episode as the event that opened it (a supervisor
    # started now learns it there); the inputs keep coming meanwhile, or they would go stale.
    open_client = node.create_client(OpenViolations, '/monitor/open_violations')
    assert open_client.wait_for_service(timeout_sec=30.0)
    future = open_client.call_async(OpenViolations.Request())
    assert spin_publish(future.done)
    listed = future.result()
    assert listed.episode_id == opened.episode_id and len(listed.open) == 1, listed
    assert list(listed.heard_topics) == ['/predicates'], listed.heard_topics
    same = listed.open[0]
    assert same == opened, (same, opened)      # field for field, its stamps included
    assert ns_from_time(listed.header.stamp) >= ns_from_time(opened.header.stamp)
    assert spin_publish(lambda: any(d.level == b'\x02' for d in diags[-1].status))
    frames['reach_in_microwave'] = False       # it leaves: the recovery formula closes the violation episode
    assert spin_publish(lambda: any(e.event == ViolationEvent.EVENT_CLOSED for e in events))
    closed = next(e for e in events if e.event == ViolationEvent.EVENT_CLOSED)
    assert closed.recovered and closed.start_frame == opened.start_frame and closed.end_frame > closed.start_frame
    future = open_client.call_async(OpenViolations.Request())
    assert spin_publish(future.done)
    assert future.result().episode_id == opened.episode_id and not future.result().open, future.result()
    # The operator sees each event in the log (written once the frame's outputs are out).
    instance = 'reach_in_fixture_only_when_fully_open[fixture=microwave]'
    lines = [f'violation opened: {instance} [{opened.start_frame}, {opened.start_frame}]',
             f'violation closed (recovered): {instance} [{closed.start_frame}, {closed.end_frame}]']
    assert spin_until(ex, lambda: all(line in (tmp_path / 'monitor.log').read_text() for line in lines), 30.0), \
        (tmp_path / 'monitor.log').read_text()[-2000:]
    answer = _call(node, ex, Trigger, '/monitor/status', Trigger.Request())
    assert json.loads(answer.message)['instances'] == 3
    answer = _call(node, ex, Trigger, '/monitor/end_episode', Trigger.Request())
    assert answer.success and json.loads(answer.message)['violations'] == 1
    assert spin_publish(lambda: any(m.final for m in metrics))
    final = next(m for m in metrics if m.final)
    by_instance = {p.instance: p for p in final.properties}
    assert by_instance['reach_in_fixture_only_when_fully_open[fixture=microwave]'].violations == 1
    assert by_instance['reach_in_fixture_only_when_fully_open[fixture=microwave]'].triggers == 1
    answer = _call(node, ex, Trigger, '/monitor/start_episode', Trigger.Request())
    assert answer.success and re.match(r'monitor-\d{8}T\d{6}Z-[0-9a-f]{4}-0002', answer.message), answer.message
    assert answer.message.split('-')[:3] == final.episode_id.split('-')[:3]      # one run id, the next rollout
    answer = _call(node, ex, Trigger, '/monitor/reload', Trigger.Request())
    assert answer.success and answer.message == '3 property instances'
    # A reload from a broken file keeps the running monitor and says why.
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    req = SetParameters.Request(parameters=[Parameter(name='properties', value=ParameterValue(
        type=ParameterType.PARAMETER_STRING_ARRAY, string_array_value=['/nonexistent/suite.yaml']))])
    assert _call(node, ex, SetParameters, '/monitor/set_parameters', req).results[0].successful
    answer = _call(node, ex, Trigger, '/monitor/reload', Trigger.Request())
    assert not answer.success and 'kept the running properties' in answer.message
    assert '/nonexistent/suite.yaml: cannot read' in answer.message
    assert json.loads(_call(node, ex, Trigger, '/monitor/status', Trigger.Request()).message)['instances'] == 3


@pytest.mark.slow
def test_monitor_node_unknown_when_nothing_published(monitor_proc, client):
    node, ex = client
    status = []
    node.create_subscription(MonitorStatus, 'status', status.append, RELIABLE)
    _configure_and_activate(node, ex)
    assert spin_until(ex, lambda: bool(status))
    assert 'forbidden_contact' in status[-1].unknown_predicates
    assert status[-1].instances == 3


@pytest.mark.slow
def test_late_inputs_open_no_violation_while_arming(monitor_proc, client):
    """Grounding publishes unknowns until its inputs arrive.  Unknown contacts count
    as forbidden (unknown_as: true), so 3 s of them once opened a violation at
    start-up; while arming, nothing is monitored and the status says so."""
    node, ex = client
    events, verdicts, status = [], [], []
    node.create_subscription(ViolationEvent, 'violations', events.append, RELIABLE)
    node.create_subscription(VerdictArray, 'verdicts', verdicts.append, RELIABLE)
    node.create_subscription(MonitorStatus, 'status', status.append, RELIABLE)
    pub = node.create_publisher(type(predicate_array({}, 0, '')), 'predicates', RELIABLE)
    _configure_and_activate(node, ex)
    unknown = {'forbidden_contact': None, 'reach_in_microwave': None, 'fixture_fully_open_microwave': None}
    # Inputs arrive 3 s late: 60 frames > the 21-frame window (3 s of spinning, on purpose: nothing must happen).
    spin_until(ex, lambda: False, 3.0, each=lambda: pub.publish(predicate_array(unknown, time.time_ns(), 'test')))
    assert not events and not verdicts
    assert status and all(s.state == 'arming' for s in status)
    known = {'forbidden_contact': False, 'reach_in_microwave': False, 'fixture_fully_open_microwave': False}
    spin_until(ex, lambda: bool(verdicts and status[-1].state == 'active'), 30.0,
               each=lambda: pub.publish(predicate_array(known, time.time_ns(), 'test')))
    assert verdicts and status[-1].state == 'active' and not events


@pytest.mark.slow
def test_a_long_run_makes_no_timers_per_frame():
    """The frame builder is one timer reset each tick, and a destroyed timer
    leaves rclpy's callback-group bookkeeping: at 200 Hz the node's
    callback group holds as many entities after 400 frames as after 100
    (one timer a frame once grew it by 360,000 entries an hour)."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from safemanip_ros.nodes.monitor_node import MonitorNode
    # The node takes the default context, in a namespace of its own.
    rclpy.init(args=['--ros-args', '-r', '__ns:=/timer_count_test', '-p', 'rate_hz:=200.0',
                     '-p', f'properties:=[{REPO / "config" / "properties" / "safemanip.yaml"}]',
                     '-p', 'only:=[no_forbidden_contact]'])
    try:
        monitor = MonitorNode()
        ex = SingleThreadedExecutor()
        ex.add_node(monitor)
        monitor.trigger_configure()
        monitor.trigger_activate()
        group = monitor.default_callback_group

        def frames() -> int:
            return int(monitor._frames_total)
        assert spin_until(ex, lambda: frames() >= 100, 60)
        size = len(group.entities)
        assert spin_until(ex, lambda: frames() >= 400, 60)
        assert len(group.entities) == size, (size, len(group.entities))
        # Timers made and destroyed by hand (the phase lock's early tick) leave nothing either.
        for _ in range(50):
            monitor.destroy_timer(monitor.create_timer(10.0, lambda: None))
        assert len(group.entities) == size
        monitor.trigger_deactivate()
        monitor.destroy_node()
    finally:
        rclpy.try_shutdown()


@pytest.mark.slow
def test_samples_on_another_clock_are_named_once(monitor_proc, client, tmp_path):
    """Samples stamped 1000 s ahead of the monitor's clock (a publisher on
    the system time against a monitor on /clock, or the reverse) are seen
    by no frame: the predicate reads as unknown, and the monitor says why,
    once, in its log and in ``/diagnostics``."""
    node, ex = client
    status, diags = [], []
    node.create_subscription(MonitorStatus, 'status', status.append, RELIABLE)
    node.create_subscription(DiagnosticArray, '/diagnostics', diags.append, RELIABLE)
    pub = node.create_publisher(type(predicate_array({}, 0, '')), 'predicates', RELIABLE)
    _configure_and_activate(node, ex)
    frames = dict(CLEAR)

    def clock(d):
        return [s for s in d.status if s.name == 'safemanip/clock']
    assert spin_until(ex, lambda: any(clock(d) and clock(d)[0].level == DiagnosticStatus.WARN and int(clock(d)[0].values[0].value) >= 20
                                      for d in diags), 30,
                      each=lambda: pub.publish(predicate_array(frames, time.time_ns() + 1000 * 10**9, 'test')))
    warned = next(clock(d)[0] for d in reversed(diags) if clock(d) and clock(d)[0].level == DiagnosticStatus.WARN)
    assert warned.values[0].key == '/predicates' and 'off this node' in warned.message, warned
    assert status and 'forbidden_contact' in status[-1].unknown_predicates, status[-1]
    log = (tmp_path / 'monitor.log').read_text()
    said = [line for line in log.splitlines() if 'ahead of this node' in line]
    assert len(said) == 1 and '/predicates: a sample stamped' in said[0] and 'use_sim_time' in said[0], log[-2000:]
