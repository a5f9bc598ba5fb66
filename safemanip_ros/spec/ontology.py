"""Entity ontology along ManipVerse's four dimensions and scenes.

* **Types** (``mug``, ``raw_chicken``, ``microwave``) carry values along four
  dimensions — ``kind``, ``hazard``, ``affordance``, ``role``.
* Each dimension has a **hierarchy** (child → parent: ``meat`` is a ``food``,
  ``raw`` is a ``contamination`` hazard); a type has a value if it has it or
  any descendant of it.
* **Rules** derive values (``when`` all selectors hold and ``unless`` none
  does, ``add`` values), applied to a fixpoint, like ManipVerse's
  ``meat ∧ ¬cooked → raw``.
* A **scene** lists the entities present, each an id of some type; property
  templates bind their variables to scene entities by selectors such as
  ``{affordance: graspable}`` or ``{hazard: contamination}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from ..errors import SpecError
from .fields import Field, validate
from .yamlio import Located, load_yaml

DIMENSIONS = ('kind', 'hazard', 'affordance', 'role')
ENTITY_ID = re.compile(r'[a-z][a-z0-9_]*\Z')

_VALUES = Field('list', items=Field('str'))
_DIMS = Field('map', keys={**{d: _VALUES for d in DIMENSIONS}, 'extend': Field('bool'), 'replace': Field('bool')})
ONTOLOGY_SCHEMA = Field('map', keys={
    'description': Field('str'),
    'hierarchy': Field('map', keys={d: Field('dict', values=Field('str')) for d in DIMENSIONS}),
    'types': Field('dict', values=_DIMS),
    'rules': Field('list', items=Field('map', keys={
        'when': Field('dict', values=Field('any'), required=True),
        'unless': Field('dict', values=Field('any')),
        'add': Field('map', keys={d: _VALUES for d in DIMENSIONS}, required=True),
        'doc': Field('str'),
    })),
})
SCENE_SCHEMA = Field('map', keys={
    'description': Field('str'),
    'entities': Field('dict', required=True, values=Field('map', keys={'type': Field('str', required=True)})),
})


@dataclass
class Ontology:
    """Types with their (closed, rule-derived) values and the hierarchies."""

    parents: dict[str, dict[str, str]] = field(default_factory=lambda: {d: {} for d in DIMENSIONS})
    types: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    type_sources: dict[str, str] = field(default_factory=dict)     # type → file:line of its (last) definition

    def ancestors(self, dimension: str, value: str) -> set[str]:
        """``value`` and everything above it in the dimension's hierarchy."""
        out = {value}
        parents = self.parents[dimension]
        while value in parents and parents[value] not in out:
            value = parents[value]
            out.add(value)
        return out

    def values(self, type_name: str, overrides: 'RoleOverride | None' = None) -> dict[str, set[str]]:
        """The type's own values per dimension, with a scene's per-entity
        additions and removals applied."""
        out = {d: set(self.types[type_name][d]) for d in DIMENSIONS}
        if overrides is not None:
            for dim, vals in overrides.add.items():
                out[dim] |= vals
            for dim, vals in overrides.remove.items():
                out[dim] -= vals
        return out

    def has(self, type_name: str, dimension: str, value: str, overrides: 'RoleOverride | None' = None) -> bool:
        """Whether the type has ``value`` (or a descendant of it) in ``dimension``."""
        return any(value in self.ancestors(dimension, v) for v in self.values(type_name, overrides)[dimension])

    def matches(self, type_name: str, selector: Mapping[str, object], overrides: 'RoleOverride | None' = None) -> bool:
        """All selector entries hold; a list value means any of its values.

        Keys are dimensions, ``type`` (the type or one of its kind ancestors
        by name) or ``not`` (a nested selector that must not match).
        ``overrides``: a scene entity's role adjustments."""
        for key, wanted in selector.items():
            if key == 'not':
                if self.matches(type_name, wanted, overrides):  # type: ignore[arg-type]
                    return False
                continue
            options = wanted if isinstance(wanted, list) else [wanted]
            if key == 'type':
                if type_name not in options:
                    return False
            elif not any(self.has(type_name, key, str(v), overrides) for v in options):
                return False
        return True

    def describe(self, type_name: str) -> dict[str, list[str]]:
        return {d: sorted(self.types[type_name][d]) for d in DIMENSIONS}


