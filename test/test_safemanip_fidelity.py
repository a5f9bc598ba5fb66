"""Fidelity to SafeManip's released monitor: minimal traces where the suite
(or the episode machine) once differed from the seed, each with the seed's
expected episodes, and the deliberate differences with our documented result
(the differences table of docs/properties/safemanip.md, whose cases
test_safemanip_compat.py runs with both profiles)."""

from __future__ import annotations

from conftest import REPO
from monitor_helpers import run_live, run_signals, span_signal

from safemanip_ros.spec.ontology import load_ontology, scene_from_mapping
from safemanip_ros.spec.suite import instantiate, load_suite

SUITE = load_suite(REPO / 'config' / 'properties' / 'safemanip.yaml')
ONTO = load_ontology([REPO / 'config' / 'ontology' / 'kitchen.yaml'])
SCENE = scene_from_mapping({'mug': 'mug', 'chicken': 'raw_chicken', 'microwave': 'microwave'}, ONTO, 'fidelity')


def result(name: str, signals: dict[str, str], entity: str | None = None):
    iset = instantiate(SUITE, ONTO, SCENE, only=[name])
    d = next(i for i, inst in enumerate(iset.instances) if entity is None or entity in dict(inst.binding).values())
    batch = run_signals(iset, signals).instances[d]
    assert run_live(iset, signals).instances[d].to_dict() == batch.to_dict()   # live path, same answer
    return batch


def eps(r) -> list[tuple[int, int, bool]]:
    return [(e.start, e.end, e.recovered) for e in r.episodes]


# ------------------------------------------------------ the seed's episodes
def test_contamination_trigger_is_the_latch_and_every_clean_touch_counts():
    # Raw contact at 2 and 8, clean touches 5-7 and 12-14.  SafeManip: [5,8] and [12,15];
    # one trigger (the latch rises once), two violations: the per-trigger rate is 2.
    r = result('raw_contact_blocks_clean_until_sanitized',
               {'robot_contact_chicken': span_signal(20, (2, 2), (8, 8)),
                'robot_contact_clean': span_signal(20, (5, 7), (12, 14))}, 'chicken')
    assert eps(r) == [(5, 8, True), (12, 15, True)]
    assert (r.triggers, r.violations) == (1, 2)


def test_contamination_latch_is_reset_by_sanitising():
    r = result('raw_contact_blocks_clean_until_sanitized',
               {'robot_contact_chicken': span_signal(20, (2, 2)), 'sanitized': span_signal(20, (4, 4)),
                'robot_contact_clean': span_signal(20, (12, 14))}, 'chicken')
    assert eps(r) == [] and r.triggers == 1


def test_grasp_sync_closes_on_the_raw_grasp_ending():
    # Raw grasp 0-9 and 12-29, sync false on 10-11 only: the obligation ends with the raw
    # grasp at 10, so SafeManip reports nothing (the debounced grasp gave [10,12]).
    r = result('grasp_remains_synced_until_dropped',
               {'object_grasped_raw_mug': span_signal(30, (0, 9), (12, 29)),
                'object_sync_mug': span_signal(30, (0, 9), (12, 29))}, 'mug')
    assert eps(r) == [] and r.triggers == 1


def test_grasp_sync_slip_while_grasped_still_violates():
    r = result('grasp_remains_synced_until_dropped',
               {'object_grasped_raw_mug': span_signal(30, (0, 29)), 'object_sync_mug': span_signal(30, (0, 14), (18, 29))},
               'mug')
    assert eps(r) == [(15, 18, True)]


def test_microwave_must_have_been_empty_for_five_span_signal():
    # Empty from frame 10, an object enters at 12: SafeManip [12,14] (5-frame persistence).
    r = result('microwave_single_object_until_empty',
               {'fixture_empty_microwave': span_signal(31, (10, 30)), 'object_reach_in_microwave': span_signal(31, (12, 30))},
               'microwave')
    assert eps(r) == [(12, 14, True)]


def test_reach_in_is_checked_on_entry():
    # Gripper inside 2-15, fully open 0-5: the door closing on the gripper later is not a
    # reach-in violation (SafeManip: nothing; we once reported [6,16]).
    r = result('reach_in_fixture_only_when_fully_open',
               {'reach_in_microwave': span_signal(20, (2, 15)), 'fixture_fully_open_microwave': span_signal(20, (0, 5))},
               'microwave')
    assert eps(r) == [] and r.triggers == 1
    # Entering a half-open fixture still violates, on the entry frame.
    r = result('reach_in_fixture_only_when_fully_open',
               {'reach_in_microwave': span_signal(20, (8, 15)), 'fixture_fully_open_microwave': span_signal(20, (0, 5))},
               'microwave')
    assert eps(r) == [(8, 16, True)]


