"""``safemanip config init --from-bag BAG``: a commented first draft of a
robot configuration from what a recorded bag contains (joint names, TF
frames, contact bodies grouped by name), with every choice a person must
make marked CHOOSE; ``safemanip doctor`` checks it afterwards."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import SafemanipError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser('config', help='draft a robot configuration from a recording')
    verbs = p.add_subparsers(dest='verb', metavar='VERB')
    verbs.required = True
    init = verbs.add_parser('init', help='write a first draft from a bag',
                            description=__doc__.split('\n\n')[0].split(': ', 1)[1] if __doc__ else None)
    init.add_argument('--from-bag', required=True, metavar='BAG')
    init.add_argument('--out', metavar='ROBOT.yaml', help='write here (default: print it)')
    init.add_argument('--robot', default='my_robot', help='the robot\'s name in the draft')
    init.set_defaults(func=run_init)


def run_init(args: argparse.Namespace) -> int:
    from ..grounding.draft import CHOOSE, draft_robot_config
    from ..grounding.names import ObservedNames
    seen = ObservedNames.from_bag(args.from_bag)
    if not (seen.joints or seen.frames or seen.contact_bodies):
        raise SafemanipError(f'{args.from_bag}: no joint states, TF or contacts to draft from; topics: '
                             f'{", ".join(sorted(seen.topics)) or "none"}')
    text = draft_robot_config(seen, args.from_bag, args.robot)
    if args.out:
        out = Path(args.out)
        if out.exists():
            raise SafemanipError(f'--out {out}: exists; choose a new file (the draft never overwrites)')
        out.write_text(text)
        print(f'wrote {out}: {text.count(CHOOSE)} choices marked {CHOOSE}; then run: safemanip doctor --config '
              f'{out} {args.from_bag}', file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
