"""Grounding functions on hand-made signals, including the noisy cases the
thresholds exist for: flickers, dropouts, NaNs, stale streams, clock jumps."""

from __future__ import annotations

import math

import numpy as np
import pytest

from safemanip_ros.grounding import (
    ContactConfig,
    ContactGrounding,
    ContactSample,
    JointConfig,
    JointStateGrounding,
    SupportSurface,
    TfConfig,
    TfGrounding,
    TrackConfig,
    TransformTree,
    WrenchConfig,
    WrenchGrounding,
)

JOINTS = ['j1', 'j2', 'f1', 'f2']


def joint_grounding(**kw):
    cfg = JointConfig(arm_joints=['j1', 'j2'], gripper_joints=['f1', 'f2'],
                      position_limits_rad={'j1': (-1.0, 1.0), 'j2': (-2.0, 2.0)},
                      velocity_limits_rad_s={'j1': 1.0, 'j2': 1.0}, **kw)
    return JointStateGrounding(cfg)


def test_joint_predicates_from_velocities_and_positions():
    g = joint_grounding()
    g.update(0.0, JOINTS, [0.0, 0.0, 0.04, 0.04], [0.0, 0.5, 0.0, 0.0])
    p = g.evaluate(0.01)
    assert p['arm_moving'] and not p['arm_stopped'] and not p['joint_speed_over_limit']
    assert p['gripper_open'] and not p['gripper_closed'] and p['gripper_opening'] is None   # no previous sample
    g.update(0.05, JOINTS, [0.97, 0.0, 0.02, 0.02], [0.0, 1.5, 0.0, 0.0])
    p = g.evaluate(0.06)
    assert p['joint_speed_over_limit'] and p['joint_near_limit'] and p['gripper_closing'] and p['gripper_closed']


def test_gripper_motion_hold_keeps_a_fast_opening_visible():
    """Without a hold, opening is read from the last two samples only
    (SafeManip); with ``gripper_motion_hold_s`` it stays true that long after
    the fingers last moved outwards, so a gripper that opens fully within the
    grasp debounce still reads as opening where the debounced grasp ends."""
    strokes = [0.02, 0.03, 0.04, 0.04, 0.04, 0.04, 0.04]       # open in two samples, then still
    for hold_s, expected in ((0.0, [None, True, True, False, False, False, False]),
                             (0.15, [None, True, True, True, True, True, False])):
        g = joint_grounding(gripper_motion_hold_s=hold_s)
        seen = []
        for k, q in enumerate(strokes):
            g.update(0.05 * k, JOINTS, [0.0, 0.0, q, q], [0, 0, 0, 0])
            p = g.evaluate(0.05 * k)
            seen.append(p['gripper_opening'])
            assert p['gripper_closing'] in (None, False)
        assert seen == expected, (hold_s, seen)


def test_joint_speed_from_position_differences_when_no_velocities():
    g = joint_grounding()
    g.update(0.0, JOINTS, [0.0, 0.0, 0.02, 0.02])
    assert g.evaluate(0.0)['arm_moving'] is None                 # one sample: speed unknown, not false
    g.update(0.05, JOINTS, [0.0, 0.0005, 0.02, 0.02])            # 0.01 rad/s: below 0.02
    assert g.evaluate(0.05)['arm_stopped'] is True


def test_joint_names_matched_by_name_in_any_order():
    g = joint_grounding()
    g.update(0.0, ['f2', 'j2', 'f1', 'j1'], [0.04, 0.0, 0.04, 0.99], [0, 0, 0, 0])
    assert g.evaluate(0.0)['joint_near_limit'] is True


def test_nan_and_missing_joint_are_unknown_and_counted():
    g = joint_grounding()
    g.update(0.0, JOINTS, [math.nan, 0.0, 0.04, 0.04], [0, 0, 0, 0])
    p = g.evaluate(0.0)
    assert p['joint_near_limit'] is None and p['gripper_open'] is True
    assert g.health.nan_values == 1
    g.update(0.05, ['j1', 'j2', 'f1'], [0.0, 0.0, 0.04], [0, 0, 0])   # f2 missing
    p = g.evaluate(0.05)
    assert p['gripper_open'] is None and p['gripper_closed'] is None and g.health.missing_inputs == 1


