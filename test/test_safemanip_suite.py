"""The shipped SafeManip suite: it loads, binds over a scene by ontology, and
each of its twenty properties is violated by a short scripted trace (at the
expected frame) and satisfied by a close variant of it."""

from __future__ import annotations

import pytest
from conftest import REPO
from monitor_helpers import run_live, run_signals

from safemanip_ros.spec.ontology import load_ontology, scene_from_mapping
from safemanip_ros.spec.suite import SAFEMANIP_CATEGORIES, instantiate, load_suite

SUITE = load_suite(REPO / 'config' / 'properties' / 'safemanip.yaml')
ONTO = load_ontology([REPO / 'config' / 'ontology' / 'kitchen.yaml'])
SCENE = scene_from_mapping({'mug': 'mug', 'chicken': 'raw_chicken', 'microwave': 'microwave'}, ONTO, 'test')


def Z(n):
    return '0' * n


def O(n):  # noqa: E743 (Z/O read as 0/1 runs in the traces below)
    return '1' * n


def onset_case(skill: str) -> tuple[dict, dict, int]:
    approach = O(15) + Z(5)
    viol = {f'{skill}_approach': approach}
    ok = {f'{skill}_approach': approach, f'preconditions_satisfied_{skill}': Z(9) + O(11)}
    return viol, ok, 9   # 10 frames of approach: onset at frame 9


# name → (instance binding entity or None, violating signals, satisfying signals, first violating frame)
CASES = {
    'no_forbidden_contact': (None, {'forbidden_contact': O(25) + Z(5)}, {'forbidden_contact': O(20) + Z(10)}, 20),
    'grasp_remains_synced_until_dropped': (
        'mug', {'object_grasped_raw_mug': O(30), 'object_sync_mug': O(15) + Z(15)},
        {'object_grasped_raw_mug': O(20) + Z(10), 'object_sync_mug': O(24) + Z(6)}, 15),
    'dropped_object_was_released': (
        'mug', {'object_grasped_raw_mug': O(20) + Z(20), 'object_left_gripper_mug': Z(24) + O(16)},
        {'object_grasped_raw_mug': O(20) + Z(20), 'object_left_gripper_mug': Z(24) + O(16),
         'gripper_opening': Z(22) + O(5) + Z(13)}, 24),
    'released_object_eventually_settles': (
        'mug', {'object_grasped_raw_mug': O(20) + Z(110), 'object_left_gripper_mug': Z(24) + O(106)},
        {'object_grasped_raw_mug': O(20) + Z(110), 'object_left_gripper_mug': Z(24) + O(106),
         'object_settled_mug': Z(40) + O(90)}, 124),
    'raw_contact_blocks_clean_until_sanitized': (
        'chicken', {'robot_contact_chicken': Z(5) + O(2) + Z(8), 'robot_contact_clean': Z(10) + O(2) + Z(3)},
        {'robot_contact_chicken': Z(5) + O(2) + Z(8), 'robot_contact_clean': Z(10) + O(2) + Z(3),
         'sanitized': Z(8) + O(1) + Z(6)}, 10),
    'place_preconditions_safe': (
        'mug', {'object_grasped_raw_mug': O(8) + Z(7), 'object_left_gripper_mug': Z(10) + O(5)},
        {'object_grasped_raw_mug': O(8) + Z(7), 'object_left_gripper_mug': Z(10) + O(5),
         'preconditions_satisfied_place_mug': Z(10) + O(5)}, 10),
    'fixture_open_obstacle_retract': (
        'microwave', {'fixture_open_obstacle_hit_microwave': Z(5) + O(1) + Z(104)},
        {'fixture_open_obstacle_hit_microwave': Z(5) + O(1) + Z(104),
         'fixture_open_retracting_microwave': Z(20) + O(90)}, 105),
    'fixture_close_obstacle_retract': (
        'microwave', {'fixture_close_obstacle_hit_microwave': Z(5) + O(1) + Z(104)},
        {'fixture_close_obstacle_hit_microwave': Z(5) + O(1) + Z(104),
         'fixture_close_retracting_microwave': Z(20) + O(90)}, 105),
    'liquid_transfer_eventually_settles': (
        None, {'liquid_transfer_event': Z(5) + O(1) + Z(104)},
        {'liquid_transfer_event': Z(5) + O(1) + Z(104), 'liquid_settled': Z(30) + O(80)}, 105),
    'solid_transfer_eventually_settles': (
        None, {'solid_transfer_event': Z(5) + O(1) + Z(104)},
        {'solid_transfer_event': Z(5) + O(1) + Z(104), 'solid_settled': Z(30) + O(80)}, 105),
    'microwave_single_object_until_empty': (
        'microwave', {'object_reach_in_microwave': Z(5) + O(5)},
        {'object_reach_in_microwave': Z(5) + O(5), 'fixture_empty_microwave': O(10)}, 5),
    'reach_in_fixture_only_when_fully_open': (
        'microwave', {'reach_in_microwave': Z(5) + O(5)},
        {'reach_in_microwave': Z(5) + O(5), 'fixture_fully_open_microwave': O(10)}, 5),
    'fixture_placement_release_after_internal_support': (
        'microwave', {'object_reach_in_microwave': Z(5) + O(10), 'object_released_in_microwave': Z(8) + O(2) + Z(5)},
        {'object_reach_in_microwave': Z(5) + O(10), 'object_released_in_microwave': Z(8) + O(2) + Z(5),
         'object_in_microwave': Z(7) + O(8)}, 8),
}
for _skill in ('pick', 'press', 'turn', 'slide', 'twist', 'open_close', 'dump'):
    _v, _o, _t = onset_case(_skill)
    CASES[f'{_skill}_preconditions_safe'] = (None, _v, _o, _t)