def _check_selector(selector: Mapping[str, object], where: str) -> None:
    for key, value in selector.items():
        if key == 'not':
            if not isinstance(value, Mapping):
                raise SpecError(f'{where}: selector "not" takes a nested selector mapping')
            _check_selector(value, where)
        elif key not in DIMENSIONS and key != 'type':
            raise SpecError(f'{where}: selector key {key!r} is not one of {list(DIMENSIONS) + ["type", "not"]}')


def builtin_ontology_files() -> list[Path]:
    """The ontology shipped with the package (``config/ontology/*.yaml``)."""
    from ..resources import config_dir
    return sorted((config_dir() / 'ontology').glob('*.yaml'))


def layered_ontology_files(user_files: Iterable[str | Path] = ()) -> list[Path]:
    """The built-in ontology, then the user's files on top (they extend it)."""
    builtin = builtin_ontology_files()
    resolved = {p.resolve() for p in builtin}
    return builtin + [Path(p) for p in user_files if Path(p).resolve() not in resolved]


def load_ontology(paths: Iterable[str | Path]) -> Ontology:
    """Merge ontology files in order.  A later file adds types, hierarchy
    edges and rules; redefining a type needs ``extend: true`` (add values)
    or ``replace: true`` (start it anew), and a hierarchy edge that
    contradicts an earlier one is an error: both name the file and line."""
    onto = Ontology()
    rules: list[tuple[Located, str]] = []
    for path in paths:
        doc = load_yaml(path) or Located()
        validate(doc, ONTOLOGY_SCHEMA, f'{path}:1', '')
        onto.sources.append(str(path))
        for dim, mapping in (doc.get('hierarchy') or {}).items():
            for child, parent in mapping.items():
                old = onto.parents[dim].get(child)
                if old is not None and old != parent:
                    raise SpecError(f'{mapping.where(child)}: hierarchy.{dim}.{child}: parent {parent!r} '
                                    f'conflicts with {old!r} from an earlier file')
                onto.parents[dim][child] = parent
        for name, dims in (doc.get('types') or {}).items():
            where = doc['types'].where(name)
            if not ENTITY_ID.match(name):
                raise SpecError(f'{where}: types.{name}: type names match [a-z][a-z0-9_]*')
            if dims.get('extend') and dims.get('replace'):
                raise SpecError(f'{where}: types.{name}: extend and replace exclude each other')
            if name in onto.types and not (dims.get('extend') or dims.get('replace')):
                raise SpecError(f'{where}: types.{name}: already defined at {onto.type_sources[name]}; write '
                                f'"extend: true" to add values to it or "replace: true" to redefine it')
            if name not in onto.types and dims.get('extend'):
                raise SpecError(f'{where}: types.{name}: "extend: true" but no earlier file defines {name!r} '
                                f'(known types: {", ".join(sorted(onto.types))})')
            if dims.get('replace'):
                onto.types.pop(name, None)
            entry = onto.types.setdefault(name, {d: set() for d in DIMENSIONS})
            onto.type_sources[name] = where
            for dim in DIMENSIONS:
                entry[dim].update(dims.get(dim) or [])
        for i, rule in enumerate(doc.get('rules') or []):
            _check_selector(rule['when'], rule.where('when'))
            _check_selector(rule.get('unless') or {}, rule.where('unless'))
            rules.append((rule, f'{path} rules[{i}]'))
    for dim, mapping in onto.parents.items():   # cycles in a hierarchy are errors
        for start in mapping:
            seen, value = {start}, start
            while value in mapping:
                value = mapping[value]
                if value in seen:
                    raise SpecError(f'{", ".join(onto.sources)}: hierarchy.{dim}: cycle through {start!r}')
                seen.add(value)
    changed = True
    while changed:   # rules to a fixpoint (values only grow, so this ends)
        changed = False
        for rule, _ in rules:
            for name in onto.types:
                if onto.matches(name, rule['when']) and not (rule.get('unless') and
                                                              onto.matches(name, rule['unless'])):
                    for dim, values in rule['add'].items():
                        new = set(values) - onto.types[name][dim]
                        if new:
                            onto.types[name][dim].update(new)
                            changed = True
    return onto


