"""The physical suite (config/properties/physical.yaml), the grounding it
relies on (shapes, gripper calibration, finger closure, slip dropouts), and
"ungrounded means unsupported": a property reading a predicate no configured
source grounds is not run, and says so."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO
from monitor_helpers import run_live, run_signals

from safemanip_ros.errors import SpecError
from safemanip_ros.grounding import (
    ContactConfig,
    ContactGrounding,
    ContactSample,
    GripperCalibration,
    JointConfig,
    JointStateGrounding,
    Shape,
    SupportSurface,
    TfConfig,
    TfGrounding,
    TrackConfig,
)
from safemanip_ros.grounding.config import load_robot_config
from safemanip_ros.grounding.geometry import rests_on, support_gap_m
from safemanip_ros.grounding.tf import make_pose
from safemanip_ros.monitor.build import build_instances
from safemanip_ros.spec.ontology import load_ontology, scene_from_mapping
from safemanip_ros.spec.suite import instantiate, load_suite

PROPS = REPO / 'config' / 'properties'
SUITE = load_suite([PROPS / 'safemanip.yaml', PROPS / 'physical.yaml'])
ONTO = load_ontology([REPO / 'config' / 'ontology' / 'kitchen.yaml'])
SCENE = scene_from_mapping({'mug': 'mug'}, ONTO, 'test')


def Z(n):
    return '0' * n


def O(n):  # noqa: E743
    return '1' * n


def _yaw(deg):
    a = math.radians(deg) / 2
    return (0.0, 0.0, math.sin(a), math.cos(a))


def _roll(deg):
    a = math.radians(deg) / 2
    return (math.sin(a), 0.0, 0.0, math.cos(a))


# ---------------------------------------------------------------- geometry
def test_cube_resting_on_a_table_counts_from_its_bottom():
    cube = Shape('box', (0.0215, 0.0215, 0.0215))        # robosuite Lift's cube: 4.3 cm
    table = SupportSurface('table', 0.4, 0.4, 0.0)
    resting = make_pose([0.1, 0.0, 0.0215], _yaw(30))      # its origin is 2.15 cm above the table top
    assert support_gap_m(resting, cube, table) == pytest.approx(0.0, abs=1e-12)
    assert rests_on(resting, cube, table, 0.005)
    assert not rests_on(resting, Shape(), table, 0.005)     # the origin alone: 2.15 cm "above"
    lifted = make_pose([0.1, 0.0, 0.0215 + 0.006], _yaw(0))
    assert not rests_on(lifted, cube, table, 0.005)          # 6 mm gap > 5 mm tolerance
    assert rests_on(lifted, cube, table, 0.0061)             # tolerance edge, in metres
    sunk = make_pose([0.1, 0.0, 0.0215 - 0.004], _yaw(0))   # simulated contacts interpenetrate
    assert rests_on(sunk, cube, table, 0.005)
    off_edge = make_pose([0.41, 0.0, 0.0215], _yaw(0))
    assert support_gap_m(off_edge, cube, table) is None


def test_tilted_box_and_cylinder_on_a_plate():
    cube = Shape('box', (0.02, 0.02, 0.02))
    tilted = make_pose([0, 0, 0.02 * math.sqrt(2)], _roll(45))   # resting on an edge
    assert rests_on(tilted, cube, SupportSurface('t', 0.3, 0.3), 1e-6)
    can = Shape('cylinder', (0.03, 0.06))
    plate = SupportSurface('plate', 0.1, 0.1, top_z_m=0.01)       # the plate's top is 1 cm above its frame
    upright = make_pose([0, 0, 0.01 + 0.06], _yaw(0))
    lying = make_pose([0, 0, 0.01 + 0.03], _roll(90))
    assert rests_on(upright, can, plate, 1e-6) and rests_on(lying, can, plate, 1e-6)
    assert not rests_on(make_pose([0, 0, 0.01 + 0.03], _yaw(0)), can, plate, 0.005)   # upright, half sunk
    ball = Shape('sphere', (0.05,))
    assert support_gap_m(make_pose([0, 0, 0.07], _yaw(0)), ball, plate) == pytest.approx(0.01)


def test_shape_rejects_bad_dimensions():
    with pytest.raises(ValueError, match='box: expected 3'):
        Shape('box', (0.1, 0.1))
    with pytest.raises(ValueError, match='kind'):
        Shape('cone', (0.1,))


def _stack_grounding():
    cfg = TfConfig('world', 'hand', objects={'cube_a': 'cube_a', 'cube_b': 'cube_b'},
                   supports={'table': SupportSurface('table', 0.4, 0.4, 0.0),
                             'cube_b': SupportSurface('cube_b', 0.025, 0.025, 0.025)},
                   shapes={'cube_a': Shape('box', (0.02, 0.02, 0.02)), 'cube_b': Shape('box', (0.025,) * 3)},
                   support_gap_m=0.005)
    g = TfGrounding(cfg)
    g.update(0.0, [('world', 'table', [0, 0, 0.8], _yaw(0))], static=True)
    return g


def test_object_on_another_object_and_never_on_itself():
    g = _stack_grounding()
    # cube_b on the table, cube_a on cube_b: both frames are the bodies' centres.
    g.update(0.0, [('world', 'cube_b', [0, 0, 0.825], _yaw(0)), ('world', 'cube_a', [0.01, 0, 0.87], _yaw(10)),
                   ('world', 'hand', [0, 0, 1.2], _yaw(0))])
    p = g.evaluate(0.0, {'cube_a': False, 'cube_b': False})
    assert p['object_supported_cube_a'] is True and p['object_supported_cube_b'] is True
    # Mid-air: cube_b lifted 10 cm; it is not its own support, and cube_a falls with it.
    g.update(0.05, [('world', 'cube_b', [0, 0, 0.925], _yaw(0)), ('world', 'cube_a', [0.3, 0, 1.0], _yaw(0)),
                    ('world', 'hand', [0, 0, 1.2], _yaw(0))])
    p = g.evaluate(0.05, {'cube_a': False, 'cube_b': False})
    assert p['object_supported_cube_b'] is False and p['object_supported_cube_a'] is False


def test_robot_config_shapes_and_roles(tmp_path):
    text = (REPO / 'config' / 'robots' / 'TEMPLATE.yaml').read_text()
    text = text.replace("cup: {type: cup, bodies: [cup], frame: cup, grasp_targets: [tray], shape: {cylinder: [0.04, 0.05]}}",
                        "cup: {type: cup, bodies: [cup], frame: cup, shape: {cylinder: [0.04, 0.05]}}\n"
                        "  block: {type: cube, bodies: [block], shape: {box: [0.03, 0.03, 0.03]}, roles: [support]}")
    path = tmp_path / 'robot.yaml'
    path.write_text(text)
    cfg = load_robot_config(path)
    assert cfg.tf.shapes['cup'] == Shape('cylinder', (0.04, 0.05))
    assert cfg.tf.supports['block'] == SupportSurface('block', 0.03, 0.03, 0.03)   # top from the shape
    assert cfg.tf.supports['tray'] == SupportSurface('tray', 0.2, 0.15, 0.0)       # legacy: frame at the top
    path.write_text(text.replace('{box: [0.03, 0.03, 0.03]}', '{box: [0.03, 0.03]}'))
    with pytest.raises(SpecError, match=r'robot.yaml:\d+: entities.block.shape: .*box'):
        load_robot_config(path)


# --------------------------------------------------------- gripper calibration
def test_gripper_calibration_sign_and_range():
    # robosuite's Panda: finger_joint1 runs 0 → +0.04, finger_joint2 0 → -0.04 as the gripper opens.
    cfg = JointConfig(['j1'], ['f1', 'f2'], gripper_calibration={'f2': GripperCalibration(sign=-1.0)})
    g = JointStateGrounding(cfg)
    g.update(0.0, ['j1', 'f1', 'f2'], [0.0, 0.04, -0.04])
    p = g.evaluate(0.0)
    assert p['gripper_open'] is True and p['gripper_closed'] is False
    g.update(0.05, ['j1', 'f1', 'f2'], [0.0, 0.01, -0.01])
    p = g.evaluate(0.05)
    assert p['gripper_closed'] is True and p['gripper_closing'] is True and p['gripper_opening'] is False
    uncal = JointStateGrounding(JointConfig(['j1'], ['f1', 'f2']))
    uncal.update(0.0, ['j1', 'f1', 'f2'], [0.0, 0.04, -0.04])
    assert uncal.evaluate(0.0)['gripper_open'] is False        # the sign error this fixes
    cal = GripperCalibration.from_range(closed=0.8, opened=0.0)  # a revolute gripper: 0.8 rad closed, 0 open
    assert cal.sign * cal.scale * (0.0 - cal.offset) == pytest.approx(0.04)
    assert cal.sign * cal.scale * (0.8 - cal.offset) == pytest.approx(0.0)


def test_gripper_calibration_in_config(tmp_path):
    text = (REPO / 'config' / 'robots' / 'TEMPLATE.yaml').read_text()
    path = tmp_path / 'robot.yaml'
    path.write_text(text.replace("  gripper: [finger_joint]     # finger joint positions in metres (0 = closed)",
                                 "  gripper: [finger_joint]\n  gripper_calibration: {finger_joint: {closed: 0.8, open: 0.0}}"))
    cfg = load_robot_config(path)
    assert cfg.joints.gripper_calibration['finger_joint'].sign == -1.0
    path.write_text(text.replace("  gripper: [finger_joint]     # finger joint positions in metres (0 = closed)",
                                 "  gripper: [finger_joint]\n  gripper_calibration: {other: {sign: -1}}"))
    with pytest.raises(SpecError, match="gripper_calibration.other: not a gripper joint \\(finger_joint\\)"):
        load_robot_config(path)


# ------------------------------------------------------------ finger closure
def _contacts(require: bool) -> ContactGrounding:
    return ContactGrounding(ContactConfig({'link'}, {'lf', 'rf'}, {'cube_g': 'cube', 'table_g': 'table'},
                                          movable={'cube'}, graspable={'cube'}, require_fingers_closed=require))


def test_grasp_needs_closed_fingers():
    touching = [ContactSample('lf', 'cube_g', 1.0), ContactSample('rf', 'cube_g', 1.0)]
    g = _contacts(True)
    g.update(0.0, touching)
    assert g.evaluate(0.0, True)['object_grasped_raw_cube'] is True
    assert g.evaluate(0.0, False)['object_grasped_raw_cube'] is False       # open fingers brushing the cube
    assert g.evaluate(0.0, None)['object_grasped_raw_cube'] is None         # closure unknown: unknown
    g.update(0.05, touching[:1])
    assert g.evaluate(0.05, None)['object_grasped_raw_cube'] is False       # one finger: no grasp either way
    legacy = _contacts(False)
    legacy.update(0.0, touching)
    assert legacy.evaluate(0.0)['object_grasped_raw_cube'] is True


def test_slip_reference_survives_a_one_frame_dropout():
    cfg = TfConfig('world', 'hand', objects={'cube': 'cube'}, track=EXACT)
    g = TfGrounding(cfg)

    def frame(t, cube_x, grasped):
        g.update(t, [('world', 'cube', [cube_x, 0, 1.0], _yaw(0)), ('world', 'hand', [0, 0, 1.0], _yaw(0))])
        return g.evaluate(t, {'cube': grasped})['object_sync_cube']

    assert frame(0.00, 0.00, True) is True
    assert frame(0.05, 0.02, True) is True          # 2 cm slip
    assert frame(0.10, 0.02, False) is True         # one frame without finger contact
    assert frame(0.15, 0.04, True) is False         # 4 cm from the grasp onset: still slipping
    assert frame(0.20, 0.04, False) is True
    assert frame(0.25, 0.04, False) is True         # two frames: the grasp really ended
    assert frame(0.30, 0.05, True) is True          # a new grasp, a new reference


EXACT = TrackConfig(position_noise_m=0.0, orientation_noise_rad=0.0)
"""Poses as a simulator gives them (object detections: test_grounding_perception.py)."""


# ------------------------------------------------------------- the suite
def _instance(name):
    iset = instantiate(SUITE, ONTO, SCENE, only=[name])
    assert len(iset.instances) == 1
    return iset


# name → (violating signals, close non-violating signals, first violating frame)
PHYSICAL_CASES = {
    # A grasped mug leaves the gripper in mid-air (frame 14) vs. resting on the table.
    'release_only_over_support': (
        {'object_grasped_raw_mug': O(12) + Z(8), 'object_left_gripper_mug': Z(14) + O(6)},
        {'object_grasped_raw_mug': O(12) + Z(8), 'object_left_gripper_mug': Z(14) + O(6),
         'object_supported_mug': Z(13) + O(7)}, 14),
    # Grasped (debounced from frame 4), on the table and moving for 12 frames vs. 7 (a set-down).
    'no_dragging_on_support': (
        {'object_grasped_raw_mug': O(30), 'object_supported_mug': Z(10) + O(20),
         'object_sliding_mug': Z(10) + O(12) + Z(8)},
        {'object_grasped_raw_mug': O(30), 'object_supported_mug': Z(10) + O(20),
         'object_sliding_mug': Z(10) + O(7) + Z(13)}, 17),
    'no_overload_while_grasping': (
        {'object_grasped_raw_mug': O(20), 'contact_force_over_threshold': Z(8) + O(3) + Z(9)},
        {'object_grasped_raw_mug': O(20), 'contact_force_over_threshold': Z(8) + O(2) + Z(10)}, 10),
}


def test_physical_suite_loads_alone_and_beside_safemanip():
    alone = load_suite(PROPS / 'physical.yaml')
    assert {p.name for p in alone.properties} == set(PHYSICAL_CASES)
    assert {p.name for p in SUITE.properties} >= set(PHYSICAL_CASES) | {'no_forbidden_contact'}


def test_shared_names_must_agree(tmp_path):
    other = tmp_path / 'other.yaml'
    other.write_text((PROPS / 'physical.yaml').read_text().replace(
        'object_grasped_{object}: debounce(object_grasped_raw_{object}, 5)',
        'object_grasped_{object}: debounce(object_grasped_raw_{object}, 3)'))
    with pytest.raises(SpecError, match=r"derived.object_grasped_\{object\}: name already used .*debounce"):
        load_suite([PROPS / 'safemanip.yaml', other])


@pytest.mark.parametrize('name', sorted(PHYSICAL_CASES))
def test_physical_property_violated_and_satisfied(name):
    violating, satisfying, frame = PHYSICAL_CASES[name]
    iset = _instance(name)
    bad = run_signals(iset, violating).instances[0]
    assert bad.violations >= 1 and bad.triggers >= 1, bad
    assert bad.episodes[0].start == frame, bad.episodes
    assert run_live(iset, violating).instances[0].to_dict() == bad.to_dict()
    good = run_signals(iset, satisfying).instances[0]
    assert good.violations == 0 and good.triggers >= 1 and not good.pending, good


# ------------------------------------------------- unsupported, not false
def test_ungrounded_properties_are_unsupported_not_false():
    iset = build_instances([str(PROPS / 'safemanip.yaml'), str(PROPS / 'physical.yaml')],
                           robot_config=str(REPO / 'config' / 'robots' / 'panda_demo.yaml'))
    run = {i.instance for i in iset.instances}
    # Press onsets and preconditions have no source on this robot; pick and place preconditions come from TF.
    assert 'press_preconditions_safe' not in run
    assert iset.unsupported['press_preconditions_safe'] == ('preconditions_satisfied_press', 'press_approach')
    assert {'pick_preconditions_safe', 'place_preconditions_safe[object=mug]'} <= run
    assert iset.unsupported['no_overload_while_grasping[object=mug]'] == ('contact_force_over_threshold',)
    assert {'no_forbidden_contact', 'release_only_over_support[object=mug]', 'no_dragging_on_support[object=mug]',
            'raw_contact_blocks_clean_until_sanitized[source=chicken]'} <= run    # sanitized is optional
    assert 'preconditions_satisfied_press' not in iset.predicates
    with pytest.raises(SpecError, match=r'--strict: \d+ properties .*press_preconditions_safe needs '
                                        r'preconditions_satisfied_press'):
        build_instances([str(PROPS / 'safemanip.yaml')], robot_config=str(REPO / 'config' / 'robots' /
                                                                          'panda_demo.yaml'), strict=True)
    with pytest.raises(SpecError, match='--scene .* and --config .*give one of them'):
        build_instances([str(PROPS / 'safemanip.yaml')], scene=str(REPO / 'config' / 'scenes' / 'kitchen_demo.yaml'),
                        robot_config=str(REPO / 'config' / 'robots' / 'panda_demo.yaml'))


def _cli(*args):
    return subprocess.run([sys.executable, '-m', 'safemanip_ros.cli.main', *args], capture_output=True, text=True,
                          timeout=300)


def test_audit_lists_unsupported_properties(tmp_path):
    trace = tmp_path / 'trace.jsonl'
    trace.write_text(''.join(json.dumps({'forbidden_contact': False}) + '\n'
                             for t in range(5)))
    robot = str(REPO / 'config' / 'robots' / 'panda_demo.yaml')
    proc = _cli('audit', str(trace), '--config', robot, '--out', str(tmp_path / 'out'), '--quiet',
                '--allow-unknown-predicates')
    assert proc.returncode == 0, proc.stderr
    assert 'unsupported: press_preconditions_safe not run' in proc.stderr
    report = json.loads((tmp_path / 'out' / 'report.json').read_text())
    assert report['unsupported']['press_preconditions_safe'] == ['preconditions_satisfied_press', 'press_approach']
    assert 'press_preconditions_safe' not in report['properties']
    assert 'press_preconditions_safe,preconditions_satisfied_press press_approach' in \
        (tmp_path / 'out' / 'unsupported.csv').read_text()
    html = (tmp_path / 'out' / 'report.html').read_text()
    assert html.index('unsupported, not false') < html.index('<table')
    proc = _cli('audit', str(trace), '--config', robot, '--out', str(tmp_path / 'out2'), '--quiet', '--strict')
    assert proc.returncode == 2 and '--strict' in proc.stderr, proc.stderr
    proc = _cli('audit', str(trace), '--config', robot, '--scene', str(REPO / 'config' / 'scenes' /
                                                                         'kitchen_demo.yaml'),
                '--out', str(tmp_path / 'out3'), '--quiet')
    assert proc.returncode == 2 and '--scene' in proc.stderr and '--config' in proc.stderr, proc.stderr


def test_grounded_cube_on_table_end_to_end(tmp_path):
    """A robot configuration with shapes grounds support from the cube's bottom."""
    text = (REPO / 'config' / 'robots' / 'TEMPLATE.yaml').read_text().replace(
        "cup: {type: cup, bodies: [cup], frame: cup, grasp_targets: [tray], shape: {cylinder: [0.04, 0.05]}}",
        "cup: {type: cup, bodies: [cup], frame: cup, shape: {box: [0.0215, 0.0215, 0.0215]}}").replace(
        "tray: {type: counter, bodies: [tray], frame: tray, support_half_extents_m: [0.2, 0.15]}   # legacy: frame = top centre",
        "tray: {type: counter, bodies: [tray], frame: tray, shape: {box: [0.4, 0.4, 0.025]}, roles: [support]}")
    path = tmp_path / 'robot.yaml'
    path.write_text(text)
    cfg = load_robot_config(path)
    g = TfGrounding(cfg.tf)
    g.update(0.0, [('world', 'tray', [0, 0, 0.775], _yaw(0))], static=True)      # table centre: top at 0.8
    g.update(0.0, [('world', 'cup', [0, 0, 0.8215], _yaw(0)), ('world', 'tool0', [0, 0, 1.0], _yaw(0))])
    assert g.evaluate(0.0, {'cup': False})['object_supported_cup'] is True
    assert np.isclose(cfg.tf.supports['tray'].top_z_m, 0.025)