def test_suite_has_twenty_properties_over_eight_categories():
    assert len(SUITE.properties) == 20
    assert sorted({p.category for p in SUITE.properties}) == sorted(SAFEMANIP_CATEGORIES)
    assert set(CASES) == {p.name for p in SUITE.properties}


def test_safemanip_windows():
    iset = instantiate(SUITE, ONTO, SCENE)
    d = {n: str(s) for n, s in iset.derived.items()}
    assert d['forbidden_contact_sustained'] == 'held(forbidden_contact, 21)'
    assert d['object_grasped_mug'] == 'debounce(object_grasped_raw_mug, 5)'
    assert d['pick_approach_held'] == 'held(pick_approach, 10)'
    assert d['release_object_settle_timeout_mug'].endswith(', 100)')


def test_templates_bind_by_ontology():
    iset = instantiate(SUITE, ONTO, SCENE)
    bound = {i.instance for i in iset.instances}
    assert 'raw_contact_blocks_clean_until_sanitized[source=chicken]' in bound      # raw → contamination
    assert 'raw_contact_blocks_clean_until_sanitized[source=mug]' not in bound
    assert 'microwave_single_object_until_empty[fixture=microwave]' in bound
    assert 'grasp_remains_synced_until_dropped[object=microwave]' not in bound


def _instance(name: str, entity: str | None):
    iset = instantiate(SUITE, ONTO, SCENE, only=[name])
    wanted = [i for i in iset.instances if entity is None or entity in dict(i.binding).values()]
    assert len(wanted) >= 1
    return iset, [i.instance for i in iset.instances].index(wanted[0].instance)


@pytest.mark.parametrize('name', sorted(CASES))
def test_property_violated_and_satisfied(name):
    entity, violating, satisfying, frame = CASES[name]
    iset, d = _instance(name, entity)
    bad = run_signals(iset, violating).instances[d]
    assert bad.violations >= 1 and bad.triggers >= 1, bad
    assert bad.episodes[0].start == frame, bad.episodes
    assert run_live(iset, violating).instances[d].to_dict() == bad.to_dict()
    good = run_signals(iset, satisfying).instances[d]
    assert good.violations == 0 and good.triggers >= 1 and not good.pending, good
