"""GIL hand-off: how late a 100 Hz control thread wakes while a background
thread runs Python code (as the bag writer does beside the monitor), at
Python's default switch interval (5 ms) and at the one ``--realtime`` sets
(``realtime.SWITCH_INTERVAL_S``), side by side in one run.

The GIL is not priority-aware: a real-time thread whose timer fired still
waits for the holder to let go, which it does only when the switch interval
has passed.  Printed per setting: wake-up lateness (median, p99, max, in
ms), ticks later than 1 ms, and the background thread's work done (its
throughput, so the cost of switching more often shows too).  Where the
machine permits, the control thread runs under SCHED_FIFO and the
background thread under normal scheduling, as in ``safemanip run
--realtime``: what is left is the GIL.

    python bench/bench_gil_handoff.py              # 10 s per setting
    python bench/bench_gil_handoff.py --seconds 2  # a short look
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from safemanip_ros.realtime import SWITCH_INTERVAL_S  # noqa: E402

PERIOD_S = 0.01


def _background(stop: threading.Event, done: list[int]) -> None:
    """Python work that holds the GIL between bytecodes: encoding records."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))    # as realtime.background_thread
    except OSError:
        pass
    n = 0
    while not stop.is_set():
        record = {'topic': '/verdicts', 'stamp': n, 'data': [n % 7] * 64}
        b''.join(str(v).encode() for v in record.values())
        n += 1
    done.append(n)


def run(switch_s: float, seconds: float) -> dict[str, float]:
    sys.setswitchinterval(switch_s)
    stop = threading.Event()
    done: list[int] = []
    worker = threading.Thread(target=_background, args=(stop, done), daemon=True)
    worker.start()
    late_s = []
    next_s = time.monotonic() + PERIOD_S
    end = time.monotonic() + seconds
    while next_s < end:
        time.sleep(max(0.0, next_s - time.monotonic()))
        late_s.append(time.monotonic() - next_s)
        next_s += PERIOD_S
    stop.set()
    worker.join()
    late_s.sort()
    return {'median_ms': 1e3 * late_s[len(late_s) // 2], 'p99_ms': 1e3 * late_s[int(0.99 * (len(late_s) - 1))],
            'max_ms': 1e3 * late_s[-1], 'over_1ms': sum(x > 0.001 for x in late_s), 'ticks': len(late_s),
            'work_per_s': done[0] / seconds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--seconds', type=float, default=10.0, help='per setting')
    ap.add_argument('--quick', action='store_true', help='1 s per setting (smoke test)')
    args = ap.parse_args()
    if args.quick:
        args.seconds = 1.0
    default_s = sys.getswitchinterval()
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
        scheduling = 'control thread SCHED_FIFO 50'
    except OSError:
        scheduling = 'SCHED_FIFO not permitted: normal scheduling'
    rows = [('default', default_s, run(default_s, args.seconds)),
            ('--realtime', SWITCH_INTERVAL_S, run(SWITCH_INTERVAL_S, args.seconds))]
    print(f'== bench_gil_handoff: a {1 / PERIOD_S:g} Hz thread beside a Python background thread, '
          f'{args.seconds:g} s per setting; {scheduling}')
    print(f'{"setting":12s} {"interval":>9s} {"median":>8s} {"p99":>8s} {"max":>8s} {">1 ms":>8s} {"work/s":>10s}')
    for name, switch_s, r in rows:
        print(f'{name:12s} {1e3 * switch_s:7.2f}ms {r["median_ms"]:6.2f}ms {r["p99_ms"]:6.2f}ms '
              f'{r["max_ms"]:6.2f}ms {int(r["over_1ms"]):4d}/{int(r["ticks"]):<4d}{r["work_per_s"]:10.0f}')
    base, rt = rows[0][2], rows[1][2]
    print(f'ratio --realtime/default: p99 lateness {rt["p99_ms"] / max(base["p99_ms"], 1e-9):.2f}, '
          f'max {rt["max_ms"] / max(base["max_ms"], 1e-9):.2f}, background work {rt["work_per_s"] / base["work_per_s"]:.2f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
