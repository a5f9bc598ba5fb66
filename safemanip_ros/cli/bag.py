"""``safemanip bag repair DIR...``: list again the splits a killed recorder
left out of ``metadata.yaml`` (from the bag's ``.splits.jsonl`` index), so
``ros2 bag`` and rosbags read the whole recording.  The audit reads bags
through the same repair without changing them."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser('bag', help='bag tools: repair a bag left incomplete by a crash',
                       description=__doc__.split('\n\n')[0] if __doc__ else None)
    bag_sub = p.add_subparsers(dest='bag_command', metavar='BAG_COMMAND')
    bag_sub.required = True
    r = bag_sub.add_parser('repair', help='rewrite metadata.yaml to list every complete split present')
    r.add_argument('bags', nargs='+', metavar='DIR', help='bag folders to repair')
    r.add_argument('--dry-run', action='store_true', help='only say what would change')
    r.set_defaults(func=run_repair)


def run_repair(args: argparse.Namespace) -> int:
    from ..bag.repair import BagRepairError, repair_bag, repaired_metadata
    failed = 0
    for bag in args.bags:
        try:
            report = repaired_metadata(bag)[1] if args.dry_run else repair_bag(bag)
        except BagRepairError as err:
            print(f'safemanip: error: {err.one_line()}')
            failed += 1
            continue
        for line in report.lines():
            print(line)
    return 2 if failed else 0
