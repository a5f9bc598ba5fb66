"""Faults on the live stack, over real DDS, with the processes that
``launch/monitor.launch.py`` starts (each grounding node, the monitor and the
supervisor in a process of its own, with the launch file's parameters) and
this test as the robot (joint states, TF, contacts at 20 Hz):

* input faults — duplicate and out-of-order stamps, a burst, the robot's
  publishers restarted mid-rollout — raise no violation and no hold, and a
  real touch is still held afterwards;
* a grounding process killed (SIGKILL) silences its predicates: the
  supervisor holds the arm, naming the topic;
* the monitor killed: the supervisor holds, naming the monitor;
* the supervisor killed and started again: with no violation open it does
  nothing; with one open (the arm still touching) it learns it from the
  monitor and holds the arm again, though no event is published anew; after
  a grounding process died, it holds for its silent topic as the one
  before did;
* under ``use_sim_time``, ``/clock`` jumping backwards and forwards raises
  no violation and no hold, and a touch is still held.

Where "nothing happens" is asserted beside a process start (the stack's, a
restarted supervisor's), a busy machine may starve the inputs for a second
or more: the suite reads an unknown contact as a contact (``unknown_as:
true``), so that silence rightly opens a violation and the supervisor rightly
holds.  Such a violation passes only where what the contact grounding
published shows the silence over the violation's window.
"""

from __future__ import annotations

import bisect
import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import rclpy
from conftest import REPO
from ros_helpers import ros_node
from rosgraph_msgs.msg import Clock
from trajectory_msgs.msg import JointTrajectory

from safemanip_ros.msg import MonitorStatus, PredicateArray, SupervisorAction, ViolationEvent
from safemanip_ros.nodes.conversions import ns_from_time, time_from_ns
from safemanip_ros.nodes.qos import EVENTS, RELIABLE, reliable
from safemanip_ros.nodes.robot_standin import ARM, POSE, TOUCH, RobotStandIn
from safemanip_ros.nodes.supervisor_node import DEAF_EXIT_CODE

pytestmark = pytest.mark.ros
BIN = Path(sys.executable).parent
CONFIG = str(REPO / 'config' / 'robots' / 'panda_demo.yaml')
PERIOD_S = 0.05
STALENESS_NS = 250_000_000          # the monitor's sample-and-hold limit (staleness_s, its default)
SUSTAINED_FRAMES = 21              # no_forbidden_contact: held(forbidden_contact, 21)
TOUCH_VIOLATION = 'violation of no_forbidden_contact'
GROUNDING_OUTPUTS = [f'predicates/{s}:safemanip_ros/msg/PredicateArray:0.5' for s in ('joint_states', 'contacts', 'tf')]


def _specs() -> dict[str, list[str]]:
    """The launch file's processes' arguments (camera grounding left out: this robot has no camera)."""
    return {
        'joint_state_grounding': ['-p', f'config:={CONFIG}'],
        'contact_grounding': ['-p', f'config:={CONFIG}', '-p', "wrench_topic:=''"],
        'tf_grounding': ['-p', f'config:={CONFIG}', '-p', 'grasp_topic:=predicates/contacts'],
        'monitor': ['-p', f'properties:=[{REPO / "config" / "properties" / "safemanip.yaml"}, '
                          f'{REPO / "config" / "properties" / "physical.yaml"}]',
                    '-p', f'robot_config:={CONFIG}', '-p', 'rate_hz:=20.0', '-p', 'autostart:=true',
                    '-p', 'only:=[no_forbidden_contact]'],
        'supervisor': ['-p', f'policy_file:={REPO / "config" / "params" / "supervisor_policy.yaml"}',
                       '-p', 'controller_topic:=arm/joint_trajectory', '-p', 'autostart:=true',
                       '-p', f'failsafe_topics:=[{", ".join(repr(t) for t in GROUNDING_OUTPUTS)}]',
                       '-p', f'joints:=[{", ".join(ARM)}]'],
    }


def _start(tmp_path: Path, name: str, sim_time: bool = False, log: str = '') -> subprocess.Popen:
    """Process ``name`` of the launch file, its output in ``<log or name>.log``."""
    common = ['-p', f'use_sim_time:={str(sim_time).lower()}']
    return subprocess.Popen([str(BIN / name), '--ros-args', *common, *_specs()[name]],
                            stdout=open(tmp_path / f'{log or name}.log', 'w'), stderr=subprocess.STDOUT)


def _processes(tmp_path: Path, sim_time: bool = False) -> dict[str, subprocess.Popen]:
    return {name: _start(tmp_path, name, sim_time) for name in _specs()}