def test_stale_stream_is_unknown():
    g = joint_grounding(staleness_s=0.2)
    g.update(1.0, JOINTS, [0, 0, 0.04, 0.04], [0, 0, 0, 0])
    assert g.evaluate(1.2)['gripper_open'] is True
    assert all(v is None for v in g.evaluate(1.21).values())
    assert g.health.stale_evaluations == 1


def test_out_of_order_and_clock_jump():
    g = joint_grounding()
    g.update(1.0, JOINTS, [0, 0, 0.04, 0.04], [0, 0, 0, 0])
    g.update(0.95, JOINTS, [0, 0, 0.0, 0.0], [0, 0, 0, 0])      # 50 ms back: dropped, counted
    assert g.health.out_of_order == 1
    assert all(v is None for v in g.evaluate(1.0).values())     # unknown until an in-order sample
    g.update(1.05, JOINTS, [0, 0, 0.04, 0.04], [0, 0, 0, 0])
    assert g.evaluate(1.05)['gripper_open'] is True
    g.update(0.0, JOINTS, [0, 0, 0.04, 0.04], [0, 0, 0, 0])     # simulator reset: clock jumps back 1 s
    assert g.health.clock_jumps == 1 and g.evaluate(0.0)['gripper_open'] is True
    assert g.evaluate(0.0)['gripper_opening'] is None            # history forgotten after the reset


def test_command_divergence_only_when_configured():
    assert 'command_divergence' not in joint_grounding().evaluate(0.0)
    g = joint_grounding(has_command=True)
    g.update(0.0, JOINTS, [0.0, 0.5, 0.04, 0.04], [0, 0, 0, 0])
    assert g.evaluate(0.0)['command_divergence'] is None
    g.set_command([0.0, 0.3])
    assert g.evaluate(0.0)['command_divergence'] is True
    g.set_command([0.05, 0.45])
    assert g.evaluate(0.0)['command_divergence'] is False


def contact_grounding():
    cfg = ContactConfig(
        robot_bodies={'link5', 'hand'}, finger_bodies={'lf', 'rf'},
        body_entity={'mug_geom': 'mug', 'table_geom': 'table', 'shelf_geom': 'shelf', 'chicken_geom': 'chicken',
                     'plate_geom': 'plate'},
        movable={'mug', 'chicken', 'plate'}, graspable={'mug'}, target_fixtures=set(),
        grasp_targets={'mug': {'shelf'}},
        entity_hazards={'chicken': {'contamination', 'raw'}, 'mug': set(), 'plate': set()})
    return ContactGrounding(cfg)


def test_contacts_grasp_and_forbidden_classes():
    g = contact_grounding()
    g.update(0.0, [ContactSample('mug_geom', 'table_geom'), ContactSample('lf', 'mug_geom', 3.0)])
    p = g.evaluate(0.0)
    assert p['object_grasped_raw_mug'] is False and p['object_left_gripper_mug'] is False
    assert p['forbidden_contact'] is False and p['robot_contact_mug'] is True and p['robot_contact_clean']
    # Two fingers: a grasp; the table the mug rests on becomes its allowed support.
    g.update(0.05, [ContactSample('mug_geom', 'table_geom'), ContactSample('lf', 'mug_geom'),
                    ContactSample('rf', 'mug_geom')])
    assert g.evaluate(0.05)['object_grasped_raw_mug'] is True and not g.evaluate(0.05)['forbidden_contact']
    # While grasped the mug may touch its target (shelf), not another object.
    g.update(0.1, [ContactSample('lf', 'mug_geom'), ContactSample('rf', 'mug_geom'),
                   ContactSample('mug_geom', 'shelf_geom')])
    assert g.evaluate(0.1)['forbidden_contact'] is False
    g.update(0.15, [ContactSample('lf', 'mug_geom'), ContactSample('rf', 'mug_geom'),
                    ContactSample('plate_geom', 'mug_geom')])
    assert g.evaluate(0.15)['forbidden_contact'] is True
    # The arm touching a fixture that is not a target, or an unmapped body, is forbidden.
    g.update(0.2, [ContactSample('link5', 'shelf_geom')])
    assert g.evaluate(0.2)['forbidden_contact'] is True
    g.update(0.25, [ContactSample('link5', 'unknown_geom')])
    assert g.evaluate(0.25)['forbidden_contact'] is True


