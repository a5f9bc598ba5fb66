"""Start-up cost of a physics rollout: ``sim_bridge`` started afresh for
each rollout (the way before) against one ``sim_bridge --serve`` process
that runs them one after another (the way the demos run them now).

Each rollout is the robosuite Lift task with nothing subscribed
(``wait_for_subscribers:=0``) and is stopped (SIGINT) as soon as it logs
that it starts: what is measured is the CPU time a process spends to get
there — importing robosuite, compiling its kernels and the model, a ROS
context and node — not the physics of the rollout itself.  Both ways run
the same rollouts (seeds) in one run, interleaved, since this machine's
speed moves from minute to minute.

    python bench/bench_sim_server.py              # 6 rollouts each way
    python bench/bench_sim_server.py --quick      # 1 afresh, 2 served (smoke test)
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from stackproc import proc_stats  # noqa: E402  (beside this script)

from safemanip_ros.cli.demo_physics import SimServer, _exe  # noqa: E402  (the demos' own client of --serve)

STARTS = 'starts'


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout_s: float = 120.0) -> None:
    end = time.monotonic() + timeout_s
    while not (log.exists() and text in log.read_text()):
        if proc.poll() is not None or time.monotonic() > end:
            raise SystemExit(f'bench_sim_server: no {text!r} in {log} (exit {proc.poll()})')
        time.sleep(0.005)


def _args(seed: int, work: Path) -> list[str]:
    return ['-p', 'wait_for_subscribers:=0', '-p', f'seed:={seed}', '-p', f'truth_file:={work / f"{seed}.json"}']


def fresh(seed: int, work: Path) -> float:
    """CPU seconds of a new ``sim_bridge`` process up to its rollout's start."""
    log = work / f'fresh-{seed}.log'
    with open(log, 'w') as out:
        proc = subprocess.Popen(_exe('sim_bridge') + ['--ros-args', *_args(seed, work)], stdout=out,
                                stderr=subprocess.STDOUT)
        _wait_for(log, STARTS, proc)
        cpu_s, _ = proc_stats(proc.pid)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    return cpu_s


def served(server: SimServer, seed: int, work: Path) -> float:
    """CPU seconds ``server`` spends from the request to the rollout's start."""
    log = work / f'served-{seed}.log'
    before_s, _ = proc_stats(server.proc.pid)
    server.start(_args(seed, work), log)
    _wait_for(log, STARTS, server.proc)
    cpu_s = proc_stats(server.proc.pid)[0] - before_s
    server.proc.send_signal(signal.SIGINT)      # ends the rollout; the server answers and waits for the next
    code = server.finished(60.0)
    assert code == 0, code
    return cpu_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--rollouts', type=int, default=6)
    ap.add_argument('--quick', action='store_true', help='1 rollout afresh, 2 served (smoke test)')
    args = ap.parse_args()
    n = 2 if args.quick else max(2, args.rollouts)
    with tempfile.TemporaryDirectory(prefix='bench_sim_server-') as tmp:
        work = Path(tmp)
        with SimServer(dict(os.environ), work / 'server.log') as server:
            times: dict[str, list[float]] = {'fresh': [], 'served': []}
            for k in range(n):          # interleaved: the same seeds, one way then the other
                if not (args.quick and k):
                    times['fresh'].append(fresh(100 + k, work))
                times['served'].append(served(server, 100 + k, work))
    first, later = times['served'][0], times['served'][1:]
    fresh_med = statistics.median(times['fresh'])
    print(f'== bench_sim_server: Lift rollouts, {len(times["fresh"])} afresh and {n} served, CPU seconds up to '
          f'the rollout\'s start')
    print(f'sim_bridge afresh per rollout (before): median {fresh_med:.2f} s '
          f'({", ".join(f"{t:.2f}" for t in times["fresh"])})')
    print(f'sim_bridge --serve: first rollout {first:.2f} s (robosuite imported), later ones median '
          f'{statistics.median(later):.2f} s ({", ".join(f"{t:.2f}" for t in later)}): '
          f'{fresh_med / statistics.median(later):.1f}x less than afresh')
    return 0


if __name__ == '__main__':
    sys.exit(main())
