"""Configuring a new cell without code: ontology layering, scene roles, and
what ``safemanip ontology show`` reports."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import (
    REPO,  # noqa: E402
    run_cli,
)

from safemanip_ros.errors import SpecError
from safemanip_ros.grounding.config import load_robot_config
from safemanip_ros.monitor.build import build_instances
from safemanip_ros.spec.ontology import builtin_ontology_files, layered_ontology_files, load_ontology

PROPS = [str(REPO / 'config' / 'properties' / 'safemanip.yaml'), str(REPO / 'config' / 'properties' / 'physical.yaml')]

STACK = """\
robot: stacker
world_frame: world
gripper_frame: eef
ontology: [blocks.yaml]
joints: {arm: [j1, j2], gripper: [f1, f2]}
contacts: {robot_bodies: [link1], finger_bodies: [f1_pad, f2_pad]}
entities:
  cube_a: {type: cube, bodies: [cubeA_main], frame: cubeA_main, shape: {box: [0.02, 0.02, 0.02]}}
  cube_b: {type: cube, bodies: [cubeB_main], frame: cubeB_main, shape: {box: [0.025, 0.025, 0.025]},
           roles: [support, target, not_graspable]}
  table: {type: table, bodies: [table], frame: table, shape: {box: [0.4, 0.4, 0.025]}}
  bar: {type: toy_block, bodies: [bar_main], frame: bar_main, roles: [obstacle]}
"""
BLOCKS = """\
description: a user's layer on the built-in ontology
types:
  toy_block: {kind: [block], affordance: [graspable], role: [movable_object]}
  cube: {extend: true, hazard: [fragile]}
"""


def _stack(tmp_path, blocks: str = BLOCKS, stack: str = STACK) -> Path:
    (tmp_path / 'blocks.yaml').write_text(blocks)
    path = tmp_path / 'stack.yaml'
    path.write_text(stack)
    return path


def test_user_ontology_extends_the_builtin_one(tmp_path):
    path = _stack(tmp_path)
    cfg = load_robot_config(path)
    assert 'toy_block' in cfg.ontology.types and 'raw_chicken' in cfg.ontology.types   # built-in kept
    assert cfg.ontology.types['cube']['hazard'] == {'fragile'}                         # extended
    assert cfg.ontology.types['cube']['affordance'] == {'graspable'}


def test_ontology_conflicts_name_both_places(tmp_path):
    (tmp_path / 'mine.yaml').write_text('types:\n  mug: {kind: [tableware]}\n')
    with pytest.raises(SpecError, match=r'mine.yaml:2: types.mug: already defined at .*kitchen.yaml:\d+; write '
                                        r'"extend: true" .* "replace: true"'):
        load_ontology(layered_ontology_files([tmp_path / 'mine.yaml']))
    (tmp_path / 'mine.yaml').write_text('types:\n  mugg: {extend: true, kind: [tableware]}\n')
    with pytest.raises(SpecError, match=r"types.mugg: \"extend: true\" but no earlier file defines 'mugg'"):
        load_ontology(layered_ontology_files([tmp_path / 'mine.yaml']))
    (tmp_path / 'mine.yaml').write_text('types:\n  mug: {replace: true, kind: [tableware], role: [movable_object]}\n')
    onto = load_ontology(layered_ontology_files([tmp_path / 'mine.yaml']))
    assert onto.types['mug']['affordance'] == set() and onto.types['mug']['hazard'] == set()
    (tmp_path / 'mine.yaml').write_text('hierarchy:\n  kind:\n    meat: drink\n')
    with pytest.raises(SpecError, match=r"hierarchy.kind.meat: parent 'drink' conflicts with 'food'"):
        load_ontology(layered_ontology_files([tmp_path / 'mine.yaml']))
    assert layered_ontology_files(builtin_ontology_files()) == builtin_ontology_files()   # never loaded twice


def test_scene_roles_override_the_type(tmp_path):
    path = _stack(tmp_path)
    cfg = load_robot_config(path)
    # cube_b is typed cube, but the scene says it is a support and a target, not something to pick.
    assert cfg.contacts.graspable == {'cube_a'}
    assert set(cfg.tf.objects) == {'cube_a'}
    assert set(cfg.tf.supports) == {'cube_b', 'table'}                       # table: its type's role + a shape
    assert cfg.tf.supports['cube_b'].top_z_m == pytest.approx(0.025)
    assert 'cube_b' in cfg.contacts.grasp_targets['cube_a']                 # placing onto the target may touch it
    assert 'bar' not in cfg.contacts.movable                                 # an obstacle is never to be touched
    iset = build_instances(PROPS, robot_config=str(path))
    bound = {i.instance for i in iset.instances} | set(iset.unsupported)
    assert 'release_only_over_support[object=cube_a]' in bound
    assert not any('object=cube_b' in b or 'object=bar' in b for b in bound), sorted(bound)
    bad = STACK.replace('roles: [support, target, not_graspable]', 'roles: [support, stacked]')
    with pytest.raises(SpecError, match=r"stack.yaml:\d+: entities.cube_b.roles: unknown scene role 'stacked'; "
                                        r"known: support, target, receiver, not_graspable, obstacle"):
        load_robot_config(_stack(tmp_path, stack=bad))


def test_ontology_show(tmp_path):
    path = _stack(tmp_path)
    proc = run_cli('ontology', 'show', 'cube_b', '--config', str(path))
    assert proc.returncode == 0, proc.stderr
    assert 'entity cube_b (type cube)' in proc.stdout
    assert 'hazard     fragile   (so also: breakage)' in proc.stdout
    proc = run_cli('ontology', 'show', 'toy_block', '--config', str(path))
    assert proc.returncode == 0 and 'blocks.yaml:3' in proc.stdout, proc.stdout
    assert 'release_only_over_support (object)' in proc.stdout
    proc = run_cli('ontology', 'show', 'nothing')
    assert proc.returncode == 2 and 'types: apple, banana' in proc.stderr


def test_the_documented_perception_block_loads_as_written(tmp_path):
    """docs/configure.md's ``perception:`` block, every key of it: ``support_staleness_s`` was refused
    as an unknown field, so the block the docs show did not load."""
    text = (REPO / 'docs' / 'configure.md').read_text()
    block = text[text.index('```yaml\nperception:') + len('```yaml\n'):]
    block = block[:block.index('```')]
    cfg = load_robot_config(_stack(tmp_path, stack=STACK + block))
    track = cfg.tf.track
    assert (track.position_noise_m, track.orientation_noise_rad, track.window_s, track.staleness_s,
            track.support_staleness_s, track.correlation_s) == (0.005, 0.035, 0.5, 0.5, 2.0, 0.0)
    with pytest.raises(SpecError, match='correlation_s'):
        load_robot_config(_stack(tmp_path, stack=STACK + 'perception: {correlation_s: -1.0}\n'))