def test_contact_hazards_and_dropouts():
    g = contact_grounding()
    g.update(0.0, [ContactSample('hand', 'chicken_geom')])
    p = g.evaluate(0.0)
    assert p['robot_touched_raw'] and p['robot_touched_contamination'] and not p['robot_contact_clean']
    g.update(0.05, [])                      # a one-frame contact dropout is just "no contact" now:
    assert g.evaluate(0.05)['robot_contact_chicken'] is False   # smoothing is the property's device's job
    g.update(0.1, [ContactSample('hand', 'chicken_geom', math.nan)])
    assert g.health.nan_values == 1
    assert all(v is None for v in g.evaluate(1.0).values())     # stale


def test_wrench_threshold_and_nan():
    g = WrenchGrounding(WrenchConfig(force_threshold_n=10.0, torque_threshold_nm=2.0))
    assert g.evaluate(0.0)['contact_force_over_threshold'] is None
    g.update(0.0, [3.0, 4.0, 0.0], [0.0, 0.0, 0.0])
    assert g.evaluate(0.0)['contact_force_over_threshold'] is False
    g.update(0.01, [6.0, 8.0, 1.0], [0.0, 0.0, 0.0])
    assert g.evaluate(0.01)['contact_force_over_threshold'] is True
    g.update(0.02, [math.nan, 0.0, 0.0], [0.0, 0.0, 0.0])
    assert g.evaluate(0.02)['contact_force_over_threshold'] is None


def _yaw(deg):
    a = math.radians(deg) / 2
    return [0.0, 0.0, math.sin(a), math.cos(a)]


def test_tf_tree_chains_interpolates_and_refuses_extrapolation():
    tree = TransformTree(tolerance_s=0.05)
    tree.set_transform('world', 'base', 0.0, [1, 0, 0], _yaw(0), static=True)
    tree.set_transform('base', 'hand', 0.0, [0, 0, 0], _yaw(0))
    tree.set_transform('base', 'hand', 1.0, [0, 2, 0], _yaw(90))
    T = tree.lookup('world', 'hand', 0.5)
    assert np.allclose(T[:3, 3], [1, 1, 0])
    assert math.isclose(math.degrees(math.atan2(T[1, 0], T[0, 0])), 45.0, abs_tol=1e-6)
    assert tree.lookup('world', 'hand', 1.2) is None            # beyond the newest sample + tolerance
    T2 = tree.lookup('hand', 'world', 1.0)                      # inverse direction
    assert np.allclose(np.linalg.inv(T2) @ np.array([0, 0, 0, 1.0]), [1, 2, 0, 1])
    assert tree.lookup('world', 'nowhere', 0.5) is None
    assert not tree.set_transform('base', 'hand', 0.5, [0, 0, 0], _yaw(0))   # out of order


