"""The parts of a live monitor frame at 100 Hz with the soak's generated
suite (bench_soak.py; 1,000 instances), each timed in one process on a
configured MonitorNode, beside the way each was done before:

* the running metrics: encoded as bytes (``nodes/metrics_wire.py``),
  against every instance's ``PropertyMetrics`` message updated in place
  and converted by rclpy (the way before), both published;
* the status: the violated count read from the monitor, against a snapshot
  of every count (the way before);
* a burst of violation events (the soak's frames open or close hundreds at
  once), published to a subscriber in another process as the recorder is:
  encoded as bytes (``nodes/event_wire.py``), against each instance's
  message updated in place and converted by rclpy (the way before); and
  the burst's one log line, written after the frame's outputs;
* the verdicts, every instance and the soak's burst of changed ones,
  published: encoded as bytes (``nodes/verdict_wire.py``), against each
  instance's ``Verdict`` message updated in place and converted by rclpy
  (the way before);
* the predicates of the demo robot's grounding sources
  (``config/robots/panda_demo.yaml``), published each frame as
  ``safemanip run`` samples them:
  encoded as bytes (``nodes/predicate_wire.py``), against a
  ``PredicateArray`` of ``Predicate`` messages made and converted by rclpy
  (the way before);
* diagnostics and one ``Monitor.step`` for scale.

    python bench/bench_monitor_frame.py            # 1,000 instances
    python bench/bench_monitor_frame.py --quick    # 200 (smoke test)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')

from bench_soak import generated_suite  # noqa: E402  (beside this script)

# A subscriber of the events, verdicts and predicates (of argv[1] sources) in a process of its own, as the
# recorder of `safemanip run` is.
SUBSCRIBER = """
import sys
import rclpy
from safemanip_ros.msg import PredicateArray, VerdictArray, ViolationEvent
from safemanip_ros.nodes.qos import RECORDED_EVENTS, RECORDING, RELIABLE
from rclpy.executors import ExternalShutdownException
rclpy.init()
node = rclpy.create_node('bench_event_subscriber')
node.create_subscription(ViolationEvent, 'violations', lambda msg: None, RECORDED_EVENTS)
node.create_subscription(VerdictArray, 'verdicts', lambda msg: None, RECORDING)
for source in range(int(sys.argv[1])):
    node.create_subscription(PredicateArray, f'bench_predicates_{source}', lambda msg: None, RELIABLE)
try:
    rclpy.spin(node)
except (KeyboardInterrupt, ExternalShutdownException):
    pass
