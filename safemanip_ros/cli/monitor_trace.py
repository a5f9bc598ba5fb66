"""``safemanip monitor-trace``: run a property suite over one predicate trace."""

from __future__ import annotations

import argparse
import json

from ..errors import SafemanipError
from ..monitor.build import build_instances
from ..monitor.core import Monitor
from ..monitor.frames import read_frames
from ..resources import config_dir
from .options import add_frame_options, add_profile, add_suite_options, profile_properties

CONFIG = config_dir()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        'monitor-trace', help='run a property suite over a predicate trace',
        description='Monitor TRACE.jsonl (one frame per line: predicate -> true/false/null, null = unknown; '
                    'a predicate missing from a frame is unknown) with the properties of --properties and print '
                    'triggers, violations, episodes and unknown frames per property instance.')
    p.add_argument('trace', help='JSONL predicate frames')
    add_suite_options(p, scene='', only=False)
    p.add_argument('--ontology', action='append', metavar='ONTOLOGY.yaml',
                   help=f'ontology file(s) extending the built-in one ({CONFIG / "ontology"}/*.yaml)')
    p.add_argument('--only', action='append', metavar='PROPERTY', help='monitor only these properties (repeatable)')
    add_frame_options(p, rate_help="the trace's frame rate; device windows are rescaled from the suite's rate_hz "
                                   "(default: the suite's rate)", staleness=False, rate_default=False)
    p.add_argument('--json', action='store_true', help='print JSON (default: a readable table)')
    add_profile(p)
    p.add_argument('--allow-unknown-predicates', action='store_true',
                   help='ignore names the suite does not know (default: an error listing the known ones; names only '
                        'properties --only left out read are known, and not read)')
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.rate_hz is not None:
        from .options import check_rate
        check_rate('--rate-hz', args.rate_hz)
    if not args.properties and args.profile == 'default':
        raise SafemanipError('give the properties to monitor: --properties P.yaml (repeatable) or '
                             '--profile safemanip-compat')
    iset = build_instances(profile_properties(args), args.scene or '', only=args.only, rate_hz=args.rate_hz,
                           ontology=args.ontology)
    monitor = Monitor(iset)
    values, unknown = read_frames(args.trace, monitor.predicates, args.allow_unknown_predicates,
                                  monitor.known_predicates)
    result = monitor.run(values[None], unknown[None])[0]
    out = result.to_dict()
    if args.json:
        print(json.dumps(out))
        return 0
    paper = any('paper' in p for p in out['properties'])
    print(f"{out['frames']} frames, {len(out['properties'])} property instances"
          + (" (paper: SafeManip's primary verdict)" if paper else ''))
    print(f"{'instance':58s} {'N':>4s} {'V':>4s} {'U':>5s} pending " + ('paper ' if paper else '') + ' episodes')
    for p in out['properties']:
        eps = ' '.join(f"[{e['start']},{e['end']}{'' if e['recovered'] else ',open'}]" for e in p['episodes'])
        verdict = ('viol. ' if p['paper']['violated'] else 'ok    ') if paper else ''
        print(f"{p['instance'][:58]:58s} {p['triggers']:4d} {p['violations']:4d} {p['unsafe_frames']:5d} "
              f"{'yes' if p['pending'] else 'no ':7s} {verdict} {eps}")
    return 0
