"""Holds through the controllers real arms use, over DDS: the supervisor
cancels the goal of a ``control_msgs/action/FollowJointTrajectory`` server
(written here from the upstream interface with rclpy's ActionServer) and
pauses MoveIt Servo's ``std_srvs/SetBool``.  The hold is judged as before, by
the measured joints: the arm below moves only while a goal executes, and
nothing listens to the supervisor's trajectory topic, so only the cancel can
stop it.  A server that rejects the cancel, or never answers, makes the hold
a failed one: retried, then escalated to stop."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import pytest
import rclpy
from conftest import wait_for
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from ros_helpers import ros_node
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectoryPoint

from safemanip_ros.msg import SupervisorAction, ViolationEvent
from safemanip_ros.nodes.conversions import time_from_ns
from safemanip_ros.nodes.qos import RELIABLE
from safemanip_ros.nodes.runner import spin_until_shutdown

pytestmark = pytest.mark.ros
SPEED_RAD_S = 0.3


class Joint:
    """One joint that moves at 0.3 rad/s while ``moving``, its measured
    position on ``joint_states`` at 100 Hz (what the fake controllers drive)."""

    moving = False

    def __init__(self, node, **timer_options) -> None:
        self.q = 0.0
        self.js = node.create_publisher(JointState, 'joint_states', RELIABLE)
        node.create_timer(0.01, self._tick, **timer_options)

    def _tick(self) -> None:
        if self.moving:
            self.q += SPEED_RAD_S * 0.01
        msg = JointState(name=['j1'], position=[self.q])
        msg.header.stamp = time_from_ns(time.time_ns())
        self.js.publish(msg)


class Arm(Joint):
    """A joint trajectory controller reduced to its interface: the joint
    moves while a FollowJointTrajectory goal executes."""

    def __init__(self, node, action: str, cancel: str = 'accept') -> None:
        self.moving, self.canceled, self.done = False, threading.Event(), threading.Event()
        group = ReentrantCallbackGroup()
        self.server = ActionServer(
            node, FollowJointTrajectory, action, execute_callback=self._execute,
            goal_callback=lambda goal: GoalResponse.ACCEPT,
            cancel_callback=lambda handle: CancelResponse.ACCEPT if cancel == 'accept' else CancelResponse.REJECT,
            callback_group=group)
        super().__init__(node, callback_group=group)

    def _execute(self, handle):
        self.moving = True
        end = time.monotonic() + 60
        try:
            while time.monotonic() < end and not self.done.is_set():
                if handle.is_cancel_requested:
                    handle.canceled()
                    self.canceled.set()
                    return FollowJointTrajectory.Result(error_code=0, error_string='canceled')
                time.sleep(0.005)
            handle.abort()
            return FollowJointTrajectory.Result(error_code=FollowJointTrajectory.Result.INVALID_GOAL,
                                                error_string='test over')
        finally:
            self.moving = False


@pytest.fixture
def ros():
    """A context, a harness node and a supervisor, spun by a multi-threaded executor in the background."""
    from safemanip_ros.nodes.supervisor_node import SupervisorNode
    ctx = rclpy.Context()
    made: dict = {}

    def start(namespace: str, params: dict[str, str]) -> tuple:
        args = ['--ros-args', '-r', f'__ns:={namespace}', '-p', 'hold_confirm_timeout_s:=1.0',
                '-p', 'controller_call_timeout_s:=2.0', '-p', "monitor_status_topic:=''",
                '-p', 'controller_topic:=nobody_listens/joint_trajectory']
        for k, v in params.items():
            args += ['-p', f'{k}:={v}']
        rclpy.init(context=ctx, args=args)
        sup = SupervisorNode(context=ctx)
        node = rclpy.create_node('controller_harness', context=ctx)
        ex = MultiThreadedExecutor(num_threads=4, context=ctx)
        ex.add_node(sup)
        ex.add_node(node)
        stop = threading.Event()
        made.update(sup=sup, node=node, ex=ex, stop=stop)
        thread = threading.Thread(target=spin_until_shutdown, args=(ex, stop), daemon=True)
        made['thread'] = thread
        return sup, node, thread

    yield start
    if made:
        # The spinning thread ends before the executor and the nodes go: destroyed under it, an action
        # client raised in that thread, and rclpy's executor shutdown raced its last wait (a guard
        # condition destroyed while the thread triggered it).
        made['stop'].set()
        if made['thread'].ident is not None:
            made['thread'].join(timeout=10)
        made['ex'].shutdown(timeout_sec=5)
        made['sup'].destroy_node()
        made['node'].destroy_node()
        rclpy.try_shutdown(context=ctx)


def violation(node) -> Callable[[int], None]:
    pub = node.create_publisher(ViolationEvent, 'violations', RELIABLE)

    def send(kind: int) -> None:
        pub.publish(ViolationEvent(event=kind, property='p', instance='p', category='c', recovered=True,
                                   severity=ViolationEvent.SEVERITY_ERROR, episode_id='e', start_frame=3,
                                   end_frame=3 if kind == ViolationEvent.EVENT_OPENED else 9))
    return send


def start_goal(client: ActionClient):
    """A goal sent by ``client`` (made before the spinning thread starts: rclpy's ActionClient
    joins its node before it has its lock, and a spinning executor can meet it half made)."""
    assert client.wait_for_server(timeout_sec=20)
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = ['j1']
    goal.trajectory.points = [JointTrajectoryPoint(positions=[10.0])]
    future = client.send_goal_async(goal)
    assert wait_for(future.done)
    handle = future.result()
    assert handle.accepted
    return client, handle


@pytest.mark.parametrize('cancel', ['accept', 'reject'])
def test_a_hold_cancels_the_goal_moving_the_arm(ros, cancel):
    action = f'/arm_controller_{cancel}/follow_joint_trajectory'       # one server per case: none left over
    sup, node, thread = ros('/ctrl_' + cancel, {'trajectory_action': action})
    actions: list[SupervisorAction] = []
    node.create_subscription(SupervisorAction, 'supervisor_actions', actions.append, RELIABLE)
    arm = Arm(node, action, cancel)
    send = violation(node)
    client = ActionClient(node, FollowJointTrajectory, action)
    thread.start()
    sup.trigger_configure()
    sup.trigger_activate()
    client, handle = start_goal(client)
    assert wait_for(lambda: arm.moving and sup._controllers[0].moving_goals == 1 and sup._history.latest() is not None)
    q_before = arm.q
    t0 = time.monotonic()
    send(ViolationEvent.EVENT_OPENED)
    reasons = lambda: [a.reason for a in actions]          # noqa: E731
    if cancel == 'accept':
        assert wait_for(arm.canceled.is_set), reasons()
        latency_s = time.monotonic() - t0
        result = handle.get_result_async()
        assert wait_for(result.done)
        from action_msgs.msg import GoalStatus
        assert result.result().status == GoalStatus.STATUS_CANCELED
        # The measured arm stopped: the hold is confirmed by the joints, as for a topic hold.
        assert wait_for(lambda: any('pause confirmed: received by' in r and 'the arm stopped' in r for r in reasons())), reasons()
        assert sup.supervisor.held and sup.supervisor.hold_confirmed
        assert not arm.moving and arm.q - q_before < SPEED_RAD_S * (latency_s + 0.1)
        assert not any(a.action == SupervisorAction.ACTION_STOP for a in actions)
    else:
        # Rejected while the goal moves: not a hold; retried, then escalated to stop.
        assert wait_for(lambda: any(a.action == SupervisorAction.ACTION_STOP for a in actions)), reasons()
        # (a fail-safe hold on a stalled machine may come first: then it is a stop that is refused)
        assert any(' not delivered' in r and 'refused while 1 goal(s) move' in r for r in reasons()), reasons()
        assert any('escalating to stop' in r for r in reasons()), reasons()
        assert arm.moving and not sup.supervisor.hold_confirmed
    arm.done.set()
    # The client goes with its node when the fixture has stopped the executor: destroyed here, while the
    # executor thread still waits on it, rcl_action reported an invalid client pointer in that thread.


def test_a_cancel_service_that_never_answers_is_a_failed_hold(ros):
    """The server is there (its cancel service matched over DDS) but never
    answers: after controller_call_timeout_s the pause is not a hold."""
    action = '/silent_controller/follow_joint_trajectory'
    sup, node, thread = ros('/ctrl_silent', {'trajectory_action': action, 'max_hold_failures': '2',
                                             'controller_call_timeout_s': '0.5'})
    # A server nobody spins: requests are delivered to it and never answered.
    from action_msgs.srv import CancelGoal
    with ros_node('silent_controller') as (silent, _):
        silent.create_service(CancelGoal, f'{action}/_action/cancel_goal', lambda rq, rs: rs)
        actions, send = bring_up(sup, node, thread)
        send(ViolationEvent.EVENT_OPENED)
        reasons = lambda: [a.reason for a in actions]          # noqa: E731
        assert wait_for(lambda: any(a.action == SupervisorAction.ACTION_STOP for a in actions)), reasons()
        assert any('pause not delivered' in r and 'no answer within 0.5 s' in r for r in reasons()), reasons()


def bring_up(sup, node, thread) -> tuple[list[SupervisorAction], Callable[[int], None]]:
    """A still arm on joint_states, the supervisor active with its controller
    interface matched and joint states in: the actions it publishes, and the
    violation sender."""
    actions: list[SupervisorAction] = []
    node.create_subscription(SupervisorAction, 'supervisor_actions', actions.append, RELIABLE)
    Joint(node)
    send = violation(node)
    thread.start()
    sup.trigger_configure()
    sup.trigger_activate()
    assert wait_for(lambda: sup._controllers[0]._client.service_is_ready() and sup._history.latest() is not None)
    return actions, send


def test_servo_is_paused_by_a_hold_and_unpaused_on_resume(ros):
    sup, node, thread = ros('/ctrl_servo', {'servo_pause_service': '/servo_node/pause_servo'})
    requests: list[bool] = []

    def on_pause(request, response):
        requests.append(bool(request.data))
        response.success, response.message = True, 'paused' if request.data else 'unpaused'
        return response
    node.create_service(SetBool, '/servo_node/pause_servo', on_pause)
    actions, send = bring_up(sup, node, thread)
    send(ViolationEvent.EVENT_OPENED)
    reasons = lambda: [a.reason for a in actions]          # noqa: E731
    assert wait_for(lambda: requests == [True]), (requests, reasons())
    assert wait_for(lambda: any('pause confirmed: received by' in r and 'the arm stopped' in r for r in reasons())), reasons()
    send(ViolationEvent.EVENT_CLOSED)
    acknowledge(node)
    # Unpaused on resume (a fail-safe hold on a stalled machine may pause it again after).
    assert wait_for(lambda: requests[:2] == [True, False]), (requests, reasons())
    # The unpause request goes out before the resume action is published: wait for that, too.
    assert wait_for(lambda: any(a.action == SupervisorAction.ACTION_RESUME and a.success for a in actions)), reasons()


class ControllerManager(Joint):
    """ros2_control's controller manager reduced to its switch service
    (``controller_manager_msgs/srv/SwitchController``, STRICT as it applies
    it: every controller named must exist and be in the state the switch
    expects) driving the joint: it moves while the motion controller is
    active, and holds while the trajectory controller is."""

    def __init__(self, node, service: str, known: set[str]) -> None:
        from controller_manager_msgs.srv import SwitchController
        self.known, self.active = known, {'forward_position_controller'}
        self.requests: list = []
        node.create_service(SwitchController, service, self._switch)
        super().__init__(node)

    @property
    def moving(self) -> bool:
        return 'forward_position_controller' in self.active

    def _switch(self, request, response):
        on, off = list(request.activate_controllers), list(request.deactivate_controllers)
        self.requests.append((on, off, request.strictness))
        unknown = [c for c in on + off if c not in self.known]
        if unknown:
            response.ok, response.message = False, f'unknown controller(s) {unknown}'
        elif any(c not in self.active for c in off) or any(c in self.active for c in on):
            response.ok, response.message = False, 'a controller is not in the state the switch expects'
        else:
            self.active = (self.active - set(off)) | set(on)
            response.ok, response.message = True, 'switched'
        return response


def acknowledge(node) -> None:
    ack = node.create_client(Trigger, 'supervisor/acknowledge')
    assert ack.wait_for_service(timeout_sec=20)
    for _ in range(50):                      # the recovery event may still be on its way
        future = ack.call_async(Trigger.Request())
        assert wait_for(future.done)
        if future.result().success:
            return
        time.sleep(0.1)
    raise AssertionError('acknowledge refused')


@pytest.mark.parametrize('manager', ['accepting', 'refusing', 'silent'])
def test_a_hold_switches_to_the_safe_controller_and_back(ros, manager):
    from controller_manager_msgs.srv import SwitchController
    service = f'/cm_{manager}/switch_controller'
    sup, node, thread = ros(f'/switch_{manager}', {
        'switch_controller_service': service, 'hold_controller': 'joint_trajectory_controller',
        'motion_controllers': "['forward_position_controller']", 'max_hold_failures': '2',
        # An answer is due within 2 s (a busy machine answers late); the silent manager's test waits 0.5 s.
        'controller_call_timeout_s': '0.5' if manager == 'silent' else '2.0'})
    known = {'forward_position_controller'} | ({'joint_trajectory_controller'} if manager == 'accepting' else set())
    silent_manager = contextlib.ExitStack()
    if manager == 'silent':
        # A manager nobody spins: requests are delivered and never answered.
        silent, _ = silent_manager.enter_context(ros_node('silent_manager'))
        silent.create_service(SwitchController, service, lambda rq, rs: rs)
        cm = None
        Joint(node)                   # a still arm
    else:
        cm = ControllerManager(node, service, known)
    actions: list[SupervisorAction] = []
    node.create_subscription(SupervisorAction, 'supervisor_actions', actions.append, RELIABLE)
    send = violation(node)
    reasons = lambda: [a.reason for a in actions]          # noqa: E731
    try:
        thread.start()
        sup.trigger_configure()
        sup.trigger_activate()
        assert wait_for(lambda: sup._controllers[0]._client.service_is_ready() and sup._history.latest() is not None)
        q_before = cm.q if cm else 0.0
        t0 = time.monotonic()
        send(ViolationEvent.EVENT_OPENED)
        if manager == 'accepting':
            assert wait_for(lambda: not cm.moving), reasons()
            latency_s = time.monotonic() - t0
            assert cm.requests[0] == (['joint_trajectory_controller'], ['forward_position_controller'],
                                      SwitchController.Request.STRICT)
            # Confirmed by the measured joint, as for every hold.
            assert wait_for(lambda: any('pause confirmed: received by' in r and 'the arm stopped' in r for r in reasons())), reasons()
            assert cm.q - q_before < SPEED_RAD_S * (latency_s + 0.1)
            send(ViolationEvent.EVENT_CLOSED)
            acknowledge(node)
            # Resume switches back (the arm moves again until whatever hold comes next: on a loaded machine a
            # fail-safe hold may follow at once, so the switch is what is checked, not the motion after it).
            back = (['forward_position_controller'], ['joint_trajectory_controller'])
            assert wait_for(lambda: any(r[:2] == back for r in cm.requests)), (cm.requests, reasons())
            assert wait_for(lambda: any(a.action == SupervisorAction.ACTION_RESUME and a.success for a in actions)), \
                reasons()
            assert not any(a.action == SupervisorAction.ACTION_STOP for a in actions)
        else:
            # Refused (no such safe controller) or never answered: not a hold; retried, then stop.
            why = 'refused (unknown controller(s)' if manager == 'refusing' else 'no answer within 0.5 s'
            assert wait_for(lambda: any(a.action == SupervisorAction.ACTION_STOP for a in actions)), reasons()
            assert any('pause not delivered' in r and why in r for r in reasons()), reasons()
            assert not sup.supervisor.hold_confirmed
    finally:
        silent_manager.close()


def test_a_half_configured_switch_stops_the_supervisor(ros):
    """A safe controller without the controllers it replaces is a
    configuration error: the supervisor does not come up (bring_up then
    stops whoever started it)."""
    from safemanip_ros.errors import SafemanipError
    from safemanip_ros.nodes.runner import bring_up
    sup, node, thread = ros('/switch_half', {'hold_controller': 'joint_trajectory_controller'})
    thread.start()
    with pytest.raises(SafemanipError, match='switch_controller_service, hold_controller and motion_controllers '
                                             'go together'):
        bring_up(sup)
