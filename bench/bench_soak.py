"""Soak: the whole stack for a long run at 100 Hz with 1,000 property
instances and recording on, beside a scripted robot over DDS.

``safemanip run --config panda_demo.yaml --properties <generated suite>
--ros-args -p rate_hz:=100.0`` (grounding and monitor in one process,
supervisor off, the recorder in a process of its own); this script publishes joint states, TF and
contacts at 100 Hz, touching the shelf, the table and the mug in turn so the
properties trigger, violate and recover all the time.

Prints every ``--report-s``: the stack's and the recorder's RSS and CPU share over that interval, the monitor's
frames and overruns (from its ``status``), and the bag's split files and
size; at the end the RSS slopes (least squares over the second half of the
run, MiB per hour), the CPU share slopes (% per hour), the overruns, and the bag's growth per hour.  Targets
(issue: fail closed, soak): RSS flat, no frame overruns, bag rotation
bounded (split files and bytes grow linearly with time, none left open).

Beside the stack runs ``stallprobe.py`` (a thread on each CPU that only
sleeps 1 ms at a time and times a few microseconds of fixed work at each
wake-up, at a real-time priority above the stack's): each overrun the
monitor logs (the longest of each second, said with when it happened) is
matched with the stalls of the machine and the stretches in which a CPU ran
slowly that the probe saw, so the overruns the stack caused are told from
those no program on this machine could avoid.

    python bench/bench_soak.py                      # 60 minutes
    python bench/bench_soak.py --minutes 3          # a short look
    python bench/bench_soak.py --realtime           # the stack under SCHED_FIFO
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')

from stackproc import children, proc_stats, stop_stack  # noqa: E402  (beside this script)
from stallprobe import SLOW_FACTOR, overlapping  # noqa: E402

RATE_HZ = 100.0
TOUCHED = ('shelf', 'table', 'mug', 'microwave')


def generated_suite(path: Path, instances: int) -> None:
    """``instances`` response properties over the contact predicates, windows of 5 to 50 frames."""
    lines = ['suite: soak', f'rate_hz: {RATE_HZ:g}', 'predicates:']
    lines += [f'  robot_contact_{b}: {{description: the robot touches {b}}}' for b in TOUCHED]
    lines.append('properties:')
    for i in range(instances):
        body = TOUCHED[i % len(TOUCHED)]
        k = 5 + i % 46
        lines += [f'  - name: soak_{i:04d}', f'    description: contact with {body} ends within {k} frames',
                  '    category: collision_contact',
                  f'    formula: "G(robot_contact_{body} -> F[0,{k}] !robot_contact_{body})"',
                  f'    trigger: robot_contact_{body}', f'    recovery: "F !robot_contact_{body}"',
                  '    severity: warning']
    path.write_text('\n'.join(lines) + '\n')


def _bag(path: Path) -> tuple[int, float]:
    files = [f for f in path.glob('*') if f.is_file()] if path.exists() else []
    return len(files), sum(f.stat().st_size for f in files) / 2 ** 20


def _cpu_shares(samples: list[tuple[float, float, float, float, float]]) -> tuple[float, float]:
    """The stack's and the recorder's CPU share (% of one CPU) since the sample before the last."""
    if len(samples) < 2:
        return 0.0, 0.0
    (t0, _, cpu0, _, rec0), (t1, _, cpu1, _, rec1) = samples[-2:]
    return (cpu1 - cpu0) / (t1 - t0) * 100, (rec1 - rec0) / (t1 - t0) * 100


def _slope_per_hour(ts: list[float], ys: list[float]) -> float:
    import numpy as np
    half = len(ts) // 2
    t, y = np.array(ts[half:]), np.array(ys[half:])
    if len(t) < 2:
        return float('nan')
    return float(np.polyfit(t / 3600.0, y, 1)[0])


# rclpy's console format: [SEVERITY] [unix time] [node]: message
_OVERRUN_LINE = re.compile(r'^\[WARN\] \[(\d+\.\d+)\] \[monitor\]: frame overrun: (.*)$')
_LENGTH = re.compile(r'^(?:frame built in|tick) ([\d.]+) ms')
_AGO = re.compile(r', ([\d.]+) s ago$')


def overrun_span(logged_unix_s: float, text: str) -> tuple[float, float]:
    """(start, end) unix s of the overrun a monitor line says: a frame's
    build or a tick's gap, ending when it was logged, or ``… s ago`` before."""
    end = logged_unix_s - (float(m.group(1)) if (m := _AGO.search(text)) else 0.0)
    length = _LENGTH.match(text)
    return end - (float(length.group(1)) * 1e-3 if length else 0.0), end


