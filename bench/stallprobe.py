"""A probe of the machine itself, for the live benches: a process whose
threads, one pinned to each CPU, only sleep 1 ms at a time and record every
wake-up that came late, as ``cyclictest`` does.  Run beside the stack at a
real-time priority above the stack's (so the stack's own work never delays
it), it tells a frame overrun the stack caused (the probe woke on time on
every CPU) from a stall of the machine (a virtual machine's host not running
a virtual CPU, the kernel), which no code of ours can prevent.

    python bench/stallprobe.py OUT.json [--priority 90] [--threshold-ms 5]

Runs until SIGINT or SIGTERM, then writes ``{"wakeups": N, "stalls":
[[start_unix_s, late_ms, cpu], ...]}``: each wake-up more than
``--threshold-ms`` late, with the wall-clock time (``time.time()``, as ROS
logs stamp their lines) it fell asleep and the CPU it was pinned to.
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


def probe(cpu: int, threshold_s: float, stop: threading.Event, out: list[tuple[float, float, int]],
          counts: list[int]) -> None:
    """On ``cpu``, sleep ``SLEEP_S`` at a time until ``stop``; append each
    late wake-up (start unix s, late ms, cpu) to ``out`` and the number of
    wake-ups to ``counts``."""
    os.sched_setaffinity(0, {cpu})          # 0: this thread
    wakeups = 0
    last = time.monotonic()
    while not stop.is_set():
        time.sleep(SLEEP_S)
        now = time.monotonic()
        late_s = now - last - SLEEP_S
        if late_s > threshold_s:
            out.append((time.time() - (now - last), late_s * 1e3, cpu))
        last = now
        wakeups += 1
    counts.append(wakeups)


def coinciding(events_unix_s: list[float], stalls: list[tuple[float, float, int]], slack_s: float) -> int:
    """How many of ``events_unix_s`` (a frame overrun's log time) fall within
    ``slack_s`` after a stall, or during one."""
    n = 0
    for t in events_unix_s:
        if any(start - slack_s <= t <= start + late_ms * 1e-3 + slack_s for start, late_ms, _ in stalls):
            n += 1
    return n


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
    counts: list[int] = []
    threads = [threading.Thread(target=probe, args=(cpu, args.threshold_ms * 1e-3, stop, stalls, counts), daemon=True)
               for cpu in sorted(os.sched_getaffinity(0))]
    for t in threads:
        t.start()
    while not stop.is_set():
        stop.wait(0.5)          # the main thread takes the signals
    for t in threads:
        t.join(5)
    Path(args.out).write_text(json.dumps({'wakeups': sum(counts), 'cpus': len(threads),
                                          'stalls': sorted(stalls)}))
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
