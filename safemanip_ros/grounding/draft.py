"""A first draft of a robot configuration from what a recording contains
(``safemanip config init --from-bag BAG``).

Everything the inputs show is filled in — joint names (arm and gripper told
apart by name), the gripper joints' calibration sign (from the range they
moved through), the TF root and a gripper frame, the contact bodies grouped
into robot, fingers and scene entities by name — and every choice only a
person can make is marked ``CHOOSE`` (an entity's ontology type, a
support's shape).  ``safemanip doctor`` then checks the result.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

import yaml

from .names import ObservedNames

CHOOSE = 'CHOOSE'
_PLAIN = re.compile(r'[A-Za-z_][A-Za-z0-9_./-]*')


def _q(name: str) -> str:
    """``name`` as a YAML scalar that loads back as exactly that string:
    plain where it is a plain word YAML reads as itself, else quoted (a body
    called ``a: b``, ``[x]``, ``true`` or ``1e3`` must not become another value)."""
    if _PLAIN.fullmatch(name) and yaml.safe_load(name) == name:
        return name
    return json.dumps(name, ensure_ascii=False)


def _qs(names: list[str]) -> str:
    return ", ".join(map(_q, names))
"""The marker of a value a person must fill in (the draft does not load until they do)."""
_GRIPPER = re.compile(r'finger|gripper|jaw|hand_joint', re.I)
_FINGER_BODY = re.compile(r'finger|pad|tip|jaw', re.I)
_ROBOT_BODY = re.compile(r'^(robot|gripper|fixed_mount|panda|ur|arm|base_link|link|wrist|shoulder|elbow|hand)', re.I)
_EEF = re.compile(r'eef|tool0|ee_link|tcp|grip_site|end_effector', re.I)
_SUFFIX = re.compile(r'(_main|_body|_link|_g\d+|_collision|_visual|_geom)$')


def _entity_id(body: str) -> str:
    name = _SUFFIX.sub('', body)
    name = re.sub(r'[^a-z0-9_]+', '_', re.sub(r'(?<=[a-z0-9])([A-Z])', r'_\1', name).lower()).strip('_')
    return name if re.match(r'[a-z]', name) else f'e_{name}'


def _root(seen: ObservedNames) -> str:
    roots = sorted({p for p in seen.parents.values() if p not in seen.parents})
    return roots[0] if roots else 'world'


def draft_robot_config(seen: ObservedNames, source: str, robot: str = 'my_robot') -> str:
    """The commented YAML text of a configuration drafted from ``seen``."""
    joints = sorted(seen.joints)
    gripper = [j for j in joints if _GRIPPER.search(j)]
    arm = [j for j in joints if j not in gripper]
    # End-effector frames, the ones on the robot first (not e.g. a visual target marker).
    eef = sorted((f for f in seen.frames if _EEF.search(f)), key=lambda f: (not _ROBOT_BODY.search(f), f))
    # Robot bodies: every TF frame or contact body named like a robot link (most links never touch anything).
    named = seen.contact_bodies | seen.frames
    robot_bodies = sorted(b for b in named if _ROBOT_BODY.search(b) and not _FINGER_BODY.search(b))
    finger_bodies = sorted(b for b in named if _FINGER_BODY.search(b) and _ROBOT_BODY.search(b)
                           or b in seen.contact_bodies and _FINGER_BODY.search(b))
    entities: dict[str, list[str]] = defaultdict(list)
    for b in sorted(seen.contact_bodies - set(robot_bodies) - set(finger_bodies)):
        if b == _root(seen):
            continue      # the world itself (a floor) is not an entity
        entities[_entity_id(b)].append(b)
    lines = [
        f'# Drafted by `safemanip config init` from {source}.',
        f'# Fill in every {CHOOSE} (an entity\'s ontology type — `safemanip ontology show TYPE` — and, for',
        '# supports and objects, their shape), review the guesses marked "guess", then run',
        f'#   safemanip doctor --config THIS_FILE {source}',
        f'robot: {robot}',
        'rate_hz: 20',
        f'world_frame: {_q(_root(seen))}               # the TF root seen in the recording',
        f'gripper_frame: {_q(eef[0]) if eef else CHOOSE}   # guess: ' +
        (f'frames that look like an end effector: {", ".join(eef)}' if eef else 'no frame looked like an end effector'),
        'joints:',
        f'  arm: [{_qs(arm)}]',
        f'  gripper: [{_qs(gripper)}]     # guess: joints named finger/gripper',
    ]
    cal = []
    for j in gripper:
        lo, hi = seen.joint_range.get(j, (0.0, 0.0))
        if hi <= 0.0 < abs(lo):
            cal.append(f'    {_q(j)}: {{sign: -1}}      # moved {lo:.4f} .. {hi:.4f}: opens towards negative positions')
    if cal:
        lines += ['  gripper_calibration:'] + cal
    lines += [
        'contacts:',
        f'  robot_bodies: [{_qs(robot_bodies)}]   # guess: bodies named like robot links',
        f'  finger_bodies: [{_qs(finger_bodies)}]   # guess: bodies named finger/pad/tip',
        '  min_finger_bodies: 2',
        'entities:                 # every other body that touched something in the recording',
    ]
    for eid, bodies in sorted(entities.items()):
        frame = next((b for b in bodies if b in seen.frames), None)
        frame_text = f', frame: {_q(frame)}' if frame else f', frame: {CHOOSE}'
        static = bool(frame and frame in seen.static_frames)
        hint = '  # fixed in the world: a support? give it roles: [support] and its shape' if static else \
            '  # moves: an object? its shape sets where its bottom is'
        lines.append(f'  {_q(eid)}: {{type: {CHOOSE}, bodies: [{_qs(bodies)}]{frame_text}, '
                     f'shape: {{box: [{CHOOSE}, {CHOOSE}, {CHOOSE}]}}}}{hint}')
    if not entities:
        lines.append('  {}')
    unmatched = sorted(seen.frames - {_root(seen)} - set(b for bs in entities.values() for b in bs))
    if unmatched:
        lines.append('# TF frames not used above (for tf.near / tf.inside / fixtures.*.interior): '
                     + ', '.join(unmatched[:40]) + (' ...' if len(unmatched) > 40 else ''))
    return '\n'.join(lines) + '\n'
