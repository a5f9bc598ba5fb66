"""``safemanip config init --from-bag BAG``: a commented first draft of a
robot configuration from what a recorded bag contains (joint names, TF
frames, contact bodies grouped by name), with every choice a person must
make marked CHOOSE; ``safemanip doctor`` checks it afterwards."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import SafemanipError
from . import add_verb


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = add_verb(sub, 'config', 'draft a robot configuration from a recording', 'init',
                    'write a first draft from a bag', __doc__)
    init.add_argument('--from-bag', required=True, metavar='BAG', help='a recording of the robot to draft from')
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
