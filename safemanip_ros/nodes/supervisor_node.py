"""``supervisor``: acts on violations — log, alert, pause, retract, stop —
and resumes only after recovery plus an operator acknowledgement.  A
lifecycle node around :class:`safemanip_ros.supervisor.Supervisor`.

* **pause** publishes a ``trajectory_msgs/JointTrajectory`` holding the
  current measured joint positions on ``controller_topic`` and, if
  ``pause_service`` is set, calls that ``std_srvs/Trigger`` (e.g. the policy
  runner's pause);
* **retract** sends the last ``retract_window_s`` of measured joint states in
  reverse, timed within ``retract_max_speed_rad_s`` (or ``safe_pose`` when
  given), then holds;
* **stop** holds and calls ``stop_service`` if set;
* with ``trajectory_action`` set (e.g.
  ``/joint_trajectory_controller/follow_joint_trajectory``), pause and stop
  also cancel every goal of that action server, so the hold does not race
  the goal moving the arm; with ``servo_pause_service`` (MoveIt Servo's
  ``std_srvs/SetBool`` pause), they pause Servo and resume unpauses it; with
  ``switch_controller_service`` (``/controller_manager/switch_controller``),
  ``hold_controller`` and ``motion_controllers``, they switch the controller
  manager from the motion controllers to the safe one (a
  ``joint_trajectory_controller`` holds the measured position when it
  activates) and resume switches back.  A request refused, or not
  answered within ``controller_call_timeout_s``, is a hold not delivered
  (:mod:`safemanip_ros.nodes.controllers`);
* **resume** (after the violations that caused the hold have recovered and
  ``~/acknowledge`` was called; ``~/acknowledge_stop`` also releases a stop)
  calls ``resume_service`` if set;
* **the monitor watched** (``monitor_status_topic``): a monitor whose status
  says it is not active, or that falls silent for ``monitor_status_limit_s``
  once heard, pauses with the reason;
* **fail-safe**: ``joint_states`` older than ``failsafe_staleness_s``, or a
  sensor of ``failsafe_topics`` (``topic:package/msg/Type:limit_s``) older
  than its limit (once seen) pauses with the reason;
* **start-up**: the monitor or a topic of ``failsafe_topics`` never heard
  within ``startup_limit_s`` of activation (under ``ros2 launch`` a node
  whose configure failed exits and the others run on) pauses with the reason;
  where its own graph lists publishers of a source it never heard, the
  ``supervisor`` executable then exits 75 (its DDS participant does not
  receive them: a new process, the launch file's respawn, does);
* every action is published on ``supervisor_actions`` (SupervisorAction) and
  logged.  The response policy comes from ``policy_file`` (YAML with
  ``property``/``category``/``severity`` tables) over severity defaults;
  given ``properties`` (the monitor's suite files), a policy naming a
  property or category they do not have fails configure (a misspelt name
  never matches: its property would get the weaker severity default).
* a hold that could not be delivered (no joint states yet, no controller,
  service unavailable) is not a hold: it is retried every 0.25 s and
  escalated to ``stop`` after ``max_hold_failures`` (3) failures.
* **stalls**: the watchdog (every 20 ms) notices its own executor stalling
  (> 0.25 s: counted and logged; beyond ``executor_stall_limit_s``: a named
  fail-safe pause) and, given :meth:`SupervisorNode.watch_heartbeat`, another
  executor's: ``safemanip run`` spins the supervisor on a thread of its own,
  so a stalled grounding/monitor executor neither delays the fail-safe nor
  goes unreported (a stall beyond the limit pauses: verdicts were not
  produced meanwhile).
* **open violations at start**: events are not kept for a subscriber that
  arrives later, so on each activation the supervisor asks the monitor's
  ``monitor_open_violations_service`` (``~/open_violations``) for the
  violation episodes open now and acts on each as on its event: a
  supervisor restarted while a violation is open holds the arm again.  The
  predicate topics the monitor has heard count as heard for
  ``failsafe_topics``: one gone silent before the restart still holds.

Recording is the ``recorder`` node's job (:mod:`safemanip_ros.nodes.recorder_node`).
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
from builtin_interfaces.msg import Duration
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from safemanip_ros.msg import MonitorStatus, SupervisorAction, ViolationEvent
from safemanip_ros.srv import OpenViolations

from ..errors import ParameterError, SafemanipError, SpecError
from ..ros_names import optional_topic_problem
from ..settings import SUPERVISOR
from ..spec.suite import load_suite
from ..spec.yamlio import load_yaml
from ..stamps import utc_now
from ..supervisor import Action, JointHistory, ResponsePolicy, Supervisor, retract_path, without_retry_count
from ..supervisor.alerts import AlertConfig, AlertDispatcher
from .alert_reporting import failure_reporter
from .controllers import ControllerSwitch, ServoPause, TrajectoryGoalCanceller
from .conversions import message_class, ns_from_time, time_from_ns
from .guard import CallbackGuard, configured
from .params import RosParameters, check_setting, declare_settings
from .qos import EVENTS, RELIABLE, SENSORS
from .runner import autostarted, run_node, take_delivered, transition_failed

ACTION_CODE = {'log': SupervisorAction.ACTION_LOG, 'alert': SupervisorAction.ACTION_ALERT,
               'pause': SupervisorAction.ACTION_PAUSE, 'retract': SupervisorAction.ACTION_RETRACT,
               'stop': SupervisorAction.ACTION_STOP, 'resume': SupervisorAction.ACTION_RESUME}
# A stale sensor is noticed at most this late: 20 ms keeps the fail-safe hold
# within its limit plus one 50 ms frame, with room for the delivery.
WATCHDOG_PERIOD_S = 0.02
# An executor turn later than this is a stall worth reporting (counted, logged).
STALL_REPORT_S = 0.25
# An open-violations request not answered in this time is sent again (the monitor may have restarted).
OPEN_VIOLATIONS_RETRY_S = 2.0
# A hold trajectory holds the measured position: the open violations are asked for once joint states
# arrive, or after this long without them (a new process discovers the robot's publisher in seconds on
# a busy machine; asked sooner, the hold fails and escalates to stop).
OPEN_VIOLATIONS_JOINTS_WAIT_S = 5.0
HEARD_BY_MONITOR_GRACE_S = 3.0
"""A watched topic the monitor has heard counts as heard by a new supervisor,
whose own subscription may still be discovering its publisher: its silence
counts from this long after (with 0, a start beside two busy test workers
held the arm for a contact grounding that was publishing all along)."""
SEVERITY_NAME = {ViolationEvent.SEVERITY_INFO: 'info', ViolationEvent.SEVERITY_WARNING: 'warning',
                 ViolationEvent.SEVERITY_ERROR: 'error', ViolationEvent.SEVERITY_CRITICAL: 'critical'}


# A line that repeats (a hold retried every 0.25 s that cannot be delivered) is said at most this often.
REPEATED_LINE_PERIOD_S = 5.0
REPEATED_KINDS = 256          # kinds of line remembered (each violation's hold is a kind of its own)
DEAF_EXIT_CODE = 75
"""The exit status of a supervisor whose DDS participant hears nothing (sysexits' EX_TEMPFAIL: a new
process is likely to work; the launch file's respawn starts one)."""
DEAF_GRACE_S = 5.0
"""After the start-up limit, how long a never-heard source's publishers have to be heard before the
process is called deaf (one that appeared at the limit's moment has yet to deliver)."""


@dataclass
class _RepeatedLines:
    """Log lines that repeat: the first of a kind (its text less retry
    counts) is said at once, the same kind again at most once a period,
    with how many were left out; every action is still published."""

    period_s: float
    _said: dict[str, tuple[float, int]] = field(default_factory=dict)    # kind → (when said, left out since)

    def admit(self, text: str, now_s: float) -> str | None:
        kind = without_retry_count(text)
        said = self._said.get(kind)
        if said is not None and now_s - said[0] < self.period_s:
            self._said[kind] = (said[0], said[1] + 1)
            return None
        self._said.pop(kind, None)
        self._said[kind] = (now_s, 0)          # newest last: the oldest kinds are forgotten first
        while len(self._said) > REPEATED_KINDS:
            self._said.pop(next(iter(self._said)))
        return text if said is None or not said[1] else f'{text} ({said[1]} more like it left out)'


class SupervisorNode(RosParameters, CallbackGuard, LifecycleNode):
    def __init__(self, exits_when_deaf: bool = False, **node_kwargs: Any) -> None:
        """``exits_when_deaf``: a process of its own (the ``supervisor``
        executable) ends when its DDS participant receives nothing
        (:meth:`_check_deaf`); in a process with other nodes it stays."""
        super().__init__('supervisor', **node_kwargs)     # node_kwargs: e.g. context= (tests, composition)
        self._exits_when_deaf = exits_when_deaf
        declare_settings(self, SUPERVISOR)
        self.supervisor: Supervisor | None = None
        self._history: JointHistory | None = None
        self._joint_names: list[str] = []
        self._last_joint_rx: float | None = None
        self._frame = 0
        self._last_retry = 0.0
        self._last_watchdog: float | None = None
        self._last_watchdog_clock_ns: int | None = None     # the node's clock (sim time where it is on)
        self._confirming: tuple[Action, float] | None = None   # (delivered hold, deadline, monotonic)
        self._hold_receivers: tuple[int, list[Any]] = (0, [])   # the last hold's topic subscribers, interfaces
        # A hold whose trajectory no subscriber took (a supervisor restarted before DDS discovery matched the
        # controller): sent again once the topic has a subscriber, while the arm is still held.
        self._unreceived_hold: Action | None = None
        self._stalls = 0
        self._retry_period_s = 0.25
        # Callbacks may run on two threads (its own executor, and violations
        # handed over in-process by the monitor): CallbackGuard serialises them.
        self._callback_lock = threading.RLock()
        self._heartbeats: dict[str, Callable[[], float | None]] = {}
        self._stalled: dict[str, str] = {}   # watched executor → 'warned' or 'failsafe' during a stall
        self._open_client: Any = None
        self._open_request: tuple[Any, float] | None = None    # (future, monotonic time sent) while asking
        self._open_synced = False          # the monitor's open violations learned since activation
        self._activated_at = 0.0
        self._startup_checked = True              # this activation's start-up check is done
        self._deaf_check_at: float | None = None  # when never-heard sources with publishers call it deaf
        self._monitor_source = ''            # the watched monitor's name ('' when not watched)
        self._joints_warned: set[str] = set()     # causes of unusable joint_states said so far
        self._repeats = _RepeatedLines(REPEATED_LINE_PERIOD_S)
        self.exit_code: int | None = None   # set when this process must end (main returns it)

    @property
    def _supervising(self) -> Supervisor:
        """The response state, from configure on."""
        return configured(self.supervisor, 'the supervisor node')

    @property
    def _recent_joints(self) -> JointHistory:
        """The joint positions kept for a retract, from configure on."""
        return configured(self._history, 'the supervisor node')

    def watch_heartbeat(self, what: str, last_beat: Callable[[], float | None]) -> None:
        """Watch another executor: ``last_beat()`` is the ``time.monotonic()``
        of its last turn (None before the first).  A gap over 0.25 s is counted
        and logged; over ``executor_stall_limit_s`` it is a fail-safe pause
        named after ``what``."""
        self._heartbeats[what] = last_beat

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        p = self.get_parameter
        try:
            for setting in SUPERVISOR:
                check_setting(self, setting)
            for name in NAME_PARAMETERS:      # rcl would refuse them deep in configure (an RCLError, exit 70)
                problem = optional_topic_problem(str(p(name).value))
                if problem:
                    raise ParameterError(f'supervisor: parameter {name} = {problem}')
        except SafemanipError as err:
            return transition_failed(self, 'configure', f'{err.one_line()}')
        suite_files = [f for f in p('properties').value if f]
        try:
            suite = load_suite(suite_files) if suite_files else None
        except SpecError as err:
            return transition_failed(self, 'configure', f'properties: {err.one_line()}')
        try:
            data = (load_yaml(p('policy_file').value) if p('policy_file').value else None) or {}
            policy = ResponsePolicy.from_mapping(data, f'{p("policy_file").value}:1')
            alerts = AlertConfig.from_mapping(data.get('alerts'))
            if suite is not None:
                policy.check_against(suite, p('policy_file').value or 'policy_file')
        except SpecError as err:          # unreadable, not UTF-8, invalid YAML, an alias bomb: names the file
            return transition_failed(self, 'configure', f'policy_file: {err.one_line()}')
        except ValueError as err:
            return transition_failed(self, 'configure', f'policy_file {p("policy_file").value}: '
                                           f'{" ".join(str(err).split())}')
        self.supervisor = Supervisor(policy, int(p('max_hold_failures').value))
        # Alerts leave the control path through bounded queues on their own threads (supervisor/alerts.py).
        self._pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', RELIABLE)
        self._alerts = AlertDispatcher.from_config(alerts, failure_reporter(self, 'supervisor', self._pub_diag))
        self._history = JointHistory(float(p('retract_window_s').value))
        self._pub_traj = self.create_publisher(JointTrajectory, p('controller_topic').value, RELIABLE)
        self._pub_action = self.create_lifecycle_publisher(SupervisorAction, 'supervisor_actions', EVENTS)
        self._seen_events: dict[tuple[Any, ...], None] = {}     # recent events, insertion-ordered (in-process + DDS)
        self.create_subscription(ViolationEvent, 'violations', self._on_violation, RELIABLE)
        # Watched inputs: (subscription, what to call with a taken message).
        self._watched_subs = [(self.create_subscription(JointState, 'joint_states', self._on_joints,
                                                        SENSORS), self._on_joints)]
        self.create_service(Trigger, '~/acknowledge', lambda rq, rs: self._ack(rs, False))
        self.create_service(Trigger, '~/acknowledge_stop', lambda rq, rs: self._ack(rs, True))
        self._trigger_clients: dict[str, Any] = {name: self.create_client(Trigger, p(name).value)
                         for name in ('pause_service', 'resume_service', 'stop_service') if p(name).value}
        timeout_s = float(p('controller_call_timeout_s').value)
        self._controllers: list[TrajectoryGoalCanceller | ServoPause | ControllerSwitch] = []
        if p('trajectory_action').value:
            self._controllers.append(TrajectoryGoalCanceller(self, p('trajectory_action').value, timeout_s))
        if p('servo_pause_service').value:
            self._controllers.append(ServoPause(self, p('servo_pause_service').value, timeout_s))
        switch = p('switch_controller_service').value
        hold_controller, motion = p('hold_controller').value, [c for c in p('motion_controllers').value if c]
        if switch or hold_controller or motion:
            if not (switch and hold_controller and motion):
                return transition_failed(self, 'configure', 'switch_controller_service, hold_controller and '
                                         'motion_controllers go together (the controller manager\'s service, the '
                                         'safe controller to switch to, the controllers it replaces)')
            if hold_controller in motion:
                return transition_failed(self, 'configure', f'hold_controller {hold_controller!r} is also in '
                                         f'motion_controllers: a hold would not switch anything')
            self._controllers.append(ControllerSwitch(self, switch, hold_controller, motion, timeout_s))
        self._controller_request: Action | None = None     # the action whose controller requests are out
        self._active = False
        # Watched sensors: source name → [limit_s, last receive time or None].
        self._watched: dict[str, list[Any]] = {'joint_states': [float(p('failsafe_staleness_s').value), None]}
        self._watched_topics: dict[str, str] = {}      # source name → its topic (for the graph's word on it)
        for spec in p('failsafe_topics').value:
            if not spec:
                continue
            parts = spec.rsplit(':', 2)
            try:
                topic, msgtype, limit = parts[0], parts[1], float(parts[2])
                cls = message_class(msgtype)
            except (ValueError, IndexError, SafemanipError):
                return transition_failed(self, 'configure', f'failsafe_topics entry {spec!r}: expected '
                                               f'topic:package/msg/Type:limit_s')
            source = self.resolve_topic_name(topic)
            self._watched[source] = [limit, None]
            self._watched_topics[source] = source
            seen = functools.partial(self._seen_message, source)
            sub = self.create_subscription(cls, topic, seen, SENSORS, raw=True)
            self._watched_subs.append((sub, seen))
        status_topic = p('monitor_status_topic').value
        if status_topic:
            self._monitor_source = f'the monitor ({self.resolve_topic_name(status_topic)})'
            self._watched[self._monitor_source] = [float(p('monitor_status_limit_s').value), None]
            self._watched_topics[self._monitor_source] = self.resolve_topic_name(status_topic)
            self.create_subscription(MonitorStatus, status_topic, self._on_monitor_status, RELIABLE)
        open_service = p('monitor_open_violations_service').value
        self._open_client = self.create_client(OpenViolations, open_service) if open_service else None
        self.create_timer(WATCHDOG_PERIOD_S, self._watchdog)
        return TransitionCallbackReturn.SUCCESS

    def _on_monitor_status(self, msg: MonitorStatus) -> None:
        """An active or arming monitor is alive; any other state (inactive,
        unconfigured) holds the arm: no stack runs with its monitor off."""
        if msg.state in ('active', 'arming'):
            self._seen(self._monitor_source)
        elif self._active:
            self._watched[self._monitor_source][1] = time.monotonic()
            self._act(self._supervising.on_fault(self._monitor_source, f'reports state {msg.state!r}'))

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = True
        self._open_synced, self._open_request = self._open_client is None, None
        self._activated_at = time.monotonic()
        self._startup_checked, self._deaf_check_at = False, None
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        alerts = getattr(self, '_alerts', None)
        if alerts is not None:
            alerts.close()
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        alerts = getattr(self, '_alerts', None)
        if alerts is not None:
            alerts.close()
        return super().on_shutdown(state)

    # ---------------------------------------------------------------- inputs
    def _on_joints(self, msg: JointState) -> None:
        wanted = [j for j in self.get_parameter('joints').value if j] or list(msg.name)
        index = {n: i for i, n in enumerate(msg.name)}
        missing = [j for j in wanted if j not in index]
        if missing or len(msg.position) != len(msg.name):
            self._unusable_joints(missing, len(msg.name), len(msg.position))
            return   # incomplete message: not used for holding or retracting
        self._joint_names = wanted
        self._recent_joints.add(ns_from_time(msg.header.stamp) * 1e-9, [msg.position[index[j]] for j in wanted])
        self._last_joint_rx = time.monotonic()
        self._seen('joint_states')

    def _unusable_joints(self, missing: list[str], names: int, positions: int) -> None:
        """A joint_states message the arm cannot be held with (some drivers
        publish the gripper's joints in messages of their own: those are
        normal beside complete ones).  Said once per cause; while no usable
        message came, the first unusable one starts the stale clock, so a
        driver publishing only such messages is a fail-safe hold after
        ``failsafe_staleness_s``, never a silent arm nobody can hold."""
        why = (f'lacks joints {", ".join(missing)} (joints parameter)' if missing else
               f'has {positions} positions for {names} names')
        if why not in self._joints_warned:
            self._joints_warned.add(why)
            self.get_logger().error(f'joint_states message {why}: not usable for holding or retracting')
        self._heard_before('joint_states')

    def _heard_before(self, source: str, grace_s: float = 0.0) -> None:
        """Start a watched source's stale clock now (``grace_s`` from now) if
        it never ran: a source is watched once heard, and this one counts as
        heard (by the monitor, or through messages the arm cannot be held
        with), so its silence from then on is a fail-safe hold after its limit."""
        entry = self._watched.get(source)
        if entry is not None and entry[1] is None:
            entry[1] = time.monotonic() + grace_s

    def _seen_message(self, source: str, raw: bytes) -> None:
        self._seen(source)

    def _seen(self, source: str) -> None:
        self._watched[source][1] = time.monotonic()
        if source in self._supervising.stale:
            self._act(self._supervising.on_fresh(source))

    def deliver_violation(self, msg: ViolationEvent) -> None:
        """An event handed over by a monitor in this process, at the moment it
        is published: no transport and no executor turn between the frame
        and the hold.  The same event arriving later over DDS is ignored."""
        self._guarded(self._on_violation, 'violation (in-process)')(msg)

    def _on_violation(self, msg: ViolationEvent) -> None:
        if not self._active:
            return
        if self._heard_of(msg):
            return                     # delivered in-process already, or listed as open after its close came
        self._seen_events[(msg.episode_id, msg.instance, msg.event, msg.start_frame)] = None
        while len(self._seen_events) > 4096:
            self._seen_events.pop(next(iter(self._seen_events)))
        self._frame = msg.end_frame if msg.event == ViolationEvent.EVENT_CLOSED else msg.start_frame
        if msg.event == ViolationEvent.EVENT_OPENED:
            severity = SEVERITY_NAME.get(msg.severity, 'error')
            actions = self._supervising.on_violation(msg.instance, msg.property, msg.category, severity)
            self._act(actions)             # the hold first; the alert after it, never before
            self._alerts.submit({
                'type': 'violation', 'robot': self.get_namespace(), 'property': msg.property,
                'instance': msg.instance, 'category': msg.category, 'severity': severity,
                'episode': msg.episode_id, 'start_frame': int(msg.start_frame),
                'response': [a.action for a in actions] or ['alert'],
                'stamp_s': ns_from_time(msg.header.stamp) * 1e-9, 'time_utc': utc_now(),
                'summary': f'{severity.upper()}: {msg.instance} violated at frame {int(msg.start_frame)} on '
                           f'{self.get_namespace()}; response: {", ".join(a.action for a in actions) or "alert"}'},
                key=f'{msg.episode_id}/{msg.instance}/{msg.start_frame}', subject=msg.property)
        elif msg.event == ViolationEvent.EVENT_CLOSED and msg.recovered:
            self._act(self._supervising.on_recovered(msg.instance))

    def _heard_of(self, msg: ViolationEvent) -> bool:
        """Whether this event was acted on already: the same event, or (for
        an opening the monitor lists as open) its episode's close."""
        if (msg.episode_id, msg.instance, msg.event, msg.start_frame) in self._seen_events:
            return True
        return (msg.event == ViolationEvent.EVENT_OPENED and
                (msg.episode_id, msg.instance, ViolationEvent.EVENT_CLOSED, msg.start_frame) in self._seen_events)

    def _take_watched(self) -> None:
        """Take every watched message already delivered (rclpy's executor takes
        one per subscription per wake-up, and runs timers first): after a
        stall, the watchdog judges the sensors by what arrived, not by what the
        executor got round to."""
        for sub, callback in self._watched_subs:
            if not take_delivered(sub, callback, limit=1000):
                return

    def _watchdog(self) -> None:
        if not self._active:
            return
        now = time.monotonic()
        wall_gap_s = now - (self._last_watchdog or now)
        self._last_watchdog = now
        clock = self.get_clock()
        clock_ns = clock.now().nanoseconds
        gap = wall_gap_s
        if getattr(clock, 'ros_time_is_active', False):
            # On sim time the watchdog ticks as /clock advances, so a simulator that stood still (rendering a
            # camera frame on a busy machine) leaves a wall-clock gap that is no stall of this executor: what
            # went unwatched is the simulated time that passed meanwhile (the robot moved no further).
            gap = min(gap, max(0.0, (clock_ns - (self._last_watchdog_clock_ns or clock_ns)) * 1e-9))
        self._last_watchdog_clock_ns = clock_ns
        if wall_gap_s > STALL_REPORT_S:
            # Late, for whatever reason: the sensors are judged by what arrived meanwhile.
            self._take_watched()
        if gap > STALL_REPORT_S:
            # The executor itself stalled: said so, by name, never mistaken for a stale sensor.
            self._stalls += 1
            limit = float(self.get_parameter('executor_stall_limit_s').value)
            if gap > limit:
                self._act(self._supervising.on_stall(gap, limit))
            else:
                self.get_logger().warning(f'executor stalled for {gap:.2f} s (limit {limit:.2f} s); sensors judged '
                                          f'by what arrived meanwhile')
        if wall_gap_s > STALL_REPORT_S:
            now = time.monotonic()
        self._check_heartbeats(now)
        if not self._open_synced:
            self._sync_open_violations(now)
        self._poll_controllers(now)
        # A still arm is not a hold while the goal's cancel (or Servo's pause) is unanswered: it may move next.
        if self._confirming is not None and not any(c.pending for c in self._controllers):
            self._check_hold_confirmed(now)
        if self._unreceived_hold is not None:
            self._resend_unreceived_hold()
        if self._supervising.pending is not None and now - self._last_retry >= self._retry_period_s:
            self._last_retry = now
            self._act(self._supervising.retry())
        for source, (limit, last) in self._watched.items():
            if last is not None and now - last > limit:   # only sensors that have been seen
                self._act(self._supervising.on_stale(source, now - last, limit))
        startup_s = float(self.get_parameter('startup_limit_s').value)
        if not self._startup_checked and now - self._activated_at > startup_s:
            self._startup_checked = True
            # Every watched source but the joint states (a robot not yet driven is no fault of the stack).
            silent = [source for source, (_, last) in self._watched.items()
                      if source != 'joint_states' and last is None]
            for source in silent:
                self._act(self._supervising.on_fault(source, f'not heard within {startup_s:.1f} s of the '
                                                     f'supervisor\'s start ({self._graph_says(source)})'))
            if silent and self._exits_when_deaf:
                self._deaf_check_at = now + DEAF_GRACE_S
        if self._deaf_check_at is not None and now >= self._deaf_check_at:
            self._deaf_check_at = None
            self._check_deaf(now - self._activated_at)

    def _check_deaf(self, since_start_s: float) -> None:
        """Sources never heard ``since_start_s`` after activation (the
        start-up limit and :data:`DEAF_GRACE_S`) though this process's own
        graph lists publishers of them (each subscribed best effort or as
        its publisher is: every one matches; and a live grounding or monitor
        publishes even with nothing to say): the process's DDS participant
        does not receive them.  Seen with Fast DDS in a process started in
        place of a killed one on a loaded machine, deaf to some processes or
        to all; a new process works, so a supervisor of its own ends
        (:data:`DEAF_EXIT_CODE`) for the launch file's respawn, its hold for
        them already asked for."""
        counts = {source: self.count_publishers(topic) for source, topic in self._watched_topics.items()
                  if self._watched[source][1] is None}
        deaf = {source: n for source, n in counts.items() if n}
        if not deaf:
            return
        self.get_logger().fatal(f'{since_start_s:.1f} s after its start, never heard from publishers this process '
                                f'sees ({", ".join(f"{s}: {n}" for s, n in deaf.items())}): its DDS participant '
                                f'does not receive them; exiting ({DEAF_EXIT_CODE}) to be started afresh')
        self.exit_code = DEAF_EXIT_CODE

    def _graph_says(self, source: str) -> str:
        """What this process's view of the ROS graph says of a silent source:
        no publisher (did it fail to come up?), or publishers it has
        discovered that still sent nothing."""
        topic = self._watched_topics.get(source)
        count = self.count_publishers(topic) if topic else 0
        if not count:
            return 'did it fail to come up? no publisher of it in this process\'s graph'
        return f'{count} publisher(s) of it in this process\'s graph, none heard from'

    def _sync_open_violations(self, now: float) -> None:
        """Ask the monitor for the violations open now, once it serves, and
        act on each one not heard of as on its event (a request unanswered
        for OPEN_VIOLATIONS_RETRY_S is sent again).  Asked once a hold can be
        delivered: joint states heard (a hold trajectory holds the measured
        position), a pause service or controller interface configured, or
        OPEN_VIOLATIONS_JOINTS_WAIT_S passed."""
        client = self._open_client
        if self._open_request is not None:
            future, sent = self._open_request
            if future.done():
                self._open_request = None
                response = future.result()
                if response is not None:
                    self._open_synced = True
                    self._learn_open(response)
                    return
            elif now - sent < OPEN_VIOLATIONS_RETRY_S:
                return
            else:
                client.remove_pending_request(future)
                self._open_request = None
        can_hold = (self._recent_joints.latest() is not None or bool(self._controllers)
                    or 'pause_service' in self._trigger_clients
                    or now - self._activated_at >= OPEN_VIOLATIONS_JOINTS_WAIT_S)
        if can_hold and client.service_is_ready():
            self._open_request = (client.call_async(OpenViolations.Request()), now)

    def _learn_open(self, response: Any) -> None:
        """Act on the monitor's open violations not heard of, and count each
        watched topic the monitor has heard as heard (its silence counted
        from :data:`HEARD_BY_MONITOR_GRACE_S` on): one that stays silent (its
        publisher died before this supervisor started) is a fail-safe hold
        after its limit, as it was for the one before."""
        for topic in response.heard_topics:
            self._heard_before(topic, HEARD_BY_MONITOR_GRACE_S)
        fresh = [e for e in response.open if not self._heard_of(e)]
        if not response.open:
            self.get_logger().info(f'the monitor has no open violation (episode {response.episode_id!r})')
        else:
            self.get_logger().warning(
                f'the monitor has {len(response.open)} open violation(s) in rollout {response.episode_id!r}, '
                f'{len(fresh)} not heard of before: acting on them now')
        for event in fresh:
            self._on_violation(event)

    def _check_heartbeats(self, now: float) -> None:
        limit = float(self.get_parameter('executor_stall_limit_s').value)
        for what, beat in self._heartbeats.items():
            last = beat()
            gap = 0.0 if last is None else now - last
            state = self._stalled.get(what)
            if gap > limit and state != 'failsafe':
                self._stalled[what] = 'failsafe'
                if state is None:
                    self._stalls += 1
                self._act(self._supervising.on_stall(gap, limit, what, 'no verdicts were produced meanwhile'))
            elif gap > STALL_REPORT_S and state is None:
                self._stalled[what] = 'warned'
                self._stalls += 1
                self.get_logger().warning(f'{what} stalled for {gap:.2f} s so far (limit {limit:.2f} s)')
            elif gap <= STALL_REPORT_S and state is not None:
                del self._stalled[what]

    def _check_hold_confirmed(self, now: float) -> None:
        if self._confirming is None:
            return
        action, deadline = self._confirming
        p = self.get_parameter
        speed = self._recent_joints.max_speed_rad_s(float(p('hold_confirm_s').value))
        if speed is not None and speed <= float(p('hold_confirm_speed_rad_s').value):
            self._confirming = None
            self._supervising.confirm_hold()
            subscribers, answered = self._hold_receivers
            topic = self._pub_traj.topic_name
            took = ([f'{subscribers} subscriber{"s" * (subscribers != 1)} of {topic}'] if subscribers else []) + \
                [_interface_name(c) for c in answered]
            if took:
                self._act([Action('log', action.instance, action.property,
                                  f'{action.action} confirmed: received by {", ".join(took)}; the arm stopped '
                                  f'(max joint speed {speed:.3f} rad/s)')])
            else:
                self._unreceived_hold = action
                self._act([Action('alert', action.instance, action.property,
                                  f'{action.action}: the joints are still (max joint speed {speed:.3f} rad/s), but no '
                                  f'controller received the hold (nothing subscribes to {topic}): the arm is '
                                  f'stopped, not held')])
        elif now > deadline:
            self._confirming = None
            # Sent, but the arm did not stop: not a hold.  Retried, then escalated.
            self._supervising.command_result(action, delivered=False)
            what = 'no joint states' if speed is None else f'max joint speed {speed:.3f} rad/s'
            self._act([Action('alert', action.instance, action.property,
                              f'{action.action} not confirmed: the arm did not stop ({what}); not holding')])

    def _resend_unreceived_hold(self) -> None:
        """The hold no subscriber took, sent again as soon as its topic has one (a controller discovered
        after the hold went out), unless the arm is no longer held."""
        action = self._unreceived_hold
        assert action is not None
        if not self._supervising.held:
            self._unreceived_hold = None
            return
        subscribers = self._pub_traj.get_subscription_count()
        if not subscribers or not self._hold():
            return
        self._unreceived_hold = None
        topic = self._pub_traj.topic_name
        self._act([Action('log', action.instance, action.property,
                          f'{action.action} sent again: {subscribers} subscriber{"s" * (subscribers != 1)} of '
                          f'{topic} appeared after the hold went out to none')])

    def _poll_controllers(self, now: float) -> None:
        failures = [f for f in (c.poll(now) for c in self._controllers) if f]
        if not failures:
            return
        action, self._controller_request = self._controller_request, None
        if action is None:      # another interface's answer to the same request was judged already
            self.get_logger().warning('; '.join(failures))
            return
        if action.action in ('pause', 'stop'):
            # Refused or unanswered: the goal may still move the arm; not a hold.  Retried, then escalated.
            self._confirming = None
            self._supervising.command_result(action, delivered=False)
            self._act([Action('alert', action.instance, action.property,
                              f'{action.action} not delivered: {"; ".join(failures)}; not holding')])
        else:
            self._act([Action('alert', action.instance, action.property,
                              f'{action.action}: {"; ".join(failures)}')])

    def _ack(self, response: Any, release_stop: bool) -> Any:
        actions, message = self._supervising.acknowledge(release_stop)
        self._act(actions)
        response.success = bool(actions)
        response.message = message
        return response

    # --------------------------------------------------------------- actions
    def _act(self, actions: list[Action]) -> None:
        for a in actions:
            ok = True
            if a.action in ('pause', 'stop'):
                service = 'pause_service' if a.action == 'pause' else 'stop_service'
                held = self._hold()
                called = self._call(service)
                # The goal moving the arm is cancelled, Servo paused: judged when they answer (_poll_controllers).
                reached = [c.hold() for c in self._controllers]
                if self._controllers:
                    self._controller_request = a
                # Delivered when the hold trajectory went out, or the configured pause/stop service or a
                # controller interface took the request; a hold that reached nothing is not a hold.
                ok = held and called and all(reached)
                delivered = held or (service in self._trigger_clients and called) or any(reached)
                self._supervising.command_result(a, delivered)
                if held:
                    self._unreceived_hold = None          # this hold is judged afresh (_check_hold_confirmed)
                    self._confirming = (a, time.monotonic() + float(self.get_parameter('hold_confirm_timeout_s').value))
                    # Who received it, for the confirmation to say: stillness alone is not a controller's hold.
                    self._hold_receivers = (self._pub_traj.get_subscription_count(),
                                            [c for c, r in zip(self._controllers, reached) if r])
            elif a.action == 'retract':
                ok = self._retract()
                self._supervising.command_result(a, ok)
            elif a.action == 'resume':
                ok = self._call('resume_service')
                reached = [c.resume() for c in self._controllers]
                if self._controllers:
                    self._controller_request = a
                ok = ok and all(reached)
            msg = SupervisorAction(action=ACTION_CODE[a.action], property=a.property, instance=a.instance,
                                   reason=a.reason, frame=self._frame, success=ok)
            msg.header.stamp = time_from_ns(self.get_clock().now().nanoseconds)
            self._pub_action.publish(msg)
            text = f'{a.action}: {a.reason}' + ('' if ok else ' (FAILED)')
            # rclpy ties a call site to one severity, hence two call sites.
            if a.action == 'log':
                self.get_logger().info(text)
            elif ok:
                self.get_logger().warning(text)
            else:
                self._warn_repeated(text)

    def _warn_repeated(self, text: str, error: bool = False) -> None:
        """A line that may repeat every retry, said as _RepeatedLines allows."""
        said = self._repeats.admit(text, time.monotonic())
        if said is None:
            return
        if error:
            self.get_logger().error(said)
        else:
            self.get_logger().warning(said)

    def _call(self, name: str) -> bool:
        client = self._trigger_clients.get(name)
        if client is None:
            return True
        if not client.service_is_ready():
            self._warn_repeated(f'{name} {client.srv_name} is not available', error=True)
            return False
        client.call_async(Trigger.Request())
        return True

    def _hold(self) -> bool:
        q = self._recent_joints.latest()
        if q is None:
            self._warn_repeated('cannot hold: no joint_states received yet', error=True)
            return False
        self._send([(0.0, q)])
        return True

    def _retract(self) -> bool:
        safe = [float(x) for x in self.get_parameter('safe_pose').value]
        speed = float(self.get_parameter('retract_max_speed_rad_s').value)
        q = self._recent_joints.latest()
        if q is None:
            self._warn_repeated('cannot retract: no joint_states received yet', error=True)
            return False
        if len(safe) == len(q):
            import numpy as np
            path = [(0.0, q), (float(np.max(np.abs(np.asarray(safe) - q))) / speed, np.asarray(safe))]
        else:
            path = retract_path(self._recent_joints, speed)
        self._send(path)
        return True

    def _send(self, points: Iterable[tuple[float, np.ndarray]]) -> None:
        traj = JointTrajectory(joint_names=list(self._joint_names))
        traj.header.stamp = time_from_ns(0)   # zero stamp: execute now
        for t, q in points:
            pt = JointTrajectoryPoint(positions=[float(x) for x in q], velocities=[0.0] * len(q))
            sec = int(t)
            pt.time_from_start = Duration(sec=sec, nanosec=int((t - sec) * 1e9))
            traj.points.append(pt)
        self._pub_traj.publish(traj)


NAME_PARAMETERS = ('controller_topic', 'pause_service', 'resume_service', 'stop_service', 'trajectory_action',
                   'servo_pause_service', 'switch_controller_service', 'monitor_status_topic',
                   'monitor_open_violations_service')
"""Parameters that name a topic, service or action ('' : none)."""


def _interface_name(controller: Any) -> str:
    """How a confirmation names a controller interface that took the hold."""
    for attr in ('action', 'service', 'name'):
        value = getattr(controller, attr, None)
        if isinstance(value, str) and value:
            return f'{type(controller).__name__} {value}'
    return type(controller).__name__


def main(args: list[str] | None = None) -> int:
    ended: list[int] = []
    rc = run_node(autostarted(lambda: SupervisorNode(exits_when_deaf=True)), 'supervisor', args,
                  until=lambda node: node.exit_code is not None,
                  on_exit=lambda node: ended.append(node.exit_code or 0))
    return rc or (ended[0] if ended else 0)


__all__ = ['SupervisorNode']