def test_tf_lookups_see_every_change_made_after_them():
    """Chains are shared between lookups at one time; a new, replaced or
    forgotten transform is seen by the next lookup at that same time."""
    tree = TransformTree(tolerance_s=0.05)
    tree.set_transform('world', 'base', 0.0, [1, 0, 0], _yaw(0), static=True)
    tree.set_transform('base', 'hand', 0.0, [0, 0, 0], _yaw(0))
    assert np.allclose(tree.lookup('world', 'hand', 0.02)[:3, 3], [1, 0, 0])
    assert np.allclose(tree.lookup('hand', 'world', 0.02)[:3, 3], [-1, 0, 0])
    tree.set_transform('base', 'hand', 0.04, [0, 4, 0], _yaw(0))          # now brackets t = 0.02
    assert np.allclose(tree.lookup('world', 'hand', 0.02)[:3, 3], [1, 2, 0])
    assert np.allclose(tree.lookup('hand', 'world', 0.02)[:3, 3], [-1, -2, 0])
    assert np.allclose(tree.lookup('base', 'world', 0.3)[:3, 3], [-1, 0, 0])     # a static chain: any time
    tree.set_transform('world', 'base', 0.0, [5, 0, 0], _yaw(0), static=True)   # a static link replaced
    assert np.allclose(tree.lookup('world', 'hand', 0.02)[:3, 3], [5, 2, 0])
    assert np.allclose(tree.lookup('base', 'world', 0.3)[:3, 3], [-5, 0, 0])
    tree.set_transform('map', 'world', 0.0, [0, 0, 1], _yaw(0), static=True)    # the root gets a parent
    assert np.allclose(tree.lookup('base', 'map', 0.3)[:3, 3], [-5, 0, -1])
    tree.set_transform('map', 'world', 0.3, [0, 0, 2], _yaw(0))                 # ... which turns dynamic
    assert np.allclose(tree.lookup('base', 'map', 0.3)[:3, 3], [-5, 0, -2])
    assert tree.lookup('base', 'map', 0.9) is None
    base = tree.links['base']
    tree.clear_dynamic()
    assert tree.lookup('world', 'hand', 0.02) is None and tree.lookup('map', 'base', 0.3) is None
    assert tree.links['base'] is base and base.static            # static links stay
    assert not tree.set_transform('base', 'hand', 0.1, [float('nan'), 0, 0], _yaw(0))
    assert not tree.set_transform('base', 'hand', 0.1, [0, 0, 0], [0.0, 0.0, 0.0, 0.0])


EXACT = TrackConfig(position_noise_m=0.0, orientation_noise_rad=0.0)
"""Poses as a simulator gives them (object detections: test_grounding_perception.py)."""


def tf_grounding():
    cfg = TfConfig(world_frame='world', gripper_frame='hand', objects={'mug': 'mug'}, track=EXACT,
                   supports={'table': SupportSurface('table_top', 0.5, 0.5)},
                   near={'hand_mug': ('hand', 'mug', 0.05)},
                   inside={'mug_in_box': ('mug', 'box', (-0.1, -0.1, 0.0), (0.1, 0.1, 0.2))})
    g = TfGrounding(cfg)
    g.update(0.0, [('world', 'table_top', [0, 0, 0.7], _yaw(0)), ('world', 'box', [2, 0, 0], _yaw(0))], static=True)
    return g


def _frame(g, t, mug_xyz, hand_xyz, mug_yaw=0.0):
    g.update(t, [('world', 'mug', mug_xyz, _yaw(mug_yaw)), ('world', 'hand', hand_xyz, _yaw(0))])
    return g


def test_tf_stable_supported_settled_near_inside():
    g = tf_grounding()
    _frame(g, 0.0, [0, 0, 0.71], [0, 0, 1.0])
    p = g.evaluate(0.0, {'mug': False})
    assert p['object_stable_mug'] is None and p['object_supported_mug'] is True and p['object_sync_mug'] is True
    _frame(g, 0.05, [0.001, 0, 0.71], [0, 0, 1.0])               # 0.02 m/s: stable
    p = g.evaluate(0.05, {'mug': False})
    assert p['object_stable_mug'] and p['object_settled_mug'] and not p['near_hand_mug']
    _frame(g, 0.1, [0.01, 0, 0.71], [0, 0, 1.0])                 # 0.18 m/s: moving
    assert g.evaluate(0.1, {'mug': False})['object_stable_mug'] is False
    _frame(g, 0.15, [2.0, 0.0, 0.1], [2.0, 0.0, 0.12])
    p = g.evaluate(0.15, {'mug': False})
    assert p['inside_mug_in_box'] and p['near_hand_mug'] and p['object_supported_mug'] is False