def test_fixture_interior_grounds_reach_in(tmp_path):
    """``fixtures.<f>.interior`` grounds reach_in_<f> / object_reach_in_<f>, so
    SafeManip's enclosure-access properties run instead of being unsupported."""
    text = (REPO / 'config' / 'robots' / 'TEMPLATE.yaml').read_text().replace(
        "tray: {type: counter, bodies: [tray], frame: tray, support_half_extents_m: [0.2, 0.15]}   # legacy: frame = top centre",
        "tray: {type: counter, bodies: [tray], frame: tray, support_half_extents_m: [0.2, 0.15]}\n"
        "  door: {type: door, bodies: [door_panel], frame: door_panel}").replace(
        "fixtures: {}",
        "fixtures:\n  door: {joint: door_hinge, closed: 0.0, open: 0.4, interior: [world, [-0.4, -0.75, 0.85], "
        "[0.0, -0.38, 1.4]]}")
    path = tmp_path / 'robot.yaml'
    path.write_text(text)
    cfg = load_robot_config(path)
    g = TfGrounding(cfg.tf)
    g.update(0.0, [('world', 'tool0', [-0.2, -0.5, 1.0], _yaw(0)), ('world', 'cup', [-0.2, -0.5, 0.95], _yaw(0))])
    p = g.evaluate(0.0, {'cup': True})
    assert p['reach_in_door'] is True and p['object_reach_in_door'] is True
    assert g.evaluate(0.0, {'cup': False})['object_reach_in_door'] is False
    assert g.evaluate(0.0, {'cup': None})['object_reach_in_door'] is None
    iset = build_instances([str(PROPS / 'safemanip.yaml')], robot_config=str(path))
    assert 'reach_in_fixture_only_when_fully_open[fixture=door]' in {i.instance for i in iset.instances}
    path.write_text(text.replace('interior: [world, [-0.4, -0.75, 0.85], [0.0, -0.38, 1.4]]',
                                 'interior: [world, [-0.4, -0.75], [0.0, -0.38, 1.4]]'))
    with pytest.raises(SpecError, match=r'fixtures.door.interior: its corners must be \[xmin, ymin, zmin\]'):
        load_robot_config(path)


