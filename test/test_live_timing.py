"""Time, not ticks: a monitor whose executor stalls still counts windows in
periods of the clock.  The monitor runs in this process on an executor that
another node stalls (0.3 s of every 0.4 s); the input is published from its
own thread and context at 20 Hz, so its stamps are true input times.  The
21-frame contact window must still close 1.00 s (+ one frame) after the
contact began, not 21 *ticks* later."""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import rclpy
from conftest import REPO
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import ros_node

from safemanip_ros.msg import PredicateArray, SupervisorAction, ViolationEvent
from safemanip_ros.nodes.conversions import ns_from_time, predicate_array, time_from_ns

RELIABLE = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
pytestmark = pytest.mark.ros
NS = '/live_timing_test'


JOINTS = [f'robot0_joint{i}' for i in range(1, 8)] + ['gripper0_finger_joint1', 'gripper0_finger_joint2']


def _joint_grounding_monitor(ns: str):
    """``safemanip run``'s wiring of one source: the joint-state grounding
    sampled by the monitor at each frame, in namespace ``ns`` (a suite
    reading joint predicates only).  Returns (source, monitor)."""
    from safemanip_ros.nodes.grounding_nodes import GroundingChain, JointStateGroundingNode
    from safemanip_ros.nodes.monitor_node import MonitorNode
    config = REPO / 'config' / 'robots' / 'panda_demo.yaml'
    suite = Path(__file__).parent / 'data' / 'joint_only_suite.yaml'
    rclpy.init(args=['--ros-args', '-r', f'__ns:={ns}', '-p', f'config:={config}', '-p', f'robot_config:={config}',
                     '-p', f'properties:=[{suite}]', '-p', 'sampled_by_monitor:=true',
                     '-p', 'predicate_topics:=[predicates/joint_states]'])
    source, monitor = JointStateGroundingNode(), MonitorNode()
    monitor.attach_grounding(GroundingChain([source]))
    return source, monitor


def _robot(name: str, ns: str):
    """The robot's node in a context of its own, publishing ``joint_states``
    in ``ns``.  Returns (context, node, joint-state publisher)."""
    from sensor_msgs.msg import JointState
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    robot = rclpy.create_node(name, context=ctx)
    return ctx, robot, robot.create_publisher(JointState, f'{ns}/joint_states', RELIABLE)


def _activate_and_feed(monitor, ex, feed, ready) -> threading.Thread:
    """Configure and activate ``monitor``, start the ``feed`` thread, and
    spin ``ex`` until ``ready()`` (30 s at most).  Returns the thread."""
    monitor.trigger_configure()
    monitor.trigger_activate()
    worker = threading.Thread(target=feed, daemon=True)
    worker.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not ready():
        ex.spin_once(timeout_sec=0.02)
    return worker


@dataclass
class _Stall:
    """A timer callback that sleeps ``seconds`` on the executor it runs on
    (the monitor's); ``machine_wide``: ``silenced`` is set meanwhile, for a
    robot that stops publishing with it (a stall of the whole machine)."""

    machine_wide: bool
    seconds: float = 0.45
    durations: list[float] = field(default_factory=list)
    silenced: threading.Event = field(default_factory=threading.Event)

    def __call__(self) -> None:
        if self.machine_wide:
            self.silenced.set()
        t = time.monotonic()
        time.sleep(self.seconds)
        self.durations.append(time.monotonic() - t)
        self.silenced.clear()


class _OutsideProcess:
    """The robot side, in a context and thread of its own (so the stalled
    executor does not delay it): publishes ``make(k)`` (unless None) on ``topic`` at 20 Hz
    once started, and collects what arrives on ``listen`` in ``received``."""

    def __init__(self, name: str, msg_type, topic: str, make, listen_type, listen: str) -> None:
        self._ros = contextlib.ExitStack()
        self.node, self.executor = self._ros.enter_context(ros_node(name))
        self.pub = self.node.create_publisher(msg_type, topic, RELIABLE)
        self.received: list = []
        self.node.create_subscription(listen_type, listen, self.received.append, RELIABLE)
        self.stop = threading.Event()
        self._make = make
        self.worker = threading.Thread(target=self._publish, daemon=True)

    def _publish(self) -> None:
        t0 = time.monotonic()
        k = 0
        while not self.stop.is_set():
            msg = self._make(k, t0)
            if msg is not None:         # None: nothing this tick
                self.pub.publish(msg)
            k += 1
            self.executor.spin_once(timeout_sec=0.0)
            time.sleep(max(0.0, t0 + k * 0.05 - time.monotonic()))

    def finish(self) -> None:
        self.stop.set()
        self.worker.join(timeout=5)

    def close(self) -> None:
        self.stop.set()
        self.worker.join(timeout=5)
        self._ros.close()