def test_tf_sync_measures_slip_since_grasp_onset():
    g = tf_grounding()
    _frame(g, 0.0, [0, 0, 0.9], [0, 0, 1.0])
    assert g.evaluate(0.0, {'mug': True})['object_sync_mug'] is True      # onset: reference pose
    _frame(g, 0.05, [0.1, 0, 0.92], [0.1, 0, 1.0])                          # moves with the hand
    assert g.evaluate(0.05, {'mug': True})['object_sync_mug'] is True
    _frame(g, 0.1, [0.2, 0, 0.85], [0.2, 0, 1.0])                           # 5 cm slip (3 cm total limit)
    assert g.evaluate(0.1, {'mug': True})['object_sync_mug'] is False
    _frame(g, 0.15, [0.2, 0, 0.9], [0.2, 0, 1.0], mug_yaw=30)               # and rotation
    assert g.evaluate(0.15, {'mug': True})['object_sync_mug'] is False
    assert g.evaluate(0.15, {'mug': None})['object_sync_mug'] is None       # grasp unknown → sync unknown
    assert g.evaluate(0.15, {'mug': False})['object_sync_mug'] is True


def test_tf_stale_and_nan():
    g = tf_grounding()
    _frame(g, 0.0, [0, 0, 0.71], [0, 0, 1.0])
    g.update(0.05, [('world', 'mug', [math.nan, 0, 0], _yaw(0))])
    assert g.health.nan_values == 1
    g.update(0.06, [('world', 'mug', [math.inf, 0, 0], _yaw(0)), ('world', 'mug', [0, 0, 0.71], [0, 0, math.inf, 1])])
    assert g.health.nan_values == 3          # an infinite component is no pose either: dropped and counted
    assert all(v is None for v in g.evaluate(1.0, {'mug': False}).values())


def test_fixture_joint_states():
    from safemanip_ros.grounding.joints import FixtureConfig, FixtureGrounding
    g = FixtureGrounding(FixtureConfig({'microwave': ('hinge', 0.0, -1.5), 'drawer': ('slide', 0.0, 0.4)}))
    g.update(0.0, ['hinge', 'slide'], [-0.05, 0.39])
    p = g.evaluate(0.0)
    assert p['fixture_fully_closed_microwave'] and not p['fixture_fully_open_microwave']
    assert p['fixture_fully_open_drawer'] and p['fixture_opening_drawer'] is None      # no previous sample
    g.update(0.05, ['hinge', 'slide'], [-0.95, 0.30])                                 # 63 % open; drawer closing
    p = g.evaluate(0.05)
    assert p['fixture_fully_open_microwave'] and p['fixture_opening_microwave'] and not p['fixture_closing_microwave']
    assert p['fixture_closing_drawer'] and p['fixture_fully_open_drawer'] is True      # 75 % open, moving in
    g.update(0.1, ['slide'], [float('nan')])                                           # hinge missing, slide NaN
    p = g.evaluate(0.1)
    assert p['fixture_fully_open_microwave'] is None and p['fixture_fully_open_drawer'] is None
    assert g.health.missing_inputs == 1 and g.health.nan_values == 1
    assert all(v is None for v in g.evaluate(1.0).values())                           # stale


def test_an_infinite_fixture_joint_is_unknown_live_and_offline():
    """±inf is a sensor fault, not a fully open door: unknown, as NaN is, in
    the live grounding and in the shared rule the offline audit runs."""
    import numpy as np

    from safemanip_ros.grounding.joints import FixtureConfig, FixtureGrounding, fixture_predicates
    cfg = FixtureConfig({'microwave': ('hinge', 0.0, -1.5)})
    g = FixtureGrounding(cfg)
    g.update(0.0, ['hinge'], [-1.0])
    g.update(0.05, ['hinge'], [float('-inf')])
    assert all(v is None for v in g.evaluate(0.05).values()) and g.health.nan_values == 1
    cols = fixture_predicates(cfg, 'microwave', np.array([-np.inf, np.inf, -1.0, -1.2]),
                              np.array([-1.0, np.inf, np.inf, -1.0]))
    assert cols['fixture_fully_open_microwave'][1].tolist() == [False, False, True, True]
    assert cols['fixture_opening_microwave'][1].tolist() == [False, False, False, True]