class Robot:
    """The scripted robot and an observer of the stack, in this process."""

    def __init__(self, sim_time: bool = False) -> None:
        self._ros = contextlib.ExitStack()
        self.observer, self.ex = self._ros.enter_context(ros_node('fault_observer'))
        self.actions: list[SupervisorAction] = []
        self.events: list[ViolationEvent] = []
        self.status: list[MonitorStatus] = []
        self.trajs: list[JointTrajectory] = []
        # As the supervisor publishes them (latched): a restarted supervisor's first actions reach this
        # observer even when DDS discovery matches the two after they were published.
        self.observer.create_subscription(SupervisorAction, 'supervisor_actions', self.actions.append, EVENTS)
        self.observer.create_subscription(ViolationEvent, 'violations', self.events.append, EVENTS)
        self.observer.create_subscription(MonitorStatus, 'status', self.status.append, RELIABLE)
        self.observer.create_subscription(JointTrajectory, 'arm/joint_trajectory', self.trajs.append, RELIABLE)
        # (stamp ns, forbidden_contact unknown) of what the contact grounding published, all of it
        self.contacts: list[tuple[int, bool]] = []
        self.observer.create_subscription(PredicateArray, 'predicates/contacts', self._on_contacts, reliable(10_000))
        self.longest_tick_gap_s = 0.0
        self._last_tick_s: float | None = None
        self.sim_time = sim_time
        self.clock_ns = 1_000_000_000_000 if sim_time else 0
        self.clock = self.observer.create_publisher(Clock, '/clock', 10) if sim_time else None
        self.touching = False
        self.duplicate = False
        self.backwards_every = 0
        self.paused = False
        self.ticks = 0
        self._make_publishers()
        self.next_tick = time.monotonic()

    def _make_publishers(self) -> None:
        self.node = rclpy.create_node('robot_driver', context=self.observer.context)
        self.driver = RobotStandIn(self.node)

    def restart_publishers(self) -> None:
        """The robot driver restarts: its node and publishers go away and come back as new ones."""
        self.node.destroy_node()
        self._make_publishers()

    def now_ns(self) -> int:
        return self.clock_ns if self.sim_time else time.time_ns()

    def publish(self, stamp_ns: int) -> None:
        self.driver.touching = TOUCH if self.touching else None
        self.driver.publish(stamp_ns)

    def _on_contacts(self, msg: PredicateArray) -> None:
        unknown = next((p.unknown for p in msg.predicates if p.name == 'forbidden_contact'), True)
        self.contacts.append((ns_from_time(msg.header.stamp), unknown))

    def silent_frames(self, end_ns: int, frames: int = SUSTAINED_FRAMES, stale_only: bool = False) -> int:
        """Of the ``frames`` monitor frames up to ``end_ns`` (50 ms apart), how
        many had no fresh known ``forbidden_contact`` in what the contact
        grounding published (its newest sample by then unknown, or older
        than the monitor's staleness limit; ``stale_only``: older only, the
        grounding silent, not saying unknown)."""
        samples = sorted(self.contacts)
        stamps = [st for st, _ in samples]
        silent = 0
        for k in range(frames):
            frame_ns = end_ns - k * int(PERIOD_S * 1e9)
            i = bisect.bisect_right(stamps, frame_ns) - 1
            silent += i < 0 or (samples[i][1] and not stale_only) or frame_ns - stamps[i] > STALENESS_NS
        return silent

    def silence_explains(self, event: ViolationEvent, stale_only: bool = False) -> bool:
        """A no_forbidden_contact violation the contact inputs' silence opened:
        most of its window's frames (some slack for the phase of the
        monitor's frames and of this process's view) had no known contact."""
        return (event.property == 'no_forbidden_contact' and
                self.silent_frames(ns_from_time(event.start_stamp), stale_only=stale_only) >= 2 * SUSTAINED_FRAMES // 3)

    def explain(self) -> str:
        """What a failed "nothing happened" saw, for its message."""
        opened = [e for e in self.events if e.event == ViolationEvent.EVENT_OPENED]
        return (f'actions {[a.reason for a in self.actions]}; opened {[(e.property, e.start_frame) for e in opened]}, '
                f'silent frames of their windows {[self.silent_frames(ns_from_time(e.start_stamp)) for e in opened]}; '
                f'longest gap between robot ticks {self.longest_tick_gap_s:.2f} s')

    def all_closed(self) -> bool:
        """Every violation opened has closed."""
        key = lambda e: (e.property, e.instance, e.start_frame)  # noqa: E731
        closed = {key(e) for e in self.events if e.event == ViolationEvent.EVENT_CLOSED}
        return all(key(e) in closed for e in self.events if e.event == ViolationEvent.EVENT_OPENED)

    def nothing_but_silence(self, stale_only: bool = False) -> bool:
        """No violation event and no supervisor action; or, where the contact
        inputs went silent (a stall of the machine), only what that silence
        rightly causes: each violation opened explained by it (and the
        supervisor's holds for those and for its stale topics).  ``stale_only``:
        only a silence where the contact grounding published nothing (a
        starved machine) explains one, not one where it said unknown."""
        opened = [e for e in self.events if e.event == ViolationEvent.EVENT_OPENED]
        if not opened:
            return not self.actions and not self.events
        return all(self.silence_explains(e, stale_only) for e in opened)

    def tick(self) -> None:
        now_s = time.monotonic()
        if self._last_tick_s is not None and not self.paused:
            self.longest_tick_gap_s = max(self.longest_tick_gap_s, now_s - self._last_tick_s)
        self._last_tick_s = now_s
        if self.sim_time:
            self.clock_ns += int(PERIOD_S * 1e9)
            self.clock.publish(Clock(clock=time_from_ns(self.clock_ns)))
        self.ticks += 1
        stamp = self.now_ns()
        if self.backwards_every and self.ticks % self.backwards_every == 0:
            stamp -= int(0.1e9)              # a message stamped 100 ms before the one before it
        self.publish(stamp)
        if self.duplicate:
            self.publish(stamp)              # the same stamp twice

    def spin(self, cond, timeout_s: float = 60.0) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= self.next_tick:
                if not self.paused:
                    self.tick()
                self.next_tick = max(self.next_tick + PERIOD_S, now)
            self.ex.spin_once(timeout_sec=max(0.0, min(0.01, self.next_tick - time.monotonic())))
            if cond():
                return True
        return cond()

    def run_for(self, seconds: float) -> None:
        self.spin(lambda: False, seconds)

    def holds(self) -> list[SupervisorAction]:
        return [a for a in self.actions if a.action == SupervisorAction.ACTION_PAUSE]

    def close(self) -> None:
        self.node.destroy_node()
        self._ros.close()


@pytest.fixture()
def stack(tmp_path, request):
    sim_time = getattr(request, 'param', False)
    procs = _processes(tmp_path, sim_time)
    robot = None
    logs = lambda: '\n'.join(f'--- {n}\n' + (tmp_path / f'{n}.log').read_text()[-1500:] for n in procs)  # noqa: E731
    try:
        robot = Robot(sim_time)
        assert robot.spin(lambda: bool(robot.status) and robot.status[-1].state == 'active' and
                          robot.observer.count_subscribers('arm/joint_trajectory') >= 1 and
                          robot.observer.count_publishers('supervisor_actions') >= 1, 120), logs()
        robot.run_for(2.0)                   # every watched topic heard, the supervisor steady
        if robot.actions or robot.events:    # the inputs went silent: a supervisor that holds for nothing
            assert robot.nothing_but_silence(), (robot.explain(), logs())
            _quiet_restart(robot, procs, tmp_path, 'supervisor-settled', logs)
        robot.actions.clear()
        robot.events.clear()
        yield robot, procs, logs
    finally:
        if robot is not None:
            robot.close()
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs.values():
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def _touch_is_held(robot: Robot, logs) -> None:
    robot.touching = True
    assert robot.spin(lambda: any(a.reason.startswith('violation of no_forbidden_contact') for a in robot.holds())
                      and robot.trajs, 30), ([a.reason for a in robot.actions], logs())
    assert list(robot.trajs[-1].points[0].positions) == pytest.approx(POSE)
    robot.touching = False


def test_input_faults_raise_nothing_and_a_touch_is_still_held(stack):
    robot, procs, logs = stack
    robot.duplicate = True                   # every message twice, with the same stamp
    robot.run_for(2.0)
    robot.duplicate, robot.backwards_every = False, 3     # every third stamp 100 ms behind the one before
    robot.run_for(2.0)
    robot.backwards_every = 0
    for _ in range(200):                     # a burst: 200 of each at once, then the normal rate
        robot.publish(robot.now_ns())
    robot.run_for(1.0)
    robot.paused = True                      # the driver restarts: 0.2 s without a message, new publishers
    robot.run_for(0.2)
    robot.restart_publishers()
    robot.paused = False
    robot.run_for(2.0)
    # No input fault opens a violation. A busy machine may starve the contact grounding for over a second
    # (no_forbidden_contact holds 21 frames of unknown): seen once beside two busy loops. Only a window in
    # which it published nothing excuses one; a grounding that said "unknown" for these faults is the fault.
    assert robot.nothing_but_silence(stale_only=True), (robot.explain(), logs())
    assert all(p.poll() is None for p in procs.values()), logs()
    assert robot.status[-1].state == 'active' and not robot.status[-1].unknown_predicates, robot.status[-1]
    _touch_is_held(robot, logs)


def _held_for(robot: Robot, source: str, since: int = 0) -> SupervisorAction | None:
    """The supervisor's report, among its actions from ``since`` on, that
    ``source`` holds the arm: its pause; or, where a fail-safe pause for
    another source came first (a sensor late on a busy machine) and holds
    the arm already, its alert (a held arm is not paused twice; the
    operator is told of the new source)."""
    new = robot.actions[since:]
    pauses = [a for a in new if a.action == SupervisorAction.ACTION_PAUSE]
    named = [a for a in pauses if source in a.reason]
    if named or not pauses:
        return named[0] if named else None
    return next((a for a in new if a.action == SupervisorAction.ACTION_ALERT and source in a.reason), None)


def test_a_killed_grounding_process_holds_the_arm(stack):
    robot, procs, logs = stack
    procs['contact_grounding'].send_signal(signal.SIGKILL)
    # The hold command and the action report travel on two topics: wait for both.
    assert robot.spin(lambda: _held_for(robot, 'predicates/contacts') is not None and robot.trajs, 30), \
        ([a.reason for a in robot.actions], logs())
    hold = _held_for(robot, 'predicates/contacts')
    assert hold is not None and 'stale' in hold.reason and robot.trajs, hold
    assert hold.success or hold.action == SupervisorAction.ACTION_ALERT, hold


def test_a_killed_monitor_holds_the_arm(stack):
    robot, procs, logs = stack
    procs['monitor'].send_signal(signal.SIGKILL)
    assert robot.spin(lambda: _held_for(robot, 'the monitor') is not None and robot.trajs, 30), \
        ([a.reason for a in robot.actions], logs())
    assert robot.trajs and list(robot.trajs[-1].points[0].positions) == pytest.approx(POSE)


def _restart_supervisor(robot: Robot, procs, tmp_path: Path, log: str, tries: int = 3) -> str:
    """SIGKILL the supervisor and start it again; wait until the new one has
    asked the monitor for its open violations.  Its log so far.

    On a loaded machine Fast DDS now and then leaves a process started in
    place of a killed one deaf: its graph lists the others' publishers and
    theirs its subscriptions, yet no message of the monitor, the grounding
    or the robot reaches it (UDP or shared memory alike).  Such a
    supervisor holds for the sources it never heard and exits
    (``DEAF_EXIT_CODE``); it is started again, as the launch file's respawn
    does.  A supervisor deaf on every try fails the test."""
    n_actions, n_trajs = len(robot.actions), len(robot.trajs)
    procs['supervisor'].send_signal(signal.SIGKILL)
    for attempt in range(tries):
        # The robot goes on publishing while the process goes (a robot does not stop for it).
        assert robot.spin(lambda: procs['supervisor'].poll() is not None, 20)
        if attempt:                          # what the deaf one did is no part of what the test sees
            del robot.actions[n_actions:], robot.trajs[n_trajs:]
        name = f'{log}-respawn{attempt}' if attempt else log
        procs['supervisor'] = _start(tmp_path, 'supervisor', log=name)
        path = tmp_path / f'{name}.log'
        assert robot.spin(lambda: 'the monitor has' in path.read_text() or procs['supervisor'].poll() is not None,
                          60), path.read_text()[-2000:]
        if 'the monitor has' in path.read_text():
            return path.read_text()
        assert procs['supervisor'].poll() == DEAF_EXIT_CODE, (procs['supervisor'].poll(), path.read_text()[-2000:])
    pytest.fail(f'the restarted supervisor heard nothing on each of {tries} tries: {path.read_text()[-2000:]}')


def _quiet_restart(robot: Robot, procs, tmp_path: Path, log: str, logs, tries: int = 3) -> str:
    """Restart the supervisor with no violation open and see it do nothing
    for a second.  Where the inputs' silence (a busy machine) opened a
    violation meanwhile, which the new supervisor rightly holds for, wait
    for it to close and try again (a held arm waits for the operator).
    The new supervisor's log."""
    for attempt in range(tries):
        assert robot.spin(robot.all_closed, 30), (robot.explain(), logs())
        robot.actions.clear()
        robot.events.clear()
        text = _restart_supervisor(robot, procs, tmp_path, f'{log}-{attempt}' if attempt else log)
        robot.run_for(1.0)
        if not robot.actions and not robot.events:
            assert 'the monitor has no open violation' in text, text[-2000:]
            return text
        assert robot.nothing_but_silence(), (robot.explain(), logs())
    pytest.fail(f'the contact inputs went silent on each of {tries} tries: {robot.explain()}')


def test_a_restarted_supervisor_holds_an_open_violation_again(stack, tmp_path):
    robot, procs, logs = stack
    # Nothing open: the new supervisor learns so, and does nothing.
    _quiet_restart(robot, procs, tmp_path, 'supervisor-2', logs)
    # A touch opens a violation and is held; the supervisor dies while the arm still touches.
    robot.touching = True
    # The test's own subscription may hear the event after the supervisor held for it: wait for both.
    assert robot.spin(lambda: _held_for(robot, TOUCH_VIOLATION) is not None and robot.trajs
                      and any(e.event == ViolationEvent.EVENT_OPENED for e in robot.events), 30), \
        ([a.reason for a in robot.actions], logs())
    opened = [e for e in robot.events if e.event == ViolationEvent.EVENT_OPENED]
    since, trajs = len(robot.actions), len(robot.trajs)
    text = _restart_supervisor(robot, procs, tmp_path, 'supervisor-3')
    # The restarted one heard no event: it holds the arm again for the violation the monitor lists as open.
    assert robot.spin(lambda: _held_for(robot, TOUCH_VIOLATION, since) is not None and len(robot.trajs) > trajs, 30), \
        ([a.reason for a in robot.actions[since:]], (tmp_path / 'supervisor-3.log').read_text()[-2000:], logs())
    assert 'the monitor has 1 open violation(s)' in text and '1 not heard of before' in text, text[-2000:]
    assert [e for e in robot.events if e.event == ViolationEvent.EVENT_OPENED] == opened     # none published anew
    assert list(robot.trajs[-1].points[0].positions) == pytest.approx(POSE)
    robot.touching = False


def test_a_supervisor_restarted_after_a_grounding_process_died_holds_for_it(stack, tmp_path):
    """A watched topic counts once heard; a restarted supervisor never heard
    the one whose process died before it: the monitor's list of topics it
    has heard makes the new one hold for it all the same."""
    robot, procs, logs = stack
    procs['contact_grounding'].send_signal(signal.SIGKILL)
    assert robot.spin(lambda: _held_for(robot, 'predicates/contacts') is not None, 30), \
        ([a.reason for a in robot.actions], logs())
    since = len(robot.actions)
    _restart_supervisor(robot, procs, tmp_path, 'supervisor-2')
    holds = (SupervisorAction.ACTION_PAUSE, SupervisorAction.ACTION_STOP)

    def held_for_the_topic() -> bool:
        """The new supervisor names the silent topic: in its pause, or in an
        alert beside a hold it made for another cause first (the violation
        the monitor's unknown contacts opened may come first, and with no
        joint states yet its pause escalates to a stop)."""
        new = robot.actions[since:]
        named = [a for a in new if '/predicates/contacts stale' in a.reason]
        return any(a.action in holds for a in named) or (bool(named) and any(a.action in holds for a in new))
    assert robot.spin(held_for_the_topic, 30), \
        ([a.reason for a in robot.actions[since:]], (tmp_path / 'supervisor-2.log').read_text()[-2000:])


@pytest.mark.parametrize('stack', [True], indirect=True, ids=['sim_time'])
def test_clock_jumps_raise_nothing_and_a_touch_is_still_held(stack):
    robot, procs, logs = stack
    robot.clock_ns -= int(5e9)               # the simulation is reset: /clock 5 s back
    robot.run_for(2.0)
    robot.clock_ns += int(10e9)              # and 10 s forward at once (a paused simulator resumed)
    robot.run_for(2.0)
    # No input fault opens a violation. A busy machine may starve the contact grounding for over a second
    # (no_forbidden_contact holds 21 frames of unknown): seen once beside two busy loops. Only a window in
    # which it published nothing excuses one; a grounding that said "unknown" for these faults is the fault.
    assert robot.nothing_but_silence(stale_only=True), (robot.explain(), logs())
    assert all(p.poll() is None for p in procs.values()), logs()
    _touch_is_held(robot, logs)