def test_sync_stays_known_when_only_the_grasp_is_unknown():
    """sync = not grasped or slip under the limits: an unknown grasp sample in
    an ongoing grasp without slip leaves sync true, not unknown (which the
    suite would read as false: a false alarm seen live under load)."""
    g = TfGrounding(TfConfig('world', 'hand', objects={'cube': 'cube'}, track=EXACT))

    def frame(t, cube_x, grasped):
        g.update(t, [('world', 'cube', [cube_x, 0, 1.0], _yaw(0)), ('world', 'hand', [0, 0, 1.0], _yaw(0))])
        return g.evaluate(t, {'cube': grasped})['object_sync_cube']

    assert frame(0.00, 0.0, True) is True
    assert frame(0.05, 0.001, None) is True          # no slip: true whether grasped or not
    assert frame(0.10, 0.05, None) is None           # slipped: false if grasped, true if not -> unknown
    assert frame(0.15, 0.05, True) is False
    fresh = TfGrounding(TfConfig('world', 'hand', objects={'cube': 'cube'}, track=EXACT))
    fresh.update(0.0, [('world', 'cube', [0, 0, 1.0], _yaw(0)), ('world', 'hand', [0, 0, 1.0], _yaw(0))])
    assert fresh.evaluate(0.0, {'cube': None})['object_sync_cube'] is None    # no reference: unknown
