"""Faithfulness of the shipped configuration on physics-simulated episodes:
clean and faulty robosuite Lift episodes (scripted policy, seeded faults,
physical ground truth), audited with the shipped suites and
config/robots/robosuite_lift.yaml; prints sensitivity, specificity,
precision (Clopper-Pearson 95 %), false alarms per clean episode and
latency per property.  Targets: sensitivity >= 0.95, specificity 1.0,
median latency <= window + 1 frame.

    python bench/bench_faithfulness.py [--episodes N] [--seed S] [--out DIR] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from safemanip_ros.sim.faithfulness import format_table, run_benchmark  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--episodes', type=int, default=36)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--out', help='keep bags, audit and faithfulness.json here (default: a temporary folder)')
    p.add_argument('--quick', action='store_true', help='6 episodes (one per fault)')
    args = p.parse_args()
    episodes = 6 if args.quick else args.episodes
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        result = run_benchmark(episodes, args.seed, out, progress=lambda m: print(m, flush=True))
        print(format_table(result))
        print(f'{time.monotonic() - t0:.0f} s in all; details in {out / "faithfulness.json"}'
              + ('' if args.out else ' (temporary)'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
