"""Supervisor: the pure state machine and retract paths, then the node in its
own process over DDS (pause arrives on the controller topic, retract reverses
the recorded path, stale joint states → fail-safe pause, recovery +
acknowledgement → resume)."""

from __future__ import annotations

import contextlib
import json
import time

import numpy as np
import pytest
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_process, ros_node
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from safemanip_ros.errors import SpecError
from safemanip_ros.msg import SupervisorAction, ViolationEvent
from safemanip_ros.nodes.conversions import time_from_ns
from safemanip_ros.supervisor import JointHistory, ResponsePolicy, Supervisor, retract_path

RELIABLE = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)


def test_policy_lookup_order_and_defaults():
    pol = ResponsePolicy.from_mapping({'property': {'p': 'retract'}, 'category': {'c': 'stop'},
                                       'severity': {'warning': 'pause'}})
    assert pol.response('p', 'c', 'info') == 'retract'
    assert pol.response('q', 'c', 'info') == 'stop'
    assert pol.response('q', 'd', 'warning') == 'pause'
    assert pol.response('q', 'd', 'critical') == 'stop' and pol.response('q', 'd', 'info') == 'log'
    with pytest.raises(SpecError, match="category.c: 'jump' is not one of"):
        ResponsePolicy.from_mapping({'category': {'c': 'jump'}})
    assert pol.unknown_names(['p'], ['c']) == []
    assert pol.unknown_names(['q'], ['c', 'd']) == ["property 'p' is not in the suite (its properties: q)"]


def test_hold_until_recovered_and_acknowledged():
    sup = Supervisor(ResponsePolicy())
    assert [a.action for a in sup.on_violation('i1', 'p', 'c', 'error')] == ['pause']
    assert [a.action for a in sup.on_violation('i2', 'p', 'c', 'warning')] == ['alert']
    assert sup.acknowledge()[1] == 'not resuming: i1 not recovered'
    sup.on_recovered('i1')
    actions, msg = sup.acknowledge()
    assert [a.action for a in actions] == ['resume'] and not sup.holding
    assert [a.action for a in sup.on_stale('joint_states', 0.6, 0.5)] == ['pause']
    assert sup.acknowledge()[1].endswith('still stale')
    sup.on_fresh('joint_states')
    assert sup.acknowledge()[1] == 'resumed'
    sup.on_violation('i3', 'p', 'c', 'critical')
    sup.on_recovered('i3')
    assert sup.acknowledge()[1].startswith('not resuming: stopped')
    assert sup.acknowledge(release_stop=True)[1] == 'resumed'


def test_retract_path_reverses_within_speed():
    h = JointHistory(window_s=1.02)
    for k in range(30):                      # 1.5 s of motion at 20 Hz; the first 0.5 s falls out
        h.add(k * 0.05, [0.01 * k, -0.02 * k])
    path = retract_path(h, max_speed_rad_s=0.5)
    qs = np.array([q for _, q in path])
    assert np.allclose(qs[0], [0.29, -0.58]) and np.allclose(qs[-1], [0.09, -0.18])
    assert (np.diff(qs[:, 0]) < 0).all()     # moving back along the way it came
    ts = np.array([t for t, _ in path])
    speeds = np.abs(np.diff(qs, axis=0)).max(axis=1) / np.diff(ts)
    assert speeds.max() <= 0.5 + 1e-9


