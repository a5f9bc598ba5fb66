"""Property suites (YAML) and their instantiation over a scene.

A suite file declares

* ``predicates``: the grounded predicates it reads, each with ``unknown_as``
  (the value an *unknown* frame stands for before any temporal operator sees
  it; pick the conservative one) and a description;
* ``derived``: derived predicates, a device call or an expression each
  (SEMANTICS.md §3), or ``any(EXPR for VAR in {SELECTOR})``: the
  disjunction of ``EXPR`` over the scene entities the ontology selector
  matches (``false`` when none does);
* ``properties``: name, category, formula, trigger, recovery, end_policy,
  response, severity, description, and optionally ``over`` (template
  variables bound to scene entities by ontology selectors), ``needs``
  (the grounded predicates it reads, checked against the computed set),
  ``drop_open_shorter_than_frames`` and ``paper_timeout`` (episode rules,
  below);
* ``episode_rules`` (optional): how episodes are judged, for every
  property of the file — SEMANTICS.md §4 by default; a compatibility
  profile names the rules it changes (:class:`EpisodeRules`).

Names may contain ``{var}`` placeholders; instantiating a template with a
binding substitutes entity ids (``object_grasped_{object}`` →
``object_grasped_mug``).  Every error names the file, line and field.
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Mapping

from ..errors import LtlfSyntaxError, SpecError
from ..ltlf import parse
from ..ltlf.formula import Formula
from .expressions import TIMERS, DeviceSpec, parse_derived, parse_expression
from .fields import Field, validate
from .ontology import Ontology, Scene
from .yamlio import Located, load_yaml, loads_yaml

SAFEMANIP_CATEGORIES = ('collision_contact', 'grasp_stability', 'release_stability', 'cross_contamination',
                        'action_onset', 'mechanism', 'containment', 'enclosure_access')
RESPONSES = ('log', 'alert', 'pause', 'retract', 'stop')
SEVERITIES = ('info', 'warning', 'error', 'critical')
END_POLICIES = ('weak', 'strong')
_NAME = r'[a-z][a-z0-9_]*'
_TEMPLATE_NAME = re.compile(r'([a-z0-9_]|\{[a-z][a-z0-9_]*\})+\Z')
_PLACEHOLDER = re.compile(r'\{([a-z][a-z0-9_]*)\}')


def _name_check(value: str) -> str | None:
    return None if _TEMPLATE_NAME.match(value) and value[0] != '_' else \
        f'{value!r} is not a name ([a-z][a-z0-9_]*, with {{var}} placeholders in templates)'


PROPERTY_SCHEMA = Field('map', keys={
    'name': Field('str', required=True, check=_name_check),
    'category': Field('str', required=True, check=lambda v: None if re.fullmatch(_NAME, v) else
                      f'{v!r} is not a category name'),
    'formula': Field('str', required=True),
    'trigger': Field('str', required=True),
    'recovery': Field('str', required=True),
    'end_policy': Field('str', choices=END_POLICIES),
    'response': Field('str', choices=RESPONSES),
    'severity': Field('str', choices=SEVERITIES),
    'description': Field('str', required=True),
    'over': Field('dict', values=Field('dict', values=Field('any'))),
    'needs': Field('list', items=Field('str')),
    'drop_open_shorter_than_frames': Field('int', minimum=0),
    'paper_timeout': Field('str', check=_name_check),
})
RULES_SCHEMA = Field('map', keys={
    'recovery_judged_from': Field('str', choices=('violation_frame', 'next_frame')),
    'failed_restart_at_end': Field('str', choices=('violation', 'ignored')),
    'paper_metric': Field('bool'),
})
SUITE_SCHEMA = Field('map', keys={
    'suite': Field('str', required=True, check=lambda v: None if re.fullmatch(_NAME, v) else f'{v!r} is not a name'),
    'description': Field('str'),
    'rate_hz': Field('float', minimum=1e-6),
    'predicates': Field('dict', required=True, values=Field('map', keys={
        'unknown_as': Field('bool'), 'description': Field('str', required=True), 'source': Field('str'),
        'optional': Field('bool')})),
    'derived': Field('dict', values=Field('str')),
    'episode_rules': RULES_SCHEMA,
    'properties': Field('list', required=True, items=PROPERTY_SCHEMA),
})
_ANY = re.compile(r'\s*any\(\s*(?P<body>.+?)\s+for\s+(?P<var>[a-z][a-z0-9_]*)\s+in\s+(?P<sel>\{.*\})\s*\)\s*\Z', re.S)


@dataclass(frozen=True)
class EpisodeRules:
    """How an instance's episodes are judged.  The defaults are SEMANTICS.md
    §4; each other value is one named rule of SafeManip's released monitor,
    which its compatibility profile (``config/properties/safemanip_compat.yaml``)
    turns on.

    Attributes:
        recovery_next_frame: the recovery verdict is first judged on the frame
            after the violation (the recovery DFA still reads the violation
            frame), so an episode lasts at least two frames.
        count_failed_restart_at_end: a main DFA restarted on the last frame
            that is already false counts as a one-frame violation (§4); off,
            only episodes opened by then count.
        drop_open_shorter_than_frames: an episode still open at the end of the
            trace that lasted fewer frames is dropped, not counted (0: never);
            SafeManip's guard against a trace that ended mid-timeout.
        paper_metric: also give SafeManip's primary verdict per instance and
            rollout (the main formula over the whole trace, no restarts, an
            obligation still open at the end counted as violated).
        paper_timeout: for the primary verdict, a timeout predicate: a
            formula that is only unfinished at the end counts as satisfied
            when this never became true.
    """

    recovery_next_frame: bool = False
    count_failed_restart_at_end: bool = True
    drop_open_shorter_than_frames: int = 0
    paper_metric: bool = False
    paper_timeout: str | None = None


@dataclass(frozen=True)
class PredicateDecl:
    name: str
    unknown_as: bool
    description: str
    where: str
    optional: bool = False      # no source need ground it: absent, it reads as ``unknown_as``


@dataclass(frozen=True)
class PropertyDecl:
    """A property or template as written in the file."""

    name: str
    category: str
    formula: str
    trigger: str
    recovery: str
    end_policy: str
    response: str
    severity: str
    description: str
    over: dict[str, dict[str, str]]
    needs: tuple[str, ...] | None
    where: str
    entry: Located = field(repr=False, compare=False, default_factory=Located)
    rules: EpisodeRules = EpisodeRules()    # its file's episode_rules with its own options


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    rate_hz: float
    predicates: dict[str, PredicateDecl]
    derived: dict[str, tuple[str, str]]          # template name → (definition text, where)
    properties: list[PropertyDecl]
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Instance:
    """One property bound to entities: the unit with its own monitor state."""

    property: str
    instance: str
    binding: tuple[tuple[str, str], ...]
    category: str
    severity: str
    response: str
    end_policy: str
    description: str
    formula: Formula
    trigger: Formula
    recovery: Formula
    needs: frozenset[str]
    rules: EpisodeRules = EpisodeRules()


@dataclass(frozen=True)
class InstanceSet:
    """Everything the monitor needs: instances, the derived predicates they
    read (instantiated) and the grounded predicates with ``unknown_as``."""

    instances: list[Instance]
    derived: dict[str, DeviceSpec]
    predicates: dict[str, bool]
    suite: Suite
    unsupported: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Instances left out because no configured source grounds some
    predicate they read: instance id → those predicates (sorted)."""
    optional: frozenset[str] = frozenset()
    """Grounded predicates declared ``optional`` (no source need ground them)."""
    left_out: frozenset[str] = frozenset()
    """Grounded predicates read only by the instances left out (by ``only``,
    or as unsupported by a robot configuration; over the same scene): known
    to the suite, so a trace or bag that gives them is not giving an unknown
    name, only one this run does not read."""

    @property
    def known(self) -> frozenset[str]:
        """Every grounded predicate name of the suite over this scene."""
        return frozenset(self.predicates) | self.left_out


