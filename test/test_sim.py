"""The robosuite bridge's world readout agrees with robosuite's own
observations; physics episodes become bags with ground truth that the
shipped configuration audits faithfully."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import Reader

from safemanip_ros.audit.types import typestore
from safemanip_ros.grounding.config import load_robot_config
from safemanip_ros.grounding.messages import GroundingSet
from safemanip_ros.sim.episodes import EpisodeSpec, read_truth, run_episode
from safemanip_ros.sim.faithfulness import format_table, score
from safemanip_ros.sim.messages import TOPICS
from safemanip_ros.sim.policies import EEF_BODY, LiftPolicy
from safemanip_ros.sim.world import SimWorld

REPO = Path(__file__).resolve().parents[1]
ROBOT = REPO / 'config' / 'robots' / 'robosuite_lift.yaml'


@pytest.fixture(scope='module')
def world():
    w = SimWorld('Lift', seed=3)
    yield w
    w.close()


def test_world_agrees_with_robosuite_observations(world):
    """Joints, poses and the grasp from contacts, step by step over a clean pick."""
    sample = world.reset()
    policy = LiftPolicy('none', np.random.default_rng(3), cube_half_m=float(world.env.cube.size[2]))
    grounding = GroundingSet(load_robot_config(ROBOT), False, False)
    gripper = world.env.robots[0].gripper['right']
    grasps = agree = 0
    for _ in range(150):
        obs = world.obs
        joints = dict(zip(sample.joint_names, sample.joint_positions))
        assert np.allclose([joints[f'robot0_joint{i}'] for i in range(1, 8)], obs['robot0_joint_pos'], atol=1e-12)
        assert np.allclose([joints['gripper0_right_finger_joint1'], joints['gripper0_right_finger_joint2']],
                           obs['robot0_gripper_qpos'], atol=1e-12)
        assert np.allclose(sample.poses['cube_main'][0], obs['cube_pos'], atol=1e-12)
        assert np.allclose(sample.poses['cube_main'][1], obs['cube_quat'], atol=1e-12)     # both x, y, z, w
        assert np.allclose(sample.poses[EEF_BODY][0], obs['robot0_eef_pos'], atol=1e-12)
        # Our grasp test from published contacts vs robosuite's own _check_grasp (finger pads on the cube).
        grounding.contacts.update(sample.stamp_s, _contact_samples(sample))
        ours = grounding.contacts.evaluate(sample.stamp_s, True)['object_grasped_raw_cube']
        theirs = bool(world.env._check_grasp(gripper=gripper, object_geoms=world.env.cube))
        grasps += theirs
        agree += ours == theirs
        sample = world.step(policy.act(sample))
    assert grasps >= 30, 'the scripted pick never grasped the cube'
    assert agree == 150


def _contact_samples(sample):
    from safemanip_ros.grounding import ContactSample
    return [ContactSample(a, b, f) for a, b, f in sample.contacts]


def test_episode_bag_and_truth(world, tmp_path):
    truth = run_episode(world, EpisodeSpec('Lift', 'midair_drop', 5), tmp_path)
    bag = tmp_path / 'lift_midair_drop_005'
    assert read_truth(bag) == json.loads((bag / 'truth.json').read_text()) == truth.to_dict()
    assert [e.event for e in truth.events] == ['midair_drop']
    ts = typestore()
    with Reader(bag) as reader:
        topics = {c.topic: c.msgtype for c in reader.connections}
        assert topics == {t: m for t, m in TOPICS.items()}
        counts = {c.topic: c.msgcount for c in reader.connections}
        assert counts['/joint_states'] == counts['/tf'] == counts['/contacts'] == truth.frames
        conn = next(c for c in reader.connections if c.topic == '/tf_static')
        static = ts.deserialize_cdr(next(reader.messages(connections=[conn]))[2], conn.msgtype)
        assert 'table' in {t.child_frame_id for t in static.transforms}


def test_faithfulness_on_a_few_episodes(world, tmp_path):
    """A clean episode, a drop and a drag: the shipped configuration flags
    exactly the faulty ones, with the property meant for each."""
    from safemanip_ros.audit.engine import AuditConfig, run_audit
    from safemanip_ros.audit.report import build_report
    from safemanip_ros.resources import default_suites
    bags = []
    for fault, seed in (('none', 11), ('midair_drop', 12), ('drag', 13)):
        run_episode(world, EpisodeSpec('Lift', fault, seed), tmp_path)
        bags.append(tmp_path / EpisodeSpec('Lift', fault, seed).name)
    cfg = AuditConfig(tuple(str(p) for p in default_suites()), robot_config=str(ROBOT))
    results, skipped = run_audit([str(b) for b in bags], cfg, tmp_path / 'audit', 1)
    assert not skipped
    result = score(build_report(results, skipped, {'reduction': 'any'}), bags)
    table = format_table(result)
    assert result['specificity'] == 1.0 and result['sensitivity'] == 1.0, table
    props = result['properties']
    assert props['release_only_over_support']['detected'] == 1, table
    assert props['no_dragging_on_support']['detected'] == 1, table
    assert props['no_dragging_on_support']['median_latency_frames'] <= 9, table
