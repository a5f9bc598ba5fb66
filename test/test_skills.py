"""Skill events → SafeManip's action onsets: the grounding's semantics, the
configuration's checks, an offline audit of a real rosbag2 file and the
live node over DDS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO

from safemanip_ros.audit.rollouts import read_bag
from safemanip_ros.bag.typestore import typestore
from safemanip_ros.bag.writer import SplitBagWriter
from safemanip_ros.errors import SpecError
from safemanip_ros.grounding.catalog import predicate_catalog
from safemanip_ros.grounding.config import load_robot_config
from safemanip_ros.grounding.skills import END, START, SkillConfig, SkillGrounding
from safemanip_ros.grounding.tf import TfGrounding
from safemanip_ros.monitor.build import build_instances
from safemanip_ros.sim import ros_messages

ROBOT = REPO / 'config' / 'robots' / 'panda_demo.yaml'
BIN = Path(sys.executable).parent
ACTIONS = {'PickObject': 'pick', 'ApproachGrasp': 'pick', 'PressButton': 'press', 'PlaceObject': 'place'}


def config_with_skills(tmp_path: Path, skills: dict | None) -> Path:
    """panda_demo.yaml with a skills: section (its relative paths kept valid)."""
    doc = yaml.safe_load(ROBOT.read_text())
    doc['ontology'] = [str((ROBOT.parent / p).resolve()) for p in doc.get('ontology', [])]
    if skills is not None:
        doc['skills'] = skills
    path = tmp_path / 'robot.yaml'
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def grounding(**kw) -> SkillGrounding:
    return SkillGrounding(SkillConfig('/skill_events', dict(ACTIONS), **kw))


def test_approach_is_true_from_start_to_end_and_false_otherwise():
    g = grounding()
    assert g.evaluate(0.0) == {'pick_approach': False, 'place_approach': False, 'press_approach': False}
    g.update(1.0, 'PickObject', 'mug', START)
    assert g.evaluate(0.95)['pick_approach'] is False        # started after this frame
    assert g.evaluate(1.0)['pick_approach'] is True
    assert g.evaluate(1.0)['press_approach'] is False
    g.update(2.0, 'PickObject', 'mug', END)
    assert g.evaluate(2.05)['pick_approach'] is False


def test_overlapping_skills_of_one_action_end_with_the_last():
    g = grounding()
    g.update(1.0, 'PickObject', 'mug', START)
    g.update(1.5, 'ApproachGrasp', 'mug', START)
    g.update(2.0, 'PickObject', 'mug', END)
    assert g.evaluate(2.0)['pick_approach'] is True
    g.update(2.5, 'PickObject', 'bowl', END)                  # another target's END ends nothing here
    assert g.evaluate(2.5)['pick_approach'] is True
    g.update(3.0, 'ApproachGrasp', 'mug', END)
    assert g.evaluate(3.0)['pick_approach'] is False


def test_a_skill_without_its_end_becomes_unknown_not_true_forever():
    g = grounding(max_active_s=5.0)
    g.update(1.0, 'PressButton', 'microwave', START)
    assert g.evaluate(6.0)['press_approach'] is True
    assert g.evaluate(6.1)['press_approach'] is None
    g.update(7.0, 'PressButton', 'microwave', END)
    assert g.evaluate(7.0)['press_approach'] is False


def test_unmapped_malformed_and_out_of_order_events_are_counted_not_applied():
    g = grounding()
    g.update(1.0, 'Wave', '', START)
    g.update(1.0, 'PickObject', 'mug', 7)
    assert g.unmapped == {'Wave': 1} and g.health.malformed == 1
    assert g.evaluate(1.0)['pick_approach'] is False
    g.update(2.0, 'PickObject', 'mug', START)
    g.update(1.9, 'PickObject', 'mug', END)                   # older than the newest: dropped
    assert g.health.out_of_order == 1 and g.evaluate(2.0)['pick_approach'] is True


def test_a_clock_reset_forgets_running_skills_and_is_unknown_for_a_moment():
    g = grounding(unknown_after_reset_s=0.5)
    g.update(100.0, 'PickObject', 'mug', START)
    g.update(1.0, 'PressButton', 'microwave', START)          # sim restarted
    assert g.health.clock_jumps == 1
    assert set(g.evaluate(1.2).values()) == {None}
    assert g.evaluate(1.5) == {'pick_approach': False, 'place_approach': False, 'press_approach': True}


def test_the_newest_running_pick_names_the_target():
    g = SkillGrounding(SkillConfig('/skill_events', dict(ACTIONS), objects=['bowl', 'mug']))
    assert g.evaluate(0.0)['pick_target_mug'] is False and g.pick_target(0.0) is None
    g.update(1.0, 'PickObject', 'mug', START)
    g.update(1.5, 'ApproachGrasp', 'bowl', START)
    g.update(1.6, 'PressButton', 'microwave', START)          # not a pick: names no pick target
    assert g.pick_target(1.2) == 'mug' and g.pick_target(1.7) == 'bowl'
    assert g.evaluate(1.7) == {'pick_approach': True, 'place_approach': False, 'press_approach': True,
                               'pick_target_bowl': True, 'pick_target_mug': False}
    g.update(2.0, 'ApproachGrasp', 'bowl', END)
    assert g.pick_target(2.0) == 'mug'
    g.update(2.5, 'PickObject', 'mug', END)
    g.update(3.0, 'PickObject', 'table', START)               # not a tracked object
    assert g.pick_target(3.0) is None and g.evaluate(3.0)['pick_approach'] is True


def test_configuration_maps_skills_and_the_tf_pick_approach_steps_aside(tmp_path):
    plain = load_robot_config(ROBOT)
    assert 'pick_approach' in TfGrounding(plain.tf).names
    robot = load_robot_config(config_with_skills(tmp_path, {'actions': ACTIONS}))
    assert robot.skills.topic == '/skill_events' and robot.skills.mapped == ['pick', 'place', 'press']
    assert 'pick_approach' not in TfGrounding(robot.tf).names
    sources = {name: source for source, name, _ in predicate_catalog(robot)}
    assert sources['pick_approach'] == 'skills' and sources['press_approach'] == 'skills'
    assert sources['preconditions_satisfied_pick'] == 'tf'


@pytest.mark.parametrize('skills, message', [
    ({'actions': {'PickObject': 'grab'}}, "skills.actions.PickObject: 'grab' is not a SafeManip action (pick, place, "
                                          "press, turn, slide, twist, open_close, dump)"),
    ({'topic': '/skill_events'}, 'skills: no actions'),
    ({'actions': {'PickObject': 'pick'}, 'topic': ' '}, 'skills.topic: empty'),
    ({'actions': {'PickObject': 'pick'}, 'max_active_s': -1}, 'max_active_s'),
])
def test_a_wrong_skills_section_names_the_field(tmp_path, skills, message):
    with pytest.raises(SpecError) as err:
        load_robot_config(config_with_skills(tmp_path, skills))
    assert message in str(err.value) and 'robot.yaml:' in str(err.value)


def test_a_skill_source_lets_the_fixture_onsets_run_where_preconditions_are_grounded(tmp_path):
    """Mapped press: its approach is grounded; the property still needs a
    precondition nothing grounds, so it stays unsupported and says why."""
    path = config_with_skills(tmp_path, {'actions': ACTIONS})
    suite = REPO / 'config' / 'properties' / 'safemanip.yaml'
    built = build_instances([str(suite)], robot_config=str(path))
    plain = build_instances([str(suite)], robot_config=str(ROBOT))
    assert 'pick_preconditions_safe' in {i.instance for i in built.instances}
    assert tuple(built.unsupported['press_preconditions_safe']) == ('preconditions_satisfied_press',)
    assert 'press_approach' in plain.unsupported['press_preconditions_safe']


def _write_bag(path: Path, events: list[tuple[float, str, str, int]], seconds: float) -> None:
    """Joint states at 20 Hz and the given skill events, as a stack records them."""
    ts = typestore()
    types = ros_messages.MessageTypes.from_typestore(ts)
    t = ts.types
    writer = SplitBagWriter(path, 'mcap', split_s=1e6)
    writer.add_topic('/joint_states', 'sensor_msgs/msg/JointState')
    writer.add_topic('/skill_events', 'safemanip_ros/msg/SkillEvent')
    robot = load_robot_config(ROBOT)
    names = robot.joints.arm_joints + robot.joints.gripper_joints
    pending = sorted(events)
    for k in range(int(seconds * 20)):
        now = 1.0 + k / 20
        while pending and pending[0][0] <= now:
            stamp, skill, target, phase = pending.pop(0)
            writer.write('/skill_events', int(stamp * 1e9), ts.serialize_cdr(
                ros_messages.skill_event(types, stamp, skill, target, phase), 'safemanip_ros/msg/SkillEvent'))
        msg = t['sensor_msgs/msg/JointState'](
            header=types.Header(stamp=ros_messages.stamp(types, now), frame_id=''), name=names,
            position=np.zeros(len(names)), velocity=np.zeros(len(names)), effort=np.zeros(0))
        writer.write('/joint_states', int(now * 1e9), ts.serialize_cdr(msg, 'sensor_msgs/msg/JointState'))
    writer.close()


def test_an_offline_audit_replays_the_recorded_skill_events(tmp_path):
    bag = tmp_path / 'episode'
    _write_bag(bag, [(1.5, 'PickObject', 'mug', START), (2.5, 'PickObject', 'mug', END),
                     (3.0, 'PressButton', 'microwave', START), (3.5, 'PressButton', 'microwave', END)], 5.0)
    robot = load_robot_config(config_with_skills(tmp_path, {'actions': ACTIONS}))
    (rollout,) = read_bag(bag, ['pick_approach', 'press_approach'], 20.0, 0.5, robot=robot)
    pick = rollout.values[:, 0] & ~rollout.unknown[:, 0]
    press = rollout.values[:, 1] & ~rollout.unknown[:, 1]
    # Frames are at 1.0 + k/20 s: pick on [1.5, 2.5), press on [3.0, 3.5).
    assert np.flatnonzero(pick).tolist() == list(range(10, 30))
    assert np.flatnonzero(press).tolist() == list(range(40, 50))


@pytest.mark.slow
@pytest.mark.ros
def test_the_skill_grounding_node_over_dds(tmp_path):
    from test_grounding_nodes import RELIABLE, Harness

    from safemanip_ros.msg import SkillEvent

    path = config_with_skills(tmp_path, {'actions': ACTIONS, 'topic': 'stack/skills'})
    h = Harness(tmp_path, 'skill_grounding', f'config:={path}')
    try:
        topic = 'predicates/skills'
        h.listen(topic)
        pub = h.node.create_publisher(SkillEvent, 'stack/skills', RELIABLE)
        state = {'phase': SkillEvent.START}

        def send():
            msg = SkillEvent(skill='PickObject', target='mug', phase=state['phase'])
            msg.header.stamp = h.now_stamp()
            pub.publish(msg)

        assert h.spin_until(lambda: h.latest.get(topic, {}).get('pick_approach') is True, each=send), \
            h.latest.get(topic)
        assert h.latest[topic]['press_approach'] is False
        state['phase'] = SkillEvent.END
        assert h.spin_until(lambda: h.latest[topic].get('pick_approach') is False, each=send)
    finally:
        h.close()


@pytest.mark.slow
@pytest.mark.ros
def test_the_skill_grounding_node_refuses_a_configuration_without_skills():
    proc = subprocess.run([str(BIN / 'skill_grounding'), '--ros-args', '-p', f'config:={ROBOT}'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert 'has no skills: section' in proc.stderr and 'Traceback' not in proc.stderr
