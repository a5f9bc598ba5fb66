"""``safemanip bench``: run the benchmark scripts of bench/ and print their figures."""

from __future__ import annotations

import argparse
import subprocess
import sys

from ..errors import SafemanipError
from ..resources import bench_dir


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser('bench', help='run benchmarks (bench/*.py) and print their figures')
    p.add_argument('names', nargs='*', help='benchmark script names without .py (default: all)')
    p.add_argument('--quick', action='store_true', help='smaller sizes (for smoke tests)')
    # --episodes: the name before rollout became the one word for a run (kept so old commands still work).
    p.add_argument('--rollouts', '--episodes', dest='rollouts', type=int, metavar='N',
                   help='faithfulness: how many physics rollouts')
    p.add_argument('--seed', type=int, metavar='S', help='faithfulness: the first rollout seed')
    p.add_argument('--out', metavar='DIR', help='faithfulness: keep bags, audit and faithfulness.json here')
    p.add_argument('--perception', action='append', metavar='LEVEL',
                   help='faithfulness: object poses as a detector gives them (truth, realistic, double, '
                        'outliers, flips, drift, fingers, bias, or camera: found in rendered RGB-D pixels); repeat for several '
                        'side by side '
                        '(default: all)')
    p.add_argument('--tasks', metavar='T1,T2', help='faithfulness: robosuite tasks (default Lift,PickPlace,Stack)')
    p.add_argument('--onsets', metavar='O1,O2', help='faithfulness: geometry and/or skills (skill events decide '
                                                   'the pick and place onsets)')
    p.set_defaults(func=run)


ONLY_WHEN_NAMED = {'bench_soak'}


def run(args: argparse.Namespace) -> int:
    scripts = sorted(p for p in bench_dir().glob('bench_*.py'))
    known = {p.stem.removeprefix('bench_'): p for p in scripts}
    # The hour-long soak runs only when named (`safemanip bench soak`), not in `make bench`.
    scripts = [p for p in scripts if p.stem not in ONLY_WHEN_NAMED]
    if args.names:
        unknown = [n for n in args.names if n not in known]
        if unknown:
            raise SafemanipError(f'unknown benchmark(s) {unknown}; known: {sorted(known)}')
        scripts = [known[n] for n in args.names]
    if args.out is not None and any(p.stem == 'bench_faithfulness' for p in scripts):
        from .options import writable_folder
        writable_folder('--out', args.out)
    rc = 0
    for script in scripts:
        cmd = [sys.executable, str(script)] + (['--quick'] if args.quick else [])
        if script.stem == 'bench_faithfulness':
            for flag in ('rollouts', 'seed', 'out', 'tasks', 'onsets'):
                if getattr(args, flag) is not None:
                    cmd += [f'--{flag}', str(getattr(args, flag))]
            from ..sim.perception import LEVELS
            for level in args.perception or []:
                if level not in LEVELS:
                    raise SafemanipError(f'unknown perception level {level!r}; known: {", ".join(LEVELS)}')
                cmd += ['--perception', level]
        print(f'== {script.name}', flush=True)
        rc |= subprocess.call(cmd)
    return rc
