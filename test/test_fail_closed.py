"""Fail closed: a node that cannot come up stops whoever started it, with one
line naming the node and the problem, and ROS parameters are accepted as ROS
users give them (real processes, real rclpy, real DDS)."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import rclpy
from conftest import REPO
from rclpy.context import Context
from rclpy.exceptions import InvalidParameterTypeException
from rclpy.node import Node

from safemanip_ros.errors import ParameterError, SafemanipError
from safemanip_ros.nodes.params import RosParameters, check_range

BIN = Path(sys.executable).parent
CONFIG = REPO / 'config' / 'robots' / 'panda_demo.yaml'
pytestmark = pytest.mark.ros


def _run(*ros_args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / 'safemanip'), 'run', '--config', str(CONFIG), '--no-record',
                           '--ros-args', *ros_args], capture_output=True, text=True, timeout=timeout_s)


@pytest.mark.parametrize('param, node, words', [
    ('metrics_period_s:=0.0', 'monitor', 'parameter metrics_period_s = 0 is outside [0.001, 3600]'),
    ('arming_timeout_s:=-1.0', 'monitor', 'parameter arming_timeout_s = -1 is outside [0, 3600]'),
    ('failsafe_staleness_s:=nan', 'supervisor', 'parameter failsafe_staleness_s = nan is outside (0, 60]'),
    ('split_s:=-1.0', 'recorder', 'parameter split_s = -1 is outside (0, 3600)'),
    ('queue_size:=0', 'recorder', 'parameter queue_size = 0 is outside [1, 1e+07]'),
    ('rate_hz:=-5.0', 'joint_state_grounding', 'parameter rate_hz = -5 is outside [0, 1000]'),
    ('rate_hz:=1e-300', 'joint_state_grounding', 'parameter rate_hz = 1e-300 is outside [0.01, 1000]'),
    ('config:=-5.0', 'joint_state_grounding', 'parameter config = -5.0 is of type double; expected string'),
    ("controller_topic:='a b'", 'supervisor', "parameter controller_topic = 'a b': part 'a b' must be letters"),
])
@pytest.mark.slow
def test_a_node_that_cannot_come_up_stops_the_run(param, node, words):
    """Nothing keeps running with a node down: `safemanip run` exits 2 and
    its last line names the node and the parameter (it used to log
    "configure failed" and go on with the monitor off)."""
    args = ['-p', param]
    if node == 'recorder':
        proc = subprocess.run([str(BIN / 'safemanip'), 'run', '--config', str(CONFIG), '--ros-args', *args],
                              capture_output=True, text=True, timeout=120)
    else:
        proc = _run(*args)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f'safemanip: error: {node}') and words in last, last
    assert 'nodes up' not in proc.stdout and 'Traceback' not in proc.stderr


@pytest.mark.slow
def test_an_integer_for_a_float_parameter_is_taken_as_that_float():
    """``-p rate_hz:=10`` (an integer, as ROS users write it) runs the stack
    (it was an internal error, exit 70); the run stops cleanly on SIGINT."""
    proc = subprocess.Popen([str(BIN / 'safemanip'), 'run', '--config', str(CONFIG), '--no-record', '--ros-args',
                             '-p', 'rate_hz:=10', '-p', 'failsafe_staleness_s:=1'],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        up = ''
        while time.monotonic() < deadline and 'nodes up' not in up:
            line = proc.stdout.readline()
            if not line:
                break
            up = line
        assert 'nodes up' in up, proc.stderr.read() if proc.poll() is not None else up
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_autostarted_node_with_a_bad_parameter_exits_2():
    """The same under `ros2 run` / `ros2 launch` with autostart: the
    monitor's executable exits 2 with one line instead of idling unconfigured."""
    proc = subprocess.run([str(BIN / 'monitor'), '--ros-args', '-p', 'autostart:=true', '-p', 'rate_hz:=0.0',
                           '-p', f'properties:=[{REPO / "config" / "properties" / "safemanip.yaml"}]',
                           '-p', f'scene:={REPO / "config" / "scenes" / "kitchen_demo.yaml"}'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    # The parameter's descriptor holds its range: refused as it is declared, before configure.
    assert 'monitor: error: monitor: parameter rate_hz = 0 is outside [0.01, 1000]' in proc.stderr


@pytest.mark.parametrize('args, words', [
    (['-p', 'rate_hx:=10.0'], "parameter 'rate_hx': no node of this process has it (did you mean 'rate_hz'?)"),
    (['-p', 'monitor.staleness_s:=1.0'], "parameter 'monitor.staleness_s': no node of this process has it"),
    (['-p', 'supervisor:staleness_s:=1.0'],
     "parameter 'staleness_s': node supervisor has no such parameter (did you mean 'failsafe_staleness_s'?)"),
])
@pytest.mark.slow
def test_a_parameter_no_node_takes_stops_the_run(args, words):
    """rclpy drops a parameter no node declares: a misspelt one ran the stack on that parameter's default."""
    proc = _run(*args)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('safemanip: error: ') and words in lines[0], proc.stderr
    assert 'nodes up' not in proc.stdout


@pytest.mark.parametrize('text, words', [
    ('categories:\n  collision_contact: pause\n', "policy.yaml:1: unknown field 'categories' (allowed: alerts, category"),
    ('category: pause\n', "policy.yaml:1: category: expected a mapping, got str 'pause'"),
    ('severity:\n  fatal: stop\n', "policy.yaml:2: severity: unknown field 'fatal' (allowed: critical, error"),
    ('category:\n  collision_contact: halt\n', "'halt' is not one of ['log', 'alert', 'pause', 'retract', 'stop']"),
    ('property:\n  no_forbiden_contact: stop\n', "property 'no_forbiden_contact' is not in the suite (its properties: "),
    ('category:\n  colision_contact: stop\n', "category 'colision_contact' is not in the suite (its categories: "),
])
def test_a_supervisor_policy_that_would_not_apply_stops_the_run(tmp_path, text, words):
    """A misspelt section or name in the policy used to be ignored (its properties got the weaker severity
    default); a section that is not a mapping was exit 70."""
    policy = tmp_path / 'policy.yaml'
    policy.write_text(text)
    proc = subprocess.run([str(BIN / 'safemanip'), 'run', '--config', str(CONFIG), '--no-record', '--policy',
                           str(policy)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr
    assert 'nodes up' not in proc.stdout


def test_the_supervisor_executable_refuses_a_misspelt_policy_section(tmp_path):
    policy = tmp_path / 'policy.yaml'
    policy.write_text('categories:\n  collision_contact: pause\n')
    proc = subprocess.run([str(BIN / 'supervisor'), '--ros-args', '-p', 'autostart:=true', '-p',
                           f'policy_file:={policy}'], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "configure failed: policy_file: " in proc.stderr and "unknown field 'categories'" in proc.stderr


@pytest.mark.parametrize('policy_text, suites, words', [
    ('property:\n  no_forbiden_contact: stop\n', ['safemanip.yaml'],
     "configure failed: policy_file: {policy}: property 'no_forbiden_contact' is not in the suite"),
    ('category:\n  colision_contact: stop\n', ['safemanip.yaml', 'physical.yaml'],
     "configure failed: policy_file: {policy}: category 'colision_contact' is not in the suite"),
    ('category:\n  collision_contact: stop\n', ['missing.yaml'],
     "configure failed: properties: "),
])
@pytest.mark.slow
def test_the_supervisor_executable_checks_policy_names_against_the_monitors_suites(tmp_path, policy_text, suites,
                                                                                     words):
    """As the launch file starts it (``properties``: the monitor's suite files): a misspelt name in the
    policy never matches, so its property would get the weaker severity default; it stops the node."""
    policy = tmp_path / 'policy.yaml'
    policy.write_text(policy_text)
    files = ','.join(str(REPO / 'config' / 'properties' / s) for s in suites)
    proc = subprocess.run([str(BIN / 'supervisor'), '--ros-args', '-p', 'autostart:=true', '-p',
                           f'policy_file:={policy}', '-p', f'properties:=[{files}]'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert words.format(policy=policy) in proc.stderr, proc.stderr


@pytest.mark.slow
def test_the_supervisor_accepts_a_policy_whose_names_the_suites_have(tmp_path):
    """The same check passes the shipped policy against the shipped suites (the launch file's defaults):
    the node configures (its actions publisher appears) and keeps running."""
    policy = REPO / 'config' / 'params' / 'supervisor_policy.yaml'
    files = ','.join(str(REPO / 'config' / 'properties' / s) for s in ('safemanip.yaml', 'physical.yaml'))
    log = tmp_path / 'supervisor.log'
    proc = subprocess.Popen([str(BIN / 'supervisor'), '--ros-args', '-r', '__ns:=/policy_names_ok', '-p',
                             'autostart:=true', '-p', f'policy_file:={policy}', '-p', f'properties:=[{files}]'],
                            stdout=open(log, 'w'), stderr=subprocess.STDOUT)
    ctx = Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node('policy_names_probe', context=ctx)
    try:
        deadline = time.monotonic() + 60.0
        while (proc.poll() is None and node.count_publishers('/policy_names_ok/supervisor_actions') == 0
               and time.monotonic() < deadline):
            time.sleep(0.05)
        assert proc.poll() is None, log.read_text()[-2000:]
        assert node.count_publishers('/policy_names_ok/supervisor_actions') > 0, log.read_text()[-2000:]
    finally:
        node.destroy_node()
        rclpy.shutdown(context=ctx)
        proc.terminate()
        proc.wait(timeout=30)


def test_a_node_executable_refuses_a_parameter_it_does_not_take():
    """As ``ros2 run`` or a launch file's ``parameters`` start it: one line, exit 2."""
    proc = subprocess.run([str(BIN / 'supervisor'), '--ros-args', '-p', 'autostart:=true',
                           '-p', 'failsafe_staleness:=0.3'], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ("supervisor: error: parameter 'failsafe_staleness': node supervisor has no such parameter "
            "(did you mean 'failsafe_staleness_s'?)") in proc.stderr, proc.stderr



@pytest.mark.parametrize('exe, param, words', [
    ('monitor', 'properties:=[]', 'monitor: parameter properties names no suite file; give at least one'),
    ('supervisor', 'safe_pose:=[]', 'supervisor: parameter safe_pose is given no value (an empty list or null); '
                                    'expected double array'),
])
def test_an_empty_list_for_a_parameter_is_one_line_exit_2(exe, param, words):
    """``-p properties:=[]`` reached rclpy untyped: the monitor's configure raised rclpy's
    ParameterUninitializedException (a traceback, exit 1); a monitor of no property is no monitor."""
    proc = subprocess.run([str(BIN / exe), '--ros-args', '-p', 'autostart:=true', '-p', param],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert words in proc.stderr.strip().splitlines()[-1], proc.stderr


@pytest.mark.parametrize('param, option', [('properties:=[]', '--properties'), ('monitor:only:=[a]', '--only'),
                                           ('bag_path:=/tmp/elsewhere', '--bag')])
def test_a_parameter_run_sets_from_its_options_is_refused_as_a_p(param, option):
    """``safemanip run --ros-args -p properties:=[]`` ran the default suites while the user asked for none;
    ``-p properties:=[x.yaml]`` would have reached the monitor after run printed and checked the others."""
    proc = _run('-p', param)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f'from its option {option}; give that instead' in lines[0], proc.stderr

@pytest.mark.parametrize('exe', ['monitor', 'safemanip'])
def test_ros_arguments_rcl_cannot_parse_are_one_line_exit_2(exe):
    """``-p failsafe_topics:=[a:b]`` is not YAML (the colons): rcl refuses it
    at init; that was a traceback, it is now the user error it is."""
    args = ['run', '--config', str(REPO / 'config' / 'robots' / 'panda_demo.yaml')] if exe == 'safemanip' else []
    proc = subprocess.run([str(BIN / exe), *args, '--ros-args', '-p', 'failsafe_topics:=[a:b:0.5, c:d:0.5]'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr, proc.stderr
    ours = [line for line in proc.stderr.splitlines() if 'error:' in line and '[rcl]' not in line]
    assert len(ours) == 1 and 'the ROS arguments do not parse' in ours[0] and 'a:b:0.5' in ours[0], proc.stderr


class _Probe(RosParameters, Node):
    pass


def test_integer_overrides_of_float_parameters_in_process():
    ctx = Context()
    rclpy.init(args=['--ros-args', '-p', 'a:=3', '-p', 'b:=[1, 2]', '-p', 'c:=4', '-p', 'd:=2.5'], context=ctx)
    try:
        node = _Probe('param_probe', context=ctx)
        assert node.declare_parameter('a', 1.0).value == 3.0
        assert isinstance(node.get_parameter('a').value, float)
        assert node.declare_parameter('b', [0.5]).value == [1.0, 2.0]
        assert node.declare_parameter('c', 1).value == 4                  # an integer parameter stays one
        node.declare_parameter('d', 1.0)
        assert check_range(node, 'd', 0.0, 10.0) == 2.5
        with pytest.raises(ParameterError, match='parameter d = 2.5 is outside \\(0, 2\\]'):
            check_range(node, 'd', 0.0, 2.0, low_open=True)
        plain = Node('plain_probe', context=ctx)
        with pytest.raises(InvalidParameterTypeException):     # what rclpy alone does: the mixin is what helps
            plain.declare_parameter('a', 1.0)
        node.destroy_node()
        plain.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)


@pytest.mark.slow
@pytest.mark.parametrize('ending', ['silence', 'inactive'])
def test_the_supervisor_holds_when_the_monitor_goes_silent_or_inactive(tmp_path, ending):
    """In a multi-process launch a killed or deactivated monitor left the arm
    running unwatched: the supervisor now treats a monitor it has heard whose
    status stops (``monitor_status_limit_s``) or says it is not active as a
    fail-safe condition, and pauses."""
    from safemanip_ros.msg import MonitorStatus, SupervisorAction
    from safemanip_ros.nodes.qos import RELIABLE
    proc = subprocess.Popen([str(BIN / 'supervisor'), '--ros-args', '-p', 'autostart:=true', '-p', 'joints:=[a]',
                             '-p', 'monitor_status_limit_s:=0.6', '-p', 'failsafe_staleness_s:=30.0'],
                            stdout=open(tmp_path / 'supervisor.log', 'w'), stderr=subprocess.STDOUT)
    ctx = Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node('monitor_stand_in', context=ctx)
    ex = rclpy.executors.SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    actions: list = []
    node.create_subscription(SupervisorAction, 'supervisor_actions', actions.append, RELIABLE)
    status = node.create_publisher(MonitorStatus, 'status', RELIABLE)

    def spin_until(cond, publish_state: str | None, timeout_s: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if publish_state is not None:
                status.publish(MonitorStatus(state=publish_state))
            ex.spin_once(timeout_sec=0.05)
            if cond():
                return True
        return False

    def paused() -> list:
        return [a for a in actions if a.action == SupervisorAction.ACTION_PAUSE and 'the monitor' in a.reason]

    try:
        # Heard alive (the subscription matched both ways), then no pause while it stays so.
        assert spin_until(lambda: status.get_subscription_count() > 0 and
                          node.count_publishers('supervisor_actions') > 0, 'active')
        alive_until = time.monotonic() + 1.5
        assert not spin_until(lambda: time.monotonic() > alive_until and bool(paused()), 'active', 1.5)
        assert not paused(), [a.reason for a in actions]
        if ending == 'silence':
            assert spin_until(lambda: bool(paused()), None), (tmp_path / 'supervisor.log').read_text()[-2000:]
            assert 'stale for' in paused()[0].reason and '(limit 0.60 s)' in paused()[0].reason
        else:
            assert spin_until(lambda: bool(paused()), 'inactive'), (tmp_path / 'supervisor.log').read_text()[-2000:]
            assert "reports state 'inactive'" in paused()[0].reason
    finally:
        node.destroy_node()
        rclpy.shutdown(context=ctx)
        proc.terminate()
        proc.wait(timeout=30)


@contextlib.contextmanager
def _lone_supervisor(tmp_path, ns: str, *params: str):
    """A supervisor process in namespace ``ns`` (``-p`` params besides
    autostart, one joint and a 30 s joint staleness) and a node of the test
    beside it, hearing its actions' history too (matched late on a busy
    machine, the first one is still the first read).  Yields (node,
    executor, actions)."""
    from safemanip_ros.msg import SupervisorAction
    from safemanip_ros.nodes.qos import EVENTS
    args = ['autostart:=true', 'joints:=[a]', 'failsafe_staleness_s:=30.0', *params]
    proc = subprocess.Popen([str(BIN / 'supervisor'), '--ros-args', *[x for p in args for x in ('-p', p)],
                             '-r', f'__ns:={ns}'],
                            stdout=open(tmp_path / 'supervisor.log', 'w'), stderr=subprocess.STDOUT)
    ctx = Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node('beside', namespace=ns, context=ctx)
    ex = rclpy.executors.SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    actions: list = []
    node.create_subscription(SupervisorAction, 'supervisor_actions', actions.append, EVENTS)
    try:
        yield node, ex, actions
    finally:
        node.destroy_node()
        rclpy.shutdown(context=ctx)
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_the_supervisor_holds_when_no_monitor_ever_comes_up(tmp_path):
    """Under ros2 launch a monitor whose configure fails exits 2 and the
    other processes run on: a supervisor that never hears a monitor holds
    the arm once ``startup_limit_s`` passed, and lets go of that
    condition when a monitor is heard (the hold waits for the operator)."""
    from safemanip_ros.msg import MonitorStatus, SupervisorAction
    from safemanip_ros.nodes.qos import RELIABLE
    with _lone_supervisor(tmp_path, '/no_monitor', 'startup_limit_s:=1.5') as (node, ex, actions):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not actions:
            ex.spin_once(timeout_sec=0.05)
        assert actions, (tmp_path / 'supervisor.log').read_text()[-2000:]
        pause = actions[0]          # (not delivered here: no joint states; retried and escalated as usual)
        assert pause.action == SupervisorAction.ACTION_PAUSE, pause
        assert pause.reason == ("fail-safe: the monitor (/no_monitor/status) not heard within 1.5 s of the "
                                "supervisor's start (did it fail to come up? no publisher of it in this "
                                "process's graph)"), pause.reason

        def fresh() -> bool:
            return any(a.action == SupervisorAction.ACTION_LOG and 'fresh again' in a.reason for a in actions)
        status = node.create_publisher(MonitorStatus, 'status', RELIABLE)
        deadline = time.monotonic() + 60        # a monitor comes up: the condition is over, the hold stays
        while time.monotonic() < deadline and not fresh():
            status.publish(MonitorStatus(state='arming'))
            ex.spin_once(timeout_sec=0.05)
        assert fresh(), [a.reason for a in actions]
        assert SupervisorAction.ACTION_RESUME not in [a.action for a in actions]


@pytest.mark.slow
def test_the_supervisor_holds_when_a_grounding_never_comes_up(tmp_path):
    """Under ros2 launch a grounding process whose configure fails exits 2
    and the others run on: its predicates are never heard.  A topic of
    ``failsafe_topics`` is watched once heard, so without a start-up limit
    the arm ran with that grounding missing; one never heard within
    ``startup_limit_s`` holds it, and the topics that were heard do not."""
    from safemanip_ros.msg import PredicateArray, SupervisorAction
    from safemanip_ros.nodes.conversions import predicate_array
    from safemanip_ros.nodes.qos import RELIABLE
    watched = "['predicates/joint_states:safemanip_ros/msg/PredicateArray:0.5', " \
              "'predicates/contacts:safemanip_ros/msg/PredicateArray:0.5']"
    # 8 s: room for discovery on a busy machine (the heard topic must be heard in time).
    with _lone_supervisor(tmp_path, '/no_grounding', 'startup_limit_s:=8.0', "monitor_status_topic:=''",
                          f'failsafe_topics:={watched}') as (node, ex, actions):
        joints = node.create_publisher(PredicateArray, 'predicates/joint_states', RELIABLE)

        def publish_for(seconds: float, until=lambda: False) -> None:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and not until():
                joints.publish(predicate_array({'arm_moving': False}, time.time_ns(), 'joint_states'))
                ex.spin_once(timeout_sec=0.05)
        publish_for(60, until=lambda: bool(actions))
        assert actions, (tmp_path / 'supervisor.log').read_text()[-2000:]
        publish_for(1.0)                     # anything else it has to say
        assert actions[0].action == SupervisorAction.ACTION_PAUSE, actions[0]
        assert actions[0].reason == ("fail-safe: /no_grounding/predicates/contacts not heard within 8.0 s of the "
                                     "supervisor's start (did it fail to come up? no publisher of it in this "
                                     "process's graph)"), actions[0].reason
        assert not [a.reason for a in actions if 'joint_states' in a.reason], [a.reason for a in actions]


@pytest.mark.slow
def test_a_supervisor_deaf_to_publishers_it_sees_exits_to_be_respawned(tmp_path):
    """A supervisor whose graph lists a publisher of the monitor's status,
    yet hears nothing from it within ``startup_limit_s`` and
    ``DEAF_GRACE_S`` more (a DDS participant
    that does not receive it, as Fast DDS now and then leaves a process
    started in place of a killed one; here a publisher that never
    publishes), holds for the monitor, names the publisher it sees, and
    exits ``DEAF_EXIT_CODE`` for the launch file's respawn: a new process
    works where that one cannot."""
    from sensor_msgs.msg import JointState

    from safemanip_ros.msg import MonitorStatus, SupervisorAction
    from safemanip_ros.nodes.qos import EVENTS, RELIABLE, SENSORS
    from safemanip_ros.nodes.supervisor_node import DEAF_EXIT_CODE
    ctx = Context()
    rclpy.init(context=ctx)
    try:
        node = rclpy.create_node('silent_stack', namespace='/deaf', context=ctx)
        ex = rclpy.executors.SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        node.create_publisher(MonitorStatus, 'status', RELIABLE)
        node.create_publisher(JointState, 'joint_states', SENSORS)
        actions: list = []
        node.create_subscription(SupervisorAction, 'supervisor_actions', actions.append, EVENTS)
        # 8 s: room for discovery on a busy machine (the publishers must be in its graph by then).
        args = ['autostart:=true', 'joints:=[a]', 'startup_limit_s:=8.0']
        proc = subprocess.Popen([str(BIN / 'supervisor'), '--ros-args', *[x for a in args for x in ('-p', a)],
                                 '-r', '__ns:=/deaf'],
                                stdout=open(tmp_path / 'supervisor.log', 'w'), stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and proc.poll() is None:
                ex.spin_once(timeout_sec=0.05)
            log = (tmp_path / 'supervisor.log').read_text()
            assert proc.poll() == DEAF_EXIT_CODE, (proc.poll(), log[-2000:])
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
        assert re.search(r"\] \[deaf\.supervisor\]: 1[3-9]\.\d s after its start, never heard from publishers this "
                         r"process sees \(the monitor \(/deaf/status\): 1\): its DDS participant does not receive "
                         r"them; exiting \(75\) to be started afresh", log), log[-2000:]
        deadline = time.monotonic() + 10     # its hold, said before it went
        while time.monotonic() < deadline and not actions:
            ex.spin_once(timeout_sec=0.05)
        assert actions and actions[0].action == SupervisorAction.ACTION_PAUSE, [a.reason for a in actions]
        assert actions[0].reason == ("fail-safe: the monitor (/deaf/status) not heard within 8.0 s of the "
                                     "supervisor's start (1 publisher(s) of it in this process's graph, none heard "
                                     "from)"), actions[0].reason
    finally:
        rclpy.shutdown(context=ctx)


def test_an_exception_in_a_transition_is_a_bug_reported_as_one():
    """rclpy turns an exception in on_configure into a silent ERROR; bring_up
    used to report it as "configure returned ERROR" (exit 2, as if the user
    had erred). It is kept, logged and raised as the bug it is."""
    from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn

    from safemanip_ros.nodes.guard import CallbackGuard
    from safemanip_ros.nodes.runner import bring_up, transition_failed

    class Broken(CallbackGuard, LifecycleNode):
        def on_configure(self, state):
            raise KeyError('no such thing')

    class Refusing(CallbackGuard, LifecycleNode):
        def on_configure(self, state) -> TransitionCallbackReturn:
            return transition_failed(self, 'configure', 'parameter x = -1 is outside [0, 1]')

    ctx = Context()
    rclpy.init(context=ctx)
    try:
        broken = Broken('broken_probe', context=ctx)
        with pytest.raises(RuntimeError, match="broken_probe: configure raised KeyError: 'no such thing'"):
            bring_up(broken)
        refusing = Refusing('refusing_probe', context=ctx)
        with pytest.raises(SafemanipError,
                           match=r'refusing_probe: configure failed: parameter x = -1 is outside \[0, 1\]'):
            bring_up(refusing)
        broken.destroy_node()
        refusing.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)


def test_ros2_param_describe_shows_each_parameter_s_meaning_and_range():
    """Every monitor and supervisor parameter is declared from one table
    (safemanip_ros/settings.py) with a ParameterDescriptor: its meaning,
    and for a number its range, which rclpy enforces on ``ros2 param set``."""
    import rclpy
    from rclpy.parameter import Parameter

    from safemanip_ros.nodes.monitor_node import MonitorNode
    from safemanip_ros.nodes.supervisor_node import SupervisorNode
    from safemanip_ros.settings import MONITOR, SUPERVISOR
    rclpy.init()
    try:
        for node, table in ((MonitorNode(), MONITOR), (SupervisorNode(), SUPERVISOR)):
            try:
                described = node.describe_parameters([s.name for s in table])
                for setting, d in zip(table, described):
                    assert d.description == setting.description, setting.name
                    if setting.low is not None and not isinstance(setting.default, bool):
                        r = (d.floating_point_range or d.integer_range)[0]
                        assert (r.from_value, r.to_value) == (setting.low, setting.high), setting.name
                        assert d.additional_constraints == setting.bounds
                refused = node.set_parameters([Parameter('rate_hz' if table is MONITOR else 'hold_confirm_s',
                                                         value=1e9)])[0]
                assert not refused.successful and 'out of range' in refused.reason
            finally:
                node.destroy_node()
    finally:
        rclpy.shutdown()
