"""Settings a person gives the monitor, each declared once: name, default,
range and meaning.

The nodes declare their ROS parameters from these tables, each with a
``ParameterDescriptor`` (so ``ros2 param describe`` shows its meaning and
range, and ``ros2 param set`` out of range is refused); the command line
takes its options' defaults and checks from the same entries, and the
offline audit its defaults.  One range check serves them all
(:meth:`Setting.problem`): a value the live stack refuses is refused
offline too.  No rclpy here.

Example::

    >>> RATE_HZ.default, RATE_HZ.option
    (20.0, '--rate-hz')
    >>> RATE_HZ.problem(0.0)
    'is outside [0.01, 1000]'
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .resources import default_suites

__all__ = ['BAG_PLAYER', 'CONTACT_GROUNDING', 'DEFAULT_RECORD', 'FOXGLOVE', 'GATE', 'GROUNDING', 'MAX_DURATION_S', 'MIN_PERIOD_S', 'MIN_RATE_HZ',
           'MONITOR', 'RATE_HZ', 'RECORDER', 'SIM_BRIDGE', 'STALENESS_S', 'SUPERVISOR', 'TF_GROUNDING',
           'TRACE_PLAYER', 'Setting', 'named']

MIN_RATE_HZ = 0.01
"""The slowest rate a rate setting takes (a tick per 100 s); below it a
period overflows the timer (``rate_hz:=1e-300``)."""
MAX_RATE_HZ = 1000.0
"""The highest frame rate (a frame per millisecond); above it a long
recording asks for memory no machine has (1e9 Hz: 37 GiB)."""
MIN_PERIOD_S = 0.001
"""The shortest period a period setting takes: a timer at 0 s spins the CPU."""


@dataclass(frozen=True)
class Setting:
    """One setting: its name (the ROS parameter's; the option is
    ``--name-with-dashes``), default, meaning and, for a number, the range
    ``[low, high]`` (``low_open``, ``high_open``: that end excluded)."""

    name: str
    default: Any
    description: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    @property
    def option(self) -> str:
        return '--' + self.name.replace('_', '-')

    @property
    def bounds(self) -> str:
        low = '-inf' if self.low is None else f'{self.low:g}'
        high = 'inf' if self.high is None else f'{self.high:g}'
        closed_high = self.high is not None and not self.high_open
        return f'{"(" if self.low_open or self.low is None else "["}{low}, {high}{"]" if closed_high else ")"}'

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not one this setting takes (None: it is): a
        number not finite or outside the range."""
        if self.low is None and self.high is None:
            return None
        v = float(value)
        if not math.isfinite(v):
            return f'is outside {self.bounds}'
        low_ok = self.low is None or (v > self.low if self.low_open else v >= self.low)
        high_ok = self.high is None or (v < self.high if self.high_open else v <= self.high)
        if not (low_ok and high_ok):
            return f'is outside {self.bounds}'
        return None

    def help(self) -> str:
        """The option's help: meaning, default and range."""
        return f'{self.description} (default {self.default:g}; {self.bounds})'


def named(table: tuple[Setting, ...], name: str) -> Setting:
    """The setting of ``table`` called ``name`` (KeyError: none is)."""
    for s in table:
        if s.name == name:
            return s
    raise KeyError(name)


RATE_HZ = Setting('rate_hz', 20.0, 'frames per second the monitor builds and judges (Hz; live on the node clock, '
                  'offline in bag time)', MIN_RATE_HZ, MAX_RATE_HZ)
STALENESS_S = Setting('staleness_s', 0.25, 'a predicate sample older than this at a frame reads unknown (s)',
                      0.0, 3600.0)

