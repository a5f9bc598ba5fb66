"""Start-up cost of a physics episode: ``sim_bridge`` started afresh for
each episode (the way before) against one ``sim_bridge --serve`` process
that runs them one after another (the way the demos run them now).

Each episode is the robosuite Lift task with nothing subscribed
(``wait_for_subscribers:=0``) and is stopped (SIGINT) as soon as it logs
that it starts: what is measured is the CPU time a process spends to get
there — importing robosuite, compiling its kernels and the model, a ROS
context and node — not the physics of the episode itself.  Both ways run
the same episodes (seeds) in one run, interleaved, since this machine's
speed moves from minute to minute.

    python bench/bench_sim_server.py              # 6 episodes each way
    python bench/bench_sim_server.py --quick      # 1 afresh, 2 served (smoke test)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BRIDGE = [sys.executable, '-c', 'import sys; from safemanip_ros.nodes.sim_bridge import main; sys.exit(main())']
STARTS = 'starts'


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (``/proc/PID/stat``)."""
    fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout_s: float = 120.0) -> None:
    end = time.monotonic() + timeout_s
    while not (log.exists() and text in log.read_text()):
        if proc.poll() is not None or time.monotonic() > end:
            raise SystemExit(f'bench_sim_server: no {text!r} in {log} (exit {proc.poll()})')
        time.sleep(0.005)


def _args(seed: int, work: Path) -> list[str]:
    return ['-p', 'wait_for_subscribers:=0', '-p', f'seed:={seed}', '-p', f'truth_file:={work / f"{seed}.json"}']


def fresh(seed: int, work: Path) -> float:
    """CPU seconds of a new ``sim_bridge`` process up to its episode's start."""
    log = work / f'fresh-{seed}.log'
    with open(log, 'w') as out:
        proc = subprocess.Popen(BRIDGE + ['--ros-args', *_args(seed, work)], stdout=out, stderr=subprocess.STDOUT)
        _wait_for(log, STARTS, proc)
        cpu = _cpu_s(proc.pid)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    return cpu


class Server:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.proc = subprocess.Popen(BRIDGE + ['--serve'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(work / 'server.log', 'w'), text=True)

    def episode(self, seed: int) -> float:
        """CPU seconds the server spends from the request to the episode's start."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        log = self.work / f'served-{seed}.log'
        before = _cpu_s(self.proc.pid)
        self.proc.stdin.write(json.dumps({'ros_args': _args(seed, self.work), 'log': str(log)}) + '\n')
        self.proc.stdin.flush()
        _wait_for(log, STARTS, self.proc)
        cpu = _cpu_s(self.proc.pid) - before
        self.proc.send_signal(signal.SIGINT)        # ends the episode; the server answers and waits for the next
        reply = json.loads(self.proc.stdout.readline())
        assert reply == {'exit_code': 0}, reply
        return cpu

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--episodes', type=int, default=6)
    ap.add_argument('--quick', action='store_true', help='1 episode afresh, 2 served (smoke test)')
    args = ap.parse_args()
    n = 2 if args.quick else max(2, args.episodes)
    with tempfile.TemporaryDirectory(prefix='bench_sim_server-') as tmp:
        work = Path(tmp)
        server = Server(work)
        try:
            times: dict[str, list[float]] = {'fresh': [], 'served': []}
            for k in range(n):          # interleaved: the same seeds, one way then the other
                if not (args.quick and k):
                    times['fresh'].append(fresh(100 + k, work))
                times['served'].append(server.episode(100 + k))
        finally:
            server.close()
    first, later = times['served'][0], times['served'][1:]
    fresh_med = statistics.median(times['fresh'])
    print(f'== bench_sim_server: Lift episodes, {len(times["fresh"])} afresh and {n} served, CPU seconds up to '
          f'the episode\'s start')
    print(f'sim_bridge afresh per episode (before): median {fresh_med:.2f} s '
          f'({", ".join(f"{t:.2f}" for t in times["fresh"])})')
    print(f'sim_bridge --serve: first episode {first:.2f} s (robosuite imported), later ones median '
          f'{statistics.median(later):.2f} s ({", ".join(f"{t:.2f}" for t in later)}): '
          f'{fresh_med / statistics.median(later):.1f}x less than afresh')
    return 0


if __name__ == '__main__':
    sys.exit(main())
