"""Building a :class:`Monitor` from files: property suites bound over a scene
(a scene file, or the entities of a robot configuration).  Shared by the
live monitor node, ``safemanip run`` and the offline audit, so they monitor
exactly the same instances."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import SpecError
from ..resources import config_dir
from ..spec.fields import Field, validate
from ..spec.ontology import (
    Ontology,
    Scene,
    builtin_ontology_files,
    layered_ontology_files,
    load_ontology,
    load_scene,
    scene_from_mapping,
)
from ..spec.suite import InstanceSet, instantiate, load_suite, restrict_to_grounded
from ..spec.yamlio import load_yaml
from .core import Monitor

CONFIG_DIR = config_dir()


def _default_ontology() -> Ontology:
    return load_ontology(builtin_ontology_files())


def ontology_files(robot_config: str | Path = '') -> list[Path]:
    """The ontology files a monitor built with this robot configuration
    loads: the built-in ontology, extended by the files its ``ontology``
    key names (relative to the configuration)."""
    named: list[str] = []
    if robot_config:
        try:
            st = os.stat(robot_config)
            named = list(_named_ontologies(str(robot_config), st.st_mtime_ns, st.st_size))
        except OSError:
            named = _named_ontologies.__wrapped__(str(robot_config), 0, 0)    # its error names the file
    base = Path(robot_config).parent if robot_config else Path('.')
    return layered_ontology_files([p if Path(p).is_absolute() else base / p for p in named])


@functools.lru_cache(maxsize=16)
def _named_ontologies(path: str, mtime_ns: int, size: int) -> list[str]:
    """The ``ontology`` list of a robot configuration, per version of the
    file (an audit's configuration key asks for it on every call)."""
    doc = load_yaml(path)
    return list((doc.get('ontology') if isinstance(doc, dict) else None) or [])


def scene_of_robot_config(path: str | Path) -> tuple[Ontology, Scene]:
    """(ontology, scene) from a robot configuration's ``ontology`` and ``entities``."""
    doc = load_yaml(path)
    others = doc if isinstance(doc, dict) else {}      # an empty or non-mapping file: validate says what it is
    validate(doc, Field('map', keys={'entities': Field('dict', required=True), 'ontology': Field('list')} |
                        {k: Field('any') for k in others if k not in ('entities', 'ontology')}), f'{path}:1', '')
    onto = load_ontology(ontology_files(path))
    ents = doc['entities']
    return onto, scene_from_mapping(ents, onto, str(path))


def build_instances(properties: Sequence[str | Path], scene: str = '', robot_config: str = '',
                    only: list[str] | None = None, rate_hz: float | None = None, strict: bool = False,
                    ontology: list[str] | None = None, entities: Mapping[str, str] | None = None) -> InstanceSet:
    """The property instances a monitor runs: the one place they are built
    (the monitor node, ``safemanip run``, the audit, ``monitor-trace``,
    ``doctor`` and the demos alike).

    The scene is a robot configuration's ``entities``, a scene file, or
    ``entities`` (entity → type) given directly, over the built-in ontology
    extended by ``ontology`` files; giving two of them is an error.  With no
    scene, templated properties are an error naming them (``only`` may
    leave them out).  With a robot configuration, instances reading a
    predicate none of its sources grounds are left out and listed in
    ``unsupported`` (``strict``: a SpecError naming them)."""
    given = [f'{what} {value}' for what, value in (('--scene', scene), ('--config', robot_config),
                                                  ('entities', entities)) if value or value == {}]
    if len(given) > 1:
        raise SpecError(f'{" and ".join(given)} both give the scene; a robot configuration\'s entities are '
                        f'its scene, so give one of them')
    suite = load_suite(properties)
    onto = sc = None
    if robot_config:
        onto, sc = scene_of_robot_config(robot_config)
    elif scene or entities is not None or ontology:
        onto = load_ontology(layered_ontology_files(ontology or [])) if ontology else _default_ontology()
        sc = load_scene(scene, onto) if scene else (scene_from_mapping(dict(entities), onto, 'entities')
                                                    if entities is not None else None)
    if sc is None:
        templated = [d.name for d in suite.properties if d.over and (not only or d.name in only)]
        if templated:
            raise SpecError(f'properties {templated} are templates bound to scene entities: give --scene '
                            f'SCENE.yaml (or a robot configuration), or --only the others')
    iset = instantiate(suite, onto, sc, only=only or None, rate_hz=rate_hz)
    if robot_config:
        from ..grounding.catalog import grounded_predicates
        from ..grounding.config import load_robot_config
        iset = restrict_to_grounded(iset, grounded_predicates(load_robot_config(robot_config)))
        if strict and iset.unsupported:
            raise SpecError(f'{robot_config}: --strict: {len(iset.unsupported)} properties read predicates this '
                            f'configuration does not ground: ' + '; '.join(
                                f'{k} needs {", ".join(v)}' for k, v in sorted(iset.unsupported.items())))
    return iset


def build_formula_instances(formulas: Mapping[str, str]) -> InstanceSet:
    """One instance per plain LTLf specification (name → formula; SpecRLBench's
    specifications, the Gymnasium wrapper's ``specs``), each reading the
    propositions its formula names: no scene, no templates."""
    from ..ltlf import parse
    from ..spec.suite import formula_suite
    return instantiate(formula_suite(formulas, {a for f in formulas.values() for a in parse(f).atoms}))


def build_monitor(properties: list[str], scene: str = '', robot_config: str = '', only: list[str] | None = None,
                  rate_hz: float | None = None, batch: int = 1, strict: bool = False,
                  keep_episodes: bool = True) -> Monitor:
    return Monitor(build_instances(properties, scene, robot_config, only, rate_hz, strict), batch=batch,
                   keep_episodes=keep_episodes)