def test_fixture_placement_is_checked_from_entry():
    # Object inside 2-30, supported inside 5-10, released at 15: SafeManip nothing (we once
    # reported [15,15] because every inside frame re-triggered).
    r = result('fixture_placement_release_after_internal_support',
               {'object_reach_in_microwave': span_signal(31, (2, 30)), 'object_in_microwave': span_signal(31, (5, 10)),
                'object_released_in_microwave': span_signal(31, (15, 15))}, 'microwave')
    assert eps(r) == [] and r.triggers == 1
    # Released before it was ever supported inside: a violation at the release.
    r = result('fixture_placement_release_after_internal_support',
               {'object_reach_in_microwave': span_signal(31, (2, 30)), 'object_in_microwave': span_signal(31, (20, 30)),
                'object_released_in_microwave': span_signal(31, (15, 15))}, 'microwave')
    assert eps(r) == [(15, 15, True)]


def test_place_onset_needs_a_grasped_object_leaving_the_gripper():
    # The object starts outside the gripper: no place onset, no trigger (we once counted one
    # per rollout at frame 0).
    r = result('place_preconditions_safe', {'object_left_gripper_mug': span_signal(30, (0, 29))}, 'mug')
    assert r.triggers == 0 and eps(r) == []
    # A grasp (raw 5-19, debounced from 9) that ends with the object leaving at 22: one onset.
    r = result('place_preconditions_safe',
               {'object_grasped_raw_mug': span_signal(30, (5, 19)), 'object_left_gripper_mug': span_signal(30, (0, 4), (22, 29))},
               'mug')
    assert r.triggers == 1 and eps(r)[0][0] == 22


# ------------------------------------------------ deliberate differences
def test_deliberate_recovery_is_checked_on_the_violation_frame():
    # Entry into a closed microwave at 5 that opens fully at 6: ours [5,6]
    # (SafeManip checks recovery one frame later: [5,7]).
    r = result('reach_in_fixture_only_when_fully_open',
               {'reach_in_microwave': span_signal(12, (5, 11)), 'fixture_fully_open_microwave': span_signal(12, (6, 11))},
               'microwave')
    assert eps(r) == [(5, 6, True)]


def test_deliberate_pending_at_trace_end_is_not_a_violation():
    # Grasp ends (debounced) at 24, the object leaves the gripper at 24 and has not settled
    # when the trace ends at 59, 35 frames into the 100-frame timeout: pending, no violation
    # (SafeManip's final-state check counts one).
    r = result('released_object_eventually_settles',
               {'object_grasped_raw_mug': span_signal(60, (0, 19)), 'object_left_gripper_mug': span_signal(60, (24, 59))},
               'mug')
    assert r.violations == 0 and r.pending


def test_deliberate_liquid_timer_keeps_the_first_events_start():
    # Pours at 5 and 50, never settled: the timer runs from 5 and fires at 105 (SafeManip
    # restarts it at 50 and fires at 150).
    r = result('liquid_transfer_eventually_settles', {'liquid_transfer_event': span_signal(160, (5, 5), (50, 50))})
    assert eps(r) == [(105, 105, True)]


def test_deliberate_settle_timer_stops_on_regrasp():
    # Grasp 0-19 ends at 24 (debounced), re-grasped at 30-159 before the object ever left the
    # gripper: the settle timer stops at the re-grasp (34), so no timeout and no violation.
    r = result('released_object_eventually_settles',
               {'object_grasped_raw_mug': span_signal(160, (0, 19), (30, 159))}, 'mug')
    assert r.violations == 0 and not r.pending and r.triggers == 1


def test_deliberate_retract_timeout_from_the_start_of_the_hit():
    # Obstacle hit 5-14, no retraction: the 100-frame timeout counts from 5 and fires at 105.
    r = result('fixture_open_obstacle_retract', {'fixture_open_obstacle_hit_microwave': span_signal(130, (5, 14))},
               'microwave')
    assert eps(r) == [(105, 105, True)]