MONITOR: tuple[Setting, ...] = (
    Setting('properties', [str(p) for p in default_suites()], 'property suite files (YAML)'),
    Setting('strict', False, 'a property reading a predicate the configuration does not ground is an error '
                             '(else it is not run and is listed as unsupported)'),
    Setting('scene', '', 'scene file binding templated properties to the entities present'),
    Setting('robot_config', '', 'robot configuration (YAML) whose scene and groundings the monitor reads'),
    Setting('only', [''], 'monitor only these properties (empty: all)'),
    RATE_HZ,
    Setting('predicate_topics', ['predicates/joint_states', 'predicates/contacts', 'predicates/tf', 'predicates/camera',
                                 'predicates/skills', 'predicates'], 'the PredicateArray topics the monitor reads'),
    STALENESS_S,
    Setting('metrics_period_s', 1.0, 'period of the metrics and status messages (s)', MIN_PERIOD_S, 3600.0),
    # A thousand instances' full verdicts every frame cost more than a 100 Hz period to publish (and
    # 14 GB an hour of bag); what changed is what a subscriber needs, the whole set now and then.
    Setting('verdicts_full_period_s', 1.0, 'every instance\'s verdict is published at least this often; between, '
                                           'only those that changed (s; 0: every frame)', 0.0, 3600.0),
    Setting('autostart', False, 'configure and activate on start, without a lifecycle manager'),
    Setting('arming_timeout_s', 10.0, 'how long the monitor waits for every predicate source to be heard before '
                                      'its first frame (s)', 0.0, 3600.0),
    # Sampling in-process grounding (safemanip run) on the system clock, the ticks move to just after
    # the robot's inputs arrive (monitor/phase.py).
    Setting('phase_lock', True, 'tick just after the robot\'s inputs arrive (in-process grounding, system clock)'),
)
"""The monitor node's parameters."""

SUPERVISOR: tuple[Setting, ...] = (
    Setting('policy_file', '', 'the responses per property and category (YAML)'),
    # The suite files the monitor runs: given, the policy's names are checked against them.
    Setting('properties', [''], 'the suite files the monitor runs: the policy\'s names are checked against them'),
    Setting('controller_topic', 'joint_trajectory_controller/joint_trajectory',
            'where holds and retracts are sent (trajectory_msgs/JointTrajectory)'),
    Setting('pause_service', '', 'a std_srvs/Trigger service a pause also calls (empty: none)'),
    Setting('resume_service', '', 'a std_srvs/Trigger service a resume also calls (empty: none)'),
    Setting('stop_service', '', 'a std_srvs/Trigger service a stop also calls (empty: none)'),
    Setting('trajectory_action', '', 'a hold also cancels every goal of this FollowJointTrajectory action server'),
    Setting('servo_pause_service', '', 'a hold also pauses MoveIt Servo through this std_srvs/SetBool service'),
    Setting('switch_controller_service', '', 'the controller manager\'s SwitchController service'),
    Setting('hold_controller', '', 'a hold also switches ros2_control to this controller'),
    Setting('motion_controllers', [''], 'the controllers hold_controller replaces'),
    Setting('controller_call_timeout_s', 1.0, 'how long a controller service call may take (s)', 0.0, 60.0,
            low_open=True),
    Setting('retract_window_s', 2.0, 'how far back a retract goes along the measured path (s)', 0.0, 60.0),
    Setting('retract_max_speed_rad_s', 0.5, 'the fastest joint speed of a retract (rad/s)', 0.0, 10.0, low_open=True),
    Setting('safe_pose', [0.0], 'joint positions of the safe pose (rad)'),
    Setting('joints', [''], 'the arm joints holds and retracts command'),
    Setting('failsafe_staleness_s', 0.5, 'an input silent this long is a fail-safe pause (s)', 0.0, 60.0,
            low_open=True),
    Setting('failsafe_topics', [''], 'inputs watched for silence besides the joint states'),
    Setting('autostart', False, 'configure and activate on start, without a lifecycle manager'),
    Setting('max_hold_failures', 3, 'failed holds in a row before a hold escalates to stop', 1, 1000),
    Setting('executor_stall_limit_s', 1.0, 'an executor stalled this long is a fail-safe pause (s)', 0.0, 60.0,
            low_open=True),
    # A delivered pause/stop is confirmed once the measured arm is still: every joint slower than
    # hold_confirm_speed_rad_s over hold_confirm_s, within hold_confirm_timeout_s; else a failed hold.
    Setting('hold_confirm_speed_rad_s', 0.02, 'a held arm\'s joints are slower than this (rad/s)', 0.0, 10.0,
            low_open=True),
    Setting('hold_confirm_s', 0.2, 'for this long, to confirm a hold (s)', 0.0, 60.0),
    Setting('hold_confirm_timeout_s', 2.0, 'a hold not confirmed within this failed (s)', 0.0, 600.0, low_open=True),
    # The monitor watched over DDS (a multi-process launch): once heard, a monitor whose status says it
    # is not active, or that stays silent longer than the limit, is a fail-safe condition.
    Setting('monitor_status_topic', 'status', 'the monitor\'s status topic watched (empty: not watched)'),
    Setting('monitor_status_limit_s', 3.0, 'a monitor silent this long is a fail-safe pause (s)', 0.0, 600.0,
            low_open=True),
    # A monitor or grounding never heard at all (its configure failed, its process never started)
    # watches nothing: a fail-safe condition once this long has passed since activation.
    Setting('startup_limit_s', 30.0, 'a watched node never heard this long after activation is a fail-safe '
                                     'pause (s)', 0.0, 3600.0, low_open=True),
    # The monitor's service listing the violations open now, asked on activation: a supervisor
    # (re)started after they opened heard none of their events.
    Setting('monitor_open_violations_service', 'monitor/open_violations',
            'the monitor\'s service listing open violations, asked on activation (empty: not asked)'),
)
"""The supervisor node's parameters."""


