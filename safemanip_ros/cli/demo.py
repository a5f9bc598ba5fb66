"""``safemanip demo``: the end-to-end path that exists today.

A scripted pick-and-place rollout (nominal and with injected faults) is
published as ``safemanip_ros/PredicateArray`` messages over real DDS by one
rclpy node and monitored by another, which runs the SafeManip property suite
(devices, DFAs, violation episodes with recovery) on every received frame.
The demo checks that every injected violation is caught at its expected
frame and that the nominal run raises no alarm, and exits non-zero
otherwise.  Without rclpy (a pip install with no ROS) it runs the same frames
through the same monitor offline and says so.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from ..monitor.build import build_instances
from ..monitor.core import Monitor
from ..resources import config_dir
from ..sim.scripted import DEMO_PROPERTIES, ENTITY, FAULTS, pick_and_place

CONFIG = config_dir()



def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from . import demo_physics
    p = sub.add_parser('demo', help='physics-simulated rollouts watched live by the whole stack, then audited '
                                    '(--scripted: fast predicate-level rollouts, no physics)',
                       description=(demo_physics.__doc__ or '').split('\n\n')[0] + '  With --scripted: ' +
                       (__doc__.split('\n\n')[1] if __doc__ else ''))
    p.add_argument('--scripted', action='store_true', help='the fast scripted demo (no physics, nothing recorded)')
    p.add_argument('--offline', action='store_true', help='--scripted: skip ROS 2 / DDS even where rclpy is available')
    p.add_argument('--timeout-s', type=float, default=20.0, help='--scripted: DDS delivery timeout per rollout (s)')
    demo_physics.register_options(p)
    p.set_defaults(func=dispatch)


def dispatch(args: argparse.Namespace) -> int:
    if args.scripted:
        return run(args)
    if args.canary:
        from . import demo_canary
        return demo_canary.run(args)
    from . import demo_physics
    return demo_physics.run(args)


def _monitor(rollout_frames: list[dict[str, bool]], monitor: Monitor) -> dict[str, list[tuple[int, int, bool]]]:
    """Run the frames live (one step each); property → rollouts."""
    monitor.reset()
    for frame in rollout_frames:
        monitor.step(np.array([frame.get(p, False) for p in monitor.predicates], dtype=bool),
                     np.array([p not in frame for p in monitor.predicates], dtype=bool))
    result = monitor.finish()[0]
    assert result is not None       # finish() without a mask ends every rollout
    return {r.name: [(e.start, e.end, e.recovered) for e in r.episodes] for r in result.instances}


def _deliver_over_dds(frames: list[dict[str, bool]], timeout_s: float) -> list[dict[str, bool]]:
    """Publish frames from one node, receive them in another; return what arrived."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from safemanip_ros.msg import PredicateArray

    from ..nodes.conversions import predicate_array, predicate_values
    from ..nodes.qos import reliable

    # Discovery stays on this machine unless the user chose otherwise.
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    qos = reliable(len(frames) + 10)
    context = rclpy.Context()
    rclpy.init(context=context)
    received: list[dict[str, bool]] = []
    try:
        pub_node = rclpy.create_node('scripted_rollout', context=context)
        sub_node = rclpy.create_node('demo_monitor', context=context)
        topic = '/safemanip/demo/predicates'
        pub = pub_node.create_publisher(PredicateArray, topic, qos)
        sub_node.create_subscription(
            PredicateArray, topic,
            lambda msg: received.append({k: bool(v) for k, v in predicate_values(msg).items()}), qos)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(pub_node)
        executor.add_node(sub_node)
        deadline = time.monotonic() + timeout_s
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        period_ns = int(1e9 / 20.0)
        for t, frame in enumerate(frames):
            pub.publish(predicate_array(frame, t * period_ns, source='scripted', seq=t))
            executor.spin_once(timeout_sec=0.0)
        while len(received) < len(frames) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        executor.shutdown()
        pub_node.destroy_node()
        sub_node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
    return received


def build_monitor() -> Monitor:
    return Monitor(build_instances([CONFIG / 'properties' / 'safemanip.yaml'], entities={ENTITY: 'mug'},
                                   only=list(DEMO_PROPERTIES)))


def run(args: argparse.Namespace) -> int:
    monitor = build_monitor()
    use_dds = not args.offline
    if use_dds:
        try:
            import rclpy  # noqa: F401

            import safemanip_ros.msg  # noqa: F401
        except ImportError as err:
            print(f'demo: rclpy or safemanip_ros.msg not importable ({err}); running offline')
            use_dds = False
    print(f"safemanip demo: SafeManip properties over scripted pick-and-place rollouts at 20 Hz "
          f"({'published over Fast DDS between two rclpy nodes' if use_dds else 'offline'})")
    for inst in monitor.instances:
        print(f'  {inst.instance:50s} {inst.formula}')
    failures = 0
    print(f"\n{'fault':14s} {'property':36s} {'expected':>8s} {'caught':>7s}  rollouts [start,end,recovered]  result")
    for fault, text in FAULTS.items():
        rollout = pick_and_place(fault)
        frames = rollout.frames
        if use_dds:
            frames = _deliver_over_dds(rollout.frames, args.timeout_s)
            if frames != rollout.frames:
                print(f'{fault:14s} DDS delivered {len(frames)}/{len(rollout.frames)} frames intact: FAIL')
                failures += 1
                continue
        rollouts = _monitor(frames, monitor)
        for name in DEMO_PROPERTIES:
            want = rollout.expected_violation_frames.get(name)
            got = rollouts[name][0][0] if rollouts[name] else None
            ok = want == got
            failures += not ok
            verdict = 'ok' if ok else ('MISSED' if got is None else ('FALSE ALARM' if want is None else 'WRONG FRAME'))
            eps = ' '.join(f"[{a},{b},{'y' if r else 'n'}]" for a, b, r in rollouts[name]) or '-'
            print(f"{fault:14s} {name:36s} {('-' if want is None else want):>8} {('-' if got is None else got):>7}  "
                  f'{eps:30s}  {verdict}')
    print(f"\n{'all injected violations caught at their frame, no false alarms' if not failures else f'{failures} mismatches'}")
    return 0 if failures == 0 else 1