@pytest.mark.ros
def test_supervisor_node_over_dds(tmp_path, request):
    from test_alerts import Hook
    hook = Hook('hang')          # a webhook that never answers must not delay a hold
    request.addfinalizer(hook.close)
    policy = tmp_path / 'policy.yaml'
    policy.write_text(f'property:\n  retract_me: retract\nalerts:\n  jsonl: {tmp_path / "alerts.jsonl"}\n'
                      f'  webhook: {{url: "{hook.url}", timeout_s: 30}}\n  min_interval_s: 0\n')
    with node_process('supervisor', '-p', f'policy_file:={policy}', '-p', 'controller_topic:=arm/joint_trajectory',
                      '-p', 'joints:=[a, b]', '-p', 'failsafe_staleness_s:=0.5', '-p', "monitor_status_topic:=''",
                      '-p', 'retract_window_s:=1.0', '-p', 'retract_max_speed_rad_s:=0.5',
                      '-p', "failsafe_topics:=['predicates/contacts:safemanip_ros/msg/PredicateArray:0.5']",
                      log=tmp_path / 'supervisor.log'), ros_node('supervisor_test') as (node, ex):
        trajs, actions = [], []
        node.create_subscription(JointTrajectory, 'arm/joint_trajectory', trajs.append, RELIABLE)
        node.create_subscription(SupervisorAction, 'supervisor_actions', actions.append, RELIABLE)
        js_pub = node.create_publisher(JointState, 'joint_states', RELIABLE)
        ev_pub = node.create_publisher(ViolationEvent, 'violations', RELIABLE)
        k = [0]

        def publish_joints():
            k[0] += 1
            js_pub.publish(JointState(name=['b', 'x', 'a'], position=[-0.02 * k[0], 9.0, 0.01 * k[0]],
                                      header=_header()))

        def spin(cond, timeout_s=30.0, joints=True):
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if joints:
                    publish_joints()
                ex.spin_once(timeout_sec=0.05)
                if cond():
                    return True
            return False

        def call(srv_type, name, req):
            client = node.create_client(srv_type, name)
            assert client.wait_for_service(timeout_sec=30)
            fut = client.call_async(req)
            assert spin(fut.done), f'{name}: ' + (tmp_path / 'supervisor.log').read_text()[-3000:]
            return fut.result()

        def event(kind, instance, prop, severity=ViolationEvent.SEVERITY_ERROR):
            ev_pub.publish(ViolationEvent(event=kind, instance=instance, property=prop, category='c', severity=severity,
                                          start_frame=5, end_frame=9, recovered=kind == ViolationEvent.EVENT_CLOSED))

        for t in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE):
            req = ChangeState.Request()
            req.transition.id = t
            assert call(ChangeState, '/supervisor/change_state', req).success
        assert spin(lambda: k[0] > 10 and ev_pub.get_subscription_count() > 0)
        event(ViolationEvent.EVENT_OPENED, 'p1[x=1]', 'p1')             # error → pause: hold current position
        assert spin(lambda: trajs and any(a.action == SupervisorAction.ACTION_PAUSE for a in actions))
        hold = trajs[-1]
        assert hold.joint_names == ['a', 'b'] and len(hold.points) == 1
        assert hold.points[0].positions[1] == pytest.approx(-2 * hold.points[0].positions[0])
        # The alert went out after the hold: to the JSON-lines file, and to the webhook, which hangs.
        alerts_file = tmp_path / 'alerts.jsonl'
        assert spin(lambda: alerts_file.exists() and alerts_file.read_text().strip() != '')
        alert = json.loads(alerts_file.read_text().splitlines()[0])
        assert alert['type'] == 'violation' and alert['instance'] == 'p1[x=1]' and alert['response'] == ['pause']
        assert alert['time_utc'].endswith('Z') and alert['summary'].startswith('ERROR: p1[x=1] violated at frame 5')
        assert spin(lambda: len(hook.received) == 1) and hook.received[0]['property'] == 'p1'
        assert call(Trigger, '/supervisor/acknowledge', Trigger.Request()).message == 'not resuming: p1[x=1] not recovered'
        event(ViolationEvent.EVENT_CLOSED, 'p1[x=1]', 'p1')
        assert spin(lambda: any('recovered' in a.reason for a in actions))
        assert call(Trigger, '/supervisor/acknowledge', Trigger.Request()).message == 'resumed'
        assert spin(lambda: any(a.action == SupervisorAction.ACTION_RESUME for a in actions))
        trajs.clear()
        event(ViolationEvent.EVENT_OPENED, 'retract_me', 'retract_me')     # policy: retract along the path
        assert spin(lambda: trajs and len(trajs[-1].points) > 3)
        pts = np.array([p.positions for p in trajs[-1].points])
        assert (np.diff(pts[:, 0]) < 0).all() and (np.diff(pts[:, 1]) > 0).all()   # reversed motion
        event(ViolationEvent.EVENT_CLOSED, 'retract_me', 'retract_me')
        assert spin(lambda: sum('recovered' in a.reason for a in actions) >= 2)
        assert call(Trigger, '/supervisor/acknowledge', Trigger.Request()).message == 'resumed'
        n_before = len(actions)
        # Joint states stop: the fail-safe pauses with the reason.
        assert spin(lambda: any('fail-safe: joint_states stale' in a.reason for a in actions[n_before:]),
                    joints=False)
        stale = next(a for a in actions[n_before:] if 'fail-safe' in a.reason)
        assert stale.action == SupervisorAction.ACTION_PAUSE
        # A configured sensor (here a grounding source) that goes silent is reported by name too.
        from safemanip_ros.msg import PredicateArray
        from safemanip_ros.nodes.conversions import predicate_array
        pred_pub = node.create_publisher(PredicateArray, 'predicates/contacts', RELIABLE)
        assert spin(lambda: pred_pub.get_subscription_count() > 0, joints=False)
        for _ in range(5):
            pred_pub.publish(predicate_array({'a': True}, time.time_ns(), 'test'))
            ex.spin_once(timeout_sec=0.05)
        assert spin(lambda: any('fail-safe: /predicates/contacts stale' in a.reason for a in actions), joints=False)
        # The retract (held while the webhook still hangs) was alerted too.
        assert spin(lambda: len(alerts_file.read_text().splitlines()) >= 2, joints=False)


