"""A probe of the machine itself, for the live benches: a process whose
threads, one pinned to each CPU, only sleep 1 ms at a time and record every
wake-up that came late, as ``cyclictest`` does, and at each wake-up time a
fixed few microseconds of work, recording the stretches in which it ran
several times slower than usual.  Run beside the stack at a real-time
priority above the stack's (so the stack's own work never delays it), it
tells a frame overrun the stack caused (the probe woke on time and worked at
its usual speed on every CPU) from one the machine caused: a stall (a virtual
machine's host not running a virtual CPU, the kernel), or a CPU that ran but
slowly (the host's other guests on the same core, which a guest's steal time
does not show).  No code of ours can prevent either.

    python bench/stallprobe.py OUT.json [--priority 90] [--threshold-ms 5]

Runs until SIGINT or SIGTERM, then writes ``{"wakeups": N, "stalls":
[[start_unix_s, late_ms, cpu], ...], "slow": [[start_unix_s, length_ms,
factor, cpu], ...]}``: each wake-up more than ``--threshold-ms`` late, with
the wall-clock time (``time.time()``, as ROS logs stamp their lines) it fell
asleep and the CPU it was pinned to; and each stretch of 10 ms windows in
which the work took more than ``SLOW_FACTOR`` times its usual time (the
tenth percentile of its first ``CALIBRATION_WAKEUPS``), with the worst
window's factor.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from pathlib import Path

SLEEP_S = 0.001
WORK_ITERATIONS = 200          # a few microseconds of the interpreter's work at each wake-up
WINDOW_WAKEUPS = 10            # the work is judged per window of this many wake-ups (10 ms)
CALIBRATION_WAKEUPS = 2000
SLOW_FACTOR = 3.0


def _work() -> int:
    x = 0
    for i in range(WORK_ITERATIONS):
        x += i
    return x


def probe(cpu: int, threshold_s: float, stop: threading.Event, out: list[tuple[float, float, int]],
          counts: list[int], slow: list[tuple[float, float, float, int]]) -> None:
    """On ``cpu``, sleep ``SLEEP_S`` at a time until ``stop``; append each
    late wake-up (start unix s, late ms, cpu) to ``out``, the number of
    wake-ups to ``counts``, and each stretch of slow work (start unix s,
    length ms, worst window's factor, cpu) to ``slow``."""
    os.sched_setaffinity(0, {cpu})          # 0: this thread
    wakeups = 0
    last = time.monotonic()
    calibration: list[float] = []
    usual_s: float | None = None
    window_s, window_n = 0.0, 0
    stretch: list[float] | None = None      # [start unix s, end unix s, worst factor] of the slow stretch going on
    while not stop.is_set():
        time.sleep(SLEEP_S)
        now = time.monotonic()
        late_s = now - last - SLEEP_S
        if late_s > threshold_s:
            out.append((time.time() - (now - last), late_s * 1e3, cpu))
        last = now
        wakeups += 1
        # The work runs holding the probe's GIL throughout (far shorter than the switch interval): its time
        # is the CPU's speed, or time the CPU was taken from this real-time thread.
        t = time.perf_counter()
        _work()
        work_s = time.perf_counter() - t
        if usual_s is None:
            calibration.append(work_s)
            if len(calibration) == CALIBRATION_WAKEUPS:
                usual_s = sorted(calibration)[CALIBRATION_WAKEUPS // 10]
            continue
        window_s, window_n = window_s + work_s, window_n + 1
        if window_n < WINDOW_WAKEUPS:
            continue
        factor = window_s / (WINDOW_WAKEUPS * usual_s)
        wall = time.time()
        if factor > SLOW_FACTOR:
            if stretch is None:
                stretch = [wall - WINDOW_WAKEUPS * SLEEP_S, wall, factor]
            else:
                stretch[1], stretch[2] = wall, max(stretch[2], factor)
        elif stretch is not None:
            slow.append((stretch[0], (stretch[1] - stretch[0]) * 1e3, stretch[2], cpu))
            stretch = None
        window_s, window_n = 0.0, 0
    if stretch is not None:
        slow.append((stretch[0], (stretch[1] - stretch[0]) * 1e3, stretch[2], cpu))
    counts.append(wakeups)


def during(t: float, spans: list[tuple[float, float, int]] | list[tuple[float, float, float, int]],
           slack_s: float) -> bool:
    """``t`` (unix s) within ``slack_s`` of one of ``spans`` (start unix s, length ms, ...)."""
    return any(span[0] - slack_s <= t <= span[0] + span[1] * 1e-3 + slack_s for span in spans)


def overlapping(start: float, end: float, spans: list[tuple[float, float, int]] | list[tuple[float, float, float, int]],
                slack_s: float) -> bool:
    """The interval ``[start, end]`` (unix s, a frame overrun) meets one of
    ``spans`` (start unix s, length ms, ...) or comes within ``slack_s`` of it."""
    return during(start, spans, slack_s) or during(end, spans, slack_s) or \
        any(start <= span[0] <= end for span in spans)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('out')
    ap.add_argument('--priority', type=int, default=90,
                    help='SCHED_FIFO priority, above the stack\'s (0: normal scheduling)')
    ap.add_argument('--threshold-ms', type=float, default=5.0)
    args = ap.parse_args()
    if args.priority:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(args.priority))
        except OSError as exc:
            print(f'stallprobe: SCHED_FIFO {args.priority} not permitted ({exc.strerror}); normal scheduling: '
                  f'the stack\'s own work delays the probe too', flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    stalls: list[tuple[float, float, int]] = []
    slow: list[tuple[float, float, float, int]] = []
    counts: list[int] = []
    threads = [threading.Thread(target=probe, args=(cpu, args.threshold_ms * 1e-3, stop, stalls, counts, slow),
                                daemon=True)
               for cpu in sorted(os.sched_getaffinity(0))]
    for t in threads:
        t.start()
    while not stop.is_set():
        stop.wait(0.5)          # the main thread takes the signals
    for t in threads:
        t.join(5)
    Path(args.out).write_text(json.dumps({'wakeups': sum(counts), 'cpus': len(threads),
                                          'stalls': sorted(stalls), 'slow': sorted(slow)}))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
