"""``safemanip doctor --config ROBOT.yaml [BAG | --live]``: check every
name of a robot configuration (joints, frames, contact bodies, topics)
against a bag or the live ROS graph; list what matches nothing, what the
robot publishes that the configuration does not map, the predicates the
configuration grounds and the properties it cannot ground.  Exit 0 when
everything matches, 1 on a mismatch, 2 on bad input."""

from __future__ import annotations

import argparse
import os
import time
from typing import TYPE_CHECKING

from ..errors import SafemanipError
from ..resources import default_suites
from .options import add_suite_options

if TYPE_CHECKING:
    from ..grounding.names import ObservedNames


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser('doctor', help='check a robot configuration\'s names against a bag or the live graph',
                       description=__doc__.split('\n\n')[0].split(': ', 1)[1] if __doc__ else None)
    p.add_argument('--config', required=True, metavar='ROBOT.yaml', help='the robot configuration to check')
    p.add_argument('bag', nargs='?', metavar='BAG', help='a rosbag2 bag holding the raw inputs')
    p.add_argument('--live', action='store_true', help='listen to the live graph instead of reading a bag')
    p.add_argument('--listen-s', type=float, default=3.0, help='--live: how long to listen (seconds)')
    add_suite_options(p, only=False)
    p.set_defaults(func=run)


def _listen(seconds: float) -> ObservedNames:
    from ..grounding.names import ObservedNames
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    import rclpy
    from sensor_msgs.msg import JointState
    from tf2_msgs.msg import TFMessage

    from safemanip_ros.msg import ContactArray

    from ..nodes.qos import SENSORS, STATIC_TF
    rclpy.init()
    seen = ObservedNames()
    try:
        node = rclpy.create_node('safemanip_doctor')
        for topic, kind, qos in (('/joint_states', JointState, SENSORS), ('/tf', TFMessage, 100),
                                 ('/tf_static', TFMessage, STATIC_TF), ('/contacts', ContactArray, SENSORS)):
            node.create_subscription(kind, topic, lambda msg, t=topic: seen.add_message(t, msg), qos)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
        seen.topics = {name: types[0] for name, types in node.get_topic_names_and_types()}
        # A topic is an input only if something arrived on it.
        if not seen.joints:
            seen.topics.pop('/joint_states', None)
        if not seen.frames:
            seen.topics.pop('/tf', None)
            seen.topics.pop('/tf_static', None)
        if not seen.contact_messages:
            seen.topics.pop('/contacts', None)
        node.destroy_node()
    finally:
        rclpy.try_shutdown()
    return seen


def run(args: argparse.Namespace) -> int:
    from ..grounding.catalog import grounded_predicates
    from ..grounding.config import load_robot_config
    from ..grounding.names import ObservedNames, check_names
    from ..monitor.build import build_instances
    if bool(args.bag) == bool(args.live):
        raise SafemanipError('give a BAG or --live (one of them)')
    cfg = load_robot_config(args.config)
    seen = _listen(args.listen_s) if args.live else ObservedNames.from_bag(args.bag)
    suites = args.properties or [str(p) for p in default_suites()]
    iset = build_instances(suites, robot_config=args.config)
    report = check_names(cfg, seen, iset.unsupported, sorted(grounded_predicates(cfg)))
    source = f'the live graph ({args.listen_s:g} s)' if args.live else args.bag
    print(f'doctor: {args.config} against {source}')
    print(f'  inputs: {len(seen.joints)} joints, {len(seen.frames)} TF frames, {len(seen.contact_bodies)} contact '
          f'bodies on {", ".join(sorted(t for t in seen.topics if not t.startswith("/rosout"))) or "no topics"}')
    for f in report.mismatches:
        print(f'  MISMATCH {f.kind} {f.name!r} ({f.where}): {f.problem}')
    by_field: dict[str, list[str]] = {}
    for f in report.warnings:
        by_field.setdefault(f'{f.where}: {f.problem}', []).append(f.name)
    for where, names in sorted(by_field.items()):
        print(f'  note     {where}: {", ".join(names)}')
    print(f'  grounds {len(report.grounded)} predicates; runs {len(iset.instances)} property instances; '
          f'{len(report.unsupported)} unsupported (not run):')
    for inst, missing in sorted(report.unsupported.items()):
        print(f'    {inst}: needs {", ".join(missing)}')
    poses_ok = True
    if args.bag and cfg.tf.objects:
        from ..grounding.pose_quality import assess_bag
        for q in assess_bag(args.bag, sorted(set(cfg.tf.objects.values())), cfg.tf.track):
            noise = '-' if q.noise_m is None else f'{q.noise_m * 1000:.1f} mm ({q.still_windows} still windows)'
            latency = '-' if q.latency_s is None else f'{q.latency_s:.2f} s'
            share = '-' if q.outlier_share is None else f'{q.outlier_share:.1%}'
            correlated = '-' if q.correlation_s is None else f'{q.correlation_s:.2f} s'
            print(f'  poses    {q.frame}: {q.detections} at {q.rate_hz:.1f} Hz, 95 % of gaps under {q.longest_gap_s:.2f} s, '
                  f'late by {latency}, noise {noise}, gross outliers {share}, error correlated over {correlated}')
            for problem in q.problems:
                print(f'  POSES    {q.frame}: {problem}')
            poses_ok &= not q.problems
    print('doctor: ' + ('every configured name matches' if report.ok else f'{len(report.mismatches)} mismatch(es)')
          + ('' if poses_ok else '; a pose source does not fit the perception thresholds'))
    return 0 if report.ok and poses_ok else 1