GROUNDING: tuple[Setting, ...] = (
    Setting('config', '', 'the robot configuration (YAML) this grounding reads (required)'),
    # 0 is "not given": the grounding publishes on each input only; a rate given is a frame rate (RATE_HZ).
    Setting('rate_hz', 0.0, 'also publish at this rate (Hz; 0: on each input only)', 0.0, MAX_RATE_HZ),
    # Each node declares its own default: predicates/<its source> (joint_states, contacts, tf, ...).
    Setting('output_topic', 'predicates/<source>', 'the PredicateArray topic it publishes'),
    Setting('publish_on_input', True, 'publish as each input arrives'),
    Setting('sampled_by_monitor', False, 'the monitor of this process samples it at each frame (safemanip run)'),
    Setting('input_reliability', 'best_effort', 'QoS reliability of its input subscriptions (best_effort or '
                                                'reliable)'),
)
"""Every grounding node's parameters."""

CONTACT_GROUNDING: tuple[Setting, ...] = (
    Setting('wrench_topic', '', 'the WrenchStamped topic of the wrist force/torque sensor (empty: the '
                                'configuration\'s)'),
)
"""The contact grounding node's parameters besides :data:`GROUNDING`."""

TF_GROUNDING: tuple[Setting, ...] = (
    Setting('grasp_topic', 'predicates/contacts', 'the PredicateArray topic whose grasp predicates say what is held'),
    Setting('skills_topic', 'predicates/skills', 'the PredicateArray topic that names a running pick\'s target'),
)
"""The TF grounding node's parameters besides :data:`GROUNDING`."""

BAG_PLAYER: tuple[Setting, ...] = (
    Setting('bag', '', 'the recording to play (a rosbag2 folder or file; required)'),
    Setting('topics', [''], 'play only these topics (empty: all)'),
    Setting('rate', 1.0, 'bag time per wall time', 1e-3, 1e3),
    Setting('wait_for_subscribers', 0, 'wait for this many subscribers on the first topic before playing',
            0, 1000),
    Setting('wait_timeout_s', 30.0, 'play after this long even without them (s)', 0.0, 86400.0),
    Setting('clock', False, 'publish /clock from the bag\'s time (use_sim_time subscribers follow it)'),
)
"""The bag player's parameters."""

TRACE_PLAYER: tuple[Setting, ...] = (
    Setting('trace_file', '', 'the predicate trace to play (JSON lines; required)'),
    RATE_HZ,
    Setting('topic', 'predicates', 'the PredicateArray topic it publishes'),
    Setting('source', 'trace_player', 'the source named in each message'),
    Setting('loop', False, 'start again at the end'),
    Setting('wait_for_subscribers', 0, 'wait for this many subscribers before playing', 0, 1000),
)
"""The trace player's parameters."""

DEFAULT_RECORD = ['predicates:safemanip_ros/msg/PredicateArray',
                  'predicates/joint_states:safemanip_ros/msg/PredicateArray',
                  'predicates/contacts:safemanip_ros/msg/PredicateArray',
                  'predicates/tf:safemanip_ros/msg/PredicateArray',
                  'predicates/camera:safemanip_ros/msg/PredicateArray',
                  'predicates/skills:safemanip_ros/msg/PredicateArray',
                  'verdicts:safemanip_ros/msg/VerdictArray', 'violations:safemanip_ros/msg/ViolationEvent',
                  'metrics:safemanip_ros/msg/MonitorMetrics', 'status:safemanip_ros/msg/MonitorStatus',
                  'supervisor_actions:safemanip_ros/msg/SupervisorAction']
"""What the recorder records by default: the monitor's and supervisor's outputs and every predicate topic."""

