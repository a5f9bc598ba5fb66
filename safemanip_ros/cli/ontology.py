"""``safemanip ontology show TYPE``: what a type (or an entity of a robot
configuration) ends up with once the built-in ontology, the user's
ontology files and the rules are applied, where it is defined, and which
property templates bind to it."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import SpecError
from ..resources import default_suites
from . import add_verb
from .options import add_suite_options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    show = add_verb(sub, 'ontology', 'show what an ontology type or a scene entity ends up with', 'show',
                    'a type\'s values along kind, hazard, affordance and role', __doc__)
    show.add_argument('name', metavar='TYPE_OR_ENTITY', help='an ontology type or a scene entity')
    show.add_argument('--config', metavar='ROBOT.yaml', help='use this configuration\'s ontology layers and '
                      'entities (NAME may then be an entity id)')
    show.add_argument('--ontology', action='append', metavar='FILE.yaml', help='user ontology layered on top')
    add_suite_options(show, only=False)
    show.set_defaults(func=run_show)


def run_show(args: argparse.Namespace) -> int:
    from ..monitor.build import ontology_files
    from ..spec.ontology import DIMENSIONS, layered_ontology_files, load_ontology
    from ..spec.suite import load_suite
    files = ontology_files(args.config) if args.config else layered_ontology_files(args.ontology or [])
    if args.config and args.ontology:
        files += [Path(f) for f in args.ontology]
    onto = load_ontology(files)
    type_name, entity, overrides = args.name, None, None
    roles: tuple[str, ...] = ()
    if args.config:
        from ..monitor.build import scene_of_robot_config
        _, scene = scene_of_robot_config(args.config)
        if args.name in scene.entities:
            entity, type_name = args.name, scene.entities[args.name]
            overrides, roles = scene.overrides.get(entity), scene.roles.get(entity, ())
    if type_name not in onto.types:
        raise SpecError(f'{args.name!r} is neither a type of the ontology ({", ".join(str(f) for f in files)}) nor '
                        f'an entity of {args.config or "a configuration (give --config)"}; types: '
                        f'{", ".join(sorted(onto.types))}')
    head = f'entity {entity} (type {type_name})' if entity else f'type {type_name}'
    print(f'{head}, defined at {onto.type_sources.get(type_name, "?")}')
    print(f'  layers: {", ".join(str(f) for f in files)}')
    if roles:
        print(f'  scene roles: {", ".join(roles)} (applied below)')
    values = onto.values(type_name, overrides)
    for dim in DIMENSIONS:
        own = sorted(values[dim])
        implied = sorted(set().union(*(onto.ancestors(dim, v) for v in own)) - set(own)) if own else []
        print(f'  {dim:10s} {", ".join(own) or "-"}' + (f'   (so also: {", ".join(implied)})' if implied else ''))
    suite = load_suite([str(p) for p in (args.properties or default_suites())])
    binds = [f'{d.name} ({var})' for d in suite.properties for var, sel in d.over.items()
             if onto.matches(type_name, sel, overrides)]
    print(f'  binds      {", ".join(binds) or "no property template"}')
    return 0
