"""``safemanip bag repair DIR...``: list again the splits a killed recorder
left out of ``metadata.yaml`` (from the bag's ``.splits.jsonl`` index), so
``ros2 bag`` and rosbags read the whole recording.  The audit reads bags
through the same repair without changing them.

``safemanip bag foxglove BAG --out FILE.mcap``: the recording as Foxglove
is sent it live (``--foxglove``): an MCAP file that opens with the shipped
layout (docs/nodes.md, Foxglove)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser('bag', help='bag tools: repair a bag left incomplete by a crash; a recording for Foxglove',
                       description=__doc__.split('\n\n')[0] if __doc__ else None)
    bag_sub = p.add_subparsers(dest='bag_command', metavar='BAG_COMMAND')
    bag_sub.required = True
    r = bag_sub.add_parser('repair', help='rewrite metadata.yaml to list every complete split present')
    r.add_argument('bags', nargs='+', metavar='DIR', help='bag folders to repair')
    r.add_argument('--dry-run', action='store_true', help='only say what would change')
    r.set_defaults(func=run_repair)
    f = bag_sub.add_parser('foxglove', help='write a recording as Foxglove is sent it live, to an MCAP file that '
                                            'opens with config/foxglove/safemanip.json')
    f.add_argument('bag', metavar='BAG', help='a recording of the stack (the recorder\'s, or ros2 bag record\'s)')
    f.add_argument('--out', required=True, metavar='FILE.mcap', help='the MCAP file to write (a new file)')
    f.add_argument('--config', metavar='ROBOT.yaml',
                   help='the robot configuration whose objects are marked when a violation names them')
    f.set_defaults(func=run_foxglove)


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


def run_foxglove(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..bag import BagError, is_bag
    from ..errors import SafemanipError
    from ..foxglove.recording import recording_to_mcap
    from ..foxglove.view import StackView
    from .options import new_file
    bag = Path(args.bag)
    if not is_bag(bag):
        raise SafemanipError(f'{bag}: not a rosbag2 recording (no metadata.yaml)')
    out = new_file('--out', args.out)
    robot = None
    if args.config:
        from ..grounding.config import load_robot_config
        robot = load_robot_config(args.config)
    try:
        written = recording_to_mcap(bag, out, StackView.of_robot(robot))
    except BagError as err:
        out.unlink(missing_ok=True)          # no half file that looks like a conversion
        raise SafemanipError(err.one_line()) from None
    if not written:
        print(f'{bag}: none of the stack\'s topics (verdicts, violations, supervisor actions, gate decisions, '
              f'TF, diagnostics) is in this recording; {out} holds nothing')
        return 1
    print(f'{out}: ' + ', '.join(f'{topic} {n}' for topic, n in sorted(written.items())))
    return 0
