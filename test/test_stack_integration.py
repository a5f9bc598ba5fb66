"""The whole stack beside a (scripted) robot, over DDS: `safemanip run` in its
own process runs grounding, monitor and supervisor; the test plays the robot
(joint states, TF, contacts).  The arm touching a shelf for longer than the
contact tolerance becomes a forbidden-contact violation, and the supervisor's
pause command arrives on the controller topic holding the current arm pose;
the recording is readable."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, wait_for
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import ros_node
from rosbags.rosbag2 import Reader
from trajectory_msgs.msg import JointTrajectory

from safemanip_ros.msg import SupervisorAction, ViolationEvent
from safemanip_ros.nodes.robot_standin import RobotStandIn

RELIABLE = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
ARM = [f'robot0_joint{i}' for i in range(1, 8)]
pytestmark = pytest.mark.ros


def test_contact_violation_pauses_the_arm(tmp_path):
    bag = tmp_path / 'bag'
    proc = subprocess.Popen([str(Path(sys.executable).parent / 'safemanip'), '--debug', 'run', '--config',
                             str(REPO / 'config' / 'robots' / 'panda_demo.yaml'), '--only', 'no_forbidden_contact',
                             '--controller-topic', 'arm/joint_trajectory', '--bag', str(bag), '--no-camera'],
                            stdout=open(tmp_path / 'log', 'w'), stderr=subprocess.STDOUT)
    try:
        with ros_node('robot_sim') as (node, ex):
            trajs, actions, events = [], [], []
            node.create_subscription(JointTrajectory, 'arm/joint_trajectory', trajs.append, RELIABLE)
            node.create_subscription(SupervisorAction, 'supervisor_actions', actions.append, RELIABLE)
            node.create_subscription(ViolationEvent, 'violations', events.append, RELIABLE)
            pose = [0.1, -0.3, 0.0, -2.0, 0.0, 1.8, 0.7]
            robot = RobotStandIn(node, pose)
            js, contacts, tick = robot.js, robot.contacts, robot.publish

            def spin(cond, timeout_s=60.0):
                deadline = time.monotonic() + timeout_s
                while time.monotonic() < deadline:
                    tick()
                    ex.spin_once(timeout_sec=0.05)
                    if cond():
                        return True
                return False

            # Wait until the stack is up (the monitor's verdicts flow), then touch the shelf.
            assert spin(lambda: js.get_subscription_count() >= 2 and contacts.get_subscription_count() >= 1), \
                (tmp_path / 'log').read_text()[-3000:]
            spin(lambda: False, timeout_s=1.5)     # the robot runs normally for a while
            assert not actions, [a.reason for a in actions]
            robot.touch()
            t_touch = time.monotonic()
            assert spin(lambda: any(a.action == SupervisorAction.ACTION_PAUSE for a in actions) and events), \
                (tmp_path / 'log').read_text()[-3000:]
            pause = next(a for a in actions if a.action == SupervisorAction.ACTION_PAUSE)
            assert pause.reason.startswith('violation of no_forbidden_contact') and pause.success, pause.reason
            delay = time.monotonic() - t_touch
            assert 1.0 <= delay < 5.0      # after the 20-frame (1 s) contact tolerance, not before
            assert any(e.instance == 'no_forbidden_contact' and e.event == ViolationEvent.EVENT_OPENED for e in events), \
                ([a.reason for a in actions], [(e.instance, e.event) for e in events])
            hold = trajs[-1]
            assert hold.joint_names == ARM and list(hold.points[0].positions) == pytest.approx(pose)
            # The frames take the grounding of their own process directly (it armed and paused above): the
            # monitor does not also take those predicate arrays from DDS, each deserialised again.
            monitor_subs = {name for name, _ in node.get_subscriber_names_and_types_by_node('monitor', '/')}
            assert monitor_subs and not monitor_subs & {'/predicates/joint_states', '/predicates/contacts',
                                                        '/predicates/tf'}, monitor_subs
            # The operator's commands, as a person runs them against the running stack: `ack` while the
            # violation is open is refused (exit 1, the reason), `resume` after the arm lets go waits for the
            # recovery and resumes (exit 0); `watch` ends cleanly on SIGINT and SIGTERM.
            ack = _operator(spin, 'ack')
            assert ack.returncode == 1 and 'not resuming: no_forbidden_contact not recovered' in ack.stdout, ack
            robot.touch(None)
            resume = _operator(spin, 'resume', '--wait-s', '60')
            assert resume.returncode == 0 and '/supervisor/acknowledge: resumed' in resume.stdout, resume
            assert spin(lambda: any(a.action == SupervisorAction.ACTION_RESUME for a in actions))
            for sig in (signal.SIGINT, signal.SIGTERM):
                watch = subprocess.Popen([str(Path(sys.executable).parent / 'safemanip'), 'watch'],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                first = watch.stdout.readline()         # it is drawing: the table's first line is out
                assert first, watch.stderr.read()
                watch.send_signal(sig)
                out, err = watch.communicate(timeout=30)
                assert watch.returncode == 0 and not err.strip(), (sig, watch.returncode, err)
    finally:
        _stop(proc)
    with Reader(bag) as r:
        topics = {c.topic for c in r.connections}
    assert proc.returncode == 0, (tmp_path / 'log').read_text()[-3000:]
    assert {'/violations', '/supervisor_actions', '/predicates/contacts'} <= topics
    assert 'another stack' not in (tmp_path / 'log').read_text()       # alone on its domain: no warning


def _operator(spin, *args: str) -> subprocess.CompletedProcess:
    """``safemanip ARGS`` in its own process while the robot keeps publishing; its result."""
    proc = subprocess.Popen([str(Path(sys.executable).parent / 'safemanip'), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert spin(lambda: proc.poll() is not None, timeout_s=90.0), args
    out, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _stop(proc) -> None:
    """Stop the stack as Ctrl-C would (it closes its bag), after the test's node is down."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_live_and_offline_give_the_same_frames_verdicts_and_rollouts(tmp_path):
    """Record a live run (the robot touches the shelf twice), audit the bag,
    and compare with what the monitor published live: the per-frame verdicts
    of every published frame and the violation episodes are identical."""
    import json
    bag = tmp_path / 'bag'
    config = REPO / 'config' / 'robots' / 'panda_demo.yaml'
    proc = subprocess.Popen([str(Path(sys.executable).parent / 'safemanip'), '--debug', 'run', '--config', str(config),
                             '--only', 'no_forbidden_contact', '--controller-topic', 'arm/joint_trajectory',
                             '--bag', str(bag), '--no-camera', '--no-supervisor'],
                            stdout=open(tmp_path / 'log', 'w'), stderr=subprocess.STDOUT)
    from safemanip_ros.msg import VerdictArray
    try:
        with ros_node('robot_sim_identity') as (node, ex):
            live_verdicts: dict[int, int] = {}
            current: list[int] = []
            events = []

            def on_verdicts(m: VerdictArray) -> None:
                # The monitor lists the instance when it changes (and every second): known from its first listing on.
                if m.verdicts:
                    current[:] = [int(m.verdicts[0].verdict)]
                if current:
                    live_verdicts[int(m.frame)] = current[0]

            node.create_subscription(VerdictArray, 'verdicts', on_verdicts, RELIABLE)
            node.create_subscription(ViolationEvent, 'violations', events.append, RELIABLE)
            robot = RobotStandIn(node, [0.0] * 7)
            tick = robot.publish

            def run_for(seconds):
                end = time.monotonic() + seconds
                nxt = time.monotonic()
                while time.monotonic() < end:
                    if time.monotonic() >= nxt:
                        tick()
                        nxt += 0.05
                    ex.spin_once(timeout_sec=0.01)

            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not live_verdicts:
                run_for(0.2)
            assert live_verdicts, (tmp_path / 'log').read_text()[-3000:]
            run_for(1.0)
            for _ in range(2):                      # two touches of 1.5 s: two violations, recovered
                robot.touch()
                run_for(1.5)
                robot.touch(None)
                run_for(1.0)
    finally:
        _stop(proc)
    assert proc.returncode == 0, (tmp_path / 'log').read_text()[-3000:]
    out = tmp_path / 'audit'
    audit = subprocess.run([str(Path(sys.executable).parent / 'safemanip'), 'audit', str(bag), '--config',
                            str(config), '--only', 'no_forbidden_contact', '--out', str(out), '--quiet'],
                           capture_output=True, text=True, timeout=600)
    assert audit.returncode == 0, audit.stderr[-3000:]
    report = json.loads((out / 'report.json').read_text())
    [rollout] = report['episodes']
    offline_eps = [(e['start'], e['end'], e['recovered']) for row in rollout['timeline'] for e in row['episodes']]
    live_eps = [(e.start_frame, e.end_frame, True) for e in events
                if e.event == ViolationEvent.EVENT_CLOSED and e.recovered]
    assert len(live_eps) == 2 and offline_eps[:2] == live_eps, (offline_eps, live_eps)
    runs = next(iter(rollout['verdict_timeline'].values()))
    offline = {k: code for a, b, code in runs for k in range(a, b + 1)}
    compared = [k for k in live_verdicts if k in offline]
    assert len(compared) > 60
    assert [live_verdicts[k] for k in compared] == [offline[k] for k in compared]


def test_run_warns_when_another_stack_answers_on_its_domain(tmp_path):
    """A newcomer's supervisor once took another stack's violation: a node already named supervisor on the
    domain is said in one warning naming ROS_DOMAIN_ID."""
    with ros_node('supervisor'):
        proc = subprocess.Popen([str(Path(sys.executable).parent / 'safemanip'), 'run', '--config',
                                 str(REPO / 'config' / 'robots' / 'panda_demo.yaml'), '--only', 'no_forbidden_contact',
                                 '--no-camera', '--no-record'], stdout=open(tmp_path / 'log', 'w'),
                                stderr=subprocess.STDOUT)
        try:
            warned = wait_for(lambda: 'warning: another stack' in (tmp_path / 'log').read_text()
                              or proc.poll() is not None, 60)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
    text = (tmp_path / 'log').read_text()
    import os
    assert warned and f'another stack answers on ROS_DOMAIN_ID {os.environ["ROS_DOMAIN_ID"]}: 1 other node named ' \
        '/supervisor' in text, text