def test_windows_are_periods_of_the_clock_under_a_stalled_executor():
    from safemanip_ros.nodes.monitor_node import MonitorNode
    # In a namespace of its own: no other test's /monitor (or a lingering one) answers for it.
    rclpy.init(args=['--ros-args', '-r', f'__ns:={NS}',
                     '-p', f'properties:=[{REPO / "config" / "properties" / "safemanip.yaml"}]',
                     '-p', 'only:=[no_forbidden_contact]', '-p', 'staleness_s:=0.5'])
    monitor = MonitorNode()
    staller = rclpy.create_node('staller')
    stalls = []

    def stall():
        t = time.monotonic()
        time.sleep(0.3)
        stalls.append(time.monotonic() - t)
    staller.create_timer(0.4, stall)
    ex = SingleThreadedExecutor()
    ex.add_node(monitor)
    ex.add_node(staller)

    touch_ns: list[int] = []

    def contact(k, t0):
        now = time.time_ns()
        touching = time.monotonic() - t0 > 1.5
        if touching and not touch_ns:
            touch_ns.append(now)
        return predicate_array({'forbidden_contact': touching}, now, 'test', seq=k)
    io = _OutsideProcess('timing_io', PredicateArray, f'{NS}/predicates', contact, ViolationEvent, f'{NS}/violations')
    events: list[ViolationEvent] = io.received
    try:
        monitor.trigger_configure()
        monitor.trigger_activate()
        io.worker.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(e.event == ViolationEvent.EVENT_OPENED for e in events):
            ex.spin_once(timeout_sec=0.05)
        io.finish()
        opened = [e for e in events if e.event == ViolationEvent.EVENT_OPENED]
        assert opened and touch_ns, (len(events), monitor._frames_total)
        window_s = (ns_from_time(opened[0].start_stamp) - touch_ns[0]) * 1e-9
        # 21 frames of contact: the violation frame is 20 periods after the first
        # contact frame, which is at most one period after the contact began.
        print(f"window {window_s:.3f} s, {monitor._caught_up} frames caught up")
        assert 0.95 <= window_s <= 1.10, window_s
        assert stalls and max(stalls) >= 0.29 and monitor._caught_up > 0
    finally:
        io.close()
        monitor.destroy_node()
        staller.destroy_node()
        rclpy.try_shutdown()


def _supervisor_beside(stall, period_s: float, seconds: float, own_thread: bool):
    """The supervisor in this process beside a node whose timer runs
    ``stall()`` every ``period_s``: on the same executor, or (``own_thread``,
    as ``safemanip run`` wires it) on a :class:`WatchdogThread` of its own
    watching that executor's heartbeat.  Joint states flow at 20 Hz from
    another thread and context.  Returns (actions seen, the supervisor)."""
    from sensor_msgs.msg import JointState

    from safemanip_ros.nodes.runner import WatchdogThread
    from safemanip_ros.nodes.supervisor_node import SupervisorNode
    rclpy.init(args=['--ros-args', '-r', f'__ns:={NS}', '-p', 'failsafe_staleness_s:=0.5',
                     '-p', 'executor_stall_limit_s:=1.0', '-p', "monitor_status_topic:=''"])
    sup = SupervisorNode()
    staller = rclpy.create_node('main_executor')
    staller.create_timer(period_s, stall)
    ex = SingleThreadedExecutor()
    ex.add_node(staller)
    if not own_thread:
        ex.add_node(sup)

    def joints(k, t0):
        msg = JointState(name=['j1', 'j2'], position=[0.1, 0.2])
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(time.time_ns(), 10**9)
        return msg
    io = _OutsideProcess('stall_io', JointState, f'{NS}/joint_states', joints, SupervisorAction,
                         f'{NS}/supervisor_actions')
    watchdog = None
    try:
        sup.trigger_configure()
        sup.trigger_activate()
        if own_thread:
            watchdog = WatchdogThread(sup, staller, 'the main executor').start()
        io.worker.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ex.spin_once(timeout_sec=0.05)
        if watchdog is not None:
            watchdog.stop()        # before the inputs stop: what follows is the test's, not the robot's
        io.finish()
        for _ in range(20):
            io.executor.spin_once(timeout_sec=0.05)
        return io.received, sup
    finally:
        if watchdog is not None:
            watchdog.stop()
        io.close()
        sup.destroy_node()
        staller.destroy_node()
        rclpy.try_shutdown()


def _supervisor_under_stalls(stall_s: float, period_s: float, seconds: float):
    """Supervisor and staller on one executor: (actions, stalls counted)."""
    actions, sup = _supervisor_beside(lambda: time.sleep(stall_s), period_s, seconds, own_thread=False)
    return actions, sup._stalls