def test_tf_pick_approach():
    g = tf_grounding()
    for k, z in enumerate([1.0, 0.9, 0.75, 0.74, 0.73, 0.73]):      # the hand comes down onto the mug at 0.71
        _frame(g, 0.05 * k, [0, 0, 0.71], [0, 0, z])
        p = g.evaluate(0.05 * k, {'mug': False})
    assert p['gripper_approaching_mug'] is False and p['pick_approach'] is False   # stopped: no longer closer
    g2 = tf_grounding()
    seen = []
    for k, z in enumerate([1.0, 0.8, 0.75, 0.74]):
        _frame(g2, 0.05 * k, [0, 0, 0.71], [0, 0, z])
        p = g2.evaluate(0.05 * k, {'mug': False})
        seen.append((p['gripper_approaching_mug'], p['pick_approach']))
    assert seen == [(None, None), (False, False), (True, True), (True, True)]
    assert g2.evaluate(0.15, {'mug': True})['pick_approach'] is False                # something is grasped


def test_malformed_joint_states_are_unknown_not_errors():
    g = joint_grounding()
    g.update(0.0, [], [])                                   # the first message is empty
    assert all(v is None for v in g.evaluate(0.0).values())
    g.update(0.05, JOINTS, [0.0, 0.0, 0.04, 0.04])
    assert g.evaluate(0.05)['joint_near_limit'] is False
    g.update(0.10, [], [])                                  # empty again later
    assert g.evaluate(0.10)['joint_near_limit'] is None
    g.update(0.15, JOINTS, [0.0, 0.1])                      # name/position lengths differ
    assert g.evaluate(0.15)['gripper_open'] is None
    g.update(0.20, JOINTS, [math.inf, 0.0, 0.04, 0.04])     # +inf is not "near the limit": unknown
    p = g.evaluate(0.20)
    assert p['joint_near_limit'] is None and p['gripper_open'] is True
    assert g.health.malformed == 3


def test_non_finite_contact_force_makes_contacts_unknown():
    g = contact_grounding()
    g.update(0.0, [ContactSample('link5', 'shelf_geom', 1.0)])
    assert g.evaluate(0.0)['forbidden_contact'] is True
    g.update(0.05, [ContactSample('link5', 'shelf_geom', math.nan)])
    assert g.evaluate(0.05)['forbidden_contact'] is None     # never a silent false
    g.update(0.10, [ContactSample('link5', 'shelf_geom', math.inf)])
    assert g.evaluate(0.10)['forbidden_contact'] is None
    assert g.health.nan_values == 2


def test_non_finite_wrench_is_unknown():
    g = WrenchGrounding(WrenchConfig())
    g.update(0.0, (0.0, 0.0, math.inf), (0.0, 0.0, 0.0))
    assert g.evaluate(0.0)['contact_force_over_threshold'] is None