def _header():
    from std_msgs.msg import Header
    return Header(stamp=time_from_ns(time.time_ns()))


def test_a_failed_hold_is_not_a_hold():
    """A pause that could not be delivered leaves the supervisor not holding:
    the next violation sends a command again; retries escalate to stop."""
    sup = Supervisor(ResponsePolicy(), max_hold_failures=3)
    [pause] = sup.on_violation('i1', 'p', 'c', 'error')
    sup.command_result(pause, delivered=False)          # no joint states yet: nothing was sent
    assert not sup.held and sup.holding and sup.pending == pause
    [again] = sup.on_violation('i2', 'p', 'c', 'error')
    assert again.action == 'pause'                      # not "alert; already holding"
    sup.command_result(again, delivered=False)
    [retry] = sup.retry()
    assert retry.action == 'pause' and '(retry 2)' in retry.reason
    sup.command_result(retry, delivered=False)
    [escalated] = sup.retry()
    assert escalated.action == 'stop' and sup.stopped
    assert escalated.reason == 'pause failed 3 times; escalating to stop (violation of i2 (c, error))'
    sup.command_result(escalated, delivered=False)      # the stop fails too: retried, its reason whole
    assert [a.reason for a in sup.retry()] == [f'{escalated.reason} (retry 4)']
    sup.command_result(escalated, delivered=True)
    assert sup.held and sup.pending is None and sup.retry() == []
    assert [a.action for a in sup.on_violation('i3', 'p', 'c', 'error')] == ['alert']   # now truly holding


def test_repeated_lines_are_said_once_a_period_with_the_count_left_out():
    """A hold that cannot be delivered is retried every 0.25 s: its log
    line (less the retry count) is said at once, then once a period with
    how many were left out; another kind of line is said at once."""
    from safemanip_ros.nodes.supervisor_node import _RepeatedLines
    lines = _RepeatedLines(period_s=5.0)
    said = [lines.admit(f'stop: escalating (violation of p (c, error)) (retry {k}) (FAILED)', 0.25 * k)
            for k in range(4, 44)]
    assert said[0] == 'stop: escalating (violation of p (c, error)) (retry 4) (FAILED)'
    kept = [s for s in said if s is not None]
    assert kept[1:] == ['stop: escalating (violation of p (c, error)) (retry 24) (FAILED) (19 more like it left out)']
    assert lines.admit('cannot hold: no joint_states received yet', 1.0) == \
        'cannot hold: no joint_states received yet'
    for k in range(1000):             # a long run's many kinds: a bounded memory of them
        lines.admit(f'pause: violation of p{k} (FAILED)', 20.0)
    assert len(lines._said) == 256


def test_delivered_hold_then_stale_sensor_alerts():
    sup = Supervisor(ResponsePolicy())
    [pause] = sup.on_violation('i1', 'p', 'c', 'error')
    sup.command_result(pause, delivered=True)
    assert [a.action for a in sup.on_stale('joint_states', 0.6, 0.5)] == ['alert']


@contextlib.contextmanager
def _supervisor_beside(name: str, *ros_args: str):
    """A SupervisorNode, configured and active, beside a test node in this
    process: (test node, executor, supervisor, the actions it published)."""
    from safemanip_ros.nodes.supervisor_node import SupervisorNode
    with ros_node(name, ['--ros-args', '-p', "monitor_status_topic:=''", *ros_args]) as (node, ex):
        actions: list[SupervisorAction] = []
        node.create_subscription(SupervisorAction, 'supervisor_actions', actions.append, RELIABLE)
        sup = SupervisorNode(context=node.context)
        ex.add_node(sup)
        try:
            sup.trigger_configure()
            sup.trigger_activate()
            yield node, ex, sup, actions
        finally:
            ex.remove_node(sup)
            sup.destroy_node()