def test_a_stalled_executor_raises_no_false_fail_safe():
    """0.7 s stalls (longer than the 0.5 s sensor limit) while joint states flow:
    no stale-sensor hold, the stalls are counted."""
    actions, stalls = _supervisor_under_stalls(0.7, 1.0, 5.0)
    assert stalls >= 2
    assert not [a for a in actions if 'joint_states stale' in a.reason], [a.reason for a in actions]


def test_an_executor_stalled_beyond_its_limit_is_a_named_fail_safe():
    actions, stalls = _supervisor_under_stalls(1.3, 2.0, 4.0)
    reasons = [a.reason for a in actions]
    assert stalls >= 1 and any('the executor stalled for' in r for r in reasons), reasons
    assert not any('joint_states stale' in r for r in reasons), reasons


def test_a_paused_sim_clock_is_no_executor_stall():
    """On sim time, /clock and the joint states standing still for 1.6 s (a simulator rendering a
    camera frame on a busy machine) while the supervisor's executor runs freely: no 'executor stalled'
    fail-safe and no stall counted, and no stale joint states once they come with the clock again (on sim time a stall is the simulated time its watchdog missed, not the
    wall-clock gap the simulator left); the sim clock did stand still (the supervisor's own clock says so)."""
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState

    from safemanip_ros.nodes.supervisor_node import SupervisorNode
    rclpy.init(args=['--ros-args', '-r', f'__ns:={NS}', '-p', 'use_sim_time:=true',
                     '-p', 'failsafe_staleness_s:=0.5', '-p', 'executor_stall_limit_s:=1.0',
                     '-p', "monitor_status_topic:=''"])
    sup = SupervisorNode()
    ex = SingleThreadedExecutor()
    ex.add_node(sup)
    paused = range(20, 52)          # 50 ms ticks: /clock stands still from 1.0 s to 2.6 s (wall)

    def clock(k, t0):
        sim_k = k if k < paused.start else paused.start if k in paused else k - len(paused)
        return Clock(clock=time_from_ns(100 * 10**9 + sim_k * 50_000_000))

    def joints(k, t0):
        if k in paused:
            return None
        msg = JointState(name=['j1', 'j2'], position=[0.1, 0.2])
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(time.time_ns(), 10**9)
        return msg
    sim = _OutsideProcess('sim_clock', Clock, '/clock', clock, SupervisorAction, f'{NS}/unused')
    io = _OutsideProcess('paused_io', JointState, f'{NS}/joint_states', joints, SupervisorAction,
                         f'{NS}/supervisor_actions')
    frozen_s: list[float] = []
    try:
        sup.trigger_configure()
        sup.trigger_activate()
        sim.worker.start()
        io.worker.start()
        start = time.monotonic()
        while time.monotonic() < start + 4.0:
            ex.spin_once(timeout_sec=0.05)
            if 1.4 < time.monotonic() - start < 2.2:
                frozen_s.append(sup.get_clock().now().nanoseconds * 1e-9)
        sim.finish()
        io.finish()
        for _ in range(20):
            io.executor.spin_once(timeout_sec=0.05)
    finally:
        sim.close()
        io.close()
        sup.destroy_node()
        rclpy.try_shutdown()
    assert frozen_s and max(frozen_s) - min(frozen_s) < 0.01, frozen_s[:3]   # the sim clock stood still
    reasons = [a.reason for a in io.received]
    assert not [r for r in reasons if 'stalled' in r or r.startswith('fail-safe')], reasons
    assert sup._stalls == 0


def _watchdog_thread_under_a_stall(stall_s: float, seconds: float):
    """The supervisor on its own thread; the main executor stalls once,
    ``stall_s``, after 1 s.  Returns (actions, wall-clock stall interval in ns)."""
    stall_ns: list[int] = []
    t_start = time.monotonic()

    def stall():
        if not stall_ns and time.monotonic() - t_start > 1.0:
            stall_ns.append(time.time_ns())
            time.sleep(stall_s)
            stall_ns.append(time.time_ns())
    actions, _ = _supervisor_beside(stall, 0.05, seconds, own_thread=True)
    return actions, stall_ns


def test_the_watchdog_thread_holds_during_a_main_executor_stall():
    """A 2.5 s stall of the executor that runs grounding and monitor: the
    supervisor, on its own thread, pauses *during* the stall (limit 1 s),
    naming it; the joint states it watches stay fresh throughout."""
    actions, stall_ns = _watchdog_thread_under_a_stall(2.5, 5.0)
    reasons = [a.reason for a in actions]
    assert len(stall_ns) == 2, stall_ns
    named = [a for a in actions if 'the main executor stalled for' in a.reason]
    assert named, reasons
    assert named[0].action == SupervisorAction.ACTION_PAUSE, reasons
    sent_ns = ns_from_time(named[0].header.stamp)
    assert stall_ns[0] < sent_ns < stall_ns[1], (stall_ns, sent_ns)
    assert not any('joint_states stale' in r for r in reasons), reasons