def _attribute_overruns(work: Path, overruns: int) -> None:
    """The monitor's overrun lines (one a second at most, the longest) against what the machine did."""
    lines = [m for m in map(_OVERRUN_LINE.match, (work / 'stack.log').read_text().splitlines()) if m]
    probe = json.loads((work / 'stalls.json').read_text()) if (work / 'stalls.json').exists() else None
    if probe is None:
        print('stall probe: no result')
        return
    stalls, slow = probe['stalls'], probe.get('slow', [])
    longest = max((late for _, late, _ in stalls), default=0.0)
    print(f'machine: {len(stalls)} stalls over 5 ms in {probe["wakeups"]} wake-ups of the stall probe on '
          f'{probe["cpus"]} CPUs ({sum(late > 10 for _, late, _ in stalls)} over 10 ms, longest {longest:.1f} ms); '
          f'{len(slow)} stretches of a CPU running the probe\'s fixed work over {SLOW_FACTOR:g}x slower than usual '
          f'({sum(length for _, length, _, _ in slow) / 1e3:.1f} s in all, longest '
          f'{max((length for _, length, _, _ in slow), default=0.0):.0f} ms, worst '
          f'{max((f for _, _, f, _ in slow), default=0.0):.1f}x)')
    slack_s = 2.0 / RATE_HZ
    kinds = []
    for m in lines:
        start, end = overrun_span(float(m.group(1)), m.group(2))
        kinds.append('stall' if overlapping(start, end, stalls, slack_s) else
                     'slow CPU' if overlapping(start, end, slow, slack_s) else 'the stack')
    print(f'overruns {overruns}: {len(lines)} logged moments (one line a second at most, its longest), '
          f'{kinds.count("stall")} of them during a stall of the machine or within two frame periods of it, '
          f'{kinds.count("slow CPU")} while a CPU ran slowly, {kinds.count("the stack")} neither (the stack\'s '
          f'own: target 0)')
    for m, kind in zip(lines, kinds):
        print(f'  {m.group(1)}  [{kind}]  {m.group(2)}')


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--minutes', type=float, default=60.0)
    ap.add_argument('--instances', type=int, default=1000)
    ap.add_argument('--report-s', type=float, default=30.0)
    ap.add_argument('--quick', action='store_true', help='9 s, 200 instances (smoke test)')
    ap.add_argument('--realtime', action='store_true', help='the stack with --realtime (SCHED_FIFO)')
    ap.add_argument('--keep', action='store_true', help='keep the bag and logs (deleted at the end by default)')
    ap.add_argument('--no-record', action='store_true',
                    help='without the recorder (to tell its share of the RSS slope from the rest of the stack)')
    ap.add_argument('--profile', metavar='FILE', help='run the stack under cProfile, its statistics to FILE')
    ap.add_argument('--memtrace', metavar='FILE', help='run the stack under tracemalloc (bench/memtrace.py): what '
                                                       'grew most, per hour, rewritten to FILE every minute')
    args = ap.parse_args()
    if args.quick:
        args.minutes, args.instances, args.report_s = 0.15, 200, 3.0

    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray

    from safemanip_ros.msg import MonitorStatus
    from safemanip_ros.nodes.qos import RELIABLE
    from safemanip_ros.nodes.robot_standin import RobotStandIn

    work = Path(tempfile.mkdtemp(prefix='bench_soak-'))
    suite = work / 'soak.yaml'
    generated_suite(suite, args.instances)
    bag = work / 'bag'
    log = open(work / 'stack.log', 'w')
    under = [sys.executable, '-m', 'cProfile', '-o', args.profile] if args.profile else []
    if args.memtrace:
        under = [sys.executable, str(Path(__file__).resolve().parent / 'memtrace.py'), args.memtrace, '--']
    stack = subprocess.Popen([*under, str(Path(sys.executable).parent / 'safemanip'), 'run', '--config',
                              str(REPO / 'config' / 'robots' / 'panda_demo.yaml'), '--properties', str(suite),
                              '--no-camera', '--no-supervisor', '--reliable-inputs',
                              *(['--no-record'] if args.no_record else ['--bag', str(bag)]),
                              *(['--realtime'] if args.realtime else []), '--ros-args', '-p', f'rate_hz:={RATE_HZ}'],
                             stdout=log, stderr=subprocess.STDOUT)
    rclpy.init()
    node = rclpy.create_node('soak_robot')
    status: list[MonitorStatus] = []
    node.create_subscription(MonitorStatus, 'status', status.append, RELIABLE)
    timing: dict[str, str] = {}     # the monitor's timing diagnostics, the latest

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for st in msg.status:
            if st.name == 'safemanip/timing':
                timing.update({kv.key: kv.value for kv in st.values})

    node.create_subscription(DiagnosticArray, '/diagnostics', on_diagnostics, RELIABLE)
    robot = RobotStandIn(node)
    period = 1.0 / RATE_HZ
    ticks = [0]

    def tick() -> None:
        # 0.4 s touching one body, 0.3 s free, the next body: windows of 5-50 frames both hold and fail.
        body = TOUCHED[(ticks[0] // 70) % len(TOUCHED)]
        robot.touch(('robot0_link4', f'{body}_top' if body == 'shelf' else body) if ticks[0] % 70 < 40 else None)
        robot.publish()
        ticks[0] += 1

    samples: list[tuple[float, float, float, float, float]] = []   # (t_s, rss MiB, cpu s) of stack, recorder
    probe: subprocess.Popen[bytes] | None = None
    try:
        deadline = time.monotonic() + 120
        while not (status and status[-1].state == 'active'):
            rclpy.spin_once(node, timeout_sec=0.05)
            tick()
            if time.monotonic() > deadline or stack.poll() is not None:
                print('the stack did not come up; log:\n' + (work / 'stack.log').read_text()[-3000:])
                return 1
        probe = subprocess.Popen([sys.executable, str(Path(__file__).resolve().parent / 'stallprobe.py'),
                                  str(work / 'stalls.json')])
        recorder = children(stack.pid)[:1]
        t0 = time.monotonic()
        next_tick, next_report = t0, t0
        print(f'== bench_soak: {args.minutes:g} min at {RATE_HZ:g} Hz, {status[-1].instances} property instances, '
              f'{"not recording" if args.no_record else f"recording to {bag}"}'
              f'{", --realtime" if args.realtime else ""}', flush=True)
        end = t0 + args.minutes * 60
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= next_tick:
                tick()
                next_tick = max(next_tick + period, now)
            if now >= next_report:
                cpu_s, rss = proc_stats(stack.pid)
                rec_cpu_s, rec_rss = proc_stats(recorder[0]) if recorder else (0.0, 0.0)
                samples.append((now - t0, rss, cpu_s, rec_rss, rec_cpu_s))
                files, mib = _bag(bag)
                s = status[-1]
                cpu_share, rec_share = _cpu_shares(samples)
                print(f'  {(now - t0) / 60:5.1f} min  RSS {rss:6.1f} MiB  CPU {cpu_share:4.0f} %  '
                      f'recorder RSS {rec_rss:5.1f} MiB CPU {rec_share:3.0f} %  frames {s.frames}  '
                      f'overruns {s.overruns}  max frame {s.max_frame_time_s * 1e3:.1f} ms  violated {s.violated}  '
                      f'bag {files} files {mib:.1f} MiB', flush=True)
                next_report += args.report_s
            rclpy.spin_once(node, timeout_sec=max(0.0, min(0.002, next_tick - time.monotonic())))
        elapsed_s = time.monotonic() - t0
    finally:
        stop_stack(node, stack, timeout_s=60)
        if probe is not None:
            probe.send_signal(signal.SIGINT)
            probe.wait(timeout=30)
    s = status[-1]
    files, mib = _bag(bag)
    times = [sample[0] for sample in samples]
    print(f'RSS slope over the second half: {_slope_per_hour(times, [sample[1] for sample in samples]):+.1f} '
          f'MiB/h (target: flat); RSS {samples[0][1]:.0f} -> {samples[-1][1]:.0f} MiB')
    shares = [_cpu_shares(samples[:i + 1]) for i in range(1, len(samples))]
    print(f"CPU share slope over the second half (where a frame's work grew with time): stack "
          f'{_slope_per_hour(times[1:], [a for a, _ in shares]):+.1f} %/h, recorder '
          f'{_slope_per_hour(times[1:], [b for _, b in shares]):+.1f} %/h')
    if not args.no_record:
        print(f'recorder RSS slope over the second half: '
              f'{_slope_per_hour(times, [sample[3] for sample in samples]):+.1f} MiB/h (target: flat); RSS '
              f'{samples[0][3]:.0f} -> {samples[-1][3]:.0f} MiB')
    print(f'frames {s.frames} ({s.frames / elapsed_s:.1f}/s), overruns {s.overruns} (target 0), longest frame '
          f'{s.max_frame_time_s * 1e3:.1f} ms of {1e3 / RATE_HZ:.0f}')
    _attribute_overruns(work, s.overruns)
    if timing:
        print(f'violation closings left for a later frame (monitor/pacing.py): {timing.get("closings_paced", "?")}, '
              f'the longest wait {float(timing.get("longest_closing_wait_s", "nan")) * 1e3:.1f} ms (diagnostics '
              f'at most a second before the end)')
    print(f'bag: {files} files, {mib:.0f} MiB ({mib / elapsed_s * 3600:.0f} MiB/h, {files / elapsed_s * 3600:.0f} '
          f'files/h); stack exit code {stack.returncode} (0: every split listed)')
    if args.keep:
        print(f'kept: {work}')
    else:
        shutil.rmtree(work, ignore_errors=True)     # an hour's bag is about 15 GB
    return 0


if __name__ == '__main__':
    sys.exit(main())