def _substitute(text: str, binding: Mapping[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: binding.get(m.group(1), m.group(0)), text)


def load_suite(paths: Iterable[str | Path] | str | Path) -> Suite:
    """Load and validate one or more suite files (merged in order)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    name, description, rate = '', '', 20.0
    predicates: dict[str, PredicateDecl] = {}
    derived: dict[str, tuple[str, str]] = {}
    props: list[PropertyDecl] = []
    sources = []
    for path in paths:
        doc = load_yaml(path)
        if not isinstance(doc, Located):
            raise SpecError(f'{path}:1: a suite file is a mapping with suite, predicates, properties')
        validate(doc, SUITE_SCHEMA, doc.where(), '')
        sources.append(str(path))
        name = name or doc['suite']
        description = description or doc.get('description', '')
        rate = float(doc.get('rate_hz', rate))
        for pname, decl in doc['predicates'].items():
            where = doc['predicates'].where(pname)
            if _name_check(pname):
                raise SpecError(f'{where}: predicates.{pname}: {_name_check(pname)}')
            if pname in predicates:
                first = predicates[pname]
                if (first.unknown_as, first.optional) == (bool(decl.get('unknown_as', False)),
                                                          bool(decl.get('optional', False))):
                    continue      # suites loaded together may each declare a shared input, identically
                raise SpecError(f'{where}: predicates.{pname}: already declared at {first.where} with other '
                                f'unknown_as/optional')
            predicates[pname] = PredicateDecl(pname, bool(decl.get('unknown_as', False)), decl['description'], where,
                                              bool(decl.get('optional', False)))
        for dname, text in (doc.get('derived') or {}).items():
            where = doc['derived'].where(dname)
            if _name_check(dname):
                raise SpecError(f'{where}: derived.{dname}: {_name_check(dname)}')
            if dname in derived and derived[dname][0].split('#')[0].strip() == text.split('#')[0].strip():
                continue          # the same definition in two suites loaded together
            if dname in predicates or dname in derived:
                raise SpecError(f'{where}: derived.{dname}: name already used by a predicate or derived predicate'
                                + (f' (defined as {derived[dname][0]!r} at {derived[dname][1]})' if dname in derived
                                   else ''))
            if isinstance(text, str) and text.lstrip().startswith('any('):
                _any_parts(text, f'{where}: derived.{dname}')      # checked now: errors point at the file
            else:
                parse_derived(_PLACEHOLDER.sub(lambda m: m.group(1), text), f'{where}: derived.{dname}')
            derived[dname] = (text, where)
        file_rules = doc.get('episode_rules') or {}
        seen = {p.name for p in props}
        for i, entry in enumerate(doc['properties']):
            where = doc['properties'].where(i)
            if entry['name'] in seen:
                raise SpecError(f'{where}: properties[{i}].name: duplicate property {entry["name"]!r}')
            seen.add(entry['name'])
            over = dict(entry.get('over') or {})
            for var, sel in over.items():
                if not re.fullmatch(_NAME, var):
                    raise SpecError(f'{entry.where("over")}: properties[{i}].over.{var}: variable names match {_NAME}')
            for fld in ('name', 'formula', 'trigger', 'recovery'):
                unbound = set(_PLACEHOLDER.findall(entry[fld])) - set(over)
                if unbound:
                    raise SpecError(f'{entry.where(fld)}: properties[{i}].{fld}: placeholder(s) '
                                    f'{sorted(unbound)} are not variables of "over" ({sorted(over) or "none"})')
            # Syntax is checked now (with placeholders as atoms), so errors point at the file.
            for fld in ('formula', 'recovery'):
                try:
                    parse(_PLACEHOLDER.sub(lambda m: m.group(1), entry[fld]))
                except LtlfSyntaxError as err:
                    raise SpecError(f'{entry.where(fld)}: properties[{i}].{fld}: {err.message} at position '
                                    f'{err.position} of {entry[fld]!r}') from err
            parse_expression(_PLACEHOLDER.sub(lambda m: m.group(1), entry['trigger']),
                             f'{entry.where("trigger")}: properties[{i}].trigger')
            if 'paper_timeout' in entry:
                unbound = set(_PLACEHOLDER.findall(entry['paper_timeout'])) - set(over)
                if unbound:
                    raise SpecError(f'{entry.where("paper_timeout")}: properties[{i}].paper_timeout: placeholder(s) '
                                    f'{sorted(unbound)} are not variables of "over" ({sorted(over) or "none"})')
            rules = EpisodeRules(
                recovery_next_frame=file_rules.get('recovery_judged_from', 'violation_frame') == 'next_frame',
                count_failed_restart_at_end=file_rules.get('failed_restart_at_end', 'violation') == 'violation',
                drop_open_shorter_than_frames=int(entry.get('drop_open_shorter_than_frames', 0)),
                paper_metric=bool(file_rules.get('paper_metric', False)),
                paper_timeout=entry.get('paper_timeout'))
            props.append(PropertyDecl(
                entry['name'], entry['category'], entry['formula'], entry['trigger'], entry['recovery'],
                entry.get('end_policy', 'weak'), entry.get('response', 'alert'), entry.get('severity', 'error'),
                entry['description'], over, tuple(entry['needs']) if 'needs' in entry else None, where, entry,
                rules))
    categories = {d.category for d in props}
    for d in props:
        if d.name in categories:
            # `--max-rate NAME`, a policy's property/category sections and the gate's counts read a name as
            # either; one name for both would mean different things in different commands.
            raise SpecError(f'{d.where}: property {d.name!r} has the name of a category (of '
                            f'{", ".join(sorted(p.name for p in props if p.category == d.name))}); rename one')
    return Suite(name, description, rate, predicates, derived, props, tuple(sources))


def _bindings(decl: PropertyDecl, ontology: Ontology | None, scene: Scene | None) -> list[dict[str, str]]:
    if not decl.over:
        return [{}]
    if ontology is None or scene is None:
        raise SpecError(f'{decl.where}: property {decl.name!r} is a template (over: {sorted(decl.over)}); '
                        f'give a scene and an ontology to bind it')
    choices = []
    for var, selector in decl.over.items():
        choices.append([(var, e) for e in scene.select(ontology, selector)])
    out = []
    for combo in itertools.product(*choices):
        entities = [e for _, e in combo]
        if len(set(entities)) == len(entities):   # distinct variables bind distinct entities
            out.append(dict(combo))
    return out


def instantiate(suite: Suite, ontology: Ontology | None = None, scene: Scene | None = None,
                only: Iterable[str] | None = None, rate_hz: float | None = None) -> InstanceSet:
    """Bind every property over the scene; resolve derived and grounded predicates.

    ``rate_hz``: the frame rate the instances will run at; device windows
    (written in frames at the suite's ``rate_hz``) are rescaled to it,
    rounding to the nearest frame (at least 1; timeouts may be 0).

    Raises SpecError for unknown predicates (listing the known ones), derived
    cycles (naming them), conflicting instantiations and ``needs`` mismatches.
    """
    wanted = set(only) if only is not None else None
    instances: list[Instance] = []
    derived: dict[str, tuple[DeviceSpec, str]] = {}
    predicates: dict[str, bool] = {}
    optional: set[str] = set()
    for decl in suite.properties:
        if wanted is not None and decl.name not in wanted:
            continue
        for binding in _bindings(decl, ontology, scene):
            instances.append(_instantiate_one(suite, decl, binding, derived, predicates, optional, ontology, scene))
    if wanted is not None:
        missing = wanted - {d.name for d in suite.properties}
        if missing:
            raise SpecError(f'unknown properties {sorted(missing)}; known: {sorted(d.name for d in suite.properties)}')
    scale = 1.0 if rate_hz is None else rate_hz / suite.rate_hz
    if rate_hz is not None and rate_hz <= 0:
        raise SpecError(f'rate_hz must be > 0, got {rate_hz}')
    specs = {name: _rescaled(spec, scale) for name, (spec, _) in derived.items()}
    _check_acyclic(specs, {name: where for name, (_, where) in derived.items()})
    if scale != 1.0:
        instances = [_rescaled_rules(inst, scale) for inst in instances]
    left_out = _read_by_others(suite, wanted, ontology, scene) - set(predicates) if wanted is not None else set()
    return InstanceSet(instances, specs, predicates, suite, optional=frozenset(optional), left_out=frozenset(left_out))


def _read_by_others(suite: Suite, wanted: set[str], ontology: Ontology | None, scene: Scene | None) -> set[str]:
    """The grounded predicates the properties outside ``wanted`` read; a
    property that cannot be bound here (a template with no scene, or an
    error of its own, which its own run would report) adds none."""
    predicates: dict[str, bool] = {}
    for decl in suite.properties:
        if decl.name in wanted:
            continue
        try:
            for binding in _bindings(decl, ontology, scene):
                _instantiate_one(suite, decl, binding, {}, predicates, set(), ontology, scene)
        except SpecError:
            continue
    return set(predicates)


def restrict_to_grounded(iset: InstanceSet, grounded: Iterable[str]) -> InstanceSet:
    """The instances whose every read predicate is grounded (or declared
    ``optional``); the others are *unsupported* in this configuration and
    listed in :attr:`InstanceSet.unsupported` — never run with
    ``unknown_as`` standing in for a whole signal."""
    have = set(grounded) | iset.optional
    kept: list[Instance] = []
    unsupported = dict(iset.unsupported)
    for inst in iset.instances:
        missing = sorted(inst.needs - have)
        if missing:
            unsupported[inst.instance] = tuple(missing)
        else:
            kept.append(inst)
    reach: set[str] = set()
    stack = [a for i in kept for f in (i.formula, i.recovery, i.trigger) for a in f.atoms]
    while stack:
        n = stack.pop()
        if n not in reach:
            reach.add(n)
            if n in iset.derived:
                stack.extend(iset.derived[n].inputs)
    predicates = {p: v for p, v in iset.predicates.items() if p in reach}
    # Names only the instances left out read stay known: a recording may give them.
    return InstanceSet(kept, {n: d for n, d in iset.derived.items() if n in reach}, predicates, iset.suite,
                       unsupported, iset.optional, left_out=iset.known - set(predicates))


@functools.lru_cache(maxsize=256)
def _any_parts(text: str, where: str) -> tuple[str, str, dict[str, object]]:
    """(body, variable, selector) of ``any(BODY for VAR in {SELECTOR})``,
    each checked: the body is an expression, the selector a mapping (parsed
    once per definition; callers do not change the selector)."""
    m = _ANY.match(text)
    if m is None:
        raise SpecError(f'{where}: {text!r} is not any(EXPR for VAR in {{SELECTOR}}), e.g. '
                        f'any(object_grasped_{{object}} for object in {{affordance: graspable}})')
    body, var, sel_text = m.group('body'), m.group('var'), m.group('sel')
    parse_expression(_PLACEHOLDER.sub(lambda p: p.group(1), body), where, m.start('body'), text)
    if f'{{{var}}}' not in body:
        raise SpecError(f'{where}: the expression of {text!r} does not use {{{var}}}')
    try:
        selector = loads_yaml(sel_text, where)
    except SpecError as err:
        raise SpecError(f'{where}: the selector of {text!r} is not YAML: {err}') from err
    if not isinstance(selector, dict) or not selector:
        raise SpecError(f'{where}: the selector of {text!r} is not a mapping such as {{affordance: graspable}}')
    return body, var, dict(selector)


def _instantiate_one(suite: Suite, decl: PropertyDecl, binding: dict[str, str],
                     derived: dict[str, tuple[DeviceSpec, str]], predicates: dict[str, bool],
                     optional: set[str], ontology: Ontology | None = None, scene: Scene | None = None) -> Instance:
    # Every derived/predicate template whose placeholders this binding fills; an any() derived
    # predicate also brings the templates its own variable fills, for each entity it ranges over.
    local_derived: dict[str, tuple[str, str]] = {}
    local_preds: dict[str, PredicateDecl] = {}
    done: set[tuple[tuple[str, str], ...]] = set()

    def bind(b: dict[str, str]) -> None:
        key = tuple(sorted(b.items()))
        if key in done:
            return
        done.add(key)
        for tname, (text, text_where) in suite.derived.items():
            if set(_PLACEHOLDER.findall(tname)) <= set(b):
                name = _substitute(tname, b)
                if name in local_derived:
                    continue
                if not text.lstrip().startswith('any('):
                    local_derived[name] = (_substitute(text, b), text_where)
                    continue
                body, var, selector = _any_parts(text, f'{text_where}: derived.{tname}')
                if ontology is None or scene is None:
                    raise SpecError(f'{text_where}: derived.{tname} ranges over scene entities ({text!r}); '
                                    f'give a scene and an ontology')
                local_derived[name] = ('false', text_where)     # taken: the entities' bindings skip it
                terms = []
                for entity in scene.select(ontology, selector):
                    inner = {**b, var: entity}
                    terms.append(f'({_substitute(body, inner)})')
                    bind(inner)
                local_derived[name] = (' | '.join(terms) or 'false', text_where)
        for tname, pdecl in suite.predicates.items():
            if set(_PLACEHOLDER.findall(tname)) <= set(b):
                local_preds.setdefault(_substitute(tname, b), pdecl)

    bind(binding)
    entry = decl.entry

    def where(fld: str) -> str:
        return entry.where(fld) if isinstance(entry, Located) and entry else decl.where

    formula = parse(_substitute(decl.formula, binding))
    recovery = parse(_substitute(decl.recovery, binding))
    trigger = parse_expression(_substitute(decl.trigger, binding), f'{where("trigger")}: {decl.name}.trigger')
    needs: set[str] = set()
    stack = [(a, fld) for fld, f in (('formula', formula), ('recovery', recovery), ('trigger', trigger))
             for a in sorted(f.atoms)]
    visited: set[str] = set()
    while stack:
        name, fld = stack.pop()
        if name in visited:
            continue
        visited.add(name)
        if name in local_derived:
            text, dwhere = local_derived[name]
            spec = parse_derived(text, f'{dwhere}: derived.{name}')
            old = derived.get(name)
            if old is not None and str(old[0]) != str(spec):
                raise SpecError(f'{dwhere}: derived.{name}: instantiates to {spec} here but {old[0]} elsewhere')
            derived[name] = (spec, dwhere)
            stack.extend((a, fld) for a in sorted(spec.inputs))
        elif name in local_preds:
            needs.add(name)
            predicates[name] = local_preds[name].unknown_as
            if local_preds[name].optional:
                optional.add(name)
        else:
            known = sorted(set(local_preds) | set(local_derived))
            raise SpecError(f'{where(fld)}: {decl.name}.{fld}: unknown predicate {name!r}; known predicates: '
                            f'{", ".join(known)}')
    if decl.needs is not None:
        declared = {_substitute(n, binding) for n in decl.needs}
        if declared != needs:
            raise SpecError(f'{where("needs")}: {decl.name}.needs: declares {sorted(declared)} but the property '
                            f'reads {sorted(needs)}')
    name = decl.name if not binding else _substitute(decl.name, binding)
    inst_id = name if not binding else f'{name}[{",".join(f"{k}={v}" for k, v in sorted(binding.items()))}]'
    rules = decl.rules
    if rules.paper_timeout is not None:
        timeout = _substitute(rules.paper_timeout, binding)
        if timeout not in visited:
            raise SpecError(f'{where("paper_timeout")}: {decl.name}.paper_timeout: {timeout!r} is not a predicate '
                            f'the property reads; it reads {", ".join(sorted(visited))}')
        rules = replace(rules, paper_timeout=timeout)
    return Instance(decl.name, inst_id, tuple(sorted(binding.items())), decl.category, decl.severity,
                    decl.response, decl.end_policy, decl.description, formula, trigger, recovery,
                    frozenset(needs), rules)


def _rescaled_rules(inst: Instance, scale: float) -> Instance:
    """``inst`` with its episode-rule windows (frames at the suite's rate) at the run's rate."""
    frames = inst.rules.drop_open_shorter_than_frames
    if not frames:
        return inst
    return replace(inst, rules=replace(inst.rules, drop_open_shorter_than_frames=max(1, int(round(frames * scale)))))


def _rescaled(spec: DeviceSpec, scale: float) -> DeviceSpec:
    if scale == 1.0 or spec.kind == 'expr' or not spec.window_frames:
        return spec
    floor = 0 if spec.kind in TIMERS else 1
    return DeviceSpec(spec.kind, spec.args, max(floor, int(round(spec.window_frames * scale))))


def _check_acyclic(specs: Mapping[str, DeviceSpec], wheres: Mapping[str, str]) -> None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        path.append(n)
        for m in sorted(specs[n].inputs):
            if m not in specs:
                continue
            if state.get(m) == 1:
                cycle = path[path.index(m):] + [m]
                raise SpecError(f'{wheres[m]}: derived predicates form a cycle: {" -> ".join(cycle)}')
            if m not in state:
                visit(m)
        path.pop()
        state[n] = 2

    for n in sorted(specs):
        if n not in state:
            visit(n)


def formula_suite(specs: Mapping[str, str], atoms: Iterable[str], name: str = 'formulas',
                  category: str = 'specification') -> Suite:
    """A suite of plain specifications, one property each, as a
    specification is monitored from the start of a rollout: trigger on the
    first frame, no recovery (a violation is final), weak end (an open
    obligation at the end is pending, not a violation).  ``atoms``: every
    proposition the formulas may read (declared, unknown as false)."""
    preds = {a: PredicateDecl(a, False, f'proposition {a}', name) for a in sorted(set(atoms))}
    for f in specs.values():
        parse(f)          # a syntax error names its position
    props = [PropertyDecl(n, category, f, 'true', 'false', 'weak', 'log', 'info', f, {}, None, f'{name}: {n}')
             for n, f in specs.items()]
    return Suite(name, '', 20.0, preds, {}, props, ())