RECORDER: tuple[Setting, ...] = (
    Setting('bag_path', '', 'the recording\'s folder (empty: bags/safemanip_<time>)'),
    Setting('bag_storage', 'mcap', 'rosbag2 storage (mcap or sqlite3)'),
    Setting('split_s', 0.75, 'a new file of the recording this often, each one complete once closed (s)', 0.0,
            3600.0, low_open=True, high_open=True),
    Setting('queue_size', 10000, 'messages waiting for the writer thread before the oldest are dropped', 1,
            10_000_000),
    Setting('record_topics', DEFAULT_RECORD, 'topic:package/msg/Type entries recorded'),
    Setting('record_raw_inputs', False, 'also record the robot\'s raw inputs (joint states, TF, contacts)'),
    Setting('suite', '', 'the suite files, kept in the recording\'s metadata'),
    Setting('config', '', 'the robot configuration, kept in the metadata (its skill-event topic is recorded)'),
    Setting('autostart', False, 'configure and activate on start, without a lifecycle manager'),
)
"""The recorder's parameters."""

MAX_DURATION_S = 365 * 86400.0
"""The longest time budget (a year); a timer overflows on absurd ones."""

GATE: tuple[Setting, ...] = (
    Setting('limits', [''], 'NAME=X: the highest acceptable rate X of each property or category (required)'),
    Setting('robots', [''], 'namespaces of the robots whose monitors the gate hears (empty: this one)'),
    Setting('unit', 'trigger', 'what is counted: trigger (each triggered event) or rollout'),
    Setting('alpha', 0.05, 'the error rate of the sequential test', 0.0, 1.0, low_open=True, high_open=True),
    Setting('state_file', '', 'where the gate keeps its state across restarts (empty: not kept)'),
    Setting('max_rollouts', 0, 'decide after this many rollouts at most (0: no budget)', 0, 1_000_000_000),
    Setting('max_duration_s', 0.0, 'decide after this long at most (s; 0: no budget)', 0.0, MAX_DURATION_S),
    Setting('alerts_file', '', 'alert sinks for the decision (YAML with alerts:)'),
    Setting('rebuild_from', [''], 'recordings whose rollouts are counted first (their monitors\' final metrics)'),
)
"""The live deployment gate's parameters."""

SIM_BRIDGE: tuple[Setting, ...] = (
    Setting('task', 'Lift', 'the robosuite task'),
    Setting('fault', 'none', 'the fault injected into the scripted policy'),
    Setting('seed', 0, 'the rollout\'s seed', 0, 2**31 - 1),
    Setting('real_time_factor', 1.0, 'wall time per simulated time (below 1: faster than real time)', 1e-3, 1e3),
    Setting('max_held_s', 2.0, 'a hold longer than this ends the rollout (simulated s)', 0.0, 3600.0),
    Setting('truth_file', '', 'where the rollout\'s labels are written (JSON; empty: not written)'),
    Setting('wait_for_subscribers', 1, 'wait for this many joint-state subscribers before stepping', 0, 1000),
    Setting('camera', '', 'a robosuite camera whose images are published (empty: none)'),
    Setting('camera_every_frames', 5, 'an image every this many control steps', 1, 1000),
    Setting('camera_size_px', 128, 'the images\' width and height (pixels)', 16, 4096),
    Setting('controller_topic', 'joint_trajectory_controller/joint_trajectory',
            'the JointTrajectory topic holds arrive on'),
    Setting('perception', 'truth', 'how object poses reach TF: a perception level of the simulator'),
    Setting('end_episode_service', '', 'the monitor\'s ~/end_episode, called when the rollout is over '
                                       '(empty: not called)'),
    Setting('trajectory_action', 'joint_trajectory_controller/follow_joint_trajectory',
            'the FollowJointTrajectory action it serves'),
)
"""The simulator bridge's parameters."""

FOXGLOVE: tuple[Setting, ...] = (
    Setting('address', '127.0.0.1:8765', 'where the Foxglove WebSocket server listens ([HOST:]PORT; 127.0.0.1: '
                                         'this machine only; port 0: any free one)'),
    Setting('operator_credential_file', '', 'a file holding the operator credential (one line, mode 600): a '
                                            'connection that presents it may act (empty: read-only)'),
    Setting('config', '', 'the robot configuration whose objects are marked when a violation names them'),
    Setting('mcap_path', '', 'also write every channel to this MCAP file (empty: none)'),
    Setting('send_queue_size', 2000, 'messages waiting for the server thread before new ones are dropped', 1,
            1_000_000),
    Setting('monitor_node', 'monitor', 'the monitor whose rollout services (start_episode, end_episode) the operator calls'),
    Setting('supervisor_node', 'supervisor', 'the supervisor whose acknowledge services the operator calls'),
)
"""The Foxglove server node's parameters."""
