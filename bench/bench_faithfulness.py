"""Faithfulness of the shipped configuration on physics-simulated rollouts,
at several perception levels side by side: clean and faulty robosuite Lift,
PickPlace and Stack rollouts (scripted policies, seeded faults, physical
ground truth), recorded with the objects' poses as simulator truth and as a
camera tracker would give them (safemanip_ros/sim/perception.py: realistic
= 5 mm / 2 deg noise, 10 Hz, 10 % missed, 100 ms late, half lost between
the fingers; double = twice the noise and dropout), audited with the
shipped suites and config/robots/robosuite_*.yaml; prints sensitivity,
specificity, precision (Clopper-Pearson 95 %) per task and level, false
alarms per clean rollout and median latency per property.  Targets at the
realistic level: sensitivity >= 0.95 and specificity 1 on every task,
median latency <= window + 3 frames (misses are printed).  With
``--onsets geometry,skills`` the same bags are also audited with the
policies' phases as skill events deciding the pick and place onsets
(columns ``<level>/skills``).

    python bench/bench_faithfulness.py [--rollouts N] [--seed S] [--out DIR]
        [--perception LEVEL ...] [--tasks Lift,PickPlace,Stack] [--onsets geometry,skills] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from safemanip_ros.sim.faithfulness import TASKS, format_levels, run_benchmark  # noqa: E402
from safemanip_ros.sim.perception import LEVELS  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--rollouts', '--episodes', dest='rollouts', type=int, default=45,
                   help='rollouts per level (default 45: five of each fault)')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--out', help='keep bags, audits and faithfulness.json here (default: a temporary folder)')
    p.add_argument('--perception', action='append', choices=list(LEVELS), metavar='LEVEL',
                   help=f'a perception level ({", ".join(LEVELS)}); repeat for several (default: all)')
    p.add_argument('--tasks', default=','.join(TASKS), help='comma-separated robosuite tasks (default: %(default)s)')
    p.add_argument('--onsets', default='geometry',
                   help='comma-separated: geometry (shipped configs), skills (plus skill events) (default: %(default)s)')
    p.add_argument('--workers', type=int, default=2, help='audit worker processes')
    p.add_argument('--quick', action='store_true', help='9 rollouts (one per task and fault), truth and realistic')
    args = p.parse_args()
    tasks = tuple(t for t in args.tasks.split(',') if t)
    bad = [t for t in tasks if t not in TASKS]
    if bad:
        p.error(f'unknown task(s) {bad}; known: {", ".join(TASKS)}')
    onsets = tuple(o for o in args.onsets.split(',') if o)
    if any(o not in ('geometry', 'skills') for o in onsets):
        p.error(f'--onsets {args.onsets}: expected geometry and/or skills')
    if args.out:
        from safemanip_ros.cli.options import writable_folder
        from safemanip_ros.errors import SafemanipError
        try:
            writable_folder('--out', args.out)
        except SafemanipError as err:
            p.error(str(err))
    levels = tuple(dict.fromkeys(args.perception or (('truth', 'realistic') if args.quick else LEVELS)))
    rollouts = 9 if args.quick else args.rollouts
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        result = run_benchmark(rollouts, args.seed, out, workers=args.workers, levels=levels, tasks=tasks,
                               onsets=onsets, progress=lambda m: print(m, flush=True))
        print(format_levels(result))
        print(f'{time.monotonic() - t0:.0f} s in all; details in {out / "faithfulness.json"}'
              + ('' if args.out else ' (temporary)'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