def _spin_publishing(ex, pub, messages, seconds: float, until=None) -> bool:
    """Spin up to ``seconds``, publishing ``messages()`` (stamped now) each
    turn, until ``until()`` holds (None: the whole time)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for msg in messages():
            msg.header.stamp = time_from_ns(time.time_ns())
            pub.publish(msg)
        ex.spin_once(timeout_sec=0.05)
        if until is not None and until():
            return True
    return until is None


@pytest.mark.ros
@pytest.mark.parametrize('arm_moves, controller', [(False, True), (True, True), (False, False)],
                         ids=['held', 'arm_moves', 'no_controller'])
def test_a_hold_is_confirmed_by_the_arm_or_escalated(arm_moves, controller):
    """A delivered pause is confirmed once the measured arm is still, saying what received it; an arm that
    keeps moving makes it a failed hold: not holding, retried, escalated to stop.  A still arm whose hold
    nothing received (no subscriber on the controller topic) is said as stopped, not held, and is sent again
    once the topic has a subscriber (a controller discovered late, a supervisor restarted before discovery)."""
    from trajectory_msgs.msg import JointTrajectory
    with _supervisor_beside('hold_test', '-r', '__ns:=/hold_confirm_test',
                            '-p', 'hold_confirm_timeout_s:=0.6') as (node, ex, sup, actions):
        if controller:      # a controller listening on the hold topic
            node.create_subscription(JointTrajectory, 'joint_trajectory_controller/joint_trajectory',
                                     lambda m: None, RELIABLE)
        events = node.create_publisher(ViolationEvent, 'violations', RELIABLE)
        js = node.create_publisher(JointState, 'joint_states', RELIABLE)
        q = [0.0]

        def arm():
            if arm_moves:
                q[0] += 0.01                    # 0.2 rad/s: the controller ignores the hold
            return [JointState(name=['j1'], position=[q[0]])]
        _spin_publishing(ex, js, arm, 0.5, lambda: not controller or sup._pub_traj.get_subscription_count() > 0)
        ev = ViolationEvent(event=ViolationEvent.EVENT_OPENED, property='p', instance='p', category='c',
                            severity=ViolationEvent.SEVERITY_ERROR)
        events.publish(ev)
        if not arm_moves and controller:
            topic = '/hold_confirm_test/joint_trajectory_controller/joint_trajectory'
            assert _spin_publishing(ex, js, arm, 10, lambda: any(
                f'pause confirmed: received by 1 subscriber of {topic}; the arm stopped' in a.reason
                for a in actions)), [a.reason for a in actions]
            assert sup.supervisor.held and sup.supervisor.hold_confirmed
        elif not arm_moves:
            assert _spin_publishing(ex, js, arm, 10, lambda: any(
                'the joints are still' in a.reason and 'but no controller received the hold (nothing subscribes to '
                in a.reason and a.action == SupervisorAction.ACTION_ALERT for a in actions)), [a.reason for a in actions]
            assert not any('pause confirmed' in a.reason for a in actions)
            # The controller comes up (or DDS discovery matches it) after the hold went out: the hold is sent
            # again, to it, while the arm is still held.
            got: list[JointTrajectory] = []
            node.create_subscription(JointTrajectory, 'joint_trajectory_controller/joint_trajectory', got.append,
                                     RELIABLE)
            topic = '/hold_confirm_test/joint_trajectory_controller/joint_trajectory'
            assert _spin_publishing(ex, js, arm, 10, lambda: bool(got) and any(
                f'pause sent again: 1 subscriber of {topic} appeared after the hold went out to none' in a.reason
                for a in actions)), ([a.reason for a in actions], len(got))
            assert list(got[0].points[0].positions) == [0.0] and sup.supervisor.held
        else:
            assert _spin_publishing(ex, js, arm, 15, lambda: any(a.action == SupervisorAction.ACTION_STOP
                                                                 for a in actions)), [a.reason for a in actions]
            reasons = [a.reason for a in actions]
            assert any('not confirmed: the arm did not stop' in r for r in reasons), reasons
            assert any('escalating to stop' in r for r in reasons), reasons


@pytest.mark.ros
@pytest.mark.parametrize('complete_too', [False, True], ids=['only_unusable', 'gripper_messages_beside'])
def test_joint_states_the_arm_cannot_be_held_with_hold_the_arm(complete_too):
    """A driver whose joint_states lack the configured joints (a wrong
    ``joints`` parameter) never makes the arm holdable: the supervisor says
    so and, no usable message coming, holds by its fail-safe instead of
    waiting for a violation it could not act on.  Gripper-only messages
    beside complete ones (drivers publish them so) are normal: no action."""
    with _supervisor_beside('joints_test', '-r', f'__ns:=/unusable_joints_{int(complete_too)}',
                            '-p', 'joints:=[j1, j2]', '-p', "monitor_open_violations_service:=''") \
            as (node, ex, sup, actions):
        js = node.create_publisher(JointState, 'joint_states', RELIABLE)

        def driver():
            messages = [JointState(name=['j1', 'finger'], position=[0.0, 0.01])]     # no j2
            if complete_too:
                messages.append(JointState(name=['j1', 'j2'], position=[0.0, 0.5]))
            return messages
        if complete_too:
            assert _spin_publishing(ex, js, driver, 10, lambda: sup._recent_joints.latest() is not None)
            _spin_publishing(ex, js, driver, 1.5)
            assert not actions, [a.reason for a in actions]
        else:
            assert _spin_publishing(ex, js, driver, 10, lambda: any(
                a.action == SupervisorAction.ACTION_PAUSE and 'fail-safe: joint_states stale' in a.reason
                for a in actions)), [a.reason for a in actions]
            assert sup._joints_warned == {'lacks joints j2 (joints parameter)'}