@dataclass(frozen=True)
class RoleOverride:
    """A scene's adjustment of one entity's values: ``add`` and ``remove``
    per dimension (from its ``roles``)."""

    add: dict[str, set[str]] = field(default_factory=dict)
    remove: dict[str, set[str]] = field(default_factory=dict)


SCENE_ROLES: dict[str, tuple[dict[str, set[str]], dict[str, set[str]]]] = {
    'support': ({'role': {'support_surface'}}, {}),
    'target': ({'role': {'target'}}, {}),
    'receiver': ({'role': {'receiver'}}, {}),
    'not_graspable': ({}, {'affordance': {'graspable'}}),
    'obstacle': ({'role': {'obstacle'}}, {'role': {'movable_object'}, 'affordance': {'graspable'}}),
}
"""Scene roles → (values added, values removed).  ``support``: objects rest
on it; ``target``/``receiver``: where grasped objects are meant to go (their
contacts while placing are allowed); ``not_graspable``: no per-object
properties; ``obstacle``: touching it is never allowed."""


def role_override(roles: Iterable[str], where: str) -> RoleOverride:
    out = RoleOverride()
    for role in roles:
        if role not in SCENE_ROLES:
            raise SpecError(f'{where}: unknown scene role {role!r}; known: {", ".join(SCENE_ROLES)}')
        add, remove = SCENE_ROLES[role]
        for dim, vals in add.items():
            out.add.setdefault(dim, set()).update(vals)
        for dim, vals in remove.items():
            out.remove.setdefault(dim, set()).update(vals)
    return out


@dataclass
class Scene:
    """Entities present: id → type name, and per-entity role overrides."""

    entities: dict[str, str]
    source: str = '<memory>'
    overrides: dict[str, RoleOverride] = field(default_factory=dict)
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def select(self, ontology: Ontology, selector: Mapping[str, object]) -> list[str]:
        """Ids of the entities whose type (with the scene's role overrides) matches ``selector``, sorted."""
        return sorted(e for e, t in self.entities.items() if ontology.matches(t, selector, self.overrides.get(e)))


def load_scene(path: str | Path, ontology: Ontology) -> Scene:
    doc = load_yaml(path)
    validate(doc, SCENE_SCHEMA, f'{path}:1', '')
    return scene_from_mapping(doc['entities'], ontology, str(path))


def scene_from_mapping(entities: Mapping[str, object], ontology: Ontology, source: str) -> Scene:
    """Entities from ``id → type`` or ``id → {type, roles, ...}`` (robot configurations)."""
    out = {}
    overrides: dict[str, RoleOverride] = {}
    roles: dict[str, tuple[str, ...]] = {}
    for eid, spec in entities.items():
        if isinstance(spec, Mapping) and spec.get('roles'):
            where_roles = spec.where('roles') if isinstance(spec, Located) else source
            roles[str(eid)] = tuple(spec['roles'])
            overrides[str(eid)] = role_override(spec['roles'], f'{where_roles}: entities.{eid}.roles')
        where = entities.where(eid) if isinstance(entities, Located) else source
        if not ENTITY_ID.match(str(eid)):
            raise SpecError(f'{where}: entities.{eid}: entity ids match [a-z][a-z0-9_]*')
        type_name = spec['type'] if isinstance(spec, Mapping) else spec
        if type_name not in ontology.types:
            raise SpecError(f'{where}: entities.{eid}: unknown type {type_name!r} '
                            f'(ontology types: {", ".join(sorted(ontology.types))})')
        out[str(eid)] = type_name
    return Scene(out, source, overrides, roles)
