"""``monitor``: the live monitor as a lifecycle (managed) node.

* **configure** loads the property suites, binds them over the scene and
  compiles every DFA (a bad file fails the transition with the file's error);
* **activate** starts the frame timer (``rate_hz``, default 20 Hz) and a
  rollout;
* each tick builds one frame from the newest value of every predicate seen
  on the ``predicate_topics`` (sample-and-hold within ``staleness_s``,
  *unknown* beyond it or when published as unknown — SEMANTICS.md §1; in
  ``safemanip run`` the grounding of its own process is sampled at the
  frame's time instead, and its topics are not subscribed to), runs
  :class:`~safemanip_ros.monitor.core.Monitor`, and publishes
  ``verdicts`` (VerdictArray: every instance on a rollout's first frame
  and at least every ``verdicts_full_period_s``, between them the instances
  whose verdict, mode or recovery verdict changed; 0: every instance on
  every frame), ``violations`` (ViolationEvent, on open at once, on close
  within the frame's budget or in a later frame: monitor/pacing.py),
  ``metrics`` (MonitorMetrics, every ``metrics_period_s`` and final
  at the rollout's end; the final ones also on ``metrics/final``, latched),
  ``status`` (MonitorStatus) and ``/diagnostics``
  (OK/WARN/ERROR per category);
* a tick that starts late (timer jitter beyond half a period) or takes longer
  than the period is counted as an overrun and reported (status, diagnostics
  and a warning, at most one line a second), never dropped; the periodic
  messages wait for a frame with room for them (monitor/periodic.py);
* ``autostart: true`` configures and activates at start-up (no lifecycle
  manager needed);
* services (std_srvs/Trigger): ``~/start_episode``, ``~/end_episode`` (start
  and end a rollout: the wire keeps its first names),
  ``~/reload`` (rebuild from the files; on failure the running monitor is
  kept and the reply says why) and ``~/status`` (JSON in the reply); and
  ``~/open_violations`` (safemanip_ros/OpenViolations): every violation
  episode open now, as the event that opened it — how a supervisor that
  started after they opened (restarted, or up after the monitor) learns them.
"""

from __future__ import annotations

import copy
import functools
import json
import secrets
import time
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import JumpThreshold, TimeJump
from rclpy.duration import Duration
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from std_srvs.srv import Trigger

from safemanip_ros.msg import (
    MonitorMetrics,
    MonitorStatus,
    PredicateArray,
    PropertyMetrics,
    Verdict,
    VerdictArray,
    ViolationEvent,
)
from safemanip_ros.srv import OpenViolations

from ..errors import ParameterError, SafemanipError
from ..gc_pause import collector_time
from ..monitor.assembly import FrameAssembly
from ..monitor.build import build_monitor
from ..monitor.clock import MAX_CATCH_UP_FRAMES, Arming
from ..monitor.core import EpisodeEvent, Monitor, RolloutResult, StepResult
from ..monitor.overruns import OverrunLog
from ..monitor.pacing import ClosingQueue
from ..monitor.periodic import PeriodicSchedule
from ..monitor.phase import PhaseLock
from ..realtime import settle_heap
from ..settings import MONITOR
from ..stamps import StampSkew
from ..thread_usage import ThreadUsage
from .conversions import ns_from_time, set_time_ns, time_from_ns
from .event_wire import ViolationEventWire
from .guard import CallbackGuard, configured
from .metrics_wire import COUNT_FIELDS, RunningMetricsWire
from .params import RosParameters, check_setting, declare_settings
from .qos import EVENTS, FINAL_METRICS, RELIABLE
from .runner import autostarted, run_node, take_delivered, transition_failed
from .verdict_wire import VerdictArrayWire

if TYPE_CHECKING:
    from .grounding_nodes import GroundingChain

PERIODIC = ('status', 'metrics', 'diagnostics')
"""The periodic messages, every ``metrics_period_s``; the status (the
monitor's heartbeat) first when several are due in one frame."""

SEVERITY = {'info': ViolationEvent.SEVERITY_INFO, 'warning': ViolationEvent.SEVERITY_WARNING,
            'error': ViolationEvent.SEVERITY_ERROR, 'critical': ViolationEvent.SEVERITY_CRITICAL}
CLOCK_JUMP_NS = 1_000_000_000
"""A forward step of the clock between two consecutive ``/clock`` messages at
least this long (or any backward step) is a jump, not time passing."""
LOGGED_EVENTS = 8
"""Events of one kind named in a frame's log line; the rest are counted."""
CLOSINGS_BUDGET = 0.6
"""The share of a frame period the frame's work may reach while closings of
violation episodes still go out in it (monitor/pacing.py); the rest go in
the next frames, none later than :data:`CLOSING_MAX_WAIT_S`."""
CLOSING_MAX_WAIT_S = 0.5
"""The longest a closing waits for a frame with room (seconds)."""