"""
BURST_EVENTS = 500
BURST_VERDICTS = 200      # the soak's frames change about this many verdicts at once


def _median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--instances', type=int, default=1000)
    ap.add_argument('--quick', action='store_true', help='200 instances')
    args = ap.parse_args()
    instances = 200 if args.quick else args.instances

    import numpy as np
    import rclpy
    from rclpy.parameter import Parameter

    from safemanip_ros.grounding.catalog import predicate_catalog
    from safemanip_ros.grounding.config import load_robot_config
    from safemanip_ros.monitor.core import EpisodeEvent
    from safemanip_ros.msg import PredicateArray, PropertyMetrics, Verdict, VerdictArray, ViolationEvent
    from safemanip_ros.nodes.conversions import predicate_array, set_time_ns
    from safemanip_ros.nodes.monitor_node import MonitorNode
    from safemanip_ros.nodes.predicate_wire import PredicateArrayWire
    from safemanip_ros.nodes.qos import RELIABLE

    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp) / 'suite.yaml'
        generated_suite(suite, instances)
        rclpy.init()
        node = MonitorNode()
        node.set_parameters([Parameter('properties', value=[str(suite)]), Parameter('rate_hz', value=100.0),
                             Parameter('scene', value=str(REPO / 'config' / 'scenes' / 'kitchen_demo.yaml'))])
        node.trigger_configure()
        node.trigger_activate()
    mon = node.monitor
    assert mon is not None
    P = len(mon.predicates)
    frames = np.random.default_rng(0).random((400, P)) < 0.3
    no_unknown = np.zeros(P, bool)
    k = [0]

    def step() -> None:
        k[0] += 1
        mon.step(frames[k[0] % len(frames)], no_unknown)

    step_ms = _median_ms(step, 400)
    res = mon.step(frames[0], no_unknown)

    labels, violated, recs = res.verdicts[0], res.violated[0], res.recovery_verdicts[0]

    node._verdict_codes = None
    node._verdicts(0, 1, labels, violated, recs, 0)
    codes = node._verdict_codes.copy()

    def verdicts(which: list[int] | None) -> None:
        """Every instance (``which`` None) or the given ones (their last published codes made to
        differ), as bytes."""
        node._verdict_codes = None if which is None else codes.copy()
        if which is not None:
            node._verdict_codes[which] = -1
        node._verdicts_full_ns = 0
        node._pub_verdicts.publish(node._verdicts(0, 1, labels, violated, recs, 0))

    verdict_msgs = [Verdict(property=i.property, instance=i.instance) for i in mon.instances]

    def verdicts_in_place(which: list[int] | None) -> None:   # the way before: messages updated, rclpy converts
        labels_l, violated_l, rec_l = labels.tolist(), violated.tolist(), recs.tolist()
        out = VerdictArray(frame=1, episode_id='bench')
        for d in range(len(verdict_msgs)) if which is None else which:
            msg = verdict_msgs[d]
            msg.frame, msg.verdict, msg.recovery_verdict = 1, labels_l[d], rec_l[d]
            msg.mode = Verdict.MODE_VIOLATED if violated_l[d] else Verdict.MODE_WATCHING
            out.verdicts.append(msg)
        node._pub_verdicts.publish(out)

    in_place = [PropertyMetrics(property=i.property, instance=i.instance, category=i.category)
                for i in mon.instances]

    def metrics_in_place() -> None:  # the way before: the messages' counts updated, rclpy converts them
        frames = int(mon.frames[0])
        for m, n, v, u, k in zip(in_place, mon.triggers[:, 0].tolist(), mon.violations[:, 0].tolist(),
                                 mon.unsafe[:, 0].tolist(), mon.unknown_inst[:, 0].tolist()):
            m.triggers, m.violations, m.unsafe_frames, m.frames, m.unknown_frames = n, v, u, frames, k
        msg = node._pub_metrics.msg_type(episode_id='bench', frames=frames)
        msg.properties = in_place
        node._pub_metrics.publish(msg)

    burst = min(BURST_EVENTS, len(mon.instances))

    def events_as_bytes() -> None:
        for d in range(burst):
            node._publish_event(ViolationEvent.EVENT_CLOSED, d, 1, 1, True, 10**9)
        node._release_closings(None)      # all of them now: the whole burst is timed, not a frame's share

    def events_in_place() -> None:   # the way before: each instance's message updated, rclpy converts it
        for d in range(burst):
            msg = node._event_msgs[d]
            msg.event, msg.episode_id, msg.start_frame, msg.end_frame = ViolationEvent.EVENT_CLOSED, 'bench', 1, 1
            msg.recovered, msg.count = True, 1
            for stamp in (msg.header.stamp, msg.start_stamp, msg.end_stamp):
                set_time_ns(stamp, 10**9)
            node._pub_events.publish(msg)

    rng = np.random.default_rng(1)
    catalog = predicate_catalog(load_robot_config(REPO / 'config' / 'robots' / 'panda_demo.yaml'))
    sources = sorted({source for source, _, _ in catalog})
    names = [[name for s, name, _ in catalog if s == source] for source in sources]
    predicate_pubs = [node.create_publisher(PredicateArray, f'bench_predicates_{s}', RELIABLE)
                      for s in range(len(sources))]
    wires = [PredicateArrayWire(source) for source in sources]

    def predicate_values() -> list[dict[str, bool | None]]:
        return [{n: (None, False, True)[d] for n, d in zip(group, rng.integers(0, 3, len(group)).tolist())}
                for group in names]     # true, false and unknown alike

    def predicates_as_bytes(values: list[dict[str, bool | None]]) -> None:
        for pub, wire, v in zip(predicate_pubs, wires, values):
            pub.publish(wire.encode(v, 10**9, 1))

    def predicates_as_messages(values: list[dict[str, bool | None]]) -> None:   # the way before
        for pub, source, v in zip(predicate_pubs, sources, values):
            pub.publish(predicate_array(v, 10**9, source, 1))

    # Not on our output: a subscriber outliving the bench would hold the caller's pipe open (a test hung on it).
    subscriber = subprocess.Popen([sys.executable, '-c', SUBSCRIBER, str(len(sources))], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30.0
        while (node._pub_events.get_subscription_count() == 0 or node._pub_verdicts.get_subscription_count() == 0
               or any(pub.get_subscription_count() == 0 for pub in predicate_pubs)):
            if time.monotonic() > deadline or subscriber.poll() is not None:
                raise SystemExit('bench_monitor_frame: the event subscriber did not come up')
            time.sleep(0.05)
        time.sleep(0.5)
        changed = list(range(0, len(labels), max(1, len(labels) // BURST_VERDICTS)))
        verdict_ms = {}
        for name, which in (('all', None), ('burst', changed)):
            # Interleaved, one a frame period, as the frames publish them.
            times: tuple[list[float], list[float]] = ([], [])
            for _ in range(100):
                for fn, out in ((verdicts, times[0]), (verdicts_in_place, times[1])):
                    out.append(_median_ms(lambda: fn(which), 1))
                    time.sleep(0.01)
            verdict_ms[name] = (statistics.median(times[0]), statistics.median(times[1]),
                                max(times[0]), max(times[1]))

        # Interleaved, a burst every 50 ms (a burst frame, then frames without events).
        as_bytes, in_place_times = [], []
        for _ in range(20):
            for fn, out in ((events_as_bytes, as_bytes), (events_in_place, in_place_times)):
                out.append(_median_ms(fn, 1))
                time.sleep(0.05)
        burst_ms, burst_before_ms = statistics.median(as_bytes), statistics.median(in_place_times)

        # Interleaved, one a frame period, each with the frame's own values.
        predicate_times: tuple[list[float], list[float]] = ([], [])
        for _ in range(200):
            values = predicate_values()
            for fn, out in ((predicates_as_bytes, predicate_times[0]), (predicates_as_messages, predicate_times[1])):
                out.append(_median_ms(lambda: fn(values), 1))
                time.sleep(0.01)
        predicates_ms = [statistics.median(t) for t in predicate_times]
    finally:
        subscriber.terminate()
        try:
            subscriber.wait(10)
        except subprocess.TimeoutExpired:     # a SIGTERM rclpy did not act on: never left running
            subscriber.kill()
            subscriber.wait(10)
    metrics_ms = _median_ms(lambda: node._publish_metrics(None, 0), 50)
    metrics_before_ms = _median_ms(metrics_in_place, 50)
    status_ms = _median_ms(lambda: node._publish_status(0), 50)
    snapshot_count_ms = _median_ms(lambda: mon.snapshot(0).violated_count, 50)
    direct_count_ms = _median_ms(lambda: int(mon.violated[:, 0].sum()), 50)
    diag_ms = _median_ms(lambda: node._publish_diagnostics(res.violated[0].tolist(), 0), 50)
    # The burst's log line (written after the frame's outputs since it moved out of the deadline work),
    # its output to /dev/null: rclpy's caller lookup and formatting are what is timed.
    burst_events = [EpisodeEvent(0, d, 1, 2, True) for d in range(burst)]
    saved_stderr = os.dup(2)
    with open(os.devnull, 'w') as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            log_ms = _median_ms(lambda: node._log_events('closed (recovered)', burst_events), 20)
        finally:
            os.dup2(saved_stderr, 2)
            os.close(saved_stderr)
    print(f'== bench_monitor_frame: {len(mon.instances)} instances (the soak suite), medians per call')
    print(f'Monitor.step {step_ms:.3f} ms; diagnostics {diag_ms:.3f} ms')
    for name, what in (('all', f'every instance ({len(labels)})'), ('burst', f'{len(changed)} changed ones')):
        as_bytes, before, as_bytes_max, before_max = verdict_ms[name]
        print(f'verdicts of {what}, published to a subscriber in another process: as bytes {as_bytes:.3f} ms '
              f'(longest {as_bytes_max:.3f}), messages updated in place (before) {before:.3f} ms (longest '
              f'{before_max:.3f}) ({before / as_bytes:.1f}x)')
    print(f'running metrics, published: as bytes {metrics_ms:.3f} ms, messages updated in place (before) '
          f'{metrics_before_ms:.3f} ms ({metrics_before_ms / metrics_ms:.1f}x)')
    print(f'a burst of {burst} violation events, published to a subscriber in another process: as bytes '
          f'{burst_ms:.3f} ms, messages updated in place (before) {burst_before_ms:.3f} ms '
          f'({burst_before_ms / burst_ms:.1f}x); its log line {log_ms:.3f} ms, after the frame\'s outputs')
    print(f'predicates of {len(sources)} grounding sources ({len(catalog)} names), published to a subscriber in another process: as bytes '
          f'{predicates_ms[0]:.3f} ms, messages made and converted by rclpy (before) {predicates_ms[1]:.3f} ms '
          f'({predicates_ms[1] / predicates_ms[0]:.1f}x)')
    print(f'status {status_ms:.3f} ms; its violated count read directly {direct_count_ms:.4f} ms, from a snapshot '
          f'(before) {snapshot_count_ms:.4f} ms ({snapshot_count_ms / direct_count_ms:.1f}x)')
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
