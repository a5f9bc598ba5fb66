"""``safemanip run --config ROBOT.yaml``: the whole monitoring stack in one
process (as a ROS 2 component container would), for machines without
``ros2 launch``: the four grounding nodes, the monitor and the supervisor,
all configured and activated, talking over real DDS with any other process;
the recorder beside it in a process of its own (as ``ros2 bag record``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from ..errors import SafemanipError
from ..realtime import DEFAULT_PRIORITY, PRIORITY_RANGE, settle_heap
from ..resources import config_dir
from .options import add_foxglove_options, add_profile, add_suite_options, foxglove_parameters, profile_properties

if TYPE_CHECKING:
    from ..nodes.recorder_process import RecorderProcess

CONFIG = config_dir()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser('run', help='run grounding, monitor and supervisor nodes in one process',
                       description=(__doc__.split('\n\n')[0] if __doc__ else '') +
                       '  ROS arguments follow --ros-args as for any ROS 2 executable, e.g. '
                       '--ros-args -p failsafe_staleness_s:=0.3 --log-level debug; they apply to every node.')
    p.add_argument('--config', required=True, metavar='ROBOT.yaml', help='robot/scene configuration')
    add_suite_options(p, strict='')
    add_profile(p)
    p.add_argument('--policy', default=str(CONFIG / 'params' / 'supervisor_policy.yaml'), metavar='POLICY.yaml',
                   help='the supervisor\'s responses per property and category (default: config/params)')
    p.add_argument('--controller-topic', default='joint_trajectory_controller/joint_trajectory',
                   help='where the supervisor sends its holds (trajectory_msgs/JointTrajectory)')
    p.add_argument('--trajectory-action', default='', metavar='ACTION',
                   help='a hold also cancels every goal of this FollowJointTrajectory (or any) action server, e.g. '
                        '/joint_trajectory_controller/follow_joint_trajectory')
    p.add_argument('--servo-pause-service', default='', metavar='SERVICE',
                   help='a hold also pauses MoveIt Servo through this std_srvs/SetBool service (resume unpauses), '
                        'e.g. /servo_node/pause_servo')
    p.add_argument('--hold-controller', default='', metavar='CONTROLLER',
                   help='a hold also switches ros2_control to this controller (e.g. joint_trajectory_controller, '
                        'which holds the measured position when it activates); resume switches back')
    p.add_argument('--motion-controllers', default=[], nargs='+', metavar='CONTROLLER',
                   help='the controllers --hold-controller replaces (e.g. forward_position_controller)')
    p.add_argument('--switch-controller-service', default='/controller_manager/switch_controller', metavar='SERVICE',
                   help='the controller manager\'s controller_manager_msgs/SwitchController service (default: '
                        '%(default)s)')
    p.add_argument('--bag', metavar='DIR', help='record to this bag (default: bags/safemanip_<time>)')
    p.add_argument('--no-record', action='store_true', help='do not record a bag')
    p.add_argument('--no-supervisor', action='store_true', help='monitor only: no pause/retract commands')
    p.add_argument('--no-camera', action='store_true', help='skip the camera grounding node')
    p.add_argument('--reliable-inputs', action='store_true',
                   help='subscribe joint states, TF and contacts reliably (publishers that are reliable, e.g. '
                        'ros2_control or a simulator: nothing is lost on a busy machine); default best effort')
    p.add_argument('--realtime', nargs='?', type=int, const=DEFAULT_PRIORITY, metavar='PRIORITY',
                   help=f'run the control path (DDS, grounding, monitor, supervisor) under SCHED_FIFO at this '
                        f'priority ({PRIORITY_RANGE[0]}-{PRIORITY_RANGE[1]}, default {DEFAULT_PRIORITY}) with memory '
                        f'locked, where permitted (else one warning); the recorder, a process of its own, stays at '
                        f'normal priority')
    add_foxglove_options(p)
    p.set_defaults(func=run)


OPTION_OF_PARAMETER = {
    'properties': '--properties', 'suite': '--properties', 'only': '--only', 'strict': '--strict',
    'policy_file': '--policy', 'bag_path': '--bag',
}
"""Node parameters ``run`` sets from its own options and reads itself.  A ``-p`` of one is refused: it would
reach the nodes while what ``run`` printed, checked or recorded (the instances monitored, the policy's names,
the bag) came from the option — or, given an empty list, not reach them at all.  (A ``-p`` of the others, such
as ``config`` or ``controller_topic``, reaches the nodes, which check it as any node parameter.)"""


def _check_no_option_parameter(ros_args: list[str]) -> None:
    for flag, value in zip(ros_args, ros_args[1:]):
        if flag in ('-p', '--param'):
            name = value.split(':=', 1)[0].rsplit(':', 1)[-1]
            if name in OPTION_OF_PARAMETER:
                raise SafemanipError(f'-p {value}: safemanip run sets parameter {name} from its option '
                                     f'{OPTION_OF_PARAMETER[name]}; give that instead')


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    _check_no_option_parameter(list(getattr(args, 'ros_args', []) or []))
    from ..grounding.config import load_robot_config
    from ..monitor.build import build_instances
    from ..ros_names import optional_topic_problem
    for option, name in (('--controller-topic', args.controller_topic), ('--trajectory-action', args.trajectory_action),
                         ('--servo-pause-service', args.servo_pause_service),
                         ('--switch-controller-service', args.switch_controller_service)):
        problem = optional_topic_problem(name)
        if problem:
            raise SafemanipError(f'{option} {problem}')
    robot = load_robot_config(args.config)   # fail early, with the file's error, before starting DDS
    properties = profile_properties(args)
    instances = build_instances(properties, robot_config=args.config, only=args.only, strict=args.strict)
    if not args.no_supervisor and args.policy:
        _check_policy_names(args.policy, properties)
    print(f'safemanip run: {len(instances.instances)} property instances monitored; '
          f'{len(instances.unsupported)} unsupported (not run):', flush=True)
    for inst, missing in sorted(instances.unsupported.items()):
        print(f'  {inst}: nothing in {args.config} grounds {", ".join(missing)}', flush=True)
    overrides = {
        'config': args.config, 'robot_config': args.config, 'properties': properties,
        'only': args.only or [''], 'strict': args.strict, 'policy_file': args.policy, 'controller_topic': args.controller_topic,
        'trajectory_action': args.trajectory_action, 'servo_pause_service': args.servo_pause_service,
        'switch_controller_service': args.switch_controller_service if args.hold_controller or
        args.motion_controllers else '',
        'hold_controller': args.hold_controller, 'motion_controllers': args.motion_controllers or [''],
        'bag_path': args.bag or '', 'suite': ','.join(properties),
        'joints': robot.joints.arm_joints,   # the supervisor holds and retracts the arm joints
        'sampled_by_monitor': True,          # grounding sampled on the monitor's frame clock: one hop
        'input_reliability': 'reliable' if args.reliable_inputs else 'best_effort',
        # One process: the supervisor watches the monitor's executor itself (WatchdogThread), not its status
        # topic, and is handed every event in-process from the first frame (nothing to ask the monitor for).
        'monitor_status_topic': '',
        'monitor_open_violations_service': '',
        **foxglove_parameters(args),
    }
    # Ours first, the user's --ros-args after: a -p given on the command line
    # (failsafe_staleness_s:=0.3, ...) overrides ours for every node.
    ros_args = ['--ros-args'] + [a for k, v in overrides.items() for a in ('-p', _param(k, v))] \
        + list(getattr(args, 'ros_args', []) or [])
    recorder = None
    if not args.no_record:
        from ..nodes.recorder_process import RecorderProcess
        # Before --realtime: a child inherits its parent's scheduling, and the bag writer is not on the control path.
        recorder = RecorderProcess.start(ros_args, on_early_exit=_recorder_ended)
    try:
        if args.realtime is not None:
            _realtime(args.realtime)       # before any ROS thread exists: they inherit the policy
        _run_stack(args, robot, ros_args, recorder, claimed=set(overrides))
    except BaseException:
        if recorder is not None:
            recorder.discard()             # our error is the one line: not the recorder's output too
        raise
    if recorder is None:
        return 0
    if recorder.ended_early is not None:
        return 1        # said when it happened (_recorder_ended)
    if recorder.proc.returncode != 0:
        print(f'safemanip run: error: the recorder process exited with {recorder.proc.returncode} while closing '
              f'its bag (its output is above)', file=sys.stderr, flush=True)
        return 1
    return 0


def _check_policy_names(policy_file: str, properties: list[str]) -> None:
    """The policy's property and category names against the monitored suites:
    a misspelt name never matches, and its property gets the weaker severity default."""
    from ..spec.suite import load_suite
    from ..spec.yamlio import load_yaml
    from ..supervisor.policy import ResponsePolicy
    policy = ResponsePolicy.from_mapping(load_yaml(policy_file) or {}, f'{policy_file}:1')
    policy.check_against(load_suite(properties), policy_file)


def _recorder_ended(code: int) -> None:
    """The recorder process ended before it was stopped: said at once (the
    stack keeps monitoring and holding; only the bag stops), and the run
    exits 1."""
    print(f'safemanip run: error: the recorder process ended (exit {code}); monitoring goes on without '
          f'recording', file=sys.stderr, flush=True)


def _run_stack(args: argparse.Namespace, robot: Any, ros_args: list[str], recorder: RecorderProcess | None,
               claimed: set[str]) -> None:
    """The stack in this process; ``claimed``: the parameters ``run`` gives every node itself (some are for a
    node not started: the supervisor under --no-supervisor)."""
    import rclpy

    from ..nodes.executor_ledger import LedgerExecutor
    from ..nodes.grounding_nodes import (
        CameraGroundingNode,
        ContactGroundingNode,
        GroundingChain,
        JointStateGroundingNode,
        SkillGroundingNode,
        TfGroundingNode,
    )
    from ..nodes.guard import created
    from ..nodes.monitor_node import MonitorNode
    from ..nodes.runner import (
        SideThread,
        WatchdogThread,
        bring_up,
        initialised,
        past_shutdown,
        spin_until_shutdown,
        wait_acked,
    )
    from ..nodes.supervisor_node import SupervisorNode

    # Ctrl-C and SIGTERM stop the spin; what was published reaches the recorder, which is then stopped
    # and closes its bag (the recorder's session is its own: a terminal's Ctrl-C reaches only us).
    with initialised(ros_args) as stop:
        nodes = []
        watchdog = None
        publishers: list[Any] = []
        failed = False
        side_threads: list[Any] = []
        try:
            # The grounding in the order each hands its values on (skills name the pick target TF judges).
            factories = [JointStateGroundingNode, ContactGroundingNode] + \
                ([SkillGroundingNode] if robot.skills.topic else []) + [TfGroundingNode] + \
                ([] if args.no_camera else [CameraGroundingNode]) + [MonitorNode] + \
                ([] if args.no_supervisor else [SupervisorNode])   # recorded with or without the supervisor
            for factory in factories:
                nodes.append(created(factory, factory.__name__))    # a name from a parameter ROS refuses: exit 2
            from ..nodes.params import unclaimed_parameters
            from ..settings import RECORDER
            unclaimed = unclaimed_parameters(nodes, claimed | {s.name for s in RECORDER})
            if unclaimed:       # a misspelt -p would run the stack with that parameter's default
                raise SafemanipError('; '.join(unclaimed))
            if args.foxglove:
                from ..nodes.foxglove_node import FoxgloveNode
                nodes.append(created(FoxgloveNode, 'foxglove'))
            monitor = next(n for n in nodes if isinstance(n, MonitorNode))
            monitor.attach_grounding(GroundingChain(n for n in nodes if getattr(n, 'sampled_by_monitor', False)))
            monitor.attach_listeners([n for n in nodes if isinstance(n, SupervisorNode)])
            lifecycle = [n for n in nodes if hasattr(n, 'trigger_configure')]
            for node in lifecycle:      # any that does not come up stops the run (exit 2, its reason)
                bring_up(node, ('configure',))
            publishers = [p for n in nodes for p in n.publishers]
            if recorder is not None:
                # Activated only once the recorder and every publisher it records have matched
                # each other: the bag holds the first frame on.
                if recorder.wait_matched(publishers, cancelled=stop.is_set) is None:
                    return                    # Ctrl-C while starting: stopped below, its bag closed
                recorder.release()
            for node in lifecycle:
                bring_up(node, ('activate',))
            settle_heap()
            # Grounding and monitor share one executor: rclpy's MultiThreadedExecutor
            # starved subscriptions here (joint states arrived 0.9 s late under
            # recording load), and Python callbacks share the GIL anyway.  The
            # supervisor spins on a thread of its own: its watchdog judges the
            # sensors by their arrival and the main executor by its heartbeat, and
            # neither waits for a stalled grounding or monitor turn.
            executor = LedgerExecutor()      # late ticks say what the thread did (executor_ledger.py)
            supervisors = [n for n in nodes if isinstance(n, SupervisorNode)]
            # The Foxglove server's node spins on a thread of its own: a client's load stays off the frames.
            aside = [n for n in nodes if n.get_name() == 'foxglove']
            for node in nodes:
                if node not in supervisors and node not in aside:
                    executor.add_node(node)
            for node in aside:
                side_threads.append(SideThread(node).start())
                print(f'safemanip run: Foxglove at {node.server.address} (Foxglove: Open connection, Foxglove '
                      f'WebSocket; layout: {CONFIG / "foxglove" / "safemanip.json"})', flush=True)
            watchdog = WatchdogThread(supervisors[0], monitor, 'the grounding/monitor executor').start() \
                if supervisors else None
            names = [n.get_name() for n in nodes] + ([] if recorder is None else ['recorder (its own process)'])
            print(f'safemanip run: {len(names)} nodes up ({", ".join(names)}); Ctrl-C to stop', flush=True)
            _look_for_others(monitor, nodes, supervisors)
            spin_until_shutdown(executor, stop)
        except BaseException:
            failed = True                     # the recorder is discarded by run(): our error is the one line
            raise
        finally:
            if watchdog is not None:
                watchdog.stop()
            for side in side_threads:
                side.stop()
            if recorder is not None and not failed:
                if nodes and nodes[-1].context.ok():
                    wait_acked(publishers)    # the last moments are in the recorder's hands
                recorder.stop()               # it takes what was delivered, lists every split
            for node in nodes:
                past_shutdown(node.destroy_node)
            past_shutdown(rclpy.try_shutdown)


NEIGHBOURS_AFTER_S = (2.0, 5.0, 10.0, 30.0)
"""When the graph is asked for another stack on the domain (seconds after start): discovery takes longer
on a busy machine, so it is asked again until one answers or the last time has passed."""


def _look_for_others(monitor: Any, nodes: list[Any], supervisors: list[Any]) -> None:
    """Warn once, shortly after start, when another monitor or supervisor (or
    another publisher of our holds) answers on this DDS domain."""
    import time

    from rclpy.clock import Clock
    from rclpy.clock_type import ClockType

    from ..nodes.neighbours import others_on_domain
    ours = [(n.get_name(), n.get_namespace()) for n in nodes
            if n.get_name() in ('monitor', 'supervisor')]
    hold = supervisors[0].resolve_topic_name(supervisors[0].get_parameter('controller_topic').value) \
        if supervisors else None
    started = time.monotonic()
    due = list(NEIGHBOURS_AFTER_S)
    timer: list[Any] = []

    def look() -> None:       # on the monitor's executor, off its frame timer
        if not due or time.monotonic() - started < due[0]:
            return
        due.pop(0)
        warning = others_on_domain(monitor, ours, hold)
        if warning or not due:
            timer[0].cancel()
        if warning:
            print(f'safemanip run: warning: {warning}', flush=True)
    # On the steady clock: a simulation's /clock, paused or not, does not decide when discovery has settled.
    timer.append(monitor.create_timer(1.0, look, clock=Clock(clock_type=ClockType.STEADY_TIME)))


def _realtime(priority: int) -> None:
    from ..realtime import announce, enable_realtime
    try:
        state = enable_realtime(priority)
    except ValueError as exc:
        raise SafemanipError(f'--realtime: {exc}') from None
    announce(state, 'safemanip run', '--realtime')


def _param(key: str, value: object) -> str:
    if isinstance(value, bool):
        return f'{key}:={str(value).lower()}'
    if isinstance(value, list):
        return f'{key}:=[{", ".join(repr(v) for v in value)}]'
    return f"{key}:={value!r}" if value == '' else f'{key}:={value}'
