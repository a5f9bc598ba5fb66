"""Run a console command of this package under tracemalloc and write, every
``--every-s``, the allocations that grew most since the first snapshot
(taken ``--after-s`` in) to a file: what a long run's memory slope is made of.

    python bench/memtrace.py OUT.txt -- safemanip run --config ...
    python bench/bench_soak.py --memtrace OUT.txt     # the soak's stack under it
"""

from __future__ import annotations

import argparse
import runpy
import shutil
import sys
import threading
import time
import tracemalloc


def _watch(out: str, after_s: float, every_s: float) -> None:
    time.sleep(after_s)
    base = tracemalloc.take_snapshot()
    start = time.monotonic()
    while True:
        time.sleep(every_s)
        snap = tracemalloc.take_snapshot()
        grown = snap.compare_to(base, 'traceback')[:12]
        elapsed_h = (time.monotonic() - start) / 3600
        lines = [f'# {elapsed_h * 60:.1f} min after the first snapshot; traced {tracemalloc.get_traced_memory()[0] / 2**20:.1f} MiB']
        for st in grown:
            lines.append(f'{st.size_diff / 2**20 / elapsed_h:+8.2f} MiB/h  {st.count_diff:+8d} blocks')
            lines += ['    ' + ln for ln in st.traceback.format()[-6:]]
        with open(out, 'w') as f:
            f.write('\n'.join(lines) + '\n')


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('out')
    ap.add_argument('--after-s', type=float, default=60.0)
    ap.add_argument('--every-s', type=float, default=60.0)
    ap.add_argument('command', nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ['--'] else args.command
    tracemalloc.start(12)
    threading.Thread(target=_watch, args=(args.out, args.after_s, args.every_s), daemon=True).start()
    script = shutil.which(command[0]) or command[0]
    sys.argv = [script, *command[1:]]
    runpy.run_path(script, run_name='__main__')


if __name__ == '__main__':
    main()