def test_a_short_main_executor_stall_is_no_fail_safe():
    actions, stall_ns = _watchdog_thread_under_a_stall(0.7, 3.0)
    assert len(stall_ns) == 2, stall_ns
    assert not [a for a in actions if a.reason.startswith('fail-safe')], [a.reason for a in actions]


def test_phase_lock_shifts_only_for_a_steady_late_phase():
    """Pure logic: 20 steady lags of 35 ms ask for ticks 25 ms earlier (to a
    10 ms lag); lags spread over the period, small lags, or no input keep
    the phase."""
    from safemanip_ros.monitor.phase import PhaseLock
    lock = PhaseLock(0.05)
    asks = [lock.observe(0.035 + 0.001 * (k % 3)) for k in range(20)]
    assert asks[:-1] == [None] * 19 and abs(asks[-1] - 0.026) < 1e-9 and lock.shifts == 1
    assert [lock.observe(0.035) for _ in range(19)] == [None] * 19      # evidence starts afresh
    assert lock.observe(None) is None and lock._lags == collections.deque()
    spread = PhaseLock(0.05)
    assert all(spread.observe(0.001 + 0.0025 * k) is None for k in range(40))    # no steady phase
    early = PhaseLock(0.05)
    assert all(early.observe(0.008) is None for _ in range(40)) and early.shifts == 0
    # A busy computer: two late and two early messages in twenty do not hide a steady phase ...
    busy = PhaseLock(0.05)
    lags = [0.035] * 16 + [0.049, 0.047, 0.021, 0.022]
    assert [busy.observe(lag) for lag in lags][-1] == pytest.approx(0.025) and busy.shifts == 1
    # ... three at one end do.
    busier = PhaseLock(0.05)
    assert all(busier.observe(lag) is None for lag in [0.035] * 17 + [0.049, 0.048, 0.047]) and busier.shifts == 0
    with pytest.raises(ValueError, match='outliers'):
        PhaseLock(0.05, ticks=4, outliers=2)


