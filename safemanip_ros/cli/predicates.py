"""``safemanip predicates --config FILE``: the predicates a robot configuration grounds."""

from __future__ import annotations

import argparse
import json

from ..grounding.catalog import predicate_catalog
from ..grounding.config import load_robot_config


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser('predicates', help='list the grounded predicates of a robot configuration',
                       description='Load a robot/scene configuration (config/robots/*.yaml) and list every '
                                   'predicate its grounding sources publish, with its meaning.')
    p.add_argument('--config', required=True, metavar='ROBOT.yaml', help='the robot configuration')
    p.add_argument('--json', action='store_true', help='print JSON (default: a readable table)')
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rows = predicate_catalog(load_robot_config(args.config))
    if args.json:
        print(json.dumps([{'source': s, 'name': n, 'meaning': m} for s, n, m in rows]))
        return 0
    for source, name, meaning in rows:
        print(f'{source:13s} {name:42s} {meaning}')
    return 0
