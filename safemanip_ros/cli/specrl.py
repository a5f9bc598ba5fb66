"""``safemanip specrl``: SpecRLBench's evaluation of specification-conditioned
rollouts (``evaluate``) and its specification families (``families``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from ..errors import SafemanipError
from ..settings import RATE_HZ
from .options import add_frame_options

if TYPE_CHECKING:
    from ..specrl.families import Spec


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser('specrl', help="SpecRLBench's evaluation: success, violation and others rates per "
                                      'specification and seed')
    cmds = p.add_subparsers(dest='specrl_command', metavar='COMMAND')
    cmds.required = True
    e = cmds.add_parser(
        'evaluate', help='score recorded or live rollouts as SpecRLBench does',
        description="Per specification and seed: success rate ηs, violation rate ηv, others rate ηo and mean "
                    "steps to success µ (finite-horizon), ηv and mean accepting visits µacc (infinite-horizon), "
                    "mean ± std over seeds. Rollouts: JSONL proposition traces, SpecMonitor rollout logs or "
                    "PredicateArray bags (TRACES; a trajectory's seed is its record's seed, else the name of the "
                    "input given), or live LetterWorld rollouts (--env letter).")
    e.add_argument('traces', nargs='*', metavar='TRACES', help='files or folders of rollouts')
    e.add_argument('--family', action='append', default=[], metavar='NAME',
                   help='a specification family (repeat; `safemanip specrl families` lists them; paper: all)')
    e.add_argument('--formula', action='append', default=[], metavar='LTLF',
                   help='a specification of your own (repeat); finite-horizon unless it has G')
    e.add_argument('--count', type=int, default=3, help='specifications per sampled family (default 3)')
    e.add_argument('--n-seq', type=int, default=4, help='sampled families: sequence length 2-10 (default 4)')
    e.add_argument('--n-disj', type=int, default=0, help='sampled families: extra disjuncts per step (default 0)')
    e.add_argument('--family-seed', type=int, default=0, help='seed of the sampled families (default 0)')
    e.add_argument('--env', choices=['letter'], help='roll out live in LetterWorld instead of reading TRACES')
    e.add_argument('--policy', default='greedy', help='live: greedy, greedy-ignore-avoid or random')
    e.add_argument('--seeds', default='1,11,22,33,44', help='live: comma-separated seeds (default: the paper\'s)')
    e.add_argument('--trajectories', type=int, default=100, help='live: rollouts per seed (default 100)')
    e.add_argument('--horizon', type=int, default=75, help='live: steps per rollout (default 75)')
    e.add_argument('--log-dir', metavar='DIR', help='live: keep the rollout logs here')
    add_frame_options(e, rate_help='bags: ' + RATE_HZ.help(), staleness=False)
    e.add_argument('--absent-false', action='store_true',
                   help='traces of objects: read an atom no step names as false (default: an error, as for check)')
    e.add_argument('--json', action='store_true', help='one JSON object per specification and seed')
    e.add_argument('--per-seed', action='store_true', help='the table also lists each seed')
    e.add_argument('--engine', choices=['local', 'ray'], default='local',
                   help='local (default) or ray: specifications spread over Ray tasks, as the audit does')
    e.add_argument('--workers', type=int, default=2, help='ray: worker processes (default 2)')
    e.add_argument('--ray-address', help='ray: an existing cluster')
    e.set_defaults(func=run_evaluate)
    f = cmds.add_parser('families', help='list the specification families')
    f.add_argument('--formulas', action='store_true', help='also print each formula')
    f.set_defaults(func=run_families)


def _specs(args: argparse.Namespace) -> list[Spec]:
    from ..ltlf import parse
    from ..specrl.families import Spec, is_finite, select
    if args.count < 1 or not 1 <= args.n_seq <= 10 or not 0 <= args.n_disj <= 5:
        raise SafemanipError('--count >= 1, --n-seq in 1..10 and --n-disj in 0..5')
    try:
        specs = select(args.family, args.family_seed, args.count, args.n_seq, args.n_disj)
    except ValueError as err:
        raise SafemanipError(str(err)) from None
    for k, text in enumerate(args.formula):
        parse(text)         # a syntax error names its position
        specs.append(Spec(f'formula_{k + 1:02d}', text, is_finite(text), 'formula'))
    if not specs:
        raise SafemanipError('give --family NAME or --formula LTLF (safemanip specrl families lists the families)')
    return specs


MAX_LIVE = 100_000
"""The most rollouts per seed, and steps per rollout, of a live evaluation
(the paper's: 100 and 75); beyond it a run would not end in a day."""


def run_evaluate(args: argparse.Namespace) -> int:
    from ..specrl.evaluate import evaluate
    from ..specrl.metrics import format_table
    from .options import check_number, check_rate, writable_folder
    check_rate('--rate-hz', args.rate_hz)
    check_number('--workers', args.workers, 1, 1024)
    specs = _specs(args)
    warnings: list[str] = []
    if args.env:
        if args.traces:
            raise SafemanipError('give TRACES or --env, not both')
        try:
            seeds = [int(s) for s in args.seeds.split(',') if s.strip()]
        except ValueError:
            raise SafemanipError(f'--seeds {args.seeds!r}: expected comma-separated integers') from None
        if not seeds or not 1 <= args.trajectories <= MAX_LIVE or not 1 <= args.horizon <= MAX_LIVE:
            raise SafemanipError(f'--seeds, --trajectories and --horizon in 1..{MAX_LIVE} needed')
        again = sorted({s for s in seeds if seeds.count(s) > 1})
        if again:     # the same seed twice would count its trajectories twice
            raise SafemanipError(f'--seeds {args.seeds}: seed {again[0]} given more than once')
        if args.log_dir:
            writable_folder('--log-dir', args.log_dir)
        try:
            from ..gym.evaluation import letter_rollouts
        except ImportError as err:
            raise SafemanipError(f'--env needs gymnasium: pip install "safemanip_ros[gym]" ({err})') from None
        try:
            trajectories = letter_rollouts(specs, args.policy, seeds, args.trajectories, args.horizon,
                                           log_dir=args.log_dir)
        except ValueError as err:
            raise SafemanipError(str(err)) from None
        except OSError as err:      # the log folder went away or filled up while writing
            raise SafemanipError(f'--log-dir {args.log_dir}: {err.filename}: {err.strerror}') from None
    else:
        if not args.traces:
            raise SafemanipError('give TRACES (files or folders of rollouts) or --env letter')
        from ..specrl.traces import load
        atoms = sorted({a for s in specs for a in _atoms(s.formula)})
        trajectories = load(args.traces, atoms, args.rate_hz, warnings=warnings, absent_false=args.absent_false)
        if not trajectories:
            raise SafemanipError(f'no trajectory in {", ".join(args.traces)}')
    rows = evaluate(specs, trajectories, args.engine, args.workers, args.ray_address)
    for w in warnings:
        print(f'safemanip specrl: warning: {w}', file=sys.stderr)
    if args.json:
        for row in rows:
            if len(row.seeds) > 1:
                for s in row.seeds:
                    print(json.dumps(s.as_dict()))
            print(json.dumps(row.as_dict()))
    else:
        print(format_table(rows, per_seed=args.per_seed))
    return 0


def _atoms(formula: str) -> frozenset[str]:
    from ..ltlf import parse
    return parse(formula).atoms


def run_families(args: argparse.Namespace) -> int:
    from ..specrl.families import FIXED, SAMPLED, families
    for name, count, finite in families():
        print(f'{name:14s} {count:>3d} {"finite" if finite else "infinite"}-horizon')
        if args.formulas:
            for spec in FIXED[name]:
                print(f'    {spec.name}: {spec.formula}')
    for name in SAMPLED:
        print(f'{name:14s}   - sampled (--count, --n-seq 2-10, --n-disj, --family-seed)')
    print(f'{"paper":14s}   - every family above, sampled ones for n_seq 2-10 and n_disj 0-2')
    return 0