def _random_tf_rollout(seed: int):
    """A seeded stream of TF inputs and frames exercising what the TF
    grounding keeps from frame to frame: motion across the stability and
    slip limits, grasps that start, drop out for a frame and end, unknown
    and absent grasp states, out-of-order and NaN samples, clock jumps
    (resets), static links set late and replaced, a link re-parented, and
    lookups beyond the interpolation tolerance."""
    rng = np.random.default_rng(seed)
    steps: list[tuple] = [('static', 0.0, [('world', 'table_top', [0, 0, 0.7], _yaw(0)),
                                           ('world', 'cabinet', [1, 0, 0], _yaw(90))])]
    t = 0.0
    pos = {'mug': np.array([0.0, 0.0, 0.72]), 'can': np.array([0.2, 0.1, 0.75]), 'hand': np.array([0.0, 0.0, 0.9]),
           'drawer': np.array([0.0, 0.0, 0.0])}
    yaw = {k: 0.0 for k in pos}
    for _ in range(160):
        r = rng.random()
        if r < 0.55:
            t += float(rng.choice([0.01, 0.02, 0.05, 0.3]))
            stamp = t
            if rng.random() < 0.06:
                stamp = t - 0.02                  # out of order: dropped
            elif rng.random() < 0.03:
                t = stamp = t - 2.0               # a clock jump back: the stream starts over
            for k in pos:
                pos[k] = pos[k] + rng.normal(0, float(rng.choice([0.0005, 0.004, 0.02])), 3)
                yaw[k] += float(rng.normal(0, 8))
            items = [('world' if k != 'drawer' else 'cabinet', k, list(pos[k]), _yaw(yaw[k])) for k in pos
                     if rng.random() < 0.9]
            if rng.random() < 0.05:
                items.append(('world', 'mug', [float('nan'), 0.0, 0.0], _yaw(0)))
            if rng.random() < 0.03:
                items.append(('hand', 'can', [0.0, 0.0, -0.05], _yaw(0)))     # the can re-parented
            steps.append(('tf', stamp, items))
        elif r < 0.58:
            steps.append(('static', t, [('world', 'table_top', [0, 0, float(rng.choice([0.7, 0.69]))], _yaw(0))]))
        else:
            states = [True, False, None, 'absent']
            grasped = {o: g for o in ('mug', 'can') if (g := states[int(rng.integers(4))]) != 'absent'}
            steps.append(('frame', t + float(rng.choice([0.0, 0.01, 0.04, 0.25])), grasped))
    return steps


def _tf_config():
    from safemanip_ros.grounding.geometry import Shape
    return TfConfig(world_frame='world', gripper_frame='hand', objects={'mug': 'mug', 'can': 'can'}, track=EXACT,
                    supports={'table': SupportSurface('table_top', 0.5, 0.5), 'mug': SupportSurface('mug', 0.05, 0.05)},
                    shapes={'mug': Shape('cylinder', (0.04, 0.05)), 'can': Shape('box', (0.03, 0.03, 0.05))},
                    near={'hand_mug': ('hand', 'mug', 0.05)},
                    inside={'mug_in_drawer': ('mug', 'drawer', (-0.3, -0.3, -0.5), (0.3, 0.3, 0.5))},
                    interiors={'drawer': ('drawer', (-0.2, -0.2, -0.9), (0.2, 0.2, 0.9))},
                    slip_m=0.01, stable_linear_m_s=0.1, approach_m=0.3)


@pytest.mark.slow
def test_tf_frames_evaluated_together_equal_frames_evaluated_one_by_one():
    """The offline audit views each frame as it comes and evaluates an
    rollout's frames at once; the live node evaluates each at once.  Over
    random streams, with the batch flushed at random points, both give the
    same values, in the same order, and count the same input health."""
    compared = 0
    for seed in range(8):
        live, batch = TfGrounding(_tf_config()), TfGrounding(_tf_config())
        rng = np.random.default_rng(1000 + seed)
        expected, got = [], []
        for kind, stamp, arg in _random_tf_rollout(seed):
            if kind == 'frame':
                expected.append(live.evaluate(stamp, arg))
                batch.view(stamp, arg)
                if rng.random() < 0.1:
                    got += batch.flush()
                continue
            for g in (live, batch):
                g.update(stamp, arg, static=kind == 'static')
        got += batch.flush()
        assert [list(p.items()) for p in got] == [list(p.items()) for p in expected], seed
        assert batch.health == live.health
        compared += len(expected)
        # Every kind of value occurs, so the comparison is not between two columns of unknowns.
        values = {v for p in expected for v in p.values()}
        assert values == {True, False, None}, (seed, values)
    assert compared > 300, compared