class MonitorNode(RosParameters, CallbackGuard, LifecycleNode):
    def __init__(self) -> None:
        super().__init__('monitor')
        declare_settings(self, MONITOR)
        self.monitor: Monitor | None = None
        self._arming = Arming(timeout_s=10.0)      # its timeout is set on configure, when checked
        # Samples to frames, on the node clock (ROS time; /clock under use_sim_time): made on configure.
        self._assembly: FrameAssembly | None = None
        self._caught_up = 0           # frames produced late, from held samples, after a stalled tick
        # Per instance, its ViolationEvent message and its verdicts', metrics' and events' encoded parts,
        # made when the monitor is built (made in the frame, a thousand overran it).
        self._verdict_wire = VerdictArrayWire([])
        self._metrics_wire = RunningMetricsWire([])
        self._metrics_counts = np.zeros((0, len(COUNT_FIELDS)), dtype=np.uint32)
        self._event_msgs: list[ViolationEvent] = []
        self._event_wire = ViolationEventWire([], SEVERITY)
        self._closings = ClosingQueue(CLOSING_MAX_WAIT_S)
        self._gc = collector_time()         # a frame's overrun line says how much of it the collector took
        self._verdict_codes: np.ndarray | None = None     # each instance's last published (verdict, mode, recovery)
        self._verdicts_full_ns: int | None = None          # when every instance was last published
        # A simulator reset or resumed sends /clock back or forward at once: the gap has no samples, so
        # catching up on its periods would monitor frames of nothing (unknowns held into violations).
        # The schedule restarts at the new time instead (a stalled tick, where time passed with samples
        # in it, still catches up: that is many /clock steps, not one jump).
        self._jump_handle = self.get_clock().create_jump_callback(
            JumpThreshold(min_forward=Duration(nanoseconds=CLOCK_JUMP_NS), min_backward=Duration(nanoseconds=-1),
                          on_clock_change=False), post_callback=self._on_clock_jump)
        self._unlogged: list[tuple[str, Sequence[EpisodeEvent]]] = []    # this tick's events, logged after it
        self._skew = StampSkew()
        self._frame_timer: Any = None
        self._grounding: GroundingChain | None = None     # in-process grounding sampled each frame (safemanip run)
        self._listeners: list[Any] = []  # in-process supervisors handed each violation event (safemanip run)
        self._sub_topics: list[str] = []
        self._sampled_topics: list[str] = []    # per node of _grounding, the predicate topic it publishes
        self._heard_topics: dict[str, None] = {}     # predicate topics with a sample since configure, in order
        self._timer: Any = None
        self._rollout_id = ''
        self._rollout_count = 0
        # Rollout ids are unique across restarts (a gate counts each rollout once by its id, and a
        # restarted stack counts from 1 again): node name, start time (UTC) and a random tag.
        self._run_id = f'{time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())}-{secrets.token_hex(2)}'
        self._frames_total = 0
        self._last_frame_ns: int | None = None     # the newest frame's time, this rollout
        # Per instance, the (header, start) stamps in ns of the event that opened its last episode.
        self._opened_ns: list[tuple[int, int]] = []
        self._overrun_log = OverrunLog()       # counts them, picks the lines said (one a second, the longest)
        self._max_frame_s = 0.0
        self._last_tick: float | None = None
        self._tick_usage: ThreadUsage | None = None    # the frame thread's usage at the last tick
        # The periodic messages, each on a schedule of its own (configure sets the period).
        self._periodic = {name: PeriodicSchedule(1.0) for name in PERIODIC}
        self._subs: list[Any] = []
        self._phase: PhaseLock | None = None
        self._phase_timer: Any = None

    # ------------------------------------------------------------ lifecycle
    def _build(self) -> Monitor:
        p = self.get_parameter
        only = [x for x in p('only').value if x]
        # Live rollouts may run for hours: counts only (each violation episode is published as an event).
        suites = [f for f in p('properties').value if f]
        if not suites:
            # A monitor of no property would be a stack whose monitor is off while it looks on.
            raise ParameterError(f'{self.get_name()}: parameter properties names no suite file; give at least '
                                 f'one (left out, the shipped suites)')
        monitor = build_monitor(suites, p('scene').value, p('robot_config').value, only,
                                float(p('rate_hz').value), strict=bool(p('strict').value), keep_episodes=False)
        for inst, missing in sorted(monitor.unsupported.items()):
            self.get_logger().warning(f'unsupported, not run: {inst} (nothing in {p("robot_config").value} grounds '
                                      f'{", ".join(missing)})')
        return monitor

    @property
    def _configured(self) -> Monitor:
        """The monitor, from configure on."""
        return configured(self.monitor, 'the monitor node')

    @property
    def _frames_in(self) -> FrameAssembly:
        """Samples to frames, from configure on."""
        return configured(self._assembly, 'the monitor node')

    def _set_monitor(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self._verdict_wire = VerdictArrayWire([(i.property, i.instance) for i in monitor.instances])
        self._metrics_wire = RunningMetricsWire([(i.property, i.instance, i.category) for i in monitor.instances])
        self._metrics_counts = np.zeros((len(monitor.instances), len(COUNT_FIELDS)), dtype=np.uint32)
        self._event_msgs = [ViolationEvent(property=i.property, instance=i.instance, category=i.category,
                                           severity=SEVERITY[i.severity],
                                           binding=[KeyValue(key=k, value=v) for k, v in i.binding])
                            for i in monitor.instances]
        self._event_wire = ViolationEventWire(monitor.instances, SEVERITY)
        self._opened_ns = [(0, 0)] * len(monitor.instances)
        self._verdict_codes = None      # every instance's verdict is published at the next frame
        staleness_s = float(self.get_parameter('staleness_s').value)
        if self._assembly is None:
            self._assembly = FrameAssembly(monitor.predicates, float(self.get_parameter('rate_hz').value),
                                           staleness_s)
        else:
            self._assembly.set_predicates(monitor.predicates, staleness_s)
        # On configure (a lifecycle manager's too, not only autostart) and on reload: the new
        # tables leave the collector's passes, the replaced ones are collected.
        settle_heap()

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            for setting in MONITOR:
                check_setting(self, setting)
            self._arming = Arming(float(self.get_parameter('arming_timeout_s').value))
            self._assembly = None          # made anew at this rate and staleness by _set_monitor
            self._periodic = {name: PeriodicSchedule(float(self.get_parameter('metrics_period_s').value))
                              for name in PERIODIC}
            self._set_monitor(self._build())
        except SafemanipError as err:
            return transition_failed(self, 'configure', f'{err.one_line()}')
        self._pub_verdicts = self.create_lifecycle_publisher(VerdictArray, 'verdicts', RELIABLE)
        self._pub_events = self.create_lifecycle_publisher(ViolationEvent, 'violations', EVENTS)
        self._pub_metrics = self.create_lifecycle_publisher(MonitorMetrics, 'metrics', RELIABLE)
        # Each rollout's final metrics again, latched: a deployment gate must not miss a rollout
        # because it matched the monitor a moment after the rollout ended.
        self._pub_final = self.create_lifecycle_publisher(MonitorMetrics, 'metrics/final', FINAL_METRICS)
        self._pub_status = self.create_lifecycle_publisher(MonitorStatus, 'status', RELIABLE)
        self._pub_diag = self.create_lifecycle_publisher(DiagnosticArray, '/diagnostics', RELIABLE)
        # The topics the grounding of this process publishes are not subscribed to: the frames take its
        # samples directly (_take_sampled); taking each array again from DDS deserialised it predicate by
        # predicate, for values the frame already had.
        resolved = {self.resolve_topic_name(t): t for t in self.get_parameter('predicate_topics').value}
        self._sampled_topics = [resolved.get(n.output_topic, n.output_topic)
                                for n in (self._grounding.nodes if self._grounding else [])]
        in_process = {n.output_topic for n in (self._grounding.nodes if self._grounding else [])}
        for topic in self.get_parameter('predicate_topics').value:
            if self.resolve_topic_name(topic) in in_process:
                continue
            self._subs.append(self.create_subscription(PredicateArray, topic,
                                                       lambda m, t=topic: self._on_predicates(m, t), RELIABLE))
            self._sub_topics.append(topic)
        self._srvs = [self.create_service(Trigger, f'~/{name}', cb) for name, cb in (
            ('start_episode', self._srv_start), ('end_episode', self._srv_end), ('reload', self._srv_reload),
            ('status', self._srv_status))]
        self._srvs.append(self.create_service(OpenViolations, '~/open_violations', self._srv_open_violations))
        self.get_logger().info(f'configured: {len(self._configured.instances)} property instances over '
                               f'{len(self._configured.predicates)} predicates')
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._start_rollout()
        period_s = 1.0 / float(self.get_parameter('rate_hz').value)
        self._frames_in.restart()
        self._timer = self.create_timer(period_s, self._tick)
        # The one-shot frame builder, made once and reset each tick (a timer made and destroyed
        # every frame grows rclpy's callback-group bookkeeping by 100 entries a second).
        self._frame_timer = self.create_timer(0.0, self._build_frames)
        self._frame_timer.cancel()                  # reset by a tick, cancelled as it fires
        # Under /clock the simulator's clock drives the ticks, its state already out: no phase to fix.
        sim_time = bool(self.get_parameter('use_sim_time').value)
        self._phase = PhaseLock(period_s) if self.get_parameter('phase_lock').value and not sim_time else None
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None
        if self._frame_timer is not None:
            self.destroy_timer(self._frame_timer)
            self._frame_timer = None
        self._end_rollout()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        for s in self._subs:
            self.destroy_subscription(s)
        for s in self._srvs:
            self.destroy_service(s)
        self._subs, self._srvs, self._sub_topics = [], [], []
        self._heard_topics.clear()
        for pub in (self._pub_verdicts, self._pub_events, self._pub_metrics, self._pub_final, self._pub_status,
                    self._pub_diag):
            self.destroy_publisher(pub)
        self.monitor = None
        return TransitionCallbackReturn.SUCCESS

    # -------------------------------------------------------------- inputs
    def _on_predicates(self, msg: PredicateArray, topic: str = '') -> None:
        if self._assembly is None:
            return
        self._heard_topics[topic] = None
        preds = msg.predicates
        stamp_ns = ns_from_time(msg.header.stamp)
        if stamp_ns == 0:
            # An unstamped array is taken as "now", never as ancient (stale).
            stamp_ns = self.get_clock().now().nanoseconds
            self.get_logger().warning(f'{topic or "predicates"}: header stamp 0; taking receive time as the '
                                      f'sample time (warned once)', once=True)
        names, values, unknown = [p.name for p in preds], [p.value for p in preds], [p.unknown for p in preds]
        skew_s = self._skew.check(topic, stamp_ns, self.get_clock().now().nanoseconds)
        if skew_s is not None and self._skew.first(topic):
            self.get_logger().error(StampSkew.explain(self.resolve_topic_name(topic or 'predicates'), skew_s,
                                                      bool(self.get_parameter('use_sim_time').value)))
        if self._timer is None:          # not active: no frames to keep samples for
            self._assembly.hold_now(stamp_ns, names, values, unknown)
            return
        # Applied when the frames are built, each frame seeing exactly the
        # samples stamped at or before it (a late tick stays causal).
        if skew_s is not None and skew_s > 0:
            self._assembly.push_ahead(topic, stamp_ns, names, values, unknown)
        else:
            self._assembly.push(stamp_ns, names, values, unknown)
        self._hear(topic, names, unknown)

    def _hear(self, topic: str, names: list[str], unknown: list[bool]) -> None:
        """Arming hears a sample of ``topic``: how many of its predicates the suite reads, how many known."""
        if not self._arming.armed:
            read = self._frames_in.hold.index
            mine = [u for n, u in zip(names, unknown) if n in read]
            self._arming.heard(topic, len(mine), mine.count(False))

    def _take_sampled(self, frame_ns: int, sampled: list[dict[str, bool | None]]) -> None:
        """The samples of this process's grounding at ``frame_ns`` (one dict
        per node of the chain), kept for the frame as a topic's are; heard
        on their topics as a subscription would hear them."""
        for topic, values in zip(self._sampled_topics, sampled):
            names = list(values)
            unknown = [values[n] is None for n in names]
            self._frames_in.push(frame_ns, names, [bool(values[n]) for n in names], unknown)
            self._heard_topics[topic] = None
            self._hear(topic, names, unknown)

    def _check_armed(self, now: float) -> bool:
        """Armed once every predicate topic with a publisher has been heard,
        and each that carries predicates the suite reads has given one of
        them a known value: before that, unknowns are the start-up, not a
        fault, and open no violation (:class:`~safemanip_ros.monitor.clock.Arming`).
        After ``arming_timeout_s`` the monitor arms anyway and names the
        inputs it never saw."""
        arming = self._arming
        if arming.armed:
            return True
        topics = list(self.get_parameter('predicate_topics').value)
        if not arming.check(now, topics, {t for t in topics if self.count_publishers(t) > 0}):
            return False
        if arming.timed_out_waiting is not None:
            self.get_logger().error(f'arming timed out after {arming.timeout_s:g} s: no known value yet from '
                                    f'{", ".join(arming.timed_out_waiting) or "any predicate topic"}; '
                                    f'monitoring with unknowns')
        self.get_logger().info(f'armed after {now - (arming.since_s or now):.2f} s')
        return True

    def _frame(self, frame_ns: int | None = None, aged_at_ns: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The frame at ``frame_ns`` (node clock; default now): sample stamps
        are compared with ``aged_at_ns`` (default ``frame_ns``) for freshness."""
        if frame_ns is None:
            frame_ns = self.get_clock().now().nanoseconds
        return self._frames_in.frame(frame_ns, aged_at_ns)

    # --------------------------------------------------------------- ticks
    def _tick(self) -> None:
        mon = self.monitor
        if mon is None or not self._rollout_id:
            return
        t0 = time.monotonic()
        if not self._check_armed(t0):
            now_ns = self.get_clock().now().nanoseconds
            if self._grounding is not None:
                self._take_sampled(now_ns, self._grounding.sample(now_ns))    # how arming hears it
            if self._periodic['status'].due(t0):
                self._publish_status(self.get_clock().now().nanoseconds)
                self._periodic['status'].published(t0, time.monotonic() - t0)
            return
        period = 1.0 / float(self.get_parameter('rate_hz').value)
        # What kept this thread from its tick: the callbacks between (executor_ledger.py) and its CPU time.
        ledger = getattr(self.executor, 'ledger', None)
        between = ledger.take() if ledger is not None else None
        usage = ThreadUsage.now()
        if self._last_tick is not None and t0 - self._last_tick > 1.5 * period:
            said = [] if between is None else [f'between them {between.said()}']
            if self._tick_usage is not None:
                said.append(f'this thread {usage.since(self._tick_usage).said()}')
            self._overrun(f'tick {(t0 - self._last_tick) * 1e3:.1f} ms after the one before'
                          + (f' ({"; ".join(said)})' if said else ''), t0 - self._last_tick, period)
        else:
            self._say_overrun(self._overrun_log.due(t0))    # the longest of the last second, once it passed
        self._last_tick, self._tick_usage = t0, usage
        if self._frame_timer is not None and self._frame_timer.is_canceled():
            # One hop: the executor runs timers before the subscriptions that
            # became ready with them (a grounding node's input among them).  The
            # frame is built by a one-shot timer, after those callbacks ran.
            self._frame_timer.reset()

    def _build_frames(self) -> None:
        if self._frame_timer is not None:
            self._frame_timer.cancel()
        mon = self.monitor
        if mon is None or not self._rollout_id:
            return
        t0 = time.monotonic()
        usage0 = ThreadUsage.now()
        gc_before_s = self._gc.total_s
        period = 1.0 / float(self.get_parameter('rate_hz').value)
        now_ns = self.get_clock().now().nanoseconds
        # Exactly one frame per period of the clock: a late tick catches up on
        # the periods it missed from the held samples (monitor/clock.py).
        frames_in = self._frames_in
        skipped = frames_in.skipped
        due = frames_in.tick(now_ns, sampled_now=bool(self._grounding))
        if frames_in.skipped > skipped:
            self.get_logger().error(f'monitor stalled: {frames_in.skipped - skipped} frame periods beyond the '
                                    f'catch-up limit ({MAX_CATCH_UP_FRAMES}) were not monitored')
        if not due:
            return
        # Samples that arrived meanwhile may still wait in the subscriptions
        # behind this timer (the executor runs timers first and takes one
        # message per subscription per wake-up): take them now, so each frame
        # sees what was true at its time.
        self._drain_subscriptions()
        t_inputs = time.monotonic()
        # The newest frame's time is when it is built (less a margin for samples
        # still in flight), never later than now: a window of k frames is k
        # periods of the clock within the timer's jitter, and the published
        # verdict stamp records that time, so a replay of the recording builds
        # the very same frame.  Caught-up frames keep their scheduled times.
        # Sampled here and now (the grounding of this process), the newest frame
        # is at now, and its samples (published, so recorded, with this stamp)
        # are the ones it sees.
        if self._grounding:
            # When the robot's inputs last arrived, seen from the moment of sampling (the phase lock's lag).
            arrival_ns = self._grounding.last_arrival_ns
            sampled_mono_ns = time.monotonic_ns()
            self._grounding.clear_times()
            # Each frame a late tick catches up on is sampled at its own time, from the inputs stamped up to
            # it (the sources hold back later ones), as a topic's queued samples are: sampled once at now,
            # a gripper opening during a 0.55 s stall went unseen and a clean release read as a drop.
            for f in due:
                self._take_sampled(f.frame_ns, self._grounding.sample(f.frame_ns, f.aged_at_ns))
            self._lock_phase(period, (sampled_mono_ns - arrival_ns) * 1e-9 if arrival_ns else None)
        t_grounding = time.monotonic()
        self._caught_up += len(due) - 1
        event_count = 0
        for f in due:
            res = self._step_frame(f.frame_ns, f.aged_at_ns)
            event_count += len(res.opened) + len(res.closed)
        t_steps = time.monotonic()
        stamp_ns = due[-1].frame_ns
        frame = int(res.frame[0])
        self._pub_verdicts.publish(self._verdicts(stamp_ns, frame, res.verdicts[0], res.violated[0],
                                                  res.recovery_verdicts[0], now_ns))
        t_verdicts = time.monotonic()
        # Closings after the verdicts, as many as the frame has room for (monitor/pacing.py).
        closings = len(self._closings)
        self._release_closings(t0 + CLOSINGS_BUDGET * period)
        t_closings = time.monotonic()
        # The periodic messages, each when due, in a frame with room for it (monitor/periodic.py).
        for name, schedule in self._periodic.items():
            t1 = time.monotonic()
            if schedule.publish_now(t0, t1 - t0, period):
                if name == 'status':
                    self._publish_status(stamp_ns)
                elif name == 'metrics':
                    self._publish_metrics(None, stamp_ns)
                else:
                    self._publish_diagnostics(res.violated[0].tolist(), stamp_ns)
                schedule.published(t0, time.monotonic() - t1)
        elapsed = time.monotonic() - t0
        self._max_frame_s = max(self._max_frame_s, elapsed)
        if elapsed > period:
            # Where the time went, so an overrun in the field says what to look at.
            # What the thread used meanwhile (thread_usage.py): CPU far below the wall time, it waited.
            sources = f' [{self._grounding.times_said()}]' if self._grounding else ''
            self._overrun(f'frame built in {elapsed * 1e3:.1f} ms (inputs {(t_inputs - t0) * 1e3:.1f}, grounding '
                          f'{(t_grounding - t_inputs) * 1e3:.1f}{sources}, {len(due)} frame(s) with {event_count} '
                          f'event(s) {(t_steps - t_grounding) * 1e3:.1f}, verdicts {(t_verdicts - t_steps) * 1e3:.1f}, '
                          f'{closings - len(self._closings)} of {closings} closing(s) '
                          f'{(t_closings - t_verdicts) * 1e3:.1f}, periodic {(t0 + elapsed - t_closings) * 1e3:.1f} '
                          f'ms; of all that, Python\'s garbage collector {(self._gc.total_s - gc_before_s) * 1e3:.1f} '
                          f'ms; this thread {ThreadUsage.now().since(usage0).said()})', elapsed, period)
        # The operator's lines once the frames' outputs are out: rclpy's logger looks up its caller
        # for each line, a few tenths of a millisecond the frame's deadline work need not wait for.
        for verb, events in self._unlogged:
            self._log_events(verb, events)
        self._unlogged.clear()

    def _overrun(self, what: str, length_s: float, period_s: float) -> None:
        """Count a missed frame deadline (``length_s``: the frame's build
        time or the tick's gap) and say so, as ros2_control's controller
        manager does, at most one line a second, that second's longest
        (:mod:`~safemanip_ros.monitor.overruns`; the count is also in the
        status and the diagnostics)."""
        self._say_overrun(self._overrun_log.note(time.monotonic(), length_s,
                                                 f'{what} (period {period_s * 1e3:.1f} ms)'))

    def _say_overrun(self, line: str | None) -> None:
        if line is not None:
            self.get_logger().warning(f'frame overrun: {line}')

    @property
    def _overruns(self) -> int:
        return self._overrun_log.count

    def _verdicts(self, stamp_ns: int, frame: int, labels: np.ndarray, violated: np.ndarray, rec: np.ndarray,
                  now_ns: int) -> bytes:
        """This frame's serialized VerdictArray (:mod:`.verdict_wire`): every
        instance when a full set is due (a rollout's first frame, new
        instances, ``verdicts_full_period_s`` passed, or that period 0), else
        those whose verdict, mode or recovery verdict changed since they were
        last published.  An instance not in a violation episode has recovery
        verdict presumably false."""
        rec = np.where(violated, rec, Verdict.VERDICT_PRESUMABLY_FALSE)
        modes = np.where(violated, Verdict.MODE_VIOLATED, Verdict.MODE_WATCHING)
        codes = labels.astype(np.int16) | (violated.astype(np.int16) << 2) | (rec.astype(np.int16) << 3)
        full_period_ns = int(float(self.get_parameter('verdicts_full_period_s').value) * 1e9)
        full = (self._verdict_codes is None or self._verdicts_full_ns is None or full_period_ns == 0
                or not 0 <= now_ns - self._verdicts_full_ns < full_period_ns)
        which: Sequence[int]
        if full:
            self._verdicts_full_ns = now_ns
            which = range(len(self._verdict_wire))
        else:
            which = np.flatnonzero(codes != self._verdict_codes).tolist()
        self._verdict_codes = codes
        return self._verdict_wire.encode(stamp_ns, frame, self._rollout_id, which, labels.tolist(), modes.tolist(),
                                         rec.tolist())

    def _lock_phase(self, period_s: float, lag_s: float | None) -> None:
        """Feed this frame's input lag (seconds from the newest robot input's
        arrival to the sampling) to the phase lock; when it asks, the next
        tick comes that much earlier than its period, and the ticks continue
        from there."""
        if self._phase is None or self._phase_timer is not None or self._last_tick is None:
            return
        earlier_s = self._phase.observe(lag_s)
        if earlier_s is None:
            return
        # From this frame's tick, not from now: sampling comes a few ms after the tick.
        delay_s = self._last_tick + period_s - earlier_s - time.monotonic()
        if delay_s <= 0.001:
            return
        self.get_logger().info(f'frame clock moved {earlier_s * 1e3:.0f} ms earlier: the inputs arrived '
                               f'{(earlier_s + self._phase.target_lag_s) * 1e3:.0f} ms before each frame was '
                               f'sampled, now {self._phase.target_lag_s * 1e3:.0f} ms')
        self._phase_timer = self.create_timer(delay_s, self._shift_phase)

    def _shift_phase(self) -> None:
        """The early tick: the periodic timer restarts from here, and so does
        the frame schedule (this one frame period is shorter, once)."""
        if self._phase_timer is not None:
            self.destroy_timer(self._phase_timer)
            self._phase_timer = None
        if self._timer is None:
            return
        self._timer.reset()
        self._frames_in.restart()
        self._tick()

    def attach_grounding(self, grounding: GroundingChain) -> None:
        """The grounding of this process, sampled at each frame's time: the
        frame sees every input grounded before it, with no second timer and
        no transport in between."""
        self._grounding = grounding

    def attach_listeners(self, listeners: list[Any]) -> None:
        """Nodes of this process (``deliver_violation(msg)``) handed each
        violation event as it is published (they still hear other monitors
        over DDS and ignore the copy of ours).  The message is the monitor's
        own, reused for the instance's next event: read it, do not keep it."""
        self._listeners = list(listeners)

    def _drain_subscriptions(self) -> None:
        """Take every predicate message already delivered to our subscriptions
        (rclpy's executor takes one per subscription per wake-up)."""
        for sub, topic in zip(self._subs, self._sub_topics):
            if not take_delivered(sub, functools.partial(self._on_predicates, topic=topic)):
                self.get_logger().warning('cannot take messages directly; frames may miss samples still queued',
                                          once=True)
                return

    def _step_frame(self, frame_ns: int, aged_at_ns: int | None = None) -> StepResult:
        """Monitor the frame at ``frame_ns`` (samples aged at ``aged_at_ns``)
        and publish its episode events."""
        values, unknown = self._frame(frame_ns, aged_at_ns)
        res = self._configured.step(values, unknown)
        self._last_frame_ns = frame_ns
        for verb, kind, events in (('opened', ViolationEvent.EVENT_OPENED, res.opened),
                                   ('closed (recovered)', ViolationEvent.EVENT_CLOSED, res.closed)):
            if not events:
                continue
            for e in events:
                self._publish_event(kind, e.instance, e.start, e.start if e.end is None else e.end, e.recovered,
                                    frame_ns)
            self._unlogged.append((verb, events))
        self._frames_total += 1
        return res

    def _log_events(self, verb: str, events: Sequence[EpisodeEvent]) -> None:
        """One log line for a frame's events of one kind: a line per event
        (half a millisecond each, rclpy's logger looks up its caller) made a
        frame in which hundreds of instances violate at once overrun."""
        assert self.monitor is not None
        shown = [f'{self.monitor.instances[e.instance].instance} [{e.start}, {e.start if e.end is None else e.end}]'
                 for e in events[:LOGGED_EVENTS]]
        more = f' and {len(events) - LOGGED_EVENTS} more' if len(events) > LOGGED_EVENTS else ''
        self.get_logger().warning(f'violation {verb}: {"; ".join(shown)}{more}')

    def _publish_event(self, kind: int, d: int, start: int, end: int, recovered: bool, stamp_ns: int) -> None:
        """Publish instance ``d``'s event, encoded as bytes (``event_wire``);
        in-process listeners are handed the instance's message, made with the
        monitor and updated in place (hundreds of instances recovering in one
        frame: making each anew took 17 us of the frame's time apiece)."""
        # Two counts of rollout 0, read directly: a whole snapshot per event (every instance's counts as
        # tuples) took a quarter of the frame time with a thousand instances.
        violations, frames = int(self._configured.violations[d, 0]), int(self._configured.frames[0])
        period_ns = self._frames_in.period_ns
        frame_now = frames - 1
        start_ns = stamp_ns - (frame_now - start) * period_ns
        end_ns = stamp_ns - (frame_now - end) * period_ns
        payload = self._event_wire.encode(d, kind, self._rollout_id, stamp_ns, start, end, start_ns, end_ns, recovered,
                                          violations)
        if kind == ViolationEvent.EVENT_CLOSED:
            self._closings.push(d, payload, time.monotonic())      # out within the frame's budget, or later
        else:
            for earlier in self._closings.take(d, time.monotonic()):      # an instance's events in their order
                self._pub_events.publish(earlier)
            self._pub_events.publish(payload)
        if kind == ViolationEvent.EVENT_OPENED:
            self._opened_ns[d] = (stamp_ns, start_ns)      # listed as it was published while it stays open
        if not self._listeners:
            return
        # A supervisor in this process acts on the event now.
        msg = self._event_message(self._event_msgs[d], kind, start, end, recovered, violations, stamp_ns, start_ns,
                                  end_ns)
        for listener in self._listeners:
            listener.deliver_violation(msg)

    def _release_closings(self, deadline_s: float | None) -> None:
        """Publish the queued closings (:mod:`~safemanip_ros.monitor.pacing`)
        while ``time.monotonic()`` is before ``deadline_s``, and those that
        waited their longest; every one when ``deadline_s`` is None."""
        if not self._closings:
            return
        payloads = (self._closings.drain(time.monotonic()) if deadline_s is None
                    else self._closings.release(deadline_s, time.monotonic))
        for payload in payloads:
            self._pub_events.publish(payload)

    def _event_message(self, msg: ViolationEvent, kind: int, start: int, end: int, recovered: bool, count: int,
                       stamp_ns: int, start_ns: int, end_ns: int) -> ViolationEvent:
        """``msg``, an instance's event message, filled in place for this rollout."""
        msg.event, msg.episode_id, msg.start_frame, msg.end_frame = kind, self._rollout_id, start, end
        msg.recovered, msg.count = recovered, count
        set_time_ns(msg.header.stamp, stamp_ns)
        set_time_ns(msg.start_stamp, start_ns)
        set_time_ns(msg.end_stamp, end_ns)
        return msg

    def _publish_metrics(self, final: RolloutResult | None, stamp_ns: int) -> None:
        if final is None:
            self._pub_metrics.publish(self._running_metrics(self._configured, stamp_ns))
            return
        msg = MonitorMetrics(episode_id=self._rollout_id, final=True, frames=final.frames)
        msg.header.stamp = time_from_ns(stamp_ns)
        msg.properties = [PropertyMetrics(property=r.name, instance=r.instance, category=r.category,
                                          triggers=r.triggers, violations=r.violations,
                                          unsafe_frames=r.unsafe_frames, frames=r.frames,
                                          pending=int(r.pending), unknown_frames=r.unknown_any_frames)
                          for r in final.instances]
        self._pub_metrics.publish(msg)
        self._pub_final.publish(msg)

    def _running_metrics(self, mon: Monitor, stamp_ns: int) -> bytes:
        """Every instance's counts so far (rollout 0) as a serialized
        MonitorMetrics (:mod:`.metrics_wire`): rclpy converting a thousand
        nested messages field by field took most of a 100 Hz frame."""
        frames = int(mon.frames[0])
        counts = self._metrics_counts
        counts[:, 0], counts[:, 1], counts[:, 2] = mon.triggers[:, 0], mon.violations[:, 0], mon.unsafe[:, 0]
        counts[:, 3], counts[:, 5] = frames, mon.unknown_inst[:, 0]        # pending (4): 0 while running
        return self._metrics_wire.encode(stamp_ns, self._rollout_id, frames, counts)

    def _publish_status(self, stamp_ns: int) -> None:
        mon = self._configured
        state = 'inactive' if self._timer is None else ('active' if self._arming.armed else 'arming')
        msg = MonitorStatus(state=state, episode_id=self._rollout_id,
                            frames=self._frames_total, overruns=self._overruns, max_frame_time_s=self._max_frame_s,
                            instances=len(mon.instances), violated=int(mon.violated[:, 0].sum()),
                            suite=','.join(self.get_parameter('properties').value),
                            config=self.get_parameter('robot_config').value or self.get_parameter('scene').value,
                            rate_hz=float(self.get_parameter('rate_hz').value),
                            staleness_s=self._frames_in.staleness_s)
        values, unknown = self._frames_in.held(stamp_ns)     # the held state; waiting samples stay queued
        msg.unknown_predicates = [p for p, u in zip(mon.predicates, unknown.tolist()) if u]
        msg.header.stamp = time_from_ns(stamp_ns)
        self._pub_status.publish(msg)

    def _publish_diagnostics(self, violated: list[bool], stamp_ns: int) -> None:
        by_cat: dict[str, list[tuple[bool, str, str]]] = {}
        for d, inst in enumerate(self._configured.instances):
            by_cat.setdefault(inst.category, []).append((violated[d], inst.severity, inst.instance))
        arr = DiagnosticArray()
        arr.header.stamp = time_from_ns(stamp_ns)
        for cat, items in sorted(by_cat.items()):
            bad = [(sev, name) for v, sev, name in items if v]
            if not bad:
                level, text = DiagnosticStatus.OK, 'no open violation'
            elif any(sev in ('error', 'critical') for sev, _ in bad):
                level, text = DiagnosticStatus.ERROR, f'{len(bad)} open violation(s)'
            else:
                level, text = DiagnosticStatus.WARN, f'{len(bad)} open violation(s)'
            arr.status.append(DiagnosticStatus(level=level, name=f'safemanip/{cat}', message=text,
                                               hardware_id=self.get_name(),
                                               values=[KeyValue(key=n, value='violated') for _, n in bad]))
        arr.status.append(DiagnosticStatus(
            level=DiagnosticStatus.WARN if self._caught_up else DiagnosticStatus.OK, name='safemanip/timing',
            message=f'{self._caught_up} frame(s) produced late from held samples; {self._overruns} overrun(s)',
            hardware_id=self.get_name(),
            values=[KeyValue(key='frames', value=str(self._frames_total)),
                    KeyValue(key='caught_up_frames', value=str(self._caught_up)),
                    KeyValue(key='overruns', value=str(self._overruns)),
                    KeyValue(key='phase_shifts', value=str(self._phase.shifts if self._phase else 0)),
                    KeyValue(key='max_frame_time_s', value=f'{self._max_frame_s:.6f}'),
                    KeyValue(key='closings_paced', value=str(self._closings.paced)),
                    KeyValue(key='longest_closing_wait_s', value=f'{self._closings.longest_wait_s:.6f}')]))
        unsupported = self._configured.unsupported
        arr.status.append(DiagnosticStatus(
            level=DiagnosticStatus.WARN if unsupported else DiagnosticStatus.OK, name='safemanip/unsupported',
            message=(f'{len(unsupported)} property instance(s) not run: predicates not grounded' if unsupported
                     else 'every property instance is grounded'),
            hardware_id=self.get_name(),
            values=[KeyValue(key=k, value=', '.join(v)) for k, v in sorted(unsupported.items())]))
        skewed = self._skew.counts
        arr.status.append(DiagnosticStatus(
            level=DiagnosticStatus.WARN if skewed else DiagnosticStatus.OK, name='safemanip/clock',
            message=(f'{sum(skewed.values())} sample(s) stamped more than {self._skew.limit_s:g} s off this '
                     f'node\'s clock' if skewed else 'every sample stamped on this node\'s clock'),
            hardware_id=self.get_name(), values=[KeyValue(key=self.resolve_topic_name(k or 'predicates'), value=str(n))
                                                 for k, n in sorted(skewed.items())]))
        errors = self.error_summary()
        arr.status.append(DiagnosticStatus(
            level=DiagnosticStatus.WARN if errors else DiagnosticStatus.OK, name='safemanip/callbacks',
            message=f'{sum(errors.values())} callback error(s) caught' if errors else 'no callback error',
            hardware_id=self.get_name(), values=[KeyValue(key=k, value=str(n)) for k, n in errors.items()]))
        self._pub_diag.publish(arr)

    def _on_clock_jump(self, jump: TimeJump) -> None:
        if self._assembly is not None:
            self._assembly.restart()
        self.get_logger().warning(f'the clock jumped {jump.delta.nanoseconds * 1e-9:+.3f} s (/clock): the frame '
                                  f'schedule restarts at the new time; the periods of the jump are not monitored')

    # ------------------------------------------------------------ rollouts
    def _start_rollout(self) -> str:
        self._rollout_count += 1
        self._rollout_id = f'{self.get_name()}-{self._run_id}-{self._rollout_count:04d}'
        self._configured.reset()
        self._last_frame_ns = None
        self._verdict_codes = None      # a rollout's first frame lists every instance
        return self._rollout_id

    def _end_rollout(self) -> RolloutResult | None:
        if not self._rollout_id or self.monitor is None:
            return None
        self._release_closings(None)        # every event of the rollout before its final metrics
        self._say_overrun(self._overrun_log.due(time.monotonic(), waiting=True))
        result = self.monitor.finish()[0]
        self._publish_metrics(result, self.get_clock().now().nanoseconds)
        self._rollout_id = ''
        return result

    def _srv_start(self, request: Any, response: Any) -> Any:
        if self.monitor is None:
            response.success, response.message = False, 'not configured'
            return response
        previous = self._end_rollout()
        response.success = True
        response.message = self._start_rollout() + ('' if previous is None else f' (ended the previous one after '
                                                                                 f'{previous.frames} frames)')
        return response

    def _srv_end(self, request: Any, response: Any) -> Any:
        result = self._end_rollout()
        response.success = result is not None
        response.message = 'no rollout running' if result is None else json.dumps(
            {'frames': result.frames, 'violations': sum(r.violations for r in result.instances)})
        return response

    def _srv_reload(self, request: Any, response: Any) -> Any:
        try:
            new = self._build()
        except SafemanipError as err:
            response.success, response.message = False, f'kept the running properties: {err.one_line()}'
            return response
        self._end_rollout()
        self._set_monitor(new)
        if self._timer is not None:
            self._start_rollout()
        response.success, response.message = True, f'{len(new.instances)} property instances'
        return response

    def _srv_status(self, request: Any, response: Any) -> Any:
        mon = self.monitor
        response.success = mon is not None
        response.message = json.dumps({
            'episode': self._rollout_id, 'frames': self._frames_total, 'overruns': self._overruns,
            'caught_up_frames': self._caught_up, 'state': 'arming' if not self._arming.armed else 'active',
            'max_frame_time_s': self._max_frame_s, 'instances': 0 if mon is None else len(mon.instances),
            'violated': [] if mon is None else [i.instance for i, v in zip(mon.instances, mon.snapshot(0).violated)
                                                if v],
            'unsupported': {} if mon is None else {k: list(v) for k, v in sorted(mon.unsupported.items())}})
        return response

    def _srv_open_violations(self, request: Any, response: Any) -> Any:
        """Every open violation episode as the EVENT_OPENED event that
        opened it, field for field (``count``, the instance's violations this
        episode, has not changed while it stays open); the header stamp is
        the newest frame's time; and the predicate topics heard since
        configure."""
        mon, last_ns = self.monitor, self._last_frame_ns
        response.episode_id = self._rollout_id
        response.heard_topics = [self.resolve_topic_name(t) for t in self._heard_topics if t]
        if mon is None or not self._rollout_id or last_ns is None:
            return response
        set_time_ns(response.header.stamp, last_ns)
        for d in np.flatnonzero(mon.open_start[:, 0] >= 0).tolist():
            start = int(mon.open_start[d, 0])
            stamp_ns, start_ns = self._opened_ns[d]
            # A copy: the instance's message is the in-process listeners', filled anew at each event.
            response.open.append(self._event_message(copy.deepcopy(self._event_msgs[d]), ViolationEvent.EVENT_OPENED,
                                                     start, start, False, int(mon.violations[d, 0]), stamp_ns,
                                                     start_ns, start_ns))
        return response


def main(args: list[str] | None = None) -> int:
    return run_node(autostarted(MonitorNode), 'monitor', args)


__all__ = ['MonitorNode']