def test_the_frame_clock_locks_to_inputs_that_land_just_after_it():
    """Joint states at 20 Hz published 15 ms after each of the monitor's
    ticks (read from its verdict stamps): a frame would see each one 35 ms
    late.  The in-process monitor moves its ticks to ~10 ms after them."""
    from sensor_msgs.msg import JointState

    from safemanip_ros.msg import VerdictArray
    source, monitor = _joint_grounding_monitor(NS)
    ex = SingleThreadedExecutor()
    ex.add_node(source)
    ex.add_node(monitor)
    names = JOINTS
    ctx, robot, pub = _robot('phase_robot', NS)
    ticks_ns: list[int] = []
    robot.create_subscription(VerdictArray, f'{NS}/verdicts',
                              lambda m: ticks_ns.append(ns_from_time(m.header.stamp)), RELIABLE)
    rex = SingleThreadedExecutor(context=ctx)
    rex.add_node(robot)
    published_ns: list[int] = []
    stop = threading.Event()

    def publish() -> None:
        next_ns, phased = time.time_ns(), False
        while not stop.is_set():
            time.sleep(max(0.0, (next_ns - time.time_ns()) * 1e-9))
            msg = JointState(name=names, position=[0.0] * len(names))
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(time.time_ns(), 10**9)
            pub.publish(msg)
            published_ns.append(time.time_ns())
            next_ns += 50_000_000
            rex.spin_once(timeout_sec=0.0)
            if not phased and len(ticks_ns) >= 3:
                # Against the monitor's phase once it runs: each message 15 ms after one of its ticks.
                phased = True
                next_ns = ticks_ns[-1] + 15_000_000
                while next_ns < time.time_ns():
                    next_ns += 50_000_000
    worker = threading.Thread(target=publish, daemon=True)
    # What the lock works on: each frame's lag from the newest input's arrival (ms), and the shifts so far.
    observed: list[tuple[int, float]] = []
    lock_phase = monitor._lock_phase

    def noting(period_s: float, lag_s: float | None) -> None:
        if lag_s is not None and monitor._phase is not None:
            observed.append((monitor._phase.shifts, lag_s * 1e3))
        lock_phase(period_s, lag_s)
    monitor._lock_phase = noting
    try:
        monitor.trigger_configure()
        monitor.trigger_activate()
        worker.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (monitor._phase.shifts == 0 or len(ticks_ns) < 100):
            ex.spin_once(timeout_sec=0.02)
        stop.set()
        worker.join(timeout=5)
        assert monitor._phase.shifts >= 1, (monitor._phase, observed[-30:])

        # Before the first shift the frames are sampled ~35 ms after the newest input arrived (the robot
        # publishes 15 ms after a tick); the last 20 frames ~10 ms after (the lock's target).  The medians
        # at least half of those 25 ms apart, compared with each other under the same load.  Lags from the
        # input's arrival, as the lock sees them: in a full make test beside busy loops, delivery within
        # this process took up to 20 ms, which lags from the publication time counted in.
        before = sorted(lag for shifts, lag in observed[5:] if shifts == 0)
        after = sorted(lag for _, lag in observed[-20:])
        assert len(before) >= 10 and observed[-1][0] >= 1, observed
        assert after[10] <= before[len(before) // 2] - 12.5, (before, after)
    finally:
        stop.set()
        source.destroy_node()
        monitor.destroy_node()
        robot.destroy_node()
        rclpy.try_shutdown(context=ctx)
        rclpy.try_shutdown()


@pytest.mark.parametrize('machine_wide', [False, True], ids=['executor_stall', 'machine_stall'])
def test_frames_caught_up_in_one_process_see_the_inputs_of_their_time(machine_wide):
    """``safemanip run`` samples its grounding at each frame.  A tick that
    catches up after a stall samples it at each missed frame's time, from
    the inputs stamped up to it: a gripper motion that begins and ends
    within a stall is still seen, and no input is unknown for the stall
    (the executor stalled, the sensor did not).  Sampled once at the tick,
    a clean release during a 0.55 s stall read as a drop (the demo).  In a
    stall of the whole machine the robot is silent too: the frames caught
    up on hold its inputs of the tick's first frame (only frames built at
    and after the tick may find the input not yet resumed)."""
    from sensor_msgs.msg import JointState

    ns = f'{NS}_catch_up'
    source, monitor = _joint_grounding_monitor(ns)
    staller = rclpy.create_node('staller')
    stall = _Stall(machine_wide)
    stalls, machine_stalled = stall.durations, stall.silenced
    ex = SingleThreadedExecutor()
    for node in (source, monitor, staller):
        ex.add_node(node)
    names = JOINTS
    ctx, robot, pub = _robot('catch_up_robot', ns)
    samples: list[PredicateArray] = []
    # Every sample heard, bursts of caught-up frames too: a deep queue and an executor spinning on its own.
    robot.create_subscription(PredicateArray, f'{ns}/predicates/joint_states', samples.append,
                              QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
    rex = SingleThreadedExecutor(context=ctx)
    rex.add_node(robot)
    stop, heard = threading.Event(), threading.Event()

    def hear() -> None:
        while not heard.is_set():
            rex.spin_once(timeout_sec=0.02)
    listener = threading.Thread(target=hear, daemon=True)
    listener.start()
    motions_ns: list[tuple[int, int]] = []      # (first, last) stamp of each finger motion

    def publish() -> None:
        """20 Hz; every 0.35 s the fingers move 4 mm over three messages, out then in."""
        k, t0, finger, moved_ns = 0, time.monotonic(), 0.02, []
        while not stop.is_set():
            time.sleep(max(0.0, t0 + k * 0.05 - time.monotonic()))
            step = k % 7
            if 1 <= step <= 3:
                finger += (0.004 / 3) * (1 if (k // 7) % 2 == 0 else -1)
            stamp_ns = time.time_ns()
            msg = JointState(name=names, position=[0.0, 0.0, 0.0, -1.5, 0.0, 1.5, 0.0, finger, finger])
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 10**9)
            if machine_stalled.is_set():       # not published: a motion whose messages were not sent is not one
                moved_ns = moved_ns if not 1 <= step <= 3 else []
                k += 1
                continue
            pub.publish(msg)
            if 1 <= step <= 3:
                moved_ns.append(stamp_ns)
            if step == 3:
                motions_ns.append((moved_ns[0], moved_ns[-1]))
                moved_ns = []
            k += 1
    worker = None
    try:
        worker = _activate_and_feed(monitor, ex, publish, lambda: monitor._frames_total > 0)   # stalls start then
        deadline = time.monotonic() + 30
        aged: dict[int, int] = {}      # frame a tick caught up on after its first → that first frame (stamps)
        step = monitor._step_frame

        def stepping(frame_ns, aged_at_ns=None):
            if aged_at_ns is not None and aged_at_ns != frame_ns:
                aged[frame_ns] = aged_at_ns
            return step(frame_ns, aged_at_ns)
        monitor._step_frame = stepping
        staller.create_timer(0.7, stall)
        started_ns = time.time_ns()
        while time.monotonic() < deadline and len(stalls) < 8:
            ex.spin_once(timeout_sec=0.02)
        stop.set()
        worker.join(timeout=5)
        ex.spin_once(timeout_sec=0.1)
        end = time.monotonic() + 5
        while time.monotonic() < end and (not samples or ns_from_time(samples[-1].header.stamp) < motions_ns[-1][1]):
            time.sleep(0.05)                 # the robot's executor takes what is still on its way
        assert len(stalls) >= 8 and monitor._caught_up >= 8 * 5, (stalls, monitor._caught_up)
        seen = [(ns_from_time(s.header.stamp), {p.name: None if p.unknown else p.value for p in s.predicates})
                for s in samples if ns_from_time(s.header.stamp) >= started_ns]
        unknown = [t for t, v in seen if v['gripper_open'] is None or v['joint_near_limit'] is None]
        # A caught-up frame is unknown only where its tick's first frame was (on a loaded machine the robot
        # may stay silent past its staleness after the stall: then both are, as they should be).
        newly = [t for t in unknown if t in aged and aged[t] not in unknown]
        assert sum(t in aged for t, _ in seen) >= 8 * 4 and not newly, (newly, unknown)
        # After a stall the robot's next message may come a period after the tick (the machine stalled, or a
        # busy one let the robot's thread run late): a frame or two built then find the input silent for
        # longer than its staleness limit, as they should.  That no frame is unknown when every sample is
        # in time is a rule of the frame assembly, tested exactly on a simulated clock
        # (test_frame_assembly.py); here, with real threads, it was a machine's luck.
        assert len(unknown) <= 2 * len(stalls) + 2, unknown
        motions = [m for m in motions_ns if started_ns < m[0] and m[1] < seen[-1][0] - 100_000_000]
        missed = [m for m in motions
                  if not any(m[0] <= t <= m[1] + 60_000_000 and (v['gripper_opening'] or v['gripper_closing'])
                             for t, v in seen)]
        # (A machine stall keeps 0.45 s of each 0.7 s silent: few whole motions are published then.)
        assert len(motions) >= (1 if machine_wide else 8) and not missed, (len(motions), missed, len(motions_ns))
    finally:
        stop.set()
        heard.set()
        listener.join(timeout=5)
        if worker is not None:
            worker.join(timeout=5)
        for node in (source, monitor, staller):
            node.destroy_node()
        robot.destroy_node()
        rclpy.try_shutdown(context=ctx)
        rclpy.try_shutdown()


def test_frames_caught_up_after_a_machine_wide_stall_hold_their_samples():
    """A stall of the whole machine (a virtual machine's host, swapping)
    stops the grounding with the monitor: the frames the monitor catches up
    on have no samples of their own.  They hold the samples of the tick's
    first frame, not call them stale: a stalled monitor is not a stale
    sensor.  The frame built now judges staleness as always."""
    from safemanip_ros.nodes.monitor_node import MonitorNode
    ns = f'{NS}_machine_stall'
    rclpy.init(args=['--ros-args', '-r', f'__ns:={ns}',
                     '-p', f'properties:=[{REPO / "config" / "properties" / "safemanip.yaml"}]',
                     '-p', 'only:=[no_forbidden_contact]', '-p', 'staleness_s:=0.2'])
    monitor = MonitorNode()
    staller = rclpy.create_node('staller')
    stall = _Stall(machine_wide=True)
    stalls, machine_stalled = stall.durations, stall.silenced
    ex = SingleThreadedExecutor()
    ex.add_node(monitor)
    ex.add_node(staller)
    unknown_at: dict[int, int] = {}              # frame ns → predicates unknown
    aged: dict[int, int] = {}                    # frame a tick caught up on after its first → that first frame
    frame = monitor._frame

    def noting(frame_ns=None, aged_at_ns=None):
        values, unknown = frame(frame_ns, aged_at_ns)
        if armed[0]:
            unknown_at[frame_ns] = int(unknown.sum())
            if aged_at_ns is not None and aged_at_ns != frame_ns:
                aged[frame_ns] = aged_at_ns
        return values, unknown
    monitor._frame = noting
    armed = [False]
    stop = threading.Event()

    def publish() -> None:
        with ros_node('machine_stall_robot') as (node, _):
            pub = node.create_publisher(PredicateArray, f'{ns}/predicates', RELIABLE)
            k, t0 = 0, time.monotonic()
            while not stop.is_set():
                time.sleep(max(0.0, t0 + k * 0.05 - time.monotonic()))
                k += 1
                if not machine_stalled.is_set():
                    pub.publish(predicate_array({'forbidden_contact': False}, time.time_ns(), 'test', seq=k))
    worker = None
    try:
        worker = _activate_and_feed(monitor, ex, publish, lambda: monitor._arming.armed)
        deadline = time.monotonic() + 30
        ex.spin_once(timeout_sec=0.1)           # past the first frame after arming
        armed[0] = True
        staller.create_timer(0.7, stall)
        while time.monotonic() < deadline and len(stalls) < 6:
            ex.spin_once(timeout_sec=0.02)
        assert len(stalls) >= 6 and monitor._caught_up >= 6 * 5, (stalls, monitor._caught_up)
        # A caught-up frame is unknown only where its tick's first frame was (a robot silent past its
        # staleness after the stall on a loaded machine: both are, as they should be).
        newly = [t for t, first in aged.items() if unknown_at[t] and not unknown_at.get(first)]
        assert len(aged) >= 6 * 4 and not newly, (newly, len(aged))
        # Frames built when the input had not yet resumed are stale, as live: a frame or two after each stall.
        now_unknown = [t for t, n in unknown_at.items() if n and t not in aged]
        assert len(now_unknown) <= 2 * len(stalls) + 2, now_unknown
    finally:
        stop.set()
        if worker is not None:
            worker.join(timeout=5)
        monitor.destroy_node()
        staller.destroy_node()
        rclpy.try_shutdown()


def test_samples_far_ahead_of_the_clock_are_kept_one_per_topic():
    """A publisher on another clock, stamping 1000 s ahead: no frame sees
    its samples until the clock gets there.  Kept all, they grew the
    monitor's queue by every message for as long as it ran; the newest of
    each topic is kept, and seen once the clock reaches its stamp (a
    forward jump of /clock)."""
    from safemanip_ros.nodes.monitor_node import MonitorNode
    ns = f'{NS}_ahead'
    rclpy.init(args=['--ros-args', '-r', f'__ns:={ns}',
                     '-p', f'properties:=[{REPO / "config" / "properties" / "safemanip.yaml"}]',
                     '-p', 'only:=[no_forbidden_contact]'])
    monitor = MonitorNode()
    ex = SingleThreadedExecutor()
    ex.add_node(monitor)
    try:
        monitor.trigger_configure()
        monitor.trigger_activate()
        ahead_ns = 1000 * 10**9
        with ros_node('ahead_robot') as (node, rex):
            pub = node.create_publisher(PredicateArray, f'{ns}/predicates', RELIABLE)
            sent = 0
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and monitor._skew.counts.get('predicates', 0) < 300:
                pub.publish(predicate_array({'forbidden_contact': True}, time.time_ns() + ahead_ns, 'test', seq=sent))
                sent += 1
                ex.spin_once(timeout_sec=0.005)
            assert monitor._skew.counts.get('predicates', 0) >= 300, monitor._skew.counts
        frames_in = monitor._assembly
        assert frames_in.waiting <= 3 and frames_in.waiting_ahead == 1, (frames_in.waiting, frames_in.waiting_ahead)
        values, unknown = monitor._frame(time.time_ns())
        assert unknown.all()                                   # not yet
        values, unknown = monitor._frame(time.time_ns() + ahead_ns)     # the clock got there
        assert values.all() and not unknown.any() and not frames_in.waiting_ahead
    finally:
        monitor.destroy_node()
        rclpy.try_shutdown()


def _overrun_lines_matching(pattern, monitor, ex, pub, wanted=lambda match: True, timeout_s: float = 30.0):
    """Activates ``monitor`` and spins ``ex``, publishing joint states, until
    one of the overrun lines it logs matches ``pattern`` with ``wanted`` true
    of the match (or ``timeout_s``): (those matches, every line logged).  On
    a busy machine other frames overrun too, and their lines match the
    pattern: ``wanted`` picks the one the test caused."""
    from sensor_msgs.msg import JointState
    lines: list[str] = []
    say = monitor._say_overrun

    def noting(line: str | None) -> None:
        if line is not None:
            lines.append(line)
        say(line)
    monitor._say_overrun = noting
    monitor.trigger_configure()
    monitor.trigger_activate()
    deadline = time.monotonic() + timeout_s
    def found() -> list:
        return [m for m in map(pattern.search, lines) if m and wanted(m)]
    while time.monotonic() < deadline and not found():
        msg = JointState(name=JOINTS, position=[0.0] * len(JOINTS))
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(time.time_ns(), 10**9)
        pub.publish(msg)
        ex.spin_once(timeout_sec=0.01)
    return found(), lines


def test_an_overrun_says_which_source_took_its_time_and_that_the_thread_waited():
    """One evaluation of the joint-state grounding blocks two frame periods
    without using a CPU (as a thread waiting for the GIL or a page would):
    the frame's overrun line names that source's evaluation as the time,
    and says the frame thread ran on a CPU for far less than the frame
    took, having waited."""
    import re

    ns = f'{NS}_overrun'
    source, monitor = _joint_grounding_monitor(ns)
    ex = SingleThreadedExecutor()
    ex.add_node(source)
    ex.add_node(monitor)
    ctx, robot, pub = _robot('overrun_robot', ns)
    evaluate, sampled = source.evaluate, [0]
    block_s = 2.0 / float(monitor.get_parameter('rate_hz').value)

    def blocking(now_s: float):
        # Every 50th evaluation blocks: the overrun log says one line a second, the longest, so on a busy
        # machine a longer overrun of the same second may stand for this one; the next block comes 2.5 s on.
        sampled[0] += 1
        if sampled[0] % 50 == 0:
            time.sleep(block_s)
        return evaluate(now_s)
    source.evaluate = blocking
    built = re.compile(r'frame built in ([\d.]+) ms .*\[joint_states ([\d.]+) \(inputs [\d.]+, evaluate ([\d.]+), '
                       r'publish [\d.]+\)\].*; this thread on a CPU ([\d.]+) ms \(user [\d.]+, system [\d.]+; \d+ '
                       r'page faults, \d+ major; (\d+) waits, \d+ preemptions\)\) \(period ')
    try:
        found, lines = _overrun_lines_matching(built, monitor, ex, pub,
                                               wanted=lambda m: float(m.group(3)) >= block_s * 1e3)
        assert found, (sampled, lines)
        frame_ms, source_ms, evaluate_ms, cpu_ms, waits = map(float, found[0].groups())
        assert evaluate_ms >= block_s * 1e3 and source_ms >= evaluate_ms and frame_ms >= source_ms, found[0].group(0)
        # The time asleep was not on a CPU, and the sleep is one of the thread's waits.
        assert cpu_ms < frame_ms - 0.75 * block_s * 1e3 and waits >= 1, found[0].group(0)
    finally:
        source.destroy_node()
        monitor.destroy_node()
        robot.destroy_node()
        rclpy.try_shutdown(context=ctx)
        rclpy.try_shutdown()


def test_a_late_tick_says_which_callback_kept_the_thread_from_it():
    """A callback of another node on the monitor's executor sleeps four
    frame periods once: the tick after it comes late, and its overrun line
    names that callback as the longest between the two ticks, with at
    least the time it slept, and says the frame thread was on a CPU for far
    less than that (executor_ledger.py)."""
    import re

    from safemanip_ros.nodes.executor_ledger import LedgerExecutor
    ns = f'{NS}_late_tick'
    source, monitor = _joint_grounding_monitor(ns)
    sleeper = rclpy.create_node('sleeper', namespace=ns)
    ex = LedgerExecutor()
    for node in (source, monitor, sleeper):
        ex.add_node(node)
    ctx, robot, pub = _robot('late_tick_robot', ns)
    block_s = 4.0 / float(monitor.get_parameter('rate_hz').value)
    slept: list[float] = []

    def stall_once() -> None:
        # A stall every 2 s (one line a second is logged, the longest: on a busy machine another late
        # tick of that second may stand for this one).
        if monitor._last_tick is not None and (not slept or time.monotonic() - slept[-1] >= 2.0):
            time.sleep(block_s)
            slept.append(time.monotonic())
    sleeper.create_timer(0.05, stall_once)
    late = re.compile(r'tick ([\d.]+) ms after the one before \(between them \d+ callback\(s\) ([\d.]+) ms \(.*; '
                      r'the longest one test_a_late_tick_says_which_callback_kept_the_thread_from_it\.<locals>\.'
                      r'stall_once ([\d.]+) ms\), the executor\'s waits [\d.]+ ms \(on a CPU [\d.]+\); this thread on a CPU ([\d.]+) ms')
    try:
        found, lines = _overrun_lines_matching(late, monitor, ex, pub,
                                               wanted=lambda m: float(m.group(3)) >= block_s * 1e3)
        assert found, (slept, lines)
        gap_ms, callbacks_ms, longest_ms, cpu_ms = map(float, found[0].groups())
        assert gap_ms >= longest_ms >= block_s * 1e3 and callbacks_ms >= longest_ms, found[0].group(0)
        assert cpu_ms < gap_ms - 0.75 * block_s * 1e3, found[0].group(0)      # asleep, not on a CPU
    finally:
        for node in (source, monitor, sleeper, robot):
            node.destroy_node()
        rclpy.try_shutdown(context=ctx)
        rclpy.try_shutdown()
